//! The connection pools, with every timeout set explicitly.
//!
//! deadpool's defaults wait forever for a free connection; a saturated pool would then hang every
//! request. Here each wait is bounded, so an exhausted pool answers "busy" instead.
//!
//! [`Pool`] holds two pools of the same size. The service's own statements (principals, keys,
//! deploys, status) borrow from the login pool, whose connections always run as the service's
//! login role. The data statements of callers (`run_as`) borrow from the data pool, whose
//! connections keep the last caller's role, timeout and time zone as session settings, so that
//! the next request from the same caller needs no setup statement (see `run_as`). The two are
//! kept apart so that a connection left in a caller's role can never reach code that expects
//! the login role: only `run_as` ever sees a data connection. deadpool has no place for such
//! per-connection state, hence the small manager here that wraps deadpool-postgres's.
//!
//! The data pool is split into shards, one per worker thread of the HTTP server (see
//! [`PoolSettings::data_shards`] and [`Pool::for_shard`]). A connection's driver task runs on
//! the thread that opened it, so a request served by one worker with a connection opened by
//! another wakes that other thread twice per statement (to send, and to hand back the rows).
//! With a shard per worker, every connection a worker uses was opened by that worker, and a
//! record read stays on one thread from the socket to the database and back.
//!
//! Each shard also keeps its open lanes (see [`crate::run_as::Lanes`]): connections lent to
//! concurrent record reads of one caller, which then share the connection instead of taking one
//! each.
//!
//! Both pools hand out the connection given back last (LIFO). Each connection is a backend
//! process with its own caches of catalogs and plans; handing out the least recently used one
//! (deadpool's default) walks every open connection in turn, so under a steady load all of them
//! stay hot in the CPU caches at once, or none does. With the last one first, a load that needs
//! four connections uses the same four, and the rest idle. Measured on two cores with the
//! service and its database sharing one: record reads at 16 concurrent requests went from
//! 12,100–13,800 a second to 14,500–16,000 with a pool of 16.
//!
//! How many connections to allow is a trade. Every connection in use is a backend competing for
//! the cores, and beyond a few per core they take turns rather than add work done: on one core
//! shared by the service and its database, under twice the load it can serve, a pool of 16
//! served 7,500–9,000 record reads a second (its 16 backends all busy, a p99 of 120–150 ms for
//! the reads admitted), and a pool of 4 or 8 served 10,000–11,000 (a p99 of 17–40 ms). That was
//! before reads that wait were served in arrival order (see `run_as`); measured again after,
//! the gap came and went from one run to the next. But one caller's concurrent reads share a
//! connection only a few at a time (see `run_as`), and beyond that they queue for one: at 64
//! concurrent reads the p99 was 8 ms with a pool of 16 and 14–21 ms with 8 or 4. The default
//! stays 16, sized for ordinary load; a smaller pool suits a service that shares its cores with
//! its database and expects overload more than high concurrency.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::connect_gate::ConnectGate;
use crate::run_as::{Lanes, Session};
use crate::tls::Tls;
use deadpool::managed::{Metrics, QueueMode, RecycleError, RecycleResult};
use deadpool_postgres::{
    ClientWrapper, Manager, ManagerConfig, RecyclingMethod, Runtime, Timeouts,
};
use tokio_postgres::Statement;

use crate::{Error, Result};

/// The pools every request borrows its connections from; it dereferences to the login pool.
#[derive(Clone, Debug)]
pub struct Pool {
    login: deadpool_postgres::Pool,
    /// The data pool's shards (at least one).
    data: std::sync::Arc<[DataShard]>,
    /// The shard this handle borrows data connections from.
    shard: usize,
    /// Live writes of this process take turns here before they borrow a login connection to
    /// wait for the database lock that serialises live writes across instances, so a burst of
    /// them holds one connection, not one each (see [`Pool::live_write_turn`]).
    live_writes: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// How long a live write waits for its turn and the database lock together.
    live_write_wait: Duration,
    /// Refuses requests at once while no connection to the database can be made (see
    /// [`crate::connect_gate`]); shared by the login pool and every data shard.
    gate: std::sync::Arc<ConnectGate>,
}

/// A live write's turn among this process's live writes, and until when it may wait for the
/// database lock that serialises live writes across instances (see
/// `deploy::lock_live_writes`).
#[derive(Debug)]
pub(crate) struct LiveWriteTurn {
    _turn: tokio::sync::OwnedMutexGuard<()>,
    /// When the write stops waiting.
    pub(crate) deadline: Instant,
    /// How long it may wait in all.
    pub(crate) wait: Duration,
}

impl Deref for Pool {
    type Target = deadpool_postgres::Pool;

    /// The login pool: connections that run as the service's own role.
    fn deref(&self) -> &Self::Target {
        &self.login
    }
}

impl Pool {
    /// A connection of the login pool, for the service's own statements; refused at once
    /// ([`Error::Unreachable`]) while the database is found not answering and another request
    /// is trying it (see [`crate::connect_gate`]).
    pub async fn get(&self) -> Result<deadpool_postgres::Object> {
        let pass = self.gate.enter()?;
        pass.outcome(self.login.get().await)
    }

    /// A connection of this handle's data pool shard, for a caller's statements (only
    /// `run_as` and the status check use it); refused as [`Pool::get`] is.
    pub(crate) async fn data_connection(&self) -> Result<DataObject> {
        let pass = self.gate.enter()?;
        pass.outcome(self.data().get().await)
    }

    /// Notes that the database stopped answering on a connection held outside the pools (the
    /// principal checks' shared one), as a data connection given up does (see
    /// [`crate::connect_gate`]).
    pub(crate) fn database_stopped_answering(&self) {
        self.gate.stopped_answering();
    }

    /// Whether the database has been found not answering, and has not answered since (see
    /// [`crate::connect_gate`]).
    pub(crate) fn database_not_answering(&self) -> bool {
        self.gate.is_failing()
    }

    /// Both pools' sizes together, as `/status` reports them.
    pub fn status(&self) -> deadpool_postgres::Status {
        let mut total = self.login.status();
        for shard in self.data.iter() {
            let data = shard.pool.status();
            total.max_size += data.max_size;
            total.size += data.size;
            total.available += data.available;
            total.waiting += data.waiting;
        }
        total
    }

    /// The same pools, borrowing data connections from shard `index` (modulo the number of
    /// shards): the HTTP server gives each worker thread its own shard.
    pub fn for_shard(&self, index: usize) -> Pool {
        Pool {
            login: self.login.clone(),
            data: self.data.clone(),
            shard: index % self.data.len(),
            live_writes: self.live_writes.clone(),
            live_write_wait: self.live_write_wait,
            gate: self.gate.clone(),
        }
    }

    /// Waits for this process's turn to write the live branch. The database lock stays the
    /// rule (other instances and tools take it too); this only keeps the writes of one process
    /// from each holding a login connection while they queue for it, which would starve
    /// logins and token checks during a burst of metadata writes.
    ///
    /// The wait is bounded ([`PoolSettings::live_write_wait`], counted on through the database
    /// lock): a write stuck ahead (a database that stopped answering, a huge migration) must not
    /// queue every later one for ever. Past it, [`Error::LiveWriteBusy`].
    pub(crate) async fn live_write_turn(&self) -> Result<LiveWriteTurn> {
        let wait = self.live_write_wait;
        let deadline = Instant::now() + wait;
        let turn = self.live_writes.clone().lock_owned();
        match tokio::time::timeout_at(deadline.into(), turn).await {
            Ok(turn) => Ok(LiveWriteTurn {
                _turn: turn,
                deadline,
                wait,
            }),
            Err(_) => Err(Error::LiveWriteBusy { waited: wait }),
        }
    }

    /// How many requests wait for a connection of this handle's data pool shard now, beyond
    /// those about to be given a new one: the queue that load shedding bounds (so work is
    /// refused at once when the wait is already long, instead of queueing for the whole wait
    /// timeout) and that record reads sharing connections must not keep waiting (see
    /// `run_as`).
    pub fn data_queue(&self) -> usize {
        let status = self.data().status();
        // deadpool counts as waiting every user beyond the connections open now, including
        // those about to open one; only those beyond the pool's size really queue.
        (status.size + status.waiting).saturating_sub(status.max_size)
    }

    /// The pool of connections that run callers' statements (only `run_as` uses it).
    pub(crate) fn data(&self) -> &DataPool {
        &self.shard().pool
    }

    /// The data connections of this shard lent to record reads now (only `run_as` uses them).
    pub(crate) fn lanes(&self) -> &Lanes {
        &self.shard().lanes
    }

    fn shard(&self) -> &DataShard {
        // `shard` is always below the number of shards (see `for_shard` and `connect`).
        &self.data[self.shard]
    }
}

/// One shard of the data pool: its connections, and those of them lent to record reads now.
#[derive(Debug)]
struct DataShard {
    pool: DataPool,
    lanes: Lanes,
}

/// The pool of connections that keep a caller's session settings between requests.
pub(crate) type DataPool = deadpool::managed::Pool<DataManager>;

/// A data connection borrowed from the [`DataPool`]; dropping it gives it back.
pub(crate) type DataObject = deadpool::managed::Object<DataManager>;

/// Makes and checks data connections: deadpool-postgres's manager, plus the session state.
pub(crate) struct DataManager {
    inner: Manager,
    /// The pools' gate: while it is closed, an idle connection is checked before it is lent.
    gate: std::sync::Arc<ConnectGate>,
    checks: std::sync::Arc<IdleChecks>,
}

impl std::fmt::Debug for DataManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataManager")
            .field("inner", &self.inner)
            .finish()
    }
}

/// A data connection, what its session is set to, and its prepared statements.
#[derive(Debug)]
pub(crate) struct DataConnection {
    client: ClientWrapper,
    /// The caller settings the session is known to hold; `None` when unknown (a new
    /// connection, or one whose last request failed or was dropped half-way), which makes
    /// the next request set them all again.
    pub(crate) session: Option<Session>,
    /// The statements prepared on this connection, by SQL (every parameter is `text`, so the
    /// SQL alone names a statement). Kept here rather than in deadpool's statement cache
    /// because `run_as` must know whether a statement still needs preparing before it sends
    /// anything (see there).
    pub(crate) statements: HashMap<String, Statement>,
    /// How many times a request switched the session (for tests and diagnostics).
    pub(crate) switches: u64,
    /// Set when the database stopped answering on this connection (see
    /// [`crate::run_as::ANSWER_GRACE`]): it is never lent again, since a request sent on it
    /// would only queue behind the one still unanswered. The pool drops it when it next
    /// checks it out, and opens a new one in its place.
    given_up: AtomicBool,
    /// When the database last answered a statement on this connection (shared, so a request
    /// can watch it while its statements hold the connection).
    pub(crate) answers: std::sync::Arc<AnswerClock>,
    /// The pools' gate, told when this connection is given up for its silence.
    gate: std::sync::Arc<ConnectGate>,
}

/// When the database last answered on a connection, so that a request waiting on it can tell
/// a database that works through statements queued ahead of it (it answers each in turn) from
/// one that stopped (it answers nothing).
#[derive(Debug)]
pub(crate) struct AnswerClock {
    opened: Instant,
    /// Microseconds from `opened` to the last answer.
    last: AtomicU64,
}

impl AnswerClock {
    pub(crate) fn new() -> AnswerClock {
        AnswerClock {
            opened: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Notes an answer now.
    pub(crate) fn answered(&self) {
        let micros = u64::try_from(self.opened.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last.fetch_max(micros, Ordering::Relaxed);
    }

    /// When the last answer came (the opening of the connection, before any).
    pub(crate) fn last(&self) -> Instant {
        self.opened + Duration::from_micros(self.last.load(Ordering::Relaxed))
    }

    /// Awaits `work`, statements sent on the connection whose answers this clock notes, until
    /// the database has been silent on it for `silence`, counted from now or the last answer,
    /// whichever is later; `None` then. Answers to statements queued ahead of `work`'s (other
    /// requests' on a shared connection) show that the database works, so they restart the count.
    pub(crate) async fn awaiting<T>(
        &self,
        silence: Duration,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        let started = Instant::now();
        tokio::pin!(work);
        loop {
            let since = self.last().max(started);
            match tokio::time::timeout_at((since + silence).into(), &mut work).await {
                Ok(done) => return Some(done),
                // Something was answered meanwhile: the database works; wait on.
                Err(_) if self.last() > since => {}
                Err(_) => return None,
            }
        }
    }
}

impl DataConnection {
    /// Marks the connection as one the database stopped answering on, and tells the pools'
    /// gate (see [`crate::connect_gate`]).
    pub(crate) fn give_up(&self) {
        self.given_up.store(true, Ordering::Relaxed);
        self.gate.stopped_answering();
    }

    /// Whether [`DataConnection::give_up`] was called.
    pub(crate) fn is_given_up(&self) -> bool {
        self.given_up.load(Ordering::Relaxed)
    }
}

impl Deref for DataConnection {
    type Target = ClientWrapper;

    fn deref(&self) -> &ClientWrapper {
        &self.client
    }
}

impl DerefMut for DataConnection {
    fn deref_mut(&mut self) -> &mut ClientWrapper {
        &mut self.client
    }
}

impl deadpool::managed::Manager for DataManager {
    type Type = DataConnection;
    type Error = tokio_postgres::Error;

    async fn create(&self) -> std::result::Result<DataConnection, tokio_postgres::Error> {
        let client = self.inner.create().await?;
        Ok(DataConnection {
            client,
            session: None,
            statements: HashMap::new(),
            switches: 0,
            given_up: AtomicBool::new(false),
            answers: std::sync::Arc::new(AnswerClock::new()),
            gate: self.gate.clone(),
        })
    }

    async fn recycle(
        &self,
        connection: &mut DataConnection,
        metrics: &Metrics,
    ) -> RecycleResult<tokio_postgres::Error> {
        if connection.is_given_up() {
            return Err(RecycleError::message(
                "the database stopped answering on this connection",
            ));
        }
        if self.gate.is_failing() {
            self.checks.recycle(&connection.client).await?;
        }
        self.inner.recycle(&mut connection.client, metrics).await
    }

    fn detach(&self, connection: &mut DataConnection) {
        self.inner.detach(&mut connection.client);
    }
}

/// How the pool is sized and how long each step may take.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// The most connections the pool opens.
    pub max_size: usize,
    /// How long a request waits for a free connection before it is told the database is busy.
    pub wait_timeout: Duration,
    /// How long opening a new connection may take (TCP connect and startup together).
    pub create_timeout: Duration,
    /// How long checking a returned connection may take.
    pub recycle_timeout: Duration,
    /// How long a live write (a metadata write to the live branch, an apply) waits for the
    /// writes ahead of it, of this process and of other instances, before it is told another
    /// write holds the live branch.
    pub live_write_wait: Duration,
    /// The `application_name` the connections report in `pg_stat_activity`.
    pub application_name: String,
    /// How many shards the data pool is split into, `max_size` shared among them (see the
    /// module comment): the number of the HTTP server's worker threads, or 1.
    pub data_shards: usize,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_size: 16,
            wait_timeout: Duration::from_secs(5),
            create_timeout: Duration::from_secs(5),
            recycle_timeout: Duration::from_secs(2),
            live_write_wait: Duration::from_secs(30),
            application_name: "hf".to_owned(),
            data_shards: 1,
        }
    }
}

/// Builds a pool for a PostgreSQL URL (or a key=value connection string). Opens no connection
/// yet: the first one is made when a request asks for it.
///
/// The URL's `sslmode` and `sslrootcert` mean what they mean to libpq; see [`crate::tls`].
pub fn connect(database_url: &str, settings: &PoolSettings) -> Result<Pool> {
    let (config, tls) = connection_config(database_url, settings)?;
    // No connection needs resetting when it is given back: login connections never change
    // session state, and a data connection's session state is tracked with it (see
    // `DataConnection`). But a connection whose server stopped answering (a hung backend or
    // host) stays open, and a statement sent on it waits for ever: the service's own
    // statements are bounded only by the server (see `SERVICE_STATEMENT_TIMEOUT`), which a hung
    // one does not enforce, so a login connection is checked each time it is lent (see
    // `IdleChecks`). Data statements have a deadline (see `run_as::ANSWER_GRACE`), and a record
    // read cannot afford the round trip: a data connection is checked only while the database
    // is found not answering (see `crate::connect_gate`).
    let manager = |config: &tokio_postgres::Config, recycling_method| {
        Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig { recycling_method },
        )
    };
    let login_config = with_service_statement_bounds(config.clone());
    let timeouts = Timeouts {
        wait: Some(settings.wait_timeout),
        create: Some(settings.create_timeout),
        recycle: Some(settings.recycle_timeout),
    };
    let gate = std::sync::Arc::new(ConnectGate::default());
    let login = deadpool_postgres::Pool::builder(manager(&login_config, RecyclingMethod::Fast))
        .pre_recycle(IdleChecks::new(settings.recycle_timeout).hook())
        .max_size(settings.max_size)
        .queue_mode(QueueMode::Lifo)
        .runtime(Runtime::Tokio1)
        .timeouts(timeouts)
        .build()
        .map_err(|error| Error::Config(error.to_string()))?;
    let shards = settings.data_shards.max(1);
    let data = (0..shards)
        .map(|_| {
            let pool = DataPool::builder(DataManager {
                inner: manager(&config, RecyclingMethod::Fast),
                gate: gate.clone(),
                checks: IdleChecks::new(settings.recycle_timeout),
            })
            .max_size(settings.max_size.div_ceil(shards))
            .queue_mode(QueueMode::Lifo)
            .runtime(Runtime::Tokio1)
            .timeouts(timeouts)
            .build()
            .map_err(|error| Error::Config(error.to_string()))?;
            Ok(DataShard {
                pool,
                lanes: Lanes::default(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Pool {
        login,
        data: data.into(),
        shard: 0,
        live_writes: Default::default(),
        live_write_wait: settings.live_write_wait,
        gate,
    })
}

/// The check of an idle connection before it is lent (each login connection, and a data
/// connection while the database is found not answering): an empty query (one round trip), which
/// must be answered within the recycle timeout, or the connection is dropped and another lent.
///
/// When one check fails, the database most likely stopped answering on the other idle
/// connections too (a hung server or host, a partition, a restart), and deadpool would check
/// them one after another, holding the request for a recycle timeout each (with 16 idle
/// connections, over half a minute). So for a recycle timeout after a failed check, idle
/// connections are dropped unchecked: a request waits for one check, then for a new connection
/// (which a database that answers again gives at once). A single hung backend costs the other
/// idle connections no more than being opened again.
#[derive(Debug)]
struct IdleChecks {
    /// When a check last failed.
    last_failure: std::sync::Mutex<Option<Instant>>,
    /// How long a check may take, and how long after a failed one the others are skipped.
    timeout: Duration,
}

impl IdleChecks {
    fn new(timeout: Duration) -> std::sync::Arc<IdleChecks> {
        std::sync::Arc::new(IdleChecks {
            last_failure: std::sync::Mutex::new(None),
            timeout,
        })
    }

    /// The `pre_recycle` hook that runs the checks on the login pool (the manager's own
    /// recycling then only drops a connection already closed).
    fn hook(self: std::sync::Arc<Self>) -> deadpool_postgres::Hook {
        deadpool_postgres::Hook::async_fn(move |client: &mut ClientWrapper, _| {
            let checks = self.clone();
            Box::pin(async move { checks.check(client).await })
        })
    }

    /// [`IdleChecks::check`] as the outcome of recycling a data connection.
    async fn recycle(&self, client: &ClientWrapper) -> RecycleResult<tokio_postgres::Error> {
        use deadpool::managed::HookError;
        self.check(client).await.map_err(|error| match error {
            HookError::Message(message) => RecycleError::Message(message),
            HookError::Backend(error) => RecycleError::Backend(error),
        })
    }

    async fn check(
        &self,
        client: &ClientWrapper,
    ) -> deadpool::managed::HookResult<tokio_postgres::Error> {
        use deadpool::managed::HookError;
        // A connection already closed (its session ended) says nothing of the others.
        if client.is_closed() {
            return Err(HookError::message("the connection is closed"));
        }
        if self.failed_lately() {
            return Err(HookError::message(
                "dropped unchecked: another connection failed its check just now",
            ));
        }
        match tokio::time::timeout(self.timeout, client.simple_query("")).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => {
                self.failed();
                Err(HookError::Backend(error))
            }
            Err(_) => {
                self.failed();
                Err(HookError::message("the database did not answer the check"))
            }
        }
    }

    fn failed_lately(&self) -> bool {
        let last = *self
            .last_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        last.is_some_and(|at| at.elapsed() < self.timeout)
    }

    fn failed(&self) {
        *self
            .last_failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    }
}

/// How long a database connection may stay silent before TCP asks the other end whether it is
/// still there (a keepalive probe), and then how often it asks again.
///
/// A network that stops carrying a connection (a partition, a database host that died or was
/// paused, a firewall that forgot the connection) never closes it: the service would wait for an
/// answer for as long as TCP keeps retrying, about 15 minutes for data it sent, and for ever for
/// an answer to a statement it sent before the network stopped. Record requests and principal
/// checks bound their own wait (see `run_as::ANSWER_GRACE`), but the service's own statements
/// (logins, metadata writes, deploys) may legitimately run long and have only the server's
/// statement timeout, which a server out of reach cannot enforce. So
/// every connection is bounded by TCP itself, whatever runs on it, without cutting off a long
/// statement: a live server's kernel answers the probes while the statement runs.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
/// See [`KEEPALIVE_IDLE`].
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);

/// How long data sent on a database connection may stay unacknowledged, and keepalive probes
/// unanswered, before the connection is given up (`TCP_USER_TIMEOUT`): with [`KEEPALIVE_IDLE`],
/// a connection the network stopped carrying fails within about 20 s, whether the service was
/// sending or waiting for an answer. Nothing a healthy network carries stays unacknowledged
/// for that long.
pub const UNACKNOWLEDGED_LIMIT: Duration = Duration::from_secs(10);

/// How many keepalive probes go unanswered before the connection is given up (when the URL
/// sets no `tcp_user_timeout`, which takes over from it).
const KEEPALIVE_RETRIES: u32 = 3;

/// The connection settings of a PostgreSQL URL (or key=value string) with the pool's connect
/// timeout and application name applied, TCP keepalives and limits ([`KEEPALIVE_IDLE`],
/// [`UNACKNOWLEDGED_LIMIT`]) wherever the URL leaves them to the driver's defaults (an
/// operator's `keepalives_idle`, `keepalives_interval`, `keepalives_retries`,
/// `tcp_user_timeout` or `keepalives=0` stands), and the TLS connector its `sslmode` asks for; for connections
/// made outside the pool too, such as the one that listens for notifications.
pub fn connection_config(
    database_url: &str,
    settings: &PoolSettings,
) -> Result<(tokio_postgres::Config, Tls)> {
    let (mut config, tls) = crate::tls::parse(database_url)?;
    let driver_defaults = tokio_postgres::Config::new();
    if config.get_keepalives_idle() == driver_defaults.get_keepalives_idle() {
        config.keepalives_idle(KEEPALIVE_IDLE);
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(KEEPALIVE_INTERVAL);
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(KEEPALIVE_RETRIES);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(UNACKNOWLEDGED_LIMIT);
    }
    config
        .connect_timeout(settings.create_timeout)
        .application_name(&settings.application_name);
    Ok((config, tls))
}

/// How long one of the service's own statements (on a login connection: logins, principals,
/// keys, metadata, status) waits for a lock before it fails (`lock_timeout`).
///
/// Without a bound, a lock held elsewhere stops the service: an operator's `LOCK TABLE`,
/// `VACUUM FULL` or `ALTER TABLE` of a table in the `hf` schema, or a migration of another
/// instance queued behind a long reader (a backup), holds every login and principal check that
/// touches the table until it is released, each holding a connection and a request. Bounded,
/// they fail after a few seconds (`ErrorKind::Timeout`) and the service stays responsive. The
/// service's own statements take row locks for milliseconds, so a wait this long means
/// something else holds the table. Statements that must wait longer set their own limit: a
/// live write's wait for the lock that serialises live writes, an apply's DDL, the migrations.
pub const SERVICE_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one of the service's own statements may run (`statement_timeout`): a backstop for
/// a server that stops making progress on a statement while it still answers the network (a
/// disk that stalls, a runaway plan). Far above anything the service's own statements need;
/// the apply and the migrations set their own limits.
pub const SERVICE_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// `config` with [`SERVICE_LOCK_TIMEOUT`] and [`SERVICE_STATEMENT_TIMEOUT`] as session defaults
/// (startup `options`), for the login pool's connections. A setting the URL's own `options`
/// already give stands. Data connections are left alone: each request sets its caller's
/// statement timeout there, and a caller's write waits for the rows it locks as long as its
/// timeout allows.
fn with_service_statement_bounds(mut config: tokio_postgres::Config) -> tokio_postgres::Config {
    let mut options = config.get_options().unwrap_or_default().to_owned();
    let given = option_settings(&options);
    for (setting, limit) in [
        ("lock_timeout", SERVICE_LOCK_TIMEOUT),
        ("statement_timeout", SERVICE_STATEMENT_TIMEOUT),
    ] {
        if !given.iter().any(|name| name == setting) {
            if !options.is_empty() {
                options.push(' ');
            }
            options.push_str(&format!("-c {setting}={}ms", limit.as_millis()));
        }
    }
    config.options(&options);
    config
}

/// The names of the settings a connection's `options` string gives, in each of the spellings
/// the server accepts: `-c name=value`, `-cname=value` and `--name=value` (where `-` in the
/// name means `_`). Any other word is not a setting and is skipped.
fn option_settings(options: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut words = options.split_whitespace();
    while let Some(word) = words.next() {
        let assignment = if word == "-c" {
            words.next()
        } else if let Some(rest) = word.strip_prefix("--") {
            Some(rest)
        } else {
            word.strip_prefix("-c")
        };
        if let Some((name, _)) = assignment.and_then(|assignment| assignment.split_once('=')) {
            names.push(name.replace('-', "_").to_ascii_lowercase());
        }
    }
    names
}

/// Creates a database unless it exists, connecting through `maintenance_url` (a database that
/// always exists, such as `postgres`). Used for the embedded cluster and by the test kit.
pub async fn create_database_if_missing(maintenance_url: &str, name: &str) -> Result<()> {
    let (config, tls) = crate::tls::parse(maintenance_url)?;
    let (client, connection) = config.connect(tls).await?;
    let driver = tokio::spawn(connection);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await?
        .is_some();
    if !exists {
        let statement = format!("CREATE DATABASE {}", quote(name)?);
        if let Err(error) = client.batch_execute(&statement).await {
            // Another process may have created it between our check and our CREATE.
            if error.code() != Some(&tokio_postgres::error::SqlState::DUPLICATE_DATABASE) {
                return Err(error.into());
            }
        }
    }
    drop(client);
    driver.abort();
    Ok(())
}

fn quote(name: &str) -> Result<String> {
    hf_sql::quote_ident(name).map_err(|error| Error::Config(error.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]
    use super::*;

    fn config(url: &str) -> tokio_postgres::Config {
        let (config, _) = connection_config(url, &PoolSettings::default()).unwrap();
        config
    }

    #[test]
    fn the_service_bounds_a_silent_network_where_the_url_says_nothing() {
        let config = config("postgres://hf@db.example.com/hf");
        assert!(config.get_keepalives());
        assert_eq!(config.get_keepalives_idle(), KEEPALIVE_IDLE);
        assert_eq!(config.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL));
        assert_eq!(config.get_keepalives_retries(), Some(KEEPALIVE_RETRIES));
        assert_eq!(config.get_tcp_user_timeout(), Some(&UNACKNOWLEDGED_LIMIT));
        assert_eq!(
            config.get_connect_timeout(),
            Some(&PoolSettings::default().create_timeout)
        );
    }

    #[test]
    fn service_statements_are_bounded_unless_the_url_bounds_them() {
        let bounded = |url: &str| {
            let (config, _) = crate::tls::parse(url).unwrap();
            with_service_statement_bounds(config)
                .get_options()
                .map(str::to_owned)
        };
        assert_eq!(
            bounded("postgres://hf@db.example.com/hf").as_deref(),
            Some("-c lock_timeout=5000ms -c statement_timeout=30000ms")
        );
        assert_eq!(
            bounded("host=db user=hf options='-c lock_timeout=1s -c search_path=x'").as_deref(),
            Some("-c lock_timeout=1s -c search_path=x -c statement_timeout=30000ms")
        );
        assert_eq!(
            bounded("host=db user=hf options='--statement-timeout=0 -clock_timeout=0'").as_deref(),
            Some("--statement-timeout=0 -clock_timeout=0")
        );
        // `deadlock_timeout` is another setting, not a lock timeout.
        assert_eq!(
            option_settings("-c deadlock_timeout=2s -c Statement_Timeout=1"),
            ["deadlock_timeout", "statement_timeout"]
        );
    }

    #[test]
    fn the_urls_own_tcp_settings_stand() {
        let config = config(
            "host=db.example.com user=hf keepalives=0 keepalives_idle=60 \
             keepalives_interval=20 keepalives_retries=9 tcp_user_timeout=30",
        );
        assert!(!config.get_keepalives());
        assert_eq!(config.get_keepalives_idle(), Duration::from_secs(60));
        assert_eq!(
            config.get_keepalives_interval(),
            Some(Duration::from_secs(20))
        );
        assert_eq!(config.get_keepalives_retries(), Some(9));
        assert_eq!(
            config.get_tcp_user_timeout(),
            Some(&Duration::from_secs(30))
        );
    }
}
