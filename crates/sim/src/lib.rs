//! The reconsim kernel: a deterministic discrete-event simulator that knows nothing of
//! Kubernetes.
//!
//! A run is a pure function of (actors, fault plan, seed). Time is virtual ([`SimTime`],
//! milliseconds); every random draw comes from a named ChaCha8 stream derived from the seed
//! ([`Streams`]); events at the same instant are ordered by a seeded tie-break, then by
//! sequence number. Actors are pure state machines ([`Actor`]) whose only way to act is
//! the [`Ctx`] they are handed: send, set a timer, draw randomness, spawn or stop a
//! process. Effects are data, applied by the kernel after the handler returns, so the
//! kernel owns every interleaving. Faults are data too ([`FaultPlan`]). Every event is
//! folded into a stable trace hash ([`Trace`]).
//!
//! Table of contents:
//! - [`time`]: virtual time.
//! - [`rng`]: named seeded random streams.
//! - [`hash`]: the stable hash used for traces and stream names.
//! - [`id`]: process, host and timer ids.
//! - [`queue`]: the event queue (time, tie-break, sequence).
//! - [`network`]: seeded latency, FIFO links, partitions and slow links.
//! - [`fault`]: fault plans as serde data.
//! - [`anchor`]: faults anchored to events, and decision records.
//! - [`signature`]: a run's abstract signature (which role did what after what), for
//!   coverage guidance.
//! - [`trace`]: trace records and the trace hash.
//! - [`kernel`]: the [`Sim`] itself, the [`Actor`] trait and its [`Ctx`].

pub mod anchor;
pub mod fault;
pub mod hash;
pub mod id;
pub mod kernel;
pub mod network;
pub mod queue;
pub mod rng;
pub mod signature;
pub mod time;
pub mod trace;

pub use anchor::{Anchor, DecisionPoint, EventClass, Position};
pub use fault::{Fault, FaultPlan, PartitionMode, TimedFault};
pub use hash::{Hashed, StableHasher};
pub use id::{HostId, ProcId, TimerId};
pub use kernel::{Actor, Ctx, ProcState, Sim, SimConfig, StepKind};
pub use network::NetConfig;
pub use rng::{SimRng, Streams};
pub use time::SimTime;
pub use trace::{Record, RecordKind, Trace, TraceMode};
