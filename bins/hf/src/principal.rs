//! `hf principal create|list|reset|promote|demote|delete`, the administrator of the first start,
//! and the database access the command-line tools share.
//!
//! The tools talk to the database directly, not to a running service: they work before any
//! password exists (that is how the first administrator can be replaced) and while the service
//! is down. With no database URL they attach to the embedded cluster of a running `hf serve`, or
//! start that cluster for the duration of the command.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use hf_app::iam::{CreatePrincipal, DeletePrincipal, Iam, Principal, SetAdmin};
use hf_server::auth::AuthConfig;
use hf_storage::auth::Bootstrap;
use hf_storage::{EmbeddedCluster, Pool, PoolSettings};

use crate::{DatabaseArgs, ServeArgs};

/// `hf principal …`.
#[derive(Debug, Args)]
pub struct PrincipalArgs {
    #[command(subcommand)]
    command: PrincipalCommand,
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Debug, Subcommand)]
enum PrincipalCommand {
    /// Create a principal (and its database role); prints its one-time setup token.
    Create {
        /// Its name: login username and PostgreSQL role.
        name: String,
        /// Make it an administrator.
        #[arg(long)]
        admin: bool,
    },
    /// List the principals.
    List,
    /// Print a one-time token to set a new password (for a principal that lost its own).
    Reset {
        /// The principal's name.
        name: String,
    },
    /// Make a principal an administrator.
    Promote {
        /// The principal's name.
        name: String,
    },
    /// Make an administrator an ordinary principal (never the last administrator).
    Demote {
        /// The principal's name.
        name: String,
    },
    /// Delete a principal and drop its database role (never the last administrator). Its
    /// tokens stop working at once, in every running instance (the command returns once every
    /// running instance has acknowledged it, or after two seconds).
    Delete {
        /// The principal's name.
        name: String,
    },
}

/// Runs `hf principal …`.
pub fn run(args: PrincipalArgs) -> anyhow::Result<()> {
    with_database_url(&args.database, |pool, url| async move {
        let ttl = AuthConfig::default().setup_token_ttl;
        let iam = Iam::new(pool, &url, None, ttl).context("configuring the database access")?;
        match args.command {
            PrincipalCommand::Create { name, admin } => create(&iam, &name, admin).await,
            PrincipalCommand::List => list(&iam).await,
            PrincipalCommand::Reset { name } => reset(&iam, &name).await,
            PrincipalCommand::Promote { name } => set_admin(&iam, &name, true).await,
            PrincipalCommand::Demote { name } => set_admin(&iam, &name, false).await,
            PrincipalCommand::Delete { name } => delete(&iam, &name).await,
        }
    })
}

async fn create(iam: &Iam, name: &str, admin: bool) -> anyhow::Result<()> {
    let ttl = iam.setup_token_ttl();
    match iam.create_principal(name, admin).await? {
        CreatePrincipal::Created {
            principal,
            setup_token,
        } => {
            println!(
                "created {} `{}` (id {})",
                if principal.is_admin {
                    "administrator"
                } else {
                    "principal"
                },
                principal.name,
                principal.id
            );
            print_setup_token(setup_token.text(), ttl);
            Ok(())
        }
        CreatePrincipal::InvalidName { reason } => {
            anyhow::bail!("the name `{name}` is not allowed: {reason}")
        }
        CreatePrincipal::NameTaken => {
            anyhow::bail!("a principal or another database role is already named `{name}`")
        }
    }
}

/// How to use a setup or reset token.
fn print_setup_token(token: &str, ttl: Duration) {
    println!(
        "setup token (single use, valid for {} hours): {token}",
        ttl.as_secs() / 3600
    );
    println!(
        "set its password with POST /auth/set-password \
         {{\"setupToken\":\"{token}\",\"password\":\"<new password>\"}}"
    );
}

/// The principal of a name, or an error that says there is none.
async fn named(iam: &Iam, name: &str) -> anyhow::Result<Principal> {
    iam.principal_named(name)
        .await?
        .with_context(|| format!("there is no principal named `{name}`"))
}

async fn reset(iam: &Iam, name: &str) -> anyhow::Result<()> {
    let principal = named(iam, name).await?;
    let ttl = iam.setup_token_ttl();
    let token = iam
        .issue_reset_token(principal.id)
        .await?
        .with_context(|| format!("there is no principal named `{name}`"))?;
    println!(
        "reset token for `{}`; its current password keeps working until a new one is set",
        principal.name
    );
    print_setup_token(token.text(), ttl);
    Ok(())
}

async fn set_admin(iam: &Iam, name: &str, is_admin: bool) -> anyhow::Result<()> {
    let principal = named(iam, name).await?;
    match iam.set_admin(principal.id, is_admin).await? {
        SetAdmin::Updated(principal) => {
            let role = if principal.is_admin {
                "an administrator"
            } else {
                "not an administrator"
            };
            println!("`{}` is {role}", principal.name);
            Ok(())
        }
        SetAdmin::NotFound => anyhow::bail!("there is no principal named `{name}`"),
        SetAdmin::LastAdmin => {
            anyhow::bail!("`{name}` is the last administrator; promote another principal first")
        }
    }
}

async fn delete(iam: &Iam, name: &str) -> anyhow::Result<()> {
    let principal = named(iam, name).await?;
    match iam.delete_principal(principal.id).await? {
        DeletePrincipal::Deleted(principal) => {
            println!("deleted `{}` and its database role", principal.name);
            Ok(())
        }
        DeletePrincipal::NotFound => anyhow::bail!("there is no principal named `{name}`"),
        DeletePrincipal::LastAdmin => {
            anyhow::bail!("`{name}` is the last administrator; promote another principal first")
        }
    }
}

async fn list(iam: &Iam) -> anyhow::Result<()> {
    let principals = iam.list_principals().await?;
    println!("{:<36}  {:<5}  {:<25}  NAME", "ID", "ADMIN", "CREATED");
    for principal in principals {
        println!(
            "{:<36}  {:<5}  {:<25}  {}",
            principal.id,
            principal.is_admin,
            principal.created_at.format("%Y-%m-%dT%H:%M:%SZ"),
            principal.name.escape_debug()
        );
    }
    Ok(())
}

/// The authentication settings of `hf serve`, from its flags.
pub fn auth_config(args: &ServeArgs) -> AuthConfig {
    AuthConfig {
        token_ttl: Duration::from_secs(args.token_ttl),
        admin_name: args.admin_name.clone(),
        admin_password: args.admin_password.clone(),
        ..AuthConfig::default()
    }
}

/// Tells the operator about the administrator the first start created. A setup token goes to
/// stdout (it is the one way in), with ready-to-paste commands; it is never logged.
pub fn report_bootstrap(bootstrap: &Bootstrap, addr: SocketAddr) {
    match bootstrap {
        Bootstrap::CreatedWithPassword { principal } => tracing::info!(
            name = %principal.name,
            "created the administrator with the password from HF_ADMIN_PASSWORD"
        ),
        Bootstrap::CreatedWithSetupToken {
            principal,
            setup_token,
        } => {
            let token = setup_token.text();
            let name = serde_json_string(&principal.name);
            println!(
                "\nCreated the administrator {name}. Choose its password (this token works once, \
                 for 24 hours):\n\n  curl -sS -X POST http://{addr}/auth/set-password \
                 -H 'content-type: application/json' \
                 -d '{{\"setupToken\":\"{token}\",\"password\":\"CHANGE-ME-to-a-long-password\"}}'\n\n\
                 Then log in:\n\n  curl -sS -X POST http://{addr}/auth/login \
                 -H 'content-type: application/json' \
                 -d '{{\"username\":{name},\"password\":\"CHANGE-ME-to-a-long-password\"}}'\n"
            );
        }
        Bootstrap::NotNeeded | Bootstrap::NameTaken | Bootstrap::InvalidName { .. } => {}
    }
}

/// A name as a JSON string literal, safe inside the single-quoted shell argument above for the
/// names hf accepts except those with a single quote (which the operator chose themselves).
fn serde_json_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Opens the database of `args` for a tool (migrating it if needed), runs `work` on a pool, and
/// stops the embedded cluster afterwards if this command started it.
pub fn with_database<F, Fut>(args: &DatabaseArgs, work: F) -> anyhow::Result<()>
where
    F: FnOnce(Pool) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    with_database_url(args, |pool, _url| work(pool))
}

/// [`with_database`], also handing over the database URL (for the connections the metadata
/// store opens itself).
pub fn with_database_url<F, Fut>(args: &DatabaseArgs, work: F) -> anyhow::Result<()>
where
    F: FnOnce(Pool, String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut embedded = match &args.database_url {
        Some(_) => None,
        None => Some(
            EmbeddedCluster::attach_or_start(&args.data_dir)
                .context("attaching to or starting the embedded PostgreSQL")?,
        ),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(async {
        let url = match (&args.database_url, &embedded) {
            (Some(url), _) => url.clone(),
            (None, Some(cluster)) => {
                hf_storage::create_database_if_missing(
                    &cluster.maintenance_url(),
                    cluster.database_name(),
                )
                .await
                .context("creating the service's database")?;
                cluster.database_url()
            }
            (None, None) => anyhow::bail!("no database configured"),
        };
        let settings = PoolSettings {
            max_size: 2,
            application_name: "hf-cli".to_owned(),
            ..PoolSettings::default()
        };
        let pool = hf_storage::connect(&url, &settings).context("configuring the pool")?;
        hf_server::prepare_database(&pool)
            .await
            .context("preparing the database")?;
        work(pool, url).await
    });
    drop(runtime);
    if let Some(cluster) = embedded.as_mut() {
        if cluster.is_owned() {
            cluster.stop().context("stopping the embedded PostgreSQL")?;
        }
    }
    result
}
