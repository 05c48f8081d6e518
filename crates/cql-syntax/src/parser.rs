//! Recursive-descent parser over the token vector, rule by rule after Cassandra's `Parser.g`
//! (rule names are kept in comments so the two can be compared). Where ANTLR uses syntactic
//! predicates or backtracking, a fixed lookahead of a few tokens decides instead; each such
//! place says why it is enough.

use crate::ast::*;
use crate::lexer::{is_reserved, Punct, Tok, Token};
use crate::{ParseError, MAX_NESTING_DEPTH};

type Result<T> = std::result::Result<T, ParseError>;

/// Every native type name CQL accepts (`varchar` is `text`).
pub const NATIVE_TYPES: &[&str] = &[
    "ascii",
    "bigint",
    "blob",
    "boolean",
    "counter",
    "date",
    "decimal",
    "double",
    "duration",
    "float",
    "inet",
    "int",
    "smallint",
    "text",
    "time",
    "timestamp",
    "timeuuid",
    "tinyint",
    "uuid",
    "varchar",
    "varint",
];

/// Names `Parser.g` refuses for user types (`reservedTypeNames`).
const RESERVED_TYPE_NAMES: &[&str] = &[
    "bitstring",
    "byte",
    "complex",
    "date",
    "enum",
    "interval",
    "macaddr",
];

pub(crate) struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    pos: usize,
    /// How many levels of the tree enclose the rule being parsed (see `nested`).
    depth: u32,
    /// The deepest `depth` any rule reached since the innermost chain being built started an
    /// operand (see `Chain`): how deep that operand's tree goes.
    reached: u32,
    /// Markers seen so far; a batch shares one numbering with its statements.
    pub(crate) markers: u32,
}

fn punct_name(p: Punct) -> &'static str {
    match p {
        Punct::LParen => "'('",
        Punct::RParen => "')'",
        Punct::LBracket => "'['",
        Punct::RBracket => "']'",
        Punct::LBrace => "'{'",
        Punct::RBrace => "'}'",
        Punct::Comma => "','",
        Punct::Semicolon => "';'",
        Punct::Dot => "'.'",
        Punct::Range => "'..'",
        Punct::Colon => "':'",
        Punct::Eq => "'='",
        Punct::Neq => "'!='",
        Punct::Lt => "'<'",
        Punct::Lte => "'<='",
        Punct::Gt => "'>'",
        Punct::Gte => "'>='",
        Punct::Plus => "'+'",
        Punct::Minus => "'-'",
        Punct::Star => "'*'",
        Punct::Slash => "'/'",
        Punct::Percent => "'%'",
        Punct::PlusEq => "'+='",
        Punct::MinusEq => "'-='",
        Punct::QMark => "'?'",
    }
}

/// A left-deep chain being built (see `Parser::chain`).
struct Chain {
    /// `Parser::reached` of the enclosing rule, raised to the chain's own at its end.
    outer: u32,
    /// The deepest level the chain built so far reaches: its top node sits at the depth the
    /// chain started at, each link one level above everything before it.
    reached: u32,
}

/// What follows a selector in brackets.
enum Subscript {
    /// `[key]`
    Element(Term),
    /// `[from..to]`, either bound optional.
    Slice(Option<Term>, Option<Term>),
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str, tokens: Vec<Token>) -> Self {
        Parser {
            src,
            tokens,
            pos: 0,
            depth: 0,
            reached: 0,
            markers: 0,
        }
    }

    // ---------------------------------------------------------------- token helpers

    fn token_at(&self, n: usize) -> &Token {
        // The vector always ends with Eof, so clamping keeps lookahead in bounds.
        let last = self.tokens.len().saturating_sub(1);
        &self.tokens[(self.pos + n).min(last)]
    }

    fn peek(&self) -> &Tok {
        &self.token_at(0).tok
    }

    fn peek_at(&self, n: usize) -> &Tok {
        &self.token_at(n).tok
    }

    fn advance(&mut self) {
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
    }

    pub(crate) fn at_eof(&self) -> bool {
        *self.peek() == Tok::Eof
    }

    fn is_kw_at(&self, n: usize, kw: &str) -> bool {
        matches!(self.peek_at(n), Tok::Ident(w) if w == kw)
    }

    fn is_kw(&self, kw: &str) -> bool {
        self.is_kw_at(0, kw)
    }

    fn accept_kw(&mut self, kw: &str) -> bool {
        let found = self.is_kw(kw);
        if found {
            self.advance();
        }
        found
    }

    fn expect_kw(&mut self, kw: &str) -> Result<()> {
        if self.accept_kw(kw) {
            Ok(())
        } else {
            Err(self.mismatched(&format!("K_{}", kw.to_ascii_uppercase())))
        }
    }

    fn is_punct_at(&self, n: usize, p: Punct) -> bool {
        *self.peek_at(n) == Tok::Punct(p)
    }

    fn is_punct(&self, p: Punct) -> bool {
        self.is_punct_at(0, p)
    }

    pub(crate) fn accept(&mut self, p: Punct) -> bool {
        let found = self.is_punct(p);
        if found {
            self.advance();
        }
        found
    }

    fn expect(&mut self, p: Punct) -> Result<()> {
        if self.accept(p) {
            Ok(())
        } else {
            Err(self.mismatched(punct_name(p)))
        }
    }

    fn current_text(&self) -> String {
        let t = self.token_at(0);
        if t.tok == Tok::Eof {
            "<EOF>".to_string()
        } else {
            self.src.get(t.start..t.end).unwrap_or("").to_string()
        }
    }

    pub(crate) fn error(&self, message: String) -> ParseError {
        let t = self.token_at(0);
        ParseError {
            line: t.line,
            column: t.column,
            message,
        }
    }

    pub(crate) fn mismatched(&self, expecting: &str) -> ParseError {
        self.error(format!(
            "mismatched input '{}' expecting {expecting}",
            self.current_text()
        ))
    }

    pub(crate) fn no_viable(&self) -> ParseError {
        self.error(format!(
            "no viable alternative at input '{}'",
            self.current_text()
        ))
    }

    /// Runs a recursive rule one level deeper, refusing to go past `MAX_NESTING_DEPTH` so that
    /// hostile input cannot overflow the stack, here or in any later walk over the tree.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= MAX_NESTING_DEPTH {
            return Err(self.too_deep());
        }
        self.depth += 1;
        self.reached = self.reached.max(self.depth);
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn too_deep(&self) -> ParseError {
        self.error(format!(
            "maximum nesting depth ({MAX_NESTING_DEPTH}) exceeded at input '{}'",
            self.current_text()
        ))
    }

    /// Starts a left-deep chain (`a + b - c`, `a * b`, `x.f[k]`) with the operand `first`
    /// parses. The parser builds chains in a loop, not by recursion, but every link puts the
    /// chain built so far one level deeper in the tree: `1+1+...+1` with n operands is a tree
    /// n levels deep, which every later walk (marker numbering, type resolution, evaluation,
    /// dropping the tree) recurses through. So a link counts against `MAX_NESTING_DEPTH` as a
    /// level of nesting does, which keeps every tree the parser returns within the limit.
    fn chain<T>(&mut self, first: impl FnOnce(&mut Self) -> Result<T>) -> Result<(T, Chain)> {
        let outer = std::mem::replace(&mut self.reached, self.depth);
        let node = first(self)?;
        Ok((
            node,
            Chain {
                outer,
                reached: self.reached,
            },
        ))
    }

    /// Parses the next link of `chain` with `link` (the operator, or `.`/`[`, is the current
    /// token): the chain so far becomes one level deeper, and the new operand's tree hangs one
    /// level below the link's node.
    fn link<T>(
        &mut self,
        chain: &mut Chain,
        link: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        if chain.reached >= MAX_NESTING_DEPTH {
            return Err(self.too_deep());
        }
        self.reached = self.depth;
        let node = link(self)?;
        chain.reached = chain.reached.max(self.reached) + 1;
        if chain.reached > MAX_NESTING_DEPTH {
            return Err(self.too_deep());
        }
        Ok(node)
    }

    /// Ends `chain`: the enclosing rule's tree reaches as deep as the chain does.
    fn end_chain(&mut self, chain: Chain) {
        self.reached = chain.outer.max(chain.reached);
    }

    // ---------------------------------------------------------------- identifiers

    /// IDENT (not reserved), unreserved keyword, or non-empty QUOTED_NAME at offset `n`.
    fn is_ident_at(&self, n: usize) -> bool {
        match self.peek_at(n) {
            Tok::Ident(w) => !is_reserved(w),
            Tok::Quoted(q) => !q.is_empty(),
            _ => false,
        }
    }

    /// `ident` / `noncol_ident` / `fident`.
    fn ident(&mut self) -> Result<Identifier> {
        let id = match self.peek() {
            Tok::Ident(w) if !is_reserved(w) => Identifier::new(w.clone()),
            Tok::Quoted(q) if !q.is_empty() => Identifier::new(q.clone()),
            _ => return Err(self.no_viable()),
        };
        self.advance();
        Ok(id)
    }

    /// `cident`: like `ident`, plus the legacy empty name `""`.
    fn cident(&mut self) -> Result<Identifier> {
        if let Tok::Quoted(q) = self.peek() {
            let id = Identifier::new(q.clone());
            self.advance();
            return Ok(id);
        }
        self.ident()
    }

    /// `ksName`: a keyspace's name. A bind marker there is refused in Cassandra's words (its
    /// grammar accepts `?` only to say so).
    fn keyspace_ident(&mut self) -> Result<Identifier> {
        if self.is_punct(Punct::QMark) {
            return Err(ParseError::unpositioned(
                "Bind variables cannot be used for keyspace names",
            ));
        }
        self.ident()
    }

    /// `columnFamilyName`: `(ksName '.')? cfName`, a table's name; bind markers refused as
    /// Cassandra words it.
    fn table_name(&mut self) -> Result<QualifiedName> {
        if self.is_punct_at(1, Punct::Dot) {
            let keyspace = self.keyspace_ident()?;
            self.advance();
            let name = self.table_ident()?;
            return Ok(QualifiedName {
                keyspace: Some(keyspace),
                name,
            });
        }
        Ok(QualifiedName {
            keyspace: None,
            name: self.table_ident()?,
        })
    }

    /// `cfName`.
    fn table_ident(&mut self) -> Result<Identifier> {
        if self.is_punct(Punct::QMark) {
            return Err(ParseError::unpositioned(
                "Bind variables cannot be used for table names",
            ));
        }
        self.ident()
    }

    /// `columnFamilyName` and friends: `(ks '.')? name`.
    fn qualified_name(&mut self) -> Result<QualifiedName> {
        let first = self.ident()?;
        if self.accept(Punct::Dot) {
            let name = self.ident()?;
            Ok(QualifiedName {
                keyspace: Some(first),
                name,
            })
        } else {
            Ok(QualifiedName {
                keyspace: None,
                name: first,
            })
        }
    }

    /// `userTypeName`: the last part may not be a native type name.
    fn user_type_name(&mut self) -> Result<QualifiedName> {
        let check = |p: &Self, n: usize| -> Result<()> {
            if let Tok::Ident(w) = p.peek_at(n) {
                let t = p.token_at(n);
                let message = if NATIVE_TYPES.contains(&w.as_str()) {
                    let text = p.src.get(t.start..t.end).unwrap_or("");
                    format!("no viable alternative at input '{text}'")
                } else if RESERVED_TYPE_NAMES.contains(&w.as_str()) {
                    format!("Invalid (reserved) user type name {w}")
                } else {
                    return Ok(());
                };
                return Err(ParseError {
                    line: t.line,
                    column: t.column,
                    message,
                });
            }
            Ok(())
        };
        if self.is_punct_at(1, Punct::Dot) {
            check(self, 2)?;
        } else {
            check(self, 0)?;
        }
        self.qualified_name()
    }

    fn function_name_at(&self, n: usize) -> bool {
        self.is_ident_at(n) || self.is_kw_at(n, "token")
    }

    /// `functionName '('` starts at the current token.
    fn at_function_call(&self) -> bool {
        self.function_name_at(0)
            && (self.is_punct_at(1, Punct::LParen)
                || (self.is_punct_at(1, Punct::Dot)
                    && self.function_name_at(2)
                    && self.is_punct_at(3, Punct::LParen)))
    }

    fn function_name(&mut self) -> Result<(Option<Identifier>, Identifier)> {
        let mut name = self.function_name_part()?;
        let mut keyspace = None;
        if self.accept(Punct::Dot) {
            keyspace = Some(name);
            name = self.function_name_part()?;
        }
        Ok((keyspace, name))
    }

    fn function_name_part(&mut self) -> Result<Identifier> {
        if self.accept_kw("token") {
            return Ok(Identifier::new("token"));
        }
        self.ident()
    }

    // ---------------------------------------------------------------- constants and terms

    fn constant(&mut self) -> Option<Constant> {
        let c = match self.peek() {
            Tok::Str(s) => Constant::String(s.clone()),
            Tok::Integer(s) => Constant::Integer(s.clone()),
            Tok::Float(s) => Constant::Float(s.clone()),
            Tok::Boolean(b) => Constant::Boolean(*b),
            Tok::Duration(s) => Constant::Duration(s.clone()),
            Tok::Uuid(s) => Constant::Uuid(s.clone()),
            Tok::Hex(s) => Constant::Hex(s.clone()),
            Tok::NegNaN => Constant::NaN,
            Tok::NegInfinity => Constant::NegInfinity,
            Tok::Ident(w) if w == "nan" => Constant::NaN,
            Tok::Ident(w) if w == "infinity" => Constant::Infinity,
            _ => return None,
        };
        self.advance();
        Some(c)
    }

    /// `marker`: `?` or `:name`.
    fn marker(&mut self) -> Result<Option<BindMarker>> {
        let name = if self.accept(Punct::QMark) {
            None
        } else if self.accept(Punct::Colon) {
            Some(self.ident()?)
        } else {
            return Ok(None);
        };
        let index = self.markers;
        self.markers = self.markers.saturating_add(1);
        Ok(Some(BindMarker { index, name }))
    }

    /// `constant | NULL | marker`, shared by terms and selectors.
    fn literal(&mut self) -> Result<Option<Term>> {
        if let Some(c) = self.constant() {
            return Ok(Some(Term::Constant(c)));
        }
        if self.accept_kw("null") {
            return Ok(Some(Term::Null));
        }
        Ok(self.marker()?.map(Term::BindMarker))
    }

    /// `intValue`: INTEGER or a marker.
    fn int_value(&mut self) -> Result<Term> {
        if let Tok::Integer(s) = self.peek() {
            let t = Term::Constant(Constant::Integer(s.clone()));
            self.advance();
            return Ok(t);
        }
        match self.marker()? {
            Some(m) => Ok(Term::BindMarker(m)),
            None => Err(self.mismatched("INTEGER")),
        }
    }

    /// ScyllaDB's `TIMEOUT` value: a duration or a marker.
    fn timeout_value(&mut self) -> Result<Term> {
        if let Tok::Duration(s) = self.peek() {
            let t = Term::Constant(Constant::Duration(s.clone()));
            self.advance();
            return Ok(t);
        }
        match self.marker()? {
            Some(m) => Ok(Term::BindMarker(m)),
            None => Err(self.mismatched("DURATION")),
        }
    }

    /// `term` (`termAddition`).
    pub(crate) fn term(&mut self) -> Result<Term> {
        self.nested(|p| {
            let (mut lhs, mut chain) = p.chain(Self::term_mul)?;
            loop {
                let op = match p.peek() {
                    Tok::Punct(Punct::Plus) => BinaryOp::Add,
                    Tok::Punct(Punct::Minus) => BinaryOp::Sub,
                    _ => break,
                };
                // In `l = [1] + l` the operand after '+' is a column, which no term can be:
                // leave the operator to the UPDATE rule (normalColumnOperation).
                if p.is_bare_column_at(1) {
                    break;
                }
                let rhs = p.link(&mut chain, |p| {
                    p.advance();
                    p.term_mul()
                })?;
                lhs = Term::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                };
            }
            p.end_chain(chain);
            Ok(lhs)
        })
    }

    /// An identifier that is not the start of a function call.
    fn is_bare_column_at(&self, n: usize) -> bool {
        self.is_ident_at(n)
            && !self.is_punct_at(n + 1, Punct::LParen)
            && !self.is_punct_at(n + 1, Punct::Dot)
    }

    fn term_mul(&mut self) -> Result<Term> {
        let (mut lhs, mut chain) = self.chain(Self::term_group)?;
        loop {
            let op = match self.peek() {
                Tok::Punct(Punct::Star) => BinaryOp::Mul,
                Tok::Punct(Punct::Slash) => BinaryOp::Div,
                Tok::Punct(Punct::Percent) => BinaryOp::Mod,
                _ => break,
            };
            let rhs = self.link(&mut chain, |p| {
                p.advance();
                p.term_group()
            })?;
            lhs = Term::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            };
        }
        self.end_chain(chain);
        Ok(lhs)
    }

    fn term_group(&mut self) -> Result<Term> {
        if self.accept(Punct::Minus) {
            Ok(Term::Negate(Box::new(self.simple_term()?)))
        } else {
            self.simple_term()
        }
    }

    /// `'(' comparatorType ')'` starts here (a type hint rather than a tuple): the token after
    /// '(' names a type, and either type parameters follow or the name is closed by ')'.
    /// `in_selector`: `(a) FROM` and `(a) - b` are parenthesised columns, so in a selection a
    /// type hint must also be followed by something it can apply to (ANTLR's predicate on
    /// `selectionTypeHint`). In a term a bare name cannot be a value, so no such check.
    fn at_type_hint(&self, in_selector: bool) -> bool {
        if !self.is_punct(Punct::LParen) {
            return false;
        }
        let names_type = match self.peek_at(1) {
            Tok::Ident(w) => w == "set" || !is_reserved(w),
            Tok::Quoted(q) => !q.is_empty(),
            _ => false,
        };
        if !names_type {
            return false;
        }
        if self.is_punct_at(2, Punct::Lt) {
            return true;
        }
        let close = if self.is_punct_at(2, Punct::Dot) && self.is_ident_at(3) {
            4
        } else {
            2
        };
        if !self.is_punct_at(close, Punct::RParen) {
            return false;
        }
        !in_selector
            || (self.starts_selector_at(close + 1)
                && !self.is_punct_at(close + 1, Punct::Minus)
                && !self.is_punct_at(close + 1, Punct::Star))
    }

    fn simple_term(&mut self) -> Result<Term> {
        self.nested(|p| p.simple_term_inner())
    }

    fn simple_term_inner(&mut self) -> Result<Term> {
        if let Some(t) = self.literal()? {
            return Ok(t);
        }
        if self.accept(Punct::LBracket) {
            let mut items = Vec::new();
            if !self.accept(Punct::RBracket) {
                loop {
                    items.push(self.term()?);
                    if !self.accept(Punct::Comma) {
                        break;
                    }
                }
                self.expect(Punct::RBracket)?;
            }
            return Ok(Term::List(items));
        }
        if self.is_punct(Punct::LBrace) {
            return self.brace_term();
        }
        if self.at_type_hint(false) {
            self.advance();
            let ty = self.type_expr()?;
            self.expect(Punct::RParen)?;
            let term = self.simple_term()?;
            return Ok(Term::TypeHint {
                ty,
                term: Box::new(term),
            });
        }
        if self.is_punct(Punct::LParen) {
            return self.tuple_literal();
        }
        if self.is_kw("cast") && self.is_punct_at(1, Punct::LParen) {
            self.advance();
            self.advance();
            let term = self.simple_term()?;
            self.expect_kw("as")?;
            let ty = self.native_type()?;
            self.expect(Punct::RParen)?;
            return Ok(Term::Cast {
                term: Box::new(term),
                ty,
            });
        }
        if self.at_function_call() {
            let (keyspace, name) = self.function_name()?;
            self.expect(Punct::LParen)?;
            let mut args = Vec::new();
            if !self.accept(Punct::RParen) {
                loop {
                    args.push(self.term()?);
                    if !self.accept(Punct::Comma) {
                        break;
                    }
                }
                self.expect(Punct::RParen)?;
            }
            return Ok(Term::FunctionCall {
                keyspace,
                name,
                args,
            });
        }
        Err(self.no_viable())
    }

    /// `collectionLiteral` with braces, or `usertypeLiteral`.
    fn brace_term(&mut self) -> Result<Term> {
        self.expect(Punct::LBrace)?;
        if self.accept(Punct::RBrace) {
            return Ok(Term::Set(Vec::new()));
        }
        // A user type literal's keys are field names, which no term can be.
        if self.is_ident_at(0) && self.is_punct_at(1, Punct::Colon) {
            let mut fields = Vec::new();
            loop {
                let field = self.ident()?;
                self.expect(Punct::Colon)?;
                fields.push((field, self.term()?));
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
            self.expect(Punct::RBrace)?;
            return Ok(Term::UserType(fields));
        }
        let first = self.term()?;
        if self.accept(Punct::Colon) {
            let mut entries = vec![(first, self.term()?)];
            while self.accept(Punct::Comma) {
                let k = self.term()?;
                self.expect(Punct::Colon)?;
                entries.push((k, self.term()?));
            }
            self.expect(Punct::RBrace)?;
            return Ok(Term::Map(entries));
        }
        let mut items = vec![first];
        while self.accept(Punct::Comma) {
            items.push(self.term()?);
        }
        self.expect(Punct::RBrace)?;
        Ok(Term::Set(items))
    }

    // ---------------------------------------------------------------- types

    /// `comparatorType`.
    pub(crate) fn type_expr(&mut self) -> Result<TypeExpr> {
        self.nested(|p| p.type_inner())
    }

    fn type_inner(&mut self) -> Result<TypeExpr> {
        if let Tok::Str(s) = self.peek() {
            let t = TypeExpr::Custom(s.clone());
            self.advance();
            return Ok(t);
        }
        let word = match self.peek() {
            Tok::Ident(w) => w.clone(),
            Tok::Quoted(_) => return Ok(TypeExpr::UserType(self.qualified_name()?)),
            _ => return Err(self.no_viable()),
        };
        if self.is_punct_at(1, Punct::Lt) {
            let parametrised = matches!(
                word.as_str(),
                "list" | "set" | "map" | "frozen" | "tuple" | "vector"
            );
            if parametrised {
                self.advance();
                self.advance();
                let first = self.type_expr()?;
                let t = match word.as_str() {
                    "list" => TypeExpr::List(Box::new(first)),
                    "set" => TypeExpr::Set(Box::new(first)),
                    "frozen" => TypeExpr::Frozen(Box::new(first)),
                    "map" => {
                        self.expect(Punct::Comma)?;
                        TypeExpr::Map(Box::new(first), Box::new(self.type_expr()?))
                    }
                    "tuple" => {
                        let mut items = vec![first];
                        while self.accept(Punct::Comma) {
                            items.push(self.type_expr()?);
                        }
                        TypeExpr::Tuple(items)
                    }
                    _ => {
                        self.expect(Punct::Comma)?;
                        let Tok::Integer(text) = self.peek() else {
                            return Err(self.mismatched("INTEGER"));
                        };
                        // Cassandra's `Integer.parseInt` of the token: out of range is its
                        // NumberFormatException, reported with the statement.
                        let Ok(dimension) = text.parse::<i32>() else {
                            return Err(ParseError::unpositioned(format!(
                                "Failed parsing statement: [{}] reason: NumberFormatException For input string: \"{text}\"",
                                self.src
                            )));
                        };
                        self.advance();
                        TypeExpr::Vector(Box::new(first), dimension)
                    }
                };
                self.expect(Punct::Gt)?;
                return Ok(t);
            }
        }
        if NATIVE_TYPES.contains(&word.as_str()) {
            self.advance();
            return Ok(TypeExpr::Native(word));
        }
        Ok(TypeExpr::UserType(self.qualified_name()?))
    }

    /// `native_type` (CAST targets).
    fn native_type(&mut self) -> Result<TypeExpr> {
        match self.peek() {
            Tok::Ident(w) if NATIVE_TYPES.contains(&w.as_str()) => {
                let t = TypeExpr::Native(w.clone());
                self.advance();
                Ok(t)
            }
            _ => Err(self.no_viable()),
        }
    }

    // ---------------------------------------------------------------- statements

    /// `cqlStatement`.
    pub(crate) fn statement(&mut self) -> Result<Statement> {
        let Tok::Ident(first) = self.peek().clone() else {
            return Err(self.no_viable());
        };
        match first.as_str() {
            "select" => self.select().map(Statement::Select),
            "insert" => self.insert().map(Statement::Insert),
            "update" => self.update().map(Statement::Update),
            "delete" => self.delete().map(Statement::Delete),
            "begin" => self.batch().map(Statement::Batch),
            "use" => {
                self.advance();
                Ok(Statement::Use(self.keyspace_ident()?))
            }
            "truncate" => {
                self.advance();
                let _ = self.accept_kw("table") || self.accept_kw("columnfamily");
                Ok(Statement::Truncate(Truncate {
                    name: self.table_name()?,
                }))
            }
            "create" => self.create(),
            "alter" => self.alter(),
            "drop" => self.drop(),
            "describe" | "desc" => self.describe().map(Statement::Describe),
            "grant" => self.unsupported("GRANT"),
            "revoke" => self.unsupported("REVOKE"),
            "list" => {
                let feature = match self.peek_at(1) {
                    Tok::Ident(w) if w == "roles" => "LIST ROLES",
                    Tok::Ident(w) if w == "users" => "LIST USERS",
                    Tok::Ident(w) if w == "superusers" => "LIST SUPERUSERS",
                    _ => "LIST PERMISSIONS",
                };
                self.unsupported(feature)
            }
            "add" if self.is_kw_at(1, "identity") => self.unsupported("ADD IDENTITY"),
            _ => Err(self.no_viable()),
        }
    }

    /// The leading keywords identified a statement Helenus does not implement: skip to the
    /// end of it, keeping string literals (which may contain ';') whole thanks to the lexer.
    fn unsupported(&mut self, feature: &'static str) -> Result<Statement> {
        while !self.at_eof() && !self.is_punct(Punct::Semicolon) {
            self.advance();
        }
        Ok(Statement::Unsupported { feature })
    }

    fn if_not_exists(&mut self) -> Result<bool> {
        if self.accept_kw("if") {
            self.expect_kw("not")?;
            self.expect_kw("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn if_exists(&mut self) -> Result<bool> {
        if self.accept_kw("if") {
            self.expect_kw("exists")?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Can the token at `n` start a selector? Used for the JSON / DISTINCT predicates of
    /// `selectStatement`: `SELECT json FROM t` selects a column named json.
    fn starts_selector_at(&self, n: usize) -> bool {
        match self.peek_at(n) {
            Tok::Ident(w) => {
                w != "as"
                    && (!is_reserved(w)
                        || matches!(w.as_str(), "null" | "nan" | "infinity" | "token"))
            }
            Tok::Quoted(_) => true,
            Tok::Punct(p) => matches!(
                p,
                Punct::Star
                    | Punct::LParen
                    | Punct::LBracket
                    | Punct::LBrace
                    | Punct::Minus
                    | Punct::QMark
                    | Punct::Colon
            ),
            Tok::Eof => false,
            _ => true,
        }
    }

    /// `selectStatement`, plus ScyllaDB's trailing `USING TIMEOUT`.
    fn select(&mut self) -> Result<Select> {
        self.expect_kw("select")?;
        let json = self.is_kw("json") && self.starts_selector_at(1);
        if json {
            self.advance();
        }
        let distinct = self.is_kw("distinct") && self.starts_selector_at(1);
        if distinct {
            self.advance();
        }
        let selection = if self.accept(Punct::Star) {
            Selection::Wildcard
        } else {
            let mut selectors = Vec::new();
            loop {
                let expr = self.selector_expr()?;
                let alias = if self.accept_kw("as") {
                    Some(self.ident()?)
                } else {
                    None
                };
                selectors.push(Selector { expr, alias });
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
            Selection::Columns(selectors)
        };
        self.expect_kw("from")?;
        let table = self.table_name()?;
        let where_clause = self.opt_where()?;
        let mut group_by = Vec::new();
        if self.accept_kw("group") {
            self.expect_kw("by")?;
            loop {
                group_by.push(self.selector_expr()?);
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
        }
        let mut order_by = Vec::new();
        if self.accept_kw("order") {
            self.expect_kw("by")?;
            loop {
                let column = self.cident()?;
                let ann_of = if self.accept_kw("ann") {
                    self.expect_kw("of")?;
                    Some(self.term()?)
                } else {
                    None
                };
                let order = self.opt_order().unwrap_or(Order::Asc);
                order_by.push(Ordering {
                    column,
                    ann_of,
                    order,
                });
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
        }
        let mut per_partition_limit = None;
        if self.accept_kw("per") {
            self.expect_kw("partition")?;
            self.expect_kw("limit")?;
            per_partition_limit = Some(self.int_value()?);
        }
        let limit = if self.accept_kw("limit") {
            Some(self.int_value()?)
        } else {
            None
        };
        let allow_filtering = self.accept_kw("allow");
        if allow_filtering {
            self.expect_kw("filtering")?;
        }
        let timeout = if self.accept_kw("using") {
            self.expect_kw("timeout")?;
            Some(self.timeout_value()?)
        } else {
            None
        };
        Ok(Select {
            json,
            distinct,
            selection,
            table,
            where_clause,
            group_by,
            order_by,
            per_partition_limit,
            limit,
            allow_filtering,
            timeout,
        })
    }

    fn opt_order(&mut self) -> Option<Order> {
        if self.accept_kw("asc") {
            Some(Order::Asc)
        } else if self.accept_kw("desc") {
            Some(Order::Desc)
        } else {
            None
        }
    }

    fn opt_where(&mut self) -> Result<Vec<Relation>> {
        if self.accept_kw("where") {
            self.where_clause()
        } else {
            Ok(Vec::new())
        }
    }

    // ---------------------------------------------------------------- selectors

    /// `unaliasedSelector` (`selectionAddition`).
    fn selector_expr(&mut self) -> Result<SelectorExpr> {
        self.nested(|p| {
            let (mut lhs, mut chain) = p.chain(Self::selector_mul)?;
            loop {
                let op = match p.peek() {
                    Tok::Punct(Punct::Plus) => BinaryOp::Add,
                    Tok::Punct(Punct::Minus) => BinaryOp::Sub,
                    _ => break,
                };
                let rhs = p.link(&mut chain, |p| {
                    p.advance();
                    p.selector_mul()
                })?;
                lhs = SelectorExpr::Binary {
                    op,
                    lhs: Box::new(lhs),
                    rhs: Box::new(rhs),
                };
            }
            p.end_chain(chain);
            Ok(lhs)
        })
    }

    fn selector_mul(&mut self) -> Result<SelectorExpr> {
        let (mut lhs, mut chain) = self.chain(Self::selector_group)?;
        loop {
            let op = match self.peek() {
                Tok::Punct(Punct::Star) => BinaryOp::Mul,
                Tok::Punct(Punct::Slash) => BinaryOp::Div,
                Tok::Punct(Punct::Percent) => BinaryOp::Mod,
                _ => break,
            };
            let rhs = self.link(&mut chain, |p| {
                p.advance();
                p.selector_group()
            })?;
            lhs = SelectorExpr::Binary {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
            };
        }
        self.end_chain(chain);
        Ok(lhs)
    }

    /// `selectionGroup`.
    fn selector_group(&mut self) -> Result<SelectorExpr> {
        self.nested(|p| {
            if p.accept(Punct::Minus) {
                return Ok(SelectorExpr::Negate(Box::new(p.selector_group()?)));
            }
            let (base, mut chain) = p.chain(Self::selector_without_field)?;
            let expr = p.selector_modifiers(base, &mut chain)?;
            p.end_chain(chain);
            Ok(expr)
        })
    }

    /// `selectorModifier`: any number of `.field` and `[element]` / `[slice]`, each a link of
    /// `chain`.
    fn selector_modifiers(
        &mut self,
        mut expr: SelectorExpr,
        chain: &mut Chain,
    ) -> Result<SelectorExpr> {
        loop {
            if self.is_punct(Punct::Dot) {
                let field = self.link(chain, |p| {
                    p.advance();
                    p.ident()
                })?;
                expr = SelectorExpr::FieldAccess(Box::new(expr), field);
            } else if self.is_punct(Punct::LBracket) {
                expr = match self.link(chain, Self::element_or_slice)? {
                    Subscript::Element(key) => SelectorExpr::ElementAccess(Box::new(expr), key),
                    Subscript::Slice(from, to) => SelectorExpr::Slice {
                        expr: Box::new(expr),
                        from,
                        to,
                    },
                };
            } else {
                return Ok(expr);
            }
        }
    }

    /// `'[' term ']'` or `'[' term? '..' term? ']'`.
    fn element_or_slice(&mut self) -> Result<Subscript> {
        self.expect(Punct::LBracket)?;
        let subscript = if self.accept(Punct::Range) {
            Subscript::Slice(None, Some(self.term()?))
        } else {
            let from = self.term()?;
            if self.accept(Punct::Range) {
                let to = if self.is_punct(Punct::RBracket) {
                    None
                } else {
                    Some(self.term()?)
                };
                Subscript::Slice(Some(from), to)
            } else {
                Subscript::Element(from)
            }
        };
        self.expect(Punct::RBracket)?;
        Ok(subscript)
    }

    fn selector_list(&mut self, close: Punct) -> Result<Vec<SelectorExpr>> {
        let mut items = Vec::new();
        if self.accept(close) {
            return Ok(items);
        }
        loop {
            items.push(self.selector_expr()?);
            if !self.accept(Punct::Comma) {
                break;
            }
        }
        self.expect(close)?;
        Ok(items)
    }

    /// `selectionGroupWithoutField`.
    fn selector_without_field(&mut self) -> Result<SelectorExpr> {
        if self.at_type_hint(true) {
            self.advance();
            let ty = self.type_expr()?;
            self.expect(Punct::RParen)?;
            let expr = self.nested(|p| p.selector_without_field())?;
            return Ok(SelectorExpr::TypeHint(ty, Box::new(expr)));
        }
        if self.accept(Punct::LParen) {
            let mut items = Vec::new();
            loop {
                items.push(self.selector_expr()?);
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
            self.expect(Punct::RParen)?;
            return Ok(if items.len() == 1 {
                items.remove(0)
            } else {
                SelectorExpr::Tuple(items)
            });
        }
        if self.accept(Punct::LBracket) {
            return Ok(SelectorExpr::List(self.selector_list(Punct::RBracket)?));
        }
        if self.accept(Punct::LBrace) {
            if self.accept(Punct::RBrace) {
                return Ok(SelectorExpr::Set(Vec::new()));
            }
            let first = self.selector_expr()?;
            if self.accept(Punct::Colon) {
                let mut entries = vec![(first, self.selector_expr()?)];
                while self.accept(Punct::Comma) {
                    let k = self.selector_expr()?;
                    self.expect(Punct::Colon)?;
                    entries.push((k, self.selector_expr()?));
                }
                self.expect(Punct::RBrace)?;
                return Ok(SelectorExpr::Map(entries));
            }
            let mut items = vec![first];
            while self.accept(Punct::Comma) {
                items.push(self.selector_expr()?);
            }
            self.expect(Punct::RBrace)?;
            return Ok(SelectorExpr::Set(items));
        }
        if let Some(t) = self.literal()? {
            return Ok(SelectorExpr::Term(t));
        }
        // selectionFunction
        if self.is_punct_at(1, Punct::LParen) {
            if self.is_kw("count")
                && self.is_punct_at(2, Punct::Star)
                && self.is_punct_at(3, Punct::RParen)
            {
                for _ in 0..4 {
                    self.advance();
                }
                return Ok(SelectorExpr::CountRows);
            }
            for kw in ["writetime", "maxwritetime", "ttl"] {
                if self.is_kw(kw) {
                    self.advance();
                    self.advance();
                    // The column and its modifiers sit one level below the function.
                    let inner = Box::new(self.nested(|p| {
                        let (column, mut chain) =
                            p.chain(|p| Ok(SelectorExpr::Column(p.cident()?)))?;
                        let expr = p.selector_modifiers(column, &mut chain)?;
                        p.end_chain(chain);
                        Ok(expr)
                    })?);
                    self.expect(Punct::RParen)?;
                    return Ok(match kw {
                        "writetime" => SelectorExpr::WriteTime(inner),
                        "maxwritetime" => SelectorExpr::MaxWriteTime(inner),
                        _ => SelectorExpr::Ttl(inner),
                    });
                }
            }
            if self.is_kw("cast") {
                self.advance();
                self.advance();
                let expr = self.selector_expr()?;
                self.expect_kw("as")?;
                let ty = self.native_type()?;
                self.expect(Punct::RParen)?;
                return Ok(SelectorExpr::Cast(Box::new(expr), ty));
            }
        }
        if self.at_function_call() {
            let (keyspace, name) = self.function_name()?;
            self.expect(Punct::LParen)?;
            let args = self.selector_list(Punct::RParen)?;
            return Ok(SelectorExpr::FunctionCall {
                keyspace,
                name,
                args,
            });
        }
        if self.is_ident_at(0) || matches!(self.peek(), Tok::Quoted(_)) {
            return Ok(SelectorExpr::Column(self.cident()?));
        }
        Err(self.no_viable())
    }

    // ---------------------------------------------------------------- WHERE and IF

    /// `whereClause`: relations joined by AND.
    fn where_clause(&mut self) -> Result<Vec<Relation>> {
        let mut relations = Vec::new();
        loop {
            relations.push(self.relation()?);
            if !self.accept_kw("and") {
                return Ok(relations);
            }
        }
    }

    fn relation_type(&mut self) -> Option<Operator> {
        let op = match self.peek() {
            Tok::Punct(Punct::Eq) => Operator::Eq,
            Tok::Punct(Punct::Lt) => Operator::Lt,
            Tok::Punct(Punct::Lte) => Operator::Lte,
            Tok::Punct(Punct::Gt) => Operator::Gt,
            Tok::Punct(Punct::Gte) => Operator::Gte,
            Tok::Punct(Punct::Neq) => Operator::Neq,
            _ => return None,
        };
        self.advance();
        Some(op)
    }

    fn is_relation_operator_at(&self, n: usize) -> bool {
        matches!(
            self.peek_at(n),
            Tok::Punct(Punct::Eq | Punct::Lt | Punct::Lte | Punct::Gt | Punct::Gte | Punct::Neq)
        ) || ["in", "not", "between"]
            .iter()
            .any(|kw| self.is_kw_at(n, kw))
    }

    /// `tupleOfIdentifiers`.
    fn identifier_tuple(&mut self) -> Result<Vec<Identifier>> {
        self.expect(Punct::LParen)?;
        let mut columns = Vec::new();
        loop {
            columns.push(self.cident()?);
            if !self.accept(Punct::Comma) {
                break;
            }
        }
        self.expect(Punct::RParen)?;
        Ok(columns)
    }

    /// `singleColumnInValues` / `multiColumnInValues`: `(t, ...)` or an IN marker.
    fn in_values(&mut self) -> Result<RelationValue> {
        if let Some(m) = self.marker()? {
            return Ok(RelationValue::Marker(m));
        }
        self.expect(Punct::LParen)?;
        let mut items = Vec::new();
        if !self.accept(Punct::RParen) {
            loop {
                items.push(self.term()?);
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
            self.expect(Punct::RParen)?;
        }
        Ok(RelationValue::List(items))
    }

    /// What a multi-column relation compares with, as Cassandra's grammar has it
    /// (`tupleLiteral | markerForTuple`): `(c, d) = 5` is a syntax error, not a tuple of the
    /// wrong type.
    fn tuple_or_marker(&mut self) -> Result<Term> {
        match self.marker()? {
            Some(m) => Ok(Term::BindMarker(m)),
            None => self.tuple_literal(),
        }
    }

    /// `tupleLiteral`: `'(' term (',' term)* ')'`.
    fn tuple_literal(&mut self) -> Result<Term> {
        if !self.accept(Punct::LParen) {
            return Err(self.no_viable());
        }
        let mut items = Vec::new();
        loop {
            items.push(self.term()?);
            if !self.accept(Punct::Comma) {
                break;
            }
        }
        self.expect(Punct::RParen)?;
        Ok(Term::Tuple(items))
    }

    /// A multi-column IN's values, as Cassandra's grammar has them: one marker, `()`, or a
    /// list of tuple literals or of markers, never the two mixed (`(c, d) IN ((0, 0), ?)` is
    /// a syntax error there).
    fn tuple_in_values(&mut self) -> Result<RelationValue> {
        if let Some(m) = self.marker()? {
            return Ok(RelationValue::Marker(m));
        }
        if !self.accept(Punct::LParen) {
            return Err(self.no_viable());
        }
        let mut items = Vec::new();
        if self.accept(Punct::RParen) {
            return Ok(RelationValue::List(items));
        }
        let markers = self.is_punct(Punct::QMark) || self.is_punct(Punct::Colon);
        loop {
            let item = if markers {
                match self.marker()? {
                    Some(m) => Term::BindMarker(m),
                    None => return Err(self.no_viable()),
                }
            } else if items.is_empty() || self.is_punct(Punct::LParen) {
                self.tuple_literal()?
            } else {
                return Err(self.mismatched(punct_name(Punct::LParen)));
            };
            items.push(item);
            if !self.accept(Punct::Comma) {
                break;
            }
        }
        self.expect(Punct::RParen)?;
        Ok(RelationValue::List(items))
    }

    fn between_values(&mut self) -> Result<RelationValue> {
        let low = self.term()?;
        self.expect_kw("and")?;
        Ok(RelationValue::Between(low, self.term()?))
    }

    /// `IN`/`NOT IN`/`CONTAINS [KEY]`/`NOT CONTAINS [KEY]`, if one is next.
    fn in_or_contains(&mut self) -> Result<Option<Operator>> {
        let negated = self.is_kw("not") && (self.is_kw_at(1, "in") || self.is_kw_at(1, "contains"));
        if negated {
            self.advance();
        }
        if self.accept_kw("in") {
            return Ok(Some(if negated {
                Operator::NotIn
            } else {
                Operator::In
            }));
        }
        if self.accept_kw("contains") {
            let key = self.accept_kw("key");
            return Ok(Some(match (negated, key) {
                (false, false) => Operator::Contains,
                (false, true) => Operator::ContainsKey,
                (true, false) => Operator::NotContains,
                (true, true) => Operator::NotContainsKey,
            }));
        }
        Ok(None)
    }

    /// `relation`.
    fn relation(&mut self) -> Result<Relation> {
        self.nested(|p| p.relation_inner())
    }

    fn relation_inner(&mut self) -> Result<Relation> {
        if self.is_punct(Punct::LParen) {
            // `(a, b) op ...` versus a parenthesised relation `(a = 1)`.
            let column_at_1 = self.is_ident_at(1) || matches!(self.peek_at(1), Tok::Quoted(_));
            let multi = column_at_1
                && (self.is_punct_at(2, Punct::Comma)
                    || (self.is_punct_at(2, Punct::RParen) && self.is_relation_operator_at(3)));
            if !multi {
                self.advance();
                let r = self.relation()?;
                self.expect(Punct::RParen)?;
                return Ok(r);
            }
            let columns = self.identifier_tuple()?;
            let (op, value) = if let Some(op) = self.relation_type() {
                (op, RelationValue::Single(self.tuple_or_marker()?))
            } else if self.accept_kw("between") {
                (Operator::Between, self.between_values()?)
            } else {
                match self.in_or_contains()? {
                    Some(op @ (Operator::In | Operator::NotIn)) => (op, self.tuple_in_values()?),
                    _ => return Err(self.no_viable()),
                }
            };
            return Ok(Relation::MultiColumn { columns, op, value });
        }
        if self.is_kw("token") && self.is_punct_at(1, Punct::LParen) {
            self.advance();
            let columns = self.identifier_tuple()?;
            let (op, value) = if let Some(op) = self.relation_type() {
                (op, RelationValue::Single(self.term()?))
            } else if self.accept_kw("between") {
                (Operator::Between, self.between_values()?)
            } else {
                return Err(self.no_viable());
            };
            return Ok(Relation::Token { columns, op, value });
        }
        if self.is_kw("expr") && self.is_punct_at(1, Punct::LParen) {
            self.advance();
            self.advance();
            let index = self.qualified_name()?;
            self.expect(Punct::Comma)?;
            let value = self.term()?;
            self.expect(Punct::RParen)?;
            return Ok(Relation::CustomIndex { index, value });
        }
        let column = self.cident()?;
        if self.accept(Punct::LBracket) {
            let key = self.term()?;
            self.expect(Punct::RBracket)?;
            let Some(op) = self.relation_type() else {
                return Err(self.no_viable());
            };
            let value = self.term()?;
            return Ok(Relation::Element {
                column,
                key,
                op,
                value,
            });
        }
        if let Some(op) = self.relation_type() {
            let value = RelationValue::Single(self.term()?);
            return Ok(Relation::Simple { column, op, value });
        }
        if self.accept_kw("between") {
            let value = self.between_values()?;
            return Ok(Relation::Simple {
                column,
                op: Operator::Between,
                value,
            });
        }
        if self.accept_kw("like") {
            let value = RelationValue::Single(self.term()?);
            return Ok(Relation::Simple {
                column,
                op: Operator::Like,
                value,
            });
        }
        if self.accept_kw("is") {
            self.expect_kw("not")?;
            self.expect_kw("null")?;
            return Ok(Relation::IsNotNull(column));
        }
        match self.in_or_contains()? {
            Some(op @ (Operator::In | Operator::NotIn)) => {
                let value = self.in_values()?;
                Ok(Relation::Simple { column, op, value })
            }
            Some(op) => {
                let value = RelationValue::Single(self.term()?);
                Ok(Relation::Simple { column, op, value })
            }
            None => Err(self.no_viable()),
        }
    }

    /// `IF EXISTS` / `IF c = x AND ...` after UPDATE and DELETE.
    fn opt_conditions(&mut self) -> Result<Option<Conditions>> {
        if !self.accept_kw("if") {
            return Ok(None);
        }
        if self.accept_kw("exists") {
            return Ok(Some(Conditions::Exists));
        }
        let mut conditions = Vec::new();
        loop {
            conditions.push(self.condition()?);
            if !self.accept_kw("and") {
                return Ok(Some(Conditions::Columns(conditions)));
            }
        }
    }

    /// The operator and value of a condition: `op term | IN values` (and, on a whole column,
    /// `CONTAINS [KEY] term`).
    fn condition_rhs(&mut self, allow_contains: bool) -> Result<(Operator, RelationValue)> {
        if let Some(op) = self.relation_type() {
            return Ok((op, RelationValue::Single(self.term()?)));
        }
        if self.accept_kw("in") {
            return Ok((Operator::In, self.in_values()?));
        }
        if allow_contains && self.accept_kw("contains") {
            let op = if self.accept_kw("key") {
                Operator::ContainsKey
            } else {
                Operator::Contains
            };
            return Ok((op, RelationValue::Single(self.term()?)));
        }
        Err(self.no_viable())
    }

    /// `columnCondition`.
    fn condition(&mut self) -> Result<Condition> {
        let column = self.cident()?;
        if self.accept(Punct::LBracket) {
            let key = self.term()?;
            self.expect(Punct::RBracket)?;
            let (op, value) = self.condition_rhs(false)?;
            return Ok(Condition::Element {
                column,
                key,
                op,
                value,
            });
        }
        if self.accept(Punct::Dot) {
            let field = self.ident()?;
            let (op, value) = self.condition_rhs(false)?;
            return Ok(Condition::Field {
                column,
                field,
                op,
                value,
            });
        }
        let (op, value) = self.condition_rhs(true)?;
        Ok(Condition::Simple { column, op, value })
    }

    // ---------------------------------------------------------------- DML

    /// `usingClause`: TIMESTAMP and TTL (when `allow_ttl`), and ScyllaDB's TIMEOUT.
    fn opt_using(&mut self, allow_ttl: bool) -> Result<Using> {
        let mut using = Using::default();
        if !self.accept_kw("using") {
            return Ok(using);
        }
        loop {
            if self.accept_kw("timestamp") {
                using.timestamp = Some(self.int_value()?);
            } else if allow_ttl && self.accept_kw("ttl") {
                using.ttl = Some(self.int_value()?);
            } else if self.accept_kw("timeout") {
                using.timeout = Some(self.timeout_value()?);
            } else {
                return Err(self.mismatched("K_TIMESTAMP"));
            }
            if !self.accept_kw("and") {
                return Ok(using);
            }
        }
    }

    /// `insertStatement`.
    fn insert(&mut self) -> Result<Insert> {
        self.expect_kw("insert")?;
        self.expect_kw("into")?;
        let table = self.table_name()?;
        let values = if self.accept(Punct::LParen) {
            let mut columns = Vec::new();
            loop {
                columns.push(self.cident()?);
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
            self.expect(Punct::RParen)?;
            self.expect_kw("values")?;
            self.expect(Punct::LParen)?;
            let mut values = Vec::new();
            loop {
                values.push(self.term()?);
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
            self.expect(Punct::RParen)?;
            InsertValues::Values { columns, values }
        } else if self.accept_kw("json") {
            let value = if let Tok::Str(s) = self.peek() {
                let t = Term::Constant(Constant::String(s.clone()));
                self.advance();
                t
            } else if let Some(m) = self.marker()? {
                Term::BindMarker(m)
            } else {
                return Err(self.mismatched("STRING_LITERAL"));
            };
            let mut default = JsonDefault::Null;
            if self.accept_kw("default") {
                if self.accept_kw("unset") {
                    default = JsonDefault::Unset;
                } else {
                    self.expect_kw("null")?;
                }
            }
            InsertValues::Json { value, default }
        } else {
            return Err(self.mismatched("'('"));
        };
        let if_not_exists = self.if_not_exists()?;
        let using = self.opt_using(true)?;
        Ok(Insert {
            table,
            values,
            if_not_exists,
            using,
        })
    }

    /// `updateStatement`.
    fn update(&mut self) -> Result<Update> {
        self.expect_kw("update")?;
        let table = self.table_name()?;
        let using = self.opt_using(true)?;
        self.expect_kw("set")?;
        let mut assignments = Vec::new();
        loop {
            assignments.push(self.assignment()?);
            if !self.accept(Punct::Comma) {
                break;
            }
        }
        self.expect_kw("where")?;
        let where_clause = self.where_clause()?;
        let conditions = self.opt_conditions()?;
        Ok(Update {
            table,
            using,
            assignments,
            where_clause,
            conditions,
        })
    }

    /// `columnOperation`.
    fn assignment(&mut self) -> Result<Assignment> {
        let column = self.cident()?;
        if self.accept(Punct::PlusEq) {
            let value = self.term()?;
            return Ok(Assignment::Add { column, value });
        }
        if self.accept(Punct::MinusEq) {
            let value = self.term()?;
            return Ok(Assignment::Subtract { column, value });
        }
        if self.accept(Punct::LBracket) {
            let key = self.term()?;
            self.expect(Punct::RBracket)?;
            self.expect(Punct::Eq)?;
            let value = self.term()?;
            return Ok(Assignment::SetElement { column, key, value });
        }
        if self.accept(Punct::Dot) {
            let field = self.ident()?;
            self.expect(Punct::Eq)?;
            let value = self.term()?;
            return Ok(Assignment::SetField {
                column,
                field,
                value,
            });
        }
        self.expect(Punct::Eq)?;
        if self.is_bare_column_at(0) {
            // `c = c + v`, `c = c - v`, or `c = c -3` (where `-3` is one INTEGER token).
            let other = self.cident()?;
            let assignment = match self.peek().clone() {
                Tok::Punct(Punct::Plus) => {
                    self.advance();
                    Assignment::Add {
                        column: column.clone(),
                        value: self.term()?,
                    }
                }
                Tok::Punct(Punct::Minus) => {
                    self.advance();
                    Assignment::Subtract {
                        column: column.clone(),
                        value: self.term()?,
                    }
                }
                Tok::Integer(i) if i.starts_with('-') => {
                    self.advance();
                    Assignment::Add {
                        column: column.clone(),
                        value: Term::Constant(Constant::Integer(i)),
                    }
                }
                _ => return Err(self.no_viable()),
            };
            if other != column {
                let sign = if matches!(assignment, Assignment::Subtract { .. }) {
                    '-'
                } else {
                    '+'
                };
                return Err(self.error(format!(
                    "Only expressions of the form X = X {sign} <value> are supported."
                )));
            }
            return Ok(assignment);
        }
        let value = self.term()?;
        if self.accept(Punct::Plus) {
            let other = self.cident()?;
            if other != column {
                return Err(self.error(
                    "Only expressions of the form X = <value> + X are supported.".to_string(),
                ));
            }
            return Ok(Assignment::Prepend { column, value });
        }
        Ok(Assignment::Set { column, value })
    }

    /// `deleteStatement`.
    fn delete(&mut self) -> Result<Delete> {
        self.expect_kw("delete")?;
        let mut columns = Vec::new();
        if !self.is_kw("from") {
            loop {
                let column = self.cident()?;
                columns.push(if self.accept(Punct::LBracket) {
                    let key = self.term()?;
                    self.expect(Punct::RBracket)?;
                    DeleteSelector::Element { column, key }
                } else if self.accept(Punct::Dot) {
                    DeleteSelector::Field {
                        column,
                        field: self.ident()?,
                    }
                } else {
                    DeleteSelector::Column(column)
                });
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
        }
        self.expect_kw("from")?;
        let table = self.table_name()?;
        let using = self.opt_using(false)?;
        self.expect_kw("where")?;
        let where_clause = self.where_clause()?;
        let conditions = self.opt_conditions()?;
        Ok(Delete {
            table,
            columns,
            using,
            where_clause,
            conditions,
        })
    }

    /// `batchStatement`.
    fn batch(&mut self) -> Result<Batch> {
        self.expect_kw("begin")?;
        let kind = if self.accept_kw("unlogged") {
            BatchKind::Unlogged
        } else if self.accept_kw("counter") {
            BatchKind::Counter
        } else {
            BatchKind::Logged
        };
        self.expect_kw("batch")?;
        let using = self.opt_using(true)?;
        let mut statements = Vec::new();
        loop {
            let statement = match self.peek() {
                Tok::Ident(w) if w == "insert" => Statement::Insert(self.insert()?),
                Tok::Ident(w) if w == "update" => Statement::Update(self.update()?),
                Tok::Ident(w) if w == "delete" => Statement::Delete(self.delete()?),
                _ => break,
            };
            statements.push(statement);
            self.accept(Punct::Semicolon);
        }
        self.expect_kw("apply")?;
        self.expect_kw("batch")?;
        Ok(Batch {
            kind,
            using,
            statements,
        })
    }

    // ---------------------------------------------------------------- DDL

    /// `properties`: `name = value (AND name = value)*`. A property given twice is refused as
    /// Cassandra's `PropertyDefinitions.addProperty` words it.
    fn properties(&mut self) -> Result<Properties> {
        let mut properties: Vec<Property> = Vec::new();
        loop {
            let property = self.property()?;
            check_new_property(&properties, &property)?;
            properties.push(property);
            if !self.accept_kw("and") {
                return Ok(Properties(properties));
            }
        }
    }

    /// `property`. A map value is Cassandra's `fullMapLiteral` of terms, of which only
    /// constants are accepted, each key once (`PropertyDefinitions.convertPropertyMap`,
    /// whose words the refusals keep).
    fn property(&mut self) -> Result<Property> {
        let name = self.ident()?;
        self.expect(Punct::Eq)?;
        let value = if self.accept(Punct::LBrace) {
            let mut entries: Vec<(Constant, Constant)> = Vec::new();
            if !self.accept(Punct::RBrace) {
                loop {
                    let key = self.term()?;
                    self.expect(Punct::Colon)?;
                    let value = self.term()?;
                    let marker_note = |t: &Term| match t {
                        Term::BindMarker(_) => " (bind variables are not supported in DDL queries)",
                        _ => "",
                    };
                    let Term::Constant(k) = &key else {
                        return Err(ParseError::unpositioned(format!(
                            "Invalid property name: {key}{}",
                            marker_note(&key)
                        )));
                    };
                    let Term::Constant(v) = value else {
                        return Err(ParseError::unpositioned(format!(
                            "Invalid property value: {value} for property: {key}{}",
                            marker_note(&value)
                        )));
                    };
                    let raw = constant_raw_text(k);
                    if entries.iter().any(|(e, _)| constant_raw_text(e) == raw) {
                        return Err(ParseError::unpositioned(format!(
                            "Multiple definition for property {raw}"
                        )));
                    }
                    entries.push((k.clone(), v));
                    if !self.accept(Punct::Comma) {
                        break;
                    }
                }
                self.expect(Punct::RBrace)?;
            }
            PropertyValue::Map(entries)
        } else if let Some(c) = self.constant() {
            PropertyValue::Constant(c)
        } else if matches!(self.peek(), Tok::Ident(_)) {
            PropertyValue::Identifier(self.ident()?)
        } else {
            return Err(self.no_viable());
        };
        Ok(Property { name, value })
    }

    /// `columnMask`, if present.
    fn opt_mask(&mut self) -> Result<Option<ColumnMask>> {
        if !self.accept_kw("masked") {
            return Ok(None);
        }
        self.expect_kw("with")?;
        if self.accept_kw("default") {
            return Ok(Some(ColumnMask {
                function: None,
                args: Vec::new(),
            }));
        }
        let (keyspace, name) = self.function_name()?;
        self.expect(Punct::LParen)?;
        let mut args = Vec::new();
        if !self.accept(Punct::RParen) {
            loop {
                args.push(self.term()?);
                if !self.accept(Punct::Comma) {
                    break;
                }
            }
            self.expect(Punct::RParen)?;
        }
        Ok(Some(ColumnMask {
            function: Some(QualifiedName { keyspace, name }),
            args,
        }))
    }

    /// `ident comparatorType [STATIC] [columnMask]`.
    fn column_def(&mut self) -> Result<ColumnDef> {
        let name = self.ident()?;
        let ty = self.type_expr()?;
        let is_static = self.accept_kw("static");
        let mask = self.opt_mask()?;
        Ok(ColumnDef {
            name,
            ty,
            is_static,
            mask,
        })
    }

    fn create(&mut self) -> Result<Statement> {
        self.expect_kw("create")?;
        let Tok::Ident(what) = self.peek().clone() else {
            return Err(self.no_viable());
        };
        match what.as_str() {
            "keyspace" | "schema" => {
                self.advance();
                let if_not_exists = self.if_not_exists()?;
                let name = self.keyspace_ident()?;
                self.expect_kw("with")?;
                let properties = self.properties()?;
                Ok(Statement::CreateKeyspace(CreateKeyspace {
                    name,
                    if_not_exists,
                    properties,
                }))
            }
            "table" | "columnfamily" => {
                self.advance();
                self.create_table()
            }
            "type" => {
                self.advance();
                let if_not_exists = self.if_not_exists()?;
                let name = self.user_type_name()?;
                self.expect(Punct::LParen)?;
                let mut fields = Vec::new();
                loop {
                    let field = self.ident()?;
                    fields.push((field, self.type_expr()?));
                    if !self.accept(Punct::Comma) || self.is_punct(Punct::RParen) {
                        break;
                    }
                }
                self.expect(Punct::RParen)?;
                Ok(Statement::CreateType(CreateType {
                    name,
                    if_not_exists,
                    fields,
                }))
            }
            "index" => self.unsupported("CREATE INDEX"),
            "custom" if self.is_kw_at(1, "index") => self.unsupported("CREATE CUSTOM INDEX"),
            "materialized" if self.is_kw_at(1, "view") => {
                self.unsupported("CREATE MATERIALIZED VIEW")
            }
            "trigger" => self.unsupported("CREATE TRIGGER"),
            "role" => self.unsupported("CREATE ROLE"),
            "user" => self.unsupported("CREATE USER"),
            "function" => self.unsupported("CREATE FUNCTION"),
            "aggregate" => self.unsupported("CREATE AGGREGATE"),
            "or" => {
                self.advance();
                self.expect_kw("replace")?;
                if self.is_kw("function") {
                    self.unsupported("CREATE FUNCTION")
                } else if self.is_kw("aggregate") {
                    self.unsupported("CREATE AGGREGATE")
                } else {
                    Err(self.no_viable())
                }
            }
            _ => Err(self.no_viable()),
        }
    }

    /// `createTableStatement` after `CREATE TABLE`.
    fn create_table(&mut self) -> Result<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let name = self.table_name()?;
        if self.is_kw("like") {
            return self.unsupported("CREATE TABLE LIKE");
        }
        self.expect(Punct::LParen)?;
        let mut columns = Vec::new();
        let mut primary_key: Option<(Vec<Identifier>, Vec<Identifier>)> = None;
        let mut multiple_primary_keys = false;
        // A second PRIMARY KEY is kept out of the statement, and marked, unless a column
        // declared twice came before it: Cassandra's parser refuses whichever comes first.
        let no_column_twice = |columns: &[ColumnDef]| {
            !columns
                .iter()
                .enumerate()
                .any(|(i, c)| columns[..i].iter().any(|d| d.name == c.name))
        };
        loop {
            if self.is_kw("primary") && self.is_kw_at(1, "key") {
                let first = primary_key.is_none();
                if !first && no_column_twice(&columns) {
                    multiple_primary_keys = true;
                }
                self.advance();
                self.advance();
                self.expect(Punct::LParen)?;
                let partition = if self.is_punct(Punct::LParen) {
                    self.identifier_tuple()?
                } else {
                    vec![self.ident()?]
                };
                let mut clustering = Vec::new();
                while self.accept(Punct::Comma) {
                    clustering.push(self.ident()?);
                }
                self.expect(Punct::RParen)?;
                if first {
                    primary_key = Some((partition, clustering));
                }
            } else {
                let column = self.column_def()?;
                let name = column.name.clone();
                columns.push(column);
                if self.is_kw("primary") {
                    self.advance();
                    self.expect_kw("key")?;
                    if primary_key.is_none() {
                        primary_key = Some((vec![name], Vec::new()));
                    } else if no_column_twice(&columns) {
                        multiple_primary_keys = true;
                    }
                }
            }
            // `( ',' tableColumns? )*`: a trailing comma is allowed.
            if !self.accept(Punct::Comma) || self.is_punct(Punct::RParen) {
                break;
            }
        }
        self.expect(Punct::RParen)?;
        let mut clustering_order = Vec::new();
        let mut compact_storage = false;
        let mut properties = Vec::new();
        if self.accept_kw("with") {
            loop {
                if self.is_kw("compact") && self.is_kw_at(1, "storage") {
                    self.advance();
                    self.advance();
                    compact_storage = true;
                } else if self.is_kw("clustering") && self.is_kw_at(1, "order") {
                    self.advance();
                    self.advance();
                    self.expect_kw("by")?;
                    self.expect(Punct::LParen)?;
                    loop {
                        let column = self.ident()?;
                        let Some(order) = self.opt_order() else {
                            return Err(self.no_viable());
                        };
                        clustering_order.push((column, order));
                        if !self.accept(Punct::Comma) {
                            break;
                        }
                    }
                    self.expect(Punct::RParen)?;
                } else {
                    let property = self.property()?;
                    check_new_property(&properties, &property)?;
                    properties.push(property);
                }
                if !self.accept_kw("and") {
                    break;
                }
            }
        }
        // A missing PRIMARY KEY is a semantic error in Cassandra (InvalidRequest, raised when the
        // statement is prepared), so it parses to an empty partition key for the executor to
        // refuse.
        let (partition_key, clustering_columns) = primary_key.unwrap_or_default();
        Ok(Statement::CreateTable(CreateTable {
            name,
            if_not_exists,
            columns,
            partition_key,
            clustering_columns,
            clustering_order,
            compact_storage,
            properties: Properties(properties),
            multiple_primary_keys,
        }))
    }

    /// `ident TO ident (AND ident TO ident)*`.
    fn renames(&mut self) -> Result<Vec<(Identifier, Identifier)>> {
        let mut renames = Vec::new();
        loop {
            let from = self.ident()?;
            self.expect_kw("to")?;
            renames.push((from, self.ident()?));
            if !self.accept_kw("and") {
                return Ok(renames);
            }
        }
    }

    fn alter(&mut self) -> Result<Statement> {
        self.expect_kw("alter")?;
        let Tok::Ident(what) = self.peek().clone() else {
            return Err(self.no_viable());
        };
        match what.as_str() {
            "keyspace" | "schema" => {
                self.advance();
                let if_exists = self.if_exists()?;
                let name = self.keyspace_ident()?;
                self.expect_kw("with")?;
                let properties = self.properties()?;
                Ok(Statement::AlterKeyspace(AlterKeyspace {
                    name,
                    if_exists,
                    properties,
                }))
            }
            "table" | "columnfamily" => {
                self.advance();
                self.alter_table()
            }
            "type" => {
                self.advance();
                let if_exists = self.if_exists()?;
                let name = self.user_type_name()?;
                let action = if self.accept_kw("alter") {
                    let field = self.ident()?;
                    self.expect_kw("type")?;
                    AlterTypeAction::AlterField {
                        field,
                        ty: self.type_expr()?,
                    }
                } else if self.accept_kw("add") {
                    let if_not_exists = self.if_not_exists()?;
                    let field = self.ident()?;
                    AlterTypeAction::Add {
                        if_not_exists,
                        field,
                        ty: self.type_expr()?,
                    }
                } else if self.accept_kw("rename") {
                    let if_exists = self.if_exists()?;
                    AlterTypeAction::Rename {
                        if_exists,
                        renames: self.renames()?,
                    }
                } else {
                    return Err(self.no_viable());
                };
                Ok(Statement::AlterType(AlterType {
                    name,
                    if_exists,
                    action,
                }))
            }
            "materialized" if self.is_kw_at(1, "view") => {
                self.unsupported("ALTER MATERIALIZED VIEW")
            }
            "role" => self.unsupported("ALTER ROLE"),
            "user" => self.unsupported("ALTER USER"),
            _ => Err(self.no_viable()),
        }
    }

    /// `alterTableStatement` after `ALTER TABLE`.
    fn alter_table(&mut self) -> Result<Statement> {
        let if_exists = self.if_exists()?;
        let name = self.table_name()?;
        let action = if self.accept_kw("alter") {
            let column_if_exists = self.if_exists()?;
            let column = self.cident()?;
            if !column_if_exists && self.accept_kw("type") {
                AlterTableAction::AlterType {
                    column,
                    ty: self.type_expr()?,
                }
            } else if self.is_kw("masked") {
                AlterTableAction::Mask {
                    if_exists: column_if_exists,
                    column,
                    mask: self.opt_mask()?,
                }
            } else if self.accept_kw("drop") {
                self.expect_kw("masked")?;
                AlterTableAction::Mask {
                    if_exists: column_if_exists,
                    column,
                    mask: None,
                }
            } else {
                return Err(self.no_viable());
            }
        } else if self.accept_kw("add") {
            let if_not_exists = self.if_not_exists()?;
            let mut columns = Vec::new();
            if self.accept(Punct::LParen) {
                loop {
                    columns.push(self.column_def()?);
                    if !self.accept(Punct::Comma) {
                        break;
                    }
                }
                self.expect(Punct::RParen)?;
            } else {
                columns.push(self.column_def()?);
            }
            AlterTableAction::Add {
                if_not_exists,
                columns,
            }
        } else if self.is_kw("drop") && self.is_kw_at(1, "compact") && self.is_kw_at(2, "storage") {
            self.advance();
            self.advance();
            self.advance();
            AlterTableAction::DropCompactStorage
        } else if self.accept_kw("drop") {
            let column_if_exists = self.if_exists()?;
            let columns = if self.is_punct(Punct::LParen) {
                self.identifier_tuple()?
            } else {
                vec![self.ident()?]
            };
            let mut timestamp = None;
            if self.accept_kw("using") {
                self.expect_kw("timestamp")?;
                let parsed = match self.peek() {
                    Tok::Integer(s) => s.parse::<i64>().ok(),
                    _ => None,
                };
                let Some(t) = parsed else {
                    return Err(self.mismatched("INTEGER"));
                };
                self.advance();
                timestamp = Some(t);
            }
            AlterTableAction::Drop {
                if_exists: column_if_exists,
                columns,
                timestamp,
            }
        } else if self.accept_kw("rename") {
            let column_if_exists = self.if_exists()?;
            AlterTableAction::Rename {
                if_exists: column_if_exists,
                renames: self.renames()?,
            }
        } else if self.accept_kw("with") {
            AlterTableAction::With(self.properties()?)
        } else {
            return Err(self.no_viable());
        };
        Ok(Statement::AlterTable(AlterTable {
            name,
            if_exists,
            action,
        }))
    }

    fn drop(&mut self) -> Result<Statement> {
        self.expect_kw("drop")?;
        let Tok::Ident(what) = self.peek().clone() else {
            return Err(self.no_viable());
        };
        match what.as_str() {
            "keyspace" | "schema" => {
                self.advance();
                let if_exists = self.if_exists()?;
                Ok(Statement::DropKeyspace(DropKeyspace {
                    if_exists,
                    name: self.keyspace_ident()?,
                }))
            }
            "table" | "columnfamily" => {
                self.advance();
                let if_exists = self.if_exists()?;
                Ok(Statement::DropTable(DropTable {
                    if_exists,
                    name: self.table_name()?,
                }))
            }
            "type" => {
                self.advance();
                let if_exists = self.if_exists()?;
                Ok(Statement::DropType(DropType {
                    if_exists,
                    name: self.user_type_name()?,
                }))
            }
            "index" => {
                self.advance();
                self.if_exists()?;
                self.qualified_name()?;
                Ok(Statement::Unsupported {
                    feature: "DROP INDEX",
                })
            }
            "materialized" if self.is_kw_at(1, "view") => {
                self.advance();
                self.advance();
                self.if_exists()?;
                self.qualified_name()?;
                Ok(Statement::Unsupported {
                    feature: "DROP MATERIALIZED VIEW",
                })
            }
            "trigger" => self.unsupported("DROP TRIGGER"),
            "function" => self.unsupported("DROP FUNCTION"),
            "aggregate" => self.unsupported("DROP AGGREGATE"),
            "role" => self.unsupported("DROP ROLE"),
            "user" => self.unsupported("DROP USER"),
            "identity" => self.unsupported("DROP IDENTITY"),
            _ => Err(self.no_viable()),
        }
    }

    /// `describeStatement`.
    fn describe(&mut self) -> Result<Describe> {
        self.advance(); // DESCRIBE | DESC
        let word = match self.peek() {
            Tok::Ident(w) => w.clone(),
            Tok::Quoted(_) => String::new(),
            _ => return Err(self.no_viable()),
        };
        // Keywords win over generic names (ANTLR's syntactic predicates), except where a
        // qualified name follows: `DESCRIBE tables.t` names a table in keyspace "tables".
        let qualified_follows = self.is_punct_at(1, Punct::Dot);
        let target = match word.as_str() {
            "cluster" if !qualified_follows => {
                self.advance();
                DescribeTarget::Cluster
            }
            "full" if self.is_kw_at(1, "schema") => {
                self.advance();
                self.advance();
                DescribeTarget::Schema { full: true }
            }
            "schema" => {
                self.advance();
                DescribeTarget::Schema { full: false }
            }
            "keyspaces" if !qualified_follows => {
                self.advance();
                DescribeTarget::Keyspaces
            }
            "only" if self.is_kw_at(1, "keyspace") => {
                self.advance();
                self.advance();
                DescribeTarget::Keyspace {
                    name: self.opt_ident(),
                    only: true,
                }
            }
            "keyspace" => {
                self.advance();
                DescribeTarget::Keyspace {
                    name: self.opt_ident(),
                    only: false,
                }
            }
            "tables" if !qualified_follows => {
                self.advance();
                DescribeTarget::Tables
            }
            "table" | "columnfamily" => {
                self.advance();
                DescribeTarget::Table(self.qualified_name()?)
            }
            "index" => {
                self.advance();
                DescribeTarget::Index(self.qualified_name()?)
            }
            "materialized" => {
                self.advance();
                self.expect_kw("view")?;
                DescribeTarget::MaterializedView(self.qualified_name()?)
            }
            "types" if !qualified_follows => {
                self.advance();
                DescribeTarget::Types
            }
            "type" if !qualified_follows => {
                self.advance();
                DescribeTarget::Type(self.user_type_name()?)
            }
            "functions" if !qualified_follows => {
                self.advance();
                DescribeTarget::Functions
            }
            "function" if !qualified_follows => {
                self.advance();
                let (keyspace, name) = self.function_name()?;
                DescribeTarget::Function(QualifiedName { keyspace, name })
            }
            "aggregates" if !qualified_follows => {
                self.advance();
                DescribeTarget::Aggregates
            }
            "aggregate" if !qualified_follows => {
                self.advance();
                let (keyspace, name) = self.function_name()?;
                DescribeTarget::Aggregate(QualifiedName { keyspace, name })
            }
            _ => DescribeTarget::Generic(self.qualified_name()?),
        };
        let with_internals = self.accept_kw("with");
        if with_internals {
            self.expect_kw("internals")?;
        }
        Ok(Describe {
            target,
            with_internals,
        })
    }

    fn opt_ident(&mut self) -> Option<Identifier> {
        if self.is_ident_at(0) && !self.is_kw("with") {
            self.ident().ok()
        } else {
            None
        }
    }
}

/// A constant's text as Cassandra's `Constants.Literal.getRawText` gives it: a string without
/// its quotes, anything else as written.
fn constant_raw_text(c: &Constant) -> String {
    match c {
        Constant::String(s)
        | Constant::Integer(s)
        | Constant::Float(s)
        | Constant::Uuid(s)
        | Constant::Duration(s) => s.clone(),
        Constant::Hex(h) => format!("0x{h}"),
        Constant::Boolean(b) => b.to_string(),
        Constant::NaN => "NaN".to_string(),
        Constant::Infinity => "Infinity".to_string(),
        Constant::NegInfinity => "-Infinity".to_string(),
    }
}

/// Refuses a property given twice, as Cassandra's `PropertyDefinitions.addProperty` words it.
fn check_new_property(properties: &[Property], property: &Property) -> Result<()> {
    if properties.iter().any(|p| p.name == property.name) {
        return Err(ParseError::unpositioned(format!(
            "Multiple definitions for property '{}'",
            property.name.as_str()
        )));
    }
    Ok(())
}
