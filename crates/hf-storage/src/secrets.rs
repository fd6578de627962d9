//! The secrets every instance of the service shares, kept in `hf.server_secrets`, and their
//! rotation.
//!
//! A secret is 32 random bytes made by the first instance that asks for it and inserted with
//! `ON CONFLICT DO NOTHING`, so when several instances start at once they all end up reading
//! the one row that won; every later start reads the same bytes. Nothing here logs or formats
//! a secret.
//!
//! Each name keeps generations. [`rotate_server_secret`] makes a new generation the one that
//! signs and gives the one it replaces a grace period during which it still verifies, so what it
//! signed just before the rotation keeps working on every instance; the generation before that
//! is deleted. Instances read the generations in use with [`server_secrets`].

use std::time::Duration;

use rand::RngCore;
use tokio_postgres::GenericClient;

use crate::{Error, Pool, Result};

/// The length of a generated secret in bytes (HMAC-SHA-256's block-sized keys are longer, but
/// 256 bits is what its output can protect).
pub const SECRET_BYTES: usize = 32;

/// The secret that signs paging cursors.
pub const CURSOR_SECRET: &str = "cursor";

/// The advisory lock key that serialises rotations ("hf-secr" in ASCII).
const ROTATION_LOCK_KEY: i64 = 0x0068_662d_7365_6372;

/// The generations of one secret that are in use.
#[derive(Clone)]
pub struct SecretRing {
    /// The generation that signs.
    pub generation: i32,
    /// Its bytes.
    pub current: Vec<u8>,
    /// The generation it replaced, while its grace period lasts: it verifies but never signs.
    pub previous: Option<RetiringSecret>,
}

/// A replaced secret during its grace period.
#[derive(Clone)]
pub struct RetiringSecret {
    /// Its bytes.
    pub secret: Vec<u8>,
    /// How much of the grace period was left when it was read (measured by the database's
    /// clock, so the instances' clocks need not agree).
    pub remaining: Duration,
}

impl std::fmt::Debug for SecretRing {
    /// Shows the generation and whether a retiring secret is kept, never the bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretRing")
            .field("generation", &self.generation)
            .field(
                "previous_remaining",
                &self.previous.as_ref().map(|p| p.remaining),
            )
            .finish_non_exhaustive()
    }
}

/// What a rotation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotated {
    /// The generation that signs from now on.
    pub generation: i32,
    /// How long the generation it replaced still verifies.
    pub grace: Duration,
}

/// Makes the first generation of `name` if no instance has made one yet.
async fn ensure_first<C: GenericClient>(client: &C, name: &str) -> Result<()> {
    let mut fresh = vec![0_u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut fresh);
    client
        .execute(
            "INSERT INTO hf.server_secrets (name, generation, secret) \
             SELECT $1, 1, $2 \
             WHERE NOT EXISTS (SELECT FROM hf.server_secrets WHERE name = $1) \
             ON CONFLICT (name, generation) DO NOTHING",
            &[&name, &fresh],
        )
        .await?;
    Ok(())
}

/// The generations of the shared secret `name` in use, the first made now if no instance has
/// made it yet.
pub async fn server_secrets(pool: &Pool, name: &str) -> Result<SecretRing> {
    // The newest generation, and the one before it with the seconds of grace it has left.
    const IN_USE: &str = "SELECT generation, secret, \
                                 extract(epoch FROM verify_until - now())::float8 AS remaining \
                            FROM hf.server_secrets WHERE name = $1 \
                           ORDER BY generation DESC LIMIT 2";
    let client = pool.get().await?;
    let mut rows = client.query(IN_USE, &[&name]).await?;
    if rows.is_empty() {
        ensure_first(&**client, name).await?;
        rows = client.query(IN_USE, &[&name]).await?;
    }
    let mut rows = rows.iter();
    let Some(newest) = rows.next() else {
        return Err(Error::Config(format!(
            "the shared secret `{name}` is missing from hf.server_secrets"
        )));
    };
    let current = checked(name, newest.try_get("secret")?)?;
    let mut previous = None;
    if let Some(row) = rows.next() {
        let remaining: Option<f64> = row.try_get("remaining")?;
        if let Some(remaining) = remaining.filter(|seconds| *seconds > 0.0) {
            previous = Some(RetiringSecret {
                secret: checked(name, row.try_get("secret")?)?,
                remaining: Duration::try_from_secs_f64(remaining).unwrap_or(Duration::ZERO),
            });
        }
    }
    Ok(SecretRing {
        generation: newest.try_get("generation")?,
        current,
        previous,
    })
}

/// Makes a new generation of `name` the one that signs. The one it replaces verifies for
/// `grace` more (zero: not at all, for a secret that leaked); the one before that is deleted.
/// Rotations are serialised, so two at once make two generations one after the other.
pub async fn rotate_server_secret(pool: &Pool, name: &str, grace: Duration) -> Result<Rotated> {
    let mut fresh = vec![0_u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut fresh);
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&ROTATION_LOCK_KEY])
        .await?;
    ensure_first(&*transaction, name).await?;
    let row = transaction
        .query_one(
            "SELECT max(generation) FROM hf.server_secrets WHERE name = $1",
            &[&name],
        )
        .await?;
    let replaced: i32 = row.try_get(0)?;
    transaction
        .execute(
            "DELETE FROM hf.server_secrets WHERE name = $1 AND generation < $2",
            &[&name, &replaced],
        )
        .await?;
    transaction
        .execute(
            "UPDATE hf.server_secrets SET verify_until = now() + make_interval(secs => $3) \
              WHERE name = $1 AND generation = $2",
            &[&name, &replaced, &grace.as_secs_f64()],
        )
        .await?;
    let generation = replaced + 1;
    transaction
        .execute(
            "INSERT INTO hf.server_secrets (name, generation, secret) VALUES ($1, $2, $3)",
            &[&name, &generation, &fresh],
        )
        .await?;
    transaction.commit().await?;
    Ok(Rotated { generation, grace })
}

fn checked(name: &str, secret: Vec<u8>) -> Result<Vec<u8>> {
    if secret.len() < SECRET_BYTES {
        return Err(Error::Config(format!(
            "the shared secret `{name}` in hf.server_secrets is shorter than {SECRET_BYTES} bytes"
        )));
    }
    Ok(secret)
}
