//! Speculative retry of partition reads, in tokio's paused time: each test runs in virtual
//! time, so thresholds of milliseconds and deadlines of seconds cost nothing and never flake.

use std::collections::BTreeSet;

use schema::{SpeculativeRetry, TableMetadata};

use super::*;

const TABLE: u128 = 1;

/// A keyspace of `replication` whose table (id `TABLE`) speculates by `policy`.
fn keyspace_speculating(
    replication: &[(&str, &str)],
    policy: SpeculativeRetry,
) -> KeyspaceMetadata {
    let mut ks = keyspace_with(replication);
    let mut table = TableMetadata {
        keyspace: "ks".to_string(),
        name: "t".to_string(),
        id: TableId::from_u128(TABLE),
        columns: Vec::new(),
        partition_key_count: 1,
        clustering_count: 0,
        options: Default::default(),
        virtual_table: false,
        next_column_id: 0,
        dropped_columns: BTreeMap::new(),
    };
    table.options.speculative_retry = policy;
    ks.tables.insert("t".to_string(), Arc::new(table));
    ks
}

fn rf3(policy: SpeculativeRetry) -> KeyspaceMetadata {
    keyspace_speculating(
        &[
            ("class", "org.apache.cassandra.locator.SimpleStrategy"),
            ("replication_factor", "3"),
        ],
        policy,
    )
}

/// A read of token 150: its replicas are nodes 2 and 3 (dc1) and 4 (dc2), in that order of
/// proximity from node 1, so at QUORUM node 2 gets the data request, node 3 the digest
/// request, and node 4 is the one a speculation goes to.
fn read_150() -> ReadCommand {
    ReadCommand::Partition {
        table: TableId::from_u128(TABLE),
        key: update(150).key,
        slice: ClusteringSlice::all(),
        max_rows: 10,
        resume: None,
    }
}

fn table_stats(coordinator: &Coordinator) -> TableStatsSnapshot {
    coordinator
        .stats()
        .table_snapshot(TableId::from_u128(TABLE))
        .expect("the table was read")
}

fn fixed(ms: u64) -> SpeculativeRetry {
    SpeculativeRetry::Fixed { ms }
}

#[tokio::test(start_paused = true)]
async fn a_slow_digest_replica_is_replaced_by_a_digest_from_the_next_after_the_threshold() {
    let (fakes, coordinator) = four_fakes();
    fakes[2].stall();
    let started = Instant::now();
    coordinator
        .read(
            &rf3(fixed(10)),
            read_150(),
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect("nodes 2 and 4 answer");
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(10),
        "at the threshold"
    );
    assert_eq!(fakes[1].requests(), vec![Request::Read]);
    assert_eq!(fakes[2].requests(), vec![Request::Digest]);
    assert_eq!(
        fakes[3].requests(),
        vec![Request::Digest],
        "the data had come: a digest"
    );
    let stats = table_stats(&coordinator);
    assert_eq!(stats.speculative_retries, 1);
    assert_eq!(stats.speculative_failed_retries, 0);
}

#[tokio::test(start_paused = true)]
async fn a_slow_data_replica_is_replaced_by_a_data_request_to_the_next() {
    let (fakes, coordinator) = four_fakes();
    fakes[1].stall();
    coordinator
        .read(
            &rf3(fixed(10)),
            read_150(),
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect("nodes 3 and 4 answer");
    assert_eq!(
        fakes[3].requests(),
        vec![Request::Read],
        "no data yet: data"
    );
    assert_eq!(table_stats(&coordinator).speculative_retries, 1);
}

#[tokio::test(start_paused = true)]
async fn replicas_that_answer_before_the_threshold_are_not_speculated_on() {
    let (fakes, coordinator) = four_fakes();
    fakes[1].delay(5);
    fakes[2].delay(9);
    coordinator
        .read(
            &rf3(fixed(10)),
            read_150(),
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect("read");
    assert_eq!(fakes[3].requests(), vec![]);
    assert_eq!(table_stats(&coordinator).speculative_retries, 0);
}

#[tokio::test(start_paused = true)]
async fn one_speculates_too_and_the_first_data_wins() {
    let (fakes, coordinator) = four_fakes();
    fakes[1].delay(1_000);
    let started = Instant::now();
    coordinator
        .read(&rf3(fixed(10)), read_150(), ConsistencyLevel::One, later())
        .await
        .expect("node 3 answers first");
    assert_eq!(started.elapsed(), Duration::from_millis(10));
    assert_eq!(fakes[2].requests(), vec![Request::Read]);
    assert_eq!(fakes[3].requests(), vec![], "one extra replica, no more");
}

#[tokio::test(start_paused = true)]
async fn always_sends_to_one_more_replica_at_once_with_two_data_requests() {
    let (fakes, coordinator) = four_fakes();
    coordinator
        .read(
            &rf3(SpeculativeRetry::Always),
            read_150(),
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect("read");
    assert_eq!(fakes[1].requests(), vec![Request::Read]);
    assert_eq!(fakes[2].requests(), vec![Request::Read]);
    assert_eq!(fakes[3].requests(), vec![Request::Digest]);
    assert_eq!(table_stats(&coordinator).speculative_retries, 1);
}

#[tokio::test(start_paused = true)]
async fn never_waits_for_the_contacted_replicas_until_the_timeout() {
    let (fakes, coordinator) = four_fakes();
    fakes[2].stall();
    let deadline = Deadline::at(Instant::now() + Duration::from_millis(500));
    let e = coordinator
        .read(
            &rf3(SpeculativeRetry::Never),
            read_150(),
            ConsistencyLevel::Quorum,
            deadline,
        )
        .await
        .expect_err("node 3 never answers");
    assert!(
        matches!(
            e,
            CoordinatorError::ReadTimeout {
                received: 1,
                block_for: 2,
                data_present: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(deadline.passed());
    assert_eq!(fakes[3].requests(), vec![]);
    assert_eq!(table_stats(&coordinator).speculative_retries, 0);
    assert_eq!(coordinator.stats().timeouts(RequestKind::Read), 1);
}

#[tokio::test(start_paused = true)]
async fn a_speculation_that_does_not_help_is_a_failed_retry_and_a_timeout_by_the_deadline() {
    let (fakes, coordinator) = four_fakes();
    fakes[2].stall();
    fakes[3].stall();
    let deadline = Deadline::at(Instant::now() + Duration::from_millis(500));
    let e = coordinator
        .read(
            &rf3(fixed(10)),
            read_150(),
            ConsistencyLevel::Quorum,
            deadline,
        )
        .await
        .expect_err("nodes 3 and 4 never answer");
    assert!(
        matches!(e, CoordinatorError::ReadTimeout { received: 1, .. }),
        "{e:?}"
    );
    assert_eq!(
        Instant::now(),
        deadline.instant(),
        "answered at the deadline, not later"
    );
    let stats = table_stats(&coordinator);
    assert_eq!(stats.speculative_retries, 1);
    assert_eq!(stats.speculative_failed_retries, 1);
}

#[tokio::test(start_paused = true)]
async fn a_threshold_past_the_deadline_does_not_speculate() {
    let (fakes, coordinator) = four_fakes();
    fakes[2].stall();
    let deadline = Deadline::at(Instant::now() + Duration::from_millis(50));
    coordinator
        .read(
            &rf3(fixed(100)),
            read_150(),
            ConsistencyLevel::Quorum,
            deadline,
        )
        .await
        .expect_err("node 3 never answers");
    assert_eq!(fakes[3].requests(), vec![]);
}

#[tokio::test(start_paused = true)]
async fn a_percentile_threshold_is_half_the_read_timeout_until_latencies_are_measured() {
    let (fakes, coordinator) = four_fakes();
    let coordinator = coordinator.with_read_request_timeout(Duration::from_millis(200));
    let ks = rf3(SpeculativeRetry::Percentile(99.0));
    fakes[2].stall();
    let started = Instant::now();
    coordinator
        .read(&ks, read_150(), ConsistencyLevel::Quorum, later())
        .await
        .expect("speculated");
    assert_eq!(started.elapsed(), Duration::from_millis(100));
    // Fast reads (answered at once) make the 99th percentile tiny: the next read with a
    // stalled replica speculates almost at once.
    fakes[2]
        .stalled
        .store(false, std::sync::atomic::Ordering::Relaxed);
    for _ in 0..200 {
        coordinator
            .read(&ks, read_150(), ConsistencyLevel::Quorum, later())
            .await
            .expect("read");
    }
    tokio::time::advance(Duration::from_secs(5)).await; // the threshold's update interval
    fakes[2].stall();
    let started = Instant::now();
    coordinator
        .read(&ks, read_150(), ConsistencyLevel::Quorum, later())
        .await
        .expect("speculated");
    // (tokio's timer wheel has a resolution of a millisecond)
    assert!(
        started.elapsed() <= Duration::from_millis(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(table_stats(&coordinator).speculative_retries, 2);
    assert!(table_stats(&coordinator).read_latency_p99.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_mismatch_after_a_speculation_repairs_the_replicas_that_answered() {
    let (fakes, coordinator) = four_fakes();
    let ks = rf3(fixed(10));
    // Node 2 has a row node 4 lacks; node 3 is stalled.
    coordinator
        .write(
            &ks,
            vec![row_update(150, 1, 10)],
            ConsistencyLevel::One,
            WriteType::Simple,
            later(),
        )
        .await
        .expect("written");
    fakes[3].partitions.lock().expect("lock").clear();
    fakes[2].stall();
    for fake in &fakes {
        fake.log.lock().expect("lock").clear();
    }
    let response = coordinator
        .read(&ks, read_150(), ConsistencyLevel::Quorum, later())
        .await
        .expect("repaired read");
    let ReadResponse::Partition(page) = response else {
        panic!("a partition")
    };
    assert_eq!(page.data.rows.len(), 1);
    assert_eq!(
        fakes[3].requests(),
        vec![Request::Digest, Request::Read, Request::Apply(vec![150])],
        "the extra replica's digest differed: its data was read and repaired"
    );
    assert_eq!(
        fakes[2].requests(),
        vec![Request::Digest],
        "the stalled replica is not waited for again"
    );
}

/// Four fakes where some endpoints are down.
struct SomeDown(Fakes, BTreeSet<u128>);

impl Endpoints for SomeDown {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        self.0.replica(endpoint)
    }
    fn is_alive(&self, endpoint: HostId) -> bool {
        !self.1.contains(&endpoint.0.as_u128())
    }
}

fn four_fakes_with_down(down: &[u128]) -> (Vec<Arc<Fake>>, Coordinator) {
    let (fakes, coordinator) = four_fakes();
    let endpoints = Fakes(
        fakes
            .iter()
            .enumerate()
            .map(|(i, f)| (HostId(uuid::Uuid::from_u128(i as u128 + 1)), f.clone()))
            .collect(),
    );
    let coordinator = Coordinator::for_cluster(
        coordinator.ring().clone(),
        Arc::new(SomeDown(endpoints, down.iter().copied().collect())),
    );
    (fakes, coordinator)
}

#[tokio::test(start_paused = true)]
async fn no_live_replica_to_speculate_to_is_counted_as_insufficient() {
    let (fakes, coordinator) = four_fakes_with_down(&[4]);
    fakes[2].stall();
    let deadline = Deadline::at(Instant::now() + Duration::from_millis(100));
    coordinator
        .read(
            &rf3(fixed(10)),
            read_150(),
            ConsistencyLevel::Quorum,
            deadline,
        )
        .await
        .expect_err("node 3 never answers, node 4 is down");
    let stats = table_stats(&coordinator);
    assert_eq!(stats.speculative_retries, 0);
    assert_eq!(stats.speculative_insufficient_replicas, 1);
}

#[tokio::test(start_paused = true)]
async fn local_levels_speculate_within_the_data_centre_and_each_quorum_never() {
    let (fakes, coordinator) = four_fakes();
    let ks = keyspace_speculating(
        &[
            (
                "class",
                "org.apache.cassandra.locator.NetworkTopologyStrategy",
            ),
            ("dc1", "2"),
            ("dc2", "1"),
        ],
        fixed(10),
    );
    fakes[2].stall();
    let deadline = || Deadline::at(Instant::now() + Duration::from_millis(100));
    // Token 150: nodes 2 and 3 in dc1, node 4 in dc2. LOCAL_QUORUM contacts both dc1
    // replicas: there is no third in dc1.
    coordinator
        .read(&ks, read_150(), ConsistencyLevel::LocalQuorum, deadline())
        .await
        .expect_err("node 3 never answers");
    assert_eq!(fakes[3].requests(), vec![], "dc2 is not asked");
    assert_eq!(
        table_stats(&coordinator).speculative_insufficient_replicas,
        1
    );
    // EACH_QUORUM: the quorums of dc1 and dc2, and never a speculation.
    coordinator
        .read(&ks, read_150(), ConsistencyLevel::EachQuorum, deadline())
        .await
        .expect_err("node 3 never answers");
    let stats = table_stats(&coordinator);
    assert_eq!(stats.speculative_retries, 0);
    assert_eq!(stats.speculative_insufficient_replicas, 1);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_replica_waits_for_the_speculation_not_the_timeout() {
    // Node 3 answers Unreachable at once; node 4 makes up the quorum at the threshold.
    let (fakes, coordinator) = four_fakes();
    let mut ring_fakes: BTreeMap<HostId, Arc<Fake>> = BTreeMap::new();
    for (i, f) in fakes.iter().enumerate() {
        ring_fakes.insert(HostId(uuid::Uuid::from_u128(i as u128 + 1)), f.clone());
    }
    struct ThirdUnreachable(Fakes);
    impl Endpoints for ThirdUnreachable {
        fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
            if endpoint.0.as_u128() == 3 {
                return Some(Arc::new(Failing(ReplicaError::Unreachable(
                    "no connection".to_string(),
                ))));
            }
            self.0.replica(endpoint)
        }
        fn is_alive(&self, _: HostId) -> bool {
            true
        }
    }
    let coordinator = Coordinator::for_cluster(
        coordinator.ring().clone(),
        Arc::new(ThirdUnreachable(Fakes(ring_fakes))),
    );
    let started = Instant::now();
    coordinator
        .read(
            &rf3(fixed(10)),
            read_150(),
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect("nodes 2 and 4");
    assert_eq!(started.elapsed(), Duration::from_millis(10));
    assert_eq!(fakes[3].requests(), vec![Request::Digest]);
    // Without a replica to speculate to, the same is a timeout at once.
    let e = coordinator
        .read(
            &rf3(SpeculativeRetry::Never),
            read_150(),
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect_err("node 3 unreachable");
    assert!(
        matches!(e, CoordinatorError::ReadTimeout { received: 1, .. }),
        "{e:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn answers_that_are_ready_are_taken_however_late_the_clock_is() {
    // A threshold of zero has passed by the time the first answer is looked at; the second
    // is ready too, so no replica is speculated on.
    let (fakes, coordinator) = four_fakes();
    coordinator
        .read(
            &rf3(fixed(0)),
            read_150(),
            ConsistencyLevel::Quorum,
            later(),
        )
        .await
        .expect("read");
    assert_eq!(fakes[3].requests(), vec![]);
    assert_eq!(table_stats(&coordinator).speculative_retries, 0);
}
