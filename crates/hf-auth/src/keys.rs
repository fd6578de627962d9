//! The ES256 (P-256) signing key, the public key set published as JWKS, and key rotation.
//!
//! Every instance of the service must sign with the same key, so the private key is stored in the
//! database as PKCS#8 PEM ([`SigningKey::to_pkcs8_pem`]) and loaded back with
//! [`SigningKey::from_pkcs8_pem`]. A key's `kid` is its RFC 7638 JWK thumbprint, so it follows from
//! the key itself and every instance computes the same one.
//!
//! Rotation: the caller keeps a list of [`StoredKey`]s with `created_at`/`retired_at`. The newest
//! unretired key signs; retired keys stay published (and keep verifying) until every token they
//! signed has expired, which [`KeyRetention`] decides.

use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use josekit::jwk::alg::ec::EcKeyPair;
use josekit::jwk::KeyPair as _;
use josekit::jws::alg::ecdsa::{EcdsaJwsSigner, EcdsaJwsVerifier};
use josekit::jws::{JwsSigner as _, JwsVerifier as _, ES256};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Error;

/// The only JWS algorithm hf signs and accepts.
pub const ALGORITHM: &str = "ES256";
/// The JWK curve name of [`ALGORITHM`].
pub const CURVE: &str = "P-256";
/// The JWK key type of [`ALGORITHM`].
pub const KEY_TYPE: &str = "EC";
/// The JWK `use` of every published key: signatures only.
pub const KEY_USE: &str = "sig";

/// The private ES256 key that signs new tokens.
///
/// Holds the PEM it was loaded from so it can be stored again without re-encoding. `Debug` shows
/// only the `kid`, so the private key cannot leak through a log line.
#[derive(Clone)]
pub struct SigningKey {
    pem: String,
    signer: EcdsaJwsSigner,
    public: VerifyingKey,
}

impl SigningKey {
    /// Creates a fresh random P-256 key, for the first start and for `hf keys rotate`.
    pub fn generate() -> Result<Self, Error> {
        let key_pair = ES256.generate_key_pair().map_err(Error::KeyGeneration)?;
        let pem = String::from_utf8_lossy(&key_pair.to_pem_private_key()).into_owned();
        Self::from_pkcs8_pem(&pem)
    }

    /// Loads a key stored with [`SigningKey::to_pkcs8_pem`]; refuses keys on other curves.
    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, Error> {
        let key_pair = ES256
            .key_pair_from_pem(pem)
            .map_err(Error::InvalidSigningKey)?;
        let signer = ES256
            .signer_from_pem(pem)
            .map_err(Error::InvalidSigningKey)?;
        let public = VerifyingKey::from_key_pair(&key_pair)?;
        let pem = String::from_utf8_lossy(&key_pair.to_pem_private_key()).into_owned();
        Ok(Self {
            pem,
            signer,
            public,
        })
    }

    /// The PKCS#8 PEM text (`-----BEGIN PRIVATE KEY-----`) to keep in the database.
    ///
    /// This is the private key: store it where only the service can read it, never log it.
    pub fn to_pkcs8_pem(&self) -> &str {
        &self.pem
    }

    /// The key id tokens carry in their header (the RFC 7638 thumbprint of the public key).
    pub fn kid(&self) -> &str {
        self.public.kid()
    }

    /// The public half, which verifies what this key signs.
    pub fn verifying_key(&self) -> &VerifyingKey {
        &self.public
    }

    /// Signs `message` and returns the 64-byte JWS signature (`r || s`).
    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        self.signer.sign(message).map_err(Error::Signing)
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid())
            .finish_non_exhaustive()
    }
}

/// A public ES256 key that verifies tokens: the current key's public half or an older one.
#[derive(Debug, Clone)]
pub struct VerifyingKey {
    kid: String,
    x: String,
    y: String,
    verifier: EcdsaJwsVerifier,
}

impl VerifyingKey {
    /// Builds the verification key from a published JWK, checking that it is an ES256 signing key
    /// whose `kid` is its thumbprint (so a JWK cannot claim another key's id).
    pub fn from_jwk(jwk: &Jwk) -> Result<Self, Error> {
        let expected = [
            ("alg", jwk.alg.as_str(), ALGORITHM),
            ("crv", jwk.crv.as_str(), CURVE),
            ("kty", jwk.kty.as_str(), KEY_TYPE),
            ("use", jwk.key_use.as_str(), KEY_USE),
        ];
        for (field, found, wanted) in expected {
            if found != wanted {
                return Err(Error::InvalidJwk {
                    reason: format!("{field} must be {wanted}"),
                });
            }
        }
        let key = Self::from_coordinates(&jwk.x, &jwk.y)?;
        if key.kid != jwk.kid {
            return Err(Error::InvalidJwk {
                reason: "kid is not the key's thumbprint".to_owned(),
            });
        }
        Ok(key)
    }

    /// The key id, the RFC 7638 thumbprint of the public key.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The key as published in the JWKS, with exactly the contract's seven fields.
    pub fn to_jwk(&self) -> Jwk {
        Jwk {
            alg: ALGORITHM.to_owned(),
            crv: CURVE.to_owned(),
            kid: self.kid.clone(),
            kty: KEY_TYPE.to_owned(),
            key_use: KEY_USE.to_owned(),
            x: self.x.clone(),
            y: self.y.clone(),
        }
    }

    /// Checks a 64-byte JWS signature over `message`.
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> Result<(), Error> {
        self.verifier
            .verify(message, signature)
            .map_err(|_| Error::BadSignature)
    }

    fn from_key_pair(key_pair: &EcKeyPair) -> Result<Self, Error> {
        let jwk = key_pair.to_jwk_public_key();
        let coordinate = |name: &str| match jwk.parameter(name) {
            Some(serde_json::Value::String(value)) => Ok(value.clone()),
            _ => Err(Error::InvalidJwk {
                reason: format!("public key has no {name}"),
            }),
        };
        Self::from_coordinates(&coordinate("x")?, &coordinate("y")?)
    }

    fn from_coordinates(x: &str, y: &str) -> Result<Self, Error> {
        let mut map = serde_json::Map::new();
        map.insert("kty".to_owned(), KEY_TYPE.into());
        map.insert("crv".to_owned(), CURVE.into());
        map.insert("x".to_owned(), x.into());
        map.insert("y".to_owned(), y.into());
        let invalid = |err: josekit::JoseError| Error::InvalidJwk {
            reason: err.to_string(),
        };
        let jwk = josekit::jwk::Jwk::from_map(map).map_err(invalid)?;
        let verifier = ES256.verifier_from_jwk(&jwk).map_err(invalid)?;
        Ok(Self {
            kid: thumbprint(x, y),
            x: x.to_owned(),
            y: y.to_owned(),
            verifier,
        })
    }
}

/// RFC 7638 thumbprint of an EC public key: SHA-256 over the required members in lexicographic
/// order without whitespace, base64url without padding.
fn thumbprint(x: &str, y: &str) -> String {
    // The coordinates are base64url text, which needs no JSON escaping.
    let canonical = format!(r#"{{"crv":"{CURVE}","kty":"{KEY_TYPE}","x":"{x}","y":"{y}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// One public key as the JWKS publishes it: exactly `alg, crv, kid, kty, use, x, y`.
///
/// A struct rather than a JSON map, so no private member (`d`) can ever slip into the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jwk {
    /// Always `ES256`.
    pub alg: String,
    /// Always `P-256`.
    pub crv: String,
    /// The RFC 7638 thumbprint.
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

/// The body of `GET /.well-known/jwks.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jwks {
    /// The current key first, then older keys still within their retention.
    pub keys: Vec<Jwk>,
}

/// The keys an instance signs and verifies with: the current signing key and the public halves
/// of older keys whose tokens may still be alive.
#[derive(Debug, Clone)]
pub struct KeySet {
    current: SigningKey,
    older: Vec<VerifyingKey>,
}

impl KeySet {
    /// Puts a key set together; an older key with the current key's `kid` is dropped.
    pub fn new(current: SigningKey, older: Vec<VerifyingKey>) -> Self {
        let mut kept: Vec<VerifyingKey> = Vec::with_capacity(older.len());
        for key in older {
            if key.kid != current.kid() && kept.iter().all(|k| k.kid != key.kid) {
                kept.push(key);
            }
        }
        Self {
            current,
            older: kept,
        }
    }

    /// Builds the key set from the stored keys: the newest unretired key signs, and every other
    /// key that [`KeyRetention::is_published`] keeps verifies.
    ///
    /// Ties on `created_at` are broken by `kid`, so every instance picks the same current key even
    /// if two instances created a first key at the same moment.
    pub fn from_stored(
        stored: &[StoredKey],
        now: SystemTime,
        retention: &KeyRetention,
    ) -> Result<Self, Error> {
        let mut loaded = Vec::with_capacity(stored.len());
        for entry in stored {
            loaded.push((entry, SigningKey::from_pkcs8_pem(&entry.pkcs8_pem)?));
        }
        let current_index = loaded
            .iter()
            .enumerate()
            .filter(|(_, (entry, _))| entry.retired_at.is_none())
            .max_by(|(_, (a, a_key)), (_, (b, b_key))| {
                a.created_at
                    .cmp(&b.created_at)
                    .then_with(|| a_key.kid().cmp(b_key.kid()))
            })
            .map(|(index, _)| index)
            .ok_or(Error::NoCurrentKey)?;
        let current = loaded.swap_remove(current_index).1;
        let older = loaded
            .into_iter()
            .filter(|(entry, _)| retention.is_published(entry.retired_at, now))
            .map(|(_, key)| key.public)
            .collect();
        Ok(Self::new(current, older))
    }

    /// The key new tokens are signed with.
    pub fn current(&self) -> &SigningKey {
        &self.current
    }

    /// The verification key for a token's `kid`, if it is still published.
    pub fn find(&self, kid: &str) -> Option<&VerifyingKey> {
        std::iter::once(&self.current.public)
            .chain(&self.older)
            .find(|key| key.kid == kid)
    }

    /// The JWKS document: the current key first, then the older ones.
    pub fn jwks(&self) -> Jwks {
        let keys = std::iter::once(&self.current.public).chain(&self.older);
        Jwks {
            keys: keys.map(VerifyingKey::to_jwk).collect(),
        }
    }
}

/// A signing key as the caller stores it, with its lifecycle timestamps.
///
/// `Debug` leaves out the private key.
#[derive(Clone)]
pub struct StoredKey {
    /// From [`SigningKey::to_pkcs8_pem`].
    pub pkcs8_pem: String,
    /// When the key was created; the newest unretired key is the current one.
    pub created_at: SystemTime,
    /// When a newer key replaced it (no new tokens are signed with it after that).
    pub retired_at: Option<SystemTime>,
}

impl std::fmt::Debug for StoredKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredKey")
            .field("created_at", &self.created_at)
            .field("retired_at", &self.retired_at)
            .finish_non_exhaustive()
    }
}

/// How long a retired key stays published: until every token it signed has expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRetention {
    /// The longest lifetime any token is issued with (session tokens included).
    pub max_token_ttl: Duration,
    /// The verifier's clock leeway, which extends a token's life by that much.
    pub leeway: Duration,
    /// Extra time for instances that still sign with the old key until they reload the key set.
    pub reload_margin: Duration,
}

impl KeyRetention {
    /// Whether a key retired at `retired_at` must still be published (and accepted) at `now`.
    ///
    /// Unretired keys are always published; a key that is no longer published can be deleted.
    pub fn is_published(&self, retired_at: Option<SystemTime>, now: SystemTime) -> bool {
        let Some(retired_at) = retired_at else {
            return true;
        };
        let window = self
            .max_token_ttl
            .saturating_add(self.leeway)
            .saturating_add(self.reload_margin);
        match retired_at.checked_add(window) {
            Some(until) => now < until,
            // A window past the end of time never closes.
            None => true,
        }
    }
}
