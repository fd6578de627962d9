//! Request extractors whose every failure is an error envelope.
//!
//! actix-web's own `Json` cannot name the property a shape error concerns and answers some
//! failures in plain text, so bodies are read here: content type first (415), then size (413),
//! then syntax (400 `MALFORMED_JSON`), then shape with the property path (400 `INVALID_BODY`).

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, Code, Location};

/// The largest request body accepted, in bytes; set per application from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// The default body limit of the contract: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// A JSON request body deserialised into `T`, with contract errors for every failure.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

/// A JSON request body that may be absent (no body, or an empty one): for routes whose contract
/// says "takes no body (none, or `{}`)".
#[derive(Debug)]
pub struct OptionalJsonBody<T>(pub Option<T>);

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let payload = payload.take();
        Box::pin(async move {
            let bytes = read_body(&req, payload).await?;
            if bytes.is_empty() {
                return Err(ApiError::new(
                    Code::MalformedJson,
                    "The request body is empty; send a JSON object.",
                ));
            }
            check_content_type(&req)?;
            parse(&bytes).map(JsonBody)
        })
    }
}

impl<T: DeserializeOwned + 'static> FromRequest for OptionalJsonBody<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let payload = payload.take();
        Box::pin(async move {
            let bytes = read_body(&req, payload).await?;
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Ok(OptionalJsonBody(None));
            }
            check_content_type(&req)?;
            parse(&bytes).map(|value| OptionalJsonBody(Some(value)))
        })
    }
}

fn check_content_type(req: &HttpRequest) -> Result<(), ApiError> {
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
    if essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
    {
        Ok(())
    } else {
        Err(ApiError::new(
            Code::UnsupportedMediaType,
            format!(
                "The request body must be sent as application/json, not `{}`.",
                truncate(content_type, 100)
            ),
        ))
    }
}

async fn read_body(req: &HttpRequest, mut payload: Payload) -> Result<web::BytesMut, ApiError> {
    let limit = req
        .app_data::<BodyLimit>()
        .map_or(DEFAULT_BODY_LIMIT, |limit| limit.0);
    let too_large = || {
        ApiError::new(
            Code::PayloadTooLarge,
            format!("The request body is larger than {limit} bytes."),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|error| {
            ApiError::new(
                Code::BadRequest,
                format!("The request body could not be read: {error}"),
            )
        })?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Parsed into a `Value` first for its nesting limit (128 levels) and located syntax errors.
    serde_json::from_slice::<serde_json::Value>(bytes).map_err(|error| {
        let mut api = ApiError::new(
            Code::MalformedJson,
            format!("The request body is not valid JSON: {error}."),
        );
        if let Some(location) = json_location(bytes, &error) {
            api = api.with_location(location);
        }
        api
    })?;
    // Valid JSON: deserialise the bytes themselves (every error now concerns the shape), so
    // bodies may keep values as raw JSON text (`RawValue`, exact numbers).
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        // The position serde_json appends to its message is noise for a shape error.
        let position = format!(
            " at line {} column {}",
            error.inner().line(),
            error.inner().column()
        );
        let path = error.path().to_string();
        let inner = error.inner().to_string();
        let inner = inner.strip_suffix(&position).unwrap_or(&inner);
        shape_error(&path, inner)
    })
}

/// Deserialises an already parsed body, naming the property a shape error concerns.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value)
        .map_err(|error| shape_error(&error.path().to_string(), &error.inner().to_string()))
}

/// A shape error (`INVALID_BODY`) at a property path, naming the property it concerns.
fn shape_error(path: &str, inner: &str) -> ApiError {
    let target = property_target(path, inner);
    ApiError::field(
        Code::InvalidBody,
        format!("The request body has the wrong shape: {inner}."),
        target,
    )
}

/// Names the property a shape error concerns. serde reports unknown and missing properties at
/// the enclosing object, so the property named in the message is appended.
fn property_target(path: &str, message: &str) -> String {
    let named = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next());
    match (path, named) {
        // Unknown properties are reported at the property itself, missing ones at their parent.
        (path, Some(field)) if path == field || path.ends_with(&format!(".{field}")) => {
            path.to_owned()
        }
        (".", Some(field)) => field.to_owned(),
        (_, Some(field)) => format!("{path}.{field}"),
        (".", None) => String::new(),
        (_, None) => path.to_owned(),
    }
}

fn json_location(bytes: &[u8], error: &serde_json::Error) -> Option<Location> {
    let line_number = error.line();
    if line_number == 0 {
        return None;
    }
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().nth(line_number - 1).unwrap_or("");
    let prefix: String = line
        .chars()
        .take(error.column().saturating_sub(1))
        .collect();
    let column = prefix.encode_utf16().count() + 1;
    Some(Location {
        line: u32::try_from(line_number).unwrap_or(u32::MAX),
        column: u32::try_from(column).unwrap_or(u32::MAX),
        frame: truncate(line, 200).to_owned(),
    })
}

fn truncate(text: &str, max_chars: usize) -> &str {
    match text.char_indices().nth(max_chars) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

/// Query-string extractor errors become 400 `INVALID_QUERY`.
pub fn query_config() -> web::QueryConfig {
    web::QueryConfig::default().error_handler(|error, _req| {
        ApiError::new(
            Code::InvalidQuery,
            format!("The query string is not valid: {error}."),
        )
        .into()
    })
}

/// Path extractor errors become 400 `INVALID_PATH`.
pub fn path_config() -> web::PathConfig {
    web::PathConfig::default().error_handler(|error, _req| {
        ApiError::new(
            Code::InvalidPath,
            format!("The path is not valid: {error}."),
        )
        .into()
    })
}

/// actix's own JSON extractor is not used, but should one slip in, its errors are envelopes too.
pub fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .error_handler(|error, _req| {
            use actix_web::error::JsonPayloadError;
            match error {
                JsonPayloadError::ContentType => ApiError::new(
                    Code::UnsupportedMediaType,
                    "The request body must be application/json.",
                ),
                JsonPayloadError::Overflow { .. }
                | JsonPayloadError::OverflowKnownLength { .. } => {
                    ApiError::new(Code::PayloadTooLarge, "The request body is too large.")
                }
                other => ApiError::new(
                    Code::MalformedJson,
                    format!("The request body is not valid JSON: {other}."),
                ),
            }
            .into()
        })
}

#[cfg(test)]
mod tests {
    use super::property_target;

    #[test]
    fn names_the_property() {
        assert_eq!(property_target(".", "unknown field `x`, expected `a`"), "x");
        assert_eq!(
            property_target("identity", "missing field `color`"),
            "identity.color"
        );
        assert_eq!(
            property_target(
                "rules.r1.assert",
                "invalid type: integer `1`, expected a string"
            ),
            "rules.r1.assert"
        );
    }
}
