//! Concurrent writers on one branch: all writes land, history stays linear.

use std::sync::Arc;

use hf_metastore::{Error, Store};
use hf_model::{Field, FieldKind, QualifiedName, ScalarType};

use super::{demo_store, head, repo};

fn field(key: &str) -> Field {
    let kind = FieldKind::Scalar {
        field_type: ScalarType::Integer,
        required: false,
        unique: false,
        indexed: false,
        values: Vec::new(),
        default_value: None,
    };
    Field::new(key, key, kind)
}

fn assert_linear_history(store: &Store, branch: &str, commits: usize) {
    let repo = repo(store);
    let mut commit = repo.find_commit(head(store, branch)).unwrap();
    for _ in 0..commits {
        assert_eq!(commit.parent_count(), 1);
        commit = commit.parent(0).unwrap();
    }
    assert_eq!(commit.message(), Some("seed metadata from demo"));
}

#[test]
fn fifty_concurrent_writers_on_one_branch_all_land() {
    let (_dir, store) = demo_store();
    let store = Arc::new(store);
    let deal = QualifiedName::new("crm", "opportunity");
    let threads: Vec<_> = (0..50)
        .map(|i| {
            let store = Arc::clone(&store);
            let deal = deal.clone();
            std::thread::spawn(move || {
                let key = format!("extra_{i}");
                store
                    .write::<Error, _>("main", &format!("writer{i}"), |m| {
                        Ok(m.create_field(&deal, field(&key))?)
                    })
                    .unwrap()
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let live = store.live().unwrap();
    let fields = &live.model.object(&deal).unwrap().fields;
    for i in 0..50 {
        assert!(
            fields.contains_key(&format!("extra_{i}")),
            "extra_{i} was lost"
        );
    }
    assert_linear_history(&store, "main", 50);
}

#[test]
fn writers_through_separate_stores_race_by_compare_and_swap() {
    // Two `Store` values share no in-process lock, like two server processes: only the ref
    // compare-and-swap serializes them, and the loser re-applies its edit.
    let (dir, first) = demo_store();
    let second = Store::open_or_init(dir.path().join("metadata"), "main").unwrap();
    let stores = [Arc::new(first), Arc::new(second)];
    let deal = QualifiedName::new("crm", "opportunity");
    let threads: Vec<_> = (0..20)
        .map(|i| {
            let store = Arc::clone(&stores[i % 2]);
            let deal = deal.clone();
            std::thread::spawn(move || {
                let key = format!("raced_{i}");
                store
                    .write::<Error, _>("feature", "racer", |m| {
                        Ok(m.create_field(&deal, field(&key))?)
                    })
                    .unwrap()
            })
        })
        .collect();
    let forks = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|w| w.forked)
        .count();
    assert_eq!(forks, 1, "exactly one write created the branch");
    let fields = &stores[0]
        .snapshot("feature")
        .unwrap()
        .model
        .object(&deal)
        .unwrap()
        .fields
        .clone();
    for i in 0..20 {
        assert!(
            fields.contains_key(&format!("raced_{i}")),
            "raced_{i} was lost"
        );
    }
    assert_linear_history(&stores[1], "feature", 20);
}
