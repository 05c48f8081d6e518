//! Reconciling several replicas' answers to one read (Cassandra's `DataResolver`): their
//! partitions merged by `mutation`'s rules (the newest partition deletion, range tombstones
//! united, rows merged cell by cell by timestamp, tombstones winning ties), cut where every
//! replica's data is complete, and, for each replica, the updates that would bring it up to the
//! reconciled data (its read repair).
//!
//! Short reads: every replica answers at most `max_rows` stored rows (tombstones count, as
//! storage counts them), so past the end of one replica's page the others' rows may lack its
//! data. The reconciled page is therefore cut at the earliest point any replica's page ended
//! at without being complete (Cassandra's short-read protection asks that replica for more
//! instead; here the page ends there, and the next page, read from every replica again, goes
//! on from that point). A page may so hold fewer than `max_rows` rows while more follow: the
//! query layer goes on reading while a page has a resume token. It also holds at most
//! `max_rows`: rows several replicas contribute beyond it are cut off too.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use mutation::{PartitionData, PartitionHeader, PartitionKey, PartitionUpdate, Row, TableId};

use crate::ReplicaError;

/// One replica's answer, as reconciliation sees it: partitions in token order (one for a
/// partition read), each one's rows in the read's order.
#[derive(Debug, Clone)]
pub(crate) struct ReplicaPage {
    pub partitions: Vec<PartitionData>,
    /// The replica has more data after its page (it stopped at the row limit).
    pub more: bool,
    /// It stopped inside its last partition.
    pub last_partition_continues: bool,
}

/// A point in the data a page ends at: just after the row `clustering` of partition `key`, or
/// after the whole partition (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Position {
    pub key: PartitionKey,
    pub clustering: Option<Vec<u8>>,
}

/// The reconciled page.
#[derive(Debug)]
pub(crate) struct Reconciled {
    pub partitions: Vec<PartitionData>,
    /// Where the next page goes on (just after this); `None` = the read is complete.
    pub cut: Option<Position>,
    /// For each replica, in the order of the pages given, the updates that bring it up to the
    /// reconciled data of this page (empty: it had all of it).
    pub repairs: Vec<Vec<PartitionUpdate>>,
}

/// Storage's order of partitions: token, then key length, then key bytes.
pub(crate) fn partition_order(a: &PartitionKey, b: &PartitionKey) -> Ordering {
    (a.token, a.key.len(), &a.key).cmp(&(b.token, b.key.len(), &b.key))
}

type SortKey = (i64, usize, Vec<u8>);

fn sort_key(key: &PartitionKey) -> SortKey {
    (key.token, key.key.len(), key.key.clone())
}

/// A partition being merged: rows by clustering key (byte order is clustering order).
struct Merging {
    key: PartitionKey,
    header: PartitionHeader,
    static_row: Option<Row>,
    rows: BTreeMap<Vec<u8>, Row>,
}

/// Merges `pages` (at least one) of a read of `table` whose rows come in clustering order, or
/// its reverse if `reversed`, each page limited to `max_rows` rows (and row-less partitions).
pub(crate) fn reconcile(
    table: TableId,
    pages: &[ReplicaPage],
    reversed: bool,
    max_rows: usize,
) -> Result<Reconciled, ReplicaError> {
    let clustering_order = |a: &[u8], b: &[u8]| if reversed { b.cmp(a) } else { a.cmp(b) };
    // The earliest point a replica's data is known complete up to.
    let mut cut: Option<Position> = None;
    for page in pages {
        if let Some(end) = page_end(page)? {
            let earlier = cut
                .as_ref()
                .is_none_or(|c| position_order(&end, c, clustering_order) == Ordering::Less);
            if earlier {
                cut = Some(end);
            }
        }
    }
    let mut merged: BTreeMap<SortKey, Merging> = BTreeMap::new();
    for page in pages {
        for partition in &page.partitions {
            let slot = merged
                .entry(sort_key(&partition.key))
                .or_insert_with(|| Merging {
                    key: partition.key.clone(),
                    header: PartitionHeader::default(),
                    static_row: None,
                    rows: BTreeMap::new(),
                });
            slot.header = std::mem::take(&mut slot.header).merge(partition.header.clone());
            slot.static_row = match (slot.static_row.take(), &partition.static_row) {
                (Some(a), Some(b)) => Some(a.merge(b.clone())),
                (a, b) => a.or_else(|| b.clone()),
            };
            for (clustering, row) in &partition.rows {
                match slot.rows.remove(clustering) {
                    Some(mine) => slot
                        .rows
                        .insert(clustering.clone(), mine.merge(row.clone())),
                    None => slot.rows.insert(clustering.clone(), row.clone()),
                };
            }
        }
    }
    // In order, cut where the first incomplete replica page ended, then at `max_rows`.
    let max_rows = max_rows.max(1);
    let mut partitions: Vec<PartitionData> = Vec::new();
    let mut used = 0usize;
    let mut truncated: Option<Position> = None;
    for (_, m) in merged {
        if let Some(c) = &cut {
            if partition_order(&m.key, &c.key) == Ordering::Greater {
                break;
            }
        }
        if used >= max_rows {
            let last = partitions.last().expect("a partition was counted");
            truncated = Some(Position {
                key: last.key.clone(),
                clustering: None,
            });
            break;
        }
        let within_cut = |clustering: &[u8]| match &cut {
            Some(Position {
                key,
                clustering: Some(end),
            }) if *key == m.key => clustering_order(clustering, end) != Ordering::Greater,
            _ => true,
        };
        let mut rows: Vec<(Vec<u8>, Row)> = m.rows.into_iter().collect();
        if reversed {
            rows.reverse();
        }
        rows.retain(|(clustering, _)| within_cut(clustering));
        let room = max_rows - used;
        if rows.len() > room {
            rows.truncate(room);
            truncated = Some(Position {
                key: m.key.clone(),
                clustering: rows.last().map(|(c, _)| c.clone()),
            });
        }
        used += rows.len().max(1);
        partitions.push(PartitionData {
            key: m.key,
            header: m.header,
            static_row: m.static_row,
            rows,
        });
        if truncated.is_some() {
            break;
        }
    }
    let cut = truncated.or(cut);
    let repairs = pages
        .iter()
        .map(|page| repairs_for(table, page, &partitions))
        .collect();
    Ok(Reconciled {
        partitions,
        cut,
        repairs,
    })
}

/// Where `page`'s data is complete up to, if its replica has more.
pub(crate) fn page_end(page: &ReplicaPage) -> Result<Option<Position>, ReplicaError> {
    if !page.more {
        return Ok(None);
    }
    let no_progress =
        || ReplicaError::Internal("a replica's page said more follows but held no row".to_string());
    let last = page.partitions.last().ok_or_else(no_progress)?;
    if !page.last_partition_continues {
        return Ok(Some(Position {
            key: last.key.clone(),
            clustering: None,
        }));
    }
    if let Some((clustering, _)) = last.rows.last() {
        return Ok(Some(Position {
            key: last.key.clone(),
            clustering: Some(clustering.clone()),
        }));
    }
    // It stopped before the last partition's first row: complete up to the one before.
    let before = page
        .partitions
        .len()
        .checked_sub(2)
        .ok_or_else(no_progress)?;
    Ok(Some(Position {
        key: page.partitions[before].key.clone(),
        clustering: None,
    }))
}

fn position_order(
    a: &Position,
    b: &Position,
    clustering_order: impl Fn(&[u8], &[u8]) -> Ordering,
) -> Ordering {
    partition_order(&a.key, &b.key).then_with(|| match (&a.clustering, &b.clustering) {
        (Some(x), Some(y)) => clustering_order(x, y),
        // After a row comes before after the whole partition.
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    })
}

/// What `page`'s replica lacks of `reconciled`: per partition, the header and static row if
/// they differ, and each row that differs from the replica's (all of a partition it did not
/// return). Every reconciled partition and row lies within what the replica's page covers
/// (the reconciled page is cut where the first replica's ended), so anything it did not return
/// is something it does not have.
fn repairs_for(
    table: TableId,
    page: &ReplicaPage,
    reconciled: &[PartitionData],
) -> Vec<PartitionUpdate> {
    let theirs: HashMap<&PartitionKey, &PartitionData> =
        page.partitions.iter().map(|p| (&p.key, p)).collect();
    let empty_header = PartitionHeader::default();
    let mut updates = Vec::new();
    for p in reconciled {
        let their = theirs.get(&p.key);
        let their_header = their.map_or(&empty_header, |t| &t.header);
        let their_static = their.and_then(|t| t.static_row.as_ref());
        let their_rows: HashMap<&[u8], &Row> = their
            .map(|t| t.rows.iter().map(|(c, r)| (c.as_slice(), r)).collect())
            .unwrap_or_default();
        let update = PartitionUpdate {
            table,
            key: p.key.clone(),
            header: (p.header != *their_header).then(|| p.header.clone()),
            static_row: p
                .static_row
                .as_ref()
                .filter(|s| Some(*s) != their_static)
                .cloned(),
            rows: p
                .rows
                .iter()
                .filter(|(c, r)| their_rows.get(c.as_slice()) != Some(&r))
                .cloned()
                .collect(),
        };
        if update.header.is_some() || update.static_row.is_some() || !update.rows.is_empty() {
            updates.push(update);
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use mutation::{Cell, ColumnData, DeletionTime, LivenessInfo};

    use super::*;

    const TABLE: TableId = TableId::from_u128(1);

    fn key(token: i64) -> PartitionKey {
        PartitionKey {
            token,
            key: vec![token as u8],
        }
    }

    fn row(timestamp: i64, value: &[u8]) -> Row {
        Row {
            liveness: Some(LivenessInfo {
                timestamp,
                expiry: None,
            }),
            deletion: None,
            columns: vec![ColumnData::Simple {
                id: 1,
                cell: Cell::live(timestamp, value.to_vec()),
            }],
        }
    }

    fn partition(token: i64, rows: &[(u8, i64)]) -> PartitionData {
        PartitionData {
            key: key(token),
            header: PartitionHeader::default(),
            static_row: None,
            rows: rows
                .iter()
                .map(|&(c, ts)| (vec![c], row(ts, &[c, ts as u8])))
                .collect(),
        }
    }

    fn page(partitions: Vec<PartitionData>, more: bool, continues: bool) -> ReplicaPage {
        ReplicaPage {
            partitions,
            more,
            last_partition_continues: continues,
        }
    }

    #[test]
    fn the_newest_cell_wins_and_each_replica_is_sent_what_it_lacks() {
        let a = page(vec![partition(1, &[(1, 5), (2, 1)])], false, false);
        let b = page(vec![partition(1, &[(1, 3), (3, 2)])], false, false);
        let r = reconcile(TABLE, &[a, b], false, 100).expect("reconciled");
        assert_eq!(r.cut, None);
        assert_eq!(r.partitions, vec![partition(1, &[(1, 5), (2, 1), (3, 2)])]);
        // A lacks row 3; B has an old row 1 and lacks row 2.
        assert_eq!(r.repairs[0].len(), 1);
        assert_eq!(r.repairs[0][0].rows, partition(1, &[(3, 2)]).rows);
        assert_eq!(r.repairs[1][0].rows, partition(1, &[(1, 5), (2, 1)]).rows);
    }

    #[test]
    fn a_tombstone_wins_and_travels_to_the_replica_without_it() {
        let mut deleted = partition(1, &[]);
        deleted.header.deletion = Some(DeletionTime {
            marked_for_delete_at: 10,
            local_deletion_time: 1,
        });
        let a = page(vec![deleted.clone()], false, false);
        let b = page(vec![partition(1, &[(1, 5)])], false, false);
        let r = reconcile(TABLE, &[a, b], false, 100).expect("reconciled");
        assert_eq!(r.partitions[0].header, deleted.header);
        assert_eq!(r.repairs[1][0].header.as_ref(), Some(&deleted.header));
        assert!(r.repairs[1][0].rows.is_empty(), "it has the row already");
        assert_eq!(r.repairs[0][0].rows.len(), 1, "the shadowed row too");
    }

    #[test]
    fn a_page_is_cut_where_the_first_incomplete_replica_stopped() {
        // A stopped after row 2 of partition 1 (its limit); B had rows 1, 3 and partition 2.
        let a = page(vec![partition(1, &[(1, 1), (2, 1)])], true, true);
        let b = page(
            vec![partition(1, &[(1, 1), (3, 1)]), partition(2, &[(1, 1)])],
            false,
            false,
        );
        let r = reconcile(TABLE, &[a, b], false, 2).expect("reconciled");
        // Only rows up to A's last: row 3 might have a tombstone on A we did not see.
        assert_eq!(r.partitions, vec![partition(1, &[(1, 1), (2, 1)])]);
        assert_eq!(
            r.cut,
            Some(Position {
                key: key(1),
                clustering: Some(vec![2]),
            })
        );
        assert!(r.repairs[0].is_empty());
        assert_eq!(r.repairs[1][0].rows, partition(1, &[(2, 1)]).rows);
    }

    #[test]
    fn reversed_reads_cut_in_their_order_and_pages_hold_at_most_the_limit() {
        let a = page(vec![partition(1, &[(9, 1), (8, 1)])], true, true);
        let b = page(vec![partition(1, &[(9, 1), (7, 1)])], true, true);
        let r = reconcile(TABLE, &[a, b], true, 2).expect("reconciled");
        assert_eq!(r.partitions, vec![partition(1, &[(9, 1), (8, 1)])]);
        assert_eq!(r.cut.expect("more").clustering, Some(vec![8]));
        // Two complete replicas whose rows together pass the limit: cut at the limit.
        let a = page(
            vec![partition(1, &[(1, 1)]), partition(2, &[])],
            false,
            false,
        );
        let b = page(
            vec![partition(1, &[(2, 1)]), partition(3, &[])],
            false,
            false,
        );
        let r = reconcile(TABLE, &[a, b], false, 2).expect("reconciled");
        assert_eq!(r.partitions, vec![partition(1, &[(1, 1), (2, 1)])]);
        assert_eq!(
            r.cut,
            Some(Position {
                key: key(1),
                clustering: None,
            })
        );
        let r = reconcile(
            TABLE,
            &[page(vec![partition(1, &[(1, 1), (2, 1)])], false, false)],
            false,
            1,
        )
        .expect("reconciled");
        assert_eq!(r.cut.expect("cut").clustering, Some(vec![1]));
    }

    #[test]
    fn a_partition_one_replica_lacks_entirely_is_sent_whole() {
        let a = page(
            vec![partition(1, &[(1, 1)]), partition(2, &[(1, 1)])],
            false,
            false,
        );
        let b = page(vec![partition(2, &[(1, 1)])], false, false);
        let r = reconcile(TABLE, &[a, b], false, 10).expect("reconciled");
        assert_eq!(r.partitions.len(), 2);
        assert!(r.repairs[0].is_empty());
        assert_eq!(r.repairs[1].len(), 1);
        assert_eq!(r.repairs[1][0].key, key(1));
    }
}
