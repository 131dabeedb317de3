//! The context an actor's handlers get ([`Ctx`]), and the effects it records as data
//! ([`Effect`]), applied after the handler returns so the kernel owns every interleaving.

use super::event::Event;
use super::proc::ProcState;
use super::{Actor, Sim};
use crate::id::{HostId, ProcId, TimerId};
use crate::rng::SimRng;
use crate::time::SimTime;
use crate::trace::{RecordKind, TraceMode};
use rand::Rng;

/// An effect an actor asked for; applied by the kernel after the handler returns.
#[derive(Debug)]
pub(super) enum Effect<A: Actor> {
    Send {
        to: ProcId,
        msg: A::Msg,
    },
    Timer {
        id: TimerId,
        after_ms: u64,
        msg: A::Msg,
    },
    Cancel(TimerId),
    /// Boxed: a world's process is hundreds of bytes, and every effect (a send, most
    /// often) would otherwise be as large as the largest (issue 18: 3-5 % of a run).
    Spawn {
        host: HostRef,
        name: String,
        actor: Box<A>,
    },
    Stop(ProcId),
    /// Every process on the host of this process stops (the machine is shut down).
    StopHost(ProcId),
    /// The process crashes itself (a failpoint's crash) and restarts this much later.
    CrashSelf {
        restart_after_ms: u64,
    },
    Note(String),
}

/// Where a spawned process goes: a known host, or one named (created if new, as a
/// machine that boots and joins).
#[derive(Debug)]
pub(super) enum HostRef {
    Id(HostId),
    Named(String),
}

/// The only window an actor has on the world.
pub struct Ctx<'a, A: Actor> {
    me: ProcId,
    host: HostId,
    true_now: SimTime,
    local_now: SimTime,
    rng: &'a mut SimRng,
    effects: &'a mut Vec<Effect<A>>,
    next_timer: &'a mut u64,
    next_proc: &'a mut u32,
    notes: bool,
}

/// `effects.push(effect)`, with the effect built in its slot rather than on the stack
/// and copied in after a possible growth: the copy's wide loads stalled on the narrow
/// stores that had just built it (store forwarding; docs/PERFORMANCE.md). A macro, as a
/// function taking the effect by value builds it on the stack again. The hot effects,
/// sends and timers, go through here.
macro_rules! push_in_place {
    ($effects:expr, $effect:expr) => {{
        let effects: &mut Vec<Effect<A>> = $effects;
        effects.reserve(1);
        let len = effects.len();
        effects.spare_capacity_mut()[0].write($effect);
        // SAFETY: `reserve(1)` made room for one more, and the slot at `len` was just
        // initialised by the write above.
        unsafe { effects.set_len(len + 1) };
    }};
}

impl<A: Actor> Ctx<'_, A> {
    pub fn me(&self) -> ProcId {
        self.me
    }

    pub fn host(&self) -> HostId {
        self.host
    }

    /// This process's clock: true time plus its skew. Durations are never skewed.
    pub fn now(&self) -> SimTime {
        self.local_now
    }

    /// True time, which timers count in: what a monotonic clock follows (a skew moves
    /// the wall clock, not the count of elapsed time).
    pub fn true_now(&self) -> SimTime {
        self.true_now
    }

    /// This process's own random stream.
    pub fn rng(&mut self) -> &mut SimRng {
        self.rng
    }

    /// A uniform draw in `[lo, hi]` from this process's stream.
    pub fn draw_ms(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.rng.next_u64() % (hi - lo + 1)
    }

    pub fn send(&mut self, to: ProcId, msg: A::Msg) {
        push_in_place!(self.effects, Effect::Send { to, msg });
    }

    /// Deliver `msg` to this process after `after_ms` of true time.
    pub fn set_timer(&mut self, after_ms: u64, msg: A::Msg) -> TimerId {
        let id = TimerId(*self.next_timer);
        *self.next_timer += 1;
        push_in_place!(self.effects, Effect::Timer { id, after_ms, msg });
        id
    }

    pub fn cancel_timer(&mut self, id: TimerId) {
        self.effects.push(Effect::Cancel(id));
    }

    /// Start a new process on `host`; it gets `on_start` as its own event.
    pub fn spawn(&mut self, host: HostId, name: impl Into<String>, actor: A) -> ProcId {
        let id = ProcId(*self.next_proc);
        *self.next_proc += 1;
        self.effects.push(Effect::Spawn {
            host: HostRef::Id(host),
            name: name.into(),
            actor: Box::new(actor),
        });
        id
    }

    /// Start a new process on the host named `host`, adding the host if it is new.
    pub fn spawn_on(
        &mut self,
        host: impl Into<String>,
        name: impl Into<String>,
        actor: A,
    ) -> ProcId {
        let id = ProcId(*self.next_proc);
        *self.next_proc += 1;
        self.effects.push(Effect::Spawn {
            host: HostRef::Named(host.into()),
            name: name.into(),
            actor: Box::new(actor),
        });
        id
    }

    /// End a process for good (a container killed by its kubelet).
    pub fn stop(&mut self, proc: ProcId) {
        self.effects.push(Effect::Stop(proc));
    }

    /// End for good every process on the host `proc` runs on (a machine shut down: its
    /// agent and every container it started).
    pub fn stop_host_of(&mut self, proc: ProcId) {
        self.effects.push(Effect::StopHost(proc));
    }

    /// Crash this process once the handler returns (what it sent before is sent), as a
    /// `Crash` fault would, and restart it cold `restart_after_ms` later: a failpoint's
    /// crash at a point of the code rather than at a time.
    pub fn crash_self(&mut self, restart_after_ms: u64) {
        self.effects.push(Effect::CrashSelf { restart_after_ms });
    }

    /// Whether notes are kept; build expensive notes only when this is true.
    pub fn notes_enabled(&self) -> bool {
        self.notes
    }

    /// A note for full traces (explain, timelines); never part of the hash.
    pub fn note(&mut self, text: impl FnOnce() -> String) {
        if self.notes {
            self.effects.push(Effect::Note(text()));
        }
    }
}

impl<A: Actor> Sim<A> {
    /// Run a handler of process `p` with a fresh context, then apply its effects.
    pub(super) fn with_ctx(&mut self, p: ProcId, f: impl FnOnce(&mut A, &mut Ctx<'_, A>)) {
        let mut effects = std::mem::take(&mut self.effects);
        let notes = self.trace.mode() == TraceMode::Full;
        {
            let slot = &mut self.procs[p.index()];
            let mut ctx = Ctx {
                me: p,
                host: slot.host,
                true_now: self.now,
                local_now: self.now.offset(slot.clock_offset_ms),
                rng: &mut slot.rng,
                effects: &mut effects,
                next_timer: &mut self.next_timer,
                next_proc: &mut self.next_proc,
                notes,
            };
            f(&mut slot.actor, &mut ctx);
        }
        let mut drain = effects.drain(..);
        let was_running = self.procs[p.index()].state == ProcState::Running;
        let mut deferring = false;
        for effect in drain.by_ref() {
            let crashes = matches!(effect, Effect::CrashSelf { .. });
            self.apply_effect(p, effect, deferring);
            if crashes {
                // A dead process does nothing more: what the handler asked for after
                // its crash is dropped with it.
                break;
            }
            if was_running {
                // An anchored fault fired on one of these effects and hit this process.
                match self.procs[p.index()].state {
                    ProcState::Crashed => break,
                    ProcState::Paused => deferring = true,
                    ProcState::Running | ProcState::Stopped => {}
                }
            }
        }
        drop(drain);
        self.effects = effects;
    }

    // Inlined into its one caller, so an effect's fields go from the vector straight
    // into the queued event, not through a copy of the whole effect on the stack.
    #[inline(always)]
    fn apply_effect(&mut self, me: ProcId, effect: Effect<A>, deferring: bool) {
        match effect {
            Effect::Send { to, msg } if deferring => {
                self.procs[me.index()].deferred.push((to, msg, false));
            }
            Effect::Send { to, msg } => self.send(me, to, msg),
            Effect::Timer { id, after_ms, msg } => {
                if let Some(rec) = &mut self.recorder
                    && let Some(cause) = rec.cause
                    && A::continues(&msg)
                {
                    rec.timer_cause.insert(id, cause);
                }
                let inc = self.procs[me.index()].incarnation;
                self.enqueue(self.now.plus_ms(after_ms), Event::timer(me, inc, id, msg));
            }
            Effect::Cancel(id) => {
                self.cancelled.insert(id);
            }
            Effect::Spawn { host, name, actor } => {
                let host = match host {
                    HostRef::Id(h) => h,
                    HostRef::Named(n) => self.add_host(&n),
                };
                self.add_proc(host, name, *actor);
            }
            Effect::Stop(p) => self.stop(p),
            Effect::StopHost(p) => {
                let host = self.procs[p.index()].host;
                if !self.hosts_down.contains(&host) {
                    self.hosts_down.push(host);
                }
                for q in (0..self.procs.len() as u32).map(ProcId) {
                    if self.procs[q.index()].host == host {
                        self.stop(q);
                    }
                }
            }
            Effect::CrashSelf { restart_after_ms } => {
                if self.crash(me) {
                    self.trace.push(
                        self.now,
                        RecordKind::Crashed {
                            proc: me,
                            restart_after_ms,
                        },
                    );
                    let inc = self.procs[me.index()].incarnation;
                    self.enqueue(
                        self.now.plus_ms(restart_after_ms),
                        Event::Restart { proc: me, inc },
                    );
                }
            }
            Effect::Note(text) => self
                .trace
                .push(self.now, RecordKind::Note { proc: me, text }),
        }
    }
}
