"""Driver-matrix client for the Python `cassandra-driver` (the one tests/e2e uses).

Usage: python check.py HOST PORT

The same steps as every client in tests/drivers (see tests/drivers/README.md): connect with
schema metadata on, create a keyspace and a table, check the table in the driver's schema
metadata, insert 25 rows with a prepared statement, read them back in pages of 7 and check each
row arrives exactly once and in clustering order, drop the keyspace, disconnect.
Exit code 0 on success, 1 with a message naming the failed check otherwise.
"""

import collections
import itertools
import os
import sys
import uuid

from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import RoundRobinPolicy, TokenAwarePolicy

SIDE = 5  # rows are (k, c) for k, c in range(SIDE): SIDE partitions of SIDE rows
PAGE_SIZE = 7  # smaller than the 25 rows and not a divisor of SIDE: pages end mid-partition
REQUEST_TIMEOUT_S = 30  # Cassandra's schema changes on a loaded 2-core machine take seconds
# The routing check's keys: enough that every node of a 3-node ring (16 vnodes each) owns some.
ROUTING_KEYS = 100
TOKEN_AWARE = "token_aware"  # the execution profile of the routing check


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


def check_routing(cluster, session, keyspace, expected):
    """With a cluster of EXPECTED nodes: in a keyspace of RF 1, every prepared INSERT and SELECT
    of a key, sent through the token-aware policy, goes to the one replica the driver's token map
    names for the key, and only there; every node owns some keys; and the key's replica, asked
    directly at ONE, returns the row. Prints the requests per node."""
    table = f"{keyspace}.kv"
    session.execute(
        f"CREATE KEYSPACE {keyspace} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(f"CREATE TABLE {table} (k int PRIMARY KEY, v text)")
    cluster.refresh_table_metadata(keyspace, "kv")
    insert = session.prepare(f"INSERT INTO {table} (k, v) VALUES (?, ?)")
    select = session.prepare(f"SELECT v FROM {table} WHERE k = ?")
    ensure(select.routing_key_indexes == [0], f"SELECT routing key {select.routing_key_indexes}")

    def replica_of(bound, k):
        replicas = cluster.metadata.get_replicas(keyspace, bound.routing_key)
        ensure(len(replicas) == 1, f"key {k}: the driver's replicas {replicas}, expected one")
        return replicas[0]

    def sent_to(result, replica, what):
        # Every host tried (a retry would add one), not only the one that answered.
        tried = result.response_future.attempted_hosts
        ensure(
            tried == [replica],
            f"{what} went to {[str(h.endpoint) for h in tried]}, "
            f"the key's replica is {replica.endpoint}",
        )
        return result.response_future.coordinator_host

    owned, writes, reads, direct = (collections.Counter() for _ in range(4))
    for k in range(ROUTING_KEYS):
        bound = insert.bind((k, f"r{k}"))
        replica = replica_of(bound, k)
        owned[replica] += 1
        result = session.execute(bound, execution_profile=TOKEN_AWARE)
        writes[sent_to(result, replica, f"INSERT of key {k}")] += 1
    for k in range(ROUTING_KEYS):
        bound = select.bind((k,))
        replica = replica_of(bound, k)
        result = session.execute(bound, execution_profile=TOKEN_AWARE)
        reads[sent_to(result, replica, f"SELECT of key {k}")] += 1
        ensure([r.v for r in result] == [f"r{k}"], f"key {k}: SELECT returned {list(result)}")
        # The replica itself, at ONE: the row is where the ring says.
        bound.consistency_level = ConsistencyLevel.ONE
        result = session.execute(bound, execution_profile=TOKEN_AWARE, host=replica)
        direct[sent_to(result, replica, f"SELECT at ONE of key {k} on its replica")] += 1
        rows = [r.v for r in result]
        ensure(rows == [f"r{k}"], f"key {k}: its replica {replica.endpoint} returned {rows} at ONE")

    hosts = sorted(cluster.metadata.all_hosts(), key=lambda h: str(h.endpoint))
    for h in hosts:
        print(
            f"python-driver: routing: {h.endpoint}: replica of {owned[h]} keys, coordinated "
            f"{writes[h]} INSERTs, {reads[h]} SELECTs, {direct[h]} SELECTs at ONE"
        )
    ensure(
        len(owned) == expected,
        f"{ROUTING_KEYS} keys have replicas on {len(owned)} of {expected} nodes",
    )


def main():
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} HOST PORT")
    host, port = sys.argv[1], int(sys.argv[2])
    profile = ExecutionProfile(
        load_balancing_policy=RoundRobinPolicy(), request_timeout=REQUEST_TIMEOUT_S
    )
    token_aware = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(RoundRobinPolicy()),
        request_timeout=REQUEST_TIMEOUT_S,
    )
    cluster = Cluster(
        contact_points=[host],
        port=port,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile, TOKEN_AWARE: token_aware},
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
            if expected > 1:
                check_routing(cluster, session, f"{keyspace}_routing", expected)
        finally:
            # Drop the keyspaces even when a check failed, so reruns stay clean.
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
            if expected > 1:
                session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}_routing")
    except Exception as e:  # noqa: BLE001 - any failure is reported the same way
        print(f"python-driver: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    finally:
        cluster.shutdown()
    print("python-driver: OK")


if __name__ == "__main__":
    main()
