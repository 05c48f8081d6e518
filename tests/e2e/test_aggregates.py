"""Aggregates and GROUP BY: count, min, max, sum and avg over every type Cassandra 5.0 defines
them for (with its result types, its Java arithmetic and its answers on no rows), aggregates
mixed with plain columns, aggregates over many internal pages, and GROUP BY on a prefix of the
primary key with LIMIT, PER PARTITION LIMIT, ORDER BY and paging."""

import datetime
import uuid
from decimal import Decimal

import pytest
from cassandra import InvalidRequest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import SimpleStatement

from util import new_table, new_type


@pytest.fixture(scope="module")
def nums(cql, test_keyspace):
    """Partition 1 holds three rows of numbers (row 3 mostly null), partition 2 one row."""
    schema = ("k int, c int, v int, b bigint, f float, d double, dec decimal, vi varint, "
              "ti tinyint, si smallint, txt text, ts timestamp, PRIMARY KEY (k, c)")
    with new_table(cql, test_keyspace, schema) as name:
        cql.execute(f"INSERT INTO {name} (k, c, v, b, f, d, dec, vi, ti, si, txt, ts) VALUES "
                    "(1, 1, 1, 10, 1.5, 2.5, 1.1, 100, 1, 2, 'a', '2020-01-02 00:00:00+0000')")
        cql.execute(f"INSERT INTO {name} (k, c, v, b, f, d, dec, vi, ti, si, txt) VALUES "
                    "(1, 2, 2, 20, 2.5, 3.5, 2.2, 200, 2, 3, 'b')")
        cql.execute(f"INSERT INTO {name} (k, c, v) VALUES (1, 3, 4)")
        cql.execute(f"INSERT INTO {name} (k, c, v) VALUES (2, 1, 7)")
        yield name


@pytest.fixture(scope="module")
def grouped(cql, test_keyspace):
    """Partition key (a, b), clustering (c, d), a static column; partition (3, 3) has only its
    static row."""
    schema = "a int, b int, c int, d int, s int static, v int, PRIMARY KEY ((a, b), c, d)"
    with new_table(cql, test_keyspace, schema) as name:
        for a, b, c, d, v in [(1, 1, 1, 1, 10), (1, 1, 1, 2, 11), (1, 1, 2, 1, 12),
                              (1, 2, 1, 1, 13), (2, 1, 1, 1, 14)]:
            cql.execute(f"INSERT INTO {name} (a, b, c, d, v) VALUES ({a}, {b}, {c}, {d}, {v})")
        cql.execute(f"UPDATE {name} SET s = 100 WHERE a = 1 AND b = 1")
        cql.execute(f"INSERT INTO {name} (a, b, s) VALUES (3, 3, 300)")
        yield name


def one(cql, query):
    rs = cql.execute(query)
    return rs.column_names, [t.cql_parameterized_type() for t in rs.column_types], rs.one()


def all_pages(cql, query, fetch_size):
    """Every row of every page, and the largest page."""
    rs = cql.execute(SimpleStatement(query, fetch_size=fetch_size))
    pages = [list(rs.current_rows)]
    while rs.has_more_pages:
        rs.fetch_next_page()
        pages.append(list(rs.current_rows))
    return [tuple(r) for page in pages for r in page], max(len(p) for p in pages)


# --- count -------------------------------------------------------------------------------------


def test_count_rows_and_values(cql, nums):
    # count(*) and count(<literal>) count rows; count(x) rows where x is not null.
    names, types, row = one(cql, f"SELECT count(*), count(1), count(v), count(b), count(txt), "
                            f"count(k) FROM {nums}")
    assert names == ["count", "count", "system.count(v)", "system.count(b)", "system.count(txt)",
                     "system.count(k)"]
    assert types == ["bigint"] * 6
    assert row == (4, 4, 4, 2, 2, 4)


def test_count_names_and_aliases(cql, nums):
    names, _, row = one(cql, f"SELECT COUNT(*) AS n, Count(v), count(null) FROM {nums}")
    assert names == ["n", "system.count(v)", "system.count(NULL)"]
    assert row == (4, 4, 0)


def test_count_of_a_partition_and_a_slice(cql, nums):
    assert cql.execute(f"SELECT count(*) FROM {nums} WHERE k = 1").one()[0] == 3
    assert cql.execute(f"SELECT count(*) FROM {nums} WHERE k = 1 AND c > 1").one()[0] == 2
    assert cql.execute(f"SELECT count(*) FROM {nums} WHERE k IN (1, 2)").one()[0] == 4
    assert cql.execute(f"SELECT count(*) FROM {nums} WHERE v > 1 ALLOW FILTERING").one()[0] == 3


# --- no rows -----------------------------------------------------------------------------------


def test_aggregates_of_no_rows(cql, nums):
    # One row even with no input: counts are 0, min and max null, sums and averages zero.
    names, types, row = one(cql, f"SELECT count(*), min(v), max(v), sum(v), avg(v), sum(dec), "
                            f"avg(dec), avg(d), sum(f), sum(vi) FROM {nums} WHERE k = 99")
    assert types == ["bigint", "int", "int", "int", "int", "decimal", "decimal", "double",
                     "float", "varint"]
    assert row == (0, None, None, 0, 0, Decimal(0), Decimal(0), 0.0, 0.0, 0)


def test_plain_columns_of_no_rows_are_null(cql, nums):
    assert one(cql, f"SELECT k, count(*), v FROM {nums} WHERE k = 99")[2] == (None, 0, None)


def test_sum_and_avg_ignore_nulls(cql, nums):
    # Row (1, 3) has no b: the average is over the two values present.
    assert one(cql, f"SELECT sum(b), avg(b) FROM {nums} WHERE k = 1")[2] == (30, 15)
    assert one(cql, f"SELECT sum(b), avg(b) FROM {nums} WHERE k = 1 AND c = 3")[2] == (0, 0)


# --- sum and avg over every numeric type -------------------------------------------------------


def test_sum_and_avg_keep_the_argument_type(cql, nums):
    names, types, row = one(cql, f"SELECT sum(v), avg(v), sum(b), avg(b), sum(ti), avg(ti), "
                            f"sum(si), avg(si), sum(vi), avg(vi) FROM {nums}")
    assert names[:2] == ["system.sum(v)", "system.avg(v)"]
    assert types == ["int", "int", "bigint", "bigint", "tinyint", "tinyint", "smallint",
                     "smallint", "varint", "varint"]
    # Integer averages divide and truncate: (1 + 2 + 4 + 7) / 4 = 3.
    assert row == (14, 3, 30, 15, 3, 1, 5, 2, 300, 150)


def test_sum_and_avg_of_floating_point(cql, nums):
    _, types, row = one(cql, f"SELECT sum(f), avg(f), sum(d), avg(d) FROM {nums}")
    assert types == ["float", "float", "double", "double"]
    assert row == (4.0, 2.0, 6.0, 3.0)


def test_sum_and_avg_of_decimals_are_exact(cql, nums):
    # Cassandra averages decimals as a running mean rounded half-even at each step, keeping
    # the scale: 1.1 + (2.2 - 1.1) / 2 = 1.1 + 0.6 (0.55 at scale 1) = 1.7.
    _, types, row = one(cql, f"SELECT sum(dec), avg(dec) FROM {nums}")
    assert types == ["decimal", "decimal"]
    assert row == (Decimal("3.3"), Decimal("1.7"))


def test_integer_sums_wrap_as_java_does(cql, test_keyspace):
    # sum keeps the argument type and overflows like Java's int arithmetic; avg sums in 64
    # bits (and beyond) so it does not overflow.
    with new_table(cql, test_keyspace, "k int, c int, v int, b bigint, t tinyint, "
                   "PRIMARY KEY (k, c)") as table:
        cql.execute(f"INSERT INTO {table} (k, c, v, b, t) VALUES (1, 1, 2147483647, "
                    "9223372036854775807, 127)")
        cql.execute(f"INSERT INTO {table} (k, c, v, b, t) VALUES (1, 2, 2147483647, "
                    "9223372036854775807, 127)")
        row = one(cql, f"SELECT sum(v), avg(v), avg(b), sum(t), avg(t) FROM {table}")[2]
        assert row == (-2, 2147483647, 9223372036854775807, -2, 127)


def test_floating_point_sums_are_compensated(cql, test_keyspace):
    # Kahan summation: ten 0.1s sum to exactly 1.0 (a naive sum gives 0.9999999999999999).
    with new_table(cql, test_keyspace, "k int, c int, d double, PRIMARY KEY (k, c)") as table:
        for c in range(10):
            cql.execute(f"INSERT INTO {table} (k, c, d) VALUES (1, {c}, 0.1)")
        assert one(cql, f"SELECT sum(d) FROM {table}")[2] == (1.0,)


def test_sum_and_avg_of_varint_and_big_decimals(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, vi varint, dec decimal, "
                   "PRIMARY KEY (k, c)") as table:
        cql.execute(f"INSERT INTO {table} (k, c, vi, dec) VALUES (1, 1, "
                    "123456789012345678901234567890, 0.001)")
        cql.execute(f"INSERT INTO {table} (k, c, vi, dec) VALUES (1, 2, 1, 1000)")
        cql.execute(f"INSERT INTO {table} (k, c, vi, dec) VALUES (1, 3, 2, -0.5)")
        row = one(cql, f"SELECT sum(vi), avg(vi), sum(dec), avg(dec) FROM {table}")[2]
        assert row == (123456789012345678901234567893, 41152263004115226300411522631,
                       Decimal("999.501"), Decimal("333.167"))


def test_sum_and_avg_need_numbers(cql, nums):
    with pytest.raises(InvalidRequest, match="Invalid call to function avg, none of its type "
                       "signatures match"):
        cql.execute(f"SELECT avg(txt) FROM {nums}")
    # A timestamp is value-compatible with both bigint and varint.
    with pytest.raises(InvalidRequest, match="Ambiguous call to function sum"):
        cql.execute(f"SELECT sum(ts) FROM {nums}")
    with pytest.raises(InvalidRequest, match="none of its type signatures match"):
        cql.execute(f"SELECT sum(v, b) FROM {nums}")


# --- min and max -------------------------------------------------------------------------------


def test_min_and_max_of_numbers(cql, nums):
    names, types, row = one(cql, f"SELECT min(v), max(v), min(b), max(b), min(dec), max(dec), "
                            f"min(f), max(d), max(k), min(c) FROM {nums}")
    assert names[:2] == ["system.min(v)", "system.max(v)"]
    assert types == ["int", "int", "bigint", "bigint", "decimal", "decimal", "float", "double",
                     "int", "int"]
    assert row == (1, 7, 10, 20, Decimal("1.1"), Decimal("2.2"), 1.5, 3.5, 2, 1)


def test_min_and_max_of_other_types(cql, test_keyspace):
    # Values compare in their type's order: text by bytes, blobs unsigned, inets by bytes,
    # dates and times chronologically, booleans false < true.
    schema = ("k int, c int, t text, bl blob, ip inet, dt date, tm time, bo boolean, u uuid, "
              "PRIMARY KEY (k, c)")
    with new_table(cql, test_keyspace, schema) as table:
        cql.execute(f"INSERT INTO {table} (k, c, t, bl, ip, dt, tm, bo, u) VALUES (1, 1, 'b', "
                    "0x80, '10.0.0.2', '2020-01-02', '10:00:00', true, "
                    "00000000-0000-4000-8000-000000000002)")
        cql.execute(f"INSERT INTO {table} (k, c, t, bl, ip, dt, tm, bo, u) VALUES (1, 2, 'ab', "
                    "0x7f, '10.0.0.10', '1999-12-31', '09:00:00', false, "
                    "00000000-0000-4000-8000-000000000001)")
        _, types, row = one(cql, f"SELECT min(t), max(t), min(bl), max(bl), min(ip), max(ip), "
                            f"min(dt), max(dt), min(tm), max(bo), min(u) FROM {table}")
        assert types == ["varchar", "varchar", "blob", "blob", "inet", "inet", "date", "date",
                         "time", "boolean", "uuid"]
        assert row[:6] == ("ab", "b", b"\x7f", b"\x80", "10.0.0.2", "10.0.0.10")
        assert row[6].date() == datetime.date(1999, 12, 31)
        assert row[7].date() == datetime.date(2020, 1, 2)
        assert row[8].nanosecond_time == 9 * 3600 * 10**9
        assert row[9] is True
        assert row[10] == uuid.UUID("00000000-0000-4000-8000-000000000001")


def test_min_and_max_of_collections_tuples_and_udts(cql, test_keyspace):
    with new_type(cql, test_keyspace, "a int") as udt:
        schema = f"k int, c int, s set<int>, fm frozen<map<int, text>>, tup tuple<int, text>, " \
                 f"fu frozen<{udt}>, PRIMARY KEY (k, c)"
        with new_table(cql, test_keyspace, schema) as table:
            cql.execute(f"INSERT INTO {table} (k, c, s, fm, tup, fu) VALUES "
                        "(1, 1, {1, 2}, {1: 'a'}, (2, 'x'), {a: 5})")
            cql.execute(f"INSERT INTO {table} (k, c, s, fm, tup, fu) VALUES "
                        "(1, 2, {1, 3}, {0: 'z'}, (1, 'y'), {a: 6})")
            row = one(cql, f"SELECT max(s), min(fm), min(tup), max(fu) FROM {table}")[2]
            assert set(row[0]) == {1, 3}
            assert dict(row[1]) == {0: "z"}
            assert row[2] == (1, "y")
            assert row[3].a == 6


# --- aggregates with functions and plain columns -----------------------------------------------


def test_aggregates_of_functions_and_functions_of_aggregates(cql, nums):
    names, types, row = one(cql, f"SELECT max(intAsBlob(v)), CAST(max(v) AS text), "
                            f"max(CAST(v AS text)), intAsBlob(max(v)) FROM {nums}")
    assert names == ["system.max(system.intasblob(v))", "cast(system.max(v) as text)",
                     "system.max(cast(v as text))", "system.intasblob(system.max(v))"]
    assert types == ["blob", "varchar", "varchar", "blob"]
    assert row == (b"\x00\x00\x00\x07", "7", "7", b"\x00\x00\x00\x07")


def test_aggregates_cannot_nest(cql, nums):
    with pytest.raises(InvalidRequest, match="aggregate functions cannot be used as arguments of "
                       "aggregate functions"):
        cql.execute(f"SELECT max(max(v)) FROM {nums}")


def test_plain_columns_take_the_first_rows_values(cql, nums):
    # Without GROUP BY, plain columns next to aggregates show the first row read.
    assert one(cql, f"SELECT k, c, v, count(*) FROM {nums} WHERE k = 1")[2] == (1, 1, 1, 3)
    row = one(cql, f"SELECT max(v), writetime(v), c FROM {nums} WHERE k = 1")[2]
    assert row[0] == 4 and row[1] > 0 and row[2] == 1


def test_first_row_follows_the_read_order(cql, nums):
    assert one(cql, f"SELECT c, count(*) FROM {nums} WHERE k = 1 ORDER BY c DESC")[2] == (3, 3)


def test_limit_does_not_cut_an_aggregate(cql, nums):
    assert one(cql, f"SELECT count(*) FROM {nums} LIMIT 1")[2] == (4,)


def test_per_partition_limit_is_rejected_with_aggregates(cql, nums):
    with pytest.raises(InvalidRequest, match="PER PARTITION LIMIT is not allowed with aggregate "
                       "queries"):
        cql.execute(f"SELECT count(*) FROM {nums} PER PARTITION LIMIT 1")


def test_distinct_with_count_counts_partitions(cql, nums):
    assert one(cql, f"SELECT DISTINCT k, count(*) FROM {nums}")[2] == (1, 2)


def test_prepared_aggregates(cql, nums):
    prepared = cql.prepare(f"SELECT count(*), max(v), min(c) FROM {nums} WHERE k = ?")
    assert [c[2] for c in prepared.result_metadata] == ["count", "system.max(v)",
                                                         "system.min(c)"]
    assert tuple(cql.execute(prepared, [1]).one()) == (3, 4, 1)
    assert tuple(cql.execute(prepared, [42]).one()) == (0, None, None)


# --- aggregates over many pages ----------------------------------------------------------------


@pytest.fixture(scope="module")
def many(cql, test_keyspace):
    """2,400 rows in 40 partitions of 6 × 10 rows; v = p * 1000 + c1 * 100 + c2."""
    schema = "p int, c1 int, c2 int, v int, PRIMARY KEY (p, c1, c2)"
    with new_table(cql, test_keyspace, schema,
                   "WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)") as name:
        insert = cql.prepare(f"INSERT INTO {name} (p, c1, c2, v) VALUES (?, ?, ?, ?)")
        rows = [(p, c1, c2, p * 1000 + c1 * 100 + c2)
                for p in range(40) for c1 in range(6) for c2 in range(10)]
        for ok, result in execute_concurrent_with_args(cql, insert, rows, concurrency=64):
            assert ok, result
        yield name


def test_count_over_many_pages_is_one_row(cql, many):
    # The driver asks for pages of 100 rows; an aggregate is still one row over all 2,400.
    rows, largest = all_pages(cql, f"SELECT count(*), sum(v), max(v), min(v) FROM {many}", 100)
    expected_sum = sum(p * 1000 + c1 * 100 + c2
                       for p in range(40) for c1 in range(6) for c2 in range(10))
    assert rows == [(2400, expected_sum, 39509, 0)]


def test_group_by_partition_over_many_pages(cql, many):
    expected = {(p, 60, p * 1000 + 250 + 4) for p in range(40)}  # avg = p*1000 + 250 + 4.5
    for fetch_size in (1, 7, 100):
        rows, largest = all_pages(cql, f"SELECT p, count(*), avg(v) FROM {many} GROUP BY p",
                                  fetch_size)
        assert largest <= fetch_size
        assert len(rows) == 40 and set(rows) == expected


def test_group_by_clustering_over_many_pages_sees_each_group_once(cql, many):
    full, _ = all_pages(cql, f"SELECT p, c1, count(*), max(c2) FROM {many} GROUP BY p, c1", 5000)
    assert len(full) == 240 and all(r[2] == 10 and r[3] == 9 for r in full)
    for fetch_size in (1, 7, 100):
        rows, largest = all_pages(
            cql, f"SELECT p, c1, count(*), max(c2) FROM {many} GROUP BY p, c1", fetch_size)
        assert largest <= fetch_size
        assert rows == full


def test_group_by_descending_clustering_column(cql, many):
    rows, _ = all_pages(cql, f"SELECT c1, count(*) FROM {many} WHERE p = 7 GROUP BY c1", 2)
    assert rows == [(c1, 10) for c1 in (5, 4, 3, 2, 1, 0)]
    rows, _ = all_pages(cql, f"SELECT c1, count(*) FROM {many} WHERE p = 7 GROUP BY c1 "
                        "ORDER BY c1 ASC", 4)
    assert rows == [(c1, 10) for c1 in range(6)]


def test_group_by_limit_over_pages(cql, many):
    full, _ = all_pages(cql, f"SELECT p, c1, c2, count(*) FROM {many} GROUP BY p, c1, c2", 5000)
    rows, largest = all_pages(
        cql, f"SELECT p, c1, c2, count(*) FROM {many} GROUP BY p, c1, c2 LIMIT 500", 7)
    assert largest <= 7 and rows == full[:500]


# --- GROUP BY ----------------------------------------------------------------------------------


def test_group_by_partition_key(cql, grouped):
    rows = set(cql.execute(f"SELECT a, b, count(*), max(v) FROM {grouped} GROUP BY a, b"))
    # The static-only partition is one group of one row.
    assert rows == {(1, 1, 3, 12), (1, 2, 1, 13), (2, 1, 1, 14), (3, 3, 1, None)}


def test_group_by_clustering_prefix(cql, grouped):
    rows = list(cql.execute(f"SELECT a, b, c, count(*), sum(v) FROM {grouped} "
                            "WHERE a = 1 AND b = 1 GROUP BY a, b, c"))
    assert rows == [(1, 1, 1, 2, 21), (1, 1, 2, 1, 12)]
    rows = set(cql.execute(f"SELECT a, b, c, d, count(*) FROM {grouped} GROUP BY a, b, c, d"))
    assert len(rows) == 6 and all(r[4] == 1 for r in rows)


def test_group_by_may_skip_columns_restricted_by_equality(cql, grouped):
    rows = list(cql.execute(f"SELECT c, count(*) FROM {grouped} WHERE a = 1 AND b = 1 "
                            "GROUP BY c"))
    assert rows == [(1, 2), (2, 1)]
    rows = list(cql.execute(f"SELECT d, count(*) FROM {grouped} WHERE a = 1 AND b = 1 AND c = 1 "
                            "GROUP BY d"))
    assert rows == [(1, 1), (2, 1)]


def test_group_by_without_aggregates_gives_each_groups_first_row(cql, grouped):
    rows = list(cql.execute(f"SELECT a, b, c, d, v, s FROM {grouped} WHERE a = 1 AND b = 1 "
                            "GROUP BY a, b, c"))
    assert rows == [(1, 1, 1, 1, 10, 100), (1, 1, 2, 1, 12, 100)]


def test_group_by_with_limit_and_per_partition_limit(cql, grouped):
    # LIMIT and PER PARTITION LIMIT count groups, not rows.
    all_groups = list(cql.execute(f"SELECT a, b, c, count(*) FROM {grouped} GROUP BY a, b, c"))
    assert len(all_groups) == 5
    limited = list(cql.execute(f"SELECT a, b, c, count(*) FROM {grouped} GROUP BY a, b, c "
                               "LIMIT 2"))
    assert limited == all_groups[:2]
    per_partition = list(cql.execute(f"SELECT a, b, c, count(*) FROM {grouped} "
                                     "GROUP BY a, b, c PER PARTITION LIMIT 1"))
    assert len(per_partition) == 4
    assert (1, 1, 1, 2) in per_partition and (1, 1, 2, 1) not in per_partition


def test_group_by_with_order_by_desc(cql, grouped):
    rows = list(cql.execute(f"SELECT c, count(*) FROM {grouped} WHERE a = 1 AND b = 1 "
                            "GROUP BY c ORDER BY c DESC"))
    assert rows == [(2, 1), (1, 2)]


def test_group_by_with_in_and_filtering(cql, grouped):
    rows = list(cql.execute(f"SELECT a, b, count(*) FROM {grouped} WHERE a = 1 AND b IN (2, 1) "
                            "GROUP BY a, b"))
    assert rows == [(1, 1, 3), (1, 2, 1)]
    rows = set(cql.execute(f"SELECT a, b, count(*) FROM {grouped} WHERE v > 10 GROUP BY a, b "
                           "ALLOW FILTERING"))
    assert rows == {(1, 1, 2), (1, 2, 1), (2, 1, 1)}


def test_group_by_of_no_rows_is_no_rows(cql, grouped):
    # Unlike an aggregate without GROUP BY, which is always one row.
    assert list(cql.execute(f"SELECT a, b, count(*) FROM {grouped} WHERE a = 9 AND b = 9 "
                            "GROUP BY a, b")) == []


def test_group_by_paging_sees_each_group_once(cql, grouped):
    query = f"SELECT a, b, c, count(*) FROM {grouped} GROUP BY a, b, c"
    full = list(map(tuple, cql.execute(query)))
    for fetch_size in (1, 2, 3):
        rows, largest = all_pages(cql, query, fetch_size)
        assert largest <= fetch_size
        assert rows == full


def test_group_by_errors(cql, grouped):
    cases = [
        ("GROUP BY a", "Group by is not supported on only a part of the partition key"),
        ("GROUP BY b", "Group by currently only support groups of columns following their "
                       "declared order in the PRIMARY KEY"),
        ("GROUP BY a, b, d", "following their declared order"),
        ("GROUP BY a, b, a", "following their declared order"),
        ("GROUP BY v", "Group by is currently only supported on the columns of the PRIMARY KEY, "
                       "got v"),
        ("GROUP BY s", "only supported on the columns of the PRIMARY KEY, got s"),
        ("GROUP BY nosuchcolumn", "Undefined column name nosuchcolumn"),
    ]
    for clause, message in cases:
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(f"SELECT a, count(*) FROM {grouped} {clause}")
    with pytest.raises(InvalidRequest, match="following their declared order"):
        cql.execute(f"SELECT count(*) FROM {grouped} WHERE a = 1 AND b = 1 GROUP BY d")


def test_group_by_with_distinct(cql, grouped):
    rows = set(cql.execute(f"SELECT DISTINCT a, b FROM {grouped} GROUP BY a, b"))
    assert rows == {(1, 1), (1, 2), (2, 1), (3, 3)}
    with pytest.raises(InvalidRequest, match="Grouping on clustering columns is not allowed for "
                       "SELECT DISTINCT queries"):
        cql.execute(f"SELECT DISTINCT a, b FROM {grouped} GROUP BY a, b, c")
