//! Compiling screens for the service: bounded, timed and cached.
//!
//! Compiling is CPU work. It runs on the blocking pool, at most one compile per core at a time,
//! each on a thread of its own with a large stack (`hf_hfx::compile_on_thread_with`), and a
//! caller gives up after [`COMPILE_TIME_LIMIT`]. Compiled modules are cached under
//! `hf_hfx::cache_key`, a hash of everything the output depends on, in one bounded cache per
//! [`crate::App`]: compiling is a pure function of its inputs, so every request may share results.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hf_hfx::{CompileOptions, CompileOutput};

use crate::shed::WorkQueue;
use crate::{Error, Result};

/// How long a caller waits for a compile (queueing included) before [`Error::Timeout`].
pub const COMPILE_TIME_LIMIT: Duration = Duration::from_secs(10);
/// Most compiled results the module cache keeps.
const CACHE_ENTRIES: usize = 512;
/// Most bytes of JavaScript the module cache keeps.
const CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Compiles one screen now, exactly as `POST /hfx/compile` does (default options, on a thread
/// with a large stack) but without the service's limiter, time limit and cache: for one-shot
/// tools such as `hf compile`, which compile one screen and exit.
pub fn compile_screen(source: &str, sidecar: Option<&str>) -> Result<CompileOutput> {
    hf_hfx::compile_on_thread_with(source, sidecar, &CompileOptions::default())
        .map_err(|error| Error::Internal(format!("the HFX compiler failed: {error}")))
}

/// The compile limiter and the module cache of one application.
#[derive(Debug)]
pub struct Compiler {
    permits: WorkQueue,
    cache: Mutex<ModuleCache>,
}

impl Default for Compiler {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            permits: WorkQueue::new("compiles", cores, 2 * cores, COMPILE_TIME_LIMIT),
            cache: Mutex::new(ModuleCache::default()),
        }
    }
}

impl Compiler {
    /// Compiles on the blocking pool, one compile per core at a time, within
    /// [`COMPILE_TIME_LIMIT`]; when two per core already wait, [`Error::Overloaded`] at once.
    /// The permit travels with the compile, so a compile that outlives its caller still counts.
    pub async fn compile(
        &self,
        source: String,
        sidecar: Option<String>,
        options: CompileOptions,
    ) -> Result<CompileOutput> {
        let deadline = tokio::time::Instant::now() + COMPILE_TIME_LIMIT;
        let permit = self.permits.enter().await?;
        let work = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            hf_hfx::compile_on_thread_with(&source, sidecar.as_deref(), &options)
        });
        tokio::time::timeout_at(deadline, work)
            .await
            .map_err(|_| Error::Timeout {
                what: "Compiling",
                seconds: COMPILE_TIME_LIMIT.as_secs(),
            })?
            .map_err(|error| Error::Internal(format!("the HFX compile task failed: {error}")))?
            .map_err(|error| Error::Internal(format!("the HFX compiler failed: {error}")))
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
    use super::*;

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
