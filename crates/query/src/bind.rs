//! Bind markers: which variables a statement takes (their names and types, for PREPARE's
//! metadata) and the values an execution binds to them.

use cql_syntax::ast::{BindMarker, Term};
use schema::{Schema, TableMetadata};
use types::CqlType;

use crate::interface::{BoundValue, BoundValues, ColumnSpec};
use crate::select::term_functions::Resolver;
use crate::{select, QueryError};

pub(crate) type Bound = BoundValue;

/// Collects one spec per marker, at the marker's index (the parser numbers every marker,
/// named or anonymous, in order of appearance). Named markers take their name as the spec name,
/// as Cassandra reports them.
#[derive(Default)]
pub(crate) struct Specs {
    slots: Vec<Option<ColumnSpec>>,
    /// What each marker binds, by the name it would have unnamed (a column's for a marker
    /// that binds it directly): partition-key indexes go by it, not by a marker's own name.
    pub(crate) receivers: Vec<Option<String>>,
    /// The first call in a term that does not resolve: the statement's error.
    error: Option<QueryError>,
}

impl Specs {
    pub(crate) fn marker(&mut self, marker: &BindMarker, spec: ColumnSpec) {
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

    pub(crate) fn finish(self, expected: usize) -> Result<Vec<ColumnSpec>, QueryError> {
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

pub(crate) fn spec(table: &TableMetadata, name: &str, ty: CqlType) -> ColumnSpec {
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
pub(crate) fn term(specs: &mut Specs, table: &TableMetadata, name: &str, ty: &CqlType, t: &Term) {
    let mut walk = TermWalk {
        specs,
        table,
        calls: Resolver::default(),
    };
    walk.term(name, ty, t);
}

/// One term's walk: its calls are resolved once each (`Resolver`), so the walk takes time
/// linear in the term's size.
pub(crate) struct TermWalk<'a, 't> {
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
pub(crate) fn markers_in_collection_literal(kind: &str, name: &str) -> QueryError {
    QueryError::Invalid(format!(
        "Invalid {kind} literal for {name}: bind variables are not supported inside collection literals"
    ))
}

/// Whether a bind marker is anywhere inside `t`.
pub(crate) fn contains_bind_marker(t: &Term) -> bool {
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

pub(crate) fn using(specs: &mut Specs, table: &TableMetadata, u: &cql_syntax::ast::Using) {
    if let Some(Term::BindMarker(m)) = &u.timestamp {
        specs.marker(m, spec(table, "[timestamp]", CqlType::Bigint));
    }
    if let Some(Term::BindMarker(m)) = &u.ttl {
        specs.marker(m, spec(table, "[ttl]", CqlType::Int));
    }
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
pub(crate) fn element_marker_name(col: &schema::ColumnMetadata) -> String {
    match col.ty.unfrozen() {
        CqlType::List(_) => format!("idx({})", col.name),
        _ => format!("key({})", col.name),
    }
}
