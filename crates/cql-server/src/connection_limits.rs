//! The caps on open connections: Cassandra's `native_transport_max_concurrent_connections`
//! and `native_transport_max_concurrent_connections_per_ip`, enforced as Cassandra's
//! `ConnectionLimitHandler` does: a connection past a cap is closed as soon as it is accepted
//! (the client sees the connection closed), with a warning in the log.
//!
//! Every connection holds a file descriptor, which the storage engine needs too (its commit
//! log, data files and directories): without a cap, idle connections took every descriptor and
//! storage failed. The node derives the total cap from its descriptor limit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// At most one warning about refused connections per this interval (each counts the refusals
/// since the last): a client retrying in a loop must not flood the log.
const REFUSAL_WARNING_INTERVAL: Duration = Duration::from_secs(1);

pub(crate) struct ConnectionLimits {
    max_total: usize,
    /// `None`: no cap per client address.
    max_per_ip: Option<usize>,
    open: AtomicUsize,
    /// Open connections per client address, kept only with a cap per address; an address
    /// leaves the map with its last connection.
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    /// Connections refused since the last warning, and when that warning was.
    refused_since_warning: AtomicU64,
    last_warning: Mutex<Option<Instant>>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The node-wide cap: the limit, and the connections open counting this one.
    Total { limit: usize, open: usize },
    /// The cap per client address.
    PerIp { limit: usize, open: usize },
}

/// An admitted connection's place under the caps, given back when dropped.
pub(crate) struct Admitted {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub(crate) fn new(max_total: usize, max_per_ip: Option<usize>) -> ConnectionLimits {
        ConnectionLimits {
            max_total,
            max_per_ip,
            open: AtomicUsize::new(0),
            per_ip: Mutex::new(HashMap::new()),
            refused_since_warning: AtomicU64::new(0),
            last_warning: Mutex::new(None),
        }
    }

    fn per_ip(&self) -> MutexGuard<'_, HashMap<IpAddr, usize>> {
        // Counts only: a panic elsewhere cannot leave them inconsistent.
        self.per_ip
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Admits a connection from `ip`, or says which cap it is past (and counts it nowhere).
    pub(crate) fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refusal> {
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        if open > self.max_total {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Total {
                limit: self.max_total,
                open,
            });
        }
        if let Some(limit) = self.max_per_ip {
            let mut per_ip = self.per_ip();
            let count = per_ip.entry(ip).or_insert(0);
            if *count >= limit {
                let open = *count + 1;
                if *count == 0 {
                    per_ip.remove(&ip);
                }
                drop(per_ip);
                self.open.fetch_sub(1, Ordering::AcqRel);
                return Err(Refusal::PerIp { limit, open });
            }
            *count += 1;
        }
        Ok(Admitted {
            limits: self.clone(),
            ip,
        })
    }

    /// Logs a refusal, at most once per `REFUSAL_WARNING_INTERVAL`.
    pub(crate) fn warn(&self, refusal: Refusal, peer: std::net::SocketAddr) {
        let refused = self.refused_since_warning.fetch_add(1, Ordering::Relaxed) + 1;
        let now = Instant::now();
        let mut last = self
            .last_warning
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.is_some_and(|at| now.duration_since(at) < REFUSAL_WARNING_INTERVAL) {
            return;
        }
        *last = Some(now);
        self.refused_since_warning
            .fetch_sub(refused, Ordering::Relaxed);
        match refusal {
            Refusal::Total { limit, open } => tracing::warn!(
                %peer,
                refused,
                "Exceeded maximum native connection limit of {limit} by using {open} \
                 connections (native_transport_max_concurrent_connections); closed"
            ),
            Refusal::PerIp { limit, open } => tracing::warn!(
                %peer,
                refused,
                "Exceeded maximum native connection limit per ip of {limit} by using {open} \
                 connections (native_transport_max_concurrent_connections_per_ip); closed"
            ),
        }
    }

    #[cfg(test)]
    fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if self.limits.max_per_ip.is_some() {
            let mut per_ip = self.limits.per_ip();
            if let Some(count) = per_ip.get_mut(&self.ip) {
                *count -= 1;
                if *count == 0 {
                    per_ip.remove(&self.ip);
                }
            }
        }
        self.limits.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn connections_past_the_total_cap_are_refused_until_one_closes() {
        let limits = Arc::new(ConnectionLimits::new(2, None));
        let first = limits.admit(ip(1)).expect("first");
        let _second = limits.admit(ip(2)).expect("second");
        assert_eq!(
            limits.admit(ip(3)).err(),
            Some(Refusal::Total { limit: 2, open: 3 })
        );
        assert_eq!(limits.open(), 2, "a refused connection is not counted");
        drop(first);
        let _third = limits.admit(ip(3)).expect("a place was freed");
        assert_eq!(limits.open(), 2);
    }

    #[test]
    fn the_cap_per_address_counts_each_address_alone() {
        let limits = Arc::new(ConnectionLimits::new(10, Some(2)));
        let a1 = limits.admit(ip(1)).expect("a1");
        let _a2 = limits.admit(ip(1)).expect("a2");
        assert_eq!(
            limits.admit(ip(1)).err(),
            Some(Refusal::PerIp { limit: 2, open: 3 })
        );
        let _b1 = limits.admit(ip(2)).expect("another address");
        assert_eq!(limits.open(), 3);
        drop(a1);
        let _a3 = limits.admit(ip(1)).expect("a place was freed");
        assert_eq!(limits.per_ip().get(&ip(1)), Some(&2));
        drop(_b1);
        assert_eq!(
            limits.per_ip().get(&ip(2)),
            None,
            "an address leaves with its last"
        );
    }

    #[test]
    fn a_zero_cap_per_address_refuses_without_leaving_an_entry() {
        let limits = Arc::new(ConnectionLimits::new(10, Some(0)));
        assert_eq!(
            limits.admit(ip(1)).err(),
            Some(Refusal::PerIp { limit: 0, open: 1 })
        );
        assert!(limits.per_ip().is_empty());
        assert_eq!(limits.open(), 0);
    }
}
