"""Durability across a clean restart: everything written before SIGTERM is there after the node
starts again on the same data directory, and the node is writable. Helenus-only: these tests
start and stop their own nodes (skipped with --host)."""

import pytest
from cassandra import InvalidRequest

from util import new_session

pytestmark = pytest.mark.helenus_only

ROWS_PER_PARTITION = 20
PARTITIONS = 10


def create_schema_and_rows(s):
    s.execute(
        "CREATE KEYSPACE ks_a WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    s.execute(
        "CREATE KEYSPACE ks_b WITH replication = "
        "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1} AND durable_writes = false"
    )
    s.execute("CREATE TYPE ks_a.point (x int, y int)")
    s.execute(
        "CREATE TABLE ks_a.t (k int, c int, v text, p frozen<point>, s int STATIC, "
        "PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC) AND comment = 'kept'"
    )
    s.execute('CREATE TABLE ks_b."Quoted" (k text PRIMARY KEY, m map<text, int>)')
    insert = s.prepare("INSERT INTO ks_a.t (k, c, v, p) VALUES (?, ?, ?, ?)")
    for k in range(PARTITIONS):
        s.execute("INSERT INTO ks_a.t (k, s) VALUES (%s, %s)", [k, k * 10])
        for c in range(ROWS_PER_PARTITION):
            s.execute(insert, [k, c, f"v{k}-{c}", (k, c)])
    s.execute("DELETE FROM ks_a.t WHERE k = 0 AND c = 5")  # a tombstone must survive too
    s.execute("INSERT INTO ks_b.\"Quoted\" (k, m) VALUES ('a', {'one': 1})")
    # A dropped column's type is schema too: it decides which type may take the name again.
    s.execute("CREATE TABLE ks_a.d (k int PRIMARY KEY, x text)")
    s.execute("ALTER TABLE ks_a.d DROP x")


def check_schema_and_rows(s, later_partitions=()):
    """Everything create_schema_and_rows wrote is there; `later_partitions` of ks_a.t were
    written after it and are only counted."""
    keyspaces = {r.keyspace_name for r in s.execute("SELECT keyspace_name FROM system_schema.keyspaces")}
    assert {"ks_a", "ks_b"} <= keyspaces
    ks_b = s.execute(
        "SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = 'ks_b'"
    ).one()
    assert ks_b.replication["datacenter1"] == "1" and ks_b.durable_writes is False
    table = s.execute(
        "SELECT comment FROM system_schema.tables WHERE keyspace_name = 'ks_a' AND table_name = 't'"
    ).one()
    assert table.comment == "kept"
    with pytest.raises(InvalidRequest, match="incompatible with previously dropped column 'x' of type text"):
        s.execute("ALTER TABLE ks_a.d ADD x int")
    point = s.execute(
        "SELECT field_names FROM system_schema.types WHERE keyspace_name = 'ks_a' AND type_name = 'point'"
    ).one()
    assert point.field_names == ["x", "y"]

    all_rows = list(s.execute("SELECT k, c, v, p, s FROM ks_a.t"))
    assert {r.k for r in all_rows} == set(range(PARTITIONS)) | set(later_partitions)
    rows = [r for r in all_rows if r.k not in later_partitions]
    assert len(rows) == PARTITIONS * ROWS_PER_PARTITION - 1
    by_partition = {}
    for r in rows:
        by_partition.setdefault(r.k, []).append(r.c)
        assert r.v == f"v{r.k}-{r.c}" and (r.p.x, r.p.y) == (r.k, r.c) and r.s == r.k * 10
    expected_cs = list(range(ROWS_PER_PARTITION - 1, -1, -1))  # DESC clustering order
    assert by_partition[0] == [c for c in expected_cs if c != 5]
    assert all(by_partition[k] == expected_cs for k in range(1, PARTITIONS))
    assert s.execute("SELECT m FROM ks_b.\"Quoted\" WHERE k = 'a'").one().m == {"one": 1}


def test_restart_keeps_schema_and_rows(node_factory):
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        create_schema_and_rows(s)
        check_schema_and_rows(s)
    node.restart()  # SIGTERM, wait for exit, start on the same directory and port
    with new_session(node.host, node.port) as s:
        check_schema_and_rows(s)
        # Still writable, schema and data alike.
        s.execute("INSERT INTO ks_a.t (k, c, v, p) VALUES (100, 1, 'after', {x: 1, y: 2})")
        s.execute("ALTER TABLE ks_a.t ADD extra int")
        s.execute("CREATE TABLE ks_b.after (k int PRIMARY KEY)")
        s.execute("INSERT INTO ks_b.after (k) VALUES (1)")
    node.restart()  # and the writes made after the first restart survive the second
    with new_session(node.host, node.port) as s:
        check_schema_and_rows(s, later_partitions=[100])
        assert s.execute("SELECT v FROM ks_a.t WHERE k = 100 AND c = 1").one().v == "after"
        assert s.execute("SELECT k FROM ks_b.after").one().k == 1
        assert "extra" in s.cluster.metadata.keyspaces["ks_a"].tables["t"].columns


def test_restart_of_empty_node(node_factory):
    # A node that never saw a write starts again cleanly (no half-initialised state on disk).
    node = node_factory().start()
    node.restart()
    with new_session(node.host, node.port) as s:
        assert s.execute("SELECT key FROM system.local").one().key == "local"


def test_restart_keeps_the_tokens(node_factory):
    """A node takes `num_tokens` tokens at its first start and keeps them (and its host id) on
    every restart: its data would otherwise belong to other ranges. Drivers read them from
    system.local for token-aware routing. Another `num_tokens` stops the node, with Cassandra's
    message."""
    node = node_factory(extra_config={"num_tokens": 8}).start()
    query = "SELECT host_id, tokens FROM system.local"
    with new_session(node.host, node.port) as s:
        first = s.execute(query).one()
    assert len(first.tokens) == 8
    node.restart()
    with new_session(node.host, node.port) as s:
        again = s.execute(query).one()
        assert s.execute("SELECT * FROM system.peers").one() is None
    assert (again.host_id, again.tokens) == (first.host_id, first.tokens)
    node.stop()
    node.extra_config["num_tokens"] = 4
    with pytest.raises(RuntimeError, match="Cannot change the number of tokens from 8 to 4"):
        node.start()
    node.extra_config["num_tokens"] = 8
    node.start()
    with new_session(node.host, node.port) as s:
        assert s.execute(query).one().tokens == first.tokens
