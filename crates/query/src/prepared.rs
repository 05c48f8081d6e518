//! The prepared statement cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::processor::{ColumnSpec, PreparedInfo};

/// Bound on cached prepared statements. Cassandra bounds its cache by memory (1/256 of heap);
/// a count is simpler and a statement is small. When full, an arbitrary entry is evicted and a
/// client executing it gets UNPREPARED and re-prepares, which every driver handles.
const MAX_PREPARED_STATEMENTS: usize = 10_000;

/// Statements by id. The hash is foldhash's, seeded per map: every EXECUTE looks its statement
/// up, and SipHash (std's) cost more than the rest of the lookup.
type Statements = HashMap<Bytes, Arc<PreparedInfo>, foldhash::fast::RandomState>;

pub(crate) struct PreparedCache {
    entries: Mutex<Statements>,
}

impl PreparedCache {
    pub(crate) fn new() -> PreparedCache {
        PreparedCache {
            entries: Mutex::new(HashMap::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Statements> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn get(&self, id: &[u8]) -> Option<Arc<PreparedInfo>> {
        self.lock().get(id).cloned()
    }

    pub(crate) fn get_by_text(
        &self,
        text: &str,
        keyspace: Option<&str>,
    ) -> Option<Arc<PreparedInfo>> {
        self.get(&statement_id(text, keyspace))
    }

    pub(crate) fn insert(&self, prepared: PreparedInfo) -> Arc<PreparedInfo> {
        let prepared = Arc::new(prepared);
        let mut entries = self.lock();
        if entries.len() >= MAX_PREPARED_STATEMENTS && !entries.contains_key(&prepared.id) {
            if let Some(victim) = entries.keys().next().cloned() {
                entries.remove(&victim);
            }
        }
        entries.insert(prepared.id.clone(), prepared.clone());
        prepared
    }

    /// Forgets every statement after a schema change that can invalidate one (ALTER/DROP), so
    /// the next EXECUTE gets UNPREPARED and the driver re-prepares against the new schema, as it
    /// would after Cassandra drops the statements of a changed table.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}

/// A statement's id: a 128-bit hash of the keyspace and the query text, so the same statement
/// prepared twice (or on another node later) gets the same id, as with Cassandra's MD5 ids.
pub(crate) fn statement_id(text: &str, keyspace: Option<&str>) -> Bytes {
    let mut input = Vec::with_capacity(text.len() + 32);
    input.extend_from_slice(keyspace.unwrap_or("").as_bytes());
    input.push(0);
    input.extend_from_slice(text.as_bytes());
    hash128(&input)
}

/// Identifies result metadata (protocol v5): changes when the result columns change.
pub(crate) fn metadata_id(columns: &[ColumnSpec]) -> Bytes {
    let mut input = Vec::new();
    for c in columns {
        input.extend_from_slice(c.keyspace.as_bytes());
        input.push(0);
        input.extend_from_slice(c.table.as_bytes());
        input.push(0);
        input.extend_from_slice(c.name.as_bytes());
        input.push(0);
        input.extend_from_slice(c.ty.to_string().as_bytes());
        input.push(0);
    }
    hash128(&input)
}

fn hash128(input: &[u8]) -> Bytes {
    let mut salted = Vec::with_capacity(input.len() + 1);
    salted.push(0x5a);
    salted.extend_from_slice(input);
    let a = partitioner::murmur3_token(input);
    let b = partitioner::murmur3_token(&salted);
    let mut id = Vec::with_capacity(16);
    id.extend_from_slice(&a.to_be_bytes());
    id.extend_from_slice(&b.to_be_bytes());
    Bytes::from(id)
}
