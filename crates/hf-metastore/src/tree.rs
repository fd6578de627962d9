//! Moving between git trees and models: reading a tree's metadata files, and building the tree
//! of a changed model in memory (no index, no work tree).

use git2::build::TreeUpdateBuilder;
use git2::{FileMode, ObjectType, Oid, Repository, Tree, TreeWalkMode, TreeWalkResult};
use hf_model::files::{self, FileRole, MAX_FILE_BYTES};
use hf_model::Model;

use crate::error::Error;

/// Parses the metadata files of a tree into a model.
///
/// Entries under a directory starting with `.` and files that are not metadata are skipped; a
/// blob over the size limit is refused from its header, before its content is read.
pub(crate) fn load_model(repo: &Repository, tree: &Tree<'_>) -> Result<Model, Error> {
    let mut blobs: Vec<(String, Oid)> = Vec::new();
    let mut classify_error = None;
    tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        let name = entry.name().unwrap_or("");
        if name.starts_with('.') {
            return TreeWalkResult::Skip;
        }
        if entry.kind() != Some(ObjectType::Blob) {
            return TreeWalkResult::Ok;
        }
        let path = format!("{dir}{name}");
        match files::classify(&path) {
            Ok(FileRole::Ignored) => TreeWalkResult::Ok,
            Ok(_) => {
                blobs.push((path, entry.id()));
                TreeWalkResult::Ok
            }
            Err(error) => {
                classify_error = Some(error);
                TreeWalkResult::Abort
            }
        }
    })
    .or_else(|error| {
        // Aborting the walk on purpose reports a "user" error; the real one is kept above.
        if classify_error.is_some() {
            Ok(())
        } else {
            Err(error)
        }
    })?;
    if let Some(error) = classify_error {
        return Err(error.into());
    }
    let odb = repo.odb()?;
    let mut contents = Vec::with_capacity(blobs.len());
    for (path, id) in blobs {
        let (size, _) = odb.read_header(id)?;
        if size > MAX_FILE_BYTES {
            return Err(hf_model::Error::TooLarge {
                file: path,
                size,
                limit: MAX_FILE_BYTES,
            }
            .into());
        }
        let blob = repo.find_blob(id)?;
        contents.push((path, blob.content().to_vec()));
    }
    Ok(files::load(contents)?)
}

/// Writes the blobs of the changed files and returns the id of `base` with those files replaced
/// or removed. Only changed paths are touched; every other entry keeps its blob.
pub(crate) fn update_tree(
    repo: &Repository,
    base: &Tree<'_>,
    changes: &[files::FileChange],
) -> Result<Oid, Error> {
    let mut builder = TreeUpdateBuilder::new();
    for change in changes {
        match &change.content {
            Some(text) => {
                let blob = repo.blob(text.as_bytes())?;
                builder.upsert(change.path.as_str(), blob, FileMode::Blob);
            }
            None => {
                builder.remove(change.path.as_str());
            }
        }
    }
    Ok(builder.create_updated(repo, base)?)
}

/// The id of a tree holding exactly these files, built on the empty tree.
pub(crate) fn tree_of_files(repo: &Repository, files: &[(String, Vec<u8>)]) -> Result<Oid, Error> {
    let empty = repo.find_tree(repo.treebuilder(None)?.write()?)?;
    let mut builder = TreeUpdateBuilder::new();
    for (path, bytes) in files {
        let blob = repo.blob(bytes)?;
        builder.upsert(path.as_str(), blob, FileMode::Blob);
    }
    Ok(builder.create_updated(repo, &empty)?)
}
