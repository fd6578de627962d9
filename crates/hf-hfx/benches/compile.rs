//! Compile-time benchmarks: the HFX equivalent of the shared bench's `AccountList.svelte`
//! (~150 lines) with its ~200-line TypeScript sidecar, the sidecar alone, and a ~1 500-line
//! screen (the same markup ten times) to show that compile time grows linearly.

use criterion::{black_box, criterion_group, criterion_main, Criterion};

const SCREEN: &str = include_str!("../../../fixtures/hfx/ok/account_list.hfx");
const SIDECAR: &str = include_str!("../../../fixtures/hfx/ok/account_list.ts");

/// The screen with its markup repeated `times` times (script and style once).
fn scaled(times: usize) -> String {
    let markup_start = SCREEN.find("<section").unwrap_or(0);
    let markup_end = SCREEN.find("<style>").unwrap_or(SCREEN.len());
    let markup = &SCREEN[markup_start..markup_end];
    format!(
        "{}{}{}",
        &SCREEN[..markup_start],
        markup.repeat(times),
        &SCREEN[markup_end..]
    )
}

fn bench(c: &mut Criterion) {
    let large = scaled(10);
    for (name, source) in [
        ("screen_150_lines", SCREEN),
        ("screen_1500_lines", large.as_str()),
    ] {
        let out = hf_hfx::compile(source, Some(SIDECAR));
        assert!(
            out.diagnostics.is_empty(),
            "{name}: {:?}",
            out.diagnostics.first()
        );
    }
    c.bench_function("account_list_with_sidecar", |b| {
        b.iter(|| hf_hfx::compile(black_box(SCREEN), Some(black_box(SIDECAR))))
    });
    c.bench_function("account_list_screen_only", |b| {
        b.iter(|| hf_hfx::compile(black_box(SCREEN), None))
    });
    c.bench_function("sidecar_only", |b| {
        b.iter(|| hf_hfx::compile_sidecar(black_box(SIDECAR)))
    });
    c.bench_function("account_list_x10_screen_only", |b| {
        b.iter(|| hf_hfx::compile(black_box(&large), None))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
