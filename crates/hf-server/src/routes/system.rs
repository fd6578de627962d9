//! The `system` group: liveness, status and the OpenAPI document.

use actix_web::{get, web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ErrorBody;
use crate::state::AppState;

/// `GET /health` answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// Always `ok` when the process answers.
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// Liveness: answers without touching the database.
#[utoipa::path(tag = "system", responses((status = 200, body = Health)))]
#[get("/health")]
pub async fn health() -> web::Json<Health> {
    web::Json(Health { status: "ok" })
}

/// `GET /status` answer when the database answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// `ok`.
    #[schema(example = "ok")]
    pub status: &'static str,
    /// Where the metadata repository lives.
    pub metadata_path: String,
    /// Facts about the database and the pool.
    pub database: DatabaseInfo,
    /// Present only when the database does not reflect the live branch (a crash between the
    /// branch's ref move and the database commit); `POST /apply` repairs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetadataSync>,
}

/// The `metadata` part of `/status`, shown only when the live branch and the database disagree.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataSync {
    /// Always `false` when present.
    pub in_sync: bool,
    /// The live branch's head commit.
    pub live_commit: String,
    /// The commit the database last recorded as applied; null when none was.
    pub applied_commit: Option<String>,
}

/// The database part of `/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseInfo {
    /// Round trip of the status query in milliseconds.
    pub latency_ms: u64,
    /// The current database's name.
    pub name: String,
    /// PostgreSQL's `server_version`.
    pub server_version: String,
    /// Connection counts.
    pub connections: Connections,
    /// TLS of the service's own connection.
    pub ssl: Ssl,
}

/// Connection counts of `/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Connections {
    /// Backends on this database running a statement now.
    pub active: i64,
    /// The server's `max_connections`.
    pub max: i64,
    /// Idle connections in our pool.
    pub pool_idle: usize,
    /// Connections held by our pool.
    pub pool_size: usize,
}

/// TLS facts of `/status`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ssl {
    /// Whether the service's connection is encrypted.
    pub enabled: bool,
    /// Key bits, 0 when off.
    pub bits: i32,
    /// Cipher, empty when off.
    pub cipher: String,
    /// TLS version, empty when off.
    pub version: String,
}

/// `GET /status` answer when the database does not answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct StatusFailure {
    /// What went wrong, for operators.
    pub error: String,
    /// Where the metadata repository lives.
    pub metadata_path: String,
    /// `unavailable`.
    #[schema(example = "unavailable")]
    pub status: &'static str,
}

/// Readiness and facts about the database; 503 with the failure body when it is unreachable.
#[utoipa::path(
    tag = "system",
    responses(
        (status = 200, body = Status),
        (status = 503, body = StatusFailure),
    )
)]
#[get("/status")]
pub async fn status(state: web::Data<AppState>) -> HttpResponse {
    let metadata_path = state.metadata_path.clone();
    match hf_storage::database_status(&state.pool).await {
        Ok(db) => HttpResponse::Ok().json(Status {
            metadata: drift(&state).await,
            status: "ok",
            metadata_path,
            database: DatabaseInfo {
                latency_ms: db.latency_ms,
                name: db.name,
                server_version: db.server_version,
                connections: Connections {
                    active: db.active,
                    max: db.max,
                    pool_idle: db.pool_idle,
                    pool_size: db.pool_size,
                },
                ssl: Ssl {
                    enabled: db.ssl.enabled,
                    bits: db.ssl.bits,
                    cipher: db.ssl.cipher,
                    version: db.ssl.version,
                },
            },
        }),
        Err(error) => {
            tracing::warn!(%error, "status: database unavailable");
            HttpResponse::ServiceUnavailable().json(StatusFailure {
                error: format!("database unavailable: {error}"),
                metadata_path,
                status: "unavailable",
            })
        }
    }
}

/// The disagreement between the live branch and the database, if any. A failure to compare is
/// logged and leaves the key out: `/status` reports the database, which answered.
async fn drift(state: &AppState) -> Option<MetadataSync> {
    match hf_storage::deploy::drift(&state.pool, &state.store).await {
        Ok(drift) => drift.map(|drift| MetadataSync {
            in_sync: false,
            live_commit: drift.live_commit,
            applied_commit: drift.applied_commit,
        }),
        Err(error) => {
            tracing::warn!(%error, "status: could not compare the live branch with the database");
            None
        }
    }
}

/// The OpenAPI 3.1 document of the whole interface.
#[utoipa::path(
    tag = "system",
    responses((status = 200, description = "The OpenAPI 3.1.0 document", content_type = "application/json"),
              (status = 500, body = ErrorBody))
)]
#[get("/openapi.json")]
pub async fn openapi(doc: web::Data<crate::app::OpenApiDocument>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(doc.json.clone())
}
