//! Runs spread over threads with results that do not depend on how many.
//!
//! Threads claim indices in increasing order from a shared counter and every result is
//! kept by index, so the results (sorted) are the same for one thread or eight. With
//! `stop_on_first`, no thread claims an index above the smallest failing one found so
//! far, and results above it that some thread already had are dropped: every index below
//! it ran, so the cut is the same whatever the threads did. Fuzz campaigns (seeds) and
//! searches (plans) both run this way.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Run `task(i)` for `i` in `0..n` on `jobs` threads; `task` says whether `i` failed.
/// `claim` is asked before each new index (a wall-clock budget says no once spent; the
/// indices that ran are then a prefix). Returns `(i, result)` sorted by `i`.
pub fn run_ordered<T: Send>(
    n: usize,
    jobs: usize,
    stop_on_first: bool,
    claim: &(dyn Fn() -> bool + Sync),
    task: &(dyn Fn(usize) -> (T, bool) + Sync),
) -> Vec<(usize, T)> {
    let next = AtomicUsize::new(0);
    // The smallest failing index so far: threads stop claiming past it.
    let cutoff = AtomicUsize::new(usize::MAX);
    let results: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1).min(n.max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n || (stop_on_first && i > cutoff.load(Ordering::SeqCst)) || !claim() {
                        break;
                    }
                    let (result, failed) = task(i);
                    if failed && stop_on_first {
                        cutoff.fetch_min(i, Ordering::SeqCst);
                    }
                    results
                        .lock()
                        .expect("no thread panics holding it")
                        .push((i, result));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("threads are done");
    results.sort_by_key(|(i, _)| *i);
    if stop_on_first {
        let cut = cutoff.into_inner();
        results.retain(|(i, _)| *i <= cut);
    }
    results
}
