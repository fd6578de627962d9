//! Key grammar, reserved words, branch ids and qualified names.
//!
//! Keys become PostgreSQL identifiers (schema, table, column) and path segments of files and URLs,
//! so their grammar is deliberately narrow: `^[a-z][a-z0-9_]{0,62}$` (at most 63 bytes, the
//! PostgreSQL identifier limit). Every check here is a plain function so the HTTP layer can reject
//! a bad path segment before it touches the store.

use std::fmt;

use crate::error::Error;

/// The longest key, in bytes: PostgreSQL truncates identifiers longer than 63 bytes.
pub const MAX_KEY_LEN: usize = 63;

/// The longest branch id, in bytes.
pub const MAX_BRANCH_LEN: usize = 63;

/// Module keys that would collide with routes, PostgreSQL system schemas or our own schemas.
pub const RESERVED_MODULE_KEYS: &[&str] = &[
    "objects",
    "fields",
    "screens",
    "modules",
    "public",
    "information_schema",
];

/// Field keys taken by the system columns every object table has.
pub const RESERVED_FIELD_KEYS: &[&str] =
    &["id", "created_at", "updated_at", "created_by", "updated_by"];

/// Which kind of key is being checked; reserved words differ per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyKind {
    /// A module key (also the PostgreSQL schema name).
    Module,
    /// An object key (also the table name).
    Object,
    /// A field key (also the column name).
    Field,
    /// A screen key.
    Screen,
    /// A rule key inside an object's `rules`.
    Rule,
    /// A vendor key of a packaged module.
    Vendor,
}

impl KeyKind {
    /// The camelCase property name of this key in the contract (`moduleKey`, ...).
    pub fn property(self) -> &'static str {
        match self {
            KeyKind::Module => "moduleKey",
            KeyKind::Object => "objectKey",
            KeyKind::Field => "fieldKey",
            KeyKind::Screen => "screenKey",
            KeyKind::Rule => "ruleKey",
            KeyKind::Vendor => "vendorKey",
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            KeyKind::Module => "module key",
            KeyKind::Object => "object key",
            KeyKind::Field => "field key",
            KeyKind::Screen => "screen key",
            KeyKind::Rule => "rule key",
            KeyKind::Vendor => "vendor key",
        };
        f.write_str(name)
    }
}

/// Why a key was refused; carried by [`Error::InvalidKey`] and key diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyProblem {
    /// The key is empty.
    Empty,
    /// The key is longer than [`MAX_KEY_LEN`] bytes.
    TooLong,
    /// The key does not start with a lowercase ASCII letter.
    BadStart,
    /// The key holds a character other than `a-z`, `0-9` or `_`.
    BadCharacter,
    /// The key is a reserved word for its kind.
    Reserved,
}

impl fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            KeyProblem::Empty => "is empty",
            KeyProblem::TooLong => "is longer than 63 characters",
            KeyProblem::BadStart => "must start with a lowercase letter a-z",
            KeyProblem::BadCharacter => "may only contain a-z, 0-9 and _",
            KeyProblem::Reserved => "is reserved",
        };
        f.write_str(text)
    }
}

/// Checks `key` against the key grammar and the reserved words of `kind`.
///
/// Returns the first problem found, or `None` when the key is acceptable.
pub fn key_problem(kind: KeyKind, key: &str) -> Option<KeyProblem> {
    let bytes = key.as_bytes();
    let Some(first) = bytes.first() else {
        return Some(KeyProblem::Empty);
    };
    if bytes.len() > MAX_KEY_LEN {
        return Some(KeyProblem::TooLong);
    }
    if !first.is_ascii_lowercase() {
        return Some(KeyProblem::BadStart);
    }
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_';
    if !bytes.iter().all(allowed) {
        return Some(KeyProblem::BadCharacter);
    }
    let reserved = match kind {
        KeyKind::Module => {
            RESERVED_MODULE_KEYS.contains(&key) || key.starts_with("pg_") || key.starts_with("hf")
        }
        KeyKind::Field => RESERVED_FIELD_KEYS.contains(&key),
        KeyKind::Object | KeyKind::Screen | KeyKind::Rule | KeyKind::Vendor => false,
    };
    reserved.then_some(KeyProblem::Reserved)
}

/// Checks a key and turns a problem into [`Error::InvalidKey`], for path segments of requests.
pub fn check_key(kind: KeyKind, key: &str) -> Result<(), Error> {
    match key_problem(kind, key) {
        None => Ok(()),
        Some(problem) => Err(Error::InvalidKey {
            kind,
            key: key.to_owned(),
            problem,
        }),
    }
}

/// Whether `branch` is an acceptable branch id.
///
/// The grammar is `^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$` plus the git ref-name rules that grammar
/// alone does not exclude: no `..`, no trailing `.` and no `.lock` suffix. `HEAD` is refused
/// because git refuses it as a branch name.
pub fn is_valid_branch_id(branch: &str) -> bool {
    let bytes = branch.as_bytes();
    let Some(first) = bytes.first() else {
        return false;
    };
    if bytes.len() > MAX_BRANCH_LEN || !first.is_ascii_alphanumeric() {
        return false;
    }
    let allowed = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
    bytes.iter().all(allowed)
        && !branch.contains("..")
        && !branch.ends_with('.')
        && !branch.ends_with(".lock")
        && branch != "HEAD"
}

/// Checks a branch id and turns a refusal into [`Error::InvalidBranch`].
pub fn check_branch_id(branch: &str) -> Result<(), Error> {
    if is_valid_branch_id(branch) {
        Ok(())
    } else {
        Err(Error::InvalidBranch {
            branch: branch.to_owned(),
        })
    }
}

/// The name of an object across modules, written `module.object` in files and in the API.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QualifiedName {
    /// The module key.
    pub module: String,
    /// The object key inside that module.
    pub object: String,
}

impl QualifiedName {
    /// Builds a name from its two keys.
    pub fn new(module: impl Into<String>, object: impl Into<String>) -> Self {
        QualifiedName {
            module: module.into(),
            object: object.into(),
        }
    }

    /// Parses `module.object`: exactly one dot with a non-empty part on each side.
    ///
    /// The parts are not checked against the key grammar here; validation reports a name that
    /// does not resolve.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let invalid = || Error::InvalidName {
            text: text.to_owned(),
            expected: "<module>.<object>",
        };
        let (module, object) = text.split_once('.').ok_or_else(invalid)?;
        if module.is_empty() || object.is_empty() || object.contains('.') {
            return Err(invalid());
        }
        Ok(QualifiedName::new(module, object))
    }
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.module, self.object)
    }
}

/// A field of an object in another module, written `module.object.field` (a rollup's `source`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath {
    /// The object holding the field.
    pub object: QualifiedName,
    /// The field key.
    pub field: String,
}

impl FieldPath {
    /// Parses `module.object.field`: exactly two dots with non-empty parts.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let invalid = || Error::InvalidName {
            text: text.to_owned(),
            expected: "<module>.<object>.<field>",
        };
        let mut parts = text.split('.');
        let (Some(module), Some(object), Some(field), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(invalid());
        };
        if module.is_empty() || object.is_empty() || field.is_empty() {
            return Err(invalid());
        }
        Ok(FieldPath {
            object: QualifiedName::new(module, object),
            field: field.to_owned(),
        })
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.object, self.field)
    }
}
