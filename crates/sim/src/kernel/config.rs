//! Run-wide settings of the kernel ([`SimConfig`]) and what one step of the loop did
//! ([`StepKind`]): the two plain types a caller of [`Sim`](super::Sim) handles.

use crate::id::ProcId;
use crate::network::NetConfig;
use crate::trace::TraceMode;

/// Run-wide settings of the kernel.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    pub seed: u64,
    pub net: NetConfig,
    pub trace: TraceMode,
    /// Hard bound on handled events: a livelock ends the run instead of hanging it.
    pub max_events: u64,
    /// Keep every decision point ([`Sim::decisions`](super::Sim::decisions)): a search's
    /// reference run.
    pub record_decisions: bool,
    /// Fold every classified message into the run's abstract signature
    /// ([`Sim::signature`](super::Sim::signature), [`crate::signature`]), keeping no
    /// decision point: what a campaign that adapts to coverage reads of each run.
    pub record_signature: bool,
}

impl SimConfig {
    pub fn new(seed: u64) -> Self {
        SimConfig {
            seed,
            net: NetConfig::default(),
            trace: TraceMode::Hash,
            max_events: 50_000_000,
            record_decisions: false,
            record_signature: false,
        }
    }
}

/// What one step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A process handled an event (start, message or timer).
    Handled(ProcId),
    /// A message was dropped or parked by a partition or a dead receiver.
    Lost(ProcId),
    /// Fault `index` of the plan took effect (`active`) or reverted.
    Fault { index: usize, active: bool },
}
