//! Any text given to the parser returns `Ok` or `Err`, never panics or overflows the stack,
//! and what parses has its bind markers numbered 0..n.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(statement) = cql_syntax::parse_statement(text) {
        let markers = cql_syntax::bind_markers(&statement);
        assert!(markers
            .iter()
            .enumerate()
            .all(|(i, m)| m.index as usize == i));
    }
    let _ = cql_syntax::parse_statements(text);
    let _ = cql_syntax::parse_type(text);
    let _ = cql_syntax::parse_term(text);
});
