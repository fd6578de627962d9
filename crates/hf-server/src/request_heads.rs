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
//! the one its connection loop uses), so it judges each request exactly as actix will, and
//! where it must, it *cuts* the input: only the bytes before the cut are handed over, and once
//! actix has answered every request before it (counted by the middleware, see
//! [`crate::client_stream::AnswerCount`]; actix stops decoding at the end of its input and
//! decodes at most 16 requests ahead of its answers, so an earlier end would lose some), actix
//! is told the input has ended and closes the connection, and the stream writes the refusal,
//! if any, as it closes: the envelope with `connection: close`, in the place of the refused
//! request's answer. The input is cut
//!
//! - **at a request actix would refuse**: 400 `BAD_REQUEST`, 414 `URI_TOO_LONG` or 431
//!   `HEADERS_TOO_LARGE`;
//! - **at a head that is late**: every head must arrive within the header timeout, a
//!   connection's first counted from the connection's start, every later one from its first
//!   byte (between requests, actix's keep-alive timeout closes an idle connection); 408
//!   `REQUEST_TIMEOUT`, or no answer when the client sent only the empty lines a server ignores
//!   between requests;
//! - **where the client ends its input**, so that actix answers every request it was sent
//!   before it closes; a head left unfinished there is answered 400 `BAD_REQUEST`;
//! - **where a body breaks its framing** (a chunk size that is not hexadecimal): the request
//!   under way finds its body cut short and answers for it, as for a client that stopped
//!   sending;
//! - **after a request that ends the connection** (`Connection: close`, HTTP/1.0 without
//!   keep-alive) and its body: nothing after it is read (actix would parse on, and answer a
//!   malformed request there with an empty body).
//!
//! It stops following at a request that asks for an upgrade: everything after it is its body.
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
use bytes::{Bytes, BytesMut};
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

/// Where a connection's input ends for actix: how many of the bytes just read reach it, how
/// many requests it must answer before it is told the input has ended, and the answer the
/// connection closes with (none when the request under way answers for itself, or nothing
/// needs one).
#[derive(Debug)]
pub struct Cut {
    /// The bytes of the last read that come before the cut.
    pub keep: usize,
    /// The requests handed over that actix must answer first. Telling it earlier would make it
    /// drop the ones it has not decoded yet (it stops decoding at the end of the input, and it
    /// decodes at most 16 ahead of its answers).
    pub answered_first: u64,
    /// The answer, when the cut request is one actix never saw.
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
    /// The requests decoded (and so handed over); later heads are timed from their first byte.
    requests: u64,
    /// Still following: false after a cut.
    following: bool,
    /// The request decoded last ends the connection (`Connection: close`, HTTP/1.0 without
    /// keep-alive): the input is cut after its body.
    closing: bool,
}

impl std::fmt::Debug for RequestHeads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHeads")
            .field("unread", &self.unread.len())
            .field("requests", &self.requests)
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
            requests: 0,
            following: true,
            closing: false,
        }
    }

    /// Takes the bytes just read; `Err` when the input must be cut in them: at a request actix
    /// would refuse, at a body's broken framing, or after a request that ends the connection.
    pub fn saw(&mut self, bytes: &[u8]) -> Result<(), Cut> {
        if !self.following || bytes.is_empty() {
            return Ok(());
        }
        // Offsets count from the first byte still unread before this read.
        let carried = self.unread.len();
        let total = carried + bytes.len();
        self.unread.extend_from_slice(bytes);
        loop {
            let start = total - self.unread.len();
            let in_body = self.in_body();
            if self.closing && !in_body {
                // Nothing after a request that ends the connection is read (actix would parse
                // and answer on, and refuse a malformed one with an empty body).
                return Err(self.cut(start.saturating_sub(carried), None));
            }
            match self.decoder.decode(&mut self.unread) {
                Ok(Some(Message::Item(_request))) => {
                    self.requests += 1;
                    self.deadline = None;
                    if self.decoder.upgrade() {
                        // Everything after an upgrade request is its body, to the end.
                        self.stop_following();
                        return Ok(());
                    }
                    self.closing = !self.decoder.keep_alive();
                }
                Ok(Some(Message::Chunk(_))) => {}
                Ok(None) => break,
                Err(error) => {
                    // The refused request (or the body's broken part) starts at `start`; what
                    // of it came in earlier reads, actix holds undecoded, and the end of the
                    // input keeps it from ever completing. A broken body is answered by its
                    // request, which must then learn of the end of the input while it waits.
                    tracing::debug!(%error, "a request actix-http cannot parse");
                    let answer = (!in_body).then(|| self.refusal(&error));
                    return Err(self.cut(start.saturating_sub(carried), answer));
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
    /// registers for the deadline otherwise. Only empty lines since the last request (which a
    /// server ignores before a request line) end the connection without an answer.
    pub fn poll_late(&mut self, cx: &mut Context<'_>) -> Option<Cut> {
        let deadline = self.deadline.as_mut()?;
        if deadline.as_mut().poll(cx).is_pending() {
            return None;
        }
        let answer = (self.head_begun() || self.requests == 0).then(|| {
            ApiError::new(
                Code::RequestTimeout,
                format!(
                    "The request's head (its request line and headers) did not arrive within {} seconds.",
                    self.header_timeout.as_secs_f64()
                ),
            )
        });
        Some(self.cut(0, answer))
    }

    /// The client has ended its input: the input ends for actix too, once it has answered the
    /// requests before, and a head left unfinished is answered.
    pub fn ended(&mut self) -> Option<Cut> {
        if !self.following {
            return None;
        }
        let answer = (!self.in_body() && self.head_begun()).then(|| {
            ApiError::new(
                Code::BadRequest,
                "The request's head ended before it was complete.",
            )
        });
        Some(self.cut(0, answer))
    }

    /// Stops following, cutting the input `keep` bytes into the last read.
    fn cut(&mut self, keep: usize, answer: Option<ApiError>) -> Cut {
        // A request whose body is under way cannot be answered before the input ends.
        let answered_first = self.requests - u64::from(self.in_body());
        self.stop_following();
        Cut {
            keep,
            answered_first,
            answer,
        }
    }

    fn stop_following(&mut self) {
        self.following = false;
        self.deadline = None;
        self.unread = BytesMut::new();
    }

    fn in_body(&self) -> bool {
        self.decoder.message_type() != MessageType::None
    }

    /// Whether what is unread holds more than the empty lines a client may send between
    /// requests.
    fn head_begun(&self) -> bool {
        self.unread
            .iter()
            .any(|&byte| byte != b'\r' && byte != b'\n')
    }

    /// Arms the head deadline when a head has begun and disarms it when none is under way.
    fn time_the_head(&mut self) {
        let head_under_way = !self.in_body() && (!self.unread.is_empty() || self.requests == 0);
        if !head_under_way || self.header_timeout.is_zero() {
            self.deadline = None;
        } else if self.deadline.is_none() {
            self.deadline = Some(Box::pin(tokio::time::sleep_until(
                Instant::now() + self.header_timeout,
            )));
        }
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
                let blank = self
                    .unread
                    .iter()
                    .take_while(|&&byte| byte == b'\r' || byte == b'\n')
                    .count();
                let head = &self.unread[blank..];
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
    pub fn encode(&self, error: ApiError) -> Bytes {
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
            return Bytes::new();
        }
        encoded.extend_from_slice(&body);
        encoded.freeze()
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
    async fn late(heads: &mut RequestHeads) -> Option<Cut> {
        poll_fn(|cx| Poll::Ready(heads.poll_late(cx))).await
    }

    fn code(cut: &Cut) -> &'static str {
        cut.answer
            .as_ref()
            .map_or("none", |error| error.entries()[0].code)
    }

    /// Where a client's reads are cut: the read (by index), how many of its bytes reach actix,
    /// how many requests actix answers first, and the answer's code ("none": no answer of ours).
    type Expected = Option<(usize, usize, u64, &'static str)>;

    /// Each case: a name, the reads a client sends, and where they are cut.
    #[actix_web::test]
    async fn the_input_is_cut_where_a_refused_request_starts() {
        let cases: &[(&str, &[&[u8]], Expected)] = &[
            (
                "pipelined requests",
                &[b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"],
                None,
            ),
            ("a head over two reads", &[b"GET /a HTTP/1.1\r\nHo", b"st: x\r\n\r\n"], None),
            (
                "a body over two reads, then a request",
                &[
                    b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234",
                    b"56789GET /b HTTP/1.1\r\nHost: x\r\n\r\n",
                ],
                None,
            ),
            (
                "a chunked body, then a request",
                &[
                    b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                    GET,
                ],
                None,
            ),
            ("empty lines between requests", &[GET, b"\r\n", GET], None),
            (
                "two lengths after a good request",
                &[b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"],
                Some((0, 28, 1, "BAD_REQUEST")),
            ),
            (
                "a bad head begun in an earlier read",
                &[GET, GET, b"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gz", b"ip\r\n\r\n"],
                Some((3, 0, 2, "BAD_REQUEST")),
            ),
            ("no Host", &[b"GET / HTTP/1.1\r\n\r\n"], Some((0, 0, 0, "BAD_REQUEST"))),
            ("not HTTP", &[b"GET / SPDY/3\r\n\r\n"], Some((0, 0, 0, "BAD_REQUEST"))),
            ("a bad method", &[b"G(T / HTTP/1.1\r\n"], Some((0, 0, 0, "BAD_REQUEST"))),
            (
                "a broken chunk size",
                &[GET, b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n"],
                // The head (57 bytes) and the chunk "3\r\nabc" reach actix, the rest does not;
                // the request whose body broke answers for itself, so only the first comes
                // before the end of the input.
                Some((1, 63, 1, "none")),
            ),
            (
                "nothing after a request that ends the connection",
                &[b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nNOT HTTP AT ALL\r\n\r\n"],
                Some((0, 47, 1, "none")),
            ),
            (
                "the end of a closing request's body",
                &[
                    b"POST /a HTTP/1.0\r\nContent-Length: 4\r\n\r\nab",
                    b"cdGET / HTTP/1.1\r\nHost: x\r\n\r\n",
                ],
                Some((1, 2, 1, "none")),
            ),
        ];
        for (name, reads, expected) in cases {
            let mut heads = follower();
            let mut cut = None;
            for (index, read) in reads.iter().enumerate() {
                if let Err(found) = heads.saw(read) {
                    cut = Some((index, found.keep, found.answered_first, code(&found)));
                    break;
                }
            }
            assert_eq!(cut, *expected, "{name}");
        }
    }

    #[actix_web::test]
    async fn the_end_of_the_input_waits_for_the_requests_before_it() {
        let mut heads = follower();
        heads.saw(GET).unwrap();
        heads.saw(GET).unwrap();
        let cut = heads.ended().expect("the end is passed on");
        assert_eq!((cut.answered_first, code(&cut)), (2, "none"));

        let mut heads = follower();
        heads.saw(GET).unwrap();
        heads.saw(b"\r\n").unwrap();
        let cut = heads.ended().unwrap();
        assert_eq!(code(&cut), "none", "empty lines are not a head");

        let mut heads = follower();
        heads.saw(b"GET / HTTP/1.1\r\nHost: x\r").unwrap();
        assert_eq!(code(&heads.ended().unwrap()), "BAD_REQUEST");

        let mut heads = follower();
        heads
            .saw(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n1")
            .unwrap();
        let cut = heads.ended().unwrap();
        assert_eq!(
            (cut.answered_first, code(&cut)),
            (0, "none"),
            "a body cut short is its request's to answer, which needs the end of the input"
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

        // A head that begins in the read that ends the one before has its own deadline.
        let mut heads = follower();
        tokio::time::advance(timeout * 9 / 10).await;
        heads
            .saw(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n")
            .unwrap();
        tokio::time::advance(timeout / 5).await;
        assert!(late(&mut heads).await.is_none());

        // Empty lines alone are not a head: past the deadline, the connection closes unanswered.
        let mut heads = follower();
        heads.saw(GET).unwrap();
        heads.saw(b"\r\n").unwrap();
        tokio::time::advance(timeout * 2).await;
        let refusal = late(&mut heads).await.expect("empty lines are timed too");
        assert_eq!(code(&refusal), "none");

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
        let text = String::from_utf8(answer.to_vec()).unwrap();
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
