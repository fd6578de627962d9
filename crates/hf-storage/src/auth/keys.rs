//! The ES256 signing keys, kept in the database so every instance signs and verifies with the
//! same ones. `hf-auth` makes and reads the keys; this module only stores them.
//!
//! A partial unique index allows one current (unretired) key, so when several instances start
//! at once and each offers a first key, exactly one is kept and all load the same one.

use std::time::{Duration, SystemTime};

use hf_auth::keys::{SigningKey, StoredKey};

use super::seconds;
use crate::{Pool, Result};

/// The advisory lock key that serialises rotations ("hf-keys").
const KEYS_LOCK_KEY: i64 = 0x0068_662d_6b65_7973;

/// Stores `key` as the current key unless a current key exists already; true when it was stored.
pub async fn ensure_signing_key(pool: &Pool, key: &SigningKey) -> Result<bool> {
    let client = pool.get().await?;
    let inserted = client
        .execute(
            "INSERT INTO hf.signing_keys (kid, private_pem) \
             SELECT $1, $2 \
              WHERE NOT EXISTS (SELECT 1 FROM hf.signing_keys WHERE retired_at IS NULL) \
             ON CONFLICT DO NOTHING",
            &[&key.kid(), &key.to_pkcs8_pem()],
        )
        .await?;
    Ok(inserted == 1)
}

/// Every stored key with its life-cycle timestamps, for `KeySet::from_stored`.
pub async fn load_signing_keys(pool: &Pool) -> Result<Vec<StoredKey>> {
    let client = pool.get().await?;
    let rows = client
        .query(
            "SELECT private_pem, created_at, retired_at FROM hf.signing_keys ORDER BY created_at",
            &[],
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok(StoredKey {
                pkcs8_pem: row.try_get(0)?,
                created_at: row.try_get::<_, SystemTime>(1)?,
                retired_at: row.try_get::<_, Option<SystemTime>>(2)?,
            })
        })
        .collect()
}

/// Makes `key` the current key and retires the previous one, in one transaction. Retired keys
/// keep verifying (and stay in the JWKS) until [`prune_signing_keys`] removes them.
pub async fn rotate_signing_key(pool: &Pool, key: &SigningKey) -> Result<()> {
    let mut client = pool.get().await?;
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&KEYS_LOCK_KEY])
        .await?;
    transaction
        .execute(
            "UPDATE hf.signing_keys SET retired_at = clock_timestamp() WHERE retired_at IS NULL",
            &[],
        )
        .await?;
    transaction
        .execute(
            "INSERT INTO hf.signing_keys (kid, private_pem) VALUES ($1, $2)",
            &[&key.kid(), &key.to_pkcs8_pem()],
        )
        .await?;
    transaction
        .commit()
        .await
        .map_err(crate::error::commit_failed)?;
    Ok(())
}

/// Deletes keys retired longer ago than `retention`: no token they signed can still be valid.
/// Returns how many were deleted.
pub async fn prune_signing_keys(pool: &Pool, retention: Duration) -> Result<u64> {
    let client = pool.get().await?;
    let deleted = client
        .execute(
            "DELETE FROM hf.signing_keys \
              WHERE retired_at IS NOT NULL AND retired_at < now() - make_interval(secs => $1)",
            &[&seconds(retention)],
        )
        .await?;
    Ok(deleted)
}
