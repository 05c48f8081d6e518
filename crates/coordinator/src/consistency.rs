//! Consistency levels and how many replica responses each needs.

use std::fmt;

use locator::ReplicationStrategy;
use schema::KeyspaceMetadata;

use crate::CoordinatorError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsistencyLevel {
    Any,
    One,
    Two,
    Three,
    Quorum,
    All,
    LocalQuorum,
    EachQuorum,
    Serial,
    LocalSerial,
    LocalOne,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOrWrite {
    Read,
    Write,
}

impl fmt::Display for ConsistencyLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConsistencyLevel::Any => "ANY",
            ConsistencyLevel::One => "ONE",
            ConsistencyLevel::Two => "TWO",
            ConsistencyLevel::Three => "THREE",
            ConsistencyLevel::Quorum => "QUORUM",
            ConsistencyLevel::All => "ALL",
            ConsistencyLevel::LocalQuorum => "LOCAL_QUORUM",
            ConsistencyLevel::EachQuorum => "EACH_QUORUM",
            ConsistencyLevel::Serial => "SERIAL",
            ConsistencyLevel::LocalSerial => "LOCAL_SERIAL",
            ConsistencyLevel::LocalOne => "LOCAL_ONE",
        })
    }
}

impl ConsistencyLevel {
    /// How many replica acknowledgements the level needs, as Cassandra's
    /// `ConsistencyLevel.blockFor`, after validating the level for the request kind. `local_dc`
    /// is this node's data centre, the one the LOCAL_ levels count in.
    pub fn block_for(
        self,
        keyspace: &KeyspaceMetadata,
        kind: ReadOrWrite,
        local_dc: &str,
    ) -> Result<usize, CoordinatorError> {
        if keyspace.virtual_keyspace {
            // Node-local tables answer at any level, as Cassandra's local system tables do.
            return Ok(0);
        }
        let strategy = keyspace.replication.strategy();
        Ok(match (self, kind) {
            (ConsistencyLevel::Any, ReadOrWrite::Read) => {
                return Err(CoordinatorError::InvalidConsistency(
                    "ANY ConsistencyLevel is only supported for writes".to_string(),
                ))
            }
            (ConsistencyLevel::Serial | ConsistencyLevel::LocalSerial, ReadOrWrite::Write) => {
                return Err(CoordinatorError::InvalidConsistency(
                    "You must use conditional updates for serializable writes".to_string(),
                ))
            }
            (ConsistencyLevel::Any, ReadOrWrite::Write) => 1,
            (ConsistencyLevel::One | ConsistencyLevel::LocalOne, _) => 1,
            (ConsistencyLevel::Two, _) => 2,
            (ConsistencyLevel::Three, _) => 3,
            (ConsistencyLevel::All, _) => strategy.replication_factor(),
            (ConsistencyLevel::Quorum | ConsistencyLevel::Serial, _) => {
                quorum(strategy.replication_factor())
            }
            (ConsistencyLevel::LocalQuorum | ConsistencyLevel::LocalSerial, _) => {
                quorum(strategy.replication_factor_in(local_dc))
            }
            (ConsistencyLevel::EachQuorum, _) => match strategy {
                ReplicationStrategy::NetworkTopology { datacenters } => {
                    datacenters.values().map(|&rf| quorum(rf as usize)).sum()
                }
                _ => quorum(strategy.replication_factor()),
            },
        })
    }

    /// Whether the level counts only this node's data centre's replicas (Cassandra's
    /// `isDatacenterLocal`).
    pub fn is_datacenter_local(self) -> bool {
        matches!(
            self,
            ConsistencyLevel::LocalOne
                | ConsistencyLevel::LocalQuorum
                | ConsistencyLevel::LocalSerial
        )
    }
}

/// A majority of `replication_factor` (Cassandra's `quorumFor`).
fn quorum(replication_factor: usize) -> usize {
    replication_factor / 2 + 1
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use schema::Replication;

    use super::*;

    fn keyspace(options: &[(&str, &str)]) -> KeyspaceMetadata {
        let options: BTreeMap<String, String> = options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        KeyspaceMetadata {
            name: "ks".to_string(),
            durable_writes: true,
            replication: Replication::from_stored(options).expect("valid"),
            tables: BTreeMap::new(),
            types: BTreeMap::new(),
            virtual_keyspace: false,
        }
    }

    const NTS: &str = "org.apache.cassandra.locator.NetworkTopologyStrategy";
    const SIMPLE: &str = "org.apache.cassandra.locator.SimpleStrategy";

    #[test]
    fn quorums_count_the_whole_factor_and_local_ones_this_data_centre() {
        use ConsistencyLevel::*;
        let w = ReadOrWrite::Write;
        let nts = keyspace(&[("class", NTS), ("dc1", "3"), ("dc2", "5")]);
        let block = |cl: ConsistencyLevel, dc| cl.block_for(&nts, w, dc).expect("valid");
        assert_eq!(block(All, "dc1"), 8);
        assert_eq!(block(Quorum, "dc1"), 5);
        assert_eq!(block(LocalQuorum, "dc1"), 2);
        assert_eq!(block(LocalQuorum, "dc2"), 3);
        // A data centre the keyspace does not replicate to: 0 / 2 + 1, as Cassandra.
        assert_eq!(block(LocalQuorum, "dc3"), 1);
        assert_eq!(block(EachQuorum, "dc1"), 2 + 3);
        assert_eq!(block(One, "dc1"), 1);
        assert_eq!(block(Three, "dc1"), 3);
        let simple = keyspace(&[("class", SIMPLE), ("replication_factor", "4")]);
        let block = |cl: ConsistencyLevel| cl.block_for(&simple, w, "dc1").expect("valid");
        assert_eq!(block(Quorum), 3);
        // Without data centres in the strategy, local and each quorum are the quorum.
        assert_eq!(block(LocalQuorum), 3);
        assert_eq!(block(EachQuorum), 3);
        assert_eq!(
            Serial
                .block_for(&simple, ReadOrWrite::Read, "dc1")
                .expect("valid"),
            3
        );
        assert!(Serial.block_for(&simple, w, "dc1").is_err());
        assert!(Any.block_for(&simple, ReadOrWrite::Read, "dc1").is_err());
    }
}
