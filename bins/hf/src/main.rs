//! The `hf` command line: `hf serve` runs the service; the other subcommands are the tools a
//! user of the service reaches for (plan, apply, compile, query, principal, keys, secrets,
//! metadata).
//!
//! `anyhow` lives here and in xtask only: this is where errors become messages for people.

mod compile;
mod keys;
mod memory;
mod metadata;
mod plan;
mod principal;
mod query;
mod secrets;
mod serve;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// hf: a metadata-driven application backend.
#[derive(Debug, Parser)]
#[command(name = "hf", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP service.
    Serve(ServeArgs),
    /// Manage principals (users) without going through HTTP.
    Principal(principal::PrincipalArgs),
    /// Manage the token signing keys.
    Keys(keys::KeysArgs),
    /// Manage the secrets the instances share (the one that signs paging cursors).
    Secrets(secrets::SecretsArgs),
    /// Print the DDL that would bring the database to a metadata branch (changes nothing).
    Plan(plan::PlanArgs),
    /// Apply a metadata branch to the database in one transaction.
    Apply(plan::ApplyArgs),
    /// Run a HOQS query as a principal and print the records.
    Query(query::QueryArgs),
    /// Compile an HFX screen (and its sidecar) and print the module, or the errors.
    Compile(compile::CompileArgs),
    /// Export the metadata (every branch, full history) as a git repository, or import one.
    Metadata(metadata::MetadataArgs),
    /// Compile one screen read as JSON on stdin, answering on stdout: how `hf serve` compiles
    /// screens, each in a process of its own it can kill (not for people).
    #[command(name = "compile-worker", hide = true)]
    CompileWorker,
}

/// The name of the hidden subcommand that runs a compile worker.
pub const COMPILE_WORKER: &str = "compile-worker";

/// Where the database is: shared by `hf serve` and the tools, so they always find the same one.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL URL; when unset, hf runs its own private cluster under the data directory.
    #[arg(long, env = "HF_DATABASE_URL", hide_env_values = true, global = true)]
    pub database_url: Option<String>,
    /// Directory for the service's own files (embedded cluster, metadata repository).
    #[arg(long, env = "HF_DATA_DIR", default_value = "./.hf", global = true)]
    pub data_dir: PathBuf,
}

/// Flags of `hf serve`; each also reads its `HF_*` environment variable.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on; a host name such as `localhost` listens on every one of its
    /// addresses, on one port.
    #[arg(long, env = "HF_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Where the database is.
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// This machine's cache of the metadata objects (the metadata itself is in the database); a
    /// git repository found there when the database has no branch yet is imported at start.
    /// Default `<data dir>/metadata`.
    #[arg(long, env = "HF_METADATA_PATH")]
    pub metadata_path: Option<PathBuf>,
    /// The branch the database reflects.
    #[arg(long, env = "HF_LIVE_BRANCH", default_value = "main")]
    pub live_branch: String,
    /// Lifetime of issued tokens, in seconds.
    #[arg(long, env = "HF_TOKEN_TTL", default_value_t = 3600)]
    pub token_ttl: u64,
    /// When no principal exists yet, create `admin` with this password.
    #[arg(long, env = "HF_ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
    /// The name of the administrator created when no principal exists yet.
    #[arg(long, env = "HF_ADMIN_NAME", default_value = "admin")]
    pub admin_name: String,
    /// Largest accepted request body, in bytes.
    #[arg(long, env = "HF_BODY_LIMIT", default_value_t = 1024 * 1024)]
    pub body_limit: usize,
    /// Most database connections the service holds.
    #[arg(long, env = "HF_POOL_SIZE", default_value_t = 16)]
    pub pool_size: usize,
    /// HTTP worker threads (default: one per core).
    #[arg(long, env = "HF_WORKERS")]
    pub workers: Option<usize>,
    /// The address users reach the service at, e.g. `https://hf.example.com`; when it is https,
    /// the `hf_runtime` cookie carries `Secure` even though TLS ends at a proxy.
    #[arg(long, env = "HF_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Reverse proxies whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed: addresses
    /// or CIDR ranges, comma-separated (none by default).
    #[arg(long, env = "HF_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<String>,
    /// Seconds a client may take to send a request's head: a connection's first from the
    /// connection's start, every later one from its first byte (answered 408 after).
    #[arg(long, env = "HF_HEADER_TIMEOUT", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: u64,
    /// Seconds a client may take to send a request's whole body after its head (408 after).
    #[arg(long, env = "HF_BODY_TIMEOUT", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout: u64,
    /// Seconds an idle keep-alive connection stays open.
    #[arg(long, env = "HF_KEEP_ALIVE", default_value_t = 5)]
    pub keep_alive: u64,
    /// Seconds a response may go untaken (sent data unacknowledged, the client's receive window
    /// shut, or the service's writes refused because the client takes too little) before the
    /// connection is reset.
    #[arg(long, env = "HF_SEND_TIMEOUT", default_value_t = 15)]
    pub send_timeout: u64,
    /// Open connections in all (beyond it, new connections wait in the listen backlog).
    #[arg(long, env = "HF_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,
    /// Open connections from one client address (beyond it: 429 and closed).
    #[arg(long, env = "HF_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 256)]
    pub max_connections_per_address: usize,
    /// Web origins whose pages may call the API cross-origin, e.g. `https://app.example.com`,
    /// comma-separated (none by default).
    #[arg(long, env = "HF_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,
    /// Seconds between returns of freed heap memory to the operating system (0: never).
    #[arg(long, env = "HF_MEMORY_TRIM_INTERVAL", default_value_t = 10)]
    pub memory_trim_interval: u64,
    /// Seconds a screen's compile may take, its wait for a free core included (1 to 3 600); the
    /// compile is stopped after it (504 `TIMEOUT`).
    #[arg(long, env = "HF_COMPILE_TIMEOUT", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub compile_timeout: u64,
    /// Load the demo CRM (`fixtures/demo`) into an empty live branch and apply it.
    #[arg(long)]
    pub demo: bool,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Compile(args) => return compile::run(args),
        Command::CompileWorker => return compile::run_worker(),
        _ => {}
    }
    // Held until `main` returns: dropping it writes the log lines still queued.
    let _log_writer = init_tracing(matches!(cli.command, Command::Serve(_)));
    let result = match cli.command {
        Command::Serve(args) => serve::run(args),
        Command::Principal(args) => principal::run(args),
        Command::Keys(args) => keys::run(args),
        Command::Secrets(args) => secrets::run(args),
        Command::Plan(args) => plan::run_plan(args),
        Command::Apply(args) => plan::run_apply(args),
        Command::Query(args) => query::run(args),
        Command::Compile(_) | Command::CompileWorker => Ok(()),
        Command::Metadata(args) => metadata::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("hf: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The service logs from `info` up; the tools only warnings, on stderr, so that what they print
/// (setup tokens, tables) stays clean for scripts. Colours only on a terminal: a log file or
/// journald gets plain text.
///
/// The service logs a line per request, so it writes its log on a thread of its own: a line is
/// queued, and the thread writes every line waiting in one `write` as soon as it can, instead of
/// one `write` per line on the thread answering the request (which cost a `GET /health` about a
/// quarter of its CPU). A log that cannot keep up drops lines beyond [`LOG_QUEUE_LINES`] rather
/// than slow the answers or grow without bound; the returned guard writes what is queued when
/// the process ends.
fn init_tracing(serving: bool) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    use std::io::IsTerminal;
    let default = if serving { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("HF_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false);
    if serving {
        let output = std::io::BufWriter::with_capacity(LOG_BATCH_BYTES, std::io::stdout());
        let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
            .buffered_lines_limit(LOG_QUEUE_LINES)
            .lossy(true)
            .thread_name("hf-log")
            .finish(output);
        logs.with_ansi(std::io::stdout().is_terminal())
            .with_writer(writer)
            .init();
        Some(guard)
    } else {
        logs.with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init();
        None
    }
}

/// Most log lines the service queues for its log thread (a few megabytes of text).
const LOG_QUEUE_LINES: usize = 16 * 1024;
/// Most bytes of log the log thread writes at once.
const LOG_BATCH_BYTES: usize = 64 * 1024;
