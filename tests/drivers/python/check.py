"""Driver-matrix client for the Python `cassandra-driver` (the one tests/e2e uses).

Usage: python check.py HOST PORT

The same steps as every client in tests/drivers (see tests/drivers/README.md): connect with
schema metadata on, create a keyspace and a table, check the table in the driver's schema
metadata, insert 25 rows with a prepared statement, read them back in pages of 7 and check each
row arrives exactly once and in clustering order, drop the keyspace, disconnect.
Exit code 0 on success, 1 with a message naming the failed check otherwise.
"""

import itertools
import os
import sys
import uuid

from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import RoundRobinPolicy

SIDE = 5  # rows are (k, c) for k, c in range(SIDE): SIDE partitions of SIDE rows
PAGE_SIZE = 7  # smaller than the 25 rows and not a divisor of SIDE: pages end mid-partition
REQUEST_TIMEOUT_S = 30  # Cassandra's schema changes on a loaded 2-core machine take seconds


class CheckFailed(Exception):
    pass


def ensure(condition, message):
    if not condition:
        raise CheckFailed(message)


def check_rows(rows, pages):
    """Every (k, c) exactly once; each partition's rows contiguous and in clustering order.
    Partitions come in token order, which is not checked."""
    total = SIDE * SIDE
    min_pages = -(-total // PAGE_SIZE)
    ensure(pages >= min_pages, f"{pages} pages, expected at least {min_pages}")
    ensure(len(rows) == total, f"{len(rows)} rows, expected {total}")
    seen = set()
    for k, run in itertools.groupby(rows, key=lambda r: r.k):
        run = list(run)
        ensure(k not in seen, f"partition k={k} is not contiguous")
        seen.add(k)
        cs = [r.c for r in run]
        ensure(cs == list(range(SIDE)), f"partition k={k}: clustering {cs}")
        for r in run:
            ensure(r.v == f"v{r.k}_{r.c}", f"row ({r.k}, {r.c}) has v={r.v!r}")
    ensure(seen == set(range(SIDE)), f"partitions {sorted(seen)}")


def exercise(cluster, session, keyspace):
    table = f"{keyspace}.rows"
    session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(f"CREATE TABLE {table} (k int, c int, v text, PRIMARY KEY (k, c))")

    # The driver refreshes its metadata from system_schema.* after each schema change.
    cluster.refresh_table_metadata(keyspace, "rows")
    ks_meta = cluster.metadata.keyspaces.get(keyspace)
    ensure(ks_meta is not None, f"keyspace {keyspace} missing from driver metadata")
    tbl_meta = ks_meta.tables.get("rows")
    ensure(tbl_meta is not None, "table rows missing from driver metadata")
    ensure(sorted(tbl_meta.columns) == ["c", "k", "v"], f"metadata columns {list(tbl_meta.columns)}")
    ensure([c.name for c in tbl_meta.partition_key] == ["k"], "partition key")
    ensure([c.name for c in tbl_meta.clustering_key] == ["c"], "clustering key")

    # Insert with bound values through a prepared statement.
    insert = session.prepare(f"INSERT INTO {table} (k, c, v) VALUES (?, ?, ?)")
    for k in range(SIDE):
        for c in range(SIDE):
            session.execute(insert, (k, c, f"v{k}_{c}"))

    # Read back page by page, so the page count and sizes can be checked too.
    select = session.prepare(f"SELECT k, c, v FROM {table}")
    select.fetch_size = PAGE_SIZE
    rows, pages, paging_state = [], 0, None
    while True:
        result = session.execute(select, paging_state=paging_state)
        pages += 1
        page = list(result.current_rows)
        ensure(len(page) <= PAGE_SIZE, f"page {pages} has {len(page)} rows")
        rows.extend(page)
        paging_state = result.paging_state
        if paging_state is None:
            break
        ensure(pages < 100, "more than 100 pages for 25 rows: paging never ends")
    check_rows(rows, pages)


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} HOST PORT")
    host, port = sys.argv[1], int(sys.argv[2])
    profile = ExecutionProfile(
        load_balancing_policy=RoundRobinPolicy(), request_timeout=REQUEST_TIMEOUT_S
    )
    cluster = Cluster(
        contact_points=[host],
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        schema_metadata_enabled=True,  # the default; checking the metadata is part of the test
        connect_timeout=10,
        control_connection_timeout=10,
    )
    keyspace = f"drivers_python_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        session = cluster.connect()
        # run-all's DRIVERS_NODES: a local cluster, every node of which the driver must find
        # (system.peers) and hold up.
        expected = int(os.environ.get("DRIVERS_NODES", "1"))
        hosts = cluster.metadata.all_hosts()
        if expected > 1 and (len(hosts) != expected or not all(h.is_up for h in hosts)):
            raise AssertionError(
                f"expected {expected} hosts up, found "
                f"{[(str(h.endpoint), h.is_up) for h in hosts]}"
            )
        try:
            exercise(cluster, session, keyspace)
        finally:
            # Drop the keyspace even when a check failed, so reruns stay clean.
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
    except Exception as e:  # noqa: BLE001 - any failure is reported the same way
        print(f"python-driver: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    finally:
        cluster.shutdown()
    print("python-driver: OK")


if __name__ == "__main__":
    main()
