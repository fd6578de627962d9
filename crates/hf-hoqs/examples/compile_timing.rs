//! Times parse + type check + compile of two benchmark queries over the demo CRM, in
//! wall-clock and in this thread's CPU time, so the figure holds on a machine busy with other
//! work: five paths and three conditions, then a semi-join with two date literals and a CASE.
//!
//! `cargo run --release -p hf-hoqs --example compile_timing [ITERATIONS [five-paths|semi-join]]`:
//! a small count and one query (`compile_timing 2000 semi-join`) suit counting instructions
//! with `valgrind --tool=callgrind`, which gives the same figure on a busy machine.

use std::path::Path;
use std::time::Instant;

const QUERY: &str = "SELECT name, amount, close_date, account.name, account.industry \
FROM crm.opportunity \
WHERE stage = :stage AND amount > 100 AND account.industry IN ('Energy', 'Retail') \
ORDER BY amount DESC, name LIMIT 50";

/// A query with a semi-join, two relative date literals and a CASE (target: under 30 µs).
const SEMI_JOIN_QUERY: &str = "SELECT name, CASE WHEN industry = 'Energy' THEN 'energy' ELSE 'other' END AS sector \
FROM crm.account \
WHERE id IN (SELECT account FROM crm.opportunity WHERE close_date = THIS_QUARTER AND stage = :stage) \
AND createdAt >= LAST_N_DAYS:90 ORDER BY name LIMIT 50";

/// How many times each query is compiled when no count is given.
const ITERATIONS: u32 = 200_000;

/// This thread's CPU time in nanoseconds.
fn thread_cpu_nanos() -> u128 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the duration of the call.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime failed");
    now.tv_sec as u128 * 1_000_000_000 + now.tv_nsec as u128
}

/// Runs `compile` `iterations` times after a warm-up and prints the CPU and wall time of one.
fn time(label: &str, iterations: u32, compile: impl Fn() -> bool) {
    assert!(compile(), "the {label} query does not compile");
    for _ in 0..iterations / 20 {
        std::hint::black_box(compile());
    }
    let (wall, cpu) = (Instant::now(), thread_cpu_nanos());
    for _ in 0..iterations {
        std::hint::black_box(compile());
    }
    let cpu = (thread_cpu_nanos() - cpu) as f64 / f64::from(iterations) / 1000.0;
    let wall = wall.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
    println!("parse + check + compile, {label}: {cpu:.2} µs CPU, {wall:.2} µs wall per query");
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iterations: u32 = match args.next() {
        Some(count) => count
            .parse()
            .unwrap_or_else(|_| panic!("not a count of iterations: {count}")),
        None => ITERATIONS,
    };
    let only = args.next();
    let wanted = |name: &str| only.as_deref().is_none_or(|only| only == name);

    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo");
    let Ok(model) = hf_model::files::load_dir(&demo) else {
        panic!("cannot load the demo model from {}", demo.display());
    };
    let Ok(params) = serde_json::from_str::<hf_hoqs::RequestParams>(r#"{"stage": "open"}"#) else {
        panic!("the parameters are not JSON");
    };
    let compiles = |output: Result<hf_hoqs::QueryOutput, hf_hoqs::Error>| {
        matches!(output, Ok(hf_hoqs::QueryOutput { query: Some(_), .. }))
    };
    if wanted("five-paths") {
        time("5 paths, 3 conditions", iterations, || {
            compiles(hf_hoqs::compile_query(
                &model,
                std::hint::black_box(QUERY),
                &params,
            ))
        });
    }

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
    if wanted("semi-join") {
        time("semi-join + 2 date literals + CASE", iterations, || {
            compiles(hf_hoqs::compile_query_with(
                &model,
                std::hint::black_box(SEMI_JOIN_QUERY),
                options,
            ))
        });
    }
}
