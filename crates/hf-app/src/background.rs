//! Threads for CPU-heavy work that must not delay requests: they run at a lower scheduling
//! priority than the rest of the service (nice 10 on Linux).
//!
//! Password hashing (argon2id) keeps a core busy for tens of milliseconds per hash by design.
//! On tokio's blocking threads, at the priority of the request threads and of the database, a
//! login flood made the scheduler hand that core to hashing for whole time slices, and ordinary
//! requests waited behind it: a record read's p99 was 5–6 times its idle value during a flood,
//! although every excess login was already refused at the door. At a lower priority a hashing
//! thread still gets every moment of CPU nobody else wants, and a weighted share (about a tenth
//! of a core against one busy thread) when others want it too, so logins slow down under load
//! instead of everything else, and still get through.
//!
//! The threads keep the default time slice. Linux's scheduler (EEVDF, since 6.6) lets the
//! running thread finish its slice before a thread that just woke takes the core unless the
//! woken one's deadline is earlier, and checks a slice's end at its next tick (4 ms at 250 Hz).
//! A short slice brings a hashing thread's deadlines so close that a woken database backend
//! (default slice) no longer preempts it: with one login at a time being hashed, a record
//! read's p99 was 3.3–4.2 ms with a 100 µs slice for the hashing thread and 1.8–2.2 ms with the
//! default one (0.4–0.7 ms idle). `SCHED_IDLE`, which any waking thread preempts at once, did
//! better still (0.7–0.8 ms), but leaves hashing almost nothing while other work keeps the cores
//! busy: on a machine busy with other programs (a parallel test run) logins were refused for
//! want of CPU.
//!
//! A lower priority is not enough on its own, though. When the scheduler moves a waiting
//! thread onto the core a hashing thread holds (load balancing does this whenever the other
//! cores have a queue), the moved thread is not run until that core's next timer tick, 4 ms at
//! 250 Hz, whatever the priorities or the scheduling policy, `SCHED_IDLE` included (seen with
//! `perf sched`: a request thread and a database backend moved next to a hashing thread, which
//! then ran on for 4 ms). argon2 cannot be paused and resumed, so a job running here is
//! interrupted every [`YIELD_EVERY`] by a timer of its thread, whose signal handler gives the
//! core away (`sched_yield`) when anyone else waits for it; a thread that waits is then run
//! within a quarter of a millisecond. It yields only while the job has had nine tenths of its
//! time: on a machine whose cores are all wanted, each yield would push the thread further back
//! and leave hashing next to nothing. With five logins a second beside a record read every
//! 2 ms, the read's p99 was 3.9–4.4 ms without these yields and 1.7 ms with them, as with no
//! logins at all (1.1–1.7 ms); logins were no slower (22–29 a second at two at a time without,
//! 32–33 with).
//!
//! tokio's blocking pool cannot be used for this: its threads are shared with other blocking
//! work (files, git), and an unprivileged process cannot raise a thread's priority back once it
//! has lowered it. Hence this small pool of dedicated threads, which is all it takes; the work
//! sent to it is already bounded by its callers ([`crate::WorkQueue`]).

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Error, Result};

/// How much lower than the service the threads run (Linux nice values; 0 is the default,
/// 19 the lowest).
pub const NICE: i32 = 10;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of low-priority threads taking jobs from one queue; the threads end once the
/// pool is dropped and the jobs already queued are done.
#[derive(Debug)]
pub struct LowPriorityThreads {
    jobs: Mutex<mpsc::Sender<Job>>,
}

impl LowPriorityThreads {
    /// Starts `count` threads (at least one) named `name`.
    pub fn start(name: &str, count: usize) -> Result<LowPriorityThreads> {
        let (sender, receiver) = mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        for _ in 0..count.max(1) {
            let receiver = Arc::clone(&receiver);
            std::thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || {
                    lower_priority();
                    let yields = YieldTimer::for_this_thread();
                    loop {
                        // The lock is held only while waiting for the next job, not while it runs.
                        let next = receiver
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .recv();
                        match next {
                            // A job that panics loses its result (its caller gets an error),
                            // not the thread: the pool keeps its size, and the queue behind it
                            // keeps moving.
                            Ok(job) => {
                                let _yielding = yields.as_ref().map(YieldTimer::start);
                                if std::panic::catch_unwind(AssertUnwindSafe(job)).is_err() {
                                    tracing::error!("a low-priority job panicked");
                                }
                            }
                            Err(mpsc::RecvError) => break,
                        }
                    }
                })
                .map_err(|error| {
                    Error::Internal(format!("cannot start a {name} thread: {error}"))
                })?;
        }
        Ok(LowPriorityThreads {
            jobs: Mutex::new(sender),
        })
    }

    /// Runs `work` on one of the threads and waits for its result without blocking the async
    /// thread. If the caller stops waiting, the work still runs to its end.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        let (done, result) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            // The caller may have gone away; its result is then dropped.
            let _ = done.send(work());
        });
        self.jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .send(job)
            .map_err(|_| Error::Internal("the low-priority threads have stopped".to_owned()))?;
        result
            .await
            .map_err(|_| Error::Internal("a low-priority job ended without a result".to_owned()))
    }
}

/// How often a running background job gives its core to whoever waits for it (see the module
/// comment): short against the 4 ms a waiting thread would otherwise lose, long against the few
/// microseconds a signal and a `sched_yield` cost (logins were no slower with it).
pub const YIELD_EVERY: Duration = Duration::from_micros(250);

/// A timer of one background thread that, while started, interrupts the thread every
/// [`YIELD_EVERY`] with a real-time signal whose handler calls `sched_yield` ([`yield_core`]):
/// the yield points that work which cannot pause itself (argon2) lacks.
///
/// Written by hand: no crate offers per-thread interval timers, and the handler is a few lines.
/// The signal is `SIGRTMAX - 2`, which nothing else in the service uses; the handler is
/// installed only where the signal still has its default disposition, since a handler another
/// library installed must not be replaced (without one, the thread simply does not yield).
#[cfg(target_os = "linux")]
struct YieldTimer {
    timer: libc::timer_t,
}

#[cfg(target_os = "linux")]
thread_local! {
    /// How many times the calling thread's [`YieldTimer`] fired; read by the tests. These
    /// `Cell`s have constant initialisers and nothing to drop: using them from the signal
    /// handler touches only the thread's own storage.
    static SIGNALS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// When the running job started, in wall-clock and in the thread's CPU nanoseconds.
    static JOB_STARTED: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// The time of `clock` in nanoseconds (0 if it cannot be read); async-signal-safe.
#[cfg(target_os = "linux")]
fn clock_nanos(clock: libc::clockid_t) -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes only `now`, which outlives the call.
    if unsafe { libc::clock_gettime(clock, &mut now) } != 0 {
        return 0;
    }
    let seconds = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    seconds.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// The signal handler: yields the core, but only while the job has had at least nine tenths
/// of the time since it started. Every `sched_yield` moves the thread's deadline a slice further
/// out, so on a machine whose cores are all wanted, yielding at every signal would leave
/// hashing next to nothing (logins were refused for want of CPU in a parallel test run); there
/// the scheduler already interleaves the thread with the others, and the yields stop until the
/// job has had its nine tenths again. A yield thus costs a job at most a tenth of its time.
#[cfg(target_os = "linux")]
extern "C" fn yield_core(_signal: libc::c_int) {
    SIGNALS.with(|signals| signals.set(signals.get() + 1));
    let (wall_started, cpu_started) = JOB_STARTED.with(std::cell::Cell::get);
    let wall = clock_nanos(libc::CLOCK_MONOTONIC).saturating_sub(wall_started);
    let cpu = clock_nanos(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu_started);
    if cpu.saturating_mul(10) >= wall.saturating_mul(9) {
        // SAFETY: `sched_yield` is async-signal-safe and cannot fail on Linux.
        unsafe { libc::sched_yield() };
    }
}

#[cfg(target_os = "linux")]
impl YieldTimer {
    fn signal() -> libc::c_int {
        libc::SIGRTMAX() - 2
    }

    /// A stopped timer for the calling thread, or `None` (logged) where the handler cannot be
    /// installed or the timer created: the thread then runs its jobs without yielding.
    fn for_this_thread() -> Option<YieldTimer> {
        static HANDLER: std::sync::OnceLock<std::io::Result<()>> = std::sync::OnceLock::new();
        if let Err(error) = HANDLER.get_or_init(Self::install_handler) {
            tracing::warn!(%error, "background threads will not yield their cores");
            return None;
        }
        // SAFETY: an all-zero `sigevent` is a valid value of this plain C struct; the fields
        // that matter are set below.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = Self::signal();
        // SAFETY: `gettid` has no preconditions.
        event.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: `event` and `timer` outlive the call, which writes the new timer's id into
        // `timer`; the signal it will send has a handler (installed above).
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) } != 0 {
            let error = std::io::Error::last_os_error();
            tracing::warn!(%error, "a background thread will not yield its core");
            return None;
        }
        Some(YieldTimer { timer })
    }

    /// Installs [`yield_core`] for [`YieldTimer::signal`] unless something else handles it.
    fn install_handler() -> std::io::Result<()> {
        // SAFETY: all-zero `sigaction`s are valid values; `sigaction` reads the new one and
        // writes the old one, both living until it returns. The handler only touches its
        // thread's own counter and calls `sched_yield`, so it is async-signal-safe;
        // `SA_RESTART` resumes any system call it interrupts.
        unsafe {
            let mut current: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(Self::signal(), std::ptr::null(), &mut current) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if current.sa_sigaction != libc::SIG_DFL {
                return Err(std::io::Error::other(
                    "another handler is installed for the yield signal",
                ));
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = yield_core as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            if libc::sigaction(Self::signal(), &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Starts the interruptions until the returned guard is dropped (the job has ended).
    fn start(&self) -> Yielding<'_> {
        let started = (
            clock_nanos(libc::CLOCK_MONOTONIC),
            clock_nanos(libc::CLOCK_THREAD_CPUTIME_ID),
        );
        JOB_STARTED.with(|job| job.set(started));
        self.set(YIELD_EVERY);
        Yielding(self)
    }

    /// Fires every `every` from now on, or never again for zero.
    fn set(&self, every: Duration) {
        let every = libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::c_long::try_from(every.as_nanos()).unwrap_or(0),
        };
        let schedule = libc::itimerspec {
            it_interval: every,
            it_value: every,
        };
        // SAFETY: the timer is this thread's and alive until `drop`; `schedule` outlives the
        // call. It can only fail for an invalid timer or time, neither possible here.
        unsafe { libc::timer_settime(self.timer, 0, &schedule, std::ptr::null_mut()) };
    }
}

#[cfg(target_os = "linux")]
impl Drop for YieldTimer {
    fn drop(&mut self) {
        // SAFETY: the timer was created by `for_this_thread` and is deleted once.
        unsafe { libc::timer_delete(self.timer) };
    }
}

/// A started [`YieldTimer`]; stops it when dropped.
#[cfg(target_os = "linux")]
struct Yielding<'timer>(&'timer YieldTimer);

#[cfg(target_os = "linux")]
impl Drop for Yielding<'_> {
    fn drop(&mut self) {
        self.0.set(Duration::ZERO);
    }
}

/// Elsewhere background threads do not yield.
#[cfg(not(target_os = "linux"))]
struct YieldTimer;

#[cfg(not(target_os = "linux"))]
impl YieldTimer {
    fn for_this_thread() -> Option<YieldTimer> {
        None
    }

    fn start(&self) {}
}

/// The time slice the service's threads ask for, in nanoseconds: 100 µs, the shortest Linux
/// grants.
///
/// Linux's scheduler (EEVDF, since 6.6) lets a running thread use up its slice before a thread
/// that just woke takes the core, even one of higher priority, unless the woken one asks for a
/// shorter slice; the default slice is milliseconds. A hashing thread (or any other program's
/// work) holding a core could so keep a request's thread waiting for milliseconds. Asked for by
/// the request threads (see [`serve_with_short_slices`]), a short slice lets them take the core
/// at once. Kernels before 6.12 ignore it. (The background threads keep the default slice; see
/// the module comment.)
pub const SLICE_NANOS: u64 = 100_000;

/// Asks for the short time slice [`SLICE_NANOS`] for the calling thread, keeping its priority:
/// called by each thread that serves requests, so that when a request wakes it, it takes a core
/// from a thread running a long slice at once, instead of when that slice ends. A failure only
/// costs the latency, so it is logged and the thread carries on.
pub fn serve_with_short_slices() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `gettid` has no preconditions; `getpriority` only reads the thread's nice value.
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
        if let Err(error) = set_schedule(nice, SLICE_NANOS) {
            tracing::warn!(%error, "could not ask for a short time slice for a request thread");
        }
    }
}

/// Runs the calling thread, and the threads it starts after this, as background work:
/// [`NICE`] with the default time slice. A compile worker process calls it first, since it
/// inherits the short slice and the priority of the request thread that started it.
pub fn run_as_background_work() {
    lower_priority();
}

/// Lowers the calling thread's priority to [`NICE`] with the default time slice, whatever slice
/// the thread that started it had asked for. On Linux both belong to each thread, so this
/// leaves the rest of the process as it is. A failure only costs the priority, so it is logged
/// and the thread carries on.
#[cfg(target_os = "linux")]
fn lower_priority() {
    if set_schedule(NICE, 0).is_ok() {
        return;
    }
    // A kernel or sandbox without `sched_setattr`: the nice value alone.
    // SAFETY: `gettid` has no preconditions; `setpriority` with `PRIO_PROCESS` and a thread id
    // changes only that thread's nice value and reads no memory of ours.
    let changed = unsafe {
        let thread = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, NICE)
    };
    if changed != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "could not lower the priority of a background thread"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

/// Sets the calling thread's nice value and time slice (`slice_nanos`; 0 asks for the default),
/// under the ordinary time-sharing policy.
#[cfg(target_os = "linux")]
fn set_schedule(nice: i32, slice_nanos: u64) -> std::io::Result<()> {
    let attributes = sched_attributes(nice, slice_nanos);
    // SAFETY: `sched_setattr` on thread 0 (the caller) only reads the attributes, which live
    // until it returns; libc has no wrapper for it, hence the raw system call.
    let set = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0,
            &attributes as *const libc::sched_attr,
            0,
        )
    };
    if set == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The ordinary time-sharing policy with this nice value and slice (`runtime`, in nanoseconds;
/// 0 asks for the default).
#[cfg(target_os = "linux")]
fn sched_attributes(nice: i32, runtime: u64) -> libc::sched_attr {
    libc::sched_attr {
        size: std::mem::size_of::<libc::sched_attr>() as u32,
        sched_policy: libc::SCHED_OTHER as u32,
        sched_flags: 0,
        sched_nice: nice,
        sched_priority: 0,
        sched_runtime: runtime,
        sched_deadline: 0,
        sched_period: 0,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The nice value of the calling thread.
    fn own_nice() -> i32 {
        // SAFETY: as in `lower_priority`; `getpriority` only reads the thread's nice value.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    /// The time slice the calling thread asked for (0: the default).
    fn own_slice() -> u64 {
        let mut attributes = sched_attributes(0, 0);
        let size = attributes.size;
        // SAFETY: `sched_getattr` writes at most `size` bytes into the attributes.
        let read = unsafe {
            libc::syscall(
                libc::SYS_sched_getattr,
                0,
                &mut attributes as *mut libc::sched_attr,
                size,
                0,
            )
        };
        assert_eq!(read, 0, "{}", std::io::Error::last_os_error());
        attributes.sched_runtime
    }

    #[test]
    fn a_request_thread_asks_for_the_short_slice_and_keeps_its_priority() {
        let (before, after) = std::thread::spawn(|| {
            let before = own_nice();
            serve_with_short_slices();
            (before, (own_nice(), own_slice()))
        })
        .join()
        .unwrap();
        assert_eq!(after.0, before, "the thread keeps its nice value");
        assert!(after.1 == SLICE_NANOS || after.1 == 0, "{}", after.1);
    }

    #[tokio::test]
    async fn runs_work_on_threads_of_lower_priority() {
        let before = (own_nice(), own_slice());
        // Started from a thread on the short slice, as a request thread would.
        let threads = std::thread::spawn(|| {
            serve_with_short_slices();
            LowPriorityThreads::start("hf-test-low", 2).unwrap()
        })
        .join()
        .unwrap();
        let (name, nice, slice) = threads
            .run(|| {
                let name = std::thread::current().name().map(str::to_owned);
                (name, own_nice(), own_slice())
            })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("hf-test-low"));
        // At least NICE (a test run at a lower priority still, without the right to raise it,
        // leaves its threads where they were).
        assert!(nice >= NICE, "{nice}");
        // The default slice (that of this test's thread, which never asked for one), even when
        // started from a thread on the short one; where the priority could not be set, neither
        // could the slice.
        if nice == NICE {
            assert_eq!(slice, before.1);
        }
        assert_eq!(
            (own_nice(), own_slice()),
            before,
            "the caller's thread keeps its priority and slice"
        );

        // A job that panics fails alone; the thread carries on with the next ones.
        let single = LowPriorityThreads::start("hf-test-low", 1).unwrap();
        let panicked = single.run(|| -> u8 { panic!("a bug in a job") }).await;
        assert!(panicked.is_err());
        assert_eq!(single.run(|| 7).await.unwrap(), 7);

        // Many jobs at once all finish.
        let results =
            futures_util::future::join_all((0..16).map(|n| threads.run(move || n * 2))).await;
        let mut values: Vec<i32> = results.into_iter().map(|r| r.unwrap()).collect();
        values.sort_unstable();
        assert_eq!(values, (0..16).map(|n| n * 2).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_running_job_yields_its_core_at_intervals_and_a_finished_one_does_not() {
        let thread = LowPriorityThreads::start("hf-test-yield", 1).unwrap();
        let own_signals = || SIGNALS.with(std::cell::Cell::get);
        // Keeps the core busy, as argon2 does, until interrupted three times (a timer of
        // YIELD_EVERY: about a millisecond), or fails after two seconds.
        let (during, at_end) = thread
            .run(move || {
                let start = own_signals();
                let deadline = std::time::Instant::now() + Duration::from_secs(2);
                while own_signals() - start < 3 && std::time::Instant::now() < deadline {
                    std::hint::spin_loop();
                }
                (own_signals() - start, own_signals())
            })
            .await
            .unwrap();
        assert!(during >= 3, "interrupted {during} times in two seconds");
        // Between jobs the timer is stopped: at most a signal already on its way arrives.
        tokio::time::sleep(YIELD_EVERY * 20).await;
        let at_next_start = thread.run(own_signals).await.unwrap();
        assert!(at_next_start - at_end <= 1, "{at_end} then {at_next_start}");
    }
}
