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
        f"DROP KEYSPACE {keyspace};",
    ]
    return "\n".join(lines) + "\n"


def check_output(stdout, keyspace):
    """Every (k, c) exactly once; each partition's rows contiguous and in clustering order; the
    table described with the statement that recreates it."""
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
    return problems


def main():
    if len(sys.argv) != 4:
        sys.exit(f"usage: {sys.argv[0]} CQLSH HOST PORT")
    cqlsh, host, port = sys.argv[1:]
    keyspace = f"drivers_cqlsh_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with tempfile.NamedTemporaryFile("w", suffix=".cql", delete=False) as f:
        f.write(script(keyspace))
        path = f.name
    try:
        # --cqlshrc /dev/null: ignore a developer's ~/.cassandra/cqlshrc.
        proc = subprocess.run(
            [cqlsh, host, port, "-f", path, "--cqlshrc", "/dev/null", "--disable-history",
             "--no-color", "--connect-timeout", "10", "--request-timeout", "30"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
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
