//! The rows of a partition read from storage, after its deletions: each live row's columns,
//! with write times and TTLs when the selection asks for them.

use std::cmp::Ordering;

use mutation::PartitionData;
use mutation::{Cell, CellValue, ColumnData, DeletionTime, RangeTombstone, Row};
use schema::{ClusteringOrder, TableMetadata};
use types::CqlType;

use super::plan::Plan;
use super::row::{CellTime, RowValues};

/// The newest deletion among the partition deletion and range tombstones covering `clustering`.
pub(super) fn covering_deletion(
    header: &mutation::PartitionHeader,
    clustering: &[u8],
) -> Option<DeletionTime> {
    let mut best = header.deletion;
    for rt in &header.range_tombstones {
        if covers(rt, clustering) {
            best = match best {
                Some(b) if b.marked_for_delete_at >= rt.deletion.marked_for_delete_at => Some(b),
                _ => Some(rt.deletion),
            };
        }
    }
    best
}

pub(super) fn covers(rt: &RangeTombstone, key: &[u8]) -> bool {
    let after_start = match &rt.start {
        None => true,
        Some(b) if b.inclusive => key >= b.prefix.as_slice(),
        Some(b) => key > b.prefix.as_slice() && !key.starts_with(&b.prefix),
    };
    let before_end = match &rt.end {
        None => true,
        Some(b) if b.inclusive => key.starts_with(&b.prefix) || key < b.prefix.as_slice(),
        Some(b) => key < b.prefix.as_slice(),
    };
    after_start && before_end
}

pub(super) fn live_cell(
    cell: &Cell,
    covering: Option<DeletionTime>,
    now: mutation::LocalTime,
) -> Option<(&[u8], Option<i32>)> {
    if covering.is_some_and(|d| cell.timestamp <= d.marked_for_delete_at) {
        return None;
    }
    match &cell.value {
        CellValue::Live { value, expiry } => match expiry {
            Some(e) if e.local_expiration_time <= now => None,
            Some(e) => Some((
                value.as_slice(),
                Some((e.local_expiration_time - now) as i32),
            )),
            None => Some((value.as_slice(), None)),
        },
        CellValue::Tombstone { .. } => None,
    }
}

pub(super) fn newer(a: Option<DeletionTime>, b: Option<DeletionTime>) -> Option<DeletionTime> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.marked_for_delete_at > x.marked_for_delete_at {
            y
        } else {
            x
        }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Fills the non-key column values of `row` into `out`; returns whether any cell is live.
/// Simple cells' values are moved out of `row`, not copied.
pub(super) fn fill_cells(
    table: &TableMetadata,
    row: &mut Row,
    covering: Option<DeletionTime>,
    now: mutation::LocalTime,
    out: &mut RowValues,
) -> bool {
    let keep_cells = !out.cells.is_empty();
    let covering = newer(covering, row.deletion);
    let mut any_live = false;
    for data in &mut row.columns {
        let (id, idx) = match data {
            ColumnData::Simple { id, .. } | ColumnData::Complex { id, .. } => {
                let Some(idx) = table.columns.iter().position(|c| c.id == *id) else {
                    continue;
                };
                (id, idx)
            }
        };
        let _ = id;
        match data {
            ColumnData::Simple { cell, .. } => {
                if let Some(ttl) = live_cell(cell, covering, now).map(|(_, ttl)| ttl) {
                    if let CellValue::Live { value, .. } = &mut cell.value {
                        out.values[idx] = Some(std::mem::take(value));
                    }
                    if let Some(t) = out.writetimes.get_mut(idx) {
                        *t = Some(cell.timestamp);
                    }
                    if let Some(t) = out.ttls.get_mut(idx) {
                        *t = ttl;
                    }
                    any_live = true;
                }
            }
            ColumnData::Complex {
                deletion, cells, ..
            } => {
                let covering = newer(covering, *deletion);
                let ty = &table.columns[idx].ty;
                let live: Vec<(&[u8], &[u8])> = cells
                    .iter()
                    .filter_map(|(path, cell)| {
                        live_cell(cell, covering, now).map(|(v, _)| (path.as_slice(), v))
                    })
                    .collect();
                if live.is_empty() {
                    continue;
                }
                any_live = true;
                out.values[idx] = Some(assemble_multi_cell(ty, &live));
                if keep_cells {
                    let mut times: Vec<CellTime> = cells
                        .iter()
                        .filter_map(|(path, cell)| {
                            live_cell(cell, covering, now).map(|(_, ttl)| CellTime {
                                path: path.clone(),
                                timestamp: cell.timestamp,
                                ttl,
                            })
                        })
                        .collect();
                    times.sort_by(|a, b| cell_order(ty, &a.path, &b.path));
                    out.cells[idx] = Some(times);
                }
            }
        }
    }
    any_live
}

/// The order of a multi-cell column's cells in its value: UDT fields by number, map and set
/// entries by key, list elements by their timeuuid's time.
pub(super) fn cell_order(ty: &CqlType, a: &[u8], b: &[u8]) -> Ordering {
    match ty {
        CqlType::Udt(_) => a.cmp(b),
        CqlType::Map(k, _) | CqlType::Set(k) => types::compare(k, a, b),
        _ => types::compare(&CqlType::Timeuuid, a, b),
    }
}

/// Serialises live cells of a multi-cell column back into the collection/UDT value.
pub(super) fn assemble_multi_cell(ty: &CqlType, cells: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let put = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as i32).to_be_bytes());
        out.extend_from_slice(b);
    };
    match ty {
        CqlType::Udt(udt) => {
            for i in 0..udt.fields.len() {
                let path = (i as u16).to_be_bytes();
                match cells.iter().find(|(p, _)| *p == path.as_slice()) {
                    Some((_, v)) => put(&mut out, v),
                    None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                }
            }
        }
        CqlType::Map(k, _) | CqlType::Set(k) => {
            // Paths were sorted by bytes; present them in the key type's order.
            let mut sorted: Vec<&(&[u8], &[u8])> = cells.iter().collect();
            sorted.sort_by(|a, b| types::compare(k, a.0, b.0));
            out.extend_from_slice(&(sorted.len() as i32).to_be_bytes());
            for (p, v) in sorted {
                put(&mut out, p);
                if matches!(ty, CqlType::Map(..)) {
                    put(&mut out, v);
                }
            }
        }
        _ => {
            // List paths are timeuuids: their order is time order, which raw bytes are not
            // (the low time bits come first).
            let mut sorted: Vec<&(&[u8], &[u8])> = cells.iter().collect();
            sorted.sort_by(|a, b| types::compare(&CqlType::Timeuuid, a.0, b.0));
            out.extend_from_slice(&(sorted.len() as i32).to_be_bytes());
            for (_, v) in sorted {
                put(&mut out, v);
            }
        }
    }
    out
}

/// Where a storage page's part of a partition lies within the partition.
#[derive(Debug, Clone, Copy)]
pub(super) struct PartitionPosition {
    /// Earlier pages returned rows of the partition.
    pub(super) rows_before: bool,
    /// The partition ends in this page.
    pub(super) complete: bool,
}

/// Live rows of a partition page, in order, with key columns decoded. Cell values are moved
/// out of `data`'s rows, which are left without them.
pub(super) fn partition_rows(
    plan: &Plan,
    data: &mut PartitionData,
    now: mutation::LocalTime,
    position: PartitionPosition,
) -> Vec<RowValues> {
    let table = &plan.table;
    let n = table.columns.len();
    // Write times and TTLs only for a selection that reads them (empty otherwise).
    let times = if plan.selection.needs_column_times() {
        n
    } else {
        0
    };
    let mut base = RowValues {
        values: vec![None; n],
        writetimes: vec![None; times],
        ttls: vec![None; times],
        cells: if plan.selection.needs_cell_times() {
            vec![None; n]
        } else {
            Vec::new()
        },
        token: data.key.token,
    };
    let pk_parts: Vec<Vec<u8>> = if !plan.needs_partition_key {
        Vec::new()
    } else if table.partition_key_count == 1 {
        vec![data.key.key.clone()]
    } else {
        partitioner::decompose_partition_key(&data.key.key, table.partition_key_count)
            .map(|parts| parts.into_iter().map(<[u8]>::to_vec).collect())
            .unwrap_or_default()
    };
    for (i, p) in pk_parts.into_iter().enumerate() {
        if i < table.partition_key_count {
            base.values[i] = Some(p);
        }
    }
    let partition_deletion = data.header.deletion;
    let mut static_live = false;
    if let Some(st) = &mut data.static_row {
        static_live = fill_cells(table, st, partition_deletion, now, &mut base);
    }
    // A partition with a live static row but no live clustering rows (none stored, or all
    // deleted or expired) shows up as one row of static values, once, when its last page is read
    // and no page returned a row of it; only without clustering restrictions. DISTINCT shows such
    // a partition too. (Storage already returns reversed slices in order.)
    let static_only_row = static_live
        && ((plan.static_only_rows && position.complete && !position.rows_before) || plan.distinct);
    let mut out = Vec::with_capacity(data.rows.len());
    let last = data.rows.len().saturating_sub(1);
    for (index, (clustering, row)) in data.rows.iter_mut().enumerate() {
        let covering = covering_deletion(&data.header, clustering);
        // The last row takes `base` itself unless a static-only row may still need it.
        let mut values = if index == last && !static_only_row {
            std::mem::take(&mut base)
        } else {
            base.clone()
        };
        let row_deletion = newer(covering, row.deletion);
        let marker_live = row.liveness.as_ref().is_some_and(|l| {
            row_deletion.is_none_or(|d| l.timestamp > d.marked_for_delete_at)
                && l.expiry.is_none_or(|e| e.local_expiration_time > now)
        });
        let cells_live = fill_cells(table, row, covering, now, &mut values);
        if !(marker_live || cells_live) {
            continue;
        }
        // The values as written, where they differ from the key's canonical ones.
        let forms = crate::keys::clustering_forms_cell(row)
            .and_then(|cell| live_cell(cell, row_deletion, now))
            .and_then(|(bytes, _)| crate::keys::split_clustering_forms(bytes))
            .filter(|forms| forms.len() == table.clustering_count);
        if let Some(forms) = forms {
            for (i, form) in forms.into_iter().enumerate() {
                values.values[table.partition_key_count + i] = Some(form.to_vec());
            }
            out.push(values);
            continue;
        }
        let mut rest = clustering.as_slice();
        for (i, col) in table.clustering().iter().enumerate() {
            match types::byte_comparable::decode(
                &col.ty,
                &mut rest,
                col.order == ClusteringOrder::Desc,
            ) {
                Ok(v) => values.values[table.partition_key_count + i] = Some(v),
                Err(e) => {
                    tracing::error!(table = %table.name, error = %e, "undecodable clustering key in storage");
                    break;
                }
            }
        }
        out.push(values);
    }
    if out.is_empty() && static_only_row {
        out.push(base);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_elements_are_in_time_order_not_byte_order() {
        // Ticks 2^32 - 1 and 2^32: the later one has the smaller first bytes (time_low wraps
        // every ~7 minutes), so byte order would put it first.
        let node = 0x0000_0100_0000_0000;
        let early = crate::timeuuid::timeuuid_from_ticks(0xFFFF_FFFF, node);
        let late = crate::timeuuid::timeuuid_from_ticks(0x1_0000_0000, node);
        assert!(late.as_bytes() < early.as_bytes());
        let cells: Vec<(&[u8], &[u8])> = vec![(late.as_bytes(), b"2"), (early.as_bytes(), b"1")];
        let list = assemble_multi_cell(&CqlType::List(Box::new(CqlType::Text)), &cells);
        let elements = crate::elements::split_elements(&list, 1).expect("a list");
        assert_eq!(elements, vec![vec![&b"1"[..]], vec![&b"2"[..]]]);
    }

    #[test]
    fn range_tombstone_cover() {
        let d = DeletionTime {
            marked_for_delete_at: 1,
            local_deletion_time: 0,
        };
        let rt = RangeTombstone {
            start: Some(mutation::ClusteringBound {
                prefix: vec![5],
                inclusive: true,
            }),
            end: Some(mutation::ClusteringBound {
                prefix: vec![7],
                inclusive: false,
            }),
            deletion: d,
        };
        assert!(covers(&rt, &[5, 1]));
        assert!(covers(&rt, &[6]));
        assert!(!covers(&rt, &[7]));
        assert!(!covers(&rt, &[4, 9]));
        let prefix = RangeTombstone {
            start: Some(mutation::ClusteringBound {
                prefix: vec![5],
                inclusive: true,
            }),
            end: Some(mutation::ClusteringBound {
                prefix: vec![5],
                inclusive: true,
            }),
            deletion: d,
        };
        assert!(covers(&prefix, &[5, 0, 1]));
        assert!(!covers(&prefix, &[6]));
    }
}
