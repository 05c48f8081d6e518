//! Schema statements: keyspaces, tables, user types, USE-independent DDL, TRUNCATE.
//!
//! What decides a change lives here: validation against a schema snapshot, the new `Schema`
//! value, Cassandra's words for a refusal. The schema service applies the change (persists it,
//! prepares storage, announces it); TRUNCATE is data, not schema, and goes through the
//! coordinator to every node.

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator::{Coordinator, Deadline};
use cql_syntax::ast::{
    self, AlterTableAction, AlterTypeAction, Constant, CreateTable, Order, Properties,
    PropertyValue, QualifiedName, Statement, TypeExpr,
};
use schema::{
    ClusteringOrder, ColumnKind, KeyspaceMetadata, OptionValue, Replication, Schema, TableMetadata,
    TableOptions, UserType, SYSTEM_KEYSPACES,
};
use schema_service::{
    SchemaChangeEvent, SchemaChangeKind, SchemaChangeTarget, SchemaService, SchemaUpdate,
};
use types::{CqlType, UdtType};

use crate::interface::{NodeInfo, QueryResult};
use crate::prepared::PreparedCache;
use crate::QueryError;

/// What a schema statement needs of the node.
pub(crate) struct DdlContext<'a> {
    /// Where a change is submitted, and the schema it is decided on.
    pub(crate) schema: &'a SchemaService,
    /// TRUNCATE's way to every node.
    pub(crate) coordinator: &'a Coordinator,
    /// The local data centre, for a keyspace's replication warnings.
    pub(crate) node: &'a NodeInfo,
    /// Emptied by a change that may leave prepared statements wrong.
    pub(crate) prepared: &'a PreparedCache,
    /// This node's next write timestamp: when ALTER TABLE DROP drops a column, unless it says
    /// `USING TIMESTAMP`.
    pub(crate) next_timestamp: &'a (dyn Fn() -> i64 + Sync),
    /// When a TRUNCATE times out (`truncate_request_timeout` from the request's start).
    pub(crate) truncate_deadline: Deadline,
}

/// Cassandra's limit on keyspace and table names.
/// Cassandra 5.0's longest keyspace name (its data directory's) and longest table name (its
/// SSTable file names'). Helenus names storage by table id, but keeps Cassandra's bounds.
const MAX_KEYSPACE_NAME_LENGTH: usize = 48;
const MAX_TABLE_NAME_LENGTH: usize = 222;

fn name_chars_valid(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A keyspace name as Cassandra 5.0 validates it, in its words.
fn valid_keyspace_name(name: &str) -> Result<(), QueryError> {
    if !name_chars_valid(name) {
        return Err(QueryError::Invalid(format!(
            "Keyspace name must not be empty and must contain alphanumeric or underscore characters only (got \"{name}\")"
        )));
    }
    if name.len() > MAX_KEYSPACE_NAME_LENGTH {
        return Err(QueryError::Invalid(format!(
            "Keyspace name must not be more than {MAX_KEYSPACE_NAME_LENGTH} characters long (got {} characters for \"{name}\")",
            name.len()
        )));
    }
    Ok(())
}

/// A table name as Cassandra 5.0 validates it: a configuration error naming the table.
fn valid_table_name(keyspace: &str, name: &str) -> Result<(), QueryError> {
    if !name_chars_valid(name) {
        return Err(QueryError::Config(format!(
            "{keyspace}.{name}: Table name must not be empty or not contain non-alphanumeric-underscore characters (got \"{name}\")"
        )));
    }
    if name.len() > MAX_TABLE_NAME_LENGTH {
        return Err(QueryError::Config(format!(
            "{keyspace}.{name}: Table name must not be more than {MAX_TABLE_NAME_LENGTH} characters long (got {} characters for \"{name}\")",
            name.len()
        )));
    }
    Ok(())
}

/// A property value's text: Cassandra's `Constants.Literal.getRawText` (a hex constant keeps
/// its `0x`).
fn constant_text(c: &Constant) -> String {
    match c {
        Constant::Hex(h) => format!("0x{h}"),
        Constant::String(s)
        | Constant::Integer(s)
        | Constant::Float(s)
        | Constant::Uuid(s)
        | Constant::Duration(s) => s.clone(),
        Constant::Boolean(b) => b.to_string(),
        Constant::NaN => "NaN".to_string(),
        Constant::Infinity => "Infinity".to_string(),
        Constant::NegInfinity => "-Infinity".to_string(),
    }
}

fn property_value(v: &PropertyValue) -> OptionValue {
    match v {
        PropertyValue::Constant(c) => OptionValue::Text(constant_text(c)),
        PropertyValue::Identifier(i) => OptionValue::Text(i.as_str().to_string()),
        PropertyValue::Map(entries) => OptionValue::Map(
            entries
                .iter()
                .map(|(k, v)| (constant_text(k), constant_text(v)))
                .collect(),
        ),
    }
}

/// Cassandra's warnings for more replicas than nodes, counted in the locator's topology.
fn replication_warnings(node: &NodeInfo, keyspace: &str, replication: &Replication) -> Vec<String> {
    let ring = node.ring();
    let topology = ring.topology();
    crate::warnings::replication_warnings(
        keyspace,
        replication,
        |dc| topology.endpoint_count(dc),
        topology.len(),
    )
}

/// What Cassandra's `KeyspaceAttributes.validate` checks before anything else of a CREATE or
/// ALTER KEYSPACE (before whether the keyspace exists): every property is known, and a
/// replication map names its class.
fn check_keyspace_props(props: &Properties) -> Result<(), QueryError> {
    for p in &props.0 {
        match (p.name.as_str(), &p.value) {
            ("replication", PropertyValue::Map(entries)) => {
                let has_class = entries.iter().any(|(k, _)| constant_text(k) == "class");
                if !entries.is_empty() && !has_class {
                    return Err(QueryError::Config(
                        "Missing replication strategy class".to_string(),
                    ));
                }
            }
            ("replication" | "durable_writes", _) => {}
            (other, _) => {
                return Err(QueryError::Syntax(format!("Unknown property '{other}'")));
            }
        }
    }
    Ok(())
}

/// A keyspace's replication and durability from its properties, validated as Cassandra does
/// once it knows whether the keyspace exists (`existing`, for an ALTER).
fn keyspace_props(
    props: &Properties,
    default_dc: &str,
    keyspace: &str,
    existing: Option<&KeyspaceMetadata>,
) -> Result<(Replication, bool), QueryError> {
    let mut replication = existing.map(|k| k.replication.clone());
    let mut durable = existing.map(|k| k.durable_writes).unwrap_or(true);
    for p in &props.0 {
        match (p.name.as_str(), property_value(&p.value)) {
            ("replication", OptionValue::Map(m)) => {
                let previous = existing.map(|k| &k.replication);
                replication = Some(Replication::from_options(
                    &m, default_dc, keyspace, previous,
                )?)
            }
            ("durable_writes", OptionValue::Text(t)) => {
                durable = schema::parse_boolean_property("durable_writes", &t)?;
            }
            ("durable_writes", OptionValue::Map(_)) => {
                return Err(QueryError::Syntax(
                    "Invalid value for property 'durable_writes'. It should be a string"
                        .to_string(),
                ))
            }
            ("replication", _) => {
                return Err(QueryError::Syntax(
                    "Invalid value for property 'replication'. It should be a map.".to_string(),
                ))
            }
            (other, _) => {
                return Err(QueryError::Syntax(format!("Unknown property '{other}'")));
            }
        }
    }
    let replication = replication
        .ok_or_else(|| QueryError::Invalid("Missing mandatory option 'replication'".to_string()))?;
    Ok((replication, durable))
}

/// Resolves a type expression of a column or field, with Cassandra's freezing rules.
pub(crate) fn resolve_type(
    expr: &TypeExpr,
    keyspace: &str,
    types: &BTreeMap<String, Arc<UserType>>,
    inside_collection: bool,
    frozen: bool,
) -> Result<CqlType, QueryError> {
    Ok(match expr {
        TypeExpr::Native(name) => CqlType::from_native_name(name)
            .ok_or_else(|| QueryError::Invalid(format!("Unknown type {name}")))?,
        TypeExpr::Frozen(inner) => {
            let t = resolve_type(inner, keyspace, types, false, true)?;
            match t {
                CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) | CqlType::Udt(_) => {
                    CqlType::Frozen(Box::new(t))
                }
                CqlType::Frozen(_) => t,
                // Tuples are already frozen; frozen<int> is just int.
                other => other,
            }
        }
        TypeExpr::List(e) | TypeExpr::Set(e) => {
            if inside_collection && !frozen {
                return Err(QueryError::Invalid(
                    "Non-frozen collections are not allowed inside collections".to_string(),
                ));
            }
            let elem = resolve_type(e, keyspace, types, true, frozen)?;
            check_inner(&elem)?;
            match expr {
                TypeExpr::List(_) => CqlType::List(Box::new(elem)),
                _ => CqlType::Set(Box::new(elem)),
            }
        }
        TypeExpr::Map(k, v) => {
            if inside_collection && !frozen {
                return Err(QueryError::Invalid(
                    "Non-frozen collections are not allowed inside collections".to_string(),
                ));
            }
            let k = resolve_type(k, keyspace, types, true, frozen)?;
            let v = resolve_type(v, keyspace, types, true, frozen)?;
            check_inner(&k)?;
            check_inner(&v)?;
            CqlType::Map(Box::new(k), Box::new(v))
        }
        TypeExpr::Tuple(items) => {
            if items.len() > MAX_COMPONENTS {
                return Err(QueryError::Invalid(format!(
                    "A tuple may have at most {MAX_COMPONENTS} components, got {}",
                    items.len()
                )));
            }
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                let t = resolve_type(i, keyspace, types, true, true)?;
                out.push(freeze(t));
            }
            CqlType::Frozen(Box::new(CqlType::Tuple(out)))
        }
        TypeExpr::UserType(QualifiedName { keyspace: ks, name }) => {
            if let Some(ks) = ks {
                if ks.as_str() != keyspace {
                    return Err(QueryError::Invalid(format!(
                        "Statement on keyspace {keyspace} cannot refer to a user type in keyspace {}; user types can only be used in the keyspace they are defined in",
                        ks.as_str()
                    )));
                }
            }
            let udt = types.get(name.as_str()).ok_or_else(|| {
                QueryError::Invalid(format!("Unknown type {keyspace}.{}", name.as_str()))
            })?;
            if inside_collection && !frozen {
                return Err(QueryError::Invalid(format!(
                    "Non-frozen UDTs are not allowed inside collections: {}",
                    name.as_str()
                )));
            }
            CqlType::Udt(UdtType {
                keyspace: keyspace.to_string(),
                name: udt.name.clone(),
                fields: udt.fields.clone(),
            })
        }
        TypeExpr::Vector(e, n) => {
            let Ok(dimension) = u32::try_from(*n) else {
                return Err(QueryError::Invalid(format!(
                    "vectors may only have positive dimensions; given {n}"
                )));
            };
            if dimension == 0 {
                return Err(QueryError::Invalid(
                    "vectors may only have positive dimensions; given 0".to_string(),
                ));
            }
            let elem = resolve_type(e, keyspace, types, true, true)?;
            CqlType::Vector(Box::new(freeze(elem)), dimension)
        }
        TypeExpr::Custom(class) => {
            return Err(QueryError::Invalid(format!(
                "Custom types ('{class}') are not supported by Helenus"
            )))
        }
    })
}

/// Whether a non-frozen UDT column of type `t` would hold a non-frozen collection in a field:
/// Cassandra refuses such columns (the type itself may have such fields, used frozen).
fn non_frozen_udt_with_collection(t: &CqlType) -> bool {
    matches!(t, CqlType::Udt(u) if u.fields.iter().any(|(_, f)| f.is_multi_cell()))
}

fn freeze(t: CqlType) -> CqlType {
    match t {
        CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) | CqlType::Udt(_) => {
            CqlType::Frozen(Box::new(t))
        }
        other => other,
    }
}

fn check_inner(t: &CqlType) -> Result<(), QueryError> {
    if t.is_counter() {
        return Err(QueryError::Invalid(
            "Counters are not allowed inside collections".to_string(),
        ));
    }
    Ok(())
}

fn keyspace_name(
    name: &QualifiedName,
    session_keyspace: Option<&str>,
) -> Result<String, QueryError> {
    match &name.keyspace {
        Some(k) => Ok(k.as_str().to_string()),
        None => session_keyspace.map(str::to_string).ok_or_else(|| {
            QueryError::Invalid(
                "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename"
                    .to_string(),
            )
        }),
    }
}

fn user_keyspace<'a>(
    schema: &'a Schema,
    name: &str,
) -> Result<&'a Arc<KeyspaceMetadata>, QueryError> {
    let ks = schema
        .keyspace(name)
        .ok_or_else(|| QueryError::Invalid(format!("Keyspace '{name}' doesn't exist")))?;
    if ks.virtual_keyspace {
        return Err(QueryError::Unauthorized(format!(
            "{name} keyspace is not user-modifiable."
        )));
    }
    Ok(ks)
}

/// Builds table metadata from CREATE TABLE (also used for the system tables' definitions).
pub(crate) fn table_from_create(
    s: &CreateTable,
    keyspace: &str,
    types: &BTreeMap<String, Arc<UserType>>,
    id: uuid::Uuid,
) -> Result<TableMetadata, QueryError> {
    let mut columns = Vec::with_capacity(s.columns.len());
    for c in &s.columns {
        let ty = resolve_type(&c.ty, keyspace, types, false, false)?;
        if non_frozen_udt_with_collection(&ty) {
            return Err(QueryError::Invalid(
                "Non-frozen UDTs with nested non-frozen collections are not supported".to_string(),
            ));
        }
        columns.push((c.name.as_str().to_string(), ty, c.is_static));
    }
    let pk: Vec<String> = s
        .partition_key
        .iter()
        .map(|i| i.as_str().to_string())
        .collect();
    let mut clustering: Vec<(String, ClusteringOrder)> = s
        .clustering_columns
        .iter()
        .map(|i| (i.as_str().to_string(), ClusteringOrder::Asc))
        .collect();
    for (i, (name, order)) in s.clustering_order.iter().enumerate() {
        let pos = clustering
            .iter()
            .position(|(c, _)| c == name.as_str())
            .ok_or_else(|| {
                QueryError::Invalid(format!(
                    "Only clustering key columns can be defined in CLUSTERING ORDER directive: [{}] are not clustering columns",
                    name.as_str()
                ))
            })?;
        if pos != i {
            return Err(QueryError::Invalid(format!(
                "The order of columns in the CLUSTERING ORDER directive must match that of the clustering columns ({} must appear before {})",
                clustering[i].0,
                name.as_str()
            )));
        }
        clustering[pos].1 = match order {
            Order::Asc => ClusteringOrder::Asc,
            Order::Desc => ClusteringOrder::Desc,
        };
    }
    if s.compact_storage {
        return Err(QueryError::Invalid(
            "COMPACT STORAGE tables are not supported yet by Helenus".to_string(),
        ));
    }
    let options = table_options(s)?;
    Ok(TableMetadata::new(
        keyspace,
        s.name.name.as_str(),
        id,
        columns,
        &pk,
        &clustering,
        options,
    )?)
}

/// A CREATE TABLE's `WITH` properties, validated.
fn table_options(s: &CreateTable) -> Result<TableOptions, QueryError> {
    let mut options = TableOptions::default();
    for p in &s.properties.0 {
        if p.name.as_str() == "id" {
            return Err(QueryError::Invalid(
                "Choosing a table's id (WITH id) is not supported yet by Helenus".to_string(),
            ));
        }
        options.set(p.name.as_str(), property_value(&p.value))?;
    }
    // Cassandra's default bloom filter chance follows the compaction strategy: 0.1 for LCS.
    let leveled = options
        .compaction
        .get("class")
        .is_some_and(|c| c.ends_with(".LeveledCompactionStrategy"));
    let fp_given = s
        .properties
        .0
        .iter()
        .any(|p| p.name.as_str() == "bloom_filter_fp_chance");
    if leveled && !fp_given {
        options.bloom_filter_fp_chance = 0.1;
    }
    options.validate()?;
    Ok(options)
}

/// A type referenced by a table: the name of every UDT it contains (to refuse dropping it).
fn uses_type(t: &CqlType, name: &str) -> bool {
    match t {
        CqlType::Udt(u) => u.name == name || u.fields.iter().any(|(_, f)| uses_type(f, name)),
        CqlType::List(e) | CqlType::Set(e) | CqlType::Frozen(e) | CqlType::Vector(e, _) => {
            uses_type(e, name)
        }
        CqlType::Map(k, v) => uses_type(k, name) || uses_type(v, name),
        CqlType::Tuple(items) => items.iter().any(|i| uses_type(i, name)),
        _ => false,
    }
}

/// A type as Cassandra's messages print it (`CQL3Type.toString`): user types named with their
/// keyspace, tuples without the `frozen<>` they always are.
fn type_with_keyspaces(t: &CqlType) -> String {
    let name = |n: &str| cql_syntax::ast::Identifier::new(n).to_cql();
    match t {
        CqlType::Udt(u) => format!("{}.{}", name(&u.keyspace), name(&u.name)),
        CqlType::Frozen(inner) if matches!(**inner, CqlType::Tuple(_)) => {
            type_with_keyspaces(inner)
        }
        CqlType::Frozen(inner) => format!("frozen<{}>", type_with_keyspaces(inner)),
        CqlType::List(e) => format!("list<{}>", type_with_keyspaces(e)),
        CqlType::Set(e) => format!("set<{}>", type_with_keyspaces(e)),
        CqlType::Map(k, v) => format!(
            "map<{}, {}>",
            type_with_keyspaces(k),
            type_with_keyspaces(v)
        ),
        CqlType::Tuple(items) => {
            let items: Vec<String> = items.iter().map(type_with_keyspaces).collect();
            format!("tuple<{}>", items.join(", "))
        }
        CqlType::Vector(e, n) => format!("vector<{}, {n}>", type_with_keyspaces(e)),
        other => other.to_string(),
    }
}

/// The most fields a user type, or components a tuple, may have: the protocol's type option
/// counts them in a `[short]`.
const MAX_COMPONENTS: usize = u16::MAX as usize;

/// `t` with every embedded copy of the user type `altered` (same keyspace and name) replaced by
/// its new definition.
fn with_altered_type(t: &CqlType, altered: &UdtType) -> CqlType {
    let recurse = |e: &CqlType| Box::new(with_altered_type(e, altered));
    match t {
        CqlType::Udt(u) if u.name == altered.name && u.keyspace == altered.keyspace => {
            CqlType::Udt(altered.clone())
        }
        CqlType::Udt(u) => CqlType::Udt(UdtType {
            keyspace: u.keyspace.clone(),
            name: u.name.clone(),
            fields: u
                .fields
                .iter()
                .map(|(n, f)| (n.clone(), with_altered_type(f, altered)))
                .collect(),
        }),
        CqlType::List(e) => CqlType::List(recurse(e)),
        CqlType::Set(e) => CqlType::Set(recurse(e)),
        CqlType::Frozen(e) => CqlType::Frozen(recurse(e)),
        CqlType::Vector(e, n) => CqlType::Vector(recurse(e), *n),
        CqlType::Map(k, v) => CqlType::Map(recurse(k), recurse(v)),
        CqlType::Tuple(items) => CqlType::Tuple(
            items
                .iter()
                .map(|i| with_altered_type(i, altered))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What a schema statement decided: the schema it makes and what goes with it.
struct Change {
    schema: Schema,
    event: SchemaChangeEvent,
    invalidates_prepared: bool,
    /// Client warnings to send with the result.
    warnings: Vec<String>,
}

fn event(
    kind: SchemaChangeKind,
    target: SchemaChangeTarget,
    ks: &str,
    name: Option<&str>,
) -> SchemaChangeEvent {
    SchemaChangeEvent {
        kind,
        target,
        keyspace: ks.to_string(),
        name: name.map(str::to_string),
    }
}

pub(crate) async fn execute(
    ctx: &DdlContext<'_>,
    statement: &Statement,
    session_keyspace: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<QueryResult, QueryError> {
    if let Statement::Truncate(s) = statement {
        return truncate(ctx, &s.name, session_keyspace).await;
    }
    // Decided on the schema the service shows, perhaps again on a newer one: only the last
    // decision's warnings and invalidation count.
    let mut decided_warnings = Vec::new();
    let mut invalidates_prepared = false;
    let applied = ctx
        .schema
        .submit(|current| {
            let Some(change) = plan_change(ctx, current, statement, session_keyspace)? else {
                // IF [NOT] EXISTS made the statement a no-op.
                return Ok(None);
            };
            decided_warnings = change.warnings;
            invalidates_prepared = change.invalidates_prepared;
            Ok::<_, QueryError>(Some(SchemaUpdate {
                schema: change.schema,
                event: change.event,
            }))
        })
        .await?;
    let Some(event) = applied else {
        return Ok(QueryResult::Void);
    };
    if invalidates_prepared {
        ctx.prepared.clear();
    }
    warnings.append(&mut decided_warnings);
    Ok(QueryResult::SchemaChange(event))
}

/// TRUNCATE: data, not schema, so it goes through the coordinator to every node.
async fn truncate(
    ctx: &DdlContext<'_>,
    name: &QualifiedName,
    session_keyspace: Option<&str>,
) -> Result<QueryResult, QueryError> {
    let schema = ctx.schema.snapshot();
    let ks_name = keyspace_name(name, session_keyspace)?;
    let name = name.name.as_str();
    let table = schema
        .table(&ks_name, name)
        .ok_or_else(|| QueryError::Invalid(format!("table {name} does not exist")))?;
    if table.virtual_table {
        return Err(QueryError::Invalid(format!(
            "Cannot truncate table {ks_name}.{name} of a system keyspace"
        )));
    }
    let keyspace = schema
        .keyspace(&ks_name)
        .expect("a table's keyspace is in the schema that names the table");
    ctx.coordinator
        .truncate(keyspace, table.id, ctx.truncate_deadline)
        .await
        .map_err(truncate_error)?;
    Ok(QueryResult::Void)
}

/// A TRUNCATE that failed on its way to the nodes: Cassandra's `TruncateException` (code
/// TRUNCATE_ERROR) wraps the unavailable, timeout and replica errors, in these words.
fn truncate_error(e: coordinator::CoordinatorError) -> QueryError {
    use coordinator::CoordinatorError as E;
    if matches!(e, E::Replica(_)) {
        tracing::error!(error = %e, "a TRUNCATE failed in the storage layer");
    }
    QueryError::Truncate(format!("Error during truncate: {e}"))
}

/// A user type's field type. Like Cassandra, a field may be a non-frozen collection (the type
/// is then used frozen, where the collection is one value), not a non-frozen UDT or a counter.
fn field_type(
    t: &TypeExpr,
    keyspace: &str,
    types: &BTreeMap<String, Arc<UserType>>,
) -> Result<CqlType, QueryError> {
    let ty = resolve_type(t, keyspace, types, false, false)?;
    if matches!(ty, CqlType::Udt(_)) {
        return Err(QueryError::Invalid(
            "A user type cannot contain non-frozen UDTs".to_string(),
        ));
    }
    if ty.is_counter() {
        return Err(QueryError::Invalid(
            "A user type cannot contain counters".to_string(),
        ));
    }
    Ok(ty)
}

fn plan_change(
    ctx: &DdlContext<'_>,
    current: &Schema,
    statement: &Statement,
    session_keyspace: Option<&str>,
) -> Result<Option<Change>, QueryError> {
    let schema = current.clone();
    match statement {
        Statement::CreateKeyspace(s) => create_keyspace(ctx, schema, s),
        Statement::AlterKeyspace(s) => alter_keyspace(ctx, schema, s),
        Statement::DropKeyspace(s) => drop_keyspace(schema, s),
        Statement::CreateTable(s) => create_table(schema, s, session_keyspace),
        Statement::AlterTable(s) => alter_table(ctx, schema, s, session_keyspace),
        Statement::DropTable(s) => drop_table(schema, s, session_keyspace),
        Statement::CreateType(s) => create_type(schema, s, session_keyspace),
        Statement::AlterType(s) => alter_type(schema, s, session_keyspace),
        Statement::DropType(s) => drop_type(schema, s, session_keyspace),
        _ => Err(QueryError::Invalid(
            "This statement is not supported yet by Helenus".to_string(),
        )),
    }
}

/// A change to `schema` announced by `event`, with nothing else to do or say.
fn change(schema: Schema, event: SchemaChangeEvent) -> Change {
    Change {
        schema,
        event,
        invalidates_prepared: false,
        warnings: Vec::new(),
    }
}

/// CREATE KEYSPACE as a change of `schema`; `None` if it changes nothing (IF NOT EXISTS).
fn create_keyspace(
    ctx: &DdlContext<'_>,
    mut schema: Schema,
    s: &ast::CreateKeyspace,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let name = s.name.as_str();
        valid_keyspace_name(name)?;
        check_keyspace_props(&s.properties)?;
        if !s
            .properties
            .0
            .iter()
            .any(|p| p.name.as_str() == "replication")
        {
            return Err(QueryError::Invalid(
                "Missing mandatory option 'replication'".to_string(),
            ));
        }
        if schema.keyspace(name).is_some() {
            if s.if_not_exists {
                return Ok(None);
            }
            return Err(QueryError::AlreadyExists {
                keyspace: name.to_string(),
                table: String::new(),
                message: format!("Keyspace {name} already exists"),
            });
        }
        if SYSTEM_KEYSPACES.contains(&name) {
            return Err(QueryError::Invalid(format!(
                "{name} is a reserved keyspace name"
            )));
        }
        let (replication, durable_writes) =
            keyspace_props(&s.properties, &ctx.node.data_center(), name, None)?;
        let warnings = replication_warnings(ctx.node, name, &replication);
        schema.keyspaces.insert(
            name.to_string(),
            Arc::new(KeyspaceMetadata {
                name: name.to_string(),
                durable_writes,
                replication,
                tables: BTreeMap::new(),
                types: BTreeMap::new(),
                virtual_keyspace: false,
            }),
        );
        let mut c = change(schema, event(Created, T::Keyspace, name, None));
        c.warnings = warnings;
        c
    }))
}

/// ALTER KEYSPACE as a change of `schema`; `None` if it changes nothing (IF EXISTS).
fn alter_keyspace(
    ctx: &DdlContext<'_>,
    mut schema: Schema,
    s: &ast::AlterKeyspace,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let name = s.name.as_str();
        check_keyspace_props(&s.properties)?;
        let Some(existing) = schema.keyspace(name).cloned() else {
            if s.if_exists {
                return Ok(None);
            }
            return Err(QueryError::Invalid(format!(
                "Keyspace '{name}' doesn't exist"
            )));
        };
        user_keyspace(&schema, name)?;
        let (replication, durable_writes) = keyspace_props(
            &s.properties,
            &ctx.node.data_center(),
            name,
            Some(&existing),
        )?;
        let mut warnings = replication_warnings(ctx.node, name, &replication);
        if replication.replication_factor() > existing.replication.replication_factor() {
            warnings.push(crate::warnings::REPLICATION_FACTOR_INCREASED.to_string());
        }
        let mut ks = (*existing).clone();
        ks.replication = replication;
        ks.durable_writes = durable_writes;
        schema.keyspaces.insert(name.to_string(), Arc::new(ks));
        let mut c = change(schema, event(Updated, T::Keyspace, name, None));
        c.warnings = warnings;
        c
    }))
}

/// DROP KEYSPACE as a change of `schema`; `None` if it changes nothing (IF EXISTS).
fn drop_keyspace(mut schema: Schema, s: &ast::DropKeyspace) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let name = s.name.as_str();
        if schema.keyspace(name).is_none() {
            if s.if_exists {
                return Ok(None);
            }
            // Cassandra 5.0's DropKeyspaceStatement: an InvalidRequest.
            return Err(QueryError::Invalid(format!(
                "Keyspace '{name}' doesn't exist"
            )));
        }
        user_keyspace(&schema, name)?;
        schema.keyspaces.remove(name);
        let mut c = change(schema, event(Dropped, T::Keyspace, name, None));
        c.invalidates_prepared = true;
        c
    }))
}

/// CREATE TABLE as a change of `schema`; `None` if it changes nothing (IF NOT EXISTS).
fn create_table(
    mut schema: Schema,
    s: &ast::CreateTable,
    session_keyspace: Option<&str>,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        if s.multiple_primary_keys {
            // Refused by Cassandra's parser, so before the keyspace is looked up, and
            // naming the table as written.
            let written = match &s.name.keyspace {
                Some(ks) => format!("{}.{}", ks.as_str(), s.name.name.as_str()),
                None => s.name.name.as_str().to_string(),
            };
            return Err(QueryError::Invalid(format!(
                "Multiple PRIMARY KEY specified for table '{written}' (exactly one required)"
            )));
        }
        let ks_name = keyspace_name(&s.name, session_keyspace)?;
        let ks = user_keyspace(&schema, &ks_name)?.clone();
        let name = s.name.name.as_str();
        valid_table_name(&ks_name, name)?;
        if s.partition_key.is_empty() {
            return Err(QueryError::Invalid(format!(
                "No PRIMARY KEY specifed for table '{ks_name}.{name}' (exactly one required)"
            )));
        }
        // As Cassandra: the properties are checked before whether the table exists, its
        // columns after.
        table_options(s)?;
        if ks.tables.contains_key(name) {
            if s.if_not_exists {
                return Ok(None);
            }
            return Err(QueryError::AlreadyExists {
                keyspace: ks_name.clone(),
                table: name.to_string(),
                message: format!("Table {ks_name}.{name} already exists"),
            });
        }
        let table = table_from_create(s, &ks_name, &ks.types, crate::timeuuid::new_timeuuid())?;
        if table.is_counter_table() {
            return Err(QueryError::Invalid(
                "Counter tables are not supported yet by Helenus".to_string(),
            ));
        }
        let mut ksm = (*ks).clone();
        ksm.tables.insert(name.to_string(), Arc::new(table));
        schema.keyspaces.insert(ks_name.clone(), Arc::new(ksm));
        change(schema, event(Created, T::Table, &ks_name, Some(name)))
    }))
}

/// ALTER TABLE as a change of `schema`; `None` if it changes nothing (IF EXISTS).
fn alter_table(
    ctx: &DdlContext<'_>,
    mut schema: Schema,
    s: &ast::AlterTable,
    session_keyspace: Option<&str>,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let ks_name = keyspace_name(&s.name, session_keyspace)?;
        let name = s.name.name.as_str();
        // As Cassandra: a missing keyspace is a missing table.
        let missing = || match s.if_exists {
            true => Ok(None),
            false => Err(QueryError::Invalid(format!(
                "Table '{ks_name}.{name}' doesn't exist"
            ))),
        };
        if schema.keyspace(&ks_name).is_none() {
            return missing();
        }
        let ks = user_keyspace(&schema, &ks_name)?.clone();
        let Some(existing) = ks.tables.get(name) else {
            return missing();
        };
        let mut table = (**existing).clone();
        match &s.action {
            AlterTableAction::Add {
                if_not_exists,
                columns,
            } => {
                for c in columns {
                    if *if_not_exists && table.column(c.name.as_str()).is_some() {
                        continue;
                    }
                    let ty = resolve_type(&c.ty, &ks_name, &ks.types, false, false)?;
                    if non_frozen_udt_with_collection(&ty) {
                        return Err(QueryError::Invalid(format!(
                                "Non-frozen UDTs with nested non-frozen collections are not supported for column {}",
                                c.name.as_str()
                            )));
                    }
                    table.add_column(c.name.as_str(), ty, c.is_static)?;
                }
            }
            AlterTableAction::Drop {
                columns,
                if_exists,
                timestamp,
            } => {
                let at = timestamp.unwrap_or_else(ctx.next_timestamp);
                for (i, c) in columns.iter().enumerate() {
                    // A column named twice is dropped once, as in Cassandra.
                    let again = columns[..i].contains(c);
                    if again || (*if_exists && table.column(c.as_str()).is_none()) {
                        continue;
                    }
                    table.drop_column(c.as_str(), at)?;
                }
            }
            // Cassandra 5.0.9 refuses a missing column even with IF EXISTS.
            AlterTableAction::Rename { renames, .. } => {
                for (from, to) in renames {
                    table.rename_column(from.as_str(), to.as_str())?;
                }
            }
            AlterTableAction::With(props) => {
                for p in &props.0 {
                    table
                        .options
                        .set(p.name.as_str(), property_value(&p.value))?;
                }
                table.options.validate()?;
            }
            AlterTableAction::Mask { .. } => {
                return Err(QueryError::Invalid(
                    "Dynamic data masking is not supported yet by Helenus".to_string(),
                ))
            }
            AlterTableAction::AlterType { .. } => {
                return Err(QueryError::Invalid(
                    "Altering column types is no longer supported".to_string(),
                ))
            }
            AlterTableAction::DropCompactStorage => {
                return Err(QueryError::Invalid(
                    "Cannot DROP COMPACT STORAGE as table does not have COMPACT STORAGE"
                        .to_string(),
                ))
            }
        }
        let mut ksm = (*ks).clone();
        ksm.tables.insert(name.to_string(), Arc::new(table));
        schema.keyspaces.insert(ks_name.clone(), Arc::new(ksm));
        let mut c = change(schema, event(Updated, T::Table, &ks_name, Some(name)));
        c.invalidates_prepared = true;
        c
    }))
}

/// DROP TABLE as a change of `schema`; `None` if it changes nothing (IF EXISTS).
fn drop_table(
    mut schema: Schema,
    s: &ast::DropTable,
    session_keyspace: Option<&str>,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let ks_name = keyspace_name(&s.name, session_keyspace)?;
        let name = s.name.name.as_str();
        let exists = schema.table(&ks_name, name).is_some();
        if !exists {
            if s.if_exists {
                return Ok(None);
            }
            return Err(QueryError::Invalid(format!(
                "Table '{ks_name}.{name}' doesn't exist"
            )));
        }
        let ks = user_keyspace(&schema, &ks_name)?.clone();
        let mut ksm = (*ks).clone();
        ksm.tables.remove(name);
        schema.keyspaces.insert(ks_name.clone(), Arc::new(ksm));
        let mut c = change(schema, event(Dropped, T::Table, &ks_name, Some(name)));
        c.invalidates_prepared = true;
        c
    }))
}

/// CREATE TYPE as a change of `schema`; `None` if it changes nothing (IF NOT EXISTS).
fn create_type(
    mut schema: Schema,
    s: &ast::CreateType,
    session_keyspace: Option<&str>,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let ks_name = keyspace_name(&s.name, session_keyspace)?;
        let ks = user_keyspace(&schema, &ks_name)?.clone();
        let name = s.name.name.as_str();
        if ks.types.contains_key(name) {
            if s.if_not_exists {
                return Ok(None);
            }
            // Cassandra 5.0's CreateTypeStatement: an InvalidRequest, not AlreadyExists.
            return Err(QueryError::Invalid(format!(
                "A user type with name '{name}' already exists"
            )));
        }
        if CqlType::from_native_name(name).is_some() {
            return Err(QueryError::Invalid(format!(
                "Cannot use reserved type name {name} as a user type name"
            )));
        }
        if s.fields.len() > MAX_COMPONENTS {
            return Err(QueryError::Invalid(format!(
                "A user type may have at most {MAX_COMPONENTS} fields, got {}",
                s.fields.len()
            )));
        }
        let mut fields = Vec::new();
        for (f, t) in &s.fields {
            if fields
                .iter()
                .any(|(n, _): &(String, CqlType)| n == f.as_str())
            {
                return Err(QueryError::Invalid(format!(
                    "Duplicate field name '{}' in type '{name}'",
                    f.as_str()
                )));
            }
            let ty = field_type(t, &ks_name, &ks.types)?;
            fields.push((f.as_str().to_string(), ty));
        }
        let mut ksm = (*ks).clone();
        ksm.types.insert(
            name.to_string(),
            Arc::new(UserType {
                keyspace: ks_name.clone(),
                name: name.to_string(),
                fields,
            }),
        );
        schema.keyspaces.insert(ks_name.clone(), Arc::new(ksm));
        change(schema, event(Created, T::Type, &ks_name, Some(name)))
    }))
}

/// ALTER TYPE as a change of `schema`; `None` if it changes nothing (IF EXISTS).
fn alter_type(
    mut schema: Schema,
    s: &ast::AlterType,
    session_keyspace: Option<&str>,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let ks_name = keyspace_name(&s.name, session_keyspace)?;
        let name = s.name.name.as_str();
        // As Cassandra: a missing keyspace is a missing type.
        let existing = schema
            .keyspace(&ks_name)
            .and_then(|ks| ks.types.get(name))
            .cloned();
        let Some(existing) = existing else {
            if s.if_exists {
                return Ok(None);
            }
            return Err(QueryError::Invalid(format!(
                "Type {ks_name}.{name} doesn't exist"
            )));
        };
        let ks = user_keyspace(&schema, &ks_name)?.clone();
        let mut t = (*existing).clone();
        match &s.action {
            AlterTypeAction::Add {
                if_not_exists,
                field,
                ty,
            } => {
                if !add_field(&mut t, &ks, &ks_name, name, field, ty, *if_not_exists)? {
                    return Ok(None);
                }
            }
            AlterTypeAction::Rename { if_exists, renames } => {
                // As Cassandra: every rename names a field as it was before the statement
                // (`RENAME a TO b AND b TO a` swaps them; of two renames of one field the
                // last counts), and the new names must all differ.
                let original: Vec<String> = t.fields.iter().map(|(n, _)| n.clone()).collect();
                for (from, to) in renames {
                    let Some(i) = original.iter().position(|n| n == from.as_str()) else {
                        if *if_exists {
                            continue;
                        }
                        return Err(QueryError::Invalid(format!(
                            "Unkown field {} in user type {ks_name}.{name}",
                            from.as_str()
                        )));
                    };
                    t.fields[i].0 = to.as_str().to_string();
                }
                for (i, (n, _)) in t.fields.iter().enumerate() {
                    if t.fields[..i].iter().any(|(m, _)| m == n) {
                        // Cassandra's words, which name the keyspace as the type.
                        return Err(QueryError::Invalid(format!(
                            "Duplicate field name {n} in type {ks_name}"
                        )));
                    }
                }
            }
            AlterTypeAction::AlterField { .. } => {
                return Err(QueryError::Invalid(
                    "Altering field types is no longer supported".to_string(),
                ))
            }
        }
        // Adding and renaming fields leave stored values valid (fields are stored by
        // position; old values simply lack the new trailing fields), so every column and
        // type that embeds this one takes the new definition, as in Cassandra.
        let altered = UdtType {
            keyspace: ks_name.clone(),
            name: name.to_string(),
            fields: t.fields.clone(),
        };
        let mut ksm = (*ks).clone();
        for table in ksm.tables.values_mut() {
            if table.columns.iter().any(|c| uses_type(&c.ty, name)) {
                let mut tm = (**table).clone();
                for column in &mut tm.columns {
                    column.ty = with_altered_type(&column.ty, &altered);
                }
                *table = Arc::new(tm);
            }
        }
        for other in ksm.types.values_mut() {
            if other.name != name && other.fields.iter().any(|(_, f)| uses_type(f, name)) {
                let mut ut = (**other).clone();
                for (_, f) in &mut ut.fields {
                    *f = with_altered_type(f, &altered);
                }
                *other = Arc::new(ut);
            }
        }
        ksm.types.insert(name.to_string(), Arc::new(t));
        schema.keyspaces.insert(ks_name.clone(), Arc::new(ksm));
        let mut c = change(schema, event(Updated, T::Type, &ks_name, Some(name)));
        c.invalidates_prepared = true;
        c
    }))
}

/// ALTER TYPE ... ADD: adds `f` of type `ty` to `t`, the type `ks_name.name` of keyspace `ks`,
/// with Cassandra's refusals; `false` if the field exists and the statement says IF NOT EXISTS.
fn add_field(
    t: &mut UserType,
    ks: &KeyspaceMetadata,
    ks_name: &str,
    name: &str,
    f: &ast::Identifier,
    ty: &TypeExpr,
    if_not_exists: bool,
) -> Result<bool, QueryError> {
    if if_not_exists && t.fields.iter().any(|(n, _)| n == f.as_str()) {
        return Ok(false);
    }
    if t.fields.iter().any(|(n, _)| n == f.as_str()) {
        return Err(QueryError::Invalid(format!(
            "Cannot add field {} to type {ks_name}.{name}: a field with name {} already exists",
            f.as_str(),
            f.as_str()
        )));
    }
    // A type may not hold itself, however deep (Cassandra resolves the field's
    // type, then refuses this before anything else).
    let resolved = field_type(ty, ks_name, &ks.types)?;
    if uses_type(&resolved, name) {
        return Err(QueryError::Invalid(format!(
                "Cannot add new field {} of type {} to user type {ks_name}.{name} as it would create a circular reference",
                f.as_str(),
                type_with_keyspaces(&resolved)
            )));
    }
    // Cassandra refuses a type in a partition key, in these words.
    let in_partition_keys: Vec<String> = ks
        .tables
        .values()
        .filter(|tb| tb.partition_key().iter().any(|c| uses_type(&c.ty, name)))
        .map(|tb| format!("{ks_name}.{}", tb.name))
        .collect();
    if !in_partition_keys.is_empty() {
        let ty = resolve_type(ty, ks_name, &ks.types, false, false)?;
        return Err(QueryError::Invalid(format!(
                "Cannot add new field {} of type {ty} to user type {ks_name}.{name} as the type is being used in partition key by the following tables: {}",
                f.as_str(),
                in_partition_keys.join(", ")
            )));
    }
    // A clustering key stored before the field existed and the same value
    // written with the new field null would serialise differently: two rows
    // for one key. Refused until keys are normalised on write.
    if let Some(table) = ks.tables.values().find(|tb| {
        tb.columns.iter().any(|c| {
            matches!(c.kind, ColumnKind::PartitionKey | ColumnKind::Clustering)
                && uses_type(&c.ty, name)
        })
    }) {
        return Err(QueryError::Invalid(format!(
                "Adding a field to type {ks_name}.{name}, which is used in the primary key of table {}, is not supported yet by Helenus",
                table.name
            )));
    }
    if t.fields.len() >= MAX_COMPONENTS {
        return Err(QueryError::Invalid(format!(
            "A user type may have at most {MAX_COMPONENTS} fields"
        )));
    }
    let ty = field_type(ty, ks_name, &ks.types)?;
    if ty.is_multi_cell() {
        if let Some(table) = ks.tables.values().find(|tb| {
            tb.columns
                .iter()
                .any(|c| matches!(&c.ty, CqlType::Udt(u) if u.name == name))
        }) {
            return Err(QueryError::Invalid(format!(
                    "Adding a non-frozen collection field to type {ks_name}.{name}, which table {} uses non-frozen, is not supported yet by Helenus",
                    table.name
                )));
        }
    }
    t.fields.push((f.as_str().to_string(), ty));
    Ok(true)
}

/// DROP TYPE as a change of `schema`; `None` if it changes nothing (IF EXISTS).
fn drop_type(
    mut schema: Schema,
    s: &ast::DropType,
    session_keyspace: Option<&str>,
) -> Result<Option<Change>, QueryError> {
    use SchemaChangeKind::*;
    use SchemaChangeTarget as T;
    Ok(Some({
        let ks_name = keyspace_name(&s.name, session_keyspace)?;
        let ks = user_keyspace(&schema, &ks_name)?.clone();
        let name = s.name.name.as_str();
        if !ks.types.contains_key(name) {
            if s.if_exists {
                return Ok(None);
            }
            return Err(QueryError::Invalid(format!(
                "Type '{ks_name}.{name}' doesn't exist"
            )));
        }
        // As Cassandra: the types that use it, all of them, before the tables.
        let types: Vec<&str> = ks
            .types
            .values()
            .filter(|t| t.name != name && t.fields.iter().any(|(_, f)| uses_type(f, name)))
            .map(|t| t.name.as_str())
            .collect();
        if !types.is_empty() {
            return Err(QueryError::Invalid(format!(
                "Cannot drop user type '{ks_name}.{name}' as it is still used by user types {}",
                types.join(", ")
            )));
        }
        let tables: Vec<&str> = ks
            .tables
            .values()
            .filter(|tb| tb.columns.iter().any(|c| uses_type(&c.ty, name)))
            .map(|tb| tb.name.as_str())
            .collect();
        if !tables.is_empty() {
            return Err(QueryError::Invalid(format!(
                "Cannot drop user type '{ks_name}.{name}' as it is still used by tables {}",
                tables.join(", ")
            )));
        }
        let mut ksm = (*ks).clone();
        ksm.types.remove(name);
        schema.keyspaces.insert(ks_name.clone(), Arc::new(ksm));
        let mut c = change(schema, event(Dropped, T::Type, &ks_name, Some(name)));
        c.invalidates_prepared = true;
        c
    }))
}
