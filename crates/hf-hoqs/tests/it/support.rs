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

/// The test model `fixtures/hoqs/models/sales` (picklists), loaded once.
pub fn sales() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| load(&fixtures_dir().join("hoqs/models/sales")))
}

/// A model by the name a fixture gives in its `-- model:` line.
pub fn model(name: &str) -> &'static Model {
    match name {
        "demo" => demo(),
        "shop" => shop(),
        "sales" => sales(),
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

/// The fenced code blocks of a file of `docs/`.
pub fn doc_blocks(name: &str) -> Vec<String> {
    let path = fixtures_dir().join("../docs").join(name);
    let markdown = std::fs::read_to_string(&path).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        if line.starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(String::new()),
            }
        } else if let Some(block) = &mut current {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// The example queries of docs/hoqs.md (blocks that start with SELECT and are not the grammar
/// sketch), with the parameters their `:names` need, and the examples of docs/formulas.md as
/// select items of a query over crm.opportunity.
pub fn doc_queries() -> (Vec<String>, hf_hoqs::RequestParams) {
    let mut queries: Vec<String> = doc_blocks("hoqs.md")
        .into_iter()
        .filter(|block| block.starts_with("SELECT") && !block.contains("<moduleKey>"))
        .collect();
    let formulas = doc_blocks("formulas.md");
    for line in formulas.first().unwrap().lines() {
        queries.push(format!("SELECT {line} AS example FROM crm.opportunity"));
    }
    let params = r#"{"min": 1000, "industry": "Energy", "n": 10, "i": "Energy"}"#;
    (queries, serde_json::from_str(params).unwrap())
}

/// Compiles a docs example as the service would: with a caller for `$User` and a time zone.
pub fn compile_doc(query: &str, params: &hf_hoqs::RequestParams) -> hf_hoqs::QueryOutput {
    let caller = hf_hoqs::Caller {
        id: "6f9619ff-8b86-d011-b42d-00c04fc964ff".to_owned(),
        name: "ada".to_owned(),
    };
    let options = hf_hoqs::QueryOptions {
        params,
        time_zone: Some("Europe/Paris"),
        caller: Some(&caller),
        page: None,
    };
    // The picklist examples read the `sales` test model; every other one the demo CRM.
    let model = if query.contains("FROM sales.") {
        sales()
    } else {
        demo()
    };
    hf_hoqs::compile_query_with(model, query, options).unwrap()
}

/// Compiles a query fixture; `-- page: first` compiles it as the first keyset page, and
/// `-- page: [values...]` as the page after the record with these sort values.
pub fn compile_fixture(
    model: &hf_model::Model,
    source: &str,
    params: &hf_hoqs::RequestParams,
    page: Option<&str>,
    time_zone: Option<&str>,
    caller: Option<&str>,
) -> hf_hoqs::QueryOutput {
    let after: Option<Vec<Box<serde_json::value::RawValue>>> = page
        .filter(|page| *page != "first")
        .map(|values| serde_json::from_str(values).unwrap());
    let caller = caller.map(|name| hf_hoqs::Caller {
        id: "6f9619ff-8b86-d011-b42d-00c04fc964ff".to_owned(),
        name: name.to_owned(),
    });
    let options = hf_hoqs::QueryOptions {
        params,
        time_zone,
        caller: caller.as_ref(),
        page: page.map(|_| after.as_deref()),
    };
    hf_hoqs::compile_query_with(model, source, options).unwrap()
}
