//! `PartitionCache`: small partitions kept whole in memory, as their stored (merged) entries, so
//! a repeated read skips the LSM: no iterator over memtables and every level, no block cache
//! lookups, no merge of operands. ScyllaDB's row cache plays this part; Cassandra's row cache
//! is off by default, and a read there walks its memtable and SSTables each time.
//!
//! What is cached is exactly what storage holds for the partition, so any read answered from
//! it (any slice, page size or resume point) is the read `read::read_partition` would have
//! answered from the engine: the same code runs over the cached entries (`CachedPartition` is a
//! `Source`). Values are stored bytes, unpurged and with their TTLs: the caller applies
//! deletions and expiry with its own `now`, as for any read.
//!
//! Invariant: the cache never holds an entry older than an acknowledged write. Writers call
//! `apply_write` after their write is visible in the engine and before acknowledging it: it
//! merges the write's fragments into a cached partition with the engine's own merge rules
//! (`write::merge_values`; commutative and idempotent, so writers racing each other may do this
//! in any order and still agree with the engine), which keeps hot partitions cached under
//! writes. A reader that missed takes a `Ticket` *before* it reads the engine and may insert
//! what it read only if no write touched the partition's shard since (`Shard::generation`). A
//! write racing with the read therefore either is in what the reader read, or prevents the
//! insert.
//!
//! Partitions whose entries (keys and values, by the same count whether a reader loaded the
//! partition or a write grew it) exceed `max_partition_bytes` are remembered as `TooLarge`, so
//! they are not read twice per request; absent partitions are cached too (empty), as reads of keys
//! that do not exist are common (existence checks, the first read of a key). Eviction is CLOCK
//! per shard: a hit sets a bit, the hand spares an entry once per bit.

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::read::{Source, Visit, Visitor};
use crate::write::{merge_values, Fragment};
use crate::{StorageError, TableId};

const SHARDS: usize = 64;
/// Bookkeeping per cached entry (map slot, queue slot, `Vec` headers), counted with its bytes
/// so that many tiny partitions cannot exceed the budget.
const ENTRY_OVERHEAD: usize = 96;
const KV_OVERHEAD: usize = 48;

/// One partition's stored entries (full storage keys and values), in key order, in one
/// buffer: a read follows one pointer to all of it, not one per key and per value (each a
/// cache-cold allocation: those misses were most of a cached point read's time). The buffer
/// shares its allocation with its reference count, so a cache hit's clone and the read after
/// it start on the same cache line. Cloning shares the buffer.
///
/// Every key starts with the same bytes (the partition's prefix, and more when the entries
/// share it), so the index keeps, per entry, the 8 bytes of its key that follow them: a
/// bisection compares those, in the contiguous index, and reads a key itself only when they
/// tie, instead of loading a cold key at every probe.
#[derive(Debug, Clone)]
pub(crate) struct CachedPartition {
    /// `[count: u32][common: u32][count x (key end: u32, value end: u32, summary: u64)]`
    /// `[keys and values]`, native-endian. `common` is the length of the prefix every key
    /// shares; a summary is the 8 key bytes after it, big-endian, zero-padded. Ends are offsets
    /// into the keys-and-values part, where each entry's key starts at the previous entry's
    /// value end.
    buf: Arc<[u8]>,
}

impl Default for CachedPartition {
    fn default() -> CachedPartition {
        CachedPartition {
            buf: Arc::from(&[][..]),
        }
    }
}

/// Writes a buffer of a size known in advance straight into its shared allocation, front to
/// back, without zeroing it first (a time-series append rewrites a partition of up to 64 KiB).
struct Filler {
    buf: Arc<[MaybeUninit<u8>]>,
    at: usize,
}

impl Filler {
    fn new(len: usize) -> Filler {
        Filler {
            buf: Arc::new_uninit_slice(len),
            at: 0,
        }
    }

    fn put(&mut self, bytes: &[u8]) {
        let buf = Arc::get_mut(&mut self.buf).expect("a new buffer is not shared");
        let to = &mut buf[self.at..self.at + bytes.len()];
        // SAFETY: `to` is exactly `bytes.len()` bytes of a buffer only this filler can reach,
        // so it cannot overlap `bytes`; `MaybeUninit<u8>` has the layout of `u8`. (A loop of
        // `MaybeUninit::write` was not turned into a `memcpy`.)
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), to.as_mut_ptr().cast::<u8>(), bytes.len())
        };
        self.at += bytes.len();
    }

    fn finish(self) -> CachedPartition {
        assert_eq!(
            self.at,
            self.buf.len(),
            "the buffer's size was computed wrong"
        );
        // SAFETY: `put` writes the bytes from the front without gaps, and it wrote all of them.
        let buf = unsafe { self.buf.assume_init() };
        CachedPartition { buf }
    }
}

const U32: usize = std::mem::size_of::<u32>();
const HEADER: usize = 2 * U32;
const INDEX_ENTRY: usize = 2 * U32 + 8;

/// The summary of a key's bytes after the common prefix: their first 8, zero-padded. If two
/// summaries differ, their keys compare the same way (a key shorter than 8 bytes there sorts
/// before every longer one it is a prefix of, as its zero padding does).
fn summary(rest: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    let n = rest.len().min(8);
    word[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(word)
}

impl CachedPartition {
    pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> CachedPartition {
        CachedPartition::from_entries(entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))
    }

    /// Entries in strictly increasing key order, each under 4 GiB in total (cached partitions
    /// are bounded far below that).
    fn from_entries<'a>(
        entries: impl ExactSizeIterator<Item = (&'a [u8], &'a [u8])> + Clone,
    ) -> CachedPartition {
        let count = entries.len();
        let data: usize = entries.clone().map(|(k, v)| k.len() + v.len()).sum();
        // Keys are sorted, so what the first and last share, all share.
        let mut keys = entries.clone().map(|(k, _)| k);
        let common = match (keys.next(), keys.last()) {
            (Some(first), Some(last)) => first.iter().zip(last).take_while(|(a, b)| a == b).count(),
            (Some(only), None) => only.len(),
            _ => 0,
        };
        let mut buf = Filler::new(HEADER + count * INDEX_ENTRY + data);
        buf.put(&(count as u32).to_ne_bytes());
        buf.put(&(common as u32).to_ne_bytes());
        let mut end = 0usize;
        for (k, v) in entries.clone() {
            end += k.len();
            buf.put(&(end as u32).to_ne_bytes());
            end += v.len();
            buf.put(&(end as u32).to_ne_bytes());
            buf.put(&summary(&k[common..]).to_ne_bytes());
        }
        for (k, v) in entries {
            buf.put(k);
            buf.put(v);
        }
        let partition = buf.finish();
        debug_assert!((1..partition.len()).all(|i| partition.key(i - 1) < partition.key(i)));
        partition
    }

    fn u32_at(&self, at: usize) -> usize {
        let mut word = [0u8; U32];
        word.copy_from_slice(&self.buf[at..at + U32]);
        u32::from_ne_bytes(word) as usize
    }

    fn len(&self) -> usize {
        if self.buf.is_empty() {
            0 // Default
        } else {
            self.u32_at(0)
        }
    }

    fn common(&self) -> usize {
        self.u32_at(U32)
    }

    fn summary(&self, i: usize) -> u64 {
        let at = HEADER + i * INDEX_ENTRY + 2 * U32;
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.buf[at..at + 8]);
        u64::from_ne_bytes(word)
    }

    /// Offsets of entry `i` in `buf`: key start, key end (= value start), value end.
    fn bounds(&self, i: usize) -> (usize, usize, usize) {
        let data = HEADER + self.len() * INDEX_ENTRY;
        let start = if i == 0 {
            0
        } else {
            self.u32_at(HEADER + (i - 1) * INDEX_ENTRY + U32)
        };
        let key_end = self.u32_at(HEADER + i * INDEX_ENTRY);
        let value_end = self.u32_at(HEADER + i * INDEX_ENTRY + U32);
        (data + start, data + key_end, data + value_end)
    }

    fn key(&self, i: usize) -> &[u8] {
        let (start, key_end, _) = self.bounds(i);
        &self.buf[start..key_end]
    }

    fn entry(&self, i: usize) -> (&[u8], &[u8]) {
        let (start, key_end, value_end) = self.bounds(i);
        (&self.buf[start..key_end], &self.buf[key_end..value_end])
    }

    fn entries(&self) -> impl ExactSizeIterator<Item = (&[u8], &[u8])> + Clone + '_ {
        (0..self.len()).map(|i| self.entry(i))
    }

    /// The first entry whose key is not below `key` (`len()` if none).
    fn lower_bound(&self, key: &[u8]) -> usize {
        let n = self.len();
        if n == 0 {
            return 0;
        }
        let common = self.common();
        let shared = &self.key(0)[..common];
        let head = common.min(key.len());
        match key[..head].cmp(&shared[..head]) {
            std::cmp::Ordering::Less => return 0,
            std::cmp::Ordering::Greater => return n,
            // Shorter than the shared prefix and a prefix of it: below every key.
            std::cmp::Ordering::Equal if key.len() < common => return 0,
            std::cmp::Ordering::Equal => {}
        }
        let wanted = summary(&key[common..]);
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let below = match self.summary(mid).cmp(&wanted) {
                std::cmp::Ordering::Less => true,
                std::cmp::Ordering::Greater => false,
                std::cmp::Ordering::Equal => self.key(mid) < key,
            };
            if below {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// What the partition costs the cache's budget: its buffer and bookkeeping per entry.
    fn bytes(&self) -> usize {
        self.buf.len() + self.len() * KV_OVERHEAD
    }

    /// Its entries' keys and values: what `max_partition_bytes` bounds, as when a reader
    /// loads a partition (`rocks::load_partition`).
    fn data_bytes(&self) -> usize {
        self.buf
            .len()
            .saturating_sub(HEADER + self.len() * INDEX_ENTRY)
    }
}

/// How many entries `get` compares from the front before it bisects: a partition's header and
/// static row sort before its rows, so the point lookups `read_partition` makes for them end
/// here without touching the (cache-cold) keys a bisection would.
const FRONT_PROBES: usize = 2;

impl Source for CachedPartition {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let front = self.len().min(FRONT_PROBES);
        for i in 0..front {
            let (k, v) = self.entry(i);
            match key.cmp(k) {
                std::cmp::Ordering::Equal => return Ok(Some(v.to_vec())),
                std::cmp::Ordering::Less => return Ok(None),
                std::cmp::Ordering::Greater => {}
            }
        }
        let i = self.lower_bound(key);
        Ok((i < self.len() && self.key(i) == key).then(|| self.entry(i).1.to_vec()))
    }

    fn visit(
        &self,
        lower: &[u8],
        upper: Option<&[u8]>,
        reverse: bool,
        _within_partition: bool,
        f: &mut Visitor<'_>,
    ) -> Result<(), StorageError> {
        let from = self.lower_bound(lower);
        if reverse {
            let to = upper.map_or(self.len(), |u| self.lower_bound(u));
            for i in (from..to.max(from)).rev() {
                let (k, v) = self.entry(i);
                if let Visit::Stop = f(k, v)? {
                    break;
                }
            }
        } else {
            // Forward, the upper bound is checked on the keys visited anyway: a slice of a few
            // rows then costs one bisection, not two.
            for i in from..self.len() {
                let (k, v) = self.entry(i);
                if upper.is_some_and(|u| k >= u) {
                    break;
                }
                if let Visit::Stop = f(k, v)? {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// What `lookup` found.
pub(crate) enum Lookup {
    Hit(CachedPartition),
    /// Known to exceed `max_partition_bytes`: read it from the engine, do not try to cache it.
    TooLarge,
    /// Not cached: read it, then offer it to `insert` with this ticket.
    Miss(Ticket),
}

/// Proof of when a missing reader looked: its insert is refused if the shard was invalidated
/// since.
pub(crate) struct Ticket {
    generation: u64,
}

enum Cached {
    Partition(CachedPartition),
    TooLarge,
}

struct Entry {
    value: Cached,
    bytes: usize,
    referenced: bool,
}

/// A partition's key in the map. It hashes with `std`'s keyed SipHash over the whole key, not
/// as its token alone: a client can make any number of partition keys with one Murmur3 token
/// (its collisions do not depend on the seed), and keys sharing a hash would turn every probe
/// of the map into a scan of all of them.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    table: TableId,
    prefix: PrefixKey,
}

impl Key {
    fn new(table: TableId, prefix: &[u8]) -> Key {
        Key {
            table,
            prefix: PrefixKey::new(prefix),
        }
    }
}

/// Prefixes up to this long are kept inside the map's bucket: a lookup then compares keys
/// without following a pointer to another (cache-cold) allocation. A token, the key length
/// and a partition key of up to 22 bytes (a uuid, a bigint, most text ids) fit.
const INLINE_PREFIX: usize = 32;

/// A partition's storage prefix as a map key: inline when short, else on the heap. Each
/// prefix has one representation (inline exactly when it fits), so the derived `Eq` and
/// `Hash` are those of the bytes.
#[derive(Clone, PartialEq, Eq, Hash)]
enum PrefixKey {
    Inline { len: u8, bytes: [u8; INLINE_PREFIX] },
    Heap(Box<[u8]>),
}

impl PrefixKey {
    fn new(prefix: &[u8]) -> PrefixKey {
        if prefix.len() <= INLINE_PREFIX {
            let mut bytes = [0u8; INLINE_PREFIX];
            bytes[..prefix.len()].copy_from_slice(prefix);
            PrefixKey::Inline {
                len: prefix.len() as u8,
                bytes,
            }
        } else {
            PrefixKey::Heap(prefix.into())
        }
    }
}

#[derive(Default)]
struct Shard {
    /// Hashed with foldhash, seeded per map: SipHash (std's) of a key cost ~500 instructions,
    /// a fifth of a cached point read's storage work. Keys are client-chosen partition keys, so
    /// the hash stays seeded rather than, say, the token alone.
    map: HashMap<Key, Entry, foldhash::fast::RandomState>,
    /// CLOCK order: keys in insertion order; a removed key may linger here until the hand
    /// reaches it (it is skipped then).
    clock: VecDeque<Key>,
    bytes: usize,
    /// Bumped by every invalidation in this shard.
    generation: u64,
}

impl Shard {
    fn remove(&mut self, key: &Key) {
        if let Some(e) = self.map.remove(key) {
            self.bytes -= e.bytes;
        }
    }

    fn evict_to(&mut self, capacity: usize) {
        while self.bytes > capacity {
            let Some(key) = self.clock.pop_front() else {
                return;
            };
            match self.map.get_mut(&key) {
                Some(e) if e.referenced => {
                    e.referenced = false;
                    self.clock.push_back(key);
                }
                Some(_) => self.remove(&key),
                None => {} // already removed by an invalidation
            }
        }
        // Keys removed by invalidations pile up in the queue; rebuild it when they dominate.
        if self.clock.len() > 2 * self.map.len() + 64 {
            let map = &self.map;
            self.clock.retain(|k| map.contains_key(k));
        }
    }
}

/// `partition` with `fragments` (keyed, encoded; in key order or not) merged in by the
/// engine's rules; `None` if a value does not merge (it does not decode).
fn merge_into(partition: &CachedPartition, fragments: &[Fragment]) -> Option<CachedPartition> {
    if let [(key, value)] = fragments {
        if let Some(spliced) = splice_one(partition, key, value) {
            return Some(spliced);
        }
    }
    rebuild_with(partition, fragments)
}

/// `fragments` merged into `partition` entry by entry, into a new buffer.
fn rebuild_with(partition: &CachedPartition, fragments: &[Fragment]) -> Option<CachedPartition> {
    let mut entries: Vec<(&[u8], std::borrow::Cow<'_, [u8]>)> = partition
        .entries()
        .map(|(k, v)| (k, std::borrow::Cow::Borrowed(v)))
        .collect();
    for (k, v) in fragments {
        match entries.binary_search_by(|(e, _)| (*e).cmp(k.as_slice())) {
            Ok(i) => {
                let merged = merge_values(k, [entries[i].1.as_ref(), v.as_slice()]).ok()?;
                entries[i].1 = std::borrow::Cow::Owned(merged);
            }
            Err(i) => entries.insert(i, (k.as_slice(), std::borrow::Cow::Borrowed(v.as_slice()))),
        }
    }
    Some(CachedPartition::from_entries(
        entries.iter().map(|(k, v)| (*k, v.as_ref())),
    ))
}

/// One fragment merged into `partition` by splicing its buffer: the entries before and after
/// it are copied as they are, with their ends shifted, instead of rebuilding the partition
/// entry by entry (a time-series append into a 60 KiB partition cost about 20 us that way).
/// The result is byte for byte what `from_entries` builds. `None` if the partition has no
/// entries, if `key` does not start with the prefix all its keys share (every summary would
/// change), or if the values do not merge.
fn splice_one(partition: &CachedPartition, key: &[u8], value: &[u8]) -> Option<CachedPartition> {
    let n = partition.len();
    let common = partition.common();
    if n == 0 || key.get(..common)? != &partition.key(0)[..common] {
        return None;
    }
    let i = partition.lower_bound(key);
    let data = HEADER + n * INDEX_ENTRY;
    let replace = i < n && partition.key(i) == key;
    let (start, end, merged) = if replace {
        let (start, key_end, end) = partition.bounds(i);
        let merged = merge_values(key, [&partition.buf[key_end..end], value]).ok()?;
        (start, end, std::borrow::Cow::Owned(merged))
    } else {
        let at = if i == 0 {
            data
        } else {
            partition.bounds(i - 1).2
        };
        (at, at, std::borrow::Cow::Borrowed(value))
    };
    let added = key.len() + merged.len();
    let removed = end - start;
    let count = if replace { n } else { n + 1 };
    let mut buf =
        Filler::new(HEADER + count * INDEX_ENTRY + partition.buf.len() - data + added - removed);
    buf.put(&(count as u32).to_ne_bytes());
    buf.put(&(common as u32).to_ne_bytes());
    buf.put(&partition.buf[HEADER..HEADER + i * INDEX_ENTRY]);
    let relative = start - data;
    buf.put(&((relative + key.len()) as u32).to_ne_bytes());
    buf.put(&((relative + added) as u32).to_ne_bytes());
    buf.put(&summary(&key[common..]).to_ne_bytes());
    let shift = |end: usize| ((end + added - removed) as u32).to_ne_bytes();
    for j in (if replace { i + 1 } else { i })..n {
        let at = HEADER + j * INDEX_ENTRY;
        buf.put(&shift(partition.u32_at(at)));
        buf.put(&shift(partition.u32_at(at + U32)));
        buf.put(&partition.buf[at + 2 * U32..at + INDEX_ENTRY]);
    }
    buf.put(&partition.buf[data..start]);
    buf.put(key);
    buf.put(&merged);
    buf.put(&partition.buf[end..]);
    Some(buf.finish())
}

/// See the module documentation.
pub(crate) struct PartitionCache {
    shards: Vec<Mutex<Shard>>,
    shard_capacity: usize,
    max_partition_bytes: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl PartitionCache {
    /// A cache of at most about `capacity_bytes`, keeping partitions of at most
    /// `max_partition_bytes` (their entries' keys and values).
    pub(crate) fn new(capacity_bytes: usize, max_partition_bytes: usize) -> PartitionCache {
        PartitionCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_capacity: capacity_bytes / SHARDS,
            max_partition_bytes: max_partition_bytes.min(capacity_bytes / SHARDS),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    pub(crate) fn max_partition_bytes(&self) -> usize {
        self.max_partition_bytes
    }

    /// The shard of a partition: its token (the prefix's first 8 bytes) is already a uniform
    /// hash.
    fn shard(&self, prefix: &[u8]) -> MutexGuard<'_, Shard> {
        let mut token = [0u8; 8];
        let n = prefix.len().min(8);
        token[..n].copy_from_slice(&prefix[..n]);
        let i = (u64::from_be_bytes(token) % SHARDS as u64) as usize;
        self.shards[i]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached partition with this storage prefix (`keys::partition_prefix`).
    pub(crate) fn lookup(&self, table: TableId, prefix: &[u8]) -> Lookup {
        let mut shard = self.shard(prefix);
        let key = Key::new(table, prefix);
        match shard.map.get_mut(&key) {
            Some(e) => {
                e.referenced = true;
                self.hits.fetch_add(1, Ordering::Relaxed);
                match &e.value {
                    Cached::Partition(p) => Lookup::Hit(p.clone()),
                    Cached::TooLarge => Lookup::TooLarge,
                }
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                Lookup::Miss(Ticket {
                    generation: shard.generation,
                })
            }
        }
    }

    /// Caches what a reader read after `lookup` gave it `ticket`, unless the partition's shard
    /// was invalidated since. `None`: the partition exceeded `max_partition_bytes`.
    pub(crate) fn insert(
        &self,
        table: TableId,
        prefix: &[u8],
        ticket: Ticket,
        partition: Option<CachedPartition>,
    ) {
        let (value, bytes) = match partition {
            Some(p) => {
                let bytes = p.bytes() + prefix.len() + ENTRY_OVERHEAD;
                (Cached::Partition(p), bytes)
            }
            None => (Cached::TooLarge, prefix.len() + ENTRY_OVERHEAD),
        };
        let mut shard = self.shard(prefix);
        if shard.generation != ticket.generation || bytes > self.shard_capacity {
            return;
        }
        let key = Key::new(table, prefix);
        shard.remove(&key);
        shard.bytes += bytes;
        shard.map.insert(
            key.clone(),
            Entry {
                value,
                bytes,
                referenced: false,
            },
        );
        shard.clock.push_back(key);
        let capacity = self.shard_capacity;
        shard.evict_to(capacity);
    }

    /// Brings a cached partition up to date with a write of `fragments` (its keyed, encoded
    /// fragments, in key order or not), or forgets it if `fragments` is `None` (a write whose
    /// fragments are unknown, or failed). Called after every write to the partition is visible
    /// in the engine, before the write is acknowledged.
    pub(crate) fn apply_write(
        &self,
        table: TableId,
        prefix: &[u8],
        fragments: Option<&[Fragment]>,
    ) {
        let mut shard = self.shard(prefix);
        shard.generation += 1;
        let key = Key::new(table, prefix);
        let Some(entry) = shard.map.get_mut(&key) else {
            return;
        };
        let Cached::Partition(cached) = &mut entry.value else {
            return; // TooLarge stays a hint: such a partition is read from the engine.
        };
        // Into a new buffer, swapped in whole: a reader holding the old one keeps what it
        // read. On a failed merge nothing is swapped in and the partition is dropped below.
        let merged = match fragments.and_then(|fragments| merge_into(cached, fragments)) {
            Some(partition) => {
                *cached = partition;
                true
            }
            None => false,
        };
        // The limit counts keys and values, as a reader's load does: a partition that a read
        // would cache again must not be dropped by a write (each append to one near the limit
        // cost a reload of the whole partition on the next read).
        if merged && cached.data_bytes() <= self.max_partition_bytes {
            let bytes = cached.bytes();
            let bytes = bytes + prefix.len() + ENTRY_OVERHEAD;
            let old = std::mem::replace(&mut entry.bytes, bytes);
            shard.bytes = shard.bytes + bytes - old;
            let capacity = self.shard_capacity;
            shard.evict_to(capacity);
        } else if merged {
            // Grown past the limit: remembered, so that no reader loads it to find out.
            let bytes = prefix.len() + ENTRY_OVERHEAD;
            let old = std::mem::replace(&mut entry.bytes, bytes);
            entry.value = Cached::TooLarge;
            shard.bytes = shard.bytes + bytes - old;
        } else {
            shard.remove(&key);
        }
    }

    /// Forgets every partition of the table (truncate, drop, compaction).
    pub(crate) fn invalidate_table(&self, table: TableId) {
        for shard in &self.shards {
            let mut shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            shard.generation += 1;
            let gone: Vec<Key> = shard
                .map
                .keys()
                .filter(|key| key.table == table)
                .cloned()
                .collect();
            for key in &gone {
                shard.remove(key);
            }
        }
    }

    /// `(hits, misses, bytes, partitions)` since start.
    pub(crate) fn stats(&self) -> (u64, u64, u64, u64) {
        let (mut bytes, mut partitions) = (0u64, 0u64);
        for shard in &self.shards {
            let shard = shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            bytes += shard.bytes as u64;
            partitions += shard.map.len() as u64;
        }
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
            bytes,
            partitions,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> TableId {
        TableId::from_u128(7)
    }

    fn prefix(token: u8, key: &[u8]) -> Vec<u8> {
        let mut p = vec![token; 8];
        p.extend_from_slice(&(key.len() as u16).to_be_bytes());
        p.extend_from_slice(key);
        p
    }

    fn partition(n: usize) -> CachedPartition {
        CachedPartition::new((0..n).map(|i| (vec![i as u8], vec![0u8; 10])).collect())
    }

    fn ticket(cache: &PartitionCache, p: &[u8]) -> Ticket {
        match cache.lookup(table(), p) {
            Lookup::Miss(t) => t,
            _ => panic!("expected a miss"),
        }
    }

    #[test]
    fn insert_then_hit_then_invalidate() {
        let cache = PartitionCache::new(1 << 20, 1 << 16);
        // Prefixes kept in the map's bucket and on the heap, and one on each side of the bound.
        let short = INLINE_PREFIX - 10;
        for len in [1, short, short + 1, 40] {
            let key = vec![b'a'; len];
            let p = prefix(1, &key);
            let t = ticket(&cache, &p);
            cache.insert(table(), &p, t, Some(partition(3)));
            assert!(matches!(cache.lookup(table(), &p), Lookup::Hit(c) if c.len() == 3));
            assert!(matches!(
                cache.lookup(TableId::from_u128(8), &p),
                Lookup::Miss(_)
            ));
            // A different key of the same length, and a prefix of the key, are other partitions.
            let mut other = key.clone();
            other[len - 1] = b'b';
            assert!(matches!(
                cache.lookup(table(), &prefix(1, &other)),
                Lookup::Miss(_)
            ));
            assert!(matches!(
                cache.lookup(table(), &p[..p.len() - 1]),
                Lookup::Miss(_)
            ));
            cache.apply_write(table(), &p, None);
            assert!(matches!(cache.lookup(table(), &p), Lookup::Miss(_)));
        }
    }

    #[test]
    fn a_write_during_the_read_prevents_the_insert() {
        let cache = PartitionCache::new(1 << 20, 1 << 16);
        let p = prefix(1, b"a");
        let t = ticket(&cache, &p);
        // A writer changes the partition after the reader looked and before it inserts what
        // it read, which may predate the write.
        cache.apply_write(table(), &p, Some(&[]));
        cache.insert(table(), &p, t, Some(partition(1)));
        assert!(matches!(cache.lookup(table(), &p), Lookup::Miss(_)));
        // Tables are invalidated whole too.
        let t = ticket(&cache, &p);
        cache.invalidate_table(table());
        cache.insert(table(), &p, t, None);
        assert!(matches!(cache.lookup(table(), &p), Lookup::Miss(_)));
    }

    #[test]
    fn too_large_is_remembered_and_stays_within_budget() {
        let cache = PartitionCache::new(64 * 4096, 1024);
        let p = prefix(2, b"big");
        let t = ticket(&cache, &p);
        cache.insert(table(), &p, t, None);
        assert!(matches!(cache.lookup(table(), &p), Lookup::TooLarge));
        assert_eq!(cache.max_partition_bytes(), 1024);
    }

    #[test]
    fn eviction_keeps_each_shard_within_its_capacity_and_spares_hot_entries() {
        let cache = PartitionCache::new(SHARDS * 2000, 1 << 16);
        // All in one shard (same token byte), each about 400 bytes: five fit.
        let hot = prefix(3, b"hot");
        let t = ticket(&cache, &hot);
        cache.insert(table(), &hot, t, Some(partition(2)));
        for i in 0..50u8 {
            assert!(matches!(cache.lookup(table(), &hot), Lookup::Hit(_)));
            let p = prefix(3, &[i]);
            let t = ticket(&cache, &p);
            cache.insert(table(), &p, t, Some(partition(2)));
        }
        let (hits, _, bytes, partitions) = cache.stats();
        assert!(bytes <= 2000, "{bytes} bytes cached");
        assert!(partitions >= 2);
        assert_eq!(hits, 50);
        assert!(matches!(cache.lookup(table(), &hot), Lookup::Hit(_)));
    }

    /// The stored fragments of writing `value` at `ts` to clustering row `[ck]` of partition `p`.
    fn write_of(p: &crate::PartitionKey, ck: u8, ts: i64, value: &[u8]) -> Vec<Fragment> {
        let row = mutation::Row {
            columns: vec![mutation::ColumnData::Simple {
                id: 1,
                cell: mutation::Cell::live(ts, value.to_vec()),
            }],
            ..mutation::Row::default()
        };
        crate::write::fragments(&crate::PartitionUpdate {
            table: table(),
            key: p.clone(),
            header: None,
            static_row: None,
            rows: vec![(vec![ck], row)],
        })
        .unwrap()
    }

    fn cell_of(partition: &CachedPartition, i: usize) -> (i64, Vec<u8>) {
        let row = mutation::decode_row(partition.entry(i).1).unwrap();
        match row.column(1) {
            Some(mutation::ColumnData::Simple { cell, .. }) => {
                (cell.timestamp, cell.live_value(0).unwrap().to_vec())
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn writes_merge_into_the_cached_partition_and_never_into_a_readers_copy() {
        let cache = PartitionCache::new(1 << 20, 1 << 16);
        let key = crate::PartitionKey {
            token: 5,
            key: b"w".to_vec(),
        };
        let p = crate::keys::partition_prefix(&key).unwrap();
        let stored = write_of(&key, 1, 10, b"ten");
        let t = ticket(&cache, &p);
        cache.insert(table(), &p, t, Some(CachedPartition::new(stored)));
        let Lookup::Hit(held) = cache.lookup(table(), &p) else {
            panic!("expected a hit")
        };
        // A newer value for row 1, an older one that loses, and a new row 0 before it.
        cache.apply_write(table(), &p, Some(&write_of(&key, 1, 20, b"twenty")));
        cache.apply_write(table(), &p, Some(&write_of(&key, 1, 5, b"five")));
        cache.apply_write(table(), &p, Some(&write_of(&key, 0, 1, b"zero")));
        let Lookup::Hit(now) = cache.lookup(table(), &p) else {
            panic!("expected a hit")
        };
        assert_eq!(now.len(), 2);
        assert_eq!(cell_of(&now, 0), (1, b"zero".to_vec()));
        assert_eq!(cell_of(&now, 1), (20, b"twenty".to_vec()));
        // The reader that held the partition before the writes still sees what it read.
        assert_eq!(held.len(), 1);
        assert_eq!(cell_of(&held, 0), (10, b"ten".to_vec()));
        // A write that outgrows the partition limit leaves it known to be too large.
        let big = write_of(&key, 2, 1, &vec![0u8; 1 << 16]);
        cache.apply_write(table(), &p, Some(&big));
        assert!(matches!(cache.lookup(table(), &p), Lookup::TooLarge));
    }

    #[test]
    fn the_limit_a_write_checks_is_the_one_a_load_checks() {
        // Entries whose keys and values fit the limit, as `load_partition` counts them, though
        // the buffer's index and bookkeeping take it over: a write must keep it cached, or
        // every write would make the next read load the whole partition again.
        let key = crate::PartitionKey {
            token: 3,
            key: b"near".to_vec(),
        };
        let p = crate::keys::partition_prefix(&key).unwrap();
        let rows: Vec<Fragment> = (0..200)
            .flat_map(|ck| write_of(&key, ck, 1, &[7u8; 200]))
            .collect();
        let data: usize = rows.iter().map(|(k, v)| k.len() + v.len()).sum();
        let limit = data + 100;
        let cache = PartitionCache::new(SHARDS << 20, limit);
        let loaded = CachedPartition::new(rows);
        assert_eq!(loaded.data_bytes(), data);
        assert!(loaded.bytes() > limit);
        let t = ticket(&cache, &p);
        cache.insert(table(), &p, t, Some(loaded));
        cache.apply_write(table(), &p, Some(&write_of(&key, 3, 2, &[8u8; 200])));
        let Lookup::Hit(now) = cache.lookup(table(), &p) else {
            panic!("a write within the limit dropped the partition")
        };
        assert_eq!(cell_of(&now, 3), (2, vec![8u8; 200]));
    }

    #[test]
    fn the_one_buffer_layout_gives_back_every_entry() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"a".to_vec(), Vec::new()),
            (b"ab".to_vec(), vec![7; 300]),
            (b"b".to_vec(), b"x".to_vec()),
            (vec![b'c'; 70], vec![9; 3]),
        ];
        let p = CachedPartition::new(entries.clone());
        assert_eq!(p.len(), entries.len());
        for (i, (k, v)) in entries.iter().enumerate() {
            assert_eq!(p.entry(i), (k.as_slice(), v.as_slice()));
            assert_eq!(p.get(k).unwrap().as_ref(), Some(v));
            assert_eq!(p.lower_bound(k), i);
        }
        assert_eq!(p.lower_bound(b"aa"), 1);
        assert_eq!(p.lower_bound(b"d"), 4);
        assert_eq!(p.bytes(), p.buf.len() + 4 * KV_OVERHEAD);
        for empty in [CachedPartition::default(), CachedPartition::new(Vec::new())] {
            assert_eq!(empty.len(), 0);
            assert_eq!(empty.get(b"a").unwrap(), None);
            let mut visited = 0;
            empty
                .visit(b"", None, false, true, &mut |_, _| {
                    visited += 1;
                    Ok(Visit::Continue)
                })
                .unwrap();
            assert_eq!(visited, 0);
        }
    }

    /// A deterministic generator of numbers below a bound (xorshift), seeded per test.
    fn xorshift(mut state: u64) -> impl FnMut(u64) -> u64 {
        move |bound| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        }
    }

    #[test]
    fn bisection_on_key_summaries_agrees_with_comparing_whole_keys() {
        // Keys over a tiny alphabet with zero bytes, of many lengths, sharing prefixes of many
        // lengths: summaries tie (a key and the same key with zeros appended), and keys end
        // inside, at and past the 8 summarised bytes.
        let mut next = xorshift(0x2545_f491_4f6c_dd1d_u64);
        for round in 0..300 {
            let shared: Vec<u8> = (0..next(12)).map(|_| next(3) as u8).collect();
            let mut keys: Vec<Vec<u8>> = (0..1 + next(40))
                .map(|_| {
                    let mut k = shared.clone();
                    k.extend((0..next(14)).map(|_| next(3) as u8));
                    k
                })
                .collect();
            keys.sort();
            keys.dedup();
            let p = CachedPartition::new(keys.iter().map(|k| (k.clone(), vec![1])).collect());
            for _ in 0..60 {
                let probe: Vec<u8> = if next(2) == 0 {
                    let mut k = keys[next(keys.len() as u64) as usize].clone();
                    k.truncate(next(k.len() as u64 + 1) as usize);
                    k.extend((0..next(4)).map(|_| next(3) as u8));
                    k
                } else {
                    (0..next(20)).map(|_| next(3) as u8).collect()
                };
                let expected = keys.partition_point(|k| *k < probe);
                assert_eq!(
                    p.lower_bound(&probe),
                    expected,
                    "round {round}: {probe:?} in {keys:?}"
                );
            }
        }
    }

    #[test]
    fn splicing_one_fragment_builds_what_a_rebuild_builds() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15_u64);
        // New keys (their values are not merged, so any bytes do): sharing the partition's
        // prefix or not, anywhere in its order, into partitions of one entry and more.
        let (mut spliced, mut declined) = (0, 0);
        for _ in 0..300 {
            let shared: Vec<u8> = (0..next(10)).map(|_| next(3) as u8).collect();
            let mut keys: Vec<Vec<u8>> = (0..1 + next(30))
                .map(|_| {
                    let mut k = shared.clone();
                    k.extend((0..next(12)).map(|_| next(3) as u8));
                    k
                })
                .collect();
            keys.sort();
            keys.dedup();
            let entries: Vec<(Vec<u8>, Vec<u8>)> = keys
                .iter()
                .map(|k| (k.clone(), vec![next(256) as u8; next(20) as usize]))
                .collect();
            let p = CachedPartition::new(entries);
            for _ in 0..20 {
                let key: Vec<u8> = if next(4) == 0 {
                    (0..next(16)).map(|_| next(3) as u8).collect()
                } else {
                    let mut k = shared.clone();
                    k.extend((0..next(14)).map(|_| next(3) as u8));
                    k
                };
                if keys.contains(&key) {
                    continue;
                }
                let fragment = vec![(key, vec![next(256) as u8; next(30) as usize])];
                let rebuilt = rebuild_with(&p, &fragment).unwrap();
                match splice_one(&p, &fragment[0].0, &fragment[0].1) {
                    Some(s) => {
                        spliced += 1;
                        assert_eq!(s.buf, rebuilt.buf, "{fragment:?} into {keys:?}");
                    }
                    None => {
                        declined += 1;
                        assert!(!fragment[0].0.starts_with(&p.key(0)[..p.common()]));
                    }
                }
            }
        }
        assert!(spliced > 1000 && declined > 100, "{spliced} {declined}");
        // Rows written again: their values merge with the stored ones.
        let key = crate::PartitionKey {
            token: 9,
            key: b"s".to_vec(),
        };
        let stored: Vec<Fragment> = (0..12)
            .flat_map(|ck| write_of(&key, ck * 2, 10, &vec![ck; ck as usize]))
            .collect();
        let p = CachedPartition::new(stored);
        for ck in 0..24 {
            for ts in [5, 10, 20] {
                let fragment = write_of(&key, ck, ts, &[ck; 3]);
                let rebuilt = rebuild_with(&p, &fragment).unwrap();
                let spliced = splice_one(&p, &fragment[0].0, &fragment[0].1).unwrap();
                assert_eq!(spliced.buf, rebuilt.buf, "row {ck} at {ts}");
            }
        }
    }

    #[test]
    fn visit_and_get_follow_key_order_and_bounds() {
        let p = CachedPartition::new(
            [1u8, 3, 5, 7]
                .iter()
                .map(|&k| (vec![k], vec![k * 10]))
                .collect(),
        );
        assert_eq!(p.get(&[5]).unwrap(), Some(vec![50]));
        assert_eq!(p.get(&[4]).unwrap(), None);
        // Keys found or missed by the front probes and by the bisection after them.
        assert_eq!(p.get(&[1]).unwrap(), Some(vec![10]));
        assert_eq!(p.get(&[3]).unwrap(), Some(vec![30]));
        assert_eq!(p.get(&[7]).unwrap(), Some(vec![70]));
        assert_eq!(p.get(&[0]).unwrap(), None);
        assert_eq!(p.get(&[2]).unwrap(), None);
        assert_eq!(p.get(&[8]).unwrap(), None);
        assert_eq!(CachedPartition::new(Vec::new()).get(&[1]).unwrap(), None);
        let collect = |lower: &[u8], upper: Option<&[u8]>, reverse: bool, stop_after: usize| {
            let mut seen = Vec::new();
            p.visit(lower, upper, reverse, true, &mut |k, _| {
                seen.push(k[0]);
                Ok(if seen.len() == stop_after {
                    Visit::Stop
                } else {
                    Visit::Continue
                })
            })
            .unwrap();
            seen
        };
        assert_eq!(collect(&[2], Some(&[7]), false, 10), vec![3, 5]);
        assert_eq!(collect(&[2], Some(&[7]), true, 10), vec![5, 3]);
        assert_eq!(collect(&[], None, false, 2), vec![1, 3]);
        assert_eq!(collect(&[8], Some(&[2]), false, 10), Vec::<u8>::new());
        assert_eq!(collect(&[4], Some(&[2]), false, 10), Vec::<u8>::new());
        assert_eq!(collect(&[4], Some(&[2]), true, 10), Vec::<u8>::new());
        assert_eq!(collect(&[3], Some(&[5]), false, 10), vec![3]);
        assert_eq!(collect(&[3], Some(&[5]), true, 10), vec![3]);
        assert_eq!(collect(&[0], Some(&[9]), true, 2), vec![7, 5]);
    }
}
