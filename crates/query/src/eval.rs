//! Term evaluation: a term of the statement, with its bound values, becomes the serialised
//! value of a given type.

use cql_syntax::ast::{Constant, Identifier, Term};
use types::{CqlType, Literal, Value};

use crate::bind::{marker_value, Bound};
use crate::interface::BoundValue;
use crate::select::functions;
use crate::select::term_functions::{self, Resolver};
use crate::select::term_text::constant_text;
use crate::QueryError;

/// A term's value: absent (null), deliberately not set (protocol v4 UNSET), or bytes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TermValue {
    Null,
    Unset,
    Value(Vec<u8>),
}

/// Nesting bound for terms evaluated. The parser already bounds every tree it builds to this
/// depth; the check keeps evaluation's recursion bounded for terms built elsewhere too (a
/// selection's literals, `as_term`).
const MAX_TERM_DEPTH: usize = cql_syntax::MAX_NESTING_DEPTH as usize;

pub(crate) fn literal(c: &Constant) -> Literal {
    match c {
        Constant::String(s) => Literal::String(s.clone()),
        Constant::Integer(s) => Literal::Integer(s.clone()),
        Constant::Float(s) => Literal::Float(s.clone()),
        Constant::Boolean(b) => Literal::Boolean(*b),
        Constant::Uuid(s) => Literal::Uuid(s.clone()),
        Constant::Hex(s) => Literal::Hex(s.clone()),
        Constant::Duration(s) => Literal::Duration(s.clone()),
        Constant::NaN => Literal::NaN,
        Constant::Infinity => Literal::Infinity,
        Constant::NegInfinity => Literal::NegInfinity,
    }
}

fn constant_kind(c: &Constant) -> &'static str {
    match c {
        Constant::String(_) => "STRING",
        Constant::Integer(_) => "INTEGER",
        Constant::Float(_) | Constant::NaN | Constant::Infinity | Constant::NegInfinity => "FLOAT",
        Constant::Boolean(_) => "BOOLEAN",
        Constant::Uuid(_) => "UUID",
        Constant::Hex(_) => "HEX",
        Constant::Duration(_) => "DURATION",
    }
}

/// Cassandra's checks of a type hint `(type)term` given to a receiver of type `receiver`
/// (`TypeCast.prepare`): the term must be assignable to the hinted type, and the hinted type to
/// the receiver (equal, or its values valid values of the receiver); the term is then read as
/// a value of the receiver. A hint of a type other than a native one is only read through.
fn check_type_hint(
    whole: &Term,
    hint: &cql_syntax::ast::TypeExpr,
    inner: &Term,
    receiver: &CqlType,
    name: &str,
) -> Result<(), QueryError> {
    let cql_syntax::ast::TypeExpr::Native(native) = hint else {
        return Ok(());
    };
    let Some(hinted) = CqlType::from_native_name(&native.to_ascii_lowercase()) else {
        return Ok(());
    };
    if !assignable_to(inner, &hinted) {
        return Err(QueryError::Invalid(format!(
            "Cannot cast value {inner} to type {hint}"
        )));
    }
    let receiver = receiver.unfrozen();
    if *receiver != hinted && !receiver.is_value_compatible_with(&hinted) {
        return Err(QueryError::Invalid(format!(
            "Cannot assign value {whole} to {name} of type {receiver}"
        )));
    }
    Ok(())
}

/// Whether `term` may be given where a value of type `ty` is expected, as far as its own type
/// tells (Cassandra's `testAssignment`): a literal by its kind, a type hint by its type, a
/// function call by its return type. Anything else is left for its evaluation to check.
fn assignable_to(term: &Term, ty: &CqlType) -> bool {
    let compatible = |given: &CqlType| given == ty || ty.is_value_compatible_with(given);
    match term {
        Term::Constant(c) => {
            functions::literal_assignment(c, ty) != functions::Assignment::NotAssignable
        }
        Term::TypeHint {
            ty: cql_syntax::ast::TypeExpr::Native(native),
            ..
        } => CqlType::from_native_name(&native.to_ascii_lowercase())
            .is_none_or(|given| compatible(&given)),
        Term::FunctionCall { .. } | Term::Binary { .. } | Term::Negate(_) | Term::Cast { .. } => {
            match term_functions::Resolver::default().resolve(term, Some(ty)) {
                Ok(Some(signature)) => compatible(&signature.ret),
                _ => true,
            }
        }
        _ => true,
    }
}

/// Evaluates `term` as a value of `ty` for the column (or variable) called `name`.
pub(crate) fn evaluate(
    term: &Term,
    ty: &CqlType,
    name: &str,
    values: &[Bound],
) -> Result<TermValue, QueryError> {
    let mut cx = Eval {
        values,
        calls: Resolver::default(),
    };
    evaluate_at(term, ty, name, &mut cx, 0)
}

/// What one evaluation of a term carries down its tree.
struct Eval<'v, 't> {
    values: &'v [Bound],
    /// The term's calls, each resolved once (`Resolver`), so an evaluation takes time linear
    /// in the term's size.
    calls: Resolver<'t>,
}

fn evaluate_at<'t>(
    term: &'t Term,
    ty: &CqlType,
    name: &str,
    cx: &mut Eval<'_, 't>,
    depth: usize,
) -> Result<TermValue, QueryError> {
    if depth > MAX_TERM_DEPTH {
        return Err(QueryError::Invalid("Term nesting is too deep".to_string()));
    }
    let ty_unfrozen = ty.unfrozen();
    match term {
        Term::Null => Ok(TermValue::Null),
        Term::BindMarker(m) => Ok(match marker_value(m, cx.values)? {
            BoundValue::Null => TermValue::Null,
            BoundValue::Unset => TermValue::Unset,
            BoundValue::Value(b) => TermValue::Value(b.to_vec()),
        }),
        Term::Constant(c) => constant(c, ty, name),
        Term::List(items) => list_literal(items, ty, name, cx, depth),
        Term::Set(items) => match ty_unfrozen {
            CqlType::Set(elem) => Ok(TermValue::Value(encode_elements(
                items, elem, name, cx, depth, true,
            )?)),
            // `{}` is an empty set or an empty map, depending on the receiver.
            CqlType::Map(_, _) if items.is_empty() => Ok(TermValue::Value(vec![0, 0, 0, 0])),
            _ => Err(type_mismatch("set literal", name, ty)),
        },
        Term::Map(entries) => map_literal(entries, ty, name, cx, depth),
        // `(x)` for a receiver that is not a tuple is `x` in parentheses (`-(1)`).
        Term::Tuple(items) if items.len() == 1 && !matches!(ty_unfrozen, CqlType::Tuple(_)) => {
            evaluate_at(&items[0], ty, name, cx, depth + 1)
        }
        Term::Tuple(items) => match ty_unfrozen {
            CqlType::Tuple(types) => {
                if items.len() > types.len() {
                    return Err(QueryError::Invalid(format!(
                        "Invalid tuple literal for {name}: too many elements. Type {ty} expects {} but got {}",
                        types.len(),
                        items.len()
                    )));
                }
                // Cassandra's test before evaluating: a constant the component's type cannot
                // take is refused in the literal's words.
                for (i, (item, ty)) in items.iter().zip(types).enumerate() {
                    if let Term::Constant(c) = item {
                        if functions::literal_assignment(c, ty)
                            == functions::Assignment::NotAssignable
                        {
                            return Err(QueryError::Invalid(format!(
                                "Invalid tuple literal for {name}: component {i} is not of type {ty}"
                            )));
                        }
                    }
                }
                let mut out = Vec::new();
                for (i, (item, ty)) in items.iter().zip(types).enumerate() {
                    // Each component is named `t[i]`, as Cassandra names its receiver.
                    let component = format!("{name}[{i}]");
                    match evaluate_at(item, ty, &component, cx, depth + 1)? {
                        TermValue::Unset => {
                            return Err(QueryError::Invalid(format!(
                                "Invalid unset value for tuple field number {i}"
                            )))
                        }
                        value => write_optional(&mut out, value),
                    }
                }
                Ok(TermValue::Value(out))
            }
            _ => Err(type_mismatch("tuple literal", name, ty)),
        },
        Term::UserType(fields) => user_type_literal(fields, ty, name, cx, depth),
        Term::TypeHint {
            ty: hint,
            term: inner,
        } => {
            check_type_hint(term, hint, inner, ty, name)?;
            evaluate_at(inner, ty, name, cx, depth + 1)
        }
        Term::FunctionCall { args, .. } if term_functions::is_from_json(term) => {
            from_json(args, ty, name, cx, depth)
        }
        Term::FunctionCall { .. } | Term::Binary { .. } | Term::Negate(_) | Term::Cast { .. } => {
            call(term, ty, name, cx, depth)
        }
    }
}

/// A constant as a value of `ty`, with Cassandra's messages for one that is not.
fn constant(c: &Constant, ty: &CqlType, name: &str) -> Result<TermValue, QueryError> {
    let ty_unfrozen = ty.unfrozen();
    let value = Value::from_literal(ty_unfrozen, &literal(c)).map_err(|e| {
        // Cassandra tests the constant's kind against the type first: a kind the type
        // does not take is refused naming both, a value of the right kind that does
        // not parse in the type's own words.
        if functions::literal_assignment(c, ty) != functions::Assignment::NotAssignable {
            if let Some(message) = parse_failure(ty_unfrozen, c) {
                return QueryError::Invalid(message);
            }
            return QueryError::Invalid(e.to_string());
        }
        // Cassandra prints a string constant here without its quotes.
        let text = match c {
            Constant::String(s) => s.clone(),
            other => constant_text(other),
        };
        QueryError::Invalid(format!(
            "Invalid {} constant ({text}) for \"{name}\" of type {ty}{}",
            constant_kind(c),
            detail(&e.to_string())
        ))
    })?;
    let mut out = Vec::new();
    value.encode(&mut out);
    Ok(TermValue::Value(out))
}

/// A list literal as a value of `ty` (a list, a set or a vector).
fn list_literal<'t>(
    items: &'t [Term],
    ty: &CqlType,
    name: &str,
    cx: &mut Eval<'_, 't>,
    depth: usize,
) -> Result<TermValue, QueryError> {
    match ty.unfrozen() {
        CqlType::List(elem) => Ok(TermValue::Value(encode_elements(
            items, elem, name, cx, depth, false,
        )?)),
        CqlType::Set(elem) => Ok(TermValue::Value(encode_elements(
            items, elem, name, cx, depth, true,
        )?)),
        CqlType::Vector(elem, dimension) => {
            if items.len() != *dimension as usize {
                return Err(QueryError::Invalid(format!(
                    "Invalid vector literal for {name} of type {ty}; expected {dimension} elements, but given {}",
                    items.len()
                )));
            }
            let mut decoded = Vec::with_capacity(items.len());
            for item in items {
                match evaluate_at(item, elem, name, cx, depth + 1)? {
                    TermValue::Value(b) => decoded.push(Value::decode(elem, &b)?),
                    _ => {
                        return Err(QueryError::Invalid(
                            "null is not supported inside vectors".to_string(),
                        ))
                    }
                }
            }
            let mut out = Vec::new();
            Value::Vector(decoded).encode(&mut out);
            Ok(TermValue::Value(out))
        }
        _ => Err(type_mismatch("list literal", name, ty)),
    }
}

/// A map literal as a value of `ty` (a map, or an empty set or user type).
fn map_literal<'t>(
    entries: &'t [(Term, Term)],
    ty: &CqlType,
    name: &str,
    cx: &mut Eval<'_, 't>,
    depth: usize,
) -> Result<TermValue, QueryError> {
    match ty.unfrozen() {
        CqlType::Map(kt, vt) => {
            let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(entries.len());
            for (k, v) in entries {
                let k = non_null(evaluate_at(k, kt, name, cx, depth + 1)?, "map keys")?;
                let v = non_null(evaluate_at(v, vt, name, cx, depth + 1)?, "map values")?;
                pairs.push((k, v));
            }
            pairs.sort_by(|a, b| types::compare(kt, &a.0, &b.0));
            pairs.dedup_by(|later, earlier| {
                if types::compare(kt, &later.0, &earlier.0).is_eq() {
                    // The last occurrence of a key wins, as in Cassandra.
                    std::mem::swap(&mut earlier.1, &mut later.1);
                    true
                } else {
                    false
                }
            });
            let mut out = Vec::new();
            out.extend_from_slice(&(pairs.len() as i32).to_be_bytes());
            for (k, v) in pairs {
                out.extend_from_slice(&(k.len() as i32).to_be_bytes());
                out.extend_from_slice(&k);
                out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                out.extend_from_slice(&v);
            }
            Ok(TermValue::Value(out))
        }
        CqlType::Udt(_) if entries.is_empty() => Ok(TermValue::Value(Vec::new())),
        CqlType::Set(_) if entries.is_empty() => Ok(TermValue::Value(vec![0, 0, 0, 0])),
        _ => Err(type_mismatch("map literal", name, ty)),
    }
}

/// A user type literal as a value of `ty`.
fn user_type_literal<'t>(
    fields: &'t [(Identifier, Term)],
    ty: &CqlType,
    name: &str,
    cx: &mut Eval<'_, 't>,
    depth: usize,
) -> Result<TermValue, QueryError> {
    match ty.unfrozen() {
        CqlType::Udt(udt) => {
            for (field, _) in fields {
                if !udt.fields.iter().any(|(n, _)| n == field.as_str()) {
                    return Err(QueryError::Invalid(format!(
                        "Unknown field '{}' in value of user defined type {}",
                        field.as_str(),
                        udt.name
                    )));
                }
            }
            // Cassandra's test before evaluating: a constant that cannot be the field's
            // type is refused in the literal's words.
            for (field, t) in fields {
                let fty = udt.fields.iter().find(|(n, _)| n == field.as_str());
                if let (Term::Constant(c), Some((_, fty))) = (t, fty) {
                    let assignment = functions::literal_assignment(c, fty);
                    if assignment == functions::Assignment::NotAssignable {
                        return Err(QueryError::Invalid(format!(
                            "Invalid user type literal for {name}: field {} is not of type {fty}",
                            field.as_str()
                        )));
                    }
                }
            }
            let frozen = matches!(ty, CqlType::Frozen(_));
            let mut out = Vec::new();
            for (fname, fty) in &udt.fields {
                let value = match fields.iter().find(|(f, _)| f.as_str() == fname) {
                    Some((_, t)) => evaluate_at(t, fty, fname, cx, depth + 1)?,
                    None => TermValue::Null,
                };
                // A frozen value is one cell: no field of it can be left unset. A non-frozen
                // UDT's unset field is written as no value, as Cassandra does.
                if frozen && value == TermValue::Unset {
                    return Err(QueryError::Invalid(format!(
                        "Invalid unset value for field '{fname}' of user defined type {}",
                        udt.name
                    )));
                }
                write_optional(&mut out, value);
            }
            Ok(TermValue::Value(out))
        }
        _ => Err(type_mismatch("user type literal", name, ty)),
    }
}

/// A function call or operation in a term: resolved for the receiver's type, its arguments
/// evaluated as the chosen signature's parameters, then run as in a selection.
fn call<'t>(
    term: &'t Term,
    ty: &CqlType,
    name: &str,
    cx: &mut Eval<'_, 't>,
    depth: usize,
) -> Result<TermValue, QueryError> {
    let sig = cx
        .calls
        .resolve(term, Some(ty))?
        .ok_or_else(|| QueryError::Server("a call term expected".to_string()))?;
    term_functions::check_result(&sig, name, ty)?;
    let args = term_functions::call_arguments(term).unwrap_or_default();
    let mut evaluated = Vec::with_capacity(args.len());
    for (i, (arg, param)) in args.iter().zip(&sig.args).enumerate() {
        let arg_name = term_functions::argument_name(&sig, i);
        evaluated.push(match evaluate_at(arg, param, &arg_name, cx, depth + 1)? {
            TermValue::Value(b) => Some(b),
            TermValue::Null => None,
            TermValue::Unset => {
                return Err(QueryError::Invalid(format!(
                    "Invalid unset value for argument in call to function {}",
                    sig.name
                )))
            }
        });
    }
    Ok(match functions::call(&sig, &evaluated)? {
        Some(b) => TermValue::Value(b),
        None => TermValue::Null,
    })
}

/// Cassandra's message for a constant of a kind `ty` takes that does not parse as one, where
/// its type's `fromString` words it differently from Helenus's shared literal parser (which
/// CAST and JSON also use, with their own words); `None` where they agree.
fn parse_failure(ty: &CqlType, c: &Constant) -> Option<String> {
    let text = match c {
        Constant::String(s) | Constant::Integer(s) | Constant::Float(s) => s.as_str(),
        Constant::Hex(h) => {
            return matches!(ty, CqlType::Blob).then(|| format!("cannot parse '{h}' as hex bytes"))
        }
        _ => return None,
    };
    Some(match ty {
        CqlType::Tinyint => format!("Unable to make byte from '{text}'"),
        CqlType::Smallint => format!("Unable to make short from '{text}'"),
        // Of a string only: a number goes through `Long.parseLong`, as Helenus words it.
        CqlType::Timestamp if matches!(c, Constant::String(_)) => {
            format!("Unable to parse a date/time from '{text}'")
        }
        CqlType::Time if matches!(c, Constant::String(_)) => {
            format!("(TimeType) Unable to coerce '{text}' to a formatted time (long)")
        }
        CqlType::Ascii => {
            // Java's decoder reports the UTF-16 length of the first character it cannot map.
            let bad = text.chars().find(|c| !c.is_ascii())?;
            format!(
                "Invalid ASCII character in string literal: java.nio.charset.UnmappableCharacterException: Input length = {}",
                bad.len_utf16()
            )
        }
        _ => return None,
    })
}

fn detail(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

fn type_mismatch(what: &str, name: &str, ty: &CqlType) -> QueryError {
    QueryError::Invalid(format!("Invalid {what} for {name} of type {ty}"))
}

/// An element of a collection literal; `_what` names it (map keys, sets...) for the reader,
/// Cassandra's message does not.
fn non_null(v: TermValue, _what: &str) -> Result<Vec<u8>, QueryError> {
    match v {
        TermValue::Value(b) => Ok(b),
        TermValue::Null => Err(QueryError::Invalid(
            "null is not supported inside collections".to_string(),
        )),
        TermValue::Unset => Err(QueryError::Invalid(
            "unset value is not supported inside collections".to_string(),
        )),
    }
}

fn write_optional(out: &mut Vec<u8>, v: TermValue) {
    match v {
        TermValue::Value(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(&b);
        }
        TermValue::Null | TermValue::Unset => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

/// Serialises list/set elements ([int] count, then [int]-length-prefixed elements); sets are
/// sorted by the element type's order and deduplicated, as Cassandra stores them.
fn encode_elements<'t>(
    items: &'t [Term],
    elem: &CqlType,
    name: &str,
    cx: &mut Eval<'_, 't>,
    depth: usize,
    is_set: bool,
) -> Result<Vec<u8>, QueryError> {
    let mut encoded = Vec::with_capacity(items.len());
    for item in items {
        encoded.push(non_null(
            evaluate_at(item, elem, name, cx, depth + 1)?,
            if is_set { "sets" } else { "lists" },
        )?);
    }
    if is_set {
        encoded.sort_by(|a, b| types::compare(elem, a, b));
        encoded.dedup_by(|a, b| types::compare(elem, a, b).is_eq());
    }
    let mut out = Vec::new();
    out.extend_from_slice(&(encoded.len() as i32).to_be_bytes());
    for e in encoded {
        out.extend_from_slice(&(e.len() as i32).to_be_bytes());
        out.extend_from_slice(&e);
    }
    Ok(out)
}

/// `fromJson(text)` for a receiver of type `ty`: the JSON text read with the type's JSON rules
/// (`types::json`), as Cassandra's `FromJsonFct` reads it. JSON `null` (or a null argument) is
/// null. JSON that does not parse, or does not fit the type, fails the function at execution:
/// a FUNCTION_FAILURE, as in Cassandra.
fn from_json<'t>(
    args: &'t [Term],
    ty: &CqlType,
    name: &str,
    cx: &mut Eval<'_, 't>,
    depth: usize,
) -> Result<TermValue, QueryError> {
    const FUNCTION: &str = "fromjson";
    if args.len() != 1 {
        return Err(QueryError::Invalid(format!(
            "Invalid number of arguments for function system.{FUNCTION}(text)"
        )));
    }
    if let Term::Constant(c) = &args[0] {
        if !matches!(c, Constant::String(_)) {
            let found = crate::select::arguments::preferred_type(c);
            return Err(QueryError::Invalid(format!(
                "Function system.{FUNCTION} requires an argument of type text, but found argument 1 of type {found}"
            )));
        }
    }
    if ty.is_counter() {
        return Err(QueryError::Invalid(format!(
            "Type error: cannot assign result of function system.{FUNCTION} (type counter) to {name} (type counter)"
        )));
    }
    let text = match evaluate_at(&args[0], &CqlType::Text, name, cx, depth + 1)? {
        TermValue::Value(b) => String::from_utf8(b).map_err(|_| {
            QueryError::Invalid(format!(
                "Invalid argument for function system.{FUNCTION}: not valid UTF-8"
            ))
        })?,
        TermValue::Null => return Ok(TermValue::Null),
        TermValue::Unset => return Ok(TermValue::Unset),
    };
    let fail = |message: String| QueryError::function_failure(FUNCTION, &[CqlType::Text], message);
    let json = first_json_value(&text).map_err(|e| {
        fail(format!(
            "execution of 'system.{FUNCTION}[text]' failed: Could not decode JSON string '{text}': {e}"
        ))
    })?;
    // Cassandra reports a value that does not fit the type with the MarshalException's text.
    let marshal = |e: &dyn std::fmt::Display| {
        fail(format!(
            "org.apache.cassandra.serializers.MarshalException: {e}"
        ))
    };
    let Some(value) = Value::from_json(ty, &json).map_err(|e| marshal(&e))? else {
        return Ok(TermValue::Null);
    };
    let mut bytes = Vec::new();
    value.encode(&mut bytes);
    // Sets and maps are stored sorted and without duplicates, whatever order the JSON had.
    Ok(TermValue::Value(
        types::canonicalize(ty, &bytes)
            .map_err(|e| marshal(&e))?
            .unwrap_or(bytes),
    ))
}

/// The first JSON value of `text`, as Jackson's `readValue` reads it for `fromJson`: what follows
/// the value is ignored, except that a scalar must be followed by a space (`'12 13'` is 12,
/// `'12]'` an error).
fn first_json_value(text: &str) -> Result<serde_json::Value, String> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    let value = match stream.next() {
        Some(Ok(value)) => value,
        Some(Err(e)) => return Err(e.to_string()),
        None => return Err("No content to map due to end-of-input".to_string()),
    };
    let scalar = !(value.is_object() || value.is_array() || value.is_string());
    match text[stream.byte_offset()..].chars().next() {
        Some(c) if scalar && !c.is_whitespace() => Err(format!(
            "Unexpected character ('{c}'): Expected space separating root-level values"
        )),
        _ => Ok(value),
    }
}
