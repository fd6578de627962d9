//! Request extractors whose every failure is an error envelope.
//!
//! actix-web's own `Json` cannot name the property a shape error concerns and answers some
//! failures in plain text, so bodies are read here: content type first (415), then size (413),
//! then syntax (400 `MALFORMED_JSON`), then shape with the property path (400 `INVALID_BODY`).
//!
//! A property named twice in one object is a syntax error here (400 `MALFORMED_JSON`), although
//! serde_json accepts it and keeps the last value: `{"username":"nobody","username":"admin"}`
//! would be judged as `admin` by us and possibly as `nobody` by a proxy or a log reader in front
//! of us. The check is a `Deserialize` of our own ([`UniqueKeys`]) that builds the same
//! `serde_json::Value` the shape check needs and refuses a key its object already holds. It runs
//! inside the one parse every body gets anyway, so it costs no second pass over the bytes, and
//! serde_json reports its error with a line and column like any other syntax error; a streaming
//! pre-check would have re-tokenised every body for the same answer.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::StreamExt;
use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{ApiError, Code, Location};
use crate::objects_only::ObjectsOnly;

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

/// The largest JavaScript body [`JavaScriptBody`] accepts: 2 MiB.
pub const MAX_JAVASCRIPT_BYTES: usize = 2 * 1024 * 1024;

/// A JavaScript request body (`content-type: text/javascript`, UTF-8, at most
/// [`MAX_JAVASCRIPT_BYTES`]): a vendored module's text.
#[derive(Debug)]
pub struct JavaScriptBody(pub String);

impl FromRequest for JavaScriptBody {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let payload = payload.take();
        Box::pin(async move {
            let content_type = req
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or("");
            let essence = content_type.split(';').next().unwrap_or("").trim();
            if !essence.eq_ignore_ascii_case("text/javascript") {
                return Err(ApiError::new(
                    Code::UnsupportedMediaType,
                    format!(
                        "The request body must be sent as text/javascript, not `{}`.",
                        truncate(content_type, 100)
                    ),
                ));
            }
            let bytes = read_body_within(&req, payload, MAX_JAVASCRIPT_BYTES).await?;
            String::from_utf8(bytes.to_vec())
                .map(JavaScriptBody)
                .map_err(|_| ApiError::new(Code::InvalidBody, "The JavaScript is not UTF-8."))
        })
    }
}

async fn read_body(req: &HttpRequest, payload: Payload) -> Result<web::BytesMut, ApiError> {
    let limit = req
        .app_data::<BodyLimit>()
        .map_or(DEFAULT_BODY_LIMIT, |limit| limit.0);
    read_body_within(req, payload, limit).await
}

/// Reads the whole body, refusing it with 413 `PAYLOAD_TOO_LARGE` past `limit` bytes (from its
/// declared length when there is one, so a large body is refused before it is read).
async fn read_body_within(
    req: &HttpRequest,
    mut payload: Payload,
    limit: usize,
) -> Result<web::BytesMut, ApiError> {
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
            if crate::limits::is_timeout(&error) {
                return crate::limits::body_timeout(req.app_data());
            }
            let message = match error {
                PayloadError::Incomplete(_) => {
                    "The request body ended before it was complete.".to_owned()
                }
                other => format!("The request body could not be read: {other}"),
            };
            ApiError::new(Code::BadRequest, message)
        })?;
        if body.len() + chunk.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Parsed once as a whole for its nesting limit (128 levels), located syntax errors and
    // properties named twice; the value itself is not needed.
    let UniqueKeys(_) = serde_json::from_slice(bytes).map_err(|error| {
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
    // Structs are read from objects only (see `objects_only`).
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(ObjectsOnly(&mut deserializer)).map_err(|error| {
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

/// A JSON value, parsed like `serde_json::Value` except that an object naming a property twice
/// is refused (see the module comment for why).
struct UniqueKeys(serde_json::Value);

impl<'de> de::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(UniqueKeysVisitor)
            .map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> Visitor<'de> for UniqueKeysVisitor {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(value.into())
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(value.into())
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        // JSON has no NaN or infinity, so the conversion only fails on input serde_json refused.
        serde_json::Number::from_f64(value)
            .map(serde_json::Value::Number)
            .ok_or_else(|| E::custom("a number out of range"))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
        Ok(serde_json::Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(serde_json::Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "the property `{}` appears more than once",
                    truncate(&key, 100)
                )));
            }
            let UniqueKeys(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }
}

/// Deserialises an already parsed body, naming the property a shape error concerns.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(ObjectsOnly(value))
        .map_err(|error| shape_error(&error.path().to_string(), &error.inner().to_string()))
}

/// A shape error (`INVALID_BODY`) at a property path, naming the property it concerns.
fn shape_error(path: &str, inner: &str) -> ApiError {
    let target = property_target(path, inner);
    let message = format!("The request body has the wrong shape: {inner}.");
    if target.is_empty() {
        // The body as a whole (an array where an object belongs): no property to name.
        return ApiError::new(Code::InvalidBody, message);
    }
    ApiError::field(Code::InvalidBody, message, target)
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
    use super::{parse, property_target};

    #[test]
    fn refuses_a_property_named_twice_at_any_depth() {
        for body in [
            r#"{"username":"nobody","username":"admin"}"#,
            r#"{"a":{"b":1,"b":1}}"#,
            r#"[{"x":null},{"x":1,"x":1}]"#,
        ] {
            let error = parse::<serde_json::Value>(body.as_bytes()).unwrap_err();
            let entry = &error.entries()[0];
            assert_eq!(entry.code, "MALFORMED_JSON", "{body}");
            assert!(
                entry.message.contains("more than once"),
                "{}",
                entry.message
            );
            assert!(entry.location.is_some(), "{body}");
        }
        let same_key_elsewhere = r#"{"a":{"k":1},"b":{"k":2},"k":[1,1.5,-2,true,null,"s"]}"#;
        let value = parse::<serde_json::Value>(same_key_elsewhere.as_bytes()).unwrap();
        assert_eq!(value.to_string(), same_key_elsewhere);
    }

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
