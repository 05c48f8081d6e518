//! The digest of a read's result (Cassandra's `ReadResponse.digest`): what a digest request
//! answers, so the coordinator can tell whether replicas agree without moving their data, and
//! compute the same digest of a data response to compare.
//!
//! It is the MD5 (as Cassandra's) of a canonical encoding of the partitions a read returns, as
//! storage returns them: fragments reconciled (`mutation`'s merge), tombstones and expired
//! cells included (they are data a stale replica must receive in a read repair), nothing
//! filtered for liveness, so no clock is read. Rows and partition headers come from storage in
//! canonical form, so equal data encodes equally whatever order it was written in. Opaque
//! resume tokens are left out: they are the engine's, not the data's.
//!
//! The bytes hashed, per partition in the order of the response (`u32`/`i64` big-endian):
//! ```text
//! i64     token
//! u32     partition key length, key bytes
//! u32     header length, header as `mutation::encode_partition_header`
//! u8      1 if a static row follows, else 0
//! [u32    length, static row as `mutation::encode_row`]
//! u32     clustering row count, then per row:
//!   u32     clustering length, clustering bytes
//!   u32     length, row as `mutation::encode_row`
//! ```
//! preceded by a `u32` count of partitions. The encodings of rows and headers start with their
//! format version, so a change of format changes the digest rather than colliding with it.
//!
//! Not yet as Cassandra: tombstones past `gc_grace_seconds` are included until compaction
//! purges them, so replicas that compacted at different times can disagree on them (a
//! harmless read repair of a tombstone; Cassandra leaves purgeable tombstones out).

use md5::{Digest, Md5};
use mutation::{PartitionData, ReadResponse};

/// The MD5 digest of a read's result (see the module comment for what it covers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadDigest(pub [u8; 16]);

/// The digest of `response`: equal for equal data, whichever replica answered it.
pub fn read_digest(response: &ReadResponse) -> ReadDigest {
    let mut md5 = Md5::new();
    let mut buf = Vec::new();
    match response {
        ReadResponse::Partition(page) => {
            md5.update(1u32.to_be_bytes());
            digest_partition(&mut md5, &mut buf, &page.data);
        }
        ReadResponse::Range(page) => {
            md5.update(len_u32(page.partitions.len()).to_be_bytes());
            for partition in &page.partitions {
                digest_partition(&mut md5, &mut buf, partition);
            }
        }
    }
    ReadDigest(md5.finalize().into())
}

fn digest_partition(md5: &mut Md5, buf: &mut Vec<u8>, partition: &PartitionData) {
    md5.update(partition.key.token.to_be_bytes());
    update_bytes(md5, &partition.key.key);
    buf.clear();
    mutation::encode_partition_header(&partition.header, buf);
    update_bytes(md5, buf);
    match &partition.static_row {
        Some(row) => {
            md5.update([1]);
            buf.clear();
            mutation::encode_row(row, buf);
            update_bytes(md5, buf);
        }
        None => md5.update([0]),
    }
    md5.update(len_u32(partition.rows.len()).to_be_bytes());
    for (clustering, row) in &partition.rows {
        update_bytes(md5, clustering);
        buf.clear();
        mutation::encode_row(row, buf);
        update_bytes(md5, buf);
    }
}

/// `bytes`, preceded by their length.
fn update_bytes(md5: &mut Md5, bytes: &[u8]) {
    md5.update(len_u32(bytes.len()).to_be_bytes());
    md5.update(bytes);
}

/// A length as the digest encodes it. Every length here is bounded far below 4 GiB (a
/// partition key by `MAX_PARTITION_KEY_BYTES`, a page by its row limit), so saturating cannot
/// merge two different lengths in practice.
fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use mutation::{Cell, ColumnData, DeletionTime, LivenessInfo, PartitionHeader, Row};
    use mutation::{PartitionKey, PartitionPage, ScanPage};

    use super::*;

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

    fn partition(rows: Vec<(Vec<u8>, Row)>) -> PartitionData {
        PartitionData {
            key: PartitionKey {
                token: 7,
                key: b"k".to_vec(),
            },
            header: PartitionHeader::default(),
            static_row: None,
            rows,
        }
    }

    fn page(data: PartitionData, resume: Option<Vec<u8>>) -> ReadResponse {
        ReadResponse::Partition(PartitionPage { data, resume })
    }

    #[test]
    fn equal_data_has_equal_digests_whatever_the_resume_token() {
        let a = page(partition(vec![(b"c1".to_vec(), row(1, b"v"))]), None);
        let b = page(
            partition(vec![(b"c1".to_vec(), row(1, b"v"))]),
            Some(b"engine-specific".to_vec()),
        );
        assert_eq!(read_digest(&a), read_digest(&b));
    }

    #[test]
    fn any_difference_in_the_data_changes_the_digest() {
        let base = partition(vec![(b"c1".to_vec(), row(1, b"v"))]);
        let digest = read_digest(&page(base.clone(), None));
        let mut variants = Vec::new();
        // A value, a timestamp, a clustering key, a partition key, a token.
        variants.push(partition(vec![(b"c1".to_vec(), row(1, b"w"))]));
        variants.push(partition(vec![(b"c1".to_vec(), row(2, b"v"))]));
        variants.push(partition(vec![(b"c2".to_vec(), row(1, b"v"))]));
        let mut other_key = base.clone();
        other_key.key.key = b"j".to_vec();
        variants.push(other_key);
        let mut other_token = base.clone();
        other_token.key.token = 8;
        variants.push(other_token);
        // A tombstone (data a stale replica must get), a static row, a missing row.
        let mut deleted = base.clone();
        deleted.header.deletion = Some(DeletionTime {
            marked_for_delete_at: 0,
            local_deletion_time: 1,
        });
        variants.push(deleted);
        let mut with_static = base.clone();
        with_static.static_row = Some(row(1, b"s"));
        variants.push(with_static);
        variants.push(partition(Vec::new()));
        for variant in variants {
            assert_ne!(
                read_digest(&page(variant.clone(), None)),
                digest,
                "{variant:?}"
            );
        }
    }

    #[test]
    fn a_row_moved_between_partitions_changes_a_range_digest() {
        // Length-prefixed fields: the same bytes split differently hash differently.
        let first = |rows| PartitionData {
            key: PartitionKey {
                token: 1,
                key: b"a".to_vec(),
            },
            ..partition(rows)
        };
        let second = |rows| PartitionData {
            key: PartitionKey {
                token: 2,
                key: b"b".to_vec(),
            },
            ..partition(rows)
        };
        let r = (b"c".to_vec(), row(1, b"v"));
        let range = |partitions| {
            ReadResponse::Range(ScanPage {
                partitions,
                resume: None,
                last_partition_continues: false,
            })
        };
        let a = range(vec![first(vec![r.clone()]), second(Vec::new())]);
        let b = range(vec![first(Vec::new()), second(vec![r])]);
        assert_ne!(read_digest(&a), read_digest(&b));
    }
}
