//! Managing principals and their credentials: the `/iam` routes and `hf principal` call these,
//! so the service and the tool keep the same rules (the last administrator stays, a change to a
//! principal takes effect on every instance before it is reported done).
//!
//! A deletion or a change of the administrator flag must stop the principal's tokens (or admin
//! routes) at once on every instance, not only on the one that made it. Each instance keeps
//! principals in memory and forgets one when the database's notification arrives, a few
//! milliseconds after the commit; so such a change, after its commit and before it answers,
//! forgets the principal here and waits until every live instance has acknowledged it
//! ([`hf_storage::auth::PrincipalBarrier`]), at most [`PRINCIPAL_CHANGE_WAIT`]. Past that bound
//! the change is reported done anyway (it has committed) and the instances that did not answer
//! are logged: an instance that lost its listening connection does not trust its memory, so
//! only a stuck one can be late.

use std::sync::Arc;
use std::time::Duration;

use hf_auth::secret::SecretToken;
use hf_auth::ssh::SshPublicKey;
use hf_storage::auth::{PrincipalBarrier, PrincipalCache};
use hf_storage::Pool;
use uuid::Uuid;

pub use hf_storage::auth::{
    AttachSshKey, CreatePrincipal, Credential, CredentialKind, DeletePrincipal, Principal,
    RevokeCredential, SetAdmin,
};

use crate::Result;

/// The longest a principal change waits for the other instances' acknowledgements.
pub const PRINCIPAL_CHANGE_WAIT: Duration = Duration::from_secs(2);

/// Principal management over one database.
pub struct Iam {
    pool: Pool,
    barrier: PrincipalBarrier,
    /// This process's principal cache (a running service), forgotten before the barrier so the
    /// instance that made a change never depends on its own acknowledgement; the tools have none.
    cache: Option<Arc<PrincipalCache>>,
    setup_token_ttl: Duration,
}

impl std::fmt::Debug for Iam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iam")
            .field("setup_token_ttl", &self.setup_token_ttl)
            .finish_non_exhaustive()
    }
}

impl Iam {
    /// Principal management over `pool`; barriers connect to `database_url` (the pool's
    /// database). `cache` is the running service's principal cache, if any; setup and reset
    /// tokens live `setup_token_ttl`.
    pub fn new(
        pool: Pool,
        database_url: &str,
        cache: Option<Arc<PrincipalCache>>,
        setup_token_ttl: Duration,
    ) -> Result<Self> {
        Ok(Self {
            pool,
            barrier: PrincipalBarrier::new(database_url)?,
            cache,
            setup_token_ttl,
        })
    }

    /// How long setup and reset tokens live.
    pub fn setup_token_ttl(&self) -> Duration {
        self.setup_token_ttl
    }

    /// Creates a principal and its PostgreSQL role, with a one-time setup token.
    pub async fn create_principal(&self, name: &str, is_admin: bool) -> Result<CreatePrincipal> {
        Ok(
            hf_storage::auth::create_principal(&self.pool, name, is_admin, self.setup_token_ttl)
                .await?,
        )
    }

    /// Every principal, sorted by name.
    pub async fn list_principals(&self) -> Result<Vec<Principal>> {
        Ok(hf_storage::auth::list_principals(&self.pool).await?)
    }

    /// The principal with this id.
    pub async fn principal(&self, id: Uuid) -> Result<Option<Principal>> {
        Ok(hf_storage::auth::get_principal(&self.pool, id).await?)
    }

    /// The principal with this name.
    pub async fn principal_named(&self, name: &str) -> Result<Option<Principal>> {
        Ok(hf_storage::auth::get_principal_by_name(&self.pool, name).await?)
    }

    /// Promotes or demotes a principal (never the last administrator); every live instance
    /// knows before this returns.
    pub async fn set_admin(&self, id: Uuid, is_admin: bool) -> Result<SetAdmin> {
        let outcome = hf_storage::auth::set_admin(&self.pool, id, is_admin).await?;
        if let SetAdmin::Updated(principal) = &outcome {
            self.changed(principal).await;
        }
        Ok(outcome)
    }

    /// Deletes a principal and drops its role (never the last administrator); its tokens are
    /// refused by every live instance before this returns.
    pub async fn delete_principal(&self, id: Uuid) -> Result<DeletePrincipal> {
        let outcome = hf_storage::auth::delete_principal(&self.pool, id).await?;
        if let DeletePrincipal::Deleted(principal) = &outcome {
            self.changed(principal).await;
        }
        Ok(outcome)
    }

    /// A new one-time token to set the principal's password (earlier unused ones stop working);
    /// `None` when there is no such principal.
    pub async fn issue_reset_token(&self, id: Uuid) -> Result<Option<SecretToken>> {
        Ok(hf_storage::auth::issue_reset_token(&self.pool, id, self.setup_token_ttl).await?)
    }

    /// A principal's credentials; `None` when there is no such principal.
    pub async fn list_credentials(&self, id: Uuid) -> Result<Option<Vec<Credential>>> {
        Ok(hf_storage::auth::list_credentials(&self.pool, id).await?)
    }

    /// Attaches an OpenSSH public key line as a credential; a line that is not an accepted key
    /// is [`crate::Error::Auth`].
    pub async fn attach_ssh_key(&self, id: Uuid, public_key: &str) -> Result<AttachSshKey> {
        let key = SshPublicKey::parse(public_key)?;
        Ok(hf_storage::auth::attach_ssh_key(&self.pool, id, &key).await?)
    }

    /// Revokes a credential: it can no longer log in.
    pub async fn revoke_credential(
        &self,
        id: Uuid,
        credential_id: Uuid,
    ) -> Result<RevokeCredential> {
        Ok(hf_storage::auth::revoke_credential(&self.pool, id, credential_id).await?)
    }

    /// After a committed change to `principal`: forgets it here, then waits until every live
    /// instance has seen the change (see the module documentation). Never fails: the change
    /// has committed, and every instance sees it within a second anyway.
    async fn changed(&self, principal: &Principal) {
        if let Some(cache) = &self.cache {
            cache.forget(&principal.sub);
        }
        match self.barrier.wait(PRINCIPAL_CHANGE_WAIT).await {
            Ok(answer) if answer.missing.is_empty() => {
                tracing::debug!(
                    instances = answer.acknowledged,
                    "every live instance acknowledged the principal change"
                );
            }
            Ok(answer) => tracing::warn!(
                principal = %principal.id,
                missing = ?answer.missing,
                waited_ms = PRINCIPAL_CHANGE_WAIT.as_millis(),
                "instances did not acknowledge a principal change in time; they see it when its notification arrives"
            ),
            Err(error) => tracing::warn!(
                principal = %principal.id,
                %error,
                "could not wait for the other instances to see a principal change"
            ),
        }
    }
}

/// Makes a new signing key current (`hf keys rotate`); the old one keeps verifying the tokens
/// it signed until they expire. Running services pick the new key up within a minute. Returns
/// the new key's id.
pub async fn rotate_signing_key(pool: &Pool) -> Result<String> {
    let key = hf_auth::keys::SigningKey::generate()?;
    hf_storage::auth::rotate_signing_key(pool, &key).await?;
    Ok(key.kid().to_owned())
}
