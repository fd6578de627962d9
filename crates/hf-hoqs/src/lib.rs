//! HOQS type checker and SQL compiler: the meaning of the expression language and of HOQS
//! queries against a metadata [`Model`], compiled to parameterised PostgreSQL.
//!
//! **API boundary.** This crate knows nothing of HTTP or of a database connection. It offers:
//! - [`compile_query`]: HOQS text and request parameters to one SQL statement
//!   ([`CompiledQuery`]) that returns one JSON object (as text) per record, or to located
//!   [`Diagnostic`]s (syntax, unknown names, types, LIMIT);
//! - [`ExprCompiler`]: expressions (formulas, rule asserts, rollup filters) compiled against a
//!   row source of the caller's choosing, such as a CTE holding the values a record would have,
//!   so records, rules and queries share one meaning of every formula.
//!
//! Invariants: values (literals, parameters, even result keys) are always bind parameters,
//! sent as text and cast in the SQL (`$2::numeric`); every identifier goes through
//! `hf_sql::quote_ident`; a lookup path is joined once per `SELECT`; formula fields are inlined
//! and rollups are correlated subqueries; queries on a parent object read the `UNION ALL` of
//! its concrete tables. Problems in the text are diagnostics, never `Err` or panics; `Err`
//! means the model itself cannot be turned into SQL.
//!
//! The language is documented in docs/hoqs.md and docs/formulas.md. Example:
//!
//! ```
//! # use hf_model::Model;
//! let model = Model::default();
//! let out = hf_hoqs::compile_query(&model, "SELECT name FROM crm.account", &Default::default())
//!     .unwrap();
//! assert_eq!(out.diagnostics[0].code.as_str(), "HOQS_UNKNOWN_NAME");
//! ```

mod compile;
mod diagnostics;
mod expr;
mod functions;
pub mod paging;
mod params;
mod query;
mod types;

use std::collections::HashSet;

use hf_hoqs_syntax::functions::{check_function_names, check_query_function_names};
use hf_hoqs_syntax::{parse_expression, parse_query};
use hf_model::{Model, QualifiedName, ScalarType};

pub use hf_hoqs_syntax::{Code, Diagnostic};
pub use params::{Params, RequestParams};
pub use query::{DEFAULT_LIMIT, MAX_LIMIT, MAX_ORDER_ITEMS, MAX_SELECT_ITEMS};
pub use types::Type;

use compile::{cast_to, Compiler, Cx, Level, Purpose, Row};

/// Why compilation could not run at all (as opposed to problems in the text, which are
/// [`Diagnostic`]s).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key of the model cannot be an SQL identifier (longer than 63 bytes, or holding NUL).
    /// Model validation rejects such keys, so this means an unvalidated model was used.
    #[error("a metadata key cannot be used as an SQL identifier: {0}")]
    Identifier(#[from] hf_sql::Error),
    /// A paging cursor matched its query's binding but its values do not fit the sort keys
    /// (a cursor built by hand): the request's fault, `400 INVALID_CURSOR`.
    #[error("the cursor's values do not fit the query's sort keys")]
    InvalidCursor,
    /// The row alias given to [`ExprCompiler::new`] starts like the aliases the compiler makes
    /// (`t` and digits), so the statement could name two things alike.
    #[error("the row alias `{alias}` clashes with generated aliases (`t0`, `t1`, ...)")]
    AliasClash {
        /// The alias given.
        alias: String,
    },
}

/// A query compiled to one statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledQuery {
    /// The statement; each row has one `text` column holding one record's JSON object.
    pub sql: String,
    /// The values of `$1, $2, ...`, each bound as text (`None` is NULL).
    pub params: Vec<Option<String>>,
    /// The records' keys, in select-list order (for tables and headers).
    pub keys: Vec<String>,
    /// For a paged query, the page size: the statement returns up to one record more (telling
    /// whether another page follows) and, in a second column, each record's sort values as a
    /// JSON array for [`paging::Binding::encode`].
    pub page_size: Option<u64>,
}

/// The outcome of [`compile_query`]: the statement, or the problems (never both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryOutput {
    /// The compiled statement when the query has no problem.
    pub query: Option<CompiledQuery>,
    /// Every problem found, in source order, each with a span into the query text.
    pub diagnostics: Vec<Diagnostic>,
}

/// The principal a statement runs for: `$User.id` and `$User.name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The principal's id (a uuid).
    pub id: String,
    /// The principal's name (its database role).
    pub name: String,
}

/// What a validation rule's `ISNEW()`, `ISCHANGED(f)` and `PRIORVALUE(f)` read: the record as
/// stored before the write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PriorRow {
    /// A create: there is no stored record (`ISNEW()` is TRUE, `ISCHANGED` FALSE, `PRIORVALUE`
    /// NULL).
    Create,
    /// The stored record is the row of this quoted alias in the write statement, with the
    /// object's columns; when it has no row (its `id` is NULL, an upsert that creates) the
    /// record is new.
    Row(String),
}

/// What a query is compiled with besides its text.
#[derive(Clone, Copy, Debug)]
pub struct QueryOptions<'a> {
    /// The values of `:name` parameters.
    pub params: &'a RequestParams,
    /// The IANA time zone date literals, `TODAY()` and the date functions of datetimes are
    /// evaluated in; the caller has checked it is one PostgreSQL knows. `None` is UTC.
    pub time_zone: Option<&'a str>,
    /// The caller, for `$User`; `None` makes `$User` an error.
    pub caller: Option<&'a Caller>,
    /// Keyset paging: `None` for a plain query; `Some(None)` for the first page; `Some(values)`
    /// for the page after the record with these sort values (from [`paging::Binding::decode`]).
    pub page: Option<Option<&'a [Box<serde_json::value::RawValue>]>>,
}

/// Parses, type-checks and compiles a HOQS query against `model`, with the request's `params`
/// (`:name` → JSON value), in UTC and without a caller.
pub fn compile_query(
    model: &Model,
    source: &str,
    params: &RequestParams,
) -> Result<QueryOutput, Error> {
    let options = QueryOptions {
        params,
        time_zone: None,
        caller: None,
        page: None,
    };
    compile_query_with(model, source, options)
}

/// Parses, type-checks and compiles a HOQS query against `model` with its [`QueryOptions`].
pub fn compile_query_with(
    model: &Model,
    source: &str,
    options: QueryOptions<'_>,
) -> Result<QueryOutput, Error> {
    let params = options.params;
    let parsed = parse_query(source);
    let Some(query) = parsed.query else {
        return Ok(problems(parsed.diagnostics));
    };
    let unknown = check_query_function_names(&query);
    if !unknown.is_empty() {
        return Ok(problems(unknown));
    }
    let mut compiler = Compiler::new(model, Params::new(), Some(params), 0);
    compiler.time_zone = options.time_zone;
    compiler.caller = options.caller.cloned();
    compiler.page = options.page;
    let compiled = compiler.top_query(&query);
    if let Some(error) = compiler.take_internal() {
        return Err(error);
    }
    match compiled {
        Some((sql, keys)) if compiler.diagnostics.is_empty() => Ok(QueryOutput {
            query: Some(CompiledQuery {
                sql,
                page_size: compiler.page.map(|_| compiler.page_size),
                params: compiler.params.into_values(),
                keys,
            }),
            diagnostics: Vec::new(),
        }),
        _ => Ok(problems(compiler.diagnostics)),
    }
}

fn problems(mut diagnostics: Vec<Diagnostic>) -> QueryOutput {
    diagnostics.sort_by_key(|diagnostic| (diagnostic.span.start, diagnostic.span.end));
    diagnostics.dedup();
    QueryOutput {
        query: None,
        diagnostics,
    }
}

/// What an expression compiled by [`ExprCompiler::compile`] is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExprUse {
    /// A formula field of this declared type; the result is converted to it.
    Formula(ScalarType),
    /// A rule's `assert`: boolean. A rule fails when its assert is FALSE; NULL passes, as a SQL
    /// CHECK constraint does (docs/formulas.md).
    Assert,
    /// A rollup's `filter`: boolean; a record counts when it is TRUE.
    RollupFilter,
}

/// An expression compiled against the row source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledExpr {
    /// The SQL expression; it reads the row through its alias and the joins of
    /// [`ExprCompiler::finish`].
    pub sql: String,
    /// Its type.
    pub ty: Type,
}

/// The outcome of compiling one expression: the SQL, or the problems located in its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprOutput {
    /// The compiled expression when its text has no problem.
    pub expr: Option<CompiledExpr>,
    /// The problems, with spans into the expression's text.
    pub diagnostics: Vec<Diagnostic>,
}

/// Compiles expressions against one record of an object that the caller's SQL names by an
/// alias: a table, or a CTE of the values a record would have after a write, e.g.
///
/// ```text
/// WITH "new" AS (SELECT $1::numeric AS "amount", $2::bigint AS "probability", ...)
/// SELECT <assert 1>, <assert 2> FROM "new" <joins>
/// ```
///
/// The row source must have the object's stored columns (`id`, the stored effective fields,
/// `created_at`, `updated_at`) under their column names. Lookup paths (`account.name`) add
/// `LEFT JOIN`s, each path once for all expressions, which [`ExprCompiler::finish`] returns to
/// put after the row source. Values go into the [`Params`] given, after any the caller pushed.
pub struct ExprCompiler<'m> {
    compiler: Compiler<'m>,
    level: Level,
    row: Row,
}

impl<'m> ExprCompiler<'m> {
    /// Starts compiling against `object`'s row named `row_alias` (unquoted; it must not look
    /// like `t0`, `t1`, ..., which the compiler uses for joins and subqueries).
    pub fn new(
        model: &'m Model,
        object: &QualifiedName,
        row_alias: &str,
        params: Params,
    ) -> Result<ExprCompiler<'m>, Error> {
        let digits = row_alias.strip_prefix('t').unwrap_or("");
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::AliasClash {
                alias: row_alias.to_owned(),
            });
        }
        let alias = hf_sql::quote_ident(row_alias)?;
        let mut compiler = Compiler::new(model, params, None, 0);
        compiler.tables_read = Some(HashSet::new());
        Ok(ExprCompiler {
            compiler,
            level: Level::default(),
            row: Row {
                object: object.clone(),
                alias,
                path: String::new(),
            },
        })
    }

    /// Lets rules read the stored record before the write (`ISNEW()`, `ISCHANGED(f)`,
    /// `PRIORVALUE(f)`) and the caller from the transaction's settings (`$User.id` is
    /// `hf.caller_id`, `$User.name` the current role), so one statement serves every caller.
    pub fn for_rules(mut self, prior: PriorRow) -> ExprCompiler<'m> {
        self.compiler.prior = Some(prior);
        self.compiler.session_caller = true;
        self
    }

    /// Compiles one expression's text for `usage`.
    pub fn compile(&mut self, source: &str, usage: ExprUse) -> Result<ExprOutput, Error> {
        self.compiler.new_budgets();
        let parsed = parse_expression(source);
        let Some(expr) = parsed.expr else {
            return Ok(expr_problems(parsed.diagnostics));
        };
        let unknown = check_function_names(&expr);
        if !unknown.is_empty() {
            return Ok(expr_problems(unknown));
        }
        let before = self.compiler.diagnostics.len();
        let (purpose, hint) = match usage {
            ExprUse::Formula(declared) => (Purpose::Formula, Some(Type::from_scalar(declared))),
            ExprUse::Assert => (Purpose::Assert, Some(Type::Boolean)),
            ExprUse::RollupFilter => (Purpose::RollupFilter, Some(Type::Boolean)),
        };
        let cx = Cx::computed(purpose);
        let compiled = match usage {
            ExprUse::Formula(declared) => {
                let declared = Type::from_scalar(declared);
                let frag = self
                    .compiler
                    .expr(&mut self.level, &self.row, &expr, cx, hint);
                frag.and_then(|frag| {
                    if frag.ty.fits(declared) {
                        Some(cast_to(frag, declared))
                    } else {
                        let message = format!(
                            "the formula gives {}, but the field is declared {declared}",
                            frag.ty
                        );
                        self.compiler.report(Diagnostic {
                            code: Code::TypeError,
                            message,
                            span: expr.span,
                        });
                        None
                    }
                })
            }
            ExprUse::Assert | ExprUse::RollupFilter => {
                let clause = if usage == ExprUse::Assert {
                    "a rule's assert"
                } else {
                    "a rollup filter"
                };
                self.compiler
                    .condition(&mut self.level, &self.row, &expr, cx, clause)
            }
        };
        if let Some(error) = self.compiler.take_internal() {
            return Err(error);
        }
        let diagnostics: Vec<Diagnostic> = self.compiler.diagnostics.drain(before..).collect();
        Ok(match compiled {
            Some(frag) if diagnostics.is_empty() => ExprOutput {
                expr: Some(CompiledExpr {
                    sql: frag.sql,
                    ty: frag.ty,
                }),
                diagnostics,
            },
            _ => expr_problems(diagnostics),
        })
    }

    /// The SQL of one effective field of the row (stored, formula or rollup) or a system
    /// field (`id`, `createdAt`, `updatedAt`); `None` when the object has no such field or
    /// its definition does not compile.
    pub fn field(&mut self, key: &str) -> Result<Option<CompiledExpr>, Error> {
        let ident = hf_hoqs_syntax::ast::Ident {
            name: key.to_owned(),
            span: Default::default(),
        };
        self.compiler.new_budgets();
        let before = self.compiler.diagnostics.len();
        let frag = self
            .compiler
            .field_value(&mut self.level, &self.row, &ident, ident.span);
        if let Some(error) = self.compiler.take_internal() {
            return Err(error);
        }
        let failed = self.compiler.diagnostics.len() > before;
        self.compiler.diagnostics.truncate(before);
        Ok(frag.filter(|_| !failed).map(|frag| CompiledExpr {
            sql: frag.sql,
            ty: frag.ty,
        }))
    }

    /// Whether the SQL compiled so far reads `object`'s table (through a lookup, a rollup or
    /// the relation of a supertype); the row source given to [`ExprCompiler::new`] does not
    /// count. A statement does not see its own writes, so a write whose returned record reads
    /// the written table must read it in a statement of its own.
    pub fn reads_table_of(&self, object: &QualifiedName) -> bool {
        self.compiler
            .tables_read
            .as_ref()
            .is_some_and(|read| read.contains(object))
    }

    /// The `LEFT JOIN`s the compiled expressions need (to append after the row source), and
    /// the parameters.
    pub fn finish(self) -> (String, Params) {
        (self.level.joins, self.compiler.params)
    }
}

fn expr_problems(mut diagnostics: Vec<Diagnostic>) -> ExprOutput {
    diagnostics.sort_by_key(|diagnostic| (diagnostic.span.start, diagnostic.span.end));
    diagnostics.dedup();
    ExprOutput {
        expr: None,
        diagnostics,
    }
}
