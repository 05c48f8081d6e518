//! The replica interface and the local replica.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use storage::{
    ClusteringSlice, Durability, PartitionKey, PartitionPage, PartitionUpdate, ScanPage, ScanStart,
    StorageEngine, StorageError, TableId,
};

use tokio::sync::oneshot;

use crate::{CoordinatorError, Deadline};

pub type ReplicaFuture<T> = Pin<Box<dyn Future<Output = Result<T, CoordinatorError>> + Send>>;

/// A read as a replica executes it.
#[derive(Debug, Clone)]
pub enum ReadCommand {
    /// One partition, a clustering slice of it, resumable.
    Partition {
        table: TableId,
        key: PartitionKey,
        slice: ClusteringSlice,
        max_rows: usize,
        resume: Option<Vec<u8>>,
    },
    /// Partitions in token order from `start` up to `end_token` (inclusive).
    Range {
        table: TableId,
        start: ScanStart,
        end_token: Option<i64>,
        max_rows: usize,
    },
}

#[derive(Debug)]
pub enum ReadResponse {
    Partition(PartitionPage),
    Range(ScanPage),
}

/// Something that stores a share of the ring's data: this node, or (later) a peer over the
/// network. Requests are owned values so they can be serialised for a remote replica.
pub trait Replica: Send + Sync + 'static {
    fn apply(
        &self,
        updates: Arc<Vec<PartitionUpdate>>,
        durability: Durability,
    ) -> ReplicaFuture<()>;
    /// Reads; a replica need not start a read whose `deadline` has passed (it then answers
    /// `DeadlinePassed`).
    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse>;
    /// Removes every row of `table` (TRUNCATE). `deadline` is the coordinator's; a replica
    /// truncates even once it has passed (as a write, a truncate answered with a timeout may
    /// still be applied).
    fn truncate(&self, table: TableId, deadline: Deadline) -> ReplicaFuture<()>;
}

/// This node's storage as a replica. Storage calls can block (write stalls, commit log syncs,
/// disk reads), so they never wait on a runtime worker: each is first tried without waiting
/// (`try_apply` or `try_apply_group`, `try_read_partition`: memtables and block cache only, no
/// sync, no stall), and only if that would block does it move to tokio's blocking pool. Most requests on
/// a warm node so skip the hop to a blocking thread and back, which cost more CPU than the read.
///
/// Writes are grouped (group commit): a write joins the group of writes waiting for their
/// durability, and the group's first write spawns the task that writes them all as one storage
/// write, then completes each. That task runs once the submitting task yields, so a
/// connection's pipelined writes (see `cql-server`), and other workers' meanwhile, share one
/// commit log record and, in batch mode, one fsync.
pub struct LocalReplica {
    engine: Arc<dyn StorageEngine>,
    /// Writes waiting for their group's task, by `Durability` (`group_index`).
    groups: Arc<[WriteGroup; 3]>,
}

#[derive(Default)]
struct WriteGroup {
    queued: Mutex<Vec<QueuedWrite>>,
}

struct QueuedWrite {
    updates: Arc<Vec<PartitionUpdate>>,
    done: oneshot::Sender<Result<(), CoordinatorError>>,
}

fn group_index(durability: Durability) -> usize {
    match durability {
        Durability::Periodic => 0,
        Durability::Batch => 1,
        Durability::None => 2,
    }
}

impl LocalReplica {
    pub fn new(engine: Arc<dyn StorageEngine>) -> LocalReplica {
        LocalReplica {
            engine,
            groups: Arc::default(),
        }
    }
}

/// Writes the writes queued in `groups` for `durability` as one storage write and completes
/// each. If the group write fails, each write is retried alone, so an error reaches only the
/// write that caused it (a failed group write applied nothing).
async fn write_group(
    engine: Arc<dyn StorageEngine>,
    groups: Arc<[WriteGroup; 3]>,
    durability: Durability,
) {
    let queued = std::mem::take(
        &mut *groups[group_index(durability)]
            .queued
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    if queued.is_empty() {
        return;
    }
    let (updates, done): (Vec<_>, Vec<_>) = queued.into_iter().map(|q| (q.updates, q.done)).unzip();
    let written = if let [only] = updates.as_slice() {
        apply_one(&engine, only.clone(), durability).await
    } else {
        let slices: Vec<&[PartitionUpdate]> = updates.iter().map(|u| u.as_slice()).collect();
        match engine.try_apply_group(&slices, durability) {
            Err(StorageError::WouldBlock) => {
                let engine = engine.clone();
                let owned = updates.clone();
                tokio::task::spawn_blocking(move || {
                    let slices: Vec<&[PartitionUpdate]> =
                        owned.iter().map(|u| u.as_slice()).collect();
                    engine.apply_group(&slices, durability)
                })
                .await
                .map_err(|e| CoordinatorError::Internal(e.to_string()))
                .and_then(|r| r.map_err(CoordinatorError::from))
            }
            done => done.map_err(CoordinatorError::from),
        }
    };
    match written {
        Ok(()) => {
            for d in done {
                let _ = d.send(Ok(()));
            }
        }
        Err(e) if updates.len() == 1 => {
            if let Some(d) = done.into_iter().next() {
                let _ = d.send(Err(e));
            }
        }
        Err(_) => {
            for (u, d) in updates.into_iter().zip(done) {
                let _ = d.send(apply_one(&engine, u, durability).await);
            }
        }
    }
}

/// One write: tried on the worker, on the blocking pool if that would wait.
async fn apply_one(
    engine: &Arc<dyn StorageEngine>,
    updates: Arc<Vec<PartitionUpdate>>,
    durability: Durability,
) -> Result<(), CoordinatorError> {
    match engine.try_apply(&updates, durability) {
        Err(StorageError::WouldBlock) => {}
        done => return Ok(done?),
    }
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || engine.apply(&updates, durability))
        .await
        .map_err(|e| CoordinatorError::Internal(e.to_string()))??;
    Ok(())
}

impl Replica for LocalReplica {
    fn apply(
        &self,
        updates: Arc<Vec<PartitionUpdate>>,
        durability: Durability,
    ) -> ReplicaFuture<()> {
        let engine = self.engine.clone();
        let groups = self.groups.clone();
        Box::pin(async move {
            let (done, result) = oneshot::channel();
            let first = {
                let mut queued = groups[group_index(durability)]
                    .queued
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                queued.push(QueuedWrite { updates, done });
                queued.len() == 1
            };
            if first {
                // A task of its own, not this future: a dropped request must not strand the
                // writes that joined its group.
                tokio::spawn(write_group(engine, groups, durability));
            }
            result
                .await
                .map_err(|_| CoordinatorError::Internal("write group task ended".to_string()))?
        })
    }

    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        let engine = self.engine.clone();
        Box::pin(async move {
            if let ReadCommand::Partition {
                table,
                key,
                slice,
                max_rows,
                resume,
            } = &command
            {
                match engine.try_read_partition(*table, key, slice, *max_rows, resume.as_deref()) {
                    Err(StorageError::WouldBlock) => {}
                    done => return Ok(ReadResponse::Partition(done?)),
                }
            }
            // The blocking pool may queue the call behind others: by the time it starts, the
            // request may have been answered with a timeout, and its read would only delay
            // the reads queued behind it.
            tokio::task::spawn_blocking(move || {
                if deadline.passed() {
                    return Err(CoordinatorError::DeadlinePassed);
                }
                let read = match command {
                    ReadCommand::Partition {
                        table,
                        key,
                        slice,
                        max_rows,
                        resume,
                    } => engine
                        .read_partition(table, &key, &slice, max_rows, resume.as_deref())
                        .map(ReadResponse::Partition),
                    ReadCommand::Range {
                        table,
                        start,
                        end_token,
                        max_rows,
                    } => engine
                        .scan(table, start, end_token, max_rows)
                        .map(ReadResponse::Range),
                };
                read.map_err(CoordinatorError::from)
            })
            .await
            .map_err(|e| CoordinatorError::Internal(e.to_string()))?
        })
    }

    /// Always on the blocking pool: dropping a table's data waits on storage's locks and files.
    fn truncate(&self, table: TableId, _deadline: Deadline) -> ReplicaFuture<()> {
        let engine = self.engine.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || engine.truncate_table(table))
                .await
                .map_err(|e| CoordinatorError::Internal(e.to_string()))??;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::task::Poll;

    use mutation::{LivenessInfo, Row};
    use storage::{ClusteringSlice, MemoryEngine, PartitionKey, TableId};

    use super::*;

    const TABLE: TableId = TableId::from_u128(1);
    const MISSING: TableId = TableId::from_u128(2);

    fn key(k: u8) -> PartitionKey {
        PartitionKey {
            token: i64::from(k),
            key: vec![k],
        }
    }

    fn write(table: TableId, k: u8) -> Arc<Vec<PartitionUpdate>> {
        let row = Row {
            liveness: Some(LivenessInfo {
                timestamp: 1,
                expiry: None,
            }),
            deletion: None,
            columns: Vec::new(),
        };
        Arc::new(vec![PartitionUpdate {
            table,
            key: key(k),
            header: None,
            static_row: None,
            rows: vec![(Vec::new(), row)],
        }])
    }

    fn stored(engine: &MemoryEngine, k: u8) -> bool {
        let page = engine
            .read_partition(TABLE, &key(k), &ClusteringSlice::all(), 10, None)
            .expect("read");
        !page.data.rows.is_empty()
    }

    fn replica() -> (Arc<MemoryEngine>, LocalReplica) {
        let engine = Arc::new(MemoryEngine::new());
        engine.create_table(TABLE).expect("create");
        (engine.clone(), LocalReplica::new(engine))
    }

    #[tokio::test]
    async fn writes_started_together_wait_in_one_group() {
        let (engine, replica) = replica();
        let mut a = replica.apply(write(TABLE, 1), Durability::Periodic);
        let mut b = replica.apply(write(TABLE, 2), Durability::Periodic);
        // Started in one poll, before the group's task could run: both wait in one group.
        std::future::poll_fn(|cx| {
            assert!(a.as_mut().poll(cx).is_pending());
            assert!(b.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        let queued = replica.groups[group_index(Durability::Periodic)]
            .queued
            .lock()
            .expect("lock")
            .len();
        assert_eq!(queued, 2);
        let (a, b) = tokio::join!(a, b);
        a.expect("a");
        b.expect("b");
        assert!(stored(&engine, 1) && stored(&engine, 2));
    }

    #[tokio::test]
    async fn an_error_in_a_group_reaches_only_its_write() {
        let (engine, replica) = replica();
        let (a, bad, c) = tokio::join!(
            replica.apply(write(TABLE, 1), Durability::Periodic),
            replica.apply(write(MISSING, 2), Durability::Periodic),
            replica.apply(write(TABLE, 3), Durability::Periodic),
        );
        a.expect("a");
        c.expect("c");
        assert!(matches!(
            bad,
            Err(CoordinatorError::Storage(StorageError::UnknownTable(_)))
        ));
        assert!(stored(&engine, 1) && stored(&engine, 3));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_of_every_durability_all_complete() {
        let (engine, replica) = replica();
        let replica = Arc::new(replica);
        let mut tasks = Vec::new();
        for k in 0..200u8 {
            let replica = replica.clone();
            let durability =
                [Durability::Periodic, Durability::Batch, Durability::None][usize::from(k) % 3];
            tasks.push(tokio::spawn(async move {
                replica.apply(write(TABLE, k), durability).await
            }));
        }
        for t in tasks {
            t.await.expect("task").expect("write");
        }
        assert!((0..200u8).all(|k| stored(&engine, k)));
    }
}
