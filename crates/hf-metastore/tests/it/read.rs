//! Opening, seeding and reading: snapshots, branches, the cache, broken branches.

use std::sync::Arc;

use git2::{FileMode, Signature};
use hf_metastore::{Error, Store};
use hf_model::files;

use super::{demo_dir, demo_store, file_at, head, repo};

#[test]
fn a_fresh_store_has_an_empty_live_branch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metadata");
    let store = Store::open_or_init(&path, "main").unwrap();
    assert!(repo(&store).is_bare());
    let live = store.live().unwrap();
    assert_eq!(live.branch, "main");
    assert!(live.model.modules.is_empty());
    // The empty tree's well-known id.
    assert_eq!(live.tree, "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
    assert_eq!(live.commit.len(), 40);
    let branches = store.branches().unwrap();
    assert_eq!(branches.len(), 1);
    assert!(branches[0].live);

    // Reopening keeps the same head.
    let again = Store::open_or_init(&path, "main").unwrap();
    assert_eq!(again.live().unwrap().commit, live.commit);
    assert!(matches!(
        Store::open_or_init(&path, "bad..name"),
        Err(Error::InvalidBranch { .. })
    ));

    // A directory with other content is not taken over.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("x"), "x").unwrap();
    assert!(matches!(
        Store::open_or_init(&other, "main"),
        Err(Error::NotARepository { .. })
    ));
}

#[test]
fn seeding_commits_the_directory_byte_for_byte() {
    let (_dir, store) = demo_store();
    let live = store.live().unwrap();
    let expected = files::load_dir(&demo_dir()).unwrap();
    assert_eq!(*live.model, expected);
    let head = head(&store, "main");
    for (path, bytes) in files::read_dir_files(&demo_dir()).unwrap() {
        let committed = file_at(&store, head, &path).unwrap();
        assert_eq!(committed.as_bytes(), bytes.as_slice(), "{path}");
    }
    assert_eq!(
        file_at(&store, head, "README.md"),
        None,
        "non-metadata files are not seeded"
    );
    let repo = repo(&store);
    let commit = repo.find_commit(head).unwrap();
    assert_eq!(commit.author().name(), Some("admin"));
    assert_eq!(commit.message(), Some("seed metadata from demo"));
    // The live branch has metadata now: a second seed does nothing.
    assert!(store.seed_from_dir(&demo_dir(), "admin").unwrap().is_none());
}

/// Seeding from files held in memory (the binary's embedded demo) commits the same tree as
/// seeding from the directory, README left out.
#[test]
fn seeding_from_memory_commits_the_same_tree_as_from_the_directory() {
    let (_from_dir, store) = demo_store();
    let from_dir = store.live().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let in_memory = hf_metastore::Store::open_or_init(dir.path().join("metadata"), "main").unwrap();
    let mut files = hf_model::files::read_dir_files(&demo_dir()).unwrap();
    files.push(("README.md".to_owned(), b"# not metadata".to_vec()));
    files.reverse();
    let seeded = in_memory
        .seed_from_files(files, "the demo", "admin")
        .unwrap()
        .unwrap();
    assert_eq!(seeded.tree, from_dir.tree);
    let repository = repo(&in_memory);
    let commit = repository
        .find_commit(git2::Oid::from_str(&seeded.commit).unwrap())
        .unwrap();
    assert_eq!(commit.message(), Some("seed metadata from the demo"));
}

#[test]
fn snapshots_are_parsed_once_per_tree() {
    let (_dir, store) = demo_store();
    let first = store.live().unwrap();
    let second = store.live().unwrap();
    assert!(Arc::ptr_eq(&first.model, &second.model));

    // A second store on the same repository starts cold and parses again.
    let cold = Store::open_or_init(store.path(), "main").unwrap();
    let third = cold.live().unwrap();
    assert!(!Arc::ptr_eq(&first.model, &third.model));
    assert_eq!(first.model, third.model);

    // Old trees stay readable by id after the branch moves on.
    let old_tree = first.tree.clone();
    store
        .write::<Error, _>("main", "admin", |m| Ok(m.delete_screen("crm", "counter")?))
        .unwrap();
    assert_ne!(store.live().unwrap().tree, old_tree);
    assert!(Arc::ptr_eq(
        &store.model_at_tree(&old_tree).unwrap(),
        &first.model
    ));
    assert!(matches!(
        store.model_at_tree("abc"),
        Err(Error::UnknownObject { kind: "tree", .. })
    ));
    assert!(matches!(
        store.model_at_tree(&"0".repeat(40)),
        Err(Error::UnknownObject { kind: "tree", .. })
    ));
}

#[test]
fn branch_names_are_checked_and_missing_branches_reported() {
    let (_dir, store) = demo_store();
    for bad in ["", "../x", "a..b", "-x", "x.lock", "a/b", "HEAD"] {
        assert!(
            matches!(store.snapshot(bad), Err(Error::InvalidBranch { .. })),
            "{bad}"
        );
    }
    assert!(matches!(
        store.snapshot("nothing"),
        Err(Error::BranchNotFound { branch }) if branch == "nothing"
    ));
}

#[test]
fn a_broken_file_fails_reads_of_its_branch_only() {
    let (_dir, store) = demo_store();
    // Commit a hand-edited file with a syntax error on line 3 to branch `broken`.
    let repo = repo(&store);
    let live = repo.find_commit(super::head(&store, "main")).unwrap();
    let blob = repo
        .blob(b"{\n  label: 'CRM',\n  label2 'x',\n}\n")
        .unwrap();
    let mut update = git2::build::TreeUpdateBuilder::new();
    update.upsert("crm/module.json5", blob, FileMode::Blob);
    let tree = repo
        .find_tree(update.create_updated(&repo, &live.tree().unwrap()).unwrap())
        .unwrap();
    let who = Signature::now("someone", "someone@example.com").unwrap();
    let commit = repo
        .commit(None, &who, &who, "break it", &tree, &[&live])
        .unwrap();
    repo.reference("refs/heads/broken", commit, false, "test")
        .unwrap();

    let error = store.snapshot("broken").unwrap_err();
    match &error {
        Error::Model(hf_model::Error::Syntax { file, line, .. }) => {
            assert_eq!(file, "crm/module.json5");
            assert_eq!(*line, Some(3));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        error.to_string().starts_with("crm/module.json5:3:"),
        "{error}"
    );
    // Writes to the broken branch fail the same way and commit nothing.
    let written =
        store.write::<Error, _>(
            "broken",
            "admin",
            |m| Ok(m.delete_screen("crm", "counter")?),
        );
    assert!(matches!(
        written,
        Err(Error::Model(hf_model::Error::Syntax { .. }))
    ));
    assert_eq!(super::head(&store, "broken"), commit);
    // The live branch is unaffected.
    assert!(store.live().is_ok());
}

#[test]
fn a_store_is_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Store>();
    shareable::<hf_metastore::Snapshot>();
}
