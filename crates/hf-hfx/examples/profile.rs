//! A driver for instruction-count profiling of warm compiles, which wall-clock benchmarks on a
//! busy machine cannot measure repeatably:
//! `valgrind --tool=callgrind --toggle-collect=profile::measured target/release/examples/profile [TIMES] [ROUNDS]`
//! compiles the benchmark's screen (its markup repeated TIMES times, default 1) once to warm the
//! compiler's arenas, then ROUNDS more times (default 10) inside `measured`.

use std::hint::black_box;

#[path = "../benches/support/inputs.rs"]
mod inputs;

use inputs::scaled;

#[inline(never)]
fn measured(source: &str, rounds: usize) -> usize {
    (0..rounds)
        .map(|_| {
            hf_hfx::compile(black_box(source), None)
                .js
                .map_or(0, |js| js.len())
        })
        .sum()
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let times = args.next().flatten().unwrap_or(1);
    let rounds = args.next().flatten().unwrap_or(10);
    let source = scaled(times);
    let warm = hf_hfx::compile(&source, None);
    assert!(warm.diagnostics.is_empty(), "{:?}", warm.diagnostics);
    println!("{}", measured(&source, rounds));
}
