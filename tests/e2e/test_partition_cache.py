"""The partition cache (`partition_cache_size_in_mb`): repeated reads are served from memory,
and what they return is exactly what storage holds: writes, deletions, TTL expiry, slices and
paging all show through it. Helenus-only (it reads the node's own metrics); the same
statements run against Cassandra in the other conformance files."""

import time

import pytest

from util import new_session

pytestmark = pytest.mark.helenus_only


def metrics(node):
    code, out, err = node.admin("metrics")
    assert code == 0, err
    return {k: int(v) for k, v in (line.split("=") for line in out.splitlines())}


def setup(s):
    s.execute("CREATE KEYSPACE pc WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE pc.kv (k int PRIMARY KEY, v text)")
    s.execute("CREATE TABLE pc.ts (p int, c int, v text, s text STATIC, PRIMARY KEY (p, c))")


def test_repeated_reads_hit_and_every_write_shows_through(node_factory):
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        setup(s)
        read = s.prepare("SELECT v FROM pc.kv WHERE k = ?")
        s.execute("INSERT INTO pc.kv (k, v) VALUES (1, 'a')")
        assert node.admin("flush", "pc.kv")[0] == 0
        before = metrics(node)
        for _ in range(5):
            assert s.execute(read, [1]).one().v == "a"
        after = metrics(node)
        # The first read loads the partition, the next four are hits.
        assert after["partition_cache_hits"] - before["partition_cache_hits"] >= 4
        assert after["partition_cache_partitions"] >= 1

        # An overwrite, an older write that loses, a deletion and a write after it: each read
        # right after the acknowledgement sees it.
        s.execute("UPDATE pc.kv SET v = 'b' WHERE k = 1")
        assert s.execute(read, [1]).one().v == "b"
        s.execute("UPDATE pc.kv USING TIMESTAMP 1 SET v = 'old' WHERE k = 1")
        assert s.execute(read, [1]).one().v == "b"
        s.execute("DELETE FROM pc.kv WHERE k = 1")
        assert s.execute(read, [1]).one() is None
        s.execute("INSERT INTO pc.kv (k, v) VALUES (1, 'c')")
        assert s.execute(read, [1]).one().v == "c"

        # An absent partition is cached as absent until it is written.
        assert s.execute(read, [2]).one() is None
        assert s.execute(read, [2]).one() is None
        s.execute("INSERT INTO pc.kv (k, v) VALUES (2, 'new')")
        assert s.execute(read, [2]).one().v == "new"

        # Expiry is applied at read time, so a cached cell with a TTL still expires. (TTL 2, not
        # 1: a cell expires at the write's second plus its TTL, so with TTL 1 a read that
        # crosses into the next second, as one did on a loaded CI machine, already misses it.)
        s.execute("INSERT INTO pc.kv (k, v) VALUES (3, 'brief') USING TTL 2")
        assert s.execute(read, [3]).one().v == "brief"
        time.sleep(3.1)
        assert s.execute(read, [3]).one() is None

        # Truncate forgets the table.
        s.execute("TRUNCATE pc.kv")
        assert s.execute(read, [1]).one() is None


def test_slices_statics_and_paging_through_the_cache(node_factory):
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        setup(s)
        for c in range(10):
            s.execute("INSERT INTO pc.ts (p, c, v) VALUES (1, %s, %s)", [c, f"v{c}"])
        s.execute("UPDATE pc.ts SET s = 'static' WHERE p = 1")
        whole = [(r.c, r.v, r.s) for r in s.execute("SELECT c, v, s FROM pc.ts WHERE p = 1")]
        assert len(whole) == 10 and all(r[2] == "static" for r in whole)
        # Warm, then read slices, reversed and paged: all from the cached partition.
        before = metrics(node)
        rows = s.execute("SELECT c FROM pc.ts WHERE p = 1 AND c >= 3 AND c < 7 ORDER BY c DESC")
        assert [r.c for r in rows] == [6, 5, 4, 3]
        s.default_fetch_size = 3
        paged = [r.c for r in s.execute("SELECT c FROM pc.ts WHERE p = 1")]
        assert paged == list(range(10))
        assert metrics(node)["partition_cache_hits"] > before["partition_cache_hits"]
        # A range deletion and a new row show in the next slice.
        s.execute("DELETE FROM pc.ts WHERE p = 1 AND c >= 2 AND c <= 4")
        s.execute("INSERT INTO pc.ts (p, c, v) VALUES (1, 42, 'late')")
        assert [r.c for r in s.execute("SELECT c FROM pc.ts WHERE p = 1")] == \
            [0, 1, 5, 6, 7, 8, 9, 42]
        s.execute("DELETE s FROM pc.ts WHERE p = 1")
        assert {r.s for r in s.execute("SELECT s FROM pc.ts WHERE p = 1")} == {None}


def test_the_cache_can_be_turned_off(node_factory):
    node = node_factory(extra_config={"partition_cache_size_in_mb": 0}).start()
    with new_session(node.host, node.port) as s:
        setup(s)
        s.execute("INSERT INTO pc.kv (k, v) VALUES (1, 'a')")
        for _ in range(3):
            assert s.execute("SELECT v FROM pc.kv WHERE k = 1").one().v == "a"
        m = metrics(node)
    assert m["partition_cache_hits"] == 0 and m["partition_cache_partitions"] == 0
