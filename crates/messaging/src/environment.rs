//! What the service takes from outside, so a deterministic simulator can run the real code:
//! the network ([`Network`]), randomness ([`RandomSource`], for reconnection jitter) and a hook on
//! every outbound message ([`OutboundInterceptor`], for fault injection). Time is tokio's
//! (`tokio::time`), which a simulator pauses and advances.

use std::sync::Arc;
use std::time::Duration;

use locator::HostId;

use crate::frame::FrameKind;
use crate::network::{Network, TcpNetwork};
use crate::verb::Verb;

/// A source of random numbers. The service draws from it only for reconnection jitter; a test
/// or simulator injects a seeded one so a run can be replayed.
pub trait RandomSource: Send + 'static {
    /// The next 64 random bits.
    fn next_u64(&mut self) -> u64;
}

/// SplitMix64 (Steele, Lea and Flood): small, fast, good enough for jitter, and seedable.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }
}

impl RandomSource for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The wait before reconnection attempt `failures` (1 for the first retry): capped exponential
/// backoff with "equal jitter" (half the step fixed, half random), so peers that lost a node
/// at the same moment do not all redial it at the same moment.
pub fn reconnect_delay(
    failures: u32,
    initial: Duration,
    max: Duration,
    random: &mut dyn RandomSource,
) -> Duration {
    let doublings = failures.saturating_sub(1).min(30);
    let step = initial.saturating_mul(1 << doublings).min(max);
    let half_ms = (step.as_millis() / 2) as u64;
    Duration::from_millis(half_ms + random.next_u64() % (half_ms + 1))
}

/// What to do with an outbound message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interception {
    /// Send it.
    Deliver,
    /// Do not send it (a cut or lossy link): a request then times out at its deadline.
    Drop,
    /// Send it after this long. The connection is FIFO, so the messages behind it wait too,
    /// as on a slow link.
    Delay(Duration),
}

/// A hook on every message a connection is about to write, for fault injection between two
/// given nodes (issue 36). Off by default ([`NoInterception`]); only a test configuration
/// installs another. Called on the connection's task for each message, so it must be cheap
/// and must not block.
pub trait OutboundInterceptor: Send + Sync + 'static {
    /// What to do with the `kind` message of `verb` about to be written to peer `to`.
    fn intercept(&self, to: HostId, verb: Verb, kind: FrameKind) -> Interception;
}

/// Delivers everything: the production interceptor.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoInterception;

impl OutboundInterceptor for NoInterception {
    fn intercept(&self, _: HostId, _: Verb, _: FrameKind) -> Interception {
        Interception::Deliver
    }
}

/// A fault on the link from this node to one peer ([`FaultInjector`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFault {
    /// Every message to the peer is dropped (one direction of a partition; set it on both
    /// nodes for both).
    Cut,
    /// Every message to the peer waits this long first (a slow link).
    Delay(Duration),
    /// Messages of this verb to the peer are dropped, the rest delivered.
    DropVerb(Verb),
}

/// Faults between this node and given peers, changeable while the node runs: the
/// fault-injection interceptor issue 36's tests install (`Environment::interceptor`). Off by
/// default: a node gets it only from a test configuration, and with no fault set it delivers
/// everything.
#[derive(Debug, Default)]
pub struct FaultInjector {
    faults: std::sync::RwLock<std::collections::HashMap<HostId, LinkFault>>,
}

impl FaultInjector {
    /// Sets the fault on the link to `peer`, replacing any other.
    pub fn set(&self, peer: HostId, fault: LinkFault) {
        self.faults
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(peer, fault);
    }

    /// Heals the link to `peer`.
    pub fn heal(&self, peer: HostId) {
        self.faults
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&peer);
    }
}

impl OutboundInterceptor for FaultInjector {
    fn intercept(&self, to: HostId, verb: Verb, _: FrameKind) -> Interception {
        let faults = self
            .faults
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match faults.get(&to) {
            None => Interception::Deliver,
            Some(LinkFault::Cut) => Interception::Drop,
            Some(LinkFault::Delay(delay)) => Interception::Delay(*delay),
            Some(LinkFault::DropVerb(dropped)) if *dropped == verb => Interception::Drop,
            Some(LinkFault::DropVerb(_)) => Interception::Deliver,
        }
    }
}

/// The service's outside world. [`Environment::tcp`] is production's: TCP, a random source
/// seeded as given, no interception.
pub struct Environment {
    /// How to connect and listen.
    pub network: Arc<dyn Network>,
    /// Reconnection jitter's randomness.
    pub random: Box<dyn RandomSource>,
    /// The hook on every outbound message.
    pub interceptor: Arc<dyn OutboundInterceptor>,
}

impl Environment {
    /// TCP through tokio, `SplitMix64` seeded with `seed` (the node passes something that
    /// differs between nodes, such as bits of its host id), no interception.
    pub fn tcp(seed: u64) -> Environment {
        Environment {
            network: Arc::new(TcpNetwork),
            random: Box::new(SplitMix64::new(seed)),
            interceptor: Arc::new(NoInterception),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap_with_jitter_in_the_upper_half() {
        let mut random = SplitMix64::new(7);
        let initial = Duration::from_millis(100);
        let max = Duration::from_millis(1000);
        for (failures, step_ms) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1000),
            (60, 1000),
        ] {
            for _ in 0..50 {
                let delay = reconnect_delay(failures, initial, max, &mut random).as_millis();
                assert!(
                    (step_ms / 2..=step_ms).contains(&delay),
                    "failure {failures}: {delay} ms"
                );
            }
        }
    }

    #[test]
    fn the_fault_injector_applies_each_links_fault_until_healed() {
        let injector = FaultInjector::default();
        let (a, b) = (
            HostId(uuid::Uuid::from_u128(1)),
            HostId(uuid::Uuid::from_u128(2)),
        );
        let send = |to, verb| injector.intercept(to, verb, FrameKind::Request);
        assert_eq!(send(a, Verb::PING), Interception::Deliver);
        injector.set(a, LinkFault::Cut);
        injector.set(b, LinkFault::DropVerb(Verb::MUTATION));
        assert_eq!(send(a, Verb::PING), Interception::Drop);
        assert_eq!(send(b, Verb::MUTATION), Interception::Drop);
        assert_eq!(send(b, Verb::READ), Interception::Deliver);
        injector.set(a, LinkFault::Delay(Duration::from_millis(5)));
        assert_eq!(
            send(a, Verb::PING),
            Interception::Delay(Duration::from_millis(5))
        );
        injector.heal(a);
        assert_eq!(send(a, Verb::PING), Interception::Deliver);
    }

    #[test]
    fn a_seed_replays_the_same_jitter() {
        let delays = |seed| {
            let mut random = SplitMix64::new(seed);
            (1..10)
                .map(|f| {
                    reconnect_delay(
                        f,
                        Duration::from_millis(64),
                        Duration::from_secs(5),
                        &mut random,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(delays(3), delays(3));
        assert_ne!(delays(3), delays(4));
    }
}
