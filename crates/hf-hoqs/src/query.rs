//! HOQS queries to one SQL statement that returns one JSON object (as text) per record.
//!
//! The statement builds the result records in PostgreSQL with `json_build_object`, keyed as
//! the contract says (the keys are bind parameters too, since they come from the query text),
//! so the service never decodes rows: it joins the texts into `{"records":[...]}`. Child
//! relationship subqueries become correlated `json_agg` subqueries; `SELECT DISTINCT` gets an
//! inner query so distinctness and sorting work on the values, not on their JSON.
//!
//! Every query selects its values and sort values in an inner query that filters, sorts and
//! limits, and builds the JSON in an outer query over the rows the inner one returns: PostgreSQL
//! evaluates a select list before it sorts, so JSON built next to `ORDER BY ... LIMIT` would be
//! built for every matching record, not only for the page (three times slower, measured).

use std::borrow::Cow;
use std::fmt::Write as _;

use hf_hoqs_syntax::ast::{
    CallArgs, Direction, Expr, ExprKind, Ident, NullsOrder, OrderItem, Path, Query, RowCount,
    RowCountValue, SelectValue, Span,
};
use hf_hoqs_syntax::functions::{lookup, FunctionKind};
use hf_hoqs_syntax::printer::print_expr;
use hf_model::{FieldKind, QualifiedName};

use crate::compile::{Aggregates, Compiler, Cx, Frag, Level, Purpose, Row};
use crate::diagnostics as diag;
use crate::types::{push_json_value, Type};

/// The LIMIT of a query that states none (API: "LIMIT defaults to 100").
pub const DEFAULT_LIMIT: u64 = 100;

/// The largest LIMIT accepted (API: "may not exceed 10,000").
pub const MAX_LIMIT: u64 = 10_000;

/// The most items one select list may have (`json_build_object` takes at most 100
/// arguments: a key and a value per item).
pub const MAX_SELECT_ITEMS: usize = 50;

/// The most items one ORDER BY may have. A keyset page's condition repeats every earlier sort
/// key in each alternative (`k1 > v1 OR (k1 = v1 AND k2 > v2) OR …`), so it grows with the
/// square of their number; no real sort needs more.
pub const MAX_ORDER_ITEMS: usize = 32;

/// One ORDER BY item, compiled.
struct Order {
    /// The value sorted by.
    sql: String,
    /// ` DESC NULLS LAST` and the like.
    suffix: String,
    /// With DISTINCT: the select item it sorts by.
    column: Option<usize>,
    /// Its type (paging converts a cursor's values to it).
    ty: Type,
    /// Ascending (paging needs the direction and the place of NULLs).
    ascending: bool,
    /// NULLs sort after the other values.
    nulls_last: bool,
    /// The value is never NULL (a required stored field or a system field of the record), so
    /// paging needs no NULL cases and can compare whole rows (which an index serves).
    not_null: bool,
}

/// The clauses of one compiled `SELECT`, before they are assembled.
struct Body {
    distinct: bool,
    /// Result key and value of each select item.
    items: Vec<(String, Frag)>,
    /// `relation AS "t0" LEFT JOIN ...`.
    from: String,
    conditions: Vec<String>,
    group_by: Vec<String>,
    having: Option<String>,
    order: Vec<Order>,
    limit: String,
    offset: Option<String>,
}

impl Compiler<'_> {
    /// Compiles a top-level query into its statement.
    pub(crate) fn top_query(&mut self, query: &Query) -> Option<(String, Vec<String>)> {
        let [module, object] = query.from.segments.as_slice() else {
            return None;
        };
        let object = self.resolve_object(module, object)?;
        let alias = self.alias();
        let row = Row {
            object,
            alias,
            path: String::new(),
        };
        let mut body = self.body(query, &row, None)?;
        let keys = body.items.iter().map(|(key, _)| key.clone()).collect();
        if let Some(after) = self.page {
            if body.distinct || !body.group_by.is_empty() || is_grouped(query) {
                self.report(diag::paging_shape(query.span));
                return None;
            }
            if let Some(offset) = &query.offset {
                self.report(diag::paging_offset(offset.span));
                return None;
            }
            self.page_keys(&mut body, &row, after, query.span)?;
            return Some((self.assemble_page(body), keys));
        }
        Some((self.assemble_top(body), keys))
    }

    /// Makes a body a keyset page: `id` sorts last (every record gets a distinct position), the
    /// records after the cursor's position are selected (each record's sort values are returned
    /// with it, see [`Self::assemble_page`]). An `after` that does not fit the keys is
    /// [`Error::InvalidCursor`](crate::Error::InvalidCursor).
    fn page_keys(
        &mut self,
        body: &mut Body,
        row: &Row,
        after: Option<&[Box<serde_json::value::RawValue>]>,
        span: Span,
    ) -> Option<()> {
        body.order.push(Order {
            sql: format!("{}.\"id\"", row.alias),
            suffix: String::new(),
            column: None,
            ty: Type::Uuid,
            ascending: true,
            nulls_last: true,
            not_null: true,
        });
        if let Some(values) = after {
            if values.len() != body.order.len() {
                self.fail(crate::Error::InvalidCursor);
                return None;
            }
            if let Some(condition) = self.row_comparison(&body.order, values) {
                body.conditions.push(condition?);
                return Some(());
            }
            // (k1, k2, ...) after (v1, v2, ...): k1 after v1, or k1 = v1 and k2 after v2, ...
            let mut alternatives = Vec::new();
            let mut equal_so_far: Vec<String> = Vec::new();
            for (order, value) in body.order.iter().zip(values) {
                let Ok(text) = crate::params::param_text(value, order.ty) else {
                    self.fail(crate::Error::InvalidCursor);
                    return None;
                };
                let (k, is_null) = (&order.sql, text.is_none());
                let v = match text {
                    Some(text) => self.literal(order.ty, text),
                    None => format!("NULL::{}", order.ty.sql_type()),
                };
                let after = match (is_null, order.nulls_last) {
                    (true, true) => None,
                    (true, false) => Some(format!("{k} IS NOT NULL")),
                    (false, _) if order.not_null => {
                        let op = if order.ascending { ">" } else { "<" };
                        Some(format!("{k} {op} {v}"))
                    }
                    (false, nulls_last) => {
                        let op = if order.ascending { ">" } else { "<" };
                        Some(if nulls_last {
                            format!("({k} {op} {v} OR {k} IS NULL)")
                        } else {
                            format!("{k} {op} {v}")
                        })
                    }
                };
                if let Some(after) = after {
                    let mut parts = equal_so_far.clone();
                    parts.push(after);
                    let alternative = format!("({})", parts.join(" AND "));
                    // Each alternative repeats the keys before it: counted as built.
                    if !self.within_built_budget(alternative.len(), span) {
                        return None;
                    }
                    alternatives.push(alternative);
                }
                equal_so_far.push(format!("{k} IS NOT DISTINCT FROM {v}"));
            }
            let condition = if alternatives.is_empty() {
                "FALSE".to_owned()
            } else {
                alternatives.join(" OR ")
            };
            body.conditions.push(format!("({condition})"));
        }
        Some(())
    }

    /// When every sort key is never NULL and all sort one way, the records after the cursor
    /// are one row comparison, `(k1, ..., id) > (v1, ..., vid)`, which an index on the keys
    /// serves in order (the last page costs what the first does). `None` when that does not
    /// apply; `Some(None)` when a value does not fit its key.
    fn row_comparison(
        &mut self,
        order: &[Order],
        values: &[Box<serde_json::value::RawValue>],
    ) -> Option<Option<String>> {
        let ascending = order.first()?.ascending;
        if !order.iter().all(|o| o.not_null && o.ascending == ascending) {
            return None;
        }
        let mut bound = Vec::with_capacity(values.len());
        for (key, value) in order.iter().zip(values) {
            let Ok(Some(text)) = crate::params::param_text(value, key.ty) else {
                self.fail(crate::Error::InvalidCursor);
                return Some(None);
            };
            bound.push(self.literal(key.ty, text));
        }
        let keys: Vec<&str> = order.iter().map(|o| o.sql.as_str()).collect();
        let op = if ascending { ">" } else { "<" };
        Some(Some(format!(
            "(({}) {op} ({}))",
            keys.join(", "),
            bound.join(", ")
        )))
    }

    /// Whether an ORDER BY expression is never NULL: a system field, or a required stored
    /// field, of the record itself.
    fn never_null(&self, row: &Row, expr: &Expr) -> bool {
        let ExprKind::Path(path) = &expr.kind else {
            return false;
        };
        let [name] = path.segments.as_slice() else {
            return false;
        };
        if matches!(name.name.as_str(), "id" | "createdAt" | "updatedAt") {
            return true;
        }
        crate::compile::find_field(self.model, &row.object, &name.name).is_some_and(|field| {
            matches!(
                field.kind,
                FieldKind::Scalar { required: true, .. } | FieldKind::Lookup { required: true, .. }
            )
        })
    }

    /// A keyset page: the records and their sort values, one record more than the LIMIT (so
    /// the caller knows whether another page follows).
    fn assemble_page(&mut self, body: Body) -> String {
        let mut sql = String::with_capacity(STATEMENT_CAPACITY);
        sql.push_str("SELECT ");
        self.json_object(&mut sql, &body.items, "\"q\"");
        sql.push_str("::text, json_build_array(");
        let mut column = String::new();
        for (index, order) in body.order.iter().enumerate() {
            if index > 0 {
                sql.push_str(", ");
            }
            column.clear();
            let _ = write!(column, "\"q\".\"o{index}\"");
            push_json_value(&mut sql, &column, order.ty);
        }
        sql.push_str(")::text FROM (");
        let limit = format!("({} + 1)", body.limit);
        page_rows(&mut sql, &body, &limit, None);
        sql.push_str(") AS \"q\"");
        push_outer_order(&mut sql, "\"q\"", &body.order, false);
        sql
    }

    /// Compiles the clauses of a query (or subquery) reading `row`; `correlation` is the
    /// condition that ties a subquery's records to the outer record.
    fn body(&mut self, query: &Query, row: &Row, correlation: Option<String>) -> Option<Body> {
        if query.select.len() > MAX_SELECT_ITEMS {
            self.report(diag::too_many_items(MAX_SELECT_ITEMS, query.span));
            return None;
        }
        if query.order_by.len() > MAX_ORDER_ITEMS {
            self.report(diag::too_many_sort_items(MAX_ORDER_ITEMS, query.span));
            return None;
        }
        let mut ok = true;
        let keys: Vec<String> = query.select.iter().map(|item| item.key()).collect();
        for (index, key) in keys.iter().enumerate() {
            if keys[..index].contains(key) {
                self.report(diag::duplicate_key(key, query.select[index].span));
                ok = false;
            }
        }
        let grouped = is_grouped(query);
        let mut level = Level::default();
        let anywhere = Cx {
            purpose: Purpose::Query,
            aggregates: Aggregates::Allowed,
        };

        let mut items = Vec::with_capacity(query.select.len());
        for (item, key) in query.select.iter().zip(keys) {
            let frag = match &item.value {
                SelectValue::Expr(expr) => self.expr(&mut level, row, expr, anywhere, None),
                SelectValue::Subquery(_) if grouped => {
                    self.report(diag::subquery_in_grouped(item.span));
                    None
                }
                SelectValue::Subquery(_) if query.distinct => {
                    self.report(diag::subquery_with_distinct(item.span));
                    None
                }
                SelectValue::Subquery(sub) => self.child(row, sub),
            };
            match frag {
                Some(frag) => items.push((key, frag)),
                None => ok = false,
            }
        }

        let mut conditions: Vec<String> = correlation.into_iter().collect();
        if let Some(expr) = &query.where_clause {
            let cx = Cx {
                purpose: Purpose::Query,
                aggregates: Aggregates::Forbidden("WHERE"),
            };
            match self.condition(&mut level, row, expr, cx, "WHERE") {
                Some(frag) => conditions.push(frag.sql),
                None => ok = false,
            }
        }
        let mut group_by = Vec::with_capacity(query.group_by.len());
        for expr in &query.group_by {
            let cx = Cx {
                purpose: Purpose::Query,
                aggregates: Aggregates::Forbidden("GROUP BY"),
            };
            match self.expr(&mut level, row, expr, cx, None) {
                Some(frag) => group_by.push(frag.typed_as(Type::Text).sql),
                None => ok = false,
            }
        }
        let having = match &query.having {
            Some(expr) => match self.condition(&mut level, row, expr, anywhere, "HAVING") {
                Some(frag) => Some(frag.sql),
                None => {
                    ok = false;
                    None
                }
            },
            None => None,
        };

        // ORDER BY may name a select item by its alias; it then sorts by that item's value.
        let order_exprs: Vec<Option<Cow<'_, Expr>>> = query
            .order_by
            .iter()
            .map(|item| self.order_target(query, item))
            .collect();
        if grouped && ok {
            let targets: Vec<Option<&Expr>> = order_exprs.iter().map(|e| e.as_deref()).collect();
            ok &= self.check_grouping(query, &targets);
        }
        let mut order = Vec::with_capacity(query.order_by.len());
        for (item, target) in query.order_by.iter().zip(&order_exprs) {
            let Some(expr) = target.as_deref() else {
                ok = false;
                continue;
            };
            let column = if query.distinct {
                let found = distinct_column(query, item, expr);
                if found.is_none() {
                    self.report(diag::distinct_order_by(item.span));
                    ok = false;
                    continue;
                }
                found
            } else {
                None
            };
            match self.expr(&mut level, row, expr, anywhere, None) {
                Some(frag) => {
                    let frag = frag.typed_as(Type::Text);
                    let ascending = item.direction != Some(Direction::Desc);
                    // PostgreSQL's default: NULLs last ascending, first descending.
                    let nulls_last = match item.nulls {
                        Some(NullsOrder::Last) => true,
                        Some(NullsOrder::First) => false,
                        None => ascending,
                    };
                    let not_null = self.never_null(row, expr);
                    order.push(Order {
                        sql: frag.sql,
                        suffix: order_suffix(item),
                        column,
                        ty: frag.ty,
                        ascending,
                        nulls_last,
                        not_null,
                    })
                }
                None => ok = false,
            }
        }

        let limit = self.row_count(query.limit.as_ref(), "LIMIT", Some(MAX_LIMIT));
        let offset = match &query.offset {
            Some(count) => self.row_count(Some(count), "OFFSET", None).map(Some),
            None => Some(None),
        };
        let (limit, offset) = (limit?, offset?);
        if !ok {
            return None;
        }
        let relation = self.relation(&row.object);
        Some(Body {
            distinct: query.distinct,
            items,
            from: format!("{relation} AS {}{}", row.alias, level.joins),
            conditions,
            group_by,
            having,
            order,
            limit,
            offset,
        })
    }

    /// `operand [NOT] IN (SELECT <id or lookup> FROM <object> [WHERE ...])`: a semi-join,
    /// compiled as `EXISTS` (an anti-join as `NOT EXISTS`) correlated on the selected field, so
    /// PostgreSQL plans it as a hash semi-join. NULLs never match: a record whose value is NULL
    /// is not IN any subquery and is NOT IN every one.
    pub(crate) fn semi_join(
        &mut self,
        level: &mut Level,
        row: &Row,
        operand: &Expr,
        query: &Query,
        negated: bool,
        cx: Cx,
    ) -> Option<Frag> {
        let value = self.expr(level, row, operand, cx, Some(Type::Uuid));
        let value = value.and_then(|value| {
            if value.ty == Type::Uuid {
                Some(value)
            } else {
                self.report(diag::semi_join_operand(value.ty, operand.span));
                None
            }
        });
        let shape_ok = self.semi_join_shape(query);
        let [module, object] = query.from.segments.as_slice() else {
            self.report(diag::semi_join_from(query.from.span));
            return None;
        };
        let object = self.resolve_object(module, object);
        let (value, object) = (value?, object?);
        if !shape_ok {
            return None;
        }
        let sub_row = Row {
            object,
            alias: self.alias(),
            path: String::new(),
        };
        let mut sub_level = Level::default();
        let where_cx = Cx {
            purpose: Purpose::Query,
            aggregates: Aggregates::Forbidden("WHERE"),
        };
        let item = query.select.first()?;
        let SelectValue::Expr(selected) = &item.value else {
            self.report(diag::semi_join_select(item.span));
            return None;
        };
        let selected_frag = match &selected.kind {
            ExprKind::Path(path) => self.path(&mut sub_level, &sub_row, path),
            _ => {
                self.report(diag::semi_join_select(item.span));
                None
            }
        };
        let condition = match &query.where_clause {
            Some(expr) => self
                .condition(&mut sub_level, &sub_row, expr, where_cx, "WHERE")
                .map(Some),
            None => Some(None),
        };
        let (selected_frag, condition) = (selected_frag?, condition?);
        if selected_frag.ty != Type::Uuid {
            self.report(diag::semi_join_select(item.span));
            return None;
        }
        let relation = self.relation(&sub_row.object);
        let not = if negated { "NOT " } else { "" };
        let mut sql = [
            "(",
            not,
            "EXISTS (SELECT 1 FROM ",
            &relation,
            " AS ",
            &sub_row.alias,
            &sub_level.joins,
            " WHERE (",
            &selected_frag.sql,
            " = ",
            &value.sql,
            ")",
        ]
        .concat();
        if let Some(condition) = condition {
            sql.push_str(" AND ");
            sql.push_str(&condition.sql);
        }
        sql.push_str("))");
        Some(Frag::new(sql, Type::Boolean))
    }

    /// A semi-join's subquery selects one field and may only filter (WHERE).
    fn semi_join_shape(&mut self, query: &Query) -> bool {
        if query.select.len() != 1 {
            self.report(diag::semi_join_select(query.span));
            return false;
        }
        let extra = query.distinct
            || !query.group_by.is_empty()
            || query.having.is_some()
            || !query.order_by.is_empty()
            || query.limit.is_some()
            || query.offset.is_some();
        if extra {
            self.report(diag::semi_join_clauses(query.span));
        }
        !extra
    }

    /// The expression an ORDER BY item sorts by: the select item it names by alias, the field
    /// a parameter names, or its own expression. `None` (reported) for an alias of a subquery
    /// or a parameter that names no field.
    fn order_target<'q>(&mut self, query: &'q Query, item: &'q OrderItem) -> Option<Cow<'q, Expr>> {
        if let ExprKind::Param(name) = &item.expr.kind {
            return self.order_by_param(name, item.expr.span).map(Cow::Owned);
        }
        let ExprKind::Path(path) = &item.expr.kind else {
            return Some(Cow::Borrowed(&item.expr));
        };
        let [name] = path.segments.as_slice() else {
            return Some(Cow::Borrowed(&item.expr));
        };
        let named = query.select.iter().find(|select| {
            select
                .alias
                .as_ref()
                .is_some_and(|alias| alias.name == name.name)
        });
        match named.map(|select| &select.value) {
            Some(SelectValue::Expr(expr)) => Some(Cow::Borrowed(expr)),
            Some(SelectValue::Subquery(_)) => {
                self.report(diag::order_by_subquery(&name.name, item.span));
                None
            }
            None => Some(Cow::Borrowed(&item.expr)),
        }
    }

    /// `ORDER BY :param`: the parameter's value is a text naming a field or a lookup path
    /// (`"amount"`, `"account.name"`), which is then sorted by as if written there; names are
    /// checked like written ones (an unknown one is located at the parameter). Sorting by a
    /// parameter's value itself would sort by a constant, so any other value is refused.
    fn order_by_param(&mut self, name: &str, span: Span) -> Option<Expr> {
        let Some(value) = self.request.and_then(|request| request.get(name)) else {
            self.report(diag::unknown_param(name, span));
            return None;
        };
        let text = match hf_model::ScalarType::Text.parse_json(value.get()) {
            Ok(Some(text)) if !text.is_empty() => text,
            _ => {
                self.report(diag::order_param_not_a_path(name, span));
                return None;
            }
        };
        let segments: Vec<Ident> = text
            .split('.')
            .map(|segment| Ident {
                name: segment.to_owned(),
                span,
            })
            .collect();
        Some(Expr {
            kind: ExprKind::Path(Path { segments, span }),
            span,
        })
    }

    /// In a grouped query, every field read outside an aggregate must be a GROUP BY
    /// expression (checked here, so the message can name it).
    fn check_grouping(&mut self, query: &Query, order: &[Option<&Expr>]) -> bool {
        let groups: Vec<String> = query.group_by.iter().map(print_expr).collect();
        let mut ok = true;
        for item in &query.select {
            if let SelectValue::Expr(expr) = &item.value {
                ok &= self.grouped_expr(expr, &groups);
            }
        }
        if let Some(expr) = &query.having {
            ok &= self.grouped_expr(expr, &groups);
        }
        for expr in order.iter().flatten() {
            ok &= self.grouped_expr(expr, &groups);
        }
        ok
    }

    fn grouped_expr(&mut self, expr: &Expr, groups: &[String]) -> bool {
        if !groups.is_empty() && groups.contains(&print_expr(expr)) {
            return true;
        }
        match &expr.kind {
            ExprKind::Literal(_) | ExprKind::Param(_) | ExprKind::User(_) => true,
            ExprKind::InSubquery { operand, .. } | ExprKind::Includes { operand, .. } => {
                self.grouped_expr(operand, groups)
            }
            ExprKind::Case {
                branches,
                otherwise,
            } => {
                let mut ok = true;
                for branch in branches {
                    ok &= self.grouped_expr(&branch.condition, groups);
                    ok &= self.grouped_expr(&branch.value, groups);
                }
                if let Some(otherwise) = otherwise {
                    ok &= self.grouped_expr(otherwise, groups);
                }
                ok
            }
            ExprKind::Path(_) => {
                self.report(diag::not_grouped(&print_expr(expr), expr.span));
                false
            }
            ExprKind::Call { name, .. } if is_aggregate_name(&name.name) => true,
            ExprKind::Call { args, .. } => match args {
                CallArgs::Star => true,
                CallArgs::List { items, .. } => {
                    items.iter().all(|item| self.grouped_expr(item, groups))
                }
            },
            ExprKind::Unary { operand, .. } | ExprKind::IsNull { operand, .. } => {
                self.grouped_expr(operand, groups)
            }
            ExprKind::Binary { left, right, .. } => {
                self.grouped_expr(left, groups) && self.grouped_expr(right, groups)
            }
            ExprKind::Like {
                operand,
                pattern,
                escape,
                ..
            } => {
                self.grouped_expr(operand, groups)
                    && self.grouped_expr(pattern, groups)
                    && escape
                        .as_ref()
                        .is_none_or(|escape| self.grouped_expr(escape, groups))
            }
            ExprKind::InList { operand, items, .. } => {
                self.grouped_expr(operand, groups)
                    && items.iter().all(|item| self.grouped_expr(item, groups))
            }
            ExprKind::InArray { operand, .. } => self.grouped_expr(operand, groups),
        }
    }

    /// LIMIT or OFFSET as a bound parameter: absent LIMIT is the default; a LIMIT above the
    /// maximum is refused.
    fn row_count(
        &mut self,
        count: Option<&RowCount>,
        clause: &str,
        max: Option<u64>,
    ) -> Option<String> {
        let (value, span, shown) = match count {
            None => (DEFAULT_LIMIT, Span::default(), String::new()),
            Some(RowCount {
                value: RowCountValue::Integer(digits),
                span,
            }) => {
                let shown: String = digits.chars().take(24).collect();
                match digits.parse::<u64>() {
                    Ok(value) => (value, *span, shown),
                    Err(_) => (u64::MAX, *span, shown),
                }
            }
            Some(RowCount {
                value: RowCountValue::Param(name),
                span,
            }) => {
                let found = self.request.and_then(|request| request.get(name));
                let Some(found) = found else {
                    self.report(diag::unknown_param(name, *span));
                    return None;
                };
                match found.get().trim().parse::<u64>() {
                    Ok(value) => (value, *span, value.to_string()),
                    Err(_) => {
                        self.report(diag::row_count_type(clause, name, *span));
                        return None;
                    }
                }
            }
        };
        match max {
            Some(max) if value > max => {
                self.report(diag::limit_too_large(&shown, max, span));
                return None;
            }
            None if value > i64::MAX as u64 => {
                self.report(diag::offset_too_large(span));
                return None;
            }
            _ => {}
        }
        if clause == "LIMIT" {
            // The top-level query's LIMIT is compiled last, after its subqueries'.
            self.page_size = value;
        }
        Some(self.literal(Type::Integer, value.to_string()))
    }

    /// A child-relationship subquery: the child records pointing at `outer`, as a JSON array.
    fn child(&mut self, outer: &Row, sub: &Query) -> Option<Frag> {
        if sub.distinct {
            self.report(diag::distinct_in_subquery(sub.span));
            return None;
        }
        let (module, object, lookup) = match sub.from.segments.as_slice() {
            [module, object] => (module, object, None),
            [module, object, lookup] => (module, object, Some(lookup)),
            _ => return None,
        };
        let child = self.resolve_object(module, object)?;
        let model = self.model;
        let related = |target: &QualifiedName| {
            target == &outer.object
                || model.ancestors(&outer.object).contains(target)
                || model.ancestors(target).contains(&outer.object)
        };
        let lookup_key = match lookup {
            Some(lookup) => {
                let found = model.effective_field(&child, &lookup.name);
                match found.map(|effective| &effective.field.kind) {
                    Some(FieldKind::Lookup { target, .. }) if related(target) => {
                        lookup.name.clone()
                    }
                    Some(FieldKind::Lookup { target, .. }) => {
                        let target = target.clone();
                        self.report(diag::lookup_not_to_parent(
                            &child,
                            &lookup.name,
                            &target,
                            &outer.object,
                            lookup.span,
                        ));
                        return None;
                    }
                    _ => {
                        // Reports the unknown field, or the field that is not a lookup.
                        self.lookup_target(&child, lookup);
                        return None;
                    }
                }
            }
            None => {
                let candidates: Vec<String> = model
                    .effective_fields(&child)
                    .into_iter()
                    .filter(|effective| {
                        matches!(&effective.field.kind, FieldKind::Lookup { target, .. } if related(target))
                    })
                    .map(|effective| effective.field.key.clone())
                    .collect();
                match candidates.as_slice() {
                    [only] => only.clone(),
                    [] => {
                        self.report(diag::unknown_relationship(
                            &child,
                            &outer.object,
                            sub.from.span,
                        ));
                        return None;
                    }
                    several => {
                        self.report(diag::ambiguous_relationship(
                            &child,
                            &outer.object,
                            several,
                            sub.from.span,
                        ));
                        return None;
                    }
                }
            }
        };
        let alias = self.alias();
        let column = self.ident(&lookup_key);
        let id = self.ident("id");
        let correlation = format!("{alias}.{column} = {}.{id}", outer.alias);
        let row = Row {
            object: child,
            alias,
            path: String::new(),
        };
        let body = self.body(sub, &row, Some(correlation))?;
        Some(Frag::new(self.assemble_child(body), Type::Json))
    }

    /// `json_build_object($k1::text, v1, ...)` of the select items, whose values the inner
    /// query ([`page_rows`]) returns as `alias."c0"`, `alias."c1"`, ...
    fn json_object(&mut self, out: &mut String, items: &[(String, Frag)], alias: &str) {
        out.push_str("json_build_object(");
        let mut column = String::new();
        for (index, (key, frag)) in items.iter().enumerate() {
            if index > 0 {
                out.push_str(", ");
            }
            self.push_literal(out, Type::Text, key.clone());
            out.push_str(", ");
            column.clear();
            let _ = write!(column, "{alias}.\"c{index}\"");
            push_json_value(out, &column, frag.ty);
        }
        out.push(')');
    }

    fn assemble_top(&mut self, body: Body) -> String {
        if body.distinct {
            return self.assemble_distinct(body);
        }
        let mut sql = String::with_capacity(STATEMENT_CAPACITY);
        sql.push_str("SELECT ");
        self.json_object(&mut sql, &body.items, "\"q\"");
        sql.push_str("::text FROM (");
        page_rows(&mut sql, &body, &body.limit, body.offset.as_deref());
        sql.push_str(") AS \"q\"");
        push_outer_order(&mut sql, "\"q\"", &body.order, false);
        sql
    }

    /// `SELECT DISTINCT` over the values in an inner query; a middle query sorts and limits
    /// the distinct values, and the outer query builds the JSON of the rows it returns.
    fn assemble_distinct(&mut self, body: Body) -> String {
        let mut sql = String::with_capacity(STATEMENT_CAPACITY);
        sql.push_str("SELECT ");
        self.json_object(&mut sql, &body.items, "\"p\"");
        sql.push_str("::text FROM (SELECT * FROM (SELECT DISTINCT ");
        for (index, (_, frag)) in body.items.iter().enumerate() {
            if index > 0 {
                sql.push_str(", ");
            }
            let _ = write!(sql, "{} AS \"c{index}\"", frag.sql);
        }
        sql.push_str(" FROM ");
        sql.push_str(&body.from);
        clauses(&body, &mut sql);
        sql.push_str(") AS \"q\"");
        push_outer_order(&mut sql, "\"q\"", &body.order, true);
        sql.push_str(" LIMIT ");
        sql.push_str(&body.limit);
        if let Some(offset) = &body.offset {
            sql.push_str(" OFFSET ");
            sql.push_str(offset);
        }
        sql.push_str(") AS \"p\"");
        push_outer_order(&mut sql, "\"p\"", &body.order, true);
        sql
    }

    /// A subquery as one JSON array: the inner query selects each record's values and sort
    /// values; `json_agg` builds the records and orders them by the same values, so the
    /// array's order is guaranteed.
    fn assemble_child(&mut self, body: Body) -> String {
        let mut sql = String::with_capacity(STATEMENT_CAPACITY);
        sql.push_str("(SELECT coalesce(json_agg(");
        self.json_object(&mut sql, &body.items, "\"s\"");
        push_outer_order(&mut sql, "\"s\"", &body.order, false);
        sql.push_str("), '[]'::json) FROM (");
        page_rows(&mut sql, &body, &body.limit, body.offset.as_deref());
        sql.push_str(") AS \"s\")");
        sql
    }
}

/// Room for a typical statement, so building it rarely reallocates.
const STATEMENT_CAPACITY: usize = 1024;

/// The inner query of a statement: each select item's value as `"c0"`, `"c1"`, ... and each
/// sort value as `"o0"`, `"o1"`, ..., filtered, grouped, sorted and limited; the outer query
/// builds the JSON from these columns, for the returned rows only. These generated names and
/// the outer aliases (`"q"`, `"p"`, `"s"`) are letters and digits, written already quoted.
fn page_rows(out: &mut String, body: &Body, limit: &str, offset: Option<&str>) {
    out.push_str("SELECT ");
    let items = body.items.iter().enumerate();
    let items = items.map(|(index, (_, frag))| (frag.sql.as_str(), 'c', index));
    let orders = body.order.iter().enumerate();
    let orders = orders.map(|(index, order)| (order.sql.as_str(), 'o', index));
    for (at, (value, prefix, index)) in items.chain(orders).enumerate() {
        if at > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{value} AS \"{prefix}{index}\"");
    }
    out.push_str(" FROM ");
    out.push_str(&body.from);
    clauses(body, out);
    for (at, order) in body.order.iter().enumerate() {
        out.push_str(if at == 0 { " ORDER BY " } else { ", " });
        out.push_str(&order.sql);
        out.push_str(&order.suffix);
    }
    out.push_str(" LIMIT ");
    out.push_str(limit);
    if let Some(offset) = offset {
        out.push_str(" OFFSET ");
        out.push_str(offset);
    }
}

/// ` WHERE ... GROUP BY ... HAVING ...` of a body, those it has.
fn clauses(body: &Body, out: &mut String) {
    for (at, condition) in body.conditions.iter().enumerate() {
        out.push_str(if at == 0 { " WHERE " } else { " AND " });
        out.push_str(condition);
    }
    for (at, group) in body.group_by.iter().enumerate() {
        out.push_str(if at == 0 { " GROUP BY " } else { ", " });
        out.push_str(group);
    }
    if let Some(having) = &body.having {
        out.push_str(" HAVING ");
        out.push_str(having);
    }
}

/// ` ORDER BY alias."o0" DESC, ...`: the inner query's sort columns again in an outer query, so
/// its rows keep the inner order (PostgreSQL sees the inner order and does not sort twice).
/// With DISTINCT the sort values are the select items' columns (`alias."c2"`). Nothing when
/// there is nothing to sort by.
fn push_outer_order(out: &mut String, alias: &str, order: &[Order], distinct: bool) {
    let columns = order.iter().enumerate().filter_map(|(index, order)| {
        let (prefix, index) = if distinct {
            ('c', order.column?)
        } else {
            ('o', index)
        };
        Some((prefix, index, &order.suffix))
    });
    for (at, (prefix, index, suffix)) in columns.enumerate() {
        out.push_str(if at == 0 { " ORDER BY " } else { ", " });
        let _ = write!(out, "{alias}.\"{prefix}{index}\"{suffix}");
    }
}

fn is_aggregate_name(name: &str) -> bool {
    lookup(name).is_some_and(|function| function.kind == FunctionKind::Aggregate)
}

fn contains_aggregate(expr: &Expr) -> bool {
    let mut found = false;
    expr.walk(&mut |node| {
        if let ExprKind::Call { name, .. } = &node.kind {
            found |= is_aggregate_name(&name.name);
        }
    });
    found
}

/// A query is grouped when it has GROUP BY or HAVING, or uses an aggregate in its select
/// list or ORDER BY (as in SQL, `SELECT COUNT(*)` makes one group of every record).
fn is_grouped(query: &Query) -> bool {
    let in_select = query.select.iter().any(|item| match &item.value {
        SelectValue::Expr(expr) => contains_aggregate(expr),
        SelectValue::Subquery(_) => false,
    });
    let in_order = query
        .order_by
        .iter()
        .any(|item| contains_aggregate(&item.expr));
    !query.group_by.is_empty() || query.having.is_some() || in_select || in_order
}

/// With DISTINCT: the select item an ORDER BY item sorts by (by alias or by equal text).
fn distinct_column(query: &Query, item: &OrderItem, target: &Expr) -> Option<usize> {
    let wanted = print_expr(target);
    let by_text = query.select.iter().position(|select| match &select.value {
        SelectValue::Expr(expr) => print_expr(expr) == wanted,
        SelectValue::Subquery(_) => false,
    });
    by_text.or_else(|| {
        let ExprKind::Path(path) = &item.expr.kind else {
            return None;
        };
        let [name] = path.segments.as_slice() else {
            return None;
        };
        query.select.iter().position(|select| {
            select
                .alias
                .as_ref()
                .is_some_and(|alias| alias.name == name.name)
        })
    })
}

fn order_suffix(item: &OrderItem) -> String {
    let direction = match item.direction {
        Some(Direction::Desc) => " DESC",
        Some(Direction::Asc) => " ASC",
        None => "",
    };
    let nulls = match item.nulls {
        Some(NullsOrder::First) => " NULLS FIRST",
        Some(NullsOrder::Last) => " NULLS LAST",
        None => "",
    };
    format!("{direction}{nulls}")
}
