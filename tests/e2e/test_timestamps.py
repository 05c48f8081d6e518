"""Write timestamps: USING TIMESTAMP on INSERT/UPDATE/DELETE/BATCH, the client-side timestamp of
the protocol, last-write-wins reconciliation and its tie-breaks, writetime() and maxwritetime(),
and the range of timestamps Cassandra accepts.

Reconciliation of two versions of a cell, as Cassandra 5.0 does it (`Cells.resolveRegular`):
the higher timestamp wins; on equal timestamps a tombstone or an expiring cell beats a plain live
cell (CASSANDRA-14592), and between two live values the larger value wins, comparing the
serialized bytes unsigned, whatever the column's type. A row, range or partition tombstone
deletes everything with a timestamp lower than or equal to its own.
"""

import time

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException
from cassandra.query import UNSET_VALUE, BatchStatement

from util import new_session, new_table

MIN_TIMESTAMP = -(2**63) + 1  # Long.MIN_VALUE itself means "no timestamp" to Cassandra
MAX_TIMESTAMP = 2**63 - 1


@pytest.fixture
def kv(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int, w int") as t:
        yield t


@pytest.fixture
def kcv(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as t:
        yield t


def now_us():
    return int(time.time() * 1_000_000)


# --- USING TIMESTAMP -----------------------------------------------------------------------------


def test_insert_and_update_set_writetime_per_column(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (1, 1, 1) USING TIMESTAMP 100")
    cql.execute(f"UPDATE {kv} USING TIMESTAMP 200 SET w = 2 WHERE k = 1")
    row = cql.execute(f"SELECT v, w, writetime(v), writetime(w) FROM {kv} WHERE k = 1").one()
    assert tuple(row) == (1, 2, 100, 200)  # each cell carries its own timestamp


def test_last_write_wins_per_cell_not_arrival_order(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (1, 20, 20) USING TIMESTAMP 20")
    # One statement, one timestamp: it loses on v (older) and wins on w (newer)...
    cql.execute(f"UPDATE {kv} USING TIMESTAMP 10 SET v = 10 WHERE k = 1")
    cql.execute(f"UPDATE {kv} USING TIMESTAMP 30 SET w = 30 WHERE k = 1")
    assert tuple(cql.execute(f"SELECT v, w FROM {kv} WHERE k = 1").one()) == (20, 30)
    # ... and an INSERT of both columns at ts 25 sits between the two.
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (1, 25, 25) USING TIMESTAMP 25")
    row = cql.execute(f"SELECT v, w, writetime(v), writetime(w) FROM {kv} WHERE k = 1").one()
    assert tuple(row) == (25, 30, 25, 30)


def test_delete_using_timestamp(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (1, 1, 1) USING TIMESTAMP 100")
    cql.execute(f"DELETE v FROM {kv} USING TIMESTAMP 99 WHERE k = 1")  # older: no effect
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one().v == 1
    cql.execute(f"DELETE w FROM {kv} USING TIMESTAMP 101 WHERE k = 1")
    assert tuple(cql.execute(f"SELECT v, w FROM {kv} WHERE k = 1").one()) == (1, None)
    cql.execute(f"DELETE FROM {kv} USING TIMESTAMP 99 WHERE k = 1")  # older than the row
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one().v == 1
    cql.execute(f"DELETE FROM {kv} USING TIMESTAMP 101 WHERE k = 1")
    assert cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None


def test_prepared_timestamp_bind_marker(cql, kv):
    insert = cql.prepare(f"INSERT INTO {kv} (k, v) VALUES (?, ?) USING TIMESTAMP ?")
    assert [c.name for c in insert.column_metadata] == ["k", "v", "[timestamp]"]
    cql.execute(insert, [1, 1, 7])
    assert cql.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 1").one()[0] == 7
    # UNSET means "no USING TIMESTAMP": the client's (or server's) current time.
    before = now_us()
    cql.execute(insert, [2, 2, UNSET_VALUE])
    assert abs(cql.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 2").one()[0] - before) < 60_000_000
    with pytest.raises(InvalidRequest, match="null value of timestamp"):
        cql.execute(insert, [3, 3, None])


def test_client_side_timestamp_is_the_write_time(server, kv):
    # The driver sends its own timestamp in every request (protocol v3+); the server uses it
    # unless the statement says USING TIMESTAMP.
    with new_session(*server, timestamp_generator=lambda: 424242) as s:
        s.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1)")
        s.execute(f"INSERT INTO {kv} (k, v) VALUES (2, 2) USING TIMESTAMP 5")
        assert s.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 1").one()[0] == 424242
        assert s.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 2").one()[0] == 5
        # An older client timestamp loses to what is there.
        s.execute(f"UPDATE {kv} USING TIMESTAMP 500000 SET v = 10 WHERE k = 1")
        s.execute(f"UPDATE {kv} SET v = 11 WHERE k = 1")
        assert s.execute(f"SELECT v FROM {kv} WHERE k = 1").one().v == 10
        # Without a client timestamp the server takes its clock, in microseconds.
        s.use_client_timestamp = False
        before = now_us()
        s.execute(f"INSERT INTO {kv} (k, v) VALUES (3, 3)")
        writetime = s.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 3").one()[0]
        assert before - 60_000_000 < writetime < now_us() + 60_000_000


# --- batches -------------------------------------------------------------------------------------


def test_batch_level_timestamp_applies_to_every_statement(cql, kcv):
    cql.execute(f"INSERT INTO {kcv} (k, c, v) VALUES (2, 1, 1) USING TIMESTAMP 400")
    cql.execute(f"INSERT INTO {kcv} (k, c, v) VALUES (2, 2, 2) USING TIMESTAMP 600")
    cql.execute(
        f"BEGIN BATCH USING TIMESTAMP 500 "
        f"INSERT INTO {kcv} (k, c, v) VALUES (1, 1, 1); "
        f"UPDATE {kcv} SET v = 2 WHERE k = 1 AND c = 2; "
        f"DELETE FROM {kcv} WHERE k = 2; "
        f"APPLY BATCH"
    )
    rows = list(cql.execute(f"SELECT c, writetime(v) FROM {kcv} WHERE k = 1"))
    assert [tuple(r) for r in rows] == [(1, 500), (2, 500)]
    # The DELETE at 500 removed the row written at 400, not the one written at 600.
    assert [r.c for r in cql.execute(f"SELECT c FROM {kcv} WHERE k = 2")] == [2]


def test_batch_per_statement_timestamps(cql, kcv):
    # Inside a batch the order of statements does not matter, only their timestamps.
    cql.execute(
        f"BEGIN BATCH "
        f"INSERT INTO {kcv} (k, c, v) VALUES (1, 1, 1) USING TIMESTAMP 5; "
        f"DELETE FROM {kcv} USING TIMESTAMP 4 WHERE k = 1 AND c = 1; "
        f"DELETE FROM {kcv} USING TIMESTAMP 6 WHERE k = 1 AND c = 2; "
        f"INSERT INTO {kcv} (k, c, v) VALUES (1, 2, 2) USING TIMESTAMP 5; "
        f"APPLY BATCH"
    )
    rows = list(cql.execute(f"SELECT c, v, writetime(v) FROM {kcv} WHERE k = 1"))
    assert [tuple(r) for r in rows] == [(1, 1, 5)]
    # The same with the driver's batch of prepared statements and bound timestamps.
    insert = cql.prepare(f"INSERT INTO {kcv} (k, c, v) VALUES (?, ?, ?) USING TIMESTAMP ?")
    batch = BatchStatement()
    batch.add(insert, (2, 1, 10, 10))
    batch.add(insert, (2, 1, 20, 20))
    batch.add(insert, (2, 1, 15, 15))
    cql.execute(batch)
    assert tuple(cql.execute(f"SELECT v, writetime(v) FROM {kcv} WHERE k = 2").one()) == (20, 20)


def test_batch_timestamp_on_batch_and_statement_refused(cql, kcv):
    with pytest.raises(InvalidRequest, match="either on BATCH or individual statements"):
        cql.execute(
            f"BEGIN BATCH USING TIMESTAMP 10 "
            f"INSERT INTO {kcv} (k, c, v) VALUES (1, 1, 1) USING TIMESTAMP 5; APPLY BATCH"
        )
    assert cql.execute(f"SELECT * FROM {kcv} WHERE k = 1").one() is None


# --- ties ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "delete, expected",
    [
        ("DELETE v FROM {t} USING TIMESTAMP 100 WHERE k = {k} AND c = 1", [(1, None)]),
        ("DELETE FROM {t} USING TIMESTAMP 100 WHERE k = {k} AND c = 1", []),
        ("DELETE FROM {t} USING TIMESTAMP 100 WHERE k = {k} AND c >= 1", []),
        ("DELETE FROM {t} USING TIMESTAMP 100 WHERE k = {k}", []),
    ],
    ids=["cell", "row", "range", "partition"],
)
def test_tie_tombstone_beats_live_data(cql, kcv, delete, expected):
    # Key 1: write, then delete at the same timestamp. Key 2: the other way round.
    insert = f"INSERT INTO {kcv} (k, c, v) VALUES ({{k}}, 1, 1) USING TIMESTAMP 100"
    for k, statements in ((1, [insert, delete]), (2, [delete, insert])):
        for statement in statements:
            cql.execute(statement.format(t=kcv, k=k))
        rows = [tuple(r) for r in cql.execute(f"SELECT c, v FROM {kcv} WHERE k = {k}")]
        assert rows == expected, k


@pytest.mark.parametrize(
    "column, smaller, larger, expected",
    [
        ("v", "1", "-1", -1),  # 0x00000001 < 0xffffffff: bytes, not numbers
        ("b", "0x7fff", "0x80", b"\x80"),  # unsigned: 0x80 > 0x7f, whatever follows
        ("b", "0x01", "0x0100", b"\x01\x00"),  # a proper prefix is smaller
        ("t", "'z'", "'é'", "é"),  # UTF-8 0xc3a9 > 0x7a
    ],
    ids=["int", "blob-unsigned", "blob-prefix", "text-utf8"],
)
def test_tie_between_live_values_larger_bytes_win(cql, test_keyspace, column, smaller, larger,
                                                  expected):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int, b blob, t text") as t:
        # Key 1 gets the smaller value first, key 2 the larger: the result is the same.
        for k, values in ((1, (smaller, larger)), (2, (larger, smaller))):
            for value in values:
                cql.execute(f"INSERT INTO {t} (k, {column}) VALUES ({k}, {value}) USING TIMESTAMP 100")
            assert cql.execute(f"SELECT {column} FROM {t} WHERE k = {k}").one()[0] == expected, k


def test_tie_expiring_cell_beats_plain_cell(cql, kv):
    # CASSANDRA-14592: an expiring cell will become a tombstone, so it wins a timestamp tie
    # even against a larger plain value, in either order.
    plain = f"INSERT INTO {kv} (k, v) VALUES ({{k}}, 2) USING TIMESTAMP 100"
    expiring = f"INSERT INTO {kv} (k, v) VALUES ({{k}}, 1) USING TIMESTAMP 100 AND TTL 1000"
    for k, statements in ((1, [plain, expiring]), (2, [expiring, plain])):
        for statement in statements:
            cql.execute(statement.format(k=k))
        row = cql.execute(f"SELECT v, ttl(v) FROM {kv} WHERE k = {k}").one()
        assert row[0] == 1 and 900 < row[1] <= 1000, k


# --- the range of timestamps ---------------------------------------------------------------------


def test_negative_timestamps(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP -5")
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 2) USING TIMESTAMP -10")  # older
    assert tuple(cql.execute(f"SELECT v, writetime(v) FROM {kv} WHERE k = 1").one()) == (1, -5)
    cql.execute(f"UPDATE {kv} USING TIMESTAMP -4 SET v = 3 WHERE k = 1")
    assert tuple(cql.execute(f"SELECT v, writetime(v) FROM {kv} WHERE k = 1").one()) == (3, -4)
    cql.execute(f"DELETE FROM {kv} USING TIMESTAMP -4 WHERE k = 1")
    assert cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None
    # Any current-time write is newer than all of that.
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 4)")
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one().v == 4


def test_extreme_timestamps(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP {MAX_TIMESTAMP}")
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (2, 2) USING TIMESTAMP {MIN_TIMESTAMP}")
    assert cql.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 1").one()[0] == MAX_TIMESTAMP
    assert cql.execute(f"SELECT writetime(v) FROM {kv} WHERE k = 2").one()[0] == MIN_TIMESTAMP
    # Nothing written at the current time can overwrite or delete the MAX_TIMESTAMP write...
    cql.execute(f"DELETE FROM {kv} WHERE k = 1")
    cql.execute(f"UPDATE {kv} SET v = 9 WHERE k = 1")
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one().v == 1
    # ... but a tombstone at the same timestamp does.
    cql.execute(f"DELETE FROM {kv} USING TIMESTAMP {MAX_TIMESTAMP} WHERE k = 1")
    assert cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None


def test_out_of_range_timestamps_refused(cql, kv):
    with pytest.raises(InvalidRequest):  # Long.MIN_VALUE is reserved
        cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP {-(2**63)}")
    with pytest.raises(InvalidRequest):  # does not fit a bigint
        cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP {2**63}")
    for literal in ("'abc'", "1.5"):  # only integer literals parse
        with pytest.raises(SyntaxException):
            cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP {literal}")
    assert cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None


# --- writetime() ---------------------------------------------------------------------------------


def test_writetime_null_for_null_and_deleted_cells(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP 100")
    cql.execute(f"DELETE v FROM {kv} USING TIMESTAMP 200 WHERE k = 1")
    row = cql.execute(f"SELECT v, writetime(v), writetime(w), ttl(w) FROM {kv} WHERE k = 1").one()
    assert tuple(row) == (None, None, None, None)


def test_writetime_of_static_column(cql, test_keyspace):
    schema = "k int, c int, s int STATIC, v int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, c, s, v) VALUES (1, 1, 1, 1) USING TIMESTAMP 10")
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (1, 2, 2) USING TIMESTAMP 20")
        cql.execute(f"UPDATE {t} USING TIMESTAMP 30 SET s = 3 WHERE k = 1")
        rows = cql.execute(f"SELECT c, writetime(s), writetime(v) FROM {t} WHERE k = 1")
        assert [tuple(r) for r in rows] == [(1, 30, 10), (2, 30, 20)]


def test_writetime_and_ttl_refused_on_primary_key(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as t:
        for function in ("writetime", "ttl"):
            for column in ("k", "c"):
                with pytest.raises(InvalidRequest, match="PRIMARY KEY"):
                    cql.execute(f"SELECT {function}({column}) FROM {t} WHERE k = 1")


@pytest.fixture
def collections(cql, test_keyspace):
    schema = ("k int PRIMARY KEY, l list<int>, s set<int>, m map<int, int>, "
              "fl frozen<list<int>>, fs frozen<set<int>>")
    with new_table(cql, test_keyspace, schema) as t:
        yield t


def test_writetime_of_frozen_collection_is_one_value(cql, collections):
    cql.execute(f"INSERT INTO {collections} (k, fl, fs) VALUES (1, [1, 2], {{3}}) USING TIMESTAMP 10")
    row = cql.execute(f"SELECT writetime(fl), writetime(fs) FROM {collections} WHERE k = 1").one()
    assert tuple(row) == (10, 10)


def test_writetime_of_non_frozen_collection_is_per_element(cql, collections):
    # Cassandra 5.0 (CASSANDRA-8877): writetime() of a multi-cell collection is the list of its
    # elements' timestamps, in element order; null when the collection is empty.
    cql.execute(f"INSERT INTO {collections} (k, l, s, m) VALUES (1, [1, 2], {{3}}, {{4: 4}}) "
                "USING TIMESTAMP 10")
    cql.execute(f"UPDATE {collections} USING TIMESTAMP 20 SET l = l + [5], s = s + {{0}}, "
                "m = m + {5: 5} WHERE k = 1")
    row = cql.execute(
        f"SELECT writetime(l), writetime(s), writetime(m) FROM {collections} WHERE k = 1"
    ).one()
    assert (row[0], row[1], row[2]) == ([10, 10, 20], [20, 10], [10, 20])
    cql.execute(f"INSERT INTO {collections} (k, fl) VALUES (2, [1])")
    row = cql.execute(f"SELECT writetime(l), writetime(m) FROM {collections} WHERE k = 2").one()
    assert tuple(row) == (None, None)


def test_writetime_of_collection_element(cql, collections):
    cql.execute(f"INSERT INTO {collections} (k, l, s, m) VALUES (1, [1], {{3}}, {{4: 4}}) "
                "USING TIMESTAMP 10")
    cql.execute(f"UPDATE {collections} USING TIMESTAMP 20 SET m = m + {{5: 5}} WHERE k = 1")
    row = cql.execute(
        f"SELECT writetime(m[4]), writetime(m[5]), writetime(s[3]) FROM {collections} WHERE k = 1"
    ).one()
    assert tuple(row) == (10, 20, 10)
    # Element selection is for sets and maps only.
    with pytest.raises(InvalidRequest, match="list"):
        cql.execute(f"SELECT writetime(l[0]) FROM {collections} WHERE k = 1")


def test_maxwritetime(cql, collections):
    # Cassandra 5.0 (CASSANDRA-17425): the largest timestamp of a column's cells.
    cql.execute(f"INSERT INTO {collections} (k, l, fl) VALUES (1, [1], [1]) USING TIMESTAMP 10")
    cql.execute(f"UPDATE {collections} USING TIMESTAMP 30 SET l = l + [2] WHERE k = 1")
    row = cql.execute(
        f"SELECT maxwritetime(l), maxwritetime(fl), maxwritetime(m) FROM {collections} WHERE k = 1"
    ).one()
    assert tuple(row) == (30, 10, None)
