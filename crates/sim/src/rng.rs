//! Named random streams, all derived from the run's seed.
//!
//! Each concern (network delays, tie-breaks, fault generation, each process) draws from its
//! own ChaCha8 stream: the key is the run seed, the ChaCha stream number is the stable hash
//! of the concern's name. Streams never share state, so drawing more from one (say, one
//! more fault) leaves every other stream's draws unchanged.

use crate::hash::StableHasher;
use rand::SeedableRng;
use std::hash::Hasher;

/// The generator every stream uses.
pub type SimRng = rand_chacha::ChaCha8Rng;

/// The factory of a run's streams: every draw of a run comes from a stream named for
/// what draws from it, so a new consumer never shifts another's draws.
///
/// ```
/// use rand::Rng;
/// use reconsim_sim::Streams;
///
/// let mut a = Streams::new(42).stream("network");
/// let mut b = Streams::new(42).stream("network");
/// assert_eq!(a.next_u64(), b.next_u64()); // the same seed and name: the same draws
/// let mut other = Streams::new(42).stream("faults");
/// assert_ne!(a.next_u64(), other.next_u64()); // another name: another stream
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Streams {
    seed: u64,
}

impl Streams {
    pub fn new(seed: u64) -> Self {
        Streams { seed }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The stream named `name`: same (seed, name), same draws, on every machine.
    pub fn stream(&self, name: &str) -> SimRng {
        let mut rng = SimRng::seed_from_u64(self.seed);
        rng.set_stream(stream_number(name));
        rng
    }

    /// A stream named by a name and an index, e.g. ("fault", 3), without formatting.
    pub fn indexed(&self, name: &str, index: u64) -> SimRng {
        let mut h = StableHasher::new();
        h.write(name.as_bytes());
        h.write_u8(0xff);
        h.write_u64(index);
        let mut rng = SimRng::seed_from_u64(self.seed);
        rng.set_stream(h.finish());
        rng
    }
}

fn stream_number(name: &str) -> u64 {
    let mut h = StableHasher::new();
    h.write(name.as_bytes());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn same_seed_and_name_give_same_draws() {
        let a: Vec<u64> = (0..8)
            .map(|_| Streams::new(7).stream("net").next_u64())
            .collect();
        let mut s = Streams::new(7).stream("net");
        let b: Vec<u64> = (0..8).map(|_| s.next_u64()).collect();
        assert_eq!(a[0], b[0]);
        let mut s2 = Streams::new(7).stream("net");
        let c: Vec<u64> = (0..8).map(|_| s2.next_u64()).collect();
        assert_eq!(b, c);
    }

    #[test]
    fn streams_are_independent() {
        let st = Streams::new(1);
        let mut net = st.stream("net");
        let mut faults = st.stream("faults");
        let first_net = net.next_u64();
        // Drawing from another stream does not move this one.
        for _ in 0..100 {
            faults.next_u64();
        }
        let mut net_again = st.stream("net");
        assert_eq!(net_again.next_u64(), first_net);
        assert_ne!(st.stream("net").next_u64(), st.stream("faults").next_u64());
        assert_ne!(
            st.indexed("fault", 1).next_u64(),
            st.indexed("fault", 2).next_u64()
        );
        assert_ne!(Streams::new(2).stream("net").next_u64(), first_net);
    }
}
