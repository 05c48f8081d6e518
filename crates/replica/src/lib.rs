//! This node's side of every replica verb (`coordinator::Replica`): applying a mutation with
//! this node's own durability, reading, digesting a read, truncating. The coordinator of any
//! node reaches this node's storage through here: today the local coordinator directly, later
//! the messaging service for a peer's requests (and hint replay, and read repair), which all
//! need the same path.
//!
//! Owns: group commit (concurrent mutations share one storage write), the hand-off of storage
//! calls that would wait to tokio's blocking pool, this node's commit log mode
//! (`commitlog_sync`) as the durability of a mutation whose keyspace has `durable_writes`, and
//! the mapping of storage's errors to `ReplicaError`.
//!
//! Architecture invariant: the only path from the cluster to storage for data; no storage call
//! that may wait runs on a runtime worker. Must not know CQL, the schema, consistency levels or
//! other replicas.

use std::sync::{Arc, Mutex, PoisonError};

mod batchlog;

pub use batchlog::BatchlogStorage;

use coordinator::{
    read_digest, Batch, BatchId, Deadline, Mutation, ReadDigest, Replica, ReplicaError,
    ReplicaFuture,
};
use mutation::{PartitionUpdate, ReadCommand, ReadResponse, TableId};
use storage::{Durability, StorageEngine, StorageError};
use tokio::sync::oneshot;

/// This node's storage as a replica. Storage calls can block (write stalls, commit log syncs,
/// disk reads), so they never wait on a runtime worker: each is first tried without waiting
/// (`try_apply_batch` or `try_apply_group`, `try_read_partition`: memtables and block cache
/// only, no sync, no stall), and only if that would block does it move to tokio's blocking
/// pool. Most requests on a warm node so skip the hop to a blocking thread and back, which cost
/// more CPU than the read.
///
/// Mutations are grouped (group commit): a mutation joins the group of mutations waiting for
/// their durability, and the group's first mutation spawns the task that writes them all as
/// one storage write, then completes each. That task runs once the submitting task yields, so
/// a connection's pipelined writes (see `cql-server`), and other workers' meanwhile, share one
/// commit log record and, in batch mode, one fsync.
pub struct LocalReplica {
    engine: Arc<dyn StorageEngine>,
    /// This node's commit log mode (`commitlog_sync`): the durability of a mutation whose
    /// keyspace has `durable_writes`.
    commit_log: Durability,
    /// Mutations waiting for their group's task, by `Durability` (`group_index`).
    groups: Arc<[WriteGroup; 3]>,
    /// The batches coordinators logged here.
    batchlog: Arc<BatchlogStorage>,
}

#[derive(Default)]
struct WriteGroup {
    queued: Mutex<Vec<QueuedWrite>>,
}

struct QueuedWrite {
    updates: Arc<Vec<PartitionUpdate>>,
    done: oneshot::Sender<Result<(), ReplicaError>>,
}

fn group_index(durability: Durability) -> usize {
    match durability {
        Durability::Periodic => 0,
        Durability::Batch => 1,
        Durability::None => 2,
    }
}

impl LocalReplica {
    /// `commit_log` is the node's `commitlog_sync` mode (`Durability::None` for a node that
    /// keeps no commit log).
    pub fn new(engine: Arc<dyn StorageEngine>, commit_log: Durability) -> LocalReplica {
        LocalReplica {
            batchlog: Arc::new(BatchlogStorage::new(engine.clone(), commit_log)),
            engine,
            commit_log,
            groups: Arc::default(),
        }
    }

    /// This node's batch log, for its replay (`coordinator::BatchlogReplay`).
    pub fn batchlog(&self) -> Arc<BatchlogStorage> {
        self.batchlog.clone()
    }

    /// How durable `mutation` is when acknowledged: the commit log's mode, or none for a
    /// keyspace with `durable_writes = false` (Cassandra's `Keyspace.apply` skips the commit
    /// log then).
    fn durability(&self, mutation: &Mutation) -> Durability {
        if mutation.durable_writes {
            self.commit_log
        } else {
            Durability::None
        }
    }
}

/// Storage's error as the coordinator sees it; the words stay storage's (the client gets them
/// in a server error).
fn replica_error(e: StorageError) -> ReplicaError {
    match e {
        StorageError::UnknownTable(table) => ReplicaError::UnknownTable(table),
        other => ReplicaError::Storage(other.to_string()),
    }
}

/// A blocking-pool task that ended without an answer.
fn task_failed(e: tokio::task::JoinError) -> ReplicaError {
    ReplicaError::Internal(e.to_string())
}

/// Writes the mutations queued in `groups` for `durability` as one storage write and completes
/// each. If the group write fails, each is retried alone, so an error reaches only the
/// mutation that caused it (a failed group write applied nothing).
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
        write_alone(&engine, only.clone(), durability).await
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
                .map_err(task_failed)
                .and_then(|r| r.map_err(replica_error))
            }
            done => done.map_err(replica_error),
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
                let _ = d.send(write_alone(&engine, u, durability).await);
            }
        }
    }
}

/// One mutation written by itself: tried on the worker, on the blocking pool if that would
/// wait.
async fn write_alone(
    engine: &Arc<dyn StorageEngine>,
    updates: Arc<Vec<PartitionUpdate>>,
    durability: Durability,
) -> Result<(), ReplicaError> {
    match engine.try_apply_batch(&updates, durability) {
        Err(StorageError::WouldBlock) => {}
        done => return done.map_err(replica_error),
    }
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || engine.apply_batch(&updates, durability))
        .await
        .map_err(task_failed)?
        .map_err(replica_error)
}

/// A read: a point read tried on the worker first, everything else (and a point read that
/// would wait) on the blocking pool, unless its deadline has passed by the time it starts.
async fn read(
    engine: Arc<dyn StorageEngine>,
    command: ReadCommand,
    deadline: Deadline,
) -> Result<ReadResponse, ReplicaError> {
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
            done => return done.map(ReadResponse::Partition).map_err(replica_error),
        }
    }
    // The blocking pool may queue the call behind others: by the time it starts, the request
    // may have been answered with a timeout, and its read would only delay the reads queued
    // behind it.
    tokio::task::spawn_blocking(move || {
        if deadline.passed() {
            return Err(ReplicaError::DeadlinePassed);
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
        read.map_err(replica_error)
    })
    .await
    .map_err(task_failed)?
}

impl Replica for LocalReplica {
    fn apply_mutation(&self, mutation: Mutation, _deadline: Deadline) -> ReplicaFuture<()> {
        // The deadline is not looked at: a local mutation is applied however late (see
        // `Replica::apply_mutation`), and its group may already hold others.
        let engine = self.engine.clone();
        let groups = self.groups.clone();
        let durability = self.durability(&mutation);
        Box::pin(async move {
            let (done, result) = oneshot::channel();
            let first = {
                let mut queued = groups[group_index(durability)]
                    .queued
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                queued.push(QueuedWrite {
                    updates: mutation.updates,
                    done,
                });
                queued.len() == 1
            };
            if first {
                // A task of its own, not this future: a dropped request must not strand the
                // mutations that joined its group.
                tokio::spawn(write_group(engine, groups, durability));
            }
            result
                .await
                .map_err(|_| ReplicaError::Internal("write group task ended".to_string()))?
        })
    }

    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        Box::pin(read(self.engine.clone(), command, deadline))
    }

    /// The read, then its digest: the data never leaves this node (with a peer's request, it
    /// never crosses the network).
    fn digest(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadDigest> {
        let engine = self.engine.clone();
        Box::pin(async move { Ok(read_digest(&read(engine, command, deadline).await?)) })
    }

    /// Always on the blocking pool (dropping a table's data waits on storage's files), and not
    /// started once its deadline has passed, as a replica drops an expired TRUNCATE.
    fn truncate(&self, table: TableId, deadline: Deadline) -> ReplicaFuture<()> {
        let engine = self.engine.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                if deadline.passed() {
                    return Err(ReplicaError::DeadlinePassed);
                }
                engine.truncate_table(table).map_err(replica_error)
            })
            .await
            .map_err(task_failed)?
        })
    }

    /// First tried without waiting on the runtime worker (periodic mode: a commit log append,
    /// as `try_apply_batch`), else on the blocking pool (a sync, a write stall), where it is
    /// not started once its deadline has passed: the coordinator answered a BATCH_LOG timeout
    /// then and never sent the mutations, so nothing is lost by not logging it.
    fn store_batch(&self, batch: Batch, deadline: Deadline) -> ReplicaFuture<()> {
        let batchlog = self.batchlog.clone();
        match batchlog.try_store(&batch) {
            Err(StorageError::WouldBlock) => {}
            done => return Box::pin(std::future::ready(done.map_err(replica_error))),
        }
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                if deadline.passed() {
                    return Err(ReplicaError::DeadlinePassed);
                }
                batchlog.store(&batch).map_err(replica_error)
            })
            .await
            .map_err(task_failed)?
        })
    }

    /// Removed however late: a batch whose mutations all reached their level needs no replay.
    fn remove_batch(&self, id: BatchId, _deadline: Deadline) -> ReplicaFuture<()> {
        let batchlog = self.batchlog.clone();
        match batchlog.try_remove(id) {
            Err(StorageError::WouldBlock) => {}
            done => return Box::pin(std::future::ready(done.map_err(replica_error))),
        }
        Box::pin(async move {
            tokio::task::spawn_blocking(move || batchlog.remove(id).map_err(replica_error))
                .await
                .map_err(task_failed)?
        })
    }
}

#[cfg(test)]
mod tests;
