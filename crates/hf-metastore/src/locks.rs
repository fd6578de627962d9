//! Ref lock files left behind by a crash, and how they are told from a live writer's.
//!
//! git moves a branch by creating `refs/heads/<branch>.lock`, writing the new head into it and
//! renaming it over the ref. A process killed in between leaves the lock file, and every later
//! move of that branch fails ("locked") until someone deletes it. hf holds a ref lock only for
//! the duration of one libgit2 ref update, which takes milliseconds, so a lock file's age tells
//! a live writer from a dead one:
//!
//! - younger than [`LOCK_PATIENCE`]: a writer is probably at work; the caller retries as after
//!   any lost race;
//! - older than [`STALE_LOCK_AGE`]: no live writer holds a ref lock that long, so the file is
//!   removed (and logged) and the write goes on;
//! - in between, or when the file cannot be removed: the write fails with
//!   [`crate::Error::Locked`], which says which file and how old it is.
//!
//! [`crate::Store::clear_stale_locks`] applies the same rule at start-up, and
//! [`crate::Store::held_locks`] lists the locks `/status` reports.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A lock younger than this is taken to belong to a writer at work.
pub const LOCK_PATIENCE: Duration = Duration::from_secs(1);

/// A ref lock this old has no live writer: hf's writers hold one for milliseconds.
pub const STALE_LOCK_AGE: Duration = Duration::from_secs(30);

/// A ref lock file of a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefLock {
    /// The branch whose ref it locks.
    pub branch: String,
    /// The lock file, relative to the repository (`refs/heads/<branch>.lock`).
    pub file: String,
    /// Its age (from its modification time), in whole seconds.
    pub age_secs: u64,
}

/// What to do about a lock file met by a ref update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It is gone, or young: retry the update.
    Retry,
    /// It was stale and has been removed: retry the update.
    Cleared(RefLock),
    /// It stays: report it.
    Held(RefLock),
}

/// The lock file of a branch's ref.
fn lock_path(repository: &Path, branch: &str) -> PathBuf {
    repository
        .join("refs")
        .join("heads")
        .join(format!("{branch}.lock"))
}

fn age(path: &Path) -> Option<Duration> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    // A modification time in the future (clock changes) counts as brand new.
    Some(
        SystemTime::now()
            .duration_since(modified)
            .unwrap_or(Duration::ZERO),
    )
}

fn describe(branch: &str, age: Duration) -> RefLock {
    RefLock {
        branch: branch.to_owned(),
        file: format!("refs/heads/{branch}.lock"),
        age_secs: age.as_secs(),
    }
}

/// Judges the lock file of `branch` after a ref update reported the ref locked, removing it
/// when it is stale.
pub(crate) fn judge(repository: &Path, branch: &str) -> Verdict {
    let path = lock_path(repository, branch);
    let Some(age) = age(&path) else {
        return Verdict::Retry;
    };
    if age < LOCK_PATIENCE {
        return Verdict::Retry;
    }
    let lock = describe(branch, age);
    if age < STALE_LOCK_AGE {
        return Verdict::Held(lock);
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {
            tracing::warn!(
                branch,
                file = %lock.file,
                age_secs = lock.age_secs,
                "removed a stale ref lock left by a crashed writer"
            );
            Verdict::Cleared(lock)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Verdict::Retry,
        Err(error) => {
            tracing::error!(branch, file = %lock.file, %error, "cannot remove a stale ref lock");
            Verdict::Held(lock)
        }
    }
}

/// Every branch ref lock file of the repository, with its age.
pub(crate) fn list(repository: &Path) -> Vec<(RefLock, Duration)> {
    let Ok(entries) = std::fs::read_dir(repository.join("refs").join("heads")) else {
        return Vec::new();
    };
    let mut locks: Vec<(RefLock, Duration)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let branch = name.strip_suffix(".lock")?.to_owned();
            let age = age(&entry.path())?;
            Some((describe(&branch, age), age))
        })
        .collect();
    locks.sort_by(|a, b| a.0.branch.cmp(&b.0.branch));
    locks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make_lock(dir: &Path, branch: &str, age: Duration) {
        let heads = dir.join("refs").join("heads");
        std::fs::create_dir_all(&heads).unwrap();
        let file = std::fs::File::create(lock_path(dir, branch)).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
    }

    #[test]
    fn young_locks_are_retried_middle_aged_held_and_old_ones_cleared() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(judge(dir.path(), "main"), Verdict::Retry, "no lock at all");
        make_lock(dir.path(), "main", Duration::ZERO);
        assert_eq!(judge(dir.path(), "main"), Verdict::Retry);
        make_lock(dir.path(), "main", Duration::from_secs(5));
        assert!(matches!(judge(dir.path(), "main"), Verdict::Held(lock) if lock.age_secs == 5));
        assert!(lock_path(dir.path(), "main").exists(), "a held lock stays");
        make_lock(dir.path(), "main", Duration::from_secs(3600));
        assert!(
            matches!(judge(dir.path(), "main"), Verdict::Cleared(lock) if lock.file == "refs/heads/main.lock")
        );
        assert!(!lock_path(dir.path(), "main").exists());
    }
}
