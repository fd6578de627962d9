//! The signatures and SQL of every function of the language (the names are listed in
//! `hf_hoqs_syntax::functions`; docs/formulas.md has the table of types).
//!
//! Each function is one arm of [`Compiler::scalar`] or [`Compiler::aggregate`]: the number of
//! arguments is checked first (one table, [`expected_arguments`]), then each arm checks their
//! types and writes the PostgreSQL expression. Results never depend on the session's time zone
//! (dates and datetimes are UTC) and never fail on ordinary data: a negative length gives an
//! empty text, division by zero gives NULL.

use hf_hoqs_syntax::ast::{CallArgs, Expr, ExprKind, Ident, Literal, Span};
use hf_hoqs_syntax::functions::{lookup, FunctionKind};

use crate::compile::{Aggregates, Compiler, Cx, Frag, Level, Row};
use crate::diagnostics as diag;
use crate::types::Type;

/// What an argument must be, for checks and messages.
#[derive(Clone, Copy)]
enum Want {
    Text,
    Integer,
    Numeric,
    Temporal,
}

impl Want {
    fn accepts(self, ty: Type) -> bool {
        match self {
            Want::Text => ty == Type::Text,
            Want::Integer => ty == Type::Integer,
            Want::Numeric => ty.is_numeric(),
            Want::Temporal => ty.is_temporal(),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Want::Text => "text",
            Want::Integer => "an integer",
            Want::Numeric => "a number",
            Want::Temporal => "a date or datetime",
        }
    }

    /// The hint given to a parameter or literal argument.
    fn hint(self) -> Option<Type> {
        match self {
            Want::Text => Some(Type::Text),
            Want::Integer => Some(Type::Integer),
            Want::Numeric => None,
            Want::Temporal => Some(Type::Date),
        }
    }

    /// The type a NULL argument is given, so PostgreSQL can pick the function's overload.
    fn null_type(self) -> Type {
        match self {
            Want::Text => Type::Text,
            Want::Integer => Type::Integer,
            Want::Numeric => Type::Decimal,
            Want::Temporal => Type::Date,
        }
    }
}

/// `(x AT TIME ZONE zone)` for a datetime, so date parts are those of that zone's calendar
/// (`zone` is the SQL of [`Compiler::zone`]).
fn local(frag: &Frag, zone: &str) -> String {
    match frag.ty {
        Type::Datetime => format!("({} AT TIME ZONE {zone})", frag.sql),
        _ => frag.sql.clone(),
    }
}

/// The calendar date of a date or datetime in `zone`.
fn local_date(frag: &Frag, zone: &str) -> String {
    match frag.ty {
        Type::Datetime => format!("({} AT TIME ZONE {zone})::date", frag.sql),
        _ => frag.sql.clone(),
    }
}

/// The text of a value as `TEXT(x)`, `CONCAT` and `||` give it: numbers exactly, dates
/// `YYYY-MM-DD`, datetimes RFC 3339 in UTC (as in result records), booleans `true`/`false`.
pub(crate) fn as_text(frag: &Frag) -> String {
    match frag.ty {
        Type::Text => frag.sql.clone(),
        Type::Datetime => crate::types::json_value(&frag.sql, Type::Datetime),
        Type::Json => format!("(({}) #>> '{{}}')", frag.sql),
        _ => format!("({})::text", frag.sql),
    }
}

/// How many arguments a function takes (fewest, most) and how messages say it; checked before
/// anything else of a call. `None` for the functions that check their own arguments (the
/// aggregates, and the rule-only functions, whose place is checked first).
fn expected_arguments(name: &str) -> Option<((usize, usize), &'static str)> {
    Some(match name {
        "IF" => ((3, 3), "3 arguments (condition, then, else)"),
        "NULLIF" => ((2, 2), "2 arguments"),
        "COALESCE" | "GREATEST" | "LEAST" | "CONCAT" => ((1, usize::MAX), "at least one argument"),
        "UPPER" | "LOWER" | "TRIM" | "LTRIM" | "RTRIM" | "LENGTH" | "VALUE" => {
            ((1, 1), "one argument (text)")
        }
        "SUBSTRING" => ((2, 3), "2 or 3 arguments (text, start, length)"),
        "LEFT" | "RIGHT" => ((2, 2), "2 arguments (text, count)"),
        "REPLACE" => ((3, 3), "3 arguments (text, search, replacement)"),
        "CONTAINS" | "STARTS_WITH" | "ENDS_WITH" => ((2, 2), "2 arguments (text, part)"),
        "ABS" | "FLOOR" | "CEIL" | "SQRT" | "EXP" | "LN" | "LOG" => {
            ((1, 1), "one argument (a number)")
        }
        "ROUND" | "TRUNC" => ((1, 2), "1 or 2 arguments (a number, digits)"),
        "MOD" | "POWER" => ((2, 2), "2 arguments (numbers)"),
        "NOW" | "TODAY" => ((0, 0), "no arguments"),
        "YEAR" | "MONTH" | "DAY" | "CALENDAR_YEAR" | "CALENDAR_QUARTER" | "CALENDAR_MONTH"
        | "WEEK_IN_YEAR" | "DAY_IN_MONTH" | "DAY_IN_WEEK" | "HOUR_IN_DAY" => {
            ((1, 1), "one argument (a date or datetime)")
        }
        "ADD_DAYS" | "ADD_MONTHS" => ((2, 2), "2 arguments (a date or datetime, a count)"),
        "DAYS_BETWEEN" => ((2, 2), "2 arguments (from, to)"),
        "REGEX" => ((2, 2), "2 arguments (text, pattern)"),
        "LPAD" | "RPAD" => ((2, 3), "2 or 3 arguments (text, length, pad)"),
        "FIND" => ((2, 2), "2 arguments (needle, text)"),
        "TEXT" | "ISBLANK" => ((1, 1), "one argument"),
        "DATEVALUE" => ((1, 1), "one argument (text or a datetime)"),
        "TOLABEL" => ((1, 1), "one argument (a picklist field)"),
        "ISPICKVAL" => ((2, 2), "2 arguments (picklist, key)"),
        "BLANKVALUE" => ((2, 2), "2 arguments (value, fallback)"),
        "DAY_ONLY" => ((1, 1), "one argument (a datetime)"),
        _ => return None,
    })
}

impl Compiler<'_> {
    /// Compiles a call; unknown names were reported before compiling (by the parser's name
    /// check), so they only stop compilation here.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn call(
        &mut self,
        level: &mut Level,
        row: &Row,
        expr: &Expr,
        name: &Ident,
        args: &CallArgs,
        cx: Cx,
    ) -> Option<Frag> {
        let function = lookup(&name.name)?;
        match function.kind {
            FunctionKind::Aggregate => {
                self.aggregate(level, row, function.name, args, cx, expr.span)
            }
            FunctionKind::Scalar => {
                let items = match args {
                    CallArgs::Star => {
                        self.report(diag::star_argument(function.name, expr.span));
                        return None;
                    }
                    CallArgs::List { distinct: true, .. } => {
                        self.report(diag::distinct_argument(function.name, expr.span));
                        return None;
                    }
                    CallArgs::List { items, .. } => items,
                };
                self.scalar(level, row, function.name, items, cx, expr.span)
            }
        }
    }

    /// Checks the number of arguments.
    fn arity(
        &mut self,
        name: &str,
        items: &[Expr],
        range: (usize, usize),
        text: &str,
        span: Span,
    ) -> bool {
        let (min, max) = range;
        if items.len() < min || items.len() > max {
            self.report(diag::arity(name, text, items.len(), span));
            return false;
        }
        true
    }

    /// Compiles argument `index` (0-based) and checks that it is what the function wants; a
    /// NULL argument is typed so PostgreSQL can choose the function.
    #[allow(clippy::too_many_arguments)]
    fn arg(
        &mut self,
        level: &mut Level,
        row: &Row,
        name: &str,
        items: &[Expr],
        index: usize,
        want: Want,
        cx: Cx,
    ) -> Option<Frag> {
        let expr = items.get(index)?;
        let frag = self.expr(level, row, expr, cx, want.hint())?;
        if frag.ty == Type::Null {
            let ty = want.null_type();
            return Some(Frag::new(format!("NULL::{}", ty.sql_type()), ty));
        }
        if !want.accepts(frag.ty) {
            self.report(diag::argument_type(
                name,
                index + 1,
                want.describe(),
                frag.ty,
                expr.span,
            ));
            return None;
        }
        Some(frag)
    }

    /// Compiles every argument with the same requirement.
    fn args(
        &mut self,
        level: &mut Level,
        row: &Row,
        name: &str,
        items: &[Expr],
        wants: &[Want],
        cx: Cx,
    ) -> Option<Vec<Frag>> {
        let mut frags = Vec::with_capacity(wants.len());
        let mut failed = false;
        for (index, want) in wants.iter().enumerate() {
            match self.arg(level, row, name, items, index, *want, cx) {
                Some(frag) => frags.push(frag),
                None => failed = true,
            }
        }
        (!failed && frags.len() == wants.len()).then_some(frags)
    }

    /// COUNT, SUM, AVG, MIN, MAX.
    fn aggregate(
        &mut self,
        level: &mut Level,
        row: &Row,
        name: &'static str,
        args: &CallArgs,
        cx: Cx,
        span: Span,
    ) -> Option<Frag> {
        match cx.aggregates {
            Aggregates::Allowed => {}
            Aggregates::Forbidden(place) => {
                self.report(diag::aggregate_not_allowed(name, place, span));
                return None;
            }
            Aggregates::Inside => {
                self.report(diag::nested_aggregate(name, span));
                return None;
            }
        }
        let (distinct, items) = match args {
            CallArgs::Star if name == "COUNT" => {
                return Some(Frag::new("count(*)".to_owned(), Type::Integer))
            }
            CallArgs::Star => {
                self.report(diag::star_argument(name, span));
                return None;
            }
            CallArgs::List { distinct, items } => (*distinct, items),
        };
        if !self.arity(name, items, (1, 1), "one argument", span) {
            return None;
        }
        let inner = Cx {
            aggregates: Aggregates::Inside,
            ..cx
        };
        let expr = items.first()?;
        let mut value = self.expr(level, row, expr, inner, None)?;
        let lower = name.to_ascii_lowercase();
        let distinct = if distinct { "DISTINCT " } else { "" };
        if name == "COUNT" {
            return Some(Frag::new(
                format!("count({distinct}{})", value.sql),
                Type::Integer,
            ));
        }
        if value.ty == Type::Null {
            value = match name {
                "SUM" | "AVG" => Frag::new("NULL::bigint".to_owned(), Type::Integer),
                _ => Frag::new("NULL::text".to_owned(), Type::Text),
            };
        }
        let call = format!("{lower}({distinct}{})", value.sql);
        let numeric = value.ty.is_numeric();
        match (name, value.ty) {
            // PostgreSQL sums bigints as numeric; the sum of integers stays an integer.
            ("SUM", Type::Integer) => Some(Frag::new(format!("({call})::bigint"), Type::Integer)),
            ("SUM", ty) if numeric => Some(Frag::new(call, ty)),
            ("AVG", Type::Float) => Some(Frag::new(call, Type::Float)),
            ("AVG", _) if numeric => Some(Frag::new(format!("trim_scale({call})"), Type::Decimal)),
            ("MIN" | "MAX", ty) if ty.is_ordered() => Some(Frag::new(call, ty)),
            (_, ty) => {
                let expected = if matches!(name, "SUM" | "AVG") {
                    "a number"
                } else {
                    "a number, text, date or datetime"
                };
                self.report(diag::argument_type(name, 1, expected, ty, expr.span));
                None
            }
        }
    }

    /// Every per-row function.
    fn scalar(
        &mut self,
        level: &mut Level,
        row: &Row,
        name: &'static str,
        items: &[Expr],
        cx: Cx,
        span: Span,
    ) -> Option<Frag> {
        use Want::{Integer, Numeric, Temporal, Text};
        if let Some((range, expected)) = expected_arguments(name) {
            if !self.arity(name, items, range, expected, span) {
                return None;
            }
        }
        let text = |sql: String| Some(Frag::new(sql, Type::Text));
        match name {
            "IF" => {
                let condition = self.condition(level, row, &items[0], cx, "IF");
                let branches =
                    self.uniform(level, row, &[&items[1], &items[2]], cx, "IF's branches");
                let (condition, (branches, ty)) = (condition?, branches?);
                let [then, otherwise] = branches.as_slice() else {
                    return None;
                };
                // Both branches null: a null, cast to what its place needs (`Frag::typed_as`).
                Some(Frag::new(
                    format!(
                        "(CASE WHEN {} THEN {then} ELSE {otherwise} END)",
                        condition.sql
                    ),
                    ty,
                ))
            }
            "COALESCE" | "NULLIF" | "GREATEST" | "LEAST" => {
                let exprs: Vec<&Expr> = items.iter().collect();
                let what = format!("{name}'s arguments");
                let (sql, ty) = self.uniform(level, row, &exprs, cx, &what)?;
                if matches!(name, "GREATEST" | "LEAST") && !(ty.is_ordered() || ty == Type::Null) {
                    let expected = "a number, text, date or datetime";
                    self.report(diag::argument_type(name, 1, expected, ty, span));
                    return None;
                }
                Some(Frag::new(format!("{name}({})", sql.join(", ")), ty))
            }
            "CONCAT" => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    parts.push(self.expr(level, row, item, cx, Some(Type::Text)));
                }
                let parts: Option<Vec<String>> = parts
                    .into_iter()
                    .map(|part| part.map(|frag| as_text(&frag)))
                    .collect();
                text(format!("concat({})", parts?.join(", ")))
            }
            "UPPER" | "LOWER" | "TRIM" | "LTRIM" | "RTRIM" | "LENGTH" => {
                let value = self.arg(level, row, name, items, 0, Text, cx)?;
                match name {
                    "LENGTH" => Some(Frag::new(
                        format!("(char_length({}))::bigint", value.sql),
                        Type::Integer,
                    )),
                    "TRIM" => text(format!("btrim({})", value.sql)),
                    other => text(format!("{}({})", other.to_ascii_lowercase(), value.sql)),
                }
            }
            "SUBSTRING" => {
                let wants: &[Want] = if items.len() == 3 {
                    &[Text, Integer, Integer]
                } else {
                    &[Text, Integer]
                };
                let a = self.args(level, row, name, items, wants, cx)?;
                match a.as_slice() {
                    [value, start, length] => text(format!(
                        "substr({}, ({})::integer, greatest(({})::integer, 0))",
                        value.sql, start.sql, length.sql
                    )),
                    [value, start] => {
                        text(format!("substr({}, ({})::integer)", value.sql, start.sql))
                    }
                    _ => None,
                }
            }
            "LEFT" | "RIGHT" => {
                let a = self.args(level, row, name, items, &[Text, Integer], cx)?;
                let lower = name.to_ascii_lowercase();
                text(format!("{lower}({}, ({})::integer)", a[0].sql, a[1].sql))
            }
            "REPLACE" => {
                let a = self.args(level, row, name, items, &[Text, Text, Text], cx)?;
                text(format!("replace({}, {}, {})", a[0].sql, a[1].sql, a[2].sql))
            }
            "CONTAINS" | "STARTS_WITH" | "ENDS_WITH" => {
                let a = self.args(level, row, name, items, &[Text, Text], cx)?;
                let (value, part) = (&a[0].sql, &a[1].sql);
                let sql = match name {
                    "CONTAINS" => format!("(strpos({value}, {part}) > 0)"),
                    "STARTS_WITH" => format!("starts_with({value}, {part})"),
                    _ => format!("(right({value}, char_length({part})) = {part})"),
                };
                Some(Frag::new(sql, Type::Boolean))
            }
            "ABS" | "FLOOR" | "CEIL" => {
                let value = self.arg(level, row, name, items, 0, Numeric, cx)?;
                if value.ty == Type::Integer && name != "ABS" {
                    return Some(value);
                }
                let lower = name.to_ascii_lowercase();
                Some(Frag::new(format!("{lower}({})", value.sql), value.ty))
            }
            "ROUND" | "TRUNC" => {
                let value = self.arg(level, row, name, items, 0, Numeric, cx)?;
                let function = name.to_ascii_lowercase();
                if items.len() == 1 {
                    return Some(match value.ty {
                        Type::Integer => value,
                        ty => Frag::new(format!("{function}({})", value.sql), ty),
                    });
                }
                let digits = self.arg(level, row, name, items, 1, Integer, cx)?;
                let done = format!(
                    "{function}(({})::numeric, ({})::integer)",
                    value.sql, digits.sql
                );
                Some(match value.ty {
                    Type::Decimal => Frag::new(done, Type::Decimal),
                    ty => Frag::new(format!("({done})::{}", ty.sql_type()), ty),
                })
            }
            "MOD" | "POWER" => {
                let a = self.args(level, row, name, items, &[Numeric, Numeric], cx)?;
                let (x, y) = (&a[0], &a[1]);
                let widest = crate::types::widest_numeric(x.ty, y.ty);
                Some(match (name, widest) {
                    ("MOD", Type::Integer) => Frag::new(
                        format!("mod({}, NULLIF({}, 0))", x.sql, y.sql),
                        Type::Integer,
                    ),
                    ("MOD", ty) => Frag::new(
                        format!(
                            "(mod(({})::numeric, NULLIF(({})::numeric, 0)))::{}",
                            x.sql,
                            y.sql,
                            ty.sql_type()
                        ),
                        ty,
                    ),
                    (_, Type::Float) => Frag::new(
                        format!(
                            "power(({})::double precision, ({})::double precision)",
                            x.sql, y.sql
                        ),
                        Type::Float,
                    ),
                    _ => Frag::new(
                        format!(
                            "trim_scale(power(({})::numeric, ({})::numeric))",
                            x.sql, y.sql
                        ),
                        Type::Decimal,
                    ),
                })
            }
            "SQRT" => {
                let value = self.arg(level, row, name, items, 0, Numeric, cx)?;
                Some(Frag::new(
                    format!("sqrt(({})::double precision)", value.sql),
                    Type::Float,
                ))
            }
            "NOW" | "TODAY" => Some(if name == "NOW" {
                Frag::new("now()".to_owned(), Type::Datetime)
            } else {
                let zone = self.zone(cx);
                Frag::new(format!("(now() AT TIME ZONE {zone})::date"), Type::Date)
            }),
            "ADD_DAYS" | "ADD_MONTHS" => {
                let a = self.args(level, row, name, items, &[Temporal, Integer], cx)?;
                let (value, count) = (&a[0], &a[1]);
                let zone = self.zone(cx);
                let unit = if name == "ADD_DAYS" { "days" } else { "months" };
                let interval = format!("make_interval({unit} => ({})::integer)", count.sql);
                Some(match value.ty {
                    Type::Date => {
                        Frag::new(format!("({} + {interval})::date", value.sql), Type::Date)
                    }
                    // Months are counted on the calendar of the context's zone (UTC outside
                    // queries), whatever the session's zone.
                    _ => Frag::new(
                        format!(
                            "(({} + {interval}) AT TIME ZONE {zone})",
                            local(value, &zone)
                        ),
                        Type::Datetime,
                    ),
                })
            }
            "DAYS_BETWEEN" => {
                let a = self.args(level, row, name, items, &[Temporal, Temporal], cx)?;
                let zone = self.zone(cx);
                Some(Frag::new(
                    format!(
                        "(({}) - ({}))::bigint",
                        local_date(&a[1], &zone),
                        local_date(&a[0], &zone)
                    ),
                    Type::Integer,
                ))
            }
            "REGEX" => {
                if let Some(Expr {
                    kind: ExprKind::Literal(Literal::String(pattern)),
                    span: pattern_span,
                }) = items.get(1)
                {
                    if let Some(problem) = hf_hoqs_syntax::functions::regex_problem(pattern) {
                        self.report(diag::bad_regex(problem, *pattern_span));
                        return None;
                    }
                }
                let a = self.args(level, row, name, items, &[Text, Text], cx)?;
                // The whole text must match: the pattern is anchored around a group.
                Some(Frag::new(
                    format!("({} ~ ('^(?:' || {} || ')$'))", a[0].sql, a[1].sql),
                    Type::Boolean,
                ))
            }
            "LPAD" | "RPAD" => {
                let wants: &[Want] = if items.len() == 3 {
                    &[Text, Integer, Text]
                } else {
                    &[Text, Integer]
                };
                let a = self.args(level, row, name, items, wants, cx)?;
                let lower = name.to_ascii_lowercase();
                let pad = a.get(2).map_or("' '".to_owned(), |pad| pad.sql.clone());
                // A length is capped so a formula cannot build a huge text.
                text(format!(
                    "{lower}({}, least(greatest(({})::bigint, 0), {MAX_PAD})::integer, {pad})",
                    a[0].sql, a[1].sql
                ))
            }
            "FIND" => {
                let a = self.args(level, row, name, items, &[Text, Text], cx)?;
                Some(Frag::new(
                    format!("(strpos({}, {}))::bigint", a[1].sql, a[0].sql),
                    Type::Integer,
                ))
            }
            "TEXT" => {
                let value = self.expr(level, row, &items[0], cx, None)?;
                if value.ty == Type::Null {
                    return text("NULL::text".to_owned());
                }
                text(as_text(&value))
            }
            "VALUE" => {
                let value = self.arg(level, row, name, items, 0, Text, cx)?;
                // Text that is not a plain decimal number gives NULL rather than an error.
                let trimmed = format!("btrim({})", value.sql);
                Some(Frag::new(
                    format!(
                        "(CASE WHEN {trimmed} ~ '^[-+]?[0-9]+(\\.[0-9]+)?$' THEN ({trimmed})::numeric END)"
                    ),
                    Type::Decimal,
                ))
            }
            "DATEVALUE" => {
                let value = self.expr(level, row, &items[0], cx, Some(Type::Text))?;
                match value.ty {
                    Type::Null => Some(Frag::new("NULL::date".to_owned(), Type::Date)),
                    Type::Date => Some(value),
                    Type::Datetime => {
                        let zone = self.zone(cx);
                        Some(Frag::new(local_date(&value, &zone), Type::Date))
                    }
                    Type::Text => {
                        // `YYYY-MM-DD` naming a real day, else NULL: the day is built from the
                        // first of its month (always valid) and kept only when it reads back
                        // as the same text, so no cast can fail.
                        let t = &value.sql;
                        let day = format!(
                            "((substr({t}, 1, 8) || '01')::date + (substr({t}, 9, 2)::integer - 1))"
                        );
                        Some(Frag::new(
                            format!(
                                "(CASE WHEN {t} ~ '^[0-9]{{4}}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$' AND substr({t}, 1, 4) <> '0000' THEN (CASE WHEN to_char({day}, 'YYYY-MM-DD') = {t} THEN {day} END) END)"
                            ),
                            Type::Date,
                        ))
                    }
                    other => {
                        let expected = "text or a datetime";
                        self.report(diag::argument_type(name, 1, expected, other, items[0].span));
                        None
                    }
                }
            }
            "EXP" | "LN" | "LOG" => {
                let value = self.arg(level, row, name, items, 0, Numeric, cx)?;
                let x = format!("({})::double precision", value.sql);
                let sql = match name {
                    "EXP" => format!("exp({x})"),
                    // The logarithm of zero or a negative number is NULL, not an error.
                    "LN" => format!("ln(CASE WHEN {x} > 0 THEN {x} END)"),
                    _ => format!("log(CASE WHEN {x} > 0 THEN {x} END)"),
                };
                Some(Frag::new(sql, Type::Float))
            }
            "TOLABEL" => {
                let Some((_, choices)) = self.path_choices(row, &items[0]) else {
                    self.report(diag::needs_picklist(name, true, items[0].span));
                    return None;
                };
                let value = self.expr(level, row, &items[0], cx, None)?;
                Some(self.labels_of(value, &choices))
            }
            "ISPICKVAL" => {
                let single = self
                    .path_field(row, &items[0])
                    .filter(|field| field.value_type() == hf_model::ScalarType::Picklist)
                    .map(|field| (field.key.clone(), field.picklist_values().to_vec()));
                let Some((field, choices)) = single else {
                    self.report(diag::needs_picklist(name, false, items[0].span));
                    return None;
                };
                if let ExprKind::Literal(Literal::String(key)) = &items[1].kind {
                    if !self.known_keys(
                        std::iter::once(key.as_str()),
                        &field,
                        &choices,
                        items[1].span,
                    ) {
                        return None;
                    }
                }
                let a = self.args(level, row, name, items, &[Text, Text], cx)?;
                // False, not NULL, for an empty picklist.
                Some(Frag::new(
                    format!("COALESCE({} = {}, FALSE)", a[0].sql, a[1].sql),
                    Type::Boolean,
                ))
            }
            "ISBLANK" => {
                let value = self.expr(level, row, &items[0], cx, None)?;
                let sql = match value.ty {
                    Type::Text => format!("({} IS NULL OR {} = '')", value.sql, value.sql),
                    _ => format!("({} IS NULL)", value.sql),
                };
                Some(Frag::new(sql, Type::Boolean))
            }
            "BLANKVALUE" => {
                let exprs: Vec<&Expr> = items.iter().collect();
                let (sql, ty) = self.uniform(level, row, &exprs, cx, "BLANKVALUE's arguments")?;
                let [value, fallback] = sql.as_slice() else {
                    return None;
                };
                // Both arguments null: a null, cast to what its place needs (`Frag::typed_as`).
                let value = if ty == Type::Text {
                    format!("NULLIF({value}, '')")
                } else {
                    value.clone()
                };
                Some(Frag::new(format!("COALESCE({value}, {fallback})"), ty))
            }
            "YEAR" | "MONTH" | "DAY" | "CALENDAR_YEAR" | "CALENDAR_QUARTER" | "CALENDAR_MONTH"
            | "WEEK_IN_YEAR" | "DAY_IN_MONTH" | "DAY_IN_WEEK" | "HOUR_IN_DAY" => {
                let value = self.arg(level, row, name, items, 0, Temporal, cx)?;
                let zone = self.zone(cx);
                let at = local(&value, &zone);
                let sql = match name {
                    "YEAR" | "CALENDAR_YEAR" => format!("extract(year FROM {at})"),
                    "CALENDAR_QUARTER" => format!("extract(quarter FROM {at})"),
                    "MONTH" | "CALENDAR_MONTH" => format!("extract(month FROM {at})"),
                    // ISO 8601 weeks, as PostgreSQL's `week`.
                    "WEEK_IN_YEAR" => format!("extract(week FROM {at})"),
                    "DAY" | "DAY_IN_MONTH" => format!("extract(day FROM {at})"),
                    // 1 = Sunday ... 7 = Saturday.
                    "DAY_IN_WEEK" => format!("(extract(dow FROM {at}) + 1)"),
                    _ => format!("extract(hour FROM ({at})::timestamp)"),
                };
                Some(Frag::new(format!("({sql})::bigint"), Type::Integer))
            }
            "ISNEW" | "ISCHANGED" | "PRIORVALUE" => {
                let prior = match (&self.prior, cx.purpose) {
                    (Some(prior), crate::compile::Purpose::Assert) => prior.clone(),
                    _ => {
                        self.report(diag::prior_only_in_rules(name, span));
                        return None;
                    }
                };
                if name == "ISNEW" {
                    if !self.arity(name, items, (0, 0), "no arguments", span) {
                        return None;
                    }
                    let sql = match prior {
                        crate::PriorRow::Create => "TRUE".to_owned(),
                        crate::PriorRow::Row(alias) => format!("({alias}.\"id\" IS NULL)"),
                    };
                    return Some(Frag::new(sql, Type::Boolean));
                }
                if !self.arity(name, items, (1, 1), "one argument (a stored field)", span) {
                    return None;
                }
                let field = &items[0];
                let (column, ty) = self.stored_field(row, field)?;
                let sql = match (name, prior) {
                    ("ISCHANGED", crate::PriorRow::Create) => "FALSE".to_owned(),
                    ("ISCHANGED", crate::PriorRow::Row(alias)) => {
                        let now = self.expr(level, row, field, cx, None)?;
                        format!(
                            "({alias}.\"id\" IS NOT NULL AND {} IS DISTINCT FROM {alias}.{column})",
                            now.sql
                        )
                    }
                    (_, crate::PriorRow::Create) => format!("NULL::{}", ty.sql_type()),
                    (_, crate::PriorRow::Row(alias)) => format!("{alias}.{column}"),
                };
                let result = if name == "ISCHANGED" {
                    Type::Boolean
                } else {
                    ty
                };
                Some(Frag::new(sql, result))
            }
            "DAY_ONLY" => {
                let value = self.expr(level, row, &items[0], cx, Some(Type::Datetime))?;
                match value.ty {
                    Type::Null => Some(Frag::new("NULL::date".to_owned(), Type::Date)),
                    Type::Datetime => {
                        let zone = self.zone(cx);
                        Some(Frag::new(local_date(&value, &zone), Type::Date))
                    }
                    other => {
                        self.report(diag::argument_type(
                            name,
                            1,
                            "a datetime",
                            other,
                            items[0].span,
                        ));
                        None
                    }
                }
            }
            _ => None,
        }
    }

    /// The quoted column and type of the stored field an `ISCHANGED` or `PRIORVALUE`
    /// argument names: a bare key of a stored (scalar or lookup) field of the row's object.
    /// `TOLABEL`: each key replaced by its label, looked up in two bound arrays (keys and
    /// labels, in the order of the choices); a key that is no longer a choice shows as itself.
    fn labels_of(&mut self, value: Frag, choices: &[hf_model::PicklistValue]) -> Frag {
        let array = |texts: Vec<&str>| {
            let json = serde_json::json!(texts).to_string();
            hf_model::ScalarType::Multipicklist
                .parse_json(&json)
                .ok()
                .flatten()
                .unwrap_or_else(|| "{}".to_owned())
        };
        let keys = array(choices.iter().map(|choice| choice.key.as_str()).collect());
        let labels = array(choices.iter().map(|choice| choice.label.as_str()).collect());
        let keys = self.literal(Type::Multipicklist, keys);
        let labels = self.literal(Type::Multipicklist, labels);
        let label =
            |key: &str| format!("COALESCE(({labels})[array_position({keys}, {key})], {key})");
        match value.ty {
            Type::Multipicklist => {
                let each = label("\"hf_choice\".\"key\"");
                Frag::new(
                    format!(
                        "(CASE WHEN {v} IS NULL THEN NULL ELSE ARRAY(SELECT {each} FROM \
                         unnest({v}) WITH ORDINALITY AS \"hf_choice\"(\"key\", \"ord\") \
                         ORDER BY \"hf_choice\".\"ord\") END)",
                        v = value.sql
                    ),
                    Type::Multipicklist,
                )
            }
            _ => Frag::new(label(&value.sql), Type::Text),
        }
    }

    fn stored_field(&mut self, row: &Row, arg: &Expr) -> Option<(String, Type)> {
        let ExprKind::Path(path) = &arg.kind else {
            self.report(diag::prior_needs_field(arg.span));
            return None;
        };
        let [key] = path.segments.as_slice() else {
            self.report(diag::prior_needs_field(arg.span));
            return None;
        };
        let field = self
            .model
            .effective_field(&row.object, &key.name)
            .map(|effective| effective.field)
            .filter(|field| field.is_stored());
        let Some(field) = field else {
            self.report(diag::prior_needs_field(arg.span));
            return None;
        };
        let ty = Type::from_scalar(field.value_type());
        Some((self.ident(&field.key), ty))
    }
}

/// The longest text LPAD and RPAD build.
const MAX_PAD: i64 = 10_000;
