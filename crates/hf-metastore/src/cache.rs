//! A small least-recently-used cache of parsed models, keyed by git tree id.
//!
//! A model is a pure function of its tree, so the tree id is the key: two branches at the same
//! commit, an empty commit, and a fork that has not diverged all share one parsed model. Parsing a
//! large repository takes tens of milliseconds, reading a cached one takes a lock and a clone of
//! an `Arc`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use git2::Oid;
use hf_model::Model;

/// How many parsed models are kept.
pub(crate) const CAPACITY: usize = 8;

#[derive(Debug, Default)]
pub(crate) struct ModelCache {
    /// Most recently used first.
    entries: Mutex<VecDeque<(Oid, Arc<Model>)>>,
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
}
