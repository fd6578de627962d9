//! `hf serve`: starts the database (embedded unless a URL is given), prepares it, serves HTTP,
//! and shuts everything down in order on SIGTERM or SIGINT.

use std::time::Instant;

use anyhow::Context;
use hf_server::{AppState, ServerConfig};
use hf_storage::{EmbeddedCluster, PoolSettings};

use crate::ServeArgs;

/// Runs the service until a signal stops it.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    // The embedded cluster is started before the async runtime and stopped after it, so it
    // outlives every request.
    let embedded = match &args.database_url {
        Some(_) => None,
        None => {
            let cluster = EmbeddedCluster::start(&args.data_dir)
                .context("starting the embedded PostgreSQL")?;
            tracing::info!(data_dir = %args.data_dir.display(), "embedded PostgreSQL is running");
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
    if let Some(mut cluster) = embedded {
        cluster.stop().context("stopping the embedded PostgreSQL")?;
        tracing::info!("embedded PostgreSQL stopped");
    }
    result
}

async fn serve(
    args: ServeArgs,
    embedded: Option<&EmbeddedCluster>,
    started: Instant,
) -> anyhow::Result<()> {
    let database_url = match (&args.database_url, embedded) {
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
    let settings = PoolSettings {
        max_size: args.pool_size,
        ..PoolSettings::default()
    };
    let pool =
        hf_storage::connect(&database_url, &settings).context("configuring the database pool")?;
    hf_server::prepare_database(&pool)
        .await
        .context("preparing the database")?;

    let metadata_path = args
        .metadata_path
        .clone()
        .unwrap_or_else(|| args.data_dir.join("metadata"));
    let mut config = ServerConfig::new(args.listen.clone(), metadata_path.clone());
    config.body_limit = args.body_limit;
    config.workers = args.workers;
    let state = AppState {
        pool,
        metadata_path: metadata_path.display().to_string(),
    };
    let server = hf_server::bind(&config, state)?;
    let handle = server.handle();
    tracing::info!(
        address = %server.addr,
        startup_ms = started.elapsed().as_millis() as u64,
        "hf is listening on http://{}",
        server.addr
    );

    let shutdown = tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down: finishing requests in flight");
        handle.stop(true).await;
    });
    server.run().await.context("serving HTTP")?;
    shutdown.abort();
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
