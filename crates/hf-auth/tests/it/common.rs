//! Helpers shared by the test modules: a fixed clock and hand-made tokens for attacks.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hf_auth::keys::{KeySet, SigningKey};
use hf_auth::token::{self, Subject};
use josekit::jws::{JwsSigner as _, ES256};
use serde_json::{json, Value};

/// The issuer every test token uses.
pub const ISSUER: &str = "https://hf.test";
/// A fixed "now" in Unix seconds (2023-11-14).
pub const NOW_SECS: u64 = 1_700_000_000;
/// The lifetime of test tokens.
pub const TTL: Duration = Duration::from_secs(900);

/// The test clock at `NOW_SECS + offset` seconds.
pub fn at(offset: i64) -> SystemTime {
    let secs = NOW_SECS.checked_add_signed(offset).unwrap();
    UNIX_EPOCH + Duration::from_secs(secs)
}

pub fn subject() -> Subject {
    Subject {
        sub: "0b6c6f3e-principal".to_owned(),
        role: "alice".to_owned(),
        admin: false,
    }
}

/// A key set with one fresh key.
pub fn key_set() -> KeySet {
    KeySet::new(SigningKey::generate().unwrap(), Vec::new())
}

/// A token issued the normal way at `at(0)`.
pub fn issued(keys: &KeySet) -> String {
    token::issue(keys.current(), ISSUER, &subject(), at(0), TTL).unwrap()
}

/// Header and claims of a token our issuer would make at `at(0)`, as JSON to tamper with.
pub fn good_parts(key: &SigningKey) -> (Value, Value) {
    let header = json!({"alg": "ES256", "kid": key.kid(), "typ": "JWT"});
    let now = NOW_SECS as i64;
    let claims = json!({
        "iss": ISSUER, "sub": "0b6c6f3e-principal", "role": "alice", "admin": false,
        "iat": now, "exp": now + TTL.as_secs() as i64, "jti": "abc",
    });
    (header, claims)
}

pub fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

pub fn b64_json(value: &Value) -> String {
    b64(&serde_json::to_vec(value).unwrap())
}

/// Signs any header and payload with `key` (ES256), bypassing the issuer's rules.
pub fn sign_raw(key: &SigningKey, header: &Value, payload: &Value) -> String {
    let signer = ES256.signer_from_pem(key.to_pkcs8_pem()).unwrap();
    let signing_input = format!("{}.{}", b64_json(header), b64_json(payload));
    let signature = signer.sign(signing_input.as_bytes()).unwrap();
    format!("{signing_input}.{}", b64(&signature))
}

/// Splits a token into its decoded header and payload and its raw signature.
pub fn split(token: &str) -> (Value, Value, Vec<u8>) {
    let parts: Vec<&str> = token.split('.').collect();
    assert_eq!(parts.len(), 3);
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).unwrap();
    (
        serde_json::from_slice(&decode(parts[0])).unwrap(),
        serde_json::from_slice(&decode(parts[1])).unwrap(),
        decode(parts[2]),
    )
}
