"""ORDER BY with IN on the partition key: Cassandra reads each partition in the asked order and
then sorts the rows of all of them on the ORDER BY columns (post-query ordering). It cannot page
such a query: with paging on (the driver's default) it answers INVALID, so these tests turn
paging off. LIMIT applies after the sort, PER PARTITION LIMIT before it. Also: ORDER BY may
leave out leading clustering columns restricted to one value."""

import pytest
from cassandra import InvalidRequest
from cassandra.query import SimpleStatement

from util import new_table

PAGING_ERROR = ("Cannot page queries with both ORDER BY and a IN restriction on the partition "
                "key; you must either remove the ORDER BY or the IN and sort client side, or "
                "disable paging for this query")


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    """Partition 1: c = 1, 3; partition 2: c = 2, 4; partition 3: c = 0."""
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as name:
        for k, c in [(1, 1), (1, 3), (2, 2), (2, 4), (3, 0)]:
            cql.execute(f"INSERT INTO {name} (k, c, v) VALUES ({k}, {c}, {10 * k + c})")
        yield name


@pytest.fixture(scope="module")
def t2(cql, test_keyspace):
    """Two clustering columns: (1, 1, 2), (1, 2, 1), (2, 1, 1), (2, 1, 3)."""
    schema = "k int, c1 int, c2 int, v int, PRIMARY KEY (k, c1, c2)"
    with new_table(cql, test_keyspace, schema) as name:
        for k, c1, c2 in [(1, 1, 2), (1, 2, 1), (2, 1, 1), (2, 1, 3)]:
            cql.execute(f"INSERT INTO {name} (k, c1, c2, v) VALUES ({k}, {c1}, {c2}, 0)")
        yield name


def unpaged(cql, query, parameters=None):
    return [tuple(r) for r in cql.execute(SimpleStatement(query, fetch_size=None), parameters)]


def test_rows_of_all_partitions_are_sorted(cql, t):
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (1, 2) ORDER BY c") == [
        (1, 1), (2, 2), (1, 3), (2, 4)]
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (2, 1, 3) ORDER BY c DESC") == [
        (2, 4), (1, 3), (2, 2), (1, 1), (3, 0)]


def test_ordering_column_need_not_be_selected(cql, t):
    assert unpaged(cql, f"SELECT v FROM {t} WHERE k IN (1, 2) ORDER BY c DESC") == [
        (24,), (13,), (22,), (11,)]
    assert unpaged(cql, f"SELECT k, c AS x FROM {t} WHERE k IN (1, 2) ORDER BY c") == [
        (1, 1), (2, 2), (1, 3), (2, 4)]


def test_limit_after_sort_and_per_partition_limit_before(cql, t):
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (1, 2) ORDER BY c DESC LIMIT 1") == [
        (2, 4)]
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (1, 2) ORDER BY c LIMIT 3") == [
        (1, 1), (2, 2), (1, 3)]
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (1, 2) ORDER BY c DESC "
                   "PER PARTITION LIMIT 1") == [(2, 4), (1, 3)]


def test_with_clustering_restrictions_and_filtering(cql, t):
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (1, 2) AND c > 1 ORDER BY c DESC") == [
        (2, 4), (1, 3), (2, 2)]
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (1, 2) AND c IN (1, 2, 4) "
                   "ORDER BY c DESC") == [(2, 4), (2, 2), (1, 1)]
    assert unpaged(cql, f"SELECT k, c FROM {t} WHERE k IN (1, 2) AND v > 12 ORDER BY c "
                   "ALLOW FILTERING") == [(2, 2), (1, 3), (2, 4)]


def test_json_and_bound_in(cql, t):
    assert unpaged(cql, f"SELECT JSON k, c FROM {t} WHERE k IN (1, 2) ORDER BY c DESC LIMIT 2") == [
        ('{"k": 2, "c": 4}',), ('{"k": 1, "c": 3}',)]
    prepared = cql.prepare(f"SELECT k, c FROM {t} WHERE k IN ? ORDER BY c DESC")
    prepared.fetch_size = None
    assert [tuple(r) for r in cql.execute(prepared, [[1, 2]])] == [(2, 4), (1, 3), (2, 2), (1, 1)]


def test_aggregates_and_groups(cql, t):
    assert unpaged(cql, f"SELECT count(*) FROM {t} WHERE k IN (1, 2) ORDER BY c") == [(4,)]
    # Groups sort on their first row's column.
    assert unpaged(cql, f"SELECT k, max(c) FROM {t} WHERE k IN (1, 2) GROUP BY k "
                   "ORDER BY c DESC") == [(2, 4), (1, 3)]


def test_two_ordering_columns(cql, t2):
    assert unpaged(cql, f"SELECT k, c1, c2 FROM {t2} WHERE k IN (1, 2) ORDER BY c1, c2") == [
        (2, 1, 1), (1, 1, 2), (2, 1, 3), (1, 2, 1)]
    assert unpaged(cql, f"SELECT k, c1, c2 FROM {t2} WHERE k IN (1, 2) "
                   "ORDER BY c1 DESC, c2 DESC") == [(1, 2, 1), (2, 1, 3), (1, 1, 2), (2, 1, 1)]


def test_order_by_leaving_out_a_column_restricted_to_one_value(cql, t2):
    assert unpaged(cql, f"SELECT k, c1, c2 FROM {t2} WHERE k IN (1, 2) AND c1 = 1 "
                   "ORDER BY c2 DESC") == [(2, 1, 3), (1, 1, 2), (2, 1, 1)]
    assert unpaged(cql, f"SELECT c2 FROM {t2} WHERE k = 2 AND c1 = 1 ORDER BY c2 DESC") == [
        (3,), (1,)]
    for where in ["c1 IN (1, 2)", "c1 > 0"]:
        with pytest.raises(InvalidRequest, match="Order by currently only supports the ordering "
                           "of columns following their declared order in the PRIMARY KEY"):
            cql.execute(f"SELECT c2 FROM {t2} WHERE k = 2 AND {where} ORDER BY c2 DESC")


@pytest.mark.parametrize("query", [
    "SELECT k, c FROM {t} WHERE k IN (1, 2) ORDER BY c",
    "SELECT k, c FROM {t} WHERE k IN (1, 1) ORDER BY c DESC",
    "SELECT count(*) FROM {t} WHERE k IN (1, 2) ORDER BY c",
    "SELECT k, c FROM {t} WHERE k IN (1, 2) ORDER BY c LIMIT 1",
])
def test_cannot_page(cql, t, query):
    with pytest.raises(InvalidRequest, match=PAGING_ERROR.replace("(", "\\(")):
        cql.execute(SimpleStatement(query.format(t=t), fetch_size=100))


def test_in_of_one_value_is_an_equality(cql, t):
    # No post-query ordering, so paging is fine.
    rows = cql.execute(SimpleStatement(f"SELECT c FROM {t} WHERE k IN (1) ORDER BY c DESC",
                                       fetch_size=1))
    assert [r.c for r in rows] == [3, 1]


def test_order_by_needs_the_partition_key(cql, t):
    with pytest.raises(InvalidRequest, match="ORDER BY is only supported when the partition key "
                       "is restricted by an EQ or an IN"):
        cql.execute(f"SELECT k, c FROM {t} ORDER BY c")
    with pytest.raises(InvalidRequest, match="SELECT DISTINCT queries must only request "
                       "partition key columns"):
        cql.execute(SimpleStatement(f"SELECT DISTINCT k FROM {t} WHERE k IN (1, 2) ORDER BY c",
                                    fetch_size=None))


@pytest.mark.parametrize("where, values", [
    ("k = ? AND c IN ? ORDER BY d DESC", [0, [1]]),
    ("k = ? AND (c, d) IN ? ORDER BY e DESC", [0, [(1, 1)]]),
])
def test_a_bound_in_on_a_clustering_column_is_an_in_for_order_by(cql, test_keyspace, where, values):
    """ORDER BY may leave out a clustering column restricted to one value: `=` or a literal
    `IN (x)`, not `IN ?`, which Cassandra takes for an IN whatever is bound (it decides at
    PREPARE). Before, Helenus accepted `IN ?` bound to one value."""
    schema = "k int, c int, d int, e int, PRIMARY KEY (k, c, d, e)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, c, d, e) VALUES (0, 1, 1, 1)")
        message = "Order by currently only supports the ordering of columns following their declared order"
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(cql.prepare(f"SELECT * FROM {t} WHERE {where}"), values)
        literal = where.replace("c IN ?", "c IN (1)").replace("(c, d) IN ?", "(c, d) IN ((1, 1))")
        assert len(list(cql.execute(cql.prepare(f"SELECT * FROM {t} WHERE {literal}"), [0]))) == 1
