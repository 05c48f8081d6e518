//! Server-side `DESCRIBE` (Cassandra 4.0+), which `cqlsh` sends as a statement: result sets of
//! `keyspace_name, type, name[, create_statement]` with the CQL that recreates each element,
//! in Cassandra 5.0's exact text form (element order, column order, option list), so tools that
//! diff schemas see the same thing from both.
//!
//! Order within a keyspace, as Cassandra's `DescribeStatement`: the keyspace, its user types
//! (dependencies first), then its tables by name. Columns in CREATE TABLE: partition key,
//! clustering, then the others with static before regular and, within each, single-cell columns
//! before multi-cell ones, by name (Cassandra's `ColumnMetadata` order).

use std::collections::BTreeSet;

use bytes::Bytes;
use cql_syntax::ast::{Describe, DescribeTarget, Identifier, QualifiedName};
use schema::{ColumnKind, KeyspaceMetadata, Schema, TableMetadata, UserType, SYSTEM_KEYSPACES};
use types::CqlType;

use crate::interface::{ColumnSpec, NodeInfo, QueryResult, ResultSet};
use crate::QueryError;

/// Keyspaces Cassandra serves as virtual keyspaces (described in a comment, not as CQL).
const VIRTUAL_KEYSPACES: &[&str] = &["system_views", "system_virtual_schema"];

/// Cassandra lists keyspaces, tables and types in Java's case-insensitive order
/// (`String.CASE_INSENSITIVE_ORDER`: by lowercased characters); exact bytes break ties.
fn listing_order(name: &str) -> (String, &str) {
    (name.to_lowercase(), name)
}

fn keyspaces_in_order(schema: &Schema) -> Vec<&KeyspaceMetadata> {
    let mut out: Vec<_> = schema.keyspaces.values().map(|k| k.as_ref()).collect();
    out.sort_by(|a, b| listing_order(&a.name).cmp(&listing_order(&b.name)));
    out
}

fn tables_in_order(ks: &KeyspaceMetadata) -> Vec<&TableMetadata> {
    let mut out: Vec<_> = ks.tables.values().map(|t| t.as_ref()).collect();
    out.sort_by(|a, b| listing_order(&a.name).cmp(&listing_order(&b.name)));
    out
}

fn types_by_name(ks: &KeyspaceMetadata) -> Vec<&UserType> {
    let mut out: Vec<_> = ks.types.values().map(|t| t.as_ref()).collect();
    out.sort_by(|a, b| listing_order(&a.name).cmp(&listing_order(&b.name)));
    out
}

fn quoted(name: &str) -> String {
    Identifier::new(name).to_cql()
}

fn spec(name: &str) -> ColumnSpec {
    ColumnSpec {
        keyspace: String::new(),
        table: String::new(),
        name: name.to_string(),
        ty: CqlType::Text,
    }
}

fn text(s: &str) -> Option<Bytes> {
    Some(Bytes::copy_from_slice(s.as_bytes()))
}

/// One described element.
struct Element {
    keyspace: String,
    kind: &'static str,
    name: String,
    create: String,
}

fn rows(elements: Vec<Element>, with_statements: bool) -> QueryResult {
    let mut columns = vec![spec("keyspace_name"), spec("type"), spec("name")];
    if with_statements {
        columns.push(spec("create_statement"));
    }
    let rows = elements
        .into_iter()
        .map(|e| {
            let mut row = vec![text(&quoted(&e.keyspace)), text(e.kind), text(&e.name)];
            if with_statements {
                row.push(text(&e.create));
            }
            row
        })
        .collect();
    QueryResult::Rows(ResultSet {
        columns: columns.into(),
        rows,
        paging_state: None,
        skip_metadata: false,
    })
}

/// A CQL type as DESCRIBE writes it: user types by their (quoted if needed) name.
pub(crate) fn cql_type(t: &CqlType) -> String {
    match t {
        CqlType::List(e) => format!("list<{}>", cql_type(e)),
        CqlType::Set(e) => format!("set<{}>", cql_type(e)),
        CqlType::Map(k, v) => format!("map<{}, {}>", cql_type(k), cql_type(v)),
        CqlType::Tuple(items) => format!(
            "tuple<{}>",
            items.iter().map(cql_type).collect::<Vec<_>>().join(", ")
        ),
        CqlType::Udt(u) => quoted(&u.name),
        CqlType::Vector(e, n) => format!("vector<{}, {n}>", cql_type(e)),
        CqlType::Frozen(inner) => format!("frozen<{}>", cql_type(inner)),
        other => other.to_string(),
    }
}

/// A string literal with `'` doubled.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn map_literal<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a String)>) -> String {
    let items: Vec<String> = pairs
        .into_iter()
        .map(|(k, v)| format!("{}: {}", literal(k), literal(v)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// A double as Java's `Double.toString` writes the usual option values (`0.01`, `1.0`).
fn double(v: f64) -> String {
    format!("{v:?}")
}

fn create_keyspace(ks: &KeyspaceMetadata) -> String {
    if VIRTUAL_KEYSPACES.contains(&ks.name.as_str()) {
        return format!(
            "/*\nWarning: Keyspace {0} is a virtual keyspace and cannot be recreated with CQL.\n\
             Structure, for reference:\nVIRTUAL KEYSPACE {0};\n*/",
            quoted(&ks.name)
        );
    }
    // The strategy by its short name, first; then the options by name.
    let replication = ks.replication.options();
    let class = replication.get("class").map_or("", |c| c.as_str());
    let short = class.rsplit('.').next().unwrap_or(class).to_string();
    let class_key = "class".to_string();
    let options = std::iter::once((&class_key, &short))
        .chain(replication.iter().filter(|(k, _)| k.as_str() != "class"));
    format!(
        "CREATE KEYSPACE {} WITH replication = {}  AND durable_writes = {};",
        quoted(&ks.name),
        map_literal(options),
        ks.durable_writes
    )
}

fn create_type(t: &UserType) -> String {
    let fields: Vec<String> = t
        .fields
        .iter()
        .map(|(name, ty)| format!("    {} {}", quoted(name), cql_type(ty)))
        .collect();
    format!(
        "CREATE TYPE {}.{} (\n{}\n);",
        quoted(&t.keyspace),
        quoted(&t.name),
        fields.join(",\n")
    )
}

/// Cassandra's column order for DESCRIBE (see the module documentation).
fn describe_order(table: &TableMetadata) -> Vec<&schema::ColumnMetadata> {
    let keys = table.partition_key_count + table.clustering_count;
    let mut others: Vec<_> = table.columns[keys..].iter().collect();
    others.sort_by_key(|c| {
        (
            c.kind != ColumnKind::Static,
            c.ty.is_multi_cell(),
            c.name.as_bytes(),
        )
    });
    table.columns[..keys].iter().chain(others).collect()
}

fn create_table(table: &TableMetadata) -> String {
    let virtual_table = VIRTUAL_KEYSPACES.contains(&table.keyspace.as_str());
    let mut lines = Vec::new();
    let single_key = table.partition_key_count == 1 && table.clustering_count == 0;
    for (i, c) in describe_order(table).into_iter().enumerate() {
        let mut line = format!("    {} {}", quoted(&c.name), cql_type(&c.ty));
        if c.kind == ColumnKind::Static {
            line.push_str(" static");
        }
        if single_key && i == 0 {
            line.push_str(" PRIMARY KEY");
        }
        lines.push(line);
    }
    if !single_key {
        let names = |cols: &[schema::ColumnMetadata]| {
            cols.iter()
                .map(|c| quoted(&c.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let pk = &table.columns[..table.partition_key_count];
        let partition = if pk.len() == 1 {
            names(pk)
        } else {
            format!("({})", names(pk))
        };
        let clustering = &table.columns[table.partition_key_count..][..table.clustering_count];
        let key = if clustering.is_empty() {
            partition
        } else {
            format!("{partition}, {}", names(clustering))
        };
        lines.push(format!("    PRIMARY KEY ({key})"));
    }
    let head = format!(
        "CREATE {}TABLE {}.{} (\n{}\n)",
        if virtual_table { "VIRTUAL " } else { "" },
        quoted(&table.keyspace),
        quoted(&table.name),
        lines.join(",\n")
    );
    if virtual_table {
        return format!(
            "/*\nWarning: Table {}.{} is a virtual table and cannot be recreated with CQL.\n\
             Structure, for reference:\n{head};\n*/",
            quoted(&table.keyspace),
            quoted(&table.name)
        );
    }
    let o = &table.options;
    let mut props = Vec::new();
    let clustering = &table.columns[table.partition_key_count..][..table.clustering_count];
    if !clustering.is_empty() {
        let order: Vec<String> = clustering
            .iter()
            .map(|c| {
                let dir = match c.order {
                    schema::ClusteringOrder::Desc => "DESC",
                    _ => "ASC",
                };
                format!("{} {dir}", quoted(&c.name))
            })
            .collect();
        props.push(format!("CLUSTERING ORDER BY ({})", order.join(", ")));
    }
    props.push(format!(
        "additional_write_policy = {}",
        literal(&o.additional_write_policy)
    ));
    props.push(format!("allow_auto_snapshot = {}", o.allow_auto_snapshot));
    props.push(format!(
        "bloom_filter_fp_chance = {}",
        double(o.bloom_filter_fp_chance)
    ));
    props.push(format!("caching = {}", map_literal(&o.caching)));
    props.push(format!("cdc = {}", o.cdc));
    props.push(format!("comment = {}", literal(&o.comment)));
    props.push(format!("compaction = {}", map_literal(&o.compaction)));
    props.push(format!("compression = {}", map_literal(&o.compression)));
    props.push(format!("memtable = {}", literal(&o.memtable)));
    props.push(format!("crc_check_chance = {}", double(o.crc_check_chance)));
    props.push(format!("default_time_to_live = {}", o.default_time_to_live));
    let extensions: Vec<String> = o
        .extensions
        .iter()
        .map(|(k, v)| {
            let hex: String = v.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}: 0x{hex}", literal(k))
        })
        .collect();
    props.push(format!("extensions = {{{}}}", extensions.join(", ")));
    props.push(format!("gc_grace_seconds = {}", o.gc_grace_seconds));
    props.push(format!("incremental_backups = {}", o.incremental_backups));
    props.push(format!("max_index_interval = {}", o.max_index_interval));
    props.push(format!(
        "memtable_flush_period_in_ms = {}",
        o.memtable_flush_period_in_ms
    ));
    props.push(format!("min_index_interval = {}", o.min_index_interval));
    props.push(format!("read_repair = {}", literal(&o.read_repair)));
    props.push(format!(
        "speculative_retry = {}",
        literal(&o.speculative_retry.to_string())
    ));
    format!("{head} WITH {};", props.join("\n    AND "))
}

/// A keyspace's user types, each after the types it uses, otherwise by name.
fn types_in_dependency_order(ks: &KeyspaceMetadata) -> Vec<&UserType> {
    fn uses(t: &CqlType, name: &str) -> bool {
        match t {
            CqlType::Udt(u) => u.name == name || u.fields.iter().any(|(_, f)| uses(f, name)),
            CqlType::List(e) | CqlType::Set(e) | CqlType::Frozen(e) | CqlType::Vector(e, _) => {
                uses(e, name)
            }
            CqlType::Map(k, v) => uses(k, name) || uses(v, name),
            CqlType::Tuple(items) => items.iter().any(|i| uses(i, name)),
            _ => false,
        }
    }
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut out = Vec::new();
    // Types cannot be recursive, so each pass places at least one.
    while out.len() < ks.types.len() {
        let before = out.len();
        for t in types_by_name(ks) {
            if done.contains(t.name.as_str()) {
                continue;
            }
            let ready = ks.types.values().all(|other| {
                other.name == t.name
                    || done.contains(other.name.as_str())
                    || !t.fields.iter().any(|(_, f)| uses(f, &other.name))
            });
            if ready {
                done.insert(&t.name);
                out.push(t);
            }
        }
        if out.len() == before {
            break; // cannot happen with a valid schema; never loop forever
        }
    }
    out
}

/// Every element of a keyspace, in DESCRIBE order (`only`: just the keyspace).
fn keyspace_elements(ks: &KeyspaceMetadata, only: bool) -> Vec<Element> {
    let mut out = vec![Element {
        keyspace: ks.name.clone(),
        kind: "keyspace",
        name: quoted(&ks.name),
        create: create_keyspace(ks),
    }];
    if only {
        return out;
    }
    for t in types_in_dependency_order(ks) {
        out.push(type_element(t));
    }
    for t in tables_in_order(ks) {
        out.push(table_element(t));
    }
    out
}

fn type_element(t: &UserType) -> Element {
    Element {
        keyspace: t.keyspace.clone(),
        kind: "type",
        name: quoted(&t.name),
        create: create_type(t),
    }
}

fn table_element(t: &TableMetadata) -> Element {
    Element {
        keyspace: t.keyspace.clone(),
        kind: "table",
        name: quoted(&t.name),
        create: create_table(t),
    }
}

fn is_system(ks: &str) -> bool {
    SYSTEM_KEYSPACES.contains(&ks)
}

fn keyspace<'a>(schema: &'a Schema, name: &str) -> Result<&'a KeyspaceMetadata, QueryError> {
    schema
        .keyspace(name)
        .map(|k| k.as_ref())
        .ok_or_else(|| QueryError::Invalid(format!("'{}' not found in keyspaces", quoted(name))))
}

fn session_keyspace<'a>(
    name: Option<&'a Identifier>,
    session: Option<&'a str>,
) -> Result<&'a str, QueryError> {
    name.map(Identifier::as_str).or(session).ok_or_else(|| {
        QueryError::Invalid("No keyspace specified and no current keyspace".to_string())
    })
}

/// The keyspaces a DESCRIBE TABLES, TYPES, FUNCTIONS or AGGREGATES lists: the session's
/// keyspace alone if it has one, else all of them.
fn listed<'a>(
    schema: &'a Schema,
    session: Option<&str>,
) -> Result<Vec<&'a KeyspaceMetadata>, QueryError> {
    Ok(match session {
        Some(name) => vec![keyspace(schema, name)?],
        None => keyspaces_in_order(schema),
    })
}

fn qualified<'a>(name: &'a QualifiedName, session: Option<&'a str>) -> Result<&'a str, QueryError> {
    session_keyspace(name.keyspace.as_ref(), session)
}

/// Answers a DESCRIBE statement from `schema`.
pub(crate) fn execute(
    schema: &Schema,
    node: &NodeInfo,
    describe: &Describe,
    session: Option<&str>,
) -> Result<QueryResult, QueryError> {
    if describe.with_internals {
        return Err(QueryError::Invalid(
            "DESCRIBE ... WITH INTERNALS is not supported yet by Helenus".to_string(),
        ));
    }
    let all = || keyspaces_in_order(schema).into_iter();
    match &describe.target {
        DescribeTarget::Cluster => {
            let columns = vec![spec("cluster"), spec("partitioner"), spec("snitch")];
            Ok(QueryResult::Rows(ResultSet {
                columns: columns.into(),
                rows: vec![vec![
                    text(&node.cluster_name),
                    text("Murmur3Partitioner"),
                    text("DynamicEndpointSnitch"),
                ]],
                paging_state: None,
                skip_metadata: false,
            }))
        }
        DescribeTarget::Schema { full } => {
            let elements = all()
                .filter(|k| *full || !is_system(&k.name))
                .flat_map(|k| keyspace_elements(k, false))
                .collect();
            Ok(rows(elements, true))
        }
        DescribeTarget::Keyspaces => Ok(rows(
            all().flat_map(|k| keyspace_elements(k, true)).collect(),
            false,
        )),
        DescribeTarget::Keyspace { name, only } => {
            let ks = keyspace(schema, session_keyspace(name.as_ref(), session)?)?;
            Ok(rows(keyspace_elements(ks, *only), true))
        }
        // Cassandra lists the current keyspace's elements after USE, every keyspace's before
        // (`DescribeStatement.listElements`).
        DescribeTarget::Tables => Ok(rows(
            listed(schema, session)?
                .into_iter()
                .flat_map(|k| tables_in_order(k).into_iter().map(table_element))
                .collect(),
            false,
        )),
        DescribeTarget::Types => Ok(rows(
            listed(schema, session)?
                .into_iter()
                .flat_map(|k| types_by_name(k).into_iter().map(type_element))
                .collect(),
            false,
        )),
        // Helenus has no user functions or aggregates; the keyspace is still checked.
        DescribeTarget::Functions | DescribeTarget::Aggregates => {
            listed(schema, session)?;
            Ok(rows(Vec::new(), false))
        }
        DescribeTarget::Table(name) => {
            let ks = keyspace(schema, qualified(name, session)?)?;
            match ks.tables.get(name.name.as_str()) {
                Some(t) => Ok(rows(vec![table_element(t)], true)),
                None => Err(QueryError::Invalid(format!(
                    "Table '{}' not found in keyspace '{}'",
                    quoted(name.name.as_str()),
                    quoted(&ks.name)
                ))),
            }
        }
        DescribeTarget::Type(name) => {
            let ks = keyspace(schema, qualified(name, session)?)?;
            match ks.types.get(name.name.as_str()) {
                Some(t) => Ok(rows(vec![type_element(t)], true)),
                None => Err(QueryError::Invalid(format!(
                    "User defined type '{}' not found in '{}'",
                    quoted(name.name.as_str()),
                    quoted(&ks.name)
                ))),
            }
        }
        DescribeTarget::Index(name) => Err(QueryError::Invalid(format!(
            "Index '{}' not found",
            name.name
        ))),
        DescribeTarget::MaterializedView(name) => Err(QueryError::Invalid(format!(
            "Materialized view '{}' not found",
            name.name
        ))),
        DescribeTarget::Function(name) | DescribeTarget::Aggregate(name) => Err(
            QueryError::Invalid(format!("User defined function '{}' not found", name.name)),
        ),
        DescribeTarget::Generic(name) => {
            // A bare name is a keyspace if one has it; otherwise a table or type in the given
            // (or current) keyspace.
            if name.keyspace.is_none() {
                if let Some(ks) = schema.keyspace(name.name.as_str()) {
                    return Ok(rows(keyspace_elements(ks, false), true));
                }
                if session.is_none() {
                    return Err(QueryError::Invalid(format!(
                        "'{}' not found in keyspaces",
                        name.name
                    )));
                }
            }
            let ks = keyspace(schema, qualified(name, session)?)?;
            if let Some(t) = ks.tables.get(name.name.as_str()) {
                return Ok(rows(vec![table_element(t)], true));
            }
            if let Some(t) = ks.types.get(name.name.as_str()) {
                return Ok(rows(vec![type_element(t)], true));
            }
            Err(QueryError::Invalid(format!(
                "'{}' not found in keyspace '{}'",
                name.name,
                quoted(&ks.name)
            )))
        }
    }
}
