//! The cluster as this node sees it: every node it has heard of, by host id, with its state and
//! whether it is up; and the token ring built from them.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use locator::{HostId, LocatorError, TokenMetadata};

use crate::state::{parse_member, Member, StateError};

/// One node's chitchat state, copied out under chitchat's lock so the view is built without
/// holding it.
#[derive(Debug, Clone)]
pub(crate) struct GossipNode {
    pub(crate) node_id: String,
    pub(crate) generation: u64,
    pub(crate) gossip_address: SocketAddr,
    pub(crate) key_values: BTreeMap<String, String>,
    /// The highest heartbeat heard from this process (it counts its gossip messages).
    pub(crate) heartbeat: u64,
    pub(crate) live: bool,
}

/// Every node this node knows, keyed by host id, this node included. An immutable value:
/// membership publishes a new one whenever anything in it changes.
///
/// Invariants: this node is a member and always live; a host id has one member, from its
/// newest generation whose state is complete (a restarted node replaces its old generation,
/// at whatever address it now has, and never shows twice); a node once known stays a member
/// when it goes down, however long, as in Cassandra (it still owns its ranges, and counts as
/// down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    local: HostId,
    members: BTreeMap<HostId, Member>,
}

impl ClusterView {
    /// The view of a node that knows itself and the peers it saved before it stopped (down
    /// until gossip hears from them; a saved copy of this node is ignored).
    pub(crate) fn new(local: Member, saved_peers: Vec<Member>) -> ClusterView {
        let host_id = local.endpoint.host_id;
        let mut members: BTreeMap<HostId, Member> = saved_peers
            .into_iter()
            .filter(|peer| peer.endpoint.host_id != host_id)
            .map(|mut peer| {
                peer.live = false;
                (peer.endpoint.host_id, peer)
            })
            .collect();
        members.insert(host_id, local);
        ClusterView {
            local: host_id,
            members,
        }
    }

    /// This view brought up to date with chitchat's node states. A state that cannot be read
    /// is passed to `rejected` (with its node id and generation) and left out.
    pub(crate) fn next(
        &self,
        nodes: &[GossipNode],
        mut rejected: impl FnMut(&GossipNode, StateError),
    ) -> ClusterView {
        let mut newest: BTreeMap<HostId, Member> = BTreeMap::new();
        for node in nodes {
            let member = match parse_member(
                &node.node_id,
                node.generation,
                node.gossip_address,
                &node.key_values,
                node.live,
            ) {
                Ok(member) => member,
                Err(e) => {
                    rejected(node, e);
                    continue;
                }
            };
            let host_id = member.endpoint.host_id;
            if host_id == self.local && member.generation != self.local().generation {
                // Another process claiming this node's host id (an old generation of this
                // node, or a misconfigured copy): this node knows its own state.
                continue;
            }
            match newest.get(&host_id) {
                Some(seen) if seen.generation >= member.generation => {}
                _ => {
                    newest.insert(host_id, member);
                }
            }
        }
        let mut members = self.members.clone();
        for member in members.values_mut() {
            // Known nodes chitchat no longer reports (it forgets a node dead for its grace
            // period) stay, down.
            member.live = false;
        }
        for (host_id, member) in newest {
            match members.get(&host_id) {
                // Never back to an older generation than one already seen.
                Some(known) if known.generation > member.generation => {}
                _ => {
                    members.insert(host_id, member);
                }
            }
        }
        let local = members
            .get_mut(&self.local)
            .expect("this node is always a member");
        local.live = true;
        ClusterView {
            local: self.local,
            members,
        }
    }

    /// This view with every peer that is up in `previous`, under the same generation, kept
    /// up: what the view shows while this node has just resumed from a local pause, when
    /// chitchat's detector has read the pause as its peers' silence (`pause.rs`). A peer down
    /// in `previous`, or known by a newer generation now, keeps what chitchat says.
    pub(crate) fn holding_live(mut self, previous: &ClusterView) -> ClusterView {
        for member in self.members.values_mut() {
            let was_live = previous
                .member(member.endpoint.host_id)
                .is_some_and(|before| before.live && before.generation == member.generation);
            member.live |= was_live;
        }
        self
    }

    /// This view with each peer of `host_ids` down (local convictions that a hold after a
    /// pause, `holding_live`, must not lift). This node stays up.
    pub(crate) fn marking_down(mut self, host_ids: impl Iterator<Item = HostId>) -> ClusterView {
        for host_id in host_ids.filter(|host_id| *host_id != self.local) {
            if let Some(member) = self.members.get_mut(&host_id) {
                member.live = false;
            }
        }
        self
    }

    /// This node.
    pub fn local(&self) -> &Member {
        &self.members[&self.local]
    }

    /// A node by host id.
    pub fn member(&self, host_id: HostId) -> Option<&Member> {
        self.members.get(&host_id)
    }

    /// Every node, this one included, by host id.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// Every node but this one (what `system.peers` lists), by host id.
    pub fn peers(&self) -> impl Iterator<Item = &Member> {
        let local = self.local;
        self.members
            .values()
            .filter(move |m| m.endpoint.host_id != local)
    }

    /// Whether `host_id` is known and up.
    pub fn is_live(&self, host_id: HostId) -> bool {
        self.members.get(&host_id).is_some_and(|m| m.live)
    }

    /// The schema versions of the nodes that are up, each with its nodes: the cluster agrees on
    /// the schema when there is one.
    pub fn schema_versions(&self) -> BTreeMap<uuid::Uuid, Vec<HostId>> {
        let mut versions: BTreeMap<uuid::Uuid, Vec<HostId>> = BTreeMap::new();
        for member in self.members.values().filter(|m| m.live) {
            versions
                .entry(member.schema_version)
                .or_default()
                .push(member.endpoint.host_id);
        }
        versions
    }

    /// The token ring of this view, for the coordinator and `system.peers`: this node with its
    /// tokens (`TokenMetadata::new`), then every peer that owns tokens (normal, leaving or
    /// moving; not joining, whose tokens are pending) by host id order, down ones included (they
    /// still own their ranges; the coordinator counts them as down). Two nodes publishing one
    /// token: the later in host id order owns it.
    pub fn token_metadata(&self) -> Result<TokenMetadata, LocatorError> {
        let local = self.local();
        let mut ring = TokenMetadata::new(local.endpoint.clone(), local.tokens.clone())?;
        for peer in self.peers().filter(|m| m.in_ring()) {
            ring = ring.with_normal_tokens(peer.endpoint.clone(), peer.tokens.clone())?;
        }
        Ok(ring)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use locator::{Endpoint, Location, NodeState, Token};

    use super::*;
    use crate::state::local_key_values;

    pub(crate) fn endpoint(node: u8, state: NodeState) -> Endpoint {
        Endpoint {
            host_id: HostId(uuid::Uuid::from_u128(node.into())),
            broadcast_address: format!("127.0.0.{node}").parse().expect("ip"),
            native_address: format!("127.0.0.{node}").parse().expect("ip"),
            native_port: 9042,
            location: Location {
                datacenter: "dc1".to_string(),
                rack: format!("r{}", node % 2),
            },
            state,
        }
    }

    pub(crate) fn node(
        endpoint: &Endpoint,
        generation: u64,
        tokens: &[Token],
        live: bool,
    ) -> GossipNode {
        GossipNode {
            node_id: endpoint.host_id.to_string(),
            generation,
            gossip_address: SocketAddr::new(endpoint.broadcast_address, 7000),
            key_values: local_key_values(endpoint, tokens, uuid::Uuid::nil(), "5.0.4")
                .into_iter()
                .collect(),
            heartbeat: 0,
            live,
        }
    }

    fn id(node: u8) -> HostId {
        HostId(uuid::Uuid::from_u128(node.into()))
    }

    fn start(node_1: &GossipNode) -> ClusterView {
        let member = parse_member(
            &node_1.node_id,
            node_1.generation,
            node_1.gossip_address,
            &node_1.key_values,
            true,
        )
        .expect("valid");
        ClusterView::new(member, Vec::new())
    }

    fn no_rejects(node: &GossipNode, e: StateError) {
        panic!("{} rejected: {e:?}", node.node_id)
    }

    #[test]
    fn a_restarted_node_replaces_its_old_generation_even_at_a_new_address() {
        let local = node(&endpoint(1, NodeState::Normal), 1, &[10], true);
        let view = start(&local);
        let old = node(&endpoint(2, NodeState::Normal), 5, &[20], false);
        let mut moved = endpoint(2, NodeState::Normal);
        moved.broadcast_address = "127.0.0.9".parse().expect("ip");
        let new = node(&moved, 6, &[20], true);
        // Either order of chitchat's states.
        for nodes in [
            [local.clone(), old.clone(), new.clone()],
            [local.clone(), new.clone(), old.clone()],
        ] {
            let next = view.next(&nodes, no_rejects);
            assert_eq!(next.members().count(), 2);
            let peer = next.member(id(2)).expect("known");
            assert_eq!(peer.generation, 6);
            assert!(peer.live);
            assert_eq!(peer.endpoint.broadcast_address.to_string(), "127.0.0.9");
        }
        // Chitchat forgets the new generation first: the view keeps it, down, and never goes
        // back to the old one.
        let later = view
            .next(&[local.clone(), new], no_rejects)
            .next(&[local, old], no_rejects);
        let peer = later.member(id(2)).expect("still known");
        assert_eq!((peer.generation, peer.live), (6, false));
    }

    #[test]
    fn incomplete_states_wait_and_this_node_is_its_own_authority() {
        let local = node(&endpoint(1, NodeState::Normal), 3, &[10], true);
        let view = start(&local);
        let mut partial = node(&endpoint(2, NodeState::Normal), 1, &[20], true);
        partial.key_values.remove("tokens");
        // An impostor with this node's host id and another generation.
        let mut impostor = node(&endpoint(1, NodeState::Leaving), 4, &[10], true);
        impostor.gossip_address = "127.0.0.8:7000".parse().expect("address");
        let mut rejected = Vec::new();
        let next = view.next(&[local, partial, impostor], |n, e| {
            rejected.push((n.node_id.clone(), e))
        });
        assert_eq!(next.members().count(), 1);
        assert_eq!(next.local().endpoint.state, NodeState::Normal);
        assert_eq!(next.local().generation, 3);
        assert_eq!(
            rejected,
            [(id(2).to_string(), StateError::Incomplete("tokens"))]
        );
    }

    #[test]
    fn after_a_pause_peers_up_before_stay_up_and_others_follow_chitchat() {
        let local = node(&endpoint(1, NodeState::Normal), 1, &[10], true);
        let peer = |n: u8, generation: u64, live: bool| {
            node(
                &endpoint(n, NodeState::Normal),
                generation,
                &[i64::from(n) * 10],
                live,
            )
        };
        let before = start(&local).next(
            &[
                local.clone(),
                peer(2, 1, true),
                peer(3, 1, true),
                peer(4, 1, false),
            ],
            no_rejects,
        );
        // Chitchat convicts everyone at the resume, and holds node 4 up again; node 3 restarted.
        let after = before.next(
            &[
                local.clone(),
                peer(2, 1, false),
                peer(3, 2, false),
                peer(4, 1, true),
            ],
            no_rejects,
        );
        assert!(!after.is_live(id(2)) && !after.is_live(id(3)));
        let held = after.holding_live(&before);
        assert!(held.is_live(id(2)), "up before the pause, same process");
        assert!(
            !held.is_live(id(3)),
            "a new generation is not the process heard before"
        );
        assert!(
            held.is_live(id(4)),
            "chitchat's word for a peer it holds up"
        );
        assert!(held.is_live(id(1)));
        // Once the hold ends, the view is chitchat's again.
        let released = held.next(&[local, peer(2, 1, false)], no_rejects);
        assert!(!released.is_live(id(2)));
    }

    #[test]
    fn the_ring_holds_every_owner_up_or_down_and_no_joining_node() {
        let local = node(&endpoint(1, NodeState::Normal), 1, &[10, 40], true);
        let nodes = [
            local.clone(),
            node(&endpoint(2, NodeState::Normal), 1, &[20], false),
            node(&endpoint(3, NodeState::Joining), 1, &[30], true),
            node(&endpoint(4, NodeState::Leaving), 1, &[50], true),
        ];
        let view = start(&local).next(&nodes, no_rejects);
        assert!(!view.is_live(id(2)));
        assert!(view.is_live(id(3)));
        let ring = view.token_metadata().expect("ring");
        assert_eq!(
            ring.ring(),
            [(10, id(1)), (20, id(2)), (40, id(1)), (50, id(4))]
        );
        assert_eq!(
            ring.topology().endpoint(id(4)).map(|e| e.state),
            Some(NodeState::Leaving)
        );
        assert_eq!(ring.local_host_id(), id(1));
        assert_eq!(view.schema_versions().len(), 1);
        assert_eq!(view.schema_versions()[&uuid::Uuid::nil()].len(), 3);
    }
}
