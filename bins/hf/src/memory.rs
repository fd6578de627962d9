//! Gives freed heap memory back to the operating system after bursts.
//!
//! glibc's allocator keeps memory a burst freed (many connections, large compiles, a login
//! flood) inside its arenas, one per thread that allocated, so the resident size stays at the
//! burst's peak long after the work is done. `malloc_trim(0)` walks every arena and returns
//! their free pages. It is cheap when there is nothing to return, so `hf serve` calls it on a
//! timer from a thread of its own instead of guessing when a burst has ended.

use std::time::Duration;

/// Starts the trimming thread; `interval` zero turns it off.
pub fn trim_every(interval: Duration) {
    if interval.is_zero() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("hf-memory-trim".to_owned())
        .spawn(move || loop {
            std::thread::sleep(interval);
            trim();
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "could not start the memory trimming thread");
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: malloc_trim only inspects and shrinks the allocator's own free lists; it has no
    // preconditions and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
