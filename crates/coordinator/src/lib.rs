//! The coordinator: consistency levels, replica selection, and the replica interface.
//!
//! Owns: deciding which replicas a mutation or read goes to (the token ring), how many of them
//! must answer for a consistency level, the [`Replica`] trait through which requests reach a
//! replica (its verbs: apply a mutation, read, digest, truncate), the digest of a read's result
//! ([`read_digest`]), and the hook where missed writes go to hinted handoff
//! ([`HintedHandoff`]). Today the ring has one node and the only replica is this node's
//! storage (`replica::LocalReplica`, wired in by `node`); a network transport implements
//! [`Replica`] later without touching the query layer.
//!
//! Must not depend on: the CQL parser, the protocol, the storage engine (Cargo enforces it:
//! the read and write vocabulary comes from `mutation`) or the `replica` crate, which depends
//! on this one.

mod consistency;
mod deadline;
mod digest;
mod hints;
mod replica;

pub use consistency::{ConsistencyLevel, ReadOrWrite};
pub use deadline::{Deadline, WriteType};
pub use digest::{read_digest, ReadDigest};
pub use hints::{HintedHandoff, MissedWrite, NoHints};
pub use replica::{Mutation, Replica, ReplicaError, ReplicaFuture};

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;

use locator::{HostId, ReplicationStrategy, TokenMetadata};
use mutation::{PartitionUpdate, ReadCommand, ReadResponse, ScanStart, TableId};
use schema::KeyspaceMetadata;

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
    /// A replica failed the request (the query layer answers a server error with its
    /// message).
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// The deadline of a TRUNCATE passed before every node acknowledged it, in the words of
    /// Cassandra's `TruncateResponseHandler`; it may still be applied.
    #[error("Truncate timed out - received only {received} responses")]
    TruncateTimeout { received: i32 },
}

/// Executes mutations and reads against the replicas that own them.
pub struct Coordinator {
    /// The ring placement reads. Fixed for the node's life today (one node); membership will
    /// swap in new ones.
    token_metadata: Arc<TokenMetadata>,
    /// This node's replica. Other endpoints have none until there is a transport to them, so
    /// they count as down.
    local: Arc<dyn Replica>,
    hints: Arc<dyn HintedHandoff>,
}

impl Coordinator {
    /// A coordinator whose replicas' missed writes are dropped (`NoHints`).
    pub fn new(token_metadata: Arc<TokenMetadata>, local: Arc<dyn Replica>) -> Coordinator {
        Coordinator {
            token_metadata,
            local,
            hints: Arc::new(NoHints),
        }
    }

    /// Hands the mutations replicas miss to `hints` (hinted handoff, issue 36).
    pub fn with_hinted_handoff(mut self, hints: Arc<dyn HintedHandoff>) -> Coordinator {
        self.hints = hints;
        self
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

    /// Writes mutations of one keyspace at `consistency`: sends them to the replicas as one
    /// `Mutation` (with the keyspace's `durable_writes`; each replica applies it with its own
    /// commit log mode) and waits for as many acknowledgements as the level needs. `updates`
    /// may span partitions; each replica applies its share atomically. Past `deadline` the
    /// write is answered with a `WriteTimeout` of `write_type`; it may still be applied, as in
    /// Cassandra. A replica that fails or times out gets the mutation as a hint.
    pub async fn write(
        &self,
        keyspace: &KeyspaceMetadata,
        updates: Vec<PartitionUpdate>,
        consistency: ConsistencyLevel,
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
        let mutation = Mutation {
            updates: Arc::new(updates),
            durable_writes: keyspace.durable_writes,
        };
        // This node's replica is the only live one today. With several, each replica gets
        // its share and the coordinator waits for `required` acknowledgements per partition.
        for replica in [&self.local] {
            match by_deadline(replica.apply_mutation(mutation.clone(), deadline), deadline).await {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    self.hints
                        .write_missed(replica, &mutation, MissedWrite::Failed(e.clone()));
                    return Err(e.into());
                }
                None => {
                    self.hints
                        .write_missed(replica, &mutation, MissedWrite::TimedOut);
                    return Err(timeout());
                }
            }
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
            match by_deadline(node.truncate(table, deadline), deadline).await {
                Some(Ok(())) => {}
                // A replica that did not start it in time is as late as one that did not answer.
                Some(Err(ReplicaError::DeadlinePassed)) | None => {
                    return Err(CoordinatorError::TruncateTimeout { received })
                }
                Some(Err(e)) => return Err(e.into()),
            }
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
            Some(Err(ReplicaError::DeadlinePassed)) | None => Err(timeout()),
            Some(done) => Ok(done?),
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
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use mutation::{ClusteringSlice, PartitionKey, TableId};
    use schema::Replication;

    use super::*;

    /// A replica that never answers (a stalled disk, a dead peer).
    struct Stalled;

    impl Replica for Stalled {
        fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
            Box::pin(std::future::pending())
        }
        fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
            Box::pin(std::future::pending())
        }
        fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
            Box::pin(std::future::pending())
        }
        fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
            Box::pin(std::future::pending())
        }
    }

    /// A replica that refuses every request with `error`.
    struct Failing(ReplicaError);

    impl Replica for Failing {
        fn apply_mutation(&self, _: Mutation, _: Deadline) -> ReplicaFuture<()> {
            Box::pin(std::future::ready(Err(self.0.clone())))
        }
        fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
            Box::pin(std::future::ready(Err(self.0.clone())))
        }
        fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
            Box::pin(std::future::ready(Err(self.0.clone())))
        }
        fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
            Box::pin(std::future::ready(Err(self.0.clone())))
        }
    }

    /// Hinted handoff that records what it is handed.
    #[derive(Default)]
    struct RecordedHints(Mutex<Vec<(Mutation, MissedWrite)>>);

    impl HintedHandoff for RecordedHints {
        fn write_missed(&self, _: &Arc<dyn Replica>, mutation: &Mutation, why: MissedWrite) {
            self.0.lock().expect("lock").push((mutation.clone(), why));
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

    fn coordinator(replica: impl Replica) -> Coordinator {
        Coordinator::new(one_node(), Arc::new(replica))
    }

    fn stalled() -> Coordinator {
        coordinator(Stalled)
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
        fn apply_mutation(&self, mutation: Mutation, _: Deadline) -> ReplicaFuture<()> {
            self.0
                .fetch_add(mutation.updates.len(), std::sync::atomic::Ordering::Relaxed);
            Box::pin(std::future::ready(Ok(())))
        }
        fn read(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadResponse> {
            Box::pin(std::future::pending())
        }
        fn digest(&self, _: ReadCommand, _: Deadline) -> ReplicaFuture<ReadDigest> {
            Box::pin(std::future::pending())
        }
        fn truncate(&self, _: TableId, _: Deadline) -> ReplicaFuture<()> {
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
    async fn a_write_a_replica_did_not_acknowledge_in_time_is_handed_to_hinted_handoff() {
        let hints = Arc::new(RecordedHints::default());
        let coordinator = stalled().with_hinted_handoff(hints.clone());
        let mut keyspace = keyspace();
        keyspace.durable_writes = false;
        let deadline = Deadline::at(Instant::now() + Duration::from_millis(20));
        let e = coordinator
            .write(
                &keyspace,
                vec![update(1)],
                ConsistencyLevel::One,
                WriteType::Simple,
                deadline,
            )
            .await
            .expect_err("the replica never acknowledges");
        assert!(matches!(e, CoordinatorError::WriteTimeout { .. }), "{e:?}");
        let recorded = hints.0.lock().expect("lock");
        assert_eq!(recorded.len(), 1);
        let (mutation, why) = &recorded[0];
        assert_eq!(*mutation.updates, vec![update(1)]);
        assert!(
            !mutation.durable_writes,
            "the keyspace's durable_writes travels with the hint"
        );
        assert_eq!(*why, MissedWrite::TimedOut);
    }

    #[tokio::test]
    async fn a_write_a_replica_failed_is_handed_to_hinted_handoff_and_answers_its_error() {
        let hints = Arc::new(RecordedHints::default());
        let failure = ReplicaError::Storage("disk full".to_string());
        let coordinator = coordinator(Failing(failure.clone())).with_hinted_handoff(hints.clone());
        let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
        let e = coordinator
            .write(
                &keyspace(),
                vec![update(1)],
                ConsistencyLevel::One,
                WriteType::Simple,
                deadline,
            )
            .await
            .expect_err("the replica fails");
        // The client's words are the replica's (a server error in the query layer).
        assert_eq!(e.to_string(), "storage error: disk full");
        let recorded = hints.0.lock().expect("lock");
        assert_eq!(recorded.len(), 1);
        assert!(
            recorded[0].0.durable_writes,
            "durable_writes of the keyspace"
        );
        assert_eq!(recorded[0].1, MissedWrite::Failed(failure));
    }

    #[tokio::test]
    async fn a_read_the_replica_did_not_start_past_its_deadline_is_a_read_timeout() {
        let coordinator = coordinator(Failing(ReplicaError::DeadlinePassed));
        let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
        let e = coordinator
            .read(&keyspace(), read(), ConsistencyLevel::One, deadline)
            .await
            .expect_err("not started");
        assert!(matches!(e, CoordinatorError::ReadTimeout { .. }), "{e:?}");
    }

    #[test]
    fn replica_errors_keep_the_words_clients_saw() {
        // The query layer answers these as server errors with these messages: unchanged from
        // when the coordinator carried storage's error itself.
        let cases = [
            (
                ReplicaError::UnknownTable(TableId::from_u128(1)),
                "storage error: unknown table 00000000-0000-0000-0000-000000000001",
            ),
            (
                ReplicaError::Storage("invalid storage request: too big".to_string()),
                "storage error: invalid storage request: too big",
            ),
            (
                ReplicaError::Internal("panicked".to_string()),
                "replica task failed: panicked",
            ),
        ];
        for (e, words) in cases {
            assert_eq!(CoordinatorError::from(e).to_string(), words);
        }
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
    async fn a_truncate_a_replica_refused_is_its_error_and_one_it_did_not_start_a_timeout() {
        let deadline = Deadline::at(Instant::now() + Duration::from_secs(60));
        let unknown = ReplicaError::UnknownTable(TableId::from_u128(4));
        let e = coordinator(Failing(unknown.clone()))
            .truncate(&keyspace(), TableId::from_u128(4), deadline)
            .await
            .expect_err("unknown table");
        assert!(
            matches!(&e, CoordinatorError::Replica(r) if *r == unknown),
            "{e:?}"
        );
        let e = coordinator(Failing(ReplicaError::DeadlinePassed))
            .truncate(&keyspace(), TableId::from_u128(4), deadline)
            .await
            .expect_err("not started");
        assert!(
            matches!(e, CoordinatorError::TruncateTimeout { received: 0 }),
            "{e:?}"
        );
    }
}
