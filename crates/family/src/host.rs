//! How a binary hosts each run: inline on the calling thread (the default), or by a
//! host a family gives, called once per run with the run to make. Real code needs one
//! (reconsim-kube's `intercept::host`): std seeds a thread's `HashMap` keys once, when
//! the thread makes its first map, and counts up from them for every map after, so a
//! run's maps follow its seed only on a thread of its own, seeded first.

/// Makes the run `run` for `seed`, returning when it is done: on a thread of its own
/// with its per-thread generators seeded, or however the family needs it hosted.
pub type RunHost = fn(seed: u64, run: &mut (dyn FnMut() + Send));

/// A value moved to the host's thread and back. The caller blocks until the host has
/// run it and its thread is joined, so the value is touched by one thread at a time,
/// as in a plain call on another stack; nothing of the run outlives the host's thread
/// but what comes back in this.
struct Handoff<T>(T);

// SAFETY: see above. The worlds that cross (their components hold `Rc`s and futures
// that are not `Send`) cross whole: every clone of an `Rc` in them goes with them, and
// no thread-local of the host's thread is referenced after it ends (reconsim-kube's
// scope pointer is cleared when each handler returns).
unsafe impl<T> Send for Handoff<T> {}

/// Call `f` as `host` hosts a run of `seed` (inline without one), and return what it
/// returned.
pub fn hosted<R>(host: Option<RunHost>, seed: u64, f: impl FnOnce() -> R) -> R {
    let Some(host) = host else {
        return f();
    };
    let mut call = Handoff(Some(f));
    let mut out: Handoff<Option<R>> = Handoff(None);
    {
        let call = &mut call;
        let out = &mut out;
        let mut run = move || {
            let f = call.0.take().expect("a host runs each run once");
            out.0 = Some(f());
        };
        host(seed, &mut run);
    }
    out.0.expect("the host ran the run")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn on_a_thread(_seed: u64, run: &mut (dyn FnMut() + Send)) {
        std::thread::scope(|s| {
            s.spawn(run).join().expect("the run does not panic");
        });
    }

    #[test]
    fn a_hosted_call_runs_on_the_hosts_thread_and_returns_its_value() {
        let here = std::thread::current().id();
        let (there, rc) = hosted(Some(on_a_thread), 7, || {
            (std::thread::current().id(), Rc::new(5))
        });
        assert_ne!(here, there);
        assert_eq!(*rc, 5);
        let inline = hosted(None, 7, || std::thread::current().id());
        assert_eq!(inline, here);
    }
}
