//! The `auth` group: password and SSH logins, setup tokens, the caller's profile, browser sessions
//! and the published key set.
//!
//! Every login failure answers the same way whether the username exists or not, and spends the
//! same argon2 work, so neither the answer nor its timing reveals which usernames exist.

use actix_web::http::header;
use actix_web::{get, post, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Authenticated, COOKIE_PATH, SESSION_COOKIE};
use crate::error::{ApiError, Code, ErrorBody};
use crate::extract::{JsonBody, OptionalJsonBody};
use crate::public_access::PublicAccess;
use crate::routes::iam::{EmptyBody, PrincipalBody};
use crate::state::AppState;

/// `POST /auth/login` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    /// The principal's name (its `pgRole`).
    pub username: String,
    /// Its password.
    pub password: String,
}

/// A newly issued token.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenResponse {
    /// Seconds until the token expires.
    pub expires_in: u64,
    /// The ES256 JWT, for `Authorization: Bearer`.
    pub token: String,
}

/// `POST /auth/set-password` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetPasswordRequest {
    /// The setup or reset token from principal creation or `reset-token`.
    pub setup_token: String,
    /// The new password: 8 to 1024 characters.
    pub password: String,
}

/// `POST /auth/challenge` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChallengeRequest {
    /// Who wants to log in with an SSH key.
    pub username: String,
}

/// `POST /auth/challenge` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChallengeResponse {
    /// The exact bytes to sign: `ssh-keygen -Y sign -n hf-auth -f KEY`.
    pub nonce: String,
    /// Seconds until the nonce expires.
    pub expires_in: u64,
}

/// `POST /auth/verify` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyRequest {
    /// The username the nonce was issued for.
    pub username: String,
    /// The nonce from `POST /auth/challenge`.
    pub nonce: String,
    /// The armored SSH signature (`-----BEGIN SSH SIGNATURE-----`) over the nonce.
    pub signature: String,
}

/// `POST /auth/session` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionCodeResponse {
    /// The one-time code for `GET /auth/session/exchange`.
    pub code: String,
    /// Seconds until the code expires.
    pub expires_in: u64,
}

/// `GET /auth/session/exchange` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExchangeQuery {
    /// The one-time code from `POST /auth/session` (required: without it, 400 `INVALID_QUERY`).
    #[param(required = true)]
    pub code: Option<String>,
    /// The screen to mount, `<moduleKey>/<screenKey>`.
    pub screen: Option<String>,
}

/// One published public key.
#[derive(Debug, Serialize, ToSchema)]
pub struct JwkBody {
    /// Always `ES256`.
    pub alg: String,
    /// Always `P-256`.
    pub crv: String,
    /// The RFC 7638 thumbprint, as in token headers.
    pub kid: String,
    /// Always `EC`.
    pub kty: String,
    /// Always `sig`.
    #[serde(rename = "use")]
    pub key_use: String,
    /// The x coordinate, base64url.
    pub x: String,
    /// The y coordinate, base64url.
    pub y: String,
}

/// `GET /.well-known/jwks.json` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct JwksBody {
    /// The current key first, then older keys whose tokens may still be valid.
    pub keys: Vec<JwkBody>,
}

/// The client address login failures are counted against: the TCP peer, or behind a trusted
/// proxy the address it forwards (see `crate::public_access`).
fn client_address(req: &HttpRequest) -> String {
    let address = match req.app_data::<web::Data<PublicAccess>>() {
        Some(access) => access.client_ip(req),
        None => req.peer_addr().map(|addr| addr.ip()),
    };
    address.map_or_else(|| "unknown".to_owned(), |address| address.to_string())
}

/// Logs in with a username and password.
#[utoipa::path(
    tag = "auth",
    request_body = LoginRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "INVALID_CREDENTIALS", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE", body = ErrorBody),
        (status = 429, description = "RATE_LIMITED, with Retry-After", body = ErrorBody),
        (status = 503, description = "OVERLOADED: password checks are queued to their bound; with Retry-After", body = ErrorBody),
    )
)]
#[post("/auth/login")]
pub async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: JsonBody<LoginRequest>,
) -> Result<HttpResponse, ApiError> {
    let LoginRequest { username, password } = body.0;
    let address = client_address(&req);
    let issued = state
        .auth
        .log_in_with_password(state.pool(), &username, password, &address)
        .await?;
    Ok(token_response(issued))
}

fn token_response(issued: hf_app::auth::Issued) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(TokenResponse {
            expires_in: issued.expires_in,
            token: issued.token,
        })
}

/// Sets a password with a one-time setup or reset token, and logs in.
#[utoipa::path(
    tag = "auth",
    request_body = SetPasswordRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "INVALID_SETUP_TOKEN: unknown, used or expired", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE", body = ErrorBody),
        (status = 422, description = "WEAK_PASSWORD (target `password`)", body = ErrorBody),
    )
)]
#[post("/auth/set-password")]
pub async fn set_password(
    state: web::Data<AppState>,
    body: JsonBody<SetPasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    let SetPasswordRequest {
        setup_token,
        password,
    } = body.0;
    let issued = state
        .auth
        .set_password_and_log_in(state.pool(), &setup_token, password)
        .await?;
    Ok(token_response(issued))
}

/// Starts an SSH login: a single-use nonce to sign, bound to the username. Unknown usernames get
/// a nonce too, so the answer reveals nothing.
#[utoipa::path(
    tag = "auth",
    request_body = ChallengeRequest,
    responses(
        (status = 200, body = ChallengeResponse),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE", body = ErrorBody),
    )
)]
#[post("/auth/challenge")]
pub async fn challenge(
    state: web::Data<AppState>,
    body: JsonBody<ChallengeRequest>,
) -> Result<HttpResponse, ApiError> {
    let ttl = state.auth.config().nonce_ttl;
    let nonce = state
        .auth
        .start_ssh_login(state.pool(), &body.0.username)
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(ChallengeResponse {
            nonce: nonce.text().to_owned(),
            expires_in: ttl.as_secs(),
        }))
}

/// Finishes an SSH login: the nonce signed by one of the principal's SSH keys.
#[utoipa::path(
    tag = "auth",
    request_body = VerifyRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "INVALID_SIGNATURE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE", body = ErrorBody),
    )
)]
#[post("/auth/verify")]
pub async fn verify(
    state: web::Data<AppState>,
    body: JsonBody<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let VerifyRequest {
        username,
        nonce,
        signature,
    } = body.0;
    let issued = state
        .auth
        .log_in_with_signature(state.pool(), &username, &nonce, &signature)
        .await?;
    Ok(token_response(issued))
}

/// The caller's own principal.
#[utoipa::path(
    tag = "auth",
    responses(
        (status = 200, body = PrincipalBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/auth/me")]
pub async fn me(caller: Authenticated) -> web::Json<PrincipalBody> {
    web::Json(PrincipalBody::from(caller.0))
}

/// A one-time code for opening a browser session (`GET /auth/session/exchange`). Takes no body
/// (none, or `{}`).
#[utoipa::path(
    tag = "auth",
    request_body(content = Option<EmptyBody>, description = "None, or `{}`"),
    responses(
        (status = 200, body = SessionCodeResponse),
        (status = 400, description = "MALFORMED_JSON or INVALID_BODY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/auth/session")]
pub async fn session(
    caller: Authenticated,
    state: web::Data<AppState>,
    _body: OptionalJsonBody<EmptyBody>,
) -> Result<HttpResponse, ApiError> {
    let ttl = state.auth.config().session_code_ttl;
    let code = state
        .auth
        .create_session_code(state.pool(), &caller.0)
        .await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(SessionCodeResponse {
            code: code.text().to_owned(),
            expires_in: ttl.as_secs(),
        }))
}

/// Exchanges a one-time code for the `hf_runtime` session cookie and the rendering frame.
#[utoipa::path(
    tag = "auth",
    params(ExchangeQuery),
    responses(
        (status = 200, description = "The rendering frame; sets the `hf_runtime` cookie", content_type = "text/html"),
        (status = 400, description = "INVALID_QUERY: `code` is missing, or `screen` is not `<moduleKey>/<screenKey>`", body = ErrorBody),
        (status = 401, description = "INVALID_CODE: unknown, used or expired", body = ErrorBody),
    )
)]
#[get("/auth/session/exchange")]
pub async fn exchange(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<ExchangeQuery>,
) -> Result<HttpResponse, ApiError> {
    let ExchangeQuery { code, screen } = query.into_inner();
    if let Some(screen) = &screen {
        if !is_screen_reference(screen) {
            return Err(ApiError::field(
                Code::InvalidQuery,
                "`screen` must be `<moduleKey>/<screenKey>`.",
                "screen",
            ));
        }
    }
    let code = code.ok_or_else(|| {
        ApiError::field(
            Code::InvalidQuery,
            "The query parameter `code` is required.",
            "code",
        )
    })?;
    let hf_app::auth::Issued {
        token,
        expires_in: max_age,
    } = state.auth.log_in_with_code(state.pool(), &code).await?;
    // `Secure` whenever the browser reached us over TLS, also when a proxy ended it.
    let https = match req.app_data::<web::Data<PublicAccess>>() {
        Some(access) => access.is_https(&req),
        None => req.app_config().secure(),
    };
    let secure = if https { "; Secure" } else { "" };
    let cookie = format!(
        "{SESSION_COOKIE}={token}; Path={COOKIE_PATH}; HttpOnly; SameSite=Strict; \
         Max-Age={max_age}{secure}"
    );
    let frame = crate::routes::hfx::frame_page(&token, Some(max_age), screen.as_deref());
    Ok(frame
        .response()
        .insert_header((header::SET_COOKIE, cookie))
        .body(frame.html))
}

/// `<moduleKey>/<screenKey>`, each a key of the contract.
fn is_screen_reference(text: &str) -> bool {
    let is_key = |key: &str| {
        let mut chars = key.chars();
        key.len() <= 63
            && chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    text.split_once('/')
        .is_some_and(|(module, screen)| is_key(module) && is_key(screen))
}

/// The public keys tokens verify with.
#[utoipa::path(
    tag = "auth",
    responses((status = 200, body = JwksBody))
)]
#[get("/.well-known/jwks.json")]
pub async fn jwks(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let keys = state.auth.keys(state.pool()).await?;
    let body = JwksBody {
        keys: keys
            .jwks()
            .keys
            .into_iter()
            .map(|jwk| JwkBody {
                alg: jwk.alg,
                crv: jwk.crv,
                kid: jwk.kid,
                kty: jwk.kty,
                key_use: jwk.key_use,
                x: jwk.x,
                y: jwk.y,
            })
            .collect(),
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=300"))
        .json(body))
}
