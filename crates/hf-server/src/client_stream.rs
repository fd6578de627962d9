//! A client connection as the HTTP layer reads it: no faster than the client takes the answers.
//!
//! actix-http's HTTP/1 connection reads whatever the client sends, up to 128 KiB at a time, and
//! parses every complete request in it at once, however many are still waiting for the answers
//! to the ones before (HTTP/1.1 pipelining). A client that sends thousands of small requests in
//! one go and never reads the answers therefore made the service hold all of them parsed
//! (measured: 9 MB for one connection asking 20 000 times for `/openapi.json`, 2 GB for 100),
//! and once the read buffer was full with the answers stuck, the connection's task woke itself
//! in a loop and kept a core busy until the connection ended (measured: one such connection,
//! 100 % of a core). actix offers no setting for either, and the cure belongs in its connection
//! loop; until it has one, this stream, which actix reads and writes instead of the socket,
//! keeps two rules:
//!
//! - **No reading while an answer waits.** When the socket refuses a write (the client is not
//!   reading), reads answer "not yet" until a write goes through again; the pending write has
//!   registered for the socket becoming writable, which wakes the connection, so nothing is
//!   lost. A client that does not take its answers cannot make the service read, parse or hold
//!   its next requests, and the connection sleeps instead of spinning.
//! - **A read at a time.** At most [`READ_TURN`] bytes are handed over between two answers
//!   written before the connection's task is made to yield (it is woken again at once), so it
//!   parses what it has before it reads on: a burst of pipelined requests is parsed a few
//!   kilobytes at a time, answered, and stops at the first answer the client does not take. A
//!   client that sends a request and reads its answer in turn never meets the limit.
//!
//! A request's body is read the same way, a turn at a time; between turns the connection's
//! task yields once (a 1 MiB body takes 256 turns).
//!
//! It keeps a third rule for the answers themselves:
//!
//! - **Answers are taken in time.** A write refused for the whole send timeout (the socket
//!   did not become writable again) fails, and the connection is reset, so the kernel drops
//!   what it still held for the client and the client learns at once. The kernel's own send
//!   timeout (`TCP_USER_TIMEOUT`, which [`ClientStream::new`] sets) does not always cover this:
//!   a client reading slowly from a full receive buffer sends a window update now and then, and
//!   each restarts the kernel's count (measured with a 2 s timeout: a client reading 5 KB/s of
//!   a 4.5 MB answer kept its connection for 13 s; with this rule, 2.2 s); and when the kernel
//!   does give up, it sends nothing, so the client learns only once it has read all it holds.
//!   The kernel makes a socket writable again only once the client has taken about half of
//!   what waits in it, so the client must take its answer at some rate. nginx's `send_timeout`
//!   is the same rule. A client that takes its answers in turn never meets it: the timer starts
//!   only when a write is refused.
//!
//! And it shows every byte it reads to [`crate::request_heads`] before actix gets it, which
//! times every request's head and keeps a request actix's parser would refuse from reaching
//! it: the input is cut there, ends for actix once it has answered the requests before, and
//! the refusal, in the envelope, is written as the connection closes. The connection then reads
//! on for up to [`LINGER`] until the client closes too, since closing on bytes still unread
//! sends a reset, which can make the client drop the refusal unread.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use actix_web::rt::net::TcpStream;
use bytes::{Buf as _, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use crate::request_heads::{Cut, RequestHeads};

/// The most bytes handed to the HTTP layer before its task yields.
pub const READ_TURN: usize = 4 * 1024;

/// How long a connection that closes with a refusal goes on reading what the client still
/// sends, so that closing does not reset the connection (which can make the client drop the
/// refusal unread) while the client has not yet seen the end of it.
pub const LINGER: Duration = Duration::from_secs(1);

/// How many of a connection's requests the service has answered, counted by the middleware as
/// each answer is made ([`AnswerCount::answering`], through the connection's data): a connection
/// whose input is cut ends it for actix only once actix has answered every request before the
/// cut (see [`crate::request_heads::Cut::answered_first`]).
#[derive(Default)]
pub struct AnswerCount {
    answered: Cell<u64>,
    /// The connection's task, while it waits for the count.
    waiting: Cell<Option<Waker>>,
}

impl std::fmt::Debug for AnswerCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerCount")
            .field("answered", &self.answered.get())
            .finish_non_exhaustive()
    }
}

impl AnswerCount {
    /// One more request answered.
    fn answered(&self) {
        self.answered.set(self.answered.get() + 1);
        if let Some(waker) = self.waiting.take() {
            waker.wake();
        }
    }

    /// A request being answered: counted when the guard drops, as its answer is made (or the
    /// request is abandoned).
    pub fn answering(count: &Rc<Self>) -> Answering {
        Answering(Rc::clone(count))
    }

    /// Whether `requests` are answered; the task is woken when the next is otherwise.
    fn reached(&self, requests: u64, cx: &Context<'_>) -> bool {
        if self.answered.get() >= requests {
            return true;
        }
        self.waiting.set(Some(cx.waker().clone()));
        false
    }
}

/// Counts its request as answered when dropped (see [`AnswerCount::answering`]).
#[derive(Debug)]
pub struct Answering(Rc<AnswerCount>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.answered();
    }
}

/// A client's TCP connection, read no faster than it takes its answers (see the module
/// comment).
#[derive(Debug)]
pub struct ClientStream {
    socket: TcpStream,
    /// The last write was refused: the client is not taking what it was sent.
    write_blocked: bool,
    /// Bytes handed over in this turn.
    read_in_turn: usize,
    /// How long writes may stay refused.
    send_timeout: Duration,
    /// While writes are refused: the end of the send timeout, counted from the first refusal.
    /// It wakes the connection then, so the refused write is tried once more and fails.
    stalled: Option<Pin<Box<Sleep>>>,
    /// The requests read so far, followed as actix will parse them.
    heads: RequestHeads,
    /// Once the input is cut: how many requests actix must answer before it is told the input
    /// has ended.
    input_ends_after: Option<u64>,
    /// Counted by the middleware.
    answers: Rc<AnswerCount>,
    /// What is still to be written of the refusal's answer, as the connection closes.
    answer: Option<Bytes>,
    /// The write side is shut.
    write_shut: bool,
    /// After a refusal's answer: until when the connection reads on before it closes.
    lingering: Option<Pin<Box<Sleep>>>,
}

impl ClientStream {
    /// Wraps an accepted connection whose answers must be taken within `send_timeout`: the
    /// kernel's send timeout is set on the socket, and writes may stay refused no longer. Its
    /// requests are followed by `heads` (see [`crate::request_heads`]).
    pub fn new(socket: TcpStream, send_timeout: Duration, heads: RequestHeads) -> Self {
        set_send_timeout(&socket, send_timeout);
        Self {
            socket,
            write_blocked: false,
            read_in_turn: 0,
            send_timeout,
            stalled: None,
            heads,
            input_ends_after: None,
            answers: Rc::default(),
            answer: None,
            write_shut: false,
            lingering: None,
        }
    }

    /// The count of answers the middleware keeps for this connection (it finds it in the
    /// connection's data).
    pub fn answers(&self) -> Rc<AnswerCount> {
        Rc::clone(&self.answers)
    }

    /// The socket, for its addresses and options.
    pub fn socket(&self) -> &TcpStream {
        &self.socket
    }

    /// Cuts the input for actix, keeping the refusal's answer for the close.
    fn cut_input(&mut self, cut: Cut) {
        self.input_ends_after = Some(cut.answered_first);
        if let Some(error) = cut.answer {
            self.answer = Some(self.heads.encode(error));
        }
    }

    /// Once the input is cut: its end, when every request before the cut is answered (actix
    /// stops decoding at the end of its input, and would drop requests it holds undecoded).
    fn poll_end_of_input(&self, requests: u64, cx: &Context<'_>) -> Poll<io::Result<()>> {
        if self.answers.reached(requests, cx) {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    /// Notes how a write went and answers for it: refused, reads wait, and once writes have
    /// been refused for the send timeout the write fails; taken, the client is taking its
    /// answers and a new turn begins (so a client that asks and reads in turn never has to
    /// yield).
    fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        self.write_blocked = written.is_pending();
        if !self.write_blocked {
            self.stalled = None;
            if matches!(written, Poll::Ready(Ok(taken)) if taken > 0) {
                self.read_in_turn = 0;
            }
            return written;
        }
        let timeout = self.send_timeout;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match stalled.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                // Closed with a reset: what the socket still holds is dropped at once, instead
                // of lingering in the kernel (an orphan delivering it at the client's pace).
                if let Err(error) =
                    socket2::SockRef::from(&self.socket).set_linger(Some(Duration::ZERO))
                {
                    tracing::debug!(%error, "could not make the connection close with a reset");
                }
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the client took none of its answer for {} s",
                        timeout.as_secs_f32()
                    ),
                )))
            }
        }
    }
}

/// Sets a connection's send timeout (`TCP_USER_TIMEOUT`): the kernel drops it once what was sent
/// has stayed unacknowledged, or the peer's receive window shut, for `timeout`.
///
/// A client that asks for a response and never reads it would otherwise hold the response's
/// bytes in the kernel for as long as it keeps the connection: after the response is written
/// and the keep-alive timeout passes, actix closes its side, the socket lives on as an orphan
/// still trying to deliver, and the client's address no longer counts it. Measured: 1 000
/// such requests for `/openapi.json` (241 KB) held 323 MB of the kernel's TCP memory until the
/// client let go. Nothing in actix bounds this phase. The kernel's count restarts at each
/// window update of a client that reads slowly from a full receive buffer; for an answer
/// larger than the socket's buffer, which the service still holds, the stream's own rule
/// covers that case (see the module comment).
fn set_send_timeout(stream: &TcpStream, timeout: Duration) {
    if let Err(error) = socket2::SockRef::from(stream).set_tcp_user_timeout(Some(timeout)) {
        tracing::debug!(%error, "could not set the connection's send timeout");
    }
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(requests) = this.input_ends_after {
            return this.poll_end_of_input(requests, cx);
        }
        if this.write_blocked {
            // The refused write waits for the socket to become writable, and that wakes this
            // connection's task.
            return Poll::Pending;
        }
        if this.read_in_turn >= READ_TURN {
            this.read_in_turn = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        // The socket's own read, which also spares the system call that would only say "no
        // more" after a short read.
        let room = READ_TURN - this.read_in_turn;
        let before = buf.filled().len();
        let polled = if buf.remaining() <= room {
            Pin::new(&mut this.socket).poll_read(cx, buf)
        } else {
            let mut limited = ReadBuf::new(buf.initialize_unfilled_to(room));
            let polled = Pin::new(&mut this.socket).poll_read(cx, &mut limited);
            let read = limited.filled().len();
            buf.advance(read);
            polled
        };
        match polled {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => {
                // The client has sent all it has: is the head under way late?
                return match this.heads.poll_late(cx) {
                    Some(cut) => {
                        this.cut_input(cut);
                        Poll::Ready(Ok(()))
                    }
                    None => Poll::Pending,
                };
            }
        }
        let read = buf.filled().len() - before;
        this.read_in_turn += read;
        let cut = if read == 0 {
            // The client ended its input; a head it left unfinished is answered.
            this.heads.ended()
        } else {
            this.heads.saw(&buf.filled()[before..]).err()
        };
        if let Some(cut) = cut {
            let requests = cut.answered_first;
            buf.set_filled(before + cut.keep);
            this.cut_input(cut);
            if buf.filled().len() == before {
                // Nothing to hand over: the end of the input, when actix has caught up.
                return this.poll_end_of_input(requests, cx);
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.socket).poll_write(cx, data);
        this.wrote(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.socket).poll_write_vectored(cx, data);
        this.wrote(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.socket.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().socket).poll_flush(cx)
    }

    /// Writes a refusal's answer first, under the same send timeout as every answer, then
    /// shuts the write side and, after a refusal, reads on for up to [`LINGER`] until the client
    /// ends its side too.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while let Some(answer) = this.answer.as_ref() {
            if answer.is_empty() {
                this.answer = None;
                this.lingering = Some(Box::pin(tokio::time::sleep(LINGER)));
                break;
            }
            let polled = Pin::new(&mut this.socket).poll_write(cx, answer);
            match std::task::ready!(this.wrote(cx, polled))? {
                0 => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                taken => {
                    if let Some(answer) = this.answer.as_mut() {
                        answer.advance(taken);
                    }
                }
            }
        }
        if !this.write_shut {
            std::task::ready!(Pin::new(&mut this.socket).poll_shutdown(cx))?;
            this.write_shut = true;
        }
        if let Some(lingering) = this.lingering.as_mut() {
            let mut scratch = [0; READ_TURN];
            loop {
                let mut discarded = ReadBuf::new(&mut scratch);
                match Pin::new(&mut this.socket).poll_read(cx, &mut discarded) {
                    Poll::Ready(Ok(())) if !discarded.filled().is_empty() => continue,
                    Poll::Ready(_) => break,
                    Poll::Pending if lingering.as_mut().poll(cx).is_ready() => break,
                    Poll::Pending => return Poll::Pending,
                }
            }
            this.lingering = None;
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// `socket` as the service wraps it, with the default limits and `send_timeout`.
    fn wrap(socket: TcpStream, send_timeout: Duration) -> ClientStream {
        let limits = crate::limits::Limits::default();
        let heads = RequestHeads::new(crate::request_heads::decoder_config(&limits), &limits);
        ClientStream::new(socket, send_timeout, heads)
    }

    /// A connected pair: the service's end wrapped, the client's end bare, with a small receive
    /// buffer so that it stops taking data soon when it does not read.
    async fn pair() -> (ClientStream, tokio::net::TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpSocket::new_v4().unwrap();
        client.set_recv_buffer_size(4096).unwrap();
        let client = client
            .connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (socket, _) = listener.accept().await.unwrap();
        (wrap(socket, Duration::from_secs(60)), client)
    }

    /// Writes `data` through `stream` until it is all taken or a write fails; what was taken.
    async fn write_until_failure(
        stream: &mut ClientStream,
        data: &[u8],
    ) -> (usize, io::Result<()>) {
        let mut taken = 0;
        while taken < data.len() {
            match stream.write(&data[taken..]).await {
                Ok(n) => taken += n,
                Err(error) => return (taken, Err(error)),
            }
        }
        (taken, Ok(()))
    }

    /// Reads `chunk` bytes every `every` until the stream ends or fails, counting what it read.
    fn read_slowly(
        mut client: tokio::net::TcpStream,
        chunk: usize,
        every: Duration,
    ) -> (tokio::task::JoinHandle<()>, std::sync::Arc<AtomicUsize>) {
        let read = std::sync::Arc::new(AtomicUsize::new(0));
        let count = std::sync::Arc::clone(&read);
        let reader = tokio::spawn(async move {
            let mut bytes = vec![0; chunk];
            loop {
                tokio::time::sleep(every).await;
                match client.read(&mut bytes).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => count.fetch_add(n, Ordering::SeqCst),
                };
            }
        });
        (reader, read)
    }

    /// One read of `stream` into a buffer of `capacity`: how many bytes, or `None` for "not
    /// yet" (and whether the task was woken to come back at once).
    fn read_once(stream: &mut ClientStream, capacity: usize) -> (Option<usize>, bool) {
        let woken = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waker = waker_fn(std::sync::Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        let mut bytes = vec![0; capacity];
        let mut buf = ReadBuf::new(&mut bytes);
        let read = match Pin::new(stream).poll_read(&mut cx, &mut buf) {
            Poll::Ready(result) => {
                result.unwrap();
                Some(buf.filled().len())
            }
            Poll::Pending => None,
        };
        (read, woken.load(std::sync::atomic::Ordering::SeqCst))
    }

    fn waker_fn(woken: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::task::Waker {
        struct Flag(std::sync::Arc<std::sync::atomic::AtomicBool>);
        impl std::task::Wake for Flag {
            fn wake(self: std::sync::Arc<Self>) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        std::task::Waker::from(std::sync::Arc::new(Flag(woken)))
    }

    /// However much the client has sent, a turn hands over at most `READ_TURN` bytes, then the
    /// reader is told "not yet" and woken at once, so it deals with what it has before reading
    /// on.
    #[actix_web::test]
    async fn a_turn_hands_over_at_most_read_turn_bytes_then_yields() {
        let (mut stream, mut client) = pair().await;
        client.write_all(&[b'x'; 3 * READ_TURN]).await.unwrap();
        poll_fn(|cx| stream.socket.poll_read_ready(cx))
            .await
            .unwrap();
        // Let the rest arrive too.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;

        let mut handed = 0;
        loop {
            match read_once(&mut stream, 64 * 1024) {
                (Some(read), _) => handed += read,
                (None, woken) => {
                    assert!(woken, "a yield wakes the reader at once");
                    break;
                }
            }
        }
        assert_eq!(handed, READ_TURN);
        // The next turn goes on where the last stopped.
        assert!(matches!(read_once(&mut stream, 64 * 1024), (Some(n), _) if n > 0));
    }

    /// An answer written begins a new turn: a client that reads its answers is never made to
    /// wait for a yield.
    #[actix_web::test]
    async fn an_answer_written_begins_a_new_turn() {
        let (mut stream, mut client) = pair().await;
        client.write_all(&[b'x'; 2 * READ_TURN]).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let mut handed = 0;
        while handed < READ_TURN {
            let (read, _) = read_once(&mut stream, READ_TURN - handed);
            handed += read.expect("data is there");
        }
        stream.write_all(b"answer").await.unwrap();
        assert!(matches!(read_once(&mut stream, 1024), (Some(n), _) if n > 0));
    }

    /// While the client does not take what it was sent, nothing more is read from it, however
    /// much it sends; once it takes it and a write goes through, reading resumes.
    #[actix_web::test]
    async fn nothing_is_read_while_a_write_waits_for_the_client() {
        let (mut stream, mut client) = pair().await;
        // Write until the socket refuses: the client reads nothing.
        let chunk = vec![b'a'; 64 * 1024];
        let mut sent = 0;
        loop {
            let written = poll_fn(|cx| match Pin::new(&mut stream).poll_write(cx, &chunk) {
                Poll::Pending => Poll::Ready(None),
                other => other.map(|result| Some(result.unwrap())),
            })
            .await;
            match written {
                Some(written) => sent += written,
                None => break,
            }
        }
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(read_once(&mut stream, 1024), (None, false));

        // The client takes everything; the next write goes through, and so does the read.
        let mut taken = vec![0; sent];
        client.read_exact(&mut taken).await.unwrap();
        stream.write_all(b"!").await.unwrap();
        assert!(matches!(read_once(&mut stream, 1024), (Some(27), _)));
    }

    /// A client that reads a few bytes now and then (enough for the kernel to see it alive)
    /// cannot keep a write waiting longer than the send timeout: the write fails.
    #[actix_web::test]
    async fn a_write_refused_for_the_send_timeout_fails_though_the_client_trickles() {
        let (stream, client) = pair().await;
        let mut stream = wrap(stream.socket, Duration::from_millis(500));
        let (trickle, trickled) = read_slowly(client, 64, Duration::from_millis(50));
        let started = std::time::Instant::now();
        let data = vec![b'a'; 4 << 20];
        let (taken, result) = tokio::time::timeout(
            Duration::from_secs(10),
            write_until_failure(&mut stream, &data),
        )
        .await
        .expect("the write ends");
        let error = result.expect_err("the write fails");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        assert!(taken < 4 << 20);
        assert!(
            started.elapsed() >= Duration::from_millis(500),
            "failed after {:?}",
            started.elapsed()
        );
        assert!(
            trickled.load(Ordering::SeqCst) > 0,
            "the client was reading"
        );
        // What the service's socket still holds would take the trickle half an hour.
        trickle.abort();
    }

    /// A client that takes its answer slowly but steadily gets all of it: the timeout counts
    /// only while no write goes through.
    #[actix_web::test]
    async fn a_client_that_takes_its_answer_steadily_gets_all_of_it() {
        let (stream, client) = pair().await;
        socket2::SockRef::from(&stream.socket)
            .set_send_buffer_size(16 * 1024)
            .unwrap();
        let timeout = Duration::from_secs(1);
        let mut stream = wrap(stream.socket, timeout);
        let (reader, read) = read_slowly(client, 8 * 1024, Duration::from_millis(20));
        let started = std::time::Instant::now();
        let (taken, result) = write_until_failure(&mut stream, &vec![b'a'; 768 * 1024]).await;
        result.unwrap();
        assert_eq!(taken, 768 * 1024);
        drop(stream);
        reader.await.unwrap();
        assert_eq!(read.load(Ordering::SeqCst), 768 * 1024);
        // Delivering it took longer than the timeout: the timeout is not a total.
        assert!(started.elapsed() > timeout, "{:?}", started.elapsed());
    }
}
