//! Login throttling: failed logins counted per username and per client address in PostgreSQL, so
//! every instance of the service sees the same counts.
//!
//! Each counter has a fixed window that starts at its first failure. Once a counter reaches its
//! limit, logins for that username (or from that address) are refused until the window ends. A
//! successful login resets the username's counter, not the address's: one valid account must not
//! let an address keep guessing at others. Expired counters are deleted whenever a failure is
//! recorded.

use std::time::Duration;

use super::seconds;
use crate::{Pool, Result};

/// Counter keys longer than this are stored as their SHA-256, so an absurd username cannot make
/// an index entry too large.
const MAX_KEY_BYTES: usize = 255;

/// The throttling policy (contract: 10 failures per username, 100 per address, in 15 minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginThrottle {
    /// Failures after which a username is blocked for the rest of its window.
    pub max_user_failures: u32,
    /// Failures after which a client address is blocked for the rest of its window.
    pub max_address_failures: u32,
    /// How long a window lasts from its first failure.
    pub window: Duration,
}

impl Default for LoginThrottle {
    fn default() -> Self {
        Self {
            max_user_failures: 10,
            max_address_failures: 100,
            window: Duration::from_secs(15 * 60),
        }
    }
}

/// How long logins for `username` from `address` are still blocked; `None` when they are not.
pub async fn login_blocked_for(
    pool: &Pool,
    throttle: &LoginThrottle,
    username: &str,
    address: &str,
) -> Result<Option<Duration>> {
    let client = pool.get().await?;
    let statement = client
        .prepare_cached(
            "SELECT max(extract(epoch FROM window_start + make_interval(secs => $3) - now()))::float8 \
               FROM hf.login_failures \
              WHERE window_start > now() - make_interval(secs => $3) \
                AND ((scope = 'user' AND key = $1 AND failures >= $4) \
                  OR (scope = 'address' AND key = $2 AND failures >= $5))",
        )
        .await?;
    let row = client
        .query_one(
            &statement,
            &[
                &counter_key(username),
                &counter_key(address),
                &seconds(throttle.window),
                &i32::try_from(throttle.max_user_failures).unwrap_or(i32::MAX),
                &i32::try_from(throttle.max_address_failures).unwrap_or(i32::MAX),
            ],
        )
        .await?;
    let remaining: Option<f64> = row.try_get(0)?;
    Ok(remaining.map(|secs| Duration::from_secs_f64(secs.max(0.0))))
}

/// Counts one failed login against the username and the client address.
pub async fn record_login_failure(
    pool: &Pool,
    throttle: &LoginThrottle,
    username: &str,
    address: &str,
) -> Result<()> {
    let client = pool.get().await?;
    let window = seconds(throttle.window);
    client
        .execute(
            "INSERT INTO hf.login_failures AS f (scope, key, failures, window_start) \
             VALUES ('user', $1, 1, now()), ('address', $2, 1, now()) \
             ON CONFLICT (scope, key) DO UPDATE SET \
               failures = CASE WHEN f.window_start <= now() - make_interval(secs => $3) \
                               THEN 1 ELSE f.failures + 1 END, \
               window_start = CASE WHEN f.window_start <= now() - make_interval(secs => $3) \
                                   THEN now() ELSE f.window_start END",
            &[&counter_key(username), &counter_key(address), &window],
        )
        .await?;
    client
        .execute(
            "DELETE FROM hf.login_failures WHERE window_start <= now() - make_interval(secs => $1)",
            &[&window],
        )
        .await?;
    Ok(())
}

/// Forgets a username's failures after a successful login.
pub async fn reset_login_failures(pool: &Pool, username: &str) -> Result<()> {
    let client = pool.get().await?;
    client
        .execute(
            "DELETE FROM hf.login_failures WHERE scope = 'user' AND key = $1",
            &[&counter_key(username)],
        )
        .await?;
    Ok(())
}

/// The stored key of a counter: the text itself, or its SHA-256 when it is long or holds a NUL
/// (which PostgreSQL text cannot).
fn counter_key(text: &str) -> String {
    if text.len() > MAX_KEY_BYTES || text.contains('\0') {
        format!("sha256:{}", hf_auth::secret::hash_secret(text).to_hex())
    } else {
        text.to_owned()
    }
}
