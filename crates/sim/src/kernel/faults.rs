//! Fault application: a plan's fault taking effect or reverting ([`FaultAction`]), at its
//! time or its anchor's event, on the network (partitions, slow links) or on processes.

use super::proc::ProcState;
use super::{Actor, Sim};
use crate::fault::Fault;
use crate::id::{HostId, ProcId};
use crate::network::LinkRule;
use crate::time::SimTime;
use crate::trace::RecordKind;

#[derive(Clone, Copy, Debug)]
pub(super) struct FaultAction {
    pub(super) time: SimTime,
    pub(super) index: usize,
    pub(super) active: bool,
}

impl<A: Actor> Sim<A> {
    pub(super) fn apply_fault(&mut self, action: FaultAction) {
        let FaultAction { index, active, .. } = action;
        let fault = self.plan.faults[index].fault.clone();
        let applied = match &fault {
            Fault::Partition {
                hosts_a,
                hosts_b,
                mode,
                one_way,
            } => {
                if active {
                    let rule = self.rule(index, hosts_a, hosts_b, *one_way);
                    self.net.add_partition(rule, *mode);
                } else if self.net.remove(index) {
                    self.release_held();
                }
                true
            }
            Fault::SlowLink {
                hosts_a,
                hosts_b,
                extra_latency_ms,
                one_way,
            } => {
                if active {
                    let rule = self.rule(index, hosts_a, hosts_b, *one_way);
                    self.net.add_slow(rule, *extra_latency_ms);
                } else {
                    self.net.remove(index);
                }
                true
            }
            Fault::Pause { process } => match self.fault_target(process) {
                Some(p) if active => self.pause(p),
                Some(p) => self.resume(p),
                None => self.await_start(index, process, active),
            },
            Fault::PauseHost { host } => match self.host_by_name(host) {
                Some(h) if active => {
                    let on_host: Vec<ProcId> = (0..self.procs.len() as u32)
                        .map(ProcId)
                        .filter(|p| self.procs[p.index()].host == h)
                        .collect();
                    let paused = on_host.into_iter().filter(|p| self.pause(*p)).collect();
                    self.host_pauses.push((index, paused));
                    true
                }
                Some(_) => {
                    let at = self.host_pauses.iter().position(|(i, _)| *i == index);
                    for p in at.map(|i| self.host_pauses.remove(i).1).unwrap_or_default() {
                        self.resume(p);
                    }
                    true
                }
                None => false,
            },
            Fault::Crash { process } => match self.fault_target(process) {
                Some(p) if active => self.crash(p),
                Some(p) => self.restart(p),
                None => self.await_start(index, process, active),
            },
            Fault::ClockSkew { process, offset_ms } => match self.fault_target(process) {
                Some(p) => {
                    self.procs[p.index()].clock_offset_ms = if active { *offset_ms } else { 0 };
                    true
                }
                None => false,
            },
            Fault::Inject { process, fault } => match self.fault_target(process) {
                Some(p)
                    if !matches!(
                        self.procs[p.index()].state,
                        ProcState::Crashed | ProcState::Stopped
                    ) =>
                {
                    self.with_ctx(p, |a, ctx| a.on_fault(fault, active, ctx));
                    true
                }
                Some(_) => false,
                None => self.await_start(index, process, active),
            },
            // They act on an anchor's message (`send`); at a time they have none.
            Fault::DropMessage | Fault::DelayMessage { .. } | Fault::LoseAnswer => false,
        };
        self.trace.push(
            self.now,
            RecordKind::Fault {
                index,
                active,
                applied,
            },
        );
    }

    fn rule(&self, fault: usize, a: &[String], b: &[String], one_way: bool) -> LinkRule {
        let resolve = |names: &[String]| -> Vec<HostId> {
            names.iter().filter_map(|n| self.host_by_name(n)).collect()
        };
        LinkRule {
            fault,
            hosts_a: resolve(a),
            hosts_b: resolve(b),
            one_way,
        }
    }

    /// A fault on `process`, which has not started: while active it waits for the
    /// process's start ([`Self::take_effect_at_spawn`], [`Self::deliver_awaiting_start`]);
    /// not applied now.
    fn await_start(&mut self, index: usize, process: &str, active: bool) -> bool {
        if active {
            self.awaiting_start.push((index, process.to_string()));
        } else {
            self.awaiting_start.retain(|(i, _)| *i != index);
        }
        false
    }

    /// The crash and pause faults that wait for a process of `proc`'s name, on its spawn:
    /// it is down or paused from its first instant, until the fault ends.
    pub(super) fn take_effect_at_spawn(&mut self, proc: ProcId) {
        let name = &self.procs[proc.index()].name;
        let waiting: Vec<usize> = self
            .awaiting_start
            .iter()
            .filter(|(i, n)| {
                n == name
                    && matches!(
                        self.plan.faults[*i].fault,
                        Fault::Crash { .. } | Fault::Pause { .. }
                    )
            })
            .map(|(i, _)| *i)
            .collect();
        for index in waiting {
            self.awaiting_start.retain(|(i, _)| *i != index);
            let applied = match self.plan.faults[index].fault {
                Fault::Crash { .. } => self.crash(proc),
                _ => self.pause(proc),
            };
            self.record_taken_effect(index, applied);
        }
    }

    /// Deliver the `Inject` faults that wait for the first start of `proc`'s name.
    pub(super) fn deliver_awaiting_start(&mut self, proc: ProcId) {
        let name = &self.procs[proc.index()].name;
        let Some(at) = self.awaiting_start.iter().position(|(i, n)| {
            n == name && matches!(self.plan.faults[*i].fault, Fault::Inject { .. })
        }) else {
            return;
        };
        let (index, _) = self.awaiting_start.remove(at);
        let Fault::Inject { fault, .. } = self.plan.faults[index].fault.clone() else {
            unreachable!("matched an Inject fault")
        };
        self.with_ctx(proc, |a, ctx| a.on_fault(&fault, true, ctx));
        self.record_taken_effect(index, true);
        // Another fault may wait for the same name.
        self.deliver_awaiting_start(proc);
    }

    fn record_taken_effect(&mut self, index: usize, applied: bool) {
        self.trace.push(
            self.now,
            RecordKind::Fault {
                index,
                active: true,
                applied,
            },
        );
    }
}
