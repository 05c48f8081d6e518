//! Time-based UUIDs made on this node (`now()`, list element paths) and the clock in
//! milliseconds: unique and increasing on this node. Depends on nothing else in this crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Offset between the UUID epoch (1582-10-15) and the Unix epoch, in 100 ns units.
const UUID_EPOCH_OFFSET_100NS: u64 = 0x01B2_1DD2_1381_4000;

/// Last 100 ns tick handed out, so that timeuuids made on this node are unique and increasing.
static LAST_TIMEUUID_TICKS: AtomicU64 = AtomicU64::new(0);

/// A version-1 (time-based) UUID for `now()`, unique on this node: the 100 ns tick is made
/// strictly increasing, and the node field is random per process.
pub(crate) fn new_timeuuid() -> uuid::Uuid {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 / 100)
        .unwrap_or(0)
        + UUID_EPOCH_OFFSET_100NS;
    let mut last = LAST_TIMEUUID_TICKS.load(Ordering::Relaxed);
    let ticks = loop {
        let next = if now > last { now } else { last + 1 };
        match LAST_TIMEUUID_TICKS.compare_exchange_weak(
            last,
            next,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => break next,
            Err(actual) => last = actual,
        }
    };
    timeuuid_from_ticks(ticks, node_bits())
}

/// Cassandra's list prepend reference time, 2010-01-01T00:00:00Z, in 100 ns ticks since the
/// UUID epoch (`PrecisionTime.REFERENCE_TIME`).
const PREPEND_REFERENCE_TICKS: u64 = 1_262_304_000_000 * 10_000 + UUID_EPOCH_OFFSET_100NS;
/// The first tick of the last block `prepend_timeuuids` handed out (u64::MAX: none yet).
static LAST_PREPEND_TICKS: AtomicU64 = AtomicU64::new(u64::MAX);

/// `n` timeuuids, increasing, for list elements prepended now: mirrored around 2010-01-01 so
/// that the later a prepend, the earlier its times, hence before every element of earlier
/// prepends and appends (which use the current time). Consecutive blocks never overlap.
pub(crate) fn prepend_timeuuids(n: usize) -> Vec<uuid::Uuid> {
    let n = n as u64;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64 / 100)
        .unwrap_or(0)
        + UUID_EPOCH_OFFSET_100NS;
    let mirrored =
        PREPEND_REFERENCE_TICKS.saturating_sub(now.saturating_sub(PREPEND_REFERENCE_TICKS));
    let mut last = LAST_PREPEND_TICKS.load(Ordering::Relaxed);
    let first = loop {
        // The block [first, first + n) must end before the previous block's first tick.
        let end = mirrored.min(last.saturating_sub(1));
        let first = end.saturating_sub(n.saturating_sub(1));
        match LAST_PREPEND_TICKS.compare_exchange_weak(
            last,
            first,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => break first,
            Err(actual) => last = actual,
        }
    };
    (0..n)
        .map(|i| timeuuid_from_ticks(first + i, node_bits()))
        .collect()
}

fn node_bits() -> u64 {
    static NODE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NODE.get_or_init(|| {
        let r = uuid::Uuid::new_v4().as_u128() as u64;
        // clock sequence (14 bits) and node (48 bits, multicast bit set as RFC 4122 asks for
        // random node ids).
        (r & 0x3FFF_FFFF_FFFF_FFFF) | 0x0000_0100_0000_0000
    })
}

pub(crate) fn timeuuid_from_ticks(ticks: u64, clock_and_node: u64) -> uuid::Uuid {
    let time_low = ticks & 0xFFFF_FFFF;
    let time_mid = (ticks >> 32) & 0xFFFF;
    let time_hi = ((ticks >> 48) & 0x0FFF) | 0x1000;
    let msb = (time_low << 32) | (time_mid << 16) | time_hi;
    let lsb = (clock_and_node & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000;
    uuid::Uuid::from_u64_pair(msb, lsb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepended_timeuuids_sort_before_earlier_prepends_and_appends() {
        let compare = |a: &uuid::Uuid, b: &uuid::Uuid| {
            types::compare(&types::CqlType::Timeuuid, a.as_bytes(), b.as_bytes())
        };
        let appended = new_timeuuid();
        let first = prepend_timeuuids(3);
        let second = prepend_timeuuids(2);
        assert!(first.windows(2).all(|w| compare(&w[0], &w[1]).is_lt()));
        assert!(second.windows(2).all(|w| compare(&w[0], &w[1]).is_lt()));
        assert!(
            compare(&second[1], &first[0]).is_lt(),
            "a later prepend goes first"
        );
        assert!(compare(&first[2], &appended).is_lt());
        assert_eq!(first[0].get_version_num(), 1);
    }

    #[test]
    fn timeuuids_are_version_1_and_increasing() {
        let a = new_timeuuid();
        let b = new_timeuuid();
        assert_eq!(a.get_version_num(), 1);
        let ta = a.get_timestamp().map(|t| t.to_gregorian());
        let tb = b.get_timestamp().map(|t| t.to_gregorian());
        assert!(ta < tb);
    }
}
