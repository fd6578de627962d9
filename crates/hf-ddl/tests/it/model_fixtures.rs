//! Fixtures in model form: `fixtures/ddl/model/<case>/{before/, after/}` are metadata
//! directories (a missing one is the empty model) with optional `renames.json5`; without it the
//! rename hints are the `renamedFrom` of the `after` files ([`rename_hints`]). The plan from
//! `desired_schema(before)` to `desired_schema(after)` is snapshot-tested with the mapping's
//! notes, then checked against a real database like the schema fixtures.

use std::path::{Path, PathBuf};

use hf_ddl::{desired_schema, introspect, map_model, plan, rename_hints, Renames};
use hf_model::Model;

use crate::db::with_db;
use crate::fixtures::render;
use crate::roundtrip::{build, run, schema_names};

struct ModelCase {
    name: String,
    before: Model,
    after: Model,
    renames: Renames,
}

fn load_model(dir: &Path) -> Model {
    if !dir.is_dir() {
        return Model::default();
    }
    let model = hf_model::files::load_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let problems = hf_model::validate(&model);
    assert!(
        problems.is_empty(),
        "{}: the fixture model is invalid: {problems:?}",
        dir.display()
    );
    model
}

fn cases() -> Vec<ModelCase> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/ddl/model");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|dir| {
            let after = load_model(&dir.join("after"));
            let renames = match std::fs::read_to_string(dir.join("renames.json5")) {
                Ok(text) => json5::from_str(&text).unwrap(),
                Err(_) => rename_hints(&after),
            };
            ModelCase {
                name: dir.file_name().unwrap().to_string_lossy().into_owned(),
                before: load_model(&dir.join("before")),
                after,
                renames,
            }
        })
        .collect()
}

#[test]
fn model_plans_match_snapshots() {
    let cases = cases();
    assert!(cases.len() >= 3);
    for case in cases {
        let (after, notes) = map_model(&case.after);
        let planned = plan(&desired_schema(&case.before), &after, &case.renames);
        let mut text = render(&planned);
        for note in notes {
            text.push_str(&format!(
                "-- mapping: {:?} {}: {}\n",
                note.code, note.target, note.message
            ));
        }
        insta::assert_snapshot!(format!("model_{}", case.name), text);
    }
}

#[tokio::test]
async fn model_fixtures_round_trip() {
    for case in cases() {
        with_db(move |mut client| async move {
            let before = desired_schema(&case.before);
            let after = desired_schema(&case.after);
            build(&mut client, &before).await;
            let names = schema_names(&before, &after);
            let current = introspect(&client, &names).await.unwrap();
            let planned = plan(&current, &after, &case.renames);
            let expected = plan(&before, &after, &case.renames);
            assert_eq!(render(&planned), render(&expected), "case {}", case.name);
            run(&mut client, &planned)
                .await
                .unwrap_or_else(|e| panic!("case {}: {e}", case.name));
            let again = plan(
                &introspect(&client, &names).await.unwrap(),
                &after,
                &case.renames,
            );
            assert!(again.is_empty(), "case {}:\n{}", case.name, render(&again));
        })
        .await;
    }
}
