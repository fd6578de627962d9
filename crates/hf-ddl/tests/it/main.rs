//! The one integration-test binary of hf-ddl: one module per feature.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

mod db;
mod failed_apply;
mod fixtures;
mod hand_changes;
mod introspection;
mod model_fixtures;
mod random_edits;
mod roundtrip;
