//! The batch log (Cassandra's `StorageProxy.mutateAtomically` and `BatchlogManager`): a LOGGED
//! batch of more than one partition is first stored whole on up to two other live nodes of
//! this data centre (its batch log endpoints), then written to its replicas, then removed from
//! the batch log endpoints once every partition reached its consistency level. Every node
//! replays the batches it holds that are older than twice the write timeout (their coordinator
//! died or timed out before removing them), sending each mutation to its live replicas and
//! hinting the others, then deletes them once those hints are fsynced (`HintedHandoff::
//! make_durable`, as Cassandra's `flushAndFsyncBlockingly`). So a batch whose log write was acknowledged is
//! applied whole eventually, even if its coordinator dies midway.
//!
//! What is stored, and the verbs' payload after the batch id (`Batch::body`):
//!
//! ```text
//! u8  BATCH_FORMAT_VERSION (1)
//! u32 mutation count (big-endian)
//! per mutation: u32 length, then `mutation::encode_mutation` bytes (its own version first)
//! ```
//!
//! A mutation is one keyspace's share of the batch; nothing may follow the last one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use locator::{HostId, TokenMetadata};
use mutation::PartitionUpdate;
use schema::{KeyspaceMetadata, Schema};

use crate::{
    ConsistencyLevel, Coordinator, CoordinatorError, Deadline, MissedWrite, Mutation, Placement,
    ReadOrWrite, ReplicaError, RequestKind, WriteType,
};

/// The version byte a batch's body starts with.
pub const BATCH_FORMAT_VERSION: u8 = 1;

/// How many stored batches the replay reads at once (Cassandra's `DEFAULT_PAGE_SIZE`): its
/// memory is bounded by a page, whatever the batch log holds.
const REPLAY_PAGE_BATCHES: usize = 128;

/// How long the coordinator's removal of a batch from its batch log endpoints may take. The
/// removal is not awaited by the client; a batch whose removal is lost is replayed (harmlessly:
/// its mutations were applied) once it is older than the replay timeout.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The 60-bit timestamp of a version 1 UUID counts 100 ns intervals since 1582-10-15; this
/// many separate that day from the Unix epoch.
const GREGORIAN_TO_UNIX_100NS: i64 = 0x01B2_1DD2_1381_4000;

/// A batch's id: a version 1 (time-based) UUID, as Cassandra's `TimeUUID`, so its age is read
/// off it. Unique per coordinator by its timestamp (the coordinator's strictly increasing
/// microseconds) and across coordinators by its node and clock sequence bits (from the host id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchId(pub [u8; 16]);

impl BatchId {
    /// The id of a batch written at `micros` (Unix microseconds) by the coordinator `host`.
    pub fn new(micros: i64, host: HostId) -> BatchId {
        let ticks = (micros * 10 + GREGORIAN_TO_UNIX_100NS) as u64 & ((1 << 60) - 1);
        let host_bits = host.0.as_u128();
        // 14 bits of clock sequence and 48 of node, both from the host id.
        let clock_seq = ((host_bits >> 48) as u16) & 0x3fff;
        let node = (host_bits as u64) & 0xffff_ffff_ffff;
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&(ticks as u32).to_be_bytes());
        b[4..6].copy_from_slice(&((ticks >> 32) as u16).to_be_bytes());
        b[6..8].copy_from_slice(&((((ticks >> 48) as u16) & 0x0fff) | 0x1000).to_be_bytes());
        b[8] = 0x80 | (clock_seq >> 8) as u8;
        b[9] = clock_seq as u8;
        b[10..16].copy_from_slice(&node.to_be_bytes()[2..]);
        BatchId(b)
    }

    /// When the batch was written, in Unix milliseconds (what the replay's age threshold
    /// compares).
    pub fn unix_millis(&self) -> i64 {
        let b = &self.0;
        let low = u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as u64;
        let mid = u16::from_be_bytes([b[4], b[5]]) as u64;
        let high = (u16::from_be_bytes([b[6], b[7]]) & 0x0fff) as u64;
        let ticks = (high << 48 | mid << 32 | low) as i64;
        (ticks - GREGORIAN_TO_UNIX_100NS) / 10_000
    }

    /// The id as a UUID (what `system.batches` would show).
    pub fn as_uuid(&self) -> uuid::Uuid {
        uuid::Uuid::from_bytes(self.0)
    }
}

/// A batch as a batch log endpoint stores it: its id and its mutations, encoded once by the
/// coordinator (`Batch::encode`) and stored as they arrived. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub id: BatchId,
    /// The encoded mutations (the format in the module's header). Invariant: well formed
    /// (`Batch::new` checks it), so a stored batch always decodes.
    body: Arc<[u8]>,
}

/// A batch body that is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("malformed batch: {0}")]
    Malformed(&'static str),
    #[error("unknown batch format version {0}")]
    Version(u8),
    #[error("malformed batch mutation: {0}")]
    Mutation(#[from] mutation::MutationError),
}

impl Batch {
    /// The batch `id` of `mutations` (each one keyspace's partition updates).
    pub fn encode(id: BatchId, mutations: &[&[PartitionUpdate]]) -> Batch {
        let mut body = Vec::with_capacity(64);
        body.push(BATCH_FORMAT_VERSION);
        body.extend_from_slice(&(mutations.len() as u32).to_be_bytes());
        let mut encoded = Vec::new();
        for updates in mutations {
            encoded.clear();
            mutation::encode_mutation(updates, &mut encoded);
            body.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
            body.extend_from_slice(&encoded);
        }
        Batch {
            id,
            body: body.into(),
        }
    }

    /// The batch `id` with `body` as received or stored: refused unless every mutation in it
    /// decodes (so that a stored batch can be replayed).
    pub fn new(id: BatchId, body: &[u8]) -> Result<Batch, BatchError> {
        decode_body(body)?;
        Ok(Batch {
            id,
            body: body.into(),
        })
    }

    /// The encoded mutations (stored and sent as they are).
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Each mutation's encoding (`mutation::encode_mutation`), as `system.batches` shows them.
    pub fn encoded_mutations(&self) -> Vec<&[u8]> {
        let mut rest = &self.body[1..];
        let count = take_u32(&mut rest).expect("a batch is well formed (`Batch::new`)");
        (0..count)
            .map(|_| {
                let len = take_u32(&mut rest).expect("a batch is well formed") as usize;
                let (encoded, after) = rest.split_at(len);
                rest = after;
                encoded
            })
            .collect()
    }

    /// The batch's mutations, each one keyspace's partition updates.
    pub fn mutations(&self) -> Result<Vec<Vec<PartitionUpdate>>, BatchError> {
        decode_body(&self.body)
    }
}

fn decode_body(body: &[u8]) -> Result<Vec<Vec<PartitionUpdate>>, BatchError> {
    let (&version, mut rest) = body
        .split_first()
        .ok_or(BatchError::Malformed("empty batch"))?;
    if version != BATCH_FORMAT_VERSION {
        return Err(BatchError::Version(version));
    }
    let count = take_u32(&mut rest)? as usize;
    // Each mutation takes at least its 4-byte length: no allocation beyond the bytes present.
    if count > rest.len() / 4 {
        return Err(BatchError::Malformed(
            "mutation count exceeds the bytes present",
        ));
    }
    let mut mutations = Vec::with_capacity(count);
    for _ in 0..count {
        let len = take_u32(&mut rest)? as usize;
        if len > rest.len() {
            return Err(BatchError::Malformed(
                "mutation length exceeds the bytes present",
            ));
        }
        let (encoded, after) = rest.split_at(len);
        mutations.push(mutation::decode_mutation(encoded)?);
        rest = after;
    }
    if !rest.is_empty() {
        return Err(BatchError::Malformed("bytes after the last mutation"));
    }
    Ok(mutations)
}

fn take_u32(rest: &mut &[u8]) -> Result<u32, BatchError> {
    if rest.len() < 4 {
        return Err(BatchError::Malformed("truncated length"));
    }
    let (head, tail) = rest.split_at(4);
    *rest = tail;
    Ok(u32::from_be_bytes([head[0], head[1], head[2], head[3]]))
}

/// A node's stored batches, for its replay (`replica::BatchlogStorage` over storage). Its
/// calls may block on storage: the replay runs them on tokio's blocking pool.
pub trait BatchlogStore: Send + Sync + 'static {
    /// At most `limit` of the batches this node stores, oldest first (by the time in their
    /// ids, then their ids), those after batch `after` (from the oldest if `None`).
    fn stored_batches(&self, after: Option<BatchId>, limit: usize) -> Result<Vec<Batch>, String>;
    /// Deletes the batch `id` (nothing if there is none).
    fn remove_batch(&self, id: BatchId) -> Result<(), String>;
}

/// Cassandra's `ReplicaPlans.filterBatchlogEndpoints`: where a batch is logged, given the
/// endpoints of this data centre with their racks (`dc_endpoints`, this node among them).
/// This node alone in its data centre logs its batches itself. Otherwise up to two live
/// endpoints other than this node: every one if there are at most two; else, if at least two
/// are on other racks than this node's, only those; then two of one rack at random if one rack
/// is left, else one at random of each of two racks (random ones if more than two). `pick(n)`
/// is a random index below `n` (an injected source, so a simulation replays it). Empty if no
/// other endpoint is live (the caller answers Unavailable, or at ANY logs on this node).
pub(crate) fn batchlog_endpoints(
    local: HostId,
    local_rack: &str,
    dc_endpoints: &[(HostId, String)],
    is_alive: impl Fn(HostId) -> bool,
    pick: &mut impl FnMut(usize) -> usize,
) -> Vec<HostId> {
    if dc_endpoints.len() == 1 {
        return vec![dc_endpoints[0].0];
    }
    // Live others, grouped by rack in the order racks are first met.
    let mut racks: Vec<(&str, Vec<HostId>)> = Vec::new();
    for (endpoint, rack) in dc_endpoints {
        if *endpoint == local || !is_alive(*endpoint) {
            continue;
        }
        match racks.iter_mut().find(|(r, _)| r == rack) {
            Some((_, members)) => members.push(*endpoint),
            None => racks.push((rack.as_str(), vec![*endpoint])),
        }
    }
    let total: usize = racks.iter().map(|(_, m)| m.len()).sum();
    if total <= 2 {
        return racks.into_iter().flat_map(|(_, m)| m).collect();
    }
    let in_local_rack = racks
        .iter()
        .find(|(r, _)| *r == local_rack)
        .map_or(0, |(_, m)| m.len());
    if total - in_local_rack >= 2 {
        racks.retain(|(r, _)| *r != local_rack);
    }
    if let [(_, members)] = racks.as_mut_slice() {
        shuffle(members, pick);
        return members[..2].to_vec();
    }
    if racks.len() > 2 {
        shuffle(&mut racks, pick);
    }
    racks
        .iter()
        .take(2)
        .map(|(_, members)| members[pick(members.len())])
        .collect()
}

/// Fisher-Yates with the injected index source.
fn shuffle<T>(items: &mut [T], pick: &mut impl FnMut(usize) -> usize) {
    for i in (1..items.len()).rev() {
        items.swap(i, pick(i + 1));
    }
}

impl Coordinator {
    /// Writes a LOGGED batch (Cassandra's `StorageProxy.mutateAtomically`): `writes` holds
    /// each keyspace's partition updates. A batch of one partition needs no log and is written
    /// as a single statement (with write type SIMPLE, as Cassandra's). Otherwise: every
    /// partition must have enough live replicas for `consistency` (else `Unavailable`, before
    /// anything is sent); the whole batch is stored on its batch log endpoints (see
    /// `batchlog_endpoints`; none live is `Unavailable` at ONE, except at ANY, which logs on
    /// this node), which must all acknowledge by `deadline` (else `WriteTimeout` of write type
    /// BATCH_LOG at ONE or TWO); then its mutations go to their replicas (as `write`, write
    /// type BATCH); once every partition reached its level the batch is removed from the batch
    /// log endpoints, in the background. A batch that fails after its log write stays logged
    /// and is replayed by its endpoints.
    pub async fn write_logged_batch(
        &self,
        writes: Vec<(&KeyspaceMetadata, Vec<PartitionUpdate>)>,
        consistency: ConsistencyLevel,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let partitions: usize = writes.iter().map(|(_, updates)| updates.len()).sum();
        if partitions <= 1 {
            for (keyspace, updates) in writes {
                self.write(keyspace, updates, consistency, WriteType::Simple, deadline)
                    .await?;
            }
            return Ok(());
        }
        let result = self.write_atomically(writes, consistency, deadline).await;
        self.stats.count_outcome(RequestKind::Write, &result);
        result
    }

    /// `write_logged_batch` of more than one partition, but for the counting.
    async fn write_atomically(
        &self,
        writes: Vec<(&KeyspaceMetadata, Vec<PartitionUpdate>)>,
        consistency: ConsistencyLevel,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let ring = self.ring.load_full();
        for (keyspace, updates) in &writes {
            self.check_write_available(&ring, keyspace, updates, consistency)?;
        }
        let endpoints = self.choose_batchlog_endpoints(&ring, consistency == ConsistencyLevel::Any);
        if endpoints.is_empty() {
            return Err(CoordinatorError::Unavailable {
                consistency: ConsistencyLevel::One,
                required: 1,
                alive: 0,
            });
        }
        let id = BatchId::new(self.timestamps.next(), ring.local_host_id());
        let shares: Vec<&[PartitionUpdate]> = writes.iter().map(|(_, u)| u.as_slice()).collect();
        let batch = Batch::encode(id, &shares);
        self.store_in_batchlog(&endpoints, batch, deadline).await?;
        self.stats.batches_logged.fetch_add(1, Ordering::Relaxed);
        let written = join_all(writes.into_iter().map(|(keyspace, updates)| {
            self.write_to_replicas(keyspace, updates, consistency, WriteType::Batch, deadline)
        }))
        .await;
        if let Some(error) = written.into_iter().find_map(Result::err) {
            // The batch stays logged: its endpoints replay it.
            return Err(error);
        }
        self.remove_from_batchlog(endpoints, id);
        Ok(())
    }

    /// Fails with `Unavailable` unless every partition of `updates` has enough live replicas
    /// for `consistency` (nothing to check at ANY), as `write` checks before sending.
    fn check_write_available(
        &self,
        ring: &TokenMetadata,
        keyspace: &KeyspaceMetadata,
        updates: &[PartitionUpdate],
        consistency: ConsistencyLevel,
    ) -> Result<(), CoordinatorError> {
        let placement = Placement::new(self, ring, keyspace);
        let block_for =
            consistency.block_for(keyspace, ReadOrWrite::Write, placement.local_dc())?;
        if consistency == ConsistencyLevel::Any {
            return Ok(());
        }
        for update in updates {
            let replicas = placement.natural_replicas(update.key.token);
            placement.check_live(consistency, block_for, &replicas)?;
        }
        Ok(())
    }

    /// Cassandra's `ReplicaPlans.forBatchlogWrite`: the batch log endpoints of this data
    /// centre (`batchlog_endpoints`), or at ANY this node if none is live.
    fn choose_batchlog_endpoints(&self, ring: &TokenMetadata, any: bool) -> Vec<HostId> {
        let local = ring.local_endpoint();
        let dc_endpoints: Vec<(HostId, String)> = ring
            .topology()
            .endpoints()
            .filter(|e| e.location.datacenter == local.location.datacenter)
            .map(|e| (e.host_id, e.location.rack.clone()))
            .collect();
        let mut pick = |n: usize| self.batchlog.pick(n);
        let chosen = batchlog_endpoints(
            local.host_id,
            &local.location.rack,
            &dc_endpoints,
            |e| self.live_replica(e).is_some(),
            &mut pick,
        );
        if chosen.is_empty() && any {
            return vec![local.host_id];
        }
        chosen
    }

    /// Stores `batch` on every one of `endpoints`, which must all acknowledge by `deadline`
    /// (Cassandra's ONE for one endpoint, TWO for two): else `WriteTimeout` of write type
    /// BATCH_LOG, or an endpoint's error once none is outstanding.
    async fn store_in_batchlog(
        &self,
        endpoints: &[HostId],
        batch: Batch,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let block_for = endpoints.len();
        let consistency = match block_for {
            1 => ConsistencyLevel::One,
            _ => ConsistencyLevel::Two,
        };
        let timeout = |received: usize| CoordinatorError::WriteTimeout {
            consistency,
            received: received as i32,
            block_for: block_for as i32,
            write_type: WriteType::BatchLog,
        };
        let mut pending: FuturesUnordered<_> = endpoints
            .iter()
            .filter_map(|e| self.live_replica(*e))
            .map(|replica| replica.store_batch(batch.clone(), deadline))
            .collect();
        let mut received = 0;
        let mut first_error: Option<ReplicaError> = None;
        loop {
            match crate::by_deadline(pending.next(), deadline).await {
                Some(Some(Ok(()))) => received += 1,
                Some(Some(Err(e))) if e.is_no_answer() => {}
                Some(Some(Err(e))) => {
                    first_error.get_or_insert(e);
                }
                Some(None) => break,
                None => return Err(timeout(received)),
            }
        }
        match (received == block_for, first_error) {
            (true, _) => Ok(()),
            (false, Some(e)) => Err(e.into()),
            (false, None) => Err(timeout(received)),
        }
    }

    /// Removes batch `id` from `endpoints` in the background (Cassandra's
    /// `asyncRemoveFromBatchlog`): the client does not wait, and a lost removal only means a
    /// harmless replay. The task is counted with the late acknowledgements, so shutdown waits
    /// for it; it ends by `REMOVE_TIMEOUT`.
    fn remove_from_batchlog(&self, endpoints: Vec<HostId>, id: BatchId) {
        let deadline = Deadline::after(REMOVE_TIMEOUT);
        let removals: Vec<_> = endpoints
            .iter()
            .filter_map(|e| self.live_replica(*e))
            .map(|replica| replica.remove_batch(id, deadline))
            .collect();
        let tasks = self.late_acks.clone();
        tasks.start();
        tokio::spawn(async move {
            for outcome in join_all(
                removals
                    .into_iter()
                    .map(|r| crate::by_deadline(r, deadline)),
            )
            .await
            {
                if let Some(Err(e)) = outcome {
                    tracing::debug!(error = %e, "batch not removed from a batch log endpoint; it will be replayed");
                }
            }
            tasks.finish();
        });
    }

    /// Sends a replayed mutation of `keyspace` to every replica of its partitions (Cassandra's
    /// `ReplayingBatch`): live ones get their share and are awaited until `deadline`; those
    /// down, failing or silent get it as a hint. Answers once every replica answered or was
    /// hinted: whether a hint was kept.
    pub(crate) async fn replay_to_replicas(
        &self,
        keyspace: &KeyspaceMetadata,
        updates: Vec<PartitionUpdate>,
        deadline: Deadline,
    ) -> bool {
        let ring = self.ring.load_full();
        let placement = Placement::new(self, &ring, keyspace);
        let mut shares: Vec<(HostId, Vec<PartitionUpdate>)> = Vec::new();
        for update in updates {
            for endpoint in placement.natural_replicas(update.key.token) {
                match shares.iter_mut().find(|(e, _)| *e == endpoint) {
                    Some((_, share)) => share.push(update.clone()),
                    None => shares.push((endpoint, vec![update.clone()])),
                }
            }
        }
        let mut sent: Vec<(HostId, Mutation, bool)> = Vec::new();
        let mut pending = FuturesUnordered::new();
        let mut hinted = false;
        for (endpoint, share) in shares {
            let mutation = Mutation {
                updates: Arc::new(share),
                durable_writes: keyspace.durable_writes,
            };
            match self.live_replica(endpoint) {
                Some(replica) => {
                    let n = sent.len();
                    let ack = replica.apply_mutation(mutation.clone(), deadline);
                    pending.push(async move { (n, ack.await) });
                    sent.push((endpoint, mutation, false));
                }
                None => {
                    hinted |= self
                        .hints
                        .write_missed(endpoint, &mutation, MissedWrite::Down);
                }
            }
        }
        loop {
            match crate::by_deadline(pending.next(), deadline).await {
                Some(Some((n, outcome))) => {
                    sent[n].2 = true;
                    let why = match outcome {
                        Ok(()) => continue,
                        Err(e) if e.is_no_answer() => MissedWrite::TimedOut,
                        Err(e) => MissedWrite::Failed(e),
                    };
                    hinted |= self.hints.write_missed(sent[n].0, &sent[n].1, why);
                }
                Some(None) => return hinted,
                None => {
                    for (endpoint, mutation, answered) in &sent {
                        if !answered {
                            hinted |=
                                self.hints
                                    .write_missed(*endpoint, mutation, MissedWrite::TimedOut);
                        }
                    }
                    return hinted;
                }
            }
        }
    }
}

/// The coordinator's batch log state: the random source that picks batch log endpoints.
pub(crate) struct BatchlogState {
    /// xorshift64 state, seeded from the host id: deterministic per node, so a simulation
    /// replays the same choices.
    rng: AtomicU64,
}

impl BatchlogState {
    pub(crate) fn new(seed: u64) -> BatchlogState {
        BatchlogState {
            rng: AtomicU64::new(seed | 1),
        }
    }

    /// A pseudo-random index below `n` (`n` > 0).
    fn pick(&self, n: usize) -> usize {
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        (x % n as u64) as usize
    }
}

/// How the batch log replay runs (Cassandra's `BatchlogManager` settings).
#[derive(Debug, Clone, Copy)]
pub struct BatchlogReplayConfig {
    /// How often stored batches are looked at: Cassandra's 10 s `REPLAY_INTERVAL`.
    pub interval: Duration,
    /// How old a batch must be to be replayed: Cassandra's `BATCHLOG_REPLAY_TIMEOUT`, twice
    /// `write_request_timeout` (by then its coordinator removed it or never will).
    pub replay_timeout: Duration,
    /// How long a replayed mutation's replicas are awaited before being hinted: the
    /// `write_request_timeout`.
    pub write_timeout: Duration,
    /// `batchlog_replay_throttle` in bytes per second for the whole cluster, divided among its
    /// nodes as Cassandra does; 0 is unthrottled.
    pub throttle_bytes_per_second: u64,
}

impl BatchlogReplayConfig {
    /// Cassandra's defaults for a `write_request_timeout` of `write_timeout`.
    pub fn new(write_timeout: Duration) -> BatchlogReplayConfig {
        BatchlogReplayConfig {
            interval: Duration::from_secs(10),
            replay_timeout: write_timeout * 2,
            write_timeout,
            throttle_bytes_per_second: 1024 * 1024,
        }
    }
}

/// What one replay pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayPass {
    /// Batches old enough, replayed and deleted.
    pub replayed: u64,
}

/// The node's batch log replay (Cassandra's `BatchlogManager.replayFailedBatches`): every
/// `interval`, the stored batches older than `replay_timeout` are replayed, oldest first, at
/// most `throttle_bytes_per_second` (this node's share), then deleted. A mutation for a table
/// dropped meanwhile is skipped, as is one older than its table's `gc_grace_seconds` (it could
/// resurrect data whose tombstones are gone), as in Cassandra.
pub struct BatchlogReplay {
    coordinator: Arc<Coordinator>,
    store: Arc<dyn BatchlogStore>,
    schema: Arc<dyn Fn() -> Arc<Schema> + Send + Sync>,
    config: BatchlogReplayConfig,
}

impl BatchlogReplay {
    /// The replay of `store`'s batches through `coordinator`, reading tables from the schema
    /// `schema` returns (the current one each pass).
    pub fn new(
        coordinator: Arc<Coordinator>,
        store: Arc<dyn BatchlogStore>,
        schema: Arc<dyn Fn() -> Arc<Schema> + Send + Sync>,
        config: BatchlogReplayConfig,
    ) -> BatchlogReplay {
        BatchlogReplay {
            coordinator,
            store,
            schema,
            config,
        }
    }

    /// Replays every `interval` until `stop` turns true, which also ends a pass midway (a
    /// batch replayed but not yet deleted is replayed again later: harmless). The owner
    /// awaits the task it runs in.
    pub async fn run(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.config.interval) => {}
                _ = stop.wait_for(|stopped| *stopped) => return,
            }
            let outcome = tokio::select! {
                outcome = self.replay_due() => outcome,
                _ = stop.wait_for(|stopped| *stopped) => return,
            };
            match outcome {
                Ok(pass) if pass.replayed > 0 => {
                    tracing::info!(replayed = pass.replayed, "batch log replayed");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "batch log replay failed"),
            }
        }
    }

    /// One pass: replays and deletes every stored batch older than `replay_timeout`, reading
    /// them a page at a time, oldest first, up to the first one too young (the rest are
    /// younger still).
    pub async fn replay_due(&self) -> Result<ReplayPass, String> {
        let now_ms = self.coordinator.timestamps.now_micros() / 1000;
        let limit_ms = now_ms - self.config.replay_timeout.as_millis() as i64;
        let nodes = self.coordinator.token_metadata().topology().len().max(1) as u64;
        let rate = self.config.throttle_bytes_per_second / nodes;
        let mut pass = ReplayPass::default();
        let mut after = None;
        loop {
            let store = self.store.clone();
            let page = tokio::task::spawn_blocking(move || {
                store.stored_batches(after, REPLAY_PAGE_BATCHES)
            })
            .await
            .map_err(|e| e.to_string())??;
            let last_page = page.len() < REPLAY_PAGE_BATCHES;
            for batch in page {
                if batch.id.unix_millis() >= limit_ms {
                    return Ok(pass);
                }
                after = Some(batch.id);
                self.replay_one(&batch, now_ms, rate).await?;
                pass.replayed += 1;
            }
            if last_page {
                return Ok(pass);
            }
        }
    }

    /// Replays `batch`, deletes it once the hints it left are durable (kept for a later pass
    /// if they cannot be made so), and sleeps for the throttle (`rate` bytes per second, 0
    /// for none).
    async fn replay_one(&self, batch: &Batch, now_ms: i64, rate: u64) -> Result<(), String> {
        let hinted = self.replay(batch, now_ms).await;
        let store = self.store.clone();
        let hints = self.coordinator.hints.clone();
        let id = batch.id;
        let removed = tokio::task::spawn_blocking(move || {
            if hinted && !hints.make_durable() {
                return Ok(false);
            }
            store.remove_batch(id).map(|()| true)
        })
        .await
        .map_err(|e| e.to_string())??;
        if removed {
            (self.coordinator.stats.batches_replayed).fetch_add(1, Ordering::Relaxed);
        } else {
            tracing::warn!(id = %id.as_uuid(), "batch replayed but its hints could not be made durable; kept for the next replay");
        }
        if rate > 0 {
            let seconds = batch.body().len() as f64 / rate as f64;
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        }
        Ok(())
    }

    /// Sends `batch`'s mutations to their replicas (hinting those that miss them): whether a
    /// hint was kept.
    async fn replay(&self, batch: &Batch, now_ms: i64) -> bool {
        let mutations = match batch.mutations() {
            Ok(m) => m,
            Err(e) => {
                // `Batch::new` refused malformed bodies, so only a damaged store gets here.
                tracing::warn!(id = %batch.id.as_uuid(), error = %e, "stored batch unreadable; dropped");
                return false;
            }
        };
        let schema = (self.schema)();
        let written_s = batch.id.unix_millis() / 1000;
        let now_s = now_ms / 1000;
        let deadline = Deadline::after(self.config.write_timeout);
        let mut sends = Vec::new();
        for updates in mutations {
            let mut by_keyspace: Vec<(Arc<KeyspaceMetadata>, Vec<PartitionUpdate>)> = Vec::new();
            for update in updates {
                let Some(table) = schema.table_by_id(update.table) else {
                    continue; // dropped since
                };
                if written_s + i64::from(table.options.gc_grace_seconds) <= now_s {
                    continue;
                }
                let Some(keyspace) = schema.keyspace(&table.keyspace) else {
                    continue;
                };
                match by_keyspace
                    .iter_mut()
                    .find(|(k, _)| k.name == keyspace.name)
                {
                    Some((_, u)) => u.push(update),
                    None => by_keyspace.push((keyspace.clone(), vec![update])),
                }
            }
            sends.extend(by_keyspace);
        }
        join_all(
            sends
                .iter()
                .map(|(k, u)| self.coordinator.replay_to_replicas(k, u.clone(), deadline)),
        )
        .await
        .into_iter()
        .any(|hinted| hinted)
    }
}

#[cfg(test)]
#[path = "tests/batchlog.rs"]
mod tests;
