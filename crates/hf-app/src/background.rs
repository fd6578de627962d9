//! Threads for CPU-heavy work that must not delay requests: they run under Linux's idle
//! scheduling policy (`SCHED_IDLE`), so they only get a core nobody else wants.
//!
//! Password hashing (argon2id) keeps a core busy for tens of milliseconds per hash by design.
//! On tokio's blocking threads, at the priority of the request threads and of the database, a
//! login flood made the scheduler hand that core to hashing for whole time slices, and ordinary
//! requests waited behind it: a record read's p99 was 5–6 times its idle value during a flood,
//! although every excess login was already refused at the door.
//!
//! A lower nice value is not enough. Linux's scheduler (EEVDF, since 6.6) lets the running
//! thread finish its slice before a thread that just woke takes the core unless the woken one's
//! deadline is earlier, and it checks a slice's end only at its next tick (4 ms at 250 Hz). A
//! database backend or a client woken next to a hash at nice 10 so waited up to a tick: with one
//! login at a time being hashed, a record read's p99 was 2.3 ms at the default slice and 3.9 ms
//! with a short slice asked for the hashing thread (its deadlines come sooner), against 0.5 ms
//! idle. A thread under `SCHED_IDLE` is preempted at once by any ordinary thread that wakes:
//! the same read's p99 was 0.7–0.8 ms, and as many logins were served (about 75 a second on one
//! core), because hashing still takes every moment of CPU the rest leaves. (With hashing that
//! never pauses, as in a login flood, some reads still waited for a tick on the virtual machine
//! measured, at nice 19 as under `SCHED_IDLE`: a wake-up sent there to a core busy computing
//! seems to arrive only at that core's tick.) Under a load that keeps every core busy, hashing
//! gets almost nothing, so logins wait and past the hashing wait are refused (503 with
//! `Retry-After`) while the requests of those already signed in go on.
//!
//! tokio's blocking pool cannot be used for this: its threads are shared with other blocking
//! work (files, git), and an unprivileged process cannot raise a thread's priority back once it
//! has lowered it. Hence this small pool of dedicated threads, which is all it takes; the work
//! sent to it is already bounded by its callers ([`crate::WorkQueue`]).

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::{Error, Result};

/// The nice value the threads take where the idle policy is refused (a sandbox that filters
/// `sched_setscheduler`): the lowest, 19.
pub const FALLBACK_NICE: i32 = 19;

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
                    run_when_idle();
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

/// The time slice the service's threads ask for, in nanoseconds: 100 µs, the shortest Linux
/// grants.
///
/// Linux's scheduler (EEVDF, since 6.6) lets a running thread use up its slice before a thread
/// that just woke takes the core, even one of higher priority, unless the woken one's deadline
/// is earlier; a short slice brings a thread's deadlines closer. Another program's work holding
/// a core could so keep a request's thread waiting for milliseconds. Asked for by the request
/// threads (see [`serve_with_short_slices`]), a short slice lets them take the core at once.
/// Kernels before 6.12 ignore it. (The background threads need no slice: under the idle policy
/// any waking thread preempts them.)
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
        if let Err(error) = set_schedule(nice) {
            tracing::warn!(%error, "could not ask for a short time slice for a request thread");
        }
    }
}

/// Puts the calling thread under the idle scheduling policy (`SCHED_IDLE`), or where that is
/// refused, gives it the lowest nice value, [`FALLBACK_NICE`]. On Linux both belong to each
/// thread, so this leaves the rest of the process as it is. A failure only costs the priority,
/// so it is logged and the thread carries on.
#[cfg(target_os = "linux")]
fn run_when_idle() {
    let parameters = libc::sched_param { sched_priority: 0 };
    // SAFETY: `sched_setscheduler` on thread 0 (the caller) only reads `parameters`, which lives
    // until it returns.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &parameters) } == 0 {
        return;
    }
    // SAFETY: `gettid` has no preconditions; `setpriority` with `PRIO_PROCESS` and a thread id
    // changes only that thread's nice value and reads no memory of ours.
    let changed = unsafe {
        let thread = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, FALLBACK_NICE)
    };
    if changed != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "could not lower the priority of a background thread"
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn run_when_idle() {}

/// Sets the calling thread's nice value and asks for the slice [`SLICE_NANOS`] (the ordinary
/// time-sharing policy otherwise).
#[cfg(target_os = "linux")]
fn set_schedule(nice: i32) -> std::io::Result<()> {
    let attributes = sched_attributes(nice, SLICE_NANOS);
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
        // SAFETY: `getpriority` only reads the thread's nice value.
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

    /// The scheduling policy of the calling thread.
    fn own_policy() -> i32 {
        // SAFETY: `sched_getscheduler` on thread 0 (the caller) only reads its policy.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[tokio::test]
    async fn runs_work_on_threads_of_the_idle_policy() {
        let before = (own_policy(), own_nice(), own_slice());
        let threads = LowPriorityThreads::start("hf-test-low", 2).unwrap();
        let (name, policy, nice) = threads
            .run(|| {
                let name = std::thread::current().name().map(str::to_owned);
                (name, own_policy(), own_nice())
            })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("hf-test-low"));
        // The idle policy, or where a sandbox refuses it, the lowest nice value.
        assert!(
            policy == libc::SCHED_IDLE || nice == FALLBACK_NICE,
            "policy {policy}, nice {nice}"
        );
        assert_eq!(
            (own_policy(), own_nice(), own_slice()),
            before,
            "the caller's thread keeps its policy, priority and slice"
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
}
