//! Who starts the metadata log's elections, and when: this crate does, not openraft
//! (Ongaro's thesis, §9.6 Pre-Vote and §4.2.3 disruption prevention, around openraft 0.9,
//! which has neither the first nor fresh election timeouts: databendlabs/openraft#1770).
//!
//! openraft's own election timer is off (`Config::enable_elect = false`). Each node runs an
//! [`Elector`] task instead. On a voter that is not the leader, it waits a random timeout in
//! `[election_timeout_min, election_timeout_max)`, drawn afresh for every wait from
//! [`MetadataRuntime`](crate::MetadataRuntime)'s generator (seeded in a simulation), counted
//! from the last time the [`ElectionClock`] was reset: by an AppendEntries or InstallSnapshot
//! from a current leader that this node accepted, by a vote it granted, or by its own
//! campaign. Then it runs a pre-vote round ([`PreVoteRequest`]) and, only if a majority of
//! the voters (itself included; of each configuration while the membership is joint) grants
//! it, asks openraft to campaign (`raft.trigger().elect()`), which raises its term.
//!
//! Invariants:
//! - a node raises its term only after a majority told it that they had not heard from a
//!   leader within `election_timeout_min` and that its log is at least as long as theirs; so
//!   a node cut off by a partition keeps its term, and its return does not depose the leader;
//! - granting a pre-vote changes no state (no term, no vote, no timer);
//! - a real RequestVote from a voter within `election_timeout_min` of hearing from the leader
//!   is refused without a change of term: openraft 0.9's leader lease does this
//!   (`Engine::handle_vote_req`, a lease of its `election_timeout_max`, which the service sets
//!   to our `election_timeout_min`);
//! - learners never campaign, nor does a node in no group; a one-voter group's node
//!   campaigns at once (it needs nobody's vote);
//! - a peer that does not know the pre-vote message (an older version: it answers
//!   `Malformed`) counts as refusing.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use openraft::{LogId, Raft, ServerState};
use tokio::time::Instant;

use crate::log_store::LogStore;
use crate::transport::{
    call, PreVoteRequest, PreVoteResponse, RaftTransport, Reachability, Reply, Request,
};
use crate::{NodeId, TypeConfig};

/// The pre-vote rule: a voter grants iff it is not the leader, has not heard from a leader
/// within `election_timeout_min` (`leader_heard_recently`), and the candidate's log is at
/// least as long as its own (Raft's log comparison: last term, then last index).
pub(crate) fn grants_pre_vote(
    is_leader: bool,
    leader_heard_recently: bool,
    candidate_last_log_id: Option<&LogId<NodeId>>,
    own_last_log_id: Option<&LogId<NodeId>>,
) -> bool {
    !is_leader && !leader_heard_recently && candidate_last_log_id >= own_last_log_id
}

/// Whether `granted` holds a majority of every configuration of `joint` (one configuration,
/// or two while the membership changes).
pub(crate) fn is_quorum(joint: &[BTreeSet<NodeId>], granted: &BTreeSet<NodeId>) -> bool {
    !joint.is_empty()
        && joint
            .iter()
            .all(|voters| 2 * voters.intersection(granted).count() > voters.len())
}

/// When this node last heard from a leader, and when its election timer was last reset.
/// Shared by the service (which records what it hears) and the [`Elector`] (which reads it).
pub(crate) struct ElectionClock {
    times: Mutex<ClockTimes>,
}

struct ClockTimes {
    /// The last accepted AppendEntries or InstallSnapshot from a leader.
    leader_heard_at: Option<Instant>,
    /// The election timer counts from here.
    timer_from: Instant,
}

impl ElectionClock {
    /// A clock whose timer starts now (a node just opened waits a whole timeout).
    pub(crate) fn new() -> ElectionClock {
        ElectionClock {
            times: Mutex::new(ClockTimes {
                leader_heard_at: None,
                timer_from: Instant::now(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockTimes> {
        self.times.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A current leader's AppendEntries or InstallSnapshot was accepted: resets the timer.
    pub(crate) fn heard_from_leader(&self) {
        let now = Instant::now();
        let mut times = self.lock();
        times.leader_heard_at = Some(now);
        times.timer_from = now;
    }

    /// Resets the election timer (a vote granted, a campaign started, leading).
    pub(crate) fn reset_timer(&self) {
        self.lock().timer_from = Instant::now();
    }

    /// Whether a leader was heard from within `window`.
    pub(crate) fn leader_heard_within(&self, window: Duration) -> bool {
        self.lock()
            .leader_heard_at
            .is_some_and(|at| at.elapsed() <= window)
    }

    fn timer_from(&self) -> Instant {
        self.lock().timer_from
    }
}

/// A uniform draw in `[min, max)` from the metadata runtime's generator (`min` if the range
/// is empty).
fn random_timeout(min: Duration, max: Duration) -> Duration {
    let span_ms = u64::try_from(max.saturating_sub(min).as_millis()).unwrap_or(u64::MAX);
    let extra_ms = match span_ms {
        0 => 0,
        span => crate::runtime::next_u64() % span,
    };
    min + Duration::from_millis(extra_ms)
}

/// The task that starts this node's elections (see the module's text). Owned by the
/// `MetadataService`, which aborts it at shutdown; it also ends by itself when the Raft has
/// stopped.
pub(crate) struct Elector {
    pub(crate) id: NodeId,
    pub(crate) raft: Raft<TypeConfig>,
    pub(crate) transport: Arc<dyn RaftTransport>,
    pub(crate) reachability: Arc<Reachability>,
    pub(crate) clock: Arc<ElectionClock>,
    /// Where this node's last log id is read for its pre-votes.
    pub(crate) log_store: LogStore,
    pub(crate) heartbeat_interval: Duration,
    pub(crate) election_timeout_min: Duration,
    pub(crate) election_timeout_max: Duration,
}

/// What the elector does after looking at the Raft's state.
enum Step {
    /// Leader, learner, or in no group: nothing to time; look again after this long.
    Idle(Duration),
    /// A voter that is not the leader: campaign once the timer passes `deadline`.
    Wait,
    /// The only voter: campaign at once.
    Alone,
    /// The Raft has stopped.
    Stop,
}

impl Elector {
    /// Runs until the Raft stops (or the task is aborted).
    pub(crate) async fn run(self) {
        loop {
            // A fresh timeout for every wait: two nodes that split a vote draw anew.
            let timeout = random_timeout(self.election_timeout_min, self.election_timeout_max);
            loop {
                match self.step() {
                    Step::Stop => return,
                    Step::Idle(pause) => {
                        self.clock.reset_timer();
                        tokio::time::sleep(pause).await;
                    }
                    Step::Alone => break,
                    Step::Wait => {
                        let deadline = self.clock.timer_from() + timeout;
                        if Instant::now() >= deadline {
                            break;
                        }
                        tokio::time::sleep_until(deadline).await;
                    }
                }
            }
            if self.pre_vote().await && self.raft.trigger().elect().await.is_err() {
                return; // the Raft has stopped
            }
            self.clock.reset_timer();
            // A one-voter group campaigns at once, but not more than once a heartbeat.
            tokio::time::sleep(self.heartbeat_interval).await;
        }
    }

    fn step(&self) -> Step {
        let metrics = self.raft.metrics().borrow().clone();
        if metrics.running_state.is_err() {
            return Step::Stop;
        }
        let membership = metrics.membership_config.membership();
        let voter = membership.voter_ids().any(|v| v == self.id);
        if metrics.state == ServerState::Leader || !voter {
            return Step::Idle(self.election_timeout_min);
        }
        if membership.voter_ids().all(|v| v == self.id) {
            return Step::Alone;
        }
        Step::Wait
    }

    /// Asks every other voter for a pre-vote; true once a majority of each configuration
    /// (this node included) granted it. A voter that does not answer within
    /// `election_timeout_min` counts as refusing.
    async fn pre_vote(&self) -> bool {
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership().clone();
        let joint = membership.get_joint_config().clone();
        let mut granted = BTreeSet::from([self.id]);
        if is_quorum(&joint, &granted) {
            return true;
        }
        let last_log_id = self.log_store.last_log_id();
        let request = Request::PreVote(PreVoteRequest {
            candidate: self.id,
            next_term: metrics.current_term + 1,
            last_log_id,
        });
        let voters: BTreeSet<NodeId> = joint.iter().flatten().copied().collect();
        let mut asked: FuturesUnordered<_> = voters
            .into_iter()
            .filter(|v| *v != self.id)
            .filter_map(|v| Some((v, membership.get_node(&v)?.addr.clone())))
            .map(|(voter, address)| {
                let request = &request;
                async move {
                    let reply = call(
                        &*self.transport,
                        &self.reachability,
                        voter,
                        &address,
                        request,
                        self.election_timeout_min,
                    )
                    .await;
                    (voter, reply)
                }
            })
            .collect();
        while let Some((voter, reply)) = asked.next().await {
            if let Ok(Reply::PreVote(PreVoteResponse { granted: true })) = reply {
                granted.insert(voter);
                if is_quorum(&joint, &granted) {
                    tracing::debug!(node = %self.id, "pre-vote granted by a majority");
                    return true;
                }
            }
        }
        tracing::debug!(node = %self.id, granted = granted.len(), "pre-vote refused");
        false
    }
}

#[cfg(test)]
mod tests {
    use openraft::CommittedLeaderId;

    use super::*;

    fn node(n: u128) -> NodeId {
        NodeId::from_u128(n)
    }

    fn log_id(term: u64, index: u64) -> LogId<NodeId> {
        LogId::new(CommittedLeaderId::new(term, node(1)), index)
    }

    #[test]
    fn a_pre_vote_is_granted_only_without_a_leader_and_to_a_log_at_least_as_long() {
        let (shorter, same, longer) = (log_id(2, 5), log_id(2, 6), log_id(3, 1));
        assert!(grants_pre_vote(false, false, Some(&same), Some(&same)));
        assert!(grants_pre_vote(false, false, Some(&longer), Some(&same)));
        assert!(grants_pre_vote(false, false, Some(&same), None));
        assert!(!grants_pre_vote(false, false, Some(&shorter), Some(&same)));
        assert!(!grants_pre_vote(false, false, None, Some(&same)));
        // A later term wins over a higher index.
        assert!(!grants_pre_vote(
            false,
            false,
            Some(&log_id(2, 9)),
            Some(&longer)
        ));
        assert!(!grants_pre_vote(false, true, Some(&longer), Some(&same)));
        assert!(!grants_pre_vote(true, false, Some(&longer), Some(&same)));
    }

    #[test]
    fn a_quorum_is_a_majority_of_every_configuration() {
        let set = |ids: &[u128]| ids.iter().map(|n| node(*n)).collect::<BTreeSet<_>>();
        let three = vec![set(&[1, 2, 3])];
        assert!(!is_quorum(&three, &set(&[1])));
        assert!(is_quorum(&three, &set(&[1, 3])));
        assert!(!is_quorum(&[set(&[1, 2, 3, 4])], &set(&[1, 2])));
        assert!(is_quorum(&[set(&[1])], &set(&[1])));
        let joint = vec![set(&[1, 2, 3]), set(&[3, 4, 5])];
        assert!(!is_quorum(&joint, &set(&[1, 2])));
        assert!(is_quorum(&joint, &set(&[1, 3, 4])));
        assert!(!is_quorum(&[], &set(&[1])));
    }

    #[test]
    fn timeouts_are_drawn_afresh_within_the_range() {
        crate::seed_rng(11532);
        let (min, max) = (Duration::from_millis(500), Duration::from_millis(1000));
        let drawn: Vec<Duration> = (0..50).map(|_| random_timeout(min, max)).collect();
        assert!(drawn.iter().all(|t| (min..max).contains(t)), "{drawn:?}");
        assert!(drawn.windows(2).any(|w| w[0] != w[1]), "{drawn:?}");
        crate::seed_rng(11532);
        let again: Vec<Duration> = (0..50).map(|_| random_timeout(min, max)).collect();
        assert_eq!(drawn, again);
        assert_eq!(random_timeout(min, min), min);
    }
}
