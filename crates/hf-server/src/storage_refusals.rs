//! Writes refused lately for want of storage, as `/status` reports them.
//!
//! A database whose disk is full still answers `/status`'s query (reads need no room), so
//! without this `/status` would say `ok` while every write is answered 503
//! `STORAGE_UNAVAILABLE`. The service cannot ask an external database how much room its disk
//! has, but it knows what it answered: every such answer is counted here (by the middleware,
//! which sees every response), and `/status` says how many there were in the last minute and
//! how long ago the last was. A write that fits in room the database still has may succeed
//! meanwhile, so a success does not clear the count; it ends a minute after the last refusal.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a refusal is reported after it happened.
pub const REPORTED_FOR: Duration = Duration::from_secs(60);

/// The refusals of the current run of them: one that follows the last by less than
/// [`REPORTED_FOR`] belongs to it.
#[derive(Debug, Default)]
pub struct StorageRefusals {
    run: Mutex<Option<Run>>,
}

#[derive(Debug, Clone, Copy)]
struct Run {
    first: Instant,
    last: Instant,
    count: u64,
}

/// What `/status` says of the refusals, when the last was less than [`REPORTED_FOR`] ago.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecentRefusals {
    /// Refusals since the run began.
    pub count: u64,
    /// Seconds since the first of them.
    pub first_secs_ago: u64,
    /// Seconds since the last of them.
    pub last_secs_ago: u64,
}

impl StorageRefusals {
    /// Counts a write refused at `now`.
    pub fn refused(&self, now: Instant) {
        let mut run = self.run.lock().unwrap_or_else(PoisonError::into_inner);
        *run = Some(match *run {
            Some(run) if now.saturating_duration_since(run.last) < REPORTED_FOR => Run {
                last: now,
                count: run.count + 1,
                ..run
            },
            _ => Run {
                first: now,
                last: now,
                count: 1,
            },
        });
    }

    /// The current run of refusals as seen at `now`, if its last is recent enough to report.
    pub fn recent(&self, now: Instant) -> Option<RecentRefusals> {
        let run = (*self.run.lock().unwrap_or_else(PoisonError::into_inner))?;
        let last_ago = now.saturating_duration_since(run.last);
        (last_ago < REPORTED_FOR).then(|| RecentRefusals {
            count: run.count,
            first_secs_ago: now.saturating_duration_since(run.first).as_secs(),
            last_secs_ago: last_ago.as_secs(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_reported_until_a_minute_after_the_last() {
        let refusals = StorageRefusals::default();
        let start = Instant::now();
        let at = |secs| start + Duration::from_secs(secs);
        assert_eq!(refusals.recent(start), None);

        refusals.refused(at(0));
        refusals.refused(at(50));
        refusals.refused(at(100));
        let expected = RecentRefusals {
            count: 3,
            first_secs_ago: 105,
            last_secs_ago: 5,
        };
        assert_eq!(refusals.recent(at(105)), Some(expected));
        assert_eq!(refusals.recent(at(159)).map(|r| r.count), Some(3));
        assert_eq!(refusals.recent(at(160)), None);

        // A refusal after a quiet minute starts a new run.
        refusals.refused(at(200));
        let expected = RecentRefusals {
            count: 1,
            first_secs_ago: 1,
            last_secs_ago: 1,
        };
        assert_eq!(refusals.recent(at(201)), Some(expected));
    }
}
