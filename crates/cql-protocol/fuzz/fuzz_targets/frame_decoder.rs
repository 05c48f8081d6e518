//! Feeds arbitrary bytes through `FrameCodec::decode` in every framing mode, and every decoded
//! frame (plus the raw input as a body) through `Request::decode`. Run with
//! `cargo +nightly fuzz run frame_decoder` from `crates/cql-protocol` (see the README's
//! Fuzzing section for the budgets). Each input runs on a thread of `budget::STACK_SIZE_BYTES`.

#![no_main]

use bytes::{Bytes, BytesMut};
use cql_protocol::{Compression, FrameCodec, Request, Version};
use libfuzzer_sys::fuzz_target;

#[path = "../../../cql-syntax/fuzz/budget.rs"]
mod budget;

/// Small enough that length checks are exercised, large enough for real frames.
const MAX_FRAME_BYTES: usize = 1024 * 1024;

fuzz_target!(|data: &[u8]| {
    let data = data.to_vec();
    budget::run(move || decode(&data));
});

fn decode(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    // Request bodies directly, for both versions.
    for version in [Version::V4, Version::V5] {
        let _ = Request::decode(version, selector & 0x1f, Bytes::copy_from_slice(rest));
    }
    // Framing: legacy / legacy+lz4 / legacy+snappy / v5 segments / v5 segments+lz4.
    let mut codec = FrameCodec::new(MAX_FRAME_BYTES);
    match selector % 5 {
        0 => {}
        1 => codec.set_compression(Compression::Lz4),
        2 => codec.set_compression(Compression::Snappy),
        3 => codec.switch_to_v5_segments(),
        _ => {
            codec.set_compression(Compression::Lz4);
            codec.switch_to_v5_segments();
        }
    }
    // Feed in two pieces to exercise partial input.
    let split = (selector as usize).min(rest.len());
    let mut buf = BytesMut::from(&rest[..split]);
    for chunk in [&rest[split..], &[][..]] {
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => {
                    let _ = Request::decode(frame.version, frame.opcode, frame.body);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
        buf.extend_from_slice(chunk);
    }
}
