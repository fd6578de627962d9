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
use crate::error::{ApiError, Code, ErrorBody};
use crate::extract::JavaScriptBody;
use crate::routes::metadata::{
    blocking, key, metadata_root, module, read_branch, snapshot, write_branch,
};
use crate::state::AppState;

/// Longest vendored path, in bytes.
const MAX_PATH_BYTES: usize = 255;

/// Checks a vendored path: `[a-z0-9._-]` segments separated by `/`, none empty, `.` or `..`, and
/// not a `.json5` file (the branch's metadata files end in `.json5`).
pub fn check_path(path: &str) -> Result<(), ApiError> {
    let segments_ok = path.split('/').all(|segment| {
        !segment.is_empty()
            && segment != "."
            && segment != ".."
            && segment.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            })
    });
    if segments_ok && path.len() <= MAX_PATH_BYTES && !path.ends_with(".json5") {
        return Ok(());
    }
    Err(ApiError::new(
        Code::InvalidPath,
        format!(
            "`{}` is not a vendored path: `[a-z0-9._-]` segments separated by `/`, no empty, `.` or `..` segment, at most {MAX_PATH_BYTES} bytes, not ending in `.json5`.",
            path.chars().take(100).collect::<String>()
        ),
    ))
}

/// The file of a vendored module in the branch, relative to the metadata directory.
pub fn file_of(module_key: &str, path: &str) -> String {
    format!("{module_key}/vendor/{path}")
}

/// Stores a vendored module (admin); one commit.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("path" = String, Path, description = "`[a-z0-9._-]` segments separated by `/`, e.g. `chart.js`")),
    request_body(content = String, content_type = "text/javascript", description = "The ES module, at most 2 MiB"),
    responses(
        (status = 200, description = "Replaced", body = WriteResponse),
        (status = 201, description = "Created", body = WriteResponse),
        (status = 400, description = "INVALID_PATH, INVALID_KEY or INVALID_BODY (not UTF-8)", body = ErrorBody),
        (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody),
        (status = 413, description = "PAYLOAD_TOO_LARGE: over 2 MiB", body = ErrorBody),
        (status = 415, description = "UNSUPPORTED_MEDIA_TYPE: not `text/javascript`", body = ErrorBody),
    ))]
#[put("/{branchRoot}/{moduleKey}/vendor/{path:.*}", guard = "metadata_root")]
pub async fn put_vendor(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    body: JavaScriptBody,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, path) = path.into_inner();
    let branch = write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    check_path(&path)?;
    let base = branch_or_live(&state, &branch).await?;
    module(&base.model, &module_key)?;
    let file = file_of(&module_key, &path);
    let store = Arc::clone(&state.store);
    let (b, f, author) = (branch.clone(), file.clone(), writer.author.clone());
    let written =
        blocking(move || store.write_file(&b, &author, &f, Some(body.0.as_bytes()))).await?;
    let status = if written.existed {
        "updated"
    } else {
        "created"
    };
    let answer = WriteResponse {
        status,
        branch,
        file,
        apply: None,
    };
    Ok(if written.existed {
        HttpResponse::Ok().json(answer)
    } else {
        HttpResponse::Created().json(answer)
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
    check_path(&path)?;
    let snapshot = snapshot(&state, branch).await?;
    module(&snapshot.model, &module_key)?;
    let store = Arc::clone(&state.store);
    let (tree, file) = (snapshot.tree.clone(), file_of(&module_key, &path));
    let text = blocking(move || store.read_file(&tree, &file))
        .await?
        .ok_or_else(|| not_found(&module_key, &path))?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/javascript"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(text))
}

/// Removes a vendored module (admin); one commit. Refused while a screen of the module imports it.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("path" = String, Path)),
    responses(
        (status = 200, body = WriteResponse),
        (status = 400, description = "INVALID_PATH or INVALID_KEY", body = ErrorBody),
        (status = 404, description = "MODULE_NOT_FOUND or FILE_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "IN_USE: a screen of the module imports the file", body = ErrorBody),
    ))]
#[delete("/{branchRoot}/{moduleKey}/vendor/{path:.*}", guard = "metadata_root")]
pub async fn delete_vendor(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, path) = path.into_inner();
    let branch = write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    check_path(&path)?;
    let base = branch_or_live(&state, &branch).await?;
    let found = module(&base.model, &module_key)?;
    if let Some(screen) = importing_screen(found, &path) {
        return Err(ApiError::new(
            Code::InUse,
            format!("Screen `{module_key}/{screen}` imports `{path}`; change it first."),
        ));
    }
    let file = file_of(&module_key, &path);
    let store = Arc::clone(&state.store);
    let (b, f, author) = (branch.clone(), file.clone(), writer.author.clone());
    let written = blocking(move || store.write_file(&b, &author, &f, None)).await?;
    if !written.existed {
        return Err(not_found(&module_key, &path));
    }
    Ok(HttpResponse::Ok().json(WriteResponse {
        status: "deleted",
        branch,
        file,
        apply: None,
    }))
}

/// The first screen of `module` whose script or sidecar imports the vendored `path`. A screen is
/// compiled only when its source or sidecar mentions the path at all. (A screen written at the same moment may slip
/// past this check; it then fails at its next write, as an import of a missing file.)
fn importing_screen(module: &hf_model::Module, path: &str) -> Option<String> {
    module
        .screens
        .iter()
        .filter(|(_, screen)| {
            screen.hfx_source.contains(path)
                || screen.sidecar.as_deref().is_some_and(|s| s.contains(path))
        })
        .find(|(_, screen)| {
            hf_hfx::compile(&screen.hfx_source, screen.sidecar.as_deref())
                .vendor_imports
                .iter()
                .any(|import| import.specifier == path)
        })
        .map(|(key, _)| key.clone())
}

/// The branch's snapshot, or the live branch's when the branch does not exist yet (a write forks
/// it from there).
async fn branch_or_live(
    state: &AppState,
    branch: &str,
) -> Result<Arc<hf_metastore::Snapshot>, ApiError> {
    let store = Arc::clone(&state.store);
    let branch = branch.to_owned();
    blocking(move || match store.snapshot(&branch) {
        Err(hf_metastore::Error::BranchNotFound { .. }) => store.live(),
        other => other,
    })
    .await
}

fn not_found(module_key: &str, path: &str) -> ApiError {
    ApiError::new(
        Code::FileNotFound,
        format!("Module `{module_key}` has no vendored file `{path}`."),
    )
}
