//! The token ring: which node owns which token, and the walk from a token round the ring.

use std::collections::BTreeMap;

use crate::topology::{Endpoint, HostId, Topology};
use crate::{LocatorError, Token};

/// Every node's tokens and where the nodes are (Cassandra's `TokenMetadata` with its
/// `Topology`), seen from this node. An immutable value: a change builds a new one, so a
/// request reads one consistent ring however long it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenMetadata {
    /// Every owned token with its owner, sorted by token; a token has one owner.
    ring: Vec<(Token, HostId)>,
    /// Each endpoint's tokens, sorted.
    tokens: BTreeMap<HostId, Vec<Token>>,
    topology: Topology,
    /// This node.
    local: HostId,
    /// The ring's owners' places as small integers, for placement's walk.
    index: RingIndex,
}

/// Where each ring token's owner is, as indices rather than names, so that
/// `NetworkTopologyStrategy`'s walk, run for every request, compares integers instead of
/// looking names up. Rebuilt whenever the ring or topology changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RingIndex {
    /// Per ring position (parallel to `TokenMetadata::ring`): the owner's data centre (an
    /// index into `datacenters`) and rack (numbered across all data centres).
    pub(crate) locations: Vec<(u32, u32)>,
    /// Every data centre with endpoints, sorted by name: its endpoint and rack counts.
    pub(crate) datacenters: Vec<DatacenterSize>,
    /// Racks over all data centres.
    pub(crate) racks: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatacenterSize {
    pub(crate) name: String,
    pub(crate) endpoints: usize,
    pub(crate) racks: usize,
}

impl RingIndex {
    fn build(ring: &[(Token, HostId)], topology: &Topology) -> RingIndex {
        let mut datacenters = Vec::new();
        // (data centre, rack) → (data centre index, rack number).
        let mut places: BTreeMap<(&str, &str), (u32, u32)> = BTreeMap::new();
        let mut racks = 0usize;
        for dc in topology.datacenters() {
            let dc_index = datacenters.len() as u32;
            let dc_racks = topology.racks_of(dc);
            for rack in dc_racks.clone() {
                places.insert((dc, rack), (dc_index, racks as u32));
                racks += 1;
            }
            datacenters.push(DatacenterSize {
                name: dc.to_string(),
                endpoints: topology.endpoint_count(dc),
                racks: dc_racks.count(),
            });
        }
        let locations = ring
            .iter()
            .map(|(_, owner)| {
                let location = topology
                    .location(*owner)
                    .expect("every ring token's owner is in the topology");
                places[&(location.datacenter.as_str(), location.rack.as_str())]
            })
            .collect();
        RingIndex {
            locations,
            datacenters,
            racks,
        }
    }

    /// The index of data centre `name`, if it has endpoints.
    pub(crate) fn datacenter(&self, name: &str) -> Option<usize> {
        self.datacenters
            .binary_search_by(|d| d.name.as_str().cmp(name))
            .ok()
    }
}

impl TokenMetadata {
    /// The ring of one node, this one, owning `tokens`.
    pub fn new(local: Endpoint, tokens: Vec<Token>) -> Result<TokenMetadata, LocatorError> {
        let host_id = local.host_id;
        let empty = TokenMetadata {
            ring: Vec::new(),
            tokens: BTreeMap::new(),
            topology: Topology::default(),
            local: host_id,
            index: RingIndex::default(),
        };
        empty.with_normal_tokens(local, tokens)
    }

    /// This ring with `endpoint` owning `tokens` (Cassandra's `updateNormalTokens`): an
    /// endpoint already known has its tokens and location replaced, and a token another
    /// endpoint owned changes hands, as in Cassandra.
    pub fn with_normal_tokens(
        &self,
        endpoint: Endpoint,
        tokens: Vec<Token>,
    ) -> Result<TokenMetadata, LocatorError> {
        let host_id = endpoint.host_id;
        let tokens = checked_tokens(host_id, tokens)?;
        let mut next = self.clone();
        next.remove_tokens(host_id);
        for owned in next.tokens.values_mut() {
            owned.retain(|t| tokens.binary_search(t).is_err());
        }
        next.tokens.retain(|_, owned| !owned.is_empty());
        next.ring.retain(|(t, _)| tokens.binary_search(t).is_err());
        next.ring.extend(tokens.iter().map(|&t| (t, host_id)));
        next.ring.sort_unstable();
        next.tokens.insert(host_id, tokens);
        // An endpoint left without tokens is no longer in the ring, so not in the topology
        // placement walks either; this node stays in its own view.
        let owners: Vec<HostId> = next.topology.endpoints().map(|e| e.host_id).collect();
        for owner in owners {
            if owner != host_id && owner != next.local && !next.tokens.contains_key(&owner) {
                next.topology.remove(owner);
            }
        }
        next.topology.insert(endpoint);
        next.index = RingIndex::build(&next.ring, &next.topology);
        Ok(next)
    }

    /// This ring without `host_id` and its tokens (Cassandra's `removeEndpoint`). This node
    /// cannot be removed from its own view.
    pub fn without_endpoint(&self, host_id: HostId) -> Result<TokenMetadata, LocatorError> {
        if host_id == self.local {
            return Err(LocatorError::LocalEndpoint(host_id));
        }
        if self.topology.endpoint(host_id).is_none() {
            return Err(LocatorError::UnknownEndpoint(host_id));
        }
        let mut next = self.clone();
        next.remove_tokens(host_id);
        next.topology.remove(host_id);
        next.index = RingIndex::build(&next.ring, &next.topology);
        Ok(next)
    }

    fn remove_tokens(&mut self, host_id: HostId) {
        if self.tokens.remove(&host_id).is_some() {
            self.ring.retain(|(_, owner)| *owner != host_id);
        }
    }

    /// This node.
    pub fn local_host_id(&self) -> HostId {
        self.local
    }

    pub fn local_endpoint(&self) -> &Endpoint {
        self.topology
            .endpoint(self.local)
            .expect("this node is always in its own topology")
    }

    /// This node's tokens, sorted.
    pub fn local_tokens(&self) -> &[Token] {
        self.tokens_of(self.local)
    }

    /// An endpoint's tokens, sorted (none for an unknown one).
    pub fn tokens_of(&self, host_id: HostId) -> &[Token] {
        self.tokens.get(&host_id).map_or(&[], Vec::as_slice)
    }

    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Every endpoint but this node (what `system.peers` lists).
    pub fn peers(&self) -> impl Iterator<Item = &Endpoint> {
        let local = self.local;
        self.topology
            .endpoints()
            .filter(move |e| e.host_id != local)
    }

    /// The ring's tokens with their owners, sorted by token.
    pub fn ring(&self) -> &[(Token, HostId)] {
        &self.ring
    }

    /// The owner of `token`, if some endpoint owns exactly that token.
    pub fn owner(&self, token: Token) -> Option<HostId> {
        let i = self.ring.binary_search_by_key(&token, |&(t, _)| t).ok()?;
        Some(self.ring[i].1)
    }

    /// The index in the ring of the first token at or after `token`, wrapping to the first
    /// (Cassandra's `TokenMetadata.firstTokenIndex` without the minimum token): the token of
    /// the range that holds `token`, its primary owner's.
    pub fn first_token_index(&self, token: Token) -> usize {
        let i = self.ring.partition_point(|&(t, _)| t < token);
        if i == self.ring.len() {
            0
        } else {
            i
        }
    }

    /// The ring's tokens and owners from the range that holds `token`, clockwise, each once
    /// (Cassandra's `TokenMetadata.ringIterator(sortedTokens, token, false)`).
    pub fn ring_walk(&self, token: Token) -> impl Iterator<Item = (Token, HostId)> + '_ {
        self.walk_positions(token).map(|i| self.ring[i])
    }

    /// The positions in `ring()` that `ring_walk` visits, in its order.
    pub(crate) fn walk_positions(&self, token: Token) -> impl Iterator<Item = usize> {
        let len = self.ring.len();
        let start = if len == 0 {
            0
        } else {
            self.first_token_index(token)
        };
        (start..len).chain(0..start)
    }

    pub(crate) fn index(&self) -> &RingIndex {
        &self.index
    }
}

/// `tokens` sorted and deduplicated, refused if empty or holding the minimum token.
fn checked_tokens(host_id: HostId, mut tokens: Vec<Token>) -> Result<Vec<Token>, LocatorError> {
    tokens.sort_unstable();
    tokens.dedup();
    if tokens.is_empty() {
        return Err(LocatorError::InvalidTokens {
            host_id,
            detail: "no tokens".to_string(),
        });
    }
    if tokens[0] == partitioner::MIN_TOKEN {
        return Err(LocatorError::InvalidTokens {
            host_id,
            detail: format!("{} is the minimum token", partitioner::MIN_TOKEN),
        });
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::topology::{Location, NodeState};

    fn endpoint(node: u8, dc: &str, rack: &str) -> Endpoint {
        Endpoint {
            host_id: HostId(uuid::Uuid::from_u128(node as u128)),
            broadcast_address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, node)),
            native_address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, node)),
            native_port: 9042,
            location: Location {
                datacenter: dc.to_string(),
                rack: rack.to_string(),
            },
            state: NodeState::Normal,
        }
    }

    fn id(node: u8) -> HostId {
        HostId(uuid::Uuid::from_u128(node as u128))
    }

    #[test]
    fn the_ring_walk_starts_at_the_range_holding_the_token_and_wraps() {
        let ring = TokenMetadata::new(endpoint(1, "dc1", "r1"), vec![100, -100])
            .and_then(|r| r.with_normal_tokens(endpoint(2, "dc1", "r1"), vec![0]))
            .expect("ring");
        let walk = |t| ring.ring_walk(t).map(|(t, _)| t).collect::<Vec<_>>();
        assert_eq!(walk(-100), [-100, 0, 100]);
        assert_eq!(walk(-99), [0, 100, -100]);
        assert_eq!(walk(100), [100, -100, 0]);
        // Past the last token: the range that wraps, owned by the first token.
        assert_eq!(walk(101), [-100, 0, 100]);
        assert_eq!(walk(i64::MIN + 1), [-100, 0, 100]);
        assert_eq!(ring.owner(0), Some(id(2)));
        assert_eq!(ring.owner(1), None);
        assert_eq!(ring.local_tokens(), [-100, 100]);
    }

    #[test]
    fn tokens_change_hands_and_endpoints_leave() {
        let ring = TokenMetadata::new(endpoint(1, "dc1", "r1"), vec![1, 2])
            .and_then(|r| r.with_normal_tokens(endpoint(2, "dc2", "r1"), vec![3]))
            .expect("ring");
        assert_eq!(ring.peers().map(|e| e.host_id).collect::<Vec<_>>(), [id(2)]);
        assert_eq!(
            ring.topology().datacenters().collect::<Vec<_>>(),
            ["dc1", "dc2"]
        );
        // Node 3 takes token 3: node 2, left without tokens, leaves the ring and topology.
        let moved = ring
            .with_normal_tokens(endpoint(3, "dc1", "r2"), vec![3, 2])
            .expect("moved");
        assert_eq!(moved.owner(2), Some(id(3)));
        assert_eq!(moved.local_tokens(), [1]);
        assert_eq!(moved.tokens_of(id(2)), [] as [i64; 0]);
        assert!(moved.topology().endpoint(id(2)).is_none());
        assert_eq!(moved.topology().rack_count("dc1"), 2);
        assert_eq!(moved.topology().endpoint_count("dc2"), 0);
        let gone = moved.without_endpoint(id(3)).expect("known");
        assert_eq!(gone.ring(), [(1, id(1))]);
        assert_eq!(gone.topology().len(), 1);
        assert_eq!(
            gone.without_endpoint(id(1)),
            Err(LocatorError::LocalEndpoint(id(1))),
            "this node stays"
        );
        // This node losing every token stays in its own view, owning none.
        let bare = gone
            .with_normal_tokens(endpoint(4, "dc1", "r1"), vec![1])
            .expect("token 1 moves");
        assert_eq!(bare.local_tokens(), [] as [i64; 0]);
        assert_eq!(bare.local_endpoint().host_id, id(1));
        assert_eq!(bare.ring(), [(1, id(4))]);
        // The original value is untouched.
        assert_eq!(ring.owner(3), Some(id(2)));
    }

    #[test]
    fn a_node_needs_tokens_other_than_the_minimum() {
        assert!(TokenMetadata::new(endpoint(1, "dc1", "r1"), vec![]).is_err());
        assert!(TokenMetadata::new(endpoint(1, "dc1", "r1"), vec![i64::MIN, 5]).is_err());
    }
}
