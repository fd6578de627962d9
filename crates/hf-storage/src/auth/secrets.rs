//! One-time secrets: setup and reset tokens, browser session codes, SSH login nonces.
//!
//! Only the SHA-256 of a secret is stored. Each is consumed atomically with `DELETE … RETURNING`,
//! so two requests presenting the same secret at once cannot both succeed: exactly one of them
//! deletes the row. Expiry is judged with the database's `now()`. Expired rows are deleted
//! whenever a new secret of the same kind is issued, so the tables stay small without a sweeper.

use std::time::Duration;

use hf_auth::secret::{SecretHash, SecretToken};
use tokio_postgres::Client;
use uuid::Uuid;

use super::principals::{Principal, PRINCIPAL_COLUMNS, PRINCIPAL_COLUMNS_OF_P};
use super::seconds;
use crate::{Pool, Result};

/// Stores a new setup token for a principal inside the caller's transaction, replacing any
/// unused earlier one (a reset token makes older ones worthless).
pub(super) async fn insert_setup_token(
    client: &Client,
    principal_id: Uuid,
    ttl: Duration,
) -> Result<SecretToken> {
    let token = SecretToken::generate();
    client
        .execute(
            "DELETE FROM hf.setup_tokens WHERE principal_id = $1 OR expires_at <= now()",
            &[&principal_id],
        )
        .await?;
    client
        .execute(
            "INSERT INTO hf.setup_tokens (token_hash, principal_id, expires_at) \
             VALUES ($1, $2, now() + make_interval(secs => $3))",
            &[&hash_bytes(token.hash()), &principal_id, &seconds(ttl)],
        )
        .await?;
    Ok(token)
}

/// Issues a reset token for an existing principal; `None` when there is no such principal.
pub async fn issue_reset_token(
    pool: &Pool,
    principal_id: Uuid,
    ttl: Duration,
) -> Result<Option<SecretToken>> {
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    let exists = transaction
        .query_opt(
            "SELECT 1 FROM hf.principals WHERE id = $1 FOR SHARE",
            &[&principal_id],
        )
        .await?
        .is_some();
    if !exists {
        return Ok(None);
    }
    let token = insert_setup_token(transaction.client(), principal_id, ttl).await?;
    transaction
        .commit()
        .await
        .map_err(crate::error::commit_failed)?;
    Ok(Some(token))
}

/// Whether a setup token is known and unexpired, without using it: checked before the expensive
/// password hash, so an invalid token costs the server nothing.
pub async fn setup_token_is_valid(pool: &Pool, hash: &SecretHash) -> Result<bool> {
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "SELECT 1 FROM hf.setup_tokens WHERE token_hash = $1 AND expires_at > now()",
            &[&hash_bytes(hash)],
        )
        .await?;
    Ok(row.is_some())
}

/// Uses a setup token to set the principal's password (an argon2id PHC string), atomically: the
/// token is consumed and the password credential created or replaced in one transaction.
/// `None` when the token is unknown, used or expired.
pub async fn set_password_with_token(
    pool: &Pool,
    hash: &SecretHash,
    password_hash: &str,
) -> Result<Option<Principal>> {
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    let consumed = transaction
        .query_opt(
            "DELETE FROM hf.setup_tokens WHERE token_hash = $1 \
             RETURNING principal_id, expires_at > now()",
            &[&hash_bytes(hash)],
        )
        .await?;
    let principal_id: Uuid = match consumed {
        Some(row) if row.try_get::<_, bool>(1)? => row.try_get(0)?,
        Some(_) => {
            // Expired: the row is deleted anyway, which is the clean-up it needed.
            transaction
                .commit()
                .await
                .map_err(crate::error::commit_failed)?;
            return Ok(None);
        }
        None => return Ok(None),
    };
    transaction
        .execute(
            "INSERT INTO hf.credentials (principal_id, kind, password_hash) \
             VALUES ($1, 'password', $2) \
             ON CONFLICT (principal_id) WHERE kind = 'password' \
             DO UPDATE SET password_hash = EXCLUDED.password_hash, \
                           created_at = now(), last_used_at = NULL",
            &[&principal_id, &password_hash],
        )
        .await?;
    let statement = format!("SELECT {PRINCIPAL_COLUMNS} FROM hf.principals WHERE id = $1");
    let row = transaction.query_one(&statement, &[&principal_id]).await?;
    let principal = Principal::from_row(&row)?;
    transaction
        .commit()
        .await
        .map_err(crate::error::commit_failed)?;
    Ok(Some(principal))
}

/// Issues a one-time code a browser exchanges for the session cookie.
pub async fn create_session_code(
    pool: &Pool,
    principal_id: Uuid,
    ttl: Duration,
) -> Result<SecretToken> {
    let code = SecretToken::generate();
    let client = pool.get().await?;
    client
        .execute(
            "DELETE FROM hf.session_codes WHERE expires_at <= now()",
            &[],
        )
        .await?;
    client
        .execute(
            "INSERT INTO hf.session_codes (code_hash, principal_id, expires_at) \
             VALUES ($1, $2, now() + make_interval(secs => $3))",
            &[&hash_bytes(code.hash()), &principal_id, &seconds(ttl)],
        )
        .await?;
    Ok(code)
}

/// Consumes a session code; returns its principal when the code was known, unused and unexpired
/// and the principal still exists.
pub async fn consume_session_code(pool: &Pool, hash: &SecretHash) -> Result<Option<Principal>> {
    let client = pool.get().await?;
    let statement = format!(
        "WITH used AS ( \
             DELETE FROM hf.session_codes WHERE code_hash = $1 \
             RETURNING principal_id, expires_at) \
         SELECT {} FROM used JOIN hf.principals AS p ON p.id = used.principal_id \
          WHERE used.expires_at > now()",
        PRINCIPAL_COLUMNS_OF_P
    );
    let row = client.query_opt(&statement, &[&hash_bytes(hash)]).await?;
    row.as_ref().map(Principal::from_row).transpose()
}

/// Issues an SSH login nonce bound to `username`. The caller decides whether a username is worth
/// storing; the nonce text is what the client signs.
pub async fn create_ssh_nonce(pool: &Pool, username: &str, ttl: Duration) -> Result<SecretToken> {
    let nonce = SecretToken::generate();
    let client = pool.get().await?;
    client
        .execute("DELETE FROM hf.ssh_nonces WHERE expires_at <= now()", &[])
        .await?;
    client
        .execute(
            "INSERT INTO hf.ssh_nonces (nonce_hash, username, expires_at) \
             VALUES ($1, $2, now() + make_interval(secs => $3))",
            &[&hash_bytes(nonce.hash()), &username, &seconds(ttl)],
        )
        .await?;
    Ok(nonce)
}

/// Consumes an SSH login nonce; true only when it was issued for exactly this username and has
/// not expired. The nonce is used up by any attempt, so one nonce allows one guess.
pub async fn consume_ssh_nonce(pool: &Pool, hash: &SecretHash, username: &str) -> Result<bool> {
    let client = pool.get().await?;
    let row = client
        .query_opt(
            "DELETE FROM hf.ssh_nonces WHERE nonce_hash = $1 \
             RETURNING username = $2 AND expires_at > now()",
            &[&hash_bytes(hash), &username],
        )
        .await?;
    match row {
        Some(row) => Ok(row.try_get(0)?),
        None => Ok(false),
    }
}

fn hash_bytes(hash: &SecretHash) -> &[u8] {
    hash.as_bytes()
}
