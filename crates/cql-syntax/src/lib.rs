//! CQL text to syntax tree: the lexer, a hand-written recursive-descent parser following
//! Apache Cassandra 5.0's `Parser.g`/`Lexer.g` (plus ScyllaDB's `USING TIMEOUT`), and the AST.
//!
//! This crate owns *syntax* only. It must never depend on the `types`, `schema` or any
//! service crate: it does not know which keyspaces, tables or columns exist, nor whether a
//! literal fits a column's type. It is pure and synchronous, and it never panics on any
//! input (see the fuzz target in `fuzz/` and the mutation test in `tests.rs`).
//!
//! Error messages follow ANTLR's wording as Cassandra reports it in a `SyntaxException`
//! (`line 1:7 no viable alternative at input 'FROM'`), with 0-based columns as ANTLR counts
//! them.

pub mod ast;
mod depth;
mod lexer;
mod markers;
mod parser;
#[cfg(test)]
mod tests;

pub use ast::*;
pub use depth::{expression_depth, term_depth, type_depth};
pub use lexer::{is_reserved, RESERVED_KEYWORDS};
pub use markers::{bind_marker_count, bind_markers};
pub use parser::NATIVE_TYPES;

use lexer::Punct;
use parser::Parser;

/// Longest statement text accepted. Matches the largest native protocol frame Cassandra
/// accepts by default (`native_transport_max_frame_size` 16 MiB); anything longer could not
/// have arrived in one QUERY or PREPARE message anyway.
pub const MAX_STATEMENT_LENGTH_BYTES: usize = 16 * 1024 * 1024;

/// How many levels deep any tree the parser builds may go (see `expression_depth`): nested
/// collection, tuple and user type literals, function arguments, casts, type hints, types,
/// parenthesised relations, and every link of a chain, since `1+1+...+1` with n operands (or
/// `a.f[1].g...` with n modifiers) is a tree n levels deep. It bounds the parser's recursion
/// and every later walk over the tree (marker numbering, type resolution, evaluation, selector
/// compilation, dropping it), so hostile input (`((((...`, a 1,000-operand sum) gets a syntax
/// error instead of overflowing a thread's stack. Real statements stay far below it: a sum of
/// 60 operands or 30 nested list literals still parses. The deepest statements allowed need
/// about 1 MiB of stack in a debug build (`query::STATEMENT_STACK_SIZE_BYTES`, the stack the
/// server's threads that run statements get, says how much they have).
pub const MAX_NESTING_DEPTH: u32 = 64;

/// A syntax error, positioned like ANTLR does it: 1-based line, 0-based column. Line 0 marks
/// an error Cassandra's grammar reports without a position (its `addRecognitionError`, or a
/// refusal while building the statement, such as a bind marker for a keyspace name): the
/// message alone, as Cassandra words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl ParseError {
    /// An error without a position (see the type's comment).
    pub fn unpositioned(message: impl Into<String>) -> ParseError {
        ParseError {
            line: 0,
            column: 0,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}:{} {}", self.line, self.column, self.message)
        }
    }
}

fn check_length(text: &str) -> Result<(), ParseError> {
    if text.len() > MAX_STATEMENT_LENGTH_BYTES {
        return Err(ParseError {
            line: 1,
            column: 0,
            message: format!(
                "statement of {} bytes exceeds the maximum of {MAX_STATEMENT_LENGTH_BYTES} bytes",
                text.len()
            ),
        });
    }
    Ok(())
}

/// Parses exactly one statement, optionally followed by `;`.
pub fn parse_statement(text: &str) -> Result<Statement, ParseError> {
    parse_statement_counting(text).map(|(statement, _)| statement)
}

/// `parse_statement`, also returning how many markers the parser numbered (tests compare it
/// with what `bind_markers` finds in the tree).
pub(crate) fn parse_statement_counting(text: &str) -> Result<(Statement, u32), ParseError> {
    check_length(text)?;
    let mut parser = Parser::new(text, lexer::tokenize(text)?);
    let statement = parser.statement()?;
    parser.accept(Punct::Semicolon);
    if !parser.at_eof() {
        return Err(parser.mismatched("EOF"));
    }
    Ok((statement, parser.markers))
}

/// Parses a script: statements separated (and optionally terminated) by `;`. Each statement
/// numbers its bind markers from 0.
pub fn parse_statements(text: &str) -> Result<Vec<Statement>, ParseError> {
    check_length(text)?;
    let tokens = lexer::tokenize(text)?;
    let mut parser = Parser::new(text, tokens);
    let mut statements = Vec::new();
    loop {
        while parser.accept(Punct::Semicolon) {}
        if parser.at_eof() {
            return Ok(statements);
        }
        parser.markers = 0;
        statements.push(parser.statement()?);
        if !parser.accept(Punct::Semicolon) && !parser.at_eof() {
            return Err(parser.mismatched("';'"));
        }
    }
}

/// Parses a type as written in CQL or stored in `system_schema` (`frozen<map<text, int>>`).
pub fn parse_type(text: &str) -> Result<TypeExpr, ParseError> {
    check_length(text)?;
    let tokens = lexer::tokenize(text)?;
    let mut parser = Parser::new(text, tokens);
    let ty = parser.type_expr()?;
    if !parser.at_eof() {
        return Err(parser.mismatched("EOF"));
    }
    Ok(ty)
}

/// Parses a single term (a literal, marker, collection, function call...), e.g. a default or
/// a value written in a script.
pub fn parse_term(text: &str) -> Result<Term, ParseError> {
    check_length(text)?;
    let tokens = lexer::tokenize(text)?;
    let mut parser = Parser::new(text, tokens);
    let term = parser.term()?;
    if !parser.at_eof() {
        return Err(parser.mismatched("EOF"));
    }
    Ok(term)
}
