//! A program's failpoints (`reconsim_failpoint::fail_point!`): the bridge's hook, which
//! answers each hit from what the fault plan armed in the process
//! (`WorldFault::Failpoint`, the same faults a manager's failpoints take).
//!
//! `error` makes the macro return its error value; `stall` waits in the runtime's
//! virtual time; `crash` never returns, and the bridge ends the process after the step,
//! sending only the requests and service calls the program made before the hit.

use crate::handle::Calls;
use crate::transport::Queue;
use reconsim_failpoint::hook::{Hit, Hook};
use reconsim_world::fault::{FailpointAction, Failpoints};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// What the fault plan armed, and what hits did during the step being run.
#[derive(Debug, Default)]
pub struct Armed {
    /// Outside the process's memory: a crash keeps them, so a crash at a hit does not
    /// come again after the restart.
    pub points: Failpoints,
    /// What each hit of this step did, for the trace (`failpoint <name> hit #<n>: ...`,
    /// as a manager's hits read).
    pub notes: Vec<String>,
    /// A crash at a hit this step: (its restart delay, the requests made before it).
    pub crash: Option<Crash>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash {
    pub restart_after_ms: u64,
    pub requests_before: usize,
    /// The service calls made before it.
    pub calls_before: usize,
}

/// The hook installed on the thread while the program's runtime steps.
pub struct BridgeHook {
    pub armed: Rc<RefCell<Armed>>,
    /// The client's requests so far this step (a crash sends only those).
    pub queue: Queue,
    /// The program's service calls so far this step.
    pub(crate) calls: Calls,
}

impl Hook for BridgeHook {
    fn hit(&self, name: &str) -> Option<Hit> {
        let mut armed = self.armed.borrow_mut();
        let (n, action) = armed.points.hit(name)?;
        armed
            .notes
            .push(format!("failpoint {name} hit #{n}: {action}"));
        Some(match action {
            FailpointAction::Error => Hit::Error,
            FailpointAction::Stall { ms } => {
                Hit::Wait(Box::pin(tokio::time::sleep(Duration::from_millis(ms))))
            }
            FailpointAction::Crash { restart_after_ms } => {
                if armed.crash.is_none() {
                    let requests_before = self.queue.lock().expect("the queue's lock").len();
                    let calls_before = self.calls.lock().expect("the calls' lock").len();
                    armed.crash = Some(Crash {
                        restart_after_ms,
                        requests_before,
                        calls_before,
                    });
                }
                // The process ends at this step's close; the task never goes on.
                Hit::Wait(Box::pin(std::future::pending()))
            }
        })
    }
}
