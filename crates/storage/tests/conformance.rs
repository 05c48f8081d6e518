//! The conformance suite every `StorageEngine` must pass. Each check is a plain function over
//! `&dyn StorageEngine`; `conformance!` instantiates all of them as tests for one engine. Slices
//! and paging are checked against a model (`mutation::clustering_range_contains` over the rows
//! written), so the suite states the contract rather than one engine's behaviour.

use std::collections::BTreeMap;

use mutation::{
    clustering_range_contains, Cell, ClusteringBound, ClusteringSlice, ColumnData, DeletionTime,
    LivenessInfo, PartitionData, PartitionHeader, PartitionKey, PartitionUpdate, RangeTombstone,
    ReadResponse, Row, ScanStart, TableId,
};
use storage::{
    Durability, MemoryEngine, RocksConfig, RocksEngine, StorageEngine, StorageError, TableStats,
};

fn table(n: u128) -> TableId {
    TableId::from_u128(n)
}

fn pk(token: i64, key: &[u8]) -> PartitionKey {
    PartitionKey {
        token,
        key: key.to_vec(),
    }
}

/// An INSERT-like row: marker plus one simple column.
fn insert(ts: i64, value: &[u8]) -> Row {
    Row {
        liveness: Some(LivenessInfo {
            timestamp: ts,
            expiry: None,
        }),
        deletion: None,
        columns: vec![ColumnData::Simple {
            id: 1,
            cell: Cell::live(ts, value.to_vec()),
        }],
    }
}

fn deletion(ts: i64) -> DeletionTime {
    DeletionTime {
        marked_for_delete_at: ts,
        local_deletion_time: 1_000,
    }
}

fn update(t: TableId, key: PartitionKey) -> PartitionUpdate {
    PartitionUpdate {
        table: t,
        key,
        header: None,
        static_row: None,
        rows: Vec::new(),
    }
}

/// An update of one row (clustering key `[0]`) written at `ts` with `value`.
fn one_row(t: TableId, key: PartitionKey, ts: i64, value: &[u8]) -> PartitionUpdate {
    PartitionUpdate {
        rows: vec![(vec![0], insert(ts, value))],
        ..update(t, key)
    }
}

fn all(engine: &dyn StorageEngine, t: TableId, key: &PartitionKey) -> PartitionData {
    engine
        .read_partition(t, key, &ClusteringSlice::all(), usize::MAX, None)
        .expect("read")
        .data
}

fn value_of(row: &Row) -> Option<&[u8]> {
    match row.column(1) {
        Some(ColumnData::Simple { cell, .. }) => cell.live_value(0),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------

pub fn writes_and_reads_back(engine: &dyn StorageEngine) {
    let t = table(1);
    engine.create_table(t).expect("create");
    engine.create_table(t).expect("create is idempotent");
    let key = pk(42, b"k");
    let mut u = update(t, key.clone());
    u.static_row = Some(Row {
        columns: vec![ColumnData::Simple {
            id: 7,
            cell: Cell::live(1, b"s".to_vec()),
        }],
        ..Row::default()
    });
    // Out of order on purpose: storage sorts clustering rows.
    u.rows = vec![(vec![2], insert(1, b"b")), (vec![1], insert(1, b"a"))];
    engine
        .apply_batch(&[u], Durability::Periodic)
        .expect("apply");

    let data = all(engine, t, &key);
    assert_eq!(data.key, key);
    assert_eq!(data.header, PartitionHeader::default());
    assert_eq!(
        data.static_row
            .as_ref()
            .and_then(|r| r.column(7))
            .map(ColumnData::id),
        Some(7)
    );
    assert_eq!(
        data.rows,
        vec![(vec![1], insert(1, b"a")), (vec![2], insert(1, b"b"))]
    );

    let missing = all(engine, t, &pk(42, b"other"));
    assert!(missing.rows.is_empty() && missing.static_row.is_none());
    assert!(matches!(
        engine.read_partition(table(999), &key, &ClusteringSlice::all(), 10, None),
        Err(StorageError::UnknownTable(_))
    ));
}

pub fn last_write_wins_regardless_of_arrival_order(engine: &dyn StorageEngine) {
    let t = table(2);
    engine.create_table(t).expect("create");
    for (i, order) in [[1, 2, 3], [3, 2, 1], [2, 3, 1]].iter().enumerate() {
        let key = pk(i as i64, b"p");
        for ts in order {
            let mut u = update(t, key.clone());
            u.rows = vec![(vec![0], insert(*ts, format!("v{ts}").as_bytes()))];
            engine
                .apply_batch(&[u], Durability::Periodic)
                .expect("apply");
            // Put fragments in different places (memtable, SSTables) between writes.
            if *ts == 2 {
                engine.flush(Some(t)).expect("flush");
            }
        }
        let data = all(engine, t, &key);
        assert_eq!(
            value_of(&data.rows[0].1),
            Some(&b"v3"[..]),
            "order {order:?}"
        );
    }
    engine.compact(Some(t)).expect("compact");
    for i in 0..3 {
        let data = all(engine, t, &pk(i, b"p"));
        assert_eq!(
            value_of(&data.rows[0].1),
            Some(&b"v3"[..]),
            "after compaction"
        );
    }

    // A tombstone with an equal timestamp beats the live cell; an older one loses.
    let key = pk(10, b"tie");
    let live = one_row(t, key.clone(), 5, b"x");
    let mut tomb = update(t, key.clone());
    tomb.rows = vec![(
        vec![0],
        Row {
            columns: vec![ColumnData::Simple {
                id: 1,
                cell: Cell::tombstone(5, 0),
            }],
            ..Row::default()
        },
    )];
    engine
        .apply_batch(&[tomb], Durability::Periodic)
        .expect("apply");
    engine
        .apply_batch(&[live], Durability::Periodic)
        .expect("apply");
    let data = all(engine, t, &key);
    assert_eq!(value_of(&data.rows[0].1), None);
}

pub fn tombstones_are_returned(engine: &dyn StorageEngine) {
    let t = table(3);
    engine.create_table(t).expect("create");
    let key = pk(-7, b"p");
    let mut u = update(t, key.clone());
    u.rows = (0..5u8).map(|i| (vec![i], insert(10, &[i]))).collect();
    engine
        .apply_batch(&[u], Durability::Periodic)
        .expect("apply");

    let mut row_delete = update(t, key.clone());
    row_delete.rows = vec![(
        vec![1],
        Row {
            deletion: Some(deletion(11)),
            ..Row::default()
        },
    )];
    let rt = RangeTombstone {
        start: Some(ClusteringBound {
            prefix: vec![3],
            inclusive: true,
        }),
        end: None,
        deletion: deletion(12),
    };
    let mut range_delete = update(t, key.clone());
    range_delete.header = Some(PartitionHeader {
        deletion: None,
        range_tombstones: vec![rt.clone()],
    });
    engine
        .apply_batch(&[row_delete, range_delete], Durability::Batch)
        .expect("apply");

    let data = all(engine, t, &key);
    assert_eq!(data.header.range_tombstones, vec![rt]);
    assert_eq!(
        data.rows.len(),
        5,
        "storage returns shadowed rows; the reader filters"
    );
    // The row deletion shadowed the older marker and cell: merge drops them.
    assert_eq!(
        data.rows[1].1,
        Row {
            deletion: Some(deletion(11)),
            ..Row::default()
        }
    );
    let live: Vec<u8> = data
        .rows
        .iter()
        .filter(|(ck, row)| {
            let mut row = row.clone();
            row.apply_deletions(data.header.covering_deletion(ck));
            row.is_live(0)
        })
        .map(|(ck, _)| ck[0])
        .collect();
    assert_eq!(live, vec![0, 2]);

    // A partition deletion newer than everything.
    let mut partition_delete = update(t, key.clone());
    partition_delete.header = Some(PartitionHeader {
        deletion: Some(deletion(20)),
        range_tombstones: vec![],
    });
    engine
        .apply_batch(&[partition_delete], Durability::None)
        .expect("apply");
    let data = all(engine, t, &key);
    assert_eq!(data.header.deletion, Some(deletion(20)));
    assert!(
        data.header.range_tombstones.is_empty(),
        "shadowed by the partition deletion"
    );
    assert!(data.rows.iter().all(|(ck, row)| {
        let mut row = row.clone();
        row.apply_deletions(data.header.covering_deletion(ck));
        !row.is_live(0)
    }));

    // A write after the partition deletion is live again.
    let mut rewrite = update(t, key.clone());
    rewrite.rows = vec![(vec![9], insert(21, b"new"))];
    engine
        .apply_batch(&[rewrite], Durability::Periodic)
        .expect("apply");
    let data = all(engine, t, &key);
    let (ck, row) = data.rows.last().expect("row");
    let mut row = row.clone();
    row.apply_deletions(data.header.covering_deletion(ck));
    assert!(row.is_live(0));
}

/// Two-component clustering keys `[a, b]`: one byte each, so prefix bounds on `[a]` matter.
fn slice_fixture(engine: &dyn StorageEngine, t: TableId, key: &PartitionKey) -> Vec<Vec<u8>> {
    engine.create_table(t).expect("create");
    let keys: Vec<Vec<u8>> = (0..4u8)
        .flat_map(|a| (0..3u8).map(move |b| vec![a, b]))
        .collect();
    let mut u = update(t, key.clone());
    u.rows = keys.iter().map(|k| (k.clone(), insert(1, k))).collect();
    engine
        .apply_batch(&[u], Durability::Periodic)
        .expect("apply");
    keys
}

fn bounds() -> Vec<Option<ClusteringBound>> {
    let mut out = vec![None];
    for prefix in [vec![], vec![1], vec![2], vec![1, 1], vec![3, 2], vec![0xff]] {
        for inclusive in [true, false] {
            out.push(Some(ClusteringBound {
                prefix: prefix.clone(),
                inclusive,
            }));
        }
    }
    out
}

pub fn slices_match_the_model(engine: &dyn StorageEngine) {
    let t = table(4);
    let key = pk(0, b"slices");
    let keys = slice_fixture(engine, t, &key);
    for start in bounds() {
        for end in bounds() {
            for reversed in [false, true] {
                let slice = ClusteringSlice {
                    start: start.clone(),
                    end: end.clone(),
                    reversed,
                };
                let mut expected: Vec<Vec<u8>> = keys
                    .iter()
                    .filter(|k| clustering_range_contains(start.as_ref(), end.as_ref(), k))
                    .cloned()
                    .collect();
                if reversed {
                    expected.reverse();
                }
                let page = engine
                    .read_partition(t, &key, &slice, usize::MAX, None)
                    .expect("read");
                let got: Vec<Vec<u8>> = page.data.rows.iter().map(|(k, _)| k.clone()).collect();
                assert_eq!(got, expected, "slice {slice:?}");
                assert_eq!(page.resume, None);
            }
        }
    }
}

/// The `try_` calls either do exactly what the blocking calls do or do nothing at all.
pub fn try_calls_match_or_would_block(engine: &dyn StorageEngine) {
    let t = table(6);
    let key = pk(6, b"try");
    slice_fixture(engine, t, &key);
    let mut deleted = update(t, key.clone());
    deleted.header = Some(PartitionHeader {
        deletion: Some(deletion(0)),
        ..PartitionHeader::default()
    });
    deleted.static_row = Some(insert(1, b"static"));
    engine
        .apply_batch(&[deleted], Durability::Periodic)
        .expect("apply");
    for start in bounds() {
        for reversed in [false, true] {
            let slice = ClusteringSlice {
                start: start.clone(),
                end: None,
                reversed,
            };
            for max_rows in [1, usize::MAX] {
                let blocking = engine
                    .read_partition(t, &key, &slice, max_rows, None)
                    .expect("read");
                match engine.try_read_partition(t, &key, &slice, max_rows, None) {
                    Ok(page) => {
                        assert_eq!(page.data, blocking.data, "slice {slice:?}");
                        assert_eq!(page.resume, blocking.resume);
                    }
                    Err(StorageError::WouldBlock) => {}
                    Err(e) => panic!("try_read_partition: {e}"),
                }
            }
        }
    }
    let mut u = update(t, key.clone());
    u.rows = vec![(vec![9, 9], insert(5, b"tried"))];
    for durability in [Durability::Periodic, Durability::Batch] {
        match engine.try_apply_batch(&[u.clone()], durability) {
            Ok(()) | Err(StorageError::WouldBlock) => {}
            Err(e) => panic!("try_apply: {e}"),
        }
    }
    engine
        .apply_batch(&[u], Durability::Periodic)
        .expect("apply");
    let rows = all(engine, t, &key).rows;
    assert_eq!(rows.last().map(|(k, _)| k.clone()), Some(vec![9, 9]));
    assert!(matches!(
        engine.try_read_partition(table(4245), &key, &ClusteringSlice::all(), 1, None),
        Err(StorageError::UnknownTable(_))
    ));
}

pub fn partition_paging_loses_and_repeats_nothing(engine: &dyn StorageEngine) {
    let t = table(5);
    let key = pk(5, b"paging");
    slice_fixture(engine, t, &key);
    let mut static_row = update(t, key.clone());
    static_row.static_row = Some(Row {
        columns: vec![ColumnData::Simple {
            id: 9,
            cell: Cell::live(1, b"s".to_vec()),
        }],
        ..Row::default()
    });
    engine
        .apply_batch(&[static_row], Durability::Periodic)
        .expect("apply");
    for start in bounds() {
        for end in [
            None,
            Some(ClusteringBound {
                prefix: vec![2],
                inclusive: true,
            }),
        ] {
            for reversed in [false, true] {
                let slice = ClusteringSlice {
                    start: start.clone(),
                    end: end.clone(),
                    reversed,
                };
                let full = engine
                    .read_partition(t, &key, &slice, usize::MAX, None)
                    .expect("read")
                    .data;
                for page_size in [1, 2, 5] {
                    let mut rows = Vec::new();
                    let mut resume: Option<Vec<u8>> = None;
                    for _ in 0..100 {
                        let page = engine
                            .read_partition(t, &key, &slice, page_size, resume.as_deref())
                            .expect("read page");
                        assert!(page.data.rows.len() <= page_size);
                        assert_eq!(
                            page.data.static_row, full.static_row,
                            "static row on every page"
                        );
                        rows.extend(page.data.rows);
                        resume = page.resume;
                        if resume.is_none() {
                            break;
                        }
                    }
                    assert_eq!(rows, full.rows, "slice {slice:?} page size {page_size}");
                }
            }
        }
    }
    assert!(matches!(
        engine.read_partition(t, &key, &ClusteringSlice::all(), 1, Some(&[0xee])),
        Err(StorageError::InvalidRequest(_))
    ));
}

/// Partitions spread over the token range, including a token collision and partitions with
/// only a static row or only a tombstone.
fn scan_fixture(engine: &dyn StorageEngine, t: TableId) -> Vec<PartitionKey> {
    engine.create_table(t).expect("create");
    let keys = vec![
        pk(i64::MIN + 1, b"min"),
        pk(-500, b"a"),
        pk(-500, b"bb"), // same token as "a": ordered by key length, then bytes
        pk(-1, b"static-only"),
        pk(0, b"zero"),
        pk(7, b"deleted"),
        pk(300, b"c"),
        pk(i64::MAX, b"max"),
    ];
    let mut updates = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let mut u = update(t, key.clone());
        match &key.key[..] {
            b"static-only" => {
                u.static_row = Some(Row {
                    columns: vec![ColumnData::Simple {
                        id: 9,
                        cell: Cell::live(1, b"s".to_vec()),
                    }],
                    ..Row::default()
                });
            }
            b"deleted" => {
                u.header = Some(PartitionHeader {
                    deletion: Some(deletion(3)),
                    range_tombstones: vec![],
                });
            }
            _ => {
                u.rows = (0..(i as u8 % 4 + 1))
                    .map(|c| (vec![c], insert(1, &[c])))
                    .collect()
            }
        }
        updates.push(u);
    }
    engine
        .apply_batch(&updates, Durability::Periodic)
        .expect("apply");
    keys
}

/// Concatenates pages, joining a partition continued across pages; checks that a page says
/// its last partition goes on exactly when the next page starts with it.
fn collect_scan(
    engine: &dyn StorageEngine,
    t: TableId,
    start: ScanStart,
    end_token: Option<i64>,
    page_size: usize,
) -> Vec<PartitionData> {
    let mut out: Vec<PartitionData> = Vec::new();
    let mut start = start;
    // The last partition of the previous page, and whether that page said it goes on.
    let mut previous: Option<(PartitionKey, bool)> = None;
    for _ in 0..1_000 {
        let page = engine.scan(t, start, end_token, page_size).expect("scan");
        let units: usize = page.partitions.iter().map(|p| p.rows.len().max(1)).sum();
        assert!(
            units <= page_size.max(1),
            "page of {units} units for limit {page_size}"
        );
        if let Some((key, continues)) = previous.take() {
            let first = page.partitions.first().map(|p| &p.key);
            assert_eq!(first == Some(&key), continues, "continuation of {key:?}");
        }
        previous = page
            .partitions
            .last()
            .map(|p| (p.key.clone(), page.last_partition_continues));
        if page.resume.is_none() {
            assert!(
                !page.last_partition_continues,
                "the last page ends its partition"
            );
        }
        for p in page.partitions {
            match out.last_mut() {
                Some(last) if last.key == p.key => {
                    assert_eq!(last.header, p.header, "header returned again");
                    assert_eq!(last.static_row, p.static_row, "static row returned again");
                    last.rows.extend(p.rows);
                }
                _ => out.push(p),
            }
        }
        match page.resume {
            Some(r) => start = ScanStart::Resume(r),
            None => return out,
        }
    }
    panic!("scan did not finish");
}

pub fn scan_is_in_token_order_and_pages_exactly(engine: &dyn StorageEngine) {
    let t = table(6);
    let keys = scan_fixture(engine, t);
    let full = collect_scan(engine, t, ScanStart::Beginning, None, usize::MAX);
    assert_eq!(
        full.iter().map(|p| p.key.clone()).collect::<Vec<_>>(),
        keys,
        "token order"
    );
    for (p, key) in full.iter().zip(&keys) {
        assert_eq!(*p, all(engine, t, key), "scan agrees with read_partition");
    }
    for page_size in [1, 2, 3, 7] {
        assert_eq!(
            collect_scan(engine, t, ScanStart::Beginning, None, page_size),
            full,
            "page size {page_size}"
        );
    }
    // Token start is inclusive; end token is inclusive.
    let from = collect_scan(engine, t, ScanStart::Token(-500), Some(7), 2);
    let expected: Vec<PartitionKey> = keys
        .iter()
        .filter(|k| (-500..=7).contains(&k.token))
        .cloned()
        .collect();
    assert_eq!(
        from.iter().map(|p| p.key.clone()).collect::<Vec<_>>(),
        expected
    );
    let last = collect_scan(engine, t, ScanStart::Token(i64::MAX), Some(i64::MAX), 1);
    assert_eq!(last.len(), 1);
    assert!(collect_scan(engine, t, ScanStart::Token(8), Some(299), 1).is_empty());
    assert!(matches!(
        engine.scan(t, ScanStart::Resume(vec![1, 2, 3]), None, 1),
        Err(StorageError::InvalidRequest(_))
    ));
}

/// `ScanStart::After` continues just after a partition or one of its rows, whichever page of
/// whichever replica named it: the rest of the partition (header and static row again; not
/// returned at all if no row is left), then every later partition.
pub fn scan_after_a_position_continues_there(engine: &dyn StorageEngine) {
    let t = table(16);
    scan_fixture(engine, t);
    let full = collect_scan(engine, t, ScanStart::Beginning, None, usize::MAX);
    for (i, p) in full.iter().enumerate() {
        let later = &full[i + 1..];
        let after = ScanStart::After {
            key: p.key.clone(),
            clustering: None,
        };
        assert_eq!(collect_scan(engine, t, after, None, 2), later, "after {i}");
        for (r, (clustering, _)) in p.rows.iter().enumerate() {
            let mut expected = Vec::new();
            if r + 1 < p.rows.len() {
                expected.push(PartitionData {
                    rows: p.rows[r + 1..].to_vec(),
                    ..p.clone()
                });
            }
            expected.extend_from_slice(later);
            let after = ScanStart::After {
                key: p.key.clone(),
                clustering: Some(clustering.clone()),
            };
            assert_eq!(
                collect_scan(engine, t, after, None, 3),
                expected,
                "after row {r} of {i}"
            );
        }
    }
}

pub fn apply_is_atomic_across_tables(engine: &dyn StorageEngine) {
    let (t1, t2) = (table(7), table(8));
    engine.create_table(t1).expect("create");
    engine.create_table(t2).expect("create");
    let a = one_row(t1, pk(1, b"a"), 1, b"x");
    let b = one_row(t2, pk(2, b"b"), 1, b"y");
    let bad = one_row(table(777), pk(3, b"c"), 1, b"z");
    assert!(matches!(
        engine.apply_batch(&[a.clone(), bad], Durability::Batch),
        Err(StorageError::UnknownTable(_))
    ));
    assert!(
        all(engine, t1, &pk(1, b"a")).rows.is_empty(),
        "nothing of a failed apply is visible"
    );
    let mut oversized = update(t1, pk(4, &vec![0; 70_000]));
    oversized.rows = vec![(vec![0], insert(1, b"z"))];
    assert!(matches!(
        engine.apply_batch(&[a.clone(), oversized], Durability::Periodic),
        Err(StorageError::InvalidRequest(_))
    ));
    assert!(all(engine, t1, &pk(1, b"a")).rows.is_empty());

    // Two updates of the same row in one call merge.
    let a2 = one_row(t1, pk(1, b"a"), 2, b"x2");
    engine
        .apply_batch(&[a2, a, b], Durability::Batch)
        .expect("apply");
    assert_eq!(
        value_of(&all(engine, t1, &pk(1, b"a")).rows[0].1),
        Some(&b"x2"[..])
    );
    assert_eq!(all(engine, t2, &pk(2, b"b")).rows.len(), 1);
}

pub fn apply_group_is_one_atomic_write(engine: &dyn StorageEngine) {
    let (t1, t2) = (table(21), table(22));
    engine.create_table(t1).expect("create");
    engine.create_table(t2).expect("create");
    let a = one_row(t1, pk(1, b"a"), 1, b"x");
    let b = one_row(t2, pk(2, b"b"), 1, b"y");
    let bad = one_row(table(778), pk(3, b"c"), 1, b"z");
    let (a_only, b_only, bad_only) = ([a.clone()], [b.clone()], [bad]);

    // One bad write fails the group, and nothing of it is visible.
    let group: [&[PartitionUpdate]; 3] = [&a_only, &bad_only, &b_only];
    assert!(matches!(
        engine.apply_group(&group, Durability::Periodic),
        Err(StorageError::UnknownTable(_))
    ));
    assert!(matches!(
        engine.try_apply_group(&group, Durability::Periodic),
        Err(StorageError::UnknownTable(_) | StorageError::WouldBlock)
    ));
    assert!(all(engine, t1, &pk(1, b"a")).rows.is_empty());
    assert!(all(engine, t2, &pk(2, b"b")).rows.is_empty());

    // A good group applies every write; writes of one row in different members merge.
    let a2 = one_row(t1, pk(1, b"a"), 2, b"x2");
    let (a2_only, a_and_b) = ([a2], [a, b]);
    let group: [&[PartitionUpdate]; 2] = [&a2_only, &a_and_b];
    engine
        .apply_group(&group, Durability::Batch)
        .expect("apply_group");
    assert_eq!(
        value_of(&all(engine, t1, &pk(1, b"a")).rows[0].1),
        Some(&b"x2"[..])
    );
    assert_eq!(all(engine, t2, &pk(2, b"b")).rows.len(), 1);

    // The try_ form does all of it or, if it would wait, none of it.
    let c = one_row(t1, pk(5, b"c"), 1, b"w");
    let d = one_row(t2, pk(6, b"d"), 1, b"v");
    let (c_only, d_only) = ([c], [d]);
    let group: [&[PartitionUpdate]; 2] = [&c_only, &d_only];
    let present = match engine.try_apply_group(&group, Durability::Periodic) {
        Ok(()) => 1,
        Err(StorageError::WouldBlock) => 0,
        Err(e) => panic!("try_apply_group: {e}"),
    };
    assert_eq!(all(engine, t1, &pk(5, b"c")).rows.len(), present);
    assert_eq!(all(engine, t2, &pk(6, b"d")).rows.len(), present);
    // Batch durability always needs a sync: never done by the try_ form.
    let group: [&[PartitionUpdate]; 1] = [&c_only];
    if !matches!(
        engine.try_apply_group(&group, Durability::Batch),
        Ok(()) | Err(StorageError::WouldBlock)
    ) {
        panic!("try_apply_group in batch mode neither wrote nor would block");
    }
}

pub fn truncate_and_drop(engine: &dyn StorageEngine) {
    let t = table(9);
    let keys = scan_fixture(engine, t);
    engine.flush(Some(t)).expect("flush");
    engine.truncate_table(t).expect("truncate");
    assert!(collect_scan(engine, t, ScanStart::Beginning, None, 100).is_empty());
    assert!(all(engine, t, &keys[1]).rows.is_empty());
    // Still usable after truncate.
    let u = one_row(t, keys[1].clone(), 1, b"again");
    engine
        .apply_batch(std::slice::from_ref(&u), Durability::Periodic)
        .expect("apply after truncate");
    assert_eq!(all(engine, t, &keys[1]).rows.len(), 1);

    engine.drop_table(t).expect("drop");
    engine.drop_table(t).expect("drop is idempotent");
    assert!(matches!(
        engine.apply_batch(&[u], Durability::Periodic),
        Err(StorageError::UnknownTable(_))
    ));
    assert!(matches!(
        engine.scan(t, ScanStart::Beginning, None, 1),
        Err(StorageError::UnknownTable(_))
    ));
    assert!(matches!(
        engine.truncate_table(t),
        Err(StorageError::UnknownTable(_))
    ));
    engine.create_table(t).expect("re-create");
    assert!(
        all(engine, t, &keys[1]).rows.is_empty(),
        "a re-created table starts empty"
    );
}

pub fn metadata(engine: &dyn StorageEngine) {
    engine.put_meta(b"schema/ks1", b"one").expect("put");
    engine.put_meta(b"schema/ks2", b"two").expect("put");
    engine.put_meta(b"schemb", b"other").expect("put");
    engine.put_meta(b"host_id", b"h").expect("put");
    assert_eq!(
        engine.get_meta(b"schema/ks1").expect("get"),
        Some(b"one".to_vec())
    );
    assert_eq!(engine.get_meta(b"missing").expect("get"), None);
    assert_eq!(
        engine.scan_meta(b"schema/").expect("scan"),
        vec![
            (b"schema/ks1".to_vec(), b"one".to_vec()),
            (b"schema/ks2".to_vec(), b"two".to_vec())
        ]
    );
    engine.delete_meta(b"schema/ks1").expect("delete");
    assert_eq!(engine.get_meta(b"schema/ks1").expect("get"), None);
    assert_eq!(engine.scan_meta(b"").expect("scan all").len(), 3);
    engine.put_meta(&[0xff, 0xff], b"edge").expect("put");
    assert_eq!(engine.scan_meta(&[0xff]).expect("scan").len(), 1);
    // In pages: after a key (present or not), at most a limit.
    engine.put_meta(b"schema/ks3", b"three").expect("put");
    let keys = |page: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<Vec<u8>> {
        page.into_iter().map(|(k, _)| k).collect()
    };
    assert_eq!(
        keys(engine.scan_meta_page(b"schema/", None, 1).expect("page")),
        [b"schema/ks2".to_vec()]
    );
    assert_eq!(
        keys(
            engine
                .scan_meta_page(b"schema/", Some(b"schema/ks2"), 5)
                .expect("page")
        ),
        [b"schema/ks3".to_vec()]
    );
    assert_eq!(
        keys(
            engine
                .scan_meta_page(b"schema/", Some(b"schema/ks1"), 5)
                .expect("page")
        ),
        [b"schema/ks2".to_vec(), b"schema/ks3".to_vec()]
    );
    assert!(engine
        .scan_meta_page(b"schema/", Some(b"schema/ks3"), 5)
        .expect("page")
        .is_empty());
    assert_eq!(
        engine
            .scan_meta_page(b"schema/", Some(b"a"), 5)
            .expect("page")
            .len(),
        2,
        "a key before the prefix is the prefix's start"
    );
    engine.delete_meta(b"schema/ks3").expect("delete");
    for durability in [Durability::Periodic, Durability::Batch, Durability::None] {
        engine
            .put_meta_with(b"batchlog/1", b"batch", durability)
            .expect("put");
        assert_eq!(
            engine.get_meta(b"batchlog/1").expect("get"),
            Some(b"batch".to_vec())
        );
        engine
            .delete_meta_with(b"batchlog/1", durability)
            .expect("delete");
        assert_eq!(engine.get_meta(b"batchlog/1").expect("get"), None);
        // Without waiting: done, or `WouldBlock` (always for a synced write in RocksDB).
        match engine.try_write_meta(b"batchlog/2", Some(b"b"), durability) {
            Ok(()) => {
                assert_eq!(
                    engine.get_meta(b"batchlog/2").expect("get"),
                    Some(b"b".to_vec())
                );
                engine
                    .try_write_meta(b"batchlog/2", None, durability)
                    .expect("a delete as cheap as the put");
                assert_eq!(engine.get_meta(b"batchlog/2").expect("get"), None);
            }
            Err(StorageError::WouldBlock) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

pub fn maintenance_calls_succeed(engine: &dyn StorageEngine) {
    let t = table(10);
    engine.create_table(t).expect("create");
    let u = one_row(t, pk(1, b"m"), 1, b"x");
    for durability in [Durability::Periodic, Durability::Batch, Durability::None] {
        engine
            .apply_batch(std::slice::from_ref(&u), durability)
            .expect("apply");
    }
    engine.sync_commit_log().expect("sync");
    engine.flush(None).expect("flush all");
    engine.flush(Some(t)).expect("flush one");
    engine.compact(None).expect("compact all");
    engine.compact(Some(t)).expect("compact one");
    assert!(matches!(
        engine.flush(Some(table(4242))),
        Err(StorageError::UnknownTable(_))
    ));
    assert_eq!(all(engine, t, &pk(1, b"m")).rows.len(), 1);
}

pub fn table_stats_follow_writes_and_flushes(engine: &dyn StorageEngine) {
    let t = table(12);
    engine.create_table(t).expect("create");
    let empty = engine.table_stats(t).expect("stats");
    // An empty memtable may still report its arena's bytes.
    let nothing = TableStats {
        memtable_bytes: empty.memtable_bytes,
        ..TableStats::default()
    };
    assert_eq!(empty, nothing);
    for i in 0..10i64 {
        let mut u = update(t, pk(i, b"s"));
        u.rows = vec![(vec![0], insert(1, b"x")), (vec![1], insert(1, b"y"))];
        engine
            .apply_batch(&[u], Durability::Periodic)
            .expect("apply");
    }
    let before = engine.table_stats(t).expect("stats");
    // 20 rows (no partition headers were written), all in memory or all in files.
    assert_eq!(
        before.memtable_entries + before.file_entries,
        20,
        "{before:?}"
    );
    engine.flush(Some(t)).expect("flush");
    let after = engine.table_stats(t).expect("stats");
    assert_eq!(after.memtable_entries + after.file_entries, 20, "{after:?}");
    assert_eq!(after.live_files > 0, after.file_entries > 0, "{after:?}");
    assert_eq!(after.live_files > 0, after.live_file_bytes > 0, "{after:?}");
    assert!(matches!(
        engine.table_stats(table(4243)),
        Err(StorageError::UnknownTable(_))
    ));
}

pub fn concurrent_writers_converge(engine: &dyn StorageEngine) {
    let t = table(11);
    engine.create_table(t).expect("create");
    std::thread::scope(|s| {
        for thread in 0..4i64 {
            s.spawn(move || {
                for i in 0..50i64 {
                    let ts = i * 4 + thread;
                    let mut u = update(t, pk(i % 5, b"c"));
                    u.rows = vec![(vec![0], insert(ts, &ts.to_be_bytes()))];
                    let durability = if i % 2 == 0 {
                        Durability::Batch
                    } else {
                        Durability::Periodic
                    };
                    engine.apply_batch(&[u], durability).expect("apply");
                }
            });
        }
    });
    let mut newest: BTreeMap<i64, i64> = BTreeMap::new();
    for thread in 0..4i64 {
        for i in 0..50i64 {
            let e = newest.entry(i % 5).or_default();
            *e = (*e).max(i * 4 + thread);
        }
    }
    for (p, ts) in newest {
        let data = all(engine, t, &pk(p, b"c"));
        assert_eq!(value_of(&data.rows[0].1), Some(&ts.to_be_bytes()[..]));
    }
}

/// A read never returns less than what was acknowledged before it started, while reads (which
/// may fill a cache) and writes to the same partitions race. Values are increasing counters.
pub fn reads_see_every_acknowledged_write(engine: &dyn StorageEngine) {
    use std::sync::atomic::{AtomicI64, Ordering};
    let t = table(12);
    engine.create_table(t).expect("create");
    let acked: Vec<AtomicI64> = (0..3).map(|_| AtomicI64::new(0)).collect();
    let read_value = |p: i64| -> i64 {
        let data = all(engine, t, &pk(p, b"r"));
        data.rows
            .first()
            .and_then(|(_, row)| value_of(row))
            .map_or(0, |v| i64::from_be_bytes(v.try_into().expect("8 bytes")))
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=300i64 {
                let p = i % 3;
                let mut u = update(t, pk(p, b"r"));
                u.rows = vec![(vec![0], insert(i, &i.to_be_bytes()))];
                engine
                    .apply_batch(&[u], Durability::Periodic)
                    .expect("apply");
                acked[p as usize].store(i, Ordering::SeqCst);
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for n in 0..600 {
                    let p = n % 3;
                    let floor = acked[p as usize].load(Ordering::SeqCst);
                    let seen = read_value(p);
                    assert!(
                        seen >= floor,
                        "partition {p}: read {seen} after {floor} was acked"
                    );
                }
            });
        }
    });
    for p in 0..3 {
        assert_eq!(read_value(p), acked[p as usize].load(Ordering::SeqCst));
    }
    // Truncate and compaction are seen by the next read too.
    engine.compact(Some(t)).expect("compact");
    assert_eq!(read_value(0), 300);
    engine.truncate_table(t).expect("truncate");
    assert_eq!(read_value(0), 0);
}

/// A deletion written long ago (1970): past any grace.
fn old_deletion(ts: i64) -> DeletionTime {
    deletion(ts)
}

/// A deletion written now: within any grace but zero.
fn recent_deletion(ts: i64) -> DeletionTime {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    DeletionTime {
        marked_for_delete_at: ts,
        local_deletion_time: u32::try_from(now).expect("before 2106"),
    }
}

fn row_deleted(d: DeletionTime) -> Row {
    Row {
        deletion: Some(d),
        ..Row::default()
    }
}

/// Data first, pushed to the bottom by a compaction; tombstones later, in a newer file: the
/// layout where a careless purge resurrects what the tombstone shadowed.
fn purge_fixture(engine: &dyn StorageEngine, t: TableId) {
    let rows = |ks: &[u8]| ks.iter().map(|&k| (vec![k], insert(10, b"old"))).collect();
    let mut data = Vec::new();
    for p in [b"a", b"b", b"c", b"d"] {
        let mut u = update(t, pk(7, p));
        u.rows = rows(&[1, 2, 3]);
        u.static_row = Some(Row {
            columns: vec![ColumnData::Simple {
                id: 9,
                cell: Cell::live(10, b"s".to_vec()),
            }],
            ..Row::default()
        });
        data.push(u);
    }
    engine.apply_batch(&data, Durability::Batch).expect("data");
    engine.flush(Some(t)).expect("flush");
    engine.compact(Some(t)).expect("compact");

    // a: row deletions (old at 1, recent at 2), an old cell tombstone over nothing at 4, a
    //    long-expired TTL cell at 5.
    let mut a = update(t, pk(7, b"a"));
    a.rows = vec![
        (vec![1], row_deleted(old_deletion(20))),
        (vec![2], row_deleted(recent_deletion(20))),
        (
            vec![4],
            Row {
                columns: vec![ColumnData::Simple {
                    id: 1,
                    cell: Cell::tombstone(20, 1_000),
                }],
                ..Row::default()
            },
        ),
        (
            vec![5],
            Row {
                columns: vec![ColumnData::Simple {
                    id: 1,
                    cell: Cell::expiring(
                        5,
                        b"gone".to_vec(),
                        mutation::Expiry {
                            ttl_seconds: 10,
                            local_expiration_time: 2_000,
                        },
                    ),
                }],
                ..Row::default()
            },
        ),
    ];
    // b: an old partition deletion; c: an old range tombstone over rows 1..=2; d: an old
    //    partition deletion and a row written after it.
    let mut b = update(t, pk(7, b"b"));
    b.header = Some(PartitionHeader {
        deletion: Some(old_deletion(20)),
        range_tombstones: vec![],
    });
    let mut c = update(t, pk(7, b"c"));
    c.header = Some(PartitionHeader {
        deletion: None,
        range_tombstones: vec![RangeTombstone {
            start: Some(ClusteringBound {
                prefix: vec![1],
                inclusive: true,
            }),
            end: Some(ClusteringBound {
                prefix: vec![2],
                inclusive: true,
            }),
            deletion: old_deletion(20),
        }],
    });
    let mut d = update(t, pk(7, b"d"));
    d.header = b.header.clone();
    d.rows = vec![(vec![3], insert(30, b"new"))];
    engine
        .apply_batch(&[a, b, c, d], Durability::Batch)
        .expect("tombstones");
    engine.flush(Some(t)).expect("flush");
}

fn keys_of(data: &PartitionData) -> Vec<u8> {
    data.rows.iter().map(|(k, _)| k[0]).collect()
}

pub fn compaction_purges_after_gc_grace(engine: &dyn StorageEngine) {
    let t = table(20);
    engine.create_table(t).expect("create");
    engine.set_gc_grace(t, 3600).expect("grace");
    purge_fixture(engine, t);
    engine.compact(Some(t)).expect("compact");

    let a = all(engine, t, &pk(7, b"a"));
    assert_eq!(
        keys_of(&a),
        vec![2, 3],
        "1 purged with its data, 4 and 5 purged: {a:?}"
    );
    assert_eq!(
        a.rows[0].1.deletion.map(|d| d.marked_for_delete_at),
        Some(20),
        "within grace: kept"
    );
    assert_eq!(value_of(&a.rows[1].1), Some(&b"old"[..]));

    let b = all(engine, t, &pk(7, b"b"));
    assert_eq!(b.header, PartitionHeader::default(), "{b:?}");
    assert!(b.rows.is_empty() && b.static_row.is_none(), "{b:?}");

    let c = all(engine, t, &pk(7, b"c"));
    assert_eq!(c.header, PartitionHeader::default(), "{c:?}");
    assert_eq!(keys_of(&c), vec![3]);
    assert_eq!(value_of(&c.rows[0].1), Some(&b"old"[..]));
    assert!(
        c.static_row.is_some(),
        "a range tombstone does not cover the static row"
    );

    let d = all(engine, t, &pk(7, b"d"));
    assert_eq!(d.header, PartitionHeader::default(), "{d:?}");
    assert_eq!(keys_of(&d), vec![3]);
    assert_eq!(
        d.rows[0].1,
        insert(30, b"new"),
        "newer than the deletion: untouched"
    );

    // Once purged, a write older than the tombstone is no longer shadowed (Cassandra's
    // contract: such a write must arrive within gc_grace).
    let mut late = update(t, pk(7, b"b"));
    late.rows = vec![(vec![1], insert(15, b"late"))];
    engine
        .apply_batch(&[late], Durability::Batch)
        .expect("late");
    let b = all(engine, t, &pk(7, b"b"));
    assert_eq!(b.rows, vec![(vec![1], insert(15, b"late"))]);
}

pub fn compaction_keeps_tombstones_without_grace(engine: &dyn StorageEngine) {
    // A table whose grace was never set purges nothing, however old.
    let t = table(21);
    engine.create_table(t).expect("create");
    purge_fixture(engine, t);
    let before: Vec<PartitionData> = [b"a", b"b", b"c", b"d"]
        .iter()
        .map(|p| all(engine, t, &pk(7, *p)))
        .collect();
    engine.compact(Some(t)).expect("compact");
    for (p, expected) in [b"a", b"b", b"c", b"d"].iter().zip(before) {
        assert_eq!(all(engine, t, &pk(7, *p)), expected);
    }
    let b = all(engine, t, &pk(7, b"b"));
    assert!(b.header.deletion.is_some());
    assert!(matches!(
        engine.set_gc_grace(table(4244), 0),
        Err(StorageError::UnknownTable(_))
    ));
}

/// A partition with everything a row and a header can hold: a static row, a partition
/// deletion older than its rows, range tombstones, a row deletion with what it shadows, a
/// collection written out of order with its own deletion, TTLs and tombstones.
fn rich_partition(t: TableId, key: PartitionKey) -> PartitionUpdate {
    let expiry = mutation::Expiry {
        ttl_seconds: 60,
        local_expiration_time: 2_000,
    };
    let collection = ColumnData::Complex {
        id: 3,
        deletion: Some(deletion(2)),
        cells: vec![
            (vec![9], Cell::live(5, b"late".to_vec())),
            (vec![1], Cell::expiring(5, b"ttl".to_vec(), expiry)),
            (vec![4], Cell::tombstone(5, 1_000)),
            (vec![2], Cell::live(1, b"shadowed".to_vec())),
        ],
    };
    let shadowing = Row {
        deletion: Some(deletion(4)),
        columns: vec![
            ColumnData::Simple {
                id: 2,
                cell: Cell::live(6, b"new".to_vec()),
            },
            ColumnData::Simple {
                id: 1,
                cell: Cell::live(3, b"old".to_vec()),
            },
        ],
        ..insert(3, b"gone")
    };
    PartitionUpdate {
        header: Some(PartitionHeader {
            deletion: Some(deletion(1)),
            range_tombstones: vec![RangeTombstone {
                start: Some(ClusteringBound {
                    prefix: vec![5],
                    inclusive: false,
                }),
                end: None,
                deletion: deletion(7),
            }],
        }),
        static_row: Some(Row {
            columns: vec![collection.clone()],
            ..Row::default()
        }),
        rows: vec![
            (vec![3], shadowing),
            (
                vec![1],
                Row {
                    columns: vec![collection],
                    ..insert(8, b"a")
                },
            ),
            (vec![6], insert(5, b"under a range tombstone")),
            (vec![2], insert(2, b"b")),
        ],
        ..update(t, key)
    }
}

/// `response` through the wire codec (`mutation::encode_read_response`): it must arrive as it
/// left, so a replica's page reads the same on the node that asked for it.
fn travels_unchanged(response: ReadResponse) {
    let mut bytes = Vec::new();
    mutation::encode_read_response(&response, &mut bytes);
    assert_eq!(mutation::decode_read_response(&bytes), Ok(response));
}

pub fn read_pages_travel_between_nodes_unchanged(engine: &dyn StorageEngine) {
    let t = table(22);
    engine.create_table(t).expect("create");
    let key = pk(11, b"rich");
    engine
        .apply_batch(&[rich_partition(t, key.clone())], Durability::Periodic)
        .expect("apply");
    // Rewritten on top of itself, flushed and not: fragments merged on the read.
    let again = PartitionUpdate {
        rows: vec![(vec![2], insert(9, b"b2"))],
        ..update(t, key.clone())
    };
    engine.flush(Some(t)).expect("flush");
    engine
        .apply_batch(&[again], Durability::Periodic)
        .expect("apply");
    let reversed = ClusteringSlice {
        reversed: true,
        ..ClusteringSlice::all()
    };
    for slice in [ClusteringSlice::all(), reversed] {
        for page_rows in [1, 2, usize::MAX] {
            let mut resume = None;
            for _ in 0..10 {
                let page = engine
                    .read_partition(t, &key, &slice, page_rows, resume.as_deref())
                    .expect("read");
                resume = page.resume.clone();
                travels_unchanged(ReadResponse::Partition(page));
                if resume.is_none() {
                    break;
                }
            }
            assert!(resume.is_none(), "paging did not finish");
        }
    }
    scan_fixture(engine, t);
    let mut start = ScanStart::Beginning;
    for _ in 0..20 {
        let page = engine.scan(t, start, None, 2).expect("scan");
        let resume = page.resume.clone();
        travels_unchanged(ReadResponse::Range(page));
        match resume {
            Some(r) => start = ScanStart::Resume(r),
            None => return,
        }
    }
    panic!("scan did not finish");
}

macro_rules! conformance {
    ($module:ident, $fixture:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            conformance!(@tests $fixture;
                writes_and_reads_back,
                last_write_wins_regardless_of_arrival_order,
                tombstones_are_returned,
                slices_match_the_model,
                partition_paging_loses_and_repeats_nothing,
                try_calls_match_or_would_block,
                scan_is_in_token_order_and_pages_exactly,
                scan_after_a_position_continues_there,
                apply_is_atomic_across_tables,
                apply_group_is_one_atomic_write,
                truncate_and_drop,
                metadata,
                maintenance_calls_succeed,
                concurrent_writers_converge,
                reads_see_every_acknowledged_write,
                table_stats_follow_writes_and_flushes,
                compaction_purges_after_gc_grace,
                compaction_keeps_tombstones_without_grace,
                read_pages_travel_between_nodes_unchanged,
            );
        }
    };
    (@tests $fixture:expr; $($test:ident,)*) => {
        $(
            #[test]
            fn $test() {
                let fixture = $fixture;
                super::$test(fixture.engine());
            }
        )*
    };
}

/// An engine plus whatever must outlive it (the RocksDB directory).
trait Fixture {
    fn engine(&self) -> &dyn StorageEngine;
}

impl Fixture for MemoryEngine {
    fn engine(&self) -> &dyn StorageEngine {
        self
    }
}

struct RocksFixture {
    engine: RocksEngine,
    _dir: tempfile::TempDir,
}

impl Fixture for RocksFixture {
    fn engine(&self) -> &dyn StorageEngine {
        &self.engine
    }
}

/// A small partition cache, so the conformance tests run through it; `rocks_uncached` runs
/// them again without it.
fn rocks_config(dir: &std::path::Path) -> RocksConfig {
    RocksConfig {
        data_dir: dir.join("data"),
        commit_log_dir: Some(dir.join("commitlog")),
        block_cache_bytes: 8 << 20,
        partition_cache_bytes: 1 << 20,
        commit_log_total_bytes: storage::DEFAULT_COMMIT_LOG_TOTAL_BYTES,
        commit_log_sync: Durability::Periodic,
        ignore_commit_log_replay_errors: false,
        max_open_data_files: 1000,
    }
}

/// A RocksDB in a temporary directory on the real disk (not tmpfs), so direct I/O is exercised
/// where the filesystem supports it.
fn rocks() -> RocksFixture {
    let dir = tempfile::Builder::new()
        .prefix("helenus-storage-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    let engine = RocksEngine::open(rocks_config(dir.path())).expect("open");
    RocksFixture { engine, _dir: dir }
}

fn rocks_uncached() -> RocksFixture {
    let dir = tempfile::Builder::new()
        .prefix("helenus-storage-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    let config = RocksConfig {
        partition_cache_bytes: 0,
        ..rocks_config(dir.path())
    };
    let engine = RocksEngine::open(config).expect("open");
    RocksFixture { engine, _dir: dir }
}

conformance!(memory, MemoryEngine::new());
conformance!(rocksdb, rocks());
conformance!(rocksdb_uncached, rocks_uncached());

#[test]
fn rocksdb_reopen_keeps_tables_data_and_metadata() {
    let dir = tempfile::Builder::new()
        .prefix("helenus-reopen-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    let t = table(20);
    let key = pk(99, b"durable");
    {
        let engine = RocksEngine::open(rocks_config(dir.path())).expect("open");
        engine.create_table(t).expect("create");
        engine.put_meta(b"host_id", b"abc").expect("meta");
        // The batch log's writes, unsynced (periodic mode): in the commit log, which a
        // process crash does not lose.
        engine
            .put_meta_with(b"batchlog/kept", b"k", Durability::Periodic)
            .expect("meta");
        engine
            .put_meta_with(b"batchlog/gone", b"g", Durability::Periodic)
            .expect("meta");
        engine
            .delete_meta_with(b"batchlog/gone", Durability::Periodic)
            .expect("meta");
        let mut u = update(t, key.clone());
        u.rows = vec![(vec![1], insert(1, b"flushed"))];
        engine
            .apply_batch(&[u], Durability::Periodic)
            .expect("apply");
        engine.flush(Some(t)).expect("flush");
        // Left in the memtable and commit log only: recovered by WAL replay.
        let mut u = update(t, key.clone());
        u.rows = vec![
            (vec![2], insert(1, b"in the commit log")),
            (vec![1], insert(2, b"newer")),
        ];
        engine.apply_batch(&[u], Durability::Batch).expect("apply");
    }
    let engine = RocksEngine::open(rocks_config(dir.path())).expect("reopen");
    assert_eq!(
        engine.get_meta(b"host_id").expect("meta"),
        Some(b"abc".to_vec())
    );
    assert_eq!(
        engine.scan_meta(b"batchlog/").expect("meta"),
        vec![(b"batchlog/kept".to_vec(), b"k".to_vec())]
    );
    engine.flush(Some(t)).expect("flush");
    // Nothing of the flushed file is cached yet: a cache-only read must not touch the disk,
    // and after a blocking read has cached its blocks it succeeds.
    let slice = ClusteringSlice::all();
    assert!(matches!(
        engine.try_read_partition(t, &key, &slice, 10, None),
        Err(StorageError::WouldBlock)
    ));
    let _ = all(&engine, t, &key);
    let cached = engine
        .try_read_partition(t, &key, &slice, usize::MAX, None)
        .expect("read from cache");
    assert_eq!(cached.data, all(&engine, t, &key));
    // A batch-mode write always needs a sync: never done on the caller's thread.
    assert!(matches!(
        engine.try_apply_batch(&[update(t, key.clone())], Durability::Batch),
        Err(StorageError::WouldBlock)
    ));
    let data = all(&engine, t, &key);
    assert_eq!(data.rows.len(), 2);
    assert_eq!(value_of(&data.rows[0].1), Some(&b"newer"[..]));
    assert_eq!(value_of(&data.rows[1].1), Some(&b"in the commit log"[..]));
    // New tables still work after reopen, and the reopened one accepts writes.
    engine.create_table(table(21)).expect("create");
    let mut u = update(t, key.clone());
    u.rows = vec![(vec![3], insert(1, b"after reopen"))];
    engine
        .apply_batch(&[u], Durability::Periodic)
        .expect("apply");
    assert_eq!(all(&engine, t, &key).rows.len(), 3);
}

#[test]
fn rocksdb_opens_on_tmpfs() {
    // tmpfs rejected O_DIRECT before Linux 6.6: the engine must start there either way (with
    // buffered I/O after a warning on older kernels). Skipped where /dev/shm does not exist.
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("helenus-tmpfs-")
        .tempdir_in(shm)
        .expect("tempdir");
    let engine = RocksEngine::open(rocks_config(dir.path())).expect("open on tmpfs");
    eprintln!("direct I/O on tmpfs: {}", engine.uses_direct_io());
    let t = table(30);
    engine.create_table(t).expect("create");
    let u = one_row(t, pk(1, b"x"), 1, b"v");
    engine
        .apply_batch(&[u], Durability::Periodic)
        .expect("apply");
    engine.flush(None).expect("flush");
    engine.compact(None).expect("compact");
    assert_eq!(all(&engine, t, &pk(1, b"x")).rows.len(), 1);
}

#[test]
fn rocksdb_uses_direct_io_on_a_real_disk() {
    let fixture = rocks();
    // Informational where the disk cannot do direct I/O; on ext4/xfs it must be on.
    eprintln!("direct I/O: {}", fixture.engine.uses_direct_io());
}

#[test]
fn rocksdb_metrics_count_reads_cache_and_bloom_filters() {
    let fixture = rocks_uncached();
    let engine = fixture.engine();
    let metric = |name: &str| -> u64 {
        let metrics = engine.metrics().expect("metrics");
        metrics
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no metric {name} in {metrics:?}"))
            .1
    };
    let t = table(20);
    engine.create_table(t).expect("create");
    for i in 0..100i64 {
        let u = one_row(t, pk(i * 1000, b"p"), 1, &[7u8; 100]);
        engine
            .apply_batch(&[u], Durability::Periodic)
            .expect("apply");
    }
    engine.flush(Some(t)).expect("flush");
    assert!(metric("flush_write_bytes") > 0);

    let reads_before = metric("partition_reads");
    let file_bytes_before = metric("file_read_bytes");
    assert_eq!(all(engine, t, &pk(5000, b"p")).rows.len(), 1);
    assert_eq!(metric("partition_reads"), reads_before + 1);
    assert!(
        metric("file_read_bytes") > file_bytes_before,
        "a cold read reads the file"
    );

    // The same read again is served from the block cache.
    let hits_before = metric("block_cache_hits");
    assert_eq!(all(engine, t, &pk(5000, b"p")).rows.len(), 1);
    assert!(metric("block_cache_hits") > hits_before);

    // Partitions that do not exist are answered by a bloom filter without reading data blocks.
    let useful = || {
        metric("bloom_prefix_useful") + metric("bloom_full_useful") + metric("bloom_seek_filtered")
    };
    let useful_before = useful();
    for i in 0..20i64 {
        assert!(all(engine, t, &pk(i * 1000 + 1, b"absent")).rows.is_empty());
    }
    assert!(
        useful() >= useful_before + 20,
        "every absent partition filtered"
    );
}
