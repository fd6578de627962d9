//! `hf secrets rotate`: a new secret signs paging cursors; the one it replaces still verifies
//! for a grace period.
//!
//! Running services pick the new secret up within a second (they read the secrets again every
//! second, and at once when a cursor does not verify). Cursors signed before the rotation keep
//! working during the grace period; after it, or after the next rotation, they are refused with
//! `400 INVALID_CURSOR`. A grace of 0 stops them at once (for a secret that leaked).

use std::time::Duration;

use clap::{Args, Subcommand};

use crate::principal::with_database;
use crate::DatabaseArgs;

/// `hf secrets …`.
#[derive(Debug, Args)]
pub struct SecretsArgs {
    #[command(subcommand)]
    command: SecretsCommand,
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Debug, Subcommand)]
enum SecretsCommand {
    /// Make a new secret sign paging cursors; the replaced one verifies for the grace period.
    Rotate {
        /// How long, in seconds, cursors signed with the replaced secret keep working (0: not
        /// at all).
        #[arg(long, default_value_t = hf_app::secrets::DEFAULT_GRACE.as_secs())]
        grace: u64,
    },
}

/// Runs `hf secrets …`.
pub fn run(args: SecretsArgs) -> anyhow::Result<()> {
    with_database(&args.database, |pool| async move {
        match args.command {
            SecretsCommand::Rotate { grace } => {
                let rotated =
                    hf_app::secrets::rotate_cursor_secret(&pool, Duration::from_secs(grace))
                        .await?;
                println!(
                    "the cursor secret of generation {} signs; running services use it within a \
                     second; cursors signed before keep working for {} s",
                    rotated.generation,
                    rotated.grace.as_secs()
                );
                Ok(())
            }
        }
    })
}
