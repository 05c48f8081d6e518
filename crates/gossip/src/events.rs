//! The changes drivers are told of: TOPOLOGY_CHANGE (`NEW_NODE`, `REMOVED_NODE`) and
//! STATUS_CHANGE (`UP`, `DOWN`), found by comparing successive views.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use locator::HostId;

use crate::view::ClusterView;

/// What changed about a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    /// It joined the ring (became normal), or is first known as a ring member
    /// (TOPOLOGY_CHANGE `NEW_NODE`).
    NewNode,
    /// It left the ring; today only a ring member's move to another native address, whose old
    /// address is removed before the new one is added (TOPOLOGY_CHANGE `REMOVED_NODE`).
    RemovedNode,
    /// Its failure detector holds it up (STATUS_CHANGE `UP`).
    Up,
    /// Its failure detector convicted it (STATUS_CHANGE `DOWN`).
    Down,
}

/// One change about one peer (never this node), as the native protocol's events name it: by
/// the address clients reach the peer on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MembershipEvent {
    pub kind: EventKind,
    pub host_id: HostId,
    /// The peer's native address and port (`rpc_address`), what the event carries.
    pub address: SocketAddr,
}

/// What drivers were last told of a peer.
#[derive(Debug, Clone, Copy)]
struct Announced {
    address: SocketAddr,
    in_ring: bool,
    /// The last status event; `None` before any. A peer first seen down gets no event (at
    /// start every peer is down until its heartbeats arrive), and `Down` only follows `Up`.
    up: Option<bool>,
}

/// Turns successive views into events, each change once: a peer going down twice without
/// coming up in between yields one `Down` (Cassandra's `Server.EventNotifier` keeps the last
/// event per endpoint for the same reason).
#[derive(Debug, Default)]
pub(crate) struct EventTracker {
    announced: BTreeMap<HostId, Announced>,
}

impl EventTracker {
    /// The events between the views this tracker saw and `view`, in host id order; for one
    /// peer, topology before status.
    pub(crate) fn diff(&mut self, view: &ClusterView) -> Vec<MembershipEvent> {
        let mut events = Vec::new();
        let gone: Vec<HostId> = self
            .announced
            .keys()
            .filter(|host_id| view.member(**host_id).is_none())
            .copied()
            .collect();
        for host_id in gone {
            let old = self.announced.remove(&host_id).expect("listed");
            if old.in_ring {
                events.push(event(EventKind::RemovedNode, host_id, old.address));
            }
        }
        for peer in view.peers() {
            let host_id = peer.endpoint.host_id;
            let address = peer.native_socket_address();
            let announced = self.announced.entry(host_id).or_insert(Announced {
                address,
                in_ring: false,
                up: None,
            });
            if announced.address != address {
                if announced.in_ring {
                    events.push(event(EventKind::RemovedNode, host_id, announced.address));
                }
                *announced = Announced {
                    address,
                    in_ring: false,
                    up: None,
                };
            }
            if peer.in_ring() && !announced.in_ring {
                announced.in_ring = true;
                events.push(event(EventKind::NewNode, host_id, address));
            }
            match (peer.live, announced.up) {
                (true, Some(true)) | (false, Some(false)) => {}
                (true, _) => events.push(event(EventKind::Up, host_id, address)),
                (false, Some(true)) => events.push(event(EventKind::Down, host_id, address)),
                (false, None) => {}
            }
            announced.up = Some(peer.live);
        }
        events
    }
}

fn event(kind: EventKind, host_id: HostId, address: SocketAddr) -> MembershipEvent {
    MembershipEvent {
        kind,
        host_id,
        address,
    }
}

#[cfg(test)]
mod tests {
    use locator::NodeState;

    use super::*;
    use crate::state::parse_member;
    use crate::view::tests::{endpoint, node};
    use crate::view::GossipNode;

    struct Cluster {
        view: ClusterView,
        tracker: EventTracker,
        local: GossipNode,
    }

    impl Cluster {
        fn new() -> Cluster {
            let local = node(&endpoint(1, NodeState::Normal), 1, &[10], true);
            let member = parse_member(
                &local.node_id,
                1,
                local.gossip_address,
                &local.key_values,
                true,
            )
            .expect("valid");
            Cluster {
                view: ClusterView::new(member, Vec::new()),
                tracker: EventTracker::default(),
                local,
            }
        }

        /// The events of a view where the peers are `peers`.
        fn see(&mut self, peers: &[GossipNode]) -> Vec<(EventKind, u8, String)> {
            let mut nodes = vec![self.local.clone()];
            nodes.extend_from_slice(peers);
            self.view = self.view.next(&nodes, |_, _| {});
            self.tracker
                .diff(&self.view)
                .into_iter()
                .map(|e| {
                    let host = e.host_id.0.as_u128() as u8;
                    (e.kind, host, e.address.to_string())
                })
                .collect()
        }
    }

    fn at(address: &str) -> String {
        format!("{address}:9042")
    }

    #[test]
    fn each_change_is_told_once() {
        use EventKind::*;
        let mut cluster = Cluster::new();
        let normal = endpoint(2, NodeState::Normal);
        assert_eq!(cluster.see(&[]), []);
        // Known first down (its heartbeats have not arrived): joined, no status yet.
        assert_eq!(
            cluster.see(&[node(&normal, 1, &[20], false)]),
            [(NewNode, 2, at("127.0.0.2"))]
        );
        assert_eq!(
            cluster.see(&[node(&normal, 1, &[20], true)]),
            [(Up, 2, at("127.0.0.2"))]
        );
        assert_eq!(cluster.see(&[node(&normal, 1, &[20], true)]), []);
        assert_eq!(
            cluster.see(&[node(&normal, 1, &[20], false)]),
            [(Down, 2, at("127.0.0.2"))]
        );
        // Down again, then forgotten by chitchat: still one Down.
        assert_eq!(cluster.see(&[node(&normal, 1, &[20], false)]), []);
        assert_eq!(cluster.see(&[]), []);
        // Back with a new generation.
        assert_eq!(
            cluster.see(&[node(&normal, 2, &[20], true)]),
            [(Up, 2, at("127.0.0.2"))]
        );
    }

    #[test]
    fn a_joining_node_is_new_when_it_becomes_normal_and_a_moved_one_is_replaced() {
        use EventKind::*;
        let mut cluster = Cluster::new();
        let joining = endpoint(3, NodeState::Joining);
        assert_eq!(
            cluster.see(&[node(&joining, 1, &[30], true)]),
            [(Up, 3, at("127.0.0.3"))]
        );
        let normal = endpoint(3, NodeState::Normal);
        assert_eq!(
            cluster.see(&[node(&normal, 1, &[30], true)]),
            [(NewNode, 3, at("127.0.0.3"))]
        );
        let mut moved = normal.clone();
        moved.native_address = "127.0.0.33".parse().expect("ip");
        assert_eq!(
            cluster.see(&[node(&moved, 2, &[30], true)]),
            [
                (RemovedNode, 3, at("127.0.0.3")),
                (NewNode, 3, at("127.0.0.33")),
                (Up, 3, at("127.0.0.33")),
            ]
        );
    }
}
