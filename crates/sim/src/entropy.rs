//! The run's entropy: the process's `getrandom`, which every random source a library seeds
//! from the operating system ends in, answered from a generator seeded by the run on the
//! run's thread.
//!
//! Why: chitchat picks its gossip partners with `rand::rng()` (rand 0.10's `ThreadRng`, seeded
//! once per thread from getrandom 0.4) and walks std `HashSet`s whose order follows
//! `RandomState`'s per-thread keys (std draws them from the same source), and neither takes an
//! injected generator. Both find libc's `getrandom` at run time, by name: getrandom 0.4 with
//! `dlsym(RTLD_DEFAULT, "getrandom")`, std through its weak-symbol lookup, which is `dlsym`
//! too. The `getrandom` below is found first when the executable exports it (`build.rs`
//! passes `--export-dynamic-symbol=getrandom` to this crate's test binaries only; nothing is
//! rebuilt). On a thread [`seed_thread`] seeded it fills buffers from SplitMix64; on any other
//! thread it is the `getrandom` system call, so the rest of the process keeps real entropy.
//!
//! Each run is on a thread of its own (`cluster::run`), seeded before anything on it draws:
//! `ThreadRng` and `RandomState`'s keys are made once per thread, at first use, so a thread
//! reused from an earlier run would start from that run's state.

use std::cell::Cell;
use std::ffi::{c_uint, c_void};

thread_local! {
    /// The seeded generator's state (`None`: this thread has real entropy).
    static STATE: Cell<Option<u64>> = const { Cell::new(None) };
}

/// From now on `getrandom` on the calling thread answers from a generator seeded with `seed`.
pub fn seed_thread(seed: u64) {
    STATE.with(|state| state.set(Some(seed)));
}

/// Whether this process's `getrandom` is the one below (the executable exports it): false in
/// a binary built without `build.rs`'s link argument, where seeding changes nothing for the
/// libraries that look it up.
pub fn is_interposed() -> bool {
    // SAFETY: a lookup by a NUL-terminated name; the pointer is only compared.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getrandom".as_ptr()) };
    found == getrandom as *const () as *mut c_void
}

/// SplitMix64's step (Vigna's), as `messaging::SplitMix64`.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// libc's `getrandom(2)` wrapper, interposed (see the module's header): `length` bytes at
/// `buffer` from the thread's seeded generator, or from the system call on an unseeded thread.
///
/// # Safety
/// As `getrandom(2)`: `buffer` is valid for writes of `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn getrandom(buffer: *mut c_void, length: usize, flags: c_uint) -> isize {
    // `try_with`: during the thread's teardown the state is gone; real entropy then.
    let seeded = STATE
        .try_with(|state| {
            let mut current = state.get()?;
            // SAFETY: the caller's contract.
            let bytes = unsafe { std::slice::from_raw_parts_mut(buffer.cast::<u8>(), length) };
            for chunk in bytes.chunks_mut(8) {
                let word = next(&mut current).to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
            state.set(Some(current));
            Some(())
        })
        .ok()
        .flatten();
    if seeded.is_some() {
        return length as isize;
    }
    // SAFETY: the caller's contract, passed on to the kernel.
    unsafe { libc::syscall(libc::SYS_getrandom, buffer, length, flags) as isize }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The iteration order of a `HashSet` made first thing on a fresh thread seeded with
    /// `seed` (its `RandomState` keys drawn there).
    fn order_on_a_fresh_thread(seed: Option<u64>) -> Vec<u32> {
        std::thread::spawn(move || {
            if let Some(seed) = seed {
                seed_thread(seed);
            }
            let set: HashSet<u32> = (0..64).collect();
            set.into_iter().collect()
        })
        .join()
        .expect("the thread")
    }

    #[test]
    fn a_seeded_thread_draws_the_same_entropy_and_others_real_entropy() {
        assert!(
            is_interposed(),
            "the test binary does not export getrandom (build.rs)"
        );
        // std's RandomState goes through it: the same seed, the same order.
        assert_eq!(
            order_on_a_fresh_thread(Some(7)),
            order_on_a_fresh_thread(Some(7))
        );
        // Unseeded threads differ (64! orders: equal by chance essentially never).
        assert_ne!(order_on_a_fresh_thread(None), order_on_a_fresh_thread(None));
        // Directly, as getrandom 0.4 calls it.
        let draw = |seed: Option<u64>| {
            std::thread::spawn(move || {
                if let Some(seed) = seed {
                    seed_thread(seed);
                }
                let mut buffer = [0u8; 13];
                // SAFETY: a valid buffer of its length.
                let n = unsafe { getrandom(buffer.as_mut_ptr().cast(), buffer.len(), 0) };
                assert_eq!(n, 13);
                buffer
            })
            .join()
            .expect("the thread")
        };
        assert_eq!(draw(Some(3)), draw(Some(3)));
        assert_ne!(draw(Some(3)), draw(Some(4)));
        assert_ne!(draw(None), draw(None));
    }
}
