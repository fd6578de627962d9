//! The shared home of a store's objects and branch heads, when it is not the local repository.
//!
//! Several service instances on different machines serve the same branches, so the branch heads
//! and every object they reach live in one shared place (PostgreSQL, implemented in
//! `hf-storage`), and each instance's repository on disk is only a cache of objects. This module
//! is the store's side of that contract: what it asks of the shared place ([`Remote`]) and the
//! plain values that cross it. Git stays the format and libgit2 computes every object here, so
//! commit ids are the same whichever instance made them.
//!
//! Invariant the store keeps: an object is published only together with the objects it needs
//! (a commit with its tree, a tree with its entries), except those its parent commit already
//! has, which were published with the parent. So any head the remote holds can be read in full.

use git2::{ObjectType, Oid};

use crate::error::Error;

/// A git object id: 20 bytes.
pub type ObjectId = [u8; 20];

/// The kind of a git object; [`ObjectKind::code`] is git's own type number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A commit.
    Commit,
    /// A tree (a directory listing).
    Tree,
    /// A blob (a file's content).
    Blob,
    /// An annotated tag.
    Tag,
}

impl ObjectKind {
    /// git's type number: 1 commit, 2 tree, 3 blob, 4 tag.
    pub fn code(self) -> i16 {
        match self {
            ObjectKind::Commit => 1,
            ObjectKind::Tree => 2,
            ObjectKind::Blob => 3,
            ObjectKind::Tag => 4,
        }
    }

    /// The kind of a git type number.
    pub fn from_code(code: i16) -> Option<Self> {
        match code {
            1 => Some(ObjectKind::Commit),
            2 => Some(ObjectKind::Tree),
            3 => Some(ObjectKind::Blob),
            4 => Some(ObjectKind::Tag),
            _ => None,
        }
    }

    pub(crate) fn git(self) -> ObjectType {
        match self {
            ObjectKind::Commit => ObjectType::Commit,
            ObjectKind::Tree => ObjectType::Tree,
            ObjectKind::Blob => ObjectType::Blob,
            ObjectKind::Tag => ObjectType::Tag,
        }
    }

    pub(crate) fn of_git(kind: ObjectType) -> Option<Self> {
        match kind {
            ObjectType::Commit => Some(ObjectKind::Commit),
            ObjectType::Tree => Some(ObjectKind::Tree),
            ObjectType::Blob => Some(ObjectKind::Blob),
            ObjectType::Tag => Some(ObjectKind::Tag),
            _ => None,
        }
    }
}

/// One git object: its id, kind and raw content (without git's `<kind> <size>\0` header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The object id.
    pub id: ObjectId,
    /// Its kind.
    pub kind: ObjectKind,
    /// Its content.
    pub data: Vec<u8>,
}

impl Object {
    /// Whether the id is the hash of the kind and content, so a damaged row is never installed.
    pub fn is_intact(&self) -> bool {
        Oid::hash_object(self.kind.git(), &self.data)
            .map(|id| id.as_bytes() == self.id)
            .unwrap_or(false)
    }
}

/// A branch head as the remote holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The branch id.
    pub branch: String,
    /// Its head commit.
    pub commit: ObjectId,
    /// Increases with every move of any branch, so a late announcement of an older head is told
    /// from a newer one.
    pub version: i64,
}

/// The outcome of [`Remote::publish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// The branch moved; its new version.
    Moved {
        /// The version of the new head.
        version: i64,
    },
    /// The branch was not at the expected head; nothing was stored.
    Conflict {
        /// The head found (`None`: no such branch).
        actual: Option<Head>,
    },
}

/// The shared home of objects and branch heads. Every method blocks; the store calls them from
/// whatever thread calls it (request handlers included), so an implementation must not need
/// the caller to be outside an async runtime.
pub trait Remote: Send + Sync {
    /// Every branch head.
    fn heads(&self) -> Result<Vec<Head>, Error>;
    /// One branch's head, `None` when there is no such branch.
    fn head(&self, branch: &str) -> Result<Option<Head>, Error>;
    /// The objects with these ids that exist (in any order; missing ones are left out).
    fn fetch(&self, ids: &[ObjectId]) -> Result<Vec<Object>, Error>;
    /// Stores `objects` and moves `branch` from `expected_old` (`None`: create it) to `new` by
    /// compare-and-swap, atomically: on a conflict nothing is stored.
    fn publish(
        &self,
        branch: &str,
        expected_old: Option<&ObjectId>,
        new: &ObjectId,
        objects: &[Object],
    ) -> Result<Published, Error>;
}

/// The tree id named by a commit's content (its first line, `tree <40 hex>`).
pub(crate) fn commit_tree(data: &[u8]) -> Option<Oid> {
    let rest = data.strip_prefix(b"tree ")?;
    let hex = std::str::from_utf8(rest.get(..40)?).ok()?;
    Oid::from_str(hex).ok()
}

/// The parent ids named by a commit's content (`parent <40 hex>` lines of its header).
pub(crate) fn commit_parents(data: &[u8]) -> Vec<Oid> {
    data.split(|b| *b == b'\n')
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.strip_prefix(b"parent "))
        .filter_map(|hex| std::str::from_utf8(hex.get(..40)?).ok())
        .filter_map(|hex| Oid::from_str(hex).ok())
        .collect()
}

/// The entries of a tree's content that name objects of the repository: `(id, is_tree)`.
/// Submodule entries (mode 160000) name commits of other repositories and are left out.
///
/// Written by hand because libgit2 parses a tree only once it is in an object database, and a
/// tree fetched from the remote is installed only after everything it names (see the store).
pub(crate) fn tree_entries(data: &[u8]) -> Result<Vec<(Oid, bool)>, Error> {
    let broken = || Error::Remote {
        message: "a stored tree object is malformed".to_owned(),
    };
    let mut entries = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest.iter().position(|b| *b == b' ').ok_or_else(broken)?;
        let mode = &rest[..space];
        let nul = rest[space..]
            .iter()
            .position(|b| *b == 0)
            .ok_or_else(broken)?
            + space;
        let id = rest.get(nul + 1..nul + 21).ok_or_else(broken)?;
        let id = Oid::from_bytes(id).map_err(|_| broken())?;
        match mode {
            b"40000" | b"040000" => entries.push((id, true)),
            b"160000" => {}
            _ => entries.push((id, false)),
        }
        rest = &rest[nul + 21..];
    }
    Ok(entries)
}

/// The 20 bytes of an id.
pub(crate) fn raw(id: Oid) -> ObjectId {
    let mut out = [0u8; 20];
    out.copy_from_slice(id.as_bytes());
    out
}

/// An id from its 20 bytes.
pub(crate) fn oid(id: &ObjectId) -> Oid {
    Oid::from_bytes(id).unwrap_or_else(|_| Oid::zero())
}

/// The 40-hex form of an id.
pub fn to_hex(id: &ObjectId) -> String {
    oid(id).to_string()
}

/// An id from its 40-hex form.
pub fn from_hex(text: &str) -> Option<ObjectId> {
    let is_hex = text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_hex {
        return None;
    }
    Oid::from_str(text).ok().map(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commit_headers_and_tree_entries() {
        let commit = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nparent 1111111111111111111111111111111111111111\nparent 2222222222222222222222222222222222222222\nauthor a <a@b> 1 +0000\n\nparent 3333333333333333333333333333333333333333\n";
        assert_eq!(
            commit_tree(commit).map(|id| id.to_string()).as_deref(),
            Some("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
        );
        let parents: Vec<String> = commit_parents(commit)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            parents,
            ["1".repeat(40), "2".repeat(40)],
            "the message is not header"
        );
        let mut tree = Vec::new();
        tree.extend_from_slice(b"100644 a.json5\0");
        tree.extend_from_slice(&[1u8; 20]);
        tree.extend_from_slice(b"40000 dir\0");
        tree.extend_from_slice(&[2u8; 20]);
        tree.extend_from_slice(b"160000 sub\0");
        tree.extend_from_slice(&[3u8; 20]);
        let entries = tree_entries(&tree).unwrap_or_default();
        assert_eq!(entries.len(), 2);
        assert!(!entries[0].1 && entries[1].1);
        assert!(tree_entries(b"100644 broken").is_err());
    }
}
