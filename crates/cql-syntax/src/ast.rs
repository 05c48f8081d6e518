//! The syntax tree produced by the parser.
//!
//! It mirrors Cassandra's raw statements (`*.Raw` classes in `org.apache.cassandra.cql3`): it
//! records what was written, not what it means. Whether a column exists, whether `{}` is a set
//! or a map, whether a term fits a type: all of that is decided later, against the schema, by
//! the query engine.

use std::fmt;

/// A keyspace, table, column, type, field, function or alias name, already case-normalised the
/// way Cassandra does it: unquoted names are lowercased, double-quoted names keep their case.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identifier(String);

impl Identifier {
    /// Wraps an already-normalised name (as stored in `system_schema`).
    pub fn new(name: impl Into<String>) -> Self {
        Identifier(name.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// True when the name must be double-quoted to be read back as itself: it is not a plain
    /// lowercase identifier, or it is a reserved keyword (or a literal such as `true`).
    pub fn needs_quoting(&self) -> bool {
        let mut chars = self.0.chars();
        let plain = match chars.next() {
            Some(first) => {
                first.is_ascii_lowercase()
                    && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            }
            None => false,
        };
        !plain || crate::lexer::is_reserved(&self.0)
    }

    /// The name as it must be written in CQL text (quoted with `""` escapes when needed).
    pub fn to_cql(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Identifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.needs_quoting() {
            write!(f, "\"{}\"", self.0.replace('"', "\"\""))
        } else {
            f.write_str(&self.0)
        }
    }
}

/// `[keyspace.]name` for tables, types, functions, indexes and views.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QualifiedName {
    pub keyspace: Option<Identifier>,
    pub name: Identifier,
}

/// A literal constant. Numeric forms keep their source text (sign included) so that the
/// engine can parse them against the target type (an `Integer` may become a varint or a
/// double; a `Float` may become a decimal without loss).
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    /// Unescaped content of `'...'` or `$$...$$`.
    String(String),
    /// `-?[0-9]+`, as written.
    Integer(String),
    /// `1.5`, `1e10`, `-1.5E-3`, `1.`, as written.
    Float(String),
    Boolean(bool),
    /// `01234567-89ab-cdef-0123-456789abcdef`, as written.
    Uuid(String),
    /// The hex digits of `0x...`, without the `0x` (may be empty).
    Hex(String),
    /// `1h30m`, `-1d`, `P1DT2H`, `P1W`, `P0001-02-03T04:05:06`, as written.
    Duration(String),
    /// `NaN` and `-NaN`.
    NaN,
    Infinity,
    NegInfinity,
}

/// `?` or `:name`. Every marker of a statement (named or not, batches included) gets the next
/// index in order of appearance, which is its position in the prepared statement's variables.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BindMarker {
    pub index: u32,
    /// `None` for `?`.
    pub name: Option<Identifier>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// A value expression (Cassandra's `Term.Raw`).
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    Constant(Constant),
    Null,
    BindMarker(BindMarker),
    List(Vec<Term>),
    /// `{a, b}`. An empty `{}` is always parsed as an empty `Set`, as Cassandra does: it is
    /// also the empty map, and the engine decides by the receiver's type.
    Set(Vec<Term>),
    Map(Vec<(Term, Term)>),
    /// `(a, b)`; `(a)` is a one-element tuple, as in Cassandra's grammar.
    Tuple(Vec<Term>),
    /// `{field: value, ...}` where every key is an identifier.
    UserType(Vec<(Identifier, Term)>),
    FunctionCall {
        keyspace: Option<Identifier>,
        name: Identifier,
        args: Vec<Term>,
    },
    /// `(type) term`.
    TypeHint {
        ty: TypeExpr,
        term: Box<Term>,
    },
    /// `CAST(term AS native_type)`.
    Cast {
        term: Box<Term>,
        ty: TypeExpr,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Term>,
        rhs: Box<Term>,
    },
    Negate(Box<Term>),
}

/// A CQL type as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypeExpr {
    /// Lowercase native type name as written: ascii, bigint, blob, boolean, counter, date,
    /// decimal, double, duration, float, inet, int, smallint, text, varchar (an alias of text,
    /// kept as written), time, timestamp, timeuuid, tinyint, uuid, varint.
    Native(String),
    List(Box<TypeExpr>),
    Set(Box<TypeExpr>),
    Map(Box<TypeExpr>, Box<TypeExpr>),
    Tuple(Vec<TypeExpr>),
    Frozen(Box<TypeExpr>),
    UserType(QualifiedName),
    /// `vector<element, dimension>`. The dimension is any Java int, as Cassandra's grammar
    /// takes it: one below 1 is refused when the type is resolved (an invalid request, not a
    /// syntax error).
    Vector(Box<TypeExpr>, i32),
    /// `'org.apache.cassandra.db.marshal.SomeType'`.
    Custom(String),
}

/// The text Cassandra gives a term in its messages (`Term.Raw.getText()`), quirks included: a
/// string between quotes without re-escaping, `NULL`, every marker as `?`, a type hint with no
/// space before its term.
impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T>(
            f: &mut fmt::Formatter<'_>,
            items: &[T],
            one: impl Fn(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
        ) -> fmt::Result {
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                one(f, item)?;
            }
            Ok(())
        }
        match self {
            Term::Constant(c) => match c {
                Constant::String(s) => write!(f, "'{s}'"),
                Constant::Integer(t)
                | Constant::Float(t)
                | Constant::Uuid(t)
                | Constant::Duration(t) => f.write_str(t),
                Constant::Boolean(b) => write!(f, "{b}"),
                Constant::Hex(h) => write!(f, "0x{h}"),
                Constant::NaN => f.write_str("NaN"),
                Constant::Infinity => f.write_str("Infinity"),
                Constant::NegInfinity => f.write_str("-Infinity"),
            },
            Term::Null => f.write_str("NULL"),
            Term::BindMarker(_) => f.write_str("?"),
            Term::List(items) => {
                f.write_str("[")?;
                list(f, items, |f, t| write!(f, "{t}"))?;
                f.write_str("]")
            }
            Term::Set(items) => {
                f.write_str("{")?;
                list(f, items, |f, t| write!(f, "{t}"))?;
                f.write_str("}")
            }
            Term::Map(entries) => {
                f.write_str("{")?;
                list(f, entries, |f, (k, v)| write!(f, "{k}: {v}"))?;
                f.write_str("}")
            }
            Term::Tuple(items) => {
                f.write_str("(")?;
                list(f, items, |f, t| write!(f, "{t}"))?;
                f.write_str(")")
            }
            Term::UserType(fields) => {
                f.write_str("{")?;
                list(f, fields, |f, (name, t)| write!(f, "{name}: {t}"))?;
                f.write_str("}")
            }
            Term::FunctionCall {
                keyspace,
                name,
                args,
            } => {
                if let Some(ks) = keyspace {
                    write!(f, "{ks}.")?;
                }
                write!(f, "{name}(")?;
                list(f, args, |f, t| write!(f, "{t}"))?;
                f.write_str(")")
            }
            Term::TypeHint { ty, term } => write!(f, "({ty}){term}"),
            Term::Cast { term, ty } => write!(f, "CAST({term} AS {ty})"),
            Term::Binary { op, lhs, rhs } => {
                let op = match op {
                    BinaryOp::Add => "+",
                    BinaryOp::Sub => "-",
                    BinaryOp::Mul => "*",
                    BinaryOp::Div => "/",
                    BinaryOp::Mod => "%",
                };
                write!(f, "{lhs} {op} {rhs}")
            }
            Term::Negate(term) => write!(f, "-{term}"),
        }
    }
}

/// A type as CQL writes it.
impl fmt::Display for TypeExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TypeExpr::Native(name) => f.write_str(name),
            TypeExpr::List(t) => write!(f, "list<{t}>"),
            TypeExpr::Set(t) => write!(f, "set<{t}>"),
            TypeExpr::Map(k, v) => write!(f, "map<{k}, {v}>"),
            TypeExpr::Tuple(items) => {
                f.write_str("tuple<")?;
                for (i, t) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(">")
            }
            TypeExpr::Frozen(t) => write!(f, "frozen<{t}>"),
            TypeExpr::UserType(name) => match &name.keyspace {
                Some(ks) => write!(f, "{ks}.{}", name.name),
                None => write!(f, "{}", name.name),
            },
            TypeExpr::Vector(t, n) => write!(f, "vector<{t}, {n}>"),
            TypeExpr::Custom(class) => write!(f, "'{class}'"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    Asc,
    Desc,
}

/// Comparison operators of WHERE relations and IF conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    Eq,
    Lt,
    Lte,
    Gt,
    Gte,
    Neq,
    In,
    NotIn,
    Contains,
    NotContains,
    ContainsKey,
    NotContainsKey,
    Like,
    Between,
}

/// The right-hand side of a relation or condition.
#[derive(Debug, Clone, PartialEq)]
pub enum RelationValue {
    /// `= term`, `> (1, 2)`, `CONTAINS term`, `LIKE term`...
    Single(Term),
    /// `IN (t1, t2, ...)`; for multi-column relations each element is a tuple or a marker.
    List(Vec<Term>),
    /// `IN ?` / `IN :name`: one marker bound to the whole list.
    Marker(BindMarker),
    /// `BETWEEN low AND high`.
    Between(Term, Term),
}

/// One restriction of a WHERE clause (relations are joined by AND).
#[derive(Debug, Clone, PartialEq)]
pub enum Relation {
    Simple {
        column: Identifier,
        op: Operator,
        value: RelationValue,
    },
    /// `(a, b) > (1, 2)`, `(a, b) IN ((1, 2), (3, 4))`, `(a, b) = ?`.
    MultiColumn {
        columns: Vec<Identifier>,
        op: Operator,
        value: RelationValue,
    },
    /// `token(a, b) > term`.
    Token {
        columns: Vec<Identifier>,
        op: Operator,
        value: RelationValue,
    },
    /// `m['k'] = 1`.
    Element {
        column: Identifier,
        key: Term,
        op: Operator,
        value: Term,
    },
    /// `c IS NOT NULL` (materialized views).
    IsNotNull(Identifier),
    /// `expr(index_name, term)`.
    CustomIndex { index: QualifiedName, value: Term },
}

/// One condition of `IF c = x AND ...` (lightweight transactions).
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Simple {
        column: Identifier,
        op: Operator,
        value: RelationValue,
    },
    /// `IF m['k'] = v`.
    Element {
        column: Identifier,
        key: Term,
        op: Operator,
        value: RelationValue,
    },
    /// `IF udt.field = v`.
    Field {
        column: Identifier,
        field: Identifier,
        op: Operator,
        value: RelationValue,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Conditions {
    /// `IF EXISTS`.
    Exists,
    Columns(Vec<Condition>),
}

/// `USING TIMESTAMP t AND TTL n AND TIMEOUT d`. Each value is an integer or duration constant
/// or a bind marker. `TIMEOUT` is ScyllaDB's extension.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Using {
    pub timestamp: Option<Term>,
    pub ttl: Option<Term>,
    pub timeout: Option<Term>,
}

/// `WITH name = value AND ...` options of keyspaces, tables, indexes and views.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Properties(pub Vec<Property>);

#[derive(Debug, Clone, PartialEq)]
pub struct Property {
    pub name: Identifier,
    pub value: PropertyValue,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PropertyValue {
    Constant(Constant),
    /// An unreserved keyword used as a value (Cassandra keeps its text).
    Identifier(Identifier),
    /// `{'class': 'SimpleStrategy', 'replication_factor': 1}`; keys and values are constants.
    Map(Vec<(Constant, Constant)>),
}

/// `MASKED WITH DEFAULT` / `MASKED WITH mask_inner(1, null)` (dynamic data masking, 5.0).
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnMask {
    /// `None` for `MASKED WITH DEFAULT`.
    pub function: Option<QualifiedName>,
    pub args: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    pub name: Identifier,
    pub ty: TypeExpr,
    pub is_static: bool,
    pub mask: Option<ColumnMask>,
}

/// An expression in a SELECT clause (Cassandra's `Selectable.Raw`).
#[derive(Debug, Clone, PartialEq)]
pub enum SelectorExpr {
    Column(Identifier),
    /// A constant, `NULL` or a bind marker.
    Term(Term),
    /// `COUNT(*)`; `count(x)` is an ordinary `FunctionCall`.
    CountRows,
    /// `WRITETIME(c)`; the inner expression is a column, possibly with `.field` / `[elem]`.
    WriteTime(Box<SelectorExpr>),
    MaxWriteTime(Box<SelectorExpr>),
    Ttl(Box<SelectorExpr>),
    FunctionCall {
        keyspace: Option<Identifier>,
        name: Identifier,
        args: Vec<SelectorExpr>,
    },
    /// `CAST(expr AS native_type)`.
    Cast(Box<SelectorExpr>, TypeExpr),
    /// `(type) expr`.
    TypeHint(TypeExpr, Box<SelectorExpr>),
    /// `udt.field`.
    FieldAccess(Box<SelectorExpr>, Identifier),
    /// `m['k']`, `l[0]`.
    ElementAccess(Box<SelectorExpr>, Term),
    /// `s[1..3]`, `s[..3]`, `s[1..]`.
    Slice {
        expr: Box<SelectorExpr>,
        from: Option<Term>,
        to: Option<Term>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<SelectorExpr>,
        rhs: Box<SelectorExpr>,
    },
    Negate(Box<SelectorExpr>),
    /// `(a, b)`; a parenthesised single expression is returned as itself.
    Tuple(Vec<SelectorExpr>),
    List(Vec<SelectorExpr>),
    /// `{a, b}`, and `{}`.
    Set(Vec<SelectorExpr>),
    /// `{k: v}`; a user-type literal looks the same (keys are then `Column`s).
    Map(Vec<(SelectorExpr, SelectorExpr)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    pub expr: SelectorExpr,
    pub alias: Option<Identifier>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// `*`
    Wildcard,
    Columns(Vec<Selector>),
}

/// `ORDER BY column [ANN OF term] [ASC|DESC]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Ordering {
    pub column: Identifier,
    /// `ANN OF [..]`: vector search (5.0).
    pub ann_of: Option<Term>,
    pub order: Order,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    pub json: bool,
    pub distinct: bool,
    pub selection: Selection,
    pub table: QualifiedName,
    pub where_clause: Vec<Relation>,
    /// Usually plain columns; 5.0 also allows functions such as `floor(t, 1h)`.
    pub group_by: Vec<SelectorExpr>,
    pub order_by: Vec<Ordering>,
    /// An integer constant or a bind marker.
    pub per_partition_limit: Option<Term>,
    /// An integer constant or a bind marker.
    pub limit: Option<Term>,
    pub allow_filtering: bool,
    /// ScyllaDB's `USING TIMEOUT d`: a duration constant or a bind marker.
    pub timeout: Option<Term>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonDefault {
    /// `DEFAULT NULL` (the default): omitted columns are set to null.
    Null,
    /// `DEFAULT UNSET`: omitted columns are left alone.
    Unset,
}

#[derive(Debug, Clone, PartialEq)]
pub enum InsertValues {
    /// `(c1, c2) VALUES (v1, v2)`.
    Values {
        columns: Vec<Identifier>,
        values: Vec<Term>,
    },
    /// `JSON '{...}' [DEFAULT NULL|UNSET]`; the value is a string constant or a bind marker.
    Json { value: Term, default: JsonDefault },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Insert {
    pub table: QualifiedName,
    pub values: InsertValues,
    pub if_not_exists: bool,
    pub using: Using,
}

/// One `SET` operation of an UPDATE.
#[derive(Debug, Clone, PartialEq)]
pub enum Assignment {
    /// `c = v`
    Set { column: Identifier, value: Term },
    /// `c.f = v`
    SetField {
        column: Identifier,
        field: Identifier,
        value: Term,
    },
    /// `c[k] = v`
    SetElement {
        column: Identifier,
        key: Term,
        value: Term,
    },
    /// `c = c + v`, `c += v`, and `c = c -3` (Cassandra lexes `-3` as one integer and adds it).
    Add { column: Identifier, value: Term },
    /// `c = c - v`, `c -= v`
    Subtract { column: Identifier, value: Term },
    /// `c = v + c`
    Prepend { column: Identifier, value: Term },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub table: QualifiedName,
    pub using: Using,
    pub assignments: Vec<Assignment>,
    pub where_clause: Vec<Relation>,
    pub conditions: Option<Conditions>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DeleteSelector {
    Column(Identifier),
    /// `DELETE m['k']`, `DELETE l[0]`
    Element {
        column: Identifier,
        key: Term,
    },
    /// `DELETE udt.f`
    Field {
        column: Identifier,
        field: Identifier,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Delete {
    pub table: QualifiedName,
    /// Empty: delete whole rows.
    pub columns: Vec<DeleteSelector>,
    /// Only `timestamp` and `timeout` can be set; `USING TTL` is a syntax error.
    pub using: Using,
    pub where_clause: Vec<Relation>,
    pub conditions: Option<Conditions>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub kind: BatchKind,
    pub using: Using,
    /// Only `Statement::Insert`, `Statement::Update` and `Statement::Delete`.
    pub statements: Vec<Statement>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateKeyspace {
    pub name: Identifier,
    pub if_not_exists: bool,
    pub properties: Properties,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterKeyspace {
    pub name: Identifier,
    pub if_exists: bool,
    pub properties: Properties,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DropKeyspace {
    pub name: Identifier,
    pub if_exists: bool,
}

/// `CREATE TABLE`. The primary key is resolved from either form (`c int PRIMARY KEY` or
/// `PRIMARY KEY ((a, b), c)`); declaring none or several is rejected by the parser with
/// Cassandra's messages.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateTable {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub columns: Vec<ColumnDef>,
    pub partition_key: Vec<Identifier>,
    pub clustering_columns: Vec<Identifier>,
    /// `WITH CLUSTERING ORDER BY (c DESC, ...)`, as written.
    pub clustering_order: Vec<(Identifier, Order)>,
    pub compact_storage: bool,
    pub properties: Properties,
    /// A second PRIMARY KEY was written (and ignored): Cassandra's parser refuses it as an
    /// invalid query naming the table, unless a column declared twice came first.
    pub multiple_primary_keys: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AlterTableAction {
    /// `ALTER c TYPE t` (still in the grammar; rejected by Cassandra at execution).
    AlterType {
        column: Identifier,
        ty: TypeExpr,
    },
    /// `ALTER [IF EXISTS] c MASKED WITH ...` (`Some`) / `ALTER [IF EXISTS] c DROP MASKED` (`None`).
    Mask {
        if_exists: bool,
        column: Identifier,
        mask: Option<ColumnMask>,
    },
    Add {
        if_not_exists: bool,
        columns: Vec<ColumnDef>,
    },
    Drop {
        if_exists: bool,
        columns: Vec<Identifier>,
        /// `USING TIMESTAMP n` (an integer literal).
        timestamp: Option<i64>,
    },
    Rename {
        if_exists: bool,
        renames: Vec<(Identifier, Identifier)>,
    },
    DropCompactStorage,
    With(Properties),
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterTable {
    pub name: QualifiedName,
    pub if_exists: bool,
    pub action: AlterTableAction,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DropTable {
    pub name: QualifiedName,
    pub if_exists: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Truncate {
    pub name: QualifiedName,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CreateType {
    pub name: QualifiedName,
    pub if_not_exists: bool,
    pub fields: Vec<(Identifier, TypeExpr)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AlterTypeAction {
    AlterField {
        field: Identifier,
        ty: TypeExpr,
    },
    Add {
        if_not_exists: bool,
        field: Identifier,
        ty: TypeExpr,
    },
    Rename {
        if_exists: bool,
        renames: Vec<(Identifier, Identifier)>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct AlterType {
    pub name: QualifiedName,
    pub if_exists: bool,
    pub action: AlterTypeAction,
}

#[derive(Debug, Clone, PartialEq)]
pub struct DropType {
    pub name: QualifiedName,
    pub if_exists: bool,
}

/// What `DESCRIBE` (also spelt `DESC`) asks for. cqlsh sends these to the server.
#[derive(Debug, Clone, PartialEq)]
pub enum DescribeTarget {
    Cluster,
    /// `DESCRIBE [FULL] SCHEMA`
    Schema {
        full: bool,
    },
    Keyspaces,
    /// `DESCRIBE [ONLY] KEYSPACE [name]`; no name means the current keyspace.
    Keyspace {
        name: Option<Identifier>,
        only: bool,
    },
    Tables,
    Table(QualifiedName),
    Index(QualifiedName),
    MaterializedView(QualifiedName),
    Types,
    Type(QualifiedName),
    Functions,
    Function(QualifiedName),
    Aggregates,
    Aggregate(QualifiedName),
    /// `DESCRIBE [ks.]name`: whatever object has that name.
    Generic(QualifiedName),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Describe {
    pub target: DescribeTarget,
    /// `... WITH INTERNALS`
    pub with_internals: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    Select(Select),
    Insert(Insert),
    Update(Update),
    Delete(Delete),
    Batch(Batch),
    Use(Identifier),
    Truncate(Truncate),
    CreateKeyspace(CreateKeyspace),
    AlterKeyspace(AlterKeyspace),
    DropKeyspace(DropKeyspace),
    CreateTable(CreateTable),
    AlterTable(AlterTable),
    DropTable(DropTable),
    CreateType(CreateType),
    AlterType(AlterType),
    DropType(DropType),
    Describe(Describe),
    /// Valid CQL that Helenus does not implement; `feature` names it for the error message
    /// (e.g. "CREATE INDEX", "CREATE MATERIALIZED VIEW", "GRANT").
    Unsupported {
        feature: &'static str,
    },
}
