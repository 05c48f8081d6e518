//! The handshake that opens every connection (Cassandra's `HandshakeProtocol`, with the cluster
//! name check Cassandra does in gossip done here, before any message is read).
//!
//! The dialer sends a hello, the acceptor answers; both are a magic, a body length and a body
//! ending in its CRC32. Integers big-endian.
//!
//! ```text
//! Hello (dialer → acceptor):
//! u32  magic 0x484D5348 ("HMSH")
//! u16  body length (bytes after this field, CRC included; at most MAX_HANDSHAKE_BODY_BYTES)
//! u8   lowest protocol version the dialer speaks
//! u8   highest protocol version the dialer speaks
//! u8   connection type: 0 small messages, 1 large messages
//! 16   dialer's host id (UUID bytes)
//! u8   broadcast address family: 4 or 6
//! 4|16 broadcast IP
//! u16  broadcast port
//! u16  cluster name length (at most MAX_CLUSTER_NAME_BYTES), UTF-8 bytes
//! u16  the dialer's lane: its shard index, or 0xFFFF (MAIN_LANE) for its main runtime;
//!      absent in a hello from a build before lanes, which counts as MAIN_LANE
//! u32  CRC32 of the body before it
//!
//! Reply (acceptor → dialer):
//! u32  magic 0x484D5348
//! u16  body length
//! u8   0 accepted, 1 refused
//! u8   accepted: the protocol version chosen; refused: the highest the acceptor speaks
//! 16   acceptor's host id
//! u64  accepted: the acceptor's start generation (gossip's; 0 if unknown); refused: 0
//! u16  reason length (0 when accepted; at most MAX_REFUSAL_REASON_BYTES), UTF-8 bytes
//! u32  CRC32 of the body before it
//! ```
//!
//! The acceptor refuses another cluster's node, a version range without its own, and its own
//! host id (two nodes sharing one); the dialer logs the reason and waits
//! `MessagingOptions::refused_retry_ms` before trying again. After an accepted handshake the
//! connection carries frames (`frame.rs`) from the dialer to the acceptor only. The lane tells
//! the acceptor which of its shards serves the connection (`lanes.rs`), so that a request, its
//! replica's work and its response stay on one thread per node. The accepted reply's
//! generation tells the dialer which process of the peer the connection reaches: when gossip
//! later shows the peer under a newer generation, the connection is to a process that is gone,
//! and is closed (`MessagingService::peer_restarted`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{Buf, BufMut, BytesMut};
use locator::HostId;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::frame::PROTOCOL_VERSION;

const HANDSHAKE_MAGIC: u32 = 0x484D_5348;
/// A hello or reply body is never longer; a longer length is refused before it is read.
pub const MAX_HANDSHAKE_BODY_BYTES: usize = 1024;
/// Cassandra's cluster names are short; this bound keeps the hello small.
pub const MAX_CLUSTER_NAME_BYTES: usize = 255;
/// A refusal's reason is cut to this.
pub const MAX_REFUSAL_REASON_BYTES: usize = 512;
/// The lane of a dialer's main runtime (not one of its shards).
pub const MAIN_LANE: u16 = u16::MAX;

/// Which of a peer's two connections this is (Cassandra 4.0's small and large message
/// connections; it also has an urgent one, which Helenus does not have yet): a message goes
/// on the large one if its payload is over `MessagingOptions::large_message_threshold_bytes`,
/// so a large message does not hold up the small ones behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionType {
    /// Messages up to the large-message threshold.
    Small,
    /// Messages over it.
    Large,
}

/// What a dialer says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub min_version: u8,
    pub max_version: u8,
    pub connection_type: ConnectionType,
    pub host_id: HostId,
    /// Where the dialer's own listener is reached, so the acceptor can send its responses.
    pub broadcast_address: SocketAddr,
    pub cluster_name: String,
    /// The dialer's lane: the index of the shard whose connection this is, or [`MAIN_LANE`].
    pub lane: u16,
}

/// The acceptor's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `generation` is the acceptor's start generation (`MessagingConfig::generation`, 0 if
    /// unknown): which process of the peer the connection reaches.
    Accepted {
        version: u8,
        host_id: HostId,
        generation: u64,
    },
    Refused {
        host_id: HostId,
        reason: String,
    },
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("handshake I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed handshake: {0}")]
    Malformed(&'static str),
    #[error("handshake checksum mismatch")]
    Checksum,
}

impl Hello {
    pub fn encode(&self) -> BytesMut {
        let mut body = BytesMut::with_capacity(64 + self.cluster_name.len());
        body.put_u8(self.min_version);
        body.put_u8(self.max_version);
        body.put_u8(match self.connection_type {
            ConnectionType::Small => 0,
            ConnectionType::Large => 1,
        });
        body.put_slice(self.host_id.0.as_bytes());
        match self.broadcast_address.ip() {
            IpAddr::V4(ip) => {
                body.put_u8(4);
                body.put_slice(&ip.octets());
            }
            IpAddr::V6(ip) => {
                body.put_u8(6);
                body.put_slice(&ip.octets());
            }
        }
        body.put_u16(self.broadcast_address.port());
        let name = cut(&self.cluster_name, MAX_CLUSTER_NAME_BYTES);
        body.put_u16(name.len() as u16);
        body.put_slice(name.as_bytes());
        body.put_u16(self.lane);
        envelope(body)
    }

    /// Decodes a body (as `read_body` returns it: CRC checked and removed).
    pub fn decode(mut body: &[u8]) -> Result<Hello, HandshakeError> {
        let min_version = take_u8(&mut body)?;
        let max_version = take_u8(&mut body)?;
        let connection_type = match take_u8(&mut body)? {
            0 => ConnectionType::Small,
            1 => ConnectionType::Large,
            _ => return Err(HandshakeError::Malformed("unknown connection type")),
        };
        let host_id = take_host_id(&mut body)?;
        let ip = match take_u8(&mut body)? {
            4 => IpAddr::V4(Ipv4Addr::from(take::<4>(&mut body)?)),
            6 => IpAddr::V6(Ipv6Addr::from(take::<16>(&mut body)?)),
            _ => return Err(HandshakeError::Malformed("unknown address family")),
        };
        let port = u16::from_be_bytes(take::<2>(&mut body)?);
        let cluster_name = take_string(&mut body, MAX_CLUSTER_NAME_BYTES)?;
        // A dialer from before lanes sends none: its connections are served on the main lane.
        let lane = if body.is_empty() {
            MAIN_LANE
        } else {
            u16::from_be_bytes(take::<2>(&mut body)?)
        };
        if !body.is_empty() {
            return Err(HandshakeError::Malformed("bytes after the hello"));
        }
        Ok(Hello {
            min_version,
            max_version,
            connection_type,
            host_id,
            broadcast_address: SocketAddr::new(ip, port),
            cluster_name,
            lane,
        })
    }
}

impl Reply {
    pub fn encode(&self) -> BytesMut {
        let mut body = BytesMut::with_capacity(64);
        let (status, version, host_id, generation, reason) = match self {
            Reply::Accepted {
                version,
                host_id,
                generation,
            } => (0, *version, host_id, *generation, ""),
            Reply::Refused { host_id, reason } => {
                (1, PROTOCOL_VERSION, host_id, 0, reason.as_str())
            }
        };
        body.put_u8(status);
        body.put_u8(version);
        body.put_slice(host_id.0.as_bytes());
        body.put_u64(generation);
        let reason = cut(reason, MAX_REFUSAL_REASON_BYTES);
        body.put_u16(reason.len() as u16);
        body.put_slice(reason.as_bytes());
        envelope(body)
    }

    pub fn decode(mut body: &[u8]) -> Result<Reply, HandshakeError> {
        let status = take_u8(&mut body)?;
        let version = take_u8(&mut body)?;
        let host_id = take_host_id(&mut body)?;
        let generation = u64::from_be_bytes(take::<8>(&mut body)?);
        let reason = take_string(&mut body, MAX_REFUSAL_REASON_BYTES)?;
        if !body.is_empty() {
            return Err(HandshakeError::Malformed("bytes after the reply"));
        }
        match status {
            0 if reason.is_empty() => Ok(Reply::Accepted {
                version,
                host_id,
                generation,
            }),
            1 if generation == 0 => Ok(Reply::Refused { host_id, reason }),
            _ => Err(HandshakeError::Malformed("unknown reply status")),
        }
    }
}

/// The acceptor's decision on `hello`: the reply to send. An acceptance carries
/// `local_generation`, this process's start generation.
pub fn judge(
    hello: &Hello,
    local_host_id: HostId,
    local_generation: u64,
    cluster_name: &str,
) -> Reply {
    let refuse = |reason: String| Reply::Refused {
        host_id: local_host_id,
        reason,
    };
    if hello.cluster_name != cluster_name {
        return refuse(format!(
            "cluster name mismatch: this node is in cluster '{cluster_name}', the dialer ({}) in '{}'",
            hello.host_id, hello.cluster_name
        ));
    }
    if !(hello.min_version..=hello.max_version).contains(&PROTOCOL_VERSION) {
        return refuse(format!(
            "no common messaging protocol version: this node speaks {PROTOCOL_VERSION}, the dialer {}..={}",
            hello.min_version, hello.max_version
        ));
    }
    if hello.host_id == local_host_id {
        return refuse(format!(
            "the dialer at {} has this node's host id {local_host_id}",
            hello.broadcast_address
        ));
    }
    Reply::Accepted {
        version: PROTOCOL_VERSION,
        host_id: local_host_id,
        generation: local_generation,
    }
}

/// Reads one magic-led body from `stream`, checks its CRC, and returns it without the CRC.
pub async fn read_body<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
) -> Result<Vec<u8>, HandshakeError> {
    let mut head = [0u8; 6];
    stream.read_exact(&mut head).await?;
    let mut fields = &head[..];
    if fields.get_u32() != HANDSHAKE_MAGIC {
        return Err(HandshakeError::Malformed("bad handshake magic"));
    }
    let length = usize::from(fields.get_u16());
    if !(4..=MAX_HANDSHAKE_BODY_BYTES).contains(&length) {
        return Err(HandshakeError::Malformed("handshake body length"));
    }
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    let crc_at = length - 4;
    let read = u32::from_be_bytes(body[crc_at..].try_into().expect("four bytes"));
    body.truncate(crc_at);
    if crc32fast::hash(&body) != read {
        return Err(HandshakeError::Checksum);
    }
    Ok(body)
}

/// Writes an encoded hello or reply.
pub async fn write_all<S: AsyncWrite + Unpin + ?Sized>(
    stream: &mut S,
    bytes: &[u8],
) -> Result<(), HandshakeError> {
    stream.write_all(bytes).await?;
    stream.flush().await?;
    Ok(())
}

/// Magic, body length, body, CRC.
fn envelope(body: BytesMut) -> BytesMut {
    let mut out = BytesMut::with_capacity(6 + body.len() + 4);
    out.put_u32(HANDSHAKE_MAGIC);
    out.put_u16((body.len() + 4) as u16);
    out.put_slice(&body);
    out.put_u32(crc32fast::hash(&body));
    out
}

fn cut(text: &str, max_bytes: usize) -> &str {
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn take<const N: usize>(body: &mut &[u8]) -> Result<[u8; N], HandshakeError> {
    let (head, rest) = body
        .split_first_chunk::<N>()
        .ok_or(HandshakeError::Malformed("truncated handshake"))?;
    *body = rest;
    Ok(*head)
}

fn take_u8(body: &mut &[u8]) -> Result<u8, HandshakeError> {
    Ok(take::<1>(body)?[0])
}

fn take_host_id(body: &mut &[u8]) -> Result<HostId, HandshakeError> {
    Ok(HostId(uuid::Uuid::from_bytes(take::<16>(body)?)))
}

fn take_string(body: &mut &[u8], max_bytes: usize) -> Result<String, HandshakeError> {
    let length = usize::from(u16::from_be_bytes(take::<2>(body)?));
    if length > max_bytes || length > body.len() {
        return Err(HandshakeError::Malformed("string length"));
    }
    let (text, rest) = body.split_at(length);
    *body = rest;
    String::from_utf8(text.to_vec()).map_err(|_| HandshakeError::Malformed("string UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u128) -> HostId {
        HostId(uuid::Uuid::from_u128(n))
    }

    fn hello() -> Hello {
        Hello {
            min_version: 1,
            max_version: 1,
            connection_type: ConnectionType::Large,
            host_id: host(1),
            broadcast_address: "127.0.0.2:7000".parse().unwrap(),
            cluster_name: "Test Cluster".to_string(),
            lane: 1,
        }
    }

    async fn round_trip(bytes: &[u8]) -> Result<Vec<u8>, HandshakeError> {
        let mut reader = bytes;
        read_body(&mut reader).await
    }

    #[tokio::test]
    async fn hellos_and_replies_round_trip() {
        let mut v6 = hello();
        v6.broadcast_address = "[::1]:7001".parse().unwrap();
        v6.connection_type = ConnectionType::Small;
        for h in [hello(), v6] {
            let body = round_trip(&h.encode()).await.unwrap();
            assert_eq!(Hello::decode(&body).unwrap(), h);
        }
        for r in [
            Reply::Accepted {
                version: 1,
                host_id: host(2),
                generation: 0,
            },
            Reply::Accepted {
                version: 1,
                host_id: host(2),
                generation: 1_764_400_000,
            },
            Reply::Refused {
                host_id: host(2),
                reason: "no".to_string(),
            },
        ] {
            let body = round_trip(&r.encode()).await.unwrap();
            assert_eq!(Reply::decode(&body).unwrap(), r);
        }
    }

    #[tokio::test]
    async fn every_truncation_and_bit_flip_of_a_hello_is_refused() {
        let whole = hello().encode();
        for cut in 0..whole.len() {
            assert!(round_trip(&whole[..cut]).await.is_err(), "cut at {cut}");
        }
        for i in 0..whole.len() {
            for bit in 0..8 {
                let mut damaged = whole.to_vec();
                damaged[i] ^= 1 << bit;
                let decoded = round_trip(&damaged).await.and_then(|b| Hello::decode(&b));
                assert!(decoded.is_err(), "flip of bit {bit} of byte {i}");
            }
        }
    }

    #[test]
    fn a_hello_body_with_bad_fields_is_refused() {
        let good = hello().encode();
        // The body without magic, length and CRC.
        let body = &good[6..good.len() - 4];
        assert!(Hello::decode(body).is_ok());
        for (at, value) in [(2, 7u8), (19, 5)] {
            let mut damaged = body.to_vec();
            damaged[at] = value;
            assert!(Hello::decode(&damaged).is_err(), "byte {at} = {value}");
        }
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(Hello::decode(&longer).is_err());
    }

    #[test]
    fn a_hello_without_a_lane_is_served_on_the_main_lane() {
        let good = hello().encode();
        // The body without magic, length, lane and CRC: what a dialer from before lanes sent.
        let old = &good[6..good.len() - 6];
        let decoded = Hello::decode(old).unwrap();
        assert_eq!(decoded.lane, MAIN_LANE);
        assert_eq!(decoded.cluster_name, "Test Cluster");
    }

    #[test]
    fn the_acceptor_refuses_another_cluster_a_foreign_version_and_its_own_host_id() {
        let local = host(9);
        assert_eq!(
            judge(&hello(), local, 77, "Test Cluster"),
            Reply::Accepted {
                version: 1,
                host_id: local,
                generation: 77
            }
        );
        let Reply::Refused { reason, .. } = judge(&hello(), local, 77, "Other") else {
            panic!("accepted another cluster");
        };
        assert!(reason.contains("cluster name mismatch"), "{reason}");
        let mut newer = hello();
        newer.min_version = 2;
        newer.max_version = 3;
        let Reply::Refused { reason, .. } = judge(&newer, local, 77, "Test Cluster") else {
            panic!("accepted a foreign version");
        };
        assert!(reason.contains("protocol version"), "{reason}");
        let Reply::Refused { reason, .. } = judge(&hello(), host(1), 77, "Test Cluster") else {
            panic!("accepted its own host id");
        };
        assert!(reason.contains("host id"), "{reason}");
    }

    #[tokio::test]
    async fn every_truncation_and_bit_flip_of_an_acceptance_is_refused() {
        let whole = Reply::Accepted {
            version: 1,
            host_id: host(2),
            generation: 1_764_400_000,
        }
        .encode();
        for cut in 0..whole.len() {
            assert!(round_trip(&whole[..cut]).await.is_err(), "cut at {cut}");
        }
        for i in 0..whole.len() {
            for bit in 0..8 {
                let mut damaged = whole.to_vec();
                damaged[i] ^= 1 << bit;
                let decoded = round_trip(&damaged).await.and_then(|b| Reply::decode(&b));
                assert!(decoded.is_err(), "flip of bit {bit} of byte {i}");
            }
        }
    }

    #[test]
    fn a_refusal_with_a_generation_is_malformed() {
        let good = Reply::Refused {
            host_id: host(2),
            reason: "no".to_string(),
        }
        .encode();
        let body = &good[6..good.len() - 4];
        assert!(Reply::decode(body).is_ok());
        let mut damaged = body.to_vec();
        // The generation's last byte: after status, version and host id.
        damaged[2 + 16 + 7] = 1;
        assert!(Reply::decode(&damaged).is_err());
    }

    #[test]
    fn an_overlong_cluster_name_is_cut_on_a_character_boundary() {
        let mut h = hello();
        h.cluster_name = "é".repeat(200);
        let encoded = h.encode();
        let decoded = Hello::decode(&encoded[6..encoded.len() - 4]).unwrap();
        assert_eq!(decoded.cluster_name.len(), 254);
    }
}
