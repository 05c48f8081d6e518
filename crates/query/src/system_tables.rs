//! The node-served system keyspaces: `system` (local, peers, peers_v2), `system_schema`, and
//! `system_virtual_schema`. Their tables are declared in CQL (Cassandra 5.0's definitions) and
//! their rows are generated from the node's state and schema on every read.

use std::collections::BTreeMap;
use std::sync::Arc;

use cql_syntax::ast::Statement;
use schema::{KeyspaceMetadata, Replication, Schema, TableMetadata, TableOptions};
use types::CqlType;

use crate::ddl::table_from_create;
use crate::interface::NodeInfo;
use crate::QueryError;

/// Keyspaces listed in `system_virtual_schema` rather than `system_schema`, as in Cassandra.
const VIRTUAL_SCHEMA_KEYSPACES: &[&str] = &["system_virtual_schema"];

const SYSTEM_TABLES: &[(&str, &str)] = &[
    ("system", "CREATE TABLE local (key text, bootstrapped text, broadcast_address inet, broadcast_port int, cluster_name text, cql_version text, data_center text, gossip_generation int, host_id uuid, listen_address inet, listen_port int, native_protocol_version text, partitioner text, rack text, release_version text, rpc_address inet, rpc_port int, schema_version uuid, tokens set<text>, truncated_at map<uuid, blob>, PRIMARY KEY ((key)))"),
    ("system", "CREATE TABLE peers (peer inet, data_center text, host_id uuid, preferred_ip inet, rack text, release_version text, rpc_address inet, schema_version uuid, tokens set<text>, PRIMARY KEY ((peer)))"),
    ("system", "CREATE TABLE peers_v2 (peer inet, peer_port int, data_center text, host_id uuid, native_address inet, native_port int, preferred_ip inet, preferred_port int, rack text, release_version text, schema_version uuid, tokens set<text>, PRIMARY KEY ((peer), peer_port))"),
    ("system_schema", "CREATE TABLE keyspaces (keyspace_name text, durable_writes boolean, replication frozen<map<text, text>>, PRIMARY KEY ((keyspace_name)))"),
    ("system_schema", "CREATE TABLE tables (keyspace_name text, table_name text, allow_auto_snapshot boolean, bloom_filter_fp_chance double, caching frozen<map<text, text>>, comment text, compaction frozen<map<text, text>>, compression frozen<map<text, text>>, memtable text, crc_check_chance double, dclocal_read_repair_chance double, default_time_to_live int, extensions frozen<map<text, blob>>, flags frozen<set<text>>, gc_grace_seconds int, incremental_backups boolean, id uuid, max_index_interval int, memtable_flush_period_in_ms int, min_index_interval int, read_repair_chance double, speculative_retry text, additional_write_policy text, cdc boolean, read_repair text, PRIMARY KEY ((keyspace_name), table_name))"),
    ("system_schema", "CREATE TABLE columns (keyspace_name text, table_name text, column_name text, clustering_order text, column_name_bytes blob, kind text, position int, type text, PRIMARY KEY ((keyspace_name), table_name, column_name))"),
    ("system_schema", "CREATE TABLE column_masks (keyspace_name text, table_name text, column_name text, function_keyspace text, function_name text, function_argument_types frozen<list<text>>, function_argument_values frozen<list<text>>, function_argument_nulls frozen<list<boolean>>, PRIMARY KEY ((keyspace_name), table_name, column_name))"),
    ("system_schema", "CREATE TABLE dropped_columns (keyspace_name text, table_name text, column_name text, dropped_time timestamp, kind text, type text, PRIMARY KEY ((keyspace_name), table_name, column_name))"),
    ("system_schema", "CREATE TABLE triggers (keyspace_name text, table_name text, trigger_name text, options frozen<map<text, text>>, PRIMARY KEY ((keyspace_name), table_name, trigger_name))"),
    ("system_schema", "CREATE TABLE views (keyspace_name text, view_name text, base_table_id uuid, base_table_name text, where_clause text, allow_auto_snapshot boolean, bloom_filter_fp_chance double, caching frozen<map<text, text>>, comment text, compaction frozen<map<text, text>>, compression frozen<map<text, text>>, memtable text, crc_check_chance double, dclocal_read_repair_chance double, default_time_to_live int, extensions frozen<map<text, blob>>, gc_grace_seconds int, incremental_backups boolean, id uuid, include_all_columns boolean, max_index_interval int, memtable_flush_period_in_ms int, min_index_interval int, read_repair_chance double, speculative_retry text, additional_write_policy text, cdc boolean, read_repair text, PRIMARY KEY ((keyspace_name), view_name))"),
    ("system_schema", "CREATE TABLE indexes (keyspace_name text, table_name text, index_name text, kind text, options frozen<map<text, text>>, PRIMARY KEY ((keyspace_name), table_name, index_name))"),
    ("system_schema", "CREATE TABLE types (keyspace_name text, type_name text, field_names frozen<list<text>>, field_types frozen<list<text>>, PRIMARY KEY ((keyspace_name), type_name))"),
    ("system_schema", "CREATE TABLE functions (keyspace_name text, function_name text, argument_types frozen<list<text>>, argument_names frozen<list<text>>, body text, language text, return_type text, called_on_null_input boolean, PRIMARY KEY ((keyspace_name), function_name, argument_types))"),
    ("system_schema", "CREATE TABLE aggregates (keyspace_name text, aggregate_name text, argument_types frozen<list<text>>, final_func text, initcond text, return_type text, state_func text, state_type text, PRIMARY KEY ((keyspace_name), aggregate_name, argument_types))"),
    ("system_virtual_schema", "CREATE TABLE keyspaces (keyspace_name text, PRIMARY KEY ((keyspace_name)))"),
    ("system_virtual_schema", "CREATE TABLE tables (keyspace_name text, table_name text, comment text, PRIMARY KEY ((keyspace_name), table_name))"),
    ("system_virtual_schema", "CREATE TABLE columns (keyspace_name text, table_name text, column_name text, clustering_order text, column_name_bytes blob, kind text, position int, type text, PRIMARY KEY ((keyspace_name), table_name, column_name))"),
];

/// A stable id for a system table, so it is the same on every node and every start.
fn system_table_id(keyspace: &str, table: &str) -> uuid::Uuid {
    let name = format!("{keyspace}.{table}");
    let a = partitioner::murmur3_token(name.as_bytes()) as u64;
    let b = partitioner::murmur3_token(format!("#{name}").as_bytes()) as u64;
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_be_bytes());
    bytes[8..].copy_from_slice(&b.to_be_bytes());
    uuid::Builder::from_md5_bytes(bytes).into_uuid()
}

/// The node-served keyspaces (`system`, `system_schema`, `system_virtual_schema`), for the
/// schema service to add to the schema it loads: virtual, never persisted, no storage.
pub fn system_keyspaces() -> Result<Vec<KeyspaceMetadata>, QueryError> {
    let mut keyspaces: BTreeMap<String, KeyspaceMetadata> = BTreeMap::new();
    for (ks, cql) in SYSTEM_TABLES {
        let statement = cql_syntax::parse_statement(cql)
            .map_err(|e| QueryError::Server(format!("bad system table definition: {e}")))?;
        let Statement::CreateTable(create) = statement else {
            return Err(QueryError::Server(
                "system table definition is not CREATE TABLE".to_string(),
            ));
        };
        let name = create.name.name.as_str().to_string();
        let mut table =
            table_from_create(&create, ks, &BTreeMap::new(), system_table_id(ks, &name))?;
        table.virtual_table = true;
        table.options = TableOptions {
            gc_grace_seconds: 0,
            ..TableOptions::default()
        };
        keyspaces
            .entry(ks.to_string())
            .or_insert_with(|| KeyspaceMetadata {
                name: ks.to_string(),
                durable_writes: true,
                replication: Replication::local(),
                tables: BTreeMap::new(),
                types: BTreeMap::new(),
                virtual_keyspace: true,
            })
            .tables
            .insert(name, Arc::new(table));
    }
    Ok(keyspaces.into_values().collect())
}

// Value encoders for the generated rows (native protocol encodings).

type Cell = Option<Vec<u8>>;

fn text(s: &str) -> Cell {
    Some(s.as_bytes().to_vec())
}
fn int(v: i32) -> Cell {
    Some(v.to_be_bytes().to_vec())
}
fn double(v: f64) -> Cell {
    Some(v.to_be_bytes().to_vec())
}
fn boolean(v: bool) -> Cell {
    Some(vec![v as u8])
}
/// `cell`, or null when `default` (the value is its default).
fn unless(default: bool, cell: Cell) -> Cell {
    if default {
        None
    } else {
        cell
    }
}
fn uuid(v: uuid::Uuid) -> Cell {
    Some(v.as_bytes().to_vec())
}
fn inet(v: std::net::IpAddr) -> Cell {
    Some(match v {
        std::net::IpAddr::V4(a) => a.octets().to_vec(),
        std::net::IpAddr::V6(a) => a.octets().to_vec(),
    })
}
fn put(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as i32).to_be_bytes());
    out.extend_from_slice(b);
}
/// A list or set of texts (same encoding); sets must be given sorted.
fn texts<S: AsRef<str>>(items: &[S]) -> Cell {
    let mut out = (items.len() as i32).to_be_bytes().to_vec();
    for i in items {
        put(&mut out, i.as_ref().as_bytes());
    }
    Some(out)
}
fn text_map(m: &BTreeMap<String, String>) -> Cell {
    let mut out = (m.len() as i32).to_be_bytes().to_vec();
    for (k, v) in m {
        put(&mut out, k.as_bytes());
        put(&mut out, v.as_bytes());
    }
    Some(out)
}
fn blob_map(m: &BTreeMap<String, Vec<u8>>) -> Cell {
    let mut out = (m.len() as i32).to_be_bytes().to_vec();
    for (k, v) in m {
        put(&mut out, k.as_bytes());
        put(&mut out, v);
    }
    Some(out)
}

/// The internode port every node reports (Cassandra's default `storage_port`; Helenus has
/// no internode messaging yet).
const STORAGE_PORT: i32 = 7000;

/// Tokens as `system.local` and `system.peers` hold them: a set of their decimal strings,
/// sorted as text.
fn token_strings(tokens: &[i64]) -> Vec<String> {
    let mut out: Vec<String> = tokens.iter().map(i64::to_string).collect();
    out.sort();
    out
}

/// Arranges named values in the table's column order (unnamed columns are null).
fn row(table: &TableMetadata, values: Vec<(&str, Cell)>) -> Vec<Cell> {
    let mut out = vec![None; table.columns.len()];
    for (name, v) in values {
        if let Some(i) = table.column_index(name) {
            out[i] = v;
        }
    }
    out
}

/// How a type is written in `system_schema` (UDT names, tuples always frozen).
/// A type as `system_schema` records it: as DESCRIBE writes it, user types by their quoted-if-
/// needed name (a driver parses these strings: an unquoted `Odd` would name the type `odd`).
fn schema_type_name(t: &CqlType) -> String {
    crate::describe::cql_type(t)
}

fn listed_in(keyspace: &KeyspaceMetadata, virtual_schema: bool) -> bool {
    VIRTUAL_SCHEMA_KEYSPACES.contains(&keyspace.name.as_str()) == virtual_schema
}

/// Every row of a system table, sorted by primary key: from this node's facts (`node`) and a
/// schema snapshot.
pub(crate) fn rows(
    node: &NodeInfo,
    schema: &Schema,
    table: &TableMetadata,
) -> Result<Vec<Vec<Cell>>, QueryError> {
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    match (table.keyspace.as_str(), table.name.as_str()) {
        ("system", "local") => {
            let local = node.local();
            let tokens = token_strings(node.token_metadata.local_tokens());
            rows.push(row(
                table,
                vec![
                    ("key", text("local")),
                    ("bootstrapped", text("COMPLETED")),
                    ("broadcast_address", inet(local.broadcast_address)),
                    ("broadcast_port", int(STORAGE_PORT)),
                    ("cluster_name", text(&node.cluster_name)),
                    ("cql_version", text("3.4.7")),
                    ("data_center", text(&local.location.datacenter)),
                    ("gossip_generation", int(0)),
                    ("host_id", uuid(local.host_id.0)),
                    ("listen_address", inet(local.broadcast_address)),
                    ("listen_port", int(STORAGE_PORT)),
                    ("native_protocol_version", text("5")),
                    (
                        "partitioner",
                        text("org.apache.cassandra.dht.Murmur3Partitioner"),
                    ),
                    ("rack", text(&local.location.rack)),
                    ("release_version", text(&node.release_version)),
                    ("rpc_address", inet(local.native_address)),
                    ("rpc_port", int(local.native_port as i32)),
                    ("schema_version", uuid(schema.version)),
                    ("tokens", texts(&tokens)),
                ],
            ));
        }
        // Every node of the ring but this one (none on a single node). Their release and
        // schema versions come with gossip; until then they are null.
        ("system", "peers") => {
            for peer in node.token_metadata.peers() {
                let tokens = token_strings(node.token_metadata.tokens_of(peer.host_id));
                rows.push(row(
                    table,
                    vec![
                        ("peer", inet(peer.broadcast_address)),
                        ("data_center", text(&peer.location.datacenter)),
                        ("host_id", uuid(peer.host_id.0)),
                        ("rack", text(&peer.location.rack)),
                        ("rpc_address", inet(peer.native_address)),
                        ("tokens", texts(&tokens)),
                    ],
                ));
            }
        }
        ("system", "peers_v2") => {
            for peer in node.token_metadata.peers() {
                let tokens = token_strings(node.token_metadata.tokens_of(peer.host_id));
                rows.push(row(
                    table,
                    vec![
                        ("peer", inet(peer.broadcast_address)),
                        ("peer_port", int(STORAGE_PORT)),
                        ("data_center", text(&peer.location.datacenter)),
                        ("host_id", uuid(peer.host_id.0)),
                        ("native_address", inet(peer.native_address)),
                        ("native_port", int(peer.native_port as i32)),
                        ("rack", text(&peer.location.rack)),
                        ("tokens", texts(&tokens)),
                    ],
                ));
            }
        }
        ("system", _) => {}
        ("system_schema", "keyspaces") => {
            for ks in schema.keyspaces.values().filter(|k| listed_in(k, false)) {
                rows.push(row(
                    table,
                    vec![
                        ("keyspace_name", text(&ks.name)),
                        ("durable_writes", boolean(ks.durable_writes)),
                        ("replication", text_map(ks.replication.options())),
                    ],
                ));
            }
        }
        ("system_schema", "tables") => {
            for ks in schema.keyspaces.values().filter(|k| listed_in(k, false)) {
                for t in ks.tables.values() {
                    let o = &t.options;
                    rows.push(row(
                        table,
                        vec![
                            ("keyspace_name", text(&ks.name)),
                            ("table_name", text(&t.name)),
                            // These four Cassandra 5.0 writes only when not at their default.
                            (
                                "allow_auto_snapshot",
                                unless(o.allow_auto_snapshot, boolean(o.allow_auto_snapshot)),
                            ),
                            ("bloom_filter_fp_chance", double(o.bloom_filter_fp_chance)),
                            ("caching", text_map(&o.caching)),
                            ("comment", text(&o.comment)),
                            ("compaction", text_map(&o.compaction)),
                            ("compression", text_map(&o.compression)),
                            (
                                "memtable",
                                unless(o.memtable == "default", text(&o.memtable)),
                            ),
                            ("crc_check_chance", double(o.crc_check_chance)),
                            ("dclocal_read_repair_chance", double(0.0)),
                            ("default_time_to_live", int(o.default_time_to_live)),
                            ("extensions", blob_map(&o.extensions)),
                            ("flags", texts(&["compound"])),
                            ("gc_grace_seconds", int(o.gc_grace_seconds)),
                            (
                                "incremental_backups",
                                unless(o.incremental_backups, boolean(o.incremental_backups)),
                            ),
                            ("id", uuid(t.id)),
                            ("max_index_interval", int(o.max_index_interval)),
                            (
                                "memtable_flush_period_in_ms",
                                int(o.memtable_flush_period_in_ms),
                            ),
                            ("min_index_interval", int(o.min_index_interval)),
                            ("read_repair_chance", double(0.0)),
                            ("speculative_retry", text(&o.speculative_retry)),
                            ("additional_write_policy", text(&o.additional_write_policy)),
                            ("cdc", unless(!o.cdc, boolean(o.cdc))),
                            ("read_repair", text(&o.read_repair)),
                        ],
                    ));
                }
            }
        }
        ("system_schema" | "system_virtual_schema", "columns") => {
            let virtual_schema = table.keyspace == "system_virtual_schema";
            for ks in schema
                .keyspaces
                .values()
                .filter(|k| listed_in(k, virtual_schema))
            {
                for t in ks.tables.values() {
                    for c in &t.columns {
                        rows.push(row(
                            table,
                            vec![
                                ("keyspace_name", text(&ks.name)),
                                ("table_name", text(&t.name)),
                                ("column_name", text(&c.name)),
                                ("clustering_order", text(c.order.schema_name())),
                                ("column_name_bytes", Some(c.name.as_bytes().to_vec())),
                                ("kind", text(c.kind.schema_name())),
                                ("position", int(c.position)),
                                ("type", text(&schema_type_name(&c.ty))),
                            ],
                        ));
                    }
                }
            }
        }
        ("system_schema", "dropped_columns") => {
            for ks in schema.keyspaces.values().filter(|k| listed_in(k, false)) {
                for t in ks.tables.values() {
                    for (name, d) in &t.dropped_columns {
                        let millis = d.dropped_time_micros.div_euclid(1000);
                        rows.push(row(
                            table,
                            vec![
                                ("keyspace_name", text(&ks.name)),
                                ("table_name", text(&t.name)),
                                ("column_name", text(name)),
                                ("dropped_time", Some(millis.to_be_bytes().to_vec())),
                                ("kind", text(d.kind.schema_name())),
                                ("type", text(&schema_type_name(&d.ty))),
                            ],
                        ));
                    }
                }
            }
        }
        ("system_schema", "types") => {
            for ks in schema.keyspaces.values().filter(|k| listed_in(k, false)) {
                for t in ks.types.values() {
                    let names: Vec<&str> = t.fields.iter().map(|(n, _)| n.as_str()).collect();
                    let types: Vec<String> = t
                        .fields
                        .iter()
                        .map(|(_, ty)| schema_type_name(ty))
                        .collect();
                    rows.push(row(
                        table,
                        vec![
                            ("keyspace_name", text(&ks.name)),
                            ("type_name", text(&t.name)),
                            ("field_names", texts(&names)),
                            ("field_types", texts(&types)),
                        ],
                    ));
                }
            }
        }
        ("system_virtual_schema", "keyspaces") => {
            for ks in schema.keyspaces.values().filter(|k| listed_in(k, true)) {
                rows.push(row(table, vec![("keyspace_name", text(&ks.name))]));
            }
        }
        ("system_virtual_schema", "tables") => {
            for ks in schema.keyspaces.values().filter(|k| listed_in(k, true)) {
                for t in ks.tables.values() {
                    rows.push(row(
                        table,
                        vec![
                            ("keyspace_name", text(&ks.name)),
                            ("table_name", text(&t.name)),
                            ("comment", text(&t.options.comment)),
                        ],
                    ));
                }
            }
        }
        // Functions, aggregates, views, indexes, triggers, dropped columns, column masks: none
        // exist on this node yet.
        _ => {}
    }
    let key_columns = table.partition_key_count + table.clustering_count;
    rows.sort_by(|a, b| {
        for i in 0..key_columns {
            let ty = &table.columns[i].ty;
            let ord = match (&a[i], &b[i]) {
                (Some(x), Some(y)) => types::compare(ty, x, y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            };
            if ord.is_ne() {
                return ord;
            }
        }
        std::cmp::Ordering::Equal
    });
    Ok(rows)
}
