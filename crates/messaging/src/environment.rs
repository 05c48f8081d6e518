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
    /// Send it no sooner than this long after it was queued (a link's latency). The
    /// connection is FIFO, so the messages behind it wait for it, as on a slow link.
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
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkFault {
    /// Every message is dropped (one direction of a partition; set it on both nodes for
    /// both). A request then times out at its deadline.
    Cut,
    /// Every message is written no sooner than this long after it was queued: a link with
    /// this much latency. Messages queued together are delayed together, not one after the
    /// other, and one whose deadline passes meanwhile is not sent (counted as expired).
    Delay(Duration),
    /// Each message is dropped with this probability (0 to 1; outside that range it is
    /// clamped), drawn from the injector's seeded random source: a lossy link.
    Drop(f64),
}

impl std::fmt::Display for LinkFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkFault::Cut => f.write_str("cut"),
            LinkFault::Delay(delay) => write!(f, "delay {}", delay.as_millis()),
            LinkFault::Drop(probability) => write!(f, "drop {probability}"),
        }
    }
}

/// Which messages on a link a fault applies to.
pub type VerbFilter = Option<Verb>;

/// Faults between this node and given peers, changeable while the node runs: the
/// fault-injection interceptor issue 36's tests install (`Environment::interceptor`). For
/// tests only: a node gets it only from its test configuration (`fault_injection: true`),
/// and with no fault set it delivers everything.
///
/// Each link (peer) holds at most one fault for all its verbs and one per verb; a message
/// gets its verb's fault if there is one, else the link's. Probabilistic drops draw from a
/// seeded [`RandomSource`], so a simulated run replays.
pub struct FaultInjector {
    /// Faults by peer and verb (`None`: every verb). Bounded by the faults a test sets: at
    /// most one per peer and verb id.
    faults: std::sync::RwLock<std::collections::HashMap<(HostId, VerbFilter), LinkFault>>,
    random: std::sync::Mutex<Box<dyn RandomSource>>,
}

impl std::fmt::Debug for FaultInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultInjector")
            .field("faults", &self.faults())
            .finish_non_exhaustive()
    }
}

impl Default for FaultInjector {
    /// No faults, drops drawn from `SplitMix64` seeded with 0.
    fn default() -> FaultInjector {
        FaultInjector::new(Box::new(SplitMix64::new(0)))
    }
}

impl FaultInjector {
    /// No faults; probabilistic drops draw from `random`.
    pub fn new(random: Box<dyn RandomSource>) -> FaultInjector {
        FaultInjector {
            faults: std::sync::RwLock::default(),
            random: std::sync::Mutex::new(random),
        }
    }

    /// Sets the fault on the link to `peer` for every verb, replacing the link's other faults
    /// (its per-verb ones too).
    pub fn set(&self, peer: HostId, fault: LinkFault) {
        let mut faults = self.write();
        faults.retain(|(to, _), _| *to != peer);
        faults.insert((peer, None), fault);
    }

    /// Sets the fault on the link to `peer` for messages of `verb` only, replacing that verb's
    /// fault on the link (the link's fault for every verb still applies to the others).
    pub fn set_for_verb(&self, peer: HostId, verb: Verb, fault: LinkFault) {
        self.write().insert((peer, Some(verb)), fault);
    }

    /// Heals the link to `peer`: removes all its faults.
    pub fn heal(&self, peer: HostId) {
        self.write().retain(|(to, _), _| *to != peer);
    }

    /// Heals every link.
    pub fn heal_all(&self) {
        self.write().clear();
    }

    /// The faults set, by peer and verb, in a stable order.
    pub fn faults(&self) -> Vec<(HostId, VerbFilter, LinkFault)> {
        let mut faults: Vec<_> = self
            .faults
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|((peer, verb), fault)| (*peer, *verb, *fault))
            .collect();
        faults.sort_by_key(|(peer, verb, _)| (*peer, *verb));
        faults
    }

    fn write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, std::collections::HashMap<(HostId, VerbFilter), LinkFault>>
    {
        self.faults
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a message is dropped at `probability`: a uniform draw in [0, 1) below it.
    fn draw(&self, probability: f64) -> bool {
        let bits = self
            .random
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .next_u64();
        // The top 53 bits: a uniform f64 in [0, 1). NaN never drops.
        ((bits >> 11) as f64 / (1u64 << 53) as f64) < probability
    }
}

impl OutboundInterceptor for FaultInjector {
    fn intercept(&self, to: HostId, verb: Verb, _: FrameKind) -> Interception {
        let fault = {
            let faults = self
                .faults
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if faults.is_empty() {
                return Interception::Deliver;
            }
            match faults
                .get(&(to, Some(verb)))
                .or_else(|| faults.get(&(to, None)))
            {
                Some(fault) => *fault,
                None => return Interception::Deliver,
            }
        };
        match fault {
            LinkFault::Cut => Interception::Drop,
            LinkFault::Delay(delay) => Interception::Delay(delay),
            LinkFault::Drop(probability) if self.draw(probability) => Interception::Drop,
            LinkFault::Drop(_) => Interception::Deliver,
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
        injector.set_for_verb(b, Verb::MUTATION, LinkFault::Cut);
        assert_eq!(send(a, Verb::PING), Interception::Drop);
        assert_eq!(send(b, Verb::MUTATION), Interception::Drop);
        assert_eq!(send(b, Verb::READ), Interception::Deliver);
        injector.set(a, LinkFault::Delay(Duration::from_millis(5)));
        assert_eq!(
            send(a, Verb::PING),
            Interception::Delay(Duration::from_millis(5))
        );
        // A verb's own fault wins over the link's.
        injector.set_for_verb(a, Verb::READ, LinkFault::Cut);
        assert_eq!(send(a, Verb::READ), Interception::Drop);
        assert_eq!(injector.faults().len(), 3);
        injector.heal(a);
        assert_eq!(send(a, Verb::PING), Interception::Deliver);
        assert_eq!(send(a, Verb::READ), Interception::Deliver);
        // Setting a link's fault for every verb replaces its per-verb ones.
        injector.set(b, LinkFault::Delay(Duration::from_millis(1)));
        assert_eq!(
            send(b, Verb::MUTATION),
            Interception::Delay(Duration::from_millis(1))
        );
        injector.heal_all();
        assert!(injector.faults().is_empty());
    }

    #[test]
    fn probabilistic_drops_follow_the_probability_and_replay_with_their_seed() {
        let peer = HostId(uuid::Uuid::from_u128(1));
        let drops = |seed, probability| {
            let injector = FaultInjector::new(Box::new(SplitMix64::new(seed)));
            injector.set(peer, LinkFault::Drop(probability));
            (0..10_000)
                .map(|_| injector.intercept(peer, Verb::PING, FrameKind::Request))
                .map(|i| i == Interception::Drop)
                .collect::<Vec<_>>()
        };
        let count = |d: &[bool]| d.iter().filter(|x| **x).count();
        assert_eq!(count(&drops(1, 0.0)), 0);
        assert_eq!(count(&drops(1, 1.0)), 10_000);
        assert_eq!(count(&drops(1, f64::NAN)), 0);
        let quarter = count(&drops(1, 0.25));
        assert!((2_200..=2_800).contains(&quarter), "{quarter} of 10000");
        assert_eq!(drops(7, 0.5), drops(7, 0.5), "a seed replays");
        assert_ne!(drops(7, 0.5), drops(8, 0.5));
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
