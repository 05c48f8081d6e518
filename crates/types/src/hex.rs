//! Bytes as `0x` hex text, as Cassandra prints blobs and undecodable values.

use std::fmt::Write;

/// `0x` followed by lowercase hex digits.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(2 + bytes.len() * 2);
    s.push_str("0x");
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
