//! The examples in docs/hoqs.md and docs/formulas.md must parse, so the docs cannot rot.

use hf_hoqs_syntax::functions::{check_function_names, check_query_function_names};
use hf_hoqs_syntax::{parse_expression, parse_query};

/// The fenced code blocks of a markdown file.
fn code_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        if line.starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(String::new()),
            }
        } else if let Some(block) = &mut current {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

fn read_doc(name: &str) -> String {
    let path = format!("{}/../../docs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn query_examples_parse() {
    let mut checked = 0;
    for block in code_blocks(&read_doc("hoqs.md")) {
        // Grammar sketches (`<moduleKey>`) and error renderings are not queries.
        if !block.starts_with("SELECT") || block.contains("<moduleKey>") {
            continue;
        }
        let result = parse_query(&block);
        assert!(
            result.diagnostics.is_empty(),
            "{block}\n{:?}",
            result.diagnostics
        );
        let names = check_query_function_names(&result.query.unwrap());
        assert!(names.is_empty(), "{block}\n{names:?}");
        checked += 1;
    }
    assert!(checked >= 4, "only {checked} examples found");
}

#[test]
fn formula_examples_parse() {
    let blocks = code_blocks(&read_doc("formulas.md"));
    let examples = blocks.first().unwrap();
    for line in examples.lines() {
        let result = parse_expression(line);
        assert!(
            result.diagnostics.is_empty(),
            "{line}\n{:?}",
            result.diagnostics
        );
        assert!(
            check_function_names(&result.expr.unwrap()).is_empty(),
            "{line}"
        );
    }
}
