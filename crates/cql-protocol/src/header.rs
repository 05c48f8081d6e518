//! What every message's header names: the protocol version, the opcode and the flags (spec
//! sections 2.1 to 2.4). A leaf: the frame codec, requests and responses all speak of these.

/// Message opcodes (spec section 2.4).
pub mod opcode {
    pub const ERROR: u8 = 0x00;
    pub const STARTUP: u8 = 0x01;
    pub const READY: u8 = 0x02;
    pub const AUTHENTICATE: u8 = 0x03;
    pub const OPTIONS: u8 = 0x05;
    pub const SUPPORTED: u8 = 0x06;
    pub const QUERY: u8 = 0x07;
    pub const RESULT: u8 = 0x08;
    pub const PREPARE: u8 = 0x09;
    pub const EXECUTE: u8 = 0x0A;
    pub const REGISTER: u8 = 0x0B;
    pub const EVENT: u8 = 0x0C;
    pub const BATCH: u8 = 0x0D;
    pub const AUTH_CHALLENGE: u8 = 0x0E;
    pub const AUTH_RESPONSE: u8 = 0x0F;
    pub const AUTH_SUCCESS: u8 = 0x10;

    /// The message's name, as Cassandra's `Message.Type` (and so its errors) calls it.
    pub fn name(opcode: u8) -> &'static str {
        match opcode {
            ERROR => "ERROR",
            STARTUP => "STARTUP",
            READY => "READY",
            AUTHENTICATE => "AUTHENTICATE",
            OPTIONS => "OPTIONS",
            SUPPORTED => "SUPPORTED",
            QUERY => "QUERY",
            RESULT => "RESULT",
            PREPARE => "PREPARE",
            EXECUTE => "EXECUTE",
            REGISTER => "REGISTER",
            EVENT => "EVENT",
            BATCH => "BATCH",
            AUTH_CHALLENGE => "AUTH_CHALLENGE",
            AUTH_RESPONSE => "AUTH_RESPONSE",
            AUTH_SUCCESS => "AUTH_SUCCESS",
            _ => "UNKNOWN",
        }
    }
}

/// Frame header flags (spec section 2.2).
pub mod flags {
    pub const COMPRESSION: u8 = 0x01;
    pub const TRACING: u8 = 0x02;
    pub const CUSTOM_PAYLOAD: u8 = 0x04;
    pub const WARNING: u8 = 0x08;
    pub const USE_BETA: u8 = 0x10;
}

/// A protocol version this server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    V4,
    V5,
}

impl Version {
    /// The version number as in the low 7 bits of the version byte.
    pub fn number(self) -> u8 {
        match self {
            Version::V4 => 4,
            Version::V5 => 5,
        }
    }
}
