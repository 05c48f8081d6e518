//! Function calls and arithmetic in terms (`INSERT ... VALUES (toTimestamp(now()), 5 + 1)`,
//! `WHERE tu > minTimeuuid('2020-01-01')`): the native scalar function or operator a term
//! calls, resolved against the type of the value it must produce, as Cassandra resolves calls
//! with a receiver (`functions::resolve_for_receiver`). `bind` uses the resolved signature to
//! type the bind markers among the arguments, `eval` to compute the value.

use std::borrow::Cow;
use std::collections::HashMap;
use std::marker::PhantomData;

use cql_syntax::ast::{Constant, Term, TypeExpr};
use types::CqlType;

use super::arguments::{self, ArgKind, CollectionShape};
use super::collection_functions::CollectionFunction;
use super::functions::{self, generic_signature_for, CallKind, Signature};
use super::operation_signatures;
use super::operations;
use super::term_text::term_text;
use super::type_match;
use crate::QueryError;

/// The arguments of a call term (a function call, an operation or a negation), or `None` for
/// any other term.
pub(crate) fn call_arguments(term: &Term) -> Option<Vec<&Term>> {
    match term {
        Term::FunctionCall { args, .. } => Some(args.iter().collect()),
        Term::Binary { lhs, rhs, .. } => Some(vec![lhs, rhs]),
        Term::Negate(inner) | Term::Cast { term: inner, .. } => Some(vec![inner]),
        _ => None,
    }
}

/// Whether the term is a call of `fromJson`, whose result takes the receiver's type and which
/// `eval` runs itself.
pub(crate) fn is_from_json(term: &Term) -> bool {
    matches!(term, Term::FunctionCall { keyspace, name, .. }
        if keyspace.as_ref().is_none_or(|k| k.as_str() == "system")
            && matches!(name.as_str().to_ascii_lowercase().as_str(), "fromjson" | "from_json"))
}

/// Resolves the calls of one term tree against their receivers' types.
///
/// A call's argument kinds come from its argument calls resolved without a receiver, which
/// come from theirs, and so on to the leaves; a walk that resolves every call of a tree (bind
/// and eval do, top-down) would redo that for each ancestor, time quadratic in the depth of a
/// chain such as `1+1+...+1` (cubic with the argument texts: 600 operands took 89 s). So the
/// kind of each call with arguments is worked out once and remembered by node, and argument
/// texts, which only errors quote, are written only for an error. A walk then costs time
/// linear in the tree's size. Keyed by address: `'t` keeps every node alive and in place.
#[derive(Default)]
pub(crate) struct Resolver<'t> {
    kinds: HashMap<*const Term, ArgKind, foldhash::fast::RandomState>,
    tree: PhantomData<&'t Term>,
    /// Resolutions made, for the test that each call is resolved a bounded number of times.
    #[cfg(test)]
    resolutions: usize,
}

/// Whether the errors of a resolution quote the arguments (the second try, for an error).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Texts {
    Empty,
    Written,
}

impl<'t> Resolver<'t> {
    /// The signature a call term makes for a receiver of type `receiver` (`None` when
    /// unknown, as for the argument of another call); `None` for a term that is not a call.
    pub(crate) fn resolve(
        &mut self,
        term: &'t Term,
        receiver: Option<&CqlType>,
    ) -> Result<Option<Signature>, QueryError> {
        // Argument texts appear only in error messages, and whether a call resolves does not
        // depend on them: try without, and write them only to word the error.
        match self.resolve_with(term, receiver, Texts::Empty) {
            Ok(sig) => Ok(sig),
            Err(_) => self.resolve_with(term, receiver, Texts::Written),
        }
    }

    fn resolve_with(
        &mut self,
        term: &'t Term,
        receiver: Option<&CqlType>,
        texts: Texts,
    ) -> Result<Option<Signature>, QueryError> {
        let Some(args) = call_arguments(term) else {
            return Ok(None);
        };
        #[cfg(test)]
        {
            self.resolutions += 1;
        }
        let kinds: Vec<ArgKind> = args.iter().map(|a| self.arg_kind(a)).collect();
        let texts: Vec<String> = match texts {
            Texts::Written => args.iter().map(|a| term_text(a)).collect(),
            Texts::Empty => vec![String::new(); args.len()],
        };
        resolve_call(term, &args, kinds, &texts, receiver)
    }

    /// What is known of an argument term before its function is chosen, as Cassandra's
    /// `testAssignment` sees it: a call's result type (resolved without a receiver), a type
    /// hint, a literal, a collection literal's shape; markers and NULL fit anything.
    fn arg_kind(&mut self, t: &'t Term) -> ArgKind {
        match t {
            Term::Constant(c) => ArgKind::Literal(c.clone()),
            Term::List(_) => ArgKind::Collection(CollectionShape::List),
            Term::Set(_) => ArgKind::Collection(CollectionShape::Set),
            Term::Map(_) | Term::UserType(_) => ArgKind::Collection(CollectionShape::Map),
            // `(x)` is also `x` in parentheses.
            Term::Tuple(items) if items.len() == 1 => self.arg_kind(&items[0]),
            Term::Tuple(_) => ArgKind::Collection(CollectionShape::Tuple),
            Term::TypeHint {
                ty: TypeExpr::Native(name),
                ..
            } => CqlType::from_native_name(&name.to_ascii_lowercase())
                .map(ArgKind::Typed)
                .unwrap_or(ArgKind::Any),
            // fromJson() fits any receiver.
            _ if is_from_json(t) => ArgKind::Any,
            Term::FunctionCall { .. }
            | Term::Binary { .. }
            | Term::Negate(_)
            | Term::Cast { .. } => {
                if let Some(kind) = self.kinds.get(&(t as *const Term)) {
                    return kind.clone();
                }
                // Its errors are not the statement's (a receiver may still decide the call),
                // so they are never worded.
                let kind = match self.resolve_with(t, None, Texts::Empty) {
                    Ok(Some(sig)) => ArgKind::Typed(sig.ret),
                    _ => ArgKind::Any,
                };
                // A call without arguments costs nothing to resolve again; remembering only
                // the others keeps the common terms (`toTimestamp(now())`, `5 + 1`) free of
                // allocation.
                if call_arguments(t).is_some_and(|args| !args.is_empty()) {
                    self.kinds.insert(t, kind.clone());
                }
                kind
            }
            _ => ArgKind::Any,
        }
    }
}

/// The signature call `term` (of arguments `args`, of kinds `kinds`, written `texts`) makes
/// for a receiver of type `receiver`.
fn resolve_call(
    term: &Term,
    args: &[&Term],
    kinds: Vec<ArgKind>,
    texts: &[String],
    receiver: Option<&CqlType>,
) -> Result<Option<Signature>, QueryError> {
    let has_markers = args.iter().any(|a| matches!(a, Term::BindMarker(_)));
    let (called, candidates, kind) = match term {
        Term::Binary { op, .. } => (
            String::new(),
            Cow::Borrowed(operation_signatures::signatures(*op)),
            CallKind::Operation(operations::symbol(*op)),
        ),
        Term::Negate(_) => (
            String::new(),
            Cow::Borrowed(operation_signatures::negation_signatures()),
            CallKind::Negation,
        ),
        // CAST(x AS type) is a call of the native function cast_as_<type>.
        Term::Cast { ty, .. } => {
            let name = match ty {
                TypeExpr::Native(n) => format!("cast_as_{}", n.to_ascii_lowercase()),
                _ => String::new(),
            };
            let candidates = functions::signatures(&name, &[])?
                .filter(|c| !c.is_empty())
                .ok_or_else(|| {
                    QueryError::Invalid(format!(
                        "{} cannot be cast to {}",
                        texts[0],
                        name.trim_start_matches("cast_as_")
                    ))
                })?;
            (
                format!("system.{name}"),
                Cow::Owned(candidates),
                CallKind::Function,
            )
        }
        Term::FunctionCall { keyspace, name, .. } => {
            let lower = name.as_str().to_ascii_lowercase();
            let called = match keyspace {
                Some(ks) => format!("{}.{}", ks.as_str(), name.as_str()),
                None => name.as_str().to_string(),
            };
            if keyspace.as_ref().is_some_and(|k| k.as_str() != "system") {
                return Err(unknown_function(&called));
            }
            if let Some(refusal) = aggregate_refusal(&lower, &kinds, texts) {
                return Err(refusal);
            }
            let candidates = match lower.as_str() {
                "token" => {
                    return Err(QueryError::Invalid(
                        "token() of values in a term is not supported yet by Helenus".to_string(),
                    ))
                }
                "tojson" | "to_json" => match kinds.as_slice() {
                    [ArgKind::Typed(t)] => vec![Signature::to_json(&lower, t.clone())],
                    [ArgKind::Literal(c)] => {
                        vec![Signature::to_json(&lower, arguments::preferred_type(c))]
                    }
                    _ => {
                        return Err(QueryError::Invalid(format!(
                            "Cannot infer type of argument {} in call to function {called}",
                            texts.first().map(String::as_str).unwrap_or("")
                        )))
                    }
                },
                _ if functions::is_generic(&lower) => {
                    let mut kinds = kinds.clone();
                    CollectionFunction::infer_literal_arguments(
                        &lower,
                        &mut kinds,
                        args.iter().map(|a| Some(*a)),
                        false,
                    );
                    vec![generic_signature_for(&lower, &kinds, texts, receiver)?]
                }
                _ => match functions::signatures(&lower, &[])? {
                    Some(candidates) => candidates,
                    None => return Err(unknown_function(&called)),
                },
            };
            (called, Cow::Owned(candidates), CallKind::Function)
        }
        _ => return Ok(None),
    };
    functions::resolve_for_receiver(
        &called,
        &candidates,
        &kinds,
        texts,
        receiver,
        kind,
        has_markers,
    )
    .map(Some)
}

/// Cassandra's refusal of a function it does not know, in a term (`FunctionCall.Raw`).
fn unknown_function(called: &str) -> QueryError {
    QueryError::Invalid(format!("Unknown function {called} called"))
}

/// Cassandra resolves an aggregate called in a term like any function, then refuses it
/// (`FunctionCall.Raw.prepare`): a call that matches none of the aggregate's signatures gets
/// the resolution's error, one that matches gets the refusal. `None` for other functions.
fn aggregate_refusal(name: &str, kinds: &[ArgKind], texts: &[String]) -> Option<QueryError> {
    let invalid = |m: String| Some(QueryError::Invalid(m));
    // The numeric types of `sum` and `avg`, in the order Cassandra 5.0 lists them.
    let numeric_signatures = |types: &[&str]| {
        types
            .iter()
            .map(|t| format!("system.{name} : ({t}) -> {t}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let numeric_literal = |kind: &ArgKind| match kind {
        ArgKind::Literal(c) => matches!(
            c,
            Constant::Integer(_)
                | Constant::Float(_)
                | Constant::NaN
                | Constant::Infinity
                | Constant::NegInfinity
        ),
        ArgKind::Typed(t) => matches!(
            t,
            CqlType::Tinyint
                | CqlType::Smallint
                | CqlType::Int
                | CqlType::Bigint
                | CqlType::Varint
                | CqlType::Float
                | CqlType::Double
                | CqlType::Decimal
                | CqlType::Counter
        ),
        ArgKind::Any => true,
        ArgKind::Collection(_) => false,
    };
    let refused =
        || invalid("Aggregation function are not supported in the where clause".to_string());
    match name {
        "max" | "min" if kinds.len() != 1 => invalid(format!(
            "Invalid number of arguments for function system.{name}(any)"
        )),
        "max" | "min" => refused(),
        "count" if kinds.len() != 1 => invalid(format!(
            "Invalid number of arguments in call to function system.count: 1 required but {} provided",
            kinds.len()
        )),
        // Cassandra's count(x) of a term takes a blob.
        "count" => match &kinds[0] {
            ArgKind::Literal(Constant::Hex(_)) | ArgKind::Any | ArgKind::Typed(CqlType::Blob) => {
                refused()
            }
            _ => invalid(format!(
                "Type error: {} cannot be passed as argument 0 of function system.count of type blob",
                texts[0]
            )),
        },
        "sum" | "avg" if kinds.len() == 1 && numeric_literal(&kinds[0]) => refused(),
        "sum" => invalid(format!(
            "Invalid call to function sum, none of its type signatures match (known type signatures: {})",
            numeric_signatures(&[
                "bigint", "varint", "counter", "tinyint", "smallint", "int", "decimal", "float",
                "double"
            ])
        )),
        "avg" => invalid(format!(
            "Invalid call to function avg, none of its type signatures match (known type signatures: {})",
            numeric_signatures(&[
                "float", "double", "bigint", "decimal", "tinyint", "smallint", "varint", "counter",
                "int"
            ])
        )),
        _ => None,
    }
}

/// Cassandra's name for the bind marker (and errors) of argument `i` of a call.
pub(crate) fn argument_name(sig: &Signature, i: usize) -> String {
    format!("arg{i}(system.{})", sig.name)
}

/// Whether a result of type `result` can be stored in a receiver of type `receiver`, and
/// Cassandra's message when it cannot.
pub(crate) fn check_result(
    sig: &Signature,
    receiver_name: &str,
    receiver: &CqlType,
) -> Result<(), QueryError> {
    if type_match::same_type(&sig.ret, receiver) || type_match::value_compatible(receiver, &sig.ret)
    {
        return Ok(());
    }
    Err(QueryError::Invalid(format!(
        "Type error: cannot assign result of function system.{} (type {}) to {receiver_name} (type {receiver})",
        sig.name, sig.ret
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cql_syntax::ast::{BinaryOp, Constant};

    fn int(s: &str) -> Term {
        Term::Constant(Constant::Integer(s.to_string()))
    }

    #[test]
    fn operations_on_literals_take_the_receiver_type() {
        let sum = Term::Binary {
            op: BinaryOp::Add,
            lhs: Box::new(int("5")),
            rhs: Box::new(int("1")),
        };
        let sig = Resolver::default()
            .resolve(&sum, Some(&CqlType::Bigint))
            .expect("resolves")
            .expect("a call");
        assert_eq!(sig.args, vec![CqlType::Bigint, CqlType::Bigint]);
        let sig = Resolver::default()
            .resolve(&sum, Some(&CqlType::Int))
            .expect("resolves")
            .expect("a call");
        assert_eq!(sig.ret, CqlType::Int);
        // With a marker there is no receiver rule.
        let with_marker = Term::Binary {
            op: BinaryOp::Add,
            lhs: Box::new(Term::BindMarker(cql_syntax::ast::BindMarker {
                index: 0,
                name: None,
            })),
            rhs: Box::new(int("1")),
        };
        let err = Resolver::default()
            .resolve(&with_marker, Some(&CqlType::Int))
            .expect_err("ambiguous");
        assert!(err.to_string().starts_with("Ambiguous '+' operation"));
    }

    /// Resolves every call of `t` top-down for a receiver of type `ty`, as bind and eval do.
    fn walk<'t>(resolver: &mut Resolver<'t>, t: &'t Term, ty: &CqlType) {
        if let Ok(Some(sig)) = resolver.resolve(t, Some(ty)) {
            let args = call_arguments(t).unwrap_or_default();
            for (arg, param) in args.into_iter().zip(&sig.args) {
                walk(resolver, arg, param);
            }
        }
    }

    #[test]
    fn a_walk_resolves_each_call_a_bounded_number_of_times() {
        // Each call of a walk used to resolve every call below it again: n²/2 resolutions
        // for a chain of n operations (and cubic work with the argument texts).
        for text in [
            vec!["1"; 60].join(" + "),
            vec!["2"; 60].join(" * "),
            format!("{}1{}", "abs(".repeat(31), ")".repeat(31)),
            format!("{}1{}", "-(".repeat(31), ")".repeat(31)),
            format!("{}(int)1{}", "cast(".repeat(60), " as int)".repeat(60)),
        ] {
            let term = cql_syntax::parse_term(&text).expect("parses");
            let mut calls = 0;
            let mut t = &term;
            while let Some(args) = call_arguments(t) {
                calls += 1;
                t = match args[..] {
                    [first, ..] => match first {
                        Term::Tuple(items) if items.len() == 1 => &items[0],
                        other => other,
                    },
                    [] => break,
                };
            }
            let mut resolver = Resolver::default();
            walk(&mut resolver, &term, &CqlType::Int);
            assert!(calls >= 30, "{text}: {calls} calls");
            assert!(
                resolver.resolutions <= 2 * calls,
                "{text}: {} resolutions of {calls} calls",
                resolver.resolutions
            );
        }
    }
}
