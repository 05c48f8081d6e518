"""Row liveness: when does a row exist?

A row exists while it has a live row marker (Cassandra's primary key liveness info) or at least
one live cell. INSERT writes the marker, with the statement's timestamp and TTL; UPDATE and
DELETE never do. So a row made by INSERT survives the deletion of all its columns, a row made by
UPDATE vanishes with its last cell, and a marker expires with the INSERT's TTL independently of
the cells. A row deletion deletes the marker too. Static columns have no marker: a partition's
static row lives only through its cells. SELECT and count(*) must agree on all of this.
"""

import pytest
from cassandra.query import SimpleStatement

from util import new_table, wait_until

EXPIRY_TIMEOUT_S = 5  # a TTL of 1 s is gone within 2 s; leave room for a loaded machine


@pytest.fixture
def kvw(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int, w int") as t:
        yield t


def rows(cql, query):
    return [tuple(r) for r in cql.execute(query)]


def count(cql, table, where=""):
    return cql.execute(f"SELECT count(*) FROM {table} {where}").one()[0]


def test_insert_keeps_row_with_only_null_columns(cql, kvw):
    cql.execute(f"INSERT INTO {kvw} (k) VALUES (1)")
    cql.execute(f"INSERT INTO {kvw} (k, v, w) VALUES (2, null, null)")
    assert rows(cql, f"SELECT k, v, w FROM {kvw} WHERE k IN (1, 2)") == [(1, None, None), (2, None, None)]
    assert rows(cql, f"SELECT k FROM {kvw} WHERE k = 1") == [(1,)]
    assert count(cql, kvw) == 2


def test_update_writes_no_row_marker(cql, kvw):
    cql.execute(f"UPDATE {kvw} SET v = null WHERE k = 1")  # a tombstone only: no row
    cql.execute(f"UPDATE {kvw} SET v = 2, w = 2 WHERE k = 2")
    assert rows(cql, f"SELECT k, v, w FROM {kvw}") == [(2, 2, 2)]
    cql.execute(f"UPDATE {kvw} SET v = null, w = null WHERE k = 2")  # its last cells: gone
    assert rows(cql, f"SELECT k, v, w FROM {kvw}") == []
    assert rows(cql, f"SELECT k FROM {kvw} WHERE k = 2") == []
    assert count(cql, kvw) == 0


def test_deleting_all_columns(cql, kvw):
    cql.execute(f"INSERT INTO {kvw} (k, v, w) VALUES (1, 1, 1)")
    cql.execute(f"UPDATE {kvw} SET v = 2, w = 2 WHERE k = 2")
    cql.execute(f"DELETE v, w FROM {kvw} WHERE k IN (1, 2)")
    # The INSERT's marker keeps row 1; row 2 had nothing but its cells.
    assert rows(cql, f"SELECT k, v, w FROM {kvw}") == [(1, None, None)]
    assert count(cql, kvw) == 1


def test_empty_collection_writes_nothing_but_insert_marks_row(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, s set<int>") as t:
        cql.execute(f"UPDATE {t} SET s = {{}} WHERE k = 1")  # an empty collection is null
        cql.execute(f"INSERT INTO {t} (k, s) VALUES (2, {{}})")
        cql.execute(f"UPDATE {t} SET s = s + {{3}} WHERE k = 3")  # one element keeps row 3...
        assert rows(cql, f"SELECT k, s FROM {t}") == [(2, None), (3, {3})]
        cql.execute(f"DELETE s FROM {t} WHERE k = 3")  # ... until it is deleted
        assert rows(cql, f"SELECT k, s FROM {t}") == [(2, None)]


def test_clustering_rows_and_primary_key_only_tables(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as t:
        cql.execute(f"INSERT INTO {t} (k, c) VALUES (1, 1)")
        cql.execute(f"UPDATE {t} SET v = null WHERE k = 1 AND c = 2")
        cql.execute(f"UPDATE {t} SET v = 3 WHERE k = 1 AND c = 3")
        cql.execute(f"DELETE v FROM {t} WHERE k = 1 AND c = 3")
        assert rows(cql, f"SELECT c, v FROM {t} WHERE k = 1") == [(1, None)]
    # A table with no regular column: its rows are nothing but markers.
    with new_table(cql, test_keyspace, "k int, c int, PRIMARY KEY (k, c)") as t:
        for c in range(3):
            cql.execute(f"INSERT INTO {t} (k, c) VALUES (1, {c})")
        cql.execute(f"DELETE FROM {t} WHERE k = 1 AND c = 1")
        assert rows(cql, f"SELECT k, c FROM {t}") == [(1, 0), (1, 2)]
        assert count(cql, t, "WHERE k = 1") == 2


def test_row_deletion_removes_the_marker(cql, kvw):
    cql.execute(f"INSERT INTO {kvw} (k, v, w) VALUES (1, 1, 1) USING TIMESTAMP 10")
    cql.execute(f"DELETE FROM {kvw} USING TIMESTAMP 20 WHERE k = 1")
    cql.execute(f"UPDATE {kvw} USING TIMESTAMP 30 SET v = 3 WHERE k = 1")
    assert rows(cql, f"SELECT k, v, w FROM {kvw}") == [(1, 3, None)]
    # No marker survived the deletion, so the row goes with its last cell...
    cql.execute(f"UPDATE {kvw} USING TIMESTAMP 40 SET v = null WHERE k = 1")
    assert rows(cql, f"SELECT k, v, w FROM {kvw}") == []
    # ... and an INSERT newer than the deletion brings a marker back.
    cql.execute(f"INSERT INTO {kvw} (k) VALUES (1) USING TIMESTAMP 50")
    assert rows(cql, f"SELECT k, v, w FROM {kvw}") == [(1, None, None)]


def test_expired_marker_leaves_row_to_its_other_cells(cql, kvw):
    # The INSERT's marker and cells expire; cells an UPDATE wrote without a TTL do not. (TTL 2:
    # with TTL 1 a count that crosses into the next second already misses row 3.)
    cql.execute(f"INSERT INTO {kvw} (k, v) VALUES (1, 1) USING TTL 2")
    cql.execute(f"UPDATE {kvw} SET w = 1 WHERE k = 1")
    cql.execute(f"INSERT INTO {kvw} (k, v, w) VALUES (2, 2, 2) USING TTL 2")
    cql.execute(f"UPDATE {kvw} SET v = 2 WHERE k = 2")
    cql.execute(f"INSERT INTO {kvw} (k) VALUES (3) USING TTL 2")
    assert count(cql, kvw) == 3
    wait_until(lambda: cql.execute(f"SELECT * FROM {kvw} WHERE k = 3").one() is None,
               EXPIRY_TIMEOUT_S, "row with TTL 2 expires")
    assert sorted(rows(cql, f"SELECT k, v, w FROM {kvw}")) == [(1, None, 1), (2, 2, None)]
    assert count(cql, kvw) == 2


def test_marker_outlives_cells_with_shorter_ttl(cql, kvw):
    cql.execute(f"INSERT INTO {kvw} (k, v) VALUES (1, 1) USING TTL 100")
    cql.execute(f"UPDATE {kvw} USING TTL 1 SET v = 1 WHERE k = 1")  # marker: 100 s, cell: 1 s
    cql.execute(f"INSERT INTO {kvw} (k, v) VALUES (2, 2)")
    cql.execute(f"UPDATE {kvw} USING TTL 1 SET v = 2 WHERE k = 2")  # marker: forever
    cql.execute(f"UPDATE {kvw} USING TTL 1 SET v = 3 WHERE k = 3")  # no marker at all
    cql.execute(f"INSERT INTO {kvw} (k, v) VALUES (4, 4) USING TTL 1")
    cql.execute(f"UPDATE {kvw} USING TTL 100 SET v = 4 WHERE k = 4")  # marker: 1 s, cell: 100 s
    wait_until(lambda: cql.execute(f"SELECT * FROM {kvw} WHERE k = 3").one() is None,
               EXPIRY_TIMEOUT_S, "row with TTL 1 expires")
    assert sorted(rows(cql, f"SELECT k, v FROM {kvw}")) == [(1, None), (2, None), (4, 4)]
    assert count(cql, kvw) == 3


def test_static_row_has_no_marker(cql, test_keyspace):
    schema = "k int, c int, s int STATIC, v int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        select = f"SELECT k, c, s, v FROM {t} WHERE k = 1"
        cql.execute(f"UPDATE {t} SET s = 1 WHERE k = 1")
        assert rows(cql, select) == [(1, None, 1, None)]  # a static row alone is a result row
        cql.execute(f"UPDATE {t} SET s = null WHERE k = 1")
        assert rows(cql, select) == []
        cql.execute(f"INSERT INTO {t} (k, s) VALUES (1, 1)")  # even INSERT: still no marker
        cql.execute(f"DELETE s FROM {t} WHERE k = 1")
        assert rows(cql, select) == []
        cql.execute(f"INSERT INTO {t} (k, c, s) VALUES (1, 1, 1)")  # the clustering row's marker
        cql.execute(f"DELETE s FROM {t} WHERE k = 1")
        assert rows(cql, select) == [(1, 1, None, None)]
        assert count(cql, t) == 1


def test_count_agrees_with_select(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, w int, PRIMARY KEY (k, c)") as t:
        cql.execute(f"INSERT INTO {t} (k, c) VALUES (1, 0)")  # marker only
        cql.execute(f"INSERT INTO {t} (k, c, v, w) VALUES (1, 1, 1, 1)")
        cql.execute(f"DELETE v, w FROM {t} WHERE k = 1 AND c = 1")  # marker, no cells
        cql.execute(f"UPDATE {t} SET v = 2 WHERE k = 1 AND c = 2")  # one cell, no marker
        cql.execute(f"UPDATE {t} SET v = 3 WHERE k = 1 AND c = 3")
        cql.execute(f"UPDATE {t} SET v = null WHERE k = 1 AND c = 3")  # nothing left
        cql.execute(f"INSERT INTO {t} (k, c, w) VALUES (1, 4, 4)")
        cql.execute(f"DELETE FROM {t} WHERE k = 1 AND c = 4")  # row deleted
        cql.execute(f"UPDATE {t} SET w = 5 WHERE k = 2 AND c = 5")  # another partition
        assert rows(cql, f"SELECT c, v, w FROM {t} WHERE k = 1") == [
            (0, None, None), (1, None, None), (2, 2, None)]
        assert count(cql, t, "WHERE k = 1") == 3
        assert count(cql, t) == 4
        paged = SimpleStatement(f"SELECT c FROM {t}", fetch_size=1)
        assert len(list(cql.execute(paged))) == 4


def test_count_of_a_column_counts_its_values(cql, kvw):
    # count(*) counts live rows; count(v) only those where v is not null.
    cql.execute(f"INSERT INTO {kvw} (k) VALUES (1)")
    cql.execute(f"INSERT INTO {kvw} (k, v) VALUES (2, 2)")
    cql.execute(f"UPDATE {kvw} SET w = 3 WHERE k = 3")
    assert tuple(cql.execute(f"SELECT count(*), count(v), count(w) FROM {kvw}").one()) == (3, 1, 1)
