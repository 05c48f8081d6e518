//! The service's counters (Cassandra's `MessagingMetrics` and dropped-message counts by verb):
//! atomics in a fixed array indexed by verb id, so counting takes no lock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::verb::{Verb, MAX_VERB_ID};

/// One verb's counts, as [`MessagingMetrics`] reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerbCounts {
    /// Messages (requests and responses) of the verb written to a connection.
    pub sent: u64,
    /// Messages of the verb read from a connection.
    pub received: u64,
    /// Messages not queued because their connection's queue was full, because the peer had
    /// refused the handshake (back-pressure: the request failed at once), or because the peer
    /// was down (discarded from the queue, or refused).
    pub dropped: u64,
    /// Messages whose deadline passed before they were written (in a queue) or before their
    /// handler started (here, after arriving): not sent, not started.
    pub expired: u64,
    /// Requests from this node that had no response by their deadline.
    pub timeouts: u64,
    /// Messages the outbound interceptor dropped (fault injection).
    pub intercepted: u64,
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessagingMetrics {
    /// Verbs with any non-zero count.
    pub verbs: BTreeMap<Verb, VerbCounts>,
    /// Frame bytes (headers included) written and read.
    pub bytes_sent: u64,
    /// Bytes read from inbound connections after their handshakes.
    pub bytes_received: u64,
    /// Outbound connections that completed their handshake.
    pub connections_opened: u64,
    /// Inbound connections closed for bytes that were not a frame, or a handshake that did not
    /// decode.
    pub malformed: u64,
    /// Handshakes this node refused as the acceptor (another cluster, version, host id).
    pub handshakes_refused: u64,
    /// Handshakes a peer refused this node's connection with.
    pub refused_by_peers: u64,
    /// Responses that arrived after their request gave up (or from the wrong peer).
    pub unexpected_responses: u64,
    /// Requests failed at once because their peer was convicted while they were queued or
    /// waiting for their responses (`MessagingService::mark_down`).
    pub failed_peer_down: u64,
    /// Requests from peers whose payload did not decode (answered with an error; the
    /// connection stays open, its frames being whole).
    pub bad_requests: u64,
    /// Requests from peers for a verb this node has no handler for (answered with an error).
    pub unknown_verbs: u64,
}

impl MessagingMetrics {
    /// `verb`'s counts (zero if it has none).
    pub fn verb(&self, verb: Verb) -> VerbCounts {
        self.verbs.get(&verb).copied().unwrap_or_default()
    }
}

#[derive(Default)]
struct VerbCounters {
    sent: AtomicU64,
    received: AtomicU64,
    dropped: AtomicU64,
    expired: AtomicU64,
    timeouts: AtomicU64,
    intercepted: AtomicU64,
}

/// Which count to add to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum VerbCount {
    Sent,
    Received,
    Dropped,
    Expired,
    Timeout,
    Intercepted,
}

/// The live counters.
pub(crate) struct Counters {
    verbs: Box<[VerbCounters]>,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    pub connections_opened: AtomicU64,
    pub malformed: AtomicU64,
    pub handshakes_refused: AtomicU64,
    pub refused_by_peers: AtomicU64,
    pub unexpected_responses: AtomicU64,
    pub failed_peer_down: AtomicU64,
    pub bad_requests: AtomicU64,
    pub unknown_verbs: AtomicU64,
}

impl Default for Counters {
    fn default() -> Counters {
        Counters {
            verbs: (0..=MAX_VERB_ID).map(|_| VerbCounters::default()).collect(),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            connections_opened: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            handshakes_refused: AtomicU64::new(0),
            refused_by_peers: AtomicU64::new(0),
            unexpected_responses: AtomicU64::new(0),
            failed_peer_down: AtomicU64::new(0),
            bad_requests: AtomicU64::new(0),
            unknown_verbs: AtomicU64::new(0),
        }
    }
}

impl Counters {
    pub fn count(&self, verb: Verb, count: VerbCount) {
        let c = &self.verbs[usize::from(verb.id())];
        let counter = match count {
            VerbCount::Sent => &c.sent,
            VerbCount::Received => &c.received,
            VerbCount::Dropped => &c.dropped,
            VerbCount::Expired => &c.expired,
            VerbCount::Timeout => &c.timeouts,
            VerbCount::Intercepted => &c.intercepted,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> MessagingMetrics {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let verbs = self
            .verbs
            .iter()
            .enumerate()
            .filter_map(|(id, c)| {
                let counts = VerbCounts {
                    sent: load(&c.sent),
                    received: load(&c.received),
                    dropped: load(&c.dropped),
                    expired: load(&c.expired),
                    timeouts: load(&c.timeouts),
                    intercepted: load(&c.intercepted),
                };
                let verb = Verb::from_id(id as u16).expect("the array has MAX_VERB_ID + 1 slots");
                (counts != VerbCounts::default()).then_some((verb, counts))
            })
            .collect();
        MessagingMetrics {
            verbs,
            bytes_sent: load(&self.bytes_sent),
            bytes_received: load(&self.bytes_received),
            connections_opened: load(&self.connections_opened),
            malformed: load(&self.malformed),
            handshakes_refused: load(&self.handshakes_refused),
            refused_by_peers: load(&self.refused_by_peers),
            unexpected_responses: load(&self.unexpected_responses),
            failed_peer_down: load(&self.failed_peer_down),
            bad_requests: load(&self.bad_requests),
            unknown_verbs: load(&self.unknown_verbs),
        }
    }
}
