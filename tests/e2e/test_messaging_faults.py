"""Internode messaging under injected faults, on three real nodes (`helenus cluster` with
HELENUS_FAULT_INJECTION=true, the environment form of the test-only `fault_injection: true`):
a link cut both ways between node1 and node2 leaves QUORUM writes through node1 working while
ALL times out naming received/required; a 3 s delay on a link, or the loss of one verb's
messages, does the same without holding QUORUM back; clearing the faults restores ALL; garbage
sent to a node's storage port is refused while the node keeps serving CQL and its peers; a
request waiting for a paused node fails once gossip convicts it, not at its timeout; a node
started without the setting refuses `helenus admin fault`.

Helenus-only: fault injection is Helenus's test hook (Cassandra's tests use byteman or
iptables), and the storage port's framing is Helenus's own. Faults are set with `helenus admin
fault` over each node's admin port; they act on the node's outbound messages only, so a cut
both ways is set on both ends. Gossip (UDP) is not cut, so every node stays UP: the
coordinator sends to node2 and waits for it until the write timeout (2 s).
"""

import os
import signal
import socket
import subprocess
import time

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import WriteTimeout
from cassandra.protocol import TruncateError
from cassandra.query import SimpleStatement

from util import LocalCluster, default_helenus_bin, pinned_session, unique_name, wait_until

pytestmark = pytest.mark.helenus_only

# Per request: longer than the 2 s write timeout the coordinator answers by.
REQUEST_TIMEOUT_S = 20
# How long the nodes may take to see each other up (gossip), so that ALL can succeed.
VIEW_TIMEOUT_S = 60
# Cassandra's default write_request_timeout, which Helenus's coordinator answers by.
WRITE_TIMEOUT_S = 2.0
# Cassandra's default truncate_request_timeout.
TRUNCATE_TIMEOUT_S = 60


class FaultCluster(LocalCluster):
    """A `LocalCluster` whose nodes start with fault injection on (HELENUS_FAULT_INJECTION in
    their environment), unless `fault_injection` is set to False before a (re)start."""

    fault_injection = True

    def run(self, *args, timeout_s=None):
        env = dict(os.environ)
        env.pop("HELENUS_FAULT_INJECTION", None)
        if self.fault_injection:
            env["HELENUS_FAULT_INJECTION"] = "true"
        result = subprocess.run(
            [self.binary, "cluster", *args, "--dir", str(self.directory)],
            capture_output=True, text=True, timeout=timeout_s or 180, env=env,
        )
        return result.returncode, result.stdout, result.stderr

    def admin(self, k, *command):
        """`helenus admin COMMAND...` against node k: (exit code, stdout, stderr)."""
        result = subprocess.run(
            [self.binary, "admin", "--host", self.hosts[k - 1], "--port", str(self.admin_port),
             *command],
            capture_output=True, text=True, timeout=60,
        )
        return result.returncode, result.stdout, result.stderr

    def admin_ok(self, k, *command):
        code, out, err = self.admin(k, *command)
        assert code == 0, f"admin {' '.join(command)} on node{k}: {err}{out}"
        return out


@pytest.fixture(scope="module")
def faulty3(request, tmp_path_factory):
    if request.config.getoption("--host"):
        pytest.skip("starts its own Helenus cluster; not possible with --host")
    binary = default_helenus_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"helenus binary not found at {binary}")
    cluster = FaultCluster(binary, tmp_path_factory.mktemp("faulty3"), nodes=3)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()



def write(session, table, k, cl):
    session.execute(SimpleStatement(f"INSERT INTO {table} (k, v) VALUES (%s, %s)",
                                    consistency_level=cl), (k, k))


def write_times_out(session, table, k, cl=CL.ALL):
    """The WriteTimeout a write at `cl` fails with, and how long it took."""
    started = time.monotonic()
    with pytest.raises(WriteTimeout) as info:
        write(session, table, k, cl)
    return info.value, time.monotonic() - started


def tpstats_dropped(cluster, k):
    """{message type: dropped} from node k's `helenus admin tpstats`."""
    lines = cluster.admin_ok(k, "tpstats").splitlines()
    assert lines[0].split() == ["Message", "type", "Dropped"], lines
    return {name: int(count) for name, count in (line.split() for line in lines[1:])}


def test_cut_delay_clear_garbage_and_a_node_without_fault_injection(faulty3):
    cluster = faulty3
    c1, s1 = pinned_session(cluster.hosts[0], cluster.cql_port, REQUEST_TIMEOUT_S)
    c2, s2 = pinned_session(cluster.hosts[1], cluster.cql_port, REQUEST_TIMEOUT_S)
    try:
        ks = unique_name("faults")
        s1.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                   "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        table = f"{ks}.t"
        s1.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v int)")

        def all_write_succeeds():
            try:
                write(s1, table, 0, CL.ALL)
                return True
            except Exception:
                return False
        wait_until(all_write_succeeds, VIEW_TIMEOUT_S, "a write at ALL through node1")

        # Cut node1 <-> node2 (both directions: each node's outbound side).
        cluster.admin_ok(1, "fault", "--to", cluster.hosts[1], "cut")
        cluster.admin_ok(2, "fault", "--to", cluster.hosts[0], "cut")
        listed = cluster.admin_ok(1, "fault", "list")
        assert f"{cluster.hosts[1]} all cut" in listed, listed

        started = time.monotonic()
        write(s1, table, 1, CL.QUORUM)  # node1 and node3
        assert time.monotonic() - started < WRITE_TIMEOUT_S, "QUORUM does not wait for node2"
        e, elapsed = write_times_out(s1, table, 2)
        assert (e.received_responses, e.required_responses) == (2, 3), e
        assert "received only 2 responses" in str(e), e
        assert elapsed >= WRITE_TIMEOUT_S * 0.9, elapsed
        assert tpstats_dropped(cluster, 1)["MUTATION"] >= 1

        # Healed: ALL works again at once.
        cluster.admin_ok(1, "fault", "clear")
        cluster.admin_ok(2, "fault", "--to", cluster.hosts[0], "clear")
        assert cluster.admin_ok(1, "fault", "list").strip() == ""
        write(s1, table, 3, CL.ALL)

        # A 3 s delay on node1 -> node2: past the write timeout, so ALL times out while QUORUM
        # is answered by the other two at once.
        cluster.admin_ok(1, "fault", "--to", cluster.hosts[1], "delay", "3000")
        started = time.monotonic()
        write(s1, table, 4, CL.QUORUM)
        assert time.monotonic() - started < WRITE_TIMEOUT_S, "QUORUM does not wait for node2"
        e, _ = write_times_out(s1, table, 5)
        assert (e.received_responses, e.required_responses) == (2, 3), e
        cluster.admin_ok(1, "fault", "--to", cluster.hosts[1], "clear")
        write(s1, table, 6, CL.ALL)

        # Every MUTATION to node2 lost (a drop with probability 1, for that verb only): ALL
        # times out while reads at ALL, another verb, still reach node2.
        cluster.admin_ok(1, "fault", "--to", cluster.hosts[1], "--verb", "MUTATION", "drop", "1")
        e, _ = write_times_out(s1, table, 8)
        assert (e.received_responses, e.required_responses) == (2, 3), e
        rows = s1.execute(SimpleStatement(f"SELECT v FROM {table} WHERE k = 6",
                                          consistency_level=CL.ALL))
        assert [r.v for r in rows] == [6]
        cluster.admin_ok(1, "fault", "clear")

        # Garbage on node2's storage port: refused, and node2 serves CQL and its peers on.
        for garbage in [b"\x00" * 64, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(4096)]:
            with socket.create_connection((cluster.hosts[1], cluster.storage_port),
                                          timeout=10) as raw:
                raw.sendall(garbage)
                try:
                    closed = raw.recv(1024) == b""
                except ConnectionResetError:
                    closed = True
                assert closed, "the node closes a connection that sends garbage"
        assert s2.execute("SELECT release_version FROM system.local").one() is not None
        write(s1, table, 7, CL.ALL)
        rows = s2.execute(SimpleStatement(f"SELECT v FROM {table} WHERE k = 7",
                                          consistency_level=CL.ALL))
        assert [r.v for r in rows] == [7]

        # A dead peer holds no request: node3 paused (SIGSTOP) while a TRUNCATE through node1
        # waits for it. Once gossip convicts node3 (~10 s), messaging fails the request at once
        # and the coordinator answers, long before truncate_request_timeout (60 s).
        pid = cluster.pid(3)
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(TruncateError):
            s1.execute(f"TRUNCATE {table}", timeout=TRUNCATE_TIMEOUT_S + 30)
        elapsed = time.monotonic() - started
        assert elapsed < TRUNCATE_TIMEOUT_S * 0.75, f"answered after {elapsed:.1f} s"
    finally:
        c1.shutdown()
        c2.shutdown()

    # Node3 restarted without fault injection refuses `admin fault`, and still reports tpstats.
    cluster.kill(3)  # SIGKILL ends the paused process too
    cluster.fault_injection = False
    cluster.restart(3)
    code, out, err = cluster.admin(3, "fault", "--to", cluster.hosts[0], "cut")
    assert code != 0, out
    assert "fault injection is off" in err and "fault_injection: true" in err, err
    assert "MUTATION" in tpstats_dropped(cluster, 3)
