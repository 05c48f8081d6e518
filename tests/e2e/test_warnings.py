"""Client warnings: the texts a server sends with a result (protocol v4+ frame flag WARNING, a
[string list] before the body), which the Python driver exposes as
`ResultSet.response_future.warnings` (None when there are none) and logs.

The expected texts are Cassandra 5.0.9's (SelectStatement and BatchStatement, default
thresholds: batch_size_warn_threshold 5 KiB, batch_size_fail_threshold 50 KiB,
unlogged_batch_across_partitions_warn_threshold 10)."""

import pytest
from cassandra import InvalidRequest
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.query import BatchStatement, BatchType, SimpleStatement

from util import new_session, new_table, replication, suite_nodes, unique_name

NO_PARTITION_KEY = "Aggregation query used without partition key"
IN_PARTITION_KEY = "Aggregation query used on multiple partition keys (IN restriction)"


def warnings_of(cql, statement, *args):
    return cql.execute(statement, *args).response_future.warnings


@pytest.fixture(scope="module")
def table(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v text, PRIMARY KEY (k, c)") as name:
        for k in range(3):
            cql.execute(f"INSERT INTO {name} (k, c, v) VALUES ({k}, 0, 'v')")
        yield name


@pytest.mark.parametrize("where", ["", " WHERE c = 0 ALLOW FILTERING", " WHERE v = 'v' ALLOW FILTERING"])
def test_aggregate_without_partition_key_warns(cql, table, where):
    rs = cql.execute(f"SELECT count(*) FROM {table}{where}")
    assert rs.one()[0] == 3
    assert rs.response_future.warnings == [NO_PARTITION_KEY]


def test_group_by_without_partition_key_warns(cql, table):
    # GROUP BY counts as aggregation even without an aggregate function.
    assert warnings_of(cql, f"SELECT k FROM {table} GROUP BY k") == [NO_PARTITION_KEY]
    assert warnings_of(cql, f"SELECT k, count(*) FROM {table} GROUP BY k") == [NO_PARTITION_KEY]


def test_aggregate_over_an_in_of_partition_keys_warns(cql, table):
    assert warnings_of(cql, f"SELECT count(*) FROM {table} WHERE k IN (1, 2)") == [IN_PARTITION_KEY]
    # An IN of one value is a single partition.
    assert warnings_of(cql, f"SELECT count(*) FROM {table} WHERE k IN (1)") is None


def test_aggregate_with_partition_key_or_token_does_not_warn(cql, table):
    assert warnings_of(cql, f"SELECT count(*) FROM {table} WHERE k = 1") is None
    assert warnings_of(cql, f"SELECT max(c) FROM {table} WHERE k = 1 AND c >= 0") is None
    assert warnings_of(cql, f"SELECT count(*) FROM {table} WHERE token(k) > 0") is None


def test_plain_selects_do_not_warn(cql, table):
    assert warnings_of(cql, f"SELECT * FROM {table}") is None
    assert warnings_of(cql, f"SELECT DISTINCT k FROM {table}") is None


def test_prepared_and_paged_aggregates_warn(cql, table):
    prepared = cql.prepare(f"SELECT count(*) FROM {table}")
    assert warnings_of(cql, prepared) == [NO_PARTITION_KEY]
    prepared = cql.prepare(f"SELECT count(*) FROM {table} WHERE k = ?")
    assert warnings_of(cql, prepared, [1]) is None
    # An aggregate is paged internally; the one result page carries the warning.
    paged = SimpleStatement(f"SELECT count(*) FROM {table}", fetch_size=1)
    assert warnings_of(cql, paged) == [NO_PARTITION_KEY]


def test_system_table_aggregate_warns(cql):
    assert warnings_of(cql, "SELECT count(*) FROM system_schema.keyspaces") == [NO_PARTITION_KEY]


def test_warnings_reach_protocol_v4_clients(server, table):
    with new_session(*server, protocol_version=4) as session:
        assert warnings_of(session, f"SELECT count(*) FROM {table}") == [NO_PARTITION_KEY]


def batch_of(kind, statements):
    batch = BatchStatement(batch_type=kind)
    for s in statements:
        batch.add(SimpleStatement(s))
    return batch


def inserts(table, keys, v="x"):
    return [f"INSERT INTO {table} (k, c, v) VALUES ({k}, 0, '{v}')" for k in keys]


def unlogged_warning(n, tables):
    names = ", ".join(tables)
    return (f"Unlogged batch covering {n} partitions detected against table"
            f"{'' if len(tables) == 1 else 's'} [{names}]. You should use a logged batch for "
            "atomicity, or asynchronous writes for performance.")


def test_unlogged_batch_over_ten_partitions_warns(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v text, PRIMARY KEY (k, c)") as t:
        assert warnings_of(cql, batch_of(BatchType.UNLOGGED, inserts(t, range(10)))) is None
        assert warnings_of(cql, batch_of(BatchType.UNLOGGED, inserts(t, range(11)))) == [
            unlogged_warning(11, [t])]
        # Many rows of one partition are one partition.
        rows = [f"INSERT INTO {t} (k, c) VALUES (1, {c})" for c in range(30)]
        assert warnings_of(cql, batch_of(BatchType.UNLOGGED, rows)) is None
        # Logged batches are atomic: no warning.
        assert warnings_of(cql, batch_of(BatchType.LOGGED, inserts(t, range(11)))) is None
        # A CQL BEGIN UNLOGGED BATCH warns the same.
        text = ("BEGIN UNLOGGED BATCH " + "; ".join(inserts(t, range(12))) + "; APPLY BATCH")
        assert warnings_of(cql, text) == [unlogged_warning(12, [t])]


def test_unlogged_batch_counts_partitions_across_tables(cql, test_keyspace):
    schema = "k int, c int, v text, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t1, new_table(cql, test_keyspace, schema) as t2:
        # The same six keys in two tables are six partitions to Cassandra's check.
        same = inserts(t1, range(6)) + inserts(t2, range(6))
        assert warnings_of(cql, batch_of(BatchType.UNLOGGED, same)) is None
        different = inserts(t1, range(6)) + inserts(t2, range(6, 12))
        warnings = warnings_of(cql, batch_of(BatchType.UNLOGGED, different))
        # Cassandra lists the tables of a Java HashSet: in no fixed order.
        assert warnings in ([unlogged_warning(12, [t1, t2])], [unlogged_warning(12, [t2, t1])])


def test_batch_over_5_kib_across_partitions_warns(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v text, PRIMARY KEY (k, c)") as t:
        # Cassandra's size is PartitionUpdate.dataSize: here 74 bytes per one-row partition of
        # (int, int, text) plus the text, so 148 + 5000.
        two = inserts(t, [1], "x" * 5000) + inserts(t, [2], "")
        assert warnings_of(cql, batch_of(BatchType.LOGGED, two)) == [
            f"Batch for [{t}] is of size 5148, exceeding specified threshold of 5120 by 28."]
        small = inserts(t, [1], "x" * 4900) + inserts(t, [2], "")
        assert warnings_of(cql, batch_of(BatchType.LOGGED, small)) is None
        # A batch of one partition is never checked for size.
        one = inserts(t, [1], "x" * 6000)
        assert warnings_of(cql, batch_of(BatchType.LOGGED, one)) is None
        # UPDATEs count the same way (no row marker, same 8 bytes for its empty timestamp).
        updates = [f"UPDATE {t} SET v = '{'y' * 3000}' WHERE k = {k} AND c = 1" for k in (1, 2)]
        assert warnings_of(cql, batch_of(BatchType.UNLOGGED, updates)) == [
            f"Batch for [{t}] is of size 6148, exceeding specified threshold of 5120 by 1028."]


def test_batch_over_50_kib_across_partitions_is_refused(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v text, PRIMARY KEY (k, c)") as t:
        huge = inserts(t, [1], "x" * 60000) + inserts(t, [2], "")
        with pytest.raises(InvalidRequest, match="Batch too large"):
            cql.execute(batch_of(BatchType.LOGGED, huge))
        assert list(cql.execute(f"SELECT k FROM {t}")) == []


def test_logged_batch_on_table_with_zero_gc_grace_warns(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v text",
                   "WITH gc_grace_seconds = 0") as t:
        statements = [f"INSERT INTO {t} (k, v) VALUES (1, 'a')"]
        assert warnings_of(cql, batch_of(BatchType.LOGGED, statements)) == [
            f"Executing a LOGGED BATCH on table [{t}], configured with a gc_grace_seconds of 0. "
            "The gc_grace_seconds is used to TTL batchlog entries, so setting gc_grace_seconds "
            "too low on tables involved in an atomic batch might cause batchlog entries to "
            "expire before being replayed."]
        assert warnings_of(cql, batch_of(BatchType.UNLOGGED, statements)) is None


def test_replication_factor_above_node_count_warns(cql):
    # The servers the suite runs against: `nodes` nodes (one, or --cluster-nodes), all in
    # datacenter1.
    nodes = suite_nodes()
    above = nodes + 2
    name = unique_name("ks")
    try:
        assert warnings_of(cql, f"CREATE KEYSPACE {name} WITH replication = {replication(1)}") is None
        assert warnings_of(cql, f"ALTER KEYSPACE {name} WITH replication = {replication(above)}") == [
            f"Your replication factor {above} for keyspace {name} is higher than the number of "
            f"nodes {nodes}",
            "When increasing replication factor you need to run a full (-full) repair to "
            "distribute the data."]
        # Any later ALTER re-checks the replication it keeps.
        assert warnings_of(cql, f"ALTER KEYSPACE {name} WITH durable_writes = true") == [
            f"Your replication factor {above} for keyspace {name} is higher than the number of "
            f"nodes {nodes}"]
        assert warnings_of(cql, f"ALTER KEYSPACE {name} WITH replication = {replication(1)}") is None
        # IF NOT EXISTS on an existing keyspace changes nothing and warns of nothing.
        assert warnings_of(
            cql, f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = {replication(above + 2)}"
        ) is None
    finally:
        cql.execute(f"DROP KEYSPACE IF EXISTS {name}")


def test_network_topology_replication_above_node_count_warns(cql):
    nodes = suite_nodes()
    above = nodes + 1
    name = unique_name("ks")
    try:
        assert warnings_of(
            cql, f"CREATE KEYSPACE {name} WITH replication = "
            f"{{'class': 'NetworkTopologyStrategy', 'replication_factor': {above}}}") == [
            f"Your replication factor {above} for keyspace {name} is higher than the number of "
            f"nodes {nodes} for datacenter datacenter1"]
    finally:
        cql.execute(f"DROP KEYSPACE IF EXISTS {name}")


@pytest.mark.helenus_only
def test_batch_thresholds_come_from_the_config(node_factory):
    # Cassandra's cassandra.yaml keys, in its 4.1+ data-size form.
    node = node_factory(extra_config={
        "batch_size_warn_threshold": "1KiB",
        "batch_size_fail_threshold": "2KiB",
        "unlogged_batch_across_partitions_warn_threshold": 2,
        "tombstone_warn_threshold": 3,
    }).start()
    with new_session(node.host, node.port) as session:
        session.execute("CREATE KEYSPACE ks WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        session.execute("CREATE TABLE ks.t (k int, c int, v text, PRIMARY KEY (k, c))")
        t = "ks.t"
        assert warnings_of(session, batch_of(BatchType.UNLOGGED, inserts(t, range(3)))) == [
            unlogged_warning(3, [t])]
        # 148 bytes of two one-row partitions and the text: 1148 > 1024.
        two = inserts(t, [1], "x" * 1000) + inserts(t, [2], "")
        assert warnings_of(session, batch_of(BatchType.LOGGED, two)) == [
            "Batch for [ks.t] is of size 1148, exceeding specified threshold of 1024 by 124."]
        too_big = inserts(t, [1], "x" * 2000) + inserts(t, [2], "")
        with pytest.raises(InvalidRequest, match="Batch too large"):
            session.execute(batch_of(BatchType.LOGGED, too_big))
        for c in range(4):
            session.execute(f"DELETE FROM {t} WHERE k = 7 AND c = {c}")
        warnings = warnings_of(session, f"SELECT * FROM {t} WHERE k = 7")
        assert len(warnings) == 1 and warnings[0].startswith(
            f"Read 0 live rows and 4 tombstone cells for query SELECT * FROM {t} WHERE k = 7 ")


def tombstone_warning(live, tombstones, query, token):
    return (f"Read {live} live rows and {tombstones} tombstone cells for query {query}; token "
            f"{token} (see tombstone_warn_threshold)")


@pytest.fixture(scope="module")
def tombstones(cql, test_keyspace):
    """k = 1: 1001 deleted rows and one live row; k = 2 and k = 3: 600 deleted rows each;
    k = 4: 510 rows whose two regular columns are null; k = 5: 600 range tombstones."""
    schema = "k int, c int, v int, w int, PRIMARY KEY (k, c)"
    with new_table(cql, test_keyspace, schema) as t:
        delete = cql.prepare(f"DELETE FROM {t} WHERE k = ? AND c = ?")
        rows = [(1, c) for c in range(1001)] + [(k, c) for k in (2, 3) for c in range(600)]
        execute_concurrent_with_args(cql, delete, rows, concurrency=50)
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (1, 5000, 1)")
        nulls = cql.prepare(f"INSERT INTO {t} (k, c, v, w) VALUES (4, ?, null, null)")
        execute_concurrent_with_args(cql, nulls, [(c,) for c in range(510)], concurrency=50)
        ranges = cql.prepare(f"DELETE FROM {t} WHERE k = 5 AND c > ? AND c < ?")
        execute_concurrent_with_args(cql, ranges, [(2 * i, 2 * i + 1) for i in range(600)],
                                     concurrency=50)
        yield t


def token_of(cql, table, k):
    return cql.execute(f"SELECT token(k) FROM {table} WHERE k = {k} LIMIT 1").one()[0]


def test_reads_over_1000_tombstones_warn(cql, tombstones):
    t = tombstones
    token = token_of(cql, t, 1)
    assert warnings_of(cql, f"SELECT * FROM {t} WHERE k = 1") == [tombstone_warning(
        1, 1001, f"SELECT * FROM {t} WHERE k = 1 LIMIT 5000 ALLOW FILTERING", token)]
    # The query is the read as Cassandra prints it: its columns, partition key, clustering
    # slice and page size; count(*) reads every column.
    assert warnings_of(cql, SimpleStatement(f"SELECT v FROM {t} WHERE k = 1 AND c >= 0",
                                            fetch_size=2000)) == [tombstone_warning(
        1, 1001, f"SELECT v FROM {t} WHERE k = 1 AND c >= 0 LIMIT 2000 ALLOW FILTERING", token)]
    assert warnings_of(cql, f"SELECT count(*) FROM {t} WHERE k = 1") == [tombstone_warning(
        1, 1001, f"SELECT * FROM {t} WHERE k = 1 LIMIT 5000 ALLOW FILTERING", token)]


def test_tombstones_under_the_threshold_do_not_warn(cql, tombstones):
    t = tombstones
    assert warnings_of(cql, f"SELECT * FROM {t} WHERE k = 2") is None
    # Each partition of an IN is its own read: 600 tombstones each.
    assert warnings_of(cql, f"SELECT * FROM {t} WHERE k IN (2, 3)") is None
    # A page of 200 rows stops the read before 1000 tombstones.
    assert warnings_of(cql, SimpleStatement(f"SELECT * FROM {t} WHERE k = 4",
                                            fetch_size=200)) is None


def test_an_in_on_a_clustering_column_reads_around_its_values(cql, tombstones):
    t = tombstones
    # Cassandra reads one slice per value: not the 1001 deleted rows of k = 1 below them.
    rows = list(cql.execute(f"SELECT c, v FROM {t} WHERE k = 1 AND c IN (5001, 5000)"))
    assert rows == [(5000, 1)]
    assert warnings_of(cql, f"SELECT * FROM {t} WHERE k = 1 AND c IN (5000, 5001)") is None
    # Nor the 999 between its values: two slices, one tombstone.
    rows = list(cql.execute(f"SELECT c, v FROM {t} WHERE k = 1 AND c IN (5000, 0, 1000)"))
    assert rows == [(5000, 1)]
    assert warnings_of(cql, f"SELECT * FROM {t} WHERE k = 1 AND c IN (0, 5000)") is None


def test_null_cells_and_range_tombstones_count(cql, tombstones):
    t = tombstones
    # Two null cells in each of 510 live rows.
    assert warnings_of(cql, f"SELECT * FROM {t} WHERE k = 4") == [tombstone_warning(
        510, 1020, f"SELECT * FROM {t} WHERE k = 4 LIMIT 5000 ALLOW FILTERING", token_of(cql, t, 4))]
    # A range tombstone is two markers. (k = 5 has no row to take the token from.)
    warnings = warnings_of(cql, f"SELECT * FROM {t} WHERE k = 5")
    assert len(warnings) == 1
    assert warnings[0].startswith(
        f"Read 0 live rows and 1200 tombstone cells for query SELECT * FROM {t} WHERE k = 5 "
        "LIMIT 5000 ALLOW FILTERING; token ")


def test_range_scan_counts_tombstones_of_every_partition(cql, tombstones):
    if suite_nodes() > 1:
        # On a cluster a range read is split by token range among the replicas, each counting
        # its own tombstones; Cassandra 5.0's 3-node cluster sends no warning for this scan.
        # The one total below holds on one node only.
        pytest.skip("one node's count: on a cluster each replica's range read counts its own")
    t = tombstones
    warnings = warnings_of(cql, f"SELECT * FROM {t}")
    # 1001 + 600 + 600 + 1020 + 1200 tombstones; the token is the last partition's.
    assert len(warnings) == 1 and warnings[0].startswith(
        f"Read 511 live rows and 4421 tombstone cells for query SELECT * FROM {t} LIMIT 5000 "
        "ALLOW FILTERING; token ")
