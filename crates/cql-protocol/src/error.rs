//! Errors raised while decoding client bytes. Each one closes the connection or fails one
//! request with a protocol error, so the `Display` text is what the client reads.

use thiserror::Error;

/// A violation of the native protocol by the client. The `Display` text is sent to the client
/// as the message of a `Protocol error` (0x000A) ERROR response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// The version byte was not 4 or 5 (masked of its direction bit). `stream` is read from the
    /// header bytes where the client put it, so the error can be answered on that stream.
    #[error(
        "Invalid or unsupported protocol version ({version}); supported versions are (4/v4, 5/v5)"
    )]
    UnsupportedVersion { version: u8, stream: i16 },
    /// A request frame had the response direction bit (0x80) set in its version byte.
    #[error("Wrong protocol direction (expected REQUEST, got RESPONSE)")]
    WrongDirection,
    /// A frame declared a body longer than the configured maximum.
    #[error(
        "Request is too big: length {length_bytes} exceeds maximum allowed length {max_bytes}"
    )]
    FrameTooBig { length_bytes: u64, max_bytes: usize },
    /// The bytes do not follow the protocol's layout.
    #[error("{0}")]
    Malformed(String),
    /// A v5 segment header failed its CRC24 check.
    #[error(
        "Corrupt v5 segment header: CRC24 mismatch (read {read:#08x}, computed {computed:#08x})"
    )]
    HeaderCrcMismatch { read: u32, computed: u32 },
    /// A v5 segment payload failed its CRC32 check.
    #[error(
        "Corrupt v5 segment payload: CRC32 mismatch (read {read:#010x}, computed {computed:#010x})"
    )]
    PayloadCrcMismatch { read: u32, computed: u32 },
    /// A compressed body or segment could not be decompressed.
    #[error("Compression error: {0}")]
    Compression(String),
}

impl ProtocolError {
    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        ProtocolError::Malformed(message.into())
    }
}
