//! An independent check: Node's built-in crypto verifies our token with our published JWKS.

use std::path::Path;
use std::process::{Command, Output};

use hf_auth::keys::{KeySet, SigningKey};
use hf_auth::token;
use serde_json::Value;
use tempfile::TempDir;

use crate::common::{at, subject, ISSUER, NOW_SECS, TTL};

/// Writes the token, the JWKS and the clock for the script and runs `node verify_jwt.mjs DIR`.
fn run_node(dir: &Path, token: &str, keys: &KeySet) -> Output {
    std::fs::write(dir.join("token.txt"), token).unwrap();
    std::fs::write(
        dir.join("jwks.json"),
        serde_json::to_vec(&keys.jwks()).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("now.txt"), NOW_SECS.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node/verify_jwt.mjs");
    Command::new("node")
        .arg(script)
        .arg(dir)
        .output()
        .expect("node must be installed")
}

#[test]
fn node_crypto_verifies_our_token_with_the_published_jwk() {
    let dir = TempDir::new().unwrap();
    // An older key in the set too, so the script has to pick the key by kid.
    let keys = KeySet::new(
        SigningKey::generate().unwrap(),
        vec![SigningKey::generate().unwrap().verifying_key().clone()],
    );
    let token = token::issue(keys.current(), ISSUER, &subject(), at(0), TTL).unwrap();
    let output = run_node(dir.path(), &token, &keys);
    assert!(
        output.status.success(),
        "node refused the token: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true);
    assert_eq!(report["kid"], keys.current().kid());
    assert_eq!(report["claims"]["sub"], subject().sub);
    assert_eq!(report["claims"]["iss"], ISSUER);
}

#[test]
fn node_check_is_not_vacuous() {
    let dir = TempDir::new().unwrap();
    let keys = KeySet::new(SigningKey::generate().unwrap(), Vec::new());
    let token = token::issue(keys.current(), ISSUER, &subject(), at(0), TTL).unwrap();
    // The same token with one signature character changed must fail in Node as well.
    let mut tampered = token.clone().into_bytes();
    let index = tampered.len() - 10;
    tampered[index] = if tampered[index] == b'A' { b'B' } else { b'A' };
    let output = run_node(dir.path(), &String::from_utf8(tampered).unwrap(), &keys);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("bad signature"));
}
