//! Write timestamps the coordinator assigns when the client gives none: a per-node clock in
//! microseconds since the epoch, strictly increasing (Cassandra's `ClientState.getTimestamp`),
//! over a wall clock that a simulation can replace.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock write timestamps are read from. Injectable so that a deterministic
/// simulation (or a test) controls time.
pub trait WallClock: Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_micros(&self) -> i64;
}

/// The operating system's clock.
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now_micros(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
    }
}

/// A wall clock that follows tokio's clock (which a simulator or paused time drives) from a
/// chosen start, with a skew that can be changed while it runs: a simulated node's clock,
/// ahead of or behind the others'.
pub struct TokioWallClock {
    /// Microseconds since the epoch at `base`.
    start_micros: i64,
    base: tokio::time::Instant,
    skew_micros: AtomicI64,
}

impl TokioWallClock {
    /// A clock reading `start_micros` now (tokio's now), without skew.
    pub fn starting_at(start_micros: i64) -> TokioWallClock {
        TokioWallClock {
            start_micros,
            base: tokio::time::Instant::now(),
            skew_micros: AtomicI64::new(0),
        }
    }

    /// Sets how far ahead (positive) or behind (negative) of tokio's time this clock reads.
    pub fn set_skew_micros(&self, skew_micros: i64) {
        self.skew_micros.store(skew_micros, Ordering::Relaxed);
    }
}

impl WallClock for TokioWallClock {
    fn now_micros(&self) -> i64 {
        let elapsed = i64::try_from(self.base.elapsed().as_micros()).unwrap_or(i64::MAX);
        self.start_micros
            .saturating_add(elapsed)
            .saturating_add(self.skew_micros.load(Ordering::Relaxed))
    }
}

/// This node's write timestamps: the wall clock's microseconds, but always greater than the
/// last one handed out, so two writes coordinated here never tie (a client's quick UPDATE then
/// DELETE keep their order) even when the wall clock stands still or steps back.
pub struct TimestampClock {
    clock: Arc<dyn WallClock>,
    last_micros: AtomicI64,
}

impl TimestampClock {
    pub fn new(clock: Arc<dyn WallClock>) -> TimestampClock {
        TimestampClock {
            clock,
            last_micros: AtomicI64::new(i64::MIN),
        }
    }

    /// The wall clock's microseconds now (not a timestamp: two calls may tie).
    pub fn now_micros(&self) -> i64 {
        self.clock.now_micros()
    }

    /// The next timestamp: `max(now, last + 1)`, strictly increasing across threads.
    pub fn next(&self) -> i64 {
        let now = self.clock.now_micros();
        let mut last = self.last_micros.load(Ordering::Relaxed);
        loop {
            let next = if now > last { now } else { last + 1 };
            match self.last_micros.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(actual) => last = actual,
            }
        }
    }
}

impl Default for TimestampClock {
    fn default() -> TimestampClock {
        TimestampClock::new(Arc::new(SystemClock))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that reads whatever the test sets.
    struct Fixed(AtomicI64);

    impl WallClock for Arc<Fixed> {
        fn now_micros(&self) -> i64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn timestamps_follow_the_clock_and_never_repeat_or_go_back() {
        let fixed = Arc::new(Fixed(AtomicI64::new(1_000)));
        let clock = TimestampClock::new(Arc::new(fixed.clone()));
        assert_eq!(clock.next(), 1_000);
        // The clock stands still: one more each time.
        assert_eq!(clock.next(), 1_001);
        assert_eq!(clock.next(), 1_002);
        // It steps back: still increasing.
        fixed.0.store(10, Ordering::Relaxed);
        assert_eq!(clock.next(), 1_003);
        // It moves on past the last: its time again.
        fixed.0.store(5_000, Ordering::Relaxed);
        assert_eq!(clock.next(), 5_000);
    }

    #[tokio::test(start_paused = true)]
    async fn a_tokio_wall_clock_follows_tokio_time_and_its_skew() {
        let clock = Arc::new(TokioWallClock::starting_at(1_000_000));
        assert_eq!(clock.now_micros(), 1_000_000);
        tokio::time::advance(std::time::Duration::from_millis(3)).await;
        assert_eq!(clock.now_micros(), 1_003_000);
        clock.set_skew_micros(-500_000);
        assert_eq!(clock.now_micros(), 503_000);
        let timestamps = TimestampClock::new(clock.clone());
        assert_eq!(timestamps.next(), 503_000);
        clock.set_skew_micros(-600_000);
        assert_eq!(
            timestamps.next(),
            503_001,
            "a clock set back never repeats a timestamp"
        );
    }

    #[test]
    fn concurrent_timestamps_are_all_distinct() {
        let clock = Arc::new(TimestampClock::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let clock = clock.clone();
                std::thread::spawn(move || (0..1_000).map(|_| clock.next()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("thread"))
            .collect();
        let count = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), count);
    }
}
