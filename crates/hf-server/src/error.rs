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
    DatabaseUnavailable = "DATABASE_UNAVAILABLE" => SERVICE_UNAVAILABLE,
    Timeout = "TIMEOUT" => GATEWAY_TIMEOUT,
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
    pub target: Option<String>,
    /// The failing rule's key, only with `RULE_FAILED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Where in a source text the problem is, only for language errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
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

    /// A single error with an explicit scope and target.
    pub fn entry(
        code: Code,
        message: impl Into<String>,
        scope: Scope,
        target: Option<String>,
    ) -> Self {
        Self {
            status: code.status(),
            entries: vec![ErrorEntry {
                code: code.as_str(),
                message: message.into(),
                scope,
                target,
                rule: None,
                location: None,
            }],
            retry_after: None,
            request_id: None,
        }
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
        match error.kind() {
            ErrorKind::Unavailable => {
                tracing::warn!(%error, "database unavailable");
                ApiError::new(
                    Code::DatabaseUnavailable,
                    "The database is unavailable; try again shortly.",
                )
                .with_retry_after(1)
            }
            ErrorKind::Timeout => {
                ApiError::new(Code::Timeout, "The database did not answer in time.")
            }
            ErrorKind::Forbidden => ApiError::new(
                Code::Forbidden,
                "Your database role lacks the privilege this request needs.",
            ),
            _ => {
                tracing::error!(%error, "database error");
                ApiError::internal()
            }
        }
    }
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
