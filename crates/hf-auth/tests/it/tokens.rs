//! Token issue and strict verification: every refusal rule has an attack that would pass without it.

use hf_auth::keys::{KeySet, SigningKey};
use hf_auth::token::{self, Claims, DEFAULT_LEEWAY};
use hf_auth::{Error, ErrorKind};
use josekit::jwk::KeyPair as _;
use josekit::jws::{JwsSigner as _, HS256};
use serde_json::{json, Value};

use crate::common::{
    at, b64, b64_json, good_parts, issued, key_set, sign_raw, split, subject, ISSUER, NOW_SECS, TTL,
};

fn verify_at(token: &str, keys: &KeySet, offset: i64) -> Result<Claims, Error> {
    token::verify(token, keys, ISSUER, at(offset), DEFAULT_LEEWAY)
}

/// Asserts the error is a token refusal and returns it for a closer look.
fn refused(result: Result<Claims, Error>) -> Error {
    let err = result.expect_err("the token must be refused");
    assert_eq!(err.kind(), ErrorKind::InvalidToken, "{err:?}");
    err
}

#[test]
fn issued_token_verifies_with_all_claims() {
    let keys = key_set();
    let token = issued(&keys);
    let claims = verify_at(&token, &keys, 0).unwrap();
    let now = NOW_SECS as i64;
    assert_eq!(claims.iss, ISSUER);
    assert_eq!(claims.sub, subject().sub);
    assert_eq!(claims.role, subject().role);
    assert!(!claims.admin);
    assert_eq!((claims.iat, claims.exp), (now, now + 900));
    assert_eq!(claims.jti.len(), 22, "128 random bits, base64url");
}

#[test]
fn header_is_exactly_alg_kid_typ() {
    let keys = key_set();
    let (header, payload, signature) = split(&issued(&keys));
    assert_eq!(
        header,
        json!({"alg": "ES256", "kid": keys.current().kid(), "typ": "JWT"})
    );
    let mut names: Vec<&String> = payload.as_object().unwrap().keys().collect();
    names.sort();
    assert_eq!(names, ["admin", "exp", "iat", "iss", "jti", "role", "sub"]);
    assert_eq!(signature.len(), 64, "ES256 signatures are r || s");
}

#[test]
fn admin_claim_round_trips() {
    let keys = key_set();
    let mut admin = subject();
    admin.admin = true;
    let token = token::issue(keys.current(), ISSUER, &admin, at(0), TTL).unwrap();
    assert!(verify_at(&token, &keys, 0).unwrap().admin);
}

#[test]
fn every_token_gets_a_fresh_jti() {
    let keys = key_set();
    let first = verify_at(&issued(&keys), &keys, 0).unwrap();
    let second = verify_at(&issued(&keys), &keys, 0).unwrap();
    assert_ne!(first.jti, second.jti);
}

#[test]
fn alg_none_is_refused() {
    let keys = key_set();
    let (mut header, payload) = good_parts(keys.current());
    for alg in ["none", "None", "NONE", ""] {
        header["alg"] = json!(alg);
        let unsigned = format!("{}.{}.", b64_json(&header), b64_json(&payload));
        match refused(verify_at(&unsigned, &keys, 0)) {
            Error::UnsupportedAlgorithm { alg: found } => assert_eq!(found, alg),
            other => panic!("{alg}: {other:?}"),
        }
    }
}

#[test]
fn hs256_signed_with_the_public_key_is_refused() {
    let keys = key_set();
    let key_pair = josekit::jws::ES256
        .key_pair_from_pem(keys.current().to_pkcs8_pem())
        .unwrap();
    let public_pem = key_pair.to_pem_public_key();
    let public_jwk = serde_json::to_vec(&keys.jwks().keys[0]).unwrap();
    let public_jwks = serde_json::to_vec(&keys.jwks()).unwrap();
    let (mut header, payload) = good_parts(keys.current());
    header["alg"] = json!("HS256");
    let signing_input = format!("{}.{}", b64_json(&header), b64_json(&payload));
    for secret in [public_pem, public_jwk, public_jwks] {
        let mac = HS256
            .signer_from_bytes(&secret)
            .unwrap()
            .sign(signing_input.as_bytes())
            .unwrap();
        let forged = format!("{signing_input}.{}", b64(&mac));
        assert!(matches!(
            refused(verify_at(&forged, &keys, 0)),
            Error::UnsupportedAlgorithm { alg } if alg == "HS256"
        ));
    }
}

#[test]
fn every_other_alg_is_refused_before_the_signature() {
    let keys = key_set();
    let (mut header, payload) = good_parts(keys.current());
    for alg in [
        "HS384", "HS512", "RS256", "PS256", "ES384", "ES512", "ES256K", "EdDSA", "es256", "ES256 ",
    ] {
        header["alg"] = json!(alg);
        // Signed correctly with our key, so only the header's alg can be the reason.
        let token = sign_raw(keys.current(), &header, &payload);
        assert!(
            matches!(refused(verify_at(&token, &keys, 0)), Error::UnsupportedAlgorithm { alg: found } if found == alg),
            "{alg}"
        );
    }
}

#[test]
fn alg_missing_or_not_a_string_is_malformed() {
    let keys = key_set();
    let (mut header, payload) = good_parts(keys.current());
    header["alg"] = json!(256);
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::MalformedToken { .. }
    ));
    header.as_object_mut().unwrap().remove("alg");
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::MalformedToken { .. }
    ));
}

#[test]
fn typ_other_than_jwt_is_refused() {
    let keys = key_set();
    let (mut header, payload) = good_parts(keys.current());
    header["typ"] = json!("at+jwt");
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(
        matches!(refused(verify_at(&token, &keys, 0)), Error::UnsupportedTokenType { typ } if typ == "at+jwt")
    );
    header.as_object_mut().unwrap().remove("typ");
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(
        matches!(refused(verify_at(&token, &keys, 0)), Error::UnsupportedTokenType { typ } if typ.is_empty())
    );
}

#[test]
fn crit_header_is_refused() {
    let keys = key_set();
    let (mut header, payload) = good_parts(keys.current());
    header["crit"] = json!(["exp"]);
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::CriticalHeader
    ));
}

#[test]
fn unknown_kid_is_refused() {
    let keys = key_set();
    let stranger = SigningKey::generate().unwrap();
    let token = token::issue(&stranger, ISSUER, &subject(), at(0), TTL).unwrap();
    assert!(
        matches!(refused(verify_at(&token, &keys, 0)), Error::UnknownKeyId { kid } if kid == stranger.kid())
    );
}

#[test]
fn missing_kid_is_refused() {
    let keys = key_set();
    let (mut header, payload) = good_parts(keys.current());
    header.as_object_mut().unwrap().remove("kid");
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::MissingKeyId
    ));
}

#[test]
fn known_kid_signed_by_another_key_is_refused() {
    let keys = key_set();
    let stranger = SigningKey::generate().unwrap();
    let (header, payload) = good_parts(keys.current()); // names our kid
    let token = sign_raw(&stranger, &header, &payload);
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::BadSignature
    ));
}

#[test]
fn tampered_payload_is_refused() {
    let keys = key_set();
    let token = issued(&keys);
    let (_, mut payload, _) = split(&token);
    payload["admin"] = json!(true);
    let parts: Vec<&str> = token.split('.').collect();
    let tampered = format!("{}.{}.{}", parts[0], b64_json(&payload), parts[2]);
    assert!(matches!(
        refused(verify_at(&tampered, &keys, 0)),
        Error::BadSignature
    ));
}

#[test]
fn tampered_header_is_refused() {
    let keys = key_set();
    let token = issued(&keys);
    let (mut header, _, _) = split(&token);
    header["x"] = json!(1);
    let parts: Vec<&str> = token.split('.').collect();
    let tampered = format!("{}.{}.{}", b64_json(&header), parts[1], parts[2]);
    assert!(matches!(
        refused(verify_at(&tampered, &keys, 0)),
        Error::BadSignature
    ));
}

#[test]
fn tampered_signature_is_refused() {
    let keys = key_set();
    let token = issued(&keys);
    let (_, _, signature) = split(&token);
    let prefix = &token[..token.rfind('.').unwrap()];
    for index in [0, 31, 32, 63] {
        let mut bad = signature.clone();
        bad[index] ^= 0x01;
        let tampered = format!("{prefix}.{}", b64(&bad));
        assert!(
            matches!(refused(verify_at(&tampered, &keys, 0)), Error::BadSignature),
            "byte {index}"
        );
    }
    for bad in [
        Vec::new(),
        signature[..63].to_vec(),
        [signature.clone(), vec![0]].concat(),
        vec![0; 64],
    ] {
        let tampered = format!("{prefix}.{}", b64(&bad));
        assert!(matches!(
            refused(verify_at(&tampered, &keys, 0)),
            Error::BadSignature
        ));
    }
}

#[test]
fn expired_token_is_refused_after_the_leeway() {
    let keys = key_set();
    let token = issued(&keys);
    let exp = NOW_SECS as i64 + 900;
    assert!(
        verify_at(&token, &keys, 900 + 29).is_ok(),
        "within the 30 s leeway"
    );
    let err = refused(verify_at(&token, &keys, 900 + 30));
    assert!(matches!(err, Error::TokenExpired { exp: e, now } if e == exp && now == exp + 30));
    assert!(matches!(
        refused(verify_at(&token, &keys, 100_000)),
        Error::TokenExpired { .. }
    ));
}

#[test]
fn token_issued_in_the_future_is_refused_beyond_the_leeway() {
    let keys = key_set();
    let token = token::issue(keys.current(), ISSUER, &subject(), at(60), TTL).unwrap();
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::TokenIssuedInFuture { .. }
    ));
    assert!(matches!(
        refused(verify_at(&token, &keys, 29)),
        Error::TokenIssuedInFuture { .. }
    ));
    assert!(
        verify_at(&token, &keys, 30).is_ok(),
        "30 s of skew are tolerated"
    );
}

#[test]
fn nbf_in_the_future_is_refused() {
    let keys = key_set();
    let (header, mut payload) = good_parts(keys.current());
    payload["nbf"] = json!(NOW_SECS + 120);
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::TokenNotYetValid { .. }
    ));
    assert!(verify_at(&token, &keys, 100).is_ok());
}

#[test]
fn every_required_claim_must_be_present() {
    let keys = key_set();
    for claim in ["iss", "sub", "role", "admin", "iat", "exp", "jti"] {
        let (header, mut payload) = good_parts(keys.current());
        payload.as_object_mut().unwrap().remove(claim);
        let token = sign_raw(keys.current(), &header, &payload);
        match refused(verify_at(&token, &keys, 0)) {
            Error::MissingClaim { claim: missing } => assert_eq!(missing, claim),
            other => panic!("{claim}: {other:?}"),
        }
    }
}

#[test]
fn every_claim_must_have_its_type() {
    let keys = key_set();
    let now = NOW_SECS as i64;
    let cases: [(&str, Value); 9] = [
        ("iss", json!(1)),
        ("sub", json!(null)),
        ("role", json!(["alice"])),
        ("admin", json!("true")),
        ("admin", json!(1)),
        ("iat", json!(now.to_string())),
        ("exp", json!((now + 900) as f64 + 0.5)),
        ("exp", json!(null)),
        ("jti", json!({})),
    ];
    for (claim, value) in cases {
        let (header, mut payload) = good_parts(keys.current());
        payload[claim] = value.clone();
        let token = sign_raw(keys.current(), &header, &payload);
        match refused(verify_at(&token, &keys, 0)) {
            Error::InvalidClaim { claim: bad, .. } => assert_eq!(bad, claim, "{value}"),
            other => panic!("{claim} = {value}: {other:?}"),
        }
    }
}

#[test]
fn exp_before_iat_is_refused() {
    let keys = key_set();
    let (header, mut payload) = good_parts(keys.current());
    payload["exp"] = json!(NOW_SECS - 1);
    let token = sign_raw(keys.current(), &header, &payload);
    assert!(matches!(
        refused(verify_at(&token, &keys, -100)),
        Error::InvalidClaim { claim: "exp", .. }
    ));
}

#[test]
fn wrong_issuer_is_refused() {
    let keys = key_set();
    let token = token::issue(
        keys.current(),
        "https://elsewhere.test",
        &subject(),
        at(0),
        TTL,
    )
    .unwrap();
    let err = refused(verify_at(&token, &keys, 0));
    assert!(
        matches!(err, Error::WrongIssuer { expected, found } if expected == ISSUER && found == "https://elsewhere.test")
    );
}

#[test]
fn malformed_tokens_are_refused_without_panicking() {
    let keys = key_set();
    let good = issued(&keys);
    let parts: Vec<&str> = good.split('.').collect();
    let long = "a".repeat(10_000);
    let not_base64 = format!("{}.{}.%%%", parts[0], parts[1]);
    let padded = format!("{}=.{}.{}", parts[0], parts[1], parts[2]);
    let array_header = format!("{}.{}.{}", b64(b"[1,2]"), parts[1], parts[2]);
    let text_header = format!("{}.{}.{}", b64(b"not json"), parts[1], parts[2]);
    let four = format!("{good}.x");
    let cases = [
        "",
        ".",
        "..",
        "...",
        "a",
        "a.b",
        "a.b.c",
        "a.b.c.d",
        &long,
        &not_base64,
        &padded,
        &array_header,
        &text_header,
        &four,
        "\u{0}.\u{0}.\u{0}",
        "é.é.é",
    ];
    for case in cases {
        let err = refused(verify_at(case, &keys, 0));
        assert!(
            matches!(err, Error::MalformedToken { .. }),
            "{case:?}: {err:?}"
        );
    }
}

#[test]
fn payload_that_is_not_json_is_refused_even_when_signed() {
    let keys = key_set();
    let signer = josekit::jws::ES256
        .signer_from_pem(keys.current().to_pkcs8_pem())
        .unwrap();
    let (header, _) = good_parts(keys.current());
    let signing_input = format!("{}.{}", b64_json(&header), b64(b"not json"));
    let signature = signer.sign(signing_input.as_bytes()).unwrap();
    let token = format!("{signing_input}.{}", b64(&signature));
    assert!(matches!(
        refused(verify_at(&token, &keys, 0)),
        Error::MalformedToken { .. }
    ));
}
