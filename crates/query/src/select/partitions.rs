//! The partitions an `=`/IN restriction on the whole partition key names: each key column's
//! values sorted and de-duplicated, their combinations made as they are read.

use cql_syntax::ast::Operator;
use mutation::PartitionKey;
use schema::TableMetadata;

use crate::keys::partition_key;
use crate::QueryError;

use super::filter::{op_matches, Filter};

/// The number of combinations of lists of these lengths, saturated (it is checked against a
/// guardrail before any combination is built).
pub(super) fn product_len(lengths: impl Iterator<Item = usize>) -> u64 {
    lengths.fold(1u64, |product, len| product.saturating_mul(len as u64))
}

/// The partitions a SELECT names by `=`/`IN` restrictions on its whole partition key.
pub(super) enum PartitionList {
    /// Keys made up front (one key of a one-column key: a point read).
    Keys(Vec<PartitionKey>),
    /// Every combination of each key column's values, made when it is read: a list of them all
    /// would take time and memory in the product of the IN lists' lengths before the first
    /// read (6,250,000 keys took 11 s of one shard), and the request's deadline is checked
    /// only between reads.
    Product(KeyProduct),
}

pub(super) struct KeyProduct {
    /// Each key column's values, sorted in Cassandra's order and distinct, so the
    /// combinations (the last column turning fastest) come out in Cassandra's read order and
    /// distinct (a composite key holds each component with its length, so different
    /// combinations are different keys).
    pub(super) columns: Vec<Vec<Vec<u8>>>,
    pub(super) len: usize,
    /// `token()` relations beside the key (`op`, token): keys outside them are left out, as in
    /// Cassandra (rows are checked against them too).
    pub(super) tokens: Vec<(Operator, i64)>,
}

impl PartitionList {
    /// The combinations of `columns` (each key column's values, in key order), with the
    /// `token()` restrictions in `filters`. Every key is checked as the read would check it
    /// (empty or over `MAX_PARTITION_KEY_BYTES`) before any is read.
    pub(super) fn product(
        table: &TableMetadata,
        columns: &[&[Vec<u8>]],
        filters: &[Filter],
    ) -> Result<PartitionList, QueryError> {
        let mut sorted: Vec<Vec<Vec<u8>>> = Vec::with_capacity(columns.len());
        for (values, column) in columns.iter().zip(table.partition_key()) {
            let mut values: Vec<&Vec<u8>> = values.iter().collect();
            // Stable, then of values that compare equal (a decimal's 1.0 and 1) only the first
            // written is kept, as Cassandra reads them (in key order, each value once).
            values.sort_by(|a, b| types::compare(&column.ty, a, b));
            values.dedup_by(|later, earlier| types::compare(&column.ty, later, earlier).is_eq());
            sorted.push(values.into_iter().cloned().collect());
        }
        let len = usize::try_from(product_len(sorted.iter().map(Vec::len))).unwrap_or(usize::MAX);
        if len > 0 {
            // The shortest and the longest key: if both are valid (not empty, not too long),
            // all are.
            let shortest: Vec<Vec<u8>> = sorted
                .iter()
                .filter_map(|values| values.iter().min_by_key(|v| v.len()).cloned())
                .collect();
            let longest: Vec<Vec<u8>> = sorted
                .iter()
                .filter_map(|values| values.iter().max_by_key(|v| v.len()).cloned())
                .collect();
            partition_key(table, &shortest)?;
            partition_key(table, &longest)?;
        }
        let tokens = filters
            .iter()
            .filter_map(|f| match f {
                Filter::Token { op, value } => Some((*op, *value)),
                _ => None,
            })
            .collect();
        Ok(PartitionList::Product(KeyProduct {
            columns: sorted,
            len,
            tokens,
        }))
    }

    pub(super) fn len(&self) -> usize {
        match self {
            PartitionList::Keys(keys) => keys.len(),
            PartitionList::Product(product) => product.len,
        }
    }

    /// Key `i` (below `len`) in read order.
    pub(super) fn key(
        &self,
        table: &TableMetadata,
        i: usize,
    ) -> Result<std::borrow::Cow<'_, PartitionKey>, QueryError> {
        match self {
            PartitionList::Keys(keys) => Ok(std::borrow::Cow::Borrowed(&keys[i])),
            PartitionList::Product(product) => {
                let mut parts = vec![Vec::new(); product.columns.len()];
                let mut rest = i;
                for (part, values) in parts.iter_mut().zip(&product.columns).rev() {
                    *part = values[rest % values.len()].clone();
                    rest /= values.len();
                }
                partition_key(table, &parts).map(std::borrow::Cow::Owned)
            }
        }
    }

    /// Whether a key of the list is read: the `token()` restrictions beside the key admit it.
    pub(super) fn admits(&self, key: &PartitionKey) -> bool {
        match self {
            PartitionList::Keys(_) => true,
            PartitionList::Product(product) => product
                .tokens
                .iter()
                .all(|(op, token)| op_matches(op, key.token.cmp(token))),
        }
    }

    /// Whether the key of these values (one per key column) is in the list.
    pub(super) fn contains(&self, table: &TableMetadata, parts: &[Vec<u8>]) -> bool {
        match self {
            PartitionList::Keys(keys) => {
                partition_key(table, parts).is_ok_and(|key| keys.iter().any(|k| k.key == key.key))
            }
            PartitionList::Product(product) => {
                parts.len() == product.columns.len()
                    && parts
                        .iter()
                        .zip(&product.columns)
                        .all(|(part, values)| values.contains(part))
                    && partition_key(table, parts).is_ok_and(|key| self.admits(&key))
            }
        }
    }
}
