//! The embedded PostgreSQL cluster `hf serve` runs when no database URL is given.
//!
//! The cluster lives under `<data dir>/pg`, listens only on a Unix socket inside that directory
//! (no TCP port), and is stopped when the service exits. PostgreSQL refuses to run as root, so
//! when hf runs as root the server processes run as the unprivileged `postgres` system user.

use std::ffi::CString;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// The database the service uses inside its embedded cluster.
const DATABASE: &str = "hf";
/// The superuser `initdb` creates; the service connects as it.
const SUPERUSER: &str = "postgres";
/// Only names the socket file; nothing listens on TCP.
const PORT: u16 = 5432;
/// The longest Unix socket path Linux accepts, minus the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;
/// How long the server may take to start or stop.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running private PostgreSQL cluster, stopped on [`EmbeddedCluster::stop`] or drop.
#[derive(Debug)]
pub struct EmbeddedCluster {
    data: PathBuf,
    socket_dir: PathBuf,
    child: Option<Child>,
    /// Held while this process owns the cluster; another hf sees it taken and attaches instead
    /// of starting (and never stops a server it does not own).
    lock: Option<fs::File>,
    /// How to start the server (again); `None` when attached to another process's server.
    server: Option<ServerCommand>,
}

/// What starting the server takes: kept so that a supervisor can restart it.
#[derive(Debug, Clone)]
struct ServerCommand {
    bindir: PathBuf,
    log_path: PathBuf,
    run_as: Option<RunAs>,
}

/// Why one attempt to start the server failed.
#[derive(Debug)]
enum StartFailure {
    /// The backends of a server that died still hold its shared memory block; PostgreSQL
    /// refuses to start until they have exited, which they do on their own shortly.
    LeftoverMemory(Error),
    /// Anything else.
    Other(Error),
}

impl From<Error> for StartFailure {
    fn from(error: Error) -> Self {
        StartFailure::Other(error)
    }
}

/// The line PostgreSQL logs when a dead server's backends still hold its shared memory.
const LEFTOVER_MEMORY: &str = "pre-existing shared memory block";

/// The operating system user the server processes run as when hf itself runs as root.
#[derive(Debug, Clone, Copy)]
struct RunAs {
    uid: u32,
    gid: u32,
}

impl EmbeddedCluster {
    /// Creates the cluster on first use and starts it, owning it until stopped. Refuses when
    /// another hf process owns the cluster of this data directory. Blocking: call it before
    /// serving, or inside `spawn_blocking`.
    pub fn start(data_dir: &Path) -> Result<Self> {
        match Self::attach_or_start(data_dir)? {
            cluster if cluster.is_owned() => Ok(cluster),
            _ => Err(Error::Embedded(format!(
                "another hf process is already running the database in {}; stop it first, or \
                 choose another HF_DATA_DIR",
                data_dir.display()
            ))),
        }
    }

    /// For command-line tools: uses the cluster a running `hf serve` owns, or starts (and later
    /// stops) it when nobody does.
    pub fn attach_or_start(data_dir: &Path) -> Result<Self> {
        let bindir = find_postgres_bindir().ok_or_else(|| {
            Error::Embedded(
                "no PostgreSQL server binaries (initdb, postgres) found via `pg_config --bindir` \
                 or in /usr/lib/postgresql/*/bin: install the PostgreSQL server (for example \
                 `apt-get install postgresql`), or set HF_DATABASE_URL to use an existing server"
                    .to_owned(),
            )
        })?;
        fs::create_dir_all(data_dir)
            .map_err(|e| Error::io(format!("creating {}", data_dir.display()), e))?;
        let data_dir = data_dir
            .canonicalize()
            .map_err(|e| Error::io(format!("resolving {}", data_dir.display()), e))?;
        let root = data_dir.join("pg");
        let data = root.join("data");
        let socket_dir = root.join("run");
        let socket_file = socket_dir.join(format!(".s.PGSQL.{PORT}"));
        if socket_file.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(Error::Embedded(format!(
                "the data directory path is too long for a Unix socket ({}); choose a shorter \
                 HF_DATA_DIR",
                socket_file.display()
            )));
        }
        let Some(lock) = try_lock(&data_dir)? else {
            return Ok(Self {
                data,
                socket_dir,
                child: None,
                lock: None,
                server: None,
            });
        };
        let run_as = run_as()?;
        if let Some(user) = run_as {
            check_reachable(&data_dir, user)?;
        }
        for dir in [&root, &socket_dir] {
            create_private_dir(dir, run_as)?;
        }
        if !data.join("PG_VERSION").exists() {
            init_cluster(&bindir, &root, &data, run_as)?;
        }
        stop_leftover_server(&data)?;

        let mut cluster = Self {
            data,
            socket_dir,
            child: None,
            lock: Some(lock),
            server: Some(ServerCommand {
                bindir,
                log_path: root.join("postgres.log"),
                run_as,
            }),
        };
        cluster.start_with_retries()?;
        Ok(cluster)
    }

    /// Starts the server, retrying with backoff (within [`STARTUP_TIMEOUT`]) while the backends
    /// of a server that died still hold its shared memory: they exit on their own once they
    /// notice their postmaster is gone, and PostgreSQL's refusal until then is what keeps two
    /// servers off one data directory.
    fn start_with_retries(&mut self) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let mut backoff = Duration::from_millis(100);
        loop {
            match self.start_server() {
                Ok(()) => return Ok(()),
                Err(StartFailure::LeftoverMemory(error)) if Instant::now() + backoff < deadline => {
                    tracing::warn!(
                        retry_in_ms = backoff.as_millis() as u64,
                        "the backends of an earlier PostgreSQL still hold its shared memory; retrying the start"
                    );
                    tracing::debug!(%error, "start-up failure");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                Err(StartFailure::LeftoverMemory(error) | StartFailure::Other(error)) => {
                    return Err(error)
                }
            }
        }
    }

    /// Starts the server once and waits until it accepts connections.
    fn start_server(&mut self) -> std::result::Result<(), StartFailure> {
        let Some(server) = self.server.clone() else {
            return Err(Error::Embedded(
                "this process does not own the embedded PostgreSQL, so it cannot start it"
                    .to_owned(),
            )
            .into());
        };
        let log_path = &server.log_path;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(|e| Error::io(format!("opening {}", log_path.display()), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| Error::io("duplicating the log file", e))?;
        let postgres = server.bindir.join("postgres");
        let mut command = Command::new(&postgres);
        command
            .arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(PORT.to_string())
            .arg("-c")
            .arg("listen_addresses=")
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.socket_dir.display()
            ))
            .arg("-c")
            .arg("unix_socket_permissions=0700")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own process group: Ctrl-C in the terminal must reach hf first, so requests in
            // flight finish before the database stops.
            .process_group(0);
        apply_run_as(&mut command, server.run_as);
        let child = command
            .spawn()
            .map_err(|e| Error::io(format!("starting {}", postgres.display()), e))?;
        self.child = Some(child);
        self.wait_until_ready(log_path)
    }

    /// Reaps the server if it has exited (so it never lingers as a zombie) and says how it
    /// ended; `None` while it runs, or when this process does not run it.
    pub fn reap(&mut self) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Some(status)
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "checking the embedded PostgreSQL failed");
                None
            }
        }
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data
    }

    /// Whether the server this process started is running (as of the last [`Self::reap`]).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts the server again after it exited: one attempt, which fails quickly while a dead
    /// server's backends still hold its shared memory. The caller retries with backoff.
    pub fn restart(&mut self) -> Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        self.start_server().map_err(|failure| match failure {
            StartFailure::LeftoverMemory(error) | StartFailure::Other(error) => error,
        })
    }

    /// Whether this process started the server (and so stops it).
    pub fn is_owned(&self) -> bool {
        self.lock.is_some()
    }

    /// The connection string for the service's database inside the cluster.
    pub fn database_url(&self) -> String {
        self.url_for(DATABASE)
    }

    /// The connection string for the maintenance database, used to create the service's one.
    pub fn maintenance_url(&self) -> String {
        self.url_for("postgres")
    }

    /// The name of the service's database inside the cluster.
    pub fn database_name(&self) -> &'static str {
        DATABASE
    }

    fn url_for(&self, database: &str) -> String {
        format!(
            "host={} port={PORT} user={SUPERUSER} dbname={database}",
            self.socket_dir.display()
        )
    }

    /// Stops the server with a fast shutdown (open sessions are ended, data is flushed) and waits
    /// for it to exit.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if child
            .try_wait()
            .map_err(|e| Error::io("checking postgres", e))?
            .is_some()
        {
            return Ok(());
        }
        signal(child.id(), libc::SIGINT);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if child
                .try_wait()
                .map_err(|e| Error::io("waiting for postgres", e))?
                .is_some()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                signal(child.id(), libc::SIGQUIT);
                child
                    .wait()
                    .map_err(|e| Error::io("waiting for postgres", e))?;
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_until_ready(&mut self, log_path: &Path) -> std::result::Result<(), StartFailure> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let pid_file = self.data.join("postmaster.pid");
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child
                    .try_wait()
                    .map_err(|e| Error::io("checking postgres", e))?
                {
                    self.child = None;
                    let tail = log_tail(log_path);
                    let error = Error::Embedded(format!(
                        "postgres exited during start-up ({status}); its log {} ends with:\n{tail}",
                        log_path.display(),
                    ));
                    return Err(if tail.contains(LEFTOVER_MEMORY) {
                        StartFailure::LeftoverMemory(error)
                    } else {
                        StartFailure::Other(error)
                    });
                }
            }
            // The eighth line of postmaster.pid is the server's state; `pg_ctl` waits for "ready".
            // The first is the server's PID: a file left by a server that died says "ready" too.
            let our_pid = self.child.as_ref().map(|child| child.id().to_string());
            if let Ok(contents) = fs::read_to_string(&pid_file) {
                let mut lines = contents.lines().map(str::trim);
                let pid = lines.next();
                if pid == our_pid.as_deref() && lines.nth(6) == Some("ready") {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(StartFailure::Other(Error::Embedded(format!(
                    "postgres did not become ready within {} s; see {}",
                    STARTUP_TIMEOUT.as_secs(),
                    log_path.display()
                ))));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            tracing::warn!(%error, "stopping the embedded PostgreSQL failed");
        }
    }
}

/// Takes the data directory's lock file, or returns `None` when another process holds it.
fn try_lock(data_dir: &Path) -> Result<Option<fs::File>> {
    use std::os::fd::AsRawFd;
    let path = data_dir.join("hf.lock");
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    // SAFETY: flock on a file descriptor we own; the lock is released when the file is closed.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    Ok(taken.then_some(file))
}

/// Finds the directory holding `initdb` and `postgres`: `pg_config --bindir` first, else the
/// newest `/usr/lib/postgresql/<version>/bin`.
pub fn find_postgres_bindir() -> Option<PathBuf> {
    let has_server = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    if let Ok(output) = Command::new("pg_config").arg("--bindir").output() {
        if output.status.success() {
            let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
            if has_server(&dir) {
                return Some(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_server(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

fn init_cluster(bindir: &Path, root: &Path, data: &Path, run_as: Option<RunAs>) -> Result<()> {
    // initdb into a scratch directory and rename it into place, so an interrupted first run never
    // leaves a half-made cluster behind.
    let scratch = root.join("data.initdb");
    if scratch.exists() {
        fs::remove_dir_all(&scratch)
            .map_err(|e| Error::io(format!("removing {}", scratch.display()), e))?;
    }
    let mut command = Command::new(bindir.join("initdb"));
    command
        .arg("-D")
        .arg(&scratch)
        .args([
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
        ])
        .stdin(Stdio::null());
    apply_run_as(&mut command, run_as);
    let output = command
        .output()
        .map_err(|e| Error::io(format!("running {}", bindir.join("initdb").display()), e))?;
    if !output.status.success() {
        return Err(Error::Embedded(format!(
            "initdb failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    fs::rename(&scratch, data).map_err(|e| Error::io(format!("moving {}", data.display()), e))
}

/// A server left running by an hf that was killed would hold the data directory; stop it. A
/// `postmaster.pid` naming a live process that is not a postgres of this directory (its PID was
/// reused) is stale and removed, which PostgreSQL itself refuses to do. One naming a process that
/// is gone is left to PostgreSQL: it then checks that no backend of that server still holds its
/// shared memory, the check that keeps two servers off one data directory.
fn stop_leftover_server(data: &Path) -> Result<()> {
    let pid_file = data.join("postmaster.pid");
    let Ok(contents) = fs::read_to_string(&pid_file) else {
        return Ok(());
    };
    let pid = contents
        .lines()
        .next()
        .and_then(|line| line.trim().parse::<i32>().ok());
    let is_our_postgres = pid.is_some_and(|pid| {
        fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.contains("postgres") && cmdline.contains(&*data.to_string_lossy())
        })
    });
    match pid {
        Some(pid) if is_our_postgres => {
            tracing::warn!(pid, "stopping a PostgreSQL left running by an earlier hf");
            signal(pid.unsigned_abs(), libc::SIGINT);
            let deadline = Instant::now() + STARTUP_TIMEOUT;
            while Path::new(&format!("/proc/{pid}")).exists() {
                if Instant::now() > deadline {
                    return Err(Error::Embedded(format!(
                        "an earlier PostgreSQL (pid {pid}) still holds {} and does not stop",
                        data.display()
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }
        Some(pid) if !Path::new(&format!("/proc/{pid}")).exists() => Ok(()),
        _ => {
            tracing::warn!("removing a stale postmaster.pid");
            fs::remove_file(&pid_file)
                .map_err(|e| Error::io(format!("removing {}", pid_file.display()), e))
        }
    }
}

fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

fn signal(pid: u32, signal: i32) {
    if let Ok(pid) = i32::try_from(pid) {
        // SAFETY: kill(2) has no memory-safety preconditions; a stale pid only yields ESRCH.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// When hf runs as root, PostgreSQL must run as the `postgres` system user.
fn run_as() -> Result<Option<RunAs>> {
    // SAFETY: geteuid cannot fail and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let name = CString::new("postgres").map_err(|e| Error::Embedded(e.to_string()))?;
    // SAFETY: getpwnam returns NULL or a pointer to static storage that we read at once, before
    // any other call that could overwrite it.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        return Err(Error::Embedded(
            "hf runs as root and PostgreSQL refuses to, but there is no `postgres` system user \
             to run it as: run hf as an ordinary user, or set HF_DATABASE_URL"
                .to_owned(),
        ));
    }
    // SAFETY: entry is non-null and points at a valid passwd record (see above).
    let (uid, gid) = unsafe { ((*entry).pw_uid, (*entry).pw_gid) };
    Ok(Some(RunAs { uid, gid }))
}

fn apply_run_as(command: &mut Command, run_as: Option<RunAs>) {
    if let Some(user) = run_as {
        command.uid(user.uid).gid(user.gid);
    }
}

/// The `postgres` user must be able to walk down to the data directory; a home directory with
/// mode 0700 (like `/root`) would stop it, which is better said up front than as a failed start.
fn check_reachable(dir: &Path, user: RunAs) -> Result<()> {
    for ancestor in dir.ancestors() {
        let meta = fs::metadata(ancestor)
            .map_err(|e| Error::io(format!("inspecting {}", ancestor.display()), e))?;
        let mode = meta.permissions().mode();
        let reachable = if meta.uid() == user.uid {
            mode & 0o100 != 0
        } else if meta.gid() == user.gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        };
        if !reachable && meta.uid() != user.uid {
            return Err(Error::Embedded(format!(
                "hf runs as root, so its PostgreSQL runs as the `postgres` user, which cannot \
                 enter {}: choose an HF_DATA_DIR it can reach (for example under /var/lib), \
                 or set HF_DATABASE_URL",
                ancestor.display()
            )));
        }
    }
    Ok(())
}

fn create_private_dir(dir: &Path, run_as: Option<RunAs>) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io(format!("securing {}", dir.display()), e))?;
    if let Some(user) = run_as {
        std::os::unix::fs::chown(dir, Some(user.uid), Some(user.gid))
            .map_err(|e| Error::io(format!("handing {} to postgres", dir.display()), e))?;
    }
    Ok(())
}
