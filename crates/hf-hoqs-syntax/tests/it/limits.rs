//! Hostile input: deep nesting, huge texts and numbers, random bytes, injection attempts.
//!
//! Every case must end in either a clean tree or diagnostics, never a panic or a stack
//! overflow, and diagnostics must point inside the text.

use hf_hoqs_syntax::ast::{ExprKind, Literal, SelectValue};
use hf_hoqs_syntax::printer::{print, print_expr};
use hf_hoqs_syntax::{
    parse_expression, parse_query, Code, Diagnostic, MAX_DEPTH, MAX_SOURCE_BYTES,
};
use proptest::prelude::*;

use crate::support::{clear_expr, clear_query};

/// Checks the result invariants of any parse and returns the diagnostics: a tree or
/// diagnostics (never both), diagnostics inside the text, and any accepted text printing to
/// text that parses to the same tree.
fn check(source: &str) -> (bool, Vec<Diagnostic>) {
    let query = parse_query(source);
    assert_eq!(query.query.is_some(), query.diagnostics.is_empty());
    if let Some(parsed) = &query.query {
        let mut reparsed = parse_query(&print(parsed)).query.unwrap();
        let mut parsed = parsed.clone();
        clear_query(&mut reparsed);
        clear_query(&mut parsed);
        assert_eq!(reparsed, parsed, "{source}");
    }
    let expr = parse_expression(source);
    assert_eq!(expr.expr.is_some(), expr.diagnostics.is_empty());
    if let Some(parsed) = &expr.expr {
        let mut reparsed = parse_expression(&print_expr(parsed)).expr.unwrap();
        let mut parsed = parsed.clone();
        clear_expr(&mut reparsed);
        clear_expr(&mut parsed);
        assert_eq!(reparsed, parsed, "{source}");
    }
    for diagnostic in query.diagnostics.iter().chain(&expr.diagnostics) {
        assert!(diagnostic.span.start <= diagnostic.span.end);
        assert!(diagnostic.span.end <= source.len());
        assert!(source.is_char_boundary(diagnostic.span.start));
        assert!(source.is_char_boundary(diagnostic.span.end));
        let _ = diagnostic.render(source);
    }
    (query.query.is_some(), query.diagnostics)
}

fn first_message(source: &str) -> String {
    let result = parse_expression(source);
    result.diagnostics[0].message.clone()
}

#[test]
fn ten_thousand_parentheses_are_a_clean_diagnostic() {
    let source = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert!(first_message(&source).contains("nested more than 128 levels"));
    let query = format!("SELECT a FROM m.o WHERE {source}");
    assert!(check(&query).1[0].message.contains("nested more than"));
}

#[test]
fn ten_thousand_nots_and_minuses_are_a_clean_diagnostic() {
    let nots = format!("{}TRUE", "NOT ".repeat(10_000));
    assert!(first_message(&nots).contains("nested more than"));
    let minuses = format!("{}1", "- ".repeat(10_000));
    assert!(first_message(&minuses).contains("nested more than"));
}

#[test]
fn long_operator_chains_are_bounded_too() {
    // A loop builds these, so the tree depth (not the recursion) hits the limit.
    let chain = vec!["a = 1"; 5_000].join(" OR ");
    assert!(first_message(&chain).contains("nested more than"));
    let sums = vec!["1"; 20_000].join("+");
    assert!(first_message(&sums).contains("nested more than"));
}

#[test]
fn nesting_up_to_the_limit_is_accepted() {
    let depth = MAX_DEPTH - 2;
    let source = format!("{}1{}", "(".repeat(depth), ")".repeat(depth));
    assert!(parse_expression(&source).diagnostics.is_empty());
    let chain = vec!["x"; MAX_DEPTH - 1].join(" + ");
    assert!(parse_expression(&chain).diagnostics.is_empty());
}

#[test]
fn deeply_nested_subqueries_are_a_clean_diagnostic() {
    let mut query = String::from("SELECT a FROM m.o.l");
    for _ in 0..300 {
        query = format!("SELECT ({query}) FROM m.o.l");
    }
    let query = query.replacen("m.o.l", "m.o", 1);
    let (_, diagnostics) = check(&query);
    assert!(diagnostics[0].message.contains("nested more than"));
}

#[test]
fn oversized_texts_are_rejected_before_lexing() {
    let source = format!(
        "SELECT a FROM m.o WHERE name = '{}'",
        "x".repeat(MAX_SOURCE_BYTES)
    );
    let (_, diagnostics) = check(&source);
    assert_eq!(diagnostics.len(), 1);
    assert!(diagnostics[0].message.contains("the limit is 65536 bytes"));
    let mebibyte = "(".repeat(1 << 20);
    assert_eq!(check(&mebibyte).1.len(), 1);
}

#[test]
fn huge_numbers_stay_text() {
    let digits = "9".repeat(5_000);
    let result = parse_query(&format!(
        "SELECT a FROM m.o WHERE n > {digits}.5 LIMIT {digits}"
    ));
    let query = result.query.unwrap();
    let Some(condition) = &query.where_clause else {
        panic!("no WHERE")
    };
    let ExprKind::Binary { right, .. } = &condition.kind else {
        panic!("not a comparison")
    };
    assert_eq!(
        right.kind,
        ExprKind::Literal(Literal::Decimal(format!("{digits}.5")))
    );
}

#[test]
fn injection_attempts_are_literals_or_diagnostics() {
    // Each string either lands whole in one text literal or is rejected.
    let literal_cases = [
        "'; DROP TABLE crm.account; --",
        "it''s",
        "x' OR '1'='1",
        "/* comment */",
        "-- not a comment",
        "back\\slash\\'",
        "\\u0041 and U&'\\0041'",
        "$$ dollar $$",
        "line\nbreak",
    ];
    for text in literal_cases {
        let escaped = text.replace('\'', "''");
        let source = format!("SELECT name FROM crm.account WHERE name = '{escaped}'");
        let query = parse_query(&source).query.unwrap();
        let condition = query.where_clause.unwrap();
        let ExprKind::Binary { right, .. } = condition.kind else {
            panic!("not a comparison: {source}")
        };
        assert_eq!(
            right.kind,
            ExprKind::Literal(Literal::String(text.to_string())),
            "{source}"
        );
    }

    let rejected = [
        "SELECT name FROM crm.account; DROP TABLE crm.account",
        "SELECT name FROM crm.account WHERE name = 'x'; --",
        "SELECT name FROM crm.account WHERE name = 'unterminated",
        "SELECT name FROM crm.account WHERE name = U&'\\0041'",
        "SELECT name FROM crm.account WHERE name = $1",
        "SELECT name FROM crm.account WHERE name = E'\\x41'",
        "SELECT name FROM crm.account /* unterminated",
        "SELECT name FROM crm.account WHERE a = 1 UNION SELECT password FROM pg_shadow",
        "SELECT name FROM crm.account WHERE name = 'a' || (SELECT 1 FROM x.y)",
        "SELECT name FROM crm.account WHERE name = 'nul\u{0}'",
        "SELECT pg_sleep(10)::text FROM crm.account",
    ];
    for source in rejected {
        let (ok, diagnostics) = check(source);
        assert!(!ok, "accepted: {source}");
        assert!(
            diagnostics.iter().all(|d| d.code == Code::SyntaxError),
            "{source}"
        );
    }
}

#[test]
fn quoted_names_hold_anything_as_one_name() {
    // `"x\"` is the name `x\`: backslashes do not escape, so the rest stays operators.
    let source = "SELECT name FROM crm.account WHERE name = \"x\\\" OR 1=1 --";
    let query = parse_query(source).query.unwrap();
    let condition = query.where_clause.unwrap();
    let ExprKind::Binary { left, .. } = condition.kind else {
        panic!("not OR")
    };
    let ExprKind::Binary { right, .. } = left.kind else {
        panic!("not =")
    };
    let ExprKind::Path(path) = right.kind else {
        panic!("not a path")
    };
    assert_eq!(path.dotted(), "x\\");
}

#[test]
fn comments_are_skipped() {
    let source = "SELECT name -- the name\nFROM crm.account /* all of them */";
    let query = parse_query(source).query.unwrap();
    assert_eq!(query.select.len(), 1);
    let SelectValue::Expr(_) = &query.select[0].value else {
        panic!("not an expression")
    };
}

/// Text fragments for the token-soup strategy, biased towards the grammar.
const FRAGMENTS: &[&str] = &[
    "SELECT",
    "DISTINCT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "HAVING",
    "ORDER",
    "ASC",
    "DESC",
    "NULLS",
    "FIRST",
    "LAST",
    "LIMIT",
    "OFFSET",
    "AS",
    "AND",
    "OR",
    "NOT",
    "IN",
    "IS",
    "NULL",
    "LIKE",
    "ILIKE",
    "TRUE",
    "FALSE",
    "COUNT",
    "(",
    ")",
    "(*)",
    ",",
    ".",
    "+",
    "-",
    "*",
    "/",
    "||",
    "=",
    "!=",
    "<>",
    "<",
    "<=",
    ">",
    ">=",
    "a",
    "crm",
    "account",
    "b.c",
    "'x'",
    "''",
    "'",
    "\"q\"",
    "\"",
    "12",
    "1.5",
    "1.",
    "2024-01-31",
    "2024-02-30",
    "2024-01-31T10:00:00Z",
    "2024-01-31T10",
    ":p",
    ":",
    "--",
    "/*",
    "*/",
    ";",
    "&",
    "|",
    "!",
    "é",
    "🎉",
    "\n",
    "\r",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let source = String::from_utf8_lossy(&bytes);
        check(&source);
    }

    #[test]
    fn random_token_soup_never_panics(parts in prop::collection::vec(prop::sample::select(FRAGMENTS), 0..40)) {
        check(&parts.join(" "));
        check(&parts.concat());
        check(&format!("SELECT a FROM m.o WHERE {}", parts.join(" ")));
    }
}

#[test]
fn long_prefix_chains_print_without_extra_nesting() {
    for source in [
        format!("{}x", "- ".repeat(100)),
        format!("{}x", "NOT ".repeat(100)),
    ] {
        check(&source);
        let printed = print_expr(&parse_expression(&source).expr.unwrap());
        assert!(
            parse_expression(&printed).diagnostics.is_empty(),
            "{printed}"
        );
    }
}
