//! A small least-recently-used cache of parsed models, keyed by git tree id.
//!
//! A model is a pure function of its tree, so the tree id is the key: two branches at the same
//! commit, an empty commit, and a fork that has not diverged all share one parsed model. Parsing a
//! large repository takes tens of milliseconds, reading a cached one takes a lock and a clone of
//! an `Arc`.
//!
//! The cache also remembers the tree of recent commits. A commit never changes, so that needs no
//! invalidation, and it saves reading the commit object on every snapshot of a branch that has
//! not moved (about a tenth of the CPU of a record read, measured with perf: libgit2's own object
//! cache is off, see `disable_git_object_cache`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use git2::Oid;
use hf_model::Model;

/// How many parsed models are kept.
pub(crate) const CAPACITY: usize = 8;

/// How many commits' trees are remembered.
pub(crate) const COMMIT_CAPACITY: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct ModelCache {
    /// Most recently used first.
    entries: Mutex<VecDeque<(Oid, Arc<Model>)>>,
    /// Commit id → its tree id, most recently remembered first.
    commit_trees: Mutex<VecDeque<(Oid, Oid)>>,
}

impl ModelCache {
    pub(crate) fn get(&self, tree: Oid) -> Option<Arc<Model>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let index = entries.iter().position(|(id, _)| *id == tree)?;
        let entry = entries.remove(index)?;
        let model = Arc::clone(&entry.1);
        entries.push_front(entry);
        Some(model)
    }

    pub(crate) fn insert(&self, tree: Oid, model: Arc<Model>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|(id, _)| *id != tree);
        entries.push_front((tree, model));
        entries.truncate(CAPACITY);
    }

    /// The tree of `commit`, when it was seen recently.
    pub(crate) fn tree_of(&self, commit: Oid) -> Option<Oid> {
        let trees = self.commit_trees.lock().unwrap_or_else(|e| e.into_inner());
        trees
            .iter()
            .find(|(id, _)| *id == commit)
            .map(|&(_, tree)| tree)
    }

    /// Remembers the tree of `commit`.
    pub(crate) fn remember_tree(&self, commit: Oid, tree: Oid) {
        let mut trees = self.commit_trees.lock().unwrap_or_else(|e| e.into_inner());
        if trees.iter().any(|(id, _)| *id == commit) {
            return;
        }
        trees.push_front((commit, tree));
        trees.truncate(COMMIT_CAPACITY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u8) -> Oid {
        Oid::from_bytes(&[n; 20]).unwrap_or_else(|_| Oid::zero())
    }

    #[test]
    fn remembers_recent_commit_trees_and_forgets_the_oldest() {
        let cache = ModelCache::default();
        assert_eq!(cache.tree_of(oid(1)), None);
        cache.remember_tree(oid(1), oid(101));
        assert_eq!(cache.tree_of(oid(1)), Some(oid(101)));
        for n in 2..=u8::try_from(COMMIT_CAPACITY + 1).unwrap_or(u8::MAX) {
            cache.remember_tree(oid(n), oid(n.wrapping_add(100)));
        }
        assert_eq!(cache.tree_of(oid(1)), None, "the oldest is forgotten");
        assert_eq!(cache.tree_of(oid(2)), Some(oid(102)));
    }
}
