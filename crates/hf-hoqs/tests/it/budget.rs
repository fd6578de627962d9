//! The bound on the SQL one compile builds (functions that repeat their argument, nested, once
//! multiplied it to gigabytes): each expression of an object has the whole budget, however many
//! were compiled before it with the same compiler.

use hf_hoqs::{ExprCompiler, ExprUse, Params};
use hf_model::{QualifiedName, ScalarType};

use crate::support::demo;

/// `LN(` nested `depth` deep around `amount`.
fn nested_ln(depth: usize) -> String {
    format!("{}amount{}", "LN(".repeat(depth), ")".repeat(depth))
}

fn opportunity() -> QualifiedName {
    QualifiedName::parse("crm.opportunity").unwrap()
}

#[test]
fn each_expression_of_an_object_has_the_whole_budget() {
    let usage = ExprUse::Formula(ScalarType::Decimal);
    let mut probe = ExprCompiler::new(demo(), &opportunity(), "new", Params::new()).unwrap();
    // The deepest nesting that compiles on its own, and the first that does not.
    let deepest = (1..40)
        .take_while(|depth| {
            probe
                .compile(&nested_ln(*depth), usage)
                .unwrap()
                .expr
                .is_some()
        })
        .last()
        .unwrap();
    assert!((10..30).contains(&deepest), "{deepest}");
    let refused = probe.compile(&nested_ln(deepest + 1), usage).unwrap();
    assert!(refused.expr.is_none());
    assert!(
        refused.diagnostics[0].message.contains("too much SQL"),
        "{:?}",
        refused.diagnostics
    );

    // Ten of the largest, one compiler: every one compiles, and so does a field after them.
    let mut compiler = ExprCompiler::new(demo(), &opportunity(), "new", Params::new()).unwrap();
    for _ in 0..10 {
        let output = compiler.compile(&nested_ln(deepest), usage).unwrap();
        assert!(output.expr.is_some(), "{:?}", output.diagnostics);
    }
    assert!(compiler.field("amount").unwrap().is_some());
}
