//! The write path (Cassandra's `StorageProxy.mutate` with its `WriteResponseHandler`s): a
//! write's partition updates grouped per replica endpoint, sent to every live replica at once,
//! answered once every partition has the acknowledgements its consistency level needs.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures_util::stream::{FuturesUnordered, StreamExt};
use locator::{HostId, ReplicationStrategy};
use mutation::PartitionUpdate;
use schema::KeyspaceMetadata;

use crate::{
    ConsistencyLevel, Coordinator, CoordinatorError, CoordinatorStats, Deadline, HintedHandoff,
    MissedWrite, Mutation, Placement, ReadOrWrite, ReplicaError, ReplicaVerb, RequestKind,
    WriteType,
};

/// How many acknowledgements one partition still needs.
#[derive(Debug, Clone)]
enum Needed {
    /// `required` acknowledgements from replicas that count (this data centre's for the
    /// LOCAL_ levels, any for the others).
    Total { required: usize, acks: usize },
    /// EACH_QUORUM: a quorum in each data centre (`(dc, quorum, acks)`).
    PerDatacenter(Vec<(String, usize, usize)>),
}

impl Needed {
    fn met(&self) -> bool {
        match self {
            Needed::Total { required, acks } => acks >= required,
            Needed::PerDatacenter(dcs) => dcs.iter().all(|(_, quorum, acks)| acks >= quorum),
        }
    }

    fn received(&self) -> usize {
        match self {
            Needed::Total { acks, .. } => *acks,
            Needed::PerDatacenter(dcs) => dcs.iter().map(|(_, _, acks)| acks).sum(),
        }
    }
}

/// One endpoint's share of a write: the updates it replicates, by index in the write.
struct Share {
    endpoint: HostId,
    updates: Vec<usize>,
}

type Ack = Pin<Box<dyn Future<Output = (usize, Result<(), ReplicaError>)> + Send>>;

/// The write in flight: what each partition still needs and who counts.
struct Tally<'a> {
    placement: &'a Placement<'a>,
    consistency: ConsistencyLevel,
    partitions: Vec<Needed>,
}

impl Tally<'_> {
    /// Counts an acknowledgement of `endpoint` (a replica's, or at ANY a kept hint's) for the
    /// partitions `updates`.
    fn ack(&mut self, endpoint: HostId, updates: &[usize]) {
        let dc = self.placement.datacenter(endpoint);
        let counts =
            !self.consistency.is_datacenter_local() || dc == Some(self.placement.local_dc());
        for &i in updates {
            match &mut self.partitions[i] {
                Needed::Total { acks, .. } => *acks += usize::from(counts),
                Needed::PerDatacenter(dcs) => {
                    if let Some((_, _, acks)) =
                        dcs.iter_mut().find(|(d, _, _)| Some(d.as_str()) == dc)
                    {
                        *acks += 1;
                    }
                }
            }
        }
    }

    fn met(&self) -> bool {
        self.partitions.iter().all(Needed::met)
    }

    /// The timeout, counting the first partition short of its acknowledgements.
    fn timeout(&self, block_for: usize, write_type: WriteType) -> CoordinatorError {
        let received = self
            .partitions
            .iter()
            .find(|n| !n.met())
            .map_or(0, Needed::received);
        CoordinatorError::WriteTimeout {
            consistency: self.consistency,
            received: received as i32,
            block_for: block_for as i32,
            write_type,
        }
    }
}

/// The background tasks awaiting writes' late acknowledgements, counted so that shutdown can
/// wait for them (`Coordinator::wait_for_late_acks`). Each ends by its write's deadline.
#[derive(Default)]
pub(crate) struct LateAcks {
    running: AtomicUsize,
    idle: tokio::sync::Notify,
}

impl LateAcks {
    /// Counts a background task starting; it must call `finish` when it ends.
    pub(crate) fn start(&self) {
        self.running.fetch_add(1, Ordering::AcqRel);
    }

    /// Counts a background task ending (waking shutdown if it was the last).
    pub(crate) fn finish(&self) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

impl Coordinator {
    /// Waits until no write's late acknowledgements are awaited any more (each is, at most
    /// until its deadline): at shutdown, so that every hint is handed over.
    pub async fn wait_for_late_acks(&self) {
        loop {
            let idle = self.late_acks.idle.notified();
            let mut idle = std::pin::pin!(idle);
            idle.as_mut().enable();
            if self.late_acks.running.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Writes mutations of one keyspace at `consistency`. Each partition update goes to every
    /// replica of its partition: the updates are grouped per replica endpoint, each live one
    /// getting one `Mutation` of its share (with the keyspace's `durable_writes`; it applies
    /// its share atomically, with its own commit log mode), all sent at once. The write is
    /// answered once every partition has as many acknowledgements as the level needs (this
    /// data centre's replicas' for the LOCAL_ levels, each data centre's quorum for
    /// EACH_QUORUM).
    ///
    /// Before anything is sent, every partition must have enough live replicas (else
    /// `Unavailable`), except at ANY. A replica endpoint that is not live gets no request: its
    /// share goes to hinted handoff at once. At ANY such a hint, if the hook keeps it, counts as an
    /// acknowledgement (so with `NoHints` a write whose replicas are all down times out, as in
    /// Cassandra without hints); hints of replicas that fail or time out count for nothing, as
    /// in Cassandra, where they are written after the response handler gave up on them. Past `deadline` the write is answered with a `WriteTimeout` of
    /// `write_type`; it may still be applied. Replicas that fail or time out get their share
    /// as a hint; so do those still outstanding when the level was met, which a background
    /// task awaits until the deadline (it ends by then).
    ///
    /// A replica's error is the answer only once no acknowledgement is outstanding and the
    /// level was not met (Cassandra answers WRITE_FAILURE as soon as failures leave too few;
    /// Helenus has no WriteFailure yet, and answers the first replica's error).
    ///
    /// Not here: LOGGED batches, which go through the batch log first
    /// (`Coordinator::write_logged_batch`, `batchlog.rs`), and pending (joining) endpoints'
    /// extra writes.
    pub async fn write(
        &self,
        keyspace: &KeyspaceMetadata,
        updates: Vec<PartitionUpdate>,
        consistency: ConsistencyLevel,
        write_type: WriteType,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let result = self
            .write_to_replicas(keyspace, updates, consistency, write_type, deadline)
            .await;
        self.stats.count_outcome(RequestKind::Write, &result);
        result
    }

    /// `write` but for the counting.
    pub(crate) async fn write_to_replicas(
        &self,
        keyspace: &KeyspaceMetadata,
        updates: Vec<PartitionUpdate>,
        consistency: ConsistencyLevel,
        write_type: WriteType,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let ring = self.ring.load_full();
        let placement = Placement::new(self, &ring, keyspace);
        let block_for =
            consistency.block_for(keyspace, ReadOrWrite::Write, placement.local_dc())?;
        let mut tally = Tally {
            placement: &placement,
            consistency,
            partitions: Vec::with_capacity(updates.len()),
        };
        // Per endpoint, in the order first met: live ones are sent their share, others hinted.
        let mut shares: Vec<(HostId, Vec<usize>)> = Vec::new();
        for (i, update) in updates.iter().enumerate() {
            let replicas = placement.natural_replicas(update.key.token);
            if consistency != ConsistencyLevel::Any {
                placement.check_live(consistency, block_for, &replicas)?;
            }
            tally
                .partitions
                .push(needed(keyspace, consistency, block_for));
            for endpoint in replicas {
                match shares.iter_mut().find(|(e, _)| *e == endpoint) {
                    Some((_, indexes)) => indexes.push(i),
                    None => shares.push((endpoint, vec![i])),
                }
            }
        }
        if deadline.passed() {
            return Err(tally.timeout(block_for, write_type));
        }
        let updates = Arc::new(updates);
        if let [(endpoint, indexes)] = shares.as_slice() {
            if let Some(replica) = self.live_replica(*endpoint) {
                // One replica (a single node): no fan-out to track, and no timer if it answers
                // at once.
                let mutation = share_of(&updates, indexes, keyspace.durable_writes);
                let ack = replica.apply_mutation(mutation.clone(), deadline);
                let why = match crate::by_deadline(ack, deadline).await {
                    Some(Ok(())) => {
                        tally.ack(*endpoint, indexes);
                        return match tally.met() {
                            true => Ok(()),
                            false => Err(tally.timeout(block_for, write_type)),
                        };
                    }
                    Some(Err(e)) if !e.is_no_answer() => MissedWrite::Failed(e),
                    Some(Err(_)) | None => {
                        self.stats.count_replica_timeouts(ReplicaVerb::Mutation, 1);
                        MissedWrite::TimedOut
                    }
                };
                self.hints.write_missed(*endpoint, &mutation, why.clone());
                return Err(match why {
                    MissedWrite::Failed(e) => e.into(),
                    _ => tally.timeout(block_for, write_type),
                });
            }
        }
        let mut sent: Vec<(Share, Mutation)> = Vec::new();
        let mut pending: FuturesUnordered<Ack> = FuturesUnordered::new();
        for (endpoint, indexes) in shares {
            let mutation = share_of(&updates, &indexes, keyspace.durable_writes);
            let share = Share {
                endpoint,
                updates: indexes,
            };
            match self.live_replica(endpoint) {
                Some(replica) => {
                    let n = sent.len();
                    let ack = replica.apply_mutation(mutation.clone(), deadline);
                    pending.push(Box::pin(async move { (n, ack.await) }));
                    sent.push((share, mutation));
                }
                None => {
                    let kept = self
                        .hints
                        .write_missed(endpoint, &mutation, MissedWrite::Down);
                    if kept && consistency == ConsistencyLevel::Any {
                        tally.ack(endpoint, &share.updates);
                    }
                }
            }
        }
        let mut answered = vec![false; sent.len()];
        let mut first_error: Option<ReplicaError> = None;
        while !tally.met() {
            match crate::by_deadline(pending.next(), deadline).await {
                Some(Some((n, outcome))) => {
                    answered[n] = true;
                    let (share, mutation) = &sent[n];
                    match outcome {
                        Ok(()) => tally.ack(share.endpoint, &share.updates),
                        // No answer: as a replica still silent at the deadline (a hint, and
                        // the level's timeout if it is not met).
                        Err(e) if e.is_no_answer() => {
                            self.stats.count_replica_timeouts(ReplicaVerb::Mutation, 1);
                            self.hints.write_missed(
                                share.endpoint,
                                mutation,
                                MissedWrite::TimedOut,
                            );
                        }
                        Err(e) => {
                            self.hints.write_missed(
                                share.endpoint,
                                mutation,
                                MissedWrite::Failed(e.clone()),
                            );
                            first_error.get_or_insert(e);
                        }
                    }
                }
                // Nothing outstanding and the level not met.
                Some(None) => {
                    return Err(match first_error {
                        Some(e) => e.into(),
                        None => tally.timeout(block_for, write_type),
                    })
                }
                None => {
                    let silent = answered.iter().filter(|a| !**a).count();
                    self.stats
                        .count_replica_timeouts(ReplicaVerb::Mutation, silent);
                    for (n, (share, mutation)) in sent.iter().enumerate() {
                        if !answered[n] {
                            self.hints.write_missed(
                                share.endpoint,
                                mutation,
                                MissedWrite::TimedOut,
                            );
                        }
                    }
                    return Err(tally.timeout(block_for, write_type));
                }
            }
        }
        if !pending.is_empty() {
            let hints = self.hints.clone();
            let late: Vec<(HostId, Mutation, bool)> = sent
                .into_iter()
                .zip(answered)
                .map(|((share, mutation), answered)| (share.endpoint, mutation, answered))
                .collect();
            let tasks = self.late_acks.clone();
            let stats = self.stats.clone();
            tasks.start();
            tokio::spawn(async move {
                await_late_acks(pending, late, hints, &stats, deadline).await;
                tasks.finish();
            });
        }
        Ok(())
    }
}

/// The acknowledgements still outstanding once a write was answered, awaited until its
/// deadline: replicas that fail or do not answer by then get their share as a hint. Ends by
/// the deadline at the latest.
async fn await_late_acks(
    mut pending: FuturesUnordered<Ack>,
    mut late: Vec<(HostId, Mutation, bool)>,
    hints: Arc<dyn HintedHandoff>,
    stats: &CoordinatorStats,
    deadline: Deadline,
) {
    loop {
        match crate::by_deadline(pending.next(), deadline).await {
            Some(Some((n, outcome))) => {
                late[n].2 = true;
                match outcome {
                    Ok(()) => {}
                    Err(e) if e.is_no_answer() => {
                        stats.count_replica_timeouts(ReplicaVerb::Mutation, 1);
                        hints.write_missed(late[n].0, &late[n].1, MissedWrite::TimedOut);
                    }
                    Err(e) => {
                        hints.write_missed(late[n].0, &late[n].1, MissedWrite::Failed(e));
                    }
                }
            }
            Some(None) => return,
            None => {
                let silent = late.iter().filter(|(_, _, answered)| !answered).count();
                stats.count_replica_timeouts(ReplicaVerb::Mutation, silent);
                for (endpoint, mutation, answered) in &late {
                    if !answered {
                        hints.write_missed(*endpoint, mutation, MissedWrite::TimedOut);
                    }
                }
                return;
            }
        }
    }
}

/// What one partition needs at `consistency`.
fn needed(keyspace: &KeyspaceMetadata, consistency: ConsistencyLevel, block_for: usize) -> Needed {
    if let (ConsistencyLevel::EachQuorum, ReplicationStrategy::NetworkTopology { datacenters }) =
        (consistency, keyspace.replication.strategy())
    {
        return Needed::PerDatacenter(
            datacenters
                .iter()
                .map(|(dc, &rf)| (dc.clone(), rf as usize / 2 + 1, 0))
                .collect(),
        );
    }
    // A node-served keyspace needs no acknowledgement by its level (`block_for` is 0), but
    // the write is answered once its one replica, this node, applied it.
    let required = match keyspace.virtual_keyspace {
        true => 1,
        false => block_for,
    };
    Needed::Total { required, acks: 0 }
}

/// The mutation of the updates `indexes` (all of them shared without a copy).
fn share_of(
    updates: &Arc<Vec<PartitionUpdate>>,
    indexes: &[usize],
    durable_writes: bool,
) -> Mutation {
    let updates = if indexes.len() == updates.len() {
        updates.clone()
    } else {
        Arc::new(indexes.iter().map(|&i| updates[i].clone()).collect())
    };
    Mutation {
        updates,
        durable_writes,
    }
}
