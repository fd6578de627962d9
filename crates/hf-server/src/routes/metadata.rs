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
use hf_app::{Edit, WriteOptions};
use hf_metastore::Snapshot;
use hf_model::key::{check_key, KeyKind};
use hf_model::{Model, QualifiedName};
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;

use crate::auth_gate::{MetadataReader, MetadataWriter};
use crate::dto::metadata::{
    ApplyDto, BranchDto, FieldBody, FieldDto, ModuleBody, ModuleDto, ObjectBody, ObjectDto,
    PlanDto, ScreenBody, ScreenDto, WriteResponse, FIELD_KINDS,
};
use crate::error::{ApiError, Code, ErrorBody};
use crate::extract::JsonBody;
use crate::state::AppState;

/// Serves a route only when the first path segment names the metadata (`metadata` or
/// `metadata@…`); other paths fall through to the router's 404/405.
pub fn metadata_root(ctx: &GuardContext<'_>) -> bool {
    let (first, _) = first_segments(ctx);
    // An invalid branch root falls through to the router's fallback, which answers 400
    // `INVALID_BRANCH` before any authentication.
    first == "metadata" || branch_of_root(first).is_some()
}

/// Serves a metadata write only under a branch root (`metadata@<branchId>`, the one write form):
/// a write to the live read path `/metadata/…` falls through to the router's 405, which lists the
/// methods the document gives that path (`GET`) and says where writes go.
pub fn metadata_write_root(ctx: &GuardContext<'_>) -> bool {
    branch_of_root(first_segments(ctx).0).is_some()
}

/// [`metadata_write_root`] for a module's own path (`/metadata@<branchId>/<moduleKey>`), except
/// where that path is a cross-module list (`/metadata@<branchId>/objects`, `…/fields`): those
/// take `GET` only, and a write there is a 405 as the document says, not a module write refused
/// for its reserved key.
pub fn module_write_root(ctx: &GuardContext<'_>) -> bool {
    let (_, second) = first_segments(ctx);
    metadata_write_root(ctx) && !matches!(second, "objects" | "fields")
}

/// The first two segments of a request's path (empty when missing).
fn first_segments<'a>(ctx: &'a GuardContext<'_>) -> (&'a str, &'a str) {
    let mut segments = ctx.head().uri.path().trim_start_matches('/').split('/');
    let first = segments.next().unwrap_or("");
    (first, segments.next().unwrap_or(""))
}

/// The branch a branch root names (`metadata@<branchId>` with a valid id), or `None`.
pub(crate) fn branch_of_root(segment: &str) -> Option<&str> {
    segment
        .strip_prefix("metadata@")
        .filter(|branch| hf_model::key::is_valid_branch_id(branch))
}

/// The branch a first path segment names: `metadata` is the live branch (for reads).
pub(crate) fn read_branch(state: &AppState, root: &str) -> Result<String, ApiError> {
    if root == "metadata" {
        return Ok(state.live_branch().to_owned());
    }
    write_branch(root)
}

/// The branch of a write: the first segment must be `metadata@<branchId>`.
pub(crate) fn write_branch(root: &str) -> Result<String, ApiError> {
    if let Some(branch) = branch_of_root(root) {
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
    Ok(state.app.snapshot(&branch).await?)
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
    /// Check the write completely (the model's validation, the screen checks, and on the live
    /// branch the DDL plan) and answer what it would do, with the plan, writing nothing.
    #[serde(default)]
    dry_run: bool,
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
    let store = Arc::clone(state.store());
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

/// Runs the write use case on the branch of `root` and answers with what it did (or, for a
/// dry run, would do).
async fn write(
    state: &AppState,
    root: &str,
    writer: &MetadataWriter,
    query: &WriteQuery,
    edit: Edit,
) -> Result<HttpResponse, ApiError> {
    let branch = write_branch(root)?;
    let options = WriteOptions {
        allow_destructive: query.allow_destructive,
        dry_run: query.dry_run,
    };
    let written = state
        .app
        .write_metadata(&branch, &writer.author, edit, options)
        .await?;
    let status = written.change.action.as_str();
    let body = WriteResponse {
        status,
        branch: written.branch,
        file: written.file,
        apply: written.apply.map(ApplyDto::from),
        dry_run: written.dry_run,
        plan: written.plan.map(PlanDto::from),
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
#[post("/{branchRoot}/{moduleKey}", guard = "module_write_root")]
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
    write(&state, &root, &writer, &query, Edit::CreateModule(module)).await
}

/// Replaces a module's definition.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ModuleBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody)))]
#[put("/{branchRoot}/{moduleKey}", guard = "module_write_root")]
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
    write(&state, &root, &writer, &query, Edit::ReplaceModule(module)).await
}

/// Deletes a module that has no objects or screens left.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody), (status = 409, description = "IN_USE: the module still has objects", body = ErrorBody)))]
#[delete("/{branchRoot}/{moduleKey}", guard = "module_write_root")]
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
        &query,
        Edit::DeleteModule(module_key),
    )
    .await
}

/// Creates an object.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ObjectBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), WriteQuery),
        responses((status = 201, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody), (status = 409, description = "ALREADY_EXISTS", body = ErrorBody)))]
#[post(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}",
    guard = "metadata_write_root"
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
        &query,
        Edit::CreateObject {
            module: module_key,
            object,
        },
    )
    .await
}

/// Replaces an object's definition (its fields stay).
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ObjectBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody)))]
#[put(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}",
    guard = "metadata_write_root"
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
        &query,
        Edit::ReplaceObject {
            module: module_key,
            object,
        },
    )
    .await
}

/// Deletes an object nothing extends or looks up.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody), (status = 409, description = "IN_USE: extended, looked up or rolled up over", body = ErrorBody)))]
#[delete(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}",
    guard = "metadata_write_root"
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
    write(&state, &root, &writer, &query, Edit::DeleteObject(name)).await
}

/// Creates a field; `fieldKind` selects the variant.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = FieldBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), ("fieldKey" = String, Path), WriteQuery),
        responses((status = 201, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or OBJECT_NOT_FOUND", body = ErrorBody), (status = 409, description = "ALREADY_EXISTS", body = ErrorBody)))]
#[post(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
    guard = "metadata_write_root"
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
        &query,
        Edit::CreateField {
            object: name,
            field,
        },
    )
    .await
}

/// Replaces a field's definition.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = FieldBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), ("fieldKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND, OBJECT_NOT_FOUND or FIELD_NOT_FOUND", body = ErrorBody)))]
#[put(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
    guard = "metadata_write_root"
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
        &query,
        Edit::ReplaceField {
            object: name,
            field,
        },
    )
    .await
}

/// Deletes a field nothing refers to.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("objectKey" = String, Path), ("fieldKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND, OBJECT_NOT_FOUND or FIELD_NOT_FOUND", body = ErrorBody), (status = 409, description = "IN_USE: a rollup, a rule or a screen uses it", body = ErrorBody)))]
#[delete(
    "/{branchRoot}/{moduleKey}/objects/{objectKey}/fields/{fieldKey}",
    guard = "metadata_write_root"
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
        &query,
        Edit::DeleteField {
            object: name,
            field: field_key,
        },
    )
    .await
}

/// Creates a screen; its HFX must compile.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ScreenBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("screenKey" = String, Path), WriteQuery),
        responses((status = 201, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND", body = ErrorBody), (status = 409, description = "ALREADY_EXISTS", body = ErrorBody), (status = 422, description = "HFX_COMPILE_ERROR, each with its `location`", body = ErrorBody)))]
#[post(
    "/{branchRoot}/{moduleKey}/screens/{screenKey}",
    guard = "metadata_write_root"
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
    let screen = body.0.into_screen(&screen_key);
    write(
        &state,
        &root,
        &writer,
        &query,
        Edit::CreateScreen {
            module: module_key,
            screen,
        },
    )
    .await
}

/// Replaces a screen; its HFX must compile.
#[utoipa::path(tag = "metadata", security(("bearer" = [])), request_body = ScreenBody,
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("screenKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or SCREEN_NOT_FOUND", body = ErrorBody), (status = 422, description = "HFX_COMPILE_ERROR, each with its `location`", body = ErrorBody)))]
#[put(
    "/{branchRoot}/{moduleKey}/screens/{screenKey}",
    guard = "metadata_write_root"
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
    let screen = body.0.into_screen(&screen_key);
    write(
        &state,
        &root,
        &writer,
        &query,
        Edit::ReplaceScreen {
            module: module_key,
            screen,
        },
    )
    .await
}

/// Deletes a screen.
#[utoipa::path(tag = "metadata", security(("bearer" = [])),
        params(("branchRoot" = String, Path, description = "`metadata@<branchId>`"), ("moduleKey" = String, Path), ("screenKey" = String, Path), WriteQuery),
        responses((status = 200, body = WriteResponse), (status = 404, description = "MODULE_NOT_FOUND or SCREEN_NOT_FOUND", body = ErrorBody)))]
#[delete(
    "/{branchRoot}/{moduleKey}/screens/{screenKey}",
    guard = "metadata_write_root"
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
        &query,
        Edit::DeleteScreen {
            module: module_key,
            screen: screen_key,
        },
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
