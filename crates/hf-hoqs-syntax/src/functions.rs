//! The names of the functions the language knows, and "did you mean" suggestions.
//!
//! Signatures and semantics live in `hf-hoqs` (they need the type system); this list is here
//! so that `hf-model`, which only has the syntax crate, can already reject `UPPR(name)` with
//! a suggestion when it validates formulas and rules. The suggestion helper is generic so
//! `hf-hoqs` can reuse it for object and field names.

use crate::ast::{Expr, ExprKind, Query};
use crate::diagnostics::{self as diag, Diagnostic};

/// Whether a function computes one value per row or aggregates many rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    /// A per-row function (`UPPER`, `IF`, ...).
    Scalar,
    /// An aggregate, allowed in a select list, HAVING and ORDER BY of a grouped query
    /// (`COUNT`, `SUM`, `AVG`, `MIN`, `MAX`).
    Aggregate,
}

/// A known function name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    /// The canonical (upper-case) name.
    pub name: &'static str,
    /// Scalar or aggregate.
    pub kind: FunctionKind,
}

const fn scalar(name: &'static str) -> Function {
    Function {
        name,
        kind: FunctionKind::Scalar,
    }
}

const fn aggregate(name: &'static str) -> Function {
    Function {
        name,
        kind: FunctionKind::Aggregate,
    }
}

/// Every function name of the language, grouped as in docs/formulas.md.
pub const FUNCTIONS: &[Function] = &[
    // Logic and NULL handling.
    scalar("IF"),
    scalar("COALESCE"),
    scalar("NULLIF"),
    scalar("ISBLANK"),
    scalar("BLANKVALUE"),
    // The stored record before a write (validation rules only).
    scalar("ISNEW"),
    scalar("ISCHANGED"),
    scalar("PRIORVALUE"),
    // Text.
    scalar("CONCAT"),
    scalar("UPPER"),
    scalar("LOWER"),
    scalar("LENGTH"),
    scalar("TRIM"),
    scalar("LTRIM"),
    scalar("RTRIM"),
    scalar("SUBSTRING"),
    scalar("LEFT"),
    scalar("RIGHT"),
    scalar("REPLACE"),
    scalar("CONTAINS"),
    scalar("STARTS_WITH"),
    scalar("ENDS_WITH"),
    scalar("REGEX"),
    scalar("LPAD"),
    scalar("RPAD"),
    scalar("FIND"),
    // Picklists.
    scalar("TOLABEL"),
    scalar("ISPICKVAL"),
    // Conversions.
    scalar("TEXT"),
    scalar("VALUE"),
    scalar("DATEVALUE"),
    // Numbers.
    scalar("ABS"),
    scalar("ROUND"),
    scalar("FLOOR"),
    scalar("CEIL"),
    scalar("MOD"),
    scalar("POWER"),
    scalar("SQRT"),
    scalar("GREATEST"),
    scalar("LEAST"),
    scalar("EXP"),
    scalar("LN"),
    scalar("LOG"),
    scalar("TRUNC"),
    // Dates and times.
    scalar("NOW"),
    scalar("TODAY"),
    scalar("YEAR"),
    scalar("MONTH"),
    scalar("DAY"),
    scalar("ADD_DAYS"),
    scalar("ADD_MONTHS"),
    scalar("DAYS_BETWEEN"),
    scalar("CALENDAR_YEAR"),
    scalar("CALENDAR_QUARTER"),
    scalar("CALENDAR_MONTH"),
    scalar("WEEK_IN_YEAR"),
    scalar("DAY_IN_MONTH"),
    scalar("DAY_IN_WEEK"),
    scalar("HOUR_IN_DAY"),
    scalar("DAY_ONLY"),
    // Aggregates.
    aggregate("COUNT"),
    aggregate("SUM"),
    aggregate("AVG"),
    aggregate("MIN"),
    aggregate("MAX"),
];

/// Finds a function by name, case-insensitively.
pub fn lookup(name: &str) -> Option<&'static Function> {
    FUNCTIONS
        .iter()
        .find(|function| function.name.eq_ignore_ascii_case(name))
}

/// The candidate closest to `word` (case-insensitively), if it is close enough to be a
/// plausible typo: at most one edit for short words, about a third of the length for long
/// ones. Ties go to the earlier candidate, so results are deterministic.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    let allowed = (word.chars().count() / 3).max(1);
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        // Optimal string alignment: insertions, deletions, substitutions and swaps of two
        // neighbours each cost one (`nmae` → `name` is one edit).
        let distance = strsim::osa_distance(&word, &candidate.to_ascii_lowercase());
        if distance == 0 || distance > allowed {
            continue;
        }
        if best.is_none_or(|(best_distance, _)| distance < best_distance) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// Reports every call in `expr` whose name is not a known function, with a suggestion.
pub fn check_function_names(expr: &Expr) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    expr.walk(&mut |node| report_unknown(node, &mut diagnostics));
    diagnostics
}

/// Like [`check_function_names`], for every expression of a query and its subqueries.
pub fn check_query_function_names(query: &Query) -> Vec<Diagnostic> {
    let mut diagnostics = Vec::new();
    query.walk_exprs(&mut |node| report_unknown(node, &mut diagnostics));
    diagnostics
}

fn report_unknown(node: &Expr, diagnostics: &mut Vec<Diagnostic>) {
    if let ExprKind::Call { name, .. } = &node.kind {
        if lookup(&name.name).is_none() {
            let names: Vec<&str> = FUNCTIONS.iter().map(|function| function.name).collect();
            let suggestion = did_you_mean(&name.name, &names);
            diagnostics.push(diag::unknown_function(&name.name, suggestion, name.span));
        }
    }
}

/// What is wrong with a regular expression PostgreSQL would refuse, checked on a pattern
/// literal so the mistake is located in the text: unbalanced parentheses or brackets, a
/// quantifier with nothing to repeat, a bad `{m,n}`, a trailing backslash.
pub fn regex_problem(pattern: &str) -> Option<&'static str> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut depth = 0usize;
    let mut can_repeat = false;
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        match c {
            '\\' => {
                if at + 1 >= chars.len() {
                    return Some("it ends with a lone backslash");
                }
                at += 1;
                can_repeat = true;
            }
            '[' => {
                // A bracket expression: `]` right after `[` or `[^` is a member.
                let mut end = at + 1;
                if chars.get(end) == Some(&'^') {
                    end += 1;
                }
                if chars.get(end) == Some(&']') {
                    end += 1;
                }
                while end < chars.len() && chars[end] != ']' {
                    if chars[end] == '[' && matches!(chars.get(end + 1), Some(':' | '.' | '=')) {
                        let close = chars.get(end + 1).copied().unwrap_or(':');
                        let mut inner = end + 2;
                        while inner + 1 < chars.len()
                            && !(chars[inner] == close && chars[inner + 1] == ']')
                        {
                            inner += 1;
                        }
                        end = inner + 1;
                    }
                    end += 1;
                }
                if end >= chars.len() {
                    return Some("a `[` is never closed by `]`");
                }
                at = end;
                can_repeat = true;
            }
            '(' => {
                depth += 1;
                can_repeat = false;
                if chars.get(at + 1) == Some(&'?') {
                    at += 1;
                    if matches!(chars.get(at + 1), Some(':' | '=' | '!')) {
                        at += 1;
                    } else {
                        return Some("`(?` must be followed by `:`, `=` or `!`");
                    }
                }
            }
            ')' => {
                if depth == 0 {
                    return Some("a `)` has no `(`");
                }
                depth -= 1;
                can_repeat = true;
            }
            '*' | '+' | '?' => {
                if !can_repeat {
                    return Some("a quantifier (`*`, `+`, `?`) has nothing to repeat");
                }
                // `*?` and friends are non-greedy forms; a third quantifier is an error.
                if matches!(chars.get(at + 1), Some('?')) {
                    at += 1;
                }
                can_repeat = false;
            }
            '{' => {
                let close = chars[at..].iter().position(|&c| c == '}');
                let Some(close) = close else {
                    return Some("a `{` is never closed by `}`");
                };
                let inner: String = chars[at + 1..at + close].iter().collect();
                let bound = |part: &str| part.parse::<u16>().ok().filter(|n| *n <= 255);
                let valid = match inner.split_once(',') {
                    Some((low, "")) => bound(low).is_some(),
                    Some((low, high)) => {
                        matches!((bound(low), bound(high)), (Some(l), Some(h)) if l <= h)
                    }
                    None => bound(&inner).is_some(),
                };
                if !valid {
                    return Some("a `{m,n}` repetition needs counts from 0 to 255, m ≤ n");
                }
                if !can_repeat {
                    return Some("a `{m,n}` repetition has nothing to repeat");
                }
                at += close;
                can_repeat = false;
            }
            '|' | '^' => can_repeat = false,
            _ => can_repeat = true,
        }
        at += 1;
    }
    if depth > 0 {
        return Some("a `(` is never closed by `)`");
    }
    None
}
