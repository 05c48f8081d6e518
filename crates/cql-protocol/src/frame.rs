//! Frames ("envelopes"): the 9-byte header plus body, and [`FrameCodec`], which reads them
//! from and writes them to a connection's byte stream in either framing mode.
//!
//! Frame header (spec section 2), big-endian:
//! ```text
//! byte 0     version: 0x04/0x05 for requests, 0x84/0x85 for responses
//! byte 1     flags: 0x01 compressed (v4 only), 0x02 tracing, 0x04 custom payload,
//!            0x08 warning, 0x10 use beta
//! bytes 2..4 stream id, [short] signed
//! byte 4     opcode
//! bytes 5..9 body length, [int]
//! ```

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::ProtocolError;
pub use crate::header::{flags, opcode, Version};
use crate::response::Response;
use crate::segment;
use crate::wire::{put_string_list, Reader};

/// The frame header's length.
pub const HEADER_BYTES: usize = 9;

/// Direction bit of the version byte: set on responses.
const RESPONSE_BIT: u8 = 0x80;

/// Body compression negotiated in STARTUP. In v4 it applies to frame bodies; in v5 only LZ4
/// exists, and it applies to segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Lz4,
    Snappy,
}

/// A decoded request frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub version: Version,
    /// The header flags as received, minus COMPRESSION and CUSTOM_PAYLOAD: `body` is already
    /// decompressed and stripped of the custom payload.
    pub flags: u8,
    pub stream: i16,
    pub opcode: u8,
    /// The message, a zero-copy slice of the received bytes unless it was compressed.
    pub body: Bytes,
}

/// Reads request frames and writes response frames for one connection.
///
/// Starts in legacy framing (9-byte-header frames directly on the stream, used by v4 for the
/// whole connection and by v5 until READY); [`FrameCodec::switch_to_v5_segments`] moves it to
/// v5 segment framing. Decoding keeps at most one segment's frames
/// (≤ 128 KiB / 9 bytes of them) and one partial frame (≤ `max_frame_bytes`) buffered.
#[derive(Debug)]
pub struct FrameCodec {
    max_frame_bytes: usize,
    compression: Option<Compression>,
    segments: bool,
    /// Frames decoded from a self-contained segment but not yet returned.
    pending: VecDeque<Frame>,
    /// The start of a frame carried by non-self-contained segments.
    partial: BytesMut,
    /// Reused buffer for encoding a frame before compressing or segmenting it.
    scratch: BytesMut,
}

/// A parsed frame header.
struct Header {
    version: Version,
    flags: u8,
    stream: i16,
    opcode: u8,
    body_bytes: usize,
}

impl FrameCodec {
    /// `max_frame_bytes` bounds a request body (after decompression); larger frames are an
    /// error so that a client cannot make the server buffer unbounded input.
    pub fn new(max_frame_bytes: usize) -> Self {
        FrameCodec {
            max_frame_bytes,
            compression: None,
            segments: false,
            pending: VecDeque::new(),
            partial: BytesMut::new(),
            scratch: BytesMut::new(),
        }
    }

    /// Sets the compression negotiated in STARTUP; applies to frames after READY.
    pub fn set_compression(&mut self, c: Compression) {
        self.compression = Some(c);
    }

    /// Moves to v5 segment framing (after READY to a v5 STARTUP), in whichever direction this
    /// codec is used.
    pub fn switch_to_v5_segments(&mut self) {
        self.segments = true;
    }

    fn segment_lz4(&self) -> bool {
        self.compression == Some(Compression::Lz4)
    }

    /// The start of a frame is buffered here, its rest not yet read (a large v5 frame whose
    /// first segments have arrived): bytes of an incomplete frame that `decode`'s input no
    /// longer holds.
    pub fn has_incomplete_frame(&self) -> bool {
        !self.partial.is_empty()
    }

    /// Bytes of an incomplete frame held here (see `has_incomplete_frame`).
    pub fn incomplete_frame_held_bytes(&self) -> usize {
        self.partial.len()
    }

    /// The whole size (header and body) of the frame whose start has arrived, once its header
    /// has: in `buf` (legacy framing) or, in v5 segments, in this codec. `None` when no frame
    /// is begun or its header is incomplete, or when the frame is complete in `buf`. Lets a
    /// server account for a large frame before buffering it.
    pub fn incomplete_frame_bytes(&self, buf: &[u8]) -> Option<usize> {
        let header = if self.segments {
            self.partial.get(..HEADER_BYTES)?
        } else {
            buf.get(..HEADER_BYTES)?
        };
        let length = i32::from_be_bytes([header[5], header[6], header[7], header[8]]);
        let total = HEADER_BYTES + usize::try_from(length).ok()?;
        let held = if self.segments {
            self.partial.len()
        } else {
            buf.len()
        };
        (held < total).then_some(total)
    }

    /// Gives back the memory of buffers that grew for a large frame (a large request's start,
    /// a large response's encoding) once they are idle, keeping at most `keep_bytes` of each.
    pub fn shrink_idle_buffers(&mut self, keep_bytes: usize) {
        if self.scratch.capacity() > keep_bytes {
            self.scratch = BytesMut::new();
        }
        if self.partial.is_empty() && self.partial.capacity() > keep_bytes {
            self.partial = BytesMut::new();
        }
    }

    /// Takes the next complete request frame from `buf`, or returns `None` if more bytes are
    /// needed. An error means the stream cannot be read further: answer it and close.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, ProtocolError> {
        if let Some(frame) = self.pending.pop_front() {
            return Ok(Some(frame));
        }
        if self.segments {
            self.decode_segmented(buf)
        } else {
            self.decode_legacy(buf)
        }
    }

    fn decode_legacy(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, ProtocolError> {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let number = first & !RESPONSE_BIT;
        if number != 4 && number != 5 {
            // Answer early (garbage such as an HTTP request must not hang), but only once the
            // stream id can be read: a [byte] at offset 2 before v3, a [short] after.
            if buf.len() < 4 {
                return Ok(None);
            }
            let stream = if number < 3 {
                i16::from(buf[2] as i8)
            } else {
                i16::from_be_bytes([buf[2], buf[3]])
            };
            return Err(ProtocolError::UnsupportedVersion {
                version: number,
                stream,
            });
        }
        if buf.len() < HEADER_BYTES {
            return Ok(None);
        }
        let header = self.parse_header(&buf[..HEADER_BYTES])?;
        let total = HEADER_BYTES + header.body_bytes;
        if buf.len() < total {
            // No `reserve(total)` here: a 9-byte header must not make the server allocate up
            // to `max_frame_bytes` before the bytes arrive; the reader grows the buffer.
            return Ok(None);
        }
        let frame = buf.split_to(total).freeze();
        let body = frame.slice(HEADER_BYTES..);
        self.finish_frame(header, body).map(Some)
    }

    fn decode_segmented(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, ProtocolError> {
        loop {
            let Some(seg) = segment::decode_segment(buf, self.segment_lz4())? else {
                return Ok(None);
            };
            if seg.self_contained {
                if !self.partial.is_empty() {
                    return Err(ProtocolError::malformed(
                        "Received a self-contained segment while a large frame was incomplete",
                    ));
                }
                let mut payload = seg.payload;
                while !payload.is_empty() {
                    if payload.len() < HEADER_BYTES {
                        return Err(ProtocolError::malformed(
                            "Truncated frame header in a self-contained segment",
                        ));
                    }
                    let header = self.parse_segment_frame_header(&payload[..HEADER_BYTES])?;
                    let total = HEADER_BYTES + header.body_bytes;
                    if payload.len() < total {
                        return Err(ProtocolError::malformed(
                            "Truncated frame in a self-contained segment",
                        ));
                    }
                    let frame = payload.split_to(total);
                    let frame = self.finish_frame(header, frame.slice(HEADER_BYTES..))?;
                    self.pending.push_back(frame);
                }
                if let Some(frame) = self.pending.pop_front() {
                    return Ok(Some(frame));
                }
            } else {
                self.partial.extend_from_slice(&seg.payload);
                if self.partial.len() < HEADER_BYTES {
                    continue;
                }
                let header = self.parse_segment_frame_header(&self.partial[..HEADER_BYTES])?;
                let total = HEADER_BYTES + header.body_bytes;
                if self.partial.len() > total {
                    return Err(ProtocolError::malformed(
                        "Non-self-contained segments carried more than one frame",
                    ));
                }
                if self.partial.len() == total {
                    let frame = self.partial.split().freeze();
                    return self
                        .finish_frame(header, frame.slice(HEADER_BYTES..))
                        .map(Some);
                }
            }
        }
    }

    /// A frame header inside v5 segments: must be a v5 request.
    fn parse_segment_frame_header(&self, bytes: &[u8]) -> Result<Header, ProtocolError> {
        let number = bytes[0] & !RESPONSE_BIT;
        if number != 4 && number != 5 {
            return Err(ProtocolError::UnsupportedVersion {
                version: number,
                stream: i16::from_be_bytes([bytes[2], bytes[3]]),
            });
        }
        let header = self.parse_header(bytes)?;
        if header.version != Version::V5 {
            return Err(ProtocolError::malformed(
                "Invalid message version. Got v4 but previous messages on this connection had version v5",
            ));
        }
        Ok(header)
    }

    /// Parses 9 header bytes whose version number is known to be 4 or 5.
    fn parse_header(&self, bytes: &[u8]) -> Result<Header, ProtocolError> {
        if bytes[0] & RESPONSE_BIT != 0 {
            return Err(ProtocolError::WrongDirection);
        }
        let version = if bytes[0] == 4 {
            Version::V4
        } else {
            Version::V5
        };
        let length = i32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]);
        let body_bytes = usize::try_from(length)
            .map_err(|_| ProtocolError::malformed(format!("Invalid frame body length {length}")))?;
        if body_bytes > self.max_frame_bytes {
            return Err(ProtocolError::FrameTooBig {
                length_bytes: body_bytes as u64,
                max_bytes: self.max_frame_bytes,
            });
        }
        Ok(Header {
            version,
            flags: bytes[1],
            stream: i16::from_be_bytes([bytes[2], bytes[3]]),
            opcode: bytes[4],
            body_bytes,
        })
    }

    /// Decompresses a legacy v4 body and strips a custom payload.
    fn finish_frame(&self, header: Header, mut body: Bytes) -> Result<Frame, ProtocolError> {
        let mut frame_flags = header.flags;
        // v5 never compresses frame bodies (segments carry compression), so the flag is only
        // meaningful for v4, where Cassandra honours it.
        if frame_flags & flags::COMPRESSION != 0 && header.version == Version::V4 {
            body = match self.compression {
                Some(Compression::Lz4) => decompress_lz4_body(&body, self.max_frame_bytes)?,
                Some(Compression::Snappy) => decompress_snappy_body(&body, self.max_frame_bytes)?,
                None => {
                    return Err(ProtocolError::malformed(
                        "Received a compressed frame but no compression was negotiated",
                    ))
                }
            };
        }
        frame_flags &= !flags::COMPRESSION;
        if frame_flags & flags::CUSTOM_PAYLOAD != 0 {
            let mut reader = Reader::new(body);
            reader.skip_bytes_map()?;
            body = reader.rest();
            frame_flags &= !flags::CUSTOM_PAYLOAD;
        }
        Ok(Frame {
            version: header.version,
            flags: frame_flags,
            stream: header.stream,
            opcode: header.opcode,
            body,
        })
    }

    /// Appends the encoded response frame to `out`, in the codec's current framing.
    pub fn encode(
        &mut self,
        version: Version,
        stream: i16,
        response: &Response,
        out: &mut BytesMut,
    ) {
        self.encode_with_warnings(version, stream, response, &[], out);
    }

    /// Like [`FrameCodec::encode`], with client warnings: when `warnings` is not empty the
    /// frame has flag WARNING (0x08) and its body starts with them as a `[string list]`
    /// (spec section 2.2, v4+), before the message. In v4 with compression the list is
    /// compressed with the rest of the body.
    pub fn encode_with_warnings(
        &mut self,
        version: Version,
        stream: i16,
        response: &Response,
        warnings: &[String],
        out: &mut BytesMut,
    ) {
        let warning_flag = if warnings.is_empty() {
            0
        } else {
            flags::WARNING
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        if self.segments {
            write_frame(
                version,
                warning_flag,
                stream,
                response,
                warnings,
                &mut scratch,
            );
            segment::encode_segments(&scratch, self.segment_lz4(), out);
        } else {
            match self.compression.filter(|_| version == Version::V4) {
                None => write_frame(version, warning_flag, stream, response, warnings, out),
                Some(c) => {
                    write_body(version, response, warnings, &mut scratch);
                    let body = match c {
                        Compression::Lz4 => compress_lz4_body(&scratch),
                        Compression::Snappy => compress_snappy_body(&scratch),
                    };
                    write_header(
                        version,
                        flags::COMPRESSION | warning_flag,
                        stream,
                        response.opcode(),
                        body.len(),
                        out,
                    );
                    out.put_slice(&body);
                }
            }
        }
        self.scratch = scratch;
    }
}

fn write_header(
    version: Version,
    flags: u8,
    stream: i16,
    opcode: u8,
    body_bytes: usize,
    out: &mut BytesMut,
) {
    out.put_u8(RESPONSE_BIT | version.number());
    out.put_u8(flags);
    out.put_i16(stream);
    out.put_u8(opcode);
    out.put_i32(i32::try_from(body_bytes).expect("a response body is shorter than 2 GiB"));
}

/// Appends an uncompressed response frame, writing the body in place and then its length.
fn write_frame(
    version: Version,
    flags: u8,
    stream: i16,
    response: &Response,
    warnings: &[String],
    out: &mut BytesMut,
) {
    let start = out.len();
    write_header(version, flags, stream, response.opcode(), 0, out);
    write_body(version, response, warnings, out);
    let body_bytes = out.len() - start - HEADER_BYTES;
    let length = i32::try_from(body_bytes).expect("a response body is shorter than 2 GiB");
    out[start + 5..start + HEADER_BYTES].copy_from_slice(&length.to_be_bytes());
}

/// The frame body: the warnings' `[string list]` if there are any (the header says so with
/// flag WARNING), then the message.
fn write_body(version: Version, response: &Response, warnings: &[String], out: &mut BytesMut) {
    if !warnings.is_empty() {
        put_string_list(out, warnings);
    }
    response.encode_body(version, out);
}

/// v4 LZ4 body: `[int]` uncompressed length (big-endian), then one raw LZ4 block.
fn compress_lz4_body(body: &[u8]) -> Vec<u8> {
    let n = u32::try_from(body.len()).expect("a response body is shorter than 4 GiB");
    let mut out = n.to_be_bytes().to_vec();
    out.extend_from_slice(&lz4_flex::block::compress(body));
    out
}

fn decompress_lz4_body(body: &[u8], max_frame_bytes: usize) -> Result<Bytes, ProtocolError> {
    let Some((len, block)) = body.split_first_chunk::<4>() else {
        return Err(ProtocolError::Compression(
            "LZ4 body shorter than its 4-byte length".to_string(),
        ));
    };
    let uncompressed = u32::from_be_bytes(*len) as usize;
    if uncompressed > max_frame_bytes {
        return Err(ProtocolError::FrameTooBig {
            length_bytes: uncompressed as u64,
            max_bytes: max_frame_bytes,
        });
    }
    let mut out = vec![0u8; uncompressed];
    let n = lz4_flex::block::decompress_into(block, &mut out)
        .map_err(|e| ProtocolError::Compression(format!("LZ4 body: {e}")))?;
    if n != uncompressed {
        return Err(ProtocolError::Compression(format!(
            "LZ4 body decompressed to {n} bytes, expected {uncompressed}"
        )));
    }
    Ok(Bytes::from(out))
}

/// v4 Snappy body: the raw Snappy format (which carries its own length).
fn compress_snappy_body(body: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new()
        .compress_vec(body)
        .expect("a response body is within Snappy's 4 GiB limit")
}

fn decompress_snappy_body(body: &[u8], max_frame_bytes: usize) -> Result<Bytes, ProtocolError> {
    let uncompressed = snap::raw::decompress_len(body)
        .map_err(|e| ProtocolError::Compression(format!("Snappy body: {e}")))?;
    if uncompressed > max_frame_bytes {
        return Err(ProtocolError::FrameTooBig {
            length_bytes: uncompressed as u64,
            max_bytes: max_frame_bytes,
        });
    }
    snap::raw::Decoder::new()
        .decompress_vec(body)
        .map(Bytes::from)
        .map_err(|e| ProtocolError::Compression(format!("Snappy body: {e}")))
}
