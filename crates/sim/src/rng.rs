//! Named random streams, all derived from the run's seed.
//!
//! Each concern (network delays, tie-breaks, fault generation, each process) draws from its
//! own ChaCha8 stream: the key is the run seed, the ChaCha stream number is the stable hash
//! of the concern's name. Streams never share state, so drawing more from one (say, one
//! more fault) leaves every other stream's draws unchanged.

use crate::hash::StableHasher;
use rand::{Rng, SeedableRng};
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

/// A draw in `[lo, lo + span)` as `lo + x % span` of a raw 64-bit draw `x`, the formula
/// every trace hash was made with, without the 64-bit division (20-40 cycles, about 5 %
/// of the kernel's ping-pong): Lemire, Kaser and Kurz's direct remainder ("Faster
/// Remainder by Direct Computation", 2019) with a 128-bit reciprocal, exact for every
/// 64-bit `x`. Built once per range (the network's latency bounds).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UniformSpan {
    lo: u64,
    span: u64,
    /// `ceil(2^128 / span)`; 0 when `span` is 1 (every draw is `lo`).
    reciprocal: u128,
}

impl UniformSpan {
    /// `[lo, hi]`, or `lo` alone when `hi <= lo`.
    pub(crate) fn inclusive(lo: u64, hi: u64) -> Self {
        let span = if hi > lo { hi - lo + 1 } else { 1 };
        let reciprocal = if span == 1 {
            0
        } else {
            u128::MAX / u128::from(span) + 1
        };
        UniformSpan {
            lo,
            span,
            reciprocal,
        }
    }

    /// A value of the range from `rng`: one 64-bit draw, none for a range of one value.
    #[inline]
    pub(crate) fn draw(&self, rng: &mut SimRng) -> u64 {
        if self.span == 1 {
            return self.lo;
        }
        self.pick(rng.next_u64())
    }

    /// `lo + x % span`.
    #[inline]
    pub(crate) fn pick(&self, x: u64) -> u64 {
        if self.span == 1 {
            return self.lo;
        }
        // The fraction x / span in 128-bit fixed point; its product with span, shifted
        // right by 128, is the remainder.
        let frac = self.reciprocal.wrapping_mul(u128::from(x));
        let span = u128::from(self.span);
        let low = (frac as u64 as u128) * span;
        let high = (frac >> 64) * span + (low >> 64);
        self.lo + (high >> 64) as u64
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
    fn a_uniform_span_picks_as_the_remainder_does() {
        let mut rng = Streams::new(3).stream("span");
        let mut ranges = vec![(1, 50), (1, 5), (0, 1), (7, 7), (9, 3), (0, u64::MAX - 1)];
        for _ in 0..200 {
            let lo = rng.next_u64() >> (rng.next_u64() % 64);
            let width = rng.next_u64() >> (rng.next_u64() % 64);
            ranges.push((lo, lo.saturating_add(width).min(u64::MAX - 1)));
        }
        let edges = [
            0,
            1,
            2,
            49,
            50,
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 63) - 1,
        ];
        for (lo, hi) in ranges {
            let u = UniformSpan::inclusive(lo, hi);
            let span = if hi > lo { hi - lo + 1 } else { 1 };
            let mut a = Streams::new(9).stream("draw");
            let mut b = Streams::new(9).stream("draw");
            let drawn = u.draw(&mut a);
            if span == 1 {
                assert_eq!(drawn, lo);
                assert_eq!(
                    a.next_u64(),
                    b.next_u64(),
                    "a range of one value draws nothing"
                );
            } else {
                assert_eq!(drawn, lo + b.next_u64() % span);
            }
            let draws: Vec<u64> = (0..500).map(|_| rng.next_u64()).collect();
            for x in edges.into_iter().chain(draws) {
                assert_eq!(u.pick(x), lo + x % span, "lo {lo} hi {hi} x {x}");
            }
        }
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
