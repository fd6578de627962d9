//! Password policy, argon2id hashing and the equal-work dummy verification.

use argon2::password_hash::{PasswordHash, PasswordHasher as _, PasswordVerifier as _, SaltString};
use hf_auth::password::{
    check_password_policy, dummy_verify_in, hash_password, hash_password_in, verify_password,
    verify_password_in, HashMemory, PasswordParams, MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS,
};
use hf_auth::{Error, ErrorKind};

/// Cheap parameters so most tests run fast; the OWASP ones are tested separately.
const CHEAP: PasswordParams = PasswordParams {
    memory_kib: 64,
    iterations: 1,
    parallelism: 1,
};

#[test]
fn policy_accepts_8_to_1024_characters() {
    let cases: [(usize, Option<&str>); 6] = [
        (0, Some("short")),
        (7, Some("short")),
        (8, None),
        (1024, None),
        (1025, Some("long")),
        (100_000, Some("long")),
    ];
    for (length, expected) in cases {
        let password = "a".repeat(length);
        let result = check_password_policy(&password);
        match (expected, result) {
            (None, Ok(())) => {}
            (Some("short"), Err(Error::PasswordTooShort { length: found, min })) => {
                assert_eq!((found, min), (length, MIN_PASSWORD_CHARS));
            }
            (Some("long"), Err(Error::PasswordTooLong { length: found, max })) => {
                assert_eq!((found, max), (length, MAX_PASSWORD_CHARS));
            }
            (expected, result) => {
                panic!("{length} characters: expected {expected:?}, got {result:?}")
            }
        }
    }
}

#[test]
fn policy_counts_characters_not_bytes() {
    assert!(
        check_password_policy(&"é".repeat(8)).is_ok(),
        "16 bytes, 8 characters"
    );
    assert!(matches!(
        check_password_policy(&"🔑".repeat(7)),
        Err(Error::PasswordTooShort { length: 7, .. })
    ));
    assert!(
        check_password_policy(&"🔑".repeat(1024)).is_ok(),
        "4096 bytes, 1024 characters"
    );
    let err = check_password_policy("").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WeakPassword);
}

#[test]
fn hash_verifies_the_right_password_only() {
    let phc = hash_password("correct horse battery staple", &CHEAP).unwrap();
    assert!(verify_password(&phc, "correct horse battery staple"));
    for wrong in [
        "correct horse battery stapl",
        "Correct horse battery staple",
        "",
        "correct horse battery staple ",
    ] {
        assert!(!verify_password(&phc, wrong), "{wrong:?}");
    }
}

#[test]
fn same_password_gets_a_fresh_salt() {
    let first = hash_password("same password", &CHEAP).unwrap();
    let second = hash_password("same password", &CHEAP).unwrap();
    assert_ne!(first, second);
    assert!(verify_password(&first, "same password") && verify_password(&second, "same password"));
}

#[test]
fn default_parameters_are_owasp_argon2id() {
    assert_eq!(
        PasswordParams::default(),
        PasswordParams {
            memory_kib: 19456,
            iterations: 2,
            parallelism: 1
        }
    );
    let phc = hash_password("a good long password", &PasswordParams::default()).unwrap();
    assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
    assert!(verify_password(&phc, "a good long password"));
}

#[test]
fn unicode_and_long_passwords_hash() {
    for password in ["pässwörd-ünïcödé", &"x".repeat(1024), &"🔑".repeat(1024)] {
        let phc = hash_password(password, &CHEAP).unwrap();
        assert!(verify_password(&phc, password));
    }
}

/// Our hashes are standard PHC strings: the argon2 crate's own verifier accepts them, and we
/// accept its hashes, whatever memory we reuse.
#[test]
fn hashes_are_interchangeable_with_the_argon2_crates() {
    let ours = hash_password("correct horse", &CHEAP).unwrap();
    let parsed = PasswordHash::new(&ours).unwrap();
    assert!(argon2::Argon2::default()
        .verify_password(b"correct horse", &parsed)
        .is_ok());
    assert!(argon2::Argon2::default()
        .verify_password(b"wrong horse", &parsed)
        .is_err());

    let theirs = argon2::Argon2::default()
        .hash_password(
            b"battery staple",
            &SaltString::from_b64("c29tZXNhbHRzb21lc2FsdA").unwrap(),
        )
        .unwrap()
        .to_string();
    assert!(verify_password(&theirs, "battery staple"));
    assert!(!verify_password(&theirs, "battery stapler"));
}

/// One reused memory serves hashes of any cost, one after another, growing when a hash needs
/// more; a failed or dummy verification leaves nothing behind that changes the next result.
#[test]
fn reused_memory_gives_the_same_answers() {
    let mut memory = HashMemory::default();
    let bigger = PasswordParams {
        memory_kib: 256,
        iterations: 2,
        parallelism: 2,
    };
    let cheap = hash_password_in(&mut memory, "first password", &CHEAP).unwrap();
    let big = hash_password_in(&mut memory, "second password", &bigger).unwrap();
    for _ in 0..2 {
        assert!(verify_password_in(&mut memory, &big, "second password"));
        assert!(!verify_password_in(&mut memory, &big, "first password"));
        dummy_verify_in(&mut memory, "first password");
        assert!(verify_password_in(&mut memory, &cheap, "first password"));
        assert!(!verify_password_in(&mut memory, &cheap, "second password"));
        assert!(verify_password(&big, "second password"));
    }
    memory.shrink_to(&CHEAP);
    assert!(verify_password_in(&mut memory, &cheap, "first password"));
    assert!(verify_password_in(&mut memory, &big, "second password"));
}

#[test]
fn stored_values_that_are_not_argon2id_never_match() {
    let argon2i = argon2::Argon2::new(
        argon2::Algorithm::Argon2i,
        argon2::Version::V0x13,
        argon2::Params::default(),
    )
    .hash_password(
        b"password",
        &SaltString::from_b64("c29tZXNhbHRzb21lc2FsdA").unwrap(),
    )
    .unwrap()
    .to_string();
    assert!(
        !verify_password(&argon2i, "password"),
        "argon2i is refused even when it matches"
    );
    let cases = [
        "",
        "password",
        "$2b$12$abcdefghijklmnopqrstuuS6W1Ry6jrIrT9fWbrhzDn7oHFl8CiAG",
        "$argon2id$",
        "$argon2id$v=19$m=19456,t=2,p=1$bad",
        // Version 16 (argon2 1.0) and a memory cost beyond 256 MiB are refused unverified.
        "$argon2id$v=16$m=64,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$argon2id$v=19$m=4194304,t=1,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$argon2id$v=19$m=64,t=4294967295,p=1$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "$argon2id$v=19$m=64,t=1,p=255$c29tZXNhbHRzb21lc2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        // No salt, no hash.
        "$argon2id$v=19$m=64,t=1,p=1",
    ];
    for stored in cases {
        assert!(!verify_password(stored, "password"), "{stored}");
    }
}

#[test]
fn invalid_parameters_are_an_internal_error() {
    let err = hash_password(
        "password",
        &PasswordParams {
            memory_kib: 1,
            iterations: 0,
            parallelism: 0,
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::PasswordHash(_)));
    assert_eq!(err.kind(), ErrorKind::Internal);
}
