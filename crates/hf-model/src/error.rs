//! The crate's one error type.
//!
//! Edits of the model fail with the contract's errors (`AlreadyExists`, `ModuleNotFound`,
//! `InUse`...), each carrying the key or target it concerns so the HTTP layer can build the
//! envelope without parsing messages. Reading metadata files fails with an error naming the file
//! and, when known, the line. Problems *inside* a well-formed model are not errors: they are
//! [`crate::Diagnostic`]s returned by [`crate::validate`].

use std::path::PathBuf;

use crate::key::{KeyKind, KeyProblem, QualifiedName};
use crate::target::Target;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key does not follow the key grammar or is reserved (`INVALID_KEY`).
    #[error("invalid {kind} `{key}`: {problem}")]
    InvalidKey {
        /// Which kind of key.
        kind: KeyKind,
        /// The key as given.
        key: String,
        /// Why it was refused.
        problem: KeyProblem,
    },
    /// A branch id does not follow the branch grammar (`INVALID_BRANCH`).
    #[error("invalid branch id `{branch}`")]
    InvalidBranch {
        /// The branch id as given.
        branch: String,
    },
    /// A qualified name or field path is malformed (`crm` where `crm.account` was expected).
    #[error("invalid name `{text}`: expected {expected}")]
    InvalidName {
        /// The text as given.
        text: String,
        /// The expected shape.
        expected: &'static str,
    },
    /// A property holds a value outside its set (`fieldKind: "blob"`).
    #[error("unknown {property} `{value}`: expected one of {expected}")]
    UnknownValue {
        /// The property name (`fieldType`, `fieldKind`...).
        property: &'static str,
        /// The value as given.
        value: String,
        /// The accepted values.
        expected: &'static str,
    },
    /// A property that the item's kind requires is absent (`fieldType` on a scalar).
    #[error("missing property `{property}`")]
    MissingProperty {
        /// The property name.
        property: &'static str,
    },
    /// A property of another field kind is present (`formula` on a scalar).
    #[error("property `{property}` is not allowed on a {kind} field")]
    PropertyNotAllowed {
        /// The property name.
        property: &'static str,
        /// The field kind that does not take it.
        kind: &'static str,
    },
    /// The module does not exist (`MODULE_NOT_FOUND`).
    #[error("module `{module}` not found")]
    ModuleNotFound {
        /// The module key.
        module: String,
    },
    /// The object does not exist (`OBJECT_NOT_FOUND`).
    #[error("object `{object}` not found")]
    ObjectNotFound {
        /// The object's qualified name.
        object: QualifiedName,
    },
    /// The field is not declared on the object (`FIELD_NOT_FOUND`).
    #[error("field `{field}` not found on `{object}`")]
    FieldNotFound {
        /// The object's qualified name.
        object: QualifiedName,
        /// The field key.
        field: String,
    },
    /// The screen does not exist (`SCREEN_NOT_FOUND`).
    #[error("screen `{screen}` not found in module `{module}`")]
    ScreenNotFound {
        /// The module key.
        module: String,
        /// The screen key.
        screen: String,
    },
    /// A create names an item that exists already (`ALREADY_EXISTS`).
    #[error("{} `{target}` already exists", target.noun())]
    AlreadyExists {
        /// The existing item.
        target: Target,
    },
    /// A delete names an item that something else still uses (`IN_USE`).
    #[error("{} `{target}` is used by {} `{referrer}`", target.noun(), referrer.noun())]
    InUse {
        /// The item that was to be deleted.
        target: Box<Target>,
        /// One item that uses it.
        referrer: Box<Target>,
    },
    /// A metadata file is not valid JSON5, or not of the expected shape.
    #[error("{file}{}: {message}", line_suffix(*line, *column))]
    Syntax {
        /// The file, relative to the metadata directory.
        file: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column, when known.
        column: Option<usize>,
        /// What the parser said.
        message: String,
    },
    /// A metadata file nests objects and arrays deeper than the limit.
    #[error("{file}:{line}: nesting deeper than {limit} levels")]
    TooDeep {
        /// The file, relative to the metadata directory.
        file: String,
        /// 1-based line where the limit was crossed.
        line: usize,
        /// The limit.
        limit: usize,
    },
    /// A metadata file is larger than the limit.
    #[error("{file}: {size} bytes is larger than the limit of {limit} bytes")]
    TooLarge {
        /// The file, relative to the metadata directory.
        file: String,
        /// Its size in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// A metadata file is not UTF-8 text.
    #[error("{file}: not UTF-8 text")]
    NotUtf8 {
        /// The file, relative to the metadata directory.
        file: String,
    },
    /// A file sits where the layout has no place for it (`crm/object/x.json5`).
    #[error("{file}: unexpected file in the metadata layout")]
    UnexpectedFile {
        /// The file, relative to the metadata directory.
        file: String,
    },
    /// A module directory has objects or screens but no `module.json5`.
    #[error("{module}/module.json5: missing, but the module directory has objects or screens")]
    MissingModuleFile {
        /// The module key (the directory name).
        module: String,
    },
    /// A property inside a metadata file is wrong in a way the parser cannot see.
    #[error("{file}: at `{path}`: {source}")]
    InvalidFile {
        /// The file, relative to the metadata directory.
        file: String,
        /// The property path inside the file (`fields.amount`).
        path: String,
        /// What is wrong there.
        source: Box<Error>,
    },
    /// Reading or writing a metadata directory on disk failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

fn line_suffix(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(":{line}:{column}"),
        (Some(line), None) => format!(":{line}"),
        _ => String::new(),
    }
}

/// The broad class of an [`Error`], so callers map errors to responses without matching every
/// variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request itself is malformed: a bad key, name, value or property.
    Invalid,
    /// The named item does not exist.
    NotFound,
    /// A create collides with an existing item.
    AlreadyExists,
    /// A delete is refused because something refers to the item.
    InUse,
    /// Stored metadata files cannot be read as a model (a broken branch, not a bad request).
    BrokenMetadata,
    /// The file system failed.
    Io,
}

impl Error {
    /// The broad class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidKey { .. }
            | Error::InvalidBranch { .. }
            | Error::InvalidName { .. }
            | Error::UnknownValue { .. }
            | Error::MissingProperty { .. }
            | Error::PropertyNotAllowed { .. } => ErrorKind::Invalid,
            Error::ModuleNotFound { .. }
            | Error::ObjectNotFound { .. }
            | Error::FieldNotFound { .. }
            | Error::ScreenNotFound { .. } => ErrorKind::NotFound,
            Error::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            Error::InUse { .. } => ErrorKind::InUse,
            Error::Syntax { .. }
            | Error::TooDeep { .. }
            | Error::TooLarge { .. }
            | Error::NotUtf8 { .. }
            | Error::UnexpectedFile { .. }
            | Error::MissingModuleFile { .. }
            | Error::InvalidFile { .. } => ErrorKind::BrokenMetadata,
            Error::Io { .. } => ErrorKind::Io,
        }
    }
}
