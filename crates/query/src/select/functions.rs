//! The native scalar functions of Cassandra 5.0 that a selection can call, with Cassandra's
//! overload resolution (`FunctionResolver`) and its argument compatibility rules.
//!
//! Every function takes and returns serialised values; a null argument gives a null result
//! (except where a function has no arguments). Names are Cassandra's: the camelCase names of
//! 4.x lowercased (`todate`, `intasblob`) and the snake_case aliases added in 5.0 (`to_date`,
//! `int_as_blob`).

use std::cmp::Ordering;

use cql_syntax::ast::Constant;
use num_bigint::BigInt;
use types::temporal::{civil_from_days, MILLIS_PER_DAY};
use types::{CqlType, Value, DATE_EPOCH};

use super::arguments::{preferred_type, ArgKind, CollectionShape};
use super::collection_functions::CollectionFunction;
use super::masking::MaskFunction;
use super::math::{self, MathFunction};
use super::numbers::{self, Decimal};
use super::type_match::{compatible_other_type, legacy_timeuuid, same_type};
use super::vector_functions::Similarity;
use crate::QueryError;

/// Offset between the UUID epoch (1582-10-15) and the Unix epoch, in 100 ns units.
const UUID_EPOCH_OFFSET_100NS: i64 = 0x01B2_1DD2_1381_4000;
/// `minTimeuuid`/`maxTimeuuid` clock sequence and node: the smallest and largest under
/// Cassandra's timeuuid comparison (`TimeUUID.MIN_CLOCK_SEQ_AND_NODE` / `MAX_...`).
const MIN_CLOCK_SEQ_AND_NODE: u64 = 0x8080_8080_8080_8080;
const MAX_CLOCK_SEQ_AND_NODE: u64 = 0x7f7f_7f7f_7f7f_7f7f;

/// What a scalar function computes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Now,
    Uuid,
    CurrentTimestamp,
    CurrentDate,
    CurrentTime,
    /// `toDate` of a timestamp or timeuuid argument.
    ToDate(CqlType),
    /// `toTimestamp` of a date or timeuuid argument.
    ToTimestamp(CqlType),
    /// `toUnixTimestamp` of a timestamp, date or timeuuid argument.
    ToUnixTimestamp(CqlType),
    MinTimeuuid,
    MaxTimeuuid,
    /// `<type>AsBlob`: the bytes unchanged.
    AsBlob,
    /// `blobAs<type>`: the bytes, validated as the type.
    BlobAs(CqlType),
    /// `CAST(x AS to)` (`cast_as_<to>`).
    Cast {
        from: CqlType,
        to: CqlType,
    },
    /// `token(...)` over values of the partition key's types.
    Token,
    /// `a + b`, `a - b`, `a * b`, `a / b`, `a % b`.
    Operation(super::operations::Operation),
    /// `-a` of a number of this type.
    Negate(CqlType),
    /// `toJson(x)` of a value of this type: its JSON text (`null` for null).
    ToJson(CqlType),
    /// `abs`, `exp`, `log`, `log10`, `round` of a number of this type.
    Math(MathFunction, CqlType),
    /// `map_keys`, `collection_count`, `collection_sum`... of a collection of this type.
    Collection(CollectionFunction, CqlType),
    /// `mask_*` of arguments of these types.
    Mask(MaskFunction, Vec<CqlType>),
    /// `similarity_*` of two vectors of this type.
    Similarity(Similarity, CqlType),
    /// `floor` of arguments of these types.
    Floor(Vec<CqlType>),
}

/// One signature of a function: its name as Cassandra prints it, argument and return types.
#[derive(Debug, Clone)]
pub(crate) struct Signature {
    pub name: String,
    pub args: Vec<CqlType>,
    pub ret: CqlType,
    pub function: Scalar,
}

impl Signature {
    fn new(name: &str, args: Vec<CqlType>, ret: CqlType, function: Scalar) -> Signature {
        Signature {
            name: name.to_string(),
            args,
            ret,
            function,
        }
    }

    /// `toJson` for an argument of type `ty` (Cassandra makes one per argument type).
    pub fn to_json(name: &str, ty: CqlType) -> Signature {
        Signature::new(name, vec![ty.clone()], CqlType::Text, Scalar::ToJson(ty))
    }

    /// `system.todate : (timeuuid) -> date`, as Cassandra lists signatures in errors.
    pub fn describe(&self) -> String {
        let args: Vec<String> = self.args.iter().map(ToString::to_string).collect();
        format!(
            "system.{} : ({}) -> {}",
            self.name,
            args.join(", "),
            self.ret
        )
    }
}

/// Whether a native type has `<type>AsBlob`/`blobAs<type>` functions (all but blob itself).
fn has_blob_functions(name: &str) -> bool {
    name != "blob" && cql_syntax::NATIVE_TYPES.contains(&name)
}

/// Native functions whose signatures follow their arguments' types (any collection, any
/// type, any float vector), so they are made for the arguments of a call
/// (`generic_signature`) rather than listed.
pub(crate) fn is_generic(name: &str) -> bool {
    CollectionFunction::from_name(name).is_some()
        || MaskFunction::from_name(name).is_some()
        || Similarity::from_name(name).is_some()
}

/// The signature of the generic function `name` for the arguments `args` (written `texts`):
/// its parameters take the first typed argument's type, as Cassandra's factories do.
pub(crate) fn generic_signature(
    name: &str,
    args: &[ArgKind],
    texts: &[String],
) -> Result<Signature, QueryError> {
    generic_signature_for(name, args, texts, None)
}

/// `generic_signature` in a term whose receiver has type `receiver`: a masking function's
/// argument type is a literal's preferred type, or else the receiver's (`mask_replace(?, ?)`
/// into an int), as Cassandra's function factories infer it.
pub(crate) fn generic_signature_for(
    name: &str,
    args: &[ArgKind],
    texts: &[String],
    receiver: Option<&CqlType>,
) -> Result<Signature, QueryError> {
    let typed = |i: usize| match args.get(i) {
        Some(ArgKind::Typed(t)) => Some(t.clone()),
        _ => None,
    };
    let cannot_infer = |i: usize, kinds: &str| {
        QueryError::Invalid(format!(
            "Cannot infer type of argument {} in call to function system.{name}({kinds}): use type casts to disambiguate",
            texts.get(i).map(String::as_str).unwrap_or("")
        ))
    };
    let arity = |n: usize| {
        QueryError::Invalid(format!(
            "Invalid number of arguments for function system.{name}: {n} required but {} provided",
            args.len()
        ))
    };
    if let Some(f) = CollectionFunction::from_name(name) {
        if args.len() != 1 {
            return Err(arity(1));
        }
        let arg = typed(0).ok_or_else(|| cannot_infer(0, f.argument_kind()))?;
        let ret = f.result_type(name, &arg, &texts[0])?;
        return Ok(Signature::new(
            name,
            vec![arg.clone()],
            ret,
            Scalar::Collection(f, arg),
        ));
    }
    if let Some(f) = MaskFunction::from_name(name) {
        let from_literal = match args.first() {
            Some(ArgKind::Literal(c)) => Some(preferred_type(c)),
            _ => None,
        };
        let from_receiver = receiver.filter(|_| f.returns_argument_type()).cloned();
        let arg = typed(0)
            .or(from_literal)
            .or(from_receiver)
            .ok_or_else(|| cannot_infer(0, f.argument_kinds()))?;
        let (params, ret) = f.signature(name, &arg, args.len(), &texts[0])?;
        return Ok(Signature::new(
            name,
            params.clone(),
            ret,
            Scalar::Mask(f, params),
        ));
    }
    if let Some(f) = Similarity::from_name(name) {
        if args.len() != 2 {
            return Err(arity(2));
        }
        let (i, arg) = match (typed(0), typed(1)) {
            (Some(t), _) => (0, t),
            (None, Some(t)) => (1, t),
            (None, None) => return Err(cannot_infer(0, "vector<float, n>, vector<float, n>")),
        };
        let param = Similarity::parameter(name, &arg, &texts[i])?;
        if let Some(other) = typed(1 - i) {
            Similarity::parameter(name, &other, &texts[1 - i])?;
            if !same_type(&other, &param) {
                return Err(QueryError::Invalid(
                    "All arguments must have the same vector dimensions".to_string(),
                ));
            }
        }
        return Ok(Signature::new(
            name,
            vec![param.clone(), param.clone()],
            CqlType::Float,
            Scalar::Similarity(f, param),
        ));
    }
    Err(QueryError::Server(format!(
        "{name} is not a generic function"
    )))
}

/// The signatures of the scalar function called `name` (already case-normalised), `None` when
/// there is no such native function. `key_types` are the table's partition key types, for
/// `token`.
pub(crate) fn signatures(
    name: &str,
    key_types: &[CqlType],
) -> Result<Option<Vec<Signature>>, QueryError> {
    use CqlType::*;
    let one = |ret: CqlType, f: Scalar| Some(vec![Signature::new(name, vec![], ret, f)]);
    let out = match name {
        "now" | "currenttimeuuid" | "current_timeuuid" => one(Timeuuid, Scalar::Now),
        "uuid" => one(Uuid, Scalar::Uuid),
        "currenttimestamp" | "current_timestamp" => one(Timestamp, Scalar::CurrentTimestamp),
        "currentdate" | "current_date" => one(Date, Scalar::CurrentDate),
        "currenttime" | "current_time" => one(Time, Scalar::CurrentTime),
        "todate" | "to_date" => Some(
            [Timeuuid, Timestamp]
                .into_iter()
                .map(|t| Signature::new(name, vec![t.clone()], Date, Scalar::ToDate(t)))
                .collect(),
        ),
        "totimestamp" | "to_timestamp" => Some(
            [Timeuuid, Date]
                .into_iter()
                .map(|t| Signature::new(name, vec![t.clone()], Timestamp, Scalar::ToTimestamp(t)))
                .collect(),
        ),
        "tounixtimestamp" | "to_unix_timestamp" => Some(
            [Timeuuid, Timestamp, Date]
                .into_iter()
                .map(|t| Signature::new(name, vec![t.clone()], Bigint, Scalar::ToUnixTimestamp(t)))
                .collect(),
        ),
        "mintimeuuid" | "min_timeuuid" => Some(vec![Signature::new(
            name,
            vec![Timestamp],
            Timeuuid,
            Scalar::MinTimeuuid,
        )]),
        "maxtimeuuid" | "max_timeuuid" => Some(vec![Signature::new(
            name,
            vec![Timestamp],
            Timeuuid,
            Scalar::MaxTimeuuid,
        )]),
        "token" => Some(vec![Signature::new(
            name,
            key_types.to_vec(),
            Bigint,
            Scalar::Token,
        )]),
        "floor" => Some(
            super::floor::signatures()
                .into_iter()
                .map(|(args, ret)| Signature::new(name, args.clone(), ret, Scalar::Floor(args)))
                .collect(),
        ),
        "abs" | "exp" | "log" | "log10" | "round" => {
            let f = MathFunction::from_name(name).expect("a math function name");
            Some(
                math::NUMERIC_TYPES
                    .iter()
                    .map(|t| {
                        Signature::new(name, vec![t.clone()], t.clone(), Scalar::Math(f, t.clone()))
                    })
                    .collect(),
            )
        }
        _ => {
            // (The legacy `castAsInt` names are camelCase, which no unquoted name can match.)
            if let Some(to) = name.strip_prefix("cast_as_") {
                // `varchar` is a type name but has no cast function of its own.
                return Ok(CqlType::from_native_name(to)
                    .filter(|_| has_blob_functions(to) && to != "varchar")
                    .map(|to| cast_signatures(name, &to)));
            }
            let as_blob = name
                .strip_suffix("_as_blob")
                .or_else(|| name.strip_suffix("asblob"));
            let blob_as = name
                .strip_prefix("blob_as_")
                .or_else(|| name.strip_prefix("blobas"));
            match (as_blob, blob_as) {
                (Some(t), _) if has_blob_functions(t) => {
                    let ty = CqlType::from_native_name(t).expect("a native type name");
                    Some(vec![Signature::new(name, vec![ty], Blob, Scalar::AsBlob)])
                }
                (_, Some(t)) if has_blob_functions(t) => {
                    let ty = CqlType::from_native_name(t).expect("a native type name");
                    let ret = if ty == Timeuuid {
                        legacy_timeuuid()
                    } else {
                        ty.clone()
                    };
                    Some(vec![Signature::new(
                        name,
                        vec![Blob],
                        ret,
                        Scalar::BlobAs(ty),
                    )])
                }
                _ => None,
            }
        }
    };
    Ok(out)
}

/// The numeric types Cassandra's casts convert between (`CastFcts.numericTypes`).
fn is_cast_numeric(t: &CqlType) -> bool {
    matches!(
        t,
        CqlType::Tinyint
            | CqlType::Smallint
            | CqlType::Int
            | CqlType::Bigint
            | CqlType::Float
            | CqlType::Double
            | CqlType::Decimal
            | CqlType::Counter
            | CqlType::Varint
    )
}

/// Every `CAST(x AS to)` conversion Cassandra 5.0 defines (`CastFcts`).
fn cast_signatures(name: &str, to: &CqlType) -> Vec<Signature> {
    use CqlType::*;
    let numeric = [
        Tinyint, Smallint, Int, Bigint, Float, Double, Decimal, Counter, Varint,
    ];
    let from: Vec<CqlType> = match to {
        Tinyint | Smallint | Int | Bigint | Float | Double | Decimal | Varint => {
            numeric.iter().filter(|t| *t != to).cloned().collect()
        }
        Ascii => numeric
            .iter()
            .cloned()
            .chain([Inet, Boolean, Timeuuid, Timestamp, Date, Time, Uuid])
            .collect(),
        Text => numeric
            .iter()
            .cloned()
            .chain([Ascii, Inet, Boolean, Timeuuid, Timestamp, Date, Time, Uuid])
            .collect(),
        Date => vec![Timeuuid, Timestamp],
        Timestamp => vec![Timeuuid, Date],
        _ => Vec::new(),
    };
    from.into_iter()
        .map(|f| {
            Signature::new(
                name,
                vec![f.clone()],
                to.clone(),
                Scalar::Cast {
                    from: f,
                    to: to.clone(),
                },
            )
        })
        .collect()
}

/// The CQL name of a cast's target (`cast_as_<name>`).
pub(crate) fn cast_function_name(to: &CqlType) -> String {
    format!("cast_as_{to}")
}

/// Cassandra's `AssignmentTestable.TestResult`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Assignment {
    NotAssignable,
    WeaklyAssignable,
    ExactMatch,
}

/// Cassandra's `Constants.Literal.testAssignment`.
pub(crate) fn literal_assignment(c: &Constant, receiver: &CqlType) -> Assignment {
    use CqlType::*;
    let receiver = receiver.unfrozen();
    if receiver.native_name().is_none() {
        return Assignment::NotAssignable;
    }
    if preferred_type(c) == *receiver {
        return Assignment::ExactMatch;
    }
    let fits = match c {
        Constant::String(_) => matches!(receiver, Ascii | Text | Inet | Date | Time | Timestamp),
        Constant::Integer(_) => matches!(
            receiver,
            Bigint
                | Counter
                | Date
                | Decimal
                | Double
                | Duration
                | Float
                | Int
                | Smallint
                | Time
                | Timestamp
                | Tinyint
                | Varint
        ),
        Constant::Uuid(_) => matches!(receiver, Uuid | Timeuuid),
        Constant::Float(_) | Constant::NaN | Constant::Infinity | Constant::NegInfinity => {
            matches!(receiver, Decimal | Double | Float)
        }
        Constant::Boolean(_) => matches!(receiver, Boolean),
        Constant::Hex(_) => matches!(receiver, Blob),
        Constant::Duration(_) => matches!(receiver, Duration),
    };
    if fits {
        Assignment::WeaklyAssignable
    } else {
        Assignment::NotAssignable
    }
}

/// How well an argument fits a parameter of type `receiver`.
pub(crate) fn test_assignment(arg: &ArgKind, receiver: &CqlType) -> Assignment {
    match arg {
        ArgKind::Typed(t) => typed_assignment(t, receiver),
        ArgKind::Literal(c) => literal_assignment(c, receiver),
        ArgKind::Any => {
            if receiver.is_counter() {
                Assignment::NotAssignable
            } else {
                Assignment::WeaklyAssignable
            }
        }
        ArgKind::Collection(shape) => {
            let fits = matches!(
                (shape, receiver.unfrozen()),
                (
                    CollectionShape::List,
                    CqlType::List(_) | CqlType::Vector(..)
                ) | (CollectionShape::Set, CqlType::Set(_) | CqlType::Map(..))
                    | (CollectionShape::Map, CqlType::Map(..) | CqlType::Udt(_))
                    | (CollectionShape::Tuple, CqlType::Tuple(_))
            );
            if fits {
                Assignment::WeaklyAssignable
            } else {
                Assignment::NotAssignable
            }
        }
    }
}

/// `test_assignment` of a value of type `t`.
fn typed_assignment(t: &CqlType, receiver: &CqlType) -> Assignment {
    if same_type(t, receiver) {
        Assignment::ExactMatch
    } else if compatible_other_type(receiver, t) {
        Assignment::WeaklyAssignable
    } else {
        Assignment::NotAssignable
    }
}

/// Picks the signature `args` call, as Cassandra's `FunctionResolver` does: a single candidate
/// must accept every argument; otherwise an exact match wins, then a single compatible one.
/// `called` is the function name as written, `arg_texts` the arguments' text (for errors).
pub(crate) fn resolve(
    called: &str,
    candidates: &[Signature],
    args: &[ArgKind],
    arg_texts: &[String],
) -> Result<Signature, QueryError> {
    if let [sig] = candidates {
        if sig.args.len() != args.len() {
            return Err(QueryError::Invalid(format!(
                "Invalid number of arguments in call to function system.{}: {} required but {} provided",
                sig.name,
                sig.args.len(),
                args.len()
            )));
        }
        for (i, (arg, param)) in args.iter().zip(&sig.args).enumerate() {
            if test_assignment(arg, param) == Assignment::NotAssignable {
                return Err(QueryError::Invalid(format!(
                    "Type error: {} cannot be passed as argument {i} of function system.{} of type {param}",
                    arg_texts[i], sig.name
                )));
            }
        }
        return Ok(sig.clone());
    }
    match pick(candidates, args) {
        Ok(sig) => Ok(sig),
        Err(compatible) if compatible.is_empty() => Err(QueryError::Invalid(format!(
            "Invalid call to function {called}, none of its type signatures match (known type signatures: {})",
            describe_all(candidates)
        ))),
        Err(compatible) => Err(QueryError::Invalid(format!(
            "Ambiguous call to function {called} (can be matched by following signatures: {}): use type casts to disambiguate",
            describe_all(compatible)
        ))),
    }
}

/// The signatures as errors list them.
fn describe_all<'s>(sigs: impl IntoIterator<Item = &'s Signature>) -> String {
    sigs.into_iter()
        .map(Signature::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Picks the operator signature (`_add`, `_substract`...) two operands call, with Cassandra's
/// messages for operations.
pub(crate) fn resolve_operation(
    symbol: char,
    candidates: &[Signature],
    args: &[ArgKind],
    arg_texts: &[String],
) -> Result<Signature, QueryError> {
    match pick(candidates, args) {
        Ok(sig) => Ok(sig),
        Err(compatible) if compatible.is_empty() => Err(QueryError::Invalid(format!(
            "the '{symbol}' operation is not supported between {} and {}",
            arg_texts[0], arg_texts[1]
        ))),
        Err(_) => Err(QueryError::Invalid(format!(
            "Ambiguous '{symbol}' operation with args {} and {}: use type hint to disambiguate, example '(int) ?'",
            arg_texts[0], arg_texts[1]
        ))),
    }
}

/// What kind of call a term makes, for the messages of its resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    Function,
    /// A binary operator, by its symbol.
    Operation(char),
    Negation,
}

/// Picks the signature a call in a term makes, as Cassandra's `FunctionResolver.get` does when
/// the receiver's type is known: a single candidate must accept the arguments; otherwise only
/// candidates whose result fits the receiver count, an exact match wins, then a single
/// compatible one, and an operation on literals (no bind marker) takes the overload whose
/// operands are both the receiver's type (`INSERT ... VALUES (5 + 1)` into a bigint).
pub(crate) fn resolve_for_receiver(
    called: &str,
    candidates: &[Signature],
    args: &[ArgKind],
    arg_texts: &[String],
    receiver: Option<&CqlType>,
    kind: CallKind,
    has_markers: bool,
) -> Result<Signature, QueryError> {
    if candidates.len() == 1 {
        return resolve(called, candidates, args, arg_texts);
    }
    let fits_receiver = |sig: &Signature| {
        receiver.is_none_or(|r| typed_assignment(&sig.ret, r) != Assignment::NotAssignable)
    };
    // None compatible, or several (ambiguous) from here on.
    let compatible = match pick_where(candidates, args, fits_receiver) {
        Ok(sig) => return Ok(sig),
        Err(compatible) => compatible,
    };
    match (compatible.len(), kind) {
        (0, CallKind::Operation(symbol)) => Err(QueryError::Invalid(format!(
            "the '{symbol}' operation is not supported between {} and {}",
            arg_texts[0], arg_texts[1]
        ))),
        (0, _) => Err(QueryError::Invalid(format!(
            "Invalid call to function {called}, none of its type signatures match (known type signatures: {})",
            describe_all(candidates)
        ))),
        (_, CallKind::Operation(symbol)) => {
            if let (Some(r), false) = (receiver, has_markers) {
                if let Some(sig) = compatible
                    .iter()
                    .find(|s| s.args.iter().all(|a| same_type(a, r)))
                {
                    return Ok((*sig).clone());
                }
            }
            Err(QueryError::Invalid(format!(
                "Ambiguous '{symbol}' operation with args {} and {}: use type hint to disambiguate, example '(int) ?'",
                arg_texts[0], arg_texts[1]
            )))
        }
        (_, CallKind::Negation) => Err(QueryError::Invalid(
            "Ambiguous negation: use type casts to disambiguate".to_string(),
        )),
        (_, CallKind::Function) => Err(QueryError::Invalid(format!(
            "Ambiguous call to function {called} (can be matched by following signatures: {}): use type casts to disambiguate",
            describe_all(compatible)
        ))),
    }
}

/// The exact match among `candidates` if there is one, else the single compatible one; else
/// every compatible candidate (none, or several: ambiguous). Only the one chosen is copied:
/// an operator has some ninety candidates, and every operation of a term is resolved.
fn pick<'s>(
    candidates: &'s [Signature],
    args: &[ArgKind],
) -> Result<Signature, Vec<&'s Signature>> {
    pick_where(candidates, args, |_| true)
}

/// `pick` among the candidates that also pass `also` (tested only on those the arguments fit,
/// the fewer).
fn pick_where<'s>(
    candidates: &'s [Signature],
    args: &[ArgKind],
    also: impl Fn(&Signature) -> bool,
) -> Result<Signature, Vec<&'s Signature>> {
    let mut compatible = Vec::new();
    'candidates: for sig in candidates {
        if sig.args.len() != args.len() {
            continue;
        }
        let mut worst = Assignment::ExactMatch;
        for (a, p) in args.iter().zip(&sig.args) {
            match test_assignment(a, p) {
                Assignment::NotAssignable => continue 'candidates,
                assignment => worst = worst.min(assignment),
            }
        }
        if !also(sig) {
            continue;
        }
        match worst {
            Assignment::ExactMatch => return Ok(sig.clone()),
            Assignment::WeaklyAssignable => compatible.push(sig),
            Assignment::NotAssignable => {}
        }
    }
    if let [sig] = compatible[..] {
        return Ok(sig.clone());
    }
    Err(compatible)
}

/// Runs a scalar function on its (already evaluated) arguments.
pub(crate) fn call(
    sig: &Signature,
    args: &[Option<Vec<u8>>],
) -> Result<Option<Vec<u8>>, QueryError> {
    let encode = |v: Value| {
        let mut out = Vec::new();
        v.encode(&mut out);
        Some(out)
    };
    let now_ms = crate::timeuuid::now_millis;
    match &sig.function {
        Scalar::Now => return Ok(encode(Value::Timeuuid(crate::timeuuid::new_timeuuid()))),
        Scalar::Uuid => return Ok(encode(Value::Uuid(uuid::Uuid::new_v4()))),
        Scalar::CurrentTimestamp => return Ok(encode(Value::Timestamp(now_ms()))),
        Scalar::CurrentDate => return Ok(encode(Value::Date(date_of_millis(now_ms())))),
        Scalar::CurrentTime => {
            return Ok(encode(Value::Time(
                now_ms().rem_euclid(MILLIS_PER_DAY) * 1_000_000,
            )))
        }
        Scalar::Token => {
            let mut parts = Vec::with_capacity(args.len());
            for a in args {
                match a {
                    Some(b) => parts.push(b.as_slice()),
                    None => return Ok(None),
                }
            }
            let key = if parts.len() == 1 {
                parts[0].to_vec()
            } else {
                partitioner::compose_partition_key(&parts)
            };
            return Ok(encode(Value::Bigint(partitioner::murmur3_token(&key))));
        }
        // mask_default masks a null too; mask_replace's replacement may be null.
        Scalar::Mask(f, types) => return super::masking::call(*f, &sig.name, types, args),
        Scalar::ToJson(ty) => {
            let text = match args.first() {
                Some(Some(bytes)) => Value::decode(ty, bytes)
                    .map_err(|e| QueryError::Server(format!("cannot decode a {ty}: {e}")))?
                    .to_json(ty),
                _ => "null".to_string(),
            };
            return Ok(Some(text.into_bytes()));
        }
        _ => {}
    }
    let Some(Some(arg)) = args.first() else {
        return Ok(None);
    };
    let arg = arg.as_slice();
    let bad = |ty: &CqlType| {
        QueryError::Invalid(format!(
            "In call to function system.{}, value {} is not a valid binary representation for type {ty}",
            sig.name,
            hex(arg)
        ))
    };
    Ok(match &sig.function {
        Scalar::ToDate(from) => millis_of(from, arg)?.map(|ms| {
            let mut out = Vec::new();
            Value::Date(date_of_millis(ms)).encode(&mut out);
            out
        }),
        Scalar::ToTimestamp(from) => {
            millis_of(from, arg)?.and_then(|ms| encode(Value::Timestamp(ms)))
        }
        Scalar::ToUnixTimestamp(from) => {
            millis_of(from, arg)?.and_then(|ms| encode(Value::Bigint(ms)))
        }
        Scalar::MinTimeuuid | Scalar::MaxTimeuuid => {
            let Some(ms) = millis_of(&CqlType::Timestamp, arg)? else {
                return Ok(None);
            };
            let max = matches!(sig.function, Scalar::MaxTimeuuid);
            let ticks = ms
                .wrapping_mul(10_000)
                .wrapping_add(UUID_EPOCH_OFFSET_100NS)
                .wrapping_add(if max { 9_999 } else { 0 }) as u64;
            let lsb = if max {
                MAX_CLOCK_SEQ_AND_NODE
            } else {
                MIN_CLOCK_SEQ_AND_NODE
            };
            Some(timeuuid_bytes(ticks, lsb))
        }
        Scalar::AsBlob => Some(arg.to_vec()),
        Scalar::BlobAs(ty) => {
            types::validate(ty, arg).map_err(|_| bad(ty))?;
            Some(arg.to_vec())
        }
        Scalar::Cast { from, to } => cast(from, to, arg)?,
        Scalar::Negate(ty) => super::operations::negate(ty, arg)?,
        Scalar::Operation(op) => {
            let Some(Some(right)) = args.get(1) else {
                return Ok(None);
            };
            op.execute(arg, right)?
        }
        Scalar::Math(f, ty) => math::call(*f, ty, arg)?,
        Scalar::Floor(types) => super::floor::call(types, args)?,
        Scalar::Collection(f, ty) => super::collection_functions::call(*f, ty, arg)?,
        Scalar::Similarity(f, ty) => {
            let Some(Some(right)) = args.get(1) else {
                return Ok(None);
            };
            super::vector_functions::call(*f, &sig.name, ty, arg, right)?
        }
        Scalar::Now
        | Scalar::Uuid
        | Scalar::CurrentTimestamp
        | Scalar::CurrentDate
        | Scalar::CurrentTime
        | Scalar::Token
        | Scalar::ToJson(_)
        | Scalar::Mask(..) => unreachable!("handled above"),
    })
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::from("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn date_of_millis(ms: i64) -> u32 {
    (ms.div_euclid(MILLIS_PER_DAY) + i64::from(DATE_EPOCH)) as u32
}

/// Milliseconds since the epoch of a timestamp, date or timeuuid value; `None` for the empty
/// value.
fn millis_of(ty: &CqlType, bytes: &[u8]) -> Result<Option<i64>, QueryError> {
    Ok(match Value::decode(ty, bytes)? {
        Value::Timestamp(ms) | Value::Bigint(ms) => Some(ms),
        Value::Date(d) => Some((i64::from(d) - i64::from(DATE_EPOCH)) * MILLIS_PER_DAY),
        Value::Timeuuid(u) => {
            let msb = u.as_u64_pair().0;
            let ticks = ((msb & 0x0FFF) << 48) | (((msb >> 16) & 0xFFFF) << 32) | (msb >> 32);
            Some((ticks as i64 - UUID_EPOCH_OFFSET_100NS).div_euclid(10_000))
        }
        _ => None,
    })
}

/// A version-1 UUID's bytes for a 100 ns tick count and the low 64 bits.
fn timeuuid_bytes(ticks: u64, lsb: u64) -> Vec<u8> {
    let time_low = ticks & 0xFFFF_FFFF;
    let time_mid = (ticks >> 32) & 0xFFFF;
    let time_hi = ((ticks >> 48) & 0x0FFF) | 0x1000;
    let msb = (time_low << 32) | (time_mid << 16) | time_hi;
    uuid::Uuid::from_u64_pair(msb, lsb).as_bytes().to_vec()
}

/// A number decoded for a cast, in the widest form its type has.
enum Number {
    Integer(i64),
    Float(f32),
    Double(f64),
    Decimal(Decimal),
    Varint(BigInt),
}

impl Number {
    /// Java's `Number.longValue()`.
    fn long_value(&self) -> i64 {
        match self {
            Number::Integer(v) => *v,
            Number::Float(v) => *v as i64,
            Number::Double(v) => *v as i64,
            Number::Decimal(d) => numbers::low_i64(&d.integer_part()),
            Number::Varint(v) => numbers::low_i64(v),
        }
    }

    /// Java's `Number.intValue()` (also the base of `shortValue`/`byteValue`).
    fn int_value(&self) -> i32 {
        match self {
            Number::Float(v) => *v as i32,
            Number::Double(v) => *v as i32,
            other => other.long_value() as i32,
        }
    }

    fn double_value(&self) -> f64 {
        match self {
            Number::Integer(v) => *v as f64,
            Number::Float(v) => f64::from(*v),
            Number::Double(v) => *v,
            Number::Decimal(d) => d.to_f64(),
            Number::Varint(v) => numbers::bigint_to_f64(v),
        }
    }

    fn float_value(&self) -> f32 {
        match self {
            Number::Integer(v) => *v as f32,
            Number::Float(v) => *v,
            Number::Double(v) => *v as f32,
            Number::Decimal(d) => d.to_f32(),
            Number::Varint(v) => numbers::bigint_to_f32(v),
        }
    }
}

fn number(v: Value) -> Option<Number> {
    Some(match v {
        Value::Tinyint(x) => Number::Integer(i64::from(x)),
        Value::Smallint(x) => Number::Integer(i64::from(x)),
        Value::Int(x) => Number::Integer(i64::from(x)),
        Value::Bigint(x) | Value::Counter(x) => Number::Integer(x),
        Value::Float(x) => Number::Float(x),
        Value::Double(x) => Number::Double(x),
        Value::Decimal { unscaled, scale } => Number::Decimal(Decimal::new(unscaled, scale)),
        Value::Varint(x) => Number::Varint(x),
        _ => return None,
    })
}

/// `CAST(x AS to)` of a non-null value, as Cassandra's `CastFcts` converts.
fn cast(from: &CqlType, to: &CqlType, bytes: &[u8]) -> Result<Option<Vec<u8>>, QueryError> {
    let value = Value::decode(from, bytes)?;
    if matches!(value, Value::Empty) {
        // The empty value of a fixed-size type is "no value" to a function.
        return Ok(None);
    }
    let out = match to {
        CqlType::Text | CqlType::Ascii => {
            let text = match value {
                Value::Ascii(s) | Value::Text(s) => s,
                other => literal_no_quote(&other),
            };
            Value::Text(text)
        }
        CqlType::Date | CqlType::Timestamp => {
            let Some(ms) = millis_of(from, bytes)? else {
                return Ok(None);
            };
            if *to == CqlType::Date {
                Value::Date(date_of_millis(ms))
            } else {
                Value::Timestamp(ms)
            }
        }
        _ if is_cast_numeric(from) => {
            let n = number(value)
                .ok_or_else(|| QueryError::Server(format!("cast from {from} expected a number")))?;
            match to {
                CqlType::Tinyint => Value::Tinyint(n.int_value() as i8),
                CqlType::Smallint => Value::Smallint(n.int_value() as i16),
                CqlType::Int => Value::Int(n.int_value()),
                CqlType::Bigint => Value::Bigint(n.long_value()),
                CqlType::Float => Value::Float(n.float_value()),
                CqlType::Double => Value::Double(n.double_value()),
                CqlType::Varint => Value::Varint(BigInt::from(n.long_value())),
                CqlType::Decimal => {
                    let d = match n {
                        Number::Float(v) => Decimal::parse(&numbers::java_float_text(v)),
                        Number::Double(v) => Decimal::parse(&numbers::java_double_text(v)),
                        Number::Varint(v) => Some(Decimal::new(v, 0)),
                        other => Some(Decimal::new(BigInt::from(other.long_value()), 0)),
                    };
                    let d = d.ok_or_else(|| {
                        QueryError::Invalid(
                            "NaN and infinities cannot be cast to decimal".to_string(),
                        )
                    })?;
                    d.into_value()
                }
                _ => return Err(QueryError::Server(format!("no cast from {from} to {to}"))),
            }
        }
        _ => return Err(QueryError::Server(format!("no cast from {from} to {to}"))),
    };
    let mut buf = Vec::new();
    out.encode(&mut buf);
    Ok(Some(buf))
}

/// A value as text the way Cassandra's serializers print it without quotes
/// (`toCQLLiteralNoQuote`): Java's number formatting, ISO-8601 timestamps, full IPv6 text.
pub(crate) fn literal_no_quote(v: &Value) -> String {
    match v {
        Value::Float(f) => numbers::java_float_text(*f),
        Value::Double(d) => numbers::java_double_text(*d),
        Value::Decimal { unscaled, scale } => numbers::java_decimal_text(unscaled, *scale),
        Value::Ascii(s) | Value::Text(s) => s.clone(),
        Value::Inet(std::net::IpAddr::V6(a)) => a
            .segments()
            .iter()
            .map(|s| format!("{s:x}"))
            .collect::<Vec<_>>()
            .join(":"),
        Value::Inet(a) => a.to_string(),
        Value::Timestamp(ms) => {
            let (y, m, d) = civil_from_days(ms.div_euclid(MILLIS_PER_DAY));
            let of_day = ms.rem_euclid(MILLIS_PER_DAY);
            format!(
                "{}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                year_text(y),
                of_day / 3_600_000,
                of_day / 60_000 % 60,
                of_day / 1000 % 60,
                of_day % 1000
            )
        }
        Value::Date(days) => {
            let (y, m, d) = civil_from_days(i64::from(*days) - i64::from(DATE_EPOCH));
            format!("{}-{m:02}-{d:02}", year_text(y))
        }
        Value::Time(ns) => {
            let secs = ns / 1_000_000_000;
            format!(
                "{:02}:{:02}:{:02}.{:09}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60,
                ns % 1_000_000_000
            )
        }
        other => {
            let text = other.to_cql_literal();
            text.strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .map(|t| t.replace("''", "'"))
                .unwrap_or(text)
        }
    }
}

/// A year as `java.time` prints it: four digits at least, a sign outside 0..=9999.
fn year_text(y: i64) -> String {
    match y.cmp(&0) {
        Ordering::Less => format!("-{:04}", -y),
        _ if y > 9999 => format!("+{y}"),
        _ => format!("{y:04}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(name: &str) -> Vec<Signature> {
        signatures(name, &[CqlType::Int])
            .expect("a native function")
            .expect("known")
    }

    #[test]
    fn resolution_follows_cassandra() {
        let text = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // toDate(timestamp column): exact match among two candidates.
        let s = resolve(
            "todate",
            &sig("todate"),
            &[ArgKind::Typed(CqlType::Timestamp)],
            &text(&["ts"]),
        )
        .expect("resolves");
        assert_eq!(s.function, Scalar::ToDate(CqlType::Timestamp));
        // A bigint is weakly assignable to a timestamp.
        let s = resolve(
            "todate",
            &sig("todate"),
            &[ArgKind::Typed(CqlType::Bigint)],
            &text(&["b"]),
        )
        .expect("resolves");
        assert_eq!(s.function, Scalar::ToDate(CqlType::Timestamp));
        // An integer literal fits both date and timestamp: ambiguous.
        let err = resolve(
            "tounixtimestamp",
            &sig("tounixtimestamp"),
            &[ArgKind::Literal(Constant::Integer("1".into()))],
            &text(&["1"]),
        )
        .expect_err("ambiguous");
        assert!(err
            .to_string()
            .starts_with("Ambiguous call to function tounixtimestamp"));
        let err = resolve(
            "intasblob",
            &sig("intasblob"),
            &[ArgKind::Typed(CqlType::Bigint)],
            &text(&["b"]),
        )
        .expect_err("type error");
        assert_eq!(
            err.to_string(),
            "Type error: b cannot be passed as argument 0 of function system.intasblob of type int"
        );
        let err = resolve("now", &sig("now"), &[ArgKind::Any], &text(&["1"])).expect_err("arity");
        assert_eq!(
            err.to_string(),
            "Invalid number of arguments in call to function system.now: 0 required but 1 provided"
        );
        assert!(signatures("blobasblob", &[]).expect("ok").is_none());
        assert!(signatures("dateof", &[]).expect("ok").is_none());
        assert_eq!(
            signatures("floor", &[]).expect("ok").expect("known").len(),
            7
        );
        assert!(signatures("format_bytes", &[]).expect("ok").is_none());
    }

    #[test]
    fn time_functions() {
        let s = &sig("mintimeuuid")[0];
        let ms = 1_577_934_245_678i64.to_be_bytes().to_vec();
        let min = call(s, &[Some(ms.clone())]).expect("ok").expect("value");
        assert_eq!(
            uuid::Uuid::from_slice(&min).expect("uuid").to_string(),
            "896e34e0-2d0c-11ea-8080-808080808080"
        );
        let max = call(&sig("maxtimeuuid")[0], &[Some(ms)])
            .expect("ok")
            .expect("value");
        assert_eq!(
            uuid::Uuid::from_slice(&max).expect("uuid").to_string(),
            "896e5bef-2d0c-11ea-7f7f-7f7f7f7f7f7f"
        );
        let to_ts = sig("totimestamp")
            .into_iter()
            .find(|s| s.args[0] == CqlType::Timeuuid)
            .expect("timeuuid overload");
        let tu = uuid::Uuid::parse_str("50554d6e-29bb-11e5-b345-feff819cdc9f").expect("uuid");
        let ts = call(&to_ts, &[Some(tu.as_bytes().to_vec())])
            .expect("ok")
            .expect("value");
        assert_eq!(
            i64::from_be_bytes(ts.try_into().expect("8 bytes")),
            1_436_832_018_805
        );
        assert_eq!(call(&to_ts, &[None]).expect("ok"), None);
    }

    #[test]
    fn casts_convert_as_java_does() {
        let run = |from: CqlType, to: CqlType, v: Value| {
            let mut b = Vec::new();
            v.encode(&mut b);
            let out = cast(&from, &to, &b).expect("cast").expect("value");
            Value::decode(&to, &out).expect("decodes")
        };
        assert_eq!(
            run(CqlType::Double, CqlType::Tinyint, Value::Double(1e10)),
            Value::Tinyint(-1)
        );
        assert_eq!(
            run(
                CqlType::Double,
                CqlType::Smallint,
                Value::Double(123_456_789.123)
            ),
            Value::Smallint(-13035)
        );
        assert_eq!(
            run(CqlType::Double, CqlType::Text, Value::Double(1e10)),
            Value::Text("1.0E10".into())
        );
        assert_eq!(
            run(CqlType::Float, CqlType::Text, Value::Float(0.1)),
            Value::Text("0.1".into())
        );
        assert_eq!(
            run(
                CqlType::Inet,
                CqlType::Text,
                Value::Inet("::1".parse().expect("ipv6"))
            ),
            Value::Text("0:0:0:0:0:0:0:1".into())
        );
        assert_eq!(
            run(
                CqlType::Timestamp,
                CqlType::Text,
                Value::Timestamp(1_577_934_245_678)
            ),
            Value::Text("2020-01-02T03:04:05.678Z".into())
        );
        assert_eq!(
            run(CqlType::Time, CqlType::Text, Value::Time(3_723_456_000_000)),
            Value::Text("01:02:03.456000000".into())
        );
        let big: BigInt = "12345678901234567890".parse().expect("bigint");
        assert_eq!(
            run(
                CqlType::Decimal,
                CqlType::Varint,
                Value::Decimal {
                    unscaled: big * 1000 + 123,
                    scale: 3
                }
            ),
            Value::Varint(BigInt::from(-6_101_065_172_474_983_726i64))
        );
        assert_eq!(
            run(CqlType::Float, CqlType::Decimal, Value::Float(1.5)),
            Value::Decimal {
                unscaled: BigInt::from(15),
                scale: 1
            }
        );
        assert_eq!(
            run(CqlType::Int, CqlType::Decimal, Value::Int(1)),
            Value::Decimal {
                unscaled: BigInt::from(1),
                scale: 0
            }
        );
    }
}
