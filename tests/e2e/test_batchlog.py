"""The batch log, on three real nodes (`helenus cluster` with HELENUS_FAULT_INJECTION=true and
`write_request_timeout: 1000ms`) and on one: a LOGGED batch of several partitions is stored on
two other nodes' batch logs before its mutations go out, and removed once they reached their
consistency level, so every node's `system.batches` ends empty; an UNLOGGED batch never
touches the log; a batch log that does not answer is a WriteTimeout of write type BATCH_LOG;
and when the coordinator dies after acknowledging a batch whose mutations reached only its own
replica, the other nodes replay it from their batch logs (batches older than twice the write
timeout, looked at every 10 s), so every partition is readable at QUORUM without it.

Helenus-only: the fault injection that cuts one verb of a link is Helenus's test hook, and
`helenus admin proxystats` counts logged and replayed batches.
"""

import os
import re
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import WriteTimeout
from cassandra.cluster import Cluster
from cassandra.policies import WriteType
from cassandra.query import SimpleStatement

from util import LocalCluster, default_helenus_bin, pinned_session, unique_name, wait_until

pytestmark = pytest.mark.helenus_only

# The nodes' write_request_timeout: small, so that a batch is old enough to replay (twice it)
# soon after it was written.
WRITE_TIMEOUT_S = 1.0
# Cassandra's batch log replay interval (BatchlogManager.REPLAY_INTERVAL).
REPLAY_INTERVAL_S = 10
# Slack for gossip, a loaded machine and a debug build.
SLACK_S = 15
# Per request: longer than the write timeout the coordinator answers by.
REQUEST_TIMEOUT_S = 20
# How long the nodes may take to see each other up (gossip), so that ALL can succeed.
VIEW_TIMEOUT_S = 60


class BatchCluster(LocalCluster):
    """A `LocalCluster` whose nodes run with fault injection on (HELENUS_FAULT_INJECTION in
    their environment) and a 1 s write timeout."""

    def run(self, *args, timeout_s=180):
        env = dict(os.environ)
        env["HELENUS_FAULT_INJECTION"] = "true"
        result = subprocess.run(
            [self.binary, "cluster", *args, "--dir", str(self.directory)],
            capture_output=True, text=True, timeout=timeout_s, env=env,
        )
        return result.returncode, result.stdout, result.stderr

    def admin_ok(self, k, *command):
        """`helenus admin COMMAND...` against node k; its stdout."""
        result = subprocess.run(
            [self.binary, "admin", "--host", self.hosts[k - 1], "--port", str(self.admin_port),
             *command],
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, f"admin {' '.join(command)} on node{k}: {result.stderr}"
        return result.stdout

    def batchlog_counts(self, k):
        """(logged, replayed) batches from node k's `helenus admin proxystats`."""
        out = self.admin_ok(k, "proxystats")
        m = re.search(r"Batch log: (\d+) logged batches, (\d+) replayed", out)
        assert m, out
        return int(m.group(1)), int(m.group(2))


@pytest.fixture(scope="module")
def batch3(request, tmp_path_factory):
    if request.config.getoption("--host"):
        pytest.skip("starts its own Helenus cluster; not possible with --host")
    binary = default_helenus_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"helenus binary not found at {binary}")
    cluster = BatchCluster(binary, tmp_path_factory.mktemp("batch3"), nodes=3)
    try:
        cluster.start()
        cluster._check("stop")
        for k in range(1, 4):
            with open(cluster.node_dir(k) / "helenus.yaml", "a") as config:
                config.write("# test_batchlog: batches old enough to replay soon.\n"
                             f"write_request_timeout: {int(WRITE_TIMEOUT_S * 1000)}ms\n")
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()



def batch(kind, table, keys, value):
    """A batch of `kind` (LOGGED or UNLOGGED) writing `value` to each of `keys`' partitions."""
    inserts = "".join(f"INSERT INTO {table} (k, v) VALUES ({k}, {value}); " for k in keys)
    return f"BEGIN {'UNLOGGED ' if kind == 'UNLOGGED' else ''}BATCH {inserts}APPLY BATCH"


def execute(session, statement, cl):
    return session.execute(SimpleStatement(statement, consistency_level=cl))


def values(session, table, keys, cl):
    """{k: v} of `keys` read at `cl`."""
    out = {}
    for k in keys:
        row = execute(session, f"SELECT v FROM {table} WHERE k = {k}", cl).one()
        if row is not None:
            out[k] = row.v
    return out


def stored_batches(session):
    return list(session.execute("SELECT id, mutations, version FROM system.batches"))


@pytest.fixture(scope="module")
def table3(batch3):
    """A table of RF 3 on `batch3`, once every node sees the others up (a write at ALL)."""
    c, s = pinned_session(batch3.hosts[0], batch3.cql_port, REQUEST_TIMEOUT_S)
    try:
        ks = unique_name("batchlog")
        s.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        table = f"{ks}.t"
        s.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v int)")

        def all_write_succeeds():
            try:
                execute(s, f"INSERT INTO {table} (k, v) VALUES (0, 0)", CL.ALL)
                return True
            except Exception:
                return False
        wait_until(all_write_succeeds, VIEW_TIMEOUT_S, "a write at ALL through node1")
    finally:
        c.shutdown()
    return table


def test_a_logged_batch_through_each_node_leaves_every_batch_log_empty(batch3, table3):
    sessions = [pinned_session(h, batch3.cql_port, REQUEST_TIMEOUT_S) for h in batch3.hosts]
    try:
        before = [batch3.batchlog_counts(k)[0] for k in range(1, 4)]
        for n, (_, s) in enumerate(sessions):
            keys = [100 + 10 * n + i for i in range(3)]
            execute(s, batch("LOGGED", table3, keys, n), CL.QUORUM)
            assert values(s, table3, keys, CL.QUORUM) == {k: n for k in keys}
        for k in range(1, 4):
            assert batch3.batchlog_counts(k)[0] == before[k - 1] + 1, f"node{k} logged one"
        # Removed once applied (in the background: poll), not replayed.
        for _, s in sessions:
            wait_until(lambda: stored_batches(s) == [], 10, "an empty batch log")
        assert all(batch3.batchlog_counts(k)[1] == 0 for k in range(1, 4)), "nothing replayed"
    finally:
        for c, _ in sessions:
            c.shutdown()


def test_unlogged_batches_skip_the_log_and_a_silent_log_is_a_batch_log_timeout(batch3, table3):
    c, s = pinned_session(batch3.hosts[0], batch3.cql_port, REQUEST_TIMEOUT_S)
    try:
        for peer in batch3.hosts[1:]:
            batch3.admin_ok(1, "fault", "--to", peer, "--verb", "BATCH_STORE", "cut")
        logged_before = batch3.batchlog_counts(1)[0]
        # UNLOGGED: no batch log, so the cut changes nothing.
        execute(s, batch("UNLOGGED", table3, [200, 201], 1), CL.ALL)
        # LOGGED of one partition: no batch log either, as in Cassandra.
        execute(s, batch("LOGGED", table3, [202], 1), CL.ALL)
        assert values(s, table3, [200, 201, 202], CL.ALL) == {200: 1, 201: 1, 202: 1}
        # LOGGED of two: the batch log endpoints (node2 and node3) never answer.
        started = time.monotonic()
        with pytest.raises(WriteTimeout) as info:
            execute(s, batch("LOGGED", table3, [203, 204], 1), CL.QUORUM)
        e = info.value
        assert e.write_type == WriteType.BATCH_LOG, e
        assert (e.received_responses, e.required_responses) == (0, 2), e
        assert time.monotonic() - started >= WRITE_TIMEOUT_S * 0.9
        assert values(s, table3, [203, 204], CL.ALL) == {}, "no mutation was sent"
        assert batch3.batchlog_counts(1)[0] == logged_before
    finally:
        batch3.admin_ok(1, "fault", "clear")
        c.shutdown()


def test_the_batch_of_a_coordinator_that_dies_is_replayed_by_the_others(batch3, table3):
    """Node1 coordinates a LOGGED batch at ONE whose mutations (and hints, which travel as
    mutations) reach no other node and whose removal from the batch log is lost; it answers
    with its own replica's acknowledgement, then is SIGKILLed. Node2 and node3 hold the batch
    and replay it once it is older than twice the write timeout."""
    keys = [300, 301, 302, 303]
    c2, s2 = pinned_session(batch3.hosts[1], batch3.cql_port, REQUEST_TIMEOUT_S)
    c3, s3 = pinned_session(batch3.hosts[2], batch3.cql_port, REQUEST_TIMEOUT_S)
    try:
        for peer in batch3.hosts[1:]:
            for verb in ("MUTATION", "BATCH_REMOVE"):
                batch3.admin_ok(1, "fault", "--to", peer, "--verb", verb, "cut")
        c1, s1 = pinned_session(batch3.hosts[0], batch3.cql_port, REQUEST_TIMEOUT_S)
        try:
            execute(s1, batch("LOGGED", table3, keys, 7), CL.ONE)
        finally:
            c1.shutdown()
        batch3.kill(1)
        killed = time.monotonic()
        # Logged on both others (the batch's mutations in Helenus's mutation encoding).
        for s in (s2, s3):
            rows = stored_batches(s)
            assert len(rows) == 1, rows
            assert rows[0].id.version == 1 and len(rows[0].mutations) == 1, rows
        limit_s = 2 * WRITE_TIMEOUT_S + REPLAY_INTERVAL_S + SLACK_S

        def replayed():
            try:
                return values(s2, table3, keys, CL.QUORUM) == {k: 7 for k in keys}
            except Exception:  # node1 not yet convicted: a read may wait for it
                return False
        wait_until(replayed, limit_s, "the batch replayed from node2's and node3's logs")
        assert values(s3, table3, keys, CL.QUORUM) == {k: 7 for k in keys}
        wait_until(lambda: stored_batches(s2) == [] and stored_batches(s3) == [], limit_s,
                   "the replayed batch deleted")
        replays = batch3.batchlog_counts(2)[1] + batch3.batchlog_counts(3)[1]
        assert replays >= 1, replays
        print(f"replayed within {time.monotonic() - killed:.1f} s of the kill")
    finally:
        c2.shutdown()
        c3.shutdown()
        batch3.restart(1)


def test_a_single_node_logs_its_own_batches(node_factory):
    node = node_factory()
    node.start()
    c = Cluster([node.host], port=node.port)
    try:
        s = c.connect()
        ks = unique_name("batchlog1")
        s.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        table = f"{ks}.t"
        s.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v int)")
        for cl in (CL.ONE, CL.ALL, CL.ANY):
            execute(s, batch("LOGGED", table, [1, 2, 3], cl), cl)
            assert values(s, table, [1, 2, 3], CL.ONE) == {1: cl, 2: cl, 3: cl}
        wait_until(lambda: stored_batches(s) == [], 10, "an empty batch log")
        code, out, err = node.admin("proxystats")
        assert code == 0, err
        assert "Batch log: 3 logged batches, 0 replayed" in out, out
    finally:
        c.shutdown()
