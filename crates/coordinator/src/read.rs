//! The read path of one partition (Cassandra's `StorageProxy.read` with its `ReadCallback`,
//! `DigestResolver`, `DataResolver` and `BlockingReadRepair`): data from the closest replica,
//! digests from as many others as the level needs; on a mismatch, data from all of them,
//! reconciled, and the stale ones repaired before the answer.

use std::sync::Arc;

use futures_util::stream::{FuturesUnordered, StreamExt};
use mutation::{
    ClusteringSlice, PartitionData, PartitionKey, PartitionPage, PartitionUpdate, ReadCommand,
    ReadResponse, TableId,
};
use schema::KeyspaceMetadata;

use crate::paging::{self, PartitionResume};
use crate::reconcile::{self, ReplicaPage};
use crate::speculation;
use crate::stats::TableStats;
use crate::{
    read_digest, ConsistencyLevel, Coordinator, CoordinatorError, Deadline, Mutation, Placement,
    ReadOrWrite, ReplicaError, ReplicaVerb, RequestKind,
};
use tokio::time::Instant;

use crate::contact::{Contact, ReadLevel};

/// A partition read as the query layer sends it.
pub(crate) struct PartitionRead {
    pub table: TableId,
    pub key: PartitionKey,
    pub slice: ClusteringSlice,
    pub max_rows: usize,
    pub resume: Option<Vec<u8>>,
}

impl Coordinator {
    /// Reads at `consistency`: a partition (`ReadCommand::Partition`) from its replicas, or a
    /// token range scan (`ReadCommand::Range`) split at the ring's range boundaries, each part
    /// from its own replicas (`range.rs`). Past `deadline` the read is answered with a
    /// `ReadTimeout` (and a replica that has not started it does not).
    ///
    /// A page's `resume` is the coordinator's own token (`paging.rs`), which the next page's
    /// command carries back: it names a position in the data, so the next page may be read
    /// from other replicas.
    pub async fn read(
        &self,
        keyspace: &KeyspaceMetadata,
        command: ReadCommand,
        consistency: ConsistencyLevel,
        deadline: Deadline,
    ) -> Result<ReadResponse, CoordinatorError> {
        match command {
            ReadCommand::Partition {
                table,
                key,
                slice,
                max_rows,
                resume,
            } => {
                let read = PartitionRead {
                    table,
                    key,
                    slice,
                    max_rows,
                    resume,
                };
                self.read_partition(keyspace, read, consistency, deadline)
                    .await
            }
            ReadCommand::Range {
                table,
                start,
                end_token,
                max_rows,
            } => {
                let result = self
                    .read_range(
                        keyspace,
                        table,
                        start,
                        end_token,
                        max_rows,
                        consistency,
                        deadline,
                    )
                    .await;
                self.stats.count_outcome(RequestKind::RangeRead, &result);
                result
            }
        }
    }

    /// One partition, timed: its latency goes to the table's histogram (which percentile
    /// speculation reads) and a timeout or unavailable to the coordinator's counters.
    async fn read_partition(
        &self,
        keyspace: &KeyspaceMetadata,
        read: PartitionRead,
        consistency: ConsistencyLevel,
        deadline: Deadline,
    ) -> Result<ReadResponse, CoordinatorError> {
        let started = Instant::now();
        let table = self.stats.table(read.table);
        let result = self
            .read_partition_from_replicas(keyspace, read, consistency, started, deadline, &table)
            .await;
        self.stats.count_outcome(RequestKind::Read, &result);
        // Unlike Cassandra, a read refused before any replica was asked (unavailable, an
        // invalid level) is not a latency: it would pull the percentiles towards zero.
        if !matches!(
            result,
            Err(CoordinatorError::Unavailable { .. } | CoordinatorError::InvalidConsistency(_))
        ) {
            table.read_latency.record(started.elapsed());
        }
        result
    }

    /// One partition: the closest live replica gets the data request and the next
    /// `block_for - 1` closest get digest requests; enough must answer by `deadline`, one more
    /// replica being asked if the table's `speculative_retry` says so (`speculation.rs`). If
    /// every digest matches the data's, the data is the answer. Otherwise every replica that
    /// answered is asked for its data, the answers are reconciled (`reconcile.rs`), each stale
    /// replica is sent what it lacks, and the answer waits for those repairs (blocking read
    /// repair).
    async fn read_partition_from_replicas(
        &self,
        keyspace: &KeyspaceMetadata,
        read: PartitionRead,
        consistency: ConsistencyLevel,
        started: Instant,
        deadline: Deadline,
        table: &TableStats,
    ) -> Result<ReadResponse, CoordinatorError> {
        let ring = self.ring.load_full();
        let placement = Placement::new(self, &ring, keyspace);
        let block_for = consistency.block_for(keyspace, ReadOrWrite::Read, placement.local_dc())?;
        let level = ReadLevel {
            consistency,
            block_for,
        };
        let replicas = placement.natural_replicas(read.key.token);
        placement.check_live(consistency, block_for, &replicas)?;
        let (contacts, extra) = placement.read_plan(consistency, block_for, &replicas);
        let reversed = read.slice.reversed;
        let (slice, resume) = paging::resume_partition(read.slice, read.resume);
        let command = ReadCommand::Partition {
            table: read.table,
            key: read.key.clone(),
            slice,
            max_rows: read.max_rows,
            resume,
        };
        if contacts.is_empty() {
            return Err(CoordinatorError::Unavailable {
                consistency,
                required: block_for as i32,
                alive: 0,
            });
        }
        let speculation = self.speculation(
            keyspace,
            read.table,
            consistency,
            extra.is_some(),
            replicas.len() > contacts.len(),
            started,
            deadline,
            table,
        );
        if speculation == speculation::Speculation::Never && contacts.len() == 1 {
            // One replica asked and no other to ask (a single node, or ONE at RF 1): no
            // bookkeeping of answers, and no timer if it answers at once.
            let (_, replica) = &contacts[0];
            return match crate::by_deadline(replica.read(command, deadline), deadline).await {
                Some(Ok(response)) => Ok(as_coordinator_page(response)),
                Some(Err(e)) if !e.is_no_answer() => Err(e.into()),
                Some(Err(_)) | None => {
                    self.stats.count_replica_timeouts(ReplicaVerb::Read, 1);
                    Err(level.timeout(0, false))
                }
            };
        }
        let context = speculation::ReadContext {
            command: &command,
            level,
            deadline,
            table,
            counters: &self.stats,
        };
        let gathered = speculation::gather(contacts, extra, speculation, context).await?;
        // One answer (a single replica, or ONE without speculation) has nothing to compare:
        // no digest of it is computed (an MD5 of every row, about a microsecond per read).
        if gathered.digests.is_empty() {
            return Ok(as_coordinator_page(gathered.data));
        }
        let digest = read_digest(&gathered.data);
        if gathered.digests.iter().all(|d| *d == digest) {
            return Ok(as_coordinator_page(gathered.data));
        }
        let contacts = gathered.answered;
        tracing::debug!(table = %read.table, "digest mismatch; reading data from every replica that answered");
        let pages = self
            .read_data_from_all(&contacts, &command, level, true, deadline)
            .await?;
        let pages: Vec<ReplicaPage> = pages
            .into_iter()
            .map(|response| match response {
                ReadResponse::Partition(page) => Ok(ReplicaPage {
                    more: page.resume.is_some(),
                    last_partition_continues: page.resume.is_some(),
                    partitions: vec![page.data],
                }),
                ReadResponse::Range(_) => Err(unexpected_response()),
            })
            .collect::<Result<_, _>>()?;
        let reconciled = reconcile::reconcile(read.table, &pages, reversed, read.max_rows)?;
        self.repair(keyspace, &contacts, reconciled.repairs, level, deadline)
            .await?;
        let data = reconciled
            .partitions
            .into_iter()
            .next()
            .unwrap_or_else(|| PartitionData {
                key: read.key,
                header: Default::default(),
                static_row: None,
                rows: Vec::new(),
            });
        let resume = reconciled
            .cut
            .and_then(|cut| cut.clustering)
            .map(|row| paging::encode_partition(&PartitionResume::After(row)));
        Ok(ReadResponse::Partition(PartitionPage { data, resume }))
    }

    /// Sends `command` as a data request to every one of `contacts` and waits for all their
    /// answers, in `contacts`' order. Past `deadline`: a `ReadTimeout` with the answers
    /// received (and `data_present` if `data_present` or any arrived).
    pub(crate) async fn read_data_from_all(
        &self,
        contacts: &[Contact],
        command: &ReadCommand,
        level: ReadLevel,
        data_present: bool,
        deadline: Deadline,
    ) -> Result<Vec<ReadResponse>, CoordinatorError> {
        let mut pending: FuturesUnordered<_> = contacts
            .iter()
            .enumerate()
            .map(|(n, (_, replica))| {
                let read = replica.read(command.clone(), deadline);
                async move { (n, read.await) }
            })
            .collect();
        let mut answers: Vec<Option<ReadResponse>> = vec![None; contacts.len()];
        let mut received = 0;
        while received < contacts.len() {
            match crate::by_deadline(pending.next(), deadline).await {
                Some(Some((n, Ok(response)))) => {
                    answers[n] = Some(response);
                    received += 1;
                }
                Some(Some((_, Err(e)))) if !e.is_no_answer() => return Err(e.into()),
                Some(Some((_, Err(_)))) | Some(None) | None => {
                    let silent = contacts.len() - received;
                    self.stats.count_replica_timeouts(ReplicaVerb::Read, silent);
                    return Err(level.timeout(received, data_present || received > 0));
                }
            }
        }
        Ok(answers.into_iter().flatten().collect())
    }

    /// Blocking read repair: sends each of `contacts` its `repairs` (same order; none for a
    /// replica that had everything) as one mutation, and waits for every one to be
    /// acknowledged by `deadline` (else a `ReadTimeout` counting the unrepaired replicas as
    /// not received, with the data present, as Cassandra's `BlockingPartitionRepair`).
    pub(crate) async fn repair(
        &self,
        keyspace: &KeyspaceMetadata,
        contacts: &[Contact],
        repairs: Vec<Vec<PartitionUpdate>>,
        level: ReadLevel,
        deadline: Deadline,
    ) -> Result<(), CoordinatorError> {
        let mut pending: FuturesUnordered<_> = contacts
            .iter()
            .zip(repairs)
            .filter(|(_, updates)| !updates.is_empty())
            .map(|((endpoint, replica), updates)| {
                tracing::debug!(endpoint = %endpoint.0, partitions = updates.len(), "read repair");
                replica.apply_mutation(
                    Mutation {
                        updates: Arc::new(updates),
                        durable_writes: keyspace.durable_writes,
                    },
                    deadline,
                )
            })
            .collect();
        let mut unrepaired = pending.len();
        while unrepaired > 0 {
            match crate::by_deadline(pending.next(), deadline).await {
                Some(Some(Ok(()))) => unrepaired -= 1,
                Some(Some(Err(e))) if !e.is_no_answer() => return Err(e.into()),
                Some(Some(Err(_))) | Some(None) | None => {
                    self.stats
                        .count_replica_timeouts(ReplicaVerb::Mutation, unrepaired);
                    return Err(level.timeout(level.block_for.saturating_sub(unrepaired), true));
                }
            }
        }
        Ok(())
    }
}

/// A replica's answer as the coordinator answers it: a page that goes on resumes strictly
/// after its last row (`paging.rs`), whichever replicas read the next page. Not with the
/// replica's own resume token: that names the replica's next row, and another replica may hold
/// rows before it (ones this replica lacks), which the next page would skip.
fn as_coordinator_page(response: ReadResponse) -> ReadResponse {
    match response {
        ReadResponse::Partition(mut page) => {
            page.resume = page.resume.map(|token| {
                let resume = match page.data.rows.last() {
                    Some((clustering, _)) => PartitionResume::After(clustering.clone()),
                    // No row to go on after (storage always returns one before stopping).
                    None => PartitionResume::Replica(token),
                };
                paging::encode_partition(&resume)
            });
            ReadResponse::Partition(page)
        }
        range => range,
    }
}

pub(crate) fn unexpected_response() -> CoordinatorError {
    CoordinatorError::Replica(ReplicaError::Internal(
        "a replica answered a read with a response of another kind".to_string(),
    ))
}
