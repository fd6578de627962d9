//! `hf keys rotate`: a new ES256 signing key becomes current; the old one keeps verifying.
//!
//! Running services re-read their keys within a minute and then sign with the new key. The old
//! public key stays in the JWKS, and tokens it signed stay valid, until they have all expired; the
//! service deletes it after that.

use clap::{Args, Subcommand};

use crate::principal::with_database;
use crate::DatabaseArgs;

/// `hf keys …`.
#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Make a new signing key current and retire the old one.
    Rotate,
}

/// Runs `hf keys …`.
pub fn run(args: KeysArgs) -> anyhow::Result<()> {
    with_database(&args.database, |pool| async move {
        match args.command {
            KeysCommand::Rotate => {
                let kid = hf_app::iam::rotate_signing_key(&pool).await?;
                println!(
                    "the signing key {kid} is current; running services use it within a minute"
                );
                Ok(())
            }
        }
    })
}
