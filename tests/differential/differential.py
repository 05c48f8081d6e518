#!/usr/bin/env python3
"""Differential oracle: the same random statements against Helenus and Apache Cassandra 5.0,
results compared.

Seeded and reproducible: `--seed S` makes the same tables, the same writes (with explicit
`USING TIMESTAMP`, so last-write-wins is decided the same way on both) and the same reads.
Every table gets its own statements, generated from the seed and the table's number, so
`--table N` replays one table alone. Bounded: `--statements` in all (default 3000), at most
`STATEMENT_TIMEOUT_S` per request, IN lists of at most `MAX_IN_VALUES` values (Cassandra 5.0
burns CPU on large IN products, and the node is shared).

Tables of every shape: partition keys of 1-3 columns, 0-4 clustering columns of mixed order
(ASC/DESC), static columns, collections (frozen and not), and key types whose equal values have
several byte forms (decimal, varint). Writes: INSERT, UPDATE (collection operations too), DELETE
of partitions, rows, ranges (single- and multi-column slices), columns; IN and empty IN in
them. Reads: SELECT with `=`/`IN`/token restrictions on the partition key or a full scan,
clustering prefixes, IN, single- and multi-column slices, ORDER BY, LIMIT, PER PARTITION LIMIT,
DISTINCT, count(*) and other aggregates, GROUP BY, filtering, SELECT JSON, and paging (small
fetch sizes: every page is fetched and the rows concatenated).

What is compared: for a statement both servers refuse, nothing more (the wording is left to the
conformance tests); for one only one server refuses, the refusal; for reads both answer, the
rows, in order (CQL defines the order of every read generated here: token order, then
clustering order or its reverse; the partitions of an IN in key order). Mismatches are printed
and written to `--report` as JSON lines; the exit status is 1 if there were any, 0 otherwise,
and 0 with a note when Cassandra cannot be reached (skipped).

    # against the shared Cassandra and a Helenus the script starts ($HELENUS_BIN or
    # $CARGO_TARGET_DIR/debug/helenus):
    python tests/differential/differential.py --seed 1 --statements 3000
    # against a Helenus already running:
    python tests/differential/differential.py --helenus 127.0.0.1:9043
"""

import argparse
import datetime
import decimal
import itertools
import json
import math
import re
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from cassandra import InvalidRequest  # noqa: E402
from cassandra.query import SimpleStatement  # noqa: E402
from cassandra.util import Date, Duration, OrderedMapSerializedKey, SortedSet, Time  # noqa: E402

from util import (  # noqa: E402
    HelenusNode,
    cql_ready,
    default_helenus_bin,
    new_cluster,
)

# A request that takes longer than this on either server is reported as a mismatch (a timeout):
# nothing generated here should take more than a fraction of it.
STATEMENT_TIMEOUT_S = 20
# At most this many values in one IN list, and at most two IN columns in one statement, so no
# statement asks Cassandra for a large product of keys.
MAX_IN_VALUES = 4
# Reads stop paging after this many pages (a bug that loops on a paging state must not hang
# the run): far more than any table here holds rows.
MAX_PAGES = 2000
# Mismatches printed in full; the rest are only counted (all go to the report file).
PRINTED_MISMATCHES = 20

# Values of each type used by the generator: few, so that restrictions meet rows. Text as a
# CQL literal. Equal values with several forms (decimal 1.0 and 1.00, varint) are included on
# purpose: which form a key keeps is part of what is compared.
SCALARS = {
    "int": ["-1", "0", "1", "2", "3"],
    "bigint": ["-5", "0", "1", "2", "9000000000"],
    "smallint": ["-2", "0", "1", "2"],
    "tinyint": ["-1", "0", "1", "2"],
    "varint": ["-1", "0", "1", "2", "123456789012345678901234567890"],
    "decimal": ["0", "1", "1.0", "1.00", "-1.5", "2.50", "1E+3", "1000", "0.010"],
    "double": ["-1.5", "0.0", "1.0", "2.25", "1e10"],
    "float": ["-1.5", "0.0", "1.0", "2.25"],
    "text": ["''", "'a'", "'b'", "'ab'", "'c'"],
    "ascii": ["'a'", "'b'", "'ab'", "'z'"],
    "boolean": ["true", "false"],
    "date": ["'2020-01-01'", "'1970-01-01'", "'2038-01-19'"],
    "timestamp": ["'2020-01-01 00:00:00+0000'", "'1969-12-31 23:59:59+0000'", "0"],
    "time": ["'00:00:00'", "'01:02:03.456'", "'23:59:59'"],
    "uuid": ["00000000-0000-0000-0000-000000000000", "00000000-0000-1000-8000-000000000001",
             "ffffffff-ffff-4fff-bfff-ffffffffffff", "11111111-2222-4333-8444-555555555555"],
    "timeuuid": ["d2177dd0-eaa2-11de-a572-001b779c76e3", "e0000000-0000-1000-8000-000000000001",
                 "00000000-0000-1000-8000-000000000000", "d2177dd0-eaa2-11de-a572-001b779c76e4"],
    "blob": ["0x", "0x00", "0x01", "0x0102"],
    "inet": ["'127.0.0.1'", "'::1'", "'10.0.0.1'"],
}
# Values only regular columns take (NaN and infinities: JSON writes them as null).
REGULAR_EXTRA = {
    "double": ["NaN", "Infinity", "-Infinity"],
    "float": ["NaN", "-Infinity"],
    "duration": ["1d", "2h3m", "-1mo", "0s"],
}
# Key types: types whose values may be clustering and partition key columns (a partition key
# value may not be empty: '' and 0x are dropped for them).
KEY_TYPES = ["int", "int", "int", "bigint", "smallint", "tinyint", "varint", "decimal", "double",
             "float", "text", "text", "ascii", "boolean", "date", "timestamp", "time", "uuid",
             "timeuuid", "blob", "inet", "frozen<list<int>>", "frozen<set<text>>",
             "tuple<int, text>", "frozen<udt>"]
REGULAR_TYPES = ["int", "text", "bigint", "double", "float", "decimal", "boolean", "duration",
                 "set<int>", "list<text>", "map<int, text>", "frozen<map<text, int>>",
                 "tuple<int, double>", "udt", "frozen<udt>"]
# The user type every generated keyspace has (`udt` in the types above).
UDT_FIELDS = [("a", "int"), ("b", "text")]


def literal(rng, ty, key=False, partition=False):
    """A random CQL literal of type `ty`."""
    if ty.startswith("frozen<"):
        return literal(rng, ty[len("frozen<"):-1], key, partition)
    if ty.startswith("list<") or ty.startswith("set<"):
        inner = ty[ty.index("<") + 1:-1]
        n = rng.randint(0 if not partition else 1, 3)
        items = [literal(rng, inner, True, True) for _ in range(n)]
        return ("[%s]" if ty.startswith("list") else "{%s}") % ", ".join(items)
    if ty.startswith("map<"):
        # Distinct keys: which of two equal keys' values a map literal keeps is not
        # specified, and Cassandra 5.0 keeps either (the first, the last, the smaller value).
        k, v = [t.strip() for t in ty[4:-1].split(",")]
        n = rng.randint(0 if not partition else 1, 3)
        keys = list(dict.fromkeys(literal(rng, k, True, True) for _ in range(n)))
        return "{%s}" % ", ".join(f"{key}: {literal(rng, v, True, True)}" for key in keys)
    if ty.startswith("tuple<"):
        parts = [t.strip() for t in ty[6:-1].split(",")]
        return "(%s)" % ", ".join(literal(rng, p, key, partition) for p in parts)
    if ty == "udt":
        fields = [(n, t) for n, t in UDT_FIELDS if key or rng.random() < 0.8]
        return "{%s}" % ", ".join(f"{n}: {literal(rng, t, True, partition)}" for n, t in fields)
    values = list(SCALARS.get(ty, []))
    if not key:
        values += REGULAR_EXTRA.get(ty, [])
    if partition:
        values = [v for v in values if v not in ("''", "0x")]
    return rng.choice(values)


class Table:
    """A generated table: its columns, their kinds and clustering orders."""

    def __init__(self, rng, keyspace, number, shape="all"):
        self.name = f"{keyspace}.t{number}"
        self.number = number
        self.shape = shape
        if shape == "slices":
            # Clustering restrictions alone: int keys of 2-4 clustering columns in every
            # ASC/DESC mix, every combination of their values present (`grid`).
            self.pk = [("k0", "int")]
            n_ck = rng.randint(2, 4)
            self.ck = [(f"c{i}", "int", rng.choice(["ASC", "DESC"])) for i in range(n_ck)]
            self.statics = [("s0", "int")] if rng.random() < 0.5 else []
            self.regular = [("v0", "int")]
        else:
            self.pk = [(f"k{i}", rng.choice(KEY_TYPES))
                       for i in range(rng.choice([1, 1, 1, 2, 3]))]
            n_ck = rng.choice([0, 1, 2, 2, 3, 3, 4])
            self.ck = [(f"c{i}", rng.choice(KEY_TYPES), rng.choice(["ASC", "DESC"]))
                       for i in range(n_ck)]
            self.statics = [(f"s{i}", rng.choice(["int", "text", "set<int>"]))
                            for i in range(rng.choice([0, 0, 1, 2]) if n_ck else 0)]
            self.regular = [(f"v{i}", rng.choice(REGULAR_TYPES))
                            for i in range(rng.randint(1, 4))]
        # The one form each decimal value is written in as a clustering value of this table.
        # Of two forms of one row, Helenus keeps the last write's and Cassandra the first
        # arrival's (while the row stays in one memtable), a documented difference; one form
        # per value still checks that a row reads back in the form written.
        forms = {}
        for text in SCALARS["decimal"]:
            forms.setdefault(decimal.Decimal(text), []).append(text)
        self.decimal_form = {value: rng.choice(texts) for value, texts in forms.items()}

    def written(self, ty, text):
        """A clustering value to write: a decimal in this table's form for its value."""
        if ty == "decimal":
            return self.decimal_form[decimal.Decimal(text)]
        return text

    def create(self):
        keyspace = self.name.split(".")[0]
        cql = lambda t: t.replace("udt", f"{keyspace}.udt")  # noqa: E731
        columns = [f"{n} {cql(t)}" for n, t in self.pk]
        columns += [f"{n} {cql(t)}" for n, t, _ in self.ck]
        columns += [f"{n} {cql(t)} static" for n, t in self.statics]
        columns += [f"{n} {cql(t)}" for n, t in self.regular]
        pk = ", ".join(n for n, _ in self.pk)
        if len(self.pk) > 1:
            pk = f"({pk})"
        key = ", ".join([pk] + [n for n, _, _ in self.ck])
        text = f"CREATE TABLE {self.name} ({', '.join(columns)}, PRIMARY KEY ({key}))"
        if self.ck:
            order = ", ".join(f"{n} {o}" for n, _, o in self.ck)
            text += f" WITH CLUSTERING ORDER BY ({order})"
        return text

    def grid(self):
        """The writes filling a "slices" table: partitions k0 = 0 and 1, each holding every
        combination of clustering values 0..2 (3 to 81 rows)."""
        names = ", ".join(n for n, _, _ in self.ck)
        out = []
        for k in (0, 1):
            for values in itertools.product(range(3), repeat=len(self.ck)):
                v = int("".join(map(str, values)))
                out.append(f"INSERT INTO {self.name} (k0, {names}, v0) VALUES ({k}, "
                           f"{', '.join(map(str, values))}, {v}) USING TIMESTAMP 1")
        return out

    def simple_regular(self):
        return [(n, t) for n, t in self.regular
                if ("<" not in t or t.startswith("frozen")) and t != "udt"]


class Generator:
    """Random statements for one table."""

    def __init__(self, rng, table):
        self.rng = rng
        self.t = table
        self.timestamp = 1_000_000

    def next_timestamp(self):
        # Sometimes the same timestamp again: ties are broken by Cassandra's rules (a
        # tombstone wins, then the larger value).
        self.timestamp += self.rng.choice([0, 1, 1, 2, 3])
        return self.timestamp

    def pk_eq(self, column_type=None):
        return " AND ".join(f"{n} = {literal(self.rng, t, True, True)}" for n, t in self.t.pk)

    def in_list(self, ty, partition=False, allow_empty=True):
        n = self.rng.randint(0 if allow_empty else 1, MAX_IN_VALUES)
        if n == 0 and self.rng.random() < 0.5:
            n = 1
        return "(%s)" % ", ".join(literal(self.rng, ty, True, partition) for _ in range(n))

    def partition_where(self, allow_in=True):
        """`=` on every partition key column, one of them sometimes an IN."""
        parts = []
        in_column = self.rng.randrange(len(self.t.pk)) if allow_in and self.rng.random() < 0.25 \
            else None
        for i, (n, t) in enumerate(self.t.pk):
            if i == in_column:
                parts.append(f"{n} IN {self.in_list(t, partition=True)}")
            else:
                parts.append(f"{n} = {literal(self.rng, t, True, True)}")
        return parts

    def full_key(self):
        parts = [f"{n} = {literal(self.rng, t, True, True)}" for n, t in self.t.pk]
        parts += [f"{n} = {literal(self.rng, t, True)}" for n, t, _ in self.t.ck]
        return parts

    # Writes.

    def insert(self):
        rng = self.rng
        names = [n for n, _ in self.t.pk]
        values = [literal(rng, t, True, True) for _, t in self.t.pk]
        static_only = self.t.statics and rng.random() < 0.2
        if not static_only:
            names += [n for n, _, _ in self.t.ck]
            values += [self.t.written(t, literal(rng, t, True)) for _, t, _ in self.t.ck]
            for n, t in self.t.regular:
                if rng.random() < 0.7:
                    names.append(n)
                    values.append(literal(rng, t))
        for n, t in self.t.statics:
            if rng.random() < (0.9 if static_only else 0.4):
                names.append(n)
                values.append(literal(rng, t))
        if static_only and len(names) == len(self.t.pk):
            n, t = self.t.statics[0]
            names.append(n)
            values.append(literal(rng, t))
        using = f"USING TIMESTAMP {self.next_timestamp()}"
        if rng.random() < 0.1:
            using += " AND TTL 100000"
        return (f"INSERT INTO {self.t.name} ({', '.join(names)}) VALUES ({', '.join(values)}) "
                f"{using}")

    def assignment(self, name, ty):
        rng = self.rng
        if ty.startswith("set<") and rng.random() < 0.5:
            return f"{name} = {name} {rng.choice(['+', '-'])} {literal(rng, ty)}"
        if ty.startswith("list<") and rng.random() < 0.5:
            return rng.choice([f"{name} = {name} + {literal(rng, ty)}",
                               f"{name} = {literal(rng, ty)} + {name}"])
        if ty.startswith("map<") and rng.random() < 0.5:
            k, v = [t.strip() for t in ty[4:-1].split(",")]
            return f"{name}[{literal(rng, k, True)}] = {literal(rng, v)}"
        return f"{name} = {literal(rng, ty)}"

    def update(self):
        rng = self.rng
        statics_only = self.t.statics and rng.random() < 0.2
        columns = self.t.statics if statics_only else self.t.regular + self.t.statics
        chosen = rng.sample(columns, rng.randint(1, min(2, len(columns))))
        sets = ", ".join(self.assignment(n, t) for n, t in chosen)
        where = self.partition_where()
        if not statics_only:
            for n, t, _ in self.t.ck:
                if rng.random() < 0.15:
                    values = [self.t.written(t, literal(rng, t, True))
                              for _ in range(rng.randint(0, MAX_IN_VALUES))]
                    where.append(f"{n} IN ({', '.join(values)})")
                else:
                    where.append(f"{n} = {self.t.written(t, literal(rng, t, True))}")
        return (f"UPDATE {self.t.name} USING TIMESTAMP {self.next_timestamp()} SET {sets} "
                f"WHERE {' AND '.join(where)}")

    def delete(self):
        rng = self.rng
        ts = f"USING TIMESTAMP {self.next_timestamp()}"
        where = self.partition_where()
        kind = rng.random()
        columns = ""
        if kind < 0.15 or not self.t.ck:
            pass  # the whole partition
        elif kind < 0.55:
            # A prefix, maybe followed by a slice.
            prefix = rng.randint(0, len(self.t.ck))
            where += self.clustering_eq(prefix, allow_in=True, write=True)
            if prefix < len(self.t.ck) and rng.random() < 0.6:
                where += self.slice_relations(prefix)
        else:
            where += self.clustering_eq(len(self.t.ck), allow_in=True, write=True)
            if rng.random() < 0.5:
                chosen = rng.sample(self.t.regular, rng.randint(1, len(self.t.regular)))
                columns = ", ".join(n for n, _ in chosen) + " "
        return f"DELETE {columns}FROM {self.t.name} {ts} WHERE {' AND '.join(where)}"

    # Reads.

    def clustering_eq(self, count, allow_in=False, write=False):
        """`=` on the first `count` clustering columns (sometimes one IN, sometimes as one
        multi-column relation); in a write, values in the table's forms (a DELETE's row also
        fixes the form Cassandra keeps while the row is in one memtable)."""
        rng = self.rng
        columns = self.t.ck[:count]

        def value(t):
            text = literal(rng, t, True)
            return self.t.written(t, text) if write else text
        if count >= 2 and rng.random() < 0.2:
            names = ", ".join(n for n, _, _ in columns)
            if allow_in and rng.random() < 0.4:
                tuples = ", ".join(
                    "(%s)" % ", ".join(value(t) for _, t, _ in columns)
                    for _ in range(rng.randint(0, MAX_IN_VALUES)))
                return [f"({names}) IN ({tuples})"]
            values = ", ".join(value(t) for _, t, _ in columns)
            return [f"({names}) = ({values})"]
        out = []
        in_at = rng.randrange(count) if allow_in and count and rng.random() < 0.3 else None
        for i, (n, t, _) in enumerate(columns):
            if i == in_at:
                values = [value(t) for _ in range(rng.randint(0, MAX_IN_VALUES))]
                out.append(f"{n} IN ({', '.join(values)})")
            else:
                out.append(f"{n} = {value(t)}")
        return out

    def slice_relations(self, start):
        """One or two slice bounds starting at clustering column `start`: single-column or
        multi-column, mixed."""
        rng = self.rng
        rest = self.t.ck[start:]
        sides = rng.choice([[">"], ["<"], [">", "<"], [">", "<"]])
        multi = [rng.random() < 0.6 for _ in sides]
        if rest[0][1].startswith("tuple"):
            # On a tuple column, Cassandra 5.0 ignores a single-column bound beside a
            # multi-column one (`c > (0, 'a') AND (c, d) <= ((2, ''), 0)` returns rows below
            # (0, 'a')): such a column gets bounds of one kind.
            multi = [multi[0]] * len(sides)
        out = []
        for side, is_multi in zip(sides, multi):
            op = side + rng.choice(["", "="])
            if not is_multi:
                n, t, _ = rest[0]
                out.append(f"{n} {op} {literal(rng, t, True)}")
            else:
                width = rng.randint(1, len(rest))
                names = ", ".join(n for n, _, _ in rest[:width])
                values = ", ".join(literal(rng, t, True) for _, t, _ in rest[:width])
                out.append(f"({names}) {op} ({values})")
        return out

    def selection(self):
        rng = self.rng
        r = rng.random()
        if r < 0.35:
            return "*", False
        if r < 0.45:
            return "count(*)", True
        if r < 0.5:
            return "JSON *", False
        cols = [n for n, _ in self.t.pk] + [n for n, _, _ in self.t.ck]
        cols += [n for n, _ in self.t.statics] + [n for n, _ in self.t.regular]
        chosen = rng.sample(cols, rng.randint(1, min(4, len(cols))))
        simple = self.t.simple_regular()
        if simple and rng.random() < 0.25:
            n, t = rng.choice(simple)
            if t in ("int", "bigint", "double", "float", "decimal", "text"):
                functions = ["min", "max"] + (["sum", "avg"] if t != "text" else [])
                return f"{rng.choice(functions)}({n}), count({n})", True
            if t not in ("duration",):
                return rng.choice([f"writetime({n}), {n}", f"toJson({n})"]), False
        if rng.random() < 0.1:
            pk = ", ".join(n for n, _ in self.t.pk)
            return f"token({pk}), {chosen[0]}", False
        return ", ".join(chosen), False

    def select(self):
        rng = self.rng
        t = self.t
        what, aggregate = self.selection()
        where = []
        filtering = False
        order_by = ""
        kind = rng.random()
        partitions_restricted = False
        distinct = False
        if kind < 0.15:
            # A full scan, maybe bounded by tokens.
            if rng.random() < 0.3:
                pk = ", ".join(n for n, _ in t.pk)
                where.append(f"token({pk}) {rng.choice(['>', '>=', '<', '<='])} "
                             f"{rng.randint(-2**63, 2**63 - 1)}")
            if not aggregate and rng.random() < 0.3:
                keys = [n for n, _ in t.pk] + [n for n, _ in rng.sample(t.statics, len(t.statics))]
                what, distinct = ", ".join(keys), True
        else:
            where += self.partition_where()
            partitions_restricted = True
        if t.ck and not distinct and rng.random() < 0.8:
            prefix = rng.randint(0, len(t.ck))
            where += self.clustering_eq(prefix, allow_in=True)
            if prefix < len(t.ck) and rng.random() < 0.7:
                where += self.slice_relations(prefix)
            if partitions_restricted and rng.random() < 0.35:
                asc = rng.random() < 0.5
                first = rng.randint(prefix, len(t.ck) - 1) if prefix < len(t.ck) else 0
                count = rng.randint(1, len(t.ck) - first)
                items = []
                for n, _, o in t.ck[first:first + count]:
                    forward = (o == "ASC") == asc
                    items.append(f"{n} {'ASC' if forward else 'DESC'}")
                order_by = " ORDER BY " + ", ".join(items)
        simple = t.simple_regular() + [(n, ty) for n, ty in t.statics if "<" not in ty]
        if not distinct and simple and rng.random() < 0.15:
            n, ty = rng.choice(simple)
            if ty not in ("duration", "boolean") and not ty.startswith(("frozen", "tuple")):
                if rng.random() < 0.2:
                    where.append(f"{n} IN ({literal(rng, ty, True)}, {literal(rng, ty, True)})")
                else:
                    where.append(f"{n} {rng.choice(['=', '>', '<='])} {literal(rng, ty, True)}")
                filtering = True
        # Not static collections: Cassandra 5.0 matches a deleted element of one in a
        # partition's static row (`s CONTAINS 3` after `s = s - {3}`).
        collections = [(n, ty) for n, ty in t.regular
                       if ty.startswith(("set<", "list<", "map<"))]
        if not distinct and collections and rng.random() < 0.1:
            n, ty = rng.choice(collections)
            inner = ty[ty.index("<") + 1:-1].split(",")
            if ty.startswith("map<") and rng.random() < 0.5:
                key = literal(rng, inner[0].strip(), True)
                where.append(rng.choice([f"{n} CONTAINS KEY {key}",
                                         f"{n}[{key}] = {literal(rng, inner[1].strip(), True)}"]))
            else:
                where.append(f"{n} CONTAINS {literal(rng, inner[-1].strip(), True)}")
            filtering = True
        text = f"SELECT {'DISTINCT ' if distinct else ''}{what} FROM {t.name}"
        if where:
            text += " WHERE " + " AND ".join(where)
        if not aggregate and rng.random() < 0.1 and t.ck and partitions_restricted:
            depth = rng.randint(0, len(t.ck))
            keys = [n for n, _ in t.pk] + [n for n, _, _ in t.ck[:depth]]
            text = text.replace(what, f"{', '.join(keys)}, count(*)", 1)
            text += " GROUP BY " + ", ".join(keys)
            aggregate = True
        text += order_by
        if not aggregate and not distinct and rng.random() < 0.2:
            text += f" PER PARTITION LIMIT {rng.randint(1, 3)}"
        if rng.random() < 0.3:
            text += f" LIMIT {rng.randint(1, 6)}"
        if filtering or rng.random() < 0.1:
            text += " ALLOW FILTERING"
        fetch = rng.choice([None, None, 1, 2, 3, 5, 100])
        return text, fetch

    def insert_json(self):
        """INSERT JSON of a row with simple columns only (JSON literals of the generated
        values would need their own writer for every type)."""
        rng = self.rng
        simple = {"int", "bigint", "text", "boolean", "smallint", "tinyint"}
        columns = self.t.pk + [(n, t) for n, t, _ in self.t.ck] + self.t.regular
        if any(t not in simple for _, t in self.t.pk + [(n, t) for n, t, _ in self.t.ck]):
            return self.insert()
        fields = []
        for n, t in columns:
            if t not in simple:
                continue
            value = literal(rng, t, True, True)
            fields.append(f'"{n}": {value.replace(chr(39), chr(34))}')
        body = "{" + ", ".join(fields) + "}"
        default = rng.choice(["", " DEFAULT UNSET", " DEFAULT NULL"])
        return (f"INSERT INTO {self.t.name} JSON '{body}'{default} "
                f"USING TIMESTAMP {self.next_timestamp()}")

    def delete_element(self):
        """DELETE of a collection element, or an UPDATE of one (a map entry, a list index)."""
        rng = self.rng
        collections = [(n, t) for n, t in self.t.regular
                       if t.startswith(("set<", "list<", "map<"))]
        if not collections:
            return self.delete()
        n, t = rng.choice(collections)
        where = self.partition_where(allow_in=False) + [
            f"{c} = {self.t.written(ty, literal(rng, ty, True))}" for c, ty, _ in self.t.ck]
        ts = f"USING TIMESTAMP {self.next_timestamp()}"
        if t.startswith("map<"):
            key = literal(rng, t[4:-1].split(",")[0].strip(), True)
            if rng.random() < 0.5:
                return f"DELETE {n}[{key}] FROM {self.t.name} {ts} WHERE {' AND '.join(where)}"
            return (f"UPDATE {self.t.name} {ts} SET {n} = {n} - {{{key}}} "
                    f"WHERE {' AND '.join(where)}")
        if t.startswith("list<"):
            index = rng.randint(0, 2)
            if rng.random() < 0.5:
                return f"DELETE {n}[{index}] FROM {self.t.name} {ts} WHERE {' AND '.join(where)}"
            value = literal(rng, t[5:-1], True)
            return (f"UPDATE {self.t.name} {ts} SET {n}[{index}] = {value} "
                    f"WHERE {' AND '.join(where)}")
        value = literal(rng, t[4:-1], True)
        return f"UPDATE {self.t.name} {ts} SET {n} = {n} - {{{value}}} WHERE {' AND '.join(where)}"

    def batch(self):
        """A logged or unlogged batch of a few writes (one timestamp for all, as a batch
        gives its statements unless they say otherwise)."""
        rng = self.rng
        parts = [rng.choice([self.insert, self.update, self.delete])() for _ in range(rng.randint(1, 4))]
        kind = rng.choice(["", "UNLOGGED "])
        return f"BEGIN {kind}BATCH {'; '.join(parts)} APPLY BATCH"

    def statement(self):
        """(CQL text, fetch size, values to bind or None)."""
        if self.t.shape == "slices":
            r = self.rng.random()
            if r < 0.05:
                return self.insert(), None, None
            if r < 0.12:
                return self.delete(), None, None
            text, fetch = self.select()
            if self.rng.random() < 0.3:
                # Int columns only: the same read, prepared.
                prepared, values = parametrize(text)
                return prepared, fetch, values
            return text, fetch, None
        text, fetch = self._statement()
        return text, fetch, None

    def _statement(self):
        r = self.rng.random()
        if r < 0.30:
            return self.insert(), None
        if r < 0.40:
            return self.update(), None
        if r < 0.48:
            return self.delete(), None
        if r < 0.51:
            return self.delete_element(), None
        if r < 0.53:
            return self.insert_json(), None
        if r < 0.56:
            return self.batch(), None
        return self.select()


def normalise(value):
    """A driver value as plain, comparable Python: NaN as a string (NaN != NaN), decimals by
    their text (the scale is part of the value returned), collections as lists."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return value
    if isinstance(value, decimal.Decimal):
        return f"decimal:{value}"
    if isinstance(value, (SortedSet, set, frozenset)):
        return ["set"] + [normalise(v) for v in value]
    if isinstance(value, (OrderedMapSerializedKey, dict)):
        return ["map"] + [[normalise(k), normalise(v)] for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, (uuid.UUID, Date, Time, Duration, datetime.datetime, datetime.date,
                          datetime.time)):
        return f"{type(value).__name__}:{value}"
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    if hasattr(value, "_fields"):  # a UDT or named tuple
        return [normalise(v) for v in value]
    return value


# In a prepared read (`parametrize`): a multi-column IN's tuples, a single-column IN's values,
# a tuple of integers after an operator, or an integer not part of a name.
BINDABLE = re.compile(
    r"IN \((?P<tuples>(?:\(-?\d+(?:, -?\d+)*\)(?:, )?)+)\)"
    r"|IN \((?P<values>-?\d+(?:, -?\d+)*)?\)"
    r"|(?<=[=<>] )\((?P<tuple>-?\d+(?:, -?\d+)*)\)"
    r"|(?<![\w.])(?P<int>-?\d+)")


def parametrize(text):
    """`text` with the integer constants of its WHERE clause (single values, tuples and IN
    lists) replaced by bind markers, and the values to bind: a read of int columns only, run
    prepared to exercise the bind path too."""
    head, sep, where = text.partition(" WHERE ")
    if not sep:
        return text, None
    tail = ""
    for keyword in (" ORDER BY ", " GROUP BY ", " PER PARTITION LIMIT ", " LIMIT ", " ALLOW FILTERING"):
        at = where.find(keyword)
        if at >= 0:
            tail = where[at:] + tail
            where = where[:at]
            break
    values = []

    def bind(match):
        if match.group("tuples"):
            tuples = re.findall(r"\(([^()]*)\)", match.group("tuples"))
            values.append([tuple(int(x) for x in t.split(", ")) for t in tuples])
            return "IN ?"
        if match.group(0).startswith("IN ("):
            items = match.group("values")
            values.append([int(x) for x in items.split(", ")] if items else [])
            return "IN ?"
        if match.group("tuple"):
            values.append(tuple(int(x) for x in match.group("tuple").split(", ")))
            return "?"
        values.append(int(match.group("int")))
        return "?"
    where = BINDABLE.sub(bind, where)
    return f"{head} WHERE {where}{tail}", values


def run(session, text, fetch, values=None):
    """('ok', rows) or ('error', class name, message). With `values`, `text` is prepared and
    executed with them."""
    try:
        if values is None:
            statement = SimpleStatement(text, fetch_size=fetch)
        else:
            statement = session.prepare(text)
            statement.fetch_size = fetch
            statement = statement.bind(values)
        result = session.execute(statement, timeout=STATEMENT_TIMEOUT_S)
        rows = []
        pages = 0
        while True:
            rows += [normalise(list(r)) for r in result.current_rows]
            if not result.has_more_pages:
                break
            pages += 1
            if pages > MAX_PAGES:
                return ("error", "TooManyPages", f"more than {MAX_PAGES} pages")
            result.fetch_next_page()
        return ("ok", rows)
    except Exception as e:  # every refusal and failure is a result to compare
        return ("error", type(e).__name__, str(e))


def same(a, b, ordered=True):
    if a[0] != b[0]:
        return False
    if a[0] == "error":
        return True
    if not ordered:
        return sorted(map(repr, a[1])) == sorted(map(repr, b[1]))
    return a[1] == b[1]


def order_compared(text):
    """Whether rows are compared in order. Not for `SELECT JSON *` with ORDER BY (and so an IN
    on the partition key): Cassandra 5.0 then sorts the rows by their JSON text instead of
    the ORDER BY columns (a bug of its post-query ordering: a wildcard selection has no
    ordering columns after the JSON conversion)."""
    return not (text.startswith("SELECT JSON *") and " ORDER BY " in text)


def cassandra_failed(result):
    """Cassandra failed with an internal error (code 0x0000: an AssertionError or
    IndexOutOfBoundsException on some multi-column slices over empty values): its bug, with no
    answer to compare."""
    return result[0] == "error" and (
        "code=0000 [Server error]" in result[2]
        or (result[1] == "ReadFailure" and "'0x0000'" in result[2]))


def parse_host(value):
    host, _, port = value.rpartition(":")
    return host, int(port)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--statements", type=int, default=3000, help="in all, over every table")
    parser.add_argument("--tables", type=int, default=16)
    parser.add_argument("--table", type=int, help="run only this table's statements")
    parser.add_argument("--shape", choices=["all", "slices"], default="all",
                        help="tables of every shape, or only clustering restrictions over "
                        "tables of int clustering columns of every ASC/DESC mix")
    parser.add_argument("--cassandra", default=os.environ.get("CASSANDRA_HOST", "127.0.0.1:9042"))
    parser.add_argument("--helenus", help="HOST:PORT of a running Helenus (else one is started)")
    parser.add_argument("--report", help="where mismatches go, as JSON lines (default: "
                        "differential-report-<seed>.jsonl in the system's temporary directory)")
    parser.add_argument("--verbose", action="store_true", help="print every statement")
    args = parser.parse_args()

    if args.report is None:
        args.report = os.path.join(tempfile.gettempdir(), f"differential-report-{args.seed}.jsonl")
    cassandra_host, cassandra_port = parse_host(args.cassandra)
    if not cql_ready(cassandra_host, cassandra_port, timeout_s=3):
        print(f"Cassandra not reachable at {args.cassandra}: skipped")
        return 0

    node = None
    if args.helenus:
        helenus_host, helenus_port = parse_host(args.helenus)
    else:
        binary = default_helenus_bin()
        if not os.access(binary, os.X_OK):
            print(f"helenus binary not found at {binary}: build it or give --helenus HOST:PORT")
            return 2
        node = HelenusNode(binary, tempfile.mkdtemp(prefix="helenus-differential-"))
        node.start()
        helenus_host, helenus_port = node.host, node.port

    clusters = [new_cluster(helenus_host, helenus_port), new_cluster(cassandra_host, cassandra_port)]
    try:
        return compare(args, [c.connect() for c in clusters])
    finally:
        for c in clusters:
            c.shutdown()
        if node is not None:
            node.stop()


def compare(args, sessions):
    helenus, cassandra = sessions
    keyspace = f"differential_{args.seed}_{uuid.uuid4().hex[:8]}"
    udt = ", ".join(f"{n} {t}" for n, t in UDT_FIELDS)
    for s in sessions:
        s.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        s.execute(f"CREATE TYPE {keyspace}.udt ({udt})", timeout=120)
    mismatches = 0
    cassandra_errors = 0
    refused_by_both = 0
    executed = 0
    started = time.monotonic()
    per_table = max(1, args.statements // args.tables)
    report = open(args.report, "w")
    try:
        for number in range(args.tables):
            if args.table is not None and number != args.table:
                continue
            rng = random.Random(f"{args.seed}/{number}")
            table = Table(rng, keyspace, number, args.shape)
            create = table.create()
            for s in sessions:
                s.execute(create, timeout=120)
            generator = Generator(rng, table)
            history = [create]
            if args.shape == "slices":
                for text in table.grid():
                    for s in sessions:
                        s.execute(text)
                    history.append(text)
            for index in range(per_table):
                text, fetch, values = generator.statement()
                if args.verbose:
                    print(f"[t{number}#{index}] {text} (fetch {fetch}, values {values})")
                h = run(helenus, text, fetch, values)
                c = run(cassandra, text, fetch, values)
                executed += 1
                if not text.startswith("SELECT"):
                    # Refused writes too: a refusal must write nothing, and replays check it.
                    history.append(text)
                if same(h, c, order_compared(text)):
                    refused_by_both += h[0] == "error"
                    continue
                if cassandra_failed(c):
                    cassandra_errors += 1
                    report.write(json.dumps({"kind": "cassandra server error", "table": number,
                                             "index": index, "statement": text,
                                             "helenus": h, "cassandra": c}, default=str) + "\n")
                    if not text.startswith("SELECT"):
                        # The write may have been applied in part: the tables may differ from
                        # here on.
                        break
                    continue
                mismatches += 1
                # The schema and every write before (refused ones too): enough to replay the
                # mismatch by hand.
                entry = {"kind": "mismatch", "seed": args.seed, "table": number, "index": index,
                         "statement": text, "values": values,
                         "fetch_size": fetch, "helenus": h, "cassandra": c, "history": history}
                report.write(json.dumps(entry, default=str) + "\n")
                if mismatches <= PRINTED_MISMATCHES:
                    print(f"MISMATCH t{number}#{index}: {text} (fetch {fetch})\n"
                          f"  schema:    {create}\n"
                          f"  helenus:   {str(h)[:600]}\n"
                          f"  cassandra: {str(c)[:600]}")
                if not text.startswith("SELECT"):
                    # A write one server refused and the other applied: the tables differ
                    # from here on, so the rest of this table's statements would only repeat it.
                    print(f"  (t{number} diverged: its remaining statements are skipped)")
                    break
            for s in sessions:
                s.execute(f"DROP TABLE {table.name}", timeout=120)
    finally:
        report.close()
        for s in sessions:
            s.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=120)
    elapsed = time.monotonic() - started
    print(f"{executed} statements over {args.tables if args.table is None else 1} tables "
          f"in {elapsed:.0f} s (seed {args.seed}): {mismatches} mismatches, "
          f"{refused_by_both} refused by both, {cassandra_errors} Cassandra server errors skipped"
          + (f", written to {args.report}" if mismatches else ""))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
