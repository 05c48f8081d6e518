//! Property tests: random values of every key-able type (a small deterministic generator keeps
//! the dependency tree lean; failures print the seed-independent inputs).

use super::*;
use crate::{compare, UdtType, Value};

/// xorshift64*: deterministic, good enough to explore value shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
    fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        let len = self.below(max_len + 1);
        // A tiny alphabet (with 0x00 and 0xFF) makes equal prefixes and escapes common.
        let alphabet = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff, b'a', b'b'];
        (0..len)
            .map(|_| {
                if self.chance(4) {
                    self.next() as u8
                } else {
                    alphabet[self.below(8) as usize]
                }
            })
            .collect()
    }
}

fn udt() -> CqlType {
    CqlType::Udt(UdtType {
        keyspace: "ks".into(),
        name: "address".into(),
        fields: vec![
            ("street".into(), CqlType::Text),
            ("zip".into(), CqlType::Int),
        ],
    })
}

fn frozen(t: CqlType) -> CqlType {
    CqlType::Frozen(Box::new(t))
}

fn key_types() -> Vec<CqlType> {
    use CqlType::*;
    vec![
        Boolean,
        Tinyint,
        Smallint,
        Int,
        Bigint,
        Counter,
        Float,
        Double,
        Varint,
        Decimal,
        Ascii,
        Text,
        Blob,
        Uuid,
        Timeuuid,
        Timestamp,
        Date,
        Time,
        Inet,
        Duration,
        frozen(List(Box::new(Int))),
        frozen(Set(Box::new(Text))),
        frozen(Map(Box::new(Int), Box::new(Blob))),
        frozen(Tuple(vec![Int, Text, Double])),
        frozen(udt()),
        Vector(Box::new(Float), 3),
        Vector(Box::new(Varint), 2),
        frozen(List(Box::new(frozen(Tuple(vec![Bigint, Blob]))))),
    ]
}

fn accepts_empty(ty: &CqlType) -> bool {
    Value::decode(ty, &[]).is_ok()
}

fn random_value(rng: &mut Rng, ty: &CqlType, depth: usize) -> Vec<u8> {
    let ty = ty.unfrozen();
    if accepts_empty(ty) && rng.chance(12) {
        return Vec::new();
    }
    let small = |rng: &mut Rng| -> i64 {
        match rng.below(4) {
            0 => rng.below(5) as i64 - 2,
            1 => [i64::MIN, i64::MAX, -1, 0][rng.below(4) as usize],
            _ => rng.next() as i64,
        }
    };
    let mut out = Vec::new();
    match ty {
        CqlType::Boolean => out.push(if rng.chance(5) {
            rng.next() as u8
        } else {
            rng.below(2) as u8
        }),
        CqlType::Tinyint => out.push(small(rng) as u8),
        CqlType::Smallint => out.extend_from_slice(&(small(rng) as i16).to_be_bytes()),
        CqlType::Int => out.extend_from_slice(&(small(rng) as i32).to_be_bytes()),
        CqlType::Bigint | CqlType::Counter | CqlType::Timestamp => {
            out.extend_from_slice(&small(rng).to_be_bytes())
        }
        CqlType::Time => {
            out.extend_from_slice(&(rng.below(86_400_000_000_000) as i64).to_be_bytes())
        }
        CqlType::Date => out.extend_from_slice(&(small(rng) as u32).to_be_bytes()),
        CqlType::Float => {
            let specials = [
                f32::NAN,
                -f32::NAN,
                0.0,
                -0.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                1.0,
                -1.0,
            ];
            let v = if rng.chance(2) {
                specials[rng.below(8) as usize]
            } else {
                f32::from_bits(rng.next() as u32)
            };
            out.extend_from_slice(&v.to_be_bytes());
        }
        CqlType::Double => {
            let specials = [
                f64::NAN,
                -f64::NAN,
                0.0,
                -0.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
                1.0,
                -1.0,
            ];
            let v = if rng.chance(2) {
                specials[rng.below(8) as usize]
            } else {
                f64::from_bits(rng.next())
            };
            out.extend_from_slice(&v.to_be_bytes());
        }
        CqlType::Varint => {
            // Non-minimal encodings (leading 0x00/0xFF) included.
            let len = 1 + rng.below(12);
            out.extend((0..len).map(|_| {
                [0x00, 0xff, 0x01, 0x80][rng.below(4) as usize]
                    ^ if rng.chance(3) { rng.next() as u8 } else { 0 }
            }));
        }
        CqlType::Decimal => {
            let scale = [0i32, 1, 2, -1, -3, 7, i32::MAX, i32::MIN][rng.below(8) as usize];
            out.extend_from_slice(&scale.to_be_bytes());
            let len = rng.below(6);
            out.extend((0..len).map(|_| {
                [0x00, 0xff, 0x0a, 0x64][rng.below(4) as usize]
                    ^ if rng.chance(3) { rng.next() as u8 } else { 0 }
            }));
        }
        CqlType::Ascii => out.extend(rng.bytes(8).into_iter().map(|b| b & 0x7f)),
        CqlType::Text => {
            let chars = ['\0', 'a', 'b', 'é', '\u{7f}', '\u{ffff}', '😀'];
            let n = rng.below(6);
            let s: String = (0..n).map(|_| chars[rng.below(7) as usize]).collect();
            out.extend_from_slice(s.as_bytes());
        }
        CqlType::Blob | CqlType::Custom(_) => out = rng.bytes(10),
        CqlType::Uuid | CqlType::Timeuuid => {
            let mut b = [0u8; 16];
            for x in &mut b {
                *x = if rng.chance(2) { 0 } else { rng.next() as u8 };
            }
            let version = if matches!(ty, CqlType::Timeuuid) || rng.chance(2) {
                1
            } else {
                rng.below(16) as u8
            };
            b[6] = (b[6] & 0x0f) | (version << 4);
            out.extend_from_slice(&b);
        }
        CqlType::Inet => {
            let n = if rng.chance(2) { 4 } else { 16 };
            out.extend((0..n).map(|_| if rng.chance(2) { 0 } else { rng.next() as u8 }));
        }
        CqlType::Duration => {
            let sign = if rng.chance(2) { 1 } else { -1 };
            Value::Duration {
                months: sign * rng.below(30) as i32,
                days: sign * rng.below(30) as i32,
                nanoseconds: i64::from(sign) * rng.below(1 << 40) as i64,
            }
            .encode(&mut out);
        }
        CqlType::List(e) | CqlType::Set(e) => {
            let n = if depth > 2 { 0 } else { rng.below(4) };
            out.extend_from_slice(&(n as i32).to_be_bytes());
            for _ in 0..n {
                let v = random_value(rng, e, depth + 1);
                out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                out.extend_from_slice(&v);
            }
        }
        CqlType::Map(k, v) => {
            let n = if depth > 2 { 0 } else { rng.below(3) };
            out.extend_from_slice(&(n as i32).to_be_bytes());
            for _ in 0..n {
                for t in [k, v] {
                    let x = random_value(rng, t, depth + 1);
                    out.extend_from_slice(&(x.len() as i32).to_be_bytes());
                    out.extend_from_slice(&x);
                }
            }
        }
        CqlType::Tuple(_) | CqlType::Udt(_) => {
            let types: Vec<&CqlType> = match ty {
                CqlType::Tuple(t) => t.iter().collect(),
                CqlType::Udt(u) => u.fields.iter().map(|(_, t)| t).collect(),
                _ => unreachable!(),
            };
            // Sometimes fewer fields than the type has (absent trailing fields are null).
            let present = types.len() - rng.below(types.len() as u64) as usize;
            for t in &types[..present] {
                if rng.chance(3) {
                    out.extend_from_slice(&(-1i32).to_be_bytes());
                } else {
                    let v = random_value(rng, t, depth + 1);
                    out.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    out.extend_from_slice(&v);
                }
            }
            if out.is_empty() {
                out.extend_from_slice(&(-1i32).to_be_bytes());
            }
        }
        CqlType::Vector(e, n) => {
            let fixed = crate::layout::fixed_size(e).is_some();
            for _ in 0..*n {
                // Fixed-size vector elements have no length, so they cannot be empty.
                let v = loop {
                    let v = random_value(rng, e, depth + 1);
                    if !(fixed && v.is_empty()) {
                        break v;
                    }
                };
                if !fixed {
                    vint::write_unsigned(v.len() as u64, &mut out);
                }
                out.extend_from_slice(&v);
            }
        }
        CqlType::Frozen(_) => unreachable!(),
    }
    out
}

fn enc(ty: &CqlType, v: &[u8], desc: bool) -> Vec<u8> {
    let mut out = Vec::new();
    encode(ty, v, desc, &mut out);
    out
}

#[test]
fn generated_values_are_valid() {
    let mut rng = Rng(0x5eed);
    for ty in key_types() {
        for _ in 0..200 {
            let v = random_value(&mut rng, &ty, 0);
            crate::validate(&ty, &v).unwrap_or_else(|e| panic!("{ty} {v:02x?}: {e}"));
        }
    }
}

#[test]
fn order_and_round_trip_per_type() {
    let mut rng = Rng(0x1234_5678);
    for ty in key_types() {
        let values: Vec<Vec<u8>> = (0..120).map(|_| random_value(&mut rng, &ty, 0)).collect();
        for desc in [false, true] {
            let encoded: Vec<Vec<u8>> = values.iter().map(|v| enc(&ty, v, desc)).collect();
            for (v, e) in values.iter().zip(&encoded) {
                assert_ne!(e[0], PREFIX_END, "{ty}");
                let mut input = &e[..];
                let back = decode(&ty, &mut input, desc)
                    .unwrap_or_else(|err| panic!("{ty} {v:02x?}: {err}"));
                assert!(input.is_empty(), "{ty}: decode left bytes");
                assert_eq!(
                    compare(&ty, &back, v),
                    Ordering::Equal,
                    "{ty}: {v:02x?} -> {back:02x?}"
                );
                assert_eq!(
                    enc(&ty, &back, desc),
                    *e,
                    "{ty}: canonical form re-encodes equally"
                );
                crate::validate(&ty, &back).unwrap_or_else(|err| panic!("{ty} {back:02x?}: {err}"));
            }
            for (a, ea) in values.iter().zip(&encoded) {
                for (b, eb) in values.iter().zip(&encoded) {
                    let expected = compare(&ty, a, b);
                    let expected = if desc { expected.reverse() } else { expected };
                    assert_eq!(
                        ea.cmp(eb),
                        expected,
                        "{ty} desc={desc}: {a:02x?} vs {b:02x?}"
                    );
                    // Prefix-free: distinct encodings are never prefixes of one another.
                    if ea != eb {
                        assert!(!ea.starts_with(eb) && !eb.starts_with(ea), "{ty}: prefix");
                    }
                }
            }
        }
    }
}

#[test]
fn multi_component_keys_and_prefix_bounds() {
    let mut rng = Rng(0xfeed_beef);
    let types = key_types();
    for _ in 0..60 {
        let columns: Vec<(CqlType, bool)> = (0..3)
            .map(|_| {
                (
                    types[rng.below(types.len() as u64) as usize].clone(),
                    rng.chance(2),
                )
            })
            .collect();
        // Few distinct values per column so that equal leading components are common.
        let pools: Vec<Vec<Vec<u8>>> = columns
            .iter()
            .map(|(ty, _)| (0..3).map(|_| random_value(&mut rng, ty, 0)).collect())
            .collect();
        let keys: Vec<Vec<Vec<u8>>> = (0..30)
            .map(|_| {
                pools
                    .iter()
                    .map(|p| p[rng.below(3) as usize].clone())
                    .collect()
            })
            .collect();
        let encode_key = |key: &[Vec<u8>]| {
            let mut out = Vec::new();
            for ((ty, desc), v) in columns.iter().zip(key) {
                encode(ty, v, *desc, &mut out);
            }
            out
        };
        let logical = |a: &[Vec<u8>], b: &[Vec<u8>]| {
            for ((ty, desc), (x, y)) in columns.iter().zip(a.iter().zip(b)) {
                let c = compare(ty, x, y);
                let c = if *desc { c.reverse() } else { c };
                if c.is_ne() {
                    return c;
                }
            }
            a.len().cmp(&b.len())
        };
        for a in &keys {
            let ea = encode_key(a);
            // Decoding the concatenation component by component gives the values back.
            let mut input = &ea[..];
            for ((ty, desc), v) in columns.iter().zip(a) {
                let back = decode(ty, &mut input, *desc).unwrap();
                assert_eq!(compare(ty, &back, v), Ordering::Equal);
            }
            assert!(input.is_empty());
            for b in &keys {
                let eb = encode_key(b);
                assert_eq!(ea.cmp(&eb), logical(a, b), "{columns:?}");
                // Prefix bounds: for every prefix length k of `a`, `b` lies in
                // [P, prefix_end(P)) exactly when it starts with the same k components.
                for k in 0..=3 {
                    let p = encode_key(&a[..k]);
                    let end = prefix_end(&p);
                    let same_prefix = logical(&a[..k], &b[..k]).is_eq();
                    let inside = eb.as_slice() >= p.as_slice() && eb < end;
                    assert_eq!(inside, same_prefix, "k={k} {columns:?}");
                    if !same_prefix {
                        // Outside keys are on the same side of both bounds.
                        assert_eq!(eb.as_slice() < p.as_slice(), eb < end);
                    }
                }
            }
        }
    }
}

#[test]
fn invalid_bytes_are_kept_verbatim() {
    for (ty, v) in [
        (CqlType::Int, vec![1, 2, 3]),
        (CqlType::Boolean, vec![1, 2]),
        (CqlType::List(Box::new(CqlType::Int)), vec![0, 0, 0, 9]),
        (
            frozen(CqlType::Tuple(vec![CqlType::Int])),
            vec![0, 0, 0, 1, 5, 0, 0, 0, 0, 0],
        ),
    ] {
        for desc in [false, true] {
            let e = enc(&ty, &v, desc);
            let mut input = &e[..];
            assert_eq!(decode(&ty, &mut input, desc).unwrap(), v);
            assert!(input.is_empty());
        }
    }
}

#[test]
fn garbage_never_panics() {
    let mut rng = Rng(99);
    let types = key_types();
    for _ in 0..20_000 {
        let ty = &types[rng.below(types.len() as u64) as usize];
        let mut bytes = rng.bytes(24);
        if rng.chance(2) && !bytes.is_empty() {
            bytes[0] = [EMPTY, VALUE, INVALID][rng.below(3) as usize];
        }
        let mut input = &bytes[..];
        let _ = decode(ty, &mut input, rng.chance(2));
        let _ = Value::decode(ty, &bytes);
        let _ = compare(ty, &bytes, &rng.bytes(8));
        let mut out = Vec::new();
        encode(ty, &bytes, rng.chance(2), &mut out);
    }
}

#[test]
fn canonical_forms() {
    // 1.0 and 1.00 are the same key; decoding gives the normalised scale.
    let one_point_zero = [0, 0, 0, 1, 10];
    let one_point_zero_zero = [0, 0, 0, 2, 100];
    let a = enc(&CqlType::Decimal, &one_point_zero, false);
    assert_eq!(a, enc(&CqlType::Decimal, &one_point_zero_zero, false));
    assert_eq!(
        decode(&CqlType::Decimal, &mut &a[..], false).unwrap(),
        [0, 0, 0, 0, 1]
    );
    // Non-minimal varint and non-canonical true.
    assert_eq!(
        decode(
            &CqlType::Varint,
            &mut &enc(&CqlType::Varint, &[0, 0, 5], false)[..],
            false
        )
        .unwrap(),
        [5]
    );
    assert_eq!(
        decode(
            &CqlType::Boolean,
            &mut &enc(&CqlType::Boolean, &[7], false)[..],
            false
        )
        .unwrap(),
        [1]
    );
    // Trailing null tuple fields are dropped, but an all-null tuple stays non-empty.
    let tuple = CqlType::Tuple(vec![CqlType::Int, CqlType::Int]);
    let all_null = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(
        decode(&tuple, &mut &enc(&tuple, &all_null, true)[..], true).unwrap(),
        [0xff; 4]
    );
    assert_eq!(prefix_end(&[1, 2]), [1, 2, PREFIX_END]);
}
