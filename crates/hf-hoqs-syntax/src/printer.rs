//! The printer: a syntax tree back to canonical source text.
//!
//! The output parses back to the same tree (spans and select-item texts aside): keywords are
//! upper case, names are quoted only when they must be, and parentheses are written exactly
//! where the precedence table needs them. (A tree at the very edge of the nesting limit may
//! print with one more level of parentheses than its source had, and so exceed the limit.) `hf-hoqs` and tools use it to show a normalised
//! query; the round-trip property is tested with random trees.

use crate::ast::{
    BinaryOp, CallArgs, Direction, Expr, ExprKind, Literal, NullsOrder, Path, Query, RowCountValue,
    SelectValue, UnaryOp,
};
use crate::lexer::{is_word_continue, is_word_start};
use crate::parser::is_reserved;

/// Prints a query as one line of canonical HOQS.
pub fn print(query: &Query) -> String {
    let mut out = String::new();
    write_query(&mut out, query);
    out
}

/// Prints an expression as canonical text.
pub fn print_expr(expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr, 0);
    out
}

/// Writes a name bare when it is a plain, non-reserved word and `"quoted"` otherwise.
pub(crate) fn write_ident(out: &mut String, name: &str) {
    let bytes = name.as_bytes();
    let plain = bytes.first().is_some_and(|b| is_word_start(*b))
        && bytes.iter().all(|b| is_word_continue(*b))
        && !is_reserved(name)
        // A bare `case` before WHEN starts a CASE, and a bare date literal name is the literal.
        && !name.eq_ignore_ascii_case("CASE")
        && !crate::ast::is_date_literal(name);
    if plain {
        out.push_str(name);
    } else {
        out.push('"');
        out.push_str(&name.replace('"', "\"\""));
        out.push('"');
    }
}

pub(crate) fn write_path(out: &mut String, path: &Path) {
    for (index, segment) in path.segments.iter().enumerate() {
        if index > 0 {
            out.push('.');
        }
        write_ident(out, &segment.name);
    }
}

pub(crate) fn write_literal(out: &mut String, literal: &Literal) {
    match literal {
        Literal::String(text) => {
            out.push('\'');
            out.push_str(&text.replace('\'', "''"));
            out.push('\'');
        }
        Literal::Integer(text)
        | Literal::Decimal(text)
        | Literal::Date(text)
        | Literal::DateTime(text) => out.push_str(text),
        Literal::DateRange { name, n } => {
            out.push_str(name);
            if let Some(n) = n {
                out.push(':');
                out.push_str(n);
            }
        }
        Literal::Boolean(true) => out.push_str("TRUE"),
        Literal::Boolean(false) => out.push_str("FALSE"),
        Literal::Null => out.push_str("NULL"),
    }
}

fn write_query(out: &mut String, query: &Query) {
    out.push_str("SELECT ");
    if query.distinct {
        out.push_str("DISTINCT ");
    }
    for (index, item) in query.select.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        match &item.value {
            SelectValue::Expr(expr) => write_expr(out, expr, 0),
            SelectValue::Subquery(subquery) => {
                out.push('(');
                write_query(out, subquery);
                out.push(')');
            }
        }
        if let Some(alias) = &item.alias {
            out.push_str(" AS ");
            write_ident(out, &alias.name);
        }
    }
    out.push_str(" FROM ");
    write_path(out, &query.from);
    if let Some(condition) = &query.where_clause {
        out.push_str(" WHERE ");
        write_expr(out, condition, 0);
    }
    if !query.group_by.is_empty() {
        out.push_str(" GROUP BY ");
        write_list(out, &query.group_by);
    }
    if let Some(condition) = &query.having {
        out.push_str(" HAVING ");
        write_expr(out, condition, 0);
    }
    for (index, item) in query.order_by.iter().enumerate() {
        out.push_str(if index == 0 { " ORDER BY " } else { ", " });
        write_expr(out, &item.expr, 0);
        match item.direction {
            Some(Direction::Asc) => out.push_str(" ASC"),
            Some(Direction::Desc) => out.push_str(" DESC"),
            None => {}
        }
        match item.nulls {
            Some(NullsOrder::First) => out.push_str(" NULLS FIRST"),
            Some(NullsOrder::Last) => out.push_str(" NULLS LAST"),
            None => {}
        }
    }
    for (keyword, count) in [(" LIMIT ", &query.limit), (" OFFSET ", &query.offset)] {
        if let Some(count) = count {
            out.push_str(keyword);
            match &count.value {
                RowCountValue::Integer(text) => out.push_str(text),
                RowCountValue::Param(name) => {
                    out.push(':');
                    out.push_str(name);
                }
            }
        }
    }
}

fn write_list(out: &mut String, exprs: &[Expr]) {
    for (index, expr) in exprs.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        write_expr(out, expr, 0);
    }
}

/// The binding level of an expression's outermost operator (see the parser's levels).
fn level(expr: &Expr) -> u8 {
    match &expr.kind {
        ExprKind::Literal(_)
        | ExprKind::Param(_)
        | ExprKind::Path(_)
        | ExprKind::Call { .. }
        | ExprKind::Case { .. }
        | ExprKind::User(_) => 9,
        ExprKind::Unary {
            op: UnaryOp::Neg, ..
        } => 8,
        ExprKind::Unary {
            op: UnaryOp::Not, ..
        } => 3,
        ExprKind::Binary { op, .. } => binary_level(*op),
        ExprKind::IsNull { .. }
        | ExprKind::InList { .. }
        | ExprKind::InArray { .. }
        | ExprKind::InSubquery { .. }
        | ExprKind::Includes { .. }
        | ExprKind::Like { .. } => 4,
    }
}

fn binary_level(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => 1,
        BinaryOp::And => 2,
        BinaryOp::Concat => 5,
        BinaryOp::Add | BinaryOp::Sub => 6,
        BinaryOp::Mul | BinaryOp::Div => 7,
        BinaryOp::Eq
        | BinaryOp::NotEq
        | BinaryOp::Lt
        | BinaryOp::LtEq
        | BinaryOp::Gt
        | BinaryOp::GtEq => 4,
    }
}

/// Writes `expr`, in parentheses if it binds looser than `min_level`.
fn write_expr(out: &mut String, expr: &Expr, min_level: u8) {
    if level(expr) < min_level {
        out.push('(');
        write_expr(out, expr, 0);
        out.push(')');
        return;
    }
    match &expr.kind {
        ExprKind::Literal(literal) => write_literal(out, literal),
        ExprKind::Param(name) => {
            out.push(':');
            out.push_str(name);
        }
        ExprKind::Path(path) => write_path(out, path),
        ExprKind::Unary { op, operand } => {
            // A prefix operator parses whatever follows it, so a nested prefix operator needs
            // no parentheses (`NOT NOT x`, `- -x`); the space keeps `- -x` from being a `--`
            // comment. Other operands are parenthesised by level as usual.
            let (text, operand_level) = match op {
                UnaryOp::Neg => ("-", 8),
                UnaryOp::Not => ("NOT ", 4),
            };
            out.push_str(text);
            match &operand.kind {
                ExprKind::Unary { op: inner, .. } if inner == op => {
                    if *op == UnaryOp::Neg {
                        out.push(' ');
                    }
                    write_expr(out, operand, 0);
                }
                _ => write_expr(out, operand, operand_level),
            }
        }
        ExprKind::Binary { op, left, right } => {
            let own = binary_level(*op);
            let left_min = if op.is_comparison() { own + 1 } else { own };
            write_expr(out, left, left_min);
            out.push(' ');
            out.push_str(op.symbol());
            out.push(' ');
            write_expr(out, right, own + 1);
        }
        ExprKind::IsNull { operand, negated } => {
            write_expr(out, operand, 5);
            out.push_str(if *negated { " IS NOT NULL" } else { " IS NULL" });
        }
        ExprKind::InList {
            operand,
            items,
            negated,
        } => {
            write_expr(out, operand, 5);
            out.push_str(if *negated { " NOT IN (" } else { " IN (" });
            write_list(out, items);
            out.push(')');
        }
        ExprKind::InArray {
            operand,
            array,
            negated,
        } => {
            write_expr(out, operand, 5);
            out.push_str(if *negated { " NOT IN " } else { " IN " });
            write_expr(out, array, 5);
        }
        ExprKind::Like {
            operand,
            pattern,
            case_insensitive,
            negated,
            escape,
        } => {
            write_expr(out, operand, 5);
            out.push_str(if *negated { " NOT" } else { "" });
            out.push_str(if *case_insensitive {
                " ILIKE "
            } else {
                " LIKE "
            });
            write_expr(out, pattern, 5);
            if let Some(escape) = escape {
                out.push_str(" ESCAPE ");
                write_expr(out, escape, 5);
            }
        }
        ExprKind::InSubquery {
            operand,
            query,
            negated,
        } => {
            write_expr(out, operand, 5);
            out.push_str(if *negated { " NOT IN (" } else { " IN (" });
            write_query(out, query);
            out.push(')');
        }
        ExprKind::Includes {
            operand,
            items,
            negated,
        } => {
            write_expr(out, operand, 5);
            out.push_str(if *negated {
                " EXCLUDES ("
            } else {
                " INCLUDES ("
            });
            write_list(out, items);
            out.push(')');
        }
        ExprKind::Case {
            branches,
            otherwise,
        } => {
            out.push_str("CASE");
            for branch in branches {
                out.push_str(" WHEN ");
                write_expr(out, &branch.condition, 0);
                out.push_str(" THEN ");
                write_expr(out, &branch.value, 0);
            }
            if let Some(otherwise) = otherwise {
                out.push_str(" ELSE ");
                write_expr(out, otherwise, 0);
            }
            out.push_str(" END");
        }
        ExprKind::User(field) => {
            out.push_str("$User.");
            out.push_str(&field.name);
        }
        ExprKind::Call { name, args } => {
            out.push_str(&name.name);
            out.push('(');
            match args {
                CallArgs::Star => out.push('*'),
                CallArgs::List { distinct, items } => {
                    if *distinct {
                        out.push_str("DISTINCT ");
                    }
                    write_list(out, items);
                }
            }
            out.push(')');
        }
    }
}
