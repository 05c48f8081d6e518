//! The coordinator: consistency levels, replica selection, and the replica interface.
//!
//! Owns: deciding which replicas a mutation or read goes to (the token ring), how many of them
//! must answer for a consistency level, and the [`Replica`] trait through which requests reach
//! a replica. Today the ring has one node and the only replica is [`LocalReplica`], which tries
//! storage calls on the runtime worker (the blocking pool only if they would wait) and
//! group-commits concurrent writes; a network transport implements [`Replica`] later without
//! touching the query layer.
//!
//! Must not depend on: the CQL parser, the protocol, or RocksDB (storage is reached only
//! through `storage::StorageEngine`).

mod consistency;
mod replica;

pub use consistency::{ConsistencyLevel, ReadOrWrite};
pub use replica::{LocalReplica, ReadCommand, ReadResponse, Replica, ReplicaFuture};

use std::net::IpAddr;
use std::sync::Arc;

use schema::KeyspaceMetadata;
use storage::{Durability, PartitionUpdate};

#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// Not enough live replicas for the consistency level (CQL `Unavailable`).
    #[error("Cannot achieve consistency level {consistency}")]
    Unavailable {
        consistency: ConsistencyLevel,
        required: i32,
        alive: i32,
    },
    /// The consistency level is not valid for this kind of request (CQL `Invalid`).
    #[error("{0}")]
    InvalidConsistency(String),
    #[error("storage error: {0}")]
    Storage(#[from] storage::StorageError),
    #[error("replica task failed: {0}")]
    Internal(String),
}

/// The token ring as this node sees it. One node owns every token today.
#[derive(Debug, Clone)]
pub struct Ring {
    pub local_address: IpAddr,
    /// This node's tokens, sorted.
    pub tokens: Vec<i64>,
}

/// Executes mutations and reads against the replicas that own them.
pub struct Coordinator {
    ring: Ring,
    local: Arc<dyn Replica>,
}

impl Coordinator {
    pub fn new(ring: Ring, local: Arc<dyn Replica>) -> Coordinator {
        Coordinator { ring, local }
    }

    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// Replicas for a token: with one node, the node itself, whatever the replication factor
    /// (a strategy cannot place two replicas on one node).
    fn replicas(&self, keyspace: &KeyspaceMetadata) -> Vec<Arc<dyn Replica>> {
        if !keyspace.virtual_keyspace && !keyspace.replication.has_replicas() {
            return Vec::new();
        }
        vec![self.local.clone()]
    }

    /// Applies mutations of one keyspace at `consistency`. `updates` may span partitions; each
    /// replica applies its share atomically.
    pub async fn write(
        &self,
        keyspace: &KeyspaceMetadata,
        updates: Vec<PartitionUpdate>,
        consistency: ConsistencyLevel,
        durability: Durability,
    ) -> Result<(), CoordinatorError> {
        let replicas = self.replicas(keyspace);
        let required = consistency.block_for(keyspace, ReadOrWrite::Write)?;
        check_available(consistency, required, replicas.len())?;
        let updates = Arc::new(updates);
        // One replica today. With several, this sends to all and waits for `required` acks.
        for replica in &replicas {
            replica.apply(updates.clone(), durability).await?;
        }
        Ok(())
    }

    /// Reads at `consistency`.
    pub async fn read(
        &self,
        keyspace: &KeyspaceMetadata,
        command: ReadCommand,
        consistency: ConsistencyLevel,
    ) -> Result<ReadResponse, CoordinatorError> {
        let replicas = self.replicas(keyspace);
        let required = consistency.block_for(keyspace, ReadOrWrite::Read)?;
        check_available(consistency, required, replicas.len())?;
        let replica = replicas
            .first()
            .ok_or(CoordinatorError::Unavailable {
                consistency,
                required: required as i32,
                alive: 0,
            })?
            .clone();
        replica.read(command).await
    }
}

fn check_available(
    consistency: ConsistencyLevel,
    required: usize,
    alive: usize,
) -> Result<(), CoordinatorError> {
    if alive < required {
        return Err(CoordinatorError::Unavailable {
            consistency,
            required: required as i32,
            alive: alive as i32,
        });
    }
    Ok(())
}
