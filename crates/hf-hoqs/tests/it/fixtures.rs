//! Data-driven compiler tests over `fixtures/hoqs/{ok,err}`.
//!
//! A `*.hoqs` file is a query; leading comment lines may choose the model
//! (`-- model: shop`, default the demo CRM) and give the request's parameters
//! (`-- params: {"min": 10}`), its time zone (`-- time_zone: Pacific/Auckland`, default UTC)
//! and the caller's name (`-- caller: ada`, default none: `$User` is then an error). A `*.expr` file is an expression compiled against a row named
//! `new`; its lines `-- object: crm.opportunity` and `-- use: assert` (or `filter`, or
//! `formula decimal`) say how. An ok case must compile without diagnostics and its snapshot
//! holds the SQL, the parameters and the keys (or the joins); an err case must give at least
//! one diagnostic, and its snapshot holds them rendered with line:column and a caret frame.

use std::path::Path;
use std::str::FromStr;

use hf_hoqs::{Diagnostic, ExprCompiler, ExprUse, Params, PriorRow, RequestParams};
use hf_model::{QualifiedName, ScalarType};

use crate::support::{compile_fixture, model, render, render_params};

/// The `-- key: value` lines at the top of a fixture.
fn directive<'a>(source: &'a str, key: &str) -> Option<&'a str> {
    source
        .lines()
        .take_while(|line| line.starts_with("--"))
        .find_map(|line| {
            line.strip_prefix("--")?
                .trim()
                .strip_prefix(key)?
                .strip_prefix(':')
        })
        .map(str::trim)
}

enum Outcome {
    Compiled(String),
    Problems(Vec<Diagnostic>),
}

fn compile(path: &Path, source: &str) -> Outcome {
    let model = model(directive(source, "model").unwrap_or("demo"));
    match path.extension().and_then(|ext| ext.to_str()) {
        Some("hoqs") => {
            let params: RequestParams = match directive(source, "params") {
                Some(json) => serde_json::from_str(json).unwrap(),
                None => RequestParams::new(),
            };
            let output = compile_fixture(
                model,
                source,
                &params,
                directive(source, "page"),
                directive(source, "time_zone"),
                directive(source, "caller"),
            );
            match output.query {
                Some(query) => Outcome::Compiled(format!(
                    "{}\n---\n{}keys: {:?}\n",
                    query.sql,
                    render_params(&query.params),
                    query.keys
                )),
                None => Outcome::Problems(output.diagnostics),
            }
        }
        Some("expr") => {
            let object = QualifiedName::parse(directive(source, "object").unwrap()).unwrap();
            let usage = match directive(source, "use").unwrap() {
                "assert" => ExprUse::Assert,
                "filter" => ExprUse::RollupFilter,
                other => {
                    let ty = other.strip_prefix("formula ").unwrap();
                    ExprUse::Formula(ScalarType::from_str(ty).unwrap())
                }
            };
            let mut compiler = ExprCompiler::new(model, &object, "new", Params::new()).unwrap();
            // `-- prior: old`: a rule of an update, reading the stored record as "old".
            if directive(source, "prior") == Some("old") {
                compiler = compiler.for_rules(PriorRow::Row("\"old\"".to_owned()));
            }
            let output = compiler.compile(source, usage).unwrap();
            let (joins, params) = compiler.finish();
            match output.expr {
                Some(expr) => Outcome::Compiled(format!(
                    "{}\n---\ntype: {}\njoins:{joins}\n{}",
                    expr.sql,
                    expr.ty,
                    render_params(params.values())
                )),
                None => Outcome::Problems(output.diagnostics),
            }
        }
        other => panic!(
            "unexpected fixture extension {other:?} in {}",
            path.display()
        ),
    }
}

fn ok(path: &Path) {
    let source = std::fs::read_to_string(path).unwrap();
    match compile(path, &source) {
        Outcome::Compiled(snapshot) => insta::assert_snapshot!(snapshot),
        Outcome::Problems(diagnostics) => {
            panic!("{}:\n{}", path.display(), render(&source, &diagnostics))
        }
    }
}

fn err(path: &Path) {
    let source = std::fs::read_to_string(path).unwrap();
    match compile(path, &source) {
        Outcome::Compiled(snapshot) => {
            panic!(
                "{} compiled without diagnostics:\n{snapshot}",
                path.display()
            )
        }
        Outcome::Problems(diagnostics) => {
            assert!(!diagnostics.is_empty());
            insta::assert_snapshot!(format!("{}\n", render(&source, &diagnostics)));
        }
    }
}

fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../../../fixtures/hoqs/snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}

#[test]
fn ok_fixtures() {
    settings().bind(|| {
        insta::glob!("../../../../fixtures/hoqs", "ok/*.{hoqs,expr}", ok);
    });
}

#[test]
fn err_fixtures() {
    settings().bind(|| {
        insta::glob!("../../../../fixtures/hoqs", "err/*.{hoqs,expr}", err);
    });
}
