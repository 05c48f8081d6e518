"""Functions and operators that fail while they execute: Cassandra 5.0 answers FUNCTION_FAILURE
(0x1400), whose extra fields name the function that failed — `system._divide(int, int)` for
`v / 0`, since an operator runs as a native function — and not INVALID, which is for statements
that are wrong before anything runs. Failures of fromJson() are in test_fromjson.py."""

import math

import pytest
from cassandra import FunctionFailure

from util import new_table


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    """Row (1, 1) has a number of every numeric type and a timestamp; row (1, 2) only its key."""
    schema = (
        "k int, c int, v int, b bigint, ti tinyint, vi varint, dec decimal, f float, d double, "
        "ts timestamp, dt date, PRIMARY KEY (k, c)"
    )
    with new_table(cql, test_keyspace, schema) as name:
        cql.execute(
            f"INSERT INTO {name} (k, c, v, b, ti, vi, dec, f, d, ts, dt) VALUES (1, 1, 7, 10, 1, "
            "100, 1.1, 1.5, 2.5, '2020-01-02 03:04:05.678+0000', '2020-01-02')"
        )
        cql.execute(f"INSERT INTO {name} (k, c) VALUES (1, 2)")
        yield name


def failure(cql, query, message, function, arg_types, parameters=None):
    """Runs `query`, which must fail with FUNCTION_FAILURE naming system.function(arg_types)."""
    with pytest.raises(FunctionFailure, match=message) as info:
        cql.execute(query, parameters)
    assert (info.value.keyspace, info.value.function, info.value.arg_types) == (
        "system", function, arg_types)


@pytest.mark.parametrize("column, left, why", [
    ("v", "int", "/ by zero"),
    ("b", "bigint", "/ by zero"),
    ("ti", "tinyint", "/ by zero"),
    # Big numbers fail as java.math.BigInteger does.
    ("vi", "varint", "BigInteger divide by zero"),
    ("dec", "decimal", "BigInteger divide by zero"),
])
def test_division_by_zero(cql, t, column, left, why):
    failure(cql, f"SELECT {column} / 0 FROM {t} WHERE k = 1 AND c = 1",
            f"the operation '{left} / int' failed: {why}", "_divide", [left, "int"])


@pytest.mark.parametrize("column, left, why", [
    ("v", "int", "/ by zero"),
    ("vi", "varint", "BigInteger divide by zero"),
    # BigDecimal.remainder says it differently from BigDecimal.divide.
    ("dec", "decimal", "Division by zero"),
])
def test_modulo_by_zero(cql, t, column, left, why):
    failure(cql, f"SELECT {column} % 0 FROM {t} WHERE k = 1 AND c = 1",
            f"the operation '{left} % int' failed: {why}", "_modulo", [left, "int"])


def test_decimal_division_by_floating_zero(cql, t):
    # The double 0.0 becomes the decimal 0.0, and dividing by it fails like 0.
    failure(cql, f"SELECT dec / 0.0 FROM {t} WHERE k = 1 AND c = 1",
            "the operation 'decimal / double' failed: BigInteger divide by zero", "_divide",
            ["decimal", "double"])


def test_floating_point_division_by_zero_is_infinity(cql, t):
    row = cql.execute(f"SELECT f / 0, d / 0, d % 0 FROM {t} WHERE k = 1 AND c = 1").one()
    assert row[0] == math.inf and row[1] == math.inf and math.isnan(row[2])


def test_division_of_null_by_zero_is_null(cql, t):
    # Row (1, 2) has no v: the operation never runs.
    assert cql.execute(f"SELECT v / 0 FROM {t} WHERE k = 1 AND c = 2").one()[0] is None


def test_date_plus_sub_day_duration(cql, t):
    failure(cql, f"SELECT dt + 1h FROM {t} WHERE k = 1 AND c = 1",
            "the operation 'date \\+ duration' failed: The duration must have a day precision. "
            "Was: 1h", "_add", ["date", "duration"])


def test_failure_inside_an_aggregate(cql, t):
    # The failing row is the first of the partition; the aggregate never completes.
    failure(cql, f"SELECT sum(v / 0) FROM {t} WHERE k = 1",
            "the operation 'int / int' failed: / by zero", "_divide", ["int", "int"])


def test_failure_with_a_bound_divisor(cql, t):
    # The marker needs a type hint (v / ? is ambiguous); the failure comes at execution.
    prepared = cql.prepare(f"SELECT b % (bigint)? FROM {t} WHERE k = 1 AND c = 1")
    assert cql.execute(prepared, [3]).one()[0] == 1
    failure(cql, prepared, "the operation 'bigint % bigint' failed: / by zero", "_modulo",
            ["bigint", "bigint"], [0])
