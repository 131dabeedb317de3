//! Faults as data.
//!
//! A [`FaultPlan`] is a list of [`TimedFault`]s: what, when, and for how long. Every fault
//! carries its own duration and reverts by itself (a partition heals, a paused process
//! resumes, a crashed one restarts), so removing any one fault from a plan leaves a valid
//! plan: that is what shrinking needs. Targets are named (hosts and processes by name) so a
//! plan is readable, editable and stable across runs. Faults the kernel does not know
//! (a kubelet stop, cloud lag) travel as [`Fault::Inject`] to the named process, typed by
//! the world's own fault type `F`.
//!
//! A fault may wait for an event instead of a time ([`TimedFault::on`], an
//! [`crate::Anchor`]): armed at `at_ms`, it takes effect at the anchor's message. Three
//! faults act on that one message and exist only with an anchor: drop it, delay it, or
//! lose the answer to it.

use crate::anchor::Anchor;
use serde::{Deserialize, Serialize};

/// What a partition does to a message that would cross it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionMode {
    /// The message is lost and its connection with it (a reset): the connection's
    /// client end hears of it at once (docs/semantics.md 4.12).
    Drop,
    /// The message waits and is delivered, in order, after the partition heals.
    Hold,
}

/// One fault. Hosts and processes are named; an unknown name at injection time makes
/// the fault a recorded no-op (the process may not exist yet, or any more).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault<F> {
    /// Cut links from `hosts_a` to `hosts_b` (and back, unless `one_way`).
    Partition {
        hosts_a: Vec<String>,
        hosts_b: Vec<String>,
        mode: PartitionMode,
        #[serde(default)]
        one_way: bool,
    },
    /// Add latency to every message from `hosts_a` to `hosts_b` (and back, unless `one_way`).
    SlowLink {
        hosts_a: Vec<String>,
        hosts_b: Vec<String>,
        extra_latency_ms: u64,
        #[serde(default)]
        one_way: bool,
    },
    /// Stop the world for one process (SIGSTOP, a frozen VM): nothing it receives or
    /// its timers are handled until it resumes; then they all come due at once.
    Pause { process: String },
    /// A frozen machine: every process on the host at that moment pauses, and resumes
    /// when the fault reverts.
    PauseHost { host: String },
    /// The process dies, losing its memory; it restarts cold when the fault reverts.
    Crash { process: String },
    /// The process's clock reads `offset_ms` away from true time.
    ClockSkew { process: String, offset_ms: i64 },
    /// A world fault, handed to the named process's `on_fault`.
    Inject { process: String, fault: F },
    /// Anchored only: the anchor's message is lost, and with it its connection (TCP
    /// never loses one message silently): the connection's client end (a request's
    /// sender, an answer's or a stream's receiver) hears of it as its transport would
    /// tell it ([`crate::Actor::broken_by_drop`], else [`crate::Actor::gave_up`]).
    DropMessage,
    /// Anchored only: the anchor's message takes this much longer (its link is FIFO, so
    /// what follows it on the link waits too: a stalled stream).
    DelayMessage { extra_ms: u64 },
    /// Anchored only: the answer to the anchor's request is lost (the request took
    /// effect) and its connection breaks: its caller hears the request failed, not
    /// knowing whether it took effect.
    LoseAnswer,
}

impl<F> Fault<F> {
    /// Acts on the anchor's message itself, so it needs an anchor.
    pub fn is_message_fault(&self) -> bool {
        matches!(
            self,
            Fault::DropMessage | Fault::DelayMessage { .. } | Fault::LoseAnswer
        )
    }
}

/// A fault at a time, for a duration (`None`: until the end of the run). With `on`, the
/// fault is armed at `at_ms` and takes effect at the anchor's event (if it comes), for
/// `duration_ms` from then.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimedFault<F> {
    pub at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    pub fault: Fault<F>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<Anchor>,
}

impl<F> TimedFault<F> {
    /// A fault at a time.
    pub fn at(at_ms: u64, duration_ms: Option<u64>, fault: Fault<F>) -> Self {
        TimedFault {
            at_ms,
            duration_ms,
            fault,
            on: None,
        }
    }

    /// A fault at an event, armed from the start of the run.
    pub fn on(anchor: Anchor, duration_ms: Option<u64>, fault: Fault<F>) -> Self {
        TimedFault {
            at_ms: 0,
            duration_ms,
            fault,
            on: Some(anchor),
        }
    }
}

/// A fault plan: the faults of one run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FaultPlan<F> {
    pub faults: Vec<TimedFault<F>>,
}

impl<F> Default for FaultPlan<F> {
    fn default() -> Self {
        FaultPlan { faults: Vec::new() }
    }
}

impl<F> FaultPlan<F> {
    pub fn new(faults: Vec<TimedFault<F>>) -> Self {
        FaultPlan { faults }
    }

    pub fn len(&self) -> usize {
        self.faults.len()
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// The end of the last fault's effect; `None` if some fault never reverts. An
    /// anchored fault's event has no time known before the run: its bound is its arming
    /// time plus its duration, which a caller that needs the true heal time (a
    /// convergence deadline) must not trust; see [`FaultPlan::has_anchors`].
    pub fn last_heal_ms(&self) -> Option<u64> {
        self.faults.iter().try_fold(0u64, |acc, f| {
            if f.fault.is_message_fault() {
                return Some(acc.max(f.at_ms));
            }
            f.duration_ms.map(|d| acc.max(f.at_ms.saturating_add(d)))
        })
    }

    /// Some fault waits for an event.
    pub fn has_anchors(&self) -> bool {
        self.faults.iter().any(|f| f.on.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_round_trips_through_json() {
        let plan: FaultPlan<String> = FaultPlan::new(vec![
            TimedFault {
                at_ms: 1000,
                duration_ms: Some(5000),
                fault: Fault::Partition {
                    hosts_a: vec!["master-0".into()],
                    hosts_b: vec!["apiserver".into()],
                    mode: PartitionMode::Hold,
                    one_way: true,
                },
                on: None,
            },
            TimedFault {
                at_ms: 2000,
                duration_ms: None,
                fault: Fault::Inject {
                    process: "kubelet/master-0".into(),
                    fault: "stop".into(),
                },
                on: None,
            },
        ]);
        let json = serde_json::to_string(&plan).unwrap();
        let back: FaultPlan<String> = serde_json::from_str(&json).unwrap();
        assert_eq!(plan, back);
        assert_eq!(back.last_heal_ms(), None);
        assert_eq!(
            FaultPlan::new(back.faults[..1].to_vec()).last_heal_ms(),
            Some(6000)
        );
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let bad = r#"[{"at_ms": 1, "fault": {"kind": "pause", "process": "x", "bogus": 1}}]"#;
        assert!(serde_json::from_str::<FaultPlan<String>>(bad).is_err());
    }
}
