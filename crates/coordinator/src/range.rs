//! Token range scans across the ring (Cassandra's `RangeCommands` / `RangeCommandIterator`): a
//! scan is split at the ring's token range boundaries, adjacent ranges with the same replicas
//! merged (as Cassandra's `ReplicaPlanMerger`), and each part read from its own replicas at the
//! consistency level: data from every contacted replica (no digests), reconciled and the stale
//! ones repaired as a partition read's. Parts are read one after another in token order until
//! the page's row budget is spent; the page's resume token says where the next page goes on.

use std::cmp::Ordering;

use locator::HostId;
use mutation::{PartitionData, ReadCommand, ReadResponse, ScanPage, ScanStart, TableId};
use schema::KeyspaceMetadata;

use crate::contact::ReadLevel;
use crate::paging::{self, ScanResume};
use crate::read::unexpected_response;
use crate::reconcile::{self, Position, ReplicaPage};
use crate::{
    ConsistencyLevel, Coordinator, CoordinatorError, Deadline, Placement, ReadOrWrite, ReplicaError,
};

impl Coordinator {
    /// A scan of `table` from `start` up to `end_token` (inclusive; `None` = the ring's end),
    /// at most `max_rows` rows (a partition without rows counts as one), in token order.
    #[allow(clippy::too_many_arguments)] // the command's parts
    pub(crate) async fn read_range(
        &self,
        keyspace: &KeyspaceMetadata,
        table: TableId,
        start: ScanStart,
        end_token: Option<i64>,
        max_rows: usize,
        consistency: ConsistencyLevel,
        deadline: Deadline,
    ) -> Result<ReadResponse, CoordinatorError> {
        let ring = self.ring.load_full();
        let placement = Placement::new(self, &ring, keyspace);
        let block_for = consistency.block_for(keyspace, ReadOrWrite::Read, placement.local_dc())?;
        let level = ReadLevel {
            consistency,
            block_for,
        };
        let end = end_token.unwrap_or(i64::MAX);
        let mut position = paging::resume_scan(start);
        let mut budget = max_rows.max(1);
        let mut partitions: Vec<PartitionData> = Vec::new();
        let done = |partitions, resume: Option<ScanResume>| {
            let last_partition_continues = matches!(resume, Some(ScanResume::After(_, Some(_))));
            Ok(ReadResponse::Range(ScanPage {
                partitions,
                resume: resume.as_ref().map(paging::encode_scan),
                last_partition_continues,
            }))
        };
        loop {
            let from = match &position {
                ScanStart::Beginning => i64::MIN,
                ScanStart::Token(token) => *token,
                ScanStart::After { key, .. } => key.token,
                ScanStart::Resume(_) => {
                    return Err(ReplicaError::Storage(
                        "invalid storage request: resume token is not from a scan".to_string(),
                    )
                    .into())
                }
            };
            if from > end {
                return done(partitions, None);
            }
            let (part_end, replicas) = part_from(&placement, from, end);
            placement.check_live(consistency, block_for, &replicas)?;
            let command = ReadCommand::Range {
                table,
                start: position,
                end_token: Some(part_end),
                max_rows: budget,
            };
            let (part, cut) = self
                .read_part(
                    &placement, table, command, level, &replicas, budget, deadline,
                )
                .await?;
            let used: usize = part.iter().map(|p| p.rows.len().max(1)).sum();
            partitions.extend(part);
            if let Some(cut) = cut {
                return done(partitions, Some(ScanResume::After(cut.key, cut.clustering)));
            }
            if part_end >= end {
                return done(partitions, None);
            }
            budget = budget.saturating_sub(used);
            if budget == 0 {
                return done(partitions, Some(ScanResume::Token(part_end + 1)));
            }
            position = ScanStart::Token(part_end + 1);
        }
    }

    /// One part of a scan from its replicas: its partitions, and where the part stopped if
    /// it did before its end.
    #[allow(clippy::too_many_arguments)] // the read's parts
    async fn read_part(
        &self,
        placement: &Placement<'_>,
        table: TableId,
        command: ReadCommand,
        level: ReadLevel,
        replicas: &[HostId],
        budget: usize,
        deadline: Deadline,
    ) -> Result<(Vec<PartitionData>, Option<Position>), CoordinatorError> {
        let contacts = placement.contacts_for_read(level.consistency, level.block_for, replicas);
        if contacts.is_empty() {
            return Err(CoordinatorError::Unavailable {
                consistency: level.consistency,
                required: level.block_for as i32,
                alive: 0,
            });
        }
        let responses = self
            .read_data_from_all(&contacts, &command, level, false, deadline)
            .await?;
        let pages: Vec<ReplicaPage> = responses
            .into_iter()
            .map(|response| match response {
                ReadResponse::Range(page) => Ok(ReplicaPage {
                    more: page.resume.is_some(),
                    last_partition_continues: page.last_partition_continues,
                    partitions: page.partitions,
                }),
                ReadResponse::Partition(_) => Err(unexpected_response()),
            })
            .collect::<Result<_, _>>()?;
        if let [page] = pages.as_slice() {
            // One replica: its page as it is, but for a last partition it stopped inside
            // before any row (a static row, say): the next page returns it whole.
            let cut = reconcile::page_end(page)?;
            let mut partitions = pages.into_iter().next().expect("one page").partitions;
            if let (Some(cut), Some(last)) = (&cut, partitions.last()) {
                if reconcile::partition_order(&last.key, &cut.key) == Ordering::Greater {
                    partitions.pop();
                }
            }
            return Ok((partitions, cut));
        }
        let reconciled = reconcile::reconcile(table, &pages, false, budget)?;
        self.repair(
            placement.keyspace,
            &contacts,
            reconciled.repairs,
            level,
            deadline,
        )
        .await?;
        Ok((reconciled.partitions, reconciled.cut))
    }
}

/// The part of a scan from token `from` to at most `end`: the end of the token range holding
/// `from`, extended over the ranges after it with the same replicas, and those replicas.
fn part_from(placement: &Placement<'_>, from: i64, end: i64) -> (i64, Vec<HostId>) {
    let replicas = placement.natural_replicas(from);
    if placement.ring.topology().len() <= 1 || placement.keyspace.virtual_keyspace {
        // Every range has the same replicas.
        return (end, replicas);
    }
    let mut sorted = replicas.clone();
    sorted.sort_unstable();
    let mut part_end = range_end(placement, from);
    while part_end < end {
        let mut next = placement.natural_replicas(part_end + 1);
        next.sort_unstable();
        if next != sorted {
            break;
        }
        part_end = range_end(placement, part_end + 1);
    }
    (part_end.min(end), replicas)
}

/// The last token of the ring's range holding `token`: the first ring token at or after it, or
/// the ring's end for a token past the last (that range wraps around to the first token; the
/// scan's part after the wrap starts again at the ring's start).
fn range_end(placement: &Placement<'_>, token: i64) -> i64 {
    let ring = placement.ring.ring();
    let i = ring.partition_point(|&(t, _)| t < token);
    ring.get(i).map_or(i64::MAX, |&(t, _)| t)
}
