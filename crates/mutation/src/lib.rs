//! Cassandra's data model below the schema: cells, rows, row markers, tombstones, TTL, and the
//! last-write-wins reconciliation that makes replicas and storage fragments converge.
//!
//! Owns: the in-memory shape of one row and of one partition's header (partition deletion and
//! range tombstones), how two versions of either are merged (exactly Cassandra 5.0's
//! `Cells.reconcile`, `LivenessInfo.supersedes`, `DeletionTime.supersedes`, `Rows.merge`), how
//! liveness is decided at read time for a given `now`, and the binary encoding storage keeps as
//! its values (see `codec`). Also the vocabulary a request between nodes carries, so that
//! storage, the coordinator and messaging share it without any of them depending on another:
//! a partition's identity and update (`partition`: `PartitionKey`, `PartitionUpdate`,
//! `PartitionData`, `TableId`), the clustering slice a read asks for (`ClusteringSlice`), and a
//! replica's read command and its pages (`read`), with their versioned binary encoding
//! (`wire`: a mutation, a read command, a read response).
//!
//! Architecture invariant: pure and synchronous. No I/O, no clock (every time-dependent function
//! takes `now_seconds`), no knowledge of CQL types, schema, RocksDB or the network. Column ids and
//! clustering keys are opaque here: the schema assigns ids, the query layer encodes clustering
//! keys into byte-comparable form.
//!
//! Merge is commutative, associative and idempotent (property-tested in `tests`), because
//! storage merges fragments in whatever order they meet (memtable, SSTables, merge operands,
//! replicas). Where Cassandra's own reconciliation would depend on argument order (two expiring
//! cells equal in everything but TTL), a final tie-break on TTL keeps it order-independent.

mod codec;
mod partition;
mod read;
#[cfg(test)]
mod tests;
mod wire;
#[cfg(test)]
mod wire_tests;

use std::cmp::Ordering;
use std::collections::BTreeMap;

pub use codec::{
    decode_partition_header, decode_row, encode_partition_header, encode_row, merge_encoded_rows,
    PARTITION_HEADER_FORMAT_VERSION, ROW_FORMAT_VERSION,
};
pub use partition::{
    PartitionData, PartitionKey, PartitionUpdate, TableId, MAX_PARTITION_KEY_BYTES,
};
pub use read::{PartitionPage, ReadCommand, ReadResponse, ScanPage, ScanStart};
pub use wire::{
    decode_mutation, decode_read_command, decode_read_response, encode_mutation,
    encode_read_command, encode_read_response, MUTATION_FORMAT_VERSION,
    READ_COMMAND_FORMAT_VERSION, READ_RESPONSE_FORMAT_VERSION,
};

/// A server time in seconds since the epoch, as local deletion and expiration times are kept:
/// unsigned 32 bits, so it reaches 2106 (Cassandra 5.0's format; 4.x's signed one ended in 2038,
/// which made a 20-year TTL unrepresentable).
pub type LocalTime = u32;

/// A stable per-table column id assigned by the schema. Ids are never reused, so a dropped and
/// re-added column never resurrects old cells.
pub type ColumnId = u32;

/// A deletion: everything written at or before `marked_for_delete_at` is shadowed.
///
/// The derived ordering is Cassandra's `DeletionTime.supersedes`: the larger write timestamp
/// wins, ties go to the larger local deletion time. Field order matters for the derive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeletionTime {
    /// Write timestamp of the deletion, microseconds since the epoch.
    pub marked_for_delete_at: i64,
    /// Server clock when the deletion was written, seconds since the epoch (drives gc_grace in
    /// compaction; not used for shadowing).
    pub local_deletion_time: LocalTime,
}

impl DeletionTime {
    /// Cassandra's `DeletionTime.supersedes`: strictly newer.
    pub fn supersedes(&self, other: &DeletionTime) -> bool {
        self > other
    }

    /// Whether data written at `timestamp` is shadowed by this deletion (ties are deleted,
    /// as in Cassandra's `DeletionTime.deletes`).
    pub fn deletes(&self, timestamp: i64) -> bool {
        timestamp <= self.marked_for_delete_at
    }

    /// The newer of two optional deletions (`None` = no deletion).
    pub fn newest(a: Option<DeletionTime>, b: Option<DeletionTime>) -> Option<DeletionTime> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, None) => a,
            (None, b) => b,
        }
    }
}

/// A TTL: the value expires (becomes a tombstone) at `local_expiration_time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Expiry {
    pub ttl_seconds: i32,
    /// Server seconds since the epoch at which the data stops being live.
    pub local_expiration_time: LocalTime,
}

/// The row marker (Cassandra's primary key liveness info) that an INSERT writes, so that a row
/// whose regular columns are all null stays visible. UPDATE does not write one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LivenessInfo {
    /// Write timestamp, microseconds.
    pub timestamp: i64,
    pub expiry: Option<Expiry>,
}

impl LivenessInfo {
    /// Live unless expired at `now_seconds` (shadowing by deletions is the row's business).
    pub fn is_live(&self, now_seconds: LocalTime) -> bool {
        match self.expiry {
            None => true,
            Some(e) => now_seconds < e.local_expiration_time,
        }
    }

    /// Cassandra's `LivenessInfo.supersedes`: newer timestamp; on a tie an expiring marker beats
    /// a non-expiring one, and between expiring ones the later expiration wins. The last
    /// tie-break (TTL) is ours, to stay order-independent.
    pub fn supersedes(&self, other: &LivenessInfo) -> bool {
        self.rank(other) == Ordering::Greater
    }

    fn rank(&self, other: &LivenessInfo) -> Ordering {
        let key = |l: &LivenessInfo| {
            (
                l.timestamp,
                l.expiry.is_some(),
                l.expiry.map(|e| e.local_expiration_time),
                l.expiry.map(|e| e.ttl_seconds),
            )
        };
        key(self).cmp(&key(other))
    }

    /// The winner of two optional markers.
    pub fn newest(a: Option<LivenessInfo>, b: Option<LivenessInfo>) -> Option<LivenessInfo> {
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.supersedes(&a) { b } else { a }),
            (a, None) => a,
            (None, b) => b,
        }
    }
}

/// One cell: a value (possibly expiring) or a cell tombstone, with its write timestamp.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cell {
    /// Write timestamp, microseconds.
    pub timestamp: i64,
    pub value: CellValue,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CellValue {
    /// A value. An empty `value` is a legitimate (empty) value, not a null; nulls are tombstones.
    Live {
        value: Vec<u8>,
        expiry: Option<Expiry>,
    },
    /// A deleted cell (DELETE of a column, or an INSERT/UPDATE binding null).
    Tombstone { local_deletion_time: LocalTime },
}

impl Cell {
    /// A non-expiring live cell.
    pub fn live(timestamp: i64, value: Vec<u8>) -> Cell {
        Cell {
            timestamp,
            value: CellValue::Live {
                value,
                expiry: None,
            },
        }
    }

    /// A live cell with a TTL.
    pub fn expiring(timestamp: i64, value: Vec<u8>, expiry: Expiry) -> Cell {
        Cell {
            timestamp,
            value: CellValue::Live {
                value,
                expiry: Some(expiry),
            },
        }
    }

    /// A cell tombstone.
    pub fn tombstone(timestamp: i64, local_deletion_time: LocalTime) -> Cell {
        Cell {
            timestamp,
            value: CellValue::Tombstone {
                local_deletion_time,
            },
        }
    }

    /// Live at `now_seconds`: a value that has not expired (Cassandra's `Cell.isLive`). Shadowing
    /// by deletions is not considered here: see `Row::apply_deletions`.
    pub fn is_live(&self, now_seconds: LocalTime) -> bool {
        match &self.value {
            CellValue::Live { expiry: None, .. } => true,
            CellValue::Live {
                expiry: Some(e), ..
            } => now_seconds < e.local_expiration_time,
            CellValue::Tombstone { .. } => false,
        }
    }

    pub fn is_tombstone(&self) -> bool {
        matches!(self.value, CellValue::Tombstone { .. })
    }

    /// The live value bytes if this cell is live at `now_seconds`.
    pub fn live_value(&self, now_seconds: LocalTime) -> Option<&[u8]> {
        match &self.value {
            CellValue::Live { value, .. } if self.is_live(now_seconds) => Some(value),
            _ => None,
        }
    }
}

/// Orders two cells so that the greater one is the reconciliation winner. This is Cassandra
/// 5.0's `Cells.resolveRegular` written as a total order:
/// 1. higher timestamp;
/// 2. on equal timestamps, an expiring cell or tombstone beats a plain live cell (CASSANDRA-14592:
///    an expiring cell will become a tombstone, so the result must not depend on when the
///    reconciliation happens);
/// 3. a tombstone beats an expiring cell;
/// 4. the larger local deletion / expiration time;
/// 5. the larger value, unsigned byte comparison;
/// 6. (ours) the larger TTL. Cassandra returns its left argument here, which would make merge
///    order-dependent; any fixed choice is fine as both cells expire at the same second.
fn cell_order(a: &Cell, b: &Cell) -> Ordering {
    cell_rank(a.timestamp, CellRef::of(a)).cmp(&cell_rank(b.timestamp, CellRef::of(b)))
}

/// What reconciliation looks at in a cell besides its timestamp, borrowed from a decoded
/// `Cell` or from a cell's encoding (`codec::merge_encoded_rows`), so both order cells alike.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CellRef<'a> {
    Live(&'a [u8]),
    Expiring(&'a [u8], Expiry),
    Tombstone(LocalTime),
}

impl<'a> CellRef<'a> {
    fn of(cell: &'a Cell) -> CellRef<'a> {
        match &cell.value {
            CellValue::Live {
                value,
                expiry: None,
            } => CellRef::Live(value),
            CellValue::Live {
                value,
                expiry: Some(e),
            } => CellRef::Expiring(value, *e),
            CellValue::Tombstone {
                local_deletion_time,
            } => CellRef::Tombstone(*local_deletion_time),
        }
    }
}

/// `cell_order`'s sort key: the greater key wins.
pub(crate) fn cell_rank(
    timestamp: i64,
    cell: CellRef<'_>,
) -> (i64, bool, bool, LocalTime, &[u8], i32) {
    match cell {
        CellRef::Live(value) => (timestamp, false, false, 0, value, 0),
        CellRef::Expiring(value, e) => (
            timestamp,
            true,
            false,
            e.local_expiration_time,
            value,
            e.ttl_seconds,
        ),
        CellRef::Tombstone(local_deletion_time) => {
            (timestamp, true, true, local_deletion_time, &[], 0)
        }
    }
}

/// Cassandra's cell reconciliation (`Cells.reconcile` for regular cells): returns the winner.
/// Commutative: on full equality both arguments are identical, so either is returned.
pub fn reconcile_cells<'a>(a: &'a Cell, b: &'a Cell) -> &'a Cell {
    if cell_order(b, a) == Ordering::Greater {
        b
    } else {
        a
    }
}

fn reconcile_owned(a: Cell, b: Cell) -> Cell {
    if cell_order(&b, &a) == Ordering::Greater {
        b
    } else {
        a
    }
}

/// The data of one column in one row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ColumnData {
    /// A single-cell column (any frozen or scalar type).
    Simple { id: ColumnId, cell: Cell },
    /// A non-frozen collection or UDT: one cell per element.
    Complex {
        id: ColumnId,
        /// Whole-collection tombstone (a full overwrite or DELETE of the column).
        deletion: Option<DeletionTime>,
        /// Sorted by path bytes, unique. Path: list timeuuid key, set element, map key, or UDT
        /// field index, in the byte-comparable form the query layer chose.
        cells: Vec<(Vec<u8>, Cell)>,
    },
}

impl ColumnData {
    pub fn id(&self) -> ColumnId {
        match self {
            ColumnData::Simple { id, .. } | ColumnData::Complex { id, .. } => *id,
        }
    }
}

/// Merges two lists sorted by `key`, combining equal keys with `combine`. Inputs must be sorted
/// and unique by key; the output is too.
fn merge_sorted<T, K: Ord>(
    a: Vec<T>,
    b: Vec<T>,
    key: impl Fn(&T) -> &K,
    combine: impl Fn(T, T) -> T,
) -> Vec<T> {
    if a.is_empty() {
        return b;
    }
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let order = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => key(x).cmp(key(y)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => break,
        };
        match order {
            Ordering::Less => out.extend(a.next()),
            Ordering::Greater => out.extend(b.next()),
            Ordering::Equal => {
                if let (Some(x), Some(y)) = (a.next(), b.next()) {
                    out.push(combine(x, y));
                }
            }
        }
    }
    out
}

/// Sorts by key and combines duplicates, leaving a sorted, unique list.
fn sort_and_coalesce<T, K: Ord>(
    items: &mut Vec<T>,
    key: impl Fn(&T) -> &K,
    combine: impl Fn(T, T) -> T,
) {
    if items.windows(2).all(|w| key(&w[0]) < key(&w[1])) {
        return; // the common case: already canonical, no allocation
    }
    items.sort_by(|x, y| key(x).cmp(key(y)));
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        match out.last() {
            Some(last) if key(last) == key(&item) => {
                if let Some(last) = out.pop() {
                    out.push(combine(last, item));
                }
            }
            _ => out.push(item),
        }
    }
    *items = out;
}

fn merge_columns(a: ColumnData, b: ColumnData) -> ColumnData {
    match (a, b) {
        (ColumnData::Simple { id, cell: x }, ColumnData::Simple { cell: y, .. }) => {
            ColumnData::Simple {
                id,
                cell: reconcile_owned(x, y),
            }
        }
        (
            ColumnData::Complex {
                id,
                deletion: da,
                cells: ca,
            },
            ColumnData::Complex {
                deletion: db,
                cells: cb,
                ..
            },
        ) => ColumnData::Complex {
            id,
            deletion: DeletionTime::newest(da, db),
            cells: merge_sorted(ca, cb, |c| &c.0, |x, y| (x.0, reconcile_owned(x.1, y.1))),
        },
        // Ids are never reused, so one id cannot be simple in one fragment and complex in
        // another. If corrupt input says otherwise, keep the complex one: a fixed choice keeps
        // merge commutative and associative.
        (c @ ColumnData::Complex { .. }, ColumnData::Simple { .. })
        | (ColumnData::Simple { .. }, c @ ColumnData::Complex { .. }) => c,
    }
}

/// One CQL row (or the static row) as stored: marker, row deletion and column data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Row {
    /// The row marker; `None` for rows only ever UPDATEd.
    pub liveness: Option<LivenessInfo>,
    /// Row tombstone (DELETE of the whole row).
    pub deletion: Option<DeletionTime>,
    /// Sorted by column id, unique.
    pub columns: Vec<ColumnData>,
}

impl Row {
    /// True when the row carries nothing at all (not even a tombstone).
    pub fn is_empty(&self) -> bool {
        self.liveness.is_none() && self.deletion.is_none() && self.columns.is_empty()
    }

    /// Whether `normalize` would leave the row as it is, by a check that allocates nothing, so
    /// that a row already in canonical form (what the query layer builds for most writes) need
    /// not be copied to be normalised. Conservative: a row with a deletion or a collection
    /// column is reported as not normalised even if it is.
    pub fn is_normalized(&self) -> bool {
        self.deletion.is_none()
            && self
                .columns
                .iter()
                .all(|c| matches!(c, ColumnData::Simple { .. }))
            && self.columns.windows(2).all(|w| w[0].id() < w[1].id())
    }

    /// The data of column `id`, if any.
    pub fn column(&self, id: ColumnId) -> Option<&ColumnData> {
        self.columns
            .binary_search_by_key(&id, ColumnData::id)
            .ok()
            .map(|i| &self.columns[i])
    }

    /// Cassandra's row merge: the newer marker, the newer row deletion, column by column cell
    /// reconciliation; then anything the resulting row deletion (or a collection's own deletion)
    /// shadows is dropped, as Cassandra's `Row.Merger` does. Inputs need not be normalized:
    /// each is normalized first (a linear check when it already is), so rows built by hand in
    /// any column order merge correctly.
    pub fn merge(mut self, mut other: Row) -> Row {
        self.normalize();
        other.normalize();
        let mut row = Row {
            liveness: LivenessInfo::newest(self.liveness, other.liveness),
            deletion: DeletionTime::newest(self.deletion, other.deletion),
            columns: merge_sorted(self.columns, other.columns, column_id_ref, merge_columns),
        };
        row.purge(row.deletion);
        row
    }

    /// Puts a row built by hand into canonical form: columns sorted by id and cell paths sorted,
    /// duplicates reconciled, shadowed data dropped. Cheap (no allocation) when already
    /// canonical. Storage calls it on every incoming row, so callers need not be careful.
    pub fn normalize(&mut self) {
        for column in &mut self.columns {
            if let ColumnData::Complex { cells, .. } = column {
                sort_and_coalesce(cells, |c| &c.0, |x, y| (x.0, reconcile_owned(x.1, y.1)));
            }
        }
        sort_and_coalesce(&mut self.columns, column_id_ref, merge_columns);
        self.purge(self.deletion);
    }

    /// Applies a deletion that covers this row from outside (partition deletion or a covering
    /// range tombstone, whichever is newest), as a read does before deciding liveness: drops the
    /// marker and every cell written at or before it, and the row's own deletion if the covering
    /// one supersedes it. `None` only purges what the row's own deletions shadow.
    pub fn apply_deletions(&mut self, covering: Option<DeletionTime>) {
        if let (Some(c), Some(own)) = (covering, self.deletion) {
            if c.supersedes(&own) {
                self.deletion = None;
            }
        }
        self.purge(DeletionTime::newest(covering, self.deletion));
    }

    /// Drops everything `active` (and each collection's own deletion) shadows.
    fn purge(&mut self, active: Option<DeletionTime>) {
        if let (Some(d), Some(l)) = (active, self.liveness) {
            if d.deletes(l.timestamp) {
                self.liveness = None;
            }
        }
        self.columns.retain_mut(|column| match column {
            ColumnData::Simple { cell, .. } => !active.is_some_and(|d| d.deletes(cell.timestamp)),
            ColumnData::Complex {
                deletion, cells, ..
            } => {
                if let (Some(a), Some(own)) = (active, *deletion) {
                    if a.supersedes(&own) {
                        *deletion = None;
                    }
                }
                if let Some(d) = DeletionTime::newest(active, *deletion) {
                    cells.retain(|(_, c)| !d.deletes(c.timestamp));
                }
                deletion.is_some() || !cells.is_empty()
            }
        });
    }

    /// Cassandra's row liveness (`Row.hasLiveData` without strict liveness): live if its marker
    /// is live, or any cell is live, at `now_seconds`, taking the row's own deletions into
    /// account. Deletions from outside the row must be applied first (`apply_deletions`).
    pub fn is_live(&self, now_seconds: LocalTime) -> bool {
        let row_deletion = self.deletion;
        let shadowed = |d: Option<DeletionTime>, ts: i64| d.is_some_and(|d| d.deletes(ts));
        if let Some(l) = &self.liveness {
            if l.is_live(now_seconds) && !shadowed(row_deletion, l.timestamp) {
                return true;
            }
        }
        self.columns.iter().any(|column| match column {
            ColumnData::Simple { cell, .. } => {
                cell.is_live(now_seconds) && !shadowed(row_deletion, cell.timestamp)
            }
            ColumnData::Complex {
                deletion, cells, ..
            } => {
                let d = DeletionTime::newest(row_deletion, *deletion);
                cells
                    .iter()
                    .any(|(_, c)| c.is_live(now_seconds) && !shadowed(d, c.timestamp))
            }
        })
    }
}

/// What a compaction may purge: Cassandra's `DeletionPurger`, with
/// `gcBefore = now - gc_grace_seconds` and, for the data outside the compaction, the smallest
/// write timestamp found there.
///
/// A tombstone (or an expired TTL) is purgeable when its local deletion time is strictly before
/// `gc_before` and its write timestamp strictly below `timestamps_below`. Purging is only
/// correct when everything older than the compacted data for the same key is in the
/// compaction, and everything outside it was written at `timestamps_below` or later (so a
/// write that arrived late, carrying an old timestamp, keeps its tombstone alive as in
/// Cassandra). Storage guarantees that; this type does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purger {
    /// The server clock, seconds since the epoch: decides whether a TTL has expired.
    pub now_seconds: LocalTime,
    /// Tombstones with `local_deletion_time < gc_before` may be dropped.
    pub gc_before: LocalTime,
    /// ... if their write timestamp is below this (`i64::MAX`: nothing outside).
    pub timestamps_below: i64,
}

impl Purger {
    /// Purges what is `gc_grace_seconds` old at `now_seconds` (saturating: a huge grace
    /// purges nothing), with nothing outside the compaction.
    pub fn new(now_seconds: LocalTime, gc_grace_seconds: i32) -> Purger {
        Purger {
            now_seconds,
            gc_before: now_seconds.saturating_sub(gc_grace_seconds.max(0).unsigned_abs()),
            timestamps_below: i64::MAX,
        }
    }

    /// Cassandra's `DeletionPurger.shouldPurge(timestamp, localDeletionTime)`.
    pub fn should_purge(&self, timestamp: i64, local_deletion_time: LocalTime) -> bool {
        local_deletion_time < self.gc_before && timestamp < self.timestamps_below
    }

    fn purges(&self, deletion: &DeletionTime) -> bool {
        self.should_purge(deletion.marked_for_delete_at, deletion.local_deletion_time)
    }

    /// Cassandra's `AbstractCell.purge`: a purgeable tombstone or expired cell is dropped; an
    /// expired cell that is not yet purgeable becomes a tombstone (smaller, and equivalent),
    /// dated at its write (`expiration - ttl`), so it too is purged once that is old enough.
    /// Unlike Cassandra, only when no cell outside the compaction can share its timestamp.
    fn purge_cell(&self, cell: Cell) -> Option<Cell> {
        let ts = cell.timestamp;
        match cell.value {
            CellValue::Tombstone {
                local_deletion_time,
            } => (!self.should_purge(ts, local_deletion_time)).then_some(cell),
            CellValue::Live {
                expiry: Some(e), ..
            } if self.now_seconds >= e.local_expiration_time => {
                if self.should_purge(ts, e.local_expiration_time) {
                    return None;
                }
                if ts >= self.timestamps_below {
                    // A cell outside may tie on the timestamp, and a tombstone would beat it
                    // where the expired cell might not: keep the cell as it is.
                    return Some(cell);
                }
                let written = e
                    .local_expiration_time
                    .saturating_sub(e.ttl_seconds.max(0).unsigned_abs());
                (!self.should_purge(ts, written)).then(|| Cell::tombstone(ts, written))
            }
            CellValue::Live { .. } => Some(cell),
        }
    }
}

impl Row {
    /// Cassandra's `Row.purge`: drops purgeable tombstones (row, collection and cell) and expired
    /// data (marker and cells) whose grace has passed, and turns expired cells into tombstones.
    /// What a dropped tombstone shadowed must already be gone, which `merge` and `normalize`
    /// ensure. Only for a row that is complete for its key (see `Purger`).
    pub fn purge_tombstones(&mut self, purger: &Purger) {
        self.normalize();
        if self.deletion.is_some_and(|d| purger.purges(&d)) {
            self.deletion = None;
        }
        if let Some(LivenessInfo {
            timestamp,
            expiry: Some(e),
        }) = self.liveness
        {
            if purger.now_seconds >= e.local_expiration_time
                && purger.should_purge(timestamp, e.local_expiration_time)
            {
                self.liveness = None;
            }
        }
        self.columns = std::mem::take(&mut self.columns)
            .into_iter()
            .filter_map(|column| match column {
                ColumnData::Simple { id, cell } => purger
                    .purge_cell(cell)
                    .map(|cell| ColumnData::Simple { id, cell }),
                ColumnData::Complex {
                    id,
                    deletion,
                    cells,
                } => {
                    let deletion = deletion.filter(|d| !purger.purges(d));
                    let cells: Vec<_> = cells
                        .into_iter()
                        .filter_map(|(path, c)| purger.purge_cell(c).map(|c| (path, c)))
                        .collect();
                    (deletion.is_some() || !cells.is_empty()).then_some(ColumnData::Complex {
                        id,
                        deletion,
                        cells,
                    })
                }
            })
            .collect();
    }
}

impl Row {
    /// The smallest write timestamp anywhere in the row (marker, deletions, cells).
    pub fn min_timestamp(&self) -> Option<i64> {
        let marker = self.liveness.map(|l| l.timestamp);
        let deletion = self.deletion.map(|d| d.marked_for_delete_at);
        let columns = self.columns.iter().filter_map(|c| match c {
            ColumnData::Simple { cell, .. } => Some(cell.timestamp),
            ColumnData::Complex {
                deletion, cells, ..
            } => deletion
                .map(|d| d.marked_for_delete_at)
                .into_iter()
                .chain(cells.iter().map(|(_, c)| c.timestamp))
                .min(),
        });
        marker.into_iter().chain(deletion).chain(columns).min()
    }
}

impl PartitionHeader {
    /// Drops the purgeable partition deletion and range tombstones. Unlike a row's, these shadow
    /// rows stored under other keys: storage may only call this once every row they shadow has
    /// been rid of what they shadowed (see `Row::apply_deletions`).
    pub fn purge_tombstones(&mut self, purger: &Purger) {
        if self.deletion.is_some_and(|d| purger.purges(&d)) {
            self.deletion = None;
        }
        self.range_tombstones
            .retain(|rt| !purger.purges(&rt.deletion));
    }

    /// The smallest write timestamp of its deletions.
    pub fn min_timestamp(&self) -> Option<i64> {
        self.deletion
            .iter()
            .chain(self.range_tombstones.iter().map(|rt| &rt.deletion))
            .map(|d| d.marked_for_delete_at)
            .min()
    }
}

/// `ColumnData::id` by reference, as the sorted-list helpers want a borrowed key.
fn column_id_ref(column: &ColumnData) -> &ColumnId {
    match column {
        ColumnData::Simple { id, .. } | ColumnData::Complex { id, .. } => id,
    }
}

/// One end of a clustering range. `prefix` is a byte-comparable encoded clustering prefix (zero
/// or more leading clustering components); each component's encoding is prefix-free, so "a key
/// has this prefix" is a byte-prefix test.
///
/// The derived ordering is only a canonical sort order for storage, not clustering order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusteringBound {
    pub prefix: Vec<u8>,
    pub inclusive: bool,
}

impl ClusteringBound {
    /// Whether full clustering key `key` is at or after this bound used as a range start.
    /// Inclusive: `key >= prefix` (every key with the prefix qualifies). Exclusive: after every
    /// key with the prefix.
    pub fn start_admits(&self, key: &[u8]) -> bool {
        if self.inclusive {
            key >= self.prefix.as_slice()
        } else {
            key > self.prefix.as_slice() && !key.starts_with(&self.prefix)
        }
    }

    /// Whether full clustering key `key` is at or before this bound used as a range end.
    /// Inclusive: before the prefix or having it. Exclusive: before every key with the prefix.
    pub fn end_admits(&self, key: &[u8]) -> bool {
        if self.inclusive {
            key < self.prefix.as_slice() || key.starts_with(&self.prefix)
        } else {
            key < self.prefix.as_slice()
        }
    }
}

/// Whether `key` lies within `[start, end]` (`None` = unbounded on that side).
pub fn clustering_range_contains(
    start: Option<&ClusteringBound>,
    end: Option<&ClusteringBound>,
    key: &[u8],
) -> bool {
    start.is_none_or(|s| s.start_admits(key)) && end.is_none_or(|e| e.end_admits(key))
}

/// Which clustering rows of a partition to read: the rows whose keys are admitted by `start`
/// and `end` (`ClusteringBound::start_admits` / `end_admits`; `None` = unbounded), in
/// clustering order or, if `reversed`, the reverse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusteringSlice {
    pub start: Option<ClusteringBound>,
    pub end: Option<ClusteringBound>,
    pub reversed: bool,
}

impl ClusteringSlice {
    /// Every row, in clustering order.
    pub fn all() -> ClusteringSlice {
        ClusteringSlice::default()
    }
}

/// A deletion of a range of rows within a partition (DELETE with a clustering prefix or range).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// `None` = from the first row.
    pub start: Option<ClusteringBound>,
    /// `None` = to the last row.
    pub end: Option<ClusteringBound>,
    pub deletion: DeletionTime,
}

impl RangeTombstone {
    /// Whether the row with full clustering key `key` falls in this range.
    pub fn covers(&self, key: &[u8]) -> bool {
        clustering_range_contains(self.start.as_ref(), self.end.as_ref(), key)
    }
}

/// Partition-level deletion information, stored once per partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PartitionHeader {
    /// Partition tombstone (DELETE by partition key only).
    pub deletion: Option<DeletionTime>,
    /// Range tombstones. After `merge`/`normalize`: sorted by (start, end) in the derived byte
    /// order, at most one per (start, end) pair, none shadowed by the partition deletion.
    pub range_tombstones: Vec<RangeTombstone>,
}

impl PartitionHeader {
    pub fn is_empty(&self) -> bool {
        self.deletion.is_none() && self.range_tombstones.is_empty()
    }

    /// Merges two headers: the newer partition deletion; range tombstones united, keeping the
    /// newest deletion for identical bounds and dropping any the partition deletion shadows
    /// (Cassandra drops a range tombstone that does not supersede the partition deletion).
    ///
    /// Overlapping ranges with different bounds are kept side by side rather than split as
    /// Cassandra's `RangeTombstoneList` does; readers take the newest covering one
    /// (`covering_deletion`), which gives the same answer.
    pub fn merge(self, other: PartitionHeader) -> PartitionHeader {
        let mut header = PartitionHeader {
            deletion: DeletionTime::newest(self.deletion, other.deletion),
            range_tombstones: self.range_tombstones,
        };
        header.range_tombstones.extend(other.range_tombstones);
        header.normalize();
        header
    }

    /// Puts the header into canonical form (see the field docs).
    pub fn normalize(&mut self) {
        let mut by_bounds: BTreeMap<
            (Option<ClusteringBound>, Option<ClusteringBound>),
            DeletionTime,
        > = BTreeMap::new();
        for rt in self.range_tombstones.drain(..) {
            if self.deletion.is_some_and(|pd| !rt.deletion.supersedes(&pd)) {
                continue;
            }
            let slot = by_bounds.entry((rt.start, rt.end)).or_insert(rt.deletion);
            *slot = (*slot).max(rt.deletion);
        }
        self.range_tombstones = by_bounds
            .into_iter()
            .map(|((start, end), deletion)| RangeTombstone {
                start,
                end,
                deletion,
            })
            .collect();
    }

    /// The newest deletion covering the row with clustering key `clustering`: the partition
    /// deletion or a range tombstone covering it. Pass it to `Row::apply_deletions`.
    pub fn covering_deletion(&self, clustering: &[u8]) -> Option<DeletionTime> {
        self.range_tombstones
            .iter()
            .filter(|rt| rt.covers(clustering))
            .fold(self.deletion, |best, rt| {
                DeletionTime::newest(best, Some(rt.deletion))
            })
    }
}

/// Errors decoding stored bytes. Always means corruption or a newer on-disk format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MutationError {
    #[error(
        "unsupported {structure} format version {version} (this build reads version {supported})"
    )]
    UnsupportedVersion {
        structure: &'static str,
        version: u8,
        supported: u8,
    },
    #[error("corrupt {structure} at byte {offset}: {detail}")]
    Corrupt {
        structure: &'static str,
        offset: usize,
        detail: String,
    },
}
