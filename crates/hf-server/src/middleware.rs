//! What every request passes through: a request id, the URL and header limits and the body
//! deadline (`crate::limits`), load shedding of record requests, one log line, panic
//! containment, and the guarantee that every error response carries the envelope.

use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::time::{Duration, Instant};

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use futures_util::FutureExt;

use crate::client_stream::AnswerCount;
use crate::error::{self, ApiError, Code};
use crate::limits::Limits;
use crate::routes::metadata::branch_of_root;

/// The request id header, echoed when the client sends a sensible one.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Refuses a record request or query (`/data/...`) when the data pool's wait is full, and a
/// login (`POST /auth/login`) when as many logins are in progress as the password checks can run
/// and queue, before anything is spent on it (the token check, reading and parsing the body).
/// Under overload a refusal must cost far less than the work it turns away, or refusing eats
/// the capacity it protects; the use cases check again, for callers that come another way. A
/// refused login is answered only after [`login_refusal_wait`].
async fn shed_early(req: &ServiceRequest) -> Result<(), ApiError> {
    let is_data = req.path().starts_with("/data/");
    let is_login = req.path() == "/auth/login" && req.method() == Method::POST;
    if !is_data && !is_login {
        return Ok(());
    }
    let Some(state) = req.app_data::<web::Data<crate::state::AppState>>() else {
        return Ok(());
    };
    if is_login {
        let refused = state.auth.refuse_if_hashing_is_full();
        if refused.is_err() {
            actix_web::rt::time::sleep(login_refusal_wait()).await;
        }
        refused.map_err(Into::into)
    } else {
        hf_app::shed::refuse_if_data_pool_backed_up(state.pool()).map_err(Into::into)
    }
}

/// How long a login refused at the door (every password check place taken) waits before its
/// answer is sent. A flood in a closed loop (each connection sends its next login the moment the
/// last was answered) otherwise turns the service into a refusal machine: about 22,000 refusals
/// a second on two cores, each costing as much CPU as a record read (most of it the kernel's
/// sends and wake-ups), which starves the ordinary requests it is meant to protect. Held on a
/// timer, a refused login costs nothing while it waits, a connection can be refused at most
/// 1 / pace times a second, and the answer still comes well within the 100 ms a refusal may
/// take. Well-behaved clients wait longer anyway: the answer carries `Retry-After`.
///
/// Each refusal waits this long plus a random share of [`LOGIN_REFUSAL_JITTER`]: with one fixed
/// wait, the connections of a flood, which start together, stay in step and arrive in bursts
/// (256 logins at once every 50 ms, a few milliseconds of work that a record read then queues
/// behind).
pub const LOGIN_REFUSAL_PACE: Duration = Duration::from_millis(40);

/// The most a refused login waits beyond [`LOGIN_REFUSAL_PACE`].
pub const LOGIN_REFUSAL_JITTER: Duration = Duration::from_millis(30);

/// The wait of one refused login: the pace plus a random share of the jitter.
fn login_refusal_wait() -> Duration {
    let jitter_micros = LOGIN_REFUSAL_JITTER.as_micros().max(1);
    let random = uuid::Uuid::new_v4().as_u128() % jitter_micros;
    LOGIN_REFUSAL_PACE + Duration::from_micros(u64::try_from(random).unwrap_or(0))
}

/// The middleware function wrapped around the whole application.
pub async fn edge(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let started = Instant::now();
    // Counted for the connection once this request's answer is made, however it ends (a
    // connection whose input is cut waits for its earlier requests' answers).
    let _answering = req
        .conn_data::<Rc<AnswerCount>>()
        .map(AnswerCount::answering);
    let request_id = request_id(&req);
    let method = req.method().clone();
    let path = req.path().to_owned();

    let limits = req.app_data::<Limits>().copied();
    // Refused before anything reads the body: a head over the limits, or work the service would
    // shed anyway.
    let head = limits
        .as_ref()
        .map_or(Ok(()), |limits| crate::limits::check_head(&req, limits));
    let refused = match head {
        Ok(()) => shed_early(&req).await,
        Err(error) => Err(error),
    };
    if let Err(error) = refused {
        log_request(
            &method,
            &path,
            error.status_code().as_u16(),
            started,
            &request_id,
        );
        return Err(error.with_request_id(request_id).into());
    }
    let body_expired = limits
        .as_ref()
        .and_then(|limits| crate::limits::limit_body(&mut req, limits));

    let outcome = AssertUnwindSafe(next.call(req)).catch_unwind().await;
    // Failures that never became a response carry no request to build one from; they go back to
    // actix as an error whose own response is the envelope with the request id.
    let failure = match outcome {
        Ok(Ok(response)) => Ok(response.map_into_boxed_body()),
        Ok(Err(error)) => Err(error::for_status(error.as_response_error().status_code())),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(%request_id, %method, %path, panic = %message, "handler panicked");
            Err(ApiError::internal())
        }
    };
    // A body that missed its deadline is the answer, whatever the extractor made of the broken
    // stream (ours says 408; actix's `Bytes` would say 400).
    let failure = match failure {
        Ok(response) if response.status().is_success() => Ok(response),
        _ if body_expired.as_ref().is_some_and(|expired| expired.get()) => {
            Err(crate::limits::body_timeout(limits.as_ref()))
        }
        other => other,
    };
    let mut response = match failure {
        Ok(response) => response,
        Err(failure) => {
            log_request(
                &method,
                &path,
                failure.status_code().as_u16(),
                started,
                &request_id,
            );
            return Err(failure.with_request_id(request_id).into());
        }
    };

    if let Some(state) = refused_for_storage(&response) {
        state.storage_refusals.refused(Instant::now());
    }
    if needs_envelope(response.response()) {
        let replacement: HttpResponse = error::for_status(response.status()).error_response();
        response = response.into_response(replacement);
    }
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    log_request(
        &method,
        &path,
        response.status().as_u16(),
        started,
        &request_id,
    );
    Ok(response)
}

/// The service's state, when `response` is a 503 `STORAGE_UNAVAILABLE` (a write the database's
/// or the metadata repository's storage could not take): `/status` reports those.
fn refused_for_storage(response: &ServiceResponse<BoxBody>) -> Option<&crate::state::AppState> {
    if response.status() != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let error = response.response().error()?.as_error::<ApiError>()?;
    if !error.has_code(Code::StorageUnavailable) {
        return None;
    }
    response
        .request()
        .app_data::<web::Data<crate::state::AppState>>()
        .map(|state| &***state)
}

/// The one log line per request.
fn log_request(method: &Method, path: &str, status: u16, started: Instant, request_id: &str) {
    tracing::info!(
        %method,
        path,
        status,
        duration_ms = format_args!("{:.3}", started.elapsed().as_secs_f64() * 1000.0),
        request_id,
        "request"
    );
}

/// Echo the client's id if it is short printable ASCII; otherwise make one.
fn request_id(req: &ServiceRequest) -> String {
    req.headers()
        .get(&REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .filter(|value| {
            !value.is_empty() && value.len() <= 128 && value.bytes().all(|b| b.is_ascii_graphic())
        })
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned)
}

/// An error status whose body is not already our JSON envelope (the router's 404/405, the
/// framework's own failures).
fn needs_envelope(response: &HttpResponse<BoxBody>) -> bool {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return false;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    !is_json
}

/// Answers paths no route matched: 400 `INVALID_BRANCH` for a first segment that tries to name a
/// metadata branch and fails, 404 `ROUTE_NOT_FOUND` otherwise.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let allowed = req
        .app_data::<web::Data<RouteTable>>()
        .map(|table| table.methods_for(req.path()))
        .unwrap_or_default();
    if allowed.is_empty() {
        return not_found_error(&req).error_response();
    }
    let refused = if is_live_metadata_write(&req) {
        ApiError::new(
            Code::MethodNotAllowed,
            "The live branch's metadata path takes reads only; metadata writes name their \
             branch: send this to /metadata@<branchId>/… (`GET /branches` says which is live).",
        )
    } else {
        error::for_status(StatusCode::METHOD_NOT_ALLOWED)
    };
    let mut response = refused.error_response();
    if let Ok(value) = HeaderValue::from_str(&allowed.join(", ")) {
        response.headers_mut().insert(header::ALLOW, value);
    }
    response
}

/// Whether a path's segments fit a template's. A trailing `{path}` (a vendored file's path)
/// takes one segment or more, as its route does (`{path:.*}`).
fn template_matches(template: &[String], segments: &[&str]) -> bool {
    let absorbs_rest = template.last().is_some_and(|last| last == "{path}");
    let fits_length = if absorbs_rest {
        segments.len() >= template.len()
    } else {
        segments.len() == template.len()
    };
    let (head, tail) = segments.split_at(template.len().min(segments.len()));
    fits_length
        && template
            .iter()
            .zip(head)
            .all(|(t, s)| segment_matches(t, s))
        && tail.iter().all(|s| !s.is_empty())
}

/// A write (`POST`, `PUT`, `PATCH`, `DELETE`) under `/metadata/…`, the live branch's read path.
fn is_live_metadata_write(req: &HttpRequest) -> bool {
    let is_write = matches!(
        *req.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    is_write && req.path().starts_with("/metadata/")
}

/// Whether one path segment fits one template segment. The document's `metadata@{branch}`
/// fits only a valid branch id, as the `metadata_root` guard of the served routes admits.
fn segment_matches(template: &str, segment: &str) -> bool {
    match template {
        "metadata@{branch}" => branch_of_root(segment).is_some(),
        t if t.starts_with('{') => !segment.is_empty(),
        t => t == segment,
    }
}

/// The documented routes as (method, path template) pairs, so the fallback handler can tell a
/// wrong method (405 with `Allow`) from a wrong path (404).
#[derive(Debug, Default)]
pub struct RouteTable {
    routes: Vec<(String, Vec<String>)>,
}

impl RouteTable {
    /// Builds the table from the OpenAPI document, the single list of what is served.
    pub fn from_openapi(doc: &serde_json::Value) -> Self {
        let mut routes = Vec::new();
        let paths = doc["paths"].as_object().into_iter().flatten();
        for (path, item) in paths {
            let segments: Vec<String> = path.split('/').map(str::to_owned).collect();
            for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
                if item.get(method.to_ascii_lowercase()).is_some() {
                    routes.push((method.to_owned(), segments.clone()));
                }
            }
        }
        Self { routes }
    }

    /// The methods served at a concrete path, sorted. Where templates overlap, the one with a
    /// literal segment where the other has a parameter (earliest first) is the path's, as in the
    /// router: `/metadata@main/fields` is the list of fields, not a module named `fields`.
    pub fn methods_for(&self, path: &str) -> Vec<String> {
        let segments: Vec<&str> = path.split('/').collect();
        let matching: Vec<&(String, Vec<String>)> = self
            .routes
            .iter()
            .filter(|(_, template)| template_matches(template, &segments))
            .collect();
        let literals = |template: &[String]| -> Vec<bool> {
            template.iter().map(|t| !t.starts_with('{')).collect()
        };
        let most_literal = matching.iter().map(|(_, t)| literals(t)).max();
        let mut methods: Vec<String> = matching
            .iter()
            .filter(|(_, template)| Some(literals(template)) == most_literal)
            .map(|(method, _)| method.clone())
            .collect();
        methods.sort();
        methods.dedup();
        methods
    }
}

fn not_found_error(req: &HttpRequest) -> ApiError {
    let first_segment = req
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    let decoded = percent_decode(first_segment);
    let valid_root = branch_of_root(&decoded).is_some();
    if decoded.contains('@') && !valid_root {
        return ApiError::new(
            Code::InvalidBranch,
            format!(
                "`{}` is not a valid branch root; write metadata@<branch>, where the branch id \
                 matches ^[A-Za-z0-9][A-Za-z0-9._-]{{0,62}}$.",
                decoded.chars().take(100).collect::<String>()
            ),
        );
    }
    error::for_status(StatusCode::NOT_FOUND)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let decoded = (bytes[index] == b'%')
            .then(|| bytes.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match decoded {
            Some(byte) => {
                out.push(byte);
                index += 3;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use actix_web::test as actix_test;
    use actix_web::{web, App, HttpResponse};

    async fn panics() -> HttpResponse {
        panic!("secret internals: password=hunter2");
    }

    #[actix_web::test]
    async fn a_panicking_handler_answers_the_500_envelope_without_internals() {
        let app = actix_test::init_service(
            App::new()
                .route("/boom", web::get().to(panics))
                .wrap(actix_web::middleware::from_fn(super::edge)),
        )
        .await;
        let response = actix_test::try_call_service(
            &app,
            actix_test::TestRequest::get().uri("/boom").to_request(),
        )
        .await;
        let response = match response {
            Ok(response) => response.into_parts().1,
            Err(error) => error.error_response(),
        };
        assert_eq!(response.status(), 500);
        assert!(response.headers().contains_key("x-request-id"));
        let body = actix_web::body::to_bytes(response.into_body())
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("\"INTERNAL\""), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn route_table_tells_wrong_methods_from_wrong_paths() {
        let doc = crate::app::openapi();
        let table = super::RouteTable::from_openapi(&doc);
        assert_eq!(table.methods_for("/health"), ["GET"]);
        assert_eq!(table.methods_for("/metadata/crm"), ["GET"]);
        assert_eq!(
            table.methods_for("/metadata@main/crm"),
            ["DELETE", "GET", "POST", "PUT"]
        );
        assert!(table.methods_for("/metadata@a..b/crm").is_empty());
        assert!(table.methods_for("/nothing").is_empty());
        // A literal segment outranks a parameter: these are lists, not modules.
        assert_eq!(table.methods_for("/metadata@main/fields"), ["GET"]);
        assert_eq!(table.methods_for("/metadata@main/objects"), ["GET"]);
        assert_eq!(table.methods_for("/metadata/objects"), ["GET"]);
        // A vendored file's path may have several segments.
        assert_eq!(
            table.methods_for("/metadata/crm/vendor/dist/chart.js"),
            ["GET"]
        );
        assert_eq!(
            table.methods_for("/metadata@main/crm/vendor/dist/chart.js"),
            ["DELETE", "GET", "PUT"]
        );
        assert!(table
            .methods_for("/metadata/crm/vendor/dist//chart.js")
            .is_empty());
    }
}
