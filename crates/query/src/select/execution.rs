//! Executing a SELECT: the plan's reads go through the coordinator page by page, and the rows
//! read are filtered, grouped or aggregated, limited, paged and projected.

use std::cmp::Ordering;

use bytes::Bytes;
use coordinator::{ConsistencyLevel, Coordinator};
use cql_syntax::ast::Select;
use mutation::{PartitionData, ReadCommand, ReadResponse, ScanStart};
use schema::{KeyspaceMetadata, Schema};
use types::CqlType;

use crate::bind::{resolve_table, Bound};
use crate::interface::{ColumnSpec, NodeInfo, PlanCache, QueryOptions, QueryResult, ResultSet};
use crate::keys::partition_key;
use crate::limits::{InSelectGuardrails, Pacer, RequestStart, RequestTimeouts};
use crate::{system_tables, warnings, QueryError};

use super::grouping::{Flow, Grouper};
use super::paging::PagingState;
use super::partition_rows::{partition_rows, PartitionPosition};
use super::partitions::PartitionList;
use super::plan::{passes, read_slice, reads_per_partition, Plan};
use super::planner::build_plan;
use super::row::RowValues;
use super::selector::GroupState;
use super::tombstones::TombstoneTally;

/// Page size used internally when the client asked for no paging (or for aggregates): bounds
/// the rows held per storage read, not the result.
pub(super) const INTERNAL_PAGE_ROWS: usize = 5_000;

/// A SELECT to execute and, when it was prepared, its statement's compiled selection.
#[derive(Clone, Copy)]
pub(crate) struct SelectStatement<'a> {
    pub select: &'a Select,
    /// A prepared SELECT's compiled (unbound) selection, shared by its executions (which copy
    /// it only to bind terms into it).
    pub cache: Option<&'a PlanCache>,
}

/// Cassandra's refusal to page a query whose rows must be sorted after they are read.
pub(super) const POST_ORDERING_PAGING: &str = "Cannot page queries with both ORDER BY and a IN restriction on the partition key; you must either remove the ORDER BY or the IN and sort client side, or disable paging for this query";

/// Where the rows read go: result rows, one aggregate over everything, or groups.
pub(super) enum Sink {
    Rows(Rows),
    Aggregate(Box<GroupState>),
    Grouped(Grouper),
}

impl Sink {
    /// Rows to ask storage for next.
    pub(super) fn wanted(&self) -> usize {
        match self {
            Sink::Rows(out) => out.wanted(),
            Sink::Aggregate(_) => INTERNAL_PAGE_ROWS,
            Sink::Grouped(g) => g.wanted(),
        }
    }

    pub(super) fn limit_reached(&self) -> bool {
        match self {
            Sink::Rows(out) => out.limit_reached(),
            Sink::Aggregate(_) => false,
            Sink::Grouped(g) => g.done,
        }
    }
}

/// What a SELECT needs besides its statement and the request: the schema snapshot it was
/// analysed against, the coordinator its reads go through, and the node's facts and limits.
#[derive(Clone, Copy)]
pub(crate) struct ReadContext<'a> {
    pub schema: &'a Schema,
    pub coordinator: &'a Coordinator,
    /// This node's facts, which the system tables serve.
    pub node: &'a NodeInfo,
    /// `read_request_timeout` for partition reads, `range_request_timeout` for scans.
    pub timeouts: &'a RequestTimeouts,
    pub in_select_guardrails: &'a InSelectGuardrails,
    /// `tombstone_warn_threshold`: a read command meeting more tombstones gets a warning.
    pub tombstone_warn_threshold: u64,
}

pub(crate) async fn execute(
    ctx: ReadContext<'_>,
    statement: SelectStatement<'_>,
    keyspace: Option<&str>,
    values: &[Bound],
    options: &QueryOptions,
    start: RequestStart,
    warnings: &mut Vec<String>,
) -> Result<QueryResult, QueryError> {
    let select = statement.select;
    if !select.json {
        return execute_rows(ctx, statement, keyspace, values, options, start, warnings).await;
    }
    // SELECT JSON: the same query, each result row turned into one JSON object.
    let plain = Select {
        json: false,
        ..select.clone()
    };
    match execute_rows(
        ctx,
        SelectStatement {
            select: &plain,
            ..statement
        },
        keyspace,
        values,
        options,
        start,
        warnings,
    )
    .await?
    {
        QueryResult::Rows(rs) => Ok(QueryResult::Rows(rows_to_json(rs)?)),
        other => Ok(other),
    }
}

/// One `[json]` text column per row: `{"column": value, ...}` in the selection's order, with
/// Cassandra's key rule (a name with capitals is double-quoted) and `toJson` values.
pub(super) fn rows_to_json(rs: ResultSet) -> Result<ResultSet, QueryError> {
    let keys: Vec<String> = rs
        .columns
        .iter()
        .map(|c| {
            let name = if c.name == c.name.to_lowercase() {
                c.name.clone()
            } else {
                format!("\"{}\"", c.name)
            };
            serde_json::Value::String(name).to_string()
        })
        .collect();
    let mut rows = Vec::with_capacity(rs.rows.len());
    for row in &rs.rows {
        let mut text = String::from("{");
        for (i, (cell, spec)) in row.iter().zip(rs.columns.iter()).enumerate() {
            if i > 0 {
                text.push_str(", ");
            }
            text.push_str(&keys[i]);
            text.push_str(": ");
            match cell {
                None => text.push_str("null"),
                Some(bytes) => {
                    let value = types::Value::decode(&spec.ty, bytes).map_err(|e| {
                        QueryError::Server(format!("cannot decode {}: {e}", spec.name))
                    })?;
                    text.push_str(&value.to_json(&spec.ty));
                }
            }
        }
        text.push('}');
        rows.push(vec![Some(Bytes::from(text))]);
    }
    let json_spec = |c: &ColumnSpec| ColumnSpec {
        keyspace: c.keyspace.clone(),
        table: c.table.clone(),
        name: "[json]".to_string(),
        ty: CqlType::Text,
    };
    let columns = match rs.columns.first() {
        Some(c) => vec![json_spec(c)],
        None => Vec::new(),
    };
    Ok(ResultSet {
        columns: columns.into(),
        rows,
        paging_state: rs.paging_state,
        skip_metadata: rs.skip_metadata,
    })
}

pub(super) async fn execute_rows(
    ctx: ReadContext<'_>,
    statement: SelectStatement<'_>,
    keyspace: Option<&str>,
    values: &[Bound],
    options: &QueryOptions,
    start: RequestStart,
    warnings: &mut Vec<String>,
) -> Result<QueryResult, QueryError> {
    let select = statement.select;
    let schema = ctx.schema;
    let table = resolve_table(
        schema,
        select.table.keyspace.as_ref(),
        keyspace,
        &select.table.name,
    )?;
    let mut plan = build_plan(
        schema,
        table,
        select,
        values,
        statement.cache,
        ctx.in_select_guardrails,
        warnings,
    )?;
    // Cassandra warns of aggregates and GROUP BY over many partitions (SelectStatement).
    if plan.aggregate || plan.group_by.is_some() {
        if !plan.partition_key_restricted {
            warnings.push(warnings::AGGREGATION_WITHOUT_PARTITION_KEY.to_string());
        } else if plan.partition_key_in {
            warnings.push(warnings::AGGREGATION_ON_MULTIPLE_PARTITION_KEYS.to_string());
        }
    }
    let post_limit = post_ordering_limit(&mut plan, options)?;
    let now = options.now_seconds();
    // An aggregate without GROUP BY is one row computed over every page read internally.
    let page_size = match options.page_size {
        Some(n) if n > 0 && !plan.aggregate => Some(n as usize),
        _ => None,
    };
    let state = match &options.paging_state {
        Some(b) if !plan.aggregate => PagingState::decode(b)?,
        _ => PagingState::default(),
    };

    if table.virtual_table {
        let rows = system_tables::rows(ctx.node, schema, table)?;
        return Ok(QueryResult::Rows(finish_virtual(
            &plan, rows, page_size, state, now,
        )?));
    }

    let keyspace_meta = schema.keyspace(&table.keyspace).ok_or_else(|| {
        QueryError::Invalid(format!("keyspace {} does not exist", table.keyspace))
    })?;
    // Reads of named partitions run under `read_request_timeout`, scans under
    // `range_request_timeout`, as Cassandra's single-partition and range commands.
    let timeout = match plan.partitions {
        Some(_) => ctx.timeouts.read,
        None => ctx.timeouts.range,
    };
    // A guard, not a copy of the name: this runs for every read.
    let ring = ctx.node.token_metadata.load();
    let block_for = options.consistency.block_for(
        keyspace_meta,
        coordinator::ReadOrWrite::Read,
        &ring.local_endpoint().location.datacenter,
    )?;
    drop(ring);
    let pacer = Pacer::new(
        start.deadline(timeout),
        options.consistency,
        i32::try_from(block_for).unwrap_or(i32::MAX),
    );
    let sink = match plan.group_by {
        _ if plan.aggregate => Sink::Aggregate(Box::new(plan.selection.new_group())),
        Some(prefix) => Sink::Grouped(Grouper::new(&plan, prefix, page_size, &state)),
        None => Sink::Rows(Rows::new(&plan, page_size, state.returned as usize)),
    };
    let state = PagingState {
        group: None,
        ..state
    };
    // Tombstones met, counted per read command as Cassandra does for its tombstone warning.
    let command_limit = match (options.page_size.filter(|n| *n > 0), plan.limit) {
        (Some(n), Some(limit)) if !plan.aggregate => Some((n as usize).min(limit)),
        (Some(n), _) => Some(n as usize),
        (None, limit) => limit,
    };
    let mut reads = Reads {
        coordinator: ctx.coordinator,
        plan: &plan,
        keyspace: keyspace_meta,
        consistency: options.consistency,
        pacer,
        now,
        sink,
        state,
        tally: TombstoneTally::default(),
        command_limit,
        threshold: ctx.tombstone_warn_threshold,
    };
    let group_paging_state = reads.run(warnings).await?;
    warnings.extend(
        reads
            .tally
            .warning(&plan, reads.command_limit, reads.threshold),
    );
    let sink = reads.sink;
    finish_rows(&plan, sink, group_paging_state, post_limit)
}

/// The LIMIT that applies after rows are sorted post-query (`None` without post-query
/// ordering, or without LIMIT), taken out of the plan so the reads do not apply it.
fn post_ordering_limit(
    plan: &mut Plan,
    options: &QueryOptions,
) -> Result<Option<usize>, QueryError> {
    // Rows sorted after they are read are all read first: no paging, and LIMIT after the sort.
    // Cassandra answers a read that selects nothing by construction (an empty IN, crossed
    // clustering bounds) before it would page, except an aggregate or GROUP BY, which it always
    // pages.
    let answered_unpaged = !plan.aggregate && plan.group_by.is_none() && plan.selects_nothing();
    Ok(match plan.post_ordering {
        Some(_) if options.page_size.is_some_and(|n| n > 0) && !answered_unpaged => {
            return Err(QueryError::Invalid(POST_ORDERING_PAGING.to_string()))
        }
        Some(_) => plan.limit.take(),
        None => None,
    })
}

/// The storage reads of one SELECT, page by page, and where their rows go.
struct Reads<'a> {
    coordinator: &'a Coordinator,
    plan: &'a Plan,
    keyspace: &'a KeyspaceMetadata,
    consistency: ConsistencyLevel,
    pacer: Pacer,
    now: mutation::LocalTime,
    sink: Sink,
    /// Where the next storage read starts.
    state: PagingState,
    tally: TombstoneTally,
    /// The rows a read command asks for, which the tombstone warning prints.
    command_limit: Option<usize>,
    /// `tombstone_warn_threshold`.
    threshold: u64,
}

impl Reads<'_> {
    /// Reads until the sink is full, the limit is reached or nothing is left; returns the
    /// paging state of a page of groups that ended inside a storage page.
    async fn run(&mut self, warnings: &mut Vec<String>) -> Result<Option<PagingState>, QueryError> {
        let plan = self.plan;
        let state = &mut self.state;
        let mut group_paging_state = None;
        loop {
            if let Some(keys) = &plan.partitions {
                if state.partition_index as usize
                    >= keys.len().saturating_mul(reads_per_partition(plan))
                {
                    break;
                }
            }
            // Every storage read: the deadline, and a yield of the shard now and then (a read of
            // many partitions, or a scan that filters out most rows, may take seconds).
            self.pacer.pace().await?;
            let want = self.sink.wanted().clamp(1, INTERNAL_PAGE_ROWS);
            let page_start = state.clone();
            let read = match &plan.partitions {
                Some(keys) => {
                    read_partition(
                        self.coordinator,
                        plan,
                        keys,
                        self.keyspace,
                        self.consistency,
                        self.pacer.deadline(),
                        state,
                        want,
                    )
                    .await?
                }
                None => Some(
                    read_range(
                        self.coordinator,
                        plan,
                        self.keyspace,
                        self.consistency,
                        self.pacer.deadline(),
                        state,
                        want,
                    )
                    .await?,
                ),
            };
            let Some((mut pages, next)) = read else {
                break;
            };
            let partition = plan
                .partitions
                .is_some()
                .then(|| page_start.partition_index as usize / reads_per_partition(plan).max(1));
            // A partition read returns only rows in the slice; a scan returns whole partitions.
            let slice_to_check = plan.partitions.is_none().then_some(&plan.slice);
            for data in &pages {
                if let Some(closed) = self.tally.add(partition, data, slice_to_check, self.now) {
                    warnings.extend(closed.warning(plan, self.command_limit, self.threshold));
                }
            }
            let flow = consume_pages(
                plan,
                &mut pages,
                next.as_ref(),
                state,
                &mut self.sink,
                &mut self.pacer,
                self.now,
            )
            .await?;
            match flow {
                Flow::Continue => {}
                Flow::Done => break,
                Flow::PageFull => {
                    // The next page re-reads this storage page and skips the groups returned.
                    if let Sink::Grouped(g) = &self.sink {
                        group_paging_state = Some(PagingState {
                            returned: g.returned as u32,
                            group: g.resume(),
                            ..page_start
                        });
                    }
                    break;
                }
            }
            match next {
                Some(n) => {
                    let carried = n.last_partition.clone();
                    let same = carried.is_some() && carried == state.last_partition;
                    state.partition_index = n.partition_index;
                    state.resume = n.resume;
                    if !same {
                        state.partition_returned = 0;
                        state.last_partition = carried;
                    }
                }
                None => {
                    state.resume = None;
                    state.partition_index = u32::MAX;
                    break;
                }
            }
            if self.sink.limit_reached() {
                break;
            }
            if let Sink::Rows(out) = &mut self.sink {
                if out.page_full() {
                    out.paging_state = Some(PagingState {
                        returned: out.total_returned as u32,
                        ..state.clone()
                    });
                    break;
                }
            }
        }
        Ok(group_paging_state)
    }
}

/// The next storage read of a partition list: the partitions read (one) and where the read
/// after it starts (`None` after the last); `None` when every partition was read.
#[allow(clippy::too_many_arguments)] // the read's parts
async fn read_partition(
    coordinator: &Coordinator,
    plan: &Plan,
    keys: &PartitionList,
    keyspace: &KeyspaceMetadata,
    consistency: ConsistencyLevel,
    deadline: coordinator::Deadline,
    state: &PagingState,
    want: usize,
) -> Result<Option<(Vec<PartitionData>, Option<PagingState>)>, QueryError> {
    let table = &plan.table;
    // With several ranges, the index runs over each partition's ranges in turn.
    let idx = state.partition_index as usize;
    let slices = reads_per_partition(plan);
    let reads = keys.len().saturating_mul(slices);
    if idx >= reads {
        return Ok(None);
    }
    let key = keys.key(table, idx / slices)?;
    let key = key.as_ref();
    let page = if keys.admits(key) {
        let response = coordinator
            .read(
                keyspace,
                ReadCommand::Partition {
                    table: table.id,
                    key: key.clone(),
                    slice: read_slice(plan, idx % slices),
                    max_rows: if plan.distinct { 1 } else { want },
                    resume: state.resume.clone(),
                },
                consistency,
                deadline,
            )
            .await?;
        let ReadResponse::Partition(page) = response else {
            return Err(QueryError::Server("unexpected read response".to_string()));
        };
        page
    } else {
        // A token() restriction beside the key leaves this one out.
        mutation::PartitionPage {
            data: PartitionData {
                key: key.clone(),
                header: Default::default(),
                static_row: None,
                rows: Vec::new(),
            },
            resume: None,
        }
    };
    let next = match (page.resume, plan.distinct) {
        (Some(r), false) => PagingState {
            partition_index: state.partition_index,
            resume: Some(r),
            last_partition: Some(key.key.clone()),
            ..Default::default()
        },
        _ => PagingState {
            partition_index: state.partition_index + 1,
            // The partition's next slice continues its rows (PER PARTITION LIMIT).
            last_partition: (!(idx + 1).is_multiple_of(slices)).then(|| key.key.clone()),
            ..Default::default()
        },
    };
    let more = (next.partition_index as usize) < reads || next.resume.is_some();
    Ok(Some((vec![page.data], more.then_some(next))))
}

/// The next storage read of a token-range scan: the partitions read and where the read after
/// it starts (`None` at the end of the range).
async fn read_range(
    coordinator: &Coordinator,
    plan: &Plan,
    keyspace: &KeyspaceMetadata,
    consistency: ConsistencyLevel,
    deadline: coordinator::Deadline,
    state: &PagingState,
    want: usize,
) -> Result<(Vec<PartitionData>, Option<PagingState>), QueryError> {
    let start = match (&state.resume, plan.token_start) {
        (Some(r), _) => ScanStart::Resume(r.clone()),
        (None, Some(t)) => ScanStart::Token(t),
        (None, None) => ScanStart::Beginning,
    };
    let response = coordinator
        .read(
            keyspace,
            ReadCommand::Range {
                table: plan.table.id,
                start,
                end_token: plan.token_end,
                max_rows: want,
            },
            consistency,
            deadline,
        )
        .await?;
    let ReadResponse::Range(page) = response else {
        return Err(QueryError::Server("unexpected read response".to_string()));
    };
    // A partition the page ended inside goes on in the next page; one it ended
    // after is complete (a partition with only a static row shows it now).
    let last = page
        .partitions
        .last()
        .filter(|_| page.last_partition_continues)
        .map(|p| p.key.key.clone());
    let next = page.resume.map(|r| PagingState {
        resume: Some(r),
        last_partition: last,
        ..Default::default()
    });
    Ok((page.partitions, next))
}

/// Passes the rows of one storage read's partitions that the plan admits to the sink, keeping
/// in `state` how many rows of the last partition were returned.
async fn consume_pages(
    plan: &Plan,
    pages: &mut [PartitionData],
    next: Option<&PagingState>,
    state: &mut PagingState,
    sink: &mut Sink,
    pacer: &mut Pacer,
    now: mutation::LocalTime,
) -> Result<Flow, QueryError> {
    let grouped = plan.group_by.is_some();
    let mut flow = Flow::Continue;
    'partitions: for data in pages {
        let continuing = state.last_partition.as_deref() == Some(data.key.key.as_slice());
        let mut partition_returned = if continuing {
            state.partition_returned as usize
        } else {
            0
        };
        // Whether the partition ends in this storage page (it goes on when the page stopped
        // inside it), and whether earlier pages returned rows of it.
        let complete = !next.is_some_and(|n| {
            n.resume.is_some() && n.last_partition.as_deref() == Some(data.key.key.as_slice())
        });
        let resumed = state.resume.is_some() && continuing;
        let rows = partition_rows(
            plan,
            data,
            now,
            PartitionPosition {
                rows_before: resumed && partition_returned > 0,
                complete,
            },
        );
        for row in rows {
            pacer.pace_row().await?;
            if plan.distinct && partition_returned > 0 {
                break;
            }
            // With GROUP BY, PER PARTITION LIMIT counts groups (the grouper applies it).
            if !grouped
                && plan
                    .per_partition_limit
                    .is_some_and(|l| partition_returned >= l)
            {
                break;
            }
            if !passes(plan, &row) {
                continue;
            }
            partition_returned += 1;
            match sink {
                Sink::Rows(out) => out.push(plan, row)?,
                Sink::Aggregate(group) => plan.selection.add_row(group, &row)?,
                Sink::Grouped(g) => {
                    flow = g.accept(plan, &data.key, &row)?;
                    if flow != Flow::Continue {
                        break 'partitions;
                    }
                }
            }
        }
        state.last_partition = Some(data.key.key.clone());
        state.partition_returned = partition_returned as u32;
    }
    Ok(flow)
}

/// The result of the rows read: the sink's rows (sorted post-query when the plan asks) and the
/// paging state of the next page.
fn finish_rows(
    plan: &Plan,
    sink: Sink,
    group_paging_state: Option<PagingState>,
    post_limit: Option<usize>,
) -> Result<QueryResult, QueryError> {
    let (rows, paging_state) = match sink {
        Sink::Rows(out) => (out.rows, out.paging_state.map(|s| s.encode())),
        Sink::Aggregate(group) => (vec![plan.selection.finish(&group)?], None),
        Sink::Grouped(mut g) => {
            if group_paging_state.is_none() {
                g.flush(plan)?;
            }
            (g.rows, group_paging_state.map(|s| s.encode()))
        }
    };
    let rows = match &plan.post_ordering {
        Some(columns) => post_order(plan, rows, columns, post_limit),
        None => rows,
    };
    Ok(QueryResult::Rows(ResultSet {
        columns: plan.selection.specs.clone(),
        rows,
        paging_state,
        skip_metadata: false,
    }))
}

/// Cassandra's post-query ordering: a stable sort of every result row on the ORDER BY
/// columns (carried as hidden outputs after the visible ones, which are then dropped), then
/// LIMIT. Rows of one partition already come in the asked order, so the sort keeps them so.
pub(super) fn post_order(
    plan: &Plan,
    mut rows: Vec<Vec<Option<Bytes>>>,
    columns: &[(usize, bool)],
    limit: Option<usize>,
) -> Vec<Vec<Option<Bytes>>> {
    let visible = plan.selection.specs.len();
    rows.sort_by(|a, b| {
        for (j, (index, descending)) in columns.iter().enumerate() {
            let ty = &plan.table.columns[*index].ty;
            let order = match (&a[visible + j], &b[visible + j]) {
                (Some(x), Some(y)) => types::compare(ty, x, y),
                (x, y) => x.is_some().cmp(&y.is_some()),
            };
            let order = if *descending { order.reverse() } else { order };
            if order.is_ne() {
                return order;
            }
        }
        Ordering::Equal
    });
    if let Some(limit) = limit {
        rows.truncate(limit);
    }
    for row in &mut rows {
        row.truncate(visible);
    }
    rows
}

/// Result accumulation with LIMIT and page size.
pub(super) struct Rows {
    pub(super) rows: Vec<Vec<Option<Bytes>>>,
    pub(super) page_size: Option<usize>,
    pub(super) limit: Option<usize>,
    pub(super) total_returned: usize,
    pub(super) paging_state: Option<PagingState>,
}

impl Rows {
    pub(super) fn new(plan: &Plan, page_size: Option<usize>, already_returned: usize) -> Rows {
        Rows {
            rows: Vec::new(),
            page_size,
            limit: plan.limit,
            total_returned: already_returned,
            paging_state: None,
        }
    }

    pub(super) fn wanted(&self) -> usize {
        let by_page = self
            .page_size
            .map(|p| p.saturating_sub(self.rows.len()))
            .unwrap_or(usize::MAX);
        let by_limit = self
            .limit
            .map(|l| l.saturating_sub(self.total_returned))
            .unwrap_or(usize::MAX);
        by_page.min(by_limit)
    }

    pub(super) fn push(&mut self, plan: &Plan, row: RowValues) -> Result<(), QueryError> {
        if self.limit_reached() || self.page_full() {
            return Ok(());
        }
        self.rows.push(plan.selection.project_owned(row)?);
        self.total_returned += 1;
        Ok(())
    }

    pub(super) fn limit_reached(&self) -> bool {
        self.limit.is_some_and(|l| self.total_returned >= l)
    }

    pub(super) fn page_full(&self) -> bool {
        self.page_size.is_some_and(|p| self.rows.len() >= p)
    }
}

pub(super) fn finish_virtual(
    plan: &Plan,
    rows: Vec<Vec<Option<Vec<u8>>>>,
    page_size: Option<usize>,
    state: PagingState,
    _now: mutation::LocalTime,
) -> Result<ResultSet, QueryError> {
    let n = plan.table.columns.len();
    let mut matching = Vec::new();
    let mut per_partition: Option<(Vec<Option<Vec<u8>>>, usize)> = None;
    for values in rows {
        let token = values
            .first()
            .and_then(|v| v.as_ref())
            .map(|k| partitioner::murmur3_token(k))
            .unwrap_or(0);
        let row = RowValues {
            values,
            writetimes: vec![None; n],
            ttls: vec![None; n],
            cells: Vec::new(),
            token,
        };
        if let Some(keys) = &plan.partitions {
            let pk = &row.values[..plan.table.partition_key_count];
            let encoded: Vec<Vec<u8>> = pk.iter().map(|v| v.clone().unwrap_or_default()).collect();
            if !keys.contains(&plan.table, &encoded) {
                continue;
            }
        }
        // A virtual table's plan enforces nothing by its read: every restriction is checked.
        if !passes(plan, &row) {
            continue;
        }
        let pk: Vec<Option<Vec<u8>>> = row.values[..plan.table.partition_key_count].to_vec();
        let count = match &mut per_partition {
            Some((k, c)) if *k == pk => {
                *c += 1;
                *c
            }
            _ => {
                per_partition = Some((pk, 1));
                1
            }
        };
        // With GROUP BY, PER PARTITION LIMIT counts groups (the grouper applies it).
        let over_limit =
            plan.group_by.is_none() && plan.per_partition_limit.is_some_and(|l| count > l);
        if over_limit || (plan.distinct && count > 1) {
            continue;
        }
        matching.push(row);
    }
    if plan.slice.reversed {
        matching.reverse();
    }
    if plan.aggregate {
        let mut group = plan.selection.new_group();
        for row in &matching {
            plan.selection.add_row(&mut group, row)?;
        }
        return Ok(ResultSet {
            columns: plan.selection.specs.clone(),
            rows: vec![plan.selection.finish(&group)?],
            paging_state: None,
            skip_metadata: false,
        });
    }
    // Node-local tables are small: build every result row (or group), then cut the page.
    let grouped: Option<Vec<Vec<Option<Bytes>>>> = match plan.group_by {
        Some(prefix) => {
            let mut grouper = Grouper::new(plan, prefix, None, &PagingState::default());
            grouper.limit = None;
            for row in &matching {
                let pk: Vec<Vec<u8>> = row.values[..plan.table.partition_key_count]
                    .iter()
                    .map(|v| v.clone().unwrap_or_default())
                    .collect();
                let key = partition_key(&plan.table, &pk)?;
                grouper.accept(plan, &key, row)?;
            }
            grouper.flush(plan)?;
            Some(grouper.rows)
        }
        None => None,
    };
    let total = grouped.as_ref().map_or(matching.len(), Vec::len);
    let offset = state.returned as usize;
    let limit = plan.limit.unwrap_or(usize::MAX);
    let end_by_limit = limit.min(total);
    let end = match page_size {
        Some(p) => (offset + p).min(end_by_limit),
        None => end_by_limit,
    };
    let range = offset.min(end)..end;
    let rows = match grouped {
        Some(mut all) => {
            all.truncate(range.end);
            all.drain(..range.start);
            all
        }
        None => matching[range]
            .iter()
            .map(|r| plan.selection.project(r))
            .collect::<Result<_, _>>()?,
    };
    let paging_state = (end < end_by_limit).then(|| {
        PagingState {
            returned: end as u32,
            ..Default::default()
        }
        .encode()
    });
    Ok(ResultSet {
        columns: plan.selection.specs.clone(),
        rows,
        paging_state,
        skip_metadata: false,
    })
}
