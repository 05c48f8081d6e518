//! The frame: one message (a request or a response) on a connection after its handshake.
//!
//! Every integer is big-endian. A frame is a fixed 36-byte header and its payload:
//!
//! ```text
//! offset size
//!  0     2   magic 0x48 0x4D ("HM")
//!  2     1   protocol version (PROTOCOL_VERSION = 1)
//!  3     1   flags: bit 0 = payload is lz4 (block format), bit 1 = response;
//!                   other bits must be 0
//!  4     2   verb id (at most MAX_VERB_ID)
//!  6     2   reserved, must be 0
//!  8     8   request id (a response carries its request's)
//! 16     4   expires_in_ms: a request's time left until its deadline when it was written (the
//!            receiver's deadline is its own clock plus this); 0 in a response
//! 20     4   payload length: the bytes that follow, as sent (compressed if bit 0)
//! 24     4   uncompressed length: equal to the payload length unless bit 0 is set
//! 28     4   CRC32 (IEEE, crc32fast) of the payload bytes as sent
//! 32     4   CRC32 of header bytes 0..32
//! 36         payload
//! ```
//!
//! The header has its own checksum so that a damaged length is caught before the reader waits
//! for (or allocates) the payload it names. Both lengths are checked against the reader's cap
//! (`MessagingOptions::max_message_bytes`, at most [`MAX_FRAME_PAYLOAD_BYTES`]) before anything
//! is allocated, and a compressed payload must decompress to exactly its uncompressed length.
//! So any bytes decode to a frame, "need more bytes" or a [`FrameError`], never a panic, and
//! the memory a frame takes is bounded by the cap.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::verb::{Verb, MAX_VERB_ID};

/// The frame magic, "HM" (Helenus Messaging).
pub const FRAME_MAGIC: [u8; 2] = *b"HM";
/// The one frame and handshake layout this code speaks. A peer offering a range without it is
/// refused at the handshake.
pub const PROTOCOL_VERSION: u8 = 1;
/// The fixed header in front of every payload.
pub const FRAME_HEADER_BYTES: usize = 36;
/// The hard ceiling on a payload, compressed or not (Cassandra's default
/// `internode_max_message_size` is 128 MiB too): a length above the reader's cap is corruption
/// or hostility, and the connection is closed.
pub const MAX_FRAME_PAYLOAD_BYTES: usize = 128 << 20;

const FLAG_COMPRESSED: u8 = 0x01;
const FLAG_RESPONSE: u8 = 0x02;
const KNOWN_FLAGS: u8 = FLAG_COMPRESSED | FLAG_RESPONSE;

/// Whether a frame asks or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Asks a verb's handler; answered by a response with the same request id.
    Request,
    /// Answers the request with its request id (frame flag bit 1).
    Response,
}

/// One decoded message. The payload is uncompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Request or response.
    pub kind: FrameKind,
    /// The request's verb (a response carries its request's).
    pub verb: Verb,
    /// Unique per requester among its requests in flight; a response carries its request's.
    pub request_id: u64,
    /// A request's time left when it was written (see the module comment); 0 in a response.
    pub expires_in_ms: u32,
    /// The verb's payload (`codec.rs`), uncompressed.
    pub payload: Bytes,
}

/// Why bytes are not a frame. Any of these closes the connection (its byte stream can no
/// longer be trusted to be in step), is logged, and is counted as a malformed frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad frame magic {0:02x?}")]
    BadMagic([u8; 2]),
    #[error("unsupported frame protocol version {0}")]
    UnsupportedVersion(u8),
    #[error("frame header checksum mismatch (read {read:#010x}, computed {computed:#010x})")]
    HeaderChecksum { read: u32, computed: u32 },
    #[error("frame payload checksum mismatch (read {read:#010x}, computed {computed:#010x})")]
    PayloadChecksum { read: u32, computed: u32 },
    #[error("unknown frame flags {0:#04x}")]
    UnknownFlags(u8),
    #[error("reserved frame header bytes are not zero")]
    Reserved,
    #[error("verb id {0} is above the highest ({MAX_VERB_ID})")]
    VerbOutOfRange(u16),
    #[error("frame payload of {length} bytes is over the {cap}-byte cap")]
    TooLarge { length: usize, cap: usize },
    #[error(
        "uncompressed frame with payload length {payload} but uncompressed length {uncompressed}"
    )]
    LengthMismatch { payload: u32, uncompressed: u32 },
    #[error("lz4 payload does not decompress: {0}")]
    Decompression(String),
}

/// A decoded header, before its payload has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FrameHeader {
    flags: u8,
    verb: Verb,
    request_id: u64,
    expires_in_ms: u32,
    payload_bytes: usize,
    uncompressed_bytes: usize,
    payload_crc: u32,
}

/// Appends `frame` to `out`, lz4-compressing its payload if it is longer than
/// `compress_above_bytes` and compression makes it shorter. Returns the bytes appended.
///
/// Panics if the payload is over [`MAX_FRAME_PAYLOAD_BYTES`]: the service refuses such a
/// message before it is queued (`MessagingError::TooLarge`).
pub fn encode_frame(frame: &Frame, compress_above_bytes: usize, out: &mut BytesMut) -> usize {
    let uncompressed = frame.payload.len();
    assert!(
        uncompressed <= MAX_FRAME_PAYLOAD_BYTES,
        "the service refuses messages over the cap before queueing them"
    );
    let compressed = (uncompressed > compress_above_bytes)
        .then(|| lz4_flex::block::compress(&frame.payload))
        .filter(|c| c.len() < uncompressed);
    let mut flags = match frame.kind {
        FrameKind::Request => 0,
        FrameKind::Response => FLAG_RESPONSE,
    };
    let body: &[u8] = match &compressed {
        Some(c) => {
            flags |= FLAG_COMPRESSED;
            c
        }
        None => &frame.payload,
    };
    let start = out.len();
    out.reserve(FRAME_HEADER_BYTES + body.len());
    out.put_slice(&FRAME_MAGIC);
    out.put_u8(PROTOCOL_VERSION);
    out.put_u8(flags);
    out.put_u16(frame.verb.id());
    out.put_u16(0);
    out.put_u64(frame.request_id);
    out.put_u32(frame.expires_in_ms);
    out.put_u32(len_u32(body.len()));
    out.put_u32(len_u32(uncompressed));
    out.put_u32(crc32fast::hash(body));
    let header_crc = crc32fast::hash(&out[start..start + 32]);
    out.put_u32(header_crc);
    out.put_slice(body);
    out.len() - start
}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).expect("payloads are capped far below 4 GiB")
}

/// Takes one whole frame off the front of `buf`. `Ok(None)` means more bytes are needed (the
/// buffer is left as it was, with room reserved for the rest of the frame). `cap_bytes` bounds
/// both the payload as sent and uncompressed; it is clamped to [`MAX_FRAME_PAYLOAD_BYTES`].
///
/// On an error the stream is out of step and must be closed; `buf` is left unspecified.
pub fn decode_frame(buf: &mut BytesMut, cap_bytes: usize) -> Result<Option<Frame>, FrameError> {
    if buf.len() < FRAME_HEADER_BYTES {
        return Ok(None);
    }
    let header = decode_header(&buf[..FRAME_HEADER_BYTES], cap_bytes)?;
    let total = FRAME_HEADER_BYTES + header.payload_bytes;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    buf.advance(FRAME_HEADER_BYTES);
    let body = buf.split_to(header.payload_bytes).freeze();
    let computed = crc32fast::hash(&body);
    if computed != header.payload_crc {
        return Err(FrameError::PayloadChecksum {
            read: header.payload_crc,
            computed,
        });
    }
    let payload = if header.flags & FLAG_COMPRESSED != 0 {
        // Bounded by the cap, checked in `decode_header`.
        let mut out = vec![0u8; header.uncompressed_bytes];
        let n = lz4_flex::block::decompress_into(&body, &mut out)
            .map_err(|e| FrameError::Decompression(e.to_string()))?;
        if n != header.uncompressed_bytes {
            return Err(FrameError::Decompression(format!(
                "decompressed to {n} bytes, header says {}",
                header.uncompressed_bytes
            )));
        }
        Bytes::from(out)
    } else {
        body
    };
    Ok(Some(Frame {
        kind: if header.flags & FLAG_RESPONSE != 0 {
            FrameKind::Response
        } else {
            FrameKind::Request
        },
        verb: header.verb,
        request_id: header.request_id,
        expires_in_ms: header.expires_in_ms,
        payload,
    }))
}

/// Checks and decodes the 36 header bytes.
fn decode_header(bytes: &[u8], cap_bytes: usize) -> Result<FrameHeader, FrameError> {
    debug_assert_eq!(bytes.len(), FRAME_HEADER_BYTES);
    let cap = cap_bytes.min(MAX_FRAME_PAYLOAD_BYTES);
    let magic = [bytes[0], bytes[1]];
    if magic != FRAME_MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    if bytes[2] != PROTOCOL_VERSION {
        return Err(FrameError::UnsupportedVersion(bytes[2]));
    }
    let mut fields = &bytes[3..];
    let flags = fields.get_u8();
    let verb_id = fields.get_u16();
    let reserved = fields.get_u16();
    let request_id = fields.get_u64();
    let expires_in_ms = fields.get_u32();
    let payload_len = fields.get_u32();
    let uncompressed_len = fields.get_u32();
    let payload_crc = fields.get_u32();
    let read_header_crc = fields.get_u32();
    let computed = crc32fast::hash(&bytes[..32]);
    if read_header_crc != computed {
        return Err(FrameError::HeaderChecksum {
            read: read_header_crc,
            computed,
        });
    }
    if flags & !KNOWN_FLAGS != 0 {
        return Err(FrameError::UnknownFlags(flags));
    }
    if reserved != 0 {
        return Err(FrameError::Reserved);
    }
    let verb = Verb::from_id(verb_id).ok_or(FrameError::VerbOutOfRange(verb_id))?;
    for length in [payload_len, uncompressed_len] {
        let length = length as usize;
        if length > cap {
            return Err(FrameError::TooLarge { length, cap });
        }
    }
    if flags & FLAG_COMPRESSED == 0 && payload_len != uncompressed_len {
        return Err(FrameError::LengthMismatch {
            payload: payload_len,
            uncompressed: uncompressed_len,
        });
    }
    Ok(FrameHeader {
        flags,
        verb,
        request_id,
        expires_in_ms,
        payload_bytes: payload_len as usize,
        uncompressed_bytes: uncompressed_len as usize,
        payload_crc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: FrameKind, payload: &[u8]) -> Frame {
        Frame {
            kind,
            verb: Verb::MUTATION,
            request_id: 0x0102_0304_0506_0708,
            expires_in_ms: 1_500,
            payload: Bytes::copy_from_slice(payload),
        }
    }

    fn encoded(f: &Frame, compress_above_bytes: usize) -> BytesMut {
        let mut out = BytesMut::new();
        let n = encode_frame(f, compress_above_bytes, &mut out);
        assert_eq!(n, out.len());
        out
    }

    /// Compressible and incompressible payloads of several sizes, both kinds.
    fn samples() -> Vec<Frame> {
        let mut noise = Vec::new();
        let mut x: u32 = 12345;
        for _ in 0..3000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            noise.push((x >> 16) as u8);
        }
        vec![
            frame(FrameKind::Request, b""),
            frame(FrameKind::Response, b"ok"),
            frame(FrameKind::Request, &[7u8; 5000]),
            frame(FrameKind::Response, &noise),
        ]
    }

    #[test]
    fn frames_round_trip_with_and_without_compression() {
        for f in samples() {
            for threshold in [0, 1024, usize::MAX] {
                let mut buf = encoded(&f, threshold);
                let decoded = decode_frame(&mut buf, MAX_FRAME_PAYLOAD_BYTES)
                    .expect("valid")
                    .expect("whole");
                assert_eq!(decoded, f);
                assert!(buf.is_empty());
            }
        }
    }

    #[test]
    fn a_compressible_payload_above_the_threshold_is_sent_compressed() {
        let f = frame(FrameKind::Request, &[7u8; 5000]);
        let buf = encoded(&f, 1024);
        assert_eq!(buf[3] & FLAG_COMPRESSED, FLAG_COMPRESSED);
        assert!(buf.len() < 1000, "{} bytes", buf.len());
        let below = encoded(&f, 8192);
        assert_eq!(below[3] & FLAG_COMPRESSED, 0);
        assert_eq!(below.len(), FRAME_HEADER_BYTES + 5000);
    }

    #[test]
    fn every_truncation_asks_for_more_bytes() {
        for f in samples() {
            let whole = encoded(&f, 1024);
            for cut in 0..whole.len() {
                let mut buf = BytesMut::from(&whole[..cut]);
                assert_eq!(decode_frame(&mut buf, MAX_FRAME_PAYLOAD_BYTES), Ok(None));
                assert_eq!(buf.len(), cut, "a partial frame stays buffered");
            }
        }
    }

    #[test]
    fn two_frames_in_one_buffer_decode_in_order() {
        let a = frame(FrameKind::Request, b"first");
        let b = frame(FrameKind::Response, b"second");
        let mut buf = encoded(&a, 0);
        encode_frame(&b, 0, &mut buf);
        assert_eq!(decode_frame(&mut buf, 1 << 20), Ok(Some(a)));
        assert_eq!(decode_frame(&mut buf, 1 << 20), Ok(Some(b)));
        assert_eq!(decode_frame(&mut buf, 1 << 20), Ok(None));
    }

    /// Every single-bit flip of every byte of each sample is refused (by the header checksum
    /// in the header, the payload checksum in the payload): none is silently accepted, and none
    /// panics or waits for bytes that will never come.
    #[test]
    fn every_bit_flip_is_refused_without_panicking() {
        for f in samples() {
            let whole = encoded(&f, 1024);
            for i in 0..whole.len() {
                for bit in 0..8 {
                    let mut damaged = whole.clone();
                    damaged[i] ^= 1 << bit;
                    let result = decode_frame(&mut damaged, MAX_FRAME_PAYLOAD_BYTES);
                    assert!(
                        result.is_err(),
                        "flip of bit {bit} of byte {i} accepted: {result:?}"
                    );
                }
            }
        }
    }

    /// Rewrites header bytes and fixes the header checksum, so the field checks (not the
    /// checksum) must catch the damage.
    fn with_header(mut bytes: BytesMut, edit: impl FnOnce(&mut [u8])) -> BytesMut {
        edit(&mut bytes[..32]);
        let crc = crc32fast::hash(&bytes[..32]);
        bytes[32..36].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    /// A header edit and the error it must cause.
    type HeaderCase = (Box<dyn FnOnce(&mut [u8])>, fn(&FrameError) -> bool);

    #[test]
    fn hostile_headers_with_valid_checksums_are_refused() {
        let whole = encoded(&frame(FrameKind::Request, b"payload"), usize::MAX);
        let cases: Vec<HeaderCase> = vec![
            (Box::new(|h| h[2] = 9), |e| {
                matches!(e, FrameError::UnsupportedVersion(9))
            }),
            (Box::new(|h| h[3] = 0x80), |e| {
                matches!(e, FrameError::UnknownFlags(0x80))
            }),
            (Box::new(|h| h[6] = 1), |e| {
                matches!(e, FrameError::Reserved)
            }),
            (
                Box::new(|h| h[4..6].copy_from_slice(&600u16.to_be_bytes())),
                |e| matches!(e, FrameError::VerbOutOfRange(600)),
            ),
            (
                Box::new(|h| {
                    h[20..24].copy_from_slice(&u32::MAX.to_be_bytes());
                    h[24..28].copy_from_slice(&u32::MAX.to_be_bytes());
                }),
                |e| matches!(e, FrameError::TooLarge { .. }),
            ),
            (
                Box::new(|h| h[24..28].copy_from_slice(&3u32.to_be_bytes())),
                |e| matches!(e, FrameError::LengthMismatch { .. }),
            ),
            (Box::new(|h| h[0] = b'X'), |e| {
                matches!(e, FrameError::BadMagic(_))
            }),
        ];
        for (i, (edit, expected)) in cases.into_iter().enumerate() {
            let mut damaged = with_header(whole.clone(), edit);
            let e = decode_frame(&mut damaged, 1 << 20).expect_err("refused");
            assert!(expected(&e), "case {i}: {e}");
        }
    }

    #[test]
    fn an_oversize_length_is_refused_before_its_payload_arrives() {
        let f = frame(FrameKind::Request, &[1u8; 2000]);
        let whole = encoded(&f, usize::MAX);
        // Only the header is present: the cap is checked at once.
        let mut header_only = BytesMut::from(&whole[..FRAME_HEADER_BYTES]);
        assert_eq!(
            decode_frame(&mut header_only, 1000),
            Err(FrameError::TooLarge {
                length: 2000,
                cap: 1000
            })
        );
    }

    #[test]
    fn a_lying_uncompressed_length_is_refused() {
        let f = frame(FrameKind::Request, &[7u8; 5000]);
        let whole = encoded(&f, 0);
        assert_eq!(whole[3] & FLAG_COMPRESSED, FLAG_COMPRESSED);
        for lie in [0u32, 4999, 5001, 1 << 20] {
            let mut damaged = with_header(whole.clone(), |h| {
                h[24..28].copy_from_slice(&lie.to_be_bytes())
            });
            assert!(
                matches!(
                    decode_frame(&mut damaged, 1 << 20),
                    Err(FrameError::Decompression(_))
                ),
                "uncompressed length {lie}"
            );
        }
    }

    #[test]
    fn garbage_compressed_payloads_never_panic() {
        // Hostile lz4 bodies with correct checksums: every prefix of a pseudo-random stream.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut garbage = Vec::new();
        for _ in 0..300 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            garbage.push(x as u8);
        }
        for n in 0..garbage.len() {
            let body = &garbage[..n];
            let mut bytes = BytesMut::new();
            bytes.put_slice(&FRAME_MAGIC);
            bytes.put_u8(PROTOCOL_VERSION);
            bytes.put_u8(FLAG_COMPRESSED);
            bytes.put_u16(Verb::PING.id());
            bytes.put_u16(0);
            bytes.put_u64(1);
            bytes.put_u32(0);
            bytes.put_u32(n as u32);
            bytes.put_u32(4096);
            bytes.put_u32(crc32fast::hash(body));
            let crc = crc32fast::hash(&bytes[..32]);
            bytes.put_u32(crc);
            bytes.put_slice(body);
            let _ = decode_frame(&mut bytes, 1 << 20);
        }
    }
}
