//! `helenus admin status` and `describecluster`: the cluster as this node sees it, in the form
//! of Cassandra's `nodetool status` and `nodetool describecluster`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::{bail, Result};
use arc_swap::ArcSwap;
use gossip::ClusterView;
use locator::{HostId, NodeState, ReplicationStrategy, TokenMetadata};
use schema::Schema;
use tokio::sync::watch;

/// What the admin endpoint reads of the cluster.
#[derive(Clone)]
pub struct AdminCluster {
    pub cluster_name: String,
    pub snitch: String,
    /// The ring requests are placed on (the metadata log's).
    pub ring: Arc<ArcSwap<TokenMetadata>>,
    /// Gossip's view: who is up, each node's load and schema version.
    pub view: watch::Receiver<Arc<ClusterView>>,
    /// Messaging's counters and fault injector (`tpstats`, `fault`).
    pub internode: crate::internode_faults::AdminInternode,
    /// The hints this node keeps for the others (`None` in tests without a store).
    pub hints: Option<Arc<hints::HintStore>>,
    /// The coordinator's counters (`proxystats`; `None` in tests without a coordinator).
    pub coordinator: Option<Arc<coordinator::CoordinatorStats>>,
}

/// `nodetool status [keyspace]`: per data centre, each node's status and state, address, load,
/// token count, ownership and host id, rack. Ownership is effective (the share of the ring a
/// node replicates) for `keyspace`, or, without one, for the replication every user keyspace
/// shares; raw token ownership (the ranges a node is primary for) when there is none.
/// `local_load` is this node's stored bytes (peers' come from gossip).
pub fn status(
    cluster: &AdminCluster,
    schema: &Schema,
    keyspace: Option<&str>,
    local_load: u64,
) -> Result<Vec<String>> {
    let ring = cluster.ring.load_full();
    let view = cluster.view.borrow().clone();
    let (strategy, note) = match keyspace {
        Some(name) => match schema.keyspace(name) {
            Some(ks) if !ks.virtual_keyspace => (Some(ks.replication.strategy().clone()), None),
            Some(_) => bail!("'{name}' is a node-local keyspace: it has no ring ownership"),
            None => bail!("unknown keyspace '{name}'"),
        },
        None => {
            let mut user = schema
                .keyspaces
                .values()
                .filter(|ks| !ks.virtual_keyspace)
                .map(|ks| ks.replication.strategy().clone());
            match user.next() {
                None => (None, None),
                Some(first) if user.all(|s| s == first) => (Some(first), None),
                Some(_) => (
                    None,
                    Some(
                        "Note: Non-system keyspaces don't have the same replication settings, \
                         effective ownership information is meaningless",
                    ),
                ),
            }
        }
    };
    let owns = ownership(&ring, strategy.as_ref());
    let owns_header = if strategy.is_some() {
        "Owns (effective)"
    } else {
        "Owns"
    };
    let local = ring.local_host_id();
    let mut by_dc: BTreeMap<&str, Vec<&locator::Endpoint>> = BTreeMap::new();
    for endpoint in ring.topology().endpoints() {
        by_dc
            .entry(endpoint.location.datacenter.as_str())
            .or_default()
            .push(endpoint);
    }
    let mut lines = Vec::new();
    for (dc, mut endpoints) in by_dc {
        endpoints.sort_by_key(|e| e.broadcast_address);
        lines.push(format!("Datacenter: {dc}"));
        lines.push("=".repeat("Datacenter: ".len() + dc.len()));
        lines.push("Status=Up/Down".to_string());
        lines.push("|/ State=Normal/Leaving/Joining/Moving".to_string());
        let rows: Vec<[String; 7]> = endpoints
            .iter()
            .map(|e| {
                let member = view.member(e.host_id);
                let up = e.host_id == local || member.is_some_and(|m| m.live);
                let load = if e.host_id == local {
                    Some(local_load)
                } else {
                    member.and_then(|m| m.load)
                };
                [
                    format!("{}{}", if up { 'U' } else { 'D' }, state_letter(e.state)),
                    e.broadcast_address.to_string(),
                    load.map_or_else(|| "?".to_string(), human_bytes),
                    ring.tokens_of(e.host_id).len().to_string(),
                    format!(
                        "{:.1}%",
                        owns.get(&e.host_id).copied().unwrap_or(0.0) * 100.0
                    ),
                    e.host_id.0.to_string(),
                    e.location.rack.clone(),
                ]
            })
            .collect();
        let header = [
            "--",
            "Address",
            "Load",
            "Tokens",
            owns_header,
            "Host ID",
            "Rack",
        ]
        .map(str::to_string);
        let widths: Vec<usize> = (0..7)
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].len())
                    .chain([header[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in std::iter::once(&header).chain(&rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}  ", width = widths[i]);
                }
            }
            lines.push(line);
        }
        lines.push(String::new());
    }
    if let Some(note) = note {
        lines.push(note.to_string());
    }
    lines.extend(hints_note(cluster, &ring));
    Ok(lines)
}

/// After `status`'s table, the nodes this node holds hints for or dropped hints of: a node
/// whose hints were dropped (down longer than `max_hint_window`, or the hints directory
/// failing) missed writes that only repair brings back.
fn hints_note(cluster: &AdminCluster, ring: &TokenMetadata) -> Vec<String> {
    match &cluster.hints {
        Some(store) => hint_notes(store, ring),
        None => Vec::new(),
    }
}

fn hint_notes(store: &hints::HintStore, ring: &TokenMetadata) -> Vec<String> {
    let mut lines = Vec::new();
    for stats in store.stats() {
        if stats.pending == 0 && stats.dropped() == 0 {
            continue;
        }
        let address = address_of(ring, stats.host);
        let repair = if stats.dropped() > 0 {
            "; hints were dropped, run repair"
        } else {
            ""
        };
        lines.push(format!(
            "Hints for {address}: {} pending, {} dropped (max_hint_window: {}){repair}",
            stats.pending,
            stats.dropped(),
            stats.dropped_window
        ));
    }
    if !lines.is_empty() {
        lines.insert(0, String::new());
    }
    lines
}

fn address_of(ring: &TokenMetadata, host: HostId) -> String {
    ring.topology()
        .endpoints()
        .find(|e| e.host_id == host)
        .map_or_else(|| "?".to_string(), |e| e.broadcast_address.to_string())
}

/// `helenus admin hints`: one line per node this node keeps hints for, with its address and
/// host id, then `key=value` counters (the `hints` crate's `TargetStats`).
pub fn hints(cluster: &AdminCluster) -> Vec<String> {
    match &cluster.hints {
        Some(store) => hint_lines(store, &cluster.ring.load_full()),
        None => Vec::new(),
    }
}

fn hint_lines(store: &hints::HintStore, ring: &TokenMetadata) -> Vec<String> {
    store
        .stats()
        .into_iter()
        .map(|s| {
            format!(
                "{} host_id={} pending={} stored={} delivered={} dropped_window={} dropped_disk={} dropped_size={} dropped_expired={} dropped_table={} dropped_corrupt={} last_replay_ms={}",
                address_of(ring, s.host),
                s.host.0,
                s.pending,
                s.stored,
                s.delivered,
                s.dropped_window,
                s.dropped_disk,
                s.dropped_size,
                s.dropped_expired,
                s.dropped_table,
                s.dropped_corrupt,
                s.last_replay_ms.map_or_else(|| "-".to_string(), |ms| ms.to_string()),
            )
        })
        .collect()
}

/// `nodetool describecluster`'s first part: name, snitch, partitioner, and every schema
/// version with the nodes that report it (gossip's; agreement when there is one).
pub fn describe(cluster: &AdminCluster) -> Vec<String> {
    let view = cluster.view.borrow().clone();
    let mut lines = vec![
        "Cluster Information:".to_string(),
        format!("\tName: {}", cluster.cluster_name),
        format!("\tSnitch: {}", cluster.snitch),
        "\tDynamicEndPointSnitch: disabled".to_string(),
        "\tPartitioner: org.apache.cassandra.dht.Murmur3Partitioner".to_string(),
        "\tSchema versions:".to_string(),
    ];
    for (version, hosts) in view.schema_versions() {
        let addresses: Vec<String> = hosts
            .iter()
            .filter_map(|h| view.member(*h))
            .map(|m| m.endpoint.broadcast_address.to_string())
            .collect();
        lines.push(format!("\t\t{version}: [{}]", addresses.join(", ")));
    }
    let down: Vec<String> = view
        .members()
        .filter(|m| !m.live)
        .map(|m| m.endpoint.broadcast_address.to_string())
        .collect();
    if !down.is_empty() {
        lines.push(format!("\t\tUNREACHABLE: [{}]", down.join(", ")));
    }
    lines
}

fn state_letter(state: NodeState) -> char {
    match state {
        NodeState::Normal => 'N',
        NodeState::Leaving => 'L',
        NodeState::Joining => 'J',
        NodeState::Moving => 'M',
    }
}

/// Each node's share of the ring: of the ranges it replicates under `strategy`, or (without
/// one) of those it is primary for. A range is (previous token, token], owned by the token's
/// node; the whole ring is 2^64 tokens.
fn ownership(
    ring: &TokenMetadata,
    strategy: Option<&ReplicationStrategy>,
) -> BTreeMap<HostId, f64> {
    let tokens = ring.ring();
    let mut owned: BTreeMap<HostId, f64> = BTreeMap::new();
    let full = 2f64.powi(64);
    for (i, &(token, owner)) in tokens.iter().enumerate() {
        let previous = tokens[(i + tokens.len() - 1) % tokens.len()].0;
        let width = if tokens.len() == 1 {
            full
        } else {
            token.wrapping_sub(previous) as u64 as f64
        };
        let holders = match strategy {
            Some(strategy) => strategy.natural_replicas(ring, token),
            None => vec![owner],
        };
        for holder in holders {
            *owned.entry(holder).or_default() += width / full;
        }
    }
    owned
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// `helenus admin proxystats`: what this node's coordinator counted since it started, in the
/// spirit of `nodetool proxyhistograms` and the `ClientRequest` metrics: timeouts and
/// unavailables by request kind, replica requests with no answer in time by verb, and per table
/// the speculative retries and the coordinator read latency (decayed p50/p99).
pub fn proxystats(cluster: &AdminCluster, schema: &Schema) -> Vec<String> {
    let Some(stats) = &cluster.coordinator else {
        return vec!["no coordinator statistics on this node".to_string()];
    };
    let snapshot = stats.snapshot();
    let mut lines = vec![format!(
        "{:<12} {:>10} {:>13}",
        "Request", "Timeouts", "Unavailables"
    )];
    let kinds = [
        ("Read", snapshot.timeouts.read, snapshot.unavailables.read),
        (
            "RangeRead",
            snapshot.timeouts.range_read,
            snapshot.unavailables.range_read,
        ),
        (
            "Write",
            snapshot.timeouts.write,
            snapshot.unavailables.write,
        ),
        (
            "Truncate",
            snapshot.timeouts.truncate,
            snapshot.unavailables.truncate,
        ),
    ];
    for (kind, timeouts, unavailables) in kinds {
        lines.push(format!("{kind:<12} {timeouts:>10} {unavailables:>13}"));
    }
    lines.push(String::new());
    lines.push(format!("{:<12} {:>10}", "Replica verb", "No answer"));
    let verbs = [
        ("MUTATION", snapshot.replica_timeouts.mutation),
        ("READ", snapshot.replica_timeouts.read),
        ("DIGEST", snapshot.replica_timeouts.digest),
        ("TRUNCATE", snapshot.replica_timeouts.truncate),
    ];
    for (verb, count) in verbs {
        lines.push(format!("{verb:<12} {count:>10}"));
    }
    lines.push(String::new());
    lines.push(format!(
        "Batch log: {} logged batches, {} replayed",
        snapshot.batches_logged, snapshot.batches_replayed
    ));
    lines.push(String::new());
    lines.push(format!(
        "{:<40} {:>11} {:>12} {:>13} {:>10} {:>10}",
        "Table", "Speculative", "Spec. failed", "Spec. no node", "p50 (ms)", "p99 (ms)"
    ));
    let mut tables: Vec<(String, String)> = snapshot
        .tables
        .iter()
        .map(|t| {
            let name = schema
                .table_by_id(t.table)
                .map(|m| format!("{}.{}", m.keyspace, m.name))
                .unwrap_or_else(|| t.table.to_string());
            let ms = |d: Option<std::time::Duration>| {
                d.map_or("-".to_string(), |d| format!("{:.2}", d.as_secs_f64() * 1e3))
            };
            let line = format!(
                "{:<40} {:>11} {:>12} {:>13} {:>10} {:>10}",
                name,
                t.speculative_retries,
                t.speculative_failed_retries,
                t.speculative_insufficient_replicas,
                ms(t.read_latency_p50),
                ms(t.read_latency_p99)
            );
            (name, line)
        })
        .collect();
    tables.sort();
    lines.extend(tables.into_iter().map(|(_, line)| line));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(n: u8) -> locator::Endpoint {
        let ip = std::net::IpAddr::from([127, 0, 0, n]);
        locator::Endpoint {
            host_id: HostId(uuid::Uuid::from_u128(n.into())),
            broadcast_address: ip,
            native_address: ip,
            native_port: 9042,
            location: locator::Location {
                datacenter: "datacenter1".to_string(),
                rack: "rack1".to_string(),
            },
            state: NodeState::Normal,
        }
    }

    fn ring() -> TokenMetadata {
        // Three nodes, one token each: node 2 and node 3 own a quarter of the ring each, node 1
        // (wrapping around) half.
        let q = i64::MAX / 2 + 1; // 2^62
        TokenMetadata::new(endpoint(1), vec![-q])
            .and_then(|r| r.with_normal_tokens(endpoint(2), vec![0]))
            .and_then(|r| r.with_normal_tokens(endpoint(3), vec![q]))
            .expect("ring")
    }

    #[test]
    fn raw_ownership_is_the_primary_ranges_share() {
        let owns = ownership(&ring(), None);
        let total: f64 = owns.values().sum();
        assert!((total - 1.0).abs() < 1e-9, "{owns:?}");
        let two = owns[&HostId(uuid::Uuid::from_u128(2))];
        assert!((two - 0.25).abs() < 1e-6, "{owns:?}");
    }

    #[test]
    fn effective_ownership_counts_every_replica() {
        let strategy = ReplicationStrategy::Simple {
            replication_factor: 2,
        };
        let owns = ownership(&ring(), Some(&strategy));
        let total: f64 = owns.values().sum();
        assert!((total - 2.0).abs() < 1e-9, "{owns:?}");
        let strategy = ReplicationStrategy::Simple {
            replication_factor: 3,
        };
        for share in ownership(&ring(), Some(&strategy)).values() {
            assert!((share - 1.0).abs() < 1e-9);
        }
    }

    struct Down;

    impl hints::HintTargets for Down {
        fn is_alive(&self, _: HostId) -> bool {
            false
        }
        fn downtime(&self, _: HostId) -> Option<std::time::Duration> {
            Some(std::time::Duration::from_secs(3600))
        }
        fn replica(&self, _: HostId) -> Option<Arc<dyn coordinator::Replica>> {
            None
        }
        fn node_count(&self) -> usize {
            3
        }
        fn datacenter(&self, _: HostId) -> Option<String> {
            Some("datacenter1".to_string())
        }
    }

    impl hints::TableLookup for Down {
        fn gc_grace_seconds(&self, _: mutation::TableId) -> Option<u32> {
            Some(864_000)
        }
    }

    #[test]
    fn hints_show_pending_and_dropped_per_node() {
        use coordinator::HintedHandoff;
        let dir = tempfile::tempdir().expect("dir");
        let host = |n: u128| HostId(uuid::Uuid::from_u128(n));
        let mut config = hints::HintsConfig::new(host(1), dir.path().join("hints"));
        config.max_hint_window = std::time::Duration::from_secs(7200);
        let store = hints::HintStore::open(
            config,
            Arc::new(Down),
            Arc::new(Down),
            Arc::new(coordinator::SystemClock),
            Arc::new(hints::LocalDisk),
        )
        .expect("open");
        let mutation = coordinator::Mutation {
            updates: Arc::new(Vec::new()),
            durable_writes: true,
        };
        assert!(store.write_missed(host(2), &mutation, coordinator::MissedWrite::Down));
        assert!(store.write_missed(host(2), &mutation, coordinator::MissedWrite::Down));
        let ring = ring();
        assert_eq!(
            hint_notes(&store, &ring),
            [
                "",
                "Hints for 127.0.0.2: 2 pending, 0 dropped (max_hint_window: 0)"
            ]
        );
        let lines = hint_lines(&store, &ring);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with(
                "127.0.0.2 host_id=00000000-0000-0000-0000-000000000002 pending=2 stored=2 \
                 delivered=0 dropped_window=0 dropped_disk=0"
            ),
            "{lines:?}"
        );
        assert!(lines[0].ends_with("last_replay_ms=-"), "{lines:?}");

        // Down three hours, past a one hour window: dropped, left to repair.
        let mut config = hints::HintsConfig::new(host(1), dir.path().join("hints"));
        config.max_hint_window = std::time::Duration::from_secs(1800);
        let store = hints::HintStore::open(
            config,
            Arc::new(Down),
            Arc::new(Down),
            Arc::new(coordinator::SystemClock),
            Arc::new(hints::LocalDisk),
        )
        .expect("open");
        assert!(!store.write_missed(host(3), &mutation, coordinator::MissedWrite::Down));
        assert_eq!(
            hint_notes(&store, &ring),
            [
                "",
                "Hints for 127.0.0.3: 0 pending, 1 dropped (max_hint_window: 1); hints were \
                 dropped, run repair"
            ]
        );
    }

    #[test]
    fn bytes_read_as_nodetool_shows_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(70 * 1024 + 215), "70.21 KiB");
        assert_eq!(human_bytes(3 << 30), "3.00 GiB");
    }
}
