//! Credentials: how a principal logs in. At most one argon2id password hash, and any number of SSH
//! public keys. Revoking a credential deletes it, so it cannot log in again.

use chrono::{DateTime, Utc};
use hf_auth::ssh::SshPublicKey;
use tokio_postgres::Row;
use uuid::Uuid;

use super::principals::{Principal, PRINCIPAL_COLUMNS_OF_P};
use crate::{Pool, Result};

/// The kinds of credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialKind {
    /// An argon2id password hash.
    Password,
    /// An OpenSSH public key that signs login nonces.
    Ssh,
}

impl CredentialKind {
    /// The kind as stored and as the API names it.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Password => "password",
            CredentialKind::Ssh => "ssh",
        }
    }
}

/// A credential as the IAM routes show it; the password hash itself is never read out here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// Its id, used to revoke it.
    pub id: Uuid,
    /// Whose it is.
    pub principal_id: Uuid,
    /// Password or SSH key.
    pub kind: CredentialKind,
    /// The SSH key's `SHA256:` fingerprint; `None` for passwords.
    pub fingerprint: Option<String>,
    /// The SSH key's OpenSSH line; `None` for passwords.
    pub public_key: Option<String>,
    /// The SSH key's comment, if it had one.
    pub comment: Option<String>,
    /// When it was attached (or the password last set).
    pub created_at: DateTime<Utc>,
    /// When it last logged in.
    pub last_used_at: Option<DateTime<Utc>>,
}

const CREDENTIAL_COLUMNS: &str =
    "id, principal_id, kind, fingerprint, public_key, comment, created_at, last_used_at";

impl Credential {
    fn from_row(row: &Row) -> Result<Self> {
        let kind: String = row.try_get(2)?;
        Ok(Self {
            id: row.try_get(0)?,
            principal_id: row.try_get(1)?,
            kind: if kind == "ssh" {
                CredentialKind::Ssh
            } else {
                CredentialKind::Password
            },
            fingerprint: row.try_get(3)?,
            public_key: row.try_get(4)?,
            comment: row.try_get(5)?,
            created_at: row.try_get(6)?,
            last_used_at: row.try_get(7)?,
        })
    }
}

/// A principal's credentials, oldest first; `None` when there is no such principal.
pub async fn list_credentials(pool: &Pool, principal_id: Uuid) -> Result<Option<Vec<Credential>>> {
    let client = pool.get().await?;
    let exists = client
        .query_opt(
            "SELECT 1 FROM hf.principals WHERE id = $1",
            &[&principal_id],
        )
        .await?
        .is_some();
    if !exists {
        return Ok(None);
    }
    let statement = format!(
        "SELECT {CREDENTIAL_COLUMNS} FROM hf.credentials WHERE principal_id = $1 \
         ORDER BY created_at, id"
    );
    let rows = client.query(&statement, &[&principal_id]).await?;
    rows.iter()
        .map(Credential::from_row)
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// What attaching an SSH key did.
#[derive(Debug)]
pub enum AttachSshKey {
    /// Attached.
    Attached(Credential),
    /// No principal has that id.
    PrincipalNotFound,
    /// The principal already has a key with this fingerprint.
    AlreadyAttached {
        /// The key's `SHA256:` fingerprint.
        fingerprint: String,
    },
}

/// Attaches a parsed (and therefore accepted) SSH public key to a principal.
pub async fn attach_ssh_key(
    pool: &Pool,
    principal_id: Uuid,
    key: &SshPublicKey,
) -> Result<AttachSshKey> {
    let client = pool.get().await?;
    let statement = format!(
        "INSERT INTO hf.credentials (principal_id, kind, public_key, fingerprint, comment) \
         SELECT $1, 'ssh', $2, $3, $4 WHERE EXISTS (SELECT 1 FROM hf.principals WHERE id = $1) \
         ON CONFLICT (principal_id, fingerprint) WHERE kind = 'ssh' DO NOTHING \
         RETURNING {CREDENTIAL_COLUMNS}"
    );
    let row = client
        .query_opt(
            &statement,
            &[
                &principal_id,
                &key.to_openssh(),
                &key.fingerprint(),
                &key.comment(),
            ],
        )
        .await?;
    if let Some(row) = row {
        return Ok(AttachSshKey::Attached(Credential::from_row(&row)?));
    }
    let exists = client
        .query_opt(
            "SELECT 1 FROM hf.principals WHERE id = $1",
            &[&principal_id],
        )
        .await?
        .is_some();
    Ok(if exists {
        AttachSshKey::AlreadyAttached {
            fingerprint: key.fingerprint().to_owned(),
        }
    } else {
        AttachSshKey::PrincipalNotFound
    })
}

/// What revoking did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeCredential {
    /// The credential is gone.
    Revoked,
    /// No principal has that id.
    PrincipalNotFound,
    /// The principal has no credential with that id.
    CredentialNotFound,
}

/// Revokes (deletes) one of a principal's credentials.
pub async fn revoke_credential(
    pool: &Pool,
    principal_id: Uuid,
    credential_id: Uuid,
) -> Result<RevokeCredential> {
    let client = pool.get().await?;
    let deleted = client
        .execute(
            "DELETE FROM hf.credentials WHERE id = $2 AND principal_id = $1",
            &[&principal_id, &credential_id],
        )
        .await?;
    if deleted > 0 {
        return Ok(RevokeCredential::Revoked);
    }
    let exists = client
        .query_opt(
            "SELECT 1 FROM hf.principals WHERE id = $1",
            &[&principal_id],
        )
        .await?
        .is_some();
    Ok(if exists {
        RevokeCredential::CredentialNotFound
    } else {
        RevokeCredential::PrincipalNotFound
    })
}

/// What a password login needs to know about a username.
#[derive(Debug, Clone)]
pub struct PasswordLogin {
    /// The principal of that name.
    pub principal: Principal,
    /// Its password credential and argon2id hash, if it has set a password.
    pub password: Option<(Uuid, String)>,
}

/// The principal named `username` and its password hash; `None` when no principal has that name.
pub async fn password_login(pool: &Pool, username: &str) -> Result<Option<PasswordLogin>> {
    let client = pool.get().await?;
    let statement = format!(
        "SELECT {}, c.id, c.password_hash FROM hf.principals AS p \
           LEFT JOIN hf.credentials AS c ON c.principal_id = p.id AND c.kind = 'password' \
          WHERE p.name = $1",
        PRINCIPAL_COLUMNS_OF_P
    );
    let Some(row) = client.query_opt(&statement, &[&username]).await? else {
        return Ok(None);
    };
    let principal = Principal::from_row(&row)?;
    let credential: Option<Uuid> = row.try_get(5)?;
    let hash: Option<String> = row.try_get(6)?;
    Ok(Some(PasswordLogin {
        principal,
        password: credential.zip(hash),
    }))
}

/// An SSH key that may sign a login, as stored.
#[derive(Debug, Clone)]
pub struct SshLoginKey {
    /// The credential's id, to mark it used.
    pub credential_id: Uuid,
    /// The OpenSSH public key line.
    pub public_key: String,
}

/// The principal named `username` and its SSH keys; `None` when no principal has that name.
pub async fn ssh_login_keys(
    pool: &Pool,
    username: &str,
) -> Result<Option<(Principal, Vec<SshLoginKey>)>> {
    let client = pool.get().await?;
    let statement = format!(
        "SELECT {} FROM hf.principals AS p WHERE p.name = $1",
        PRINCIPAL_COLUMNS_OF_P
    );
    let Some(row) = client.query_opt(&statement, &[&username]).await? else {
        return Ok(None);
    };
    let principal = Principal::from_row(&row)?;
    let rows = client
        .query(
            "SELECT id, public_key FROM hf.credentials \
              WHERE principal_id = $1 AND kind = 'ssh' ORDER BY created_at, id",
            &[&principal.id],
        )
        .await?;
    let keys = rows
        .iter()
        .map(|row| {
            Ok(SshLoginKey {
                credential_id: row.try_get(0)?,
                public_key: row.try_get(1)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Some((principal, keys)))
}

/// Records that a credential just logged in.
pub async fn mark_credential_used(pool: &Pool, credential_id: Uuid) -> Result<()> {
    let client = pool.get().await?;
    client
        .execute(
            "UPDATE hf.credentials SET last_used_at = now() WHERE id = $1",
            &[&credential_id],
        )
        .await?;
    Ok(())
}
