//! The write path shared by every engine: turning a `PartitionUpdate` into keyed, encoded
//! fragments, and merging two encoded fragments of one key (RocksDB's merge operator and the
//! memory engine both call `merge_values`).

use std::borrow::Cow;

use mutation::{
    decode_partition_header, decode_row, encode_partition_header, encode_row, merge_encoded_rows,
    MutationError, PartitionUpdate, Purger,
};

use crate::keys::{parse_key, partition_prefix, KIND_HEADER, KIND_ROW, KIND_STATIC};
use crate::StorageError;

/// A storage key and its encoded value.
pub(crate) type Fragment = (Vec<u8>, Vec<u8>);

/// `(key, encoded value)` pairs for one update, each to be merged into what is stored. Rows are
/// normalized first so that stored values are always canonical; empty fragments are skipped.
pub(crate) fn fragments(update: &PartitionUpdate) -> Result<Vec<Fragment>, StorageError> {
    let prefix = partition_prefix(&update.key)?;
    let key = |kind: u8, clustering: &[u8]| {
        let mut k = Vec::with_capacity(prefix.len() + 1 + clustering.len());
        k.extend_from_slice(&prefix);
        k.push(kind);
        k.extend_from_slice(clustering);
        k
    };
    let mut out = Vec::with_capacity(update.rows.len() + 2);
    if let Some(header) = &update.header {
        let mut header = header.clone();
        header.normalize();
        if !header.is_empty() {
            let mut value = Vec::new();
            encode_partition_header(&header, &mut value);
            out.push((key(KIND_HEADER, &[]), value));
        }
    }
    let mut push_row = |kind: u8, clustering: &[u8], row: &mutation::Row| {
        // Most rows come normalised from the query layer: encode them without a copy.
        let row = if row.is_normalized() {
            Cow::Borrowed(row)
        } else {
            let mut row = row.clone();
            row.normalize();
            Cow::Owned(row)
        };
        if !row.is_empty() {
            let mut value = Vec::new();
            encode_row(&row, &mut value);
            out.push((key(kind, clustering), value));
        }
    };
    if let Some(row) = &update.static_row {
        push_row(KIND_STATIC, &[], row);
    }
    for (clustering, row) in &update.rows {
        push_row(KIND_ROW, clustering, row);
    }
    Ok(out)
}

/// Merges encoded fragments of the storage key `key` (oldest first is not required: merge is
/// commutative). Fails if a value does not decode or the key does not follow the layout.
pub(crate) fn merge_values<'a>(
    key: &[u8],
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, MergeError> {
    let parsed = parse_key(key).ok_or(MergeError::Key)?;
    let mut out = Vec::new();
    if parsed.kind == KIND_HEADER {
        let mut merged = mutation::PartitionHeader::default();
        for v in values {
            merged = merged.merge(decode_partition_header(v)?);
        }
        encode_partition_header(&merged, &mut out);
    } else {
        let values: Vec<&[u8]> = values.into_iter().collect();
        if let Some(merged) = merge_encoded(&values) {
            return Ok(merged);
        }
        let mut merged = mutation::Row::default();
        for v in values {
            merged = merged.merge(decode_row(v)?);
        }
        encode_row(&merged, &mut out);
    }
    Ok(out)
}

/// Two or more encoded rows merged without decoding them (`mutation::merge_encoded_rows`), or
/// `None` if any has a collection column or does not decode. One value is left to the decoding
/// merge, which puts it in canonical form.
fn merge_encoded(values: &[&[u8]]) -> Option<Vec<u8>> {
    let (first, rest) = values.split_first()?;
    let (second, rest) = rest.split_first()?;
    let mut merged = merge_encoded_rows(first, second)?;
    for value in rest {
        merged = merge_encoded_rows(&merged, value)?;
    }
    Some(merged)
}

/// What purging did to one stored value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Purged {
    Keep,
    /// Nothing is left under the key.
    Remove,
    Change(Vec<u8>),
}

/// Purges one stored value with `purger`'s rules (`Row::purge_tombstones`,
/// `PartitionHeader::purge_tombstones`). The caller guarantees what `Purger` requires: the value
/// holds everything older under its key, and for a header, the rows it shadows no longer hold
/// what it shadowed (RocksEngine pushes header tombstones down to rows first).
pub(crate) fn purge_value(key: &[u8], value: &[u8], purger: &Purger) -> Result<Purged, MergeError> {
    let parsed = parse_key(key).ok_or(MergeError::Key)?;
    let mut out = Vec::new();
    if parsed.kind == KIND_HEADER {
        let header = decode_partition_header(value)?;
        let mut purged = header.clone();
        purged.purge_tombstones(purger);
        if purged.is_empty() {
            return Ok(Purged::Remove);
        }
        if purged == header {
            return Ok(Purged::Keep);
        }
        encode_partition_header(&purged, &mut out);
    } else {
        let row = decode_row(value)?;
        let mut purged = row.clone();
        purged.purge_tombstones(purger);
        if purged.is_empty() {
            return Ok(Purged::Remove);
        }
        if purged == row {
            return Ok(Purged::Keep);
        }
        encode_row(&purged, &mut out);
    }
    Ok(Purged::Change(out))
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum MergeError {
    #[error("key does not follow the storage layout")]
    Key,
    #[error(transparent)]
    Value(#[from] MutationError),
}
