//! The `iam` group: principals (each a PostgreSQL role) and their credentials.
//!
//! Administrators manage everything; any principal may list, attach and revoke its own
//! credentials. Ids in paths that are not UUIDs simply name nothing (404), and are checked only
//! after the caller is authenticated, so an anonymous caller learns nothing from them.

use actix_web::{delete, get, patch, post, web, HttpResponse};
use chrono::{DateTime, Utc};
use hf_app::iam::{
    AttachSshKey, CreatePrincipal, Credential, DeletePrincipal, Principal, RevokeCredential,
    SetAdmin,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{Admin, Authenticated};
use crate::error::{ApiError, Code, ErrorBody, Scope};
use crate::extract::{JsonBody, OptionalJsonBody};
use crate::state::AppState;

/// A principal as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrincipalBody {
    /// Its id.
    pub id: Uuid,
    /// The `sub` claim of its tokens.
    pub sub: String,
    /// Its PostgreSQL role, which is also its login username.
    pub pg_role: String,
    /// When it was created (RFC 3339).
    pub created_at: DateTime<Utc>,
    /// Whether it may use admin-only routes.
    pub is_admin: bool,
}

impl From<Principal> for PrincipalBody {
    fn from(principal: Principal) -> Self {
        Self {
            id: principal.id,
            sub: principal.sub,
            pg_role: principal.name,
            created_at: principal.created_at,
            is_admin: principal.is_admin,
        }
    }
}

/// A new principal, with the setup token for its first password (shown only here).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedPrincipalBody {
    /// The principal.
    #[serde(flatten)]
    pub principal: PrincipalBody,
    /// For `POST /auth/set-password`; single use, expires.
    pub setup_token: String,
}

/// A body that must be absent or `{}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyBody {}

/// `POST /iam/principals` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CreatePrincipalRequest {
    /// Display name, login username and database role name: 1–63 bytes, no colon, no control
    /// characters, not starting with `pg_`.
    pub name: String,
    /// Whether it is an administrator (default false).
    #[serde(default)]
    pub is_admin: Option<bool>,
}

/// `PATCH /iam/principals/{id}` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PatchPrincipalRequest {
    /// Promote or demote.
    #[serde(default)]
    pub is_admin: Option<bool>,
}

/// The only kind of credential that can be attached over HTTP (passwords are set with a token).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AttachableKind {
    /// An OpenSSH public key.
    Ssh,
}

/// `POST /iam/principals/{id}/credentials` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AttachCredentialRequest {
    /// Always `ssh`.
    pub kind: AttachableKind,
    /// One OpenSSH public key line: ssh-ed25519, ecdsa-sha2-nistp256, or RSA of 2048–4096 bits.
    pub public_key: String,
}

/// A credential as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialBody {
    /// Its id, to revoke it.
    pub id: Uuid,
    /// `password` or `ssh`.
    #[schema(example = "ssh")]
    pub kind: &'static str,
    /// The SSH key's `SHA256:` fingerprint.
    pub fingerprint: Option<String>,
    /// The SSH key's OpenSSH line.
    pub public_key: Option<String>,
    /// The SSH key's comment.
    pub comment: Option<String>,
    /// When it was attached.
    pub created_at: DateTime<Utc>,
    /// When it last logged in.
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<Credential> for CredentialBody {
    fn from(credential: Credential) -> Self {
        Self {
            id: credential.id,
            kind: credential.kind.as_str(),
            fingerprint: credential.fingerprint,
            public_key: credential.public_key,
            comment: credential.comment,
            created_at: credential.created_at,
            last_used_at: credential.last_used_at,
        }
    }
}

/// `POST /iam/principals/{id}/reset-token` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResetTokenBody {
    /// For `POST /auth/set-password`; single use; replaces earlier unused ones.
    pub setup_token: String,
    /// Seconds until it expires.
    pub expires_in: u64,
}

fn principal_not_found(id: &str) -> ApiError {
    ApiError::entry(
        Code::PrincipalNotFound,
        "No principal has this id.",
        Scope::Record,
        Some(id.to_owned()),
    )
}

/// Parses a principal or credential id from the path; text that is not a UUID names nothing.
fn parse_id(text: &str, not_found: impl FnOnce(&str) -> ApiError) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text).map_err(|_| not_found(text))
}

/// Creates a principal and its PostgreSQL role; answers with a one-time setup token.
#[utoipa::path(
    tag = "iam",
    request_body = CreatePrincipalRequest,
    responses(
        (status = 201, body = CreatedPrincipalBody),
        (status = 400, description = "INVALID_NAME, MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: a principal or database role has this name", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/iam/principals")]
pub async fn create_principal(
    _admin: Admin,
    state: web::Data<AppState>,
    body: JsonBody<CreatePrincipalRequest>,
) -> Result<HttpResponse, ApiError> {
    let CreatePrincipalRequest { name, is_admin } = body.0;
    let outcome = state
        .auth
        .iam()
        .create_principal(&name, is_admin.unwrap_or(false))
        .await?;
    match outcome {
        CreatePrincipal::Created {
            principal,
            setup_token,
        } => Ok(HttpResponse::Created()
            .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
            .json(CreatedPrincipalBody {
                principal: principal.into(),
                setup_token: setup_token.text().to_owned(),
            })),
        CreatePrincipal::InvalidName { reason } => Err(ApiError::field(
            Code::InvalidName,
            format!("The name is not allowed: {reason}."),
            "name",
        )),
        CreatePrincipal::NameTaken => Err(ApiError::new(
            Code::AlreadyExists,
            format!("A principal or another database role is already named `{name}`."),
        )),
    }
}

/// Every principal, sorted by name.
#[utoipa::path(
    tag = "iam",
    responses(
        (status = 200, body = Vec<PrincipalBody>),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/iam/principals")]
pub async fn list_principals(
    _admin: Admin,
    state: web::Data<AppState>,
) -> Result<web::Json<Vec<PrincipalBody>>, ApiError> {
    let principals = state.auth.iam().list_principals().await?;
    Ok(web::Json(principals.into_iter().map(Into::into).collect()))
}

/// One principal.
#[utoipa::path(
    tag = "iam",
    params(("id" = Uuid, Path, description = "The principal's id")),
    responses(
        (status = 200, body = PrincipalBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
        (status = 404, description = "PRINCIPAL_NOT_FOUND", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/iam/principals/{id}")]
pub async fn get_principal(
    _admin: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<web::Json<PrincipalBody>, ApiError> {
    let id = parse_id(&path, principal_not_found)?;
    let principal = state
        .auth
        .iam()
        .principal(id)
        .await?
        .ok_or_else(|| principal_not_found(&path))?;
    Ok(web::Json(principal.into()))
}

/// Promotes or demotes a principal; the last administrator cannot be demoted.
#[utoipa::path(
    tag = "iam",
    params(("id" = Uuid, Path, description = "The principal's id")),
    request_body = PatchPrincipalRequest,
    responses(
        (status = 200, body = PrincipalBody),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
        (status = 404, description = "PRINCIPAL_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "LAST_ADMIN", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[patch("/iam/principals/{id}")]
pub async fn patch_principal(
    _admin: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: JsonBody<PatchPrincipalRequest>,
) -> Result<web::Json<PrincipalBody>, ApiError> {
    let id = parse_id(&path, principal_not_found)?;
    let principal = match body.0.is_admin {
        None => state
            .auth
            .iam()
            .principal(id)
            .await?
            .ok_or_else(|| principal_not_found(&path))?,
        Some(is_admin) => match state.auth.iam().set_admin(id, is_admin).await? {
            SetAdmin::Updated(principal) => principal,
            SetAdmin::NotFound => return Err(principal_not_found(&path)),
            SetAdmin::LastAdmin => return Err(last_admin(&path)),
        },
    };
    Ok(web::Json(principal.into()))
}

fn last_admin(id: &str) -> ApiError {
    ApiError::entry(
        Code::LastAdmin,
        "This is the last administrator; make another principal an administrator first.",
        Scope::Record,
        Some(id.to_owned()),
    )
}

/// Deletes a principal and drops its database role; its tokens stop working at once.
#[utoipa::path(
    tag = "iam",
    params(("id" = Uuid, Path, description = "The principal's id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
        (status = 404, description = "PRINCIPAL_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "LAST_ADMIN", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[delete("/iam/principals/{id}")]
pub async fn delete_principal(
    _admin: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&path, principal_not_found)?;
    match state.auth.iam().delete_principal(id).await? {
        DeletePrincipal::Deleted(_) => Ok(HttpResponse::NoContent().finish()),
        DeletePrincipal::NotFound => Err(principal_not_found(&path)),
        DeletePrincipal::LastAdmin => Err(last_admin(&path)),
    }
}

/// A principal's credentials (an administrator's, or the caller's own).
#[utoipa::path(
    tag = "iam",
    params(("id" = Uuid, Path, description = "The principal's id")),
    responses(
        (status = 200, body = Vec<CredentialBody>),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: another principal's, and not an administrator", body = ErrorBody),
        (status = 404, description = "PRINCIPAL_NOT_FOUND", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/iam/principals/{id}/credentials")]
pub async fn list_credentials(
    caller: Authenticated,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<web::Json<Vec<CredentialBody>>, ApiError> {
    let id = owned_id(&caller.0, &path)?;
    let credentials = state
        .auth
        .iam()
        .list_credentials(id)
        .await?
        .ok_or_else(|| principal_not_found(&path))?;
    Ok(web::Json(credentials.into_iter().map(Into::into).collect()))
}

/// The principal id of the path, once the caller may act on it: administrators on anyone,
/// others on themselves only.
fn owned_id(caller: &Principal, text: &str) -> Result<Uuid, ApiError> {
    let id = Uuid::parse_str(text).ok();
    if !caller.is_admin && id != Some(caller.id) {
        return Err(ApiError::new(
            Code::Forbidden,
            "Only administrators may manage another principal's credentials.",
        ));
    }
    id.ok_or_else(|| principal_not_found(text))
}

/// Attaches an SSH public key as a credential (an administrator, or the principal itself).
#[utoipa::path(
    tag = "iam",
    params(("id" = Uuid, Path, description = "The principal's id")),
    request_body = AttachCredentialRequest,
    responses(
        (status = 201, body = CredentialBody),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "PRINCIPAL_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "ALREADY_EXISTS: this key is attached already", body = ErrorBody),
        (status = 422, description = "INVALID_PUBLIC_KEY (target `publicKey`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/iam/principals/{id}/credentials")]
pub async fn attach_credential(
    caller: Authenticated,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: JsonBody<AttachCredentialRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = owned_id(&caller.0, &path)?;
    let AttachCredentialRequest {
        kind: AttachableKind::Ssh,
        public_key,
    } = body.0;
    match state.auth.iam().attach_ssh_key(id, &public_key).await? {
        AttachSshKey::Attached(credential) => {
            Ok(HttpResponse::Created().json(CredentialBody::from(credential)))
        }
        AttachSshKey::PrincipalNotFound => Err(principal_not_found(&path)),
        AttachSshKey::AlreadyAttached { fingerprint } => Err(ApiError::field(
            Code::AlreadyExists,
            format!("The key {fingerprint} is attached to this principal already."),
            "publicKey",
        )),
    }
}

/// Revokes a credential: it can no longer log in.
#[utoipa::path(
    tag = "iam",
    params(
        ("id" = Uuid, Path, description = "The principal's id"),
        ("credentialId" = Uuid, Path, description = "The credential's id"),
    ),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "PRINCIPAL_NOT_FOUND or CREDENTIAL_NOT_FOUND", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[delete("/iam/principals/{id}/credentials/{credentialId}")]
pub async fn revoke_credential(
    caller: Authenticated,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (principal, credential) = path.into_inner();
    let id = owned_id(&caller.0, &principal)?;
    let credential_not_found = |text: &str| {
        ApiError::entry(
            Code::CredentialNotFound,
            "This principal has no credential with this id.",
            Scope::Record,
            Some(text.to_owned()),
        )
    };
    let credential_id = parse_id(&credential, credential_not_found)?;
    match state
        .auth
        .iam()
        .revoke_credential(id, credential_id)
        .await?
    {
        RevokeCredential::Revoked => Ok(HttpResponse::NoContent().finish()),
        RevokeCredential::PrincipalNotFound => Err(principal_not_found(&principal)),
        RevokeCredential::CredentialNotFound => Err(credential_not_found(&credential)),
    }
}

/// A new one-time token to set the principal's password; earlier unused ones stop working.
/// Takes no body (none, or `{}`).
#[utoipa::path(
    tag = "iam",
    params(("id" = Uuid, Path, description = "The principal's id")),
    request_body(content = Option<EmptyBody>, description = "None, or `{}`"),
    responses(
        (status = 200, body = ResetTokenBody),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
        (status = 404, description = "PRINCIPAL_NOT_FOUND", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/iam/principals/{id}/reset-token")]
pub async fn reset_token(
    _admin: Admin,
    state: web::Data<AppState>,
    path: web::Path<String>,
    _body: OptionalJsonBody<EmptyBody>,
) -> Result<HttpResponse, ApiError> {
    let id = parse_id(&path, principal_not_found)?;
    let ttl = state.auth.iam().setup_token_ttl();
    let token = state
        .auth
        .iam()
        .issue_reset_token(id)
        .await?
        .ok_or_else(|| principal_not_found(&path))?;
    Ok(HttpResponse::Ok()
        .insert_header((actix_web::http::header::CACHE_CONTROL, "no-store"))
        .json(ResetTokenBody {
            setup_token: token.text().to_owned(),
            expires_in: ttl.as_secs(),
        }))
}
