//! The seam between a failpoint and the simulation: the process that runs the program
//! installs its [`Hook`] on its thread while the program runs, and each hit asks it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

/// What a fired failpoint does in the program.
pub enum Hit {
    /// Return the macro's error value from the enclosing function.
    Error,
    /// Await this, then go on (a stall), or never (a crash: the process ends there).
    Wait(Pin<Box<dyn Future<Output = ()> + Send>>),
}

/// What the simulation's process answers for a hit of a named failpoint: `None` when
/// it is not armed at this hit.
pub trait Hook {
    fn hit(&self, name: &str) -> Option<Hit>;
}

thread_local! {
    static HOOK: RefCell<Option<Rc<dyn Hook>>> = const { RefCell::new(None) };
}

/// While the guard lives, this thread's failpoints ask `hook` (the one before comes
/// back when it drops).
pub fn install(hook: Rc<dyn Hook>) -> Installed {
    let before = HOOK.with(|h| h.replace(Some(hook)));
    Installed { before }
}

/// An installed hook; dropping it restores the one before.
pub struct Installed {
    before: Option<Rc<dyn Hook>>,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let before = self.before.take();
        HOOK.with(|h| *h.borrow_mut() = before);
    }
}

/// A hit of failpoint `name` (the macro's call): what the installed hook says, or
/// nothing outside a simulation.
pub fn hit(name: &str) -> Option<Hit> {
    let hook = HOOK.with(|h| h.borrow().clone())?;
    hook.hit(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct ErrorAt(&'static str);

    impl Hook for ErrorAt {
        fn hit(&self, name: &str) -> Option<Hit> {
            (name == self.0).then_some(Hit::Error)
        }
    }

    fn poll_once<F: Future>(f: F) -> Option<F::Output> {
        let mut f = std::pin::pin!(f);
        let waker = std::task::Waker::noop();
        match f.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }

    async fn guarded() -> Result<u32, crate::Injected> {
        crate::fail_point!("here");
        Ok(1)
    }

    async fn valued() -> u32 {
        crate::fail_point!("there", 7);
        1
    }

    #[test]
    fn a_hook_decides_and_its_absence_changes_nothing() {
        assert_eq!(poll_once(guarded()), Some(Ok(1)));
        {
            let _g = install(Rc::new(ErrorAt("here")));
            assert_eq!(
                poll_once(guarded()),
                Some(Err(crate::Injected::new("here")))
            );
            assert_eq!(poll_once(valued()), Some(1));
            let _inner = install(Rc::new(ErrorAt("there")));
            assert_eq!(poll_once(valued()), Some(7));
        }
        assert_eq!(poll_once(guarded()), Some(Ok(1)));
        assert_eq!(poll_once(valued()), Some(1));
    }
}
