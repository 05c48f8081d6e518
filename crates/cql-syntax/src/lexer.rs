//! Hand-written lexer following Cassandra's `Lexer.g`.
//!
//! Keywords are not separate token kinds: an unquoted word is an `Ident` holding its lowercased
//! text, and the parser asks whether it is the keyword it wants. Reserved keywords (those that
//! may never be used as names) are listed in [`RESERVED_KEYWORDS`].
//!
//! Where `Lexer.g` has overlapping rules, ANTLR takes the longest match and, on a tie, the rule
//! defined first; the same choices are made here (e.g. `P1D` is a duration, not a name, and
//! `-1` is one integer token, which is why `c = c -1` has its own production in the parser).

use crate::ParseError;

/// Keywords that can never be unquoted names: every keyword of `Lexer.g` that is not listed in
/// `unreserved_keyword` of `Parser.g`, plus the literals `true`/`false`.
pub const RESERVED_KEYWORDS: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "false",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "materialized",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "true",
    "truncate",
    "unlogged",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// `name` must already be lowercase.
pub fn is_reserved(name: &str) -> bool {
    RESERVED_KEYWORDS.binary_search(&name).is_ok()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Punct {
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Semicolon,
    Dot,
    Range,
    Colon,
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    PlusEq,
    MinusEq,
    QMark,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// Unquoted word, lowercased (keywords included).
    Ident(String),
    /// `"Name"` with `""` unescaped; may be empty (`""`, Cassandra's EMPTY_QUOTED_NAME).
    Quoted(String),
    Str(String),
    Integer(String),
    Float(String),
    Boolean(bool),
    Duration(String),
    Uuid(String),
    /// Digits after `0x`.
    Hex(String),
    NegNaN,
    NegInfinity,
    Punct(Punct),
    Eof,
}

#[derive(Debug, Clone)]
pub struct Token {
    pub tok: Tok,
    /// Byte range in the source, used to quote the offending input in errors.
    pub start: usize,
    pub end: usize,
    pub line: u32,
    /// 0-based, in characters, as ANTLR reports it.
    pub column: u32,
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    line: u32,
    line_start: usize,
    /// The last column computed, `(byte position, column)`: tokens are lexed in order, so each
    /// token's column counts on from the previous one's instead of from the line's start
    /// (which made a long one-line statement quadratic: 2 s of a debug build's time for an
    /// IN of 100,000 values).
    last_column: std::cell::Cell<(usize, u32)>,
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl<'a> Lexer<'a> {
    fn at(&self, offset: usize) -> u8 {
        self.bytes.get(self.pos + offset).copied().unwrap_or(0)
    }

    fn column_of(&self, pos: usize) -> u32 {
        let (last_pos, last_column) = self.last_column.get();
        let (start, base) = if (self.line_start..=pos).contains(&last_pos) {
            (last_pos, last_column)
        } else {
            (self.line_start.min(pos), 0)
        };
        let column = base
            + self
                .src
                .get(start..pos)
                .map_or(0, |s| s.chars().count() as u32);
        self.last_column.set((pos, column));
        column
    }

    /// Advances over `n` bytes, keeping line bookkeeping right.
    fn bump(&mut self, n: usize) {
        let end = (self.pos + n).min(self.bytes.len());
        while self.pos < end {
            if self.bytes[self.pos] == b'\n' {
                self.line += 1;
                self.line_start = self.pos + 1;
            }
            self.pos += 1;
        }
    }

    fn error_at(&self, pos: usize, message: String) -> ParseError {
        ParseError {
            line: self.line,
            column: self.column_of(pos),
            message,
        }
    }

    fn eof_error(&self, expecting: &str) -> ParseError {
        self.error_at(
            self.pos,
            format!("mismatched character '<EOF>' expecting {expecting}"),
        )
    }

    fn skip_trivia(&mut self) -> Result<(), ParseError> {
        loop {
            match (self.at(0), self.at(1)) {
                (b' ' | b'\t' | b'\n' | b'\r', _) => self.bump(1),
                (b'-', b'-') | (b'/', b'/') => {
                    while self.pos < self.bytes.len() && self.at(0) != b'\n' {
                        self.bump(1);
                    }
                }
                (b'/', b'*') => {
                    self.bump(2);
                    loop {
                        if self.pos >= self.bytes.len() {
                            return Err(self.eof_error("'*/'"));
                        }
                        if self.at(0) == b'*' && self.at(1) == b'/' {
                            self.bump(2);
                            break;
                        }
                        self.bump(1);
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// Length of an 8-4-4-4-12 hex UUID at the current position, if there is one.
    fn uuid_len(&self) -> Option<usize> {
        let groups = [8, 4, 4, 4, 12];
        let mut i = 0;
        for (n, &len) in groups.iter().enumerate() {
            if n > 0 {
                if self.at(i) != b'-' {
                    return None;
                }
                i += 1;
            }
            for _ in 0..len {
                if !is_hex(self.at(i)) {
                    return None;
                }
                i += 1;
            }
        }
        Some(i)
    }

    fn digits_at(&self, from: usize) -> usize {
        let mut i = from;
        while self.at(i).is_ascii_digit() {
            i += 1;
        }
        i - from
    }

    /// Length of an ISO 8601 duration starting at `from` (which points at `P`), following the
    /// DURATION rule of `Lexer.g` (designators are uppercase there, so they are here).
    fn iso_duration_len(&self, from: usize) -> Option<usize> {
        if self.at(from) != b'P' {
            return None;
        }
        let p = from + 1;
        // Alternative format: P0001-02-03T04:05:06.
        let alt = b"dddd-dd-ddTdd:dd:dd";
        if alt.iter().enumerate().all(|(k, &c)| {
            let b = self.at(p + k);
            if c == b'd' {
                b.is_ascii_digit()
            } else {
                b == c
            }
        }) {
            return Some(p + alt.len() - from);
        }
        // Designator sequences: each is DIGIT+ followed by one letter, in a fixed order.
        let run = |at: usize, allowed: &[u8]| -> Option<(usize, u8)> {
            let d = self.digits_at(at);
            if d == 0 {
                return None;
            }
            let letter = self.at(at + d);
            allowed.contains(&letter).then_some((d + 1, letter))
        };
        let time_part = |at: usize| -> Option<usize> {
            if self.at(at) != b'T' {
                return None;
            }
            let mut i = at + 1;
            let mut allowed: &[u8] = b"HMS";
            let mut any = false;
            while let Some((len, letter)) = run(i, allowed) {
                i += len;
                any = true;
                allowed = match letter {
                    b'H' => b"MS",
                    b'M' => b"S",
                    _ => b"",
                };
            }
            any.then_some(i - at)
        };
        if let Some(len) = time_part(p) {
            return Some(p + len - from);
        }
        if let Some((len, b'W')) = run(p, b"W") {
            return Some(p + len - from);
        }
        let mut i = p;
        let mut allowed: &[u8] = b"YMD";
        let mut any = false;
        while let Some((len, letter)) = run(i, allowed) {
            i += len;
            any = true;
            allowed = match letter {
                b'Y' => b"MD",
                b'M' => b"D",
                _ => b"",
            };
        }
        if !any {
            return None;
        }
        if let Some(len) = time_part(i) {
            i += len;
        }
        Some(i - from)
    }

    /// Length of a duration unit (`y mo w d h m s ms us µs ns`, case-insensitive) at `at`.
    fn duration_unit_len(&self, at: usize) -> usize {
        let a = self.at(at).to_ascii_lowercase();
        let b = self.at(at + 1).to_ascii_lowercase();
        match (a, b) {
            (b'm', b'o') | (b'm', b's') | (b'u', b's') | (b'n', b's') => 2,
            // 'µ' is C2 B5 in UTF-8.
            (0xC2, 0xB5) if self.at(at + 2).eq_ignore_ascii_case(&b's') => 3,
            (b'y' | b'w' | b'd' | b'h' | b'm' | b's', _) => 1,
            _ => 0,
        }
    }

    /// Number-like token at the current position (optional leading `-` included): integer,
    /// float, or `DIGIT+ UNIT (DIGIT+ UNIT)*` duration.
    fn number(&mut self, start: usize) -> Tok {
        let sign = usize::from(self.at(0) == b'-');
        let int_end = sign + self.digits_at(sign);
        // Duration: digits followed by a unit.
        let unit = self.duration_unit_len(int_end);
        if unit > 0 {
            let mut i = int_end + unit;
            loop {
                let d = self.digits_at(i);
                if d == 0 {
                    break;
                }
                let u = self.duration_unit_len(i + d);
                if u == 0 {
                    break;
                }
                i += d + u;
            }
            self.bump(i);
            return Tok::Duration(self.src[start..self.pos].to_string());
        }
        let mut i = int_end;
        let mut is_float = false;
        // `1..3` is INTEGER RANGE INTEGER; `1.` and `1.5` are floats.
        if self.at(i) == b'.' && self.at(i + 1) != b'.' {
            is_float = true;
            i += 1;
            i += self.digits_at(i);
        }
        if self.at(i) == b'e' || self.at(i) == b'E' {
            let sign_len = usize::from(matches!(self.at(i + 1), b'+' | b'-'));
            let d = self.digits_at(i + 1 + sign_len);
            if d > 0 {
                is_float = true;
                i += 1 + sign_len + d;
            }
        }
        self.bump(i);
        let text = self.src[start..self.pos].to_string();
        if is_float {
            Tok::Float(text)
        } else {
            Tok::Integer(text)
        }
    }

    fn word_len(&self) -> usize {
        let mut i = 0;
        while is_ident_byte(self.at(i)) {
            i += 1;
        }
        i
    }

    fn next_token(&mut self) -> Result<Token, ParseError> {
        self.skip_trivia()?;
        let start = self.pos;
        let line = self.line;
        let column = self.column_of(start);
        let make = |tok: Tok, end: usize| Token {
            tok,
            start,
            end,
            line,
            column,
        };
        if self.pos >= self.bytes.len() {
            return Ok(make(Tok::Eof, start));
        }
        let c = self.at(0);
        let tok = match c {
            b'\'' => {
                self.bump(1);
                let mut s = String::new();
                loop {
                    let rest = &self.src[self.pos..];
                    match rest.find('\'') {
                        None => {
                            self.bump(rest.len());
                            return Err(self.eof_error("'''"));
                        }
                        Some(q) => {
                            s.push_str(&rest[..q]);
                            self.bump(q + 1);
                            if self.at(0) == b'\'' {
                                s.push('\'');
                                self.bump(1);
                            } else {
                                break;
                            }
                        }
                    }
                }
                Tok::Str(s)
            }
            b'$' if self.at(1) == b'$' => {
                self.bump(2);
                let rest = &self.src[self.pos..];
                match rest.find("$$") {
                    None => {
                        self.bump(rest.len());
                        return Err(self.eof_error("'$'"));
                    }
                    Some(end) => {
                        let s = rest[..end].to_string();
                        self.bump(end + 2);
                        Tok::Str(s)
                    }
                }
            }
            b'"' => {
                self.bump(1);
                let mut s = String::new();
                loop {
                    let rest = &self.src[self.pos..];
                    match rest.find('"') {
                        None => {
                            self.bump(rest.len());
                            return Err(self.eof_error("'\"'"));
                        }
                        Some(q) => {
                            s.push_str(&rest[..q]);
                            self.bump(q + 1);
                            if self.at(0) == b'"' {
                                s.push('"');
                                self.bump(1);
                            } else {
                                break;
                            }
                        }
                    }
                }
                Tok::Quoted(s)
            }
            b'0' if matches!(self.at(1), b'x' | b'X') && self.uuid_len().is_none() => {
                let mut i = 2;
                while is_hex(self.at(i)) {
                    i += 1;
                }
                self.bump(i);
                Tok::Hex(self.src[start + 2..self.pos].to_string())
            }
            b'-' if self.at(1) == b'P' && self.iso_duration_len(1).is_some() => {
                let len = self.iso_duration_len(1).unwrap_or(0);
                self.bump(1 + len);
                Tok::Duration(self.src[start..self.pos].to_string())
            }
            b'-' if self.at(1).is_ascii_digit() => self.number(start),
            b'-' if self.at(1).is_ascii_alphabetic() => {
                // -NaN and -Infinity are single tokens in Lexer.g.
                self.bump(1);
                let len = self.word_len();
                let word = self.src[self.pos..self.pos + len].to_ascii_lowercase();
                match word.as_str() {
                    "nan" => {
                        self.bump(len);
                        Tok::NegNaN
                    }
                    "infinity" => {
                        self.bump(len);
                        Tok::NegInfinity
                    }
                    _ => Tok::Punct(Punct::Minus),
                }
            }
            b'0'..=b'9' => {
                if let Some(len) = self.uuid_len() {
                    self.bump(len);
                    Tok::Uuid(self.src[start..self.pos].to_string())
                } else {
                    self.number(start)
                }
            }
            b'a'..=b'z' | b'A'..=b'Z' => {
                let word = self.word_len();
                if let Some(len) = self.uuid_len() {
                    self.bump(len);
                    Tok::Uuid(self.src[start..self.pos].to_string())
                } else if let Some(len) = self.iso_duration_len(0).filter(|&l| l >= word) {
                    self.bump(len);
                    Tok::Duration(self.src[start..self.pos].to_string())
                } else {
                    self.bump(word);
                    let lower = self.src[start..self.pos].to_ascii_lowercase();
                    match lower.as_str() {
                        "true" => Tok::Boolean(true),
                        "false" => Tok::Boolean(false),
                        _ => Tok::Ident(lower),
                    }
                }
            }
            _ => {
                let (p, len) = match (c, self.at(1)) {
                    (b'.', b'.') => (Punct::Range, 2),
                    (b'!', b'=') => (Punct::Neq, 2),
                    (b'<', b'=') => (Punct::Lte, 2),
                    (b'>', b'=') => (Punct::Gte, 2),
                    (b'+', b'=') => (Punct::PlusEq, 2),
                    (b'-', b'=') => (Punct::MinusEq, 2),
                    (b'(', _) => (Punct::LParen, 1),
                    (b')', _) => (Punct::RParen, 1),
                    (b'[', _) => (Punct::LBracket, 1),
                    (b']', _) => (Punct::RBracket, 1),
                    (b'{', _) => (Punct::LBrace, 1),
                    (b'}', _) => (Punct::RBrace, 1),
                    (b',', _) => (Punct::Comma, 1),
                    (b';', _) => (Punct::Semicolon, 1),
                    (b'.', _) => (Punct::Dot, 1),
                    (b':', _) => (Punct::Colon, 1),
                    (b'=', _) => (Punct::Eq, 1),
                    (b'<', _) => (Punct::Lt, 1),
                    (b'>', _) => (Punct::Gt, 1),
                    (b'+', _) => (Punct::Plus, 1),
                    (b'-', _) => (Punct::Minus, 1),
                    (b'*', _) => (Punct::Star, 1),
                    (b'/', _) => (Punct::Slash, 1),
                    (b'%', _) => (Punct::Percent, 1),
                    (b'?', _) => (Punct::QMark, 1),
                    _ => {
                        let ch = self.src[self.pos..].chars().next().unwrap_or('?');
                        return Err(
                            self.error_at(start, format!("token recognition error at: '{ch}'"))
                        );
                    }
                };
                self.bump(len);
                Tok::Punct(p)
            }
        };
        Ok(make(tok, self.pos))
    }
}

/// Splits `src` into tokens, ending with one `Tok::Eof`.
pub fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        line: 1,
        line_start: 0,
        last_column: std::cell::Cell::new((0, 0)),
    };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let done = token.tok == Tok::Eof;
        tokens.push(token);
        if done {
            return Ok(tokens);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s)
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .filter(|t| *t != Tok::Eof)
            .collect()
    }

    #[test]
    fn reserved_list_is_sorted() {
        let mut sorted = RESERVED_KEYWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, RESERVED_KEYWORDS);
    }

    #[test]
    fn literals() {
        assert_eq!(toks("'it''s'"), vec![Tok::Str("it's".into())]);
        assert_eq!(toks("$$a'b;$$"), vec![Tok::Str("a'b;".into())]);
        assert_eq!(toks("\"My\"\"Col\""), vec![Tok::Quoted("My\"Col".into())]);
        assert_eq!(toks("-12"), vec![Tok::Integer("-12".into())]);
        assert_eq!(toks("1.5"), vec![Tok::Float("1.5".into())]);
        assert_eq!(toks("1e10"), vec![Tok::Float("1e10".into())]);
        assert_eq!(toks("-1.5E-3"), vec![Tok::Float("-1.5E-3".into())]);
        assert_eq!(toks("1."), vec![Tok::Float("1.".into())]);
        assert_eq!(
            toks("1..3"),
            vec![
                Tok::Integer("1".into()),
                Tok::Punct(Punct::Range),
                Tok::Integer("3".into())
            ]
        );
        assert_eq!(toks("0xCAFE"), vec![Tok::Hex("CAFE".into())]);
        assert_eq!(toks("0x"), vec![Tok::Hex(String::new())]);
        assert_eq!(toks("TRUE"), vec![Tok::Boolean(true)]);
        assert_eq!(toks("-NaN -Infinity"), vec![Tok::NegNaN, Tok::NegInfinity]);
        assert_eq!(toks("NaN"), vec![Tok::Ident("nan".into())]);
    }

    #[test]
    fn uuids_and_durations() {
        for u in [
            "550e8400-e29b-41d4-a716-446655440000",
            "deadbeef-0000-1111-2222-333333333333",
            "12345678-1234-1234-1234-123456789012",
        ] {
            assert_eq!(toks(u), vec![Tok::Uuid(u.into())]);
        }
        for d in [
            "1h30m",
            "-1d",
            "30000ms",
            "1mo2w",
            "3us",
            "5µs",
            "2ns",
            "P1DT2H",
            "P1W",
            "P1Y2M3D",
            "PT5M",
            "-P1D",
            "P0001-02-03T04:05:06",
            "1Y",
        ] {
            assert_eq!(toks(d), vec![Tok::Duration(d.into())], "{d}");
        }
        // Longer identifiers beat ISO durations, as with ANTLR's longest match.
        assert_eq!(toks("P1Dx"), vec![Tok::Ident("p1dx".into())]);
        assert_eq!(toks("p1d"), vec![Tok::Ident("p1d".into())]);
    }

    #[test]
    fn comments_and_positions() {
        let t = tokenize("-- c\nSELECT /* x\n y */ a // z\n FROM").unwrap();
        assert_eq!(t[0].tok, Tok::Ident("select".into()));
        assert_eq!((t[0].line, t[0].column), (2, 0));
        assert_eq!((t[1].line, t[1].column), (3, 6));
        assert_eq!((t[2].line, t[2].column), (4, 1));
    }

    #[test]
    fn columns_count_characters_from_the_line_start_on_long_lines() {
        // Every token's column, counted on from the previous token's (multibyte characters
        // count once), across lines; and a long line stays linear to lex.
        let t = tokenize("a 'é€' b\n  c 'ü' d").unwrap();
        let positions: Vec<(u32, u32)> = t.iter().map(|t| (t.line, t.column)).collect();
        assert_eq!(
            positions[..6],
            [(1, 0), (1, 2), (1, 7), (2, 2), (2, 4), (2, 8)]
        );
        let long: String = (0..200_000).map(|i| format!("{i},")).collect();
        let started = std::time::Instant::now();
        let t = tokenize(&long).unwrap();
        assert_eq!(t[2].column, 2);
        assert_eq!(t[399_998].column as usize, long.len() - 7);
        // Quadratic counting took minutes here; linear lexing takes well under a second even
        // in a debug build.
        assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    #[test]
    fn lexer_errors() {
        assert_eq!(
            tokenize("SELECT 'abc").unwrap_err().to_string(),
            "line 1:11 mismatched character '<EOF>' expecting '''"
        );
        assert_eq!(
            tokenize("SELECT ! FROM").unwrap_err().to_string(),
            "line 1:7 token recognition error at: '!'"
        );
        assert!(tokenize("/* open").is_err());
    }
}
