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
    let run = {
        let report = report.clone();
        let record_id = record["id"].as_str().unwrap().to_owned();
        move || {
            Command::new(st)
                .arg("--config-file")
                .arg(config)
                .args(["run", &url, "--checks", "all"])
                .args(["--phases", "examples,coverage,fuzzing,stateful"])
                // Bounded: a few minutes on a busy CI machine.
                // One worker: hypothesis on Python 3.11 can fail parsing its own sources when two
                // threads do at once ("AST constructor recursion depth mismatch").
                .args(["--max-examples", "15", "--workers", "1", "--seed", "1"])
                .args(["--no-color", "--report", "json", "--report-json-path"])
                .arg(&report)
                .args(["-H", &format!("Authorization: Bearer {token}")])
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
