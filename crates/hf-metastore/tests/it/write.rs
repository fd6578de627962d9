//! Writes on the live branch and on feature branches, and the files they leave in git.

use hf_metastore::Error;
use hf_model::{
    files, Action, Field, FieldKind, Module, Object, QualifiedName, ScalarType, Target,
};

use super::{changed_paths, demo_store, file_at, head, repo};

fn deal() -> QualifiedName {
    QualifiedName::new("crm", "opportunity")
}

fn text_field(key: &str) -> Field {
    let kind = FieldKind::Scalar {
        field_type: ScalarType::Text,
        required: false,
        unique: false,
        indexed: true,
        values: Vec::new(),
        default_value: None,
    };
    Field::new(key, "Source", kind)
}

#[test]
fn a_live_write_is_one_commit_touching_one_file() {
    let (_dir, store) = demo_store();
    let before = head(&store, "main");
    let written = store
        .write::<Error, _>("main", "alice", |m| {
            Ok(m.create_field(&deal(), text_field("source"))?)
        })
        .unwrap();
    assert_eq!(written.branch, "main");
    assert_eq!(written.change.action, Action::Created);
    assert_eq!(written.file, "crm/objects/opportunity.json5");
    assert!(!written.forked);

    let after = head(&store, "main");
    assert_eq!(written.snapshot.commit, after.to_string());
    let repo = repo(&store);
    let commit = repo.find_commit(after).unwrap();
    assert_eq!(commit.parent_id(0).unwrap(), before);
    assert_eq!(commit.author().name(), Some("alice"));
    assert_eq!(commit.author().email(), Some("alice@hf.local"));
    assert_eq!(commit.committer().name(), Some("alice"));
    assert_eq!(
        commit.message(),
        Some("create field crm.opportunity.source")
    );
    assert_eq!(written.snapshot.tree, commit.tree_id().to_string());

    // Exactly the object's file changed, and it is the canonical rendering of the object.
    assert_eq!(
        changed_paths(&store, after),
        ["crm/objects/opportunity.json5"]
    );
    let text = file_at(&store, after, "crm/objects/opportunity.json5").unwrap();
    let object = &written.snapshot.model.modules["crm"].objects["opportunity"];
    assert_eq!(text, files::render_object(object));
    assert!(text.contains("    source: {\n      label: \"Source\",\n      fieldKind: \"scalar\",\n      fieldType: \"text\",\n      indexed: true,\n    },\n"));
    // Hand-written files that were not edited keep their comments.
    let account = file_at(&store, after, "crm/objects/account.json5").unwrap();
    assert!(account.starts_with("// A company we sell to."));
    // The next read sees the write.
    assert!(store
        .live()
        .unwrap()
        .model
        .object(&deal())
        .unwrap()
        .fields
        .contains_key("source"));
}

#[test]
fn a_write_to_a_missing_branch_forks_it_from_live() {
    let (_dir, store) = demo_store();
    let live_head = head(&store, "main");
    let written = store
        .write::<Error, _>("feature-1", "bob", |m| {
            Ok(m.create_module(Module::new("erp", "ERP"))?)
        })
        .unwrap();
    assert!(written.forked);
    assert_eq!(written.file, "erp/module.json5");
    let feature_head = head(&store, "feature-1");
    assert_eq!(
        repo(&store)
            .find_commit(feature_head)
            .unwrap()
            .parent_id(0)
            .unwrap(),
        live_head
    );
    assert_eq!(changed_paths(&store, feature_head), ["erp/module.json5"]);
    assert_eq!(
        file_at(&store, feature_head, "erp/module.json5").unwrap(),
        "{\n  label: \"ERP\",\n}\n"
    );
    // The live branch did not move and does not see the module.
    assert_eq!(head(&store, "main"), live_head);
    assert!(store.live().unwrap().model.module("erp").is_none());
    assert!(store
        .snapshot("feature-1")
        .unwrap()
        .model
        .module("erp")
        .is_some());

    // The second write to the branch builds on it.
    let second = store
        .write::<Error, _>("feature-1", "bob", |m| {
            Ok(m.create_object("erp", Object::new("order", "Order"))?)
        })
        .unwrap();
    assert!(!second.forked);
    assert_eq!(
        repo(&store)
            .find_commit(head(&store, "feature-1"))
            .unwrap()
            .parent_id(0)
            .unwrap(),
        feature_head
    );

    let branches = store.branches().unwrap();
    let listed: Vec<(&str, bool)> = branches
        .iter()
        .map(|b| (b.branch.as_str(), b.live))
        .collect();
    assert_eq!(listed, [("feature-1", false), ("main", true)]);
    assert_eq!(branches[1].commit, live_head.to_string());
}

#[test]
fn deletes_remove_files_and_empty_directories() {
    let (_dir, store) = demo_store();
    store
        .write::<Error, _>("main", "admin", |m| {
            Ok(m.create_module(Module::new("erp", "ERP"))?)
        })
        .unwrap();
    store
        .write::<Error, _>("main", "admin", |m| {
            Ok(m.create_object("erp", Object::new("order", "Order"))?)
        })
        .unwrap();
    let written = store
        .write::<Error, _>("main", "admin", |m| {
            Ok(m.delete_object(&QualifiedName::new("erp", "order"))?)
        })
        .unwrap();
    assert_eq!(written.change.action, Action::Deleted);
    assert_eq!(written.file, "erp/objects/order.json5");
    let after = head(&store, "main");
    assert_eq!(changed_paths(&store, after), ["erp/objects/order.json5"]);
    let repo = repo(&store);
    let tree = repo.find_commit(after).unwrap().tree().unwrap();
    assert!(
        tree.get_path(std::path::Path::new("erp/objects")).is_err(),
        "no empty directory is left"
    );

    store
        .write::<Error, _>("main", "admin", |m| Ok(m.delete_module("erp")?))
        .unwrap();
    let tree = repo
        .find_commit(head(&store, "main"))
        .unwrap()
        .tree()
        .unwrap();
    assert!(tree.get_path(std::path::Path::new("erp")).is_err());
}

#[test]
fn refused_writes_leave_the_branch_alone() {
    let (_dir, store) = demo_store();
    let before = head(&store, "main");

    let exists = store.write::<Error, _>("main", "admin", |m| {
        Ok(m.create_field(&deal(), text_field("amount"))?)
    });
    assert!(matches!(
        exists,
        Err(Error::Model(hf_model::Error::AlreadyExists { target })) if target == Target::field(&deal(), "amount")
    ));

    let in_use = store.write::<Error, _>("main", "admin", |m| {
        Ok(m.delete_object(&QualifiedName::new("crm", "party"))?)
    });
    assert!(matches!(
        in_use,
        Err(Error::Model(hf_model::Error::InUse { .. }))
    ));

    // An edit that leaves a dangling reference commits nothing and names every problem.
    let invalid = store.write::<Error, _>("main", "admin", |m| {
        let mut object = Object::new("lead", "Lead");
        object.extends = Some(QualifiedName::new("crm", "nothing"));
        let lookup = FieldKind::Lookup {
            target: QualifiedName::new("erp", "x"),
            required: false,
            indexed: false,
        };
        object
            .fields
            .insert("owner".into(), Field::new("owner", "Owner", lookup));
        Ok(m.create_object("crm", object)?)
    });
    match invalid {
        Err(Error::Invalid {
            branch,
            diagnostics,
        }) => {
            assert_eq!(branch, "main");
            let targets: Vec<String> = diagnostics
                .iter()
                .map(|d| format!("{} {}", d.target, d.code.name()))
                .collect();
            assert_eq!(
                targets,
                [
                    "crm.lead MISSING_PARENT",
                    "crm.lead.owner MISSING_LOOKUP_TARGET"
                ]
            );
            assert!(diagnostics.iter().all(|d| d.code.is_missing_reference()));
        }
        other => panic!("{other:?}"),
    }

    // The caller's own error type passes through untouched.
    #[derive(Debug)]
    enum RouteError {
        Store(Error),
        Forbidden,
    }
    impl From<Error> for RouteError {
        fn from(error: Error) -> Self {
            RouteError::Store(error)
        }
    }
    let forbidden = store.write("main", "admin", |_| {
        Err::<hf_model::Change, _>(RouteError::Forbidden)
    });
    assert!(matches!(forbidden, Err(RouteError::Forbidden)));
    let bad_branch = store.write("a..b", "admin", |_| {
        Err::<hf_model::Change, _>(RouteError::Forbidden)
    });
    assert!(matches!(
        bad_branch,
        Err(RouteError::Store(Error::InvalidBranch { .. }))
    ));

    assert_eq!(head(&store, "main"), before);
    assert_eq!(
        store.branches().unwrap().len(),
        1,
        "a refused fork creates no branch"
    );
}

#[test]
fn odd_principal_names_make_valid_signatures() {
    let (_dir, store) = demo_store();
    store
        .write::<Error, _>("main", "Eve <evil> Doe", |m| {
            Ok(m.delete_screen("crm", "counter")?)
        })
        .unwrap();
    let repo = repo(&store);
    let commit = repo.find_commit(head(&store, "main")).unwrap();
    assert_eq!(commit.author().name(), Some("Eve _evil_ Doe"));
    assert_eq!(commit.author().email(), Some("Eve__evil__Doe@hf.local"));
}
