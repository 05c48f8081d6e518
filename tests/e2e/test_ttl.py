"""Time to live: USING TTL, a table's default_time_to_live, TTL 0, the ttl() selector, expiry as
seen by reads, and the limits (0 .. 20 years) with their error codes.

A cell written with a TTL expires `ttl` seconds after it was written (1 s resolution); from then
on reads skip it, and it acts as a tombstone with the write's timestamp. Tests that wait for
expiry use TTL 1 and poll with a deadline.
"""

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import ConfigurationException, SyntaxException
from cassandra.query import UNSET_VALUE, SimpleStatement

from util import new_table, unique_name, wait_until

MAX_TTL = 20 * 365 * 24 * 60 * 60  # 630720000 s, Cassandra's Attributes.MAX_TTL
EXPIRY_TIMEOUT_S = 5  # a TTL of 1 s is gone within 2 s; leave room for a loaded machine


@pytest.fixture
def kv(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int, w int") as t:
        yield t


@pytest.fixture
def default_ttl(cql, test_keyspace):
    """A table with default_time_to_live = 1000."""
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int, w int",
                   "WITH default_time_to_live = 1000") as t:
        yield t


def ttls(cql, table, k):
    return tuple(cql.execute(f"SELECT ttl(v), ttl(w) FROM {table} WHERE k = {k}").one())


def near(value, ttl):
    """ttl() counts down from the TTL given; allow for a slow machine."""
    return value is not None and ttl - 10 < value <= ttl


# --- TTLs as written and as read back ------------------------------------------------------------


def test_update_with_ttl_on_one_column(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (1, 1, 1)")
    cql.execute(f"UPDATE {kv} USING TTL 500 SET v = 2 WHERE k = 1")
    v_ttl, w_ttl = ttls(cql, kv, 1)
    assert near(v_ttl, 500) and w_ttl is None


def test_insert_with_ttl_then_update_without(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (1, 1, 1) USING TTL 1000")
    assert all(near(t, 1000) for t in ttls(cql, kv, 1))
    # The UPDATE rewrites v without a TTL; w keeps the INSERT's.
    cql.execute(f"UPDATE {kv} SET v = 2 WHERE k = 1")
    v_ttl, w_ttl = ttls(cql, kv, 1)
    assert v_ttl is None and near(w_ttl, 1000)


def test_ttl_and_timestamp_together(cql, kv):
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TTL 1000 AND TIMESTAMP 42")
    cql.execute(f"UPDATE {kv} USING TIMESTAMP 43 AND TTL 500 SET w = 2 WHERE k = 1")
    row = cql.execute(f"SELECT writetime(v), ttl(v), writetime(w), ttl(w) FROM {kv} WHERE k = 1").one()
    assert (row[0], row[2]) == (42, 43) and near(row[1], 1000) and near(row[3], 500)


def test_ttl_zero_means_no_ttl(cql, kv, default_ttl):
    for table in (kv, default_ttl):  # TTL 0 overrides a table's default too
        cql.execute(f"INSERT INTO {table} (k, v) VALUES (1, 1) USING TTL 0")
        cql.execute(f"UPDATE {table} USING TTL 0 SET w = 1 WHERE k = 1")
        assert ttls(cql, table, 1) == (None, None), table


def test_default_time_to_live(cql, test_keyspace, default_ttl):
    cql.execute(f"INSERT INTO {default_ttl} (k, v) VALUES (1, 1)")
    cql.execute(f"UPDATE {default_ttl} SET w = 1 WHERE k = 1")
    assert all(near(t, 1000) for t in ttls(cql, default_ttl, 1))
    cql.execute(f"INSERT INTO {default_ttl} (k, v) VALUES (2, 1) USING TTL 50")  # explicit wins
    assert near(ttls(cql, default_ttl, 2)[0], 50)
    name = default_ttl.split(".")[1]
    row = cql.execute("SELECT default_time_to_live FROM system_schema.tables "
                      f"WHERE keyspace_name = '{test_keyspace}' AND table_name = '{name}'").one()
    assert row.default_time_to_live == 1000


def test_prepared_ttl_bind_values(cql, default_ttl):
    insert = cql.prepare(f"INSERT INTO {default_ttl} (k, v) VALUES (?, ?) USING TTL ?")
    assert [c.name for c in insert.column_metadata] == ["k", "v", "[ttl]"]
    cql.execute(insert, [1, 1, 50])
    cql.execute(insert, [2, 2, UNSET_VALUE])  # unset: as if no USING TTL, so the default
    cql.execute(insert, [3, 3, None])  # null: TTL 0, so no TTL at all
    assert near(ttls(cql, default_ttl, 1)[0], 50)
    assert near(ttls(cql, default_ttl, 2)[0], 1000)
    assert ttls(cql, default_ttl, 3)[0] is None


def test_alter_default_time_to_live_affects_new_writes_only(cql, default_ttl):
    cql.execute(f"INSERT INTO {default_ttl} (k, v) VALUES (1, 1)")
    cql.execute(f"ALTER TABLE {default_ttl} WITH default_time_to_live = 500")
    cql.execute(f"INSERT INTO {default_ttl} (k, v) VALUES (2, 2)")
    cql.execute(f"ALTER TABLE {default_ttl} WITH default_time_to_live = 0")
    cql.execute(f"INSERT INTO {default_ttl} (k, v) VALUES (3, 3)")
    assert near(ttls(cql, default_ttl, 1)[0], 1000)
    assert near(ttls(cql, default_ttl, 2)[0], 500)
    assert ttls(cql, default_ttl, 3)[0] is None


def test_max_ttl(cql, test_keyspace, kv):
    # 20 years is allowed, as a TTL and as a table default. The expiry lies past 2038, which the
    # cell must still represent (Cassandra 5.0 stores deletion times up to 2106).
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TTL {MAX_TTL}")
    assert near(ttls(cql, kv, 1)[0], MAX_TTL)
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int",
                   f"WITH default_time_to_live = {MAX_TTL}") as t:
        cql.execute(f"INSERT INTO {t} (k, v) VALUES (1, 1)")
        assert near(cql.execute(f"SELECT ttl(v) FROM {t} WHERE k = 1").one()[0], MAX_TTL)


def test_ttl_out_of_range_refused(cql, kv):
    insert = cql.prepare(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TTL ?")
    for ttl, message in ((MAX_TTL + 1, "ttl is too large"), (-1, "greater or equal to 0")):
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TTL {ttl}")
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(insert, [ttl])
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(f"UPDATE {kv} USING TTL {ttl} SET v = 1 WHERE k = 1")
    with pytest.raises(InvalidRequest):  # not an int
        cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TTL {2**31}")
    assert cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None


def test_default_time_to_live_out_of_range_refused(cql, test_keyspace, default_ttl):
    # A bad table option is a configuration error (0x2300), not an invalid query.
    for value in (MAX_TTL + 1, -1):
        name = f"{test_keyspace}.{unique_name('bad')}"
        try:
            with pytest.raises(ConfigurationException, match="default_time_to_live"):
                cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY) WITH default_time_to_live = {value}")
        finally:
            cql.execute(f"DROP TABLE IF EXISTS {name}")
        with pytest.raises(ConfigurationException, match="default_time_to_live"):
            cql.execute(f"ALTER TABLE {default_ttl} WITH default_time_to_live = {value}")


def test_ttl_in_batches(cql, kv):
    with pytest.raises(InvalidRequest, match="Global TTL"):
        cql.execute(f"BEGIN BATCH USING TTL 100 INSERT INTO {kv} (k, v) VALUES (1, 1); APPLY BATCH")
    # Per statement it is fine.
    cql.execute(f"BEGIN BATCH INSERT INTO {kv} (k, v) VALUES (1, 1) USING TTL 100; "
                f"INSERT INTO {kv} (k, v) VALUES (2, 2); APPLY BATCH")
    assert near(ttls(cql, kv, 1)[0], 100) and ttls(cql, kv, 2)[0] is None


def test_delete_takes_no_ttl(cql, kv):
    with pytest.raises(SyntaxException):
        cql.execute(f"DELETE FROM {kv} USING TTL 10 WHERE k = 1")


def test_ttl_of_non_frozen_collection_is_per_element(cql, test_keyspace):
    # Cassandra 5.0 (CASSANDRA-8877): like writetime(), ttl() of a multi-cell collection is a list,
    # one entry per element.
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, s set<int>, fs frozen<set<int>>") as t:
        cql.execute(f"INSERT INTO {t} (k, s, fs) VALUES (1, {{1}}, {{1}}) USING TTL 1000")
        cql.execute(f"UPDATE {t} USING TTL 500 SET s = s + {{2}} WHERE k = 1")
        row = cql.execute(f"SELECT ttl(s), ttl(fs) FROM {t} WHERE k = 1").one()
        assert len(row[0]) == 2 and near(row[0][0], 1000) and near(row[0][1], 500)
        assert near(row[1], 1000)


# --- expiry --------------------------------------------------------------------------------------


def test_expiry_observed_at_read(cql, kv):
    # TTL 3, not 1: the count below must run before expiry even on a loaded machine.
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (1, 1, 1) USING TTL 3")
    cql.execute(f"INSERT INTO {kv} (k, v, w) VALUES (2, 2, 2)")
    cql.execute(f"UPDATE {kv} USING TTL 3 SET v = 3 WHERE k = 2")  # one column of a row
    assert cql.execute(f"SELECT count(*) FROM {kv}").one()[0] == 2
    wait_until(lambda: cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None,
               EXPIRY_TIMEOUT_S + 2, "row with TTL 3 expires")
    assert tuple(cql.execute(f"SELECT k, v, w FROM {kv} WHERE k = 2").one()) == (2, None, 2)
    assert [tuple(r) for r in cql.execute(f"SELECT k, v, w FROM {kv}")] == [(2, None, 2)]
    assert cql.execute(f"SELECT count(*) FROM {kv}").one()[0] == 1


def test_expiry_within_slices_and_pages(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as t:
        insert = cql.prepare(f"INSERT INTO {t} (k, c, v) VALUES (1, ?, ?) USING TTL ?")
        for c in range(10):
            cql.execute(insert, [c, c, 1 if c % 2 else 0])  # odd rows expire
        wait_until(lambda: cql.execute(f"SELECT * FROM {t} WHERE k = 1 AND c = 9").one() is None,
                   EXPIRY_TIMEOUT_S, "rows with TTL 1 expire")
        page = SimpleStatement(f"SELECT c FROM {t} WHERE k = 1", fetch_size=2)
        assert [r.c for r in cql.execute(page)] == [0, 2, 4, 6, 8]
        reversed_slice = f"SELECT c FROM {t} WHERE k = 1 AND c > 3 ORDER BY c DESC"
        assert [r.c for r in cql.execute(reversed_slice)] == [8, 6, 4]
        assert cql.execute(f"SELECT count(*) FROM {t} WHERE k = 1 AND c >= 1 AND c <= 7").one()[0] == 3


def test_expired_cell_shadows_older_writes(cql, kv):
    # Once expired, a cell is a tombstone with its write's timestamp.
    cql.execute(f"INSERT INTO {kv} (k, v) VALUES (1, 1) USING TIMESTAMP 20 AND TTL 1")
    wait_until(lambda: cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None,
               EXPIRY_TIMEOUT_S, "row with TTL 1 expires")
    cql.execute(f"UPDATE {kv} USING TIMESTAMP 15 SET v = 15 WHERE k = 1")
    assert cql.execute(f"SELECT * FROM {kv} WHERE k = 1").one() is None
    cql.execute(f"UPDATE {kv} USING TIMESTAMP 25 SET v = 25 WHERE k = 1")
    assert cql.execute(f"SELECT v FROM {kv} WHERE k = 1").one().v == 25


def test_collection_elements_expire_individually(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, s set<int>, l list<int>") as t:
        cql.execute(f"UPDATE {t} SET s = s + {{1}}, l = l + [1] WHERE k = 1")
        cql.execute(f"UPDATE {t} USING TTL 1 SET s = s + {{2}}, l = l + [2] WHERE k = 1")
        cql.execute(f"UPDATE {t} SET l = l + [3] WHERE k = 1")
        wait_until(lambda: set(cql.execute(f"SELECT s FROM {t} WHERE k = 1").one().s) == {1},
                   EXPIRY_TIMEOUT_S, "set element with TTL 1 expires")
        assert cql.execute(f"SELECT l FROM {t} WHERE k = 1").one().l == [1, 3]
