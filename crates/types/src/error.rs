//! Errors from decoding, validating and converting CQL values.

use thiserror::Error;

/// Why a value or literal was rejected. Messages follow Cassandra's own wording (its
/// `MarshalException` and literal-conversion texts) so users and drivers recognise them.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TypeError {
    /// Serialised bytes that are not a valid value of the type (Cassandra's `MarshalException`),
    /// e.g. "Expected 4 or 0 byte int (3)".
    #[error("{0}")]
    Marshal(String),
    /// A constant of a compatible kind whose text does not denote a value of the type, e.g.
    /// "Unable to make int from '99999999999'".
    #[error("{0}")]
    InvalidLiteral(String),
    /// The constant's kind (string, integer, uuid, ...) cannot be assigned to the type at all.
    /// The message is deliberately empty: the caller knows the column name and the constant
    /// text and writes Cassandra's "Invalid STRING constant (foo) for \"c\" of type int".
    #[error("")]
    IncompatibleLiteral,
    /// The type tree is nested deeper than [`crate::MAX_TYPE_DEPTH`].
    #[error("Type nesting is deeper than {max_depth} levels")]
    TooDeep { max_depth: usize },
}

pub(crate) fn marshal(message: impl Into<String>) -> TypeError {
    TypeError::Marshal(message.into())
}
