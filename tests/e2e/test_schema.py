"""Schema statements: keyspaces, tables, user-defined types, and what system_schema reports."""

import datetime

import pytest
from cassandra import AlreadyExists, InvalidRequest
from cassandra.protocol import ConfigurationException, SyntaxException

from util import (
    new_keyspace, new_session, new_table, new_type, replication, suite_replication_factor,
    unique_name,
)


def keyspace_row(cql, name):
    return cql.execute(
        "SELECT replication, durable_writes FROM system_schema.keyspaces WHERE keyspace_name = %s",
        [name],
    ).one()


def table_row(cql, qualified):
    ks, name = qualified.split(".")
    return cql.execute(
        "SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        [ks, name],
    ).one()


def columns(cql, qualified):
    """{column name: (kind, position, clustering_order, type)} from system_schema.columns."""
    ks, name = qualified.split(".")
    rows = cql.execute(
        "SELECT column_name, kind, position, clustering_order, type FROM system_schema.columns "
        "WHERE keyspace_name = %s AND table_name = %s",
        [ks, name],
    )
    return {r.column_name: (r.kind, r.position, r.clustering_order, r.type) for r in rows}


# --- keyspaces -----------------------------------------------------------------------------------


def test_create_keyspace_simple_strategy(cql):
    with new_keyspace(cql) as ks:
        row = keyspace_row(cql, ks)
        assert row.replication == {
            "class": "org.apache.cassandra.locator.SimpleStrategy",
            "replication_factor": str(suite_replication_factor()),
        }
        assert row.durable_writes is True


def test_create_keyspace_network_topology(cql):
    replication = "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}"
    with new_keyspace(cql, replication, "AND durable_writes = false") as ks:
        row = keyspace_row(cql, ks)
        assert row.replication == {
            "class": "org.apache.cassandra.locator.NetworkTopologyStrategy",
            "datacenter1": "1",
        }
        assert row.durable_writes is False
        assert cql.cluster.metadata.keyspaces[ks].durable_writes is False


def test_alter_keyspace(cql):
    with new_keyspace(cql) as ks:
        cql.execute(
            f"ALTER KEYSPACE {ks} WITH replication = "
            "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1} AND durable_writes = false"
        )
        row = keyspace_row(cql, ks)
        assert row.replication["class"] == "org.apache.cassandra.locator.NetworkTopologyStrategy"
        assert row.durable_writes is False


def test_drop_keyspace_drops_its_tables(cql):
    ks = unique_name("ks")
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = {replication()}")
    cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY)")
    cql.execute(f"DROP KEYSPACE {ks}")
    assert keyspace_row(cql, ks) is None
    assert table_row(cql, f"{ks}.t") is None
    with pytest.raises(InvalidRequest):
        cql.execute(f"SELECT * FROM {ks}.t")


def test_keyspace_if_not_exists_and_already_exists(cql):
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {replication()}")
        with pytest.raises(AlreadyExists) as e:
            cql.execute(f"CREATE KEYSPACE {ks} WITH replication = {replication()}")
        assert e.value.keyspace == ks
    cql.execute(f"DROP KEYSPACE IF EXISTS {ks}")  # already gone: no error
    with pytest.raises(InvalidRequest):
        cql.execute(f"DROP KEYSPACE {ks}")


def test_unknown_replication_strategy(cql):
    name = unique_name("ks")
    with pytest.raises(ConfigurationException, match="NoSuchStrategy"):
        cql.execute(f"CREATE KEYSPACE {name} WITH replication = {{'class': 'NoSuchStrategy'}}")
    assert keyspace_row(cql, name) is None


# --- tables --------------------------------------------------------------------------------------


def test_create_table_reported_in_system_schema(cql, test_keyspace):
    schema = "a int, b text, c timestamp, d uuid, s int STATIC, v list<int>, PRIMARY KEY ((a, b), c, d)"
    extra = "WITH CLUSTERING ORDER BY (c DESC, d ASC)"
    with new_table(cql, test_keyspace, schema, extra) as t:
        assert columns(cql, t) == {
            "a": ("partition_key", 0, "none", "int"),
            "b": ("partition_key", 1, "none", "text"),
            "c": ("clustering", 0, "desc", "timestamp"),
            "d": ("clustering", 1, "asc", "uuid"),
            "s": ("static", -1, "none", "int"),
            "v": ("regular", -1, "none", "list<int>"),
        }
        meta = cql.cluster.metadata.keyspaces[test_keyspace].tables[t.split(".")[1]]
        assert [c.name for c in meta.partition_key] == ["a", "b"]
        assert [c.name for c in meta.clustering_key] == ["c", "d"]
        assert meta.columns["c"].is_reversed and not meta.columns["d"].is_reversed
        assert meta.columns["s"].is_static


def test_table_options_reported(cql, test_keyspace):
    extra = "WITH comment = 'hello' AND gc_grace_seconds = 3600 AND default_time_to_live = 60"
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int", extra) as t:
        row = table_row(cql, t)
        assert (row.comment, row.gc_grace_seconds, row.default_time_to_live) == ("hello", 3600, 60)
        cql.execute(f"ALTER TABLE {t} WITH comment = 'bye' AND default_time_to_live = 0")
        row = table_row(cql, t)
        assert (row.comment, row.gc_grace_seconds, row.default_time_to_live) == ("bye", 3600, 0)


def test_alter_table_add_drop_column(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int") as t:
        cql.execute(f"INSERT INTO {t} (k, v) VALUES (1, 10)")
        cql.execute(f"ALTER TABLE {t} ADD w text")
        assert cql.execute(f"SELECT k, v, w FROM {t}").one() == (1, 10, None)
        cql.execute(f"UPDATE {t} SET w = 'x' WHERE k = 1")
        cql.execute(f"ALTER TABLE {t} DROP v")
        assert "v" not in columns(cql, t)
        assert list(cql.execute(f"SELECT * FROM {t}")) == [(1, "x")]
        with pytest.raises(InvalidRequest):
            cql.execute(f"SELECT v FROM {t}")
        with pytest.raises(InvalidRequest):  # primary key columns cannot be dropped
            cql.execute(f"ALTER TABLE {t} DROP k")
        with pytest.raises(InvalidRequest):  # already there
            cql.execute(f"ALTER TABLE {t} ADD w int")


def test_alter_table_rename_clustering_column(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as t:
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (1, 2, 3)")
        cql.execute(f"ALTER TABLE {t} RENAME c TO c2")
        assert cql.execute(f"SELECT c2, v FROM {t} WHERE k = 1").one() == (2, 3)
        assert columns(cql, t)["c2"][0] == "clustering"
        with pytest.raises(InvalidRequest):  # only primary key columns can be renamed
            cql.execute(f"ALTER TABLE {t} RENAME v TO v2")


def test_drop_table(cql, test_keyspace):
    name = f"{test_keyspace}.{unique_name('tbl')}"
    cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY)")
    cql.execute(f"DROP TABLE {name}")
    assert table_row(cql, name) is None
    with pytest.raises(InvalidRequest):
        cql.execute(f"DROP TABLE {name}")
    cql.execute(f"DROP TABLE IF EXISTS {name}")


def test_table_if_not_exists_and_already_exists(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int") as t:
        # IF NOT EXISTS does not replace the existing definition.
        cql.execute(f"CREATE TABLE IF NOT EXISTS {t} (k int PRIMARY KEY, w text)")
        assert set(columns(cql, t)) == {"k", "v"}
        with pytest.raises(AlreadyExists) as e:
            cql.execute(f"CREATE TABLE {t} (k int PRIMARY KEY)")
        assert (e.value.keyspace, e.value.table) == tuple(t.split("."))


def test_create_table_in_missing_keyspace(cql):
    with pytest.raises(InvalidRequest):
        cql.execute("CREATE TABLE no_such_keyspace_e2e.t (k int PRIMARY KEY)")


def test_invalid_table_definitions(cql, test_keyspace):
    name = f"{test_keyspace}.{unique_name('tbl')}"
    with pytest.raises(InvalidRequest):  # no primary key
        cql.execute(f"CREATE TABLE {name} (k int, v int)")
    with pytest.raises(InvalidRequest):  # primary key names an unknown column
        cql.execute(f"CREATE TABLE {name} (k int, v int, PRIMARY KEY (x))")
    with pytest.raises(InvalidRequest):  # static column without clustering columns
        cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, s int STATIC)")
    with pytest.raises(InvalidRequest):  # non-frozen collection in the primary key
        cql.execute(f"CREATE TABLE {name} (k list<int> PRIMARY KEY)")
    assert table_row(cql, name) is None


def test_quoted_identifiers_are_case_sensitive(cql, test_keyspace):
    name = unique_name("Mixed")  # upper case, only reachable quoted
    t = f'{test_keyspace}."{name}"'
    cql.execute(f'CREATE TABLE {t} ("Key" int PRIMARY KEY, "Value" text, value int)')
    try:
        assert table_row(cql, f"{test_keyspace}.{name}") is not None
        cql.execute(f'INSERT INTO {t} ("Key", "Value", value) VALUES (1, \'upper\', 2)')
        row = cql.execute(f'SELECT "Value", value, "Key" FROM {t} WHERE "Key" = 1').one()
        assert row == ("upper", 2, 1)
        # Unquoted names are folded to lower case, so these name things that do not exist.
        with pytest.raises(InvalidRequest):
            cql.execute(f"SELECT * FROM {test_keyspace}.{name}")
        with pytest.raises(InvalidRequest):
            cql.execute(f"SELECT * FROM {t} WHERE Key = 1")
        # ... and an unquoted upper-case name means the lower-case column.
        assert cql.execute(f'SELECT VALUE FROM {t} WHERE "Key" = 1').one()[0] == 2
    finally:
        cql.execute(f"DROP TABLE {t}")


def test_use_and_unqualified_names(cql, server, test_keyspace):
    with new_table(cql, test_keyspace, "k int PRIMARY KEY, v int") as t:
        unqualified = t.split(".")[1]
        with new_session(*server) as s:
            with pytest.raises(InvalidRequest):  # no keyspace yet
                s.execute(f"SELECT * FROM {unqualified}")
            s.execute(f"USE {test_keyspace}")
            s.execute(f"INSERT INTO {unqualified} (k, v) VALUES (1, 2)")
            assert s.execute(f"SELECT v FROM {unqualified} WHERE k = 1").one().v == 2
            prepared = s.prepare(f"SELECT v FROM {unqualified} WHERE k = ?")
            assert s.execute(prepared, [1]).one().v == 2
        with new_session(*server, keyspace=test_keyspace) as s:  # USE at connect time
            assert s.execute(f"SELECT v FROM {unqualified} WHERE k = 1").one().v == 2
        with pytest.raises(InvalidRequest):
            cql.execute("USE no_such_keyspace_e2e")


def test_truncate(cql, test_keyspace):
    with new_table(cql, test_keyspace, "k int, c int, v int, PRIMARY KEY (k, c)") as t:
        for i in range(10):
            cql.execute(f"INSERT INTO {t} (k, c, v) VALUES ({i % 3}, {i}, {i})")
        cql.execute(f"TRUNCATE {t}")
        assert list(cql.execute(f"SELECT * FROM {t}")) == []
        cql.execute(f"INSERT INTO {t} (k, c, v) VALUES (1, 1, 1)")  # still writable
        cql.execute(f"TRUNCATE TABLE {t}")
        assert list(cql.execute(f"SELECT * FROM {t}")) == []
    with pytest.raises(InvalidRequest):
        cql.execute(f"TRUNCATE {test_keyspace}.no_such_table")


# --- user-defined types --------------------------------------------------------------------------


def test_create_type_and_frozen_udt_column(cql, test_keyspace):
    with new_type(cql, test_keyspace, "street text, number int") as typ:
        type_name = typ.split(".")[1]
        row = cql.execute(
            "SELECT field_names, field_types FROM system_schema.types "
            "WHERE keyspace_name = %s AND type_name = %s",
            [test_keyspace, type_name],
        ).one()
        assert (row.field_names, row.field_types) == (["street", "number"], ["text", "int"])
        with new_table(cql, test_keyspace, f"k int PRIMARY KEY, addr frozen<{type_name}>") as t:
            cql.execute(f"INSERT INTO {t} (k, addr) VALUES (1, {{street: 'Main', number: 5}})")
            addr = cql.execute(f"SELECT addr FROM {t} WHERE k = 1").one().addr
            assert (addr.street, addr.number) == ("Main", 5)
            assert columns(cql, t)["addr"][3] == f"frozen<{type_name}>"
            with pytest.raises(InvalidRequest):  # a type in use cannot be dropped
                cql.execute(f"DROP TYPE {typ}")


def test_alter_type(cql, test_keyspace):
    with new_type(cql, test_keyspace, "a int") as typ:
        type_name = typ.split(".")[1]
        with new_table(cql, test_keyspace, f"k int PRIMARY KEY, u frozen<{type_name}>") as t:
            cql.execute(f"INSERT INTO {t} (k, u) VALUES (1, {{a: 1}})")
            cql.execute(f"ALTER TYPE {typ} ADD b text")
            cql.execute(f"ALTER TYPE {typ} RENAME a TO a2")
            row = cql.execute(
                "SELECT field_names, field_types FROM system_schema.types "
                "WHERE keyspace_name = %s AND type_name = %s",
                [test_keyspace, type_name],
            ).one()
            assert (row.field_names, row.field_types) == (["a2", "b"], ["int", "text"])
            cql.execute(f"INSERT INTO {t} (k, u) VALUES (2, {{a2: 2, b: 'two'}})")
            # The old value reads back with the new field names; the added field is null.
            rows = {r.k: (r.u.a2, r.u.b) for r in cql.execute(f"SELECT k, u FROM {t}")}
            assert rows == {1: (1, None), 2: (2, "two")}


def test_type_if_not_exists_and_errors(cql, test_keyspace):
    with new_type(cql, test_keyspace, "a int") as typ:
        cql.execute(f"CREATE TYPE IF NOT EXISTS {typ} (x text)")
        with pytest.raises(InvalidRequest):  # Cassandra: "A user type ... already exists"
            cql.execute(f"CREATE TYPE {typ} (a int)")
        with pytest.raises(InvalidRequest):
            cql.execute(f"ALTER TYPE {typ} ADD a text")  # field already there
    with pytest.raises(InvalidRequest):
        cql.execute(f"DROP TYPE {typ}")
    cql.execute(f"DROP TYPE IF EXISTS {typ}")
    with pytest.raises(InvalidRequest):  # unknown type in a table definition
        cql.execute(f"CREATE TABLE {test_keyspace}.{unique_name('tbl')} (k int PRIMARY KEY, u frozen<no_such_type>)")


@pytest.mark.parametrize("replication, expected", [
    ("{'class': 'SimpleStrategy'}", {"replication_factor": "1"}),
    ("{'class': 'NetworkTopologyStrategy'}", {"datacenter1": "1"}),
])
def test_a_strategy_without_a_replication_factor_gets_the_default(cql, replication, expected):
    """Cassandra 5.0 fills in `default_keyspace_rf` (1): before, SimpleStrategy without a
    factor was refused and NetworkTopologyStrategy without a data centre had no replicas."""
    with new_keyspace(cql, replication) as ks:
        row = keyspace_row(cql, ks)
        strategy = replication.split("'")[3]
        assert row.replication == {"class": f"org.apache.cassandra.locator.{strategy}", **expected}
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v int)")
        cql.execute(f"INSERT INTO {ks}.t (k, v) VALUES (0, 1)")
        assert cql.execute(f"SELECT v FROM {ks}.t WHERE k = 0").one().v == 1


@pytest.mark.parametrize("options, message", [
    ("compaction = {'class': 'Nope'}",
     "Unable to find compaction strategy class 'org.apache.cassandra.db.compaction.Nope'"),
    ("compaction = {'class': 'DateTieredCompactionStrategy'}",
     "Unable to find compaction strategy class 'org.apache.cassandra.db.compaction.DateTieredCompactionStrategy'"),
    ("compaction = {'class': 'com.example.Custom'}", "Unable to find compaction strategy class 'com.example.Custom'"),
    ("compression = {'class': 'Nope'}", "Could not create Compression for type org.apache.cassandra.io.compress.Nope"),
    ("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 3}", "chunk_length_in_kb must be a power of 2"),
    ("compression = {'chunk_length_in_kb': 16}", "Missing sub-option 'class' for the 'compression' option."),
])
def test_unknown_compaction_and_compression_are_refused(cql, test_keyspace, options, message):
    """As Cassandra 5.0 refuses them (a configuration error), even for a table that exists:
    the properties are checked first. Before, any class was accepted."""
    name = f"{test_keyspace}.{unique_name('tbl')}"
    with pytest.raises(ConfigurationException) as error:
        cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int) WITH {options}")
    assert message in str(error.value)
    cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)")
    with pytest.raises(ConfigurationException) as error:
        cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int) WITH {options}")
    assert message in str(error.value)
    for valid in ("compaction = {'class': 'LeveledCompactionStrategy'}",
                  "compaction = {'class': 'UnifiedCompactionStrategy'}",
                  "compression = {'class': 'ZstdCompressor'}", "compression = {'enabled': 'false'}",
                  "compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 64}"):
        cql.execute(f"ALTER TABLE {name} WITH {valid}")


@pytest.mark.parametrize("statement, message", [
    ("CREATE TABLE {ks}.b (k int, v int)", "No PRIMARY KEY specifed for table '{ks}.b' (exactly one required)"),
    ("CREATE TABLE {ks}.b (k int PRIMARY KEY, k int)", "Duplicate column 'k' declaration for table '{ks}.b'"),
    ("CREATE TABLE {ks}.b (k int PRIMARY KEY, v int PRIMARY KEY)",
     "Multiple PRIMARY KEY specified for table '{ks}.b' (exactly one required)"),
    ("CREATE TABLE {ks}.b (k int, v int, PRIMARY KEY (k), PRIMARY KEY (v)) WITH nosuch = 1",
     "Multiple PRIMARY KEY specified for table '{ks}.b' (exactly one required)"),
    ("CREATE TABLE IF NOT EXISTS {ks}.a (k int PRIMARY KEY, v int PRIMARY KEY)",
     "Multiple PRIMARY KEY specified for table '{ks}.a' (exactly one required)"),
    ("CREATE TABLE nosuchks.b (k int PRIMARY KEY, v int PRIMARY KEY)",
     "Multiple PRIMARY KEY specified for table 'nosuchks.b' (exactly one required)"),
    ("CREATE TABLE {ks}.b (k int PRIMARY KEY, k int PRIMARY KEY)",
     "Duplicate column 'k' declaration for table '{ks}.b'"),
    ("CREATE TABLE {ks}.b (k int, c int, PRIMARY KEY (k, c, c))",
     "Duplicate column 'c' in PRIMARY KEY clause for table 'b'"),
    ("CREATE TABLE {ks}.b (k int, PRIMARY KEY (k, zz))", "Unknown column 'zz' referenced in PRIMARY KEY for table 'b'"),
    ("CREATE TABLE {ks}.b (k list<int> PRIMARY KEY)",
     "Invalid non-frozen collection type list<int> for PRIMARY KEY column 'k'"),
    ("CREATE TABLE {ks}.b (k int, c int, v int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (v DESC)",
     "Only clustering key columns can be defined in CLUSTERING ORDER directive: [v] are not clustering columns"),
    ("CREATE TABLE {ks}.b (k int, c int, d int, PRIMARY KEY (k, c, d)) WITH CLUSTERING ORDER BY (d DESC, c ASC)",
     "The order of columns in the CLUSTERING ORDER directive must match that of the clustering columns "
     "(c must appear before d)"),
    ("ALTER TABLE {ks}.a DROP nosuch", "Column nosuch was not found in table '{ks}.a'"),
    ("ALTER TABLE {ks}.a ADD s int static",
     "Static columns are only useful (and thus allowed) if the table has at least one clustering column"),
])
def test_table_definitions_refused_in_cassandra_words(cql, statement, message):
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TABLE {ks}.a (k int PRIMARY KEY, v int)")
        with pytest.raises(InvalidRequest) as error:
            cql.execute(statement.format(ks=ks))
        assert message.format(ks=ks) in str(error.value)


@pytest.mark.parametrize("options, compaction, compression, fp_chance", [
    ("compaction = {'class': 'LeveledCompactionStrategy'}",
     {"class": "org.apache.cassandra.db.compaction.LeveledCompactionStrategy",
      "max_threshold": "32", "min_threshold": "4"}, None, 0.1),
    ("compaction = {'class': 'LeveledCompactionStrategy'} AND bloom_filter_fp_chance = 0.05",
     None, None, 0.05),
    ("compaction = {'class': 'UnifiedCompactionStrategy'}",
     {"class": "org.apache.cassandra.db.compaction.UnifiedCompactionStrategy"}, None, 0.01),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'min_threshold': 2}",
     {"class": "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy",
      "max_threshold": "32", "min_threshold": "2"}, None, 0.01),
    ("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 64, 'enabled': 'true'}", None,
     {"chunk_length_in_kb": "64", "class": "org.apache.cassandra.io.compress.LZ4Compressor"}, 0.01),
    ("compression = {'class': 'DeflateCompressor'}", None,
     {"chunk_length_in_kb": "16", "class": "org.apache.cassandra.io.compress.DeflateCompressor"}, 0.01),
    ("compression = {'enabled': 'false'}", None, {"enabled": "false"}, 0.01),
])
def test_table_options_stored_as_cassandra_stores_them(cql, test_keyspace, options, compaction,
                                                       compression, fp_chance):
    """system_schema.tables (and so DESCRIBE) holds the options as Cassandra 5.0 fills them in:
    full class names, the default thresholds and chunk length, LCS's 0.1 bloom filter chance,
    and null for the four options it writes only when not at their default."""
    name = unique_name("tbl")
    cql.execute(f"CREATE TABLE {test_keyspace}.{name} (k int PRIMARY KEY, v int) WITH {options}")
    row = cql.execute("SELECT compaction, compression, bloom_filter_fp_chance, allow_auto_snapshot, "
                      "incremental_backups, memtable, cdc FROM system_schema.tables "
                      "WHERE keyspace_name = %s AND table_name = %s", [test_keyspace, name]).one()
    if compaction is not None:
        assert row.compaction == compaction
    if compression is not None:
        assert row.compression == compression
    assert row.bloom_filter_fp_chance == fp_chance
    assert (row.allow_auto_snapshot, row.incremental_backups, row.memtable, row.cdc) == (None,) * 4


@pytest.mark.parametrize("dropped, added, refused_as", [
    ("text", "int", "int"),
    ("int", "bigint", "bigint"),
    ("int", "varint", "varint"),
    ("int", "blob", "blob"),
    ("blob", "text", "text"),
    ("list<int>", "frozen<list<int>>", "frozen<list<int>>"),
    ("list<int>", "list<blob>", "list<blob>"),
    ("frozen<list<int>>", "blob", "blob"),
    ("map<int, int>", "map<int, blob>", "map<int, blob>"),
    ("tuple<int, int, int>", "tuple<int, int>", "frozen<tuple<int, int>>"),
    ("frozen<u>", "frozen<u>", "frozen<u>"),
    ("text", "text", None),
    ("ascii", "text", None),
    ("bigint", "timestamp", None),
    ("varint", "blob", None),
    ("timeuuid", "uuid", None),
    ("list<text>", "list<blob>", None),
    ("tuple<int, int>", "tuple<int, int, int>", None),
    ("tuple<int>", "tuple<varint>", None),
    ("frozen<u>", "tuple<int, text>", None),
    ("frozen<u>", "blob", None),
])
def test_a_dropped_column_is_added_again_only_with_a_type_that_reads_its_values(
        cql, dropped, added, refused_as):
    """As Cassandra 5.0: the new type must read the old values, keep their fixed length and
    cell structure (a dropped UDT counts as its tuple, so no UDT qualifies)."""
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TYPE {ks}.u (a int, b text)")
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, x {dropped})")
        cql.execute(f"ALTER TABLE {ks}.t DROP x")
        if refused_as is None:
            cql.execute(f"ALTER TABLE {ks}.t ADD x {added}")
            cql.execute(f"ALTER TABLE {ks}.t DROP x")
            return
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"ALTER TABLE {ks}.t ADD x {added}")
        assert f"Cannot add a column 'x' of type {refused_as}, incompatible with previously " \
               f"dropped column 'x' of type " in str(error.value)
        cql.execute(f"ALTER TABLE {ks}.t ADD y {added}")


def test_a_non_frozen_udt_column_cannot_be_dropped(cql):
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TYPE {ks}.u (a int, b text)")
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, x u, y frozen<u>)")
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"ALTER TABLE {ks}.t DROP (y, x)")
        assert "Cannot drop non-frozen column x of user type u" in str(error.value)
        # Refused whole: y is still there.
        cql.execute(f"ALTER TABLE {ks}.t DROP y")


def test_dropped_columns_are_listed_in_system_schema(cql):
    """As Cassandra 5.0: each dropped column's latest drop, its kind, and its type with UDTs
    as tuples; kept when the name is added again, gone with the table."""
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TYPE {ks}.u (a int, b text)")
        cql.execute(f"CREATE TABLE {ks}.t (k int, c int, x text, st int static, y frozen<u>, "
                    f"z map<int, frozen<u>>, w tuple<int, int>, PRIMARY KEY (k, c))")
        cql.execute(f"ALTER TABLE {ks}.t DROP (x, st, y, z, w)")
        query = f"SELECT * FROM system_schema.dropped_columns WHERE keyspace_name = '{ks}'"
        rows = {r.column_name: r for r in cql.execute(query)}
        assert {name: (r.table_name, r.kind, r.type) for name, r in rows.items()} == {
            "st": ("t", "static", "int"),
            "w": ("t", "regular", "frozen<tuple<int, int>>"),
            "x": ("t", "regular", "text"),
            "y": ("t", "regular", "frozen<tuple<int, text>>"),
            "z": ("t", "regular", "map<int, frozen<tuple<int, text>>>"),
        }
        cql.execute(f"ALTER TABLE {ks}.t ADD x text")
        assert {r.column_name for r in cql.execute(query)} == {"st", "w", "x", "y", "z"}
        cql.execute(f"ALTER TABLE {ks}.t DROP x USING TIMESTAMP 1234567")
        x = cql.execute(query + " AND table_name = 't' AND column_name = 'x'").one()
        assert x.dropped_time == datetime.datetime(1970, 1, 1, 0, 0, 1, 234000)
        cql.execute(f"DROP TABLE {ks}.t")
        assert list(cql.execute(query)) == []


def test_user_type_names_that_need_quotes_are_quoted_in_system_schema(cql):
    """system_schema writes a user type's name as CQL reads it back: `"Odd"`, not `Odd`
    (which would name the type `odd`), so drivers and cqlsh recreate the schema exactly."""
    with new_keyspace(cql) as ks:
        cql.execute(f'CREATE TYPE {ks}."Odd" (a int)')
        cql.execute(f'CREATE TYPE {ks}.outer (o frozen<"Odd">)')
        cql.execute(f'CREATE TABLE {ks}.t (k int PRIMARY KEY, w "Odd", l list<frozen<"Odd">>)')
        columns = {r.column_name: r.type for r in cql.execute(
            f"SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = '{ks}'")}
        assert columns == {"k": "int", "w": '"Odd"', "l": 'list<frozen<"Odd">>'}
        outer = cql.execute(f"SELECT field_types FROM system_schema.types "
                            f"WHERE keyspace_name = '{ks}' AND type_name = 'outer'").one()
        assert outer.field_types == ['frozen<"Odd">']
        cql.cluster.refresh_schema_metadata()
        exported = cql.cluster.metadata.keyspaces[ks].tables["t"].export_as_string()
        assert 'w "Odd"' in exported and 'l list<frozen<"Odd">>' in exported


def test_user_types_may_have_non_frozen_collection_fields_used_frozen(cql):
    """As Cassandra 5.0: a field may be a non-frozen collection; the type is then used frozen
    (or inside a frozen type), where the collection is one value, sets and maps sorted."""
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TYPE {ks}.g (x list<int>, m map<int, text>, s set<frozen<list<int>>>)")
        types = cql.execute(f"SELECT field_types FROM system_schema.types "
                            f"WHERE keyspace_name = '{ks}' AND type_name = 'g'").one()
        assert types.field_types == ["list<int>", "map<int, text>", "set<frozen<list<int>>>"]
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, g frozen<g>, lg list<frozen<g>>)")
        cql.execute(f"ALTER TYPE {ks}.g ADD l2 list<text>")
        cql.execute(f"CREATE TABLE {ks}.byg (k frozen<g> PRIMARY KEY)")
        cql.execute(f"INSERT INTO {ks}.t (k, g, lg) VALUES "
                    "(1, {x: [3, 1], m: {2: 'b', 1: 'a'}, s: {[2], [1]}}, [{x: [1]}])")
        row = cql.execute(f"SELECT g, lg FROM {ks}.t WHERE k = 1").one()
        assert (row.g.x, list(row.g.m.items()), list(row.g.s)) == ([3, 1], [(1, "a"), (2, "b")], [[1], [2]])
        assert row.lg[0].x == [1] and row.lg[0].m is None
        assert cql.execute(f"SELECT JSON g FROM {ks}.t WHERE k = 1").one()[0] == \
            '{"g": {"x": [3, 1], "m": {"1": "a", "2": "b"}, "s": [[1], [2]], "l2": null}}'
        # As a key, two spellings of one value are one partition.
        cql.execute(f"INSERT INTO {ks}.byg (k) VALUES ({{x: [3, 1], m: {{2: 'b', 1: 'a'}}}})")
        cql.execute(f"INSERT INTO {ks}.byg (k) VALUES ({{x: [3, 1], m: {{1: 'a', 2: 'b'}}}})")
        assert len(list(cql.execute(f"SELECT * FROM {ks}.byg"))) == 1
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"ALTER TYPE {ks}.g ADD l3 list<text>")
        assert f"Cannot add new field l3 of type list<text> to user type {ks}.g as the type is being " \
               f"used in partition key by the following tables: {ks}.byg" in str(error.value)
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"CREATE TABLE {ks}.bad (k int PRIMARY KEY, g g)")
        assert "Non-frozen UDTs with nested non-frozen collections are not supported" in str(error.value)
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"ALTER TABLE {ks}.t ADD g2 g")
        assert "Non-frozen UDTs with nested non-frozen collections are not supported for column g2" \
            in str(error.value)


@pytest.mark.parametrize("statements, message", [
    (["CREATE TYPE {ks}.b (p int, p text)"], "Duplicate field name 'p' in type 'b'"),
    (["CREATE TYPE {ks}.b (p int)", "CREATE TYPE {ks}.c (x b)"], "A user type cannot contain non-frozen UDTs"),
    (["CREATE TYPE {ks}.b (p int)", "ALTER TYPE {ks}.b ADD p int"],
     "Cannot add field p to type {ks}.b: a field with name p already exists"),
    (["CREATE TYPE {ks}.b (p int, q int)", "ALTER TYPE {ks}.b RENAME p TO q"],
     "Duplicate field name q in type {ks}"),
    (["CREATE TYPE {ks}.b (p int)", "ALTER TYPE {ks}.b ALTER p TYPE bigint"],
     "Altering field types is no longer supported"),
    (["ALTER TYPE {ks}.nosuch ADD z int"], "Type {ks}.nosuch doesn't exist"),
    (["ALTER TYPE nosuchks.b ADD z int"], "Type nosuchks.b doesn't exist"),
    (["CREATE TYPE {ks}.a (x int)", "CREATE TYPE {ks}.c1 (x frozen<a>)",
      "CREATE TYPE {ks}.c2 (x list<frozen<a>>)", "CREATE TABLE {ks}.t1 (k int PRIMARY KEY, v frozen<a>)",
      "DROP TYPE {ks}.a"], "Cannot drop user type '{ks}.a' as it is still used by user types c1, c2"),
    (["CREATE TYPE {ks}.a (x int)", "CREATE TABLE {ks}.t1 (k int PRIMARY KEY, v frozen<a>)",
      "CREATE TABLE {ks}.t2 (k int PRIMARY KEY, v a)", "DROP TYPE {ks}.a"],
     "Cannot drop user type '{ks}.a' as it is still used by tables t1, t2"),
    (["CREATE TYPE {ks}.a (x int)", "CREATE TABLE {ks}.t (k int PRIMARY KEY, v frozen<a>)",
      "INSERT INTO {ks}.t (k, v) VALUES (1, {{x: 'str'}})"],
     "Invalid user type literal for v: field x is not of type int"),
    (["CREATE TYPE {ks}.a (x int)", "CREATE TABLE {ks}.t (k int PRIMARY KEY, v frozen<a>)",
      "UPDATE {ks}.t SET v.x = 5 WHERE k = 1"], "Invalid operation (v.x = 5) for frozen UDT column v"),
    (["CREATE TYPE {ks}.a (x int)", "CREATE TABLE {ks}.t (k int PRIMARY KEY, v frozen<a>)",
      "SELECT v.nosuch FROM {ks}.t"], "v of type frozen<a> has no field nosuch"),
])
def test_user_type_statements_refused_in_cassandra_words(cql, statements, message):
    with new_keyspace(cql) as ks:
        *setup, last = [s.format(ks=ks) for s in statements]
        for statement in setup:
            cql.execute(statement)
        with pytest.raises(InvalidRequest) as error:
            cql.execute(last)
        assert message.format(ks=ks) in str(error.value)


def test_renaming_user_type_fields_names_them_as_before_the_statement(cql):
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TYPE {ks}.b (p int, q int)")
        cql.execute(f"ALTER TYPE {ks}.b RENAME p TO r AND q TO p")
        names = cql.execute(f"SELECT field_names FROM system_schema.types "
                            f"WHERE keyspace_name = '{ks}' AND type_name = 'b'").one().field_names
        assert names == ["r", "p"]
        cql.execute(f"ALTER TYPE {ks}.b RENAME IF EXISTS nosuch TO z")


@pytest.mark.parametrize("option, column, stored", [
    ("caching = {'keys': 'NONE'}", "caching", {"keys": "NONE", "rows_per_partition": "NONE"}),
    ("caching = {'rows_per_partition': '10'}", "caching", {"keys": "NONE", "rows_per_partition": "10"}),
    ("caching = {'keys': 'all', 'rows_per_partition': '0'}", "caching",
     {"keys": "ALL", "rows_per_partition": "NONE"}),
    ("caching = {}", "caching", {"keys": "NONE", "rows_per_partition": "NONE"}),
    ("speculative_retry = '99PERCENTILE'", "speculative_retry", "99p"),
    ("speculative_retry = '99.5p'", "speculative_retry", "99.5p"),
    ("speculative_retry = '50MS'", "speculative_retry", "50ms"),
    ("speculative_retry = '1.5ms'", "speculative_retry", "1ms"),
    ("speculative_retry = 'always'", "speculative_retry", "ALWAYS"),
    ("speculative_retry = 'none'", "speculative_retry", "NEVER"),
    ("speculative_retry = 'min(99p,50ms)'", "speculative_retry", "MIN(99p,50ms)"),
    ("speculative_retry = 'MAX(99p, 50ms)'", "speculative_retry", "MAX(99p,50ms)"),
    ("additional_write_policy = '50ms'", "additional_write_policy", "50ms"),
    ("read_repair = 'none'", "read_repair", "NONE"),
])
def test_table_options_stored_as_cassandra_normalises_them(cql, option, column, stored):
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY) WITH {option}")
        row = cql.execute(f"SELECT {column} FROM system_schema.tables "
                          f"WHERE keyspace_name = '{ks}' AND table_name = 't'").one()
        assert (dict(row[0]) if isinstance(stored, dict) else row[0]) == stored


@pytest.mark.parametrize("option, message", [
    ("caching = {'keys': 'bad'}",
     "Invalid value 'bad' for caching sub-option 'keys': only 'ALL' and 'NONE' are allowed"),
    ("caching = {'keys': 'ALL', 'rows_per_partition': '-1'}",
     "Invalid value '-1' for caching sub-option 'rows_per_partition': only 'ALL', 'NONE', and "
     "integer values are allowed"),
    ("caching = {'foo': 'x', 'bar': 'y'}",
     "Invalid caching sub-options [bar, foo]: only 'keys' and 'rows_per_partition' are allowed"),
    ("speculative_retry = '101p'",
     "Invalid value 101p for PERCENTILE option 'speculative_retry': must be between (0.0 and 100.0)"),
    ("speculative_retry = 'bogus'", "Invalid value bogus for option 'speculative_retry'"),
    ("speculative_retry = '-5ms'", "Invalid value -5ms for option 'speculative_retry'"),
    ("additional_write_policy = 'bogus'", "Invalid value bogus for option 'speculative_retry'"),
    ("id = 5b6962dd-3f90-4c93-8f61-eabfa4a803e2", "Cannot alter table id."),
])
def test_table_options_refused_at_alter_as_cassandra_refuses_them(cql, option, message):
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY)")
        with pytest.raises(ConfigurationException) as error:
            cql.execute(f"ALTER TABLE {ks}.t WITH {option}")
        assert message in str(error.value)


def test_alter_table_column_lists_and_renames_as_cassandra(cql):
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TABLE {ks}.t (k int, c int, v int, z int, PRIMARY KEY (k, c))")
        cql.execute(f"ALTER TABLE {ks}.t DROP (z, z)")  # named twice, dropped once
        for statement, message in [
            (f"ALTER TABLE {ks}.t RENAME IF EXISTS nosuch TO x", f"Undefined column name nosuch in table {ks}.t"),
            (f"ALTER TABLE {ks}.t RENAME c TO v",
             f"Cannot rename column c to v in table '{ks}.t'; another column with that name already exists"),
            ("ALTER TABLE nosuchks.t ADD q int", "Table 'nosuchks.t' doesn't exist"),
        ]:
            with pytest.raises(InvalidRequest) as error:
                cql.execute(statement)
            assert message in str(error.value)


def test_keyspace_and_table_names_are_checked_as_cassandra_checks_them(cql):
    """Cassandra 5.0: keyspace names up to 48 characters, table names up to 222 (a
    configuration error naming the table), both alphanumeric or underscore only."""
    ks49 = "k" * 49
    for statement, error_type, message in [
        (f"CREATE KEYSPACE {ks49} WITH replication = {replication()}",
         InvalidRequest, f"Keyspace name must not be more than 48 characters long (got 49 characters for \"{ks49}\")"),
        (f"CREATE KEYSPACE \"bad-ks\" WITH replication = {replication()}",
         InvalidRequest, "Keyspace name must not be empty and must contain alphanumeric or underscore "
         "characters only (got \"bad-ks\")"),
    ]:
        with pytest.raises(error_type) as error:
            cql.execute(statement)
        assert message in str(error.value)
    with new_keyspace(cql) as ks:
        long_name = "t" * 222
        cql.execute(f"CREATE TABLE {ks}.{long_name} (k int PRIMARY KEY, \"bad-col\" int)")
        cql.execute(f"INSERT INTO {ks}.{long_name} (k, \"bad-col\") VALUES (1, 2)")
        assert cql.execute(f"SELECT \"bad-col\" FROM {ks}.{long_name}").one()[0] == 2
        for name, message in [
            ("t" * 223, f"{ks}.{'t' * 223}: Table name must not be more than 222 characters long "
                        f"(got 223 characters for \"{'t' * 223}\")"),
            ("\"bad-name\"", f"{ks}.bad-name: Table name must not be empty or not contain "
                             "non-alphanumeric-underscore characters (got \"bad-name\")"),
        ]:
            with pytest.raises(ConfigurationException) as error:
                cql.execute(f"CREATE TABLE {ks}.{name} (k int PRIMARY KEY)")
            assert message in str(error.value)
        cql.execute(f'CREATE TABLE {ks}."MyTable" (k int PRIMARY KEY)')
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f'SELECT "Nope" FROM {ks}."MyTable"')
        assert f'Undefined column name "Nope" in table {ks}."MyTable"' in str(error.value)


@pytest.mark.parametrize("create, alter, replication", [
    ("{'class': 'SimpleStrategy', 'replication_factor': 2}", "{'class': 'NetworkTopologyStrategy'}",
     {"datacenter1": "2"}),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': 2}", "{'class': 'NetworkTopologyStrategy'}",
     {"datacenter1": "2"}),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': 2}",
     "{'class': 'NetworkTopologyStrategy', 'replication_factor': 3}", {"datacenter1": "2"}),
    ("{'class': 'SimpleStrategy', 'replication_factor': 1}",
     "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1, 'dc2': 0}", {"datacenter1": "1"}),
])
def test_alter_keyspace_keeps_data_centres_as_cassandra_does(cql, create, alter, replication):
    with new_keyspace(cql, create) as ks:
        cql.execute(f"ALTER KEYSPACE {ks} WITH replication = {alter}")
        row = cql.execute(f"SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = '{ks}'").one()
        got = dict(row.replication)
        assert got.pop("class") == "org.apache.cassandra.locator.NetworkTopologyStrategy"
        assert got == replication


@pytest.mark.parametrize("replication, message", [
    ("{'class': 'SimpleStrategy', 'replication_factor': 'x'}", 'For input string: "x"'),
    ("{'class': 'SimpleStrategy', 'replication_factor': -1}", "Replication factor must be non-negative, found -1"),
    ("{'class': 'NetworkTopologyStrategy', 'dc1': 'x'}", 'For input string: "x"'),
    ("{'class': 'SimpleStrategy', 'replication_factor': 1, 'foo': 'bar'}",
     "Unrecognized strategy option {foo} passed to SimpleStrategy for keyspace {ks}"),
    # Option names are case-sensitive: another spelling of the shorthand is no shorthand.
    ("{'class': 'SimpleStrategy', 'Replication_Factor': 1}",
     "Unrecognized strategy option {Replication_Factor} passed to SimpleStrategy for keyspace {ks}"),
    ("{'class': 'NetworkTopologyStrategy', 'Replication_Factor': 1}",
     "replication_factor should not appear as an option at construction time for NetworkTopologyStrategy"),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': 1, 'REPLICATION_FACTOR': 3}",
     "replication_factor should not appear as an option at construction time for NetworkTopologyStrategy"),
    # A data centre the ring does not know, or one in another case.
    ("{'class': 'NetworkTopologyStrategy', 'nosuchdc': 1}",
     "Unrecognized strategy option {nosuchdc} passed to NetworkTopologyStrategy for keyspace {ks}"),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': 1, 'nosuchdc': 1}",
     "Unrecognized strategy option {nosuchdc} passed to NetworkTopologyStrategy for keyspace {ks}"),
    ("{'class': 'NetworkTopologyStrategy', 'DataCenter1': 1}",
     "Unrecognized strategy option {DataCenter1} passed to NetworkTopologyStrategy for keyspace {ks}"),
    ("{'class': 'NetworkTopologyStrategy', 'nosuchdc': 1, 'replication_factor': 1}",
     "Unrecognized strategy option {nosuchdc} passed to NetworkTopologyStrategy for keyspace {ks}"),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': 0}",
     "Configuration for at least one datacenter must be present"),
    ("{'class': 'NetworkTopologyStrategy', 'nosuchdc': 0}",
     "Configuration for at least one datacenter must be present"),
    ("{'class': 'NetworkTopologyStrategy', 'replication_factor': 'x'}",
     "Configuration for at least one datacenter must be present"),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': '1/1'}", "Transient replication is not enabled on this node"),
    ("{'class': 'SimpleStrategy', 'replication_factor': '2/1'}", "Transient replication is not enabled on this node"),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': '1/'}",
     "Replication factor format is <replicas> or <replicas>/<transient>"),
    ("{'class': 'SimpleStrategy', 'replication_factor': 99999999999}", 'For input string: "99999999999"'),
    ("{'class': 'com.example.SimpleStrategy'}", "Unable to find replication strategy class 'com.example.SimpleStrategy'"),
    ("{'class': 'simplestrategy'}",
     "Unable to find replication strategy class 'org.apache.cassandra.locator.simplestrategy'"),
    ("{'Class': 'SimpleStrategy'}", "Missing replication strategy class"),
])
def test_replication_options_refused_in_cassandra_words(cql, replication, message):
    """As CREATE and ALTER KEYSPACE refuse them in Cassandra 5.0, whose ring (as this node's)
    has the one data centre `datacenter1`."""
    ks = unique_name("ks")
    with pytest.raises(ConfigurationException) as error:
        cql.execute(f"CREATE KEYSPACE {ks} WITH replication = {replication}")
    assert message.replace("{ks}", ks) in str(error.value)
    with new_keyspace(cql) as ks:
        with pytest.raises(ConfigurationException) as error:
            cql.execute(f"ALTER KEYSPACE {ks} WITH replication = {replication}")
        assert message.replace("{ks}", ks) in str(error.value)


@pytest.mark.parametrize("create, replication", [
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': '01'}", {"datacenter1": "01"}),
    ("{'class': 'NetworkTopologyStrategy', 'replication_factor': '2/0'}", {"datacenter1": "2"}),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': 1, 'nosuchdc': 0}", {"datacenter1": "1"}),
    ("{'class': 'NetworkTopologyStrategy', 'datacenter1': 1, 'replication_factor': 'x'}", {"datacenter1": "1"}),
    ("{'class': 'SimpleStrategy', 'replication_factor': '+01'}", {"replication_factor": "+01"}),
])
def test_replication_factors_stored_as_cassandra_stores_them(cql, create, replication):
    """A data centre's factor is stored as written; the shorthand as its number; a data
    centre at 0 is dropped (and the shorthand's own mistakes are ignored, as Cassandra's
    `prepareOptions` does)."""
    with new_keyspace(cql, create) as ks:
        row = keyspace_row(cql, ks)
        got = dict(row.replication)
        got.pop("class")
        assert got == replication


def test_keyspace_properties_checked_before_the_keyspace(cql):
    """Cassandra checks a keyspace's properties before whether it exists, its replication
    after; LocalStrategy is refused as an invalid request."""
    with new_keyspace(cql) as ks:
        for statement, error_type, message in [
            (f"CREATE KEYSPACE {ks} WITH replication = {replication()} AND foo = 1", SyntaxException,
             "Unknown property 'foo'"),
            (f"CREATE KEYSPACE {ks} WITH durable_writes = true", InvalidRequest,
             "Missing mandatory option 'replication'"),
            (f"CREATE KEYSPACE {ks} WITH replication = {{'replication_factor': 1}}", ConfigurationException,
             "Missing replication strategy class"),
            (f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 'x'}}",
             AlreadyExists, ""),
            (f"ALTER KEYSPACE {ks} WITH replication = {{'class': 'LocalStrategy'}}", InvalidRequest,
             "Unable to use given strategy class: LocalStrategy is reserved for internal use."),
            (f"ALTER KEYSPACE {ks} WITH durable_writes = 2", SyntaxException,
             "Invalid boolean value 2 for 'durable_writes'. Positive values can be '1', 'true' or 'yes'. "
             "Negative values can be '0', 'false' or 'no'."),
            (f"ALTER KEYSPACE {ks} WITH durable_writes = {{'a': 'b'}}", SyntaxException,
             "Invalid value for property 'durable_writes'. It should be a string"),
        ]:
            with pytest.raises(error_type) as error:
                cql.execute(statement)
            assert message in str(error.value)


@pytest.mark.parametrize("value, durable", [("'yes'", True), ("0", False), ("'NO'", False), ("1", True)])
def test_boolean_properties_take_cassandras_spellings(cql, value, durable):
    with new_keyspace(cql, replication(), f"AND durable_writes = {value}") as ks:
        assert keyspace_row(cql, ks).durable_writes is durable
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY) WITH incremental_backups = {value}")
        row = cql.execute(f"SELECT incremental_backups FROM system_schema.tables WHERE keyspace_name = '{ks}' "
                          "AND table_name = 't'").one()
        # Written only when not at its default (true).
        assert row.incremental_backups is (None if durable else False)


def test_alter_keyspace_to_network_topology_keeps_its_data_centres(cql):
    """`{'class': 'NetworkTopologyStrategy'}` alone keeps the data centres a keyspace has
    (Cassandra 5.0 fills in the shorthand at `default_keyspace_rf`, then keeps what exists)."""
    with new_keyspace(cql, "{'class': 'NetworkTopologyStrategy', 'datacenter1': 2}") as ks:
        cql.execute(f"ALTER KEYSPACE {ks} WITH replication = {{'class': 'NetworkTopologyStrategy'}}")
        assert dict(keyspace_row(cql, ks).replication)["datacenter1"] == "2"
        cql.execute(f"ALTER KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy'}}")
        assert dict(keyspace_row(cql, ks).replication)["replication_factor"] == "1"


@pytest.mark.parametrize("options, message", [
    # Leveled compaction: sizes and fan-out at least 1, and a largest level that fits a long.
    ("compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': 0}",
     "sstable_size_in_mb must be larger than 0, but was 0"),
    ("compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': -1}",
     "sstable_size_in_mb must be larger than 0, but was -1"),
    ("compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': 'x'}",
     "x is not a parsable int (base10) for sstable_size_in_mb"),
    ("compaction = {'class': 'LeveledCompactionStrategy', 'fanout_size': 0}",
     "fanout_size must be larger than 0, but was 0"),
    ("compaction = {'class': 'LeveledCompactionStrategy', 'fanout_size': 100, 'sstable_size_in_mb': 2048}",
     "At most 9223372036854775807 bytes may be in a compaction level; your maxSSTableSize must be absurdly "
     "high to compute 21474836480000000000000000"),
    ("compaction = {'class': 'LeveledCompactionStrategy', 'foo': 'x'}",
     "Properties specified [foo] are not understood by LeveledCompactionStrategy"),
    # The options every strategy takes.
    ("compaction = {'class': 'LeveledCompactionStrategy', 'tombstone_threshold': '-1'}",
     "tombstone_threshold must be greater than 0, but was -1.000000"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'tombstone_threshold': 'x'}",
     "x is not a parsable int (base10) for tombstone_threshold"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'tombstone_compaction_interval': '-1'}",
     "tombstone_compaction_interval must be greater than 0, but was -1"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'unchecked_tombstone_compaction': 'x'}",
     "'unchecked_tombstone_compaction' should be either 'true' or 'false', not 'x'"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'log_all': 'x'}",
     "'log_all' should either be 'true' or 'false', not x"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'enabled': 'x'}",
     "enabled should either be 'true' or 'false', not x"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'provide_overlapping_tombstones': 'x'}",
     "Invalid value X for 'provide_overlapping_tombstones' compaction sub-option - must be one of the "
     "following [NONE, ROW, CELL]."),
    # Thresholds.
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'min_threshold': 1}",
     "Min compaction threshold cannot be less than 2 (got 1)"),
    ("compaction = {'class': 'LeveledCompactionStrategy', 'max_threshold': 1}",
     "Min compaction threshold (got 4) cannot be greater than max compaction threshold (got 1)"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'min_threshold': -1}",
     "Invalid value -1 for 'min_threshold' compaction sub-option - must be an integer"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'max_threshold': 0}",
     "Disabling compaction by setting compaction thresholds to 0 has been removed, set the compaction "
     "option 'enabled' to false instead."),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'min_threshold': 4}",
     "Properties specified [min_threshold] are not understood by UnifiedCompactionStrategy"),
    # Size-tiered and time-window options.
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'bucket_low': 2}",
     "bucket_high value (1.5) is less than or equal to the bucket_low value (2.0)"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'min_sstable_size': -1}",
     "min_sstable_size must be non negative: -1"),
    ("compaction = {'class': 'SizeTieredCompactionStrategy', 'bucket_low': 'x'}",
     "x is not a parsable float for bucket_low"),
    ("compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'SECONDS'}",
     "SECONDS is not valid for compaction_window_unit"),
    ("compaction = {'class': 'TimeWindowCompactionStrategy', 'timestamp_resolution': 'DAYS'}",
     "DAYS is not valid for timestamp_resolution"),
    ("compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_size': 0}",
     "0 must be greater than 1 for compaction_window_size"),
    ("compaction = {'class': 'TimeWindowCompactionStrategy', 'expired_sstable_check_frequency_seconds': -1}",
     "expired_sstable_check_frequency_seconds must not be negative, but was -1"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'scaling_parameters': 'x'}",
     "Scaling parameter x must match N|L[0-9]+|T[0-9]+|[+-]?[0-9]+"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'base_shard_count': 0}",
     "Invalid configuration, base_shard_count should be positive: 0"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'scaling_parameters': 'T4, L1'}",
     "Fan factor cannot be lower than 2 in L1"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'target_sstable_size': '1 KiB'}",
     "target_sstable_size 1 KiB is not acceptable, size must be at least 1.000MiB"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'target_sstable_size': '1048576'}",
     "target_sstable_size 1048576 is not a valid size in bytes: 1048576 does not end in unit B"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'target_sstable_size': '1XB'}",
     "target_sstable_size 1XB is not a valid size in bytes: Unexpected characters between pos 1 and 2 in 1XB"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'flush_size_override': '100KiB'}",
     "flush_size_override 100KiB is not acceptable, size must be at least 1.000MiB"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'min_sstable_size': '800MiB'}",
     "Invalid configuration, min_sstable_size (800.000MiB) should be less than 70% of the targetSSTableSize "
     "(1.000GiB)"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'sstable_growth': '150%'}",
     "sstable_growth 150% must be between 0 and 1"),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'overlap_inclusion_method': 'x'}",
     "Invalid overlap inclusion method x. The valid options are [NONE, SINGLE, TRANSITIVE]."),
    ("compaction = {}", "Missing sub-option 'class' for the 'compaction' option"),
    # Compression.
    ("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 0}", "Invalid negative or null chunk_length_in_kb"),
    ("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 'dog'}", "Invalid value for chunk_length_in_kb"),
    ("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 2097152}",
     "Value of chunk_length_in_kb is too large (2097152)"),
    ("compression = {'class': 'LZ4Compressor', 'min_compress_ratio': 0.5}",
     "min_compress_ratio can either be 0 or greater than or equal to 1"),
    ("compression = {'class': 'LZ4Compressor', 'min_compress_ratio': -1}", "Invalid negative min_compress_ratio"),
    ("compression = {'class': 'LZ4Compressor', 'crc_check_chance': 0.5}", "Unknown compression options crc_check_chance"),
    ("compression = {'class': 'DeflateCompressor', 'compression_level': 3}",
     "Unknown compression options compression_level"),
    ("compression = {'class': 'LZ4Compressor', 'lz4_compressor_type': 'x'}",
     "Invalid compressor type 'x' specified for LZ4 parameter 'lz4_compressor_type'. Valid options are [high, fast]."),
    ("compression = {'class': 'LZ4Compressor', 'lz4_high_compressor_level': 99}",
     "Invalid value [99] for parameter 'lz4_high_compressor_level'. Value must be between 1 and 17."),
    ("compression = {'class': 'ZstdCompressor', 'compression_level': 100}",
     "ZstdCompressor.create() threw an error: java.lang.IllegalArgumentException compression_level=100 is invalid"),
    ("compression = {'class': ''}",
     "The 'class' option must not be empty. To disable compression use 'enabled' : false"),
    ("compression = {'class': 'LZ4Compressor', 'enabled': 'false'}",
     "If the 'enabled' option is set to false no other options must be specified"),
    ("compression = {'sstable_compression': 'LZ4Compressor', 'chunk_length_in_kb': 64}",
     "Missing sub-option 'class' for the 'compression' option."),
    # The other options' ranges.
    ("bloom_filter_fp_chance = 0", "bloom_filter_fp_chance must be larger than 6.71E-5 and less than or equal to "
     "1.0 (got 0.0)"),
    ("bloom_filter_fp_chance = 0.00001", "bloom_filter_fp_chance must be larger than 6.71E-5 and less than or "
     "equal to 1.0 (got 1.0E-5)"),
    ("crc_check_chance = 2", "crc_check_chance must be larger than or equal to 0 and smaller than or equal to 1.0 "
     "(got 2.0)"),
    ("min_index_interval = 0", "min_index_interval must be greater than or equal to 1 (got 0)"),
    ("max_index_interval = 10", "max_index_interval must be greater than or equal to min_index_interval (128) "
     "(got 10)"),
    ("memtable_flush_period_in_ms = -1", "memtable_flush_period_in_ms must be greater than or equal to 0 (got -1)"),
    ("memtable = 'nosuch'", 'Memtable configuration "nosuch" not found.'),
    # The strategy's options are checked before the other options' ranges.
    ("crc_check_chance = 2 AND compaction = {'class': 'LeveledCompactionStrategy', 'fanout_size': 0}",
     "fanout_size must be larger than 0, but was 0"),
])
def test_table_options_refused_as_cassandra_refuses_them(cql, test_keyspace, options, message):
    """Cassandra 5.0's checks of the compaction strategies' options, of compression and of
    the other options' ranges (a configuration error), at CREATE and at ALTER TABLE."""
    name = f"{test_keyspace}.{unique_name('tbl')}"
    with pytest.raises(ConfigurationException) as error:
        cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int) WITH {options}")
    assert message in str(error.value)
    cql.execute(f"CREATE TABLE {name} (k int PRIMARY KEY, v int)")
    with pytest.raises(ConfigurationException) as error:
        cql.execute(f"ALTER TABLE {name} WITH {options}")
    assert message in str(error.value)


@pytest.mark.parametrize("options, compaction, compression", [
    ("compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': '+016', 'fanout_size': 1}",
     {"class": "org.apache.cassandra.db.compaction.LeveledCompactionStrategy", "sstable_size_in_mb": "+016",
      "fanout_size": "1", "max_threshold": "32", "min_threshold": "4"}, None),
    ("compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'HOURS', "
     "'timestamp_resolution': 'SECONDS', 'tombstone_threshold': '0'}",
     {"class": "org.apache.cassandra.db.compaction.TimeWindowCompactionStrategy", "compaction_window_unit": "HOURS",
      "timestamp_resolution": "SECONDS", "tombstone_threshold": "0", "max_threshold": "32", "min_threshold": "4"},
     None),
    ("compaction = {'class': 'UnifiedCompactionStrategy', 'scaling_parameters': 'T4, L10', "
     "'target_sstable_size': '1.5GiB', 'min_sstable_size': '700MiB', 'sstable_growth': '50%'}",
     {"class": "org.apache.cassandra.db.compaction.UnifiedCompactionStrategy", "scaling_parameters": "T4, L10",
      "target_sstable_size": "1.5GiB", "min_sstable_size": "700MiB", "sstable_growth": "50%"},
     None),
    # `compression = {}` (as in Cassandra's own tests) turns compression off, as does an
    # `enabled` that is not true.
    ("compression = {}", None, {"enabled": "false"}),
    ("compression = {'enabled': 'x'}", None, {"enabled": "false"}),
    ("compression = {'class': 'LZ4Compressor', 'min_compress_ratio': 2, 'chunk_length_in_kb': '+32', "
     "'lz4_compressor_type': 'high'}", None,
     {"class": "org.apache.cassandra.io.compress.LZ4Compressor", "chunk_length_in_kb": "32",
      "min_compress_ratio": "2.0", "lz4_compressor_type": "high"}),
    ("compression = {'class': 'ZstdCompressor', 'compression_level': -3}", None,
     {"class": "org.apache.cassandra.io.compress.ZstdCompressor", "chunk_length_in_kb": "16",
      "compression_level": "-3"}),
    ("compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 1048576}", None,
     {"class": "org.apache.cassandra.io.compress.LZ4Compressor", "chunk_length_in_kb": "1048576"}),
])
def test_compaction_and_compression_stored_as_cassandra_stores_them(cql, test_keyspace, options, compaction,
                                                                    compression):
    name = unique_name("tbl")
    cql.execute(f"CREATE TABLE {test_keyspace}.{name} (k int PRIMARY KEY, v int) WITH {options}")
    row = cql.execute("SELECT compaction, compression FROM system_schema.tables "
                      "WHERE keyspace_name = %s AND table_name = %s", [test_keyspace, name]).one()
    if compaction is not None:
        assert dict(row.compaction) == compaction
    if compression is not None:
        assert dict(row.compression) == compression
        described = cql.execute(f"DESCRIBE TABLE {test_keyspace}.{name}").one().create_statement
        shown = ", ".join(f"'{k}': '{v}'" for k, v in sorted(compression.items()))
        assert f"AND compression = {{{shown}}}" in described


@pytest.mark.parametrize("statement, message", [
    ("CREATE TABLE {ks}.t2 (k int PRIMARY KEY) WITH compression = {'class': 'LZ4Compressor', "
     "'chunk_length_in_kb': null}", "Invalid property value: NULL for property: 'chunk_length_in_kb'"),
    ("CREATE TABLE {ks}.t2 (k int PRIMARY KEY) WITH compression = {'class': 'LZ4Compressor', "
     "'chunk_length_in_kb': [16]}", "Invalid property value: [16] for property: 'chunk_length_in_kb'"),
    ("CREATE TABLE {ks}.t2 (k int PRIMARY KEY) WITH compression = {null: 'x'}", "Invalid property name: NULL"),
    ("CREATE TABLE {ks}.t2 (k int PRIMARY KEY) WITH comment = 'a' AND comment = 'b'",
     "Multiple definitions for property 'comment'"),
    ("ALTER TABLE {ks}.t WITH compaction = {'class': 'LeveledCompactionStrategy', 'class': 'x'}",
     "Multiple definition for property class"),
    ("CREATE KEYSPACE {ks}2 WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 1, "
     "'datacenter1': 2}", "Multiple definition for property datacenter1"),
    ("ALTER KEYSPACE {ks} WITH replication = {'class': 'SimpleStrategy'} AND replication = "
     "{'class': 'SimpleStrategy'}", "Multiple definitions for property 'replication'"),
    ("USE ?", "Bind variables cannot be used for keyspace names"),
    ("SELECT * FROM ?.t", "Bind variables cannot be used for keyspace names"),
    ("SELECT * FROM {ks}.?", "Bind variables cannot be used for table names"),
    ("TRUNCATE ?", "Bind variables cannot be used for table names"),
    ("DROP KEYSPACE ?", "Bind variables cannot be used for keyspace names"),
])
def test_property_and_name_refusals_are_cassandras_syntax_errors(cql, statement, message):
    """Refused by Cassandra's parser in its own words (no position): property maps of
    anything but constants, a key or property given twice, bind markers for names."""
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY)")
        with pytest.raises(SyntaxException) as error:
            cql.execute(statement.replace("{ks}", ks))
        assert f'message="{message}"' in str(error.value)


def test_use_with_a_bind_marker_is_refused_at_prepare(cql):
    with pytest.raises(SyntaxException) as error:
        cql.prepare("USE ?")
    assert "Bind variables cannot be used for keyspace names" in str(error.value)


@pytest.mark.parametrize("column_type, message", [
    ("vector<float, 0>", "vectors may only have positive dimensions; given 0"),
    ("vector<float, -1>", "vectors may only have positive dimensions; given -1"),
    ("vector<float, -2147483648>", "vectors may only have positive dimensions; given -2147483648"),
    ("list<vector<int, 0>>", "vectors may only have positive dimensions; given 0"),
    ("frozen<vector<text, -0>>", "vectors may only have positive dimensions; given 0"),
])
def test_vector_dimensions_below_one_are_invalid_not_syntax_errors(cql, test_keyspace, column_type, message):
    name = unique_name("tbl")
    with pytest.raises(InvalidRequest) as error:
        cql.execute(f"CREATE TABLE {test_keyspace}.{name} (k int PRIMARY KEY, v {column_type})")
    assert message in str(error.value)
    with pytest.raises(InvalidRequest) as error:
        cql.execute(f"CREATE TYPE {test_keyspace}.{name} (v {column_type})")
    assert message in str(error.value)
    cql.execute(f"CREATE TABLE {test_keyspace}.{name} (k int PRIMARY KEY)")
    with pytest.raises(InvalidRequest) as error:
        cql.execute(f"ALTER TABLE {test_keyspace}.{name} ADD v {column_type}")
    assert message in str(error.value)


def test_vector_dimension_beyond_an_int_is_a_syntax_error(cql, test_keyspace):
    statement = f"CREATE TABLE {test_keyspace}.{unique_name('tbl')} (k int PRIMARY KEY, v vector<float, 2147483648>)"
    with pytest.raises(SyntaxException) as error:
        cql.execute(statement)
    assert (f'Failed parsing statement: [{statement}] reason: NumberFormatException For input string: '
            '"2147483648"') in str(error.value)


@pytest.mark.parametrize("field_type, shown", [
    ("frozen<{b}>", "frozen<{ks}.{b}>"),
    ("frozen<list<frozen<{a}>>>", "frozen<list<frozen<{ks}.{a}>>>"),
    ("list<frozen<{a}>>", "list<frozen<{ks}.{a}>>"),
    ("tuple<int, frozen<{a}>>", "tuple<int, frozen<{ks}.{a}>>"),
])
def test_a_user_type_cannot_come_to_hold_itself(cql, field_type, shown):
    """ALTER TYPE ADD of a field holding the type itself, directly or through another type,
    is refused as Cassandra refuses it (before: accepted, making a type that holds itself)."""
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TYPE {ks}.a (x int)")
        cql.execute(f"CREATE TYPE {ks}.b (y frozen<a>)")
        with pytest.raises(InvalidRequest) as error:
            cql.execute(f"ALTER TYPE {ks}.a ADD z {field_type.format(a='a', b='b')}")
        assert (f"Cannot add new field z of type {shown.format(ks=ks, a='a', b='b')} to user type {ks}.a "
                "as it would create a circular reference") in str(error.value)


def test_alter_type_adds_one_field_at_a_time(cql):
    """Cassandra's grammar adds one field per ALTER TYPE (as Helenus's): several are a syntax
    error, one at a time is not."""
    with new_keyspace(cql) as ks:
        cql.execute(f"CREATE TYPE {ks}.a (x int)")
        for statement in (f"ALTER TYPE {ks}.a ADD b int, c text", f"ALTER TYPE {ks}.a ADD (b int, c text)",
                          f"ALTER TYPE {ks}.a ADD b int AND c text"):
            with pytest.raises(SyntaxException):
                cql.execute(statement)
        cql.execute(f"ALTER TYPE {ks}.a ADD b int")
        cql.execute(f"ALTER TYPE {ks}.a ADD IF NOT EXISTS b int")
        cql.execute(f"ALTER TYPE {ks}.a ADD c text")
        fields = cql.execute(f"SELECT field_names FROM system_schema.types WHERE keyspace_name = '{ks}' "
                             "AND type_name = 'a'").one().field_names
        assert fields == ["x", "b", "c"]
