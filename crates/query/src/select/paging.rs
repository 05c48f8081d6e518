//! The paging state: where the next page of a SELECT starts, in Helenus's own opaque format.

use crate::QueryError;

/// Paging state (opaque to clients; byte layout, big-endian):
/// `version u8 (1, or 2 with a group) | partition_index u32 | returned u32 |
///  partition_returned u32 | resume_len u32 | resume bytes | last_partition_len u32 |
///  last_partition bytes` and, in version 2, `group_partition_len u32 | group_partition bytes |
///  group_token i64 | group_clustering_len u32 | group_clustering bytes | partition_groups u32`.
/// A length of `u32::MAX` stands for an absent part.
/// `partition_index` counts reads of an IN list already finished (partitions, or each
/// partition's ranges, `Plan::slices`); `returned` is rows (with
/// GROUP BY: groups) returned so far (for LIMIT); `partition_returned` rows of the current
/// partition (for PER PARTITION LIMIT); `resume` is the storage position to continue from.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct PagingState {
    pub(super) partition_index: u32,
    pub(super) returned: u32,
    pub(super) partition_returned: u32,
    pub(super) resume: Option<Vec<u8>>,
    /// The partition the resume position belongs to (so a per-partition count continues).
    pub(super) last_partition: Option<Vec<u8>>,
    /// GROUP BY: the last group returned. `resume` is then a position at or before the next
    /// group's first row, and rows up to the end of this group are skipped.
    pub(super) group: Option<GroupResume>,
}

/// Where a GROUP BY page ended: the last group returned and its ordinal in its partition.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GroupResume {
    pub(super) key: GroupKey,
    pub(super) partition_groups: u32,
}

/// What identifies a group: the partition and the group's clustering prefix, encoded
/// byte-comparably (empty when the group is a whole partition or a static-only row).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GroupKey {
    pub(super) partition: Vec<u8>,
    pub(super) token: i64,
    pub(super) clustering: Vec<u8>,
}

pub(super) fn put_part(out: &mut Vec<u8>, part: Option<&[u8]>) {
    match part {
        Some(r) => {
            out.extend_from_slice(&(r.len() as u32).to_be_bytes());
            out.extend_from_slice(r);
        }
        None => out.extend_from_slice(&u32::MAX.to_be_bytes()),
    }
}

impl PagingState {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = vec![if self.group.is_some() { 2u8 } else { 1u8 }];
        out.extend_from_slice(&self.partition_index.to_be_bytes());
        out.extend_from_slice(&self.returned.to_be_bytes());
        out.extend_from_slice(&self.partition_returned.to_be_bytes());
        put_part(&mut out, self.resume.as_deref());
        put_part(&mut out, self.last_partition.as_deref());
        if let Some(g) = &self.group {
            put_part(&mut out, Some(&g.key.partition));
            out.extend_from_slice(&g.key.token.to_be_bytes());
            put_part(&mut out, Some(&g.key.clustering));
            out.extend_from_slice(&g.partition_groups.to_be_bytes());
        }
        out
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<PagingState, QueryError> {
        let bad = || QueryError::Invalid("Invalid value for the paging state".to_string());
        let mut rest = bytes;
        let take = |rest: &mut &[u8], n: usize| -> Result<Vec<u8>, QueryError> {
            if rest.len() < n {
                return Err(bad());
            }
            let (head, tail) = rest.split_at(n);
            *rest = tail;
            Ok(head.to_vec())
        };
        let u32_at = |rest: &mut &[u8]| -> Result<u32, QueryError> {
            let b = take(rest, 4)?;
            Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let part = |rest: &mut &[u8]| -> Result<Option<Vec<u8>>, QueryError> {
            let len = u32_at(rest)?;
            if len == u32::MAX {
                return Ok(None);
            }
            take(rest, len as usize).map(Some)
        };
        let version = match rest.first() {
            Some(v @ (1 | 2)) => *v,
            _ => return Err(bad()),
        };
        rest = &rest[1..];
        let partition_index = u32_at(&mut rest)?;
        let returned = u32_at(&mut rest)?;
        let partition_returned = u32_at(&mut rest)?;
        let resume = part(&mut rest)?;
        let last_partition = part(&mut rest)?;
        let group = if version == 2 {
            let partition = part(&mut rest)?.ok_or_else(bad)?;
            let t = take(&mut rest, 8)?;
            let token = i64::from_be_bytes(t.try_into().map_err(|_| bad())?);
            let clustering = part(&mut rest)?.ok_or_else(bad)?;
            let partition_groups = u32_at(&mut rest)?;
            Some(GroupResume {
                key: GroupKey {
                    partition,
                    token,
                    clustering,
                },
                partition_groups,
            })
        } else {
            None
        };
        if !rest.is_empty() {
            return Err(bad());
        }
        Ok(PagingState {
            partition_index,
            returned,
            partition_returned,
            resume,
            last_partition,
            group,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_state_round_trips_and_rejects_garbage() {
        let s = PagingState {
            partition_index: 3,
            returned: 10,
            partition_returned: 2,
            resume: Some(vec![1, 2, 3]),
            last_partition: None,
            group: None,
        };
        assert_eq!(PagingState::decode(&s.encode()).ok(), Some(s));
        assert!(PagingState::decode(&[]).is_err());
        assert!(PagingState::decode(&[1, 0, 0]).is_err());
        assert!(PagingState::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]).is_err());
    }
}
