//! Runs spread over threads with results that do not depend on how many.
//!
//! Threads claim indices in increasing order from a shared counter, and each result is
//! handed on in index order ([`run_streamed`]): a result that finishes early waits in a
//! reorder window until every smaller index has been handed on, so the sequence a
//! caller sees is the same for one thread or eight. The window is bounded
//! ([`WINDOW`]): a thread that would run too far ahead of the slowest run waits, so
//! memory stays flat however long the range (a million seeds, or `u64::MAX` of them).
//! With `stop_on_first`, no thread claims an index above the smallest failing one found
//! so far, and nothing above it is handed on: every index below it ran, so the cut is
//! the same whatever the threads did. Fuzz campaigns (seeds) and searches (plans) both
//! run this way.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

/// How far past the oldest unfinished index a thread may claim: the most results that
/// wait to be handed on at once.
pub const WINDOW: u64 = 1_024;

/// Results waiting for a smaller index, and where the hand-on stands.
struct Reorder<T> {
    /// The next index to hand on.
    next: u64,
    pending: BTreeMap<u64, T>,
    /// Handed on a failure with `stop_on_first`: nothing more is.
    stopped: bool,
    /// `claim` said no: the indices handed on end at the first one that did not run.
    ended: bool,
}

/// Run `task(i)` for `i` in `0..n` on `jobs` threads; `task` says whether `i` failed.
/// `claim` is asked before each new index (a wall-clock budget says no once spent; the
/// indices that ran are then a prefix). `sink` gets each `(i, result)` in increasing
/// `i`, with no gap, up to the smallest failing index if `stop_on_first`.
pub fn run_streamed<T: Send>(
    n: u64,
    jobs: usize,
    stop_on_first: bool,
    claim: &(dyn Fn() -> bool + Sync),
    task: &(dyn Fn(u64) -> (T, bool) + Sync),
    sink: &mut (dyn FnMut(u64, T) + Send),
) {
    let next = AtomicU64::new(0);
    // The smallest failing index so far: threads stop claiming past it.
    let cutoff = AtomicU64::new(u64::MAX);
    let reorder = Mutex::new((
        Reorder {
            next: 0,
            pending: BTreeMap::new(),
            stopped: false,
            ended: false,
        },
        sink,
    ));
    let moved = Condvar::new();
    let threads = (jobs.max(1) as u64).min(n.max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n || (stop_on_first && i > cutoff.load(Ordering::SeqCst)) {
                        break;
                    }
                    // Wait while this index is a window ahead of the hand-on. The
                    // thread holding the smallest index never waits, so this ends,
                    // unless that index will never run (the claims ended, or it lies
                    // past a failure): then nothing after it is handed on anyway.
                    {
                        let mut guard = reorder.lock().expect("no thread panics holding it");
                        loop {
                            if guard.0.ended || (stop_on_first && i > cutoff.load(Ordering::SeqCst))
                            {
                                return;
                            }
                            if i < guard.0.next.saturating_add(WINDOW) {
                                break;
                            }
                            guard = moved.wait(guard).expect("no thread panics holding it");
                        }
                    }
                    // A claimed index that does not run is a hole in the prefix: `claim`
                    // says no, and no index from here on runs.
                    if !claim() {
                        next.fetch_max(n, Ordering::SeqCst);
                        reorder.lock().expect("no thread panics holding it").0.ended = true;
                        moved.notify_all();
                        break;
                    }
                    let (result, failed) = task(i);
                    if failed && stop_on_first {
                        cutoff.fetch_min(i, Ordering::SeqCst);
                    }
                    let mut guard = reorder.lock().expect("no thread panics holding it");
                    let (order, sink) = &mut *guard;
                    order.pending.insert(i, result);
                    while let Some(r) = order.pending.remove(&order.next) {
                        let index = order.next;
                        order.next += 1;
                        if order.stopped {
                            continue;
                        }
                        sink(index, r);
                        if stop_on_first && index == cutoff.load(Ordering::SeqCst) {
                            order.stopped = true;
                        }
                    }
                    drop(guard);
                    moved.notify_all();
                }
            });
        }
    });
}

/// [`run_streamed`] into a vector: `(i, result)` sorted by `i` (for a bounded `n`, such
/// as a search's plans).
pub fn run_ordered<T: Send>(
    n: usize,
    jobs: usize,
    stop_on_first: bool,
    claim: &(dyn Fn() -> bool + Sync),
    task: &(dyn Fn(usize) -> (T, bool) + Sync),
) -> Vec<(usize, T)> {
    // Grown as results come: `n` may be a large bound that a stop cuts short.
    let mut results = Vec::new();
    run_streamed(
        n as u64,
        jobs,
        stop_on_first,
        claim,
        &|i| task(i as usize),
        &mut |i, r| results.push((i as usize, r)),
    );
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_order_whatever_the_threads() {
        for jobs in [1, 2, 4] {
            let got = run_ordered(500, jobs, false, &|| true, &|i| (i * 3, false));
            let want: Vec<(usize, usize)> = (0..500).map(|i| (i, i * 3)).collect();
            assert_eq!(got, want, "jobs {jobs}");
        }
    }

    #[test]
    fn stop_on_first_cuts_at_the_smallest_failure() {
        for jobs in [1, 2, 4] {
            let got = run_ordered(100, jobs, true, &|| true, &|i| ((), i == 37 || i == 60));
            assert_eq!(got.len(), 38, "jobs {jobs}");
            assert_eq!(got.last().map(|(i, _)| *i), Some(37));
        }
    }

    #[test]
    fn a_huge_range_streams_in_a_bounded_window() {
        // u64::MAX indices: nothing is collected up front; the claim ends it.
        let claimed = AtomicU64::new(0);
        let claim = || claimed.fetch_add(1, Ordering::SeqCst) < 5_000;
        let mut seen = 0u64;
        run_streamed(u64::MAX, 2, false, &claim, &|i| (i, false), &mut |i, r| {
            assert_eq!(i, seen);
            assert_eq!(r, i);
            seen += 1;
        });
        // How far the prefix reaches depends on which thread asked last.
        assert!((1..=5_000).contains(&seen), "{seen}");
    }
}
