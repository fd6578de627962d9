//! Principal names: what may become a PostgreSQL role name.

use hf_auth::name::{validate_principal_name, ADMIN_ROLE, AUTHENTICATED_ROLE};
use hf_auth::{Error, ErrorKind};

/// Names the contract allows, including quotes and SQL-looking text: they are only ever used
/// through `hf_sql::quote_ident`, which makes them one harmless identifier.
const ACCEPTED: &[&str] = &[
    "alice",
    "Alice Smith",
    "o'brien",
    "say \"hi\"",
    "x\"; DROP ROLE postgres; --",
    "Robert'); DROP TABLE students;--",
    "admin\" WITH SUPERUSER",
    "$1",
    "%s",
    "ünïcödé",
    "pg",
    "pgx_admin",
    "a_pg_",
    " leading space",
    "a",
];

#[test]
fn accepted_names_pass_and_quote_to_one_identifier() {
    let max_ascii = "a".repeat(63);
    let max_multibyte = "€".repeat(21); // 3 bytes each: exactly 63 bytes
    let names = ACCEPTED
        .iter()
        .copied()
        .chain([max_ascii.as_str(), max_multibyte.as_str()]);
    for name in names {
        validate_principal_name(name).unwrap_or_else(|err| panic!("{name:?}: {err}"));
        let quoted = hf_sql::quote_ident(name).unwrap();
        // One identifier: opens and closes with a quote, and every inner quote is doubled.
        let inner = &quoted[1..quoted.len() - 1];
        assert!(quoted.starts_with('"') && quoted.ends_with('"'));
        assert_eq!(inner.replace("\"\"", ""), name.replace('"', ""), "{quoted}");
    }
}

#[test]
fn refused_names_say_why() {
    let too_long_ascii = "a".repeat(64);
    let too_long_multibyte = "€".repeat(22); // 66 bytes, 22 characters
    type Check = fn(&Error) -> bool;
    let cases: Vec<(&str, Check)> = vec![
        ("", |e| matches!(e, Error::NameEmpty)),
        (&too_long_ascii, |e| {
            matches!(e, Error::NameTooLong { bytes: 64, max: 63 })
        }),
        (&too_long_multibyte, |e| {
            matches!(e, Error::NameTooLong { bytes: 66, .. })
        }),
        ("a:b", |e| matches!(e, Error::NameContainsColon)),
        (":", |e| matches!(e, Error::NameContainsColon)),
        ("hf:admin", |e| matches!(e, Error::NameContainsColon)),
        ("pg_", |e| matches!(e, Error::NameReservedPrefix)),
        ("pg_monitor", |e| matches!(e, Error::NameReservedPrefix)),
        ("PG_monitor", |e| matches!(e, Error::NameReservedPrefix)),
        ("Pg_x", |e| matches!(e, Error::NameReservedPrefix)),
        ("a\0b", |e| {
            matches!(e, Error::NameControlCharacter { position: 1 })
        }),
        ("alice\n", |e| {
            matches!(e, Error::NameControlCharacter { position: 5 })
        }),
        ("a\rb", |e| matches!(e, Error::NameControlCharacter { .. })),
        ("\t", |e| {
            matches!(e, Error::NameControlCharacter { position: 0 })
        }),
        ("\u{1b}[31mred", |e| {
            matches!(e, Error::NameControlCharacter { position: 0 })
        }),
        ("del\u{7f}", |e| {
            matches!(e, Error::NameControlCharacter { position: 3 })
        }),
        ("é\u{85}", |e| {
            matches!(e, Error::NameControlCharacter { position: 2 })
        }),
    ];
    for (name, is_expected) in cases {
        let err = validate_principal_name(name).expect_err(name);
        assert!(is_expected(&err), "{name:?}: {err:?}");
        assert_eq!(err.kind(), ErrorKind::InvalidName);
    }
}

#[test]
fn system_roles_can_never_be_principal_names() {
    assert_eq!(AUTHENTICATED_ROLE, "hf:authenticated");
    assert_eq!(ADMIN_ROLE, "hf:admin");
    for role in [AUTHENTICATED_ROLE, ADMIN_ROLE] {
        assert!(matches!(
            validate_principal_name(role),
            Err(Error::NameContainsColon)
        ));
    }
}
