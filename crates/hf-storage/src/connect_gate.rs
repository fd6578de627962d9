//! Failing fast while no connection to the database can be made.
//!
//! A database whose host died, or a network that drops connection attempts without a word,
//! answers a new connection with nothing: the attempt waits for the pool's create timeout (5 s)
//! before it fails. While that lasts, every request that needs a new connection (all of them,
//! once the open connections have been given up) would wait as long in turn, and hold its
//! client, its place in the queues and its memory meanwhile.
//!
//! So once an attempt to connect has failed for want of the database (no answer, refused, no
//! route: no SQLSTATE; a refusal with one, a wrong password say, says the database is there),
//! one request at a time tries again, and the others that would need a new connection meanwhile
//! fail at once with [`Error::Unreachable`]. The first attempt that succeeds opens the gate
//! again. A request that finds an idle connection in its pool is let through: the connection
//! may well work (and a login connection is checked before it is lent). PgBouncer treats failed
//! server logins the same way (`server_login_retry`). Written here because deadpool has no
//! notion of it, and it is a few lines over its `get`.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use deadpool::managed::{PoolError, TimeoutType};

use crate::{Error, Result};

/// Whether the database could be reached lately, shared by every pool of one database.
#[derive(Debug, Default)]
pub(crate) struct ConnectGate {
    state: Mutex<GateState>,
}

#[derive(Debug, Default)]
struct GateState {
    /// Since when attempts to connect have been failing; `None` while they succeed.
    failing_since: Option<Instant>,
    /// Whether a request is trying to connect while they fail.
    probing: bool,
}

/// A request let through the gate; its outcome is told back with [`Pass::outcome`].
#[derive(Debug)]
pub(crate) struct Pass<'a> {
    gate: &'a ConnectGate,
    /// Whether this request is the one trying while attempts fail.
    probe: bool,
}

impl ConnectGate {
    /// Lets a request through to a pool (`idle`: whether that pool has an idle connection
    /// now), or refuses it at once while connections cannot be made and another request is
    /// trying to make one.
    pub(crate) fn enter(&self, idle: bool) -> Result<Pass<'_>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(since) = state.failing_since else {
            return Ok(Pass {
                gate: self,
                probe: false,
            });
        };
        if idle {
            return Ok(Pass {
                gate: self,
                probe: false,
            });
        }
        if state.probing {
            return Err(Error::Unreachable {
                failing_for: since.elapsed(),
            });
        }
        state.probing = true;
        Ok(Pass {
            gate: self,
            probe: true,
        })
    }

    /// For how long attempts to connect have been failing, if they are.
    #[cfg(test)]
    fn failing_for(&self) -> Option<std::time::Duration> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.failing_since.map(|since| since.elapsed())
    }
}

impl Pass<'_> {
    /// Tells the gate how the pool's `get` ended: a connection lent opens the gate, an attempt
    /// to connect that failed for want of the database closes it.
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
        if let Some(reached) = reached {
            let mut state = self
                .gate
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if reached {
                state.failing_since = None;
            } else {
                state.failing_since.get_or_insert_with(Instant::now);
            }
        }
        got.map_err(Error::from)
    }
}

impl Drop for Pass<'_> {
    /// A probe that ends (told back or given up half-way) lets the next request try.
    fn drop(&mut self) {
        if self.probe {
            let mut state = self
                .gate
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            state.probing = false;
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
        let first = gate.enter(false).unwrap();
        let second = gate.enter(false).unwrap();
        assert!(first.outcome(create_timeout()).is_err());
        assert!(gate.failing_for().is_some());
        // An attempt that was under way when the gate closed may still succeed and reopen it.
        drop(second);

        let probe = gate.enter(false).unwrap();
        let refused = gate.enter(false).unwrap_err();
        assert!(matches!(refused, Error::Unreachable { .. }), "{refused}");
        assert_eq!(refused.kind(), crate::ErrorKind::Unavailable);
        // With an idle connection in its pool, a request is let through.
        drop(gate.enter(true).unwrap());
        // A probe given up half-way lets the next request try.
        drop(probe);
        let probe = gate.enter(false).unwrap();
        assert!(gate.enter(false).is_err());
        // A probe that connects opens the gate for everyone.
        probe.outcome(Ok::<_, PoolError<_>>(())).unwrap();
        assert!(gate.failing_for().is_none());
        drop(gate.enter(false).unwrap());
        drop(gate.enter(false).unwrap());
    }

    #[test]
    fn a_busy_pool_says_nothing_about_reaching_the_database() {
        let gate = ConnectGate::default();
        let pass = gate.enter(false).unwrap();
        let busy = pass.outcome(Err::<(), _>(PoolError::Timeout(TimeoutType::Wait)));
        assert_eq!(busy.unwrap_err().kind(), crate::ErrorKind::Busy);
        assert!(gate.failing_for().is_none());
    }
}
