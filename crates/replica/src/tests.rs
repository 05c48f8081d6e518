use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use mutation::{Cell, ClusteringSlice, ColumnData, LivenessInfo, PartitionKey, Row, ScanStart};
use storage::MemoryEngine;

use super::*;

const TABLE: TableId = TableId::from_u128(1);
const MISSING: TableId = TableId::from_u128(2);

fn key(k: u8) -> PartitionKey {
    PartitionKey {
        token: i64::from(k),
        key: vec![k],
    }
}

/// A row `c` of partition `k` whose one column holds `value`, written at `timestamp`.
fn update(table: TableId, k: u8, c: u8, value: &[u8], timestamp: i64) -> PartitionUpdate {
    let row = Row {
        liveness: Some(LivenessInfo {
            timestamp,
            expiry: None,
        }),
        deletion: None,
        columns: vec![ColumnData::Simple {
            id: 1,
            cell: Cell::live(timestamp, value.to_vec()),
        }],
    };
    PartitionUpdate {
        table,
        key: key(k),
        header: None,
        static_row: None,
        rows: vec![(vec![c], row)],
    }
}

fn mutation(updates: Vec<PartitionUpdate>, durable_writes: bool) -> Mutation {
    Mutation {
        updates: Arc::new(updates),
        durable_writes,
    }
}

fn write(table: TableId, k: u8) -> Mutation {
    mutation(vec![update(table, k, 0, b"v", 1)], true)
}

fn later() -> Deadline {
    Deadline::at(Instant::now() + Duration::from_secs(60))
}

fn passed() -> Deadline {
    Deadline::at(Instant::now())
}

fn stored(engine: &MemoryEngine, k: u8) -> bool {
    let page = engine
        .read_partition(TABLE, &key(k), &ClusteringSlice::all(), 10, None)
        .expect("read");
    !page.data.rows.is_empty()
}

fn replica_with(commit_log: Durability) -> (Arc<MemoryEngine>, LocalReplica) {
    let engine = Arc::new(MemoryEngine::new());
    engine.create_table(TABLE).expect("create");
    (engine.clone(), LocalReplica::new(engine, commit_log))
}

fn replica() -> (Arc<MemoryEngine>, LocalReplica) {
    replica_with(Durability::Periodic)
}

fn queued(replica: &LocalReplica, durability: Durability) -> usize {
    replica.groups[group_index(durability)]
        .queued
        .lock()
        .expect("lock")
        .len()
}

fn point_read(k: u8) -> ReadCommand {
    ReadCommand::Partition {
        table: TABLE,
        key: key(k),
        slice: ClusteringSlice::all(),
        max_rows: 100,
        resume: None,
    }
}

fn range_read() -> ReadCommand {
    ReadCommand::Range {
        table: TABLE,
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 100,
    }
}

#[tokio::test]
async fn writes_started_together_wait_in_one_group() {
    let (engine, replica) = replica();
    let mut a = replica.apply_mutation(write(TABLE, 1), later());
    let mut b = replica.apply_mutation(write(TABLE, 2), later());
    // Started in one poll, before the group's task could run: both wait in one group.
    std::future::poll_fn(|cx| {
        assert!(a.as_mut().poll(cx).is_pending());
        assert!(b.as_mut().poll(cx).is_pending());
        Poll::Ready(())
    })
    .await;
    assert_eq!(queued(&replica, Durability::Periodic), 2);
    let (a, b) = tokio::join!(a, b);
    a.expect("a");
    b.expect("b");
    assert!(stored(&engine, 1) && stored(&engine, 2));
}

#[tokio::test]
async fn a_dropped_request_does_not_strand_the_mutations_of_its_group() {
    let (engine, replica) = replica();
    let mut first = replica.apply_mutation(write(TABLE, 1), later());
    let mut second = replica.apply_mutation(write(TABLE, 2), later());
    std::future::poll_fn(|cx| {
        assert!(first.as_mut().poll(cx).is_pending());
        assert!(second.as_mut().poll(cx).is_pending());
        Poll::Ready(())
    })
    .await;
    // The request whose mutation started the group goes away (its client disconnected).
    drop(first);
    tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the group's write does not depend on the dropped request")
        .expect("second");
    // Its mutation was handed over, so it is applied too.
    assert!(stored(&engine, 1) && stored(&engine, 2));
}

#[tokio::test]
async fn a_mutation_takes_this_nodes_commit_log_mode_unless_its_keyspace_is_not_durable() {
    // The durability is the replica's: the coordinator sends only the keyspace's
    // durable_writes. Each lands in the group of the durability it was given.
    for (commit_log, durable_writes, expected) in [
        (Durability::Periodic, true, Durability::Periodic),
        (Durability::Batch, true, Durability::Batch),
        (Durability::Batch, false, Durability::None),
        (Durability::Periodic, false, Durability::None),
    ] {
        let (engine, replica) = replica_with(commit_log);
        let mut apply = replica.apply_mutation(
            mutation(vec![update(TABLE, 1, 0, b"v", 1)], durable_writes),
            later(),
        );
        std::future::poll_fn(|cx| {
            assert!(apply.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        assert_eq!(
            queued(&replica, expected),
            1,
            "{commit_log:?}, durable_writes {durable_writes}"
        );
        apply.await.expect("apply");
        assert!(stored(&engine, 1));
    }
}

#[tokio::test]
async fn an_error_in_a_group_reaches_only_its_write() {
    let (engine, replica) = replica();
    let (a, bad, c) = tokio::join!(
        replica.apply_mutation(write(TABLE, 1), later()),
        replica.apply_mutation(write(MISSING, 2), later()),
        replica.apply_mutation(write(TABLE, 3), later()),
    );
    a.expect("a");
    c.expect("c");
    assert_eq!(bad, Err(ReplicaError::UnknownTable(MISSING)));
    assert!(stored(&engine, 1) && stored(&engine, 3));
}

#[tokio::test]
async fn a_storage_failure_keeps_storages_words() {
    let (_engine, replica) = replica();
    let oversized = PartitionUpdate {
        key: PartitionKey {
            token: 0,
            key: vec![0; mutation::MAX_PARTITION_KEY_BYTES + 1],
        },
        ..update(TABLE, 0, 0, b"v", 1)
    };
    let e = replica
        .apply_mutation(mutation(vec![oversized], true), later())
        .await
        .expect_err("oversized key");
    let ReplicaError::Storage(message) = e else {
        panic!("{e:?}");
    };
    assert!(
        message.starts_with("invalid storage request: "),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_of_every_durability_all_complete() {
    for commit_log in [Durability::Periodic, Durability::Batch] {
        let (engine, replica) = replica_with(commit_log);
        let replica = Arc::new(replica);
        let mut tasks = Vec::new();
        for k in 0..200u8 {
            let replica = replica.clone();
            let m = mutation(vec![update(TABLE, k, 0, b"v", 1)], k % 2 == 0);
            tasks.push(tokio::spawn(async move {
                replica.apply_mutation(m, later()).await
            }));
        }
        for t in tasks {
            t.await.expect("task").expect("write");
        }
        assert!((0..200u8).all(|k| stored(&engine, k)));
    }
}

#[tokio::test]
async fn a_local_mutation_past_its_deadline_is_still_applied() {
    // As Cassandra's LocalMutationRunnable: the client got (or gets) a timeout, and a timed
    // out write may be applied.
    let (engine, replica) = replica();
    replica
        .apply_mutation(write(TABLE, 1), passed())
        .await
        .expect("applied");
    assert!(stored(&engine, 1));
}

#[tokio::test]
async fn a_local_read_queued_past_its_deadline_is_not_started() {
    let (_engine, replica) = replica();
    // An unknown table would be an error if the read ran; past the deadline it does not.
    let command = ReadCommand::Range {
        table: MISSING,
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 1,
    };
    let e = replica.read(command, passed()).await.expect_err("too late");
    assert_eq!(e, ReplicaError::DeadlinePassed);
}

/// Two replicas holding the same data, written in a different order and split differently,
/// and a third holding the same but one cell.
async fn three_replicas() -> [LocalReplica; 3] {
    let (_, a) = replica();
    let (_, b) = replica();
    let (_, c) = replica();
    let rows = [
        update(TABLE, 1, 1, b"x", 10),
        update(TABLE, 1, 2, b"y", 10),
        update(TABLE, 2, 1, b"z", 10),
    ];
    a.apply_mutation(mutation(rows.to_vec(), true), later())
        .await
        .expect("a");
    for row in rows.iter().rev() {
        b.apply_mutation(mutation(vec![row.clone()], true), later())
            .await
            .expect("b");
    }
    // An older version first: reconciliation keeps the newer one, as on the others.
    b.apply_mutation(
        mutation(vec![update(TABLE, 1, 2, b"old", 9)], true),
        later(),
    )
    .await
    .expect("b old");
    let mut differing = rows.to_vec();
    differing[1] = update(TABLE, 1, 2, b"y", 11);
    c.apply_mutation(mutation(differing, true), later())
        .await
        .expect("c");
    [a, b, c]
}

#[tokio::test]
async fn equal_data_has_equal_digests_and_different_data_different_ones() {
    let [a, b, c] = three_replicas().await;
    for command in [point_read(1), range_read()] {
        let digest = |r: &LocalReplica| r.digest(command.clone(), later());
        let (da, db, dc) = tokio::join!(digest(&a), digest(&b), digest(&c));
        let (da, db, dc) = (da.expect("a"), db.expect("b"), dc.expect("c"));
        assert_eq!(da, db, "{command:?}");
        assert_ne!(da, dc, "{command:?}");
        // A digest request answers the digest of what the data request answers, so the
        // coordinator can compare a data response with digests.
        let data = a.read(command.clone(), later()).await.expect("read");
        assert_eq!(read_digest(&data), da);
    }
    // A partition where the replicas agree.
    let (da, dc) = tokio::join!(
        a.digest(point_read(2), later()),
        c.digest(point_read(2), later())
    );
    assert_eq!(da.expect("a"), dc.expect("c"));
}

#[tokio::test]
async fn a_digest_past_its_deadline_is_not_started() {
    let (_engine, replica) = replica();
    let command = ReadCommand::Range {
        table: MISSING,
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 1,
    };
    let e = replica
        .digest(command, passed())
        .await
        .expect_err("too late");
    assert_eq!(e, ReplicaError::DeadlinePassed);
}

#[tokio::test]
async fn a_digest_of_an_unknown_table_is_its_error() {
    let (_engine, replica) = replica();
    let command = ReadCommand::Range {
        table: MISSING,
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 1,
    };
    let e = replica.digest(command, later()).await.expect_err("unknown");
    assert_eq!(e, ReplicaError::UnknownTable(MISSING));
}

#[tokio::test]
async fn truncate_removes_every_row_and_keeps_the_table() {
    let (engine, replica) = replica();
    for k in 1..=3 {
        replica
            .apply_mutation(write(TABLE, k), later())
            .await
            .expect("write");
    }
    replica.truncate(TABLE, later()).await.expect("truncate");
    assert!((1..=3).all(|k| !stored(&engine, k)));
    // The table is still there: it takes writes.
    replica
        .apply_mutation(write(TABLE, 4), later())
        .await
        .expect("write after truncate");
    assert!(stored(&engine, 4));
    assert_eq!(
        replica.truncate(MISSING, later()).await,
        Err(ReplicaError::UnknownTable(MISSING))
    );
}

#[tokio::test]
async fn a_truncate_past_its_deadline_is_not_started() {
    let (engine, replica) = replica();
    replica
        .apply_mutation(write(TABLE, 1), later())
        .await
        .expect("write");
    assert_eq!(
        replica.truncate(TABLE, passed()).await,
        Err(ReplicaError::DeadlinePassed)
    );
    assert!(stored(&engine, 1), "the data is still there");
}
