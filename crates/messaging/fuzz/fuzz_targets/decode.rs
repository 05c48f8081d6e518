//! Feeds arbitrary bytes to every decoder of what a peer sends (`messaging::check_decoders`:
//! a frame, a handshake hello and reply, a response, the built-in verbs' request payloads).
//! Any input must decode or be refused, never panic or allocate beyond `-rss_limit_mb`;
//! whatever decodes must encode to bytes that decode to the same value. Run with
//! `cargo +nightly fuzz run decode` from `crates/messaging` (see the README's Fuzzing section).
//! Each input runs on a thread of `budget::STACK_SIZE_BYTES`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../../cql-syntax/fuzz/budget.rs"]
mod budget;

fuzz_target!(|data: &[u8]| {
    let data = data.to_vec();
    budget::run(move || messaging::check_decoders(&data));
});
