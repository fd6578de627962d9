//! The types of a model's expressions, a rule of every metadata write.
//!
//! The model's own validation knows the syntax and the names of formulas, rule assertions and
//! rollup filters, not their types: only the HOQS compiler does, and the model cannot depend on
//! it. So a formula `'abc'` declared integer, or `ISNEW()` (a rule's function) in a formula,
//! passed validation and then failed every read of its object. Here every expression of the
//! model is compiled as its reads and writes will compile it, and a write may not add a problem
//! (as with the model's validation, problems already stored do not block other writes).

use hf_hoqs::{ExprCompiler, ExprUse, Params, PriorRow};
use hf_model::{Diagnostic, FieldKind, Model, QualifiedName, Target};

/// Every expression of `model` that does not compile, as an `INVALID_EXPRESSION` problem of its
/// field (`formula`, `filter`) or rule (`assert`), with the compiler's message and place.
pub(crate) fn expression_problems(model: &Model) -> Vec<Diagnostic> {
    let mut problems = Vec::new();
    for module in model.modules.values() {
        for object in module.objects.values() {
            let name = QualifiedName::new(&module.key, &object.key);
            for (key, field) in &object.fields {
                let target = Target::field(&name, key);
                match &field.kind {
                    FieldKind::Formula {
                        formula,
                        field_type,
                    } => {
                        let usage = ExprUse::Formula(*field_type);
                        problems.extend(check(model, &name, formula, usage, &target, "formula"));
                    }
                    FieldKind::Rollup {
                        source,
                        filter: Some(filter),
                        ..
                    } if model.object(&source.object).is_some() => {
                        let usage = ExprUse::RollupFilter;
                        problems.extend(check(
                            model,
                            &source.object,
                            filter,
                            usage,
                            &target,
                            "filter",
                        ));
                    }
                    _ => {}
                }
            }
            for (key, rule) in &object.rules {
                let target = Target::rule(&name, key);
                problems.extend(check(
                    model,
                    &name,
                    &rule.assert,
                    ExprUse::Assert,
                    &target,
                    "assert",
                ));
            }
        }
    }
    problems
}

/// The problems of one expression read from records of `object`. A rule's assertion may read
/// the stored record and the caller, as rules do when they run.
fn check(
    model: &Model,
    object: &QualifiedName,
    text: &str,
    usage: ExprUse,
    target: &Target,
    property: &'static str,
) -> Vec<Diagnostic> {
    let Ok(mut compiler) = ExprCompiler::new(model, object, "new", Params::new()) else {
        return Vec::new();
    };
    if usage == ExprUse::Assert {
        compiler = compiler.for_rules(PriorRow::Row("\"old\"".to_owned()));
    }
    // A failure of the compiler itself (not a problem of the text) is left to the reads, which
    // report it where it happens.
    let Ok(output) = compiler.compile(text, usage) else {
        return Vec::new();
    };
    output
        .diagnostics
        .iter()
        .map(|diagnostic| {
            let at = hf_hoqs_syntax::location::locate(text, diagnostic.span.start);
            let problem = format!(
                "{} (line {}, column {})",
                diagnostic.message, at.line, at.column
            );
            Diagnostic::invalid_expression(target.clone(), property, &problem)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_has_no_expression_problems_and_a_wrong_type_is_one() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo");
        let mut model = hf_model::files::load_dir(&dir).expect("the demo loads");
        assert_eq!(expression_problems(&model), Vec::new());
        let deal = QualifiedName::new("crm", "opportunity");
        let kind = FieldKind::Formula {
            formula: "'abc'".to_owned(),
            field_type: hf_model::ScalarType::Integer,
        };
        model
            .create_field(&deal, hf_model::Field::new("wrong", "Wrong", kind))
            .expect("a valid field by the model's own rules");
        let problems = expression_problems(&model);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].target, Target::field(&deal, "wrong"));
        assert_eq!(problems[0].property, Some("formula"));
        assert!(
            problems[0].message.contains("declared integer"),
            "{}",
            problems[0].message
        );
    }
}
