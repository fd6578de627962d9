//! Request authentication: the extractors protected routes name in their signatures
//! ([`Authenticated`], [`Admin`]) and how a request presents its token. The shared auth state
//! they use (signing keys, token settings, the gate that keeps argon2 off the async threads)
//! and logging in are use cases of `hf_app::auth`.
//!
//! A request authenticates with `Authorization: Bearer <JWT>`. The `hf_runtime` cookie is
//! accepted only on `/hfx/modules/*`, where the browser loads compiled screens and cannot send a
//! header; everywhere else the cookie is ignored, so a page cannot ride it into the API. After the
//! token verifies (hf-auth, strictly), its principal is looked up: a deleted principal's tokens
//! stop working at once, and a demoted admin loses admin routes at once, because the stored
//! `is_admin` decides, not the token's claim. The look-up is answered from an in-process cache
//! that database notifications keep current ([`hf_storage::auth::PrincipalCache`]); the IAM
//! routes also clear its entry themselves before they answer.
//!
//! Client addresses for login throttling are the TCP peer addresses, except that a peer listed
//! in `HF_TRUSTED_PROXIES` has its `X-Forwarded-For` believed (`crate::public_access`); from
//! anyone else that header is ignored, because any client can send one.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use hf_storage::auth::Principal;

use crate::error::{ApiError, Code};
use crate::state::AppState;

/// The cookie `GET /auth/session/exchange` sets for the browser runtime.
pub const SESSION_COOKIE: &str = "hf_runtime";
/// The only path prefix on which [`SESSION_COOKIE`] authenticates.
pub const COOKIE_PATH: &str = "/hfx/modules";
pub use hf_app::auth::{prepare, AuthConfig, AuthState};

/// Any authenticated principal. Put it in a handler's signature to require authentication.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Principal);

/// An authenticated administrator; anyone else gets 403 `FORBIDDEN` (401 without a valid token).
#[derive(Debug, Clone)]
pub struct Admin(pub Principal);

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _payload: &mut Payload) -> Self::Future {
        let found = presented_token(req);
        let state = req.app_data::<web::Data<AppState>>().cloned();
        Box::pin(async move {
            let token = found?;
            let state = state.ok_or_else(ApiError::internal)?;
            let principal = state.auth.authenticate(state.pool(), &token).await?;
            Ok(Authenticated(principal))
        })
    }
}

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let authenticated = Authenticated::from_request(req, payload);
        Box::pin(async move {
            let Authenticated(principal) = authenticated.await?;
            if !principal.is_admin {
                return Err(ApiError::new(
                    Code::Forbidden,
                    "Only administrators may use this route.",
                ));
            }
            Ok(Admin(principal))
        })
    }
}

/// The token a request presents: the Bearer header, or on `/hfx/modules/*` only, the session
/// cookie. A malformed Authorization header is an error even where a cookie is also present.
pub(crate) fn presented_token(req: &HttpRequest) -> Result<String, ApiError> {
    let unauthenticated = |message: &str| ApiError::new(Code::Unauthenticated, message);
    if let Some(value) = req.headers().get(header::AUTHORIZATION) {
        let text = value
            .to_str()
            .map_err(|_| unauthenticated("The Authorization header is not readable text."))?;
        let (scheme, credentials) = text.trim().split_once(' ').unwrap_or((text.trim(), ""));
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(unauthenticated(
                "The Authorization header must use the Bearer scheme.",
            ));
        }
        let credentials = credentials.trim();
        if credentials.is_empty() {
            return Err(unauthenticated("The Bearer token is empty."));
        }
        return Ok(credentials.to_owned());
    }
    if cookie_allowed(req) {
        if let Some(token) = session_cookie(req) {
            return Ok(token);
        }
    }
    Err(unauthenticated(
        "This route needs authentication: send Authorization: Bearer <token>.",
    ))
}

/// Whether the route serving this request is one where the session cookie counts.
fn cookie_allowed(req: &HttpRequest) -> bool {
    let prefix = format!("{COOKIE_PATH}/");
    let pattern_ok = req
        .match_pattern()
        .is_none_or(|pattern| pattern.starts_with(&prefix));
    pattern_ok && req.path().starts_with(&prefix)
}

/// The value of the session cookie, read from the `Cookie` headers.
fn session_cookie(req: &HttpRequest) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value.trim_matches('"').to_owned())
        .filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::presented_token;

    fn token_of(request: TestRequest) -> Result<String, String> {
        presented_token(&request.to_http_request()).map_err(|error| error.to_string())
    }

    #[test]
    fn bearer_tokens_are_read_with_any_letter_case_of_the_scheme() {
        for header in [
            "Bearer abc.def.ghi",
            "bearer abc.def.ghi",
            "BEARER   abc.def.ghi  ",
        ] {
            let request = TestRequest::get()
                .uri("/auth/me")
                .insert_header(("authorization", header));
            assert_eq!(token_of(request).as_deref(), Ok("abc.def.ghi"), "{header}");
        }
    }

    #[test]
    fn other_schemes_and_empty_tokens_are_refused() {
        for header in [
            "Basic YTpi",
            "Bearer",
            "Bearer    ",
            "Token x",
            "abc.def.ghi",
        ] {
            let request = TestRequest::get()
                .uri("/auth/me")
                .insert_header(("authorization", header));
            assert!(token_of(request).is_err(), "{header}");
        }
    }

    #[test]
    fn the_cookie_counts_only_under_hfx_modules() {
        let cookie = "theme=dark; hf_runtime=abc.def.ghi; other=1";
        for path in ["/hfx/modules/tree-crm-home.js", "/hfx/modules/x"] {
            let request = TestRequest::get()
                .uri(path)
                .insert_header(("cookie", cookie));
            assert_eq!(token_of(request).as_deref(), Ok("abc.def.ghi"), "{path}");
        }
        for path in [
            "/auth/me",
            "/iam/principals",
            "/hfx/modules",
            "/hfx/modulesx/y",
            "/hfx/compile",
            "/x/hfx/modules/y",
        ] {
            let request = TestRequest::get()
                .uri(path)
                .insert_header(("cookie", cookie));
            assert!(token_of(request).is_err(), "{path}");
        }
    }

    #[test]
    fn a_bad_authorization_header_is_not_rescued_by_the_cookie() {
        let request = TestRequest::get()
            .uri("/hfx/modules/x.js")
            .insert_header(("authorization", "Basic YTpi"))
            .insert_header(("cookie", "hf_runtime=abc.def.ghi"));
        assert!(token_of(request).is_err());
    }

    #[test]
    fn other_cookies_and_empty_values_are_not_tokens() {
        for cookie in [
            "hf_runtimex=abc",
            "xhf_runtime=abc",
            "hf_runtime=",
            "hf_runtime",
        ] {
            let request = TestRequest::get()
                .uri("/hfx/modules/x.js")
                .insert_header(("cookie", cookie));
            assert!(token_of(request).is_err(), "{cookie}");
        }
    }
}
