//! Which types Cassandra's functions take as the same (`frozen<>` aside, its legacy timeuuid
//! marshal class read as timeuuid), and which accept each other's values.

use types::CqlType;

/// The marshal class Cassandra 5.0 gives the results of `blobAsTimeuuid`, `min` and `max` of
/// timeuuids: drivers see a custom type (and raw bytes); functions see a timeuuid.
pub(super) const LEGACY_TIMEUUID_CLASS: &str = "org.apache.cassandra.db.marshal.LegacyTimeUUIDType";

pub(crate) fn legacy_timeuuid() -> CqlType {
    CqlType::Custom(LEGACY_TIMEUUID_CLASS.to_string())
}

/// The type, with Cassandra's legacy timeuuid marshal class read as `timeuuid`.
pub(super) fn canonical(t: &CqlType) -> &CqlType {
    match t.unfrozen() {
        CqlType::Custom(class) if class == LEGACY_TIMEUUID_CLASS => &CqlType::Timeuuid,
        other => other,
    }
}

/// `frozen<>` makes no difference to what a value is, at any depth.
pub(crate) fn same_type(a: &CqlType, b: &CqlType) -> bool {
    use CqlType::*;
    match (canonical(a), canonical(b)) {
        (List(x), List(y)) | (Set(x), Set(y)) => same_type(x, y),
        (Map(k1, v1), Map(k2, v2)) => same_type(k1, k2) && same_type(v1, v2),
        (Tuple(x), Tuple(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_type(a, b)),
        (Vector(x, n), Vector(y, m)) => n == m && same_type(x, y),
        (Udt(x), Udt(y)) => x.keyspace == y.keyspace && x.name == y.name,
        (x, y) => x == y,
    }
}

/// Whether a `receiver` accepts values serialised as `value` (Cassandra's
/// `isValueCompatibleWith`): blob accepts anything, text accepts ascii, uuid accepts timeuuid,
/// bigint and timestamp accept each other, varint accepts int, bigint and timestamp.
pub(crate) fn value_compatible(receiver: &CqlType, value: &CqlType) -> bool {
    same_type(receiver, value) || compatible_other_type(receiver, value)
}

/// `value_compatible` of two types that are not the same.
pub(super) fn compatible_other_type(receiver: &CqlType, value: &CqlType) -> bool {
    use CqlType::*;
    matches!(
        (canonical(receiver), canonical(value)),
        (Blob, _)
            | (Text, Ascii)
            | (Uuid, Timeuuid)
            | (Bigint, Timestamp)
            | (Timestamp, Bigint)
            | (Varint, Int | Bigint | Timestamp)
    )
}
