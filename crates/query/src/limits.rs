//! The limits a request runs under: its deadline (Cassandra's `read_request_timeout`,
//! `range_request_timeout` and `write_request_timeout`), and the guardrails on the IN
//! restrictions of a SELECT (`partition_keys_in_select_*_threshold`,
//! `in_select_cartesian_product_*_threshold`), with Cassandra's names and messages.

use std::time::Duration;

use tokio::time::Instant;

use coordinator::{ConsistencyLevel, Deadline};

use crate::QueryError;

/// How long a request may run before it is answered with a timeout, by what it does (Cassandra
/// 5.0's settings and defaults). A request's clock starts when the query processor takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestTimeouts {
    /// `read_request_timeout` (5 s): a SELECT of partitions named by `=`/`IN` on the whole
    /// partition key, and the reads a write makes first (list operations).
    pub read: Duration,
    /// `range_request_timeout` (10 s): a SELECT that scans token ranges (no partition key, a
    /// token restriction, or filtering).
    pub range: Duration,
    /// `write_request_timeout` (2 s): INSERT, UPDATE, DELETE and BATCH.
    pub write: Duration,
    /// `truncate_request_timeout` (60 s): TRUNCATE, which every node must acknowledge.
    pub truncate: Duration,
}

impl Default for RequestTimeouts {
    fn default() -> Self {
        RequestTimeouts {
            read: Duration::from_millis(5_000),
            range: Duration::from_millis(10_000),
            write: Duration::from_millis(2_000),
            truncate: Duration::from_millis(60_000),
        }
    }
}

/// When a request began, for the deadlines of what it does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestStart(Instant);

impl RequestStart {
    pub(crate) fn now() -> RequestStart {
        RequestStart(Instant::now())
    }

    /// The deadline of a part of the request that may take `timeout` from its start.
    pub(crate) fn deadline(self, timeout: Duration) -> Deadline {
        Deadline::at(self.0 + timeout)
    }
}

/// Cassandra's guardrails on a SELECT's IN restrictions; `None` is its `-1` (off). A warn
/// threshold adds a client warning, a fail threshold refuses the query (`Invalid`) before
/// anything is read, both with Cassandra's words.
///
/// Cassandra applies them only to users who logged in without superuser rights, so with its
/// default `AllowAllAuthenticator` never; Helenus, which has no logins yet, applies them to
/// every client, and turns the cartesian product's on by default, because it reads each
/// combination (each partition; each clustering value of an IN right after the `=` prefix) as
/// a read of its own: 160,000 keys took minutes before deadlines, and a refusal at once is
/// more useful than a timeout after seconds. As in Cassandra, the cartesian product's also
/// covers the keys of UPDATE and DELETE (`write.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InSelectGuardrails {
    /// `partition_keys_in_select_warn_threshold`: distinct partition keys a SELECT names.
    pub partition_keys_warn: Option<u64>,
    /// `partition_keys_in_select_fail_threshold`.
    pub partition_keys_fail: Option<u64>,
    /// `in_select_cartesian_product_warn_threshold`: values the IN restrictions on the
    /// partition key (or on the clustering columns) combine into.
    pub cartesian_product_warn: Option<u64>,
    /// `in_select_cartesian_product_fail_threshold`.
    pub cartesian_product_fail: Option<u64>,
}

/// Helenus's default `in_select_cartesian_product_fail_threshold` (Cassandra's is -1, off):
/// 20,000 reads of absent partitions took 0.15-0.2 s of a debug build on the two-core
/// reference machine and 100,000 about 2 s, so 25,000 stays well inside
/// `read_request_timeout` while a product that would run for seconds is refused at once
/// instead of running into that timeout.
pub const DEFAULT_IN_SELECT_CARTESIAN_PRODUCT_FAIL_THRESHOLD: u64 = 25_000;

impl Default for InSelectGuardrails {
    fn default() -> Self {
        InSelectGuardrails {
            partition_keys_warn: None,
            partition_keys_fail: None,
            cartesian_product_warn: None,
            cartesian_product_fail: Some(DEFAULT_IN_SELECT_CARTESIAN_PRODUCT_FAIL_THRESHOLD),
        }
    }
}

/// Which key a cartesian product of IN restrictions is on, in Cassandra's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyKind {
    Partition,
    Clustering,
}

impl KeyKind {
    fn words(self) -> &'static str {
        match self {
            KeyKind::Partition => "partition key",
            KeyKind::Clustering => "clustering key",
        }
    }
}

impl InSelectGuardrails {
    /// Cassandra's `in_select_cartesian_product` guardrail on `values` combinations (a product
    /// of the IN lists' lengths, saturated: it is checked before any is built).
    pub(crate) fn check_cartesian_product(
        &self,
        key: KeyKind,
        values: u64,
        warnings: &mut Vec<String>,
    ) -> Result<(), QueryError> {
        if let Some(threshold) = self.cartesian_product_fail.filter(|t| values > *t) {
            return Err(QueryError::Invalid(format!(
                "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian product of the IN restrictions on {} produces {values} values, this exceeds fail threshold of {threshold}.",
                key.words()
            )));
        }
        if let Some(threshold) = self.cartesian_product_warn.filter(|t| values > *t) {
            warnings.push(format!(
                "Guardrail in_select_cartesian_product violated: The cartesian product of the IN restrictions on {} produces {values} values, this exceeds warning threshold of {threshold}.",
                key.words()
            ));
        }
        Ok(())
    }

    /// Cassandra's `partition_keys_in_select` guardrail on a SELECT of `keys` distinct
    /// partitions of table `table` (its name without the keyspace, as Cassandra prints it).
    pub(crate) fn check_partition_keys(
        &self,
        table: &str,
        keys: u64,
        warnings: &mut Vec<String>,
    ) -> Result<(), QueryError> {
        if let Some(threshold) = self.partition_keys_fail.filter(|t| keys > *t) {
            return Err(QueryError::Invalid(format!(
                "Guardrail partition_keys_in_select violated: Aborting query with partition keys in IN clause on table {table}, number of partition keys {keys} exceeds fail threshold of {threshold}."
            )));
        }
        if let Some(threshold) = self.partition_keys_warn.filter(|t| keys > *t) {
            warnings.push(format!(
                "Guardrail partition_keys_in_select violated: Query with partition keys in IN clause on table {table}, with number of partition keys {keys} exceeds warning threshold of {threshold}."
            ));
        }
        Ok(())
    }
}

/// How long a request computes on its shard between yields: the shard's other connections
/// (and new ones: STARTUP) wait at most about this long for a long read. ScyllaDB's task
/// quota is 0.5 ms; the style guide's bound for blocking a runtime worker is the same.
const YIELD_INTERVAL: Duration = Duration::from_micros(500);

/// Yields the shard when a request has computed for `YIELD_INTERVAL` since it last did (or,
/// before it first did, since it first looked at the clock: reading the clock at the start of
/// every request would cost the short ones for nothing).
///
/// It measures real time (`std::time::Instant`), not tokio's: it is about the CPU a request
/// holds a worker for, which a simulator's paused clock does not measure.
pub(crate) struct ShardTime {
    last_yield: Option<std::time::Instant>,
}

impl ShardTime {
    pub(crate) fn new() -> ShardTime {
        ShardTime { last_yield: None }
    }

    /// Yields if due at `now`.
    pub(crate) async fn yield_if_due(&mut self) {
        let now = std::time::Instant::now();
        let since = *self.last_yield.get_or_insert(now);
        if now.duration_since(since) >= YIELD_INTERVAL {
            tokio::task::yield_now().await;
            self.last_yield = Some(std::time::Instant::now());
        }
    }
}

/// A long request's pace: checks its deadline and yields the shard at intervals, at the points
/// where its loops can stop (between storage reads, and every `ROWS_PER_CHECK` rows).
pub(crate) struct Pacer {
    deadline: Deadline,
    consistency: ConsistencyLevel,
    /// Replies the consistency level needs (the timeout error reports it).
    block_for: i32,
    shard: ShardTime,
    rows: u32,
    /// `pace` calls so far: the first does not look at the clock (the request has just
    /// started, and a point read makes no other).
    paced: u32,
}

/// Rows a read examines between two looks at the clock (filtering a row against a long IN
/// list can take microseconds).
const ROWS_PER_CHECK: u32 = 64;

impl Pacer {
    pub(crate) fn new(deadline: Deadline, consistency: ConsistencyLevel, block_for: i32) -> Pacer {
        Pacer {
            deadline,
            consistency,
            block_for,
            shard: ShardTime::new(),
            rows: 0,
            paced: 0,
        }
    }

    pub(crate) fn deadline(&self) -> Deadline {
        self.deadline
    }

    /// Fails with a read timeout once the deadline passed; yields the shard when the request
    /// has run `YIELD_INTERVAL` since it last did.
    pub(crate) async fn pace(&mut self) -> Result<(), QueryError> {
        self.paced += 1;
        if self.paced == 1 {
            return Ok(());
        }
        if self.deadline.passed() {
            return Err(self.timeout());
        }
        self.shard.yield_if_due().await;
        Ok(())
    }

    /// `pace` for a loop over rows: every `ROWS_PER_CHECK` calls it looks at the clock (a
    /// storage page holds up to 5,000 rows, and filtering one against a long IN list on a
    /// regular column can take microseconds).
    pub(crate) async fn pace_row(&mut self) -> Result<(), QueryError> {
        self.rows += 1;
        if !self.rows.is_multiple_of(ROWS_PER_CHECK) {
            return Ok(());
        }
        if self.deadline.passed() {
            return Err(self.timeout());
        }
        self.shard.yield_if_due().await;
        Ok(())
    }

    fn timeout(&self) -> QueryError {
        QueryError::ReadTimeout {
            consistency: self.consistency,
            received: 0,
            block_for: self.block_for,
            data_present: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guardrails_warn_then_fail_with_cassandras_words() {
        let rails = InSelectGuardrails {
            partition_keys_warn: Some(2),
            partition_keys_fail: Some(4),
            cartesian_product_warn: Some(10),
            cartesian_product_fail: Some(100),
        };
        let mut warnings = Vec::new();
        rails
            .check_cartesian_product(KeyKind::Partition, 10, &mut warnings)
            .expect("at the warn threshold");
        rails
            .check_partition_keys("t", 2, &mut warnings)
            .expect("at the warn threshold");
        assert!(warnings.is_empty());
        rails
            .check_cartesian_product(KeyKind::Clustering, 11, &mut warnings)
            .expect("over the warn threshold");
        rails
            .check_partition_keys("t", 3, &mut warnings)
            .expect("over the warn threshold");
        assert_eq!(
            warnings,
            [
                "Guardrail in_select_cartesian_product violated: The cartesian product of the IN restrictions on clustering key produces 11 values, this exceeds warning threshold of 10.",
                "Guardrail partition_keys_in_select violated: Query with partition keys in IN clause on table t, with number of partition keys 3 exceeds warning threshold of 2.",
            ]
        );
        let e = rails
            .check_cartesian_product(KeyKind::Partition, 101, &mut warnings)
            .expect_err("over the fail threshold");
        assert_eq!(e.to_string(), "Guardrail in_select_cartesian_product violated: Aborting query because the cartesian product of the IN restrictions on partition key produces 101 values, this exceeds fail threshold of 100.");
        let e = rails
            .check_partition_keys("t", 5, &mut warnings)
            .expect_err("over the fail threshold");
        assert_eq!(e.to_string(), "Guardrail partition_keys_in_select violated: Aborting query with partition keys in IN clause on table t, number of partition keys 5 exceeds fail threshold of 4.");
        let off = InSelectGuardrails {
            cartesian_product_fail: None,
            ..InSelectGuardrails::default()
        };
        off.check_cartesian_product(KeyKind::Partition, u64::MAX, &mut warnings)
            .expect("off");
        off.check_partition_keys("t", u64::MAX, &mut warnings)
            .expect("off");
    }

    #[tokio::test]
    async fn a_pacer_times_out_after_its_deadline() {
        let mut pacer = Pacer::new(
            Deadline::at(Instant::now() + Duration::from_secs(60)),
            ConsistencyLevel::One,
            1,
        );
        pacer.pace().await.expect("before the deadline");
        pacer.pace().await.expect("before the deadline");
        let mut late = Pacer::new(Deadline::at(Instant::now()), ConsistencyLevel::Quorum, 1);
        late.pace().await.expect("the first call does not look");
        let e = late.pace().await.expect_err("after the deadline");
        assert!(
            matches!(
                e,
                QueryError::ReadTimeout {
                    consistency: ConsistencyLevel::Quorum,
                    received: 0,
                    block_for: 1,
                    data_present: false,
                }
            ),
            "{e:?}"
        );
        for _ in 1..ROWS_PER_CHECK {
            late.pace_row()
                .await
                .expect("checked every ROWS_PER_CHECK rows");
        }
        assert!(late.pace_row().await.is_err());
    }
}
