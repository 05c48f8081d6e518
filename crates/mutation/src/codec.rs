//! The binary encoding of `Row` and `PartitionHeader`: the values storage keeps on disk.
//!
//! Both formats start with a format version byte so a future layout can be read beside this one.
//! Integers: `i64`/`i32` are fixed-width big-endian (timestamps are dense, varints would not
//! help); `varint` is unsigned LEB128 (7 bits per byte, low group first, high bit = more bytes
//! follow, at most 5 bytes since every varint here is a `u32`), used for counts, lengths and
//! column ids, which are small.
//!
//! A `deletion` is 12 bytes: `marked_for_delete_at` i64, `local_deletion_time` u32.
//!
//! Row, version 1:
//! ```text
//! u8      version = 0x01
//! u8      flags: bit 0 = row marker present, bit 1 = the marker has a TTL,
//!                bit 2 = row deletion present; other bits must be 0
//! [i64    marker timestamp]                       if bit 0
//! [i32    marker ttl_seconds, u32 marker local_expiration_time]   if bit 1 (requires bit 0)
//! [12     row deletion]                           if bit 2
//! varint  column count, then per column (ids strictly increasing):
//!   varint  column id
//!   u8      kind: 0x00 simple, 0x01 complex, 0x02 complex with a collection deletion
//!   simple:  <cell>
//!   complex: [12 collection deletion if kind 0x02]
//!            varint cell count, then per cell (paths strictly increasing, unsigned bytes):
//!              varint path length, path bytes, <cell>
//! <cell>:
//!   u8      kind: 0x00 live, 0x01 live with TTL, 0x02 tombstone
//!   i64     write timestamp
//!   0x00:   varint value length, value bytes
//!   0x01:   i32 ttl_seconds, u32 local_expiration_time, varint value length, value bytes
//!   0x02:   u32 local_deletion_time
//! ```
//!
//! Partition header, version 1:
//! ```text
//! u8      version = 0x01
//! u8      flags: bit 0 = partition deletion present; other bits must be 0
//! [12     partition deletion]                     if bit 0
//! varint  range tombstone count, then per range tombstone:
//!   u8      flags: bit 0 = start present, bit 1 = start inclusive,
//!                  bit 2 = end present, bit 3 = end inclusive; other bits must be 0,
//!                  and an absent bound's inclusive bit must be 0
//!   [varint length, start prefix bytes]           if bit 0
//!   [varint length, end prefix bytes]             if bit 2
//!   12      deletion
//! ```
//!
//! Nothing may follow the last field. Decoding checks every length against the bytes left
//! before allocating, so corrupt input yields `MutationError::Corrupt` (naming the structure,
//! byte offset and what is wrong), never a panic or an oversized allocation.

use crate::{
    cell_rank, Cell, CellRef, CellValue, ClusteringBound, ColumnData, ColumnId, DeletionTime,
    Expiry, LivenessInfo, MutationError, PartitionHeader, RangeTombstone, Row,
};

/// The version byte `encode_row` writes.
pub const ROW_FORMAT_VERSION: u8 = 1;
/// The version byte `encode_partition_header` writes.
pub const PARTITION_HEADER_FORMAT_VERSION: u8 = 1;

const ROW_HAS_MARKER: u8 = 0x01;
const ROW_MARKER_HAS_TTL: u8 = 0x02;
const ROW_HAS_DELETION: u8 = 0x04;

const COLUMN_SIMPLE: u8 = 0x00;
const COLUMN_COMPLEX: u8 = 0x01;
const COLUMN_COMPLEX_WITH_DELETION: u8 = 0x02;

const CELL_LIVE: u8 = 0x00;
const CELL_EXPIRING: u8 = 0x01;
const CELL_TOMBSTONE: u8 = 0x02;

const HEADER_HAS_DELETION: u8 = 0x01;

const RT_HAS_START: u8 = 0x01;
const RT_START_INCLUSIVE: u8 = 0x02;
const RT_HAS_END: u8 = 0x04;
const RT_END_INCLUSIVE: u8 = 0x08;

pub(crate) fn put_varint(out: &mut Vec<u8>, v: u32) {
    let (bytes, len) = varint_bytes(v);
    out.extend_from_slice(&bytes[..len]);
}

/// `put_varint`'s bytes, on the stack: the buffer and how many of its bytes are used.
fn varint_bytes(mut v: u32) -> ([u8; 5], usize) {
    let mut bytes = [0u8; 5];
    let mut len = 0;
    while v >= 0x80 {
        bytes[len] = (v as u8 & 0x7f) | 0x80;
        v >>= 7;
        len += 1;
    }
    bytes[len] = v as u8;
    (bytes, len + 1)
}

pub(crate) fn put_len(out: &mut Vec<u8>, len: usize) {
    // Values and keys are bounded far below 4 GiB by the protocol (frames are at most 256 MiB),
    // so this cannot fail for data that reached storage.
    put_varint(
        out,
        u32::try_from(len).expect("cell values and paths are smaller than 4 GiB"),
    );
}

fn put_deletion(out: &mut Vec<u8>, d: &DeletionTime) {
    out.extend_from_slice(&d.marked_for_delete_at.to_be_bytes());
    out.extend_from_slice(&d.local_deletion_time.to_be_bytes());
}

fn put_cell(out: &mut Vec<u8>, cell: &Cell) {
    match &cell.value {
        CellValue::Live {
            value,
            expiry: None,
        } => {
            out.push(CELL_LIVE);
            out.extend_from_slice(&cell.timestamp.to_be_bytes());
            put_len(out, value.len());
            out.extend_from_slice(value);
        }
        CellValue::Live {
            value,
            expiry: Some(e),
        } => {
            out.push(CELL_EXPIRING);
            out.extend_from_slice(&cell.timestamp.to_be_bytes());
            out.extend_from_slice(&e.ttl_seconds.to_be_bytes());
            out.extend_from_slice(&e.local_expiration_time.to_be_bytes());
            put_len(out, value.len());
            out.extend_from_slice(value);
        }
        CellValue::Tombstone {
            local_deletion_time,
        } => {
            out.push(CELL_TOMBSTONE);
            out.extend_from_slice(&cell.timestamp.to_be_bytes());
            out.extend_from_slice(&local_deletion_time.to_be_bytes());
        }
    }
}

/// A row's version byte, flags, marker and deletion.
fn put_row_head(out: &mut Vec<u8>, liveness: Option<LivenessInfo>, deletion: Option<DeletionTime>) {
    out.push(ROW_FORMAT_VERSION);
    let mut flags = 0;
    if let Some(l) = &liveness {
        flags |= ROW_HAS_MARKER;
        if l.expiry.is_some() {
            flags |= ROW_MARKER_HAS_TTL;
        }
    }
    if deletion.is_some() {
        flags |= ROW_HAS_DELETION;
    }
    out.push(flags);
    if let Some(l) = &liveness {
        out.extend_from_slice(&l.timestamp.to_be_bytes());
        if let Some(e) = &l.expiry {
            out.extend_from_slice(&e.ttl_seconds.to_be_bytes());
            out.extend_from_slice(&e.local_expiration_time.to_be_bytes());
        }
    }
    if let Some(d) = &deletion {
        put_deletion(out, d);
    }
}

/// Appends the encoding of `row` to `out`. The row should be normalized (`Row::normalize` or a
/// product of `Row::merge`): the decoder rejects unsorted or duplicate columns and cell paths.
pub fn encode_row(row: &Row, out: &mut Vec<u8>) {
    // One allocation instead of a doubling per few cells (a five-column row grew its buffer
    // five times).
    out.reserve(encoded_row_len_bound(row));
    put_row_head(out, row.liveness, row.deletion);
    put_len(out, row.columns.len());
    for column in &row.columns {
        match column {
            ColumnData::Simple { id, cell } => {
                put_varint(out, *id);
                out.push(COLUMN_SIMPLE);
                put_cell(out, cell);
            }
            ColumnData::Complex {
                id,
                deletion,
                cells,
            } => {
                put_varint(out, *id);
                match deletion {
                    None => out.push(COLUMN_COMPLEX),
                    Some(d) => {
                        out.push(COLUMN_COMPLEX_WITH_DELETION);
                        put_deletion(out, d);
                    }
                }
                put_len(out, cells.len());
                for (path, cell) in cells {
                    put_len(out, path.len());
                    out.extend_from_slice(path);
                    put_cell(out, cell);
                }
            }
        }
    }
}

/// An upper bound of `encode_row(row)`'s length: the fixed fields at their largest and each
/// length or id as a 5-byte varint.
pub(crate) fn encoded_row_len_bound(row: &Row) -> usize {
    const VARINT: usize = 5;
    const DELETION: usize = 8 + 4;
    // Kind, timestamp, TTL, local expiration or deletion time, value length.
    const CELL: usize = 1 + 8 + 4 + 4 + VARINT;
    let cells: usize = row
        .columns
        .iter()
        .map(|column| match column {
            ColumnData::Simple { cell, .. } => VARINT + 1 + CELL + cell_value_len(cell),
            ColumnData::Complex { cells, .. } => {
                VARINT
                    + 1
                    + DELETION
                    + VARINT
                    + cells
                        .iter()
                        .map(|(path, cell)| VARINT + path.len() + CELL + cell_value_len(cell))
                        .sum::<usize>()
            }
        })
        .sum();
    // Version, flags, marker (timestamp, TTL, local expiration time), deletion, column count.
    2 + 8 + 4 + 4 + DELETION + VARINT + cells
}

fn cell_value_len(cell: &Cell) -> usize {
    match &cell.value {
        CellValue::Live { value, .. } => value.len(),
        CellValue::Tombstone { .. } => 0,
    }
}

fn put_bound(out: &mut Vec<u8>, bound: &ClusteringBound) {
    put_len(out, bound.prefix.len());
    out.extend_from_slice(&bound.prefix);
}

/// Appends the encoding of `header` to `out`.
pub fn encode_partition_header(header: &PartitionHeader, out: &mut Vec<u8>) {
    out.push(PARTITION_HEADER_FORMAT_VERSION);
    out.push(if header.deletion.is_some() {
        HEADER_HAS_DELETION
    } else {
        0
    });
    if let Some(d) = &header.deletion {
        put_deletion(out, d);
    }
    put_len(out, header.range_tombstones.len());
    for rt in &header.range_tombstones {
        let mut flags = 0;
        if let Some(s) = &rt.start {
            flags |= RT_HAS_START | if s.inclusive { RT_START_INCLUSIVE } else { 0 };
        }
        if let Some(e) = &rt.end {
            flags |= RT_HAS_END | if e.inclusive { RT_END_INCLUSIVE } else { 0 };
        }
        out.push(flags);
        if let Some(s) = &rt.start {
            put_bound(out, s);
        }
        if let Some(e) = &rt.end {
            put_bound(out, e);
        }
        put_deletion(out, &rt.deletion);
    }
}

/// A bounds-checked cursor over encoded bytes; every error names the structure and offset.
/// `wire` reads messages with it too.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
    structure: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`, naming `structure` in its errors.
    pub(crate) fn new(bytes: &'a [u8], structure: &'static str) -> Reader<'a> {
        Reader {
            bytes,
            offset: 0,
            structure,
        }
    }

    #[cold]
    pub(crate) fn corrupt(&self, detail: impl Into<String>) -> MutationError {
        MutationError::Corrupt {
            structure: self.structure,
            offset: self.offset,
            detail: detail.into(),
        }
    }

    /// The offset of the next byte to read.
    pub(crate) fn offset(&self) -> usize {
        self.offset
    }

    /// What the bytes are, as errors name it.
    pub(crate) fn structure(&self) -> &'static str {
        self.structure
    }

    // The readers below run for every field of every stored value read or merged: inlined,
    // with their errors built out of line (they were most of a row merge's time).
    #[inline]
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], MutationError> {
        match self.bytes.get(self.offset..self.offset.saturating_add(n)) {
            Some(slice) => {
                self.offset += n;
                Ok(slice)
            }
            None => Err(self.too_short(n, what)),
        }
    }

    #[cold]
    #[inline(never)]
    fn too_short(&self, n: usize, what: &str) -> MutationError {
        let remaining = self.bytes.len() - self.offset;
        self.corrupt(format!(
            "{what} needs {n} bytes but only {remaining} remain"
        ))
    }

    #[inline]
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, MutationError> {
        Ok(self.take(1, what)?[0])
    }

    /// A local deletion or expiration time: 4 bytes, unsigned (see `LocalTime`).
    #[inline]
    fn local_time(&mut self, what: &str) -> Result<crate::LocalTime, MutationError> {
        self.i32(what).map(|v| v as u32)
    }

    #[inline]
    fn i32(&mut self, what: &str) -> Result<i32, MutationError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline]
    pub(crate) fn i64(&mut self, what: &str) -> Result<i64, MutationError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, MutationError> {
        self.i64(what).map(|v| v as u64)
    }

    #[inline]
    pub(crate) fn varint(&mut self, what: &str) -> Result<u32, MutationError> {
        // Ids, counts and most lengths fit in one byte.
        if let Some(&byte) = self.bytes.get(self.offset) {
            if byte < 0x80 {
                self.offset += 1;
                return Ok(u32::from(byte));
            }
        }
        self.varint_long(what)
    }

    #[inline(never)]
    fn varint_long(&mut self, what: &str) -> Result<u32, MutationError> {
        let start = self.offset;
        let mut value: u64 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.u8(what)?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return u32::try_from(value).map_err(|_| MutationError::Corrupt {
                    structure: self.structure,
                    offset: start,
                    detail: format!("{what} varint overflows u32"),
                });
            }
        }
        Err(MutationError::Corrupt {
            structure: self.structure,
            offset: start,
            detail: format!("{what} varint longer than 5 bytes"),
        })
    }

    /// A count of items each taking at least `min_item_bytes`, checked against the bytes left so
    /// a corrupt count cannot trigger a huge allocation.
    pub(crate) fn count(
        &mut self,
        what: &str,
        min_item_bytes: usize,
    ) -> Result<usize, MutationError> {
        let n = self.varint(what)? as usize;
        let remaining = self.bytes.len() - self.offset;
        if n.saturating_mul(min_item_bytes) > remaining {
            return Err(self.corrupt(format!(
                "{what} {n} cannot fit in the {remaining} bytes left"
            )));
        }
        Ok(n)
    }

    pub(crate) fn bytes_with_len(&mut self, what: &str) -> Result<Vec<u8>, MutationError> {
        Ok(self.slice_with_len(what)?.to_vec())
    }

    #[inline]
    pub(crate) fn slice_with_len(&mut self, what: &str) -> Result<&'a [u8], MutationError> {
        let len = self.varint(what)? as usize;
        self.take(len, what)
    }

    fn deletion(&mut self, what: &str) -> Result<DeletionTime, MutationError> {
        Ok(DeletionTime {
            marked_for_delete_at: self.i64(what)?,
            local_deletion_time: self.local_time(what)?,
        })
    }

    pub(crate) fn version(&mut self, supported: u8) -> Result<(), MutationError> {
        if self.bytes.is_empty() {
            return Err(self.corrupt("empty value"));
        }
        let version = self.u8("format version")?;
        if version != supported {
            return Err(MutationError::UnsupportedVersion {
                structure: self.structure,
                version,
                supported,
            });
        }
        Ok(())
    }

    pub(crate) fn finish(&self) -> Result<(), MutationError> {
        if self.offset != self.bytes.len() {
            return Err(self.corrupt(format!(
                "{} trailing bytes after the last field",
                self.bytes.len() - self.offset
            )));
        }
        Ok(())
    }

    fn cell(&mut self) -> Result<Cell, MutationError> {
        let (timestamp, cell) = self.raw_cell()?;
        Ok(owned_cell(timestamp, cell))
    }

    /// A cell's timestamp and the rest of it, its value borrowed.
    fn raw_cell(&mut self) -> Result<(i64, CellRef<'a>), MutationError> {
        let kind_offset = self.offset;
        let kind = self.u8("cell kind")?;
        let timestamp = self.i64("cell timestamp")?;
        let cell = match kind {
            CELL_LIVE => CellRef::Live(self.slice_with_len("cell value")?),
            CELL_EXPIRING => {
                let expiry = Expiry {
                    ttl_seconds: self.i32("cell ttl")?,
                    local_expiration_time: self.local_time("cell expiration time")?,
                };
                CellRef::Expiring(self.slice_with_len("cell value")?, expiry)
            }
            CELL_TOMBSTONE => CellRef::Tombstone(self.local_time("cell tombstone deletion time")?),
            other => {
                return Err(MutationError::Corrupt {
                    structure: self.structure,
                    offset: kind_offset,
                    detail: format!("unknown cell kind 0x{other:02x}"),
                })
            }
        };
        Ok((timestamp, cell))
    }
}

/// A borrowed cell as an owned one (its value copied).
fn owned_cell(timestamp: i64, cell: CellRef<'_>) -> Cell {
    let value = match cell {
        CellRef::Live(value) => CellValue::Live {
            value: value.to_vec(),
            expiry: None,
        },
        CellRef::Expiring(value, expiry) => CellValue::Live {
            value: value.to_vec(),
            expiry: Some(expiry),
        },
        CellRef::Tombstone(local_deletion_time) => CellValue::Tombstone {
            local_deletion_time,
        },
    };
    Cell { timestamp, value }
}

/// An encoded row's version, flags, marker and deletion, and a reader at its column count.
#[inline]
fn row_head(
    bytes: &[u8],
) -> Result<(Reader<'_>, Option<LivenessInfo>, Option<DeletionTime>), MutationError> {
    // The common head, read with one bounds check: a row marker without a TTL, no deletion.
    if let Some(head) = bytes.get(..10) {
        if head[0] == ROW_FORMAT_VERSION && head[1] == ROW_HAS_MARKER {
            let timestamp = i64::from_be_bytes(head[2..10].try_into().expect("8 bytes"));
            let r = Reader {
                bytes,
                offset: 10,
                structure: "row",
            };
            let liveness = LivenessInfo {
                timestamp,
                expiry: None,
            };
            return Ok((r, Some(liveness), None));
        }
    }
    row_head_other(bytes)
}

#[inline(never)]
fn row_head_other(
    bytes: &[u8],
) -> Result<(Reader<'_>, Option<LivenessInfo>, Option<DeletionTime>), MutationError> {
    let mut r = Reader {
        bytes,
        offset: 0,
        structure: "row",
    };
    r.version(ROW_FORMAT_VERSION)?;
    let flags = r.u8("row flags")?;
    if flags & !(ROW_HAS_MARKER | ROW_MARKER_HAS_TTL | ROW_HAS_DELETION) != 0
        || (flags & ROW_MARKER_HAS_TTL != 0 && flags & ROW_HAS_MARKER == 0)
    {
        return Err(r.corrupt(format!("invalid row flags 0x{flags:02x}")));
    }
    let liveness = if flags & ROW_HAS_MARKER != 0 {
        let timestamp = r.i64("row marker timestamp")?;
        let expiry = if flags & ROW_MARKER_HAS_TTL != 0 {
            Some(Expiry {
                ttl_seconds: r.i32("row marker ttl")?,
                local_expiration_time: r.local_time("row marker expiration time")?,
            })
        } else {
            None
        };
        Some(LivenessInfo { timestamp, expiry })
    } else {
        None
    };
    let deletion = if flags & ROW_HAS_DELETION != 0 {
        Some(r.deletion("row deletion")?)
    } else {
        None
    };
    Ok((r, liveness, deletion))
}

/// Decodes a value written by `encode_row`.
pub fn decode_row(bytes: &[u8]) -> Result<Row, MutationError> {
    let (mut r, liveness, deletion) = row_head(bytes)?;
    // Smallest column: 1-byte id, kind byte, 1-byte cell count of an empty collection.
    let column_count = r.count("column count", 3)?;
    let mut columns = Vec::with_capacity(column_count);
    let mut previous_id: Option<u32> = None;
    for _ in 0..column_count {
        if let Some((raw, end)) = common_cell(r.bytes, r.offset, previous_id) {
            r.offset = end;
            previous_id = Some(raw.id);
            let cell = owned_cell(raw.timestamp, raw.cell);
            columns.push(ColumnData::Simple { id: raw.id, cell });
            continue;
        }
        let id_offset = r.offset;
        let id = r.varint("column id")?;
        if previous_id.is_some_and(|p| p >= id) {
            return Err(MutationError::Corrupt {
                structure: "row",
                offset: id_offset,
                detail: format!("column id {id} out of order"),
            });
        }
        previous_id = Some(id);
        let kind_offset = r.offset;
        let column = match r.u8("column kind")? {
            COLUMN_SIMPLE => ColumnData::Simple {
                id,
                cell: r.cell()?,
            },
            kind @ (COLUMN_COMPLEX | COLUMN_COMPLEX_WITH_DELETION) => {
                let deletion = if kind == COLUMN_COMPLEX_WITH_DELETION {
                    Some(r.deletion("collection deletion")?)
                } else {
                    None
                };
                // Smallest element: 1-byte path length, live cell with an empty value (1 + 8 + 1).
                let cell_count = r.count("collection cell count", 11)?;
                let mut cells: Vec<(Vec<u8>, Cell)> = Vec::with_capacity(cell_count);
                for _ in 0..cell_count {
                    let path_offset = r.offset;
                    let path = r.bytes_with_len("cell path")?;
                    if cells.last().is_some_and(|(p, _)| *p >= path) {
                        return Err(MutationError::Corrupt {
                            structure: "row",
                            offset: path_offset,
                            detail: format!("cell path out of order in column {id}"),
                        });
                    }
                    let cell = r.cell()?;
                    cells.push((path, cell));
                }
                ColumnData::Complex {
                    id,
                    deletion,
                    cells,
                }
            }
            other => {
                return Err(MutationError::Corrupt {
                    structure: "row",
                    offset: kind_offset,
                    detail: format!("unknown column kind 0x{other:02x}"),
                })
            }
        };
        columns.push(column);
    }
    r.finish()?;
    Ok(Row {
        liveness,
        deletion,
        columns,
    })
}

/// One simple column of an encoded row: its id, its cell's timestamp and what else
/// reconciliation looks at, and the cell's encoding (kind byte to the end of the value).
#[derive(Clone, Copy)]
struct RawCell<'a> {
    id: ColumnId,
    timestamp: i64,
    cell: CellRef<'a>,
    bytes: &'a [u8],
}

/// The simple column at `at` in the common shape, read straight off the bytes with one bounds
/// check for its fixed fields, and where it ends: a one-byte column id (above `previous`), a
/// live or expiring cell, a value under 128 bytes. `None` for anything else, which the general
/// readers take (and reject if they must, saying why). Merges and decodes of standard rows
/// spent most of their time in those readers' `Result`s.
#[inline(always)]
fn common_cell(
    bytes: &[u8],
    at: usize,
    previous: Option<ColumnId>,
) -> Option<(RawCell<'_>, usize)> {
    // id, column kind, cell kind, timestamp.
    let head = bytes.get(at..at + 11)?;
    let id = ColumnId::from(head[0]);
    if head[0] >= 0x80 || head[1] != COLUMN_SIMPLE || previous.is_some_and(|p| p >= id) {
        return None;
    }
    let timestamp = i64::from_be_bytes(head[3..11].try_into().ok()?);
    let (value_at, expiry) = match head[2] {
        CELL_LIVE => (at + 11, None),
        CELL_EXPIRING => {
            let e = bytes.get(at + 11..at + 19)?;
            let expiry = Expiry {
                ttl_seconds: i32::from_be_bytes(e[..4].try_into().ok()?),
                local_expiration_time: u32::from_be_bytes(e[4..].try_into().ok()?),
            };
            (at + 19, Some(expiry))
        }
        _ => return None,
    };
    let len = *bytes.get(value_at)?;
    if len >= 0x80 {
        return None;
    }
    let end = value_at + 1 + usize::from(len);
    let value = bytes.get(value_at + 1..end)?;
    let cell = match expiry {
        None => CellRef::Live(value),
        Some(e) => CellRef::Expiring(value, e),
    };
    let raw = RawCell {
        id,
        timestamp,
        cell,
        bytes: &bytes[at + 2..end],
    };
    Some((raw, end))
}

/// The columns of an encoded row, read one at a time without copying. Fails (`Err(())`) at a
/// collection column or anything `decode_row` would reject (it then says why).
struct SimpleCells<'a> {
    r: Reader<'a>,
    left: usize,
    previous: Option<ColumnId>,
}

impl<'a> SimpleCells<'a> {
    /// The row's marker, deletion and columns.
    fn of(
        bytes: &'a [u8],
    ) -> Result<(Option<LivenessInfo>, Option<DeletionTime>, SimpleCells<'a>), ()> {
        let (mut r, liveness, deletion) = row_head(bytes).map_err(drop)?;
        let left = r.count("column count", 3).map_err(drop)?;
        let cells = SimpleCells {
            r,
            left,
            previous: None,
        };
        Ok((liveness, deletion, cells))
    }

    /// The next column, or `None` after the last (when nothing may follow it).
    #[inline(always)]
    fn next_cell(&mut self) -> Result<Option<RawCell<'a>>, ()> {
        if self.left == 0 {
            return self.r.finish().map(|()| None).map_err(drop);
        }
        if let Some(cell) = self.next_common() {
            return Ok(Some(cell));
        }
        self.next_other()
    }

    #[inline(always)]
    fn next_common(&mut self) -> Option<RawCell<'a>> {
        let (cell, end) = common_cell(self.r.bytes, self.r.offset, self.previous)?;
        self.left -= 1;
        self.previous = Some(cell.id);
        self.r.offset = end;
        Some(cell)
    }

    #[inline(never)]
    fn next_other(&mut self) -> Result<Option<RawCell<'a>>, ()> {
        self.left -= 1;
        let id = self.r.varint("column id").map_err(drop)?;
        if self.previous.is_some_and(|p| p >= id)
            || self.r.u8("column kind").map_err(drop)? != COLUMN_SIMPLE
        {
            return Err(());
        }
        self.previous = Some(id);
        let start = self.r.offset;
        let (timestamp, cell) = self.r.raw_cell().map_err(drop)?;
        Ok(Some(RawCell {
            id,
            timestamp,
            cell,
            bytes: &self.r.bytes[start..self.r.offset],
        }))
    }
}

/// `encode_row(&decode_row(a)?.merge(decode_row(b)?))`, byte for byte, for the common case of
/// rows without collection columns, merged on their encodings: each winning cell's encoding is
/// copied and nothing is decoded into owned values (one allocation, the result, against one
/// per cell and row). The write path merges every write into a cached partition, and flushes
/// and compactions merge every overwritten row. `None` when either row has a collection column
/// or does not decode: the caller then merges decoded rows, which reports a corrupt value.
pub fn merge_encoded_rows(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let (liveness_a, deletion_a, mut cells_a) = SimpleCells::of(a).ok()?;
    let (liveness_b, deletion_b, mut cells_b) = SimpleCells::of(b).ok()?;
    // As `Row::merge`: the newer marker and deletion, cell by cell reconciliation (on a full
    // tie the cells are identical), then what the deletion shadows dropped.
    let deletion = DeletionTime::newest(deletion_a, deletion_b);
    let shadowed = |timestamp: i64| deletion.is_some_and(|d| d.deletes(timestamp));
    let liveness = LivenessInfo::newest(liveness_a, liveness_b).filter(|l| !shadowed(l.timestamp));
    let mut out = Vec::with_capacity(a.len() + b.len());
    put_row_head(&mut out, liveness, deletion);
    // The column count comes first: room for the most there can be, fixed up at the end.
    let count_at = out.len();
    put_len(&mut out, cells_a.left + cells_b.left);
    let count_len = out.len() - count_at;
    let mut count = 0;
    let (mut x, mut y) = (cells_a.next_cell().ok()?, cells_b.next_cell().ok()?);
    loop {
        let winner = match (x, y) {
            (Some(p), Some(q)) if p.id == q.id => {
                x = cells_a.next_cell().ok()?;
                y = cells_b.next_cell().ok()?;
                if cell_rank(q.timestamp, q.cell) > cell_rank(p.timestamp, p.cell) {
                    q
                } else {
                    p
                }
            }
            (Some(p), Some(q)) if p.id < q.id => {
                x = cells_a.next_cell().ok()?;
                p
            }
            (_, Some(q)) => {
                y = cells_b.next_cell().ok()?;
                q
            }
            (Some(p), None) => {
                x = cells_a.next_cell().ok()?;
                p
            }
            (None, None) => break,
        };
        if !shadowed(winner.timestamp) {
            count += 1;
            put_varint(&mut out, winner.id);
            out.push(COLUMN_SIMPLE);
            out.extend_from_slice(winner.bytes);
        }
    }
    let (varint, len) = varint_bytes(u32::try_from(count).ok()?);
    if len == count_len {
        // Most merges: the count takes as many bytes as the room left for it.
        out[count_at..count_at + len].copy_from_slice(&varint[..len]);
    } else {
        out.splice(
            count_at..count_at + count_len,
            varint[..len].iter().copied(),
        );
    }
    Some(out)
}

/// Decodes a value written by `encode_partition_header`.
pub fn decode_partition_header(bytes: &[u8]) -> Result<PartitionHeader, MutationError> {
    let mut r = Reader {
        bytes,
        offset: 0,
        structure: "partition header",
    };
    r.version(PARTITION_HEADER_FORMAT_VERSION)?;
    let flags = r.u8("partition header flags")?;
    if flags & !HEADER_HAS_DELETION != 0 {
        return Err(r.corrupt(format!("invalid partition header flags 0x{flags:02x}")));
    }
    let deletion = if flags & HEADER_HAS_DELETION != 0 {
        Some(r.deletion("partition deletion")?)
    } else {
        None
    };
    // Smallest range tombstone: flags + deletion.
    let count = r.count("range tombstone count", 13)?;
    let mut range_tombstones = Vec::with_capacity(count);
    for _ in 0..count {
        let flags = r.u8("range tombstone flags")?;
        let valid = RT_HAS_START | RT_START_INCLUSIVE | RT_HAS_END | RT_END_INCLUSIVE;
        if flags & !valid != 0
            || (flags & RT_START_INCLUSIVE != 0 && flags & RT_HAS_START == 0)
            || (flags & RT_END_INCLUSIVE != 0 && flags & RT_HAS_END == 0)
        {
            return Err(r.corrupt(format!("invalid range tombstone flags 0x{flags:02x}")));
        }
        let start = if flags & RT_HAS_START != 0 {
            Some(ClusteringBound {
                prefix: r.bytes_with_len("range tombstone start")?,
                inclusive: flags & RT_START_INCLUSIVE != 0,
            })
        } else {
            None
        };
        let end = if flags & RT_HAS_END != 0 {
            Some(ClusteringBound {
                prefix: r.bytes_with_len("range tombstone end")?,
                inclusive: flags & RT_END_INCLUSIVE != 0,
            })
        } else {
            None
        };
        let deletion = r.deletion("range tombstone deletion")?;
        range_tombstones.push(RangeTombstone {
            start,
            end,
            deletion,
        });
    }
    r.finish()?;
    Ok(PartitionHeader {
        deletion,
        range_tombstones,
    })
}
