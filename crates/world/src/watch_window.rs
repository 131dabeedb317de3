//! Which resourceVersions a watch can resume from: each resource type's watch cache
//! keeps its recent events in a cyclic buffer of its own, as kube-apiserver's does
//! (k8s.io/apiserver `pkg/storage/cacher/watch_cache.go`; docs/semantics.md 3.10):
//!
//! - one buffer per type (one `Cacher` per resource), so writes to other types never
//!   push a quiet type's events out: a ConfigMap watch can resume from an hour-old
//!   resourceVersion while Leases churn;
//! - an event is evicted only when the buffer is full (`updateCache`), never by age.
//!   The buffer starts at `defaultLowerBoundCapacity` (100) events; when it is full and
//!   its oldest event is younger than `eventFreshDuration` (75 s) it doubles, up to
//!   `defaultUpperBoundCapacity` (102,400); when it is full and the event a quarter of
//!   the capacity from the newest is older than that, it halves, never below 100
//!   (`resizeCacheLocked`), dropping its oldest half;
//! - the buffer is filled by a list at the server's start (`Replace` sets
//!   `listResourceVersion`): until something is evicted, a watch can resume from that
//!   resourceVersion or later; after, from the oldest kept event's resourceVersion
//!   minus one (`getAllEventsSinceLocked`: "too old resource version" below it). A
//!   restarted server lists again at the current revision, so every watch from before
//!   the restart is 410 Gone and its client relists.

use crate::api::EventType;
use crate::object::{Kind, Object};
use reconsim_sim::SimTime;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A watch cache's capacity bounds and freshness (watch_cache.go's defaults in
/// [`WatchWindowConfig::default`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchWindowConfig {
    /// The smallest a type's buffer gets, in events (`defaultLowerBoundCapacity`).
    pub capacity_min: usize,
    /// The largest, in events (`defaultUpperBoundCapacity`).
    pub capacity_max: usize,
    /// Events younger than this are fresh (`eventFreshDuration`).
    pub fresh_ms: u64,
}

impl Default for WatchWindowConfig {
    fn default() -> Self {
        WatchWindowConfig {
            capacity_min: 100,
            capacity_max: 100 * 1024,
            fresh_ms: 75_000,
        }
    }
}

/// An event as the history keeps it, for replay to a watch that resumes.
#[derive(Clone, Debug)]
pub(crate) struct Recorded {
    pub at: SimTime,
    pub rv: u64,
    pub event: EventType,
    pub object: Arc<Object>,
    /// The object before this write ([`crate::api::WatchEvent::prev`]).
    pub prev: Option<Arc<Object>>,
}

/// One type's buffer.
#[derive(Debug)]
struct Window {
    events: VecDeque<Recorded>,
    capacity: usize,
    /// Whether an event was evicted since the server's list (`removedEventSinceRelist`).
    evicted: bool,
}

/// Every type's watch-cache buffer.
#[derive(Debug)]
pub(crate) struct WatchWindows {
    config: WatchWindowConfig,
    /// The resourceVersion of the lists that filled the caches: the server's start.
    list_rv: u64,
    by_kind: BTreeMap<Kind, Window>,
}

impl WatchWindows {
    pub fn new(config: WatchWindowConfig) -> Self {
        let capacity_min = config.capacity_min.max(1);
        WatchWindows {
            config: WatchWindowConfig {
                capacity_min,
                capacity_max: config.capacity_max.max(capacity_min),
                ..config
            },
            list_rv: 0,
            by_kind: BTreeMap::new(),
        }
    }

    /// The caches are (re)built by lists at `rv`: at the server's start, after the
    /// objects it starts with, and after a restart.
    pub fn relist(&mut self, rv: u64) {
        self.list_rv = rv;
        self.by_kind.clear();
    }

    /// A write's event enters its type's buffer (`updateCache`).
    pub fn record(&mut self, e: Recorded) {
        let min = self.config.capacity_min;
        let w = self
            .by_kind
            .entry(e.object.kind())
            .or_insert_with(|| Window {
                events: VecDeque::with_capacity(min.min(16)),
                capacity: min,
                evicted: false,
            });
        if w.events.len() >= w.capacity {
            let fresh = |r: &Recorded| e.at.since(r.at) < self.config.fresh_ms;
            if w.events.front().is_some_and(fresh) {
                w.capacity = (w.capacity * 2).min(self.config.capacity_max);
            } else if w
                .events
                .get(w.events.len() - (w.capacity / 4).max(1))
                .is_some_and(|r| e.at.since(r.at) > self.config.fresh_ms)
            {
                let capacity = (w.capacity / 2).max(min);
                if capacity < w.capacity {
                    w.capacity = capacity;
                    let drop = w.events.len().saturating_sub(capacity);
                    w.events.drain(..drop);
                    w.evicted |= drop > 0;
                }
            }
        }
        if w.events.len() >= w.capacity {
            w.events.pop_front();
            w.evicted = true;
        }
        w.events.push_back(e);
    }

    /// Whether a watch of `kind` can resume after `rv`: the cache still holds every
    /// event of the type after it.
    pub fn holds(&self, kind: Kind, rv: u64) -> bool {
        match self.by_kind.get(&kind) {
            Some(w) if w.evicted => w.events.front().is_none_or(|f| rv + 1 >= f.rv),
            _ => rv >= self.list_rv,
        }
    }

    /// The events of `kinds` after `rv`, in the order they were written.
    pub fn since<'a>(&'a self, kinds: &[Kind], rv: u64) -> Vec<&'a Recorded> {
        let mut out: Vec<&Recorded> = kinds
            .iter()
            .filter_map(|k| self.by_kind.get(k))
            .flat_map(|w| {
                let from = w.events.partition_point(|r| r.rv <= rv);
                w.events.range(from..)
            })
            .collect();
        if kinds.len() > 1 {
            out.sort_by_key(|r| r.rv);
        }
        out
    }

    /// A type's buffer capacity now (for tests and explain).
    pub fn capacity(&self, kind: Kind) -> usize {
        self.by_kind
            .get(&kind)
            .map_or(self.config.capacity_min, |w| w.capacity)
    }
}
