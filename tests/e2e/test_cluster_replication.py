"""Replication on a 3-node cluster, as a Cassandra user sees it: every consistency level with all
nodes up and with one down (Unavailable with its required/alive counts), writes through one node
read through the others, blocking read repair, replica placement against the driver's token map,
DDL seen at once everywhere, STATUS_CHANGE events, TRUNCATE, a paged range scan over RF=1 data,
and system.peers/peers_v2.

All tests share one cluster (`shared_cluster3`: `helenus cluster`, or Cassandra 5.0 with
`--cluster-cassandra`); a test that kills nodes restarts them (the `ring` fixture does it for a
failed test too) and waits until every node sees every node up again. Requests are pinned to one
coordinator (WhiteListRoundRobinPolicy) with no driver retries (FallthroughRetryPolicy), so an
error is the coordinator's own.

"Up" and "down" as a coordinator sees them are observed through the cluster itself: a write at
ALL to an RF=3 table through that node succeeds once it sees all three nodes alive, and fails at
once with Unavailable (alive = N) once it has convicted the others. Cassandra takes ~10-20 s to
convict a killed node; a write to a node it does not know is dead yet times out.
"""

import os
import signal
import struct
import time
from contextlib import contextmanager

import pytest
from cassandra import ConsistencyLevel as CL
from cassandra import InvalidRequest, OperationTimedOut, Unavailable, WriteTimeout
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.policies import FallthroughRetryPolicy, WhiteListRoundRobinPolicy
from cassandra.protocol import ServerError, TruncateError
from cassandra.query import SimpleStatement

from conftest import cluster_is_shared, shared_cluster_scope
from util import EventListener, unique_name, wait_until

pytestmark = pytest.mark.cluster

NODES = 3
# Per request; Cassandra's own write/read timeouts are 2 s / 5 s.
REQUEST_TIMEOUT_S = 20
# How long a node may take to see another one down (Cassandra convicts in ~10-20 s) or up again.
VIEW_TIMEOUT_S = 90
# How long the nodes' schema versions may take to agree (the driver's max_schema_agreement_wait).
SCHEMA_AGREEMENT_S = 10
# How long a client waits for a pushed STATUS_CHANGE.
EVENT_TIMEOUT_S = 90
# How long a write acknowledged at ANY may take to show on the live replicas.
ANY_VISIBLE_S = 10
# How soon a killed Helenus node must be DOWN at a client and in `admin status`: its peers see
# its connections close and its port refuse them, and convict it at once (well under a second
# when measured; the bound is for a loaded CI machine). Phi alone takes ~10-14 s.
FAST_DOWN_S = 8
# A process stopped (SIGSTOP) keeps its sockets open: only phi convicts it, after this at least
# (it takes ~10-14 s at phi_convict_threshold 8).
PHI_CONVICTION_MIN_S = 3

WRITE_LEVELS = [CL.ANY, CL.ONE, CL.TWO, CL.THREE, CL.QUORUM, CL.ALL, CL.LOCAL_ONE,
                CL.LOCAL_QUORUM, CL.EACH_QUORUM]
READ_LEVELS = [cl for cl in WRITE_LEVELS if cl != CL.ANY]
# How many of RF=3 replicas each level waits for.
BLOCK = {CL.ANY: 1, CL.ONE: 1, CL.LOCAL_ONE: 1, CL.TWO: 2, CL.QUORUM: 2, CL.LOCAL_QUORUM: 2,
         CL.EACH_QUORUM: 2, CL.THREE: 3, CL.ALL: 3}


def name(cl):
    return CL.value_to_name[cl]


def connect(host, port):
    """A driver Cluster and Session whose every request is coordinated by `host`, with no
    retries. The driver still reads the whole ring (token map) from it."""
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([host]),
        retry_policy=FallthroughRetryPolicy(),
        request_timeout=REQUEST_TIMEOUT_S,
    )
    cluster = Cluster([host], port=port, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      connect_timeout=10, control_connection_timeout=10,
                      schema_event_refresh_window=0.1)
    try:
        return cluster, cluster.connect()
    except Exception:
        cluster.shutdown()
        raise


def run(session, query, params=None, cl=CL.ONE, fetch_size=None):
    """Executes `query` at `cl` (a SimpleStatement, or a prepared statement bound to params)."""
    if isinstance(query, str):
        statement = SimpleStatement(query, consistency_level=cl, fetch_size=fetch_size)
        return session.execute(statement, params)
    bound = query.bind(params or [])
    bound.consistency_level = cl
    return session.execute(bound)


def unavailable(session, query, params=None, cl=CL.ALL):
    """The Unavailable `query` at `cl` fails with (the test fails if it succeeds)."""
    with pytest.raises(Unavailable) as info:
        run(session, query, params, cl)
    return info.value


class Ring:
    """The shared cluster with a pinned session per live node (`session(k)`, nodes numbered
    from 1), which nodes are up, and a probe table (RF=3) for observing each node's view of the
    others."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.flavor = cluster.flavor
        self.port = cluster.cql_port
        self.hosts = cluster.hosts
        self.up = set(range(1, NODES + 1))
        self._clients = {}
        s = self.session(1)
        self.dc = s.execute("SELECT data_center FROM system.local").one().data_center
        self.probe_ks = unique_name("probe")
        s.execute(f"CREATE KEYSPACE {self.probe_ks} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}")
        s.execute(f"CREATE TABLE {self.probe_ks}.p (k int PRIMARY KEY, v int)")

    def host(self, k):
        return self.hosts[k - 1]

    def session(self, k):
        assert k in self.up, f"node{k} is down"
        if k not in self._clients:
            self._clients[k] = connect(self.host(k), self.port)
        return self._clients[k][1]

    def driver(self, k):
        """Node k's driver Cluster (its metadata: the token map)."""
        self.session(k)
        return self._clients[k][0]

    def _drop_client(self, k):
        client = self._clients.pop(k, None)
        if client is not None:
            client[0].shutdown()

    def kill(self, *nodes):
        """SIGKILLs `nodes`, then waits until every node left has convicted them."""
        for k in nodes:
            self._drop_client(k)
            self.cluster.kill(k)
            self.up.discard(k)
        self.wait_views()

    def restart(self, *nodes):
        """Starts `nodes` again, then waits until every live node sees every live node up."""
        for k in nodes:
            self.cluster.restart(k)
            self.up.add(k)
        self.wait_views()

    def heal(self):
        """Restarts every node that is down."""
        down = sorted(set(range(1, NODES + 1)) - self.up)
        if down:
            self.restart(*down)

    def wait_views(self):
        """Until each live node coordinates a write at ALL to the RF=3 probe table as a node
        that sees exactly `self.up` alive: success with all up, else Unavailable with
        alive = len(up) at once (not a timeout, which means a dead node not yet convicted)."""
        deadline = time.monotonic() + VIEW_TIMEOUT_S
        for k in sorted(self.up):
            while True:
                try:
                    self._probe(k)
                    outcome = "all alive"
                except Unavailable as e:
                    outcome = f"alive {e.alive_replicas}"
                except (WriteTimeout, OperationTimedOut, NoHostAvailable, ServerError) as e:
                    # A dead node not convicted yet: the write waits for it until its deadline.
                    # (Helenus answers ServerError there; see test_write_to_a_dead_replica...)
                    outcome = f"{type(e).__name__}"
                wanted = "all alive" if len(self.up) == NODES else f"alive {len(self.up)}"
                if outcome == wanted:
                    break
                assert time.monotonic() < deadline, (
                    f"node{k} does not see nodes {sorted(self.up)} alive and the others down "
                    f"within {VIEW_TIMEOUT_S} s: last probe {outcome}")
                time.sleep(0.5)  # poll interval

    def _probe(self, k):
        run(self.session(k), f"INSERT INTO {self.probe_ks}.p (k, v) VALUES (0, 0)", cl=CL.ALL)

    def close(self):
        for k in list(self._clients):
            self._drop_client(k)


@pytest.fixture(scope=shared_cluster_scope)
def module_ring(shared_cluster3):
    ring = Ring(shared_cluster3)
    ring.wait_views()
    yield ring
    ring.close()


@pytest.fixture
def ring(module_ring, pytestconfig):
    """The cluster with every node up and seeing the others; on a cluster shared with later
    tests, every node is up again after the test (a cluster of the test's own is discarded)."""
    module_ring.heal()
    yield module_ring
    if cluster_is_shared(pytestconfig):
        module_ring.heal()


@contextmanager
def keyspace(ring, replication):
    """A keyspace with `replication` (a CQL map literal), dropped afterwards (if all nodes are
    up; else left for the module's end)."""
    ks = unique_name("ks")
    ring.session(min(ring.up)).execute(f"CREATE KEYSPACE {ks} WITH replication = {replication}")
    try:
        yield ks
    finally:
        if len(ring.up) == NODES:
            ring.session(1).execute(f"DROP KEYSPACE IF EXISTS {ks}")


def rf3(ring):
    """NetworkTopologyStrategy with 3 replicas in the nodes' one data centre: the LOCAL_ and
    EACH_ levels have a data centre to count in."""
    return f"{{'class': 'NetworkTopologyStrategy', '{ring.dc}': 3}}"


def int_key(k):
    """The routing key of an int partition key: its 4-byte big-endian serialization."""
    return struct.pack(">i", k)


def test_every_level_with_all_nodes_up(ring):
    with keyspace(ring, rf3(ring)) as ks:
        ring.session(1).execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
        for i, write_cl in enumerate(WRITE_LEVELS):
            writer = ring.session(i % NODES + 1)
            run(writer, f"INSERT INTO {ks}.t (k, v) VALUES (%s, %s)", [i, name(write_cl)],
                write_cl)
            for j, read_cl in enumerate(READ_LEVELS):
                # A read is sure to meet a replica the write reached when the replicas they
                # wait for overlap (W + R > RF); else it is read at ALL.
                if BLOCK[write_cl] + BLOCK[read_cl] <= 3:
                    read_cl = CL.ALL
                reader = ring.session((i + j + 1) % NODES + 1)
                rows = list(run(reader, f"SELECT v FROM {ks}.t WHERE k = %s", [i], read_cl))
                assert [r.v for r in rows] == [name(write_cl)], (
                    f"written at {name(write_cl)}, read at {name(read_cl)}")
        # Every write reached every replica (a read at ALL repairs one it had not yet).
        rows = run(ring.session(3), f"SELECT k FROM {ks}.t", cl=CL.ALL)
        assert len(list(rows)) == len(WRITE_LEVELS)
        # The whole table at every level, through every node.
        for k in range(1, NODES + 1):
            for read_cl in READ_LEVELS:
                rows = run(ring.session(k), f"SELECT k, v FROM {ks}.t", cl=read_cl)
                assert sorted((r.k, r.v) for r in rows) == [
                    (i, name(cl)) for i, cl in enumerate(WRITE_LEVELS)]
        # ANY is for writes only, as in Cassandra.
        with pytest.raises(InvalidRequest, match="ANY ConsistencyLevel is only supported"):
            run(ring.session(2), f"SELECT v FROM {ks}.t WHERE k = 0", cl=CL.ANY)


def test_levels_with_one_node_down(ring):
    with keyspace(ring, rf3(ring)) as ks:
        ring.session(1).execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
        insert = f"INSERT INTO {ks}.t (k, v) VALUES (%s, %s)"
        run(ring.session(1), insert, [0, 0], CL.ALL)
        ring.kill(3)
        for k in (1, 2):
            s = ring.session(k)
            for cl in (CL.ALL, CL.THREE):
                for query, params in ((insert, [1, 1]), (f"SELECT v FROM {ks}.t WHERE k = 0",
                                                         None)):
                    e = unavailable(s, query, params, cl)
                    assert (e.consistency, e.required_replicas, e.alive_replicas) == (cl, 3, 2), (
                        f"{query} at {name(cl)} through node{k}: {e}")
            for i, cl in enumerate([CL.QUORUM, CL.TWO, CL.ONE, CL.LOCAL_QUORUM, CL.LOCAL_ONE,
                                    CL.EACH_QUORUM, CL.ANY], start=10 * k):
                run(s, insert, [i, i], cl)
                read_cl = CL.TWO if cl == CL.ANY else cl
                # Written at ONE (or ANY): read at TWO, which meets the replica it reached.
                if cl in (CL.ONE, CL.LOCAL_ONE):
                    read_cl = CL.TWO
                read = lambda: [r.v for r in run(  # noqa: E731
                    s, f"SELECT v FROM {ks}.t WHERE k = %s", [i], read_cl)]
                if cl == CL.ANY:
                    # ANY is acknowledged as soon as the coordinator keeps node3's hint (as in
                    # Cassandra), possibly before nodes 1 and 2 applied the write: they must
                    # show it soon after, not necessarily at once.
                    wait_until(lambda: read() == [i], ANY_VISIBLE_S,
                               "written at ANY with node3 down, read at TWO")
                else:
                    assert read() == [i], f"written at {name(cl)} with node3 down"


def test_write_through_any_node_reads_through_every_other(ring):
    with keyspace(ring, rf3(ring)) as ks:
        ring.session(1).execute(f"CREATE TABLE {ks}.t (k int, c int, v text, "
                                "PRIMARY KEY (k, c))")
        for w in range(1, NODES + 1):
            writer = ring.session(w)
            insert = writer.prepare(f"INSERT INTO {ks}.t (k, c, v) VALUES (?, ?, ?)")
            for key in range(w * 100, w * 100 + 20):
                for c in range(3):
                    run(writer, insert, [key, c, f"{w}-{key}-{c}"], CL.QUORUM)
            for r in range(1, NODES + 1):
                if r == w:
                    continue
                reader = ring.session(r)
                select = reader.prepare(f"SELECT c, v FROM {ks}.t WHERE k = ?")
                for key in range(w * 100, w * 100 + 20):
                    rows = run(reader, select, [key], CL.QUORUM)
                    assert [(row.c, row.v) for row in rows] == [
                        (c, f"{w}-{key}-{c}") for c in range(3)], (
                        f"key {key} written through node{w}, read through node{r}")
        rows = run(ring.session(2), f"SELECT k FROM {ks}.t", cl=CL.QUORUM)
        assert len(list(rows)) == NODES * 20 * 3


def test_read_repair_at_all_fills_a_node_that_was_down(ring):
    """Rows written while node3 was down reach it through the blocking read repair of a read at
    ALL: afterwards node3 alone (the others killed, so no other replica can answer) has every
    row. (Rows not read at ALL may have reached node3 too, through hinted handoff; that is
    test_hints.py's subject.)"""
    with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 3}") as ks:
        table = f"{ks}.t"
        ring.session(1).execute(f"CREATE TABLE {table} (k int, c int, v text, "
                                "PRIMARY KEY (k, c))")
        insert = f"INSERT INTO {table} (k, c, v) VALUES (%s, %s, %s)"
        run(ring.session(2), insert, [0, 0, "before"], CL.ALL)
        ring.kill(3)
        repaired = list(range(1, 21))
        unread = list(range(100, 110))
        for key in repaired + unread:
            for c in range(4):
                cl = CL.ONE if key % 2 else CL.QUORUM
                run(ring.session(1 + key % 2), insert, [key, c, f"v{key}.{c}"], cl)
        ring.restart(3)
        for key in repaired:
            rows = run(ring.session(1), f"SELECT c, v FROM {table} WHERE k = %s", [key], CL.ALL)
            assert [(r.c, r.v) for r in rows] == [(c, f"v{key}.{c}") for c in range(4)]
        ring.kill(1, 2)
        alone = ring.session(3)
        for key in [0] + repaired:
            rows = run(alone, f"SELECT c, v FROM {table} WHERE k = %s", [key], CL.ONE)
            expected = [(0, "before")] if key == 0 else [(c, f"v{key}.{c}") for c in range(4)]
            assert [(r.c, r.v) for r in rows] == expected, f"node3 alone, key {key}"


def test_placement_matches_the_drivers_token_map(ring):
    """With RF=2 every row is on exactly the two nodes the driver's token map names. Which
    nodes hold a row is seen soundly by leaving one node alive at a time: a read at ONE through
    it can only be answered from its own storage. It returns the row if it holds it, fails with
    Unavailable if it does not count itself a replica, and returns nothing if it counts itself
    one but lacks the row (a failure)."""
    keys = list(range(60))
    with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 2}") as ks:
        ring.session(1).execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
        for key in keys:
            run(ring.session(1 + key % NODES), f"INSERT INTO {ks}.t (k, v) VALUES (%s, %s)",
                [key, key], CL.ALL)
        driver = ring.driver(1)
        driver.refresh_schema_metadata()
        hosts = {ring.host(k): k for k in range(1, NODES + 1)}
        expected = {key: {hosts[h.endpoint.address]
                          for h in driver.metadata.get_replicas(ks, int_key(key))}
                    for key in keys}
        assert all(len(replicas) == 2 for replicas in expected.values()), expected
        assert set().union(*expected.values()) == {1, 2, 3}, "the keys miss a node"
        held = {key: set() for key in keys}

        def record(k):
            s = ring.session(k)
            for key in keys:
                try:
                    rows = list(run(s, f"SELECT v FROM {ks}.t WHERE k = %s", [key], CL.ONE))
                except Unavailable as e:
                    assert (e.required_replicas, e.alive_replicas) == (1, 0), e
                    continue
                assert [r.v for r in rows] == [key], (
                    f"node{k} alone counts itself a replica of key {key} but lacks the row")
                held[key].add(k)

        # Node 1 alone, then node 2 alone, then node 3 alone (2 restarts here, and 2 more
        # after the test on a shared cluster).
        ring.kill(2, 3)
        record(1)
        ring.restart(2)
        ring.kill(1)
        record(2)
        ring.restart(3)
        ring.kill(2)
        record(3)
        wrong = {key: (held[key], expected[key]) for key in keys if held[key] != expected[key]}
        assert not wrong, f"key: (nodes holding it, driver's replicas): {wrong}"


def test_ddl_through_one_node_is_visible_at_once_through_the_others(ring):
    with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 3}") as ks:
        ring.session(1).execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
        for k in (2, 3):
            rows = ring.session(k).execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", [ks])
            assert [r.table_name for r in rows] == ["t"], f"node{k}"
        ring.session(2).execute(f"ALTER TABLE {ks}.t ADD w text")
        run(ring.session(3), f"INSERT INTO {ks}.t (k, v, w) VALUES (1, 1, 'x')", cl=CL.ALL)
        for k in (1, 3):
            rows = ring.session(k).execute(
                "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
                "AND table_name = 't'", [ks])
            assert sorted(r.column_name for r in rows) == ["k", "v", "w"], f"node{k}"
        # The schema version every node reports of itself and of its peers is one (gossip
        # carries it; the driver waited for it after each DDL).
        wait_until(lambda: len(set(schema_versions(ring).values())) == 1, SCHEMA_AGREEMENT_S,
                   "every node's system.local and system.peers agree on the schema version")
        ring.session(3).execute(f"DROP TABLE {ks}.t")
        for k in (1, 2):
            rows = ring.session(k).execute(
                "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", [ks])
            assert list(rows) == [], f"node{k} still lists the dropped table"


def test_status_change_events_for_a_killed_and_restarted_node(ring):
    listener = EventListener(ring.host(1), ring.port)
    try:
        victim = ring.host(3)
        ring.cluster.kill(3)
        ring.up.discard(3)
        ring._drop_client(3)
        assert listener.wait_for(("STATUS_CHANGE", "DOWN", victim), EVENT_TIMEOUT_S), (
            listener.events)
        ring.restart(3)
        assert listener.wait_for(("STATUS_CHANGE", "UP", victim), EVENT_TIMEOUT_S), (
            listener.events)
        changes = [e for e in listener.events if e[0] == "STATUS_CHANGE" and e[2] == victim]
        assert changes.index(("STATUS_CHANGE", "DOWN", victim)) < changes.index(
            ("STATUS_CHANGE", "UP", victim)), changes
        # Nobody else went down, and a restart is no topology change.
        assert all(e[2] == victim for e in listener.events), listener.events
        assert not [e for e in listener.events if e[0] == "TOPOLOGY_CHANGE"], listener.events
    finally:
        listener.close()


def admin_status(ring, k):
    """Node k's `helenus admin status`: the status column (UN, DN...) by address."""
    code, out, err = ring.cluster.admin(k, "status")
    assert code == 0, err
    return {line.split()[1]: line.split()[0] for line in out.splitlines()
            if line[:2] in ("UN", "DN", "UJ", "DJ", "UL", "DL", "UM", "DM")}


@pytest.mark.helenus_only
def test_a_killed_node_is_down_within_seconds_and_up_when_it_returns(ring):
    """SIGKILL: the other nodes' connections to the node close and its port refuses new ones,
    which is proof its process is gone: each marks it down at once (messaging's report to
    gossip), instead of when phi convicts it. A client sees one DOWN, `admin status` shows DN on
    both other nodes (node2 may have had nothing to send it: each node keeps a connection to
    every live peer), and it is UP again when it restarts. Helenus-only: Cassandra waits for
    phi."""
    listener = EventListener(ring.host(1), ring.port)
    try:
        victim = ring.host(3)
        killed_at = time.monotonic()
        ring.cluster.kill(3)
        ring.up.discard(3)
        ring._drop_client(3)
        assert listener.wait_for(("STATUS_CHANGE", "DOWN", victim), FAST_DOWN_S), (
            listener.events)
        event_s = time.monotonic() - killed_at
        for k in (1, 2):
            wait_until(lambda: admin_status(ring, k).get(victim) == "DN",
                       max(0.1, FAST_DOWN_S - (time.monotonic() - killed_at)),
                       f"node{k} shows {victim} DN")
        status_s = time.monotonic() - killed_at
        print(f"killed node: DOWN event after {event_s:.2f} s, DN on both peers after "
              f"{status_s:.2f} s")
        ring.restart(3)
        assert listener.wait_for(("STATUS_CHANGE", "UP", victim), EVENT_TIMEOUT_S), (
            listener.events)
        wait_until(lambda: admin_status(ring, 1).get(victim) == "UN", EVENT_TIMEOUT_S,
                   f"node1 shows {victim} UN")
        changes = [e for e in listener.events if e[0] == "STATUS_CHANGE"]
        assert changes == [("STATUS_CHANGE", "DOWN", victim), ("STATUS_CHANGE", "UP", victim)], (
            "one event per change")
    finally:
        listener.close()


@pytest.mark.helenus_only
def test_a_stopped_process_is_convicted_by_phi_and_up_when_continued(ring):
    """SIGSTOP: the process is there but silent, its sockets open, so no fast path applies:
    phi convicts it (seconds later), and it is UP again once continued."""
    listener = EventListener(ring.host(1), ring.port)
    victim = ring.host(3)
    pid = ring.cluster.pid(3)
    stopped_at = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        assert listener.wait_for(("STATUS_CHANGE", "DOWN", victim), EVENT_TIMEOUT_S), (
            listener.events)
        took_s = time.monotonic() - stopped_at
        print(f"stopped node: DOWN event after {took_s:.2f} s")
        assert took_s > PHI_CONVICTION_MIN_S, f"convicted after {took_s:.2f} s: not by phi"
    finally:
        os.kill(pid, signal.SIGCONT)
    try:
        assert listener.wait_for(("STATUS_CHANGE", "UP", victim), EVENT_TIMEOUT_S), (
            listener.events)
        changes = [e for e in listener.events if e[0] == "STATUS_CHANGE"]
        assert changes == [("STATUS_CHANGE", "DOWN", victim), ("STATUS_CHANGE", "UP", victim)], (
            changes)
    finally:
        listener.close()
    ring.wait_views()


@pytest.mark.helenus_only
def test_a_table_is_writable_at_all_as_soon_as_its_create_answers(ring):
    """Schema changes are entries of one replicated log (Cassandra's pre-5.1 schema is pushed
    and may lag, so this is Helenus-only): a write at ALL right after CREATE TABLE answered,
    without the driver's schema agreement wait, succeeds on every replica, which catch up with
    the log before answering "unknown table"."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([ring.host(1)]),
                               retry_policy=FallthroughRetryPolicy(),
                               request_timeout=REQUEST_TIMEOUT_S)
    cluster = Cluster([ring.host(1)], port=ring.port,
                      execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      max_schema_agreement_wait=0, connect_timeout=10)
    try:
        session = cluster.connect()
        with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 3}") as ks:
            for n in range(5):
                session.execute(f"CREATE TABLE {ks}.t{n} (k int PRIMARY KEY, v int)")
                run(session, f"INSERT INTO {ks}.t{n} (k, v) VALUES (1, {n})", cl=CL.ALL)
                rows = run(session, f"SELECT v FROM {ks}.t{n} WHERE k = 1", cl=CL.ALL)
                assert [r.v for r in rows] == [n]
    finally:
        cluster.shutdown()


def test_truncate_reaches_every_node_and_needs_them_all(ring):
    with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 3}") as ks:
        table = f"{ks}.t"
        ring.session(1).execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v int)")
        for key in range(50):
            run(ring.session(1), f"INSERT INTO {table} (k, v) VALUES (%s, %s)", [key, key],
                CL.ALL)
        ring.session(2).execute(f"TRUNCATE {table}")
        # At ALL every replica answers: a row left on any node would be returned.
        for k in range(1, NODES + 1):
            assert list(run(ring.session(k), f"SELECT k FROM {table}", cl=CL.ALL)) == []
            for key in (0, 17, 49):
                rows = run(ring.session(k), f"SELECT k FROM {table} WHERE k = %s", [key],
                           CL.ALL)
                assert list(rows) == [], f"key {key} through node{k}"
        run(ring.session(1), f"INSERT INTO {table} (k, v) VALUES (1, 1)", cl=CL.ALL)
        ring.kill(3)
        # Cassandra's TruncateStatement turns StorageProxy.truncateBlocking's Unavailable (ALL,
        # every node) into a TRUNCATE_ERROR carrying its message.
        with pytest.raises(TruncateError, match="Cannot achieve consistency level ALL"):
            ring.session(1).execute(f"TRUNCATE {table}")
        rows = run(ring.session(2), f"SELECT v FROM {table} WHERE k = 1", cl=CL.QUORUM)
        assert [r.v for r in rows] == [1], "a refused TRUNCATE removed data"


def test_paged_range_scan_over_rf1_returns_every_row_once_in_token_order(ring):
    keys = list(range(300))
    with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 1}") as ks:
        ring.session(1).execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
        insert = ring.session(2).prepare(f"INSERT INTO {ks}.t (k, v) VALUES (?, ?)")
        for key in keys:
            run(ring.session(2), insert, [key, key * 10], CL.ONE)
        driver = ring.driver(1)
        driver.refresh_schema_metadata()
        owners = {driver.metadata.get_replicas(ks, int_key(key))[0].endpoint.address
                  for key in keys}
        assert owners == set(ring.hosts), f"RF=1 data not spread on every node: {owners}"
        for k in range(1, NODES + 1):
            for fetch_size in (7, 100):
                rows = list(run(ring.session(k), f"SELECT k, v, token(k) AS t FROM {ks}.t",
                                cl=CL.ONE, fetch_size=fetch_size))
                assert sorted(r.k for r in rows) == keys, (
                    f"through node{k}, pages of {fetch_size}: rows missing or repeated")
                assert all(r.v == r.k * 10 for r in rows)
                tokens = [r.t for r in rows]
                assert tokens == sorted(tokens), f"through node{k}: not in token order"
            count = run(ring.session(k), f"SELECT count(*) FROM {ks}.t", cl=CL.ONE).one()[0]
            assert count == len(keys)


def schema_versions(ring):
    """{(node k, the node it is about): schema_version} from every node's system.local and
    system.peers."""
    versions = {}
    for k in range(1, NODES + 1):
        s = ring.session(k)
        versions[k, ring.host(k)] = s.execute(
            "SELECT schema_version FROM system.local").one().schema_version
        for r in s.execute("SELECT peer, schema_version FROM system.peers"):
            versions[k, str(r.peer)] = r.schema_version
    return versions


def test_peers_list_the_other_nodes(ring):
    # Each node's schema version reaches the others by gossip: the last DDL (the probe table)
    # may still be on its way. The driver waits as long for agreement after DDL.
    wait_until(lambda: len(set(schema_versions(ring).values())) == 1, SCHEMA_AGREEMENT_S,
               "every node's system.local and system.peers agree on the schema version")
    local = {}
    for k in range(1, NODES + 1):
        local[ring.host(k)] = ring.session(k).execute(
            "SELECT host_id, tokens, data_center, rack, schema_version, broadcast_address, "
            "rpc_address FROM system.local").one()
        assert str(local[ring.host(k)].broadcast_address) == ring.host(k)
        assert len(local[ring.host(k)].tokens) == 16
    assert len({row.host_id for row in local.values()}) == NODES
    for k in range(1, NODES + 1):
        me = ring.host(k)
        s = ring.session(k)
        others = sorted(set(ring.hosts) - {me})
        peers = {str(r.peer): r for r in s.execute(
            "SELECT peer, host_id, tokens, data_center, rack, rpc_address, schema_version "
            "FROM system.peers")}
        assert sorted(peers) == others, f"node{k}'s system.peers"
        peers_v2 = {str(r.peer): r for r in s.execute(
            "SELECT peer, peer_port, host_id, tokens, data_center, rack, native_address, "
            "native_port, schema_version FROM system.peers_v2")}
        assert sorted(peers_v2) == others, f"node{k}'s system.peers_v2"
        for address in others:
            theirs = local[address]
            for row in (peers[address], peers_v2[address]):
                assert row.host_id == theirs.host_id
                assert set(row.tokens) == set(theirs.tokens) and len(row.tokens) == 16
                assert (row.data_center, row.rack) == (theirs.data_center, theirs.rack)
                assert row.schema_version == local[me].schema_version, (
                    f"node{k}'s row for {address}")
            assert str(peers[address].rpc_address) == address
            assert str(peers_v2[address].native_address) == address
            assert peers_v2[address].native_port == ring.port
            assert peers_v2[address].peer_port == ring.cluster.storage_port


def test_a_node_restarts_twice(ring, request):
    """A node killed, restarted, sent a schema change, then killed and restarted again, starts
    and serves (its metadata log took an entry between the two restarts)."""
    ring.kill(3)
    ring.restart(3)
    # A schema change is an entry in the metadata log of every node, node3's included.
    with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 3}") as ks:
        ring.session(1).execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
        run(ring.session(3), f"INSERT INTO {ks}.t (k, v) VALUES (1, 1)", cl=CL.ALL)
        ring.kill(3)
        ring.restart(3)
        rows = run(ring.session(3), f"SELECT v FROM {ks}.t WHERE k = 1", cl=CL.ALL)
        assert [r.v for r in rows] == [1]


# The precise Helenus bug behind test_a_write_to_a_dead_replica_not_yet_convicted_times_out.
def test_a_write_to_a_dead_replica_not_yet_convicted_times_out(ring, request):
    """Right after a node dies, before the others convict it, a write that needs it waits for
    it and times out: WriteTimeout (received 2 of the 3 ALL needs), as Cassandra answers; never
    a server error. Unavailable is right too if the coordinator has convicted it already."""
    with keyspace(ring, "{'class': 'SimpleStrategy', 'replication_factor': 3}") as ks:
        coordinator = ring.session(1)
        coordinator.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
        ring.cluster.kill(3)
        ring.up.discard(3)
        ring._drop_client(3)
        try:
            run(coordinator, f"INSERT INTO {ks}.t (k, v) VALUES (1, 1)", cl=CL.ALL)
            pytest.fail("a write at ALL succeeded with a replica dead")
        except WriteTimeout as e:
            assert (e.consistency, e.received_responses, e.required_responses) == (
                CL.ALL, 2, 3), e
        except Unavailable as e:
            assert (e.required_replicas, e.alive_replicas) == (3, 2), e
