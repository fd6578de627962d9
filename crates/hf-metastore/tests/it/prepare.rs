//! The two halves of a live write: prepare (commit written, ref untouched) and advance (ref
//! moved by compare-and-swap).

use hf_metastore::Error;
use hf_model::{Module, Screen};

use super::{demo_store, head, repo};

#[test]
fn prepare_writes_a_commit_without_moving_the_branch() {
    let (_dir, store) = demo_store();
    let before = head(&store, "main");
    let prepared = store
        .prepare::<Error, _>("main", "admin", |m| {
            Ok(m.create_module(Module::new("erp", "ERP"))?)
        })
        .unwrap();
    assert_eq!(
        prepared.expected_old.as_deref(),
        Some(before.to_string().as_str())
    );
    assert_eq!(prepared.parent, before.to_string());
    assert_eq!(prepared.file, "erp/module.json5");
    assert!(prepared.base.module("erp").is_none());
    assert!(prepared.model.module("erp").is_some());
    assert_eq!(head(&store, "main"), before, "the ref did not move");
    let repo = repo(&store);
    let commit = repo
        .find_commit(git2::Oid::from_str(&prepared.commit).unwrap())
        .unwrap();
    assert_eq!(commit.tree_id().to_string(), prepared.tree);

    store
        .advance("main", prepared.expected_old.as_deref(), &prepared.commit)
        .unwrap();
    assert_eq!(head(&store, "main").to_string(), prepared.commit);
    assert!(store.live().unwrap().model.module("erp").is_some());
}

#[test]
fn a_conflicting_advance_is_refused() {
    let (_dir, store) = demo_store();
    let first = store
        .prepare::<Error, _>("main", "a", |m| {
            Ok(m.create_screen("crm", Screen::new("one", "<p/>"))?)
        })
        .unwrap();
    let second = store
        .prepare::<Error, _>("main", "b", |m| {
            Ok(m.create_screen("crm", Screen::new("two", "<p/>"))?)
        })
        .unwrap();
    assert_eq!(first.expected_old, second.expected_old);
    store
        .advance("main", first.expected_old.as_deref(), &first.commit)
        .unwrap();
    match store.advance("main", second.expected_old.as_deref(), &second.commit) {
        Err(Error::Conflict {
            branch,
            expected,
            actual,
        }) => {
            assert_eq!(branch, "main");
            assert_eq!(expected, second.expected_old);
            assert_eq!(actual.as_deref(), Some(first.commit.as_str()));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(head(&store, "main").to_string(), first.commit);

    // Prepared again on the new head, the second write goes through and keeps the first.
    let retry = store
        .prepare::<Error, _>("main", "b", |m| {
            Ok(m.create_screen("crm", Screen::new("two", "<p/>"))?)
        })
        .unwrap();
    store
        .advance("main", retry.expected_old.as_deref(), &retry.commit)
        .unwrap();
    let screens = &store.live().unwrap().model.modules["crm"].screens;
    assert!(screens.contains_key("one") && screens.contains_key("two"));
}

#[test]
fn a_prepared_fork_creates_the_branch_once() {
    let (_dir, store) = demo_store();
    let prepared = store
        .prepare::<Error, _>("draft", "a", |m| {
            Ok(m.create_module(Module::new("erp", "ERP"))?)
        })
        .unwrap();
    assert_eq!(prepared.expected_old, None);
    assert_eq!(prepared.parent, head(&store, "main").to_string());
    assert!(matches!(
        store.snapshot("draft"),
        Err(Error::BranchNotFound { .. })
    ));
    store.advance("draft", None, &prepared.commit).unwrap();
    assert!(matches!(
        store.advance("draft", None, &prepared.commit),
        Err(Error::Conflict {
            expected: None,
            actual: Some(_),
            ..
        })
    ));
    assert!(matches!(
        store.advance("main", None, &"f".repeat(40)),
        Err(Error::UnknownObject { kind: "commit", .. })
    ));
    assert!(matches!(
        store.advance("../x", None, &prepared.commit),
        Err(Error::InvalidBranch { .. })
    ));
}

#[test]
fn descends_from_follows_history() {
    let (_dir, store) = demo_store();
    let live = head(&store, "main").to_string();
    store
        .write::<Error, _>("feature", "a", |m| {
            Ok(m.create_module(Module::new("erp", "ERP"))?)
        })
        .unwrap();
    let feature = head(&store, "feature").to_string();
    assert!(store.descends_from(&feature, &live).unwrap());
    assert!(store.descends_from(&live, &live).unwrap());
    assert!(!store.descends_from(&live, &feature).unwrap());
    assert!(matches!(
        store.descends_from("nope", &live),
        Err(Error::UnknownObject { kind: "commit", .. })
    ));
}
