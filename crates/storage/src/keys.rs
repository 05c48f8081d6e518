//! The storage key layout, shared by every engine, and the resume tokens built from it.
//!
//! A table's keys (RocksDB: in the table's column family; memory: in the table's map):
//! ```text
//! bytes 0..8    token, i64 big-endian with the sign bit flipped, so that unsigned byte order
//!               equals signed token order (i64::MIN -> 00.., -1 -> 7f ff.., 0 -> 80 00..)
//! bytes 8..10   partition key length n, u16 big-endian
//! bytes 10..10+n  partition key bytes
//! byte  10+n    kind: 0x00 partition header, 0x01 static row, 0x02 clustering row
//! bytes 11+n..  clustering key bytes (kind 0x02 only; byte-comparable, so byte order is
//!               clustering order)
//! ```
//! So a partition's fragments are contiguous and ordered header, static row, rows; partitions
//! are ordered by token, then key length, then key bytes (any fixed order among keys sharing a
//! token will do, as long as scans and resume tokens agree on it). The first 8 bytes are the
//! RocksDB prefix-extractor prefix.
//!
//! Values: the header is `mutation::encode_partition_header`, rows `mutation::encode_row`.
//!
//! Resume tokens (opaque to callers, so their format can change with the version byte):
//! ```text
//! partition read:  0x01 | clustering key of the next row to return
//! scan:            0x02 | full storage key of the next entry to read
//! ```

use mutation::{PartitionKey, MAX_PARTITION_KEY_BYTES};

use crate::StorageError;

pub(crate) const KIND_HEADER: u8 = 0x00;
pub(crate) const KIND_STATIC: u8 = 0x01;
pub(crate) const KIND_ROW: u8 = 0x02;

const PARTITION_RESUME_VERSION: u8 = 0x01;
const SCAN_RESUME_VERSION: u8 = 0x02;

/// The token's 8 bytes as stored.
pub(crate) fn token_bytes(token: i64) -> [u8; 8] {
    ((token as u64) ^ (1 << 63)).to_be_bytes()
}

fn token_from_bytes(bytes: [u8; 8]) -> i64 {
    (u64::from_be_bytes(bytes) ^ (1 << 63)) as i64
}

/// `token | key length | key`: every key of the partition starts with this.
pub(crate) fn partition_prefix(key: &PartitionKey) -> Result<Vec<u8>, StorageError> {
    let len = u16::try_from(key.key.len()).map_err(|_| {
        StorageError::InvalidRequest(format!(
            "partition key is {} bytes, the maximum is {MAX_PARTITION_KEY_BYTES}",
            key.key.len()
        ))
    })?;
    let mut out = Vec::with_capacity(11 + key.key.len());
    out.extend_from_slice(&token_bytes(key.token));
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&key.key);
    Ok(out)
}

/// A key parsed back into its parts.
pub(crate) struct ParsedKey<'a> {
    pub token: i64,
    pub partition_key: &'a [u8],
    /// Length of `token | length | key`, i.e. of `partition_prefix`.
    pub prefix_len: usize,
    pub kind: u8,
    pub clustering: &'a [u8],
}

/// Parses a stored key; `None` if it does not follow the layout (corruption).
pub(crate) fn parse_key(key: &[u8]) -> Option<ParsedKey<'_>> {
    let token = token_from_bytes(key.get(0..8)?.try_into().ok()?);
    let len = u16::from_be_bytes(key.get(8..10)?.try_into().ok()?) as usize;
    let prefix_len = 10 + len;
    let partition_key = key.get(10..prefix_len)?;
    let kind = *key.get(prefix_len)?;
    let clustering = &key[prefix_len + 1..];
    let valid = match kind {
        KIND_HEADER | KIND_STATIC => clustering.is_empty(),
        KIND_ROW => true,
        _ => false,
    };
    valid.then_some(ParsedKey {
        token,
        partition_key,
        prefix_len,
        kind,
        clustering,
    })
}

/// The smallest byte string greater than every string starting with `prefix`; `None` if there
/// is none (empty, or all 0xff).
pub(crate) fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last != 0xff {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

pub(crate) fn encode_partition_resume(clustering: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + clustering.len());
    out.push(PARTITION_RESUME_VERSION);
    out.extend_from_slice(clustering);
    out
}

pub(crate) fn decode_partition_resume(token: &[u8]) -> Result<&[u8], StorageError> {
    match token.split_first() {
        Some((&PARTITION_RESUME_VERSION, clustering)) => Ok(clustering),
        _ => Err(StorageError::InvalidRequest(
            "resume token is not from a partition read".to_string(),
        )),
    }
}

pub(crate) fn encode_scan_resume(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + key.len());
    out.push(SCAN_RESUME_VERSION);
    out.extend_from_slice(key);
    out
}

pub(crate) fn decode_scan_resume(token: &[u8]) -> Result<&[u8], StorageError> {
    match token.split_first() {
        Some((&SCAN_RESUME_VERSION, key)) if parse_key(key).is_some() => Ok(key),
        _ => Err(StorageError::InvalidRequest(
            "resume token is not from a scan".to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bytes_order_matches_signed_order() {
        let tokens = [i64::MIN, i64::MIN + 1, -1_000, -1, 0, 1, 1_000, i64::MAX];
        for pair in tokens.windows(2) {
            assert!(token_bytes(pair[0]) < token_bytes(pair[1]), "{pair:?}");
            assert_eq!(token_from_bytes(token_bytes(pair[0])), pair[0]);
        }
    }

    #[test]
    fn keys_parse_back() {
        let mut key = partition_prefix(&PartitionKey {
            token: -5,
            key: b"abc".to_vec(),
        })
        .expect("short key");
        key.push(KIND_ROW);
        key.extend_from_slice(b"ck");
        let parsed = parse_key(&key).expect("valid");
        assert_eq!(
            (parsed.token, parsed.partition_key, parsed.kind),
            (-5, &b"abc"[..], KIND_ROW)
        );
        assert_eq!(parsed.clustering, b"ck");
        assert!(parse_key(&key[..5]).is_none());
        assert!(parse_key(&key[..13]).is_none(), "kind byte missing");
    }

    #[test]
    fn oversized_partition_key_is_rejected() {
        let key = PartitionKey {
            token: 0,
            key: vec![0; MAX_PARTITION_KEY_BYTES + 1],
        };
        assert!(matches!(
            partition_prefix(&key),
            Err(StorageError::InvalidRequest(_))
        ));
    }

    #[test]
    fn successor_skips_trailing_ff() {
        assert_eq!(prefix_successor(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_successor(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xff, 0xff]), None);
        assert_eq!(prefix_successor(&[]), None);
    }
}
