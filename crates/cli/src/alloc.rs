//! The allocator the binaries install: mimalloc, asked for a plain block whenever a plain
//! block already has the alignment a request needs.
//!
//! A run allocates on every write and every family message, and mimalloc's thread-local
//! free lists make that cheaper than glibc's malloc (docs/PERFORMANCE.md). The `mimalloc`
//! crate's `MiMalloc` hands every request to `mi_malloc_aligned`, whose fast path in
//! mimalloc 3 (src/alloc-aligned.c) takes a block only from a size class's free list as
//! it stands; when that list is empty, a class whose block size is not a power of two
//! (24, 40, 48 bytes ...) falls to over-allocation from a larger class, a path that does
//! not collect the class's freed blocks back into its list, so the class tends to stay
//! on it (19 % of a KCP run's allocations; purpleprotocol/mimalloc_rust PR 170 and
//! reussir-lang/reussir PR 339 measured the same). A plain `mi_malloc` block is at least
//! 8-aligned (size classes are multiples of 8, a page's first block is 16-aligned), and
//! 16-aligned when the size asked is a multiple of 16 (every class it falls in is one):
//! so alignments up to 16 go plain when the size is a multiple of the alignment, as
//! every Rust type's size is.
//!
//! Allocation addresses never reach an outcome, so histories do not depend on it.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOCATOR: reconsim::alloc::Allocator = reconsim::alloc::Allocator;
//! ```

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// mimalloc's `MI_MAX_ALIGN_SIZE`: the most a plain block's alignment is relied on for.
const PLAIN_ALIGN_MAX: usize = 16;

/// mimalloc as a Rust global allocator (see the module's doc for why not `MiMalloc`).
pub struct Allocator;

/// Whether a plain block of `size` bytes has alignment `align`.
#[inline(always)]
fn plain(size: usize, align: usize) -> bool {
    align <= PLAIN_ALIGN_MAX && size.is_multiple_of(align)
}

// SAFETY: every block comes from mimalloc, which returns null when out of memory and
// frees any block it returned through `mi_free`; `plain` keeps the alignment contract.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain C calls with a non-zero size (GlobalAlloc's contract).
        unsafe {
            if plain(layout.size(), layout.align()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            if plain(layout.size(), layout.align()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (GlobalAlloc's contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; a plain reallocation
        // either keeps the block (its alignment unchanged) or moves to a plain one.
        unsafe {
            if plain(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size up to 1,100 bytes at every alignment up to 4,096: each block has its
    /// alignment, holds what was written, and keeps it through a growing and a
    /// shrinking reallocation (to a size that may no longer be plain).
    #[test]
    fn every_block_has_its_alignment_and_keeps_its_bytes() {
        let a = Allocator;
        for align in (0..13).map(|p| 1usize << p) {
            for size in 1..1_100 {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero layout; every block is freed with its layout.
                unsafe {
                    let p = if size % 3 == 0 {
                        a.alloc_zeroed(layout)
                    } else {
                        a.alloc(layout)
                    };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    if size % 3 == 0 {
                        assert!((0..size).all(|i| *p.add(i) == 0), "zeroed {size}");
                    }
                    for i in 0..size {
                        *p.add(i) = (i % 251) as u8;
                    }
                    let grown = size * 2 + 8;
                    let q = a.realloc(p, layout, grown);
                    assert_eq!(q as usize % align, 0, "grown {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == (i % 251) as u8));
                    let shrunk = (size / 2).max(1);
                    let grown_layout = Layout::from_size_align(grown, align).unwrap();
                    let r = a.realloc(q, grown_layout, shrunk);
                    assert_eq!(r as usize % align, 0, "shrunk {size} align {align}");
                    assert!((0..shrunk).all(|i| *r.add(i) == (i % 251) as u8));
                    a.dealloc(r, Layout::from_size_align(shrunk, align).unwrap());
                }
            }
        }
    }

    #[test]
    fn plain_only_where_a_plain_block_has_the_alignment() {
        assert!(plain(24, 8) && plain(48, 16) && plain(3, 1) && plain(6, 2));
        assert!(!plain(24, 16), "a 24-byte class is only 8-aligned");
        assert!(!plain(64, 32) && !plain(4096, 4096));
    }
}
