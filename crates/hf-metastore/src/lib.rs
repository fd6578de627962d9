//! The git-backed metadata store: the model's JSON5 files on the branches of a bare repository.
//!
//! This crate knows nothing of HTTP or PostgreSQL (a shared store reaches its database through
//! the [`Remote`] trait). It owns:
//! - reading a branch as a [`Snapshot`] (commit, root tree, parsed [`hf_model::Model`]), parsed
//!   once per tree and cached;
//! - writes ([`Store::write`]): an edit of the model becomes one commit, built in memory (no
//!   index, no work tree) and authored by the principal; the branch moves by compare-and-swap so
//!   concurrent writers serialize and none is lost; a write to a missing branch forks it from the
//!   live branch;
//! - the two halves of a write ([`Store::prepare`], then publishing [`Store::objects_added`]
//!   with the branch move inside the caller's own transaction, or [`Store::advance`]) for the
//!   live branch, whose move must commit together with its database DDL;
//! - sharing ([`Store::open_shared`]): branch heads and objects in a [`Remote`] (PostgreSQL,
//!   implemented by `hf-storage`), the repository on disk only a cache filled on demand;
//! - seeding a fresh repository from a directory ([`Store::seed_from_dir`]);
//! - ref lock files left by a crashed writer ([`locks`]): cleared when provably stale,
//!   reported otherwise.
//!
//! See the [`store`](Store) docs for how one `Store` serves many threads.

#![warn(missing_docs)]

mod cache;
mod error;
pub mod locks;
pub mod remote;
mod store;
pub mod transfer;
mod tree;

pub use error::{Error, ErrorKind};
pub use locks::RefLock;
pub use remote::{Head, Object, ObjectId, ObjectKind, Published, Remote};
pub use store::{BranchInfo, FileWritten, Prepared, PreparedSeed, Snapshot, Store, Written};

/// Turns off libgit2's object cache, for the whole process.
///
/// libgit2 keeps the objects it reads in a process-wide cache of up to 256 MiB, and every
/// metadata write makes new commits and trees that stay there: measured with `hf serve`, a
/// service answering a steady stream of field updates (constant metadata size) grew by 22-27 MB
/// of RSS every 10 seconds (6 600-9 600 writes), and stayed at 53-54 MB with the cache off.
/// The store caches parsed models by tree itself, so the object cache buys it little. A long
/// running service calls this once at start-up; it is not done by [`Store::open_or_init`]
/// because it changes libgit2 for every other user in the process too.
pub fn disable_git_object_cache() {
    git2::opts::enable_caching(false);
}
