"""Fixtures for the end-to-end suite.

By default the suite starts the real `helenus` binary ($HELENUS_BIN, else
$CARGO_TARGET_DIR/debug/helenus, else <repo>/target/debug/helenus) in a fresh temporary directory
on a free port, and stops it with SIGTERM at the end. With `--host HOST:PORT` (or
$HELENUS_TEST_HOST) it runs against a server that is already up instead — that is how the suite
is proved right against Apache Cassandra 5.0:

    scripts/cassandra.sh start
    pytest tests/e2e --host 127.0.0.1:9042

Tests marked `helenus_only` start and stop their own Helenus nodes; they are skipped with --host.
The `cluster3` fixture runs a local cluster of three (`helenus cluster start --nodes 3`) on
127.0.0.1-3 for such tests.

The cluster suites (`test_cluster_replication.py`) share one 3-node cluster per module, the
`shared_cluster3` fixture: `helenus cluster` by default, or with `--cluster-cassandra` a local
Apache Cassandra 5.0 cluster (tests/cluster-cassandra, `scripts/cassandra.sh cluster`; about
1.5 minutes to start, stopped at the end), which is how those tests are proved right:

    pytest tests/e2e/test_cluster_replication.py --cluster-cassandra

Tests that need tables flushed and compacted (tombstone purging) use the `compact` fixture: on the
Helenus node the suite started it runs `helenus admin`; with --host it runs the command given by
`--nodetool CMD` (e.g. `--nodetool "scripts/cassandra.sh nodetool"`), and skips without one.

With `--cluster-nodes 3` (or $HELENUS_TEST_NODES=3) the whole suite runs against a cluster:
the session's `server` is `helenus cluster start --nodes 3` on 127.0.0.1-3 (with
--cluster-cassandra, a local Cassandra 5.0 cluster instead), the driver connects to every node
(token-aware), every keyspace the suite creates on it has RF 3 (`util.replication()`), drivers
connected to it default to QUORUM (`util.suite_consistency_level()`), and `compact` flushes and
compacts on every node. Tests that start their own nodes run as they do on one node:

    pytest tests/e2e --cluster-nodes 3
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from util import (
    HelenusNode, LocalCluster, configure_suite, default_helenus_bin, new_cluster, replication,
    suite_nodes, unique_name, wait_for_cql,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "cluster-cassandra"))
from cassandra_cluster import CassandraLocalCluster  # noqa: E402
# A flush or major compaction of one small table; Cassandra's nodetool also starts a JVM.
COMPACT_TIMEOUT_S = 120

# The cluster-mode subset CI runs (`--cluster-subset`, with `--cluster-nodes 3`; 115 s on a
# 2-core machine, where the tests on the shared server take 25-35 minutes on a cluster, most
# of it schema agreement after DDL): (module, name fragments) pairs, a test taken when it is in the
# module and its name contains one of the fragments (None: the whole module). It covers
# reads and writes, batches, counters, TTL, paging, collections, tombstones and their purging
# by compaction on every node, keyspace DDL, and error classes.
CLUSTER_SUBSET = (
    ("test_dml.py", ("batch", "ttl", "paging", "counter", "test_static_columns")),
    ("test_paging.py", None),
    ("test_collections.py", ("set", "map", "list_prepend", "in_a_batch")),
    ("test_tombstones.py", None),
    ("test_gc_grace.py", None),
    ("test_schema.py", ("keyspace",)),
    ("test_errors.py", ("test_syntax_error", "unknown", "wrong_value_type", "missing_primary",
                        "null_partition_key", "raw_options", "raw_malformed")),
    ("test_connect.py", None),
)


# The modules whose tests start local clusters of three on 127.0.0.1-3 (`cluster3`,
# `shared_cluster3` and clusters of their own), by the group of pytest-xdist workers
# (`-n 2 --dist loadgroup`, as scripts/test-all runs the suite) that runs each: a group's tests
# run one after another on one worker, so at most one cluster per group is up at a time, and a
# module's `shared_cluster3` is started once. Two groups, each about half of the suite's cluster
# time (mostly waits for gossip to convict a killed node, little CPU), run beside each other and
# beside the tests on the one-node server, which workers take as they come free. The groups are
# the largest units, so xdist hands them out first.
CLUSTER_GROUPS = {
    # Conviction waits: every level with a node down, read repair, placement, restarts.
    "test_cluster_replication.py": "cluster-views",
    "test_admin_cluster.py": "cluster-views",
    "test_cluster.py": "cluster-views",
    "test_batchlog.py": "cluster-views",
    # Faults under load and hinted handoff.
    "test_cluster_faults.py": "cluster-faults",
    "test_hints.py": "cluster-faults",
    "test_messaging_faults.py": "cluster-faults",
}


def pytest_addoption(parser):
    parser.addoption(
        "--host",
        default=os.environ.get("HELENUS_TEST_HOST"),
        help="HOST:PORT of an already running server (Helenus or Cassandra) to test instead of "
        "starting the helenus binary; default $HELENUS_TEST_HOST",
    )
    parser.addoption(
        "--nodetool",
        default=os.environ.get("HELENUS_TEST_NODETOOL"),
        help="with --host: a nodetool-like command the `compact` fixture runs as `CMD flush KS T` "
        "and `CMD compact KS T`, e.g. \"scripts/cassandra.sh nodetool\" (relative paths are "
        "resolved from the repository root); default $HELENUS_TEST_NODETOOL",
    )
    parser.addoption(
        "--cluster-nodes",
        type=int,
        default=int(os.environ.get("HELENUS_TEST_NODES") or 1),
        help="run the suite against a cluster of N nodes: the session's server is `helenus "
        "cluster start --nodes N` (with --cluster-cassandra a local Cassandra cluster; with "
        "--host, the given node of such a cluster), keyspaces get RF min(N, 3) and drivers "
        "QUORUM; default $HELENUS_TEST_NODES, else 1",
    )
    parser.addoption(
        "--cluster-subset",
        action="store_true",
        help="run only the documented cluster-mode subset (CLUSTER_SUBSET in conftest.py), "
        "as CI does with --cluster-nodes 3",
    )
    parser.addoption(
        "--cluster-cassandra",
        action="store_true",
        default=bool(os.environ.get("HELENUS_TEST_CLUSTER_CASSANDRA")),
        help="run the cluster suites (the shared_cluster3 fixture) against a local 3-node "
        "Apache Cassandra 5.0 (scripts/cassandra.sh cluster) instead of helenus cluster; "
        "default: set if $HELENUS_TEST_CLUSTER_CASSANDRA is non-empty",
    )


def pytest_configure(config):
    nodes = config.getoption("--cluster-nodes")
    if nodes < 1:
        raise pytest.UsageError(f"--cluster-nodes must be at least 1, not {nodes}")
    # The shared server's addresses are recorded once it is up (the `server` fixture).
    configure_suite(nodes)
    config.addinivalue_line(
        "markers", "helenus_only: starts/stops its own Helenus nodes; skipped with --host"
    )
    config.addinivalue_line(
        "markers", "cluster: runs on the shared 3-node cluster (Helenus, or Cassandra with "
        "--cluster-cassandra)"
    )


def in_cluster_subset(item):
    """Whether a collected test is in CLUSTER_SUBSET."""
    module = item.path.name
    for subset_module, fragments in CLUSTER_SUBSET:
        if module == subset_module and (
                fragments is None or any(f in item.name for f in fragments)):
            return True
    return False


# First: pytest-xdist's worker reads the `xdist_group` marks in its own hook.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        group = CLUSTER_GROUPS.get(item.path.name)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    if config.getoption("--cluster-subset"):
        deselected = [item for item in items if not in_cluster_subset(item)]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if in_cluster_subset(item)]
    if not config.getoption("--host"):
        return
    skip = pytest.mark.skip(reason="starts its own Helenus nodes; not possible with --host")
    for item in items:
        if "helenus_only" in item.keywords:
            item.add_marker(skip)


def _parse_host(value):
    host, sep, port = value.rpartition(":")
    if not sep:
        return value, 9042
    return host.strip("[]"), int(port)


class Server(tuple):
    """(host, port) of the server under test (with --cluster-nodes, of its first node); `node`
    is the HelenusNode the suite started, `cluster` the LocalCluster (or
    CassandraLocalCluster) it started with --cluster-nodes; both None when it runs against
    --host."""

    def __new__(cls, host, port, node=None, cluster=None):
        self = super().__new__(cls, (host, port))
        self.node = node
        self.cluster = cluster
        return self


def _start_suite_cluster(request, tmp_path_factory, nodes):
    """The session's cluster of `nodes` (--cluster-nodes): Cassandra's with --cluster-cassandra,
    else `helenus cluster`; started, with the directory to remove at the end (or None)."""
    if request.config.getoption("--cluster-cassandra"):
        directory = tmp_path_factory.mktemp("cassandra-suite-cluster")
        return CassandraLocalCluster(directory, nodes=nodes), directory
    binary = default_helenus_bin()
    _require_binary(binary)
    return LocalCluster(binary, tmp_path_factory.mktemp("suite-cluster"), nodes=nodes), None


def _require_binary(binary):
    if not os.access(binary, os.X_OK):
        pytest.exit(
            f"helenus binary not found at {binary}: build it (cargo build --bin helenus), set "
            "HELENUS_BIN, or run against a running server with --host HOST:PORT",
            returncode=3,
        )


@pytest.fixture(scope="session")
def server(request, tmp_path_factory):
    """Server((host, port), node, cluster) of the server under test, running for the whole
    session: --host's, else a cluster of --cluster-nodes N > 1, else one Helenus node."""
    given = request.config.getoption("--host")
    nodes = suite_nodes()
    if given:
        host, port = _parse_host(given)
        wait_for_cql(host, port, timeout_s=30)
        configure_suite(nodes, [(host, port)])
        yield Server(host, port)
        return
    if nodes > 1:
        cluster, directory = _start_suite_cluster(request, tmp_path_factory, nodes)
        try:
            cluster.start()
            configure_suite(nodes, [(host, cluster.cql_port) for host in cluster.hosts])
            yield Server(cluster.hosts[0], cluster.cql_port, cluster=cluster)
        finally:
            cluster.destroy()
            if directory is not None:
                # Three Cassandra nodes' data, commit logs and logs: hundreds of MiB.
                shutil.rmtree(directory, ignore_errors=True)
        return
    binary = default_helenus_bin()
    _require_binary(binary)
    node = HelenusNode(binary, tmp_path_factory.mktemp("helenus-node"))
    node.start()
    try:
        configure_suite(nodes, [(node.host, node.port)])
        yield Server(node.host, node.port, node)
    finally:
        node.stop()


@pytest.fixture(scope="session")
def cluster(server):
    """A driver Cluster shared by the session. The protocol version is negotiated: the driver
    offers its newest version and steps down on a protocol error, so it settles on v5. On a
    cluster it connects to every node (discovered from system.peers) and routes token-aware;
    its default consistency level is `util.suite_consistency_level()`."""
    c = new_cluster(*server)
    yield c
    c.shutdown()


@pytest.fixture(scope="session")
def cql(cluster):
    """The shared Session. Tests use fully qualified names and never `USE` on it."""
    return cluster.connect()


@pytest.fixture(scope="session")
def test_keyspace(cql):
    """A keyspace (SimpleStrategy, RF 1; RF 3 with --cluster-nodes 3) for the whole session,
    dropped at the end."""
    name = unique_name("ks")
    cql.execute(f"CREATE KEYSPACE {name} WITH replication = {replication()}")
    yield name
    cql.execute(f"DROP KEYSPACE {name}")


@pytest.fixture(scope="session")
def compact(request, server):
    """`compact(keyspace, table)` (or `compact("keyspace.table")`): flushes the table's memtable
    and runs a major compaction of all its files, as `nodetool flush` + `nodetool compact` do;
    tombstones past gc_grace_seconds are purged then, on every node of a cluster. Skips the
    test when the server under test offers no way to do it."""
    nodetool = request.config.getoption("--nodetool")
    if server.cluster is not None:
        suite_cluster = server.cluster

        def run(keyspace, table=None):
            if table is None:
                keyspace, table = keyspace.split(".")
            for k in range(1, suite_cluster.nodes + 1):
                for verb in ("flush", "compact"):
                    if suite_cluster.flavor == "cassandra":
                        suite_cluster.nodetool(k, verb, keyspace, table)
                        continue
                    code, out, err = suite_cluster.admin(k, verb, f"{keyspace}.{table}")
                    assert code == 0, (
                        f"helenus admin {verb} {keyspace}.{table} on node {k}: {out}{err}"
                    )

        return run
    if server.node is not None:
        node = server.node

        def run(keyspace, table=None):
            if table is None:
                keyspace, table = keyspace.split(".")
            for verb in ("flush", "compact"):
                code, out, err = node.admin(verb, f"{keyspace}.{table}")
                assert code == 0, f"helenus admin {verb} {keyspace}.{table}: {out}{err}"

        return run
    if nodetool:
        command = shlex.split(nodetool)

        def run(keyspace, table=None):
            if table is None:
                keyspace, table = keyspace.split(".")
            for verb in ("flush", "compact"):
                result = subprocess.run(
                    [*command, verb, keyspace, table], cwd=REPO_ROOT, capture_output=True,
                    text=True, timeout=COMPACT_TIMEOUT_S,
                )
                assert result.returncode == 0, (
                    f"{nodetool} {verb} {keyspace} {table}: {result.stdout}{result.stderr}"
                )

        return run
    pytest.skip("no way to flush and compact: give --nodetool CMD with --host")


@pytest.fixture
def node_factory(request, tmp_path_factory):
    """Makes Helenus nodes (`factory()` or `factory(directory)`) that the test starts, stops and
    restarts itself; every node still running at the end is stopped. Helenus-only."""
    if request.config.getoption("--host"):
        pytest.skip("starts its own Helenus nodes; not possible with --host")
    binary = default_helenus_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"helenus binary not found at {binary}")
    nodes = []

    def factory(directory=None, port=None, **config):
        node = HelenusNode(binary, directory or tmp_path_factory.mktemp("node"), port=port, **config)
        nodes.append(node)
        return node

    yield factory
    for node in nodes:
        node.stop()


@pytest.fixture
def cluster3(request, tmp_path_factory):
    """Three Helenus nodes on 127.0.0.1, 127.0.0.2 and 127.0.0.3 (`helenus cluster start
    --nodes 3` in a fresh directory, every node answering CQL), stopped at the end and any node
    left SIGKILLed by its pid. Helenus-only: skipped with --host."""
    if request.config.getoption("--host"):
        pytest.skip("starts its own Helenus cluster; not possible with --host")
    binary = default_helenus_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"helenus binary not found at {binary}")
    cluster = LocalCluster(binary, tmp_path_factory.mktemp("cluster3"), nodes=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


def shared_cluster_scope(fixture_name, config):
    """The scope of `shared_cluster3`: a module's (a shared cluster restarts the nodes a test
    killed before the next test)."""
    return "module"


def cluster_is_shared(config):
    """Whether `shared_cluster3` outlives a test (so a test must leave every node up)."""
    return shared_cluster_scope("shared_cluster3", config) == "module"


@pytest.fixture(scope=shared_cluster_scope)
def shared_cluster3(request, tmp_path_factory):
    """Three nodes on 127.0.0.1-3, every node up and answering CQL: `helenus cluster` (a
    `LocalCluster`), or with --cluster-cassandra a local Cassandra 5.0 (a
    `CassandraLocalCluster`, same shape), shared by a module's tests where possible
    (`shared_cluster_scope`). Stopped at the end, any node left SIGKILLed by its pid. Without
    --cluster-cassandra it is skipped with --host (it starts Helenus nodes)."""
    if request.config.getoption("--cluster-cassandra"):
        directory = tmp_path_factory.mktemp("cassandra-cluster3")
        cluster = CassandraLocalCluster(directory, nodes=3)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.destroy()
            # Three nodes' data, commit logs and logs: hundreds of MiB.
            shutil.rmtree(directory, ignore_errors=True)
        return
    if request.config.getoption("--host"):
        pytest.skip("starts its own Helenus cluster; not possible with --host "
                    "(give --cluster-cassandra to run it against Cassandra)")
    binary = default_helenus_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"helenus binary not found at {binary}")
    cluster = LocalCluster(binary, tmp_path_factory.mktemp("shared-cluster3"), nodes=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
