"""Server-side DESCRIBE (what cqlsh sends since Cassandra 4.0): the result columns, the order of
elements, and the exact CREATE statements Cassandra 5.0 prints. The expected texts below were
taken from Cassandra 5.0.9 for the same schema."""

import pytest
from cassandra import InvalidRequest

from util import new_keyspace, new_session, suite_replication_factor

# The table options Cassandra 5.0 prints for a table created without any.
DEFAULT_OPTIONS = """    AND additional_write_policy = '99p'
    AND allow_auto_snapshot = true
    AND bloom_filter_fp_chance = 0.01
    AND caching = {'keys': 'ALL', 'rows_per_partition': 'NONE'}
    AND cdc = false
    AND comment = ''
    AND compaction = {'class': 'org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy', 'max_threshold': '32', 'min_threshold': '4'}
    AND compression = {'chunk_length_in_kb': '16', 'class': 'org.apache.cassandra.io.compress.LZ4Compressor'}
    AND memtable = 'default'
    AND crc_check_chance = 1.0
    AND default_time_to_live = 0
    AND extensions = {}
    AND gc_grace_seconds = 864000
    AND incremental_backups = true
    AND max_index_interval = 2048
    AND memtable_flush_period_in_ms = 0
    AND min_index_interval = 128
    AND read_repair = 'BLOCKING'
    AND speculative_retry = '99p';"""


@pytest.fixture(scope="module")
def schema(cql):
    """A keyspace with dependent types and tables that exercise every part of the output."""
    with new_keyspace(cql, extra="AND durable_writes = false") as ks:
        # Created out of dependency and name order on purpose.
        cql.execute(f'CREATE TYPE {ks}.addr (street text, "Zip" int, tags frozen<set<text>>)')
        cql.execute(f"CREATE TYPE {ks}.person (name text, home frozen<addr>)")
        cql.execute(f"CREATE TYPE {ks}.aaa (p frozen<person>)")
        cql.execute(f'CREATE TABLE {ks}."Tb" (k int PRIMARY KEY)')
        cql.execute(
            f'CREATE TABLE {ks}.t1 (k int PRIMARY KEY, v text, "Quoted" list<int>, a frozen<addr>)'
        )
        cql.execute(
            f"CREATE TABLE {ks}.t2 (p1 int, p2 text, c1 timeuuid, c2 bigint, s int static, "
            "m map<text, frozen<list<int>>>, vec vector<float, 3>, t tuple<int, text>, u person, "
            "PRIMARY KEY ((p1, p2), c1, c2)) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC) "
            "AND comment = 'it''s' AND gc_grace_seconds = 5 AND default_time_to_live = 7"
        )
        cql.execute(f"CREATE TABLE {ks}.ta (k int PRIMARY KEY)")
        yield ks


def describe(cql, statement):
    return [tuple(r) for r in cql.execute(statement)]


def test_describe_table_single_key_default_options(cql, schema):
    # A single-column primary key is written inline; other columns follow, single-cell ones
    # (frozen included) before multi-cell ones, each group by name; names quoted as needed.
    rows = describe(cql, f"DESCRIBE TABLE {schema}.t1")
    assert rows == [(schema, "table", "t1", f"""CREATE TABLE {schema}.t1 (
    k int PRIMARY KEY,
    a frozen<addr>,
    v text,
    "Quoted" list<int>
) WITH {DEFAULT_OPTIONS[8:]}""")]


def test_describe_table_compound_key_and_options(cql, schema):
    # Static columns first among the others; a tuple column is frozen; a non-frozen UDT is
    # multi-cell; clustering order and changed options are printed.
    options = (DEFAULT_OPTIONS.replace("comment = ''", "comment = 'it''s'")
               .replace("default_time_to_live = 0", "default_time_to_live = 7")
               .replace("gc_grace_seconds = 864000", "gc_grace_seconds = 5"))
    rows = describe(cql, f"DESCRIBE TABLE {schema}.t2")
    assert rows == [(schema, "table", "t2", f"""CREATE TABLE {schema}.t2 (
    p1 int,
    p2 text,
    c1 timeuuid,
    c2 bigint,
    s int static,
    t frozen<tuple<int, text>>,
    vec vector<float, 3>,
    m map<text, frozen<list<int>>>,
    u person,
    PRIMARY KEY ((p1, p2), c1, c2)
) WITH CLUSTERING ORDER BY (c1 DESC, c2 ASC)
{options}""")]


def test_describe_type(cql, schema):
    rows = describe(cql, f"DESCRIBE TYPE {schema}.addr")
    assert rows == [(schema, "type", "addr", f"""CREATE TYPE {schema}.addr (
    street text,
    "Zip" int,
    tags frozen<set<text>>
);""")]


def test_describe_keyspace_lists_types_by_dependency_then_tables(cql, schema):
    rows = describe(cql, f"DESCRIBE KEYSPACE {schema}")
    assert [r[:3] for r in rows] == [
        (schema, "keyspace", schema),
        (schema, "type", "addr"),
        (schema, "type", "person"),
        (schema, "type", "aaa"),
        (schema, "table", "t1"),
        (schema, "table", "t2"),
        (schema, "table", "ta"),
        (schema, "table", '"Tb"'),
    ]
    assert rows[0][3] == (
        f"CREATE KEYSPACE {schema} WITH replication = {{'class': 'SimpleStrategy', "
        f"'replication_factor': '{suite_replication_factor()}'}}  AND durable_writes = false;"
    )
    assert rows[7][3] == f'CREATE TABLE {schema}."Tb" (\n    k int PRIMARY KEY\n) WITH {DEFAULT_OPTIONS[8:]}'
    only = describe(cql, f"DESCRIBE ONLY KEYSPACE {schema}")
    assert only == rows[:1]


def test_describe_listings(cql, schema):
    # Listings have no create_statement column; types are listed by name.
    rs = cql.execute("DESCRIBE TYPES")
    assert rs.column_names == ["keyspace_name", "type", "name"]
    assert [r for r in map(tuple, rs) if r[0] == schema] == [
        (schema, "type", "aaa"), (schema, "type", "addr"), (schema, "type", "person")]
    tables = [tuple(r) for r in cql.execute("DESCRIBE TABLES") if r[0] == schema]
    assert [t[2] for t in tables] == ["t1", "t2", "ta", '"Tb"']
    keyspaces = [r.name for r in cql.execute("DESCRIBE KEYSPACES")]
    assert schema in keyspaces and "system" in keyspaces and "system_schema" in keyspaces


def test_describe_schema_skips_system_keyspaces_unless_full(cql, schema):
    plain = {r[0] for r in cql.execute("DESCRIBE SCHEMA")}
    assert schema in plain and "system" not in plain and "system_schema" not in plain
    full = {r[0] for r in cql.execute("DESCRIBE FULL SCHEMA")}
    assert {schema, "system", "system_schema"} <= full


def test_describe_network_topology_keyspace_with_quoted_names(cql):
    with new_keyspace(cql, replication="{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}") as ks:
        cql.execute(f'CREATE TABLE {ks}."T" (k int, "C" int, PRIMARY KEY (k, "C"))')
        rows = describe(cql, f"DESCRIBE KEYSPACE {ks}")
        assert rows[0][3] == (
            f"CREATE KEYSPACE {ks} WITH replication = "
            "{'class': 'NetworkTopologyStrategy', 'datacenter1': '1'}  AND durable_writes = true;"
        )
        assert rows[1][:3] == (ks, "table", '"T"')
        assert rows[1][3].startswith(
            f'CREATE TABLE {ks}."T" (\n    k int,\n    "C" int,\n    PRIMARY KEY (k, "C")\n'
            ') WITH CLUSTERING ORDER BY ("C" ASC)\n')


def test_describe_bare_name_and_current_keyspace(server, schema):
    with new_session(*server, keyspace=schema) as s:
        assert [r[:3] for r in s.execute("DESCRIBE t1")] == [(schema, "table", "t1")]
        assert [r[:3] for r in s.execute("DESCRIBE TYPE person")] == [(schema, "type", "person")]
        assert [tuple(r)[:3] for r in s.execute("DESCRIBE KEYSPACE")][0] == (
            schema, "keyspace", schema)
        assert describe(s, f"DESCRIBE {schema}")[0][:3] == (schema, "keyspace", schema)


def test_listings_after_use_show_the_current_keyspace_only(server, schema):
    """After USE, DESCRIBE TABLES, TYPES, FUNCTIONS and AGGREGATES list the current keyspace's
    elements only (Cassandra's `listElements`); DESCRIBE KEYSPACES still lists every one."""
    with new_session(*server, keyspace=schema) as s:
        tables = [tuple(r) for r in s.execute("DESCRIBE TABLES")]
        assert {t[0] for t in tables} == {schema}
        assert [t[2] for t in tables] == ["t1", "t2", "ta", '"Tb"']
        types = [tuple(r) for r in s.execute("DESCRIBE TYPES")]
        assert types == [(schema, "type", "aaa"), (schema, "type", "addr"), (schema, "type", "person")]
        assert list(s.execute("DESCRIBE FUNCTIONS")) == []
        assert list(s.execute("DESCRIBE AGGREGATES")) == []
        assert {r.name for r in s.execute("DESCRIBE KEYSPACES")} > {schema}


@pytest.mark.parametrize("statement", [
    "DESCRIBE TABLE {ks}.nope",
    "DESCRIBE TYPE {ks}.nope",
    "DESCRIBE KEYSPACE nope_ks_missing",
    "DESCRIBE nope_missing_anything",
    "DESCRIBE {ks}.nope",
])
def test_describe_missing_element_is_invalid(cql, schema, statement):
    with pytest.raises(InvalidRequest):
        cql.execute(statement.format(ks=schema))
