//! The compiler's state, and how names become SQL: field paths through lookups (joins), the
//! tables behind an object (one table, or a `UNION ALL` over a hierarchy), and computed fields
//! (formulas inlined, rollups as correlated subqueries).
//!
//! Everything is compiled against a [`Row`]: an object and the SQL alias its record has in the
//! statement. A [`Level`] is one `SELECT` (the query, a rollup subquery, a child subquery) and
//! collects the `LEFT JOIN`s its paths need, each path prefix joined once. This is the single
//! place where metadata names become SQL identifiers, always through `hf_sql::quote_ident`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use hf_hoqs_syntax::ast::{Ident, Path, Span};
use hf_hoqs_syntax::functions::{check_function_names, did_you_mean};
use hf_hoqs_syntax::{parse_expression, Diagnostic};
use hf_model::{Field, FieldKind, FieldPath, Model, QualifiedName, RollupFunction, ScalarType};

use crate::diagnostics as diag;
use crate::params::{Params, RequestParams};
use crate::types::Type;
use crate::Error;

/// The system fields every record has, as written in expressions, with their columns.
pub(crate) const SYSTEM_FIELDS: [(&str, &str, Type); 5] = [
    ("id", "id", Type::Uuid),
    ("createdAt", "created_at", Type::Datetime),
    ("updatedAt", "updated_at", Type::Datetime),
    ("createdBy", "created_by", Type::Uuid),
    ("updatedBy", "updated_by", Type::Uuid),
];

/// How much SQL the inlining of formulas may produce for one statement; formulas that use
/// formulas twice could otherwise double the text at every level.
const MAX_EXPANDED_BYTES: usize = 1024 * 1024;

/// How many bytes of SQL fragments one compile may build, every fragment counted as it is made
/// (so an expression's text counts once for itself and once more in each expression around it).
/// Functions and operators paste an argument's SQL more than once (`LN(x)` is
/// `ln(CASE WHEN x > 0 THEN x END)`, `DATEVALUE(t)` holds `t` seven times), so nesting them
/// multiplies the text at every level: `LN(` twenty-six deep, 143 bytes of query, built
/// gigabytes and ended the process with an allocation failure. Counting what is built bounds the
/// time and memory of every such shape, present or future; a real query builds a few kilobytes.
const MAX_BUILT_BYTES: usize = 4 * 1024 * 1024;

/// When a budget was found spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Crossed {
    /// By the bytes just added.
    Now,
    /// Before them.
    Before,
}

/// Adds `added` bytes to a budget's `used`; `None` while within `limit`.
fn charge(used: &mut usize, limit: usize, added: usize) -> Option<Crossed> {
    let over_before = *used > limit;
    *used = used.saturating_add(added);
    match (over_before, *used > limit) {
        (_, false) => None,
        (false, true) => Some(Crossed::Now),
        (true, true) => Some(Crossed::Before),
    }
}

/// What an expression is for; decides whether parameters and aggregates are allowed and how
/// messages name the place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A HOQS query's condition or item.
    Query,
    /// A formula field.
    Formula,
    /// A rule's `assert`.
    Assert,
    /// A rollup's `filter`.
    RollupFilter,
}

impl Purpose {
    /// The place, for messages ("not allowed in a formula").
    pub(crate) fn place(self) -> &'static str {
        match self {
            Purpose::Query => "a query",
            Purpose::Formula => "a formula",
            Purpose::Assert => "a rule",
            Purpose::RollupFilter => "a rollup filter",
        }
    }
}

/// Whether aggregates may appear where an expression is compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Aggregates {
    /// In a select item, HAVING or ORDER BY.
    Allowed,
    /// Not here; the text names the place (`WHERE`, `a formula`).
    Forbidden(&'static str),
    /// Inside an aggregate's argument: another aggregate would nest.
    Inside,
}

/// The context an expression is compiled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cx {
    pub(crate) purpose: Purpose,
    pub(crate) aggregates: Aggregates,
}

impl Cx {
    /// A context of a purpose other than a query, where aggregates never make sense.
    pub(crate) fn computed(purpose: Purpose) -> Cx {
        Cx {
            purpose,
            aggregates: Aggregates::Forbidden(purpose.place()),
        }
    }
}

/// A compiled expression: its SQL text and its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Frag {
    pub(crate) sql: String,
    pub(crate) ty: Type,
}

impl Frag {
    pub(crate) fn new(sql: String, ty: Type) -> Frag {
        Frag { sql, ty }
    }

    /// This fragment with a type PostgreSQL can resolve where it needs one. An expression of
    /// type `null` (`NULL`, `COALESCE(NULL, NULL)`, `IF(c, NULL, NULL)`) is untyped or text to
    /// PostgreSQL, which refuses it as a condition ("argument of WHERE must be type boolean")
    /// and as a sort or group key ("non-integer constant in ORDER BY"): there it is cast to
    /// `ty` and takes that type. Other fragments are returned as they are.
    pub(crate) fn typed_as(self, ty: Type) -> Frag {
        if self.ty == Type::Null && ty != Type::Null {
            let sql = if self.sql == "NULL" {
                format!("NULL::{}", ty.sql_type())
            } else {
                format!("({})::{}", self.sql, ty.sql_type())
            };
            Frag::new(sql, ty)
        } else {
            self
        }
    }
}

/// A record that expressions refer to: its object and its quoted SQL alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) object: QualifiedName,
    pub(crate) alias: String,
    /// The lookup path from the level's root row to this row (`account.owner`); empty for the
    /// root. Joins are keyed by it, so each path is joined once.
    pub(crate) path: String,
}

/// One `SELECT`'s joins.
#[derive(Debug, Default)]
pub(crate) struct Level {
    /// ` LEFT JOIN ... AS "t1" ON ...`, in the order paths were first used.
    pub(crate) joins: String,
    by_path: HashMap<String, Row>,
}

/// The compiler of one statement (a query, or expressions for the records layer).
pub(crate) struct Compiler<'a> {
    pub(crate) model: &'a Model,
    pub(crate) params: Params,
    /// The request's parameters; `None` where parameters are not allowed at all.
    pub(crate) request: Option<&'a RequestParams>,
    pub(crate) diagnostics: Vec<Diagnostic>,
    internal: Option<Error>,
    next_alias: usize,
    /// The computed fields being compiled, innermost last, to catch a field computed from
    /// itself.
    computing: Vec<(QualifiedName, String)>,
    expanded_bytes: usize,
    /// What the fragments built so far add up to (see [`MAX_BUILT_BYTES`]).
    built_bytes: usize,
    relations: HashMap<QualifiedName, String>,
    /// The objects whose tables the compiled SQL reads, when asked for (the records layer
    /// needs to know whether a record's fields read its own table); `None` for queries, which
    /// do not need it.
    pub(crate) tables_read: Option<HashSet<QualifiedName>>,
    /// The request's IANA time zone for date literals, `TODAY()` and date functions in a
    /// query; `None` is UTC (and formulas, rules and filters are always UTC).
    pub(crate) time_zone: Option<&'a str>,
    /// The caller, for `$User.id` and `$User.name`; `None` where there is none.
    pub(crate) caller: Option<crate::Caller>,
    /// Whether `$User` reads the caller from the transaction's settings (rules, whose
    /// statement is shared by every caller) rather than from [`Compiler::caller`].
    pub(crate) session_caller: bool,
    /// The stored record a rule's `ISNEW`, `ISCHANGED` and `PRIORVALUE` read; `None` outside
    /// the records layer's rules.
    pub(crate) prior: Option<crate::PriorRow>,
    /// Keyset paging of the top-level query (see [`crate::QueryOptions::page`]).
    pub(crate) page: Option<Option<&'a [Box<serde_json::value::RawValue>]>>,
    /// The LIMIT of the top-level query, once compiled.
    pub(crate) page_size: u64,
}

impl<'a> Compiler<'a> {
    pub(crate) fn new(
        model: &'a Model,
        params: Params,
        request: Option<&'a RequestParams>,
        alias_prefix_start: usize,
    ) -> Compiler<'a> {
        Compiler {
            model,
            params,
            request,
            diagnostics: Vec::new(),
            internal: None,
            next_alias: alias_prefix_start,
            computing: Vec::new(),
            expanded_bytes: 0,
            built_bytes: 0,
            relations: HashMap::new(),
            tables_read: None,
            time_zone: None,
            caller: None,
            session_caller: false,
            prior: None,
            page: None,
            page_size: 0,
        }
    }

    /// The SQL of the time zone a context evaluates dates in: the request's (a bound
    /// parameter) in a query, `'UTC'` elsewhere.
    pub(crate) fn zone(&mut self, cx: Cx) -> String {
        match (self.time_zone, cx.purpose) {
            (Some(zone), Purpose::Query) if zone != "UTC" => {
                self.literal(Type::Text, zone.to_owned())
            }
            _ => "'UTC'".to_owned(),
        }
    }

    /// Records a problem found in the text.
    pub(crate) fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// Records a failure that is not the text's fault (a key PostgreSQL cannot take).
    pub(crate) fn fail(&mut self, error: Error) {
        if self.internal.is_none() {
            self.internal = Some(error);
        }
    }

    /// The internal failure, if any; checked once at the end of a compilation.
    pub(crate) fn take_internal(&mut self) -> Option<Error> {
        self.internal.take()
    }

    /// A quoted identifier; a name PostgreSQL cannot take is an internal failure (keys are
    /// validated long before they get here).
    pub(crate) fn ident(&mut self, name: &str) -> String {
        match hf_sql::quote_ident(name) {
            Ok(quoted) => quoted,
            Err(error) => {
                self.fail(Error::Identifier(error));
                "\"?\"".to_owned()
            }
        }
    }

    /// `alias.column`: a column of a row, its name quoted (a name PostgreSQL cannot take is an
    /// internal failure, as in [`Compiler::ident`]).
    pub(crate) fn column(&mut self, row: &Row, name: &str) -> String {
        let mut sql = String::with_capacity(row.alias.len() + name.len() + 3);
        sql.push_str(&row.alias);
        sql.push('.');
        if let Err(error) = hf_sql::push_quoted_ident(&mut sql, name) {
            self.fail(Error::Identifier(error));
            sql.push_str("\"?\"");
        }
        sql
    }

    /// A fresh quoted table alias (`"t3"`), unique in the statement.
    pub(crate) fn alias(&mut self) -> String {
        let name = format!("t{}", self.next_alias);
        self.next_alias += 1;
        self.ident(&name)
    }

    /// Adds a value as a parameter and returns `$n::type`.
    pub(crate) fn literal(&mut self, ty: Type, text: String) -> String {
        let mut out = String::with_capacity(24);
        self.push_literal(&mut out, ty, text);
        out
    }

    /// [`Compiler::literal`], written at the end of `out`.
    pub(crate) fn push_literal(&mut self, out: &mut String, ty: Type, text: String) {
        let number = self.params.literal(ty, text);
        let _ = write!(out, "${number}::{}", ty.sql_type());
    }

    // -- objects and tables -------------------------------------------------------------------

    /// The SQL relation holding an object's records: its table, or for an object with concrete
    /// subtypes (or an abstract one) a `UNION ALL` of every concrete table projecting the
    /// object's own effective stored fields, cached per statement.
    pub(crate) fn relation(&mut self, object: &QualifiedName) -> String {
        let model = self.model;
        let concrete = model.object(object).is_some_and(|o| !o.is_abstract);
        let subtypes = has_subtypes(model, object);
        if concrete && !subtypes {
            // Most objects: one table, quoted again more cheaply than found in the cache.
            return self.table(object);
        }
        if let Some(sql) = self.relations.get(object) {
            return sql.clone();
        }
        let mut tables = Vec::new();
        if concrete {
            tables.push(object.clone());
        }
        if subtypes {
            tables.extend(model.concrete_subtypes(object));
        }
        let sql = if let [only] = tables.as_slice() {
            self.table(only)
        } else {
            let mut columns = vec![("id".to_owned(), Type::Uuid)];
            for effective in model.effective_fields(object) {
                if effective.field.is_stored() {
                    let ty = Type::from_scalar(effective.field.value_type());
                    columns.push((effective.field.key.clone(), ty));
                }
            }
            columns.push(("created_at".to_owned(), Type::Datetime));
            columns.push(("updated_at".to_owned(), Type::Datetime));
            columns.push(("created_by".to_owned(), Type::Uuid));
            columns.push(("updated_by".to_owned(), Type::Uuid));
            if tables.is_empty() {
                let nulls: Vec<String> = columns
                    .iter()
                    .map(|(name, ty)| format!("NULL::{} AS {}", ty.sql_type(), self.ident(name)))
                    .collect();
                format!("(SELECT {} WHERE false)", nulls.join(", "))
            } else {
                let list: Vec<String> = columns.iter().map(|(name, _)| self.ident(name)).collect();
                let list = list.join(", ");
                let branches: Vec<String> = tables
                    .iter()
                    .map(|table| format!("SELECT {list} FROM {}", self.table(table)))
                    .collect();
                format!("({})", branches.join(" UNION ALL "))
            }
        };
        self.relations.insert(object.clone(), sql.clone());
        sql
    }

    fn table(&mut self, object: &QualifiedName) -> String {
        if let Some(read) = &mut self.tables_read {
            if !read.contains(object) {
                read.insert(object.clone());
            }
        }
        match hf_sql::quote_qualified(&object.module, &object.object) {
            Ok(quoted) => quoted,
            Err(error) => {
                self.fail(Error::Identifier(error));
                "\"?\"".to_owned()
            }
        }
    }

    /// Resolves `<module>.<object>` written in a query.
    pub(crate) fn resolve_object(
        &mut self,
        module: &Ident,
        object: &Ident,
    ) -> Option<QualifiedName> {
        let model = self.model;
        let Some(found) = model.module(&module.name) else {
            let keys: Vec<&str> = model.modules.keys().map(String::as_str).collect();
            let candidate = did_you_mean(&module.name, &keys);
            self.report(diag::unknown_module(&module.name, candidate, module.span));
            return None;
        };
        if !found.objects.contains_key(&object.name) {
            let keys: Vec<&str> = found.objects.keys().map(String::as_str).collect();
            let candidate = did_you_mean(&object.name, &keys);
            self.report(diag::unknown_object(
                &module.name,
                &object.name,
                candidate,
                object.span,
            ));
            return None;
        }
        Some(QualifiedName::new(&module.name, &object.name))
    }

    fn unknown_field(&mut self, object: &QualifiedName, field: &Ident) {
        let model = self.model;
        let effective = model.effective_fields(object);
        let mut names: Vec<&str> = effective.iter().map(|e| e.field.key.as_str()).collect();
        names.extend(SYSTEM_FIELDS.iter().map(|(name, _, _)| *name));
        let candidate = did_you_mean(&field.name, &names);
        self.report(diag::unknown_field(
            &field.name,
            object,
            candidate,
            field.span,
        ));
    }

    // -- paths ----------------------------------------------------------------------------

    /// Compiles a field path (`amount`, `account.owner.name`) read from `row`.
    pub(crate) fn path(&mut self, level: &mut Level, row: &Row, path: &Path) -> Option<Frag> {
        let (last, lookups) = path.segments.split_last()?;
        // `account.id` is the lookup's own column: no join needed.
        let (last, lookups) = match lookups.split_last() {
            Some((lookup, before)) if last.name == "id" => (lookup, before),
            _ => (last, lookups),
        };
        let via_lookup = !std::ptr::eq(last, path.segments.last()?);
        let mut joined: Option<Row> = None;
        for segment in lookups {
            let next = self.follow(level, joined.as_ref().unwrap_or(row), segment)?;
            joined = Some(next);
        }
        let current = joined.as_ref().unwrap_or(row);
        if via_lookup {
            self.lookup_target(&current.object, last)?;
            let column = self.column(current, &last.name);
            return Some(Frag::new(column, Type::Uuid));
        }
        self.field_value(level, current, last, path.span)
    }

    /// The target of a lookup field of `object`, or a diagnostic if the field is not one.
    pub(crate) fn lookup_target(
        &mut self,
        object: &QualifiedName,
        field: &Ident,
    ) -> Option<QualifiedName> {
        if SYSTEM_FIELDS.iter().any(|(name, _, _)| *name == field.name) {
            self.report(diag::not_a_lookup(
                &field.name,
                "a system field",
                object,
                field.span,
            ));
            return None;
        }
        let Some(found) = find_field(self.model, object, &field.name) else {
            self.unknown_field(object, field);
            return None;
        };
        match &found.kind {
            FieldKind::Lookup { target, .. } => Some(target.clone()),
            FieldKind::Scalar { field_type, .. } => {
                let what = format!("a {field_type} field");
                self.report(diag::not_a_lookup(&field.name, &what, object, field.span));
                None
            }
            other => {
                let what = format!("a {} field", other.name());
                self.report(diag::not_a_lookup(&field.name, &what, object, field.span));
                None
            }
        }
    }

    /// Joins the record a lookup of `row` points at (once per path and level).
    fn follow(&mut self, level: &mut Level, row: &Row, field: &Ident) -> Option<Row> {
        let target = self.lookup_target(&row.object, field)?;
        let path = if row.path.is_empty() {
            field.name.clone()
        } else {
            format!("{}.{}", row.path, field.name)
        };
        if let Some(joined) = level.by_path.get(&path) {
            return Some(joined.clone());
        }
        let alias = self.alias();
        let relation = self.relation(&target);
        let id = self.ident("id");
        let column = self.ident(&field.name);
        level.joins.push_str(&format!(
            " LEFT JOIN {relation} AS {alias} ON {alias}.{id} = {}.{column}",
            row.alias
        ));
        let joined = Row {
            object: target,
            alias,
            path: path.clone(),
        };
        level.by_path.insert(path, joined.clone());
        Some(joined)
    }

    /// The value of one field (stored, computed or system) of `row`. `span` is where the query
    /// names it, where problems inside a computed field's own text are reported.
    pub(crate) fn field_value(
        &mut self,
        level: &mut Level,
        row: &Row,
        field: &Ident,
        span: Span,
    ) -> Option<Frag> {
        if let Some((_, column, ty)) = SYSTEM_FIELDS
            .iter()
            .find(|(name, _, _)| *name == field.name)
        {
            return Some(Frag::new(self.column(row, column), *ty));
        }
        let Some(found) = find_field(self.model, &row.object, &field.name) else {
            self.unknown_field(&row.object, field);
            return None;
        };
        match &found.kind {
            FieldKind::Scalar { field_type, .. } => Some(Frag::new(
                self.column(row, &field.name),
                Type::from_scalar(*field_type),
            )),
            FieldKind::Lookup { .. } => Some(Frag::new(self.column(row, &field.name), Type::Uuid)),
            FieldKind::Formula {
                formula,
                field_type,
            } => self.formula(level, row, &field.name, formula, *field_type, span),
            FieldKind::Rollup {
                function,
                source,
                field: aggregated,
                filter,
                field_type,
            } => {
                let rollup = Rollup {
                    key: &field.name,
                    function: *function,
                    source,
                    aggregated: aggregated.as_deref(),
                    filter: filter.as_deref(),
                    declared: Type::from_scalar(*field_type),
                };
                self.rollup(row, &rollup, span)
            }
        }
    }

    // -- computed fields ---------------------------------------------------------------------

    /// Starts computing a field; `false` (with a diagnostic) when it is already being computed.
    fn enter_computed(&mut self, object: &QualifiedName, field: &str, span: Span) -> bool {
        let key = (object.clone(), field.to_owned());
        if self.computing.contains(&key) {
            self.report(diag::field_cycle(field, object, span));
            return false;
        }
        self.computing.push(key);
        true
    }

    /// Ends computing a field and rewrites the diagnostics found inside its text (whose spans
    /// point into that text, not the query) into one located where the query names the field.
    fn leave_computed(&mut self, kind: &str, before: usize, span: Span) {
        let Some((object, field)) = self.computing.pop() else {
            return;
        };
        let inner: Vec<Diagnostic> = self.diagnostics.drain(before..).collect();
        for problem in inner {
            let message = diag::broken_field(kind, &field, &object, &problem.message, span);
            self.diagnostics.push(Diagnostic {
                code: problem.code,
                ..message
            });
        }
    }

    /// Counts inlined SQL against [`MAX_EXPANDED_BYTES`]; `false` (reported once) when over.
    fn within_budget(&mut self, added: usize, span: Span) -> bool {
        let over = charge(&mut self.expanded_bytes, MAX_EXPANDED_BYTES, added);
        self.settle(over, span)
    }

    /// Starts the size budgets afresh: an [`crate::ExprCompiler`] compiles each of an object's
    /// fields and rules with one compiler, and each of them has the whole budget (sharing it,
    /// the last fields of a large object would find it spent and read as NULL).
    pub(crate) fn new_budgets(&mut self) {
        self.expanded_bytes = 0;
        self.built_bytes = 0;
    }

    /// Counts a fragment just built against [`MAX_BUILT_BYTES`]; `false` (reported once) when
    /// over, and the expressions around it are then not built.
    pub(crate) fn within_built_budget(&mut self, added: usize, span: Span) -> bool {
        let over = charge(&mut self.built_bytes, MAX_BUILT_BYTES, added);
        self.settle(over, span)
    }

    /// `true` within a budget; over it, `false`, and the diagnostic once, where it ran out.
    fn settle(&mut self, over: Option<Crossed>, span: Span) -> bool {
        match over {
            None => true,
            Some(crossed) => {
                if crossed == Crossed::Now {
                    self.report(diag::too_complex(span));
                }
                false
            }
        }
    }

    /// Inlines a formula field, compiled against the same row, as its declared type.
    fn formula(
        &mut self,
        level: &mut Level,
        row: &Row,
        key: &str,
        text: &str,
        declared: ScalarType,
        span: Span,
    ) -> Option<Frag> {
        if !self.enter_computed(&row.object, key, span) {
            return None;
        }
        let before = self.diagnostics.len();
        let declared = Type::from_scalar(declared);
        let compiled = self.computed_text(level, row, text, Purpose::Formula, Some(declared));
        self.leave_computed("formula", before, span);
        let frag = compiled?;
        if !frag.ty.fits(declared) {
            self.report(diag::formula_type(
                key,
                &row.object,
                declared,
                frag.ty,
                span,
            ));
            return None;
        }
        if !self.within_budget(frag.sql.len(), span) {
            return None;
        }
        Some(cast_to(frag, declared))
    }

    /// Parses and compiles the text of a formula or filter in its own context.
    fn computed_text(
        &mut self,
        level: &mut Level,
        row: &Row,
        text: &str,
        purpose: Purpose,
        hint: Option<Type>,
    ) -> Option<Frag> {
        let parsed = parse_expression(text);
        let Some(expr) = parsed.expr else {
            self.diagnostics.extend(parsed.diagnostics);
            return None;
        };
        let unknown = check_function_names(&expr);
        if !unknown.is_empty() {
            self.diagnostics.extend(unknown);
            return None;
        }
        self.expr(level, row, &expr, Cx::computed(purpose), hint)
    }

    /// A rollup: a correlated aggregate over the source object's records whose lookup points at
    /// `row`. `count` and `sum` of no records are 0; `min`, `max` and `avg` of none are NULL.
    fn rollup(&mut self, row: &Row, rollup: &Rollup<'_>, span: Span) -> Option<Frag> {
        if !self.enter_computed(&row.object, rollup.key, span) {
            return None;
        }
        let before = self.diagnostics.len();
        let compiled = self.rollup_body(row, rollup, span);
        self.leave_computed("rollup", before, span);
        let sql = compiled?;
        if !self.within_budget(sql.len(), span) {
            return None;
        }
        Some(Frag::new(
            format!("({sql})::{}", rollup.declared.sql_type()),
            rollup.declared,
        ))
    }

    fn rollup_body(&mut self, row: &Row, rollup: &Rollup<'_>, span: Span) -> Option<String> {
        let source = &rollup.source.object;
        let lookup = Ident {
            name: rollup.source.field.clone(),
            span,
        };
        self.lookup_target(source, &lookup)?;
        let alias = self.alias();
        let mut level = Level::default();
        let inner = Row {
            object: source.clone(),
            alias: alias.clone(),
            path: String::new(),
        };
        let value = match rollup.aggregated {
            Some(aggregated) => {
                let field = Ident {
                    name: aggregated.to_owned(),
                    span,
                };
                let value = self.field_value(&mut level, &inner, &field, span)?;
                let fits = match rollup.function {
                    RollupFunction::Count => true,
                    RollupFunction::Sum | RollupFunction::Avg => value.ty.is_numeric(),
                    RollupFunction::Min | RollupFunction::Max => value.ty.is_ordered(),
                };
                if !fits {
                    let function = rollup.function.as_str();
                    self.report(diag::rollup_field_type(
                        function, aggregated, value.ty, span,
                    ));
                    return None;
                }
                Some(value.sql)
            }
            None => None,
        };
        let aggregate = match (rollup.function, value) {
            (RollupFunction::Count, None) => "count(*)".to_owned(),
            (RollupFunction::Count, Some(value)) => format!("count({value})"),
            (RollupFunction::Sum, Some(value)) => format!("coalesce(sum({value}), 0)"),
            (RollupFunction::Avg, Some(value)) => format!("avg({value})"),
            (RollupFunction::Min, Some(value)) => format!("min({value})"),
            (RollupFunction::Max, Some(value)) => format!("max({value})"),
            // Validation requires a field for every function but count.
            (_, None) => "NULL".to_owned(),
        };
        let filter = match rollup.filter {
            Some(text) => {
                let frag = self.computed_text(
                    &mut level,
                    &inner,
                    text,
                    Purpose::RollupFilter,
                    Some(Type::Boolean),
                )?;
                if !frag.ty.fits(Type::Boolean) {
                    self.report(diag::expected_boolean("a rollup filter", frag.ty, span));
                    return None;
                }
                format!(" AND ({})", frag.sql)
            }
            None => String::new(),
        };
        let relation = self.relation(source);
        let column = self.ident(&rollup.source.field);
        let id = self.ident("id");
        Some(format!(
            "SELECT {aggregate} FROM {relation} AS {alias}{} WHERE {alias}.{column} = {}.{id}{filter}",
            level.joins, row.alias
        ))
    }
}

/// The effective field `key` of `object` (declared on it or inherited), found by walking up
/// the `extends` chain without building the whole field list: this runs for every name of
/// every query. As in `Model::effective_fields`, a key declared twice in the chain resolves to
/// the root-most declaration; the walk stops at a missing parent or after a cycle's length.
pub(crate) fn find_field<'m>(
    model: &'m Model,
    object: &QualifiedName,
    key: &str,
) -> Option<&'m Field> {
    let mut found = None;
    let mut current = model.object(object);
    let mut hops = 0;
    while let Some(here) = current {
        if let Some(field) = here.fields.get(key) {
            found = Some(field);
        }
        hops += 1;
        if hops > MAX_CHAIN {
            break;
        }
        current = here
            .extends
            .as_ref()
            .and_then(|parent| model.object(parent));
    }
    found
}

/// More `extends` hops than any valid model has (validation refuses cycles).
const MAX_CHAIN: usize = 256;

/// Whether any object extends `object`; most objects have no subtypes, and then their records
/// are in their own table alone.
fn has_subtypes(model: &Model, object: &QualifiedName) -> bool {
    model
        .modules
        .values()
        .flat_map(|module| module.objects.values())
        .any(|candidate| candidate.extends.as_ref() == Some(object))
}

/// A rollup field's definition, borrowed from the model.
struct Rollup<'m> {
    key: &'m str,
    function: RollupFunction,
    source: &'m FieldPath,
    aggregated: Option<&'m str>,
    filter: Option<&'m str>,
    declared: Type,
}

/// Casts a fragment to `ty` unless it already has that type.
pub(crate) fn cast_to(frag: Frag, ty: Type) -> Frag {
    if frag.ty == ty {
        frag
    } else {
        Frag::new(format!("({})::{}", frag.sql, ty.sql_type()), ty)
    }
}
