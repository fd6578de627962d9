//! Proof that the interface document can be trusted by tools: schemathesis, with every check and
//! its stateful phase, against the running service with the demo CRM.
//!
//! What must hold: no schema errors (the document is valid and every body satisfiable), no
//! server errors, no answer that breaks its documented schema, and no operation that only ever
//! answered 404 (its parameters' schemas reach existing things, with the realistic values of
//! `schemathesis/schemathesis.toml`). Other checks (a schema-valid request the service refuses
//! because the item already exists, say) are reported in the output but judged by the tests of
//! each route, not here.
//!
//! The tool is a Python package; `.ci/run` installs the pinned version into
//! `target/ci-tools/venv` (or `HF_SCHEMATHESIS` names the `st` executable). Without it the test
//! says so and passes on a developer's machine, and fails in CI (`CI` set), where it must run.

use std::path::PathBuf;
use std::process::Command;

use hf_testkit::TestServer;
use serde_json::{json, Value};

/// The workspace's root directory.
fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A tool installed by `.ci/run`: the path in `variable`, or `default` under the workspace.
pub fn ci_tool(variable: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(default));
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing; .ci/run installs it",
        path.display()
    );
    eprintln!(
        "{} is missing; skipped (.ci/run installs it)",
        path.display()
    );
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn schemathesis_finds_the_document_trustworthy() {
    let Some(st) = ci_tool("HF_SCHEMATHESIS", "target/ci-tools/venv/bin/st") else {
        return;
    };
    let server = TestServer::start_demo().await;
    let token = server.admin_token().await;
    let record: Value = server
        .http
        .post(server.url("/data/crm/account"))
        .bearer_auth(&token)
        .json(&json!({"name": "Acme"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let resolved: Value = server
        .http
        .get(server.url("/hfx/resolve/crm/counter"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let me: Value = server
        .http
        .get(server.url("/auth/me"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let principal_id = me["id"].as_str().unwrap().to_owned();
    let credentials: Value = server
        .http
        .get(server.url(&format!("/iam/principals/{principal_id}/credentials")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let credential_id = credentials[0]["id"].as_str().unwrap().to_owned();
    let module_file = resolved["moduleUrl"]
        .as_str()
        .unwrap()
        .trim_start_matches("/hfx/modules/")
        .to_owned();

    let reports = workspace().join("target/ci-tools/schemathesis-report");
    std::fs::create_dir_all(&reports).unwrap();
    let report = reports.join("report.json");
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemathesis/schemathesis.toml");
    let url = server.url("/openapi.json");
    let max_examples = std::env::var("HF_ST_MAX_EXAMPLES").unwrap_or_else(|_| "15".to_owned());
    let seed = std::env::var("HF_ST_SEED").unwrap_or_else(|_| "1".to_owned());
    let run = {
        let report = report.clone();
        let reports = reports.clone();
        let record_id = record["id"].as_str().unwrap().to_owned();
        move || {
            Command::new(st)
                .arg("--config-file")
                .arg(config)
                .args(["run", &url, "--checks", "all"])
                .args(["--phases", "examples,coverage,fuzzing,stateful"])
                // Bounded: a few minutes on a busy CI machine. A deeper search on a developer's
                // machine: `HF_ST_MAX_EXAMPLES=300 HF_ST_SEED=7 cargo test conformance`.
                // One worker: hypothesis on Python 3.11 can fail parsing its own sources when two
                // threads do at once ("AST constructor recursion depth mismatch").
                .args([
                    "--max-examples",
                    &max_examples,
                    "--workers",
                    "1",
                    "--seed",
                    &seed,
                ])
                // No example database: runs stay independent and write nothing into the tree.
                .args(["--generation-database", "none"])
                .args(["--no-color", "--report", "json", "--report-json-path"])
                .arg(&report)
                .args(["-H", &format!("Authorization: Bearer {token}")])
                .current_dir(&reports)
                .env("HF_ST_RECORD_ID", record_id)
                .env("HF_ST_MODULE_FILE", module_file)
                .env("HF_ST_PRINCIPAL_ID", principal_id)
                .env("HF_ST_CREDENTIAL_ID", credential_id)
                .output()
                .expect("run schemathesis")
        }
    };
    let output = tokio::task::spawn_blocking(run).await.unwrap();
    let console = String::from_utf8_lossy(&output.stdout).into_owned();
    std::fs::write(reports.join("console.txt"), &console).unwrap();
    let summary = console
        .find("SUMMARY")
        .map_or(console.as_str(), |at| &console[at..]);
    eprintln!("{summary}");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap_or_default())
        .unwrap_or_else(|_| panic!("no report: {console}"));

    assert_eq!(report["complete"], true, "{summary}");
    assert_eq!(report["operations"]["errored"], 0, "{summary}");
    for phase in ["examples", "coverage", "fuzzing", "stateful"] {
        assert_ne!(
            report["phases"][phase]["status"], "skipped",
            "{phase}: {summary}"
        );
    }
    let errors = report["errors"].as_array().map_or(0, Vec::len);
    assert_eq!(errors, 0, "schema or runtime errors: {summary}");
    for failure in report["failures"].as_array().into_iter().flatten() {
        let kind = failure["type"].as_str().unwrap_or("");
        assert!(
            !matches!(
                kind,
                "ServerError"
                    | "JsonSchemaError"
                    | "MalformedJson"
                    | "UndefinedStatusCode"
                    | "UndefinedContentType"
                    | "MissingHeaders"
            ),
            "{kind}: {failure}\n{summary}"
        );
    }
    // A credential can be revoked once; the administrator's password credential is also
    // replaced when the tool resets its setup token, so every later revoke of the id it was
    // given rightly answers 404, whatever the parameter's schema.
    let single_use = ["DELETE /iam/principals/{id}/credentials/{credentialId}"];
    let only_404: Vec<&str> = report["warnings"]["missing_test_data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|operation| !single_use.contains(operation))
        .collect();
    assert!(
        only_404.is_empty(),
        "operations that only answered 404: {only_404:?}"
    );
    server.stop().await;
}

/// Runs a command in the client directory; panics with its output unless it succeeds.
fn run_in(dir: &std::path::Path, program: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let output = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap_or_else(|error| panic!("{program}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread")]
async fn a_generated_typescript_client_runs_the_quick_start() {
    let client = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("client");
    let Some(_) = ci_tool(
        "HF_CLIENT_NODE_MODULES",
        "crates/hf-tests/client/node_modules/.bin/openapi-typescript",
    ) else {
        return;
    };
    let server = TestServer::start().await;
    // The document the server serves is the one the client is generated from.
    let doc = server
        .http
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    std::fs::create_dir_all(client.join("generated")).unwrap();
    std::fs::write(client.join("generated/openapi.json"), doc).unwrap();
    // The principal whose setup token the quick start uses.
    let token = server.admin_token().await;
    let name = format!("ts_{}", &uuid_suffix());
    let created: Value = server
        .http
        .post(server.url("/iam/principals"))
        .bearer_auth(&token)
        .json(&json!({"name": name, "isAdmin": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let setup_token = created["setupToken"].as_str().unwrap().to_owned();
    let base_url = server.base_url.clone();
    let output = tokio::task::spawn_blocking(move || {
        run_in(&client, "npm", &["run", "--silent", "generate"], &[]);
        run_in(&client, "npm", &["run", "--silent", "build"], &[]);
        run_in(
            &client,
            "node",
            &["dist/src/quickstart.js"],
            &[
                ("HF_URL", &base_url),
                ("HF_NAME", &name),
                ("HF_SETUP_TOKEN", &setup_token),
            ],
        )
    })
    .await
    .unwrap();
    let result: Value = serde_json::from_str(output.trim()).unwrap_or_else(|_| panic!("{output}"));
    assert_eq!(result["fieldType"], "text", "{result}");
    assert_eq!(result["record"], "Widget", "{result}");
    assert_eq!(result["records"], json!([{"name": "Widget"}]), "{result}");
    assert!(
        result["apply"]["ddlExecuted"].as_u64().unwrap() > 0,
        "{result}"
    );
    server.stop().await;
}

/// A short unique suffix for role names (roles are cluster-wide).
fn uuid_suffix() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}{:x}", std::process::id(), nanos % 0xffff_ffff)
}
