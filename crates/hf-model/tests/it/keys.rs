//! The key grammar, reserved words, branch ids and qualified names.

use hf_model::key::{check_branch_id, is_valid_branch_id, key_problem};
use hf_model::{Error, FieldPath, KeyKind, KeyProblem, QualifiedName};

#[test]
fn keys_follow_the_grammar() {
    let long = "a".repeat(63);
    let too_long = "a".repeat(64);
    let cases: &[(&str, Option<KeyProblem>)] = &[
        ("a", None),
        ("account_2", None),
        (&long, None),
        (&too_long, Some(KeyProblem::TooLong)),
        ("", Some(KeyProblem::Empty)),
        ("Account", Some(KeyProblem::BadStart)),
        ("_x", Some(KeyProblem::BadStart)),
        ("1x", Some(KeyProblem::BadStart)),
        ("a-b", Some(KeyProblem::BadCharacter)),
        ("a.b", Some(KeyProblem::BadCharacter)),
        ("a/b", Some(KeyProblem::BadCharacter)),
        ("a%2Fb", Some(KeyProblem::BadCharacter)),
        ("aB", Some(KeyProblem::BadCharacter)),
        ("é", Some(KeyProblem::BadStart)),
        ("a\0", Some(KeyProblem::BadCharacter)),
    ];
    for (key, expected) in cases {
        assert_eq!(key_problem(KeyKind::Object, key), *expected, "{key:?}");
    }
}

#[test]
fn reserved_words_depend_on_the_kind() {
    for module in [
        "objects",
        "fields",
        "screens",
        "modules",
        "public",
        "information_schema",
        "pg_x",
        "hf",
        "hfx",
        "hf_data",
    ] {
        assert_eq!(
            key_problem(KeyKind::Module, module),
            Some(KeyProblem::Reserved),
            "{module}"
        );
        assert_eq!(key_problem(KeyKind::Object, module), None, "{module}");
    }
    for field in ["id", "created_at", "updated_at"] {
        assert_eq!(
            key_problem(KeyKind::Field, field),
            Some(KeyProblem::Reserved),
            "{field}"
        );
        assert_eq!(key_problem(KeyKind::Object, field), None, "{field}");
    }
    assert_eq!(key_problem(KeyKind::Module, "pgx"), None);
    assert_eq!(key_problem(KeyKind::Module, "crm"), None);
}

#[test]
fn branch_ids_follow_the_grammar_and_git_rules() {
    for good in [
        "main",
        "feature-1",
        "Release_2.0",
        "a",
        "v1.2.3",
        &"b".repeat(63),
    ] {
        assert!(is_valid_branch_id(good), "{good}");
    }
    let too_long = "b".repeat(64);
    for bad in [
        "", "-x", ".x", "_x", "a..b", "../x", "x.", "x.lock", "a/b", "a b", "a@b", "a@{1}", "HEAD",
        "a~1", "a^", "a:b", "a\\b", "a*", "a?", "a[", "é", &too_long,
    ] {
        assert!(!is_valid_branch_id(bad), "{bad:?}");
        assert!(matches!(
            check_branch_id(bad),
            Err(Error::InvalidBranch { .. })
        ));
    }
}

#[test]
fn qualified_names_parse() {
    assert_eq!(
        QualifiedName::parse("crm.account").unwrap(),
        QualifiedName::new("crm", "account")
    );
    for bad in ["crm", "crm.", ".account", "a.b.c", ""] {
        assert!(
            matches!(QualifiedName::parse(bad), Err(Error::InvalidName { .. })),
            "{bad}"
        );
    }
    let path = FieldPath::parse("crm.deal.account").unwrap();
    assert_eq!(path.object, QualifiedName::new("crm", "deal"));
    assert_eq!(path.field, "account");
    assert_eq!(path.to_string(), "crm.deal.account");
    for bad in ["crm.deal", "crm..x", "a.b.c.d", "..", ""] {
        assert!(
            matches!(FieldPath::parse(bad), Err(Error::InvalidName { .. })),
            "{bad}"
        );
    }
}
