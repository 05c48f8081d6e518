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
mod deadline;
mod replica;

pub use consistency::{ConsistencyLevel, ReadOrWrite};
pub use deadline::{Deadline, WriteType};
pub use replica::{LocalReplica, ReadCommand, ReadResponse, Replica, ReplicaFuture};

use std::future::Future;
use std::net::IpAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use schema::KeyspaceMetadata;
use storage::{Durability, PartitionUpdate, TableId};

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
    /// The request's deadline passed before enough replicas answered (CQL `ReadTimeout`), in
    /// Cassandra's words.
    #[error("Operation timed out - received only {received} responses.")]
    ReadTimeout {
        consistency: ConsistencyLevel,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// The deadline of a write passed before enough replicas acknowledged it (CQL
    /// `WriteTimeout`): it may still be applied.
    #[error("Operation timed out - received only {received} responses.")]
    WriteTimeout {
        consistency: ConsistencyLevel,
        received: i32,
        block_for: i32,
        write_type: WriteType,
    },
    /// The deadline of a TRUNCATE passed before every node acknowledged it, in the words of
    /// Cassandra's `TruncateResponseHandler`; it may still be applied.
    #[error("Truncate timed out - received only {received} responses")]
    TruncateTimeout { received: i32 },
    /// A replica did not start a read whose deadline had passed (the coordinator answers the
    /// timeout).
    #[error("the request's deadline passed before the replica started it")]
    DeadlinePassed,
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
    /// replica applies its share atomically. Past `deadline` the write is answered with a
    /// `WriteTimeout` of `write_type`; it may still be applied, as in Cassandra.
    pub async fn write(
        &self,
        keyspace: &KeyspaceMetadata,
        updates: Vec<PartitionUpdate>,
        consistency: ConsistencyLevel,
        durability: Durability,
        write_type: WriteType,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let replicas = self.replicas(keyspace);
        let required = consistency.block_for(keyspace, ReadOrWrite::Write)?;
        check_available(consistency, required, replicas.len())?;
        let timeout = || CoordinatorError::WriteTimeout {
            consistency,
            received: 0,
            block_for: required as i32,
            write_type,
        };
        if deadline.passed() {
            return Err(timeout());
        }
        let updates = Arc::new(updates);
        // One replica today. With several, this sends to all and waits for `required` acks.
        for replica in &replicas {
            by_deadline(replica.apply(updates.clone(), durability), deadline)
                .await
                .unwrap_or_else(|| Err(timeout()))?;
        }
        Ok(())
    }

    /// Removes every row of `table` on every node (TRUNCATE), as Cassandra's
    /// `StorageProxy.truncateBlocking`: every node must be alive (else `Unavailable` at ALL, as
    /// Cassandra's) and must acknowledge before `deadline` (else `TruncateTimeout`). Every node
    /// of the ring, not only the keyspace's replicas: a node may still hold data of a keyspace
    /// whose replication an ALTER KEYSPACE moved away from it. (`_keyspace` is the table's,
    /// for when placement can say more; the one node of today's ring is the only one.)
    pub async fn truncate(
        &self,
        _keyspace: &KeyspaceMetadata,
        table: TableId,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let nodes = [self.local.clone()];
        for (received, node) in (0..).zip(&nodes) {
            by_deadline(node.truncate(table, deadline), deadline)
                .await
                .ok_or(CoordinatorError::TruncateTimeout { received })??;
        }
        Ok(())
    }

    /// Reads at `consistency`; past `deadline` the read is answered with a `ReadTimeout` (and
    /// the replica, if it has not started it, does not).
    pub async fn read(
        &self,
        keyspace: &KeyspaceMetadata,
        command: ReadCommand,
        consistency: ConsistencyLevel,
        deadline: Deadline,
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
        let timeout = || CoordinatorError::ReadTimeout {
            consistency,
            received: 0,
            block_for: required as i32,
            data_present: false,
        };
        // Not checked before sending: a read that completes at once costs no look at the
        // clock (the query layer checks the deadline between the reads of a long request).
        match by_deadline(replica.read(command, deadline), deadline).await {
            Some(Err(CoordinatorError::DeadlinePassed)) | None => Err(timeout()),
            Some(done) => done,
        }
    }
}

/// `work`'s output, or `None` if `deadline` passes first. Work that completes on its first
/// poll (most local reads) costs no timer.
async fn by_deadline<T>(work: impl Future<Output = T>, deadline: Deadline) -> Option<T> {
    let mut work = pin!(work);
    let first = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(done) => Some(done),
        Poll::Pending => tokio::time::timeout_at(deadline.instant().into(), work)
            .await
            .ok(),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    use schema::Replication;
    use storage::{ClusteringSlice, PartitionKey};

    use super::*;

    /// A replica that never answers (a stalled disk, a dead peer).
    struct Stalled;

    impl Replica for Stalled {
        fn apply(&self, _: Arc<Vec<PartitionUpdate>>, _: Durability) -> ReplicaFuture<()> {
            Box::pin(std::future::pending())
        }
        fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
            Box::pin(std::future::pending())
        }
        fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
            Box::pin(std::future::pending())
        }
    }

    fn keyspace() -> KeyspaceMetadata {
        let options = BTreeMap::from([
            ("class".to_string(), "SimpleStrategy".to_string()),
            ("replication_factor".to_string(), "1".to_string()),
        ]);
        KeyspaceMetadata {
            name: "ks".to_string(),
            durable_writes: true,
            replication: Replication::from_options(&options, "dc1", "ks", None).expect("valid"),
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
            virtual_keyspace: false,
        }
    }

    fn stalled() -> Coordinator {
        let ring = Ring {
            local_address: IpAddr::from([127, 0, 0, 1]),
            tokens: vec![0],
        };
        Coordinator::new(ring, Arc::new(Stalled))
    }

    fn read() -> ReadCommand {
        ReadCommand::Partition {
            table: TableId::from_u128(1),
            key: PartitionKey {
                token: 1,
                key: vec![1],
            },
            slice: ClusteringSlice::all(),
            max_rows: 1,
            resume: None,
        }
    }

    #[tokio::test]
    async fn a_read_past_its_deadline_is_a_read_timeout() {
        let coordinator = stalled();
        let started = Instant::now();
        let deadline = Deadline::at(started + Duration::from_millis(50));
        let e = coordinator
            .read(&keyspace(), read(), ConsistencyLevel::One, deadline)
            .await
            .expect_err("the replica never answers");
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(
            matches!(
                e,
                CoordinatorError::ReadTimeout {
                    consistency: ConsistencyLevel::One,
                    received: 0,
                    block_for: 1,
                    data_present: false,
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "Operation timed out - received only 0 responses."
        );
        // A deadline already passed: still a read timeout (the read is sent, as a point read
        // does not look at the clock first, and the stalled replica never answers it).
        let e = coordinator
            .read(
                &keyspace(),
                read(),
                ConsistencyLevel::Quorum,
                Deadline::at(started),
            )
            .await
            .expect_err("too late");
        assert!(matches!(e, CoordinatorError::ReadTimeout { .. }), "{e:?}");
    }

    #[tokio::test]
    async fn a_write_past_its_deadline_is_a_write_timeout_of_its_type() {
        let coordinator = stalled();
        let deadline = Deadline::at(Instant::now() + Duration::from_millis(20));
        let e = coordinator
            .write(
                &keyspace(),
                Vec::new(),
                ConsistencyLevel::All,
                Durability::Periodic,
                WriteType::UnloggedBatch,
                deadline,
            )
            .await
            .expect_err("the replica never acknowledges");
        assert!(
            matches!(
                e,
                CoordinatorError::WriteTimeout {
                    consistency: ConsistencyLevel::All,
                    received: 0,
                    block_for: 1,
                    write_type: WriteType::UnloggedBatch,
                }
            ),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn a_local_read_queued_past_its_deadline_is_not_started() {
        let engine = Arc::new(storage::MemoryEngine::new());
        let replica = LocalReplica::new(engine);
        // An unknown table would be an error if the read ran; past the deadline it does not.
        let command = ReadCommand::Range {
            table: TableId::from_u128(9),
            start: storage::ScanStart::Beginning,
            end_token: None,
            max_rows: 1,
        };
        let e = replica
            .read(command, Deadline::at(Instant::now()))
            .await
            .expect_err("too late");
        assert!(matches!(e, CoordinatorError::DeadlinePassed), "{e:?}");
    }

    #[tokio::test]
    async fn a_truncate_past_its_deadline_is_a_truncate_timeout() {
        let coordinator = stalled();
        let started = Instant::now();
        let deadline = Deadline::at(started + Duration::from_millis(20));
        let e = coordinator
            .truncate(&keyspace(), TableId::from_u128(1), deadline)
            .await
            .expect_err("the replica never acknowledges");
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert!(
            matches!(e, CoordinatorError::TruncateTimeout { received: 0 }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "Truncate timed out - received only 0 responses"
        );
    }

    #[tokio::test]
    async fn a_truncate_removes_the_table_rows_through_the_local_replica() {
        use mutation::{LivenessInfo, Row};
        use storage::StorageEngine;
        let engine = Arc::new(storage::MemoryEngine::new());
        let table = TableId::from_u128(3);
        engine.create_table(table).expect("create");
        let key = PartitionKey {
            token: 1,
            key: vec![1],
        };
        let row = Row {
            liveness: Some(LivenessInfo {
                timestamp: 1,
                expiry: None,
            }),
            deletion: None,
            columns: Vec::new(),
        };
        let update = PartitionUpdate {
            table,
            key: key.clone(),
            header: None,
            static_row: None,
            rows: vec![(Vec::new(), row)],
        };
        engine.apply(&[update], Durability::None).expect("write");
        let ring = Ring {
            local_address: IpAddr::from([127, 0, 0, 1]),
            tokens: vec![0],
        };
        let coordinator = Coordinator::new(ring, Arc::new(LocalReplica::new(engine.clone())));
        let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
        coordinator
            .truncate(&keyspace(), table, deadline)
            .await
            .expect("truncated");
        let page = engine
            .read_partition(table, &key, &ClusteringSlice::all(), 10, None)
            .expect("read");
        assert!(page.data.rows.is_empty());
        // A table storage does not know is the replica's error, not a timeout.
        let e = coordinator
            .truncate(&keyspace(), TableId::from_u128(4), deadline)
            .await
            .expect_err("unknown table");
        assert!(matches!(e, CoordinatorError::Storage(_)), "{e:?}");
    }
}
