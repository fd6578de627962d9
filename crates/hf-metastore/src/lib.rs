//! The git-backed metadata store: the model's JSON5 files on the branches of a bare repository.
//!
//! This crate knows nothing of HTTP or PostgreSQL. It owns:
//! - reading a branch as a [`Snapshot`] (commit, root tree, parsed [`hf_model::Model`]), parsed
//!   once per tree and cached;
//! - writes ([`Store::write`]): an edit of the model becomes one commit, built in memory (no
//!   index, no work tree) and authored by the principal; the branch moves by compare-and-swap so
//!   concurrent writers serialize and none is lost; a write to a missing branch forks it from the
//!   live branch;
//! - the two halves of a write ([`Store::prepare`], [`Store::advance`]) for the live branch,
//!   whose ref may only move once the database DDL has committed;
//! - seeding a fresh repository from a directory ([`Store::seed_from_dir`]).
//!
//! See the [`store`](Store) docs for how one `Store` serves many threads.

#![warn(missing_docs)]

mod cache;
mod error;
mod store;
mod tree;

pub use error::{Error, ErrorKind};
pub use store::{BranchInfo, Prepared, Snapshot, Store, Written};
