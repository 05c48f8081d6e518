"""Clustering restrictions on columns of mixed clustering order (some ASC, some DESC): single-
and multi-column slices, `=`, IN, forward and reversed, with LIMIT and paging, in SELECT and
DELETE. A multi-column slice compares tuples in the values' own order whatever the clustering
order (`(b, c) > (1, 2)` is `b > 1 OR (b = 1 AND c > 2)`), and rows come in clustering order
(or its reverse with ORDER BY). Each case is checked against a small model of that rule.
"""

import itertools
import operator

import pytest
from cassandra.query import SimpleStatement

from util import new_table

ORDERS = list(itertools.product(["ASC", "DESC"], repeat=3))
VALUES = range(3)
OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}

# Restrictions on (b, c, d) after `a = 0`, as (CQL, predicate on a row (b, c, d)). Tuples
# compare as Python tuples do: lexicographically, in the values' order.
RESTRICTIONS = [
    ("(b, c, d) > (0, 1, 0)", lambda r: r > (0, 1, 0)),
    ("(b, c, d) >= (1, 1, 1) AND (b, c, d) < (2, 0, 2)", lambda r: (1, 1, 1) <= r < (2, 0, 2)),
    ("(b, c) < (1, 1)", lambda r: r[:2] < (1, 1)),
    ("(b, c) <= (1, 1)", lambda r: r[:2] <= (1, 1)),
    ("(b, c, d) > (0, 1, 0) AND b < 2", lambda r: r > (0, 1, 0) and r[0] < 2),
    ("(b, c, d) > (0, 1, 0) AND (b) <= (1)", lambda r: r > (0, 1, 0) and r[0] <= 1),
    ("b > 0 AND (b, c) < (2, 1)", lambda r: r[0] > 0 and r[:2] < (2, 1)),
    ("(b, c) > (0, 2) AND (b, c, d) <= (2, 0, 1)", lambda r: r[:2] > (0, 2) and r <= (2, 0, 1)),
    ("(b) >= (1)", lambda r: r[0] >= 1),
    ("b = 1 AND (c, d) >= (1, 1)", lambda r: r[0] == 1 and r[1:] >= (1, 1)),
    ("b = 1 AND (c, d) > (0, 2) AND (c, d) <= (2, 0)", lambda r: r[0] == 1 and (0, 2) < r[1:] <= (2, 0)),
    ("b = 2 AND c > 0 AND (c, d) < (2, 1)", lambda r: r[0] == 2 and r[1] > 0 and r[1:] < (2, 1)),
    ("b IN (0, 2) AND (c, d) > (1, 1)", lambda r: r[0] in (0, 2) and r[1:] > (1, 1)),
    ("b IN (2, 0) AND c > 0", lambda r: r[0] in (0, 2) and r[1] > 0),
    ("b = 0 AND c IN (2, 0) AND d >= 1", lambda r: r[0] == 0 and r[1] in (0, 2) and r[2] >= 1),
    ("(b, c) IN ((1, 0), (0, 2)) AND d > 0", lambda r: r[:2] in ((1, 0), (0, 2)) and r[2] > 0),
    ("(b, c) = (1, 2) AND d < 2", lambda r: r[:2] == (1, 2) and r[2] < 2),
    ("(b, c) = (1, 2) AND (d) < (2)", lambda r: r[:2] == (1, 2) and r[2] < 2),
    ("(b, c, d) > (2, 2, 2)", lambda r: r > (2, 2, 2)),
    ("(b, c, d) > (1, 1, 1) AND (b, c, d) < (1, 1, 2)", lambda r: (1, 1, 1) < r < (1, 1, 2)),
    ("(b, c) >= (2, 0) AND (b, c) <= (0, 2)", lambda r: False),
]


def clustering_order(orders):
    """The sort key of a row (b, c, d) in clustering order."""
    return lambda r: tuple(v if o == "ASC" else -v for v, o in zip(r, orders))


@pytest.fixture(scope="module", params=ORDERS, ids=lambda o: "-".join(o))
def mixed(request, cql, test_keyspace):
    """A table keyed (a, b, c, d) with (b, c, d) in one of the 8 orders, holding every
    (b, c, d) in 0..2 under a = 0 (27 rows; v = 100b + 10c + d)."""
    orders = request.param
    schema = "a int, b int, c int, d int, v int, PRIMARY KEY (a, b, c, d)"
    order = ", ".join(f"{n} {o}" for n, o in zip("bcd", orders))
    with new_table(cql, test_keyspace, schema, f"WITH CLUSTERING ORDER BY ({order})") as t:
        insert = cql.prepare(f"INSERT INTO {t} (a, b, c, d, v) VALUES (0, ?, ?, ?, ?)")
        for r in itertools.product(VALUES, repeat=3):
            cql.execute(insert, [*r, 100 * r[0] + 10 * r[1] + r[2]])
        yield t, orders


def test_mixed_order_slices_select_in_clustering_order(cql, mixed):
    """Before, a multi-column slice on DESC columns compared in clustering order: no rows where
    Cassandra returns 23, 8 where it returns 7, and rows in the wrong order."""
    t, orders = mixed
    every = sorted(itertools.product(VALUES, repeat=3), key=clustering_order(orders))
    reversed_order = ", ".join(f"{n} {'DESC' if o == 'ASC' else 'ASC'}" for n, o in zip("bcd", orders))
    for where, predicate in RESTRICTIONS:
        forward = [r for r in every if predicate(r)]
        for tail, expected in [("", forward), (f" ORDER BY {reversed_order}", forward[::-1])]:
            query = f"SELECT b, c, d FROM {t} WHERE a = 0 AND {where}{tail}"
            for fetch_size in (None, 1, 4):
                rows = [tuple(r) for r in cql.execute(SimpleStatement(query, fetch_size=fetch_size))]
                assert rows == expected, (query, fetch_size)
            rows = [tuple(r) for r in cql.execute(SimpleStatement(f"{query} LIMIT 5", fetch_size=2))]
            assert rows == expected[:5], query
            count = cql.execute(f"SELECT count(*) FROM {t} WHERE a = 0 AND {where}").one()[0]
            assert count == len(expected), where


DELETIONS = [
    ("(b, c) > (1, 1)", lambda r: r[:2] > (1, 1)),
    ("(b) > (1)", lambda r: r[0] > 1),
    ("(b, c, d) <= (0, 1, 1)", lambda r: r <= (0, 1, 1)),
    ("(b, c, d) >= (0, 2, 1) AND (b, c, d) < (2, 0, 1)", lambda r: (0, 2, 1) <= r < (2, 0, 1)),
    ("b = 1 AND (c, d) >= (1, 1) AND (c, d) < (2, 1)", lambda r: r[0] == 1 and (1, 1) <= r[1:] < (2, 1)),
    ("b = 2 AND c > 0 AND (c, d) < (2, 1)", lambda r: r[0] == 2 and r[1] > 0 and r[1:] < (2, 1)),
    ("b IN (0, 2) AND (c, d) > (1, 0)", lambda r: r[0] in (0, 2) and r[1:] > (1, 0)),
    ("b > 0 AND b < 2", lambda r: r[0] == 1),
    ("(b, c) > (2, 0) AND (b, c) < (1, 0)", lambda r: False),
]


@pytest.mark.parametrize("where, deleted", DELETIONS, ids=[w for w, _ in DELETIONS])
def test_mixed_order_range_deletions_delete_the_tuples_in_range(cql, mixed, where, deleted):
    """Before, DELETE took a multi-column slice's bounds in clustering order: `(b) > (1)` on a
    DESC column deleted b = 0 instead of b = 2."""
    t, orders = mixed
    partition = 1 + [w for w, _ in DELETIONS].index(where)
    insert = cql.prepare(f"INSERT INTO {t} (a, b, c, d, v) VALUES ({partition}, ?, ?, ?, 0)")
    for r in itertools.product(VALUES, repeat=3):
        cql.execute(insert, r)
    cql.execute(f"DELETE FROM {t} WHERE a = {partition} AND {where}")
    every = sorted(itertools.product(VALUES, repeat=3), key=clustering_order(orders))
    rows = [tuple(r) for r in cql.execute(f"SELECT b, c, d FROM {t} WHERE a = {partition}")]
    assert rows == [r for r in every if not deleted(r)]
