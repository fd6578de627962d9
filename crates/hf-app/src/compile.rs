//! Compiling screens for the service: bounded, timed, isolated and cached.
//!
//! Compiling is CPU work on input any principal may send. At most one compile per core runs at a
//! time, and a caller gives up after the compiler's time limit ([`COMPILE_TIME_LIMIT`] unless
//! the host sets another). Where a compile runs is the host's choice ([`Isolation`]):
//!
//! - **on a thread** of this process with a large stack (`hf_hfx::compile_on_thread_with`): for
//!   tools and tests. A thread cannot be stopped, so a compile that outlives its caller keeps
//!   its core and its place until it ends of its own accord;
//! - **in a child process** (what `hf serve` does): the host's own executable run as a compile
//!   worker ([`run_worker`]), which reads the screen as JSON on stdin and writes the result as
//!   JSON on stdout. At the time limit the process is killed, so its core and its place come back
//!   at once, and whatever the compiler does (an input on which the TypeScript parser
//!   backtracks for minutes, a crash, memory it keeps) ends with the process. A process adds
//!   about 5–6 ms to a compile, and the module cache keeps most compiles from happening twice.
//!
//! Compiled modules are cached under `hf_hfx::cache_key`, a hash of everything the output
//! depends on, in one bounded cache per [`crate::App`]: compiling is a pure function of its
//! inputs, so every request may share results.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hf_hfx::{CompileOptions, CompileOutput};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::shed::WorkQueue;
use crate::{Error, Result};

/// How long a caller waits for a compile (queueing included) before [`Error::Timeout`], unless
/// the host sets another limit ([`Compiler::new`]).
pub const COMPILE_TIME_LIMIT: Duration = Duration::from_secs(10);
/// Most compiled results the module cache keeps.
const CACHE_ENTRIES: usize = 512;
/// Most bytes of JavaScript the module cache keeps.
const CACHE_BYTES: usize = 64 * 1024 * 1024;
/// Most bytes a compile worker may answer with: far above any module a request body's screen
/// compiles to, so only a worker gone wrong meets it.
const WORKER_ANSWER_LIMIT: u64 = 256 * 1024 * 1024;

/// Compiles one screen now, exactly as `POST /hfx/compile` does (default options, on a thread
/// with a large stack) but without the service's limiter, time limit and cache: for one-shot
/// tools such as `hf compile`, which compile one screen and exit.
pub fn compile_screen(source: &str, sidecar: Option<&str>) -> Result<CompileOutput> {
    compile_on_thread(source, sidecar, &CompileOptions::default())
}

fn compile_on_thread(
    source: &str,
    sidecar: Option<&str>,
    options: &CompileOptions,
) -> Result<CompileOutput> {
    hf_hfx::compile_on_thread_with(source, sidecar, options)
        .map_err(|error| Error::Internal(format!("the HFX compiler failed: {error}")))
}

/// Where the compiles of a [`Compiler`] run (see the module comment).
#[derive(Debug, Clone, Default)]
pub enum Isolation {
    /// On a thread of this process.
    #[default]
    Thread,
    /// In a process of its own per compile: `program` with `args`, a compile worker that reads
    /// one screen on stdin and answers on stdout ([`run_worker`]); killed at the time limit.
    Process {
        /// The worker executable (for `hf serve`, its own executable).
        program: PathBuf,
        /// Its arguments (for `hf serve`, the hidden `compile-worker` subcommand).
        args: Vec<String>,
    },
}

/// What a compile worker reads on stdin: the inputs of one compile.
#[derive(Debug, Serialize, Deserialize)]
struct WorkerInput {
    source: String,
    sidecar: Option<String>,
    options: CompileOptions,
    /// The caller's time limit in whole seconds, which bounds the worker's CPU time too.
    seconds: u64,
}

/// The compile worker: reads one screen as JSON from `input`, compiles it on a thread with a
/// large stack, and writes the [`CompileOutput`] as JSON to `output`. A host's executable runs
/// this when [`Isolation::Process`] starts it; its exit ends the compile.
///
/// The worker runs as background work (it inherits the short time slice of the request thread
/// that started it) and limits its own CPU time to a second past the caller's time limit, so a
/// worker whose service died before it could kill it still ends.
pub fn run_worker(input: impl Read, mut output: impl Write) -> Result<()> {
    let input: WorkerInput = serde_json::from_reader(input)
        .map_err(|error| Error::Internal(format!("the compile worker's input: {error}")))?;
    crate::background::run_as_background_work();
    limit_cpu_seconds(input.seconds.saturating_add(1));
    let compiled = compile_on_thread(&input.source, input.sidecar.as_deref(), &input.options)?;
    serde_json::to_writer(&mut output, &compiled)
        .and_then(|()| output.flush().map_err(serde_json::Error::io))
        .map_err(|error| Error::Internal(format!("the compile worker's answer: {error}")))
}

/// Ends the calling process (SIGXCPU, then SIGKILL) once it has used `seconds` of CPU time. A
/// failure leaves the process unbounded, which the service's own kill still covers.
fn limit_cpu_seconds(seconds: u64) {
    let limit = libc::rlimit {
        rlim_cur: seconds,
        rlim_max: seconds,
    };
    // SAFETY: `setrlimit` reads the limit, which lives until it returns.
    let failed = unsafe { libc::setrlimit(libc::RLIMIT_CPU, &limit) } != 0;
    if failed {
        let error = std::io::Error::last_os_error();
        let _ = writeln!(std::io::stderr(), "compile worker: no CPU limit: {error}");
    }
}

/// The compile limiter and the module cache of one application.
#[derive(Debug)]
pub struct Compiler {
    permits: WorkQueue,
    cache: Mutex<ModuleCache>,
    isolation: Isolation,
    time_limit: Duration,
}

impl Default for Compiler {
    fn default() -> Self {
        Self::new(Isolation::Thread, COMPILE_TIME_LIMIT)
    }
}

impl Compiler {
    /// A compiler whose compiles run where `isolation` says, one per core at a time, each
    /// caller waiting at most `time_limit` (queueing included).
    pub fn new(isolation: Isolation, time_limit: Duration) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            permits: WorkQueue::new("compiles", cores, 2 * cores, time_limit),
            cache: Mutex::new(ModuleCache::default()),
            isolation,
            time_limit,
        }
    }

    /// Compiles one compile per core at a time, within the time limit; when two per core
    /// already wait, [`Error::Overloaded`] at once. On a thread, the permit travels with the
    /// compile, so a compile that outlives its caller still counts; in a process, the process is
    /// killed at the time limit and its permit given back.
    pub async fn compile(
        &self,
        source: String,
        sidecar: Option<String>,
        options: CompileOptions,
    ) -> Result<CompileOutput> {
        let deadline = tokio::time::Instant::now() + self.time_limit;
        let timed_out = || Error::Timeout {
            what: "Compiling",
            seconds: self.limit_seconds(),
        };
        let permit = self.permits.enter().await?;
        match &self.isolation {
            Isolation::Thread => {
                let work = tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    compile_on_thread(&source, sidecar.as_deref(), &options)
                });
                tokio::time::timeout_at(deadline, work)
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(|error| {
                        Error::Internal(format!("the HFX compile task failed: {error}"))
                    })?
            }
            Isolation::Process { program, args } => {
                let input = WorkerInput {
                    source,
                    sidecar,
                    options,
                    seconds: self.limit_seconds(),
                };
                let outcome =
                    tokio::time::timeout_at(deadline, compile_in_process(program, args, &input))
                        .await;
                // Dropping the worker's future at the deadline killed the process
                // (`kill_on_drop`): the permit goes back with it.
                drop(permit);
                outcome.map_err(|_| timed_out())?
            }
        }
    }

    /// The time limit in whole seconds, at least one: what a timeout reports and what bounds a
    /// worker's CPU time.
    fn limit_seconds(&self) -> u64 {
        self.time_limit.as_secs().max(1)
    }

    /// [`Compiler::compile`] through the module cache.
    pub async fn compile_cached(
        &self,
        source: &str,
        sidecar: Option<&str>,
        options: CompileOptions,
    ) -> Result<Arc<CompileOutput>> {
        let key = hf_hfx::cache_key(source, sidecar, &options);
        if let Some(hit) = self.lock_cache().get(&key) {
            return Ok(hit);
        }
        let output = Arc::new(
            self.compile(source.to_owned(), sidecar.map(str::to_owned), options)
                .await?,
        );
        self.lock_cache().insert(key, Arc::clone(&output));
        Ok(output)
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, ModuleCache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs one compile in a worker process: sends `input` on its stdin and reads its answer from
/// stdout. The process is killed when this future is dropped (the caller's deadline).
async fn compile_in_process(
    program: &std::path::Path,
    args: &[String],
    input: &WorkerInput,
) -> Result<CompileOutput> {
    let failed = |what: &str, error: &dyn std::fmt::Display| {
        Error::Internal(format!(
            "the HFX compile process ({}): {what}: {error}",
            program.display()
        ))
    };
    let request = serde_json::to_vec(input).map_err(|error| failed("its input", &error))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| failed("cannot start it", &error))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(failed("its pipes", &"not opened"));
    };
    // Written and read at once: a worker that stops reading (it crashed) must not leave the
    // write waiting on a full pipe, and the read ends when the worker closes its output.
    let send = async move {
        let written = stdin.write_all(&request).await;
        drop(stdin);
        written
    };
    let receive = async move {
        let mut answer = Vec::new();
        stdout
            .take(WORKER_ANSWER_LIMIT)
            .read_to_end(&mut answer)
            .await
            .map(|_| answer)
    };
    let (sent, answer) = tokio::join!(send, receive);
    let status = child
        .wait()
        .await
        .map_err(|error| failed("waiting for it", &error))?;
    if !status.success() {
        return Err(failed("it failed", &status));
    }
    sent.map_err(|error| failed("sending the screen", &error))?;
    let answer = answer.map_err(|error| failed("reading its answer", &error))?;
    serde_json::from_slice(&answer).map_err(|error| failed("its answer", &error))
}

/// Compile results by cache key, bounded in entries and bytes; the oldest entry goes first.
#[derive(Debug, Default)]
struct ModuleCache {
    entries: HashMap<String, Arc<CompileOutput>>,
    order: VecDeque<String>,
    bytes: usize,
}

impl ModuleCache {
    fn get(&self, key: &str) -> Option<Arc<CompileOutput>> {
        self.entries.get(key).cloned()
    }

    fn insert(&mut self, key: String, output: Arc<CompileOutput>) {
        let size = cost(&output);
        if size > CACHE_BYTES || self.entries.contains_key(&key) {
            return;
        }
        self.bytes += size;
        self.order.push_back(key.clone());
        self.entries.insert(key, output);
        while self.entries.len() > CACHE_ENTRIES || self.bytes > CACHE_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(evicted) = self.entries.remove(&oldest) {
                self.bytes = self.bytes.saturating_sub(cost(&evicted));
            }
        }
    }
}

/// What an entry counts against the cache's byte bound.
fn cost(output: &CompileOutput) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    let diagnostics: usize = output
        .diagnostics
        .iter()
        .map(|d| d.message.len() + d.frame.len())
        .sum();
    text(&output.js) + text(&output.sidecar_js) + diagnostics + 256
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A stand-in compile worker: `sh -c SCRIPT MARKER ARGS...`, findable by its marker.
    fn shell_worker(script: &str, marker: &str, args: &[&str]) -> Isolation {
        let mut all = vec!["-c".to_owned(), script.to_owned(), marker.to_owned()];
        all.extend(args.iter().map(|arg| (*arg).to_owned()));
        Isolation::Process {
            program: "/bin/sh".into(),
            args: all,
        }
    }

    /// How many live processes have `marker` in their command line.
    fn processes_with(marker: &str) -> usize {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return 0;
        };
        entries
            .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
            .filter(|cmdline| String::from_utf8_lossy(cmdline).contains(marker))
            .count()
    }

    fn marker() -> String {
        format!("hf-compile-test-{}", uuid::Uuid::new_v4())
    }

    const SCREEN: &str = "<script>let n = 1;</script>\n<p>{n}</p>\n";

    #[test]
    fn the_worker_answers_what_a_compile_on_a_thread_answers() {
        let cases = [
            (SCREEN, None),
            ("<p>{</p>", None),
            (
                "<script>import { f } from './sidecar';</script>\n<p>{f()}</p>\n",
                Some("export const f = (): number => 1;\n"),
            ),
            (
                "<script>import { f } from './sidecar';</script>\n<p>{f()}</p>\n",
                Some("export const f = (: number => 1;\n"),
            ),
        ];
        for (source, sidecar) in cases {
            let input = serde_json::to_vec(&WorkerInput {
                source: source.to_owned(),
                sidecar: sidecar.map(str::to_owned),
                options: CompileOptions::default(),
                seconds: 10,
            })
            .unwrap();
            let mut answer = Vec::new();
            run_worker(input.as_slice(), &mut answer).unwrap();
            let answered: CompileOutput = serde_json::from_slice(&answer).unwrap();
            assert_eq!(answered, compile_screen(source, sidecar).unwrap());
        }
        let error = run_worker(&b"[\"<p>x</p>\"]"[..], &mut Vec::new()).unwrap_err();
        assert!(matches!(error, Error::Internal(_)), "{error:?}");
    }

    #[tokio::test]
    async fn a_compile_process_past_the_time_limit_is_killed_and_its_place_given_back() {
        let marker = marker();
        let expected = compile_screen(SCREEN, None).unwrap();
        let answer = serde_json::to_string(&expected).unwrap();
        let flag = std::env::temp_dir().join(&marker);
        // Spins (as the TypeScript parser did on a hostile sidecar) until the flag file exists,
        // then answers like a worker.
        let script = "if [ -e \"$2\" ]; then cat > /dev/null; printf '%s' \"$1\"; \
                      else while :; do :; done; fi";
        let flag_arg = flag.to_string_lossy().into_owned();
        let limit = Duration::from_millis(400);
        let compiler = Compiler::new(shell_worker(script, &marker, &[&answer, &flag_arg]), limit);

        // Every place taken by a compile that never ends.
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let started = Instant::now();
        let stuck =
            (0..cores).map(|_| compiler.compile(SCREEN.into(), None, CompileOptions::default()));
        for outcome in futures_util::future::join_all(stuck).await {
            assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
        }
        assert!(started.elapsed() < Duration::from_secs(5));

        // Each was killed at the limit...
        let deadline = Instant::now() + Duration::from_secs(5);
        while processes_with(&marker) > 0 {
            assert!(
                Instant::now() < deadline,
                "a compile process outlived its time limit"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // ...and its place is free: the next compile runs at once.
        std::fs::write(&flag, b"").unwrap();
        let outcome = compiler
            .compile(SCREEN.into(), None, CompileOptions::default())
            .await;
        std::fs::remove_file(&flag).unwrap();
        assert_eq!(outcome.unwrap(), expected);
    }

    #[tokio::test]
    async fn a_compile_process_that_dies_or_answers_nonsense_is_an_internal_error() {
        let marker = marker();
        for script in [
            "cat > /dev/null; kill -9 $$",
            "cat > /dev/null; exit 3",
            "cat > /dev/null; echo '{\"js\":'",
            "exit 0",
        ] {
            let compiler = Compiler::new(shell_worker(script, &marker, &[]), COMPILE_TIME_LIMIT);
            let outcome = compiler
                .compile(SCREEN.into(), None, CompileOptions::default())
                .await;
            assert!(
                matches!(outcome, Err(Error::Internal(_))),
                "{script}: {outcome:?}"
            );
        }
        let missing = Compiler::new(
            Isolation::Process {
                program: std::env::temp_dir().join(&marker),
                args: Vec::new(),
            },
            COMPILE_TIME_LIMIT,
        );
        let outcome = missing
            .compile(SCREEN.into(), None, CompileOptions::default())
            .await;
        assert!(matches!(outcome, Err(Error::Internal(_))), "{outcome:?}");
    }

    #[test]
    fn the_cache_stays_within_its_bounds() {
        let mut cache = ModuleCache::default();
        let output = |js: &str| {
            Arc::new(CompileOutput {
                js: Some(js.to_owned()),
                sidecar_js: None,
                content_hash: String::new(),
                diagnostics: Vec::new(),
                queries: Vec::new(),
                screen_imports: Vec::new(),
                vendor_imports: Vec::new(),
            })
        };
        for i in 0..CACHE_ENTRIES + 10 {
            cache.insert(format!("k{i}"), output("x"));
        }
        assert_eq!(cache.entries.len(), CACHE_ENTRIES);
        assert!(cache.get("k0").is_none());
        assert!(cache.get(&format!("k{}", CACHE_ENTRIES + 9)).is_some());
        cache.insert("huge".into(), output(&"x".repeat(CACHE_BYTES + 1)));
        assert!(cache.get("huge").is_none());
        assert!(cache.bytes <= CACHE_BYTES);
    }
}
