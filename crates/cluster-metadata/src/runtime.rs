//! The async runtime openraft runs the metadata log on ([`MetadataRuntime`]): tokio, as
//! openraft's own `TokioRuntime`, except for its random numbers, which come from a
//! thread-local generator a simulation can seed ([`seed_rng`]).
//!
//! openraft draws one kind of random number: each node's election timeout
//! (`Config::new_rand_election_timeout`, uniform in `[election_timeout_min,
//! election_timeout_max)`), drawn once when the node's `Raft` is made (`EngineConfig::new`)
//! and kept for its life. Its election timer was checked on a tick every 1.5 heartbeat
//! intervals, so an election started on the first tick past the timeout: nodes whose ticks
//! were in step and whose timeouts rounded to the same tick campaigned together and split
//! the vote, again after each split. That timer is off now (`election`): this crate's
//! elector draws a new timeout from this generator for every wait. openraft's other
//! sources of nondeterminism, for a simulation to know of (openraft 0.9.25):
//! - time: every clock read goes through the runtime's `Instant` (tokio's, which a paused or
//!   simulated clock drives), except `display_ext::display_instant`, which reads
//!   `SystemTime::now()` only to print an instant in a log line;
//! - `tokio::select!` without `biased;` in `metrics::wait` (a wait's timeout against a
//!   metrics change) and in replication's backoff (its sleep against an event): tokio picks
//!   the first branch polled from its per-runtime generator, which matters only when both
//!   are ready in the same poll;
//! - the Raft core's main loop is `biased;`, and openraft keeps no `HashMap` whose order
//!   reaches the protocol.
//!
//! By default every thread's generator is seeded from the process's random hash keys (std's
//! `RandomState`, drawn from the OS), so two nodes in one process, or two processes, do not
//! draw the same timeouts; [`seed_rng`] fixes the calling thread's sequence, which is what a
//! simulation running every node on one thread needs to replay a run.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend, TokioInstant, TokioRuntime};

thread_local! {
    /// This thread's generator state (SplitMix64); `None` until first used or seeded.
    static STATE: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Seeds the calling thread's generator: every random number openraft draws on this thread
/// from now on follows from `seed`. A simulation calls it on its thread before each run.
pub fn seed_rng(seed: u64) {
    STATE.with(|state| state.set(Some(seed)));
}

fn os_seed() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x5eed);
    hasher.finish()
}

/// The next number of the calling thread's generator (SplitMix64, Vigna's: every seed
/// gives a full-period, well-mixed sequence).
pub(crate) fn next_u64() -> u64 {
    STATE.with(|state| {
        let next = state
            .get()
            .unwrap_or_else(os_seed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        state.set(Some(next));
        let mut z = next;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    })
}

/// A handle on the calling thread's generator: what [`MetadataRuntime::thread_rng`] returns.
/// Not `Send` in spirit: each draw uses the generator of the thread it runs on.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadRng;

impl rand_core::RngCore for ThreadRng {
    fn next_u32(&mut self) -> u32 {
        (next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        next_u64()
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// openraft's runtime for the metadata log: `TokioRuntime` for everything but
/// `thread_rng`, which is this module's seedable [`ThreadRng`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MetadataRuntime;

impl AsyncRuntime for MetadataRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = TokioInstant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> =
        <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = ThreadRng;
    type OneshotSender<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <TokioRuntime as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        ThreadRng
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: OptionalSend,
    {
        TokioRuntime::oneshot()
    }
}

#[cfg(test)]
mod tests {
    use openraft::Config;

    use super::*;

    fn timeouts(config: &Config) -> Vec<u64> {
        (0..20)
            .map(|_| config.new_rand_election_timeout::<MetadataRuntime>())
            .collect()
    }

    #[test]
    fn a_seeded_thread_draws_the_same_election_timeouts_again() {
        let config = Config {
            election_timeout_min: 500,
            election_timeout_max: 1000,
            ..Config::default()
        };
        seed_rng(7);
        let first = timeouts(&config);
        seed_rng(7);
        assert_eq!(timeouts(&config), first);
        assert!(first.iter().all(|t| (500..1000).contains(t)), "{first:?}");
        assert!(first.windows(2).any(|w| w[0] != w[1]), "{first:?}");
        seed_rng(8);
        assert_ne!(timeouts(&config), first);
    }

    #[test]
    fn unseeded_threads_draw_different_numbers() {
        let draw = || {
            std::thread::spawn(|| (next_u64(), next_u64()))
                .join()
                .expect("drawn")
        };
        assert_ne!(draw(), draw());
    }
}
