//! Vendored JavaScript modules: `PUT|GET|DELETE /{branchRoot}/{moduleKey}/vendor/{path}`.
//!
//! A vendored module is a file of the branch at `<moduleKey>/vendor/<path>`, next to the module's
//! metadata; each write is one commit, like every metadata write. A screen of that module imports
//! it by a bare specifier equal to `path`; the screen write checks that the file exists, and the
//! compiled screen loads it from `/hfx/vendor/{tree}/{moduleKey}/{path}` (served by
//! `routes::hfx::vendor`), an address that names the metadata tree and so never changes content.
//! A file that a screen of the module imports cannot be deleted (409 `IN_USE`).

use std::sync::Arc;

use actix_web::http::header;
use actix_web::{delete, get, put, web, HttpResponse};
use hf_model::key::KeyKind;

use crate::auth_gate::{MetadataReader, MetadataWriter};
use crate::dto::metadata::WriteResponse;
use crate::error::{ApiError, ErrorBody};
use crate::extract::JavaScriptBody;
use crate::routes::metadata::{
    blocking, key, metadata_root, metadata_write_root, module, read_branch, snapshot, write_branch,
};
use crate::state::AppState;
use serde::Deserialize;
use utoipa::IntoParams;

/// Query of vendored-file writes.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VendorWriteQuery {
    /// Check the write (path, module, importing screens) and answer what it would do, writing
    /// nothing.
    #[serde(default)]
    dry_run: bool,
}

/// Stores a vendored module (admin); one commit.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("path" = String, Path, description = "`[a-z0-9._-]` segments separated by `/`, e.g. `chart.js`"), VendorWriteQuery),
    request_body(content = String, content_type = "text/javascript", description = "The ES module, at most 2 MiB"),
    responses(
        (status = 200, description = "Replaced", body = WriteResponse),
        (status = 201, description = "Created", body = WriteResponse),
        (status = 400, description = "INVALID_PATH, INVALID_KEY or INVALID_BODY (not UTF-8)", body = ErrorBody),
        (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: over 2 MiB", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: not `text/javascript`", body = ErrorBody),
    ))]
#[put(
    "/{branchRoot}/{moduleKey}/vendor/{path:.*}",
    guard = "metadata_write_root"
)]
pub async fn put_vendor(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<VendorWriteQuery>,
    body: JavaScriptBody,
) -> Result<HttpResponse, ApiError> {
    let written = write(
        &state,
        &writer,
        path.into_inner(),
        Some(body.0.into_bytes()),
        query.dry_run,
    )
    .await?;
    let (status, answer) = if written.existed {
        ("updated", HttpResponse::Ok())
    } else {
        ("created", HttpResponse::Created())
    };
    Ok(respond(answer, status, written))
}

/// Stores (`Some`) or removes (`None`) the vendored file a write route's path names, after
/// checking the branch root and the module key.
async fn write(
    state: &AppState,
    writer: &MetadataWriter,
    (root, module_key, path): (String, String, String),
    contents: Option<Vec<u8>>,
    dry_run: bool,
) -> Result<hf_app::FileWritten, ApiError> {
    let branch = write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    Ok(state
        .app
        .write_vendor_file(
            &branch,
            &writer.author,
            &module_key,
            &path,
            contents,
            dry_run,
        )
        .await?)
}

/// The answer to a vendored-file write.
fn respond(
    mut answer: actix_web::HttpResponseBuilder,
    status: &'static str,
    written: hf_app::FileWritten,
) -> HttpResponse {
    answer.json(WriteResponse {
        status,
        branch: written.branch,
        file: written.file,
        apply: None,
        dry_run: written.dry_run,
        plan: None,
    })
}

/// A vendored module's text.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path), ("path" = String, Path)),
    responses(
        (status = 200, description = "The module", content_type = "text/javascript"),
        (status = 400, description = "INVALID_PATH or INVALID_KEY", body = ErrorBody),
        (status = 404, description = "MODULE_NOT_FOUND or FILE_NOT_FOUND", body = ErrorBody),
    ))]
#[get("/{branchRoot}/{moduleKey}/vendor/{path:.*}", guard = "metadata_root")]
pub async fn get_vendor(
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, path) = path.into_inner();
    let branch = read_branch(&state, &root)?;
    key(KeyKind::Module, &module_key)?;
    hf_app::metadata::check_vendor_path(&path)?;
    let snapshot = snapshot(&state, branch).await?;
    module(&snapshot.model, &module_key)?;
    let store = Arc::clone(state.store());
    let (tree, file) = (
        snapshot.tree.clone(),
        hf_app::metadata::vendor_file(&module_key, &path),
    );
    let text = blocking(move || store.read_file(&tree, &file))
        .await?
        .ok_or_else(|| hf_app::Error::FileNotFound {
            module: module_key.clone(),
            path: path.clone(),
        })?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/javascript"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(text))
}

/// Removes a vendored module (admin); one commit. Refused while a screen of the module imports it.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("path" = String, Path), VendorWriteQuery),
    responses(
        (status = 200, body = WriteResponse),
        (status = 400, description = "INVALID_PATH or INVALID_KEY", body = ErrorBody),
        (status = 404, description = "MODULE_NOT_FOUND or FILE_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "IN_USE: a screen of the module imports the file", body = ErrorBody),
    ))]
#[delete(
    "/{branchRoot}/{moduleKey}/vendor/{path:.*}",
    guard = "metadata_write_root"
)]
pub async fn delete_vendor(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<VendorWriteQuery>,
) -> Result<HttpResponse, ApiError> {
    let written = write(&state, &writer, path.into_inner(), None, query.dry_run).await?;
    Ok(respond(HttpResponse::Ok(), "deleted", written))
}
