//! Function-name checks, "did you mean" suggestions, select-item result keys and parameter names.

use hf_hoqs_syntax::functions::{check_function_names, did_you_mean, lookup, FunctionKind};
use hf_hoqs_syntax::{parameter_names, parse_expression, parse_query, Code};

#[test]
fn function_names_are_case_insensitive() {
    assert_eq!(lookup("upper").map(|f| f.name), Some("UPPER"));
    assert_eq!(
        lookup("Count").map(|f| f.kind),
        Some(FunctionKind::Aggregate)
    );
    assert!(lookup("uppr").is_none());
}

#[test]
fn typos_get_a_suggestion() {
    let expr = parse_expression("UPPR(name) || coalese(a, b) || frobnicate(1)")
        .expr
        .unwrap();
    let messages: Vec<(Code, String)> = check_function_names(&expr)
        .into_iter()
        .map(|d| (d.code, d.message))
        .collect();
    assert_eq!(
        messages,
        vec![
            (
                Code::UnknownName,
                "unknown function `UPPR` — did you mean `UPPER`?".to_string()
            ),
            (
                Code::UnknownName,
                "unknown function `coalese` — did you mean `COALESCE`?".to_string()
            ),
            (
                Code::UnknownName,
                "unknown function `frobnicate`: see docs/formulas.md for the list of functions"
                    .to_string()
            ),
        ]
    );
}

#[test]
fn did_you_mean_handles_swaps_and_distance() {
    let fields = ["name", "amount", "account", "createdAt"];
    assert_eq!(did_you_mean("nmae", &fields), Some("name"));
    assert_eq!(did_you_mean("accout", &fields), Some("account"));
    assert_eq!(
        did_you_mean("createdat", &fields),
        None,
        "exact ignoring case"
    );
    assert_eq!(did_you_mean("created_at", &fields), Some("createdAt"));
    assert_eq!(did_you_mean("xyz", &fields), None);
    assert_eq!(did_you_mean("", &fields), None);
}

#[test]
fn result_keys_follow_the_contract() {
    let query = parse_query(
        "SELECT account.name, COUNT( * ), Sum(amount), amount * 2 AS double, \
         upper(name || ' X'), (SELECT amount FROM crm.opportunity.account), \
         (SELECT amount FROM crm.opportunity.account) AS opps FROM crm.account",
    )
    .query
    .unwrap();
    let keys: Vec<String> = query.select.iter().map(|item| item.key()).collect();
    assert_eq!(
        keys,
        [
            "account.name",
            "count(*)",
            "sum(amount)",
            "double",
            "upper(name||' X')",
            "opportunity",
            "opps"
        ]
    );
    assert_eq!(query.select[1].text, "COUNT( * )");
}

#[test]
fn into_result_gives_an_error_with_the_diagnostics() {
    let error = parse_query("SELECT & FROM").into_result().unwrap_err();
    assert_eq!(
        error.to_string(),
        "`&` is not an operator: use `||` to concatenate text"
    );
    let error = parse_expression("a $ b # c").into_result().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unexpected character `$` (and 1 more problem)"
    );
    assert!(parse_expression("a + 1").into_result().is_ok());
}

#[test]
fn parameter_names_come_from_the_tokens() {
    let source = "SELECT name FROM crm.account WHERE name = ':not' AND \"a:b\" = :min \
                  AND created > LAST_N_DAYS:30 AND x IN :list AND y > :min";
    assert_eq!(parameter_names(source), ["min", "list"]);
    assert!(parameter_names("SELECT id FROM crm.account").is_empty());
    assert!(parameter_names(&"x".repeat(70 * 1024)).is_empty());
}
