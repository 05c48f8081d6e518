//! Selections compiled into small expression trees evaluated per row: columns, write times and
//! TTLs, constants, scalar function calls and casts, UDT fields, map and set elements and
//! slices, and aggregates. Result column names and types are Cassandra's.
//!
//! An aggregate selection evaluates its aggregates' arguments on every row of a group and
//! everything outside the aggregates on the group's first row, as Cassandra does for plain
//! columns mixed with aggregates.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use cql_syntax::ast::{
    BinaryOp, BindMarker, Constant, Identifier, Select, Selection as AstSelection, SelectorExpr,
    Term, TypeExpr,
};
use schema::{ColumnKind, TableMetadata, UserType};
use types::CqlType;

use super::aggregates::{self, Accumulator, AggregateFunction};
use super::arguments::{ArgKind, CollectionShape};
use super::collection_functions::CollectionFunction;
use super::functions::{self, Assignment, Scalar, Signature};
use super::operation_signatures;
use super::operations;
use super::row::{CellTime, RowValues};
use super::term_text::{term_text, type_text};
use super::type_match;
use crate::bind::{column, Bound};
use crate::elements::split_elements;
use crate::eval::{evaluate, TermValue};
use crate::interface::ColumnSpec;
use crate::QueryError;

/// Deepest selector nesting compiled (the parser bounds depth too; this keeps the recursion
/// here independent of that).
const MAX_SELECTOR_DEPTH: usize = 64;

/// What one selector computes.
#[derive(Debug, Clone)]
pub(crate) enum Expr {
    Column(usize),
    /// `writetime()`, `ttl()` or `maxwritetime()` of column `column`, or of a part of it.
    CellTime {
        column: usize,
        kind: TimeKind,
        part: CellPart,
        /// Whether the column is multi-cell (cells have their own times) or one cell.
        multi_cell: bool,
        /// The selected value (the column, or its element, slice or field): a single-cell
        /// column's time applies only when it is not null.
        value: Box<Expr>,
    },
    /// `token()` of the partition key columns themselves: the row's token.
    PartitionToken,
    /// A term not yet bound to the execution's values, and the receiver name its errors use.
    Term(Term, CqlType, String),
    /// A bound constant.
    Value(Option<Vec<u8>>),
    Call(Box<Signature>, Vec<Expr>),
    /// The value of the selection's aggregate with this index.
    Aggregate(usize),
    /// Field `index` of a UDT value.
    Field(Box<Expr>, usize),
    /// `m[key]` or `s[key]`; `ty` is the collection's type.
    Element {
        collection: Box<Expr>,
        ty: CqlType,
        key: Box<Expr>,
    },
    /// `m[from..to]` or `s[from..to]`, bounds inclusive.
    Slice {
        collection: Box<Expr>,
        ty: CqlType,
        from: Option<Box<Expr>>,
        to: Option<Box<Expr>>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeKind {
    WriteTime,
    Ttl,
    MaxWriteTime,
}

/// Which cells of a multi-cell column a `writetime()`/`ttl()` reads.
#[derive(Debug, Clone)]
pub(crate) enum CellPart {
    Whole,
    /// The cell of a map key or set element; `ty` is the key's type.
    Element {
        key: Box<Expr>,
        ty: CqlType,
    },
    /// The cells of map keys or set elements within the bounds.
    Slice {
        from: Option<Box<Expr>>,
        to: Option<Box<Expr>>,
        ty: CqlType,
    },
    /// The cell of UDT field number `index`.
    Field(usize),
}

/// One aggregate of a selection: its function and argument (none for `count(*)`).
#[derive(Debug, Clone)]
pub(crate) struct AggregateSpec {
    function: AggregateFunction,
    arg: Option<Expr>,
    arg_ty: CqlType,
}

/// A bind marker inside the selection, with the name and type PREPARE reports for it.
#[derive(Debug, Clone)]
pub(crate) struct SelectionMarker {
    pub marker: BindMarker,
    pub name: String,
    pub ty: CqlType,
}

/// A compiled selection.
#[derive(Debug, Clone)]
pub(crate) struct Selection {
    outputs: Vec<Expr>,
    /// Shared, so that a selection cloned from a prepared statement's copy costs no
    /// allocation per column.
    pub specs: Arc<[ColumnSpec]>,
    /// Per output: whether it is a plain column that no later output selects again, so
    /// `project_owned` may move the value out of the row instead of copying it.
    moves: Vec<bool>,
    aggregates: Vec<AggregateSpec>,
    pub markers: Vec<SelectionMarker>,
    /// One per GROUP BY element: the function when the element is a function of a clustering
    /// column (`floor(ts, 1h)`), `None` for a plain column.
    pub group_by_functions: Vec<Option<GroupFunction>>,
    /// Whether any expression holds a term (`Expr::Term`): only then does `bind` change it.
    has_terms: bool,
    /// The lowest column index an output or aggregate reads (`usize::MAX` if none), so a
    /// read can tell at no cost whether rows need their partition key.
    lowest_column_read: usize,
    /// `reads_cell_times(true)` and `reads_cell_times(false)`, computed once (hidden columns
    /// read no times): every partition read asks.
    cell_times: bool,
    column_times: bool,
}

/// A GROUP BY element that is a monotonic function of one clustering column: rows in
/// clustering order then give function values in the same order, so a group is still a run
/// of consecutive rows.
#[derive(Debug, Clone)]
pub(crate) struct GroupFunction {
    expr: Expr,
    /// The function's result type.
    pub ty: CqlType,
    /// The clustering column it is a function of.
    pub column: usize,
}

/// The aggregation state of one group.
#[derive(Debug, Clone)]
pub(crate) struct GroupState {
    first: Option<RowValues>,
    accumulators: Vec<Accumulator>,
}

struct Compiled {
    expr: Expr,
    ty: CqlType,
    name: String,
}

struct Compiler<'a> {
    table: &'a TableMetadata,
    types: Option<&'a BTreeMap<String, Arc<UserType>>>,
    aggregates: Vec<AggregateSpec>,
    markers: Vec<SelectionMarker>,
    in_aggregate: bool,
    /// A term was compiled: the selection must be bound per execution.
    has_terms: bool,
}

/// Compiles the selection of `select` against `table`; `types` are the keyspace's user types
/// (for type hints such as `(frozen<address>)`).
pub(crate) fn compile(
    table: &TableMetadata,
    types: Option<&BTreeMap<String, Arc<UserType>>>,
    select: &Select,
) -> Result<Selection, QueryError> {
    let spec = |name: &str, ty: CqlType| ColumnSpec {
        keyspace: table.keyspace.clone(),
        table: table.name.clone(),
        name: name.to_string(),
        ty,
    };
    let mut compiler = Compiler {
        table,
        types,
        aggregates: Vec::new(),
        markers: Vec::new(),
        in_aggregate: false,
        has_terms: false,
    };
    let mut outputs = Vec::new();
    let mut specs = Vec::new();
    match &select.selection {
        AstSelection::Wildcard => {
            for (i, c) in table.columns.iter().enumerate() {
                outputs.push(Expr::Column(i));
                specs.push(spec(&c.name, c.ty.clone()));
            }
        }
        AstSelection::Columns(selectors) => {
            for s in selectors {
                let c = compiler.compile(&s.expr, None, 0)?;
                let name = s
                    .alias
                    .as_ref()
                    .map(|a| a.as_str().to_string())
                    .unwrap_or(c.name);
                outputs.push(c.expr);
                specs.push(spec(&name, c.ty));
            }
        }
    }
    let mut group_by_functions = Vec::with_capacity(select.group_by.len());
    for e in &select.group_by {
        group_by_functions.push(match e {
            SelectorExpr::Column(_) => None,
            other => Some(compiler.group_function(other)?),
        });
    }
    let moves = last_plain_uses(&outputs);
    let mut selection = Selection {
        outputs,
        moves,
        specs: specs.into(),
        aggregates: compiler.aggregates,
        markers: compiler.markers,
        group_by_functions,
        has_terms: compiler.has_terms,
        lowest_column_read: usize::MAX,
        cell_times: false,
        column_times: false,
    };
    let mut lowest = usize::MAX;
    selection.for_each_column_read(&mut |i| lowest = lowest.min(i));
    selection.lowest_column_read = lowest;
    selection.cell_times = selection.reads_cell_times(true);
    selection.column_times = selection.reads_cell_times(false);
    Ok(selection)
}

fn invalid(message: String) -> QueryError {
    QueryError::Invalid(message)
}

/// `Selection::moves` for these outputs.
fn last_plain_uses(outputs: &[Expr]) -> Vec<bool> {
    let mut later = std::collections::HashSet::new();
    let mut moves = vec![false; outputs.len()];
    for (j, e) in outputs.iter().enumerate().rev() {
        if let Expr::Column(i) = e {
            moves[j] = later.insert(*i);
        }
    }
    moves
}

/// The type with user types named by keyspace, as Cassandra prints resolved types.
fn qualify_types(t: &TypeExpr, keyspace: &str) -> TypeExpr {
    let q = |e: &TypeExpr| Box::new(qualify_types(e, keyspace));
    match t {
        TypeExpr::UserType(name) if name.keyspace.is_none() => {
            TypeExpr::UserType(cql_syntax::ast::QualifiedName {
                keyspace: Some(Identifier::new(keyspace)),
                name: name.name.clone(),
            })
        }
        TypeExpr::List(e) => TypeExpr::List(q(e)),
        TypeExpr::Set(e) => TypeExpr::Set(q(e)),
        TypeExpr::Map(k, v) => TypeExpr::Map(q(k), q(v)),
        TypeExpr::Frozen(e) => TypeExpr::Frozen(q(e)),
        TypeExpr::Tuple(items) => {
            TypeExpr::Tuple(items.iter().map(|i| qualify_types(i, keyspace)).collect())
        }
        TypeExpr::Vector(e, n) => TypeExpr::Vector(q(e), *n),
        other => other.clone(),
    }
}

/// The term a selector is when it is only literals and markers (`1`, `[1, 2]`, `{'a': ?}`).
fn as_term(e: &SelectorExpr) -> Option<Term> {
    let all = |items: &[SelectorExpr]| items.iter().map(as_term).collect::<Option<Vec<_>>>();
    Some(match e {
        SelectorExpr::Term(t) => t.clone(),
        // `-1` is a negative literal, as Cassandra reads it.
        SelectorExpr::Negate(inner) => match inner.as_ref() {
            SelectorExpr::Term(Term::Constant(c)) => Term::Constant(match c {
                Constant::Integer(s) if !s.starts_with('-') => Constant::Integer(format!("-{s}")),
                Constant::Float(s) if !s.starts_with('-') => Constant::Float(format!("-{s}")),
                Constant::Duration(s) if !s.starts_with('-') => Constant::Duration(format!("-{s}")),
                Constant::Infinity => Constant::NegInfinity,
                Constant::NaN => Constant::NaN,
                _ => return None,
            }),
            _ => return None,
        },
        SelectorExpr::List(items) => Term::List(all(items)?),
        SelectorExpr::Set(items) => Term::Set(all(items)?),
        SelectorExpr::Tuple(items) => Term::Tuple(all(items)?),
        SelectorExpr::Map(entries) => {
            // `{a: 1}` with bare identifiers as keys is a user type literal.
            if !entries.is_empty()
                && entries
                    .iter()
                    .all(|(k, _)| matches!(k, SelectorExpr::Column(_)))
            {
                let mut fields = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    let SelectorExpr::Column(name) = k else {
                        return None;
                    };
                    fields.push((name.clone(), as_term(v)?));
                }
                Term::UserType(fields)
            } else {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    out.push((as_term(k)?, as_term(v)?));
                }
                Term::Map(out)
            }
        }
        _ => return None,
    })
}

fn term_arg_kind(t: &Term) -> ArgKind {
    match t {
        Term::Constant(c) => ArgKind::Literal(c.clone()),
        Term::List(_) => ArgKind::Collection(CollectionShape::List),
        Term::Set(_) => ArgKind::Collection(CollectionShape::Set),
        Term::Map(_) | Term::UserType(_) => ArgKind::Collection(CollectionShape::Map),
        Term::Tuple(_) => ArgKind::Collection(CollectionShape::Tuple),
        _ => ArgKind::Any,
    }
}

/// Whether Cassandra declares the function monotonic (`isMonotonic`): the time conversions and
/// `floor`, which GROUP BY accepts.
fn is_monotonic(function: &Scalar) -> bool {
    matches!(
        function,
        Scalar::ToDate(_) | Scalar::ToTimestamp(_) | Scalar::ToUnixTimestamp(_) | Scalar::Floor(_)
    )
}

/// The columns an expression reads.
fn columns_of(e: &Expr, out: &mut Vec<usize>) {
    match e {
        Expr::Column(i) => {
            if !out.contains(i) {
                out.push(*i);
            }
        }
        Expr::Call(_, args) => args.iter().for_each(|a| columns_of(a, out)),
        Expr::Field(inner, _) => columns_of(inner, out),
        Expr::Element {
            collection, key, ..
        } => {
            columns_of(collection, out);
            columns_of(key, out);
        }
        Expr::Slice {
            collection,
            from,
            to,
            ..
        } => {
            columns_of(collection, out);
            from.iter()
                .chain(to.iter())
                .for_each(|b| columns_of(b, out));
        }
        Expr::CellTime { column, .. } => {
            if !out.contains(column) {
                out.push(*column);
            }
        }
        Expr::PartitionToken | Expr::Term(..) | Expr::Value(_) | Expr::Aggregate(_) => {}
    }
}

/// The distinct column names a selector mentions.
fn selector_columns<'a>(e: &'a SelectorExpr, out: &mut Vec<&'a Identifier>) {
    match e {
        SelectorExpr::Column(name) => {
            if !out.contains(&name) {
                out.push(name);
            }
        }
        SelectorExpr::FunctionCall { args, .. }
        | SelectorExpr::Tuple(args)
        | SelectorExpr::List(args)
        | SelectorExpr::Set(args) => args.iter().for_each(|a| selector_columns(a, out)),
        SelectorExpr::Cast(inner, _)
        | SelectorExpr::TypeHint(_, inner)
        | SelectorExpr::FieldAccess(inner, _)
        | SelectorExpr::ElementAccess(inner, _)
        | SelectorExpr::Slice { expr: inner, .. }
        | SelectorExpr::Negate(inner)
        | SelectorExpr::WriteTime(inner)
        | SelectorExpr::MaxWriteTime(inner)
        | SelectorExpr::Ttl(inner) => selector_columns(inner, out),
        SelectorExpr::Binary { lhs, rhs, .. } => {
            selector_columns(lhs, out);
            selector_columns(rhs, out);
        }
        SelectorExpr::Map(entries) => entries.iter().for_each(|(k, v)| {
            selector_columns(k, out);
            selector_columns(v, out);
        }),
        SelectorExpr::Term(_) | SelectorExpr::CountRows => {}
    }
}

/// Checks that every function call in a GROUP BY function is monotonic in its first argument
/// and takes constants for the others, with Cassandra's message for the first that is not.
fn check_monotonic(e: &Expr) -> Result<(), QueryError> {
    let Expr::Call(sig, args) = e else {
        return Ok(());
    };
    let constant_rest = args.iter().skip(1).all(|a| {
        let mut columns = Vec::new();
        columns_of(a, &mut columns);
        columns.is_empty()
    });
    if !is_monotonic(&sig.function) || !constant_rest {
        return Err(invalid(format!(
            "Only monotonic functions are supported in the GROUP BY clause. Got: {} ",
            sig.describe()
        )));
    }
    args.first().map_or(Ok(()), check_monotonic)
}

impl Compiler<'_> {
    /// Compiles a GROUP BY element that is not a plain column, with Cassandra's rules: a
    /// (non-aggregate) function of exactly one clustering column, monotonic in it.
    fn group_function(&mut self, e: &SelectorExpr) -> Result<GroupFunction, QueryError> {
        if let SelectorExpr::FunctionCall { name, .. } = e {
            let fname = name.as_str();
            if AggregateFunction::from_name(fname).is_some() {
                return Err(invalid(format!(
                    "Aggregate functions are not supported within the GROUP BY clause, got: system.{fname}"
                )));
            }
        }
        // The column comes first, before the function is resolved, as in Cassandra.
        let mut names = Vec::new();
        selector_columns(e, &mut names);
        if let [name] = &names[..] {
            let col = column(self.table, name)?;
            if col.kind != ColumnKind::Clustering {
                return Err(invalid(format!(
                    "Group by functions are only supported on clustering columns, got {}",
                    col.name
                )));
            }
        }
        let c = self.compile(e, None, 0)?;
        if !matches!(c.expr, Expr::Call(..)) {
            return Err(invalid(format!(
                "Group by is currently only supported on the columns of the PRIMARY KEY, got {}",
                c.name
            )));
        }
        let mut columns = Vec::new();
        columns_of(&c.expr, &mut columns);
        let [column] = columns[..] else {
            return Err(invalid(
                "GROUP BY functions must have one clustering column name as parameter".to_string(),
            ));
        };
        let col = &self.table.columns[column];
        if col.kind != ColumnKind::Clustering {
            return Err(invalid(format!(
                "Group by functions are only supported on clustering columns, got {}",
                col.name
            )));
        }
        check_monotonic(&c.expr)?;
        Ok(GroupFunction {
            expr: c.expr,
            ty: c.ty,
            column,
        })
    }

    fn resolve_type(&self, t: &TypeExpr) -> Result<CqlType, QueryError> {
        match (t, self.types) {
            (TypeExpr::Native(name), _) => CqlType::from_native_name(name)
                .ok_or_else(|| invalid(format!("Unknown type {name}"))),
            (_, Some(types)) => {
                crate::ddl::resolve_type(t, &self.table.keyspace, types, false, false)
            }
            (_, None) => Err(invalid(format!("Unknown type {}", type_text(t)))),
        }
    }

    /// A term selector of type `ty`; its markers are recorded for PREPARE under `name`.
    fn term(&mut self, t: Term, ty: CqlType, marker_name: &str) -> Compiled {
        self.collect_markers(&t, &ty, marker_name);
        self.has_terms = true;
        Compiled {
            name: term_text(&t),
            expr: Expr::Term(t, ty.clone(), marker_name.to_string()),
            ty,
        }
    }

    fn collect_markers(&mut self, t: &Term, ty: &CqlType, name: &str) {
        match t {
            Term::BindMarker(m) => self.markers.push(SelectionMarker {
                marker: m.clone(),
                name: m
                    .name
                    .as_ref()
                    .map(|n| n.as_str().to_string())
                    .unwrap_or_else(|| name.to_string()),
                ty: ty.clone(),
            }),
            Term::List(items) | Term::Set(items) => {
                if let CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) = ty.unfrozen() {
                    for i in items {
                        self.collect_markers(i, e, name);
                    }
                }
            }
            Term::Map(entries) => {
                if let CqlType::Map(k, v) = ty.unfrozen() {
                    for (key, value) in entries {
                        self.collect_markers(key, k, name);
                        self.collect_markers(value, v, name);
                    }
                }
            }
            Term::Tuple(items) => {
                if let CqlType::Tuple(types) = ty.unfrozen() {
                    for (i, t) in items.iter().zip(types) {
                        self.collect_markers(i, t, name);
                    }
                }
            }
            Term::UserType(fields) => {
                if let CqlType::Udt(u) = ty.unfrozen() {
                    for (f, v) in fields {
                        if let Some((_, fty)) = u.fields.iter().find(|(n, _)| n == f.as_str()) {
                            self.collect_markers(v, fty, name);
                        }
                    }
                }
            }
            Term::TypeHint { term, .. } => self.collect_markers(term, ty, name),
            _ => {}
        }
    }

    /// Compiles selector `e` (of type `expected` when the context decides it). Recursive, and
    /// only a dispatcher: each kind of selector is compiled by a function of its own, so that
    /// the stack each level of a deep selector takes holds only what that kind needs.
    fn compile(
        &mut self,
        e: &SelectorExpr,
        expected: Option<&CqlType>,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        if depth > MAX_SELECTOR_DEPTH {
            return Err(invalid("Selector nesting is too deep".to_string()));
        }
        if let Some(t) = as_term(e) {
            let Some(ty) = expected else {
                return Err(invalid(format!(
                    "Cannot infer type for term {} in selection clause (try using a cast to force a type)",
                    term_text(&t)
                )));
            };
            return Ok(self.term(t, ty.clone(), "[selection]"));
        }
        match e {
            SelectorExpr::Column(c) => {
                let col = column(self.table, c)?;
                let i = self.table.column_index(&col.name).unwrap_or(0);
                Ok(Compiled {
                    expr: Expr::Column(i),
                    ty: col.ty.clone(),
                    name: col.name.clone(),
                })
            }
            SelectorExpr::CountRows => self.aggregate(AggregateFunction::CountRows, None, "count"),
            SelectorExpr::WriteTime(inner)
            | SelectorExpr::MaxWriteTime(inner)
            | SelectorExpr::Ttl(inner) => {
                let (what, kind) = match e {
                    SelectorExpr::WriteTime(_) => ("writetime", TimeKind::WriteTime),
                    SelectorExpr::MaxWriteTime(_) => ("maxwritetime", TimeKind::MaxWriteTime),
                    _ => ("ttl", TimeKind::Ttl),
                };
                self.cell_time(inner, what, kind, depth)
            }
            SelectorExpr::FunctionCall {
                keyspace,
                name,
                args,
            } => self.function(keyspace.as_ref(), name, args, depth),
            SelectorExpr::Cast(inner, ty) => self.cast(inner, ty, depth),
            SelectorExpr::TypeHint(ty_expr, inner) => self.type_hint(ty_expr, inner, depth),
            SelectorExpr::FieldAccess(inner, field) => self.field(inner, field, depth),
            SelectorExpr::ElementAccess(inner, key) => self.element(inner, key, depth),
            SelectorExpr::Slice { expr, from, to } => self.slice(expr, from, to, depth),
            SelectorExpr::Binary { op, lhs, rhs } => self.operation(*op, lhs, rhs, depth),
            SelectorExpr::Negate(inner) => self.negation(inner, depth),
            SelectorExpr::Term(t) => Err(invalid(format!(
                "Cannot infer type for term {} in selection clause (try using a cast to force a type)",
                term_text(t)
            ))),
            SelectorExpr::List(_)
            | SelectorExpr::Set(_)
            | SelectorExpr::Map(_)
            | SelectorExpr::Tuple(_) => Err(invalid(
                "Collection, tuple and user type literals of selectors are supported only when made of constants in Helenus".to_string(),
            )),
        }
    }

    /// `(type) x`: `x` compiled for the hinted type, which it must fit.
    fn type_hint(
        &mut self,
        ty_expr: &TypeExpr,
        inner: &SelectorExpr,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let ty = self.resolve_type(ty_expr)?;
        let hint = type_text(&qualify_types(ty_expr, &self.table.keyspace));
        if let Some(t) = as_term(inner) {
            // Cassandra's words for a literal the hinted type cannot take here.
            if let Term::Constant(constant) = &t {
                if functions::literal_assignment(constant, &ty) == Assignment::NotAssignable {
                    let name = format!("({hint}){}", term_text(&t));
                    return Err(invalid(format!(
                        "Cannot assign value {name} to {name} of type {ty}"
                    )));
                }
            }
            let c = self.term(t, ty, "[selection]");
            return Ok(Compiled {
                name: format!("({hint}){}", c.name),
                ..c
            });
        }
        let c = self.compile(inner, Some(&ty), depth + 1)?;
        let name = format!("({hint}){}", c.name);
        if functions::test_assignment(&ArgKind::Typed(c.ty.clone()), &ty)
            == Assignment::NotAssignable
        {
            return Err(invalid(format!(
                "Cannot assign value {name} to {name} of type {ty}"
            )));
        }
        Ok(Compiled {
            expr: c.expr,
            ty,
            name,
        })
    }

    /// `x.field` of a UDT value.
    fn field(
        &mut self,
        inner: &SelectorExpr,
        field: &Identifier,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let c = self.compile(inner, None, depth + 1)?;
        let CqlType::Udt(udt) = c.ty.unfrozen() else {
            return Err(invalid(format!(
                "Invalid field selection: {} of type {} is not a user type",
                c.name, c.ty
            )));
        };
        let Some(index) = udt.fields.iter().position(|(n, _)| n == field.as_str()) else {
            return Err(invalid(format!(
                "{} of type {} has no field {}",
                c.name,
                c.ty,
                field.as_str()
            )));
        };
        let ty = udt.fields[index].1.clone();
        Ok(Compiled {
            expr: Expr::Field(Box::new(c.expr), index),
            ty,
            name: format!("{}.{}", c.name, field.as_str()),
        })
    }

    /// `x[key]` of a map or set.
    fn element(
        &mut self,
        inner: &SelectorExpr,
        key: &Term,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let c = self.compile(inner, None, depth + 1)?;
        let (key_ty, value_ty, spec) = self.element_types(&c, "Element")?;
        let key = self.term(key.clone(), key_ty, &spec);
        Ok(Compiled {
            name: format!("{}[{}]", c.name, key.name),
            expr: Expr::Element {
                collection: Box::new(c.expr),
                ty: c.ty.clone(),
                key: Box::new(key.expr),
            },
            ty: value_ty,
        })
    }

    /// `x[from..to]` of a map or set.
    fn slice(
        &mut self,
        expr: &SelectorExpr,
        from: &Option<Term>,
        to: &Option<Term>,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let c = self.compile(expr, None, depth + 1)?;
        let (key_ty, _, spec) = self.element_types(&c, "Slice")?;
        let mut bound = |t: &Option<Term>| {
            t.as_ref()
                .map(|t| self.term(t.clone(), key_ty.clone(), &spec))
        };
        let from = bound(from);
        let to = bound(to);
        let text = |b: &Option<Compiled>| b.as_ref().map(|b| b.name.clone()).unwrap_or_default();
        Ok(Compiled {
            name: format!("{}[{}..{}]", c.name, text(&from), text(&to)),
            expr: Expr::Slice {
                collection: Box::new(c.expr),
                ty: c.ty.clone(),
                from: from.map(|b| Box::new(b.expr)),
                to: to.map(|b| Box::new(b.expr)),
            },
            ty: c.ty,
        })
    }

    /// `-x`.
    fn negation(&mut self, inner: &SelectorExpr, depth: usize) -> Result<Compiled, QueryError> {
        let (kind, compiled, text) = self.argument(inner, depth)?;
        let sig = functions::resolve(
            "system._negate",
            operation_signatures::negation_signatures(),
            &[kind],
            &[text],
        )?;
        let c = match compiled {
            Some(c) => c,
            None => self.compile(inner, Some(&sig.args[0]), depth + 1)?,
        };
        let name = if matches!(inner, SelectorExpr::Binary { .. }) {
            format!("-({})", c.name)
        } else {
            format!("-{}", c.name)
        };
        Ok(Compiled {
            name,
            ty: sig.ret.clone(),
            expr: Expr::Call(Box::new(sig), vec![c.expr]),
        })
    }

    /// `writetime(x)`, `ttl(x)`, `maxwritetime(x)` where `x` is a column, or a map or set
    /// element or slice of one, or a UDT field of one.
    fn cell_time(
        &mut self,
        inner: &SelectorExpr,
        what: &str,
        kind: TimeKind,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let base = match inner {
            SelectorExpr::Column(c) => Some(c),
            SelectorExpr::ElementAccess(b, _)
            | SelectorExpr::Slice { expr: b, .. }
            | SelectorExpr::FieldAccess(b, _) => match b.as_ref() {
                SelectorExpr::Column(c) => Some(c),
                _ => None,
            },
            _ => None,
        };
        let Some(base) = base else {
            return Err(invalid(format!(
                "{what}() applies to a column or an element, slice or field of one"
            )));
        };
        let col = column(self.table, base)?;
        if matches!(col.kind, ColumnKind::PartitionKey | ColumnKind::Clustering) {
            return Err(invalid(format!(
                "Cannot use selection function {what} on PRIMARY KEY part {}",
                col.name
            )));
        }
        let column_index = self.table.column_index(&col.name).unwrap_or(0);
        let multi_cell = col.ty.is_multi_cell();
        let value = self.compile(inner, None, depth + 1)?;
        let part = match &value.expr {
            Expr::Column(_) => CellPart::Whole,
            Expr::Element { key, ty, .. } => CellPart::Element {
                key: key.clone(),
                ty: element_key_type(ty),
            },
            Expr::Slice { from, to, ty, .. } => CellPart::Slice {
                from: from.clone(),
                to: to.clone(),
                ty: element_key_type(ty),
            },
            Expr::Field(_, index) => CellPart::Field(*index),
            _ => {
                return Err(invalid(format!(
                    "{what}() applies to a column or an element, slice or field of one"
                )))
            }
        };
        let many = multi_cell && matches!(part, CellPart::Whole | CellPart::Slice { .. });
        let ty = match kind {
            TimeKind::MaxWriteTime => CqlType::Bigint,
            TimeKind::WriteTime if many => CqlType::List(Box::new(CqlType::Bigint)),
            TimeKind::Ttl if many => CqlType::List(Box::new(CqlType::Int)),
            TimeKind::WriteTime => CqlType::Bigint,
            TimeKind::Ttl => CqlType::Int,
        };
        Ok(Compiled {
            name: format!("{what}({})", value.name),
            expr: Expr::CellTime {
                column: column_index,
                kind,
                part,
                multi_cell,
                value: Box::new(value.expr),
            },
            ty,
        })
    }

    /// `lhs op rhs`: an operator is a function overloaded on every pair of operand types;
    /// literals take the type of the overload chosen.
    fn operation(
        &mut self,
        op: BinaryOp,
        lhs: &SelectorExpr,
        rhs: &SelectorExpr,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let (left_kind, left, left_text) = self.argument(lhs, depth)?;
        let (right_kind, right, right_text) = self.argument(rhs, depth)?;
        let symbol = operations::symbol(op);
        let sig = functions::resolve_operation(
            symbol,
            operation_signatures::signatures(op),
            &[left_kind, right_kind],
            &[left_text, right_text],
        )?;
        let left = match left {
            Some(c) => c,
            None => self.compile(lhs, Some(&sig.args[0]), depth + 1)?,
        };
        let right = match right {
            Some(c) => c,
            None => self.compile(rhs, Some(&sig.args[1]), depth + 1)?,
        };
        // The parser keeps no parentheses; those the precedence needed are put back.
        let precedence = |o: BinaryOp| match o {
            BinaryOp::Add | BinaryOp::Sub => 1,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => 2,
        };
        let wrap = |e: &SelectorExpr, name: String, right_side: bool| match e {
            SelectorExpr::Binary { op: inner, .. }
                if precedence(*inner) < precedence(op)
                    || (right_side && precedence(*inner) == precedence(op)) =>
            {
                format!("({name})")
            }
            _ => name,
        };
        let name = format!(
            "{} {symbol} {}",
            wrap(lhs, left.name, false),
            wrap(rhs, right.name, true)
        );
        Ok(Compiled {
            name,
            ty: sig.ret.clone(),
            expr: Expr::Call(Box::new(sig), vec![left.expr, right.expr]),
        })
    }

    /// Key type, element type and bind marker name of `m[...]` / `s[...]`.
    fn element_types(
        &self,
        c: &Compiled,
        what: &str,
    ) -> Result<(CqlType, CqlType, String), QueryError> {
        match c.ty.unfrozen() {
            CqlType::Map(k, v) => Ok(((**k).clone(), (**v).clone(), format!("key({})", c.name))),
            CqlType::Set(e) => Ok(((**e).clone(), (**e).clone(), format!("value({})", c.name))),
            CqlType::List(_) => Err(invalid(format!(
                "{what} selection is only allowed on sets and maps, but {} is a list",
                c.name
            ))),
            other => Err(invalid(format!(
                "Invalid {} selection: {} is of type {other} is not a collection",
                what.to_ascii_lowercase(),
                c.name
            ))),
        }
    }

    fn aggregate(
        &mut self,
        function: AggregateFunction,
        arg: Option<Compiled>,
        name: &str,
    ) -> Result<Compiled, QueryError> {
        if self.in_aggregate {
            return Err(invalid(
                "aggregate functions cannot be used as arguments of aggregate functions"
                    .to_string(),
            ));
        }
        let arg_ty = arg
            .as_ref()
            .map(|a| a.ty.clone())
            .unwrap_or(CqlType::Bigint);
        let ty = match function {
            AggregateFunction::CountRows | AggregateFunction::Count => CqlType::Bigint,
            AggregateFunction::Min | AggregateFunction::Max => {
                aggregates::min_max_result_type(&arg_ty)
            }
            AggregateFunction::Sum | AggregateFunction::Avg => arg_ty.unfrozen().clone(),
        };
        self.aggregates.push(AggregateSpec {
            function,
            arg: arg.map(|a| a.expr),
            arg_ty,
        });
        Ok(Compiled {
            expr: Expr::Aggregate(self.aggregates.len() - 1),
            ty,
            name: name.to_string(),
        })
    }

    /// Compiles an argument whose type does not depend on its receiver; literal arguments are
    /// left for after resolution.
    fn argument(
        &mut self,
        a: &SelectorExpr,
        depth: usize,
    ) -> Result<(ArgKind, Option<Compiled>, String), QueryError> {
        if let Some(t) = as_term(a) {
            let text = term_text(&t);
            return Ok((term_arg_kind(&t), None, text));
        }
        let c = self.compile(a, None, depth + 1)?;
        let name = c.name.clone();
        Ok((ArgKind::Typed(c.ty.clone()), Some(c), name))
    }

    fn function(
        &mut self,
        keyspace: Option<&Identifier>,
        name: &Identifier,
        args: &[SelectorExpr],
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let fname = name.as_str();
        let called = match keyspace {
            Some(ks) => format!("{}.{fname}", ks.as_str()),
            None => fname.to_string(),
        };
        if keyspace.is_some_and(|ks| ks.as_str() != "system") {
            // User-defined functions live in a keyspace; Helenus has none.
            return Err(invalid(format!("Unknown function '{called}'")));
        }
        if let Some(function) = AggregateFunction::from_name(fname) {
            return self.aggregate_call(function, fname, args, depth);
        }
        let key_types: Vec<CqlType> = self
            .table
            .partition_key()
            .iter()
            .map(|c| c.ty.clone())
            .collect();
        let candidates = match fname {
            // One signature per argument type, as Cassandra's toJson factory makes them.
            "tojson" | "to_json" => match args {
                [arg] => match self.argument(arg, depth)?.0 {
                    ArgKind::Typed(ty) => vec![Signature::to_json(fname, ty)],
                    _ => {
                        return Err(invalid(format!(
                            "Cannot infer type of argument {} in call to function {called}",
                            selector_text(arg)
                        )))
                    }
                },
                _ => {
                    return Err(invalid(format!(
                        "{called} expects 1 argument, but {} given",
                        args.len()
                    )))
                }
            },
            "fromjson" | "from_json" => {
                return Err(invalid(
                    "fromjson() cannot be used in the selection clause of a SELECT statement"
                        .to_string(),
                ))
            }
            // Made for the arguments' types once they are known.
            _ if functions::is_generic(fname) => Vec::new(),
            _ => match functions::signatures(fname, &key_types)? {
                Some(candidates) => candidates,
                None => return Err(invalid(format!("Unknown function '{called}'"))),
            },
        };
        let mut kinds = Vec::with_capacity(args.len());
        let mut compiled = Vec::with_capacity(args.len());
        let mut texts = Vec::with_capacity(args.len());
        for a in args {
            let (kind, c, text) = self.argument(a, depth)?;
            kinds.push(kind);
            compiled.push(c);
            texts.push(text);
        }
        let candidates = if functions::is_generic(fname) {
            // Vector functions of list literals only: each literal is a float vector of its
            // length, as Cassandra's factory infers (`similarity_cosine([1, 2], [2, 1])`).
            let untyped = !kinds.iter().any(|k| matches!(k, ArgKind::Typed(_)));
            if untyped && fname.starts_with("similarity_") {
                for (kind, a) in kinds.iter_mut().zip(args) {
                    if let Some(Term::List(items)) = as_term(a) {
                        *kind = ArgKind::Typed(CqlType::Vector(
                            Box::new(CqlType::Float),
                            items.len() as u32,
                        ));
                    }
                }
            }
            // A collection function of a list or set literal of constants: the literal's type
            // as Cassandra infers it (`collection_count([1, 2])` of a list<int>).
            let terms: Vec<Option<Term>> = args.iter().map(as_term).collect();
            CollectionFunction::infer_literal_arguments(
                fname,
                &mut kinds,
                terms.iter().map(Option::as_ref),
                true,
            );
            vec![functions::generic_signature(fname, &kinds, &texts)?]
        } else {
            candidates
        };
        let sig = functions::resolve(&called, &candidates, &kinds, &texts)?;
        let mut exprs = Vec::with_capacity(args.len());
        let mut names = Vec::with_capacity(args.len());
        for ((a, c), param) in args.iter().zip(compiled).zip(&sig.args) {
            let c = match c {
                Some(c) => c,
                None => self.compile(a, Some(param), depth + 1)?,
            };
            exprs.push(c.expr);
            names.push(c.name);
        }
        let text = match &sig.function {
            Scalar::Cast { to, .. } => format!("cast({} as {to})", names.join(", ")),
            _ => format!("system.{}({})", sig.name, names.join(", ")),
        };
        let ty = sig.ret.clone();
        // token() of exactly the partition key columns is the row's own token.
        let own_key = sig.function == Scalar::Token
            && exprs.len() == self.table.partition_key_count
            && exprs
                .iter()
                .enumerate()
                .all(|(i, e)| matches!(e, Expr::Column(c) if *c == i));
        let expr = if own_key {
            Expr::PartitionToken
        } else {
            Expr::Call(Box::new(sig), exprs)
        };
        Ok(Compiled {
            expr,
            ty,
            name: text,
        })
    }

    fn aggregate_call(
        &mut self,
        function: AggregateFunction,
        fname: &str,
        args: &[SelectorExpr],
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        if self.in_aggregate {
            return Err(invalid(
                "aggregate functions cannot be used as arguments of aggregate functions"
                    .to_string(),
            ));
        }
        // Cassandra declares count, min and max for every native type but counter (and
        // varchar, which is text).
        let natives: Vec<CqlType> = cql_syntax::NATIVE_TYPES
            .iter()
            .filter(|n| !matches!(**n, "counter" | "varchar"))
            .filter_map(|n| CqlType::from_native_name(n))
            .collect();
        let overloads: &[CqlType] = match function {
            AggregateFunction::Sum | AggregateFunction::Avg => aggregates::SUMMABLE,
            _ => &natives,
        };
        if args.len() != 1 {
            return Err(invalid(format!(
                "Invalid call to function {fname}, none of its type signatures match (known type signatures: {})",
                describe_overloads(fname, function, overloads)
            )));
        }
        let arg = &args[0];
        // count(1) counts rows, as count(*) does (any literal but NULL).
        if function == AggregateFunction::Count {
            if let SelectorExpr::Term(Term::Constant(_)) = arg {
                return self.aggregate(AggregateFunction::CountRows, None, "count");
            }
            if let SelectorExpr::Term(Term::Null) = arg {
                let c = Compiled {
                    expr: Expr::Value(None),
                    ty: CqlType::Blob,
                    name: "NULL".to_string(),
                };
                return self.aggregate(function, Some(c), "system.count(NULL)");
            }
        }
        self.in_aggregate = true;
        let result = self.argument(arg, depth);
        self.in_aggregate = false;
        let (kind, compiled, text) = result?;
        let ty = match (&kind, function) {
            (
                ArgKind::Typed(t),
                AggregateFunction::Count | AggregateFunction::Min | AggregateFunction::Max,
            ) => t.clone(),
            (ArgKind::Any, _) => {
                return Err(invalid(format!(
                    "Cannot infer type of argument {text} in call to function system.{fname}(any): use type casts to disambiguate"
                )))
            }
            _ => pick_type(fname, function, &kind, overloads)?,
        };
        let c = match compiled {
            Some(c) => c,
            None => {
                self.in_aggregate = true;
                let c = self.compile(arg, Some(&ty), depth + 1);
                self.in_aggregate = false;
                c?
            }
        };
        let name = format!("system.{fname}({})", c.name);
        let c = Compiled { ty, ..c };
        self.aggregate(function, Some(c), &name)
    }

    fn cast(
        &mut self,
        inner: &SelectorExpr,
        ty: &TypeExpr,
        depth: usize,
    ) -> Result<Compiled, QueryError> {
        let TypeExpr::Native(type_name) = ty else {
            return Err(invalid(format!(
                "{} cannot be cast to {}",
                selector_text(inner),
                type_text(ty)
            )));
        };
        let to = CqlType::from_native_name(type_name)
            .ok_or_else(|| invalid(format!("Unknown type {type_name}")))?;
        let c = self.compile(inner, None, depth + 1)?;
        // A cast to the selector's own type is no cast at all.
        if type_match::same_type(&c.ty, &to) {
            return Ok(c);
        }
        let function_name = format!("cast_as_{}", type_name.to_ascii_lowercase());
        let candidates = functions::signatures(&function_name, &[])
            .ok()
            .flatten()
            .filter(|c| !c.is_empty());
        let Some(candidates) = candidates else {
            return Err(invalid(format!("{} cannot be cast to {type_name}", c.name)));
        };
        let called = format!("system.{}", functions::cast_function_name(&to));
        let sig = functions::resolve(
            &called,
            &candidates,
            &[ArgKind::Typed(c.ty.clone())],
            std::slice::from_ref(&c.name),
        )?;
        Ok(Compiled {
            name: format!("cast({} as {})", c.name, type_name.to_ascii_lowercase()),
            ty: sig.ret.clone(),
            expr: Expr::Call(Box::new(sig), vec![c.expr]),
        })
    }
}

/// The key type of a map or the element type of a set.
fn element_key_type(collection: &CqlType) -> CqlType {
    match collection.unfrozen() {
        CqlType::Map(k, _) | CqlType::Set(k) => (**k).clone(),
        other => other.clone(),
    }
}

/// `system.sum : (int) -> int, ...`: an aggregate's signatures, as errors list them.
fn describe_overloads(fname: &str, function: AggregateFunction, types: &[CqlType]) -> String {
    types
        .iter()
        .map(|t| {
            let ret = match function {
                AggregateFunction::Count | AggregateFunction::CountRows => &CqlType::Bigint,
                _ => t,
            };
            format!("system.{fname} : ({t}) -> {ret}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The argument type of an aggregate overloaded on `types`, as Cassandra resolves it.
fn pick_type(
    fname: &str,
    function: AggregateFunction,
    arg: &ArgKind,
    types: &[CqlType],
) -> Result<CqlType, QueryError> {
    let mut weak = Vec::new();
    for t in types {
        match functions::test_assignment(arg, t) {
            Assignment::ExactMatch => return Ok(t.clone()),
            Assignment::WeaklyAssignable => weak.push(t.clone()),
            Assignment::NotAssignable => {}
        }
    }
    match weak.len() {
        1 => Ok(weak.remove(0)),
        0 => Err(invalid(format!(
            "Invalid call to function {fname}, none of its type signatures match (known type signatures: {})",
            describe_overloads(fname, function, types)
        ))),
        _ => Err(invalid(format!(
            "Ambiguous call to function {fname} (can be matched by following signatures: {}): use type casts to disambiguate",
            describe_overloads(fname, function, &weak)
        ))),
    }
}

/// A short text for a selector in errors raised before it is compiled.
fn selector_text(e: &SelectorExpr) -> String {
    match e {
        SelectorExpr::Column(c) => c.as_str().to_string(),
        other => as_term(other)
            .map(|t| term_text(&t))
            .unwrap_or_else(|| "selector".to_string()),
    }
}

impl Selection {
    pub fn is_aggregate(&self) -> bool {
        !self.aggregates.is_empty()
    }

    /// Whether rows must carry the times of each cell of multi-cell columns.
    pub fn needs_cell_times(&self) -> bool {
        self.cell_times
    }

    /// Whether rows must carry the write time and TTL of single-cell columns.
    pub fn needs_column_times(&self) -> bool {
        self.column_times
    }

    /// Whether a `writetime()`/`ttl()`/`maxwritetime()` reads a multi-cell column
    /// (`multi_cell`) or a single-cell one.
    fn reads_cell_times(&self, multi_cell: bool) -> bool {
        fn walk(e: &Expr, want: bool) -> bool {
            match e {
                Expr::CellTime { multi_cell, .. } => *multi_cell == want,
                Expr::Call(_, args) => args.iter().any(|a| walk(a, want)),
                Expr::Field(inner, _) => walk(inner, want),
                Expr::Element { collection, .. } | Expr::Slice { collection, .. } => {
                    walk(collection, want)
                }
                _ => false,
            }
        }
        self.outputs.iter().any(|e| walk(e, multi_cell))
            || self
                .aggregates
                .iter()
                .any(|a| a.arg.as_ref().is_some_and(|e| walk(e, multi_cell)))
    }

    /// Column indexes the selection reads (for SELECT DISTINCT's validation).
    pub fn columns_read(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.for_each_column_read(&mut |i| out.push(i));
        out
    }

    /// Whether the selection reads a column whose index is below `n` (the partition key's
    /// columns come first).
    pub fn reads_column_below(&self, n: usize) -> bool {
        self.lowest_column_read < n
    }

    fn for_each_column_read(&self, f: &mut dyn FnMut(usize)) {
        fn walk(e: &Expr, out: &mut dyn FnMut(usize)) {
            match e {
                Expr::Column(i) => out(*i),
                Expr::CellTime { value, part, .. } => {
                    walk(value, out);
                    match part {
                        CellPart::Element { key, .. } => walk(key, out),
                        CellPart::Slice { from, to, .. } => {
                            from.iter().chain(to.iter()).for_each(|b| walk(b, out))
                        }
                        CellPart::Whole | CellPart::Field(_) => {}
                    }
                }
                Expr::Call(_, args) => args.iter().for_each(|a| walk(a, out)),
                Expr::Field(inner, _) => walk(inner, out),
                Expr::Element {
                    collection, key, ..
                } => {
                    walk(collection, out);
                    walk(key, out);
                }
                Expr::Slice {
                    collection,
                    from,
                    to,
                    ..
                } => {
                    walk(collection, out);
                    from.iter().chain(to.iter()).for_each(|b| walk(b, out));
                }
                Expr::PartitionToken | Expr::Term(..) | Expr::Value(_) | Expr::Aggregate(_) => {}
            }
        }
        for e in &self.outputs {
            walk(e, f);
        }
        for a in &self.aggregates {
            if let Some(e) = &a.arg {
                walk(e, f);
            }
        }
    }

    /// Whether `bind` would change the selection: it holds terms to evaluate.
    pub fn needs_binding(&self) -> bool {
        self.has_terms
    }

    /// Evaluates the selection's terms with the execution's bound values.
    pub fn bind(&mut self, values: &[Bound]) -> Result<(), QueryError> {
        fn bind_expr(e: &mut Expr, values: &[Bound]) -> Result<(), QueryError> {
            match e {
                Expr::Term(t, ty, name) => {
                    let v = match evaluate(t, ty, name, values)? {
                        TermValue::Value(b) => Some(b),
                        TermValue::Null | TermValue::Unset => None,
                    };
                    *e = Expr::Value(v);
                }
                Expr::Call(_, args) => {
                    for a in args {
                        bind_expr(a, values)?;
                    }
                }
                Expr::Field(inner, _) => bind_expr(inner, values)?,
                Expr::Element {
                    collection, key, ..
                } => {
                    bind_expr(collection, values)?;
                    bind_expr(key, values)?;
                }
                Expr::Slice {
                    collection,
                    from,
                    to,
                    ..
                } => {
                    bind_expr(collection, values)?;
                    for b in from.iter_mut().chain(to.iter_mut()) {
                        bind_expr(b, values)?;
                    }
                }
                Expr::CellTime { value, part, .. } => {
                    bind_expr(value, values)?;
                    match part {
                        CellPart::Element { key, .. } => bind_expr(key, values)?,
                        CellPart::Slice { from, to, .. } => {
                            for b in from.iter_mut().chain(to.iter_mut()) {
                                bind_expr(b, values)?;
                            }
                        }
                        CellPart::Whole | CellPart::Field(_) => {}
                    }
                }
                Expr::Column(_) | Expr::PartitionToken | Expr::Value(_) | Expr::Aggregate(_) => {}
            }
            Ok(())
        }
        for e in &mut self.outputs {
            bind_expr(e, values)?;
        }
        for a in &mut self.aggregates {
            if let Some(e) = &mut a.arg {
                bind_expr(e, values)?;
            }
        }
        for f in self.group_by_functions.iter_mut().flatten() {
            bind_expr(&mut f.expr, values)?;
        }
        Ok(())
    }

    /// Appends outputs that are not result columns (`specs` does not list them): the values
    /// of these columns, for sorting rows after they are read.
    pub fn add_hidden_columns(&mut self, columns: impl Iterator<Item = usize>) {
        let start = self.outputs.len();
        self.outputs.extend(columns.map(Expr::Column));
        for e in &self.outputs[start..] {
            if let Expr::Column(i) = e {
                self.lowest_column_read = self.lowest_column_read.min(*i);
            }
        }
        self.moves = last_plain_uses(&self.outputs);
    }

    /// The value of the GROUP BY function of a row.
    pub fn group_value(
        &self,
        function: &GroupFunction,
        row: &RowValues,
    ) -> Result<Option<Vec<u8>>, QueryError> {
        eval(&function.expr, Some(row), &[])
    }

    /// The output row of a non-aggregate selection.
    pub fn project(&self, row: &RowValues) -> Result<Vec<Option<Bytes>>, QueryError> {
        self.outputs
            .iter()
            .map(|e| Ok(eval(e, Some(row), &[])?.map(Bytes::from)))
            .collect()
    }

    /// `project` of a row that is not needed after: plain columns are moved out of it, not
    /// copied (every other output is evaluated first, while the row is whole).
    pub fn project_owned(&self, mut row: RowValues) -> Result<Vec<Option<Bytes>>, QueryError> {
        let mut out = Vec::with_capacity(self.outputs.len());
        for e in &self.outputs {
            out.push(match e {
                Expr::Column(_) => None,
                e => eval(e, Some(&row), &[])?.map(Bytes::from),
            });
        }
        for ((e, slot), moves) in self.outputs.iter().zip(&mut out).zip(&self.moves) {
            if let Expr::Column(i) = e {
                let value = if *moves {
                    row.values[*i].take()
                } else {
                    row.values[*i].clone()
                };
                *slot = value.map(Bytes::from);
            }
        }
        Ok(out)
    }

    pub fn new_group(&self) -> GroupState {
        GroupState {
            first: None,
            accumulators: self
                .aggregates
                .iter()
                .map(|a| Accumulator::new(a.function, &a.arg_ty))
                .collect(),
        }
    }

    /// Adds a row to a group's aggregates (and keeps the group's first row).
    pub fn add_row(&self, group: &mut GroupState, row: &RowValues) -> Result<(), QueryError> {
        for (spec, acc) in self.aggregates.iter().zip(&mut group.accumulators) {
            match &spec.arg {
                None => acc.add(Some(&[]))?,
                Some(e) => acc.add(eval(e, Some(row), &[])?.as_deref())?,
            }
        }
        if group.first.is_none() {
            group.first = Some(row.clone());
        }
        Ok(())
    }

    /// The output row of a group: aggregates over its rows, the rest from its first row.
    pub fn finish(&self, group: &GroupState) -> Result<Vec<Option<Bytes>>, QueryError> {
        let results: Vec<Option<Vec<u8>>> =
            group.accumulators.iter().map(Accumulator::result).collect();
        self.outputs
            .iter()
            .map(|e| Ok(eval(e, group.first.as_ref(), &results)?.map(Bytes::from)))
            .collect()
    }
}

fn eval(
    e: &Expr,
    row: Option<&RowValues>,
    aggregates: &[Option<Vec<u8>>],
) -> Result<Option<Vec<u8>>, QueryError> {
    Ok(match e {
        Expr::Column(i) => row.and_then(|r| r.values[*i].clone()),
        Expr::CellTime {
            column,
            kind,
            part,
            multi_cell,
            value,
        } => {
            let Some(r) = row else {
                return Ok(None);
            };
            if *multi_cell {
                cell_times(r, *column, *kind, part, aggregates)?
            } else if eval(value, row, aggregates)?.is_none() {
                None
            } else if *kind == TimeKind::Ttl {
                r.ttls
                    .get(*column)
                    .copied()
                    .flatten()
                    .map(|t| t.to_be_bytes().to_vec())
            } else {
                r.writetimes
                    .get(*column)
                    .copied()
                    .flatten()
                    .map(|t| t.to_be_bytes().to_vec())
            }
        }
        Expr::PartitionToken => row.map(|r| r.token.to_be_bytes().to_vec()),
        Expr::Term(..) => {
            return Err(QueryError::Server(
                "selection evaluated before its terms were bound".to_string(),
            ))
        }
        Expr::Value(v) => v.clone(),
        Expr::Aggregate(i) => aggregates.get(*i).cloned().flatten(),
        Expr::Call(sig, args) => {
            let mut values = Vec::with_capacity(args.len());
            for a in args {
                values.push(eval(a, row, aggregates)?);
            }
            functions::call(sig, &values)?
        }
        Expr::Field(inner, index) => {
            let Some(udt) = eval(inner, row, aggregates)? else {
                return Ok(None);
            };
            field(&udt, *index)?
        }
        Expr::Element {
            collection,
            ty,
            key,
        } => {
            let (Some(c), Some(k)) = (
                eval(collection, row, aggregates)?,
                eval(key, row, aggregates)?,
            ) else {
                return Ok(None);
            };
            element(ty, &c, &k)?
        }
        Expr::Slice {
            collection,
            ty,
            from,
            to,
        } => {
            let Some(c) = eval(collection, row, aggregates)? else {
                return Ok(None);
            };
            let bound = |b: &Option<Box<Expr>>| -> Result<Option<Vec<u8>>, QueryError> {
                match b {
                    Some(b) => eval(b, row, aggregates),
                    None => Ok(None),
                }
            };
            slice(ty, &c, bound(from)?.as_deref(), bound(to)?.as_deref())?
        }
    })
}

/// `writetime()`, `ttl()` or `maxwritetime()` of (part of) a multi-cell column: one value for
/// one cell or the maximum, else a list with one entry per cell; null when no cell is selected.
fn cell_times(
    row: &RowValues,
    column: usize,
    kind: TimeKind,
    part: &CellPart,
    aggregates: &[Option<Vec<u8>>],
) -> Result<Option<Vec<u8>>, QueryError> {
    let Some(Some(cells)) = row.cells.get(column) else {
        return Ok(None);
    };
    let selected: Vec<&CellTime> = match part {
        CellPart::Whole => cells.iter().collect(),
        CellPart::Element { key, ty } => {
            let Some(key) = eval(key, Some(row), aggregates)? else {
                return Ok(None);
            };
            cells
                .iter()
                .filter(|c| types::compare(ty, &c.path, &key).is_eq())
                .collect()
        }
        CellPart::Slice { from, to, ty } => {
            let from = match from {
                Some(b) => eval(b, Some(row), aggregates)?,
                None => None,
            };
            let to = match to {
                Some(b) => eval(b, Some(row), aggregates)?,
                None => None,
            };
            cells
                .iter()
                .filter(|c| {
                    from.as_deref()
                        .is_none_or(|f| types::compare(ty, &c.path, f).is_ge())
                        && to
                            .as_deref()
                            .is_none_or(|t| types::compare(ty, &c.path, t).is_le())
                })
                .collect()
        }
        CellPart::Field(index) => {
            let path = (*index as u16).to_be_bytes();
            cells.iter().filter(|c| c.path == path).collect()
        }
    };
    if selected.is_empty() {
        return Ok(None);
    }
    let list = matches!(part, CellPart::Whole | CellPart::Slice { .. });
    Ok(Some(match kind {
        TimeKind::MaxWriteTime => {
            let max = selected
                .iter()
                .map(|c| c.timestamp)
                .max()
                .unwrap_or(i64::MIN);
            max.to_be_bytes().to_vec()
        }
        TimeKind::WriteTime if !list => selected[0].timestamp.to_be_bytes().to_vec(),
        TimeKind::Ttl if !list => match selected[0].ttl {
            Some(t) => t.to_be_bytes().to_vec(),
            None => return Ok(None),
        },
        TimeKind::WriteTime | TimeKind::Ttl => {
            // A list; a cell without TTL is a null element, as Cassandra writes it.
            let mut out = (selected.len() as i32).to_be_bytes().to_vec();
            for c in selected {
                if kind == TimeKind::WriteTime {
                    out.extend_from_slice(&8i32.to_be_bytes());
                    out.extend_from_slice(&c.timestamp.to_be_bytes());
                } else if let Some(t) = c.ttl {
                    out.extend_from_slice(&4i32.to_be_bytes());
                    out.extend_from_slice(&t.to_be_bytes());
                } else {
                    out.extend_from_slice(&(-1i32).to_be_bytes());
                }
            }
            out
        }
    }))
}

/// Field `index` of a serialised UDT (absent trailing fields are null).
fn field(udt: &[u8], index: usize) -> Result<Option<Vec<u8>>, QueryError> {
    let malformed = || QueryError::Invalid("Malformed user type value".to_string());
    let mut rest = udt;
    for i in 0..=index {
        if rest.is_empty() {
            return Ok(None);
        }
        if rest.len() < 4 {
            return Err(malformed());
        }
        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        rest = &rest[4..];
        let value = if len < 0 {
            None
        } else {
            let len = len as usize;
            if rest.len() < len {
                return Err(malformed());
            }
            let (v, tail) = rest.split_at(len);
            rest = tail;
            Some(v)
        };
        if i == index {
            return Ok(value.map(<[u8]>::to_vec));
        }
    }
    Ok(None)
}

/// `m[key]` (the value) or `s[key]` (the element, if present).
fn element(ty: &CqlType, collection: &[u8], key: &[u8]) -> Result<Option<Vec<u8>>, QueryError> {
    Ok(match ty.unfrozen() {
        CqlType::Map(k, _) => split_elements(collection, 2)?
            .into_iter()
            .find(|g| types::compare(k, g[0], key).is_eq())
            .map(|g| g[1].to_vec()),
        CqlType::Set(e) => split_elements(collection, 1)?
            .into_iter()
            .find(|g| types::compare(e, g[0], key).is_eq())
            .map(|g| g[0].to_vec()),
        _ => None,
    })
}

/// The entries of a map or set whose keys are within `[from, to]`; null when none are.
fn slice(
    ty: &CqlType,
    collection: &[u8],
    from: Option<&[u8]>,
    to: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, QueryError> {
    let (key_ty, width) = match ty.unfrozen() {
        CqlType::Map(k, _) => (k.as_ref(), 2),
        CqlType::Set(e) => (e.as_ref(), 1),
        _ => return Ok(None),
    };
    let kept: Vec<Vec<&[u8]>> = split_elements(collection, width)?
        .into_iter()
        .filter(|g| {
            from.is_none_or(|f| types::compare(key_ty, g[0], f).is_ge())
                && to.is_none_or(|t| types::compare(key_ty, g[0], t).is_le())
        })
        .collect();
    if kept.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(kept.len() as i32).to_be_bytes());
    for g in kept {
        for part in g {
            out.extend_from_slice(&(part.len() as i32).to_be_bytes());
            out.extend_from_slice(part);
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use types::Value;

    fn decode(ty: &CqlType, b: &[u8]) -> Value {
        Value::decode(ty, b).expect("decodes")
    }

    fn encode(v: Value) -> Vec<u8> {
        let mut out = Vec::new();
        v.encode(&mut out);
        out
    }

    #[test]
    fn elements_and_slices() {
        let ty = CqlType::Map(Box::new(CqlType::Text), Box::new(CqlType::Int));
        let m = encode(Value::Map(vec![
            (Value::Text("a".into()), Value::Int(1)),
            (Value::Text("b".into()), Value::Int(2)),
            (Value::Text("c".into()), Value::Int(3)),
        ]));
        assert_eq!(
            element(&ty, &m, b"b")
                .expect("ok")
                .map(|b| decode(&CqlType::Int, &b)),
            Some(Value::Int(2))
        );
        assert_eq!(element(&ty, &m, b"z").expect("ok"), None);
        let s = slice(&ty, &m, Some(b"b"), None).expect("ok").expect("some");
        assert_eq!(
            decode(&ty, &s),
            Value::Map(vec![
                (Value::Text("b".into()), Value::Int(2)),
                (Value::Text("c".into()), Value::Int(3)),
            ])
        );
        assert_eq!(slice(&ty, &m, Some(b"c"), Some(b"a")).expect("ok"), None);
    }

    #[test]
    fn udt_fields() {
        let udt = encode(Value::Udt(vec![Some(Value::Int(1)), None]));
        assert_eq!(field(&udt, 0).expect("ok"), Some(vec![0, 0, 0, 1]));
        assert_eq!(field(&udt, 1).expect("ok"), None);
        assert_eq!(field(&udt, 2).expect("ok"), None);
    }
}
