//! Models and rendering shared by the tests.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hf_hoqs::Diagnostic;
use hf_model::Model;

/// The repository's `fixtures/` directory.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The demo CRM (`fixtures/demo`), loaded once.
pub fn demo() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| load(&fixtures_dir().join("demo")))
}

/// The test model `fixtures/hoqs/models/shop`, loaded once.
pub fn shop() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| load(&fixtures_dir().join("hoqs/models/shop")))
}

/// A model by the name a fixture gives in its `-- model:` line.
pub fn model(name: &str) -> &'static Model {
    match name {
        "demo" => demo(),
        "shop" => shop(),
        other => panic!("unknown fixture model {other}"),
    }
}

fn load(dir: &Path) -> Model {
    let model = hf_model::files::load_dir(dir).unwrap();
    let problems = hf_model::validate(&model);
    assert!(problems.is_empty(), "{}: {problems:#?}", dir.display());
    model
}

/// Diagnostics rendered with line:column and a caret frame, one after the other.
pub fn render(source: &str, diagnostics: &[Diagnostic]) -> String {
    diagnostics
        .iter()
        .map(|diagnostic| diagnostic.render(source))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Parameters rendered one per line as `$n = "value"` (JSON strings) or `$n = NULL`.
pub fn render_params(params: &[Option<String>]) -> String {
    params
        .iter()
        .enumerate()
        .map(|(index, value)| match value {
            Some(text) => format!(
                "${} = {}\n",
                index + 1,
                serde_json::to_string(text).unwrap()
            ),
            None => format!("${} = NULL\n", index + 1),
        })
        .collect()
}
