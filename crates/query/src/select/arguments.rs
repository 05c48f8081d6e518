//! What is known of a function's argument before the function is chosen, and the type
//! Cassandra prefers for a literal argument.

use cql_syntax::ast::Constant;
use types::CqlType;

/// What is known of an argument before its function is chosen.
#[derive(Debug, Clone)]
pub(crate) enum ArgKind {
    /// A selector with a known type (a column, a function call, a cast, a type hint...).
    Typed(CqlType),
    /// A literal constant: its type depends on where it goes.
    Literal(Constant),
    /// `NULL` or a bind marker: fits anywhere.
    Any,
    /// A collection or tuple literal: fits a receiver of the same shape.
    Collection(CollectionShape),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CollectionShape {
    List,
    Set,
    Map,
    Tuple,
}

/// The type Cassandra prefers for a literal (`Constants.Literal.getPreferedType`).
pub(crate) fn preferred_type(c: &Constant) -> CqlType {
    match c {
        // Cassandra prefers ascii for a string literal that is all ASCII.
        Constant::String(s) if s.is_ascii() => CqlType::Ascii,
        Constant::String(_) => CqlType::Text,
        Constant::Integer(s) => {
            if s.parse::<i32>().is_ok() {
                CqlType::Int
            } else if s.parse::<i64>().is_ok() {
                CqlType::Bigint
            } else {
                CqlType::Varint
            }
        }
        Constant::Float(_) | Constant::NaN | Constant::Infinity | Constant::NegInfinity => {
            CqlType::Double
        }
        Constant::Boolean(_) => CqlType::Boolean,
        Constant::Uuid(_) => CqlType::Uuid,
        Constant::Hex(_) => CqlType::Blob,
        Constant::Duration(_) => CqlType::Duration,
    }
}
