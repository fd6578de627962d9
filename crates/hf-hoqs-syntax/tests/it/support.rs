//! Helpers shared by the test modules: comparing trees while ignoring where they came from.

use hf_hoqs_syntax::ast::{CallArgs, Expr, ExprKind, Path, Query, SelectValue, Span};

/// Clears every span and select-item text, so trees parsed from different texts compare
/// equal when they have the same shape and values.
pub fn clear_query(query: &mut Query) {
    query.span = Span::default();
    for item in &mut query.select {
        item.span = Span::default();
        item.text.clear();
        if let Some(alias) = &mut item.alias {
            alias.span = Span::default();
        }
        match &mut item.value {
            SelectValue::Expr(expr) => clear_expr(expr),
            SelectValue::Subquery(subquery) => clear_query(subquery),
        }
    }
    clear_path(&mut query.from);
    query.where_clause.iter_mut().for_each(clear_expr);
    query.group_by.iter_mut().for_each(clear_expr);
    query.having.iter_mut().for_each(clear_expr);
    for item in &mut query.order_by {
        item.span = Span::default();
        clear_expr(&mut item.expr);
    }
    for count in [&mut query.limit, &mut query.offset].into_iter().flatten() {
        count.span = Span::default();
    }
}

/// Clears every span of an expression tree.
pub fn clear_expr(expr: &mut Expr) {
    expr.span = Span::default();
    match &mut expr.kind {
        ExprKind::Literal(_) | ExprKind::Param(_) => {}
        ExprKind::Path(path) => clear_path(path),
        ExprKind::Unary { operand, .. } | ExprKind::IsNull { operand, .. } => clear_expr(operand),
        ExprKind::Binary { left, right, .. } => {
            clear_expr(left);
            clear_expr(right);
        }
        ExprKind::InList { operand, items, .. } => {
            clear_expr(operand);
            items.iter_mut().for_each(clear_expr);
        }
        ExprKind::Like {
            operand,
            pattern,
            escape,
            ..
        } => {
            clear_expr(operand);
            clear_expr(pattern);
            escape.iter_mut().for_each(|escape| clear_expr(escape));
        }
        ExprKind::InSubquery { operand, query, .. } => {
            clear_expr(operand);
            clear_query(query);
        }
        ExprKind::Includes { operand, items, .. } => {
            clear_expr(operand);
            items.iter_mut().for_each(clear_expr);
        }
        ExprKind::Case {
            branches,
            otherwise,
        } => {
            for branch in branches {
                clear_expr(&mut branch.condition);
                clear_expr(&mut branch.value);
            }
            otherwise.iter_mut().for_each(|value| clear_expr(value));
        }
        ExprKind::User(field) => field.span = Span::default(),
        ExprKind::InArray { operand, array, .. } => {
            clear_expr(operand);
            clear_expr(array);
        }
        ExprKind::Call { name, args } => {
            name.span = Span::default();
            if let CallArgs::List { items, .. } = args {
                items.iter_mut().for_each(clear_expr);
            }
        }
    }
}

fn clear_path(path: &mut Path) {
    path.span = Span::default();
    for segment in &mut path.segments {
        segment.span = Span::default();
    }
}
