#!/usr/bin/env python3
"""A local 3-node Apache Cassandra 5.0 (`scripts/cassandra.sh cluster`), end to end, as the
cluster suite will use it: every node sees 3 nodes UN; a keyspace with replication factor 3;
QUORUM writes through one node read at QUORUM through each of the others; one node killed
(SIGKILL), a STATUS_CHANGE DOWN event for it pushed by another node, QUORUM writes and reads
still served by the two left; the node restarted, its UP event pushed, and it answers at QUORUM
and at ONE with every row. Prints the start-up time and each node's memory, and stops the
cluster at the end (unless --keep).

    ~/.cache/helenus/venv/bin/python tests/cluster-cassandra/smoke.py [--dir DIR] [--keep]

Runs under the tests' venv (cassandra-driver), through `cassandra_cluster.CassandraLocalCluster`
beside it. Uses the cluster in --dir (default: a fresh temporary directory, removed at the
end), starting it if it is not running, on free ports (a cluster that exists keeps its own).
Exits 1 on the first check that fails, after stopping the cluster."""

import argparse
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cassandra_cluster import CassandraLocalCluster  # noqa: E402

NODES = 3
ROWS = 100
# A client's wait for a node's DOWN or UP event (the failure detector takes ~20 s to convict).
EVENT_TIMEOUT_S = 60


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class EventListener(threading.Thread):
    """One native protocol v4 connection to a node, REGISTERed for STATUS_CHANGE and
    TOPOLOGY_CHANGE: records every EVENT frame the server pushes as (type, change, address),
    e.g. ("STATUS_CHANGE", "DOWN", "127.0.0.3"). Raw frames, not a driver: a driver folds the
    server's events into its own view of the hosts (and reports only hosts its policy uses)."""

    def __init__(self, address, port):
        super().__init__(daemon=True)
        self.sock = socket.create_connection((address, port), timeout=10)
        self.events = []
        self.cond = threading.Condition()
        self._request(0x01, self._string_map({"CQL_VERSION": "3.0.0"}))  # STARTUP
        self._request(0x0B, self._string_list(["STATUS_CHANGE", "TOPOLOGY_CHANGE"]))  # REGISTER
        self.sock.settimeout(None)

    @staticmethod
    def _string(text):
        data = text.encode()
        return struct.pack(">H", len(data)) + data

    def _string_map(self, values):
        return struct.pack(">H", len(values)) + b"".join(
            self._string(k) + self._string(v) for k, v in values.items())

    def _string_list(self, values):
        return struct.pack(">H", len(values)) + b"".join(self._string(v) for v in values)

    def _recv_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("connection closed")
            data += chunk
        return data

    def _frame(self):
        _version, _flags, stream, opcode, length = struct.unpack(">BBhBI", self._recv_exact(9))
        return stream, opcode, self._recv_exact(length)

    def _request(self, opcode, body):
        self.sock.sendall(struct.pack(">BBhBI", 0x04, 0, 1, opcode, len(body)) + body)
        _stream, reply, body = self._frame()
        if reply != 0x02:  # READY
            raise RuntimeError(f"opcode {opcode:#x} answered with {reply:#x}: {body[:200]!r}")

    def run(self):
        try:
            while True:
                _stream, opcode, body = self._frame()
                if opcode != 0x0C:  # EVENT
                    continue
                kind, rest = self._take_string(body)
                change, rest = self._take_string(rest)
                size = rest[0]
                address = socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6,
                                           rest[1:1 + size])
                with self.cond:
                    self.events.append((kind, change, address))
                    self.cond.notify_all()
        except OSError:
            return

    @staticmethod
    def _take_string(data):
        (n,) = struct.unpack(">H", data[:2])
        return data[2:2 + n].decode(), data[2 + n:]

    def wait_for(self, change, address, timeout_s):
        """Whether a STATUS_CHANGE `change` of `address` arrived within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while ("STATUS_CHANGE", change, address) not in self.events:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def close(self):
        self.sock.close()


def session_on(address, port, consistency=ConsistencyLevel.QUORUM):
    """A session whose every request is coordinated by the node at `address`, at
    `consistency` unless the execution profile "one" (consistency ONE) is asked for."""
    def profile(level):
        return ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]),
                                consistency_level=level, request_timeout=20)
    cluster = Cluster([address], port=port, protocol_version=5,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile(consistency),
                                          "one": profile(ConsistencyLevel.ONE)})
    return cluster, cluster.connect()


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    log(f"ok: {what}")


def rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def run(cluster):
    started = time.monotonic()
    cluster.start()
    log(f"cluster up in {time.monotonic() - started:.0f} s")
    port = cluster.cql_port
    pids = cluster.pids()
    check(len(pids) == NODES, f"{NODES} nodes running: pids {pids}")
    for i, pid in enumerate(pids, 1):
        log(f"node{i} pid {pid}: RSS {rss_mib(pid):.0f} MiB, heap {cluster.heap}")
    for i in range(1, NODES + 1):
        status = cluster.nodetool(i, "status")
        up = [line.split()[1] for line in status.splitlines() if line.startswith("UN ")]
        check(sorted(up) == [f"127.0.0.{k}" for k in range(1, NODES + 1)],
              f"node{i}'s nodetool status lists 127.0.0.1-{NODES} UN")

    hosts = cluster.hosts
    clients = {h: session_on(h, port) for h in hosts}
    try:
        ks = f"smoke_{uuid.uuid4().hex[:8]}"
        _, s1 = clients[hosts[0]]
        s1.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                   f"{{'class': 'SimpleStrategy', 'replication_factor': {NODES}}}")
        s1.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
        # Schema agreement: the driver waits for it after DDL; every node must see the table.
        for h in hosts:
            rows = clients[h][1].execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", [ks])
            check([r.table_name for r in rows] == ["t"], f"{h} sees {ks}.t")
        insert = s1.prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
        for k in range(ROWS):
            s1.execute(insert, [k, f"v{k}"])
        for h in hosts[1:]:
            rows = list(clients[h][1].execute(f"SELECT k, v FROM {ks}.t"))
            check(len(rows) == ROWS and all(r.v == f"v{r.k}" for r in rows),
                  f"{ROWS} rows written at QUORUM through {hosts[0]} read at QUORUM "
                  f"through {h}")
        # At ONE each token range is read from one replica, whichever the coordinator picks.
        for h in hosts:
            one = clients[h][1].execute(f"SELECT count(*) FROM {ks}.t",
                                        execution_profile="one").one()[0]
            check(one == ROWS, f"{ROWS} rows at ONE through {h}")

        # Kill node 3: node 1 pushes a STATUS_CHANGE DOWN event for it to a client REGISTERed
        # for events; QUORUM (2 of 3) still works.
        recorder = EventListener(hosts[0], port)
        recorder.start()
        victim = hosts[-1]
        killed_at = time.monotonic()
        cluster.kill(NODES)
        check(recorder.wait_for("DOWN", victim, EVENT_TIMEOUT_S),
              f"node1 sent STATUS_CHANGE DOWN {victim} "
              f"({time.monotonic() - killed_at:.1f} s after the kill)")
        for k in range(ROWS, 2 * ROWS):
            s1.execute(insert, [k, f"v{k}"])
        rows = list(clients[hosts[1]][1].execute(f"SELECT k, v FROM {ks}.t"))
        check(len(rows) == 2 * ROWS,
              f"with {victim} down: {ROWS} more rows written at QUORUM through {hosts[0]}, "
              f"all {2 * ROWS} read at QUORUM through {hosts[1]}")
        status = cluster.nodetool(1, "status")
        check(any(line.startswith("DN ") and victim in line for line in status.splitlines()),
              f"node1's nodetool status lists {victim} DN")

        # Restart it: UP event, and it serves the rows it missed.
        restarted_at = time.monotonic()
        cluster.restart(NODES)
        log(f"node{NODES} restarted, seen UN by every node, in "
            f"{time.monotonic() - restarted_at:.0f} s")
        check(recorder.wait_for("UP", victim, EVENT_TIMEOUT_S),
              f"node1 sent STATUS_CHANGE UP {victim}")
        clients[victim][0].shutdown()
        clients[victim] = session_on(victim, port)
        rows = list(clients[victim][1].execute(f"SELECT k, v FROM {ks}.t"))
        check(len(rows) == 2 * ROWS and all(r.v == f"v{r.k}" for r in rows),
              f"{victim} after its restart: all {2 * ROWS} rows at QUORUM")
        # At ONE through it (one replica per range, any of the three): all rows, at once or as
        # soon as the hints for the rows it missed are replayed to it.
        deadline = time.monotonic() + 60
        while True:
            count = clients[victim][1].execute(f"SELECT count(*) FROM {ks}.t",
                                               execution_profile="one").one()[0]
            if count == 2 * ROWS or time.monotonic() > deadline:
                break
            time.sleep(1)
        check(count == 2 * ROWS, f"all {2 * ROWS} rows at ONE through {victim}")
        log(f"events node1 sent: {recorder.events}")
        recorder.close()
        clients[hosts[0]][1].execute(f"DROP KEYSPACE {ks}")
    finally:
        for client, _ in clients.values():
            client.shutdown()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", help="the cluster's directory (default: a fresh temporary one)")
    p.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = p.parse_args(argv)
    temporary = args.dir is None
    directory = Path(args.dir or tempfile.mkdtemp(prefix="cassandra-cluster-"))
    cluster = CassandraLocalCluster(directory, NODES)
    status = 0
    try:
        run(cluster)
        log("all checks passed")
    except Exception as e:  # noqa: BLE001 - reported, the cluster stopped, exit 1
        log(f"FAILED: {type(e).__name__}: {e}")
        status = 1
    finally:
        if not args.keep:
            cluster.destroy()
            if temporary:
                shutil.rmtree(directory, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
