//! What a node publishes about itself in gossip, and how a peer's published state is read back.
//!
//! Each node's chitchat state is a map of string keys to string values (chitchat versions each
//! key; a node only ever writes its own). The keys, as Cassandra's `ApplicationState`s:
//!
//! | key               | value                                                        |
//! |-------------------|--------------------------------------------------------------|
//! | `status`          | `BOOT`, `NORMAL`, `LEAVING` or `MOVING` (Cassandra's `STATUS` words) |
//! | `dc`, `rack`      | the node's data centre and rack, as its snitch reports them  |
//! | `native_address`  | `ip:port` clients reach it on (`NATIVE_ADDRESS_AND_PORT`)   |
//! | `tokens`          | its tokens, [`encode_tokens`]'s form                        |
//! | `schema`          | its schema version, a hyphenated UUID                        |
//! | `release_version` | its release version, free text                              |
//! | `load`            | bytes of data it stores, decimal (Cassandra's `LOAD`); optional, |
//! |                   | published once known                                         |
//!
//! The node's host id is chitchat's `node_id` (a hyphenated UUID), its generation chitchat's
//! `generation_id`, and its broadcast address and storage port chitchat's
//! `gossip_advertise_addr`: gossip runs over UDP on the storage port, messaging over TCP on the
//! same number. A key a peer has not sent yet makes its state incomplete (it is not admitted
//! until every key arrived); a value that does not parse makes it invalid.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use locator::{Endpoint, HostId, Location, NodeState, Token};

pub(crate) const KEY_STATUS: &str = "status";
pub(crate) const KEY_DC: &str = "dc";
pub(crate) const KEY_RACK: &str = "rack";
pub(crate) const KEY_NATIVE_ADDRESS: &str = "native_address";
pub(crate) const KEY_TOKENS: &str = "tokens";
pub(crate) const KEY_SCHEMA: &str = "schema";
pub(crate) const KEY_RELEASE_VERSION: &str = "release_version";
/// Optional: a state without it is complete (a node publishes it once it has measured it).
pub(crate) const KEY_LOAD: &str = "load";

/// The keys a complete state may also hold.
pub(crate) const OPTIONAL_KEYS: [&str; 1] = [KEY_LOAD];

/// Every key a complete state holds.
pub(crate) const KEYS: [&str; 7] = [
    KEY_STATUS,
    KEY_DC,
    KEY_RACK,
    KEY_NATIVE_ADDRESS,
    KEY_TOKENS,
    KEY_SCHEMA,
    KEY_RELEASE_VERSION,
];

/// The most tokens a node may publish. Chitchat sends a key's value whole in one UDP datagram
/// (at most 65,507 bytes, with the other nodes' changes), and 1,024 tokens take 10,924 bytes;
/// Cassandra's `num_tokens` is 16 by default and rarely above 256.
pub const MAX_TOKENS_PER_NODE: usize = 1024;

/// Cassandra's gossip `STATUS` word for a node state.
pub(crate) fn status_word(state: NodeState) -> &'static str {
    match state {
        NodeState::Joining => "BOOT",
        NodeState::Normal => "NORMAL",
        NodeState::Leaving => "LEAVING",
        NodeState::Moving => "MOVING",
    }
}

fn parse_status(word: &str) -> Option<NodeState> {
    Some(match word {
        "BOOT" => NodeState::Joining,
        "NORMAL" => NodeState::Normal,
        "LEAVING" => NodeState::Leaving,
        "MOVING" => NodeState::Moving,
        _ => return None,
    })
}

/// The key-value pairs this node publishes.
pub(crate) fn local_key_values(
    endpoint: &Endpoint,
    tokens: &[Token],
    schema_version: uuid::Uuid,
    release_version: &str,
) -> Vec<(String, String)> {
    let native = SocketAddr::new(endpoint.native_address, endpoint.native_port);
    [
        (KEY_STATUS, status_word(endpoint.state).to_string()),
        (KEY_DC, endpoint.location.datacenter.clone()),
        (KEY_RACK, endpoint.location.rack.clone()),
        (KEY_NATIVE_ADDRESS, native.to_string()),
        (KEY_TOKENS, encode_tokens(tokens)),
        (KEY_SCHEMA, schema_version.hyphenated().to_string()),
        (KEY_RELEASE_VERSION, release_version.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// One node as its gossip state describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its host id, addresses, data centre, rack and state.
    pub endpoint: Endpoint,
    /// Where it gossips (UDP) and takes messages (TCP): its broadcast address and storage port.
    pub storage_address: SocketAddr,
    /// Its tokens, sorted; empty only while it has published none.
    pub tokens: Vec<Token>,
    /// Its schema version (the digest of its schema): nodes agree on the schema when these are
    /// equal.
    pub schema_version: uuid::Uuid,
    pub release_version: String,
    /// The bytes of data it stores, as it last published them (`None` before it has).
    pub load: Option<u64>,
    /// Its gossip generation: grows at each of its restarts.
    pub generation: u64,
    /// Whether this node's failure detector holds it up (this node is always up).
    pub live: bool,
}

impl Member {
    /// The address clients reach it on: what TOPOLOGY_CHANGE and STATUS_CHANGE events name.
    pub fn native_socket_address(&self) -> SocketAddr {
        SocketAddr::new(self.endpoint.native_address, self.endpoint.native_port)
    }

    /// Whether it owns its tokens in the ring (normal, leaving or moving; a joining node's
    /// tokens are pending, as in Cassandra's `TokenMetadata`).
    pub fn in_ring(&self) -> bool {
        !matches!(self.endpoint.state, NodeState::Joining) && !self.tokens.is_empty()
    }
}

/// Why a peer's gossip state is not (yet) a [`Member`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StateError {
    /// A key has not arrived yet: gossip delivers a state in pieces.
    Incomplete(&'static str),
    /// A value that does not parse: a peer of another version or a broken one.
    Invalid { key: &'static str, detail: String },
}

/// A peer's state read back from its chitchat identity and key-value pairs.
pub(crate) fn parse_member(
    node_id: &str,
    generation: u64,
    storage_address: SocketAddr,
    key_values: &BTreeMap<String, String>,
    live: bool,
) -> Result<Member, StateError> {
    let get = |key: &'static str| {
        key_values
            .get(key)
            .map(String::as_str)
            .ok_or(StateError::Incomplete(key))
    };
    let invalid = |key: &'static str, detail: String| StateError::Invalid { key, detail };
    let host_id = uuid::Uuid::parse_str(node_id)
        .map(HostId)
        .map_err(|e| invalid("node_id", format!("{node_id:?}: {e}")))?;
    let status = get(KEY_STATUS)?;
    let state = parse_status(status).ok_or_else(|| invalid(KEY_STATUS, status.to_string()))?;
    let native = get(KEY_NATIVE_ADDRESS)?;
    let native: SocketAddr = native
        .parse()
        .map_err(|e| invalid(KEY_NATIVE_ADDRESS, format!("{native:?}: {e}")))?;
    let tokens = decode_tokens(get(KEY_TOKENS)?).map_err(|e| invalid(KEY_TOKENS, e))?;
    let schema = get(KEY_SCHEMA)?;
    let schema_version = uuid::Uuid::parse_str(schema)
        .map_err(|e| invalid(KEY_SCHEMA, format!("{schema:?}: {e}")))?;
    let broadcast_address: IpAddr = storage_address.ip();
    Ok(Member {
        endpoint: Endpoint {
            host_id,
            broadcast_address,
            native_address: native.ip(),
            native_port: native.port(),
            location: Location {
                datacenter: get(KEY_DC)?.to_string(),
                rack: get(KEY_RACK)?.to_string(),
            },
            state,
        },
        storage_address,
        tokens,
        schema_version,
        release_version: get(KEY_RELEASE_VERSION)?.to_string(),
        load: match key_values.get(KEY_LOAD) {
            None => None,
            Some(load) => Some(
                load.parse::<u64>()
                    .map_err(|e| invalid(KEY_LOAD, format!("{load:?}: {e}")))?,
            ),
        },
        generation,
        live,
    })
}

/// The `tokens` value. Bytes: each token as 8 bytes, big-endian two's complement, in ascending
/// order, nothing else (the stored form of `locator::tokens`); the value is those bytes in
/// base64 (RFC 4648's standard alphabet, `=`-padded), since chitchat values are text. No
/// tokens is the empty string.
pub fn encode_tokens(tokens: &[Token]) -> String {
    let mut sorted = tokens.to_vec();
    sorted.sort_unstable();
    let bytes: Vec<u8> = sorted.iter().flat_map(|t| t.to_be_bytes()).collect();
    base64_encode(&bytes)
}

/// [`encode_tokens`]'s value read back: refused unless it is base64 of a multiple of 8 bytes,
/// holding at most [`MAX_TOKENS_PER_NODE`] distinct ascending tokens, none the minimum token
/// (which Murmur3Partitioner reserves).
pub fn decode_tokens(value: &str) -> Result<Vec<Token>, String> {
    // Checked before decoding, so a huge value costs no allocation.
    if value.len() > (MAX_TOKENS_PER_NODE * 8).div_ceil(3) * 4 {
        return Err(format!("{} characters is too long", value.len()));
    }
    let bytes = base64_decode(value)?;
    if !bytes.len().is_multiple_of(8) {
        return Err(format!("{} bytes, not a multiple of 8", bytes.len()));
    }
    let tokens: Vec<Token> = bytes
        .chunks_exact(8)
        .map(|c| Token::from_be_bytes(c.try_into().expect("chunks of 8")))
        .collect();
    if tokens.len() > MAX_TOKENS_PER_NODE {
        return Err(format!(
            "{} tokens, more than {MAX_TOKENS_PER_NODE}",
            tokens.len()
        ));
    }
    if !tokens.windows(2).all(|w| w[0] < w[1]) {
        return Err("tokens not strictly ascending".to_string());
    }
    if tokens.first() == Some(&Token::MIN) {
        return Err(format!("{} is the minimum token", Token::MIN));
    }
    Ok(tokens)
}

const BASE64_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(BASE64_ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Result<Vec<u8>, String> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(4) {
        return Err(format!("base64 of {} characters", text.len()));
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let quads = text.len() / 4;
    for (q, quad) in text.chunks_exact(4).enumerate() {
        let padding = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if padding > 2 || (padding > 0 && q + 1 != quads) {
            return Err("misplaced base64 padding".to_string());
        }
        let mut n = 0u32;
        for &c in &quad[..4 - padding] {
            let value = BASE64_ALPHABET
                .iter()
                .position(|&a| a == c)
                .ok_or_else(|| format!("{:?} is not a base64 character", c as char))?;
            n = (n << 6) | value as u32;
        }
        n <<= 6 * padding as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - padding]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(plain.as_bytes()), encoded);
            assert_eq!(base64_decode(encoded).expect("valid"), plain.as_bytes());
        }
        assert!(base64_decode("Zm9").is_err());
        assert!(base64_decode("Zm=v").is_err());
        assert!(base64_decode("Zg==Zg==").is_err());
        assert!(base64_decode("Z===").is_err());
        assert!(base64_decode("Zm9*").is_err());
    }

    #[test]
    fn tokens_round_trip_sorted_as_base64_of_their_bytes() {
        let tokens = vec![5, -3, i64::MAX, i64::MIN + 1, 0];
        let encoded = encode_tokens(&tokens);
        assert_eq!(encoded.len(), 40usize.div_ceil(3) * 4);
        let mut sorted = tokens.clone();
        sorted.sort_unstable();
        assert_eq!(decode_tokens(&encoded).expect("valid"), sorted);
        assert_eq!(decode_tokens("").expect("none"), Vec::<Token>::new());
        let many: Vec<Token> = (1..=MAX_TOKENS_PER_NODE as i64).collect();
        assert_eq!(
            decode_tokens(&encode_tokens(&many)).expect("at the bound"),
            many
        );
    }

    #[test]
    fn bad_token_values_are_refused() {
        let too_many: Vec<Token> = (1..=MAX_TOKENS_PER_NODE as i64 + 1).collect();
        assert!(decode_tokens(&encode_tokens(&too_many)).is_err());
        assert!(decode_tokens(&encode_tokens(&[i64::MIN, 3])).is_err());
        assert!(decode_tokens(&base64_encode(&[0; 7])).is_err());
        // Not ascending, or a token twice.
        let bytes: Vec<u8> = [3i64, 2].iter().flat_map(|t| t.to_be_bytes()).collect();
        assert!(decode_tokens(&base64_encode(&bytes)).is_err());
        let bytes: Vec<u8> = [3i64, 3].iter().flat_map(|t| t.to_be_bytes()).collect();
        assert!(decode_tokens(&base64_encode(&bytes)).is_err());
        assert!(decode_tokens(&"A".repeat(1 << 20)).is_err());
    }

    fn endpoint() -> Endpoint {
        Endpoint {
            host_id: HostId(uuid::Uuid::from_u128(7)),
            broadcast_address: "127.0.0.7".parse().expect("ip"),
            native_address: "10.0.0.7".parse().expect("ip"),
            native_port: 9043,
            location: Location {
                datacenter: "dc1".to_string(),
                rack: "r2".to_string(),
            },
            state: NodeState::Leaving,
        }
    }

    #[test]
    fn a_published_state_reads_back_as_the_member() {
        let schema = uuid::Uuid::from_u128(99);
        let key_values: BTreeMap<String, String> =
            local_key_values(&endpoint(), &[9, -9], schema, "5.0.4")
                .into_iter()
                .collect();
        let storage: SocketAddr = "127.0.0.7:7000".parse().expect("address");
        let node_id = uuid::Uuid::from_u128(7).to_string();
        let member = parse_member(&node_id, 12, storage, &key_values, true).expect("complete");
        assert_eq!(member.endpoint, endpoint());
        assert_eq!(member.tokens, [-9, 9]);
        assert_eq!(member.schema_version, schema);
        assert_eq!(member.release_version, "5.0.4");
        assert_eq!(member.generation, 12);
        assert_eq!(member.storage_address, storage);
        assert_eq!(
            member.native_socket_address(),
            "10.0.0.7:9043".parse().expect("address")
        );
        assert!(member.in_ring(), "a leaving node still owns its tokens");

        for key in KEYS {
            let mut partial = key_values.clone();
            partial.remove(key);
            assert_eq!(
                parse_member(&node_id, 12, storage, &partial, true),
                Err(StateError::Incomplete(key))
            );
        }
        let mut unknown = key_values.clone();
        unknown.insert(KEY_STATUS.to_string(), "LEFT".to_string());
        assert!(matches!(
            parse_member(&node_id, 12, storage, &unknown, true),
            Err(StateError::Invalid { key: "status", .. })
        ));
        assert!(matches!(
            parse_member("node-1", 12, storage, &key_values, true),
            Err(StateError::Invalid { key: "node_id", .. })
        ));

        // The load is optional, and read when published.
        assert_eq!(member.load, None);
        let mut loaded = key_values.clone();
        loaded.insert(KEY_LOAD.to_string(), "123456".to_string());
        let member = parse_member(&node_id, 12, storage, &loaded, true).expect("complete");
        assert_eq!(member.load, Some(123_456));
        loaded.insert(KEY_LOAD.to_string(), "-1".to_string());
        assert!(matches!(
            parse_member(&node_id, 12, storage, &loaded, true),
            Err(StateError::Invalid { key: "load", .. })
        ));
    }
}
