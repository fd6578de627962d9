//! One-time secrets: 256 random bits, handed out as text, stored as SHA-256.

use std::collections::HashSet;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hf_auth::secret::{hash_secret, SecretToken};

#[test]
fn secret_is_256_random_bits_in_base64url() {
    let secret = SecretToken::generate();
    assert_eq!(secret.text().len(), 43);
    assert_eq!(URL_SAFE_NO_PAD.decode(secret.text()).unwrap().len(), 32);
}

#[test]
fn stored_hash_is_the_sha256_of_the_text() {
    let secret = SecretToken::generate();
    assert_eq!(*secret.hash(), hash_secret(secret.text()));
    assert_eq!(secret.hash().to_hex().len(), 64);
    assert_eq!(
        hash_secret("abc").to_hex(),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "FIPS 180-2 test vector"
    );
    assert_eq!(
        hex::encode(hash_secret("abc").as_bytes()),
        hash_secret("abc").to_hex()
    );
}

#[test]
fn secrets_do_not_repeat() {
    let texts: HashSet<String> = (0..1000)
        .map(|_| SecretToken::generate().text().to_owned())
        .collect();
    assert_eq!(texts.len(), 1000);
}

#[test]
fn presented_text_must_match_exactly() {
    let secret = SecretToken::generate();
    let text = secret.text();
    for variant in [
        format!("{text} "),
        text.to_uppercase(),
        text[1..].to_owned(),
        String::new(),
    ] {
        assert_ne!(hash_secret(&variant), *secret.hash(), "{variant:?}");
    }
}

#[test]
fn debug_output_does_not_leak_the_secret() {
    let secret = SecretToken::generate();
    let printed = format!("{secret:?}");
    assert!(!printed.contains(secret.text()), "{printed}");
    assert!(printed.contains("redacted"));
}
