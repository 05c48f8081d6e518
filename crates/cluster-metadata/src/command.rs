//! What the log holds and what applying it builds: the commands ([`MetadataCommand`]), the
//! state every node's state machine keeps ([`MetadataState`]), and the one deterministic
//! function that applies a command to it ([`MetadataState::apply`]). Pure: no I/O, no Raft.
//!
//! Determinism is the whole point: every node applies the same entries in the same order and
//! must reach the same state and give the same answer (applied or refused, with the same
//! reason), so `apply` looks at nothing but the state and the command.

use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;

use locator::{Endpoint, HostId, Location, LocatorError, NodeState, Token, TokenMetadata};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The schema version of a cluster whose log has committed no schema change yet. A schema
/// service over the log starts a new node's empty schema at this version, so that the first
/// change, decided on it, applies on every node.
pub const INITIAL_SCHEMA_VERSION: Uuid = Uuid::nil();

/// How many of the last applied schema versions the state remembers, so that a change
/// proposed again after a leader change (its first proposal committed, its answer lost)
/// is recognised and answered as applied rather than refused as stale.
pub const RECENT_SCHEMA_VERSIONS: usize = 64;

/// One entry of the metadata log, as proposed (`MetadataService::propose`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataCommand {
    /// A schema change, decided on the schema of `base_version`.
    Schema(SchemaEntry),
    /// A node's place in the ring: joining, normal, leaving or left, with its tokens.
    Ownership(NodeOwnership),
}

/// A schema change as the log carries it. The crate does not know what a schema is: `change`
/// is the schema service's own encoding (the whole schema after the change and the event
/// announcing it), so that the entry alone gives every node the schema, version included.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaEntry {
    /// The version the change was decided on: it applies only if that is the version the
    /// log's last applied schema change left (a compare-and-swap every node evaluates alike).
    pub base_version: Uuid,
    /// The version of the schema after the change; never `base_version`.
    pub version: Uuid,
    /// The schema service's encoding of the schema after the change (opaque here).
    pub change: String,
}

/// A node's ring membership, keyed by its host id (Cassandra's `system.peers` row plus its
/// gossip `STATUS` and `TOKENS`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeOwnership {
    /// The node's host id (Cassandra's), its key in the token map.
    pub host_id: Uuid,
    /// Where other nodes reach it (`broadcast_address`).
    pub broadcast_address: IpAddr,
    /// Where clients reach it (`broadcast_rpc_address`) and on which port.
    pub native_address: IpAddr,
    pub native_port: u16,
    /// Its data centre and rack, as its snitch reports them.
    pub datacenter: String,
    pub rack: String,
    /// Its tokens, any order; empty only when `state` is `Left`.
    pub tokens: Vec<Token>,
    pub state: OwnershipState,
}

/// Where a node is in its ring life cycle (Cassandra's gossip `STATUS`: `BOOT`, `NORMAL`,
/// `LEAVING`, `LEFT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OwnershipState {
    /// Bootstrapping: its tokens are claimed (no other node may take them) but pending.
    Joining,
    /// Owns its tokens.
    Normal,
    /// Decommissioning: still owns its tokens until it has streamed them away.
    Leaving,
    /// Gone: owns nothing, and its host id may not come back (as in Cassandra, a node that
    /// left rejoins with a new host id).
    Left,
}

/// What applying one entry answered: the same on every node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataResponse {
    /// The command changed the state (or was an entry of Raft's own: blank, membership).
    Applied,
    /// The command was refused, and changed nothing; the reason is the same everywhere.
    Refused(String),
}

/// The state every node's state machine builds from the log: the last applied schema change
/// (which carries the whole schema) and every node's ring membership. This is what a snapshot
/// holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataState {
    /// The last schema change applied; `None` before the first.
    pub schema: Option<SchemaEntry>,
    /// The versions of the last [`RECENT_SCHEMA_VERSIONS`] schema changes applied, oldest
    /// first.
    pub recent_schema_versions: VecDeque<Uuid>,
    /// Every node ever placed in the ring by the log, `Left` ones included (their host ids
    /// may not come back).
    pub nodes: BTreeMap<Uuid, NodeOwnership>,
}

impl MetadataState {
    /// The schema version the last applied change left, [`INITIAL_SCHEMA_VERSION`] before the
    /// first.
    pub fn schema_version(&self) -> Uuid {
        self.schema
            .as_ref()
            .map_or(INITIAL_SCHEMA_VERSION, |s| s.version)
    }

    /// Applies `command`, or refuses it and changes nothing. Deterministic: the answer and
    /// the state after depend only on the state before and the command.
    pub fn apply(&mut self, command: &MetadataCommand) -> MetadataResponse {
        let outcome = match command {
            MetadataCommand::Schema(entry) => self.apply_schema(entry),
            MetadataCommand::Ownership(node) => self.apply_ownership(node),
        };
        match outcome {
            Ok(()) => MetadataResponse::Applied,
            Err(reason) => MetadataResponse::Refused(reason),
        }
    }

    fn apply_schema(&mut self, entry: &SchemaEntry) -> Result<(), String> {
        if entry.version == entry.base_version {
            return Err(format!(
                "a schema change must make a new version, not keep {}",
                entry.version
            ));
        }
        if self.recent_schema_versions.contains(&entry.version) {
            // The same change again (a proposal retried across a leader change): it applied
            // once, and changes nothing now.
            return Ok(());
        }
        let current = self.schema_version();
        if entry.base_version != current {
            return Err(format!(
                "the schema changed (to version {current}) since this change was decided on version {}",
                entry.base_version
            ));
        }
        self.schema = Some(entry.clone());
        if self.recent_schema_versions.len() == RECENT_SCHEMA_VERSIONS {
            self.recent_schema_versions.pop_front();
        }
        self.recent_schema_versions.push_back(entry.version);
        Ok(())
    }

    fn apply_ownership(&mut self, node: &NodeOwnership) -> Result<(), String> {
        let host = node.host_id;
        if let Some(known) = self.nodes.get(&host) {
            if known.state == OwnershipState::Left {
                return Err(format!(
                    "host {host} has left the ring; a node rejoins with a new host id"
                ));
            }
        }
        if node.state == OwnershipState::Left {
            if !node.tokens.is_empty() {
                return Err(format!("host {host} cannot leave the ring keeping tokens"));
            }
        } else if node.tokens.is_empty() {
            return Err(format!("host {host} claims no tokens"));
        }
        let mut sorted = node.tokens.clone();
        sorted.sort_unstable();
        if let Some(pair) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("host {host} claims token {} twice", pair[0]));
        }
        for (other, owner) in &self.nodes {
            if *other == host || owner.state == OwnershipState::Left {
                continue;
            }
            if let Some(token) = owner
                .tokens
                .iter()
                .find(|t| sorted.binary_search(t).is_ok())
            {
                return Err(format!(
                    "token {token} is already owned by host {other} ({:?})",
                    owner.state
                ));
            }
        }
        self.nodes.insert(host, node.clone());
        Ok(())
    }
}

/// The ring the token map describes, seen from `local`: the nodes that own their tokens
/// (`Normal`, `Leaving`) in the ring, joining ones pending (left out, as Cassandra keeps
/// bootstrap tokens out of placement), left ones gone. `local` must own tokens in it.
pub fn token_metadata(
    nodes: &BTreeMap<Uuid, NodeOwnership>,
    local: Uuid,
) -> Result<TokenMetadata, TokenMapError> {
    let owning =
        |n: &&NodeOwnership| matches!(n.state, OwnershipState::Normal | OwnershipState::Leaving);
    let me = nodes
        .get(&local)
        .filter(owning)
        .ok_or(TokenMapError::LocalNotInRing(local))?;
    let mut ring = TokenMetadata::new(endpoint(me), me.tokens.clone())?;
    for node in nodes.values().filter(owning).filter(|n| n.host_id != local) {
        ring = ring.with_normal_tokens(endpoint(node), node.tokens.clone())?;
    }
    Ok(ring)
}

/// Why the token map does not make a ring.
#[derive(Debug, thiserror::Error)]
pub enum TokenMapError {
    #[error("host {0} does not own tokens in the cluster metadata's ring")]
    LocalNotInRing(Uuid),
    #[error(transparent)]
    Locator(#[from] LocatorError),
}

fn endpoint(node: &NodeOwnership) -> Endpoint {
    Endpoint {
        host_id: HostId(node.host_id),
        broadcast_address: node.broadcast_address,
        native_address: node.native_address,
        native_port: node.native_port,
        location: Location {
            datacenter: node.datacenter.clone(),
            rack: node.rack.clone(),
        },
        state: match node.state {
            OwnershipState::Leaving => NodeState::Leaving,
            _ => NodeState::Normal,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u128, tokens: Vec<Token>, state: OwnershipState) -> NodeOwnership {
        NodeOwnership {
            host_id: Uuid::from_u128(id),
            broadcast_address: IpAddr::from([127, 0, 0, id as u8]),
            native_address: IpAddr::from([127, 0, 0, id as u8]),
            native_port: 9042,
            datacenter: "dc1".to_string(),
            rack: "rack1".to_string(),
            tokens,
            state,
        }
    }

    fn schema(base: u128, version: u128) -> MetadataCommand {
        MetadataCommand::Schema(SchemaEntry {
            base_version: Uuid::from_u128(base),
            version: Uuid::from_u128(version),
            change: format!("schema {version}"),
        })
    }

    #[test]
    fn schema_changes_apply_only_to_their_base_version() {
        let mut state = MetadataState::default();
        assert_eq!(state.schema_version(), INITIAL_SCHEMA_VERSION);
        assert_eq!(state.apply(&schema(0, 1)), MetadataResponse::Applied);
        assert_eq!(state.apply(&schema(1, 2)), MetadataResponse::Applied);
        let stale = state.apply(&schema(1, 3));
        let MetadataResponse::Refused(reason) = stale else {
            panic!("a stale change applied: {stale:?}");
        };
        assert!(
            reason.contains("since this change was decided on version"),
            "{reason}"
        );
        assert_eq!(state.schema_version(), Uuid::from_u128(2));
        assert!(matches!(
            state.apply(&schema(2, 2)),
            MetadataResponse::Refused(_)
        ));
        // A change applied before, proposed again, is answered as applied and changes nothing.
        assert_eq!(state.apply(&schema(0, 1)), MetadataResponse::Applied);
        assert_eq!(state.schema_version(), Uuid::from_u128(2));
    }

    #[test]
    fn only_the_last_schema_versions_are_remembered() {
        let mut state = MetadataState::default();
        let last = RECENT_SCHEMA_VERSIONS as u128 + 1;
        for version in 1..=last {
            assert_eq!(
                state.apply(&schema(version - 1, version)),
                MetadataResponse::Applied
            );
        }
        assert_eq!(state.recent_schema_versions.len(), RECENT_SCHEMA_VERSIONS);
        assert!(matches!(
            state.apply(&schema(0, 1)),
            MetadataResponse::Refused(_)
        ));
        assert_eq!(state.apply(&schema(1, 2)), MetadataResponse::Applied);
        assert_eq!(state.schema_version(), Uuid::from_u128(last));
    }

    #[test]
    fn tokens_cannot_be_claimed_twice_and_left_is_final() {
        let mut state = MetadataState::default();
        use OwnershipState::*;
        let ok = MetadataResponse::Applied;
        assert_eq!(
            state.apply(&MetadataCommand::Ownership(node(1, vec![10, 20], Normal))),
            ok
        );
        let clash = state.apply(&MetadataCommand::Ownership(node(2, vec![5, 20], Joining)));
        assert_eq!(
            clash,
            MetadataResponse::Refused(format!(
                "token 20 is already owned by host {} (Normal)",
                Uuid::from_u128(1)
            ))
        );
        assert_eq!(
            state.apply(&MetadataCommand::Ownership(node(2, vec![5, 30], Joining))),
            ok
        );
        assert_eq!(
            state.apply(&MetadataCommand::Ownership(node(2, vec![5, 30], Normal))),
            ok
        );
        assert!(matches!(
            state.apply(&MetadataCommand::Ownership(node(3, vec![1, 1], Joining))),
            MetadataResponse::Refused(_)
        ));
        assert_eq!(
            state.apply(&MetadataCommand::Ownership(node(1, vec![], Left))),
            ok
        );
        // A left node's tokens are free again; its host id is not.
        assert_eq!(
            state.apply(&MetadataCommand::Ownership(node(3, vec![10], Joining))),
            ok
        );
        assert!(matches!(
            state.apply(&MetadataCommand::Ownership(node(1, vec![99], Joining))),
            MetadataResponse::Refused(_)
        ));
    }

    #[test]
    fn the_ring_holds_owning_nodes_only() {
        let mut state = MetadataState::default();
        use OwnershipState::*;
        for n in [
            node(1, vec![10, 20], Normal),
            node(2, vec![30], Leaving),
            node(3, vec![40], Joining),
        ] {
            assert_eq!(
                state.apply(&MetadataCommand::Ownership(n)),
                MetadataResponse::Applied
            );
        }
        let ring = token_metadata(&state.nodes, Uuid::from_u128(1)).expect("a ring");
        let owners: Vec<(Token, Uuid)> = ring.ring().iter().map(|(t, h)| (*t, h.0)).collect();
        assert_eq!(
            owners,
            vec![
                (10, Uuid::from_u128(1)),
                (20, Uuid::from_u128(1)),
                (30, Uuid::from_u128(2))
            ]
        );
        assert!(matches!(
            token_metadata(&state.nodes, Uuid::from_u128(3)),
            Err(TokenMapError::LocalNotInRing(_))
        ));
    }
}
