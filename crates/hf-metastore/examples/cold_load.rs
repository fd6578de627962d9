//! Timed example: cold snapshot load of a generated 500-object × 20-field repository.
//!
//! Run with `cargo run --release -p hf-metastore --example cold_load`. It generates the model,
//! seeds it into a fresh bare repository, then opens new `Store` values (whose caches are empty)
//! and times reading the live snapshot: tree walk, blob reads, JSON5 parsing and model building.
//! The target is under 300 ms. It also times one write (edit, validation, commit, ref move) on
//! that repository.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "an example reports on stdout and stops on the first failure"
)]

use std::time::{Duration, Instant};

use hf_metastore::Store;
use hf_model::{
    files, Field, FieldKind, FieldPath, Model, Module, Object, QualifiedName, RollupFunction,
    ScalarType,
};

const OBJECTS: usize = 500;
const FIELDS: usize = 20;

fn generate() -> Model {
    let mut module = Module::new("bench", "Bench");
    for i in 0..OBJECTS {
        let name = QualifiedName::new("bench", format!("o{i:03}"));
        let mut object = Object::new(&name.object, format!("Object {i}"));
        for j in 0..FIELDS - 3 {
            let field_type = ScalarType::ALL[j % ScalarType::ALL.len()];
            let kind = FieldKind::Scalar {
                field_type,
                required: j % 3 == 0,
                unique: false,
                indexed: j % 5 == 0,
                values: Vec::new(),
                default_value: None,
            };
            let key = format!("f{j:02}");
            object
                .fields
                .insert(key.clone(), Field::new(key, format!("Field {j}"), kind));
        }
        let parent = QualifiedName::new("bench", format!("o{:03}", (i + OBJECTS - 1) % OBJECTS));
        let lookup = FieldKind::Lookup {
            target: parent,
            required: false,
            indexed: true,
        };
        object
            .fields
            .insert("parent".into(), Field::new("parent", "Parent", lookup));
        let formula = FieldKind::Formula {
            formula: "f01 * 2".into(),
            field_type: ScalarType::Integer,
        };
        object
            .fields
            .insert("double".into(), Field::new("double", "Double", formula));
        let child = QualifiedName::new("bench", format!("o{:03}", (i + 1) % OBJECTS));
        let rollup = FieldKind::Rollup {
            function: RollupFunction::Count,
            source: FieldPath {
                object: child,
                field: "parent".into(),
            },
            field: None,
            filter: None,
            field_type: ScalarType::Integer,
        };
        object.fields.insert(
            "children".into(),
            Field::new("children", "Children", rollup),
        );
        module.objects.insert(object.key.clone(), object);
    }
    let mut model = Model::default();
    model.modules.insert(module.key.clone(), module);
    model
}

fn main() {
    let model = generate();
    let work = tempfile::tempdir().unwrap();
    let source = work.path().join("source");
    files::write_dir(&model, &source).unwrap();
    let bytes: usize = files::read_dir_files(&source)
        .unwrap()
        .iter()
        .map(|(_, b)| b.len())
        .sum();
    let repo_path = work.path().join("metadata");
    let store = Store::open_or_init(&repo_path, "main").unwrap();
    let started = Instant::now();
    store.seed_from_dir(&source, "bench").unwrap().unwrap();
    let seed = started.elapsed();
    println!(
        "generated {OBJECTS} objects x {FIELDS} fields ({} files, {} KiB); seeded in {seed:?}",
        OBJECTS + 1,
        bytes / 1024
    );

    let mut cold = Vec::new();
    for _ in 0..7 {
        let fresh = Store::open_or_init(&repo_path, "main").unwrap();
        let started = Instant::now();
        let snapshot = fresh.live().unwrap();
        cold.push(started.elapsed());
        assert_eq!(snapshot.model.modules["bench"].objects.len(), OBJECTS);
    }
    cold.sort();
    println!(
        "cold snapshot load: min {:?}, median {:?}, max {:?} (target < 300 ms)",
        cold[0],
        cold[cold.len() / 2],
        cold[cold.len() - 1]
    );

    let started = Instant::now();
    let warm = store.live().unwrap();
    println!("warm snapshot read: {:?}", started.elapsed());
    assert_eq!(warm.model.modules["bench"].objects.len(), OBJECTS);

    let started = Instant::now();
    let problems = hf_model::validate(&warm.model);
    println!(
        "validate: {:?} ({} problems)",
        started.elapsed(),
        problems.len()
    );

    let mut writes = Vec::new();
    for i in 0..5 {
        let target = QualifiedName::new("bench", "o042");
        let kind = FieldKind::Scalar {
            field_type: ScalarType::Text,
            required: false,
            unique: false,
            indexed: false,
            values: Vec::new(),
            default_value: None,
        };
        let field = Field::new(format!("added_{i}"), "Added", kind);
        let started = Instant::now();
        store
            .write::<hf_metastore::Error, _>("main", "bench", |m| {
                Ok(m.create_field(&target, field.clone())?)
            })
            .unwrap();
        writes.push(started.elapsed());
    }
    writes.sort();
    let median: Duration = writes[writes.len() / 2];
    println!("one write (edit, validate, commit, move ref): median {median:?}");
}
