//! The one error type of the use cases.
//!
//! The storage, metadata and model errors pass through unchanged (their own `kind()` says what
//! they mean); the variants of this crate are the rules that live here: screens must compile,
//! vendored paths, scarce work that is refused instead of queued.

/// Why a use case failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database side failed (or refused: a destructive plan, a diverged branch).
    #[error(transparent)]
    Storage(#[from] hf_storage::Error),
    /// The metadata store failed or refused the write (validation, conflicts, unknown branch).
    #[error(transparent)]
    Metadata(#[from] hf_metastore::Error),
    /// The input broke a rule of the model (a key, a missing item, an item in use).
    #[error(transparent)]
    Model(#[from] hf_model::Error),
    /// A screen's HFX does not compile, imports what the branch does not have, or has a query
    /// naming an object or field the branch does not have; each diagnostic is located in the
    /// screen source.
    #[error("the screen does not compile ({} problems)", diagnostics.len())]
    Hfx {
        /// The problems, in source order.
        diagnostics: Vec<hf_hfx::Diagnostic>,
    },
    /// Too much of this kind of work is running and waiting already; try again shortly.
    #[error("the service is busy with other {what}; try again in a moment")]
    Overloaded {
        /// What the work is ("compiles", "password checks").
        what: &'static str,
    },
    /// The work took longer than its limit.
    #[error("{what} took longer than {seconds} seconds")]
    Timeout {
        /// What the work was.
        what: &'static str,
        /// The limit.
        seconds: u64,
    },
    /// A vendored file's path breaks the path rules.
    #[error("`{path}` is not a vendored path: `[a-z0-9._-]` segments separated by `/`, no empty, `.` or `..` segment, at most {max_bytes} bytes, not ending in `.json5`")]
    InvalidPath {
        /// The path as given (shortened to 100 characters).
        path: String,
        /// The longest path allowed.
        max_bytes: usize,
    },
    /// The module has no vendored file at this path.
    #[error("module `{module}` has no vendored file `{path}`")]
    FileNotFound {
        /// The module key.
        module: String,
        /// The vendored path.
        path: String,
    },
    /// A screen imports the vendored file that was to be deleted.
    #[error("screen `{module}/{screen}` imports `{path}`; change it first")]
    FileInUse {
        /// The module key.
        module: String,
        /// The importing screen.
        screen: String,
        /// The vendored path.
        path: String,
    },
    /// Applying or importing the branch would break screens that work in what the database
    /// reflects: their queries or imports name objects, fields or screens the branch does not
    /// have.
    #[error("making branch `{branch}` live would break screen {}: it names an object, field or screen the branch does not have", screens.join(", "))]
    BreaksScreens {
        /// The branch that was to be applied or imported.
        branch: String,
        /// The screens it breaks, as `module/screen`.
        screens: Vec<String>,
    },
    /// A query's text is longer than allowed.
    #[error("the query is {bytes} bytes long; the limit is {limit} bytes")]
    QueryTooLarge {
        /// Its length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// Only administrators may see how a query runs.
    #[error("only administrators may explain queries")]
    ExplainForbidden,
    /// The time zone is not an IANA name.
    #[error("`{name}` is not an IANA time zone name such as `UTC` or `Europe/Paris`")]
    InvalidTimeZone {
        /// The name as given (shortened to 64 characters).
        name: String,
    },
    /// The cursor was not given by this query (same text, parameters and time zone).
    #[error("the cursor was not given by this query (same text, parameters and time zone); start again with `\"cursor\": null`")]
    InvalidCursor,
    /// The query does not compile: its diagnostics, located in `text`.
    #[error("the query has {} problem(s)", diagnostics.len())]
    Hoqs {
        /// The query text the diagnostics point into.
        text: String,
        /// The problems.
        diagnostics: Vec<hf_hoqs::Diagnostic>,
    },
    /// PostgreSQL refused a value while computing the query (an overflow, a date out of range).
    #[error("the query could not be evaluated on the data: {detail}")]
    Evaluation {
        /// PostgreSQL's message.
        detail: String,
    },
    /// Signing or verifying a token, hashing a password, checking a key failed or refused.
    #[error(transparent)]
    Auth(#[from] hf_auth::Error),
    /// The token verified but its principal no longer exists.
    #[error("the token's principal no longer exists")]
    PrincipalGone,
    /// Too many failed logins for this username or address.
    #[error("too many failed logins; try again in {seconds} seconds")]
    RateLimited {
        /// How long to wait.
        seconds: u64,
    },
    /// The username or the password is wrong (which one is not said).
    #[error("the username or the password is wrong")]
    InvalidCredentials,
    /// The setup or reset token is unknown, used or expired.
    #[error("the setup token is unknown, used or expired")]
    InvalidSetupToken,
    /// The one-time session code is unknown, used or expired.
    #[error("the code is unknown, used or expired")]
    InvalidCode,
    /// An SSH login is refused.
    #[error("the SSH login is refused: {detail}")]
    SignatureRefused {
        /// Why.
        detail: String,
    },
    /// The administrator of the first start could not be created.
    #[error("cannot create the administrator `{name}`: {reason}")]
    Bootstrap {
        /// The configured administrator name.
        name: String,
        /// Why not.
        reason: String,
    },
    /// A bug or a broken environment; logged, never the caller's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What a failure means for the caller, coarsely; the HTTP service maps each variant to its
/// stable code, this is for callers that only need to decide what to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request is wrong; repeating it unchanged fails the same way.
    Invalid,
    /// Something named does not exist.
    NotFound,
    /// The caller may not do this.
    Forbidden,
    /// The caller is not who it claims, or could not prove it.
    Unauthenticated,
    /// The request collides with the current state (in use, already there, lost a race).
    Conflict,
    /// Try again later: overloaded, timed out, the database unreachable.
    Unavailable,
    /// A bug or a broken environment.
    Internal,
}

impl Error {
    /// The coarse meaning of the failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Storage(error) => match error {
                hf_storage::Error::Metadata(error) => metadata_kind(error),
                hf_storage::Error::BranchDiverged { .. } => ErrorKind::Conflict,
                hf_storage::Error::Ddl(hf_ddl::Error::Destructive { .. }) => ErrorKind::Conflict,
                hf_storage::Error::Ddl(error) => match error.kind() {
                    hf_ddl::ErrorKind::Unavailable | hf_ddl::ErrorKind::Storage => {
                        ErrorKind::Unavailable
                    }
                    _ => ErrorKind::Invalid,
                },
                other => match other.kind() {
                    hf_storage::ErrorKind::Unavailable
                    | hf_storage::ErrorKind::Busy
                    | hf_storage::ErrorKind::CommitOutcomeUnknown
                    | hf_storage::ErrorKind::Timeout
                    | hf_storage::ErrorKind::Storage => ErrorKind::Unavailable,
                    _ => ErrorKind::Internal,
                },
            },
            Error::Metadata(error) => metadata_kind(error),
            Error::Model(error) => model_kind(error),
            Error::Hfx { .. }
            | Error::InvalidPath { .. }
            | Error::QueryTooLarge { .. }
            | Error::InvalidTimeZone { .. }
            | Error::InvalidCursor
            | Error::Hoqs { .. }
            | Error::Evaluation { .. } => ErrorKind::Invalid,
            Error::ExplainForbidden => ErrorKind::Forbidden,
            Error::Auth(error) => match error.kind() {
                hf_auth::ErrorKind::Internal => ErrorKind::Internal,
                hf_auth::ErrorKind::InvalidToken | hf_auth::ErrorKind::InvalidSignature => {
                    ErrorKind::Unauthenticated
                }
                _ => ErrorKind::Invalid,
            },
            Error::PrincipalGone
            | Error::InvalidCredentials
            | Error::InvalidSetupToken
            | Error::InvalidCode
            | Error::SignatureRefused { .. } => ErrorKind::Unauthenticated,
            Error::RateLimited { .. } => ErrorKind::Unavailable,
            Error::Bootstrap { .. } => ErrorKind::Internal,
            Error::FileNotFound { .. } => ErrorKind::NotFound,
            Error::FileInUse { .. } | Error::BreaksScreens { .. } => ErrorKind::Conflict,
            Error::Overloaded { .. } | Error::Timeout { .. } => ErrorKind::Unavailable,
            Error::Internal(_) => ErrorKind::Internal,
        }
    }
}

fn metadata_kind(error: &hf_metastore::Error) -> ErrorKind {
    use hf_metastore::ErrorKind as K;
    match error.kind() {
        K::Invalid | K::InvalidMetadata | K::BrokenMetadata => ErrorKind::Invalid,
        K::NotFound => ErrorKind::NotFound,
        K::AlreadyExists | K::InUse | K::Conflict => ErrorKind::Conflict,
        K::Locked => ErrorKind::Unavailable,
        _ => ErrorKind::Internal,
    }
}

fn model_kind(error: &hf_model::Error) -> ErrorKind {
    use hf_model::ErrorKind as K;
    match error.kind() {
        K::Invalid | K::BrokenMetadata => ErrorKind::Invalid,
        K::NotFound => ErrorKind::NotFound,
        K::AlreadyExists | K::InUse => ErrorKind::Conflict,
        _ => ErrorKind::Internal,
    }
}

/// The result of a use case.
pub type Result<T, E = Error> = std::result::Result<T, E>;
