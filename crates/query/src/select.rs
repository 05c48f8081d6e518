//! SELECT: restrictions become partition reads or a token-range scan plus a clustering slice;
//! every restriction the read does not enforce exactly (`enforced_by_read`) is also applied as
//! a filter to the rows read, so for those the storage reads only need to return a superset of
//! the answer.
//!
//! Planning: `planner` makes a `plan::Plan` from the statement, `restrictions` refuses what a
//! WHERE clause may not hold, `partitions` is the partition list. Execution: `execution` reads
//! page by page, `filter` and `partition_rows` make and admit rows, `grouping` folds groups,
//! `paging` is the paging state, `tombstones` the tombstone warning's count. The selection:
//! `selection`, `selector`, and the functions it calls (`functions` and its families).

mod aggregates;
pub(crate) mod arguments;
mod collection_functions;
pub(crate) mod execution;
mod filter;
mod floor;
pub(crate) mod functions;
mod grouping;
mod masking;
mod math;
mod numbers;
mod operation_signatures;
mod operations;
mod paging;
mod partition_rows;
mod partitions;
mod plan;
mod planner;
pub(crate) mod restrictions;
mod row;
pub(crate) mod selection;
mod selector;
pub(crate) mod term_functions;
pub(crate) mod term_text;
mod tombstones;
mod type_match;
mod vector_functions;
