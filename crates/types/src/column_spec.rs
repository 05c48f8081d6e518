//! `ColumnSpec`: what a result column or a bind variable is. Defined here, below both the
//! query layer that produces result sets and the protocol codec that writes them, so a
//! result's columns reach the wire without being converted.

use crate::CqlType;

/// One result column (or bind variable): the table it belongs to, its name and its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    pub keyspace: String,
    pub table: String,
    pub name: String,
    pub ty: CqlType,
}
