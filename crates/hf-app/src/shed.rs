//! Load shedding: a bounded queue in front of scarce work, so excess requests are refused at
//! once instead of queueing for seconds.
//!
//! Password hashing (argon2id: ~19 MiB and a core for ~50-100 ms each) runs on at most half the
//! cores, so other requests keep a core, and HFX compiles at most one per core. Without a bound, a flood of logins queued behind the semaphore and every
//! request waited its turn (a 3.7 s median at 256 concurrent logins). A [`WorkQueue`] admits at
//! most `max_waiting` requests into the wait, each for at most `max_wait`; the rest are refused
//! immediately ([`Error::Overloaded`], which the HTTP service answers 503 with `Retry-After`), so a client learns within milliseconds to come
//! back, and the work already admitted finishes in bounded time.
//!
//! Record requests and queries wait for a connection of the data pool instead, whose own wait
//! is bounded by the pool's wait timeout (5 s). Under a sustained overload that bound is far
//! too long: every request would queue for seconds before being served or refused. So
//! [`refuse_if_data_pool_backed_up`] turns a request away at once when
//! [`DATA_WAITERS_PER_SHARD`] requests already wait for a connection of the worker's shard of
//! the pool (a worker serves 10,000 or more record reads a second, so some milliseconds of
//! queue): the pool stays busy with admitted work, and the excess learns at once to come back.
//! The bound is per shard (per worker thread, so per core) rather than per connection: how much
//! a worker gets through decides how long its queue takes, whatever the pool's size.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::Error;

/// How many requests may wait for a connection of one shard of the data pool before more are
/// refused at once (see the module comment).
pub const DATA_WAITERS_PER_SHARD: usize = 64;

/// Refuses a request that needs a data connection ([`Error::Overloaded`]) when the pool's wait
/// is already full; admits it otherwise.
pub fn refuse_if_data_pool_backed_up(pool: &hf_storage::Pool) -> Result<(), Error> {
    if pool.data_queue() >= DATA_WAITERS_PER_SHARD {
        return Err(Error::Overloaded {
            what: "database requests",
        });
    }
    Ok(())
}

/// A semaphore with a bounded number of waiters and a bounded wait.
#[derive(Debug)]
pub struct WorkQueue {
    what: &'static str,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
    /// Requests admitted by [`WorkQueue::admit`] and not yet finished.
    admitted: Arc<AtomicUsize>,
    /// How many [`WorkQueue::admit`] lets in at once: the running work plus its wait.
    max_admitted: usize,
}

impl WorkQueue {
    /// A queue for `concurrency` pieces of work at once (at least one), with at most
    /// `max_waiting` more waiting, each for at most `max_wait`. `what` names the work in the
    /// refusal ("password checks", "compiles").
    pub fn new(
        what: &'static str,
        concurrency: usize,
        max_waiting: usize,
        max_wait: Duration,
    ) -> Self {
        Self {
            what,
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            waiting: AtomicUsize::new(0),
            max_waiting,
            max_wait,
            admitted: Arc::new(AtomicUsize::new(0)),
            max_admitted: concurrency.max(1) + max_waiting,
        }
    }

    /// A permit to run one piece of work, or [`Error::Overloaded`] when the queue is full or the
    /// wait would be longer than allowed. The permit is owned, so it can travel with work that
    /// outlives its request.
    pub async fn enter(&self) -> Result<OwnedSemaphorePermit, Error> {
        if let Ok(permit) = Arc::clone(&self.permits).try_acquire_owned() {
            return Ok(permit);
        }
        let waiter = Waiter::join(&self.waiting);
        if waiter.ahead >= self.max_waiting {
            return Err(self.overloaded());
        }
        let admitted =
            match tokio::time::timeout(self.max_wait, Arc::clone(&self.permits).acquire_owned())
                .await
            {
                Ok(Ok(permit)) => Ok(permit),
                Ok(Err(_closed)) => Err(Error::Internal(format!(
                    "the queue of {} is closed",
                    self.what
                ))),
                Err(_elapsed) => Err(self.overloaded()),
            };
        drop(waiter);
        admitted
    }

    /// Refuses at once ([`Error::Overloaded`]) when as many requests are admitted
    /// ([`WorkQueue::admit`]) as can run and wait, or when no slot is free and the wait is full,
    /// so a request can be turned away before it spends anything (reading its body, database
    /// round trips) on work it would not get to do. Takes no place: a later
    /// [`WorkQueue::admit`] or [`WorkQueue::enter`] may still refuse.
    pub fn refuse_if_full(&self) -> Result<(), Error> {
        let all_admitted = self.admitted.load(Ordering::SeqCst) >= self.max_admitted;
        let wait_full = self.permits.available_permits() == 0
            && self.waiting.load(Ordering::SeqCst) >= self.max_waiting;
        if all_admitted || wait_full {
            Err(self.overloaded())
        } else {
            Ok(())
        }
    }

    /// Admits a request that will need this queue, or refuses it at once ([`Error::Overloaded`])
    /// when as many are admitted as can run and wait; the place is held until the
    /// [`Admission`] is dropped, when the request ends.
    ///
    /// Taking a place before the work that precedes the queue (database round trips) refuses a
    /// flood in full before that work. Checking for a free place instead
    /// ([`WorkQueue::refuse_if_full`] alone) lets in every request that arrives between the
    /// moment a place frees and the moment the next admitted request reaches the queue (dozens
    /// under a flood), and all but one of them are refused only after that work, tens of
    /// milliseconds later. Take it once the request's body is read, so a client that sends its
    /// body slowly holds no place.
    pub fn admit(&self) -> Result<Admission, Error> {
        let taken = self
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |admitted| {
                (admitted < self.max_admitted).then_some(admitted + 1)
            });
        match taken {
            Ok(_) => Ok(Admission {
                admitted: Arc::clone(&self.admitted),
            }),
            Err(_) => Err(self.overloaded()),
        }
    }

    fn overloaded(&self) -> Error {
        Error::Overloaded { what: self.what }
    }
}

/// A request's place among those [`WorkQueue::admit`] let in; given back when dropped.
#[derive(Debug)]
pub struct Admission {
    admitted: Arc<AtomicUsize>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One place in the wait, given back when the waiting ends (with a permit, a refusal, or a
/// client that went away).
struct Waiter<'a> {
    waiting: &'a AtomicUsize,
    /// How many were waiting before this one.
    ahead: usize,
}

impl<'a> Waiter<'a> {
    fn join(waiting: &'a AtomicUsize) -> Self {
        let ahead = waiting.fetch_add(1, Ordering::SeqCst);
        Self { waiting, ahead }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn excess_waiters_are_refused_at_once_and_the_queue_recovers() {
        let queue = Arc::new(WorkQueue::new("tests", 1, 1, Duration::from_secs(5)));
        let running = queue.enter().await.unwrap();
        let waiting = tokio::spawn({
            let queue = Arc::clone(&queue);
            async move { queue.enter().await.map(drop) }
        });
        while queue.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let started = std::time::Instant::now();
        let refused = queue.enter().await.unwrap_err();
        assert!(matches!(refused, Error::Overloaded { .. }));
        assert!(started.elapsed() < Duration::from_secs(1));
        assert!(queue.refuse_if_full().is_err());
        drop(running);
        waiting.await.unwrap().unwrap();
        assert_eq!(queue.waiting.load(Ordering::SeqCst), 0);
        assert!(queue.refuse_if_full().is_ok());
        drop(queue.enter().await.unwrap());
    }

    #[test]
    fn admissions_are_bounded_by_the_work_and_its_wait_and_given_back() {
        let queue = WorkQueue::new("tests", 1, 2, Duration::from_secs(5));
        let admitted: Vec<Admission> = (0..3).map(|_| queue.admit().unwrap()).collect();
        assert!(matches!(queue.admit(), Err(Error::Overloaded { .. })));
        assert!(queue.refuse_if_full().is_err());
        drop(admitted);
        assert!(queue.refuse_if_full().is_ok());
        assert_eq!(queue.admitted.load(Ordering::SeqCst), 0);
        drop(queue.admit().unwrap());
    }

    #[tokio::test]
    async fn a_wait_longer_than_allowed_is_refused() {
        let queue = WorkQueue::new("tests", 1, 10, Duration::from_millis(50));
        let _running = queue.enter().await.unwrap();
        let refused = queue.enter().await.unwrap_err();
        assert!(matches!(refused, Error::Overloaded { .. }));
    }
}
