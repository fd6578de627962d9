//! Random one-time secrets (setup and reset tokens, session codes, SSH login nonces).
//!
//! The user gets the secret's text once; the database keeps only its SHA-256, so a leaked table
//! does not leak usable secrets. 256 random bits make guessing hopeless, so a fast hash is enough
//! (no salt or argon2 needed), and the server finds a secret by looking up its hash.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::rngs::OsRng;
use rand::RngCore as _;
use sha2::{Digest, Sha256};

/// Random bytes in every secret: 256 bits.
pub const SECRET_BYTES: usize = 32;

/// A freshly generated secret: the text to hand out and the hash to store.
///
/// `Debug` does not print the text, so the secret cannot leak through a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretToken {
    text: String,
    hash: SecretHash,
}

impl SecretToken {
    /// Draws 256 bits from the operating system's random source.
    pub fn generate() -> Self {
        let mut bytes = [0u8; SECRET_BYTES];
        OsRng.fill_bytes(&mut bytes);
        let text = URL_SAFE_NO_PAD.encode(bytes);
        let hash = hash_secret(&text);
        Self { text, hash }
    }

    /// The secret as 43 base64url characters, to give to the user exactly once.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The hash to store and look the secret up by.
    pub fn hash(&self) -> &SecretHash {
        &self.hash
    }
}

impl std::fmt::Debug for SecretToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretToken")
            .field("text", &"<redacted>")
            .field("hash", &self.hash)
            .finish()
    }
}

/// The SHA-256 of a secret's text, as stored in the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SecretHash([u8; 32]);

impl SecretHash {
    /// The 32 raw bytes, for a `bytea` column.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lower-case hex, for a `text` column or a log line.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

/// Hashes the text a user presented, to look it up among the stored hashes.
///
/// Any text is accepted; text that was never issued simply matches nothing.
pub fn hash_secret(text: &str) -> SecretHash {
    SecretHash(Sha256::digest(text.as_bytes()).into())
}
