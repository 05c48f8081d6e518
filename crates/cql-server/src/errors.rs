//! The one place where query errors become protocol error bodies.

use cql_protocol::{Consistency, ErrorBody, ErrorCode, ErrorExtra};
use query::{ConsistencyLevel, QueryError};

pub(crate) fn consistency_to_wire(c: ConsistencyLevel) -> Consistency {
    match c {
        ConsistencyLevel::Any => Consistency::Any,
        ConsistencyLevel::One => Consistency::One,
        ConsistencyLevel::Two => Consistency::Two,
        ConsistencyLevel::Three => Consistency::Three,
        ConsistencyLevel::Quorum => Consistency::Quorum,
        ConsistencyLevel::All => Consistency::All,
        ConsistencyLevel::LocalQuorum => Consistency::LocalQuorum,
        ConsistencyLevel::EachQuorum => Consistency::EachQuorum,
        ConsistencyLevel::Serial => Consistency::Serial,
        ConsistencyLevel::LocalSerial => Consistency::LocalSerial,
        ConsistencyLevel::LocalOne => Consistency::LocalOne,
    }
}

pub(crate) fn consistency_from_wire(c: Consistency) -> ConsistencyLevel {
    match c {
        Consistency::Any => ConsistencyLevel::Any,
        Consistency::One => ConsistencyLevel::One,
        Consistency::Two => ConsistencyLevel::Two,
        Consistency::Three => ConsistencyLevel::Three,
        Consistency::Quorum => ConsistencyLevel::Quorum,
        Consistency::All => ConsistencyLevel::All,
        Consistency::LocalQuorum => ConsistencyLevel::LocalQuorum,
        Consistency::EachQuorum => ConsistencyLevel::EachQuorum,
        Consistency::Serial => ConsistencyLevel::Serial,
        Consistency::LocalSerial => ConsistencyLevel::LocalSerial,
        Consistency::LocalOne => ConsistencyLevel::LocalOne,
    }
}

pub(crate) fn error_body(e: &QueryError) -> ErrorBody {
    let message = e.to_string();
    let (code, extra) = match e {
        QueryError::Syntax(_) => (ErrorCode::SyntaxError, ErrorExtra::None),
        QueryError::Invalid(_) => (ErrorCode::Invalid, ErrorExtra::None),
        QueryError::Unauthorized(_) => (ErrorCode::Unauthorized, ErrorExtra::None),
        QueryError::Config(_) => (ErrorCode::ConfigError, ErrorExtra::None),
        QueryError::AlreadyExists {
            keyspace, table, ..
        } => (
            ErrorCode::AlreadyExists,
            ErrorExtra::AlreadyExists {
                keyspace: keyspace.clone(),
                table: table.clone(),
            },
        ),
        QueryError::Unprepared { id } => (
            ErrorCode::Unprepared,
            ErrorExtra::Unprepared {
                id: bytes::Bytes::copy_from_slice(id),
            },
        ),
        QueryError::Unavailable {
            consistency,
            required,
            alive,
        } => (
            ErrorCode::Unavailable,
            ErrorExtra::Unavailable {
                consistency: consistency_to_wire(*consistency),
                required: *required,
                alive: *alive,
            },
        ),
        QueryError::Truncate(_) => (ErrorCode::TruncateError, ErrorExtra::None),
        QueryError::ReadTimeout {
            consistency,
            received,
            block_for,
            data_present,
        } => (
            ErrorCode::ReadTimeout,
            ErrorExtra::ReadTimeout {
                consistency: consistency_to_wire(*consistency),
                received: *received,
                block_for: *block_for,
                data_present: *data_present,
            },
        ),
        QueryError::WriteTimeout {
            consistency,
            received,
            block_for,
            write_type,
        } => (
            ErrorCode::WriteTimeout,
            ErrorExtra::WriteTimeout {
                consistency: consistency_to_wire(*consistency),
                received: *received,
                block_for: *block_for,
                write_type: write_type.as_str().to_string(),
            },
        ),
        QueryError::FunctionFailure {
            keyspace,
            function,
            arg_types,
            ..
        } => (
            ErrorCode::FunctionFailure,
            ErrorExtra::FunctionFailure {
                keyspace: keyspace.clone(),
                function: function.clone(),
                arg_types: arg_types.clone(),
            },
        ),
        QueryError::Server(_) => (ErrorCode::ServerError, ErrorExtra::None),
    };
    ErrorBody {
        code,
        message,
        extra,
    }
}
