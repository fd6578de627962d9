//! Authentication state and logging in: the signing keys (made at first start, re-read to pick
//! up rotations), issuing and strictly verifying tokens (remembering tokens that verified, and
//! looking their principal up on every use, so a deleted principal's tokens stop at once), and
//! password hashing bounded to part of the cores. The HTTP service's extractors and login routes
//! call these; nothing here knows HTTP.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use hf_auth::keys::{KeyRetention, KeySet, SigningKey};
use hf_auth::password::{self, HashMemory, PasswordParams};
use hf_auth::token::{self, Subject, DEFAULT_LEEWAY};
use hf_storage::auth::{Bootstrap, LoginThrottle, Principal, PrincipalCache};
use hf_storage::Pool;

use crate::background::LowPriorityThreads;
use crate::iam::Iam;
use crate::shed::WorkQueue;
use crate::{Error, Result};

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
    /// `OVERLOADED` (see [`crate::shed`]).
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
    principals: Arc<PrincipalCache>,
    /// Principal management, which forgets changed principals in `principals`.
    iam: Iam,
    hashing: WorkQueue,
    /// The threads the hashes run on, below the priority of requests (see
    /// [`crate::background`]).
    hashing_threads: LowPriorityThreads,
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
) -> Result<(AuthState, Bootstrap)> {
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

    let bootstrap_error = |reason: String| Error::Bootstrap {
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
    let principals = Arc::new(PrincipalCache::new(pool.clone(), database_url)?);
    let iam = Iam::new(
        pool.clone(),
        database_url,
        Some(Arc::clone(&principals)),
        config.setup_token_ttl,
    )?;
    let state = AuthState {
        config: config.clone(),
        keys: RwLock::new(LoadedKeys {
            keys: Arc::new(keys),
            loaded_at: Instant::now(),
        }),
        verified: Mutex::new(HashMap::new()),
        principals,
        iam,
        hashing: WorkQueue::new(
            "password checks",
            config.hashing_concurrency,
            config.hashing_queue,
            config.hashing_wait,
        ),
        hashing_threads: LowPriorityThreads::start(
            "hf-password-hashing",
            config.hashing_concurrency,
        )?,
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

async fn load_keys(pool: &Pool, retention: &KeyRetention) -> Result<KeySet> {
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
    async fn reload_keys(&self, pool: &Pool) -> Result<Arc<KeySet>> {
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
    pub async fn keys(&self, pool: &Pool) -> Result<Arc<KeySet>> {
        if self.loaded_at().elapsed() >= KEY_RELOAD_INTERVAL {
            return self.reload_keys(pool).await;
        }
        Ok(self.current_keys())
    }

    /// Issues a token for a principal, valid for the configured lifetime.
    pub async fn issue_token(&self, pool: &Pool, principal: &Principal) -> Result<String> {
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

    /// Principal management; its changes are forgotten by this instance's principal cache at
    /// once and acknowledged by every other live instance before they are reported done.
    pub fn iam(&self) -> &Iam {
        &self.iam
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
    pub async fn authenticate(&self, pool: &Pool, token: &str) -> Result<Principal> {
        let sub = match self.remembered(token)? {
            Some(sub) => sub,
            None => self.verify_in_full(pool, token).await?,
        };
        self.principals
            .find_by_sub(&sub)
            .await?
            .ok_or(Error::PrincipalGone)
    }

    /// The `sub` of a token that verified before and has not expired since.
    fn remembered(&self, token: &str) -> Result<Option<String>> {
        let verified = self
            .verified
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(entry) = verified.get(token) else {
            return Ok(None);
        };
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| Error::Internal("the clock is before 1970".to_owned()))?
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
    async fn verify_in_full(&self, pool: &Pool, token: &str) -> Result<String> {
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

    /// Refuses at once ([`Error::Overloaded`]) when as many logins are in progress as the
    /// password checks can run and queue (or the queue is full), so a login flood is turned away
    /// before its body is read; takes no place (see [`WorkQueue::refuse_if_full`]).
    pub fn refuse_if_hashing_is_full(&self) -> Result<()> {
        self.hashing.refuse_if_full()
    }

    /// Hashes a new password with argon2id on a blocking thread, at most `hashing_concurrency`
    /// at a time.
    pub async fn hash_password(&self, password: String) -> Result<String> {
        let hashed = self
            .run_blocking(move |memory| {
                password::hash_password_in(memory, &password, &PasswordParams::OWASP)
            })
            .await?;
        Ok(hashed?)
    }

    /// Checks a password against a stored hash on a blocking thread; with no hash (unknown user,
    /// or no password set) it spends the same work on a dummy hash and answers false.
    pub async fn verify_password(&self, phc: Option<String>, password: String) -> Result<bool> {
        self.run_blocking(move |memory| match phc {
            Some(phc) => password::verify_password_in(memory, &phc, &password),
            None => {
                password::dummy_verify_in(memory, &password);
                false
            }
        })
        .await
    }

    /// Runs argon2 work on a hashing thread, at most `hashing_concurrency` at once (and at most
    /// `hashing_queue` waiting, or [`Error::Overloaded`]), each in a
    /// working memory reused from earlier hashes. The permit and the memory travel with the
    /// work, so work that outlives its request (the client went away) still counts and still
    /// gives its memory back.
    async fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut HashMemory) -> T + Send + 'static,
    ) -> Result<T> {
        let permit = self.hashing.enter().await?;
        let memories = Arc::clone(&self.hash_memories);
        let mut memory = lock_memories(&memories).pop().unwrap_or_default();
        self.hashing_threads
            .run(move || {
                let result = work(&mut memory);
                memory.shrink_to(&PasswordParams::OWASP);
                lock_memories(&memories).push(memory);
                drop(permit);
                result
            })
            .await
    }
}

fn lock_memories(memories: &Mutex<Vec<HashMemory>>) -> std::sync::MutexGuard<'_, Vec<HashMemory>> {
    memories
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A token issued by a login.
#[derive(Debug, Clone)]
pub struct Issued {
    /// The token.
    pub token: String,
    /// Its lifetime in whole seconds.
    pub expires_in: u64,
}

/// A username that could be a principal's; anything else is treated as unknown without asking
/// the database (it may hold bytes PostgreSQL text cannot).
pub fn plausible_username(username: &str) -> bool {
    hf_auth::name::validate_principal_name(username).is_ok()
}

/// Logging in. Every failure answers the same way whether the username exists or not, and
/// spends the same argon2 work, so neither the answer nor its timing reveals which usernames
/// exist.
impl AuthState {
    /// Password login, throttled per username and per client `address`.
    pub async fn log_in_with_password(
        &self,
        pool: &Pool,
        username: &str,
        password: String,
        address: &str,
    ) -> Result<Issued> {
        // Held until the login ends: logins past what hashing can run and queue are refused
        // here, before their database round trips (see `WorkQueue::admit`).
        let _admission = self.hashing.admit()?;
        let throttle = self.config.throttle;
        if let Some(wait) =
            hf_storage::auth::login_blocked_for(pool, &throttle, username, address).await?
        {
            return Err(Error::RateLimited {
                seconds: wait.as_secs().saturating_add(1),
            });
        }
        let found = if plausible_username(username) {
            hf_storage::auth::password_login(pool, username).await?
        } else {
            None
        };
        let phc = found
            .as_ref()
            .and_then(|login| login.password.as_ref())
            .map(|(_, phc)| phc.clone());
        let matches = self.verify_password(phc, password).await?;
        let Some(login) = found.filter(|_| matches) else {
            hf_storage::auth::record_login_failure(pool, &throttle, username, address).await?;
            return Err(Error::InvalidCredentials);
        };
        hf_storage::auth::reset_login_failures(pool, username).await?;
        if let Some((credential_id, _)) = &login.password {
            hf_storage::auth::mark_credential_used(pool, *credential_id).await?;
        }
        self.issue(pool, &login.principal).await
    }

    /// Sets a password with a one-time setup or reset token, and logs in.
    pub async fn set_password_and_log_in(
        &self,
        pool: &Pool,
        setup_token: &str,
        password: String,
    ) -> Result<Issued> {
        password::check_password_policy(&password)?;
        let token_hash = hf_auth::secret::hash_secret(setup_token);
        if !hf_storage::auth::setup_token_is_valid(pool, &token_hash).await? {
            return Err(Error::InvalidSetupToken);
        }
        let phc = self.hash_password(password).await?;
        let principal = hf_storage::auth::set_password_with_token(pool, &token_hash, &phc)
            .await?
            .ok_or(Error::InvalidSetupToken)?;
        self.issue(pool, &principal).await
    }

    /// Starts an SSH login: a single-use nonce to sign, bound to the username, valid for the
    /// configured nonce lifetime. Unknown usernames get a nonce too, so the answer reveals
    /// nothing.
    pub async fn start_ssh_login(
        &self,
        pool: &Pool,
        username: &str,
    ) -> Result<hf_auth::secret::SecretToken> {
        if plausible_username(username) {
            Ok(hf_storage::auth::create_ssh_nonce(pool, username, self.config.nonce_ttl).await?)
        } else {
            // No principal can have this name, so the nonce could never verify; it is not stored.
            Ok(hf_auth::secret::SecretToken::generate())
        }
    }

    /// SSH login: the nonce of a challenge, signed by one of the principal's SSH keys. The nonce
    /// is used up by this attempt whatever its outcome: one nonce, one guess.
    pub async fn log_in_with_signature(
        &self,
        pool: &Pool,
        username: &str,
        nonce: &str,
        signature: &str,
    ) -> Result<Issued> {
        use hf_auth::ssh::{verify_ssh_signature, SshPublicKey, SSH_NAMESPACE};
        let refused = |detail: &str| Error::SignatureRefused {
            detail: detail.to_owned(),
        };
        if !plausible_username(username) {
            return Err(refused("the nonce is unknown"));
        }
        let nonce_hash = hf_auth::secret::hash_secret(nonce);
        if !hf_storage::auth::consume_ssh_nonce(pool, &nonce_hash, username).await? {
            return Err(refused(
                "the nonce is unknown, used, expired or was issued for another username",
            ));
        }
        let Some((principal, keys)) = hf_storage::auth::ssh_login_keys(pool, username).await?
        else {
            return Err(refused("no SSH key of this principal made it"));
        };
        let mut last_problem = "no SSH key of this principal made it".to_owned();
        for key in &keys {
            let Ok(public_key) = SshPublicKey::parse(&key.public_key) else {
                tracing::warn!(credential = %key.credential_id, "stored SSH key does not parse");
                continue;
            };
            match verify_ssh_signature(&public_key, SSH_NAMESPACE, nonce.as_bytes(), signature) {
                Ok(()) => {
                    hf_storage::auth::mark_credential_used(pool, key.credential_id).await?;
                    return self.issue(pool, &principal).await;
                }
                Err(hf_auth::Error::SignatureKeyMismatch) => {}
                Err(error) => last_problem = error.to_string(),
            }
        }
        Err(refused(&last_problem))
    }

    /// A one-time code a browser exchanges for a session (`POST /auth/session`), valid for the
    /// configured session code lifetime.
    pub async fn create_session_code(
        &self,
        pool: &Pool,
        principal: &Principal,
    ) -> Result<hf_auth::secret::SecretToken> {
        Ok(
            hf_storage::auth::create_session_code(pool, principal.id, self.config.session_code_ttl)
                .await?,
        )
    }

    /// Exchanges a one-time session code for a token.
    pub async fn log_in_with_code(&self, pool: &Pool, code: &str) -> Result<Issued> {
        let principal =
            hf_storage::auth::consume_session_code(pool, &hf_auth::secret::hash_secret(code))
                .await?
                .ok_or(Error::InvalidCode)?;
        self.issue(pool, &principal).await
    }

    async fn issue(&self, pool: &Pool, principal: &Principal) -> Result<Issued> {
        Ok(Issued {
            token: self.issue_token(pool, principal).await?,
            expires_in: self.token_ttl_secs(),
        })
    }
}
