//! The requests of a connection, followed as they arrive, before actix-http parses them: every
//! request's head must arrive in time, and a request actix-http would refuse is refused with the
//! error envelope instead.
//!
//! actix-http has three gaps here, all in its connection loop, which offers no hook for them:
//!
//! - It answers framing it cannot parse itself, before any code of ours runs, with an empty
//!   body: conflicting `Content-Length`s, a `Transfer-Encoding` other than `chunked`, a URL
//!   over 64 KiB, more than 96 header fields, a request line that is not HTTP.
//! - It answers a first request whose head is late (408) the same way.
//! - It times only the head of a connection's *first* request. On a kept-alive connection, a
//!   client that sends part of its next head and trickles the rest held the connection for as
//!   long as it liked (measured: a header line a second kept one open past 30 s; a header value
//!   a byte at a time could fill actix's 128 KiB head buffer over a day and a half).
//!
//! So [`crate::client_stream::ClientStream`] shows every byte it reads to this follower before
//! actix gets it. The follower decodes them with actix-http's own request decoder (`h1::Codec`,
//! the one its connection loop uses), so it judges each request exactly as actix will:
//!
//! - **A request actix would refuse never reaches it.** Only the bytes before it are handed
//!   over, then the input ends; actix answers the requests before it, as for a client that
//!   stopped sending, and closes the connection, and the stream writes the refusal as it closes
//!   (400 `BAD_REQUEST`, 414 `URI_TOO_LONG` or 431 `HEADERS_TOO_LARGE`, in the envelope, with
//!   `connection: close`).
//! - **Every head arrives within the header timeout**: a connection's first counted from the
//!   connection's start, every later one from its first byte (between requests, actix's
//!   keep-alive timeout closes an idle connection). A late head is refused the same way, 408
//!   `REQUEST_TIMEOUT`.
//! - **A head the client leaves unfinished** when it ends its input is answered 400
//!   `BAD_REQUEST`, so a client that half-closes learns why nothing came back.
//! - **A body that breaks its framing** (a chunk size that is not hexadecimal) ends the input
//!   where it breaks: the request under way finds its body cut short and answers for it, as for
//!   a client that stopped sending.
//!
//! It stops following after a request that ends the connection (`Connection: close`, HTTP/1.0
//! without keep-alive) or asks for an upgrade: actix reads no request after those.
//!
//! Hand-written because the decoding is actix's and only the following is ours: no library
//! sits between a socket and actix-http's connection loop.

use std::future::Future;
use std::pin::Pin;
use std::task::Context;
use std::time::Duration;

use actix_http::body::{BodySize, MessageBody as _};
use actix_http::error::ParseError;
use actix_http::h1::{Codec, Message, MessageType};
use actix_http::{ConnectionType, KeepAlive, ServiceConfig, ServiceConfigBuilder};
use actix_web::ResponseError as _;
use bytes::BytesMut;
use tokio::time::{Instant, Sleep};
use tokio_util::codec::{Decoder as _, Encoder as _};

use crate::error::{ApiError, Code};
use crate::limits::Limits;

/// Past this much capacity, an emptied buffer is given back rather than kept for the next
/// request (a body's reads pass through it; an idle connection should not hold them).
const KEPT_CAPACITY: usize = 8 * 1024;

/// The decoder settings one worker's connections share. Only the keep-alive setting matters
/// to decoding (it decides which requests end the connection); making one per connection would
/// start a clock task for each.
pub fn decoder_config(limits: &Limits) -> ServiceConfig {
    let keep_alive = if limits.keep_alive.is_zero() {
        KeepAlive::Disabled
    } else {
        KeepAlive::Timeout(limits.keep_alive)
    };
    ServiceConfigBuilder::new().keep_alive(keep_alive).build()
}

/// A request the connection refuses: how many of the bytes just read reach actix, and the
/// answer the connection closes with (none when the request under way answers for itself).
#[derive(Debug)]
pub struct Refusal {
    /// The bytes of the last read that come before the refused request.
    pub keep: usize,
    /// The answer, when the refused request is one actix never saw.
    pub answer: Option<ApiError>,
}

/// Follows one connection's requests (see the module comment).
pub struct RequestHeads {
    decoder: Codec,
    /// Bytes seen and not decoded yet: part of a head, or the next bytes of a body.
    unread: BytesMut,
    header_timeout: Duration,
    max_url_bytes: usize,
    /// While a head is under way, when it must be complete.
    deadline: Option<Pin<Box<Sleep>>>,
    /// A request has been decoded: later heads are timed from their first byte.
    decoded_one: bool,
    /// Still following: false after a request that ends the connection, or a refusal.
    following: bool,
}

impl std::fmt::Debug for RequestHeads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHeads")
            .field("unread", &self.unread.len())
            .field("head_under_way", &self.deadline.is_some())
            .field("following", &self.following)
            .finish_non_exhaustive()
    }
}

impl RequestHeads {
    /// Follows a connection that has just started: its first head is due within the header
    /// timeout from now.
    pub fn new(config: ServiceConfig, limits: &Limits) -> Self {
        Self {
            decoder: Codec::new(config),
            unread: BytesMut::new(),
            header_timeout: limits.header_timeout,
            max_url_bytes: limits.max_url_bytes,
            deadline: (!limits.header_timeout.is_zero())
                .then(|| Box::pin(tokio::time::sleep(limits.header_timeout))),
            decoded_one: false,
            following: true,
        }
    }

    /// Takes the bytes just read; `Err` when they hold a request actix would refuse.
    pub fn saw(&mut self, bytes: &[u8]) -> Result<(), Refusal> {
        if !self.following || bytes.is_empty() {
            return Ok(());
        }
        // Offsets count from the first byte still unread before this read.
        let carried = self.unread.len();
        let total = carried + bytes.len();
        self.unread.extend_from_slice(bytes);
        loop {
            let start = total - self.unread.len();
            let in_body = self.decoder.message_type() != MessageType::None;
            match self.decoder.decode(&mut self.unread) {
                Ok(Some(Message::Item(_request))) => {
                    self.decoded_one = true;
                    if !self.decoder.keep_alive() || self.decoder.upgrade() {
                        self.stop_following();
                        return Ok(());
                    }
                }
                Ok(Some(Message::Chunk(_))) => {}
                Ok(None) => break,
                Err(error) => {
                    // The refused request (or the body's broken part) starts at `start`; what
                    // of it came in earlier reads, actix holds undecoded, and the end of the
                    // input keeps it from ever completing.
                    let answer = (!in_body).then(|| self.refusal(&error));
                    tracing::debug!(%error, "a request actix-http cannot parse");
                    self.stop_following();
                    return Err(Refusal {
                        keep: start.saturating_sub(carried),
                        answer,
                    });
                }
            }
        }
        if self.unread.is_empty() && self.unread.capacity() > KEPT_CAPACITY {
            self.unread = BytesMut::new();
        }
        self.time_the_head();
        Ok(())
    }

    /// Whether the head under way is late, checked when the client has nothing more to give;
    /// registers for the deadline otherwise.
    pub fn poll_late(&mut self, cx: &mut Context<'_>) -> Option<Refusal> {
        let deadline = self.deadline.as_mut()?;
        if deadline.as_mut().poll(cx).is_pending() {
            return None;
        }
        self.stop_following();
        Some(Refusal {
            keep: 0,
            answer: Some(ApiError::new(
                Code::RequestTimeout,
                format!(
                    "The request's head (its request line and headers) did not arrive within {} seconds.",
                    self.header_timeout.as_secs_f64()
                ),
            )),
        })
    }

    /// The client has ended its input: a head it left unfinished is answered (nothing else
    /// is: between requests a client may close, and a body cut short is the request's own).
    pub fn ended(&mut self) -> Option<Refusal> {
        let in_body = self.decoder.message_type() != MessageType::None;
        if !self.following || in_body || self.unread.is_empty() {
            return None;
        }
        self.stop_following();
        Some(Refusal {
            keep: 0,
            answer: Some(ApiError::new(
                Code::BadRequest,
                "The request's head ended before it was complete.",
            )),
        })
    }

    /// Arms the head deadline when a head has begun and disarms it when none is under way.
    fn time_the_head(&mut self) {
        let in_body = self.decoder.message_type() != MessageType::None;
        let head_under_way = !in_body && (!self.unread.is_empty() || !self.decoded_one);
        if !head_under_way || self.header_timeout.is_zero() {
            self.deadline = None;
        } else if self.deadline.is_none() {
            self.deadline = Some(Box::pin(tokio::time::sleep_until(
                Instant::now() + self.header_timeout,
            )));
        }
    }

    fn stop_following(&mut self) {
        self.following = false;
        self.deadline = None;
        self.unread = BytesMut::new();
    }

    /// The answer to a head actix-http's decoder refused. The head starts at `unread`'s
    /// beginning, unless the decoder had already split it off, which it does only once the URL
    /// has been read.
    fn refusal(&self, error: &ParseError) -> ApiError {
        match error {
            ParseError::TooLarge => ApiError::new(
                Code::HeadersTooLarge,
                "The request's head has more header fields, or more bytes, than can be read.",
            ),
            ParseError::Uri(_) => {
                let head: &[u8] = &self.unread;
                let line_bytes = head
                    .iter()
                    .position(|&byte| byte == b'\n')
                    .unwrap_or(head.len());
                if line_bytes > self.max_url_bytes {
                    ApiError::new(
                        Code::UriTooLong,
                        format!(
                            "The request line has {line_bytes} bytes; the limit on its URL is {}.",
                            self.max_url_bytes
                        ),
                    )
                } else {
                    ApiError::new(Code::BadRequest, "The request's URL is not valid.")
                }
            }
            ParseError::Method => {
                ApiError::new(Code::BadRequest, "The request's method is not valid.")
            }
            ParseError::Version => ApiError::new(
                Code::BadRequest,
                "The request line does not end in HTTP/1.0 or HTTP/1.1.",
            ),
            ParseError::Header => ApiError::new(
                Code::BadRequest,
                "The request's headers cannot be read: a malformed header, no Host, or framing \
                 that is malformed or conflicts (Content-Length, Transfer-Encoding).",
            ),
            _ => ApiError::new(Code::BadRequest, "The request cannot be read as HTTP/1.1."),
        }
    }

    /// The bytes of `error`'s response, to be written as the connection closes: the envelope
    /// as every other answer carries it, with a request id of its own and `connection: close`,
    /// encoded by actix-http's own response encoder. Logged like every answer.
    pub fn encode(&self, error: ApiError) -> Vec<u8> {
        let request_id = uuid::Uuid::new_v4().to_string();
        tracing::info!(
            status = error.status_code().as_u16(),
            %error,
            %request_id,
            "request refused as it arrived"
        );
        let (head, body) = error
            .with_request_id(request_id)
            .error_response()
            .into_parts();
        let mut response: actix_http::Response<()> = head.into();
        response
            .head_mut()
            .set_connection_type(ConnectionType::Close);
        let body = body.try_into_bytes().unwrap_or_default();
        let mut encoded = BytesMut::new();
        let mut encoder = Codec::new(self.decoder.config().clone());
        let size = BodySize::Sized(body.len() as u64);
        if let Err(error) = encoder.encode(Message::Item((response, size)), &mut encoded) {
            tracing::debug!(%error, "could not encode a refusal");
            return Vec::new();
        }
        encoded.extend_from_slice(&body);
        encoded.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::task::Poll;

    use super::*;

    const GET: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";

    fn follower() -> RequestHeads {
        let limits = Limits::default();
        RequestHeads::new(decoder_config(&limits), &limits)
    }

    /// Whether the follower's head deadline has passed, polled once.
    async fn late(heads: &mut RequestHeads) -> Option<Refusal> {
        poll_fn(|cx| Poll::Ready(heads.poll_late(cx))).await
    }

    fn code(refusal: &Refusal) -> &'static str {
        refusal
            .answer
            .as_ref()
            .map_or("none", |error| error.entries()[0].code)
    }

    /// Where a client's reads are refused: the read (by index), how many of its bytes reach
    /// actix, and the refusal's code ("none" when the request under way answers).
    type Refused = Option<(usize, usize, &'static str)>;

    /// Each case: a name, the reads a client sends, and where they are refused.
    #[actix_web::test]
    async fn requests_actix_would_refuse_are_found_where_they_start() {
        let cases: &[(&str, &[&[u8]], Refused)] = &[
            ("pipelined requests", &[b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"], None),
            ("a head over two reads", &[b"GET /a HTTP/1.1\r\nHo", b"st: x\r\n\r\n"], None),
            (
                "a body over two reads, then a request",
                &[b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234", b"56789GET /b HTTP/1.1\r\nHost: x\r\n\r\n"],
                None,
            ),
            (
                "a chunked body, then a request",
                &[b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", GET],
                None,
            ),
            (
                "two lengths after a good request",
                &[b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"],
                Some((0, 28, "BAD_REQUEST")),
            ),
            (
                "a bad head begun in an earlier read",
                &[GET, b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gz", b"ip\r\n\r\n"],
                Some((2, 0, "BAD_REQUEST")),
            ),
            ("no Host", &[b"GET / HTTP/1.1\r\n\r\n"], Some((0, 0, "BAD_REQUEST"))),
            ("not HTTP", &[b"GET / SPDY/3\r\n\r\n"], Some((0, 0, "BAD_REQUEST"))),
            ("a bad method", &[b"G(T / HTTP/1.1\r\n"], Some((0, 0, "BAD_REQUEST"))),
            (
                "a broken chunk size",
                &[b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n"],
                // The head (57 bytes) and the chunk "3\r\nabc" reach actix, the rest does not.
                Some((0, 63, "none")),
            ),
            (
                "after Connection: close nothing is judged",
                &[b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nNOT HTTP AT ALL\r\n\r\n"],
                None,
            ),
        ];
        for (name, reads, expected) in cases {
            let mut heads = follower();
            let mut refused = None;
            for (index, read) in reads.iter().enumerate() {
                if let Err(refusal) = heads.saw(read) {
                    refused = Some((index, refusal.keep, code(&refusal)));
                    break;
                }
            }
            assert_eq!(refused, *expected, "{name}");
        }
    }

    #[actix_web::test]
    async fn a_head_the_client_leaves_unfinished_is_answered() {
        let mut heads = follower();
        heads.saw(GET).unwrap();
        assert!(
            heads.ended().is_none(),
            "a client may close between requests"
        );
        let mut heads = follower();
        heads.saw(b"GET / HTTP/1.1\r\nHost: x\r").unwrap();
        assert_eq!(code(&heads.ended().unwrap()), "BAD_REQUEST");
        let mut heads = follower();
        heads
            .saw(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n1")
            .unwrap();
        assert!(
            heads.ended().is_none(),
            "a body cut short is the request's own"
        );
    }

    #[actix_web::test]
    async fn a_url_over_the_uri_limit_is_too_long_and_too_many_fields_too_large() {
        let mut heads = follower();
        let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
        let refusal = heads.saw(long.as_bytes()).unwrap_err();
        assert_eq!(code(&refusal), "URI_TOO_LONG");

        let mut heads = follower();
        let fields: String = (0..100).map(|i| format!("X-{i}: v\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\nHost: x\r\n{fields}\r\n");
        let refusal = heads.saw(many.as_bytes()).unwrap_err();
        assert_eq!(code(&refusal), "HEADERS_TOO_LARGE");
    }

    #[actix_web::test]
    async fn every_head_is_timed_and_nothing_else_is() {
        tokio::time::pause();
        let timeout = Limits::default().header_timeout;
        // The first head is due from the connection's start, bytes or none.
        let mut heads = follower();
        tokio::time::advance(timeout / 2).await;
        assert!(late(&mut heads).await.is_none());
        tokio::time::advance(timeout).await;
        let refusal = late(&mut heads).await.expect("the first head is late");
        assert_eq!(code(&refusal), "REQUEST_TIMEOUT");

        // Between requests nothing is timed (the keep-alive timeout closes idle connections).
        let mut heads = follower();
        heads.saw(GET).unwrap();
        tokio::time::advance(timeout * 3).await;
        assert!(late(&mut heads).await.is_none());
        // A later head from its first byte, however it trickles.
        heads.saw(b"GET / HTTP/1.1\r\n").unwrap();
        tokio::time::advance(timeout / 2).await;
        heads.saw(b"X-Slow: ").unwrap();
        assert!(late(&mut heads).await.is_none());
        tokio::time::advance(timeout).await;
        heads.saw(b"v\r\n").unwrap();
        let refusal = late(&mut heads).await.expect("the second head is late");
        assert_eq!(code(&refusal), "REQUEST_TIMEOUT");

        // A body is not a head: its own timeout is the handler's.
        let mut heads = follower();
        heads
            .saw(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n1")
            .unwrap();
        tokio::time::advance(timeout * 3).await;
        assert!(late(&mut heads).await.is_none());
    }

    #[actix_web::test]
    async fn a_zero_header_timeout_times_nothing() {
        tokio::time::pause();
        let limits = Limits {
            header_timeout: Duration::ZERO,
            ..Limits::default()
        };
        let mut heads = RequestHeads::new(decoder_config(&limits), &limits);
        heads.saw(b"GET / HT").unwrap();
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert!(late(&mut heads).await.is_none());
    }

    #[actix_web::test]
    async fn a_refusal_is_the_envelope_and_closes_the_connection() {
        let heads = follower();
        let answer = heads.encode(ApiError::new(Code::BadRequest, "No."));
        let text = String::from_utf8(answer).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        for line in [
            "connection: close",
            "content-type: application/json",
            &format!("content-length: {}", body.len()),
        ] {
            assert!(head.contains(line), "{line} in {head}");
        }
        assert!(head.contains("x-request-id: "), "{head}");
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["errors"][0]["code"], "BAD_REQUEST");
    }
}
