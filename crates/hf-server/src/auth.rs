//! Request authentication: the extractors protected routes name in their signatures
//! ([`Authenticated`], [`Admin`]), and the shared auth state they use (signing keys, token
//! settings, the gate that keeps argon2 off the async threads).
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

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use hf_auth::keys::{KeyRetention, KeySet, SigningKey};
use hf_auth::password::{self, HashMemory, PasswordParams};
use hf_auth::token::{self, Subject, DEFAULT_LEEWAY};
use hf_storage::auth::{Bootstrap, LoginThrottle, Principal, PrincipalCache};
use hf_storage::Pool;

use crate::error::{ApiError, Code};
use crate::state::AppState;

/// The cookie `GET /auth/session/exchange` sets for the browser runtime.
pub const SESSION_COOKIE: &str = "hf_runtime";
/// The only path prefix on which [`SESSION_COOKIE`] authenticates.
pub const COOKIE_PATH: &str = "/hfx/modules";
/// How often an instance re-reads the signing keys, to pick up `hf keys rotate`.
const KEY_RELOAD_INTERVAL: Duration = Duration::from_secs(60);
/// A token with an unknown `kid` makes the instance re-read its keys at most this often, so
/// random key ids cannot turn into a flood of queries.
const UNKNOWN_KID_RELOAD_INTERVAL: Duration = Duration::from_secs(5);
/// Verified tokens remembered at most; the memory is emptied when full (each entry is a token's
/// text, about 500 bytes).
const VERIFIED_CACHE_CAPACITY: usize = 4096;

/// Authentication settings; filled from flags and `HF_*` variables by the CLI.
#[derive(Clone)]
pub struct AuthConfig {
    /// The `iss` of issued tokens and the only one accepted.
    pub issuer: String,
    /// Lifetime of login and session tokens (`HF_TOKEN_TTL`); also the cookie's `Max-Age`.
    pub token_ttl: Duration,
    /// Clock skew tolerated when verifying tokens.
    pub leeway: Duration,
    /// Lifetime of the one-time codes of `POST /auth/session`.
    pub session_code_ttl: Duration,
    /// Lifetime of SSH login nonces.
    pub nonce_ttl: Duration,
    /// Lifetime of setup and reset tokens.
    pub setup_token_ttl: Duration,
    /// The name of the administrator created when no principal exists yet.
    pub admin_name: String,
    /// That administrator's password (`HF_ADMIN_PASSWORD`); without it a setup token is made.
    pub admin_password: Option<String>,
    /// Login throttling per username and per client address.
    pub throttle: LoginThrottle,
    /// Password hashes computed at once at most; each takes ~19 MiB and a CPU core. Half the
    /// cores (at least one) by default, so a login flood leaves the other half to other requests.
    pub hashing_concurrency: usize,
    /// Password checks that may wait for a hashing slot; more are refused at once with 503
    /// `OVERLOADED` (see `hf_app::shed`).
    pub hashing_queue: usize,
    /// The longest a password check waits for a hashing slot before it is refused.
    pub hashing_wait: std::time::Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            issuer: "hf".to_owned(),
            token_ttl: Duration::from_secs(3600),
            leeway: DEFAULT_LEEWAY,
            session_code_ttl: Duration::from_secs(60),
            nonce_ttl: Duration::from_secs(300),
            setup_token_ttl: Duration::from_secs(24 * 3600),
            admin_name: "admin".to_owned(),
            admin_password: None,
            throttle: LoginThrottle::default(),
            hashing_concurrency: (std::thread::available_parallelism().map_or(1, usize::from) / 2)
                .max(1),
            hashing_queue: std::thread::available_parallelism().map_or(1, usize::from),
            hashing_wait: std::time::Duration::from_secs(2),
        }
    }
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("issuer", &self.issuer)
            .field("token_ttl", &self.token_ttl)
            .field("admin_name", &self.admin_name)
            .field(
                "admin_password",
                &self.admin_password.as_ref().map(|_| "<redacted>"),
            )
            .field("throttle", &self.throttle)
            .finish_non_exhaustive()
    }
}

/// The signing keys an instance holds, and when it read them.
struct LoadedKeys {
    keys: Arc<KeySet>,
    loaded_at: Instant,
}

/// Shared authentication state of a running service.
pub struct AuthState {
    config: AuthConfig,
    keys: RwLock<LoadedKeys>,
    verified: Mutex<HashMap<String, VerifiedToken>>,
    principals: PrincipalCache,
    hashing: hf_app::WorkQueue,
    /// argon2 working memories kept between hashes, at most one per permit of `hashing`
    /// (hf_auth::password explains why they are reused).
    hash_memories: Arc<Mutex<Vec<HashMemory>>>,
}

/// What a token that verified once is remembered by: its `sub` and `exp`.
///
/// Only the exact text of a verified token hits; anything else (a tampered copy, the other valid
/// ECDSA signature of the same claims) is verified in full. A hit re-checks `exp`, the only check
/// whose outcome changes with time. The principal is looked up on every request regardless.
#[derive(Debug, Clone)]
struct VerifiedToken {
    sub: String,
    exp: i64,
}

impl std::fmt::Debug for AuthState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthState")
            .field("config", &self.config)
            .field(
                "current_kid",
                &self.current_keys().current().kid().to_owned(),
            )
            .finish_non_exhaustive()
    }
}

/// Prepares authentication at start-up: makes the first signing key if there is none (safe when
/// several instances start at once), drops keys whose tokens have all expired, loads the key set,
/// and creates the administrator when no principal exists yet. `database_url` is where the
/// principal cache opens its listening connection (the pool's database).
pub async fn prepare(
    pool: &Pool,
    database_url: &str,
    config: &AuthConfig,
) -> Result<(AuthState, Bootstrap), crate::Error> {
    let candidate = SigningKey::generate()?;
    if hf_storage::auth::ensure_signing_key(pool, &candidate).await? {
        tracing::info!(kid = candidate.kid(), "created the first signing key");
    }
    let retention = retention(config);
    let window = retention
        .max_token_ttl
        .saturating_add(retention.leeway)
        .saturating_add(retention.reload_margin);
    hf_storage::auth::prune_signing_keys(pool, window).await?;
    let keys = load_keys(pool, &retention).await?;

    let bootstrap_error = |reason: String| crate::Error::Bootstrap {
        name: config.admin_name.clone(),
        reason,
    };
    let password_hash = match &config.admin_password {
        Some(password) => {
            password::check_password_policy(password)
                .map_err(|error| bootstrap_error(format!("HF_ADMIN_PASSWORD: {error}")))?;
            let password = password.clone();
            let hash = tokio::task::spawn_blocking(move || {
                password::hash_password(&password, &PasswordParams::OWASP)
            })
            .await
            .map_err(|error| bootstrap_error(error.to_string()))?
            .map_err(|error| bootstrap_error(error.to_string()))?;
            Some(hash)
        }
        None => None,
    };
    let bootstrap = hf_storage::auth::bootstrap_admin(
        pool,
        &config.admin_name,
        password_hash.as_deref(),
        config.setup_token_ttl,
    )
    .await?;
    match &bootstrap {
        Bootstrap::NameTaken => {
            return Err(bootstrap_error(
                "a database role of that name exists already; choose another admin name".into(),
            ))
        }
        Bootstrap::InvalidName { reason } => return Err(bootstrap_error(reason.clone())),
        _ => {}
    }
    let state = AuthState {
        config: config.clone(),
        keys: RwLock::new(LoadedKeys {
            keys: Arc::new(keys),
            loaded_at: Instant::now(),
        }),
        verified: Mutex::new(HashMap::new()),
        principals: PrincipalCache::new(pool.clone(), database_url)?,
        hashing: hf_app::WorkQueue::new(
            "password checks",
            config.hashing_concurrency,
            config.hashing_queue,
            config.hashing_wait,
        ),
        hash_memories: Arc::new(Mutex::new(Vec::new())),
    };
    Ok((state, bootstrap))
}

fn retention(config: &AuthConfig) -> KeyRetention {
    KeyRetention {
        max_token_ttl: config.token_ttl,
        leeway: config.leeway,
        reload_margin: KEY_RELOAD_INTERVAL.saturating_mul(2),
    }
}

async fn load_keys(pool: &Pool, retention: &KeyRetention) -> Result<KeySet, crate::Error> {
    let stored = hf_storage::auth::load_signing_keys(pool).await?;
    Ok(KeySet::from_stored(&stored, SystemTime::now(), retention)?)
}

impl AuthState {
    /// The settings this state was prepared with.
    pub fn config(&self) -> &AuthConfig {
        &self.config
    }

    /// The key set as last loaded, without touching the database.
    fn current_keys(&self) -> Arc<KeySet> {
        let loaded = self
            .keys
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(&loaded.keys)
    }

    fn loaded_at(&self) -> Instant {
        let loaded = self
            .keys
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        loaded.loaded_at
    }

    /// Re-reads the signing keys from the database (another instance or `hf keys rotate` may
    /// have rotated them).
    async fn reload_keys(&self, pool: &Pool) -> Result<Arc<KeySet>, ApiError> {
        let stored = hf_storage::auth::load_signing_keys(pool).await?;
        let keys = Arc::new(KeySet::from_stored(
            &stored,
            SystemTime::now(),
            &retention(&self.config),
        )?);
        let mut loaded = self
            .keys
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *loaded = LoadedKeys {
            keys: Arc::clone(&keys),
            loaded_at: Instant::now(),
        };
        Ok(keys)
    }

    /// The key set, re-read when it is older than the reload interval.
    pub async fn keys(&self, pool: &Pool) -> Result<Arc<KeySet>, ApiError> {
        if self.loaded_at().elapsed() >= KEY_RELOAD_INTERVAL {
            return self.reload_keys(pool).await;
        }
        Ok(self.current_keys())
    }

    /// Issues a token for a principal, valid for the configured lifetime.
    pub async fn issue_token(
        &self,
        pool: &Pool,
        principal: &Principal,
    ) -> Result<String, ApiError> {
        let keys = self.keys(pool).await?;
        let subject = Subject {
            sub: principal.sub.clone(),
            role: principal.name.clone(),
            admin: principal.is_admin,
        };
        Ok(token::issue(
            keys.current(),
            &self.config.issuer,
            &subject,
            SystemTime::now(),
            self.config.token_ttl,
        )?)
    }

    /// Forgets what this instance remembers of a principal; IAM routes call it after changing
    /// or deleting one, before they answer.
    pub fn forget_principal(&self, principal: &Principal) {
        self.principals.forget(&principal.sub);
    }

    /// Whether principal look-ups are answered from memory now (for tests and diagnostics).
    pub fn principal_cache_is_listening(&self) -> bool {
        self.principals.is_listening()
    }

    /// The token lifetime in whole seconds, as `expiresIn` and `Max-Age` state it.
    pub fn token_ttl_secs(&self) -> u64 {
        self.config.token_ttl.as_secs()
    }

    /// Verifies a token and returns the principal it speaks for, if that principal still exists.
    async fn authenticate(&self, pool: &Pool, token: &str) -> Result<Principal, ApiError> {
        let sub = match self.remembered(token)? {
            Some(sub) => sub,
            None => self.verify_in_full(pool, token).await?,
        };
        self.principals.find_by_sub(&sub).await?.ok_or_else(|| {
            ApiError::new(
                Code::Unauthenticated,
                "The token's principal no longer exists.",
            )
        })
    }

    /// The `sub` of a token that verified before and has not expired since.
    fn remembered(&self, token: &str) -> Result<Option<String>, ApiError> {
        let verified = self
            .verified
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(entry) = verified.get(token) else {
            return Ok(None);
        };
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| ApiError::internal())?
            .as_secs();
        let now = i64::try_from(now).unwrap_or(i64::MAX);
        let leeway = i64::try_from(self.config.leeway.as_secs()).unwrap_or(i64::MAX);
        if now.saturating_sub(leeway) >= entry.exp {
            // Expired now: verify in full, which reports the expiry.
            return Ok(None);
        }
        Ok(Some(entry.sub.clone()))
    }

    /// Verifies a token strictly (hf-auth), re-reading the keys once if its `kid` is new, and
    /// remembers it; returns its `sub`.
    async fn verify_in_full(&self, pool: &Pool, token: &str) -> Result<String, ApiError> {
        let verify = |keys: &KeySet| {
            token::verify(
                token,
                keys,
                &self.config.issuer,
                SystemTime::now(),
                self.config.leeway,
            )
        };
        let keys = self.keys(pool).await?;
        let claims = match verify(&keys) {
            Err(hf_auth::Error::UnknownKeyId { .. })
                if self.loaded_at().elapsed() >= UNKNOWN_KID_RELOAD_INTERVAL =>
            {
                verify(&*self.reload_keys(pool).await?)?
            }
            other => other?,
        };
        let mut verified = self
            .verified
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if verified.len() >= VERIFIED_CACHE_CAPACITY {
            verified.clear();
        }
        verified.insert(
            token.to_owned(),
            VerifiedToken {
                sub: claims.sub.clone(),
                exp: claims.exp,
            },
        );
        Ok(claims.sub)
    }

    /// Refuses at once (503 `OVERLOADED`) when password checks are already queued to the bound,
    /// so a login flood is turned away before it costs database round trips.
    pub fn refuse_if_hashing_is_full(&self) -> Result<(), ApiError> {
        Ok(self.hashing.refuse_if_full()?)
    }

    /// Hashes a new password with argon2id on a blocking thread, at most `hashing_concurrency`
    /// at a time.
    pub async fn hash_password(&self, password: String) -> Result<String, ApiError> {
        let hashed = self
            .run_blocking(move |memory| {
                password::hash_password_in(memory, &password, &PasswordParams::OWASP)
            })
            .await?;
        Ok(hashed?)
    }

    /// Checks a password against a stored hash on a blocking thread; with no hash (unknown user,
    /// or no password set) it spends the same work on a dummy hash and answers false.
    pub async fn verify_password(
        &self,
        phc: Option<String>,
        password: String,
    ) -> Result<bool, ApiError> {
        self.run_blocking(move |memory| match phc {
            Some(phc) => password::verify_password_in(memory, &phc, &password),
            None => {
                password::dummy_verify_in(memory, &password);
                false
            }
        })
        .await
    }

    /// Runs argon2 work on a blocking thread, at most `hashing_concurrency` at once (and at most
    /// `hashing_queue` waiting, or 503 `OVERLOADED`), each in a
    /// working memory reused from earlier hashes. The permit and the memory travel with the
    /// work, so work that outlives its request (the client went away) still counts and still
    /// gives its memory back.
    async fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut HashMemory) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit = self.hashing.enter().await?;
        let memories = Arc::clone(&self.hash_memories);
        let mut memory = lock_memories(&memories).pop().unwrap_or_default();
        tokio::task::spawn_blocking(move || {
            let result = work(&mut memory);
            memory.shrink_to(&PasswordParams::OWASP);
            lock_memories(&memories).push(memory);
            drop(permit);
            result
        })
        .await
        .map_err(|error| {
            tracing::error!(%error, "password hashing task failed");
            ApiError::internal()
        })
    }
}

fn lock_memories(memories: &Mutex<Vec<HashMemory>>) -> std::sync::MutexGuard<'_, Vec<HashMemory>> {
    memories
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

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
