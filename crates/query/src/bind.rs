//! Bind markers: which variables a statement takes (their names and types, for PREPARE's
//! metadata) and the values an execution binds to them.

use cql_syntax::ast::{
    Assignment, BindMarker, DeleteSelector, InsertValues, Operator, Relation, RelationValue,
    Statement, Term,
};
use schema::{ColumnKind, Schema, TableMetadata};
use types::CqlType;

use crate::interface::{BoundValue, BoundValues, ColumnSpec};
use crate::select::term_functions::Resolver;
use crate::{select, QueryError};

pub(crate) type Bound = BoundValue;

pub(crate) struct BindInfo {
    pub specs: Vec<ColumnSpec>,
    pub pk_indexes: Vec<u16>,
    pub result_columns: Vec<ColumnSpec>,
}

/// Collects one spec per marker, at the marker's index (the parser numbers every marker,
/// named or anonymous, in order of appearance). Named markers take their name as the spec name,
/// as Cassandra reports them.
#[derive(Default)]
struct Specs {
    slots: Vec<Option<ColumnSpec>>,
    /// What each marker binds, by the name it would have unnamed (a column's for a marker
    /// that binds it directly): partition-key indexes go by it, not by a marker's own name.
    receivers: Vec<Option<String>>,
    /// The first call in a term that does not resolve: the statement's error.
    error: Option<QueryError>,
}

impl Specs {
    fn marker(&mut self, marker: &BindMarker, spec: ColumnSpec) {
        let index = marker.index as usize;
        if self.slots.len() <= index {
            self.slots.resize(index + 1, None);
            self.receivers.resize(index + 1, None);
        }
        self.receivers[index] = Some(spec.name.clone());
        let spec = match &marker.name {
            Some(name) => ColumnSpec {
                name: name.as_str().to_string(),
                ..spec
            },
            None => spec,
        };
        self.slots[index] = Some(spec);
    }

    fn finish(self, expected: usize) -> Result<Vec<ColumnSpec>, QueryError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.slots.len() != expected {
            return Err(QueryError::Invalid(
                "Bind markers are not allowed in this position".to_string(),
            ));
        }
        self.slots
            .into_iter()
            .map(|s| {
                s.ok_or_else(|| {
                    QueryError::Invalid("Bind markers are not allowed in this position".to_string())
                })
            })
            .collect()
    }
}

fn spec(table: &TableMetadata, name: &str, ty: CqlType) -> ColumnSpec {
    ColumnSpec {
        keyspace: table.keyspace.clone(),
        table: table.name.clone(),
        name: name.to_string(),
        ty,
    }
}

pub(crate) fn resolve_table<'a>(
    schema: &'a Schema,
    keyspace: Option<&cql_syntax::ast::Identifier>,
    session_keyspace: Option<&str>,
    name: &cql_syntax::ast::Identifier,
) -> Result<&'a std::sync::Arc<TableMetadata>, QueryError> {
    let ks = match keyspace {
        Some(k) => k.as_str(),
        None => session_keyspace.ok_or_else(|| {
            QueryError::Invalid(
                "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename"
                    .to_string(),
            )
        })?,
    };
    let ksm = schema
        .keyspace(ks)
        .ok_or_else(|| QueryError::Invalid(format!("keyspace {ks} does not exist")))?;
    ksm.tables
        .get(name.as_str())
        .ok_or_else(|| QueryError::Invalid(format!("table {} does not exist", name.as_str())))
}

pub(crate) fn column<'a>(
    table: &'a TableMetadata,
    name: &cql_syntax::ast::Identifier,
) -> Result<&'a schema::ColumnMetadata, QueryError> {
    table.column(name.as_str()).ok_or_else(|| {
        // Cassandra writes each name as CQL reads it back (quoted when it must be).
        let cql = |n: &str| cql_syntax::ast::Identifier::new(n).to_cql();
        QueryError::Invalid(format!(
            "Undefined column name {} in table {}.{}",
            cql(name.as_str()),
            cql(&table.keyspace),
            cql(&table.name)
        ))
    })
}

/// Walks a term whose expected type is `ty`, recording markers inside it.
fn term(specs: &mut Specs, table: &TableMetadata, name: &str, ty: &CqlType, t: &Term) {
    let mut walk = TermWalk {
        specs,
        table,
        calls: Resolver::default(),
    };
    walk.term(name, ty, t);
}

/// One term's walk: its calls are resolved once each (`Resolver`), so the walk takes time
/// linear in the term's size.
struct TermWalk<'a, 't> {
    specs: &'a mut Specs,
    table: &'a TableMetadata,
    calls: Resolver<'t>,
}

impl<'t> TermWalk<'_, 't> {
    fn term(&mut self, name: &str, ty: &CqlType, t: &'t Term) {
        let table = self.table;
        match t {
            Term::BindMarker(m) => self.specs.marker(m, spec(table, name, ty.clone())),
            Term::List(items) | Term::Set(items) => {
                let (elem, kind) = match ty.unfrozen() {
                    CqlType::List(e) => ((**e).clone(), "list"),
                    CqlType::Set(e) => ((**e).clone(), "set"),
                    CqlType::Vector(e, _) => ((**e).clone(), "vector"),
                    _ => return,
                };
                if kind != "vector" && items.iter().any(contains_bind_marker) {
                    self.specs
                        .error
                        .get_or_insert(markers_in_collection_literal(kind, name));
                }
                for item in items {
                    self.term(&format!("value({name})"), &elem, item);
                }
            }
            Term::Map(entries) => {
                if let CqlType::Map(k, v) = ty.unfrozen() {
                    if entries.iter().any(|(key, value)| {
                        contains_bind_marker(key) || contains_bind_marker(value)
                    }) {
                        self.specs
                            .error
                            .get_or_insert(markers_in_collection_literal("map", name));
                    }
                    for (key, value) in entries {
                        self.term(&format!("key({name})"), k, key);
                        self.term(&format!("value({name})"), v, value);
                    }
                }
            }
            Term::Tuple(items) => {
                if let CqlType::Tuple(types) = ty.unfrozen() {
                    for (i, (item, ty)) in items.iter().zip(types).enumerate() {
                        self.term(&format!("{name}[{i}]"), ty, item);
                    }
                } else if let [item] = &items[..] {
                    // `(x)` for a receiver that is not a tuple is `x` in parentheses.
                    self.term(name, ty, item);
                }
            }
            Term::UserType(fields) => {
                if let CqlType::Udt(udt) = ty.unfrozen() {
                    for (field, value) in fields {
                        if let Some((_, fty)) = udt.fields.iter().find(|(n, _)| n == field.as_str())
                        {
                            self.term(&format!("{name}.{}", field.as_str()), fty, value);
                        }
                    }
                }
            }
            Term::TypeHint { term: inner, .. } => self.term(name, ty, inner),
            Term::FunctionCall { args, .. } if select::term_functions::is_from_json(t) => {
                // fromJson takes text, whatever the receiver.
                for (i, arg) in args.iter().enumerate() {
                    let arg_name = format!("arg{i}(system.fromjson)");
                    self.term(&arg_name, &CqlType::Text, arg);
                }
            }
            Term::FunctionCall { .. }
            | Term::Binary { .. }
            | Term::Negate(_)
            | Term::Cast { .. } => {
                // The markers among a call's arguments take the chosen signature's parameter types.
                match self.calls.resolve(t, Some(ty)) {
                    Ok(Some(sig)) => {
                        let args = select::term_functions::call_arguments(t).unwrap_or_default();
                        for (i, (arg, param)) in args.into_iter().zip(&sig.args).enumerate() {
                            let arg_name = select::term_functions::argument_name(&sig, i);
                            self.term(&arg_name, param, arg);
                        }
                    }
                    Ok(None) => {}
                    Err(e) => {
                        self.specs.error.get_or_insert(e);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Cassandra's refusal of bind markers inside a list, set or map literal (a vector literal
/// takes them): the literal must be whole at PREPARE (`Lists.Literal.prepare` and its kin).
fn markers_in_collection_literal(kind: &str, name: &str) -> QueryError {
    QueryError::Invalid(format!(
        "Invalid {kind} literal for {name}: bind variables are not supported inside collection literals"
    ))
}

/// Whether a bind marker is anywhere inside `t`.
fn contains_bind_marker(t: &Term) -> bool {
    match t {
        Term::BindMarker(_) => true,
        Term::Constant(_) | Term::Null => false,
        Term::List(items) | Term::Set(items) | Term::Tuple(items) => {
            items.iter().any(contains_bind_marker)
        }
        Term::Map(entries) => entries
            .iter()
            .any(|(k, v)| contains_bind_marker(k) || contains_bind_marker(v)),
        Term::UserType(fields) => fields.iter().any(|(_, v)| contains_bind_marker(v)),
        Term::FunctionCall { args, .. } => args.iter().any(contains_bind_marker),
        Term::TypeHint { term, .. } | Term::Cast { term, .. } | Term::Negate(term) => {
            contains_bind_marker(term)
        }
        Term::Binary { lhs, rhs, .. } => contains_bind_marker(lhs) || contains_bind_marker(rhs),
    }
}

fn using(specs: &mut Specs, table: &TableMetadata, u: &cql_syntax::ast::Using) {
    if let Some(Term::BindMarker(m)) = &u.timestamp {
        specs.marker(m, spec(table, "[timestamp]", CqlType::Bigint));
    }
    if let Some(Term::BindMarker(m)) = &u.ttl {
        specs.marker(m, spec(table, "[ttl]", CqlType::Int));
    }
}

fn relations(
    specs: &mut Specs,
    table: &TableMetadata,
    rels: &[Relation],
) -> Result<(), QueryError> {
    for rel in rels {
        match rel {
            Relation::Simple {
                column: c,
                op,
                value,
            } => {
                let col = column(table, c)?;
                // Cassandra's bind variable names: `value(l)` for CONTAINS, `key(m)` for
                // CONTAINS KEY, the column's own name otherwise.
                let name = match op {
                    Operator::Contains => format!("value({})", col.name),
                    Operator::ContainsKey => format!("key({})", col.name),
                    _ => col.name.clone(),
                };
                let name = name.as_str();
                let ty = match op {
                    Operator::Contains => match col.ty.unfrozen() {
                        CqlType::List(e) | CqlType::Set(e) => (**e).clone(),
                        CqlType::Map(_, v) => (**v).clone(),
                        other => other.clone(),
                    },
                    Operator::ContainsKey => match col.ty.unfrozen() {
                        CqlType::Map(k, _) => (**k).clone(),
                        other => other.clone(),
                    },
                    _ => col.ty.clone(),
                };
                match value {
                    RelationValue::Single(t) => term(specs, table, name, &ty, t),
                    RelationValue::List(items) => {
                        for t in items {
                            term(specs, table, name, &ty, t);
                        }
                    }
                    RelationValue::Marker(m) => specs.marker(
                        m,
                        spec(table, &format!("in({name})"), CqlType::List(Box::new(ty))),
                    ),
                    RelationValue::Between(a, b) => {
                        term(specs, table, name, &ty, a);
                        term(specs, table, name, &ty, b);
                    }
                }
            }
            Relation::MultiColumn { columns, value, .. } => {
                let mut types = Vec::new();
                let mut names = Vec::new();
                for c in columns {
                    let col = column(table, c)?;
                    types.push(col.ty.clone());
                    names.push(col.name.clone());
                }
                let tuple = CqlType::Tuple(types.clone());
                let name = format!("({})", names.join(","));
                // A tuple literal's markers bind its columns, named after them; a marker for a
                // whole tuple takes the columns' list (Cassandra's names).
                let tuple_term = |specs: &mut Specs, t: &Term| match t {
                    Term::Tuple(items) if items.len() == names.len() => {
                        for ((item, n), ty) in items.iter().zip(&names).zip(&types) {
                            term(specs, table, n, ty, item);
                        }
                    }
                    _ => term(specs, table, &name, &tuple, t),
                };
                match value {
                    RelationValue::Single(t) => tuple_term(specs, t),
                    RelationValue::List(items) => {
                        for t in items {
                            tuple_term(specs, t);
                        }
                    }
                    RelationValue::Marker(m) => specs.marker(
                        m,
                        spec(
                            table,
                            &format!("in({})", names.join(",")),
                            CqlType::List(Box::new(tuple.clone())),
                        ),
                    ),
                    RelationValue::Between(a, b) => {
                        tuple_term(specs, a);
                        tuple_term(specs, b);
                    }
                }
            }
            Relation::Token { value, .. } => {
                if let RelationValue::Single(t) = value {
                    match t {
                        // token(v1, ...): the values are the partition key's.
                        Term::FunctionCall { args, .. } if select::is_token_call(t) => {
                            for (i, (arg, col)) in
                                args.iter().zip(table.partition_key()).enumerate()
                            {
                                let arg_name = format!("arg{i}(system.token)");
                                term(specs, table, &arg_name, &col.ty, arg);
                            }
                        }
                        _ => term(specs, table, "partition key token", &CqlType::Bigint, t),
                    }
                }
            }
            Relation::Element {
                column: c,
                key,
                value,
                ..
            } => {
                let col = column(table, c)?;
                let (kt, vt) = match col.ty.unfrozen() {
                    CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                    CqlType::List(v) => (CqlType::Int, (**v).clone()),
                    other => (other.clone(), other.clone()),
                };
                term(specs, table, &format!("key({})", col.name), &kt, key);
                term(specs, table, &format!("value({})", col.name), &vt, value);
            }
            Relation::IsNotNull(_) | Relation::CustomIndex { .. } => {}
        }
    }
    Ok(())
}

/// The table whose partition key the markers may bind, and (column name, marker index) pairs.
type PkCandidates = (std::sync::Arc<TableMetadata>, Vec<(String, usize)>);

fn walk(
    statement: &Statement,
    schema: &Schema,
    keyspace: Option<&str>,
    specs: &mut Specs,
    pk_candidates: &mut Option<PkCandidates>,
    result_columns: &mut Vec<ColumnSpec>,
) -> Result<(), QueryError> {
    match statement {
        Statement::Select(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            let selection = select::analyze_selection(schema, table, s)?;
            *result_columns = selection.columns;
            for m in selection.markers {
                specs.marker(&m.marker, spec(table, &m.name, m.ty));
            }
            relations(specs, table, &s.where_clause)?;
            select::check_where(table, s)?;
            select::check_distinct(schema, table, s)?;
            if let Some(Term::BindMarker(m)) = &s.per_partition_limit {
                specs.marker(m, spec(table, "[per_partition_limit]", CqlType::Int));
            }
            if let Some(Term::BindMarker(m)) = &s.limit {
                specs.marker(m, spec(table, "[limit]", CqlType::Int));
            }
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Insert(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            match &s.values {
                InsertValues::Json { value, .. } => {
                    term(specs, table, "[json]", &CqlType::Text, value)
                }
                InsertValues::Values { columns, values } => {
                    for (c, v) in columns.iter().zip(values) {
                        let col = column(table, c)?;
                        term(specs, table, &col.name, &col.ty, v);
                    }
                }
            }
            using(specs, table, &s.using);
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Update(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            crate::write::check_assignments(table, &s.assignments)?;
            using(specs, table, &s.using);
            for a in &s.assignments {
                match a {
                    Assignment::Set {
                        column: c,
                        value: t,
                    } => {
                        let col = column(table, c)?;
                        term(specs, table, &col.name, &col.ty, t);
                    }
                    Assignment::Add {
                        column: c,
                        value: t,
                    }
                    | Assignment::Subtract {
                        column: c,
                        value: t,
                    }
                    | Assignment::Prepend {
                        column: c,
                        value: t,
                    } => {
                        let col = column(table, c)?;
                        // `s = s + {..}` / `m = m - {k}`: the operand of a set/list is a
                        // collection of the column's type; of a map removal, a set of keys.
                        let ty = match (a, col.ty.unfrozen()) {
                            (Assignment::Subtract { .. }, CqlType::Map(k, _)) => {
                                CqlType::Set(k.clone())
                            }
                            _ => col.ty.clone(),
                        };
                        term(specs, table, &col.name, &ty, t);
                    }
                    Assignment::SetElement {
                        column: c,
                        key: k,
                        value: v,
                    } => {
                        let col = column(table, c)?;
                        let (kt, vt) = match col.ty.unfrozen() {
                            CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
                            CqlType::List(v) => (CqlType::Int, (**v).clone()),
                            other => (other.clone(), other.clone()),
                        };
                        term(specs, table, &element_marker_name(col), &kt, k);
                        term(specs, table, &format!("value({})", col.name), &vt, v);
                    }
                    Assignment::SetField {
                        column: c,
                        field: f,
                        value: v,
                    } => {
                        let col = column(table, c)?;
                        if let CqlType::Udt(u) = col.ty.unfrozen() {
                            if let Some((_, fty)) = u.fields.iter().find(|(n, _)| n == f.as_str()) {
                                term(specs, table, f.as_str(), fty, v);
                            }
                        }
                    }
                }
            }
            relations(specs, table, &s.where_clause)?;
            let only_static = crate::write::assigns_only_static(table, &s.assignments)?;
            crate::write::check_modification_where(table, &s.where_clause, "UPDATE", only_static)?;
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Delete(s) => {
            let table = resolve_table(schema, s.table.keyspace.as_ref(), keyspace, &s.table.name)?;
            for sel in &s.columns {
                if let DeleteSelector::Element { column: c, key: k } = sel {
                    let col = column(table, c)?;
                    let kt = match col.ty.unfrozen() {
                        CqlType::Map(k, _) => (**k).clone(),
                        CqlType::List(_) => CqlType::Int,
                        CqlType::Set(e) => (**e).clone(),
                        other => other.clone(),
                    };
                    term(specs, table, &element_marker_name(col), &kt, k);
                }
            }
            using(specs, table, &s.using);
            relations(specs, table, &s.where_clause)?;
            let only_static = crate::write::deletes_only_static(table, &s.columns)?;
            crate::write::check_modification_where(table, &s.where_clause, "DELETE", only_static)?;
            *pk_candidates = Some((table.clone(), Vec::new()));
        }
        Statement::Batch(b) => {
            crate::write::check_batch_kind(
                b.kind == cql_syntax::ast::BatchKind::Counter,
                b.statements.len(),
            )?;
            for inner in &b.statements {
                let mut ignored = None;
                let mut no_result = Vec::new();
                walk(inner, schema, keyspace, specs, &mut ignored, &mut no_result)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Analyses a statement for PREPARE (and for QUERY, to know how to bind named values).
pub(crate) fn analyze(
    statement: &Statement,
    schema: &Schema,
    keyspace: Option<&str>,
) -> Result<BindInfo, QueryError> {
    let mut specs = Specs::default();
    let mut table = None;
    let mut result_columns = Vec::new();
    walk(
        statement,
        schema,
        keyspace,
        &mut specs,
        &mut table,
        &mut result_columns,
    )?;
    let receivers = std::mem::take(&mut specs.receivers);
    let specs = specs.finish(cql_syntax::bind_marker_count(statement))?;
    // Partition-key indexes: for each partition key column (in key order), the first bind
    // variable that binds the column directly (whatever the marker's own name). Only when all
    // are bound.
    let mut pk_indexes = Vec::new();
    if let Some((table, _)) = table {
        for pk in table
            .columns
            .iter()
            .filter(|c| c.kind == ColumnKind::PartitionKey)
        {
            match specs.iter().zip(&receivers).position(|(s, r)| {
                r.as_deref() == Some(pk.name.as_str()) && s.table == table.name && s.ty == pk.ty
            }) {
                Some(i) => pk_indexes.push(i as u16),
                None => {
                    pk_indexes.clear();
                    break;
                }
            }
        }
    }
    Ok(BindInfo {
        specs,
        pk_indexes,
        result_columns,
    })
}

/// Turns the request's values into one value per bind variable, validating each against its
/// type.
pub(crate) fn resolve_values(
    specs: &[ColumnSpec],
    values: BoundValues,
) -> Result<Vec<Bound>, QueryError> {
    let resolved: Vec<Bound> = match values {
        BoundValues::None => Vec::new(),
        BoundValues::Positional(v) => v,
        BoundValues::Named(named) => {
            let mut out = Vec::with_capacity(specs.len());
            for spec in specs {
                let found = named
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&spec.name) || *n == spec.name)
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| {
                        QueryError::Invalid(format!("No value has been provided for {}", spec.name))
                    })?;
                out.push(found);
            }
            out
        }
    };
    if resolved.len() != specs.len() {
        return Err(QueryError::Invalid(format!(
            "There were {} markers(?) in CQL but {} bound variables",
            specs.len(),
            resolved.len()
        )));
    }
    let mut resolved = resolved;
    for (value, spec) in resolved.iter_mut().zip(specs) {
        if let BoundValue::Value(bytes) = value {
            // Validates, and puts sets and maps in Cassandra's order (clients bind any order).
            match types::canonicalize(&spec.ty, bytes) {
                Ok(None) => types::validate(&spec.ty, bytes),
                Ok(Some(canonical)) => {
                    *bytes = canonical.into();
                    Ok(())
                }
                Err(e) => Err(e),
            }
            .map_err(|e| {
                QueryError::Invalid(format!("Invalid value for column {}: {e}", spec.name))
            })?;
        }
    }
    Ok(resolved)
}

/// The value of a marker at execution time.
pub(crate) fn marker_value<'a>(
    marker: &BindMarker,
    values: &'a [Bound],
) -> Result<&'a Bound, QueryError> {
    values
        .get(marker.index as usize)
        .ok_or_else(|| QueryError::Invalid("Missing value for bind marker".to_string()))
}

/// The name Cassandra gives the marker of an element selector: `idx(l)` for a list index,
/// `key(m)` for a map key or set element.
fn element_marker_name(col: &schema::ColumnMetadata) -> String {
    match col.ty.unfrozen() {
        CqlType::List(_) => format!("idx({})", col.name),
        _ => format!("key({})", col.name),
    }
}
