//! `hf-load`: the load generator of the fault benchmarks (`bench/faults.py`).
//!
//! wrk measures one latency distribution for every answer and offers load in a closed loop (a
//! connection sends its next request only after the last answer), so it can neither time the
//! refusals of a flood apart from the few requests served, nor offer a fixed rate to a service
//! that slows down. This tool does both, with little CPU of its own (one thread, raw HTTP/1.1):
//!
//! - closed loop (`--connections C`): C connections each send a request as soon as the last
//!   one was answered;
//! - open loop (`--rate R`): requests are due at a fixed rate whatever the answers; each takes
//!   an idle keep-alive connection or opens one (up to `--connections`), and its latency is
//!   counted from the moment it was due, so a service that falls behind is charged for the wait
//!   (no coordinated omission).
//!
//! It prints one JSON line per `--report-every` interval and one for the whole run: answers per
//! status, how many carried `Retry-After`, latency percentiles per status, transport errors.
//!
//! Usage: `hf-load --url http://127.0.0.1:8080/path [--method POST --body JSON]
//! [--header 'Name: value']... [--seconds 10] [--connections 64] [--rate 8000]
//! [--sources 127.0.0.10,127.0.0.11] [--report-every 60] [--close]`

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;

/// Requests due but still waiting for a connection, beyond which new ones are dropped (and
/// counted) instead of piling up without bound in the generator.
const MAX_BACKLOG: usize = 100_000;

fn main() -> ExitCode {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("hf-load: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("hf-load: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(Arc::new(options)));
    ExitCode::SUCCESS
}

/// What to send, how, and for how long.
#[derive(Debug)]
struct Options {
    target: SocketAddr,
    request: Vec<u8>,
    seconds: f64,
    connections: usize,
    /// Requests per second for an open loop; `None` is a closed loop.
    rate: Option<f64>,
    sources: Vec<IpAddr>,
    report_every: f64,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut url = None;
        let mut method = "GET".to_owned();
        let mut body = None;
        let mut headers = Vec::new();
        let mut seconds = 10.0;
        let mut connections = 64;
        let mut rate = None;
        let mut sources = Vec::new();
        let mut report_every = 0.0;
        let mut close = false;
        while let Some(flag) = args.next() {
            if flag == "--close" {
                close = true;
                continue;
            }
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = |value: &str| {
                value
                    .parse::<f64>()
                    .map_err(|_| format!("{flag}: not a number: {value}"))
            };
            match flag.as_str() {
                "--url" => url = Some(value),
                "--method" => method = value,
                "--body" => body = Some(value),
                "--header" => headers.push(value),
                "--seconds" => seconds = number(&value)?,
                "--connections" => connections = number(&value)? as usize,
                "--rate" => rate = Some(number(&value)?),
                "--report-every" => report_every = number(&value)?,
                "--sources" => {
                    for source in value.split(',') {
                        sources.push(
                            source
                                .parse()
                                .map_err(|_| format!("--sources: not an address: {source}"))?,
                        );
                    }
                }
                _ => return Err(format!("unknown option {flag}")),
            }
        }
        let url = url.ok_or("--url is required")?;
        let rest = url
            .strip_prefix("http://")
            .ok_or("--url must start with http://")?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let target: SocketAddr = authority
            .parse()
            .map_err(|_| format!("--url: the host must be ip:port, not {authority}"))?;
        let path = if path.is_empty() { "/" } else { path };
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n");
        for header in &headers {
            request.push_str(header);
            request.push_str("\r\n");
        }
        if close {
            request.push_str("Connection: close\r\n");
        }
        if let Some(body) = &body {
            request.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ));
        } else {
            request.push_str("\r\n");
        }
        Ok(Self {
            target,
            request: request.into_bytes(),
            seconds,
            connections: connections.max(1),
            rate,
            sources,
            report_every,
        })
    }
}

async fn run(options: Arc<Options>) {
    let stats = Arc::new(Recorder::default());
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(options.seconds);
    let reporter = (options.report_every > 0.0).then(|| {
        let stats = Arc::clone(&stats);
        let every = Duration::from_secs_f64(options.report_every);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                interval.tick().await;
                let report = stats.take_interval();
                println!("{}", report.json("interval", every.as_secs_f64()));
            }
        })
    });
    let unsent = match options.rate {
        Some(rate) => open_loop(&options, &stats, rate, deadline).await,
        None => {
            closed_loop(&options, &stats, deadline).await;
            0
        }
    };
    if let Some(reporter) = reporter {
        reporter.abort();
    }
    let mut total = stats.take_total();
    total.unsent = unsent;
    println!("{}", total.json("total", started.elapsed().as_secs_f64()));
}

/// `connections` clients, each sending its next request when the last is answered.
async fn closed_loop(options: &Arc<Options>, stats: &Arc<Recorder>, deadline: Instant) {
    let opened = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..options.connections)
        .map(|_| {
            let options = Arc::clone(options);
            let stats = Arc::clone(stats);
            let opened = Arc::clone(&opened);
            tokio::spawn(async move {
                let mut connection = None;
                while Instant::now() < deadline {
                    let started = Instant::now();
                    let outcome = exchange(&options, &opened, &mut connection).await;
                    if outcome.is_err() {
                        // Do not spin on a refused connect.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    stats.record(outcome, started.elapsed());
                }
            })
        })
        .collect();
    for client in clients {
        let _ = client.await;
    }
}

/// Requests due at `rate` per second until `deadline`, each on an idle connection or a new one
/// (at most `connections` open); returns how many were dropped because too many were already
/// waiting for a connection.
async fn open_loop(
    options: &Arc<Options>,
    stats: &Arc<Recorder>,
    rate: f64,
    deadline: Instant,
) -> u64 {
    let idle: Arc<Mutex<Vec<Connection>>> = Arc::default();
    let slots = Arc::new(Semaphore::new(options.connections));
    let opened = Arc::new(AtomicUsize::new(0));
    let backlog = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut unsent = 0;
    let mut index: u64 = 0;
    let mut in_flight = Vec::new();
    let mut sweep_at = 4096;
    loop {
        let due = started + Duration::from_secs_f64(index as f64 / rate);
        if due >= deadline {
            break;
        }
        let now = Instant::now();
        if due > now {
            tokio::time::sleep_until(due.into()).await;
        }
        index += 1;
        if backlog.load(Ordering::Relaxed) >= MAX_BACKLOG {
            unsent += 1;
            continue;
        }
        backlog.fetch_add(1, Ordering::Relaxed);
        let (options, stats, idle, slots, opened, backlog) = (
            Arc::clone(options),
            Arc::clone(stats),
            Arc::clone(&idle),
            Arc::clone(&slots),
            Arc::clone(&opened),
            Arc::clone(&backlog),
        );
        in_flight.push(tokio::spawn(async move {
            let Ok(_slot) = slots.acquire().await else {
                return;
            };
            backlog.fetch_sub(1, Ordering::Relaxed);
            let mut connection = idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let outcome = exchange(&options, &opened, &mut connection).await;
            stats.record(outcome, due.elapsed());
            if let Some(connection) = connection {
                idle.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(connection);
            }
        }));
        if in_flight.len() >= sweep_at {
            in_flight.retain(|task| !task.is_finished());
            // Sweep again when the list has doubled, not on every request while many are
            // unfinished (that would scan them all at every request).
            sweep_at = (2 * in_flight.len()).max(4096);
        }
    }
    for task in in_flight {
        let _ = task.await;
    }
    unsent
}

/// A keep-alive connection and what it has read past the last answer.
struct Connection {
    stream: TcpStream,
    buffer: Vec<u8>,
}

/// What one answer said.
struct Answer {
    status: u16,
    retry_after: bool,
}

/// Sends the request on `connection` (opening one first if there is none) and reads the
/// answer; leaves the connection in place if it can carry another request. A kept connection
/// the service has closed meanwhile (its keep-alive ran out) fails before any answer: the
/// request is then sent once more on a new connection, as HTTP clients do.
async fn exchange(
    options: &Options,
    opened: &AtomicUsize,
    connection: &mut Option<Connection>,
) -> io::Result<Answer> {
    if let Some(mut kept) = connection.take() {
        if let Ok((answer, keep)) = send(options, &mut kept).await {
            if keep {
                *connection = Some(kept);
            }
            return Ok(answer);
        }
    }
    let mut fresh = Connection {
        stream: connect(options, opened.fetch_add(1, Ordering::Relaxed)).await?,
        buffer: Vec::with_capacity(4096),
    };
    let (answer, keep) = send(options, &mut fresh).await?;
    if keep {
        *connection = Some(fresh);
    }
    Ok(answer)
}

async fn send(options: &Options, connection: &mut Connection) -> io::Result<(Answer, bool)> {
    connection.stream.write_all(&options.request).await?;
    read_answer(connection).await
}

async fn connect(options: &Options, index: usize) -> io::Result<TcpStream> {
    let socket = match options.target {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    if !options.sources.is_empty() {
        let source = options.sources[index % options.sources.len()];
        socket.bind(SocketAddr::new(source, 0))?;
    }
    let stream = socket.connect(options.target).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Reads one answer: its head, then a body framed by `Content-Length`, chunks, or the end of
/// the connection. Returns whether the connection may carry another request.
async fn read_answer(connection: &mut Connection) -> io::Result<(Answer, bool)> {
    let head_end = loop {
        if let Some(end) = find(&connection.buffer, b"\r\n\r\n") {
            break end + 4;
        }
        read_more(connection).await?;
    };
    let head = String::from_utf8_lossy(&connection.buffer[..head_end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no status line"))?;
    let header = |name: &str| {
        head.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let retry_after = header("retry-after").is_some();
    let mut keep = header("connection") != Some("close");
    if let Some(length) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        while connection.buffer.len() < head_end + length {
            read_more(connection).await?;
        }
        connection.buffer.drain(..head_end + length);
    } else if header("transfer-encoding") == Some("chunked") {
        let end = loop {
            if let Some(end) = find(&connection.buffer[head_end - 2..], b"\r\n0\r\n\r\n") {
                break head_end - 2 + end + 7;
            }
            read_more(connection).await?;
        };
        connection.buffer.drain(..end);
    } else {
        while connection.stream.read_buf(&mut connection.buffer).await? > 0 {}
        keep = false;
    }
    Ok((
        Answer {
            status,
            retry_after,
        },
        keep,
    ))
}

async fn read_more(connection: &mut Connection) -> io::Result<()> {
    if connection.stream.read_buf(&mut connection.buffer).await? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before the answer ended",
        ));
    }
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Outcomes of one interval and of the whole run.
#[derive(Default)]
struct Recorder {
    interval: Mutex<Tally>,
    total: Mutex<Tally>,
}

impl Recorder {
    fn record(&self, outcome: io::Result<Answer>, latency: Duration) {
        for tally in [&self.interval, &self.total] {
            tally
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .add(&outcome, latency);
        }
    }

    fn take_interval(&self) -> Tally {
        std::mem::take(&mut *self.interval.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn take_total(&self) -> Tally {
        std::mem::take(&mut *self.total.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[derive(Default)]
struct Tally {
    /// Latencies in microseconds, per status.
    latencies: BTreeMap<u16, Vec<u32>>,
    retry_after: BTreeMap<u16, u64>,
    errors: BTreeMap<String, u64>,
    unsent: u64,
}

impl Tally {
    fn add(&mut self, outcome: &io::Result<Answer>, latency: Duration) {
        match outcome {
            Ok(answer) => {
                let micros = u32::try_from(latency.as_micros()).unwrap_or(u32::MAX);
                self.latencies
                    .entry(answer.status)
                    .or_default()
                    .push(micros);
                if answer.retry_after {
                    *self.retry_after.entry(answer.status).or_default() += 1;
                }
            }
            Err(error) => {
                *self
                    .errors
                    .entry(format!("{:?}", error.kind()))
                    .or_default() += 1
            }
        }
    }

    /// One JSON line: `{"kind", "seconds", "statuses": {status: count}, "per_second":
    /// {status: rate}, "retry_after": {status: count}, "latency_ms": {status: {p50, p90, p99,
    /// max}}, "errors": {kind: count}, "unsent"}`.
    fn json(mut self, kind: &str, seconds: f64) -> String {
        let mut statuses = Vec::new();
        let mut rates = Vec::new();
        let mut latencies = Vec::new();
        for (status, values) in &mut self.latencies {
            values.sort_unstable();
            let at = |fraction: f64| {
                let index = ((fraction * values.len() as f64) as usize).min(values.len() - 1);
                f64::from(values[index]) / 1000.0
            };
            statuses.push(format!("\"{status}\": {}", values.len()));
            rates.push(format!(
                "\"{status}\": {:.1}",
                values.len() as f64 / seconds
            ));
            latencies.push(format!(
                "\"{status}\": {{\"p50\": {:.2}, \"p90\": {:.2}, \"p99\": {:.2}, \"max\": {:.2}}}",
                at(0.5),
                at(0.9),
                at(0.99),
                at(1.0)
            ));
        }
        let retry_after: Vec<_> = self
            .retry_after
            .iter()
            .map(|(status, count)| format!("\"{status}\": {count}"))
            .collect();
        let errors: Vec<_> = self
            .errors
            .iter()
            .map(|(kind, count)| format!("\"{kind}\": {count}"))
            .collect();
        format!(
            "{{\"kind\": \"{kind}\", \"seconds\": {seconds:.2}, \"statuses\": {{{}}}, \"per_second\": {{{}}}, \"retry_after\": {{{}}}, \"latency_ms\": {{{}}}, \"errors\": {{{}}}, \"unsent\": {}}}",
            statuses.join(", "),
            rates.join(", "),
            retry_after.join(", "),
            latencies.join(", "),
            errors.join(", "),
            self.unsent
        )
    }
}
