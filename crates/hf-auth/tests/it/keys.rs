//! Signing keys: storable form, RFC 7638 `kid`, the exact JWKS shape, and rotation.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hf_auth::keys::{Jwk, KeyRetention, KeySet, SigningKey, StoredKey, VerifyingKey};
use hf_auth::token::{self, DEFAULT_LEEWAY};
use hf_auth::{Error, ErrorKind};
use josekit::jwk::KeyPair as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::{at, issued, key_set, subject, ISSUER, TTL};

#[test]
fn jwks_has_exactly_the_contract_fields() {
    let keys = key_set();
    let jwks = serde_json::to_value(keys.jwks()).unwrap();
    let object = jwks.as_object().unwrap();
    assert_eq!(object.keys().collect::<Vec<_>>(), ["keys"]);
    let published = jwks["keys"].as_array().unwrap();
    assert_eq!(published.len(), 1);
    let jwk = published[0].as_object().unwrap();
    let mut names: Vec<&str> = jwk.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        ["alg", "crv", "kid", "kty", "use", "x", "y"],
        "no `d`, nothing extra"
    );
    assert_eq!(jwk["alg"], "ES256");
    assert_eq!(jwk["crv"], "P-256");
    assert_eq!(jwk["kty"], "EC");
    assert_eq!(jwk["use"], "sig");
    assert_eq!(jwk["kid"], keys.current().kid());
    for coordinate in ["x", "y"] {
        let bytes = URL_SAFE_NO_PAD
            .decode(jwk[coordinate].as_str().unwrap())
            .unwrap();
        assert_eq!(bytes.len(), 32, "{coordinate} is a full P-256 coordinate");
    }
}

#[test]
fn kid_is_the_rfc7638_thumbprint() {
    let keys = key_set();
    let jwk = &keys.jwks().keys[0];
    // RFC 7638 section 3: the required members only, in lexicographic order, no whitespace;
    // a BTreeMap gives the order independently of the code under test.
    let members: BTreeMap<&str, &str> = [
        ("crv", jwk.crv.as_str()),
        ("kty", jwk.kty.as_str()),
        ("x", jwk.x.as_str()),
        ("y", jwk.y.as_str()),
    ]
    .into_iter()
    .collect();
    let canonical = serde_json::to_string(&members).unwrap();
    assert!(canonical.starts_with(r#"{"crv":"P-256","kty":"EC","x":""#));
    let expected = URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()));
    assert_eq!(jwk.kid, expected);
    assert_eq!(keys.current().kid().len(), 43);
}

#[test]
fn jwk_coordinates_match_the_private_key() {
    let key = SigningKey::generate().unwrap();
    let reference = josekit::jws::ES256
        .key_pair_from_pem(key.to_pkcs8_pem())
        .unwrap()
        .to_jwk_public_key();
    let jwk = key.verifying_key().to_jwk();
    assert_eq!(reference.parameter("x"), Some(&Value::String(jwk.x)));
    assert_eq!(reference.parameter("y"), Some(&Value::String(jwk.y)));
}

#[test]
fn key_survives_its_pem_round_trip() {
    let key = SigningKey::generate().unwrap();
    let pem = key.to_pkcs8_pem();
    assert!(
        pem.starts_with("-----BEGIN PRIVATE KEY-----"),
        "PKCS#8, not SEC1"
    );
    let loaded = SigningKey::from_pkcs8_pem(pem).unwrap();
    assert_eq!(loaded.kid(), key.kid());
    assert_eq!(loaded.to_pkcs8_pem(), pem);
    // What the reloaded key signs, the original key set verifies (and the other way round).
    let original = KeySet::new(key.clone(), Vec::new());
    let reloaded = KeySet::new(loaded, Vec::new());
    assert!(token::verify(&issued(&reloaded), &original, ISSUER, at(0), DEFAULT_LEEWAY).is_ok());
    assert!(token::verify(&issued(&original), &reloaded, ISSUER, at(0), DEFAULT_LEEWAY).is_ok());
}

#[test]
fn two_generated_keys_differ() {
    assert_ne!(
        SigningKey::generate().unwrap().kid(),
        SigningKey::generate().unwrap().kid()
    );
}

#[test]
fn other_curves_and_garbage_are_not_signing_keys() {
    let p384 = josekit::jws::ES384
        .generate_key_pair()
        .unwrap()
        .to_pem_private_key();
    let rsa = josekit::jws::RS256
        .generate_key_pair(2048)
        .unwrap()
        .to_pem_private_key();
    let public_only = josekit::jws::ES256
        .generate_key_pair()
        .unwrap()
        .to_pem_public_key();
    let cases = [
        String::from_utf8(p384).unwrap(),
        String::from_utf8(rsa).unwrap(),
        String::from_utf8(public_only).unwrap(),
        String::new(),
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".to_owned(),
        "not a key".to_owned(),
    ];
    for pem in cases {
        let err = SigningKey::from_pkcs8_pem(&pem).expect_err(&pem);
        assert!(matches!(err, Error::InvalidSigningKey(_)), "{pem}: {err:?}");
        assert_eq!(err.kind(), ErrorKind::Internal);
    }
}

#[test]
fn published_jwk_round_trips_into_a_verifying_key() {
    let keys = key_set();
    let text = serde_json::to_string(&keys.jwks()).unwrap();
    let parsed: hf_auth::keys::Jwks = serde_json::from_str(&text).unwrap();
    let verifying = VerifyingKey::from_jwk(&parsed.keys[0]).unwrap();
    assert_eq!(verifying.kid(), keys.current().kid());
    // A key set built from the published key alone verifies our tokens.
    let verifier_only = KeySet::new(SigningKey::generate().unwrap(), vec![verifying]);
    assert!(token::verify(
        &issued(&keys),
        &verifier_only,
        ISSUER,
        at(0),
        DEFAULT_LEEWAY
    )
    .is_ok());
}

#[test]
fn jwk_with_a_false_kid_or_other_algorithm_is_refused() {
    let keys = key_set();
    let good = keys.jwks().keys[0].clone();
    let other_kid = SigningKey::generate().unwrap().kid().to_owned();
    type Mutation = fn(&mut Jwk, &str);
    let mutations: [(&str, Mutation); 6] = [
        ("kid of another key", |jwk, other| {
            jwk.kid = other.to_owned()
        }),
        ("alg", |jwk, _| jwk.alg = "ES384".to_owned()),
        ("crv", |jwk, _| jwk.crv = "P-384".to_owned()),
        ("kty", |jwk, _| jwk.kty = "RSA".to_owned()),
        ("use", |jwk, _| jwk.key_use = "enc".to_owned()),
        ("x not on the curve", |jwk, _| {
            jwk.x = URL_SAFE_NO_PAD.encode([7u8; 32])
        }),
    ];
    for (what, mutate) in mutations {
        let mut jwk = good.clone();
        mutate(&mut jwk, &other_kid);
        assert!(
            matches!(VerifyingKey::from_jwk(&jwk), Err(Error::InvalidJwk { .. })),
            "{what}"
        );
    }
}

#[test]
fn jwks_json_with_a_private_member_does_not_parse() {
    let keys = key_set();
    let mut jwk = serde_json::to_value(&keys.jwks().keys[0]).unwrap();
    jwk["d"] = json!("secret");
    assert!(serde_json::from_value::<Jwk>(jwk).is_err());
}

fn stored(key: &SigningKey, created: i64, retired: Option<i64>) -> StoredKey {
    StoredKey {
        pkcs8_pem: key.to_pkcs8_pem().to_owned(),
        created_at: at(created),
        retired_at: retired.map(at),
    }
}

const RETENTION: KeyRetention = KeyRetention {
    max_token_ttl: TTL,
    leeway: DEFAULT_LEEWAY,
    reload_margin: Duration::from_secs(60),
};

#[test]
fn rotation_keeps_the_old_key_until_its_tokens_expired() {
    let old = SigningKey::generate().unwrap();
    let new = SigningKey::generate().unwrap();
    // A token signed with the old key just before the rotation at t=0.
    let old_token = token::issue(&old, ISSUER, &subject(), at(-1), TTL).unwrap();
    let rows = [stored(&old, -86_400, Some(0)), stored(&new, 0, None)];

    let just_after = KeySet::from_stored(&rows, at(1), &RETENTION).unwrap();
    assert_eq!(just_after.current().kid(), new.kid(), "the new key signs");
    let kids: Vec<String> = just_after
        .jwks()
        .keys
        .into_iter()
        .map(|jwk| jwk.kid)
        .collect();
    assert_eq!(
        kids,
        [new.kid(), old.kid()],
        "current first, old still published"
    );
    assert!(token::verify(&old_token, &just_after, ISSUER, at(1), DEFAULT_LEEWAY).is_ok());

    // The old key stays until ttl + leeway + reload margin after its retirement.
    let window = (TTL + DEFAULT_LEEWAY + RETENTION.reload_margin).as_secs() as i64;
    assert!(RETENTION.is_published(Some(at(0)), at(window - 1)));
    assert!(!RETENTION.is_published(Some(at(0)), at(window)));
    assert!(RETENTION.is_published(None, at(i64::from(u32::MAX))));

    let later = KeySet::from_stored(&rows, at(window), &RETENTION).unwrap();
    assert_eq!(later.jwks().keys.len(), 1);
    let err = token::verify(&old_token, &later, ISSUER, at(window), DEFAULT_LEEWAY).unwrap_err();
    assert!(matches!(err, Error::UnknownKeyId { .. }));
}

#[test]
fn current_key_choice_is_the_same_on_every_instance() {
    let a = SigningKey::generate().unwrap();
    let b = SigningKey::generate().unwrap();
    let c = SigningKey::generate().unwrap();
    // Two unretired keys created at the same instant (two instances racing at first start).
    let rows = [
        stored(&a, 5, None),
        stored(&b, 5, None),
        stored(&c, 1, None),
    ];
    let reversed = [rows[2].clone(), rows[1].clone(), rows[0].clone()];
    let first = KeySet::from_stored(&rows, at(10), &RETENTION).unwrap();
    let second = KeySet::from_stored(&reversed, at(10), &RETENTION).unwrap();
    let expected = a.kid().max(b.kid());
    assert_eq!(first.current().kid(), expected);
    assert_eq!(second.current().kid(), expected);
    assert_eq!(
        first.jwks().keys.len(),
        3,
        "unretired keys all keep verifying"
    );
}

#[test]
fn stored_keys_must_include_a_current_one() {
    let a = SigningKey::generate().unwrap();
    assert!(matches!(
        KeySet::from_stored(&[], at(0), &RETENTION),
        Err(Error::NoCurrentKey)
    ));
    let retired = [stored(&a, 0, Some(1))];
    assert!(matches!(
        KeySet::from_stored(&retired, at(2), &RETENTION),
        Err(Error::NoCurrentKey)
    ));
    let broken = [StoredKey {
        pkcs8_pem: "garbage".to_owned(),
        created_at: at(0),
        retired_at: None,
    }];
    assert!(matches!(
        KeySet::from_stored(&broken, at(0), &RETENTION),
        Err(Error::InvalidSigningKey(_))
    ));
}

#[test]
fn key_set_ignores_duplicate_older_keys() {
    let current = SigningKey::generate().unwrap();
    let older = SigningKey::generate().unwrap();
    let set = KeySet::new(
        current.clone(),
        vec![
            current.verifying_key().clone(),
            older.verifying_key().clone(),
            older.verifying_key().clone(),
        ],
    );
    let kids: Vec<String> = set.jwks().keys.into_iter().map(|jwk| jwk.kid).collect();
    assert_eq!(kids, [current.kid(), older.kid()]);
    assert!(set.find(older.kid()).is_some());
    assert!(set.find("nope").is_none());
}

#[test]
fn debug_output_does_not_leak_the_private_key() {
    let key = SigningKey::generate().unwrap();
    let row = stored(&key, 0, None);
    let body = key.to_pkcs8_pem().lines().nth(1).unwrap().to_owned();
    for printed in [
        format!("{key:?}"),
        format!("{row:?}"),
        format!("{:?}", KeySet::new(key.clone(), Vec::new())),
    ] {
        assert!(
            !printed.contains(&body) && !printed.contains("PRIVATE KEY"),
            "{printed}"
        );
    }
    assert!(format!("{key:?}").contains(key.kid()));
}
