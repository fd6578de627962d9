//! Every example of docs/hoqs.md and docs/formulas.md compiles against the demo CRM (the
//! picklist examples against the `sales` test model; the database test runs them all), so the language reference cannot drift from the compiler.

use crate::support::{compile_doc, doc_queries, render};

#[test]
fn doc_examples_compile_against_the_demo() {
    let (queries, params) = doc_queries();
    assert!(queries.len() >= 12, "only {} examples", queries.len());
    for query in &queries {
        let output = compile_doc(query, &params);
        assert!(
            output.query.is_some(),
            "{query}\n{}",
            render(query, &output.diagnostics)
        );
    }
}
