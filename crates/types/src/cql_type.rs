//! The CQL type tree.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A CQL data type, as declared in a schema.
///
/// Frozenness is a wrapper ([`CqlType::Frozen`]) because it changes storage layout and the
/// schema text (`frozen<list<int>>`) but not the wire encoding of a value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CqlType {
    Ascii,
    Bigint,
    Blob,
    Boolean,
    Counter,
    Date,
    Decimal,
    Double,
    Duration,
    Float,
    Inet,
    Int,
    Smallint,
    Text,
    Time,
    Timestamp,
    Timeuuid,
    Tinyint,
    Uuid,
    Varint,
    List(Box<CqlType>),
    Set(Box<CqlType>),
    Map(Box<CqlType>, Box<CqlType>),
    Tuple(Vec<CqlType>),
    Udt(UdtType),
    /// `vector<element, dimension>` (Cassandra 5.0).
    Vector(Box<CqlType>, u32),
    Frozen(Box<CqlType>),
    /// A type this server does not know by name; carries Cassandra's class name. Only used when
    /// decoding a `custom` option from the wire.
    Custom(String),
}

/// A user-defined type, resolved: field names and types in declaration order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UdtType {
    pub keyspace: String,
    pub name: String,
    pub fields: Vec<(String, CqlType)>,
}

impl CqlType {
    /// The type with any `frozen<>` wrapper removed.
    pub fn unfrozen(&self) -> &CqlType {
        match self {
            CqlType::Frozen(inner) => inner.unfrozen(),
            other => other,
        }
    }

    /// Whether values of this type are stored as a single cell. Non-frozen collections and
    /// non-frozen UDTs are multi-cell ("complex") columns in Cassandra's terms.
    pub fn is_multi_cell(&self) -> bool {
        matches!(
            self,
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _) | CqlType::Udt(_)
        )
    }

    pub fn is_collection(&self) -> bool {
        matches!(
            self.unfrozen(),
            CqlType::List(_) | CqlType::Set(_) | CqlType::Map(_, _)
        )
    }

    /// Whether a `duration` is anywhere in the type (Cassandra's `referencesDuration`):
    /// durations have no order, so neither do values holding them.
    pub fn references_duration(&self) -> bool {
        match self {
            CqlType::Duration => true,
            CqlType::List(e) | CqlType::Set(e) | CqlType::Frozen(e) | CqlType::Vector(e, _) => {
                e.references_duration()
            }
            CqlType::Map(k, v) => k.references_duration() || v.references_duration(),
            CqlType::Tuple(items) => items.iter().any(CqlType::references_duration),
            CqlType::Udt(u) => u.fields.iter().any(|(_, f)| f.references_duration()),
            _ => false,
        }
    }

    pub fn is_counter(&self) -> bool {
        matches!(self, CqlType::Counter)
    }

    /// The name of a native type as CQL writes it, `None` for composite types.
    pub fn native_name(&self) -> Option<&'static str> {
        Some(match self {
            CqlType::Ascii => "ascii",
            CqlType::Bigint => "bigint",
            CqlType::Blob => "blob",
            CqlType::Boolean => "boolean",
            CqlType::Counter => "counter",
            CqlType::Date => "date",
            CqlType::Decimal => "decimal",
            CqlType::Double => "double",
            CqlType::Duration => "duration",
            CqlType::Float => "float",
            CqlType::Inet => "inet",
            CqlType::Int => "int",
            CqlType::Smallint => "smallint",
            CqlType::Text => "text",
            CqlType::Time => "time",
            CqlType::Timestamp => "timestamp",
            CqlType::Timeuuid => "timeuuid",
            CqlType::Tinyint => "tinyint",
            CqlType::Uuid => "uuid",
            CqlType::Varint => "varint",
            _ => return None,
        })
    }

    /// Looks up a native type by its CQL name (case-insensitive; `varchar` is `text`).
    pub fn from_native_name(name: &str) -> Option<CqlType> {
        Some(match name.to_ascii_lowercase().as_str() {
            "ascii" => CqlType::Ascii,
            "bigint" => CqlType::Bigint,
            "blob" => CqlType::Blob,
            "boolean" => CqlType::Boolean,
            "counter" => CqlType::Counter,
            "date" => CqlType::Date,
            "decimal" => CqlType::Decimal,
            "double" => CqlType::Double,
            "duration" => CqlType::Duration,
            "float" => CqlType::Float,
            "inet" => CqlType::Inet,
            "int" => CqlType::Int,
            "smallint" => CqlType::Smallint,
            "text" | "varchar" => CqlType::Text,
            "time" => CqlType::Time,
            "timestamp" => CqlType::Timestamp,
            "timeuuid" => CqlType::Timeuuid,
            "tinyint" => CqlType::Tinyint,
            "uuid" => CqlType::Uuid,
            "varint" => CqlType::Varint,
            _ => return None,
        })
    }
}

/// The type as `system_schema.columns.type` and DESCRIBE print it, e.g. `frozen<map<text, int>>`.
/// UDTs print as their (quoted if needed) name only, as Cassandra does.
impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(name) = self.native_name() {
            return f.write_str(name);
        }
        match self {
            CqlType::List(e) => write!(f, "list<{e}>"),
            CqlType::Set(e) => write!(f, "set<{e}>"),
            CqlType::Map(k, v) => write!(f, "map<{k}, {v}>"),
            CqlType::Tuple(items) => {
                f.write_str("tuple<")?;
                for (i, t) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(">")
            }
            CqlType::Udt(u) => f.write_str(&u.name),
            CqlType::Vector(e, n) => write!(f, "vector<{e}, {n}>"),
            CqlType::Frozen(inner) => write!(f, "frozen<{inner}>"),
            CqlType::Custom(class) => write!(f, "'{class}'"),
            _ => unreachable!("native types are handled above"),
        }
    }
}
