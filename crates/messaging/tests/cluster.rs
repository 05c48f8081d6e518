//! Two or three messaging services in one process on 127.0.0.1's ephemeral ports, each serving
//! a `replica::LocalReplica` over a `MemoryEngine`: the replica verbs end to end, and the
//! failures the service must survive (another cluster, a restarted peer, a slow handler, a full
//! queue, hostile bytes).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use coordinator::{
    read_digest, Deadline, Mutation, ReadDigest, Replica, ReplicaError, ReplicaFuture,
};
use locator::HostId;
use messaging::{
    Environment, FrameKind, HandlerError, Interception, MessagingConfig, MessagingError,
    MessagingOptions, MessagingService, OutboundInterceptor, RemoteError, Verb,
};
use mutation::{
    Cell, ClusteringSlice, ColumnData, LivenessInfo, PartitionKey, PartitionUpdate, ReadCommand,
    ReadResponse, Row, ScanStart, TableId,
};
use storage::{Durability, MemoryEngine, StorageEngine};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TABLE: TableId = TableId::from_u128(0x7ab1e);
const CLUSTER: &str = "Test Cluster";

fn host(n: u128) -> HostId {
    HostId(uuid::Uuid::from_u128(n))
}

fn within(d: Duration) -> Deadline {
    Deadline::at(Instant::now() + d)
}

fn later() -> Deadline {
    within(Duration::from_secs(10))
}

/// A node: its messaging service and the engine its replica writes to.
struct Node {
    messaging: Arc<MessagingService>,
    engine: Arc<MemoryEngine>,
}

fn options() -> MessagingOptions {
    MessagingOptions {
        reconnect_initial_backoff_ms: 20,
        reconnect_max_backoff_ms: 200,
        ..MessagingOptions::default()
    }
}

async fn start_with(
    id: u128,
    cluster: &str,
    address: SocketAddr,
    options: MessagingOptions,
    replica: Option<Arc<dyn Replica>>,
    environment: Environment,
) -> Node {
    start_process(id, 0, cluster, address, options, replica, environment).await
}

/// `start_with` for the process of node `id` started under `generation`.
async fn start_process(
    id: u128,
    generation: u64,
    cluster: &str,
    address: SocketAddr,
    options: MessagingOptions,
    replica: Option<Arc<dyn Replica>>,
    environment: Environment,
) -> Node {
    let engine = Arc::new(MemoryEngine::new());
    engine.create_table(TABLE).expect("create table");
    let replica = replica.unwrap_or_else(|| {
        Arc::new(replica::LocalReplica::new(
            engine.clone(),
            Durability::Periodic,
        ))
    });
    let config = MessagingConfig {
        host_id: host(id),
        cluster_name: cluster.to_string(),
        listen_address: address,
        broadcast_address: None,
        generation,
        options,
    };
    let messaging = MessagingService::start(config, replica, environment)
        .await
        .expect("start");
    Node {
        messaging: Arc::new(messaging),
        engine,
    }
}

async fn start(id: u128) -> Node {
    start_with(
        id,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        Environment::tcp(id as u64),
    )
    .await
}

/// Tells `a` where `b` listens.
fn introduce(a: &Node, b: &Node) {
    a.messaging
        .set_peer_address(b.messaging.host_id(), b.messaging.listen_address());
}

fn key(k: u8) -> PartitionKey {
    PartitionKey {
        token: i64::from(k),
        key: vec![k],
    }
}

fn write(k: u8, value: &[u8]) -> Mutation {
    let row = Row {
        liveness: Some(LivenessInfo {
            timestamp: 1,
            expiry: None,
        }),
        deletion: None,
        columns: vec![ColumnData::Simple {
            id: 1,
            cell: Cell::live(1, value.to_vec()),
        }],
    };
    Mutation {
        updates: Arc::new(vec![PartitionUpdate {
            table: TABLE,
            key: key(k),
            header: None,
            static_row: None,
            rows: vec![(vec![0], row)],
        }]),
        durable_writes: true,
    }
}

fn point_read(table: TableId, k: u8) -> ReadCommand {
    ReadCommand::Partition {
        table,
        key: key(k),
        slice: ClusteringSlice::all(),
        max_rows: 100,
        resume: None,
    }
}

fn rows_stored(engine: &MemoryEngine, k: u8) -> usize {
    engine
        .read_partition(TABLE, &key(k), &ClusteringSlice::all(), 100, None)
        .expect("read")
        .data
        .rows
        .len()
}

/// Polls `ping` from `a` to `b` until it answers, for at most `limit`.
async fn ping_until_answered(a: &Node, b: HostId, limit: Duration) {
    let start = Instant::now();
    loop {
        match a
            .messaging
            .ping(b, Some(within(Duration::from_millis(500))))
            .await
        {
            Ok(()) => return,
            Err(e) if start.elapsed() < limit => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("no answer from {b} in {limit:?}: {e}"),
        }
    }
}

#[tokio::test]
async fn a_remote_replica_applies_reads_digests_and_truncates_through_its_peer() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let remote = a.messaging.remote_replica(b.messaging.host_id());

    remote
        .apply_mutation(write(1, b"one"), later())
        .await
        .expect("apply");
    remote
        .apply_mutation(write(2, b"two"), later())
        .await
        .expect("apply");
    assert_eq!(rows_stored(&b.engine, 1), 1);
    assert_eq!(
        rows_stored(&a.engine, 1),
        0,
        "applied on the peer, not here"
    );

    let local = replica::LocalReplica::new(b.engine.clone(), Durability::Periodic);
    let remote_read = remote
        .read(point_read(TABLE, 1), later())
        .await
        .expect("read");
    let local_read = local
        .read(point_read(TABLE, 1), later())
        .await
        .expect("read");
    assert_eq!(remote_read, local_read);
    let ReadResponse::Partition(page) = &remote_read else {
        panic!("a partition read answers a partition page");
    };
    assert_eq!(page.data.rows.len(), 1);

    let scan = ReadCommand::Range {
        table: TABLE,
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 100,
    };
    let ReadResponse::Range(scanned) = remote.read(scan, later()).await.expect("scan") else {
        panic!("a range read answers a scan page");
    };
    assert_eq!(scanned.partitions.len(), 2);

    let digest = remote
        .digest(point_read(TABLE, 1), later())
        .await
        .expect("digest");
    assert_eq!(digest, read_digest(&local_read));
    assert_ne!(digest, ReadDigest([0; 16]));

    let missing = TableId::from_u128(404);
    assert_eq!(
        remote.read(point_read(missing, 1), later()).await,
        Err(ReplicaError::UnknownTable(missing)),
        "the peer's replica error arrives as it was raised"
    );

    remote.truncate(TABLE, later()).await.expect("truncate");
    assert_eq!(rows_stored(&b.engine, 1), 0);

    let batch = coordinator::Batch::encode(
        coordinator::BatchId::new(1_700_000_000_000_000, a.messaging.host_id()),
        &[&write(1, b"one").updates, &write(2, b"two").updates],
    );
    remote
        .store_batch(batch.clone(), later())
        .await
        .expect("stored");
    let b_log = replica::BatchlogStorage::new(b.engine.clone(), Durability::Periodic);
    assert_eq!(b_log.batches(None, 10).expect("scan"), vec![batch.clone()]);
    remote
        .remove_batch(batch.id, later())
        .await
        .expect("removed");
    assert_eq!(b_log.batches(None, 10).expect("scan"), vec![]);

    let metrics = a.messaging.metrics();
    assert_eq!(metrics.verb(Verb::MUTATION).sent, 2);
    assert_eq!(b.messaging.metrics().verb(Verb::MUTATION).received, 2);
    assert_eq!(metrics.verb(Verb::MUTATION).received, 2, "the responses");
    assert!(metrics.bytes_sent > 0 && metrics.bytes_received > 0);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn three_nodes_route_each_response_to_its_request() {
    let nodes = [start(1).await, start(2).await, start(3).await];
    for a in &nodes {
        for b in &nodes {
            introduce(a, b);
        }
    }
    let mut requests = tokio::task::JoinSet::new();
    for (i, from) in nodes.iter().enumerate() {
        for (j, to) in nodes.iter().enumerate() {
            if i == j {
                continue;
            }
            let remote = from.messaging.remote_replica(to.messaging.host_id());
            let k = (i * 3 + j) as u8;
            requests.spawn(async move {
                remote.apply_mutation(write(k, b"v"), later()).await?;
                remote.read(point_read(TABLE, k), later()).await
            });
        }
    }
    while let Some(result) = requests.join_next().await {
        let ReadResponse::Partition(page) = result.expect("task").expect("request") else {
            panic!("partition page expected");
        };
        assert_eq!(page.data.rows.len(), 1);
    }
    for (j, node) in nodes.iter().enumerate() {
        for i in 0..3 {
            let stored = rows_stored(&node.engine, (i * 3 + j) as u8);
            assert_eq!(stored, usize::from(i != j), "write from {i} to {j}");
        }
    }
    for node in &nodes {
        node.messaging.shutdown().await;
    }
}

#[tokio::test]
async fn a_node_of_another_cluster_is_refused_with_a_reason() {
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        MessagingOptions {
            refused_retry_ms: 500,
            ..options()
        },
        None,
        Environment::tcp(1),
    )
    .await;
    let b = start_with(
        2,
        "Other Cluster",
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        Environment::tcp(2),
    )
    .await;
    introduce(&a, &b);
    let started = Instant::now();
    let e = a
        .messaging
        .ping(b.messaging.host_id(), Some(later()))
        .await
        .expect_err("refused");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fails at the refusal, not at the deadline"
    );
    let MessagingError::Refused { reason, .. } = &e else {
        panic!("{e}");
    };
    assert!(reason.contains("cluster name mismatch"), "{reason}");
    assert!(reason.contains("Other Cluster"), "{reason}");
    // Until `refused_retry_ms` passes, requests fail at once without dialling again.
    let again = a.messaging.ping(b.messaging.host_id(), Some(later())).await;
    assert!(
        matches!(again, Err(MessagingError::Refused { .. })),
        "{again:?}"
    );
    assert_eq!(a.messaging.metrics().refused_by_peers, 1);
    assert_eq!(b.messaging.metrics().handshakes_refused, 1);
    assert_eq!(b.messaging.metrics().verb(Verb::PING).received, 0);
    // After it, the next request dials again, and is refused again.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let later_again = a.messaging.ping(b.messaging.host_id(), Some(later())).await;
    assert!(
        matches!(later_again, Err(MessagingError::Refused { .. })),
        "{later_again:?}"
    );
    assert_eq!(a.messaging.metrics().refused_by_peers, 2);
    assert_eq!(b.messaging.metrics().handshakes_refused, 2);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn a_restarted_peer_is_reached_again() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    let b_address = b.messaging.listen_address();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");

    b.messaging.shutdown().await;
    drop(b);
    let down = a
        .messaging
        .ping(b_host, Some(within(Duration::from_millis(300))))
        .await;
    assert!(down.is_err(), "a stopped peer does not answer");

    let b = start_with(2, CLUSTER, b_address, options(), None, Environment::tcp(2)).await;
    ping_until_answered(&a, b_host, Duration::from_secs(10)).await;
    let remote = a.messaging.remote_replica(b_host);
    remote
        .apply_mutation(write(5, b"again"), later())
        .await
        .expect("apply");
    assert_eq!(rows_stored(&b.engine, 5), 1);
    assert!(a.messaging.metrics().connections_opened >= 2);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// A replica whose reads take `delay`; it records whether a read ever started after its
/// deadline.
struct SlowReplica {
    delay: Duration,
    started_late: Arc<AtomicBool>,
}

impl Replica for SlowReplica {
    fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(async { Ok(()) })
    }
    fn read(&self, _: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        if deadline.passed() {
            self.started_late.store(true, Ordering::Relaxed);
        }
        let delay = self.delay;
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Err(ReplicaError::Internal("too slow to matter".into()))
        })
    }
    fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        Box::pin(async { Ok(ReadDigest([0; 16])) })
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn a_slow_handler_times_out_at_the_deadline() {
    let a = start(1).await;
    let started_late = Arc::new(AtomicBool::new(false));
    let slow = SlowReplica {
        delay: Duration::from_secs(3),
        started_late: started_late.clone(),
    };
    let b = start_with(
        2,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        Some(Arc::new(slow)),
        Environment::tcp(2),
    )
    .await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    // Connected first, so the deadline measures the request, not the dial.
    a.messaging.ping(b_host, Some(later())).await.expect("ping");

    let remote = a.messaging.remote_replica(b_host);
    let started = Instant::now();
    let e = remote
        .read(point_read(TABLE, 1), within(Duration::from_millis(300)))
        .await;
    let waited = started.elapsed();
    assert_eq!(
        e,
        Err(ReplicaError::DeadlinePassed),
        "the coordinator's timeout"
    );
    assert!(
        waited >= Duration::from_millis(290) && waited < Duration::from_secs(2),
        "waited {waited:?}"
    );

    let sleeper = |_: HostId, _: Bytes, _: Deadline| async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        Ok::<_, HandlerError>(Bytes::new())
    };
    let verb = Verb::extension(100);
    b.messaging
        .register_handler(verb, Arc::new(sleeper))
        .expect("register");
    let started = Instant::now();
    let e = a
        .messaging
        .request(
            b_host,
            verb,
            Bytes::new(),
            Some(within(Duration::from_millis(200))),
        )
        .await;
    assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));

    // The verb's own timeout caps a caller's later deadline.
    let mut short = options();
    short.request_timeout_ms = 150;
    let c = start_with(
        3,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        short,
        None,
        Environment::tcp(3),
    )
    .await;
    introduce(&c, &b);
    ping_until_answered(&c, b_host, Duration::from_secs(10)).await;
    let started = Instant::now();
    let e = c
        .messaging
        .request(b_host, verb, Bytes::new(), Some(later()))
        .await;
    assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
    assert!(started.elapsed() < Duration::from_secs(2));

    let metrics = a.messaging.metrics();
    assert_eq!(metrics.verb(Verb::READ).timeouts, 1);
    assert_eq!(metrics.verb(verb).timeouts, 1);
    assert!(!started_late.load(Ordering::Relaxed));
    for node in [a, b, c] {
        node.messaging.shutdown().await;
    }
}

#[tokio::test]
async fn an_expired_request_is_not_started_by_the_peer() {
    let a = start(1).await;
    let started_late = Arc::new(AtomicBool::new(false));
    let slow = SlowReplica {
        delay: Duration::ZERO,
        started_late: started_late.clone(),
    };
    let b = start_with(
        2,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        Some(Arc::new(slow)),
        Environment::tcp(2),
    )
    .await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    // A deadline already passed: not even sent.
    let remote = a.messaging.remote_replica(b_host);
    let e = remote
        .read(point_read(TABLE, 1), within(Duration::ZERO))
        .await;
    assert_eq!(e, Err(ReplicaError::DeadlinePassed));
    assert_eq!(a.messaging.metrics().verb(Verb::READ).expired, 1);
    assert_eq!(b.messaging.metrics().verb(Verb::READ).received, 0);
    assert!(!started_late.load(Ordering::Relaxed));
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn a_full_queue_drops_the_message_counts_it_and_fails_the_request_at_once() {
    // Nothing listens at the peer's address, so its connection never drains its queue.
    let unused = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nowhere = unused.local_addr().unwrap();
    drop(unused);
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        MessagingOptions {
            queue_capacity_messages: 4,
            ..options()
        },
        None,
        Environment::tcp(1),
    )
    .await;
    let peer = host(2);
    a.messaging.set_peer_address(peer, nowhere);
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let messaging = a.messaging.clone();
        requests.spawn(async move {
            let started = Instant::now();
            let result = messaging
                .ping(peer, Some(within(Duration::from_secs(2))))
                .await;
            (result, started.elapsed())
        });
    }
    let (mut full, mut timed_out) = (0, 0);
    while let Some(done) = requests.join_next().await {
        match done.expect("task") {
            (Err(MessagingError::QueueFull { verb, .. }), waited) => {
                assert_eq!(verb, Verb::PING);
                // At once, not at the 2 s deadline (1 s of slack for a loaded machine).
                assert!(waited < Duration::from_secs(1), "failed fast: {waited:?}");
                full += 1;
            }
            (Err(MessagingError::Timeout { .. }), _) => timed_out += 1,
            (other, _) => panic!("{other:?}"),
        }
    }
    assert_eq!((full, timed_out), (6, 4));
    let counts = a.messaging.metrics().verb(Verb::PING);
    assert_eq!(counts.dropped, 6);
    assert_eq!(counts.sent, 0);
    a.messaging.shutdown().await;
}

#[tokio::test]
async fn hostile_bytes_close_their_connection_and_the_node_keeps_serving() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_address = b.messaging.listen_address();

    // Garbage instead of a handshake.
    let mut raw = tokio::net::TcpStream::connect(b_address).await.unwrap();
    raw.write_all(&[0xAB; 64]).await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut rest)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "closed by the node"
    );

    // A valid handshake, then a frame whose header checksum is wrong.
    let mut raw = tokio::net::TcpStream::connect(b_address).await.unwrap();
    raw.write_all(&hello_bytes(host(3), CLUSTER)).await.unwrap();
    let mut reply_head = [0u8; 6];
    raw.read_exact(&mut reply_head).await.expect("a reply");
    let mut frame = bytes::BytesMut::new();
    messaging::encode_frame(
        &messaging::Frame {
            kind: FrameKind::Request,
            verb: Verb::PING,
            request_id: 1,
            expires_in_ms: 1000,
            payload: Bytes::new(),
        },
        usize::MAX,
        &mut frame,
    );
    frame[10] ^= 0xFF;
    raw.write_all(&frame).await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "closed by the node");

    assert_eq!(b.messaging.metrics().malformed, 2);
    a.messaging
        .ping(b.messaging.host_id(), Some(later()))
        .await
        .expect("still serving");
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// A hello as the handshake's layout describes it (written out here, independently of the
/// crate's encoder).
fn hello_bytes(host_id: HostId, cluster: &str) -> Vec<u8> {
    let mut body = vec![1, 1, 0];
    body.extend_from_slice(host_id.0.as_bytes());
    body.push(4);
    body.extend_from_slice(&[127, 0, 0, 1]);
    body.extend_from_slice(&7000u16.to_be_bytes());
    body.extend_from_slice(&(cluster.len() as u16).to_be_bytes());
    body.extend_from_slice(cluster.as_bytes());
    let crc = crc32(&body);
    let mut out = b"HMSH".to_vec();
    out.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// CRC-32 (IEEE), bit by bit.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[tokio::test]
async fn a_large_message_takes_the_large_connection_compressed() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let echo =
        |_: HostId, payload: Bytes, _: Deadline| async move { Ok::<_, HandlerError>(payload) };
    let verb = Verb::extension(64);
    b.messaging.register_handler(verb, Arc::new(echo)).unwrap();
    let b_host = b.messaging.host_id();

    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(
        a.messaging.metrics().connections_opened,
        1,
        "the small connection"
    );
    let large = Bytes::from(vec![42u8; 200 * 1024]);
    let echoed = a
        .messaging
        .request(b_host, verb, large.clone(), Some(later()))
        .await
        .expect("echo");
    assert_eq!(echoed, large);
    assert_eq!(
        a.messaging.metrics().connections_opened,
        2,
        "and the large one"
    );
    assert!(
        a.messaging.metrics().bytes_sent < 100 * 1024,
        "compressed: {} bytes",
        a.messaging.metrics().bytes_sent
    );
    assert_eq!(
        b.messaging.metrics().connections_opened,
        2,
        "b answered the ping on its small connection, the echo on its large one"
    );
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn extension_verbs_need_a_handler_and_report_its_error() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    let verb = Verb::extension(65);
    let e = a
        .messaging
        .request(b_host, verb, Bytes::new(), Some(later()))
        .await;
    assert!(
        matches!(e, Err(MessagingError::Remote(RemoteError::UnknownVerb))),
        "{e:?}"
    );
    let failing = |_: HostId, _: Bytes, _: Deadline| async {
        Err::<Bytes, _>(HandlerError("no leader".into()))
    };
    b.messaging
        .register_handler(verb, Arc::new(failing))
        .unwrap();
    assert!(matches!(
        b.messaging.register_handler(verb, Arc::new(failing)),
        Err(MessagingError::HandlerTaken(_))
    ));
    assert!(matches!(
        b.messaging.register_handler(Verb::READ, Arc::new(failing)),
        Err(MessagingError::HandlerTaken(_))
    ));
    let e = a
        .messaging
        .request(b_host, verb, Bytes::new(), Some(later()))
        .await;
    let Err(MessagingError::Remote(RemoteError::Handler(message))) = e else {
        panic!("{e:?}");
    };
    assert_eq!(message, "no leader");
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// Drops every MUTATION to one peer: a cut link for writes only.
struct DropMutationsTo(HostId);

impl OutboundInterceptor for DropMutationsTo {
    fn intercept(&self, to: HostId, verb: Verb, _: FrameKind) -> Interception {
        if to == self.0 && verb == Verb::MUTATION {
            Interception::Drop
        } else {
            Interception::Deliver
        }
    }
}

#[tokio::test]
async fn the_outbound_interceptor_can_cut_a_link() {
    let b = start(2).await;
    let mut environment = Environment::tcp(1);
    environment.interceptor = Arc::new(DropMutationsTo(b.messaging.host_id()));
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    introduce(&a, &b);
    let remote = a.messaging.remote_replica(b.messaging.host_id());
    let e = remote
        .apply_mutation(write(1, b"lost"), within(Duration::from_millis(300)))
        .await;
    assert_eq!(e, Err(ReplicaError::DeadlinePassed));
    assert_eq!(rows_stored(&b.engine, 1), 0);
    remote
        .read(point_read(TABLE, 1), later())
        .await
        .expect("reads pass");
    assert_eq!(a.messaging.metrics().verb(Verb::MUTATION).intercepted, 1);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn shutdown_fails_the_requests_waiting() {
    let a = start(1).await;
    let b = start_with(
        2,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        Some(Arc::new(SlowReplica {
            delay: Duration::from_secs(30),
            started_late: Arc::default(),
        })),
        Environment::tcp(2),
    )
    .await;
    introduce(&a, &b);
    let remote = a.messaging.remote_replica(b.messaging.host_id());
    let waiting = tokio::spawn(async move { remote.read(point_read(TABLE, 1), later()).await });
    // Let the request reach the peer.
    ping_until_answered(&a, b.messaging.host_id(), Duration::from_secs(5)).await;
    a.messaging.shutdown().await;
    let result = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("answered at shutdown")
        .expect("task");
    assert!(
        matches!(&result, Err(ReplicaError::Unreachable(m)) if m.contains("shut down")),
        "{result:?}"
    );
    b.messaging.shutdown().await;
}

/// Delays every PING by a fixed time: a slow link.
struct SlowPings(Duration);

impl OutboundInterceptor for SlowPings {
    fn intercept(&self, _: HostId, verb: Verb, kind: FrameKind) -> Interception {
        if verb == Verb::PING && kind == FrameKind::Request {
            Interception::Delay(self.0)
        } else {
            Interception::Deliver
        }
    }
}

#[tokio::test]
async fn the_outbound_interceptor_can_slow_a_link() {
    let b = start(2).await;
    let mut environment = Environment::tcp(1);
    environment.interceptor = Arc::new(SlowPings(Duration::from_millis(300)));
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    let started = Instant::now();
    a.messaging
        .ping(b_host, Some(later()))
        .await
        .expect("slow, not lost");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // A delay longer than the time left: the message is not sent after its deadline.
    let e = a
        .messaging
        .ping(b_host, Some(within(Duration::from_millis(100))))
        .await;
    assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(a.messaging.metrics().verb(Verb::PING).expired, 1);
    assert_eq!(b.messaging.metrics().verb(Verb::PING).received, 1);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_opened_from_another_runtime_outlives_it() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    // The first request (which opens the connection) comes from a runtime of its own, as a
    // CQL shard's would, and that runtime then ends.
    let messaging = a.messaging.clone();
    tokio::task::spawn_blocking(move || {
        let shard = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        shard
            .block_on(messaging.ping(b_host, Some(later())))
            .expect("ping from the shard");
    })
    .await
    .expect("shard thread");
    a.messaging
        .ping(b_host, Some(later()))
        .await
        .expect("the connection lives on");
    assert_eq!(a.messaging.metrics().connections_opened, 1);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn messages_over_the_cap_are_refused_by_sender_and_receiver() {
    let a = start(1).await;
    let b = start_with(
        2,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        MessagingOptions {
            max_message_bytes: 1000,
            ..options()
        },
        None,
        Environment::tcp(2),
    )
    .await;
    introduce(&a, &b);
    introduce(&b, &a);
    let verb = Verb::extension(66);
    let echo =
        |_: HostId, payload: Bytes, _: Deadline| async move { Ok::<_, HandlerError>(payload) };
    b.messaging.register_handler(verb, Arc::new(echo)).unwrap();
    let big = Bytes::from((0..2000u32).map(|i| (i * 7) as u8).collect::<Vec<u8>>());
    // The sender refuses before queueing.
    let e = b
        .messaging
        .request(a.messaging.host_id(), verb, big.clone(), Some(later()))
        .await;
    assert!(
        matches!(
            e,
            Err(MessagingError::TooLarge {
                bytes: 2000,
                cap_bytes: 1000
            })
        ),
        "{e:?}"
    );
    // A sender with a larger cap: the receiver closes the connection at the frame's header.
    let e = a
        .messaging
        .request(
            b.messaging.host_id(),
            verb,
            big,
            Some(within(Duration::from_millis(500))),
        )
        .await;
    assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
    assert_eq!(b.messaging.metrics().malformed, 1);
    assert_eq!(b.messaging.metrics().verb(verb).received, 0);
    // The next connection serves on.
    ping_until_answered(&a, b.messaging.host_id(), Duration::from_secs(5)).await;
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// A reply accepting the dialer, as the handshake's layout describes it.
fn accepted_reply_bytes(host_id: HostId) -> Vec<u8> {
    let mut body = vec![0, 1];
    body.extend_from_slice(host_id.0.as_bytes());
    body.extend_from_slice(&0u64.to_be_bytes());
    body.extend_from_slice(&0u16.to_be_bytes());
    let crc = crc32(&body);
    let mut out = b"HMSH".to_vec();
    out.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

#[tokio::test]
async fn a_peer_that_drops_each_connection_at_once_is_redialled_with_backoff() {
    // A fake peer: accepts each handshake, then closes the connection.
    let fake = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_address = fake.local_addr().unwrap();
    let fake_host = host(9);
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    let server = tokio::spawn(async move {
        loop {
            let (mut socket, _) = fake.accept().await.unwrap();
            counter.fetch_add(1, Ordering::Relaxed);
            let mut head = [0u8; 6];
            if socket.read_exact(&mut head).await.is_err() {
                continue;
            }
            let mut body = vec![0u8; usize::from(u16::from_be_bytes([head[4], head[5]]))];
            if socket.read_exact(&mut body).await.is_err() {
                continue;
            }
            let _ = socket.write_all(&accepted_reply_bytes(fake_host)).await;
        }
    });
    let a = start(1).await;
    a.messaging.set_peer_address(fake_host, fake_address);
    // A ping every 10 ms for 700 ms: each is written to a connection the peer then drops.
    for _ in 0..70 {
        let messaging = a.messaging.clone();
        tokio::spawn(async move {
            let e = messaging
                .ping(fake_host, Some(within(Duration::from_millis(300))))
                .await;
            assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Backoff from 20 ms doubling to 200 ms allows about six attempts in 700 ms; a redial
    // at once after each close would make one per ping.
    let attempts = accepted.load(Ordering::Relaxed);
    assert!((2..=12).contains(&attempts), "{attempts} connections");
    server.abort();
    a.messaging.shutdown().await;
}

#[tokio::test]
async fn the_fault_injector_partitions_two_nodes_and_heals() {
    let injector = Arc::new(messaging::FaultInjector::default());
    let mut environment = Environment::tcp(1);
    environment.interceptor = injector.clone();
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    let b = start(2).await;
    let c = start(3).await;
    for (x, y) in [(&a, &b), (&a, &c)] {
        introduce(x, y);
    }
    let (b_host, c_host) = (b.messaging.host_id(), c.messaging.host_id());
    injector.set(b_host, messaging::LinkFault::Cut);
    let e = a
        .messaging
        .ping(b_host, Some(within(Duration::from_millis(200))))
        .await;
    assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
    a.messaging
        .ping(c_host, Some(later()))
        .await
        .expect("only the link to b is cut");
    injector.heal(b_host);
    a.messaging
        .ping(b_host, Some(later()))
        .await
        .expect("healed");
    for node in [a, b, c] {
        node.messaging.shutdown().await;
    }
}

#[tokio::test]
async fn a_forgotten_peer_is_disconnected_until_introduced_again() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    a.messaging.forget_peer(b_host);
    let e = a.messaging.ping(b_host, Some(later())).await;
    assert!(matches!(e, Err(MessagingError::UnknownPeer(_))), "{e:?}");
    introduce(&a, &b);
    a.messaging
        .ping(b_host, Some(later()))
        .await
        .expect("ping again");
    assert_eq!(
        a.messaging.metrics().connections_opened,
        2,
        "a new connection"
    );
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// A port on 127.0.0.1 nothing listens on (bound, then closed).
async fn closed_port_address() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

#[tokio::test]
async fn a_convicted_peer_fails_its_requests_at_once_and_is_not_dialled_until_up() {
    let injector = Arc::new(messaging::FaultInjector::default());
    let mut environment = Environment::tcp(1);
    environment.interceptor = injector.clone();
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(a.messaging.metrics().connections_opened, 1);

    // A request in flight (its message dropped on the way, so no answer comes) and a write
    // through the peer's `RemoteReplica`, both with ten seconds to go.
    injector.set(b_host, messaging::LinkFault::Cut);
    let in_flight = {
        let messaging = a.messaging.clone();
        tokio::spawn(async move { messaging.ping(b_host, Some(later())).await })
    };
    let remote = a.messaging.remote_replica(b_host);
    let write = tokio::spawn(async move { remote.apply_mutation(write(1, b"x"), later()).await });
    while a.messaging.metrics().verb(Verb::MUTATION).intercepted == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let convicted_at = Instant::now();
    assert!(a.messaging.mark_down(b_host), "it was up");
    assert!(!a.messaging.mark_down(b_host), "once");
    let e = in_flight.await.unwrap();
    assert!(matches!(e, Err(MessagingError::PeerDown { .. })), "{e:?}");
    let e = write.await.unwrap();
    assert!(matches!(e, Err(ReplicaError::Unreachable(_))), "{e:?}");
    assert!(convicted_at.elapsed() < Duration::from_secs(2), "at once");
    assert_eq!(a.messaging.metrics().failed_peer_down, 2);

    // While it is down, requests fail at once and nothing dials it.
    injector.heal(b_host);
    assert!(!a.messaging.is_up(b_host));
    let e = a.messaging.ping(b_host, Some(later())).await;
    assert!(matches!(e, Err(MessagingError::PeerDown { .. })), "{e:?}");
    assert_eq!(a.messaging.metrics().verb(Verb::PING).dropped, 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.messaging.metrics().connections_opened, 1);

    // Up again: the next request dials a new connection at once (the old one was closed).
    assert!(a.messaging.mark_up(b_host));
    a.messaging
        .ping(b_host, Some(later()))
        .await
        .expect("up again");
    assert_eq!(a.messaging.metrics().connections_opened, 2);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// The node marks a peer down and at once up again when gossip shows it restarted: the
/// connection to the process that died must be closed even though its task never sees the
/// peer down (a peer that vanished without a FIN or reset, as after a power cut, would else
/// keep taking this node's messages into a dead connection).
#[tokio::test]
async fn a_conviction_lifted_at_once_still_closes_the_connection() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(a.messaging.metrics().connections_opened, 1);

    // In one breath: the connection's task cannot run in between on this runtime.
    assert!(a.messaging.mark_down(b_host));
    assert!(a.messaging.mark_up(b_host));
    assert!(a.messaging.is_up(b_host));

    ping_until_answered(&a, b_host, Duration::from_secs(5)).await;
    assert_eq!(
        a.messaging.metrics().connections_opened,
        2,
        "the connection open at the conviction is closed and a new one dialled"
    );
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// Node 1 with a PING queued for node 2, whose address is a closed port: the dial failed and
/// the connection waits out a 10 s backoff, so the request stays queued.
async fn ping_queued_for_unreachable_peer() -> (
    Node,
    HostId,
    tokio::task::JoinHandle<Result<(), MessagingError>>,
) {
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        MessagingOptions {
            // Dials a closed port, then waits long between attempts: the request stays queued.
            reconnect_initial_backoff_ms: 10_000,
            reconnect_max_backoff_ms: 10_000,
            ..options()
        },
        None,
        Environment::tcp(1),
    )
    .await;
    let b_host = host(2);
    a.messaging
        .set_peer_address(b_host, closed_port_address().await);
    let queued = {
        let messaging = a.messaging.clone();
        tokio::spawn(async move { messaging.ping(b_host, Some(later())).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!queued.is_finished(), "waits for a connection");
    (a, b_host, queued)
}

#[tokio::test]
async fn a_request_queued_for_an_unreachable_peer_fails_when_it_is_convicted() {
    let (a, b_host, queued) = ping_queued_for_unreachable_peer().await;
    let convicted_at = Instant::now();
    a.messaging.mark_down(b_host);
    let e = queued.await.unwrap();
    assert!(matches!(e, Err(MessagingError::PeerDown { .. })), "{e:?}");
    assert!(convicted_at.elapsed() < Duration::from_secs(2), "at once");
    // The queue is discarded: the message counts as dropped once its task sees the peer down.
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.messaging.metrics().verb(Verb::PING).dropped == 0 {
        assert!(Instant::now() < deadline, "the queued message is discarded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    a.messaging.shutdown().await;
}

#[tokio::test]
async fn a_delayed_link_delays_each_message_not_the_sum_of_them() {
    let injector = Arc::new(messaging::FaultInjector::default());
    let mut environment = Environment::tcp(1);
    environment.interceptor = injector.clone();
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    let delay = Duration::from_millis(400);
    injector.set(b_host, messaging::LinkFault::Delay(delay));
    let started = Instant::now();
    let pings: Vec<_> = (0..10)
        .map(|_| {
            let messaging = a.messaging.clone();
            tokio::spawn(async move { messaging.ping(b_host, Some(later())).await })
        })
        .collect();
    for ping in pings {
        ping.await.unwrap().expect("delayed, not lost");
    }
    let elapsed = started.elapsed();
    assert!(elapsed >= delay, "{elapsed:?}");
    // One after the other they would take ten times the delay.
    assert!(elapsed < delay * 5, "{elapsed:?}");
    // Only some verbs: a verb's own fault wins over the link's.
    injector.set_for_verb(b_host, Verb::PING, messaging::LinkFault::Drop(1.0));
    let e = a
        .messaging
        .ping(b_host, Some(within(Duration::from_millis(300))))
        .await;
    assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
    a.messaging
        .remote_replica(b_host)
        .apply_mutation(write(1, b"slow"), later())
        .await
        .expect("mutations are only delayed");
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// Opens a raw connection to `address` and completes the handshake as `host_id`.
async fn handshaken(address: SocketAddr, host_id: HostId) -> tokio::net::TcpStream {
    let mut raw = tokio::net::TcpStream::connect(address).await.unwrap();
    raw.write_all(&hello_bytes(host_id, CLUSTER)).await.unwrap();
    let mut head = [0u8; 6];
    raw.read_exact(&mut head).await.expect("a reply");
    let mut body = vec![0u8; usize::from(u16::from_be_bytes([head[4], head[5]]))];
    raw.read_exact(&mut body).await.expect("a reply body");
    assert_eq!(body[0], 0, "accepted");
    raw
}

/// Whether the node closes `raw` within five seconds (reading whatever it sends first).
async fn closed_by_node(raw: &mut tokio::net::TcpStream) -> bool {
    let mut rest = Vec::new();
    matches!(
        tokio::time::timeout(Duration::from_secs(5), raw.read_to_end(&mut rest)).await,
        Ok(Ok(_)) | Ok(Err(_))
    )
}

/// A frame's bytes, with `edit` applied to its header and the header checksum then fixed (so
/// the field checks, not the checksum, must catch the damage) unless `fix_crc` is false.
fn frame_bytes(verb: Verb, payload: &[u8], edit: impl FnOnce(&mut [u8]), fix_crc: bool) -> Vec<u8> {
    let mut frame = bytes::BytesMut::new();
    messaging::encode_frame(
        &messaging::Frame {
            kind: FrameKind::Request,
            verb,
            request_id: 1,
            expires_in_ms: 1000,
            payload: Bytes::copy_from_slice(payload),
        },
        usize::MAX,
        &mut frame,
    );
    edit(&mut frame);
    if fix_crc {
        let crc = crc32(&frame[..32]);
        frame[32..36].copy_from_slice(&crc.to_be_bytes());
    }
    frame.to_vec()
}

#[tokio::test]
async fn each_malformed_frame_closes_only_its_connection_and_is_counted() {
    let a = start(1).await;
    let b = start_with(
        2,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        MessagingOptions {
            max_message_bytes: 1000,
            ..options()
        },
        None,
        Environment::tcp(2),
    )
    .await;
    introduce(&a, &b);
    let b_address = b.messaging.listen_address();
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");

    let mut truncated_hello = hello_bytes(host(3), CLUSTER);
    truncated_hello[5] = 200; // a body length past the bytes sent: the CRC cannot match
    truncated_hello.resize(6 + 200, 0);
    let mut bad_hello_crc = hello_bytes(host(3), CLUSTER);
    let last = bad_hello_crc.len() - 1;
    bad_hello_crc[last] ^= 1;
    let mut overlong_hello = b"HMSH".to_vec();
    overlong_hello.extend_from_slice(&u16::MAX.to_be_bytes());
    for (case, bytes) in [
        ("garbage hello", vec![0x17u8; 40]),
        ("hello body length", truncated_hello),
        ("hello checksum", bad_hello_crc),
        ("hello over its cap", overlong_hello),
    ] {
        let mut raw = tokio::net::TcpStream::connect(b_address).await.unwrap();
        raw.write_all(&bytes).await.unwrap();
        assert!(closed_by_node(&mut raw).await, "{case}: closed");
    }
    assert_eq!(b.messaging.metrics().malformed, 4);

    let frames: Vec<(&str, Vec<u8>)> = vec![
        ("garbage frame", vec![0x5Au8; 80]),
        (
            "payload checksum",
            frame_bytes(Verb::PING, b"", |f| f[28] ^= 1, true),
        ),
        (
            "header checksum",
            frame_bytes(Verb::PING, b"", |f| f[33] ^= 1, false),
        ),
        (
            "length over the cap",
            frame_bytes(
                Verb::PING,
                b"",
                |f| {
                    f[20..24].copy_from_slice(&5000u32.to_be_bytes());
                    f[24..28].copy_from_slice(&5000u32.to_be_bytes());
                },
                true,
            ),
        ),
        (
            "lengths that disagree",
            frame_bytes(Verb::PING, b"ab", |f| f[27] = 9, true),
        ),
        (
            "verb id out of range",
            frame_bytes(
                Verb::PING,
                b"",
                |f| f[4..6].copy_from_slice(&9999u16.to_be_bytes()),
                true,
            ),
        ),
        (
            "unknown flags",
            frame_bytes(Verb::PING, b"", |f| f[3] = 0x80, true),
        ),
    ];
    let count = frames.len() as u64;
    for (case, bytes) in frames {
        let mut raw = handshaken(b_address, host(3)).await;
        raw.write_all(&bytes).await.unwrap();
        assert!(closed_by_node(&mut raw).await, "{case}: closed");
    }
    assert_eq!(b.messaging.metrics().malformed, 4 + count);
    assert_eq!(b.messaging.metrics().verb(Verb::PING).received, 1);
    a.messaging
        .ping(b_host, Some(later()))
        .await
        .expect("still serving");
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn a_malformed_request_gets_an_error_answer_and_its_connection_serves_on() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    introduce(&b, &a);
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    let whole_mutation = {
        let mut out = vec![1u8];
        mutation::encode_mutation(&write(1, b"v").updates, &mut out);
        out
    };
    let whole_read = {
        let mut out = Vec::new();
        mutation::encode_read_command(&point_read(TABLE, 1), &mut out);
        out
    };
    let mut garbage_mutation = whole_mutation.clone();
    for byte in garbage_mutation.iter_mut().skip(1) {
        *byte = 0xEE;
    }
    let cases: Vec<(&str, Verb, Vec<u8>)> = vec![
        ("empty MUTATION", Verb::MUTATION, vec![]),
        ("unknown MUTATION flags", Verb::MUTATION, vec![0x80, 1]),
        (
            "truncated MUTATION",
            Verb::MUTATION,
            whole_mutation[..whole_mutation.len() - 3].to_vec(),
        ),
        ("undecodable MUTATION", Verb::MUTATION, garbage_mutation),
        (
            "bytes after a MUTATION",
            Verb::MUTATION,
            [&whole_mutation[..], &[0]].concat(),
        ),
        (
            "truncated READ",
            Verb::READ,
            whole_read[..whole_read.len() / 2].to_vec(),
        ),
        ("short TRUNCATE", Verb::TRUNCATE, vec![0; 15]),
        ("short BATCH_STORE", Verb::BATCH_STORE, vec![0; 15]),
        (
            "undecodable BATCH_STORE",
            Verb::BATCH_STORE,
            [
                &[0u8; 16][..],
                &[1, 0, 0, 0, 1, 0, 0, 0, 3, 0xEE, 0xEE, 0xEE],
            ]
            .concat(),
        ),
        ("short BATCH_REMOVE", Verb::BATCH_REMOVE, vec![0; 17]),
        ("PING with a body", Verb::PING, vec![1]),
    ];
    for (case, verb, payload) in &cases {
        let e = a
            .messaging
            .request(b_host, *verb, Bytes::from(payload.clone()), Some(later()))
            .await;
        assert!(
            matches!(e, Err(MessagingError::Remote(RemoteError::BadRequest(_)))),
            "{case}: {e:?}"
        );
    }
    let e = a
        .messaging
        .request(b_host, Verb::extension(99), Bytes::new(), Some(later()))
        .await;
    assert!(
        matches!(e, Err(MessagingError::Remote(RemoteError::UnknownVerb))),
        "{e:?}"
    );
    let metrics = b.messaging.metrics();
    assert_eq!(metrics.bad_requests, cases.len() as u64);
    assert_eq!(metrics.unknown_verbs, 1);
    assert_eq!(metrics.malformed, 0, "no connection was closed");
    assert_eq!(rows_stored(&b.engine, 1), 0, "nothing was applied");
    // The same connections serve on.
    a.messaging
        .remote_replica(b_host)
        .apply_mutation(write(1, b"v"), later())
        .await
        .expect("a whole mutation applies");
    assert_eq!(rows_stored(&b.engine, 1), 1);
    assert_eq!(a.messaging.metrics().connections_opened, 1);
    assert_eq!(b.messaging.metrics().connections_opened, 1);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn a_raw_hello_from_another_cluster_is_refused_with_a_reason() {
    let b = start(2).await;
    let mut raw = tokio::net::TcpStream::connect(b.messaging.listen_address())
        .await
        .unwrap();
    raw.write_all(&hello_bytes(host(3), "Another Cluster"))
        .await
        .unwrap();
    let mut head = [0u8; 6];
    raw.read_exact(&mut head).await.expect("a reply");
    let mut body = vec![0u8; usize::from(u16::from_be_bytes([head[4], head[5]]))];
    raw.read_exact(&mut body).await.expect("a reply body");
    assert_eq!(body[0], 1, "refused");
    let reason = String::from_utf8_lossy(&body[20..body.len() - 4]).to_string();
    assert!(reason.contains("cluster name mismatch"), "{reason}");
    assert!(closed_by_node(&mut raw).await, "closed after the refusal");
    assert_eq!(b.messaging.metrics().handshakes_refused, 1);
    assert_eq!(b.messaging.metrics().malformed, 0);
    b.messaging.shutdown().await;
}

#[tokio::test]
async fn a_request_for_an_unknown_table_is_refused_and_the_peer_serves_on() {
    let a = start(1).await;
    let b = start(2).await;
    introduce(&a, &b);
    introduce(&b, &a);
    let missing = TableId::from_u128(0xdead);
    let remote = a.messaging.remote_replica(b.messaging.host_id());
    let mut mutation = write(1, b"v");
    Arc::make_mut(&mut mutation.updates)[0].table = missing;
    let e = remote.apply_mutation(mutation, later()).await;
    assert_eq!(e, Err(ReplicaError::UnknownTable(missing)));
    let e = remote.read(point_read(missing, 1), later()).await;
    assert_eq!(e, Err(ReplicaError::UnknownTable(missing)));
    let e = remote.truncate(missing, later()).await;
    assert_eq!(e, Err(ReplicaError::UnknownTable(missing)));
    remote
        .apply_mutation(write(1, b"v"), later())
        .await
        .expect("a known table's write applies");
    assert_eq!(rows_stored(&b.engine, 1), 1);
    assert_eq!(b.messaging.metrics().malformed, 0);
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// TCP whose first connection's writes block forever once `stuck` is set, as a write blocked
/// on a full window to a dead process does where a reset does not wake the writer (turmoil's
/// simulated TCP, which the simulation runs this crate on).
struct FirstWriterStuck {
    connects: std::sync::atomic::AtomicUsize,
    stuck: Arc<AtomicBool>,
}

struct MaybeStuck {
    stream: Box<dyn messaging::Stream>,
    stuck: Option<Arc<AtomicBool>>,
}

impl messaging::Network for FirstWriterStuck {
    fn connect(&self, to: SocketAddr) -> messaging::NetworkFuture<'_, Box<dyn messaging::Stream>> {
        Box::pin(async move {
            let stream = messaging::TcpNetwork.connect(to).await?;
            let first = self.connects.fetch_add(1, Ordering::Relaxed) == 0;
            let stuck = first.then(|| self.stuck.clone());
            Ok(Box::new(MaybeStuck { stream, stuck }) as Box<dyn messaging::Stream>)
        })
    }

    fn bind(
        &self,
        address: SocketAddr,
    ) -> messaging::NetworkFuture<'_, Box<dyn messaging::Listener>> {
        messaging::TcpNetwork.bind(address)
    }
}

impl tokio::io::AsyncRead for MaybeStuck {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for MaybeStuck {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self
            .stuck
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
        {
            // Never woken: only the peer's end of the connection, read, can end this.
            return std::task::Poll::Pending;
        }
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn a_write_blocked_on_a_connection_the_peer_ends_gives_way_to_a_new_connection() {
    // A fake peer: accepts each handshake, then reads and discards; its first connection is
    // closed when `close_first` is notified (the peer's process died and came back).
    let fake = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let fake_address = fake.local_addr().unwrap();
    let fake_host = host(9);
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let close_first = Arc::new(tokio::sync::Notify::new());
    let server = {
        let (accepted, close_first) = (accepted.clone(), close_first.clone());
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = fake.accept().await.unwrap();
                let first = accepted.fetch_add(1, Ordering::Relaxed) == 0;
                let close_first = close_first.clone();
                tokio::spawn(async move {
                    let mut head = [0u8; 6];
                    socket.read_exact(&mut head).await?;
                    let mut body = vec![0u8; usize::from(u16::from_be_bytes([head[4], head[5]]))];
                    socket.read_exact(&mut body).await?;
                    socket.write_all(&accepted_reply_bytes(fake_host)).await?;
                    let mut sink = [0u8; 1024];
                    loop {
                        tokio::select! {
                            _ = close_first.notified(), if first => return Ok(()),
                            read = socket.read(&mut sink) => if read? == 0 {
                                return Ok::<_, std::io::Error>(());
                            },
                        }
                    }
                });
            }
        })
    };
    let stuck = Arc::new(AtomicBool::new(false));
    let mut environment = Environment::tcp(1);
    environment.network = Arc::new(FirstWriterStuck {
        connects: std::sync::atomic::AtomicUsize::new(0),
        stuck: stuck.clone(),
    });
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    a.messaging.set_peer_address(fake_host, fake_address);
    let ping = |timeout_ms: u64| {
        let messaging = a.messaging.clone();
        async move {
            let e = messaging
                .ping(fake_host, Some(within(Duration::from_millis(timeout_ms))))
                .await;
            assert!(matches!(e, Err(MessagingError::Timeout { .. })), "{e:?}");
        }
    };
    // The first connection opens (the fake never answers a ping).
    ping(100).await;
    assert_eq!(accepted.load(Ordering::Relaxed), 1);

    // Its next write blocks, then the peer ends the connection.
    stuck.store(true, Ordering::Relaxed);
    ping(100).await;
    close_first.notify_one();

    // Pings go on, and reach a new connection.
    let deadline = Instant::now() + Duration::from_secs(5);
    while accepted.load(Ordering::Relaxed) < 2 {
        assert!(
            Instant::now() < deadline,
            "the connection blocked writing to the ended one was never redialled"
        );
        ping(50).await;
    }
    server.abort();
    a.messaging.shutdown().await;
}

/// Serves writes by recording the name of the thread each ran on.
struct ThreadRecorder(std::sync::Mutex<Vec<String>>);

impl Replica for ThreadRecorder {
    fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
        let name = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        self.0.lock().unwrap().push(name);
        Box::pin(async { Ok(()) })
    }
    fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(async { Err(ReplicaError::Internal("not served".into())) })
    }
    fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        Box::pin(async { Ok(ReadDigest([0; 16])) })
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(async { Ok(()) })
    }
}

/// A shard thread: what stops it, and the thread to join.
type ShardThread = (
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<()>,
);

/// `count` shard threads named `{name}-shard-{i}`, each driving a current-thread runtime (as
/// `cql_server::Shards` do), and their runtimes.
fn shard_threads(name: &str, count: usize) -> (Vec<tokio::runtime::Handle>, Vec<ShardThread>) {
    let mut handles = Vec::new();
    let mut threads = Vec::new();
    for i in 0..count {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        handles.push(runtime.handle().clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-shard-{i}"))
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })
            .expect("thread");
        threads.push((stop, thread));
    }
    (handles, threads)
}

/// A request sent from a shard's thread is served on the peer's same-numbered shard thread
/// (modulo its shard count), one sent from elsewhere on the peer's main runtime; the
/// responses come back to the waiting requests either way, and a conviction fails a request
/// waiting on a shard's lane.
#[test]
fn requests_are_served_on_the_senders_lane() {
    let main = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (a_shards, a_threads) = shard_threads("a", 2);
    let (b_shards, b_threads) = shard_threads("b", 3);
    let recorder = Arc::new(ThreadRecorder(std::sync::Mutex::default()));
    main.block_on(async {
        let start = |id: u128, shards: Vec<tokio::runtime::Handle>, replica: Arc<dyn Replica>| {
            let config = MessagingConfig {
                host_id: host(id),
                cluster_name: CLUSTER.to_string(),
                listen_address: "127.0.0.1:0".parse().unwrap(),
                broadcast_address: None,
                options: options(),
                generation: 0,
            };
            MessagingService::start_on_shards(config, replica, Environment::tcp(id as u64), shards)
        };
        let engine = Arc::new(MemoryEngine::new());
        let local: Arc<dyn Replica> =
            Arc::new(replica::LocalReplica::new(engine, Durability::Periodic));
        let a = Arc::new(start(1, a_shards.clone(), local).await.expect("start a"));
        let b = Arc::new(start(2, b_shards, recorder.clone()).await.expect("start b"));
        a.set_peer_address(host(2), b.listen_address());
        let b_host = b.host_id();
        for (lane, shard) in a_shards.iter().enumerate() {
            let remote = a.remote_replica(b_host);
            shard
                .spawn(async move { remote.apply_mutation(write(1, b"x"), later()).await })
                .await
                .expect("join")
                .unwrap_or_else(|e| panic!("write from lane {lane}: {e}"));
        }
        a.remote_replica(b_host)
            .apply_mutation(write(1, b"y"), later())
            .await
            .expect("write from the main runtime");
        // A current-thread runtime runs its tasks on the thread that drives it: this one.
        let main_thread = std::thread::current().name().unwrap().to_string();
        assert_eq!(
            *recorder.0.lock().unwrap(),
            ["b-shard-0", "b-shard-1", main_thread.as_str()]
        );

        // A request waiting on a shard's lane fails at once when its peer is convicted.
        let blackhole = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        a.set_peer_address(host(3), blackhole.local_addr().unwrap());
        let remote = a.remote_replica(host(3));
        let waiting = a_shards[1].spawn(async move {
            let started = Instant::now();
            let result = remote.apply_mutation(write(1, b"z"), later()).await;
            (result, started.elapsed())
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(a.mark_down(host(3)));
        let (result, took) = waiting.await.expect("join");
        assert!(
            matches!(result, Err(ReplicaError::Unreachable(_))),
            "{result:?}"
        );
        assert!(took < Duration::from_secs(5), "failed at the conviction");
        a.shutdown().await;
        b.shutdown().await;
    });
    for (stop, thread) in a_threads.into_iter().chain(b_threads) {
        stop.send(()).expect("shard running");
        thread.join().expect("shard thread");
    }
}

/// Node `id`'s process started under `generation`, listening on a free port of 127.0.0.1,
/// with `environment`.
async fn start_generation(id: u128, generation: u64, environment: Environment) -> Node {
    start_process(
        id,
        generation,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await
}

/// Waits until `node` has received `count` requests or responses of `verb`.
async fn received(node: &Node, verb: Verb, count: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while node.messaging.metrics().verb(verb).received < count {
        assert!(Instant::now() < deadline, "{verb} {count} received");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A connection handshaken with a process of the peer older than the one gossip reports is
/// closed, and the next message goes to the new process; one handshaken with the new process
/// stays open through the report. (Both processes are kept running, under one host id and two
/// addresses, so a message on the old connection would be answered by the old process: the
/// test sees where each ping went.)
#[tokio::test]
async fn a_connection_to_a_peers_older_process_closes_when_it_restarted() {
    let a = start_generation(1, 100, Environment::tcp(1)).await;
    let b_old = start_generation(2, 10, Environment::tcp(2)).await;
    let b_new = start_generation(2, 11, Environment::tcp(3)).await;
    let b_host = host(2);
    introduce(&a, &b_old);
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(b_old.messaging.metrics().verb(Verb::PING).received, 1);

    // The new process's address is used from the next dial on: the old connection stays.
    introduce(&a, &b_new);
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(b_old.messaging.metrics().verb(Verb::PING).received, 2);
    // A report of the process connected to (the first the service hears of) keeps it.
    assert!(a.messaging.peer_restarted(b_host, 10));
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(b_old.messaging.metrics().verb(Verb::PING).received, 3);

    // Gossip reports the restart: the old connection closes, at once and without a message
    // to carry, and the next ping reaches the new process; nothing failed.
    assert!(a.messaging.peer_restarted(b_host, 11));
    assert!(!a.messaging.peer_restarted(b_host, 11), "once");
    assert!(a.messaging.is_up(b_host), "a restart is no conviction");
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(b_new.messaging.metrics().verb(Verb::PING).received, 1);
    assert_eq!(b_old.messaging.metrics().verb(Verb::PING).received, 3);
    assert_eq!(a.messaging.metrics().connections_opened, 2);
    assert_eq!(a.messaging.metrics().failed_peer_down, 0);

    // A report of the process already connected to keeps the connection.
    assert!(!a.messaging.peer_restarted(b_host, 11));
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    assert_eq!(a.messaging.metrics().connections_opened, 2);
    for node in [a, b_old, b_new] {
        node.messaging.shutdown().await;
    }
}

/// The e2e flake this guards: a node restarts and coordinates writes at once; its peers learn
/// of the restart from gossip while their responses to its first requests are queued. The
/// responses must reach the new process (the old wiring, `mark_down` then `mark_up`, dropped
/// them, and both replicas' answers to one write could be lost), and a connection already
/// dialled to the new process must stay.
#[tokio::test]
async fn a_restarted_peer_keeps_its_queued_responses_and_the_connection_to_its_new_process() {
    let injector = Arc::new(messaging::FaultInjector::default());
    let mut environment = Environment::tcp(1);
    environment.interceptor = injector.clone();
    let a = start_generation(1, 100, environment).await;
    let b_old = start_generation(2, 10, Environment::tcp(2)).await;
    let b_new = start_generation(2, 11, Environment::tcp(3)).await;
    let b_host = host(2);
    introduce(&a, &b_old);
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    introduce(&a, &b_new);
    introduce(&b_new, &a);

    // The new process pings; `a` holds each message to b for a second, so its response waits
    // on the connection to the old process when gossip reports the restart.
    injector.set(b_host, messaging::LinkFault::Delay(Duration::from_secs(1)));
    let a_host = a.messaging.host_id();
    let first = {
        let messaging = b_new.messaging.clone();
        tokio::spawn(async move { messaging.ping(a_host, Some(later())).await })
    };
    received(&a, Verb::PING, 1).await;
    // The ping is served and its response queued at once; it is written after the delay.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(a.messaging.peer_restarted(b_host, 11));
    first
        .await
        .unwrap()
        .expect("the queued response reaches the new process");
    assert_eq!(a.messaging.metrics().connections_opened, 2);

    // A response waiting on the connection to the new process when the report comes (this
    // time, the report arrives after `a` dialled the new process itself).
    let second = {
        let messaging = b_new.messaging.clone();
        tokio::spawn(async move { messaging.ping(a_host, Some(later())).await })
    };
    received(&a, Verb::PING, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!a.messaging.peer_restarted(b_host, 11));
    second.await.unwrap().expect("answered");
    assert_eq!(
        a.messaging.metrics().connections_opened,
        2,
        "the connection stayed"
    );
    assert_eq!(a.messaging.metrics().verb(Verb::PING).dropped, 0);
    assert_eq!(b_old.messaging.metrics().unexpected_responses, 0);
    for node in [a, b_old, b_new] {
        node.messaging.shutdown().await;
    }
}

/// A message queued while the peer's process is gone (its connection in backoff) is sent at
/// once when gossip reports the new process, not after the backoff, and not failed.
#[tokio::test]
async fn a_restart_ends_the_backoff_and_keeps_the_queued_requests() {
    let (a, b_host, queued) = ping_queued_for_unreachable_peer().await;
    let b = start_generation(2, 7, Environment::tcp(2)).await;
    introduce(&a, &b);
    let restarted_at = Instant::now();
    assert!(a.messaging.peer_restarted(b_host, 7));
    queued.await.unwrap().expect("sent to the new process");
    assert!(restarted_at.elapsed() < Duration::from_secs(2), "at once");
    a.messaging.shutdown().await;
    b.messaging.shutdown().await;
}

/// Records the peers `node` reports gone (`MessagingService::on_peer_gone`).
fn gone_reports(node: &Node) -> Arc<std::sync::Mutex<Vec<HostId>>> {
    let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = reports.clone();
    node.messaging
        .on_peer_gone(move |host_id| sink.lock().unwrap().push(host_id));
    reports
}

/// Waits until `reports` holds `count` reports, for at most `limit`.
async fn reported(reports: &std::sync::Mutex<Vec<HostId>>, count: usize, limit: Duration) {
    let start = Instant::now();
    while reports.lock().unwrap().len() < count {
        assert!(
            start.elapsed() < limit,
            "{:?} after {limit:?}, {count} expected",
            reports.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A peer's process stops: the connection to it closes, the redial that follows at once is
/// refused, and the peer is reported gone once, however many requests fail after; once a
/// connection to its next process has opened, its next loss is reported again.
#[tokio::test]
async fn a_lost_connection_whose_redial_is_refused_reports_the_peer_gone_once() {
    let a = start(1).await;
    let reports = gone_reports(&a);
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    let b_address = b.messaging.listen_address();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");

    let stopped_at = Instant::now();
    b.messaging.shutdown().await;
    drop(b);
    reported(&reports, 1, Duration::from_secs(2)).await;
    assert!(stopped_at.elapsed() < Duration::from_secs(1), "at once");
    for _ in 0..3 {
        let down = a
            .messaging
            .ping(b_host, Some(within(Duration::from_millis(200))))
            .await;
        assert!(down.is_err(), "a stopped peer does not answer");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(*reports.lock().unwrap(), [b_host], "reported once");

    let b = start_with(2, CLUSTER, b_address, options(), None, Environment::tcp(2)).await;
    ping_until_answered(&a, b_host, Duration::from_secs(10)).await;
    assert_eq!(
        reports.lock().unwrap().len(),
        1,
        "a live peer is not reported"
    );
    b.messaging.shutdown().await;
    reported(&reports, 2, Duration::from_secs(2)).await;
    assert_eq!(*reports.lock().unwrap(), [b_host, b_host]);
    a.messaging.shutdown().await;
}

/// A peer this node never sends to is kept connected when asked, and reported gone when its
/// process stops; nothing is sent on the connection.
#[tokio::test]
async fn a_peer_kept_connected_is_reported_gone_with_nothing_sent() {
    let a = start(1).await;
    let reports = gone_reports(&a);
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    assert!(a.messaging.keep_connected(b_host));
    assert!(!a.messaging.keep_connected(b_host), "once is enough");
    assert!(!a.messaging.keep_connected(host(9)), "no address known");
    let start = Instant::now();
    while a.messaging.metrics().connections_opened == 0 {
        assert!(start.elapsed() < Duration::from_secs(5), "never dialled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    b.messaging.shutdown().await;
    reported(&reports, 1, Duration::from_secs(2)).await;
    assert_eq!(*reports.lock().unwrap(), [b_host]);
    assert_eq!(a.messaging.metrics().verb(Verb::PING).sent, 0);
    a.messaging.shutdown().await;
}

/// TCP whose connects time out (as to a host behind a partition, whose SYNs go unanswered)
/// once `unreachable` is set.
struct Unreachable {
    unreachable: Arc<AtomicBool>,
}

impl messaging::Network for Unreachable {
    fn connect(&self, to: SocketAddr) -> messaging::NetworkFuture<'_, Box<dyn messaging::Stream>> {
        Box::pin(async move {
            if self.unreachable.load(Ordering::Relaxed) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no answer",
                ));
            }
            messaging::TcpNetwork.connect(to).await
        })
    }

    fn bind(
        &self,
        address: SocketAddr,
    ) -> messaging::NetworkFuture<'_, Box<dyn messaging::Listener>> {
        messaging::TcpNetwork.bind(address)
    }
}

/// What is not proof that a peer's process is gone is not reported: a lost connection whose
/// redial times out, and a link a fault cuts (requests time out, the connection stays).
#[tokio::test]
async fn timeouts_and_cut_links_are_not_reported() {
    let unreachable = Arc::new(AtomicBool::new(false));
    let mut environment = Environment::tcp(1);
    environment.network = Arc::new(Unreachable {
        unreachable: unreachable.clone(),
    });
    let injector = Arc::new(messaging::FaultInjector::default());
    environment.interceptor = injector.clone();
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    let reports = gone_reports(&a);
    let b = start(2).await;
    let c = start(3).await;
    introduce(&a, &b);
    introduce(&a, &c);
    let (b_host, c_host) = (b.messaging.host_id(), c.messaging.host_id());
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    a.messaging.ping(c_host, Some(later())).await.expect("ping");

    injector.set(c_host, messaging::LinkFault::Cut);
    let cut = a
        .messaging
        .ping(c_host, Some(within(Duration::from_millis(300))))
        .await;
    assert!(
        matches!(cut, Err(MessagingError::Timeout { .. })),
        "{cut:?}"
    );

    unreachable.store(true, Ordering::Relaxed);
    b.messaging.shutdown().await;
    let lost = a
        .messaging
        .ping(b_host, Some(within(Duration::from_millis(300))))
        .await;
    assert!(lost.is_err());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(*reports.lock().unwrap(), [], "no proof, no report");
    a.messaging.shutdown().await;
    c.messaging.shutdown().await;
}

/// TCP whose next `ending` connects give a stream the other end has already dropped: a
/// dying process's listener, which the kernel still completes connections on, then resets.
struct DyingListener {
    ending: Arc<std::sync::atomic::AtomicUsize>,
}

impl messaging::Network for DyingListener {
    fn connect(&self, to: SocketAddr) -> messaging::NetworkFuture<'_, Box<dyn messaging::Stream>> {
        Box::pin(async move {
            let take = |n: usize| n.checked_sub(1);
            if self
                .ending
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, take)
                .is_ok()
            {
                let (stream, _) = tokio::io::duplex(64);
                return Ok(Box::new(stream) as Box<dyn messaging::Stream>);
            }
            messaging::TcpNetwork.connect(to).await
        })
    }

    fn bind(
        &self,
        address: SocketAddr,
    ) -> messaging::NetworkFuture<'_, Box<dyn messaging::Listener>> {
        messaging::TcpNetwork.bind(address)
    }
}

/// A peer whose dying listener still completes the redial and ends it during the handshake is
/// reported gone when the dial after that is refused.
#[tokio::test]
async fn a_redial_ended_during_the_handshake_leaves_the_question_to_the_next_dial() {
    let ending = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut environment = Environment::tcp(1);
    environment.network = Arc::new(DyingListener {
        ending: ending.clone(),
    });
    let a = start_with(
        1,
        CLUSTER,
        "127.0.0.1:0".parse().unwrap(),
        options(),
        None,
        environment,
    )
    .await;
    let reports = gone_reports(&a);
    let b = start(2).await;
    introduce(&a, &b);
    let b_host = b.messaging.host_id();
    a.messaging.ping(b_host, Some(later())).await.expect("ping");
    ending.store(2, Ordering::Relaxed);
    b.messaging.shutdown().await;
    reported(&reports, 1, Duration::from_secs(2)).await;
    assert_eq!(
        ending.load(Ordering::Relaxed),
        0,
        "both dying dials were made"
    );
    assert_eq!(*reports.lock().unwrap(), [b_host]);
    a.messaging.shutdown().await;
}
