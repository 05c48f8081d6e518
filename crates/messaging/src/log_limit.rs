//! Rate-limited warnings about bad input from peers: a broken or hostile peer that reconnects
//! and sends garbage in a loop must not flood the log (nor spend the node's time writing it).
//! Every bad input is still counted (`metrics.rs`); only the log lines are limited.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The window over which warnings are counted.
pub(crate) const WARNING_WINDOW: Duration = Duration::from_secs(10);
/// Warnings logged per window; past it they are suppressed until the next window, whose first
/// warning says how many were.
pub(crate) const WARNINGS_PER_WINDOW: u32 = 10;

/// Decides which warnings are logged: at most `limit` per `window`.
pub(crate) struct LogLimiter {
    window: Duration,
    limit: u32,
    state: Mutex<Window>,
}

struct Window {
    started: Option<Instant>,
    logged: u32,
    suppressed: u64,
}

impl Default for LogLimiter {
    fn default() -> LogLimiter {
        LogLimiter::new(WARNING_WINDOW, WARNINGS_PER_WINDOW)
    }
}

impl LogLimiter {
    pub(crate) fn new(window: Duration, limit: u32) -> LogLimiter {
        LogLimiter {
            window,
            limit,
            state: Mutex::new(Window {
                started: None,
                logged: 0,
                suppressed: 0,
            }),
        }
    }

    /// Whether to log a warning now: `Some(n)` if so, `n` being the warnings suppressed since
    /// the last one logged (to say in it); `None` if this one is suppressed.
    pub(crate) fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    /// `allow` at `now`.
    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let expired = state
            .started
            .is_none_or(|started| now.duration_since(started) >= self.window);
        if expired {
            state.started = Some(now);
            state.logged = 0;
        }
        if state.logged >= self.limit {
            state.suppressed += 1;
            return None;
        }
        state.logged += 1;
        Some(std::mem::take(&mut state.suppressed))
    }
}

/// Logs a warning about bad peer input through `limiter` (`inner.bad_input_log`): a
/// `tracing::warn!` with the same arguments, plus `suppressed`, the warnings left out since the
/// last one logged.
macro_rules! warn_limited {
    ($limiter:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limiter.allow() {
            tracing::warn!(suppressed, $($arg)+);
        }
    };
}
pub(crate) use warn_limited;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_per_window_and_the_suppressed_are_reported_after() {
        let limiter = LogLimiter::new(Duration::from_secs(10), 3);
        let start = Instant::now();
        let allowed: Vec<_> = (0..5).map(|_| limiter.allow_at(start)).collect();
        assert_eq!(allowed, [Some(0), Some(0), Some(0), None, None]);
        assert_eq!(limiter.allow_at(start + Duration::from_secs(9)), None);
        let next_window = start + Duration::from_secs(10);
        assert_eq!(
            limiter.allow_at(next_window),
            Some(3),
            "three were suppressed"
        );
        assert_eq!(limiter.allow_at(next_window), Some(0));
    }
}
