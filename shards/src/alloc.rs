//! The process allocator: mimalloc, except that single allocations of
//! [`RESERVE_ONLY_BYTES_MIN`] or more are lazily-committed anonymous
//! mappings (`MAP_NORESERVE`).
//!
//! Why: decoders of wire formats (kafka-protocol's array decoders among
//! them) pre-size vectors from element counts read off the wire. A 12-byte
//! request claiming two billion elements asks for tens of GiB at once; a
//! normal allocator refuses, and a refused allocation aborts the process.
//! Reserved but untouched pages cost nothing, and the decoder fails on the
//! short buffer after touching at most as many bytes as the frame holds, so
//! hostile counts become a decode error instead of a crash. Memory actually
//! used stays bounded by the frame limits, as before.
//!
//! (With `vm.overcommit_memory=2` the kernel counts even reserved pages;
//! there such requests still fail.)

use std::alloc::{GlobalAlloc, Layout};

/// Allocations at least this large are reserved, not committed.
pub const RESERVE_ONLY_BYTES_MIN: usize = 1 << 30;
const PAGE_BYTES: usize = 4096;

/// mimalloc's `mi_option_purge_delay` (same index in its v2 and v3 enums).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// Freed memory is returned to the OS only after this long unused. The
/// default (10 ms) made every large fetch buffer fault in freshly zeroed
/// pages (the kernel's clear_page was 18 % of the agent's CPU under a
/// consume load); a second of reuse keeps RSS at the recent peak.
pub const PURGE_DELAY_MS: std::os::raw::c_long = 1000;

/// mimalloc's `mi_option_arena_purge_mult` (same index in v2 and v3).
const MI_OPTION_ARENA_PURGE_MULT: libmimalloc_sys::mi_option_t = 24;
/// Whole arena ranges freed are returned to the OS only after
/// `PURGE_DELAY_MS` × this (1,000 s; mimalloc's default is 10 ×): memory
/// faulted in ahead ([`prefault`]) stays for the agent to reuse through
/// idle minutes. RSS stays at the recent peak, which the agent's limits
/// bound.
pub const ARENA_PURGE_MULT: std::os::raw::c_long = 1000;

/// Sets the allocator's options; call first thing in `main`.
pub fn tune() {
    // SAFETY: mi_option_set only stores an integer option; it is
    // thread-safe and valid at any time.
    unsafe {
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS);
        libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_PURGE_MULT, ARENA_PURGE_MULT);
    }
}

/// Faults `bytes` of heap memory in now and frees it, for later
/// allocations (any thread's) to reuse without faulting while serving.
/// In 64 KiB pieces, the size measured to work; 1 MiB blocks freed the
/// same way did not spare the shards their faults (mimalloc presumably
/// returns blocks that large to the OS on free;
/// benches/results/2026-12-06-ack-tail.md).
pub fn prefault(bytes: usize) {
    const PIECE: usize = 64 << 10;
    let pieces: Vec<Vec<u8>> = (0..bytes / PIECE)
        .map(|_| {
            let mut piece = vec![0u8; PIECE];
            // A write per page (not of 0: the compiler may know fresh
            // memory is zero and skip it).
            for b in piece.iter_mut().step_by(PAGE_BYTES) {
                *b = 1;
            }
            std::hint::black_box(&mut piece);
            piece
        })
        .collect();
    drop(pieces);
}

/// Whether transparent huge pages are off for this process
/// (`MIMALLOC_ALLOW_THP=0` turns them off at start, through `prctl`).
pub fn transparent_huge_pages_disabled() -> bool {
    // SAFETY: PR_GET_THP_DISABLE takes no pointer and only reads a flag of
    // this process.
    unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
}

pub struct GuardedAlloc;

fn reserve_only(layout: &Layout) -> bool {
    layout.size() >= RESERVE_ONLY_BYTES_MIN && layout.align() <= PAGE_BYTES
}

// SAFETY: every method forwards to mimalloc, which upholds GlobalAlloc's
// contract, except for layouts that `reserve_only` selects: those get a fresh
// private anonymous mapping of at least `size` bytes, page-aligned (so any
// alignment up to a page holds), zero-filled, and are released with munmap of
// the same size. `reserve_only` depends only on the layout, and dealloc and
// realloc receive the layout the block was allocated with, so each block is
// always released by the allocator that made it.
unsafe impl GlobalAlloc for GuardedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if reserve_only(&layout) {
            // SAFETY: an anonymous private mapping with no address hint
            // touches no existing memory; failure is reported as null.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    layout.size(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            return p.cast();
        }
        // SAFETY: forwarded with the caller's valid layout.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if reserve_only(&layout) {
            // SAFETY: fresh anonymous mappings are zero-filled.
            return unsafe { self.alloc(layout) };
        }
        // SAFETY: forwarded with the caller's valid layout.
        unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if reserve_only(&layout) {
            // SAFETY: `ptr` came from our mmap of exactly `layout.size()`.
            unsafe {
                libc::munmap(ptr.cast(), layout.size());
            }
            return;
        }
        // SAFETY: `ptr` came from mimalloc with this layout.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        if !reserve_only(&layout) && !reserve_only(&new_layout) {
            // SAFETY: both sides are mimalloc's; arguments are the caller's.
            return unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) };
        }
        // SAFETY: moving between allocators: allocate, copy the common
        // prefix, free the old block with its own layout.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn transparent_huge_pages_state_is_read_back() {
        // SAFETY: integer arguments only; turns THP off for this test
        // process, which changes no test's outcome.
        assert_eq!(
            unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) },
            0
        );
        assert!(super::transparent_huge_pages_disabled());
    }

    #[test]
    fn hostile_capacity_is_reserved_not_committed() {
        // 64 GiB of capacity, as a decoder would ask for from a forged count.
        let mut v: Vec<u64> = Vec::with_capacity(8 << 30);
        v.extend(0..1000u64);
        assert_eq!(v.iter().sum::<u64>(), 499_500);
        v.shrink_to_fit();
        assert_eq!(v.len(), 1000);
    }
}

#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: GuardedAlloc = GuardedAlloc;
