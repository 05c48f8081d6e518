//! Column types on the wire: the `[option]` of a column spec (spec section 4.2.5.2), and
//! Cassandra's marshal class names for types the protocol can only send as `custom`.
//!
//! Layout: a `[short]` id, then id-specific content:
//! ```text
//! 0x0000 custom   [string] class name       0x0020 list  <option elem>
//! 0x0001 ascii .. 0x0015 duration (no body) 0x0021 map   <option key><option value>
//!                                           0x0022 set   <option elem>
//! 0x0030 udt   [string ks][string name][short n] n * ([string field][option type])
//! 0x0031 tuple [short n] n * <option>
//! ```
//! `frozen<x>` is encoded as `x`: frozenness does not change a value's encoding. `vector<e, n>`
//! (Cassandra 5.0) has no id of its own and is sent as `custom` with its marshal class name,
//! exactly as Cassandra does. `duration` has id 0x0015 only from v5 (the v4 spec lists no such
//! id); to a v4 client it is sent as `custom` `org.apache.cassandra.db.marshal.DurationType`,
//! as Cassandra's `DataType.fromType` does for types newer than the connection's version.

use bytes::{BufMut, BytesMut};
use types::CqlType;

use crate::header::Version;
use crate::wire::put_string;

const MARSHAL: &str = "org.apache.cassandra.db.marshal.";

/// Appends the `[option]` describing `ty` to a client speaking `version`.
pub(crate) fn put_type_option(version: Version, out: &mut BytesMut, ty: &CqlType) {
    let native_id: u16 = match ty {
        CqlType::Ascii => 0x0001,
        CqlType::Bigint => 0x0002,
        CqlType::Blob => 0x0003,
        CqlType::Boolean => 0x0004,
        CqlType::Counter => 0x0005,
        CqlType::Decimal => 0x0006,
        CqlType::Double => 0x0007,
        CqlType::Float => 0x0008,
        CqlType::Int => 0x0009,
        CqlType::Timestamp => 0x000B,
        CqlType::Uuid => 0x000C,
        CqlType::Text => 0x000D,
        CqlType::Varint => 0x000E,
        CqlType::Timeuuid => 0x000F,
        CqlType::Inet => 0x0010,
        CqlType::Date => 0x0011,
        CqlType::Time => 0x0012,
        CqlType::Smallint => 0x0013,
        CqlType::Tinyint => 0x0014,
        CqlType::Duration if version == Version::V4 => {
            out.put_u16(0x0000);
            put_string(out, &marshal_class_name(ty));
            return;
        }
        CqlType::Duration => 0x0015,
        CqlType::List(elem) => {
            out.put_u16(0x0020);
            put_type_option(version, out, elem);
            return;
        }
        CqlType::Map(key, value) => {
            out.put_u16(0x0021);
            put_type_option(version, out, key);
            put_type_option(version, out, value);
            return;
        }
        CqlType::Set(elem) => {
            out.put_u16(0x0022);
            put_type_option(version, out, elem);
            return;
        }
        CqlType::Udt(udt) => {
            out.put_u16(0x0030);
            put_string(out, &udt.keyspace);
            put_string(out, &udt.name);
            let n = u16::try_from(udt.fields.len()).expect("a UDT has fewer than 64Ki fields");
            out.put_u16(n);
            for (name, field_ty) in &udt.fields {
                put_string(out, name);
                put_type_option(version, out, field_ty);
            }
            return;
        }
        CqlType::Tuple(items) => {
            out.put_u16(0x0031);
            let n = u16::try_from(items.len()).expect("a tuple has fewer than 64Ki components");
            out.put_u16(n);
            for item in items {
                put_type_option(version, out, item);
            }
            return;
        }
        CqlType::Frozen(inner) => {
            put_type_option(version, out, inner);
            return;
        }
        CqlType::Vector(..) => {
            out.put_u16(0x0000);
            put_string(out, &marshal_class_name(ty));
            return;
        }
        CqlType::Custom(class) => {
            out.put_u16(0x0000);
            put_string(out, class);
            return;
        }
    };
    out.put_u16(native_id);
}

/// The type as Cassandra's `AbstractType.toString()` renders it: the fully qualified marshal
/// class name with parameters, e.g. `org.apache.cassandra.db.marshal.ListType(org.apache.cassandra.db.marshal.Int32Type)`.
///
/// Rules followed (Cassandra 5.0 `ListType`/`SetType`/`MapType`/`UserType`/`TupleType`/
/// `VectorType.toString(boolean ignoreFreezing)` and `TypeParser.stringify*`):
/// - a frozen collection or UDT is wrapped in `FrozenType(...)`, and nothing inside it is
///   wrapped again (its parameters are printed with `ignoreFreezing = true`);
/// - collection and tuple parameters are joined with a bare `,`;
/// - UDTs print `UserType(ks,<hex name>,<hex field>:<type>,...)`;
/// - tuples are always frozen and print without a `FrozenType` wrapper;
/// - a vector prints `VectorType(<element> , <dimension>)` (space, comma, space), and its
///   element is always frozen, as `VectorType.getInstance` freezes it.
pub fn marshal_class_name(ty: &CqlType) -> String {
    let mut out = String::new();
    render(ty, false, false, &mut out);
    out
}

fn native_class(ty: &CqlType) -> Option<&'static str> {
    Some(match ty {
        CqlType::Ascii => "AsciiType",
        CqlType::Bigint => "LongType",
        CqlType::Blob => "BytesType",
        CqlType::Boolean => "BooleanType",
        CqlType::Counter => "CounterColumnType",
        CqlType::Date => "SimpleDateType",
        CqlType::Decimal => "DecimalType",
        CqlType::Double => "DoubleType",
        CqlType::Duration => "DurationType",
        CqlType::Float => "FloatType",
        CqlType::Inet => "InetAddressType",
        CqlType::Int => "Int32Type",
        CqlType::Smallint => "ShortType",
        CqlType::Text => "UTF8Type",
        CqlType::Time => "TimeType",
        CqlType::Timestamp => "TimestampType",
        CqlType::Timeuuid => "TimeUUIDType",
        CqlType::Tinyint => "ByteType",
        CqlType::Uuid => "UUIDType",
        CqlType::Varint => "IntegerType",
        _ => return None,
    })
}

fn hex(s: &str, out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in s.bytes() {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
}

/// `frozen`: whether this occurrence of the type is frozen (not multi-cell).
/// `ignore_freezing`: Cassandra's parameter of the same name.
fn render(ty: &CqlType, frozen: bool, ignore_freezing: bool, out: &mut String) {
    if let Some(class) = native_class(ty) {
        out.push_str(MARSHAL);
        out.push_str(class);
        return;
    }
    // Parameters of a frozen type are printed ignoring freezing.
    let inner_ignore = ignore_freezing || frozen;
    let wrap = frozen && !ignore_freezing;
    match ty {
        CqlType::Frozen(inner) => render(inner, true, ignore_freezing, out),
        CqlType::Custom(class) => out.push_str(class),
        CqlType::List(elem) | CqlType::Set(elem) => {
            let class = if matches!(ty, CqlType::List(_)) {
                "ListType"
            } else {
                "SetType"
            };
            open(wrap, class, out);
            render_param(elem, inner_ignore, out);
            close(wrap, out);
        }
        CqlType::Map(key, value) => {
            open(wrap, "MapType", out);
            render_param(key, inner_ignore, out);
            out.push(',');
            render_param(value, inner_ignore, out);
            close(wrap, out);
        }
        CqlType::Udt(udt) => {
            open(wrap, "UserType", out);
            out.push_str(&udt.keyspace);
            out.push(',');
            hex(&udt.name, out);
            for (name, field_ty) in &udt.fields {
                out.push(',');
                hex(name, out);
                out.push(':');
                render_param(field_ty, inner_ignore, out);
            }
            close(wrap, out);
        }
        CqlType::Tuple(items) => {
            open(false, "TupleType", out);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render_param(item, true, out);
            }
            close(false, out);
        }
        CqlType::Vector(elem, dimension) => {
            open(false, "VectorType", out);
            // The element is always frozen.
            render(elem, true, ignore_freezing, out);
            out.push_str(" , ");
            out.push_str(&dimension.to_string());
            close(false, out);
        }
        _ => unreachable!("native types are handled above"),
    }
}

/// A type parameter: frozen only if declared `frozen<>` (or if nested, where the caller has
/// set `ignore_freezing`).
fn render_param(ty: &CqlType, ignore_freezing: bool, out: &mut String) {
    render(ty, false, ignore_freezing, out);
}

fn open(wrap: bool, class: &str, out: &mut String) {
    if wrap {
        out.push_str(MARSHAL);
        out.push_str("FrozenType(");
    }
    out.push_str(MARSHAL);
    out.push_str(class);
    out.push('(');
}

fn close(wrap: bool, out: &mut String) {
    out.push(')');
    if wrap {
        out.push(')');
    }
}
