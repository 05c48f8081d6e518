//! Cassandra's variable-length integers (`VIntCoding`), used by `duration` values and by
//! vectors of variable-size elements.
//!
//! Layout of an unsigned vint: the number of leading 1-bits of the first byte is the number of
//! extra bytes that follow (0..=8); the remaining low bits of the first byte and the extra bytes
//! are the value, big-endian. Values < 128 take one byte; a 9-byte form has first byte 0xFF.
//! Signed vints are zigzag-encoded first (`(n << 1) ^ (n >> 63)`). This is *not* LEB128.

pub(crate) fn write_unsigned(value: u64, out: &mut Vec<u8>) {
    let magnitude = (value | 1).leading_zeros();
    let size = ((639 - magnitude * 9) >> 6) as usize;
    if size == 1 {
        out.push(value as u8);
        return;
    }
    let extra = size - 1;
    let bytes = value.to_be_bytes();
    let start = out.len();
    if size == 9 {
        out.push(0xff);
        out.extend_from_slice(&bytes);
    } else {
        out.extend_from_slice(&bytes[8 - size..]);
        out[start] |= !(0xffu8 >> extra);
    }
}

pub(crate) fn write_signed(value: i64, out: &mut Vec<u8>) {
    write_unsigned(((value << 1) ^ (value >> 63)) as u64, out);
}

/// Reads an unsigned vint from the front of `input`, advancing it; `None` if truncated.
pub(crate) fn read_unsigned(input: &mut &[u8]) -> Option<u64> {
    let (&first, rest) = input.split_first()?;
    let extra = first.leading_ones() as usize;
    if rest.len() < extra {
        return None;
    }
    let mut value = if extra >= 8 {
        0
    } else {
        u64::from(first & (0xff >> extra))
    };
    for &b in &rest[..extra] {
        value = (value << 8) | u64::from(b);
    }
    *input = &rest[extra..];
    Some(value)
}

pub(crate) fn read_signed(input: &mut &[u8]) -> Option<i64> {
    let n = read_unsigned(input)?;
    Some(((n >> 1) as i64) ^ -((n & 1) as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_sizes() {
        let cases: &[(u64, usize)] = &[
            (0, 1),
            (127, 1),
            (128, 2),
            (16383, 2),
            (16384, 3),
            (u64::from(u32::MAX), 5),
            (1 << 56, 9),
            (u64::MAX, 9),
        ];
        for &(v, size) in cases {
            let mut out = Vec::new();
            write_unsigned(v, &mut out);
            assert_eq!(out.len(), size, "{v}");
            let mut input = &out[..];
            assert_eq!(read_unsigned(&mut input), Some(v));
            assert!(input.is_empty());
            assert_eq!(read_unsigned(&mut &out[..out.len() - 1]), None);
        }
        for v in [0i64, 1, -1, 63, -64, 64, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            write_signed(v, &mut out);
            assert_eq!(read_signed(&mut &out[..]), Some(v));
        }
        // 128 is 0x80 0x80: first byte has one leading 1-bit, low bits 0, then 0x80.
        let mut out = Vec::new();
        write_unsigned(128, &mut out);
        assert_eq!(out, [0x80, 0x80]);
    }
}
