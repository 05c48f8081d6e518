//! Every decoder of bytes from a peer, run on one input, for the fuzz target (`fuzz/`) and the
//! unit test below that runs it over damaged encodings.

use bytes::{Bytes, BytesMut};

use crate::codec;
use crate::frame::{decode_frame, encode_frame};
use crate::handshake::{Hello, Reply};

/// The cap the frame decoder runs with here: large enough for any fuzz input, small enough
/// that a hostile length is refused rather than allocated.
const FUZZ_CAP_BYTES: usize = 1 << 20;

/// Decodes `data` as each thing a peer sends (a frame, a handshake hello or reply body, a
/// response payload, each built-in verb's request payload). Any input must decode or be
/// refused, never panic; whatever decodes must encode to bytes that decode to the same value.
/// Panics only if one of those invariants breaks.
pub fn check_decoders(data: &[u8]) {
    let mut buffer = BytesMut::from(data);
    if let Ok(Some(frame)) = decode_frame(&mut buffer, FUZZ_CAP_BYTES) {
        for threshold in [0, usize::MAX] {
            let mut encoded = BytesMut::new();
            encode_frame(&frame, threshold, &mut encoded);
            let again = decode_frame(&mut encoded, FUZZ_CAP_BYTES);
            assert_eq!(again, Ok(Some(frame.clone())), "a frame re-encodes");
        }
    }
    if let Ok(hello) = Hello::decode(data) {
        let encoded = hello.encode();
        let body = &encoded[6..encoded.len() - 4];
        assert_eq!(Hello::decode(body).ok(), Some(hello), "a hello re-encodes");
    }
    if let Ok(reply) = Reply::decode(data) {
        let encoded = reply.encode();
        let body = &encoded[6..encoded.len() - 4];
        assert_eq!(Reply::decode(body).ok(), Some(reply), "a reply re-encodes");
    }
    if let Ok(Err(error)) = codec::decode_response(Bytes::copy_from_slice(data)) {
        let again = codec::decode_response(codec::encode_error(&error));
        assert_eq!(again, Ok(Err(error)), "an error response re-encodes");
    }
    if let Ok(mutation) = codec::decode_mutation_request(data) {
        let again = codec::decode_mutation_request(&codec::encode_mutation_request(&mutation))
            .expect("an encoded mutation decodes");
        assert_eq!(again.durable_writes, mutation.durable_writes);
        assert_eq!(again.updates.len(), mutation.updates.len());
    }
    if let Ok(batch) = codec::decode_batch_store_request(data) {
        let again = codec::decode_batch_store_request(&codec::encode_batch_store_request(&batch));
        assert_eq!(again, Ok(batch), "a batch re-encodes");
    }
    if let Ok(command) = codec::decode_read_request(data) {
        let again = codec::decode_read_request(&codec::encode_read_request(&command));
        assert_eq!(again, Ok(command), "a read command re-encodes");
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use bytes::Bytes;
    use coordinator::ReplicaError;
    use locator::HostId;

    use super::*;
    use crate::codec::RemoteError;
    use crate::frame::{Frame, FrameKind};
    use crate::handshake::ConnectionType;
    use crate::verb::Verb;

    fn seeds() -> Vec<Vec<u8>> {
        let mut seeds = Vec::new();
        for (payload, threshold) in [(vec![], 0), (vec![9u8; 3000], 100), (b"abc".to_vec(), 0)] {
            let mut frame = BytesMut::new();
            let f = Frame {
                kind: FrameKind::Request,
                verb: Verb::READ,
                request_id: 77,
                expires_in_ms: 5,
                payload: Bytes::from(payload),
            };
            encode_frame(&f, threshold, &mut frame);
            seeds.push(frame.to_vec());
        }
        let address: SocketAddr = "10.0.0.1:7000".parse().unwrap();
        let hello = Hello {
            min_version: 1,
            max_version: 1,
            connection_type: ConnectionType::Small,
            host_id: HostId(uuid::Uuid::from_u128(5)),
            broadcast_address: address,
            cluster_name: "c".into(),
            lane: 0,
        };
        let encoded = hello.encode();
        seeds.push(encoded[6..encoded.len() - 4].to_vec());
        let reply = Reply::Refused {
            host_id: HostId(uuid::Uuid::from_u128(6)),
            reason: "no".into(),
        };
        let encoded = reply.encode();
        seeds.push(encoded[6..encoded.len() - 4].to_vec());
        seeds.push(
            codec::encode_error(&RemoteError::Replica(ReplicaError::Storage("x".into()))).to_vec(),
        );
        seeds.push(vec![1, 1, 0]);
        let update = mutation::PartitionUpdate {
            table: uuid::Uuid::from_u128(3),
            key: mutation::PartitionKey {
                token: 1,
                key: b"k".to_vec(),
            },
            header: None,
            static_row: None,
            rows: Vec::new(),
        };
        let batch = coordinator::Batch::encode(
            coordinator::BatchId::new(1_000, HostId(uuid::Uuid::from_u128(5))),
            &[&[update]],
        );
        seeds.push(codec::encode_batch_store_request(&batch).to_vec());
        seeds
    }

    /// A cheap stand-in for the fuzzer in every test run: each seed, truncated at every
    /// length and with pseudo-random bytes overwritten, through every decoder.
    #[test]
    fn damaged_encodings_never_break_a_decoder() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for seed in seeds() {
            for cut in 0..=seed.len() {
                check_decoders(&seed[..cut]);
            }
            for _ in 0..2000 {
                let mut damaged = seed.clone();
                let changes = 1 + next() % 3;
                for _ in 0..changes {
                    if damaged.is_empty() {
                        break;
                    }
                    let at = (next() % damaged.len() as u64) as usize;
                    damaged[at] = next() as u8;
                }
                check_decoders(&damaged);
            }
        }
    }
}
