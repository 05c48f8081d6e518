"""Helpers shared by the end-to-end tests: unique names, throw-away tables and types, a driver
`Cluster` factory, a CQL readiness probe, and `HelenusNode`, which runs the real `helenus` binary.

Everything here works the same against Helenus and against Apache Cassandra, except
`HelenusNode`, which only the Helenus-only (restart/durability) tests use.
"""

import itertools
import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import (
    FallthroughRetryPolicy, RoundRobinPolicy, TokenAwarePolicy, WhiteListRoundRobinPolicy,
)

# Generous because Cassandra's schema changes on a loaded 2-core machine can take seconds.
REQUEST_TIMEOUT_S = 30
# How long a node may take to open its CQL port (Helenus: RocksDB open + commit log replay).
NODE_START_TIMEOUT_S = 60
# How long a node may take to drain and exit after SIGTERM before we SIGKILL it.
NODE_STOP_TIMEOUT_S = 30

_counter = itertools.count()


def unique_name(prefix="t"):
    """A lowercase identifier no other test (or earlier run) uses: prefix, counter, random part.

    Kept well under Cassandra's 48-character limit for keyspace and table names."""
    return f"{prefix}_{next(_counter)}_{uuid.uuid4().hex[:12]}"


class _Suite:
    """What the session's shared server is (set once by conftest.py before any test runs):
    `nodes`, how many nodes it has (1, or N with `--cluster-nodes N`), and `addresses`, the
    (host, CQL port) pairs of its nodes, so that a driver connected to it gets the suite's
    consistency level while one connected to a node a test started itself does not."""

    nodes = 1
    addresses = frozenset()


# The most replicas a keyspace of the suite gets: Cassandra's usual RF 3.
MAX_SUITE_REPLICATION_FACTOR = 3


def configure_suite(nodes, addresses=()):
    """Records the shared server's node count and its nodes' (host, port) pairs (conftest.py)."""
    assert nodes >= 1, f"a cluster has at least one node, not {nodes}"
    _Suite.nodes = nodes
    _Suite.addresses = frozenset((host, int(port)) for host, port in addresses)


def suite_nodes():
    """How many nodes the session's shared server has: 1, or N with `--cluster-nodes N`."""
    return _Suite.nodes


def suite_replication_factor():
    """The replication factor of the keyspaces the suite creates on the shared server: the
    node count, at most 3 (RF 1 on one node, RF 3 on a cluster of three)."""
    return min(_Suite.nodes, MAX_SUITE_REPLICATION_FACTOR)


def replication(rf=None):
    """The replication map (CQL map literal) for a keyspace on the shared server:
    SimpleStrategy with `rf` replicas, by default `suite_replication_factor()`. Every keyspace
    a test creates on the shared server takes its replication from here, so that
    `--cluster-nodes 3` runs the same statements with RF 3. Keyspaces on nodes a test starts
    itself (`node_factory`, `cluster3`) spell out their own."""
    rf = suite_replication_factor() if rf is None else rf
    return f"{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}"


# For helpers whose `replication` parameter hides the function.
_suite_replication = replication


def suite_consistency_level():
    """The default consistency level of drivers connected to the shared server: the driver's
    own (LOCAL_ONE) on one node; QUORUM on a cluster, so that a read sees every acknowledged
    write (QUORUM writes + QUORUM reads overlap) and the suite stays deterministic."""
    return ConsistencyLevel.QUORUM if _Suite.nodes > 1 else ConsistencyLevel.LOCAL_ONE


def new_cluster(host, port, consistency_level=None, **kwargs):
    """A driver `Cluster` with `host` as contact point (the driver discovers the other nodes
    and routes token-aware). Protocol version is negotiated unless given. The default
    consistency level is `consistency_level`, else `suite_consistency_level()` when host:port
    is a node of the shared server, else the driver's (LOCAL_ONE)."""
    if consistency_level is None:
        consistency_level = (suite_consistency_level() if (host, int(port)) in _Suite.addresses
                             else ConsistencyLevel.LOCAL_ONE)
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(RoundRobinPolicy()),
        request_timeout=REQUEST_TIMEOUT_S,
        consistency_level=consistency_level,
    )
    kwargs.setdefault("connect_timeout", 10)
    kwargs.setdefault("control_connection_timeout", 10)
    # Refresh quickly on SCHEMA_CHANGE events (default window is 2 s) so tests that wait for
    # another Cluster to see a change finish fast.
    kwargs.setdefault("schema_event_refresh_window", 0.1)
    return Cluster(
        contact_points=[host],
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        **kwargs,
    )


@contextmanager
def new_session(host, port, keyspace=None, **kwargs):
    """A fresh Cluster + Session, shut down on exit."""
    cluster = new_cluster(host, port, **kwargs)
    try:
        yield cluster.connect(keyspace)
    finally:
        cluster.shutdown()


@contextmanager
def new_table(cql, keyspace, schema, extra=""):
    """Creates `keyspace.<unique>` with the given column/primary-key schema; yields the qualified
    name and drops the table afterwards."""
    name = f"{keyspace}.{unique_name('tbl')}"
    cql.execute(f"CREATE TABLE {name} ({schema}) {extra}")
    try:
        yield name
    finally:
        cql.execute(f"DROP TABLE IF EXISTS {name}")


@contextmanager
def new_type(cql, keyspace, fields):
    """Creates a user-defined type `keyspace.<unique>` with the given fields; yields the
    qualified name and drops it afterwards."""
    name = f"{keyspace}.{unique_name('typ')}"
    cql.execute(f"CREATE TYPE {name} ({fields})")
    try:
        yield name
    finally:
        cql.execute(f"DROP TYPE IF EXISTS {name}")


@contextmanager
def new_keyspace(cql, replication=None, extra=""):
    """Creates a keyspace `<unique>` (replication: a CQL map literal, by default the suite's,
    `replication()`); yields its name and drops it afterwards."""
    name = unique_name("ks")
    if replication is None:
        replication = _suite_replication()
    cql.execute(f"CREATE KEYSPACE {name} WITH replication = {replication} {extra}")
    try:
        yield name
    finally:
        cql.execute(f"DROP KEYSPACE IF EXISTS {name}")


def coordinator_address(result):
    """The address of the node that answered a driver ResultSet (its coordinator)."""
    host = result.response_future.coordinator_host
    return getattr(host, "address", None) or str(host).rsplit(":", 1)[0]


def wait_until(condition, timeout_s, what):
    """Polls `condition()` until it returns a true value, and returns that value; fails the test
    after `timeout_s`. For what only time brings about, such as a TTL running out."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.1)  # poll interval


# The ports `free_port` hands out: below the kernel's ephemeral range (the ports it gives
# outgoing connections and `bind(0)`, which another process may take at any time), one slice per
# pytest-xdist worker so that two workers never pick the same port, and never the same port
# twice in one process (a node's CQL, admin and storage ports are picked one after another and
# bound only once it starts).
FREE_PORT_FLOOR = 10000


def _ephemeral_floor():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_slice():
    """This process's [low, high) of ports for `free_port`: its xdist worker's share of
    [FREE_PORT_FLOOR, the ephemeral range's start)."""
    ceiling = _ephemeral_floor()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    if ceiling - FREE_PORT_FLOOR < 1000 * count:
        return None
    width = (ceiling - FREE_PORT_FLOOR) // count
    low = FREE_PORT_FLOOR + index * width
    return low, low + width


_handed_out = set()
_port_random = random.Random()


def _bindable(host, port):
    """Whether `port` is free on `host` for TCP and UDP (gossip shares the storage port)."""
    try:
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind((host, port))
        return True
    except OSError:
        return False


def free_port(hosts=("127.0.0.1",)):
    """A port that nothing uses on any of `hosts` right now (TCP and UDP), not handed out
    before by this process, from this worker's slice (`_port_slice`)."""
    span = _port_slice()
    for _ in range(1000):
        if span is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((hosts[0], 0))
                port = s.getsockname()[1]
        else:
            port = _port_random.randrange(*span)
        if port in _handed_out or not all(_bindable(host, port) for host in hosts):
            continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no port free on all of {hosts}")


# A protocol v4 OPTIONS frame: version 0x04, flags 0, stream 0, opcode 0x05, body length 0.
OPTIONS_FRAME_V4 = struct.pack(">BBhBi", 0x04, 0x00, 0, 0x05, 0)
OPCODE_ERROR = 0x00
OPCODE_SUPPORTED = 0x06


def cql_ready(host, port, timeout_s=1.0):
    """True if a server at host:port answers a v4 OPTIONS frame with SUPPORTED.

    An open port alone is not enough: a server may listen before it serves requests."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(OPTIONS_FRAME_V4)
            header = recv_exact(s, 9)
            return header is not None and header[4] == OPCODE_SUPPORTED
    except OSError:
        return False


def wait_for_cql(host, port, timeout_s, alive=lambda: True):
    """Polls until `cql_ready`, failing after `timeout_s` or as soon as `alive()` is false."""
    deadline = time.monotonic() + timeout_s
    while not cql_ready(host, port):
        if not alive():
            raise RuntimeError(f"server for {host}:{port} exited while starting")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no CQL server answered on {host}:{port} within {timeout_s} s")
        time.sleep(0.1)  # poll interval


def recv_exact(sock, n):
    """Reads exactly n bytes, or returns None if the peer closed the connection first."""
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame(sock):
    """Reads one pre-v5-framing response frame: (version byte, opcode, body), or None at EOF."""
    header = recv_exact(sock, 9)
    if header is None:
        return None
    version, _flags, _stream, opcode, length = struct.unpack(">BBhBi", header)
    body = recv_exact(sock, length)
    if body is None:
        return None
    return version, opcode, body


class HelenusNode:
    """One `helenus server` process on 127.0.0.1 with its own directory and port.

    The directory holds `helenus.yaml`, `data/`, `commitlog/` and `helenus.log`; it survives
    stop/start so restart tests can check durability. Only the PID this object started is ever
    signalled."""

    def __init__(self, binary, directory, port=None, cluster_name="helenus-e2e",
                 commitlog_sync="periodic", commitlog_sync_period_in_ms=None, extra_config=None):
        self.binary = str(binary)
        self.directory = Path(directory)
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.admin_port = free_port()
        # Internode messaging (TCP) and gossip (UDP) bind it even on a node alone; its own
        # port keeps test nodes (and a Cassandra) on this machine apart.
        self.storage_port = free_port()
        self.cluster_name = cluster_name
        self.commitlog_sync = commitlog_sync
        self.commitlog_sync_period_in_ms = commitlog_sync_period_in_ms
        # More helenus.yaml keys, {key: value} written as `key: value` lines.
        self.extra_config = extra_config or {}
        self.process = None
        self.log_path = self.directory / "helenus.log"
        self.config_path = self.directory / "helenus.yaml"

    def write_config(self):
        self.directory.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"cluster_name: '{self.cluster_name}'\n"
            f"listen_address: {self.host}\n"
            f"rpc_address: {self.host}\n"
            f"native_transport_port: {self.port}\n"
            f"admin_port: {self.admin_port}\n"
            f"storage_port: {self.storage_port}\n"
            f"data_file_directories:\n"
            f"  - {self.directory / 'data'}\n"
            f"commitlog_directory: {self.directory / 'commitlog'}\n"
            f"commitlog_sync: {self.commitlog_sync}\n"
            + (f"commitlog_sync_period_in_ms: {self.commitlog_sync_period_in_ms}\n"
               if self.commitlog_sync_period_in_ms is not None else "")
            + "".join(f"{key}: {value}\n" for key, value in self.extra_config.items())
        )

    def is_running(self):
        return self.process is not None and self.process.poll() is None

    def start(self):
        assert not self.is_running(), "node already running"
        if not os.access(self.binary, os.X_OK):
            raise FileNotFoundError(f"helenus binary not found or not executable: {self.binary}")
        self.write_config()
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                [self.binary, "server", "--config", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own session: a Ctrl-C in the terminal reaches pytest, which stops us in order.
                start_new_session=True,
            )
        finally:
            log.close()
        try:
            wait_for_cql(self.host, self.port, NODE_START_TIMEOUT_S, alive=self.is_running)
        except Exception as e:
            self.kill()
            raise RuntimeError(f"{e}\n--- last lines of {self.log_path} ---\n{self.log_tail()}")
        return self

    def stop(self, timeout_s=NODE_STOP_TIMEOUT_S):
        """SIGTERM (a clean shutdown) and wait. A node that does not exit in time is SIGKILLed and
        the stop is reported as a failure: a slow shutdown is a bug."""
        if not self.is_running():
            self.process = None
            return
        pid = self.process.pid
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"helenus (pid {pid}) did not exit within {timeout_s} s of SIGTERM")
        finally:
            self.process = None

    def kill(self):
        """SIGKILL: a crash, for crash-consistency tests."""
        if self.is_running():
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def restart(self):
        self.stop()
        return self.start()

    def admin(self, *command):
        """Runs `helenus admin` against this node; returns (exit code, stdout, stderr)."""
        result = subprocess.run(
            [self.binary, "admin", "--host", self.host, "--port", str(self.admin_port), *command],
            capture_output=True, text=True, timeout=600,
        )
        return result.returncode, result.stdout, result.stderr

    def log_tail(self, lines=40):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def default_helenus_bin():
    """$HELENUS_BIN, else $CARGO_TARGET_DIR/debug/helenus, else <repo>/target/debug/helenus."""
    if os.environ.get("HELENUS_BIN"):
        return Path(os.environ["HELENUS_BIN"])
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]) / "debug" / "helenus"
    return Path(__file__).resolve().parents[2] / "target" / "debug" / "helenus"


def free_port_on(hosts):
    """A port nothing uses right now on every one of `hosts` (loopback addresses)."""
    return free_port(tuple(hosts))


# How long `helenus cluster start` may take for all its nodes, and `stop` for all of them.
CLUSTER_START_TIMEOUT_S = 180
CLUSTER_STOP_TIMEOUT_S = 120


class LocalCluster:
    """`helenus cluster` in a directory: nodes on 127.0.0.1..N with ports of their own (free on
    every node's address), so that it runs beside other servers on the machine. `destroy()` stops
    it with `helenus cluster stop`, then SIGKILLs any node whose pid file still names a live
    process of this cluster's nodes. Helenus-only.

    It has the shape of tests/cluster-cassandra's `CassandraLocalCluster` (`hosts`, `cql_port`,
    `storage_port`, `kill(k)`, `restart(k)`, `destroy()`, `flavor`), so that a cluster test runs
    against either."""

    # Which server runs the nodes: tests check Helenus-only behaviour with it.
    flavor = "helenus"

    def __init__(self, binary, directory, nodes):
        self.binary = str(binary)
        self.directory = Path(directory)
        self.nodes = nodes
        self.hosts = [f"127.0.0.{k}" for k in range(1, nodes + 1)]
        self.cql_port = free_port_on(self.hosts)
        self.storage_port = free_port_on(self.hosts)
        self.admin_port = free_port_on(self.hosts)

    def run(self, *args, timeout_s=CLUSTER_START_TIMEOUT_S):
        """`helenus cluster ARGS... --dir DIR`: (exit code, stdout, stderr)."""
        result = subprocess.run(
            [self.binary, "cluster", *args, "--dir", str(self.directory)],
            capture_output=True, text=True, timeout=timeout_s,
        )
        return result.returncode, result.stdout, result.stderr

    def start(self):
        code, out, err = self.run(
            "start", "--nodes", str(self.nodes), "--cql-port", str(self.cql_port),
            "--storage-port", str(self.storage_port), "--admin-port", str(self.admin_port),
        )
        if code != 0:
            raise RuntimeError(f"helenus cluster start failed ({code}):\n{out}{err}")
        return self

    def _check(self, *args):
        code, out, err = self.run(*args)
        if code != 0:
            raise RuntimeError(f"helenus cluster {' '.join(args)} failed ({code}):\n{out}{err}")
        return out

    def kill(self, k):
        """SIGKILL node k (a crash); returns once it is gone."""
        self._check("kill", str(k))

    def restart(self, k):
        """Starts node k again (it must be down); returns once it answers CQL. Other nodes may
        not see it up yet: wait for that with the cluster's own signals (a request at ALL)."""
        self._check("restart", str(k))

    def admin(self, k, *command):
        """`helenus admin ARGS...` against node k's admin port: (exit code, stdout, stderr)."""
        result = subprocess.run(
            [self.binary, "admin", "--host", self.hosts[k - 1], "--port", str(self.admin_port),
             *command],
            capture_output=True, text=True, timeout=600,
        )
        return result.returncode, result.stdout, result.stderr

    def node_dir(self, k):
        return self.directory / f"node{k}"

    def pid(self, k):
        """Node k's pid from its pid file, or None."""
        try:
            return int((self.node_dir(k) / "helenus.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def destroy(self):
        try:
            self.run("stop", timeout_s=CLUSTER_STOP_TIMEOUT_S)
        finally:
            for k in range(1, self.nodes + 1):
                pid = self.pid(k)
                if pid is not None and self._is_node(pid, k):
                    os.kill(pid, signal.SIGKILL)

    def _is_node(self, pid, k):
        """Whether `pid` is still node k's server (never signal a reused pid)."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return str(self.node_dir(k) / "helenus.yaml").encode() in cmdline


class EventListener(threading.Thread):
    """One native protocol v4 connection to a node, REGISTERed for STATUS_CHANGE and
    TOPOLOGY_CHANGE, recording every EVENT frame the node pushes as (type, change, address),
    e.g. ("STATUS_CHANGE", "DOWN", "127.0.0.3"). Raw frames rather than a driver: a driver folds
    events into its own view of the hosts (and acts only on hosts its policy uses)."""

    def __init__(self, host, port):
        super().__init__(daemon=True)
        self.sock = socket.create_connection((host, port), timeout=10)
        self.events = []
        self.cond = threading.Condition()
        self._request(0x01, self._string_map({"CQL_VERSION": "3.0.0"}))  # STARTUP
        self._request(0x0B, self._string_list(["STATUS_CHANGE", "TOPOLOGY_CHANGE"]))  # REGISTER
        self.sock.settimeout(None)
        self.start()

    @staticmethod
    def _string(text):
        data = text.encode()
        return struct.pack(">H", len(data)) + data

    def _string_map(self, values):
        return struct.pack(">H", len(values)) + b"".join(
            self._string(k) + self._string(v) for k, v in values.items())

    def _string_list(self, values):
        return struct.pack(">H", len(values)) + b"".join(self._string(v) for v in values)

    def _request(self, opcode, body):
        self.sock.sendall(struct.pack(">BBhBi", 0x04, 0, 1, opcode, len(body)) + body)
        frame = read_frame(self.sock)
        if frame is None or frame[1] != 0x02:  # READY
            raise RuntimeError(f"opcode {opcode:#x} answered with {frame!r}")

    @staticmethod
    def _take_string(data):
        (n,) = struct.unpack(">H", data[:2])
        return data[2:2 + n].decode(), data[2 + n:]

    def run(self):
        try:
            while True:
                frame = read_frame(self.sock)
                if frame is None:
                    return
                _version, opcode, body = frame
                if opcode != 0x0C:  # EVENT
                    continue
                kind, rest = self._take_string(body)
                change, rest = self._take_string(rest)
                if kind == "SCHEMA_CHANGE":
                    continue
                size = rest[0]
                address = socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6,
                                           rest[1:1 + size])
                with self.cond:
                    self.events.append((kind, change, address))
                    self.cond.notify_all()
        except OSError:
            return

    def wait_for(self, event, timeout_s):
        """Whether `event` (a (type, change, address) tuple) arrived within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while event not in self.events:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def pinned_session(host, port, request_timeout_s=20):
    """(Cluster, Session) whose every request node `host` coordinates, without driver
    retries: what the fault tests send through one chosen coordinator."""
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([host]),
        retry_policy=FallthroughRetryPolicy(),
        request_timeout=request_timeout_s,
    )
    cluster = Cluster([host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      connect_timeout=10, control_connection_timeout=10)
    return cluster, cluster.connect()
