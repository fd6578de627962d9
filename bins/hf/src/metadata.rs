//! `hf metadata export DIR` and `hf metadata import DIR`: the metadata in the database as an
//! ordinary git repository, and back.
//!
//! Export writes every branch with its full history (`git log`, `git clone` work on the result).
//! Import loads a repository's branches keeping their commit ids: new branches are created,
//! existing ones fast-forwarded; when any branch diverged nothing is imported, and the message
//! names the branch and both commits. A move of the live branch runs its DDL in the import's
//! transaction, so the live branch and the schema never disagree, and is refused when it would
//! break a screen, as `hf apply` is (both are `hf_app::repository`'s use cases). Both take the
//! database flags of `hf serve`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::DatabaseArgs;

/// `hf metadata …`.
#[derive(Debug, Args)]
pub struct MetadataArgs {
    #[command(subcommand)]
    command: MetadataCommand,
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Debug, Subcommand)]
enum MetadataCommand {
    /// Write every branch (full history) as a new bare git repository at DIR (missing or empty).
    Export {
        /// Where to create the repository.
        dir: PathBuf,
        /// The branch the repository's HEAD names.
        #[arg(long, env = "HF_LIVE_BRANCH", default_value = "main")]
        live_branch: String,
    },
    /// Load the branches of the git repository at DIR: create new ones, fast-forward existing
    /// ones; refuse everything when a branch diverged. When the live branch moves, its DDL runs
    /// in the same transaction (a plan that would lose data, or a move that would break a
    /// screen, refuses the import).
    Import {
        /// The repository to read.
        dir: PathBuf,
        /// The live branch: the one the database reflects.
        #[arg(long, env = "HF_LIVE_BRANCH", default_value = "main")]
        live_branch: String,
    },
}

/// Runs `hf metadata`.
pub fn run(args: MetadataArgs) -> anyhow::Result<()> {
    crate::principal::with_database(&args.database, |pool| async move {
        match args.command {
            MetadataCommand::Export { dir, live_branch } => {
                let report = hf_app::repository::export_repository(&pool, &dir, &live_branch)
                    .await
                    .with_context(|| format!("exporting the metadata to {}", dir.display()))?;
                for (branch, head) in &report.branches {
                    println!("{branch} {head}");
                }
                println!(
                    "exported {} branches ({} objects) to {}",
                    report.branches.len(),
                    report.objects,
                    dir.display()
                );
            }
            MetadataCommand::Import { dir, live_branch } => {
                let report = hf_app::repository::import_repository(&pool, &dir, &live_branch)
                    .await
                    .with_context(|| format!("importing the metadata of {}", dir.display()))?;
                for (branch, head) in &report.created {
                    println!("created {branch} at {head}");
                }
                for (branch, old, new) in &report.moved {
                    println!("moved {branch} from {old} to {new}");
                }
                for branch in &report.unchanged {
                    println!("unchanged {branch}");
                }
                for branch in &report.skipped {
                    eprintln!("skipped {branch}: not a valid branch id");
                }
                println!(
                    "imported {} objects; the schema follows the live branch `{live_branch}`",
                    report.objects
                );
            }
        }
        Ok(())
    })
}
