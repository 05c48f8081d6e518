//! Properties of placement over random rings (many more than `placement.rs`'s fixed ones):
//! whatever the ring, a replica list holds distinct endpoints, as many per data centre as the
//! factor allows, spread over as many racks as the data centre has, and starts at the owner of
//! the token's range.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use locator::{Endpoint, HostId, Location, NodeState, ReplicationStrategy, TokenMetadata};

/// SplitMix64: deterministic, so a failure names a seed that reproduces it.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const DATACENTERS: [&str; 3] = ["dc1", "dc2", "dc3"];

fn random_ring(random: &mut Random) -> TokenMetadata {
    let nodes = 1 + random.below(12) as u8;
    let vnodes = 1 + random.below(8) as usize;
    let mut ring: Option<TokenMetadata> = None;
    for node in 1..=nodes {
        let dc = DATACENTERS[random.below(DATACENTERS.len() as u64) as usize];
        let rack = format!("r{}", random.below(4));
        let address = IpAddr::V4(Ipv4Addr::new(127, 0, 0, node));
        let endpoint = Endpoint {
            host_id: HostId(uuid::Uuid::from_u128(node.into())),
            broadcast_address: address,
            native_address: address,
            native_port: 9042,
            location: Location {
                datacenter: dc.to_string(),
                rack,
            },
            state: NodeState::Normal,
        };
        let tokens: Vec<i64> = (0..vnodes)
            .map(|_| (random.next() as i64).max(i64::MIN + 1))
            .collect();
        ring = Some(
            match ring {
                None => TokenMetadata::new(endpoint, tokens),
                Some(r) => r.with_normal_tokens(endpoint, tokens),
            }
            .expect("valid tokens"),
        );
    }
    ring.expect("at least one node")
}

#[test]
fn placement_properties_hold_on_random_rings() {
    for seed in 0..300u64 {
        let mut random = Random(seed);
        let ring = random_ring(&mut random);
        let topology = ring.topology();
        let factors: BTreeMap<String, u32> = DATACENTERS
            .iter()
            .map(|dc| (dc.to_string(), random.below(5) as u32))
            .collect();
        let nts = ReplicationStrategy::network_topology(factors.clone());
        let rf = random.below(6) as u32;
        let simple = ReplicationStrategy::Simple {
            replication_factor: rf,
        };
        for _ in 0..20 {
            let token = random.next() as i64;
            let context = format!("seed {seed}, token {token}");
            let primary = ring.ring_walk(token).next().map(|(_, owner)| owner);

            let replicas = simple.natural_replicas(&ring, token);
            let distinct: BTreeSet<HostId> = replicas.iter().copied().collect();
            assert_eq!(distinct.len(), replicas.len(), "{context}");
            assert_eq!(
                replicas.len(),
                (rf as usize).min(topology.len()),
                "{context}"
            );
            if rf > 0 {
                assert_eq!(replicas.first().copied(), primary, "{context}");
            }
            // SimpleStrategy: the first endpoints met walking the ring, in that order.
            let mut walked: Vec<HostId> = Vec::new();
            for (_, owner) in ring.ring_walk(token) {
                if !walked.contains(&owner) {
                    walked.push(owner);
                }
            }
            assert_eq!(replicas, walked[..replicas.len()], "{context}");

            let replicas = nts.natural_replicas(&ring, token);
            let distinct: BTreeSet<HostId> = replicas.iter().copied().collect();
            assert_eq!(distinct.len(), replicas.len(), "{context}");
            for (dc, &dc_rf) in &factors {
                let in_dc: Vec<&Location> = replicas
                    .iter()
                    .map(|e| topology.location(*e).expect("known"))
                    .filter(|l| &l.datacenter == dc)
                    .collect();
                let nodes = topology.endpoint_count(dc);
                assert_eq!(in_dc.len(), (dc_rf as usize).min(nodes), "{context}, {dc}");
                let racks: BTreeSet<&str> = in_dc.iter().map(|l| l.rack.as_str()).collect();
                assert_eq!(
                    racks.len(),
                    in_dc.len().min(topology.rack_count(dc)),
                    "{context}, {dc}: racks are spread first"
                );
            }
        }
    }
}
