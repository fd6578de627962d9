//! Principals by `sub`, kept in memory and emptied by PostgreSQL notifications.
//!
//! Every authenticated request needs its principal: a deleted principal's tokens must stop at
//! once, and a demoted admin must lose admin routes at once, so the token's claims are not
//! trusted for either. Asking the database on every request costs a round trip, which dominates
//! a cheap request such as `GET /auth/me`. This cache answers from memory instead, and stays
//! honest this way:
//!
//! - A trigger on `hf.principals` (migration 0003) notifies channel [`PRINCIPALS_CHANNEL`] with
//!   the `sub` of every updated or deleted row when the change commits, whoever made it.
//! - Each instance keeps one connection that `LISTEN`s on that channel; a notification removes
//!   the entry. The instance that made a change also calls [`PrincipalCache::forget`] before it
//!   answers, so its own next request never waits for the notification; other instances see the
//!   change as soon as the notification arrives (about a millisecond on one host).
//! - While the listening connection is down, notifications could be missed, so the cache is
//!   emptied and bypassed: every lookup asks the database until the listener is back.
//! - A lookup that raced with a change must not put the old row back: every removal bumps a
//!   generation counter, and a row read from the database is kept only if no removal happened
//!   while it was being read.
//! - A change that must take effect at once everywhere (a deletion, a demotion) also waits, before
//!   it answers, until every listening instance acknowledged it ([`super::barrier`]): each
//!   listener names its session after its instance id once it listens, and answers a barrier
//!   after it processed every notification sent before it.
//! - The listening connection ([`crate::listen`], shared with the metadata heads) answers a
//!   heartbeat every 10 s, so one that died silently is noticed within 15 s; entries also
//!   expire after [`MAX_AGE`], a bound on staleness if all of the above failed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use super::principals::{Principal, PrincipalLookup};
use crate::pool::{connection_config, PoolSettings};
use crate::tls::Tls;
use crate::{Pool, Result};

/// The notification channel the `hf.principals` trigger announces changes on.
pub const PRINCIPALS_CHANNEL: &str = "hf_principals";
/// Subscribes to [`PRINCIPALS_CHANNEL`] (a plain lower-case name, so it needs no quoting).
const LISTEN_STATEMENT: &str = "LISTEN hf_principals";
/// The payload that means "forget every principal" (sent on `TRUNCATE`).
const FORGET_ALL: &str = "*";
/// The longest an entry is trusted, even with no notification.
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// Entries kept at most; the cache is emptied when full (an entry is about 200 bytes).
const MAX_ENTRIES: usize = 65_536;
/// The `application_name` of the listening connections (principals and metadata heads), to
/// tell them apart in `pg_stat_activity`; the principal listener renames its session
/// `hf-listener:<instance id>` once it listens (see [`super::barrier`]).
pub const LISTENER_APPLICATION_NAME: &str = "hf-listen";

/// Principal lookups by `sub` through an in-process cache; see the module documentation.
pub struct PrincipalCache {
    lookup: PrincipalLookup,
    listen_config: tokio_postgres::Config,
    tls: Tls,
    /// This cache's instance id, which its listening session is named after.
    instance_id: String,
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for PrincipalCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shared = self.lock();
        f.debug_struct("PrincipalCache")
            .field("entries", &shared.entries.len())
            .field("listening", &shared.listening)
            .finish_non_exhaustive()
    }
}

/// The state the requests and the listener task share.
#[derive(Default)]
struct Shared {
    entries: HashMap<String, Cached>,
    /// Bumped by every removal; see the module documentation.
    generation: u64,
    /// Whether the listener's `LISTEN` is in force now; entries are used only then.
    listening: bool,
    /// Whether a listener task exists (it may be between connection attempts).
    listener_running: bool,
    /// The instance id barriers are acknowledged with.
    instance_id: String,
}

impl Shared {
    /// Forgets one principal, or all of them, and invalidates reads in flight.
    fn forget(&mut self, sub: Option<&str>) {
        match sub {
            Some(sub) => {
                self.entries.remove(sub);
            }
            None => self.entries.clear(),
        }
        self.generation = self.generation.wrapping_add(1);
        // The principal's role may have gone (or its name may name another role now): data
        // connections must not keep it as their session role.
        crate::run_as::roles_changed();
    }

    /// Records whether notifications are being received; either change empties the cache.
    fn set_listening(&mut self, listening: bool) {
        self.listening = listening;
        self.forget(None);
    }
}

struct Cached {
    principal: Principal,
    fetched_at: Instant,
}

impl PrincipalCache {
    /// A cache over `pool` (whose connection it shares for misses, see [`PrincipalLookup`])
    /// that listens for changes on its own connection to `database_url`. Connects lazily: the
    /// listener starts with the first lookup, on that lookup's runtime.
    pub fn new(pool: Pool, database_url: &str) -> Result<Self> {
        let settings = PoolSettings {
            application_name: LISTENER_APPLICATION_NAME.to_owned(),
            ..PoolSettings::default()
        };
        let (listen_config, tls) = connection_config(database_url, &settings)?;
        let instance_id = uuid::Uuid::new_v4().to_string();
        Ok(Self {
            lookup: PrincipalLookup::new(pool),
            listen_config,
            tls,
            shared: Arc::new(Mutex::new(Shared {
                instance_id: instance_id.clone(),
                ..Shared::default()
            })),
            instance_id,
        })
    }

    /// The principal with this `sub`, if it still exists.
    pub async fn find_by_sub(&self, sub: &str) -> Result<Option<Principal>> {
        let (generation, start_listener) = {
            let mut shared = self.lock();
            if shared.listening {
                if let Some(cached) = shared.entries.get(sub) {
                    if cached.fetched_at.elapsed() < MAX_AGE {
                        return Ok(Some(cached.principal.clone()));
                    }
                }
            }
            let start_listener = !shared.listener_running;
            shared.listener_running = true;
            (
                shared.listening.then_some(shared.generation),
                start_listener,
            )
        };
        if start_listener {
            // The guard exists before the task, so a task dropped unpolled (its runtime shutting
            // down) still marks the listener gone; made outside the lock its drop takes.
            let guard = ListenerGuard(Arc::downgrade(&self.shared));
            tokio::spawn(listen(
                guard,
                self.listen_config.clone(),
                self.tls.clone(),
                self.instance_id.clone(),
            ));
        }
        let found = self.lookup.find_by_sub(sub).await?;
        if let (Some(generation), Some(principal)) = (generation, &found) {
            let mut shared = self.lock();
            if shared.listening && shared.generation == generation {
                if shared.entries.len() >= MAX_ENTRIES {
                    shared.entries.clear();
                }
                shared.entries.insert(
                    sub.to_owned(),
                    Cached {
                        principal: principal.clone(),
                        fetched_at: Instant::now(),
                    },
                );
            }
        }
        Ok(found)
    }

    /// Forgets a principal now. The instance that changed or deleted it calls this before it
    /// answers, so that its own next request does not depend on the notification's timing.
    pub fn forget(&self, sub: &str) {
        self.lock().forget(Some(sub));
    }

    /// The id this instance acknowledges barriers with (its listening session is named after it).
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// Whether lookups are being answered from memory (the listener is connected). For tests
    /// and diagnostics.
    pub fn is_listening(&self) -> bool {
        self.lock().listening
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Marks the listener gone when its task ends in any way (including its runtime shutting down),
/// so the next lookup starts a new one and nothing trusts the cache meanwhile.
struct ListenerGuard(Weak<Mutex<Shared>>);

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            let mut shared = lock(&shared);
            shared.listener_running = false;
            shared.set_listening(false);
        }
    }
}

impl crate::listen::Subscriber for Mutex<Shared> {
    fn set_listening(&self, listening: bool) {
        lock(self).set_listening(listening);
    }

    fn notified(&self, payload: &str) -> Option<crate::listen::Reply> {
        let mut shared = lock(self);
        if let Some(reply) = super::barrier::acknowledgement(payload, &shared.instance_id) {
            // Every notification sent before the barrier has been processed (in commit order).
            return Some(reply);
        }
        shared.forget((payload != FORGET_ALL).then_some(payload));
        None
    }
}

/// The listener task (see [`crate::listen`]); the guard marks it gone when it ends.
async fn listen(
    guard: ListenerGuard,
    config: tokio_postgres::Config,
    tls: Tls,
    instance_id: String,
) {
    let shared = guard.0.clone();
    crate::listen::run(
        shared,
        config,
        tls,
        crate::listen::Channel {
            statement: LISTEN_STATEMENT,
            what: "principal",
            listening_name: Some(format!(
                "{}{instance_id}",
                super::barrier::LISTENER_NAME_PREFIX
            )),
        },
    )
    .await;
    drop(guard);
}
