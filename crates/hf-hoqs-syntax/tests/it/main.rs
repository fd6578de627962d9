//! The one integration-test binary of hf-hoqs-syntax, one module per feature.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions may panic on a broken fixture"
)]

mod docs;
mod fixtures;
mod limits;
mod location;
mod names;
mod roundtrip;
mod support;
