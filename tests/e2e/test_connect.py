"""Connecting: protocol negotiation, the system tables drivers read at connect time, the driver's
schema and token metadata, and schema-change events."""

import struct
import time
import uuid

from util import (
    coordinator_address, new_cluster, new_session, new_table, suite_nodes,
    suite_replication_factor, unique_name,
)


def test_negotiated_protocol_is_v5(cql):
    # The driver first offers a DSE version (0x42), is refused, and steps down to v5.
    assert cql.cluster.protocol_version == 5


def test_connect_with_explicit_v5(server):
    with new_session(*server, protocol_version=5) as s:
        assert s.cluster.protocol_version == 5
        assert s.execute("SELECT key FROM system.local").one().key == "local"


def test_connect_with_v4(server):
    with new_session(*server, protocol_version=4) as s:
        assert s.cluster.protocol_version == 4
        assert s.execute("SELECT key FROM system.local").one().key == "local"


def test_system_local(cql):
    rs = cql.execute(
        "SELECT cluster_name, release_version, partitioner, host_id, tokens, data_center, rack, "
        "rpc_address FROM system.local WHERE key = 'local'"
    )
    row = rs.one()
    assert row.cluster_name
    assert row.release_version
    assert row.partitioner == "org.apache.cassandra.dht.Murmur3Partitioner"
    assert isinstance(row.host_id, uuid.UUID)
    # Tokens are the string form of signed 64-bit Murmur3 tokens.
    assert row.tokens and all(isinstance(t, str) for t in row.tokens)
    assert all(-(2**63) <= int(t) < 2**63 for t in row.tokens)
    assert row.data_center
    assert row.rack
    # The node that answered (on a cluster, whichever node the driver picked) is itself.
    assert row.rpc_address == coordinator_address(rs)


def test_system_peers_list_the_other_nodes(cql):
    """Empty on one node; on a cluster, one row per other node, and never the node that
    answers."""
    for table in ("peers", "peers_v2"):
        rs = cql.execute(f"SELECT peer FROM system.{table}")
        peers = [row.peer for row in rs]
        assert len(peers) == suite_nodes() - 1, (table, peers)
        assert coordinator_address(rs) not in peers


def test_metadata_lists_keyspace_and_table(cql, test_keyspace):
    schema = "a int, b text, c bigint, d frozen<list<int>>, v blob, PRIMARY KEY ((a, b), c)"
    with new_table(cql, test_keyspace, schema) as table:
        name = table.split(".")[1]
        meta = cql.cluster.metadata.keyspaces[test_keyspace].tables[name]
        assert [c.name for c in meta.partition_key] == ["a", "b"]
        assert [c.name for c in meta.clustering_key] == ["c"]
        types = {name: col.cql_type for name, col in meta.columns.items()}
        assert types == {
            "a": "int",
            "b": "text",
            "c": "bigint",
            "d": "frozen<list<int>>",
            "v": "blob",
        }


def test_metadata_has_system_schema(cluster):
    system_schema = cluster.metadata.keyspaces["system_schema"]
    assert {"keyspaces", "tables", "columns", "types"} <= set(system_schema.tables)


def test_token_map_routes_to_our_node(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int") as table:
        metadata = cql.cluster.metadata
        assert metadata.token_map is not None and metadata.token_map.ring
        routing_key = struct.pack(">i", 7)
        replicas = metadata.get_replicas(test_keyspace, routing_key)
        # One replica (the node) on one node; RF of the cluster's nodes on a cluster.
        known = {h.endpoint.address for h in metadata.all_hosts()}
        assert len(replicas) == suite_replication_factor()
        assert {h.endpoint.address for h in replicas} <= known
        assert len(known) == suite_nodes()
        # A prepared statement knows its partition key, so the driver can route it.
        bound = cql.prepare(f"SELECT v FROM {table} WHERE k = ?").bind([7])
        assert bound.routing_key == routing_key


def test_second_cluster_sees_schema_change(cql, server, test_keyspace):
    # The second Cluster's control connection REGISTERs for SCHEMA_CHANGE events; the CREATE
    # below, made through the first session, must reach it and trigger a metadata refresh.
    other = new_cluster(*server)
    try:
        other.connect()
        name = unique_name("tbl")
        cql.execute(f"CREATE TABLE {test_keyspace}.{name} (k int PRIMARY KEY, v text)")
        try:
            deadline = time.monotonic() + 10
            while name not in other.metadata.keyspaces[test_keyspace].tables:
                assert time.monotonic() < deadline, "second Cluster never saw the new table"
                time.sleep(0.05)  # poll interval
            assert set(other.metadata.keyspaces[test_keyspace].tables[name].columns) == {"k", "v"}
        finally:
            cql.execute(f"DROP TABLE {test_keyspace}.{name}")
    finally:
        other.shutdown()
