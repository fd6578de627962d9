//! The one place where model validation checks formula, rule and filter expressions.
//!
//! An expression is parsed with `hf-hoqs-syntax` and its names are checked against the model:
//! function names, and every field path (`amount`, `account.owner.name`) must resolve through
//! lookups to a field or system field of the object. So a metadata write with a misspelled
//! field is refused with a located message, instead of failing later in every query. Types are
//! checked by `hf-hoqs` (which this crate cannot depend on); names are what a write must get
//! right. Each check is a parse and a few map lookups, so validating a whole model stays fast.

use hf_hoqs_syntax::ast::{BinaryOp, CallArgs, Expr, ExprKind, Literal, Path};
use hf_hoqs_syntax::functions::{
    check_function_names, did_you_mean, lookup, regex_problem, FunctionKind,
};
use hf_hoqs_syntax::location::locate;
use hf_hoqs_syntax::parse_expression;

use crate::key::QualifiedName;
use crate::model::{Field, FieldKind, Model};

/// The system fields every record has, as expressions write them.
const SYSTEM_FIELDS: [&str; 5] = ["id", "createdAt", "updatedAt", "createdBy", "updatedBy"];

/// Checks one expression (a formula, a rule's `assert`, a rollup's `filter`) whose paths are
/// read from records of `object` (for a filter: the rollup's source object).
///
/// Returns every problem as a message ending with its place in the text (`(line 1, column
/// 8)`); an empty list means the expression is acceptable.
pub fn check_expression(model: &Model, object: &QualifiedName, text: &str) -> Vec<String> {
    let located = |message: &str, offset: usize| {
        let location = locate(text, offset);
        format!(
            "{message} (line {}, column {})",
            location.line, location.column
        )
    };
    if text.trim().is_empty() {
        return vec!["the expression is empty".to_owned()];
    }
    let parsed = parse_expression(text);
    let Some(expr) = parsed.expr else {
        return parsed
            .diagnostics
            .iter()
            .map(|diagnostic| located(&diagnostic.message, diagnostic.span.start))
            .collect();
    };
    let mut problems: Vec<String> = check_function_names(&expr)
        .iter()
        .map(|diagnostic| located(&diagnostic.message, diagnostic.span.start))
        .collect();
    expr.walk(&mut |node| {
        let at = |problem: String| (problem, node.span.start);
        let problem = match &node.kind {
            ExprKind::Param(name) => Some(at(format!(
                "parameters such as `:{name}` are only allowed in queries"
            ))),
            ExprKind::Call { name, args } => {
                let aggregate =
                    lookup(&name.name).is_some_and(|f| f.kind == FunctionKind::Aggregate);
                let star = matches!(args, CallArgs::Star);
                match (aggregate, star) {
                    (true, _) => Some(at(format!(
                        "the aggregate {} is not allowed here: to aggregate child records, use a rollup field",
                        name.name.to_ascii_uppercase()
                    ))),
                    (false, true) => Some(at(format!("`*` is only allowed in COUNT(*), not in {}", name.name))),
                    (false, false) => regex_literal_problem(&name.name, args),
                }
            }
            ExprKind::Path(path) => path_problem(model, object, path).map(at),
            _ => None,
        };
        if let Some((problem, offset)) = problem {
            problems.push(located(&problem, offset));
        }
        for (problem, offset) in choice_problems(model, object, node) {
            problems.push(located(&problem, offset));
        }
    });
    problems
}

/// Text literals that stand for keys of a picklist field but are not among its choices:
/// `stage = 'wonn'`, `stage IN (...)`, `ISPICKVAL(stage, 'wonn')`, `tags INCLUDES ('hot;q5')`.
/// A key is like a name: a rule that tests one the field does not have can never hold as
/// meant, so the write is refused.
fn choice_problems(model: &Model, object: &QualifiedName, node: &Expr) -> Vec<(String, usize)> {
    let (operand, literals): (&Expr, Vec<&Expr>) = match &node.kind {
        ExprKind::Binary {
            op: BinaryOp::Eq | BinaryOp::NotEq,
            left,
            right,
        } => match (&left.kind, &right.kind) {
            (ExprKind::Path(_), _) => (left, vec![right]),
            (_, ExprKind::Path(_)) => (right, vec![left]),
            _ => return Vec::new(),
        },
        ExprKind::InList { operand, items, .. } | ExprKind::Includes { operand, items, .. } => {
            (operand, items.iter().collect())
        }
        ExprKind::Call {
            name,
            args: CallArgs::List { items, .. },
        } if name.name.eq_ignore_ascii_case("ISPICKVAL") && items.len() == 2 => {
            (&items[0], vec![&items[1]])
        }
        _ => return Vec::new(),
    };
    let ExprKind::Path(path) = &operand.kind else {
        return Vec::new();
    };
    let Some(field) = path_field(model, object, path) else {
        return Vec::new();
    };
    if !field.value_type().is_picklist() {
        return Vec::new();
    }
    let keys: Vec<&str> = field
        .picklist_values()
        .iter()
        .map(|value| value.key.as_str())
        .collect();
    let mut problems = Vec::new();
    for literal in literals {
        let ExprKind::Literal(Literal::String(text)) = &literal.kind else {
            continue;
        };
        for key in text.split(';').filter(|key| !keys.contains(key)) {
            let shown: String = key.chars().take(80).collect();
            let hint = match did_you_mean(key, &keys) {
                Some(candidate) => format!(" — did you mean `{candidate}`?"),
                None => String::new(),
            };
            let message = format!(
                "`{shown}` is not a choice of `{}` ({}){hint}",
                field.key,
                keys.join(", ")
            );
            problems.push((message, literal.span.start));
        }
    }
    problems
}

/// The field a path names from `object`, following lookups; `None` when it names none.
fn path_field<'m>(model: &'m Model, object: &QualifiedName, path: &Path) -> Option<&'m Field> {
    let (last, lookups) = path.segments.split_last()?;
    let mut current = object.clone();
    for segment in lookups {
        match &model.effective_field(&current, &segment.name)?.field.kind {
            FieldKind::Lookup { target, .. } => current = target.clone(),
            _ => return None,
        }
    }
    model
        .effective_field(&current, &last.name)
        .map(|effective| effective.field)
}

/// A `REGEX(text, 'pattern')` whose pattern literal PostgreSQL would refuse, so a rule with a
/// broken pattern is refused when it is written rather than failing every write; located at
/// the pattern literal (its byte offset), where the mistake is.
fn regex_literal_problem(name: &str, args: &CallArgs) -> Option<(String, usize)> {
    if !name.eq_ignore_ascii_case("REGEX") {
        return None;
    }
    let CallArgs::List { items, .. } = args else {
        return None;
    };
    let pattern = items.get(1)?;
    match &pattern.kind {
        ExprKind::Literal(Literal::String(text)) => regex_problem(text).map(|problem| {
            let message =
                format!("the pattern of REGEX is not a valid regular expression: {problem}");
            (message, pattern.span.start)
        }),
        _ => None,
    }
}

/// Why a field path does not resolve on `object`, if it does not.
fn path_problem(model: &Model, object: &QualifiedName, path: &Path) -> Option<String> {
    let mut current = object.clone();
    let count = path.segments.len();
    for (index, segment) in path.segments.iter().enumerate() {
        let last = index + 1 == count;
        if SYSTEM_FIELDS.contains(&segment.name.as_str()) {
            return (!last).then(|| {
                format!(
                    "`{}` is a system field of {current}, not a lookup: a path can only continue after a lookup field",
                    segment.name
                )
            });
        }
        let Some(effective) = model.effective_field(&current, &segment.name) else {
            let fields = model.effective_fields(&current);
            let mut names: Vec<&str> = fields.iter().map(|f| f.field.key.as_str()).collect();
            names.extend(SYSTEM_FIELDS);
            let hint = match did_you_mean(&segment.name, &names) {
                Some(candidate) => format!(" — did you mean `{candidate}`?"),
                None => String::new(),
            };
            return Some(format!(
                "unknown field `{}` on {current}{hint}",
                segment.name
            ));
        };
        if last {
            return None;
        }
        match &effective.field.kind {
            FieldKind::Lookup { target, .. } => {
                // A missing target is reported on the lookup itself, not here.
                model.object(target)?;
                current = target.clone();
            }
            other => {
                return Some(format!(
                    "`{}` on {current} is a {} field, not a lookup: a path can only continue after a lookup field",
                    segment.name,
                    other.name()
                ))
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Field, Module, Object, ScalarType};

    fn model() -> (Model, QualifiedName) {
        let mut object = Object::new("deal", "Deal");
        let amount = FieldKind::Scalar {
            field_type: ScalarType::Decimal,
            required: false,
            unique: false,
            indexed: false,
            values: Vec::new(),
            default_value: None,
        };
        object
            .fields
            .insert("amount".into(), Field::new("amount", "Amount", amount));
        let mut module = Module::new("crm", "CRM");
        module.objects.insert("deal".into(), object);
        let mut model = Model::default();
        model.modules.insert("crm".into(), module);
        (model, QualifiedName::new("crm", "deal"))
    }

    #[test]
    fn accepts_known_names() {
        let (model, deal) = model();
        assert!(check_expression(&model, &deal, "amount * 2 > 0 AND id IS NOT NULL").is_empty());
    }

    #[test]
    fn locates_every_problem() {
        let (model, deal) = model();
        let problems = check_expression(&model, &deal, "amout > :x OR UPPR(amount) = COUNT(*)");
        assert_eq!(
            problems,
            vec![
                "unknown function `UPPR` — did you mean `UPPER`? (line 1, column 15)",
                "unknown field `amout` on crm.deal — did you mean `amount`? (line 1, column 1)",
                "parameters such as `:x` are only allowed in queries (line 1, column 9)",
                "the aggregate COUNT is not allowed here: to aggregate child records, use a rollup field (line 1, column 30)",
            ]
        );
        assert_eq!(
            check_expression(&model, &deal, "amount.x"),
            vec!["`amount` on crm.deal is a scalar field, not a lookup: a path can only continue after a lookup field (line 1, column 1)"]
        );
        assert_eq!(
            check_expression(&model, &deal, " "),
            vec!["the expression is empty"]
        );
        assert_eq!(
            check_expression(&model, &deal, "amount >"),
            vec!["expected an expression after `>`, found the end of the expression (line 1, column 9)"]
        );
    }
}
