//! The executor: a current-thread tokio runtime stepped by the simulation. kube's
//! client needs a runtime (its `Buffer` spawns a worker task), kube-runtime and user
//! code need tokio's timers; here every task runs only inside [`Driver::step`], which a
//! process calls from its handler, so the tasks' order is a function of the messages
//! the process handled and of virtual time.
//!
//! Virtual time without tokio's paused clock: the runtime's timer reads the monotonic
//! clock, which inside a [`Scope`] is the run's ([`crate::intercept`]). A step runs the
//! runtime until it parks, which it does exactly when no task can run; the park's
//! timeout is the time to its next timer ([`Park`]). The process then sets a timer of
//! the simulation for that instant, and the next step at that instant fires tokio's
//! timers due then: never early, never late, in order with the process's messages.
//! (tokio's `start_paused` clock would jump to the next timer by itself whenever the
//! runtime idles, before a message due earlier could arrive; tokio 1.54,
//! runtime/time/mod.rs `park_thread_timeout`.)

use crate::handle::CallError;
use crate::intercept::{self, Park, Scope};
use crate::transport::WireBody;
use bytes::Bytes;
use reconsim_world::component::Payload;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// What a process hands its program ([`Driver::hand`]), delivered in the order handed,
/// first thing inside the next [`Driver::step`].
pub enum Delivery {
    /// An HTTP answer to a request of the program's client.
    Http(
        tokio::sync::oneshot::Sender<http::Response<WireBody>>,
        http::Response<WireBody>,
    ),
    /// A service's answer to a call of the program's handle.
    Call(
        tokio::sync::oneshot::Sender<Result<Payload, CallError>>,
        Result<Payload, CallError>,
    ),
    /// A line of a watch stream.
    Line(tokio::sync::mpsc::UnboundedSender<Bytes>, Bytes),
    /// A sender whose drop is the message: a request's answer dropped unsent (its
    /// connection broke), a watch's stream ended.
    Drop(Box<dyn Send>),
}

impl Delivery {
    fn deliver(self) {
        match self {
            Delivery::Http(answer, response) => {
                let _ = answer.send(response);
            }
            Delivery::Call(answer, result) => {
                let _ = answer.send(result);
            }
            Delivery::Line(lines, line) => {
                let _ = lines.send(line);
            }
            Delivery::Drop(sender) => drop(sender),
        }
    }
}

pub struct Driver {
    runtime: tokio::runtime::Runtime,
    /// Handed since the last step.
    inbox: Vec<Delivery>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("runtime", &self.runtime)
            .field("inbox", &self.inbox.len())
            .finish()
    }
}

impl Driver {
    /// A runtime whose clock is `scope`'s. It is built inside the scope: tokio reads
    /// its time origin from the clock when it is made.
    pub fn new(scope: &mut Scope) -> Self {
        #[cfg(tokio_unstable)]
        let seed = {
            let mut bytes = [0u8; 16];
            scope.fill(&mut bytes);
            bytes
        };
        let runtime = intercept::enter(scope, || {
            let mut builder = tokio::runtime::Builder::new_current_thread();
            // The I/O driver is only the park: its epoll_wait is where the runtime says
            // it has nothing to run; no socket is ever registered.
            builder.enable_io().enable_time();
            // `tokio::select!` starts at a branch drawn from the runtime's seed, which
            // tokio otherwise derives from a process-wide counter (tokio 1.54,
            // loom/std/mod.rs `seed`): it follows the run's seed only where the build
            // sets `--cfg tokio_unstable`, which `Builder::rng_seed` needs
            // (.cargo/config.toml; docs/kube.md).
            #[cfg(tokio_unstable)]
            builder.rng_seed(tokio::runtime::RngSeed::from_bytes(&seed));
            builder.build().expect("a current-thread runtime builds")
        });
        Driver {
            runtime,
            inbox: Vec::new(),
        }
    }

    /// Run `f` inside the runtime's context and `scope` (`kube::Client::new` spawns
    /// its worker; a user's factory may spawn tasks or read the clock).
    pub fn enter<T>(&self, scope: &mut Scope, f: impl FnOnce() -> T) -> T {
        intercept::enter(scope, || {
            let _guard = self.runtime.enter();
            f()
        })
    }

    pub fn spawn<F>(&self, scope: &mut Scope, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.enter(scope, || {
            self.runtime.spawn(future);
        });
    }

    /// Hand the program `delivery` at the next step. Delivered inside the runtime, it
    /// wakes the waiting task onto the runtime's own run queue, with the scheduler's
    /// core in its context, as tokio's I/O driver wakes a task whose socket became
    /// readable. A task woken from outside the runtime would go on the remote queue
    /// instead, polled in another order among tasks ready at once, and the wake would
    /// unpark the I/O driver with a write to its eventfd (tokio 1.54,
    /// runtime/scheduler/current_thread/mod.rs `schedule` and `park_internal`).
    pub fn hand(&mut self, delivery: Delivery) {
        self.inbox.push(delivery);
    }

    /// Deliver what was handed, then run every task that can run at `scope`'s time, and
    /// the timers due by then, until the runtime parks: how it parked says when it next
    /// needs to run.
    pub fn step(&mut self, scope: &mut Scope) -> Park {
        scope.take_park();
        let (runtime, inbox) = (&self.runtime, &mut self.inbox);
        intercept::enter(scope, || runtime.block_on(UntilParked { inbox }))
    }
}

/// The future a step blocks on: ready once the runtime has parked. Its first poll, the
/// first thing `block_on` does, delivers the inbox.
struct UntilParked<'a> {
    inbox: &'a mut Vec<Delivery>,
}

impl Future for UntilParked<'_> {
    type Output = Park;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Park> {
        self.inbox.drain(..).for_each(Delivery::deliver);
        match intercept::parked_or_wait(cx.waker()) {
            Some(park) => Poll::Ready(park),
            None => Poll::Pending,
        }
    }
}
