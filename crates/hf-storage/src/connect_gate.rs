//! Failing fast while the database does not answer.
//!
//! A database whose host died or froze, or a network that drops what is sent to it without a
//! word, answers nothing: an attempt to connect waits for the pool's create timeout (5 s), and a
//! statement on an open connection for its allowed silence (see `run_as::ANSWER_GRACE`), before
//! either fails. While that lasts, every request would wait as long in turn, each on another
//! dead idle connection or another attempt to connect, and hold its client, its place in the
//! queues and its memory meanwhile.
//!
//! So once the database has been found not answering (an attempt to connect failed for want of
//! it: no answer, refused, no route, that is no SQLSTATE, since a refusal with one, a wrong
//! password say, says the database is there; or a connection was given up for its silence), one
//! request at a time tries the pools (the probe), and every other request is refused at once
//! with [`Error::Unreachable`]. Meanwhile an idle connection is checked before it is lent (an
//! empty query; see `pool::IdleChecks`), so the probe gets a connection that answered just now
//! or a new one, and the first connection lent so opens the gate again. PgBouncer treats failed
//! server logins the same way (`server_login_retry`). Written here because deadpool has no
//! notion of it, and it is a few lines over its `get`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use deadpool::managed::{PoolError, TimeoutType};

use crate::{Error, Result};

/// Whether the database answers, shared by every pool of one database. Every request asks it,
/// so it is two atomics rather than a lock; nothing else is published through them, so their
/// operations need no ordering beyond their own.
#[derive(Debug)]
pub(crate) struct ConnectGate {
    /// When the gate was made: the clock `closed_at` counts from.
    made: Instant,
    /// When the gate closed, in microseconds from `made` plus one; 0 while it is open.
    closed_at: AtomicU64,
    /// Whether a request is trying the database while the gate is closed.
    probing: AtomicBool,
}

/// A request let through the gate; its outcome is told back with [`Pass::outcome`].
#[derive(Debug)]
pub(crate) struct Pass<'a> {
    gate: &'a ConnectGate,
    /// Whether this request is the one trying while attempts fail.
    probe: bool,
}

impl Default for ConnectGate {
    fn default() -> Self {
        ConnectGate {
            made: Instant::now(),
            closed_at: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }
}

impl ConnectGate {
    /// Lets a request through to a pool, or refuses it at once while the database does not
    /// answer and another request is trying it.
    pub(crate) fn enter(&self) -> Result<Pass<'_>> {
        let closed_at = self.closed_at.load(Ordering::Relaxed);
        if closed_at == 0 {
            return Ok(Pass {
                gate: self,
                probe: false,
            });
        }
        if self
            .probing
            .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return Err(Error::Unreachable {
                failing_for: self.closed_for(closed_at),
            });
        }
        Ok(Pass {
            gate: self,
            probe: true,
        })
    }

    /// Notes that the database stopped answering on an open connection.
    pub(crate) fn stopped_answering(&self) {
        self.close("a connection was given up for its silence");
    }

    /// Closes the gate, logging it when it was open (once, however many requests it refuses).
    fn close(&self, why: &str) {
        let now = u64::try_from(self.made.elapsed().as_micros())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1);
        let closed_now = self
            .closed_at
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if closed_now {
            tracing::warn!(
                "the database is not answering ({why}): one request at a time tries it, the \
                 others are answered DATABASE_UNAVAILABLE at once"
            );
        }
    }

    /// Opens the gate, logging it when it was closed.
    fn open(&self) {
        let closed_at = self.closed_at.swap(0, Ordering::Relaxed);
        if closed_at != 0 {
            tracing::info!(
                not_answering_ms = self.closed_for(closed_at).as_millis(),
                "the database answers again"
            );
        }
    }

    /// Whether the database has been found not answering (and not answered since).
    pub(crate) fn is_failing(&self) -> bool {
        self.closed_at.load(Ordering::Relaxed) != 0
    }

    /// How long ago the gate closed, for a `closed_at` read from it (not 0).
    fn closed_for(&self, closed_at: u64) -> Duration {
        let closed = Duration::from_micros(closed_at.saturating_sub(1));
        self.made.elapsed().saturating_sub(closed)
    }
}

impl Pass<'_> {
    /// Tells the gate how the pool's `get` ended: a connection lent opens the gate (while it is
    /// closed, only one that answered its check or was just made is lent), an attempt to
    /// connect that failed for want of the database closes it.
    pub(crate) fn outcome<T>(
        self,
        got: std::result::Result<T, PoolError<tokio_postgres::Error>>,
    ) -> Result<T> {
        let reached = match &got {
            Ok(_) => Some(true),
            Err(PoolError::Timeout(TimeoutType::Create)) => Some(false),
            Err(PoolError::Backend(error)) if error.code().is_none() => Some(false),
            // Busy (the wait timed out), a connection that failed its check, a refusal by a
            // database that is there: nothing learnt about reaching it.
            Err(_) => None,
        };
        match reached {
            Some(true) => self.gate.open(),
            Some(false) => self.gate.close("an attempt to connect failed"),
            None => {}
        }
        got.map_err(Error::from)
    }
}

impl Drop for Pass<'_> {
    /// A probe that ends (told back or given up half-way) lets the next request try.
    fn drop(&mut self) {
        if self.probe {
            self.gate.probing.store(false, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]
    use super::*;

    fn create_timeout() -> std::result::Result<(), PoolError<tokio_postgres::Error>> {
        Err(PoolError::Timeout(TimeoutType::Create))
    }

    #[test]
    fn after_a_failed_attempt_one_request_tries_and_the_others_are_refused() {
        let gate = ConnectGate::default();
        // Open: everyone passes, and a failure closes it.
        let first = gate.enter().unwrap();
        let second = gate.enter().unwrap();
        assert!(first.outcome(create_timeout()).is_err());
        assert!(gate.is_failing());
        // An attempt that was under way when the gate closed may still succeed and reopen it.
        drop(second);

        let probe = gate.enter().unwrap();
        let refused = gate.enter().unwrap_err();
        assert!(matches!(refused, Error::Unreachable { .. }), "{refused}");
        assert_eq!(refused.kind(), crate::ErrorKind::Unavailable);
        // A probe given up half-way lets the next request try.
        drop(probe);
        let probe = gate.enter().unwrap();
        assert!(gate.enter().is_err());
        // A probe that connects opens the gate for everyone.
        probe.outcome(Ok::<_, PoolError<_>>(())).unwrap();
        assert!(!gate.is_failing());
        drop(gate.enter().unwrap());
        drop(gate.enter().unwrap());
    }

    #[test]
    fn a_connection_given_up_for_its_silence_closes_the_gate() {
        let gate = ConnectGate::default();
        gate.stopped_answering();
        let _probe = gate.enter().unwrap();
        assert!(gate.enter().is_err());
    }

    #[test]
    fn a_busy_pool_says_nothing_about_reaching_the_database() {
        let gate = ConnectGate::default();
        let pass = gate.enter().unwrap();
        let busy = pass.outcome(Err::<(), _>(PoolError::Timeout(TimeoutType::Wait)));
        assert_eq!(busy.unwrap_err().kind(), crate::ErrorKind::Busy);
        assert!(!gate.is_failing());
    }
}
