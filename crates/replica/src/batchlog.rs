//! This node's batch log (Cassandra's `system.batches`): the batches coordinators stored here
//! (`Replica::store_batch`), kept in storage's node metadata until their coordinator removes
//! them or this node's replay (`coordinator::BatchlogReplay`) has replayed them.
//!
//! Each batch is one metadata entry:
//!
//! ```text
//! key:   b"batchlog/" | u64 big-endian: the batch's Unix milliseconds with the sign bit
//!        flipped (so keys sort by age, oldest first) | 16 bytes: the batch id (a time UUID)
//! value: the batch's body as it arrived (`coordinator::Batch::body`)
//! ```
//!
//! Metadata rather than a table: a batch is written once, read only by the replay, and deleted
//! whole, so a point delete (which RocksDB's compactions drop by themselves) is all a removal
//! costs: no table, no schema, no tombstones waiting for `gc_grace_seconds`.

use std::sync::Arc;

use coordinator::{Batch, BatchId, BatchlogStore};
use storage::{Durability, StorageEngine, StorageError};

const PREFIX: &[u8] = b"batchlog/";

/// The batch log in this node's storage. Its calls block on storage: callers run them on
/// tokio's blocking pool.
pub struct BatchlogStorage {
    engine: Arc<dyn StorageEngine>,
    /// How durable a stored batch is when `store` returns: the node's commit log mode (a
    /// batch log write promises what any write promises).
    durability: Durability,
}

impl BatchlogStorage {
    /// The batch log in `engine`, stored as durably as `durability` (the commit log's mode).
    pub fn new(engine: Arc<dyn StorageEngine>, durability: Durability) -> BatchlogStorage {
        BatchlogStorage { engine, durability }
    }

    /// Stores `batch`.
    pub fn store(&self, batch: &Batch) -> Result<(), StorageError> {
        self.engine
            .put_meta_with(&key(batch.id), batch.body(), self.durability)
    }

    /// `store` if it needs no wait (no sync, no write stall), else `WouldBlock`.
    pub fn try_store(&self, batch: &Batch) -> Result<(), StorageError> {
        self.engine
            .try_write_meta(&key(batch.id), Some(batch.body()), self.durability)
    }

    /// `remove` if it needs no wait, else `WouldBlock`.
    pub fn try_remove(&self, id: BatchId) -> Result<(), StorageError> {
        self.engine.try_write_meta(&key(id), None, Durability::None)
    }

    /// Deletes batch `id`, without the commit log: a deletion lost in a crash only replays a
    /// batch whose mutations were applied already, which is harmless (they keep their
    /// timestamps), and it spares every logged batch a commit log write.
    pub fn remove(&self, id: BatchId) -> Result<(), StorageError> {
        self.engine.delete_meta_with(&key(id), Durability::None)
    }

    /// At most `limit` stored batches, oldest first, those after batch `after` (from the
    /// oldest if `None`). An entry that does not decode (damaged storage) is reported by its
    /// key and deleted, so it does not stop every later replay.
    pub fn batches(
        &self,
        after: Option<BatchId>,
        limit: usize,
    ) -> Result<Vec<Batch>, StorageError> {
        let after = after.map(key);
        let mut batches = Vec::new();
        for (k, value) in self
            .engine
            .scan_meta_page(PREFIX, after.as_deref(), limit)?
        {
            match parse(&k, &value) {
                Some(batch) => batches.push(batch),
                None => {
                    tracing::warn!(key = ?k, "damaged batch log entry dropped");
                    self.engine.delete_meta_with(&k, Durability::Periodic)?;
                }
            }
        }
        Ok(batches)
    }
}

impl BatchlogStore for BatchlogStorage {
    fn stored_batches(&self, after: Option<BatchId>, limit: usize) -> Result<Vec<Batch>, String> {
        self.batches(after, limit).map_err(|e| e.to_string())
    }

    fn remove_batch(&self, id: BatchId) -> Result<(), String> {
        self.remove(id).map_err(|e| e.to_string())
    }
}

fn key(id: BatchId) -> Vec<u8> {
    let mut key = Vec::with_capacity(PREFIX.len() + 24);
    key.extend_from_slice(PREFIX);
    key.extend_from_slice(&((id.unix_millis() as u64) ^ (1 << 63)).to_be_bytes());
    key.extend_from_slice(&id.0);
    key
}

fn parse(key: &[u8], value: &[u8]) -> Option<Batch> {
    let id: [u8; 16] = key.get(PREFIX.len() + 8..)?.try_into().ok()?;
    Batch::new(BatchId(id), value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mutation::{PartitionKey, PartitionUpdate, TableId};

    fn batch(micros: i64) -> Batch {
        let update = PartitionUpdate {
            table: TableId::from_u128(1),
            key: PartitionKey {
                token: 5,
                key: vec![5],
            },
            header: None,
            static_row: None,
            rows: Vec::new(),
        };
        let host = locator::HostId(uuid::Uuid::from_u128(1));
        Batch::encode(BatchId::new(micros, host), &[&[update]])
    }

    #[test]
    fn batches_are_kept_oldest_first_until_removed_and_damaged_ones_dropped() {
        let engine: Arc<dyn StorageEngine> = Arc::new(storage::MemoryEngine::new());
        let log = BatchlogStorage::new(engine.clone(), Durability::Batch);
        let (young, old) = (batch(2_000_000_000_000_000), batch(1_000_000_000_000_000));
        log.store(&young).expect("store");
        log.store(&old).expect("store");
        assert_eq!(
            log.batches(None, 10).expect("scan"),
            vec![old.clone(), young.clone()]
        );
        assert_eq!(log.batches(None, 1).expect("page"), vec![old.clone()]);
        assert_eq!(
            log.batches(Some(old.id), 1).expect("next page"),
            vec![young.clone()]
        );
        assert_eq!(log.batches(Some(young.id), 1).expect("end"), vec![]);
        engine.put_meta(b"batchlog/damaged", b"x").expect("put");
        log.remove(old.id).expect("remove");
        log.remove(old.id).expect("removing twice is nothing");
        assert_eq!(log.batches(None, 10).expect("scan"), vec![young]);
        assert_eq!(
            engine.scan_meta(PREFIX).expect("scan").len(),
            1,
            "damage gone"
        );
    }
}
