//! Planning and applying a metadata branch to the database: `hf plan`/`hf apply` and
//! `POST /plan`/`POST /apply` are these use cases.
//!
//! Applying a branch is a write to the live branch, so it keeps the rule every metadata write
//! keeps: it may not break a screen. A screen whose queries and imports all resolved in what the
//! database reflects (the last applied tree) and that names a missing object, field or screen in
//! the branch is refused with [`Error::BreaksScreens`] before anything runs; the check runs under
//! the lock that serialises live writes, in the apply's own transaction. Such a branch can
//! only come from a write that went around these use cases (a commit made with git itself).

use hf_model::Model;
use hf_storage::deploy::{Applied, BranchPlan, Drift};

use crate::metadata::{broken_screens, CompiledScreens};
use crate::{App, Error, Result};

impl App {
    /// The DDL that would bring the database to `branch` (the live branch when `None`); changes
    /// nothing.
    pub async fn plan(&self, branch: Option<&str>) -> Result<BranchPlan> {
        let branch = branch.unwrap_or(self.live_branch());
        Ok(hf_storage::deploy::plan(self.pool(), self.store(), branch).await?)
    }

    /// Applies `branch` (the live branch when `None`) in one transaction and makes it the live
    /// head; another branch must descend from the live head. Refused when it would break a
    /// screen, or lose data without `allow_destructive`.
    pub async fn apply(&self, branch: Option<&str>, allow_destructive: bool) -> Result<Applied> {
        let branch = branch.unwrap_or(self.live_branch()).to_owned();
        // The screens of the branch and of the live branch (which the database reflects unless
        // it has drifted) are compiled first, where compiles are bounded.
        let mut compiled = CompiledScreens::default();
        for name in [branch.as_str(), self.live_branch()] {
            let snapshot = self.branch_or_live(name).await?;
            self.compile_ruled_screens(&snapshot.model, &mut compiled, None)
                .await?;
        }
        // The rule is checked under the lock that serialises live writes, so a concurrent write
        // cannot change what the database reflects between the check and the apply.
        let screen_rule = |target: &Model, reflected: &Model| {
            keeps_screens(&branch, target, reflected, &compiled)
        };
        hf_storage::deploy::apply_checked(
            self.pool(),
            self.store(),
            &branch,
            allow_destructive,
            screen_rule,
        )
        .await?
    }

    /// Seeds the empty live branch with metadata files (`hf serve --demo`) as one live write:
    /// the commit, its DDL and the recorded applied state in one transaction. `None` when the
    /// live branch already holds metadata.
    pub async fn seed_live(
        &self,
        files: Vec<(String, Vec<u8>)>,
        source: &str,
    ) -> Result<Option<Applied>> {
        Ok(hf_storage::deploy::seed_live(self.pool(), self.store(), files, source, "hf").await?)
    }

    /// Whether the live branch is ahead of (or apart from) what the database reflects.
    pub async fn drift(&self) -> Result<Option<Drift>> {
        Ok(hf_storage::deploy::drift(self.pool(), self.store()).await?)
    }
}

/// The screen rule of every write to the live branch: `target` (what the live branch would hold)
/// may not break a screen that resolved in `reflected` (what the database reflects). Refused as
/// [`Error::BreaksScreens`], naming each screen as `module/screen`. The screens come compiled
/// in `compiled` where the caller could compile them first.
pub(crate) fn keeps_screens(
    branch: &str,
    target: &Model,
    reflected: &Model,
    compiled: &CompiledScreens,
) -> Result<()> {
    let broken: Vec<String> = broken_screens(target, compiled)
        .difference(&broken_screens(reflected, compiled))
        .map(|(module, screen)| format!("{module}/{screen}"))
        .collect();
    if broken.is_empty() {
        Ok(())
    } else {
        Err(Error::BreaksScreens {
            branch: branch.to_owned(),
            screens: broken,
        })
    }
}
