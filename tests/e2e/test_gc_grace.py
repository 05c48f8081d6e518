"""gc_grace_seconds: the table option, and what it is for. A tombstone (or an expired TTL cell)
must be kept at least gc_grace_seconds after it was written, so that it still shadows older data
a replica missed; after that, compaction purges it, together with the data it shadows.

The observable effect on one node: once a tombstone at ts 20 over data at ts 10 is purged, a late
write at ts 15 is visible; while the tombstone is kept, the same write stays hidden. The purge
tests need the `compact` fixture (flush + major compaction): on Helenus `helenus admin`, on
Cassandra `--nodetool "scripts/cassandra.sh nodetool"`.
"""

import time

import pytest
from cassandra.protocol import ConfigurationException, SyntaxException

from util import new_table, unique_name

DEFAULT_GC_GRACE_SECONDS = 864000  # ten days


def table_options(cql, table):
    keyspace, name = table.split(".")
    return cql.execute("SELECT gc_grace_seconds, default_time_to_live FROM system_schema.tables "
                       f"WHERE keyspace_name = '{keyspace}' AND table_name = '{name}'").one()


# --- the option ----------------------------------------------------------------------------------


def test_gc_grace_seconds_default(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY") as t:
        assert table_options(cql, t).gc_grace_seconds == DEFAULT_GC_GRACE_SECONDS


def test_gc_grace_seconds_create_and_alter(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int",
                   "WITH gc_grace_seconds = 0 AND default_time_to_live = 100") as t:
        assert tuple(table_options(cql, t)) == (0, 100)
        cql.execute(f"ALTER TABLE {t} WITH gc_grace_seconds = 3600")
        assert tuple(table_options(cql, t)) == (3600, 100)  # other options untouched
        cql.execute(f"ALTER TABLE {t} WITH gc_grace_seconds = {2**31 - 1}")
        assert table_options(cql, t).gc_grace_seconds == 2**31 - 1


def test_gc_grace_seconds_invalid(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY") as t:
        # Out of range is a configuration error (0x2300); not an int at all, a syntax error.
        with pytest.raises(ConfigurationException, match="gc_grace_seconds"):
            cql.execute(f"ALTER TABLE {t} WITH gc_grace_seconds = -1")
        for value in (str(2**31), "'abc'"):
            with pytest.raises(SyntaxException):
                cql.execute(f"ALTER TABLE {t} WITH gc_grace_seconds = {value}")
        name = f"{test_keyspace}.{unique_name('bad')}"
        try:
            with pytest.raises(ConfigurationException, match="gc_grace_seconds"):
                cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY) WITH gc_grace_seconds = -1")
        finally:
            cql.execute(f"DROP TABLE IF EXISTS {name}")
        assert table_options(cql, t).gc_grace_seconds == DEFAULT_GC_GRACE_SECONDS


# --- purging -------------------------------------------------------------------------------------

# One partition per kind of tombstone, in a table (k, c, v, w). Each gets row c = 1 with v and w
# at ts 10, then `delete` (a tombstone at ts 20) and, after the purge (or not), `late`: a write
# at ts 15. `purged` and `kept` are the rows (c, v, w) of the partition in either case. Where the
# tombstone covers more, a row c = 2 at ts 30 shows that newer data is never purged with it.
SCENARIOS = {
    "cell": dict(
        delete="DELETE v FROM {t} USING TIMESTAMP 20 WHERE k = {k} AND c = 1",
        late="UPDATE {t} USING TIMESTAMP 15 SET v = 15 WHERE k = {k} AND c = 1",
        purged=[(1, 15, 1)], kept=[(1, None, 1)]),
    "row": dict(
        delete="DELETE FROM {t} USING TIMESTAMP 20 WHERE k = {k} AND c = 1",
        late="INSERT INTO {t} (k, c, v) VALUES ({k}, 1, 15) USING TIMESTAMP 15",
        # w (ts 10) went with the tombstone that shadowed it: purging must not resurrect it.
        purged=[(1, 15, None)], kept=[]),
    "range": dict(
        delete="DELETE FROM {t} USING TIMESTAMP 20 WHERE k = {k} AND c >= 0 AND c < 5",
        newer=True,
        late="INSERT INTO {t} (k, c, v) VALUES ({k}, 1, 15) USING TIMESTAMP 15",
        purged=[(1, 15, None), (2, 30, 30)], kept=[(2, 30, 30)]),
    "partition": dict(
        delete="DELETE FROM {t} USING TIMESTAMP 20 WHERE k = {k}",
        newer=True,
        late="INSERT INTO {t} (k, c, v) VALUES ({k}, 1, 15) USING TIMESTAMP 15",
        purged=[(1, 15, None), (2, 30, 30)], kept=[(2, 30, 30)]),
    "expired-ttl": dict(
        # An expired cell is a tombstone from its expiry on; gc_grace counts from there.
        delete="UPDATE {t} USING TIMESTAMP 20 AND TTL 1 SET v = 20 WHERE k = {k} AND c = 1",
        late="UPDATE {t} USING TIMESTAMP 15 SET v = 15 WHERE k = {k} AND c = 1",
        purged=[(1, 15, 1)], kept=[(1, None, 1)]),
}
KEYS = {name: k for k, name in enumerate(SCENARIOS)}


@pytest.fixture(scope="module")
def purge_tables(cql, test_keyspace, compact):
    """{gc_grace_seconds: table} for 0 and 3600, every scenario written, its tombstones past a
    grace of 0, and each table flushed and major-compacted. Each test then writes only its own
    partition."""
    schema = "k int, c int, v int, w int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema, "WITH gc_grace_seconds = 0") as gc0, \
            new_table(cql, test_keyspace, schema, "WITH gc_grace_seconds = 3600") as gc3600:
        tables = {0: gc0, 3600: gc3600}
        for t in tables.values():
            for k in KEYS.values():
                cql.execute(f"INSERT INTO {t} (k, c, v, w) VALUES ({k}, 1, 1, 1) USING TIMESTAMP 10")
        # The shadowed data in one file, the tombstones in the next: the major compaction has
        # to drop both together.
        compact(gc0)
        for t in tables.values():
            for name, k in KEYS.items():
                cql.execute(SCENARIOS[name]["delete"].format(t=t, k=k))
                if SCENARIOS[name].get("newer"):
                    cql.execute(f"INSERT INTO {t} (k, c, v, w) VALUES ({k}, 2, 30, 30) "
                                "USING TIMESTAMP 30")
        # Deletion times have 1 s resolution, and the TTL cell expires up to 2 s from now: a
        # grace of 0 has passed once the clock is 2 s past the current second.
        time.sleep(int(time.time()) + 2.1 - time.time())
        for t in tables.values():
            compact(t)
        yield tables


def partition(cql, table, k):
    return [tuple(r) for r in cql.execute(f"SELECT c, v, w FROM {table} WHERE k = {k}")]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tombstone_purged_after_gc_grace(cql, purge_tables, scenario):
    table, k = purge_tables[0], KEYS[scenario]
    cql.execute(SCENARIOS[scenario]["late"].format(t=table, k=k))
    assert partition(cql, table, k) == SCENARIOS[scenario]["purged"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tombstone_kept_within_gc_grace(cql, purge_tables, scenario):
    table, k = purge_tables[3600], KEYS[scenario]
    cql.execute(SCENARIOS[scenario]["late"].format(t=table, k=k))
    assert partition(cql, table, k) == SCENARIOS[scenario]["kept"]
