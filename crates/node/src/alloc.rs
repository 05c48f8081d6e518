//! The global allocator: mimalloc, behind a small per-thread cache of recently freed small
//! blocks that is reused last-in, first-out.
//!
//! mimalloc hands out a page's blocks from one free list and collects the blocks freed since
//! into a second one, which becomes the first only when it runs dry: a freed block is reused
//! only after every other block of its page. Between a shard's bursts of requests those blocks
//! leave the core's caches, so at the benchmark's fixed rates the load of a block's link in
//! `_mi_page_malloc_zero` was 10% of a shard thread's samples, on writes and on reads alike.
//! The block a request frees is the one the next request of its size should get: that is this
//! cache (as glibc's tcache and jemalloc's tcache are).
//!
//! Invariant: every block of a cached size (at most `MAX_CACHED` bytes, alignment at most
//! `ALIGN`) is allocated from mimalloc with the largest size of its class, so any block in a
//! class's stack fits every request of that class. `realloc` keeps it by moving
//! blocks of cached sizes rather than resizing them in place.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr;

use mimalloc::MiMalloc;

/// Blocks up to `SMALL_MAX` bytes come in classes `SMALL_STEP` bytes apart, larger ones up to
/// `MAX_CACHED` in classes `LARGE_STEP` apart; every cached block is aligned to `ALIGN`.
const SMALL_STEP: usize = 16;
const SMALL_MAX: usize = 256;
const LARGE_STEP: usize = 64;
/// The largest size cached: the allocations of a request (cell values, keys, a row's encoding,
/// vectors of a few elements). Larger ones are rarer and mimalloc serves them well.
const MAX_CACHED: usize = 1024;
const SMALL_CLASSES: usize = SMALL_MAX / SMALL_STEP;
const CLASSES: usize = SMALL_CLASSES + (MAX_CACHED - SMALL_MAX) / LARGE_STEP;
const ALIGN: usize = 16;
/// Blocks kept per class: a burst's worth (a write's cell values live until its group is
/// written, five per standard1 row).
const DEPTH: usize = 64;
/// Bytes a thread keeps at most, over all classes: the cache's cost in memory per thread.
const MAX_BYTES: usize = 256 * 1024;

pub struct Allocator;

struct Stacks {
    bytes: usize,
    len: [usize; CLASSES],
    blocks: [[*mut u8; DEPTH]; CLASSES],
}

/// A thread's cache. The destructor gives the blocks back to mimalloc when the thread exits;
/// after it ran, the thread allocates from mimalloc directly. Its first use registers the
/// destructor, which must not allocate through this allocator (it would find the cache not yet
/// set up and register again): on glibc std registers it with `__cxa_thread_atexit_impl`,
/// which allocates with libc's malloc.
struct Cache(UnsafeCell<Stacks>);

impl Drop for Cache {
    fn drop(&mut self) {
        let stacks = self.0.get_mut();
        for class in 0..CLASSES {
            for &block in &stacks.blocks[class][..stacks.len[class]] {
                // SAFETY: cached blocks were allocated from mimalloc with this layout and are
                // owned by the cache.
                unsafe { MiMalloc.dealloc(block, class_layout(class)) };
            }
        }
    }
}

thread_local! {
    static CACHE: Cache = const {
        Cache(UnsafeCell::new(Stacks {
            bytes: 0,
            len: [0; CLASSES],
            blocks: [[ptr::null_mut(); DEPTH]; CLASSES],
        }))
    };
}

/// The class of a layout this cache serves, or `None` for one it leaves to mimalloc.
#[inline]
fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size();
    if size == 0 || size > MAX_CACHED || layout.align() > ALIGN {
        None
    } else if size <= SMALL_MAX {
        Some((size - 1) / SMALL_STEP)
    } else {
        Some(SMALL_CLASSES + (size - SMALL_MAX - 1) / LARGE_STEP)
    }
}

/// The size every block of `class` has: the largest size of the class.
#[inline]
fn class_size(class: usize) -> usize {
    if class < SMALL_CLASSES {
        (class + 1) * SMALL_STEP
    } else {
        SMALL_MAX + (class - SMALL_CLASSES + 1) * LARGE_STEP
    }
}

#[inline]
fn class_layout(class: usize) -> Layout {
    // SAFETY: a nonzero multiple of a power-of-two alignment, far below isize::MAX.
    unsafe { Layout::from_size_align_unchecked(class_size(class), ALIGN) }
}

#[inline]
fn pop(class: usize) -> *mut u8 {
    CACHE
        .try_with(|cache| {
            // SAFETY: the cache is this thread's, and no other borrow of it is live: nothing
            // in this module allocates while holding it.
            let stacks = unsafe { &mut *cache.0.get() };
            let len = &mut stacks.len[class];
            if *len == 0 {
                return ptr::null_mut();
            }
            *len -= 1;
            stacks.bytes -= class_size(class);
            stacks.blocks[class][*len]
        })
        .unwrap_or(ptr::null_mut())
}

/// Keeps `block` for reuse; false if the class's stack or the thread's budget is full, or the
/// thread is exiting.
#[inline]
fn push(class: usize, block: *mut u8) -> bool {
    CACHE
        .try_with(|cache| {
            // SAFETY: as in `pop`.
            let stacks = unsafe { &mut *cache.0.get() };
            let len = &mut stacks.len[class];
            if *len == DEPTH || stacks.bytes + class_size(class) > MAX_BYTES {
                return false;
            }
            stacks.blocks[class][*len] = block;
            *len += 1;
            stacks.bytes += class_size(class);
            true
        })
        .unwrap_or(false)
}

// SAFETY: blocks come from mimalloc, sized and aligned for their layouts (see the module's
// invariant), and each block is either owned by the caller or by exactly one cache.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => {
                let block = pop(class);
                if block.is_null() {
                    unsafe { MiMalloc.alloc(class_layout(class)) }
                } else {
                    block
                }
            }
            None => unsafe { MiMalloc.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => {
                let block = pop(class);
                if block.is_null() {
                    unsafe { MiMalloc.alloc_zeroed(class_layout(class)) }
                } else {
                    unsafe { ptr::write_bytes(block, 0, layout.size()) };
                    block
                }
            }
            None => unsafe { MiMalloc.alloc_zeroed(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(class) => {
                if !push(class, block) {
                    unsafe { MiMalloc.dealloc(block, class_layout(class)) }
                }
            }
            None => unsafe { MiMalloc.dealloc(block, layout) },
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees the new size, rounded to the alignment, fits isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new_layout)) {
            (None, None) => unsafe { MiMalloc.realloc(block, layout, new_size) },
            (Some(old), Some(new)) if old == new => block,
            _ => {
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    unsafe {
                        ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn a_freed_small_block_is_the_next_one_of_its_class() {
        let a = Allocator;
        unsafe {
            let first = a.alloc(layout(40, 8));
            a.dealloc(first, layout(40, 8));
            // 33..=48 bytes share a class.
            let second = a.alloc(layout(33, 1));
            assert_eq!(first, second);
            a.dealloc(second, layout(33, 1));
            let other_class = a.alloc(layout(64, 8));
            assert_ne!(other_class, first);
            a.dealloc(other_class, layout(64, 8));
        }
    }

    #[test]
    fn blocks_fit_every_size_of_their_class_and_stay_aligned() {
        let a = Allocator;
        for size in 1..=MAX_CACHED + 64 {
            for align in [1, 2, 4, 8, 16, 32, 64] {
                let l = layout(size, align);
                unsafe {
                    let p = a.alloc(l);
                    assert!(!p.is_null());
                    assert!(
                        (p as usize).is_multiple_of(align),
                        "size {size} align {align}"
                    );
                    // The whole block is writable: a class's block is sized for its largest size.
                    ptr::write_bytes(p, 0xAB, size);
                    a.dealloc(p, l);
                    let z = a.alloc_zeroed(l);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    a.dealloc(z, l);
                }
            }
        }
    }

    #[test]
    fn realloc_keeps_contents_across_classes_and_into_mimalloc_sizes() {
        let a = Allocator;
        let byte = |i: usize| (i % 251) as u8;
        unsafe {
            let mut l = layout(1, 8);
            let mut p = a.alloc(l);
            *p = byte(0);
            // Grow byte by byte through every class and past the cached sizes, then shrink
            // back: the bytes both sizes have survive each move.
            for size in (2..=MAX_CACHED * 3).chain((1..MAX_CACHED * 3).rev()) {
                p = a.realloc(p, l, size);
                assert!(!p.is_null());
                for i in 0..l.size().min(size) {
                    assert_eq!(*p.add(i), byte(i), "{} -> {size} bytes", l.size());
                }
                l = layout(size, 8);
                for i in 0..size {
                    *p.add(i) = byte(i);
                }
            }
            a.dealloc(p, l);
        }
    }

    #[test]
    fn a_full_stack_and_an_exiting_thread_give_blocks_back() {
        // More frees than a stack holds, then the thread exits: every path through `dealloc`
        // and the cache's destructor runs (mimalloc would abort on a double free).
        std::thread::spawn(|| {
            let a = Allocator;
            let blocks: Vec<*mut u8> = (0..DEPTH * 3)
                .map(|_| unsafe { a.alloc(layout(24, 8)) })
                .collect();
            for &b in &blocks {
                unsafe { a.dealloc(b, layout(24, 8)) };
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_keeps_at_most_its_budget() {
        std::thread::spawn(|| {
            let a = Allocator;
            for class in 0..CLASSES {
                let l = class_layout(class);
                let blocks: Vec<*mut u8> = (0..DEPTH).map(|_| unsafe { a.alloc(l) }).collect();
                for &b in &blocks {
                    unsafe { a.dealloc(b, l) };
                }
            }
            let (bytes, counted) = CACHE.with(|c| {
                let stacks = unsafe { &*c.0.get() };
                let counted: usize = (0..CLASSES).map(|k| stacks.len[k] * class_size(k)).sum();
                (stacks.bytes, counted)
            });
            assert_eq!(bytes, counted);
            assert!(
                bytes <= MAX_BYTES && bytes > MAX_BYTES - MAX_CACHED,
                "{bytes}"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn classes_are_ordered_and_cover_their_sizes() {
        let mut previous = 0;
        for size in 1..=MAX_CACHED {
            let class = class_of(Layout::from_size_align(size, 8).unwrap()).unwrap();
            assert!(class < CLASSES);
            assert!(class_size(class) >= size && class_size(class).is_multiple_of(ALIGN));
            assert!(class >= previous);
            previous = class;
        }
        assert_eq!(previous, CLASSES - 1);
        assert_eq!(
            class_of(Layout::from_size_align(MAX_CACHED + 1, 8).unwrap()),
            None
        );
    }

    #[test]
    fn blocks_freed_on_another_thread_are_reused_there() {
        let a = Allocator;
        let block = unsafe { a.alloc(layout(100, 8)) } as usize;
        let reused = std::thread::spawn(move || unsafe {
            a.dealloc(block as *mut u8, layout(100, 8));
            let again = a.alloc(layout(97, 4)) as usize;
            a.dealloc(again as *mut u8, layout(97, 4));
            again
        })
        .join()
        .unwrap();
        assert_eq!(reused, block);
    }
}
