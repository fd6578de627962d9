//! Data-driven parser tests over `fixtures/hoqs-syntax/{ok,err}`.
//!
//! `*.hoqs` files are queries and `*.expr` files bare expressions. An ok case must give no
//! diagnostics (syntax or unknown function), must print back to text that parses to the same
//! tree, and every expression node's span must cover text that parses to that node; its
//! snapshot holds the tree dump and the printed text. An err case must give at least one
//! diagnostic; its snapshot holds the diagnostics rendered with line:column and a caret frame.

use std::path::Path;

use hf_hoqs_syntax::ast::{Expr, Query};
use hf_hoqs_syntax::dump::{dump_expr, dump_query};
use hf_hoqs_syntax::functions::{check_function_names, check_query_function_names};
use hf_hoqs_syntax::printer::{print, print_expr};
use hf_hoqs_syntax::{parse_expression, parse_query, Diagnostic};

use crate::support::{clear_expr, clear_query};

/// Parses a fixture file's text as its extension says, including the function-name check.
enum Parsed {
    Query(Option<Box<Query>>, Vec<Diagnostic>),
    Expr(Option<Expr>, Vec<Diagnostic>),
}

fn parse_fixture(path: &Path, source: &str) -> Parsed {
    match path.extension().and_then(|ext| ext.to_str()) {
        Some("hoqs") => {
            let result = parse_query(source);
            let mut diagnostics = result.diagnostics;
            if let Some(query) = &result.query {
                diagnostics.extend(check_query_function_names(query));
            }
            Parsed::Query(result.query.map(Box::new), diagnostics)
        }
        Some("expr") => {
            let result = parse_expression(source);
            let mut diagnostics = result.diagnostics;
            if let Some(expr) = &result.expr {
                diagnostics.extend(check_function_names(expr));
            }
            Parsed::Expr(result.expr, diagnostics)
        }
        other => panic!(
            "unexpected fixture extension {other:?} in {}",
            path.display()
        ),
    }
}

fn render_all(source: &str, diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|diagnostic| diagnostic.render(source))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every expression node's span must hold text that parses back to that node.
fn check_spans(source: &str, expr: &Expr) {
    expr.walk(&mut |node| {
        let text = &source[node.span.start..node.span.end];
        // A semi-join parses only inside a query: try it as a WHERE condition.
        let mut reparsed = parse_expression(text)
            .expr
            .or_else(|| {
                let query = format!("SELECT x FROM m.o WHERE {text}");
                parse_query(&query)
                    .query
                    .and_then(|query| query.where_clause)
            })
            .unwrap_or_else(|| panic!("span text {text:?} does not parse"));
        let mut expected = node.clone();
        clear_expr(&mut reparsed);
        clear_expr(&mut expected);
        assert_eq!(
            reparsed, expected,
            "span text {text:?} parses to another tree"
        );
    });
}

fn ok(path: &Path) {
    let source = std::fs::read_to_string(path).unwrap();
    let snapshot = match parse_fixture(path, &source) {
        Parsed::Query(query, diagnostics) => {
            assert!(
                diagnostics.is_empty(),
                "{}:\n{}",
                path.display(),
                render_all(&source, &diagnostics)
            );
            let query = query.unwrap();
            query.walk_exprs(&mut |expr| check_spans(&source, expr));
            let printed = print(&query);
            let mut reparsed = parse_query(&printed)
                .query
                .unwrap_or_else(|| panic!("printed text does not parse: {printed}"));
            let mut original = (*query).clone();
            clear_query(&mut reparsed);
            clear_query(&mut original);
            assert_eq!(reparsed, original, "round trip changed the tree: {printed}");
            format!("{}---\n{printed}\n", dump_query(&query))
        }
        Parsed::Expr(expr, diagnostics) => {
            assert!(
                diagnostics.is_empty(),
                "{}:\n{}",
                path.display(),
                render_all(&source, &diagnostics)
            );
            let expr = expr.unwrap();
            check_spans(&source, &expr);
            let printed = print_expr(&expr);
            let mut reparsed = parse_expression(&printed)
                .expr
                .unwrap_or_else(|| panic!("printed text does not parse: {printed}"));
            let mut original = expr.clone();
            clear_expr(&mut reparsed);
            clear_expr(&mut original);
            assert_eq!(reparsed, original, "round trip changed the tree: {printed}");
            format!("{}\n---\n{printed}\n", dump_expr(&expr))
        }
    };
    insta::assert_snapshot!(snapshot);
}

fn err(path: &Path) {
    let source = std::fs::read_to_string(path).unwrap();
    let diagnostics = match parse_fixture(path, &source) {
        Parsed::Query(_, diagnostics) | Parsed::Expr(_, diagnostics) => diagnostics,
    };
    assert!(
        !diagnostics.is_empty(),
        "{} parsed without diagnostics",
        path.display()
    );
    insta::assert_snapshot!(format!("{}\n", render_all(&source, &diagnostics)));
}

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../../../fixtures/hoqs-syntax/snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}

#[test]
fn ok_fixtures() {
    settings().bind(|| {
        insta::glob!("../../../../fixtures/hoqs-syntax", "ok/*.{hoqs,expr}", ok);
    });
}

#[test]
fn err_fixtures() {
    settings().bind(|| {
        insta::glob!("../../../../fixtures/hoqs-syntax", "err/*.{hoqs,expr}", err);
    });
}
