//! Partitioning: which token a partition key has, and how multi-column partition keys are
//! serialised.
//!
//! Owns: Cassandra's `Murmur3Partitioner` token function (bit for bit, including its quirks),
//! the `CompositeType` serialisation of multi-column partition keys, and deterministic random
//! token allocation for a node's vnodes.
//!
//! Depends on nothing but `thiserror`: it must stay a leaf crate that every layer can use, and
//! must never know about types, schema or storage.

use thiserror::Error;

/// The smallest token. Cassandra's Murmur3Partitioner never assigns it to a key (see
/// [`murmur3_token`]); it is the "minimum token" that starts the ring.
pub const MIN_TOKEN: i64 = i64::MIN;
/// The largest token.
pub const MAX_TOKEN: i64 = i64::MAX;

/// Errors from splitting a serialised partition key into its components.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PartitionerError {
    #[error("Invalid partition key: expected {expected} components, {detail}")]
    InvalidCompositeKey { expected: usize, detail: String },
}

/// The token of a partition key, as Cassandra's `Murmur3Partitioner.getToken` computes it:
/// MurmurHash3 x64 128-bit with seed 0, first 64-bit half.
///
/// Two quirks are reproduced deliberately, because tokens are part of the on-disk and
/// cluster-wide contract with Cassandra drivers (token-aware routing) and with `token()`:
/// - the tail (the last `len % 16` bytes) is read as *signed* Java bytes, so bytes >= 0x80 are
///   sign-extended before shifting;
/// - `i64::MIN` is reserved for the ring's minimum token, so a hash of `i64::MIN` becomes
///   `i64::MAX`.
pub fn murmur3_token(key: &[u8]) -> i64 {
    let h = murmur3_x64_128_cassandra(key, 0);
    if h == i64::MIN {
        i64::MAX
    } else {
        h
    }
}

const C1: u64 = 0x87c3_7b91_1142_53d5;
const C2: u64 = 0x4cf5_ad43_2745_937f;

fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// First half of Cassandra's `MurmurHash.hash3_x64_128`.
fn murmur3_x64_128_cassandra(key: &[u8], seed: u64) -> i64 {
    let mut h1 = seed;
    let mut h2 = seed;
    let mut blocks = key.chunks_exact(16);
    for block in &mut blocks {
        let (lo, hi) = block.split_at(8);
        let mut k1 = u64::from_le_bytes(lo.try_into().expect("split_at(8) of 16 bytes"));
        let mut k2 = u64::from_le_bytes(hi.try_into().expect("split_at(8) of 16 bytes"));

        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
        h1 = h1.rotate_left(27).wrapping_add(h2);
        h1 = h1.wrapping_mul(5).wrapping_add(0x52dc_e729);

        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
        h2 = h2.rotate_left(31).wrapping_add(h1);
        h2 = h2.wrapping_mul(5).wrapping_add(0x3849_5ab5);
    }

    let tail = blocks.remainder();
    // Java's `(long) key.get(i)` sign-extends; `as i8 as i64 as u64` does the same.
    let signed = |i: usize| tail[i] as i8 as i64 as u64;
    let mut k1: u64 = 0;
    let mut k2: u64 = 0;
    for i in (8..tail.len()).rev() {
        k2 ^= signed(i) << ((i - 8) * 8);
    }
    if tail.len() > 8 {
        k2 = k2.wrapping_mul(C2).rotate_left(33).wrapping_mul(C1);
        h2 ^= k2;
    }
    for i in (0..tail.len().min(8)).rev() {
        k1 ^= signed(i) << (i * 8);
    }
    if !tail.is_empty() {
        k1 = k1.wrapping_mul(C1).rotate_left(31).wrapping_mul(C2);
        h1 ^= k1;
    }

    let len = key.len() as u64;
    h1 ^= len;
    h2 ^= len;
    h1 = h1.wrapping_add(h2);
    h2 = h2.wrapping_add(h1);
    h1 = fmix(h1);
    h2 = fmix(h2);
    h1 = h1.wrapping_add(h2);
    h1 as i64
}

/// Serialises the components of a partition key the way Cassandra's `CompositeType` does for
/// multi-column partition keys; a single component is returned unchanged (Cassandra keys a
/// single-column partition by the column's bytes alone).
///
/// Layout per component (two or more components): `[u16 BE length][bytes][0x00]`, where the
/// trailing byte is the end-of-component marker (always 0 for a full key).
///
/// A component longer than 65535 bytes cannot be represented; Cassandra rejects such keys at
/// validation ("Key length of ... is longer than maximum of 65535"), so callers must too. Here
/// the length is saturated rather than panicking, which yields a key that will not decompose.
pub fn compose_partition_key(components: &[&[u8]]) -> Vec<u8> {
    if let [single] = components {
        return single.to_vec();
    }
    let total: usize = components.iter().map(|c| c.len() + 3).sum();
    let mut out = Vec::with_capacity(total);
    for c in components {
        let len = u16::try_from(c.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(c);
        out.push(0);
    }
    out
}

/// Splits a partition key built by [`compose_partition_key`] into its `n` components
/// (`n == 1` returns the whole key).
pub fn decompose_partition_key(key: &[u8], n: usize) -> Result<Vec<&[u8]>, PartitionerError> {
    let err = |detail: String| PartitionerError::InvalidCompositeKey {
        expected: n,
        detail,
    };
    if n == 1 {
        return Ok(vec![key]);
    }
    if n == 0 {
        return Err(err("a partition key has at least one component".to_string()));
    }
    // Each component needs at least 3 bytes, so this bounds the allocation by the input size.
    let mut out = Vec::with_capacity(n.min(key.len() / 3));
    let mut rest = key;
    while !rest.is_empty() {
        if out.len() == n {
            return Err(err(format!("got extra bytes after component {n}")));
        }
        let (len_bytes, after) = rest.split_first_chunk::<2>().ok_or_else(|| {
            err(format!(
                "not enough bytes to read the length of component {}",
                out.len()
            ))
        })?;
        let len = u16::from_be_bytes(*len_bytes) as usize;
        if after.len() < len + 1 {
            return Err(err(format!(
                "not enough bytes to read component {}",
                out.len()
            )));
        }
        let (component, after) = after.split_at(len);
        if after[0] != 0 {
            return Err(err(format!(
                "component {} has end-of-component byte {} instead of 0",
                out.len(),
                after[0]
            )));
        }
        out.push(component);
        rest = &after[1..];
    }
    if out.len() != n {
        return Err(err(format!("got {}", out.len())));
    }
    Ok(out)
}

/// `num_tokens` distinct tokens spread uniformly over the ring, sorted ascending, the same for
/// the same `seed` (so a restarted node that lost its saved tokens can be told its seed).
///
/// Uses SplitMix64, which is enough for spreading vnodes and keeps this crate dependency-free.
/// [`MIN_TOKEN`] is never returned: no key ever hashes to it, so a vnode there would own nothing.
pub fn random_tokens(num_tokens: usize, seed: u64) -> Vec<i64> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut set = std::collections::BTreeSet::new();
    while set.len() < num_tokens {
        let t = next() as i64;
        if t != MIN_TOKEN {
            set.insert(t);
        }
    }
    set.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_cassandra() {
        let cases: &[(&[u8], i64)] = &[
            (b"123", -7468325962851647638),
            (b"test", -6017608668500074083),
            (&[0xfe; 8], -8927430733708461935),
            (&[0x10; 8], 1446172840243228796),
            (&[0xff; 16], -2824192546314762522),
            (&[0xe2, 0xe7], -8582699461035929883),
            ("kremówki".as_bytes(), 4354931215268080151),
            (
                &[0, 4, 0, 0, 0, 0x8f, 0, 0, 4, 0, 0, 0, 0xea, 0],
                4958784316840156970,
            ),
        ];
        for (key, token) in cases {
            assert_eq!(murmur3_token(key), *token, "key {key:02x?}");
        }
    }

    #[test]
    fn composite_matches_cassandra_layout() {
        let a = 143i32.to_be_bytes();
        let b = 234i32.to_be_bytes();
        let key = compose_partition_key(&[&a, &b]);
        assert_eq!(key, [0, 4, 0, 0, 0, 0x8f, 0, 0, 4, 0, 0, 0, 0xea, 0]);
        assert_eq!(
            decompose_partition_key(&key, 2).unwrap(),
            vec![&a[..], &b[..]]
        );
        assert_eq!(compose_partition_key(&[b"abc"]), b"abc");
        assert_eq!(
            decompose_partition_key(b"abc", 1).unwrap(),
            vec![&b"abc"[..]]
        );
        let empty = compose_partition_key(&[b"", b"x"]);
        assert_eq!(
            decompose_partition_key(&empty, 2).unwrap(),
            vec![&b""[..], &b"x"[..]]
        );
    }

    #[test]
    fn decompose_rejects_malformed_keys() {
        let key = compose_partition_key(&[b"a", b"b"]);
        assert!(decompose_partition_key(&key, 3).is_err());
        assert!(decompose_partition_key(&key, 0).is_err());
        assert!(decompose_partition_key(&key[..key.len() - 1], 2).is_err());
        let mut bad_eoc = key.clone();
        bad_eoc[3] = 1;
        assert!(decompose_partition_key(&bad_eoc, 2).is_err());
        assert!(decompose_partition_key(&[0xff, 0xff, 0], 2).is_err());
        // Every prefix of a valid key must fail without panicking.
        for i in 0..key.len() {
            let _ = decompose_partition_key(&key[..i], 2);
        }
    }

    #[test]
    fn random_tokens_are_sorted_distinct_and_deterministic() {
        let a = random_tokens(256, 42);
        assert_eq!(a.len(), 256);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(a, random_tokens(256, 42));
        assert_ne!(a, random_tokens(256, 43));
        assert!(a.first().unwrap() < &0 && a.last().unwrap() > &0);
        assert!(random_tokens(0, 1).is_empty());
    }

    #[test]
    fn min_token_never_assigned() {
        assert_ne!(murmur3_token(b""), MIN_TOKEN);
    }
}
