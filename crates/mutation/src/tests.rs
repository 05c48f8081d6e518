//! Rule tests for reconciliation and liveness, property tests (a small deterministic generator,
//! so failures reproduce from the printed seed) for merge laws and codec round trips, and a
//! corruption sweep showing decoders return errors rather than panic. `wire_tests` reuses the
//! generators.

use crate::*;

/// xorshift64*: deterministic, dependency-free, good enough to explore small domains.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

// Small domains so that generated values collide often: equal timestamps, equal paths, equal
// ids are where reconciliation rules matter.
fn gen_deletion(r: &mut Rng) -> DeletionTime {
    DeletionTime {
        marked_for_delete_at: r.below(6) as i64,
        local_deletion_time: r.below(3) as u32,
    }
}

fn gen_expiry(r: &mut Rng) -> Expiry {
    Expiry {
        ttl_seconds: 1 + r.below(3) as i32,
        local_expiration_time: 100 + r.below(3) as u32,
    }
}

fn gen_cell(r: &mut Rng) -> Cell {
    let timestamp = r.below(6) as i64;
    match r.below(3) {
        0 => Cell::live(timestamp, vec![r.below(3) as u8; gen_value_len(r)]),
        1 => Cell::expiring(
            timestamp,
            vec![r.below(3) as u8; gen_value_len(r).max(1)],
            gen_expiry(r),
        ),
        _ => Cell::tombstone(timestamp, r.below(3) as u32),
    }
}

/// Mostly 0 or 1 bytes; sometimes either side of the longest length the codec's common-shape
/// readers take (127: a one-byte length).
fn gen_value_len(r: &mut Rng) -> usize {
    match r.below(10) {
        0 => 127,
        1 => 128,
        n => (n % 2) as usize,
    }
}

fn gen_liveness(r: &mut Rng) -> Option<LivenessInfo> {
    r.chance(2).then(|| LivenessInfo {
        timestamp: r.below(6) as i64,
        expiry: r.chance(2).then(|| gen_expiry(r)),
    })
}

pub(crate) fn gen_row(r: &mut Rng) -> Row {
    let mut row = gen_raw_row(r);
    row.normalize();
    row
}

/// A row as a writer might build it: columns in any order, duplicates, shadowed data.
pub(crate) fn gen_raw_row(r: &mut Rng) -> Row {
    let mut row = Row {
        liveness: gen_liveness(r),
        deletion: r.chance(3).then(|| gen_deletion(r)),
        columns: Vec::new(),
    };
    for _ in 0..r.below(5) {
        let id = r.below(4) as u32;
        // Column ids 0-1 are simple, 2-3 complex, as a schema would have it.
        let column = if id < 2 {
            ColumnData::Simple {
                id,
                cell: gen_cell(r),
            }
        } else {
            let cells = (0..r.below(4))
                .map(|_| (vec![r.below(4) as u8], gen_cell(r)))
                .collect();
            ColumnData::Complex {
                id,
                deletion: r.chance(3).then(|| gen_deletion(r)),
                cells,
            }
        };
        row.columns.push(column);
    }
    row
}

pub(crate) fn gen_bound(r: &mut Rng) -> Option<ClusteringBound> {
    if r.chance(3) {
        return None;
    }
    Some(ClusteringBound {
        prefix: (0..r.below(3)).map(|_| r.below(3) as u8).collect(),
        inclusive: r.chance(2),
    })
}

pub(crate) fn gen_header(r: &mut Rng) -> PartitionHeader {
    let mut header = PartitionHeader {
        deletion: r.chance(3).then(|| gen_deletion(r)),
        range_tombstones: (0..r.below(4))
            .map(|_| RangeTombstone {
                start: gen_bound(r),
                end: gen_bound(r),
                deletion: gen_deletion(r),
            })
            .collect(),
    };
    header.normalize();
    header
}

const CASES: u64 = 20_000;

#[test]
fn reconcile_higher_timestamp_wins_regardless_of_kind() {
    let old_tombstone = Cell::tombstone(1, 50);
    let new_live = Cell::live(2, b"a".to_vec());
    assert_eq!(reconcile_cells(&old_tombstone, &new_live), &new_live);
    assert_eq!(reconcile_cells(&new_live, &old_tombstone), &new_live);
}

#[test]
fn reconcile_tombstone_beats_live_on_equal_timestamp() {
    let t = Cell::tombstone(5, 1);
    let l = Cell::live(5, b"zzz".to_vec());
    assert_eq!(reconcile_cells(&t, &l), &t);
    assert_eq!(reconcile_cells(&l, &t), &t);
}

#[test]
fn reconcile_expiring_beats_plain_live_and_tombstone_beats_expiring() {
    // CASSANDRA-14592: on a timestamp tie an expiring cell wins over a plain one even with a
    // smaller value, so the outcome does not depend on when it is evaluated.
    let e = Cell::expiring(
        5,
        b"a".to_vec(),
        Expiry {
            ttl_seconds: 10,
            local_expiration_time: 110,
        },
    );
    let l = Cell::live(5, b"z".to_vec());
    assert_eq!(reconcile_cells(&l, &e), &e);
    let t = Cell::tombstone(5, 0);
    assert_eq!(reconcile_cells(&e, &t), &t);
}

#[test]
fn reconcile_two_expiring_cells_later_expiration_wins_before_value() {
    let early = Cell::expiring(
        5,
        b"z".to_vec(),
        Expiry {
            ttl_seconds: 10,
            local_expiration_time: 110,
        },
    );
    let late = Cell::expiring(
        5,
        b"a".to_vec(),
        Expiry {
            ttl_seconds: 20,
            local_expiration_time: 120,
        },
    );
    assert_eq!(reconcile_cells(&early, &late), &late);
    assert_eq!(reconcile_cells(&late, &early), &late);
}

#[test]
fn reconcile_equal_timestamps_larger_value_wins_unsigned() {
    let small = Cell::live(5, vec![0x7f]);
    let big = Cell::live(5, vec![0x80]);
    assert_eq!(reconcile_cells(&small, &big), &big);
    assert_eq!(reconcile_cells(&big, &small), &big);
    let prefix = Cell::live(5, vec![0x80, 0x00]);
    assert_eq!(
        reconcile_cells(&big, &prefix),
        &prefix,
        "longer value with equal prefix is larger"
    );
}

#[test]
fn deletion_time_supersedes_by_timestamp_then_local_time() {
    let a = DeletionTime {
        marked_for_delete_at: 10,
        local_deletion_time: 5,
    };
    let b = DeletionTime {
        marked_for_delete_at: 10,
        local_deletion_time: 6,
    };
    let c = DeletionTime {
        marked_for_delete_at: 11,
        local_deletion_time: 0,
    };
    assert!(b.supersedes(&a) && !a.supersedes(&b) && !a.supersedes(&a));
    assert!(c.supersedes(&b));
    assert!(a.deletes(10) && !a.deletes(11));
}

#[test]
fn row_deletion_shadows_equal_and_older_data_in_merge() {
    let write = Row {
        liveness: Some(LivenessInfo {
            timestamp: 10,
            expiry: None,
        }),
        deletion: None,
        columns: vec![
            ColumnData::Simple {
                id: 1,
                cell: Cell::live(10, b"a".to_vec()),
            },
            ColumnData::Simple {
                id: 2,
                cell: Cell::live(11, b"b".to_vec()),
            },
        ],
    };
    let delete = Row {
        deletion: Some(DeletionTime {
            marked_for_delete_at: 10,
            local_deletion_time: 0,
        }),
        ..Row::default()
    };
    let merged = write.merge(delete);
    assert_eq!(merged.liveness, None);
    assert_eq!(merged.columns.len(), 1);
    assert_eq!(merged.columns[0].id(), 2);
}

#[test]
fn collection_deletion_shadows_older_elements_only() {
    let d = DeletionTime {
        marked_for_delete_at: 5,
        local_deletion_time: 0,
    };
    let mut row = Row {
        columns: vec![ColumnData::Complex {
            id: 3,
            deletion: Some(d),
            cells: vec![
                (vec![1], Cell::live(4, b"old".to_vec())),
                (vec![2], Cell::live(6, b"new".to_vec())),
            ],
        }],
        ..Row::default()
    };
    row.normalize();
    match &row.columns[0] {
        ColumnData::Complex {
            cells, deletion, ..
        } => {
            assert_eq!(cells.len(), 1);
            assert_eq!(cells[0].0, vec![2]);
            assert_eq!(*deletion, Some(d));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_row_reported_normalized_is_left_unchanged_by_normalize() {
    let (mut reported, mut simple_sorted) = (0, 0);
    for seed in 1..20_000u64 {
        let mut r = Rng(seed);
        let raw = gen_raw_row(&mut r);
        let mut normalized = raw.clone();
        normalized.normalize();
        if raw.is_normalized() {
            reported += 1;
            assert_eq!(normalized, raw, "seed {seed}");
        }
        // The rows the check is for: simple columns in order, no row deletion.
        if normalized.deletion.is_none()
            && normalized
                .columns
                .iter()
                .all(|c| matches!(c, ColumnData::Simple { .. }))
        {
            simple_sorted += 1;
            assert!(normalized.is_normalized(), "seed {seed}");
        }
    }
    assert!(
        reported > 1_000 && simple_sorted > 1_000,
        "{reported} {simple_sorted}"
    );
}

#[test]
fn normalize_sorts_and_reconciles_duplicates() {
    let mut row = Row {
        columns: vec![
            ColumnData::Simple {
                id: 2,
                cell: Cell::live(1, b"x".to_vec()),
            },
            ColumnData::Simple {
                id: 1,
                cell: Cell::live(1, b"a".to_vec()),
            },
            ColumnData::Simple {
                id: 2,
                cell: Cell::live(2, b"y".to_vec()),
            },
        ],
        ..Row::default()
    };
    row.normalize();
    assert_eq!(
        row.columns.iter().map(ColumnData::id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        row.column(2),
        Some(&ColumnData::Simple {
            id: 2,
            cell: Cell::live(2, b"y".to_vec())
        })
    );
}

#[test]
fn row_liveness_insert_marker_keeps_row_with_null_columns_alive() {
    let insert = Row {
        liveness: Some(LivenessInfo {
            timestamp: 1,
            expiry: None,
        }),
        deletion: None,
        columns: vec![ColumnData::Simple {
            id: 1,
            cell: Cell::tombstone(1, 0),
        }],
    };
    assert!(insert.is_live(0));
    // An UPDATE setting the only column to null leaves nothing live.
    let update = Row {
        liveness: None,
        ..insert.clone()
    };
    assert!(!update.is_live(0));
}

#[test]
fn row_liveness_respects_ttl_and_covering_deletions() {
    let expiry = Expiry {
        ttl_seconds: 10,
        local_expiration_time: 110,
    };
    let row = Row {
        liveness: Some(LivenessInfo {
            timestamp: 1,
            expiry: Some(expiry),
        }),
        deletion: None,
        columns: vec![ColumnData::Simple {
            id: 1,
            cell: Cell::expiring(1, b"v".to_vec(), expiry),
        }],
    };
    assert!(row.is_live(109));
    assert!(
        !row.is_live(110),
        "expired exactly at local_expiration_time"
    );

    let mut covered = row.clone();
    covered.apply_deletions(Some(DeletionTime {
        marked_for_delete_at: 1,
        local_deletion_time: 0,
    }));
    assert!(covered.is_empty());
    assert!(!covered.is_live(0));

    let mut newer = row;
    newer.apply_deletions(Some(DeletionTime {
        marked_for_delete_at: 0,
        local_deletion_time: 0,
    }));
    assert!(newer.is_live(0));
}

#[test]
fn apply_deletions_drops_superseded_row_deletion() {
    let own = DeletionTime {
        marked_for_delete_at: 3,
        local_deletion_time: 0,
    };
    let covering = DeletionTime {
        marked_for_delete_at: 7,
        local_deletion_time: 0,
    };
    let mut row = Row {
        deletion: Some(own),
        ..Row::default()
    };
    row.apply_deletions(Some(covering));
    assert_eq!(row.deletion, None);
    let mut row = Row {
        deletion: Some(covering),
        ..Row::default()
    };
    row.apply_deletions(Some(own));
    assert_eq!(row.deletion, Some(covering));
}

#[test]
fn clustering_bounds_follow_prefix_semantics() {
    let inc = |p: &[u8]| ClusteringBound {
        prefix: p.to_vec(),
        inclusive: true,
    };
    let exc = |p: &[u8]| ClusteringBound {
        prefix: p.to_vec(),
        inclusive: false,
    };
    // Keys [1,x] have prefix [1].
    assert!(inc(&[1]).start_admits(&[1, 0]));
    assert!(!exc(&[1]).start_admits(&[1, 0]));
    assert!(!exc(&[1]).start_admits(&[1, 255]));
    assert!(exc(&[1]).start_admits(&[2, 0]));
    assert!(!inc(&[1]).start_admits(&[0, 9]));
    assert!(inc(&[1]).end_admits(&[1, 255]));
    assert!(!exc(&[1]).end_admits(&[1, 0]));
    assert!(exc(&[1]).end_admits(&[0, 255]));
    assert!(!inc(&[1]).end_admits(&[2, 0]));
    // The empty prefix as a bound covers everything inclusively, nothing exclusively.
    assert!(inc(&[]).start_admits(&[0]) && inc(&[]).end_admits(&[255]));
    assert!(!exc(&[]).start_admits(&[0]) && !exc(&[]).end_admits(&[255]));
}

#[test]
fn covering_deletion_takes_newest_of_partition_and_ranges() {
    let d = |t| DeletionTime {
        marked_for_delete_at: t,
        local_deletion_time: 0,
    };
    let header = PartitionHeader {
        deletion: Some(d(2)),
        range_tombstones: vec![
            RangeTombstone {
                start: Some(ClusteringBound {
                    prefix: vec![1],
                    inclusive: true,
                }),
                end: Some(ClusteringBound {
                    prefix: vec![1],
                    inclusive: true,
                }),
                deletion: d(5),
            },
            RangeTombstone {
                start: None,
                end: None,
                deletion: d(3),
            },
        ],
    };
    assert_eq!(header.covering_deletion(&[1, 7]), Some(d(5)));
    assert_eq!(header.covering_deletion(&[2, 7]), Some(d(3)));
    let merged = header.clone().merge(PartitionHeader {
        deletion: Some(d(4)),
        range_tombstones: vec![],
    });
    assert_eq!(
        merged.range_tombstones.len(),
        1,
        "the range at 3 is shadowed by the partition deletion at 4"
    );
}

#[test]
fn property_cell_reconcile_is_a_semilattice() {
    let mut r = Rng(0x5eed_0001);
    for case in 0..CASES {
        let (a, b, c) = (gen_cell(&mut r), gen_cell(&mut r), gen_cell(&mut r));
        assert_eq!(
            reconcile_cells(&a, &b),
            reconcile_cells(&b, &a),
            "case {case}: {a:?} {b:?}"
        );
        assert_eq!(reconcile_cells(&a, &a), &a);
        let left = reconcile_cells(reconcile_cells(&a, &b), &c);
        let right = reconcile_cells(&a, reconcile_cells(&b, &c));
        assert_eq!(left, right, "case {case}");
    }
}

#[test]
fn property_row_merge_is_commutative_associative_idempotent() {
    let mut r = Rng(0x5eed_0002);
    for case in 0..CASES {
        let (a, b, c) = (gen_row(&mut r), gen_row(&mut r), gen_row(&mut r));
        assert_eq!(
            a.clone().merge(b.clone()),
            b.clone().merge(a.clone()),
            "case {case}:\n{a:?}\n{b:?}"
        );
        assert_eq!(a.clone().merge(a.clone()), a, "case {case}");
        let left = a.clone().merge(b.clone()).merge(c.clone());
        let right = a.clone().merge(b.clone().merge(c.clone()));
        assert_eq!(left, right, "case {case}:\n{a:?}\n{b:?}\n{c:?}");
    }
}

#[test]
fn property_header_merge_is_commutative_associative_idempotent() {
    let mut r = Rng(0x5eed_0003);
    for case in 0..CASES {
        let (a, b, c) = (gen_header(&mut r), gen_header(&mut r), gen_header(&mut r));
        assert_eq!(
            a.clone().merge(b.clone()),
            b.clone().merge(a.clone()),
            "case {case}"
        );
        assert_eq!(a.clone().merge(a.clone()), a, "case {case}");
        let left = a.clone().merge(b.clone()).merge(c.clone());
        let right = a.clone().merge(b.clone().merge(c.clone()));
        assert_eq!(left, right, "case {case}");
    }
}

#[test]
fn property_merge_agrees_with_liveness_of_parts() {
    // A merged row hides nothing newer than what either part showed: if merge(a, b) is live,
    // at least one part was live on its own (merging cannot create data).
    let mut r = Rng(0x5eed_0004);
    for _ in 0..CASES {
        let (a, b) = (gen_row(&mut r), gen_row(&mut r));
        let now = 99 + r.below(4) as u32;
        if a.clone().merge(b.clone()).is_live(now) {
            assert!(a.is_live(now) || b.is_live(now));
        }
    }
}

#[test]
fn property_codec_round_trips() {
    let mut r = Rng(0x5eed_0005);
    let mut buf = Vec::new();
    for case in 0..CASES {
        let row = gen_row(&mut r);
        buf.clear();
        encode_row(&row, &mut buf);
        assert_eq!(buf[0], ROW_FORMAT_VERSION);
        // encode_row reserves this much once: it must bound the encoding.
        assert!(
            crate::codec::encoded_row_len_bound(&row) >= buf.len(),
            "case {case}"
        );
        assert_eq!(decode_row(&buf), Ok(row), "case {case}");

        // Headers round-trip even when not normalized (callers may send any list).
        let header = PartitionHeader {
            deletion: r.chance(2).then(|| gen_deletion(&mut r)),
            range_tombstones: (0..r.below(3))
                .map(|_| RangeTombstone {
                    start: gen_bound(&mut r),
                    end: gen_bound(&mut r),
                    deletion: gen_deletion(&mut r),
                })
                .collect(),
        };
        buf.clear();
        encode_partition_header(&header, &mut buf);
        assert_eq!(decode_partition_header(&buf), Ok(header), "case {case}");
    }
}

/// A normalized row whose columns are all simple (ids 0-4), as most tables' rows are.
fn gen_simple_row(r: &mut Rng) -> Row {
    let mut row = Row {
        liveness: gen_liveness(r),
        deletion: r.chance(4).then(|| gen_deletion(r)),
        columns: (0..r.below(6))
            .map(|_| ColumnData::Simple {
                // Sometimes either side of the largest one-byte id (127).
                id: match r.below(7) {
                    5 => 127,
                    6 => 128,
                    n => n as u32,
                },
                cell: gen_cell(r),
            })
            .collect(),
    };
    row.normalize();
    row
}

#[test]
fn property_merging_encoded_rows_equals_merging_decoded_rows() {
    let mut r = Rng(0x5eed_000a);
    let encode = |row: &Row| {
        let mut buf = Vec::new();
        encode_row(row, &mut buf);
        buf
    };
    let mut fast = 0;
    for case in 0..CASES {
        // Mostly simple rows (the fast path), sometimes one with collections (no fast path).
        let a = if r.chance(4) {
            gen_row(&mut r)
        } else {
            gen_simple_row(&mut r)
        };
        let b = if r.chance(4) {
            gen_row(&mut r)
        } else {
            gen_simple_row(&mut r)
        };
        let (ea, eb) = (encode(&a), encode(&b));
        let complex = |row: &Row| {
            row.columns
                .iter()
                .any(|c| matches!(c, ColumnData::Complex { .. }))
        };
        match merge_encoded_rows(&ea, &eb) {
            Some(merged) => {
                assert!(!complex(&a) && !complex(&b), "case {case}");
                assert_eq!(merged, encode(&a.clone().merge(b.clone())), "case {case}");
                fast += 1;
            }
            None => assert!(complex(&a) || complex(&b), "case {case}"),
        }
    }
    assert!(fast > CASES / 2, "{fast} of {CASES} took the fast path");
}

#[test]
fn merging_encoded_rows_with_many_columns_sizes_the_column_count() {
    // The count is written before the columns, in room for the most there can be: 200 and
    // 100 columns both need a shorter or equal varint than that room (2 bytes).
    let row = |ids: std::ops::Range<u32>, timestamp: i64| Row {
        liveness: None,
        deletion: None,
        columns: ids
            .map(|id| ColumnData::Simple {
                id,
                cell: Cell::live(timestamp, vec![id as u8]),
            })
            .collect(),
    };
    let encode = |row: &Row| {
        let mut buf = Vec::new();
        encode_row(row, &mut buf);
        buf
    };
    for (a, b) in [
        (row(0..100, 1), row(100..200, 2)),
        (row(0..100, 1), row(0..100, 2)),
    ] {
        let merged = merge_encoded_rows(&encode(&a), &encode(&b));
        assert_eq!(merged, Some(encode(&a.merge(b))));
    }
}

#[test]
fn merging_encoded_rows_leaves_corrupt_values_to_the_decoder() {
    let mut r = Rng(0x5eed_000b);
    let mut good = Vec::new();
    encode_row(&gen_simple_row(&mut r), &mut good);
    let mut row = Vec::new();
    encode_row(
        &Row {
            liveness: Some(LivenessInfo {
                timestamp: 1,
                expiry: None,
            }),
            deletion: None,
            columns: vec![ColumnData::Simple {
                id: 3,
                cell: Cell::live(1, b"abc".to_vec()),
            }],
        },
        &mut row,
    );
    // Every truncation, a trailing byte, an unknown cell kind: no fast merge, and no panic.
    for cut in 0..row.len() {
        assert!(decode_row(&row[..cut]).is_err(), "cut at {cut}");
        assert_eq!(merge_encoded_rows(&row[..cut], &good), None, "cut at {cut}");
        assert_eq!(merge_encoded_rows(&good, &row[..cut]), None, "cut at {cut}");
    }
    let mut trailing = row.clone();
    trailing.push(0);
    assert_eq!(merge_encoded_rows(&trailing, &good), None);
    let mut bad_kind = row.clone();
    bad_kind[13] = 0x07; // version, flags, marker, count, id, column kind, then the cell kind
    assert!(decode_row(&bad_kind).is_err());
    assert_eq!(merge_encoded_rows(&good, &bad_kind), None);
}

#[test]
fn codec_handles_large_values_and_ids() {
    let row = Row {
        liveness: None,
        deletion: None,
        columns: vec![ColumnData::Simple {
            id: u32::MAX,
            cell: Cell::live(i64::MIN, vec![7; 70_000]),
        }],
    };
    let mut buf = Vec::new();
    encode_row(&row, &mut buf);
    assert_eq!(decode_row(&buf), Ok(row));
}

#[test]
fn decoders_reject_corruption_without_panicking() {
    let mut r = Rng(0x5eed_0006);
    let mut rejected = 0;
    for _ in 0..2_000 {
        let mut row_bytes = Vec::new();
        encode_row(&gen_row(&mut r), &mut row_bytes);
        let mut header_bytes = Vec::new();
        encode_partition_header(&gen_header(&mut r), &mut header_bytes);
        type Decode = fn(&[u8]) -> bool;
        let row_ok: Decode = |b| decode_row(b).is_ok();
        let header_ok: Decode = |b| decode_partition_header(b).is_ok();
        for (bytes, decodes) in [(&row_bytes, row_ok), (&header_bytes, header_ok)] {
            // Every strict prefix is incomplete and must be an error.
            for len in 0..bytes.len() {
                assert!(!decodes(&bytes[..len]), "prefix of length {len} decoded");
            }
            // Random flips: any outcome but a panic is acceptable.
            let mut flipped = bytes.clone();
            let i = r.below(flipped.len() as u64) as usize;
            flipped[i] ^= 1 << r.below(8);
            rejected += usize::from(!decodes(&flipped));
            // Trailing garbage is always an error.
            let mut extended = bytes.clone();
            extended.push(0);
            assert!(!decodes(&extended));
        }
    }
    assert!(rejected > 0);
}

#[test]
fn decode_errors_name_the_problem() {
    assert_eq!(
        decode_row(&[9, 0, 0]),
        Err(MutationError::UnsupportedVersion {
            structure: "row",
            version: 9,
            supported: 1
        })
    );
    let err = decode_row(&[1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]).expect_err("huge column count");
    assert!(err.to_string().contains("column count"), "{err}");
    let err = decode_row(&[1, 0x80]).expect_err("bad flags");
    assert!(err.to_string().contains("flags"), "{err}");
    let huge_count = [1, 0, 0x85, 0x80, 0x80, 0x80, 0x80, 0x01];
    assert!(decode_partition_header(&huge_count).is_err());
}

#[test]
fn merge_accepts_rows_built_in_any_order() {
    let unsorted = Row {
        columns: vec![
            ColumnData::Simple {
                id: 3,
                cell: Cell::live(1, b"c".to_vec()),
            },
            ColumnData::Simple {
                id: 1,
                cell: Cell::live(1, b"a".to_vec()),
            },
        ],
        ..Row::default()
    };
    let other = Row {
        columns: vec![ColumnData::Simple {
            id: 1,
            cell: Cell::live(2, b"a2".to_vec()),
        }],
        ..Row::default()
    };
    let merged = unsorted.merge(other);
    assert_eq!(
        merged
            .columns
            .iter()
            .map(ColumnData::id)
            .collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert_eq!(
        merged.column(1),
        Some(&ColumnData::Simple {
            id: 1,
            cell: Cell::live(2, b"a2".to_vec())
        })
    );
}

/// What a read at `now` shows of a row: liveness, and every live cell with its timestamp and
/// expiry (what `writetime()` and `ttl()` would see).
#[allow(clippy::type_complexity)]
fn visible(
    row: &Row,
    now: LocalTime,
) -> (bool, Vec<(ColumnId, Vec<u8>, Vec<u8>, i64, Option<Expiry>)>) {
    let mut row = row.clone();
    row.apply_deletions(None);
    let mut cells = Vec::new();
    let mut push = |id: ColumnId, path: &[u8], c: &Cell| {
        if let CellValue::Live { value, expiry } = &c.value {
            if c.is_live(now) {
                cells.push((id, path.to_vec(), value.clone(), c.timestamp, *expiry));
            }
        }
    };
    for column in &row.columns {
        match column {
            ColumnData::Simple { id, cell } => push(*id, &[], cell),
            ColumnData::Complex { id, cells: cs, .. } => {
                for (path, c) in cs {
                    push(*id, path, c);
                }
            }
        }
    }
    (row.is_live(now), cells)
}

#[test]
fn purge_drops_only_tombstones_past_grace() {
    let purger = Purger::new(1_000, 100); // gc_before = 900
    let mut row = Row {
        liveness: Some(LivenessInfo {
            timestamp: 1,
            expiry: None,
        }),
        deletion: Some(DeletionTime {
            marked_for_delete_at: 0,
            local_deletion_time: 899,
        }),
        columns: vec![
            ColumnData::Simple {
                id: 0,
                cell: Cell::tombstone(5, 899),
            },
            ColumnData::Simple {
                id: 1,
                cell: Cell::tombstone(5, 900),
            },
        ],
    };
    row.purge_tombstones(&purger);
    assert_eq!(row.deletion, None, "deleted at 899 < gc_before 900");
    assert_eq!(
        row.columns,
        vec![ColumnData::Simple {
            id: 1,
            cell: Cell::tombstone(5, 900)
        }],
        "a tombstone exactly at gc_before stays (strictly before, as Cassandra)"
    );
}

#[test]
fn purge_turns_expired_cells_into_tombstones_then_drops_them() {
    let expiry = |exp| Expiry {
        ttl_seconds: 50,
        local_expiration_time: exp,
    };
    let purger = Purger::new(1_000, 100); // gc_before = 900
                                          // Expired at 950: not purgeable yet, but written at 900, so the tombstone it becomes is
                                          // dated 900 and kept.
    let mut row = Row::default();
    row.columns.push(ColumnData::Simple {
        id: 0,
        cell: Cell::expiring(7, vec![1], expiry(950)),
    });
    row.purge_tombstones(&purger);
    assert_eq!(
        row.columns[0],
        ColumnData::Simple {
            id: 0,
            cell: Cell::tombstone(7, 900)
        }
    );
    // Expired at 899: gone. Still live at 1000: untouched.
    let mut row = Row::default();
    row.columns.push(ColumnData::Simple {
        id: 0,
        cell: Cell::expiring(7, vec![1], expiry(899)),
    });
    row.columns.push(ColumnData::Simple {
        id: 1,
        cell: Cell::expiring(7, vec![1], expiry(1_001)),
    });
    row.purge_tombstones(&purger);
    assert_eq!(row.columns.len(), 1);
    assert_eq!(row.columns[0].id(), 1);
}

#[test]
fn purge_keeps_tombstones_newer_data_outside_may_need() {
    // A late write with an older timestamp sits outside the compaction: a tombstone at or
    // above its timestamp keeps shadowing it, however old.
    let purger = Purger {
        now_seconds: 1_000,
        gc_before: 900,
        timestamps_below: 10,
    };
    let mut row = Row {
        deletion: Some(DeletionTime {
            marked_for_delete_at: 10,
            local_deletion_time: 1,
        }),
        ..Row::default()
    };
    row.purge_tombstones(&purger);
    assert!(row.deletion.is_some());
    let mut header = PartitionHeader {
        deletion: Some(DeletionTime {
            marked_for_delete_at: 9,
            local_deletion_time: 1,
        }),
        range_tombstones: vec![],
    };
    header.purge_tombstones(&purger);
    assert!(header.deletion.is_none());
}

#[test]
fn property_purge_never_resurrects() {
    // The storage contract: fragments `inside` a compaction hold everything older for the key;
    // fragments `outside` were all written with timestamps >= `timestamps_below`. Purging the
    // merged inside and merging the rest later must show exactly what merging everything
    // without purging shows, at the purge's `now` and any later read.
    let mut r = Rng(0x5eed_0007);
    for case in 0..CASES {
        let inside: Vec<Row> = (0..1 + r.below(3)).map(|_| gen_row(&mut r)).collect();
        let purger = Purger {
            now_seconds: 99 + r.below(4) as u32,
            gc_before: r.below(4) as u32,
            timestamps_below: if r.chance(2) {
                i64::MAX
            } else {
                r.below(7) as i64
            },
        };
        let outside: Vec<Row> = (0..r.below(3))
            .map(|_| gen_row(&mut r))
            .filter(|row| {
                row.min_timestamp()
                    .is_none_or(|ts| ts >= purger.timestamps_below)
            })
            .collect();
        let merged_inside = inside.iter().cloned().fold(Row::default(), Row::merge);
        let mut purged = merged_inside.clone();
        purged.purge_tombstones(&purger);
        let all = outside.iter().cloned().fold(merged_inside, Row::merge);
        let with_purge = outside.iter().cloned().fold(purged, Row::merge);
        for now in purger.now_seconds..purger.now_seconds + 4 {
            assert_eq!(
                visible(&with_purge, now),
                visible(&all, now),
                "case {case} now {now} {purger:?}:\ninside {inside:?}\noutside {outside:?}"
            );
        }
    }
}
