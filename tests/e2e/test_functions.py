"""Functions and other expressions in selections: Cassandra 5.0's native scalar functions (time
and timeuuid functions, blob conversions, token), CAST, constants with type hints, bind markers,
UDT field selection and map/set element and slice selection — with the result column names and
types Cassandra gives them, and the errors it gives for calls that do not type-check."""

import datetime
import struct
import time
import uuid
from decimal import Decimal

import pytest
from cassandra import FunctionFailure, InvalidRequest
from cassandra.metadata import Murmur3Token
from cassandra.util import Date, Time

from util import new_table, new_type

TU = uuid.UUID("50554d6e-29bb-11e5-b345-feff819cdc9f")  # 2015-07-14 00:00:18.805 UTC
TS_MS = 1_577_934_245_678  # 2020-01-02 03:04:05.678 UTC


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    """Row (1, 1) has a value of every native type; row (1, 2) has only its key."""
    schema = (
        "k int, c int, v int, b bigint, f float, d double, dec decimal, vi varint, ti tinyint, "
        "si smallint, txt text, a ascii, ts timestamp, tu timeuuid, dt date, tm time, bl blob, "
        "ip inet, bo boolean, u uuid, du duration, PRIMARY KEY (k, c)"
    )
    with new_table(cql, test_keyspace, schema) as name:
        cql.execute(
            f"INSERT INTO {name} (k, c, v, b, f, d, dec, vi, ti, si, txt, a, ts, tu, dt, tm, bl, "
            "ip, bo, u, du) VALUES (1, 1, 1, 10, 1.5, 2.5, 1.1, 100, 1, 2, 'txt', 'asc', "
            f"'2020-01-02 03:04:05.678+0000', {TU}, '2020-01-02', '01:02:03.456', 0x0a0b, "
            "'10.0.0.1', true, 7f803993-b81f-4bff-8462-20c322173650, 1d)"
        )
        cql.execute(f"INSERT INTO {name} (k, c) VALUES (1, 2)")
        yield name


@pytest.fixture(scope="module")
def udt(cql, test_keyspace):
    with new_type(cql, test_keyspace, "a int, b text") as name:
        yield name.split(".")[1]


@pytest.fixture(scope="module")
def coll(cql, test_keyspace, udt):
    """Row 1 has every collection and UDT column set; row 2 has none."""
    schema = (
        f"k int PRIMARY KEY, m map<text, int>, s set<int>, l list<int>, fm frozen<map<int, text>>, "
        f"u {udt}, fu frozen<{udt}>, tup tuple<int, text>"
    )
    with new_table(cql, test_keyspace, schema) as name:
        cql.execute(
            f"INSERT INTO {name} (k, m, s, l, fm, u, fu, tup) VALUES (1, {{'a': 1, 'b': 2, 'c': 3}}, "
            "{1, 2, 3, 5}, [10, 20, 30], {1: 'x', 2: 'y'}, {a: 1, b: 'one'}, {a: 2, b: 'two'}, "
            "(7, 'seven'))"
        )
        cql.execute(f"INSERT INTO {name} (k) VALUES (2)")
        yield name


def select(cql, what, table, where="WHERE k = 1 AND c = 1"):
    """Runs `SELECT what FROM table where`; returns (column names, CQL types, first row)."""
    rs = cql.execute(f"SELECT {what} FROM {table} {where}")
    types = [ty.cql_parameterized_type() for ty in rs.column_types]
    return rs.column_names, types, rs.one()


def invalid(cql, what, table, match, where="WHERE k = 1 AND c = 1"):
    with pytest.raises(InvalidRequest, match=match):
        cql.execute(f"SELECT {what} FROM {table} {where}")


# --- time and uuid functions -------------------------------------------------------------------


def test_current_time_functions(cql, t):
    # Each has a `system.` name, its own type, and a value of "now" on the server's clock.
    before = time.time()
    names, types, row = select(
        cql, "now(), uuid(), currentTimestamp(), currentDate(), currentTime(), currentTimeUUID()", t
    )
    after = time.time()
    assert names == ["system.now()", "system.uuid()", "system.currenttimestamp()",
                     "system.currentdate()", "system.currenttime()", "system.currenttimeuuid()"]
    assert types == ["timeuuid", "uuid", "timestamp", "date", "time", "timeuuid"]
    now_uuid, random_uuid, ts, date, tm, tu = row
    assert now_uuid.version == 1 and tu.version == 1 and random_uuid.version == 4
    epoch = datetime.datetime(1970, 1, 1)
    assert before - 60 <= (ts - epoch).total_seconds() <= after + 60
    assert abs(date.days_from_epoch - int(before // 86400)) <= 1
    assert isinstance(tm, Time)


def test_function_names_are_case_insensitive_with_optional_system_prefix(cql, t):
    names, _, row = select(cql, "NOW(), system.now(), System.Now()", t)
    assert names == ["system.now()"] * 3
    assert all(isinstance(v, uuid.UUID) for v in row)


def test_to_date_to_timestamp_to_unix_timestamp(cql, t):
    names, types, row = select(
        cql, "toDate(ts), toDate(tu), toTimestamp(tu), toTimestamp(dt), toUnixTimestamp(ts), "
        "toUnixTimestamp(tu), toUnixTimestamp(dt)", t)
    assert names == ["system.todate(ts)", "system.todate(tu)", "system.totimestamp(tu)",
                     "system.totimestamp(dt)", "system.tounixtimestamp(ts)",
                     "system.tounixtimestamp(tu)", "system.tounixtimestamp(dt)"]
    assert types == ["date", "date", "timestamp", "timestamp", "bigint", "bigint", "bigint"]
    assert row == (
        Date(datetime.date(2020, 1, 2)), Date(datetime.date(2015, 7, 14)),
        datetime.datetime(2015, 7, 14, 0, 0, 18, 805000), datetime.datetime(2020, 1, 2),
        TS_MS, 1_436_832_018_805, 1_577_923_200_000,
    )


def test_snake_case_aliases_of_5_0(cql, t):
    names, _, row = select(
        cql, "to_date(ts), to_timestamp(tu), to_unix_timestamp(ts), int_as_blob(v), "
        "blob_as_int(int_as_blob(v))", t)
    assert names == ["system.to_date(ts)", "system.to_timestamp(tu)",
                     "system.to_unix_timestamp(ts)", "system.int_as_blob(v)",
                     "system.blob_as_int(system.int_as_blob(v))"]
    assert row == (Date(datetime.date(2020, 1, 2)), datetime.datetime(2015, 7, 14, 0, 0, 18, 805000),
                   TS_MS, b"\x00\x00\x00\x01", 1)


def test_functions_of_null_are_null(cql, t):
    _, _, row = select(cql, "toDate(ts), toTimestamp(tu), toUnixTimestamp(dt), minTimeuuid(ts), "
                       "intAsBlob(v), blobAsInt(bl)", t, "WHERE k = 1 AND c = 2")
    assert row == (None,) * 6


def test_min_and_max_timeuuid(cql, t):
    # The smallest and largest timeuuids of the millisecond, with Cassandra's fixed low bits.
    names, types, row = select(cql, "minTimeuuid(ts), maxTimeuuid(ts)", t)
    assert names == ["system.mintimeuuid(ts)", "system.maxtimeuuid(ts)"]
    assert types == ["timeuuid", "timeuuid"]
    assert row == (uuid.UUID("896e34e0-2d0c-11ea-8080-808080808080"),
                   uuid.UUID("896e5bef-2d0c-11ea-7f7f-7f7f7f7f7f7f"))
    # A string literal is typed by the parameter (timestamp); its text names the column.
    names, _, row = select(cql, "minTimeuuid('2020-01-01 00:00:00+0000')", t)
    assert names == ["system.mintimeuuid('2020-01-01 00:00:00+0000')"]
    assert row[0] == uuid.UUID("a747c000-2c29-11ea-8080-808080808080")


def test_nested_functions(cql, t):
    names, _, row = select(cql, "toUnixTimestamp(minTimeuuid(ts)), toTimestamp(now())", t)
    assert names[0] == "system.tounixtimestamp(system.mintimeuuid(ts))"
    assert names[1] == "system.totimestamp(system.now())"
    assert row[0] == TS_MS


def test_removed_and_unknown_functions(cql, t):
    # dateOf() and unixTimestampOf() were removed in Cassandra 5.0.
    invalid(cql, "dateOf(tu)", t, "Unknown function 'dateof'")
    invalid(cql, "unixTimestampOf(tu)", t, "Unknown function 'unixtimestampof'")
    invalid(cql, "nosuchfunction(v)", t, "Unknown function 'nosuchfunction'")
    invalid(cql, "system.nosuchfunction(v)", t, "Unknown function 'system.nosuchfunction'")
    invalid(cql, "ks.now()", t, "Unknown function 'ks.now'")
    # There is no blobAsBlob.
    invalid(cql, "blobAsBlob(bl)", t, "Unknown function 'blobasblob'")


def test_wrong_number_of_arguments(cql, t):
    invalid(cql, "now(1)", t, "Invalid number of arguments in call to function system.now: "
            "0 required but 1 provided")
    invalid(cql, "intAsBlob(v, v)", t, "system.intasblob: 1 required but 2 provided")
    invalid(cql, "intAsBlob()", t, "system.intasblob: 1 required but 0 provided")


# --- overload resolution and argument types ----------------------------------------------------


def test_argument_of_wrong_type(cql, t):
    invalid(cql, "intAsBlob(b)", t, "Type error: b cannot be passed as argument 0 of function "
            "system.intasblob of type int")
    invalid(cql, "minTimeuuid(tu)", t, "Type error: tu cannot be passed as argument 0")
    invalid(cql, "textAsBlob(1)", t, "Type error: 1 cannot be passed as argument 0")
    invalid(cql, "asciiAsBlob(txt)", t, "Type error: txt cannot be passed as argument 0")


def test_value_compatible_arguments(cql, t):
    # Cassandra accepts a value wherever its serialisation is valid for the parameter: text
    # takes ascii, uuid takes timeuuid, bigint and timestamp take each other, varint takes int
    # and bigint, blob takes anything.
    _, _, row = select(cql, "textAsBlob(a), uuidAsBlob(tu), bigintAsBlob(ts), timestampAsBlob(b), "
                       "varintAsBlob(v), varintAsBlob(b), blobAsText(txt), blobAsInt(v), "
                       "minTimeuuid(b)", t)
    assert row[:8] == (b"asc", TU.bytes, struct.pack(">q", TS_MS), struct.pack(">q", 10),
                       struct.pack(">i", 1), struct.pack(">q", 10), "txt", 1)
    assert row[8] == uuid.UUID("1382c6a0-1dd2-11b2-8080-808080808080")
    invalid(cql, "timeuuidAsBlob(u)", t, "Type error: u cannot be passed")


def test_overloads_pick_the_matching_signature(cql, t):
    # toDate has (timeuuid) and (timestamp) signatures: a string literal only fits timestamp,
    # a uuid literal only timeuuid, a bigint column is weakly assignable to timestamp.
    _, types, row = select(cql, f"toDate('2020-01-01'), toDate({TU}), toDate(b)", t)
    assert types == ["date"] * 3
    assert row == (Date(datetime.date(2020, 1, 1)), Date(datetime.date(2015, 7, 14)),
                   Date(datetime.date(1970, 1, 1)))
    # An integer literal fits both date and timestamp.
    invalid(cql, "toUnixTimestamp(1)", t, "Ambiguous call to function tounixtimestamp")
    invalid(cql, "toDate(dt)", t, "Invalid call to function todate, none of its type "
            "signatures match")
    invalid(cql, "toTimestamp(ts)", t, "none of its type signatures match")


# --- blob conversions --------------------------------------------------------------------------

BLOB_CASES = [
    # (column, type, expected bytes)
    ("v", "int", struct.pack(">i", 1)),
    ("b", "bigint", struct.pack(">q", 10)),
    ("f", "float", struct.pack(">f", 1.5)),
    ("d", "double", struct.pack(">d", 2.5)),
    ("ti", "tinyint", b"\x01"),
    ("si", "smallint", b"\x00\x02"),
    ("txt", "text", b"txt"),
    ("txt", "varchar", b"txt"),
    ("a", "ascii", b"asc"),
    ("ts", "timestamp", struct.pack(">q", TS_MS)),
    ("tu", "timeuuid", TU.bytes),
    ("dt", "date", struct.pack(">I", 2**31 + 18263)),
    ("tm", "time", struct.pack(">q", 3_723_456_000_000)),
    ("ip", "inet", bytes([10, 0, 0, 1])),
    ("bo", "boolean", b"\x01"),
    ("u", "uuid", uuid.UUID("7f803993-b81f-4bff-8462-20c322173650").bytes),
    ("vi", "varint", b"\x64"),
    ("dec", "decimal", b"\x00\x00\x00\x01\x0b"),
    ("du", "duration", b"\x00\x02\x00"),
]


@pytest.mark.parametrize("column,ty,expected", BLOB_CASES, ids=[c[1] for c in BLOB_CASES])
def test_type_as_blob_and_back(cql, t, column, ty, expected):
    # <type>AsBlob gives the value's serialisation; blobAs<type> reads it back.
    names, types, row = select(cql, f"{ty}AsBlob({column}), blobAs{ty}({ty}AsBlob({column})), "
                               f"{column}", t)
    assert names[0] == f"system.{ty}asblob({column})"
    assert types[0] == "blob"
    assert row[0] == expected
    if ty == "timeuuid":
        # Cassandra 5.0 types blobAsTimeuuid() as its LegacyTimeUUIDType marshal class, a
        # custom type drivers return as raw bytes.
        assert types[1] == "'org.apache.cassandra.db.marshal.LegacyTimeUUIDType'"
        assert row[1] == expected
    else:
        assert row[1] == row[2]


def test_blob_as_type_of_literals(cql, t):
    names, types, row = select(cql, "blobAsInt(0x00000005), blobAsBoolean(0x00), blobAsInt(0x)", t)
    assert names == ["system.blobasint(0x00000005)", "system.blobasboolean(0x00)",
                     "system.blobasint(0x)"]
    assert types == ["int", "boolean", "int"]
    assert row == (5, False, None)  # the empty value of an int reads as null


def test_blob_as_type_validates_the_bytes(cql, t):
    invalid(cql, "blobAsInt(0x0001)", t, "In call to function system.blobasint, value 0x0001 is "
            "not a valid binary representation for type int")
    invalid(cql, "blobAsBigint(intAsBlob(v))", t, "value 0x00000001 is not a valid binary "
            "representation for type bigint")


# --- token -------------------------------------------------------------------------------------


def test_token_selector(cql, t):
    names, types, row = select(cql, "token(k), token(k) AS tk, token(1), token(c)", t)
    assert names == ["system.token(k)", "tk", "system.token(1)", "system.token(c)"]
    assert types == ["bigint"] * 4
    expected = Murmur3Token.from_key(struct.pack(">i", 1)).value
    # token() hashes any values of the partition key's types, not only the key columns.
    assert row == (expected,) * 4


def test_token_of_composite_partition_key(cql, test_keyspace):
    with new_table(cql, test_keyspace, "a int, b text, c int, PRIMARY KEY ((a, b), c)") as table:
        cql.execute(f"INSERT INTO {table} (a, b, c) VALUES (1, 'x', 0)")
        names, _, row = select(cql, "token(a, b)", table, "")
        assert names == ["system.token(a, b)"]
        component = lambda raw: struct.pack(">H", len(raw)) + raw + b"\x00"  # noqa: E731
        key = component(struct.pack(">i", 1)) + component(b"x")
        assert row[0] == Murmur3Token.from_key(key).value
        invalid(cql, "token(a)", table, "2 required but 1 provided", "")


def test_writetime_and_ttl_selectors(cql, t):
    names, types, row = select(cql, "writetime(v), ttl(v), writetime(v) AS w", t)
    assert names == ["writetime(v)", "ttl(v)", "w"]
    assert types == ["bigint", "int", "bigint"]
    assert row[0] == row[2] and row[0] > 0 and row[1] is None
    invalid(cql, "writetime(k)", t, "Cannot use selection function writetime on PRIMARY KEY part k")
    invalid(cql, "ttl(c)", t, "Cannot use selection function ttl on PRIMARY KEY part c")


def test_writetime_of_elements_fields_and_slices(cql, test_keyspace, udt):
    # Cassandra 5.0: each element of a non-frozen map or set and each field of a non-frozen UDT
    # is a cell with its own write time; of a frozen value, the one cell's (when the part is
    # not null).
    schema = (f"k int PRIMARY KEY, m map<int, int>, s set<int>, u {udt}, fm frozen<map<int, int>>, "
              "l list<int>")
    with new_table(cql, test_keyspace, schema) as table:
        cql.execute(f"INSERT INTO {table} (k, m, s, u, fm) VALUES (1, {{4: 4}}, {{3}}, {{a: 1}}, "
                    "{1: 1}) USING TIMESTAMP 10")
        cql.execute(f"UPDATE {table} USING TIMESTAMP 20 SET m = m + {{5: 5}}, u.b = 'x' "
                    "WHERE k = 1")
        names, types, row = select(
            cql, "writetime(m[4]), writetime(m[5]), writetime(m[9]), writetime(s[3]), "
            "writetime(u.a), writetime(u.b), writetime(fm[1]), writetime(fm[9]), "
            "writetime(m[4..5]), writetime(m), writetime(u)", table, "WHERE k = 1")
        assert names[:2] == ["writetime(m[4])", "writetime(m[5])"]
        assert names[8:] == ["writetime(m[4..5])", "writetime(m)", "writetime(u)"]
        assert types == ["bigint"] * 8 + ["list<bigint>"] * 3
        assert row == (10, 20, None, 10, 10, 20, 10, None, [10, 20], [10, 20], [10, 20])
        with pytest.raises(InvalidRequest, match="Element selection is only allowed on sets and "
                           "maps, but l is a list"):
            cql.execute(f"SELECT writetime(l[0]) FROM {table}")


def test_maxwritetime_and_aggregated_writetimes(cql, test_keyspace):
    schema = "k int, c int, v int, l list<int>, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as table:
        cql.execute(f"INSERT INTO {table} (k, c, v, l) VALUES (1, 1, 1, [1]) USING TIMESTAMP 10")
        cql.execute(f"UPDATE {table} USING TIMESTAMP 30 SET l = l + [2] WHERE k = 1 AND c = 1")
        cql.execute(f"INSERT INTO {table} (k, c, v) VALUES (1, 2, 2) USING TIMESTAMP 20")
        names, types, row = select(cql, "maxwritetime(v), maxwritetime(l)", table,
                                   "WHERE k = 1 AND c = 1")
        assert names == ["maxwritetime(v)", "maxwritetime(l)"]
        assert types == ["bigint", "bigint"]
        assert row == (10, 30)
        names, _, row = select(cql, "max(writetime(v)), min(writetime(v))", table, "WHERE k = 1")
        assert names == ["system.max(writetime(v))", "system.min(writetime(v))"]
        assert row == (20, 10)


# --- CAST --------------------------------------------------------------------------------------


def test_cast_between_numeric_types(cql, t):
    names, types, row = select(cql, "CAST(v AS bigint), CAST(v AS double), CAST(v AS decimal), "
                               "CAST(v AS varint), CAST(v AS tinyint), CAST(d AS int), "
                               "CAST(dec AS double), CAST(f AS decimal), CAST(vi AS smallint)", t)
    assert names == ["cast(v as bigint)", "cast(v as double)", "cast(v as decimal)",
                     "cast(v as varint)", "cast(v as tinyint)", "cast(d as int)",
                     "cast(dec as double)", "cast(f as decimal)", "cast(vi as smallint)"]
    assert types == ["bigint", "double", "decimal", "varint", "tinyint", "int", "double",
                     "decimal", "smallint"]
    assert row == (1, 1.0, Decimal("1"), 1, 1, 2, 1.1, Decimal("1.5"), 100)


def test_cast_narrows_as_java_does(cql, test_keyspace):
    # Casts use Java's Number conversions: doubles saturate to int then keep the low bits, big
    # decimals keep the low 64 bits of their integer part.
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, d double, dec decimal") as table:
        cql.execute(f"INSERT INTO {table} (k, d, dec) VALUES (1, 1e10, 12345678901234567890.5)")
        _, _, row = select(cql, "CAST(d AS tinyint), CAST(d AS int), CAST(d AS bigint), "
                           "CAST(dec AS varint), CAST(dec AS bigint)", table, "WHERE k = 1")
        assert row == (-1, 2**31 - 1, 10**10, -6101065172474983726, -6101065172474983726)


def test_cast_to_text(cql, t):
    # CAST AS text prints values as Cassandra does: Java's number formatting, ISO-8601 times.
    _, types, row = select(cql, "CAST(v AS text), CAST(d AS text), CAST(f AS ascii), "
                           "CAST(dec AS text), CAST(ts AS text), CAST(dt AS text), "
                           "CAST(tm AS text), CAST(tu AS text), CAST(bo AS text), "
                           "CAST(ip AS text), CAST(a AS text)", t)
    assert types == ["varchar"] * 2 + ["ascii"] + ["varchar"] * 8
    assert row == ("1", "2.5", "1.5", "1.1", "2020-01-02T03:04:05.678Z", "2020-01-02",
                   "01:02:03.456000000", str(TU), "true", "10.0.0.1", "asc")


def test_cast_of_numbers_to_text_follows_java(cql, test_keyspace):
    schema = "k int PRIMARY KEY, d double, f float, dec decimal, ip inet"
    with new_table(cql, test_keyspace, schema) as table:
        cql.execute(f"INSERT INTO {table} (k, d, f, dec, ip) VALUES "
                    "(1, 1e10, 0.1, 1e3, '::1')")
        cql.execute(f"INSERT INTO {table} (k, d, f, dec) VALUES (2, 0.0001, 100, -1.5e-7)")
        cql.execute(f"INSERT INTO {table} (k, d, f, dec) VALUES (3, 123456789.123, -0.0, 0.00001)")
        rows = cql.execute(f"SELECT k, CAST(d AS text), CAST(f AS text), CAST(dec AS text), "
                           f"CAST(ip AS text) FROM {table}")
        assert sorted(rows) == [
            (1, "1.0E10", "0.1", "1E+3", "0:0:0:0:0:0:0:1"),
            (2, "1.0E-4", "100.0", "-1.5E-7", None),
            (3, "1.23456789123E8", "-0.0", "0.00001", None),
        ]


def test_cast_between_time_types(cql, t):
    _, types, row = select(cql, "CAST(ts AS date), CAST(tu AS timestamp), CAST(tu AS date), "
                           "CAST(dt AS timestamp)", t)
    assert types == ["date", "timestamp", "date", "timestamp"]
    assert row == (Date(datetime.date(2020, 1, 2)), datetime.datetime(2015, 7, 14, 0, 0, 18, 805000),
                   Date(datetime.date(2015, 7, 14)), datetime.datetime(2020, 1, 2))


def test_cast_to_own_type_is_no_cast(cql, t):
    names, types, row = select(cql, "CAST(v AS int), CAST(txt AS text), CAST(v AS text) AS s", t)
    assert names == ["v", "txt", "s"]
    assert types == ["int", "varchar", "varchar"]
    assert row == (1, "txt", "1")


def test_cast_errors(cql, t):
    invalid(cql, "CAST(v AS blob)", t, "v cannot be cast to blob")
    invalid(cql, "CAST(txt AS int)", t, "Invalid call to function system.cast_as_int, none of its "
            "type signatures match")
    invalid(cql, "CAST(intAsBlob(v) AS text)", t, "none of its type signatures match")
    # A timestamp is value-compatible with both bigint and varint.
    invalid(cql, "CAST(ts AS int)", t, "Ambiguous call to function system.cast_as_int")
    invalid(cql, "CAST(1 AS int)", t, "Cannot infer type for term 1 in selection clause")


def test_cast_of_functions_and_nulls(cql, t):
    names, _, row = select(cql, "CAST(token(k) AS text), CAST(CAST(v AS bigint) AS text), "
                           "CAST(v AS text)", t, "WHERE k = 1 AND c = 2")
    assert names == ["cast(system.token(k) as text)", "cast(cast(v as bigint) as text)",
                     "cast(v as text)"]
    assert row == (str(Murmur3Token.from_key(struct.pack(">i", 1)).value), None, None)


# --- constants and bind markers ----------------------------------------------------------------


def test_constants_need_a_type(cql, t):
    invalid(cql, "1", t, "Cannot infer type for term 1 in selection clause")
    invalid(cql, "'a'", t, "Cannot infer type for term 'a' in selection clause")
    invalid(cql, "[1, 2]", t, r"Cannot infer type for term \[1, 2\] in selection clause")
    names, types, row = select(cql, "(int)1, (bigint)1, (text)'a', (blob)0x01, "
                               "(timestamp)'2020-01-01', (list<int>)[1, 2]", t)
    assert names == ["(int)1", "(bigint)1", "(text)'a'", "(blob)0x01", "(timestamp)'2020-01-01'",
                     "(list<int>)[1, 2]"]
    assert types == ["int", "bigint", "varchar", "blob", "timestamp", "list<int>"]
    assert row == (1, 1, "a", b"\x01", datetime.datetime(2020, 1, 1), [1, 2])


def test_type_hints_on_columns(cql, t):
    names, types, row = select(cql, "(int)v, (text)a, textAsBlob((text)a)", t)
    assert names == ["(int)v", "(text)a", "system.textasblob((text)a)"]
    assert types == ["int", "varchar", "blob"]
    assert row == (1, "asc", b"asc")
    invalid(cql, "(bigint)v", t, r"Cannot assign value \(bigint\)v to \(bigint\)v of type bigint")


def test_bind_markers_in_selection(cql, t):
    # A marker takes the type of its parameter and is named [selection] (or its own name).
    prepared = cql.prepare(f"SELECT blobAsInt(?), intAsBlob(:x), (int)?, k FROM {t} "
                           "WHERE k = ? AND c = 1")
    assert [(c[2], c[3].cql_parameterized_type()) for c in prepared.column_metadata] == [
        ("[selection]", "blob"), ("x", "int"), ("[selection]", "int"), ("k", "int")]
    assert [c[2] for c in prepared.result_metadata] == [
        "system.blobasint(?)", "system.intasblob(?)", "(int)?", "k"]
    row = cql.execute(prepared, [struct.pack(">i", 5), 3, 7, 1]).one()
    assert row == (5, struct.pack(">i", 3), 7, 1)
    # Each execution binds its own values into the selection.
    row = cql.execute(prepared, [struct.pack(">i", 6), 4, 8, 1]).one()
    assert row == (6, struct.pack(">i", 4), 8, 1)
    with pytest.raises(InvalidRequest, match="Cannot infer type for term \\? in selection clause"):
        cql.prepare(f"SELECT ? FROM {t}")


# --- UDT fields, collection elements and slices ------------------------------------------------


def test_udt_field_selection(cql, coll):
    names, types, row = select(cql, "u.a, u.b, fu.a, fu.b", coll, "WHERE k = 1")
    assert names == ["u.a", "u.b", "fu.a", "fu.b"]
    assert types == ["int", "varchar", "int", "varchar"]
    assert row == (1, "one", 2, "two")
    _, _, row = select(cql, "u.a, fu.b", coll, "WHERE k = 2")
    assert row == (None, None)


def test_udt_field_selection_errors(cql, coll, udt):
    invalid(cql, "u.z", coll, f"u of type {udt} has no field z", "WHERE k = 1")
    invalid(cql, "k.a", coll, "Invalid field selection: k of type int is not a user type",
            "WHERE k = 1")


def test_map_and_set_element_selection(cql, coll):
    names, types, row = select(cql, "m['a'], m['z'], s[2], s[4], fm[1]", coll, "WHERE k = 1")
    assert names == ["m['a']", "m['z']", "s[2]", "s[4]", "fm[1]"]
    assert types == ["int", "int", "int", "int", "varchar"]
    assert row == (1, None, 2, None, "x")
    _, _, row = select(cql, "m['a'], s[1]", coll, "WHERE k = 2")
    assert row == (None, None)


def test_map_and_set_slices(cql, coll):
    names, types, row = select(cql, "m['a'..'b'], m[..'b'], m['b'..], s[2..3], s[..2], "
                               "fm[1..1], m['c'..'a']", coll, "WHERE k = 1")
    assert names == ["m['a'..'b']", "m[..'b']", "m['b'..]", "s[2..3]", "s[..2]", "fm[1..1]",
                     "m['c'..'a']"]
    assert types[:3] == ["map<varchar, int>"] * 3 and types[3:5] == ["set<int>"] * 2
    assert dict(row[0]) == {"a": 1, "b": 2}
    assert dict(row[1]) == {"a": 1, "b": 2}
    assert dict(row[2]) == {"b": 2, "c": 3}
    assert set(row[3]) == {2, 3} and set(row[4]) == {1, 2}
    assert dict(row[5]) == {1: "x"}
    assert row[6] is None  # an empty slice is null


def test_list_elements_and_slices_are_not_selectable(cql, coll):
    invalid(cql, "l[0]", coll, "Element selection is only allowed on sets and maps, but l is a "
            "list", "WHERE k = 1")
    invalid(cql, "l[0..1]", coll, "Slice selection is only allowed on sets and maps, but l is a "
            "list", "WHERE k = 1")
    invalid(cql, "k[1]", coll, "Invalid element selection: k is of type int is not a collection",
            "WHERE k = 1")


def test_element_key_is_typed_by_the_collection(cql, coll):
    invalid(cql, "m[1]", coll, 'Invalid INTEGER constant \\(1\\) for "key\\(m\\)" of type text',
            "WHERE k = 1")
    prepared = cql.prepare(f"SELECT m[?], m[?..?] FROM {coll} WHERE k = ?")
    assert [(c[2], c[3].cql_parameterized_type()) for c in prepared.column_metadata] == [
        ("key(m)", "varchar"), ("key(m)", "varchar"), ("key(m)", "varchar"), ("k", "int")]
    assert [c[2] for c in prepared.result_metadata] == ["m[?]", "m[?..?]"]
    row = cql.execute(prepared, ["b", "a", "b", 1]).one()
    assert row[0] == 2 and dict(row[1]) == {"a": 1, "b": 2}


def test_functions_of_elements_and_fields(cql, coll):
    names, _, row = select(cql, "intAsBlob(m['a']), CAST(u.a AS text), "
                           "(map<text, int>){'x': 1}['x']", coll, "WHERE k = 1")
    assert names == ["system.intasblob(m['a'])", "cast(u.a as text)",
                     "(map<text, int>){'x': 1}['x']"]
    assert row == (b"\x00\x00\x00\x01", "1", 1)


# --- arithmetic --------------------------------------------------------------------------------


def test_arithmetic_result_types(cql, t):
    # An operation has the wider of its operands' types, floating point if either is; a literal
    # takes its preferred type (int for 1, bigint when it needs 64 bits, double for 1.5).
    names, types, row = select(cql, "v + 1, v - b, ti + si, ti + ti, v * f, f + d, b + dec, "
                               "vi + v, vi + d, v + 3000000000, v + 1.5", t)
    assert names == ["v + 1", "v - b", "ti + si", "ti + ti", "v * f", "f + d", "b + dec",
                     "vi + v", "vi + d", "v + 3000000000", "v + 1.5"]
    assert types == ["int", "bigint", "smallint", "tinyint", "float", "double", "decimal",
                     "varint", "decimal", "bigint", "double"]
    assert row == (2, -9, 3, 2, 1.5, 4.0, Decimal("11.1"), 101, Decimal("102.5"), 3000000001, 2.5)


def test_integer_arithmetic_is_javas(cql, test_keyspace):
    # Fixed-size results wrap; division truncates toward zero; % has the dividend's sign.
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int, b bigint, ti tinyint") as table:
        cql.execute(f"INSERT INTO {table} (k, v, b, ti) VALUES (1, -7, -9223372036854775808, 100)")
        _, _, row = select(cql, "v / 2, v % 2, 2147483647 + 2, b - 1, b / -1, ti + ti, -b, "
                           "10 / 4, -10 % 4", table, "WHERE k = 1")
        assert row == (-3, -1, -2147483647, 9223372036854775807, -9223372036854775808, -56,
                       -9223372036854775808, 2, -2)


def test_decimal_arithmetic(cql, test_keyspace):
    # Sums and products are exact; quotients keep 32 decimal places (rounded half-up), then
    # lose trailing zeros; other numbers become decimals through their double value (7.0).
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, dec decimal, v int") as table:
        cql.execute(f"INSERT INTO {table} (k, dec, v) VALUES (1, 1.10, -7)")
        _, types, row = select(cql, "dec + dec, dec * dec, dec / 3, dec / dec, dec / 4, dec % 1, "
                               "v * dec, dec + 1", table, "WHERE k = 1")
        assert types == ["decimal"] * 8
        assert row == (Decimal("2.20"), Decimal("1.2100"),
                       Decimal("0.36666666666666666666666666666667"), Decimal("1"),
                       Decimal("0.275"), Decimal("0.10"), Decimal("-7.700"), Decimal("2.10"))


def test_floating_point_arithmetic(cql, t):
    _, types, row = select(cql, "f * 2, d / 0, v / 0.0, d % 1", t)
    assert types == ["float", "double", "double", "double"]
    assert row == (3.0, float("inf"), float("inf"), 0.5)


def test_negation_and_precedence(cql, t):
    names, types, row = select(cql, "-v, -d, -dec, -(v + 1), -v * 2, v * 2 + 1, v * (2 + 1), "
                               "v - (1 - 1), v - -1", t)
    assert names == ["-v", "-d", "-dec", "-(v + 1)", "-v * 2", "v * 2 + 1", "v * (2 + 1)",
                     "v - (1 - 1)", "v - -1"]
    assert types[:3] == ["int", "double", "decimal"]
    assert row == (-1, -2.5, Decimal("-1.1"), -2, -2, 3, 3, 1, 2)
    invalid(cql, "-1", t, "Cannot infer type for term -1 in selection clause")
    invalid(cql, "-txt", t, "Invalid call to function system._negate, none of its type "
            "signatures match")


def test_temporal_and_string_operations(cql, t):
    names, types, row = select(cql, "ts + 1d, ts - 1h, dt + 2d, dt - 1mo, txt + 'x', a + a, a + txt",
                               t)
    assert names[:2] == ["ts + 1d", "ts - 1h"]
    assert types == ["timestamp", "timestamp", "date", "date", "varchar", "ascii", "varchar"]
    assert row == (datetime.datetime(2020, 1, 3, 3, 4, 5, 678000),
                   datetime.datetime(2020, 1, 2, 2, 4, 5, 678000),
                   Date(datetime.date(2020, 1, 4)), Date(datetime.date(2019, 12, 2)),
                   "txtx", "ascasc", "asctxt")


def test_operations_of_nulls_and_aggregates(cql, t):
    _, _, row = select(cql, "v + 1, b * 2", t, "WHERE k = 1 AND c = 2")
    assert row == (None, None)
    names, _, row = select(cql, "sum(v) + 1, max(v) * 2, count(*) - 1", t, "WHERE k = 1")
    assert names == ["system.sum(v) + 1", "system.max(v) * 2", "count - 1"]
    assert row == (2, 2, 1)


def test_operation_errors(cql, t):
    invalid(cql, "v + txt", t, r"the '\+' operation is not supported between v and txt")
    invalid(cql, "txt - txt", t, "the '-' operation is not supported between txt and txt")
    invalid(cql, "v + null", t, r"Ambiguous '\+' operation with args v and NULL: use type hint "
            "to disambiguate")
    # A timestamp is value-compatible with bigint and varint.
    invalid(cql, "ts + v", t, r"Ambiguous '\+' operation with args ts and v")
    # Division by zero fails at execution, as a FUNCTION_FAILURE (test_function_failures.py).
    with pytest.raises(FunctionFailure, match="the operation 'int / int' failed: / by zero"):
        cql.execute(f"SELECT v / 0 FROM {t} WHERE k = 1 AND c = 1")
