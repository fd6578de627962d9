//! The secrets every instance of the service shares, kept in `hf.server_secrets`.
//!
//! A secret is 32 random bytes made by the first instance that asks for it and inserted with
//! `ON CONFLICT DO NOTHING`, so when several instances start at once they all end up reading
//! the one row that won; every later start reads the same bytes. Nothing here logs or formats
//! a secret.

use rand::RngCore;

use crate::{Error, Pool, Result};

/// The length of a generated secret in bytes (HMAC-SHA-256's block-sized keys are longer, but
/// 256 bits is what its output can protect).
pub const SECRET_BYTES: usize = 32;

/// The secret that signs paging cursors.
pub const CURSOR_SECRET: &str = "cursor";

/// The shared secret called `name`, made now if no instance has made it yet.
pub async fn server_secret(pool: &Pool, name: &str) -> Result<Vec<u8>> {
    let mut fresh = vec![0_u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut fresh);
    let client = pool.get().await?;
    client
        .execute(
            "INSERT INTO hf.server_secrets (name, secret) VALUES ($1, $2) \
             ON CONFLICT (name) DO NOTHING",
            &[&name, &fresh],
        )
        .await?;
    let row = client
        .query_one(
            "SELECT secret FROM hf.server_secrets WHERE name = $1",
            &[&name],
        )
        .await?;
    let secret: Vec<u8> = row.try_get(0)?;
    if secret.len() < SECRET_BYTES {
        return Err(Error::Config(format!(
            "the shared secret `{name}` in hf.server_secrets is shorter than {SECRET_BYTES} bytes"
        )));
    }
    Ok(secret)
}
