//! Compile-time benchmarks: the HFX equivalent of the shared bench's `AccountList.svelte`
//! (~150 lines) with its ~200-line TypeScript sidecar, the sidecar alone, and the screen with its
//! markup repeated 5, 10 and 20 times (~520, ~800 and ~1 500 lines) to show how compile time
//! grows with the screen. `benches/compare/` times Svelte 5 and swc on the same inputs.

use criterion::{black_box, criterion_group, criterion_main, Criterion};

#[path = "support/inputs.rs"]
mod inputs;

use inputs::{scaled, SCREEN};

const SIDECAR: &str = include_str!("../../../fixtures/hfx/ok/account_list.ts");

fn bench(c: &mut Criterion) {
    let sizes: Vec<(usize, String)> = [5, 10, 20]
        .into_iter()
        .map(|times| (times, scaled(times)))
        .collect();
    for source in std::iter::once(SCREEN).chain(sizes.iter().map(|(_, s)| s.as_str())) {
        let out = hf_hfx::compile(source, Some(SIDECAR));
        assert!(out.diagnostics.is_empty(), "{:?}", out.diagnostics.first());
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
    for (times, source) in &sizes {
        let name = format!(
            "account_list_x{times}_screen_only_{}_lines",
            source.lines().count()
        );
        c.bench_function(&name, |b| {
            b.iter(|| hf_hfx::compile(black_box(source), None))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
