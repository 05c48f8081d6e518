"""A local cluster (`helenus cluster`, the `cluster3` fixture) and node identity: each node on its
own loopback address answers CQL as itself, `kill` and `restart` work on one node, and a node
refuses directories or a cluster name that are not its own (Cassandra's "Saved cluster name X !=
configured name Y"). The nodes see each other (a driver discovers all three from any), so a
request meant for one node is pinned to it. Helenus-only."""

import json
import subprocess

import pytest

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

from util import cql_ready, default_helenus_bin

pytestmark = pytest.mark.helenus_only

# How long a node that refuses to start may take to exit.
REFUSAL_TIMEOUT_S = 60


def local_row(host, port):
    """system.local as the node at `host` answers it (the request pinned to that node: the
    driver knows the other nodes too)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]))
    cluster = Cluster([host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      connect_timeout=10, control_connection_timeout=10)
    try:
        return cluster.connect().execute(
            "SELECT host_id, broadcast_address, listen_address, rpc_address, rpc_port, "
            "cluster_name, tokens FROM system.local"
        ).one()
    finally:
        cluster.shutdown()


def recorded_host_id(directory):
    """The host id a node directory's identity file records."""
    return json.loads((directory / "helenus-node.json").read_text())["host_id"]


def test_three_nodes_answer_each_as_itself(cluster3):
    host_ids = set()
    for k, host in enumerate(cluster3.hosts, start=1):
        assert cql_ready(host, cluster3.cql_port), f"node{k} does not answer on {host}"
        row = local_row(host, cluster3.cql_port)
        assert str(row.broadcast_address) == host
        assert str(row.listen_address) == host
        assert str(row.rpc_address) == host
        assert row.rpc_port == cluster3.cql_port
        assert row.cluster_name == "Test Cluster"
        assert len(row.tokens) == 16
        # The host id the node serves is the one its directories record.
        node = cluster3.node_dir(k)
        assert str(row.host_id) == recorded_host_id(node / "data")
        assert str(row.host_id) == recorded_host_id(node / "commitlog")
        host_ids.add(row.host_id)
    assert len(host_ids) == 3


def test_kill_and_restart_one_node(cluster3):
    code, out, err = cluster3.run("status")
    assert code == 0, err
    lines = out.splitlines()[1:]
    assert [line.split()[0] for line in lines] == ["node1", "node2", "node3"]
    assert all(line.split()[-1] == "up" for line in lines), out
    before = local_row("127.0.0.2", cluster3.cql_port)

    code, out, err = cluster3.run("kill", "2")
    assert code == 0, err
    assert not cql_ready("127.0.0.2", cluster3.cql_port)
    assert cql_ready("127.0.0.1", cluster3.cql_port)
    code, out, _ = cluster3.run("status")
    node2 = next(line for line in out.splitlines() if line.startswith("node2"))
    assert node2.split()[-1] == "down" and node2.split()[-2] == "-", out

    code, out, err = cluster3.run("restart", "2")
    assert code == 0, f"{out}{err}"
    after = local_row("127.0.0.2", cluster3.cql_port)
    assert (after.host_id, set(after.tokens)) == (before.host_id, set(before.tokens))


def refused(node):
    """Runs the node's server on its config, expecting it to exit: the CompletedProcess."""
    node.write_config()
    return subprocess.run(
        [str(default_helenus_bin()), "server", "--config", str(node.config_path)],
        capture_output=True, text=True, timeout=REFUSAL_TIMEOUT_S,
    )


def test_another_cluster_name_is_refused(node_factory):
    node = node_factory(cluster_name="first")
    node.start()
    node.stop()
    node.cluster_name = "second"
    result = refused(node)
    assert result.returncode != 0
    assert "Saved cluster name first != configured name second" in result.stderr, result.stderr
    assert "Starting listening" not in result.stderr
    # Under its own name it starts as before.
    node.cluster_name = "first"
    node.start()


def test_directories_of_another_node_are_refused(node_factory, tmp_path):
    a, b = node_factory(), node_factory()
    for node in (a, b):
        node.start()
        node.stop()
    id_a, id_b = recorded_host_id(a.directory / "data"), recorded_host_id(b.directory / "data")
    # Swap the data directories: each node's commit log is now beside the other's data.
    parked = tmp_path / "parked"
    (a.directory / "data").rename(parked)
    (b.directory / "data").rename(a.directory / "data")
    parked.rename(b.directory / "data")
    for node, log_owner, data_owner in ((a, id_a, id_b), (b, id_b, id_a)):
        result = refused(node)
        assert result.returncode != 0
        assert "were directories swapped between nodes?" in result.stderr, result.stderr
        assert f"belongs to node {log_owner}" in result.stderr
        assert f"belongs to node {data_owner}" in result.stderr
        assert "Starting listening" not in result.stderr
    # Swapped back, both start: nothing was replayed into the wrong data.
    (a.directory / "data").rename(parked)
    (b.directory / "data").rename(a.directory / "data")
    parked.rename(b.directory / "data")
    for node, host_id in ((a, id_a), (b, id_b)):
        node.start()
        assert str(local_row(node.host, node.port).host_id) == host_id
