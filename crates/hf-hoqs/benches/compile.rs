//! Parse + type check + compile time of the benchmark queries over the demo CRM: five paths,
//! three conditions and one join (target: under 20 µs), and a semi-join with two relative date
//! literals and a CASE (target: under 30 µs).

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};

const QUERY: &str = "SELECT name, amount, close_date, account.name, account.industry \
FROM crm.opportunity \
WHERE stage = :stage AND amount > 100 AND account.industry IN ('Energy', 'Retail') \
ORDER BY amount DESC, name LIMIT 50";

/// A query with a semi-join, two relative date literals and a CASE (target: under 30 µs).
const SEMI_JOIN_QUERY: &str = "SELECT name, CASE WHEN industry = 'Energy' THEN 'energy' ELSE 'other' END AS sector \
FROM crm.account \
WHERE id IN (SELECT account FROM crm.opportunity WHERE close_date = THIS_QUARTER AND stage = :stage) \
AND createdAt >= LAST_N_DAYS:90 ORDER BY name LIMIT 50";

fn bench(c: &mut Criterion) {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo");
    let Ok(model) = hf_model::files::load_dir(&demo) else {
        panic!("cannot load {}", demo.display());
    };
    let Ok(params) = serde_json::from_str::<hf_hoqs::RequestParams>(r#"{"stage": "open"}"#) else {
        panic!("the parameters are not JSON");
    };
    c.bench_function("parse_only", |b| {
        b.iter(|| hf_hoqs_syntax::parse_query(std::hint::black_box(QUERY)))
    });
    c.bench_function("parse_check_compile_5_paths_3_conditions", |b| {
        b.iter(|| hf_hoqs::compile_query(&model, std::hint::black_box(QUERY), &params))
    });
    let caller = hf_hoqs::Caller {
        id: "6f9619ff-8b86-d011-b42d-00c04fc964ff".to_owned(),
        name: "ada".to_owned(),
    };
    let options = hf_hoqs::QueryOptions {
        params: &params,
        time_zone: Some("Pacific/Auckland"),
        caller: Some(&caller),
        page: None,
    };
    c.bench_function("parse_check_compile_semi_join_2_date_literals_case", |b| {
        b.iter(|| {
            hf_hoqs::compile_query_with(&model, std::hint::black_box(SEMI_JOIN_QUERY), options)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
