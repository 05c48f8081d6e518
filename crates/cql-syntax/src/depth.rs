//! How deep a parsed statement's trees go: the parser's promise that no tree is deeper than
//! `MAX_NESTING_DEPTH`, measured on the tree itself.
//!
//! Every later walk over a statement (marker numbering, type resolution, evaluation, selector
//! compilation, even dropping the tree) recurses once per level, so this bound is what keeps
//! them all within a thread's stack. `tests.rs` and the fuzz target check the parser against
//! it; being recursive itself, it may only be called on trees the parser built.

use crate::ast::*;

/// The number of nodes on the longest root-to-leaf path of the statement's deepest term,
/// selector or type (a constant is 1; `1 + 2` is 2; `[[1]]` is 3; `frozen<list<int>>` is 3).
/// A selector that is a term (`SelectorExpr::Term`) counts as that term. Statements, clauses
/// and relations hold trees; they are not levels of them. At most `MAX_NESTING_DEPTH` for
/// every statement the parser returns.
pub fn expression_depth(statement: &Statement) -> usize {
    match statement {
        Statement::Select(s) => {
            let selection = match &s.selection {
                Selection::Wildcard => 0,
                Selection::Columns(selectors) => {
                    max(selectors.iter().map(|s| selector_depth(&s.expr)))
                }
            };
            selection
                .max(relations_depth(&s.where_clause))
                .max(max(s.group_by.iter().map(selector_depth)))
                .max(max(s.order_by.iter().map(|o| opt_term_depth(&o.ann_of))))
                .max(opt_term_depth(&s.per_partition_limit))
                .max(opt_term_depth(&s.limit))
                .max(opt_term_depth(&s.timeout))
        }
        Statement::Insert(i) => {
            let values = match &i.values {
                InsertValues::Values { values, .. } => max(values.iter().map(term_depth)),
                InsertValues::Json { value, .. } => term_depth(value),
            };
            values.max(using_depth(&i.using))
        }
        Statement::Update(u) => {
            let assignments = max(u.assignments.iter().map(|a| match a {
                Assignment::Set { value, .. }
                | Assignment::SetField { value, .. }
                | Assignment::Add { value, .. }
                | Assignment::Subtract { value, .. }
                | Assignment::Prepend { value, .. } => term_depth(value),
                Assignment::SetElement { key, value, .. } => term_depth(key).max(term_depth(value)),
            }));
            assignments
                .max(using_depth(&u.using))
                .max(relations_depth(&u.where_clause))
                .max(conditions_depth(&u.conditions))
        }
        Statement::Delete(d) => {
            let columns = max(d.columns.iter().map(|c| match c {
                DeleteSelector::Element { key, .. } => term_depth(key),
                DeleteSelector::Column(_) | DeleteSelector::Field { .. } => 0,
            }));
            columns
                .max(using_depth(&d.using))
                .max(relations_depth(&d.where_clause))
                .max(conditions_depth(&d.conditions))
        }
        Statement::Batch(b) => {
            using_depth(&b.using).max(max(b.statements.iter().map(expression_depth)))
        }
        Statement::CreateTable(t) => max(t.columns.iter().map(column_depth)),
        Statement::AlterTable(t) => match &t.action {
            AlterTableAction::AlterType { ty, .. } => type_depth(ty),
            AlterTableAction::Mask { mask, .. } => mask.as_ref().map_or(0, mask_depth),
            AlterTableAction::Add { columns, .. } => max(columns.iter().map(column_depth)),
            AlterTableAction::Drop { .. }
            | AlterTableAction::Rename { .. }
            | AlterTableAction::DropCompactStorage
            | AlterTableAction::With(_) => 0,
        },
        Statement::CreateType(t) => max(t.fields.iter().map(|(_, ty)| type_depth(ty))),
        Statement::AlterType(t) => match &t.action {
            AlterTypeAction::AlterField { ty, .. } | AlterTypeAction::Add { ty, .. } => {
                type_depth(ty)
            }
            AlterTypeAction::Rename { .. } => 0,
        },
        Statement::Use(_)
        | Statement::Truncate(_)
        | Statement::CreateKeyspace(_)
        | Statement::AlterKeyspace(_)
        | Statement::DropKeyspace(_)
        | Statement::DropTable(_)
        | Statement::DropType(_)
        | Statement::Describe(_)
        | Statement::Unsupported { .. } => 0,
    }
}

/// `term_depth` of a term alone (as `parse_term` returns it).
pub fn term_depth(t: &Term) -> usize {
    1 + match t {
        Term::Constant(_) | Term::Null | Term::BindMarker(_) => 0,
        Term::List(items) | Term::Set(items) | Term::Tuple(items) => {
            max(items.iter().map(term_depth))
        }
        Term::FunctionCall { args, .. } => max(args.iter().map(term_depth)),
        Term::Map(entries) => max(entries
            .iter()
            .map(|(k, v)| term_depth(k).max(term_depth(v)))),
        Term::UserType(fields) => max(fields.iter().map(|(_, v)| term_depth(v))),
        Term::TypeHint { ty, term } | Term::Cast { term, ty } => {
            type_depth(ty).max(term_depth(term))
        }
        Term::Negate(t) => term_depth(t),
        Term::Binary { lhs, rhs, .. } => term_depth(lhs).max(term_depth(rhs)),
    }
}

/// The depth of a type (as `parse_type` returns it).
pub fn type_depth(t: &TypeExpr) -> usize {
    1 + match t {
        TypeExpr::Native(_) | TypeExpr::UserType(_) | TypeExpr::Custom(_) => 0,
        TypeExpr::List(e) | TypeExpr::Set(e) | TypeExpr::Frozen(e) | TypeExpr::Vector(e, _) => {
            type_depth(e)
        }
        TypeExpr::Map(k, v) => type_depth(k).max(type_depth(v)),
        TypeExpr::Tuple(items) => max(items.iter().map(type_depth)),
    }
}

fn selector_depth(s: &SelectorExpr) -> usize {
    if let SelectorExpr::Term(t) = s {
        return term_depth(t);
    }
    1 + match s {
        SelectorExpr::Column(_) | SelectorExpr::CountRows | SelectorExpr::Term(_) => 0,
        SelectorExpr::WriteTime(e)
        | SelectorExpr::MaxWriteTime(e)
        | SelectorExpr::Ttl(e)
        | SelectorExpr::FieldAccess(e, _)
        | SelectorExpr::Negate(e) => selector_depth(e),
        SelectorExpr::Cast(e, ty) | SelectorExpr::TypeHint(ty, e) => {
            selector_depth(e).max(type_depth(ty))
        }
        SelectorExpr::ElementAccess(e, key) => selector_depth(e).max(term_depth(key)),
        SelectorExpr::Slice { expr, from, to } => selector_depth(expr)
            .max(opt_term_depth(from))
            .max(opt_term_depth(to)),
        SelectorExpr::Binary { lhs, rhs, .. } => selector_depth(lhs).max(selector_depth(rhs)),
        SelectorExpr::FunctionCall { args, .. }
        | SelectorExpr::Tuple(args)
        | SelectorExpr::List(args)
        | SelectorExpr::Set(args) => max(args.iter().map(selector_depth)),
        SelectorExpr::Map(entries) => max(entries
            .iter()
            .map(|(k, v)| selector_depth(k).max(selector_depth(v)))),
    }
}

fn max(depths: impl Iterator<Item = usize>) -> usize {
    depths.max().unwrap_or(0)
}

fn opt_term_depth(t: &Option<Term>) -> usize {
    t.as_ref().map_or(0, term_depth)
}

fn using_depth(using: &Using) -> usize {
    opt_term_depth(&using.timestamp)
        .max(opt_term_depth(&using.ttl))
        .max(opt_term_depth(&using.timeout))
}

fn value_depth(value: &RelationValue) -> usize {
    match value {
        RelationValue::Single(t) => term_depth(t),
        RelationValue::List(items) => max(items.iter().map(term_depth)),
        RelationValue::Marker(_) => 1,
        RelationValue::Between(a, b) => term_depth(a).max(term_depth(b)),
    }
}

fn relations_depth(relations: &[Relation]) -> usize {
    max(relations.iter().map(|r| match r {
        Relation::Simple { value, .. }
        | Relation::MultiColumn { value, .. }
        | Relation::Token { value, .. } => value_depth(value),
        Relation::Element { key, value, .. } => term_depth(key).max(term_depth(value)),
        Relation::IsNotNull(_) => 0,
        Relation::CustomIndex { value, .. } => term_depth(value),
    }))
}

fn conditions_depth(conditions: &Option<Conditions>) -> usize {
    let Some(Conditions::Columns(conditions)) = conditions else {
        return 0;
    };
    max(conditions.iter().map(|c| match c {
        Condition::Simple { value, .. } | Condition::Field { value, .. } => value_depth(value),
        Condition::Element { key, value, .. } => term_depth(key).max(value_depth(value)),
    }))
}

fn column_depth(c: &ColumnDef) -> usize {
    type_depth(&c.ty).max(c.mask.as_ref().map_or(0, mask_depth))
}

fn mask_depth(m: &ColumnMask) -> usize {
    max(m.args.iter().map(term_depth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_statement, parse_statements, parse_term, parse_type, MAX_NESTING_DEPTH};

    type Parse = fn(&str) -> Result<usize, crate::ParseError>;

    fn statement(text: &str) -> Result<usize, crate::ParseError> {
        parse_statement(text).map(|s| expression_depth(&s))
    }

    fn script(text: &str) -> Result<usize, crate::ParseError> {
        parse_statements(text).map(|s| s.iter().map(expression_depth).max().unwrap_or(0))
    }

    fn term(text: &str) -> Result<usize, crate::ParseError> {
        parse_term(text).map(|t| term_depth(&t))
    }

    fn ty(text: &str) -> Result<usize, crate::ParseError> {
        parse_type(text).map(|t| type_depth(&t))
    }

    /// `n` times `piece`, joined by `sep`.
    fn repeat(piece: &str, sep: &str, n: usize) -> String {
        vec![piece; n].join(sep)
    }

    /// The largest `n` for which `make(n)` parses, checked to be at least `min` (what real
    /// statements may need), with a tree no deeper than the limit; `n + 1` and a hostile
    /// 100,000 must be refused by the depth limit, not by any other error (nor a crash).
    fn limit_of(what: &str, parse: Parse, min: usize, make: impl Fn(usize) -> String) -> usize {
        let mut n = 1;
        let mut deepest = match parse(&make(n)) {
            Ok(depth) => depth,
            Err(e) => panic!("{what}: {} does not parse: {e}", make(n)),
        };
        loop {
            match parse(&make(n + 1)) {
                Ok(depth) => {
                    deepest = depth;
                    n += 1;
                    assert!(n < 1_000, "{what}: no limit reached");
                }
                Err(e) => {
                    assert!(
                        e.message.contains("nesting depth"),
                        "{what} at {}: {e}",
                        n + 1
                    );
                    break;
                }
            }
        }
        assert!(
            deepest <= MAX_NESTING_DEPTH as usize,
            "{what}: {n} parses to a tree {deepest} deep"
        );
        assert!(n >= min, "{what}: only {n} parse, {min} must");
        let e = parse(&make(100_000)).expect_err("far past the limit");
        assert!(e.message.contains("nesting depth"), "{what}: {e}");
        n
    }

    #[test]
    fn binary_chains_count_as_nesting() {
        // The crash: 1+1+...+1 with 1,000 operands in a WHERE, VALUES or PREPARE.
        let sum = |n| repeat("1", "+", n);
        let n = limit_of("sum in WHERE", statement, 60, |n| {
            format!("SELECT * FROM t WHERE k = {}", sum(n))
        });
        assert_eq!(n, 62, "a relation and its term take two levels");
        assert_eq!(
            limit_of("sum in VALUES", statement, 60, |n| {
                format!("INSERT INTO t (k) VALUES ({})", sum(n))
            }),
            63
        );
        let e = parse_statement(&format!("INSERT INTO t (k) VALUES ({})", sum(1_000)))
            .expect_err("too deep");
        assert_eq!(
            e.to_string(),
            "line 1:151 maximum nesting depth (64) exceeded at input '+'",
            "refused at the first operator past the limit"
        );
        limit_of("difference", term, 60, |n| repeat("1", " - ", n));
        limit_of("product", term, 60, |n| repeat("2", "*", n));
        limit_of("quotients and remainders", term, 30, |n| {
            repeat("7 / 2", " % ", n)
        });
        limit_of("sum of products", term, 30, |n| repeat("1 * 2", " + ", n));
        limit_of("product of sums", term, 20, |n| {
            format!("{}1{}", "(1 + ".repeat(n), ")".repeat(n))
        });
        limit_of("negations", term, 20, |n| {
            format!("{}1{}", "-(".repeat(n), ")".repeat(n))
        });
        limit_of("assignment", statement, 60, |n| {
            format!("UPDATE t SET v = {} WHERE k = 0", sum(n))
        });
        limit_of("condition", statement, 60, |n| {
            format!("UPDATE t SET v = 1 WHERE k = 0 IF v = {}", sum(n))
        });
        limit_of("IN list", statement, 60, |n| {
            format!("SELECT * FROM t WHERE k IN (1, {})", sum(n))
        });
        limit_of("map key", statement, 60, |n| {
            format!("UPDATE t SET m[{}] = 1 WHERE k = 0", sum(n))
        });
        limit_of("mask argument", statement, 60, |n| {
            format!(
                "CREATE TABLE t (k int PRIMARY KEY, v text MASKED WITH mask_inner({}, 1))",
                sum(n)
            )
        });
        limit_of("batch", statement, 60, |n| {
            format!(
                "BEGIN BATCH INSERT INTO t (k) VALUES ({}) APPLY BATCH",
                sum(n)
            )
        });
        limit_of("script", script, 60, |n| {
            format!("SELECT * FROM t; INSERT INTO t (k) VALUES ({})", sum(n))
        });
    }

    #[test]
    fn a_chain_of_deep_operands_is_as_deep_as_its_deepest() {
        let list = |n| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let deepest = limit_of("nested lists", term, 30, list);
        // The deepest list fits; the same list as an operand of '+' is one level too deep,
        // on either side.
        assert!(term(&list(deepest)).is_ok());
        for text in [
            format!("{} + 1", list(deepest)),
            format!("1 + {}", list(deepest)),
        ] {
            let e = term(&text).expect_err("one level too deep");
            assert!(e.message.contains("nesting depth"), "{e}");
        }
    }

    #[test]
    fn nested_terms_are_bounded() {
        let nest = |open: &'static str, close: &'static str| {
            move |n| format!("{}1{}", open.repeat(n), close.repeat(n))
        };
        limit_of("lists", term, 30, nest("[", "]"));
        limit_of("sets", term, 30, nest("{", "}"));
        limit_of("tuples", term, 30, nest("(", ")"));
        limit_of("map values", term, 30, nest("{1: ", "}"));
        limit_of("map keys", term, 30, nest("{", ": 1}"));
        limit_of("user type fields", term, 30, nest("{a: ", "}"));
        limit_of("function arguments", term, 30, nest("f(", ")"));
        limit_of(
            "qualified function arguments",
            term,
            30,
            nest("ks.f(1, ", ")"),
        );
        limit_of("casts", term, 30, nest("cast(", " as int)"));
        limit_of("type hints", term, 30, nest("(int)", ""));
        limit_of("typed hints", term, 15, |n| {
            format!(
                "(frozen<list<{}int{}>>)[1]",
                "list<".repeat(n),
                ">".repeat(n)
            )
        });
        limit_of("lists in a relation", statement, 30, |n| {
            format!(
                "SELECT * FROM t WHERE k = {}1{}",
                "[".repeat(n),
                "]".repeat(n)
            )
        });
        limit_of("tuples in a multi-column relation", statement, 30, |n| {
            format!(
                "SELECT * FROM t WHERE (a, b) = ({}1{}, 1)",
                "(".repeat(n),
                ")".repeat(n)
            )
        });
        limit_of("tuples in a multi-column IN", statement, 30, |n| {
            format!(
                "SELECT * FROM t WHERE (a, b) IN (({}1{}, 1))",
                "(".repeat(n),
                ")".repeat(n)
            )
        });
        limit_of("parenthesised relations", statement, 60, |n| {
            format!(
                "SELECT * FROM t WHERE {}a = 1{}",
                "(".repeat(n),
                ")".repeat(n)
            )
        });
    }

    #[test]
    fn types_are_bounded() {
        let nest = |open: &'static str, close: &'static str| {
            move |n| format!("{}int{}", open.repeat(n), close.repeat(n))
        };
        assert_eq!(limit_of("lists", ty, 30, nest("list<", ">")), 63);
        limit_of("frozen", ty, 30, nest("frozen<", ">"));
        limit_of("map values", ty, 30, nest("map<int, ", ">"));
        limit_of("map keys", ty, 30, nest("map<", ", int>"));
        limit_of("tuples", ty, 30, nest("tuple<int, ", ">"));
        limit_of("vectors", ty, 30, nest("vector<", ", 2>"));
        limit_of("column types", statement, 30, |n| {
            format!(
                "CREATE TABLE t (k int PRIMARY KEY, v {}int{})",
                "frozen<list<".repeat(n),
                ">>".repeat(n)
            )
        });
        limit_of("added columns", statement, 30, |n| {
            format!(
                "ALTER TABLE t ADD v {}int{}",
                "list<".repeat(n),
                ">".repeat(n)
            )
        });
        limit_of("type fields", statement, 30, |n| {
            format!("CREATE TYPE u (a {}int{})", "set<".repeat(n), ">".repeat(n))
        });
        limit_of("altered type fields", statement, 30, |n| {
            format!(
                "ALTER TYPE u ADD a {}int{}",
                "set<".repeat(n),
                ">".repeat(n)
            )
        });
    }

    #[test]
    fn selectors_are_bounded() {
        let select = |selector: String| format!("SELECT {selector} FROM t");
        limit_of("sum", statement, 60, move |n| select(repeat("a", " + ", n)));
        limit_of("product", statement, 60, move |n| {
            select(repeat("a", " * ", n))
        });
        limit_of("fields", statement, 60, move |n| {
            select(format!("a{}", ".b".repeat(n)))
        });
        limit_of("elements", statement, 60, move |n| {
            select(format!("a{}", "[1]".repeat(n)))
        });
        limit_of("slices", statement, 60, move |n| {
            select(format!("a{}", "[1..2]".repeat(n)))
        });
        limit_of("writetime of fields", statement, 60, move |n| {
            select(format!("writetime(a{})", ".b".repeat(n)))
        });
        limit_of("element key", statement, 60, move |n| {
            select(format!("a[{}]", repeat("1", "+", n)))
        });
        let nest = |open: &'static str, close: &'static str| {
            move |n: usize| select(format!("{}a{}", open.repeat(n), close.repeat(n)))
        };
        limit_of("function arguments", statement, 30, nest("f(", ")"));
        limit_of("casts", statement, 30, nest("cast(", " as int)"));
        limit_of("type hints", statement, 30, nest("(int)", ""));
        limit_of("negations", statement, 30, nest("- ", ""));
        limit_of("parentheses", statement, 30, nest("(", ")"));
        limit_of("tuples", statement, 30, nest("(1, ", ")"));
        limit_of("lists", statement, 30, nest("[", "]"));
        limit_of("sets", statement, 30, nest("{", "}"));
        limit_of("maps", statement, 30, nest("{1: ", "}"));
        limit_of("group by", statement, 30, |n| {
            format!(
                "SELECT * FROM t GROUP BY {}a{}",
                "f(".repeat(n),
                ")".repeat(n)
            )
        });
        limit_of("ANN OF", statement, 30, |n| {
            format!(
                "SELECT * FROM t ORDER BY v ANN OF {}1{}",
                "[".repeat(n),
                "]".repeat(n)
            )
        });
    }
}
