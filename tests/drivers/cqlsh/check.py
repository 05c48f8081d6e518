"""Driver-matrix client for `cqlsh` (from PyPI, in its own venv: see requirements.txt here).

Usage: python check.py CQLSH HOST PORT      (CQLSH: path to the cqlsh executable)

Writes a CQL script doing the same steps as every client in tests/drivers (see
tests/drivers/README.md), runs it with `cqlsh HOST PORT -f FILE`, and checks cqlsh's output.
What differs from the driver clients, because cqlsh cannot do otherwise:
- the INSERTs are plain (unprepared) statements with literal values: cqlsh has no bind markers;
- paging: `PAGING 7` makes cqlsh fetch the SELECT in pages of 7 (it pauses between pages only on a
  tty; with -f it fetches them all), but its output does not show page boundaries, so only the
  rows are checked, not the page count;
- DESCRIBE: cqlsh sends it to the server (Cassandra 4.0+) and prints the CREATE statements;
- schema metadata: cqlsh formats a SELECT's result using the driver's metadata of the table, so
  the SELECT fails with "not found in keyspace" if the metadata is missing.
Beyond the common scenario, because printing values is what cqlsh is for:
- every type: a row holding every native type, collections (frozen and not, nested), a tuple, a
  UDT (frozen and not) and a vector<float, 3>, and a row of nulls, selected with EXPAND ON (one
  `column | value` line each); every printed value must be the text Cassandra 5.0.9's cqlsh
  prints for the same row (EXPECTED_VALUES);
- warnings: an aggregate without a partition key restriction, whose server warning cqlsh prints
  after the result;
- DESCRIBE TYPE and DESCRIBE TABLE of that table (every type's CQL name, Cassandra's column
  order).
Exit code 0 on success, 1 with a message and cqlsh's output otherwise.
"""

import os
import re
import subprocess
import sys
import tempfile
import uuid

SIDE = 5  # rows are (k, c) for k, c in range(SIDE): SIDE partitions of SIDE rows
PAGE_SIZE = 7  # smaller than the 25 rows and not a divisor of SIDE: pages end mid-partition
CQLSH_TIMEOUT_S = 150  # the whole script; run-all bounds the client at 180 s
# A result row as cqlsh prints it: " 3 | 4 | v3_4".
ROW = re.compile(r"^\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\S+)\s*$")
# A value as cqlsh prints it with EXPAND ON: " column | value".
EXPANDED = re.compile(r"^ (\w+)\s+\| (.*)$")

# The row of every type: (column, type, the CQL literal inserted).
TYPED_COLUMNS = [
    ("a", "ascii", "'abc'"),
    ("bi", "bigint", "-9223372036854775808"),
    ("bl", "blob", "0xcafe"),
    ("bo", "boolean", "true"),
    ("d", "date", "'2024-02-29'"),
    ("de", "decimal", "12345.6789"),
    ("db", "double", "3.141592653589793"),
    ("dd", "double", "1e300"),
    ("du", "duration", "1y2mo3d4h5m6s7ms8us9ns"),
    ("f", "float", "1.25"),
    ("ff", "float", "-0.000001"),
    ("i", "inet", "'192.168.0.1'"),
    ("i6", "inet", "'2001:db8::1'"),
    ("n", "int", "-42"),
    ("si", "smallint", "32767"),
    ("t", "text", "'h\u00e9llo \u2713 ''q'''"),
    ("tm", "time", "'13:14:15.123456789'"),
    ("ts", "timestamp", "'2024-01-02 03:04:05.678+0000'"),
    ("tu", "timeuuid", "e7d4bd30-c6c6-11ee-8c99-0242ac120002"),
    ("ti", "tinyint", "-128"),
    ("u", "uuid", "123e4567-e89b-12d3-a456-426614174000"),
    ("vi", "varint", "123456789012345678901234567890"),
    ("l", "list<int>", "[3, 1, 2]"),
    ("s", "set<text>", "{'b', 'a'}"),
    ("m", "map<text, int>", "{'x': 1, 'y': 2}"),
    ("fl", "frozen<list<frozen<set<int>>>>", "[{1, 2}, {3}]"),
    ("nm", "map<int, frozen<list<text>>>", "{1: ['a', 'b']}"),
    ("fm", "frozen<map<text, frozen<tuple<int, text>>>>", "{'k': (1, 'one')}"),
    ("tup", "tuple<int, text, boolean>", "(1, 'two', false)"),
    ("ud", "addr", "{street: 'Main', zip: 12345}"),
    ("fud", "frozen<addr>", "{street: 'Elm'}"),
    ("vec", "vector<float, 3>", "[1.5, -2, 0.25]"),
]
# What Cassandra 5.0.9's cqlsh printed for that row with EXPAND ON, column by column (cqlsh
# 6.2.2 with its defaults: float precision 5, double precision 12; obtained by running this
# check against `scripts/cassandra.sh`). The row of nulls prints `null` in every column but k.
EXPECTED_VALUES = {
    "k": "1",
    "a": "abc",
    "bi": "-9223372036854775808",
    "bl": "0xcafe",
    "bo": "True",
    "d": "2024-02-29",
    "db": "3.14159",
    "dd": "1e+300",
    "de": "12345.6789",
    "du": "1y2mo3d4h5m6s7ms8us9ns",
    "f": "1.25",
    "ff": "-1e-06",
    "fl": "[{1, 2}, {3}]",
    "fm": "{'k': (1, 'one')}",
    "fud": "{street: 'Elm', zip: null}",
    "i": "192.168.0.1",
    "i6": "2001:db8::1",
    "l": "[3, 1, 2]",
    "m": "{'x': 1, 'y': 2}",
    "n": "-42",
    "nm": "{1: ['a', 'b']}",
    "s": "{'a', 'b'}",
    "si": "32767",
    "t": "h\u00e9llo \u2713 'q'",
    "ti": "-128",
    "tm": "13:14:15.123456789",
    "ts": "2024-01-02 03:04:05.678000+0000",
    "tu": "e7d4bd30-c6c6-11ee-8c99-0242ac120002",
    "tup": "(1, 'two', False)",
    "u": "123e4567-e89b-12d3-a456-426614174000",
    "ud": "{street: 'Main', zip: 12345}",
    "vec": "[1.5, -2, 0.25]",
    "vi": "123456789012345678901234567890",
}
# The columns of DESCRIBE TABLE of that table as Cassandra 5.0.9 prints them: key, then
# single-cell columns by name, then multi-cell (non-frozen collection and UDT) ones by name;
# tuples always frozen.
EXPECTED_DESCRIBED_COLUMNS = """\
    k int PRIMARY KEY,
    a ascii,
    bi bigint,
    bl blob,
    bo boolean,
    d date,
    db double,
    dd double,
    de decimal,
    du duration,
    f float,
    ff float,
    fl frozen<list<frozen<set<int>>>>,
    fm frozen<map<text, frozen<tuple<int, text>>>>,
    fud frozen<addr>,
    i inet,
    i6 inet,
    n int,
    si smallint,
    t text,
    ti tinyint,
    tm time,
    ts timestamp,
    tu timeuuid,
    tup frozen<tuple<int, text, boolean>>,
    u uuid,
    vec vector<float, 3>,
    vi varint,
    l list<int>,
    m map<text, int>,
    nm map<int, frozen<list<text>>>,
    s set<text>,
    ud addr
) WITH """
# How cqlsh prints the server's warning for `SELECT count(*)` without a partition key.
AGGREGATION_WARNING = "Warnings :\nAggregation query used without partition key\n"


def script(keyspace):
    table = f"{keyspace}.rows"
    lines = [
        f"CREATE KEYSPACE {keyspace} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1};",
        f"CREATE TABLE {table} (k int, c int, v text, PRIMARY KEY (k, c));",
    ]
    lines += [
        f"INSERT INTO {table} (k, c, v) VALUES ({k}, {c}, 'v{k}_{c}');"
        for k in range(SIDE)
        for c in range(SIDE)
    ]
    lines += [
        f"PAGING {PAGE_SIZE};",
        f"SELECT k, c, v FROM {table};",
        f"DESCRIBE TABLE {table};",
        f"SELECT count(*) FROM {table};",
    ]
    types = f"{keyspace}.types"
    columns = ", ".join(f"{name} {ty}" for name, ty, _ in TYPED_COLUMNS)
    names = ", ".join(name for name, _, _ in TYPED_COLUMNS)
    literals = ", ".join(literal for _, _, literal in TYPED_COLUMNS)
    lines += [
        f"CREATE TYPE {keyspace}.addr (street text, zip int);",
        f"CREATE TABLE {types} (k int PRIMARY KEY, {columns});",
        f"INSERT INTO {types} (k, {names}) VALUES (1, {literals});",
        f"INSERT INTO {types} (k) VALUES (2);",
        "EXPAND ON;",
        f"SELECT * FROM {types} WHERE k = 1;",
        f"SELECT * FROM {types} WHERE k = 2;",
        "EXPAND OFF;",
        f"DESCRIBE TYPE {keyspace}.addr;",
        f"DESCRIBE TABLE {types};",
        f"DROP KEYSPACE {keyspace};",
    ]
    return "\n".join(lines) + "\n"


def check_output(stdout, keyspace):
    """Every (k, c) exactly once; each partition's rows contiguous and in clustering order; the
    table described with the statement that recreates it; the aggregate's warning; every type
    printed as Cassandra's cqlsh prints it."""
    problems = []
    described = (f"CREATE TABLE {keyspace}.rows (\n    k int,\n    c int,\n    v text,\n"
                 "    PRIMARY KEY (k, c)\n) WITH CLUSTERING ORDER BY (c ASC)\n")
    if described not in stdout:
        problems.append("DESCRIBE TABLE did not print the table's CREATE statement")
    if f"Page size: {PAGE_SIZE}" not in stdout:
        problems.append(f"no 'Page size: {PAGE_SIZE}' line: PAGING was not applied")
    if f"({SIDE * SIDE} rows)" not in stdout:
        problems.append(f"no '({SIDE * SIDE} rows)' line")
    rows = [tuple(m.groups()) for m in map(ROW.match, stdout.splitlines()) if m]
    rows = [(int(k), int(c), v) for k, c, v in rows]
    if len(rows) != SIDE * SIDE:
        problems.append(f"{len(rows)} rows printed, expected {SIDE * SIDE}")
    seen = []
    for i, (k, c, v) in enumerate(rows):
        if i % SIDE == 0:
            if k in seen:
                problems.append(f"partition k={k} is not contiguous")
            seen.append(k)
        if (k, c) != (seen[-1], i % SIDE) or v != f"v{k}_{c}":
            problems.append(f"row {i} is {(k, c, v)}: out of order or wrong value")
    if sorted(seen) != list(range(SIDE)):
        problems.append(f"partitions {seen}")
    if AGGREGATION_WARNING not in stdout:
        problems.append("no warning printed for an aggregate without partition key")
    if f"CREATE TYPE {keyspace}.addr (\n    street text,\n    zip int\n);\n" not in stdout:
        problems.append("DESCRIBE TYPE did not print the type's CREATE statement")
    if f"CREATE TABLE {keyspace}.types (\n{EXPECTED_DESCRIBED_COLUMNS}" not in stdout:
        problems.append("DESCRIBE TABLE of the table of every type differs from Cassandra's")
    return problems + check_types(stdout)


def expanded_rows(stdout):
    """The rows cqlsh printed with EXPAND ON, each as {column: printed value}."""
    rows = []
    current = None
    for line in stdout.splitlines():
        if line.startswith("@ Row "):
            current = {}
            rows.append(current)
        elif current is not None:
            m = EXPANDED.match(line)
            if m:
                current[m.group(1)] = m.group(2).rstrip()
            elif not line.strip():
                current = None
    return rows


def check_types(stdout):
    """Every value of the row of every type as Cassandra 5.0.9's cqlsh prints it; the nulls."""
    rows = {row.get("k"): row for row in expanded_rows(stdout)}
    full, nulls = rows.get("1"), rows.get("2")
    if full is None or nulls is None:
        return ["the rows of every type (k = 1 and k = 2) were not printed"]
    problems = [
        f"{column} printed as {full.get(column)!r}, expected {expected!r}"
        for column, expected in EXPECTED_VALUES.items()
        if full.get(column) != expected
    ]
    if set(full) != set(EXPECTED_VALUES):
        problems.append(f"columns {sorted(full)} printed, expected {sorted(EXPECTED_VALUES)}")
    not_null = {c: v for c, v in nulls.items() if c != "k" and v != "null"}
    if not_null or set(nulls) != set(EXPECTED_VALUES):
        problems.append(f"the row of nulls printed as {nulls}")
    return problems


def main():
    if len(sys.argv) != 4:
        sys.exit(f"usage: {sys.argv[0]} CQLSH HOST PORT")
    cqlsh, host, port = sys.argv[1:]
    keyspace = f"drivers_cqlsh_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with tempfile.NamedTemporaryFile("w", suffix=".cql", delete=False, encoding="utf-8") as f:
        f.write(script(keyspace))
        path = f.name
    try:
        # --cqlshrc /dev/null: ignore a developer's ~/.cassandra/cqlshrc.
        proc = subprocess.run(
            [cqlsh, host, port, "-f", path, "--cqlshrc", "/dev/null", "--disable-history",
             "--no-color", "--connect-timeout", "10", "--request-timeout", "30"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            # cqlsh reads the file and writes its output in UTF-8 (its --encoding default),
            # whatever the locale.
            encoding="utf-8",
            timeout=CQLSH_TIMEOUT_S,
        )
    finally:
        os.unlink(path)
    problems = []
    # In batch mode cqlsh exits 2 if any statement failed, and prints the error on stderr.
    if proc.returncode != 0:
        problems.append(f"cqlsh exited with {proc.returncode}")
    if proc.stderr.strip():
        problems.append("cqlsh wrote to stderr")
    problems += check_output(proc.stdout, keyspace)
    if problems:
        print("cqlsh: FAILED: " + "; ".join(problems), file=sys.stderr)
        print(f"--- cqlsh stdout ---\n{proc.stdout}--- cqlsh stderr ---\n{proc.stderr}",
              file=sys.stderr)
        sys.exit(1)
    print("cqlsh: OK")


if __name__ == "__main__":
    main()
