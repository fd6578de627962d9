//! Data-driven validation tests over `fixtures/model/{ok,err,load_err}/<case>/`.
//!
//! Each case is a metadata directory. `ok` cases must load and validate clean; their snapshot is
//! the canonical rendering of the model. `err` cases must load and produce at least one
//! diagnostic; their snapshot lists every diagnostic with its file and target. `load_err` cases
//! must fail to load; their snapshot is the error, naming the file (and line when known).

use std::path::Path;

use hf_model::{files, validate};

fn cases(side: &str) -> Vec<(String, std::path::PathBuf)> {
    let dir = super::fixtures_dir().join("model").join(side);
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            (
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            )
        })
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases in {}", dir.display());
    cases
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../../../../fixtures/model/snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

fn render_model(dir: &Path) -> String {
    let model = files::load_dir(dir).unwrap();
    let mut out = String::new();
    for (path, text) in files::render(&model).unwrap() {
        out.push_str(&format!("=== {path}\n{text}"));
    }
    out
}

#[test]
fn ok_cases_validate_clean() {
    for (case, dir) in cases("ok") {
        let model = files::load_dir(&dir).unwrap_or_else(|e| panic!("{case}: {e}"));
        let problems = validate(&model);
        assert!(problems.is_empty(), "{case}: {problems:#?}");
        snapshot(&format!("ok__{case}"), &render_model(&dir));
    }
}

#[test]
fn err_cases_report_every_problem() {
    for (case, dir) in cases("err") {
        let model = files::load_dir(&dir).unwrap_or_else(|e| panic!("{case}: {e}"));
        let problems = validate(&model);
        assert!(!problems.is_empty(), "{case}: expected diagnostics");
        let mut out = String::new();
        for problem in &problems {
            out.push_str(&format!(
                "{}: {} [{}]{}\n    {}\n",
                problem.file(),
                problem.target,
                problem.code.name(),
                problem
                    .property
                    .map(|p| format!(" at {p}"))
                    .unwrap_or_default(),
                problem.message,
            ));
        }
        snapshot(&format!("err__{case}"), &out);
    }
}

#[test]
fn load_err_cases_name_the_file() {
    for (case, dir) in cases("load_err") {
        let error = match files::load_dir(&dir) {
            Ok(_) => panic!("{case}: expected a load error"),
            Err(error) => error,
        };
        snapshot(
            &format!("load_err__{case}"),
            &format!("{error}\n{error:?}\n"),
        );
    }
}
