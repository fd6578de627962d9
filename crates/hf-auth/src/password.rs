//! Password hashing with argon2id, the password policy, and equal work for unknown users.
//!
//! Hashes are PHC strings (`$argon2id$v=19$m=19456,t=2,p=1$salt$hash`), so the parameters travel
//! with each hash and can be raised later without breaking old ones.
//!
//! **Blocking:** [`hash_password`], [`verify_password`] and [`dummy_verify`] are CPU-bound and use
//! about `memory_kib` KiB each (19 MiB with the defaults) for tens of milliseconds. Async callers
//! run them on a blocking thread (`spawn_blocking`/`web::block`) behind a semaphore sized to the
//! CPU count, never on the executor's threads.
//!
//! **Memory:** a service should not allocate those 19 MiB afresh for every login: glibc's
//! allocator raises its mmap threshold after the first such block is freed, and from then on
//! keeps freed blocks in its per-thread arenas. Measured: 510 logins at concurrency 4 left the
//! service at 496 MB RSS. The `_in` functions take a [`HashMemory`] to reuse instead, one per
//! concurrent hash.

use argon2::password_hash::{Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
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

/// The most memory a stored hash may ask for when it is verified (256 MiB), so a corrupted or
/// planted hash cannot make the service allocate without bound.
const MAX_VERIFY_MEMORY_KIB: u32 = 256 * 1024;
/// The most passes a stored hash may ask for when it is verified, for the same reason.
const MAX_VERIFY_ITERATIONS: u32 = 16;
/// The most lanes a stored hash may ask for when it is verified.
const MAX_VERIFY_PARALLELISM: u32 = 16;

/// argon2's working memory, kept between hashes; see the module docs for why.
#[derive(Default)]
pub struct HashMemory {
    blocks: Vec<Block>,
}

impl HashMemory {
    /// Frees what goes beyond the needs of `params`, after a hash with bigger parameters (an
    /// old hash being verified), so a kept memory stays at its usual size.
    pub fn shrink_to(&mut self, params: &PasswordParams) {
        let needed = argon2_params(params).map_or(0, |params| params.block_count());
        if self.blocks.len() > needed {
            self.blocks.truncate(needed);
            self.blocks.shrink_to_fit();
        }
    }

    /// The first `count` blocks, growing the memory when a hash needs more than it held.
    fn blocks(&mut self, count: usize) -> &mut [Block] {
        if self.blocks.len() < count {
            self.blocks.resize(count, Block::default());
        }
        &mut self.blocks[..count]
    }
}

impl std::fmt::Debug for HashMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashMemory")
            .field("kib", &self.blocks.len())
            .finish()
    }
}

fn argon2_params(params: &PasswordParams) -> Result<Params, Error> {
    Params::new(
        params.memory_kib,
        params.iterations,
        params.parallelism,
        Some(OUTPUT_BYTES),
    )
    .map_err(|err| Error::PasswordHash(err.into()))
}

/// Hashes a password with argon2id and a fresh random salt; returns the PHC string to store.
///
/// Blocking and CPU-bound (see the module docs). Does not apply the policy: call
/// [`check_password_policy`] first for passwords a user chose.
pub fn hash_password(password: &str, params: &PasswordParams) -> Result<String, Error> {
    hash_password_in(&mut HashMemory::default(), password, params)
}

/// [`hash_password`] in reused memory.
pub fn hash_password_in(
    memory: &mut HashMemory,
    password: &str,
    params: &PasswordParams,
) -> Result<String, Error> {
    let params = argon2_params(params)?;
    let mut salt = [0u8; SALT_BYTES];
    OsRng.fill_bytes(&mut salt);
    let mut output = [0u8; OUTPUT_BYTES];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(
            password.as_bytes(),
            &salt,
            &mut output,
            memory.blocks(params.block_count()),
        )
        .map_err(|err| Error::PasswordHash(err.into()))?;
    let salt = SaltString::encode_b64(&salt).map_err(Error::PasswordHash)?;
    let hash = PasswordHash {
        algorithm: argon2::ARGON2ID_IDENT,
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(&params).map_err(Error::PasswordHash)?,
        salt: Some(salt.as_salt()),
        hash: Some(Output::new(&output).map_err(Error::PasswordHash)?),
    };
    Ok(hash.to_string())
}

/// Whether `password` matches the stored PHC string.
///
/// Uses the parameters recorded in the hash; the final comparison is constant-time
/// (`password_hash::Output`'s equality). A stored value that is not an argon2id v19 PHC string,
/// or that asks for more than 256 MiB, 16 passes or 16 lanes, never matches. Blocking and CPU-bound (see the module
/// docs).
pub fn verify_password(phc: &str, password: &str) -> bool {
    verify_password_in(&mut HashMemory::default(), phc, password)
}

/// [`verify_password`] in reused memory.
pub fn verify_password_in(memory: &mut HashMemory, phc: &str, password: &str) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else {
        return false;
    };
    if hash.algorithm != argon2::ARGON2ID_IDENT
        || hash.version.is_some_and(|v| v != u32::from(Version::V0x13))
    {
        return false;
    }
    let (Some(salt), Some(expected)) = (hash.salt, hash.hash) else {
        return false;
    };
    let Ok(params) = Params::try_from(&hash) else {
        return false;
    };
    if params.m_cost() > MAX_VERIFY_MEMORY_KIB
        || params.t_cost() > MAX_VERIFY_ITERATIONS
        || params.p_cost() > MAX_VERIFY_PARALLELISM
    {
        return false;
    }
    let mut salt_bytes = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    let mut output = vec![0u8; expected.len()];
    let hashed = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(
            password.as_bytes(),
            salt,
            &mut output,
            memory.blocks(params.block_count()),
        );
    hashed.is_ok() && Output::new(&output).is_ok_and(|computed| computed == expected)
}

/// Spends the same work as [`verify_password`] on a real hash, for a login whose user does not
/// exist, so response time does not reveal which usernames exist. Always "fails".
///
/// Blocking and CPU-bound (see the module docs).
pub fn dummy_verify(password: &str) {
    dummy_verify_in(&mut HashMemory::default(), password);
}

/// [`dummy_verify`] in reused memory.
pub fn dummy_verify_in(memory: &mut HashMemory, password: &str) {
    let _ = verify_password_in(memory, DUMMY_PHC, password);
}

#[cfg(test)]
#[path = "password_test.rs"]
mod tests;
