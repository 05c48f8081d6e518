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
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use locator::{HostId, ReplicationStrategy, TokenMetadata};
use schema::KeyspaceMetadata;
use storage::{Durability, PartitionUpdate, ScanStart};

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
    /// A replica did not start a read whose deadline had passed (the coordinator answers the
    /// timeout).
    #[error("the request's deadline passed before the replica started it")]
    DeadlinePassed,
    #[error("storage error: {0}")]
    Storage(#[from] storage::StorageError),
    #[error("replica task failed: {0}")]
    Internal(String),
}

/// Executes mutations and reads against the replicas that own them.
pub struct Coordinator {
    /// The ring placement reads. Fixed for the node's life today (one node); membership will
    /// swap in new ones.
    token_metadata: Arc<TokenMetadata>,
    /// This node's replica. Other endpoints have none until there is a transport to them, so
    /// they count as down.
    local: Arc<dyn Replica>,
}

impl Coordinator {
    pub fn new(token_metadata: Arc<TokenMetadata>, local: Arc<dyn Replica>) -> Coordinator {
        Coordinator {
            token_metadata,
            local,
        }
    }

    pub fn token_metadata(&self) -> &Arc<TokenMetadata> {
        &self.token_metadata
    }

    fn local_dc(&self) -> &str {
        &self.token_metadata.local_endpoint().location.datacenter
    }

    /// The endpoints that replicate `token` in `keyspace`, primary first: the keyspace's
    /// strategy over the current ring. A node-served (virtual) keyspace is this node's.
    fn natural_replicas(&self, keyspace: &KeyspaceMetadata, token: i64) -> Vec<HostId> {
        if keyspace.virtual_keyspace {
            return vec![self.token_metadata.local_host_id()];
        }
        keyspace
            .replication
            .strategy()
            .natural_replicas(&self.token_metadata, token)
    }

    /// The replica that serves `endpoint`'s requests, if it is up (only this node today).
    fn replica(&self, endpoint: HostId) -> Option<&Arc<dyn Replica>> {
        (endpoint == self.token_metadata.local_host_id()).then_some(&self.local)
    }

    /// Fails with `Unavailable` unless enough of `replicas` are up for `consistency` (only this
    /// data centre's for the LOCAL_ levels, each data centre's quorum for EACH_QUORUM), as
    /// Cassandra's `assureSufficientLiveReplicas`.
    fn check_live_replicas(
        &self,
        keyspace: &KeyspaceMetadata,
        consistency: ConsistencyLevel,
        required: usize,
        replicas: &[HostId],
    ) -> Result<(), CoordinatorError> {
        let topology = self.token_metadata.topology();
        let in_dc = |endpoint: &HostId, dc: &str| {
            topology
                .location(*endpoint)
                .is_some_and(|l| l.datacenter == dc)
        };
        let live = |dc: Option<&str>| {
            replicas
                .iter()
                .filter(|e| self.replica(**e).is_some())
                .filter(|e| dc.is_none_or(|dc| in_dc(e, dc)))
                .count()
        };
        if let (
            ConsistencyLevel::EachQuorum,
            ReplicationStrategy::NetworkTopology { datacenters },
        ) = (consistency, keyspace.replication.strategy())
        {
            for (dc, &rf) in datacenters {
                check_available(consistency, rf as usize / 2 + 1, live(Some(dc)))?;
            }
            return Ok(());
        }
        let dc = consistency.is_datacenter_local().then(|| self.local_dc());
        check_available(consistency, required, live(dc))
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
        let required = consistency.block_for(keyspace, ReadOrWrite::Write, self.local_dc())?;
        // Every partition needs enough live replicas before anything is sent. This node is
        // the only live replica there is today (`replica`), so it is sent every partition once
        // one is its own: a partition that passed the check and is not its own has a live
        // replica elsewhere, which cannot happen yet. With several nodes, each replica gets its
        // share and the coordinator waits for `required` acknowledgements per partition.
        let local = self.token_metadata.local_host_id();
        let mut local_replicates = false;
        for update in &updates {
            let replicas = self.natural_replicas(keyspace, update.key.token);
            self.check_live_replicas(keyspace, consistency, required, &replicas)?;
            local_replicates |= replicas.contains(&local);
        }
        let timeout = || CoordinatorError::WriteTimeout {
            consistency,
            received: 0,
            block_for: required as i32,
            write_type,
        };
        if deadline.passed() {
            return Err(timeout());
        }
        if !local_replicates {
            return Ok(());
        }
        by_deadline(self.local.apply(Arc::new(updates), durability), deadline)
            .await
            .unwrap_or_else(|| Err(timeout()))
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
        let required = consistency.block_for(keyspace, ReadOrWrite::Read, self.local_dc())?;
        let replicas = self.natural_replicas(keyspace, read_token(&command));
        self.check_live_replicas(keyspace, consistency, required, &replicas)?;
        // The closest live replica: this node if it is one.
        let replica = replicas
            .iter()
            .find_map(|e| self.replica(*e))
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

/// The token whose replicas serve `command`: its partition's, or for a scan the token it
/// starts at (the ring's start for a scan from the beginning or resumed: this node owns every
/// range today; with several nodes a scan is split at range boundaries, each part sent to its
/// own replicas).
fn read_token(command: &ReadCommand) -> i64 {
    match command {
        ReadCommand::Partition { key, .. } => key.token,
        ReadCommand::Range {
            start: ScanStart::Token(token),
            ..
        } => *token,
        ReadCommand::Range { .. } => i64::MIN,
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
    use storage::{ClusteringSlice, PartitionKey, TableId};

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

    fn endpoint(node: u8, dc: &str) -> locator::Endpoint {
        let address = std::net::IpAddr::from([127, 0, 0, node]);
        locator::Endpoint {
            host_id: HostId(uuid::Uuid::from_u128(node.into())),
            broadcast_address: address,
            native_address: address,
            native_port: 9042,
            location: locator::Location {
                datacenter: dc.to_string(),
                rack: "rack1".to_string(),
            },
            state: locator::NodeState::Normal,
        }
    }

    /// The ring of this node alone, owning token 0.
    fn one_node() -> Arc<TokenMetadata> {
        Arc::new(TokenMetadata::new(endpoint(1, "dc1"), vec![0]).expect("ring"))
    }

    fn stalled() -> Coordinator {
        Coordinator::new(one_node(), Arc::new(Stalled))
    }

    fn update(token: i64) -> PartitionUpdate {
        PartitionUpdate {
            table: TableId::from_u128(1),
            key: PartitionKey {
                token,
                key: vec![1],
            },
            header: None,
            static_row: None,
            rows: Vec::new(),
        }
    }

    /// A replica that acknowledges every write and counts them.
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    impl Replica for Arc<Counting> {
        fn apply(&self, updates: Arc<Vec<PartitionUpdate>>, _: Durability) -> ReplicaFuture<()> {
            self.0
                .fetch_add(updates.len(), std::sync::atomic::Ordering::Relaxed);
            Box::pin(std::future::ready(Ok(())))
        }
        fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
            Box::pin(std::future::pending())
        }
    }

    fn keyspace_with(options: &[(&str, &str)]) -> KeyspaceMetadata {
        KeyspaceMetadata {
            replication: Replication::from_stored(
                options
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
            .expect("valid"),
            ..keyspace()
        }
    }

    #[tokio::test]
    async fn replicas_come_from_the_keyspace_strategy_over_the_ring() {
        // This node (dc1) owns token 0; node 2 (dc2), which has no replica here and so counts
        // as down, owns token 100.
        let ring = one_node()
            .with_normal_tokens(endpoint(2, "dc2"), vec![100])
            .expect("ring");
        let counting = Arc::new(Counting::default());
        let coordinator = Coordinator::new(Arc::new(ring), Arc::new(counting.clone()));
        let deadline = || Deadline::at(Instant::now() + Duration::from_secs(5));
        let write = |ks: KeyspaceMetadata, token, consistency| {
            let coordinator = &coordinator;
            async move {
                coordinator
                    .write(
                        &ks,
                        vec![update(token)],
                        consistency,
                        Durability::Periodic,
                        WriteType::Simple,
                        deadline(),
                    )
                    .await
            }
        };
        let simple = |rf| {
            keyspace_with(&[
                ("class", "org.apache.cassandra.locator.SimpleStrategy"),
                ("replication_factor", rf),
            ])
        };
        // RF 1: token 50 is node 2's alone, token 150 (wrapping to 0) this node's.
        let e = write(simple("1"), 50, ConsistencyLevel::One)
            .await
            .expect_err("its replica is down");
        assert!(
            matches!(
                e,
                CoordinatorError::Unavailable {
                    required: 1,
                    alive: 0,
                    ..
                }
            ),
            "{e:?}"
        );
        write(simple("1"), 150, ConsistencyLevel::One)
            .await
            .expect("this node's");
        // RF 2: both nodes; ONE is met by this node, QUORUM is not.
        write(simple("2"), 50, ConsistencyLevel::One)
            .await
            .expect("one of two");
        let e = write(simple("2"), 50, ConsistencyLevel::Quorum)
            .await
            .expect_err("two of two");
        assert!(
            matches!(
                e,
                CoordinatorError::Unavailable {
                    required: 2,
                    alive: 1,
                    ..
                }
            ),
            "{e:?}"
        );
        // LOCAL_QUORUM counts dc1 only: its one replica is up. EACH_QUORUM needs dc2's too.
        let nts = keyspace_with(&[
            (
                "class",
                "org.apache.cassandra.locator.NetworkTopologyStrategy",
            ),
            ("dc1", "1"),
            ("dc2", "1"),
        ]);
        write(nts.clone(), 50, ConsistencyLevel::LocalQuorum)
            .await
            .expect("dc1's replica is up");
        let e = write(nts.clone(), 50, ConsistencyLevel::EachQuorum)
            .await
            .expect_err("dc2's replica is down");
        assert!(
            matches!(
                e,
                CoordinatorError::Unavailable {
                    required: 1,
                    alive: 0,
                    ..
                }
            ),
            "{e:?}"
        );
        let only_dc2 = keyspace_with(&[
            (
                "class",
                "org.apache.cassandra.locator.NetworkTopologyStrategy",
            ),
            ("dc2", "1"),
        ]);
        let e = write(only_dc2, 150, ConsistencyLevel::LocalOne)
            .await
            .expect_err("no replica in dc1");
        assert!(matches!(e, CoordinatorError::Unavailable { .. }), "{e:?}");
        assert_eq!(
            counting.0.load(std::sync::atomic::Ordering::Relaxed),
            3,
            "only the writes that passed were applied"
        );
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
                vec![update(1)],
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
}
