//! The error envelope and the single table from error codes to HTTP statuses.
//!
//! Every failure the service answers with goes through [`ApiError`], whose body is
//! `{"errors":[{code, message, scope, target, rule?, location?}, ...]}`. Domain crates never see
//! HTTP: their error kinds are mapped here, and only here.

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use utoipa::ToSchema;

/// Declares the error codes once, each with its HTTP status, so the table cannot drift.
macro_rules! error_codes {
    ($($variant:ident = $text:literal => $status:ident,)*) => {
        /// Every stable error `code` the service can answer with.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $(
                #[doc = $text]
                $variant,
            )*
        }

        impl Code {
            /// The code as it appears in the envelope.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $text,)* }
            }

            /// The HTTP status that goes with the code.
            pub fn status(self) -> StatusCode {
                match self { $(Code::$variant => StatusCode::$status,)* }
            }

            /// Every code, for documentation and tests.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];
        }
    };
}

error_codes! {
    RouteNotFound = "ROUTE_NOT_FOUND" => NOT_FOUND,
    MethodNotAllowed = "METHOD_NOT_ALLOWED" => METHOD_NOT_ALLOWED,
    MalformedJson = "MALFORMED_JSON" => BAD_REQUEST,
    UnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE" => UNSUPPORTED_MEDIA_TYPE,
    InvalidBody = "INVALID_BODY" => BAD_REQUEST,
    InvalidQuery = "INVALID_QUERY" => BAD_REQUEST,
    InvalidPath = "INVALID_PATH" => BAD_REQUEST,
    InvalidBranch = "INVALID_BRANCH" => BAD_REQUEST,
    BadRequest = "BAD_REQUEST" => BAD_REQUEST,
    PayloadTooLarge = "PAYLOAD_TOO_LARGE" => PAYLOAD_TOO_LARGE,
    Unauthenticated = "UNAUTHENTICATED" => UNAUTHORIZED,
    Forbidden = "FORBIDDEN" => FORBIDDEN,
    InvalidCredentials = "INVALID_CREDENTIALS" => UNAUTHORIZED,
    RateLimited = "RATE_LIMITED" => TOO_MANY_REQUESTS,
    InvalidSetupToken = "INVALID_SETUP_TOKEN" => UNAUTHORIZED,
    WeakPassword = "WEAK_PASSWORD" => UNPROCESSABLE_ENTITY,
    InvalidSignature = "INVALID_SIGNATURE" => UNAUTHORIZED,
    InvalidCode = "INVALID_CODE" => UNAUTHORIZED,
    InvalidName = "INVALID_NAME" => BAD_REQUEST,
    AlreadyExists = "ALREADY_EXISTS" => CONFLICT,
    LastAdmin = "LAST_ADMIN" => CONFLICT,
    PrincipalNotFound = "PRINCIPAL_NOT_FOUND" => NOT_FOUND,
    CredentialNotFound = "CREDENTIAL_NOT_FOUND" => NOT_FOUND,
    InvalidPublicKey = "INVALID_PUBLIC_KEY" => UNPROCESSABLE_ENTITY,
    InvalidKey = "INVALID_KEY" => BAD_REQUEST,
    ModuleNotFound = "MODULE_NOT_FOUND" => NOT_FOUND,
    ObjectNotFound = "OBJECT_NOT_FOUND" => NOT_FOUND,
    FieldNotFound = "FIELD_NOT_FOUND" => NOT_FOUND,
    ScreenNotFound = "SCREEN_NOT_FOUND" => NOT_FOUND,
    BranchNotFound = "BRANCH_NOT_FOUND" => NOT_FOUND,
    InUse = "IN_USE" => CONFLICT,
    InvalidReference = "INVALID_REFERENCE" => UNPROCESSABLE_ENTITY,
    InvalidMetadata = "INVALID_METADATA" => UNPROCESSABLE_ENTITY,
    // The model's validation diagnostics (`hf_model::diagnostics::Code`), each with its status.
    LabelTooLong = "LABEL_TOO_LONG" => UNPROCESSABLE_ENTITY,
    EmptyLabel = "EMPTY_LABEL" => UNPROCESSABLE_ENTITY,
    InvalidPicklist = "INVALID_PICKLIST" => UNPROCESSABLE_ENTITY,
    ControlCharacter = "CONTROL_CHARACTER" => UNPROCESSABLE_ENTITY,
    InvalidIdentity = "INVALID_IDENTITY" => UNPROCESSABLE_ENTITY,
    ExtendsCycle = "EXTENDS_CYCLE" => UNPROCESSABLE_ENTITY,
    ExtensionWithoutParent = "EXTENSION_WITHOUT_PARENT" => UNPROCESSABLE_ENTITY,
    RedefinedField = "REDEFINED_FIELD" => UNPROCESSABLE_ENTITY,
    RedefinedRule = "REDEFINED_RULE" => UNPROCESSABLE_ENTITY,
    LookupToAbstract = "LOOKUP_TO_ABSTRACT" => UNPROCESSABLE_ENTITY,
    RollupSourceNotLookup = "ROLLUP_SOURCE_NOT_LOOKUP" => UNPROCESSABLE_ENTITY,
    RollupSourceMismatch = "ROLLUP_SOURCE_MISMATCH" => UNPROCESSABLE_ENTITY,
    RollupFieldRequired = "ROLLUP_FIELD_REQUIRED" => UNPROCESSABLE_ENTITY,
    RollupFieldType = "ROLLUP_FIELD_TYPE" => UNPROCESSABLE_ENTITY,
    InvalidExpression = "INVALID_EXPRESSION" => UNPROCESSABLE_ENTITY,
    InvalidHfxVersion = "INVALID_HFX_VERSION" => UNPROCESSABLE_ENTITY,
    InvalidRenameHint = "INVALID_RENAME_HINT" => UNPROCESSABLE_ENTITY,
    MetadataUnreadable = "METADATA_UNREADABLE" => UNPROCESSABLE_ENTITY,
    MetadataConflict = "METADATA_CONFLICT" => CONFLICT,
    DestructiveChange = "DESTRUCTIVE_CHANGE" => CONFLICT,
    BranchDiverged = "BRANCH_DIVERGED" => CONFLICT,
    ApplyFailed = "APPLY_FAILED" => UNPROCESSABLE_ENTITY,
    HfxCompileError = "HFX_COMPILE_ERROR" => UNPROCESSABLE_ENTITY,
    FileNotFound = "FILE_NOT_FOUND" => NOT_FOUND,
    DatabaseUnavailable = "DATABASE_UNAVAILABLE" => SERVICE_UNAVAILABLE,
    CommitOutcomeUnknown = "COMMIT_OUTCOME_UNKNOWN" => SERVICE_UNAVAILABLE,
    Timeout = "TIMEOUT" => GATEWAY_TIMEOUT,
    HoqsSyntaxError = "HOQS_SYNTAX_ERROR" => BAD_REQUEST,
    HoqsUnknownName = "HOQS_UNKNOWN_NAME" => BAD_REQUEST,
    HoqsTypeError = "HOQS_TYPE_ERROR" => BAD_REQUEST,
    HoqsLimitTooLarge = "HOQS_LIMIT_TOO_LARGE" => BAD_REQUEST,
    HoqsEvaluationError = "HOQS_EVALUATION_ERROR" => BAD_REQUEST,
    InvalidCursor = "INVALID_CURSOR" => BAD_REQUEST,
    RecordNotFound = "RECORD_NOT_FOUND" => NOT_FOUND,
    Required = "REQUIRED" => UNPROCESSABLE_ENTITY,
    InvalidValue = "INVALID_VALUE" => UNPROCESSABLE_ENTITY,
    ReadOnlyField = "READ_ONLY_FIELD" => UNPROCESSABLE_ENTITY,
    UnknownField = "UNKNOWN_FIELD" => UNPROCESSABLE_ENTITY,
    RuleFailed = "RULE_FAILED" => UNPROCESSABLE_ENTITY,
    AbstractObject = "ABSTRACT_OBJECT" => UNPROCESSABLE_ENTITY,
    UniqueViolation = "UNIQUE_VIOLATION" => CONFLICT,
    NotUniqueField = "NOT_UNIQUE_FIELD" => BAD_REQUEST,
    PreconditionFailed = "PRECONDITION_FAILED" => PRECONDITION_FAILED,
    InvalidIdempotencyKey = "INVALID_IDEMPOTENCY_KEY" => BAD_REQUEST,
    IdempotencyKeyReused = "IDEMPOTENCY_KEY_REUSED" => UNPROCESSABLE_ENTITY,
    RequestTimeout = "REQUEST_TIMEOUT" => REQUEST_TIMEOUT,
    UriTooLong = "URI_TOO_LONG" => URI_TOO_LONG,
    HeadersTooLarge = "HEADERS_TOO_LARGE" => REQUEST_HEADER_FIELDS_TOO_LARGE,
    TooManyConnections = "TOO_MANY_CONNECTIONS" => TOO_MANY_REQUESTS,
    PoolBusy = "POOL_BUSY" => SERVICE_UNAVAILABLE,
    Overloaded = "OVERLOADED" => SERVICE_UNAVAILABLE,
    StorageUnavailable = "STORAGE_UNAVAILABLE" => SERVICE_UNAVAILABLE,
    MetadataLocked = "METADATA_LOCKED" => SERVICE_UNAVAILABLE,
    Internal = "INTERNAL" => INTERNAL_SERVER_ERROR,
}

/// What an error entry's `target` refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// `target` is a field key or a property path of the body.
    Field,
    /// `target` is a record id (or null for a record not yet created).
    Record,
    /// The request as a whole; `target` is null.
    Request,
}

/// Where in a source text (HOQS, HFX, a JSON body) a problem is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Location {
    /// 1-based line.
    pub line: u32,
    /// 1-based column in UTF-16 code units of the line prefix.
    pub column: u32,
    /// The offending source line.
    pub frame: String,
}

/// One problem in an error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct ErrorEntry {
    /// Stable SCREAMING_SNAKE_CASE code.
    #[schema(value_type = String, example = "ROUTE_NOT_FOUND")]
    pub code: &'static str,
    /// English text for people; may change between versions.
    pub message: String,
    /// What `target` refers to.
    pub scope: Scope,
    /// The field key, property path or record id concerned; always present, often null.
    #[schema(required = true)]
    pub target: Option<String>,
    /// The failing rule's key, only with `RULE_FAILED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Where in a source text the problem is, only for language errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
}

impl ErrorEntry {
    /// An entry without rule or location. The contract gives `target` only to `field` (a field
    /// key or property path) and `record` (a record id) entries; every other scope has
    /// `target: null` and names the item in its message, so a target given with another scope is
    /// dropped here, where every entry is made.
    pub fn new(
        code: Code,
        message: impl Into<String>,
        scope: Scope,
        target: Option<String>,
    ) -> Self {
        Self {
            code: code.as_str(),
            message: message.into(),
            scope,
            target,
            rule: None,
            location: None,
        }
        .with_contract_target()
    }

    /// The entry with `target` null unless its scope is `field` or `record`.
    fn with_contract_target(mut self) -> Self {
        if !matches!(self.scope, Scope::Field | Scope::Record) {
            self.target = None;
        }
        self
    }
}

/// The body of every error response.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// One or more problems; never empty.
    pub errors: Vec<ErrorEntry>,
}

/// An error response: a status, one or more entries, and the headers some codes need.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    entries: Vec<ErrorEntry>,
    retry_after: Option<u64>,
    request_id: Option<String>,
}

impl ApiError {
    /// A single request-scoped error.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self::entry(code, message, Scope::Request, None)
    }

    /// A single error with an explicit scope and target. Only field and record entries carry a
    /// target; every other scope's target is null (see [`ErrorEntry::new`]).
    pub fn entry(
        code: Code,
        message: impl Into<String>,
        scope: Scope,
        target: Option<String>,
    ) -> Self {
        Self {
            status: code.status(),
            entries: vec![ErrorEntry::new(code, message, scope, target)],
            retry_after: None,
            request_id: None,
        }
    }

    /// Several entries under one status (every problem of a write at once).
    pub fn from_entries(status: StatusCode, entries: Vec<ErrorEntry>) -> Self {
        if entries.is_empty() {
            return Self::internal();
        }
        Self {
            status,
            entries: entries
                .into_iter()
                .map(ErrorEntry::with_contract_target)
                .collect(),
            retry_after: None,
            request_id: None,
        }
    }

    /// Several entries, each with its code; the status is the table's status of those codes, or
    /// the validation status 422 when they differ (a unique value taken and a rule failing).
    pub fn from_coded_entries(entries: Vec<(Code, ErrorEntry)>) -> Self {
        let status = match entries.first() {
            Some((first, _))
                if entries
                    .iter()
                    .all(|(code, _)| code.status() == first.status()) =>
            {
                first.status()
            }
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        Self::from_entries(
            status,
            entries.into_iter().map(|(_, entry)| entry).collect(),
        )
    }

    /// A field-scoped error naming the property or field key.
    pub fn field(code: Code, message: impl Into<String>, target: impl Into<String>) -> Self {
        Self::entry(code, message, Scope::Field, Some(target.into()))
    }

    /// The generic 500, whose message never carries internals.
    pub fn internal() -> Self {
        Self::new(
            Code::Internal,
            "The service failed unexpectedly; the failure has been logged.",
        )
    }

    /// Attaches a source location to every entry.
    pub fn with_location(mut self, location: Location) -> Self {
        for entry in &mut self.entries {
            entry.location = Some(location.clone());
        }
        self
    }

    /// Puts the request id header on the response, for errors answered outside the normal
    /// response path (panics, middleware failures).
    pub fn with_request_id(mut self, request_id: String) -> Self {
        self.request_id = Some(request_id);
        self
    }

    /// Adds a `Retry-After` header (seconds).
    pub fn with_retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The entries, for tests and logging.
    pub fn entries(&self) -> &[ErrorEntry] {
        &self.entries
    }

    /// Whether one of the entries has `code`.
    pub fn has_code(&self, code: Code) -> bool {
        self.entries.iter().any(|entry| entry.code == code.as_str())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let codes: Vec<&str> = self.entries.iter().map(|e| e.code).collect();
        write!(f, "{} {}", self.status.as_u16(), codes.join(","))
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status);
        if self.status == StatusCode::UNAUTHORIZED {
            response.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        if let Some(id) = &self.request_id {
            if let Ok(value) = HeaderValue::from_str(id) {
                response.insert_header((crate::middleware::REQUEST_ID, value));
            }
        }
        if let Some(seconds) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, seconds.to_string()));
        }
        response.json(ErrorBody {
            errors: self.entries.clone(),
        })
    }
}

impl From<hf_storage::Error> for ApiError {
    fn from(error: hf_storage::Error) -> Self {
        use hf_storage::ErrorKind;
        let error = match error {
            hf_storage::Error::Metadata(error) => return error.into(),
            hf_storage::Error::Ddl(error) => return ddl_error(error),
            hf_storage::Error::LiveWriteBusy { waited } => {
                return ApiError::new(
                    Code::MetadataLocked,
                    format!("Another write to the live branch has held it for {} s; nothing was written. Try again shortly.", waited.as_secs()),
                )
                .with_retry_after(1)
            }
            hf_storage::Error::BranchDiverged { branch } => {
                return ApiError::new(
                    Code::BranchDiverged,
                    format!("Branch `{branch}` does not descend from the live head; merge the live branch into it first."),
                )
            }
            other => other,
        };
        match error.kind() {
            ErrorKind::Unavailable => {
                // A refusal while the database is found not answering is logged once, when
                // the pools' gate closes, not per request (there may be tens of thousands).
                if !matches!(error, hf_storage::Error::Unreachable { .. }) {
                    tracing::warn!(%error, "database unavailable");
                }
                ApiError::new(
                    Code::DatabaseUnavailable,
                    "The database is unavailable; try again shortly.",
                )
                .with_retry_after(1)
            }
            ErrorKind::CommitOutcomeUnknown => {
                tracing::warn!(%error, "a write's outcome is unknown");
                let what_happened = if matches!(error, hf_storage::Error::NoAnswer { .. }) {
                    "The database stopped answering"
                } else {
                    "The connection to the database was lost"
                };
                ApiError::new(
                    Code::CommitOutcomeUnknown,
                    format!("{what_happened} while the write was being committed, so whether it took effect is unknown. Read the data again before you repeat the write."),
                )
                .with_retry_after(1)
            }
            ErrorKind::Busy => ApiError::new(
                Code::PoolBusy,
                "Every database connection is busy; try again shortly.",
            )
            .with_retry_after(1),
            ErrorKind::Timeout => {
                ApiError::new(Code::Timeout, "The database did not answer in time.")
            }
            ErrorKind::Storage => database_storage_failed(&error, "the request did nothing"),
            ErrorKind::InvalidValue => {
                // The use cases check values before the database sees them; this is the net
                // under what they do not foresee, without the server's text (it names indexes).
                tracing::warn!(%error, "the database refused a value");
                ApiError::new(
                    Code::InvalidValue,
                    "The database refused a value of this request as out of range, too long or beyond a configured limit; nothing was written.",
                )
            }
            ErrorKind::Forbidden => ApiError::new(
                Code::Forbidden,
                "Your database role lacks the privilege this request needs.",
            ),
            ErrorKind::RoleMissing => ApiError::new(
                Code::Unauthenticated,
                "The token's principal no longer exists.",
            ),
            _ => {
                tracing::error!(%error, "database error");
                ApiError::internal()
            }
        }
    }
}

impl From<hf_auth::Error> for ApiError {
    fn from(error: hf_auth::Error) -> Self {
        use hf_auth::ErrorKind;
        match error.kind() {
            ErrorKind::InvalidToken => ApiError::new(
                Code::Unauthenticated,
                format!("The bearer token is not valid: {error}."),
            ),
            ErrorKind::WeakPassword => ApiError::field(
                Code::WeakPassword,
                format!("The password is too weak: {error}."),
                "password",
            ),
            ErrorKind::InvalidName => ApiError::field(
                Code::InvalidName,
                format!("The name is not allowed: {error}."),
                "name",
            ),
            ErrorKind::InvalidPublicKey => ApiError::field(
                Code::InvalidPublicKey,
                format!("The public key is not accepted: {error}."),
                "publicKey",
            ),
            ErrorKind::InvalidSignature => ApiError::new(
                Code::InvalidSignature,
                format!("The signature is not accepted: {error}."),
            ),
            ErrorKind::Internal => {
                tracing::error!(%error, "authentication failure");
                ApiError::internal()
            }
        }
    }
}

impl From<hf_metastore::Error> for ApiError {
    fn from(error: hf_metastore::Error) -> Self {
        use hf_metastore::Error as E;
        match error {
            E::Model(error) => error.into(),
            E::InvalidBranch { branch } => ApiError::new(
                Code::InvalidBranch,
                format!("`{branch}` is not a valid branch id."),
            ),
            E::BranchNotFound { branch } => ApiError::new(
                Code::BranchNotFound,
                format!("There is no branch `{branch}`."),
            ),
            E::Invalid { diagnostics, .. } => {
                let entries = diagnostics
                    .iter()
                    .map(|diagnostic| {
                        let code = model_diagnostic_code(diagnostic.code);
                        let target = diagnostic
                            .property
                            .map_or_else(|| diagnostic.target.to_string(), str::to_owned);
                        let message = format!("{} ({})", diagnostic.message, diagnostic.file());
                        (
                            code,
                            ErrorEntry::new(code, message, Scope::Field, Some(target)),
                        )
                    })
                    .collect();
                ApiError::from_coded_entries(entries)
            }
            E::Conflict { branch, .. } | E::Contention { branch, .. } => ApiError::new(
                Code::MetadataConflict,
                format!("Branch `{branch}` is changing too fast; retry the write."),
            ),
            E::Locked { lock } => {
                let wait = hf_metastore::locks::STALE_LOCK_AGE
                    .as_secs()
                    .saturating_sub(lock.age_secs)
                    .max(1);
                tracing::warn!(branch = %lock.branch, file = %lock.file, age_secs = lock.age_secs, "metadata branch locked");
                ApiError::entry(
                    Code::MetadataLocked,
                    format!(
                        "Branch `{}` is locked by `{}` in the metadata repository ({} s old), probably left by a writer that crashed; it is removed once {} s old. Nothing was written.",
                        lock.branch,
                        lock.file,
                        lock.age_secs,
                        hf_metastore::locks::STALE_LOCK_AGE.as_secs()
                    ),
                    Scope::Request,
                    Some(lock.branch),
                )
                .with_retry_after(wait)
            }
            other if other.kind() == hf_metastore::ErrorKind::Unavailable => {
                tracing::warn!(error = %other, "metadata database unavailable");
                ApiError::new(
                    Code::DatabaseUnavailable,
                    "The database is unavailable; try again shortly.",
                )
                .with_retry_after(1)
            }
            other if other.kind() == hf_metastore::ErrorKind::Storage => {
                tracing::error!(error = %other, "metadata repository storage failure");
                ApiError::new(
                    Code::StorageUnavailable,
                    "The metadata repository cannot be written (its file system is read-only, full or refuses access); nothing was written. Retry once an operator has fixed it.",
                )
                .with_retry_after(5)
            }
            other => {
                tracing::error!(error = %other, "metadata store failure");
                ApiError::internal()
            }
        }
    }
}

/// The envelope codes a model validation diagnostic can have, each once.
pub fn model_diagnostic_codes() -> Vec<Code> {
    let mut codes: Vec<Code> = Vec::new();
    for code in hf_model::Code::ALL
        .iter()
        .map(|&code| model_diagnostic_code(code))
    {
        if !codes.contains(&code) {
            codes.push(code);
        }
    }
    codes
}

/// The envelope code of a model validation diagnostic: references to something missing are the
/// contract's `INVALID_REFERENCE`, every other diagnostic keeps its own name.
fn model_diagnostic_code(code: hf_model::Code) -> Code {
    use hf_model::Code as D;
    match code {
        D::InvalidKey => Code::InvalidKey,
        D::InvalidPicklist => Code::InvalidPicklist,
        D::LabelTooLong => Code::LabelTooLong,
        D::EmptyLabel => Code::EmptyLabel,
        D::ControlCharacter => Code::ControlCharacter,
        D::InvalidIdentity => Code::InvalidIdentity,
        D::ExtendsCycle => Code::ExtendsCycle,
        D::ExtensionWithoutParent => Code::ExtensionWithoutParent,
        D::RedefinedField => Code::RedefinedField,
        D::RedefinedRule => Code::RedefinedRule,
        D::LookupToAbstract => Code::LookupToAbstract,
        D::RollupSourceNotLookup => Code::RollupSourceNotLookup,
        D::RollupSourceMismatch => Code::RollupSourceMismatch,
        D::RollupFieldRequired => Code::RollupFieldRequired,
        D::RollupFieldType => Code::RollupFieldType,
        D::InvalidExpression => Code::InvalidExpression,
        D::InvalidHfxVersion => Code::InvalidHfxVersion,
        D::InvalidRenameHint => Code::InvalidRenameHint,
        D::MissingParent
        | D::MissingLookupTarget
        | D::MissingRollupSource
        | D::MissingRollupField
        | D::MissingRuleField => Code::InvalidReference,
    }
}

impl From<hf_app::Error> for ApiError {
    fn from(error: hf_app::Error) -> Self {
        use hf_app::Error as E;
        match error {
            E::Storage(error) => error.into(),
            E::Metadata(error) => error.into(),
            E::Model(error) => error.into(),
            E::Hfx { diagnostics } => hfx_errors(&diagnostics),
            E::Overloaded { what } => ApiError::new(
                Code::Overloaded,
                format!("The service is busy with other {what}; try again in a moment."),
            )
            .with_retry_after(1),
            error @ E::Timeout { .. } => ApiError::new(Code::Timeout, format!("{error}.")),
            error @ E::InvalidPath { .. } => ApiError::new(Code::InvalidPath, capitalised(&error)),
            error @ E::FileNotFound { .. } => {
                ApiError::new(Code::FileNotFound, capitalised(&error))
            }
            error @ (E::FileInUse { .. } | E::BreaksScreens { .. }) => {
                ApiError::new(Code::InUse, capitalised(&error))
            }
            error @ E::QueryTooLarge { .. } => {
                ApiError::field(Code::PayloadTooLarge, capitalised(&error), "query")
            }
            error @ E::ExplainForbidden => ApiError::new(Code::Forbidden, capitalised(&error)),
            error @ E::InvalidTimeZone { .. } => {
                ApiError::field(Code::InvalidBody, capitalised(&error), "timeZone")
            }
            error @ E::InvalidCursor => {
                ApiError::field(Code::InvalidCursor, capitalised(&error), "cursor")
            }
            E::Hoqs { text, diagnostics } => crate::routes::query::hoqs_errors(&text, &diagnostics),
            error @ E::Evaluation { .. } => {
                ApiError::new(Code::HoqsEvaluationError, capitalised(&error))
            }
            E::Auth(error) => error.into(),
            error @ E::PrincipalGone => ApiError::new(Code::Unauthenticated, capitalised(&error)),
            error @ E::RateLimited { seconds } => {
                ApiError::new(Code::RateLimited, capitalised(&error)).with_retry_after(seconds)
            }
            error @ E::InvalidCredentials => {
                ApiError::new(Code::InvalidCredentials, capitalised(&error))
            }
            error @ E::InvalidSetupToken => {
                ApiError::new(Code::InvalidSetupToken, capitalised(&error))
            }
            error @ E::InvalidCode => ApiError::new(Code::InvalidCode, capitalised(&error)),
            error @ E::SignatureRefused { .. } => {
                ApiError::new(Code::InvalidSignature, capitalised(&error))
            }
            other => {
                tracing::error!(error = %other, "use case failure");
                ApiError::internal()
            }
        }
    }
}

/// An error's text as a sentence of the envelope: capital first letter, final full stop.
fn capitalised(error: &impl std::fmt::Display) -> String {
    let text = error.to_string();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => text,
    }
}

impl From<hf_model::Error> for ApiError {
    fn from(error: hf_model::Error) -> Self {
        use hf_model::Error as E;
        let message = format!("{error}.");
        match error {
            E::InvalidKey { .. } => ApiError::new(Code::InvalidKey, message),
            E::InvalidBranch { .. } => ApiError::new(Code::InvalidBranch, message),
            E::InvalidName { .. } => ApiError::new(Code::InvalidBody, message),
            E::UnknownValue { property, .. }
            | E::MissingProperty { property }
            | E::PropertyNotAllowed { property, .. } => {
                ApiError::field(Code::InvalidBody, message, property)
            }
            E::ModuleNotFound { .. } => ApiError::new(Code::ModuleNotFound, message),
            E::ObjectNotFound { .. } => ApiError::new(Code::ObjectNotFound, message),
            E::FieldNotFound { field, .. } => {
                ApiError::entry(Code::FieldNotFound, message, Scope::Field, Some(field))
            }
            E::ScreenNotFound { .. } => ApiError::new(Code::ScreenNotFound, message),
            E::AlreadyExists { .. } => ApiError::new(Code::AlreadyExists, message),
            E::InUse { .. } => ApiError::new(Code::InUse, message),
            other if other.kind() == hf_model::ErrorKind::BrokenMetadata => ApiError::new(
                Code::MetadataUnreadable,
                format!("The branch's metadata cannot be read: {other}."),
            ),
            other => {
                tracing::error!(error = %other, "metadata model failure");
                ApiError::internal()
            }
        }
    }
}

/// The database cannot write or read its files (its disk is full or failing: SQLSTATE 53100,
/// 58030): 503 `STORAGE_UNAVAILABLE`, as for the metadata repository's own storage, without the
/// server's text (it names the files). `outcome` says what became of the request.
fn database_storage_failed(error: &dyn std::fmt::Display, outcome: &str) -> ApiError {
    static LOG: Throttle = Throttle::new();
    if let Some(left_out) = LOG.admit(STORAGE_LOG_EVERY) {
        tracing::error!(%error, left_out, "the database cannot write to its storage (logged at most every 10 s; left_out counts the refusals since the last line)");
    }
    ApiError::new(
        Code::StorageUnavailable,
        format!("The database cannot write to its storage (its disk is full or failing), so {outcome}. Retry once an operator has made room."),
    )
    .with_retry_after(5)
}

/// How often a failure of the database's storage is logged at most: a full disk refuses every
/// write, and a line for each (on a disk that is often the same) would only add to it.
const STORAGE_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Lets a log line through at most once per interval, counting the ones left out between.
struct Throttle {
    /// When a line was last let through: milliseconds since [`Throttle::clock`]'s start, plus
    /// one (0: never).
    last: std::sync::atomic::AtomicU64,
    left_out: std::sync::atomic::AtomicU64,
}

impl Throttle {
    const fn new() -> Self {
        Self {
            last: std::sync::atomic::AtomicU64::new(0),
            left_out: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Milliseconds since the first use of any throttle, plus one.
    fn clock() -> u64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let start = START.get_or_init(std::time::Instant::now);
        u64::try_from(start.elapsed().as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// `Some(how many were left out since the last line)` when a line may be logged now.
    fn admit(&self, every: std::time::Duration) -> Option<u64> {
        self.admit_at(Self::clock(), every)
    }

    /// [`Throttle::admit`] at `now` on [`Throttle::clock`].
    fn admit_at(&self, now: u64, every: std::time::Duration) -> Option<u64> {
        use std::sync::atomic::Ordering;
        let last = self.last.load(Ordering::Relaxed);
        let every = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
        let due = last == 0 || now.saturating_sub(last) >= every;
        if due
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.left_out.swap(0, Ordering::Relaxed));
        }
        self.left_out.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// DDL failures: refused destructive changes get one entry each; a failed statement is named.
/// A statement that waited out `lock_timeout` (another session holds a lock)
/// says so and carries `Retry-After`; it is still `APPLY_FAILED`, as the contract answers every
/// failed apply.
fn ddl_error(error: hf_ddl::Error) -> ApiError {
    use hf_ddl::Error as E;
    let lock_timeout = error.kind() == hf_ddl::ErrorKind::LockTimeout;
    if error.kind() == hf_ddl::ErrorKind::Unavailable {
        // The connection broke under the apply: its transaction was not committed, and the
        // driver's text says nothing the client can use.
        tracing::warn!(%error, "database connection lost while applying DDL");
        return ApiError::new(
            Code::DatabaseUnavailable,
            "The database connection was lost while applying the change; nothing was applied. Retry shortly.",
        )
        .with_retry_after(1);
    }
    if error.kind() == hf_ddl::ErrorKind::Storage {
        return database_storage_failed(&error, "nothing was applied");
    }
    match error {
        E::Statement { target, sql, .. } if lock_timeout => ApiError::new(
            Code::ApplyFailed,
            format!(
                "Applying `{sql}` waited longer than the lock timeout: another database session holds a lock on `{target}`. Nothing was changed; retry once that session ends."
            ),
        )
        .with_retry_after(2),
        E::Destructive { targets } => {
            let entries = targets
                .into_iter()
                .map(|target| {
                    let message = format!(
                        "Applying this would lose the data of `{target}`; repeat with allowDestructive=true to accept that."
                    );
                    ErrorEntry::new(Code::DestructiveChange, message, Scope::Request, None)
                })
                .collect();
            ApiError::from_entries(StatusCode::CONFLICT, entries)
        }
        E::Statement {
            target,
            sql,
            source,
        } => ApiError::new(
            Code::ApplyFailed,
            format!(
                "Applying `{sql}` to `{target}` failed: {}.",
                source
                    .as_db_error()
                    .map_or_else(|| source.to_string(), |db| db.message().to_owned())
            ),
        ),
        E::InvalidPlan { errors } => {
            let entries = errors
                .into_iter()
                .map(|diagnostic| ErrorEntry {
                    code: Code::ApplyFailed.as_str(),
                    message: format!(
                        "The plan cannot be applied: `{}`: {}.",
                        diagnostic.target, diagnostic.message
                    ),
                    scope: Scope::Request,
                    target: Some(diagnostic.target),
                    rule: None,
                    location: None,
                })
                .collect();
            ApiError::from_entries(StatusCode::UNPROCESSABLE_ENTITY, entries)
        }
        E::Precheck {
            target,
            sql,
            reason,
        } => ApiError::new(
            Code::ApplyFailed,
            format!("`{sql}` on `{target}` would fail: {reason}."),
        ),
        other => {
            tracing::error!(error = %other, "DDL failure");
            ApiError::new(
                Code::ApplyFailed,
                format!("Applying the metadata failed: {other}."),
            )
        }
    }
}

/// The problems of a record request, all in one response. The status is that of the codes;
/// when they differ (a unique value taken and a rule failing), the validation status 422.
pub fn record_errors(problems: Vec<hf_storage::records::Problem>) -> ApiError {
    use hf_storage::records::{ProblemCode as P, Target};
    let mut entries = Vec::with_capacity(problems.len());
    for problem in problems {
        let code = match problem.code {
            P::InvalidKey => Code::InvalidKey,
            P::ModuleNotFound => Code::ModuleNotFound,
            P::ObjectNotFound => Code::ObjectNotFound,
            P::FieldNotFound => Code::FieldNotFound,
            P::NotUniqueField => Code::NotUniqueField,
            P::AbstractObject => Code::AbstractObject,
            P::InvalidId => Code::InvalidPath,
            P::RecordNotFound => Code::RecordNotFound,
            P::PreconditionFailed => Code::PreconditionFailed,
            P::UnknownField => Code::UnknownField,
            P::ReadOnlyField => Code::ReadOnlyField,
            P::InvalidValue => Code::InvalidValue,
            P::Required => Code::Required,
            P::InvalidReference => Code::InvalidReference,
            P::UniqueViolation => Code::UniqueViolation,
            P::RuleFailed => Code::RuleFailed,
            P::InUse => Code::InUse,
            P::InvalidIdempotencyKey => Code::InvalidIdempotencyKey,
            P::IdempotencyKeyReused => Code::IdempotencyKeyReused,
            _ => Code::Internal,
        };
        let (scope, target) = match problem.target {
            Target::Field(key) => (Scope::Field, Some(key)),
            Target::Record(id) => (Scope::Record, id),
            Target::Request => (Scope::Request, None),
        };
        let mut entry = ErrorEntry::new(code, problem.message, scope, target);
        entry.rule = problem.rule;
        entries.push((code, entry));
    }
    ApiError::from_coded_entries(entries)
}

/// Compile errors of an HFX source (or its sidecar), each with its location.
pub fn hfx_errors(diagnostics: &[hf_hfx::Diagnostic]) -> ApiError {
    let entries = diagnostics
        .iter()
        .map(|d| ErrorEntry {
            code: Code::HfxCompileError.as_str(),
            message: d.message.clone(),
            scope: Scope::Request,
            target: None,
            rule: None,
            location: Some(Location {
                line: d.line,
                column: d.column,
                frame: d.frame.clone(),
            }),
        })
        .collect();
    ApiError::from_entries(StatusCode::UNPROCESSABLE_ENTITY, entries)
}

/// The envelope for a status produced outside our handlers (the router, the framework), so no
/// response ever has an HTML or plain-text error body.
pub fn for_status(status: StatusCode) -> ApiError {
    let (code, message) = match status {
        StatusCode::NOT_FOUND => (Code::RouteNotFound, "No route matches this path."),
        StatusCode::METHOD_NOT_ALLOWED => (
            Code::MethodNotAllowed,
            "This path does not accept this method.",
        ),
        StatusCode::PAYLOAD_TOO_LARGE => (
            Code::PayloadTooLarge,
            "The request body is larger than allowed.",
        ),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            Code::UnsupportedMediaType,
            "The request body must be application/json.",
        ),
        StatusCode::REQUEST_TIMEOUT => {
            (Code::RequestTimeout, "The request did not arrive in time.")
        }
        StatusCode::URI_TOO_LONG => (Code::UriTooLong, "The request URL is too long."),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            Code::HeadersTooLarge,
            "The request's header fields are too large.",
        ),
        StatusCode::SERVICE_UNAVAILABLE => (
            Code::DatabaseUnavailable,
            "The service is unavailable; try again shortly.",
        ),
        status if status.is_client_error() => (Code::BadRequest, "The request is not valid."),
        _ => return ApiError::internal(),
    };
    let mut error = ApiError::new(code, message);
    error.status = status;
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first line goes through; the next ones within the interval are counted, and the
    /// first after it says how many were left out.
    #[test]
    fn a_throttled_line_goes_through_once_per_interval_with_the_count_left_out() {
        let throttle = Throttle::new();
        let every = std::time::Duration::from_secs(10);
        assert_eq!(throttle.admit_at(1, every), Some(0));
        assert_eq!(throttle.admit_at(2, every), None);
        assert_eq!(throttle.admit_at(9_999, every), None);
        assert_eq!(throttle.admit_at(10_001, every), Some(2));
        assert_eq!(throttle.admit_at(10_002, every), None);
        assert_eq!(
            Throttle::new().admit(every),
            Some(0),
            "a first line on the real clock"
        );
    }

    #[test]
    fn codes_are_screaming_snake_case_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in Code::ALL {
            let text = code.as_str();
            assert!(
                text.chars().all(|c| c.is_ascii_uppercase() || c == '_'),
                "{text}"
            );
            assert!(seen.insert(text), "{text} twice");
        }
    }

    /// A database that stopped answering is unavailable for a read; for a write, whose commit
    /// went out, the outcome is unknown, and the message says which happened.
    #[test]
    fn a_database_that_stopped_answering_is_unavailable_or_an_unknown_commit() {
        let waited = std::time::Duration::from_secs(7);
        let read = ApiError::from(hf_storage::Error::NoAnswer {
            waited,
            write: false,
        });
        assert_eq!(read.entries()[0].code, "DATABASE_UNAVAILABLE");
        assert_eq!(read.retry_after, Some(1));
        let write = ApiError::from(hf_storage::Error::NoAnswer {
            waited,
            write: true,
        });
        assert_eq!(write.entries()[0].code, "COMMIT_OUTCOME_UNKNOWN");
        assert_eq!(write.status_code(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(write.retry_after, Some(1));
        let message = &write.entries()[0].message;
        assert!(
            message.starts_with("The database stopped answering"),
            "{message}"
        );
        assert!(message.contains("Read the data again"), "{message}");
    }

    #[test]
    fn target_is_always_serialised_and_rule_only_when_present() {
        let body = ErrorBody {
            errors: ApiError::new(Code::Internal, "x").entries().to_vec(),
        };
        let json = serde_json::to_value(body).unwrap();
        let entry = &json["errors"][0];
        assert!(entry.as_object().unwrap().contains_key("target"));
        assert!(!entry.as_object().unwrap().contains_key("rule"));
        assert!(!entry.as_object().unwrap().contains_key("location"));
    }
}
