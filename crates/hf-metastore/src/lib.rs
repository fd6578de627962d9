//! The git-backed metadata store: JSON5 files on branches.
