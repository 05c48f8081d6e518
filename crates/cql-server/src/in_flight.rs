//! The bytes of requests in flight, bounded node-wide and per client address, as Cassandra's
//! `native_transport_max_request_data_in_flight` and `..._per_ip` bound them.
//!
//! A connection accounts for the requests it has read and not yet answered, and for the bytes
//! it buffers of the next ones (a large frame counts whole as soon as its header has arrived).
//! It holds that much from the two budgets before reading more; when a budget is spent it
//! stops reading (the client's writes then wait: back-pressure, what Cassandra does for a
//! client that did not ask to be told `Overloaded`) until another connection gives bytes back.
//! Before, 40 connections holding half-read 16 MiB frames took 500 MiB.
//!
//! To keep the shared counters off the hot path, a connection holds bytes in grants of
//! `GRANT_BYTES` and gives them back when it has nothing in flight. A connection that holds
//! nothing may always take one grant, even past the limits, so a client sending small requests
//! one at a time is never starved by others' large frames (the overshoot is at most a grant
//! per connection); and a frame larger than a whole budget is admitted when nothing else is
//! held from that budget, so it cannot wait forever.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// The unit in which a connection holds bytes from the budgets: one read from the socket.
pub(crate) const GRANT_BYTES: u64 = 64 * 1024;

/// A budget: its limit and the bytes held from it.
struct Budget {
    limit_bytes: u64,
    held_bytes: AtomicU64,
}

impl Budget {
    fn new(limit_bytes: u64) -> Budget {
        Budget {
            limit_bytes,
            held_bytes: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` for a connection holding `own` bytes of it already, if they fit, or if
    /// nothing else is held (a request larger than the budget must not wait forever, also
    /// not for what its own connection holds), or if `always`.
    fn take(&self, bytes: u64, own: u64, always: bool) -> bool {
        let before = self.held_bytes.fetch_add(bytes, Ordering::SeqCst);
        if always || before <= own || before + bytes <= self.limit_bytes {
            return true;
        }
        self.held_bytes.fetch_sub(bytes, Ordering::SeqCst);
        false
    }

    fn give_back(&self, bytes: u64) {
        self.held_bytes.fetch_sub(bytes, Ordering::SeqCst);
    }

    fn has_room(&self, bytes: u64, own: u64) -> bool {
        let held = self.held_bytes.load(Ordering::SeqCst);
        held <= own || held + bytes <= self.limit_bytes
    }
}

/// One client address's budget and its open connections (the entry goes with the last;
/// counted under the map's lock).
struct Address {
    budget: Budget,
    connections: AtomicUsize,
}

/// The node-wide and per-address budgets; shared by every connection.
pub(crate) struct InFlightLimits {
    node: Budget,
    per_address_bytes: u64,
    addresses: Mutex<HashMap<IpAddr, Arc<Address>>>,
    /// Connections waiting for bytes: only then does giving back wake anyone. It and the
    /// budgets' `held_bytes` are read and written sequentially consistent: a waiter counts
    /// itself and then looks at the bytes held, a giver gives back and then looks at the
    /// waiters, and only a single total order guarantees one of them sees the other.
    waiting: AtomicUsize,
    given_back: Notify,
}

impl InFlightLimits {
    pub(crate) fn new(node_bytes: u64, per_address_bytes: u64) -> Arc<InFlightLimits> {
        Arc::new(InFlightLimits {
            node: Budget::new(node_bytes),
            per_address_bytes,
            addresses: Mutex::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
            given_back: Notify::new(),
        })
    }

    /// The budget of a new connection from `ip`.
    pub(crate) fn open(self: &Arc<Self>, ip: IpAddr) -> ConnectionBudget {
        let address = {
            let mut addresses = self
                .addresses
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let address = addresses.entry(ip).or_insert_with(|| {
                Arc::new(Address {
                    budget: Budget::new(self.per_address_bytes),
                    connections: AtomicUsize::new(0),
                })
            });
            address.connections.fetch_add(1, Ordering::Relaxed);
            address.clone()
        };
        ConnectionBudget {
            limits: self.clone(),
            ip,
            address,
            held_bytes: 0,
        }
    }

    /// The bytes held node-wide (for tests and metrics).
    #[cfg(test)]
    fn held_bytes(&self) -> u64 {
        self.node.held_bytes.load(Ordering::SeqCst)
    }
}

/// What one connection holds from the budgets. Dropping it gives everything back.
pub(crate) struct ConnectionBudget {
    limits: Arc<InFlightLimits>,
    ip: IpAddr,
    address: Arc<Address>,
    held_bytes: u64,
}

impl ConnectionBudget {
    /// Holds at least `bytes` in all, taking more from both budgets in whole grants if
    /// needed; false (holding what it held) if they have no room.
    pub(crate) fn hold(&mut self, bytes: u64) -> bool {
        if bytes <= self.held_bytes {
            return true;
        }
        let more = self.more_for(bytes);
        let first_grant = self.held_bytes == 0 && more == GRANT_BYTES;
        let own = self.held_bytes;
        // Looked at first, so that a connection that cannot have room takes nothing and
        // so wakes no one: a take undone below wakes every waiter, and two connections
        // waiting on one full address budget would otherwise wake each other for as long as
        // it stays full. Only a race with another taker gets past this and is undone.
        let room = self.limits.node.has_room(more, own) && self.address.budget.has_room(more, own);
        if !first_grant && !room {
            return false;
        }
        if !self.limits.node.take(more, own, first_grant) {
            // Its brief overshoot may have turned another taker away.
            self.wake();
            return false;
        }
        if !self.address.budget.take(more, own, first_grant) {
            self.limits.node.give_back(more);
            self.wake();
            return false;
        }
        self.held_bytes += more;
        true
    }

    /// Gives back what is held beyond `bytes` (rounded up to whole grants).
    pub(crate) fn keep(&mut self, bytes: u64) {
        let keep = bytes.div_ceil(GRANT_BYTES) * GRANT_BYTES;
        if keep >= self.held_bytes {
            return;
        }
        let excess = self.held_bytes - keep;
        self.held_bytes = keep;
        self.address.budget.give_back(excess);
        self.limits.node.give_back(excess);
        self.wake();
    }

    pub(crate) fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// What `hold(bytes)` takes from the budgets: the shortfall in whole grants.
    fn more_for(&self, bytes: u64) -> u64 {
        bytes.saturating_sub(self.held_bytes).div_ceil(GRANT_BYTES) * GRANT_BYTES
    }

    fn wake(&self) {
        if self.limits.waiting.load(Ordering::SeqCst) > 0 {
            self.limits.given_back.notify_waiters();
        }
    }

    /// Waits until `bytes` in all might be held (another connection gave bytes back). A
    /// wake-up is a hint: the caller tries `hold` again.
    pub(crate) async fn room_for(&self, bytes: u64) {
        // Exactly what `hold` would take, or a wake-up could find no room and spin.
        let more = self.more_for(bytes);
        let limits = &self.limits;
        limits.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&limits.waiting);
        let notified = limits.given_back.notified();
        tokio::pin!(notified);
        // Registered before looking, so bytes given back after the look wake it.
        notified.as_mut().enable();
        let own = self.held_bytes;
        if limits.node.has_room(more, own) && self.address.budget.has_room(more, own) {
            return;
        }
        notified.await;
    }
}

/// Counts a waiting connection until dropped.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for ConnectionBudget {
    fn drop(&mut self) {
        self.keep(0);
        let mut addresses = self
            .limits
            .addresses
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.address.connections.fetch_sub(1, Ordering::Relaxed) == 1 {
            addresses.remove(&self.ip);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MIB: u64 = 1 << 20;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn an_address_holds_at_most_its_budget_and_gets_it_back() {
        let limits = InFlightLimits::new(100 * MIB, 32 * MIB);
        let mut a = limits.open(ip(1));
        let mut b = limits.open(ip(1));
        let mut c = limits.open(ip(1));
        assert!(a.hold(16 * MIB));
        assert!(b.hold(16 * MIB));
        // The address's 32 MiB are held: a third large frame waits...
        assert!(!c.hold(16 * MIB));
        assert_eq!(c.held_bytes(), 0);
        // ...but a connection holding nothing may always take one grant.
        assert!(c.hold(1000));
        assert_eq!(c.held_bytes(), GRANT_BYTES);
        // Another address has its own budget.
        let mut d = limits.open(ip(2));
        assert!(d.hold(16 * MIB));
        a.keep(0);
        assert!(c.hold(16 * MIB));
        drop((b, c, d));
        a.keep(0);
        assert_eq!(limits.held_bytes(), 0);
        drop(a);
        assert!(limits.addresses.lock().expect("lock").is_empty());
    }

    #[test]
    fn the_node_budget_bounds_every_address_together() {
        let limits = InFlightLimits::new(40 * MIB, 32 * MIB);
        let mut a = limits.open(ip(1));
        let mut b = limits.open(ip(2));
        assert!(a.hold(30 * MIB));
        assert!(!b.hold(16 * MIB));
        // Whole grants are held, and given back down to what is kept.
        assert!(b.hold(10 * MIB - GRANT_BYTES));
        b.keep(GRANT_BYTES + 1);
        assert_eq!(b.held_bytes(), 2 * GRANT_BYTES);
    }

    #[test]
    fn a_request_larger_than_a_budget_passes_when_nothing_else_is_held() {
        let limits = InFlightLimits::new(8 * MIB, 4 * MIB);
        let mut a = limits.open(ip(1));
        assert!(a.hold(16 * MIB));
        let mut b = limits.open(ip(2));
        assert!(!b.hold(2 * MIB));
        a.keep(0);
        assert!(b.hold(2 * MIB));
        // What a connection holds itself does not stand in its way: one with requests in
        // flight whose next frame is larger than the whole budget gets it once the others
        // are done.
        let mut c = limits.open(ip(2));
        b.keep(GRANT_BYTES);
        assert!(c.hold(1000));
        assert!(!b.hold(16 * MIB));
        c.keep(0);
        assert!(b.hold(16 * MIB));
    }

    #[tokio::test]
    async fn a_waiting_connection_wakes_when_bytes_are_given_back() {
        let limits = InFlightLimits::new(100 * MIB, 16 * MIB);
        let mut a = limits.open(ip(1));
        let mut b = limits.open(ip(1));
        assert!(a.hold(16 * MIB));
        assert!(!b.hold(16 * MIB));
        let waiter = async {
            b.room_for(16 * MIB).await;
            b.hold(16 * MIB)
        };
        let giver = async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            a.keep(0);
        };
        let (held, ()) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(waiter, giver)
        })
        .await
        .expect("woken");
        assert!(held);
    }
}
