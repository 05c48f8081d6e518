//! Any text given to the parser returns `Ok` or `Err`, never panics or overflows the stack,
//! and what parses has its bind markers numbered 0..n and no tree deeper than
//! `MAX_NESTING_DEPTH`. Each input runs on a thread of `budget::STACK_SIZE_BYTES`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../budget.rs"]
mod budget;

fn check(text: &str) {
    let limit = cql_syntax::MAX_NESTING_DEPTH as usize;
    if let Ok(statement) = cql_syntax::parse_statement(text) {
        let markers = cql_syntax::bind_markers(&statement);
        assert!(markers
            .iter()
            .enumerate()
            .all(|(i, m)| m.index as usize == i));
        assert!(cql_syntax::expression_depth(&statement) <= limit);
    }
    if let Ok(statements) = cql_syntax::parse_statements(text) {
        assert!(statements
            .iter()
            .all(|s| cql_syntax::expression_depth(s) <= limit));
    }
    if let Ok(ty) = cql_syntax::parse_type(text) {
        assert!(cql_syntax::type_depth(&ty) <= limit);
    }
    if let Ok(term) = cql_syntax::parse_term(text) {
        assert!(cql_syntax::term_depth(&term) <= limit);
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let text = text.to_string();
    budget::run(move || check(&text));
});
