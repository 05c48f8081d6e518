//! The faults of a run, all drawn from its seed: a schedule of partitions, slow links, crashes
//! and restarts that the harness applies through turmoil at given sim times, and message loss
//! and delay applied by messaging's own fault hook ([`Chaos`], an `OutboundInterceptor`).
//!
//! Why partitions are turmoil's `hold`/`release` and message loss is messaging's hook, not
//! turmoil's `partition` and `fail_rate`: turmoil's TCP does not retransmit, so a segment
//! turmoil drops (a `partition`, or a link `fail_rate` breaks) leaves a gap in its stream that
//! nothing ever fills, and the connection stalls for good while its writer sees no error. Real
//! TCP retransmits: over a partition shorter than its retransmission timeout, the bytes arrive
//! late, which is what `hold`/`release` does. A lost *message* (what Cassandra's messaging can
//! drop: expired, queue full, a connection reset) is modelled above TCP, where messaging drops
//! it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use locator::HostId;
use messaging::{FrameKind, Interception, OutboundInterceptor, RandomSource, SplitMix64, Verb};

/// One fault the harness applies at a sim time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Cuts every link between the nodes of `minority` and the others (turmoil `hold`: bytes
    /// wait until the partition heals).
    Partition { minority: Vec<usize> },
    /// Heals every partition (turmoil `release`).
    HealPartitions,
    /// The link between two nodes becomes slow: up to `max_latency_ms` per message (turmoil
    /// `set_link_max_message_latency`), reordering messages across connections.
    SlowLink {
        a: usize,
        b: usize,
        max_latency_ms: u64,
    },
    /// Every slow link is back to the run's latency.
    HealSlowLinks,
    /// Stops a node's software at once (turmoil `crash`): its connections reset, its requests
    /// in flight are lost; its storage is kept (a commit log synced on every write).
    Crash(usize),
    /// Starts a crashed node's software again (turmoil `bounce`).
    Restart(usize),
    /// Message loss and delay on (`Chaos`) or off.
    Chaos(bool),
    /// A node's wall clock (its coordinator's write timestamps) is set `skew_ms` ahead of
    /// (positive) or behind sim time: a skew, or a jump of the clock when it changes.
    ClockSkew { node: usize, skew_ms: i64 },
}

/// A fault and when it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledFault {
    pub at_ms: u64,
    pub fault: Fault,
}

impl fmt::Display for ScheduledFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>6} ms  {:?}", self.at_ms, self.fault)
    }
}

/// The faults of a run with `nodes` nodes from `seed`, between `start_ms` and `heal_ms`; at
/// `heal_ms` everything heals: partitions released, slow links back to normal, crashed nodes
/// restarted, chaos off.
/// At most one node is down at a time, so that QUORUM stays reachable now and then.
pub fn schedule(seed: u64, nodes: usize, start_ms: u64, heal_ms: u64) -> Vec<ScheduledFault> {
    let mut random = SplitMix64::new(seed ^ 0xFA01_7500);
    let mut next = |bound: u64| random.next_u64() % bound.max(1);
    let mut faults = vec![ScheduledFault {
        at_ms: start_ms,
        fault: Fault::Chaos(true),
    }];
    let mut crashed: Option<(usize, u64)> = None;
    let mut at_ms = start_ms;
    loop {
        at_ms += 100 + next(900);
        if at_ms >= heal_ms {
            break;
        }
        if let Some((node, until)) = crashed {
            if at_ms >= until {
                faults.push(ScheduledFault {
                    at_ms,
                    fault: Fault::Restart(node),
                });
                crashed = None;
                continue;
            }
        }
        let fault = match next(4) {
            0 => {
                let size = 1 + next((nodes as u64 - 1) / 2) as usize;
                let mut minority: Vec<usize> = Vec::new();
                while minority.len() < size {
                    let n = next(nodes as u64) as usize;
                    if !minority.contains(&n) {
                        minority.push(n);
                    }
                }
                minority.sort_unstable();
                Fault::Partition { minority }
            }
            1 => Fault::HealPartitions,
            2 => {
                let a = next(nodes as u64) as usize;
                let b = (a + 1 + next(nodes as u64 - 1) as usize) % nodes;
                Fault::SlowLink {
                    a,
                    b,
                    max_latency_ms: 5 + next(300),
                }
            }
            _ if crashed.is_none() => {
                let node = next(nodes as u64) as usize;
                crashed = Some((node, at_ms + 200 + next(2_000)));
                Fault::Crash(node)
            }
            _ => continue,
        };
        faults.push(ScheduledFault { at_ms, fault });
    }
    faults.push(ScheduledFault {
        at_ms: heal_ms,
        fault: Fault::HealPartitions,
    });
    faults.push(ScheduledFault {
        at_ms: heal_ms,
        fault: Fault::HealSlowLinks,
    });
    faults.push(ScheduledFault {
        at_ms: heal_ms,
        fault: Fault::Chaos(false),
    });
    if let Some((node, _)) = crashed {
        faults.push(ScheduledFault {
            at_ms: heal_ms,
            fault: Fault::Restart(node),
        });
    }
    faults
}

/// The largest clock skew a run gives a node, milliseconds either way.
pub const MAX_CLOCK_SKEW_MS: i64 = 300;

/// The clock skews of a run with `nodes` nodes from `seed`, between `start_ms` and `heal_ms`:
/// none for half the seeds (so the register check stays strict for them), else a few nodes
/// skewed from the start and the skew of a random node jumping now and then. Drawn from their
/// own generator, so that a seed's other faults are the same with or without skew. Skews
/// stay after the heal (clocks are not healed; the clients stop writing then).
pub fn clock_skews(seed: u64, nodes: usize, start_ms: u64, heal_ms: u64) -> Vec<ScheduledFault> {
    let mut random = SplitMix64::new(seed ^ 0x5CE3_C10C);
    let mut next = |bound: u64| random.next_u64() % bound.max(1);
    if next(2) == 0 {
        return Vec::new();
    }
    let skew = |next: &mut dyn FnMut(u64) -> u64| {
        next(2 * MAX_CLOCK_SKEW_MS as u64 + 1) as i64 - MAX_CLOCK_SKEW_MS
    };
    let mut faults = Vec::new();
    for node in 0..nodes {
        if next(2) == 0 {
            let skew_ms = skew(&mut next);
            faults.push(ScheduledFault {
                at_ms: start_ms,
                fault: Fault::ClockSkew { node, skew_ms },
            });
        }
    }
    let mut at_ms = start_ms;
    loop {
        at_ms += 100 + next(700);
        if at_ms >= heal_ms {
            break;
        }
        let node = next(nodes as u64) as usize;
        let skew_ms = skew(&mut next);
        faults.push(ScheduledFault {
            at_ms,
            fault: Fault::ClockSkew { node, skew_ms },
        });
    }
    faults
}

/// Message loss and delay on a node's outbound messages: messaging's fault hook, drawing from
/// a seeded generator (turmoil runs every host on one thread in a fixed order, so the draws
/// replay). Off until [`Chaos::set_enabled`].
pub struct Chaos {
    enabled: AtomicBool,
    /// Chance per thousand that a message is dropped.
    drop_per_mille: u64,
    /// Chance per thousand that a message (and its connection's later ones) waits first.
    delay_per_mille: u64,
    max_delay_ms: u64,
    random: Mutex<SplitMix64>,
}

impl Chaos {
    /// A hook seeded with `seed`, dropping `drop_per_mille` and delaying `delay_per_mille`
    /// messages of a thousand (by up to `max_delay_ms`) while enabled.
    pub fn new(seed: u64, drop_per_mille: u64, delay_per_mille: u64, max_delay_ms: u64) -> Chaos {
        Chaos {
            enabled: AtomicBool::new(false),
            drop_per_mille,
            delay_per_mille,
            max_delay_ms,
            random: Mutex::new(SplitMix64::new(seed)),
        }
    }

    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }
}

impl OutboundInterceptor for Chaos {
    fn intercept(&self, _: HostId, _: Verb, _: FrameKind) -> Interception {
        if !self.enabled.load(Ordering::Relaxed) {
            return Interception::Deliver;
        }
        let mut random = self
            .random
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let roll = random.next_u64() % 1_000;
        if roll < self.drop_per_mille {
            Interception::Drop
        } else if roll < self.drop_per_mille + self.delay_per_mille {
            let delay_ms = 1 + random.next_u64() % self.max_delay_ms.max(1);
            Interception::Delay(Duration::from_millis(delay_ms))
        } else {
            Interception::Deliver
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_is_fixed_by_its_seed_and_heals_at_the_end() {
        assert_eq!(schedule(7, 5, 500, 6_000), schedule(7, 5, 500, 6_000));
        assert_ne!(schedule(7, 5, 500, 6_000), schedule(8, 5, 500, 6_000));
        for seed in 0..200 {
            let faults = schedule(seed, 3, 500, 6_000);
            let mut down: Option<usize> = None;
            for f in &faults {
                match f.fault {
                    Fault::Crash(n) => {
                        assert!(down.is_none(), "seed {seed}: two nodes down");
                        down = Some(n);
                    }
                    Fault::Restart(n) => {
                        assert_eq!(down, Some(n));
                        down = None;
                    }
                    Fault::Partition { ref minority } => assert!(minority.len() <= 1),
                    _ => {}
                }
            }
            assert_eq!(down, None, "seed {seed}: a node stays down");
            let last = faults.last().expect("faults");
            assert!(last.at_ms == 6_000, "seed {seed}");
        }
    }

    #[test]
    fn half_the_seeds_skew_clocks_within_the_bound() {
        let runs: Vec<Vec<ScheduledFault>> = (0..100)
            .map(|seed| clock_skews(seed, 5, 200, 2_000))
            .collect();
        let skewed = runs.iter().filter(|r| !r.is_empty()).count();
        assert!((30..70).contains(&skewed), "{skewed} of 100 seeds skewed");
        for fault in runs.iter().flatten() {
            let Fault::ClockSkew { node, skew_ms } = fault.fault else {
                panic!("not a skew: {fault}");
            };
            assert!(node < 5 && skew_ms.abs() <= MAX_CLOCK_SKEW_MS, "{fault}");
            assert!((200..2_000).contains(&fault.at_ms), "{fault}");
        }
        assert_eq!(clock_skews(3, 5, 200, 2_000), clock_skews(3, 5, 200, 2_000));
    }

    #[test]
    fn chaos_drops_and_delays_only_while_enabled() {
        let chaos = Chaos::new(1, 500, 500, 10);
        let to = HostId(uuid::Uuid::from_u128(1));
        let send = || chaos.intercept(to, Verb::MUTATION, FrameKind::Request);
        assert!((0..100).all(|_| send() == Interception::Deliver));
        chaos.set_enabled(true);
        let outcomes: Vec<Interception> = (0..100).map(|_| send()).collect();
        assert!(outcomes.contains(&Interception::Drop));
        assert!(outcomes
            .iter()
            .any(|i| matches!(i, Interception::Delay(d) if *d <= Duration::from_millis(10))));
        assert!(!outcomes.contains(&Interception::Deliver));
    }
}
