"""`helenus admin`: flush, compact and per-table statistics, run as a separate process against
a running node, as an operator runs nodetool. Helenus-only (Cassandra's nodetool is JMX)."""

import pytest

from util import new_session

pytestmark = pytest.mark.helenus_only


def stats(node, target):
    """{table: {key: int}} from `helenus admin stats TARGET`."""
    code, out, err = node.admin("stats", target)
    assert code == 0, err
    tables = {}
    for line in out.splitlines():
        name, *pairs = line.split()
        tables[name] = {k: int(v) for k, v in (p.split("=") for p in pairs)}
    return tables


def test_flush_compact_and_stats(node_factory):
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        s.execute("CREATE KEYSPACE adm WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE adm.t (k int, c int, v text, PRIMARY KEY (k, c))")
        s.execute("CREATE TABLE adm.other (k int PRIMARY KEY)")
        insert = s.prepare("INSERT INTO adm.t (k, c, v) VALUES (?, ?, ?)")
        for k in range(20):
            for c in range(5):
                s.execute(insert, [k, c, f"v{k}.{c}"])

        before = stats(node, "adm")
        assert set(before) == {"adm.t", "adm.other"}
        assert before["adm.t"]["memtable_entries"] == 100 and before["adm.t"]["live_files"] == 0

        code, out, err = node.admin("flush", "adm.t")
        assert code == 0, err
        flushed = stats(node, "adm.t")["adm.t"]
        assert flushed["live_files"] >= 1 and flushed["live_file_bytes"] > 0
        assert flushed["file_entries"] == 100 and flushed["memtable_entries"] == 0

        # Overwrite half the rows and flush again: two files, then one after compaction.
        for k in range(10):
            for c in range(5):
                s.execute(insert, [k, c, f"new{k}.{c}"])
        assert node.admin("flush")[0] == 0  # every table, and node metadata
        assert stats(node, "adm.t")["adm.t"]["live_files"] >= 2
        code, out, err = node.admin("compact", "adm.t")
        assert code == 0, err
        compacted = stats(node, "adm.t")["adm.t"]
        assert compacted["live_files"] == 1 and compacted["file_entries"] == 100

        rows = {(r.k, r.c): r.v for r in s.execute("SELECT k, c, v FROM adm.t")}
        assert len(rows) == 100
        assert rows[(3, 4)] == "new3.4" and rows[(15, 2)] == "v15.2"

    code, out, err = node.admin("stats")
    assert code == 0 and "adm.t " in out and "adm.other " in out


def test_admin_errors(node_factory):
    node = node_factory().start()
    for command, message in [
        (("flush", "no_such_ks"), "unknown keyspace"),
        (("stats", "system_schema.nope"), "unknown table"),
        (("frobnicate",), "unknown admin command"),
        (("frobnicate", "x"), "unknown admin command"),
        (("flush", "a", "b"), "expected"),
    ]:
        code, out, err = node.admin(*command)
        assert code != 0 and message in err, (command, out, err)
    # The node is unharmed.
    with new_session(node.host, node.port) as s:
        assert s.execute("SELECT key FROM system.local").one().key == "local"


def test_admin_without_a_node_says_so(node_factory):
    node = node_factory()  # never started
    code, out, err = node.admin("stats")
    assert code != 0 and "cannot reach the node's admin port" in err


def metrics(node):
    code, out, err = node.admin("metrics")
    assert code == 0, err
    return {k: int(v) for k, v in (line.split("=") for line in out.splitlines())}


def test_metrics_count_point_reads_and_disk_bytes(node_factory):
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        s.execute("CREATE KEYSPACE met WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute("CREATE TABLE met.t (k int PRIMARY KEY, v blob)")
        insert = s.prepare("INSERT INTO met.t (k, v) VALUES (?, ?)")
        for k in range(200):
            s.execute(insert, [k, bytes(100)])
        assert node.admin("flush", "met.t")[0] == 0
        before = metrics(node)
        select = s.prepare("SELECT v FROM met.t WHERE k = ?")
        for k in range(0, 200, 10):
            assert s.execute(select, [k]).one().v == bytes(100)
        after = metrics(node)
    assert after["partition_reads"] - before["partition_reads"] >= 20
    assert after["file_read_bytes"] > before["file_read_bytes"]
    assert after["block_cache_hits"] + after["block_cache_misses"] > \
        before["block_cache_hits"] + before["block_cache_misses"]
    for name in ("bloom_prefix_useful", "pending_compaction_bytes", "write_stall_micros",
                 "memtable_bytes", "running_compactions"):
        assert name in after
    code, out, err = node.admin("metrics", "met.t")
    assert code != 0 and "node-wide" in err
