"""Cassandra 5.0's math functions abs, exp, log, log10 and round: one overload per numeric type,
returning the argument's type. Integer types compute in double and narrow as Java's casts do;
decimals (and varints, through decimals) keep max(precision, 32) significant digits."""

import math
from decimal import Decimal

import pytest
from cassandra import InvalidRequest

from util import new_table

NUMERIC = ["v", "b", "f", "d", "dec", "vi", "ti", "si"]
TYPES = ["int", "bigint", "float", "double", "decimal", "varint", "tinyint", "smallint"]


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    """Row c = 1: small positive numbers; c = 2: negative extremes; c = 3: zeros; c = 4: no
    values."""
    schema = ("k int, c int, v int, b bigint, f float, d double, dec decimal, vi varint, "
              "ti tinyint, si smallint, PRIMARY KEY (k, c)")
    with new_table(cql, test_keyspace, schema) as name:
        columns = ", ".join(NUMERIC)
        cql.execute(f"INSERT INTO {name} (k, c, {columns}) VALUES (1, 1, 7, 10, 1.5, 2.5, 1.1, "
                    "100, 1, 2)")
        cql.execute(f"INSERT INTO {name} (k, c, {columns}) VALUES (1, 2, -2147483648, "
                    "-9223372036854775808, -2.5, -2.5, -2.5, -100, -128, -32768)")
        cql.execute(f"INSERT INTO {name} (k, c, {columns}) VALUES (1, 3, 0, 0, 0, 0, 0, 0, 0, 0)")
        cql.execute(f"INSERT INTO {name} (k, c) VALUES (1, 4)")
        yield name


def row(cql, t, function, c, columns=NUMERIC):
    selection = ", ".join(f"{function}({col})" for col in columns)
    rs = cql.execute(f"SELECT {selection} FROM {t} WHERE k = 1 AND c = {c}")
    return rs.column_names, [ct.typename for ct in rs.column_types], tuple(rs.one())


@pytest.mark.parametrize("function", ["abs", "exp", "log", "log10", "round"])
def test_result_types_and_names(cql, t, function):
    names, types, _ = row(cql, t, function, 1)
    assert names == [f"system.{function}({c})" for c in NUMERIC]
    assert types == TYPES


def test_abs(cql, t):
    assert row(cql, t, "abs", 2)[2] == (
        # Math.abs of the minimum fixed-size value is itself.
        -2147483648, -9223372036854775808, 2.5, 2.5, Decimal("2.5"), 100, -128, -32768)


def test_exp(cql, t):
    v, b, f, d, dec, vi, ti, si = row(cql, t, "exp", 1)[2]
    # Integers truncate the double result (exp(7) = 1096.6...).
    assert (v, b, vi, ti, si) == (1096, 22026, 26881171418161354484126255515800000000000000, 2, 7)
    assert f == pytest.approx(4.481689, rel=1e-6) and d == pytest.approx(12.182493960703473)
    assert dec == Decimal("3.0041660239464331120584079535887")


def test_log_and_log10(cql, t):
    v, b, f, d, dec, vi, ti, si = row(cql, t, "log", 1)[2]
    assert (v, b, vi, ti, si) == (1, 2, 4, 0, 0)
    assert d == pytest.approx(math.log(2.5))
    assert dec == Decimal("0.095310179804324860043952123280765")
    v, b, f, d, dec, vi, ti, si = row(cql, t, "log10", 1)[2]
    assert (v, b, vi, ti, si) == (0, 1, 2, 0, 0)
    assert dec == Decimal("0.041392685158225040750199971243024")


def test_log_of_zero_and_negative_fixed_size_numbers(cql, t):
    # log(0) is -Infinity, which narrows to the minimum value; NaN narrows to 0 (then the
    # int is cut to a byte or short).
    columns = ["v", "b", "f", "d", "ti", "si"]
    zero = row(cql, t, "log", 3, columns)[2]
    assert zero[:2] == (-2147483648, -9223372036854775808) and zero[4:] == (0, 0)
    assert zero[2] == -math.inf and zero[3] == -math.inf
    negative = row(cql, t, "log", 2, columns)[2]
    assert negative[:2] == (0, 0) and negative[4:] == (0, 0)
    assert math.isnan(negative[2]) and math.isnan(negative[3])


@pytest.mark.parametrize("function, message", [
    ("log", "Natural log of number zero or less"), ("log10", "Log10 of number zero or less")])
@pytest.mark.parametrize("column", ["dec", "vi"])
def test_log_of_zero_big_numbers_is_a_server_error(cql, t, function, message, column):
    # Cassandra lets BigDecimal's ArithmeticException through as a server error (arguably a
    # bug: FUNCTION_FAILURE would fit); Helenus answers the same.
    with pytest.raises(Exception, match=message) as info:
        cql.execute(f"SELECT {function}({column}) FROM {t} WHERE k = 1 AND c = 3")
    assert "Server error" in str(info.value)


def test_round(cql, t):
    assert row(cql, t, "round", 1)[2] == (7, 10, 2.0, 3.0, Decimal("1"), 100, 1, 2)
    # Math.round rounds half up (-2.5 -> -2); a decimal rounds half away from zero.
    assert row(cql, t, "round", 2, ["f", "d", "dec"])[2] == (-2.0, -2.0, Decimal("-3"))


def test_null_and_empty_give_null(cql, t):
    for function in ["abs", "exp", "log", "log10", "round"]:
        assert row(cql, t, function, 4)[2] == (None,) * len(NUMERIC)


def test_decimal_exact_cases_and_precision(cql, t):
    # BigDecimalMath's exact answers: exp(0) = 1, log(1) = 0, log10(10^n) = n, and log10(1) is
    # 0 / ln(10), whose scale is -33.
    rs = cql.execute(f"SELECT log10((decimal)1) FROM {t} WHERE k = 1 AND c = 1")
    assert str(rs.one()[0]) == "0E+33"
    rs = cql.execute(f"SELECT exp((decimal)0), log((decimal)1), log10((decimal)100), "
                     "log10((decimal)0.001), exp((decimal)1000), "
                     "log10((decimal)123456789012345678901234567890.123456789) "
                     f"FROM {t} WHERE k = 1 AND c = 1")
    assert tuple(rs.one()) == (
        Decimal("1"), Decimal("0"), Decimal("2"), Decimal("-3.0000000000000000000000000000000"),
        Decimal("1.9700711140170469938888793522433E+434"),
        # A 39-digit argument keeps 39 digits.
        Decimal("29.0915149772126998957108302782343211744"))


def test_decimal_round_to_scale_zero(cql, t):
    rs = cql.execute(f"SELECT round((decimal)1.4999), round((decimal)-0.5), round((decimal)12e3) "
                     f"FROM {t} WHERE k = 1 AND c = 1")
    assert tuple(rs.one()) == (Decimal("1"), Decimal("-1"), Decimal("12000"))


def test_overloads_of_literals(cql, t):
    # A literal picks the overload of its preferred type (int, double); NULL fits them all.
    rs = cql.execute(f"SELECT abs(-2), abs(-2.5), abs((smallint)-2) FROM {t} WHERE k = 1 AND c = 1")
    assert [ct.typename for ct in rs.column_types] == ["int", "double", "smallint"]
    assert tuple(rs.one()) == (2, 2.5, 2)
    with pytest.raises(InvalidRequest, match="Ambiguous call to function abs"):
        cql.execute(f"SELECT abs(null) FROM {t} WHERE k = 1")
    with pytest.raises(InvalidRequest, match="Invalid call to function abs, none of its type "
                       "signatures match"):
        cql.execute(f"SELECT abs(k, c) FROM {t} WHERE k = 1")
    with pytest.raises(InvalidRequest, match="Type error: 'x' cannot be passed|none of its type "
                       "signatures match"):
        cql.execute(f"SELECT exp('x') FROM {t} WHERE k = 1")
