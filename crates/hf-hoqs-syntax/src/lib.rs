//! HOQS and expression-language syntax: lexer, parser, syntax tree, printer, diagnostics.
//!
//! One expression language serves HOQS conditions, formula fields, rule asserts and rollup
//! filters, so a formula means the same thing everywhere; HOQS queries are built on it. This
//! crate knows only text: which objects and fields exist, and what types expressions have,
//! is decided by `hf-hoqs`. It depends on no other hf crate so that `hf-model` (formula
//! validation), `hf-hoqs` (type checking and SQL) and `hf-hfx` can all use it.
//!
//! Problems in the text are data, never `Err` or panics: [`parse_query`] and
//! [`parse_expression`] return the tree when the text is well formed and otherwise a list
//! of [`Diagnostic`]s with byte spans; [`location::locate`] turns a span into the line,
//! UTF-16 column and source line of the HTTP contract. Input size ([`MAX_SOURCE_BYTES`]) and
//! nesting ([`MAX_DEPTH`]) are bounded so no input can exhaust the stack.
//!
//! The language is described in docs/hoqs.md and docs/formulas.md.

pub mod ast;
pub mod diagnostics;
pub mod dump;
pub mod functions;
mod lexer;
pub mod location;
mod parser;
pub mod printer;

pub use diagnostics::{Code, Diagnostic};
pub use parser::{is_reserved, MAX_DEPTH, RESERVED_WORDS};

use ast::{Expr, Query};

/// The largest source text accepted, in bytes; longer texts get one diagnostic.
pub const MAX_SOURCE_BYTES: usize = 64 * 1024;

/// The outcome of [`parse_query`]: the query if the text is well formed, else diagnostics.
///
/// Exactly one of the two is present: `query` is `Some` if and only if `diagnostics` is empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseResult {
    /// The parsed query.
    pub query: Option<Query>,
    /// The problems found, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

/// The outcome of [`parse_expression`], with the same invariant as [`ParseResult`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExprParseResult {
    /// The parsed expression.
    pub expr: Option<Expr>,
    /// The problems found, in source order.
    pub diagnostics: Vec<Diagnostic>,
}

/// The crate's error, for callers that prefer `?` over inspecting diagnostics.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The text was not well formed; `diagnostics` is never empty.
    #[error("{}", summary(.diagnostics))]
    Invalid {
        /// What was wrong, in source order.
        diagnostics: Vec<Diagnostic>,
    },
}

/// The first message, and how many more there are, for [`Error`]'s display.
fn summary(diagnostics: &[Diagnostic]) -> String {
    let first = diagnostics
        .first()
        .map_or("invalid text", |diagnostic| diagnostic.message.as_str());
    match diagnostics.len() {
        0 | 1 => first.to_string(),
        2 => format!("{first} (and 1 more problem)"),
        n => format!("{first} (and {} more problems)", n - 1),
    }
}

impl ParseResult {
    /// The query, or [`Error::Invalid`] with the diagnostics.
    pub fn into_result(self) -> Result<Query, Error> {
        match self.query {
            Some(query) if self.diagnostics.is_empty() => Ok(query),
            _ => Err(Error::Invalid {
                diagnostics: self.diagnostics,
            }),
        }
    }
}

impl ExprParseResult {
    /// The expression, or [`Error::Invalid`] with the diagnostics.
    pub fn into_result(self) -> Result<Expr, Error> {
        match self.expr {
            Some(expr) if self.diagnostics.is_empty() => Ok(expr),
            _ => Err(Error::Invalid {
                diagnostics: self.diagnostics,
            }),
        }
    }
}

/// Parses a HOQS query (`SELECT ... FROM <module>.<object> ...`).
pub fn parse_query(source: &str) -> ParseResult {
    match parse_with(source, "the end of the query", |parser| {
        parser.parse_query_to_end()
    }) {
        Ok(query) => ParseResult {
            query: Some(query),
            diagnostics: Vec::new(),
        },
        Err(diagnostics) => ParseResult {
            query: None,
            diagnostics,
        },
    }
}

/// Parses a bare expression: a formula, a rule's `assert`, a rollup `filter`.
pub fn parse_expression(source: &str) -> ExprParseResult {
    match parse_with(source, "the end of the expression", |parser| {
        parser.parse_expression_to_end()
    }) {
        Ok(expr) => ExprParseResult {
            expr: Some(expr),
            diagnostics: Vec::new(),
        },
        Err(diagnostics) => ExprParseResult {
            expr: None,
            diagnostics,
        },
    }
}

/// The names (without the colon) of the `:name` parameters a source uses, each once, in order of
/// first use. Text literals, quoted names and date ranges such as `LAST_N_DAYS:30` hold none. A
/// source too large to lex has none; its parse says why.
pub fn parameter_names(source: &str) -> Vec<&str> {
    if source.len() > MAX_SOURCE_BYTES {
        return Vec::new();
    }
    let (tokens, _) = lexer::lex(source);
    let mut names: Vec<&str> = Vec::new();
    for token in tokens
        .iter()
        .filter(|token| token.kind == lexer::TokenKind::Param)
    {
        let name = source.get(token.span.start + 1..token.span.end);
        if let Some(name) = name.filter(|name| !names.contains(name)) {
            names.push(name);
        }
    }
    names
}

/// Checks the size, lexes, and runs `parse`; lexer problems are all reported, parser
/// problems stop at the first.
fn parse_with<T>(
    source: &str,
    end_name: &'static str,
    parse: impl FnOnce(&mut parser::Parser<'_>) -> Result<T, Diagnostic>,
) -> Result<T, Vec<Diagnostic>> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(vec![diagnostics::source_too_large(
            source.len(),
            MAX_SOURCE_BYTES,
        )]);
    }
    let (tokens, lex_errors) = lexer::lex(source);
    if !lex_errors.is_empty() {
        return Err(lex_errors);
    }
    let mut parser = parser::Parser::new(source, tokens, end_name);
    parse(&mut parser).map_err(|diagnostic| vec![diagnostic])
}
