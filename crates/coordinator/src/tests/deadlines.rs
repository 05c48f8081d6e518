//! No request outlives its deadline: for every path of the coordinator (write, read, digest
//! reads, read repair, range scans, truncate, late acknowledgements), a replica that never
//! answers or answers after the deadline gets the client its timeout at the deadline, not
//! later. In tokio's paused time, so the waits cost nothing and the instants are exact.

use std::sync::atomic::Ordering::Relaxed;

use super::*;

/// Asserts the request was answered at `deadline` (within the timer's millisecond), neither
/// before (it waited for the replicas) nor after.
fn assert_answered_at(deadline: Deadline) {
    let now = Instant::now();
    assert!(now >= deadline.instant(), "answered before the deadline");
    assert!(
        now - deadline.instant() <= Duration::from_millis(1),
        "answered {:?} after the deadline",
        now - deadline.instant()
    );
}

fn soon() -> Deadline {
    Deadline::at(Instant::now() + Duration::from_millis(100))
}

fn rf3() -> KeyspaceMetadata {
    keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "3"),
    ])
}

/// A partition read of token 150 (nodes 2, 3 and 4 of `four_fakes`, in that order).
fn read_150() -> ReadCommand {
    ReadCommand::Partition {
        table: TableId::from_u128(1),
        key: update(150).key,
        slice: ClusteringSlice::all(),
        max_rows: 10,
        resume: None,
    }
}

fn scan() -> ReadCommand {
    ReadCommand::Range {
        table: TableId::from_u128(1),
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 100,
    }
}

#[tokio::test(start_paused = true)]
async fn a_write_to_a_silent_or_late_replica_times_out_at_its_deadline_and_is_hinted() {
    for late_ms in [None, Some(1_000)] {
        let fake = Arc::new(Fake::default());
        match late_ms {
            None => fake.stall(),
            Some(ms) => fake.delay(ms),
        }
        let hints = Arc::new(RecordedHints::default());
        let coordinator = coordinator(fake.clone()).with_hinted_handoff(hints.clone());
        let deadline = soon();
        let e = coordinator
            .write(
                &keyspace(),
                vec![update(1)],
                ConsistencyLevel::One,
                WriteType::Simple,
                deadline,
            )
            .await
            .expect_err("no acknowledgement in time");
        assert!(
            matches!(e, CoordinatorError::WriteTimeout { received: 0, .. }),
            "{e:?}"
        );
        assert_answered_at(deadline);
        assert_eq!(hints.0.lock().expect("lock")[0].1, MissedWrite::TimedOut);
    }
}

#[tokio::test(start_paused = true)]
async fn a_write_at_all_with_one_silent_replica_times_out_at_its_deadline() {
    let (fakes, coordinator) = four_fakes();
    fakes[2].stall();
    let deadline = soon();
    let e = coordinator
        .write(
            &rf3(),
            vec![update(150)],
            ConsistencyLevel::All,
            WriteType::Simple,
            deadline,
        )
        .await
        .expect_err("node 3 is silent");
    assert!(
        matches!(
            e,
            CoordinatorError::WriteTimeout {
                received: 2,
                block_for: 3,
                ..
            }
        ),
        "{e:?}"
    );
    assert_answered_at(deadline);
    assert_eq!(coordinator.stats().timeouts(RequestKind::Write), 1);
    assert_eq!(
        coordinator.stats().replica_timeouts(ReplicaVerb::Mutation),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn late_acknowledgements_are_awaited_until_the_deadline_and_no_longer() {
    // QUORUM is met at once by nodes 2 and 4; node 3 acknowledges 50 ms later (in time: no
    // hint), then in a second write 500 ms later (past the deadline: a hint at the deadline).
    let (fakes, coordinator) = four_fakes();
    let hints = Arc::new(RecordedHints::default());
    let coordinator = coordinator.with_hinted_handoff(hints.clone());
    for (delay_ms, hinted) in [(50, false), (500, true)] {
        fakes[2].delay(delay_ms);
        let started = Instant::now();
        let deadline = soon();
        coordinator
            .write(
                &rf3(),
                vec![update(150)],
                ConsistencyLevel::Quorum,
                WriteType::Simple,
                deadline,
            )
            .await
            .expect("two of three at once");
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "not waiting for the third"
        );
        coordinator.wait_for_late_acks().await;
        if hinted {
            assert_answered_at(deadline);
        } else {
            assert_eq!(started.elapsed(), Duration::from_millis(delay_ms));
        }
        let recorded = hints.0.lock().expect("lock");
        assert_eq!(recorded.len(), usize::from(hinted), "{delay_ms} ms");
        if hinted {
            assert_eq!(recorded[0].1, MissedWrite::TimedOut);
        }
    }
    assert_eq!(coordinator.stats().timeouts(RequestKind::Write), 0);
    assert_eq!(
        coordinator.stats().replica_timeouts(ReplicaVerb::Mutation),
        1,
        "the late one"
    );
}

#[tokio::test(start_paused = true)]
async fn a_read_from_a_silent_or_late_replica_times_out_at_its_deadline() {
    for late_ms in [None, Some(1_000)] {
        let fake = Arc::new(Fake::default());
        match late_ms {
            None => fake.stall(),
            Some(ms) => fake.delay(ms),
        }
        let coordinator = coordinator(fake);
        let deadline = soon();
        let e = coordinator
            .read(&keyspace(), read(), ConsistencyLevel::One, deadline)
            .await
            .expect_err("no answer in time");
        assert!(
            matches!(
                e,
                CoordinatorError::ReadTimeout {
                    received: 0,
                    data_present: false,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_answered_at(deadline);
        assert_eq!(coordinator.stats().timeouts(RequestKind::Read), 1);
        assert_eq!(coordinator.stats().replica_timeouts(ReplicaVerb::Read), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn a_read_whose_digest_comes_late_times_out_at_its_deadline_with_the_data() {
    let (fakes, coordinator) = four_fakes();
    fakes[2].delay(1_000);
    let deadline = soon();
    // No table in the keyspace: the default 99p, unmeasured, is half of 5 s: past the deadline.
    let e = coordinator
        .read(&rf3(), read_150(), ConsistencyLevel::Quorum, deadline)
        .await
        .expect_err("node 3's digest is late");
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
    assert_answered_at(deadline);
    assert_eq!(
        fakes[3].requests(),
        vec![],
        "no speculation past the deadline"
    );
    assert_eq!(coordinator.stats().replica_timeouts(ReplicaVerb::Digest), 1);
    assert_eq!(coordinator.stats().replica_timeouts(ReplicaVerb::Read), 0);
}

/// Nodes 2 to 4 of `four_fakes` with node 3's repair acknowledgements lost.
fn with_stale_node_3(fakes: &[Arc<Fake>]) {
    fakes[2].partitions.lock().expect("lock").clear();
    fakes[2].stalled_writes.store(true, Relaxed);
}

#[tokio::test(start_paused = true)]
async fn a_read_repair_that_is_not_acknowledged_times_out_at_the_deadline() {
    let (fakes, coordinator) = four_fakes();
    coordinator
        .write(
            &rf3(),
            vec![row_update(150, 1, 10)],
            ConsistencyLevel::All,
            WriteType::Simple,
            later(),
        )
        .await
        .expect("written");
    with_stale_node_3(&fakes);
    let deadline = soon();
    let e = coordinator
        .read(&rf3(), read_150(), ConsistencyLevel::Quorum, deadline)
        .await
        .expect_err("node 3 never acknowledges its repair");
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
    assert_answered_at(deadline);
    assert_eq!(
        fakes[2].requests(),
        vec![
            Request::Apply(vec![150]),
            Request::Digest,
            Request::Read,
            Request::Apply(vec![150])
        ]
    );
}

/// Answers digests as its fake does, never a data read: a replica that goes silent between
/// a digest mismatch and the data reads that follow it.
struct SilentOnData(Arc<Fake>);

impl Replica for SilentOnData {
    fn apply_mutation(&self, m: Mutation, d: Deadline) -> ReplicaFuture<()> {
        self.0.apply_mutation(m, d)
    }
    fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(std::future::pending())
    }
    fn digest(&self, c: ReadCommand, d: Deadline) -> ReplicaFuture<ReadDigest> {
        self.0.digest(c, d)
    }
    fn truncate(&self, t: TableId, d: Deadline) -> ReplicaFuture<()> {
        self.0.truncate(t, d)
    }
}

struct ThirdSilentOnData(Fakes);

impl Endpoints for ThirdSilentOnData {
    fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        if endpoint.0.as_u128() == 3 {
            return Some(Arc::new(SilentOnData(self.0 .0.get(&endpoint)?.clone())));
        }
        self.0.replica(endpoint)
    }
    fn is_alive(&self, _: HostId) -> bool {
        true
    }
}

#[tokio::test(start_paused = true)]
async fn a_data_read_after_a_mismatch_that_is_not_answered_times_out_at_the_deadline() {
    let (fakes, coordinator) = four_fakes();
    coordinator
        .write(
            &rf3(),
            vec![row_update(150, 1, 10)],
            ConsistencyLevel::All,
            WriteType::Simple,
            later(),
        )
        .await
        .expect("written");
    fakes[2].partitions.lock().expect("lock").clear();
    let endpoints = Fakes(
        fakes
            .iter()
            .enumerate()
            .map(|(i, f)| (HostId(uuid::Uuid::from_u128(i as u128 + 1)), f.clone()))
            .collect(),
    );
    let coordinator = Coordinator::for_cluster(
        coordinator.ring().clone(),
        Arc::new(ThirdSilentOnData(endpoints)),
    );
    let deadline = soon();
    let e = coordinator
        .read(&rf3(), read_150(), ConsistencyLevel::Quorum, deadline)
        .await
        .expect_err("node 3 answers its digest, then no data");
    assert!(
        matches!(
            e,
            CoordinatorError::ReadTimeout {
                received: 1,
                data_present: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert_answered_at(deadline);
}

#[tokio::test(start_paused = true)]
async fn a_range_scan_with_a_silent_or_late_replica_times_out_at_its_deadline() {
    for late_ms in [None, Some(1_000)] {
        let (fakes, coordinator) = four_fakes();
        match late_ms {
            None => fakes[2].stall(),
            Some(ms) => fakes[2].delay(ms),
        }
        let deadline = soon();
        let e = coordinator
            .read(&rf3(), scan(), ConsistencyLevel::All, deadline)
            .await
            .expect_err("node 3 is silent");
        assert!(
            matches!(e, CoordinatorError::ReadTimeout { block_for: 3, .. }),
            "{e:?}"
        );
        assert_answered_at(deadline);
        assert_eq!(coordinator.stats().timeouts(RequestKind::RangeRead), 1);
        assert_eq!(coordinator.stats().timeouts(RequestKind::Read), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_truncate_with_a_silent_or_late_node_times_out_at_its_deadline() {
    for late_ms in [None, Some(1_000)] {
        let (fakes, coordinator) = four_fakes();
        match late_ms {
            None => fakes[3].stall(),
            Some(ms) => fakes[3].delay(ms),
        }
        let deadline = soon();
        let e = coordinator
            .truncate(&rf3(), TableId::from_u128(1), deadline)
            .await
            .expect_err("node 4 is silent");
        assert!(
            matches!(e, CoordinatorError::TruncateTimeout { received: 3 }),
            "{e:?}"
        );
        assert_answered_at(deadline);
        assert_eq!(coordinator.stats().timeouts(RequestKind::Truncate), 1);
        assert_eq!(
            coordinator.stats().replica_timeouts(ReplicaVerb::Truncate),
            1
        );
    }
}

#[tokio::test(start_paused = true)]
async fn unavailables_are_counted_by_kind() {
    let (_, coordinator) = four_fakes_one_down();
    let ks = keyspace_with(&[
        ("class", "org.apache.cassandra.locator.SimpleStrategy"),
        ("replication_factor", "4"),
    ]);
    let e = coordinator
        .read(&ks, read_150(), ConsistencyLevel::All, soon())
        .await
        .expect_err("node 4 is down");
    assert!(matches!(e, CoordinatorError::Unavailable { .. }), "{e:?}");
    coordinator
        .write(
            &ks,
            vec![update(150)],
            ConsistencyLevel::All,
            WriteType::Simple,
            soon(),
        )
        .await
        .expect_err("node 4 is down");
    let stats = coordinator.stats();
    assert_eq!(stats.unavailables(RequestKind::Read), 1);
    assert_eq!(stats.unavailables(RequestKind::Write), 1);
    assert_eq!(stats.timeouts(RequestKind::Read), 0);
    let table = stats
        .table_snapshot(TableId::from_u128(1))
        .expect("read once");
    assert_eq!(table.read_latency_p99, None, "an unavailable is no latency");
}

/// `four_fakes` with node 4 down.
fn four_fakes_one_down() -> (Vec<Arc<Fake>>, Coordinator) {
    struct Down4(Fakes);
    impl Endpoints for Down4 {
        fn replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
            self.0.replica(endpoint)
        }
        fn is_alive(&self, endpoint: HostId) -> bool {
            endpoint.0.as_u128() != 4
        }
    }
    let (fakes, coordinator) = four_fakes();
    let endpoints = Fakes(
        fakes
            .iter()
            .enumerate()
            .map(|(i, f)| (HostId(uuid::Uuid::from_u128(i as u128 + 1)), f.clone()))
            .collect(),
    );
    let coordinator =
        Coordinator::for_cluster(coordinator.ring().clone(), Arc::new(Down4(endpoints)));
    (fakes, coordinator)
}
