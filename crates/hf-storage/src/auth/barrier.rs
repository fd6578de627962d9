//! Waiting, after a principal change committed, until every running instance has seen it.
//!
//! Each instance keeps principals in memory ([`super::PrincipalCache`]) and forgets one when the
//! `hf.principals` trigger's notification arrives, a few milliseconds after the change committed.
//! A request that reaches another instance in that window would still be accepted with a
//! deleted principal's token. So a change that must take effect at once (a deletion, a demotion)
//! waits, after its commit and before it answers, for every live instance to acknowledge it:
//!
//! - Membership: every instance's principal listener, once its `LISTEN` is in force, names its
//!   session `hf-listener:<instance id>` ([`LISTENER_NAME_PREFIX`]); `pg_stat_activity` lists
//!   the sessions alive now. An instance that died has no session and is not waited for; one
//!   whose listener is down has none either, and it does not trust its cache meanwhile (every
//!   lookup asks the database), so it is strict without being asked.
//! - The writer listens on [`ACKS_CHANNEL`] on a connection of its own, reads the members, and
//!   sends a barrier (`barrier:<id>`) on the principals channel. PostgreSQL delivers
//!   notifications in commit order, so an instance that receives the barrier has already
//!   processed the change's notification (and evicted the principal).
//! - Each listener answers a barrier with `<barrier id> <instance id>` on [`ACKS_CHANNEL`].
//! - The writer waits until every member answered, at most a bound; past it, it answers anyway
//!   and the caller logs which instances did not acknowledge (a stuck process, or one whose
//!   listener is reconnecting).

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use uuid::Uuid;

use crate::pool::{connection_config, PoolSettings};
use crate::tls::Tls;
use crate::{Error, Result};

/// The channel instances acknowledge barriers on.
pub const ACKS_CHANNEL: &str = "hf_principal_acks";
/// Subscribes to [`ACKS_CHANNEL`] (a plain lower-case name, so it needs no quoting).
const LISTEN_ACKS: &str = "LISTEN hf_principal_acks";
/// How a listening principal listener names its session: this, then the instance id.
pub const LISTENER_NAME_PREFIX: &str = "hf-listener:";
/// How a barrier's payload on the principals channel starts (a `sub` never does: those are
/// UUIDs).
pub(crate) const BARRIER_PREFIX: &str = "barrier:";
/// How long connecting and sending the barrier may take, on top of the wait for the
/// acknowledgements.
pub const BARRIER_SETUP_TIMEOUT: Duration = Duration::from_secs(5);
/// The `application_name` of the writer's waiting connection.
const WAITER_APPLICATION_NAME: &str = "hf-barrier";

/// What a barrier found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledgements {
    /// Instances that acknowledged.
    pub acknowledged: usize,
    /// Ids of instances that were listening but did not acknowledge within the bound.
    pub missing: Vec<String>,
}

/// Sends barriers and waits for the live instances' acknowledgements; see the module
/// documentation.
pub struct PrincipalBarrier {
    config: tokio_postgres::Config,
    tls: Tls,
}

impl std::fmt::Debug for PrincipalBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrincipalBarrier").finish_non_exhaustive()
    }
}

impl PrincipalBarrier {
    /// A barrier over the database at `database_url` (each wait opens its own connection there).
    pub fn new(database_url: &str) -> Result<Self> {
        let settings = PoolSettings {
            application_name: WAITER_APPLICATION_NAME.to_owned(),
            ..PoolSettings::default()
        };
        let (config, tls) = connection_config(database_url, &settings)?;
        Ok(Self { config, tls })
    }

    /// Waits until every instance listening now has processed every principal change committed
    /// before this call, at most `bound` once the barrier is sent. `Err` when the database could
    /// not be asked, or when the whole wait outlasts `bound` plus [`BARRIER_SETUP_TIMEOUT`]
    /// (a frozen server keeps the connection open and answers nothing, and the request that
    /// made the change must still be answered).
    pub async fn wait(&self, bound: Duration) -> Result<Acknowledgements> {
        let limit = bound + BARRIER_SETUP_TIMEOUT;
        match tokio::time::timeout(limit, self.wait_unbounded(bound)).await {
            Ok(answer) => answer,
            Err(_) => Err(Error::NoAnswer {
                waited: limit,
                write: false,
            }),
        }
    }

    /// [`PrincipalBarrier::wait`] with no limit on the statements that send the barrier.
    async fn wait_unbounded(&self, bound: Duration) -> Result<Acknowledgements> {
        let (client, mut connection) = self.config.connect(self.tls.clone()).await?;
        let (sender, mut acks) = mpsc::unbounded_channel();
        let driver = tokio::spawn(async move {
            while let Some(message) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                match message {
                    Ok(AsyncMessage::Notification(notification)) => {
                        if sender.send(notification.payload().to_owned()).is_err() {
                            return;
                        }
                    }
                    Ok(_notice) => {}
                    Err(_) => return,
                }
            }
        });
        let _abort_driver = AbortOnDrop(driver);

        client.batch_execute(LISTEN_ACKS).await?;
        let rows = client
            .query(
                "SELECT substr(application_name, length($1) + 1) FROM pg_stat_activity
                  WHERE datname = current_database() AND starts_with(application_name, $1)",
                &[&LISTENER_NAME_PREFIX],
            )
            .await?;
        let mut waiting: BTreeSet<String> = rows
            .iter()
            .map(|row| row.try_get::<_, String>(0))
            .collect::<std::result::Result<_, _>>()?;
        let members = waiting.len();
        if members == 0 {
            return Ok(Acknowledgements {
                acknowledged: 0,
                missing: Vec::new(),
            });
        }
        let barrier = Uuid::new_v4().to_string();
        client
            .execute(
                "SELECT pg_notify($1, $2)",
                &[
                    &super::PRINCIPALS_CHANNEL,
                    &format!("{BARRIER_PREFIX}{barrier}"),
                ],
            )
            .await?;
        let deadline = tokio::time::Instant::now() + bound;
        while !waiting.is_empty() {
            let Ok(Some(payload)) = tokio::time::timeout_at(deadline, acks.recv()).await else {
                break;
            };
            if let Some((acked, instance)) = payload.split_once(' ') {
                if acked == barrier {
                    waiting.remove(instance);
                }
            }
        }
        Ok(Acknowledgements {
            acknowledged: members - waiting.len(),
            missing: waiting.into_iter().collect(),
        })
    }
}

/// What an instance answers to a barrier payload, if `payload` is one.
pub(crate) fn acknowledgement(payload: &str, instance_id: &str) -> Option<crate::listen::Reply> {
    let barrier = payload.strip_prefix(BARRIER_PREFIX)?;
    Some(crate::listen::Reply {
        channel: ACKS_CHANNEL,
        payload: format!("{barrier} {instance_id}"),
    })
}

/// Aborts a spawned task when dropped, so the waiting connection closes with the wait.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
