//! The coordinator: consistency levels, replica selection, read repair, and the replica
//! interface, as Cassandra's `StorageProxy`. Any node coordinates any request.
//!
//! Owns: deciding which replicas a mutation or read goes to (the keyspace's strategy over the
//! current ring, which membership swaps whole), how many of them must answer for a consistency
//! level, the [`Replica`] trait through which requests reach a replica (its verbs: apply a
//! mutation, read, digest, truncate), the seam through which the cluster says which endpoints
//! have a replica and are up ([`Endpoints`]), reconciling replicas' answers and repairing the
//! stale ones (read repair), the digest of a read's result ([`read_digest`]), the hook where
//! missed writes go to hinted handoff ([`HintedHandoff`]), and this node's write timestamps
//! ([`TimestampClock`]). A single node is [`SingleNode`]: its own storage is the only replica
//! (`replica::LocalReplica`, wired in by `node`); messaging and gossip plug in a cluster's
//! [`Endpoints`] without touching the query layer.
//!
//! Must not depend on: the CQL parser, the protocol, the storage engine (Cargo enforces it:
//! the read and write vocabulary comes from `mutation`), the `replica` crate (which depends on
//! this one), or messaging and gossip (they implement [`Replica`] and [`Endpoints`]).

mod batchlog;
mod clock;
mod consistency;
mod contact;
mod deadline;
mod digest;
mod endpoints;
mod hints;
mod paging;
mod range;
mod read;
mod reconcile;
mod replica;
mod speculation;
mod stats;
mod write;

pub use batchlog::{
    Batch, BatchError, BatchId, BatchlogReplay, BatchlogReplayConfig, BatchlogStore, ReplayPass,
    BATCH_FORMAT_VERSION,
};
pub use clock::{SystemClock, TimestampClock, TokioWallClock, WallClock};
pub use consistency::{ConsistencyLevel, ReadOrWrite};
pub use deadline::{Deadline, WriteType};
pub use digest::{read_digest, ReadDigest};
pub use endpoints::{Endpoints, SingleNode};
pub use hints::{HintedHandoff, MissedWrite, NoHints};
pub use replica::{Mutation, Replica, ReplicaError, ReplicaFuture};
pub use stats::{
    CoordinatorStats, CoordinatorStatsSnapshot, PerReplicaVerb, PerRequestKind, ReplicaVerb,
    RequestKind, TableStatsSnapshot,
};

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use arc_swap::ArcSwap;
use futures_util::stream::{FuturesUnordered, StreamExt};
use locator::{HostId, ReplicationStrategy, TokenMetadata};
use mutation::TableId;
use schema::KeyspaceMetadata;

#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// Not enough live replicas for the consistency level (CQL `Unavailable`): `required` is
    /// what the level needs, `alive` how many were live (of this data centre for the LOCAL_
    /// levels; of the data centre short of its quorum for EACH_QUORUM).
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
    /// Cassandra's words: `received` responses of the `block_for` the level needs, and whether
    /// the data response (not only digests) was among them.
    #[error("Operation timed out - received only {received} responses.")]
    ReadTimeout {
        consistency: ConsistencyLevel,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// The deadline of a write passed before enough replicas acknowledged it (CQL
    /// `WriteTimeout`): it may still be applied. `received` acknowledgements of the
    /// `block_for` the level needs (for the first partition short of them).
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

/// Executes mutations and reads against the replicas that own them, for any node's client.
pub struct Coordinator {
    /// The ring placement reads, shared with membership (which swaps in each new one) and the
    /// query layer. A request loads it once and uses that value throughout.
    ring: Arc<ArcSwap<TokenMetadata>>,
    /// Which endpoints have a replica and are up.
    endpoints: Arc<dyn Endpoints>,
    hints: Arc<dyn HintedHandoff>,
    timestamps: TimestampClock,
    /// The tasks awaiting acknowledgements that came late for their write's answer.
    late_acks: Arc<write::LateAcks>,
    /// Timeouts, unavailables, read latencies and speculative retries.
    stats: Arc<CoordinatorStats>,
    /// The speculation threshold of a table whose percentile latency is not measured yet:
    /// half the read timeout, as Cassandra's initial `sampleReadLatency`.
    unmeasured_threshold: Duration,
    /// The batch log's endpoint choice and counts.
    batchlog: batchlog::BatchlogState,
}

/// Cassandra's default `read_request_timeout` (5 s), whose half is the speculation threshold
/// before any read was measured (`Coordinator::with_read_request_timeout` changes it).
const DEFAULT_READ_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

impl Coordinator {
    /// The coordinator of a single node: `local` (this node's storage) is the only replica,
    /// every other endpoint of `token_metadata` counts as down, and missed writes are dropped
    /// (`NoHints`).
    pub fn new(token_metadata: Arc<TokenMetadata>, local: Arc<dyn Replica>) -> Coordinator {
        let endpoints = SingleNode::new(token_metadata.local_host_id(), local);
        Coordinator::for_cluster(Arc::new(ArcSwap::new(token_metadata)), Arc::new(endpoints))
    }

    /// The coordinator of a cluster: `ring` is the node's current `TokenMetadata`, which
    /// membership swaps (the same `ArcSwap` the query layer's `NodeInfo` reads), and
    /// `endpoints` says which endpoints have a replica and are up.
    pub fn for_cluster(
        ring: Arc<ArcSwap<TokenMetadata>>,
        endpoints: Arc<dyn Endpoints>,
    ) -> Coordinator {
        let seed = ring.load().local_host_id().0.as_u128();
        Coordinator {
            batchlog: batchlog::BatchlogState::new((seed ^ (seed >> 64)) as u64),
            ring,
            endpoints,
            hints: Arc::new(NoHints),
            timestamps: TimestampClock::default(),
            late_acks: Arc::default(),
            stats: Arc::default(),
            unmeasured_threshold: DEFAULT_READ_REQUEST_TIMEOUT / 2,
        }
    }

    /// Tells the coordinator the node's `read_request_timeout`: before a table's read latency
    /// is measured, a read speculates after half of it, as Cassandra's.
    pub fn with_read_request_timeout(mut self, timeout: Duration) -> Coordinator {
        self.unmeasured_threshold = timeout / 2;
        self
    }

    /// The coordinator's counters and latencies, for the node to show (shared: they go on
    /// counting).
    pub fn stats(&self) -> &Arc<CoordinatorStats> {
        &self.stats
    }

    /// Hands the mutations replicas miss to `hints` (hinted handoff, issue 36).
    pub fn with_hinted_handoff(mut self, hints: Arc<dyn HintedHandoff>) -> Coordinator {
        self.hints = hints;
        self
    }

    /// Reads write timestamps from `clock` instead of the system's (a simulation's clock).
    pub fn with_clock(mut self, clock: Arc<dyn WallClock>) -> Coordinator {
        self.timestamps = TimestampClock::new(clock);
        self
    }

    /// The ring as it is now (a snapshot: membership may swap in another meanwhile).
    pub fn token_metadata(&self) -> Arc<TokenMetadata> {
        self.ring.load_full()
    }

    /// The shared, swappable ring.
    pub fn ring(&self) -> &Arc<ArcSwap<TokenMetadata>> {
        &self.ring
    }

    /// A write timestamp for a statement whose client gave none: this node's clock in
    /// microseconds, strictly increasing (Cassandra's `ClientState.getTimestamp`).
    pub fn next_timestamp(&self) -> i64 {
        self.timestamps.next()
    }

    /// The replica of `endpoint` if it is live: up, with a replica to send to.
    fn live_replica(&self, endpoint: HostId) -> Option<Arc<dyn Replica>> {
        if !self.endpoints.is_alive(endpoint) {
            return None;
        }
        self.endpoints.replica(endpoint)
    }

    /// Removes every row of `table` on every node (TRUNCATE), as Cassandra's
    /// `StorageProxy.truncateBlocking`: every node of the ring must be live (else
    /// `Unavailable` at ALL with the ring's size and the live count, as Cassandra's) and must
    /// acknowledge before `deadline` (else `TruncateTimeout`). Every node, not only the
    /// keyspace's replicas: a node may still hold data of a keyspace whose replication an
    /// ALTER KEYSPACE moved away from it.
    pub async fn truncate(
        &self,
        keyspace: &KeyspaceMetadata,
        table: TableId,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let result = self.truncate_everywhere(keyspace, table, deadline).await;
        self.stats.count_outcome(RequestKind::Truncate, &result);
        result
    }

    /// `truncate` but for the counting.
    async fn truncate_everywhere(
        &self,
        _keyspace: &KeyspaceMetadata,
        table: TableId,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let ring = self.ring.load_full();
        let everyone: Vec<HostId> = ring.topology().endpoints().map(|e| e.host_id).collect();
        let live: Vec<Arc<dyn Replica>> = everyone
            .iter()
            .filter_map(|e| self.live_replica(*e))
            .collect();
        check_available(ConsistencyLevel::All, everyone.len(), live.len())?;
        let mut pending: FuturesUnordered<_> = live
            .iter()
            .map(|replica| replica.truncate(table, deadline))
            .collect();
        let mut received = 0;
        while received < live.len() {
            match by_deadline(pending.next(), deadline).await {
                Some(Some(Ok(()))) => received += 1,
                // A replica that did not start it in time is as late as one that did not answer.
                Some(Some(Err(e))) if e.is_no_answer() => {
                    self.stats.count_replica_timeouts(ReplicaVerb::Truncate, 1);
                    return Err(CoordinatorError::TruncateTimeout {
                        received: received as i32,
                    });
                }
                Some(None) | None => {
                    self.stats
                        .count_replica_timeouts(ReplicaVerb::Truncate, live.len() - received);
                    return Err(CoordinatorError::TruncateTimeout {
                        received: received as i32,
                    });
                }
                Some(Some(Err(e))) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// What a request's plan reads of the ring: the replicas of a token, which are live, which data
/// centres they are in, and their order by proximity.
pub(crate) struct Placement<'a> {
    coordinator: &'a Coordinator,
    ring: &'a TokenMetadata,
    keyspace: &'a KeyspaceMetadata,
}

impl<'a> Placement<'a> {
    fn new(
        coordinator: &'a Coordinator,
        ring: &'a TokenMetadata,
        keyspace: &'a KeyspaceMetadata,
    ) -> Placement<'a> {
        Placement {
            coordinator,
            ring,
            keyspace,
        }
    }

    fn local_dc(&self) -> &'a str {
        &self.ring.local_endpoint().location.datacenter
    }

    /// The data centre of `endpoint` (`None` for one the topology does not know).
    fn datacenter(&self, endpoint: HostId) -> Option<&'a str> {
        self.ring
            .topology()
            .location(endpoint)
            .map(|l| l.datacenter.as_str())
    }

    /// The endpoints that replicate `token` in the keyspace, primary first: its strategy over
    /// the ring. A node-served (virtual) keyspace is this node's.
    fn natural_replicas(&self, token: i64) -> Vec<HostId> {
        if self.keyspace.virtual_keyspace {
            return vec![self.ring.local_host_id()];
        }
        self.keyspace
            .replication
            .strategy()
            .natural_replicas(self.ring, token)
    }

    /// Fails with `Unavailable` unless enough of `replicas` are live for `consistency` (only
    /// this data centre's for the LOCAL_ levels, each data centre's quorum for EACH_QUORUM), as
    /// Cassandra's `assureSufficientLiveReplicas`.
    fn check_live(
        &self,
        consistency: ConsistencyLevel,
        required: usize,
        replicas: &[HostId],
    ) -> Result<(), CoordinatorError> {
        let live = |dc: Option<&str>| {
            replicas
                .iter()
                .filter(|e| dc.is_none_or(|dc| self.datacenter(**e) == Some(dc)))
                .filter(|e| self.coordinator.live_replica(**e).is_some())
                .count()
        };
        if let (
            ConsistencyLevel::EachQuorum,
            ReplicationStrategy::NetworkTopology { datacenters },
        ) = (consistency, self.keyspace.replication.strategy())
        {
            for (dc, &rf) in datacenters {
                check_available(consistency, rf as usize / 2 + 1, live(Some(dc)))?;
            }
            return Ok(());
        }
        let dc = consistency.is_datacenter_local().then(|| self.local_dc());
        check_available(consistency, required, live(dc))
    }

    /// How close `endpoint` is: this node, then its data centre, then the others. (A simple
    /// proximity; Cassandra's dynamic snitch also weighs measured latencies.)
    fn distance(&self, endpoint: HostId) -> u8 {
        if endpoint == self.ring.local_host_id() {
            0
        } else if self.datacenter(endpoint) == Some(self.local_dc()) {
            1
        } else {
            2
        }
    }

    /// The replicas a read at `consistency` contacts, closest first: `block_for` (at least
    /// one) of the live ones among `replicas` (of this data centre for the LOCAL_ levels; for
    /// EACH_QUORUM the closest quorum of each data centre), as Cassandra's
    /// `ReplicaPlans.forRead` without speculative retries. The caller checked there are enough.
    fn contacts_for_read(
        &self,
        consistency: ConsistencyLevel,
        block_for: usize,
        replicas: &[HostId],
    ) -> Vec<(HostId, Arc<dyn Replica>)> {
        self.read_plan(consistency, block_for, replicas).0
    }

    /// `contacts_for_read`'s contacts, and the live replica a speculative retry would go to:
    /// the closest one not contacted (of this data centre for the LOCAL_ levels; none for
    /// EACH_QUORUM, which never speculates), as Cassandra's `firstUncontactedCandidate`.
    #[allow(clippy::type_complexity)] // two lists of the same contacts
    fn read_plan(
        &self,
        consistency: ConsistencyLevel,
        block_for: usize,
        replicas: &[HostId],
    ) -> (
        Vec<(HostId, Arc<dyn Replica>)>,
        Option<(HostId, Arc<dyn Replica>)>,
    ) {
        let local_only = consistency.is_datacenter_local();
        let mut live: Vec<(u8, HostId, Arc<dyn Replica>)> = replicas
            .iter()
            .filter(|e| !local_only || self.datacenter(**e) == Some(self.local_dc()))
            .filter_map(|e| Some((self.distance(*e), *e, self.coordinator.live_replica(*e)?)))
            .collect();
        // Stable: equally close replicas keep the ring's order.
        live.sort_by_key(|(distance, _, _)| *distance);
        if let (
            ConsistencyLevel::EachQuorum,
            ReplicationStrategy::NetworkTopology { datacenters },
        ) = (consistency, self.keyspace.replication.strategy())
        {
            let mut chosen = Vec::new();
            for (dc, &rf) in datacenters {
                let quorum = rf as usize / 2 + 1;
                chosen.extend(
                    live.iter()
                        .filter(|(_, e, _)| self.datacenter(*e) == Some(dc.as_str()))
                        .take(quorum)
                        .cloned(),
                );
            }
            chosen.sort_by_key(|(distance, _, _)| *distance);
            live = chosen;
            let contacts = live.into_iter().take(block_for.max(1));
            return (contacts.map(|(_, e, r)| (e, r)).collect(), None);
        }
        let mut live = live.into_iter().map(|(_, e, r)| (e, r));
        let contacts = live.by_ref().take(block_for.max(1)).collect();
        (contacts, live.next())
    }
}

/// `work`'s output, or `None` if `deadline` passes first. Work that completes on its first
/// poll (most local reads) costs no timer.
async fn by_deadline<T>(work: impl Future<Output = T>, deadline: Deadline) -> Option<T> {
    until(work, deadline.instant()).await
}

/// `work`'s output, or `None` if `instant` (of tokio's clock) comes first. Work that completes
/// on its first poll costs no timer.
async fn until<T>(work: impl Future<Output = T>, instant: tokio::time::Instant) -> Option<T> {
    let mut work = pin!(work);
    let first = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await;
    match first {
        Poll::Ready(done) => Some(done),
        Poll::Pending => tokio::time::timeout_at(instant, work).await.ok(),
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
mod tests;
