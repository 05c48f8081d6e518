//! What the read paths (`read.rs`, `speculation.rs`, `range.rs`) share: the replicas a read
//! asks, and the level whose timeout it words.

use std::sync::Arc;

use locator::HostId;

use crate::{ConsistencyLevel, CoordinatorError, Replica};

/// A replica chosen for a read, with its endpoint.
pub(crate) type Contact = (HostId, Arc<dyn Replica>);

/// What a read at a consistency level needs to word its timeout.
#[derive(Clone, Copy)]
pub(crate) struct ReadLevel {
    pub consistency: ConsistencyLevel,
    pub block_for: usize,
}

impl ReadLevel {
    pub fn timeout(self, received: usize, data_present: bool) -> CoordinatorError {
        CoordinatorError::ReadTimeout {
            consistency: self.consistency,
            received: received as i32,
            block_for: self.block_for as i32,
            data_present,
        }
    }
}
