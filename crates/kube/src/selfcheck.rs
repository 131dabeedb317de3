//! The determinism self-check, as madsim runs it: the same world twice, compared. Real
//! code brings its own hazards (a std `HashMap`'s iteration order, a `tokio::select!`
//! branch drawn from the runtime's seed, a wall clock), which the kernel cannot rule
//! out the way it does for its own reconcilers; running each seed twice finds them,
//! and names the first event where the two runs part.

use reconsim_sim::{RecordKind, Sim, SimTime, TraceMode};
use reconsim_world::proc::Proc;

/// Where two runs of one world first differ.
#[derive(Debug)]
pub struct Divergence {
    /// The place of the first differing event among the hashed ones (notes aside).
    pub index: usize,
    pub time_ms: u64,
    pub first: String,
    pub second: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "two runs of the same world part at event #{} (t={} ms):\n  first:  {}\n  second: {}",
            self.index, self.time_ms, self.first, self.second
        )
    }
}

fn events(sim: &Sim<Proc>) -> Vec<(u64, String)> {
    sim.trace()
        .records()
        .iter()
        .filter(|r| !matches!(r.kind, RecordKind::Note { .. }))
        .map(|r| (r.time.as_ms(), format!("{:?}", r.kind)))
        .collect()
}

/// Build the world twice with `build` (given the trace mode), run each to `until`, and
/// compare: the trace hash if they agree, else the first event where they part.
pub fn twice(
    build: impl Fn(TraceMode) -> Sim<Proc>,
    until: SimTime,
) -> Result<u64, Box<Divergence>> {
    let run = || {
        let mut sim = build(TraceMode::Full);
        sim.run_until(until);
        sim
    };
    compare(&run(), &run())
}

/// Two finished runs of one world, compared: the trace hash if they agree, else the
/// first event where they part (full traces name it; hash-only traces give the place
/// as the end).
pub fn compare(a: &Sim<Proc>, b: &Sim<Proc>) -> Result<u64, Box<Divergence>> {
    if a.trace().hash() == b.trace().hash() {
        return Ok(a.trace().hash());
    }
    let (ea, eb) = (events(a), events(b));
    let index = ea
        .iter()
        .zip(&eb)
        .position(|(x, y)| x != y)
        .unwrap_or(ea.len().min(eb.len()));
    let shown = |e: &[(u64, String)]| {
        e.get(index)
            .map_or(("the run's end".to_string(), u64::MAX), |(t, s)| {
                (s.clone(), *t)
            })
    };
    let ((first, ta), (second, tb)) = (shown(&ea), shown(&eb));
    Err(Box::new(Divergence {
        index,
        time_ms: ta.min(tb),
        first,
        second,
    }))
}
