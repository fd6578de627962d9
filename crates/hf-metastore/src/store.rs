//! The store: a bare git repository whose branches hold the metadata files.
//!
//! # Concurrency
//! `git2::Repository` is `Send` but not `Sync`, so the store never shares one between threads:
//! each call takes a repository handle from a small pool (or opens a new one) and returns it
//! when done, so a `Store` (and an `Arc<Store>`) can be used from any number of threads. Every
//! call blocks on disk I/O; async callers run it inside `spawn_blocking`.
//!
//! Writes serialize per branch in two layers. In this process, a per-branch mutex makes writers
//! take turns, so none wastes work. Across processes (or across `Store` values), the branch
//! moves by compare-and-swap: a writer that loses the race re-reads the branch and applies its
//! edit again, so no write is ever lost. Without a remote the ref is the repository's
//! (`reference_matching` with the expected old head); with one ([`Store::open_shared`]) it is the
//! remote's, the heads are read from memory and objects missing from the repository (then only
//! a cache) are fetched from the remote as they are needed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use git2::{ErrorCode, ObjectType, Odb, Oid, Repository, RepositoryInitOptions, Signature};
use hf_model::key::check_branch_id;
use hf_model::{files, new_problems, validate, Change, Model};

use crate::cache::ModelCache;
use crate::error::Error;
use crate::remote::{self, Head, Object, ObjectKind, Published, Remote};
use crate::tree;

/// How many times a write applies its edit before giving up on a branch that keeps moving.
const MAX_ATTEMPTS: usize = 1000;

/// How many idle repository handles are kept for reuse.
const POOL_SIZE: usize = 16;

/// One branch's metadata at one commit.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The branch id.
    pub branch: String,
    /// The commit id, 40 hex digits.
    pub commit: String,
    /// The commit's root tree id, 40 hex digits: the "source tree hash" in HFX module URLs.
    pub tree: String,
    /// The parsed metadata, shared by every snapshot of the same tree.
    pub model: Arc<Model>,
}

/// One branch, as listed by `GET /branches`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInfo {
    /// The branch id.
    pub branch: String,
    /// Its head commit, 40 hex digits.
    pub commit: String,
    /// Whether this is the live branch (the one the database reflects).
    pub live: bool,
}

/// The result of a committed write; what the write response reports.
#[derive(Debug, Clone)]
pub struct Written {
    /// The branch written to.
    pub branch: String,
    /// What the edit did to which item (`status` is `change.action`).
    pub change: Change,
    /// The `.json5` file of the item, relative to the metadata directory.
    pub file: String,
    /// Whether the branch did not exist and was forked from the live branch by this write.
    pub forked: bool,
    /// The branch after the write.
    pub snapshot: Arc<Snapshot>,
}

/// A commit written but not yet on its branch: the first half of a live-branch write, whose
/// database DDL must commit together with the branch move (publishing
/// [`Store::objects_added`] in the same transaction, or [`Store::advance`]).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The branch the commit is for.
    pub branch: String,
    /// The branch head the commit was built on; `None` when the branch does not exist yet (the
    /// commit then builds on the live head). Pass it to [`Store::advance`].
    pub expected_old: Option<String>,
    /// The parent commit: the branch head, or the live head for a fork.
    pub parent: String,
    /// The new commit, 40 hex digits.
    pub commit: String,
    /// The new commit's root tree, 40 hex digits.
    pub tree: String,
    /// The model before the edit (the parent's).
    pub base: Arc<Model>,
    /// The model after the edit.
    pub model: Arc<Model>,
    /// What the edit did.
    pub change: Change,
    /// The `.json5` file of the item, relative to the metadata directory.
    pub file: String,
}

/// A seed commit built on the live head without moving it ([`Store::prepare_seed`]); finish it
/// as a [`Prepared`] write is finished.
#[derive(Debug, Clone)]
pub struct PreparedSeed {
    /// The live branch.
    pub branch: String,
    /// The live head the commit was built on (a commit with an empty tree).
    pub expected_old: String,
    /// The new commit, 40 hex digits.
    pub commit: String,
    /// Its root tree, 40 hex digits.
    pub tree: String,
    /// The model before the seed (empty).
    pub base: Arc<Model>,
    /// The seeded model.
    pub model: Arc<Model>,
}

/// The metadata store. Cheap to share: wrap it in an `Arc`.
pub struct Store {
    path: PathBuf,
    live_branch: String,
    cache: ModelCache,
    pool: Mutex<Vec<Repository>>,
    branch_locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// Where branch heads and objects live when shared; `None`: in the local repository.
    remote: Option<Arc<dyn Remote>>,
    /// With a remote: every branch head and its version, kept current by the owner of the
    /// remote ([`Store::set_cached_head`], [`Store::replace_cached_heads`]) and by this store's
    /// own moves, so reading a head costs no I/O.
    heads: RwLock<HashMap<String, (Oid, i64)>>,
    /// Taken while the repository's ref of a branch is set to the cached head (see
    /// [`Store::mirror_ref`]), so two mirrors never write an older head last.
    mirror: Mutex<()>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("live_branch", &self.live_branch)
            .field("shared", &self.remote.is_some())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the repository at `path`, creating a bare one if the path is missing or an empty
    /// directory. The live branch is created with an empty first commit if it does not exist.
    /// Branch heads live in this repository: a store for one process (tests, tools).
    pub fn open_or_init(path: impl AsRef<Path>, live_branch: &str) -> Result<Store, Error> {
        Self::open_with(path.as_ref(), live_branch, None)
    }

    /// Opens a store whose branch heads and objects live in `remote`; the repository at `path`
    /// (created like [`Store::open_or_init`]'s) only caches objects, filled on demand, so it
    /// can be deleted at any time. Reads the heads once; the caller keeps them current with
    /// [`Store::set_cached_head`] and [`Store::replace_cached_heads`]. The live branch is created
    /// in the remote with an empty first commit if it does not exist.
    pub fn open_shared(
        path: impl AsRef<Path>,
        live_branch: &str,
        remote: Arc<dyn Remote>,
    ) -> Result<Store, Error> {
        Self::open_with(path.as_ref(), live_branch, Some(remote))
    }

    fn open_with(
        path: &Path,
        live_branch: &str,
        remote: Option<Arc<dyn Remote>>,
    ) -> Result<Store, Error> {
        check_branch(live_branch)?;
        let path = path.to_path_buf();
        let repo = open_repository(&path, live_branch)?;
        let store = Store {
            path,
            live_branch: live_branch.to_owned(),
            cache: ModelCache::default(),
            pool: Mutex::new(Vec::new()),
            branch_locks: Mutex::new(HashMap::new()),
            remote,
            heads: RwLock::new(HashMap::new()),
            mirror: Mutex::new(()),
        };
        if let Some(remote) = &store.remote {
            store.replace_cached_heads(&remote.heads()?);
        }
        if store.head(&repo, live_branch)?.is_none() {
            let signature = signature("hf")?;
            let empty = repo.find_tree(repo.treebuilder(None)?.write()?)?;
            let commit = repo.commit(
                None,
                &signature,
                &signature,
                "initialize metadata",
                &empty,
                &[],
            )?;
            // Another process may have initialised it meanwhile; its commit is as good as ours.
            match store.move_ref(&repo, live_branch, None, commit) {
                Ok(()) | Err(Error::Conflict { .. } | Error::Locked { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        store.give_back(repo);
        Ok(store)
    }

    /// Whether branch heads live in a shared remote rather than the local repository.
    pub fn is_shared(&self) -> bool {
        self.remote.is_some()
    }

    /// Records a branch head announced by the remote, unless a newer one (a higher version) is
    /// known already, so announcements arriving late never move a head back. Returns whether
    /// the head changed. Does nothing for a store without a remote.
    pub fn set_cached_head(&self, head: &Head) -> bool {
        if self.remote.is_none() {
            return false;
        }
        let (changed, current) = {
            let mut heads = self.heads.write().unwrap_or_else(|e| e.into_inner());
            let changed = cache_head(&mut heads, head);
            let current = heads.get(&head.branch).map(|(id, _)| *id);
            (changed, current == Some(remote::oid(&head.commit)))
        };
        // Mirrored even when another thread recorded the head first (the announcement of this
        // store's own move can beat the writer): the writer returns only once the ref is written.
        if current {
            self.mirror_ref(&head.branch);
        }
        changed
    }

    /// Points the repository's own ref of a branch at the cached head when the repository has
    /// that commit, so the cache is an ordinary git repository (`git log main` works on it, and
    /// it can be imported again). Best effort: the refs here are never read while a remote
    /// holds the heads, so a failure (a lock file, a read-only disk) is only logged.
    fn mirror_ref(&self, branch: &str) {
        let _turn = self.mirror.lock().unwrap_or_else(|e| e.into_inner());
        let head = {
            let heads = self.heads.read().unwrap_or_else(|e| e.into_inner());
            heads.get(branch).map(|(id, _)| *id)
        };
        let Some(head) = head else {
            return;
        };
        let Ok(repo) = self.take() else {
            return;
        };
        let present = repo.odb().map(|odb| odb.exists(head)).unwrap_or(false);
        if present {
            let name = format!("refs/heads/{branch}");
            if let Err(error) = repo.reference(&name, head, true, "hf: cached head") {
                tracing::debug!(branch, %error, "could not mirror a branch head into the cache");
            }
        }
        self.give_back(repo);
    }

    /// Records every branch head the remote holds (a full read), forgetting branches it no
    /// longer has. A head older than the one known is kept, as in [`Store::set_cached_head`],
    /// and so is a branch known at a version newer than any read.
    pub fn replace_cached_heads(&self, all: &[Head]) {
        if self.remote.is_none() {
            return;
        }
        let mut heads = self.heads.write().unwrap_or_else(|e| e.into_inner());
        // A head newer than everything read was set after the read began (this store's own
        // write, say): the read says nothing about that branch.
        let newest = all
            .iter()
            .map(|head| head.version)
            .max()
            .unwrap_or(i64::MAX);
        heads.retain(|branch, (_, version)| {
            *version > newest || all.iter().any(|head| head.branch == *branch)
        });
        for head in all {
            cache_head(&mut heads, head);
        }
    }

    /// The repository's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The live branch: the one the database reflects.
    pub fn live_branch(&self) -> &str {
        &self.live_branch
    }

    /// The current snapshot of a branch. Fails with `BranchNotFound`, or with the model's error
    /// naming the file and line when a file on the branch cannot be read.
    pub fn snapshot(&self, branch: &str) -> Result<Arc<Snapshot>, Error> {
        check_branch(branch)?;
        if let Some(snapshot) = self.cached_snapshot(branch) {
            return Ok(snapshot);
        }
        let repo = self.take()?;
        let result = self.snapshot_in(&repo, branch);
        self.give_back(repo);
        result
    }

    /// A shared store's snapshot of a branch whose head, tree and model are all in memory (the
    /// common case of every request), without taking a repository handle.
    fn cached_snapshot(&self, branch: &str) -> Option<Arc<Snapshot>> {
        self.remote.as_ref()?;
        let commit = {
            let heads = self.heads.read().unwrap_or_else(|e| e.into_inner());
            heads.get(branch).map(|(id, _)| *id)?
        };
        let tree = self.cache.tree_of(commit)?;
        let model = self.cache.get(tree)?;
        Some(Arc::new(Snapshot {
            branch: branch.to_owned(),
            commit: commit.to_string(),
            tree: tree.to_string(),
            model,
        }))
    }

    /// The current snapshot of the live branch.
    pub fn live(&self) -> Result<Arc<Snapshot>, Error> {
        self.snapshot(&self.live_branch)
    }

    /// The model of any tree of the repository, by its 40-hex id: HFX module URLs name a tree,
    /// and stay valid after the branch moves on.
    pub fn model_at_tree(&self, tree: &str) -> Result<Arc<Model>, Error> {
        let unknown = || Error::UnknownObject {
            kind: "tree",
            id: tree.to_owned(),
        };
        let id = parse_id(tree).ok_or_else(unknown)?;
        if let Some(model) = self.cache.get(id) {
            return Ok(model);
        }
        let repo = self.take()?;
        let result = match self
            .ensure_tree(&repo, id)
            .and_then(|()| Ok(repo.find_tree(id)?))
        {
            Ok(_) => self.model_in(&repo, id),
            Err(Error::Git(error)) if error.code() == ErrorCode::NotFound => Err(unknown()),
            Err(error) => Err(error),
        };
        self.give_back(repo);
        result
    }

    /// Every branch with its head, sorted by branch id.
    pub fn branches(&self) -> Result<Vec<BranchInfo>, Error> {
        if self.remote.is_some() {
            let heads = self.heads.read().unwrap_or_else(|e| e.into_inner());
            let mut list: Vec<BranchInfo> = heads
                .iter()
                .map(|(branch, (commit, _))| BranchInfo {
                    branch: branch.clone(),
                    commit: commit.to_string(),
                    live: *branch == self.live_branch,
                })
                .collect();
            list.sort_by(|a, b| a.branch.cmp(&b.branch));
            return Ok(list);
        }
        let repo = self.take()?;
        let result = (|| {
            let mut list = Vec::new();
            for branch in repo.branches(Some(git2::BranchType::Local))? {
                let (branch, _) = branch?;
                let (Some(name), Some(target)) = (branch.name()?, branch.get().target()) else {
                    continue;
                };
                list.push(BranchInfo {
                    branch: name.to_owned(),
                    commit: target.to_string(),
                    live: name == self.live_branch,
                });
            }
            list.sort_by(|a, b| a.branch.cmp(&b.branch));
            Ok(list)
        })();
        self.give_back(repo);
        result
    }

    /// Applies `edit` to the branch's model and commits the result as `author`.
    ///
    /// The edit gets a copy of the current model and returns the [`Change`] it made (the model's
    /// edit helpers return exactly that). A write that would add validation problems fails with
    /// [`Error::Invalid`]; a branch that does not exist is forked from the live branch. If the
    /// branch moves meanwhile, the edit is applied again to the new head, so it must not have
    /// side effects outside the model. Errors of the edit itself are returned as they are.
    pub fn write<E, F>(&self, branch: &str, author: &str, mut edit: F) -> Result<Written, E>
    where
        E: From<Error>,
        F: FnMut(&mut Model) -> Result<Change, E>,
    {
        check_branch(branch)?;
        let lock = self.branch_lock(branch);
        let _turn = lock.lock().unwrap_or_else(|e| e.into_inner());
        let repo = self.take()?;
        let result = self.write_in(&repo, branch, author, &mut edit);
        self.give_back(repo);
        result
    }

    fn write_in<E, F>(
        &self,
        repo: &Repository,
        branch: &str,
        author: &str,
        edit: &mut F,
    ) -> Result<Written, E>
    where
        E: From<Error>,
        F: FnMut(&mut Model) -> Result<Change, E>,
    {
        for _ in 0..MAX_ATTEMPTS {
            let prepared = self.prepare_in(repo, branch, author, edit)?;
            let commit = parse_id(&prepared.commit).ok_or_else(|| Error::UnknownObject {
                kind: "commit",
                id: prepared.commit.clone(),
            })?;
            match self.move_ref(repo, branch, prepared.expected_old.as_deref(), commit) {
                Ok(()) => {
                    let snapshot = Arc::new(Snapshot {
                        branch: branch.to_owned(),
                        commit: prepared.commit,
                        tree: prepared.tree,
                        model: prepared.model,
                    });
                    return Ok(Written {
                        branch: branch.to_owned(),
                        change: prepared.change,
                        file: prepared.file,
                        forked: prepared.expected_old.is_none(),
                        snapshot,
                    });
                }
                Err(Error::Conflict { .. }) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(Error::Contention {
            branch: branch.to_owned(),
            attempts: MAX_ATTEMPTS,
        }
        .into())
    }

    /// Applies `edit` and writes the commit without moving the branch: the first half of a
    /// write whose branch move must wait (for the live branch's DDL transaction). Finish it by
    /// publishing [`Store::objects_added`] with the move inside that transaction (a shared
    /// store), or with [`Store::advance`]; after a conflict, prepare again.
    pub fn prepare<E, F>(&self, branch: &str, author: &str, mut edit: F) -> Result<Prepared, E>
    where
        E: From<Error>,
        F: FnMut(&mut Model) -> Result<Change, E>,
    {
        check_branch(branch)?;
        let repo = self.take()?;
        let result = self.prepare_in(&repo, branch, author, &mut edit);
        self.give_back(repo);
        result
    }

    fn prepare_in<E, F>(
        &self,
        repo: &Repository,
        branch: &str,
        author: &str,
        edit: &mut F,
    ) -> Result<Prepared, E>
    where
        E: From<Error>,
        F: FnMut(&mut Model) -> Result<Change, E>,
    {
        let expected_old = self.head(repo, branch)?;
        let parent_id = match expected_old {
            Some(head) => head,
            None => self
                .head(repo, &self.live_branch)?
                .ok_or_else(|| Error::BranchNotFound {
                    branch: self.live_branch.clone(),
                })?,
        };
        self.ensure_commit(repo, parent_id)?;
        let parent = repo.find_commit(parent_id).map_err(Error::from)?;
        let base_tree = parent.tree().map_err(Error::from)?;
        let base = self.model_in(repo, base_tree.id())?;

        let mut model = Model::clone(&base);
        let change = edit(&mut model)?;
        let problems = new_problems(&base, &model);
        if !problems.is_empty() {
            return Err(Error::Invalid {
                branch: branch.to_owned(),
                diagnostics: problems,
            }
            .into());
        }
        let changes = files::render_changes(&base, &model).map_err(Error::from)?;
        let tree_id = tree::update_tree(repo, &base_tree, &changes)?;
        let new_tree = repo.find_tree(tree_id).map_err(Error::from)?;
        let signature = signature(author)?;
        let commit = repo
            .commit(
                None,
                &signature,
                &signature,
                &change.describe(),
                &new_tree,
                &[&parent],
            )
            .map_err(Error::from)?;
        let model = Arc::new(model);
        self.cache.insert(tree_id, Arc::clone(&model));
        Ok(Prepared {
            branch: branch.to_owned(),
            expected_old: expected_old.map(|id| id.to_string()),
            parent: parent_id.to_string(),
            commit: commit.to_string(),
            tree: tree_id.to_string(),
            base,
            model,
            file: change.file(),
            change,
        })
    }

    /// Moves `branch` to `new_commit` if its head is still `expected_old` (`None`: if the branch
    /// still does not exist). Otherwise fails with [`Error::Conflict`] and leaves the ref alone.
    pub fn advance(
        &self,
        branch: &str,
        expected_old: Option<&str>,
        new_commit: &str,
    ) -> Result<(), Error> {
        check_branch(branch)?;
        let unknown = || Error::UnknownObject {
            kind: "commit",
            id: new_commit.to_owned(),
        };
        let id = parse_id(new_commit).ok_or_else(unknown)?;
        let repo = self.take()?;
        let result = match repo.find_commit(id) {
            Ok(_) => self.move_ref(&repo, branch, expected_old, id),
            Err(error) if error.code() == ErrorCode::NotFound => Err(unknown()),
            Err(error) => Err(error.into()),
        };
        self.give_back(repo);
        result
    }

    fn advance_in(
        &self,
        repo: &Repository,
        branch: &str,
        expected_old: Option<&str>,
        new_commit: Oid,
    ) -> Result<(), Error> {
        let name = format!("refs/heads/{branch}");
        let message = format!("hf: move {branch}");
        let moved = match expected_old {
            Some(old) => {
                let old = parse_id(old).ok_or_else(|| Error::UnknownObject {
                    kind: "commit",
                    id: old.to_owned(),
                })?;
                repo.reference_matching(&name, new_commit, true, old, &message)
            }
            None => {
                // Creating a ref that must not exist yet is not atomic in libgit2 across
                // processes (its existence check precedes the ref lock), so branch creation is
                // serialised by a lock file of the repository, then checked again.
                let _guard = BranchCreationLock::take(repo.path())?;
                if head_of(repo, branch)?.is_some() {
                    Err(git2::Error::new(
                        ErrorCode::Exists,
                        git2::ErrorClass::Reference,
                        "the branch was created meanwhile",
                    ))
                } else {
                    repo.reference(&name, new_commit, false, &message)
                }
            }
        };
        match moved {
            Ok(_) => Ok(()),
            Err(error) if error.code() == ErrorCode::Locked => {
                match crate::locks::judge(repo.path(), branch) {
                    crate::locks::Verdict::Held(lock) => Err(Error::Locked { lock }),
                    crate::locks::Verdict::Retry | crate::locks::Verdict::Cleared(_) => {
                        Err(Error::Conflict {
                            branch: branch.to_owned(),
                            expected: expected_old.map(str::to_owned),
                            actual: head_of(repo, branch)?.map(|id| id.to_string()),
                        })
                    }
                }
            }
            Err(error)
                if matches!(
                    error.code(),
                    ErrorCode::Modified
                        | ErrorCode::Exists
                        | ErrorCode::Locked
                        | ErrorCode::NotFound
                ) =>
            {
                Err(Error::Conflict {
                    branch: branch.to_owned(),
                    expected: expected_old.map(str::to_owned),
                    actual: head_of(repo, branch)?.map(|id| id.to_string()),
                })
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Removes every branch ref lock file old enough to be stale (see [`crate::locks`]), as a
    /// crashed writer leaves them; returns the removed ones. Called at start-up.
    pub fn clear_stale_locks(&self) -> Result<Vec<crate::RefLock>, Error> {
        let mut cleared = Vec::new();
        if self.remote.is_some() {
            // Heads live in the remote; the repository's refs are not used.
            return Ok(cleared);
        }
        for (lock, age) in crate::locks::list(&self.path) {
            if age < crate::locks::STALE_LOCK_AGE {
                continue;
            }
            match crate::locks::judge(&self.path, &lock.branch) {
                crate::locks::Verdict::Cleared(lock) => cleared.push(lock),
                crate::locks::Verdict::Held(lock) => return Err(Error::Locked { lock }),
                crate::locks::Verdict::Retry => {}
            }
        }
        Ok(cleared)
    }

    /// The branch ref lock files older than a writer at work would hold them: what blocks
    /// writes now. Empty in normal operation.
    pub fn held_locks(&self) -> Vec<crate::RefLock> {
        if self.remote.is_some() {
            return Vec::new();
        }
        crate::locks::list(&self.path)
            .into_iter()
            .filter(|(_, age)| *age >= crate::locks::LOCK_PATIENCE)
            .map(|(lock, _)| lock)
            .collect()
    }

    /// Commits the metadata files of a directory (for example `fixtures/demo`) onto the live
    /// branch, byte for byte, if the live branch holds no files yet. Returns the new live
    /// snapshot, or `None` when the live branch already has metadata. The directory must load
    /// and validate clean.
    pub fn seed_from_dir(&self, dir: &Path, author: &str) -> Result<Option<Arc<Snapshot>>, Error> {
        let files = files::read_dir_files(dir)?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.seed_from_files(files, &name, author)
    }

    /// [`Self::seed_from_dir`] for files held in memory (paths relative to the repository root,
    /// `/`-separated), such as metadata embedded in a binary; `source` names them in the commit
    /// message. Files that are not metadata (a README) are left out.
    pub fn seed_from_files(
        &self,
        files: Vec<(String, Vec<u8>)>,
        source: &str,
        author: &str,
    ) -> Result<Option<Arc<Snapshot>>, Error> {
        let live = self.live_branch.clone();
        let lock = self.branch_lock(&live);
        let _turn = lock.lock().unwrap_or_else(|e| e.into_inner());
        let Some(seed) = self.prepare_seed(files, source, author)? else {
            return Ok(None);
        };
        let repo = self.take()?;
        let result = (|| {
            let commit = Oid::from_str(&seed.commit)?;
            self.move_ref(&repo, &live, Some(&seed.expected_old), commit)?;
            Ok(Some(Arc::new(Snapshot {
                branch: live.clone(),
                commit: seed.commit.clone(),
                tree: seed.tree.clone(),
                model: Arc::clone(&seed.model),
            })))
        })();
        self.give_back(repo);
        result
    }

    /// The first half of [`Self::seed_from_files`]: builds the seed commit on the live head
    /// without moving the branch, so a caller can move it together with the schema (the live
    /// write's one transaction). `None` when the live branch already holds metadata.
    pub fn prepare_seed(
        &self,
        files: Vec<(String, Vec<u8>)>,
        source: &str,
        author: &str,
    ) -> Result<Option<PreparedSeed>, Error> {
        let mut files = files
            .into_iter()
            .filter_map(|(path, bytes)| match files::classify(&path) {
                Ok(files::FileRole::Ignored) => None,
                _ => Some((path, bytes)),
            })
            .collect::<Vec<_>>();
        files.sort();
        let model = files::load(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())))?;
        let problems = validate(&model);
        if !problems.is_empty() {
            return Err(Error::Invalid {
                branch: self.live_branch.clone(),
                diagnostics: problems,
            });
        }
        let live = self.live_branch.clone();
        let repo = self.take()?;
        let result = (|| {
            let head = self
                .head(&repo, &live)?
                .ok_or_else(|| Error::BranchNotFound {
                    branch: live.clone(),
                })?;
            self.ensure_commit(&repo, head)?;
            let parent = repo.find_commit(head)?;
            let parent_tree = parent.tree()?;
            if !parent_tree.is_empty() {
                return Ok(None);
            }
            let base = self.model_in(&repo, parent_tree.id())?;
            let tree_id = tree::tree_of_files(&repo, &files)?;
            let tree = repo.find_tree(tree_id)?;
            let signature = signature(author)?;
            let message = format!("seed metadata from {source}");
            let commit = repo.commit(None, &signature, &signature, &message, &tree, &[&parent])?;
            let model = Arc::new(model);
            self.cache.insert(tree_id, Arc::clone(&model));
            Ok(Some(PreparedSeed {
                branch: live.clone(),
                expected_old: head.to_string(),
                commit: commit.to_string(),
                tree: tree_id.to_string(),
                base,
                model,
            }))
        })();
        self.give_back(repo);
        result
    }

    fn snapshot_in(&self, repo: &Repository, branch: &str) -> Result<Arc<Snapshot>, Error> {
        let commit_id = self
            .head(repo, branch)?
            .ok_or_else(|| Error::BranchNotFound {
                branch: branch.to_owned(),
            })?;
        let tree_id = match self.cache.tree_of(commit_id) {
            Some(tree_id) => tree_id,
            None => {
                let tree_id = self.ensure_commit(repo, commit_id)?;
                self.cache.remember_tree(commit_id, tree_id);
                tree_id
            }
        };
        let model = self.model_in(repo, tree_id)?;
        Ok(Arc::new(Snapshot {
            branch: branch.to_owned(),
            commit: commit_id.to_string(),
            tree: tree_id.to_string(),
            model,
        }))
    }

    /// The model of a tree: from the cache, or parsed once and cached.
    fn model_in(&self, repo: &Repository, tree_id: Oid) -> Result<Arc<Model>, Error> {
        if let Some(model) = self.cache.get(tree_id) {
            return Ok(model);
        }
        self.ensure_tree(repo, tree_id)?;
        let tree = repo.find_tree(tree_id)?;
        let model = Arc::new(tree::load_model(repo, &tree)?);
        self.cache.insert(tree_id, Arc::clone(&model));
        Ok(model)
    }

    fn take(&self) -> Result<Repository, Error> {
        let pooled = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match pooled {
            Some(repo) => Ok(repo),
            None => Ok(Repository::open(&self.path)?),
        }
    }

    fn give_back(&self, repo: Repository) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL_SIZE {
            pool.push(repo);
        }
    }

    fn branch_lock(&self, branch: &str) -> Arc<Mutex<()>> {
        let mut locks = self.branch_locks.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(locks.entry(branch.to_owned()).or_default())
    }

    /// The head commit of a branch, or `None` if the branch does not exist: from memory with a
    /// remote, else from the repository's ref.
    fn head(&self, repo: &Repository, branch: &str) -> Result<Option<Oid>, Error> {
        if self.remote.is_none() {
            return head_of(repo, branch);
        }
        let heads = self.heads.read().unwrap_or_else(|e| e.into_inner());
        Ok(heads.get(branch).map(|(id, _)| *id))
    }

    /// Moves a branch by compare-and-swap: the repository's ref, or with a remote, publishes the
    /// commit's new objects and moves the remote's head in one step.
    fn move_ref(
        &self,
        repo: &Repository,
        branch: &str,
        expected_old: Option<&str>,
        new_commit: Oid,
    ) -> Result<(), Error> {
        let Some(remote) = &self.remote else {
            return self.advance_in(repo, branch, expected_old, new_commit);
        };
        let old = match expected_old {
            Some(old) => {
                Some(
                    parse_id(old)
                        .map(remote::raw)
                        .ok_or_else(|| Error::UnknownObject {
                            kind: "commit",
                            id: old.to_owned(),
                        })?,
                )
            }
            None => None,
        };
        let objects = objects_added(repo, new_commit)?;
        match remote.publish(branch, old.as_ref(), &remote::raw(new_commit), &objects)? {
            Published::Moved { version } => {
                self.set_cached_head(&Head {
                    branch: branch.to_owned(),
                    commit: remote::raw(new_commit),
                    version,
                });
                Ok(())
            }
            Published::Conflict { actual } => {
                if let Some(head) = &actual {
                    self.set_cached_head(head);
                } else {
                    let mut heads = self.heads.write().unwrap_or_else(|e| e.into_inner());
                    heads.remove(branch);
                }
                Err(Error::Conflict {
                    branch: branch.to_owned(),
                    expected: expected_old.map(str::to_owned),
                    actual: actual.map(|head| remote::to_hex(&head.commit)),
                })
            }
        }
    }

    /// The objects a commit adds to its first parent (itself included), for publishing it: the
    /// parent's objects are published already. A live-branch write publishes them inside its
    /// own database transaction.
    pub fn objects_added(&self, commit: &str) -> Result<Vec<Object>, Error> {
        let id = parse_id(commit).ok_or_else(|| Error::UnknownObject {
            kind: "commit",
            id: commit.to_owned(),
        })?;
        let repo = self.take()?;
        let result = objects_added(&repo, id);
        self.give_back(repo);
        result
    }

    /// Makes sure a commit and everything its tree reaches are in the repository, fetching what
    /// is missing from the remote; returns its tree.
    fn ensure_commit(&self, repo: &Repository, commit: Oid) -> Result<Oid, Error> {
        let Some(remote) = &self.remote else {
            return Ok(repo.find_commit(commit)?.tree_id());
        };
        let odb = repo.odb()?;
        if odb.exists(commit) {
            let tree = repo.find_commit(commit)?.tree_id();
            self.ensure_tree_in(repo, &odb, remote.as_ref(), tree)?;
            return Ok(tree);
        }
        let object = remote
            .fetch(&[remote::raw(commit)])?
            .into_iter()
            .find(|o| o.id == remote::raw(commit) && o.kind == ObjectKind::Commit)
            .ok_or_else(|| Error::UnknownObject {
                kind: "commit",
                id: commit.to_string(),
            })?;
        let tree = intact(&object)
            .and_then(|()| remote::commit_tree(&object.data).ok_or_else(|| malformed(&object)))?;
        self.ensure_tree_in(repo, &odb, remote.as_ref(), tree)?;
        odb.write(ObjectType::Commit, &object.data)?;
        Ok(tree)
    }

    /// Makes sure a tree and everything it reaches are in the repository (fetching from the
    /// remote what is missing); an unknown tree is [`Error::UnknownObject`].
    fn ensure_tree(&self, repo: &Repository, tree: Oid) -> Result<(), Error> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        let odb = repo.odb()?;
        self.ensure_tree_in(repo, &odb, remote.as_ref(), tree)
    }

    /// Fetches the missing part of a tree level by level (one round trip per directory depth),
    /// then installs it deepest first, so a tree in the repository always has every object it
    /// names: finding a tree present proves its whole content is.
    fn ensure_tree_in(
        &self,
        _repo: &Repository,
        odb: &Odb<'_>,
        remote: &dyn Remote,
        tree: Oid,
    ) -> Result<(), Error> {
        if odb.exists(tree) {
            return Ok(());
        }
        let mut levels: Vec<Vec<Object>> = Vec::new();
        let mut wanted = vec![tree];
        let mut seen: HashSet<Oid> = HashSet::from([tree]);
        while !wanted.is_empty() {
            let ids: Vec<remote::ObjectId> = wanted.iter().map(|id| remote::raw(*id)).collect();
            let mut fetched: HashMap<Oid, Object> = remote
                .fetch(&ids)?
                .into_iter()
                .map(|object| (remote::oid(&object.id), object))
                .collect();
            let mut level = Vec::with_capacity(wanted.len());
            let mut next = Vec::new();
            for id in &wanted {
                let Some(object) = fetched.remove(id) else {
                    if *id == tree {
                        return Err(Error::UnknownObject {
                            kind: "tree",
                            id: tree.to_string(),
                        });
                    }
                    return Err(Error::Remote {
                        message: format!("object {id} is missing from the metadata database"),
                    });
                };
                intact(&object)?;
                if object.kind == ObjectKind::Tree {
                    for (child, _) in remote::tree_entries(&object.data)? {
                        if seen.insert(child) && !odb.exists(child) {
                            next.push(child);
                        }
                    }
                }
                level.push(object);
            }
            levels.push(level);
            wanted = next;
        }
        for level in levels.iter().rev() {
            for object in level {
                odb.write(object.kind.git(), &object.data)?;
            }
        }
        Ok(())
    }
}

/// Opens the repository at `path`, creating a bare one if the path is missing or empty.
fn open_repository(path: &Path, live_branch: &str) -> Result<Repository, Error> {
    match Repository::open(path) {
        Ok(repo) => Ok(repo),
        Err(error) if error.code() == ErrorCode::NotFound => {
            init_bare_repository(path, live_branch)
        }
        Err(error) => Err(error.into()),
    }
}

/// Creates a bare repository at `path` whose `HEAD` is `head_branch`; refuses a directory that
/// exists and is not empty ([`Error::NotARepository`]), so nothing of someone else's is mixed in.
pub(crate) fn init_bare_repository(path: &Path, head_branch: &str) -> Result<Repository, Error> {
    let empty_or_missing = std::fs::read_dir(path)
        .map(|mut entries| entries.next().is_none())
        .unwrap_or(true);
    if !empty_or_missing {
        return Err(Error::NotARepository {
            path: path.display().to_string(),
        });
    }
    let mut options = RepositoryInitOptions::new();
    options
        .bare(true)
        .initial_head(&format!("refs/heads/{head_branch}"));
    Ok(Repository::init_opts(path, &options)?)
}

/// Records `head` unless the same or a newer version of the branch is known; returns whether
/// the head commit changed.
fn cache_head(heads: &mut HashMap<String, (Oid, i64)>, head: &Head) -> bool {
    let id = remote::oid(&head.commit);
    match heads.get(&head.branch) {
        Some((_, version)) if *version >= head.version => false,
        known => {
            let changed = known.is_none_or(|(known, _)| *known != id);
            heads.insert(head.branch.clone(), (id, head.version));
            changed
        }
    }
}

fn intact(object: &Object) -> Result<(), Error> {
    if object.is_intact() {
        Ok(())
    } else {
        Err(Error::Remote {
            message: format!(
                "object {} does not match its content",
                remote::to_hex(&object.id)
            ),
        })
    }
}

fn malformed(object: &Object) -> Error {
    Error::Remote {
        message: format!("object {} is malformed", remote::to_hex(&object.id)),
    }
}

/// One object of the repository, read raw.
fn read_object(odb: &Odb<'_>, id: Oid) -> Result<Object, Error> {
    let object = odb.read(id)?;
    let kind = ObjectKind::of_git(object.kind()).ok_or_else(|| Error::Remote {
        message: format!("object {id} has an unexpected kind"),
    })?;
    Ok(Object {
        id: remote::raw(id),
        kind,
        data: object.data().to_vec(),
    })
}

/// The commit and the trees and blobs its tree has that its first parent's tree has not.
fn objects_added(repo: &Repository, commit: Oid) -> Result<Vec<Object>, Error> {
    let odb = repo.odb()?;
    let found = repo.find_commit(commit)?;
    let before = match found.parent_ids().next() {
        Some(parent) => Some(repo.find_commit(parent)?.tree_id()),
        None => None,
    };
    let mut out = vec![read_object(&odb, commit)?];
    tree_added(repo, &odb, found.tree_id(), before, &mut out)?;
    Ok(out)
}

fn tree_added(
    repo: &Repository,
    odb: &Odb<'_>,
    tree: Oid,
    before: Option<Oid>,
    out: &mut Vec<Object>,
) -> Result<(), Error> {
    if before == Some(tree) {
        return Ok(());
    }
    out.push(read_object(odb, tree)?);
    let tree = repo.find_tree(tree)?;
    let before = match before {
        Some(id) => Some(repo.find_tree(id)?),
        None => None,
    };
    for entry in tree.iter() {
        let old = before
            .as_ref()
            .and_then(|old| old.get_name_bytes(entry.name_bytes()))
            .map(|old| (old.id(), old.kind()));
        if old.map(|(id, _)| id) == Some(entry.id()) {
            continue;
        }
        match entry.kind() {
            Some(ObjectType::Tree) => {
                let old_tree = old
                    .filter(|(_, kind)| *kind == Some(ObjectType::Tree))
                    .map(|(id, _)| id);
                tree_added(repo, odb, entry.id(), old_tree, out)?;
            }
            Some(ObjectType::Blob) => out.push(read_object(odb, entry.id())?),
            _ => {}
        }
    }
    Ok(())
}

/// Whether `descendant` has `ancestor` in its history, walking parents through the repository
/// and fetching the commits it lacks from the remote (one round trip per generation), which are
/// then kept.
fn descends_via(
    repo: &Repository,
    remote: &dyn Remote,
    descendant: Oid,
    ancestor: Oid,
) -> Result<bool, Error> {
    let odb = repo.odb()?;
    let mut seen: HashSet<Oid> = HashSet::from([descendant]);
    let mut frontier = vec![descendant];
    while !frontier.is_empty() {
        if frontier.contains(&ancestor) {
            return Ok(true);
        }
        let missing: Vec<remote::ObjectId> = frontier
            .iter()
            .filter(|id| !odb.exists(**id))
            .map(|id| remote::raw(*id))
            .collect();
        let mut fetched: HashMap<Oid, Vec<Oid>> = HashMap::new();
        if !missing.is_empty() {
            for object in remote.fetch(&missing)? {
                if object.kind == ObjectKind::Commit && object.is_intact() {
                    fetched.insert(
                        remote::oid(&object.id),
                        remote::commit_parents(&object.data),
                    );
                    // A commit without its tree is fine in the repository: reading one always
                    // makes sure of its tree (`ensure_commit`).
                    odb.write(ObjectType::Commit, &object.data)?;
                }
            }
        }
        let mut next = Vec::new();
        for id in frontier {
            let parents = match fetched.remove(&id) {
                Some(parents) => parents,
                None => match repo.find_commit(id) {
                    Ok(commit) => commit.parent_ids().collect(),
                    Err(_) => Vec::new(),
                },
            };
            next.extend(parents.into_iter().filter(|p| seen.insert(*p)));
        }
        frontier = next;
    }
    Ok(false)
}

fn check_branch(branch: &str) -> Result<(), Error> {
    check_branch_id(branch).map_err(|_| Error::InvalidBranch {
        branch: branch.to_owned(),
    })
}

/// The head commit of a branch, or `None` if the branch does not exist.
fn head_of(repo: &Repository, branch: &str) -> Result<Option<Oid>, Error> {
    match repo.find_reference(&format!("refs/heads/{branch}")) {
        Ok(reference) => Ok(reference.resolve()?.target()),
        Err(error) if error.code() == ErrorCode::NotFound => Ok(None),
        Err(error) => Err(error.into()),
    }
}

fn parse_id(text: &str) -> Option<Oid> {
    let is_hex = text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit());
    is_hex.then(|| Oid::from_str(text).ok()).flatten()
}

/// The author and committer of a write: the principal's name, email `<name>@hf.local`.
/// Characters git refuses in signatures (`<`, `>`, control characters) are replaced.
fn signature(principal: &str) -> Result<Signature<'static>, Error> {
    let clean = |keep_spaces: bool| -> String {
        principal
            .chars()
            .map(|c| match c {
                '<' | '>' => '_',
                c if c.is_control() => '_',
                c if c.is_whitespace() && !keep_spaces => '_',
                c => c,
            })
            .collect::<String>()
            .trim()
            .to_owned()
    };
    let name = match clean(true) {
        name if name.is_empty() => "unknown".to_owned(),
        name => name,
    };
    let local = match clean(false) {
        local if local.is_empty() => "unknown".to_owned(),
        local => local,
    };
    Ok(Signature::now(&name, &format!("{local}@hf.local"))?)
}

impl Store {
    /// Whether `descendant` is `ancestor` or has it in its history: `/apply` of a non-live
    /// branch fast-forwards the live branch only when the branch grew out of the live head.
    pub fn descends_from(&self, descendant: &str, ancestor: &str) -> Result<bool, Error> {
        let parse = |id: &str| {
            parse_id(id).ok_or_else(|| Error::UnknownObject {
                kind: "commit",
                id: id.to_owned(),
            })
        };
        let (descendant, ancestor) = (parse(descendant)?, parse(ancestor)?);
        if descendant == ancestor {
            return Ok(true);
        }
        let repo = self.take()?;
        let result = match &self.remote {
            Some(remote) => descends_via(&repo, remote.as_ref(), descendant, ancestor),
            None => repo
                .graph_descendant_of(descendant, ancestor)
                .map_err(Error::from),
        };
        self.give_back(repo);
        result
    }
}

/// An exclusive `flock` on `<repository>/hf-branch-create.lock`, held while a branch is created.
struct BranchCreationLock {
    /// Closing it releases the lock.
    _file: std::fs::File,
}

impl BranchCreationLock {
    fn take(repository: &Path) -> Result<Self, Error> {
        use std::os::fd::AsRawFd;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(repository.join("hf-branch-create.lock"))
            .map_err(|e| {
                Error::Git(git2::Error::from_str(&format!("branch creation lock: {e}")))
            })?;
        // SAFETY: flock on a descriptor we own; the lock is released when the file is closed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(Error::Git(git2::Error::from_str(
                "branch creation lock: flock failed",
            )));
        }
        Ok(Self { _file: file })
    }
}

/// The result of [`Store::write_file`].
#[derive(Debug, Clone)]
pub struct FileWritten {
    /// The branch after the write (unchanged when a missing file was to be removed).
    pub snapshot: Arc<Snapshot>,
    /// Whether the file existed before the write.
    pub existed: bool,
    /// Whether the branch did not exist and was forked from the live branch by this write.
    pub forked: bool,
}

impl Store {
    /// Writes (`Some`) or removes (`None`) one file that is not metadata, such as a vendored
    /// module, as one commit on `branch` authored by `author` (a missing branch is forked from
    /// the live branch). The model does not change, so there is nothing to validate and no DDL;
    /// the branch still moves by compare-and-swap like every write. Removing a file that does not
    /// exist commits nothing. A path the model would read (a `.json5` file) is refused.
    pub fn write_file(
        &self,
        branch: &str,
        author: &str,
        path: &str,
        content: Option<&[u8]>,
    ) -> Result<FileWritten, Error> {
        check_branch(branch)?;
        if files::classify(path)? != files::FileRole::Ignored {
            return Err(hf_model::Error::UnexpectedFile {
                file: path.to_owned(),
            }
            .into());
        }
        let lock = self.branch_lock(branch);
        let _turn = lock.lock().unwrap_or_else(|e| e.into_inner());
        let repo = self.take()?;
        let result = self.write_file_in(&repo, branch, author, path, content);
        self.give_back(repo);
        result
    }

    fn write_file_in(
        &self,
        repo: &Repository,
        branch: &str,
        author: &str,
        path: &str,
        content: Option<&[u8]>,
    ) -> Result<FileWritten, Error> {
        for _ in 0..MAX_ATTEMPTS {
            let expected_old = self.head(repo, branch)?;
            let parent_id = match expected_old {
                Some(head) => head,
                None => {
                    self.head(repo, &self.live_branch)?
                        .ok_or_else(|| Error::BranchNotFound {
                            branch: self.live_branch.clone(),
                        })?
                }
            };
            self.ensure_commit(repo, parent_id)?;
            let parent = repo.find_commit(parent_id)?;
            let base_tree = parent.tree()?;
            let existed = base_tree.get_path(Path::new(path)).is_ok();
            if content.is_none() && !existed {
                return Ok(FileWritten {
                    snapshot: self.snapshot_in(repo, branch)?,
                    existed,
                    forked: false,
                });
            }
            let mut builder = git2::build::TreeUpdateBuilder::new();
            match content {
                Some(bytes) => {
                    let blob = repo.blob(bytes)?;
                    builder.upsert(path, blob, git2::FileMode::Blob);
                }
                None => {
                    builder.remove(path);
                }
            }
            let tree_id = builder.create_updated(repo, &base_tree)?;
            let new_tree = repo.find_tree(tree_id)?;
            let signature = signature(author)?;
            let verb = if content.is_some() { "write" } else { "delete" };
            let commit = repo.commit(
                None,
                &signature,
                &signature,
                &format!("{verb} {path}"),
                &new_tree,
                &[&parent],
            )?;
            let old = expected_old.map(|id| id.to_string());
            match self.move_ref(repo, branch, old.as_deref(), commit) {
                Ok(()) => {
                    return Ok(FileWritten {
                        snapshot: Arc::new(Snapshot {
                            branch: branch.to_owned(),
                            commit: commit.to_string(),
                            tree: tree_id.to_string(),
                            model: self.model_in(repo, tree_id)?,
                        }),
                        existed,
                        forked: expected_old.is_none(),
                    })
                }
                Err(Error::Conflict { .. }) => continue,
                Err(error) => return Err(error),
            }
        }
        Err(Error::Contention {
            branch: branch.to_owned(),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// The content of the file at `path` in the tree `tree` (40 hex digits), or `None` when the
    /// tree has no such file. An unknown tree is [`Error::UnknownObject`].
    pub fn read_file(&self, tree: &str, path: &str) -> Result<Option<Vec<u8>>, Error> {
        let unknown = || Error::UnknownObject {
            kind: "tree",
            id: tree.to_owned(),
        };
        let id = parse_id(tree).ok_or_else(unknown)?;
        let repo = self.take()?;
        let result = (|| {
            let root = match self
                .ensure_tree(&repo, id)
                .and_then(|()| Ok(repo.find_tree(id)?))
            {
                Ok(root) => root,
                Err(Error::Git(error)) if error.code() == ErrorCode::NotFound => {
                    return Err(unknown())
                }
                Err(error) => return Err(error),
            };
            let Ok(entry) = root.get_path(Path::new(path)) else {
                return Ok(None);
            };
            match entry.to_object(&repo)?.into_blob() {
                Ok(blob) => Ok(Some(blob.content().to_vec())),
                Err(_) => Ok(None),
            }
        })();
        self.give_back(repo);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(commit: u8, version: i64) -> Head {
        Head {
            branch: "main".to_owned(),
            commit: [commit; 20],
            version,
        }
    }

    #[test]
    fn a_late_announcement_never_moves_a_head_back() {
        let mut heads = HashMap::new();
        assert!(cache_head(&mut heads, &head(1, 3)));
        assert!(cache_head(&mut heads, &head(2, 5)), "newer");
        assert!(!cache_head(&mut heads, &head(1, 4)), "older: ignored");
        assert!(
            !cache_head(&mut heads, &head(2, 7)),
            "same commit, newer version"
        );
        assert!(
            !cache_head(&mut heads, &head(3, 6)),
            "older than the version just kept"
        );
        assert_eq!(heads.get("main").map(|h| h.1), Some(7));
    }
}
