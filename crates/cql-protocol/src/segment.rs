//! Protocol v5 segment framing ("outer frames", spec v5 section 2), used in both directions
//! once STARTUP has been answered with READY.
//!
//! Uncompressed segment:
//! ```text
//! bytes 0..3   header, a 24-bit little-endian integer:
//!                bits 0..17  payload length (at most 128 KiB - 1)
//!                bit  17     self-contained flag
//!                bits 18..24 padding (zero)
//! bytes 3..6   CRC24 of the 3 header bytes, little-endian
//! payload
//! 4 bytes      CRC32 of the payload, little-endian
//! ```
//! LZ4-compressed segment:
//! ```text
//! bytes 0..5   header, a 40-bit little-endian integer:
//!                bits 0..17  compressed payload length
//!                bits 17..34 uncompressed payload length; 0 = payload stored uncompressed
//!                bit  34     self-contained flag
//!                bits 35..40 padding
//! bytes 5..8   CRC24 of the 5 header bytes, little-endian
//! payload      a raw LZ4 block (no length prefix)
//! 4 bytes      CRC32 of the payload as sent (compressed bytes), little-endian
//! ```
//! A self-contained segment holds one or more whole frames; a frame larger than one segment is
//! split across consecutive non-self-contained segments that hold nothing else.
//!
//! The CRCs are Cassandra's (`org.apache.cassandra.net.Crc`): CRC24 with init 0x875060 and
//! polynomial 0x1974F0B over the header bytes in wire order; CRC32 is the standard (zlib)
//! CRC32 primed with the bytes FA 2D 55 CA before the payload.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::ProtocolError;

/// The largest payload of one segment (17 bits).
pub const MAX_SEGMENT_PAYLOAD_BYTES: usize = 128 * 1024 - 1;

const CRC24_INIT: u32 = 0x87_5060;
const CRC24_POLY: u32 = 0x197_4F0B;
const CRC24_BYTES: usize = 3;
const CRC32_BYTES: usize = 4;
const CRC32_PRIMER: [u8; 4] = [0xFA, 0x2D, 0x55, 0xCA];
const UNCOMPRESSED_HEADER_BYTES: usize = 3;
const COMPRESSED_HEADER_BYTES: usize = 5;
const LENGTH_MASK: u64 = 0x1_FFFF;

/// Cassandra's CRC24 over the low `len` bytes of `bytes`, least significant byte first (which
/// is wire order for the little-endian header).
pub fn crc24(mut bytes: u64, len: usize) -> u32 {
    let mut crc = CRC24_INIT;
    for _ in 0..len {
        crc ^= ((bytes & 0xff) as u32) << 16;
        bytes >>= 8;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= CRC24_POLY;
            }
        }
    }
    crc
}

/// Cassandra's primed CRC32 of a segment payload.
pub fn crc32(payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&CRC32_PRIMER);
    hasher.update(payload);
    hasher.finalize()
}

fn read_le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

fn put_le(out: &mut BytesMut, value: u64, len: usize) {
    for i in 0..len {
        out.put_u8((value >> (8 * i)) as u8);
    }
}

/// One decoded segment.
#[derive(Debug)]
pub(crate) struct Segment {
    pub payload: Bytes,
    pub self_contained: bool,
}

/// Takes one complete segment from the front of `buf`, checking both CRCs and decompressing.
/// Returns `None` when more bytes are needed. The header CRC is checked as soon as the header
/// is buffered, so garbage is rejected without waiting for a payload.
pub(crate) fn decode_segment(
    buf: &mut BytesMut,
    lz4: bool,
) -> Result<Option<Segment>, ProtocolError> {
    let header_bytes = if lz4 {
        COMPRESSED_HEADER_BYTES
    } else {
        UNCOMPRESSED_HEADER_BYTES
    };
    let header_total = header_bytes + CRC24_BYTES;
    if buf.len() < header_total {
        return Ok(None);
    }
    let header = read_le(&buf[..header_bytes]);
    let read_crc = read_le(&buf[header_bytes..header_total]) as u32;
    let computed = crc24(header, header_bytes);
    if read_crc != computed {
        return Err(ProtocolError::HeaderCrcMismatch {
            read: read_crc,
            computed,
        });
    }
    let payload_len = (header & LENGTH_MASK) as usize;
    let (uncompressed_len, self_contained) = if lz4 {
        ((header >> 17) & LENGTH_MASK, (header >> 34) & 1 == 1)
    } else {
        (0, (header >> 17) & 1 == 1)
    };
    let total = header_total + payload_len + CRC32_BYTES;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    let segment = buf.split_to(total).freeze();
    let payload = segment.slice(header_total..header_total + payload_len);
    let read_crc = read_le(&segment[header_total + payload_len..]) as u32;
    let computed = crc32(&payload);
    if read_crc != computed {
        return Err(ProtocolError::PayloadCrcMismatch {
            read: read_crc,
            computed,
        });
    }
    let payload = if uncompressed_len > 0 {
        // At most 128 KiB - 1 by the 17-bit field, so this allocation is bounded.
        let mut out = vec![0u8; uncompressed_len as usize];
        let n = lz4_flex::block::decompress_into(&payload, &mut out)
            .map_err(|e| ProtocolError::Compression(format!("LZ4 segment: {e}")))?;
        if n != out.len() {
            return Err(ProtocolError::Compression(format!(
                "LZ4 segment decompressed to {n} bytes, header says {}",
                out.len()
            )));
        }
        Bytes::from(out)
    } else {
        payload
    };
    Ok(Some(Segment {
        payload,
        self_contained,
    }))
}

/// Appends one segment carrying `payload` (at most [`MAX_SEGMENT_PAYLOAD_BYTES`]).
pub(crate) fn encode_segment(payload: &[u8], self_contained: bool, lz4: bool, out: &mut BytesMut) {
    assert!(
        payload.len() <= MAX_SEGMENT_PAYLOAD_BYTES,
        "caller splits payloads into segment-sized chunks"
    );
    let flag = u64::from(self_contained);
    if lz4 {
        let compressed = lz4_flex::block::compress(payload);
        // Store uncompressed (uncompressed length 0) when compression does not help, as the
        // drivers do; this also keeps the compressed length within 17 bits.
        let (body, uncompressed_len): (&[u8], usize) = if compressed.len() < payload.len() {
            (&compressed, payload.len())
        } else {
            (payload, 0)
        };
        let header = body.len() as u64 | (uncompressed_len as u64) << 17 | flag << 34;
        put_le(out, header, COMPRESSED_HEADER_BYTES);
        put_le(
            out,
            u64::from(crc24(header, COMPRESSED_HEADER_BYTES)),
            CRC24_BYTES,
        );
        out.put_slice(body);
        out.put_u32_le(crc32(body));
    } else {
        let header = payload.len() as u64 | flag << 17;
        put_le(out, header, UNCOMPRESSED_HEADER_BYTES);
        put_le(
            out,
            u64::from(crc24(header, UNCOMPRESSED_HEADER_BYTES)),
            CRC24_BYTES,
        );
        out.put_slice(payload);
        out.put_u32_le(crc32(payload));
    }
}

/// Appends `frames` (one or more whole encoded frames) as one self-contained segment, or, if
/// too large, as a run of non-self-contained segments.
pub(crate) fn encode_segments(frames: &[u8], lz4: bool, out: &mut BytesMut) {
    if frames.len() <= MAX_SEGMENT_PAYLOAD_BYTES {
        encode_segment(frames, true, lz4, out);
    } else {
        for chunk in frames.chunks(MAX_SEGMENT_PAYLOAD_BYTES) {
            encode_segment(chunk, false, lz4, out);
        }
    }
}
