//! Moving whole repositories in and out of a shared store: reading an ordinary git repository's
//! branches and objects (to import it), and writing objects and branches as an ordinary git
//! repository (to export them). The database side lives in `hf-storage`; this is the git side.

use std::collections::HashSet;
use std::path::Path;

use git2::{BranchType, ObjectType, Oid, Repository};

use crate::error::Error;
use crate::remote::{self, Object, ObjectId, ObjectKind};

/// The branches of a repository: `(valid branches with their heads, names left out)`.
pub type Branches = (Vec<(String, ObjectId)>, Vec<String>);

/// An ordinary git repository (bare or not) read for an import.
pub struct SourceRepository {
    repo: Repository,
}

impl std::fmt::Debug for SourceRepository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceRepository")
            .field("path", &self.repo.path())
            .finish()
    }
}

impl SourceRepository {
    /// Opens the repository at `dir`; [`Error::NotARepository`] when it is none.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        match Repository::open(dir) {
            Ok(repo) => Ok(Self { repo }),
            Err(error) if error.code() == git2::ErrorCode::NotFound => Err(Error::NotARepository {
                path: dir.display().to_string(),
            }),
            Err(error) => Err(error.into()),
        }
    }

    /// Every local branch whose name is a valid branch id, with its head, sorted by name.
    /// Branches with other names (`feature/x`) are reported in the second list and left out.
    pub fn branches(&self) -> Result<Branches, Error> {
        let mut kept = Vec::new();
        let mut skipped = Vec::new();
        for branch in self.repo.branches(Some(BranchType::Local))? {
            let (branch, _) = branch?;
            let Some(name) = branch.name()?.map(str::to_owned) else {
                continue;
            };
            let Some(target) = branch.get().resolve()?.target() else {
                continue;
            };
            if hf_model::key::check_branch_id(&name).is_ok() {
                kept.push((name, remote::raw(target)));
            } else {
                skipped.push(name);
            }
        }
        kept.sort();
        skipped.sort();
        Ok((kept, skipped))
    }

    /// Whether `descendant` is `ancestor` or has it in its history; `false` when the repository
    /// does not have `ancestor` at all.
    pub fn descends_from(&self, descendant: &ObjectId, ancestor: &ObjectId) -> Result<bool, Error> {
        let (descendant, ancestor) = (remote::oid(descendant), remote::oid(ancestor));
        if descendant == ancestor {
            return Ok(true);
        }
        if self.repo.find_commit(ancestor).is_err() {
            return Ok(false);
        }
        Ok(self.repo.graph_descendant_of(descendant, ancestor)?)
    }

    /// The model of a commit's tree, with the tree's id (40 hex digits): what a branch moved
    /// to this commit would hold.
    pub fn model_at(&self, commit: &ObjectId) -> Result<(hf_model::Model, String), Error> {
        let commit = self.repo.find_commit(remote::oid(commit))?;
        let tree = commit.tree()?;
        Ok((
            crate::tree::load_model(&self.repo, &tree)?,
            tree.id().to_string(),
        ))
    }

    /// Every object the given heads reach: each commit of their history, and every tree and
    /// blob of those commits.
    pub fn reachable_objects(&self, heads: &[ObjectId]) -> Result<Vec<Object>, Error> {
        let odb = self.repo.odb()?;
        let mut walk = self.repo.revwalk()?;
        for head in heads {
            walk.push(remote::oid(head))?;
        }
        let mut seen: HashSet<Oid> = HashSet::new();
        let mut out = Vec::new();
        for commit in walk {
            let commit = commit?;
            if !seen.insert(commit) {
                continue;
            }
            out.push(read(&odb, commit)?);
            let tree = self.repo.find_commit(commit)?.tree_id();
            let mut trees = vec![tree];
            while let Some(tree) = trees.pop() {
                if !seen.insert(tree) {
                    continue;
                }
                out.push(read(&odb, tree)?);
                for entry in self.repo.find_tree(tree)?.iter() {
                    match entry.kind() {
                        Some(ObjectType::Tree) => trees.push(entry.id()),
                        Some(ObjectType::Blob) if seen.insert(entry.id()) => {
                            out.push(read(&odb, entry.id())?);
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(out)
    }
}

fn read(odb: &git2::Odb<'_>, id: Oid) -> Result<Object, Error> {
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

/// A new bare repository at `dir` (missing or empty), for [`RepositoryWriter::add`] and
/// [`RepositoryWriter::finish`].
pub struct RepositoryWriter {
    repo: Repository,
}

impl std::fmt::Debug for RepositoryWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepositoryWriter")
            .field("path", &self.repo.path())
            .finish()
    }
}

impl RepositoryWriter {
    /// Creates the repository; `head_branch` becomes its `HEAD` (what `git log` and `git clone`
    /// show first). Refuses a directory that exists and is not empty.
    pub fn create(dir: &Path, head_branch: &str) -> Result<Self, Error> {
        Ok(Self {
            repo: crate::store::init_bare_repository(dir, head_branch)?,
        })
    }

    /// Writes objects (checked against their ids).
    pub fn add(&self, objects: &[Object]) -> Result<(), Error> {
        let odb = self.repo.odb()?;
        for object in objects {
            if !object.is_intact() {
                return Err(Error::Remote {
                    message: format!(
                        "object {} does not match its content",
                        remote::to_hex(&object.id)
                    ),
                });
            }
            odb.write(object.kind.git(), &object.data)?;
        }
        Ok(())
    }

    /// Points each branch at its head; every head must have been added.
    pub fn finish(self, heads: &[(String, ObjectId)]) -> Result<(), Error> {
        for (branch, head) in heads {
            self.repo.reference(
                &format!("refs/heads/{branch}"),
                remote::oid(head),
                true,
                "hf metadata export",
            )?;
        }
        Ok(())
    }
}
