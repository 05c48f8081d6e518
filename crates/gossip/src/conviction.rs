//! Local convictions: peers this node holds down on proof that their process is gone (from
//! messaging: a connection to the peer closed and its port refused the redial), before
//! chitchat's phi-accrual detector would convict them (about 18 gossip rounds at Cassandra's
//! default `phi_convict_threshold`).
//!
//! A local conviction overrides chitchat's "live" for the peer's generation it was made
//! against, until one of:
//! - chitchat shows a newer generation of the peer (it restarted: the old process is gone and
//!   the new one is judged afresh);
//! - the peer's heartbeat advances past the highest value heard in the first
//!   [`SETTLE_ROUNDS`] gossip rounds after the conviction (a dead process never heartbeats
//!   again; a false alarm costs those rounds and one more). The first rounds only raise the
//!   baseline: the peer's last heartbeats, sent just before it died, reach this node through
//!   other peers a round or two late, and must not read as a sign of life;
//! - chitchat forgets the peer (the view keeps it, down).
//!
//! Pure: times are given, so the rules are tested without a clock.

use std::collections::BTreeMap;
use std::time::Duration;

use locator::HostId;
use tokio::time::Instant;

use crate::view::GossipNode;

/// The gossip rounds after a conviction during which the peer's heartbeat may still rise (its
/// last heartbeats propagating) without lifting it. Gossip spreads a value to every node of a
/// cluster in a few rounds (each node gossips with up to three others each round); three is
/// ample for the clusters Helenus runs, and what a false alarm costs.
pub(crate) const SETTLE_ROUNDS: u32 = 3;

/// Bound on the convictions held: at most one per peer, so this is far more than a cluster's
/// nodes. Past it, a new conviction is refused (phi still convicts).
pub(crate) const MAX_CONVICTIONS: usize = 4096;

/// One peer held down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Conviction {
    /// The peer's generation (process) convicted.
    generation: u64,
    /// The highest heartbeat heard from that generation up to the end of the settling time.
    heartbeat: u64,
    /// When the peer's last heartbeats have surely arrived: from then on, a higher heartbeat
    /// is a sign of life.
    settled_at: Instant,
}

/// The peers held down by local conviction, by host id.
#[derive(Debug)]
pub(crate) struct LocalConvictions {
    by_host: BTreeMap<HostId, Conviction>,
    /// How long after a conviction the peer's heartbeat only raises the baseline.
    settle: Duration,
}

impl LocalConvictions {
    /// No conviction; `gossip_interval` sets the settling time ([`SETTLE_ROUNDS`] rounds).
    pub(crate) fn new(gossip_interval: Duration) -> LocalConvictions {
        LocalConvictions {
            by_host: BTreeMap::new(),
            settle: gossip_interval * SETTLE_ROUNDS,
        }
    }

    /// Holds `host_id`'s process `generation`, last heard at `heartbeat`, down from `now`.
    /// Returns whether it is a new conviction (not one held already for that generation, and
    /// within [`MAX_CONVICTIONS`]).
    pub(crate) fn convict(
        &mut self,
        host_id: HostId,
        generation: u64,
        heartbeat: u64,
        now: Instant,
    ) -> bool {
        if let Some(held) = self.by_host.get(&host_id) {
            if held.generation >= generation {
                return false;
            }
        } else if self.by_host.len() >= MAX_CONVICTIONS {
            return false;
        }
        self.by_host.insert(
            host_id,
            Conviction {
                generation,
                heartbeat,
                settled_at: now + self.settle,
            },
        );
        true
    }

    /// Whether `host_id` is held down.
    #[cfg(test)]
    pub(crate) fn holds(&self, host_id: HostId) -> bool {
        self.by_host.contains_key(&host_id)
    }

    /// The peers held down.
    pub(crate) fn host_ids(&self) -> impl Iterator<Item = HostId> + '_ {
        self.by_host.keys().copied()
    }

    /// Applies the convictions to chitchat's states at `now`: lifts those the rules above end
    /// (returning their host ids), and marks the convicted generation of every other one not
    /// live.
    pub(crate) fn apply(&mut self, nodes: &mut [GossipNode], now: Instant) -> Vec<HostId> {
        let mut lifted = Vec::new();
        self.by_host.retain(|host_id, conviction| {
            let node_id = host_id.to_string();
            let states = || nodes.iter().filter(|node| node.node_id == node_id);
            let restarted = states().any(|node| node.generation > conviction.generation);
            let heard = states()
                .filter(|node| node.generation == conviction.generation)
                .map(|node| node.heartbeat)
                .max();
            let keep = match heard {
                _ if restarted => false,
                None => false,
                Some(heartbeat) if now < conviction.settled_at => {
                    conviction.heartbeat = conviction.heartbeat.max(heartbeat);
                    true
                }
                Some(heartbeat) => heartbeat <= conviction.heartbeat,
            };
            if !keep {
                lifted.push(*host_id);
            }
            keep
        });
        for node in nodes.iter_mut() {
            let convicted = self.by_host.iter().any(|(host_id, conviction)| {
                conviction.generation == node.generation && host_id.to_string() == node.node_id
            });
            if convicted {
                node.live = false;
            }
        }
        lifted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tests::{endpoint, node};
    use locator::NodeState;

    const ROUND: Duration = Duration::from_secs(1);

    fn peer(generation: u64, heartbeat: u64) -> GossipNode {
        let mut peer = node(&endpoint(2, NodeState::Normal), generation, &[20], true);
        peer.heartbeat = heartbeat;
        peer
    }

    fn host() -> HostId {
        HostId(uuid::Uuid::from_u128(2))
    }

    /// Whether the peer's state of `generation` is live once the convictions are applied.
    fn live(convictions: &mut LocalConvictions, nodes: &[GossipNode], at: Instant) -> bool {
        let mut nodes = nodes.to_vec();
        convictions.apply(&mut nodes, at);
        nodes.iter().all(|n| n.live)
    }

    #[test]
    fn a_convicted_peer_is_down_until_its_heartbeat_passes_its_settled_last_one() {
        let start = Instant::now();
        let mut convictions = LocalConvictions::new(ROUND);
        assert!(convictions.convict(host(), 5, 100, start));
        assert!(!convictions.convict(host(), 5, 101, start), "held already");
        assert!(!live(&mut convictions, &[peer(5, 100)], start));
        // Its last heartbeats, sent before it died, arrive late through other peers: they
        // only raise the baseline.
        let late = start + ROUND * 2;
        assert!(!live(&mut convictions, &[peer(5, 107)], late));
        // Settled: a dead process heartbeats no more, and stays down however long.
        let settled = start + ROUND * SETTLE_ROUNDS;
        for rounds in 0..30 {
            assert!(!live(
                &mut convictions,
                &[peer(5, 107)],
                settled + ROUND * rounds
            ));
        }
        assert!(convictions.holds(host()));
        // A heartbeat past the settled one: the process lives (a false alarm), and is up.
        let mut nodes = vec![peer(5, 108)];
        let lifted = convictions.apply(&mut nodes, settled + ROUND * 31);
        assert_eq!(lifted, [host()]);
        assert!(nodes[0].live);
        assert!(!convictions.holds(host()));
    }

    #[test]
    fn chitchat_s_own_conviction_is_kept_and_the_overlay_never_marks_a_peer_up() {
        let start = Instant::now();
        let mut convictions = LocalConvictions::new(ROUND);
        convictions.convict(host(), 5, 100, start);
        let mut dead = peer(5, 100);
        dead.live = false;
        assert!(!live(&mut convictions, &[dead], start + ROUND * 20));
    }

    #[test]
    fn a_restart_or_a_forgotten_peer_ends_the_conviction() {
        let start = Instant::now();
        let mut convictions = LocalConvictions::new(ROUND);
        convictions.convict(host(), 5, 100, start);
        // The new process is judged by chitchat alone, at once; the old state stays down.
        let mut nodes = vec![peer(5, 100), peer(6, 1)];
        assert_eq!(convictions.apply(&mut nodes, start + ROUND), [host()]);
        assert!(nodes.iter().all(|n| n.live));
        assert!(!convictions.holds(host()));

        convictions.convict(host(), 6, 1, start);
        assert!(
            !convictions.convict(host(), 5, 100, start),
            "an older process"
        );
        assert_eq!(convictions.apply(&mut [], start), [host()], "forgotten");
        assert_eq!(convictions.host_ids().count(), 0);
    }

    #[test]
    fn only_the_convicted_peer_is_marked_down() {
        let start = Instant::now();
        let mut convictions = LocalConvictions::new(ROUND);
        convictions.convict(host(), 5, 100, start);
        let other = node(&endpoint(3, NodeState::Normal), 5, &[30], true);
        let mut nodes = vec![peer(5, 100), other];
        convictions.apply(&mut nodes, start);
        assert_eq!(
            nodes.iter().map(|n| n.live).collect::<Vec<_>>(),
            [false, true]
        );
    }
}
