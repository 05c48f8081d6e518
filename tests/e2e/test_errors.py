"""Errors: bad CQL gets the error class a Cassandra user expects, bad bytes on the wire get a
protocol error or a closed connection, and in every case the server keeps serving.

Cassandra's own behaviour, which these tests follow (checked against 5.0): an unsupported protocol
version gets ERROR 0x000A (protocol error) in a frame of a version the client can read; garbage
is read as a frame with an unsupported version, so it gets the same; a frame longer than
native_transport_max_frame_size (16 MiB) gets an ERROR after its body has been read and skipped.
Cassandra keeps the connection open after these errors; a server may also close it.
"""

import socket
import struct

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException

from util import OPCODE_ERROR, OPCODE_SUPPORTED, new_session, new_table, read_frame

PROTOCOL_ERROR = 0x000A
# Cassandra 5.0's default native_transport_max_frame_size; Helenus uses the same default.
MAX_FRAME_SIZE_BYTES = 16 * 1024 * 1024


@pytest.fixture(autouse=True)
def session_still_works(cql):
    """After each test here, the shared session (which just saw an error) still answers."""
    yield
    assert cql.execute("SELECT key FROM system.local").one().key == "local"


@pytest.fixture
def table(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, t text, PRIMARY KEY (k, c)") as t:
        yield t


@pytest.fixture
def text_key_table(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k text PRIMARY KEY, v int") as t:
        yield t


def test_syntax_error(cql):
    with pytest.raises(SyntaxException):
        cql.execute("SELEC * FROM system.local")
    with pytest.raises(SyntaxException):
        cql.execute("SELECT * FROM")


def test_syntax_error_on_prepare(cql):
    with pytest.raises(SyntaxException):
        cql.prepare("INSERT INTO system.local (key VALUES (?)")


def test_unknown_keyspace(cql):
    with pytest.raises(InvalidRequest):
        cql.execute("SELECT * FROM no_such_keyspace_e2e.t")


def test_unknown_table(cql, test_keyspace):
    with pytest.raises(InvalidRequest):
        cql.execute(f"SELECT * FROM {test_keyspace}.no_such_table")
    with pytest.raises(InvalidRequest):
        cql.execute(f"INSERT INTO {test_keyspace}.no_such_table (k) VALUES (1)")


def test_unknown_column(cql, table):
    with pytest.raises(InvalidRequest):
        cql.execute(f"SELECT nope FROM {table}")
    with pytest.raises(InvalidRequest):
        cql.execute(f"INSERT INTO {table} (k, c, nope) VALUES (1, 1, 1)")
    with pytest.raises(InvalidRequest):
        cql.execute(f"SELECT * FROM {table} WHERE k = 1 AND nope = 2")


def test_wrong_value_type(cql, table):
    with pytest.raises(InvalidRequest):
        cql.execute(f"INSERT INTO {table} (k, c, v) VALUES (1, 1, 'text')")
    with pytest.raises(InvalidRequest):
        cql.execute(f"INSERT INTO {table} (k, c, t) VALUES (1, 1, 42)")
    with pytest.raises(InvalidRequest):
        cql.execute(f"SELECT * FROM {table} WHERE k = 'one'")


def test_missing_primary_key_parts(cql, table):
    with pytest.raises(InvalidRequest):  # no partition key
        cql.execute(f"INSERT INTO {table} (c, v) VALUES (1, 1)")
    with pytest.raises(InvalidRequest):  # no clustering column
        cql.execute(f"INSERT INTO {table} (k, v) VALUES (1, 1)")
    with pytest.raises(InvalidRequest):
        cql.execute(f"UPDATE {table} SET v = 1 WHERE k = 1")


def test_partial_composite_partition_key(cql, test_keyspace):
    with new_table(cql, test_keyspace, "a int, b int, v int, PRIMARY KEY ((a, b))") as t:
        with pytest.raises(InvalidRequest):
            cql.execute(f"INSERT INTO {t} (a, v) VALUES (1, 1)")
        # Restricting only part of the partition key would need filtering.
        with pytest.raises(InvalidRequest):
            cql.execute(f"SELECT * FROM {t} WHERE a = 1")


def test_null_partition_key(cql, table):
    insert = cql.prepare(f"INSERT INTO {table} (k, c, v) VALUES (?, ?, ?)")
    with pytest.raises(InvalidRequest):
        cql.execute(insert, [None, 1, 1])
    with pytest.raises(InvalidRequest):  # null clustering value
        cql.execute(insert, [1, None, 1])
    with pytest.raises(InvalidRequest):
        cql.execute(f"INSERT INTO {table} (k, c, v) VALUES (null, 1, 1)")


def test_empty_partition_key(cql, text_key_table):
    with pytest.raises(InvalidRequest):
        cql.execute(f"INSERT INTO {text_key_table} (k, v) VALUES ('', 1)")
    with pytest.raises(InvalidRequest):
        cql.execute(cql.prepare(f"INSERT INTO {text_key_table} (k, v) VALUES (?, ?)"), ["", 1])


def test_create_index_succeeds_or_fails_clearly(cql, table):
    # Cassandra supports secondary indexes; a server that does not must say so with a server
    # error (not a timeout or a dropped connection). Either way the session keeps working.
    try:
        cql.execute(f"CREATE INDEX ON {table} (v)")
    except (InvalidRequest, SyntaxException) as e:
        assert str(e)
    else:
        cql.execute(f"INSERT INTO {table} (k, c, v) VALUES (1, 1, 5)")


# --- Statements nested too deep ------------------------------------------------------------
# `1+1+...+1` is a tree as deep as it has operands, and every later walk over it recurses: with
# 1,000 operands (2 KB) it overflowed a shard's stack and aborted the whole node, even against a
# table that does not exist, and 600 took 89 s of a shard. Helenus now refuses any tree deeper
# than 64 levels as a syntax error, naming the limit, before looking at the schema: it is a
# property of the text, the same wherever the statement is sent, and a client must not retry
# it. Cassandra 5.0 answers a 1,000-operand sum with a server error (StackOverflowError) and
# takes minutes of CPU over 60 operands, so the long cases run only against Helenus; the short
# ones check on both what every case checks: an error, then the same session still answers
# (the autouse fixture above).


def long_sum(n):
    return "+".join(["1"] * n)


def too_deep(statement_kind, table, n):
    return {
        "where": f"SELECT * FROM {table} WHERE k = {long_sum(n)}",
        "values": f"INSERT INTO {table} (k, c, v) VALUES ({long_sum(n)}, 1, 1)",
        "selection": f"SELECT {' + '.join(['v'] * n)} FROM {table}",
        "update": f"UPDATE {table} SET v = {long_sum(n)} WHERE k = 1 AND c = 1",
    }[statement_kind]


@pytest.mark.parametrize("prepare", [False, True], ids=["query", "prepare"])
@pytest.mark.parametrize("statement_kind", ["where", "values", "selection", "update"])
def test_short_sums_on_a_missing_table_are_refused_for_the_table(
    cql, test_keyspace, statement_kind, prepare
):
    statement = too_deep(statement_kind, f"{test_keyspace}.no_such_table", 10)
    with pytest.raises(InvalidRequest):
        cql.prepare(statement) if prepare else cql.execute(statement)


@pytest.mark.helenus_only  # Cassandra overflows its stack (and spins first)
@pytest.mark.parametrize("prepare", [False, True], ids=["query", "prepare"])
@pytest.mark.parametrize("statement_kind", ["where", "values", "selection", "update"])
@pytest.mark.parametrize("where", ["table", "missing table", "missing keyspace"])
def test_sums_of_1000_operands_are_syntax_errors(
    cql, table, statement_kind, prepare, where
):
    target = {
        "table": table,
        "missing table": table + "_missing",
        "missing keyspace": "no_such_keyspace_e2e.t",
    }[where]
    statement = too_deep(statement_kind, target, 1000)
    with pytest.raises(SyntaxException, match=r"maximum nesting depth \(64\) exceeded"):
        cql.prepare(statement) if prepare else cql.execute(statement)


@pytest.mark.helenus_only  # Cassandra spins over 60 operands
def test_the_deepest_sums_are_served(cql, table):
    # A relation and its term take two levels, so a WHERE takes a sum of 62; VALUES 63.
    cql.execute(f"INSERT INTO {table} (k, c, v) VALUES ({long_sum(62)}, 1, {long_sum(63)})")
    rows = list(cql.execute(f"SELECT v FROM {table} WHERE k = {long_sum(62)} AND c = 1"))
    assert [r.v for r in rows] == [63]
    with pytest.raises(SyntaxException, match="maximum nesting depth"):
        cql.execute(f"SELECT v FROM {table} WHERE k = {long_sum(63)} AND c = 1")
    prepared = cql.prepare(f"SELECT {' + '.join(['v'] * 63)} FROM {table} WHERE k = ?")
    assert list(cql.execute(prepared, [62]))[0][0] == 63 * 63


# --- Raw-socket tests: hand-built frames --------------------------------------------------------
# Pre-v5 frame header (also used by v5 before STARTUP): version (1 byte, 0x80 set in responses),
# flags (1), stream id (2, signed), opcode (1), body length (4, big-endian).

OPCODE_STARTUP = 0x01
OPCODE_OPTIONS = 0x05
OPCODE_QUERY = 0x07


def frame(version, opcode, body=b"", stream=0, declared_length=None):
    length = len(body) if declared_length is None else declared_length
    return struct.pack(">BBhBi", version, 0, stream, opcode, length) + body


def string_map(entries):
    out = struct.pack(">H", len(entries))
    for key, value in entries.items():
        out += struct.pack(">H", len(key)) + key.encode() + struct.pack(">H", len(value))
        out += value.encode()
    return out


def connect(server):
    return socket.create_connection(server, timeout=5)


def error_code(body):
    return struct.unpack(">i", body[:4])[0]


@pytest.fixture
def fresh_session_works_after(server):
    """After a raw-socket test, a brand-new driver session connects and queries."""
    yield
    with new_session(*server) as s:
        assert s.execute("SELECT key FROM system.local").one().key == "local"


def test_raw_options_v4(server, fresh_session_works_after):
    with connect(server) as s:
        s.sendall(frame(0x04, OPCODE_OPTIONS))
        version, opcode, body = read_frame(s)
        assert version == 0x84
        assert opcode == OPCODE_SUPPORTED
        assert b"PROTOCOL_VERSIONS" in body and b"CQL_VERSION" in body


@pytest.mark.parametrize("version", [0x42, 0x7F])
def test_raw_unsupported_version(server, fresh_session_works_after, version):
    with connect(server) as s:
        s.sendall(frame(version, OPCODE_OPTIONS))
        response = read_frame(s)
        assert response is not None, "expected an ERROR frame before any close"
        _, opcode, body = response
        assert opcode == OPCODE_ERROR
        assert error_code(body) == PROTOCOL_ERROR


def test_raw_v3_supported_or_refused(server, fresh_session_works_after):
    # Cassandra 5.0 still speaks v3; a server that does not must refuse it with a protocol
    # error (which is how drivers learn to step down), not hang or drop the connection.
    with connect(server) as s:
        s.sendall(frame(0x03, OPCODE_OPTIONS))
        response = read_frame(s)
        assert response is not None
        _, opcode, body = response
        assert opcode == OPCODE_SUPPORTED or (
            opcode == OPCODE_ERROR and error_code(body) == PROTOCOL_ERROR
        )


@pytest.mark.parametrize("after_startup", [False, True])
def test_raw_frame_longer_than_max(server, fresh_session_works_after, after_startup):
    declared = MAX_FRAME_SIZE_BYTES + 1024 * 1024
    with connect(server) as s:
        if after_startup:
            s.sendall(frame(0x04, OPCODE_STARTUP, string_map({"CQL_VERSION": "3.0.0"})))
            _, opcode, _ = read_frame(s)
            assert opcode == 0x02  # READY
        try:
            # Cassandra answers once it has skipped the whole declared body, so send it; a
            # server may instead close as soon as it reads the header.
            s.sendall(frame(0x04, OPCODE_QUERY, b"\0" * declared, stream=2))
            response = read_frame(s)
        except (BrokenPipeError, ConnectionResetError):
            response = None
        if response is not None:
            assert response[1] == OPCODE_ERROR


@pytest.mark.parametrize(
    "garbage",
    [b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", b"\xff" * 64, bytes(range(256))],
    ids=["http", "ff", "bytes"],
)
def test_raw_garbage(server, fresh_session_works_after, garbage):
    with connect(server) as s:
        try:
            s.sendall(garbage)
            response = read_frame(s)
        except ConnectionResetError:
            response = None
        # Either an ERROR frame (Cassandra: protocol error) or the connection is closed; never
        # silence until the read times out (that raises socket.timeout and fails the test).
        if response is not None:
            assert response[1] == OPCODE_ERROR


@pytest.mark.helenus_only  # not yet checked against Cassandra, whose [string] is also a u16
def test_error_quoting_a_huge_token_is_still_an_error(cql):
    # The syntax error quotes the 70,000-character token; a [string] holds at most 64 KiB, so
    # the message is cut instead of failing the response (which once killed the connection).
    with pytest.raises(SyntaxException):
        cql.execute("SELECT * FROM system.local WHERE key = 'a' " + "x" * 70_000)


# --- Values Cassandra refuses at the protocol level -----------------------------------------
# Each gets ERROR 0x000A with Cassandra 5.0's message, and the connection goes on serving (the
# frame was read whole, so only that request fails).

OPCODE_READY = 0x02
OPCODE_RESULT = 0x08
OPCODE_REGISTER = 0x0B
OPCODE_BATCH = 0x0D
LOCAL = "SELECT key FROM system.local"
I64_MIN = -(2**63)
OUT_OF_BOUND_TIMESTAMP = (
    "Out of bound timestamp, must be in [-9223372036854775807, 9223372036854775807]"
    " (got -9223372036854775808)"
)


def long_string(text):
    data = text.encode()
    return struct.pack(">i", len(data)) + data


def short_string(text):
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def string_list(items):
    return struct.pack(">H", len(items)) + b"".join(short_string(i) for i in items)


def query_body(query, flags=0, tail=b""):
    """A v4 QUERY: the query, consistency ONE, the [byte] flags, then what they announce."""
    return long_string(query) + struct.pack(">HB", 1, flags) + tail


def error_message(body):
    (length,) = struct.unpack(">H", body[4:6])
    return body[6 : 6 + length].decode()


@pytest.fixture
def started(server):
    """A raw v4 connection after STARTUP, and a check that it still answers a query."""
    with connect(server) as s:
        s.sendall(frame(0x04, OPCODE_STARTUP, string_map({"CQL_VERSION": "3.0.0"})))
        assert read_frame(s)[1] == OPCODE_READY
        yield s
        s.sendall(frame(0x04, OPCODE_QUERY, query_body(LOCAL), stream=9))
        assert read_frame(s)[1] == OPCODE_RESULT, "the connection still answers"


def protocol_error(sock, request_frame):
    sock.sendall(request_frame)
    _, opcode, body = read_frame(sock)
    assert opcode == OPCODE_ERROR
    assert error_code(body) == PROTOCOL_ERROR, error_message(body)
    return error_message(body)


def test_raw_default_timestamp_of_i64_min_is_a_protocol_error(started):
    # Long.MIN_VALUE is Cassandra's "no timestamp": a write with it would be lost.
    query = frame(0x04, OPCODE_QUERY, query_body(LOCAL, 0x20, struct.pack(">q", I64_MIN)))
    assert protocol_error(started, query) == OUT_OF_BOUND_TIMESTAMP
    # One more is the smallest timestamp taken.
    smallest = query_body(LOCAL, 0x20, struct.pack(">q", I64_MIN + 1))
    started.sendall(frame(0x04, OPCODE_QUERY, smallest, stream=1))
    assert read_frame(started)[1] == OPCODE_RESULT


def test_raw_batch_default_timestamp_of_i64_min_is_a_protocol_error(started):
    # Refused while decoding, before the statement or its table is looked at.
    statement = b"\x00" + long_string("INSERT INTO no_such_ks.t (k) VALUES (1)") + b"\x00\x00"
    body = struct.pack(">BH", 1, 1) + statement + struct.pack(">HB", 1, 0x20)
    body += struct.pack(">q", I64_MIN)
    assert protocol_error(started, frame(0x04, OPCODE_BATCH, body)) == OUT_OF_BOUND_TIMESTAMP


@pytest.mark.parametrize("events", [["FOO"], ["SCHEMA_CHANGE", "FOO"], [""], ["SCHEMA_CHANGE "]])
def test_raw_register_of_an_unknown_event_type_is_a_protocol_error(started, events):
    message = protocol_error(started, frame(0x04, OPCODE_REGISTER, string_list(events)))
    assert message == f"Invalid value '{events[-1]}' for Type"


def test_raw_register_takes_event_types_in_any_case(started):
    events = ["schema_change", "Status_Change", "TOPOLOGY_CHANGE", "TRACE_COMPLETE"]
    started.sendall(frame(0x04, OPCODE_REGISTER, string_list(events)))
    assert read_frame(started)[1] == OPCODE_READY


def test_raw_page_size_zero_is_a_protocol_error(started):
    query = frame(0x04, OPCODE_QUERY, query_body(LOCAL, 0x04, struct.pack(">i", 0)))
    assert protocol_error(started, query) == "The page size cannot be 0"
    # A negative page size means no paging.
    unpaged = query_body(LOCAL, 0x04, struct.pack(">i", -1))
    started.sendall(frame(0x04, OPCODE_QUERY, unpaged, stream=1))
    assert read_frame(started)[1] == OPCODE_RESULT


def test_raw_frame_of_another_version_after_startup_is_a_protocol_error(started):
    # STARTUP fixed v4; a v5 QUERY (laid out for v5) is refused, answered in v4.
    v5_query = long_string(LOCAL) + struct.pack(">HI", 1, 0)
    started.sendall(frame(0x05, OPCODE_QUERY, v5_query, stream=3))
    version, opcode, body = read_frame(started)
    assert (version, opcode, error_code(body)) == (0x84, OPCODE_ERROR, PROTOCOL_ERROR)
    assert error_message(body) == (
        "Invalid message version. Got 5/v5 but previous messages on this connection had version"
        " 4/v4"
    )


def test_raw_keyspace_flag_is_read_in_v4(started):
    # Cassandra 5.0 reads the keyspace of flag 0x80 in v4 as in v5, and refuses the flag with
    # no keyspace after it.
    started.sendall(frame(0x04, OPCODE_QUERY, query_body("SELECT key FROM local", 0x80, short_string("system"))))
    assert read_frame(started)[1] == OPCODE_RESULT
    protocol_error(started, frame(0x04, OPCODE_QUERY, query_body(LOCAL, 0x80)))


def test_raw_malformed_bodies_fail_only_their_request(started):
    # A value length below -2.
    bad_value = query_body(LOCAL + " WHERE key = ?", 0x01, struct.pack(">Hi", 1, -3))
    protocol_error(started, frame(0x04, OPCODE_QUERY, bad_value))


@pytest.mark.parametrize(
    "opcode, message",
    [
        (0x30, "Unknown opcode 48"),
        (OPCODE_READY, "Wrong protocol direction (expected RESPONSE, got REQUEST) for opcode 2 (READY)"),
    ],
)
def test_raw_opcodes_a_client_may_not_send(server, fresh_session_works_after, opcode, message):
    # Cassandra then answers every later frame of the connection with the same error; Helenus
    # goes on serving it. Neither is checked here.
    with connect(server) as s:
        s.sendall(frame(0x04, OPCODE_STARTUP, string_map({"CQL_VERSION": "3.0.0"})))
        assert read_frame(s)[1] == OPCODE_READY
        assert protocol_error(s, frame(0x04, opcode)) == message
