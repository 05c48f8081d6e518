//! The binary encoding of what travels between nodes: a mutation (the partition updates one
//! write applies), a replica's read command, and its response (a partition page or a scan page).
//!
//! Each message starts with its own format version byte, so a node can refuse, with a clear
//! error (`MutationError::UnsupportedVersion`), a message a newer node wrote, and a future
//! layout can be read beside this one. Rows and partition headers inside a message are the
//! storage value encodings of `codec` (each with its own version byte), length-delimited, so a
//! row travels exactly as it is stored. A row is encoded normalized (`Row::normalize`, which
//! storage applies to every incoming row anyway): an update's row built in any column order
//! arrives canonical, equal in effect.
//!
//! Integers as in `codec`: `i64`/`u64` fixed-width big-endian, `varint` unsigned LEB128 of at
//! most 5 bytes (a `u32`) for counts and lengths. `<bytes>` is a varint length then that many
//! bytes; `<opt bytes>` is a `u8` 0 (absent) or 1 (present) then, if present, `<bytes>`.
//!
//! ```text
//! <partition key>:  i64 token, <bytes> key
//! <row>:            <bytes> holding a `codec` row encoding
//! <header>:         <bytes> holding a `codec` partition header encoding
//! <rows>:           varint row count, then per row: <bytes> clustering key, <row>
//!
//! Mutation, version 1 (`encode_mutation`):
//! u8      version = 0x01
//! varint  update count, then per update:
//!   16      table id (UUID bytes)
//!   <partition key>
//!   u8      flags: bit 0 = header present, bit 1 = static row present; other bits must be 0
//!   [<header>]                                      if bit 0
//!   [<row>]                                         if bit 1
//!   <rows>
//!
//! Read command, version 1 (`encode_read_command`):
//! u8      version = 0x01
//! u8      kind: 0x00 partition, 0x01 range
//! 16      table id
//! u64     max rows
//! partition:
//!   <partition key>
//!   u8      slice flags: bit 0 = start present, bit 1 = start inclusive, bit 2 = end present,
//!                        bit 3 = end inclusive, bit 4 = reversed; other bits must be 0, and an
//!                        absent bound's inclusive bit must be 0
//!   [<bytes> start prefix]                          if bit 0
//!   [<bytes> end prefix]                            if bit 2
//!   <opt bytes> resume
//! range:
//!   u8      start kind: 0x00 beginning, 0x01 token, 0x02 resume, 0x03 after
//!   [i64    token]                                  if 0x01
//!   [<bytes> resume]                                if 0x02
//!   [<partition key>, <opt bytes> clustering]       if 0x03
//!   u8      0 = no end token, 1 = end token follows
//!   [i64    end token]
//!
//! Read response, version 1 (`encode_read_response`):
//! u8      version = 0x01
//! u8      kind: 0x00 partition page, 0x01 scan page
//! partition page:
//!   <partition data>
//!   <opt bytes> resume
//! scan page:
//!   varint  partition count, then that many <partition data>
//!   <opt bytes> resume
//!   u8      last partition continues: 0 or 1
//! <partition data>:
//!   <partition key>, <header>, u8 0/1 static row present, [<row>], <rows>
//! ```
//!
//! Nothing may follow the last field. A decoder trusts no length or count: each is checked
//! against the bytes left before anything is allocated for it, so any input yields a value or
//! `MutationError::Corrupt` (naming the message, byte offset and what is wrong), never a panic,
//! and allocation stays proportional to the input's length.

use std::borrow::Cow;

use crate::codec::{put_len, Reader};
use crate::{
    decode_partition_header, decode_row, encode_partition_header, encode_row, ClusteringBound,
    ClusteringSlice, MutationError, PartitionData, PartitionHeader, PartitionKey, PartitionPage,
    PartitionUpdate, ReadCommand, ReadResponse, Row, ScanPage, ScanStart, TableId,
};

/// The version byte `encode_mutation` writes.
pub const MUTATION_FORMAT_VERSION: u8 = 1;
/// The version byte `encode_read_command` writes.
pub const READ_COMMAND_FORMAT_VERSION: u8 = 1;
/// The version byte `encode_read_response` writes.
pub const READ_RESPONSE_FORMAT_VERSION: u8 = 1;

const UPDATE_HAS_HEADER: u8 = 0x01;
const UPDATE_HAS_STATIC_ROW: u8 = 0x02;

const READ_PARTITION: u8 = 0x00;
const READ_RANGE: u8 = 0x01;

const SLICE_HAS_START: u8 = 0x01;
const SLICE_START_INCLUSIVE: u8 = 0x02;
const SLICE_HAS_END: u8 = 0x04;
const SLICE_END_INCLUSIVE: u8 = 0x08;
const SLICE_REVERSED: u8 = 0x10;

const SCAN_FROM_BEGINNING: u8 = 0x00;
const SCAN_FROM_TOKEN: u8 = 0x01;
const SCAN_FROM_RESUME: u8 = 0x02;
const SCAN_AFTER: u8 = 0x03;

const RESPONSE_PARTITION_PAGE: u8 = 0x00;
const RESPONSE_SCAN_PAGE: u8 = 0x01;

/// The fewest bytes each repeated item can take, which bounds a count by the bytes left.
/// A row: a 1-byte clustering length, a 1-byte row length, and a row's version, flags and
/// column count.
const MIN_ROW_BYTES: usize = 1 + 1 + 3;
/// A partition key: the token and a 1-byte key length.
const MIN_KEY_BYTES: usize = 8 + 1;
/// An update: table id, key, flags, row count.
const MIN_UPDATE_BYTES: usize = 16 + MIN_KEY_BYTES + 1 + 1;
/// A partition's data: key, a header (1-byte length; version, flags, range tombstone count),
/// static row flag, row count.
const MIN_PARTITION_DATA_BYTES: usize = MIN_KEY_BYTES + 1 + 3 + 1 + 1;

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_opt_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            put_bytes(out, b);
        }
    }
}

fn put_key(out: &mut Vec<u8>, key: &PartitionKey) {
    out.extend_from_slice(&key.token.to_be_bytes());
    put_bytes(out, &key.key);
}

/// Encodes with `encode` into `scratch`, then appends it to `out` as `<bytes>`.
fn put_nested(out: &mut Vec<u8>, scratch: &mut Vec<u8>, encode: impl FnOnce(&mut Vec<u8>)) {
    scratch.clear();
    encode(scratch);
    put_bytes(out, scratch);
}

fn put_row(out: &mut Vec<u8>, scratch: &mut Vec<u8>, row: &Row) {
    // `encode_row` wants a canonical row (its decoder refuses unsorted columns); most rows
    // already are, and are not copied.
    let row = if row.is_normalized() {
        Cow::Borrowed(row)
    } else {
        let mut row = row.clone();
        row.normalize();
        Cow::Owned(row)
    };
    put_nested(out, scratch, |b| encode_row(&row, b));
}

fn put_header(out: &mut Vec<u8>, scratch: &mut Vec<u8>, header: &PartitionHeader) {
    put_nested(out, scratch, |b| encode_partition_header(header, b));
}

fn put_rows(out: &mut Vec<u8>, scratch: &mut Vec<u8>, rows: &[(Vec<u8>, Row)]) {
    put_len(out, rows.len());
    for (clustering, row) in rows {
        put_bytes(out, clustering);
        put_row(out, scratch, row);
    }
}

/// Appends the encoding of a mutation, the updates one write applies (any tables and
/// partitions), to `out`.
pub fn encode_mutation(updates: &[PartitionUpdate], out: &mut Vec<u8>) {
    let mut scratch = Vec::new();
    out.push(MUTATION_FORMAT_VERSION);
    put_len(out, updates.len());
    for update in updates {
        out.extend_from_slice(update.table.as_bytes());
        put_key(out, &update.key);
        let mut flags = 0;
        if update.header.is_some() {
            flags |= UPDATE_HAS_HEADER;
        }
        if update.static_row.is_some() {
            flags |= UPDATE_HAS_STATIC_ROW;
        }
        out.push(flags);
        if let Some(header) = &update.header {
            put_header(out, &mut scratch, header);
        }
        if let Some(row) = &update.static_row {
            put_row(out, &mut scratch, row);
        }
        put_rows(out, &mut scratch, &update.rows);
    }
}

/// Appends the encoding of a read command to `out`.
pub fn encode_read_command(command: &ReadCommand, out: &mut Vec<u8>) {
    out.push(READ_COMMAND_FORMAT_VERSION);
    match command {
        ReadCommand::Partition {
            table,
            key,
            slice,
            max_rows,
            resume,
        } => {
            out.push(READ_PARTITION);
            out.extend_from_slice(table.as_bytes());
            out.extend_from_slice(&(*max_rows as u64).to_be_bytes());
            put_key(out, key);
            let mut flags = 0;
            if let Some(s) = &slice.start {
                flags |= SLICE_HAS_START
                    | if s.inclusive {
                        SLICE_START_INCLUSIVE
                    } else {
                        0
                    };
            }
            if let Some(e) = &slice.end {
                flags |= SLICE_HAS_END | if e.inclusive { SLICE_END_INCLUSIVE } else { 0 };
            }
            if slice.reversed {
                flags |= SLICE_REVERSED;
            }
            out.push(flags);
            for bound in [&slice.start, &slice.end].into_iter().flatten() {
                put_bytes(out, &bound.prefix);
            }
            put_opt_bytes(out, resume.as_deref());
        }
        ReadCommand::Range {
            table,
            start,
            end_token,
            max_rows,
        } => {
            out.push(READ_RANGE);
            out.extend_from_slice(table.as_bytes());
            out.extend_from_slice(&(*max_rows as u64).to_be_bytes());
            match start {
                ScanStart::Beginning => out.push(SCAN_FROM_BEGINNING),
                ScanStart::Token(token) => {
                    out.push(SCAN_FROM_TOKEN);
                    out.extend_from_slice(&token.to_be_bytes());
                }
                ScanStart::Resume(resume) => {
                    out.push(SCAN_FROM_RESUME);
                    put_bytes(out, resume);
                }
                ScanStart::After { key, clustering } => {
                    out.push(SCAN_AFTER);
                    put_key(out, key);
                    put_opt_bytes(out, clustering.as_deref());
                }
            }
            match end_token {
                None => out.push(0),
                Some(token) => {
                    out.push(1);
                    out.extend_from_slice(&token.to_be_bytes());
                }
            }
        }
    }
}

fn put_partition_data(out: &mut Vec<u8>, scratch: &mut Vec<u8>, data: &PartitionData) {
    put_key(out, &data.key);
    put_header(out, scratch, &data.header);
    match &data.static_row {
        None => out.push(0),
        Some(row) => {
            out.push(1);
            put_row(out, scratch, row);
        }
    }
    put_rows(out, scratch, &data.rows);
}

/// Appends the encoding of a read response to `out`.
pub fn encode_read_response(response: &ReadResponse, out: &mut Vec<u8>) {
    let mut scratch = Vec::new();
    out.push(READ_RESPONSE_FORMAT_VERSION);
    match response {
        ReadResponse::Partition(page) => {
            out.push(RESPONSE_PARTITION_PAGE);
            put_partition_data(out, &mut scratch, &page.data);
            put_opt_bytes(out, page.resume.as_deref());
        }
        ReadResponse::Range(page) => {
            out.push(RESPONSE_SCAN_PAGE);
            put_len(out, page.partitions.len());
            for data in &page.partitions {
                put_partition_data(out, &mut scratch, data);
            }
            put_opt_bytes(out, page.resume.as_deref());
            out.push(u8::from(page.last_partition_continues));
        }
    }
}

impl Reader<'_> {
    fn flag(&mut self, what: &str) -> Result<bool, MutationError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.corrupt(format!("{what} is 0x{other:02x}, not 0 or 1"))),
        }
    }

    fn opt_bytes(&mut self, what: &str) -> Result<Option<Vec<u8>>, MutationError> {
        Ok(if self.flag(what)? {
            Some(self.bytes_with_len(what)?)
        } else {
            None
        })
    }

    fn table_id(&mut self) -> Result<TableId, MutationError> {
        let bytes = self.take(16, "table id")?;
        let mut id = [0; 16];
        id.copy_from_slice(bytes);
        Ok(TableId::from_bytes(id))
    }

    fn max_rows(&mut self) -> Result<usize, MutationError> {
        let max_rows = self.u64("max rows")?;
        usize::try_from(max_rows)
            .map_err(|_| self.corrupt(format!("max rows {max_rows} does not fit this platform")))
    }

    fn partition_key(&mut self) -> Result<PartitionKey, MutationError> {
        Ok(PartitionKey {
            token: self.i64("partition token")?,
            key: self.bytes_with_len("partition key")?,
        })
    }

    /// A nested `codec` encoding. Its corruption is reported as the message's, at the offset
    /// in the message, saying what held it; an unknown version of it as `codec` words it.
    fn nested<T>(
        &mut self,
        what: &str,
        decode: fn(&[u8]) -> Result<T, MutationError>,
    ) -> Result<T, MutationError> {
        let bytes = self.slice_with_len(what)?;
        let start = self.offset() - bytes.len();
        decode(bytes).map_err(|e| match e {
            MutationError::Corrupt {
                structure,
                offset,
                detail,
            } => MutationError::Corrupt {
                structure: self.structure(),
                offset: start + offset,
                detail: format!("{what} ({structure}): {detail}"),
            },
            other => other,
        })
    }

    fn row(&mut self, what: &str) -> Result<Row, MutationError> {
        self.nested(what, decode_row)
    }

    fn header(&mut self) -> Result<PartitionHeader, MutationError> {
        self.nested("partition header", decode_partition_header)
    }

    fn rows(&mut self) -> Result<Vec<(Vec<u8>, Row)>, MutationError> {
        let count = self.count("row count", MIN_ROW_BYTES)?;
        let mut rows = Vec::with_capacity(count);
        for _ in 0..count {
            let clustering = self.bytes_with_len("clustering key")?;
            rows.push((clustering, self.row("row")?));
        }
        Ok(rows)
    }

    fn partition_data(&mut self) -> Result<PartitionData, MutationError> {
        let key = self.partition_key()?;
        let header = self.header()?;
        let static_row = if self.flag("static row present")? {
            Some(self.row("static row")?)
        } else {
            None
        };
        Ok(PartitionData {
            key,
            header,
            static_row,
            rows: self.rows()?,
        })
    }

    fn slice(&mut self) -> Result<ClusteringSlice, MutationError> {
        let flags = self.u8("slice flags")?;
        let valid = SLICE_HAS_START
            | SLICE_START_INCLUSIVE
            | SLICE_HAS_END
            | SLICE_END_INCLUSIVE
            | SLICE_REVERSED;
        if flags & !valid != 0
            || (flags & SLICE_START_INCLUSIVE != 0 && flags & SLICE_HAS_START == 0)
            || (flags & SLICE_END_INCLUSIVE != 0 && flags & SLICE_HAS_END == 0)
        {
            return Err(self.corrupt(format!("invalid slice flags 0x{flags:02x}")));
        }
        let mut bound = |present: u8,
                         inclusive: u8,
                         what: &str|
         -> Result<Option<ClusteringBound>, MutationError> {
            if flags & present == 0 {
                return Ok(None);
            }
            Ok(Some(ClusteringBound {
                prefix: self.bytes_with_len(what)?,
                inclusive: flags & inclusive != 0,
            }))
        };
        let start = bound(SLICE_HAS_START, SLICE_START_INCLUSIVE, "slice start")?;
        let end = bound(SLICE_HAS_END, SLICE_END_INCLUSIVE, "slice end")?;
        Ok(ClusteringSlice {
            start,
            end,
            reversed: flags & SLICE_REVERSED != 0,
        })
    }

    fn scan_start(&mut self) -> Result<ScanStart, MutationError> {
        match self.u8("scan start kind")? {
            SCAN_FROM_BEGINNING => Ok(ScanStart::Beginning),
            SCAN_FROM_TOKEN => Ok(ScanStart::Token(self.i64("scan start token")?)),
            SCAN_FROM_RESUME => Ok(ScanStart::Resume(self.bytes_with_len("scan resume")?)),
            SCAN_AFTER => Ok(ScanStart::After {
                key: self.partition_key()?,
                clustering: self.opt_bytes("scan after clustering")?,
            }),
            other => Err(self.corrupt(format!("unknown scan start kind 0x{other:02x}"))),
        }
    }
}

/// Decodes a mutation written by `encode_mutation`.
pub fn decode_mutation(bytes: &[u8]) -> Result<Vec<PartitionUpdate>, MutationError> {
    let mut r = Reader::new(bytes, "mutation");
    r.version(MUTATION_FORMAT_VERSION)?;
    let count = r.count("update count", MIN_UPDATE_BYTES)?;
    let mut updates = Vec::with_capacity(count);
    for _ in 0..count {
        let table = r.table_id()?;
        let key = r.partition_key()?;
        let flags = r.u8("update flags")?;
        if flags & !(UPDATE_HAS_HEADER | UPDATE_HAS_STATIC_ROW) != 0 {
            return Err(r.corrupt(format!("invalid update flags 0x{flags:02x}")));
        }
        let header = if flags & UPDATE_HAS_HEADER != 0 {
            Some(r.header()?)
        } else {
            None
        };
        let static_row = if flags & UPDATE_HAS_STATIC_ROW != 0 {
            Some(r.row("static row")?)
        } else {
            None
        };
        updates.push(PartitionUpdate {
            table,
            key,
            header,
            static_row,
            rows: r.rows()?,
        });
    }
    r.finish()?;
    Ok(updates)
}

/// Decodes a read command written by `encode_read_command`.
pub fn decode_read_command(bytes: &[u8]) -> Result<ReadCommand, MutationError> {
    let mut r = Reader::new(bytes, "read command");
    r.version(READ_COMMAND_FORMAT_VERSION)?;
    let kind = r.u8("read kind")?;
    if kind != READ_PARTITION && kind != READ_RANGE {
        return Err(r.corrupt(format!("unknown read kind 0x{kind:02x}")));
    }
    let table = r.table_id()?;
    let max_rows = r.max_rows()?;
    let command = if kind == READ_PARTITION {
        ReadCommand::Partition {
            table,
            key: r.partition_key()?,
            slice: r.slice()?,
            max_rows,
            resume: r.opt_bytes("resume")?,
        }
    } else {
        let start = r.scan_start()?;
        let end_token = if r.flag("end token present")? {
            Some(r.i64("end token")?)
        } else {
            None
        };
        ReadCommand::Range {
            table,
            start,
            end_token,
            max_rows,
        }
    };
    r.finish()?;
    Ok(command)
}

/// Decodes a read response written by `encode_read_response`.
pub fn decode_read_response(bytes: &[u8]) -> Result<ReadResponse, MutationError> {
    let mut r = Reader::new(bytes, "read response");
    r.version(READ_RESPONSE_FORMAT_VERSION)?;
    let response = match r.u8("response kind")? {
        RESPONSE_PARTITION_PAGE => ReadResponse::Partition(PartitionPage {
            data: r.partition_data()?,
            resume: r.opt_bytes("resume")?,
        }),
        RESPONSE_SCAN_PAGE => {
            let count = r.count("partition count", MIN_PARTITION_DATA_BYTES)?;
            let mut partitions = Vec::with_capacity(count);
            for _ in 0..count {
                partitions.push(r.partition_data()?);
            }
            ReadResponse::Range(ScanPage {
                partitions,
                resume: r.opt_bytes("resume")?,
                last_partition_continues: r.flag("last partition continues")?,
            })
        }
        other => return Err(r.corrupt(format!("unknown response kind 0x{other:02x}"))),
    };
    r.finish()?;
    Ok(response)
}
