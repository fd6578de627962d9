//! The one integration-test binary of hf-ddl: one module per feature.

mod db;
mod failed_apply;
mod fixtures;
mod hand_changes;
mod model_fixtures;
mod random_edits;
mod roundtrip;
