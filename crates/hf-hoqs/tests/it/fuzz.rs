//! Property tests: random well-formed queries over the demo CRM, and random text, never make
//! the compiler panic; every outcome is either a statement or at least one diagnostic.

use hf_hoqs::compile_query;
use hf_hoqs::RequestParams;
use proptest::prelude::*;

use crate::support::demo;

/// Paths that exist on crm.opportunity, and a few that do not or are mistyped.
const PATHS: &[&str] = &[
    "name",
    "amount",
    "probability",
    "stage",
    "close_date",
    "weighted_amount",
    "account",
    "account.name",
    "account.industry",
    "account.opportunity_count",
    "account.won_amount",
    "account.pipeline_amount",
    "account.id",
    "id",
    "createdAt",
    "updatedAt",
    "nmae",
    "account.nmae",
    "name.first",
];

const LITERALS: &[&str] = &[
    "1",
    "0",
    "12.5",
    "'won'",
    "''",
    "NULL",
    "TRUE",
    "2024-01-31",
    "2024-01-31T10:00:00Z",
    ":p",
    ":n",
    "99999999999999999999999",
];

const FUNCTIONS: &[&str] = &[
    "UPPER",
    "LOWER",
    "LENGTH",
    "TRIM",
    "ABS",
    "ROUND",
    "COALESCE",
    "IF",
    "NOW",
    "TODAY",
    "CONCAT",
    "ADD_DAYS",
    "DAYS_BETWEEN",
    "YEAR",
    "GREATEST",
    "NULLIF",
    "SUBSTRING",
    "COUNT",
    "SUM",
    "MIN",
    "MAX",
    "AVG",
];

const BINARY: &[&str] = &[
    "+", "-", "*", "/", "||", "=", "!=", "<", ">=", "AND", "OR", "LIKE", "ILIKE",
];

fn expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        prop::sample::select(PATHS).prop_map(str::to_owned),
        prop::sample::select(LITERALS).prop_map(str::to_owned),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), prop::sample::select(BINARY), inner.clone())
                .prop_map(|(l, op, r)| format!("({l} {op} {r})")),
            (
                prop::sample::select(FUNCTIONS),
                prop::collection::vec(inner.clone(), 0..4)
            )
                .prop_map(|(f, args)| format!("{f}({})", args.join(", "))),
            inner.clone().prop_map(|e| format!("NOT {e}")),
            inner.clone().prop_map(|e| format!("{e} IS NULL")),
            (inner.clone(), prop::collection::vec(inner, 1..3))
                .prop_map(|(e, items)| format!("{e} IN ({})", items.join(", "))),
        ]
    })
}

fn query() -> impl Strategy<Value = String> {
    let objects = prop::sample::select(&["crm.opportunity", "crm.account", "crm.party"][..]);
    (
        any::<bool>(),
        prop::collection::vec(expr(), 1..4),
        objects,
        prop::option::of(expr()),
        prop::option::of(expr()),
        prop::option::of((expr(), any::<bool>())),
        prop::option::of(0u32..20_000),
        any::<bool>(),
    )
        .prop_map(
            |(distinct, items, object, condition, group, order, limit, subquery)| {
                let mut text = String::from("SELECT ");
                if distinct {
                    text.push_str("DISTINCT ");
                }
                let items: Vec<String> = items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| format!("{item} AS c{index}"))
                    .collect();
                text.push_str(&items.join(", "));
                if subquery {
                    text.push_str(
                        ", (SELECT name, amount FROM crm.opportunity.account LIMIT 3) AS deals",
                    );
                }
                text.push_str(" FROM ");
                text.push_str(object);
                if let Some(condition) = condition {
                    text.push_str(&format!(" WHERE {condition}"));
                }
                if let Some(group) = group {
                    text.push_str(&format!(" GROUP BY {group}"));
                }
                if let Some((order, descending)) = order {
                    let direction = if descending { " DESC NULLS LAST" } else { "" };
                    text.push_str(&format!(" ORDER BY {order}{direction}"));
                }
                if let Some(limit) = limit {
                    text.push_str(&format!(" LIMIT {limit}"));
                }
                text
            },
        )
}

fn params() -> RequestParams {
    serde_json::from_str(r#"{"p": "x", "n": 3}"#).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn well_formed_queries_never_panic(text in query()) {
        let output = compile_query(demo(), &text, &params()).unwrap();
        prop_assert!(output.query.is_some() == output.diagnostics.is_empty(), "{text}");
        if let Some(compiled) = output.query {
            // Every `$n` of the text has a value, and no value was spliced into the text.
            let count = compiled.params.len();
            prop_assert!(!compiled.sql.contains(&format!("${}", count + 1)), "{text}");
            prop_assert!(!compiled.sql.contains("'won'"), "{text}");
        }
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,200}") {
        let output = compile_query(demo(), &text, &params()).unwrap();
        prop_assert!(output.query.is_some() == output.diagnostics.is_empty());
    }
}
