//! The secret that signs paging cursors, shared by every instance through the database, and its
//! rotation (`hf secrets rotate`).
//!
//! An instance keeps the generations in use in memory and reads them again when they are older
//! than [`SECRET_RELOAD_INTERVAL`], so after a rotation every instance signs with the new secret
//! within about a second; and it reads them again at once when a cursor does not verify, so a
//! cursor another instance signed with a secret made since is accepted right away. The secret a
//! rotation replaces still verifies for the grace period given (not on its own clock: the
//! database tells each instance how much of it is left), so cursors issued just before the
//! rotation keep working on every instance; a second rotation deletes it, and its cursors are
//! refused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hf_storage::secrets::{self, Rotated, SecretRing};
use hf_storage::Pool;

use crate::{App, Result};

/// How long an instance trusts the secrets it read before it reads them again: a rotation
/// reaches every instance within this (one small query a second on a busy instance).
pub const SECRET_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// How long the replaced secret still verifies when `hf secrets rotate` is given no grace
/// period: a day, far longer than anyone pages through one result.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(24 * 3600);

/// The cursor secrets as this instance last read them.
pub(crate) struct CursorSecrets {
    ring: SecretRing,
    loaded_at: Instant,
}

impl CursorSecrets {
    /// Signs `binding` with the current secret and lets it accept the replaced one while its
    /// grace period lasts.
    pub(crate) fn sign(&self, binding: hf_hoqs::paging::Binding) -> hf_hoqs::paging::Binding {
        let binding = binding.signed(&self.ring.current);
        match &self.ring.previous {
            Some(previous) if self.loaded_at.elapsed() < previous.remaining => {
                binding.also_accepting(&previous.secret)
            }
            _ => binding,
        }
    }

    fn is_fresh(&self) -> bool {
        self.loaded_at.elapsed() < SECRET_RELOAD_INTERVAL
    }
}

/// The state behind [`App::cursor_secrets`]: the secrets last read, and a lock that lets one
/// request at a time read them again.
#[derive(Default)]
pub(crate) struct SecretCache {
    loaded: std::sync::RwLock<Option<Arc<CursorSecrets>>>,
    reloading: tokio::sync::Mutex<()>,
}

impl SecretCache {
    fn current(&self) -> Option<Arc<CursorSecrets>> {
        self.loaded
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// Makes a new cursor secret the one that signs; the one it replaces verifies for `grace` more
/// (zero for a secret that leaked: its cursors stop working at once), and the one before that
/// is deleted, so its cursors are refused. Every instance picks the change up within
/// [`SECRET_RELOAD_INTERVAL`].
pub async fn rotate_cursor_secret(pool: &Pool, grace: Duration) -> Result<Rotated> {
    Ok(secrets::rotate_server_secret(pool, secrets::CURSOR_SECRET, grace).await?)
}

impl App {
    /// The cursor secrets, read again when older than [`SECRET_RELOAD_INTERVAL`].
    pub(crate) async fn cursor_secrets(&self) -> Result<Arc<CursorSecrets>> {
        match self.inner.secrets.current() {
            Some(loaded) if loaded.is_fresh() => Ok(loaded),
            _ => self.reload_cursor_secrets(false).await,
        }
    }

    /// Reads the cursor secrets again: when they are stale, or (`force`) when a cursor did not
    /// verify with them. Requests that need them at once wait for one read instead of each
    /// making its own.
    pub(crate) async fn reload_cursor_secrets(&self, force: bool) -> Result<Arc<CursorSecrets>> {
        let started = Instant::now();
        let _one_at_a_time = self.inner.secrets.reloading.lock().await;
        // Read by another request while this one waited.
        if let Some(loaded) = self.inner.secrets.current() {
            let fresh = if force {
                loaded.loaded_at >= started
            } else {
                loaded.is_fresh()
            };
            if fresh {
                return Ok(loaded);
            }
        }
        let ring = secrets::server_secrets(self.pool(), secrets::CURSOR_SECRET).await?;
        let loaded = Arc::new(CursorSecrets {
            ring,
            loaded_at: Instant::now(),
        });
        *self
            .inner
            .secrets
            .loaded
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::clone(&loaded));
        Ok(loaded)
    }
}
