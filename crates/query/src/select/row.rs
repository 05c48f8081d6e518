//! A row as the selection sees it: every column's value, and the write times and TTLs the
//! selection asks for.

/// A materialised row: every column's value, with write times and TTLs of simple cells.
#[derive(Debug, Clone, Default)]
pub(super) struct RowValues {
    pub(super) values: Vec<Option<Vec<u8>>>,
    /// Per column; empty unless the selection reads write times or TTLs of single-cell
    /// columns (`Selection::needs_column_times`).
    pub(super) writetimes: Vec<Option<i64>>,
    pub(super) ttls: Vec<Option<i32>>,
    /// For multi-cell columns, each live cell in the order of the column's value; filled only
    /// when the selection asks for write times or TTLs of multi-cell columns (else empty).
    pub(super) cells: Vec<Option<Vec<CellTime>>>,
    pub(super) token: i64,
}

/// One live cell of a multi-cell column: its path (map key, set element, list timeuuid or
/// UDT field number), write time and remaining TTL.
#[derive(Debug, Clone)]
pub(super) struct CellTime {
    pub(super) path: Vec<u8>,
    pub(super) timestamp: i64,
    pub(super) ttl: Option<i32>,
}
