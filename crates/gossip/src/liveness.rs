//! What a follower of the failure detector is told of each peer: restarted, up, down. The
//! node wires it to messaging (a convicted peer's requests fail at once and it is not dialled;
//! a restarted peer's connections to its old process are opened anew, keeping their queues), and the simulation wires the same
//! function to its nodes' messaging, so both run this code.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use locator::HostId;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::view::ClusterView;

/// A change of a peer's liveness, as [`follow_liveness`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerChange {
    /// The peer is seen under a newer generation than before: the process heard before is
    /// gone (whether or not gossip convicted it), and connections to it lead nowhere.
    /// Cassandra's `StorageService.onRestart`. Reported before the new process's `Up`.
    Restarted {
        /// The new process's generation (its start generation, as its gossip state has it).
        generation: u64,
    },
    /// The failure detector holds the peer up. Reported at every view it is up in (a
    /// follower ignores repeats, as messaging's `mark_up` does).
    Up,
    /// The failure detector convicted the peer, after it had been seen up under its current
    /// generation. Reported at every view it is down in, until it is up again. A new process
    /// is not reported down before it was seen up: gossip holds it down until its heartbeats
    /// come in (seconds), and a conviction then would drop messaging's responses to the
    /// requests it sends meanwhile (Cassandra does not convict a restarted node either: it
    /// only interrupts the connections, `onRestart`, and echoes before marking it alive).
    Down,
}

/// Calls `on_change` for every peer of every view `views` publishes, from its current one
/// on, until membership stops (its view sender dropped); returns the task doing it. A peer
/// gossip has not yet seen up (at this node's start every peer is down until its heartbeats
/// arrive), or not yet under the generation it restarted under, gets no `Down`: messaging
/// dials it as usual, with backoff. (A peer convicted before its restart stays down in
/// messaging until its new process is up.)
pub fn follow_liveness(
    mut views: watch::Receiver<Arc<ClusterView>>,
    mut on_change: impl FnMut(HostId, PeerChange) + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut follower = LivenessFollower::default();
        loop {
            let view = views.borrow_and_update().clone();
            for (host_id, change) in follower.changes(&view) {
                on_change(host_id, change);
            }
            if views.changed().await.is_err() {
                return;
            }
        }
    })
}

/// What [`follow_liveness`] remembers between views.
#[derive(Debug, Default)]
struct LivenessFollower {
    /// Each peer's latest generation seen.
    generations: BTreeMap<HostId, u64>,
    /// The peers seen up since this node's start, under their latest generation.
    seen_up: BTreeSet<HostId>,
}

impl LivenessFollower {
    /// The changes `view` reports: restarts first, then each peer's liveness, by host id.
    fn changes(&mut self, view: &ClusterView) -> Vec<(HostId, PeerChange)> {
        let mut changes: Vec<(HostId, PeerChange)> = view
            .peers()
            .filter(|m| self.restarted(m.endpoint.host_id, m.generation))
            .map(|m| {
                (
                    m.endpoint.host_id,
                    PeerChange::Restarted {
                        generation: m.generation,
                    },
                )
            })
            .collect();
        for member in view.peers() {
            let host_id = member.endpoint.host_id;
            if member.live {
                self.seen_up.insert(host_id);
                changes.push((host_id, PeerChange::Up));
            } else if self.seen_up.contains(&host_id) {
                changes.push((host_id, PeerChange::Down));
            }
        }
        changes
    }

    /// Whether `host_id` under `generation` is a newer process than the one seen before
    /// (first sight is no restart; an older generation, a stale state, is ignored).
    fn restarted(&mut self, host_id: HostId, generation: u64) -> bool {
        match self.generations.get(&host_id) {
            Some(&before) if before >= generation => false,
            Some(_) => {
                self.generations.insert(host_id, generation);
                self.seen_up.remove(&host_id);
                true
            }
            None => {
                self.generations.insert(host_id, generation);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::tests::{endpoint, node};
    use locator::NodeState;

    fn id(node: u8) -> HostId {
        HostId(uuid::Uuid::from_u128(node.into()))
    }

    /// The view of node 1 with peers 2 and 3 at the given (generation, live).
    fn view(peers: [(u64, bool); 2]) -> ClusterView {
        let local = node(&endpoint(1, NodeState::Normal), 1, &[10], true);
        let start = ClusterView::new(
            crate::state::parse_member(
                &local.node_id,
                local.generation,
                local.gossip_address,
                &local.key_values,
                true,
            )
            .expect("valid"),
            Vec::new(),
        );
        let nodes = [
            local,
            node(
                &endpoint(2, NodeState::Normal),
                peers[0].0,
                &[20],
                peers[0].1,
            ),
            node(
                &endpoint(3, NodeState::Normal),
                peers[1].0,
                &[30],
                peers[1].1,
            ),
        ];
        start.next(&nodes, |n, e| panic!("{} rejected: {e:?}", n.node_id))
    }

    #[test]
    fn a_conviction_is_reported_only_after_the_peer_was_seen_up() {
        let mut follower = LivenessFollower::default();
        // At start every peer is down until its heartbeats arrive: nothing to tell.
        assert_eq!(follower.changes(&view([(1, false), (1, false)])), []);
        assert_eq!(
            follower.changes(&view([(1, true), (1, false)])),
            [(id(2), PeerChange::Up)]
        );
        assert_eq!(
            follower.changes(&view([(1, false), (1, true)])),
            [(id(2), PeerChange::Down), (id(3), PeerChange::Up)]
        );
        assert_eq!(
            follower.changes(&view([(1, true), (1, false)])),
            [(id(2), PeerChange::Up), (id(3), PeerChange::Down)]
        );
    }

    #[test]
    fn a_peer_under_a_newer_generation_restarted() {
        let mut follower = LivenessFollower::default();
        assert_eq!(
            follower.changes(&view([(10, true), (20, true)])),
            [(id(2), PeerChange::Up), (id(3), PeerChange::Up)]
        );
        // Restarted before gossip convicted it: reconnect, then up.
        assert_eq!(
            follower.changes(&view([(11, true), (20, true)])),
            [
                (id(2), PeerChange::Restarted { generation: 11 }),
                (id(2), PeerChange::Up),
                (id(3), PeerChange::Up)
            ]
        );
        assert!(!follower.restarted(id(2), 11), "the same process");
        // An older generation (a stale gossip state) is ignored and not remembered.
        assert!(!follower.restarted(id(2), 10));
        assert!(follower.restarted(id(2), 12));
    }

    #[test]
    fn a_convicted_peer_back_under_a_newer_generation_restarted_then_is_up() {
        let mut follower = LivenessFollower::default();
        follower.changes(&view([(10, true), (20, true)]));
        assert_eq!(
            follower.changes(&view([(10, false), (20, true)])),
            [(id(2), PeerChange::Down), (id(3), PeerChange::Up)]
        );
        // Seen again under its new generation, not yet up: restarted (messaging keeps it
        // down from its conviction, and the new process is not convicted before it is up).
        assert_eq!(
            follower.changes(&view([(15, false), (20, true)])),
            [
                (id(2), PeerChange::Restarted { generation: 15 }),
                (id(3), PeerChange::Up)
            ]
        );
        assert_eq!(
            follower.changes(&view([(15, false), (20, true)])),
            [(id(3), PeerChange::Up)]
        );
        assert_eq!(
            follower.changes(&view([(15, true), (21, true)])),
            [
                (id(3), PeerChange::Restarted { generation: 21 }),
                (id(2), PeerChange::Up),
                (id(3), PeerChange::Up)
            ]
        );
    }

    #[test]
    fn a_peer_restarted_before_its_conviction_is_not_convicted_until_its_new_process_was_up() {
        let mut follower = LivenessFollower::default();
        follower.changes(&view([(10, true), (20, true)]));
        // Gossip learns the new generation before its heartbeats make it live: no `Down`,
        // which would drop messaging's responses to the new process's first requests.
        assert_eq!(
            follower.changes(&view([(11, false), (20, true)])),
            [
                (id(2), PeerChange::Restarted { generation: 11 }),
                (id(3), PeerChange::Up)
            ]
        );
        assert_eq!(
            follower.changes(&view([(11, false), (20, true)])),
            [(id(3), PeerChange::Up)]
        );
        assert_eq!(
            follower.changes(&view([(11, true), (20, true)])),
            [(id(2), PeerChange::Up), (id(3), PeerChange::Up)]
        );
        // Once up, the new process is convicted as any.
        assert_eq!(
            follower.changes(&view([(11, false), (20, true)])),
            [(id(2), PeerChange::Down), (id(3), PeerChange::Up)]
        );
    }

    #[tokio::test]
    async fn the_follower_reports_each_view_until_membership_stops() {
        let (tx, rx) = watch::channel(Arc::new(view([(1, false), (1, false)])));
        let (changes_tx, mut changes) = tokio::sync::mpsc::unbounded_channel();
        let task = follow_liveness(rx, move |host, change| {
            changes_tx.send((host, change)).expect("the test listens");
        });
        tx.send_replace(Arc::new(view([(1, true), (1, false)])));
        assert_eq!(changes.recv().await, Some((id(2), PeerChange::Up)));
        drop(tx);
        task.await.expect("the follower ends");
    }
}
