//! Running data statements as the caller's database role: the one helper every data statement
//! goes through (HOQS queries, record reads and writes).
//!
//! Data statements run on the data pool's connections (see [`crate::pool`]), which only this
//! module uses. Such a connection keeps the settings of the last caller that used it as
//! *session* settings: the role (`set_config('role', $1, false)`, the bindable form of
//! `SET ROLE`), the statement timeout, the UTC time zone, whether transactions are read-only
//! (`default_transaction_read_only`) and the principal's id (`hf.caller_id`). What the session
//! holds is tracked with the connection ([`Session`]), so a request:
//! - from the caller the session already belongs to sends its statement alone (one statement
//!   in its own implicit transaction), or `BEGIN`, its statements and `COMMIT` when it has
//!   several;
//! - from any other caller (or when the session is unknown) sends `BEGIN READ ONLY`/
//!   `BEGIN READ WRITE`, the switch of every setting, its statements and `COMMIT`.
//!
//! Everything a request sends is queued on the connection in the first poll (pipelined: one
//! round trip), so:
//! - a role never reaches another caller's statement: a switch runs in the transaction of the
//!   statements it precedes, so if it fails (an unknown role) the transaction is aborted and
//!   the statements never run, and settings changed in a failed transaction revert when it
//!   rolls back. `COMMIT` is always queued, even when the request is dropped half-way because
//!   its client went away. The tracked session is cleared before anything is sent and set only
//!   once everything succeeded, so after a failure, a cancellation or a lost connection the
//!   next request switches every setting again;
//! - a role that does not exist (its principal was deleted after the request authenticated) is
//!   [`Error::RoleMissing`]. Every change to the principals (seen through their change
//!   notifications, whichever instance made it) also makes every connection switch again, so a
//!   session never outlives its role unnoticed; a role dropped in PostgreSQL directly leaves
//!   its sessions with PUBLIC's privileges only, so a refusal on a session that was not
//!   switched is tried once more with a switch, which finds the role missing;
//! - a failing statement aborts the transaction, so a failed request changes nothing.
//!
//! A record read (one statement reading one record by its key) from the caller a session
//! already belongs to may also share a connection with that caller's other record reads in
//! flight, pipelined on it ([`read_record`], [`Lanes`]).
//!
//! Statements are prepared once per connection with every parameter typed `text`: values are
//! always sent as text and cast in the SQL (`$2::numeric`). Preparing parses the statement, and
//! parsing checks schema privileges, so a statement is always prepared as the service's login
//! role (a `RESET ROLE` is pipelined before it), as it was before sessions kept roles: a caller
//! gets the same answer whichever caller used the connection last.
//! Privilege errors (SQLSTATE 42501, including row-level security refusals) classify as
//! [`crate::ErrorKind::Forbidden`] and timeouts (57014) as [`crate::ErrorKind::Timeout`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::future::{join, join_all, FutureExt};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Row, Statement};

use crate::pool::{AnswerClock, DataConnection, DataObject};
use crate::{Error, Pool, Result};

/// How long a read may run (5 s: a request, not a report).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a write may run (15 s: writes check rules and references too).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// How long past a request's statement timeout the database may stay silent on its connection
/// before it is taken to have stopped answering. The server enforces the statement timeout
/// itself and answers each statement within it, so silence for longer, while a request waits,
/// means the server or the network to it has stopped (a frozen host, a partition). Nothing else
/// would end the wait soon: a frozen server's kernel keeps the connection open and answers
/// TCP's keepalive probes, and a partition ends the connection only once the probes go
/// unanswered (about 20 s, see [`crate::pool::KEEPALIVE_IDLE`]). The silence is counted from the request's start or the
/// connection's last answer, whichever is later, so statements queued ahead on the connection
/// (a lane's reads, a write's statements), each answered in its turn, never count against it.
/// The request then fails with [`Error::NoAnswer`] and its connection is given up (see
/// [`crate::pool::DataConnection::give_up`]); a database that answers again serves the next
/// request on a new connection.
pub const ANSWER_GRACE: Duration = Duration::from_secs(2);

/// The most statements one connection keeps prepared. HOQS lets callers send any number of
/// distinct statements, and each prepared statement holds memory in the server's backend, so
/// past this many the connection's cache is emptied and refilled by use.
pub const MAX_CACHED_STATEMENTS: usize = 256;

/// The switch of a session to a caller: its role, statement timeout, the UTC time zone, the
/// principal's id (`hf.caller_id`, empty when unknown; writes record it as `created_by` and
/// `updated_by`, rules read it as `$User.id`) and whether its transactions are read-only.
/// Session-level (`false`), so the settings stay for the caller's next request; they are set
/// inside the request's transaction, so they revert if it fails.
const SWITCH: &str =
    "SELECT set_config('role', $1, false), set_config('statement_timeout', $2, false), \
set_config('TimeZone', 'UTC', false), set_config('hf.caller_id', $3, false), \
set_config('default_transaction_read_only', $4, false)";

/// Sent (unprepared) before preparing a statement, so that it is parsed as the login role.
const RESET_ROLE: &str = "RESET ROLE";

/// Bumped whenever principals change (see [`roles_changed`]); a session switched before the
/// latest change is switched again.
static ROLES_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Makes every data connection switch its settings again before its next statement: called
/// whenever a principal (and so possibly its role) changes or goes, so that no session keeps a
/// role that was dropped, or a name that now means another role.
pub(crate) fn roles_changed() {
    ROLES_EPOCH.fetch_add(1, Ordering::SeqCst);
}

/// Who runs the statements, and how.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The PostgreSQL role of the principal (its `pgRole`).
    pub role: &'a str,
    /// The statement timeout of the transaction.
    pub timeout: Duration,
    /// Whether the transaction is `READ ONLY` (queries and record reads).
    pub read_only: bool,
    /// The principal's id, set as `hf.caller_id` for the transaction.
    pub principal_id: Option<uuid::Uuid>,
}

impl<'a> Caller<'a> {
    /// A reader: read-only, with [`READ_TIMEOUT`].
    pub fn reader(role: &'a str) -> Caller<'a> {
        Caller {
            role,
            timeout: READ_TIMEOUT,
            read_only: true,
            principal_id: None,
        }
    }

    /// A writer, with [`WRITE_TIMEOUT`].
    pub fn writer(role: &'a str) -> Caller<'a> {
        Caller {
            role,
            timeout: WRITE_TIMEOUT,
            read_only: false,
            principal_id: None,
        }
    }

    /// The same caller, known as this principal (`hf.caller_id`).
    pub fn for_principal(self, id: uuid::Uuid) -> Caller<'a> {
        Caller {
            principal_id: Some(id),
            ..self
        }
    }
}

/// The caller settings a data connection's session holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    role: String,
    timeout: Duration,
    read_only: bool,
    principal_id: Option<uuid::Uuid>,
    /// [`ROLES_EPOCH`] when the session was switched.
    epoch: u64,
}

impl Session {
    /// Whether the session already holds every setting of `caller`.
    fn serves(&self, caller: &Caller<'_>, epoch: u64) -> bool {
        self.epoch == epoch
            && self.role == caller.role
            && self.timeout == caller.timeout
            && self.read_only == caller.read_only
            && self.principal_id == caller.principal_id
    }
}

/// One statement of a request with its parameter values (each bound as text; `None` is NULL).
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// The SQL; its parameters are `$1..$n`, typed `text`.
    pub sql: &'a str,
    /// The values of `$1..$n`.
    pub params: &'a [Option<String>],
    /// The values of the parameters after those (`$n+1..`): a statement's fixed literals,
    /// borrowed from where the statement is kept.
    pub fixed: &'a [Option<String>],
}

impl Step<'_> {
    /// The values of every parameter, `$1` first, as the driver binds them.
    fn values(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .chain(self.fixed)
            .map(|value| value as &(dyn ToSql + Sync))
            .collect()
    }
}

/// What a request's transaction did.
#[derive(Debug)]
pub enum Ran {
    /// Every statement succeeded and the transaction committed: the rows of each step.
    Rows(Vec<Vec<Row>>),
    /// A statement failed and the transaction rolled back; the first failure, in order.
    Failed {
        /// The failing step's index, or `None` for `BEGIN`, the setup or `COMMIT`.
        step: Option<usize>,
        /// PostgreSQL's error (see [`Error::kind`] once wrapped in [`Error::Db`]).
        error: tokio_postgres::Error,
    },
}

impl Ran {
    /// The rows of every step, or the failure as an [`Error`].
    pub fn into_rows(self) -> Result<Vec<Vec<Row>>> {
        match self {
            Ran::Rows(rows) => Ok(rows),
            Ran::Failed { error, .. } => Err(Error::Db(error)),
        }
    }
}

/// Runs `steps` as `caller.role` in one transaction, in one round trip once the statements are
/// prepared on the connection. `Err` means no connection could be had or a statement could not
/// be prepared (a bug in generated SQL, or the database going away); a statement that fails
/// while running is [`Ran::Failed`].
pub async fn run_as(pool: &Pool, caller: &Caller<'_>, steps: &[Step<'_>]) -> Result<Ran> {
    let connection = pool.data_connection().await?;
    let first = run_answered(connection, caller, steps, false).await?;
    retried(pool, caller, steps, first).await
}

/// How long the database may stay silent on a request of `caller` (see [`ANSWER_GRACE`]).
fn allowed_silence(caller: &Caller<'_>) -> Duration {
    caller.timeout + ANSWER_GRACE
}

/// Awaits `work`, statements of `caller` sent on a connection whose answers `answers` notes,
/// until the database has been silent on it for [`allowed_silence`]; `None` then.
async fn awaiting_answers<T>(
    answers: &AnswerClock,
    caller: &Caller<'_>,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    answers.awaiting(allowed_silence(caller), work).await
}

/// The failure of a request of `caller` whose connection stayed silent past
/// [`allowed_silence`], giving the connection up.
fn no_answer(connection: &DataConnection, caller: &Caller<'_>) -> Error {
    connection.give_up();
    Error::NoAnswer {
        waited: allowed_silence(caller),
        write: !caller.read_only,
    }
}

/// [`run_once`] on a connection of the request's own, as long as the database answers (see
/// [`awaiting_answers`]).
async fn run_answered(
    mut connection: DataObject,
    caller: &Caller<'_>,
    steps: &[Step<'_>],
    force_switch: bool,
) -> Result<(Ran, bool)> {
    let answers = Arc::clone(&connection.answers);
    let work = run_once(&mut connection, caller, steps, force_switch);
    match awaiting_answers(&answers, caller, work).await {
        Some(ran) => ran,
        None => Err(no_answer(&connection, caller)),
    }
}

/// Runs one statement that reads a record by its key as `caller.role`, as [`run_as`] does, on a
/// connection it may share with the caller's other record reads in flight (see [`Lanes`]).
/// `caller` must be a reader; a writer is run by [`run_as`].
pub async fn read_record(pool: &Pool, caller: &Caller<'_>, step: &Step<'_>) -> Result<Ran> {
    let steps = std::slice::from_ref(step);
    // While the database is found not answering, a lane's connection is most likely silent
    // too, and a read joining it would wait out its own allowed silence: it goes to the pools'
    // gate instead, which refuses it at once unless it is the one to try (see
    // `crate::connect_gate`).
    if !caller.read_only || pool.database_not_answering() {
        return run_as(pool, caller, steps).await;
    }
    let epoch = ROLES_EPOCH.load(Ordering::SeqCst);
    let lanes = pool.lanes();
    // A read joins a lane at once only when no other read waits: one that arrives while others
    // wait queues behind them (see `Lanes::wait`).
    let joined = if lanes.waiting() == 0 {
        lanes.join(caller, epoch, step.sql, pool.data_queue() > 0)
    } else {
        None
    };
    let (seat, statement) = match joined {
        Some(joined) => joined,
        None => match lanes.wait(pool, caller, epoch, step.sql).await? {
            Waited::Seat(seat, statement) => (seat, statement),
            Waited::Connection(connection) => {
                let first = run_answered(connection, caller, steps, false).await?;
                return retried(pool, caller, steps, first).await;
            }
        },
    };
    let connection = seat.connection();
    let values = step.values();
    let query = connection
        .query(&statement, &values)
        .inspect(|_| connection.answers.answered());
    let ran = match awaiting_answers(&connection.answers, caller, query).await {
        Some(Ok(rows)) => Ran::Rows(vec![rows]),
        Some(Err(error)) => Ran::Failed {
            step: Some(0),
            error,
        },
        // The lane's other reads wait on the same connection and fail alike; no read joins it
        // any more, and the pool drops it once the last of them gives it back.
        None => return Err(no_answer(connection, caller)),
    };
    // Given back before a retry borrows another connection.
    drop(seat);
    retried(pool, caller, steps, (ran, false)).await
}

/// What a first attempt ran, or, for a refusal on a session that was not switched, a second
/// attempt with a switch. A role dropped behind the service's back (not through its principals)
/// may still be a session's role, which then has only PUBLIC's privileges; the switch tells a
/// missing role ([`Error::RoleMissing`]) from a real refusal. A failed attempt changed nothing.
async fn retried(
    pool: &Pool,
    caller: &Caller<'_>,
    steps: &[Step<'_>],
    (ran, switched): (Ran, bool),
) -> Result<Ran> {
    match ran {
        Ran::Failed { error, .. }
            if !switched
                && (error.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE)
                    || error.code() == Some(&SqlState::UNDEFINED_OBJECT)) =>
        {
            let connection = pool.data_connection().await?;
            Ok(run_answered(connection, caller, steps, true).await?.0)
        }
        ran => Ok(ran),
    }
}

/// How many record reads at most share one lane at a time, counting the one that opened it,
/// while a connection can still be had: spread over connections, reads run on several cores.
const LANE_DEPTH: usize = 4;

/// How many record reads at most share one lane at a time while requests queue for a
/// connection of the shard. A read that finds every lane at [`LANE_DEPTH`] would otherwise
/// wait for a connection until a whole lane drains; pipelined on a lane instead, it waits only
/// for the reads ahead of it on the connection, and the database serves more reads per wake-up
/// of its backend. Measured with a pool of 16 on one core shared with the database, one
/// caller's reads at 128 at once (before reads waited in arrival order, see [`Lanes`]): before,
/// 11,900 a second served and 1,100 refused, a p99 of 44 ms; with lanes of up to 8 while others
/// queue, 12,000–13,500 served, none refused, a p99 of 17–20 ms.
const QUEUED_LANE_DEPTH: usize = 2 * LANE_DEPTH;

/// How many record reads one lane takes in all before it stops taking more. A lane is given
/// back to the pool only once no read uses it, and a steady stream of one caller's reads would
/// otherwise keep it open for ever, while requests of other callers wait for a connection.
const LANE_READS: usize = 16;

/// Data connections lent to record reads ("lanes"), one list per shard of the data pool.
///
/// A record read whose caller's session a lane's connection holds, with its statement prepared
/// there, sends its statement on that connection while the lane's other reads are in flight,
/// instead of borrowing a connection of its own. tokio-postgres writes the statements sent
/// concurrently on one connection out together, and the database reads them in one go, so one
/// wake-up of its backend serves several reads (pipelining) where a connection each would wake
/// a backend each. Each read is still a statement in its own implicit transaction, with its own
/// `Sync`: a failing read fails alone.
///
/// Only record reads share: each is one statement that reads one record by its key (cheap, and
/// bounded by the read timeout), so none waits long behind another, and none changes the
/// session, which stays the one the lane was opened with: a read joins only a lane whose session
/// holds every setting of its caller, so a role never reaches another caller's read. A lane is
/// open while reads use it; the last one to finish gives the connection back to the pool, which
/// hands it to whoever waits first. A lane takes at most [`LANE_READS`] reads in all, so it is
/// given back within a few reads' time even under a steady stream of one caller's reads.
///
/// A read that finds no room waits for whichever comes first: a seat on a lane or a connection
/// of its own ([`Lanes::wait`]). Reads are served in the order they came: while reads wait, a
/// read that arrives queues behind them instead of taking a seat that has just come free, and
/// every seat that comes free wakes the read that has waited longest (tokio's `Notify` wakes its
/// waiters in that order). Before, a read that waited for a connection stayed in the pool's
/// queue while reads arriving after it took every seat: with twice as many reads offered as one
/// core shared with the database serves (pool of 16), the reads served had a p99 of 101–151 ms
/// and a maximum of 233–293 ms; in arrival order, 35–47 ms and 67–85 ms, as many served. A seat
/// offered to a read of another caller (whose session the lane does not hold) is not offered on:
/// that read waits on, and the seat goes to whoever asks next; a seat is never lost for longer
/// than one read, and a read that cannot sit on a lane gets a connection in its turn.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    open: std::sync::Mutex<Vec<Weak<Lane>>>,
    /// How many reads joined a lane someone else opened (for tests and diagnostics).
    joined: AtomicU64,
    /// Told whenever a lane has a seat free for a read that waits.
    room: tokio::sync::Notify,
    /// How many reads wait for a seat or a connection now ([`Lanes::wait`]).
    waiting: AtomicUsize,
}

/// A data connection lent to record reads.
#[derive(Debug)]
struct Lane {
    connection: DataObject,
    /// How many reads joined it so far (at most [`LANE_READS`], the one that opened it too).
    reads: AtomicUsize,
}

/// One read's place on a lane: while it is held the read may use the lane's connection; giving
/// it up offers the seat to the read that has waited longest, if the lane still takes reads.
#[derive(Debug)]
pub(crate) struct Seat<'a> {
    // Fields drop in this order: the read's hold on the lane goes before the seat is offered,
    // so the read woken finds it free.
    lane: Arc<Lane>,
    _offer: SeatOffer<'a>,
}

impl Seat<'_> {
    fn connection(&self) -> &DataObject {
        &self.lane.connection
    }
}

/// Offers a seat given up on `lane` to the read that has waited longest, when dropped.
#[derive(Debug)]
struct SeatOffer<'a> {
    lane: Weak<Lane>,
    lanes: &'a Lanes,
}

impl Drop for SeatOffer<'_> {
    fn drop(&mut self) {
        if self.lanes.waiting() == 0 {
            return;
        }
        // Only a lane other reads still use stays open (the last read's connection goes back
        // to the pool, which hands it to whoever waits there first), and it has a seat to
        // offer only while it takes more reads.
        let takes_reads = self
            .lane
            .upgrade()
            .is_some_and(|lane| lane.reads.load(Ordering::Relaxed) < LANE_READS);
        if takes_reads {
            self.lanes.room.notify_one();
        }
    }
}

/// What a read that waited got.
#[allow(
    clippy::large_enum_variant,
    reason = "made once per wait and unpacked at once; boxing the connection would only add an allocation"
)]
pub(crate) enum Waited<'a> {
    /// A seat on a lane, and its statement there: on a lane that was open, or on one opened on
    /// the connection the read got.
    Seat(Seat<'a>, Statement),
    /// A connection of its own, whose session must be switched or the statement prepared
    /// first, which only a connection of the request's own can do.
    Connection(DataObject),
}

/// Counts a read among those waiting while it lives.
struct WaitingRead<'a>(&'a AtomicUsize);

impl<'a> WaitingRead<'a> {
    fn enter(waiting: &'a AtomicUsize) -> WaitingRead<'a> {
        waiting.fetch_add(1, Ordering::SeqCst);
        WaitingRead(waiting)
    }
}

impl Drop for WaitingRead<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Lanes {
    /// How many reads wait for a seat or a connection now.
    fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// An open lane that serves `caller` and has `sql` prepared, with room for one more read:
    /// a seat on it, and that statement. Room is [`LANE_DEPTH`] reads at a time, or
    /// [`QUEUED_LANE_DEPTH`] with `others_wait` (requests queue for a connection), and
    /// [`LANE_READS`] in all.
    fn join(
        &self,
        caller: &Caller<'_>,
        epoch: u64,
        sql: &str,
        others_wait: bool,
    ) -> Option<(Seat<'_>, Statement)> {
        let depth = if others_wait {
            QUEUED_LANE_DEPTH
        } else {
            LANE_DEPTH
        };
        // A poisoned list only means no lane is shared.
        let mut open = self.open.lock().ok()?;
        open.retain(|lane| lane.strong_count() > 0);
        open.iter().filter_map(Weak::upgrade).find_map(|lane| {
            // The reads using the lane, and the reference just taken.
            if Arc::strong_count(&lane) > depth || lane.reads.load(Ordering::Relaxed) >= LANE_READS
            {
                return None;
            }
            let statement = lendable(&lane.connection, caller, epoch, sql)?;
            // Counted under the list's lock, which every join takes.
            lane.reads.fetch_add(1, Ordering::Relaxed);
            self.joined.fetch_add(1, Ordering::Relaxed);
            Some((self.seat(lane), statement))
        })
    }

    /// Waits for a seat on a lane that serves `caller` with `sql` prepared, or a connection
    /// of the pool, whichever comes first; in its turn behind the reads that waited before. A
    /// connection that can serve the read as it is opens a lane, and the read takes its first
    /// seat.
    async fn wait(
        &self,
        pool: &Pool,
        caller: &Caller<'_>,
        epoch: u64,
        sql: &str,
    ) -> Result<Waited<'_>> {
        let _waiting = WaitingRead::enter(&self.waiting);
        let connection = pool.data_connection();
        tokio::pin!(connection);
        loop {
            // A seat offered while no read listens is kept (one at most) for the next read that
            // does, so one offered between this read's tries is not lost.
            tokio::select! {
                biased;
                connection = &mut connection => {
                    let connection = connection?;
                    return Ok(match lendable(&connection, caller, epoch, sql) {
                        Some(statement) => Waited::Seat(self.open(connection), statement),
                        None => Waited::Connection(connection),
                    });
                }
                () = self.room.notified() => {
                    // Giving up the wait for a connection is safe only while the pool is full:
                    // then no connection is being made (deadpool counts one only once it is
                    // open), so this read's request for one is still queued and leaves the
                    // queue cleanly. A request dropped while its connection was being made
                    // would abandon that connection half-open, and the database would spend a
                    // backend's start-up on nothing (under load, such churn filled the
                    // database's connection slots). While the pool is not full, connections
                    // are still being opened, and this read gets one soon.
                    let status = pool.data().status();
                    if status.size < status.max_size {
                        continue;
                    }
                    if let Some((seat, statement)) = self.join(caller, epoch, sql, true) {
                        return Ok(Waited::Seat(seat, statement));
                    }
                }
            }
        }
    }

    /// Opens a lane on `connection`, whose session serves the reads that will join it: the
    /// opener's seat. The lane's other seats are offered to reads that wait.
    fn open(&self, connection: DataObject) -> Seat<'_> {
        let lane = Arc::new(Lane {
            connection,
            reads: AtomicUsize::new(1),
        });
        if let Ok(mut open) = self.open.lock() {
            open.push(Arc::downgrade(&lane));
        }
        for _ in 0..self.waiting().min(QUEUED_LANE_DEPTH - 1) {
            self.room.notify_one();
        }
        self.seat(lane)
    }

    fn seat(&self, lane: Arc<Lane>) -> Seat<'_> {
        Seat {
            _offer: SeatOffer {
                lane: Arc::downgrade(&lane),
                lanes: self,
            },
            lane,
        }
    }
}

/// `sql`'s statement on `connection`, if a read of `caller` can run it there as it is: the
/// session holds every setting of the caller and the statement is prepared.
fn lendable(
    connection: &DataConnection,
    caller: &Caller<'_>,
    epoch: u64,
    sql: &str,
) -> Option<Statement> {
    let session = connection.session.as_ref()?;
    if !session.serves(caller, epoch) || connection.is_given_up() {
        return None;
    }
    connection.statements.get(sql).cloned()
}

/// One attempt of [`run_as`] on `connection`, switching the session even when it seems to hold
/// the caller's settings if `force_switch`; also says whether it switched.
async fn run_once(
    connection: &mut DataObject,
    caller: &Caller<'_>,
    steps: &[Step<'_>],
    force_switch: bool,
) -> Result<(Ran, bool)> {
    let epoch = ROLES_EPOCH.load(Ordering::SeqCst);
    // Preparing a statement resets the role (see `prepared`), so a request whose statements
    // are not all prepared switches too (found out by `prepared`, which looks each statement up
    // once: hashing a record write's SQL is not free).
    let mut switch = force_switch
        || !connection
            .session
            .as_ref()
            .is_some_and(|session| session.serves(caller, epoch));
    // Unknown until every statement of this request succeeded: a request that fails, or is
    // dropped half-way, leaves the next one to switch every setting again.
    connection.session = None;
    let (statements, first_step) = loop {
        let alone = !switch && steps.len() == 1;
        let begin_sql = match (switch, caller.read_only) {
            (false, _) => "BEGIN",
            (true, true) => "BEGIN READ ONLY",
            (true, false) => "BEGIN READ WRITE",
        };
        let mut sqls: Vec<(&str, usize)> = Vec::with_capacity(steps.len() + 3);
        if !alone {
            sqls.push((begin_sql, 0));
            if switch {
                sqls.push((SWITCH, 4));
            }
        }
        let first_step = sqls.len();
        sqls.extend(
            steps
                .iter()
                .map(|step| (step.sql, step.params.len() + step.fixed.len())),
        );
        if !alone {
            sqls.push(("COMMIT", 0));
        }
        let (statements, reset) = prepared(connection, &sqls).await?;
        if reset {
            // Preparing was a round trip, which the database answered.
            connection.answers.answered();
        }
        if reset && !switch {
            // The session is the login role now: it must be switched after all.
            switch = true;
            continue;
        }
        break (statements, first_step);
    };
    if switch {
        connection.switches += 1;
    }
    if connection.statements.len() > MAX_CACHED_STATEMENTS {
        // Dropping the statements closes them on the server once no call uses them; the
        // next request prepares what it needs again (and so switches).
        connection.statements.clear();
    }

    let timeout = format!("{}ms", caller.timeout.as_millis());
    let principal = caller
        .principal_id
        .map(|id| id.hyphenated().to_string())
        .unwrap_or_default();
    let read_only = if caller.read_only { "on" } else { "off" };
    let switch_params: [&(dyn ToSql + Sync); 4] = [&caller.role, &timeout, &principal, &read_only];
    let step_params: Vec<Vec<&(dyn ToSql + Sync)>> = steps.iter().map(Step::values).collect();
    let client = &**connection;
    let answers = &connection.answers;
    let calls = statements.iter().enumerate().map(|(index, statement)| {
        let params: &[&(dyn ToSql + Sync)] = match index
            .checked_sub(first_step)
            .and_then(|step| step_params.get(step))
        {
            Some(params) => params,
            None if switch && index == 1 => &switch_params,
            None => &[],
        };
        client
            .query(statement, params)
            .inspect(|_| answers.answered())
    });
    // `join_all` polls the calls in order, so every one of them, COMMIT included, is queued on
    // the connection in its first poll.
    let results = join_all(calls).await;

    let mut rows = Vec::with_capacity(steps.len());
    for (index, result) in results.into_iter().enumerate() {
        let step = index
            .checked_sub(first_step)
            .filter(|step| *step < steps.len());
        match result {
            Ok(found) if step.is_some() => rows.push(found),
            Ok(_) => {}
            // `set_config('role', ..)` of a role that does not exist: the principal was
            // deleted after this request authenticated.
            Err(error)
                if switch
                    && index == 1
                    && error.code() == Some(&SqlState::INVALID_PARAMETER_VALUE) =>
            {
                return Err(Error::RoleMissing {
                    role: caller.role.to_owned(),
                })
            }
            // Every call before the last succeeded and the connection broke on the last one,
            // which commits (`COMMIT`, or a write's lone statement in its own implicit
            // transaction): the write may or may not have taken effect.
            Err(error)
                if !caller.read_only
                    && index + 1 == statements.len()
                    && crate::error::is_connection_loss(&error) =>
            {
                return Err(Error::CommitOutcomeUnknown(error))
            }
            Err(error) => return Ok((Ran::Failed { step, error }, switch)),
        }
    }
    connection.session = Some(Session {
        role: caller.role.to_owned(),
        timeout: caller.timeout,
        read_only: caller.read_only,
        principal_id: caller.principal_id,
        epoch,
    });
    Ok((Ran::Rows(rows), switch))
}

/// The statements every request uses besides its own, with their numbers of parameters.
const FIXED: [(&str, usize); 5] = [
    ("BEGIN", 0),
    ("BEGIN READ ONLY", 0),
    ("BEGIN READ WRITE", 0),
    (SWITCH, 4),
    ("COMMIT", 0),
];

/// The prepared statements of `sqls` (each with its number of `text` parameters), preparing on
/// the connection those it does not have yet, and whether it did. Preparing parses, and parsing
/// checks schema privileges, so statements are prepared as the login role: a `RESET ROLE` goes
/// first, in the same round trip, since the session may hold a caller's role; the session is
/// then the login role's until switched. The statements of [`FIXED`] are prepared along, so
/// that a connection that has its request's statements has them too.
async fn prepared(
    connection: &mut DataConnection,
    sqls: &[(&str, usize)],
) -> Result<(Vec<Statement>, bool)> {
    let found: Vec<Option<Statement>> = sqls
        .iter()
        .map(|(sql, _)| connection.statements.get(*sql).cloned())
        .collect();
    if found.iter().all(Option::is_some) {
        return Ok((found.into_iter().flatten().collect(), false));
    }
    let mut missing: Vec<(&str, usize)> = sqls
        .iter()
        .zip(&found)
        .filter(|(_, statement)| statement.is_none())
        .map(|(sql, _)| *sql)
        .collect();
    for fixed in FIXED {
        if !connection.statements.contains_key(fixed.0) && !missing.contains(&fixed) {
            missing.push(fixed);
        }
    }
    let client = &**connection;
    let types: Vec<Vec<Type>> = missing
        .iter()
        .map(|(_, count)| vec![Type::TEXT; *count])
        .collect();
    let reset = client.batch_execute(RESET_ROLE);
    let prepares = join_all(
        missing
            .iter()
            .zip(&types)
            .map(|((sql, _), types)| client.prepare_typed(sql, types)),
    );
    let (reset, prepares) = join(reset, prepares).await;
    reset?;
    let mut made = Vec::with_capacity(missing.len());
    for ((sql, _), statement) in missing.iter().zip(prepares) {
        made.push(((*sql).to_owned(), statement?));
    }
    connection.statements.extend(made);
    let statements = sqls
        .iter()
        .map(|(sql, _)| {
            connection.statements.get(*sql).cloned().ok_or_else(|| {
                Error::Internal("a statement prepared just now is missing".to_owned())
            })
        })
        .collect::<Result<_>>()?;
    Ok((statements, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    /// A NOLOGIN role that exists for one test (roles belong to the whole cluster).
    async fn role(client: &tokio_postgres::Client) -> String {
        let name = format!("hf_run_as_{}", uuid::Uuid::new_v4().simple());
        let quoted = hf_sql::quote_ident(&name).unwrap();
        client
            .batch_execute(&format!(
                "CREATE ROLE {quoted} NOLOGIN; GRANT {quoted} TO CURRENT_USER"
            ))
            .await
            .unwrap();
        name
    }

    /// The rows of a record read as `role` that must succeed.
    async fn read_rows(pool: &Pool, role: &str, step: &Step<'_>) -> Vec<Row> {
        read_rows_as(pool, &Caller::reader(role), step).await
    }

    /// The rows of a record read by `caller` that must succeed.
    async fn read_rows_as(pool: &Pool, caller: &Caller<'_>, step: &Step<'_>) -> Vec<Row> {
        read_record(pool, caller, step)
            .await
            .unwrap()
            .into_rows()
            .unwrap()
            .remove(0)
    }

    /// A fresh database, its admin client, a role to read as and pool settings of `max_size`
    /// connections.
    async fn reader_db(
        max_size: usize,
    ) -> (
        hf_testkit::TestDb,
        tokio_postgres::Client,
        String,
        crate::PoolSettings,
    ) {
        let db = hf_testkit::TestDb::new().await;
        let admin = db.client().await;
        let reader = role(&admin).await;
        let settings = crate::PoolSettings {
            max_size,
            ..crate::PoolSettings::default()
        };
        (db, admin, reader, settings)
    }

    async fn drop_role(client: &tokio_postgres::Client, name: &str) {
        let quoted = hf_sql::quote_ident(name).unwrap();
        client
            .batch_execute(&format!("DROP OWNED BY {quoted}; DROP ROLE {quoted}"))
            .await
            .unwrap();
    }

    /// The role a fresh checkout of the (one-connection) login pool runs as.
    async fn current_user(pool: &Pool) -> String {
        let client = pool.get().await.unwrap();
        let row = client
            .query_one("SELECT current_user::text", &[])
            .await
            .unwrap();
        row.get(0)
    }

    /// Whether the data connection is outside any transaction block (in a statement of its own,
    /// the transaction started with the statement).
    async fn data_connection_is_idle(pool: &Pool) -> bool {
        let connection = pool.data().get().await.unwrap();
        // The simple protocol: the statement's start is its transaction's start, unless a
        // transaction block is open.
        let messages = connection
            .simple_query("SELECT now() = statement_timestamp()")
            .await
            .unwrap();
        messages.iter().any(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("t"),
            _ => false,
        })
    }

    /// How many times the (one) data connection's session was switched.
    async fn switches(pool: &Pool) -> u64 {
        pool.data().get().await.unwrap().switches
    }

    fn one_connection(db: &hf_testkit::TestDb) -> Pool {
        let settings = crate::PoolSettings {
            max_size: 1,
            ..crate::PoolSettings::default()
        };
        crate::connect(db.url(), &settings).unwrap()
    }

    /// What a request sees of its session: role, time zone, read-only, timeout, caller id, and
    /// whether it ran as a statement of its own (no `BEGIN` before it).
    const SEEN: &str = "SELECT current_user::text, current_setting('TimeZone'), \
        current_setting('transaction_read_only'), current_setting('statement_timeout'), \
        current_setting('hf.caller_id', true), now() = statement_timestamp()";

    #[derive(Debug, PartialEq, Eq)]
    struct Seen {
        user: String,
        zone: String,
        read_only: String,
        timeout: String,
        caller_id: String,
        /// Whether the request switched the session.
        switched: bool,
    }

    async fn seen(pool: &Pool, caller: &Caller<'_>) -> Seen {
        let before = switches(pool).await;
        let steps = [Step {
            sql: SEEN,
            params: &[],
            fixed: &[],
        }];
        let rows = run_as(pool, caller, &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        let row = &rows[0][0];
        Seen {
            user: row.get(0),
            zone: row.get(1),
            read_only: row.get(2),
            timeout: row.get(3),
            caller_id: row.get::<_, Option<String>>(4).unwrap_or_default(),
            switched: switches(pool).await > before,
        }
    }

    #[tokio::test]
    async fn record_reads_of_one_caller_share_a_connection_and_never_another_callers() {
        let db = hf_testkit::TestDb::new().await;
        let admin = db.client().await;
        let first = role(&admin).await;
        let second = role(&admin).await;
        let pool = one_connection(&db);
        let read = |divisor: &'static str| {
            let params = vec![Some(divisor.to_owned())];
            move |pool: Pool, role: String| async move {
                let step = Step {
                    sql: "SELECT current_user::text, 1 / $1::int",
                    params: &params,
                    fixed: &[],
                };
                let ran = read_record(&pool, &Caller::reader(&role), &step).await;
                (role, ran.unwrap())
            }
        };
        // The first read switches the session and prepares the statement: nothing to share yet.
        let (_, ran) = read("1")(pool.clone(), first.clone()).await;
        ran.into_rows().unwrap();
        assert_eq!(pool.lanes().joined.load(Ordering::Relaxed), 0);

        // Reads of both callers at once on the one connection; one of them fails (a division by
        // zero), alone.
        let mut reads = Vec::new();
        for index in 0..12 {
            let role = if index % 4 == 3 { &second } else { &first };
            let divisor = if index == 5 { "0" } else { "1" };
            reads.push(read(divisor)(pool.clone(), role.clone()));
        }
        let answers = join_all(reads).await;
        for (index, (role, ran)) in answers.into_iter().enumerate() {
            match ran {
                Ran::Rows(rows) => {
                    assert_ne!(index, 5, "the division by zero succeeded");
                    assert_eq!(rows[0][0].get::<_, String>(0), role, "read {index}");
                }
                Ran::Failed { step, error } => {
                    assert_eq!(index, 5, "read {index} failed: {error}");
                    assert_eq!(step, Some(0));
                    assert_eq!(error.code(), Some(&SqlState::DIVISION_BY_ZERO));
                }
            }
        }
        // The first caller's reads shared the lane its first read opened (up to its depth).
        let joined = pool.lanes().joined.load(Ordering::Relaxed);
        assert!(
            joined >= (LANE_DEPTH - 1) as u64,
            "{joined} reads joined a lane"
        );

        // A writer never shares: it runs as `run_as` does.
        let step = Step {
            sql: "SELECT current_setting('transaction_read_only')",
            params: &[],
            fixed: &[],
        };
        let rows = read_record(&pool, &Caller::writer(&first), &step)
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        assert_eq!(rows[0][0].get::<_, String>(0), "off");

        drop(pool);
        drop_role(&admin, &first).await;
        drop_role(&admin, &second).await;
    }

    #[tokio::test]
    async fn a_read_that_waits_takes_a_seat_before_reads_that_came_after_it() {
        let (db, admin, reader, settings) = reader_db(1).await;
        let pool = crate::connect(db.url(), &settings).unwrap();
        // Reads run one after another on a lane's connection, so a read that sleeps holds up
        // those behind it there.
        let sleep = |seconds: &'static str| {
            let params = vec![Some(seconds.to_owned())];
            let pool = pool.clone();
            let reader = reader.clone();
            async move {
                let step = Step {
                    sql: "SELECT pg_sleep($1::float8)::text",
                    params: &params,
                    fixed: &[],
                };
                read_rows(&pool, &reader, &step).await;
            }
        };
        // Switches the session and prepares the statement.
        sleep("0").await;

        let finished = std::sync::Mutex::new(Vec::new());
        let finish = |name: &'static str| finished.lock().unwrap().push(name);
        // A full lane of slow reads holds the only connection.
        let slow = join_all((0..LANE_DEPTH).map(|_| sleep("0.2")));
        // Then a read finds no room and waits; then more reads arrive while it waits.
        let first = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            sleep("0").await;
            finish("first");
        };
        let later = join_all((0..3).map(|_| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            sleep("0").await;
            finish("later");
        }));
        futures_util::future::join3(slow, first, later).await;
        // Before, the later reads took the seats that came free (and were on the lane at
        // once), while the first stayed queued for a connection until the lane closed.
        assert_eq!(
            finished.into_inner().unwrap(),
            ["first", "later", "later", "later"]
        );
        assert_eq!(pool.lanes().waiting(), 0);

        drop(pool);
        drop_role(&admin, &reader).await;
    }

    #[tokio::test]
    async fn reads_that_wait_never_abandon_a_connection_being_opened() {
        let (db, admin, reader, settings) = reader_db(4).await;
        let step = Step {
            sql: "SELECT current_user::text",
            params: &[],
            fixed: &[],
        };
        // Many reads at once on a pool with no connection open yet: while connections are being
        // opened for some of them, lanes open on the first and offer their seats to the others.
        // The race is at start-up only, so it is run several times.
        const ROUNDS: i64 = 8;
        for _ in 0..ROUNDS {
            let pool = crate::connect(db.url(), &settings).unwrap();
            let deadline = std::time::Instant::now() + Duration::from_millis(100);
            join_all((0..64).map(|_| async {
                while std::time::Instant::now() < deadline {
                    read_rows(&pool, &reader, &step).await;
                }
            }))
            .await;
        }

        // The database saw the admin's session and one per connection of each pool: no session
        // started for a read that took a seat while its connection was being opened, and left
        // half-open (the statistics of a session are written when it ends: 2 s are left for
        // them; with the wait given up while connections were being opened, 38–44 sessions).
        let mut sessions = 0;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            admin
                .batch_execute("SELECT pg_stat_clear_snapshot()")
                .await
                .unwrap();
            let row = admin
                .query_one(
                    "SELECT sessions FROM pg_stat_database WHERE datname = current_database()",
                    &[],
                )
                .await
                .unwrap();
            sessions = row.get::<_, i64>(0);
        }
        assert!(sessions <= 1 + 4 * ROUNDS, "{sessions} sessions");

        drop_role(&admin, &reader).await;
    }

    /// The backend process of the (one) data connection.
    async fn data_backend(pool: &Pool) -> i32 {
        hf_testkit::backend_pid(&pool.data().get().await.unwrap()).await
    }

    #[tokio::test]
    async fn a_database_that_stops_answering_fails_the_request_in_time_and_loses_its_connection() {
        let (db, admin, reader, settings) = reader_db(1).await;
        let quoted = hf_sql::quote_ident(&reader).unwrap();
        admin
            .batch_execute(&format!(
                "CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'a'); \
                 GRANT SELECT, INSERT ON t TO {quoted}"
            ))
            .await
            .unwrap();
        let pool = crate::connect(db.url(), &settings).unwrap();
        let timeout = Duration::from_millis(200);
        let reader_caller = Caller {
            timeout,
            ..Caller::reader(&reader)
        };
        let writer_caller = Caller {
            timeout,
            ..Caller::writer(&reader)
        };
        let one = [Some("1".to_owned())];
        let read = Step {
            sql: "SELECT v FROM t WHERE id = $1::int",
            params: &one,
            fixed: &[],
        };
        let two = [Some("2".to_owned())];
        let write = Step {
            sql: "INSERT INTO t VALUES ($1::int, 'b')",
            params: &two,
            fixed: &[],
        };
        let deadline = timeout + ANSWER_GRACE;

        for writes in [false, true] {
            // The statement is prepared and the session switched, so that a read takes the
            // connection as a lane (its path for reads of a caller the session serves).
            assert_eq!(read_rows_as(&pool, &reader_caller, &read).await.len(), 1);
            let stopped = hf_testkit::StoppedBackend::stop(data_backend(&pool).await);

            let started = std::time::Instant::now();
            let outcome = if writes {
                run_as(&pool, &writer_caller, std::slice::from_ref(&write)).await
            } else {
                read_record(&pool, &reader_caller, &read).await
            };
            let waited = started.elapsed();
            let error = outcome.unwrap_err();
            assert!(
                matches!(error, Error::NoAnswer { write, .. } if write == writes),
                "{error:?}"
            );
            let kind = if writes {
                ErrorKind::CommitOutcomeUnknown
            } else {
                ErrorKind::Unavailable
            };
            assert_eq!(error.kind(), kind);
            assert!(
                waited >= deadline && waited < deadline + Duration::from_secs(3),
                "answered after {waited:?}"
            );

            // The next request runs on a new connection, whether or not the stopped backend
            // runs again.
            let next = data_backend(&pool).await;
            assert_ne!(
                next,
                stopped.pid(),
                "the connection given up was lent again"
            );
            drop(stopped);
            assert_eq!(read_rows_as(&pool, &reader_caller, &read).await.len(), 1);
        }

        drop(pool);
        drop_role(&admin, &reader).await;
    }

    /// Statements that take a while each but are answered in turn are not mistaken for a
    /// database that stopped: the silence is counted from the last answer, not from the start.
    #[tokio::test]
    async fn slow_statements_answered_in_turn_outlast_the_allowed_silence() {
        let (db, admin, reader, settings) = reader_db(1).await;
        let pool = crate::connect(db.url(), &settings).unwrap();
        let timeout = Duration::from_millis(1500);
        let caller = Caller {
            timeout,
            ..Caller::reader(&reader)
        };
        let sleep = Step {
            sql: "SELECT pg_sleep(1.0)",
            params: &[],
            fixed: &[],
        };
        let steps = [sleep; 4];
        let started = std::time::Instant::now();
        let rows = run_as(&pool, &caller, &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        assert_eq!(rows.len(), 4);
        assert!(started.elapsed() > timeout + ANSWER_GRACE);
        drop(pool);
        drop_role(&admin, &reader).await;
    }

    #[tokio::test]
    async fn a_stream_of_one_callers_reads_never_starves_another_caller() {
        let db = hf_testkit::TestDb::new().await;
        let admin = db.client().await;
        let busy = role(&admin).await;
        let other = role(&admin).await;
        // One connection, and a wait for it well below how long the stream runs.
        let settings = crate::PoolSettings {
            max_size: 1,
            wait_timeout: Duration::from_secs(1),
            ..crate::PoolSettings::default()
        };
        let pool = crate::connect(db.url(), &settings).unwrap();
        let step = Step {
            sql: "SELECT current_user::text",
            params: &[],
            fixed: &[],
        };
        read_rows(&pool, &busy, &step).await;

        // Four readers of one caller, each sending its next read as soon as the last is
        // answered, for up to 4 s or until the other caller was served.
        let served = std::sync::atomic::AtomicBool::new(false);
        let deadline = std::time::Instant::now() + Duration::from_secs(4);
        let stream = join_all((0..LANE_DEPTH).map(|_| async {
            let mut reads = 0;
            while !served.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                read_rows(&pool, &busy, &step).await;
                reads += 1;
            }
            reads
        }));
        let other_read = async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let ran = read_record(&pool, &Caller::reader(&other), &step).await;
            served.store(true, Ordering::SeqCst);
            ran
        };
        let (reads, ran) = join(stream, other_read).await;
        let rows = ran
            .expect("the other caller waited out the pool")
            .into_rows()
            .unwrap();
        assert_eq!(rows[0][0].get::<_, String>(0), other);
        assert!(reads.iter().sum::<usize>() > LANE_READS, "{reads:?}");

        drop(pool);
        drop_role(&admin, &busy).await;
        drop_role(&admin, &other).await;
    }

    #[tokio::test]
    async fn runs_as_the_role_and_never_leaks_it() {
        let db = hf_testkit::TestDb::new().await;
        let admin = db.client().await;
        admin
            .batch_execute("CREATE TABLE secret (x int); INSERT INTO secret VALUES (1)")
            .await
            .unwrap();
        let reader = role(&admin).await;
        let other = role(&admin).await;
        let pool = one_connection(&db);
        let login = current_user(&pool).await;

        // The statements run as the role, in UTC, read-only; values stay values.
        let steps = [Step {
            sql: "SELECT current_user::text, $1::text, $2::text",
            params: &[Some("it's; DROP TABLE secret; --".to_owned())],
            fixed: &[Some("fixed".to_owned())],
        }];
        let rows = run_as(&pool, &Caller::reader(&reader), &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        assert_eq!(rows[0][0].get::<_, String>(0), reader);
        assert_eq!(
            rows[0][0].get::<_, String>(1),
            "it's; DROP TABLE secret; --"
        );
        // A statement new to the connection is prepared as the login role, so the session is
        // switched again; the next time it is already prepared.
        assert!(seen(&pool, &Caller::reader(&reader)).await.switched);
        let first = seen(&pool, &Caller::reader(&reader)).await;
        assert_eq!(
            first,
            Seen {
                user: reader.clone(),
                zone: "UTC".to_owned(),
                read_only: "on".to_owned(),
                timeout: "5s".to_owned(),
                caller_id: String::new(),
                switched: false,
            },
            "the same caller again: its statement alone"
        );
        assert_eq!(
            current_user(&pool).await,
            login,
            "the login pool keeps its role"
        );

        // Another caller on the same connection gets its own settings, never the last ones.
        let id = uuid::Uuid::new_v4();
        let writer = Caller::writer(&other).for_principal(id);
        let second = seen(&pool, &writer).await;
        assert_eq!(second.user, other);
        assert_eq!(second.read_only, "off");
        assert_eq!(second.timeout, "15s");
        assert_eq!(second.caller_id, id.hyphenated().to_string());
        assert!(second.switched);
        let third = seen(&pool, &Caller::reader(&reader)).await;
        assert_eq!(
            (third.user.as_str(), third.read_only.as_str()),
            (reader.as_str(), "on")
        );
        assert_eq!(third.caller_id, "");

        // A privilege error is Forbidden; the next request is still its caller's own.
        let steps = [Step {
            sql: "SELECT x FROM secret",
            params: &[],
            fixed: &[],
        }];
        let ran = run_as(&pool, &Caller::reader(&reader), &steps)
            .await
            .unwrap();
        let error = ran.into_rows().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Forbidden, "{error}");
        assert_eq!(seen(&pool, &Caller::reader(&other)).await.user, other);

        // A statement over its timeout is Timeout; the connection stays healthy, and the
        // next request has its own timeout.
        let caller = Caller {
            timeout: Duration::from_millis(50),
            ..Caller::reader(&reader)
        };
        let steps = [Step {
            sql: "SELECT pg_sleep(2)",
            params: &[],
            fixed: &[],
        }];
        let error = run_as(&pool, &caller, &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Timeout, "{error}");
        let after = seen(&pool, &Caller::reader(&reader)).await;
        assert_eq!(
            (after.user.as_str(), after.timeout.as_str()),
            (reader.as_str(), "5s")
        );

        // An unknown role fails the switch; the statement never runs, under no role.
        let steps = [Step {
            sql: "INSERT INTO secret VALUES (2)",
            params: &[],
            fixed: &[],
        }];
        let error = run_as(&pool, &Caller::writer("no_such_role_here"), &steps)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::RoleMissing, "{error}");
        let count: i64 = admin
            .query_one("SELECT count(*) FROM secret", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(count, 1);
        assert_eq!(seen(&pool, &Caller::reader(&other)).await.user, other);

        // A request dropped half-way (its client went away) still ends its transaction, and
        // the next request switches again.
        let steps = [Step {
            sql: "SELECT pg_sleep(0.3)",
            params: &[],
            fixed: &[],
        }];
        let dropped = tokio::time::timeout(
            Duration::from_millis(50),
            run_as(&pool, &Caller::reader(&reader), &steps),
        )
        .await;
        assert!(dropped.is_err(), "the request was cut short");
        assert!(
            data_connection_is_idle(&pool).await,
            "no transaction is left open"
        );
        let after = seen(&pool, &Caller::writer(&other)).await;
        assert_eq!(
            (after.user.as_str(), after.switched),
            (other.as_str(), true)
        );

        // A role dropped and made again under the same name: sessions switch again once
        // principals change, so the new role is the one used.
        assert_eq!(seen(&pool, &Caller::reader(&reader)).await.user, reader);
        let quoted = hf_sql::quote_ident(&reader).unwrap();
        admin
            .batch_execute(&format!(
                "DROP ROLE {quoted}; CREATE ROLE {quoted} NOLOGIN; GRANT {quoted} TO CURRENT_USER"
            ))
            .await
            .unwrap();
        roles_changed();
        let again = seen(&pool, &Caller::reader(&reader)).await;
        assert_eq!(
            (again.user.as_str(), again.switched),
            (reader.as_str(), true)
        );

        // A role dropped in PostgreSQL directly, behind the service's back, is missing
        // (not refused) for the next request, although its session was not switched.
        let third = role(&admin).await;
        assert_eq!(seen(&pool, &Caller::reader(&third)).await.user, third);
        let quoted = hf_sql::quote_ident(&third).unwrap();
        admin
            .batch_execute(&format!("DROP ROLE {quoted}"))
            .await
            .unwrap();
        let steps = [Step {
            sql: SEEN,
            params: &[],
            fixed: &[],
        }];
        let error = run_as(&pool, &Caller::reader(&third), &steps)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::RoleMissing, "{error}");
        let steps = [Step {
            sql: "SELECT x FROM secret",
            params: &[],
            fixed: &[],
        }];
        assert_eq!(seen(&pool, &Caller::reader(&reader)).await.user, reader);
        admin
            .batch_execute(&format!(
                "CREATE ROLE {quoted} NOLOGIN; GRANT {quoted} TO CURRENT_USER"
            ))
            .await
            .unwrap();
        assert_eq!(seen(&pool, &Caller::reader(&third)).await.user, third);
        admin
            .batch_execute(&format!("DROP ROLE {quoted}"))
            .await
            .unwrap();
        let error = run_as(&pool, &Caller::reader(&third), &steps)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::RoleMissing, "{error}");

        // The statement cache stays bounded however many distinct statements arrive.
        for n in 0..MAX_CACHED_STATEMENTS + 10 {
            let sql = format!("SELECT {n}");
            let steps = [Step {
                sql: &sql,
                params: &[],
                fixed: &[],
            }];
            run_as(&pool, &Caller::reader(&reader), &steps)
                .await
                .unwrap()
                .into_rows()
                .unwrap();
        }
        let connection = pool.data().get().await.unwrap();
        assert!(connection.statements.len() <= MAX_CACHED_STATEMENTS);
        drop(connection);

        // Statements are prepared as the login role: a caller without a schema's privileges
        // does not spoil a statement another caller may run.
        admin
            .batch_execute("CREATE SCHEMA hidden; CREATE TABLE hidden.t (x int)")
            .await
            .unwrap();
        let quoted_other = hf_sql::quote_ident(&other).unwrap();
        admin
            .batch_execute(&format!(
                "GRANT USAGE ON SCHEMA hidden TO {quoted_other}; GRANT SELECT ON hidden.t TO {quoted_other}"
            ))
            .await
            .unwrap();
        assert_eq!(seen(&pool, &Caller::reader(&reader)).await.user, reader);
        let steps = [Step {
            sql: "SELECT count(*)::text FROM hidden.t",
            params: &[],
            fixed: &[],
        }];
        let rows = run_as(&pool, &Caller::reader(&other), &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap();
        assert_eq!(rows[0][0].get::<_, String>(0), "0");
        let error = run_as(&pool, &Caller::reader(&reader), &steps)
            .await
            .unwrap()
            .into_rows()
            .unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Forbidden, "{error}");

        drop(pool);
        drop_role(&admin, &reader).await;
        drop_role(&admin, &other).await;
    }
}
