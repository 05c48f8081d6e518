//! Whole clusters of `Membership`s in one process, over chitchat's in-memory channel transport
//! on tokio's paused clock (so seconds of gossip take milliseconds, and the failure detector
//! sees the time it would see), and one over real UDP.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use gossip::{
    ChannelTransport, ClusterView, EventKind, Membership, MembershipConfig, MembershipEvent,
    Transport, UdpTransport, DEFAULT_GOSSIP_INTERVAL, DEFAULT_MAX_LOCAL_PAUSE,
    DEFAULT_PHI_CONVICT_THRESHOLD,
};
use locator::{Endpoint, HostId, Location, NodeState, ReplicationStrategy, TokenMetadata};
use tokio::sync::broadcast;
use tokio::time::Instant;

const STORAGE_PORT: u16 = 7000;

/// The tests' gossip round: a fifth of Cassandra's, so that a dead node is convicted in a few
/// seconds (`at_cassandra_s_defaults_...` runs Cassandra's one-second round).
const GOSSIP_INTERVAL: Duration = Duration::from_millis(200);

fn host_id(node: u8) -> HostId {
    HostId(uuid::Uuid::from_u128(node.into()))
}

fn ip(node: u8) -> IpAddr {
    format!("127.0.0.{node}").parse().expect("ip")
}

fn endpoint(node: u8, state: NodeState) -> Endpoint {
    Endpoint {
        host_id: host_id(node),
        broadcast_address: ip(node),
        native_address: ip(node),
        native_port: 9042,
        location: Location {
            datacenter: if node == 3 { "dc2" } else { "dc1" }.to_string(),
            rack: format!("rack{}", node % 2),
        },
        state,
    }
}

/// Node `node`'s tokens: eight, one in each eighth of the ring, each node's at another place
/// in it.
fn tokens(node: u8) -> Vec<i64> {
    (0..8i128)
        .map(|i| (i * (1 << 61) - (1 << 63) + i128::from(node) * (1 << 57)) as i64)
        .collect()
}

fn config(node: u8, generation: u64) -> MembershipConfig {
    let endpoint = endpoint(node, NodeState::Normal);
    MembershipConfig {
        cluster_name: "Test Cluster".to_string(),
        listen_address: SocketAddr::new(endpoint.broadcast_address, STORAGE_PORT),
        endpoint,
        tokens: tokens(node),
        schema_version: uuid::Uuid::from_u128(42),
        release_version: "5.0.4".to_string(),
        generation,
        storage_port: STORAGE_PORT,
        seeds: vec![SocketAddr::new(ip(1), STORAGE_PORT)],
        gossip_interval: GOSSIP_INTERVAL,
        phi_convict_threshold: DEFAULT_PHI_CONVICT_THRESHOLD,
        max_local_pause: DEFAULT_MAX_LOCAL_PAUSE,
        saved_peers: Vec::new(),
    }
}

async fn start(transport: &dyn Transport, config: MembershipConfig) -> Membership {
    Membership::start(config, transport).await.expect("starts")
}

/// Waits (on the paused clock) until `done` holds of `membership`'s view; the time it took.
async fn until(
    membership: &Membership,
    limit: Duration,
    what: &str,
    done: impl Fn(&ClusterView) -> bool,
) -> Duration {
    let started = Instant::now();
    let mut views = membership.watch_view();
    loop {
        if done(&views.borrow_and_update()) {
            return started.elapsed();
        }
        let left = limit.saturating_sub(started.elapsed());
        assert!(
            tokio::time::timeout(left, views.changed()).await.is_ok(),
            "not {what} after {limit:?}: {:#?}",
            membership.view()
        );
    }
}

fn all_live(view: &ClusterView, nodes: &[u8]) -> bool {
    view.members().count() == nodes.len() && nodes.iter().all(|&n| view.is_live(host_id(n)))
}

/// The events received so far, as (kind, node, address).
fn drain(events: &mut broadcast::Receiver<MembershipEvent>) -> Vec<(EventKind, u8, String)> {
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push((e.kind, e.host_id.0.as_u128() as u8, e.address.to_string()));
    }
    seen
}

async fn converged_three(transport: &ChannelTransport) -> Vec<Membership> {
    converged_three_gossiping_every(transport, GOSSIP_INTERVAL).await
}

async fn converged_three_gossiping_every(
    transport: &ChannelTransport,
    gossip_interval: Duration,
) -> Vec<Membership> {
    let mut nodes = Vec::new();
    for node in 1..=3 {
        let mut config = config(node, 1);
        config.gossip_interval = gossip_interval;
        nodes.push(start(transport, config).await);
    }
    for membership in &nodes {
        until(membership, Duration::from_secs(30), "converged", |v| {
            all_live(v, &[1, 2, 3])
        })
        .await;
    }
    nodes
}

#[tokio::test(start_paused = true)]
async fn three_nodes_converge_with_every_node_s_state() {
    let transport = ChannelTransport::default();
    let first = start(&transport, config(1, 1)).await;
    let mut events = first.subscribe();
    let nodes = [
        first,
        start(&transport, config(2, 1)).await,
        start(&transport, config(3, 1)).await,
    ];
    for membership in &nodes {
        let took = until(membership, Duration::from_secs(30), "converged", |v| {
            all_live(v, &[1, 2, 3])
        })
        .await;
        assert!(took < Duration::from_secs(10), "converged in {took:?}");
        let view = membership.view();
        for node in 1..=3 {
            let member = view.member(host_id(node)).expect("known");
            assert_eq!(member.endpoint, endpoint(node, NodeState::Normal));
            assert_eq!(member.tokens, tokens(node));
            assert_eq!(member.schema_version, uuid::Uuid::from_u128(42));
            assert_eq!(member.release_version, "5.0.4");
            assert_eq!(member.generation, 1);
            assert_eq!(member.storage_address, SocketAddr::new(ip(node), 7000));
        }
        assert_eq!(view.peers().count(), 2);
        assert_eq!(view.schema_versions().len(), 1, "schema agreement");
    }
    // Each peer joined and came up once, and stays so.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let mut seen = drain(&mut events);
    seen.sort();
    assert_eq!(
        seen,
        [
            (EventKind::NewNode, 2, "127.0.0.2:9042".to_string()),
            (EventKind::NewNode, 3, "127.0.0.3:9042".to_string()),
            (EventKind::Up, 2, "127.0.0.2:9042".to_string()),
            (EventKind::Up, 3, "127.0.0.3:9042".to_string()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_killed_node_is_down_within_seconds_and_up_again_under_its_new_generation() {
    let transport = ChannelTransport::default();
    let mut nodes = converged_three(&transport).await;
    // Heartbeats for a while, so the failure detector's samples outweigh its initial guess.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let mut events = nodes[0].subscribe();
    let node_2 = nodes.remove(1);
    drop(node_2);
    for membership in &nodes {
        let took = until(membership, Duration::from_secs(60), "node 2 down", |v| {
            !v.is_live(host_id(2))
        })
        .await;
        // Cassandra's threshold 8 is 18.4 mean heartbeat intervals without one.
        assert!(took < Duration::from_secs(4), "convicted in {took:?}");
        let view = membership.view();
        assert!(view.is_live(host_id(1)) && view.is_live(host_id(3)));
        // Down, it still owns its ranges.
        let ring = view.token_metadata().expect("ring");
        assert_eq!(ring.tokens_of(host_id(2)), tokens(2));
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(
        drain(&mut events),
        [(EventKind::Down, 2, "127.0.0.2:9042".to_string())],
        "one Down, however long it stays down"
    );

    nodes.insert(1, start(&transport, config(2, 2)).await);
    for membership in &nodes {
        until(membership, Duration::from_secs(30), "node 2 back", |v| {
            v.is_live(host_id(2)) && v.member(host_id(2)).expect("known").generation == 2
        })
        .await;
        assert_eq!(membership.view().members().count(), 3, "no second node 2");
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    // The old generation, still in chitchat's state until its grace period, is not a node of
    // its own and brings no event.
    assert_eq!(
        drain(&mut events),
        [(EventKind::Up, 2, "127.0.0.2:9042".to_string())]
    );
    for membership in &nodes {
        assert!(all_live(&membership.view(), &[1, 2, 3]));
    }
}

/// Every node in this process stops for 25 s at once, as a process does under `SIGSTOP` (or a
/// long garbage-collection pause in Cassandra): tokio's clock jumps and no task runs in between,
/// so when the nodes resume, every peer's last heartbeat is 25 s old.
async fn pause_the_process(duration: Duration) {
    tokio::time::advance(duration).await;
}

#[tokio::test(start_paused = true)]
async fn after_a_local_pause_peers_that_keep_gossiping_are_never_marked_down() {
    let transport = ChannelTransport::default();
    let nodes = converged_three(&transport).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let mut events: Vec<_> = nodes.iter().map(Membership::subscribe).collect();
    pause_the_process(Duration::from_secs(25)).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    for (membership, events) in nodes.iter().zip(&mut events) {
        assert_eq!(drain(events), [], "no peer went down and came back");
        assert!(all_live(&membership.view(), &[1, 2, 3]));
    }
    // Once the pause is behind it, the failure detector convicts as quickly as before.
    let mut nodes = nodes;
    drop(nodes.remove(2));
    for membership in &nodes {
        let took = until(membership, Duration::from_secs(60), "node 3 down", |v| {
            !v.is_live(host_id(3))
        })
        .await;
        assert!(took < Duration::from_secs(4), "convicted in {took:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_died_during_a_local_pause_is_convicted_after_the_grace() {
    let transport = ChannelTransport::default();
    let mut nodes = converged_three(&transport).await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let mut events: Vec<_> = nodes[..2].iter().map(Membership::subscribe).collect();
    nodes.remove(2).shutdown().await;
    pause_the_process(Duration::from_secs(25)).await;
    let resumed = Instant::now();
    // Both survivors watched at once, so each one's conviction is timed from the resume.
    let convictions: Vec<_> = nodes
        .iter()
        .map(|membership| {
            let mut views = membership.watch_view();
            tokio::spawn(async move {
                while views.borrow_and_update().is_live(host_id(3)) {
                    views.changed().await.expect("membership runs");
                }
                resumed.elapsed()
            })
        })
        .collect();
    for conviction in convictions {
        let took = tokio::time::timeout(Duration::from_secs(30), conviction)
            .await
            .expect("node 3 down within 30 s")
            .expect("the watcher ran");
        // Not convicted while the pause is fresh (Cassandra's `max_local_pause`, 5 s), then
        // within a few rounds.
        assert!(
            took >= DEFAULT_MAX_LOCAL_PAUSE
                && took < DEFAULT_MAX_LOCAL_PAUSE + Duration::from_secs(2),
            "convicted {took:?} after the pause"
        );
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    for (membership, events) in nodes.iter().zip(&mut events) {
        assert_eq!(
            drain(events),
            [(EventKind::Down, 3, "127.0.0.3:9042".to_string())]
        );
        let view = membership.view();
        assert!(view.is_live(host_id(1)) && view.is_live(host_id(2)));
    }
}

#[tokio::test(start_paused = true)]
async fn at_cassandra_s_defaults_a_dead_node_is_convicted_in_about_eight_seconds() {
    let transport = ChannelTransport::default();
    let mut nodes = converged_three_gossiping_every(&transport, DEFAULT_GOSSIP_INTERVAL).await;
    // Heartbeats for a while, so the failure detector's samples outweigh its initial guess.
    tokio::time::sleep(Duration::from_secs(60)).await;
    drop(nodes.remove(2));
    let took = until(&nodes[0], Duration::from_secs(60), "node 3 down", |v| {
        !v.is_live(host_id(3))
    })
    .await;
    // Three nodes gossiping every second bring a peer's heartbeat about every 0.43 s. Phi 8
    // in Cassandra's measure is 18.4 mean intervals of silence (about 8 s); in chitchat's, 8
    // (about 3.5 s).
    assert!(
        took > Duration::from_secs(6) && took < Duration::from_secs(12),
        "convicted in {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_back_at_a_new_address_replaces_the_old_one() {
    let transport = ChannelTransport::default();
    let mut nodes = converged_three(&transport).await;
    let mut events = nodes[0].subscribe();
    nodes.remove(1).shutdown().await;
    let mut moved = config(2, 2);
    moved.endpoint.broadcast_address = ip(9);
    moved.endpoint.native_address = ip(9);
    moved.listen_address = SocketAddr::new(ip(9), STORAGE_PORT);
    let _moved = start(&transport, moved).await;
    until(
        &nodes[0],
        Duration::from_secs(30),
        "node 2 at 127.0.0.9",
        |v| {
            v.member(host_id(2))
                .is_some_and(|m| m.live && m.endpoint.broadcast_address == ip(9))
        },
    )
    .await;
    let view = nodes[0].view();
    assert_eq!(view.members().count(), 3);
    let ring = view.token_metadata().expect("ring");
    assert_eq!(
        ring.topology()
            .endpoint(host_id(2))
            .map(|e| e.broadcast_address),
        Some(ip(9))
    );
    tokio::time::sleep(Duration::from_secs(30)).await;
    let mut seen = drain(&mut events);
    // Whether node 1 convicted the old process before the new one's state arrived depends on
    // timing; either way it told of it once.
    let old_down = (EventKind::Down, 2, "127.0.0.2:9042".to_string());
    if seen.first() == Some(&old_down) {
        seen.remove(0);
    }
    assert_eq!(
        seen,
        [
            (EventKind::RemovedNode, 2, "127.0.0.2:9042".to_string()),
            (EventKind::NewNode, 2, "127.0.0.9:9042".to_string()),
            (EventKind::Up, 2, "127.0.0.9:9042".to_string()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_restarted_node_keeps_a_saved_peer_that_is_down_in_its_ring() {
    let transport = ChannelTransport::default();
    let mut nodes = converged_three(&transport).await;
    let saved: Vec<_> = nodes[0].view().peers().cloned().collect();
    // Node 3 dies, then node 1 restarts while node 3 is still down.
    drop(nodes.remove(2));
    nodes.remove(0).shutdown().await;
    let mut restart = config(1, 2);
    restart.saved_peers = saved;
    let node_1 = start(&transport, restart).await;
    let mut events = node_1.subscribe();
    let view = node_1.view();
    assert_eq!(view.members().count(), 3);
    assert!(!view.is_live(host_id(2)) && !view.is_live(host_id(3)));
    until(&node_1, Duration::from_secs(30), "node 2 up", |v| {
        v.is_live(host_id(2))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    let view = node_1.view();
    assert!(!view.is_live(host_id(3)));
    let ring = view.token_metadata().expect("ring");
    assert_eq!(
        ring.tokens_of(host_id(3)),
        tokens(3),
        "down, it owns its ranges"
    );
    assert_eq!(ring.topology().len(), 3);
    assert_eq!(
        drain(&mut events),
        [(EventKind::Up, 2, "127.0.0.2:9042".to_string())],
        "saved peers are not new"
    );
}

#[tokio::test(start_paused = true)]
async fn a_node_of_another_cluster_is_not_admitted() {
    let transport = ChannelTransport::default();
    let nodes = converged_three(&transport).await;
    let mut stranger_config = config(4, 1);
    stranger_config.cluster_name = "Other Cluster".to_string();
    let stranger = start(&transport, stranger_config).await;
    // It knows node 1 as its seed, and node 1 would gossip back if it knew it.
    tokio::time::sleep(Duration::from_secs(30)).await;
    for membership in &nodes {
        assert!(membership.view().member(host_id(4)).is_none());
        assert!(all_live(&membership.view(), &[1, 2, 3]));
    }
    assert_eq!(stranger.view().members().count(), 1);
}

#[tokio::test(start_paused = true)]
async fn state_changes_spread_and_a_joining_node_enters_the_ring_when_normal() {
    let transport = ChannelTransport::default();
    let nodes = converged_three(&transport).await;
    let mut events = nodes[0].subscribe();
    let mut joining = config(4, 1);
    joining.endpoint.state = NodeState::Joining;
    let node_4 = start(&transport, joining).await;
    until(&nodes[0], Duration::from_secs(30), "node 4 up", |v| {
        v.is_live(host_id(4))
    })
    .await;
    let ring = nodes[0].view().token_metadata().expect("ring");
    assert!(ring.tokens_of(host_id(4)).is_empty(), "joining: pending");
    assert_eq!(
        drain(&mut events),
        [(EventKind::Up, 4, "127.0.0.4:9042".to_string())]
    );

    node_4.set_state(NodeState::Normal).await;
    assert_eq!(
        node_4.view().local().endpoint.state,
        NodeState::Normal,
        "a setter's change is in this node's own view at once"
    );
    let new_schema = uuid::Uuid::from_u128(43);
    nodes[1].set_schema_version(new_schema).await;
    let mut moved_tokens = tokens(3);
    moved_tokens[0] += 1;
    nodes[2].set_tokens(&moved_tokens).await.expect("valid");
    assert!(nodes[2].set_tokens(&[]).await.is_err());
    until(&nodes[0], Duration::from_secs(30), "changes seen", |v| {
        v.member(host_id(4))
            .is_some_and(|m| m.endpoint.state == NodeState::Normal)
            && v.member(host_id(2))
                .is_some_and(|m| m.schema_version == new_schema)
            && v.member(host_id(3))
                .is_some_and(|m| m.tokens == moved_tokens)
    })
    .await;
    assert_eq!(nodes[0].view().schema_versions().len(), 2, "disagreement");
    let ring = nodes[0].view().token_metadata().expect("ring");
    assert_eq!(ring.tokens_of(host_id(4)), tokens(4));
    assert_eq!(ring.tokens_of(host_id(3)), moved_tokens);
    assert_eq!(
        drain(&mut events),
        [(EventKind::NewNode, 4, "127.0.0.4:9042".to_string())]
    );
}

#[tokio::test(start_paused = true)]
async fn the_ring_from_the_view_places_replicas_as_the_locator_does() {
    let transport = ChannelTransport::default();
    let nodes = converged_three(&transport).await;
    // The same ring built straight from the nodes' configurations.
    let mut expected = TokenMetadata::new(endpoint(2, NodeState::Normal), tokens(2)).expect("ring");
    for node in [1, 3] {
        expected = expected
            .with_normal_tokens(endpoint(node, NodeState::Normal), tokens(node))
            .expect("ring");
    }
    let ring = nodes[1].view().token_metadata().expect("ring");
    assert_eq!(ring, expected);
    let strategies = [
        ReplicationStrategy::Simple {
            replication_factor: 2,
        },
        ReplicationStrategy::network_topology([("dc1".to_string(), 2), ("dc2".to_string(), 1)]),
    ];
    let mut primaries: BTreeMap<HostId, usize> = BTreeMap::new();
    for i in 0..1000i64 {
        let token = i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64);
        for strategy in &strategies {
            let replicas = strategy.natural_replicas(&ring, token);
            assert_eq!(replicas, strategy.natural_replicas(&expected, token));
            *primaries.entry(replicas[0]).or_default() += 1;
        }
    }
    assert_eq!(
        primaries.len(),
        3,
        "every node is some token's primary replica"
    );
}

/// A free UDP port on 127.0.0.1 (bound, then released for the node to take).
fn free_udp_port() -> u16 {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.local_addr().expect("address").port()
}

#[tokio::test]
async fn two_nodes_converge_over_udp() {
    let ports = [free_udp_port(), free_udp_port()];
    let udp_config = |node: u8| {
        let port = ports[usize::from(node) - 1];
        let mut config = config(node, 1);
        config.endpoint.broadcast_address = ip(1);
        config.listen_address = SocketAddr::new(ip(1), port);
        config.storage_port = port;
        config.seeds = vec![SocketAddr::new(ip(1), ports[0])];
        config.gossip_interval = Duration::from_millis(100);
        config
    };
    let nodes = [
        start(&UdpTransport, udp_config(1)).await,
        start(&UdpTransport, udp_config(2)).await,
    ];
    for membership in &nodes {
        until(membership, Duration::from_secs(20), "converged", |v| {
            all_live(v, &[1, 2])
        })
        .await;
        let peer = membership
            .view()
            .peers()
            .next()
            .map(|m| m.storage_address)
            .expect("a peer");
        assert!(ports.contains(&peer.port()));
    }
}
