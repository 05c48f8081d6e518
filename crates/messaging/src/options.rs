//! The service's tunables, each a bound or a timeout, with Cassandra 5.0's defaults where it
//! has the same knob.

use std::time::Duration;

use crate::frame::MAX_FRAME_PAYLOAD_BYTES;
use crate::verb::Verb;

/// Limits and timeouts of a [`crate::MessagingService`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessagingOptions {
    /// A message whose payload is longer goes on the peer's large-message connection
    /// (Cassandra 4.0's `LARGE_MESSAGE_THRESHOLD`, 64 KiB).
    pub large_message_threshold_bytes: usize,
    /// Payloads longer than this are lz4-compressed (kept uncompressed if that is not shorter).
    pub compress_above_bytes: usize,
    /// The largest payload sent or accepted, compressed or not (Cassandra's
    /// `internode_max_message_size`); clamped to `MAX_FRAME_PAYLOAD_BYTES`. A larger request
    /// fails at once (`MessagingError::TooLarge`); a larger incoming frame closes its
    /// connection.
    pub max_message_bytes: usize,
    /// Messages waiting on one outbound connection (each peer has two). A message that finds
    /// the queue full is dropped and counted, and its request fails at once.
    pub queue_capacity_messages: usize,
    /// Payload bytes waiting on one outbound connection (Cassandra's
    /// `internode_application_send_queue_capacity`, 4 MiB). An empty queue takes any one
    /// message up to `max_message_bytes`, so a large message is never refused for size alone.
    pub queue_capacity_bytes: usize,
    /// Requests from one inbound connection being served at once; at the bound the connection
    /// stops reading, so the peer's queue fills and it drops (back-pressure).
    pub max_inbound_requests_per_connection: usize,
    /// Open inbound connections per lane of this node (one lane per shard and the main
    /// lane: a peer opens two connections per lane, so the node's bound grows with its
    /// shards); more are closed as they are accepted.
    pub max_inbound_connections: usize,
    /// Connecting to a peer (Cassandra's `internode_tcp_connect_timeout`, 2 s).
    pub connect_timeout_ms: u64,
    /// Exchanging the handshake once connected.
    pub handshake_timeout_ms: u64,
    /// The first wait before redialling a peer after a failed connection; each further failure
    /// doubles it up to `reconnect_max_backoff_ms` (with jitter).
    pub reconnect_initial_backoff_ms: u64,
    /// The longest wait between redials (before jitter halves it at most).
    pub reconnect_max_backoff_ms: u64,
    /// The wait before redialling a peer that refused the handshake (another cluster, no common
    /// version): retrying fast would only flood both logs.
    pub refused_retry_ms: u64,
    /// A MUTATION's longest wait (Cassandra's `write_request_timeout`, 2 s).
    pub write_request_timeout_ms: u64,
    /// A READ's or DIGEST's longest wait (`read_request_timeout`, 5 s).
    pub read_request_timeout_ms: u64,
    /// A TRUNCATE's longest wait (`truncate_request_timeout`, 60 s).
    pub truncate_request_timeout_ms: u64,
    /// Any other verb's longest wait, PING and extensions (`request_timeout`, 10 s).
    pub request_timeout_ms: u64,
}

impl Default for MessagingOptions {
    fn default() -> MessagingOptions {
        MessagingOptions {
            large_message_threshold_bytes: 64 * 1024,
            compress_above_bytes: 4 * 1024,
            max_message_bytes: MAX_FRAME_PAYLOAD_BYTES,
            queue_capacity_messages: 8 * 1024,
            queue_capacity_bytes: 4 * 1024 * 1024,
            max_inbound_requests_per_connection: 1024,
            max_inbound_connections: 1024,
            connect_timeout_ms: 2_000,
            handshake_timeout_ms: 2_000,
            reconnect_initial_backoff_ms: 100,
            reconnect_max_backoff_ms: 10_000,
            refused_retry_ms: 60_000,
            write_request_timeout_ms: 2_000,
            read_request_timeout_ms: 5_000,
            truncate_request_timeout_ms: 60_000,
            request_timeout_ms: 10_000,
        }
    }
}

impl MessagingOptions {
    /// The longest a request of `verb` waits for its response: the caller's deadline is capped
    /// by it.
    pub fn verb_timeout(&self, verb: Verb) -> Duration {
        Duration::from_millis(match verb {
            Verb::MUTATION | Verb::BATCH_STORE | Verb::BATCH_REMOVE => {
                self.write_request_timeout_ms
            }
            Verb::READ | Verb::DIGEST => self.read_request_timeout_ms,
            Verb::TRUNCATE => self.truncate_request_timeout_ms,
            _ => self.request_timeout_ms,
        })
    }

    /// `max_message_bytes` clamped to what a frame can carry.
    pub(crate) fn message_cap_bytes(&self) -> usize {
        self.max_message_bytes.min(MAX_FRAME_PAYLOAD_BYTES)
    }
}
