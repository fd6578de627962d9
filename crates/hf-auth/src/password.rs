//! Password hashing with argon2id, the password policy, and equal work for unknown users.
//!
//! Hashes are PHC strings (`$argon2id$v=19$m=19456,t=2,p=1$salt$hash`), so the parameters travel
//! with each hash and can be raised later without breaking old ones.
//!
//! **Blocking:** [`hash_password`], [`verify_password`] and [`dummy_verify`] are CPU-bound and use
//! about `memory_kib` KiB each (19 MiB with the defaults) for tens of milliseconds. Async callers
//! run them on a blocking thread (`spawn_blocking`/`web::block`) behind a semaphore sized to the
//! CPU count, never on the executor's threads.

use argon2::password_hash::{PasswordHash, PasswordHasher as _, PasswordVerifier as _, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use rand::rngs::OsRng;
use rand::RngCore as _;

use crate::Error;

/// Passwords shorter than this many characters are refused (contract: 422 `WEAK_PASSWORD`).
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Passwords longer than this many characters are refused, which also bounds the hashing work.
pub const MAX_PASSWORD_CHARS: usize = 1024;

/// The argon2id cost parameters; a struct so tests and benches can pick cheaper ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasswordParams {
    /// Memory per hash in KiB (`m`).
    pub memory_kib: u32,
    /// Passes over the memory (`t`).
    pub iterations: u32,
    /// Lanes (`p`).
    pub parallelism: u32,
}

impl PasswordParams {
    /// OWASP's recommendation, which is also the argon2 crate's default: m=19456 KiB, t=2, p=1.
    pub const OWASP: PasswordParams = PasswordParams {
        memory_kib: 19456,
        iterations: 2,
        parallelism: 1,
    };
}

impl Default for PasswordParams {
    fn default() -> Self {
        Self::OWASP
    }
}

/// Length of the random salt in bytes.
const SALT_BYTES: usize = 16;
/// Length of the argon2 output (the stored tag) in bytes.
const OUTPUT_BYTES: usize = 32;

/// A well-formed argon2id hash with [`PasswordParams::OWASP`] and the same salt and tag sizes as
/// real ones, so [`dummy_verify`] costs exactly what verifying a real user's hash costs. Its tag is
/// all zeros, which no password produces in practice.
const DUMMY_PHC: &str = "$argon2id$v=19$m=19456,t=2,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// Checks a new password against the policy: 8 to 1024 characters (Unicode scalar values).
pub fn check_password_policy(password: &str) -> Result<(), Error> {
    let length = password.chars().count();
    if length < MIN_PASSWORD_CHARS {
        return Err(Error::PasswordTooShort {
            length,
            min: MIN_PASSWORD_CHARS,
        });
    }
    if length > MAX_PASSWORD_CHARS {
        return Err(Error::PasswordTooLong {
            length,
            max: MAX_PASSWORD_CHARS,
        });
    }
    Ok(())
}

/// Hashes a password with argon2id and a fresh random salt; returns the PHC string to store.
///
/// Blocking and CPU-bound (see the module docs). Does not apply the policy: call
/// [`check_password_policy`] first for passwords a user chose.
pub fn hash_password(password: &str, params: &PasswordParams) -> Result<String, Error> {
    let argon2_params = Params::new(
        params.memory_kib,
        params.iterations,
        params.parallelism,
        Some(OUTPUT_BYTES),
    )
    .map_err(|err| Error::PasswordHash(err.into()))?;
    let hasher = Argon2::new(Algorithm::Argon2id, Version::V0x13, argon2_params);
    let mut salt = [0u8; SALT_BYTES];
    OsRng.fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(Error::PasswordHash)?;
    let hash = hasher
        .hash_password(password.as_bytes(), &salt)
        .map_err(Error::PasswordHash)?;
    Ok(hash.to_string())
}

/// Whether `password` matches the stored PHC string.
///
/// Uses the parameters recorded in the hash; the final comparison is constant-time inside
/// argon2. A stored value that is not an argon2id PHC string never matches. Blocking and
/// CPU-bound (see the module docs).
pub fn verify_password(phc: &str, password: &str) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else {
        return false;
    };
    if hash.algorithm != argon2::ARGON2ID_IDENT {
        return false;
    }
    Argon2::default()
        .verify_password(password.as_bytes(), &hash)
        .is_ok()
}

/// Spends the same work as [`verify_password`] on a real hash, for a login whose user does not
/// exist, so response time does not reveal which usernames exist. Always "fails".
///
/// Blocking and CPU-bound (see the module docs).
pub fn dummy_verify(password: &str) {
    let _ = verify_password(DUMMY_PHC, password);
}

#[cfg(test)]
#[path = "password_test.rs"]
mod tests;
