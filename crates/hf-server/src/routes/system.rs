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
    /// Present only when the service runs its own PostgreSQL: what its supervisor knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded: Option<EmbeddedInfo>,
    /// Present only when writes were refused for want of storage in the last minute: reads
    /// go on (so the status stays `ok` and 200), writes are answered 503 `STORAGE_UNAVAILABLE`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageTrouble>,
}

/// Writes refused for want of storage lately, as `/status` reports them.
#[derive(Debug, Serialize, ToSchema)]
pub struct StorageTrouble {
    /// What is wrong, for operators.
    #[schema(
        example = "writes are refused: the database's disk (or the metadata repository's) is full or failing"
    )]
    pub problem: &'static str,
    /// Writes refused since the first of them (a run ends a minute after its last refusal).
    pub writes_refused: u64,
    /// Seconds since the first of them.
    pub first_refused_secs_ago: u64,
    /// Seconds since the last of them.
    pub last_refused_secs_ago: u64,
}

impl StorageTrouble {
    fn of(state: &AppState) -> Option<Self> {
        let recent = state.storage_refusals.recent(std::time::Instant::now())?;
        Some(Self {
            problem: "writes are refused: the database's disk (or the metadata repository's) is full or failing",
            writes_refused: recent.count,
            first_refused_secs_ago: recent.first_secs_ago,
            last_refused_secs_ago: recent.last_secs_ago,
        })
    }
}

/// The embedded PostgreSQL's supervisor, as `/status` reports it.
#[derive(Debug, Serialize, ToSchema)]
pub struct EmbeddedInfo {
    /// Whether the server is running.
    pub running: bool,
    /// How many times it was started again after it died.
    pub restarts: u64,
    /// How it ended the last time it died, e.g. `signal: 9 (SIGKILL)`; null if it never did.
    pub last_exit: Option<String>,
    /// Whether its last start failed for want of room on the disk under its data directory:
    /// it starts again once an operator makes room.
    pub disk_full: bool,
}

impl EmbeddedInfo {
    fn of(state: &AppState) -> Option<Self> {
        let cluster = state.embedded.as_ref()?.health();
        Some(Self {
            running: cluster.running,
            restarts: cluster.restarts,
            last_exit: cluster.last_exit,
            disk_full: cluster.disk_full,
        })
    }
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
    /// The embedded PostgreSQL's supervisor (absent with an external database).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded: Option<EmbeddedInfo>,
}

/// Readiness and facts about the database; 503 with the failure body (and `Retry-After`) when
/// the database is unreachable or busy, or when a stale ref lock blocks metadata writes.
#[utoipa::path(
    tag = "system",
    responses(
        (status = 200, body = Status),
        (status = 503, body = StatusFailure),
    )
)]
#[get("/status")]
pub async fn status(state: web::Data<AppState>) -> HttpResponse {
    let db = match hf_storage::database_status(state.pool()).await {
        Ok(db) => db,
        Err(error) => {
            // Unauthenticated callers read this: it says what is down, never the driver's or
            // the pool's text (that goes to the log).
            tracing::warn!(%error, "status: database unavailable");
            if let Some(cluster) = state
                .embedded
                .as_ref()
                .map(hf_storage::ClusterWatch::health)
                .filter(|cluster| !cluster.running)
            {
                let what = if cluster.disk_full {
                    "the embedded PostgreSQL cannot start: the disk under its data directory is full"
                } else {
                    "the embedded PostgreSQL stopped and is being started again"
                };
                return unavailable(what.to_owned(), &state);
            }
            let what = match error.kind() {
                hf_storage::ErrorKind::Busy => {
                    "the database is busy: every pooled connection stayed in use"
                }
                hf_storage::ErrorKind::Timeout => "the database did not answer in time",
                _ => "the database is unreachable",
            };
            return unavailable(what.to_owned(), &state);
        }
    };
    if let Some(error) = blocking_lock(&state) {
        return unavailable(error, &state);
    }
    HttpResponse::Ok().json(Status {
        metadata: drift(&state).await,
        embedded: EmbeddedInfo::of(&state),
        storage: StorageTrouble::of(&state),
        status: "ok",
        metadata_path: state.metadata_path.clone(),
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
    })
}

/// The 503 failure body of `/status`, with `Retry-After`.
fn unavailable(error: String, state: &AppState) -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .insert_header((actix_web::http::header::RETRY_AFTER, "1"))
        .json(StatusFailure {
            error,
            metadata_path: state.metadata_path.clone(),
            status: "unavailable",
            embedded: EmbeddedInfo::of(state),
        })
}

/// A ref lock that blocks metadata writes (see `hf_metastore::locks`), as `/status` says it.
fn blocking_lock(state: &AppState) -> Option<String> {
    let lock = state.store().held_locks().into_iter().next()?;
    Some(format!(
        "metadata writes are blocked: branch `{}` is locked by {} ({} s old), probably left by a crashed writer; it is removed once {} s old",
        lock.branch,
        lock.file,
        lock.age_secs,
        hf_metastore::locks::STALE_LOCK_AGE.as_secs()
    ))
}

/// The disagreement between the live branch and the database, if any. A failure to compare is
/// logged and leaves the key out: `/status` reports the database, which answered.
async fn drift(state: &AppState) -> Option<MetadataSync> {
    match hf_storage::deploy::drift(state.pool(), state.store()).await {
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
