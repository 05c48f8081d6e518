//! The messaging benchmark (`bench/messaging` runs it): two services in this process on
//! loopback, one sending N small MUTATION requests to the other through a `RemoteReplica`,
//! with a fixed number in flight. Prints messages per second and the process's CPU time
//! (getrusage: user + system, both services) per request, which is a request and its response:
//! encode, frame, write, read, decode, dispatch, answer, route back.
//!
//!     cargo run --release -p messaging --example bench -- [--messages N] [--concurrency K]
//!         [--threads T] [--replica null|memory] [--value-bytes B]
//!
//! `--replica null` (the default) acknowledges each mutation without storing it, so only
//! messaging is measured; `memory` applies it to a `MemoryEngine` through `LocalReplica`.
//! `--threads 1` (the default) runs everything on one current-thread runtime.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use coordinator::{Deadline, Mutation, ReadDigest, Replica, ReplicaFuture};
use locator::HostId;
use messaging::{Environment, MessagingConfig, MessagingOptions, MessagingService};
use mutation::{
    Cell, ColumnData, LivenessInfo, PartitionKey, PartitionUpdate, ReadCommand, ReadResponse, Row,
    TableId,
};
use storage::{Durability, MemoryEngine};

const TABLE: TableId = TableId::from_u128(0xbe7c);

struct Args {
    messages: u64,
    concurrency: usize,
    threads: usize,
    memory_replica: bool,
    value_bytes: usize,
}

fn parse_args() -> Args {
    let mut args = Args {
        messages: 200_000,
        concurrency: 128,
        threads: 1,
        memory_replica: false,
        value_bytes: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let number = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{flag} {value}"))
        };
        match flag.as_str() {
            "--messages" => args.messages = number(),
            "--concurrency" => args.concurrency = number() as usize,
            "--threads" => args.threads = number() as usize,
            "--value-bytes" => args.value_bytes = number() as usize,
            "--replica" => args.memory_replica = value == "memory",
            _ => panic!("unknown flag {flag}"),
        }
    }
    args
}

/// Acknowledges every verb at once: messaging's cost alone.
struct NullReplica;

impl Replica for NullReplica {
    fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(async { Ok(()) })
    }
    fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(async { Err(coordinator::ReplicaError::Internal("not served".into())) })
    }
    fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
        Box::pin(async { Err(coordinator::ReplicaError::Internal("not served".into())) })
    }
    fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
        Box::pin(async { Ok(()) })
    }
}

/// A mutation of one row of five columns of `value_bytes` each (cassandra-stress's shape).
fn mutation(k: u64, value_bytes: usize) -> Mutation {
    let row = Row {
        liveness: Some(LivenessInfo {
            timestamp: k as i64,
            expiry: None,
        }),
        deletion: None,
        columns: (0..5)
            .map(|id| ColumnData::Simple {
                id,
                cell: Cell::live(
                    k as i64,
                    vec![(k as u8).wrapping_add(id as u8); value_bytes],
                ),
            })
            .collect(),
    };
    Mutation {
        updates: Arc::new(vec![PartitionUpdate {
            table: TABLE,
            key: PartitionKey {
                token: k as i64,
                key: k.to_be_bytes().to_vec(),
            },
            header: None,
            static_row: None,
            rows: vec![(Vec::new(), row)],
        }]),
        durable_writes: true,
    }
}

/// User plus system CPU time of the whole process.
fn process_cpu() -> Duration {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

async fn start(id: u128, replica: Arc<dyn Replica>) -> MessagingService {
    let config = MessagingConfig {
        host_id: HostId(uuid_from(id)),
        cluster_name: "bench".to_string(),
        listen_address: "127.0.0.1:0".parse().expect("address"),
        broadcast_address: None,
        generation: 0,
        options: MessagingOptions::default(),
    };
    MessagingService::start(config, replica, Environment::tcp(id as u64))
        .await
        .expect("start")
}

fn uuid_from(n: u128) -> TableId {
    TableId::from_u128(n)
}

/// Sends `count` mutations starting at `first`, `concurrency` in flight.
async fn send(
    remote: &messaging::RemoteReplica,
    first: u64,
    count: u64,
    concurrency: usize,
    value_bytes: usize,
) {
    let mut in_flight = tokio::task::JoinSet::new();
    for k in first..first + count {
        if in_flight.len() >= concurrency {
            in_flight.join_next().await.expect("task").expect("request");
        }
        let remote = remote.clone();
        in_flight.spawn(async move {
            let deadline = Deadline::at(Instant::now() + Duration::from_secs(10));
            remote
                .apply_mutation(mutation(k, value_bytes), deadline)
                .await
                .expect("mutation acknowledged");
        });
    }
    while let Some(done) = in_flight.join_next().await {
        done.expect("request");
    }
}

async fn run(args: Args) {
    let replica: Arc<dyn Replica> = if args.memory_replica {
        let engine = Arc::new(MemoryEngine::new());
        storage::StorageEngine::create_table(&*engine, TABLE).expect("table");
        Arc::new(replica::LocalReplica::new(engine, Durability::Periodic))
    } else {
        Arc::new(NullReplica)
    };
    let a = start(1, Arc::new(NullReplica)).await;
    let b = start(2, replica).await;
    a.set_peer_address(b.host_id(), b.listen_address());
    let remote = a.remote_replica(b.host_id());
    let warmup = (args.messages / 10).max(1);
    send(&remote, 0, warmup, args.concurrency, args.value_bytes).await;

    let cpu_before = process_cpu();
    let started = Instant::now();
    send(
        &remote,
        warmup,
        args.messages,
        args.concurrency,
        args.value_bytes,
    )
    .await;
    let elapsed = started.elapsed();
    let cpu = process_cpu() - cpu_before;

    let metrics = a.metrics();
    let sent = metrics.verb(messaging::Verb::MUTATION).sent;
    println!(
        "messages: {} MUTATION requests (+{warmup} warm-up), {} in flight, {} runtime thread(s), {} replica, {}-byte values",
        args.messages,
        args.concurrency,
        args.threads,
        if args.memory_replica { "memory" } else { "null" },
        args.value_bytes,
    );
    println!(
        "throughput: {:.0} requests/s ({:.2} s)",
        args.messages as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!(
        "cpu: {:.2} us per request and response (process user+system, both services; {:.2} cores busy)",
        cpu.as_secs_f64() * 1e6 / args.messages as f64,
        cpu.as_secs_f64() / elapsed.as_secs_f64()
    );
    println!(
        "wire: {:.0} bytes sent per request frame (header included); {sent} sent in all",
        metrics.bytes_sent as f64 / sent as f64
    );
    a.shutdown().await;
    b.shutdown().await;
}

fn main() {
    let args = parse_args();
    let runtime = if args.threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.threads)
            .enable_all()
            .build()
    }
    .expect("runtime");
    runtime.block_on(run(args));
}
