//! The metadata as an ordinary git repository: `hf metadata export DIR` writes every branch with
//! its full history, `hf metadata import DIR` loads one back (creating new branches,
//! fast-forwarding the others, refusing everything when one diverged).
//!
//! An import that creates or moves the live branch is a write to the live branch, so it keeps
//! the rules every live write keeps: its DDL runs in the import's transaction (a plan that would
//! lose data refuses the whole import), and it may not break a screen that works in the live
//! branch's previous model (the rule [`App::apply`](crate::App::apply) keeps too), checked under
//! the lock that serialises live writes.

use std::path::Path;

use hf_model::Model;
use hf_storage::metadata::{ExportReport, ImportMode, ImportReport};
use hf_storage::Pool;

use crate::deploy::keeps_screens;
use crate::metadata::CompiledScreens;
use crate::Result;

/// Loads the branches of the git repository at `dir` into the database with their commit ids,
/// in one transaction; `live_branch` names the branch the database reflects.
pub async fn import_repository(pool: &Pool, dir: &Path, live_branch: &str) -> Result<ImportReport> {
    // A tool's import: its screens compile where the rule reads them, on a thread.
    let compiled = CompiledScreens::default();
    let screen_rule =
        |target: &Model, previous: &Model| keeps_screens(live_branch, target, previous, &compiled);
    hf_storage::metadata::import_checked(
        pool,
        dir,
        ImportMode::FastForward,
        Some(live_branch),
        screen_rule,
    )
    .await?
}

/// Writes every branch of the database (full history) as a new bare git repository at `dir`
/// (missing or empty), its `HEAD` naming `head_branch`.
pub async fn export_repository(pool: &Pool, dir: &Path, head_branch: &str) -> Result<ExportReport> {
    Ok(hf_storage::metadata::export(pool, dir, head_branch).await?)
}
