//! Virtual time. The kernel owns the only clock; nothing in a run reads the wall clock.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in simulated time, in milliseconds since the start of the run.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_ms(ms: u64) -> Self {
        SimTime(ms)
    }

    pub const fn from_secs(s: u64) -> Self {
        SimTime(s * 1000)
    }

    pub const fn as_ms(self) -> u64 {
        self.0
    }

    /// `self + ms`, saturating at [`SimTime::MAX`] so "never" stays never.
    pub const fn plus_ms(self, ms: u64) -> Self {
        SimTime(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`, zero if `earlier` is later.
    pub const fn since(self, earlier: SimTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Shift by a signed offset (a process clock's skew), clamped at zero.
    pub const fn offset(self, offset_ms: i64) -> Self {
        SimTime(self.0.saturating_add_signed(offset_ms))
    }
}

impl fmt::Display for SimTime {
    /// `431.200s`: seconds with millisecond precision, as people read timelines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_displays() {
        assert_eq!(SimTime::from_secs(2).plus_ms(5), SimTime(2005));
        assert_eq!(SimTime::MAX.plus_ms(1), SimTime::MAX);
        assert_eq!(SimTime(5).since(SimTime(9)), 0);
        assert_eq!(SimTime(5).offset(-9), SimTime(0));
        assert_eq!(SimTime(431_200).to_string(), "431.200s");
    }
}
