//! The one integration-test binary of hf-hoqs, one module per feature.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions may panic on a broken fixture"
)]

mod budget;
mod database;
mod docs;
mod fixtures;
mod fuzz;
mod support;
