"""Faults injected into real processes (issue 36 item 5): a 3-node `helenus cluster` on
127.0.0.1-3, a keyspace of replication factor 3, and a load of QUORUM requests from a few
client threads while nodes are SIGKILLed and restarted, cut off by firewall rules, killed all
at once, or paused with SIGSTOP. Every operation is recorded in a Jepsen-style history
(history.py), and every test ends with the same checks (`finish`):

- every acknowledged write is readable at QUORUM: each register's final value is that of its
  latest acknowledged write or a later one, and every acknowledged insert is there (lost = 0);
- the history passes `history.check_registers` (no stale or non-monotonic QUORUM read, no
  phantom value);
- client errors happen only where a fault explains them (`classify_errors`): a request whose
  coordinator was the faulted node while it was down, paused or cut off, or back but not yet
  seeing its peers alive (counted apart; a restarted node waits up to 10 s for its peers
  before serving CQL, so there should be none of its Unavailables); a read that timed out
  while a faulted replica was not yet convicted (a QUORUM read contacts two replicas; the
  table's speculative retry asks the third after the 99th percentile); and during the whole-cluster restart, any request. Any other error fails
  the test;
- the counts are printed: writes and inserts acknowledged / failed / unknown, reads, lost,
  errors by cause.

The load: each client thread, paced to `OPS_PER_CLIENT_PER_S`, writes a register (INSERT with
a timestamp the history assigns in invocation order), reads one, or inserts a row of its own
(partition = thread, clustering = sequence), all prepared, at QUORUM, through one driver
session with the token-aware policy (a random replica of the key coordinates) and no retries
(`FallthroughRetryPolicy`), so that every error is the coordinator's own and counted.

The commit log: every node runs with `commitlog_sync: batch` (appended to its helenus.yaml
and the cluster restarted before the test; the e2e default is periodic, 10 s). Under periodic
sync a killed node loses the writes of its last period; a write acknowledged by two replicas
while the third was down then lives on one replica if either of the two is killed within the
period, and a QUORUM read may miss it: Cassandra's periodic mode promises no more. Batch mode
acknowledges a write only once the replica synced it, which is what "no acknowledged write
lost" needs under rotating SIGKILLs and a whole-cluster kill.

The kill test runs `HELENUS_FAULT_ROUNDS` rounds (default 6, about 40 s); issue 36's proof
runs 50:

    HELENUS_FAULT_ROUNDS=50 pytest tests/e2e/test_cluster_faults.py -k kill_and_restart -s

`HELENUS_FAULT_SEED` replays a run's choices (victims, timings, the clients' operation mix;
not the driver's choice of coordinator nor the threads' interleaving); each test prints the
seed it used. A failing test (any test with `HELENUS_FAULT_KEEP=1`) leaves its cluster
directory (node logs) and writes the history there as `history.jsonl`.

The partition test needs root (skipped otherwise, as test_faults.py's full disk), `iptables`
(Debian's package; scripts/test-all installs it) and a cgroup v2 hierarchy (it fails without
them): every node's internode connections leave from 127.0.0.1 (a TCP connect on loopback
takes that source address), so the isolated node is told apart by its cgroup
(`-m cgroup --path`), not its address. The rules live in a chain of their own, removed
whatever the outcome.

After the QUORUM checks, `finish` waits until no node holds a pending hint (`helenus admin
hints`) and reads every acknowledged write at ONE from each replica alone, its reads to the
others cut (`assert_readable_at_one_from_each_replica`): hinted handoff must have brought every
replica every write it missed while down, paused or cut off. The nodes flush hints every
200 ms (`configure_nodes` says why).
"""

import os
import random
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import OperationTimedOut, Unavailable, WriteTimeout
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.policies import (
    ConstantReconnectionPolicy, FallthroughRetryPolicy, RoundRobinPolicy, TokenAwarePolicy,
    WhiteListRoundRobinPolicy,
)
from cassandra.protocol import ServerError
from cassandra.query import SimpleStatement

from history import FAIL, INFO, OK, History, check_inserts, check_registers
from test_cluster_replication import connect, run
from util import LocalCluster, default_helenus_bin, unique_name, wait_until

pytestmark = pytest.mark.helenus_only

NODES = 3
# Client threads of the load, and the pace of each (operations per second): enough to keep
# requests in flight at every fault, little enough that five helpers' builds and three nodes
# on two cores do not starve the nodes' gossip into false convictions.
CLIENT_THREADS = 4
OPS_PER_CLIENT_PER_S = 40
# Registers (partition keys) the load writes and reads: few, so that reads meet recent writes.
REGISTERS = 8
# The driver's own timeout per request: above the nodes' read_request_timeout (5 s), so a
# request a live coordinator answers in time is never abandoned by the client.
CLIENT_TIMEOUT_S = 8
# How long every node may take to see the others as they are (a fault detected, a node back).
VIEW_TIMEOUT_S = 90
# The kill test's rounds by default; HELENUS_FAULT_ROUNDS overrides it.
DEFAULT_ROUNDS = 6
# How long a test lets the load run with every node up before its first fault.
WARM_UP_S = 2.0
# How long the isolated or paused node stays out after the others convicted it.
OUT_AFTER_CONVICTION_S = 3.0
# Requests the partition and pause tests send through each majority node once the faulted
# node is convicted (a write and a read each).
DIRECT_REQUESTS = 10
# How long a process may take to exit after SIGKILL.
EXIT_TIMEOUT_S = 30
# The nodes' `write_request_timeout` (Cassandra's default): a replica that has not
# acknowledged a write by then is hinted.
WRITE_REQUEST_TIMEOUT_S = 2.0
# Time past the write timeout for the last hints to be kept, before the replay is awaited.
HINT_SLACK_S = 0.5
# The nodes' `hints_flush_period` in these tests (`configure_nodes` says why).
HINT_FLUSH_PERIOD_S = 0.2
# How long every hint may take to be replayed once the load stopped.
REPLAY_TIMEOUT_S = 60
# How long one `helenus admin` command may take.
ADMIN_TIMEOUT_S = 30

WRITE_CQL = "INSERT INTO {ks}.registers (k, v) VALUES (?, ?) USING TIMESTAMP ?"
READ_CQL = "SELECT v FROM {ks}.registers WHERE k = ?"
INSERT_CQL = "INSERT INTO {ks}.rows (p, s) VALUES (?, ?)"


def fault_seed():
    """$HELENUS_FAULT_SEED, else a fresh one (printed by each test, to replay it)."""
    given = os.environ.get("HELENUS_FAULT_SEED")
    return int(given) if given else random.randrange(1 << 32)


def fault_rounds():
    return int(os.environ.get("HELENUS_FAULT_ROUNDS", DEFAULT_ROUNDS))


# --- The cluster and its nodes --------------------------------------------------------------


class Nodes:
    """The three nodes: a pinned driver session per node (no retries) for probes and reads at
    ONE, the faults done to them (each recorded in the history as a nemesis event), and how
    each node sees the others.

    A node's view is observed as test_cluster_replication's `Ring` observes it: a write at ALL
    to an RF=3 probe table through the node succeeds once it sees all three alive, and fails at
    once with Unavailable (alive = N) once it has convicted the others."""

    def __init__(self, cluster, history, keyspace):
        self.cluster = cluster
        self.history = history
        self.keyspace = keyspace
        self.hosts = cluster.hosts
        self._clients = {}

    def host(self, k):
        return self.hosts[k - 1]

    def number(self, host):
        """The node number of a host address, or None."""
        return self.hosts.index(host) + 1 if host in self.hosts else None

    def session(self, k):
        if k not in self._clients:
            self._clients[k] = connect(self.host(k), self.cluster.cql_port)
        return self._clients[k][1]

    def drop_session(self, k):
        client = self._clients.pop(k, None)
        if client is not None:
            client[0].shutdown()

    def close(self):
        for k in list(self._clients):
            self.drop_session(k)

    def pid(self, k):
        """Node k's server pid, checked against /proc (never a reused pid)."""
        pid = self.cluster.pid(k)
        assert pid is not None and self.cluster._is_node(pid, k), f"node{k} is not running"
        return pid

    def view(self, k):
        """How node k sees the others: "all alive", "alive N", or the error of a probe that
        could not tell (a dead node not yet convicted makes the write at ALL time out)."""
        try:
            run(self.session(k), f"INSERT INTO {self.keyspace}.probe (k, v) VALUES (0, 0)",
                cl=CL.ALL)
            return "all alive"
        except Unavailable as e:
            return f"alive {e.alive_replicas}"
        except (WriteTimeout, OperationTimedOut, NoHostAvailable, ServerError) as e:
            return type(e).__name__

    def wait_views(self, observers, alive):
        """Until each of `observers` sees exactly `alive` nodes alive."""
        wanted = "all alive" if alive == NODES else f"alive {alive}"
        deadline = time.monotonic() + VIEW_TIMEOUT_S
        for k in observers:
            while True:
                outcome = self.view(k)
                if outcome == wanted:
                    break
                assert time.monotonic() < deadline, (
                    f"node{k} does not see {alive} nodes alive within {VIEW_TIMEOUT_S} s: "
                    f"last probe {outcome}")
                time.sleep(0.2)  # poll interval

    def wait_all_up(self, *back):
        """Until every node sees every node alive; then records `back` as up again."""
        self.wait_views(range(1, NODES + 1), NODES)
        for k in back:
            self.history.nemesis("up", k)

    def wait_convicted(self, k):
        """Until the other two nodes see node k down; records the conviction."""
        self.wait_views([o for o in range(1, NODES + 1) if o != k], NODES - 1)
        self.history.nemesis("convicted", k)

    def kill(self, k):
        self.drop_session(k)
        self.history.nemesis("kill", k)
        self.cluster.kill(k)

    def restart(self, k, command_prefix=()):
        """Starts node k again (through `command_prefix`, e.g. a cgroup's); returns once it
        answers CQL."""
        self.history.nemesis("restart", k)
        result = subprocess.run(
            [*command_prefix, self.cluster.binary, "cluster", "restart", str(k), "--dir",
             str(self.cluster.directory)],
            capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"restart of node{k}: {result.stdout}{result.stderr}"

    def kill_all(self):
        """SIGKILLs every node at once (no node outlives another by more than the loop), and
        waits until all are gone."""
        pids = {k: self.pid(k) for k in range(1, NODES + 1)}
        for k in pids:
            self.drop_session(k)
            self.history.nemesis("kill", k)
        for pid in pids.values():
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        for k, pid in pids.items():
            while self.cluster._is_node(pid, k):
                assert time.monotonic() < deadline, f"node{k} (pid {pid}) outlived SIGKILL"
                time.sleep(0.05)


def configure_nodes(cluster):
    """Restarts the (new, empty) cluster with, on every node, `commitlog_sync: batch` (see
    the module's docstring), `fault_injection: true` (the check at ONE cuts a node's reads to
    the others: `assert_readable_at_one_from_each_replica`), and `hints_flush_period` at
    `HINT_FLUSH_PERIOD_S`: a hint is durable only once flushed, and a node SIGKILLed with
    hints still buffered loses them (as Cassandra's does); with Cassandra's 10 s period the
    kill test's next victim, often a node holding hints for the last one, would lose some."""
    cluster._check("stop")
    for k in range(1, NODES + 1):
        with open(cluster.node_dir(k) / "helenus.yaml", "a") as config:
            config.write("# test_cluster_faults: every acknowledged write synced first.\n"
                         "commitlog_sync: batch\n"
                         "fault_injection: true\n"
                         f"hints_flush_period: {int(HINT_FLUSH_PERIOD_S * 1000)}ms\n")
    cluster.start()


@pytest.fixture
def harness(request, tmp_path_factory, monkeypatch):
    """A fresh 3-node cluster with batch commit log sync, its keyspace and tables, the
    history, the nodes and a load (not started). Stopped at the end; the cluster directory is
    removed if the test passed, else kept with the history in it.

    The nodes run with RUST_BACKTRACE=1, as developer shells and CI often set it: a node that
    then captured and symbolised a backtrace for every error it logs stalled a runtime thread
    for seconds at its first gossip failure (main.rs, `without_error_backtraces`)."""
    monkeypatch.setenv("RUST_BACKTRACE", "1")
    binary = default_helenus_bin()
    if not os.access(binary, os.X_OK):
        pytest.fail(f"helenus binary not found at {binary}")
    directory = tmp_path_factory.mktemp("faults")
    cluster = LocalCluster(binary, directory, nodes=NODES)
    failed_before = request.session.testsfailed
    h = None
    try:
        cluster.start()
        configure_nodes(cluster)
        h = Harness(cluster, fault_seed())
        yield h
    finally:
        try:
            if h is not None:
                h.close()
        finally:
            cluster.destroy()
        if request.session.testsfailed == failed_before and not os.environ.get(
                "HELENUS_FAULT_KEEP"):
            shutil.rmtree(directory, ignore_errors=True)
        elif h is not None:
            h.history.dump(directory / "history.jsonl")
            print(f"\nseed {h.seed}; cluster directory (node logs, history.jsonl): {directory}")


class Harness:
    """What a fault test works with: `history`, `nodes`, `load`, `rng` (seeded), `seed`."""

    def __init__(self, cluster, seed):
        self.cluster = cluster
        self.seed = seed
        self.rng = random.Random(seed)
        self.history = History()
        self.keyspace = unique_name("faults")
        self.nodes = Nodes(cluster, self.history, self.keyspace)
        self.load = None
        try:
            s = self.nodes.session(1)
            s.execute(f"CREATE KEYSPACE {self.keyspace} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 3}")
            s.execute(f"CREATE TABLE {self.keyspace}.registers (k int PRIMARY KEY, v bigint)")
            s.execute(f"CREATE TABLE {self.keyspace}.rows (p int, s int, PRIMARY KEY (p, s))")
            s.execute(f"CREATE TABLE {self.keyspace}.probe (k int PRIMARY KEY, v int)")
            self.nodes.wait_all_up()
            self.load = Load(cluster, self.keyspace, self.history, seed)
        except Exception:
            self.close()
            raise

    def close(self):
        if self.load is not None:
            self.load.stop()
            self.load.close()
        self.nodes.close()


# --- The load ---------------------------------------------------------------------------


class Load:
    """Client threads issuing QUORUM requests through one token-aware driver session with no
    retries, recording each in the history. `start` and `stop` may alternate."""

    def __init__(self, cluster, keyspace, history, seed, threads=CLIENT_THREADS):
        profile = ExecutionProfile(
            # A random replica of each key coordinates (a few keys only: without shuffling,
            # their primary replicas, which may leave a node coordinating nothing).
            load_balancing_policy=TokenAwarePolicy(RoundRobinPolicy(), shuffle_replicas=True),
            retry_policy=FallthroughRetryPolicy(),
            request_timeout=CLIENT_TIMEOUT_S,
        )
        self.driver = Cluster(
            cluster.hosts, port=cluster.cql_port,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            # A node back is used again within half a second (the default backs off to 10 min).
            reconnection_policy=ConstantReconnectionPolicy(0.5, max_attempts=None),
            connect_timeout=10, control_connection_timeout=10,
        )
        self.session = self.driver.connect()
        self.write = self._prepare(WRITE_CQL.format(ks=keyspace))
        self.read = self._prepare(READ_CQL.format(ks=keyspace))
        self.insert = self._prepare(INSERT_CQL.format(ks=keyspace))
        self.keyspace = keyspace
        self.history = history
        self.seed = seed
        self.threads = threads
        self._stop = threading.Event()
        self._workers = []
        self._sequences = [0] * threads
        self._rngs = [random.Random(f"{seed}-{n}") for n in range(threads)]

    def wait_driver_sees_all_up(self):
        """Until the load's driver has every node up again (it reconnects on its own, within
        half a second of a node answering)."""
        wait_until(lambda: all(host.is_up for host in self.driver.metadata.all_hosts()),
                   VIEW_TIMEOUT_S, "the driver sees every node up")

    def _prepare(self, cql):
        statement = self.session.prepare(cql)
        statement.consistency_level = CL.QUORUM
        return statement

    def start(self):
        assert not self._workers, "load already running"
        self._stop.clear()
        self._workers = [threading.Thread(target=self._client, args=(n,), daemon=True)
                         for n in range(self.threads)]
        for w in self._workers:
            w.start()

    def stop(self):
        """Stops the clients and waits for their requests in flight (each at most
        `CLIENT_TIMEOUT_S`)."""
        self._stop.set()
        for w in self._workers:
            w.join(timeout=CLIENT_TIMEOUT_S * 3)
            assert not w.is_alive(), "a client thread is stuck past its request timeout"
        self._workers = []

    def close(self):
        self.driver.shutdown()

    def _client(self, n):
        rng = self._rngs[n]
        process = f"client{n}"
        period_s = 1.0 / OPS_PER_CLIENT_PER_S
        next_at = time.monotonic()
        while not self._stop.is_set():
            roll = rng.random()
            if roll < 0.4:
                self._write(process, rng.randrange(REGISTERS))
            elif roll < 0.7:
                self._read(process, rng.randrange(REGISTERS))
            else:
                self._sequences[n] += 1
                self._insert(process, n, self._sequences[n])
            next_at += period_s
            delay_s = next_at - time.monotonic()
            if delay_s > 0:
                self._stop.wait(delay_s)
            else:
                next_at = time.monotonic()

    def _write(self, process, key):
        invocation = self.history.invoke_write(process, key, "QUORUM")
        ts = invocation.timestamp
        self._execute(invocation, self.write.bind([key, ts, ts]))

    def _read(self, process, key):
        invocation = self.history.invoke(process, "read", key, consistency="QUORUM")
        self._execute(invocation, self.read.bind([key]))

    def _insert(self, process, partition, sequence):
        invocation = self.history.invoke(process, "insert", partition, value=sequence,
                                         consistency="QUORUM")
        self._execute(invocation, self.insert.bind([partition, sequence]))

    def _execute(self, invocation, bound):
        future = self.session.execute_async(bound)
        try:
            rows = future.result()
        except Exception as e:  # noqa: BLE001 - every outcome is recorded, none hidden
            host = future.attempted_hosts[-1].address if future.attempted_hosts else None
            self.history.complete(invocation, error_outcome(invocation.f, e, host),
                                  host=host, error=describe_error(e))
            return
        value = None
        if invocation.f == "read":
            row = rows.one()
            value = row.v if row is not None else None
        self.history.complete(invocation, OK, value=value, host=future.coordinator_host.address)


def error_outcome(f, error, host):
    """`fail` for what certainly did not happen: any read; a write refused as Unavailable
    (answered before the coordinator sends anything) or never sent (no host took it). Else
    `info`: the write may have reached a replica."""
    if f == "read" or isinstance(error, Unavailable):
        return FAIL
    if isinstance(error, NoHostAvailable) and host is None:
        return FAIL
    return INFO


def describe_error(error):
    if isinstance(error, NoHostAvailable):
        inner = ", ".join(f"{h}: {type(e).__name__}" for h, e in error.errors.items())
        return f"NoHostAvailable({inner})"
    return type(error).__name__


# --- Fault windows and the errors they explain -----------------------------------------


class Episode:
    """One node's time out of service: from the fault (kill, pause, partition) until every
    node saw it up again (`end`, infinite if never), and when the others convicted it (None
    if not observed)."""

    def __init__(self, node, start_s):
        self.node = node
        self.start_s = start_s
        self.convicted_s = None
        # When the node was back: restarted (answering CQL), resumed or reconnected.
        self.back_s = float("inf")
        self.end_s = float("inf")

    def overlaps(self, op):
        return op.invoke_s <= self.end_s and op.complete_s >= self.start_s


def episodes(history):
    """The fault episodes of the history's nemesis events."""
    found, open_ = [], {}
    for e in history.nemesis_events():
        if e.f in ("kill", "pause", "partition"):
            if e.value not in open_:
                open_[e.value] = Episode(e.value, e.time_s)
                found.append(open_[e.value])
        elif e.f == "convicted" and e.value in open_:
            open_[e.value].convicted_s = e.time_s
        elif e.f in ("restart", "resume", "heal") and e.value in open_:
            open_[e.value].back_s = e.time_s
        elif e.f == "up" and e.value in open_:
            open_.pop(e.value).end_s = e.time_s
    return found


def classify_errors(history, nodes):
    """Every failed or unknown operation (the final reads aside) by cause: (Counter of the
    allowed by (cause, error), list of unexplained operations). Allowed:

    - "coordinator faulted": the driver sent it to a node while the node was killed, paused
      or cut off (in flight then, or sent before the driver noticed);
    - "coordinator back, not yet seeing its peers": sent to a node restarted, resumed or
      reconnected that did not yet see the others alive: Unavailable from a restarted node
      that answered CQL before gossip had shown it its peers (a start now waits up to 10 s
      for them, as Cassandra's does: see
      `test_a_restarted_node_coordinates_quorum_writes_as_soon_as_it_serves_cql`), timeouts
      from one that still counts a peer dead;
    - "read met an unconvicted replica": a read timed out while a faulted node was not yet
      convicted (no speculative retry: a QUORUM read waits for the two replicas it chose);
    - "whole cluster down": any request while every node was in an episode, or never sent
      because no node was reachable then.
    """
    found = episodes(history)
    allowed, unexplained = Counter(), []
    for op in history.operations():
        if op.process == "final" or op.outcome == OK:
            continue
        coordinator = nodes.number(op.host) if op.host else None
        spans = [ep for ep in found if ep.overlaps(op)]
        mine = [ep for ep in spans if ep.node == coordinator]
        if mine and any(op.invoke_s < ep.back_s for ep in mine):
            allowed["coordinator faulted", op.error] += 1
        elif mine:
            allowed["coordinator back, not yet seeing its peers", op.error] += 1
        elif {ep.node for ep in spans} == set(range(1, NODES + 1)):
            allowed["whole cluster down", op.error] += 1
        elif op.f == "read" and op.error == "ReadTimeout" and any(
                op.invoke_s < (ep.convicted_s if ep.convicted_s is not None else ep.end_s)
                for ep in spans):
            allowed["read met an unconvicted replica", op.error] += 1
        else:
            unexplained.append(op)
    return allowed, unexplained


# --- The checks every test ends with ------------------------------------------------------


def final_reads(h):
    """Reads back, at QUORUM, every register (recorded in the history as process "final")
    and every client's rows: {client: set of sequences}."""
    for key in range(REGISTERS):
        invocation = h.history.invoke("final", "read", key, consistency="QUORUM")
        row = h.load.session.execute(h.load.read.bind([key])).one()
        h.history.complete(invocation, OK, value=row.v if row is not None else None)
    present = {}
    for p in range(h.load.threads):
        statement = SimpleStatement(f"SELECT s FROM {h.keyspace}.rows WHERE p = %s",
                                    consistency_level=CL.QUORUM, fetch_size=1000)
        present[p] = {r.s for r in h.load.session.execute(statement, [p])}
    return present


def finish(h, name, not_before_kill_s=None, **extra):
    """The end of every test: the load stopped, every acknowledged write read back at QUORUM,
    the history checked, the errors explained; then, after hint replay, every acknowledged
    write read at ONE from each replica alone (`assert_readable_at_one_from_each_replica`,
    which `not_before_kill_s` is passed to). Prints the counts; returns them."""
    h.load.stop()
    load_stopped_s = h.history.now_s()
    present = final_reads(h)
    registers = check_registers(h.history)
    inserts = check_inserts(h.history, present)
    allowed, unexplained = classify_errors(h.history, h.nodes)
    counts = h.history.counts()
    lost = sum(1 for v in inserts.violations if v.kind == "lost insert") + sum(
        1 for v in registers.violations if v.op.process == "final")
    summary = {
        "seed": h.seed,
        "writes ok/fail/unknown": "/".join(str(counts.get("write", {}).get(o, 0))
                                           for o in (OK, FAIL, INFO)),
        "inserts ok/fail/unknown": "/".join(str(counts.get("insert", {}).get(o, 0))
                                            for o in (OK, FAIL, INFO)),
        "reads ok/fail": "/".join(str(counts.get("read", {}).get(o, 0)) for o in (OK, FAIL)),
        "coordinators": dict(sorted(Counter(
            f"node{h.nodes.number(op.host)}" for op in h.history.operations()
            if op.host and op.process != "final").items())),
        "lost": lost,
        "errors explained": ", ".join(f"{n} {cause} ({error})"
                                      for (cause, error), n in sorted(allowed.items())),
        "errors unexplained": len(unexplained),
        **extra,
    }
    print(f"\n{name}: " + "; ".join(f"{k} {v}" for k, v in summary.items()))
    inserts.assert_valid()
    registers.assert_valid()
    assert not unexplained, (
        f"{len(unexplained)} client errors no fault explains (seed {h.seed}); the first:\n"
        + "\n".join(f"  {op.process} {op.f} k={op.key} [{op.invoke_s:.3f}s, "
                    f"{op.complete_s:.3f}s] via {op.host}: {op.outcome} {op.error}"
                    for op in unexplained[:20])
        + "\nfaults: " + ", ".join(f"{e.f} {e.value} at {e.time_s:.3f}s"
                                   for e in h.history.nemesis_events()))
    assert counts.get("write", {}).get(OK, 0) > 0 and counts.get("insert", {}).get(OK, 0) > 0
    at_one = assert_readable_at_one_from_each_replica(h, load_stopped_s, not_before_kill_s)
    print(f"{name}, after hint replay: " + "; ".join(f"{k} {v}" for k, v in at_one.items()))
    return {**summary, **at_one}


def acknowledged(history, f):
    """The `ok` operations `f` of the clients (the final reads aside)."""
    return [op for op in history.operations(f) if op.outcome == OK and op.process != "final"]


def admin(h, k, *command):
    """`helenus admin COMMAND...` against node k: its output lines (the test fails on an
    error)."""
    result = subprocess.run(
        [h.cluster.binary, "admin", "--host", h.nodes.host(k), "--port",
         str(h.cluster.admin_port), *command],
        capture_output=True, text=True, timeout=ADMIN_TIMEOUT_S)
    assert result.returncode == 0, f"admin {' '.join(command)} on node{k}: {result.stderr}"
    return result.stdout.splitlines()


def hint_counters(h, k):
    """Node k's `helenus admin hints`: {target address: {counter: int or None}}, one entry per
    node it keeps (or kept) hints for; `last_replay_ms` is None until a replay ended."""
    found = {}
    for line in admin(h, k, "hints"):
        address, *pairs = line.split()
        counters = dict(pair.split("=", 1) for pair in pairs)
        found[address] = {name: None if value == "-" else int(value)
                          for name, value in counters.items() if name != "host_id"}
    return found


def wait_hints_replayed(h, load_stopped_s):
    """Until no node holds a pending hint (every node's `helenus admin hints` shows
    pending=0 for every target); returns the counts summed over the nodes (since each one's
    last start) and the time the replay took from the end of the write timeout.

    A write still waiting for a replica when the load stopped is hinted only when its
    `write_request_timeout` (2 s) ends: the poll starts after that, else it could see no hint
    pending just before the last ones are kept. Fails if any hint was dropped (past
    `max_hint_window`, a full disk, a damaged file): then a replica legitimately misses
    writes until repair, and none of these tests should drop one."""
    wait_s = WRITE_REQUEST_TIMEOUT_S + HINT_SLACK_S - (h.history.now_s() - load_stopped_s)
    if wait_s > 0:
        time.sleep(wait_s)  # a bound (the write timeout), not a readiness wait
    started = time.monotonic()
    deadline = started + REPLAY_TIMEOUT_S
    while True:
        counters = {k: hint_counters(h, k) for k in range(1, NODES + 1)}
        pending = {f"node{k} -> {target}": c["pending"] for k, by_target in counters.items()
                   for target, c in by_target.items() if c["pending"]}
        if not pending:
            break
        assert time.monotonic() < deadline, (
            f"hints still pending {REPLAY_TIMEOUT_S} s after the load stopped: {pending}")
        time.sleep(0.2)  # poll interval
    replay_s = time.monotonic() - started
    totals = Counter()
    for by_target in counters.values():
        for c in by_target.values():
            for name, value in c.items():
                if name != "last_replay_ms" and value is not None:
                    totals[name] += value
    dropped = {name: n for name, n in totals.items() if name.startswith("dropped") and n}
    assert not dropped, f"hints dropped: {dropped} ({counters})"
    return {"hints stored/delivered": f"{totals['stored']}/{totals['delivered']}",
            "hint replay done after the write timeout in": f"{replay_s:.1f} s"}


def assert_readable_at_one_from_each_replica(h, load_stopped_s, not_before_kill_s=None):
    """After hint replay (`wait_hints_replayed`), every acknowledged write (the load's and the
    direct requests') is readable at ONE from each replica alone: each register holds its
    latest acknowledged write's value or a later one, and every acknowledged insert is there.
    RF=3 on three nodes makes every node a replica of every key. Returns the counts.

    How a read is made to come from one replica's own storage: the read at ONE goes through
    node k (its own pinned session), whose coordinator sends the data request to the closest
    replica, itself; but a speculative retry (the tables keep the default `99p`) could ask
    another replica too and take its answer. So while node k is read, its outbound READ and
    DIGEST messages to the other two are cut with the fault injector (`helenus admin fault
    --to ADDRESS --verb READ cut`, this test's nodes run with `fault_injection: true`): an
    answer can then come only from node k's storage, and a read the coordinator sent
    elsewhere would time out and fail the test rather than pass it. This costs two admin
    calls per node and no restart, unlike stopping the other two nodes.

    `not_before_kill_s`: the whole-cluster kill's time. A write acknowledged by two replicas
    shortly before every node died may never reach the third: its copy was in flight, and its
    coordinator died before the write timeout that would have hinted it (Cassandra's window is
    the same; repair closes it). Writes invoked within `WRITE_REQUEST_TIMEOUT_S +
    HINT_FLUSH_PERIOD_S` before that kill are left out (counted); every other one must be
    everywhere."""
    counts = wait_hints_replayed(h, load_stopped_s)
    window_start = (not_before_kill_s - WRITE_REQUEST_TIMEOUT_S - HINT_FLUSH_PERIOD_S
                    if not_before_kill_s is not None else float("inf"))

    def checked(op):
        return not (window_start <= op.invoke_s <= not_before_kill_s)

    writes = [w for w in acknowledged(h.history, "write") if checked(w)]
    inserts = [op for op in acknowledged(h.history, "insert") if checked(op)]
    left_out = (len(acknowledged(h.history, "write")) + len(acknowledged(h.history, "insert"))
                - len(writes) - len(inserts))
    latest = {}
    for w in writes:
        if w.key not in latest or w.timestamp > latest[w.key].timestamp:
            latest[w.key] = w
    rows = {}
    for op in inserts:
        rows.setdefault(op.key, {})[op.value] = op
    started = time.monotonic()
    for k in range(1, NODES + 1):
        others = [h.nodes.host(o) for o in range(1, NODES + 1) if o != k]
        for other in others:
            for verb in ("READ", "DIGEST"):
                admin(h, k, "fault", "--to", other, "--verb", verb, "cut")
        try:
            missing = missing_on(h, k, latest, rows)
        finally:
            admin(h, k, "fault", "clear")
        assert missing is None, missing
    checked_keys = len(latest) + sum(len(r) for r in rows.values())
    return {**counts,
            "read at ONE from each replica alone": f"{checked_keys} acknowledged writes "
            f"(the latest of {len(writes)} register writes, {len(inserts)} inserts) x {NODES} "
            f"replicas in {time.monotonic() - started:.1f} s",
            **({"left out (acknowledged just before the whole-cluster kill)": left_out}
               if not_before_kill_s is not None else {})}


def missing_on(h, k, latest, rows):
    """None if node k's own storage holds every write in `latest` (register: its latest
    acknowledged write) and `rows` (partition: {sequence: insert}); else a report of the first
    missing one with its history."""
    session = h.nodes.session(k)
    read = session.prepare(READ_CQL.format(ks=h.keyspace))
    for key, w in sorted(latest.items()):
        found = run(session, read, [key], CL.ONE).one()
        if found is None or found.v < w.timestamp:
            return report_missing(h, k, w, f"register {key} holds "
                                  f"{found.v if found else None}, older than acknowledged "
                                  f"ts={w.timestamp}")
    for p, inserted in sorted(rows.items()):
        there = {r.s for r in run(session, f"SELECT s FROM {h.keyspace}.rows WHERE p = %s",
                                  [p], CL.ONE, fetch_size=1000)}
        lost = sorted(set(inserted) - there)
        if lost:
            return report_missing(h, k, inserted[lost[0]], f"client{p}'s row {lost[0]} is "
                                  f"missing ({len(lost)} of its rows are)")
    return None


def report_missing(h, k, op, what):
    """The failure message for acknowledged write `op` missing on node k: what, and the
    history of its key (its kind of operation only) and the faults, from a little before the
    write to the end."""
    with h.history._lock:
        entries = list(h.history.entries)
    start = max(0, op.invoke_index - 200)
    lines = [e.line() for e in entries[start:]
             if (e.key == op.key and e.f == op.f) or e.process == "nemesis"]
    if len(lines) > 80:
        lines = lines[:40] + [f"  ... {len(lines) - 80} lines left out"] + lines[-40:]
    return (f"acknowledged write not readable at ONE from node{k} alone after hint replay "
            f"(seed {h.seed}): {what}\n  the write: {op.process} {op.f} k={op.key} "
            f"v={op.value} ts={op.timestamp} [{op.invoke_s:.3f}s, {op.complete_s:.3f}s] via "
            f"{op.host}\n" + "\n".join(lines))


def quorum_requests_through(h, k, count=DIRECT_REQUESTS):
    """`count` register writes, each read back, at QUORUM through node k alone (pinned, no
    retries), recorded in the history as process "direct{k}" (so the checks cover them and
    any error is one that `classify_errors` must explain); returns how many succeeded."""
    session = h.nodes.session(k)
    write = session.prepare(WRITE_CQL.format(ks=h.keyspace))
    read = session.prepare(READ_CQL.format(ks=h.keyspace))
    process, host, done = f"direct{k}", h.nodes.host(k), 0
    for i in range(count):
        key = i % REGISTERS
        invocation = h.history.invoke_write(process, key, "QUORUM")
        ts = invocation.timestamp
        done += execute_recorded(h.history, session, write, [key, ts, ts], invocation, host)
        invocation = h.history.invoke(process, "read", key, consistency="QUORUM")
        done += execute_recorded(h.history, session, read, [key], invocation, host)
    return done


def execute_recorded(history, session, prepared, values, invocation, host):
    """Executes `prepared` at QUORUM through `session` and records the completion of
    `invocation`; 1 if it succeeded, else 0."""
    bound = prepared.bind(values)
    bound.consistency_level = CL.QUORUM
    try:
        row = session.execute(bound).one()
    except Exception as e:  # noqa: BLE001 - recorded, and judged by classify_errors
        history.complete(invocation, error_outcome(invocation.f, e, host), host=host,
                         error=describe_error(e))
        return 0
    value = (row.v if row is not None else None) if invocation.f == "read" else None
    history.complete(invocation, OK, value=value, host=host)
    return 1


# --- a. SIGKILL and restart, a node at a time ---------------------------------------------


def test_kill_and_restart_a_node_at_a_time_under_quorum_load(harness):
    """Each round SIGKILLs a node other than the last round's, leaves it down for 1 to 3 s
    (mostly shorter than its conviction), restarts it and waits until every node sees every
    node up. Errors only for requests to the killed node (or reads that chose it as a
    replica before its conviction)."""
    h = harness
    rounds = fault_rounds()
    h.load.start()
    time.sleep(WARM_UP_S)
    victim = None
    for _ in range(rounds):
        victim = h.rng.choice([k for k in range(1, NODES + 1) if k != victim])
        h.nodes.kill(victim)
        time.sleep(h.rng.uniform(1.0, 3.0))
        h.nodes.restart(victim)
        h.nodes.wait_all_up(victim)
        time.sleep(h.rng.uniform(0.5, 1.5))
    finish(h, "kill/restart", rounds=rounds)


def test_a_restarted_node_coordinates_quorum_writes_as_soon_as_it_serves_cql(harness):
    """The kill test's "coordinator back, not yet seeing its peers" errors, on their own: a
    client pinned to one node, which reconnects every 0.1 s, writes at QUORUM through it for
    3 s from the first request that reaches the restarted node. Every write should succeed
    (the two other replicas were up throughout)."""
    h = harness
    x = h.rng.randrange(1, NODES + 1)
    host = h.nodes.host(x)
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]),
                               retry_policy=FallthroughRetryPolicy(),
                               request_timeout=CLIENT_TIMEOUT_S)
    driver = Cluster([host], port=h.cluster.cql_port,
                     execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                     reconnection_policy=ConstantReconnectionPolicy(0.1, max_attempts=None),
                     connect_timeout=10, control_connection_timeout=10)
    try:
        session = driver.connect()
        insert = session.prepare(INSERT_CQL.format(ks=h.keyspace))
        insert.consistency_level = CL.QUORUM
        h.nodes.kill(x)
        h.nodes.restart(x)
        errors, sent = Counter(), 0
        deadline = time.monotonic() + VIEW_TIMEOUT_S
        window_end = None
        while window_end is None or time.monotonic() < window_end:
            assert time.monotonic() < deadline, f"the driver does not reconnect to node{x}"
            try:
                session.execute(insert.bind([NODES + x, sent]))
                outcome = None
            except NoHostAvailable:
                time.sleep(0.01)  # the driver is not connected yet: nothing reached the node
                continue
            except Exception as e:  # noqa: BLE001 - counted
                outcome = describe_error(e)
            if window_end is None:
                window_end = time.monotonic() + 3.0
            sent += 1
            if outcome is not None:
                errors[outcome] += 1
            time.sleep(0.01)  # pace
        print(f"\nnode{x} restarted: {sent} QUORUM writes through it, errors {dict(errors)}")
        assert not errors, f"{sum(errors.values())} of {sent} writes failed: {dict(errors)}"
    finally:
        driver.shutdown()


# --- b. A partition isolating one node ----------------------------------------------------


def cgroup2_mount():
    """(mount point, its root within the hierarchy) of the cgroup v2 hierarchy, or None."""
    with open("/proc/self/mountinfo") as mounts:
        for line in mounts:
            fields = line.split()
            dash = fields.index("-")
            if fields[dash + 1] == "cgroup2":
                return Path(fields[4]), fields[3]
    return None


class NodeCgroup:
    """A cgroup v2 of its own for one node's process, so that iptables can match its
    packets (`-m cgroup --path`). A process started through `command_prefix` runs in it; its
    sockets carry it for their lifetime. `remove` moves whatever still runs in it back to this
    process's cgroup and removes it."""

    def __init__(self, name):
        mount = cgroup2_mount()
        if mount is None:
            pytest.fail("the partition test needs a cgroup v2 hierarchy (none is mounted)")
        mount_point, mount_root = mount
        with open("/proc/self/cgroup") as lines:
            own = Path(next(line[3:].strip() for line in lines if line.startswith("0::")))
        self.home = mount_point / own.relative_to("/")
        self.directory = self.home / name
        # The path iptables resolves from the hierarchy's root.
        self.path = str(Path(mount_root) / own.relative_to("/") / name)
        self.directory.mkdir()

    def command_prefix(self):
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.directory)]

    def remove(self):
        for _ in range(50):
            try:
                pids = (self.directory / "cgroup.procs").read_text().split()
            except OSError:
                return
            for pid in pids:
                try:
                    (self.home / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # exited meanwhile
            try:
                self.directory.rmdir()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"cannot remove cgroup {self.directory}")


class LoopbackFirewall:
    """iptables rules in a chain of its own (jumped to from OUTPUT: on loopback every packet
    passes OUTPUT once) that cut one node off the others' internode traffic, TCP (messaging)
    and UDP (gossip), on the cluster's storage port only (CQL stays open, and other clusters
    on the machine are untouched). Messaging connections are one-way (the connecting node
    sends, the accepting node only acknowledges), so dropping every packet to the node's
    storage port and every packet its cgroup sends from or to a storage port cuts both
    directions. `heal` removes the rules, `close` the chain."""

    def __init__(self, storage_port):
        self.port = storage_port
        self.chain = f"HELENUS-FAULTS-{os.getpid()}"
        self._iptables("-N", self.chain)
        try:
            self._iptables("-I", "OUTPUT", "1", "-j", self.chain)
        except Exception:
            self._iptables("-X", self.chain)
            raise

    @staticmethod
    def _iptables(*args):
        result = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True,
                                timeout=30)
        assert result.returncode == 0, f"iptables {' '.join(args)}: {result.stderr}"

    def isolate(self, host, cgroup):
        for proto in ("tcp", "udp"):
            self._iptables("-A", self.chain, "-p", proto, "-d", host, "--dport",
                           str(self.port), "-j", "DROP")
            for direction in ("--dport", "--sport"):
                self._iptables("-A", self.chain, "-p", proto, "-m", "cgroup", "--path",
                               cgroup.path, direction, str(self.port), "-j", "DROP")

    def heal(self):
        self._iptables("-F", self.chain)

    def close(self):
        self._iptables("-D", "OUTPUT", "-j", self.chain)
        self._iptables("-F", self.chain)
        self._iptables("-X", self.chain)


@pytest.fixture
def firewall(harness):
    """A `LoopbackFirewall` for the harness's cluster, its chain removed at the end whatever
    happened (before the cluster stops)."""
    if os.geteuid() != 0:
        pytest.skip("the partition test needs root (iptables rules, a cgroup of its own)")
    if shutil.which("iptables") is None:
        pytest.fail("the partition test needs iptables (apt-get install iptables)")
    wall = LoopbackFirewall(harness.cluster.storage_port)
    try:
        yield wall
    finally:
        wall.close()


@pytest.fixture
def isolated_cgroup(harness):
    """A cgroup for the node the partition test isolates, removed at the end."""
    cgroup = NodeCgroup(f"helenus-faults-{os.getpid()}")
    try:
        yield cgroup
    finally:
        cgroup.remove()


def test_partition_isolating_one_node(harness, firewall, isolated_cgroup):
    """One node is cut off from the other two (both directions, messaging and gossip) while
    the load runs; writes at QUORUM go on through the majority, whose two nodes convict it;
    then the partition heals and the node is seen up again."""
    h = harness
    x = h.rng.randrange(1, NODES + 1)
    # The node restarts inside its cgroup, for the firewall to tell its packets apart.
    h.nodes.kill(x)
    h.nodes.restart(x, isolated_cgroup.command_prefix())
    h.nodes.wait_all_up(x)
    h.load.wait_driver_sees_all_up()
    h.load.start()
    time.sleep(WARM_UP_S)
    h.history.nemesis("partition", x)
    firewall.isolate(h.nodes.host(x), isolated_cgroup)
    h.nodes.wait_convicted(x)
    majority = [k for k in range(1, NODES + 1) if k != x]
    direct = sum(quorum_requests_through(h, k) for k in majority)
    time.sleep(OUT_AFTER_CONVICTION_S)
    h.history.nemesis("heal", x)
    firewall.heal()
    h.nodes.wait_all_up(x)
    time.sleep(1.0)
    finish(h, "partition", isolated=f"node{x}",
           **through_the_others(h, x, "partition", "heal"),
           direct_requests_through_majority_after_conviction=direct)
    assert direct == 2 * DIRECT_REQUESTS * len(majority)


def through_the_others(h, x, start, end):
    """Counts of the load's writes and inserts through nodes other than `x` while `x` was out
    (between the nemesis events `start` and `end` of node x). `classify_errors` already
    failed the test if any of them failed; this says they were there."""
    events = {e.f: e.time_s for e in h.history.nemesis_events() if e.value == x}
    ops = [op for op in h.history.operations() if op.f in ("write", "insert")
           and events[start] <= op.invoke_s and op.complete_s <= events[end]
           and op.host is not None and h.nodes.number(op.host) != x]
    return {"load_writes_through_the_others_meanwhile":
            f"{sum(op.outcome == OK for op in ops)} ok of {len(ops)}"}


# --- c. The whole cluster killed and restarted --------------------------------------------


def test_whole_cluster_killed_and_restarted(harness):
    """All three nodes SIGKILLed at once under load, then started again: with batch sync every
    acknowledged write survives at QUORUM; at ONE from each replica, every one but those
    acknowledged just before the kill (`finish`'s `not_before_kill_s`: their third copy may
    have died in flight with its coordinator, before any hint was kept)."""
    h = harness
    h.load.start()
    # Long enough that most writes before the kill are older than the window left out.
    time.sleep(WARM_UP_S * 3)
    killed_s = h.history.now_s()
    h.nodes.kill_all()
    time.sleep(h.rng.uniform(0.5, 2.0))
    for k in range(1, NODES + 1):
        h.history.nemesis("restart", k)
    h.cluster.start()
    h.nodes.wait_views(range(1, NODES + 1), NODES)
    # The load runs on: until its driver has reconnected (on its own schedule, a moment after
    # the nodes see each other), its requests find no host, and that is still the fault.
    h.load.wait_driver_sees_all_up()
    for k in range(1, NODES + 1):
        h.history.nemesis("up", k)
    time.sleep(WARM_UP_S)
    finish(h, "whole-cluster restart", not_before_kill_s=killed_s)


# --- d. A node paused past the timeouts ---------------------------------------------------


def test_node_paused_past_timeouts_and_conviction(harness):
    """One node SIGSTOPped until the others convict it and for longer than every request
    timeout (the driver's included), then SIGCONTed: requests at QUORUM go on through the
    others meanwhile, those sent to the paused node time out (counted), and the node comes
    back up."""
    h = harness
    x = h.rng.randrange(1, NODES + 1)
    pid = h.nodes.pid(x)
    h.load.start()
    time.sleep(WARM_UP_S)
    h.history.nemesis("pause", x)
    paused_at = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        h.nodes.wait_convicted(x)
        majority = [k for k in range(1, NODES + 1) if k != x]
        direct = sum(quorum_requests_through(h, k) for k in majority)
        # Longer than the nodes' timeouts (read 5 s) and the driver's (`CLIENT_TIMEOUT_S`).
        time.sleep(max(OUT_AFTER_CONVICTION_S,
                       CLIENT_TIMEOUT_S + 1 - (time.monotonic() - paused_at)))
    finally:
        os.kill(pid, signal.SIGCONT)
    h.history.nemesis("resume", x)
    paused_s = time.monotonic() - paused_at
    h.nodes.wait_all_up(x)
    time.sleep(1.0)
    timed_out = [op for op in h.history.operations() if op.host == h.nodes.host(x)
                 and op.error == "OperationTimedOut"]
    finish(h, "pause", paused=f"node{x} for {paused_s:.1f} s",
           **through_the_others(h, x, "pause", "resume"),
           direct_requests_through_the_others_after_conviction=direct,
           timed_out_on_the_paused_coordinator=len(timed_out))
    assert direct == 2 * DIRECT_REQUESTS * len(majority)
