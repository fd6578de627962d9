//! Parse + type check + compile time of the benchmark query of issue 6: five paths, three
//! conditions, one join, over the demo CRM (target: under 20 µs).

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};

const QUERY: &str = "SELECT name, amount, close_date, account.name, account.industry \
FROM crm.opportunity \
WHERE stage = :stage AND amount > 100 AND account.industry IN ('Energy', 'Retail') \
ORDER BY amount DESC, name LIMIT 50";

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
}

criterion_group!(benches, bench);
criterion_main!(benches);
