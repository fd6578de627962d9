//! The one integration-test binary of hf-model, one module per feature.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails by panicking"
)]

mod demo;
mod edits;
mod files;
mod fixtures;
mod keys;
mod renames;

use std::path::PathBuf;

/// The repository's `fixtures/` directory.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}
