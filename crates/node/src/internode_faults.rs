//! Internode failure handling as the node wires it: messaging following gossip's failure
//! detector (a convicted peer's requests fail at once, and it is not dialled until it is up),
//! the fault injector tests switch on (`fault_injection`), and the admin commands that read
//! and drive them:
//!
//!     tpstats                                       dropped messages by verb (`nodetool tpstats`)
//!     fault [list]                                  the faults set on this node's links
//!     fault clear                                   heals every link
//!     fault --to ADDRESS [--verb VERB] cut          drops every message to the node at ADDRESS
//!     fault --to ADDRESS [--verb VERB] delay MS     delays each message by MS milliseconds
//!     fault --to ADDRESS [--verb VERB] drop P       drops each message with probability P (0..1)
//!     fault --to ADDRESS clear                      heals the link to ADDRESS
//!
//! `fault` acts on this node's outbound messages only: one direction of a link (set it on both
//! nodes to cut both). ADDRESS is a node's broadcast address as the ring knows it (or its host
//! id); VERB one of PING, MUTATION, READ, DIGEST, TRUNCATE, BATCH_STORE, BATCH_REMOVE or a
//! verb id. Fault injection is for tests: without `fault_injection: true` (or `HELENUS_FAULT_INJECTION=true`) the node installs
//! no injector and `fault` is refused.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use gossip::{ClusterView, PeerChange};
use locator::HostId;
use messaging::{FaultInjector, LinkFault, MessagingService, Verb};
use tokio::sync::watch;

/// The environment variable that switches fault injection on, as `fault_injection: true` does
/// (so a test can switch it on for every node `helenus cluster` starts).
pub const FAULT_INJECTION_ENV: &str = "HELENUS_FAULT_INJECTION";

/// The longest delay `fault ... delay` takes: longer than any request timeout a test needs.
const MAX_FAULT_DELAY_MS: u64 = 600_000;

/// Whether this node injects faults: `fault_injection` in its configuration, or
/// `HELENUS_FAULT_INJECTION` set to `true` (or `1`) in its environment.
pub fn fault_injection_enabled(configured: bool) -> bool {
    configured
        || std::env::var(FAULT_INJECTION_ENV)
            .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1"))
}

/// The messaging environment of a node: TCP, reconnection jitter seeded with `seed`, and, when
/// `fault_injection` is on, a fault injector (returned too, for `helenus admin fault`) whose
/// probabilistic drops draw from their own generator seeded from `seed`.
pub fn messaging_environment(
    seed: u64,
    fault_injection: bool,
) -> (messaging::Environment, Option<Arc<FaultInjector>>) {
    let mut environment = messaging::Environment::tcp(seed);
    if !fault_injection {
        return (environment, None);
    }
    tracing::warn!(
        "fault injection is on (fault_injection: a test setting): helenus admin fault can cut, \
         delay or drop this node's internode messages"
    );
    let injector = Arc::new(FaultInjector::new(Box::new(messaging::SplitMix64::new(
        seed ^ 0xFA17_FA17_FA17_FA17,
    ))));
    environment.interceptor = injector.clone();
    (environment, Some(injector))
}

/// Tells `messaging` of every peer gossip convicts (`mark_down`: its requests fail at once, and
/// it is not dialled), of every peer gossip holds up again (`mark_up`), and of every peer that
/// restarted (`peer_restarted`: the connections to the old process lead nowhere and are
/// redialled, and what is queued — responses to the new process's first requests among it —
/// goes to the new one; Cassandra's `StorageService.onRestart` interrupts the outbound
/// connections too), until membership stops (`gossip::follow_liveness`, which the simulation
/// runs too). A peer up is kept connected (`keep_connected`), so that messaging notices its
/// process going away even when nothing is sent to it.
pub fn follow_liveness(views: watch::Receiver<Arc<ClusterView>>, messaging: Arc<MessagingService>) {
    gossip::follow_liveness(views, move |host_id, change| match change {
        PeerChange::Restarted { generation } => {
            messaging.peer_restarted(host_id, generation);
        }
        PeerChange::Up => {
            messaging.mark_up(host_id);
            messaging.keep_connected(host_id);
        }
        PeerChange::Down => {
            messaging.mark_down(host_id);
        }
    });
}

/// What the admin endpoint reads and drives of messaging.
#[derive(Clone)]
pub struct AdminInternode {
    pub messaging: Arc<MessagingService>,
    /// The fault injector, when `fault_injection` is on.
    pub faults: Option<Arc<FaultInjector>>,
}

/// Runs `words` if it is one of this module's commands (`tpstats`, `fault`); `None` if it is
/// another's.
pub fn execute(
    words: &[&str],
    internode: &AdminInternode,
    ring: &arc_swap::ArcSwap<locator::TokenMetadata>,
) -> Option<Result<Vec<String>>> {
    match words.split_first() {
        Some((&"tpstats", rest)) => Some(if rest.is_empty() {
            Ok(tpstats(&internode.messaging.metrics()))
        } else {
            Err(anyhow!("tpstats takes no argument"))
        }),
        Some((&"fault", rest)) => Some(fault(rest, internode, ring)),
        _ => None,
    }
}

/// `nodetool tpstats`'s "Message type / Dropped" section: every verb with its messages
/// dropped (a full queue, a peer refusing or down), expired (their deadline passed before they
/// were sent or served) and removed by fault injection, in Cassandra's `%-20s%10s` layout.
/// Rows are Helenus's verbs (a verb's requests and responses together), not Cassandra 4.0's
/// `_REQ`/`_RSP` pairs; Cassandra's latency-in-queue columns are not measured, so not shown.
pub fn tpstats(metrics: &messaging::MessagingMetrics) -> Vec<String> {
    let builtin = [
        Verb::PING,
        Verb::MUTATION,
        Verb::READ,
        Verb::DIGEST,
        Verb::TRUNCATE,
        Verb::BATCH_STORE,
        Verb::BATCH_REMOVE,
    ];
    let mut verbs: Vec<Verb> = builtin.to_vec();
    verbs.extend(metrics.verbs.keys().filter(|v| !v.is_builtin()));
    let mut lines = vec![format!("{:<20}{:>10}", "Message type", "Dropped")];
    for verb in verbs {
        let counts = metrics.verb(verb);
        let dropped = counts.dropped + counts.expired + counts.intercepted;
        lines.push(format!("{:<20}{:>10}", verb.to_string(), dropped));
    }
    lines
}

/// `fault ...` (module docs).
fn fault(
    words: &[&str],
    internode: &AdminInternode,
    ring: &arc_swap::ArcSwap<locator::TokenMetadata>,
) -> Result<Vec<String>> {
    let Some(injector) = &internode.faults else {
        bail!(
            "fault injection is off on this node: it is a test setting; start the node with \
             fault_injection: true in its configuration (or {FAULT_INJECTION_ENV}=true) to use \
             helenus admin fault"
        );
    };
    let command = FaultCommand::parse(words)?;
    let ring = ring.load_full();
    let name_of = |host_id: HostId| {
        ring.topology().endpoint(host_id).map_or_else(
            || host_id.0.to_string(),
            |e| e.broadcast_address.to_string(),
        )
    };
    let to = match command.to {
        None => None,
        Some(target) => {
            let host_id = resolve(&ring, target)?;
            if host_id == ring.local_host_id() {
                bail!("{target} is this node: faults are set on links to other nodes");
            }
            Some(host_id)
        }
    };
    match (command.action, to) {
        (FaultAction::List, _) => Ok(injector
            .faults()
            .into_iter()
            .map(|(peer, verb, fault)| {
                let verb = verb.map_or_else(|| "all".to_string(), |v| v.to_string());
                format!("{} {} {fault}", name_of(peer), verb)
            })
            .collect()),
        (FaultAction::Clear, None) => {
            injector.heal_all();
            Ok(vec!["every link healed".to_string()])
        }
        (FaultAction::Clear, Some(peer)) => {
            injector.heal(peer);
            Ok(vec![format!("link to {} healed", name_of(peer))])
        }
        (FaultAction::Set(_), None) => bail!("fault needs --to ADDRESS to set a fault"),
        (FaultAction::Set(fault), Some(peer)) => {
            match command.verb {
                Some(verb) => injector.set_for_verb(peer, verb, fault),
                None => injector.set(peer, fault),
            }
            let verbs = command
                .verb
                .map_or_else(|| "every verb".to_string(), |v| v.to_string());
            tracing::warn!(peer = %peer, %fault, %verbs, "fault injected on the link");
            Ok(vec![format!("{} to {}: {fault}", verbs, name_of(peer))])
        }
    }
}

/// The node a `--to` names: a broadcast address in the ring, or a host id.
fn resolve(ring: &locator::TokenMetadata, target: &str) -> Result<HostId> {
    if let Ok(ip) = target.parse::<IpAddr>() {
        return ring
            .topology()
            .endpoints()
            .find(|e| e.broadcast_address == ip)
            .map(|e| e.host_id)
            .ok_or_else(|| anyhow!("no node at {ip} in the ring"));
    }
    let host_id = uuid::Uuid::parse_str(target)
        .map(HostId)
        .map_err(|_| anyhow!("'{target}' is neither an IP address nor a host id"))?;
    if ring.topology().endpoint(host_id).is_none() {
        bail!("no node with host id {target} in the ring");
    }
    Ok(host_id)
}

/// What `fault` was asked to do.
#[derive(Debug, PartialEq)]
enum FaultAction {
    List,
    Clear,
    Set(LinkFault),
}

/// A parsed `fault` command line.
#[derive(Debug, PartialEq)]
struct FaultCommand<'a> {
    to: Option<&'a str>,
    verb: Option<Verb>,
    action: FaultAction,
}

impl<'a> FaultCommand<'a> {
    fn parse(words: &[&'a str]) -> Result<FaultCommand<'a>> {
        const USAGE: &str = "expected 'fault [list]', 'fault clear' or 'fault --to ADDRESS \
                             [--verb VERB] cut|delay MS|drop P|clear'";
        let mut to = None;
        let mut verb = None;
        let mut positional = Vec::new();
        let mut rest = words.iter();
        while let Some(&word) = rest.next() {
            match word {
                "--to" => to = Some(*rest.next().context("--to needs an address")?),
                "--verb" => {
                    let name = rest.next().context("--verb needs a verb")?;
                    verb = Some(parse_verb(name)?);
                }
                _ => positional.push(word),
            }
        }
        let action = match positional.as_slice() {
            [] | ["list"] if verb.is_none() => FaultAction::List,
            ["clear"] if verb.is_none() => FaultAction::Clear,
            ["cut"] => FaultAction::Set(LinkFault::Cut),
            ["delay", ms] => {
                let ms: u64 = ms
                    .parse()
                    .map_err(|_| anyhow!("delay takes milliseconds, got '{ms}'"))?;
                if ms > MAX_FAULT_DELAY_MS {
                    bail!("a delay is at most {MAX_FAULT_DELAY_MS} ms");
                }
                FaultAction::Set(LinkFault::Delay(Duration::from_millis(ms)))
            }
            ["drop", p] => {
                let p: f64 = p
                    .parse()
                    .ok()
                    .filter(|p: &f64| (0.0..=1.0).contains(p))
                    .ok_or_else(|| anyhow!("drop takes a probability from 0 to 1, got '{p}'"))?;
                FaultAction::Set(LinkFault::Drop(p))
            }
            _ => bail!("{USAGE}, got 'fault {}'", words.join(" ")),
        };
        match (&action, to) {
            (FaultAction::Set(_), None) => bail!("fault needs --to ADDRESS to set a fault"),
            (FaultAction::List, Some(_)) => {
                bail!("fault --to ADDRESS needs cut, delay MS, drop P or clear")
            }
            _ => {}
        }
        Ok(FaultCommand { to, verb, action })
    }
}

/// A verb by its name (`MUTATION`, any case) or wire id.
fn parse_verb(name: &str) -> Result<Verb> {
    let known = [
        Verb::PING,
        Verb::MUTATION,
        Verb::READ,
        Verb::DIGEST,
        Verb::TRUNCATE,
        Verb::BATCH_STORE,
        Verb::BATCH_REMOVE,
    ];
    if let Some(verb) = known
        .into_iter()
        .find(|v| v.to_string().eq_ignore_ascii_case(name))
    {
        return Ok(verb);
    }
    let id = name
        .strip_prefix("VERB_")
        .unwrap_or(name)
        .parse::<u16>()
        .ok()
        .and_then(Verb::from_id);
    id.ok_or_else(|| {
        anyhow!("unknown verb '{name}' (PING, MUTATION, READ, DIGEST, TRUNCATE or a verb id)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_commands_parse() {
        fn parse(line: &str) -> Result<FaultCommand<'_>> {
            FaultCommand::parse(&line.split_whitespace().collect::<Vec<_>>())
        }
        assert_eq!(parse("").unwrap().action, FaultAction::List);
        assert_eq!(parse("list").unwrap().action, FaultAction::List);
        assert_eq!(parse("clear").unwrap().action, FaultAction::Clear);
        let cut = parse("--to 127.0.0.2 cut").unwrap();
        assert_eq!(cut.to, Some("127.0.0.2"));
        assert_eq!(cut.action, FaultAction::Set(LinkFault::Cut));
        let delay = parse("delay 3000 --to 127.0.0.3 --verb mutation").unwrap();
        assert_eq!(delay.verb, Some(Verb::MUTATION));
        assert_eq!(
            delay.action,
            FaultAction::Set(LinkFault::Delay(Duration::from_millis(3000)))
        );
        assert_eq!(
            parse("--to 127.0.0.2 drop 0.25").unwrap().action,
            FaultAction::Set(LinkFault::Drop(0.25))
        );
        assert_eq!(
            parse("--to h --verb 64 cut").unwrap().verb,
            Some(Verb::extension(64))
        );
        for bad in [
            "cut",
            "--to 127.0.0.2",
            "--to 127.0.0.2 drop 1.5",
            "--to 127.0.0.2 drop -0.1",
            "--to 127.0.0.2 drop x",
            "--to 127.0.0.2 delay -1",
            "--to 127.0.0.2 delay 9999999",
            "--to 127.0.0.2 sever",
            "--to 127.0.0.2 --verb GOSSIP cut",
            "--to",
            "--verb READ clear",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tpstats_lists_every_verb_with_its_dropped_messages() {
        let mut metrics = messaging::MessagingMetrics::default();
        metrics.verbs.insert(
            Verb::MUTATION,
            messaging::VerbCounts {
                dropped: 1,
                expired: 2,
                intercepted: 4,
                timeouts: 100,
                ..Default::default()
            },
        );
        metrics.verbs.insert(
            Verb::extension(64),
            messaging::VerbCounts {
                sent: 5,
                ..Default::default()
            },
        );
        let lines = tpstats(&metrics);
        assert_eq!(lines[0], "Message type           Dropped");
        assert_eq!(lines[2], "MUTATION                     7");
        assert_eq!(lines[3], "READ                         0");
        assert_eq!(lines[6], "BATCH_STORE                  0");
        assert_eq!(lines[7], "BATCH_REMOVE                 0");
        assert_eq!(lines.last().unwrap(), "VERB_64                      0");
        assert_eq!(lines.len(), 9);
    }

    #[test]
    fn fault_injection_is_off_unless_configured() {
        let (config, warnings) = crate::config::Config::parse("").unwrap();
        assert!(!config.fault_injection);
        assert!(warnings.is_empty());
        let (config, warnings) = crate::config::Config::parse("fault_injection: true").unwrap();
        assert!(config.fault_injection);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(crate::config::Config::parse("fault_injection: sometimes").is_err());
        assert!(fault_injection_enabled(true));
    }
}
