//! The one integration-test binary of hf-metastore, one module per feature.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails by panicking"
)]

mod concurrency;
mod prepare;
mod read;
mod write;

use std::path::PathBuf;

use git2::{Oid, Repository};
use hf_metastore::Store;
use tempfile::TempDir;

/// The repository's `fixtures/demo` directory.
pub fn demo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/demo")
}

/// A fresh store in a temporary directory, its live branch `main` seeded with the demo.
pub fn demo_store() -> (TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_or_init(dir.path().join("metadata"), "main").unwrap();
    store.seed_from_dir(&demo_dir(), "admin").unwrap().unwrap();
    (dir, store)
}

/// The repository behind a store, to inspect what was committed.
pub fn repo(store: &Store) -> Repository {
    Repository::open_bare(store.path()).unwrap()
}

/// The head commit of a branch.
pub fn head(store: &Store, branch: &str) -> Oid {
    repo(store)
        .find_reference(&format!("refs/heads/{branch}"))
        .unwrap()
        .target()
        .unwrap()
}

/// The text of a file at a commit, or `None` if it is absent.
pub fn file_at(store: &Store, commit: Oid, path: &str) -> Option<String> {
    let repo = repo(store);
    let tree = repo.find_commit(commit).unwrap().tree().unwrap();
    let entry = tree.get_path(std::path::Path::new(path)).ok()?;
    let blob = repo.find_blob(entry.id()).unwrap();
    Some(String::from_utf8(blob.content().to_vec()).unwrap())
}

/// The paths a commit changed relative to its single parent, sorted.
pub fn changed_paths(store: &Store, commit: Oid) -> Vec<String> {
    let repo = repo(store);
    let commit = repo.find_commit(commit).unwrap();
    assert_eq!(commit.parent_count(), 1);
    let parent = commit.parent(0).unwrap().tree().unwrap();
    let diff = repo
        .diff_tree_to_tree(Some(&parent), Some(&commit.tree().unwrap()), None)
        .unwrap();
    let mut paths: Vec<String> = diff
        .deltas()
        .map(|d| {
            let file = d.new_file().path().or(d.old_file().path()).unwrap();
            file.to_string_lossy().into_owned()
        })
        .collect();
    paths.sort();
    paths
}
