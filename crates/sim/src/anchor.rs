//! Faults anchored to events, and the record of a run's decision points.
//!
//! A timed fault lands where a clock says; a narrow race needs it to land between two
//! particular messages. An [`Anchor`] names an event instead of a time: the `nth` message
//! of one [`EventClass`] that a named process sends (its writes, reads, service calls,
//! lease renewals) or receives (its watch events), counted from when the fault is armed
//! (its `at_ms`). The fault takes effect the instant that message leaves its sender,
//! just before it or just after it ([`Position`]). The world says what class each of
//! its messages is ([`crate::Actor::classify`]); the kernel knows nothing of writes.
//!
//! Anchored faults are ordinary plan entries, so failure files, shrink, replay and
//! explain take them as they are. A reference run can record every decision point
//! ([`DecisionPoint`]), which is what search builds its plans from (section 10 of the
//! design).

use serde::{Deserialize, Serialize};

/// What a message is, for anchors and decision records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventClass {
    /// A request that changes state (create, update, patch, delete, bind).
    Write,
    /// A request that only reads (get, list).
    Read,
    /// A call to a service process (a cloud API, an etcd model).
    Call,
    /// A write of a lease by its holder (leader election, a node's heartbeat).
    Renewal,
    /// A watch event, counted by the process it is sent to.
    WatchEvent,
}

impl EventClass {
    pub const ALL: [EventClass; 5] = [
        EventClass::Write,
        EventClass::Read,
        EventClass::Call,
        EventClass::Renewal,
        EventClass::WatchEvent,
    ];

    /// Counted at the receiver (watch events) rather than the sender.
    pub fn counted_at_receiver(self) -> bool {
        self == EventClass::WatchEvent
    }

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            EventClass::Write => "write",
            EventClass::Read => "read",
            EventClass::Call => "call",
            EventClass::Renewal => "renewal",
            EventClass::WatchEvent => "watch_event",
        }
    }
}

/// Where an anchored fault lands relative to its message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// The fault takes effect first: a crashed sender never sends the message, a paused
    /// one sends it when it resumes, a partition catches it.
    Before,
    /// The message leaves, then the fault takes effect (a crash right after a write).
    #[default]
    After,
}

/// The event a fault waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Anchor {
    /// The process that sends the message (or, for watch events, receives it).
    pub process: String,
    pub event: EventClass,
    /// Which one, from 1, counted from when the fault is armed.
    pub nth: u32,
    #[serde(default)]
    pub position: Position,
}

impl std::fmt::Display for Anchor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let place = match self.position {
            Position::Before => "before",
            Position::After => "after",
        };
        let whose = if self.event.counted_at_receiver() {
            "to"
        } else {
            "of"
        };
        write!(
            f,
            "{place} {} {whose} {} #{}",
            self.event.name(),
            self.process,
            self.nth
        )
    }
}

/// One decision point of a recorded run: a classified message, numbered as an anchor
/// would count it from the start of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DecisionPoint {
    pub time_ms: u64,
    /// The anchor's process: the sender, or for watch events the receiver.
    pub process: String,
    /// The other end.
    pub peer: String,
    pub event: EventClass,
    pub nth: u32,
    /// What the message was, in a few words ([`crate::Actor::describe`]).
    pub label: String,
    /// What it reads, writes or reports on ([`crate::Actor::subject`]): a kind of
    /// object in the world.
    pub subject: Option<String>,
    /// The process sent this from its handler of the answer to decision `i` (the same
    /// reconcile went on from what that request returned).
    pub after_answer_of: Option<usize>,
}
