"""Cassandra 5.0's collection functions: map_keys, map_values, collection_count, and
collection_min/max/sum/avg, which compute over a set's or list's elements exactly as the
aggregates of the same name compute over rows (sums wrap, integer averages truncate)."""

from decimal import Decimal

import pytest
from cassandra import InvalidRequest

from util import new_table


@pytest.fixture(scope="module")
def t(cql, test_keyspace):
    """Row 1 has every collection set; row 2 none; row 3 empty frozen collections."""
    schema = (
        "k int PRIMARY KEY, m map<text, int>, s set<int>, l list<int>, ld list<double>, "
        "lde list<decimal>, lvi list<varint>, lti list<tinyint>, lb list<bigint>, lt list<text>, "
        "fl frozen<list<int>>, fm frozen<map<int, text>>"
    )
    with new_table(cql, test_keyspace, schema) as name:
        cql.execute(
            f"INSERT INTO {name} (k, m, s, l, ld, lde, lvi, lti, lb, lt, fm) VALUES (1, "
            "{'b': 2, 'a': 1}, {3, 1, 2}, [10, 20, 5], [1.0, 2.0, 4.0], [1.5, 2.25, 1], "
            "[10, 20, 5], [100, 100, 100], [9223372036854775807, 1], ['b', 'a', 'c'], "
            "{2: 'y', 1: 'x'})"
        )
        cql.execute(f"INSERT INTO {name} (k) VALUES (2)")
        cql.execute(f"INSERT INTO {name} (k, fl, fm) VALUES (3, [], {{}})")
        yield name


def select(cql, t, selection, k=1):
    rs = cql.execute(f"SELECT {selection} FROM {t} WHERE k = {k}")
    return rs.column_names, [ct.cql_parameterized_type() for ct in rs.column_types], rs.one()


def test_map_keys_and_values(cql, t):
    names, types, row = select(cql, t, "map_keys(m), map_values(m), map_keys(fm), map_values(fm)")
    assert names == ["system.map_keys(m)", "system.map_values(m)", "system.map_keys(fm)",
                     "system.map_values(fm)"]
    assert types == ["set<varchar>", "list<int>", "set<int>", "list<varchar>"]
    # Values follow the keys' order.
    assert (sorted(row[0]), row[1], sorted(row[2]), row[3]) == (["a", "b"], [1, 2], [1, 2],
                                                                  ["x", "y"])


def test_collection_count(cql, t):
    _, types, row = select(cql, t, "collection_count(m), collection_count(s), "
                           "collection_count(l), collection_count(fm)")
    assert types == ["int"] * 4
    assert tuple(row) == (2, 3, 3, 2)


def test_min_max_of_sets_and_lists(cql, t):
    _, types, row = select(cql, t, "collection_min(s), collection_max(s), collection_min(l), "
                           "collection_max(l), collection_min(lt), collection_max(lt)")
    assert types == ["int", "int", "int", "int", "varchar", "varchar"]
    assert tuple(row) == (1, 3, 5, 20, "a", "c")


def test_sum_and_avg_keep_the_element_type(cql, t):
    _, types, row = select(cql, t, "collection_sum(l), collection_avg(l), collection_sum(ld), "
                           "collection_avg(ld), collection_sum(lde), collection_avg(lde), "
                           "collection_sum(lvi), collection_avg(lvi)")
    assert types == ["int", "int", "double", "double", "decimal", "decimal", "varint", "varint"]
    # Integer averages truncate; the decimal average is the aggregate's rounded running mean.
    assert tuple(row) == (35, 11, 7.0, pytest.approx(7 / 3), Decimal("4.75"), Decimal("1.59"),
                          35, 11)


def test_sum_wraps_and_avg_does_not_overflow(cql, t):
    _, _, row = select(cql, t, "collection_sum(lti), collection_avg(lti), collection_sum(lb), "
                       "collection_avg(lb)")
    assert tuple(row) == (44, 100, -9223372036854775808, 4611686018427387904)


def test_null_and_empty_collections(cql, t):
    # A collection never set is null: every function gives null.
    _, _, row = select(cql, t, "map_keys(m), collection_count(s), collection_sum(l), "
                       "collection_min(l)", k=2)
    assert tuple(row) == (None, None, None, None)
    # An empty frozen collection counts and sums to 0 and has no minimum.
    _, _, row = select(cql, t, "collection_count(fl), collection_sum(fl), collection_avg(fl), "
                       "collection_min(fl), collection_count(fm), map_keys(fm)", k=3)
    assert (tuple(row[:5]), list(row[5])) == ((0, 0, 0, None, 0), [])


@pytest.mark.parametrize("selection, message", [
    ("map_keys(l)", "Function system.map_keys requires a map argument, but found argument l of "
     "type list<int>"),
    ("collection_count(k)", "Function system.collection_count requires a collection argument, "
     "but found argument k of type int"),
    ("collection_min(m)", "Function system.collection_min requires a set or list argument, but "
     "found argument m of type map<text, int>"),
    ("collection_sum(lt)", "Function system.collection_sum requires a numeric set/list argument, "
     "but found argument lt of type list<text>"),
    ("collection_count(null)", "Cannot infer type of argument NULL in call to function "
     "system.collection_count"),
])
def test_argument_errors(cql, t, selection, message):
    with pytest.raises(InvalidRequest, match=message.replace("(", "\\(").replace(")", "\\)")):
        cql.execute(f"SELECT {selection} FROM {t} WHERE k = 1")


def test_typed_collection_literal(cql, t):
    _, _, row = select(cql, t, "collection_count((list<int>)[1, 2])")
    assert row[0] == 2


@pytest.mark.parametrize("selection, value, cql_type", [
    ("collection_count([1, 2])", 2, "int"),
    ("collection_count({'a', 'b'})", 2, "int"),
    ("collection_count([[1], [2]])", 2, "int"),
    ("collection_min(['b', 'a'])", "a", "ascii"),
    ("collection_max(['b', 'é'])", "é", "varchar"),
    ("collection_max({1, 5, 3})", 5, "int"),
    ("collection_sum([1.5, 2.5])", 4.0, "double"),
    ("collection_avg([1, 2])", 1, "int"),
])
def test_collection_literals_of_constants_have_their_type_inferred(cql, t, selection, value, cql_type):
    """As Cassandra 5.0: a list or set literal whose constants share a preferred type (ASCII
    and other strings together are text) is a collection of that type."""
    _, types, row = select(cql, t, selection)
    assert (row[0], types[0]) == (value, cql_type)


@pytest.mark.parametrize("selection, kind", [
    ("collection_count([])", "collection"),
    ("collection_count([1, 'a'])", "collection"),
    ("collection_count([null])", "collection"),
    ("collection_count({1: 'x'})", "collection"),
    ("collection_min([])", "numeric_set_or_list"),
    ("collection_sum([1, 3000000000])", "numeric_set_or_list"),
    ("map_keys({1: 'x'})", "map"),
])
def test_collection_literals_whose_type_cannot_be_inferred(cql, t, selection, kind):
    with pytest.raises(InvalidRequest) as error:
        cql.execute(f"SELECT {selection} FROM {t} WHERE k = 1")
    name = selection.split("(")[0]
    assert f"in call to function system.{name}({kind}): use type casts to disambiguate" \
        in str(error.value)


def test_in_a_term_only_set_literals_have_their_type_inferred(cql, t):
    """Cassandra 5.0.9 infers a set literal's type in a WHERE or INSERT term, but not a list
    literal's."""
    assert [r.k for r in cql.execute(f"SELECT k FROM {t} WHERE k = collection_max({{1, 2}})")] == [2]
    with pytest.raises(InvalidRequest) as error:
        cql.execute(f"SELECT k FROM {t} WHERE k = collection_count([1, 2])")
    assert "Cannot infer type of argument [1, 2] in call to function system.collection_count" \
        in str(error.value)
