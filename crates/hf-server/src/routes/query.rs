//! `POST /data/query`: runs a HOQS query as the caller's database role.
//!
//! The handler hands the query to the use case (`hf_app::query`: compiled against the live
//! branch's model, run as the principal's role) and writes the records PostgreSQL built as JSON
//! straight into the body, without decoding them. Language problems are 400s with a
//! `location`; privileges and row-level security are PostgreSQL's to decide (403).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Authenticated;
use hf_app::{QueryAnswer, QueryInput};

use crate::error::{ApiError, Code, ErrorBody, ErrorEntry, Location, Scope};
use crate::extract::JsonBody;
use crate::state::AppState;

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
    let params = body.params.unwrap_or_default();
    let input = QueryInput {
        query: &body.query,
        params: &params,
        time_zone: body.time_zone.as_deref(),
        cursor: body.cursor.as_ref().map(Option::as_deref),
        explain: body.explain,
    };
    Ok(match state.app.query(&principal, input).await? {
        QueryAnswer::Explain { sql, plan } => {
            HttpResponse::Ok().json(serde_json::json!({"sql": sql, "plan": plan}))
        }
        QueryAnswer::Page {
            records,
            next_cursor,
        } => {
            let records = hf_storage::query::records_body(&records);
            // `{"records":[...]}` gets its `nextCursor` before the closing brace.
            let mut text = records[..records.len() - 1].to_owned();
            text.push_str(",\"nextCursor\":");
            text.push_str(&Value::from(next_cursor).to_string());
            text.push('}');
            HttpResponse::Ok()
                .content_type("application/json")
                .body(text)
        }
        QueryAnswer::Records { records, .. } => HttpResponse::Ok()
            .content_type("application/json")
            .body(hf_storage::query::records_body(&records)),
    })
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
