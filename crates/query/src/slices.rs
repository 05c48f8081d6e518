//! Clustering slices: the byte ranges of clustering keys, in clustering order, that a slice
//! restriction on the clustering columns after an `=` prefix selects (Cassandra's `Slices`,
//! built by `ClusteringColumnRestrictions` from single- and multi-column slice restrictions).
//!
//! A slice compares values in their type's own order, whatever the clustering order:
//! `(b, c) > (1, 2)` is `b > 1 OR (b = 1 AND c > 2)` on `CLUSTERING ORDER BY (b DESC, c ASC)`
//! too. Clustering keys are stored byte-comparably in clustering order (a DESC column's
//! encoding is inverted), so on columns of mixed order one such restriction selects several
//! disjoint ranges of keys, as Cassandra splits it into several slices. `ranges` computes them
//! exactly (each range's bounds are whole-component prefixes, `mutation::ClusteringBound`);
//! a read of the ranges in order returns the rows in clustering order.

use std::cmp::Ordering;

use mutation::ClusteringBound;
use schema::{ClusteringOrder, ColumnMetadata};

/// One side of a slice: values of consecutive clustering columns from the first one after the
/// `=` prefix (one for `c > v`, several for `(c1, c2) > (v1, v2)`), compared as a tuple in the
/// values' order, and whether the bound itself is included.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TupleBound {
    pub values: Vec<Vec<u8>>,
    pub inclusive: bool,
}

/// A range of clustering keys, bounds in clustering (byte) order; `None` is unbounded.
pub(crate) type ClusteringRange = (Option<ClusteringBound>, Option<ClusteringBound>);

/// The disjoint ranges, in clustering order, of the keys that start with the encoded
/// `prefix` and whose next columns, `columns` (the clustering columns after the prefix), are
/// above `lower` and below `upper` (a side that is `None` is unbounded). Adjacent ranges are
/// merged, so columns of one order make one range. Empty when nothing can match
/// (`lower` above `upper`).
pub(crate) fn ranges(
    columns: &[&ColumnMetadata],
    prefix: &[u8],
    lower: Option<&TupleBound>,
    upper: Option<&TupleBound>,
) -> Vec<ClusteringRange> {
    let mut out = Vec::new();
    collect(
        columns,
        &mut prefix.to_vec(),
        lower.map(|b| (b.values.as_slice(), b.inclusive)),
        upper.map(|b| (b.values.as_slice(), b.inclusive)),
        &mut out,
    );
    merge_adjacent(out)
}

/// The rest of a bound below the current column: its remaining values and inclusiveness.
type Rest<'a> = Option<(&'a [Vec<u8>], bool)>;

/// Adds to `out`, in clustering order, the ranges of keys starting with `prefix` whose
/// columns from `columns[0]` on lie within `lower` and `upper`.
fn collect(
    columns: &[&ColumnMetadata],
    prefix: &mut Vec<u8>,
    lower: Rest<'_>,
    upper: Rest<'_>,
    out: &mut Vec<ClusteringRange>,
) {
    // A bound with no values left was met with equality on every one of its columns: the keys
    // here are in the slice exactly when it is inclusive, whatever their later columns.
    let exhausted = |b: Rest<'_>| b.filter(|(values, _)| values.is_empty()).map(|(_, i)| i);
    if exhausted(lower) == Some(false) || exhausted(upper) == Some(false) {
        return;
    }
    let lower = lower.filter(|(values, _)| !values.is_empty());
    let upper = upper.filter(|(values, _)| !values.is_empty());
    let Some((column, rest_columns)) = columns.split_first() else {
        // No column left to compare (a bound longer than the key cannot be written).
        out.push(whole(prefix));
        return;
    };
    if lower.is_none() && upper.is_none() {
        out.push(whole(prefix));
        return;
    }
    let l0 = lower.map(|(values, _)| values[0].as_slice());
    let u0 = upper.map(|(values, _)| values[0].as_slice());
    if let (Some(l), Some(u)) = (l0, u0) {
        match types::compare(&column.ty, l, u) {
            Ordering::Greater => return,
            Ordering::Equal => {
                let mark = prefix.len();
                encode(column, l, prefix);
                collect(rest_columns, prefix, after(lower), after(upper), out);
                prefix.truncate(mark);
                return;
            }
            Ordering::Less => {}
        }
    }
    // Three pieces in value order: the column equal to the lower value (its later columns
    // bounded below), strictly between the values, equal to the upper value (later columns
    // bounded above). A descending column stores them in the opposite order.
    let descending = column.order == ClusteringOrder::Desc;
    let mut pieces: [Option<Piece<'_>>; 3] = [
        l0.map(|l| Piece::Equal(l, after(lower), None)),
        Some(Piece::Between(l0, u0)),
        u0.map(|u| Piece::Equal(u, None, after(upper))),
    ];
    if descending {
        pieces.reverse();
    }
    for piece in pieces.into_iter().flatten() {
        match piece {
            Piece::Equal(value, lower, upper) => {
                let mark = prefix.len();
                encode(column, value, prefix);
                collect(rest_columns, prefix, lower, upper, out);
                prefix.truncate(mark);
            }
            Piece::Between(low, high) => {
                // Exclusive bounds at `prefix + value` lie after (start) or before (end) every
                // key whose column equals the value.
                let (first, last) = if descending { (high, low) } else { (low, high) };
                let bound = |value: Option<&[u8]>| match value {
                    Some(v) => {
                        let mut p = prefix.clone();
                        encode(column, v, &mut p);
                        Some(ClusteringBound {
                            prefix: p,
                            inclusive: false,
                        })
                    }
                    None => prefix_bound(prefix),
                };
                out.push((bound(first), bound(last)));
            }
        }
    }
}

/// A bound with its first value taken off.
fn after(bound: Rest<'_>) -> Rest<'_> {
    bound.map(|(values, inclusive)| (&values[1..], inclusive))
}

/// A piece of one column's range: equal to a value (with the bounds on the later columns),
/// or strictly between two values (`None`: unbounded).
enum Piece<'a> {
    Equal(&'a [u8], Rest<'a>, Rest<'a>),
    Between(Option<&'a [u8]>, Option<&'a [u8]>),
}

fn encode(column: &ColumnMetadata, value: &[u8], out: &mut Vec<u8>) {
    types::byte_comparable::encode(
        &column.ty,
        value,
        column.order == ClusteringOrder::Desc,
        out,
    );
}

/// Every key starting with `prefix` (the empty prefix: every key, unbounded).
fn whole(prefix: &[u8]) -> ClusteringRange {
    (prefix_bound(prefix), prefix_bound(prefix))
}

fn prefix_bound(prefix: &[u8]) -> Option<ClusteringBound> {
    (!prefix.is_empty()).then(|| ClusteringBound {
        prefix: prefix.to_vec(),
        inclusive: true,
    })
}

/// Joins consecutive ranges that touch: one ending at a prefix inclusively (after every key
/// with it) and the next starting at the same prefix exclusively (right after those keys), or
/// ending before a prefix and starting at it inclusively.
fn merge_adjacent(ranges: Vec<ClusteringRange>) -> Vec<ClusteringRange> {
    let mut out: Vec<ClusteringRange> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        if let Some((_, last_end)) = out.last_mut() {
            let touching = matches!((&*last_end, &start), (Some(e), Some(s))
                if e.prefix == s.prefix && e.inclusive != s.inclusive);
            if touching {
                *last_end = end;
                continue;
            }
        }
        out.push((start, end));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schema::ColumnKind;
    use types::CqlType;

    fn column(position: i32, order: ClusteringOrder) -> ColumnMetadata {
        ColumnMetadata {
            name: format!("c{position}"),
            ty: CqlType::Int,
            kind: ColumnKind::Clustering,
            position,
            order,
            id: position as u32,
        }
    }

    fn int(v: i32) -> Vec<u8> {
        v.to_be_bytes().to_vec()
    }

    fn key(columns: &[&ColumnMetadata], values: &[i32]) -> Vec<u8> {
        let mut out = Vec::new();
        for (c, v) in columns.iter().zip(values) {
            encode(c, &int(*v), &mut out);
        }
        out
    }

    /// Whether a tuple of values satisfies `lower` and `upper`, compared as tuples of the
    /// same length as each bound, in value order: the model `ranges` must match.
    fn model(
        values: &[i32],
        lower: Option<&(Vec<i32>, bool)>,
        upper: Option<&(Vec<i32>, bool)>,
    ) -> bool {
        let check = |bound: &(Vec<i32>, bool), above: bool| {
            let n = bound.0.len();
            let ord = values[..n].cmp(&bound.0[..]);
            match ord {
                Ordering::Equal => bound.1,
                Ordering::Greater => above,
                Ordering::Less => !above,
            }
        };
        lower.is_none_or(|b| check(b, true)) && upper.is_none_or(|b| check(b, false))
    }

    fn in_ranges(ranges: &[ClusteringRange], key: &[u8]) -> bool {
        ranges
            .iter()
            .any(|(s, e)| mutation::clustering_range_contains(s.as_ref(), e.as_ref(), key))
    }

    /// Every order of 3 int columns, every bound of 1 to 3 values on each side (values 0..3),
    /// over all 27 keys: the ranges select exactly the model's keys, are disjoint, come in
    /// clustering order, and there is one range when all columns share an order.
    #[test]
    fn ranges_select_exactly_the_tuples_in_value_order() {
        let orders = [ClusteringOrder::Asc, ClusteringOrder::Desc];
        let mut bounds: Vec<Option<(Vec<i32>, bool)>> = vec![None];
        for n in 1..=3usize {
            for code in 0..3i32.pow(n as u32) {
                let values: Vec<i32> = (0..n).map(|i| (code / 3i32.pow(i as u32)) % 3).collect();
                for inclusive in [false, true] {
                    bounds.push(Some((values.clone(), inclusive)));
                }
            }
        }
        for o0 in orders {
            for o1 in orders {
                for o2 in orders {
                    let cols = [column(0, o0), column(1, o1), column(2, o2)];
                    let refs: Vec<&ColumnMetadata> = cols.iter().collect();
                    let mut keys: Vec<(Vec<u8>, Vec<i32>)> = Vec::new();
                    for a in 0..3 {
                        for b in 0..3 {
                            for c in 0..3 {
                                keys.push((key(&refs, &[a, b, c]), vec![a, b, c]));
                            }
                        }
                    }
                    keys.sort();
                    for lower in &bounds {
                        for upper in bounds.iter().step_by(3) {
                            let tb = |b: &Option<(Vec<i32>, bool)>| {
                                b.as_ref().map(|(v, i)| TupleBound {
                                    values: v.iter().map(|x| int(*x)).collect(),
                                    inclusive: *i,
                                })
                            };
                            let (l, u) = (tb(lower), tb(upper));
                            let got = ranges(&refs, &[], l.as_ref(), u.as_ref());
                            // Exactly the model's keys, each in one range.
                            for (k, values) in &keys {
                                let n = got
                                    .iter()
                                    .filter(|(s, e)| {
                                        mutation::clustering_range_contains(
                                            s.as_ref(),
                                            e.as_ref(),
                                            k,
                                        )
                                    })
                                    .count();
                                let want = model(values, lower.as_ref(), upper.as_ref());
                                assert_eq!(
                                    n,
                                    usize::from(want),
                                    "{values:?} {lower:?} {upper:?} {o0:?}{o1:?}{o2:?}"
                                );
                            }
                            // In clustering order: the keys of each range come after the last one's.
                            let mut last_index = None;
                            for (s, e) in &got {
                                let inside: Vec<usize> = keys
                                    .iter()
                                    .enumerate()
                                    .filter(|(_, (k, _))| {
                                        mutation::clustering_range_contains(
                                            s.as_ref(),
                                            e.as_ref(),
                                            k,
                                        )
                                    })
                                    .map(|(i, _)| i)
                                    .collect();
                                if let (Some(first), Some(last)) = (inside.first(), last_index) {
                                    assert!(*first > last);
                                }
                                if let Some(l) = inside.last() {
                                    last_index = Some(*l);
                                }
                            }
                            if o0 == o1 && o1 == o2 {
                                assert!(got.len() <= 1, "{got:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// Text values where one is a prefix of another ('', "a", "ab", "b"), and blobs with a
    /// zero byte, in both orders: the encoding's terminators keep prefix bounds exact.
    #[test]
    fn ranges_are_exact_for_values_that_prefix_each_other() {
        let values: [&[u8]; 5] = [b"", b"a", b"a\0", b"ab", b"b"];
        for ty in [CqlType::Text, CqlType::Blob] {
            for orders in [
                [ClusteringOrder::Asc, ClusteringOrder::Desc],
                [ClusteringOrder::Desc, ClusteringOrder::Asc],
                [ClusteringOrder::Desc, ClusteringOrder::Desc],
            ] {
                let cols: Vec<ColumnMetadata> = orders
                    .iter()
                    .enumerate()
                    .map(|(i, o)| ColumnMetadata {
                        ty: ty.clone(),
                        ..column(i as i32, *o)
                    })
                    .collect();
                let refs: Vec<&ColumnMetadata> = cols.iter().collect();
                let mut keys = Vec::new();
                for a in values {
                    for b in values {
                        let mut key = Vec::new();
                        encode(refs[0], a, &mut key);
                        encode(refs[1], b, &mut key);
                        keys.push((key, (a.to_vec(), b.to_vec())));
                    }
                }
                for low in values {
                    for high in values {
                        for inclusive in [false, true] {
                            let lower = TupleBound {
                                values: vec![b"a".to_vec(), low.to_vec()],
                                inclusive,
                            };
                            let upper = TupleBound {
                                values: vec![high.to_vec()],
                                inclusive: !inclusive,
                            };
                            let got = ranges(&refs, &[], Some(&lower), Some(&upper));
                            for (key, (a, b)) in &keys {
                                let above =
                                    match (a.as_slice(), b.as_slice()).cmp(&(&b"a"[..], low)) {
                                        Ordering::Greater => true,
                                        Ordering::Equal => inclusive,
                                        Ordering::Less => false,
                                    };
                                let below = match a.as_slice().cmp(high) {
                                    Ordering::Less => true,
                                    Ordering::Equal => !inclusive,
                                    Ordering::Greater => false,
                                };
                                assert_eq!(
                                    in_ranges(&got, key),
                                    above && below,
                                    "{a:?} {b:?} {low:?} {high:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_prefix_bounds_every_range() {
        let cols = [
            column(1, ClusteringOrder::Desc),
            column(2, ClusteringOrder::Asc),
        ];
        let refs: Vec<&ColumnMetadata> = cols.iter().collect();
        let prefix = key(&[&column(0, ClusteringOrder::Asc)], &[7]);
        let lower = TupleBound {
            values: vec![int(1), int(1)],
            inclusive: false,
        };
        let got = ranges(&refs, &prefix, Some(&lower), None);
        // `(c1, c2) > (1, 1)` on (DESC, ASC): c1 > 1 first (stored first), then c1 = 1, c2 > 1.
        assert_eq!(got.len(), 2);
        for (s, e) in &got {
            for b in [s, e] {
                assert!(b.as_ref().is_some_and(|b| b.prefix.starts_with(&prefix)));
            }
        }
        let mut other = key(&[&column(0, ClusteringOrder::Asc)], &[8]);
        other.extend(key(&refs, &[2, 2]));
        assert!(!in_ranges(&got, &other));
    }

    #[test]
    fn crossed_bounds_select_nothing() {
        let cols = [column(0, ClusteringOrder::Asc)];
        let refs: Vec<&ColumnMetadata> = cols.iter().collect();
        let b = |v: i32, inclusive: bool| TupleBound {
            values: vec![int(v)],
            inclusive,
        };
        assert!(ranges(&refs, &[], Some(&b(2, true)), Some(&b(1, true))).is_empty());
        assert!(ranges(&refs, &[], Some(&b(1, false)), Some(&b(1, true))).is_empty());
        assert_eq!(
            ranges(&refs, &[], Some(&b(1, true)), Some(&b(1, true))).len(),
            1
        );
    }
}
