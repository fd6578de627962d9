//! The record routes of the `data` group: create, read, update (`PATCH`), delete, and upsert by
//! a unique field (`PUT`). `POST /data/query` lives in `query.rs`.
//!
//! Handlers are thin: they read the live metadata snapshot (shared, never copied), the body
//! and the `If-Match` header, call one `hf_storage::records` function as the caller's database
//! role, and write the record PostgreSQL built straight into the response with its `ETag`.
//! Every problem of a write comes back in one envelope (`error::record_errors`).

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{delete, get, patch, post, put, web, HttpRequest, HttpResponse};
use hf_storage::records::{Body, BodyError, IdempotencyKey, ObjectRef, Outcome, Record};

use crate::auth::Authenticated;
use crate::error::{record_errors, ApiError, Code, ErrorBody, Location};
use crate::state::AppState;

/// The request header that names a create, so that it can be sent again safely.
pub const IDEMPOTENCY_KEY: header::HeaderName = header::HeaderName::from_static("idempotency-key");

/// The response header of a create answered with the record an earlier request with the same
/// idempotency key made.
pub const IDEMPOTENT_REPLAYED: header::HeaderName =
    header::HeaderName::from_static("idempotent-replayed");

/// The record routes' path: `/data/{moduleKey}/{objectKey}/{idOrFieldKey}`.
type RecordPath = web::Path<(String, String, String)>;

/// Creates a record of an object from its field values.
#[utoipa::path(
    tag = "data",
    params(("moduleKey" = String, Path), ("objectKey" = String, Path),
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = "^[!-~]+$", description = "Makes the create safe to send again (after a lost answer or `COMMIT_OUTCOME_UNKNOWN`): 1 to 255 printable ASCII characters without spaces, new for each record (a UUID, say). A create the caller already made with this key and the same object and values within 24 hours is answered with that record as it is now (201, `Idempotent-Replayed: true`) and creates nothing; the same key with another request is refused 422 `IDEMPOTENCY_KEY_REUSED`. A repeat sent while the first is still under way waits for it.")),
    request_body(content = Object, description = "Field values by field key. Lookups take the target record's id; decimals a string (`\"12.50\"`) or a number a double represents exactly; datetimes RFC 3339 with a zone; `id`, `createdAt`, `updatedAt`, formula and rollup fields are read-only."),
    responses(
        (status = 201, description = "The record as stored, with its `ETag`; with `Idempotent-Replayed: true` when an earlier create with the same `Idempotency-Key` made it.", body = Object,
            headers(("Idempotent-Replayed" = String, description = "`true` when the record was made by an earlier request with the same `Idempotency-Key`."))),
        (status = 400, description = "MALFORMED_JSON, INVALID_BODY (not an object, a property twice), INVALID_KEY, INVALID_IDEMPOTENCY_KEY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the caller's database role may not insert the record, or may not read the record it inserted (grants, row-level security)", body = ErrorBody),
        (status = 404, description = "MODULE_NOT_FOUND, OBJECT_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "UNIQUE_VIOLATION", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE", body = ErrorBody),
        (status = 422, description = "Every problem at once: REQUIRED, INVALID_VALUE, READ_ONLY_FIELD, UNKNOWN_FIELD, INVALID_REFERENCE, RULE_FAILED (with `rule`); ABSTRACT_OBJECT; IDEMPOTENCY_KEY_REUSED", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/data/{moduleKey}/{objectKey}")]
pub async fn create_record(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    bytes: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (module, object) = path.into_inner();
    let key = idempotency_key(&req)?;
    let body = record_body(&req, &bytes)?;
    let outcome = state
        .app
        .create_record(
            &principal,
            object_ref(&module, &object),
            &body,
            key.as_ref(),
        )
        .await?;
    match outcome {
        Outcome::Done(created) => {
            let mut response = record_response(created.record, StatusCode::CREATED);
            if created.replayed {
                response
                    .headers_mut()
                    .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
            }
            Ok(response)
        }
        Outcome::Rejected(problems) => Err(record_errors(problems)),
    }
}

/// The create's `Idempotency-Key`, if it sent one.
fn idempotency_key(req: &HttpRequest) -> Result<Option<IdempotencyKey>, ApiError> {
    let mut values = req.headers().get_all(IDEMPOTENCY_KEY);
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let text = match (value.to_str(), values.next()) {
        (Ok(text), None) => text,
        // Not ASCII, or the header twice: no key of the grammar.
        _ => "",
    };
    IdempotencyKey::parse(text)
        .map(Some)
        .map_err(|problem| record_errors(vec![problem]))
}

/// Reads a record by id. A parent object's records include its subtypes'.
#[utoipa::path(
    tag = "data",
    params(("moduleKey" = String, Path), ("objectKey" = String, Path), ("idOrFieldKey" = String, Path, description = "The record id (a uuid).")),
    responses(
        (status = 200, description = "The record, with its `ETag` (its `updatedAt`).", body = Object),
        (status = 304, description = "`If-None-Match` names the current version."),
        (status = 400, description = "INVALID_PATH (the id is not a uuid), INVALID_KEY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the caller's database role may not read the table", body = ErrorBody),
        (status = 404, description = "RECORD_NOT_FOUND (also for records a row-level security policy hides), MODULE_NOT_FOUND, OBJECT_NOT_FOUND", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/data/{moduleKey}/{objectKey}/{idOrFieldKey}")]
pub async fn read_record(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    path: RecordPath,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (module, object, id) = path.into_inner();
    match state
        .app
        .read_record(&principal, object_ref(&module, &object), &id)
        .await?
    {
        Outcome::Done(record) if none_match(&req, &record) => {
            let mut response = HttpResponse::NotModified();
            response.insert_header((header::ETAG, etag(&record)));
            Ok(response.finish())
        }
        outcome => respond(outcome, StatusCode::OK),
    }
}

/// Changes the fields the body gives of a record (the others keep their values). Repeating
/// the current values of read-only fields (a record as read) is allowed; an update that
/// changes nothing stores nothing and keeps `updatedAt`.
#[utoipa::path(
    tag = "data",
    params(("moduleKey" = String, Path), ("objectKey" = String, Path), ("idOrFieldKey" = String, Path, description = "The record id (a uuid)."),
        ("If-Match" = Option<String>, Header, description = "Only update this version (an `ETag` of the record).")),
    request_body(content = Object, description = "The field values to change."),
    responses(
        (status = 200, description = "The record as stored, with its `ETag`.", body = Object),
        (status = 400, description = "MALFORMED_JSON, INVALID_BODY, INVALID_PATH, INVALID_KEY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "RECORD_NOT_FOUND, MODULE_NOT_FOUND, OBJECT_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "UNIQUE_VIOLATION", body = ErrorBody),
        (status = 412, description = "PRECONDITION_FAILED: the record changed since the version in `If-Match`", body = ErrorBody),
        (status = 422, description = "Every problem at once: REQUIRED, INVALID_VALUE, READ_ONLY_FIELD, UNKNOWN_FIELD, INVALID_REFERENCE, RULE_FAILED; ABSTRACT_OBJECT", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[patch("/data/{moduleKey}/{objectKey}/{idOrFieldKey}")]
pub async fn update_record(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    path: RecordPath,
    req: HttpRequest,
    bytes: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (module, object, id) = path.into_inner();
    let body = record_body(&req, &bytes)?;
    let if_match = if_match(&req);
    let outcome = state
        .app
        .update_record(
            &principal,
            object_ref(&module, &object),
            &id,
            &body,
            if_match.as_deref(),
        )
        .await?;
    respond(outcome, StatusCode::OK)
}

/// Creates or updates the record whose unique field `{idOrFieldKey}` has the value the body
/// gives: an existing record is updated with the fields given, otherwise one is created.
#[utoipa::path(
    tag = "data",
    params(("moduleKey" = String, Path), ("objectKey" = String, Path), ("idOrFieldKey" = String, Path, description = "The key of a field with a unique constraint."),
        ("If-Match" = Option<String>, Header, description = "Only update this version; a missing record then fails.")),
    request_body(content = Object, description = "Field values, including the unique field's."),
    responses(
        (status = 200, description = "An existing record, updated, with its `ETag`.", body = Object),
        (status = 201, description = "A new record, with its `ETag`.", body = Object),
        (status = 400, description = "NOT_UNIQUE_FIELD, MALFORMED_JSON, INVALID_BODY, INVALID_KEY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "FIELD_NOT_FOUND, MODULE_NOT_FOUND, OBJECT_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "UNIQUE_VIOLATION (another unique field)", body = ErrorBody),
        (status = 412, description = "PRECONDITION_FAILED", body = ErrorBody),
        (status = 422, description = "Every problem at once (as for create and update); ABSTRACT_OBJECT", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[put("/data/{moduleKey}/{objectKey}/{idOrFieldKey}")]
pub async fn upsert_record(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    path: RecordPath,
    req: HttpRequest,
    bytes: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let (module, object, field) = path.into_inner();
    let body = record_body(&req, &bytes)?;
    let if_match = if_match(&req);
    let outcome = state
        .app
        .upsert_record(
            &principal,
            object_ref(&module, &object),
            &field,
            &body,
            if_match.as_deref(),
        )
        .await?;
    match outcome {
        Outcome::Done(upserted) => {
            let status = if upserted.created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(record_response(upserted.record, status))
        }
        Outcome::Rejected(problems) => Err(record_errors(problems)),
    }
}

/// Deletes a record.
#[utoipa::path(
    tag = "data",
    params(("moduleKey" = String, Path), ("objectKey" = String, Path), ("idOrFieldKey" = String, Path, description = "The record id (a uuid)."),
        ("If-Match" = Option<String>, Header, description = "Only delete this version.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 400, description = "INVALID_PATH, INVALID_KEY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN", body = ErrorBody),
        (status = 404, description = "RECORD_NOT_FOUND, MODULE_NOT_FOUND, OBJECT_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "IN_USE: other records still look this one up", body = ErrorBody),
        (status = 412, description = "PRECONDITION_FAILED", body = ErrorBody),
        (status = 422, description = "ABSTRACT_OBJECT", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[delete("/data/{moduleKey}/{objectKey}/{idOrFieldKey}")]
pub async fn delete_record(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    path: RecordPath,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let (module, object, id) = path.into_inner();
    let if_match = if_match(&req);
    match state
        .app
        .delete_record(
            &principal,
            object_ref(&module, &object),
            &id,
            if_match.as_deref(),
        )
        .await?
    {
        Outcome::Done(()) => Ok(HttpResponse::NoContent().finish()),
        Outcome::Rejected(problems) => Err(record_errors(problems)),
    }
}

fn object_ref<'a>(module: &'a str, object: &'a str) -> ObjectRef<'a> {
    ObjectRef { module, object }
}

fn respond(outcome: Outcome<Record>, status: StatusCode) -> Result<HttpResponse, ApiError> {
    match outcome {
        Outcome::Done(record) => Ok(record_response(record, status)),
        Outcome::Rejected(problems) => Err(record_errors(problems)),
    }
}

/// The record's JSON, as PostgreSQL built it, with its `ETag`.
fn record_response(record: Record, status: StatusCode) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("application/json")
        .insert_header((header::ETAG, etag(&record)))
        .body(record.json)
}

/// The strong `ETag` of a record: its version in quotes.
fn etag(record: &Record) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{}\"", record.version))
        .unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

/// The versions `If-Match` accepts: `None` without the header or with `*` (any version); weak
/// tags never match (RFC 9110 compares `If-Match` strongly), so they are left out.
fn if_match(req: &HttpRequest) -> Option<Vec<String>> {
    let values: Vec<&str> = req
        .headers()
        .get_all(header::IF_MATCH)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .filter(|tag| !tag.is_empty())
        .collect();
    if values.is_empty() && !req.headers().contains_key(header::IF_MATCH) {
        return None;
    }
    if values.contains(&"*") {
        return None;
    }
    Some(
        values
            .iter()
            .filter_map(|tag| tag.strip_prefix('"')?.strip_suffix('"'))
            .map(str::to_owned)
            .collect(),
    )
}

/// Whether `If-None-Match` names the record's current version (compared weakly).
fn none_match(req: &HttpRequest, record: &Record) -> bool {
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| {
            tag == "*"
                || tag.strip_prefix('"').and_then(|t| t.strip_suffix('"')) == Some(&record.version)
        })
}

/// Reads a record body: JSON (415 otherwise), one object (400 `INVALID_BODY`), each property
/// once. Its size is bounded by the application's payload limit (413).
fn record_body(req: &HttpRequest, bytes: &[u8]) -> Result<Body, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            Code::MalformedJson,
            "The request body is empty; send a JSON object of field values.",
        ));
    }
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"));
    if !json {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            format!(
                "The request body must be sent as application/json, not `{}`.",
                content_type.chars().take(100).collect::<String>()
            ),
        ));
    }
    Body::parse(bytes).map_err(|error| match error {
        BodyError::Malformed {
            ref message,
            line,
            column,
        } => {
            let api = ApiError::new(
                Code::MalformedJson,
                format!("The request body is not valid JSON: {message}."),
            );
            match location(bytes, line, column) {
                Some(location) => api.with_location(location),
                None => api,
            }
        }
        BodyError::NotAnObject => ApiError::new(
            Code::InvalidBody,
            "The request body must be a JSON object of field values.",
        ),
        BodyError::DuplicateKey { key } => ApiError::field(
            Code::InvalidBody,
            format!("The property `{key}` appears more than once."),
            key,
        ),
    })
}

/// Where in the body a JSON syntax error is (column in UTF-16 code units).
fn location(bytes: &[u8], line: usize, column: usize) -> Option<Location> {
    if line == 0 {
        return None;
    }
    let text = String::from_utf8_lossy(bytes);
    let source = text.lines().nth(line - 1).unwrap_or("");
    let prefix: String = source.chars().take(column.saturating_sub(1)).collect();
    Some(Location {
        line: u32::try_from(line).unwrap_or(u32::MAX),
        column: u32::try_from(prefix.encode_utf16().count() + 1).unwrap_or(u32::MAX),
        frame: source.chars().take(200).collect(),
    })
}
