//! Parse time of a typical query: five paths (two through lookups) and three conditions.
//!
//! The budget for parse + check + compile is 20 µs; this measures the parse share.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use hf_hoqs_syntax::{parse_expression, parse_query};

const QUERY: &str = "SELECT name, amount, stage, account.name, account.owner.name \
                     FROM crm.opportunity \
                     WHERE amount >= :min AND stage IN ('won', 'open') AND account.name LIKE 'A%' \
                     ORDER BY amount DESC NULLS LAST LIMIT 50";

const FORMULA: &str = "IF(stage = 'won', ROUND(amount * 1.2, 2), 0)";

fn parse(c: &mut Criterion) {
    c.bench_function("parse_query 5 paths 3 conditions", |b| {
        b.iter(|| parse_query(black_box(QUERY)))
    });
    c.bench_function("parse_expression formula", |b| {
        b.iter(|| parse_expression(black_box(FORMULA)))
    });
}

criterion_group!(benches, parse);
criterion_main!(benches);
