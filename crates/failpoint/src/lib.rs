//! Failpoints for code that ships: named points in a program where reconsim's fault plan
//! can make it fail, as the fail crate's `fail_point!` and FoundationDB's BUGGIFY do.
//!
//! A controller depends on this crate always; outside a simulation (the `simulation`
//! feature off) [`fail_point!`] expands to a branch never taken, which the compiler
//! removes, so the shipped binary carries no trace of it; its value is still
//! type-checked, so both builds agree on types. A test build that links reconsim-kube turns the feature on, and inside a
//! run each hit asks the process's hook what the fault plan armed: a scenario's
//! `failpoint` fault (`name`, `hit`, `action`: `crash`, `error` or `stall`;
//! docs/scenario-format.md). Unarmed, a hit changes nothing, not even the run's history.
//!
//! ```
//! #[derive(Debug)]
//! enum Error {
//!     Injected,
//!     Cloud(String),
//! }
//!
//! async fn launch() -> Result<String, Error> {
//!     let id = "i-0123".to_string(); // the cloud call
//!     // A crash here leaves an instance that no object records: the race to test.
//!     reconsim_failpoint::fail_point!("after-launch", Err(Error::Injected));
//!     Ok(id)
//! }
//! # let _ = launch;
//! # let _ = Error::Cloud(String::new());
//! ```
//!
//! Actions: `error` returns the macro's second argument from the enclosing function (or,
//! in the one-argument form, `Err(Injected.into())`); `stall` waits there in the
//! program's virtual time; `crash` kills the process right there (what it sent so far
//! is sent) and restarts it cold. The macro awaits, so it belongs in async code.

use std::fmt;

/// The error of a fired failpoint in [`fail_point!`]'s one-argument form: the
/// enclosing function returns `Err(Injected.into())`, so its error type needs
/// `From<Injected>` (`Box<dyn Error>` and anyhow's have it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Injected {
    pub name: String,
}

impl Injected {
    pub fn new(name: &str) -> Self {
        Injected {
            name: name.to_string(),
        }
    }
}

impl fmt::Display for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "failpoint {} fired", self.name)
    }
}

impl std::error::Error for Injected {}

#[cfg(feature = "simulation")]
pub mod hook;

/// A named failpoint. `fail_point!(name)` returns `Err(Injected.into())` when the fault
/// plan makes it error; `fail_point!(name, value)` returns `value` (evaluated only then).
/// Nothing at all without the `simulation` feature.
#[cfg(feature = "simulation")]
#[macro_export]
macro_rules! fail_point {
    ($name:expr) => {
        $crate::fail_point!(
            $name,
            ::core::result::Result::Err(::core::convert::From::from($crate::Injected::new($name)))
        )
    };
    ($name:expr, $on_error:expr) => {
        match $crate::hook::hit($name) {
            ::core::option::Option::None => {}
            ::core::option::Option::Some($crate::hook::Hit::Error) => return $on_error,
            ::core::option::Option::Some($crate::hook::Hit::Wait(wait)) => wait.await,
        }
    };
}

/// A named failpoint: nothing, as the `simulation` feature is off. The value is still
/// type-checked against the function's return type, in a branch never taken, so a
/// shipped build sees the same types (and no "never constructed" error variant) as a
/// simulated one.
#[cfg(not(feature = "simulation"))]
#[macro_export]
macro_rules! fail_point {
    ($name:expr) => {
        if false {
            return ::core::result::Result::Err(::core::convert::From::from(
                $crate::Injected::new($name),
            ));
        }
    };
    ($name:expr, $on_error:expr) => {
        if false {
            return $on_error;
        }
    };
}

/// Without the feature (a shipped build): the failpoint is never taken, and its error
/// value still counts as used. Run alone (`cargo test -p reconsim-failpoint`), since a
/// workspace build unifies the feature on; .ci/run does.
#[cfg(all(test, not(feature = "simulation")))]
mod off {
    #![deny(dead_code)]

    use std::future::Future;

    #[derive(Debug, PartialEq)]
    enum Error {
        Injected,
    }

    async fn launch() -> Result<u32, Error> {
        crate::fail_point!("after-launch", Err(Error::Injected));
        Ok(1)
    }

    async fn plain() -> Result<u32, crate::Injected> {
        crate::fail_point!("plain");
        Ok(2)
    }

    #[test]
    fn a_failpoint_is_nothing_in_a_shipped_build() {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut f = std::pin::pin!(launch());
        assert_eq!(f.as_mut().poll(&mut cx), std::task::Poll::Ready(Ok(1)));
        let mut g = std::pin::pin!(plain());
        assert_eq!(g.as_mut().poll(&mut cx), std::task::Poll::Ready(Ok(2)));
    }
}
