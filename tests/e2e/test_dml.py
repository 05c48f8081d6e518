"""Reads and writes: INSERT/UPDATE/DELETE/SELECT, values of every type, clustering order and
slices, paging, tokens, static columns, timestamps and TTLs, batches, UNSET values."""

import contextlib
import re
import datetime
import struct
import time
import uuid
from decimal import Decimal

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException
from cassandra.metadata import Murmur3Token
from cassandra.query import (
    UNSET_VALUE,
    BatchStatement,
    BatchType,
    SimpleStatement,
)
from cassandra.util import Date, Duration, Time

from util import new_table, new_type


@pytest.fixture
def kv(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int, t text") as t:
        yield t


@pytest.fixture
def kcv(cql, test_keyspace):
    """A partition of clustered rows: k partition key, c clustering (ascending)."""
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as t:
        yield t


# --- basic statements ----------------------------------------------------------------------------


def test_insert_select_unprepared(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v, t) VALUES (1, 2, 'three')")
    assert cql.execute(f"SELECT k, v, t FROM {kv} WHERE k = 1").one() == (1, 2, "three")
    # Driver-side formatting of values, positional and named.
    cql.execute(f"INSERT INTO {kv} (k, v, t) VALUES (%s, %s, %s)", [2, 3, "it's"])
    cql.execute(f"INSERT INTO {kv} (k, v, t) VALUES (%(k)s, %(v)s, %(t)s)", {"k": 3, "v": 4, "t": "x"})
    assert cql.execute(f"SELECT t FROM {kv} WHERE k = 2").one().t == "it's"
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 3").one().v == 4
    assert cql.execute(f"SELECT * FROM {kv} WHERE k = 99").one() is None


def test_prepared_positional_and_named(cql, kv):
    insert = cql.prepare(f"INSERT INTO {kv} (k, v, t) VALUES (?, ?, ?)")
    cql.execute(insert, [1, 10, "a"])
    named = cql.prepare(f"INSERT INTO {kv} (k, v, t) VALUES (:k, :v, :t)")
    cql.execute(named, {"k": 2, "v": 20, "t": "b"})
    select = cql.prepare(f"SELECT v, t FROM {kv} WHERE k = :k")
    assert cql.execute(select, {"k": 1}).one() == (10, "a")
    assert cql.execute(select, [2]).one() == (20, "b")
    # The prepared metadata names the bind markers and the result columns.
    assert [c.name for c in select.column_metadata] == ["k"]
    assert [c[2] for c in select.result_metadata] == ["v", "t"]


def test_update_and_upsert(cql, kv):
    cql.execute(f"UPDATE {kv} SET v = 5 WHERE k = 1")  # UPDATE of a missing row creates it
    assert cql.execute(f"SELECT k, v, t FROM {kv} WHERE k = 1").one() == (1, 5, None)
    cql.execute(f"UPDATE {kv} SET v = 6, t = 'x' WHERE k = 1")
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 7)")  # INSERT overwrites, keeps t
    assert cql.execute(f"SELECT k, v, t FROM {kv} WHERE k = 1").one() == (1, 7, "x")
    update = cql.prepare(f"UPDATE {kv} SET t = ? WHERE k = ?")
    cql.execute(update, ["y", 1])
    assert cql.execute(f"SELECT t FROM {kv} WHERE k = 1").one().t == "y"


# --- types ---------------------------------------------------------------------------------------

# column name, CQL type, a Python value, and the CQL literal of the same value.
NATIVE_VALUES = [
    ("a_ascii", "ascii", "hello", "'hello'"),
    ("a_bigint", "bigint", -(2**62), str(-(2**62))),
    ("a_blob", "blob", b"\x00\x01\xfe\xff", "0x0001feff"),
    ("a_boolean", "boolean", True, "true"),
    ("a_date", "date", Date(datetime.date(2024, 2, 29)), "'2024-02-29'"),
    ("a_decimal", "decimal", Decimal("-12345.6789"), "-12345.6789"),
    ("a_double", "double", 2.5e300, "2.5e300"),
    ("a_duration", "duration", Duration(1, 2, 3_000_000_000), "1mo2d3s"),
    ("a_float", "float", 1.5, "1.5"),
    ("a_inet", "inet", "192.168.0.1", "'192.168.0.1'"),
    ("a_inet6", "inet", "::1", "'::1'"),
    ("a_int", "int", -(2**31), str(-(2**31))),
    ("a_smallint", "smallint", -32768, "-32768"),
    ("a_text", "text", "héllo wörld ✓", "'héllo wörld ✓'"),
    ("a_time", "time", Time(datetime.time(13, 14, 15, 123456)), "'13:14:15.123456'"),
    (
        "a_timestamp",
        "timestamp",
        datetime.datetime(2024, 1, 2, 3, 4, 5, 678000),
        "'2024-01-02 03:04:05.678+0000'",
    ),
    (
        "a_timeuuid",
        "timeuuid",
        uuid.UUID("50554d6e-29bb-11e5-b345-feff819cdc9f"),
        "50554d6e-29bb-11e5-b345-feff819cdc9f",
    ),
    ("a_tinyint", "tinyint", -128, "-128"),
    (
        "a_uuid",
        "uuid",
        uuid.UUID("123e4567-e89b-12d3-a456-426614174000"),
        "123e4567-e89b-12d3-a456-426614174000",
    ),
    ("a_varint", "varint", 2**100 + 1, str(2**100 + 1)),
]


@pytest.fixture
def all_types(cql, test_keyspace):
    schema = ", ".join(f"{name} {typ}" for name, typ, _, _ in NATIVE_VALUES)
    with new_table(cql, test_keyspace, f"k int PRIMARY KEY, {schema}") as t:
        yield t


def test_native_types_round_trip_prepared(cql, all_types):
    names = [n for n, _, _, _ in NATIVE_VALUES]
    insert = cql.prepare(
        f"INSERT INTO {all_types} (k, {', '.join(names)}) VALUES (?, {', '.join('?' * len(names))})"
    )
    cql.execute(insert, [1] + [v for _, _, v, _ in NATIVE_VALUES])
    row = cql.execute(f"SELECT {', '.join(names)} FROM {all_types} WHERE k = 1").one()
    for (name, _, value, _), got in zip(NATIVE_VALUES, row):
        assert got == value, name


def test_native_types_round_trip_literals(cql, all_types):
    names = [n for n, _, _, _ in NATIVE_VALUES]
    literals = [lit for _, _, _, lit in NATIVE_VALUES]
    cql.execute(f"INSERT INTO {all_types} (k, {', '.join(names)}) VALUES (2, {', '.join(literals)})")
    row = cql.execute(f"SELECT {', '.join(names)} FROM {all_types} WHERE k = 2").one()
    for (name, _, value, _), got in zip(NATIVE_VALUES, row):
        assert got == value, name
    # ... and the same values are usable as keys in WHERE.
    assert cql.execute(f"SELECT k FROM {all_types} WHERE k = 2").one().k == 2


def test_native_type_edge_values(cql, all_types):
    insert = cql.prepare(
        f"INSERT INTO {all_types} (k, a_text, a_blob, a_varint, a_decimal, a_double, a_bigint) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)"
    )
    cql.execute(insert, [3, "", b"", -(2**200), Decimal("0.000000001"), float("inf"), 2**63 - 1])
    row = cql.execute(
        f"SELECT a_text, a_blob, a_varint, a_decimal, a_double, a_bigint FROM {all_types} WHERE k = 3"
    ).one()
    assert row == ("", b"", -(2**200), Decimal("0.000000001"), float("inf"), 2**63 - 1)


def test_frozen_collections_tuple_and_udt(cql, test_keyspace):
    with new_type(cql, test_keyspace, "x int, y text") as typ:
        type_name = typ.split(".")[1]
        schema = (
            "k int PRIMARY KEY, l frozen<list<int>>, s frozen<set<text>>, m frozen<map<text, int>>, "
            f"tu tuple<int, text, boolean>, u frozen<{type_name}>, "
            f"nested frozen<map<int, frozen<list<frozen<{type_name}>>>>>"
        )
        with new_table(cql, test_keyspace, schema) as t:
            insert = cql.prepare(f"INSERT INTO {t} (k, l, s, m, tu, u, nested) VALUES (?, ?, ?, ?, ?, ?, ?)")
            cql.execute(
                insert,
                [1, [3, 1, 3], {"b", "a"}, {"z": 1, "a": 2}, (7, "seven", True), (5, "five"),
                 {1: [(1, "one")], 2: []}],
            )
            cql.execute(
                f"INSERT INTO {t} (k, l, s, m, tu, u) VALUES "
                "(2, [3, 1, 3], {'b', 'a'}, {'z': 1, 'a': 2}, (7, 'seven', true), {x: 5, y: 'five'})"
            )
            for k in (1, 2):
                row = cql.execute(f"SELECT l, s, m, tu, u FROM {t} WHERE k = {k}").one()
                assert row.l == [3, 1, 3]
                assert list(row.s) == ["a", "b"]  # sets come back sorted
                assert list(row.m.items()) == [("a", 2), ("z", 1)]  # maps sorted by key
                assert row.tu == (7, "seven", True)
                assert (row.u.x, row.u.y) == (5, "five")
            nested = cql.execute(f"SELECT nested FROM {t} WHERE k = 1").one().nested
            assert [(k, [tuple(u) for u in v]) for k, v in nested.items()] == [(1, [(1, "one")]), (2, [])]


def test_non_frozen_collections_written_whole(cql, test_keyspace):
    schema = "k int PRIMARY KEY, l list<int>, s set<text>, m map<int, text>"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, l, s, m) VALUES (1, [1, 2, 2], {{'x', 'y'}}, {{1: 'a', 2: 'b'}})")
        insert = cql.prepare(f"INSERT INTO {t} (k, l, s, m) VALUES (?, ?, ?, ?)")
        cql.execute(insert, [2, [1, 2, 2], {"y", "x"}, {2: "b", 1: "a"}])
        for k in (1, 2):
            row = cql.execute(f"SELECT l, s, m FROM {t} WHERE k = {k}").one()
            assert (row.l, set(row.s), dict(row.m)) == ([1, 2, 2], {"x", "y"}, {1: "a", 2: "b"})
        # Overwriting the whole collection replaces it (it does not merge).
        cql.execute(f"UPDATE {t} SET l = [9], s = {{'z'}}, m = {{3: 'c'}} WHERE k = 1")
        row = cql.execute(f"SELECT l, s, m FROM {t} WHERE k = 1").one()
        assert (row.l, set(row.s), dict(row.m)) == ([9], {"z"}, {3: "c"})


# --- clustering, slices, ordering, paging -------------------------------------------------------


def fill(cql, table, partitions, rows_per_partition):
    insert = cql.prepare(f"INSERT INTO {table} (k, c, v) VALUES (?, ?, ?)")
    for k in partitions:
        for c in range(rows_per_partition):
            cql.execute(insert, [k, c, k * 1000 + c])


def test_clustering_order_and_slices(cql, kcv):
    fill(cql, kcv, [1], 10)
    cs = lambda q: [r.c for r in cql.execute(f"SELECT c FROM {kcv} WHERE k = 1 {q}")]  # noqa: E731
    assert cs("") == list(range(10))
    assert cs("AND c > 6") == [7, 8, 9]
    assert cs("AND c >= 3 AND c < 6") == [3, 4, 5]
    assert cs("AND c <= 2") == [0, 1, 2]
    assert cs("AND c = 4") == [4]
    assert cs("AND c IN (8, 2, 5)") == [2, 5, 8]
    assert cs("ORDER BY c DESC") == list(range(9, -1, -1))
    assert cs("AND c > 6 ORDER BY c DESC") == [9, 8, 7]
    assert cs("LIMIT 3") == [0, 1, 2]
    assert cs("ORDER BY c DESC LIMIT 2") == [9, 8]
    prepared = cql.prepare(f"SELECT c FROM {kcv} WHERE k = ? AND c >= ? AND c < ?")
    assert [r.c for r in cql.execute(prepared, [1, 4, 7])] == [4, 5, 6]


def test_clustering_order_desc(cql, test_keyspace):
    schema = "k int, c int, d text, v int, PRIMARY KEY (k, c, d)"
    with new_table(cql, test_keyspace, schema, "WITH CLUSTERING ORDER BY (c DESC, d ASC)") as t:
        for c in range(4):
            for d in ("b", "a"):
                cql.execute(f"INSERT INTO {t} (k, c, d, v) VALUES (1, {c}, '{d}', 0)")
        rows = [(r.c, r.d) for r in cql.execute(f"SELECT c, d FROM {t} WHERE k = 1")]
        assert rows == [(3, "a"), (3, "b"), (2, "a"), (2, "b"), (1, "a"), (1, "b"), (0, "a"), (0, "b")]
        rows = [(r.c, r.d) for r in cql.execute(f"SELECT c, d FROM {t} WHERE k = 1 AND c < 2 ORDER BY c ASC")]
        assert rows == [(0, "b"), (0, "a"), (1, "b"), (1, "a")]
        assert [r.d for r in cql.execute(f"SELECT d FROM {t} WHERE k = 1 AND c = 2 AND d > 'a'")] == ["b"]
        # IN on a clustering column, then a slice on the next one: no ALLOW FILTERING needed.
        rows = [(r.c, r.d) for r in cql.execute(f"SELECT c, d FROM {t} WHERE k = 1 AND c IN (1, 3) AND d > 'a'")]
        assert rows == [(3, "b"), (1, "b")]
        # IN on a descending clustering column, its values in any order and paged: the rows
        # come in clustering order (or the asked one), from every value, once.
        stmt = SimpleStatement(f"SELECT c, d FROM {t} WHERE k = 1 AND c IN (0, 3, 2)", fetch_size=3)
        assert [(r.c, r.d) for r in cql.execute(stmt)] == [
            (3, "a"), (3, "b"), (2, "a"), (2, "b"), (0, "a"), (0, "b")]
        rows = [(r.c, r.d) for r in cql.execute(f"SELECT c, d FROM {t} WHERE k = 1 AND c IN (2, 1) ORDER BY c ASC")]
        assert rows == [(1, "b"), (1, "a"), (2, "b"), (2, "a")]
        rows = [(r.c, r.d) for r in cql.execute(f"SELECT c, d FROM {t} WHERE k = 1 AND c = 2 AND d IN ('z', 'b')")]
        assert rows == [(2, "b")]
        assert list(cql.execute(f"SELECT c FROM {t} WHERE k = 1 AND c IN (7, 5)")) == []
        # A slice after an unrestricted clustering column is refused, naming the column.
        with pytest.raises(InvalidRequest, match='PRIMARY KEY column "d" cannot be restricted as preceding column "c" is not restricted'):
            cql.execute(f"SELECT d FROM {t} WHERE k = 1 AND d > 'a'")


def test_single_partition_paging(cql, kcv):
    fill(cql, kcv, [1], 50)
    stmt = SimpleStatement(f"SELECT c FROM {kcv} WHERE k = 1", fetch_size=7)
    result = cql.execute(stmt)
    assert len(result.current_rows) == 7 and result.has_more_pages
    assert [r.c for r in result] == list(range(50))  # iterating fetches the remaining pages
    # Reversed, prepared, with a slice: still every row once, in order.
    prepared = cql.prepare(f"SELECT c FROM {kcv} WHERE k = ? AND c >= ? ORDER BY c DESC")
    prepared.fetch_size = 4
    assert [r.c for r in cql.execute(prepared, [1, 10])] == list(range(49, 9, -1))
    # A page size that divides the row count exactly must not produce an extra empty page.
    stmt = SimpleStatement(f"SELECT c FROM {kcv} WHERE k = 1", fetch_size=10)
    assert [r.c for r in cql.execute(stmt)] == list(range(50))


def test_paging_manual_with_paging_state(cql, kcv):
    fill(cql, kcv, [1], 12)
    stmt = SimpleStatement(f"SELECT c FROM {kcv} WHERE k = 1", fetch_size=5)
    seen, paging_state = [], None
    for _ in range(10):  # bound: 12 rows / 5 per page = 3 pages
        page = cql.execute(stmt, paging_state=paging_state)
        seen += [r.c for r in page.current_rows]
        paging_state = page.paging_state
        if paging_state is None:
            break
    assert seen == list(range(12))


def test_full_table_scan_paging(cql, kcv):
    fill(cql, kcv, range(30), 3)
    stmt = SimpleStatement(f"SELECT k, c FROM {kcv}", fetch_size=4)
    rows = [(r.k, r.c) for r in cql.execute(stmt)]
    assert len(rows) == 90
    assert set(rows) == {(k, c) for k in range(30) for c in range(3)}
    # Partitions come in token order, rows of a partition in clustering order.
    tokens = [Murmur3Token.from_key(struct.pack(">i", k)).value for k, _ in rows]
    assert tokens == sorted(tokens)


def test_composite_partition_key(cql, test_keyspace):
    schema = "a int, b text, c int, v int, PRIMARY KEY ((a, b), c)"
    with new_table(cql, test_keyspace, schema) as t:
        insert = cql.prepare(f"INSERT INTO {t} (a, b, c, v) VALUES (?, ?, ?, ?)")
        for a in (1, 2):
            for b in ("x", "y"):
                for c in range(3):
                    cql.execute(insert, [a, b, c, a * 100 + c])
        rows = list(cql.execute(f"SELECT c, v FROM {t} WHERE a = 2 AND b = 'y'"))
        assert rows == [(0, 200), (1, 201), (2, 202)]
        assert len(list(cql.execute(f"SELECT * FROM {t}"))) == 12
        # The routing key of a composite partition key is the components, each length-prefixed.
        bound = cql.prepare(f"SELECT v FROM {t} WHERE a = ? AND b = ?").bind([1, "x"])
        assert bound.routing_key == b"\x00\x04\x00\x00\x00\x01\x00" + b"\x00\x01x\x00"


def test_token_function(cql, kv):
    for k in range(20):
        cql.execute(f"INSERT INTO {kv} (k, v) VALUES ({k}, {k})")
    rows = list(cql.execute(f"SELECT token(k), k FROM {kv}"))
    expected = {k: Murmur3Token.from_key(struct.pack(">i", k)).value for k in range(20)}
    assert {r.k: r[0] for r in rows} == expected  # bit-identical Murmur3 tokens
    low, high = sorted(expected.values())[5], sorted(expected.values())[14]
    in_range = cql.execute(f"SELECT k FROM {kv} WHERE token(k) > {low} AND token(k) <= {high}")
    assert {r.k for r in in_range} == {k for k, tok in expected.items() if low < tok <= high}
    prepared = cql.prepare(f"SELECT k FROM {kv} WHERE token(k) >= ?")
    assert {r.k for r in cql.execute(prepared, [high])} == {k for k, tok in expected.items() if tok >= high}


def test_static_columns(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, s text STATIC, v int, PRIMARY KEY (k, c)") as t:
        cql.execute(f"INSERT INTO {t} (k, c, s, v) VALUES (1, 1, 'first', 1)")
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (1, 2, 2)")
        cql.execute(f"INSERT INTO {t} (k, c, s, v) VALUES (2, 1, 'other', 1)")
        assert [r.s for r in cql.execute(f"SELECT s FROM {t} WHERE k = 1")] == ["first", "first"]
        cql.execute(f"UPDATE {t} SET s = 'shared' WHERE k = 1")  # static: partition key only
        assert [(r.c, r.s) for r in cql.execute(f"SELECT c, s FROM {t} WHERE k = 1")] == [
            (1, "shared"),
            (2, "shared"),
        ]
        assert cql.execute(f"SELECT s FROM {t} WHERE k = 2").one().s == "other"
        assert [r.s for r in cql.execute(f"SELECT DISTINCT k, s FROM {t} WHERE k = 1")] == ["shared"]
        # A partition with only a static value still shows up, with null clustering columns.
        cql.execute(f"INSERT INTO {t} (k, s) VALUES (3, 'alone')")
        assert cql.execute(f"SELECT k, c, s, v FROM {t} WHERE k = 3").one() == (3, None, "alone", None)


# --- deletes -------------------------------------------------------------------------------------


def test_delete_row_partition_column_and_range(cql, kcv):
    fill(cql, kcv, [1, 2, 3, 4], 10)
    cs = lambda k: [r.c for r in cql.execute(f"SELECT c FROM {kcv} WHERE k = {k}")]  # noqa: E731
    cql.execute(f"DELETE FROM {kcv} WHERE k = 1 AND c = 3")  # one row
    assert cs(1) == [0, 1, 2, 4, 5, 6, 7, 8, 9]
    cql.execute(f"DELETE FROM {kcv} WHERE k = 2")  # the whole partition
    assert cs(2) == []
    cql.execute(f"DELETE v FROM {kcv} WHERE k = 3 AND c = 0")  # one column; the row stays
    assert cql.execute(f"SELECT c, v FROM {kcv} WHERE k = 3 AND c = 0").one() == (0, None)
    cql.execute(f"DELETE FROM {kcv} WHERE k = 4 AND c > 5")  # a clustering range
    assert cs(4) == [0, 1, 2, 3, 4, 5]
    cql.execute(f"DELETE FROM {kcv} WHERE k = 4 AND c >= 1 AND c < 3")
    assert cs(4) == [0, 3, 4, 5]
    # Writes after a delete (with later timestamps) are visible again.
    cql.execute(f"INSERT INTO {kcv} (k, c, v) VALUES (2, 5, 5)")
    assert cs(2) == [5]
    prepared = cql.prepare(f"DELETE FROM {kcv} WHERE k = ? AND c = ?")
    cql.execute(prepared, [1, 0])
    assert cs(1)[0] == 1


def test_row_with_only_primary_key_survives_column_deletes(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1)")
    cql.execute(f"DELETE v FROM {kv} WHERE k = 1")
    assert cql.execute(f"SELECT k, v FROM {kv} WHERE k = 1").one() == (1, None)  # INSERT's row marker
    cql.execute(f"UPDATE {kv} SET v = 2 WHERE k = 2")
    cql.execute(f"DELETE v FROM {kv} WHERE k = 2")
    assert cql.execute(f"SELECT k FROM {kv} WHERE k = 2").one() is None  # UPDATE has no row marker


# --- timestamps and TTL --------------------------------------------------------------------------


def test_using_timestamp_last_write_wins(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 2) USING TIMESTAMP 2000")
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP 1000")  # older: loses
    row = cql.execute(f"SELECT v, writetime(v) FROM {kv} WHERE k = 1").one()
    assert (row[0], row[1]) == (2, 2000)
    cql.execute(f"DELETE FROM {kv} USING TIMESTAMP 1500 WHERE k = 1")  # older than the write
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one().v == 2
    cql.execute(f"DELETE FROM {kv} USING TIMESTAMP 2500 WHERE k = 1")
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one() is None
    cql.execute(f"UPDATE {kv} USING TIMESTAMP 2400 SET v = 9 WHERE k = 1")  # shadowed by delete
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one() is None


def test_writetime_of_server_timestamp(cql, kv):
    before_us = int(time.time() * 1_000_000)
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1)")
    after_us = int(time.time() * 1_000_000)
    # The driver (protocol v3+) sends a client timestamp; either way it is microseconds now.
    writetime = cql.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 1").one()[0]
    assert before_us - 60_000_000 <= writetime <= after_us + 60_000_000


def test_using_ttl(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v, t) VALUES (1, 1, 'a') USING TTL 100")
    row = cql.execute(f"SELECT ttl(v), ttl(t) FROM {kv} WHERE k = 1").one()
    assert 90 <= row[0] <= 100 and 90 <= row[1] <= 100
    cql.execute(f"UPDATE {kv} USING TTL 200 SET t = 'b' WHERE k = 1")
    row = cql.execute(f"SELECT ttl(v), ttl(t) FROM {kv} WHERE k = 1").one()
    assert 90 <= row[0] <= 100 and 190 <= row[1] <= 200
    insert = cql.prepare(f"INSERT INTO {kv} (k, v) VALUES (?, ?) USING TTL ?")
    cql.execute(insert, [2, 2, 50])
    assert 40 <= cql.execute(f"SELECT ttl(v) FROM {kv} WHERE k = 2").one()[0] <= 50
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (3, 3)")
    assert cql.execute(f"SELECT ttl(v) FROM {kv} WHERE k = 3").one()[0] is None


def test_ttl_expiry(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TTL 1")
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (2, 2)")
    deadline = time.monotonic() + 3  # TTLs have 1 s resolution: gone within 2 s
    while cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one() is not None:
        assert time.monotonic() < deadline, "row with TTL 1 still visible after 3 s"
        time.sleep(0.1)  # poll interval
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 2").one().v == 2


def test_default_time_to_live(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int", "WITH default_time_to_live = 100") as t:
        cql.execute(f"INSERT INTO {t} (k, v) VALUES (1, 1)")
        assert 90 <= cql.execute(f"SELECT ttl(v) FROM {t} WHERE k = 1").one()[0] <= 100


# --- batches -------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch_type", [BatchType.LOGGED, BatchType.UNLOGGED])
def test_driver_batch_with_prepared_statements(cql, kcv, batch_type):
    insert = cql.prepare(f"INSERT INTO {kcv} (k, c, v) VALUES (?, ?, ?)")
    batch = BatchStatement(batch_type=batch_type)
    for c in range(5):
        batch.add(insert, (1, c, c))
    batch.add(insert, (2, 0, 20))  # a second partition
    batch.add(f"UPDATE {kcv} SET v = %s WHERE k = %s AND c = %s", (99, 1, 4))  # unprepared
    cql.execute(batch)
    assert [r.v for r in cql.execute(f"SELECT v FROM {kcv} WHERE k = 1")] == [0, 1, 2, 3, 99]
    assert cql.execute(f"SELECT v FROM {kcv} WHERE k = 2").one().v == 20


def test_cql_batch(cql, kcv):
    cql.execute(
        f"BEGIN BATCH "
        f"INSERT INTO {kcv} (k, c, v) VALUES (1, 1, 1); "
        f"INSERT INTO {kcv} (k, c, v) VALUES (1, 2, 2); "
        f"UPDATE {kcv} SET v = 3 WHERE k = 2 AND c = 1; "
        f"DELETE FROM {kcv} WHERE k = 1 AND c = 2; "
        f"APPLY BATCH"
    )
    # All statements of a batch share one timestamp; the DELETE shadows the INSERT of (1, 2).
    assert list(cql.execute(f"SELECT c, v FROM {kcv} WHERE k = 1")) == [(1, 1)]
    assert cql.execute(f"SELECT v FROM {kcv} WHERE k = 2 AND c = 1").one().v == 3
    cql.execute(
        f"BEGIN UNLOGGED BATCH USING TIMESTAMP 1000 "
        f"INSERT INTO {kcv} (k, c, v) VALUES (3, 1, 1); "
        f"INSERT INTO {kcv} (k, c, v) VALUES (4, 1, 1); "
        f"APPLY BATCH"
    )
    assert cql.execute(f"SELECT writetime(v) FROM {kcv} WHERE k = 4 AND c = 1").one()[0] == 1000
    prepared = cql.prepare(
        f"BEGIN BATCH INSERT INTO {kcv} (k, c, v) VALUES (?, ?, ?); "
        f"INSERT INTO {kcv} (k, c, v) VALUES (?, ?, ?); APPLY BATCH"
    )
    cql.execute(prepared, [5, 1, 1, 5, 2, 2])
    assert [r.c for r in cql.execute(f"SELECT c FROM {kcv} WHERE k = 5")] == [1, 2]


# --- unset values, aggregates, IN, filtering -----------------------------------------------------


def test_unset_values_leave_columns_untouched(cql, kv):
    insert = cql.prepare(f"INSERT INTO {kv} (k, v, t) VALUES (?, ?, ?)")
    cql.execute(insert, [1, 1, "one"])
    cql.execute(insert, [1, UNSET_VALUE, "uno"])
    assert cql.execute(f"SELECT v, t FROM {kv} WHERE k = 1").one() == (1, "uno")
    update = cql.prepare(f"UPDATE {kv} SET v = :v, t = :t WHERE k = :k")
    cql.execute(update, {"k": 1, "v": 2, "t": UNSET_VALUE})
    assert cql.execute(f"SELECT v, t FROM {kv} WHERE k = 1").one() == (2, "uno")
    # Missing named values are sent as UNSET by the driver (protocol v4+).
    cql.execute(update, {"k": 1, "v": 3})
    assert cql.execute(f"SELECT v, t FROM {kv} WHERE k = 1").one() == (3, "uno")
    # null (None), unlike UNSET, deletes.
    cql.execute(insert, [1, None, "x"])
    assert cql.execute(f"SELECT v, t FROM {kv} WHERE k = 1").one() == (None, "x")


def test_count(cql, kcv):
    fill(cql, kcv, [1, 2], 5)
    assert cql.execute(f"SELECT count(*) FROM {kcv}").one()[0] == 10
    assert cql.execute(f"SELECT count(*) FROM {kcv} WHERE k = 1").one()[0] == 5
    assert cql.execute(f"SELECT count(*) FROM {kcv} WHERE k = 1 AND c > 2").one()[0] == 2
    assert cql.execute(f"SELECT count(*) FROM {kcv} WHERE k = 42").one()[0] == 0
    assert cql.execute(f"SELECT COUNT(1) FROM {kcv} WHERE k = 2").one()[0] == 5


def test_in_on_partition_key(cql, kcv):
    fill(cql, kcv, range(6), 2)
    rows = {(r.k, r.c) for r in cql.execute(f"SELECT k, c FROM {kcv} WHERE k IN (1, 3, 5, 42)")}
    assert rows == {(1, 0), (1, 1), (3, 0), (3, 1), (5, 0), (5, 1)}
    prepared = cql.prepare(f"SELECT k, c FROM {kcv} WHERE k IN ? AND c = ?")
    assert {(r.k, r.c) for r in cql.execute(prepared, [[0, 2], 1])} == {(0, 1), (2, 1)}


def test_allow_filtering(cql, kcv):
    fill(cql, kcv, range(4), 4)
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        cql.execute(f"SELECT k, c FROM {kcv} WHERE v = 2002")
    rows = list(cql.execute(f"SELECT k, c FROM {kcv} WHERE v = 2002 ALLOW FILTERING"))
    assert rows == [(2, 2)]
    rows = cql.execute(f"SELECT c FROM {kcv} WHERE k = 3 AND v > 3001 ALLOW FILTERING")
    assert [r.c for r in rows] == [2, 3]


NOT_RESTRICTED = 'PRIMARY KEY column "{}" cannot be restricted as preceding column "{}" is not restricted'
AFTER_SLICE = 'Clustering column "{}" cannot be restricted (preceding column "{}" is restricted by a non-EQ relation)'
BEFORE_RESTRICTED = 'PRIMARY KEY column "{}" cannot be restricted (preceding column "{}" is restricted by a non-EQ relation)'


@pytest.mark.parametrize("where, rows", [
    ("k1 = 0 AND k2 > 0", [(0, 1, 0, 0), (0, 1, 1, 1)]),
    ("k1 > 0", [(1, 0, 0, 0), (1, 0, 1, 2), (1, 1, 0, 0), (1, 1, 1, 3)]),
    ("k2 < 1", [(0, 0, 0, 0), (0, 0, 1, 0), (1, 0, 0, 0), (1, 0, 1, 2)]),
    ("k1 = 1 AND k2 >= 0 AND c = 1", [(1, 0, 1, 2), (1, 1, 1, 3)]),
    ("k1 IN (0, 1) AND k2 > 0", [(0, 1, 0, 0), (0, 1, 1, 1), (1, 1, 0, 0), (1, 1, 1, 3)]),
    ("k1 >= 0 AND k1 < 1 AND v > 0", [(0, 1, 1, 1)]),
])
def test_a_slice_on_the_partition_key_filters(cql, test_keyspace, where, rows):
    """With ALLOW FILTERING a slice on a partition key column filters a scan by the column's
    values (not its tokens); without it, it is refused."""
    with new_table(cql, test_keyspace, "k1 int, k2 int, c int, v int, PRIMARY KEY ((k1, k2), c)") as t:
        for k in range(4):
            for c in range(2):
                cql.execute(f"INSERT INTO {t} (k1, k2, c, v) VALUES ({k // 2}, {k % 2}, {c}, {k * c})")
        with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
            cql.execute(f"SELECT * FROM {t} WHERE {where}")
        got = sorted(tuple(r) for r in cql.execute(f"SELECT k1, k2, c, v FROM {t} WHERE {where} ALLOW FILTERING"))
        assert got == rows


EQUAL = "{} cannot be restricted by more than one relation if it includes an Equal"
BOTH = 'Column "{}" cannot be restricted by both an equality and an inequality relation'
TWO_BOUNDS = "More than one restriction was found for the {} bound on {}"


@pytest.mark.parametrize("where, message", [
    ("k1 = 0 AND k2 = 0 AND c = 1 AND c = 2", EQUAL.format("c")),
    ("k1 = 0 AND k2 = 0 AND c = 2 AND c > 1", EQUAL.format("c")),
    ("k1 = 0 AND k1 = 1 AND k2 = 0", EQUAL.format("k1")),
    ("k1 = 0 AND k2 = 0 AND s = 1 AND s = 2", EQUAL.format("s")),
    ("k1 = 0 AND k2 = 0 AND (c, d) = (0, 0) AND c = 0", EQUAL.format("c")),
    ("k1 = 0 AND k2 = 0 AND c IN (1, 2) AND c = 1",
     "c cannot be restricted by more than one relation if it includes a IN"),
    ("k1 = 0 AND k2 = 0 AND c > 1 AND c = 2", BOTH.format("c")),
    ("k1 = 0 AND k2 = 0 AND c > 1 AND c IN (1, 2)", BOTH.format("c")),
    ("k1 = 0 AND k2 = 0 AND v > 1 AND v = 2", BOTH.format("v")),
    ("k1 = 0 AND k2 = 0 AND (c, d) > (0, 0) AND c = 0", BOTH.format("c")),
    ("k1 = 0 AND k2 = 0 AND c < 3 AND c < 2", TWO_BOUNDS.format("end", "c")),
    ("k1 = 0 AND k2 = 0 AND c >= 0 AND c > 1", TWO_BOUNDS.format("start", "c")),
    ("token(k1, k2) > 0 AND token(k1, k2) > 1", TWO_BOUNDS.format("start", "k1, k2")),
    ("k1 = 0 AND k2 = 0 AND nosuch = 1", "Undefined column name nosuch in table {table}"),
])
def test_a_column_restricted_twice_in_ways_that_do_not_combine(cql, test_keyspace, where, message):
    """Refused whatever ALLOW FILTERING says, the relations taken in the order written, in
    Cassandra 5.0's words; two bounds on opposite sides do combine."""
    schema = "k1 int, k2 int, c int, d int, v int, s int static, PRIMARY KEY ((k1, k2), c, d)"
    with new_table(cql, test_keyspace, schema) as t:
        for c in range(3):
            cql.execute(f"INSERT INTO {t} (k1, k2, c, d, v) VALUES (0, 0, {c}, 0, {c})")
        for filtering in ("", " ALLOW FILTERING"):
            with pytest.raises(InvalidRequest) as error:
                cql.execute(f"SELECT c FROM {t} WHERE {where}{filtering}")
            assert message.format(table=t) in str(error.value)
        assert len(list(cql.execute(f"SELECT c FROM {t} WHERE k1 = 0 AND k2 = 0 AND c > 0 AND c < 3"))) == 2
        assert len(list(cql.execute(f"SELECT c FROM {t} WHERE k1 = 0 AND k2 = 0 AND c > 0 AND (c, d) < (2, 0)"))) == 1


@contextlib.contextmanager
def eight_rows(cql, keyspace):
    """A table keyed (a, b, c, d), with a = 0 and each of b, c, d 0 or 1."""
    schema = "a int, b int, c int, d int, v int, PRIMARY KEY (a, b, c, d)"
    with new_table(cql, keyspace, schema) as t:
        insert = cql.prepare(f"INSERT INTO {t} (a, b, c, d, v) VALUES (0, ?, ?, ?, 0)")
        for b in range(2):
            for c in range(2):
                for d in range(2):
                    cql.execute(insert, [b, c, d])
        yield t


ORDER = "Clustering columns must appear in the PRIMARY KEY order in multi-column relations: "


@pytest.mark.parametrize("where, message", [
    # Out of order, or skipping a column: the relation is quoted as Cassandra prints terms.
    ("(d, c) > (0, 0)", ORDER + "(d, c) > (0, 0)"),
    ("(c, b) = (0, 0)", ORDER + "(c, b) = (0, 0)"),
    ("(b, d) > (0, 0)", ORDER + "(b, d) > (0, 0)"),
    ("b = 0 AND (d, c) > (0, 0)", ORDER + "(d, c) > (0, 0)"),
    ("(d, c) IN ((0, 0), (1, 1))", ORDER + "(d, c) IN ((0, 0), (1, 1))"),
    # Checked before the values: a wrong type does not hide the order.
    ("(c, b) = ('x', 0)", ORDER + "(c, b) = ('x', 0)"),
    ("(d, c) > (0, null)", ORDER + "(d, c) > (0, NULL)"),
    ("(d, c) > (0, (int) 1)", ORDER + "(d, c) > (0, (int)1)"),
    ("(d, c) > (0, [1])", ORDER + "(d, c) > (0, [1])"),
    ("(d, c) > (0, {'a': 1})", ORDER + "(d, c) > (0, {'a': 1})"),
    ("(d, c) > (0, blobasint(0x00000001))", ORDER + "(d, c) > (0, blobasint(0x00000001))"),
    ("(d, c) > (0, -1.5)", ORDER + "(d, c) > (0, -1.5)"),
    ("(b, b) > (0, 0)", 'Column "b" appeared twice in a relation: (b, b) > (0, 0)'),
    # Two bounds on one side (Cassandra lists shared columns from a hash set: the test
    # checks the words before them).
    ("(b, c) > (0, 0) AND (b, c) > (1, 0)", "More than one restriction was found for the start bound on "),
    ("(b, c) < (1, 1) AND (b, c) <= (1, 0)", "More than one restriction was found for the end bound on "),
    ("(b, c, d) > (0, 0, 0) AND (b, c) > (1, 0)", "More than one restriction was found for the start bound on "),
    ("b > 0 AND (b, c) > (0, 0)", "More than one restriction was found for the start bound on b"),
    ("(b, c) < (0, 0) AND b < 9", "More than one restriction was found for the end bound on b"),
    ("(b, c) > (0, 0) AND c > 0",
     'Column "c" cannot be restricted by two inequalities not starting with the same column'),
])
def test_multi_column_relations_cassandra_refuses(cql, test_keyspace, where, message):
    """Refused whatever ALLOW FILTERING says, in Cassandra 5.0's words. Before, such relations
    filtered as written: `(d, c) > (0, 0)` compared the tuple in the order given."""
    with eight_rows(cql, test_keyspace) as t:
        for filtering in ("", " ALLOW FILTERING"):
            with pytest.raises(InvalidRequest) as error:
                cql.execute(f"SELECT a FROM {t} WHERE a = 0 AND {where}{filtering}")
            assert message in str(error.value)
        # In order and on consecutive columns, they select.
        assert len(list(cql.execute(f"SELECT a FROM {t} WHERE a = 0 AND (b, c, d) > (0, 0, 0)"))) == 7
        assert len(list(cql.execute(f"SELECT a FROM {t} WHERE a = 0 AND b = 0 AND (c, d) > (0, 0)"))) == 3
        assert len(list(cql.execute(
            f"SELECT a FROM {t} WHERE a = 0 AND (b, c) > (0, 0) AND (b, c) < (1, 1)"))) == 4


@pytest.mark.parametrize("where, message, filtering", [
    ("(c, d) > (0, 0)", NOT_RESTRICTED.format("c", "b"),
     "Multi-column slice restrictions cannot be used for filtering."),
    ("(c, d) < (1, 1) AND v = 0", NOT_RESTRICTED.format("c", "b"),
     "Multi-column slice restrictions cannot be used for filtering."),
    ("b = 0 AND (d) > (0)", NOT_RESTRICTED.format("d", "c"),
     "Multi-column slice restrictions cannot be used for filtering."),
    ("b > 0 AND (c, d) > (0, 0)", AFTER_SLICE.format("c", "b"),
     "Multi-column slice restrictions cannot be used for filtering."),
    ("(c, d) IN ((0, 0), (1, 1))", NOT_RESTRICTED.format("c", "b"), "Multicolumn IN filters are not supported"),
    # A slice on an earlier column, even written after.
    ("(c, d) > (0, 0) AND b > 0", BEFORE_RESTRICTED.format("c", "b"),
     "Multi-column slice restrictions cannot be used for filtering."),
    # An `=` filters.
    ("(c, d) = (0, 0)", NOT_RESTRICTED.format("c", "b"), None),
])
def test_multi_column_relations_the_read_cannot_serve(cql, test_keyspace, where, message, filtering):
    """A multi-column relation after a gap or a slice could only filter: refused without
    ALLOW FILTERING naming the column, and with it still refused for a slice or an IN, as
    Cassandra 5.0 does. Before, such relations filtered whatever ALLOW FILTERING said."""
    with eight_rows(cql, test_keyspace) as t:
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"SELECT a FROM {t} WHERE a = 0 AND {where}")
        assert message in str(error.value)
        query = f"SELECT a FROM {t} WHERE a = 0 AND {where} ALLOW FILTERING"
        if filtering is None:
            assert len(list(cql.execute(query))) == 2
        else:
            with pytest.raises(InvalidRequest) as error:
                cql.execute(query)
            assert filtering in str(error.value)


@pytest.mark.parametrize("where, message", [
    ("(d, c) > (?, ?)", ORDER + "(d, c) > (?, ?)"),
    ("(d, c) > :x", ORDER + "(d, c) > ?"),
    ("(d, c) IN :x", ORDER + "(d, c) IN ?"),
    ("(b, b) = ?", 'Column "b" appeared twice in a relation: (b, b) = ?'),
    ("(b, c) > (?, ?) AND (b, c) > (?, ?)", "More than one restriction was found for the start bound on "),
    ("b > ? AND b >= ?", "More than one restriction was found for the start bound on b"),
    ("b = ? AND b = ?", "b cannot be restricted by more than one relation if it includes an Equal"),
])
def test_where_clauses_cassandra_refuses_are_refused_at_prepare(cql, test_keyspace, where, message):
    """As Cassandra 5.0, PREPARE refuses what no bound values could make valid, so the
    application learns it before its first execution."""
    with eight_rows(cql, test_keyspace) as t:
        with pytest.raises(InvalidRequest) as error:
            cql.prepare(f"SELECT a FROM {t} WHERE a = 0 AND {where}")
        assert message in str(error.value)


@pytest.mark.parametrize("where, tail", [
    ("k = 0 AND c IN (4, 1, 3)", ""),
    ("k = 0 AND c IN (4, 1, 3, 1)", " ORDER BY c DESC"),
    ("k IN (1, 0) AND c IN (3, 1)", " PER PARTITION LIMIT 4"),
    ("k IN (0, 1) AND c IN (3, 1, 4)", " LIMIT 5"),
    ("k = 0 AND c IN (1, 3) AND d = 2", ""),
    ("k = 0 AND c IN (1, 3) AND d > 0", ""),
    ("k = 1 AND c IN ()", ""),
    ("k = 1 AND c IN (7, 9)", ""),
])
def test_an_in_on_a_clustering_column_pages(cql, test_keyspace, where, tail):
    """An IN on a clustering column, read one slice per value: the rows of the values, in
    clustering order (reversed by ORDER BY DESC), each once, whatever the page size, with
    PER PARTITION LIMIT counting a partition's rows over all its values and LIMIT all rows."""
    schema = "k int, c int, d int, v int, PRIMARY KEY (k, c, d)"
    with new_table(cql, test_keyspace, schema) as t:
        insert = cql.prepare(f"INSERT INTO {t} (k, c, d, v) VALUES (?, ?, ?, ?)")
        data = [(k, c, d, 100 * k + 10 * c + d) for k in range(2) for c in range(5) for d in range(3)]
        for row in data:
            cql.execute(insert, row)
        query = f"SELECT k, c, d, v FROM {t} WHERE {where}{tail}"
        whole = [tuple(r) for r in cql.execute(query)]
        # What the restrictions select, by the data model: the IN's partitions in the order of
        # their key bytes (as Cassandra sorts them), rows in clustering order.
        ks = [int(x) for x in where.split("k IN (")[1].split(")")[0].split(", ")] if "k IN" in where \
            else [int(where.split("k = ")[1].split(" ")[0])]
        cs = where.split("c IN (")[1].split(")")[0]
        cs = {int(x) for x in cs.split(", ")} if cs else set()
        expected = []
        for k in sorted(set(ks)):
            rows = [r for r in data if r[0] == k and r[1] in cs]
            if "d = 2" in where:
                rows = [r for r in rows if r[2] == 2]
            if "d > 0" in where:
                rows = [r for r in rows if r[2] > 0]
            if "DESC" in tail:
                rows.reverse()
            if "PER PARTITION LIMIT 4" in tail:
                rows = rows[:4]
            expected += rows
        if "LIMIT 5" in tail and "PER PARTITION" not in tail:
            expected = expected[:5]
        assert whole == expected
        for page in (1, 2, 3):
            paged = [tuple(r) for r in cql.execute(SimpleStatement(query, fetch_size=page))]
            assert paged == expected, page


@contextlib.contextmanager
def collections_table(cql, keyspace):
    """Partitions k = 0..2, rows c = 0..2, each with m = {'a': c, 'b': k}, l = [c] and
    v = 10 * k + c."""
    schema = "k int, c int, v int, w text, l list<int>, m map<text, int>, fm frozen<map<text, int>>, PRIMARY KEY (k, c)"
    with new_table(cql, keyspace, schema) as t:
        insert = cql.prepare(f"INSERT INTO {t} (k, c, v, w, l, m, fm) VALUES (?, ?, ?, ?, ?, ?, ?)")
        for k in range(3):
            for c in range(3):
                m = {"a": c, "b": k}
                cql.execute(insert, [k, c, 10 * k + c, f"w{c}", [c], m, m])
        yield t


def test_a_map_entry_filters(cql, test_keyspace):
    """`m[key] = value` on a non-frozen map selects the rows whose map holds that entry, with
    ALLOW FILTERING, as in Cassandra 5.0 (before: refused as unsupported)."""
    with collections_table(cql, test_keyspace) as t:
        def rows(where, *values):
            query = f"SELECT k, c FROM {t} WHERE {where} ALLOW FILTERING"
            if values:
                return sorted(tuple(r) for r in cql.execute(cql.prepare(query), values))
            return sorted(tuple(r) for r in cql.execute(query))
        assert rows("m['a'] = 1") == [(0, 1), (1, 1), (2, 1)]
        assert rows("k = 2 AND m['b'] = 2") == [(2, 0), (2, 1), (2, 2)]
        assert rows("m['a'] = 1 AND m['b'] = 0") == [(0, 1)]
        assert rows("m['zz'] = 1") == []
        assert rows("m[?] = ?", "b", 1) == [(1, 0), (1, 1), (1, 2)]
        with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
            cql.execute(f"SELECT k FROM {t} WHERE m['a'] = 1")


@pytest.mark.parametrize("where, message", [
    ("m['a'] > 1", "Only EQ relations are supported on map entries"),
    ("m['a'] = null", "Unsupported null map value for column m"),
    ("fm['a'] = 1", "Map-entry equality predicates on frozen map column fm are not supported"),
    ("l[0] = 1", "Indexes on list entries (l[index] = value) are not currently supported."),
    ("m['a'] = 'x'", 'Invalid STRING constant (x) for "value(m)" of type int'),
    ("k = 'it''s'", 'Invalid STRING constant (it\'s) for "k" of type int'),
    ("l = [0]", "Collection column 'l' (list<int>) cannot be restricted by a '=' relation"),
    ("m IN ({'a': 1})", "Collection column 'm' (map<text, int>) cannot be restricted by a 'IN' relation"),
    ("l CONTAINS KEY 1", "Cannot use CONTAINS KEY on non-map column l"),
    ("v CONTAINS 1", "Cannot use CONTAINS on non-collection column v"),
    ("w LIKE 'w1%'", "LIKE restriction is only supported on properly indexed columns. w LIKE 'w1%' is not valid."),
])
def test_collection_and_pattern_restrictions_refused_in_cassandra_words(cql, test_keyspace, where, message):
    with collections_table(cql, test_keyspace) as t:
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"SELECT k FROM {t} WHERE {where} ALLOW FILTERING")
        assert message in str(error.value)


def test_token_relations_beside_a_restricted_key_select_among_its_partitions(cql, test_keyspace):
    """As in Cassandra 5.0, token() relations next to a fully restricted partition key need no
    ALLOW FILTERING: they keep the partitions whose token is in range."""
    with collections_table(cql, test_keyspace) as t:
        tokens = {k: cql.execute(f"SELECT token(k) FROM {t} WHERE k = {k} LIMIT 1").one()[0]
                  for k in range(3)}
        low = min(tokens.values())
        query = f"SELECT DISTINCT k FROM {t} WHERE k IN (0, 1, 2) AND token(k) > {low}"
        assert sorted(r.k for r in cql.execute(query)) == sorted(k for k in tokens if tokens[k] > low)
        assert list(cql.execute(f"SELECT k FROM {t} WHERE k = 0 AND token(k) < {tokens[0]}")) == []
        assert len(list(cql.execute(f"SELECT k FROM {t} WHERE k = 0 AND token(k) >= {tokens[0]}"))) == 3


@pytest.mark.parametrize("statement, message", [
    ("UPDATE {t} SET v = v + 1 WHERE k = 0 AND c = 0", "Invalid operation (v = v + 1) for non counter column v"),
    ("UPDATE {t} SET w = w - 'x' WHERE k = 0 AND c = 0", "Invalid operation (w = w - 'x') for non counter column w"),
    ("UPDATE {t} SET v = 1 + v WHERE k = 0 AND c = 0", "Invalid operation (v = 1 - v) for non list column v"),
    ("UPDATE {t} SET fl = fl + [1] WHERE k = 0 AND c = 0",
     "Invalid operation (fl = fl + [1]) for frozen collection column fl"),
    ("UPDATE {t} SET fl = fl - [1] WHERE k = 0 AND c = 0",
     "Invalid operation (fl = fl - [1]) for frozen collection column fl"),
    ("DELETE v FROM {t} WHERE k = 1", "Range deletions are not supported for specific columns"),
    ("DELETE v FROM {t} WHERE k = 1 AND c > 0", "Range deletions are not supported for specific columns"),
    ("UPDATE {t} SET v = 3 WHERE k = 0 AND c > 0",
     "Slice restrictions are not supported on the clustering columns in UPDATE statements"),
    ("UPDATE {t} SET v = 3 WHERE k > 0 AND c = 0",
     "Only EQ and IN relation are supported on the partition key (unless you use the token() function) "
     "for UPDATE statements"),
    ("DELETE FROM {t} WHERE k > 0",
     "Only EQ and IN relation are supported on the partition key (unless you use the token() function) "
     "for DELETE statements"),
    ("INSERT INTO {t} (k, c, v, v) VALUES (9, 9, 1, 2)", "The column names contains duplicates"),
    ("DELETE FROM {t} WHERE k = 0 AND c = 0 AND v = 1 AND w = 'x'",
     "Non PRIMARY KEY columns found in where clause: v, w "),
])
def test_modifications_refused_in_cassandra_words(cql, test_keyspace, statement, message):
    schema = "k int, c int, v int, w text, fl frozen<list<int>>, l list<int>, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        with pytest.raises(InvalidRequest) as error:
            cql.execute(statement.format(t=t))
        assert message in str(error.value)


@pytest.mark.parametrize("assignment, message", [
    ("v = v + ?", "Invalid operation (v = v + ?) for non counter column v"),
    ("v = v - ?", "Invalid operation (v = v - ?) for non counter column v"),
    ("w = w + ?", "Invalid operation (w = w + ?) for non counter column w"),
    ("v = v + 1", "Invalid operation (v = v + 1) for non counter column v"),
    ("fl = fl + ?", "Invalid operation (fl = fl + ?) for frozen collection column fl"),
    ("fl = fl - ?", "Invalid operation (fl = fl - ?) for frozen collection column fl"),
    ("v[?] = ?", "Invalid operation (v[?] = ?) for non collection column v"),
    ("s[?] = ?", "Invalid operation (s[?] = ?) for set column s"),
    ("fl[?] = ?", "Invalid operation (fl[?] = ?) for frozen collection column fl"),
    ("c = ?", "PRIMARY KEY part c found in SET part"),
])
def test_modifications_refused_at_prepare(cql, test_keyspace, assignment, message):
    """Cassandra refuses an operation the column's type has not when the statement is
    prepared, not at its first execution; in a prepared BATCH too."""
    schema = "k int, c int, v int, w text, fl frozen<list<int>>, s set<int>, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        update = f"UPDATE {t} SET {assignment} WHERE k = ? AND c = 0"
        for statement in (update, f"BEGIN BATCH {update} APPLY BATCH"):
            with pytest.raises(InvalidRequest) as error:
                cql.prepare(statement)
            assert message in str(error.value)


def test_a_column_set_twice_is_refused_at_prepare(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int") as t:
        with pytest.raises(SyntaxException) as error:
            cql.prepare(f"UPDATE {t} SET v = ?, v = ? WHERE k = ?")
        assert "Multiple incompatible setting of column v" in str(error.value)


def test_a_column_set_and_assigned_again_is_a_syntax_error(cql, test_keyspace):
    """As Cassandra's parser: a column set outright cannot be assigned again in the same
    UPDATE; additions to one collection can."""
    schema = "k int PRIMARY KEY, v int, l list<int>"
    with new_table(cql, test_keyspace, schema) as t:
        for assignments in ("v = 1, v = 2", "l = [1], l = l + [2]"):
            with pytest.raises(SyntaxException) as error:
                cql.execute(f"UPDATE {t} SET {assignments} WHERE k = 0")
            assert "Multiple incompatible setting of column" in str(error.value)
        cql.execute(f"UPDATE {t} SET l = l + [1], l = l + [2] WHERE k = 0")
        assert cql.execute(f"SELECT l FROM {t} WHERE k = 0").one().l == [1, 2]


@pytest.mark.parametrize("relation, message", [
    # A multi-column IN takes tuple literals or markers, not both.
    ("(c, d) IN ((0, 0), ?)", "mismatched input '?' expecting '('"),
    ("(c, d) IN ((0, 0), :x)", "mismatched input ':' expecting '('"),
    ("(c, d) IN (?, (0, 0))", "no viable alternative at input '('"),
    ("(c, d) IN ((0, 0), 5)", "mismatched input '5' expecting '('"),
    ("(c, d) IN (?, 5)", "no viable alternative at input '5'"),
    # A multi-column relation compares with a tuple literal or a marker only.
    ("(c, d) IN (0, 1)", "no viable alternative at input '0'"),
    ("(c) IN (0, 1)", "no viable alternative at input '0'"),
    ("(c, d) IN 5", "no viable alternative at input '5'"),
    ("(c, d) = 5", "no viable alternative at input '5'"),
    ("(c) = 0", "no viable alternative at input '0'"),
    ("(c, d) > 0", "no viable alternative at input '0'"),
    ("(c, d) = [0, 0]", "no viable alternative at input '['"),
    ("(c, d) IN ([0, 0])", "no viable alternative at input '['"),
])
def test_multi_column_values_outside_the_grammar_are_syntax_errors(
    cql, test_keyspace, relation, message
):
    """Cassandra's grammar takes `tupleLiteral | marker` after a multi-column operator, and
    for IN a marker or a list of tuple literals or of markers: anything else is a syntax
    error, not a value of the wrong type."""
    with new_table(cql, test_keyspace, "k int, c int, d int, v int, PRIMARY KEY (k, c, d)") as t:
        with pytest.raises(SyntaxException) as error:
            cql.prepare(f"SELECT v FROM {t} WHERE k = 0 AND {relation}")
        assert message in str(error.value)


def test_multi_column_values_the_grammar_takes(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, d int, v int, PRIMARY KEY (k, c, d)") as t:
        cql.execute(f"INSERT INTO {t} (k, c, d, v) VALUES (0, 0, 0, 1)")
        cql.execute(f"INSERT INTO {t} (k, c, d, v) VALUES (0, 1, 1, 2)")
        select = f"SELECT v FROM {t} WHERE k = 0 AND "
        for relation, bound, expected in [
            ("(c, d) IN ((0, 0), (1, 1))", (), [1, 2]),
            ("(c, d) IN ((0, ?), (1, 1))", (0,), [1, 2]),
            ("(c, d) IN (?, ?)", ((0, 0), (1, 1)), [1, 2]),
            ("(c, d) IN ?", ([(1, 1)],), [2]),
            ("(c, d) IN ()", (), []),
            ("(c) IN ((0), (1))", (), [1, 2]),
            ("(c) = (0)", (), [1]),
            ("(c, d) = ?", ((1, 1),), [2]),
            ("(c, d) > (0, 0)", (), [2]),
        ]:
            rows = cql.execute(cql.prepare(select + relation), bound)
            assert sorted(r.v for r in rows) == expected, relation


@pytest.mark.parametrize("where, expected", [
    ("c > null", [0, 1, 2]),
    ("c >= null AND c < 2", [0, 1]),
    ("c < null", []),
    ("c <= null", []),
    ("c = 1 AND dc > null", [1]),
    ("c = 1 AND dc < null", []),
])
def test_a_clustering_slice_bounded_by_null(cql, test_keyspace, where, expected):
    """Cassandra 5.0 bounds a clustering slice at null with the empty value, which sorts before
    every other (before, Helenus refused null there). Ascending columns only: on a descending
    one Cassandra reads the bound in stored order, and Helenus refuses it."""
    schema = "k int, c int, dc decimal, v int, PRIMARY KEY (k, c, dc)"
    with new_table(cql, test_keyspace, schema) as t:
        for c in range(3):
            cql.execute(f"INSERT INTO {t} (k, c, dc, v) VALUES (0, {c}, {c}, {c})")
        rows = cql.execute(f"SELECT c FROM {t} WHERE k = 0 AND {where}")
        assert sorted(r.c for r in rows) == expected
        if where == "c > null":
            prepared = cql.prepare(f"SELECT c FROM {t} WHERE k = 0 AND c > ?")
            assert sorted(r.c for r in cql.execute(prepared, [None])) == expected
        for refused in ("v = null", "v > null", "v IN (null)"):
            with pytest.raises(InvalidRequest, match="Unsupported null value for column v"):
                cql.execute(f"SELECT c FROM {t} WHERE k = 0 AND {refused} ALLOW FILTERING")


DISTINCT_WHERE = "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns."


@pytest.mark.parametrize("query, message", [
    # DISTINCT restricts partition key and static columns only, whatever ALLOW FILTERING says.
    ("SELECT DISTINCT k1, k2 FROM {t} WHERE c = 1", DISTINCT_WHERE),
    ("SELECT DISTINCT k1, k2 FROM {t} WHERE c = 1 ALLOW FILTERING", DISTINCT_WHERE),
    ("SELECT DISTINCT k1, k2 FROM {t} WHERE v = 'x' ALLOW FILTERING", DISTINCT_WHERE),
    ("SELECT DISTINCT k1, k2 FROM {t} WHERE k1 = 0 AND k2 = 0 AND c > 0", DISTINCT_WHERE),
    ("SELECT DISTINCT k1, k2 FROM {t} WHERE (c, d) = (0, 0) ALLOW FILTERING", DISTINCT_WHERE),
    # token() takes every partition key column, once each, in order.
    ("SELECT * FROM {t} WHERE token(k1) > 0",
     "The token() function must be applied to all partition key components or none of them"),
    ("SELECT * FROM {t} WHERE token(k1, k1) > 0",
     "The token() function must be applied to all partition key components or none of them"),
    ("SELECT * FROM {t} WHERE token(k1, k2, c) > 0",
     "The token() function must contains only partition key components"),
    ("SELECT * FROM {t} WHERE token(k1, k2, k1) > 0",
     "The token() function contains duplicate partition key components"),
    ("SELECT * FROM {t} WHERE token(k2, k1) > 0",
     "The token function arguments must be in the partition key order: k1, k2"),
    ("SELECT * FROM {t} WHERE token(k1, nosuch) > 0", "Undefined column name nosuch"),
    # != is refused on every column, the relation quoted.
    ("SELECT * FROM {t} WHERE k1 = 0 AND k2 = 0 AND c != 1", 'Unsupported "!=" relation: c != 1'),
    ("SELECT * FROM {t} WHERE k1 = 0 AND k2 = 0 AND v != 'x' ALLOW FILTERING",
     'Unsupported "!=" relation: v != \'x\''),
    ("SELECT * FROM {t} WHERE k1 = 0 AND k2 = 0 AND (c, d) > (0, null)",
     "Invalid null value in condition for column d"),
])
def test_where_clauses_refused_in_cassandra_words(cql, test_keyspace, query, message):
    """Each refused as Cassandra 5.0 refuses it, at PREPARE too when it has no values to
    wait for."""
    schema = "k1 int, k2 int, c int, d int, v text, s int static, PRIMARY KEY ((k1, k2), c, d)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k1, k2, c, d, v, s) VALUES (0, 0, 1, 0, 'x', 0)")
        with pytest.raises(InvalidRequest) as error:
            cql.execute(query.format(t=t))
        assert message in str(error.value)
        if "null" not in query:
            with pytest.raises(InvalidRequest) as error:
                cql.prepare(query.format(t=t))
            assert message in str(error.value)
        # A static column restricts a DISTINCT query (it filters).
        rows = list(cql.execute(f"SELECT DISTINCT k1, k2 FROM {t} WHERE s = 0 ALLOW FILTERING"))
        assert [(r.k1, r.k2) for r in rows] == [(0, 0)]


@pytest.mark.parametrize("where, message, rows", [
    ("k = 0 AND b = 1", NOT_RESTRICTED.format("b", "a"), 6),
    ("k = 0 AND b > 1", NOT_RESTRICTED.format("b", "a"), 6),
    ("b = 1", NOT_RESTRICTED.format("b", "a"), 6),
    ("k IN (0, 1) AND b = 1", NOT_RESTRICTED.format("b", "a"), 6),
    ("k = 0 AND c = 1", NOT_RESTRICTED.format("c", "a"), 9),
    ("k = 0 AND c = 1 AND a = 1", NOT_RESTRICTED.format("c", "b"), 3),
    ("k = 0 AND a IN (1, 2) AND c = 1", NOT_RESTRICTED.format("c", "b"), 6),
    ("k = 0 AND a = 1 AND c > 0", NOT_RESTRICTED.format("c", "b"), 3),
    # The clustering column's message wins over the regular column's need for filtering.
    ("v = 1 AND b = 1", NOT_RESTRICTED.format("b", "a"), 1),
    # Restrictions are taken in the order written.
    ("k = 0 AND a > 1 AND b = 1", AFTER_SLICE.format("b", "a"), 2),
    ("k = 0 AND a > 0 AND a < 2 AND b = 1", AFTER_SLICE.format("b", "a"), 2),
    ("k = 0 AND a = 1 AND b > 0 AND c = 1", AFTER_SLICE.format("c", "b"), 2),
    ("k = 0 AND (a, b) > (1, 1) AND c = 1", AFTER_SLICE.format("c", "a"), 4),
    ("k = 0 AND b = 1 AND a > 1", BEFORE_RESTRICTED.format("b", "a"), 2),
    # No clustering column to name: the plain request for ALLOW FILTERING.
    ("k = 0 AND a = 1 AND v = 1", "use ALLOW FILTERING", 1),
    ("a = 1", "use ALLOW FILTERING", 6),
])
def test_clustering_restrictions_a_slice_cannot_serve(cql, test_keyspace, where, message, rows):
    """Without ALLOW FILTERING, clustering restrictions that are not an `=` prefix and one
    slice are refused naming the column, as Cassandra 5.0 words it; with it, they filter."""
    schema = "k int, a int, b int, c int, v int, PRIMARY KEY (k, a, b, c)"
    with new_table(cql, test_keyspace, schema) as t:
        insert = cql.prepare(f"INSERT INTO {t} (k, a, b, c, v) VALUES (0, ?, ?, ?, ?)")
        for a in range(3):
            for b in range(3):
                for c in range(2):
                    cql.execute(insert, [a, b, c, a + b + c])
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"SELECT k, a, b, c FROM {t} WHERE {where}")
        assert message in str(error.value)
        assert len(list(cql.execute(f"SELECT k, a, b, c FROM {t} WHERE {where} ALLOW FILTERING"))) == rows


def test_a_counter_batch_of_non_counter_statements_is_refused(cql, test_keyspace):
    """As Cassandra 5.0, in CQL text, at PREPARE and as a protocol BATCH of type COUNTER."""
    from cassandra.query import BatchStatement, BatchType
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int") as t:
        message = "Cannot include non-counter statement in a counter batch"
        text = f"BEGIN COUNTER BATCH INSERT INTO {t} (k, v) VALUES (1, 1); APPLY BATCH"
        for run in (cql.execute, cql.prepare):
            with pytest.raises(InvalidRequest) as error:
                run(text)
            assert message in str(error.value)
        batch = BatchStatement(batch_type=BatchType.COUNTER)
        batch.add(cql.prepare(f"INSERT INTO {t} (k, v) VALUES (?, ?)"), (2, 2))
        with pytest.raises(InvalidRequest) as error:
            cql.execute(batch)
        assert message in str(error.value)
        assert list(cql.execute(f"SELECT k FROM {t}")) == []


@pytest.mark.parametrize("where, names, routing", [
    ("k = :x AND k2 = :y", ["x", "y"], [0, 1]),
    ("k2 = :x AND k = :y", ["x", "y"], [1, 0]),
    ("k = ? AND k2 = ? AND (c, d) IN ?", ["k", "k2", "in(c,d)"], [0, 1]),
    ("k = ? AND k2 = ? AND (c) IN ?", ["k", "k2", "in(c)"], [0, 1]),
    ("k = ? AND k2 = ? AND (c, d) > (?, ?)", ["k", "k2", "c", "d"], [0, 1]),
    ("k = ? AND k2 = ? AND (c, d) IN (?, ?)", ["k", "k2", "(c,d)", "(c,d)"], [0, 1]),
    ("l CONTAINS ? ALLOW FILTERING", ["value(l)"], None),
    ("m CONTAINS ? ALLOW FILTERING", ["value(m)"], None),
    ("m CONTAINS KEY ? ALLOW FILTERING", ["key(m)"], None),
])
def test_bind_variables_are_named_and_routed_as_cassandra_does(cql, test_keyspace, where, names, routing):
    """Cassandra's names for bind variables, and the partition key indexes a driver routes by,
    which go by the column a marker binds, not by a named marker's own name."""
    schema = "k int, k2 int, c int, d int, l list<int>, m map<text, int>, PRIMARY KEY ((k, k2), c, d)"
    with new_table(cql, test_keyspace, schema) as t:
        prepared = cql.prepare(f"SELECT * FROM {t} WHERE {where}")
        assert [c.name for c in prepared.column_metadata] == names
        assert prepared.routing_key_indexes == routing


def test_named_markers_of_an_insert_route_by_their_columns(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, k2 int, c int, PRIMARY KEY ((k, k2), c)") as t:
        prepared = cql.prepare(f"INSERT INTO {t} (k2, k, c) VALUES (:b, :a, ?)")
        assert prepared.routing_key_indexes == [1, 0]
        cql.execute(prepared, {"a": 1, "b": 2, "c": 3})
        assert cql.execute(f"SELECT k, k2, c FROM {t}").one() == (1, 2, 3)


@pytest.mark.parametrize("statement, message", [
    ("UPDATE {t} SET m = {{null: 'a'}} WHERE k = 1", "null is not supported inside collections"),
    ("UPDATE {t} SET m = {{1: null}} WHERE k = 1", "null is not supported inside collections"),
    ("UPDATE {t} SET st = st + {{null}} WHERE k = 1", "null is not supported inside collections"),
    ("UPDATE {t} SET l = [null] + l WHERE k = 1", "null is not supported inside collections"),
    ("INSERT INTO {t} (k, st) VALUES (2, {{'a', null}})", "null is not supported inside collections"),
    ("UPDATE {t} SET m = m + {{1: null}} WHERE k = 1",
     "Value for a map addition has to be a map, but was: '{{1: NULL}}'"),
    ("UPDATE {t} SET m = m - {{null}} WHERE k = 1",
     "Value for a map substraction has to be a set, but was: '{{NULL}}'"),
    ("DELETE st[null] FROM {t} WHERE k = 1", "Invalid null set element"),
    ("DELETE m[null] FROM {t} WHERE k = 1", "Invalid null map key"),
    ("DELETE l[null] FROM {t} WHERE k = 1", "Invalid null value for list index"),
])
def test_nulls_inside_collections_refused_in_cassandra_words(cql, test_keyspace, statement, message):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, l list<int>, st set<text>, m map<int, text>") as t:
        with pytest.raises(InvalidRequest) as error:
            cql.execute(statement.format(t=t))
        assert message.format() in str(error.value)


@pytest.mark.parametrize("column, literal, message", [
    ("ts", "'bogus'", "Unable to parse a date/time from 'bogus'"),
    ("d", "'2020-02-30'", "Unable to coerce '2020-02-30' to a formatted date (long)"),
    ("tm", "'25:00:00'", "(TimeType) Unable to coerce '25:00:00' to a formatted time (long)"),
    ("ip", "'256.1.1.1'", "Unable to make inet address from '256.1.1.1'"),
    ("b", "0xabc", "cannot parse 'abc' as hex bytes"),
    ("ti", "128", "Unable to make byte from '128'"),
    ("si", "-32769", "Unable to make short from '-32769'"),
    ("bi", "9223372036854775808", "Unable to make long from '9223372036854775808'"),
    ("a", "'é'", "Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: "
                 "Input length = 1"),
    ("ti", "'x'", "Invalid STRING constant (x) for \"ti\" of type tinyint"),
    ("ts", "99999999999999999999", "Unable to make long (for date) from: '99999999999999999999'"),
    ("tm", "'10:00:00.1234567891'", "(TimeType) Unable to coerce '10:00:00.1234567891' to a formatted time (long)"),
    ("tm", "-1", "Unable to make long (for time) from: '-1'"),
    ("d", "-1", "Unable to make unsigned int (for date) from: '-1'"),
])
def test_constants_that_do_not_parse_are_refused_in_cassandra_words(cql, test_keyspace, column, literal, message):
    """A constant of a kind the type takes that does not parse is refused in the type's own
    words; one of a kind it does not take names both (Cassandra 5.0)."""
    schema = ("k int PRIMARY KEY, ts timestamp, d date, tm time, ip inet, b blob, ti tinyint, "
              "si smallint, bi bigint, a ascii")
    with new_table(cql, test_keyspace, schema) as t:
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"INSERT INTO {t} (k, {column}) VALUES (1, {literal})")
        assert message in str(error.value)


# --- an empty IN ------------------------------------------------------------------------------


@pytest.mark.parametrize("statement, values", [
    ("DELETE FROM {t} WHERE k = 0 AND c = 1 AND d IN ()", None),
    ("DELETE FROM {t} WHERE k = 0 AND c IN ()", None),
    ("DELETE FROM {t} WHERE k = 0 AND (c, d) IN ()", None),
    ("DELETE FROM {t} WHERE k = 0 AND (c, d) IN () AND e > 0", None),
    ("DELETE FROM {t} WHERE k = 0 AND c IN () AND d > 0", None),
    ("DELETE v FROM {t} WHERE k = 0 AND c = 1 AND d IN () AND e = 0", None),
    ("DELETE v FROM {t} WHERE k = 0 AND (c, d, e) IN ()", None),
    ("DELETE FROM {t} WHERE k IN ()", None),
    ("DELETE FROM {t} WHERE k IN () AND c = 1 AND d = 1 AND e = 1", None),
    ("UPDATE {t} SET v = 5 WHERE k = 0 AND c = 1 AND d IN () AND e = 0", None),
    ("UPDATE {t} SET v = 5, s = 5 WHERE k = 0 AND c IN () AND d = 1 AND e = 0", None),
    ("UPDATE {t} SET v = 5 WHERE k = 0 AND (c, d, e) IN ()", None),
    ("UPDATE {t} SET v = 5, s = 5 WHERE k IN () AND c = 1 AND d = 1 AND e = 0", None),
    ("UPDATE {t} SET s = 5 WHERE k IN ()", None),
    ("DELETE FROM {t} WHERE k = 0 AND c IN ?", [[]]),
    ("DELETE FROM {t} WHERE k = 0 AND (c, d) IN ?", [[]]),
    ("DELETE FROM {t} WHERE k IN ?", [[]]),
    ("UPDATE {t} SET v = 5, s = 5 WHERE k = 0 AND c = 1 AND d = 1 AND e IN ?", [[]]),
    ("UPDATE {t} SET v = 5 WHERE k IN ? AND c = 1 AND d = 1 AND e = 0", [[]]),
    ("BEGIN BATCH DELETE FROM {t} WHERE k = 0 AND c IN (); "
     "UPDATE {t} SET v = 9, s = 9 WHERE k = 0 AND c = 2 AND d IN () AND e = 0 APPLY BATCH", None),
])
def test_an_empty_in_writes_nothing(cql, test_keyspace, statement, values):
    """An empty IN on the partition key or a clustering column selects no row: Cassandra
    writes no mutation at all (not the statement's static columns either). Before, an empty
    IN on a clustering column made a DELETE delete the whole partition (its prefix was taken
    as empty) and an UPDATE fail with `Some clustering keys are missing`."""
    schema = "k int, c int, d int, e int, s int STATIC, v int, PRIMARY KEY (k, c, d, e)"
    with new_table(cql, test_keyspace, schema) as t:
        insert = cql.prepare(f"INSERT INTO {t} (k, c, d, e, s, v) VALUES (0, ?, ?, ?, 0, 0)")
        for c in range(3):
            for d in range(2):
                cql.execute(insert, [c, d, 0])
        before = list(cql.execute(f"SELECT * FROM {t}"))
        text = statement.format(t=t)
        if values is None:
            cql.execute(text)
        else:
            cql.execute(cql.prepare(text), values)
        assert list(cql.execute(f"SELECT * FROM {t}")) == before


@pytest.mark.parametrize("query", [
    "SELECT * FROM {t} WHERE k IN ()",
    "SELECT * FROM {t} WHERE k = 0 AND c IN ()",
    "SELECT * FROM {t} WHERE k = 0 AND c = 1 AND d IN ()",
    "SELECT * FROM {t} WHERE k = 0 AND (c, d) IN ()",
    "SELECT * FROM {t} WHERE k = 0 AND (c, d) IN () AND e > 0",
    "SELECT * FROM {t} WHERE k IN () ORDER BY c DESC",
    "SELECT * FROM {t} WHERE k IN (0, 1) AND c IN () ORDER BY c DESC",
    "SELECT * FROM {t} WHERE k IN (0, 1) AND c > 2 AND c < 1 ORDER BY c DESC",
    "SELECT * FROM {t} WHERE k IN (0, 1) AND (c, d) > (2, 0) AND (c, d) < (1, 0) ORDER BY c DESC",
    "SELECT DISTINCT k, s FROM {t} WHERE k IN ()",
])
def test_an_empty_in_or_crossed_bounds_select_nothing(cql, test_keyspace, query):
    """Whatever the page size: Cassandra answers a read that selects nothing before it would
    page, so ORDER BY with an IN on the partition key is not refused then."""
    schema = "k int, c int, d int, e int, s int STATIC, v int, PRIMARY KEY (k, c, d, e)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, c, d, e, s, v) VALUES (0, 1, 1, 1, 0, 0)")
        for fetch_size in (None, 2):
            assert list(cql.execute(SimpleStatement(query.format(t=t), fetch_size=fetch_size))) == []
        if "IN ()" in query and "DISTINCT" not in query:
            prepared = cql.prepare(query.format(t=t).replace("IN ()", "IN ?"))
            assert list(cql.execute(prepared, [[]])) == []


@pytest.mark.parametrize("selection, refused", [
    ("*", True), ("k, s, v", True), ("k", True), ("c, d", True), ("JSON k", True),
    ("v", False), ("k, v", False), ("writetime(v)", False),
])
def test_an_empty_in_on_every_clustering_column_reads_static_rows(cql, test_keyspace, selection, refused):
    """With `=` or IN on every clustering column, Cassandra still reads the partitions of an
    empty IN for their static rows when it fetches the static columns (for `*`, a selection
    naming one, or naming key columns only): the read is then paged, and refused with ORDER BY
    and an IN on the partition key (rows are never returned)."""
    schema = "k int, c int, d int, s int STATIC, v int, PRIMARY KEY (k, c, d)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, c, d, s, v) VALUES (0, 1, 1, 5, 5)")
        for where in ("c IN () AND d = 1", "(c, d) IN ()", "c = 1 AND d IN ()"):
            query = SimpleStatement(f"SELECT {selection} FROM {t} WHERE k IN (0, 1) AND {where} "
                                    "ORDER BY c DESC", fetch_size=10)
            if refused:
                with pytest.raises(InvalidRequest, match="Cannot page queries with both ORDER BY"):
                    cql.execute(query)
            else:
                assert list(cql.execute(query)) == []
            unordered = f"SELECT {selection} FROM {t} WHERE k IN (0, 1) AND {where}"
            assert list(cql.execute(SimpleStatement(unordered, fetch_size=10))) == []


def test_an_aggregate_over_an_empty_in_with_order_by_is_refused_when_paged(cql, test_keyspace):
    """Unlike rows, an aggregate is always paged by Cassandra: `k IN ()` is an IN, so with
    ORDER BY it is refused as any paged post-query ordering is."""
    with new_table(cql, test_keyspace, "k int, c int, PRIMARY KEY (k, c)") as t:
        query = f"SELECT count(*) FROM {t} WHERE k IN () ORDER BY c DESC"
        with pytest.raises(InvalidRequest, match="Cannot page queries with both ORDER BY and a IN"):
            cql.execute(SimpleStatement(query, fetch_size=10))
        assert list(cql.execute(f"SELECT count(*) FROM {t} WHERE k IN ()")) == [(0,)]


def test_an_in_of_equal_values_addresses_the_first_written(cql, test_keyspace):
    """Decimal partition keys 1, 1.0 and 1.00 are equal values with different bytes, so
    different partitions. Cassandra collects an IN's values in a sorted set, which keeps the
    first written of equal ones: `k IN (1.0, 1)` reads, updates or deletes partition 1.0 only.
    Before, Helenus addressed every partition named."""
    schema = "k decimal, c int, v int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        def partitions():
            return sorted((str(r.k), r.v) for r in cql.execute(f"SELECT k, v FROM {t}"))
        for k in ("1.0", "1", "1.00", "1000", "1E+3"):
            cql.execute(f"INSERT INTO {t} (k, c, v) VALUES ({k}, 0, 0)")
        rows = [(str(r.k), r.v) for r in cql.execute(f"SELECT k, v FROM {t} WHERE k IN (1.0, 1000, 1, 1E+3)")]
        assert rows == [("1.0", 0), ("1000", 0)]
        rows = [str(r.k) for r in cql.execute(f"SELECT k FROM {t} WHERE k IN (1.00, 1, 1.0)")]
        assert rows == ["1.00"]
        prepared = cql.prepare(f"SELECT k FROM {t} WHERE k IN ?")
        rows = [str(r.k) for r in cql.execute(prepared, [[Decimal("1"), Decimal("1.0")]])]
        assert rows == ["1"]
        cql.execute(f"UPDATE {t} SET v = 7 WHERE k IN (1, 1.0, 1000) AND c = 0")
        assert partitions() == [("1", 7), ("1.0", 0), ("1.00", 0), ("1000", 7), ("1E+3", 0)]
        cql.execute(f"DELETE FROM {t} WHERE k IN (1E+3, 1000, 1.00)")
        assert partitions() == [("1", 7), ("1.0", 0), ("1000", 7)]


@pytest.mark.parametrize("selection", ["s", "k, s", "s, k", "writetime(s)", "JSON s"])
def test_selecting_only_static_columns_refuses_clustering_restrictions(cql, test_keyspace, selection):
    """Such a selection reads no clustering row, so Cassandra refuses to restrict one; before,
    Helenus answered as if it read the rows."""
    schema = "k int, c int, s int STATIC, v int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        for where in ("k = 0 AND c = 1", "k = 0 AND c > 1", "k = 0 AND (c) >= (1)", "k IN (0, 1) AND c IN (1, 2)"):
            with pytest.raises(InvalidRequest, match="Cannot restrict clustering columns when selecting only static columns"):
                cql.execute(f"SELECT {selection} FROM {t} WHERE {where}")
        # With a non-static column, or none restricted, it reads.
        cql.execute(f"INSERT INTO {t} (k, c, s, v) VALUES (0, 1, 5, 6)")
        assert list(cql.execute(f"SELECT s, v FROM {t} WHERE k = 0 AND c = 1")) == [(5, 6)]
        assert list(cql.execute(f"SELECT s FROM {t} WHERE k = 0")) == [(5,)]


# --- clustering values in the form they were written ------------------------------------------


@pytest.mark.parametrize("order", ["ASC", "DESC"])
def test_clustering_values_read_back_as_written(cql, test_keyspace, order):
    """Equal values with several byte forms (a decimal's scale, a varint's leading zero byte,
    a boolean's non-zero byte, a NaN's payload, a decimal inside a tuple) are one clustering
    row, read back in the form the row was written with, as Cassandra does. Before, Helenus
    returned the canonical form its key encoding keeps: 1E+3 for 1000, 1 for 1.00."""
    schema = ("k int, c decimal, d varint, e boolean, f float, g frozen<tuple<decimal, int>>, v int, "
              "PRIMARY KEY (k, c, d, e, f, g)")
    extra = f"WITH CLUSTERING ORDER BY (c {order}, d {order}, e ASC, f {order}, g ASC)"
    with new_table(cql, test_keyspace, schema, extra) as t:
        written = [
            ("1000", "blobAsVarint(0x0005)", "blobAsBoolean(0x02)", "blobAsFloat(0x7fc00001)", "(2.50, 1)"),
            ("1.00", "5", "true", "NaN", "(0E+3, 2)"),
            ("2.50", "blobAsVarint(0xff80)", "false", "1.5", "(1E+3, 3)"),
        ]
        for i, (c, d, e, f, g) in enumerate(written):
            cql.execute(f"INSERT INTO {t} (k, c, d, e, f, g, v) VALUES ({i}, {c}, {d}, {e}, {f}, {g}, {i})")
        query = (f"SELECT k, c, varintAsBlob(d), booleanAsBlob(e), floatAsBlob(f), g FROM {t} "
                 "WHERE k IN (0, 1, 2)")
        rows = [(r[0], str(r[1]), r[2], r[3], r[4], (str(r[5][0]), r[5][1])) for r in cql.execute(query)]
        assert rows == [
            (0, "1000", b"\x00\x05", b"\x02", b"\x7f\xc0\x00\x01", ("2.50", 1)),
            (1, "1.00", b"\x05", b"\x01", b"\x7f\xc0\x00\x00", ("0E+3", 2)),
            (2, "2.50", b"\xff\x80", b"\x00", b"\x3f\xc0\x00\x00", ("1E+3", 3)),
        ]
        # An equal value in another form addresses the same row, which keeps its form.
        cql.execute(f"UPDATE {t} SET v = 10 WHERE k = 0 AND c = 1E+3 AND d = 5 AND e = true "
                    f"AND f = NaN AND g = (2.5, 1)")
        row = cql.execute(f"SELECT c, varintAsBlob(d), v FROM {t} WHERE k = 0").one()
        assert (str(row[0]), row[1], row[2]) == ("1000", b"\x00\x05", 10)
        assert len(list(cql.execute(f"SELECT * FROM {t} WHERE k = 0"))) == 1
        # In slices, JSON and paging too.
        rows = [str(r.c) for r in cql.execute(f"SELECT c FROM {t} WHERE k = 1 AND c >= 1 AND c <= 1.0")]
        assert rows == ["1.00"]
        assert cql.execute(f"SELECT JSON c FROM {t} WHERE k = 0").one()[0] == '{"c": 1000}'
        paged = [str(r.c) for r in cql.execute(SimpleStatement(f"SELECT c FROM {t}", fetch_size=1))]
        assert sorted(paged) == ["1.00", "1000", "2.50"]


# --- key sizes -----------------------------------------------------------------------------------


def _key_length_refused(cql, statement, values, total):
    with pytest.raises(InvalidRequest) as error:
        cql.execute(statement, values)
    assert f"Key length of {total} is longer than maximum of 65535" in str(error.value)


def test_clustering_values_over_64_kib_are_refused_on_every_write_path(cql, test_keyspace):
    """Cassandra refuses a row whose clustering values hold more than 65535 bytes together
    (its format keeps them under a 16-bit length), whichever statement writes it: INSERT
    (with or without JSON, prepared or not, in a batch or not), UPDATE, DELETE of the row or
    of a column. A prefix or slice of a range deletion is not limited. Nothing is written."""
    with new_table(cql, test_keyspace, "p text, c text, c2 text, v text, PRIMARY KEY (p, c, c2)") as t:
        big = "x" * 70000
        insert = f"INSERT INTO {t} (p, c, c2, v) VALUES (%s, %s, %s, 'v')"
        _key_length_refused(cql, insert, ["a", big, "b"], 70001)
        _key_length_refused(cql, insert, ["a", "b", big], 70001)
        # Composite: each value fits, not both together.
        _key_length_refused(cql, insert, ["a", "x" * 40000, "y" * 40000], 80000)
        _key_length_refused(cql, insert, ["a", "x" * 65535, "b"], 65536)
        _key_length_refused(cql, f"INSERT INTO {t} (p, c, c2, v) VALUES ('a', '{big}', 'b', 'v')", None, 70001)
        _key_length_refused(cql, f"INSERT INTO {t} JSON '{{\"p\": \"a\", \"c\": \"{big}\", \"c2\": \"b\"}}'",
                            None, 70001)
        prepared = cql.prepare(f"INSERT INTO {t} (p, c, c2, v) VALUES (?, ?, 'b', 'v')")
        _key_length_refused(cql, prepared, ["a", big], 70001)
        batch = BatchStatement()
        batch.add(prepared, ["a", "ok"])
        batch.add(prepared, ["a", big])
        _key_length_refused(cql, batch, None, 70001)
        _key_length_refused(cql, f"UPDATE {t} SET v = 'v' WHERE p = 'a' AND c = %s AND c2 = 'b'", [big], 70001)
        _key_length_refused(cql, f"DELETE FROM {t} WHERE p = 'a' AND c = %s AND c2 = 'b'", [big], 70001)
        _key_length_refused(cql, f"DELETE v FROM {t} WHERE p = 'a' AND c = %s AND c2 = 'b'", [big], 70001)
        # The largest clustering that fits is written and read back.
        cql.execute(insert, ["a", "x" * 65534, "b"])
        assert [len(r.c) for r in cql.execute(f"SELECT c FROM {t} WHERE p = 'a'")] == [65534]
        cql.execute(f"DELETE FROM {t} WHERE p = 'a' AND c = %s", [big])
        cql.execute(f"DELETE FROM {t} WHERE p = 'a' AND c > %s", [big])
        assert [len(r.c) for r in cql.execute(f"SELECT c FROM {t} WHERE p = 'a'")] == [65534]


def test_partition_keys_over_64_kib_are_refused_as_cassandra_counts_them(cql, test_keyspace):
    """A single-column key up to 65535 bytes; a composite one as Cassandra checks it, its
    values together, then its encoding (2 bytes of length and an end byte per value)."""
    with new_table(cql, test_keyspace, "p text, q text, v text, PRIMARY KEY ((p, q))") as t:
        insert = f"INSERT INTO {t} (p, q, v) VALUES (%s, %s, 'v')"
        _key_length_refused(cql, insert, ["x" * 40000, "y" * 40000], 80000)
        _key_length_refused(cql, insert, ["x" * 65532, "b"], 65539)
        _key_length_refused(cql, insert, ["x" * 32765, "y" * 32765], 65536)
        cql.execute(insert, ["x" * 32764, "y" * 32764])
        _key_length_refused(cql, f"SELECT * FROM {t} WHERE p = %s AND q = 'b'", ["x" * 70000], 70001)
    with new_table(cql, test_keyspace, "p blob, c int, s int static, PRIMARY KEY (p, c)") as t:
        _key_length_refused(cql, f"INSERT INTO {t} (p, c) VALUES (%s, 1)", [b"x" * 65536], 65536)
        _key_length_refused(cql, f"UPDATE {t} SET s = 1 WHERE p = %s", [b"x" * 65536], 65536)
        _key_length_refused(cql, f"DELETE FROM {t} WHERE p = %s", [b"x" * 65536], 65536)
        _key_length_refused(cql, f"SELECT * FROM {t} WHERE p = %s", [b"x" * 65536], 65536)
        cql.execute(f"INSERT INTO {t} (p, c) VALUES (%s, 1)", [b"x" * 65535])
        assert len(cql.execute(f"SELECT p FROM {t}").one().p) == 65535


# --- refusals of SELECT DISTINCT, filtering and modification WHERE clauses ----------------------


@pytest.mark.parametrize("query, message", [
    ("SELECT DISTINCT p, v FROM {t}",
     "SELECT DISTINCT queries must only request partition key columns and/or static columns (not v)"),
    ("SELECT DISTINCT * FROM {t}",
     "SELECT DISTINCT queries must only request partition key columns and/or static columns (not c)"),
    ("SELECT DISTINCT p, writetime(v) FROM {t}",
     "SELECT DISTINCT queries must only request partition key columns and/or static columns (not v)"),
    ("SELECT DISTINCT p, c FROM {t} GROUP BY p, c",
     "SELECT DISTINCT queries must only request partition key columns and/or static columns (not c)"),
    ("SELECT DISTINCT s FROM {t}", "SELECT DISTINCT queries must request all the partition key columns (missing p)"),
    ("SELECT DISTINCT count(*) FROM {t}",
     "SELECT DISTINCT queries must request all the partition key columns (missing p)"),
    ("SELECT DISTINCT p FROM {t} PER PARTITION LIMIT 1", "PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries"),
    ("SELECT DISTINCT p FROM {t} WHERE p = 0 PER PARTITION LIMIT 2",
     "PER PARTITION LIMIT is not allowed with SELECT DISTINCT queries"),
    ("SELECT DISTINCT p FROM {t} WHERE c = 1 ALLOW FILTERING",
     "SELECT DISTINCT with WHERE clause only supports restriction by partition key and/or static columns."),
    ("SELECT DISTINCT p FROM {t} WHERE p IN (1, 2) ORDER BY c",
     "SELECT DISTINCT queries must only request partition key columns and/or static columns (not c)"),
    ("SELECT DISTINCT p1 FROM {t2}", "SELECT DISTINCT queries must request all the partition key columns (missing p2)"),
    ("SELECT DISTINCT p1, p2, v FROM {t2}",
     "SELECT DISTINCT queries must only request partition key columns and/or static columns (not v)"),
])
def test_select_distinct_refused_as_cassandra_refuses_it(cql, test_keyspace, query, message):
    """At PREPARE as in Cassandra 5.0: DISTINCT reads partition keys and static columns, all
    the key's columns when it reads a range of partitions, and takes no PER PARTITION LIMIT."""
    with new_table(cql, test_keyspace, "p int, c int, v int, s int static, PRIMARY KEY (p, c)") as t, \
            new_table(cql, test_keyspace, "p1 int, p2 int, c int, v int, PRIMARY KEY ((p1, p2), c)") as t2:
        statement = query.format(t=t, t2=t2)
        with pytest.raises(InvalidRequest) as error:
            cql.prepare(statement)
        assert message in str(error.value)
        with pytest.raises(InvalidRequest) as error:
            cql.execute(statement)
        assert message in str(error.value)


def test_select_distinct_of_given_partitions_need_not_read_their_key(cql, test_keyspace):
    with new_table(cql, test_keyspace, "p int, c int, s int static, PRIMARY KEY (p, c)") as t:
        cql.execute(f"INSERT INTO {t} (p, c, s) VALUES (1, 1, 7)")
        assert [tuple(r) for r in cql.execute(f"SELECT DISTINCT s FROM {t} WHERE p = 1")] == [(7,)]
        assert [tuple(r) for r in cql.execute(f"SELECT DISTINCT p, token(p) FROM {t}")][0][0] == 1


@pytest.mark.parametrize("where, message", [
    ("d > 1h", "Slice restrictions are not supported on duration columns"),
    ("d <= 1h", "Slice restrictions are not supported on duration columns"),
    ("p = 1 AND d >= 1h", "Slice restrictions are not supported on duration columns"),
    ("l > [1h]", "Slice restrictions are not supported on collections containing durations"),
    ("fl < [1h]", "Slice restrictions are not supported on collections containing durations"),
    ("m[1] > 1h", "Slice restrictions are not supported on collections containing durations"),
    ("t > (1, 1h)", "Slice restrictions are not supported on tuples containing durations"),
    ("u > {a: 1, d: 1h}", "Slice restrictions are not supported on UDTs containing durations"),
    ("d != 1h", 'Unsupported "!=" relation: d != 1h'),
])
def test_durations_are_not_ordered_so_not_sliced(cql, test_keyspace, where, message):
    """Durations have no order: Cassandra refuses slices on them and on values holding them
    (equality and CONTAINS still filter)."""
    with new_type(cql, test_keyspace, "a int, d duration") as ud:
        schema = (f"p int, c int, d duration, l list<duration>, fl frozen<list<duration>>, m map<int, duration>, "
                  f"t tuple<int, duration>, u frozen<{ud}>, PRIMARY KEY (p, c)")
        with new_table(cql, test_keyspace, schema) as t:
            cql.execute(f"INSERT INTO {t} (p, c, d, l, t) VALUES (1, 1, 1h, [1h], (1, 1h))")
            with pytest.raises(InvalidRequest) as error:
                cql.execute(f"SELECT * FROM {t} WHERE {where} ALLOW FILTERING")
            assert message in str(error.value)
            assert len(list(cql.execute(f"SELECT * FROM {t} WHERE d = 1h ALLOW FILTERING"))) == 1
            assert len(list(cql.execute(f"SELECT * FROM {t} WHERE l CONTAINS 1h ALLOW FILTERING"))) == 1
            assert len(list(cql.execute(f"SELECT * FROM {t} WHERE t = (1, 1h) ALLOW FILTERING"))) == 1


@pytest.mark.parametrize("statement, message", [
    ("SELECT * FROM {t} WHERE p = 1 AND (c) != (1)", 'Unsupported "!=" relation: (c) != (1)'),
    ("SELECT * FROM {t} WHERE token(p) != 1", 'Unsupported "!=" relation: token(p) != 1'),
    ("SELECT * FROM {t} WHERE v != 1 ALLOW FILTERING", 'Unsupported "!=" relation: v != 1'),
    ("DELETE FROM {t} WHERE p = 1 AND c != 1", 'Unsupported "!=" relation: c != 1'),
    ("DELETE FROM {t} WHERE p != 1", 'Unsupported "!=" relation: p != 1'),
    ("UPDATE {t} SET v = 1 WHERE p = 1 AND c != 1", 'Unsupported "!=" relation: c != 1'),
    ("DELETE FROM {t} WHERE p = 1 AND (c) != (1)", 'Unsupported "!=" relation: (c) != (1)'),
    ("DELETE FROM {t} WHERE token(p) != 1", 'Unsupported "!=" relation: token(p) != 1'),
    ("SELECT * FROM {t} WHERE p = max(1)", "Aggregation function are not supported in the where clause"),
    ("SELECT * FROM {t} WHERE p = system.min(1)", "Aggregation function are not supported in the where clause"),
    ("SELECT * FROM {t} WHERE p IN (avg(1))", "Aggregation function are not supported in the where clause"),
    ("SELECT * FROM {t} WHERE p = 1 AND c = abs(sum(1))", "Aggregation function are not supported in the where clause"),
    ("SELECT * FROM {t} WHERE p = count(0x01)", "Aggregation function are not supported in the where clause"),
    ("UPDATE {t} SET v = max(1) WHERE p = 1 AND c = 1", "Aggregation function are not supported in the where clause"),
    ("INSERT INTO {t} (p, c, v) VALUES (1, 1, min(1))", "Aggregation function are not supported in the where clause"),
    ("UPDATE {t} SET l = l + [max(1)] WHERE p = 1 AND c = 1", "Aggregation function are not supported in the where clause"),
    ("SELECT * FROM {t} WHERE p = max(1, 2)", "Invalid number of arguments for function system.max(any)"),
    ("SELECT * FROM {t} WHERE p = count(1, 2)",
     "Invalid number of arguments in call to function system.count: 1 required but 2 provided"),
    ("SELECT * FROM {t} WHERE p = count('a')",
     "Type error: 'a' cannot be passed as argument 0 of function system.count of type blob"),
    ("SELECT * FROM {t} WHERE p = sum(1, 2)",
     "Invalid call to function sum, none of its type signatures match (known type signatures: system.sum : "
     "(bigint) -> bigint, system.sum : (varint) -> varint, system.sum : (counter) -> counter, system.sum : "
     "(tinyint) -> tinyint, system.sum : (smallint) -> smallint, system.sum : (int) -> int, system.sum : "
     "(decimal) -> decimal, system.sum : (float) -> float, system.sum : (double) -> double)"),
    ("SELECT * FROM {t} WHERE p = nosuch(1)", "Unknown function nosuch called"),
    ("SELECT * FROM {t} WHERE p = ks.nosuch(1)", "Unknown function ks.nosuch called"),
    ("UPDATE {t} SET v = 1 WHERE token(p) = 1 AND c = 1",
     "The token function cannot be used in WHERE clauses for UPDATE statements"),
    ("UPDATE {t} SET s = 1 WHERE token(p) > 1", "The token function cannot be used in WHERE clauses for UPDATE statements"),
    ("DELETE FROM {t} WHERE token(p) = 1", "The token function cannot be used in WHERE clauses for DELETE statements"),
    ("DELETE v FROM {t} WHERE token(p) = 1 AND c = 1",
     "The token function cannot be used in WHERE clauses for DELETE statements"),
    ("UPDATE {t} SET v = 1 WHERE token(p) = 1 AND token(p) = 2 AND p = 1 AND c = 1",
     "p cannot be restricted by more than one relation if it includes an Equal"),
    ("UPDATE {t} SET v = 1 WHERE token(c) = 1 AND p = 1 AND c = 1",
     "The token() function must be applied to all partition key components or none of them"),
    ("DELETE s FROM {t} WHERE p = 1 AND c = 1",
     "Invalid restrictions on clustering columns since the DELETE statement modifies only static columns"),
    ("DELETE s FROM {t} WHERE p = 1 AND c > 1",
     "Invalid restrictions on clustering columns since the DELETE statement modifies only static columns"),
    ("DELETE s FROM {t} WHERE p = 1 AND c IN (1, 2)",
     "Invalid restrictions on clustering columns since the DELETE statement modifies only static columns"),
    ("UPDATE {t} SET s = 1 WHERE p = 1 AND c > 1",
     "Invalid restrictions on clustering columns since the UPDATE statement modifies only static columns"),
    ("UPDATE {t} SET s = 1 WHERE p = 1 AND (c) = (1)",
     "Invalid restrictions on clustering columns since the UPDATE statement modifies only static columns"),
    ("UPDATE {t} SET v = 1 WHERE p = 1 AND c CONTAINS 1", "Cannot use UPDATE with CONTAINS"),
    ("DELETE FROM {t} WHERE p = 1 AND c = 1 AND l CONTAINS 1", "Cannot use DELETE with CONTAINS"),
    ("DELETE FROM {t} WHERE p = 1 AND c CONTAINS KEY 1", "Cannot use DELETE with CONTAINS KEY"),
    ("DELETE FROM {t} WHERE p = 1 AND m[1] = 1", "Non PRIMARY KEY columns found in where clause: m "),
    ("DELETE FROM {t} WHERE p = 1 AND c IS NOT NULL", "Unsupported restriction: c IS NOT NULL"),
])
def test_where_clauses_refused_in_cassandras_words(cql, test_keyspace, statement, message):
    """Refused at PREPARE, as Cassandra refuses them, and when queried."""
    with new_table(cql, test_keyspace, "p int, c int, v int, s int static, l list<int>, m map<int, int>, "
                   "PRIMARY KEY (p, c)") as t:
        for run in (cql.prepare, cql.execute):
            with pytest.raises(InvalidRequest) as error:
                run(statement.format(t=t))
            assert message in str(error.value)


def test_token_beside_the_whole_partition_key_filters_updates_and_deletes(cql, test_keyspace):
    """Cassandra accepts token() in an UPDATE or DELETE only beside the whole partition key,
    and then writes only the partitions whose token it admits."""
    with new_table(cql, test_keyspace, "p int, c int, v int, PRIMARY KEY (p, c)") as t:
        cql.execute(f"INSERT INTO {t} (p, c, v) VALUES (1, 0, 0)")
        token = cql.execute(f"SELECT token(p) FROM {t} WHERE p = 1").one()[0]
        cql.execute(f"UPDATE {t} SET v = 1 WHERE p = 1 AND token(p) = {token} AND c = 1")
        cql.execute(f"UPDATE {t} SET v = 2 WHERE p = 1 AND token(p) > {token} AND c = 2")
        cql.execute(f"UPDATE {t} SET v = 3 WHERE p IN (1, 2) AND token(p) >= {token} AND token(p) <= {token} AND c = 3")
        assert sorted(tuple(r) for r in cql.execute(f"SELECT p, c, v FROM {t}")) == \
            [(1, 0, 0), (1, 1, 1), (1, 3, 3)]
        cql.execute(f"DELETE FROM {t} WHERE p = 1 AND token(p) < {token}")
        assert len(list(cql.execute(f"SELECT p FROM {t}"))) == 3
        cql.execute(f"DELETE FROM {t} WHERE token(p) = {token} AND p = 1 AND c = 3")
        assert sorted(tuple(r) for r in cql.execute(f"SELECT p, c, v FROM {t}")) == [(1, 0, 0), (1, 1, 1)]


# --- values Cassandra refuses inside literals ----------------------------------------------------


@pytest.mark.parametrize("literal, message", [
    ("1h1h", "Invalid duration. The hours are specified multiple times"),
    ("-1h1h", "Invalid duration. The hours are specified multiple times"),
    ("1us1µs", "Invalid duration. The microseconds are specified multiple times"),
    ("1m1h", "Invalid duration. The minutes should be after hours"),
    ("1d1y", "Invalid duration. The days should be after years"),
    ("1d1w", "Invalid duration. The days should be after weeks"),
    ("1MO1Y", "Invalid duration. The months should be after years"),
    ("1ms1us1ns1s", "Invalid duration. The nanoseconds should be after seconds"),
    ("2147483648mo", "Invalid duration. The total number of months must be less or equal to 2147483647"),
    ("306783379w", "Invalid duration. The total number of days must be less or equal to 2147483647"),
    ("2562048h", "Invalid duration. The total number of nanoseconds must be less or equal to 2147483647"),
])
def test_duration_literals_take_each_unit_once_in_order(cql, test_keyspace, literal, message):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, d duration") as t:
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"INSERT INTO {t} (k, d) VALUES (0, {literal})")
        assert message in str(error.value)
        cql.execute(f"INSERT INTO {t} (k, d) VALUES (0, 1y1mo1w1d1h1m1s1ms1us1ns)")
        assert cql.execute(f"SELECT d FROM {t} WHERE k = 0").one().d == Duration(13, 8, 3661001001001)


@pytest.mark.parametrize("statement, values, message", [
    ("INSERT INTO {t} (k, c, t) VALUES (0, 0, (?, 1))", [UNSET_VALUE], "Invalid unset value for tuple field number 0"),
    ("INSERT INTO {t} (k, c, ft) VALUES (0, 0, (1, ?))", [UNSET_VALUE], "Invalid unset value for tuple field number 1"),
    ("INSERT INTO {t} (k, c, u) VALUES (0, 0, {{a: ?, b: 1}})", [UNSET_VALUE],
     "Invalid unset value for field 'a' of user defined type {u}"),
    ("UPDATE {t} SET t = (1, ?) WHERE k = 0 AND c = 0", [UNSET_VALUE], "Invalid unset value for tuple field number 1"),
    ("SELECT * FROM {t} WHERE k = 0 AND t = (?, 1) ALLOW FILTERING", [UNSET_VALUE],
     "Invalid unset value for tuple field number 0"),
    ("SELECT * FROM {t} WHERE k = 0 AND u = {{a: ?, b: 1}} ALLOW FILTERING", [UNSET_VALUE],
     "Invalid unset value for field 'a' of user defined type {u}"),
    ("SELECT * FROM {t} WHERE k = 0 AND (c) > (?)", [UNSET_VALUE], "Invalid unset value for tuple field number 0"),
    ("DELETE FROM {t} WHERE k = 0 AND (c) = (?)", [UNSET_VALUE], "Invalid unset value for tuple field number 0"),
    ("SELECT * FROM {t} WHERE s CONTAINS ? ALLOW FILTERING", [UNSET_VALUE], "Unsupported unset value for column s"),
    ("SELECT * FROM {t} WHERE s CONTAINS ? ALLOW FILTERING", [None], "Unsupported null value for column s"),
    ("UPDATE {t} SET l[?] = 1 WHERE k = 0 AND c = 0", [UNSET_VALUE], "Invalid unset value for list index"),
    ("DELETE m[?] FROM {t} WHERE k = 0 AND c = 0", [UNSET_VALUE], "Invalid unset map key"),
    ("INSERT INTO {t} (k, c, v) VALUES (0, 0, blobAsInt(?))", [UNSET_VALUE],
     "Invalid unset value for argument in call to function blobasint"),
    # Bind markers are refused inside list, set and map literals (not vector ones).
    ("INSERT INTO {t} (k, c, l) VALUES (0, 0, [1, ?])", [1],
     "Invalid list literal for l: bind variables are not supported inside collection literals"),
    ("UPDATE {t} SET s = s + {{?}} WHERE k = 0 AND c = 0", [1],
     "Invalid set literal for s: bind variables are not supported inside collection literals"),
    ("UPDATE {t} SET m = {{1: ?}} WHERE k = 0 AND c = 0", [1],
     "Invalid map literal for m: bind variables are not supported inside collection literals"),
    ("UPDATE {t} SET tl = (1, [?]) WHERE k = 0 AND c = 0", [1],
     "Invalid list literal for tl[1]: bind variables are not supported inside collection literals"),
    ("SELECT * FROM {t} WHERE k = 0 AND fl = [?] ALLOW FILTERING", [1],
     "Invalid list literal for fl: bind variables are not supported inside collection literals"),
])
def test_values_refused_inside_literals(cql, test_keyspace, statement, values, message):
    """A tuple or frozen UDT literal is one value: none of its parts may be unset; and a
    collection literal must be whole at PREPARE, without bind markers (Cassandra 5.0)."""
    with new_type(cql, test_keyspace, "a int, b int") as u:
        schema = (f"k int, c int, v int, t tuple<int, int>, ft frozen<tuple<int, int>>, u frozen<{u}>, "
                  f"l list<int>, s set<int>, m map<int, int>, fl frozen<list<int>>, tl tuple<int, list<int>>, "
                  f"PRIMARY KEY (k, c)")
        with new_table(cql, test_keyspace, schema) as t:
            text = statement.format(t=t)
            expected = message.format(u=u.split(".")[1])
            with pytest.raises(InvalidRequest) as error:
                cql.execute(cql.prepare(text), values)
            assert expected in str(error.value)


def test_unset_fields_of_a_non_frozen_udt_are_left_null(cql, test_keyspace):
    with new_type(cql, test_keyspace, "a int, b int") as u:
        with new_table(cql, test_keyspace, f"k int PRIMARY KEY, u {u}") as t:
            cql.execute(cql.prepare(f"INSERT INTO {t} (k, u) VALUES (0, {{a: ?, b: 1}})"), [UNSET_VALUE])
            row = cql.execute(f"SELECT u FROM {t} WHERE k = 0").one()
            assert (row.u.a, row.u.b) == (None, 1)


def test_tuple_elements_are_named_as_cassandra_names_them(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, t tuple<int, int>") as t:
        prepared = cql.prepare(f"INSERT INTO {t} (k, t) VALUES (?, (?, ?))")
        assert [c.name for c in prepared.column_metadata] == ["k", "t[0]", "t[1]"]
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"INSERT INTO {t} (k, t) VALUES (1, ('a', 1))")
        assert "Invalid tuple literal for t: component 0 is not of type int" in str(error.value)


@pytest.mark.parametrize("statement, message", [
    ("INSERT INTO {t} (k) VALUES (0)", "Some clustering keys are missing: c"),
    ("INSERT INTO {t} (k, s, v) VALUES (0, 1, 1)", "Some clustering keys are missing: c"),
    ("INSERT INTO {t} JSON '{{\"k\": 0, \"s\": 1}}' DEFAULT UNSET", "Invalid unset value for column c"),
    ("INSERT INTO {t} JSON '{{\"c\": 0}}' DEFAULT UNSET", "Invalid unset value for column k"),
    ("INSERT INTO {t} JSON '{{\"k\": 0}}'", "Invalid null value in condition for column c"),
    ("INSERT INTO {t} (k, c, v) VALUES (0, 0, (int) 0x00000001)", "Cannot cast value 0x00000001 to type int"),
    ("INSERT INTO {t} (k, c, v) VALUES (0, 0, (int) (blob) 0x00000001)",
     "Cannot cast value (blob)0x00000001 to type int"),
    ("INSERT INTO {t} (k, c, v) VALUES (0, 0, (blob) 0x00000001)",
     "Cannot assign value (blob)0x00000001 to v of type int"),
    ("INSERT INTO {t} (k, c, v) VALUES (0, 0, (int) (bigint) 1)", "Cannot cast value (bigint)1 to type int"),
    ("INSERT INTO {t} (k, c, b) VALUES (0, 0, (blob) 123)", "Cannot cast value 123 to type blob"),
    ("INSERT INTO {t} (k, c, b) VALUES (0, 0, (int) 1234)", 'Invalid INTEGER constant (1234) for "b" of type blob'),
    ("SELECT * FROM {t} WHERE k = (int) 0x00000001", "Cannot cast value 0x00000001 to type int"),
    ("SELECT (int) 0x00000001 FROM {t}", "Cannot assign value (int)0x00000001 to (int)0x00000001 of type int"),
    ("SELECT (text) 1 FROM {t}", "Cannot assign value (text)1 to (text)1 of type text"),
])
def test_inserts_without_their_key_and_casts_of_blobs_refused(cql, test_keyspace, statement, message):
    """An INSERT names its whole primary key (a partition's static columns alone excepted);
    a type hint takes only what its type can hold, into a receiver that can hold its type."""
    with new_table(cql, test_keyspace, "k int, c int, v int, b blob, s int static, PRIMARY KEY (k, c)") as t:
        with pytest.raises(InvalidRequest) as error:
            cql.execute(statement.format(t=t))
        assert message in str(error.value)
        cql.execute(f"INSERT INTO {t} (k, s) VALUES (0, 1)")
        cql.execute(f"INSERT INTO {t} (k, c, v, b) VALUES (0, 0, (int) 5, (blob) 0x01)")
        assert tuple(cql.execute(f"SELECT s, v, b FROM {t} WHERE k = 0").one()) == (1, 5, b"\x01")


def test_clustering_values_keep_their_form_through_flush_and_compaction(cql, test_keyspace, compact):
    """The forms as written survive a flush and a compaction. (A row written again in
    another form reads back in either: Cassandra keeps the first arrival's while the row is in
    one memtable and the newest source's when it merges a memtable with its sstables.)"""
    schema = "k int, c decimal, d varint, v int, PRIMARY KEY (k, c, d)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, c, d, v) VALUES (0, 1000, blobAsVarint(0x0005), 1)")
        cql.execute(f"INSERT INTO {t} (k, c, d, v) VALUES (0, 2.50, 7, 2)")
        compact(t)
        cql.execute(f"UPDATE {t} SET v = 3 WHERE k = 0 AND c = 1000 AND d = blobAsVarint(0x0005)")
        rows = [(str(r[0]), r[1], r[2]) for r in cql.execute(f"SELECT c, varintAsBlob(d), v FROM {t} WHERE k = 0")]
        assert rows == [("2.50", b"\x07", 2), ("1000", b"\x00\x05", 3)]


@pytest.mark.parametrize("statement, message", [
    ("UPDATE {t} SET v = 1 WHERE k = 0 AND c = 5 AND (c, d) IN ((1, 2))",
     "c cannot be restricted by more than one relation if it includes an Equal"),
    ("UPDATE {t} SET v = 1 WHERE k = 0 AND (c, d) IN ((1, 2)) AND c = 5",
     "c cannot be restricted by more than one relation if it includes an Equal"),
    ("UPDATE {t} SET v = 1 WHERE k = 0 AND (c, d) IN ((1, 2)) AND d = 9",
     "d cannot be restricted by more than one relation if it includes an Equal"),
    ("UPDATE {t} SET v = 1 WHERE k = 0 AND c IN (1, 5) AND (c, d) IN ((1, 2))",
     "c cannot be restricted by more than one relation if it includes a IN"),
    ("DELETE FROM {t} WHERE k = 0 AND c = 5 AND (c, d) IN ((1, 2))",
     "c cannot be restricted by more than one relation if it includes an Equal"),
    ("DELETE FROM {t} WHERE k = 0 AND (c, d) IN ((1, 2)) AND (c, d) = (1, 2)",
     "c ,d cannot be restricted by more than one relation if it includes an Equal"),
])
def test_a_column_restricted_twice_beside_a_multi_column_in_is_refused(cql, test_keyspace, statement, message):
    """A single-column relation on a column a multi-column IN also restricts is refused, as
    SELECT refuses it; Helenus once dropped it and wrote the IN's rows (`c = 5 AND (c, d) IN
    ((1, 2))` updated row (1, 2)). An IN of one tuple counts as an `=` in Cassandra's words."""
    with new_table(cql, test_keyspace, "k int, c int, d int, v int, PRIMARY KEY (k, c, d)") as t:
        with pytest.raises(InvalidRequest, match=re.escape(message)):
            cql.execute(statement.format(t=t))
        assert list(cql.execute(f"SELECT * FROM {t} WHERE k = 0")) == []
