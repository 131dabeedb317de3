//! The event queue: a min-heap of (time, tie-break, sequence) keys over a slab of payloads.
//!
//! Keys are small and `Copy`, so heap sifts never move payloads; the slab reuses its slots,
//! so a steady-state run allocates nothing here. The queue numbers what it is given, so
//! every key is unique: the order is total and never depends on memory layout.
//!
//! The heap is 4-ary, its keys one 128-bit integer each (time, tie-break, a 32-bit
//! sequence number) in an array of their own: a sift looks at a node's four children in
//! one cache line, and the heap is half as deep as a binary one.

use crate::time::SimTime;

/// The ordering key of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub time: SimTime,
    /// Seeded draw: decides between events due at the same instant.
    pub tiebreak: u32,
    /// Insertion order: decides the rest (and keeps FIFO links ordered). Counted from 0
    /// and renumbered, in order, when it would pass `u32::MAX`.
    pub seq: u32,
}

impl Key {
    #[inline(always)]
    fn packed(self) -> u128 {
        (u128::from(self.time.0) << 64) | (u128::from(self.tiebreak) << 32) | u128::from(self.seq)
    }

    #[inline(always)]
    fn unpacked(k: u128) -> Key {
        Key {
            time: SimTime((k >> 64) as u64),
            tiebreak: (k >> 32) as u32,
            seq: k as u32,
        }
    }
}

const ARITY: usize = 4;
// `sift_down` picks the least of a full set of children as two pairs.
const _: () = assert!(ARITY == 4);

#[derive(Debug)]
pub struct EventQueue<E> {
    /// The heap's keys, packed ([`Key::packed`]), and beside each the slot of its payload.
    keys: Vec<u128>,
    at: Vec<u32>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
    /// The next sequence number.
    seq: u32,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            keys: Vec::new(),
            at: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Queue `event` at `time`, after every event queued before it with the same time and
    /// tie-break.
    // Inlined so the event is built in its slot rather than on the stack and copied in
    // (the copy's wide loads stalled on the narrow stores that had just built it).
    #[inline(always)]
    pub fn push(&mut self, time: SimTime, tiebreak: u32, event: E) {
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(event);
                i
            }
            None => {
                self.slots.push(Some(event));
                u32::try_from(self.slots.len() - 1).expect("event queue over u32::MAX events")
            }
        };
        if self.seq == u32::MAX {
            self.renumber();
        }
        let key = Key {
            time,
            tiebreak,
            seq: self.seq,
        };
        self.seq += 1;
        self.sift_up(key.packed(), slot);
    }

    fn sift_up(&mut self, key: u128, slot: u32) {
        let mut i = self.keys.len();
        self.keys.push(key);
        self.at.push(slot);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let pk = self.keys[parent];
            if pk < key {
                break;
            }
            self.keys[i] = pk;
            self.at[i] = self.at[parent];
            i = parent;
        }
        self.keys[i] = key;
        self.at[i] = slot;
    }

    /// Put `key` at the root (the root's entry already taken) and sift it down.
    fn sift_down(&mut self, key: u128, slot: u32) {
        let (keys, at) = (&mut self.keys[..], &mut self.at[..]);
        let n = keys.len();
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            let (min, min_key) = if let Some(k) = keys.get(first..first + ARITY) {
                // Four children, the least found as two pairs and their winners: the
                // first two comparisons do not wait on each other. Keys are distinct
                // (each has its own sequence number), so which of equal ones wins
                // never arises.
                let (a, ka) = if k[1] < k[0] { (1, k[1]) } else { (0, k[0]) };
                let (b, kb) = if k[3] < k[2] { (3, k[3]) } else { (2, k[2]) };
                if kb < ka {
                    (first + b, kb)
                } else {
                    (first + a, ka)
                }
            } else if first < n {
                let mut min = first;
                for (c, &k) in keys.iter().enumerate().skip(first + 1) {
                    if k < keys[min] {
                        min = c;
                    }
                }
                (min, keys[min])
            } else {
                break;
            };
            if key < min_key {
                break;
            }
            keys[i] = min_key;
            at[i] = at[min];
            i = min;
        }
        keys[i] = key;
        at[i] = slot;
    }

    /// Number the queued events 0, 1, .. in their order, so sequence numbers go on
    /// without wrapping: the order of every pair of events is what it was.
    #[cold]
    fn renumber(&mut self) {
        let mut entries: Vec<(u128, u32)> = self
            .keys
            .iter()
            .copied()
            .zip(self.at.iter().copied())
            .collect();
        entries.sort_unstable();
        self.keys.clear();
        self.at.clear();
        for (seq, (key, slot)) in (0u32..).zip(entries) {
            // Sorted: each key goes last and stays there.
            let mut k = Key::unpacked(key);
            k.seq = seq;
            self.keys.push(k.packed());
            self.at.push(slot);
        }
        self.seq = u32::try_from(self.keys.len()).expect("fewer than u32::MAX queued events");
    }

    pub fn peek_key(&self) -> Option<Key> {
        self.keys.first().map(|&k| Key::unpacked(k))
    }

    /// The earliest time queued.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        self.keys.first().map(|&k| SimTime((k >> 64) as u64))
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Key, E)> {
        let (&key, &slot) = (self.keys.first()?, self.at.first()?);
        let last_key = self.keys.pop().expect("not empty");
        let last_slot = self.at.pop().expect("not empty");
        if !self.keys.is_empty() {
            self.sift_down(last_key, last_slot);
        }
        let event = self.slots[slot as usize]
            .take()
            .expect("queue slot emptied twice");
        self.free.push(slot);
        Some((Key::unpacked(key), event))
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn drain<E>(q: &mut EventQueue<E>) -> Vec<E> {
        std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect()
    }

    #[test]
    fn pops_by_time_then_tiebreak_then_insertion() {
        let mut q = EventQueue::default();
        q.push(SimTime(5), 0, "late");
        q.push(SimTime(1), 9, "early-b");
        q.push(SimTime(1), 3, "early-a");
        q.push(SimTime(1), 3, "early-a2");
        q.push(SimTime(u64::MAX), u32::MAX, "last");
        q.push(SimTime(1), 0, "due-earlier");
        assert_eq!(
            drain(&mut q),
            [
                "due-earlier",
                "early-a",
                "early-a2",
                "early-b",
                "late",
                "last"
            ]
        );
        assert!(q.is_empty());
        // Slots are reused.
        q.push(SimTime(1), 0, "again");
        assert_eq!(q.slots.len(), 6);
    }

    /// Pushes and pops mixed at random pop what a sorted list of (time, tie-break,
    /// insertion) would.
    #[test]
    fn pops_in_the_order_of_a_sorted_list() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut q = EventQueue::default();
        let mut model: Vec<(u64, u32, u64)> = Vec::new();
        let mut n = 0u64;
        for _ in 0..20_000 {
            if rng.next_u32() % 3 > 0 || model.is_empty() {
                let (t, tb) = (u64::from(rng.next_u32() % 50), rng.next_u32() % 4);
                q.push(SimTime(t), tb, n);
                model.push((t, tb, n));
                n += 1;
            } else {
                model.sort();
                let (t, tb, id) = model.remove(0);
                let (key, got) = q.pop().expect("not empty");
                assert_eq!((key.time, key.tiebreak, got), (SimTime(t), tb, id));
            }
        }
    }

    #[test]
    fn sequence_numbers_renumbered_at_their_limit_keep_the_order() {
        let mut q = EventQueue {
            seq: u32::MAX - 3,
            ..EventQueue::default()
        };
        for (i, name) in ["a0", "a1", "a2"].into_iter().enumerate() {
            q.push(SimTime(7), 0, name);
            q.push(SimTime(3 + i as u64), 5, "other");
        }
        // The fourth push reached the limit and renumbered the queue from 0.
        q.push(SimTime(7), 0, "a3");
        assert!(q.seq < 10, "renumbered from 0: {}", q.seq);
        q.push(SimTime(7), 0, "a4");
        assert_eq!(
            drain(&mut q),
            ["other", "other", "other", "a0", "a1", "a2", "a3", "a4"]
        );
    }
}
