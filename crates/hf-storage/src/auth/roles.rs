//! The PostgreSQL role behind every principal, and the group roles they share.
//!
//! A principal's role is `NOLOGIN` (nobody connects as it), a member of `hf:authenticated` (and of
//! `hf:admin` for administrators), and granted to the service's own login role so that a request
//! can switch to it with `set_config('role', …, true)`. Roles belong to the whole cluster, not to
//! one database, so every check here is against `pg_roles`, and every name is quoted by
//! `hf_sql::quote_ident` after `hf-auth` has validated it.

use tokio_postgres::Client;

use crate::{Error, Result};

pub use hf_auth::name::{ADMIN_ROLE, AUTHENTICATED_ROLE};

/// Role names PostgreSQL refuses even when quoted (they mean "everyone" and "no role").
const RESERVED_ROLE_NAMES: &[&str] = &["public", "none"];

/// Why a name cannot become a principal's role, in words for the caller; `None` when it can.
pub(super) fn name_problem(name: &str) -> Option<String> {
    if let Err(error) = hf_auth::name::validate_principal_name(name) {
        return Some(error.to_string());
    }
    if RESERVED_ROLE_NAMES.contains(&name) {
        return Some(format!("`{name}` is reserved by PostgreSQL"));
    }
    None
}

/// Whether any role of the cluster (a principal's or anybody else's) has this exact name.
pub(super) async fn role_exists(client: &Client, name: &str) -> Result<bool> {
    let row = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)",
            &[&name],
        )
        .await?;
    Ok(row.try_get(0)?)
}

/// Creates the group roles if someone dropped them since the migration made them.
///
/// Another database of the same cluster may create them at the same moment; the DO blocks treat
/// both outcomes of that race (duplicate_object, unique_violation) as "it exists now".
pub(super) async fn ensure_group_roles(client: &Client) -> Result<()> {
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_roles WHERE rolname IN ($1, $2)",
            &[&AUTHENTICATED_ROLE, &ADMIN_ROLE],
        )
        .await?;
    let present: i64 = row.try_get(0)?;
    if present == 2 {
        return Ok(());
    }
    for role in [AUTHENTICATED_ROLE, ADMIN_ROLE] {
        let statement = format!(
            "DO $$ BEGIN CREATE ROLE {} NOLOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$",
            quote(role)?
        );
        client.batch_execute(&statement).await?;
    }
    Ok(())
}

/// Creates a principal's role inside the caller's transaction: NOLOGIN, in the group roles, and
/// granted to the service's login role.
pub(super) async fn create_principal_role(
    client: &Client,
    name: &str,
    is_admin: bool,
) -> Result<()> {
    let role = quote(name)?;
    let mut groups = quote(AUTHENTICATED_ROLE)?;
    if is_admin {
        groups.push_str(", ");
        groups.push_str(&quote(ADMIN_ROLE)?);
    }
    let statement = format!(
        "CREATE ROLE {role} NOLOGIN IN ROLE {groups}; \
         GRANT {role} TO CURRENT_USER;"
    );
    client.batch_execute(&statement).await?;
    Ok(())
}

/// Adds the role to `hf:admin` or takes it out, inside the caller's transaction.
pub(super) async fn set_admin_membership(
    client: &Client,
    name: &str,
    is_admin: bool,
) -> Result<()> {
    let role = quote(name)?;
    let admin = quote(ADMIN_ROLE)?;
    let statement = if is_admin {
        format!("GRANT {admin} TO {role}")
    } else {
        format!("REVOKE {admin} FROM {role}")
    };
    client.batch_execute(&statement).await?;
    Ok(())
}

/// Drops a principal's role inside the caller's transaction: what it owns in this database goes
/// to the service's role, its privileges go, then the role. A role already gone is not an error.
pub(super) async fn drop_principal_role(client: &Client, name: &str) -> Result<()> {
    if !role_exists(client, name).await? {
        return Ok(());
    }
    let role = quote(name)?;
    let statement = format!(
        "REASSIGN OWNED BY {role} TO CURRENT_USER; \
         DROP OWNED BY {role}; \
         DROP ROLE {role};"
    );
    client.batch_execute(&statement).await?;
    // No data connection may keep the role as its session role (checked again at commit by
    // the principals' change notification).
    crate::run_as::roles_changed();
    Ok(())
}

/// Quotes a role name; names were validated before, so a failure here is a bug, reported as one.
fn quote(name: &str) -> Result<String> {
    hf_sql::quote_ident(name).map_err(|error| Error::Config(format!("role name: {error}")))
}
