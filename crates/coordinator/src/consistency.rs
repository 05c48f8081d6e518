//! Consistency levels and how many replica responses each needs.

use std::fmt;

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
    /// `ConsistencyLevel.blockFor`, after validating the level for the request kind.
    pub fn block_for(
        self,
        keyspace: &KeyspaceMetadata,
        kind: ReadOrWrite,
    ) -> Result<usize, CoordinatorError> {
        if keyspace.virtual_keyspace {
            // Node-local tables answer at any level, as Cassandra's local system tables do.
            return Ok(0);
        }
        // Parsed only for the levels that need it: ONE, the level of most requests, does not.
        let rf = || keyspace.replication.replication_factor();
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
            (ConsistencyLevel::All, _) => rf(),
            // Single data centre: local and each quorum are the quorum of that DC.
            (
                ConsistencyLevel::Quorum
                | ConsistencyLevel::LocalQuorum
                | ConsistencyLevel::EachQuorum
                | ConsistencyLevel::Serial
                | ConsistencyLevel::LocalSerial,
                _,
            ) => rf() / 2 + 1,
        })
    }
}
