//! A compact, readable rendering of syntax trees for snapshots and debugging.
//!
//! Expressions become S-expressions (`(and (= stage 'won') (> amount :min))`) so the tree's
//! grouping is visible at a glance; a query becomes one clause per line. Spans are left out
//! (they would make every snapshot change with a moved space); select items show their
//! result key and source text because later stages depend on both.

use crate::ast::{
    CallArgs, Direction, Expr, ExprKind, Literal, NullsOrder, Query, RowCount, RowCountValue,
    SelectValue, UnaryOp,
};
use crate::printer::{write_literal, write_path};

/// Renders a query, one clause per line, subqueries indented.
pub fn dump_query(query: &Query) -> String {
    let mut out = String::new();
    write_query(&mut out, query, 0);
    out
}

/// Renders an expression as one S-expression.
pub fn dump_expr(expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(&mut out, expr);
    out
}

fn line(out: &mut String, indent: usize, text: &str) {
    out.push_str(&"  ".repeat(indent));
    out.push_str(text);
    out.push('\n');
}

fn write_query(out: &mut String, query: &Query, indent: usize) {
    line(
        out,
        indent,
        if query.distinct {
            "select distinct"
        } else {
            "select"
        },
    );
    for item in &query.select {
        let alias = match &item.alias {
            Some(alias) => format!(" as {:?}", alias.name),
            None => String::new(),
        };
        let header = format!("key={:?} text={:?}{alias}", item.key(), item.text);
        match &item.value {
            SelectValue::Expr(expr) => {
                line(out, indent + 1, &format!("{header}: {}", dump_expr(expr)));
            }
            SelectValue::Subquery(subquery) => {
                line(out, indent + 1, &format!("{header}: subquery"));
                write_query(out, subquery, indent + 2);
            }
        }
    }
    let mut from = String::from("from ");
    write_path(&mut from, &query.from);
    line(out, indent, &from);
    if let Some(condition) = &query.where_clause {
        line(out, indent, &format!("where {}", dump_expr(condition)));
    }
    if !query.group_by.is_empty() {
        let list: Vec<String> = query.group_by.iter().map(dump_expr).collect();
        line(out, indent, &format!("group by {}", list.join(", ")));
    }
    if let Some(condition) = &query.having {
        line(out, indent, &format!("having {}", dump_expr(condition)));
    }
    for item in &query.order_by {
        let mut text = format!("order by {}", dump_expr(&item.expr));
        match item.direction {
            Some(Direction::Asc) => text.push_str(" asc"),
            Some(Direction::Desc) => text.push_str(" desc"),
            None => {}
        }
        match item.nulls {
            Some(NullsOrder::First) => text.push_str(" nulls first"),
            Some(NullsOrder::Last) => text.push_str(" nulls last"),
            None => {}
        }
        line(out, indent, &text);
    }
    if let Some(count) = &query.limit {
        line(out, indent, &format!("limit {}", row_count(count)));
    }
    if let Some(count) = &query.offset {
        line(out, indent, &format!("offset {}", row_count(count)));
    }
}

fn row_count(count: &RowCount) -> String {
    match &count.value {
        RowCountValue::Integer(text) => text.clone(),
        RowCountValue::Param(name) => format!(":{name}"),
    }
}

fn write_expr(out: &mut String, expr: &Expr) {
    match &expr.kind {
        ExprKind::Literal(literal) => match literal {
            Literal::Date(text) => out.push_str(&format!("(date {text})")),
            Literal::DateTime(text) => out.push_str(&format!("(datetime {text})")),
            Literal::Decimal(text) => out.push_str(&format!("(decimal {text})")),
            Literal::Boolean(value) => out.push_str(if *value { "true" } else { "false" }),
            Literal::Null => out.push_str("null"),
            Literal::DateRange { .. } => {
                out.push_str("(date-range ");
                write_literal(out, literal);
                out.push(')');
            }
            Literal::String(_) | Literal::Integer(_) => write_literal(out, literal),
        },
        ExprKind::Param(name) => {
            out.push(':');
            out.push_str(name);
        }
        ExprKind::Path(path) => write_path(out, path),
        ExprKind::Unary { op, operand } => {
            out.push_str(match op {
                UnaryOp::Neg => "(neg ",
                UnaryOp::Not => "(not ",
            });
            write_expr(out, operand);
            out.push(')');
        }
        ExprKind::Binary { op, left, right } => {
            out.push('(');
            out.push_str(&op.symbol().to_ascii_lowercase());
            out.push(' ');
            write_expr(out, left);
            out.push(' ');
            write_expr(out, right);
            out.push(')');
        }
        ExprKind::IsNull { operand, negated } => {
            out.push_str(if *negated {
                "(is-not-null "
            } else {
                "(is-null "
            });
            write_expr(out, operand);
            out.push(')');
        }
        ExprKind::InList {
            operand,
            items,
            negated,
        } => {
            out.push_str(if *negated { "(not-in " } else { "(in " });
            write_expr(out, operand);
            for item in items {
                out.push(' ');
                write_expr(out, item);
            }
            out.push(')');
        }
        ExprKind::InArray {
            operand,
            array,
            negated,
        } => {
            out.push_str(if *negated {
                "(not-in-array "
            } else {
                "(in-array "
            });
            write_expr(out, operand);
            out.push(' ');
            write_expr(out, array);
            out.push(')');
        }
        ExprKind::Like {
            operand,
            pattern,
            case_insensitive,
            negated,
            escape,
        } => {
            out.push('(');
            if *negated {
                out.push_str("not-");
            }
            out.push_str(if *case_insensitive { "ilike " } else { "like " });
            write_expr(out, operand);
            out.push(' ');
            write_expr(out, pattern);
            if let Some(escape) = escape {
                out.push_str(" escape ");
                write_expr(out, escape);
            }
            out.push(')');
        }
        ExprKind::InSubquery {
            operand,
            query,
            negated,
        } => {
            out.push_str(if *negated {
                "(not-in-select "
            } else {
                "(in-select "
            });
            write_expr(out, operand);
            out.push_str(" [");
            out.push_str(&crate::printer::print(query));
            out.push_str("])");
        }
        ExprKind::Includes {
            operand,
            items,
            negated,
        } => {
            out.push_str(if *negated { "(excludes " } else { "(includes " });
            write_expr(out, operand);
            for item in items {
                out.push(' ');
                write_expr(out, item);
            }
            out.push(')');
        }
        ExprKind::Case {
            branches,
            otherwise,
        } => {
            out.push_str("(case");
            for branch in branches {
                out.push_str(" (when ");
                write_expr(out, &branch.condition);
                out.push(' ');
                write_expr(out, &branch.value);
                out.push(')');
            }
            if let Some(otherwise) = otherwise {
                out.push_str(" (else ");
                write_expr(out, otherwise);
                out.push(')');
            }
            out.push(')');
        }
        ExprKind::User(field) => {
            out.push_str("$User.");
            out.push_str(&field.name);
        }
        ExprKind::Call { name, args } => {
            out.push_str("(call ");
            out.push_str(&name.name);
            match args {
                CallArgs::Star => out.push_str(" *"),
                CallArgs::List { distinct, items } => {
                    if *distinct {
                        out.push_str(" distinct");
                    }
                    for item in items {
                        out.push(' ');
                        write_expr(out, item);
                    }
                }
            }
            out.push(')');
        }
    }
}
