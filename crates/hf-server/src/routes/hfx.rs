//! The `hfx` group: compiling screens (`POST /hfx/compile`), resolving a screen to the URL of its
//! compiled module, serving compiled modules and the vendored runtime, and the rendering frame
//! page that `GET /auth/session/exchange` answers with.
//!
//! Compiling is CPU work, bounded, timed and cached by the application's compiler
//! (`hf_app::compile`): a request that waits too long answers 504 `TIMEOUT`, one that finds the
//! queue full 503 `OVERLOADED`.
//!
//! Module URLs name the metadata tree they were compiled from (`/hfx/modules/{tree}-{m}-{s}.js`)
//! and are served from that tree's model, so a URL keeps working after later applies and its
//! response never changes (hence `immutable`).

use std::sync::Arc;

use actix_web::http::header;
use actix_web::{get, post, web, HttpRequest, HttpResponse};
use hf_hfx::{CompileOptions, CompileOutput};
use hf_model::key::{check_key, KeyKind};
use hf_model::{Model, Screen};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Authenticated;
use crate::error::{ApiError, Code, ErrorBody, Scope};
use crate::extract::{BodyLimit, JsonBody};
use crate::state::AppState;

/// Largest HFX source, and largest sidecar, that `POST /hfx/compile` accepts: 2 MiB each.
pub const MAX_SOURCE_BYTES: usize = 2 * 1024 * 1024;
/// The body limit of the `/hfx` routes: room for a source and a sidecar of the largest size even
/// when JSON escaping doubles or triples them. The sizes themselves are checked after decoding.
pub const BODY_LIMIT: usize = 6 * MAX_SOURCE_BYTES;
/// `Cache-Control` of a compiled module: its URL names a tree, so its content never changes.
const MODULE_CACHE_CONTROL: &str = "private, max-age=31536000, immutable";
/// The content type of every JavaScript response, exactly as the contract writes it.
const JAVASCRIPT: &str = "application/javascript";

/// Registers the `hfx` routes under one scope, whose body limit fits the largest source.
pub fn register<T>(app: utoipa_actix_web::UtoipaApp<T>) -> utoipa_actix_web::UtoipaApp<T>
where
    T: actix_web::dev::ServiceFactory<
        actix_web::dev::ServiceRequest,
        Config = (),
        Error = actix_web::Error,
        InitError = (),
    >,
{
    app.service(
        utoipa_actix_web::scope::scope("/hfx")
            .app_data(BodyLimit(BODY_LIMIT))
            .service(compile)
            .service(resolve)
            .service(frame)
            .service(serve_module)
            .service(vendor),
    )
}

/// `POST /hfx/compile` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompileRequest {
    /// The HFX source of the screen (at most 2 MiB).
    pub source: String,
    /// The screen's TypeScript sidecar, imported by the screen as `./sidecar` (at most 2 MiB).
    #[serde(default)]
    pub sidecar: Option<String>,
    /// The module the screen belongs to, when the caller knows it: its bare imports of vendored
    /// files then compile to their addresses in the live branch
    /// (`/hfx/vendor/{tree}/{moduleKey}/{path}`), so the compiled text runs as it is (the
    /// console's preview of a screen not yet saved). Without it they keep the fixed rule
    /// (`/hfx/vendor/{path}.js`). Nothing is checked against the module.
    #[serde(default, rename = "moduleKey")]
    pub module_key: Option<String>,
}

/// The compile result of the contract.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompileResponse {
    /// The ES module; the component is its default export.
    pub compiled_js: String,
    /// The sidecar compiled to JavaScript, or null without a sidecar.
    pub compiled_sidecar: Option<String>,
    /// The first 16 hex characters of the SHA-256 of the HFX source.
    pub content_hash: String,
    /// Always empty: problems are errors.
    pub warnings: Vec<String>,
}

/// `GET /hfx/resolve/{moduleKey}/{screenKey}` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolveResponse {
    /// `/hfx/modules/{tree}-{moduleKey}-{screenKey}.js`, `{tree}` being the live snapshot's
    /// root tree id.
    pub module_url: String,
}

/// Compiles an HFX source (and its sidecar) without storing anything.
#[utoipa::path(
    tag = "hfx",
    request_body = CompileRequest,
    responses(
        (status = 200, body = CompileResponse),
        (status = 400, description = "MALFORMED_JSON, INVALID_BODY or INVALID_KEY (`moduleKey`)", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: a source over 2 MiB", body = ErrorBody),
        (status = 422, description = "HFX_COMPILE_ERROR, each with its `location`", body = ErrorBody),
        (status = 504, description = "TIMEOUT: the compile took too long", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[post("/compile")]
pub async fn compile(
    _caller: Authenticated,
    state: web::Data<AppState>,
    body: JsonBody<CompileRequest>,
) -> Result<web::Json<CompileResponse>, ApiError> {
    let CompileRequest {
        source,
        sidecar,
        module_key,
    } = body.0;
    for (name, text) in [("source", Some(&source)), ("sidecar", sidecar.as_ref())] {
        if text.is_some_and(|text| text.len() > MAX_SOURCE_BYTES) {
            return Err(ApiError::entry(
                Code::PayloadTooLarge,
                format!("`{name}` is larger than {MAX_SOURCE_BYTES} bytes."),
                Scope::Field,
                Some(name.to_owned()),
            ));
        }
    }
    let mut options = CompileOptions::default();
    if let Some(module_key) = module_key {
        check_key(KeyKind::Module, &module_key)?;
        let store = Arc::clone(state.store());
        let live = blocking(move || store.live()).await??;
        options.vendor_base = Some(vendor_base(&live.tree, &module_key));
    }
    let output = state
        .app
        .compiler()
        .compile(source, sidecar, options)
        .await?;
    match output.js {
        Some(js) if output.diagnostics.is_empty() => Ok(web::Json(CompileResponse {
            compiled_js: js,
            compiled_sidecar: output.sidecar_js,
            content_hash: output.content_hash,
            warnings: Vec::new(),
        })),
        _ => Err(compile_errors(&output)),
    }
}

/// The URL of a screen's compiled module in the live snapshot.
#[utoipa::path(
    tag = "hfx",
    params(("moduleKey" = String, Path), ("screenKey" = String, Path)),
    responses(
        (status = 200, body = ResolveResponse),
        (status = 400, description = "INVALID_KEY", body = ErrorBody),
        (status = 401, description = "UNAUTHENTICATED", body = ErrorBody),
        (status = 404, description = "MODULE_NOT_FOUND or SCREEN_NOT_FOUND", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/resolve/{moduleKey}/{screenKey}")]
pub async fn resolve(
    _caller: Authenticated,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<web::Json<ResolveResponse>, ApiError> {
    let (module_key, screen_key) = path.into_inner();
    check_key(KeyKind::Module, &module_key)?;
    check_key(KeyKind::Screen, &screen_key)?;
    let store = Arc::clone(state.store());
    let snapshot = blocking(move || store.live()).await??;
    find_screen(&snapshot.model, &module_key, &screen_key)?;
    Ok(web::Json(ResolveResponse {
        module_url: format!(
            "/hfx/modules/{}-{module_key}-{screen_key}.js",
            snapshot.tree
        ),
    }))
}

/// A compiled screen module (`{tree}-{m}-{s}.js`) or its sidecar (`{tree}-{m}-{s}.sidecar.js`),
/// compiled from the screen as it is in that metadata tree. Accepts the `hf_runtime` cookie.
#[utoipa::path(
    tag = "hfx",
    params(("file" = String, Path, description = "`{tree}-{moduleKey}-{screenKey}.js` or `….sidecar.js`")),
    responses(
        (status = 200, description = "The ES module", content_type = "application/javascript"),
        (status = 401, description = "UNAUTHENTICATED: neither the cookie nor a Bearer token", body = ErrorBody),
        (status = 404, description = "FILE_NOT_FOUND (malformed name or unknown tree), MODULE_NOT_FOUND, SCREEN_NOT_FOUND", body = ErrorBody),
        (status = 422, description = "HFX_COMPILE_ERROR: the stored screen does not compile", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/modules/{file}")]
pub async fn serve_module(
    _caller: Authenticated,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let file = ModuleFile::parse(&path).ok_or_else(|| file_not_found(&path))?;
    let store = Arc::clone(state.store());
    let tree = file.tree.clone();
    let model = match blocking(move || store.model_at_tree(&tree)).await? {
        Ok(model) => model,
        Err(hf_metastore::Error::UnknownObject { .. }) => return Err(file_not_found(&path)),
        Err(error) => return Err(error.into()),
    };
    let screen = find_screen(&model, &file.module, &file.screen)?;
    if file.sidecar && screen.sidecar.is_none() {
        return Err(file_not_found(&path));
    }
    // Only a screen with a sidecar needs the per-screen sidecar URL; without one, the cache key
    // does not depend on the tree and survives applies.
    let options = CompileOptions {
        sidecar_url: screen.sidecar.as_ref().map(|_| file.sidecar_url()),
        vendor_base: None,
    };
    let compiler = state.app.compiler();
    let mut output = compiler
        .compile_cached(
            &screen.hfx_source,
            screen.sidecar.as_deref(),
            options.clone(),
        )
        .await?;
    // Likewise only a screen that imports vendored files needs their tree's address: compiled
    // again with it (and cached under that key too).
    if !output.vendor_imports.is_empty() {
        let options = CompileOptions {
            vendor_base: Some(vendor_base(&file.tree, &file.module)),
            ..options
        };
        output = compiler
            .compile_cached(&screen.hfx_source, screen.sidecar.as_deref(), options)
            .await?;
    }
    let js = match (file.sidecar, &output.js, &output.sidecar_js) {
        (false, Some(js), _) | (true, _, Some(js)) if output.diagnostics.is_empty() => js.clone(),
        _ => return Err(compile_errors(&output)),
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, JAVASCRIPT))
        .insert_header((header::CACHE_CONTROL, MODULE_CACHE_CONTROL))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(js))
}

/// The rendering frame again, for a reload: the address the frame gives itself once booted
/// (`/hfx/modules/frame#module/screen`) is under the cookie's path, so a reload sends the
/// `hf_runtime` cookie and gets the frame with the session it holds, as long as it is valid.
#[utoipa::path(
    tag = "hfx",
    responses(
        (status = 200, description = "The rendering frame (the screen is named by the address's hash)", content_type = "text/html"),
        (status = 401, description = "UNAUTHENTICATED: no valid cookie (or Bearer token)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
#[get("/modules/frame")]
pub async fn frame(req: HttpRequest, _caller: Authenticated) -> Result<HttpResponse, ApiError> {
    let token = crate::auth::presented_token(&req)?;
    let page = frame_page(&token, None, None);
    Ok(page.response().body(page.html))
}

/// The HFX runtime (`hfx-runtime.js`), revalidated with an `ETag` because its URL stays the same
/// when the service is upgraded; and a module's vendored files at
/// `{tree}/{moduleKey}/{path}`, the file `<moduleKey>/vendor/<path>` of that metadata tree, whose
/// content never changes (hence `immutable`). Public: a vendored file is a library, not data.
#[utoipa::path(
    tag = "hfx",
    params(("path" = String, Path, description = "`hfx-runtime.js`, or `{tree}/{moduleKey}/{path}` for a vendored file")),
    responses(
        (status = 200, description = "The module", content_type = "application/javascript"),
        (status = 304, description = "Not modified (`If-None-Match`)"),
        (status = 404, description = "FILE_NOT_FOUND: not a vendored file", body = ErrorBody),
    )
)]
#[get("/vendor/{path:.*}")]
pub async fn vendor(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let Some(text) = hf_hfx::vendor_file(&path) else {
        return vendored_file(&state, &path).await;
    };
    let etag = format!("\"{}\"", hf_hfx::content_hash(text));
    let unchanged = req
        .headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| tag.trim() == etag || tag.trim() == "*");
    let mut response = if unchanged {
        HttpResponse::NotModified()
    } else {
        HttpResponse::Ok()
    };
    response
        .insert_header((header::ETAG, etag))
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"));
    if unchanged {
        return Ok(response.finish());
    }
    Ok(response
        .insert_header((header::CONTENT_TYPE, JAVASCRIPT))
        .body(text))
}

/// `Cache-Control` of a vendored file: its URL names a tree, so its content never changes.
const VENDORED_CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

/// The base URL of a module's vendored files in a tree: a compiled screen of that module imports
/// `x` as `<base>x`.
pub fn vendor_base(tree: &str, module_key: &str) -> String {
    format!("/hfx/vendor/{tree}/{module_key}/")
}

/// Serves `{tree}/{moduleKey}/{path}`: the file `<moduleKey>/vendor/<path>` of that tree.
async fn vendored_file(state: &AppState, path: &str) -> Result<HttpResponse, ApiError> {
    let mut parts = path.splitn(3, '/');
    let (Some(tree), Some(module_key), Some(rest)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(file_not_found(path));
    };
    let tree_ok = tree.len() == 40 && tree.bytes().all(|b| b.is_ascii_hexdigit());
    if !tree_ok
        || check_key(KeyKind::Module, module_key).is_err()
        || hf_app::metadata::check_vendor_path(rest).is_err()
    {
        return Err(file_not_found(path));
    }
    let store = Arc::clone(state.store());
    let (tree, file) = (
        tree.to_owned(),
        hf_app::metadata::vendor_file(module_key, rest),
    );
    let text = match blocking(move || store.read_file(&tree, &file)).await? {
        Ok(Some(text)) => text,
        Ok(None) | Err(hf_metastore::Error::UnknownObject { .. }) => {
            return Err(file_not_found(path))
        }
        Err(error) => return Err(error.into()),
    };
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, JAVASCRIPT))
        .insert_header((header::CACHE_CONTROL, VENDORED_CACHE_CONTROL))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(text))
}

/// The page `GET /auth/session/exchange` serves, and the `Content-Security-Policy` that must be
/// sent with it (the policy allows exactly this page's script, by its nonce).
#[derive(Debug, Clone)]
pub struct FramePage {
    /// The HTML document.
    pub html: String,
    /// The value of the `Content-Security-Policy` header.
    pub csp: String,
}

impl FramePage {
    /// A 200 response with the frame's headers (policy, no caching, no referrer), for the body.
    pub fn response(&self) -> actix_web::HttpResponseBuilder {
        let mut response = HttpResponse::Ok();
        response
            .content_type("text/html; charset=utf-8")
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((header::REFERRER_POLICY, "no-referrer"))
            .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
            .insert_header((header::CONTENT_SECURITY_POLICY, self.csp.clone()));
        response
    }
}

/// The rendering frame: an HTML page whose one script boots the HFX runtime with the session token
/// (`window.__HF_SESSION__`), which shows the screen the address's hash names or else `screen`
/// (`module/screen`) in `#hf-root`. `expires_in` is the token's lifetime when known. The session
/// values are JSON with `<`, `>` and `&` escaped, so nothing in them can close the script
/// element.
pub fn frame_page(token: &str, expires_in: Option<u64>, screen: Option<&str>) -> FramePage {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let session = serde_json::json!({
        "token": token,
        "expiresIn": expires_in,
        "screen": screen,
    })
    .to_string()
    .replace('<', "\\u003c")
    .replace('>', "\\u003e")
    .replace('&', "\\u0026");
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>hf</title>\n<link rel=\"icon\" href=\"data:,\">\n</head>\n<body>\n<div id=\"hf-root\"></div>\n\
         <script type=\"module\" nonce=\"{nonce}\">\n\
         import {{ boot }} from \"{runtime}\";\n\
         window.__HF_SESSION__ = {session};\n\
         boot(window.__HF_SESSION__, document.getElementById(\"hf-root\"));\n\
         </script>\n</body>\n</html>\n",
        runtime = hf_hfx::RUNTIME_URL,
    );
    FramePage {
        html,
        csp: frame_csp(&nonce),
    }
}

/// The frame's policy: scripts only by the page's nonce and what they import (`strict-dynamic`,
/// so the runtime can import the screen modules), requests only to this origin, no plugins, no
/// `<base>`, no form posts, no string-to-script sinks (Trusted Types without policies), and
/// framing only by pages of this origin. Styles come from the runtime's constructed stylesheets,
/// which the policy does not restrict; `style` attributes are set through the CSSOM.
fn frame_csp(nonce: &str) -> String {
    format!(
        "default-src 'none'; script-src 'nonce-{nonce}' 'strict-dynamic'; connect-src 'self'; \
         img-src 'self' data: blob:; style-src 'self'; font-src 'self'; media-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'self'; \
         require-trusted-types-for 'script'; trusted-types 'none'"
    )
}

/// A parsed module file name: `{tree}-{module}-{screen}.js` or `….sidecar.js`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ModuleFile {
    tree: String,
    module: String,
    screen: String,
    sidecar: bool,
}

impl ModuleFile {
    /// Parses a file name; `None` for anything that is not exactly one of the two forms with a
    /// 40-hex lowercase tree id and valid keys (keys never contain `-` or `.`).
    fn parse(name: &str) -> Option<Self> {
        let (stem, sidecar) = match name.strip_suffix(".sidecar.js") {
            Some(stem) => (stem, true),
            None => (name.strip_suffix(".js")?, false),
        };
        let mut parts = stem.split('-');
        let (tree, module, screen) = (parts.next()?, parts.next()?, parts.next()?);
        let tree_ok = tree.len() == 40
            && tree
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        let keys_ok = check_key(KeyKind::Module, module).is_ok()
            && check_key(KeyKind::Screen, screen).is_ok();
        (parts.next().is_none() && tree_ok && keys_ok).then(|| ModuleFile {
            tree: tree.to_owned(),
            module: module.to_owned(),
            screen: screen.to_owned(),
            sidecar,
        })
    }

    /// What the screen's `import … from "./sidecar"` becomes: this screen's sidecar file, next to
    /// the module in `/hfx/modules/`.
    fn sidecar_url(&self) -> String {
        format!("./{}-{}-{}.sidecar.js", self.tree, self.module, self.screen)
    }
}

fn file_not_found(name: &str) -> ApiError {
    ApiError::new(
        Code::FileNotFound,
        format!(
            "There is no file `{}` here.",
            name.chars().take(100).collect::<String>()
        ),
    )
}

fn find_screen<'m>(
    model: &'m Model,
    module_key: &str,
    screen_key: &str,
) -> Result<&'m Screen, ApiError> {
    let module = model.modules.get(module_key).ok_or_else(|| {
        ApiError::new(
            Code::ModuleNotFound,
            format!("There is no module `{module_key}`."),
        )
    })?;
    module.screens.get(screen_key).ok_or_else(|| {
        ApiError::new(
            Code::ScreenNotFound,
            format!("There is no screen `{screen_key}` in module `{module_key}`."),
        )
    })
}

/// The 422 envelope of a failed compile (an output without JavaScript always has diagnostics).
fn compile_errors(output: &CompileOutput) -> ApiError {
    if output.diagnostics.is_empty() {
        tracing::error!("the HFX compiler returned neither output nor diagnostics");
        return ApiError::internal();
    }
    crate::error::hfx_errors(&output.diagnostics)
}

/// Runs metadata store work on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|error| {
        tracing::error!(%error, "metadata task failed");
        ApiError::internal()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TREE: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn module_file_names_parse_exactly() {
        let parsed = ModuleFile::parse(&format!("{TREE}-crm-accounts.js")).unwrap();
        assert_eq!(
            (
                parsed.module.as_str(),
                parsed.screen.as_str(),
                parsed.sidecar
            ),
            ("crm", "accounts", false)
        );
        assert_eq!(
            parsed.sidecar_url(),
            format!("./{TREE}-crm-accounts.sidecar.js")
        );
        assert!(
            ModuleFile::parse(&format!("{TREE}-crm-accounts.sidecar.js"))
                .unwrap()
                .sidecar
        );
        for bad in [
            "".to_owned(),
            format!("{TREE}-crm-accounts"),
            format!("{TREE}-crm.js"),
            format!("{TREE}-crm-accounts-x.js"),
            format!("{}-crm-accounts.js", TREE.to_uppercase()),
            format!("{}-crm-accounts.js", &TREE[1..]),
            format!("{TREE}-Crm-accounts.js"),
            format!("{TREE}-crm-accounts.mjs"),
            format!("{TREE}-crm-.js"),
            format!("{TREE}-pg_x-accounts.js"),
            "../../etc/passwd".to_owned(),
        ] {
            assert_eq!(ModuleFile::parse(&bad), None, "{bad}");
        }
    }

    #[test]
    fn the_frame_escapes_the_session_and_names_its_nonce() {
        let page = frame_page("t</script><b>&", Some(60), Some("crm/accounts"));
        assert!(!page.html.contains("</script><b>"));
        assert!(page.html.contains("\\u003c/script\\u003e"));
        let nonce = page
            .csp
            .split("'nonce-")
            .nth(1)
            .and_then(|rest| rest.split('\'').next())
            .unwrap();
        assert!(page.html.contains(&format!("nonce=\"{nonce}\"")));
        assert_ne!(
            frame_page("t", Some(60), None).csp,
            page.csp,
            "a fresh nonce per page"
        );
    }
}
