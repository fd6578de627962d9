//! Type checking and SQL generation of expressions: literals, parameters, operators.
//! Function calls are in `functions.rs`.
//!
//! Each node is checked and compiled in one step, bottom-up; a node whose operands have
//! problems reports nothing more (so one mistake gives one message) and yields `None`. An
//! operand whose type depends on its neighbour (a parameter, `NULL`, a text literal that may
//! stand for a uuid or a date) is compiled after that neighbour, with its type as a hint.
//! Every compound fragment is parenthesised, so SQL precedence never differs from ours.
//!
//! NULL semantics are SQL's (docs/formulas.md states them): operators and functions give NULL
//! when an operand is NULL, except `IS [NOT] NULL`, `COALESCE`, `CONCAT`, `IF` (a NULL
//! condition takes the else branch), `AND`/`OR` (three-valued), and division by zero, which
//! gives NULL instead of an error.

use hf_hoqs_syntax::ast::{BinaryOp, CaseBranch, Expr, ExprKind, Ident, Literal, Span, UnaryOp};

use hf_model::ScalarType;

use crate::compile::{Compiler, Cx, Frag, Level, Purpose, Row};
use crate::diagnostics as diag;
use crate::functions::as_text;
use crate::params::{array_elements, natural_type, param_text};
use crate::types::{unify, widest_numeric, Type};

/// Whether an operand takes its type from its neighbour: `NULL`, a parameter, a text literal.
pub(crate) fn is_flexible(expr: &Expr) -> bool {
    matches!(
        expr.kind,
        ExprKind::Literal(Literal::Null | Literal::String(_)) | ExprKind::Param(_)
    )
}

/// The hint a compiled operand gives its neighbour: its type, unless that is `null`.
pub(crate) fn hint_of(frag: &Frag) -> Option<Type> {
    (frag.ty != Type::Null).then_some(frag.ty)
}

/// Converts a fragment to a wider type for a comparison or list: a date meets a datetime as
/// midnight UTC (whatever the session's time zone); numbers convert implicitly.
pub(crate) fn coerce(frag: Frag, to: Type) -> String {
    match (frag.ty, to) {
        (Type::Date, Type::Datetime) => {
            format!("(({})::timestamp AT TIME ZONE 'UTC')", frag.sql)
        }
        (Type::Null, Type::Null) => frag.sql,
        (Type::Null, to) => format!("{}::{}", frag.sql, to.sql_type()),
        _ => frag.sql,
    }
}

impl Compiler<'_> {
    /// Compiles an expression read from `row`; `hint` is the type the surroundings expect,
    /// used only by operands that take their type from context.
    pub(crate) fn expr(
        &mut self,
        level: &mut Level,
        row: &Row,
        expr: &Expr,
        cx: Cx,
        hint: Option<Type>,
    ) -> Option<Frag> {
        let frag = self.expr_of_kind(level, row, expr, cx, hint)?;
        // A null where a boolean is needed (a condition, an operand of AND, OR or NOT) is cast
        // to one (see `Frag::typed_as`). Other hints only suggest a type: an operand of `+` is
        // hinted with the other side's type, and `close_date + NULL` must stay date arithmetic.
        let frag = match hint {
            Some(Type::Boolean) => frag.typed_as(Type::Boolean),
            _ => frag,
        };
        // Many fragments paste their arguments' SQL more than once: what nesting them builds
        // is bounded here, one fragment at a time (see `MAX_BUILT_BYTES`).
        if !self.within_built_budget(frag.sql.len(), expr.span) {
            return None;
        }
        Some(frag)
    }

    fn expr_of_kind(
        &mut self,
        level: &mut Level,
        row: &Row,
        expr: &Expr,
        cx: Cx,
        hint: Option<Type>,
    ) -> Option<Frag> {
        match &expr.kind {
            ExprKind::Literal(literal) => self.literal_expr(literal, expr.span, hint),
            ExprKind::Param(name) => self.param(name, expr.span, cx, hint),
            ExprKind::Path(path) => self.path(level, row, path),
            ExprKind::Unary { op, operand } => {
                let operand_hint = match op {
                    UnaryOp::Neg => hint.filter(|ty| ty.is_numeric()),
                    UnaryOp::Not => Some(Type::Boolean),
                };
                let frag = self.expr(level, row, operand, cx, operand_hint)?;
                self.unary(*op, frag, operand.span)
            }
            ExprKind::Binary { op, left, right } => self.binary(level, row, *op, left, right, cx),
            ExprKind::IsNull { operand, negated } => {
                let frag = self.expr(level, row, operand, cx, None)?;
                let not = if *negated { "NOT " } else { "" };
                Some(Frag::new(
                    format!("({} IS {not}NULL)", frag.sql),
                    Type::Boolean,
                ))
            }
            ExprKind::InList {
                operand,
                items,
                negated,
            } => self.in_list(level, row, operand, items, *negated, cx),
            ExprKind::InArray {
                operand,
                array,
                negated,
            } => self.in_array(level, row, operand, array, *negated, cx),
            ExprKind::Like {
                operand,
                pattern,
                case_insensitive,
                negated,
                escape,
            } => {
                let op = match (case_insensitive, negated) {
                    (false, false) => "LIKE",
                    (false, true) => "NOT LIKE",
                    (true, false) => "ILIKE",
                    (true, true) => "NOT ILIKE",
                };
                let text = Some(Type::Text);
                let value = self.expr(level, row, operand, cx, text);
                let pattern_frag = self.expr(level, row, pattern, cx, text);
                let (value, pattern_frag) = (value?, pattern_frag?);
                let name = if *case_insensitive { "ILIKE" } else { "LIKE" };
                self.expect_fit(name, "left", "text", &value, Type::Text, operand.span)?;
                self.expect_fit(
                    name,
                    "right",
                    "text",
                    &pattern_frag,
                    Type::Text,
                    pattern.span,
                )?;
                let escape = match escape {
                    Some(escape) => format!(" ESCAPE {}", self.escape(level, row, escape, cx)?),
                    None => String::new(),
                };
                Some(Frag::new(
                    format!("({} {op} {}{escape})", value.sql, pattern_frag.sql),
                    Type::Boolean,
                ))
            }
            ExprKind::InSubquery {
                operand,
                query,
                negated,
            } => self.semi_join(level, row, operand, query, *negated, cx),
            ExprKind::Case {
                branches,
                otherwise,
            } => self.case(level, row, branches, otherwise.as_deref(), cx),
            ExprKind::User(field) => self.user(field, cx),
            ExprKind::Includes {
                operand,
                items,
                negated,
            } => self.includes(level, row, operand, items, *negated, cx),
            ExprKind::Call { name, args } => self.call(level, row, expr, name, args, cx),
        }
    }

    /// `tags INCLUDES ('a', 'b;c')`: the multi-select value holds `a`, or both `b` and `c`.
    /// `EXCLUDES` is its negation, and holds for an empty or NULL value. Items are texts (or
    /// parameters) of keys joined by `;`; literal keys must be choices of the field.
    fn includes(
        &mut self,
        level: &mut Level,
        row: &Row,
        operand: &Expr,
        items: &[Expr],
        negated: bool,
        cx: Cx,
    ) -> Option<Frag> {
        let what = if negated { "EXCLUDES" } else { "INCLUDES" };
        let value = self.expr(level, row, operand, cx, None)?;
        if value.ty != Type::Multipicklist {
            self.report(diag::includes_needs_multipicklist(
                what,
                value.ty,
                operand.span,
            ));
            return None;
        }
        let choices = self.path_choices(row, operand);
        let mut tests = Vec::with_capacity(items.len());
        let mut failed = false;
        for item in items {
            if let (ExprKind::Literal(Literal::String(text)), Some((field, choices))) =
                (&item.kind, &choices)
            {
                failed |= !self.known_keys(text.split(';'), field, choices, item.span);
            }
            match self.expr(level, row, item, cx, Some(Type::Multipicklist)) {
                Some(frag) if frag.ty.fits(Type::Multipicklist) => {
                    let keys = coerce(frag, Type::Multipicklist);
                    tests.push(format!("({} @> {keys})", value.sql));
                }
                Some(frag) => {
                    self.report(diag::includes_item(what, frag.ty, item.span));
                    failed = true;
                }
                None => failed = true,
            }
        }
        if failed || tests.is_empty() {
            return None;
        }
        let any = format!("({})", tests.join(" OR "));
        let sql = if negated {
            format!("(NOT COALESCE({any}, FALSE))")
        } else {
            any
        };
        Some(Frag::new(sql, Type::Boolean))
    }

    /// When `operand` is a picklist field, reports each text literal among `others` that is not
    /// one of its keys (`stage = 'wonn'`; for a multi-select field each `;`-joined key); true
    /// when there is nothing to report.
    fn literal_choices(&mut self, row: &Row, operand: &Expr, others: &[Expr]) -> bool {
        let is_text = |other: &Expr| matches!(other.kind, ExprKind::Literal(Literal::String(_)));
        if !others.iter().any(is_text) {
            // Nothing to check: the field and its choices need not be looked up.
            return true;
        }
        let Some((field, choices)) = self.path_choices(row, operand) else {
            return true;
        };
        let mut known = true;
        for other in others {
            if let ExprKind::Literal(Literal::String(text)) = &other.kind {
                known &= self.known_keys(text.split(';'), &field, &choices, other.span);
            }
        }
        known
    }

    /// Reports each key that is not a choice of the picklist `field`; true when all are.
    pub(crate) fn known_keys<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k str>,
        field: &str,
        choices: &[hf_model::PicklistValue],
        span: Span,
    ) -> bool {
        let names: Vec<&str> = choices.iter().map(|choice| choice.key.as_str()).collect();
        let mut known = true;
        for key in keys {
            if !names.contains(&key) {
                self.report(diag::unknown_choice(key, field, &names, span));
                known = false;
            }
        }
        known
    }

    /// The field key and choices of the picklist field `expr` names (a path, through lookups
    /// too); `None` for anything else.
    pub(crate) fn path_choices(
        &self,
        row: &Row,
        expr: &Expr,
    ) -> Option<(String, Vec<hf_model::PicklistValue>)> {
        let field = self.path_field(row, expr)?;
        field
            .value_type()
            .is_picklist()
            .then(|| (field.key.clone(), field.picklist_values().to_vec()))
    }

    /// The field a path names, following lookups; `None` for anything else. Reads the model
    /// only: compiling the path reports any problem with it.
    pub(crate) fn path_field(&self, row: &Row, expr: &Expr) -> Option<&hf_model::Field> {
        let ExprKind::Path(path) = &expr.kind else {
            return None;
        };
        let (last, lookups) = path.segments.split_last()?;
        let mut object = row.object.clone();
        for segment in lookups {
            match &crate::compile::find_field(self.model, &object, &segment.name)?.kind {
                hf_model::FieldKind::Lookup { target, .. } => object = target.clone(),
                _ => return None,
            }
        }
        crate::compile::find_field(self.model, &object, &last.name)
    }

    /// The `ESCAPE` character of a LIKE: text; a literal must be exactly one character.
    fn escape(&mut self, level: &mut Level, row: &Row, escape: &Expr, cx: Cx) -> Option<String> {
        if let ExprKind::Literal(Literal::String(text)) = &escape.kind {
            if text.chars().count() != 1 {
                self.report(diag::escape_length(escape.span));
                return None;
            }
        }
        let frag = self.expr(level, row, escape, cx, Some(Type::Text))?;
        self.expect_fit("LIKE", "ESCAPE", "text", &frag, Type::Text, escape.span)?;
        Some(frag.sql)
    }

    /// `CASE WHEN c THEN v ... [ELSE e] END`: boolean conditions, values of one type.
    fn case(
        &mut self,
        level: &mut Level,
        row: &Row,
        branches: &[CaseBranch],
        otherwise: Option<&Expr>,
        cx: Cx,
    ) -> Option<Frag> {
        let mut conditions = Vec::with_capacity(branches.len());
        let mut failed = false;
        for branch in branches {
            match self.condition(level, row, &branch.condition, cx, "CASE WHEN") {
                Some(frag) => conditions.push(frag.sql),
                None => failed = true,
            }
        }
        let mut values: Vec<&Expr> = branches.iter().map(|branch| &branch.value).collect();
        values.extend(otherwise);
        let (sql, ty) = self.uniform(level, row, &values, cx, "CASE")?;
        if failed {
            return None;
        }
        let mut out = String::from("(CASE");
        for (condition, value) in conditions.iter().zip(&sql) {
            out.push_str(&format!(" WHEN {condition} THEN {value}"));
        }
        if otherwise.is_some() {
            if let Some(last) = sql.last() {
                out.push_str(&format!(" ELSE {last}"));
            }
        }
        out.push_str(" END)");
        // Every branch null: the CASE is a null, cast to what its place needs (`Frag::typed_as`).
        Some(Frag::new(out, ty))
    }

    /// `$User.id` (uuid) or `$User.name` (text): the caller, bound as parameters. Queries and
    /// rules have a caller; formulas and rollup filters do not (their value would depend on
    /// who reads).
    fn user(&mut self, field: &Ident, cx: Cx) -> Option<Frag> {
        if !matches!(cx.purpose, Purpose::Query | Purpose::Assert) {
            self.report(diag::user_not_allowed(cx.purpose.place(), field.span));
            return None;
        }
        let ty = match field.name.as_str() {
            "id" => Type::Uuid,
            "name" => Type::Text,
            other => {
                self.report(diag::unknown_user_field(other, field.span));
                return None;
            }
        };
        if self.session_caller {
            let sql = match ty {
                Type::Uuid => "nullif(current_setting('hf.caller_id', true), '')::uuid",
                _ => "(current_user)::text",
            };
            return Some(Frag::new(sql.to_owned(), ty));
        }
        let Some(caller) = &self.caller else {
            self.report(diag::no_caller(field.span));
            return None;
        };
        let value = if ty == Type::Uuid {
            caller.id.clone()
        } else {
            caller.name.clone()
        };
        Some(Frag::new(self.literal(ty, value), ty))
    }

    /// A comparison with a relative date literal (`close_date = THIS_MONTH`): the literal is a
    /// range of days in the context's time zone, `[start, end)`; `=` tests inside it, `<`
    /// before its start, `>` after its end, and `<=`, `>=`, `!=` likewise.
    fn date_range_comparison(
        &mut self,
        level: &mut Level,
        row: &Row,
        op: BinaryOp,
        value: &Expr,
        range: (&str, Option<&str>, Span),
        cx: Cx,
    ) -> Option<Frag> {
        let (name, n, span) = range;
        let frag = self.expr(level, row, value, cx, Some(Type::Date))?;
        if !frag.ty.is_temporal() {
            self.report(diag::date_range_operand(name, frag.ty, value.span));
            return None;
        }
        let Some((unit, from, to)) = date_range_bounds(name, n) else {
            self.report(diag::date_range_count(name, span));
            return None;
        };
        let zone = self.zone(cx);
        let start = self.date_bound(unit, from, &zone, frag.ty);
        let end = self.date_bound(unit, to + 1, &zone, frag.ty);
        let x = frag.sql.as_str();
        let parts: &[&str] = match op {
            BinaryOp::Eq => &["(", x, " >= ", &start, " AND ", x, " < ", &end, ")"],
            BinaryOp::NotEq => &["(", x, " < ", &start, " OR ", x, " >= ", &end, ")"],
            BinaryOp::Lt => &["(", x, " < ", &start, ")"],
            BinaryOp::LtEq => &["(", x, " < ", &end, ")"],
            BinaryOp::Gt => &["(", x, " >= ", &end, ")"],
            _ => &["(", x, " >= ", &start, ")"],
        };
        let sql = parts.concat();
        Some(Frag::new(sql, Type::Boolean))
    }

    /// The start of the `unit` (`day`, `week`, `month`, `quarter` or `year`) `k` units after
    /// the current one in the time zone `zone` (SQL): a date, or for a datetime operand
    /// (`ty`) the instant that day starts in that zone.
    fn date_bound(&mut self, unit: &str, k: i64, zone: &str, ty: Type) -> String {
        let (field, k) = match unit {
            "day" => ("days", k),
            "week" => ("weeks", k),
            "month" => ("months", k),
            "quarter" => ("months", k * 3),
            _ => ("years", k),
        };
        let mut sql = String::with_capacity(128);
        sql.push_str("((date_trunc('");
        sql.push_str(unit);
        sql.push_str("', now() AT TIME ZONE ");
        sql.push_str(zone);
        sql.push_str(") + make_interval(");
        sql.push_str(field);
        sql.push_str(" => (");
        self.push_literal(&mut sql, Type::Integer, k.to_string());
        sql.push_str(")::integer))");
        match ty {
            Type::Date => sql.push_str(")::date"),
            _ => {
                sql.push_str(" AT TIME ZONE ");
                sql.push_str(zone);
                sql.push(')');
            }
        }
        sql
    }

    /// Compiles a condition (WHERE, HAVING, an assert, a filter): it must be boolean.
    pub(crate) fn condition(
        &mut self,
        level: &mut Level,
        row: &Row,
        expr: &Expr,
        cx: Cx,
        clause: &str,
    ) -> Option<Frag> {
        let frag = self.expr(level, row, expr, cx, Some(Type::Boolean))?;
        if !frag.ty.fits(Type::Boolean) {
            self.report(diag::expected_boolean(clause, frag.ty, expr.span));
            return None;
        }
        Some(frag)
    }

    /// Reports an operand that does not fit the type an operator needs.
    fn expect_fit(
        &mut self,
        op: &str,
        side: &str,
        expected: &str,
        frag: &Frag,
        ty: Type,
        span: Span,
    ) -> Option<()> {
        if frag.ty.fits(ty) {
            Some(())
        } else {
            self.report(diag::operand_type(op, side, expected, frag.ty, span));
            None
        }
    }

    // -- leaves ---------------------------------------------------------------------------

    fn literal_expr(&mut self, literal: &Literal, span: Span, hint: Option<Type>) -> Option<Frag> {
        let (ty, text) = match literal {
            Literal::Null => return Some(Frag::new("NULL".to_owned(), Type::Null)),
            Literal::DateRange { name, .. } => {
                self.report(diag::date_range_outside_comparison(name, span));
                return None;
            }
            Literal::Boolean(value) => (Type::Boolean, value.to_string()),
            Literal::Integer(digits) => match digits.parse::<i64>() {
                Ok(value) => (Type::Integer, value.to_string()),
                // Too long for 64 bits: an exact decimal, like PostgreSQL's numeric literals.
                Err(_) => (Type::Decimal, digits.clone()),
            },
            Literal::Decimal(text) => (Type::Decimal, text.clone()),
            Literal::Date(text) | Literal::DateTime(text) => {
                let scalar = match literal {
                    Literal::Date(_) => ScalarType::Date,
                    _ => ScalarType::Datetime,
                };
                let ty = Type::from_scalar(scalar);
                match scalar.parse_text(text) {
                    Ok(value) => (ty, value),
                    Err(_) => {
                        self.report(diag::invalid_literal(ty, text, span));
                        return None;
                    }
                }
            }
            Literal::String(text) => {
                let ty = match hint {
                    Some(
                        ty @ (Type::Uuid
                        | Type::Date
                        | Type::Datetime
                        | Type::Json
                        | Type::Multipicklist),
                    ) => ty,
                    _ => Type::Text,
                };
                match ty.scalar().map(|scalar| scalar.parse_text(text)) {
                    Some(Ok(value)) => (ty, value),
                    _ => {
                        self.report(diag::invalid_literal(ty, text, span));
                        return None;
                    }
                }
            }
        };
        Some(Frag::new(self.literal(ty, text), ty))
    }

    fn param(&mut self, name: &str, span: Span, cx: Cx, hint: Option<Type>) -> Option<Frag> {
        if cx.purpose != Purpose::Query {
            self.report(diag::params_not_allowed(cx.purpose.place(), span));
            return None;
        }
        if let Some((number, ty)) = self.params.named(name) {
            return Some(Frag::new(format!("${number}::{}", ty.sql_type()), ty));
        }
        let Some(value) = self.request.and_then(|request| request.get(name)) else {
            self.report(diag::unknown_param(name, span));
            return None;
        };
        let ty = hint.unwrap_or_else(|| natural_type(value));
        let text = match param_text(value, ty) {
            Ok(text) => text,
            Err(expected) => {
                self.report(diag::param_type(name, ty, &expected, span));
                return None;
            }
        };
        let number = self.params.bind_named(name, ty, text);
        Some(Frag::new(format!("${number}::{}", ty.sql_type()), ty))
    }

    // -- operators ------------------------------------------------------------------------

    fn unary(&mut self, op: UnaryOp, frag: Frag, span: Span) -> Option<Frag> {
        match op {
            UnaryOp::Neg => {
                if !frag.ty.fits(Type::Float) {
                    self.report(diag::operand_type("-", "", "numeric", frag.ty, span));
                    return None;
                }
                // Negating a null is a null, and PostgreSQL has no `-` for an untyped one.
                if frag.ty == Type::Null {
                    return Some(Frag::new("NULL".to_owned(), Type::Null));
                }
                Some(Frag::new(format!("(- {})", frag.sql), frag.ty))
            }
            UnaryOp::Not => {
                if !frag.ty.fits(Type::Boolean) {
                    self.report(diag::operand_type("NOT", "", "boolean", frag.ty, span));
                    return None;
                }
                Some(Frag::new(format!("(NOT {})", frag.sql), Type::Boolean))
            }
        }
    }

    /// Compiles two operands; a flexible one goes second and takes the other's type as hint.
    pub(crate) fn pair(
        &mut self,
        level: &mut Level,
        row: &Row,
        left: &Expr,
        right: &Expr,
        cx: Cx,
    ) -> (Option<Frag>, Option<Frag>) {
        if is_flexible(left) && !is_flexible(right) {
            let right_frag = self.expr(level, row, right, cx, None);
            let hint = right_frag.as_ref().and_then(hint_of);
            let left_frag = self.expr(level, row, left, cx, hint);
            (left_frag, right_frag)
        } else {
            let left_frag = self.expr(level, row, left, cx, None);
            let hint = left_frag.as_ref().and_then(hint_of);
            let right_frag = self.expr(level, row, right, cx, hint);
            (left_frag, right_frag)
        }
    }

    fn binary(
        &mut self,
        level: &mut Level,
        row: &Row,
        op: BinaryOp,
        left: &Expr,
        right: &Expr,
        cx: Cx,
    ) -> Option<Frag> {
        let span = left.span.to(right.span);
        if op.is_comparison() {
            fn range(expr: &Expr) -> Option<(&str, Option<&str>, Span)> {
                match &expr.kind {
                    ExprKind::Literal(Literal::DateRange { name, n }) => {
                        Some((name.as_str(), n.as_deref(), expr.span))
                    }
                    _ => None,
                }
            }
            if let Some(found) = range(right) {
                return self.date_range_comparison(level, row, op, left, found, cx);
            }
            if let Some(found) = range(left) {
                // `THIS_MONTH > x` is `x < THIS_MONTH`.
                let flipped = match op {
                    BinaryOp::Lt => BinaryOp::Gt,
                    BinaryOp::LtEq => BinaryOp::GtEq,
                    BinaryOp::Gt => BinaryOp::Lt,
                    BinaryOp::GtEq => BinaryOp::LtEq,
                    other => other,
                };
                return self.date_range_comparison(level, row, flipped, right, found, cx);
            }
        }
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let boolean = Some(Type::Boolean);
            let l = self.expr(level, row, left, cx, boolean);
            let r = self.expr(level, row, right, cx, boolean);
            let (l, r) = (l?, r?);
            let name = op.symbol();
            self.expect_fit(name, "left", "boolean", &l, Type::Boolean, left.span)?;
            self.expect_fit(name, "right", "boolean", &r, Type::Boolean, right.span)?;
            return Some(Frag::new(
                ["(", &l.sql, " ", name, " ", &r.sql, ")"].concat(),
                Type::Boolean,
            ));
        }
        if op == BinaryOp::Concat {
            // `||` joins the text of any two values: neither side suggests a type to the other,
            // so a literal keeps its own (`'Due: ' || close_date` is text beside a date, `:n`
            // bound to 5 a number), and each side is written as `TEXT` writes it.
            let l = self.expr(level, row, left, cx, None);
            let r = self.expr(level, row, right, cx, None);
            let (l, r) = (l?, r?);
            return Some(Frag::new(
                format!("({} || {})", as_text(&l), as_text(&r)),
                Type::Text,
            ));
        }
        let known = !matches!(op, BinaryOp::Eq | BinaryOp::NotEq)
            || (self.literal_choices(row, left, std::slice::from_ref(right))
                && self.literal_choices(row, right, std::slice::from_ref(left)));
        let (l, r) = self.pair(level, row, left, right, cx);
        let (l, r) = (l?, r?);
        if !known {
            return None;
        }
        match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                self.arithmetic(op, l, r, span)
            }
            _ => self.comparison(op, l, r, span),
        }
    }

    fn arithmetic(&mut self, op: BinaryOp, l: Frag, r: Frag, span: Span) -> Option<Frag> {
        let symbol = op.symbol();
        let numeric = |ty: Type| ty.is_numeric() || ty == Type::Null;
        if l.ty == Type::Null && r.ty == Type::Null {
            return Some(Frag::new("NULL".to_owned(), Type::Null));
        }
        if numeric(l.ty) && numeric(r.ty) {
            let ty = widest_numeric(l.ty, r.ty);
            return Some(match op {
                // Division never fails: by zero it gives NULL. Two integers divide exactly, and
                // a decimal quotient drops the trailing zeros of PostgreSQL's 16-digit scale.
                BinaryOp::Div if ty == Type::Integer => Frag::new(
                    format!("trim_scale(({})::numeric / NULLIF({}, 0))", l.sql, r.sql),
                    Type::Decimal,
                ),
                BinaryOp::Div if ty == Type::Decimal => {
                    Frag::new(format!("trim_scale({} / NULLIF({}, 0))", l.sql, r.sql), ty)
                }
                BinaryOp::Div => Frag::new(format!("({} / NULLIF({}, 0))", l.sql, r.sql), ty),
                _ => Frag::new(format!("({} {symbol} {})", l.sql, r.sql), ty),
            });
        }
        let days = |frag: &Frag| format!("({})::integer", frag.sql);
        let interval = |frag: &Frag| format!("make_interval(days => ({})::integer)", frag.sql);
        let integer = |ty: Type| matches!(ty, Type::Integer | Type::Null);
        match (op, l.ty, r.ty) {
            (BinaryOp::Add | BinaryOp::Sub, Type::Date, right) if integer(right) => Some(
                Frag::new(format!("({} {symbol} {})", l.sql, days(&r)), Type::Date),
            ),
            (BinaryOp::Add, left, Type::Date) if integer(left) => {
                Some(Frag::new(format!("({} + {})", r.sql, days(&l)), Type::Date))
            }
            (BinaryOp::Sub, Type::Date, Type::Date) => Some(Frag::new(
                format!("(({} - {}))::bigint", l.sql, r.sql),
                Type::Integer,
            )),
            (BinaryOp::Add | BinaryOp::Sub, Type::Datetime, right) if integer(right) => {
                Some(Frag::new(
                    format!("({} {symbol} {})", l.sql, interval(&r)),
                    Type::Datetime,
                ))
            }
            (BinaryOp::Add, left, Type::Datetime) if integer(left) => Some(Frag::new(
                format!("({} + {})", r.sql, interval(&l)),
                Type::Datetime,
            )),
            _ => {
                self.report(diag::arithmetic_types(symbol, l.ty, r.ty, span));
                None
            }
        }
    }

    fn comparison(&mut self, op: BinaryOp, l: Frag, r: Frag, span: Span) -> Option<Frag> {
        let symbol = op.symbol();
        let Some(ty) = unify(l.ty, r.ty) else {
            self.report(diag::incomparable(symbol, l.ty, r.ty, span));
            return None;
        };
        let ordering = !matches!(op, BinaryOp::Eq | BinaryOp::NotEq);
        if ordering && matches!(ty, Type::Json | Type::Multipicklist) {
            self.report(diag::unordered(symbol, ty, span));
            return None;
        }
        if ty == Type::Multipicklist {
            // Multi-select values are sets: equal when each holds the other's keys.
            let (l, r) = (coerce(l, ty), coerce(r, ty));
            let same = format!("({l} @> {r} AND {l} <@ {r})");
            let sql = match op {
                BinaryOp::NotEq => format!("(NOT {same})"),
                _ => same,
            };
            return Some(Frag::new(sql, Type::Boolean));
        }
        let sql_op = match op {
            BinaryOp::NotEq => "<>",
            other => other.symbol(),
        };
        let (l, r) = (coerce(l, ty), coerce(r, ty));
        Some(Frag::new(
            ["(", &l, " ", sql_op, " ", &r, ")"].concat(),
            Type::Boolean,
        ))
    }

    /// Compiles a list of expressions that must share one type (IN, COALESCE, IF's branches):
    /// the first operand that does not take its type from context is compiled first and gives
    /// the others their hint. Returns the fragments in order, converted to the common type.
    pub(crate) fn uniform(
        &mut self,
        level: &mut Level,
        row: &Row,
        exprs: &[&Expr],
        cx: Cx,
        what: &str,
    ) -> Option<(Vec<String>, Type)> {
        let anchor = exprs
            .iter()
            .position(|expr| !is_flexible(expr))
            .unwrap_or(0);
        let mut frags: Vec<Option<Frag>> = vec![None; exprs.len()];
        let first = exprs
            .get(anchor)
            .and_then(|expr| self.expr(level, row, expr, cx, None));
        let hint = first.as_ref().and_then(hint_of);
        let mut failed = first.is_none();
        if let Some(slot) = frags.get_mut(anchor) {
            *slot = first;
        }
        for (index, expr) in exprs.iter().enumerate() {
            if index == anchor {
                continue;
            }
            let frag = self.expr(level, row, expr, cx, hint);
            failed |= frag.is_none();
            frags[index] = frag;
        }
        if failed {
            return None;
        }
        let frags: Vec<Frag> = frags.into_iter().flatten().collect();
        let mut ty = Type::Null;
        for (frag, expr) in frags.iter().zip(exprs) {
            match unify(ty, frag.ty) {
                Some(common) => ty = common,
                None => {
                    self.report(diag::mixed_list(what, ty, frag.ty, expr.span));
                    return None;
                }
            }
        }
        let sql = frags.into_iter().map(|frag| coerce(frag, ty)).collect();
        Some((sql, ty))
    }

    /// `x IN :param`: one array parameter holding every candidate, each converted to the type of
    /// `x` as a scalar parameter would be, so `= ANY` compares like `IN` does.
    fn in_array(
        &mut self,
        level: &mut Level,
        row: &Row,
        operand: &Expr,
        array: &Expr,
        negated: bool,
        cx: Cx,
    ) -> Option<Frag> {
        let value = self.expr(level, row, operand, cx, None)?;
        let ExprKind::Param(name) = &array.kind else {
            self.report(diag::in_array_needs_param(array.span));
            return None;
        };
        if cx.purpose != Purpose::Query {
            self.report(diag::params_not_allowed(cx.purpose.place(), array.span));
            return None;
        }
        let Some(given) = self.request.and_then(|request| request.get(name)) else {
            self.report(diag::unknown_param(name, array.span));
            return None;
        };
        let Some(items) = array_elements(given) else {
            self.report(diag::param_not_array(name, array.span));
            return None;
        };
        let ty = value.ty;
        let mut elements = Vec::with_capacity(items.len());
        for item in items {
            match param_text(item, ty) {
                Ok(text) => elements.push(text),
                Err(expected) => {
                    self.report(diag::param_element_type(name, ty, &expected, array.span));
                    return None;
                }
            }
        }
        let number = self.params.push(Some(array_literal(&elements)));
        let test = if negated { "<> ALL" } else { "= ANY" };
        Some(Frag::new(
            format!("({} {test} (${number}::{}[]))", value.sql, ty.sql_type()),
            Type::Boolean,
        ))
    }

    fn in_list(
        &mut self,
        level: &mut Level,
        row: &Row,
        operand: &Expr,
        items: &[Expr],
        negated: bool,
        cx: Cx,
    ) -> Option<Frag> {
        let mut exprs = vec![operand];
        exprs.extend(items.iter());
        let what = if negated { "NOT IN" } else { "IN" };
        let known = self.literal_choices(row, operand, items);
        let (sql, _) = self.uniform(level, row, &exprs, cx, what)?;
        if !known {
            return None;
        }
        let (value, list) = sql.split_first()?;
        Some(Frag::new(
            format!("({value} {what} ({}))", list.join(", ")),
            Type::Boolean,
        ))
    }
}

/// A PostgreSQL array literal of text elements (`{"a","b\"c",NULL}`), which a cast to
/// `type[]` reads element by element as that type reads text.
fn array_literal(elements: &[Option<String>]) -> String {
    let mut literal = String::from("{");
    for (index, element) in elements.iter().enumerate() {
        if index > 0 {
            literal.push(',');
        }
        match element {
            None => literal.push_str("NULL"),
            Some(text) => {
                literal.push('"');
                for c in text.chars() {
                    if c == '"' || c == '\\' {
                        literal.push('\\');
                    }
                    literal.push(c);
                }
                literal.push('"');
            }
        }
    }
    literal.push('}');
    literal
}

/// The range a relative date literal stands for: its unit (`day`, `week`, `month`, `quarter`,
/// `year`, as `date_trunc` spells them) and the first and last unit it covers, counted from the
/// current one (0); `None` when its count is out of range. Weeks start on Monday
/// (`date_trunc('week', ...)`). `LAST_N_DAYS:n` is the n days before today and today; the other
/// `LAST_N_...` and `NEXT_N_...` literals cover whole units before or after the current one,
/// as in SOQL.
fn date_range_bounds(name: &str, n: Option<&str>) -> Option<(&'static str, i64, i64)> {
    let fixed = |unit: &'static str, k: i64| Some((unit, k, k));
    let (unit, max) = match name {
        "YESTERDAY" => return fixed("day", -1),
        "TODAY" => return fixed("day", 0),
        "TOMORROW" => return fixed("day", 1),
        "LAST_WEEK" => return fixed("week", -1),
        "THIS_WEEK" => return fixed("week", 0),
        "NEXT_WEEK" => return fixed("week", 1),
        "LAST_MONTH" => return fixed("month", -1),
        "THIS_MONTH" => return fixed("month", 0),
        "NEXT_MONTH" => return fixed("month", 1),
        "LAST_QUARTER" => return fixed("quarter", -1),
        "THIS_QUARTER" => return fixed("quarter", 0),
        "NEXT_QUARTER" => return fixed("quarter", 1),
        "LAST_YEAR" => return fixed("year", -1),
        "THIS_YEAR" => return fixed("year", 0),
        "NEXT_YEAR" => return fixed("year", 1),
        "LAST_N_DAYS" | "NEXT_N_DAYS" | "N_DAYS_AGO" => ("day", DATE_RANGE_MAX_DAYS),
        "LAST_N_WEEKS" | "NEXT_N_WEEKS" => ("week", DATE_RANGE_MAX_DAYS / 7),
        "LAST_N_MONTHS" | "NEXT_N_MONTHS" => ("month", DATE_RANGE_MAX_DAYS / 30),
        "LAST_N_QUARTERS" => ("quarter", DATE_RANGE_MAX_DAYS / 91),
        "LAST_N_YEARS" => ("year", DATE_RANGE_MAX_DAYS / 365),
        _ => return None,
    };
    let n: i64 = n?.parse().ok().filter(|n| (0..=max).contains(n))?;
    Some(match name {
        "LAST_N_DAYS" => (unit, -n, 0),
        "N_DAYS_AGO" => (unit, -n, -n),
        _ if name.starts_with("NEXT") => (unit, 1, n),
        _ => (unit, -n, -1),
    })
}

/// How far back or ahead a counted date literal may reach: about 1000 years.
pub(crate) const DATE_RANGE_MAX_DAYS: i64 = 365_000;
