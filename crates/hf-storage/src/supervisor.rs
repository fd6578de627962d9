//! A watch over the embedded cluster: when its server dies, it is reaped and started again.
//!
//! PostgreSQL's postmaster is a child of `hf serve`. If it dies (killed, out of memory), an
//! unwatched child stays a zombie (and its PID file blocks a manual restart) while every request
//! answers 503. [`Supervised`] owns the cluster on a thread of its own that checks the child
//! every [`CHECK_EVERY`]: a dead server is reaped at once, logged, and started again; a start
//! that fails (the dead server's backends still hold its shared memory for a moment) is retried
//! with a backoff doubling from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`]. The pool needs nothing:
//! its broken connections fail their recycle check and are replaced once the server is back.
//! [`ClusterWatch`] tells `/status` what happened, and whether a start failed for want of room
//! on the disk under the data directory (a full disk stops PostgreSQL for good: it cannot write
//! its log ahead, and it cannot start again until an operator makes room; it then starts at the
//! next attempt, within [`MAX_BACKOFF`]).

use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{EmbeddedCluster, Error, Result};

/// How often the server is checked.
const CHECK_EVERY: Duration = Duration::from_millis(100);
/// The first wait before starting the server again after a failed start.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two starts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What the supervisor knows about the server, for `/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterHealth {
    /// Whether the server is running.
    pub running: bool,
    /// How many times it was started again after dying.
    pub restarts: u64,
    /// How it ended the last time it died (`signal: 9 (SIGKILL)`), if it ever did.
    pub last_exit: Option<String>,
    /// Whether the last start failed with the file system under the data directory full (less
    /// room than [`ROOM_TO_START`]): PostgreSQL stops when it cannot write its log ahead, and
    /// cannot start again until an operator makes room.
    pub disk_full: bool,
}

/// The room PostgreSQL needs to start after a crash: a segment of its write-ahead log.
pub const ROOM_TO_START: u64 = 16 << 20;

/// A cheap, cloneable view of a [`Supervised`] cluster's health.
#[derive(Debug, Clone, Default)]
pub struct ClusterWatch(Arc<Mutex<ClusterHealth>>);

impl ClusterWatch {
    /// The health as of the last check.
    pub fn health(&self) -> ClusterHealth {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClusterHealth> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Tells the supervising thread to stop, and wakes it from its waits.
#[derive(Debug, Default)]
struct StopSignal {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl StopSignal {
    /// Waits up to `timeout`; true when asked to stop.
    fn wait(&self, timeout: Duration) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, timeout, |stopped| !*stopped)
            .unwrap_or_else(PoisonError::into_inner);
        *stopped
    }

    fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_all();
    }
}

/// The embedded cluster under supervision; stop it with [`Supervised::stop`].
#[derive(Debug)]
pub struct Supervised {
    database_url: String,
    maintenance_url: String,
    database_name: &'static str,
    watch: ClusterWatch,
    stop: Arc<StopSignal>,
    thread: Option<JoinHandle<EmbeddedCluster>>,
}

impl EmbeddedCluster {
    /// Hands the running cluster to a supervising thread that restarts its server whenever it
    /// dies. Only a cluster this process owns can be supervised.
    pub fn supervise(self) -> Result<Supervised> {
        if !self.is_owned() {
            return Err(Error::Embedded(
                "only the process that runs the embedded PostgreSQL can supervise it".to_owned(),
            ));
        }
        let watch = ClusterWatch::default();
        watch.lock().running = self.is_running();
        let stop = Arc::new(StopSignal::default());
        let database_url = self.database_url();
        let maintenance_url = self.maintenance_url();
        let database_name = self.database_name();
        let thread = std::thread::Builder::new()
            .name("hf-pg-supervisor".to_owned())
            .spawn({
                let watch = watch.clone();
                let stop = Arc::clone(&stop);
                move || supervise(self, &watch, &stop)
            })
            .map_err(|e| Error::io("starting the PostgreSQL supervisor", e))?;
        Ok(Supervised {
            database_url,
            maintenance_url,
            database_name,
            watch,
            stop,
            thread: Some(thread),
        })
    }
}

impl Supervised {
    /// The connection string for the service's database inside the cluster.
    pub fn database_url(&self) -> String {
        self.database_url.clone()
    }

    /// The connection string for the maintenance database.
    pub fn maintenance_url(&self) -> String {
        self.maintenance_url.clone()
    }

    /// The name of the service's database inside the cluster.
    pub fn database_name(&self) -> &'static str {
        self.database_name
    }

    /// What the supervisor knows, for `/status`.
    pub fn watch(&self) -> ClusterWatch {
        self.watch.clone()
    }

    /// Ends the supervision and stops the server (fast shutdown), waiting for both.
    pub fn stop(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        self.stop.stop();
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let mut cluster = thread
            .join()
            .map_err(|_| Error::Internal("the PostgreSQL supervisor panicked".to_owned()))?;
        cluster.stop()
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if let Err(error) = self.finish() {
            tracing::warn!(%error, "stopping the embedded PostgreSQL failed");
        }
    }
}

/// The supervising loop; returns the cluster when asked to stop.
fn supervise(
    mut cluster: EmbeddedCluster,
    watch: &ClusterWatch,
    stop: &StopSignal,
) -> EmbeddedCluster {
    let mut backoff = FIRST_BACKOFF;
    let mut down_since: Option<Instant> = None;
    // Failed starts since the server last ran, and whether the disk was full at the last one
    // logged: a failed start is logged in full (with the end of PostgreSQL's log) when it is the
    // first or its cause changed, the others at debug, so a disk full for an hour does not log
    // a screenful every 5 s.
    let mut failed_starts: u64 = 0;
    let mut logged_disk_full: Option<bool> = None;
    loop {
        if let Some(status) = cluster.reap() {
            died(watch, status);
            down_since = Some(Instant::now());
        }
        let mut wait = CHECK_EVERY;
        if !cluster.is_running() {
            match cluster.restart() {
                Ok(()) => {
                    let down_ms = down_since
                        .take()
                        .map_or(0, |t| t.elapsed().as_millis() as u64);
                    let mut health = watch.lock();
                    health.running = true;
                    health.disk_full = false;
                    health.restarts += 1;
                    tracing::info!(
                        down_ms,
                        restarts = health.restarts,
                        failed_starts,
                        "embedded PostgreSQL started again"
                    );
                    backoff = FIRST_BACKOFF;
                    failed_starts = 0;
                    logged_disk_full = None;
                }
                Err(error) => {
                    let free = free_bytes(cluster.data_dir());
                    let disk_full = free.is_some_and(|free| free < ROOM_TO_START);
                    watch.lock().disk_full = disk_full;
                    failed_starts += 1;
                    let retry_in_ms = backoff.as_millis() as u64;
                    if logged_disk_full == Some(disk_full) {
                        tracing::debug!(%error, failed_starts, retry_in_ms, "starting the embedded PostgreSQL again failed again");
                    } else if disk_full {
                        tracing::error!(%error, free_bytes = free, retry_in_ms, "starting the embedded PostgreSQL again failed: the disk under its data directory is full; it starts once there is room (tried every 5 s at most, logged when it starts)");
                    } else {
                        tracing::warn!(%error, retry_in_ms, "starting the embedded PostgreSQL again failed (tried again with a backoff up to 5 s, logged when it starts)");
                    }
                    logged_disk_full = Some(disk_full);
                    wait = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        if stop.wait(wait) {
            return cluster;
        }
    }
}

/// The bytes an unprivileged process may still write to the file system holding `path`; `None`
/// when that cannot be told.
fn free_bytes(path: &Path) -> Option<u64> {
    let stats = rustix::fs::statvfs(path).ok()?;
    Some(stats.f_bavail.saturating_mul(stats.f_frsize))
}

fn died(watch: &ClusterWatch, status: ExitStatus) {
    tracing::error!(%status, "the embedded PostgreSQL exited; starting it again");
    let mut health = watch.lock();
    health.running = false;
    health.last_exit = Some(status.to_string());
}
