//! The inputs of the compile benchmarks, shared by the criterion benchmark and the
//! instruction-count driver (`examples/profile.rs`) so both measure the same screens.

/// The HFX twin of the shared benchmark's `AccountList.svelte`.
pub const SCREEN: &str = include_str!("../../../../fixtures/hfx/ok/account_list.hfx");

/// The screen with its markup repeated `times` times (script and style once).
pub fn scaled(times: usize) -> String {
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
