//! `POST /plan` and `POST /apply`: the database schema against a metadata branch.

use actix_web::{post, web};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth_gate::MetadataWriter;
use crate::dto::metadata::{ApplyDto, PlanChange, PlanDto, PlanSummary};
use crate::error::{ApiError, Code, ErrorBody};
use crate::extract::OptionalJsonBody;
use crate::state::AppState;

/// Body of `POST /plan`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanRequest {
    /// The branch to plan; the live branch when absent.
    branch: Option<String>,
}

/// Body of `POST /apply`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyRequest {
    /// The branch to apply; the live branch when absent. Another branch must descend from the
    /// live head, which then moves to it.
    branch: Option<String>,
    /// Allow changes that lose data.
    #[serde(default)]
    allow_destructive: bool,
}

/// The answer of `POST /plan`.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanResponse {
    /// The planned branch.
    branch: String,
    /// Its head commit.
    commit: String,
    /// The ordered steps; empty when the database is up to date.
    changes: Vec<PlanChange>,
    /// Counts.
    summary: PlanSummary,
}

/// The answer of `POST /apply`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApplyResponse {
    /// The applied branch.
    branch: String,
    /// The applied commit (now the live head).
    commit: String,
    /// Statement counts.
    apply: ApplyDto,
}

fn branch_or_live(state: &AppState, branch: Option<String>) -> Result<String, ApiError> {
    match branch {
        None => Ok(state.live_branch().to_owned()),
        Some(branch) if hf_model::key::is_valid_branch_id(&branch) => Ok(branch),
        Some(branch) => Err(ApiError::field(
            Code::InvalidBranch,
            format!(
                "`{}` is not a valid branch id.",
                branch.chars().take(100).collect::<String>()
            ),
            "branch",
        )),
    }
}

/// Dry run: the DDL that would bring the database to the branch's metadata.
#[utoipa::path(tag = "system", security(("bearer" = [])), request_body(content = Option<PlanRequest>, description = "Optional: none plans the live branch"),
    responses((status = 200, body = PlanResponse),
        (status = 400, description = "INVALID_BRANCH", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
        (status = 404, description = "BRANCH_NOT_FOUND", body = ErrorBody),
        (status = 422, description = "METADATA_UNREADABLE: the branch's files do not parse", body = ErrorBody)))]
#[post("/plan")]
pub async fn plan(
    state: web::Data<AppState>,
    _admin: MetadataWriter,
    body: OptionalJsonBody<PlanRequest>,
) -> Result<web::Json<PlanResponse>, ApiError> {
    let branch = branch_or_live(&state, body.0.unwrap_or_default().branch)?;
    let planned = state.app.plan(Some(&branch)).await?;
    let PlanDto { changes, summary } = planned.plan.into();
    Ok(web::Json(PlanResponse {
        branch: planned.branch,
        commit: planned.commit,
        changes,
        summary,
    }))
}

/// Applies a branch's metadata to the database in one transaction.
#[utoipa::path(tag = "system", security(("bearer" = [])), request_body(content = Option<ApplyRequest>, description = "Optional: none applies the live branch"),
    responses((status = 200, body = ApplyResponse),
        (status = 400, description = "INVALID_BRANCH", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: not an administrator", body = ErrorBody),
        (status = 404, description = "BRANCH_NOT_FOUND", body = ErrorBody),
        (status = 409, description = "BRANCH_DIVERGED, DESTRUCTIVE_CHANGE (without allowDestructive), IN_USE (the branch breaks a screen that works in what the database reflects) or METADATA_CONFLICT", body = ErrorBody),
        (status = 422, description = "APPLY_FAILED (nothing changed) or METADATA_UNREADABLE", body = ErrorBody),
        (status = 503, description = "DATABASE_UNAVAILABLE, POOL_BUSY or METADATA_LOCKED (another live write held the live branch for 30 s; nothing changed)", body = ErrorBody)))]
#[post("/apply")]
pub async fn apply(
    state: web::Data<AppState>,
    _admin: MetadataWriter,
    body: OptionalJsonBody<ApplyRequest>,
) -> Result<web::Json<ApplyResponse>, ApiError> {
    let request = body.0.unwrap_or_default();
    let branch = branch_or_live(&state, request.branch)?;
    let applied = state
        .app
        .apply(Some(&branch), request.allow_destructive)
        .await?;
    Ok(web::Json(ApplyResponse {
        branch: applied.branch,
        commit: applied.commit,
        apply: applied.stats.into(),
    }))
}
