//! Limits on every phase of a request, so that a slow or greedy client holds nothing for long.
//!
//! | phase | limit | answer |
//! | --- | --- | --- |
//! | connecting | [`Limits::max_connections_per_address`] open connections per client address ([`AddressSlots`]); [`Limits::max_connections`] in all | 429 `TOO_MANY_CONNECTIONS`, then the connection is closed; beyond the global cap, new connections wait in the listen backlog |
//! | the head (request line and headers) | [`Limits::header_timeout`]: a connection's first head from the connection's start, every later one from its first byte (kept by [`crate::request_heads`]) | 408 `REQUEST_TIMEOUT`, then the connection is closed |
//! | the URL | [`Limits::max_url_bytes`] | 414 `URI_TOO_LONG` |
//! | the headers | [`Limits::max_headers`] fields, [`Limits::max_header_bytes`] bytes | 431 `HEADERS_TOO_LARGE` |
//! | the body | the body limit (413 `PAYLOAD_TOO_LARGE`, in the extractors); all of it within [`Limits::body_timeout`] of the head | 408 `REQUEST_TIMEOUT` |
//! | the response | the client takes it: what was sent stays unacknowledged, or the client's receive window stays shut, no longer than [`Limits::send_timeout`]; the service's writes stay refused no longer than the same (both kept by [`crate::client_stream`]) | the connection is reset |
//! | between requests | [`Limits::keep_alive`] idle | the connection is closed |
//! | pipelined requests | read no faster than the client takes the answers ([`crate::client_stream`]) | they wait in the client's buffers |
//!
//! Every answer is the error envelope. The requests actix-http's parser refuses, which it would
//! answer itself with an empty body (framing it cannot parse, a head over its 128 KiB buffer or
//! 96 fields, a URL over 64 KiB), are caught before they reach it by
//! [`crate::request_heads`], which answers them with the envelope. Our own limits on the URL
//! and the headers sit well below actix's, so every request actix can parse meets them first.
//!
//! Handler work is not cut off by a deadline: cancelling a write halfway would leave its outcome
//! unknown. It is bounded instead by the pool's wait timeout and the statements' timeouts, and,
//! for a database that stops answering altogether (a frozen host, a network dropping
//! everything), by the silence data statements allow: their timeout plus
//! `hf_storage::run_as::ANSWER_GRACE` without an answer on the connection, after which the
//! connection is given up and the request answered 503 (`DATABASE_UNAVAILABLE`, or
//! `COMMIT_OUTCOME_UNKNOWN` for a write); the principal check every authenticated request makes
//! is bounded the same way (`hf_storage::auth::LOOKUP_SILENCE`).

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::dev::{Extensions, Payload, ServiceRequest};
use actix_web::error::PayloadError;
use actix_web::web::Bytes;
use actix_web::HttpMessage;
use futures_util::Stream;

use crate::error::{ApiError, Code};

/// The limits of the table in the module comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a client may take to send a request's head: a connection's first counted from
    /// the connection's start, every later one from its first byte (zero: no limit).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's whole body, counted from its head.
    pub body_timeout: Duration,
    /// How long an idle keep-alive connection stays open.
    pub keep_alive: Duration,
    /// How long a response may go untaken: sent data unacknowledged, or the client's receive
    /// window shut (a client that asked and does not read), or the service's writes refused (a
    /// client that takes too little of a large answer).
    pub send_timeout: Duration,
    /// Open connections in all; shared out evenly among the workers.
    pub max_connections: usize,
    /// Open connections from one client address.
    pub max_connections_per_address: usize,
    /// The longest request target (path and query), in bytes.
    pub max_url_bytes: usize,
    /// The most header fields in one request.
    pub max_headers: usize,
    /// The largest header section (names and values), in bytes.
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(15),
            keep_alive: Duration::from_secs(5),
            send_timeout: Duration::from_secs(15),
            max_connections: 10_000,
            max_connections_per_address: 256,
            max_url_bytes: 8 * 1024,
            max_headers: 64,
            max_header_bytes: 32 * 1024,
        }
    }
}

impl Limits {
    /// The connection cap of one worker, as actix counts it.
    pub fn max_connections_per_worker(&self, workers: usize) -> usize {
        self.max_connections.div_ceil(workers.max(1)).max(1)
    }
}

/// Refuses a request whose URL or header section is over the limits (414, 431).
pub(crate) fn check_head(req: &ServiceRequest, limits: &Limits) -> Result<(), ApiError> {
    let url_bytes = req
        .uri()
        .path_and_query()
        .map_or(0, |target| target.as_str().len());
    if url_bytes > limits.max_url_bytes {
        return Err(ApiError::new(
            Code::UriTooLong,
            format!(
                "The request URL has {url_bytes} bytes; the limit is {}.",
                limits.max_url_bytes
            ),
        ));
    }
    let headers = req.headers();
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if headers.len() > limits.max_headers || header_bytes > limits.max_header_bytes {
        return Err(ApiError::new(
            Code::HeadersTooLarge,
            format!(
                "The request has {} header fields of {header_bytes} bytes; the limits are {} fields and {} bytes.",
                headers.len(),
                limits.max_headers,
                limits.max_header_bytes
            ),
        ));
    }
    Ok(())
}

/// Puts the body deadline on a request with a body; the returned flag tells, after the
/// request, whether the deadline passed before the body was read.
pub(crate) fn limit_body(req: &mut ServiceRequest, limits: &Limits) -> Option<Rc<Cell<bool>>> {
    let payload = req.take_payload();
    if matches!(payload, Payload::None) {
        req.set_payload(payload);
        return None;
    }
    let expired = Rc::new(Cell::new(false));
    let stream: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(Deadline {
        inner: payload,
        timer: Box::pin(tokio::time::sleep(limits.body_timeout)),
        expired: Rc::clone(&expired),
    });
    req.set_payload(Payload::from(stream));
    Some(expired)
}

/// The answer to a body that did not arrive in time.
pub(crate) fn body_timeout(limits: Option<&Limits>) -> ApiError {
    let seconds = limits.map_or(Limits::default().body_timeout, |l| l.body_timeout);
    ApiError::new(
        Code::RequestTimeout,
        format!(
            "The request body did not arrive within {} seconds.",
            seconds.as_secs_f64()
        ),
    )
}

/// Whether a payload error is the body deadline of [`limit_body`].
pub(crate) fn is_timeout(error: &PayloadError) -> bool {
    matches!(error, PayloadError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut)
}

/// A body stream that fails once its deadline passes.
struct Deadline {
    inner: Payload,
    timer: Pin<Box<tokio::time::Sleep>>,
    expired: Rc<Cell<bool>>,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.expired.get() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(item);
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            self.expired.set(true);
            let error = std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive in time",
            );
            return Poll::Ready(Some(Err(PayloadError::Io(error))));
        }
        Poll::Pending
    }
}

/// Open connections per client address, shared by every worker.
///
/// Counting happens when actix accepts a connection ([`AddressSlots::on_connect`]); the count
/// goes down when the connection's data is dropped, that is when the connection ends. A
/// connection over the cap is answered at once (429 `TOO_MANY_CONNECTIONS`, written to the socket
/// without reading anything) and shut down, so it holds its file descriptor for no longer than
/// the accept takes.
#[derive(Debug, Clone)]
pub struct AddressSlots {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    max: usize,
}

impl AddressSlots {
    /// Slots for at most `max` connections per address.
    pub fn new(max: usize) -> Self {
        Self {
            counts: Arc::default(),
            max,
        }
    }

    /// The `on_connect` hook of the HTTP server.
    pub fn on_connect(&self, stream: &actix_web::rt::net::TcpStream, data: &mut Extensions) {
        let Ok(peer) = stream.peer_addr() else {
            return;
        };
        let address = peer.ip();
        if self.take(address) {
            data.insert(Slot {
                slots: self.clone(),
                address,
            });
        } else {
            tracing::debug!(%address, "connection refused: too many from this address");
            refuse(stream, self.max);
        }
    }

    fn take(&self, address: IpAddr) -> bool {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(address).or_default();
        if *count >= self.max {
            return false;
        }
        *count += 1;
        true
    }

    fn give_back(&self, address: IpAddr) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&address) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&address);
            }
        }
    }

    /// How many connections an address holds now.
    pub fn count(&self, address: IpAddr) -> usize {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(&address).copied().unwrap_or(0)
    }
}

/// One connection's place in [`AddressSlots`]; given back when the connection ends.
struct Slot {
    slots: AddressSlots,
    address: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.give_back(self.address);
    }
}

/// Answers a connection over the per-address cap and shuts it down. The write does not wait:
/// a fresh socket's send buffer takes the few hundred bytes, and a client that cannot receive
/// them only misses the explanation.
fn refuse(stream: &actix_web::rt::net::TcpStream, max: usize) {
    let error = ApiError::new(
        Code::TooManyConnections,
        format!("This address already holds {max} open connections; close some and retry."),
    );
    let body = serde_json::to_string(&crate::error::ErrorBody {
        errors: error.entries().to_vec(),
    })
    .unwrap_or_default();
    let response = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\nx-request-id: {}\r\n\r\n{body}",
        body.len(),
        uuid::Uuid::new_v4()
    );
    // A direct `send`: tokio's `try_write` refuses until the reactor has seen the socket writable.
    let socket = socket2::SockRef::from(stream);
    let _ = socket.send(response.as_bytes());
    let _ = socket.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_address_and_given_back() {
        let slots = AddressSlots::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        assert!(slots.take(a));
        assert!(slots.take(a));
        assert!(!slots.take(a), "the third connection of one address");
        assert!(slots.take(b), "another address is not affected");
        slots.give_back(a);
        assert_eq!(slots.count(a), 1);
        assert!(slots.take(a));
        slots.give_back(b);
        assert_eq!(slots.count(b), 0);
    }

    #[test]
    fn the_global_cap_is_shared_among_workers() {
        let limits = Limits {
            max_connections: 10,
            ..Limits::default()
        };
        assert_eq!(limits.max_connections_per_worker(3), 4);
        assert_eq!(limits.max_connections_per_worker(0), 10);
    }
}
