//! The coordinator's resume tokens: what a page the coordinator answers carries as `resume`
//! (opaque to the query layer, which passes it back with the next read), naming where the next
//! page starts in terms any replica understands, since the next page may be read from other
//! replicas than this one.
//!
//! ```text
//! partition read:  0xA1 | a replica's resume token     (a page without rows that goes on)
//!                  0xA2 | clustering key               (go on strictly after this row, the
//!                                                       page's last, in the slice's order)
//! scan:            0xB1 | i64 token                    (go on at this token, inclusively)
//!                  0xB2 | i64 token | u32 key length | key | u8 0 or 1 | [clustering key]
//!                                                      (go on just after this partition, or
//!                                                       after its row if the flag is 1:
//!                                                       `ScanStart::After`)
//! ```
//! Integers are big-endian. A replica's token names the next row *that replica* holds, which
//! another replica may not agree with, so pages go on after the last row returned instead; a
//! replica's token (0xA1) is kept only for a page that goes on without a row (storage never
//! answers one).
//!
//! A token of another shape (not from this coordinator) is passed to the replica unchanged,
//! which refuses it if it is not its own.

use mutation::{ClusteringBound, ClusteringSlice, PartitionKey, ScanStart};

const PARTITION_REPLICA: u8 = 0xA1;
const PARTITION_AFTER: u8 = 0xA2;
const SCAN_TOKEN: u8 = 0xB1;
const SCAN_AFTER: u8 = 0xB2;

/// Where a partition read goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PartitionResume {
    /// With this replica resume token.
    Replica(Vec<u8>),
    /// Strictly after this row, in the slice's order.
    After(Vec<u8>),
}

pub(crate) fn encode_partition(resume: &PartitionResume) -> Vec<u8> {
    let (tag, bytes) = match resume {
        PartitionResume::Replica(token) => (PARTITION_REPLICA, token),
        PartitionResume::After(clustering) => (PARTITION_AFTER, clustering),
    };
    let mut out = Vec::with_capacity(1 + bytes.len());
    out.push(tag);
    out.extend_from_slice(bytes);
    out
}

/// The replica's command for a partition read resumed at `resume` (a token from
/// `encode_partition`): its resume token, or the slice narrowed to start strictly after the
/// row a reconciled page ended at.
pub(crate) fn resume_partition(
    slice: ClusteringSlice,
    resume: Option<Vec<u8>>,
) -> (ClusteringSlice, Option<Vec<u8>>) {
    let Some(token) = resume else {
        return (slice, None);
    };
    match token.split_first() {
        Some((&PARTITION_REPLICA, inner)) => (slice, Some(inner.to_vec())),
        Some((&PARTITION_AFTER, clustering)) => {
            // The row is within the slice, so a bound just past it is within it too.
            let bound = Some(ClusteringBound {
                prefix: clustering.to_vec(),
                inclusive: false,
            });
            let slice = if slice.reversed {
                ClusteringSlice {
                    end: bound,
                    ..slice
                }
            } else {
                ClusteringSlice {
                    start: bound,
                    ..slice
                }
            };
            (slice, None)
        }
        _ => (slice, Some(token)),
    }
}

/// Where a scan goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScanResume {
    /// At this token, inclusively.
    Token(i64),
    /// Just after this partition (`None`) or its row (`Some`).
    After(PartitionKey, Option<Vec<u8>>),
}

pub(crate) fn encode_scan(resume: &ScanResume) -> Vec<u8> {
    match resume {
        ScanResume::Token(token) => {
            let mut out = vec![SCAN_TOKEN];
            out.extend_from_slice(&token.to_be_bytes());
            out
        }
        ScanResume::After(key, clustering) => {
            let mut out = Vec::with_capacity(
                1 + 8 + 4 + key.key.len() + 1 + clustering.as_ref().map_or(0, Vec::len),
            );
            out.push(SCAN_AFTER);
            out.extend_from_slice(&key.token.to_be_bytes());
            // A partition key is at most `MAX_PARTITION_KEY_BYTES` (64 KiB).
            let len = u32::try_from(key.key.len()).expect("a partition key is under 4 GiB");
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&key.key);
            match clustering {
                None => out.push(0),
                Some(clustering) => {
                    out.push(1);
                    out.extend_from_slice(clustering);
                }
            }
            out
        }
    }
}

/// The replicas' start for a scan the query layer resumes at `start`: a coordinator token
/// decoded; anything else as it is.
pub(crate) fn resume_scan(start: ScanStart) -> ScanStart {
    let ScanStart::Resume(token) = &start else {
        return start;
    };
    decode_scan(token).unwrap_or(start)
}

fn decode_scan(token: &[u8]) -> Option<ScanStart> {
    let (&tag, rest) = token.split_first()?;
    let i64_at = |bytes: &[u8]| Some(i64::from_be_bytes(bytes.get(..8)?.try_into().ok()?));
    match tag {
        SCAN_TOKEN if rest.len() == 8 => Some(ScanStart::Token(i64_at(rest)?)),
        SCAN_AFTER => {
            let token = i64_at(rest)?;
            let len = u32::from_be_bytes(rest.get(8..12)?.try_into().ok()?) as usize;
            let key = rest.get(12..12usize.checked_add(len)?)?.to_vec();
            let tail = &rest[12 + len..];
            let clustering = match tail.split_first()? {
                (0, []) => None,
                (1, clustering) => Some(clustering.to_vec()),
                _ => return None,
            };
            Some(ScanStart::After {
                key: PartitionKey { token, key },
                clustering,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_tokens_round_trip_and_foreign_ones_pass_through() {
        let key = PartitionKey {
            token: -5,
            key: b"k".to_vec(),
        };
        let cases = [
            (ScanResume::Token(i64::MIN), ScanStart::Token(i64::MIN)),
            (
                ScanResume::After(key.clone(), None),
                ScanStart::After {
                    key: key.clone(),
                    clustering: None,
                },
            ),
            (
                ScanResume::After(key.clone(), Some(vec![])),
                ScanStart::After {
                    key: key.clone(),
                    clustering: Some(vec![]),
                },
            ),
            (
                ScanResume::After(key.clone(), Some(vec![0, 1])),
                ScanStart::After {
                    key,
                    clustering: Some(vec![0, 1]),
                },
            ),
        ];
        for (resume, start) in cases {
            let token = encode_scan(&resume);
            assert_eq!(resume_scan(ScanStart::Resume(token.clone())), start);
            // Cut short before its last field (a clustering key of any length), it is not
            // ours: passed on unchanged.
            let fixed = match &resume {
                ScanResume::Token(_) => token.len(),
                ScanResume::After(key, _) => 1 + 8 + 4 + key.key.len() + 1,
            };
            for len in 0..fixed {
                let cut = token[..len].to_vec();
                assert_eq!(
                    resume_scan(ScanStart::Resume(cut.clone())),
                    ScanStart::Resume(cut)
                );
            }
        }
        let storage = vec![0x02, 1, 2];
        assert_eq!(
            resume_scan(ScanStart::Resume(storage.clone())),
            ScanStart::Resume(storage)
        );
    }

    #[test]
    fn a_partition_read_resumes_with_the_replica_token_or_after_the_row() {
        let replica = encode_partition(&PartitionResume::Replica(vec![1, 7]));
        assert_eq!(
            resume_partition(ClusteringSlice::all(), Some(replica)),
            (ClusteringSlice::all(), Some(vec![1, 7]))
        );
        let after = encode_partition(&PartitionResume::After(vec![3]));
        let exclusive = Some(ClusteringBound {
            prefix: vec![3],
            inclusive: false,
        });
        let (forward, resume) = resume_partition(ClusteringSlice::all(), Some(after.clone()));
        assert_eq!(resume, None);
        assert_eq!(forward.start, exclusive);
        let reversed = ClusteringSlice {
            reversed: true,
            ..ClusteringSlice::all()
        };
        let (backward, _) = resume_partition(reversed, Some(after));
        assert_eq!(backward.end, exclusive);
        assert_eq!(backward.start, None);
    }
}
