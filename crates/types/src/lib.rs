//! CQL data types and values.
//!
//! Owns: the [`CqlType`] tree (every native type, collections, tuples, UDTs, vectors), the
//! native-protocol serialisation of values (which is also how values are stored), CQL literal
//! text forms and JSON forms, Cassandra's ordering of serialised values, the byte-comparable encoding used
//! for storage keys, and the description of a result column ([`ColumnSpec`]).
//!
//! Must not depend on: schema, storage, the protocol frame codec, or any I/O. Pure and fuzzable.

pub mod byte_comparable;
mod canonical;
mod column_spec;
mod compare;
mod compat;
mod cql_type;
mod error;
mod format;
mod hex;
mod json;
mod layout;
mod literal;
/// Calendar arithmetic (proleptic Gregorian, UTC), shared with the query layer's functions.
pub mod temporal;
mod value;
mod vint;

pub use canonical::canonicalize;
pub use column_spec::ColumnSpec;
pub use compare::compare;
pub use cql_type::{CqlType, UdtType};
pub use error::TypeError;
pub use json::{
    java_decimal_text, java_double_text, java_float_text, json_key_to_name, name_to_json_key,
};
pub use layout::MAX_TYPE_DEPTH;
pub use literal::Literal;
pub use value::{validate, Value, DATE_EPOCH};
