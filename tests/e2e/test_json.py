"""INSERT JSON: which JSON each type accepts, column-name rules, DEFAULT NULL and UNSET, and the
errors. Expectations were taken from Cassandra 5.0.9; values are read back with plain SELECTs."""

import datetime
import decimal
import uuid

import pytest
from cassandra import InvalidRequest

from util import new_table, new_type


@pytest.fixture(scope="module")
def udt(cql, test_keyspace):
    with new_type(cql, test_keyspace, 'a int, "Bb" text') as name:
        yield name.split(".")[1]


@pytest.fixture(scope="module")
def table(cql, test_keyspace, udt):
    schema = ('k int PRIMARY KEY, "Cap" text, a ascii, b bigint, bl blob, bo boolean, d date, '
              "de decimal, du duration, f float, i inet, sm smallint, ti time, ts timestamp, "
              "ty tinyint, uid uuid, tu timeuuid, vi varint, l list<int>, st set<text>, "
              f"m map<int, text>, mf frozen<map<text, int>>, tp tuple<int, text>, uu {udt}, "
              "vec vector<float, 2>")
    with new_table(cql, test_keyspace, schema) as name:
        yield name


_keys = iter(range(1, 1_000_000))


def insert_json(cql, table, fields):
    """Inserts {"k": <new key>, fields...} and returns the key."""
    k = next(_keys)
    cql.execute(f"INSERT INTO {table} JSON %s", ['{"k": %d%s}' % (k, ", " + fields if fields else "")])
    return k


def read(cql, table, k, column):
    return getattr(cql.execute(f'SELECT {column} FROM {table} WHERE k = %s', [k]).one(), column.strip('"'))


@pytest.mark.parametrize("fields, column, expected", [
    ('"b": 12345678901', "b", 12345678901),
    ('"b": "77"', "b", 77),                       # numbers may be strings
    ('"ty": "3"', "ty", 3),
    ('"f": 2', "f", 2.0),
    ('"f": "1.25"', "f", 1.25),
    ('"bo": true', "bo", True),
    ('"bo": "true"', "bo", True),
    ('"de": "1.5"', "de", decimal.Decimal("1.5")),
    ('"de": 1.5e3', "de", decimal.Decimal("1500.0")),  # a JSON fraction goes through a double
    ('"vi": "123456789012345678901234567890"', "vi", 123456789012345678901234567890),
    ('"vi": 123456789012345678901234567890', "vi", 123456789012345678901234567890),
    ('"ts": 1700000000000', "ts", datetime.datetime(2023, 11, 14, 22, 13, 20)),
    ('"ts": "2020-01-01"', "ts", datetime.datetime(2020, 1, 1)),
    ('"ti": "08:00:00"', "ti", 28_800_000_000_000),
    ('"bl": "0xff"', "bl", b"\xff"),
    ('"i": "::1"', "i", "::1"),
    ('"uid": "550e8400-e29b-41d4-a716-446655440000"', "uid",
     uuid.UUID("550e8400-e29b-41d4-a716-446655440000")),
    ('"du": "1h30m"', "du", None),  # checked by type below
    ('"\\"Cap\\"": "upper"', '"Cap"', "upper"),  # quoted keys are case-sensitive
    ('"l": [3, 1]', "l", [3, 1]),
    ('"l": "[1,2]"', "l", [1, 2]),                # a collection may be JSON inside a string
    ('"st": ["b", "a", "b"]', "st", {"a", "b"}),
    ('"m": {"2": "b", "1": "a"}', "m", {1: "a", 2: "b"}),
    ('"mf": {"1": 1}', "mf", {"1": 1}),
    ('"tp": [1, "q"]', "tp", (1, "q")),
    ('"tp": "[1, \\"z\\"]"', "tp", (1, "z")),
    ('"vec": ["1", "2"]', "vec", [1.0, 2.0]),
])
def test_accepted_values(cql, table, fields, column, expected):
    k = insert_json(cql, table, fields)
    value = read(cql, table, k, column)
    if column == "du":
        assert value.nanoseconds == 5_400_000_000_000
    elif column == "ti":
        assert value.nanosecond_time == expected
    elif column in ("st",):
        assert set(value) == expected
    elif column in ("m", "mf"):
        assert dict(value) == expected
    elif column == "vec":
        assert list(value) == expected
    else:
        assert value == expected


def test_udt_field_names_follow_identifier_rules(cql, table):
    k = insert_json(cql, table, '"uu": {"A": 1, "\\"Bb\\"": "q"}')
    value = read(cql, table, k, "uu")
    assert (value.a, value.Bb) == (1, "q")


def test_string_key_is_read_as_a_number(cql, table):
    cql.execute(f'INSERT INTO {table} JSON \'{{"k": "900001"}}\'')
    assert cql.execute(f"SELECT k FROM {table} WHERE k = 900001").one() is not None


def test_default_null_and_default_unset(cql, table):
    cql.execute(f"INSERT INTO {table} (k, b, a) VALUES (900002, 1, 'keep')")
    cql.execute(f'INSERT INTO {table} JSON \'{{"k": 900002, "b": 2}}\' DEFAULT UNSET')
    row = cql.execute(f"SELECT a, b FROM {table} WHERE k = 900002").one()
    assert (row.a, row.b) == ("keep", 2)
    cql.execute(f'INSERT INTO {table} JSON \'{{"k": 900002, "b": 3}}\'')  # DEFAULT NULL
    row = cql.execute(f"SELECT a, b FROM {table} WHERE k = 900002").one()
    assert (row.a, row.b) == (None, 3)


def test_prepared_insert_json(cql, table):
    stmt = cql.prepare(f"INSERT INTO {table} JSON ?")
    assert [c.name for c in stmt.column_metadata] == ["[json]"]
    cql.execute(stmt, ['{"k": 900003, "l": [5]}'])
    assert cql.execute(f"SELECT l FROM {table} WHERE k = 900003").one().l == [5]


def test_insert_json_with_ttl_and_timestamp(cql, table):
    cql.execute(f'INSERT INTO {table} JSON \'{{"k": 900004, "b": 1}}\' USING TTL 1000 AND TIMESTAMP 42')
    row = cql.execute(f"SELECT ttl(b), writetime(b) FROM {table} WHERE k = 900004").one()
    assert 0 < row[0] <= 1000 and row[1] == 42


@pytest.mark.parametrize("fields", [
    '"bo": 1',                       # booleans are booleans or "true"/"false"
    '"d": 18000',                    # dates, times, inets, durations are strings
    '"du": 5',
    '"i": 5',
    '"a": 5',                        # text types take strings only
    '"a": "\u00e9"',                 # not ASCII
    '"bl": "ff"',                    # blobs need 0x
    '"b": 1.5',                      # an integer type refuses fractions
    '"sm": 70000',                   # out of range
    '"tu": "550e8400-e29b-41d4-a716-446655440000"',  # timeuuid must be version 1
    '"Cap": "x"',                    # unquoted: the column "cap", which does not exist
    '"nope": 1',
    '"st": {"a": 1}',
    '"m": {"x": "a"}',               # int keys
    '"uu": {"Bb": "q"}',             # unquoted field: "bb"
    '"uu": [1]',
    '"tp": [1, "a", 3]',
    '"tp": [1]',
    '"vec": [1]',
    '"l": [1, null]',
    '"m": {"1": null}',
])
def test_refused_values(cql, table, fields):
    with pytest.raises(InvalidRequest):
        insert_json(cql, table, fields)


@pytest.mark.parametrize("text", ['{"v": 1', "[1]", '{"k": null}', "{}"])
def test_malformed_or_keyless_json(cql, table, text):
    with pytest.raises(InvalidRequest):
        cql.execute(f"INSERT INTO {table} JSON %s", [text])


# --- SELECT JSON and toJson ------------------------------------------------------------------


@pytest.fixture(scope="module")
def full_row(cql, table):
    """One row with every column set; SELECT JSON of it is compared with Cassandra 5.0.9's
    text exactly."""
    cql.execute(
        f"INSERT INTO {table} (k, \"Cap\", a, b, bl, bo, d, de, du, f, i, sm, ti, ts, ty, uid, "
        "tu, vi, l, st, m, mf, tp, uu, vec) VALUES (800001, 'x\"y', 'asc', 12345678901, 0xcafe, "
        "true, '2024-02-29', 12.340, 1h2m3s, 1.5, '::1', 7, '08:12:54.123456789', "
        "'2024-01-02 03:04:05.678+0000', 3, 550e8400-e29b-41d4-a716-446655440000, "
        "50554d6e-29bb-11e5-b345-feff819cdc9f, 123456789012345678901234567890, [1,2], "
        "{'b','a'}, {2: 'two', 1: 'one'}, {'z': 1}, (1, 'one'), {a: 5, \"Bb\": 'bee'}, "
        "[0.5, -1.0])")
    return 800001


def test_select_json_star(cql, table, full_row):
    rs = cql.execute(f"SELECT JSON * FROM {table} WHERE k = {full_row}")
    assert rs.column_names == ["[json]"]
    assert rs.one()[0] == (
        '{"k": 800001, "\\"Cap\\"": "x\\"y", "a": "asc", "b": 12345678901, "bl": "0xcafe", '
        '"bo": true, "d": "2024-02-29", "de": 12.340, "du": "1h2m3s", "f": 1.5, '
        '"i": "0:0:0:0:0:0:0:1", "l": [1, 2], "m": {"1": "one", "2": "two"}, "mf": {"z": 1}, '
        '"sm": 7, "st": ["a", "b"], "ti": "08:12:54.123456789", "tp": [1, "one"], '
        '"ts": "2024-01-02 03:04:05.678Z", "tu": "50554d6e-29bb-11e5-b345-feff819cdc9f", '
        '"ty": 3, "uid": "550e8400-e29b-41d4-a716-446655440000", '
        '"uu": {"a": 5, "\\"Bb\\"": "bee"}, "vec": [0.5, -1.0], '
        '"vi": 123456789012345678901234567890}')


def test_select_json_nulls_aliases_and_tojson(cql, table, full_row):
    k = insert_json(cql, table, "")
    row = cql.execute(f"SELECT JSON k, b, l FROM {table} WHERE k = {k}").one()
    assert row[0] == '{"k": %d, "b": null, "l": null}' % k
    rs = cql.execute(f"SELECT JSON k, ts AS when, toJson(m) FROM {table} WHERE k = {full_row}")
    assert rs.one()[0] == (
        '{"k": 800001, "when": "2024-01-02 03:04:05.678Z", '
        '"system.tojson(m)": "{\\"1\\": \\"one\\", \\"2\\": \\"two\\"}"}')


def test_tojson_in_a_plain_select(cql, table, full_row):
    row = cql.execute(f"SELECT toJson(uu), toJson(de), toJson(b) FROM {table} WHERE k = {full_row}").one()
    assert list(row) == ['{"a": 5, "\\"Bb\\"": "bee"}', "12.340", "12345678901"]


def test_fromjson_is_refused_in_a_selection(cql, table):
    with pytest.raises(InvalidRequest):
        cql.execute(f"SELECT fromJson(a) FROM {table}")


def test_select_json_pages(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, PRIMARY KEY (k, c)") as t:
        for c in range(10):
            cql.execute(f"INSERT INTO {t} (k, c) VALUES (1, {c})")
        from cassandra.query import SimpleStatement
        rows = list(cql.execute(SimpleStatement(f"SELECT JSON c FROM {t} WHERE k = 1", fetch_size=3)))
        assert [r[0] for r in rows] == ['{"c": %d}' % c for c in range(10)]


def test_nan_and_infinities_are_null(cql, test_keyspace):
    """Jackson writes no NaN or infinities: SELECT JSON and toJson give null for them, inside
    collections, tuples and UDTs too, and the string "null" for such a map key. Before,
    Helenus wrote NaN and Infinity, which is not JSON."""
    with new_type(cql, test_keyspace, "x double, y float") as u:
        schema = (f"k int PRIMARY KEY, d double, f float, l list<double>, m map<float, double>, "
                  f"t tuple<double, float>, u frozen<{u}>, s set<double>, v vector<float, 2>")
        with new_table(cql, test_keyspace, schema) as t:
            cql.execute(f"INSERT INTO {t} (k, d, f, l, m, t, u, s, v) VALUES (0, NaN, Infinity, "
                        "[NaN, -Infinity, 1.5], {NaN: Infinity, 1: -Infinity}, (NaN, -Infinity), "
                        "{x: Infinity, y: NaN}, {NaN, 1}, [NaN, Infinity])")
            cql.execute(f"INSERT INTO {t} (k, d, f) VALUES (1, -Infinity, NaN)")
            rows = [r[0] for r in cql.execute(f"SELECT JSON * FROM {t} WHERE k IN (0, 1)")]
            assert rows == [
                '{"k": 0, "d": null, "f": null, "l": [null, null, 1.5], '
                '"m": {"1.0": null, "null": null}, "s": [1.0, null], "t": [null, null], '
                '"u": {"x": null, "y": null}, "v": [null, null]}',
                '{"k": 1, "d": null, "f": null, "l": null, "m": null, "s": null, "t": null, '
                '"u": null, "v": null}',
            ]
            row = cql.execute(f"SELECT toJson(d), toJson(f), toJson(l), toJson(m), toJson(t), "
                              f"toJson(u) FROM {t} WHERE k = 0").one()
            assert list(row) == ["null", "null", "[null, null, 1.5]", '{"1.0": null, "null": null}',
                                 "[null, null]", '{"x": null, "y": null}']
            # Finite values keep Java's text.
            cql.execute(f"INSERT INTO {t} (k, d, f) VALUES (2, 1e10, -0.5)")
            assert cql.execute(f"SELECT JSON d, f FROM {t} WHERE k = 2").one()[0] == \
                '{"d": 1.0E10, "f": -0.5}'


@pytest.mark.parametrize("literal, text", [
    ("1E+3", "1E+3"), ("12E+3", "1.2E+4"), ("1000", "1000"), ("0.0000001", "1E-7"),
    ("0.000001", "0.000001"), ("0E+3", "0E+3"), ("-1.5E+10", "-1.5E+10"), ("1.00", "1.00"),
    ("-0.00", "0.00"), ("12345678901234567890E-30", "1.2345678901234567890E-11"),
])
def test_decimals_keep_their_scale_in_java_text(cql, test_keyspace, literal, text):
    """A decimal reads back with the scale it was written with, as a partition key and a
    regular column, and JSON gives BigDecimal.toString's text. Before, JSON wrote `1E3` where
    Cassandra writes `1E+3` and `0.0000001` where it writes `1E-7`."""
    schema = "k decimal, c int, v decimal, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES ({literal}, 0, {literal})")
        row = cql.execute(f"SELECT k, v FROM {t}").one()
        assert [str(x) for x in row] == [str(decimal.Decimal(text))] * 2
        json = cql.execute(f"SELECT JSON k, v FROM {t}").one()[0]
        assert json == '{"k": %s, "v": %s}' % (text, text)
        assert cql.execute(f"SELECT toJson(k), toJson(v) FROM {t}").one() == (text, text)


def test_a_zero_duration_is_the_empty_string(cql, test_keyspace):
    """Cassandra's Duration.toString writes nothing for a zero duration."""
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, d duration, l list<duration>") as t:
        cql.execute(f"INSERT INTO {t} (k, d, l) VALUES (0, 0s, [0s, 1d])")
        assert cql.execute(f"SELECT JSON d, l FROM {t}").one()[0] == '{"d": "", "l": ["", "1d"]}'
        assert cql.execute(f"SELECT toJson(d) FROM {t}").one()[0] == '""'
