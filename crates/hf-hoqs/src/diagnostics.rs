//! Every message of the type checker and the query compiler, in one file.
//!
//! Messages say what is wrong and how to fix it, name objects as `module.object` and fields
//! in backticks, and suggest a close name when one exists, so a person can fix a query without
//! the docs. The diagnostics themselves are `hf_hoqs_syntax::Diagnostic`s, so syntax, name and
//! type errors reach the HTTP layer in one shape.

use hf_hoqs_syntax::ast::Span;
use hf_hoqs_syntax::{Code, Diagnostic};
use hf_model::QualifiedName;

use crate::types::Type;

fn diagnostic(code: Code, message: String, span: Span) -> Diagnostic {
    Diagnostic {
        code,
        message,
        span,
    }
}

fn name_error(message: String, span: Span) -> Diagnostic {
    diagnostic(Code::UnknownName, message, span)
}

fn type_error(message: String, span: Span) -> Diagnostic {
    diagnostic(Code::TypeError, message, span)
}

fn shape_error(message: String, span: Span) -> Diagnostic {
    diagnostic(Code::SyntaxError, message, span)
}

fn suggestion(candidate: Option<&str>) -> String {
    match candidate {
        Some(candidate) => format!(" — did you mean `{candidate}`?"),
        None => String::new(),
    }
}

/// Articles for type names in messages ("an integer", "a text").
fn a(ty: Type) -> String {
    match ty {
        Type::Integer => "an integer".to_owned(),
        other => format!("a {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// Names.

pub(crate) fn unknown_module(module: &str, candidate: Option<&str>, span: Span) -> Diagnostic {
    name_error(
        format!("unknown module `{module}`{}", suggestion(candidate)),
        span,
    )
}

pub(crate) fn unknown_object(
    module: &str,
    object: &str,
    candidate: Option<&str>,
    span: Span,
) -> Diagnostic {
    name_error(
        format!(
            "unknown object `{object}` in module `{module}`{}",
            suggestion(candidate)
        ),
        span,
    )
}

pub(crate) fn unknown_field(
    field: &str,
    object: &QualifiedName,
    candidate: Option<&str>,
    span: Span,
) -> Diagnostic {
    let hint = match (candidate, field) {
        (Some(_), _) => suggestion(candidate),
        (None, "created_at" | "updated_at" | "created_by" | "updated_by") => {
            " — system fields are written `createdAt`, `updatedAt`, `createdBy` and `updatedBy`"
                .to_owned()
        }
        (None, _) => String::new(),
    };
    name_error(format!("unknown field `{field}` on {object}{hint}"), span)
}

pub(crate) fn not_a_lookup(
    field: &str,
    what: &str,
    object: &QualifiedName,
    span: Span,
) -> Diagnostic {
    type_error(
        format!(
            "`{field}` on {object} is {what}, not a lookup: a path can only continue after a lookup field"
        ),
        span,
    )
}

pub(crate) fn unknown_param(name: &str, span: Span) -> Diagnostic {
    name_error(
        format!("no value for the parameter `:{name}`: add `\"{name}\"` to `params`"),
        span,
    )
}

pub(crate) fn params_not_allowed(purpose: &str, span: Span) -> Diagnostic {
    shape_error(
        format!("parameters are only allowed in queries, not in {purpose}"),
        span,
    )
}

pub(crate) fn unknown_relationship(
    child: &QualifiedName,
    parent: &QualifiedName,
    span: Span,
) -> Diagnostic {
    name_error(
        format!("{child} has no lookup field to {parent}, so it is not a child relationship of it"),
        span,
    )
}

pub(crate) fn ambiguous_relationship(
    child: &QualifiedName,
    parent: &QualifiedName,
    lookups: &[String],
    span: Span,
) -> Diagnostic {
    let example = lookups.first().map(String::as_str).unwrap_or("lookup");
    name_error(
        format!(
            "{child} has several lookups to {parent} ({}): name one, like `{child}.{example}`",
            lookups.join(", ")
        ),
        span,
    )
}

pub(crate) fn lookup_not_to_parent(
    child: &QualifiedName,
    field: &str,
    target: &QualifiedName,
    parent: &QualifiedName,
    span: Span,
) -> Diagnostic {
    type_error(
        format!(
            "`{field}` on {child} looks up {target}, not {parent}: a subquery's FROM names a lookup that points at the outer object"
        ),
        span,
    )
}

// ---------------------------------------------------------------------------------------
// Types.

pub(crate) fn expected_boolean(clause: &str, found: Type, span: Span) -> Diagnostic {
    type_error(
        format!(
            "{clause} needs a boolean condition, but this is {}",
            a(found)
        ),
        span,
    )
}

pub(crate) fn operand_type(
    op: &str,
    side: &str,
    expected: &str,
    found: Type,
    span: Span,
) -> Diagnostic {
    type_error(
        format!(
            "`{op}` needs {expected} operands, but the {side} operand is {}",
            a(found)
        ),
        span,
    )
}

pub(crate) fn arithmetic_types(op: &str, left: Type, right: Type, span: Span) -> Diagnostic {
    let hint = match (left, right) {
        (Type::Text, _) | (_, Type::Text) if op == "+" => {
            ": to join text use `||` or CONCAT(...)".to_owned()
        }
        (Type::Datetime, Type::Datetime)
        | (Type::Date, Type::Datetime)
        | (Type::Datetime, Type::Date)
            if op == "-" =>
        {
            ": use DAYS_BETWEEN(from, to) for the days between two datetimes".to_owned()
        }
        _ => String::new(),
    };
    type_error(
        format!("cannot apply `{op}` to {} and {}{hint}", a(left), a(right)),
        span,
    )
}

pub(crate) fn incomparable(op: &str, left: Type, right: Type, span: Span) -> Diagnostic {
    type_error(
        format!(
            "cannot compare {} with {} using `{op}`: both sides need the same kind of value",
            a(left),
            a(right)
        ),
        span,
    )
}

pub(crate) fn unordered(op: &str, ty: Type, span: Span) -> Diagnostic {
    type_error(
        format!("{ty} values can only be compared with `=` and `!=`, not `{op}`"),
        span,
    )
}

pub(crate) fn mixed_list(what: &str, first: Type, other: Type, span: Span) -> Diagnostic {
    type_error(
        format!(
            "the values of {what} must have one type, but {} is mixed with {}",
            a(first),
            a(other)
        ),
        span,
    )
}

pub(crate) fn invalid_literal(ty: Type, text: &str, span: Span) -> Diagnostic {
    let shown: String = text.chars().take(40).collect();
    type_error(format!("'{shown}' is not a valid {ty}"), span)
}

pub(crate) fn param_type(name: &str, ty: Type, expected: &str, span: Span) -> Diagnostic {
    type_error(
        format!(
            "the parameter `:{name}` is used as {} here: {expected}",
            a(ty)
        ),
        span,
    )
}

pub(crate) fn param_not_array(name: &str, span: Span) -> Diagnostic {
    type_error(
        format!("`IN :{name}` takes the candidates from an array: give `\"{name}\"` a JSON array"),
        span,
    )
}

pub(crate) fn param_element_type(name: &str, ty: Type, expected: &str, span: Span) -> Diagnostic {
    type_error(
        format!(
            "the elements of `:{name}` are compared with {} here: {expected}",
            a(ty)
        ),
        span,
    )
}

pub(crate) fn in_array_needs_param(span: Span) -> Diagnostic {
    shape_error(
        "`IN` without parentheses takes an array parameter, like `IN :ids`".to_owned(),
        span,
    )
}

pub(crate) fn arity(function: &str, expected: &str, got: usize, span: Span) -> Diagnostic {
    let plural = if got == 1 { "" } else { "s" };
    type_error(
        format!("{function} takes {expected}, but got {got} argument{plural}"),
        span,
    )
}

pub(crate) fn argument_type(
    function: &str,
    position: usize,
    expected: &str,
    found: Type,
    span: Span,
) -> Diagnostic {
    type_error(
        format!(
            "argument {position} of {function} must be {expected}, but it is {}",
            a(found)
        ),
        span,
    )
}

pub(crate) fn star_argument(function: &str, span: Span) -> Diagnostic {
    shape_error(
        format!("`*` is only allowed in COUNT(*), not in {function}(*)"),
        span,
    )
}

pub(crate) fn distinct_argument(function: &str, span: Span) -> Diagnostic {
    shape_error(
        format!(
            "DISTINCT is only allowed in aggregates (COUNT, SUM, AVG, MIN, MAX), not in {function}"
        ),
        span,
    )
}

pub(crate) fn aggregate_not_allowed(function: &str, place: &str, span: Span) -> Diagnostic {
    let hint = match place {
        "WHERE" => ": filter groups with HAVING instead",
        "a formula" | "a rule" => ": to aggregate child records, use a rollup field",
        _ => "",
    };
    shape_error(
        format!("the aggregate {function} is not allowed in {place}{hint}"),
        span,
    )
}

pub(crate) fn nested_aggregate(function: &str, span: Span) -> Diagnostic {
    shape_error(
        format!("the aggregate {function} cannot be used inside another aggregate"),
        span,
    )
}

pub(crate) fn not_grouped(text: &str, span: Span) -> Diagnostic {
    type_error(
        format!(
            "`{text}` must appear in GROUP BY or be used inside an aggregate such as MAX({text})"
        ),
        span,
    )
}

pub(crate) fn broken_field(
    kind: &str,
    field: &str,
    object: &QualifiedName,
    problem: &str,
    span: Span,
) -> Diagnostic {
    diagnostic(
        Code::TypeError,
        format!("the {kind} of `{field}` on {object} does not compile: {problem}"),
        span,
    )
}

pub(crate) fn field_cycle(field: &str, object: &QualifiedName, span: Span) -> Diagnostic {
    type_error(
        format!("`{field}` on {object} is computed from itself (its formula, rollup or filter leads back to it)"),
        span,
    )
}

pub(crate) fn formula_type(
    field: &str,
    object: &QualifiedName,
    declared: Type,
    found: Type,
    span: Span,
) -> Diagnostic {
    type_error(
        format!(
            "the formula of `{field}` on {object} gives {}, but the field is declared {declared}",
            a(found)
        ),
        span,
    )
}

pub(crate) fn rollup_field_type(
    function: &str,
    field: &str,
    found: Type,
    span: Span,
) -> Diagnostic {
    type_error(
        format!(
            "the rollup function {function} cannot aggregate `{field}`, which is {}",
            a(found)
        ),
        span,
    )
}

pub(crate) fn too_complex(span: Span) -> Diagnostic {
    shape_error(
        "the query expands to too much SQL (functions or formulas nested in each other repeat \
         what they contain): simplify it"
            .to_owned(),
        span,
    )
}

// ---------------------------------------------------------------------------------------
// Query shape.

pub(crate) fn limit_too_large(value: &str, max: u64, span: Span) -> Diagnostic {
    diagnostic(
        Code::LimitTooLarge,
        format!("LIMIT {value} is above the maximum of {max} records: page with OFFSET"),
        span,
    )
}

pub(crate) fn row_count_type(clause: &str, name: &str, span: Span) -> Diagnostic {
    type_error(
        format!("the parameter `:{name}` of {clause} must be a whole number of at least 0"),
        span,
    )
}

pub(crate) fn offset_too_large(span: Span) -> Diagnostic {
    type_error(
        "OFFSET is too large: it must be at most 9223372036854775807".to_owned(),
        span,
    )
}

pub(crate) fn duplicate_key(key: &str, span: Span) -> Diagnostic {
    shape_error(
        format!("two select items have the key `{key}`: tell them apart with `AS another_name`"),
        span,
    )
}

pub(crate) fn too_many_items(max: usize, span: Span) -> Diagnostic {
    shape_error(format!("a query selects at most {max} items"), span)
}

pub(crate) fn too_many_sort_items(max: usize, span: Span) -> Diagnostic {
    shape_error(format!("a query sorts by at most {max} items"), span)
}

pub(crate) fn subquery_in_grouped(span: Span) -> Diagnostic {
    shape_error(
        "a child-relationship subquery cannot be combined with GROUP BY or aggregates".to_owned(),
        span,
    )
}

pub(crate) fn subquery_with_distinct(span: Span) -> Diagnostic {
    shape_error(
        "a child-relationship subquery cannot be combined with SELECT DISTINCT".to_owned(),
        span,
    )
}

pub(crate) fn distinct_in_subquery(span: Span) -> Diagnostic {
    shape_error(
        "SELECT DISTINCT is not supported in subqueries".to_owned(),
        span,
    )
}

pub(crate) fn distinct_order_by(span: Span) -> Diagnostic {
    shape_error(
        "with SELECT DISTINCT, ORDER BY can only use items of the select list (or their aliases)"
            .to_owned(),
        span,
    )
}

pub(crate) fn order_by_subquery(alias: &str, span: Span) -> Diagnostic {
    shape_error(
        format!("cannot sort by `{alias}`, which is a subquery"),
        span,
    )
}

pub(crate) fn includes_needs_multipicklist(what: &str, ty: Type, span: Span) -> Diagnostic {
    type_error(
        format!("{what} tests a multi-select picklist field, not {}", a(ty)),
        span,
    )
}

pub(crate) fn includes_item(what: &str, ty: Type, span: Span) -> Diagnostic {
    type_error(
        format!(
            "each item of {what} is a text of keys joined by `;`, like `'hot;q4'`, not {}",
            a(ty)
        ),
        span,
    )
}

pub(crate) fn unknown_choice(key: &str, field: &str, keys: &[&str], span: Span) -> Diagnostic {
    let shown: String = key.chars().take(80).collect();
    let candidate = hf_hoqs_syntax::functions::did_you_mean(key, keys);
    type_error(
        format!(
            "`{shown}` is not a choice of `{field}` ({}){}",
            keys.join(", "),
            suggestion(candidate)
        ),
        span,
    )
}

pub(crate) fn needs_picklist(function: &str, multi_too: bool, span: Span) -> Diagnostic {
    let (which, example) = if multi_too {
        (
            "a picklist or multi-select picklist field",
            "TOLABEL(stage)",
        )
    } else {
        ("a picklist field", "ISPICKVAL(stage, 'won')")
    };
    type_error(
        format!("{function} takes {which} of the record, like `{example}`"),
        span,
    )
}

pub(crate) fn escape_length(span: Span) -> Diagnostic {
    type_error(
        "the ESCAPE of a LIKE is exactly one character, like `ESCAPE '!'`".to_owned(),
        span,
    )
}

pub(crate) fn user_not_allowed(place: &str, span: Span) -> Diagnostic {
    type_error(
        format!("`$User` is not allowed in {place}: only queries and rules know the caller"),
        span,
    )
}

pub(crate) fn unknown_user_field(name: &str, span: Span) -> Diagnostic {
    let close = hf_hoqs_syntax::functions::did_you_mean(name, &["id", "name"]);
    let hint = match close {
        Some(_) => suggestion(close),
        None => ": it has `id` and `name`".to_owned(),
    };
    name_error(format!("unknown field `{name}` of `$User`{hint}"), span)
}

pub(crate) fn no_caller(span: Span) -> Diagnostic {
    type_error(
        "`$User` needs a caller, and this expression is compiled without one".to_owned(),
        span,
    )
}

pub(crate) fn date_range_operand(name: &str, ty: Type, span: Span) -> Diagnostic {
    type_error(
        format!(
            "`{name}` is a range of days: compare a date or datetime with it, not {}",
            a(ty)
        ),
        span,
    )
}

pub(crate) fn date_range_count(name: &str, span: Span) -> Diagnostic {
    type_error(
        format!(
            "the count of `{name}` must be a whole number reaching at most {} days (about 1000 years)",
            crate::expr::DATE_RANGE_MAX_DAYS
        ),
        span,
    )
}

pub(crate) fn date_range_outside_comparison(name: &str, span: Span) -> Diagnostic {
    type_error(
        format!(
            "`{name}` stands for a range of days and can only be compared with a date or datetime, like `close_date = {name}`"
        ),
        span,
    )
}

pub(crate) fn semi_join_operand(ty: Type, span: Span) -> Diagnostic {
    type_error(
        format!(
            "`IN (SELECT ...)` tests an id or lookup field (a uuid), not {}",
            a(ty)
        ),
        span,
    )
}

pub(crate) fn semi_join_from(span: Span) -> Diagnostic {
    shape_error(
        "the subquery of `IN (SELECT ...)` reads an object: `FROM <module>.<object>`".to_owned(),
        span,
    )
}

pub(crate) fn semi_join_select(span: Span) -> Diagnostic {
    type_error(
        "the subquery of `IN (SELECT ...)` selects exactly one id or lookup field, like `SELECT account FROM crm.opportunity`".to_owned(),
        span,
    )
}

pub(crate) fn semi_join_clauses(span: Span) -> Diagnostic {
    shape_error(
        "the subquery of `IN (SELECT ...)` may only have a WHERE clause (no DISTINCT, GROUP BY, HAVING, ORDER BY, LIMIT or OFFSET)".to_owned(),
        span,
    )
}

pub(crate) fn bad_regex(problem: &str, span: Span) -> Diagnostic {
    type_error(
        format!("this is not a valid regular expression: {problem}"),
        span,
    )
}

pub(crate) fn order_param_not_a_path(name: &str, span: Span) -> Diagnostic {
    type_error(
        format!(
            "`ORDER BY :{name}` sorts by the field the parameter names: give `\"{name}\"` a field or lookup path as text, like \"amount\" or \"account.name\""
        ),
        span,
    )
}

pub(crate) fn prior_only_in_rules(name: &str, span: Span) -> Diagnostic {
    type_error(
        format!("{name} is only available in validation rules, which see the record before and after a write"),
        span,
    )
}

pub(crate) fn prior_needs_field(span: Span) -> Diagnostic {
    type_error(
        "ISCHANGED and PRIORVALUE take a stored field of the record, like `PRIORVALUE(stage)`"
            .to_owned(),
        span,
    )
}

pub(crate) fn paging_shape(span: Span) -> Diagnostic {
    shape_error(
        "paging with a cursor reads records: no GROUP BY, HAVING, DISTINCT or aggregates"
            .to_owned(),
        span,
    )
}

pub(crate) fn paging_offset(span: Span) -> Diagnostic {
    shape_error(
        "paging with a cursor replaces OFFSET: send the previous page's `nextCursor` instead"
            .to_owned(),
        span,
    )
}
