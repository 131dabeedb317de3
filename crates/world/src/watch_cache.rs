//! The API server's watch caches, one per resource type, as the real server has them:
//! each type's `Cacher` follows etcd through a watch of its own and feeds that type's
//! watchers (k8s.io/apiserver `storage/cacher`, one per resource; the sig-scalability
//! watch-latency SLI is defined "for every resource", from the moment the object is
//! stored to when it is ready to be sent to watchers). So a write's response, which
//! comes from etcd, can reach its writer before the write's own event, and two types'
//! events can reach a client in another order than they were written (docs/semantics.md
//! 3.12 and 3.19). Within one type the order is the store's.
//!
//! A type's events wait for its lag: the [`WorldFault::WatchLag`]s in force on every
//! type and on this one, plus the per-event delay the server is configured with
//! ([`crate::apiserver::ApiServerConfig::watch_delay_ms`]). A type none of these holds
//! back has no cache here: its events go out at once and its lists read the store.
//!
//! [`WorldFault::WatchLag`]: crate::fault::WorldFault::WatchLag

use crate::api::EventType;
use crate::object::{Kind, Object, ObjectKey, of_kind};
use reconsim_sim::SimTime;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// A range of milliseconds, drawn uniformly per event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DelayRange {
    pub lo_ms: u64,
    pub hi_ms: u64,
}

/// One type's watch cache while it is behind the store.
#[derive(Debug, Default)]
struct TypeCache {
    /// The type's objects as the released events left them.
    objects: BTreeMap<ObjectKey, Arc<Object>>,
    /// The store's events of this type not yet applied, with their release times (never
    /// decreasing: a type's events keep the store's order).
    feed: VecDeque<(SimTime, EventType, Arc<Object>)>,
}

/// An event on its way to a watcher: numbered when it leaves, so a stream's numbers
/// follow the order its events really take.
#[derive(Clone, Debug)]
pub(crate) struct HeldEvent {
    pub watch_id: u64,
    pub event: EventType,
    pub object: Arc<Object>,
    pub prev: Option<Arc<Object>>,
}

/// Every type's watch cache, and the events they hold.
#[derive(Debug, Default)]
pub(crate) struct WatchCaches {
    /// The per-event delay the server is configured with; `None`: none.
    delay: Option<DelayRange>,
    /// The lags in force on every type (overlapping ones add up).
    lag_all_ms: u64,
    /// The lags in force on one type, by kind name.
    lag_of_ms: Vec<(String, u64)>,
    /// The caches of the types that are behind.
    caches: BTreeMap<Kind, TypeCache>,
    /// Events held for watchers, released by (time, order of the write): a type's release
    /// times never decrease, so its events keep their order; two types' may cross.
    held: BTreeMap<(SimTime, u64), HeldEvent>,
    next_hold: u64,
}

impl WatchCaches {
    pub fn new(delay: Option<DelayRange>) -> Self {
        WatchCaches {
            delay: delay.filter(|d| d.hi_ms > 0),
            ..Default::default()
        }
    }

    /// The server crashed: the caches are rebuilt from etcd when it starts again, and a
    /// fault's end is not delivered to a crashed process.
    pub fn clear(&mut self) {
        self.lag_all_ms = 0;
        self.lag_of_ms.clear();
        self.caches.clear();
        self.held.clear();
    }

    /// A lag of `lag_ms` on every type (`kind` none) or on one, starting or ending.
    pub fn lag(&mut self, kind: Option<&str>, lag_ms: u64, active: bool) {
        let slot = match kind {
            None => &mut self.lag_all_ms,
            Some(k) => match self.lag_of_ms.iter().position(|(n, _)| n == k) {
                Some(i) => &mut self.lag_of_ms[i].1,
                None => {
                    self.lag_of_ms.push((k.to_string(), 0));
                    &mut self.lag_of_ms.last_mut().expect("pushed").1
                }
            },
        };
        *slot = if active {
            slot.saturating_add(lag_ms)
        } else {
            slot.saturating_sub(lag_ms)
        };
        self.lag_of_ms.retain(|(_, ms)| *ms > 0);
        // A cache caught up already is the store again.
        self.drop_caught_up();
    }

    /// Whether no type is behind, nor can fall behind: every event goes at once (the
    /// common case, checked first on every write).
    #[inline]
    pub fn idle(&self) -> bool {
        self.delay.is_none()
            && self.lag_all_ms == 0
            && self.lag_of_ms.is_empty()
            && self.caches.is_empty()
    }

    /// The fixed part of `kind`'s lag: the faults on every type and on it.
    fn lag_ms(&self, kind: Kind) -> u64 {
        let own = self
            .lag_of_ms
            .iter()
            .find(|(n, _)| n == kind.as_str())
            .map_or(0, |(_, ms)| *ms);
        self.lag_all_ms.saturating_add(own)
    }

    /// When the event of `object` written now must leave, or `None` when `kind` is not
    /// behind (it goes at once). A type that falls behind gets its cache: the store's
    /// objects of the type (`store`, already written) with this write undone.
    /// `draw(lo, hi)` draws the per-event delay.
    pub fn hold(
        &mut self,
        store: &BTreeMap<ObjectKey, Arc<Object>>,
        (event, object, prev): (EventType, &Arc<Object>, &Option<Arc<Object>>),
        now: SimTime,
        draw: impl FnOnce(u64, u64) -> u64,
    ) -> Option<SimTime> {
        let kind = object.kind();
        let lag_ms = self.lag_ms(kind);
        if lag_ms == 0 && self.delay.is_none() && !self.caches.contains_key(&kind) {
            return None;
        }
        let delay_ms = self.delay.map_or(0, |d| draw(d.lo_ms, d.hi_ms));
        let cache = self.caches.entry(kind).or_insert_with(|| {
            let mut objects: BTreeMap<ObjectKey, Arc<Object>> =
                of_kind(store, kind).map(|o| (o.key(), o.clone())).collect();
            match (event, prev) {
                (EventType::Added, _) => {
                    objects.remove(&object.key());
                }
                (_, Some(prev)) => {
                    objects.insert(prev.key(), prev.clone());
                }
                (_, None) => {
                    objects.insert(object.key(), object.clone());
                }
            }
            TypeCache {
                objects,
                feed: VecDeque::new(),
            }
        });
        let release = cache
            .feed
            .back()
            .map(|(at, _, _)| *at)
            .into_iter()
            .fold(now.plus_ms(lag_ms.saturating_add(delay_ms)), SimTime::max);
        cache.feed.push_back((release, event, object.clone()));
        Some(release)
    }

    /// Hold an event for a watcher until `release`.
    pub fn hold_for(&mut self, release: SimTime, event: HeldEvent) {
        self.held.insert((release, self.next_hold), event);
        self.next_hold += 1;
    }

    /// The held events due at `now`, in order; and the caches fed with their events.
    pub fn release(&mut self, now: SimTime, mut out: impl FnMut(HeldEvent)) {
        while let Some(entry) = self.held.first_entry() {
            if entry.key().0 > now {
                break;
            }
            out(entry.remove());
        }
        for cache in self.caches.values_mut() {
            while cache.feed.front().is_some_and(|(at, _, _)| *at <= now) {
                let (_, event, object) = cache.feed.pop_front().expect("checked");
                // Found by the object's own place: a key is made only for a new entry.
                match event {
                    EventType::Deleted => {
                        cache.objects.remove(object.place());
                    }
                    EventType::Added | EventType::Modified => {
                        match cache.objects.get_mut(object.place()) {
                            Some(cached) => *cached = object,
                            None => {
                                cache.objects.insert(object.key(), object);
                            }
                        }
                    }
                }
            }
        }
        self.drop_caught_up();
    }

    /// With no lag, no delay and nothing pending, a type's cache is the store again.
    fn drop_caught_up(&mut self) {
        if self.delay.is_some() {
            return;
        }
        let (lag_all_ms, lag_of_ms) = (self.lag_all_ms, &self.lag_of_ms);
        self.caches.retain(|kind, c| {
            let own = lag_of_ms
                .iter()
                .any(|(n, ms)| n == kind.as_str() && *ms > 0);
            lag_all_ms > 0 || own || !c.feed.is_empty()
        });
    }

    /// `kind`'s objects as its watch cache has them, with the resourceVersion they are
    /// at, or `None` when the cache is the store (`store_rv`): a type whose next pending
    /// event is at rv N is at N - 1.
    pub fn list(
        &self,
        kind: Kind,
        store_rv: u64,
    ) -> Option<(impl Iterator<Item = &Arc<Object>>, u64)> {
        let cache = self.caches.get(&kind)?;
        Some((cache.objects.values(), rv_of(cache, store_rv)))
    }

    /// `key`'s object as its kind's watch cache has it, if that cache is behind the
    /// store (`store_rv`) and at `not_older_than` or later: `Some(None)` when the cache
    /// has no such object. `None`: read the store (a cache at the store, or one not yet
    /// at `not_older_than`, which the real cacher would wait for).
    pub fn get(
        &self,
        key: &ObjectKey,
        not_older_than: u64,
        store_rv: u64,
    ) -> Option<Option<&Arc<Object>>> {
        let cache = self.caches.get(&key.kind)?;
        (rv_of(cache, store_rv) >= not_older_than).then(|| cache.objects.get(key))
    }

    /// The resourceVersion a watch of `kinds` is at: the least of theirs.
    pub fn resource_version(&self, kinds: &[Kind], store_rv: u64) -> u64 {
        kinds
            .iter()
            .filter_map(|k| self.caches.get(k))
            .map(|c| rv_of(c, store_rv))
            .fold(store_rv, u64::min)
    }

    /// The latest release time of an event held for watch `watch_id`.
    pub fn held_until(&self, watch_id: u64) -> Option<SimTime> {
        self.held
            .iter()
            .filter(|(_, e)| e.watch_id == watch_id)
            .map(|((at, _), _)| *at)
            .max()
    }
}

fn rv_of(cache: &TypeCache, store_rv: u64) -> u64 {
    match cache.feed.front() {
        Some((_, _, o)) => o.meta.resource_version.saturating_sub(1),
        None => store_rv,
    }
}
