//! Response bodies (spec section 4.2) and their encoding.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::consistency::Consistency;
use crate::header::{opcode, Version};
use crate::type_option::put_type_option;
use crate::wire::{
    put_bytes, put_inet, put_inetaddr, put_short_bytes, put_string, put_string_list,
};

/// A response message.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    Error(ErrorBody),
    Ready,
    /// AUTHENTICATE: the authenticator's class name.
    Authenticate(String),
    /// SUPPORTED's `[string multimap]`.
    Supported(Vec<(String, Vec<String>)>),
    Result(ResultBody),
    Event(Event),
    /// AUTH_CHALLENGE's `[bytes]` token.
    AuthChallenge(Option<Bytes>),
    /// AUTH_SUCCESS's `[bytes]` token.
    AuthSuccess(Option<Bytes>),
}

/// ERROR: `[int] code`, `[string] message`, then code-specific content (spec section 9).
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    pub extra: ErrorExtra,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    ServerError,
    ProtocolError,
    AuthenticationError,
    Unavailable,
    Overloaded,
    IsBootstrapping,
    TruncateError,
    WriteTimeout,
    ReadTimeout,
    ReadFailure,
    FunctionFailure,
    WriteFailure,
    CdcWriteFailure,
    CasWriteUnknown,
    SyntaxError,
    Unauthorized,
    Invalid,
    ConfigError,
    AlreadyExists,
    Unprepared,
}

impl ErrorCode {
    pub fn code(self) -> i32 {
        match self {
            ErrorCode::ServerError => 0x0000,
            ErrorCode::ProtocolError => 0x000A,
            ErrorCode::AuthenticationError => 0x0100,
            ErrorCode::Unavailable => 0x1000,
            ErrorCode::Overloaded => 0x1001,
            ErrorCode::IsBootstrapping => 0x1002,
            ErrorCode::TruncateError => 0x1003,
            ErrorCode::WriteTimeout => 0x1100,
            ErrorCode::ReadTimeout => 0x1200,
            ErrorCode::ReadFailure => 0x1300,
            ErrorCode::FunctionFailure => 0x1400,
            ErrorCode::WriteFailure => 0x1500,
            ErrorCode::CdcWriteFailure => 0x1600,
            ErrorCode::CasWriteUnknown => 0x1700,
            ErrorCode::SyntaxError => 0x2000,
            ErrorCode::Unauthorized => 0x2100,
            ErrorCode::Invalid => 0x2200,
            ErrorCode::ConfigError => 0x2300,
            ErrorCode::AlreadyExists => 0x2400,
            ErrorCode::Unprepared => 0x2500,
        }
    }
}

/// The content after the message. The variant must match the code (the code decides what a
/// client reads); `None` writes nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorExtra {
    None,
    /// 0x1000: `<cl><required><alive>`.
    Unavailable {
        consistency: Consistency,
        required: i32,
        alive: i32,
    },
    /// 0x1100: `<cl><received><blockfor><writeType>`, and in v5 a `[short] contentions`
    /// when the write type is `CAS` (written as 0: this server does not count contentions).
    WriteTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        write_type: String,
    },
    /// 0x1200: `<cl><received><blockfor><data_present>`.
    ReadTimeout {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// 0x1300: v4 `<cl><received><blockfor><numfailures><data_present>`;
    /// v5 `<cl><received><blockfor><reasonmap><data_present>`.
    ReadFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        /// Replica address and failure reason code.
        reasons: Vec<(IpAddr, u16)>,
        data_present: bool,
    },
    /// 0x1400: `<keyspace><function><arg_types>`.
    FunctionFailure {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
    },
    /// 0x1500: v4 `<cl><received><blockfor><numfailures><write_type>`;
    /// v5 `<cl><received><blockfor><reasonmap><write_type>`.
    WriteFailure {
        consistency: Consistency,
        received: i32,
        block_for: i32,
        reasons: Vec<(IpAddr, u16)>,
        write_type: String,
    },
    /// 0x1700 (v5 only): `<cl><received><blockfor>`. A v4 client is sent a 0x1100
    /// WRITE_TIMEOUT with write type `CAS` and the same fields instead.
    CasWriteUnknown {
        consistency: Consistency,
        received: i32,
        block_for: i32,
    },
    /// 0x2400: `<ks><table>` (table empty for a keyspace).
    AlreadyExists {
        keyspace: String,
        table: String,
    },
    /// 0x2500: the unknown id as `[short bytes]`.
    Unprepared {
        id: Bytes,
    },
}

/// RESULT: `[int] kind` then the kind's body.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultBody {
    Void,
    Rows(Rows),
    SetKeyspace(String),
    Prepared(PreparedResult),
    SchemaChange(SchemaChange),
}

/// The result of PREPARE.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedResult {
    pub id: Bytes,
    /// Written only in v5 (an empty `[short bytes]` if `None`).
    pub result_metadata_id: Option<Bytes>,
    pub bind_columns: Vec<ColumnSpec>,
    /// Index of the bind marker for each partition key column, in partition key order.
    pub pk_indexes: Vec<u16>,
    pub result_columns: Vec<ColumnSpec>,
}

pub use types::ColumnSpec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaChange {
    pub change_type: SchemaChangeType,
    pub target: SchemaChangeTarget,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaChangeType {
    Created,
    Updated,
    Dropped,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChangeTarget {
    Keyspace {
        keyspace: String,
    },
    Table {
        keyspace: String,
        name: String,
    },
    Type {
        keyspace: String,
        name: String,
    },
    Function {
        keyspace: String,
        name: String,
        args: Vec<String>,
    },
    Aggregate {
        keyspace: String,
        name: String,
        args: Vec<String>,
    },
}

/// A server-pushed event (sent on stream -1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    SchemaChange(SchemaChange),
    /// `change` is `NEW_NODE` or `REMOVED_NODE`.
    TopologyChange {
        change: String,
        addr: SocketAddr,
    },
    /// `change` is `UP` or `DOWN`.
    StatusChange {
        change: String,
        addr: SocketAddr,
    },
}

/// Metadata of a Rows result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowsMetadata {
    /// The column specs. May be left empty when they are not written (`no_metadata` without
    /// `new_metadata_id`): the column count comes from the rows (`RowsWriter`), so a server
    /// answering a prepared EXECUTE need not build specs it does not send.
    pub columns: Arc<[ColumnSpec]>,
    /// Set when there are more pages (flag Has_more_pages).
    pub paging_state: Option<Bytes>,
    /// The client asked to skip metadata: only flags, count and paging state are written.
    /// Overridden in v5 by `new_metadata_id` (see there).
    pub no_metadata: bool,
    /// v5: the result metadata changed since the client prepared; written with flag
    /// Metadata_changed (ignored in v4). Metadata_changed requires No_metadata to be unset
    /// (spec v5 section 4.2.5.2), so when this is set the full metadata is written even if
    /// `no_metadata` is.
    pub new_metadata_id: Option<Bytes>,
    /// `columns` as `encode_column_specs` wrote them. When set for the response's version it
    /// is written as it is instead of encoding `columns` again (a server answering many
    /// EXECUTEs of one statement encodes its specs once); it must encode `columns`.
    pub encoded_columns: Option<EncodedColumnSpecs>,
}

/// Column specs in their wire form for one protocol version (`encode_column_specs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedColumnSpecs {
    version: Version,
    /// Written with flag Global_tables_spec: every column is of one table.
    global: bool,
    bytes: Bytes,
}

impl EncodedColumnSpecs {
    pub fn version(&self) -> Version {
        self.version
    }
}

/// `columns` as a Rows result's metadata writes them for `version`.
pub fn encode_column_specs(version: Version, columns: &[ColumnSpec]) -> EncodedColumnSpecs {
    let global = global_table(columns);
    let mut out = BytesMut::new();
    put_column_specs(version, global, columns, &mut out);
    EncodedColumnSpecs {
        version,
        global: global.is_some(),
        bytes: out.freeze(),
    }
}

/// A Rows result: its metadata and its cells, encoded already (`RowsWriter`) or as values
/// that the frame's encoding copies straight into the frame (`Rows::from_cells`).
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    metadata: RowsMetadata,
    column_count: usize,
    row_count: i32,
    content: Content,
}

#[derive(Debug, Clone, PartialEq)]
enum Content {
    /// The `<rows_content>`, encoded.
    Encoded(Bytes),
    /// Rows of `column_count` serialized cells each (`None` is null).
    Cells(Vec<Vec<Option<Bytes>>>),
}

impl Rows {
    /// A result of `rows`, each of `column_count` cells (`None` is null), encoded only when its
    /// frame is: each value is copied once, into the frame, where a `RowsWriter` copies it
    /// into its own buffer first. A server answering a read has its cells as values already.
    pub fn from_cells(
        column_count: usize,
        rows: Vec<Vec<Option<Bytes>>>,
        metadata: RowsMetadata,
    ) -> Rows {
        assert!(
            rows.iter().all(|row| row.len() == column_count),
            "a row of a Rows result has a cell per column"
        );
        // As `RowsWriter`: without columns, no rows.
        let row_count = if column_count == 0 { 0 } else { rows.len() };
        Rows {
            metadata,
            column_count,
            row_count: i32::try_from(row_count).expect("fewer than 2^31 rows in one page"),
            content: Content::Cells(rows),
        }
    }

    pub fn metadata(&self) -> &RowsMetadata {
        &self.metadata
    }

    /// The metadata, to attach `encoded_columns` after the rows were written.
    pub fn metadata_mut(&mut self) -> &mut RowsMetadata {
        &mut self.metadata
    }

    pub fn row_count(&self) -> i32 {
        self.row_count
    }

    /// The `<rows_content>`: `row_count * column_count` `[bytes]`.
    pub fn content(&self) -> Bytes {
        match &self.content {
            Content::Encoded(bytes) => bytes.clone(),
            Content::Cells(_) => {
                let mut out = BytesMut::new();
                self.put_content(&mut out);
                out.freeze()
            }
        }
    }

    fn put_content(&self, out: &mut BytesMut) {
        match &self.content {
            Content::Encoded(bytes) => out.put_slice(bytes),
            Content::Cells(rows) => {
                let cells = rows.iter().flatten();
                out.reserve(
                    cells
                        .clone()
                        .map(|c| 4 + c.as_ref().map_or(0, Bytes::len))
                        .sum(),
                );
                for cell in cells {
                    put_bytes(out, cell.as_deref());
                }
            }
        }
    }
}

/// Builds `<rows_content>` cell by cell, in row-major order.
#[derive(Debug)]
pub struct RowsWriter {
    column_count: usize,
    cell_count: usize,
    content: BytesMut,
}

impl RowsWriter {
    pub fn new(column_count: usize) -> Self {
        Self::with_capacity(column_count, 0)
    }

    /// A writer whose buffer holds `content_bytes` of cells (4 bytes of length each, plus the
    /// values) before it grows.
    pub fn with_capacity(column_count: usize, content_bytes: usize) -> Self {
        RowsWriter {
            column_count,
            cell_count: 0,
            content: BytesMut::with_capacity(content_bytes),
        }
    }

    /// Appends one already-serialized cell; `None` is null (length -1).
    pub fn push_cell(&mut self, cell: Option<&[u8]>) {
        put_bytes(&mut self.content, cell);
        self.cell_count += 1;
    }

    /// Ends the result. Every row must be complete.
    pub fn finish(self, metadata: RowsMetadata) -> Rows {
        let row_count = if self.column_count == 0 {
            0
        } else {
            assert_eq!(
                self.cell_count % self.column_count,
                0,
                "RowsWriter got a partial row"
            );
            self.cell_count / self.column_count
        };
        Rows {
            metadata,
            column_count: self.column_count,
            row_count: i32::try_from(row_count).expect("fewer than 2^31 rows in one page"),
            content: Content::Encoded(self.content.freeze()),
        }
    }
}

/// Rows metadata flags (spec 4.2.5.2).
mod rows_flags {
    pub const GLOBAL_TABLES_SPEC: i32 = 0x0001;
    pub const HAS_MORE_PAGES: i32 = 0x0002;
    pub const NO_METADATA: i32 = 0x0004;
    pub const METADATA_CHANGED: i32 = 0x0008;
}

/// RESULT kinds.
mod result_kind {
    pub const VOID: i32 = 0x0001;
    pub const ROWS: i32 = 0x0002;
    pub const SET_KEYSPACE: i32 = 0x0003;
    pub const PREPARED: i32 = 0x0004;
    pub const SCHEMA_CHANGE: i32 = 0x0005;
}

impl Response {
    /// The frame opcode for this response.
    pub fn opcode(&self) -> u8 {
        match self {
            Response::Error(_) => opcode::ERROR,
            Response::Ready => opcode::READY,
            Response::Authenticate(_) => opcode::AUTHENTICATE,
            Response::Supported(_) => opcode::SUPPORTED,
            Response::Result(_) => opcode::RESULT,
            Response::Event(_) => opcode::EVENT,
            Response::AuthChallenge(_) => opcode::AUTH_CHALLENGE,
            Response::AuthSuccess(_) => opcode::AUTH_SUCCESS,
        }
    }

    /// Appends the body (no frame header) for `version`.
    pub fn encode_body(&self, version: Version, out: &mut BytesMut) {
        match self {
            Response::Error(e) => encode_error(version, e, out),
            Response::Ready => {}
            Response::Authenticate(class) => put_string(out, class),
            Response::Supported(options) => {
                let n = u16::try_from(options.len()).expect("few SUPPORTED options");
                out.put_u16(n);
                for (k, values) in options {
                    put_string(out, k);
                    put_string_list(out, values);
                }
            }
            Response::Result(result) => encode_result(version, result, out),
            Response::Event(event) => encode_event(event, out),
            Response::AuthChallenge(token) | Response::AuthSuccess(token) => {
                put_bytes(out, token.as_deref())
            }
        }
    }
}

fn encode_error(version: Version, e: &ErrorBody, out: &mut BytesMut) {
    // CAS_WRITE_UNKNOWN (0x1700) exists only from v5; a v4 client gets it as a WRITE_TIMEOUT
    // of write type CAS, as Cassandra's `ErrorMessage.getBackwardsCompatibleException` does.
    if let (
        Version::V4,
        ErrorCode::CasWriteUnknown,
        ErrorExtra::CasWriteUnknown {
            consistency,
            received,
            block_for,
        },
    ) = (version, e.code, &e.extra)
    {
        let timeout = ErrorBody {
            code: ErrorCode::WriteTimeout,
            message: e.message.clone(),
            extra: ErrorExtra::WriteTimeout {
                consistency: *consistency,
                received: *received,
                block_for: *block_for,
                write_type: "CAS".to_string(),
            },
        };
        return encode_error(version, &timeout, out);
    }
    out.put_i32(e.code.code());
    put_string(out, &e.message);
    match &e.extra {
        ErrorExtra::None => {}
        ErrorExtra::Unavailable {
            consistency,
            required,
            alive,
        } => {
            out.put_u16(consistency.code());
            out.put_i32(*required);
            out.put_i32(*alive);
        }
        ErrorExtra::WriteTimeout {
            consistency,
            received,
            block_for,
            write_type,
        } => {
            out.put_u16(consistency.code());
            out.put_i32(*received);
            out.put_i32(*block_for);
            put_string(out, write_type);
            if version == Version::V5 && write_type == "CAS" {
                out.put_u16(0);
            }
        }
        ErrorExtra::ReadTimeout {
            consistency,
            received,
            block_for,
            data_present,
        } => {
            out.put_u16(consistency.code());
            out.put_i32(*received);
            out.put_i32(*block_for);
            out.put_u8(u8::from(*data_present));
        }
        ErrorExtra::ReadFailure {
            consistency,
            received,
            block_for,
            reasons,
            data_present,
        } => {
            out.put_u16(consistency.code());
            out.put_i32(*received);
            out.put_i32(*block_for);
            put_failures(version, reasons, out);
            out.put_u8(u8::from(*data_present));
        }
        ErrorExtra::FunctionFailure {
            keyspace,
            function,
            arg_types,
        } => {
            put_string(out, keyspace);
            put_string(out, function);
            put_string_list(out, arg_types);
        }
        ErrorExtra::WriteFailure {
            consistency,
            received,
            block_for,
            reasons,
            write_type,
        } => {
            out.put_u16(consistency.code());
            out.put_i32(*received);
            out.put_i32(*block_for);
            put_failures(version, reasons, out);
            put_string(out, write_type);
        }
        ErrorExtra::CasWriteUnknown {
            consistency,
            received,
            block_for,
        } => {
            out.put_u16(consistency.code());
            out.put_i32(*received);
            out.put_i32(*block_for);
        }
        ErrorExtra::AlreadyExists { keyspace, table } => {
            put_string(out, keyspace);
            put_string(out, table);
        }
        ErrorExtra::Unprepared { id } => put_short_bytes(out, id),
    }
}

/// v4 `[int] numfailures`; v5 `<reasonmap>`: `[int] n` then n × (`[inetaddr]`, `[short]`).
fn put_failures(version: Version, reasons: &[(IpAddr, u16)], out: &mut BytesMut) {
    let n = i32::try_from(reasons.len()).expect("fewer than 2^31 replicas");
    out.put_i32(n);
    if version == Version::V5 {
        for (addr, code) in reasons {
            put_inetaddr(out, addr);
            out.put_u16(*code);
        }
    }
}

fn encode_result(version: Version, result: &ResultBody, out: &mut BytesMut) {
    match result {
        ResultBody::Void => out.put_i32(result_kind::VOID),
        ResultBody::Rows(rows) => {
            out.put_i32(result_kind::ROWS);
            put_rows_metadata(version, &rows.metadata, rows.column_count, out);
            out.put_i32(rows.row_count);
            rows.put_content(out);
        }
        ResultBody::SetKeyspace(keyspace) => {
            out.put_i32(result_kind::SET_KEYSPACE);
            put_string(out, keyspace);
        }
        ResultBody::Prepared(prepared) => {
            out.put_i32(result_kind::PREPARED);
            put_prepared(version, prepared, out);
        }
        ResultBody::SchemaChange(change) => {
            out.put_i32(result_kind::SCHEMA_CHANGE);
            put_schema_change(change, out);
        }
    }
}

/// The shared keyspace and table, when every column has the same (Global_tables_spec).
fn global_table(columns: &[ColumnSpec]) -> Option<(&str, &str)> {
    let first = columns.first()?;
    columns
        .iter()
        .all(|c| c.keyspace == first.keyspace && c.table == first.table)
        .then_some((first.keyspace.as_str(), first.table.as_str()))
}

fn count(columns: &[ColumnSpec]) -> i32 {
    i32::try_from(columns.len()).expect("fewer than 2^31 columns")
}

/// `[<global_table_spec>]<col_spec_1>...<col_spec_n>`, each spec `[(<ks><table>)]<name><type>`.
fn put_column_specs(
    version: Version,
    global: Option<(&str, &str)>,
    columns: &[ColumnSpec],
    out: &mut BytesMut,
) {
    if let Some((keyspace, table)) = global {
        put_string(out, keyspace);
        put_string(out, table);
    }
    for c in columns {
        if global.is_none() {
            put_string(out, &c.keyspace);
            put_string(out, &c.table);
        }
        put_string(out, &c.name);
        put_type_option(version, out, &c.ty);
    }
}

/// Rows `<metadata>`: `<flags><columns_count>[<paging_state>][<new_metadata_id>]
/// [<global_table_spec>?<col_spec_1>...<col_spec_n>]`.
fn put_rows_metadata(version: Version, m: &RowsMetadata, column_count: usize, out: &mut BytesMut) {
    let new_metadata_id = m
        .new_metadata_id
        .as_ref()
        .filter(|_| version == Version::V5);
    // Metadata_changed and No_metadata are mutually exclusive: a client told that the
    // metadata changed needs the new metadata (drivers stop reading at No_metadata).
    let no_metadata = m.no_metadata && new_metadata_id.is_none();
    let encoded = m
        .encoded_columns
        .as_ref()
        .filter(|e| e.version == version && !no_metadata);
    let global = if no_metadata || encoded.is_some() {
        None
    } else {
        global_table(&m.columns)
    };
    let mut flags = 0;
    if no_metadata {
        flags |= rows_flags::NO_METADATA;
    } else if encoded.map_or(global.is_some(), |e| e.global) {
        flags |= rows_flags::GLOBAL_TABLES_SPEC;
    }
    if m.paging_state.is_some() {
        flags |= rows_flags::HAS_MORE_PAGES;
    }
    if new_metadata_id.is_some() {
        flags |= rows_flags::METADATA_CHANGED;
    }
    out.put_i32(flags);
    out.put_i32(i32::try_from(column_count).expect("fewer than 2^31 columns"));
    if let Some(paging_state) = &m.paging_state {
        put_bytes(out, Some(paging_state));
    }
    if let Some(id) = new_metadata_id {
        put_short_bytes(out, id);
    }
    if !no_metadata {
        assert_eq!(
            m.columns.len(),
            column_count,
            "rows metadata written without its column specs"
        );
        match encoded {
            Some(e) => out.extend_from_slice(&e.bytes),
            None => put_column_specs(version, global, &m.columns, out),
        }
    }
}

/// v4 `<id><metadata><result_metadata>`; v5 `<id><result_metadata_id><metadata><result_metadata>`.
/// `<metadata>` is `<flags><columns_count><pk_count>[<pk_index_1>...]` then the specs.
/// An empty `<result_metadata>` is flags No_metadata with 0 columns, as Cassandra sends for
/// statements that are not SELECTs.
fn put_prepared(version: Version, p: &PreparedResult, out: &mut BytesMut) {
    put_short_bytes(out, &p.id);
    if version == Version::V5 {
        put_short_bytes(out, p.result_metadata_id.as_deref().unwrap_or_default());
    }
    let global = global_table(&p.bind_columns);
    out.put_i32(if global.is_some() {
        rows_flags::GLOBAL_TABLES_SPEC
    } else {
        0
    });
    out.put_i32(count(&p.bind_columns));
    out.put_i32(i32::try_from(p.pk_indexes.len()).expect("few partition key columns"));
    for i in &p.pk_indexes {
        out.put_u16(*i);
    }
    put_column_specs(version, global, &p.bind_columns, out);

    if p.result_columns.is_empty() {
        out.put_i32(rows_flags::NO_METADATA);
        out.put_i32(0);
    } else {
        let metadata = RowsMetadata {
            columns: p.result_columns.as_slice().into(),
            paging_state: None,
            no_metadata: false,
            new_metadata_id: None,
            encoded_columns: None,
        };
        put_rows_metadata(version, &metadata, p.result_columns.len(), out);
    }
}

/// `<change_type><target><options>`, shared by RESULT Schema_change and the EVENT.
fn put_schema_change(change: &SchemaChange, out: &mut BytesMut) {
    put_string(
        out,
        match change.change_type {
            SchemaChangeType::Created => "CREATED",
            SchemaChangeType::Updated => "UPDATED",
            SchemaChangeType::Dropped => "DROPPED",
        },
    );
    match &change.target {
        SchemaChangeTarget::Keyspace { keyspace } => {
            put_string(out, "KEYSPACE");
            put_string(out, keyspace);
        }
        SchemaChangeTarget::Table { keyspace, name } => {
            put_string(out, "TABLE");
            put_string(out, keyspace);
            put_string(out, name);
        }
        SchemaChangeTarget::Type { keyspace, name } => {
            put_string(out, "TYPE");
            put_string(out, keyspace);
            put_string(out, name);
        }
        SchemaChangeTarget::Function {
            keyspace,
            name,
            args,
        } => {
            put_string(out, "FUNCTION");
            put_string(out, keyspace);
            put_string(out, name);
            put_string_list(out, args);
        }
        SchemaChangeTarget::Aggregate {
            keyspace,
            name,
            args,
        } => {
            put_string(out, "AGGREGATE");
            put_string(out, keyspace);
            put_string(out, name);
            put_string_list(out, args);
        }
    }
}

fn encode_event(event: &Event, out: &mut BytesMut) {
    match event {
        Event::SchemaChange(change) => {
            put_string(out, "SCHEMA_CHANGE");
            put_schema_change(change, out);
        }
        Event::TopologyChange { change, addr } => {
            put_string(out, "TOPOLOGY_CHANGE");
            put_string(out, change);
            put_inet(out, addr);
        }
        Event::StatusChange { change, addr } => {
            put_string(out, "STATUS_CHANGE");
            put_string(out, change);
            put_inet(out, addr);
        }
    }
}
