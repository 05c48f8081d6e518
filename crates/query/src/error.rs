//! Errors a statement can end with. Each variant corresponds to one CQL error code; the server
//! maps them to protocol error bodies in one place.

use coordinator::{ConsistencyLevel, CoordinatorError, WriteType};
use schema::SchemaError;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// 0x2000
    #[error("{0}")]
    Syntax(String),
    /// 0x2200
    #[error("{0}")]
    Invalid(String),
    /// 0x2100
    #[error("{0}")]
    Unauthorized(String),
    /// 0x2300
    #[error("{0}")]
    Config(String),
    /// 0x2400
    #[error("{message}")]
    AlreadyExists {
        keyspace: String,
        table: String,
        message: String,
    },
    /// 0x2500
    #[error("Prepared query with ID {} not found (either the query was not prepared on this host (maybe the host has been restarted?) or you have prepared too many queries and it has been evicted from the internal cache)", hex(.id))]
    Unprepared { id: Vec<u8> },
    /// 0x1000
    #[error("Cannot achieve consistency level {consistency}")]
    Unavailable {
        consistency: ConsistencyLevel,
        required: i32,
        alive: i32,
    },
    /// 0x1200: the request's deadline (`read_request_timeout`, `range_request_timeout`)
    /// passed, in Cassandra's words.
    #[error("Operation timed out - received only {received} responses.")]
    ReadTimeout {
        consistency: ConsistencyLevel,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    /// 0x1100: the write's deadline (`write_request_timeout`) passed; it may still be applied.
    #[error("Operation timed out - received only {received} responses.")]
    WriteTimeout {
        consistency: ConsistencyLevel,
        received: i32,
        block_for: i32,
        write_type: WriteType,
    },
    /// 0x0000
    #[error("{0}")]
    Server(String),
    /// 0x1003
    #[error("{0}")]
    Truncate(String),
    /// 0x1400: a function (or an operator, which Cassandra runs as the function `_add`,
    /// `_divide`...) failed while it executed: division by zero, overflow, bad `fromJson` input.
    #[error("{message}")]
    FunctionFailure {
        keyspace: String,
        function: String,
        /// The CQL names of the function's argument types, as the signature declares them.
        arg_types: Vec<String>,
        message: String,
    },
}

impl QueryError {
    /// The failure of the native function `system.<function>` taking `arg_types`.
    pub(crate) fn function_failure(
        function: &str,
        arg_types: &[types::CqlType],
        message: String,
    ) -> QueryError {
        QueryError::FunctionFailure {
            keyspace: "system".to_string(),
            function: function.to_string(),
            arg_types: arg_types.iter().map(ToString::to_string).collect(),
            message,
        }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl From<SchemaError> for QueryError {
    fn from(e: SchemaError) -> Self {
        match e {
            SchemaError::Invalid(m) => QueryError::Invalid(m),
            SchemaError::Config(m) => QueryError::Config(m),
            SchemaError::Syntax(m) => QueryError::Syntax(m),
            SchemaError::AlreadyExists {
                keyspace,
                table,
                message,
            } => QueryError::AlreadyExists {
                keyspace,
                table,
                message,
            },
            SchemaError::Corrupt(m) => QueryError::Server(m),
        }
    }
}

impl From<schema_service::SchemaServiceError> for QueryError {
    fn from(e: schema_service::SchemaServiceError) -> Self {
        tracing::error!(error = %e, "a schema change failed");
        QueryError::Server(e.to_string())
    }
}

impl From<CoordinatorError> for QueryError {
    fn from(e: CoordinatorError) -> Self {
        match e {
            CoordinatorError::Unavailable {
                consistency,
                required,
                alive,
            } => QueryError::Unavailable {
                consistency,
                required,
                alive,
            },
            CoordinatorError::InvalidConsistency(m) => QueryError::Invalid(m),
            CoordinatorError::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
            } => QueryError::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
            },
            CoordinatorError::WriteTimeout {
                consistency,
                received,
                block_for,
                write_type,
            } => QueryError::WriteTimeout {
                consistency,
                received,
                block_for,
                write_type,
            },
            other => {
                tracing::error!(error = %other, "request failed in the storage layer");
                QueryError::Server(other.to_string())
            }
        }
    }
}

impl From<types::TypeError> for QueryError {
    fn from(e: types::TypeError) -> Self {
        QueryError::Invalid(e.to_string())
    }
}
