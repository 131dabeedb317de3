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
            Fault::Pause { process } => match self.proc_by_name(process) {
                Some(p) if active => self.pause(p),
                Some(p) => self.resume(p),
                None => false,
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
            Fault::Crash { process } => match self.proc_by_name(process) {
                Some(p) if active => self.crash(p),
                Some(p) => self.restart(p),
                None => false,
            },
            Fault::ClockSkew { process, offset_ms } => match self.proc_by_name(process) {
                Some(p) => {
                    self.procs[p.index()].clock_offset_ms = if active { *offset_ms } else { 0 };
                    true
                }
                None => false,
            },
            Fault::Inject { process, fault } => match self.proc_by_name(process) {
                Some(p)
                    if !matches!(
                        self.procs[p.index()].state,
                        ProcState::Crashed | ProcState::Stopped
                    ) =>
                {
                    self.with_ctx(p, |a, ctx| a.on_fault(fault, active, ctx));
                    true
                }
                _ => false,
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
}
