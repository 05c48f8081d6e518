//! The replica interface: the verbs a coordinator sends to a replica (this node's storage, in
//! `crates/replica`, or later a peer over the network), and what they answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use mutation::{PartitionUpdate, ReadCommand, ReadResponse, TableId};

use crate::{Batch, BatchId, Deadline, ReadDigest};

pub type ReplicaFuture<T> = Pin<Box<dyn Future<Output = Result<T, ReplicaError>> + Send>>;

/// A write as a replica applies it (Cassandra's `Mutation`, which may here span several
/// partitions of one keyspace: a batch's share of one keyspace): the replica applies all its
/// updates atomically. Cheap to clone, so one mutation can go to every replica and to hinted
/// handoff without copying its updates.
#[derive(Debug, Clone)]
pub struct Mutation {
    pub updates: Arc<Vec<PartitionUpdate>>,
    /// The keyspace's `durable_writes`: whether the replica's commit log takes the mutation.
    /// How durable it is then is the replica's own commit log mode (`commitlog_sync`), which
    /// the coordinator does not know.
    pub durable_writes: bool,
}

/// Why a replica did not do what it was asked. Carries what the coordinator (and through it
/// the query layer) needs to answer the client; its messages are the words the client sees in
/// a server error, so they must stay stable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaError {
    /// The replica did not start the request: its deadline had passed (the coordinator
    /// answers the timeout).
    #[error("the request's deadline passed before the replica started it")]
    DeadlinePassed,
    /// The replica has no such table (dropped meanwhile, or a schema the replica has not
    /// seen). Kept apart from the other storage failures because a hint or a peer's request
    /// for a dropped table is discarded, not retried (issue 36).
    #[error("storage error: unknown table {0}")]
    UnknownTable(TableId),
    /// The replica's storage failed the request (corrupt data, an oversized key, an I/O
    /// error); the message is storage's own.
    #[error("storage error: {0}")]
    Storage(String),
    /// The replica's task ended without an answer (a panic in a blocking call).
    #[error("replica task failed: {0}")]
    Internal(String),
    /// The request did not reach the replica, or its answer did not come back (no connection
    /// to a peer that died before the failure detector convicted it, a full queue, a refused
    /// handshake): the coordinator counts it as a replica that did not answer, as it counts
    /// `DeadlinePassed`, so the client gets the level's timeout, never a server error.
    #[error("replica unreachable: {0}")]
    Unreachable(String),
}

impl ReplicaError {
    /// Whether the replica gave no answer (it did not start the request in time, or could not
    /// be reached), which the coordinator counts towards a timeout rather than answering.
    pub fn is_no_answer(&self) -> bool {
        matches!(
            self,
            ReplicaError::DeadlinePassed | ReplicaError::Unreachable(_)
        )
    }
}

/// Something that stores a share of the ring's data: this node (`replica::LocalReplica`), or
/// (later) a peer over the network. Requests are owned values so they can be serialised for a
/// remote replica. Every verb carries the request's `deadline`: a replica need not start a
/// read, digest or truncate whose deadline has passed (it answers `DeadlinePassed`, and the
/// coordinator the timeout), as Cassandra drops expired messages.
pub trait Replica: Send + Sync + 'static {
    /// Applies `mutation` atomically, as durable as the replica's commit log mode makes it
    /// (none if the keyspace's `durable_writes` is off). The local replica applies a mutation
    /// even past its deadline, as Cassandra's `LocalMutationRunnable` does (it reruns an
    /// expired local mutation as a hint to itself): the client got a timeout, and a timed out
    /// write may still be applied. A remote replica drops it, and the coordinator hands it to
    /// hinted handoff (`HintedHandoff`).
    fn apply_mutation(&self, mutation: Mutation, deadline: Deadline) -> ReplicaFuture<()>;
    /// Reads: the data a data request gets.
    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse>;
    /// The digest of what `read` would answer (`read_digest`): what a digest request gets, so
    /// that the coordinator compares replicas without moving their data.
    fn digest(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadDigest>;
    /// Removes every row of `table` (TRUNCATE), keeping the table.
    fn truncate(&self, table: TableId, deadline: Deadline) -> ReplicaFuture<()>;
    /// Stores `batch` in this replica's batch log (Cassandra's `BATCH_STORE_REQ`), durably
    /// before answering, so that it replays the batch should its coordinator not remove it.
    /// A replica without a batch log (test doubles) answers an error saying so; a replica
    /// that wraps another must forward both batch log verbs.
    fn store_batch(&self, batch: Batch, deadline: Deadline) -> ReplicaFuture<()> {
        let _ = (batch, deadline);
        Box::pin(async {
            Err(ReplicaError::Internal(
                "this replica keeps no batch log".into(),
            ))
        })
    }
    /// Deletes batch `id` from this replica's batch log (Cassandra's `BATCH_REMOVE_REQ`):
    /// its coordinator saw every mutation reach its consistency level. Nothing if absent.
    fn remove_batch(&self, id: BatchId, deadline: Deadline) -> ReplicaFuture<()> {
        let _ = (id, deadline);
        Box::pin(async {
            Err(ReplicaError::Internal(
                "this replica keeps no batch log".into(),
            ))
        })
    }
}
