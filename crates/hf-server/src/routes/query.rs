//! `POST /data/query`: runs a HOQS query as the caller's database role.
//!
//! The handler compiles the query against the live branch's model (`hf-hoqs`), runs the one
//! statement as the principal's role (`hf-storage`), and writes the records PostgreSQL built
//! as JSON straight into the body, without decoding them. Language problems are 400s with a
//! `location`; privileges and row-level security are PostgreSQL's to decide (403).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Authenticated;
use crate::error::{ApiError, Code, ErrorBody, ErrorEntry, Location, Scope};
use crate::extract::JsonBody;
use crate::state::AppState;

/// The longest query text accepted, in bytes (8 KiB: far above any hand-written query, small
/// enough that parsing and checking stay cheap).
pub const MAX_QUERY_BYTES: usize = 8 * 1024;

/// `POST /data/query` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    /// The HOQS query (at most 8 KiB), e.g. `SELECT name FROM crm.account WHERE industry = :i`.
    pub query: String,
    /// The values of the query's `:name` parameters, kept as sent so numbers keep every digit.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub params: Option<hf_hoqs::RequestParams>,
    /// The IANA time zone (`Europe/Paris`) date literals, `TODAY()` and the date functions of
    /// datetimes are evaluated in; default `UTC`.
    #[serde(default, rename = "timeZone")]
    pub time_zone: Option<String>,
    /// Keyset paging: `null` for the first page, then the previous answer's `nextCursor`;
    /// absent for an unpaged query.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    pub cursor: Option<Option<String>>,
    /// `true` (administrators only): answer the SQL and PostgreSQL's plan, running nothing.
    #[serde(default)]
    pub explain: bool,
}

/// Tells a property sent as `null` (`Some(None)`) from an absent one (`None`, the default).
fn present<'de, D>(deserializer: D) -> Result<Option<Option<String>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Option::<String>::deserialize(deserializer).map(Some)
}

/// `POST /data/query` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryResponse {
    /// One object per record, keyed by the select items' paths as written or their aliases.
    #[schema(value_type = Vec<Object>)]
    pub records: Vec<Value>,
    /// With `cursor` in the request: the cursor of the next page, `null` on the last one.
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Option<String>>,
}

/// Runs a HOQS query (docs/hoqs.md) as the caller.
#[utoipa::path(
    tag = "data",
    request_body = QueryRequest,
    responses(
        (status = 200, body = QueryResponse),
        (status = 400, description = "HOQS_SYNTAX_ERROR, HOQS_UNKNOWN_NAME, HOQS_TYPE_ERROR, HOQS_LIMIT_TOO_LARGE (each with its `location`), HOQS_EVALUATION_ERROR, INVALID_CURSOR, MALFORMED_JSON or INVALID_BODY (an unknown `timeZone` among others)", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the caller's database role may not read a table of the query, or `explain` from a non-administrator", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: a query over 8 KiB or a body over the limit", body = ErrorBody),
        (status = 504, description = "TIMEOUT: the query ran longer than 5 seconds", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/data/query")]
pub async fn query(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    JsonBody(body): JsonBody<QueryRequest>,
) -> Result<HttpResponse, ApiError> {
    if body.query.len() > MAX_QUERY_BYTES {
        return Err(ApiError::field(
            Code::PayloadTooLarge,
            format!(
                "The query is {} bytes long; the limit is {MAX_QUERY_BYTES} bytes.",
                body.query.len()
            ),
            "query",
        ));
    }
    let store = state.store().clone();
    let snapshot = tokio::task::spawn_blocking(move || store.live())
        .await
        .map_err(|error| {
            tracing::error!(%error, "reading the live metadata failed");
            ApiError::internal()
        })??;
    if body.explain && !principal.is_admin {
        return Err(ApiError::new(
            Code::Forbidden,
            "Only administrators may explain queries.",
        ));
    }
    let time_zone = time_zone(body.time_zone.as_deref())?;
    let params = body.params.unwrap_or_default();
    let binding = hf_hoqs::paging::Binding::new(&body.query, &params, time_zone);
    let after = match &body.cursor {
        Some(Some(cursor)) => Some(binding.decode(cursor).ok_or_else(invalid_cursor)?),
        _ => None,
    };
    let page = body.cursor.as_ref().map(|_| after.as_deref());
    let caller = hf_hoqs::Caller {
        id: principal.id.to_string(),
        name: principal.name.clone(),
    };
    let options = hf_hoqs::QueryOptions {
        params: &params,
        time_zone: Some(time_zone),
        caller: Some(&caller),
        page,
    };
    let output =
        hf_hoqs::compile_query_with(&snapshot.model, &body.query, options).map_err(|error| {
            match error {
                hf_hoqs::Error::InvalidCursor => invalid_cursor(),
                error => {
                    tracing::error!(%error, "the live metadata cannot be compiled to SQL");
                    ApiError::internal()
                }
            }
        })?;
    let Some(compiled) = output.query else {
        return Err(hoqs_errors(&body.query, &output.diagnostics));
    };
    if body.explain {
        let plan = hf_storage::query::explain(state.pool(), &principal.name, &compiled)
            .await
            .map_err(storage_error)?;
        return Ok(HttpResponse::Ok().json(serde_json::json!({"sql": compiled.sql, "plan": plan})));
    }
    if compiled.page_size.is_some() {
        let (records, last) =
            hf_storage::query::query_page(state.pool(), &principal.name, &compiled)
                .await
                .map_err(storage_error)?;
        let next = last.map(|keys| binding.encode(&keys));
        let records = hf_storage::query::records_body(&records);
        // `{"records":[...]}` gets its `nextCursor` before the closing brace.
        let mut text = records[..records.len() - 1].to_owned();
        text.push_str(",\"nextCursor\":");
        text.push_str(&Value::from(next).to_string());
        text.push('}');
        return Ok(HttpResponse::Ok()
            .content_type("application/json")
            .body(text));
    }
    let records = hf_storage::query::query_records(state.pool(), &principal.name, &compiled)
        .await
        .map_err(storage_error)?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(hf_storage::query::records_body(&records)))
}

/// A cursor this query did not give: another query's, truncated, edited or built by hand.
fn invalid_cursor() -> ApiError {
    ApiError::field(
        Code::InvalidCursor,
        "The cursor was not given by this query (same text, parameters and time zone); start again with `\"cursor\": null`.",
        "cursor",
    )
}

/// The canonical name of the request's time zone (`UTC` when absent); a name the IANA time
/// zone database does not know is a 400 `INVALID_BODY` at `timeZone`.
fn time_zone(name: Option<&str>) -> Result<&'static str, ApiError> {
    let Some(name) = name else {
        return Ok("UTC");
    };
    match name.parse::<chrono_tz::Tz>() {
        Ok(zone) => Ok(zone.name()),
        Err(_) => Err(ApiError::field(
            Code::InvalidBody,
            format!(
                "`{}` is not an IANA time zone name such as `UTC` or `Europe/Paris`.",
                name.chars().take(64).collect::<String>()
            ),
            "timeZone",
        )),
    }
}

/// Every diagnostic of a query as an entry with its location; all are 400s.
pub fn hoqs_errors(source: &str, diagnostics: &[hf_hoqs::Diagnostic]) -> ApiError {
    let entries = diagnostics
        .iter()
        .map(|diagnostic| {
            let location = diagnostic.location(source);
            ErrorEntry {
                code: diagnostic_code(diagnostic.code).as_str(),
                message: diagnostic.message.clone(),
                scope: Scope::Request,
                target: None,
                rule: None,
                location: Some(Location {
                    line: u32::try_from(location.line).unwrap_or(u32::MAX),
                    column: u32::try_from(location.column).unwrap_or(u32::MAX),
                    frame: location.frame,
                }),
            }
        })
        .collect();
    ApiError::from_entries(StatusCode::BAD_REQUEST, entries)
}

/// The envelope code of a query-language diagnostic.
fn diagnostic_code(code: hf_hoqs::Code) -> Code {
    match code {
        hf_hoqs::Code::UnknownName => Code::HoqsUnknownName,
        hf_hoqs::Code::TypeError => Code::HoqsTypeError,
        hf_hoqs::Code::LimitTooLarge => Code::HoqsLimitTooLarge,
        _ => Code::HoqsSyntaxError,
    }
}

/// A failure while running: a value PostgreSQL refuses while computing (an overflow, a date
/// out of range) is the query's fault (400); the rest is mapped as for every route.
fn storage_error(error: hf_storage::Error) -> ApiError {
    if error.kind() == hf_storage::ErrorKind::InvalidValue {
        let detail = match &error {
            hf_storage::Error::Db(db) => db
                .as_db_error()
                .map(|db| db.message().to_owned())
                .unwrap_or_default(),
            _ => String::new(),
        };
        return ApiError::new(
            Code::HoqsEvaluationError,
            format!("The query could not be evaluated on the data: {detail}."),
        );
    }
    error.into()
}
