//! The `metadata` group: reads of any branch, writes (admin), and `GET /branches`.
//!
//! Every route is registered once, on `/{branchRoot}/...`, where the first segment is
//! `metadata` (the live branch, reads only) or `metadata@<branchId>`. The OpenAPI document lists
//! them under the contract's literal paths, `/metadata/...` for reads and `/metadata@{branch}/...`
//! for reads and writes (`crate::openapi::finish`); these same handlers serve both. The error
//! responses name the codes particular to each route; the document adds those every read or
//! write can answer. A write to the live branch applies its DDL atomically with the commit.

use std::sync::Arc;

use actix_web::guard::GuardContext;
use actix_web::http::header;
use actix_web::{delete, get, post, put, web, HttpRequest, HttpResponse};
use hf_metastore::Snapshot;
use hf_model::key::{check_key, KeyKind};
use hf_model::{Change, Model, QualifiedName};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use crate::auth_gate::{MetadataReader, MetadataWriter};
use crate::dto::metadata::{
    ApplyDto, BranchDto, FieldBody, FieldDto, ModuleBody, ModuleDto, ObjectBody, ObjectDto,
    ScreenBody, ScreenDto, WriteResponse, FIELD_KINDS,
};
use crate::error::{ApiError, Code, ErrorBody};
use crate::extract::JsonBody;
use crate::state::AppState;

/// Serves a route only when the first path segment names the metadata (`metadata` or
/// `metadata@…`); other paths fall through to the router's 404/405.
pub fn metadata_root(ctx: &GuardContext<'_>) -> bool {
    let first = ctx
        .head()
        .uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    // An invalid branch root falls through to the router's fallback, which answers 400
    // `INVALID_BRANCH` before any authentication.
    first == "metadata"
        || first
            .strip_prefix("metadata@")
            .is_some_and(hf_model::key::is_valid_branch_id)
}

/// The branch a first path segment names: `metadata` is the live branch (for reads).
pub(crate) fn read_branch(state: &AppState, root: &str) -> Result<String, ApiError> {
    if root == "metadata" {
        return Ok(state.live_branch.clone());
    }
    write_branch(root)
}

/// The branch of a write: the first segment must be `metadata@<branchId>`.
pub(crate) fn write_branch(root: &str) -> Result<String, ApiError> {
    let branch = root.strip_prefix("metadata@").unwrap_or("");
    if hf_model::key::is_valid_branch_id(branch) {
        Ok(branch.to_owned())
    } else {
        Err(ApiError::new(
            Code::InvalidBranch,
            format!(
                "`{}` is not a valid branch root; write metadata@<branchId>.",
                root.chars().take(100).collect::<String>()
            ),
        ))
    }
}

pub(crate) fn key(kind: KeyKind, key: &str) -> Result<(), ApiError> {
    check_key(kind, key).map_err(ApiError::from)
}

pub(crate) async fn snapshot(state: &AppState, branch: String) -> Result<Arc<Snapshot>, ApiError> {
    let store = Arc::clone(&state.store);
    blocking(move || store.snapshot(&branch)).await
}

pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, hf_metastore::Error> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| {
            tracing::error!(%error, "metadata task failed");
            ApiError::internal()
        })?
        .map_err(ApiError::from)
}

pub(crate) fn module<'m>(
    model: &'m Model,
    module_key: &str,
) -> Result<&'m hf_model::Module, ApiError> {
    key(KeyKind::Module, module_key)?;
    model.modules.get(module_key).ok_or_else(|| {
        ApiError::new(
            Code::ModuleNotFound,
            format!("There is no module `{module_key}`."),
        )
    })
}

fn object<'m>(
    model: &'m Model,
    module_key: &str,
    object_key: &str,
) -> Result<&'m hf_model::Object, ApiError> {
    let module = module(model, module_key)?;
    key(KeyKind::Object, object_key)?;
    module.objects.get(object_key).ok_or_else(|| {
        ApiError::new(
            Code::ObjectNotFound,
            format!("There is no object `{module_key}.{object_key}`."),
        )
    })
}

/// The answer to a read of a snapshot, with a weak `ETag` naming the snapshot's tree: a read's
/// answer is a function of its URL and that tree, so the tree id identifies the representation
/// (weak, because compression may encode it differently). A request whose `If-None-Match` names
/// it gets `304 Not Modified` without a body. The body is built first, so a read that fails
/// fails whatever the request's validators say.
fn read_answer(req: &HttpRequest, snapshot: &Snapshot, body: impl Serialize) -> HttpResponse {
    let etag = format!("W/\"{}\"", snapshot.tree);
    let cache = (header::CACHE_CONTROL, "private, no-cache");
    if if_none_match(req, &etag) {
        return HttpResponse::NotModified()
            .insert_header((header::ETAG, etag))
            .insert_header(cache)
            .finish();
    }
    HttpResponse::Ok()
        .insert_header((header::ETAG, etag))
        .insert_header(cache)
        .json(body)
}

/// Whether `If-None-Match` names `etag` (or is `*`), compared weakly as RFC 9110 asks.
fn if_none_match(req: &HttpRequest, etag: &str) -> bool {
    let opaque = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let wanted = opaque(etag);
    req.headers()
        .get_all(header::IF_NONE_MATCH)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| tag.trim() == "*" || opaque(tag) == wanted)
}

/// Query filter of object lists.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectFilter {
    /// Only objects of this module.
    module_key: Option<String>,
}

/// Query filter of field lists.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FieldFilter {
    /// Only fields of this module.
    module_key: Option<String>,
    /// Only fields of this object (requires `moduleKey`).
    object_key: Option<String>,
}

/// Query of metadata writes.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteQuery {
    /// Allow a live-branch write whose DDL loses data (dropping a column or table).
    #[serde(default)]
    allow_destructive: bool,
}

fn disagree(name: &str, path_value: &str, query_value: &Option<String>) -> Result<(), ApiError> {
    match query_value {
        Some(value) if value != path_value => Err(ApiError::field(
            Code::InvalidQuery,
            format!("The query's `{name}` ({value}) disagrees with the path ({path_value})."),
            name,
        )),
        _ => Ok(()),
    }
}

fn objects_of(model: &Model, module_filter: Option<&str>) -> Vec<ObjectDto> {
    model
        .modules
        .values()
        .filter(|m| module_filter.is_none_or(|f| f == m.key))
        .flat_map(|m| m.objects.values().map(|o| ObjectDto::new(&m.key, o)))
        .collect()
}

fn fields_of(
    model: &Model,
    module_filter: Option<&str>,
    object_filter: Option<&str>,
) -> Vec<FieldDto> {
    let mut list = Vec::new();
    for module in model
        .modules
        .values()
        .filter(|m| module_filter.is_none_or(|f| f == m.key))
    {
        for object in module
            .objects
            .values()
            .filter(|o| object_filter.is_none_or(|f| f == o.key))
        {
            let name = QualifiedName::new(module.key.clone(), object.key.clone());
            list.extend(
                object
                    .fields
                    .values()
                    .map(|field| FieldDto::new(&name, field)),
            );
        }
    }
    list
}

/// Every module of a branch, sorted by key.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`")),
    responses((status = 200, description = "The item(s), with an `ETag`", body = [ModuleDto]), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`")))]
#[get("/{branchRoot}", guard = "metadata_root")]
pub async fn list_modules(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let snapshot = snapshot(&state, read_branch(&state, &path)?).await?;
    Ok(read_answer(
        &req,
        &snapshot,
        snapshot
            .model
            .modules
            .values()
            .map(ModuleDto::from)
            .collect::<Vec<_>>(),
    ))
}

/// Every object of a branch, sorted by module then key.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ObjectFilter),
    responses((status = 200, description = "The item(s), with an `ETag`", body = [ObjectDto]), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`")))]
#[get("/{branchRoot}/objects", guard = "metadata_root")]
pub async fn list_all_objects(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<String>,
    filter: web::Query<ObjectFilter>,
) -> Result<HttpResponse, ApiError> {
    let snapshot = snapshot(&state, read_branch(&state, &path)?).await?;
    Ok(read_answer(
        &req,
        &snapshot,
        objects_of(&snapshot.model, filter.module_key.as_deref()),
    ))
}

/// Every field of a branch, sorted by module, object, then key.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), FieldFilter),
    responses((status = 200, description = "The item(s), with an `ETag`", body = [FieldDto]), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`")))]
#[get("/{branchRoot}/fields", guard = "metadata_root")]
pub async fn list_all_fields(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<String>,
    filter: web::Query<FieldFilter>,
) -> Result<HttpResponse, ApiError> {
    if filter.object_key.is_some() && filter.module_key.is_none() {
        return Err(ApiError::field(
            Code::InvalidQuery,
            "`objectKey` requires `moduleKey`.",
            "objectKey",
        ));
    }
    let snapshot = snapshot(&state, read_branch(&state, &path)?).await?;
    Ok(read_answer(
        &req,
        &snapshot,
        fields_of(
            &snapshot.model,
            filter.module_key.as_deref(),
            filter.object_key.as_deref(),
        ),
    ))
}

/// One module.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path)),
    responses((status = 200, description = "The item(s), with an `ETag`", body = ModuleDto), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`"), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody)))]
#[get("/{branchRoot}/{moduleKey}", guard = "metadata_root")]
pub async fn get_module(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key) = path.into_inner();
    let snapshot = snapshot(&state, read_branch(&state, &root)?).await?;
    Ok(read_answer(
        &req,
        &snapshot,
        ModuleDto::from(module(&snapshot.model, &module_key)?),
    ))
}

/// The objects of one module.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path), ObjectFilter),
    responses((status = 200, description = "The item(s), with an `ETag`", body = [ObjectDto]), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`"), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody)))]
#[get("/{branchRoot}/{moduleKey}/objects", guard = "metadata_root")]
pub async fn list_objects(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String)>,
    filter: web::Query<ObjectFilter>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key) = path.into_inner();
    disagree("moduleKey", &module_key, &filter.module_key)?;
    let snapshot = snapshot(&state, read_branch(&state, &root)?).await?;
    module(&snapshot.model, &module_key)?;
    Ok(read_answer(
        &req,
        &snapshot,
        objects_of(&snapshot.model, Some(&module_key)),
    ))
}

/// One object (without its fields).
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path)),
    responses((status = 200, description = "The item(s), with an `ETag`", body = ObjectDto), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`"), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody)))]
#[get(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}",
    guard = "metadata_root"
)]
pub async fn get_object(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key) = path.into_inner();
    let snapshot = snapshot(&state, read_branch(&state, &root)?).await?;
    let found = object(&snapshot.model, &module_key, &object_key)?;
    Ok(read_answer(
        &req,
        &snapshot,
        ObjectDto::new(&module_key, found),
    ))
}

/// The fields declared on one object.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), FieldFilter),
    responses((status = 200, description = "The item(s), with an `ETag`", body = [FieldDto]), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`"), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody)))]
#[get(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields",
    guard = "metadata_root"
)]
pub async fn list_fields(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String, String)>,
    filter: web::Query<FieldFilter>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key) = path.into_inner();
    disagree("moduleKey", &module_key, &filter.module_key)?;
    disagree("objectKey", &object_key, &filter.object_key)?;
    let snapshot = snapshot(&state, read_branch(&state, &root)?).await?;
    object(&snapshot.model, &module_key, &object_key)?;
    Ok(read_answer(
        &req,
        &snapshot,
        fields_of(&snapshot.model, Some(&module_key), Some(&object_key)),
    ))
}

/// One field.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), ("fieldKey" = String, Path)),
    responses((status = 200, description = "The item(s), with an `ETag`", body = FieldDto), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`"), (status = 404, description = "MODULE_NOT_FOUND, OBJECT_NOT_FOUND or FIELD_NOT_FOUND", body = ErrorBody)))]
#[get(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
    guard = "metadata_root"
)]
pub async fn get_field(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key, field_key) = path.into_inner();
    let snapshot = snapshot(&state, read_branch(&state, &root)?).await?;
    let found = object(&snapshot.model, &module_key, &object_key)?;
    key(KeyKind::Field, &field_key)?;
    let field = found.fields.get(&field_key).ok_or_else(|| {
        ApiError::entry(
            Code::FieldNotFound,
            format!("There is no field `{field_key}` on `{module_key}.{object_key}`."),
            crate::error::Scope::Field,
            Some(field_key.clone()),
        )
    })?;
    Ok(read_answer(
        &req,
        &snapshot,
        FieldDto::new(&QualifiedName::new(module_key, object_key), field),
    ))
}

/// The screens of one module.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path)),
    responses((status = 200, description = "The item(s), with an `ETag`", body = [ScreenDto]), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`"), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody)))]
#[get("/{branchRoot}/{moduleKey}/screens", guard = "metadata_root")]
pub async fn list_screens(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key) = path.into_inner();
    let snapshot = snapshot(&state, read_branch(&state, &root)?).await?;
    let found = module(&snapshot.model, &module_key)?;
    Ok(read_answer(
        &req,
        &snapshot,
        found
            .screens
            .values()
            .map(|s| ScreenDto::new(&module_key, s))
            .collect::<Vec<_>>(),
    ))
}

/// One screen.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    params(("branchRoot" = String, Path, description = "`metadata` (live) or `metadata@<branchId>`"), ("moduleKey" = String, Path), ("screenKey" = String, Path)),
    responses((status = 200, description = "The item(s), with an `ETag`", body = ScreenDto), (status = 304, description = "Not modified: `If-None-Match` names the current `ETag`"), (status = 404, description = "MODULE_NOT_FOUND or SCREEN_NOT_FOUND", body = ErrorBody)))]
#[get(
    "/{branchRoot}/{moduleKey}/screens/{screenKey}",
    guard = "metadata_root"
)]
pub async fn get_screen(
    req: HttpRequest,
    state: web::Data<AppState>,
    _reader: MetadataReader,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, screen_key) = path.into_inner();
    let snapshot = snapshot(&state, read_branch(&state, &root)?).await?;
    let found = module(&snapshot.model, &module_key)?;
    key(KeyKind::Screen, &screen_key)?;
    let screen = found.screens.get(&screen_key).ok_or_else(|| {
        ApiError::new(
            Code::ScreenNotFound,
            format!("There is no screen `{screen_key}` in module `{module_key}`."),
        )
    })?;
    Ok(read_answer(
        &req,
        &snapshot,
        ScreenDto::new(&module_key, screen),
    ))
}

/// Every branch of the metadata repository with its head.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
    responses((status = 200, body = [BranchDto])))]
#[get("/branches")]
pub async fn list_branches(
    state: web::Data<AppState>,
    _reader: MetadataReader,
) -> Result<web::Json<Vec<BranchDto>>, ApiError> {
    let store = Arc::clone(&state.store);
    let branches = blocking(move || store.branches()).await?;
    Ok(web::Json(
        branches
            .into_iter()
            .map(|b| BranchDto {
                branch: b.branch,
                commit: b.commit,
                live: b.live,
            })
            .collect(),
    ))
}

/// Commits an edit to a branch; on the live branch, with its DDL in the same step.
async fn write<F>(
    state: &AppState,
    root: &str,
    writer: &MetadataWriter,
    allow_destructive: bool,
    edit: F,
) -> Result<HttpResponse, ApiError>
where
    F: FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static,
{
    let branch = write_branch(root)?;
    let edit = keeping_screen_queries(edit);
    let (change, file, apply) = if branch == state.live_branch {
        let written = hf_storage::deploy::write_live(
            &state.pool,
            &state.store,
            &writer.author,
            allow_destructive,
            edit,
        )
        .await?;
        (
            written.change,
            written.file,
            Some(ApplyDto::from(written.stats)),
        )
    } else {
        let store = Arc::clone(&state.store);
        let (branch, author) = (branch.clone(), writer.author.clone());
        let written = blocking(move || store.write(&branch, &author, edit)).await?;
        (written.change, written.file, None)
    };
    let status = change.action.as_str();
    let body = WriteResponse {
        status,
        branch,
        file,
        apply,
    };
    Ok(if status == "created" {
        HttpResponse::Created().json(body)
    } else {
        HttpResponse::Ok().json(body)
    })
}

/// Creates a module.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ModuleBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), WriteQuery),
        responses((status = 201, body = WriteResponse), (status = 409, description = "ALREADY_EXISTS, or another write got there first (METADATA_CONFLICT), or the live apply would lose data (DESTRUCTIVE_CHANGE)", body = ErrorBody)))]
#[post("/{branchRoot}/{moduleKey}", guard = "metadata_root")]
pub async fn create_module(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<ModuleBody>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    let module = body.0.into_module(&module_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.create_module(module.clone())?),
    )
    .await
}

/// Replaces a module's definition.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ModuleBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody)))]
#[put("/{branchRoot}/{moduleKey}", guard = "metadata_root")]
pub async fn replace_module(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<ModuleBody>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    let module = body.0.into_module(&module_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.replace_module(module.clone())?),
    )
    .await
}

/// Deletes a module that has no objects or screens left.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody), (status = 409, description = "IN_USE: the module still has objects", body = ErrorBody)))]
#[delete("/{branchRoot}/{moduleKey}", guard = "metadata_root")]
pub async fn delete_module(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String)>,
    query: web::Query<WriteQuery>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.delete_module(&module_key)?),
    )
    .await
}

/// Creates an object.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ObjectBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), WriteQuery),
        responses((status = 201, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody), (status = 409, description = "ALREADY_EXISTS", body = ErrorBody)))]
#[post(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}",
    guard = "metadata_root"
)]
pub async fn create_object(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<ObjectBody>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Object, &object_key)?;
    let object = body.0.into_object(&object_key)?;
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.create_object(&module_key, object.clone())?),
    )
    .await
}

/// Replaces an object's definition (its fields stay).
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ObjectBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody)))]
#[put(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}",
    guard = "metadata_root"
)]
pub async fn replace_object(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<ObjectBody>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Object, &object_key)?;
    let object = body.0.into_object(&object_key)?;
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.replace_object(&module_key, object.clone())?),
    )
    .await
}

/// Deletes an object nothing extends or looks up.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody), (status = 409, description = "IN_USE: extended, looked up or rolled up over", body = ErrorBody)))]
#[delete(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}",
    guard = "metadata_root"
)]
pub async fn delete_object(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<WriteQuery>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Object, &object_key)?;
    let name = QualifiedName::new(module_key, object_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.delete_object(&name)?),
    )
    .await
}

/// Creates a field; `fieldKind` selects the variant.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = FieldBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), ("fieldKey" = String, Path), WriteQuery),
        responses((status = 201, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody), (status = 409, description = "ALREADY_EXISTS", body = ErrorBody)))]
#[post(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
    guard = "metadata_root"
)]
pub async fn create_field(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<serde_json::Value>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key, field_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Object, &object_key)?;
    key(KeyKind::Field, &field_key)?;
    let field = field_body(body.0)?.into_field(&field_key)?;
    let name = QualifiedName::new(module_key, object_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.create_field(&name, field.clone())?),
    )
    .await
}

/// Replaces a field's definition.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = FieldBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), ("fieldKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND, OBJECT_NOT_FOUND or FIELD_NOT_FOUND", body = ErrorBody)))]
#[put(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
    guard = "metadata_root"
)]
pub async fn replace_field(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<serde_json::Value>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key, field_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Object, &object_key)?;
    key(KeyKind::Field, &field_key)?;
    let field = field_body(body.0)?.into_field(&field_key)?;
    let name = QualifiedName::new(module_key, object_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.replace_field(&name, field.clone())?),
    )
    .await
}

/// Deletes a field nothing refers to.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), ("fieldKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND, OBJECT_NOT_FOUND or FIELD_NOT_FOUND", body = ErrorBody), (status = 409, description = "IN_USE: a rollup, a rule or a screen uses it", body = ErrorBody)))]
#[delete(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
    guard = "metadata_root"
)]
pub async fn delete_field(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String, String)>,
    query: web::Query<WriteQuery>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, object_key, field_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Object, &object_key)?;
    key(KeyKind::Field, &field_key)?;
    let name = QualifiedName::new(module_key, object_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.delete_field(&name, &field_key)?),
    )
    .await
}

/// Creates a screen; its HFX must compile.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ScreenBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("screenKey" = String, Path), WriteQuery),
        responses((status = 201, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody), (status = 409, description = "ALREADY_EXISTS", body = ErrorBody), (status = 422, description = "HFX_COMPILE_ERROR, each with its `location`", body = ErrorBody)))]
#[post(
    "/{branchRoot}/{moduleKey}/screens/{screenKey}",
    guard = "metadata_root"
)]
pub async fn create_screen(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<ScreenBody>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, screen_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Screen, &screen_key)?;
    let output = check_compiles(&body.0).await?;
    check_queries(&state, &root, &module_key, &output, &body.0).await?;
    let screen = body.0.into_screen(&screen_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.create_screen(&module_key, screen.clone())?),
    )
    .await
}

/// Replaces a screen; its HFX must compile.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ScreenBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("screenKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or SCREEN_NOT_FOUND", body = ErrorBody), (status = 422, description = "HFX_COMPILE_ERROR, each with its `location`", body = ErrorBody)))]
#[put(
    "/{branchRoot}/{moduleKey}/screens/{screenKey}",
    guard = "metadata_root"
)]
pub async fn replace_screen(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<WriteQuery>,
    body: JsonBody<ScreenBody>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, screen_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Screen, &screen_key)?;
    let output = check_compiles(&body.0).await?;
    check_queries(&state, &root, &module_key, &output, &body.0).await?;
    let screen = body.0.into_screen(&screen_key);
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.replace_screen(&module_key, screen.clone())?),
    )
    .await
}

/// Deletes a screen.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("screenKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or SCREEN_NOT_FOUND", body = ErrorBody)))]
#[delete(
    "/{branchRoot}/{moduleKey}/screens/{screenKey}",
    guard = "metadata_root"
)]
pub async fn delete_screen(
    state: web::Data<AppState>,
    writer: MetadataWriter,
    path: web::Path<(String, String, String)>,
    query: web::Query<WriteQuery>,
) -> Result<HttpResponse, ApiError> {
    let (root, module_key, screen_key) = path.into_inner();
    write_branch(&root)?;
    key(KeyKind::Module, &module_key)?;
    key(KeyKind::Screen, &screen_key)?;
    write(
        &state,
        &root,
        &writer,
        query.allow_destructive,
        move |model| Ok(model.delete_screen(&module_key, &screen_key)?),
    )
    .await
}

/// Reads a field body: `fieldKind` first (so an unknown kind is named as such), then the
/// variant's own properties.
fn field_body(value: serde_json::Value) -> Result<FieldBody, ApiError> {
    let kind = match value.get("fieldKind") {
        Some(serde_json::Value::String(kind)) if FIELD_KINDS.contains(&kind.as_str()) => {
            kind.clone()
        }
        Some(other) => {
            return Err(ApiError::field(
                Code::InvalidBody,
                format!("`fieldKind` must be one of scalar, formula, lookup, rollup; got {other}."),
                "fieldKind",
            ))
        }
        None => {
            return Err(ApiError::field(
                Code::InvalidBody,
                "`fieldKind` is required.",
                "fieldKind",
            ))
        }
    };
    // Deserialise the variant's own struct, so a shape error names its property (serde loses
    // the path inside tagged enums).
    use crate::extract::from_value;
    Ok(match kind.as_str() {
        "scalar" => FieldBody::Scalar(from_value(value)?),
        "formula" => FieldBody::Formula(from_value(value)?),
        "lookup" => FieldBody::Lookup(from_value(value)?),
        _ => FieldBody::Rollup(from_value(value)?),
    })
}

/// A screen whose HFX does not compile is not written. The compile shares the compile routes'
/// bound (one per core, within their time limit), so screen writes cannot take every core.
async fn check_compiles(body: &ScreenBody) -> Result<hf_hfx::CompileOutput, ApiError> {
    let output = crate::routes::hfx::compile_bounded(
        body.hfx_source.clone(),
        body.sidecar.clone(),
        hf_hfx::CompileOptions::default(),
    )
    .await?;
    match output.diagnostics.first() {
        None => Ok(output),
        Some(_) => Err(crate::error::hfx_errors(&output.diagnostics)),
    }
}

/// Wraps a metadata edit so that it is refused with 409 `IN_USE`, naming the screen, when it
/// breaks a screen: a `{#query}` that named only existing objects and fields before the edit and
/// names a missing one after it (a deleted or renamed field), or an import of a screen the edit
/// deletes. Screens already broken do not block other writes, and a write of the screen itself
/// is checked by `check_queries`.
fn keeping_screen_queries<F>(
    mut edit: F,
) -> impl FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static
where
    F: FnMut(&mut Model) -> Result<Change, hf_metastore::Error> + Clone + Send + 'static,
{
    move |model: &mut Model| {
        let before = screens_with_unknown_names(model);
        let change = edit(model)?;
        let after = screens_with_unknown_names(model);
        let written = |module: &str, screen: &str| matches!(&change.target, hf_model::Target::Screen { module: m, screen: s } if m == module && s == screen);
        let newly_broken = after
            .difference(&before)
            .find(|(module, screen)| !written(module, screen));
        match newly_broken {
            Some((module, screen)) => Err(hf_model::Error::InUse {
                target: Box::new(change.target.clone()),
                referrer: Box::new(hf_model::Target::screen(module, screen)),
            }
            .into()),
            None => Ok(change),
        }
    }
}

/// The screens of `model` (module, screen) with a literal `{#query}` that names an object or
/// field `model` does not have, or an import of a screen it does not have.
fn screens_with_unknown_names(model: &Model) -> std::collections::BTreeSet<(String, String)> {
    let mut broken = std::collections::BTreeSet::new();
    for (module_key, module) in &model.modules {
        for (screen_key, screen) in &module.screens {
            if !screen.hfx_source.contains("{#query") && !screen.hfx_source.contains("screen:") {
                continue;
            }
            let output = hf_hfx::compile(&screen.hfx_source, screen.sidecar.as_deref());
            let missing_import = output.screen_imports.iter().any(|import| {
                !model
                    .modules
                    .get(&import.module)
                    .is_some_and(|m| m.screens.contains_key(&import.screen))
            });
            let unknown = missing_import
                || output.queries.iter().any(|query| {
                    let params = null_parameters(&query.text);
                    hf_hoqs::compile_query(model, &query.text, &params).is_ok_and(|checked| {
                        checked
                            .diagnostics
                            .iter()
                            .any(|d| d.code == hf_hoqs::Code::UnknownName)
                    })
                });
            if unknown {
                broken.insert((module_key.clone(), screen_key.clone()));
            }
        }
    }
    broken
}

/// A screen that imports a screen the branch does not have, or a vendored file its module does
/// not have (`<moduleKey>/vendor/<path>`), or whose `{#query}` names an object or field the
/// branch does not have, is not written: 422 `HFX_COMPILE_ERROR` located in the screen source.
/// The query's `:parameters` are bound to null for this check, so only names are checked here
/// (types are checked when it runs).
async fn check_queries(
    state: &AppState,
    root: &str,
    module_key: &str,
    output: &hf_hfx::CompileOutput,
    screen: &ScreenBody,
) -> Result<(), ApiError> {
    let source = screen.hfx_source.as_str();
    if output.queries.is_empty()
        && output.screen_imports.is_empty()
        && output.vendor_imports.is_empty()
    {
        return Ok(());
    }
    let snapshot = snapshot(state, write_branch(root)?).await?;
    let mut problems = Vec::new();
    for import in &output.vendor_imports {
        let path = &import.specifier;
        let exists = crate::routes::vendor::check_path(path).is_ok() && {
            let store = Arc::clone(&state.store);
            let tree = snapshot.tree.clone();
            let file = crate::routes::vendor::file_of(module_key, path);
            blocking(move || store.read_file(&tree, &file))
                .await?
                .is_some()
        };
        if !exists {
            problems.push(import.diagnostic(
                hf_hfx::DiagnosticCode::InvalidImport,
                format!(
                    "`{path}` is not a vendored file of module `{module_key}`; upload it with PUT /metadata@<branch>/{module_key}/vendor/{path}"
                ),
                source,
                screen.sidecar.as_deref(),
            ));
        }
    }
    for import in &output.screen_imports {
        let exists = snapshot
            .model
            .modules
            .get(&import.module)
            .is_some_and(|module| module.screens.contains_key(&import.screen));
        if !exists {
            problems.push(hf_hfx::Diagnostic::at(
                hf_hfx::DiagnosticCode::InvalidImport,
                format!(
                    "there is no screen `{}/{}` in this branch",
                    import.module, import.screen
                ),
                hf_hfx::SourceFile::Screen,
                source,
                import.offset,
            ));
        }
    }
    for query in &output.queries {
        let params = null_parameters(&query.text);
        let checked =
            hf_hoqs::compile_query(&snapshot.model, &query.text, &params).map_err(|error| {
                tracing::error!(%error, "the branch's metadata cannot be compiled to SQL");
                ApiError::internal()
            })?;
        let unknown = checked
            .diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.code == hf_hoqs::Code::UnknownName);
        for diagnostic in unknown {
            problems.push(hf_hfx::Diagnostic::at(
                hf_hfx::DiagnosticCode::QueryUnknownName,
                diagnostic.message.clone(),
                hf_hfx::SourceFile::Screen,
                source,
                query.offset + diagnostic.span.start,
            ));
        }
    }
    match problems.first() {
        None => Ok(()),
        Some(_) => Err(crate::error::hfx_errors(&problems)),
    }
}

/// Every `:name` parameter of a query bound to null: enough to check its names and types.
fn null_parameters(text: &str) -> hf_hoqs::RequestParams {
    hf_hoqs_syntax::parameter_names(text)
        .into_iter()
        .filter_map(|name| {
            let null = serde_json::value::to_raw_value(&serde_json::Value::Null).ok()?;
            Some((name.to_owned(), null))
        })
        .collect()
}
