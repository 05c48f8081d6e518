//! The prepared statement cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::interface::{ColumnSpec, PreparedInfo};
use crate::QueryError;

/// Helenus's default `prepared_statements_cache_size`. Cassandra's is max(10 MiB, heap/256):
/// 10 MiB for heaps up to 2.5 GiB (its 1 GiB test heap among them). Helenus has no heap to
/// scale by and takes that floor; a statement of typical size (a few hundred bytes of text)
/// takes about 1.5 KiB of it, so it holds thousands.
pub const DEFAULT_PREPARED_STATEMENTS_CACHE_BYTES: u64 = 10 << 20;

/// What a statement costs in the cache besides its text: the parsed statement's nodes, its
/// column specs and the plan its executions compile (`PlanCache`), as a flat estimate per
/// statement.
const STATEMENT_OVERHEAD_BYTES: u64 = 1024;

/// Statements by id. The hash is foldhash's, seeded per map: every EXECUTE looks its statement
/// up, and SipHash (std's) cost more than the rest of the lookup.
type Statements = HashMap<Bytes, Entry, foldhash::fast::RandomState>;

struct Entry {
    statement: Arc<PreparedInfo>,
    size_bytes: u64,
    /// When it was last prepared or executed, in `Cache::clock` ticks.
    last_used: u64,
}

struct Cache {
    entries: Statements,
    /// The sizes of `entries`, in bytes.
    size_bytes: u64,
    /// Counts lookups and inserts: the recency order of `Entry::last_used`.
    clock: u64,
}

/// Prepared statements, bounded in bytes as Cassandra's cache (`prepared_statements_cache_size`,
/// a Caffeine cache weighed by each statement's measured size): past the bound the least
/// recently used statements are evicted, and a client executing one gets UNPREPARED and
/// prepares it again, which every driver does. A statement larger than the whole cache is
/// refused, in Cassandra's words. A statement's size is estimated as twice its text (its parsed
/// form holds the literals and names once, and the plans its executions compile may hold its
/// values again; Cassandra measures about the same, 12,001,760 bytes for a statement of 6 MB)
/// plus `STATEMENT_OVERHEAD_BYTES` and its column specs.
pub(crate) struct PreparedCache {
    cache: Mutex<Cache>,
    capacity_bytes: u64,
}

impl PreparedCache {
    pub(crate) fn new(capacity_bytes: u64) -> PreparedCache {
        PreparedCache {
            cache: Mutex::new(Cache {
                entries: HashMap::default(),
                size_bytes: 0,
                clock: 0,
            }),
            capacity_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn get(&self, id: &[u8]) -> Option<Arc<PreparedInfo>> {
        let mut cache = self.lock();
        cache.clock += 1;
        let now = cache.clock;
        let entry = cache.entries.get_mut(id)?;
        entry.last_used = now;
        Some(entry.statement.clone())
    }

    pub(crate) fn get_by_text(
        &self,
        text: &str,
        keyspace: Option<&str>,
    ) -> Option<Arc<PreparedInfo>> {
        self.get(&statement_id(text, keyspace))
    }

    /// The bytes a statement of `text` would take in the cache, refused (as by Cassandra) if
    /// over the whole cache. Checked before the statement is analysed.
    pub(crate) fn admit(&self, text: &str) -> Result<(), QueryError> {
        let size = 2 * text.len() as u64 + STATEMENT_OVERHEAD_BYTES;
        if size > self.capacity_bytes {
            // Cassandra shows the first 200 characters of the statement.
            let shown: String = text.chars().take(200).collect();
            return Err(QueryError::Invalid(format!(
                "Prepared statement of size {size} bytes is larger than allowed maximum of {} MB: {shown}...",
                self.capacity_bytes >> 20
            )));
        }
        Ok(())
    }

    /// Caches a statement prepared from `text`, evicting the least recently used ones while
    /// the cache is over its bound.
    pub(crate) fn insert(&self, prepared: PreparedInfo, text: &str) -> Arc<PreparedInfo> {
        let specs = |specs: &[ColumnSpec]| -> u64 {
            specs
                .iter()
                .map(|c| (64 + c.keyspace.len() + c.table.len() + c.name.len()) as u64)
                .sum()
        };
        let size_bytes = 2 * text.len() as u64
            + STATEMENT_OVERHEAD_BYTES
            + specs(&prepared.bind_specs)
            + specs(&prepared.result_columns);
        let statement = Arc::new(prepared);
        let mut cache = self.lock();
        cache.clock += 1;
        let entry = Entry {
            statement: statement.clone(),
            size_bytes,
            last_used: cache.clock,
        };
        if let Some(old) = cache.entries.insert(statement.id.clone(), entry) {
            cache.size_bytes -= old.size_bytes;
        }
        cache.size_bytes += size_bytes;
        if cache.size_bytes > self.capacity_bytes {
            // Down to nine tenths, so that one sort of the entries (under the lock every
            // EXECUTE takes) makes room for many inserts, not one: a client preparing new
            // statements one after another would otherwise sort the whole cache each time.
            let target_bytes =
                self.capacity_bytes - self.capacity_bytes / EVICTION_HEADROOM_DIVISOR;
            evict(&mut cache, target_bytes, &statement.id);
        }
        statement
    }

    /// Forgets every statement after a schema change that can invalidate one (ALTER/DROP), so
    /// the next EXECUTE gets UNPREPARED and the driver re-prepares against the new schema, as it
    /// would after Cassandra drops the statements of a changed table.
    pub(crate) fn clear(&self) {
        let mut cache = self.lock();
        cache.entries.clear();
        cache.size_bytes = 0;
    }
}

/// An eviction leaves the cache this fraction (1/N) below its bound (see `insert`).
const EVICTION_HEADROOM_DIVISOR: u64 = 10;

/// Evicts the least recently used statements but `keep` until the cache is within
/// `capacity_bytes`. Sorts the entries once per eviction (inserts are rare next to lookups,
/// which so only set a tick).
fn evict(cache: &mut Cache, capacity_bytes: u64, keep: &Bytes) {
    let mut by_age: Vec<(u64, Bytes)> = cache
        .entries
        .iter()
        .filter(|(id, _)| *id != keep)
        .map(|(id, e)| (e.last_used, id.clone()))
        .collect();
    by_age.sort_unstable_by_key(|(last_used, _)| *last_used);
    for (_, id) in by_age {
        if cache.size_bytes <= capacity_bytes {
            break;
        }
        if let Some(old) = cache.entries.remove(&id) {
            cache.size_bytes -= old.size_bytes;
        }
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
