//! Replica placement against the lists Cassandra 5.0.9's own strategies computed for the same
//! rings (`cassandra/placement.txt`, written by `cassandra/Placement.java`; see its README).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use locator::{Endpoint, HostId, Location, NodeState, ReplicationStrategy, TokenMetadata};

const PLACEMENT: &str = include_str!("cassandra/placement.txt");

fn host(node: u32) -> HostId {
    HostId(uuid::Uuid::from_u128(node as u128))
}

fn endpoint(node: u32, dc: &str, rack: &str) -> Endpoint {
    let address = IpAddr::V4(Ipv4Addr::new(
        127,
        0,
        (node / 256) as u8,
        (node % 256) as u8,
    ));
    Endpoint {
        host_id: host(node),
        broadcast_address: address,
        native_address: address,
        native_port: 9042,
        location: Location {
            datacenter: dc.to_string(),
            rack: rack.to_string(),
        },
        state: NodeState::Normal,
    }
}

fn strategy(fields: &[&str]) -> ReplicationStrategy {
    let options: BTreeMap<&str, u32> = fields[1..]
        .iter()
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("option=value");
            (k, v.parse().expect("a factor"))
        })
        .collect();
    match fields[0] {
        "SimpleStrategy" => ReplicationStrategy::Simple {
            replication_factor: options["replication_factor"],
        },
        "NetworkTopologyStrategy" => ReplicationStrategy::network_topology(
            options.into_iter().map(|(dc, rf)| (dc.to_string(), rf)),
        ),
        other => panic!("unknown strategy {other}"),
    }
}

#[test]
fn replicas_are_cassandras_for_every_ring_and_strategy() {
    let mut ring: Option<TokenMetadata> = None;
    let mut current: Option<ReplicationStrategy> = None;
    let mut scenario = "";
    let mut checked = 0;
    for line in PLACEMENT.lines() {
        let (kind, rest) = line.split_once(' ').expect("a record");
        let fields: Vec<&str> = rest.split(' ').collect();
        match kind {
            "scenario" => {
                scenario = rest;
                ring = None;
            }
            "node" => {
                let node: u32 = fields[0].parse().expect("node");
                let tokens = fields[3..].iter().map(|t| t.parse().expect("token"));
                let e = endpoint(node, fields[1], fields[2]);
                ring = Some(
                    match ring.take() {
                        None => TokenMetadata::new(e, tokens.collect()),
                        Some(r) => r.with_normal_tokens(e, tokens.collect()),
                    }
                    .expect("valid tokens"),
                );
            }
            "strategy" => current = Some(strategy(&fields)),
            "replicas" => {
                let token: i64 = fields[0].parse().expect("token");
                let expected: Vec<HostId> = fields[1..]
                    .iter()
                    .map(|n| host(n.parse().expect("node")))
                    .collect();
                let strategy = current.as_ref().expect("a strategy");
                let got = strategy.natural_replicas(ring.as_ref().expect("a ring"), token);
                assert_eq!(got, expected, "{scenario}, {strategy:?}, token {token}");
                checked += 1;
            }
            other => panic!("unknown record {other}"),
        }
    }
    assert!(checked > 2000, "only {checked} lists checked");
}
