//! The read path shared by every engine: partition slices and token-ordered scans with paging,
//! written once against `Source`, a minimal ordered key-value view, so that engines differ only
//! in how they fetch bytes and the conformance suite tests one page-assembly implementation.

use mutation::{
    decode_partition_header, decode_row, ClusteringSlice, PartitionData, PartitionHeader,
    PartitionKey, PartitionPage, Row, ScanPage, ScanStart, TableId,
};

use crate::keys::{
    decode_partition_resume, decode_scan_resume, encode_partition_resume, encode_scan_resume,
    parse_key, partition_prefix, prefix_successor, token_bytes, KIND_HEADER, KIND_ROW, KIND_STATIC,
};
use crate::StorageError;

/// Whether to keep iterating after an entry.
pub(crate) enum Visit {
    Continue,
    Stop,
}

/// The callback `Source::visit` calls with each key and value.
pub(crate) type Visitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<Visit, StorageError> + 'a;

/// An ordered view of one table's keys at one point in time (engines use a snapshot or hold a
/// lock, so header, static row and rows of a page are mutually consistent).
pub(crate) trait Source {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError>;

    /// Visits entries with `lower <= key < upper` (`None` = unbounded) in ascending order, or
    /// descending if `reverse`. `within_partition` says every key in range shares the same token
    /// prefix (RocksDB can then use its prefix bloom filter).
    fn visit(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        reverse: bool,
        within_partition: bool,
        f: &mut Visitor<'_>,
    ) -> Result<(), StorageError>;
}

fn corrupt(table: TableId, key: &[u8], what: impl std::fmt::Display) -> StorageError {
    StorageError::Corruption {
        table,
        detail: format!("key {}: {what}", hex(key)),
    }
}

fn hex(bytes: &[u8]) -> String {
    // Keys only, never values: keys identify the damaged entry; values may hold user data.
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn header_at(
    source: &dyn Source,
    table: TableId,
    key: &[u8],
) -> Result<PartitionHeader, StorageError> {
    match source.get(key)? {
        None => Ok(PartitionHeader::default()),
        Some(v) => decode_partition_header(&v).map_err(|e| corrupt(table, key, e)),
    }
}

fn row_at(source: &dyn Source, table: TableId, key: &[u8]) -> Result<Option<Row>, StorageError> {
    match source.get(key)? {
        None => Ok(None),
        Some(v) => decode_row(&v).map(Some).map_err(|e| corrupt(table, key, e)),
    }
}

fn with_kind(prefix: &[u8], kind: u8) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + 1);
    key.extend_from_slice(prefix);
    key.push(kind);
    key
}

/// Reads a page of partition `key`, whose storage prefix (`keys::partition_prefix`) is
/// `prefix`: the caller has it already (the partition cache is keyed by it).
pub(crate) fn read_partition(
    source: &dyn Source,
    table: TableId,
    key: &PartitionKey,
    prefix: &[u8],
    slice: &ClusteringSlice,
    max_rows: usize,
    resume: Option<&[u8]>,
) -> Result<PartitionPage, StorageError> {
    let max_rows = max_rows.max(1);
    let unbounded_forward = !slice.reversed && slice.start.is_none() && resume.is_none();
    let (header, static_row) = if unbounded_forward {
        // Header, static row and rows are adjacent keys in that order: one iterator below
        // reads them all, instead of two point lookups before it.
        (PartitionHeader::default(), None)
    } else {
        (
            header_at(source, table, &with_kind(prefix, KIND_HEADER))?,
            row_at(source, table, &with_kind(prefix, KIND_STATIC))?,
        )
    };
    let mut data = PartitionData {
        key: key.clone(),
        header,
        static_row,
        rows: Vec::new(),
    };

    // The slice as a contiguous byte range of clustering keys [lower, upper): prefix bounds map
    // onto byte bounds because clustering encodings are prefix-free per component.
    let mut lower: Vec<u8> = match &slice.start {
        None => Vec::new(),
        Some(b) if b.inclusive => b.prefix.clone(),
        Some(b) => match prefix_successor(&b.prefix) {
            Some(s) => s,
            None => return Ok(PartitionPage { data, resume: None }), // nothing sorts after it
        },
    };
    let mut upper: Option<Vec<u8>> = match &slice.end {
        None => None,
        Some(b) if b.inclusive => prefix_successor(&b.prefix),
        Some(b) => Some(b.prefix.clone()),
    };
    // A resume token names the next row to return: the range restarts there, inclusively.
    if let Some(token) = resume {
        let next = decode_partition_resume(token)?;
        if slice.reversed {
            let mut after_next = next.to_vec();
            after_next.push(0); // the smallest key greater than `next`
            if upper.as_ref().is_none_or(|u| after_next < *u) {
                upper = Some(after_next);
            }
        } else if next > lower.as_slice() {
            lower = next.to_vec();
        }
    }
    if upper.as_ref().is_some_and(|u| *u <= lower) {
        if unbounded_forward {
            data.header = header_at(source, table, &with_kind(prefix, KIND_HEADER))?;
            data.static_row = row_at(source, table, &with_kind(prefix, KIND_STATIC))?;
        }
        return Ok(PartitionPage { data, resume: None });
    }

    // Both bounds in one buffer: the lower one, then the upper one.
    let mut bounds = Vec::with_capacity(
        2 * (prefix.len() + 1) + lower.len() + upper.as_ref().map_or(0, Vec::len),
    );
    bounds.extend_from_slice(prefix);
    if unbounded_forward {
        bounds.push(KIND_HEADER);
    } else {
        bounds.push(KIND_ROW);
        bounds.extend_from_slice(&lower);
    }
    let lower_end = bounds.len();
    bounds.extend_from_slice(prefix);
    match &upper {
        Some(u) => {
            bounds.push(KIND_ROW);
            bounds.extend_from_slice(u);
        }
        None => bounds.push(KIND_ROW + 1),
    }
    let (full_lower, full_upper) = bounds.split_at(lower_end);
    // Every key visited starts with the prefix (the bounds do); what follows it is the kind.
    let kind_at = prefix.len();
    let mut next_resume = None;
    source.visit(
        full_lower,
        Some(full_upper),
        slice.reversed,
        true,
        &mut |k, v| {
            let clustering = match k.get(kind_at) {
                Some(&KIND_ROW) if k.starts_with(prefix) => Some(&k[kind_at + 1..]),
                _ => None,
            };
            let Some(clustering) = clustering else {
                if unbounded_forward && k.strip_prefix(prefix) == Some(&[KIND_HEADER]) {
                    data.header = decode_partition_header(v).map_err(|e| corrupt(table, k, e))?;
                    return Ok(Visit::Continue);
                }
                if unbounded_forward && k.strip_prefix(prefix) == Some(&[KIND_STATIC]) {
                    data.static_row = Some(decode_row(v).map_err(|e| corrupt(table, k, e))?);
                    return Ok(Visit::Continue);
                }
                return Err(corrupt(table, k, "row key outside the partition's range"));
            };
            if data.rows.len() == max_rows {
                next_resume = Some(encode_partition_resume(clustering));
                return Ok(Visit::Stop);
            }
            let row = decode_row(v).map_err(|e| corrupt(table, k, e))?;
            data.rows.push((clustering.to_vec(), row));
            Ok(Visit::Continue)
        },
    )?;
    Ok(PartitionPage {
        data,
        resume: next_resume,
    })
}

pub(crate) fn scan(
    source: &dyn Source,
    table: TableId,
    start: ScanStart,
    end_token: Option<i64>,
    max_rows: usize,
) -> Result<ScanPage, StorageError> {
    let max_rows = max_rows.max(1);
    let mut partitions: Vec<PartitionData> = Vec::new();
    // The partition being assembled and its key prefix (`token | length | key`).
    let mut current: Option<(PartitionData, Vec<u8>)> = None;
    // `current` goes on from a row of the previous page (`ScanStart::After`) and has no row
    // yet: with none to come it is not returned again (the previous page had all of it).
    let mut continued_without_rows = false;
    let lower: Vec<u8> = match &start {
        ScanStart::Beginning => Vec::new(),
        ScanStart::Token(t) => token_bytes(*t).to_vec(),
        ScanStart::Resume(token) => {
            let next = decode_scan_resume(token)?;
            let parsed = parse_key(next).ok_or_else(|| corrupt(table, next, "bad resume key"))?;
            let prefix = &next[..parsed.prefix_len];
            if parsed.kind == KIND_ROW {
                // Continuing a partition cut by the previous page: return its header and static
                // row again, then the rows from `next` on.
                let key = PartitionKey {
                    token: parsed.token,
                    key: parsed.partition_key.to_vec(),
                };
                let header = header_at(source, table, &with_kind(prefix, KIND_HEADER))?;
                let static_row = row_at(source, table, &with_kind(prefix, KIND_STATIC))?;
                let data = PartitionData {
                    key,
                    header,
                    static_row,
                    rows: Vec::new(),
                };
                current = Some((data, prefix.to_vec()));
                next.to_vec()
            } else {
                // The previous page stopped before this partition: read it whole, from its
                // header.
                prefix.to_vec()
            }
        }
        ScanStart::After { key, clustering } => {
            let prefix = partition_prefix(key)?;
            match clustering {
                Some(clustering) => {
                    // The partition goes on after row `clustering`: its header and static row
                    // again, then the rows from the smallest key after that row's.
                    let header = header_at(source, table, &with_kind(&prefix, KIND_HEADER))?;
                    let static_row = row_at(source, table, &with_kind(&prefix, KIND_STATIC))?;
                    let data = PartitionData {
                        key: key.clone(),
                        header,
                        static_row,
                        rows: Vec::new(),
                    };
                    let mut lower = with_kind(&prefix, KIND_ROW);
                    lower.extend_from_slice(clustering);
                    lower.push(0);
                    current = Some((data, prefix));
                    continued_without_rows = true;
                    lower
                }
                // After every key of the partition.
                None => match prefix_successor(&prefix) {
                    Some(after) => after,
                    None => {
                        return Ok(ScanPage {
                            partitions: Vec::new(),
                            resume: None,
                            last_partition_continues: false,
                        })
                    }
                },
            }
        }
    };
    let upper: Option<Vec<u8>> = match end_token {
        Some(t) if t < i64::MAX => Some(token_bytes(t + 1).to_vec()),
        _ => None,
    };
    // The page budget: rows returned, plus partitions returned without rows (so a table of
    // row-less partitions still pages).
    let mut used = 0usize;
    let mut resume = None;
    let mut last_partition_continues = false;
    source.visit(&lower, upper.as_deref(), false, false, &mut |k, v| {
        let parsed = parse_key(k)
            .ok_or_else(|| corrupt(table, k, "key does not follow the storage layout"))?;
        let prefix = &k[..parsed.prefix_len];
        let same_partition = current
            .as_ref()
            .is_some_and(|(_, p)| p.as_slice() == prefix);
        if !same_partition {
            if let Some((done, _)) = current.take() {
                if !std::mem::take(&mut continued_without_rows) {
                    used += usize::from(done.rows.is_empty());
                    partitions.push(done);
                }
            }
            if used >= max_rows {
                resume = Some(encode_scan_resume(k));
                return Ok(Visit::Stop);
            }
            let key = PartitionKey {
                token: parsed.token,
                key: parsed.partition_key.to_vec(),
            };
            let data = PartitionData {
                key,
                header: PartitionHeader::default(),
                static_row: None,
                rows: Vec::new(),
            };
            current = Some((data, prefix.to_vec()));
        }
        let Some((data, _)) = current.as_mut() else {
            return Err(corrupt(table, k, "internal: no partition in progress"));
        };
        match parsed.kind {
            KIND_HEADER => {
                data.header = decode_partition_header(v).map_err(|e| corrupt(table, k, e))?;
            }
            KIND_STATIC => {
                data.static_row = Some(decode_row(v).map_err(|e| corrupt(table, k, e))?);
            }
            _ => {
                if used >= max_rows {
                    resume = Some(encode_scan_resume(k));
                    last_partition_continues = true;
                    return Ok(Visit::Stop);
                }
                let row = decode_row(v).map_err(|e| corrupt(table, k, e))?;
                data.rows.push((parsed.clustering.to_vec(), row));
                continued_without_rows = false;
                used += 1;
            }
        }
        Ok(Visit::Continue)
    })?;
    if let Some((done, _)) = current.filter(|_| !continued_without_rows) {
        partitions.push(done);
    }
    Ok(ScanPage {
        partitions,
        resume,
        last_partition_continues,
    })
}
