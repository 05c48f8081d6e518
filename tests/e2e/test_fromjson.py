"""fromJson() as a term: in INSERT and UPDATE values, collection operations and WHERE relations.
Its argument is JSON text read with the receiving column's JSON rules (the same rules as
INSERT JSON); text that is not JSON, or JSON that does not fit the type, fails at execution with
FUNCTION_FAILURE naming system.fromjson(text). It cannot be selected."""

import datetime

import pytest
from cassandra import FunctionFailure, InvalidRequest

from util import new_table


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    schema = (
        "k int, c int, v int, b bigint, f float, dec decimal, bo boolean, ts timestamp, ip inet, "
        "txt text, s set<int>, l list<int>, m map<text, int>, vec vector<float, 3>, "
        "PRIMARY KEY (k, c)"
    )
    with new_table(cql, test_keyspace, schema) as name:
        yield name


def one(cql, query, parameters=None):
    return cql.execute(query, parameters).one()


def fails(cql, query, message, parameters=None):
    """`query` must fail in fromJson at execution, with FUNCTION_FAILURE."""
    with pytest.raises(FunctionFailure, match=message) as info:
        cql.execute(query, parameters)
    assert (info.value.keyspace, info.value.function, info.value.arg_types) == (
        "system", "fromjson", ["text"])


def test_insert_numbers_and_strings(cql, t):
    # An int takes a JSON number or a string holding one.
    cql.execute(f"INSERT INTO {t} (k, c, v, b) VALUES (1, 1, fromJson('12'), fromJson('\"34\"'))")
    assert tuple(one(cql, f"SELECT v, b FROM {t} WHERE k = 1 AND c = 1")) == (12, 34)


def test_json_null_and_null_argument_are_null(cql, t):
    cql.execute(f"INSERT INTO {t} (k, c, v, b) VALUES (1, 2, 5, 6)")
    cql.execute(f"INSERT INTO {t} (k, c, v, b) VALUES (1, 2, fromJson('null'), fromJson(null))")
    assert tuple(one(cql, f"SELECT v, b FROM {t} WHERE k = 1 AND c = 2")) == (None, None)


def test_integer_rules(cql, t):
    # No surrounding spaces in a string, no fraction, and an int takes only a 32-bit number.
    fails(cql, f"INSERT INTO {t} (k, c, v) VALUES (2, 1, fromJson('\" 12 \"'))",
          "Unable to make int from ' 12 '")
    fails(cql, f"INSERT INTO {t} (k, c, v) VALUES (2, 1, fromJson('1.5'))",
          "Expected an int value, but got a Double: 1.5")
    fails(cql, f"INSERT INTO {t} (k, c, v) VALUES (2, 1, fromJson('3000000000'))",
          "Expected an int value, but got a Long: 3000000000")
    cql.execute(f"INSERT INTO {t} (k, c, b) VALUES (2, 1, fromJson('3000000000'))")
    assert one(cql, f"SELECT b FROM {t} WHERE k = 2 AND c = 1").b == 3000000000


def test_empty_string_is_the_empty_value(cql, t):
    # `fromString("")` is the empty value for int (the driver reads it as None), false for a
    # boolean, and an error for a type whose parser rejects it.
    cql.execute(f"INSERT INTO {t} (k, c, v, bo) VALUES (2, 2, fromJson('\"\"'), fromJson('\"\"'))")
    row = one(cql, f"SELECT v, bo FROM {t} WHERE k = 2 AND c = 2")
    assert (row.v, row.bo) == (None, False)
    assert one(cql, f"SELECT count(v) FROM {t} WHERE k = 2 AND c = 2")[0] == 1


def test_floating_and_decimal_rules(cql, t):
    # A JSON integer -0 is Java's Integer 0; a fraction goes through a Java double first.
    cql.execute(f"INSERT INTO {t} (k, c, f, dec) VALUES (2, 3, fromJson('-0'), fromJson('1.5e3'))")
    row = one(cql, f"SELECT f, dec FROM {t} WHERE k = 2 AND c = 3")
    assert str(row.f) == "0.0" and str(row.dec) == "1500.0"
    fails(cql, f"INSERT INTO {t} (k, c, dec) VALUES (2, 3, fromJson('\" 1 \"'))",
          "not a valid representation of a decimal value")


def test_timestamp_takes_a_long_or_a_string(cql, t):
    # Jackson reads 12 as an Integer, which timestamp does not take; a Long it does.
    fails(cql, f"INSERT INTO {t} (k, c, ts) VALUES (2, 4, fromJson('12'))",
          "Expected a long or a datestring representation of a timestamp value, but got a "
          "Integer: 12")
    cql.execute(f"INSERT INTO {t} (k, c, ts) VALUES (2, 4, fromJson('1577934245678'))")
    assert one(cql, f"SELECT ts FROM {t} WHERE k = 2 AND c = 4").ts == datetime.datetime(
        2020, 1, 2, 3, 4, 5, 678000)
    cql.execute(f"INSERT INTO {t} (k, c, ts) VALUES (2, 5, fromJson('\"2020-01-02\"'))")
    assert one(cql, f"SELECT ts FROM {t} WHERE k = 2 AND c = 5").ts == datetime.datetime(
        2020, 1, 2)


def test_inet_takes_java_address_forms(cql, t):
    # InetAddress.getByName: the last part fills the bytes left (12 is 0.0.0.12).
    cql.execute(f"INSERT INTO {t} (k, c, ip) VALUES (2, 6, fromJson('\"12\"'))")
    cql.execute(f"INSERT INTO {t} (k, c, ip) VALUES (2, 7, fromJson('\"1.2.3\"'))")
    rows = cql.execute(f"SELECT ip FROM {t} WHERE k = 2 AND c IN (6, 7)")
    assert [r.ip for r in rows] == ["0.0.0.12", "1.2.0.3"]


def test_inet_literal_takes_no_spaces(cql, t):
    with pytest.raises(InvalidRequest, match="Unable to make inet address from ' 127.0.0.1'"):
        cql.execute(f"INSERT INTO {t} (k, c, ip) VALUES (2, 8, ' 127.0.0.1')")


def test_collections(cql, t):
    # Sets come back sorted and deduplicated; a map may come as a string holding its JSON.
    cql.execute(
        f"INSERT INTO {t} (k, c, s, l, m, vec) VALUES (3, 1, fromJson('[3, 1, 2, 1]'), "
        "fromJson('[1, \"2\"]'), fromJson('\"{\\\"z\\\": 26}\"'), fromJson('[1, 2, 3.5]'))"
    )
    row = one(cql, f"SELECT s, l, m, vec FROM {t} WHERE k = 3 AND c = 1")
    assert (sorted(row.s), row.l, dict(row.m), row.vec) == ([1, 2, 3], [1, 2], {"z": 26},
                                                            [1.0, 2.0, 3.5])
    fails(cql, f"INSERT INTO {t} (k, c, s) VALUES (3, 2, fromJson('[3, null]'))",
          "Invalid null element in set")
    fails(cql, f"INSERT INTO {t} (k, c, vec) VALUES (3, 2, fromJson('[1, 2]'))",
          "List had incorrect size: expected 3 but given 2")


def test_update_and_collection_operations(cql, t):
    cql.execute(f"INSERT INTO {t} (k, c, s, l, m) VALUES (3, 3, {{1, 2}}, [1], {{'a': 1}})")
    cql.execute(
        f"UPDATE {t} SET v = fromJson('7'), m = m + fromJson('{{\"c\": 3}}'), "
        "s = s - fromJson('[1]'), l = l + fromJson('[9]') WHERE k = 3 AND c = 3"
    )
    cql.execute(f"UPDATE {t} SET m['d'] = fromJson('4'), l[0] = fromJson('\"8\"') "
                "WHERE k = 3 AND c = 3")
    row = one(cql, f"SELECT v, s, l, m FROM {t} WHERE k = 3 AND c = 3")
    assert (row.v, sorted(row.s), row.l, dict(row.m)) == (7, [2], [8, 9],
                                                          {"a": 1, "c": 3, "d": 4})


def test_where_relations(cql, t):
    cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (fromJson('\"4\"'), fromJson('1'), 41)")
    cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (4, 2, 42)")
    cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (4, 3, 43)")
    rows = cql.execute(f"SELECT c FROM {t} WHERE k = fromJson('4') AND c IN "
                       "(fromJson('1'), fromJson('\"3\"'))")
    assert [r.c for r in rows] == [1, 3]
    rows = cql.execute(f"SELECT c FROM {t} WHERE k = 4 AND c > fromJson('1')")
    assert [r.c for r in rows] == [2, 3]
    rows = cql.execute(f"SELECT c FROM {t} WHERE k = 4 AND v = fromJson('42') ALLOW FILTERING")
    assert [r.c for r in rows] == [2]
    cql.execute(f"DELETE FROM {t} WHERE k = 4 AND c = fromJson('2')")
    assert [r.c for r in cql.execute(f"SELECT c FROM {t} WHERE k = 4")] == [1, 3]
    fails(cql, f"SELECT * FROM {t} WHERE k = 4 AND c = fromJson('\"x\"')",
          "Unable to make int from 'x'")


def test_bind_marker_argument(cql, t):
    # The marker is text, named after the function's argument; a key bound through fromJson is
    # not a routing key.
    prepared = cql.prepare(f"INSERT INTO {t} (k, c, v) VALUES (fromJson(?), 1, fromJson(?))")
    assert [(c.name, c.type.typename) for c in prepared.column_metadata] == [
        ("arg0(system.fromjson)", "varchar"), ("arg0(system.fromjson)", "varchar")]
    assert not prepared.routing_key_indexes
    cql.execute(prepared, ["5", '"51"'])
    assert one(cql, f"SELECT v FROM {t} WHERE k = 5 AND c = 1").v == 51
    fails(cql, prepared, "Unable to make int from 'x'", ["5", '"x"'])


def test_text_after_the_value(cql, t):
    # Jackson reads the first value: what follows a space is ignored, anything else fails.
    cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (6, 1, fromJson('12 13'))")
    assert one(cql, f"SELECT v FROM {t} WHERE k = 6 AND c = 1").v == 12
    fails(cql, f"INSERT INTO {t} (k, c, v) VALUES (6, 2, fromJson('12]'))",
          "Could not decode JSON string '12]'")


@pytest.mark.parametrize("argument", ["'abc'", "''", "'{\"a\": '"])
def test_not_json(cql, t, argument):
    fails(cql, f"INSERT INTO {t} (k, c, v) VALUES (6, 3, fromJson({argument}))",
          "execution of 'system.fromjson\\[text\\]' failed: Could not decode JSON string")


def test_wrong_kind_of_json(cql, t):
    fails(cql, f"INSERT INTO {t} (k, c, txt) VALUES (6, 4, fromJson('12'))",
          "Expected a UTF-8 string, but got a Integer: 12")
    fails(cql, f"INSERT INTO {t} (k, c, f) VALUES (6, 4, fromJson('true'))",
          "Expected a float value, but got a Boolean: true")


def test_invalid_calls(cql, t):
    # Wrong calls are rejected before anything runs: INVALID, not FUNCTION_FAILURE.
    with pytest.raises(InvalidRequest, match="Invalid number of arguments for function "
                       "system.fromjson"):
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (7, 1, fromJson())")
    with pytest.raises(InvalidRequest, match="Invalid number of arguments for function "
                       "system.fromjson"):
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (7, 1, fromJson('1', '2'))")
    with pytest.raises(InvalidRequest, match="Function system.fromjson requires an argument of "
                       "type text, but found argument 1 of type int"):
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (7, 1, fromJson(1))")
    with pytest.raises(InvalidRequest, match="fromjson\\(\\) cannot be used in the selection "
                       "clause of a SELECT statement"):
        cql.execute(f"SELECT fromJson('1') FROM {t} WHERE k = 7")


def test_other_term_functions_check_their_receiver(cql, t):
    # Like fromJson, a function in a term must return the column's type: intAsBlob is a blob.
    with pytest.raises(InvalidRequest, match="Type error: cannot assign result of function "
                       "system.intasblob \\(type blob\\) to b \\(type bigint\\)"):
        cql.execute(f"INSERT INTO {t} (k, c, b) VALUES (7, 2, intAsBlob(1))")
    prepared = cql.prepare(f"INSERT INTO {t} (k, c, txt) VALUES (7, 2, blobAsText(?))")
    assert [(c.name, c.type.typename) for c in prepared.column_metadata] == [
        ("arg0(system.blobastext)", "blob")]
    cql.execute(prepared, [b"hi"])
    assert one(cql, f"SELECT txt FROM {t} WHERE k = 7 AND c = 2").txt == "hi"
