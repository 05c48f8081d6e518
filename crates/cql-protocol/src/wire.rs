//! The protocol's primitive notations (spec section 3): `[int]`, `[string]`, `[bytes]`,
//! `[value]`, maps, lists, `[inet]`. All big-endian.
//!
//! [`Reader`] reads them from a body held as [`Bytes`], so `[bytes]` and `[value]` come out as
//! zero-copy slices of the frame. Every read checks the remaining length first: client bytes
//! never cause a panic.

use std::net::{IpAddr, SocketAddr};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error::ProtocolError;

/// A value bound to a marker: the `[value]` notation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawValue {
    /// Length -1.
    Null,
    /// Length -2: leave the column unchanged.
    NotSet,
    /// Length >= 0; a slice of the request body.
    Value(Bytes),
}

/// Reads protocol primitives from the front of a body.
pub(crate) struct Reader {
    buf: Bytes,
}

fn short_read(what: &str) -> ProtocolError {
    ProtocolError::malformed(format!("Not enough bytes to read {what}"))
}

impl Reader {
    pub(crate) fn new(buf: Bytes) -> Self {
        Reader { buf }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn need(&self, n: usize, what: &str) -> Result<(), ProtocolError> {
        if self.buf.len() < n {
            Err(short_read(what))
        } else {
            Ok(())
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, ProtocolError> {
        self.need(1, "a byte")?;
        Ok(self.buf.get_u8())
    }

    pub(crate) fn u16(&mut self) -> Result<u16, ProtocolError> {
        self.need(2, "a short")?;
        Ok(self.buf.get_u16())
    }

    pub(crate) fn i32(&mut self) -> Result<i32, ProtocolError> {
        self.need(4, "an int")?;
        Ok(self.buf.get_i32())
    }

    pub(crate) fn i64(&mut self) -> Result<i64, ProtocolError> {
        self.need(8, "a long")?;
        Ok(self.buf.get_i64())
    }

    fn take(&mut self, n: usize, what: &str) -> Result<Bytes, ProtocolError> {
        self.need(n, what)?;
        Ok(self.buf.split_to(n))
    }

    fn utf8(bytes: Bytes, what: &str) -> Result<String, ProtocolError> {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| ProtocolError::malformed(format!("Invalid UTF-8 in {what}")))
    }

    /// `[string]`: a `[short]` length then UTF-8 bytes.
    pub(crate) fn string(&mut self) -> Result<String, ProtocolError> {
        let n = self.u16()? as usize;
        let bytes = self.take(n, "a string")?;
        Self::utf8(bytes, "a string")
    }

    /// `[long string]`: an `[int]` length then UTF-8 bytes.
    pub(crate) fn long_string(&mut self) -> Result<String, ProtocolError> {
        let n = self.i32()?;
        let n = usize::try_from(n)
            .map_err(|_| ProtocolError::malformed(format!("Negative long string length {n}")))?;
        let bytes = self.take(n, "a long string")?;
        Self::utf8(bytes, "a long string")
    }

    /// `[string list]`.
    pub(crate) fn string_list(&mut self) -> Result<Vec<String>, ProtocolError> {
        let n = self.u16()? as usize;
        // Each element takes at least 2 bytes, which bounds the allocation by the body size.
        let mut out = Vec::with_capacity(n.min(self.remaining() / 2));
        for _ in 0..n {
            out.push(self.string()?);
        }
        Ok(out)
    }

    /// `[string map]`, in wire order.
    pub(crate) fn string_map(&mut self) -> Result<Vec<(String, String)>, ProtocolError> {
        let n = self.u16()? as usize;
        let mut out = Vec::with_capacity(n.min(self.remaining() / 4));
        for _ in 0..n {
            let k = self.string()?;
            let v = self.string()?;
            out.push((k, v));
        }
        Ok(out)
    }

    /// `[bytes map]`, skipped: a request's custom payload is read and ignored, as Cassandra's
    /// default query handler does.
    pub(crate) fn skip_bytes_map(&mut self) -> Result<(), ProtocolError> {
        let n = self.u16()?;
        for _ in 0..n {
            self.string()?;
            self.bytes()?;
        }
        Ok(())
    }

    /// `[bytes]`: negative length is null.
    pub(crate) fn bytes(&mut self) -> Result<Option<Bytes>, ProtocolError> {
        let n = self.i32()?;
        match usize::try_from(n) {
            Ok(n) => Ok(Some(self.take(n, "a [bytes] value")?)),
            Err(_) => Ok(None),
        }
    }

    /// `[short bytes]`.
    pub(crate) fn short_bytes(&mut self) -> Result<Bytes, ProtocolError> {
        let n = self.u16()? as usize;
        self.take(n, "a [short bytes] value")
    }

    /// `[value]`: -1 null, -2 not set, below -2 an error.
    pub(crate) fn value(&mut self) -> Result<RawValue, ProtocolError> {
        let n = self.i32()?;
        match n {
            -1 => Ok(RawValue::Null),
            -2 => Ok(RawValue::NotSet),
            n if n < -2 => Err(ProtocolError::malformed(format!(
                "Invalid value length {n} (must be >= -2)"
            ))),
            n => Ok(RawValue::Value(self.take(n as usize, "a [value]")?)),
        }
    }

    /// Consumes and returns everything left.
    pub(crate) fn rest(&mut self) -> Bytes {
        self.buf.split_off(0)
    }
}

// ---- writers -------------------------------------------------------------------------------
// Lengths that do not fit the notation are programmer errors on the server side (we never
// build a 2 GiB body), so they are checked by `expect` with the reason; `[string]`, which can
// carry client text in error messages, is truncated instead.

/// A `[string]`. Its length is a u16, and a server-built string can echo client input (an error
/// message quoting a 70 KB token), so a longer string is cut at the last character boundary that
/// fits rather than failing the whole response.
pub(crate) fn put_string(out: &mut BytesMut, s: &str) {
    let mut end = s.len().min(u16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.put_u16(end as u16);
    out.put_slice(&s.as_bytes()[..end]);
}

#[cfg(test)]
pub(crate) fn put_long_string(out: &mut BytesMut, s: &str) {
    let n = i32::try_from(s.len()).expect("server-built [long string] is shorter than 2 GiB");
    out.put_i32(n);
    out.put_slice(s.as_bytes());
}

pub(crate) fn put_string_list(out: &mut BytesMut, list: &[String]) {
    let n = u16::try_from(list.len()).expect("server-built [string list] has < 64Ki entries");
    out.put_u16(n);
    for s in list {
        put_string(out, s);
    }
}

pub(crate) fn put_bytes(out: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            let n = i32::try_from(b.len()).expect("server-built [bytes] is shorter than 2 GiB");
            out.put_i32(n);
            out.put_slice(b);
        }
        None => out.put_i32(-1),
    }
}

pub(crate) fn put_short_bytes(out: &mut BytesMut, b: &[u8]) {
    let n = u16::try_from(b.len()).expect("server-built [short bytes] is shorter than 64 KiB");
    out.put_u16(n);
    out.put_slice(b);
}

/// `[inetaddr]`: one byte of address length (4 or 16), then the address.
pub(crate) fn put_inetaddr(out: &mut BytesMut, ip: &IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            out.put_u8(4);
            out.put_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.put_u8(16);
            out.put_slice(&a.octets());
        }
    }
}

/// `[inet]`: an `[inetaddr]` then the port as an `[int]`.
pub(crate) fn put_inet(out: &mut BytesMut, addr: &SocketAddr) {
    put_inetaddr(out, &addr.ip());
    out.put_i32(i32::from(addr.port()));
}
