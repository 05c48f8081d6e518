//! Every signature of the arithmetic operators and of unary minus, made once: the functions
//! `+`, `-`, `*`, `/`, `%` and `_negate` resolve against them as named functions do.

use std::sync::OnceLock;

use cql_syntax::ast::BinaryOp;
use types::CqlType;

use super::functions::{Scalar, Signature};
use super::operations::{function_name, result_type, Operation, NUMERIC};

/// Every signature of the operator `op`, made once: every operation of every term looks at
/// them, and an operator has some ninety.
pub(crate) fn signatures(op: BinaryOp) -> &'static [Signature] {
    static SIGNATURES: OnceLock<[Vec<Signature>; 5]> = OnceLock::new();
    let all = SIGNATURES.get_or_init(|| {
        [
            BinaryOp::Add,
            BinaryOp::Sub,
            BinaryOp::Mul,
            BinaryOp::Div,
            BinaryOp::Mod,
        ]
        .map(make_signatures)
    });
    let index = match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Mod => 4,
    };
    &all[index]
}

pub(super) fn make_signatures(op: BinaryOp) -> Vec<Signature> {
    let name = function_name(op);
    let mut out = Vec::new();
    let mut push = |left: CqlType, right: CqlType, result: CqlType| {
        out.push(Signature {
            name: name.to_string(),
            args: vec![left.clone(), right.clone()],
            ret: result.clone(),
            function: Scalar::Operation(Operation {
                op,
                left,
                right,
                result,
            }),
        });
    };
    for left in &NUMERIC {
        for right in &NUMERIC {
            push(left.clone(), right.clone(), result_type(left, right));
        }
    }
    if matches!(op, BinaryOp::Add | BinaryOp::Sub) {
        for temporal in [CqlType::Timestamp, CqlType::Date] {
            push(temporal.clone(), CqlType::Duration, temporal);
        }
    }
    if op == BinaryOp::Add {
        for text in [CqlType::Text, CqlType::Ascii] {
            push(text.clone(), text.clone(), text);
        }
    }
    out
}

/// The signatures of unary minus, made once.
pub(crate) fn negation_signatures() -> &'static [Signature] {
    static SIGNATURES: OnceLock<Vec<Signature>> = OnceLock::new();
    SIGNATURES.get_or_init(make_negation_signatures)
}

pub(super) fn make_negation_signatures() -> Vec<Signature> {
    NUMERIC
        .iter()
        .map(|t| Signature {
            name: "_negate".to_string(),
            args: vec![t.clone()],
            ret: t.clone(),
            function: Scalar::Negate(t.clone()),
        })
        .collect()
}
