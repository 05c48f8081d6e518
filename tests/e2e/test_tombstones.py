"""Tombstones: cell (DELETE col, SET col = null), row, range (clustering slices and prefixes,
multi-column bounds), partition, static columns, and collections (an overwrite of a non-frozen
collection deletes what was there before).

A tombstone at timestamp T hides every write of the data it covers with a timestamp <= T,
whether that write arrived before or after the tombstone; a write with a timestamp > T shows.
"""

import pytest
from cassandra import InvalidRequest

from util import new_table


@pytest.fixture
def kcvw(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, w int, PRIMARY KEY (k, c)") as t:
        yield t


@pytest.fixture
def kc1c2(cql, test_keyspace):
    """Clustering (c1, c2); `fill` puts c1, c2 in 0..3 into partition 1."""
    with new_table(cql, test_keyspace, "k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2)") as t:
        yield t


def rows(cql, query):
    return [tuple(r) for r in cql.execute(query)]


def fill(cql, table, k=1):
    insert = cql.prepare(f"INSERT INTO {table} (k, c1, c2, v) VALUES (?, ?, ?, 0)")
    for c1 in range(4):
        for c2 in range(4):
            cql.execute(insert, [k, c1, c2])


def remaining(cql, table, k=1):
    return rows(cql, f"SELECT c1, c2 FROM {table} WHERE k = {k}")


ALL_16 = [(c1, c2) for c1 in range(4) for c2 in range(4)]


# --- cell tombstones -----------------------------------------------------------------------------


def test_cell_tombstone_delete_column(cql, kcvw):
    cql.execute(f"INSERT INTO {kcvw} (k, c, v, w) VALUES (1, 1, 1, 1)")
    cql.execute(f"DELETE v FROM {kcvw} WHERE k = 1 AND c = 1")
    # The row stays (its INSERT row marker and w are live), v is gone and has no write time.
    assert rows(cql, f"SELECT c, v, w, writetime(v) FROM {kcvw} WHERE k = 1") == [(1, None, 1, None)]
    cql.execute(f"DELETE v, w FROM {kcvw} WHERE k = 1 AND c = 1")
    assert rows(cql, f"SELECT c, v, w FROM {kcvw} WHERE k = 1") == [(1, None, None)]


def test_cell_tombstone_from_null_values(cql, kcvw):
    # Writing null is writing a tombstone, with the statement's timestamp: older writes of the
    # same cell stay hidden, newer ones show.
    cql.execute(f"INSERT INTO {kcvw} (k, c, v, w) VALUES (1, 1, 1, 1) USING TIMESTAMP 10")
    cql.execute(f"UPDATE {kcvw} USING TIMESTAMP 20 SET v = null WHERE k = 1 AND c = 1")
    cql.execute(f"INSERT INTO {kcvw} (k, c, w) VALUES (1, 1, null) USING TIMESTAMP 20")
    cql.execute(f"UPDATE {kcvw} USING TIMESTAMP 15 SET v = 15, w = 15 WHERE k = 1 AND c = 1")
    assert rows(cql, f"SELECT v, w FROM {kcvw} WHERE k = 1") == [(None, None)]
    cql.execute(f"UPDATE {kcvw} USING TIMESTAMP 25 SET v = 25 WHERE k = 1 AND c = 1")
    assert rows(cql, f"SELECT v, w FROM {kcvw} WHERE k = 1") == [(25, None)]
    # A bound null is the same.
    update = cql.prepare(f"UPDATE {kcvw} USING TIMESTAMP 30 SET v = ? WHERE k = 1 AND c = 1")
    cql.execute(update, [None])
    assert rows(cql, f"SELECT v, w FROM {kcvw} WHERE k = 1") == [(None, None)]


# --- the covering rule, for every kind of tombstone ----------------------------------------------


@pytest.mark.parametrize(
    "delete, after_older, after_newer",
    [
        # kind: the tombstone; then the rows after an UPDATE of v at ts 15, then at ts 25.
        ("DELETE v FROM {t} USING TIMESTAMP 20 WHERE k = 1 AND c = 1",
         [(1, None, 1), (9, 9, 9)], [(1, 25, 1), (9, 9, 9)]),
        ("DELETE FROM {t} USING TIMESTAMP 20 WHERE k = 1 AND c = 1",
         [(9, 9, 9)], [(1, 25, None), (9, 9, 9)]),
        ("DELETE FROM {t} USING TIMESTAMP 20 WHERE k = 1 AND c > 0 AND c < 5",
         [(9, 9, 9)], [(1, 25, None), (9, 9, 9)]),
        ("DELETE FROM {t} USING TIMESTAMP 20 WHERE k = 1",
         [], [(1, 25, None)]),
    ],
    ids=["cell", "row", "range", "partition"],
)
def test_tombstone_hides_older_writes_only(cql, kcvw, delete, after_older, after_newer):
    cql.execute(f"INSERT INTO {kcvw} (k, c, v, w) VALUES (1, 1, 1, 1) USING TIMESTAMP 10")
    cql.execute(f"INSERT INTO {kcvw} (k, c, v, w) VALUES (1, 9, 9, 9) USING TIMESTAMP 10")
    cql.execute(delete.format(t=kcvw))
    select = f"SELECT c, v, w FROM {kcvw} WHERE k = 1"
    # Written after the tombstone arrived, but older than it: hidden.
    cql.execute(f"UPDATE {kcvw} USING TIMESTAMP 15 SET v = 15 WHERE k = 1 AND c = 1")
    assert rows(cql, select) == after_older
    # Newer than the tombstone: visible. The UPDATE brings back only v: the rest stays deleted.
    cql.execute(f"UPDATE {kcvw} USING TIMESTAMP 25 SET v = 25 WHERE k = 1 AND c = 1")
    assert rows(cql, select) == after_newer


# --- range tombstones ----------------------------------------------------------------------------

SINGLE_COLUMN_SLICES = [
    ("c < 3", [3, 4, 5, 6, 7, 8, 9]),
    ("c <= 3", [4, 5, 6, 7, 8, 9]),
    ("c > 6", [0, 1, 2, 3, 4, 5, 6]),
    ("c >= 6", [0, 1, 2, 3, 4, 5]),
    ("c > 2 AND c < 5", [0, 1, 2, 5, 6, 7, 8, 9]),
    ("c >= 2 AND c <= 5", [0, 1, 6, 7, 8, 9]),
    ("c > 2 AND c <= 5", [0, 1, 2, 6, 7, 8, 9]),
    ("c >= 2 AND c < 5", [0, 1, 5, 6, 7, 8, 9]),
    ("c >= 0", []),
    ("c IN (1, 3, 5)", [0, 2, 4, 6, 7, 8, 9]),  # three row tombstones
]


@pytest.mark.parametrize("order", ["ASC", "DESC"])
def test_range_tombstone_bounds(cql, test_keyspace, order):
    # Every slice on the last (here only) clustering column, inclusive and exclusive, one- and
    # two-sided, on both clustering orders; one partition per slice.
    schema = "k int, c int, v int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema, f"WITH CLUSTERING ORDER BY (c {order})") as t:
        insert = cql.prepare(f"INSERT INTO {t} (k, c, v) VALUES (?, ?, 0)")
        for k in range(len(SINGLE_COLUMN_SLICES)):
            for c in range(10):
                cql.execute(insert, [k, c])
        for k, (relation, _) in enumerate(SINGLE_COLUMN_SLICES):
            cql.execute(f"DELETE FROM {t} WHERE k = {k} AND {relation}")
        for k, (relation, expected) in enumerate(SINGLE_COLUMN_SLICES):
            got = [r.c for r in cql.execute(f"SELECT c FROM {t} WHERE k = {k}")]
            assert got == (expected if order == "ASC" else expected[::-1]), relation
            count = cql.execute(f"SELECT count(*) FROM {t} WHERE k = {k}").one()[0]
            assert count == len(expected), relation


def test_empty_range_delete_deletes_nothing(cql, kc1c2):
    fill(cql, kc1c2)
    cql.execute(f"DELETE FROM {kc1c2} WHERE k = 1 AND c1 > 2 AND c1 < 1")
    cql.execute(f"DELETE FROM {kc1c2} WHERE k = 1 AND c1 = 1 AND c2 > 1 AND c2 < 1")
    assert remaining(cql, kc1c2) == ALL_16


def check_deletions(cql, table, cases):
    """Fills one partition per (relation, deleted rows) case, deletes `relation` in it, and checks
    that exactly `deleted` went."""
    for k, (relation, _) in enumerate(cases):
        fill(cql, table, k)
        cql.execute(f"DELETE FROM {table} WHERE k = {k} AND {relation}")
    for k, (relation, deleted) in enumerate(cases):
        assert remaining(cql, table, k) == [p for p in ALL_16 if p not in deleted], relation


def test_range_tombstone_with_clustering_prefix(cql, kc1c2):
    check_deletions(cql, kc1c2, [
        ("c1 = 1", {(1, 0), (1, 1), (1, 2), (1, 3)}),  # a clustering prefix
        ("c1 = 1 AND c2 > 1", {(1, 2), (1, 3)}),
        ("c1 = 1 AND c2 <= 1", {(1, 0), (1, 1)}),
        ("c1 > 2", {(3, 0), (3, 1), (3, 2), (3, 3)}),  # a slice on a non-last column
        ("c1 <= 0", {(0, 0), (0, 1), (0, 2), (0, 3)}),
        ("c1 >= 1 AND c1 < 3", {(c1, c2) for c1 in (1, 2) for c2 in range(4)}),
        ("c1 IN (0, 2) AND c2 >= 3", {(0, 3), (2, 3)}),  # one slice per prefix
        ("c1 IN (1, 3)", {(c1, c2) for c1 in (1, 3) for c2 in range(4)}),
    ])


def test_range_tombstone_multi_column_bounds(cql, kc1c2):
    # Tuple relations compare (c1, c2) lexicographically, like the clustering order itself.
    check_deletions(cql, kc1c2, [
        ("(c1, c2) > (1, 2)", {p for p in ALL_16 if p > (1, 2)}),
        ("(c1, c2) <= (1, 2)", {p for p in ALL_16 if p <= (1, 2)}),
        ("(c1, c2) >= (1, 2) AND (c1, c2) < (2, 1)", {(1, 2), (1, 3), (2, 0)}),
        ("(c1) > (2)", {p for p in ALL_16 if p[0] > 2}),
        ("c1 = 2 AND (c2) > (1)", {(2, 2), (2, 3)}),
        ("(c1, c2) = (0, 0)", {(0, 0)}),
        ("(c1, c2) IN ((0, 1), (3, 2))", {(0, 1), (3, 2)}),
    ])


def test_overlapping_range_tombstones(cql, kcvw):
    # Where two range tombstones overlap, the newer one decides.
    cql.execute(f"DELETE FROM {kcvw} USING TIMESTAMP 20 WHERE k = 1 AND c >= 2 AND c <= 6")
    cql.execute(f"DELETE FROM {kcvw} USING TIMESTAMP 30 WHERE k = 1 AND c >= 4 AND c <= 8")
    insert = cql.prepare(f"INSERT INTO {kcvw} (k, c, v) VALUES (1, ?, 0) USING TIMESTAMP 25")
    for c in range(10):
        cql.execute(insert, [c])
    assert [r.c for r in cql.execute(f"SELECT c FROM {kcvw} WHERE k = 1")] == [0, 1, 2, 3, 9]


def test_invalid_range_deletions_refused(cql, test_keyspace):
    schema = "k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2)"
    with new_table(cql, test_keyspace, schema) as t:
        for where in (
            "k = 1 AND c2 = 2",  # c1 skipped
            "k = 1 AND c1 > 1 AND c2 = 2",  # after a slice nothing more
            "k > 1",  # partition key: = or IN only
            "c1 = 1",  # no partition key
        ):
            with pytest.raises(InvalidRequest):
                cql.execute(f"DELETE FROM {t} WHERE {where}")
        # Deleting given columns needs a whole row.
        for where in ("k = 1 AND c1 > 1", "k = 1 AND c1 = 1", "k = 1"):
            with pytest.raises(InvalidRequest):
                cql.execute(f"DELETE v FROM {t} WHERE {where}")


# --- static columns ------------------------------------------------------------------------------


@pytest.fixture
def kcs(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, s int STATIC, v int, PRIMARY KEY (k, c)") as t:
        yield t


def test_partition_tombstone_covers_static_column(cql, kcs):
    cql.execute(f"INSERT INTO {kcs} (k, c, s, v) VALUES (1, 1, 1, 1) USING TIMESTAMP 10")
    cql.execute(f"DELETE FROM {kcs} USING TIMESTAMP 20 WHERE k = 1")
    cql.execute(f"UPDATE {kcs} USING TIMESTAMP 15 SET s = 15 WHERE k = 1")
    assert rows(cql, f"SELECT * FROM {kcs} WHERE k = 1") == []
    cql.execute(f"UPDATE {kcs} USING TIMESTAMP 25 SET s = 25 WHERE k = 1")
    # A partition with only a static row reads as one row with null clustering columns.
    assert rows(cql, f"SELECT k, c, s, v FROM {kcs} WHERE k = 1") == [(1, None, 25, None)]


def test_row_and_range_tombstones_leave_static_row(cql, kcs):
    for k, where in enumerate(["c = 1", "c >= 0", "c IN (1, 2)"]):
        cql.execute(f"INSERT INTO {kcs} (k, c, s, v) VALUES ({k}, 1, {k}, 1)")
        cql.execute(f"INSERT INTO {kcs} (k, c, v) VALUES ({k}, 2, 2)")
        cql.execute(f"DELETE FROM {kcs} WHERE k = {k} AND c = 2")
        cql.execute(f"DELETE FROM {kcs} WHERE k = {k} AND {where}")
        # Every clustering row is gone; the static row is not, so the partition still reads
        # as one row, and counts as one.
        assert rows(cql, f"SELECT k, c, s, v FROM {kcs} WHERE k = {k}") == [(k, None, k, None)], where
        assert cql.execute(f"SELECT count(*) FROM {kcs} WHERE k = {k}").one()[0] == 1, where
        assert rows(cql, f"SELECT DISTINCT k, s FROM {kcs} WHERE k = {k}") == [(k, k)], where


def test_static_cell_tombstone(cql, kcs):
    cql.execute(f"INSERT INTO {kcs} (k, c, s, v) VALUES (1, 1, 1, 1)")
    cql.execute(f"DELETE s FROM {kcs} WHERE k = 1")
    assert rows(cql, f"SELECT k, c, s, v FROM {kcs} WHERE k = 1") == [(1, 1, None, 1)]
    # A DELETE or UPDATE of static columns only addresses the partition: no clustering key.
    with pytest.raises(InvalidRequest):
        cql.execute(f"DELETE s FROM {kcs} WHERE k = 1 AND c = 1")
    with pytest.raises(InvalidRequest):
        cql.execute(f"UPDATE {kcs} SET s = 2 WHERE k = 1 AND c = 1")
    assert rows(cql, f"SELECT k, c, s, v FROM {kcs} WHERE k = 1") == [(1, 1, None, 1)]


# --- collections ---------------------------------------------------------------------------------


@pytest.fixture
def colls(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, l list<int>, s set<int>, m map<int, int>") as t:
        yield t


def test_collection_overwrite_deletes_older_elements(cql, colls):
    # Setting a whole non-frozen collection at ts T writes a collection tombstone at T - 1 and
    # the new elements at T: elements added at T - 1 or before are hidden, at T they are not.
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 10 SET s = {{1, 2}}, m = {{1: 1}} WHERE k = 1")
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 9 SET s = s + {{3}}, m = m + {{3: 3}} WHERE k = 1")
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 10 SET s = s + {{4}}, m = m + {{4: 4}} WHERE k = 1")
    row = cql.execute(f"SELECT s, m FROM {colls} WHERE k = 1").one()
    assert (set(row.s), dict(row.m)) == ({1, 2, 4}, {1: 1, 4: 4})
    # INSERT does the same, and replaces rather than merges.
    cql.execute(f"INSERT INTO {colls} (k, l, s) VALUES (1, [7], {{7}}) USING TIMESTAMP 20")
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 19 SET l = l + [8] WHERE k = 1")
    row = cql.execute(f"SELECT l, s, m FROM {colls} WHERE k = 1").one()
    assert (row.l, set(row.s), dict(row.m)) == ([7], {7}, {1: 1, 4: 4})


def test_collection_deleted_whole(cql, colls):
    cql.execute(f"INSERT INTO {colls} (k, l, s, m) VALUES (1, [1], {{1}}, {{1: 1}}) USING TIMESTAMP 10")
    cql.execute(f"DELETE l FROM {colls} USING TIMESTAMP 20 WHERE k = 1")
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 20 SET s = null, m = {{}} WHERE k = 1")  # {} = null
    assert tuple(cql.execute(f"SELECT k, l, s, m FROM {colls} WHERE k = 1").one()) == (1, None, None, None)
    # Appends older than the deletion stay hidden; newer ones start a new collection.
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 15 SET l = l + [15], s = s + {{15}} WHERE k = 1")
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 25 SET l = l + [25], s = s + {{25}} WHERE k = 1")
    row = cql.execute(f"SELECT l, s FROM {colls} WHERE k = 1").one()
    assert (row.l, set(row.s)) == ([25], {25})


def test_collection_element_tombstones(cql, colls):
    cql.execute(f"INSERT INTO {colls} (k, s, m) VALUES (1, {{1, 2}}, {{1: 1, 2: 2, 3: 3}}) "
                "USING TIMESTAMP 10")
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 20 SET s = s - {{1}}, m = m - {{1}} WHERE k = 1")
    cql.execute(f"DELETE m[2] FROM {colls} USING TIMESTAMP 20 WHERE k = 1")
    # Re-adding an element older than its tombstone does nothing; newer, it shows again.
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 15 SET s = s + {{1}}, m = m + {{1: 15}} WHERE k = 1")
    row = cql.execute(f"SELECT s, m FROM {colls} WHERE k = 1").one()
    assert (set(row.s), dict(row.m)) == ({2}, {3: 3})
    cql.execute(f"UPDATE {colls} USING TIMESTAMP 25 SET m = m + {{2: 25}} WHERE k = 1")
    assert dict(cql.execute(f"SELECT m FROM {colls} WHERE k = 1").one().m) == {2: 25, 3: 3}
    # Removing the last element leaves a null collection, not an empty one.
    cql.execute(f"UPDATE {colls} SET s = s - {{2}} WHERE k = 1")
    assert cql.execute(f"SELECT s FROM {colls} WHERE k = 1").one().s is None
