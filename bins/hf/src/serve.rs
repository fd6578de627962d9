//! `hf serve`: starts the database (embedded unless a URL is given), prepares it, serves HTTP,
//! and shuts everything down in order on SIGTERM or SIGINT.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use hf_server::{AppState, ServerConfig};
use hf_storage::{EmbeddedCluster, PoolSettings, Supervised};

use crate::ServeArgs;

/// Runs the service until a signal stops it.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    crate::memory::trim_every(Duration::from_secs(args.memory_trim_interval));
    // The embedded cluster is started before the async runtime and stopped after it, so it
    // outlives every request.
    let embedded = match &args.database.database_url {
        Some(_) => None,
        None => {
            let cluster = EmbeddedCluster::start(&args.database.data_dir)
                .context("starting the embedded PostgreSQL")?
                .supervise()
                .context("supervising the embedded PostgreSQL")?;
            tracing::info!(data_dir = %args.database.data_dir.display(), "embedded PostgreSQL is running");
            Some(cluster)
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let local = tokio::task::LocalSet::new();
    let result = local.block_on(&runtime, serve(args, embedded.as_ref(), started));
    drop(runtime);
    if let Some(cluster) = embedded {
        cluster.stop().context("stopping the embedded PostgreSQL")?;
        tracing::info!("embedded PostgreSQL stopped");
    }
    result
}

async fn serve(
    args: ServeArgs,
    embedded: Option<&Supervised>,
    started: Instant,
) -> anyhow::Result<()> {
    let database_url = match (&args.database.database_url, embedded) {
        (Some(url), _) => url.clone(),
        (None, Some(cluster)) => {
            hf_storage::create_database_if_missing(
                &cluster.maintenance_url(),
                cluster.database_name(),
            )
            .await
            .context("creating the service's database")?;
            cluster.database_url()
        }
        (None, None) => anyhow::bail!("no database configured"),
    };
    let workers = args.workers.unwrap_or_else(hf_server::default_workers);
    let settings = PoolSettings {
        max_size: args.pool_size,
        data_shards: workers,
        ..PoolSettings::default()
    };
    let pool =
        hf_storage::connect(&database_url, &settings).context("configuring the database pool")?;
    hf_server::prepare_database(&pool)
        .await
        .context("preparing the database")?;
    let auth_config = crate::principal::auth_config(&args);
    let (auth, bootstrap) = hf_server::auth::prepare(&pool, &database_url, &auth_config)
        .await
        .context("preparing authentication")?;

    let metadata_path = args
        .metadata_path
        .clone()
        .unwrap_or_else(|| args.database.data_dir.join("metadata"));
    hf_metastore::disable_git_object_cache();
    // The metadata lives in the database; the repository on disk only caches its objects. An
    // instance whose metadata used to live there imports it on its first start.
    let opened = Instant::now();
    let (store, imported) = hf_storage::metadata::open_store_importing(
        &pool,
        &database_url,
        &metadata_path,
        &args.live_branch,
        &hf_storage::metadata::SharedOptions::default(),
    )
    .await
    .with_context(|| {
        format!(
            "opening the metadata store (cache {})",
            metadata_path.display()
        )
    })?;
    if let Some(report) = imported {
        tracing::info!(
            branches = report.created.len(),
            objects = report.objects,
            from = %metadata_path.display(),
            "imported the on-disk metadata repository into the database"
        );
    }
    tracing::debug!(
        ms = opened.elapsed().as_millis() as u64,
        "metadata store open"
    );
    let compiler =
        hf_app::Compiler::new(compile_worker()?, Duration::from_secs(args.compile_timeout));
    let app = hf_app::App::with_compiler(pool, store, compiler);
    if args.demo {
        load_demo(&app).await?;
    }
    match app.drift().await {
        Ok(None) => {}
        Ok(Some(drift)) => tracing::warn!(
            live_commit = %drift.live_commit,
            applied_commit = drift.applied_commit.as_deref().unwrap_or("none"),
            "the database does not reflect the live branch; POST /apply (or `hf apply`) repairs it"
        ),
        Err(error) => tracing::warn!(%error, "could not compare the live branch with the database"),
    }
    let mut config = ServerConfig::new(args.listen.clone(), metadata_path.clone());
    config.body_limit = args.body_limit;
    config.workers = Some(workers);
    config.limits = hf_server::limits::Limits {
        header_timeout: Duration::from_secs(args.header_timeout),
        body_timeout: Duration::from_secs(args.body_timeout),
        keep_alive: Duration::from_secs(args.keep_alive),
        send_timeout: Duration::from_secs(args.send_timeout),
        max_connections: args.max_connections,
        max_connections_per_address: args.max_connections_per_address,
        ..hf_server::limits::Limits::default()
    };
    config.auth = auth_config;
    config.cors_origins = hf_server::cors::CorsOrigins::new(&args.cors_origins)?;
    config.public_access = hf_server::public_access::PublicAccess::new(
        args.public_url.as_deref(),
        &args.trusted_proxies,
    )?;
    // The shared secrets (the cursor-signing key) are read now, so a database that cannot give
    // them stops the start rather than the first paged query.
    app.load_secrets()
        .await
        .context("reading the shared secrets from the database")?;
    let state = AppState {
        app,
        metadata_path: metadata_path.display().to_string(),
        auth: Arc::new(auth),
        embedded: embedded.map(Supervised::watch),
        storage_refusals: Default::default(),
    };
    let server = hf_server::bind(&config, state)?;
    let handle = server.handle();
    let urls: Vec<String> = server
        .addrs
        .iter()
        .map(|addr| format!("http://{addr}"))
        .collect();
    tracing::info!(
        address = %server.addr,
        startup_ms = started.elapsed().as_millis() as u64,
        "hf is listening on {}",
        urls.join(" and ")
    );
    crate::principal::report_bootstrap(&bootstrap, server.addr);

    let shutdown = tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: finishing requests in flight");
        handle.stop(true).await;
    });
    server.run().await.context("serving HTTP")?;
    shutdown.abort();
    Ok(())
}

/// The demo metadata (`fixtures/demo`), built into the binary so `--demo` works wherever the
/// binary is installed.
static DEMO: include_dir::Dir<'static> =
    include_dir::include_dir!("$CARGO_MANIFEST_DIR/../../fixtures/demo");

/// Every file of the embedded demo, with its path relative to the demo's root.
fn demo_files() -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![&DEMO];
    while let Some(dir) = pending.pop() {
        for entry in dir.entries() {
            match entry {
                include_dir::DirEntry::Dir(child) => pending.push(child),
                include_dir::DirEntry::File(file) => files.push((
                    file.path().to_string_lossy().replace('\\', "/"),
                    file.contents().to_vec(),
                )),
            }
        }
    }
    files
}

/// Screens compile in processes of their own, this very executable run as `hf compile-worker`
/// (see `hf_app::compile`): `/proc/self/exe` where there is one, so the worker is this build
/// even after the file was replaced by an upgrade, since the two speak an unversioned protocol.
fn compile_worker() -> anyhow::Result<hf_app::compile::Isolation> {
    let own = std::path::Path::new("/proc/self/exe");
    let program = if own.exists() {
        own.to_path_buf()
    } else {
        std::env::current_exe().context("finding the hf executable to compile screens with")?
    };
    Ok(hf_app::compile::Isolation::Process {
        program,
        args: vec![crate::COMPILE_WORKER.to_owned()],
    })
}

/// Loads the demo metadata into an empty live branch and applies it, as one live write.
async fn load_demo(app: &hf_app::App) -> anyhow::Result<()> {
    let seeded = app
        .seed_live(demo_files(), "the demo")
        .await
        .context("loading the demo metadata")?;
    match seeded {
        Some(applied) => tracing::info!(
            commit = %applied.commit,
            tables_created = applied.stats.tables_created,
            "loaded the demo metadata"
        ),
        None => {
            tracing::info!("the live branch already holds metadata; the demo was not loaded again")
        }
    }
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the service still runs; it just cannot stop gracefully.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
}
