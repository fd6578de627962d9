//! Tokens, keys, password hashes and SSH signatures; no database, no HTTP.
//!
//! This crate holds every security decision of hf that can be made without I/O, so it can be
//! tested exhaustively with plain function calls and any clock:
//!
//! - [`keys`]: the ES256 signing key, its storable PEM form, the published JWKS and rotation.
//! - [`token`]: issuing and strictly verifying the service's JWTs.
//! - [`password`]: argon2id hashing, the password policy and equal work for unknown users.
//! - [`secret`]: random one-time secrets (setup tokens, session codes, nonces) stored as hashes.
//! - [`ssh`]: OpenSSH public keys and `ssh-keygen -Y sign` signatures.
//! - [`name`]: principal names that are safe to become PostgreSQL role names.
//!
//! Functions that depend on time take `now` as a parameter; the caller owns the clock.
//! The password functions are CPU-bound and block for tens of milliseconds: async callers must run
//! them on a blocking thread.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use hf_auth::keys::{KeySet, SigningKey};
//! use hf_auth::token::{self, Subject, DEFAULT_LEEWAY};
//!
//! let keys = KeySet::new(SigningKey::generate()?, Vec::new());
//! let subject = Subject { sub: "p-1".into(), role: "alice".into(), admin: false };
//! let (now, ttl) = (SystemTime::now(), Duration::from_secs(3600));
//! let jwt = token::issue(keys.current(), "https://hf.example", &subject, now, ttl)?;
//! let claims = token::verify(&jwt, &keys, "https://hf.example", now, DEFAULT_LEEWAY)?;
//! assert_eq!(claims.role, "alice");
//! # Ok::<(), hf_auth::Error>(())
//! ```

pub mod error;
pub mod keys;
pub mod name;
pub mod password;
pub mod secret;
pub mod ssh;
pub mod token;

pub use error::{Error, ErrorKind};

use std::time::{SystemTime, UNIX_EPOCH};

/// Converts a clock reading to whole Unix seconds, the unit JWT claims use.
pub(crate) fn unix_seconds(time: SystemTime) -> Result<i64, Error> {
    let since_epoch = time
        .duration_since(UNIX_EPOCH)
        .map_err(|_| Error::ClockBeforeEpoch)?;
    Ok(i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX))
}
