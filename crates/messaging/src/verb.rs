//! Verbs: what a message asks for. Cassandra's `Verb` enum and ScyllaDB's `messaging_verb`,
//! reduced to the replica verbs of `coordinator::Replica` (the batch log's among them), PING, and a range of ids other crates
//! register handlers for (Raft metadata, hints, streaming).

use std::fmt;

/// The highest verb id a frame may carry. Bounded so that per-verb counters are a fixed array
/// indexed by id (no lock or map on the message path).
pub const MAX_VERB_ID: u16 = 511;

/// A message's verb: which handler serves a request, and which request a response answers.
/// Ids 0..[`Verb::FIRST_EXTENSION_ID`] are this crate's; the rest, up to [`MAX_VERB_ID`], are
/// for handlers other crates register (`MessagingService::register_handler`). Ids are part of
/// the wire format: never renumber one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Verb(u16);

impl Verb {
    /// Liveness check: an empty request answered with an empty response.
    pub const PING: Verb = Verb(1);
    /// `Replica::apply_mutation`.
    pub const MUTATION: Verb = Verb(2);
    /// `Replica::read`.
    pub const READ: Verb = Verb(3);
    /// `Replica::digest`.
    pub const DIGEST: Verb = Verb(4);
    /// `Replica::truncate`.
    pub const TRUNCATE: Verb = Verb(5);
    /// `Replica::store_batch` (Cassandra's `BATCH_STORE_REQ`).
    pub const BATCH_STORE: Verb = Verb(6);
    /// `Replica::remove_batch` (Cassandra's `BATCH_REMOVE_REQ`).
    pub const BATCH_REMOVE: Verb = Verb(7);

    /// The first id other crates may register a handler for.
    pub const FIRST_EXTENSION_ID: u16 = 64;

    /// An extension verb. Panics unless `id` is in
    /// `FIRST_EXTENSION_ID..=MAX_VERB_ID` (a programmer error: ids are constants).
    pub const fn extension(id: u16) -> Verb {
        assert!(
            id >= Verb::FIRST_EXTENSION_ID && id <= MAX_VERB_ID,
            "extension verb ids are FIRST_EXTENSION_ID..=MAX_VERB_ID"
        );
        Verb(id)
    }

    /// The verb with wire id `id`, if it is in range (known to this node or not: an unknown
    /// one is answered with an error, not refused as malformed).
    pub fn from_id(id: u16) -> Option<Verb> {
        (id <= MAX_VERB_ID).then_some(Verb(id))
    }

    /// The verb's wire id.
    pub const fn id(self) -> u16 {
        self.0
    }

    /// Whether the verb is one of this crate's (served without a registered handler).
    pub fn is_builtin(self) -> bool {
        self.0 < Verb::FIRST_EXTENSION_ID
    }

    /// The verb's name in logs: Cassandra's for the replica verbs.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Verb::PING => "PING",
            Verb::MUTATION => "MUTATION",
            Verb::READ => "READ",
            Verb::DIGEST => "DIGEST",
            Verb::TRUNCATE => "TRUNCATE",
            Verb::BATCH_STORE => "BATCH_STORE",
            Verb::BATCH_REMOVE => "BATCH_REMOVE",
            _ => return None,
        })
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "VERB_{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_range_checked() {
        assert_eq!(Verb::from_id(5), Some(Verb::TRUNCATE));
        assert_eq!(
            Verb::from_id(MAX_VERB_ID),
            Some(Verb::extension(MAX_VERB_ID))
        );
        assert_eq!(Verb::from_id(MAX_VERB_ID + 1), None);
        assert!(Verb::READ.is_builtin());
        assert!(!Verb::extension(64).is_builtin());
        assert_eq!(Verb::extension(70).to_string(), "VERB_70");
        assert_eq!(Verb::MUTATION.to_string(), "MUTATION");
        assert_eq!(Verb::from_id(6), Some(Verb::BATCH_STORE));
        assert_eq!(Verb::BATCH_REMOVE.to_string(), "BATCH_REMOVE");
    }

    #[test]
    #[should_panic(expected = "extension verb ids")]
    fn a_builtin_id_is_not_an_extension() {
        let _ = Verb::extension(3);
    }
}
