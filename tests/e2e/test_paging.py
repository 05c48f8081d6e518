"""Paging across read shapes: whatever the page size, a read returns the rows it returns
unpaged, and those are the rows the data model says: partitions in token order (an IN's in key
order), rows in clustering order or its reverse, a partition with only static data as one row
of its static values (when no clustering column is restricted), LIMIT and PER PARTITION LIMIT
counting those rows too."""

import struct

import pytest
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement

from util import new_table

# Page sizes every query is read with: unpaged (the driver's default), and small ones that end
# pages inside partitions, at their ends, and on static-only partitions.
FETCH_SIZES = [None, 1, 2, 3, 5, 100]

# Partition k: its rows' clustering values (none: only static data), and its static value.
# k = 5 had rows, all deleted since; k = 6 has rows but no static value.
PARTITIONS = {0: [0, 1, 2], 1: [0], 2: [], 3: [0, 1, 2, 3], 4: [], 5: [], 6: [1, 2], 7: []}
STATIC = {k: 10 + k for k in PARTITIONS if k != 6}


def token(k):
    return Murmur3Token.from_key(struct.pack(">i", k)).value


@pytest.fixture(scope="module")
def statics(cql, test_keyspace):
    schema = "k int, c int, s int STATIC, v int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        for k, rows in PARTITIONS.items():
            if k in STATIC:
                cql.execute(f"INSERT INTO {t} (k, s) VALUES ({k}, {STATIC[k]})")
            for c in rows:
                cql.execute(f"INSERT INTO {t} (k, c, v) VALUES ({k}, {c}, {100 * k + c})")
        for c in range(3):
            cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (5, {c}, 0)")
        cql.execute(f"DELETE FROM {t} WHERE k = 5 AND c >= 0")
        yield t


def model(keys, reverse=False, clustering=None, per_partition=None, limit=None, static_only=True):
    """(k, c, s, v) rows of the partitions `keys` in that order, rows in clustering order (or
    reversed), only clustering values `clustering` accepts; a partition with a static value and
    no row shows as one row of it unless a clustering column is restricted."""
    out = []
    for k in keys:
        rows = [c for c in sorted(PARTITIONS[k], reverse=reverse) if clustering is None or clustering(c)]
        partition = [(k, c, STATIC.get(k), 100 * k + c) for c in rows]
        if not partition and static_only and clustering is None and k in STATIC:
            partition = [(k, None, STATIC[k], None)]
        out += partition[:per_partition]
    return out[:limit]


SCAN = sorted(PARTITIONS, key=token)


@pytest.mark.parametrize("query, expected", [
    ("SELECT k, c, s, v FROM {t}", model(SCAN)),
    ("SELECT k, c, s, v FROM {t} PER PARTITION LIMIT 1", model(SCAN, per_partition=1)),
    ("SELECT k, c, s, v FROM {t} PER PARTITION LIMIT 2", model(SCAN, per_partition=2)),
    ("SELECT k, c, s, v FROM {t} PER PARTITION LIMIT 1 LIMIT 3", model(SCAN, per_partition=1, limit=3)),
    ("SELECT k, c, s, v FROM {t} PER PARTITION LIMIT 2 LIMIT 6", model(SCAN, per_partition=2, limit=6)),
    ("SELECT k, c, s, v FROM {t} LIMIT 5", model(SCAN, limit=5)),
    ("SELECT k, c, s, v FROM {t} WHERE k IN (7, 0, 2, 4, 3) PER PARTITION LIMIT 2",
     model([0, 2, 3, 4, 7], per_partition=2)),
    ("SELECT k, c, s, v FROM {t} WHERE k IN (7, 0, 2, 4, 3) PER PARTITION LIMIT 1 LIMIT 3",
     model([0, 2, 3, 4, 7], per_partition=1, limit=3)),
    ("SELECT k, c, s, v FROM {t} WHERE k = 3 ORDER BY c DESC", model([3], reverse=True)),
    ("SELECT k, c, s, v FROM {t} WHERE k = 3 ORDER BY c DESC PER PARTITION LIMIT 3",
     model([3], reverse=True, per_partition=3)),
    ("SELECT k, c, s, v FROM {t} WHERE k = 2", model([2])),
    # A clustering restriction: static-only partitions show nothing.
    ("SELECT k, c, s, v FROM {t} WHERE c >= 1 ALLOW FILTERING", model(SCAN, clustering=lambda c: c >= 1)),
    ("SELECT k, c, s, v FROM {t} WHERE c >= 1 PER PARTITION LIMIT 1 ALLOW FILTERING",
     model(SCAN, clustering=lambda c: c >= 1, per_partition=1)),
    # A filter on the static column: static-only partitions whose value passes show.
    ("SELECT k, c, s, v FROM {t} WHERE s > 12 PER PARTITION LIMIT 1 ALLOW FILTERING",
     [r for r in model(SCAN, per_partition=1) if r[2] is not None and r[2] > 12]),
    ("SELECT k, c, s, v FROM {t} WHERE s > 12 ALLOW FILTERING",
     [r for r in model(SCAN) if r[2] is not None and r[2] > 12]),
])
def test_every_page_size_returns_the_same_rows(cql, statics, query, expected):
    """Before, a partition holding only static data that ended a storage page was taken for
    one continued on the next page and never shown: 1 row where Cassandra returns 5 (`PER
    PARTITION LIMIT 1` read one row per storage page)."""
    text = query.format(t=statics)
    for fetch_size in FETCH_SIZES:
        rows = [tuple(r) for r in cql.execute(SimpleStatement(text, fetch_size=fetch_size))]
        assert rows == expected, fetch_size


@pytest.mark.parametrize("query, expected", [
    ("SELECT DISTINCT k, s FROM {t}", [(k, STATIC.get(k)) for k in SCAN if k in STATIC or PARTITIONS[k]]),
    ("SELECT DISTINCT k, s FROM {t} LIMIT 4", [(k, STATIC.get(k)) for k in SCAN if k in STATIC or PARTITIONS[k]][:4]),
    ("SELECT k, s FROM {t} PER PARTITION LIMIT 1", [(r[0], r[2]) for r in model(SCAN, per_partition=1)]),
    ("SELECT count(*) FROM {t}", [(len(model(SCAN)),)]),
    ("SELECT k, count(*) FROM {t} GROUP BY k", [(k, len(model([k]))) for k in SCAN if model([k])]),
    ("SELECT k, count(*) FROM {t} GROUP BY k LIMIT 3", [(k, len(model([k]))) for k in SCAN if model([k])][:3]),
])
def test_distinct_aggregates_and_groups_page_alike(cql, statics, query, expected):
    text = query.format(t=statics)
    for fetch_size in FETCH_SIZES:
        rows = [tuple(r) for r in cql.execute(SimpleStatement(text, fetch_size=fetch_size))]
        assert rows == expected, fetch_size
