//! Feeds arbitrary bytes to every decoder of `mutation`: the storage values (`decode_row`,
//! `decode_partition_header`) and the messages between nodes (`decode_mutation`,
//! `decode_read_command`, `decode_read_response`). Any input must decode or be refused, never
//! panic or allocate beyond `-rss_limit_mb`; whatever decodes must encode to bytes that decode
//! again, to the same value (messages with rows: to the same encoding, as encoding normalizes
//! a row). Run with `cargo +nightly fuzz run decode` from `crates/mutation` (see the README's
//! Fuzzing section). Each input runs on a thread of `budget::STACK_SIZE_BYTES`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mutation::{
    decode_mutation, decode_partition_header, decode_read_command, decode_read_response,
    decode_row, encode_mutation, encode_partition_header, encode_read_command,
    encode_read_response, encode_row,
};

#[path = "../../../cql-syntax/fuzz/budget.rs"]
mod budget;

fuzz_target!(|data: &[u8]| {
    let data = data.to_vec();
    budget::run(move || decode(&data));
});

/// `encode` then `decode`, which must succeed.
fn again<T, E: std::fmt::Debug>(
    value: &T,
    encode: fn(&T, &mut Vec<u8>),
    decode: fn(&[u8]) -> Result<T, E>,
) -> (Vec<u8>, T) {
    let mut bytes = Vec::new();
    encode(value, &mut bytes);
    let decoded = decode(&bytes).expect("an encoding decodes");
    (bytes, decoded)
}

fn decode(data: &[u8]) {
    if let Ok(row) = decode_row(data) {
        assert_eq!(again(&row, encode_row, decode_row).1, row);
    }
    if let Ok(header) = decode_partition_header(data) {
        let (_, decoded) = again(&header, encode_partition_header, decode_partition_header);
        assert_eq!(decoded, header);
    }
    if let Ok(command) = decode_read_command(data) {
        assert_eq!(
            again(&command, encode_read_command, decode_read_command).1,
            command
        );
    }
    if let Ok(updates) = decode_mutation(data) {
        let encode = |u: &Vec<_>, out: &mut Vec<u8>| encode_mutation(u, out);
        let (bytes, decoded) = again(&updates, encode, decode_mutation);
        assert_eq!(again(&decoded, encode, decode_mutation).0, bytes);
    }
    if let Ok(response) = decode_read_response(data) {
        let (bytes, decoded) = again(&response, encode_read_response, decode_read_response);
        assert_eq!(
            again(&decoded, encode_read_response, decode_read_response).0,
            bytes
        );
    }
}
