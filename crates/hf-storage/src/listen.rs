//! One connection that `LISTEN`s on a notification channel and hands each notification to a
//! subscriber: the shared machinery of the in-memory caches that PostgreSQL notifications keep
//! current (principals, metadata branch heads).
//!
//! - The subscriber is told when notifications start and stop being received
//!   ([`Subscriber::set_listening`]): while they are not, it must not trust what it holds
//!   (notifications may be missed), and it catches up when they resume.
//! - The connection answers a heartbeat every 10 s, so one that died silently (a NAT or firewall
//!   dropping it, a failover without a reset, a frozen server) is noticed within 15 s; after a
//!   failure the listener connects again after a second. Every other statement of the listener,
//!   and connecting, is bounded too, so nothing it waits on can hold it for ever.
//! - A subscriber may answer a notification with one of its own ([`Reply`]), sent on the
//!   listening connection after the subscriber acted on the first: how an instance tells a writer
//!   that it has seen a change (see `auth::barrier`).
//! - The listener ends when the subscriber is dropped (it holds only a weak reference).
//! - `LISTEN` needs a real session: behind a pooler, point the service at it in session mode
//!   (PgBouncer's transaction mode never delivers notifications; the heartbeat cannot tell).

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;

use crate::tls::Tls;
use crate::{Error, Result};

/// How often the listening connection is asked whether it is alive.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// How long the answer to a heartbeat, or to any other statement of the listener, may take
/// before the connection counts as dead.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting may take, startup and authentication included (the driver's own connect
/// timeout covers only the socket's, and a server that accepts the socket and then says
/// nothing would hold the listener, and the caches waiting for it, for ever).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the listener waits before connecting again after its connection failed.
const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// What a listener feeds.
pub(crate) trait Subscriber: Send + Sync + 'static {
    /// Notifications are now received (`true`, after `LISTEN` took effect) or may be missed
    /// (`false`, the connection failed).
    fn set_listening(&self, listening: bool);
    /// One notification's payload; what it returns, if anything, is sent back as a notification
    /// of its own once this returned (an acknowledgement that the payload was acted on).
    fn notified(&self, payload: &str) -> Option<Reply>;
}

/// A notification a subscriber sends in answer to one it received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    /// The channel (a constant: channel names are never built from input).
    pub channel: &'static str,
    /// The payload.
    pub payload: String,
}

/// What to listen to.
#[derive(Clone)]
pub(crate) struct Channel {
    /// The `LISTEN` statement (a constant: channel names are never built from input).
    pub statement: &'static str,
    /// What the channel is about, for logs.
    pub what: &'static str,
    /// The `application_name` the connection takes once its `LISTEN` is in force, so that
    /// `pg_stat_activity` shows which sessions are receiving notifications now (and the
    /// connection's startup name until then).
    pub listening_name: Option<String>,
}

/// The failures of a task that retries while the database is down (every second, or every
/// 250 ms), told once when they begin and once when they end rather than at every attempt: an
/// outage of a minute would otherwise log hundreds of lines saying the same.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    /// When the first failure since the last success happened.
    since: Option<Instant>,
    /// Failed attempts since then.
    attempts: u64,
}

impl Outage {
    /// Notes a failed attempt; whether it begins an outage (and so is to be logged).
    pub(crate) fn failed(&mut self) -> bool {
        self.attempts += 1;
        self.since.get_or_insert_with(Instant::now);
        self.attempts == 1
    }

    /// Notes a success; when it ends an outage, how long that lasted and how many attempts
    /// failed in it.
    pub(crate) fn ended(&mut self) -> Option<(Duration, u64)> {
        let since = self.since.take()?;
        Some((since.elapsed(), std::mem::take(&mut self.attempts)))
    }
}

/// The listener task: listens, hands on notifications, reconnects after failures; ends when the
/// subscriber is dropped.
pub(crate) async fn run<S: Subscriber>(
    subscriber: Weak<S>,
    config: tokio_postgres::Config,
    tls: Tls,
    channel: Channel,
) {
    let mut outage = Outage::default();
    loop {
        match listen_once(&subscriber, &config, &tls, &channel, &mut outage).await {
            Ok(()) => return,
            Err(error) if outage.failed() => {
                tracing::warn!(%error, what = channel.what, "listening for changes failed; caches are bypassed or polled until it listens again (tried every second, logged when it does)");
            }
            Err(error) => {
                tracing::debug!(%error, what = channel.what, "listening for changes failed again");
            }
        }
        match subscriber.upgrade() {
            Some(subscriber) => subscriber.set_listening(false),
            None => return,
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// One listening connection's life: `Ok` when the subscriber was dropped, `Err` when the
/// connection failed.
async fn listen_once<S: Subscriber>(
    subscriber: &Weak<S>,
    config: &tokio_postgres::Config,
    tls: &Tls,
    channel: &Channel,
    outage: &mut Outage,
) -> Result<()> {
    let (client, mut connection) = answered(
        CONNECT_TIMEOUT,
        "while connecting",
        config.connect(tls.clone()),
    )
    .await?;
    let (sender, mut notifications) = mpsc::unbounded_channel();
    // The connection must be polled for the client to make progress; notifications arrive as
    // its asynchronous messages. The driver ends when the connection does.
    let driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    if sender.send(Ok(notification)).is_err() {
                        return;
                    }
                }
                Some(Ok(_notice)) => {}
                Some(Err(error)) => {
                    let _ = sender.send(Err(error));
                    return;
                }
                None => return,
            }
        }
    });
    let _abort_driver = AbortOnDrop(driver);
    answered(
        HEARTBEAT_TIMEOUT,
        "its LISTEN",
        client.batch_execute(channel.statement),
    )
    .await?;
    if let Some(name) = &channel.listening_name {
        answered(
            HEARTBEAT_TIMEOUT,
            "while naming itself",
            client.execute("SELECT set_config('application_name', $1, false)", &[name]),
        )
        .await?;
    }
    match subscriber.upgrade() {
        Some(subscriber) => subscriber.set_listening(true),
        None => return Ok(()),
    }
    match outage.ended() {
        Some((lasted, attempts)) => tracing::info!(
            what = channel.what,
            failed_for_ms = u64::try_from(lasted.as_millis()).unwrap_or(u64::MAX),
            attempts,
            "listening for changes again"
        ),
        None => tracing::debug!(what = channel.what, "listening for changes"),
    }
    let mut heartbeat = tokio::time::interval(HEARTBEAT_INTERVAL);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    heartbeat.tick().await;
    loop {
        tokio::select! {
            message = notifications.recv() => {
                let Some(message) = message else {
                    return Err(Error::ConnectionLost(format!(
                        "the connection listening for {} changes", channel.what
                    )));
                };
                let notification = message?;
                let Some(subscriber) = subscriber.upgrade() else {
                    return Ok(());
                };
                let reply = subscriber.notified(notification.payload());
                drop(subscriber);
                if let Some(reply) = reply {
                    answered(
                        HEARTBEAT_TIMEOUT,
                        "its reply",
                        client.execute("SELECT pg_notify($1, $2)", &[&reply.channel, &reply.payload]),
                    )
                    .await?;
                }
            }
            _ = heartbeat.tick() => {
                answered(HEARTBEAT_TIMEOUT, "its heartbeat", client.simple_query("")).await?;
                if subscriber.strong_count() == 0 {
                    return Ok(());
                }
            }
        }
    }
}

/// What `work` on the listening connection gave, or [`Error::ConnectionLost`] when the database
/// did not answer within `limit`.
async fn answered<T>(
    limit: Duration,
    what: &str,
    work: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> Result<T> {
    match tokio::time::timeout(limit, work).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(Error::ConnectionLost(format!(
            "the listening connection did not answer {what} within {} s",
            limit.as_secs()
        ))),
    }
}

/// Aborts a spawned task when dropped, so the listening connection closes with its listener.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    /// An outage is told when it begins and when it ends, with its length and attempts; the
    /// attempts between are not.
    #[test]
    fn an_outage_is_told_once_when_it_begins_and_once_when_it_ends() {
        let mut outage = Outage::default();
        assert_eq!(outage.ended(), None, "no outage, nothing ended");
        assert!(outage.failed());
        assert!(!outage.failed());
        assert!(!outage.failed());
        let (_lasted, attempts) = outage.ended().unwrap();
        assert_eq!(attempts, 3);
        assert_eq!(outage.ended(), None);
        assert!(outage.failed(), "a new outage begins");
    }

    /// A subscriber that remembers whether it was told notifications are received.
    #[derive(Default)]
    struct Listening(AtomicBool);

    impl Subscriber for Listening {
        fn set_listening(&self, listening: bool) {
            self.0.store(listening, Ordering::SeqCst);
        }

        fn notified(&self, _payload: &str) -> Option<Reply> {
            None
        }
    }

    /// A server that accepts the connection and never says a word (a frozen host's kernel
    /// completes the handshake for it) fails the attempt after [`CONNECT_TIMEOUT`], so the
    /// listener goes on to try again instead of waiting for ever.
    #[tokio::test]
    async fn a_server_that_accepts_and_never_answers_fails_the_attempt_in_time() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let (config, tls) =
            crate::tls::parse(&format!("postgres://postgres@127.0.0.1:{port}/hf")).unwrap();
        let subscriber = Arc::new(Listening::default());
        let channel = Channel {
            statement: "LISTEN hf_test",
            what: "test",
            listening_name: None,
        };

        let started = Instant::now();
        let attempt = tokio::time::timeout(
            CONNECT_TIMEOUT + Duration::from_secs(5),
            listen_once(
                &Arc::downgrade(&subscriber),
                &config,
                &tls,
                &channel,
                &mut Outage::default(),
            ),
        )
        .await
        .expect("the attempt ends by itself");
        let waited = started.elapsed();

        assert!(
            matches!(attempt, Err(Error::ConnectionLost(_))),
            "{attempt:?}"
        );
        assert!(waited >= CONNECT_TIMEOUT, "gave up after {waited:?}");
        assert!(!subscriber.0.load(Ordering::SeqCst));
        drop(silent);
    }
}
