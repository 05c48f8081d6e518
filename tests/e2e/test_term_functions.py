"""Native functions and arithmetic in terms — INSERT and UPDATE values and WHERE relations —
resolved against the type of the value they must produce, as Cassandra's FunctionResolver does
with a receiver: an operation on literals takes the receiver's type (`5 + 1` into a bigint),
bind markers among the arguments take the chosen signature's parameter types, named
arg<i>(system.<function>), and a failure while running is FUNCTION_FAILURE."""

import datetime
import uuid

import pytest
from cassandra import FunctionFailure, InvalidRequest

from util import new_table

TU = uuid.UUID("50554d6e-29bb-11e5-b345-feff819cdc9f")  # 2015-07-14 00:00:18.805 UTC


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    schema = ("k int, tu timeuuid, ts timestamp, b bigint, v int, txt text, d date, f float, "
              "bl blob, PRIMARY KEY (k, tu)")
    with new_table(cql, test_keyspace, schema) as name:
        yield name


def row(cql, t, k, columns):
    return tuple(cql.execute(f"SELECT {columns} FROM {t} WHERE k = {k}").one())


def test_arithmetic_of_literals_takes_the_receiver_type(cql, t):
    cql.execute(f"INSERT INTO {t} (k, tu, b, v, f, txt) VALUES (1, {TU}, 5 + 1, 5 - -1, "
                "1.5 * 2, 'a' + 'b')")
    assert row(cql, t, 1, "b, v, f, txt") == (6, 6, 3.0, "ab")
    # Both literals become ints: 3000000000 is not one.
    with pytest.raises(InvalidRequest, match="Unable to make int from '3000000000'"):
        cql.execute(f"INSERT INTO {t} (k, tu, v) VALUES (1, {TU}, 3000000000 - 1)")


def test_parenthesised_term_and_negation(cql, t):
    cql.execute(f"INSERT INTO {t} (k, tu, v, b) VALUES (2, {TU}, -(1), (7))")
    assert row(cql, t, 2, "v, b") == (-1, 7)


def test_time_functions_in_values(cql, t):
    cql.execute(f"INSERT INTO {t} (k, tu, ts, d) VALUES (3, {TU}, '2020-01-01' + 1d, "
                "toDate('2020-01-05'))")
    assert row(cql, t, 3, "ts, d")[0] == datetime.datetime(2020, 1, 2)
    assert str(row(cql, t, 3, "d")[0]) == "2020-01-05"
    cql.execute(f"INSERT INTO {t} (k, tu, ts, b) VALUES (4, now(), toTimestamp(now()), "
                "toUnixTimestamp(now()))")
    ts, b = row(cql, t, 4, "ts, b")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    assert abs(ts - now) < datetime.timedelta(minutes=5)
    assert abs(b / 1000 - datetime.datetime.now(datetime.timezone.utc).timestamp()) < 300
    cql.execute(f"INSERT INTO {t} (k, tu, ts) VALUES (5, {TU}, floor('2020-01-01 10:00', 1d))")
    assert row(cql, t, 5, "ts") == (datetime.datetime(2020, 1, 1),)


def test_other_functions_in_values(cql, t):
    cql.execute(f"INSERT INTO {t} (k, tu, v, bl, txt) VALUES (6, {TU}, abs(-3), "
                "intAsBlob(1 + 1), toJson(1))")
    assert row(cql, t, 6, "v, bl, txt") == (3, b"\x00\x00\x00\x02", "1")
    # A literal argument of a masking function has its preferred type (5 is an int).
    cql.execute(f"UPDATE {t} SET v = mask_default(5), b = 1 + 2 WHERE k = 6 AND tu = {TU}")
    assert row(cql, t, 6, "v, b") == (0, 3)
    with pytest.raises(InvalidRequest, match="Type error: cannot assign result of function "
                       "system.mask_default \\(type int\\) to b \\(type bigint\\)"):
        cql.execute(f"UPDATE {t} SET b = mask_default(5) WHERE k = 6 AND tu = {TU}")


def test_min_and_max_timeuuid_in_where(cql, t):
    cql.execute(f"INSERT INTO {t} (k, tu, v) VALUES (7, {TU}, 1)")
    cql.execute(f"INSERT INTO {t} (k, tu, v) VALUES (7, now(), 2)")
    rows = cql.execute(f"SELECT v FROM {t} WHERE k = 7 AND tu > minTimeuuid('2015-07-14 "
                       "00:00:00+0000') AND tu < maxTimeuuid('2015-07-15 00:00:00+0000')")
    assert [r.v for r in rows] == [1]
    rows = cql.execute(f"SELECT v FROM {t} WHERE k = 7 AND tu > maxTimeuuid('2015-07-14 "
                       "00:00:18.805+0000')")
    assert [r.v for r in rows] == [2]


def test_functions_and_arithmetic_in_key_relations(cql, t):
    cql.execute(f"INSERT INTO {t} (k, tu, v) VALUES (8, {TU}, 3)")
    assert [r.v for r in cql.execute(f"SELECT v FROM {t} WHERE k = 7 + 1")] == [3]
    assert [r.v for r in cql.execute(f"SELECT v FROM {t} WHERE k IN (abs(-8), 100 + 1)")] == [3]
    rows = cql.execute(f"SELECT v FROM {t} WHERE k = 8 AND v = 2 + 1 ALLOW FILTERING")
    assert [r.v for r in rows] == [3]


def test_bind_markers_in_calls(cql, t):
    prepared = cql.prepare(f"INSERT INTO {t} (k, tu, v, b) VALUES (9, {TU}, (int)? + 1, abs(?))")
    assert [(c.name, c.type.typename) for c in prepared.column_metadata] == [
        ("arg0(system._add)", "int"), ("arg0(system.abs)", "bigint")]
    cql.execute(prepared, [41, -5])
    assert row(cql, t, 9, "v, b") == (42, 5)
    prepared = cql.prepare(f"SELECT v FROM {t} WHERE k = 9 AND tu < maxTimeuuid(?)")
    assert [(c.name, c.type.typename) for c in prepared.column_metadata] == [
        ("arg0(system.maxtimeuuid)", "timestamp")]
    prepared = cql.prepare(f"INSERT INTO {t} (k, tu, v) VALUES (9, {TU}, -?)")
    assert [c.name for c in prepared.column_metadata] == ["arg0(system._negate)"]


def test_ambiguous_calls(cql, t):
    # A marker disables the receiver rule for operations.
    with pytest.raises(InvalidRequest, match="Ambiguous '\\+' operation with args \\? and 1"):
        cql.prepare(f"INSERT INTO {t} (k, tu, v) VALUES (9, {TU}, ? + 1)")
    with pytest.raises(InvalidRequest, match="Ambiguous call to function totimestamp"):
        cql.prepare(f"INSERT INTO {t} (k, tu, ts) VALUES (9, {TU}, toTimestamp(?))")


def test_result_must_fit_the_column(cql, t):
    with pytest.raises(InvalidRequest, match="Type error: cannot assign result of function "
                       "system.intasblob \\(type blob\\) to b \\(type bigint\\)"):
        cql.execute(f"INSERT INTO {t} (k, tu, b) VALUES (10, {TU}, intAsBlob(1))")
    # Only the overloads returning the column's type are candidates: round(int) takes no 1.5.
    with pytest.raises(InvalidRequest, match="Invalid call to function round, none of its type "
                       "signatures match"):
        cql.execute(f"INSERT INTO {t} (k, tu, v) VALUES (10, {TU}, round(1.5))")


def test_division_by_zero_in_a_value_is_a_function_failure(cql, t):
    with pytest.raises(FunctionFailure, match="the operation 'int / int' failed: / by zero") as e:
        cql.execute(f"INSERT INTO {t} (k, tu, v) VALUES (11, {TU}, 1 / 0)")
    assert (e.value.keyspace, e.value.function, e.value.arg_types) == (
        "system", "_divide", ["int", "int"])


def test_unknown_function(cql, t):
    with pytest.raises(InvalidRequest, match="Unknown function"):
        cql.execute(f"INSERT INTO {t} (k, tu, v) VALUES (12, {TU}, nosuchfunction(1))")


def test_token_of_values_in_a_token_relation(cql, test_keyspace):
    # token(k) > token(1): the right side is the token of the partition key the values make.
    with new_table(cql, test_keyspace, "k int, c int, PRIMARY KEY ((k), c)") as name:
        for k in (1, 2, 3):
            cql.execute(f"INSERT INTO {name} (k, c) VALUES ({k}, 0)")
        tokens = {r.k: r[1] for r in cql.execute(f"SELECT k, token(k) FROM {name}")}
        after_1 = sorted(k for k in tokens if tokens[k] > tokens[1])
        rows = cql.execute(f"SELECT k FROM {name} WHERE token(k) > token(1)")
        assert sorted(r.k for r in rows) == after_1
        assert [r.k for r in cql.execute(f"SELECT k FROM {name} WHERE token(k) = token(2)")] == [2]
        prepared = cql.prepare(f"SELECT k FROM {name} WHERE token(k) >= token(?)")
        assert [(c.name, c.type.typename) for c in prepared.column_metadata] == [
            ("arg0(system.token)", "int")]
        assert 3 in [r.k for r in cql.execute(prepared, [3])]


def test_token_of_a_composite_partition_key(cql, test_keyspace):
    with new_table(cql, test_keyspace, "a int, b text, c int, PRIMARY KEY ((a, b), c)") as name:
        cql.execute(f"INSERT INTO {name} (a, b, c) VALUES (1, 'x', 0)")
        rows = cql.execute(f"SELECT a FROM {name} WHERE token(a, b) = token(1, 'x')")
        assert [r.a for r in rows] == [1]
        with pytest.raises(InvalidRequest, match="Invalid number of arguments in call to function "
                           "system.token"):
            cql.execute(f"SELECT a FROM {name} WHERE token(a, b) = token(1)")


def test_cast_in_a_term(cql, t):
    # CAST(x AS type) calls cast_as_<type>: the literal 1 is an int, cast to bigint.
    cql.execute(f"INSERT INTO {t} (k, tu, b) VALUES (13, {TU}, CAST(1 AS bigint))")
    assert row(cql, t, 13, "b") == (1,)
    # There is no cast from int to int, and 1 fits every other numeric type.
    with pytest.raises(InvalidRequest, match="Ambiguous call to function system.cast_as_int"):
        cql.execute(f"SELECT * FROM {t} WHERE k = CAST(1 AS int)")
