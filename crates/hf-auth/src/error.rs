//! The one error type of `hf-auth`, and the coarse kinds the HTTP layer maps to status codes.
//!
//! Every way a token, password, name, key or signature can be refused has its own variant, so tests
//! and logs can tell them apart even though the HTTP contract answers most of them with one code.

/// Everything that can go wrong in `hf-auth`.
///
/// Variants that describe bad input say so through [`Error::kind`]; the rest mean the crate could
/// not do its job (a broken stored key, a clock before 1970).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- signing keys -------------------------------------------------------------------------
    /// The operating system's random source or OpenSSL failed while creating a key pair.
    #[error("could not generate a signing key")]
    KeyGeneration(#[source] josekit::JoseError),
    /// A stored signing key could not be read back (not PKCS#8 PEM, or not a P-256 key).
    #[error("the stored signing key is not a P-256 PKCS#8 PEM key")]
    InvalidSigningKey(#[source] josekit::JoseError),
    /// A public JWK could not be turned into a verification key (wrong `kty`, `crv`, `alg`, …).
    #[error("the JWK is not an ES256 public key: {reason}")]
    InvalidJwk {
        /// What is wrong with it.
        reason: String,
    },
    /// A key set was asked for from a list of stored keys in which every key is retired.
    #[error("no signing key is current (every stored key is retired)")]
    NoCurrentKey,
    /// Signing a token failed inside OpenSSL.
    #[error("could not sign the token")]
    Signing(#[source] josekit::JoseError),
    /// A token header or claim set could not be written as JSON (cannot happen for our types).
    #[error("could not serialise the token")]
    Serialize(#[source] serde_json::Error),
    /// The clock given to a time-dependent function lies before the Unix epoch.
    #[error("the clock is before 1970-01-01")]
    ClockBeforeEpoch,

    // ---- tokens -------------------------------------------------------------------------------
    /// The token is not three base64url parts of JSON objects, or is absurdly long.
    #[error("malformed token: {reason}")]
    MalformedToken {
        /// Which part of the structure is broken.
        reason: &'static str,
    },
    /// The header names an algorithm other than ES256 (including `none` and the HMAC family).
    #[error("token algorithm `{alg}` is not accepted (only ES256)")]
    UnsupportedAlgorithm {
        /// The `alg` the header claimed.
        alg: String,
    },
    /// The header's `typ` is missing or is not `JWT`.
    #[error("token type `{typ}` is not accepted (only JWT)")]
    UnsupportedTokenType {
        /// The `typ` the header claimed (empty when absent).
        typ: String,
    },
    /// The header carries `crit` extensions, none of which this verifier understands.
    #[error("token header has critical extensions")]
    CriticalHeader,
    /// The header has no `kid`, so no key can be chosen.
    #[error("token header has no kid")]
    MissingKeyId,
    /// The header's `kid` is not in the key set (never ours, or retired and no longer published).
    #[error("token key id `{kid}` is unknown")]
    UnknownKeyId {
        /// The `kid` the header claimed.
        kid: String,
    },
    /// The signature does not match header and payload under the key the `kid` names.
    #[error("token signature is invalid")]
    BadSignature,
    /// A claim every token must carry is absent.
    #[error("token claim `{claim}` is missing")]
    MissingClaim {
        /// The claim's name.
        claim: &'static str,
    },
    /// A claim is present but has the wrong JSON type (or an impossible value).
    #[error("token claim `{claim}` must be {expected}")]
    InvalidClaim {
        /// The claim's name.
        claim: &'static str,
        /// What it should have been.
        expected: &'static str,
    },
    /// The token's `exp` lies in the past by more than the leeway.
    #[error("token expired at {exp} (now {now})")]
    TokenExpired {
        /// The token's `exp`, Unix seconds.
        exp: i64,
        /// The verifier's clock, Unix seconds.
        now: i64,
    },
    /// The token's `iat` lies in the future by more than the leeway.
    #[error("token issued in the future at {iat} (now {now})")]
    TokenIssuedInFuture {
        /// The token's `iat`, Unix seconds.
        iat: i64,
        /// The verifier's clock, Unix seconds.
        now: i64,
    },
    /// The token carries an `nbf` that lies in the future by more than the leeway.
    #[error("token not valid before {nbf} (now {now})")]
    TokenNotYetValid {
        /// The token's `nbf`, Unix seconds.
        nbf: i64,
        /// The verifier's clock, Unix seconds.
        now: i64,
    },
    /// The token was issued by someone else (or for another deployment).
    #[error("token issuer `{found}` is not `{expected}`")]
    WrongIssuer {
        /// The issuer this service expects.
        expected: String,
        /// The issuer the token names.
        found: String,
    },

    // ---- passwords ----------------------------------------------------------------------------
    /// The password has fewer characters than the policy's minimum.
    #[error("password has {length} characters; at least {min} are required")]
    PasswordTooShort {
        /// Its length in characters.
        length: usize,
        /// The minimum.
        min: usize,
    },
    /// The password has more characters than the policy's maximum.
    #[error("password has {length} characters; at most {max} are allowed")]
    PasswordTooLong {
        /// Its length in characters.
        length: usize,
        /// The maximum.
        max: usize,
    },
    /// argon2 refused the parameters or failed to hash.
    #[error("could not hash the password: {0}")]
    PasswordHash(argon2::password_hash::Error),

    // ---- SSH keys and signatures --------------------------------------------------------------
    /// The text is not an OpenSSH public key line.
    #[error("not an OpenSSH public key")]
    InvalidPublicKey(#[source] ssh_key::Error),
    /// The public key line is longer than any accepted key type needs.
    #[error("the public key line has {bytes} bytes; at most {max} are allowed")]
    PublicKeyTooLong {
        /// Its length in bytes.
        bytes: usize,
        /// The maximum.
        max: usize,
    },
    /// The public key line contains control characters (a second line, a terminal escape, …).
    #[error("the public key line contains control characters")]
    PublicKeyControlCharacter,
    /// The key is of a type we do not accept (only ssh-ed25519, ecdsa-sha2-nistp256 and RSA).
    #[error("SSH key type `{algorithm}` is not accepted")]
    UnsupportedKeyAlgorithm {
        /// The key's algorithm name, e.g. `ecdsa-sha2-nistp384`.
        algorithm: String,
    },
    /// An RSA key is shorter than the minimum.
    #[error("RSA key has {bits} bits; at least {min} are required")]
    RsaKeyTooSmall {
        /// The modulus size.
        bits: usize,
        /// The minimum.
        min: usize,
    },
    /// An RSA key is longer than the verifier can check.
    #[error("RSA key has {bits} bits; at most {max} are supported")]
    RsaKeyTooLarge {
        /// The modulus size.
        bits: usize,
        /// The maximum.
        max: usize,
    },
    /// The text is not an armored SSHSIG signature.
    #[error("not an armored SSH signature")]
    MalformedSignature(#[source] ssh_key::Error),
    /// The armored signature is longer than any accepted key type produces.
    #[error("the SSH signature has {bytes} bytes; at most {max} are allowed")]
    SignatureTooLong {
        /// Its length in bytes.
        bytes: usize,
        /// The maximum.
        max: usize,
    },
    /// The signature was made by a different key than the one it is checked against.
    #[error("the SSH signature was made by another key")]
    SignatureKeyMismatch,
    /// The signature was made for another namespace (another purpose than logging in here).
    #[error("SSH signature namespace `{found}` is not `{expected}`")]
    WrongNamespace {
        /// The namespace we require.
        expected: String,
        /// The namespace the signature carries.
        found: String,
    },
    /// The signature does not match the message (wrong nonce, tampered bytes, SHA-1 RSA, …).
    #[error("the SSH signature does not verify")]
    BadSshSignature(#[source] ssh_key::Error),

    // ---- principal names ----------------------------------------------------------------------
    /// The name is the empty string.
    #[error("the name is empty")]
    NameEmpty,
    /// The name is longer than PostgreSQL keeps identifiers (it would be truncated).
    #[error("the name has {bytes} bytes; at most {max} are allowed")]
    NameTooLong {
        /// Its length in UTF-8 bytes.
        bytes: usize,
        /// The maximum.
        max: usize,
    },
    /// The name contains a colon, which is reserved for system roles such as `hf:admin`.
    #[error("the name contains a colon")]
    NameContainsColon,
    /// The name starts with `pg_`, which PostgreSQL reserves for its own roles.
    #[error("the name starts with pg_")]
    NameReservedPrefix,
    /// The name contains a control character (NUL, newline, escape, …).
    #[error("the name contains a control character at byte {position}")]
    NameControlCharacter {
        /// The byte offset of the first control character.
        position: usize,
    },
}

/// What kind of problem an [`Error`] is, so the HTTP layer needs one small table, not a match on
/// every variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A token was refused (contract: 401 `UNAUTHENTICATED`).
    InvalidToken,
    /// A new password breaks the policy (contract: 422 `WEAK_PASSWORD`).
    WeakPassword,
    /// A principal name breaks the rules (contract: 400 `INVALID_NAME`).
    InvalidName,
    /// An SSH public key was refused (contract: 422 `INVALID_PUBLIC_KEY`).
    InvalidPublicKey,
    /// An SSH signature was refused (contract: 401 `INVALID_SIGNATURE`).
    InvalidSignature,
    /// Not the caller's fault: a broken stored key, a failing random source, a bad clock.
    Internal,
}

impl Error {
    /// Sorts the error into a user problem of one kind, or an internal failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::KeyGeneration(_)
            | Error::InvalidSigningKey(_)
            | Error::InvalidJwk { .. }
            | Error::NoCurrentKey
            | Error::Signing(_)
            | Error::Serialize(_)
            | Error::ClockBeforeEpoch
            | Error::PasswordHash(_) => ErrorKind::Internal,
            Error::MalformedToken { .. }
            | Error::UnsupportedAlgorithm { .. }
            | Error::UnsupportedTokenType { .. }
            | Error::CriticalHeader
            | Error::MissingKeyId
            | Error::UnknownKeyId { .. }
            | Error::BadSignature
            | Error::MissingClaim { .. }
            | Error::InvalidClaim { .. }
            | Error::TokenExpired { .. }
            | Error::TokenIssuedInFuture { .. }
            | Error::TokenNotYetValid { .. }
            | Error::WrongIssuer { .. } => ErrorKind::InvalidToken,
            Error::PasswordTooShort { .. } | Error::PasswordTooLong { .. } => {
                ErrorKind::WeakPassword
            }
            Error::InvalidPublicKey(_)
            | Error::PublicKeyTooLong { .. }
            | Error::PublicKeyControlCharacter
            | Error::UnsupportedKeyAlgorithm { .. }
            | Error::RsaKeyTooSmall { .. }
            | Error::RsaKeyTooLarge { .. } => ErrorKind::InvalidPublicKey,
            Error::MalformedSignature(_)
            | Error::SignatureTooLong { .. }
            | Error::SignatureKeyMismatch
            | Error::WrongNamespace { .. }
            | Error::BadSshSignature(_) => ErrorKind::InvalidSignature,
            Error::NameEmpty
            | Error::NameTooLong { .. }
            | Error::NameContainsColon
            | Error::NameReservedPrefix
            | Error::NameControlCharacter { .. } => ErrorKind::InvalidName,
        }
    }
}
