"""`helenus admin status` and `describecluster` on a local cluster of three: what `nodetool
status` and `nodetool describecluster` show (every node up and normal, 16 tokens each, effective
ownership summing to the replication factor, one schema version), and a killed node shown down; a node restarting while its seed is down.
Helenus-only (Cassandra's are nodetool's)."""

import re
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

from util import new_session

pytestmark = pytest.mark.helenus_only

# A killed node is DOWN at once (its connections close, its port refuses them); gossip convicts
# a silent one by phi in 10-13 s at the defaults, longer right after a start.
DOWN_TIMEOUT_S = 60
ADMIN_TIMEOUT_S = 60
# How long the nodes' gossiped schema versions may take to agree after a DDL statement.
SCHEMA_AGREEMENT_S = 10

ROW = re.compile(
    r"^(?P<status>[UD][NLJM])\s+(?P<address>\S+)\s+(?P<load>\?|[\d.]+ (?:B|KiB|MiB|GiB))\s+"
    r"(?P<tokens>\d+)\s+(?P<owns>[\d.]+)%\s+(?P<host_id>[0-9a-f-]{36})\s+(?P<rack>\S+)$"
)


def admin(cluster, host, *command):
    result = subprocess.run(
        [cluster.binary, "admin", "--host", host, "--port", str(cluster.admin_port), *command],
        capture_output=True, text=True, timeout=ADMIN_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def status_rows(cluster, host, *keyspace):
    lines = admin(cluster, host, "status", *keyspace)
    assert lines[0] == "Datacenter: datacenter1", lines
    rows = {}
    for line in lines:
        m = ROW.match(line)
        if m:
            rows[m["address"]] = m.groupdict()
    return lines, rows


def test_status_and_describecluster(cluster3):
    with new_session(cluster3.hosts[0], cluster3.cql_port) as s:
        s.execute(
            "CREATE KEYSPACE admin_ks WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 2}"
        )
        s.execute("CREATE TABLE admin_ks.t (k int PRIMARY KEY, v text)")
        for k in range(50):
            s.execute("INSERT INTO admin_ks.t (k, v) VALUES (%s, 'x')", (k,))

    lines, rows = status_rows(cluster3, "127.0.0.2", "admin_ks")
    assert set(rows) == set(cluster3.hosts), lines
    assert "Owns (effective)" in "\n".join(lines)
    for row in rows.values():
        assert row["status"] == "UN", lines
        assert row["tokens"] == "16"
        assert row["rack"] == "rack1"
    # Every range is on two nodes: the shares sum to 200% (each printed to 0.1%).
    assert abs(sum(float(r["owns"]) for r in rows.values()) - 200.0) < 0.5, lines
    host_ids = {r["host_id"] for r in rows.values()}
    assert len(host_ids) == 3
    with new_session(cluster3.hosts[1], cluster3.cql_port) as s:
        local = s.execute("SELECT host_id FROM system.local").one()
    assert str(local.host_id) in host_ids

    # Every node reports the schema version it applied through gossip, which takes a round or
    # two to reach the others (the driver waits up to 10 s for agreement; so does this).
    deadline = time.monotonic() + SCHEMA_AGREEMENT_S
    while True:
        described = admin(cluster3, "127.0.0.1", "describecluster")
        versions = [l for l in described if re.match(r"^\t\t[0-9a-f-]{36}: \[", l)]
        if len(versions) == 1 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert "\tName: Test Cluster" in described
    assert len(versions) == 1, described
    assert all(h in versions[0] for h in cluster3.hosts), described


def test_status_shows_a_killed_node_down(cluster3):
    code, _, err = cluster3.run("kill", "3")
    assert code == 0, err
    deadline = time.monotonic() + DOWN_TIMEOUT_S
    while True:
        lines, rows = status_rows(cluster3, "127.0.0.1")
        if rows.get("127.0.0.3", {}).get("status") == "DN":
            break
        assert time.monotonic() < deadline, f"127.0.0.3 not shown down:\n" + "\n".join(lines)
        time.sleep(1)
    assert rows["127.0.0.1"]["status"] == "UN"
    assert rows["127.0.0.2"]["status"] == "UN"
    # A node without user keyspaces shows raw token ownership, summing to 100%.
    assert "Owns (effective)" not in "\n".join(lines)
    assert abs(sum(float(r["owns"]) for r in rows.values()) - 100.0) < 0.5, lines


def test_a_node_restarts_while_its_seed_is_down(cluster3):
    """A node already in the cluster restarts without its seed (127.0.0.1, down with node 2):
    the metadata log finds the other members itself; it serves its data, and a write at ONE
    through it succeeds. Helenus-only: the cluster CLI."""
    with new_session(cluster3.hosts[0], cluster3.cql_port) as s:
        s.execute(
            "CREATE KEYSPACE seedless WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 3}"
        )
        s.execute("CREATE TABLE seedless.t (k int PRIMARY KEY, v int)")
        s.execute("INSERT INTO seedless.t (k, v) VALUES (1, 1)")
    cluster3.kill(1)
    cluster3.kill(2)
    cluster3.restart(2)
    # Node 2 coordinates (and is a replica of) every request.
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy(["127.0.0.2"]),
        consistency_level=ConsistencyLevel.ONE,
    )
    cluster = Cluster(["127.0.0.2"], port=cluster3.cql_port,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        s = cluster.connect()
        s.execute("INSERT INTO seedless.t (k, v) VALUES (2, 2)")
        rows = s.execute("SELECT k FROM seedless.t WHERE k = 1").all()
        assert [r.k for r in rows] == [1]
    finally:
        cluster.shutdown()


def test_proxystats_counts_the_coordinator_s_reads_and_unavailables(cluster3):
    with new_session(cluster3.hosts[0], cluster3.cql_port) as s:
        s.execute("CREATE KEYSPACE IF NOT EXISTS proxy_ks WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute("CREATE TABLE IF NOT EXISTS proxy_ks.t (k int PRIMARY KEY, v int)")
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy(["127.0.0.2"]))
    cluster = Cluster(["127.0.0.2"], port=cluster3.cql_port,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    try:
        session = cluster.connect()
        read = session.prepare("SELECT v FROM proxy_ks.t WHERE k = ?")
        read.consistency_level = ConsistencyLevel.QUORUM
        for k in range(20):
            session.execute(read, [k])
    finally:
        cluster.shutdown()
    lines = admin(cluster3, "127.0.0.2", "proxystats")
    assert lines[0].split() == ["Request", "Timeouts", "Unavailables"], lines
    rows = {line.split()[0]: line.split() for line in lines if line.strip()}
    assert rows["Read"][1:] == ["0", "0"], lines
    table = rows["proxy_ks.t"]
    # Speculative, failed, no node, p50, p99: the reads were measured.
    assert float(table[4]) > 0 and float(table[5]) >= float(table[4]), lines
    # Another node coordinated none of them.
    other = admin(cluster3, "127.0.0.3", "proxystats")
    assert not [line for line in other if line.startswith("proxy_ks.t")], other
