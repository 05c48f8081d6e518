//! The message codec (`wire`): property round trips over generated messages (the generators of
//! `tests`, deterministic, so a failure reproduces from its case number), every truncation and
//! unknown versions refused, and garbage (random bytes, flipped bits, lying counts and lengths)
//! refused or decoded without a panic or an allocation the input does not justify.

use crate::tests::{gen_bound, gen_header, gen_raw_row, gen_row, Rng};
use crate::*;

const CASES: u64 = 5_000;

fn gen_bytes(r: &mut Rng) -> Vec<u8> {
    // Sometimes past 127 bytes, where a length takes two varint bytes.
    let len = if r.chance(8) {
        130
    } else {
        r.below(4) as usize
    };
    (0..len).map(|_| r.below(256) as u8).collect()
}

fn gen_token(r: &mut Rng) -> i64 {
    match r.below(4) {
        0 => i64::MIN,
        1 => i64::MAX,
        _ => r.next() as i64,
    }
}

fn gen_key(r: &mut Rng) -> PartitionKey {
    PartitionKey {
        token: gen_token(r),
        key: gen_bytes(r),
    }
}

fn gen_table(r: &mut Rng) -> TableId {
    TableId::from_u128(u128::from(r.next()) << 64 | u128::from(r.next()))
}

fn gen_rows(r: &mut Rng, raw: bool) -> Vec<(Vec<u8>, Row)> {
    (0..r.below(4))
        .map(|_| {
            let row = if raw { gen_raw_row(r) } else { gen_row(r) };
            (gen_bytes(r), row)
        })
        .collect()
}

/// An update; with `raw`, its rows as a writer might build them (any order, duplicates).
fn gen_update(r: &mut Rng, raw: bool) -> PartitionUpdate {
    PartitionUpdate {
        table: gen_table(r),
        key: gen_key(r),
        header: r.chance(2).then(|| gen_header(r)),
        static_row: r
            .chance(2)
            .then(|| if raw { gen_raw_row(r) } else { gen_row(r) }),
        rows: gen_rows(r, raw),
    }
}

fn gen_mutation(r: &mut Rng, raw: bool) -> Vec<PartitionUpdate> {
    (0..r.below(4)).map(|_| gen_update(r, raw)).collect()
}

fn gen_max_rows(r: &mut Rng) -> usize {
    match r.below(4) {
        0 => usize::MAX,
        1 => 1,
        _ => r.below(10_000) as usize,
    }
}

fn gen_command(r: &mut Rng) -> ReadCommand {
    if r.chance(2) {
        ReadCommand::Partition {
            table: gen_table(r),
            key: gen_key(r),
            slice: ClusteringSlice {
                start: gen_bound(r),
                end: gen_bound(r),
                reversed: r.chance(2),
            },
            max_rows: gen_max_rows(r),
            resume: r.chance(2).then(|| gen_bytes(r)),
        }
    } else {
        ReadCommand::Range {
            table: gen_table(r),
            start: match r.below(4) {
                0 => ScanStart::Beginning,
                1 => ScanStart::Token(gen_token(r)),
                2 => ScanStart::Resume(gen_bytes(r)),
                _ => ScanStart::After {
                    key: gen_key(r),
                    clustering: r.chance(2).then(|| gen_bytes(r)),
                },
            },
            end_token: r.chance(2).then(|| gen_token(r)),
            max_rows: gen_max_rows(r),
        }
    }
}

fn gen_partition_data(r: &mut Rng) -> PartitionData {
    PartitionData {
        key: gen_key(r),
        header: gen_header(r),
        static_row: r.chance(2).then(|| gen_row(r)),
        rows: gen_rows(r, false),
    }
}

fn gen_response(r: &mut Rng) -> ReadResponse {
    if r.chance(2) {
        ReadResponse::Partition(PartitionPage {
            data: gen_partition_data(r),
            resume: r.chance(2).then(|| gen_bytes(r)),
        })
    } else {
        ReadResponse::Range(ScanPage {
            partitions: (0..r.below(4)).map(|_| gen_partition_data(r)).collect(),
            resume: r.chance(2).then(|| gen_bytes(r)),
            last_partition_continues: r.chance(2),
        })
    }
}

fn mutation_bytes(updates: &[PartitionUpdate]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_mutation(updates, &mut out);
    out
}

fn command_bytes(command: &ReadCommand) -> Vec<u8> {
    let mut out = Vec::new();
    encode_read_command(command, &mut out);
    out
}

fn response_bytes(response: &ReadResponse) -> Vec<u8> {
    let mut out = Vec::new();
    encode_read_response(response, &mut out);
    out
}

#[test]
fn property_mutations_round_trip() {
    let mut r = Rng(0x5eed_0101);
    for case in 0..CASES {
        let updates = gen_mutation(&mut r, false);
        let bytes = mutation_bytes(&updates);
        assert_eq!(bytes[0], MUTATION_FORMAT_VERSION);
        assert_eq!(decode_mutation(&bytes), Ok(updates), "case {case}");
    }
}

#[test]
fn property_mutations_with_rows_in_any_order_arrive_normalized() {
    let mut r = Rng(0x5eed_0102);
    for case in 0..CASES {
        let updates = gen_mutation(&mut r, true);
        let mut expected = updates.clone();
        for update in &mut expected {
            update.static_row.iter_mut().for_each(Row::normalize);
            update.rows.iter_mut().for_each(|(_, row)| row.normalize());
        }
        let decoded = decode_mutation(&mutation_bytes(&updates));
        assert_eq!(decoded, Ok(expected), "case {case}");
    }
}

#[test]
fn property_read_commands_round_trip() {
    let mut r = Rng(0x5eed_0103);
    for case in 0..CASES {
        let command = gen_command(&mut r);
        let bytes = command_bytes(&command);
        assert_eq!(bytes[0], READ_COMMAND_FORMAT_VERSION);
        assert_eq!(decode_read_command(&bytes), Ok(command), "case {case}");
    }
}

#[test]
fn property_read_responses_round_trip() {
    let mut r = Rng(0x5eed_0104);
    for case in 0..CASES {
        let response = gen_response(&mut r);
        let bytes = response_bytes(&response);
        assert_eq!(bytes[0], READ_RESPONSE_FORMAT_VERSION);
        assert_eq!(decode_read_response(&bytes), Ok(response), "case {case}");
    }
}

type Decodes = fn(&[u8]) -> bool;

const MUTATION: Decodes = |b| decode_mutation(b).is_ok();
const COMMAND: Decodes = |b| decode_read_command(b).is_ok();
const RESPONSE: Decodes = |b| decode_read_response(b).is_ok();

/// Valid encodings of each message, with the decoder that must accept them.
fn samples(r: &mut Rng) -> [(Vec<u8>, Decodes); 3] {
    [
        (mutation_bytes(&gen_mutation(r, true)), MUTATION),
        (command_bytes(&gen_command(r)), COMMAND),
        (response_bytes(&gen_response(r)), RESPONSE),
    ]
}

#[test]
fn every_truncation_and_any_trailing_byte_is_refused() {
    let mut r = Rng(0x5eed_0105);
    for case in 0..500 {
        for (bytes, decodes) in samples(&mut r) {
            assert!(decodes(&bytes), "case {case}");
            for len in 0..bytes.len() {
                assert!(
                    !decodes(&bytes[..len]),
                    "case {case}: prefix of length {len} decoded"
                );
            }
            let mut extended = bytes.clone();
            extended.push(0);
            assert!(!decodes(&extended), "case {case}: trailing byte accepted");
        }
    }
}

#[test]
fn an_unknown_version_is_refused_by_name() {
    let mut r = Rng(0x5eed_0106);
    let [(mut mutation, _), (mut command, _), (mut response, _)] = samples(&mut r);
    mutation[0] = 2;
    command[0] = 0;
    response[0] = 0xff;
    let refused = |structure, version| MutationError::UnsupportedVersion {
        structure,
        version,
        supported: 1,
    };
    assert_eq!(decode_mutation(&mutation), Err(refused("mutation", 2)));
    assert_eq!(
        decode_read_command(&command),
        Err(refused("read command", 0))
    );
    assert_eq!(
        decode_read_response(&response),
        Err(refused("read response", 0xff))
    );
    let err = decode_mutation(&mutation).expect_err("version 2");
    assert_eq!(
        err.to_string(),
        "unsupported mutation format version 2 (this build reads version 1)"
    );
    // A row inside a message carries its own version, refused the same way.
    let update = PartitionUpdate {
        table: TableId::from_u128(1),
        key: PartitionKey {
            token: 0,
            key: vec![],
        },
        header: None,
        static_row: Some(Row::default()),
        rows: vec![],
    };
    let mut bytes = mutation_bytes(&[update]);
    // Version, count, table id, token, key length, flags, static row length: then the row.
    let row_at = 1 + 1 + 16 + 8 + 1 + 1 + 1;
    assert_eq!(bytes[row_at], ROW_FORMAT_VERSION);
    bytes[row_at] = 7;
    assert_eq!(
        decode_mutation(&bytes),
        Err(MutationError::UnsupportedVersion {
            structure: "row",
            version: 7,
            supported: 1
        })
    );
}

/// The error of decoding `bytes`, which must be refused as corrupt.
fn corrupt(decoded: Result<impl std::fmt::Debug, MutationError>) -> String {
    match decoded {
        Err(e @ MutationError::Corrupt { .. }) => e.to_string(),
        other => panic!("expected a corrupt message, got {other:?}"),
    }
}

#[test]
fn garbage_is_refused_saying_why() {
    assert!(corrupt(decode_mutation(&[])).contains("empty"));
    assert!(corrupt(decode_read_command(&[])).contains("empty"));
    assert!(corrupt(decode_read_response(&[])).contains("empty"));
    assert!(corrupt(decode_mutation(&[1])).contains("update count"));
    // Counts and lengths that the bytes present cannot hold are refused before anything is
    // allocated for them (a 4-billion-update vector would abort the test).
    let huge = [0xff, 0xff, 0xff, 0xff, 0x0f];
    let err = corrupt(decode_mutation(&[&[1][..], &huge].concat()));
    assert!(err.contains("update count 4294967295 cannot fit"), "{err}");
    let scan = [&[1, RESPONSE_SCAN][..], &huge].concat();
    assert!(corrupt(decode_read_response(&scan)).contains("partition count"));
    let mut lying_key = vec![1, 0];
    lying_key.extend_from_slice(&[0; 16]); // table id
    lying_key.extend_from_slice(&[0; 8]); // max rows
    lying_key.extend_from_slice(&[0; 8]); // token
    lying_key.extend_from_slice(&huge); // key length
    let err = corrupt(decode_read_command(&lying_key));
    assert!(
        err.contains("partition key needs 4294967295 bytes"),
        "{err}"
    );

    // Kinds, flags and booleans outside their values.
    let mut command = command_bytes(&ReadCommand::Range {
        table: TableId::from_u128(1),
        start: ScanStart::Beginning,
        end_token: None,
        max_rows: 10,
    });
    let kind_at = 1;
    let start_at = 1 + 1 + 16 + 8;
    let end_flag_at = start_at + 1;
    command[kind_at] = 9;
    assert!(corrupt(decode_read_command(&command)).contains("read kind"));
    command[kind_at] = 1;
    command[start_at] = 4;
    assert!(corrupt(decode_read_command(&command)).contains("scan start kind"));
    command[start_at] = 0;
    command[end_flag_at] = 2;
    assert!(corrupt(decode_read_command(&command)).contains("not 0 or 1"));
    command[end_flag_at] = 0;
    assert!(decode_read_command(&command).is_ok());

    let partition = ReadCommand::Partition {
        table: TableId::from_u128(1),
        key: PartitionKey {
            token: 0,
            key: vec![],
        },
        slice: ClusteringSlice::all(),
        max_rows: 1,
        resume: None,
    };
    let mut command = command_bytes(&partition);
    let slice_at = 1 + 1 + 16 + 8 + 8 + 1;
    for bad in [SLICE_INCLUSIVE_WITHOUT_START, 0x20, 0x80] {
        command[slice_at] = bad;
        assert!(corrupt(decode_read_command(&command)).contains("slice flags"));
    }

    let mut mutation = mutation_bytes(&[PartitionUpdate {
        table: TableId::from_u128(1),
        key: PartitionKey {
            token: 0,
            key: vec![],
        },
        header: None,
        static_row: None,
        rows: vec![],
    }]);
    let flags_at = 1 + 1 + 16 + 8 + 1;
    mutation[flags_at] = 0x04;
    assert!(corrupt(decode_mutation(&mutation)).contains("update flags"));

    let response = [1, 7];
    assert!(corrupt(decode_read_response(&response)).contains("response kind"));

    // A corrupt row inside a message: the message's error, at the offset in the message.
    let mut mutation = mutation_bytes(&[PartitionUpdate {
        table: TableId::from_u128(1),
        key: PartitionKey {
            token: 0,
            key: vec![],
        },
        header: None,
        static_row: Some(Row::default()),
        rows: vec![],
    }]);
    let row_flags_at = flags_at + 1 + 1 + 1; // update flags, row length, row version
    mutation[row_flags_at] = 0x80;
    assert_eq!(
        decode_mutation(&mutation),
        Err(MutationError::Corrupt {
            structure: "mutation",
            offset: row_flags_at + 1,
            detail: "static row (row): invalid row flags 0x80".to_string(),
        })
    );
}

/// Slice flags with "start inclusive" but no start.
const SLICE_INCLUSIVE_WITHOUT_START: u8 = 0x02;
/// The scan page kind byte of a read response.
const RESPONSE_SCAN: u8 = 0x01;

#[test]
fn random_bytes_and_flipped_bits_never_panic() {
    let mut r = Rng(0x5eed_0107);
    let mut flipped_refused = 0;
    for _ in 0..2_000 {
        // Random bytes after each version byte: refused, or a message whose encoding decodes
        // (to the same value where no row is involved: a decoded row may still hold data its
        // deletion shadows, which encoding normalizes away).
        let len = r.below(64) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| r.below(256) as u8).collect();
        bytes.insert(0, 1);
        if let Ok(m) = decode_mutation(&bytes) {
            assert!(decode_mutation(&mutation_bytes(&m)).is_ok(), "{m:?}");
        }
        if let Ok(c) = decode_read_command(&bytes) {
            assert_eq!(decode_read_command(&command_bytes(&c)), Ok(c));
        }
        if let Ok(p) = decode_read_response(&bytes) {
            assert!(decode_read_response(&response_bytes(&p)).is_ok(), "{p:?}");
        }
        for (mut bytes, decodes) in samples(&mut r) {
            let i = r.below(bytes.len() as u64) as usize;
            bytes[i] ^= 1 << r.below(8);
            flipped_refused += usize::from(!decodes(&bytes));
        }
    }
    assert!(flipped_refused > 1_000, "{flipped_refused}");
}
