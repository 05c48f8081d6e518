//! `MemoryEngine`: the storage boundary over ordered in-memory maps, for unit tests of the
//! crates above storage. Same key layout, value encoding, merge rules and page assembly as
//! `RocksEngine` (it passes the same conformance suite); no durability: everything is lost on
//! drop, and `flush` and `sync_commit_log` do nothing. `compact` purges what gc_grace allows:
//! every value here is already complete for its key, so it applies each header's deletions to
//! the rows they shadow and purges everything, with nothing outside to protect.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use mutation::{
    ClusteringSlice, PartitionKey, PartitionPage, PartitionUpdate, ScanPage, ScanStart, TableId,
};

use crate::keys::{parse_key, partition_prefix, KIND_HEADER, KIND_STATIC};
use crate::read::{self, Source, Visit, Visitor};
use crate::write::{fragments, merge_values, purge_value, Purged};
use crate::{Durability, StorageEngine, StorageError, TableStats};

type Table = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Default)]
struct State {
    tables: HashMap<TableId, Table>,
    /// `set_gc_grace` per table; tables absent here are never purged.
    gc_grace: HashMap<TableId, i32>,
    meta: BTreeMap<Vec<u8>, Vec<u8>>,
}

/// Storage in ordered maps behind one lock: `apply_batch` holds it exclusively, which is what
/// makes a multi-partition batch atomic here. Meant for tests, so a global lock is acceptable.
#[derive(Default)]
pub struct MemoryEngine {
    state: RwLock<State>,
}

impl MemoryEngine {
    pub fn new() -> MemoryEngine {
        MemoryEngine::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        // A panic while holding the lock cannot leave a map half-updated in a way that matters
        // to tests (apply validates before mutating), so a poisoned lock is still usable.
        self.state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_table(&self, table: Option<TableId>) -> Result<(), StorageError> {
        match table {
            Some(t) if !self.read().tables.contains_key(&t) => Err(StorageError::UnknownTable(t)),
            _ => Ok(()),
        }
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Source for Table {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(BTreeMap::get(self, key).cloned())
    }

    fn visit(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        reverse: bool,
        _within_partition: bool,
        f: &mut Visitor<'_>,
    ) -> Result<(), StorageError> {
        let upper = upper.map_or(Bound::Unbounded, Bound::Excluded);
        let range = self.range::<[u8], _>((Bound::Included(lower), upper));
        let mut step = |(k, v): (&Vec<u8>, &Vec<u8>)| f(k, v);
        if reverse {
            for entry in range.rev() {
                if let Visit::Stop = step(entry)? {
                    break;
                }
            }
        } else {
            for entry in range {
                if let Visit::Stop = step(entry)? {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Purges a whole table: each row first loses what its partition's header shadows, then
/// everything is purged by `purger`, and keys left empty are removed.
fn purge_table(
    table: TableId,
    data: &mut Table,
    purger: &mutation::Purger,
) -> Result<(), StorageError> {
    let corrupt = |key: &[u8], e: &dyn std::fmt::Display| StorageError::Corruption {
        table,
        detail: format!("key of {} bytes: {e}", key.len()),
    };
    // The header of the partition being walked (keys are ordered header, static, rows).
    let mut partition: &[u8] = &[];
    let mut header = mutation::PartitionHeader::default();
    let mut updates: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for (key, value) in data.iter() {
        let parsed = parse_key(key).ok_or_else(|| corrupt(key, &"malformed key"))?;
        if key[..parsed.prefix_len] != *partition {
            partition = &key[..parsed.prefix_len];
            header = mutation::PartitionHeader::default();
        }
        let mut value = value.clone();
        if parsed.kind == KIND_HEADER {
            header = mutation::decode_partition_header(&value).map_err(|e| corrupt(key, &e))?;
        } else {
            let covering = if parsed.kind == KIND_STATIC {
                header.deletion
            } else {
                header.covering_deletion(parsed.clustering)
            };
            let mut row = mutation::decode_row(&value).map_err(|e| corrupt(key, &e))?;
            row.apply_deletions(covering);
            value.clear();
            mutation::encode_row(&row, &mut value);
        }
        match purge_value(key, &value, purger).map_err(|e| corrupt(key, &e))? {
            Purged::Keep => updates.push((key.clone(), Some(value))),
            Purged::Change(v) => updates.push((key.clone(), Some(v))),
            Purged::Remove => updates.push((key.clone(), None)),
        }
    }
    for (key, value) in updates {
        match value {
            Some(v) => {
                data.insert(key, v);
            }
            None => {
                data.remove(&key);
            }
        }
    }
    Ok(())
}

impl StorageEngine for MemoryEngine {
    fn create_table(&self, table: TableId) -> Result<(), StorageError> {
        self.write().tables.entry(table).or_default();
        Ok(())
    }

    fn drop_table(&self, table: TableId) -> Result<(), StorageError> {
        self.write().tables.remove(&table);
        Ok(())
    }

    fn truncate_table(&self, table: TableId) -> Result<(), StorageError> {
        match self.write().tables.get_mut(&table) {
            Some(t) => {
                t.clear();
                Ok(())
            }
            None => Err(StorageError::UnknownTable(table)),
        }
    }

    fn apply_batch(
        &self,
        updates: &[PartitionUpdate],
        _durability: Durability,
    ) -> Result<(), StorageError> {
        let mut state = self.write();
        // Validate and encode everything before changing anything, so a bad update leaves no
        // partial write behind (the atomicity RocksDB gets from its WriteBatch).
        let mut pending = Vec::with_capacity(updates.len());
        for update in updates {
            if !state.tables.contains_key(&update.table) {
                return Err(StorageError::UnknownTable(update.table));
            }
            pending.push((update.table, fragments(update)?));
        }
        // Merged values staged per key, so that two updates of one key in this call merge with
        // each other, and a corrupt stored value aborts the whole call.
        let mut staged: BTreeMap<(TableId, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for (table_id, fragments) in pending {
            let table = state
                .tables
                .get(&table_id)
                .ok_or(StorageError::UnknownTable(table_id))?;
            for (key, value) in fragments {
                let slot = (table_id, key);
                let existing = staged.get(&slot).or_else(|| table.get(&slot.1));
                let value = match existing {
                    None => value,
                    Some(existing) => {
                        merge_values(&slot.1, [existing.as_slice(), value.as_slice()]).map_err(
                            |e| StorageError::Corruption {
                                table: table_id,
                                detail: e.to_string(),
                            },
                        )?
                    }
                };
                staged.insert(slot, value);
            }
        }
        for ((table_id, key), value) in staged {
            if let Some(table) = state.tables.get_mut(&table_id) {
                table.insert(key, value);
            }
        }
        Ok(())
    }

    // Memory never makes a caller wait for a disk: the `try_` calls always do the work.
    fn try_apply_batch(
        &self,
        updates: &[PartitionUpdate],
        durability: Durability,
    ) -> Result<(), StorageError> {
        self.apply_batch(updates, durability)
    }

    fn try_read_partition(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
    ) -> Result<PartitionPage, StorageError> {
        self.read_partition(table, key, slice, max_rows, resume)
    }

    fn read_partition(
        &self,
        table: TableId,
        key: &PartitionKey,
        slice: &ClusteringSlice,
        max_rows: usize,
        resume: Option<&[u8]>,
    ) -> Result<PartitionPage, StorageError> {
        let state = self.read();
        let data = state
            .tables
            .get(&table)
            .ok_or(StorageError::UnknownTable(table))?;
        let prefix = partition_prefix(key)?;
        read::read_partition(data, table, key, &prefix, slice, max_rows, resume)
    }

    fn scan(
        &self,
        table: TableId,
        start: ScanStart,
        end_token: Option<i64>,
        max_rows: usize,
    ) -> Result<ScanPage, StorageError> {
        let state = self.read();
        let data = state
            .tables
            .get(&table)
            .ok_or(StorageError::UnknownTable(table))?;
        read::scan(data, table, start, end_token, max_rows)
    }

    fn put_meta(&self, key: &[u8], value: &[u8]) -> Result<(), StorageError> {
        self.write().meta.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn delete_meta(&self, key: &[u8]) -> Result<(), StorageError> {
        self.write().meta.remove(key);
        Ok(())
    }

    fn try_write_meta(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        _durability: Durability,
    ) -> Result<(), StorageError> {
        match value {
            Some(value) => self.put_meta(key, value),
            None => self.delete_meta(key),
        }
    }

    fn get_meta(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.read().meta.get(key).cloned())
    }

    fn scan_meta(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError> {
        Ok(self
            .read()
            .meta
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn scan_meta_page(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, StorageError> {
        let start = match after {
            Some(after) if after >= prefix => Bound::Excluded(after),
            _ => Bound::Included(prefix),
        };
        Ok(self
            .read()
            .meta
            .range::<[u8], _>((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn flush(&self, table: Option<TableId>) -> Result<(), StorageError> {
        self.check_table(table)
    }

    fn compact(&self, table: Option<TableId>) -> Result<(), StorageError> {
        self.check_table(table)?;
        let mut state = self.write();
        let State {
            tables, gc_grace, ..
        } = &mut *state;
        let now = crate::now_seconds();
        for (id, data) in tables.iter_mut() {
            if table.is_some_and(|t| t != *id) {
                continue;
            }
            if let Some(&grace) = gc_grace.get(id) {
                purge_table(*id, data, &mutation::Purger::new(now, grace))?;
            }
        }
        Ok(())
    }

    fn set_gc_grace(&self, table: TableId, gc_grace_seconds: i32) -> Result<(), StorageError> {
        self.check_table(Some(table))?;
        self.write().gc_grace.insert(table, gc_grace_seconds);
        Ok(())
    }

    fn table_stats(&self, table: TableId) -> Result<TableStats, StorageError> {
        let state = self.read();
        let data = state
            .tables
            .get(&table)
            .ok_or(StorageError::UnknownTable(table))?;
        // Everything lives in the "memtable": there are no files.
        Ok(TableStats {
            memtable_bytes: data.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum(),
            memtable_entries: data.len() as u64,
            ..TableStats::default()
        })
    }

    fn metrics(&self) -> Result<Vec<(&'static str, u64)>, StorageError> {
        // Nothing is cached or read from disk here.
        let memtable_bytes = self
            .read()
            .tables
            .values()
            .flat_map(|t| t.iter())
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        Ok(vec![("memtable_bytes", memtable_bytes)])
    }

    fn sync_commit_log(&self) -> Result<(), StorageError> {
        Ok(())
    }

    fn maintain_commit_log(&self) -> Result<(), StorageError> {
        Ok(())
    }
}
