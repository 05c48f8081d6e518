//! A replica that catches up with the cluster's schema before it answers "unknown table".
//!
//! A DDL statement answers once its metadata log entry is committed and applied on the node
//! that ran it; the other nodes apply it a moment later. A request from that node may reach a
//! replica in between and name a table the replica has not created yet. Answering "unknown
//! table" then would fail a client write that was correct (it did, in CI). So a replica that
//! does not know a peer's table first waits for a read barrier on the metadata log (everything
//! committed before now applied here, as ScyllaDB's group 0 does on a schema mismatch) and
//! tries once more; a table still unknown after that was dropped (or never existed), and the
//! error stands.

use std::future::Future;
use std::sync::{Arc, OnceLock, Weak};

use cluster_metadata::MetadataService;
use coordinator::{
    Batch, BatchId, Deadline, Mutation, ReadDigest, Replica, ReplicaError, ReplicaFuture,
};
use mutation::{ReadCommand, ReadResponse, TableId};

/// Wraps this node's replica for requests from peers (give it to messaging); `catch_up_with`
/// names the metadata log once it is open. Until then, and for local requests (whose
/// coordinator took the table from this node's own schema), it is the replica itself.
pub struct SchemaCatchUp {
    inner: Arc<dyn Replica>,
    metadata: OnceLock<Weak<MetadataService>>,
}

impl SchemaCatchUp {
    pub fn new(inner: Arc<dyn Replica>) -> SchemaCatchUp {
        SchemaCatchUp {
            inner,
            metadata: OnceLock::new(),
        }
    }

    /// From now on an unknown table waits for a read barrier on `metadata` (held weakly: the
    /// log owns messaging's handler, not the other way round).
    pub fn catch_up_with(&self, metadata: &Arc<MetadataService>) {
        let _ = self.metadata.set(Arc::downgrade(metadata));
    }

    /// Runs `request` once, and again after a read barrier if it named an unknown table.
    fn with_catch_up<T, F, Fut>(&self, deadline: Deadline, request: F) -> ReplicaFuture<T>
    where
        T: Send + 'static,
        F: Fn(Arc<dyn Replica>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, ReplicaError>> + Send + 'static,
    {
        let inner = self.inner.clone();
        let metadata = self.metadata.get().and_then(Weak::upgrade);
        Box::pin(async move {
            let first = request(inner.clone()).await;
            let (Err(ReplicaError::UnknownTable(table)), Some(metadata)) = (&first, metadata)
            else {
                return first;
            };
            match metadata.read_barrier(deadline.remaining()).await {
                Ok(()) => request(inner).await,
                Err(e) => {
                    tracing::debug!(%table, "no read barrier for an unknown table: {e}");
                    first
                }
            }
        })
    }
}

impl Replica for SchemaCatchUp {
    fn apply_mutation(&self, mutation: Mutation, deadline: Deadline) -> ReplicaFuture<()> {
        self.with_catch_up(deadline, move |replica| {
            replica.apply_mutation(mutation.clone(), deadline)
        })
    }

    fn read(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadResponse> {
        self.with_catch_up(deadline, move |replica| {
            replica.read(command.clone(), deadline)
        })
    }

    fn digest(&self, command: ReadCommand, deadline: Deadline) -> ReplicaFuture<ReadDigest> {
        self.with_catch_up(deadline, move |replica| {
            replica.digest(command.clone(), deadline)
        })
    }

    fn truncate(&self, table: TableId, deadline: Deadline) -> ReplicaFuture<()> {
        self.with_catch_up(deadline, move |replica| replica.truncate(table, deadline))
    }

    /// No catch-up: a batch is stored as bytes, whatever tables it names.
    fn store_batch(&self, batch: Batch, deadline: Deadline) -> ReplicaFuture<()> {
        self.inner.store_batch(batch, deadline)
    }

    fn remove_batch(&self, id: BatchId, deadline: Deadline) -> ReplicaFuture<()> {
        self.inner.remove_batch(id, deadline)
    }
}
