//! Unit tests: framing in both modes, every request through a test-only encoder, response
//! byte layouts checked against hand-written bytes, and a no-panic test over random input.

use std::net::{IpAddr, Ipv4Addr};

use bytes::{BufMut, Bytes, BytesMut};
use types::{CqlType, UdtType};

use crate::frame::{flags, opcode, HEADER_BYTES};
use crate::segment::{self, crc24, crc32, MAX_SEGMENT_PAYLOAD_BYTES};
use crate::wire::{put_bytes, put_long_string, put_short_bytes, put_string, put_string_list};
use crate::*;

const MAX: usize = 256 * 1024 * 1024;

// ---- a test-only client: request encoder ---------------------------------------------------

fn put_value(out: &mut BytesMut, v: &RawValue) {
    match v {
        RawValue::Null => out.put_i32(-1),
        RawValue::NotSet => out.put_i32(-2),
        RawValue::Value(b) => put_bytes(out, Some(b)),
    }
}

fn put_flags(version: Version, flags: u32, out: &mut BytesMut) {
    match version {
        Version::V4 => out.put_u8(flags as u8),
        Version::V5 => out.put_u32(flags),
    }
}

fn put_params(version: Version, p: &QueryParameters, out: &mut BytesMut) {
    let mut f = 0u32;
    let has_values = match &p.values {
        Values::Positional(v) => !v.is_empty(),
        Values::Named(_) => true,
    };
    if has_values {
        f |= 0x01;
    }
    if matches!(p.values, Values::Named(_)) {
        f |= 0x40;
    }
    if p.skip_metadata {
        f |= 0x02;
    }
    if p.page_size.is_some() {
        f |= 0x04;
    }
    if p.paging_state.is_some() {
        f |= 0x08;
    }
    if p.serial_consistency.is_some() {
        f |= 0x10;
    }
    if p.default_timestamp.is_some() {
        f |= 0x20;
    }
    if p.keyspace.is_some() {
        f |= 0x80;
    }
    if p.now_in_seconds.is_some() {
        f |= 0x100;
    }
    out.put_u16(p.consistency.code());
    put_flags(version, f, out);
    if has_values {
        match &p.values {
            Values::Positional(v) => {
                out.put_u16(v.len() as u16);
                v.iter().for_each(|v| put_value(out, v));
            }
            Values::Named(v) => {
                out.put_u16(v.len() as u16);
                for (n, v) in v {
                    put_string(out, n);
                    put_value(out, v);
                }
            }
        }
    }
    if let Some(n) = p.page_size {
        out.put_i32(n);
    }
    if let Some(s) = &p.paging_state {
        put_bytes(out, Some(s));
    }
    if let Some(c) = p.serial_consistency {
        out.put_u16(c.code());
    }
    if let Some(t) = p.default_timestamp {
        out.put_i64(t);
    }
    if let Some(k) = &p.keyspace {
        put_string(out, k);
    }
    if let Some(n) = p.now_in_seconds {
        out.put_i32(n);
    }
}

fn encode_request(version: Version, req: &Request) -> (u8, BytesMut) {
    let mut out = BytesMut::new();
    let op = match req {
        Request::Startup(options) => {
            out.put_u16(options.len() as u16);
            for (k, v) in options {
                put_string(&mut out, k);
                put_string(&mut out, v);
            }
            opcode::STARTUP
        }
        Request::Options => opcode::OPTIONS,
        Request::Query { query, params } => {
            put_long_string(&mut out, query);
            put_params(version, params, &mut out);
            opcode::QUERY
        }
        Request::Prepare { query, keyspace } => {
            put_long_string(&mut out, query);
            if version == Version::V5 {
                out.put_u32(u32::from(keyspace.is_some()));
                if let Some(k) = keyspace {
                    put_string(&mut out, k);
                }
            }
            opcode::PREPARE
        }
        Request::Execute {
            id,
            result_metadata_id,
            params,
        } => {
            put_short_bytes(&mut out, id);
            if let Some(r) = result_metadata_id {
                put_short_bytes(&mut out, r);
            }
            put_params(version, params, &mut out);
            opcode::EXECUTE
        }
        Request::Batch(b) => {
            out.put_u8(match b.kind {
                BatchKind::Logged => 0,
                BatchKind::Unlogged => 1,
                BatchKind::Counter => 2,
            });
            out.put_u16(b.statements.len() as u16);
            for s in &b.statements {
                match &s.kind {
                    BatchStatementKind::Query(q) => {
                        out.put_u8(0);
                        put_long_string(&mut out, q);
                    }
                    BatchStatementKind::Prepared(id) => {
                        out.put_u8(1);
                        put_short_bytes(&mut out, id);
                    }
                }
                let Values::Positional(values) = &s.values else {
                    panic!("batch values are positional")
                };
                out.put_u16(values.len() as u16);
                values.iter().for_each(|v| put_value(&mut out, v));
            }
            out.put_u16(b.consistency.code());
            let mut f = 0;
            if b.serial_consistency.is_some() {
                f |= 0x10;
            }
            if b.default_timestamp.is_some() {
                f |= 0x20;
            }
            if b.keyspace.is_some() {
                f |= 0x80;
            }
            if b.now_in_seconds.is_some() {
                f |= 0x100;
            }
            put_flags(version, f, &mut out);
            if let Some(c) = b.serial_consistency {
                out.put_u16(c.code());
            }
            if let Some(t) = b.default_timestamp {
                out.put_i64(t);
            }
            if let Some(k) = &b.keyspace {
                put_string(&mut out, k);
            }
            if let Some(n) = b.now_in_seconds {
                out.put_i32(n);
            }
            opcode::BATCH
        }
        Request::Register { events } => {
            put_string_list(&mut out, events);
            opcode::REGISTER
        }
        Request::AuthResponse(token) => {
            put_bytes(&mut out, token.as_deref());
            opcode::AUTH_RESPONSE
        }
    };
    (op, out)
}

fn frame_bytes(version_byte: u8, frame_flags: u8, stream: i16, op: u8, body: &[u8]) -> BytesMut {
    let mut out = BytesMut::new();
    out.put_u8(version_byte);
    out.put_u8(frame_flags);
    out.put_i16(stream);
    out.put_u8(op);
    out.put_i32(body.len() as i32);
    out.put_slice(body);
    out
}

fn request_frame(version: Version, stream: i16, req: &Request) -> BytesMut {
    let (op, body) = encode_request(version, req);
    frame_bytes(version.number(), 0, stream, op, &body)
}

fn decode_one(codec: &mut FrameCodec, bytes: &[u8]) -> Frame {
    let mut buf = BytesMut::from(bytes);
    let frame = codec.decode(&mut buf).expect("valid").expect("complete");
    assert!(buf.is_empty(), "frame consumed exactly");
    frame
}

fn value(b: &'static [u8]) -> RawValue {
    RawValue::Value(Bytes::from_static(b))
}

fn full_params(version: Version, named: bool) -> QueryParameters {
    let v5 = version == Version::V5;
    QueryParameters {
        consistency: Consistency::LocalQuorum,
        values: if named {
            Values::Named(vec![
                ("a".into(), value(b"\x00\x00\x00\x01")),
                ("b".into(), RawValue::Null),
            ])
        } else {
            Values::Positional(vec![
                value(b"xyz"),
                RawValue::Null,
                RawValue::NotSet,
                value(b""),
            ])
        },
        skip_metadata: true,
        page_size: Some(5000),
        paging_state: Some(Bytes::from_static(b"\x01\x02")),
        serial_consistency: Some(Consistency::LocalSerial),
        default_timestamp: Some(1_700_000_000_000_000),
        keyspace: v5.then(|| "ks".to_string()),
        now_in_seconds: v5.then_some(1234),
    }
}

fn minimal_params() -> QueryParameters {
    QueryParameters {
        consistency: Consistency::One,
        values: Values::Positional(vec![]),
        skip_metadata: false,
        page_size: None,
        paging_state: None,
        serial_consistency: None,
        default_timestamp: None,
        keyspace: None,
        now_in_seconds: None,
    }
}

fn all_requests(version: Version) -> Vec<Request> {
    let v5 = version == Version::V5;
    vec![
        Request::Startup(vec![
            ("CQL_VERSION".into(), "3.0.0".into()),
            ("COMPRESSION".into(), "lz4".into()),
        ]),
        Request::Options,
        Request::Query {
            query: "SELECT * FROM t".into(),
            params: minimal_params(),
        },
        Request::Query {
            query: "SELECT * FROM t WHERE k = ?".into(),
            params: full_params(version, false),
        },
        Request::Query {
            query: "SELECT * FROM t WHERE a = :a AND b = :b".into(),
            params: full_params(version, true),
        },
        Request::Prepare {
            query: "INSERT INTO t (k) VALUES (?)".into(),
            keyspace: v5.then(|| "ks".to_string()),
        },
        Request::Prepare {
            query: "SELECT 1".into(),
            keyspace: None,
        },
        Request::Execute {
            id: Bytes::from_static(&[0xAB; 16]),
            result_metadata_id: v5.then(|| Bytes::from_static(&[0xCD; 16])),
            params: full_params(version, false),
        },
        Request::Batch(Batch {
            kind: BatchKind::Unlogged,
            statements: vec![
                BatchStatement {
                    kind: BatchStatementKind::Query("INSERT INTO t (k) VALUES (?)".into()),
                    values: Values::Positional(vec![value(b"\x00\x00\x00\x07")]),
                },
                BatchStatement {
                    kind: BatchStatementKind::Prepared(Bytes::from_static(b"0123456789abcdef")),
                    values: Values::Positional(vec![RawValue::NotSet, RawValue::Null]),
                },
            ],
            consistency: Consistency::Quorum,
            serial_consistency: Some(Consistency::Serial),
            default_timestamp: Some(42),
            keyspace: v5.then(|| "ks".to_string()),
            now_in_seconds: v5.then_some(99),
        }),
        Request::Batch(Batch {
            kind: BatchKind::Counter,
            statements: vec![],
            consistency: Consistency::Any,
            serial_consistency: None,
            default_timestamp: None,
            keyspace: None,
            now_in_seconds: None,
        }),
        Request::Register {
            events: vec!["SCHEMA_CHANGE".into(), "STATUS_CHANGE".into()],
        },
        Request::AuthResponse(Some(Bytes::from_static(b"\0cassandra\0cassandra"))),
        Request::AuthResponse(None),
    ]
}

// ---- requests ------------------------------------------------------------------------------

#[test]
fn every_request_round_trips_in_legacy_framing() {
    for version in [Version::V4, Version::V5] {
        for (i, req) in all_requests(version).into_iter().enumerate() {
            let mut codec = FrameCodec::new(MAX);
            let frame = decode_one(&mut codec, &request_frame(version, i as i16, &req));
            assert_eq!(frame.version, version);
            assert_eq!(frame.stream, i as i16);
            let decoded = Request::decode(frame.version, frame.opcode, frame.body).unwrap();
            assert_eq!(decoded, req, "{version:?} request {i}");
        }
    }
}

#[test]
fn every_request_round_trips_in_v5_segments() {
    for lz4 in [false, true] {
        let mut codec = FrameCodec::new(MAX);
        if lz4 {
            codec.set_compression(Compression::Lz4);
        }
        codec.switch_to_v5_segments();
        // All requests in one self-contained segment.
        let requests = all_requests(Version::V5);
        let mut frames = BytesMut::new();
        for (i, req) in requests.iter().enumerate() {
            frames.extend_from_slice(&request_frame(Version::V5, i as i16, req));
        }
        let mut buf = BytesMut::new();
        segment::encode_segments(&frames, lz4, &mut buf);
        for (i, req) in requests.iter().enumerate() {
            let frame = codec.decode(&mut buf).unwrap().expect("frame");
            assert_eq!(frame.stream, i as i16);
            assert_eq!(
                &Request::decode(Version::V5, frame.opcode, frame.body).unwrap(),
                req
            );
        }
        assert!(buf.is_empty());
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
    }
}

#[test]
fn values_are_slices_of_the_frame() {
    let req = Request::Query {
        query: "q".into(),
        params: full_params(Version::V4, false),
    };
    let bytes = request_frame(Version::V4, 0, &req).freeze();
    let mut buf = BytesMut::from(&bytes[..]);
    let frame = FrameCodec::new(MAX).decode(&mut buf).unwrap().unwrap();
    let body_ptr = frame.body.as_ptr() as usize;
    let body_end = body_ptr + frame.body.len();
    let Request::Query { params, .. } =
        Request::decode(Version::V4, frame.opcode, frame.body).unwrap()
    else {
        panic!()
    };
    let Values::Positional(values) = params.values else {
        panic!()
    };
    let RawValue::Value(v) = &values[0] else {
        panic!()
    };
    let p = v.as_ptr() as usize;
    assert!(
        p >= body_ptr && p < body_end,
        "value points into the frame body"
    );
}

#[test]
fn bad_requests_are_errors() {
    let v = Version::V4;
    // Response-only and unknown opcodes.
    for op in [opcode::RESULT, opcode::READY, 0x04, 0x11, 0xFF] {
        assert!(
            Request::decode(v, op, Bytes::new()).is_err(),
            "opcode {op:#x}"
        );
    }
    // Unknown consistency code 0x000B.
    let mut body = BytesMut::new();
    put_long_string(&mut body, "SELECT 1");
    body.put_u16(0x000B);
    body.put_u8(0);
    assert!(matches!(
        Request::decode(v, opcode::QUERY, body.freeze()),
        Err(ProtocolError::Malformed(m)) if m.contains("consistency")
    ));
    // Value length below -2.
    let mut body = BytesMut::new();
    put_long_string(&mut body, "q");
    body.put_u16(1);
    body.put_u8(0x01);
    body.put_u16(1);
    body.put_i32(-3);
    assert!(Request::decode(v, opcode::QUERY, body.freeze()).is_err());
    // Truncated bodies.
    let (op, body) = encode_request(v, &all_requests(v)[3]);
    for cut in 0..body.len() {
        assert!(Request::decode(v, op, body.clone().freeze().slice(..cut)).is_err());
    }
    // Batch type 3 and statement kind 2.
    assert!(Request::decode(v, opcode::BATCH, Bytes::from_static(&[3, 0, 0])).is_err());
    assert!(Request::decode(v, opcode::BATCH, Bytes::from_static(&[0, 0, 1, 2])).is_err());
    // Invalid UTF-8 in a string.
    assert!(Request::decode(v, opcode::REGISTER, Bytes::from_static(&[0, 1, 0, 1, 0xFF])).is_err());
}

#[test]
fn values_cassandra_refuses_are_protocol_errors() {
    let malformed = |version, request: &Request| {
        let (op, body) = encode_request(version, request);
        match Request::decode(version, op, body.freeze()) {
            Err(ProtocolError::Malformed(message)) => message,
            other => panic!("{request:?}: {other:?}"),
        }
    };
    // A default timestamp of i64::MIN, Cassandra's "no timestamp", in every request that
    // carries one; i64::MIN + 1 is the smallest one taken.
    let out_of_bound = "Out of bound timestamp, must be in [-9223372036854775807, 9223372036854775807] (got -9223372036854775808)";
    for version in [Version::V4, Version::V5] {
        for request in all_requests(version) {
            let with = |timestamp| match request.clone() {
                Request::Query { query, mut params } => {
                    params.default_timestamp = Some(timestamp);
                    Some(Request::Query { query, params })
                }
                Request::Execute {
                    id,
                    result_metadata_id,
                    mut params,
                } => {
                    params.default_timestamp = Some(timestamp);
                    Some(Request::Execute {
                        id,
                        result_metadata_id,
                        params,
                    })
                }
                Request::Batch(mut batch) => {
                    batch.default_timestamp = Some(timestamp);
                    Some(Request::Batch(batch))
                }
                _ => None,
            };
            let (Some(min), Some(smallest)) = (with(i64::MIN), with(i64::MIN + 1)) else {
                continue;
            };
            assert_eq!(malformed(version, &min), out_of_bound);
            let (op, body) = encode_request(version, &smallest);
            assert_eq!(
                Request::decode(version, op, body.freeze()).unwrap(),
                smallest
            );
        }
    }
    // REGISTER of an unknown event type; known ones in any case.
    for events in [
        vec!["FOO"],
        vec!["SCHEMA_CHANGE", "FOO"],
        vec![""],
        vec!["SCHEMA_CHANGE "],
    ] {
        let unknown = events.last().expect("an event");
        let request = Request::Register {
            events: events.iter().map(|e| e.to_string()).collect(),
        };
        assert_eq!(
            malformed(Version::V4, &request),
            format!("Invalid value '{unknown}' for Type")
        );
    }
    let request = Request::Register {
        events: [
            "schema_change",
            "Status_Change",
            "TOPOLOGY_CHANGE",
            "trace_complete",
        ]
        .map(String::from)
        .to_vec(),
    };
    let (op, body) = encode_request(Version::V4, &request);
    assert_eq!(
        Request::decode(Version::V4, op, body.freeze()).unwrap(),
        Request::Register {
            events: [
                "SCHEMA_CHANGE",
                "STATUS_CHANGE",
                "TOPOLOGY_CHANGE",
                "TRACE_COMPLETE"
            ]
            .map(String::from)
            .to_vec()
        }
    );
}

#[test]
fn opcodes_a_client_may_not_send_are_named_as_cassandra_names_them() {
    let message = |op| match Request::decode(Version::V4, op, Bytes::new()) {
        Err(ProtocolError::Malformed(m)) => m,
        other => panic!("{op}: {other:?}"),
    };
    assert_eq!(message(0x30), "Unknown opcode 48");
    assert_eq!(
        message(opcode::READY),
        "Wrong protocol direction (expected RESPONSE, got REQUEST) for opcode 2 (READY)"
    );
}

// Request bodies written byte by byte from the spec, independent of the test encoder.

fn decode_bytes(version: Version, op: u8, parts: &[&[u8]]) -> Request {
    Request::decode(version, op, Bytes::from(parts.concat())).expect("valid request")
}

#[test]
fn query_parameters_from_spec_bytes() {
    // v5 4.1.4: <consistency><flags:[int]>[<n><value_i>][<page_size>][<paging_state>]
    // [<serial_consistency>][<timestamp>][<keyspace>][<now_in_seconds>].
    let params: &[&[u8]] = &[
        &[0, 0, 0, 6],
        b"SELECT",
        &[0, 4],                   // QUORUM
        &[0, 0, 0x01, 0xBD],       // 0x01|0x04|0x08|0x10|0x20|0x80|0x100
        &[0, 2],                   // n
        &[0, 0, 0, 1, 0x2A],       // value
        &[0xFF, 0xFF, 0xFF, 0xFF], // null
        &[0, 0, 0x13, 0x88],       // page size 5000
        &[0, 0, 0, 2, 0xAB, 0xCD], // paging state
        &[0, 9],                   // LOCAL_SERIAL
        &[0, 0, 0, 0, 0, 0, 0, 100],
        &[0, 2, b'k', b's'],
        &[0, 0, 0, 10],
    ];
    let expected = QueryParameters {
        consistency: Consistency::Quorum,
        values: Values::Positional(vec![value(b"\x2A"), RawValue::Null]),
        skip_metadata: false,
        page_size: Some(5000),
        paging_state: Some(Bytes::from_static(b"\xAB\xCD")),
        serial_consistency: Some(Consistency::LocalSerial),
        default_timestamp: Some(100),
        keyspace: Some("ks".into()),
        now_in_seconds: Some(10),
    };
    assert_eq!(
        decode_bytes(Version::V5, opcode::QUERY, params),
        Request::Query {
            query: "SELECT".into(),
            params: expected
        }
    );

    // v4 4.1.4: <flags> is a [byte]; named values (0x40) and Skip_metadata (0x02).
    let v4: &[&[u8]] = &[
        &[0, 0, 0, 1],
        b"q",
        &[0, 1],          // ONE
        &[0x43],          // Values | Skip_metadata | Names
        &[0, 1],          // n
        &[0, 1, b'x'],    // name
        &[0, 0, 0, 1, 7], // value
        &[0xFF, 0xFF, 0xFF, 0xFE],
    ];
    let Request::Query { params, .. } = decode_bytes(Version::V4, opcode::QUERY, v4) else {
        panic!("not a query");
    };
    assert_eq!(
        params.values,
        Values::Named(vec![("x".into(), value(b"\x07"))])
    );
    assert!(params.skip_metadata);
    assert_eq!(params.keyspace, None);

    // Cassandra 5.0 reads the keyspace of flag 0x80 in v4 too, and refuses the flag without one.
    let v4_keyspace: &[&[u8]] = &[&[0, 0, 0, 1], b"q", &[0, 1], &[0x80], &[0, 2, b'k', b's']];
    let Request::Query { params, .. } = decode_bytes(Version::V4, opcode::QUERY, v4_keyspace)
    else {
        panic!("not a query");
    };
    assert_eq!(params.keyspace.as_deref(), Some("ks"));
    let no_keyspace = Bytes::from([&[0, 0, 0, 1][..], b"q", &[0, 1], &[0x80]].concat());
    assert!(Request::decode(Version::V4, opcode::QUERY, no_keyspace).is_err());
    let batch_keyspace =
        Bytes::from([&[1, 0, 0][..], &[0, 1], &[0x80], &[0, 2, b'k', b's']].concat());
    let Request::Batch(batch) =
        Request::decode(Version::V4, opcode::BATCH, batch_keyspace).unwrap()
    else {
        panic!("not a batch");
    };
    assert_eq!(batch.keyspace.as_deref(), Some("ks"));
}

#[test]
fn prepare_and_execute_from_spec_bytes() {
    // v4 4.1.5: PREPARE is only the [long string].
    assert_eq!(
        decode_bytes(Version::V4, opcode::PREPARE, &[&[0, 0, 0, 1], b"q"]),
        Request::Prepare {
            query: "q".into(),
            keyspace: None
        }
    );
    // v5 4.1.5: <query><flags:[int]>[<keyspace>], flag 0x01 With keyspace.
    assert_eq!(
        decode_bytes(
            Version::V5,
            opcode::PREPARE,
            &[&[0, 0, 0, 1], b"q", &[0, 0, 0, 1], &[0, 2, b'k', b's']]
        ),
        Request::Prepare {
            query: "q".into(),
            keyspace: Some("ks".into())
        }
    );
    assert_eq!(
        decode_bytes(
            Version::V5,
            opcode::PREPARE,
            &[&[0, 0, 0, 1], b"q", &[0, 0, 0, 0]]
        ),
        Request::Prepare {
            query: "q".into(),
            keyspace: None
        }
    );
    let skip = QueryParameters {
        skip_metadata: true,
        ..minimal_params()
    };
    // v4 4.1.6: <id><query_parameters>.
    assert_eq!(
        decode_bytes(
            Version::V4,
            opcode::EXECUTE,
            &[&[0, 2, 0xDE, 0xAD], &[0, 1], &[0x02]]
        ),
        Request::Execute {
            id: Bytes::from_static(b"\xDE\xAD"),
            result_metadata_id: None,
            params: skip.clone(),
        }
    );
    // v5 4.1.6: <id><result_metadata_id><query_parameters>.
    assert_eq!(
        decode_bytes(
            Version::V5,
            opcode::EXECUTE,
            &[
                &[0, 2, 0xDE, 0xAD],
                &[0, 1, 0x77],
                &[0, 1],
                &[0, 0, 0, 0x02]
            ]
        ),
        Request::Execute {
            id: Bytes::from_static(b"\xDE\xAD"),
            result_metadata_id: Some(Bytes::from_static(b"\x77")),
            params: skip,
        }
    );
}

#[test]
fn batch_from_spec_bytes() {
    // 4.1.7: <type><n><query_1>...<query_n><consistency><flags>[<serial_consistency>]
    // [<timestamp>] (+ v5: [<keyspace>][<now_in_seconds>]); flags [byte] in v4, [int] in v5.
    let queries: &[u8] = &[
        1, // unlogged
        0, 2, // n
        0, 0, 0, 0, 1, b'q', 0, 1, 0, 0, 0, 1, 5, // kind 0, [long string], 1 value
        1, 0, 1, 0x99, 0, 0, // kind 1, [short bytes] id, 0 values
        0, 4, // QUORUM
    ];
    let statements = vec![
        BatchStatement {
            kind: BatchStatementKind::Query("q".into()),
            values: Values::Positional(vec![value(b"\x05")]),
        },
        BatchStatement {
            kind: BatchStatementKind::Prepared(Bytes::from_static(b"\x99")),
            values: Values::Positional(vec![]),
        },
    ];
    let timestamp: &[u8] = &[0, 0, 0, 0, 0, 0, 0, 100];
    let v4 = Batch {
        kind: BatchKind::Unlogged,
        statements,
        consistency: Consistency::Quorum,
        serial_consistency: Some(Consistency::Serial),
        default_timestamp: Some(100),
        keyspace: None,
        now_in_seconds: None,
    };
    assert_eq!(
        decode_bytes(
            Version::V4,
            opcode::BATCH,
            &[queries, &[0x30], &[0, 8], timestamp]
        ),
        Request::Batch(v4.clone())
    );
    assert_eq!(
        decode_bytes(
            Version::V5,
            opcode::BATCH,
            &[
                queries,
                &[0, 0, 0x01, 0xB0], // 0x10|0x20|0x80|0x100
                &[0, 8],
                timestamp,
                &[0, 2, b'k', b's'],
                &[0, 0, 0, 1],
            ]
        ),
        Request::Batch(Batch {
            keyspace: Some("ks".into()),
            now_in_seconds: Some(1),
            ..v4
        })
    );
}

// ---- legacy framing ------------------------------------------------------------------------

#[test]
fn unsupported_versions_are_reported_promptly_with_the_stream() {
    for version_byte in [0x03u8, 0x41, 0x42, 0x7f, 0x01, 0x06] {
        let mut buf = frame_bytes(version_byte, 0, 0x0102, opcode::OPTIONS, b"");
        let err = FrameCodec::new(MAX).decode(&mut buf).unwrap_err();
        let stream = if version_byte < 3 { 0x01 } else { 0x0102 };
        assert_eq!(
            err,
            ProtocolError::UnsupportedVersion {
                version: version_byte,
                stream
            }
        );
    }
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
    let err = FrameCodec::new(MAX).decode(&mut buf).unwrap_err();
    assert_eq!(
        err,
        ProtocolError::UnsupportedVersion {
            version: b'G',
            stream: i16::from_be_bytes([b'T', b' '])
        }
    );
    // Four bytes suffice.
    let mut buf = BytesMut::from(&b"GET "[..]);
    assert!(FrameCodec::new(MAX).decode(&mut buf).is_err());
    let mut buf = BytesMut::from(&b"GE"[..]);
    assert_eq!(FrameCodec::new(MAX).decode(&mut buf), Ok(None));
    assert!(err
        .to_string()
        .contains("Invalid or unsupported protocol version (71)"));
}

#[test]
fn response_direction_bit_on_a_request_is_an_error() {
    let mut buf = frame_bytes(0x84, 0, 1, opcode::OPTIONS, b"");
    assert_eq!(
        FrameCodec::new(MAX).decode(&mut buf),
        Err(ProtocolError::WrongDirection)
    );
}

#[test]
fn frame_lengths_are_bounded() {
    let mut buf = frame_bytes(0x04, 0, 1, opcode::OPTIONS, b"");
    buf[5..9].copy_from_slice(&1025i32.to_be_bytes());
    assert!(matches!(
        FrameCodec::new(1024).decode(&mut buf),
        Err(ProtocolError::FrameTooBig {
            length_bytes: 1025,
            max_bytes: 1024
        })
    ));
    buf[5..9].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(matches!(
        FrameCodec::new(1024).decode(&mut buf),
        Err(ProtocolError::Malformed(_))
    ));
}

#[test]
fn partial_frames_wait_for_more_bytes() {
    let req = &all_requests(Version::V4)[3];
    let bytes = request_frame(Version::V4, 7, req);
    let mut codec = FrameCodec::new(MAX);
    let mut buf = BytesMut::new();
    for (i, b) in bytes.iter().enumerate() {
        buf.put_u8(*b);
        let got = codec.decode(&mut buf).unwrap();
        assert_eq!(got.is_some(), i == bytes.len() - 1);
    }
}

#[test]
fn two_frames_in_one_read() {
    let mut buf = request_frame(Version::V4, 1, &Request::Options);
    buf.extend_from_slice(&request_frame(Version::V4, 2, &Request::Options));
    let mut codec = FrameCodec::new(MAX);
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap().stream, 1);
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap().stream, 2);
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
}

#[test]
fn custom_payload_is_skipped_and_tracing_ignored() {
    let (op, body) = encode_request(
        Version::V4,
        &Request::Register {
            events: vec!["SCHEMA_CHANGE".into()],
        },
    );
    let mut with_payload = BytesMut::new();
    with_payload.put_u16(1);
    put_string(&mut with_payload, "key");
    put_bytes(&mut with_payload, Some(b"val"));
    with_payload.extend_from_slice(&body);
    let bytes = frame_bytes(
        0x04,
        flags::CUSTOM_PAYLOAD | flags::TRACING,
        3,
        op,
        &with_payload,
    );
    let frame = decode_one(&mut FrameCodec::new(MAX), &bytes);
    assert_eq!(frame.flags, flags::TRACING);
    assert_eq!(
        Request::decode(frame.version, frame.opcode, frame.body).unwrap(),
        Request::Register {
            events: vec!["SCHEMA_CHANGE".into()]
        }
    );
}

#[test]
fn v4_compressed_request_bodies() {
    let req = all_requests(Version::V4)[3].clone();
    let (op, body) = encode_request(Version::V4, &req);
    // LZ4: 4-byte big-endian uncompressed length, then the block.
    let mut lz4 = (body.len() as u32).to_be_bytes().to_vec();
    lz4.extend_from_slice(&lz4_flex::block::compress(&body));
    // Snappy raw format.
    let snappy = snap::raw::Encoder::new().compress_vec(&body).unwrap();
    for (c, compressed) in [(Compression::Lz4, lz4), (Compression::Snappy, snappy)] {
        let mut codec = FrameCodec::new(MAX);
        codec.set_compression(c);
        let frame = decode_one(
            &mut codec,
            &frame_bytes(4, flags::COMPRESSION, 1, op, &compressed),
        );
        assert_eq!(frame.flags, 0);
        assert_eq!(Request::decode(frame.version, op, frame.body).unwrap(), req);
        // Uncompressed frames are still accepted after negotiation.
        let frame = decode_one(&mut codec, &frame_bytes(4, 0, 1, op, &body));
        assert_eq!(Request::decode(frame.version, op, frame.body).unwrap(), req);
    }
    // Compressed flag without negotiation, and a lying LZ4 length.
    assert!(FrameCodec::new(MAX)
        .decode(&mut frame_bytes(4, flags::COMPRESSION, 1, op, &body))
        .is_err());
    let mut codec = FrameCodec::new(MAX);
    codec.set_compression(Compression::Lz4);
    let mut bad = 1_000_000u32.to_be_bytes().to_vec();
    bad.extend_from_slice(&lz4_flex::block::compress(&body));
    assert!(codec
        .decode(&mut frame_bytes(4, flags::COMPRESSION, 1, op, &bad))
        .is_err());
}

#[test]
fn v4_compressed_responses() {
    let response = Response::Result(ResultBody::SetKeyspace("ks".into()));
    let mut plain = BytesMut::new();
    FrameCodec::new(MAX).encode(Version::V4, 5, &response, &mut plain);
    let expected_body = &plain[HEADER_BYTES..];
    for c in [Compression::Lz4, Compression::Snappy] {
        let mut codec = FrameCodec::new(MAX);
        codec.set_compression(c);
        let mut out = BytesMut::new();
        codec.encode(Version::V4, 5, &response, &mut out);
        assert_eq!(&out[..5], &[0x84, flags::COMPRESSION, 0, 5, opcode::RESULT]);
        let len = i32::from_be_bytes(out[5..9].try_into().unwrap()) as usize;
        assert_eq!(out.len(), HEADER_BYTES + len);
        let body = &out[HEADER_BYTES..];
        let decompressed = match c {
            Compression::Lz4 => {
                let n = u32::from_be_bytes(body[..4].try_into().unwrap()) as usize;
                lz4_flex::block::decompress(&body[4..], n).unwrap()
            }
            Compression::Snappy => snap::raw::Decoder::new().decompress_vec(body).unwrap(),
        };
        assert_eq!(decompressed, expected_body);
    }
    // v5 frames are never body-compressed.
    let mut codec = FrameCodec::new(MAX);
    codec.set_compression(Compression::Lz4);
    let mut out = BytesMut::new();
    codec.encode(Version::V5, 5, &response, &mut out);
    assert_eq!(&out[..2], &[0x85, 0]);
}

#[test]
fn warnings_precede_the_body_with_flag_0x08() {
    let response = Response::Result(ResultBody::Void);
    let mut plain = BytesMut::new();
    FrameCodec::new(MAX).encode(Version::V4, 3, &response, &mut plain);
    assert_eq!(plain[1], 0, "no warnings, no flag");
    let warnings = vec!["first".to_string(), "second one".to_string()];
    let mut list = vec![0u8, 2, 0, 5];
    list.extend_from_slice(b"first");
    list.extend_from_slice(&[0, 10]);
    list.extend_from_slice(b"second one");
    let mut expected_body = list.clone();
    expected_body.extend_from_slice(&plain[HEADER_BYTES..]);

    let mut out = BytesMut::new();
    FrameCodec::new(MAX).encode_with_warnings(Version::V4, 3, &response, &warnings, &mut out);
    assert_eq!(&out[..5], &[0x84, flags::WARNING, 0, 3, opcode::RESULT]);
    assert_eq!(&out[HEADER_BYTES..], &expected_body[..]);
    let len = i32::from_be_bytes(out[5..9].try_into().unwrap()) as usize;
    assert_eq!(len, expected_body.len());

    // v4 compressed: the list is inside the compressed body.
    let mut codec = FrameCodec::new(MAX);
    codec.set_compression(Compression::Lz4);
    let mut out = BytesMut::new();
    codec.encode_with_warnings(Version::V4, 3, &response, &warnings, &mut out);
    assert_eq!(out[1], flags::COMPRESSION | flags::WARNING);
    let body = &out[HEADER_BYTES..];
    let n = u32::from_be_bytes(body[..4].try_into().unwrap()) as usize;
    assert_eq!(
        lz4_flex::block::decompress(&body[4..], n).unwrap(),
        expected_body
    );

    // v5 segments: the frame inside the segment carries the flag and the list.
    let mut codec = FrameCodec::new(MAX);
    codec.switch_to_v5_segments();
    let mut out = BytesMut::new();
    codec.encode_with_warnings(Version::V5, 3, &response, &warnings, &mut out);
    let frame = &out[6..out.len() - 4]; // 6-byte segment header, 4-byte CRC32 trailer
    assert_eq!(&frame[..2], &[0x85, flags::WARNING]);
    assert_eq!(&frame[HEADER_BYTES..], &expected_body[..]);
}

// ---- v5 segments ---------------------------------------------------------------------------

#[test]
fn crc_vectors() {
    // Computed with the Python driver's algorithm (cassandra/segment.py: compute_crc24, and
    // zlib.crc32 seeded with zlib.crc32(b"\xfa\x2d\x55\xca")).
    assert_eq!(crc32(b""), 0x4477_7ed3);
    assert_eq!(crc32(&[b'b'; 50]), 0x7ceb_ae7a);
    assert_eq!(crc32(b"123456789"), 0xe2a2_61a7);
    assert_eq!(crc24(50 | 1 << 17, 3), 0x00ee_ffa5);
    assert_eq!(crc24(0x1_FFFF, 3), 0x00fe_9138);
    assert_eq!(crc24(0, 3), 0x007d_e777);
    assert_eq!(crc24(0x12_3456_789a, 5), 0x0040_d313);
}

#[test]
fn uncompressed_segment_bytes_match_the_python_driver() {
    // The driver's test_encode_uncompressed_header: 50 bytes, self-contained.
    let payload = [b'b'; 50];
    let mut out = BytesMut::new();
    segment::encode_segments(&payload, false, &mut out);
    assert_eq!(&out[..6], &[0x32, 0x00, 0x02, 0xa5, 0xff, 0xee]);
    assert_eq!(&out[6..56], &payload[..]);
    assert_eq!(&out[56..], &[0x7a, 0xae, 0xeb, 0x7c]);
}

#[test]
fn compressed_segment_header_layout() {
    let payload = [b'b'; 50];
    let mut out = BytesMut::new();
    segment::encode_segments(&payload, true, &mut out);
    let header = u64::from_le_bytes([out[0], out[1], out[2], out[3], out[4], 0, 0, 0]);
    let compressed = (header & 0x1_FFFF) as usize;
    assert_eq!((header >> 17) & 0x1_FFFF, 50, "uncompressed length");
    assert_eq!((header >> 34) & 1, 1, "self-contained");
    assert!(compressed < 50);
    assert_eq!(out.len(), 8 + compressed + 4);
    // Incompressible tiny payload: stored with uncompressed length 0.
    let mut out = BytesMut::new();
    segment::encode_segments(b"b", true, &mut out);
    let header = u64::from_le_bytes([out[0], out[1], out[2], out[3], out[4], 0, 0, 0]);
    assert_eq!(header & 0x1_FFFF, 1);
    assert_eq!((header >> 17) & 0x1_FFFF, 0);
    assert_eq!(&out[8..9], b"b");
}

#[test]
fn segment_headers_from_spec_bytes() {
    // v5 2.2: 5 header bytes, little-endian: compressed length (17 bits), uncompressed length
    // (17 bits, 0 = not compressed), self-contained (bit 34); then CRC24 (3 bytes), payload,
    // CRC32. CRC values computed independently with the Python driver's algorithm.
    let mut out = BytesMut::new();
    segment::encode_segments(b"b", true, &mut out);
    assert_eq!(
        &out[..],
        &[0x01, 0x00, 0x00, 0x00, 0x04, 0x06, 0xa5, 0x87, b'b', 0xe9, 0x1b, 0x20, 0x6e]
    );
    let mut wire = out.clone();
    let seg = segment::decode_segment(&mut wire, true).unwrap().unwrap();
    assert!(seg.self_contained);
    assert_eq!(&seg.payload[..], b"b");

    // v5 2.1: a frame longer than 2^17 - 1 bytes is split into non-self-contained segments of
    // at most 2^17 - 1 bytes each; header 0x01FFFF is length 131071, flag bit 17 clear.
    let frame = vec![0x5Au8; 2 * MAX_SEGMENT_PAYLOAD_BYTES + 10];
    let mut out = BytesMut::new();
    segment::encode_segments(&frame, false, &mut out);
    let full = 6 + MAX_SEGMENT_PAYLOAD_BYTES + 4;
    assert_eq!(out.len(), 2 * full + 6 + 10 + 4);
    for start in [0, full] {
        assert_eq!(
            &out[start..start + 6],
            &[0xff, 0xff, 0x01, 0x38, 0x91, 0xfe]
        );
    }
    let last = &out[2 * full..2 * full + 3];
    assert_eq!(last, &[0x0a, 0x00, 0x00], "10 bytes, not self-contained");
}

fn big_request() -> Request {
    // A QUERY of about 300 KB, so the frame spans three segments.
    let mut blob = vec![0u8; 300_000];
    let mut x = 0x1234_5678u32;
    for b in blob.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    Request::Query {
        query: "INSERT INTO t (k, v) VALUES (1, ?)".into(),
        params: QueryParameters {
            values: Values::Positional(vec![RawValue::Value(Bytes::from(blob))]),
            ..minimal_params()
        },
    }
}

#[test]
fn large_frame_spans_segments() {
    for lz4 in [false, true] {
        let req = big_request();
        let frame = request_frame(Version::V5, 9, &req);
        assert!(frame.len() > 2 * MAX_SEGMENT_PAYLOAD_BYTES);
        let mut wire = BytesMut::new();
        segment::encode_segments(&frame, lz4, &mut wire);
        // Followed by a small self-contained segment.
        segment::encode_segments(
            &request_frame(Version::V5, 10, &Request::Options),
            lz4,
            &mut wire,
        );
        let mut codec = FrameCodec::new(MAX);
        if lz4 {
            codec.set_compression(Compression::Lz4);
        }
        codec.switch_to_v5_segments();
        // Feed in uneven chunks.
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for chunk in wire.chunks(7_777) {
            buf.extend_from_slice(chunk);
            while let Some(f) = codec.decode(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].stream, 9);
        assert_eq!(
            Request::decode(Version::V5, got[0].opcode, got[0].body.clone()).unwrap(),
            req
        );
        assert_eq!(got[1].stream, 10);
        assert_eq!(got[1].opcode, opcode::OPTIONS);
        assert!(!codec.has_incomplete_frame());

        // Byte by byte: between the large frame's segments the input is empty and the codec
        // holds the frame's start.
        let mut codec = FrameCodec::new(MAX);
        if lz4 {
            codec.set_compression(Compression::Lz4);
        }
        codec.switch_to_v5_segments();
        let mut buf = BytesMut::new();
        let mut between_segments = 0;
        for byte in wire.iter() {
            buf.extend_from_slice(&[*byte]);
            if codec.decode(&mut buf).unwrap().is_none()
                && buf.is_empty()
                && codec.has_incomplete_frame()
            {
                between_segments += 1;
            }
        }
        assert!(between_segments >= 2, "{between_segments}");
    }
}

#[test]
fn corrupt_segments_are_rejected() {
    let frame = request_frame(Version::V5, 1, &Request::Options);
    let mut wire = BytesMut::new();
    segment::encode_segments(&frame, false, &mut wire);
    for (i, expect_header) in [
        (0usize, true),
        (4, true),
        (8, false),
        (wire.len() - 1, false),
    ] {
        let mut bad = wire.clone();
        bad[i] ^= 0x01;
        let mut codec = FrameCodec::new(MAX);
        codec.switch_to_v5_segments();
        let err = codec.decode(&mut bad).unwrap_err();
        if expect_header {
            assert!(
                matches!(err, ProtocolError::HeaderCrcMismatch { .. }),
                "{i}: {err}"
            );
        } else {
            assert!(
                matches!(err, ProtocolError::PayloadCrcMismatch { .. }),
                "{i}: {err}"
            );
        }
    }
    // A v4 frame inside v5 segments.
    let mut wire = BytesMut::new();
    segment::encode_segments(
        &request_frame(Version::V4, 1, &Request::Options),
        false,
        &mut wire,
    );
    let mut codec = FrameCodec::new(MAX);
    codec.switch_to_v5_segments();
    assert!(codec.decode(&mut wire).is_err());
}

/// Reads response segments back into frames (the client's side).
fn read_response_segments(mut wire: BytesMut, lz4: bool) -> Vec<Bytes> {
    let mut frames = Vec::new();
    let mut partial = BytesMut::new();
    while let Some(seg) = segment::decode_segment(&mut wire, lz4).unwrap() {
        if seg.self_contained {
            let mut p = seg.payload;
            while !p.is_empty() {
                let len = i32::from_be_bytes(p[5..9].try_into().unwrap()) as usize;
                frames.push(p.split_to(HEADER_BYTES + len));
            }
        } else {
            partial.extend_from_slice(&seg.payload);
            let len = i32::from_be_bytes(partial[5..9].try_into().unwrap()) as usize;
            if partial.len() == HEADER_BYTES + len {
                frames.push(partial.split().freeze());
            }
        }
    }
    assert!(wire.is_empty());
    frames
}

#[test]
fn responses_in_v5_segments() {
    for lz4 in [false, true] {
        let mut codec = FrameCodec::new(usize::MAX);
        if lz4 {
            codec.set_compression(Compression::Lz4);
        }
        let mut out = BytesMut::new();
        codec.encode(Version::V5, 1, &Response::Ready, &mut out);
        assert_eq!(&out[..], &[0x85, 0, 0, 1, opcode::READY, 0, 0, 0, 0]);
        out.clear();
        codec.switch_to_v5_segments();
        // A large Rows result (~400 KB) and a small one.
        let mut rows = RowsWriter::new(1);
        let cell = vec![7u8; 1000];
        for _ in 0..400 {
            rows.push_cell(Some(&cell));
        }
        let rows = rows.finish(RowsMetadata {
            columns: vec![spec("v", CqlType::Blob)].into(),
            paging_state: None,
            no_metadata: false,
            new_metadata_id: None,
            encoded_columns: None,
        });
        codec.encode(
            Version::V5,
            2,
            &Response::Result(ResultBody::Rows(rows)),
            &mut out,
        );
        codec.encode(
            Version::V5,
            3,
            &Response::Result(ResultBody::Void),
            &mut out,
        );
        let frames = read_response_segments(out, lz4);
        assert_eq!(frames.len(), 2);
        assert_eq!(&frames[0][..5], &[0x85, 0, 0, 2, opcode::RESULT]);
        assert!(frames[0].len() > 400_000);
        assert_eq!(
            &frames[1][..],
            &[0x85, 0, 0, 3, opcode::RESULT, 0, 0, 0, 4, 0, 0, 0, 1]
        );
    }
}

// ---- response bodies -----------------------------------------------------------------------

fn spec(name: &str, ty: CqlType) -> ColumnSpec {
    ColumnSpec {
        keyspace: "ks".into(),
        table: "t".into(),
        name: name.into(),
        ty,
    }
}

fn body(version: Version, response: &Response) -> Vec<u8> {
    let mut out = BytesMut::new();
    response.encode_body(version, &mut out);
    out.to_vec()
}

#[test]
fn pre_encoded_column_specs_write_the_same_rows() {
    let mut other_table = spec("w", CqlType::Int);
    other_table.table = "u".into();
    for columns in [
        vec![spec("k", CqlType::Int), spec("v", CqlType::Text)],
        // Not one table: no Global_tables_spec, each spec names its table.
        vec![spec("k", CqlType::Int), other_table],
    ] {
        let columns: std::sync::Arc<[ColumnSpec]> = columns.into();
        let response = |encoded_columns| {
            let mut w = RowsWriter::new(2);
            w.push_cell(Some(&[0, 0, 0, 1]));
            w.push_cell(None);
            Response::Result(ResultBody::Rows(w.finish(RowsMetadata {
                columns: columns.clone(),
                paging_state: None,
                no_metadata: false,
                new_metadata_id: None,
                encoded_columns,
            })))
        };
        for version in [Version::V4, Version::V5] {
            let plain = body(version, &response(None));
            let encoded = encode_column_specs(version, &columns);
            assert_eq!(body(version, &response(Some(encoded))), plain);
        }
        // Specs encoded for another version are not used.
        let v5 = encode_column_specs(Version::V5, &columns);
        assert_eq!(
            body(Version::V4, &response(Some(v5))),
            body(Version::V4, &response(None))
        );
    }
}

#[test]
fn rows_layout() {
    let mut w = RowsWriter::new(2);
    w.push_cell(Some(&[0, 0, 0, 1]));
    w.push_cell(None);
    let rows = w.finish(RowsMetadata {
        columns: vec![spec("k", CqlType::Int), spec("v", CqlType::Text)].into(),
        paging_state: Some(Bytes::from_static(b"\xAA")),
        no_metadata: false,
        new_metadata_id: None,
        encoded_columns: None,
    });
    assert_eq!(rows.row_count(), 1);
    let expected: Vec<u8> = [
        &[0, 0, 0, 2][..],      // kind Rows
        &[0, 0, 0, 3],          // flags: Global_tables_spec | Has_more_pages
        &[0, 0, 0, 2],          // columns_count
        &[0, 0, 0, 1, 0xAA],    // paging_state
        &[0, 2, b'k', b's'],    // keyspace
        &[0, 1, b't'],          // table
        &[0, 1, b'k', 0, 0x09], // k int
        &[0, 1, b'v', 0, 0x0D], // v varchar
        &[0, 0, 0, 1],          // rows_count
        &[0, 0, 0, 4, 0, 0, 0, 1],
        &[0xFF, 0xFF, 0xFF, 0xFF],
    ]
    .concat();
    let response = Response::Result(ResultBody::Rows(rows.clone()));
    assert_eq!(body(Version::V4, &response), expected);

    // No_metadata, and v5 Metadata_changed (ignored in v4).
    let mut m = rows.metadata().clone();
    m.no_metadata = true;
    m.paging_state = None;
    m.new_metadata_id = Some(Bytes::from_static(b"\x01\x02"));
    let mut w = RowsWriter::new(2);
    w.push_cell(Some(b""));
    w.push_cell(Some(b"x"));
    let r = Response::Result(ResultBody::Rows(w.finish(m)));
    let tail: &[u8] = &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, b'x'];
    assert_eq!(
        body(Version::V4, &r),
        [&[0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 2][..], tail].concat()
    );
    // Spec v5 4.2.5.2: "Metadata_changed: if set, the No_metadata flag has to be unset and
    // <new_metadata_id> has to be supplied", so the full metadata follows the new id.
    assert_eq!(
        body(Version::V5, &r),
        [
            &[0, 0, 0, 2][..],
            &[0, 0, 0, 0x09], // flags: Global_tables_spec | Metadata_changed
            &[0, 0, 0, 2],    // columns_count
            &[0, 2, 1, 2],    // new_metadata_id
            &[0, 2, b'k', b's', 0, 1, b't'],
            &[0, 1, b'k', 0, 0x09, 0, 1, b'v', 0, 0x0D],
            tail
        ]
        .concat()
    );
}

#[test]
fn rows_from_cells_encode_as_rows_written_cell_by_cell() {
    let metadata = |no_metadata| RowsMetadata {
        columns: vec![spec("k", CqlType::Int), spec("v", CqlType::Text)].into(),
        paging_state: Some(Bytes::from_static(b"\xAA")),
        no_metadata,
        new_metadata_id: None,
        encoded_columns: None,
    };
    let cells: Vec<Vec<Option<Bytes>>> = vec![
        vec![Some(Bytes::from_static(&[0, 0, 0, 1])), None],
        vec![Some(Bytes::new()), Some(Bytes::from(vec![b'x'; 300]))],
        vec![None, None],
    ];
    for no_metadata in [false, true] {
        for rows in [cells.clone(), Vec::new()] {
            let mut w = RowsWriter::new(2);
            for cell in rows.iter().flatten() {
                w.push_cell(cell.as_deref());
            }
            let written = w.finish(metadata(no_metadata));
            let from_cells = Rows::from_cells(2, rows.clone(), metadata(no_metadata));
            assert_eq!(from_cells.row_count(), rows.len() as i32);
            assert_eq!(from_cells.content(), written.content());
            for version in [Version::V4, Version::V5] {
                assert_eq!(
                    body(
                        version,
                        &Response::Result(ResultBody::Rows(from_cells.clone()))
                    ),
                    body(
                        version,
                        &Response::Result(ResultBody::Rows(written.clone()))
                    ),
                );
            }
        }
    }
}

#[test]
#[should_panic(expected = "a cell per column")]
fn rows_from_cells_refuse_a_partial_row() {
    let metadata = RowsMetadata {
        columns: vec![spec("k", CqlType::Int)].into(),
        paging_state: None,
        no_metadata: false,
        new_metadata_id: None,
        encoded_columns: None,
    };
    Rows::from_cells(2, vec![vec![None]], metadata);
}

#[test]
fn rows_v5_paging_state_precedes_new_metadata_id() {
    // Spec v5 4.2.5.2: <flags><columns_count>[<paging_state>][<new_metadata_id>][<specs>].
    let rows = RowsWriter::new(1).finish(RowsMetadata {
        columns: vec![spec("k", CqlType::Int)].into(),
        paging_state: Some(Bytes::from_static(b"\xAA\xBB")),
        no_metadata: false,
        new_metadata_id: Some(Bytes::from_static(b"\x07")),
        encoded_columns: None,
    });
    let expected: &[u8] = &[
        0, 0, 0, 2, // kind Rows
        0, 0, 0, 0x0B, // Global_tables_spec | Has_more_pages | Metadata_changed
        0, 0, 0, 1, // columns_count
        0, 0, 0, 2, 0xAA, 0xBB, // paging_state [bytes]
        0, 1, 0x07, // new_metadata_id [short bytes]
        0, 2, b'k', b's', 0, 1, b't', 0, 1, b'k', 0, 0x09, // specs
        0, 0, 0, 0, // rows_count
    ];
    assert_eq!(
        body(Version::V5, &Response::Result(ResultBody::Rows(rows))),
        expected
    );
}

#[test]
fn rows_without_metadata_take_the_column_count_from_the_rows() {
    // No_metadata with no specs given: columns_count is the writer's, as with specs given.
    let mut w = RowsWriter::new(2);
    w.push_cell(Some(b"\x01"));
    w.push_cell(None);
    let without_specs = w.finish(RowsMetadata {
        columns: Vec::new().into(),
        paging_state: None,
        no_metadata: true,
        new_metadata_id: None,
        encoded_columns: None,
    });
    let expected: &[u8] = &[
        0, 0, 0, 2, // kind Rows
        0, 0, 0, 4, // No_metadata
        0, 0, 0, 2, // columns_count
        0, 0, 0, 1, // rows_count
        0, 0, 0, 1, 1, 0xFF, 0xFF, 0xFF, 0xFF, // one row: [bytes] 0x01, null
    ];
    assert_eq!(
        body(
            Version::V4,
            &Response::Result(ResultBody::Rows(without_specs))
        ),
        expected
    );
}

#[test]
fn rows_without_a_shared_table_write_per_column_specs() {
    let mut other = spec("x", CqlType::Boolean);
    other.table = "u".into();
    let rows = RowsWriter::new(2).finish(RowsMetadata {
        columns: vec![spec("k", CqlType::Int), other].into(),
        paging_state: None,
        no_metadata: false,
        new_metadata_id: None,
        encoded_columns: None,
    });
    let expected: Vec<u8> = [
        &[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2][..],
        &[0, 2, b'k', b's', 0, 1, b't', 0, 1, b'k', 0, 0x09],
        &[0, 2, b'k', b's', 0, 1, b'u', 0, 1, b'x', 0, 0x04],
        &[0, 0, 0, 0],
    ]
    .concat();
    assert_eq!(
        body(Version::V4, &Response::Result(ResultBody::Rows(rows))),
        expected
    );
}

#[test]
fn prepared_layout() {
    let p = PreparedResult {
        id: Bytes::from_static(b"\x01\x02"),
        result_metadata_id: Some(Bytes::from_static(b"\x03")),
        bind_columns: vec![spec("k", CqlType::Int)],
        pk_indexes: vec![0],
        result_columns: vec![],
    };
    let r = Response::Result(ResultBody::Prepared(p.clone()));
    let metadata: &[u8] = &[
        0, 0, 0, 1, // flags Global_tables_spec
        0, 0, 0, 1, // columns_count
        0, 0, 0, 1, // pk_count
        0, 0, // pk_index
        0, 2, b'k', b's', 0, 1, b't', 0, 1, b'k', 0, 0x09,
    ];
    let result_metadata: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0];
    assert_eq!(
        body(Version::V4, &r),
        [&[0, 0, 0, 4, 0, 2, 1, 2][..], metadata, result_metadata].concat()
    );
    assert_eq!(
        body(Version::V5, &r),
        [
            &[0, 0, 0, 4, 0, 2, 1, 2, 0, 1, 3][..],
            metadata,
            result_metadata
        ]
        .concat()
    );
    // With result columns and no bind markers.
    let p = PreparedResult {
        bind_columns: vec![],
        pk_indexes: vec![],
        result_columns: vec![spec("v", CqlType::List(Box::new(CqlType::Bigint)))],
        ..p
    };
    assert_eq!(
        body(Version::V4, &Response::Result(ResultBody::Prepared(p))),
        [
            &[0, 0, 0, 4, 0, 2, 1, 2][..],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            &[0, 0, 0, 1, 0, 0, 0, 1, 0, 2, b'k', b's', 0, 1, b't', 0, 1, b'v', 0, 0x20, 0, 0x02],
        ]
        .concat()
    );
}

#[test]
fn error_bodies() {
    let e = |code, extra| {
        Response::Error(ErrorBody {
            code,
            message: "m".into(),
            extra,
        })
    };
    assert_eq!(
        body(Version::V4, &e(ErrorCode::ProtocolError, ErrorExtra::None)),
        [0, 0, 0, 0x0A, 0, 1, b'm']
    );
    assert_eq!(
        body(
            Version::V4,
            &e(
                ErrorCode::Unavailable,
                ErrorExtra::Unavailable {
                    consistency: Consistency::Quorum,
                    required: 2,
                    alive: 1
                }
            )
        ),
        [0, 0, 0x10, 0, 0, 1, b'm', 0, 4, 0, 0, 0, 2, 0, 0, 0, 1]
    );
    assert_eq!(
        body(
            Version::V4,
            &e(
                ErrorCode::AlreadyExists,
                ErrorExtra::AlreadyExists {
                    keyspace: "ks".into(),
                    table: "".into()
                }
            )
        ),
        [0, 0, 0x24, 0, 0, 1, b'm', 0, 2, b'k', b's', 0, 0]
    );
    assert_eq!(
        body(
            Version::V4,
            &e(
                ErrorCode::Unprepared,
                ErrorExtra::Unprepared {
                    id: Bytes::from_static(b"\xAB")
                }
            )
        ),
        [0, 0, 0x25, 0, 0, 1, b'm', 0, 1, 0xAB]
    );
    let read_failure = e(
        ErrorCode::ReadFailure,
        ErrorExtra::ReadFailure {
            consistency: Consistency::One,
            received: 0,
            block_for: 1,
            reasons: vec![(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)), 0x0001)],
            data_present: false,
        },
    );
    let head: &[u8] = &[0, 0, 0x13, 0, 0, 1, b'm', 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(
        body(Version::V4, &read_failure),
        [head, &[0, 0, 0, 1, 0]].concat()
    );
    assert_eq!(
        body(Version::V5, &read_failure),
        [head, &[0, 0, 0, 1, 4, 127, 0, 0, 1, 0, 1, 0]].concat()
    );
    let cas_timeout = e(
        ErrorCode::WriteTimeout,
        ErrorExtra::WriteTimeout {
            consistency: Consistency::Serial,
            received: 0,
            block_for: 1,
            write_type: "CAS".into(),
        },
    );
    let head: &[u8] = &[
        0, 0, 0x11, 0, 0, 1, b'm', 0, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 3, b'C', b'A', b'S',
    ];
    assert_eq!(body(Version::V4, &cas_timeout), head);
    assert_eq!(body(Version::V5, &cas_timeout), [head, &[0, 0]].concat());
}

#[test]
fn error_bodies_for_the_remaining_codes() {
    let e = |code, extra| {
        Response::Error(ErrorBody {
            code,
            message: "m".into(),
            extra,
        })
    };
    let head = |code: [u8; 4]| [&code[..], &[0, 1, b'm']].concat();
    let localhost = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    // 0x1100 Write_timeout, not CAS: no <contentions> in v5.
    let simple = e(
        ErrorCode::WriteTimeout,
        ErrorExtra::WriteTimeout {
            consistency: Consistency::Two,
            received: 1,
            block_for: 2,
            write_type: "SIMPLE".into(),
        },
    );
    let expected = [
        head([0, 0, 0x11, 0]),
        vec![0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 6],
        b"SIMPLE".to_vec(),
    ]
    .concat();
    assert_eq!(body(Version::V4, &simple), expected);
    assert_eq!(body(Version::V5, &simple), expected);

    // 0x1200 Read_timeout: <cl><received><blockfor><data_present>.
    assert_eq!(
        body(
            Version::V5,
            &e(
                ErrorCode::ReadTimeout,
                ErrorExtra::ReadTimeout {
                    consistency: Consistency::LocalQuorum,
                    received: 1,
                    block_for: 2,
                    data_present: true,
                }
            )
        ),
        [head([0, 0, 0x12, 0]), vec![0, 6, 0, 0, 0, 1, 0, 0, 0, 2, 1]].concat()
    );

    // 0x1500 Write_failure: v4 <numfailures>, v5 <reasonmap>, then <write_type>.
    let write_failure = e(
        ErrorCode::WriteFailure,
        ErrorExtra::WriteFailure {
            consistency: Consistency::All,
            received: 2,
            block_for: 3,
            reasons: vec![(localhost, 0x0003)],
            write_type: "BATCH".into(),
        },
    );
    let cl_received_blockfor = vec![0, 5, 0, 0, 0, 2, 0, 0, 0, 3];
    assert_eq!(
        body(Version::V4, &write_failure),
        [
            head([0, 0, 0x15, 0]),
            cl_received_blockfor.clone(),
            vec![0, 0, 0, 1], // numfailures
            vec![0, 5],
            b"BATCH".to_vec()
        ]
        .concat()
    );
    assert_eq!(
        body(Version::V5, &write_failure),
        [
            head([0, 0, 0x15, 0]),
            cl_received_blockfor,
            vec![0, 0, 0, 1, 4, 10, 0, 0, 2, 0, 3], // [int] n, [inetaddr], [short] code
            vec![0, 5],
            b"BATCH".to_vec()
        ]
        .concat()
    );

    // 0x1400 Function_failure: <keyspace><function><arg_types>.
    assert_eq!(
        body(
            Version::V4,
            &e(
                ErrorCode::FunctionFailure,
                ErrorExtra::FunctionFailure {
                    keyspace: "k".into(),
                    function: "f".into(),
                    arg_types: vec!["int".into()],
                }
            )
        ),
        [
            head([0, 0, 0x14, 0]),
            vec![0, 1, b'k', 0, 1, b'f', 0, 1, 0, 3, b'i', b'n', b't']
        ]
        .concat()
    );

    // 0x1600 CDC_WRITE_FAILURE: no extra content.
    assert_eq!(
        body(
            Version::V5,
            &e(ErrorCode::CdcWriteFailure, ErrorExtra::None)
        ),
        head([0, 0, 0x16, 0])
    );

    // 0x1700 CAS_WRITE_UNKNOWN: <cl><received><blockfor> in v5. v4 has no such code
    // (v4 spec section 9): Cassandra sends a Write_timeout of write type CAS instead.
    let cas_unknown = e(
        ErrorCode::CasWriteUnknown,
        ErrorExtra::CasWriteUnknown {
            consistency: Consistency::Serial,
            received: 0,
            block_for: 1,
        },
    );
    let fields = vec![0, 8, 0, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(
        body(Version::V5, &cas_unknown),
        [head([0, 0, 0x17, 0]), fields.clone()].concat()
    );
    assert_eq!(
        body(Version::V4, &cas_unknown),
        [head([0, 0, 0x11, 0]), fields, vec![0, 3, b'C', b'A', b'S']].concat()
    );

    // Codes without extra content.
    for (code, bytes) in [
        (ErrorCode::ServerError, [0, 0, 0, 0]),
        (ErrorCode::AuthenticationError, [0, 0, 1, 0]),
        (ErrorCode::Overloaded, [0, 0, 0x10, 0x01]),
        (ErrorCode::IsBootstrapping, [0, 0, 0x10, 0x02]),
        (ErrorCode::TruncateError, [0, 0, 0x10, 0x03]),
        (ErrorCode::SyntaxError, [0, 0, 0x20, 0]),
        (ErrorCode::Unauthorized, [0, 0, 0x21, 0]),
        (ErrorCode::Invalid, [0, 0, 0x22, 0]),
        (ErrorCode::ConfigError, [0, 0, 0x23, 0]),
    ] {
        assert_eq!(body(Version::V4, &e(code, ErrorExtra::None)), head(bytes));
    }
}

#[test]
fn schema_change_result_and_event() {
    let change = SchemaChange {
        change_type: SchemaChangeType::Created,
        target: SchemaChangeTarget::Table {
            keyspace: "ks".into(),
            name: "t".into(),
        },
    };
    let change_bytes: &[u8] = &[
        0, 7, b'C', b'R', b'E', b'A', b'T', b'E', b'D', 0, 5, b'T', b'A', b'B', b'L', b'E', 0, 2,
        b'k', b's', 0, 1, b't',
    ];
    assert_eq!(
        body(
            Version::V4,
            &Response::Result(ResultBody::SchemaChange(change.clone()))
        ),
        [&[0, 0, 0, 5][..], change_bytes].concat()
    );
    let event = Response::Event(Event::SchemaChange(change));
    assert_eq!(
        body(Version::V4, &event),
        [&[0, 13][..], b"SCHEMA_CHANGE", change_bytes].concat()
    );
    let mut out = BytesMut::new();
    FrameCodec::new(usize::MAX).encode(Version::V4, -1, &event, &mut out);
    assert_eq!(&out[..5], &[0x84, 0, 0xFF, 0xFF, opcode::EVENT]);
    let f = SchemaChangeTarget::Function {
        keyspace: "k".into(),
        name: "f".into(),
        args: vec!["int".into()],
    };
    let b = body(
        Version::V5,
        &Response::Result(ResultBody::SchemaChange(SchemaChange {
            change_type: SchemaChangeType::Dropped,
            target: f,
        })),
    );
    assert!(b.ends_with(&[
        0, 8, b'F', b'U', b'N', b'C', b'T', b'I', b'O', b'N', 0, 1, b'k', 0, 1, b'f', 0, 1, 0, 3,
        b'i', b'n', b't'
    ]));
}

#[test]
fn supported_and_simple_responses() {
    let s = Response::Supported(vec![(
        "COMPRESSION".into(),
        vec!["lz4".into(), "snappy".into()],
    )]);
    assert_eq!(
        body(Version::V4, &s),
        [
            &[0, 1, 0, 11][..],
            b"COMPRESSION",
            &[0, 2, 0, 3],
            b"lz4",
            &[0, 6],
            b"snappy"
        ]
        .concat()
    );
    assert_eq!(body(Version::V4, &Response::Ready), Vec::<u8>::new());
    assert_eq!(
        body(Version::V4, &Response::Authenticate("A".into())),
        [0, 1, b'A']
    );
    assert_eq!(
        body(
            Version::V4,
            &Response::Result(ResultBody::SetKeyspace("ks".into()))
        ),
        [0, 0, 0, 3, 0, 2, b'k', b's']
    );
}

#[test]
fn type_options() {
    let udt = CqlType::Udt(UdtType {
        keyspace: "ks".into(),
        name: "addr".into(),
        fields: vec![("n".into(), CqlType::Int)],
    });
    let ty = CqlType::Map(
        Box::new(CqlType::Text),
        Box::new(CqlType::Frozen(Box::new(CqlType::Tuple(vec![
            CqlType::Uuid,
            udt,
        ])))),
    );
    let mut out = BytesMut::new();
    crate::type_option::put_type_option(Version::V5, &mut out, &ty);
    let expected: Vec<u8> = [
        &[0, 0x21, 0, 0x0D, 0, 0x31, 0, 2, 0, 0x0C, 0, 0x30][..],
        &[
            0, 2, b'k', b's', 0, 4, b'a', b'd', b'd', b'r', 0, 1, 0, 1, b'n', 0, 0x09,
        ],
    ]
    .concat();
    assert_eq!(&out[..], &expected[..]);

    let mut out = BytesMut::new();
    let vector = CqlType::Vector(Box::new(CqlType::Float), 3);
    crate::type_option::put_type_option(Version::V4, &mut out, &vector);
    let class =
        "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType , 3)";
    assert_eq!(&out[..4], &[0, 0, 0, class.len() as u8]);
    assert_eq!(&out[4..], class.as_bytes());
}

#[test]
fn duration_type_option_is_custom_in_v4() {
    // v5 spec 4.2.5.2 lists 0x0015 Duration; the v4 spec has no such id, and Cassandra sends
    // types newer than the connection's version as Custom with the marshal class name.
    let class = b"org.apache.cassandra.db.marshal.DurationType";
    let option = |version, ty: &CqlType| {
        let mut out = BytesMut::new();
        crate::type_option::put_type_option(version, &mut out, ty);
        out.to_vec()
    };
    assert_eq!(option(Version::V5, &CqlType::Duration), [0, 0x15]);
    assert_eq!(
        option(Version::V4, &CqlType::Duration),
        [&[0, 0, 0, class.len() as u8][..], class].concat()
    );
    // Nested: list<duration> is a List (0x0020) whose element is Custom.
    let list = CqlType::List(Box::new(CqlType::Duration));
    assert_eq!(option(Version::V5, &list), [0, 0x20, 0, 0x15]);
    assert_eq!(
        option(Version::V4, &list),
        [&[0, 0x20, 0, 0, 0, class.len() as u8][..], class].concat()
    );
    // And through a Rows result.
    let rows = RowsWriter::new(1).finish(RowsMetadata {
        columns: vec![spec("d", CqlType::Duration)].into(),
        paging_state: None,
        no_metadata: false,
        new_metadata_id: None,
        encoded_columns: None,
    });
    let b = body(Version::V4, &Response::Result(ResultBody::Rows(rows)));
    assert_eq!(
        b,
        [
            &[0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1][..],
            &[0, 2, b'k', b's', 0, 1, b't', 0, 1, b'd'],
            &[0, 0, 0, class.len() as u8],
            class,
            &[0, 0, 0, 0],
        ]
        .concat()
    );
}

#[test]
fn marshal_class_names() {
    const M: &str = "org.apache.cassandra.db.marshal.";
    let m = |s: &str| s.replace('#', M);
    let list_int = CqlType::List(Box::new(CqlType::Int));
    assert_eq!(marshal_class_name(&CqlType::Text), m("#UTF8Type"));
    assert_eq!(marshal_class_name(&CqlType::Date), m("#SimpleDateType"));
    assert_eq!(marshal_class_name(&list_int), m("#ListType(#Int32Type)"));
    assert_eq!(
        marshal_class_name(&CqlType::Frozen(Box::new(CqlType::Map(
            Box::new(CqlType::Text),
            Box::new(list_int.clone())
        )))),
        m("#FrozenType(#MapType(#UTF8Type,#ListType(#Int32Type)))")
    );
    assert_eq!(
        marshal_class_name(&CqlType::Set(Box::new(CqlType::Frozen(Box::new(
            list_int.clone()
        ))))),
        m("#SetType(#FrozenType(#ListType(#Int32Type)))")
    );
    assert_eq!(
        marshal_class_name(&CqlType::Vector(Box::new(list_int), 2)),
        m("#VectorType(#FrozenType(#ListType(#Int32Type)) , 2)")
    );
    assert_eq!(
        marshal_class_name(&CqlType::Tuple(vec![CqlType::Bigint, CqlType::Blob])),
        m("#TupleType(#LongType,#BytesType)")
    );
    let udt = CqlType::Udt(UdtType {
        keyspace: "ks".into(),
        name: "ab".into(),
        fields: vec![("x".into(), CqlType::Varint)],
    });
    assert_eq!(
        marshal_class_name(&CqlType::Frozen(Box::new(udt))),
        m("#FrozenType(#UserType(ks,6162,78:#IntegerType))")
    );
    assert_eq!(marshal_class_name(&CqlType::Custom("a.B".into())), "a.B");
}

// ---- robustness ----------------------------------------------------------------------------

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let valid: Vec<BytesMut> = all_requests(Version::V5)
        .iter()
        .map(|r| request_frame(Version::V5, 1, r))
        .collect();
    for i in 0..10_000 {
        let len = (rng.next() % 200) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        // Half the time, mutate a valid frame instead so decoding gets deep.
        if i % 2 == 0 {
            bytes = valid[i % valid.len()].to_vec();
            for _ in 0..1 + rng.next() % 4 {
                let at = (rng.next() as usize) % bytes.len();
                bytes[at] = rng.next() as u8;
            }
            bytes.truncate((rng.next() as usize) % (bytes.len() + 1));
        }
        let opcode_byte = rng.next() as u8 % 0x12;
        for version in [Version::V4, Version::V5] {
            let _ = Request::decode(version, opcode_byte, Bytes::from(bytes.clone()));
        }
        for mode in 0..3 {
            let mut codec = FrameCodec::new(64 * 1024);
            match mode {
                1 => codec.switch_to_v5_segments(),
                2 => {
                    codec.set_compression(Compression::Lz4);
                    codec.switch_to_v5_segments();
                }
                _ => codec.set_compression(Compression::Lz4),
            }
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(frame)) = codec.decode(&mut buf) {
                let _ = Request::decode(frame.version, frame.opcode, frame.body);
            }
        }
    }
}

#[test]
fn overlong_strings_are_cut_at_a_character_boundary() {
    // 'é' is two bytes: 40,000 of them (80,000 bytes) do not fit a [string].
    let text = "é".repeat(40_000);
    let mut out = BytesMut::new();
    put_string(&mut out, &text);
    let n = u16::from_be_bytes([out[0], out[1]]) as usize;
    assert_eq!(n, 65_534, "the last whole character below 64 KiB");
    assert_eq!(out.len(), 2 + n);
    assert!(std::str::from_utf8(&out[2..]).is_ok());
    let mut short = BytesMut::new();
    put_string(&mut short, "abc");
    assert_eq!(&short[..], b"\x00\x03abc");
}

#[test]
fn an_incomplete_frame_tells_its_whole_size_once_its_header_has_arrived() {
    // Legacy framing: the frame is in the caller's buffer.
    let frame = request_frame(Version::V4, 3, &big_request());
    let codec = FrameCodec::new(MAX);
    assert_eq!(
        codec.incomplete_frame_bytes(&frame[..8]),
        None,
        "header incomplete"
    );
    assert_eq!(codec.incomplete_frame_bytes(&frame[..9]), Some(frame.len()));
    assert_eq!(
        codec.incomplete_frame_bytes(&frame[..1000]),
        Some(frame.len())
    );
    assert_eq!(codec.incomplete_frame_bytes(&frame), None, "complete");
    // v5 segments: a large frame's start is held by the codec.
    let frame = request_frame(Version::V5, 9, &big_request());
    let mut wire = BytesMut::new();
    segment::encode_segments(&frame, false, &mut wire);
    let first_segment = 6 + MAX_SEGMENT_PAYLOAD_BYTES + 4;
    let mut codec = FrameCodec::new(MAX);
    codec.switch_to_v5_segments();
    let mut buf = wire.split_to(first_segment);
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
    assert_eq!(
        codec.incomplete_frame_held_bytes(),
        MAX_SEGMENT_PAYLOAD_BYTES
    );
    assert_eq!(codec.incomplete_frame_bytes(&buf), Some(frame.len()));
    buf.extend_from_slice(&wire);
    assert!(codec.decode(&mut buf).unwrap().is_some());
    assert_eq!(codec.incomplete_frame_bytes(&buf), None);
    assert_eq!(codec.incomplete_frame_held_bytes(), 0);
}
