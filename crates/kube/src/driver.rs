//! The executor: a current-thread tokio runtime with neither clock nor I/O, stepped by
//! the simulation. kube's client needs a runtime (its `Buffer` spawns a worker task);
//! here every task runs only inside [`Driver::step`], which a process calls from its
//! handler, so the tasks' order is a function of the messages the process handled.

use std::future::Future;

/// How many scheduler turns one step may take: a turn runs every task woken since the
/// last. A step that is still busy after this many is a task that never waits on the
/// simulation (a loop without an await point on it), which this bound turns from a
/// hang into a stop.
pub const TURNS_PER_STEP_MAX: usize = 256;

/// A step ends after this many turns in a row without progress: a request travels from
/// the user's task through kube's buffer worker to the transport in a few turns that
/// show nothing outside.
pub const QUIET_TURNS: usize = 8;

#[derive(Debug)]
pub struct Driver {
    runtime: tokio::runtime::Runtime,
}

impl Default for Driver {
    fn default() -> Self {
        Self::new()
    }
}

impl Driver {
    pub fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime without I/O or time builds");
        Driver { runtime }
    }

    /// Run `f` inside the runtime's context (`kube::Client::new` spawns its worker).
    pub fn enter<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self.runtime.enter();
        f()
    }

    pub fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.runtime.spawn(future);
    }

    /// Run the woken tasks until [`QUIET_TURNS`] turns in a row leave `progress`
    /// unchanged (what the outside sees: requests made, the program done), or for
    /// [`TURNS_PER_STEP_MAX`] turns.
    pub fn step(&self, mut progress: impl FnMut() -> u64) {
        let mut last = progress();
        let mut quiet = 0;
        for _ in 0..TURNS_PER_STEP_MAX {
            self.runtime.block_on(tokio::task::yield_now());
            let now = progress();
            if now == last {
                quiet += 1;
                if quiet >= QUIET_TURNS {
                    return;
                }
            } else {
                quiet = 0;
                last = now;
            }
        }
    }
}
