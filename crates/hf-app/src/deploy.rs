//! Planning and applying a metadata branch to the database: `hf plan`/`hf apply` and
//! `POST /plan`/`POST /apply` are these use cases.
//!
//! Applying a branch is a write to the live branch, so it keeps the rule every metadata write
//! keeps: it may not break a screen. A screen whose queries and imports all resolved in what the
//! database reflects (the last applied tree) and that names a missing object, field or screen in
//! the branch is refused with [`Error::BreaksScreens`] before anything runs. Such a branch can
//! only come from a write that went around these use cases (a commit made with git itself).

use std::sync::Arc;

use hf_model::Model;
use hf_storage::deploy::{Applied, BranchPlan, Drift};

use crate::metadata::screens_with_unknown_names;
use crate::{blocking, App, Error, Result};

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
        let target = self.snapshot(&branch).await?;
        let reflected = self.reflected_model().await?;
        let broken: Vec<String> = screens_with_unknown_names(&target.model)
            .difference(&screens_with_unknown_names(&reflected))
            .map(|(module, screen)| format!("{module}/{screen}"))
            .collect();
        if !broken.is_empty() {
            return Err(Error::BreaksScreens {
                branch,
                screens: broken,
            });
        }
        Ok(
            hf_storage::deploy::apply(self.pool(), self.store(), &branch, allow_destructive)
                .await?,
        )
    }

    /// Whether the live branch is ahead of (or apart from) what the database reflects.
    pub async fn drift(&self) -> Result<Option<Drift>> {
        Ok(hf_storage::deploy::drift(self.pool(), self.store()).await?)
    }

    /// The model the database reflects: the last applied tree, or the live head when nothing
    /// was applied or that tree is gone.
    async fn reflected_model(&self) -> Result<Arc<Model>> {
        let applied = hf_storage::deploy::applied_state(self.pool()).await?;
        let store = Arc::clone(self.store());
        Ok(blocking(move || {
            let at_tree = applied.map(|state| store.model_at_tree(&state.tree));
            match at_tree {
                Some(Ok(model)) => Ok(model),
                _ => store.live().map(|snapshot| Arc::clone(&snapshot.model)),
            }
        })
        .await??)
    }
}
