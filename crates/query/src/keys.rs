//! How key values become stored keys: a partition key and its token, the byte-comparable
//! clustering key of a row (within Cassandra's length limits), and the clustering values a
//! row keeps in the form they were written when its key does not. Depends on nothing else in
//! this crate but its error.

use mutation::PartitionKey;
use mutation::{Cell, ColumnData, Row};
use schema::{ClusteringOrder, TableMetadata};
use types::CqlType;

use crate::QueryError;

/// Partition keys are stored with a 16-bit length, as in Cassandra.
pub(crate) const MAX_PARTITION_KEY_BYTES: usize = 65_535;

/// The most bytes a row's clustering values may hold together: Cassandra refuses more
/// (`ClusteringPrefix.validate`), since its format keeps clustering values under a 16-bit
/// length. Helenus's keys could hold more, but then a table could not move back to Cassandra,
/// and nothing larger reaches storage.
pub(crate) const MAX_CLUSTERING_KEY_BYTES: usize = 65_535;

/// Refuses key values that together hold more than `limit` bytes, in Cassandra's words.
pub(crate) fn check_key_length(values: &[Vec<u8>], limit: usize) -> Result<(), QueryError> {
    let total: usize = values.iter().map(Vec::len).sum();
    if total > limit {
        return Err(QueryError::Invalid(format!(
            "Key length of {total} is longer than maximum of {limit}"
        )));
    }
    Ok(())
}

/// The byte-comparable key of a row from all its clustering values, refused as Cassandra
/// refuses a clustering over `MAX_CLUSTERING_KEY_BYTES`: every write path (INSERT, UPDATE,
/// DELETE of a row or its columns, in a BATCH or not, JSON or not) addresses rows through it.
pub(crate) fn row_clustering_key(
    table: &TableMetadata,
    values: &[Vec<u8>],
) -> Result<Vec<u8>, QueryError> {
    check_key_length(values, MAX_CLUSTERING_KEY_BYTES)?;
    Ok(clustering_key(table, values))
}

/// Serialised partition key from one value per partition-key column.
pub(crate) fn partition_key(
    table: &TableMetadata,
    parts: &[Vec<u8>],
) -> Result<PartitionKey, QueryError> {
    // Cassandra checks a composite key's values together first (as it checks clustering
    // values), then the composite.
    check_key_length(parts, MAX_PARTITION_KEY_BYTES)?;
    let key = if parts.len() == 1 {
        parts[0].clone()
    } else {
        let refs: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        partitioner::compose_partition_key(&refs)
    };
    if key.is_empty() {
        return Err(QueryError::Invalid("Key may not be empty".to_string()));
    }
    if key.len() > MAX_PARTITION_KEY_BYTES {
        return Err(QueryError::Invalid(format!(
            "Key length of {} is longer than maximum of {MAX_PARTITION_KEY_BYTES}",
            key.len()
        )));
    }
    let _ = table;
    Ok(PartitionKey {
        token: partitioner::murmur3_token(&key),
        key,
    })
}

/// The hidden column of a row whose clustering values were written in a form other than the
/// one its key decodes to: a decimal's scale (`1.00`, `1000`), a varint's leading zero bytes, a
/// boolean's non-zero byte, a NaN's payload, a tuple's trailing nulls. The byte-comparable key
/// holds the canonical value only (equal values make one row, as in Cassandra), so the values
/// as written are kept in this cell, and reads return them, as Cassandra returns the
/// clustering a row was written with. Schema column ids count up from 0 and are never reused,
/// so none reaches this one; reads, liveness and tombstone counts leave it out. Its value: every
/// clustering value as a 4-byte big-endian length and the bytes. It is written with the row's
/// other cells (same timestamp and TTL) by writes in a non-canonical form, so of two forms of a
/// row the last such write's wins; Cassandra keeps the first arrival's while the row is in one
/// memtable and the newest source's when it merges a memtable with sstables. Both return the
/// form a row is written in when it is written in one.
pub(crate) const CLUSTERING_FORMS_COLUMN: u32 = u32::MAX;

/// The `CLUSTERING_FORMS_COLUMN` value for a row's clustering `values`, if any of them is not
/// in the form its byte-comparable encoding decodes to.
pub(crate) fn clustering_forms(table: &TableMetadata, values: &[Vec<u8>]) -> Option<Vec<u8>> {
    let canonical = table.clustering().iter().zip(values).all(|(col, value)| {
        if exact_key_type(&col.ty) {
            return true;
        }
        let mut encoded = Vec::with_capacity(value.len() + 2);
        types::byte_comparable::encode(&col.ty, value, false, &mut encoded);
        types::byte_comparable::decode(&col.ty, &mut encoded.as_slice(), false)
            .is_ok_and(|decoded| decoded == *value)
    });
    if canonical {
        return None;
    }
    let mut out = Vec::with_capacity(values.iter().map(|v| v.len() + 4).sum());
    for value in values {
        out.extend_from_slice(&(value.len() as u32).to_be_bytes());
        out.extend_from_slice(value);
    }
    Some(out)
}

/// The clustering values a `CLUSTERING_FORMS_COLUMN` value holds (`None` if malformed).
pub(crate) fn split_clustering_forms(mut bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<4>()?;
        let len = u32::from_be_bytes(*len) as usize;
        if rest.len() < len {
            return None;
        }
        out.push(&rest[..len]);
        bytes = &rest[len..];
    }
    Some(out)
}

/// The `CLUSTERING_FORMS_COLUMN` cell of a row, if it has one (ids are sorted: it is last).
pub(crate) fn clustering_forms_cell(row: &Row) -> Option<&Cell> {
    match row.columns.last() {
        Some(ColumnData::Simple { id, cell }) if *id == CLUSTERING_FORMS_COLUMN => Some(cell),
        _ => None,
    }
}

/// Byte-comparable clustering key (or prefix) from values of the first clustering columns.
pub(crate) fn clustering_key(table: &TableMetadata, parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (col, value) in table.clustering().iter().zip(parts) {
        types::byte_comparable::encode(
            &col.ty,
            value,
            col.order == ClusteringOrder::Desc,
            &mut out,
        );
    }
    out
}

/// Types whose values compare equal exactly when their serialisations are equal, so a key
/// bound encoded from a value selects exactly the rows a comparison would. Not boolean (any
/// non-zero byte is true), decimal (1.0 and 1.00), varint (leading zero bytes), floating point,
/// durations, or anything composite.
pub(crate) fn exact_key_type(ty: &CqlType) -> bool {
    matches!(
        ty,
        CqlType::Ascii
            | CqlType::Bigint
            | CqlType::Blob
            | CqlType::Date
            | CqlType::Int
            | CqlType::Smallint
            | CqlType::Text
            | CqlType::Time
            | CqlType::Timestamp
            | CqlType::Timeuuid
            | CqlType::Tinyint
            | CqlType::Uuid
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use schema::TableOptions;
    use uuid::Uuid;

    fn table(types: &[(&str, CqlType, ClusteringOrder)]) -> TableMetadata {
        let mut columns = vec![("k".to_string(), CqlType::Int, false)];
        columns.extend(
            types
                .iter()
                .map(|(n, t, _)| (n.to_string(), t.clone(), false)),
        );
        let clustering: Vec<(String, ClusteringOrder)> =
            types.iter().map(|(n, _, o)| (n.to_string(), *o)).collect();
        TableMetadata::new(
            "ks",
            "t",
            Uuid::nil(),
            columns,
            &["k".to_string()],
            &clustering,
            TableOptions::default(),
        )
        .expect("valid table")
    }

    #[test]
    fn clustering_forms_are_kept_only_when_the_key_would_lose_them() {
        let t = table(&[
            ("c", CqlType::Decimal, ClusteringOrder::Desc),
            ("d", CqlType::Int, ClusteringOrder::Asc),
        ]);
        let decimal = |unscaled: u8, scale: i32| {
            let mut v = scale.to_be_bytes().to_vec();
            v.push(unscaled);
            v
        };
        let one = 1i32.to_be_bytes().to_vec();
        // 1.5 (15, scale 1) and 1E+1 are canonical (no trailing zeros); 0.50 and 10 are not.
        assert_eq!(clustering_forms(&t, &[decimal(15, 1), one.clone()]), None);
        assert_eq!(clustering_forms(&t, &[decimal(1, -1), one.clone()]), None);
        for form in [decimal(50, 2), decimal(10, 0)] {
            let forms = clustering_forms(&t, &[form.clone(), one.clone()]).expect("kept");
            assert_eq!(
                split_clustering_forms(&forms),
                Some(vec![form.as_slice(), one.as_slice()])
            );
        }
        let booleans = table(&[("b", CqlType::Boolean, ClusteringOrder::Asc)]);
        assert_eq!(clustering_forms(&booleans, &[vec![1]]), None);
        assert!(clustering_forms(&booleans, &[vec![2]]).is_some());
        assert_eq!(split_clustering_forms(&[0, 0, 0, 5, 1]), None);
    }
}
