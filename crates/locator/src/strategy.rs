//! Replication strategies, typed, and replica placement exactly as Cassandra 5.0 computes it.

use std::collections::BTreeMap;

use crate::token_metadata::TokenMetadata;
use crate::topology::HostId;
use crate::Token;

/// A keyspace's replication strategy, parsed once from its validated options (validation, in
/// Cassandra's words, is the schema's: `schema::Replication::from_options`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicationStrategy {
    /// Cassandra's `LocalStrategy`: the data stays on the node that has it (the node-served
    /// system keyspaces).
    Local,
    /// `SimpleStrategy`: `replication_factor` distinct endpoints clockwise from the token's
    /// range, whatever their data centres and racks.
    Simple { replication_factor: u32 },
    /// `NetworkTopologyStrategy`: per data centre its factor, racks spread first. Only data
    /// centres with a factor above 0 are kept.
    NetworkTopology { datacenters: BTreeMap<String, u32> },
}

impl ReplicationStrategy {
    /// `NetworkTopologyStrategy` with `datacenters`, those at 0 dropped (their entries place
    /// nothing).
    pub fn network_topology(
        datacenters: impl IntoIterator<Item = (String, u32)>,
    ) -> ReplicationStrategy {
        ReplicationStrategy::NetworkTopology {
            datacenters: datacenters.into_iter().filter(|(_, rf)| *rf > 0).collect(),
        }
    }

    /// The replicas asked for over every data centre (Cassandra's
    /// `getReplicationFactor().allReplicas`): what QUORUM and ALL count.
    pub fn replication_factor(&self) -> usize {
        match self {
            ReplicationStrategy::Local => 1,
            ReplicationStrategy::Simple { replication_factor } => *replication_factor as usize,
            ReplicationStrategy::NetworkTopology { datacenters } => {
                datacenters.values().map(|&rf| rf as usize).sum()
            }
        }
    }

    /// The replicas asked for in data centre `dc`: LOCAL_QUORUM's and EACH_QUORUM's count.
    /// Only `NetworkTopologyStrategy` places by data centre; for the others this is the
    /// whole factor, as Cassandra's `localQuorumFor` falls back to `quorumFor`.
    pub fn replication_factor_in(&self, dc: &str) -> usize {
        match self {
            ReplicationStrategy::NetworkTopology { datacenters } => {
                datacenters.get(dc).map_or(0, |&rf| rf as usize)
            }
            _ => self.replication_factor(),
        }
    }

    /// Whether any replica is asked for at all.
    pub fn has_replicas(&self) -> bool {
        self.replication_factor() > 0
    }

    /// The endpoints that replicate `token` over `ring`, primary first, as Cassandra's
    /// `calculateNaturalReplicas`.
    pub fn natural_replicas(&self, ring: &TokenMetadata, token: Token) -> Vec<HostId> {
        match self {
            ReplicationStrategy::Local => vec![ring.local_host_id()],
            ReplicationStrategy::Simple { replication_factor } => {
                simple_replicas(ring, token, *replication_factor as usize)
            }
            ReplicationStrategy::NetworkTopology { datacenters } => {
                network_topology_replicas(ring, token, datacenters)
            }
        }
    }
}

/// `SimpleStrategy.calculateNaturalReplicas`: walk the ring clockwise from the range holding
/// `token`, taking each endpoint the first time it is met, until `rf` are taken. The walk also
/// stops once every endpoint is taken: Cassandra walks on to the end of the ring, but meets
/// no endpoint it does not already have, so the list is the same.
fn simple_replicas(ring: &TokenMetadata, token: Token, rf: usize) -> Vec<HostId> {
    let wanted = rf.min(ring.topology().len());
    let mut replicas: Vec<HostId> = Vec::with_capacity(wanted);
    for (_, endpoint) in ring.ring_walk(token) {
        if replicas.len() == wanted {
            break;
        }
        if !replicas.contains(&endpoint) {
            replicas.push(endpoint);
        }
    }
    replicas
}

/// One data centre's share of `NetworkTopologyStrategy`'s walk (Cassandra's
/// `DatacenterEndpoints`).
struct DatacenterReplicas {
    /// Replicas still to place here: the factor, or the data centre's endpoint count if that
    /// is smaller.
    left: usize,
    /// Endpoints of a rack already used that may still be taken: when there are fewer racks
    /// than the factor, every rack gets one replica and the rest go to the first endpoints
    /// met in racks already used. Negative when there are more racks than the factor.
    acceptable_rack_repeats: i64,
}

/// `NetworkTopologyStrategy.calculateNaturalReplicas`: one walk of the ring from the range
/// holding `token`, placing in each data centre (with a factor and endpoints) a replica on
/// every endpoint of a rack not yet used there, and on an endpoint of a used rack only while
/// the racks left could not fill the factor anyway; each data centre stops at its factor
/// (capped by its endpoint count), the walk once all are done.
fn network_topology_replicas(
    ring: &TokenMetadata,
    token: Token,
    datacenters: &BTreeMap<String, u32>,
) -> Vec<HostId> {
    let index = ring.index();
    // By data centre index: the ring's owners are compared as integers (`RingIndex`).
    let mut dcs: Vec<Option<DatacenterReplicas>> = Vec::new();
    dcs.resize_with(index.datacenters.len(), || None);
    let mut to_fill = 0;
    let mut capacity = 0;
    for (dc, &rf) in datacenters {
        let rf = rf as usize;
        let Some(i) = index.datacenter(dc) else {
            continue; // no endpoints there
        };
        let size = &index.datacenters[i];
        if rf == 0 {
            continue;
        }
        let left = rf.min(size.endpoints);
        dcs[i] = Some(DatacenterReplicas {
            left,
            acceptable_rack_repeats: rf as i64 - size.racks as i64,
        });
        to_fill += 1;
        capacity += left;
    }
    let mut replicas: Vec<HostId> = Vec::with_capacity(capacity);
    // Racks (numbered across data centres) used so far.
    let mut seen_racks = vec![false; index.racks];
    for position in ring.walk_positions(token) {
        if to_fill == 0 {
            break;
        }
        let (dc_index, rack) = index.locations[position];
        let Some(dc) = dcs[dc_index as usize].as_mut() else {
            continue;
        };
        let endpoint = ring.ring()[position].1;
        if dc.left == 0 || replicas.contains(&endpoint) {
            continue;
        }
        if !seen_racks[rack as usize] {
            seen_racks[rack as usize] = true;
            replicas.push(endpoint);
        } else if dc.acceptable_rack_repeats > 0 {
            replicas.push(endpoint);
            dc.acceptable_rack_repeats -= 1;
        } else {
            continue;
        }
        dc.left -= 1;
        if dc.left == 0 {
            to_fill -= 1;
        }
    }
    replicas
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::topology::{Endpoint, Location, NodeState};

    fn endpoint(node: u8, dc: &str, rack: &str) -> Endpoint {
        Endpoint {
            host_id: id(node),
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
    fn local_strategy_is_this_node_and_factors_count_per_data_centre() {
        let ring = TokenMetadata::new(endpoint(1, "dc1", "r1"), vec![1])
            .and_then(|r| r.with_normal_tokens(endpoint(2, "dc2", "r1"), vec![2]))
            .expect("ring");
        assert_eq!(
            ReplicationStrategy::Local.natural_replicas(&ring, 2),
            [id(1)]
        );
        let nts = ReplicationStrategy::network_topology([
            ("dc1".to_string(), 3),
            ("dc2".to_string(), 0),
            ("dc3".to_string(), 2),
        ]);
        assert_eq!(nts.replication_factor(), 5);
        assert_eq!(nts.replication_factor_in("dc1"), 3);
        assert_eq!(nts.replication_factor_in("dc2"), 0);
        // dc3 has no nodes; dc1 has one, so one replica.
        assert_eq!(nts.natural_replicas(&ring, 2), [id(1)]);
        let simple = ReplicationStrategy::Simple {
            replication_factor: 3,
        };
        assert_eq!(simple.replication_factor_in("dc9"), 3);
        assert_eq!(simple.natural_replicas(&ring, 2), [id(2), id(1)]);
        assert!(!ReplicationStrategy::network_topology([]).has_replicas());
    }
}
