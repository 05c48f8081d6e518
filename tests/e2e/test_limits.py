"""Limits that keep one client from freezing or exhausting a node (issue 33): the guardrails on
IN restrictions, request deadlines (ReadTimeout), the prepared statement cache's size, and the
memory of requests in flight.

Most tests start their own Helenus node with the setting under test (`helenus_only`); the
refusal of a prepared statement larger than the cache is Cassandra's and runs against it too.
Cassandra applies its IN guardrails only to logged-in users and answers the large IN queries
here with a ReadTimeout after seconds of CPU, so those are not sent to it.
"""

import socket
import struct
import threading
import time

import pytest
from cassandra import ConsistencyLevel, InvalidRequest, ReadTimeout
from cassandra.query import SimpleStatement

from util import new_cluster, new_session, new_table, read_frame, wait_until

# The driver's own timeout for the slow queries here: an answer must come well within it.
DRIVER_TIMEOUT_S = 60
MIB = 1024 * 1024


def rss_mib(pid):
    """The resident memory of process `pid` (VmRSS), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmRSS for {pid}")


def cpu_seconds(pid):
    """User plus system CPU time process `pid` has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def in_list(n):
    return ", ".join(str(i) for i in range(n))


def four_column_key_query(table, values_per_column):
    """An IN on each column of a 4-column partition key: values_per_column ** 4 partitions."""
    values = in_list(values_per_column)
    return (f"SELECT * FROM {table} WHERE a IN ({values}) AND b IN ({values}) "
            f"AND c IN ({values}) AND d IN ({values})")


def create_tables(s):
    s.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute("CREATE TABLE ks.four (a int, b int, c int, d int, v int, PRIMARY KEY ((a, b, c, d)))")
    s.execute("CREATE TABLE ks.one (k int, c int, v int, PRIMARY KEY (k, c))")
    s.execute("INSERT INTO ks.one (k, c, v) VALUES (1, 1, 1)")


# --- Statement size (conformance: Cassandra refuses the same statement) ---------------------

def test_prepared_statement_larger_than_the_cache_is_refused(cql, test_keyspace):
    # Cassandra 5.0 refuses to prepare a statement whose measured size exceeds its
    # prepared_statements_cache_size (10 MiB on a 1 GiB heap): a 6 MB literal measures about
    # 12 MB there. A 1 MB literal is fine.
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v text") as table:
        cql.prepare(f"INSERT INTO {table} (k, v) VALUES (?, '{'x' * 1_000_000}')")
        with pytest.raises(InvalidRequest, match=(
                r"Prepared statement of size \d+ bytes is larger than allowed maximum of 10 MB: "
                rf"INSERT INTO {table} \(k, v\) VALUES \(\?, 'xxx")):
            cql.prepare(f"INSERT INTO {table} (k, v) VALUES (?, '{'x' * 6_000_000}')")


# --- IN guardrails --------------------------------------------------------------------------

@pytest.mark.helenus_only
def test_in_products_over_the_default_guardrail_are_refused_at_once(node_factory):
    # Before: 160,000 keys held a shard for minutes and 100,000 values of one IN took 93 s.
    # Helenus refuses a product over in_select_cartesian_product_fail_threshold (25,000 by
    # default) before reading anything, in Cassandra's words.
    node = node_factory().start()
    with new_session(node.host, node.port) as s:
        create_tables(s)
        started = time.monotonic()
        with pytest.raises(InvalidRequest, match=(
                r"^Error from server: code=2200 \[Invalid query\] message=\"Guardrail "
                r"in_select_cartesian_product violated: Aborting query because the cartesian "
                r"product of the IN restrictions on partition key produces 160000 values, this "
                r"exceeds fail threshold of 25000\.\"")):
            s.execute(four_column_key_query("ks.four", 20), timeout=DRIVER_TIMEOUT_S)
        with pytest.raises(InvalidRequest, match="on partition key produces 100000 values"):
            s.execute(f"SELECT * FROM ks.one WHERE k IN ({in_list(100_000)})",
                      timeout=DRIVER_TIMEOUT_S)
        # On clustering columns too: each value is a read of its own.
        with pytest.raises(InvalidRequest, match="on clustering key produces 30000 values"):
            s.execute(f"SELECT * FROM ks.one WHERE k = 1 AND c IN ({in_list(30_000)})",
                      timeout=DRIVER_TIMEOUT_S)
        assert time.monotonic() - started < 15
        # At the threshold the query runs.
        rows = list(s.execute(f"SELECT v FROM ks.one WHERE k = 1 AND c IN ({in_list(25_000)})",
                              timeout=DRIVER_TIMEOUT_S))
        assert [r.v for r in rows] == [1]


@pytest.mark.helenus_only
def test_in_guardrails_follow_the_config(node_factory):
    node = node_factory(extra_config={
        "partition_keys_in_select_warn_threshold": 2,
        "partition_keys_in_select_fail_threshold": 4,
        "in_select_cartesian_product_warn_threshold": 3,
        "in_select_cartesian_product_fail_threshold": 8,
    }).start()
    with new_session(node.host, node.port) as s:
        create_tables(s)
        result = s.execute("SELECT * FROM ks.one WHERE k IN (1, 2, 3)")
        assert result.response_future.warnings == [
            "Guardrail partition_keys_in_select violated: Query with partition keys in IN "
            "clause on table one, with number of partition keys 3 exceeds warning threshold of 2."
        ]
        # Duplicates count in the product, not among the keys.
        result = s.execute("SELECT * FROM ks.one WHERE k IN (1, 1, 1, 1)")
        assert result.response_future.warnings == [
            "Guardrail in_select_cartesian_product violated: The cartesian product of the IN "
            "restrictions on partition key produces 4 values, this exceeds warning threshold of 3."
        ]
        with pytest.raises(InvalidRequest, match=(
                "Guardrail partition_keys_in_select violated: Aborting query with partition keys "
                "in IN clause on table one, number of partition keys 5 exceeds fail threshold of 4.")):
            s.execute("SELECT * FROM ks.one WHERE k IN (1, 2, 3, 4, 5)")
        with pytest.raises(InvalidRequest, match="produces 9 values, this exceeds fail threshold of 8"):
            s.execute("SELECT * FROM ks.four WHERE a IN (1, 2, 3) AND b IN (1, 2, 3) AND c = 1 AND d = 1")
        # Cassandra's guardrail covers the keys of UPDATE and DELETE too.
        with pytest.raises(InvalidRequest, match="on partition key produces 9 values"):
            s.execute("DELETE FROM ks.four WHERE a IN (1, 2, 3) AND b IN (1, 2, 3) AND c = 1 AND d = 1")
        with pytest.raises(InvalidRequest, match="on clustering key produces 9 values"):
            s.execute("DELETE FROM ks.one WHERE k = 1 AND c IN (1, 2, 3, 4, 5, 6, 7, 8, 9)")
        result = s.execute("UPDATE ks.one SET v = 2 WHERE k = 1 AND c IN (1, 2, 3, 4)")
        assert result.response_future.warnings == [
            "Guardrail in_select_cartesian_product violated: The cartesian product of the IN "
            "restrictions on clustering key produces 4 values, this exceeds warning threshold of 3."
        ]


# --- Request deadlines ----------------------------------------------------------------------

def run_in_thread(work):
    """Runs `work()` in a thread; returns (thread, outcome), outcome filled with 'result',
    'error' and 'seconds' when it ends."""
    outcome = {}

    def target():
        started = time.monotonic()
        try:
            outcome["result"] = work()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            outcome["error"] = e
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, outcome


@pytest.mark.helenus_only
def test_a_long_read_times_out_while_other_connections_are_served(node_factory):
    # With the guardrail off, two reads of 100,000,000 partitions each (two 600-byte queries):
    # before, they held both shards until the end of time, and no new connection got an
    # answer. Now each answers a ReadTimeout at read_request_timeout, with Cassandra's fields,
    # and the shards keep serving other connections meanwhile.
    node = node_factory(extra_config={
        "in_select_cartesian_product_fail_threshold": -1,
        "read_request_timeout": "2000ms",
    }).start()
    with new_session(node.host, node.port) as s:
        create_tables(s)
        query = SimpleStatement(four_column_key_query("ks.four", 100))
        long_reads = [run_in_thread(lambda: s.execute(query, timeout=DRIVER_TIMEOUT_S))
                      for _ in range(2)]
        with new_session(node.host, node.port) as other:
            # A new connection (STARTUP and the driver's schema queries) and its queries.
            slowest = 0
            while any(thread.is_alive() for thread, _ in long_reads):
                started = time.monotonic()
                assert other.execute("SELECT v FROM ks.one WHERE k = 1 AND c = 1").one().v == 1
                slowest = max(slowest, time.monotonic() - started)
        for thread, outcome in long_reads:
            thread.join(DRIVER_TIMEOUT_S)
            error = outcome.get("error")
            assert isinstance(error, ReadTimeout), outcome
            assert "Operation timed out - received only 0 responses." in str(error)
            assert (error.consistency, error.required_responses, error.received_responses,
                    error.data_retrieved) == (ConsistencyLevel.LOCAL_ONE, 1, 0, False)
            assert 2 <= outcome["seconds"] < 10, outcome
        assert slowest < 1.5, f"a query waited {slowest:.2f} s behind the long reads"


@pytest.mark.helenus_only
def test_sigterm_stops_a_node_with_long_reads_in_flight(node_factory):
    # Before, a shard computing a long read never yielded: SIGTERM could not stop the node.
    # Now shutdown waits for in-flight requests at most its drain timeout (10 s), then
    # cancels them at their next yield.
    node = node_factory(extra_config={
        "in_select_cartesian_product_fail_threshold": -1,
        "read_request_timeout": "60s",
    }).start()
    cluster = new_cluster(node.host, node.port)
    try:
        s = cluster.connect()
        create_tables(s)
        pid = node.process.pid
        cpu_before = cpu_seconds(pid)
        query = SimpleStatement(four_column_key_query("ks.four", 100))
        for _ in range(2):
            run_in_thread(lambda: s.execute(query, timeout=DRIVER_TIMEOUT_S))
        wait_until(lambda: cpu_seconds(pid) - cpu_before > 1, 30, "the long reads run")
        started = time.monotonic()
        node.stop(timeout_s=30)
        assert time.monotonic() - started < 20
    finally:
        cluster.shutdown()


# --- Memory held by clients -----------------------------------------------------------------

def string_map(entries):
    out = struct.pack(">H", len(entries))
    for key, value in entries.items():
        out += struct.pack(">H", len(key)) + key.encode() + struct.pack(">H", len(value)) + value.encode()
    return out


def frame_v4(opcode, body, stream=0, length=None):
    return struct.pack(">BBhBi", 4, 0, stream, opcode, len(body) if length is None else length) + body


def started_connection(node):
    """A raw v4 connection after STARTUP/READY."""
    s = socket.create_connection((node.host, node.port), timeout=10)
    s.sendall(frame_v4(0x01, string_map({"CQL_VERSION": "3.0.0"})))
    answer = read_frame(s)
    assert answer is not None and answer[1] == 0x02, answer  # READY
    return s


# Bytes of requests in flight these tests allow (per client address, and node-wide).
IN_FLIGHT_CONFIG = {
    "native_transport_max_request_data_in_flight_per_ip": "32MiB",
    "native_transport_max_request_data_in_flight": "64MiB",
}


@pytest.mark.helenus_only
def test_half_read_large_frames_are_bounded_by_the_bytes_in_flight(node_factory):
    # 40 connections each announce a 16 MiB QUERY and send half of it. Before: every
    # connection buffered its half (RSS +450 MiB). Now a connection reads a large frame only
    # once it holds the frame's bytes from the address's budget; the others wait unread.
    node = node_factory(extra_config=IN_FLIGHT_CONFIG).start()
    pid = node.process.pid
    connections = [started_connection(node) for _ in range(40)]
    try:
        before = rss_mib(pid)
        length = 16 * MIB - 100

        def send_half(s):
            s.settimeout(2)  # a connection the server does not read from stalls: move on
            try:
                s.sendall(frame_v4(0x07, b"\0" * (length // 2), stream=1, length=length))
            except socket.timeout:
                pass

        senders = [threading.Thread(target=send_half, args=(s,)) for s in connections]
        for t in senders:
            t.start()
        for t in senders:
            t.join(30)
        grown = rss_mib(pid) - before
        assert grown < 150, f"RSS grew by {grown} MiB"
        # Other clients (and new connections) are still served, one small request at a time.
        with new_session(node.host, node.port) as s:
            assert s.execute("SELECT release_version FROM system.local").one() is not None
    finally:
        for s in connections:
            s.close()
    # With those connections gone, their bytes are back: a 10 MB request goes through.
    with new_session(node.host, node.port) as s:
        create_tables(s)
        s.execute("CREATE TABLE ks.blobs (k int PRIMARY KEY, v blob)")
        insert = s.prepare("INSERT INTO ks.blobs (k, v) VALUES (1, ?)")
        s.execute(insert, [b"x" * 10_000_000])
        assert len(s.execute("SELECT v FROM ks.blobs WHERE k = 1").one().v) == 10_000_000


@pytest.mark.helenus_only
def test_idle_connections_give_back_their_large_buffers(node_factory):
    # Each of 40 connections sends one complete 15 MiB request (an EXECUTE of a statement
    # never prepared, with a 15 MiB value: answered at once, UNPREPARED), then stays open and
    # idle. Before: each kept its read buffer's high-water mark (RSS +700 MiB).
    node = node_factory(extra_config=IN_FLIGHT_CONFIG).start()
    pid = node.process.pid
    connections = [started_connection(node) for _ in range(40)]
    try:
        before = rss_mib(pid)
        value = b"\0" * (15 * MIB)
        body = (struct.pack(">H", 16) + b"\1" * 16  # the statement id
                + struct.pack(">HB", 1, 0x01)  # consistency ONE, flags: values
                + struct.pack(">Hi", 1, len(value)) + value)

        def query(s):
            s.settimeout(60)
            s.sendall(frame_v4(0x0A, body, stream=1))
            answer = read_frame(s)
            assert answer is not None and answer[1] == 0x00, answer  # ERROR
            assert struct.unpack(">i", answer[2][:4])[0] == 0x2500  # UNPREPARED

        senders = [threading.Thread(target=query, args=(s,)) for s in connections]
        for t in senders:
            t.start()
        for t in senders:
            t.join(120)
        grown = rss_mib(pid) - before
        assert grown < 150, f"RSS grew by {grown} MiB"
    finally:
        for s in connections:
            s.close()


@pytest.mark.helenus_only
def test_prepared_statements_with_large_literals_stay_within_the_cache(node_factory):
    # 40 PREPAREs of INSERTs with 4-8 MB literals. Before: every statement stayed cached
    # (RSS +285 MiB for 40; 1.8 GiB for 350). Now the cache holds 10 MiB, evicting the least
    # recently used, and statements over it are refused.
    node = node_factory().start()
    pid = node.process.pid
    with new_session(node.host, node.port) as s:
        create_tables(s)
        s.execute("CREATE TABLE ks.texts (k int PRIMARY KEY, v text)")
        before = rss_mib(pid)
        prepared = refused = 0
        for i in range(40):
            literal = str(i) + "x" * (4_000_000 + i * 100_000)
            try:
                s.prepare(f"INSERT INTO ks.texts (k, v) VALUES (?, '{literal}')")
                prepared += 1
            except InvalidRequest as e:
                assert "is larger than allowed maximum of 10 MB" in str(e)
                refused += 1
        assert prepared > 0 and refused > 0
        grown = rss_mib(pid) - before
        assert grown < 150, f"RSS grew by {grown} MiB"
        # The last statement prepared still executes (the driver re-prepares an evicted one).
        last = s.prepare("INSERT INTO ks.texts (k, v) VALUES (?, 'small')")
        s.execute(last, [1])
        assert s.execute("SELECT v FROM ks.texts WHERE k = 1").one().v == "small"
