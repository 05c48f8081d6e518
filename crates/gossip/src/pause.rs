//! Cassandra's guard against a local pause (`FailureDetector.interpret`'s `lastInterpret` and
//! `lastPause`): when this node itself stopped for a while (`SIGSTOP`, a paused virtual
//! machine, a starved runtime), every peer's last heartbeat is old when it resumes, and a
//! failure detector that reads that silence as the peers' convicts them all. Cassandra skips
//! conviction when its status check runs more than `max_local_pause` late, and for
//! `max_local_pause` after that; so does this node's view, which keeps a peer that was up
//! before the pause up until the guard lets go (chitchat convicts inside its own detector,
//! whose state cannot be reset from outside, so the hold is applied to the view chitchat's
//! liveness is read into; see `ClusterView::holding_live`).

use std::time::Duration;

use tokio::time::Instant;

/// The view refresher's watch for local pauses. Time is passed in (tokio's `Instant`), so
/// paused and simulated clocks drive it.
///
/// Invariant: `hold_until` is only ever set from a check that found the node `max_local_pause`
/// late, and is never earlier than that check plus the grace.
#[derive(Debug)]
pub(crate) struct LocalPauseGuard {
    /// How late a check may run before the node counts as paused (Cassandra's
    /// `max_local_pause`).
    max_local_pause: Duration,
    /// How far apart checks are when the node runs normally: the view is refreshed at least
    /// once a gossip round.
    round: Duration,
    /// How long after a pause no peer is marked down.
    grace: Duration,
    /// The previous check.
    last_check: Instant,
    /// While `now` is before it, peers up before the pause stay up.
    hold_until: Option<Instant>,
}

/// Gossip rounds a hold lasts at least, whatever `max_local_pause` is: a peer revived by
/// chitchat's detector needs two fresh heartbeats (its first after a silence longer than
/// `max_interval` is no sample), and a round or two brings each.
const MIN_GRACE_ROUNDS: u32 = 5;

impl LocalPauseGuard {
    /// A guard whose first check is measured from `now` (the start).
    pub(crate) fn new(max_local_pause: Duration, round: Duration, now: Instant) -> Self {
        assert!(
            !max_local_pause.is_zero(),
            "validated: max_local_pause is positive"
        );
        LocalPauseGuard {
            max_local_pause,
            round,
            grace: max_local_pause.max(round * MIN_GRACE_ROUNDS),
            last_check: now,
            hold_until: None,
        }
    }

    /// Called at every refresh of the view, with the time it reads chitchat's liveness:
    /// whether peers that were up must stay up (a pause was found now, or lately). A new pause
    /// is logged, as Cassandra logs it.
    pub(crate) fn check(&mut self, now: Instant) -> bool {
        let since_last = now.saturating_duration_since(self.last_check);
        self.last_check = now;
        let late = since_last.saturating_sub(self.round);
        if late > self.max_local_pause {
            tracing::warn!(
                pause_ms = late.as_millis() as u64,
                max_local_pause_ms = self.max_local_pause.as_millis() as u64,
                hold_ms = self.grace.as_millis() as u64,
                "not marking nodes down due to a local pause"
            );
            self.hold_until = Some(now + self.grace);
        }
        match self.hold_until {
            Some(until) if now < until => true,
            Some(_) => {
                self.hold_until = None;
                tracing::debug!("local pause over: marking nodes down again");
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUND: Duration = Duration::from_secs(1);
    const MAX_PAUSE: Duration = Duration::from_secs(5);

    #[test]
    fn checks_on_time_or_a_little_late_hold_nothing() {
        let start = Instant::now();
        let mut guard = LocalPauseGuard::new(MAX_PAUSE, ROUND, start);
        let mut now = start;
        for step_ms in [1_000, 10, 1_000, 3_000, 5_900, 1_000] {
            now += Duration::from_millis(step_ms);
            assert!(!guard.check(now), "{step_ms} ms after the previous check");
        }
    }

    #[test]
    fn a_pause_holds_for_the_grace_after_it_then_lets_go() {
        let start = Instant::now();
        let mut guard = LocalPauseGuard::new(MAX_PAUSE, ROUND, start);
        // A round plus more than max_local_pause: paused.
        let resumed = start + ROUND + MAX_PAUSE + Duration::from_millis(1);
        assert!(guard.check(resumed));
        // Checks on time afterwards keep holding until the grace (max_local_pause) is over.
        let mut now = resumed;
        while now + ROUND < resumed + MAX_PAUSE {
            now += ROUND;
            assert!(guard.check(now), "{:?} after the pause", now - resumed);
        }
        assert!(!guard.check(resumed + MAX_PAUSE));
        assert!(!guard.check(resumed + MAX_PAUSE + ROUND));
        // A second pause holds again, from its own end.
        let again = resumed + MAX_PAUSE + ROUND + Duration::from_secs(25);
        assert!(guard.check(again));
        assert!(guard.check(again + MAX_PAUSE - Duration::from_millis(1)));
        assert!(!guard.check(again + MAX_PAUSE));
    }

    #[test]
    fn the_grace_is_at_least_a_few_rounds() {
        let start = Instant::now();
        let round = Duration::from_secs(2);
        let mut guard = LocalPauseGuard::new(MAX_PAUSE, round, start);
        let resumed = start + Duration::from_secs(30);
        assert!(guard.check(resumed));
        for rounds in 1..MIN_GRACE_ROUNDS {
            assert!(
                guard.check(resumed + round * rounds),
                "{rounds} rounds after"
            );
        }
        assert!(!guard.check(resumed + round * MIN_GRACE_ROUNDS));
    }
}
