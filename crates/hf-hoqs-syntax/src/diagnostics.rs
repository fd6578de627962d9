//! Diagnostics as data, and every message text this crate produces.
//!
//! Keeping all texts in one file (as oxc does) makes them easy to review for tone and
//! actionability, and keeps the lexer and parser free of string formatting. A message says
//! what was expected and what was found, so a person can fix the query without the docs.

use crate::ast::Span;
use crate::location::{code_frame, locate, Location};

/// The stable error code of a diagnostic; the HTTP layer maps it to a status.
///
/// `hf-hoqs` reuses [`Diagnostic`] for its name and type errors, so the codes of the whole
/// query language live here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// The text is not a well-formed query or expression (also: too large, nested too deep).
    SyntaxError,
    /// A name (function here; object or field in `hf-hoqs`) does not exist.
    UnknownName,
    /// Operand types do not fit (reported by `hf-hoqs`).
    TypeError,
    /// LIMIT above the maximum (reported by `hf-hoqs`).
    LimitTooLarge,
}

impl Code {
    /// The SCREAMING_SNAKE_CASE code of the contract's error envelope.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::SyntaxError => "HOQS_SYNTAX_ERROR",
            Code::UnknownName => "HOQS_UNKNOWN_NAME",
            Code::TypeError => "HOQS_TYPE_ERROR",
            Code::LimitTooLarge => "HOQS_LIMIT_TOO_LARGE",
        }
    }
}

/// One problem found in a query or expression: a code, a message for a person, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The stable code.
    pub code: Code,
    /// An English message saying what is wrong and, where possible, how to fix it.
    pub message: String,
    /// The offending bytes of the source.
    pub span: Span,
}

impl Diagnostic {
    /// A syntax error; the constructor the lexer and parser use through the functions below.
    pub fn syntax(message: String, span: Span) -> Diagnostic {
        Diagnostic {
            code: Code::SyntaxError,
            message,
            span,
        }
    }

    /// The line, UTF-16 column and source line of the start of the span, as the contract's
    /// `location` reports them.
    pub fn location(&self, source: &str) -> Location {
        locate(source, self.span.start)
    }

    /// A human-readable rendering with `line:column` and a caret frame, for CLIs and tests.
    pub fn render(&self, source: &str) -> String {
        let location = self.location(source);
        format!(
            "error[{}] at {}:{}: {}\n{}",
            self.code.as_str(),
            location.line,
            location.column,
            self.message,
            code_frame(source, self.span)
        )
    }
}

/// At most this many characters of a token are quoted back in a message.
const MAX_QUOTED_CHARS: usize = 32;

/// Quotes a token's text for a message, shortened so a huge literal cannot flood it.
pub(crate) fn quote(text: &str) -> String {
    let mut shown: String = text.chars().take(MAX_QUOTED_CHARS).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    format!("`{shown}`")
}

// ---------------------------------------------------------------------------------------
// Lexer messages.

pub(crate) fn source_too_large(len: usize, max: usize) -> Diagnostic {
    Diagnostic::syntax(
        format!("the text is {len} bytes long; the limit is {max} bytes"),
        Span::new(0, 0),
    )
}

pub(crate) fn unexpected_char(ch: char, span: Span) -> Diagnostic {
    let shown = if ch.is_control() || ch.is_whitespace() {
        format!("U+{:04X}", ch as u32)
    } else {
        format!("`{ch}`")
    };
    Diagnostic::syntax(format!("unexpected character {shown}"), span)
}

pub(crate) fn unterminated_string(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "unterminated text literal: add a closing `'` (write `''` for a quote inside the text)"
            .to_string(),
        span,
    )
}

pub(crate) fn unterminated_quoted_name(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "unterminated quoted name: add a closing `\"`".to_string(),
        span,
    )
}

pub(crate) fn empty_quoted_name(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "empty quoted name `\"\"`: a name needs at least one character".to_string(),
        span,
    )
}

pub(crate) fn nul_in_text(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "text and names cannot contain the NUL character (U+0000)".to_string(),
        span,
    )
}

pub(crate) fn unterminated_comment(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "unterminated comment: add `*/` to close the `/*`".to_string(),
        span,
    )
}

pub(crate) fn missing_decimals(text: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "expected digits after the decimal point in {}: write `{}0`",
            quote(text),
            text
        ),
        span,
    )
}

pub(crate) fn invalid_number(text: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "invalid number {}: numbers are digits with an optional decimal part, like `12` or `12.5`",
            quote(text)
        ),
        span,
    )
}

pub(crate) fn invalid_date(text: &str, reason: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(format!("invalid date {}: {reason}", quote(text)), span)
}

pub(crate) fn invalid_datetime(text: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "invalid datetime {}: write it as `2024-01-31T10:00:00Z` (UTC) or with an offset like `2024-01-31T10:00:00+02:00`",
            quote(text)
        ),
        span,
    )
}

pub(crate) fn missing_param_name(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "expected a parameter name after `:`, like `:min_amount`".to_string(),
        span,
    )
}

pub(crate) fn double_equals(span: Span) -> Diagnostic {
    Diagnostic::syntax("use `=` (not `==`) to compare".to_string(), span)
}

pub(crate) fn bang(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "`!` is not an operator: use NOT to negate, or `!=` to compare".to_string(),
        span,
    )
}

pub(crate) fn single_pipe(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "`|` is not an operator: use `||` to concatenate text, or OR for alternatives".to_string(),
        span,
    )
}

pub(crate) fn double_ampersand(span: Span) -> Diagnostic {
    Diagnostic::syntax("`&&` is not an operator: use AND".to_string(), span)
}

pub(crate) fn ampersand(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "`&` is not an operator: use `||` to concatenate text".to_string(),
        span,
    )
}

pub(crate) fn semicolon(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "`;` is not allowed: send a single query or expression without a trailing `;`".to_string(),
        span,
    )
}

// ---------------------------------------------------------------------------------------
// Parser messages. `found` is always a description made by the parser (`` `WHERE` ``,
// "the end of the query", ...).

pub(crate) fn too_deep(max: usize, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "the text is nested more than {max} levels deep: simplify it (a long chain of OR comparisons can often be an IN list)"
        ),
        span,
    )
}

pub(crate) fn expected_select(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected SELECT at the start of the query, found {found}"),
        span,
    )
}

pub(crate) fn select_star(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "`SELECT *` is not supported: list the fields you need, like `SELECT id, name`".to_string(),
        span,
    )
}

pub(crate) fn expected_from(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected FROM after the select list, found {found}"),
        span,
    )
}

pub(crate) fn expected_comma_or_from(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "expected `,` or FROM after a select item, found {found} (name an item with `AS name`)"
        ),
        span,
    )
}

pub(crate) fn expected_object(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected an object after FROM, like `crm.account`, found {found}"),
        span,
    )
}

pub(crate) fn object_shape(written: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "FROM names an object as `<module>.<object>`, like `crm.account`; found {}",
            quote(written)
        ),
        span,
    )
}

pub(crate) fn relationship_shape(written: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "a subquery's FROM names a child relationship as `<module>.<object>.<lookupField>`, like `crm.opportunity.account`; found {}",
            quote(written)
        ),
        span,
    )
}

pub(crate) fn expected_expression(after: Option<&str>, found: &str, span: Span) -> Diagnostic {
    let message = match after {
        Some(after) => format!("expected an expression after {after}, found {found}"),
        None => format!("expected an expression, found {found}"),
    };
    Diagnostic::syntax(message, span)
}

pub(crate) fn keyword_as_name_hint(keyword: &str) -> String {
    format!(
        " (to use it as a field name, quote it: `\"{}\"`)",
        keyword.to_ascii_lowercase()
    )
}

pub(crate) fn expected_name_after_dot(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected a field name after `.`, found {found}"),
        span,
    )
}

pub(crate) fn expected_alias(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected a name after AS, found {found} (quote keywords: `AS \"order\"`)"),
        span,
    )
}

pub(crate) fn unclosed_paren(open: &Location, found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!(
            "expected `)` to close the `(` at {}:{}, found {found}",
            open.line, open.column
        ),
        span,
    )
}

pub(crate) fn expected_call_separator(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected `,` or `)` after a function argument, found {found}"),
        span,
    )
}

pub(crate) fn expected_close_after_star(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(format!("expected `)` after `*`, found {found}"), span)
}

pub(crate) fn subquery_not_allowed(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "a subquery is only allowed in a query, as an item of the select list (`SELECT name, (SELECT amount FROM crm.opportunity.account) FROM crm.account`) or after IN (`WHERE id IN (SELECT account FROM crm.opportunity)`)"
            .to_string(),
        span,
    )
}

pub(crate) fn chained_comparison(span: Span) -> Diagnostic {
    Diagnostic::syntax(
        "comparisons cannot be chained: combine them with AND, like `a < b AND b < c`, or add parentheses"
            .to_string(),
        span,
    )
}

pub(crate) fn expected_null_after_is(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected NULL or NOT NULL after IS, found {found}"),
        span,
    )
}

pub(crate) fn expected_in_list(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected `(` and a list of values after IN, like `IN ('a', 'b')`, or an array parameter like `IN :ids`, found {found}"),
        span,
    )
}

pub(crate) fn empty_in_list(span: Span) -> Diagnostic {
    Diagnostic::syntax("an IN list needs at least one value".to_string(), span)
}

pub(crate) fn expected_in_separator(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected `,` or `)` in the IN list, found {found}"),
        span,
    )
}

pub(crate) fn expected_by(keyword: &str, found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(format!("expected BY after {keyword}, found {found}"), span)
}

pub(crate) fn expected_nulls_order(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected FIRST or LAST after NULLS, found {found}"),
        span,
    )
}

pub(crate) fn expected_row_count(keyword: &str, found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected a whole number or a `:parameter` after {keyword}, found {found}"),
        span,
    )
}

pub(crate) fn clause_out_of_order(clause: &str, before: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(format!("{clause} must come before {before}"), span)
}

pub(crate) fn duplicate_clause(clause: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(format!("a query has at most one {clause} clause"), span)
}

pub(crate) fn expected_clause(allowed: &str, end: &str, found: &str, span: Span) -> Diagnostic {
    let message = if allowed.is_empty() {
        format!("expected {end}, found {found}")
    } else {
        format!("expected {allowed} or {end}, found {found}")
    };
    Diagnostic::syntax(message, span)
}

pub(crate) fn expected_end_of_expression(found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("expected an operator or the end of the expression, found {found}"),
        span,
    )
}

// ---------------------------------------------------------------------------------------
// Name messages.

pub(crate) fn unknown_function(name: &str, suggestion: Option<&str>, span: Span) -> Diagnostic {
    let message = match suggestion {
        Some(known) => format!("unknown function {} — did you mean `{known}`?", quote(name)),
        None => format!(
            "unknown function {}: see docs/formulas.md for the list of functions",
            quote(name)
        ),
    };
    Diagnostic {
        code: Code::UnknownName,
        message,
        span,
    }
}

pub(crate) fn date_literal_needs_count(word: &str, span: Span) -> Diagnostic {
    let upper = word.to_ascii_uppercase();
    Diagnostic::syntax(
        format!("`{upper}` needs a count after a colon, like `{upper}:7`"),
        span,
    )
}

pub(crate) fn expected_case_word(expected: &str, found: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(format!("expected {expected} in CASE, found {found}"), span)
}

pub(crate) fn unknown_global(name: &str, span: Span) -> Diagnostic {
    Diagnostic::syntax(
        format!("unknown global `{name}`: the caller is `$User.id` or `$User.name`"),
        span,
    )
}
