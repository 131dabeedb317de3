//! The event queue: a min-heap of (time, tie-break, sequence) keys over a slab of payloads.
//!
//! Keys are small and `Copy`, so heap sifts never move payloads; the slab reuses its slots,
//! so a steady-state run allocates nothing here. The sequence number makes every key unique,
//! so the order is total and never depends on memory layout.

use crate::time::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The ordering key of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub time: SimTime,
    /// Seeded draw: decides between events due at the same instant.
    pub tiebreak: u32,
    /// Insertion order: decides the rest (and keeps FIFO links ordered).
    pub seq: u64,
}

#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(Key, u32)>>,
    slots: Vec<Option<E>>,
    free: Vec<u32>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<E> EventQueue<E> {
    // Inlined so the event is built in its slot rather than on the stack and copied in
    // (the copy's wide loads stalled on the narrow stores that had just built it).
    #[inline(always)]
    pub fn push(&mut self, key: Key, event: E) {
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
        self.heap.push(Reverse((key, slot)));
    }

    pub fn peek_key(&self) -> Option<Key> {
        self.heap.peek().map(|Reverse((k, _))| *k)
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Key, E)> {
        let Reverse((key, slot)) = self.heap.pop()?;
        let event = self.slots[slot as usize]
            .take()
            .expect("queue slot emptied twice");
        self.free.push(slot);
        Some((key, event))
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_by_time_then_tiebreak_then_seq() {
        let mut q = EventQueue::default();
        let k = |t, tb, s| Key {
            time: SimTime(t),
            tiebreak: tb,
            seq: s,
        };
        q.push(k(5, 0, 0), "late");
        q.push(k(1, 9, 1), "early-b");
        q.push(k(1, 3, 2), "early-a");
        q.push(k(1, 3, 3), "early-a2");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ["early-a", "early-a2", "early-b", "late"]);
        assert!(q.is_empty());
        // Slots are reused.
        q.push(k(1, 0, 4), "again");
        assert_eq!(q.slots.len(), 4);
    }
}
