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
    ("system", "CREATE TABLE batches (id timeuuid, mutations list<blob>, version int, PRIMARY KEY ((id)))"),
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

/// `system.batches`: the batches this node's batch log holds, oldest first (Cassandra's
/// columns; `version` is the format version of the mutations' encoding).
fn batch_rows(node: &NodeInfo, table: &TableMetadata) -> Result<Vec<Vec<Cell>>, QueryError> {
    let Some(batchlog) = &node.batchlog else {
        return Ok(Vec::new());
    };
    let mut batches = Vec::new();
    loop {
        let after = batches.last().map(|b: &coordinator::Batch| b.id);
        let page = batchlog
            .0
            .stored_batches(after, 1024)
            .map_err(QueryError::Server)?;
        let last_page = page.len() < 1024;
        batches.extend(page);
        if last_page {
            break;
        }
    }
    Ok(batches
        .iter()
        .map(|batch| {
            let mutations = batch.encoded_mutations();
            let mut list = (mutations.len() as i32).to_be_bytes().to_vec();
            for m in &mutations {
                put(&mut list, m);
            }
            row(
                table,
                vec![
                    ("id", uuid(batch.id.as_uuid())),
                    ("mutations", Some(list)),
                    ("version", int(i32::from(mutation::MUTATION_FORMAT_VERSION))),
                ],
            )
        })
        .collect())
}

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

/// `system.local`'s one row: this node as the ring has it now, with what Cassandra 5.0's
/// `SystemKeyspace.persistLocalMetadata` writes (`listen_address` the configured one,
/// `broadcast_address` the ring's, `rpc_address` the broadcast native address) and what it adds
/// as the node starts (host id, tokens, gossip generation, schema version). `truncated_at`
/// stays null: Helenus keeps no truncation records there.
fn local_row(node: &NodeInfo, schema: &Schema, table: &TableMetadata) -> Vec<Cell> {
    let ring = node.ring();
    let local = ring.local_endpoint();
    let tokens = token_strings(ring.local_tokens());
    // Cassandra's BootstrapState: a joining node is still streaming its ranges.
    let bootstrapped = match local.state {
        locator::NodeState::Joining => "IN_PROGRESS",
        _ => "COMPLETED",
    };
    row(
        table,
        vec![
            ("key", text("local")),
            ("bootstrapped", text(bootstrapped)),
            ("broadcast_address", inet(local.broadcast_address)),
            ("broadcast_port", int(node.storage_port.into())),
            ("cluster_name", text(&node.cluster_name)),
            ("cql_version", text(CQL_VERSION)),
            ("data_center", text(&local.location.datacenter)),
            ("gossip_generation", int(node.gossip_generation)),
            ("host_id", uuid(local.host_id.0)),
            ("listen_address", inet(node.listen_address)),
            ("listen_port", int(node.storage_port.into())),
            ("native_protocol_version", text(NATIVE_PROTOCOL_VERSION)),
            ("partitioner", text(PARTITIONER)),
            ("rack", text(&local.location.rack)),
            ("release_version", text(&node.release_version)),
            ("rpc_address", inet(local.native_address)),
            ("rpc_port", int(local.native_port.into())),
            ("schema_version", uuid(schema.version)),
            ("tokens", texts(&tokens)),
        ],
    )
}

/// Which of the two peers tables: Cassandra 5.0 keeps the legacy `system.peers` (one address,
/// `rpc_address` for clients) beside `system.peers_v2` (addresses with ports) for old drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeersTable {
    Legacy,
    V2,
}

/// One row per other member of the ring now (Cassandra lists a node there once it owns
/// tokens: a joining node is not yet a member, and a node that is down still is). Release and
/// schema versions and the preferred address come from gossip's [`PeerDetails`]; a peer it has
/// said nothing of yet has them null, and `peer_port` this node's `storage_port` (the key
/// column cannot be null; every node of a cluster usually shares the port).
///
/// [`PeerDetails`]: crate::interface::PeerDetails
fn peer_rows(node: &NodeInfo, table: &TableMetadata, which: PeersTable) -> Vec<Vec<Cell>> {
    let ring = node.ring();
    let details = node.peers();
    let mut out = Vec::new();
    for peer in ring.peers() {
        if peer.state == locator::NodeState::Joining {
            continue;
        }
        let known = details.get(&peer.host_id);
        let tokens = token_strings(ring.tokens_of(peer.host_id));
        let mut values = vec![
            ("peer", inet(peer.broadcast_address)),
            ("data_center", text(&peer.location.datacenter)),
            ("host_id", uuid(peer.host_id.0)),
            ("rack", text(&peer.location.rack)),
            (
                "release_version",
                known
                    .and_then(|d| d.release_version.as_deref())
                    .and_then(text),
            ),
            (
                "schema_version",
                known.and_then(|d| d.schema_version).and_then(uuid),
            ),
            ("tokens", texts(&tokens)),
            (
                "preferred_ip",
                known
                    .and_then(|d| d.preferred_address)
                    .and_then(|a| inet(a.ip())),
            ),
        ];
        match which {
            PeersTable::Legacy => values.push(("rpc_address", inet(peer.native_address))),
            PeersTable::V2 => values.extend([
                (
                    "peer_port",
                    int(known.map_or(node.storage_port, |d| d.storage_port).into()),
                ),
                ("native_address", inet(peer.native_address)),
                ("native_port", int(peer.native_port.into())),
                (
                    "preferred_port",
                    known
                        .and_then(|d| d.preferred_address)
                        .and_then(|a| int(a.port().into())),
                ),
            ]),
        }
        out.push(row(table, values));
    }
    out
}

/// The CQL version Cassandra 5.0 reports (`QueryProcessor.CQL_VERSION`).
const CQL_VERSION: &str = "3.4.7";
/// The newest native protocol version Cassandra 5.0 speaks (`ProtocolVersion.CURRENT`).
const NATIVE_PROTOCOL_VERSION: &str = "5";
/// The partitioner, named as drivers expect (they pick their token type by it).
const PARTITIONER: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

/// Every row of a system table, sorted by primary key: from this node's facts (`node`) and a
/// schema snapshot.
pub(crate) fn rows(
    node: &NodeInfo,
    schema: &Schema,
    table: &TableMetadata,
) -> Result<Vec<Vec<Cell>>, QueryError> {
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    match (table.keyspace.as_str(), table.name.as_str()) {
        ("system", "local") => rows.push(local_row(node, schema, table)),
        ("system", "peers") => rows.extend(peer_rows(node, table, PeersTable::Legacy)),
        ("system", "peers_v2") => rows.extend(peer_rows(node, table, PeersTable::V2)),
        ("system", "batches") => rows.extend(batch_rows(node, table)?),
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
                            ("speculative_retry", text(&o.speculative_retry.to_string())),
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

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    use locator::{Endpoint, HostId, Location, NodeState, TokenMetadata};

    use super::*;
    use crate::interface::{PeerDetails, PeerDetailsMap};

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    fn endpoint(node: u8, dc: &str, rack: &str, state: NodeState) -> Endpoint {
        Endpoint {
            host_id: HostId(uuid::Uuid::from_u128(node.into())),
            broadcast_address: ip(node),
            native_address: IpAddr::V4(Ipv4Addr::new(10, 0, 0, node)),
            native_port: 9040 + u16::from(node),
            location: Location {
                datacenter: dc.to_string(),
                rack: rack.to_string(),
            },
            state,
        }
    }

    /// Node 1 (this one) in dc1/r1, node 2 in dc1/r2, node 3 in dc2/r1.
    fn three_nodes() -> TokenMetadata {
        TokenMetadata::new(endpoint(1, "dc1", "r1", NodeState::Normal), vec![-100, 100])
            .and_then(|r| {
                r.with_normal_tokens(endpoint(3, "dc2", "r1", NodeState::Normal), vec![5])
            })
            .and_then(|r| {
                r.with_normal_tokens(endpoint(2, "dc1", "r2", NodeState::Leaving), vec![-7, 50])
            })
            .expect("ring")
    }

    fn node(ring: TokenMetadata) -> NodeInfo {
        let mut node = NodeInfo::new("Prod", "5.0.2", Arc::new(ring));
        node.listen_address = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));
        node.storage_port = 7001;
        node.gossip_generation = 1_700_000_000;
        node
    }

    fn table(name: &str) -> Arc<TableMetadata> {
        let keyspaces = system_keyspaces().expect("system keyspaces");
        let system = keyspaces
            .iter()
            .find(|k| k.name == "system")
            .expect("system");
        system.tables[name].clone()
    }

    fn schema() -> Schema {
        Schema::default()
    }

    /// A row's cell by column name.
    fn cell<'a>(table: &TableMetadata, row: &'a [Cell], column: &str) -> &'a Cell {
        &row[table.column_index(column).expect(column)]
    }

    fn column_names(table: &TableMetadata) -> Vec<&str> {
        let mut names: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names
    }

    /// Exactly Cassandra 5.0's columns (`SystemKeyspace`'s LOCAL, LEGACY_PEERS, PEERS_V2).
    #[test]
    fn the_tables_have_cassandras_columns() {
        let mut local = vec![
            "key",
            "bootstrapped",
            "broadcast_address",
            "broadcast_port",
            "cluster_name",
            "cql_version",
            "data_center",
            "gossip_generation",
            "host_id",
            "listen_address",
            "listen_port",
            "native_protocol_version",
            "partitioner",
            "rack",
            "release_version",
            "rpc_address",
            "rpc_port",
            "schema_version",
            "tokens",
            "truncated_at",
        ];
        local.sort_unstable();
        assert_eq!(column_names(&table("local")), local);
        let mut peers = vec![
            "peer",
            "data_center",
            "host_id",
            "preferred_ip",
            "rack",
            "release_version",
            "rpc_address",
            "schema_version",
            "tokens",
        ];
        peers.sort_unstable();
        assert_eq!(column_names(&table("peers")), peers);
        let mut v2 = vec![
            "peer",
            "peer_port",
            "data_center",
            "host_id",
            "preferred_ip",
            "preferred_port",
            "rack",
            "release_version",
            "native_address",
            "native_port",
            "schema_version",
            "tokens",
        ];
        v2.sort_unstable();
        assert_eq!(column_names(&table("peers_v2")), v2);
        let v2 = table("peers_v2");
        assert_eq!((v2.partition_key_count, v2.clustering_count), (1, 1));
    }

    #[test]
    fn local_shows_this_node_with_its_configured_addresses() {
        let node = node(three_nodes());
        let local = table("local");
        let rows = rows(&node, &schema(), &local).expect("rows");
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        let get = |c| cell(&local, row, c).clone();
        assert_eq!(get("host_id"), uuid(uuid::Uuid::from_u128(1)));
        assert_eq!(get("cluster_name"), text("Prod"));
        assert_eq!(get("data_center"), text("dc1"));
        assert_eq!(get("rack"), text("r1"));
        assert_eq!(get("broadcast_address"), inet(ip(1)));
        assert_eq!(get("listen_address"), inet(node.listen_address));
        assert_eq!(
            get("rpc_address"),
            inet(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
        );
        assert_eq!(get("rpc_port"), int(9041));
        assert_eq!(get("broadcast_port"), int(7001));
        assert_eq!(get("listen_port"), int(7001));
        assert_eq!(get("gossip_generation"), int(1_700_000_000));
        assert_eq!(get("bootstrapped"), text("COMPLETED"));
        assert_eq!(get("tokens"), texts(&["-100", "100"]));
        assert_eq!(get("native_protocol_version"), text("5"));
        assert_eq!(get("truncated_at"), None);
    }

    #[test]
    fn peers_list_every_other_member_with_what_gossip_knows() {
        let node = node(three_nodes());
        let details: PeerDetailsMap = [(
            HostId(uuid::Uuid::from_u128(2)),
            PeerDetails {
                storage_port: 7002,
                release_version: Some("5.0.2".to_string()),
                schema_version: Some(uuid::Uuid::from_u128(99)),
                preferred_address: Some(SocketAddr::new(ip(200), 7012)),
                up: false,
            },
        )]
        .into_iter()
        .collect();
        node.peer_details.store(Arc::new(details));

        let peers = table("peers");
        let legacy = rows(&node, &schema(), &peers).expect("rows");
        // Sorted by peer address; node 2 is leaving (still a member) and down (still listed).
        let addresses: Vec<_> = legacy
            .iter()
            .map(|r| cell(&peers, r, "peer").clone())
            .collect();
        assert_eq!(addresses, [inet(ip(2)), inet(ip(3))]);
        let (two, three) = (&legacy[0], &legacy[1]);
        assert_eq!(
            cell(&peers, two, "host_id"),
            &uuid(uuid::Uuid::from_u128(2))
        );
        assert_eq!(cell(&peers, two, "data_center"), &text("dc1"));
        assert_eq!(cell(&peers, two, "rack"), &text("r2"));
        assert_eq!(cell(&peers, two, "tokens"), &texts(&["-7", "50"]));
        assert_eq!(
            cell(&peers, two, "rpc_address"),
            &inet(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)))
        );
        assert_eq!(cell(&peers, two, "release_version"), &text("5.0.2"));
        assert_eq!(
            cell(&peers, two, "schema_version"),
            &uuid(uuid::Uuid::from_u128(99))
        );
        assert_eq!(cell(&peers, two, "preferred_ip"), &inet(ip(200)));
        // Gossip has said nothing of node 3 yet.
        assert_eq!(cell(&peers, three, "data_center"), &text("dc2"));
        assert_eq!(cell(&peers, three, "release_version"), &None);
        assert_eq!(cell(&peers, three, "schema_version"), &None);
        assert_eq!(cell(&peers, three, "preferred_ip"), &None);

        let v2 = table("peers_v2");
        let v2_rows = rows(&node, &schema(), &v2).expect("rows");
        assert_eq!(v2_rows.len(), 2);
        let (two, three) = (&v2_rows[0], &v2_rows[1]);
        assert_eq!(cell(&v2, two, "peer_port"), &int(7002));
        assert_eq!(cell(&v2, two, "preferred_port"), &int(7012));
        assert_eq!(
            cell(&v2, two, "native_address"),
            &inet(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)))
        );
        assert_eq!(cell(&v2, two, "native_port"), &int(9042));
        // Without details, this node's storage port.
        assert_eq!(cell(&v2, three, "peer_port"), &int(7001));
        assert_eq!(cell(&v2, three, "native_port"), &int(9043));
        assert_eq!(cell(&v2, three, "tokens"), &texts(&["5"]));
    }

    #[test]
    fn a_ring_swapped_in_is_what_the_next_read_shows() {
        let node = node(
            TokenMetadata::new(endpoint(1, "dc1", "r1", NodeState::Normal), vec![1]).expect("ring"),
        );
        let peers = table("peers");
        assert!(rows(&node, &schema(), &peers).expect("rows").is_empty());
        // A clone (as the processor holds) shares the ring.
        let reader = node.clone();
        node.token_metadata.store(Arc::new(three_nodes()));
        assert_eq!(rows(&reader, &schema(), &peers).expect("rows").len(), 2);
        let local = table("local");
        let row = &rows(&reader, &schema(), &local).expect("rows")[0];
        assert_eq!(cell(&local, row, "tokens"), &texts(&["-100", "100"]));
    }

    #[test]
    fn joining_nodes_are_not_yet_peers() {
        let ring = three_nodes()
            .with_normal_tokens(endpoint(4, "dc1", "r1", NodeState::Joining), vec![77])
            .expect("ring");
        let node = node(ring);
        let peers = table("peers_v2");
        assert_eq!(rows(&node, &schema(), &peers).expect("rows").len(), 2);
        // This node joining reports its bootstrap in progress.
        let joining = TokenMetadata::new(endpoint(1, "dc1", "r1", NodeState::Joining), vec![1])
            .expect("ring");
        let node = super::tests::node(joining);
        let local = table("local");
        let row = &rows(&node, &schema(), &local).expect("rows")[0];
        assert_eq!(cell(&local, row, "bootstrapped"), &text("IN_PROGRESS"));
    }
}
