//! The nodes of the cluster: who they are, where they are, what state they are in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

/// A node's identity, stable for its life (Cassandra's host id): addresses may change, this
/// does not. Endpoints are keyed by it, as ScyllaDB keys its topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub uuid::Uuid);

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A node's data centre and rack, as its snitch reports them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    pub datacenter: String,
    pub rack: String,
}

/// A node's place in the token ring's life cycle: Cassandra's gossip `STATUS` values that
/// matter to placement (`BOOT`, `NORMAL`, `LEAVING`, `MOVING`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Bootstrapping: its tokens are pending, not yet in the ring.
    Joining,
    /// Owns its tokens.
    Normal,
    /// Decommissioning: still owns its tokens until it has streamed them away.
    Leaving,
    /// Moving to another token.
    Moving,
}

/// One node as the cluster knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host_id: HostId,
    /// The address other nodes reach it on (Cassandra's `broadcast_address`, `system.peers`'
    /// `peer`).
    pub broadcast_address: IpAddr,
    /// The address clients reach it on (`broadcast_rpc_address`, `system.peers`'
    /// `rpc_address`, `system.peers_v2`'s `native_address`).
    pub native_address: IpAddr,
    pub native_port: u16,
    pub location: Location,
    pub state: NodeState,
}

/// Every endpoint, indexed by data centre and rack as `NetworkTopologyStrategy` walks them
/// (Cassandra's `TokenMetadata.Topology`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    endpoints: BTreeMap<HostId, Endpoint>,
    /// Data centre → rack → endpoints.
    racks: BTreeMap<String, BTreeMap<String, BTreeSet<HostId>>>,
}

impl Topology {
    /// Adds `endpoint`, or replaces the endpoint of its host id (its location may change).
    pub(crate) fn insert(&mut self, endpoint: Endpoint) {
        self.remove(endpoint.host_id);
        let location = &endpoint.location;
        self.racks
            .entry(location.datacenter.clone())
            .or_default()
            .entry(location.rack.clone())
            .or_default()
            .insert(endpoint.host_id);
        self.endpoints.insert(endpoint.host_id, endpoint);
    }

    pub(crate) fn remove(&mut self, host_id: HostId) -> Option<Endpoint> {
        let old = self.endpoints.remove(&host_id)?;
        let Location { datacenter, rack } = &old.location;
        if let Some(racks) = self.racks.get_mut(datacenter) {
            if let Some(members) = racks.get_mut(rack) {
                members.remove(&host_id);
                if members.is_empty() {
                    racks.remove(rack);
                }
            }
            if racks.is_empty() {
                self.racks.remove(datacenter);
            }
        }
        Some(old)
    }

    pub fn endpoint(&self, host_id: HostId) -> Option<&Endpoint> {
        self.endpoints.get(&host_id)
    }

    /// Every endpoint, by host id.
    pub fn endpoints(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints.values()
    }

    pub fn len(&self) -> usize {
        self.endpoints.len()
    }

    pub fn is_empty(&self) -> bool {
        self.endpoints.is_empty()
    }

    /// The data centres that have at least one endpoint, sorted.
    pub fn datacenters(&self) -> impl Iterator<Item = &str> {
        self.racks.keys().map(String::as_str)
    }

    /// How many endpoints data centre `dc` has.
    pub fn endpoint_count(&self, dc: &str) -> usize {
        self.racks
            .get(dc)
            .map_or(0, |racks| racks.values().map(BTreeSet::len).sum())
    }

    /// Data centre `dc`'s racks, sorted.
    pub fn racks_of(&self, dc: &str) -> impl Iterator<Item = &str> + Clone {
        self.racks
            .get(dc)
            .into_iter()
            .flat_map(|racks| racks.keys().map(String::as_str))
    }

    /// How many racks data centre `dc` has.
    pub fn rack_count(&self, dc: &str) -> usize {
        self.racks.get(dc).map_or(0, BTreeMap::len)
    }

    pub fn location(&self, host_id: HostId) -> Option<&Location> {
        self.endpoints.get(&host_id).map(|e| &e.location)
    }
}
