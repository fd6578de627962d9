//! The crate's one error type.
//!
//! Every contract error a metadata route can answer is a variant here or inside
//! [`Error::Model`] (the model's own errors: `AlreadyExists`, `ModuleNotFound`, `InUse`, broken
//! files...), each carrying the branch, key or target it concerns.

use hf_model::Diagnostic;

/// Everything that can go wrong in the metadata store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An edit was refused, or the branch's files cannot be read as a model (the model's error
    /// names the file and line).
    #[error(transparent)]
    Model(#[from] hf_model::Error),
    /// The branch id breaks the branch grammar (`INVALID_BRANCH`).
    #[error("invalid branch id `{branch}`")]
    InvalidBranch {
        /// The branch id as given.
        branch: String,
    },
    /// The branch does not exist (`BRANCH_NOT_FOUND`).
    #[error("branch `{branch}` not found")]
    BranchNotFound {
        /// The branch id.
        branch: String,
    },
    /// The write would add problems to the model (`INVALID_REFERENCE` and friends); nothing was
    /// committed.
    #[error(
        "the change to branch `{branch}` would make the metadata invalid: {}",
        summary(diagnostics)
    )]
    Invalid {
        /// The branch written to.
        branch: String,
        /// The problems the change adds, each with its target.
        diagnostics: Vec<Diagnostic>,
    },
    /// The branch moved since the commit was prepared; the ref was left alone.
    #[error(
        "branch `{branch}` moved: expected {}, found {}",
        show(expected),
        show(actual)
    )]
    Conflict {
        /// The branch.
        branch: String,
        /// The head the caller expected (`None`: expected the branch not to exist).
        expected: Option<String>,
        /// The head found (`None`: the branch does not exist).
        actual: Option<String>,
    },
    /// Writers kept winning the race for this branch; the write gave up after this many tries.
    #[error("branch `{branch}` is too busy: gave up after {attempts} attempts")]
    Contention {
        /// The branch.
        branch: String,
        /// How many times the edit was applied.
        attempts: usize,
    },
    /// A commit or tree id is not 40 hexadecimal digits, or names no such object.
    #[error("no {kind} `{id}` in the metadata repository")]
    UnknownObject {
        /// `commit` or `tree`.
        kind: &'static str,
        /// The id as given.
        id: String,
    },
    /// The directory exists and is not a git repository, so it is not made into one.
    #[error("{path} exists and is not a git repository")]
    NotARepository {
        /// The path given.
        path: String,
    },
    /// The branch's ref is locked by a lock file that is neither young enough to belong to a
    /// writer at work nor old enough to be removed as stale, or that cannot be removed (see
    /// [`crate::locks`]).
    #[error(
        "branch `{}` is locked by {} ({} s old)",
        lock.branch,
        lock.file,
        lock.age_secs
    )]
    Locked {
        /// The lock file.
        lock: crate::RefLock,
    },
    /// The shared home of the metadata (PostgreSQL) failed or holds something unreadable.
    #[error("metadata database: {message}")]
    Remote {
        /// What failed.
        message: String,
    },
    /// libgit2 failed (I/O, a corrupt repository...).
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

fn show(id: &Option<String>) -> &str {
    id.as_deref().unwrap_or("no branch")
}

fn summary(diagnostics: &[Diagnostic]) -> String {
    let parts: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    parts.join("; ")
}

/// The broad class of an [`Error`], so callers map errors to responses without matching every
/// variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed: a bad key, name, branch id or property.
    Invalid,
    /// The branch, item or object named does not exist.
    NotFound,
    /// A create collides with an existing item.
    AlreadyExists,
    /// A delete is refused because something refers to the item.
    InUse,
    /// The write would make the metadata invalid; see [`Error::Invalid`]'s diagnostics.
    InvalidMetadata,
    /// The branch moved under a prepared commit, or kept moving; retrying may succeed.
    Conflict,
    /// Stored files on the branch cannot be read as a model.
    BrokenMetadata,
    /// The branch's ref is held by a lock file; retrying after it is cleared may succeed.
    Locked,
    /// The file system refused to read or write the repository (read-only, full, permissions):
    /// the service cannot store metadata until an operator fixes it.
    Storage,
    /// The database that holds the shared metadata could not be asked (a lost connection, a
    /// restart); retrying shortly may succeed.
    Unavailable,
    /// The repository failed otherwise (corrupt objects, a bug).
    Internal,
}

impl Error {
    /// The broad class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Model(error) => match error.kind() {
                hf_model::ErrorKind::Invalid => ErrorKind::Invalid,
                hf_model::ErrorKind::NotFound => ErrorKind::NotFound,
                hf_model::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
                hf_model::ErrorKind::InUse => ErrorKind::InUse,
                hf_model::ErrorKind::BrokenMetadata => ErrorKind::BrokenMetadata,
                hf_model::ErrorKind::Io => ErrorKind::Internal,
            },
            Error::InvalidBranch { .. } => ErrorKind::Invalid,
            Error::BranchNotFound { .. } | Error::UnknownObject { .. } => ErrorKind::NotFound,
            Error::Invalid { .. } => ErrorKind::InvalidMetadata,
            Error::Conflict { .. } | Error::Contention { .. } => ErrorKind::Conflict,
            Error::Locked { .. } => ErrorKind::Locked,
            Error::Remote { .. } => ErrorKind::Unavailable,
            Error::Git(error)
                if matches!(
                    error.class(),
                    git2::ErrorClass::Os | git2::ErrorClass::Filesystem
                ) =>
            {
                ErrorKind::Storage
            }
            Error::NotARepository { .. } | Error::Git(_) => ErrorKind::Internal,
        }
    }
}
