//! The replica interface and the local replica.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use storage::{
    ClusteringSlice, Durability, PartitionKey, PartitionPage, PartitionUpdate, ScanPage, ScanStart,
    StorageEngine, StorageError, TableId,
};

use crate::CoordinatorError;

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
    fn read(&self, command: ReadCommand) -> ReplicaFuture<ReadResponse>;
}

/// This node's storage as a replica. Storage calls can block (write stalls, commit log syncs,
/// disk reads), so they never wait on a runtime worker: each is first tried without waiting
/// (`try_apply`, `try_read_partition`: memtables and block cache only, no sync, no stall),
/// and only if that would block does it move to tokio's blocking pool. Most requests on a warm
/// node so skip the hop to a blocking thread and back, which cost more CPU than the read.
pub struct LocalReplica {
    engine: Arc<dyn StorageEngine>,
}

impl LocalReplica {
    pub fn new(engine: Arc<dyn StorageEngine>) -> LocalReplica {
        LocalReplica { engine }
    }
}

impl Replica for LocalReplica {
    fn apply(
        &self,
        updates: Arc<Vec<PartitionUpdate>>,
        durability: Durability,
    ) -> ReplicaFuture<()> {
        let engine = self.engine.clone();
        Box::pin(async move {
            match engine.try_apply(&updates, durability) {
                Err(StorageError::WouldBlock) => {}
                done => return Ok(done?),
            }
            tokio::task::spawn_blocking(move || engine.apply(&updates, durability))
                .await
                .map_err(|e| CoordinatorError::Internal(e.to_string()))??;
            Ok(())
        })
    }

    fn read(&self, command: ReadCommand) -> ReplicaFuture<ReadResponse> {
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
            tokio::task::spawn_blocking(move || match command {
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
            })
            .await
            .map_err(|e| CoordinatorError::Internal(e.to_string()))?
            .map_err(CoordinatorError::from)
        })
    }
}
