//! Metadata reads and writes over HTTP: live and feature branches, the files in git, and every
//! kind of bad input leaving the repository unchanged.

use hf_testkit::TestServer;
use reqwest::{Method, RequestBuilder};
use serde_json::{json, Value};

use crate::support::assert_envelope;

/// A test server with an administrator's token.
struct Ctx {
    server: TestServer,
    token: String,
}

impl Ctx {
    async fn start() -> Self {
        let server = TestServer::start().await;
        let token = server.admin_token().await;
        Ctx { server, token }
    }

    async fn stop(self) {
        self.server.stop().await;
    }
}

impl std::ops::Deref for Ctx {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        &self.server
    }
}

/// A request as the administrator (the one place that attaches credentials).
fn admin(server: &Ctx, method: Method, path: &str) -> RequestBuilder {
    server
        .http
        .request(method, server.url(path))
        .bearer_auth(&server.token)
}

async fn send_json(server: &Ctx, method: Method, path: &str, body: Value) -> reqwest::Response {
    admin(server, method, path)
        .json(&body)
        .send()
        .await
        .unwrap()
}

async fn get(server: &Ctx, path: &str) -> Value {
    let response = admin(server, Method::GET, path).send().await.unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

/// `git show <branch>:<file>` in the server's metadata repository.
fn git_show(server: &TestServer, branch: &str, file: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(server.metadata_path())
        .args(["show", &format!("{branch}:{file}")])
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8(output.stdout).unwrap())
}

fn git_head(server: &TestServer, branch: &str) -> Option<String> {
    let output = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(server.metadata_path())
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8(output.stdout).unwrap().trim().to_owned())
}

/// Creates module `crm` with an `account` object (name, unique code) on a branch root.
async fn seed(server: &Ctx, root: &str) {
    let r = send_json(
        server,
        Method::POST,
        &format!("/{root}/crm"),
        json!({"label": "CRM", "identity": {"color": "blue", "icon": "briefcase"}}),
    )
    .await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = send_json(
        server,
        Method::POST,
        &format!("/{root}/crm/objects/account"),
        json!({"label": "Account"}),
    )
    .await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = send_json(
        server,
        Method::POST,
        &format!("/{root}/crm/objects/account/fields/name"),
        json!({"fieldKind": "scalar", "label": "Name", "fieldType": "text", "required": true}),
    )
    .await;
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

#[tokio::test]
async fn live_writes_commit_apply_and_read_back() {
    let server = Ctx::start().await;
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm",
        json!({"label": "CRM"}),
    )
    .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "created");
    assert_eq!(body["branch"], "main");
    assert_eq!(body["file"], "crm/module.json5");
    assert!(body["apply"].is_object(), "{body}");

    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/account",
        json!({"label": "Account"}),
    )
    .await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["file"], "crm/objects/account.json5");
    assert_eq!(body["apply"]["tablesCreated"], 1, "{body}");

    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/account/fields/code",
        json!({"fieldKind": "scalar", "label": "Code", "fieldType": "text", "uniqueConstraint": true}),
    )
    .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["apply"]["columnsAdded"], 1, "{body}");

    // The column exists in the database.
    let client = server.db.client().await;
    let columns: Vec<String> = client
        .query(
            "SELECT column_name::text FROM information_schema.columns WHERE table_schema = 'crm' AND table_name = 'account' ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        columns,
        [
            "code",
            "created_at",
            "created_by",
            "id",
            "updated_at",
            "updated_by"
        ]
    );

    // Reads show exactly the contract's shapes.
    let module = get(&server, "/metadata/crm").await;
    assert_eq!(
        module,
        json!({"moduleKey": "crm", "label": "CRM", "description": null, "identityColor": null, "identityIcon": null, "vendorKey": null})
    );
    let object = get(&server, "/metadata/crm/objects/account").await;
    assert_eq!(object["objectKey"], "account");
    assert_eq!(object["isAbstract"], false);
    assert_eq!(object["rules"], json!({}));
    assert!(
        object.get("fields").is_none(),
        "objects do not embed fields"
    );
    let field = get(&server, "/metadata/crm/objects/account/fields/code").await;
    assert_eq!(field["fieldKind"], "scalar");
    assert_eq!(field["fieldType"], "text");
    assert_eq!(field["uniqueConstraint"], true);
    assert_eq!(field["required"], false);
    assert_eq!(field["indexed"], false);
    assert_eq!(field["formula"], Value::Null);

    // The file in git is deterministic, readable JSON5.
    let file = git_show(&server, "main", "crm/objects/account.json5").unwrap();
    assert!(file.ends_with('\n'));
    assert!(file.contains("code"), "{file}");

    server.stop().await;
}

#[tokio::test]
async fn feature_branch_writes_fork_and_do_not_apply() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let main_head = git_head(&server, "main").unwrap();

    let response = send_json(
        &server,
        Method::POST,
        "/metadata@feature-1/crm/objects/account/fields/website",
        json!({"fieldKind": "scalar", "label": "Website", "fieldType": "text"}),
    )
    .await;
    assert_eq!(response.status(), 201);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["branch"], "feature-1");
    assert_eq!(body["apply"], Value::Null);
    assert_eq!(
        git_head(&server, "main").unwrap(),
        main_head,
        "the live branch did not move"
    );

    // The branch sees the field, the live branch does not.
    get(
        &server,
        "/metadata@feature-1/crm/objects/account/fields/website",
    )
    .await;
    let response = admin(
        &server,
        Method::GET,
        "/metadata/crm/objects/account/fields/website",
    )
    .send()
    .await
    .unwrap();
    assert_envelope(response, 404, "FIELD_NOT_FOUND").await;

    let branches = get(&server, "/branches").await;
    let names = crate::support::branch_names(&branches);
    assert_eq!(names, ["feature-1", "main"]);
    assert_eq!(branches[1]["live"], true);

    // Plan shows the pending column; apply fast-forwards the live branch to it.
    let plan: Value = admin(&server, Method::POST, "/plan")
        .json(&json!({"branch": "feature-1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(plan["summary"]["columnsAdded"], 1, "{plan}");
    let applied = admin(&server, Method::POST, "/apply")
        .json(&json!({"branch": "feature-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(applied.status(), 200);
    assert_eq!(git_head(&server, "main"), git_head(&server, "feature-1"));
    let plan: Value = admin(&server, Method::POST, "/plan")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(plan["changes"], json!([]), "{plan}");
    server.stop().await;
}

#[tokio::test]
async fn lists_are_sorted_and_filters_checked() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/contact",
        json!({"label": "Contact"}),
    )
    .await;
    send_json(
        &server,
        Method::POST,
        "/metadata@main/bank",
        json!({"label": "Bank"}),
    )
    .await;
    let modules = get(&server, "/metadata").await;
    let keys: Vec<&str> = modules
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["moduleKey"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["bank", "crm"]);
    let objects = get(&server, "/metadata/objects?moduleKey=crm").await;
    let keys: Vec<&str> = objects
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["objectKey"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["account", "contact"]);
    let fields = get(&server, "/metadata/fields?moduleKey=crm&objectKey=account").await;
    assert_eq!(fields.as_array().unwrap().len(), 1);
    for path in [
        "/metadata/fields?objectKey=account",
        "/metadata/crm/objects?moduleKey=bank",
        "/metadata/crm/objects/account/fields?objectKey=contact",
        "/metadata/objects?bogus=1",
    ] {
        let response = admin(&server, Method::GET, path).send().await.unwrap();
        assert_envelope(response, 400, "INVALID_QUERY").await;
    }
    server.stop().await;
}

#[tokio::test]
async fn bad_keys_and_branches_are_refused_without_moving_the_branch() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let head = git_head(&server, "main").unwrap();
    let long = "a".repeat(64);
    for key in [
        "CRM",
        "my-mod",
        "a.b",
        "public",
        "pg_x",
        "hfx",
        // `objects` and `fields` are reserved too, but their paths are the cross-module lists,
        // where a write is 405 (see `errors.rs`).
        "screens",
        long.as_str(),
        "9a",
    ] {
        let response = send_json(
            &server,
            Method::POST,
            &format!("/metadata@main/{key}"),
            json!({"label": "x"}),
        )
        .await;
        assert_envelope(response, 400, "INVALID_KEY").await;
    }
    for key in ["Name", "id", "created_at", "updated_at", "a-b"] {
        let response = send_json(
            &server,
            Method::POST,
            &format!("/metadata@main/crm/objects/account/fields/{key}"),
            json!({"fieldKind": "scalar", "label": "x", "fieldType": "text"}),
        )
        .await;
        assert_envelope(response, 400, "INVALID_KEY").await;
    }
    // Paths an HTTP client would normalise are sent raw.
    for path in [
        "/metadata@main/..",
        "/metadata@main/%2E%2E",
        "/metadata@main/a%2Fb",
        "/metadata@main/a/b",
        "/metadata@main/crm/objects/a%2F..%2Fb",
        "/metadata@main/crm/objects/..",
    ] {
        let (status, body) = crate::support::raw_request(
            &server.base_url,
            "POST",
            path,
            Some(r#"{"label":"x"}"#),
            Some(&server.token),
        )
        .await;
        let code = body["errors"][0]["code"].as_str().unwrap_or("");
        assert!(
            (status == 400 && code == "INVALID_KEY")
                || (status == 404 && code == "ROUTE_NOT_FOUND")
                || (status == 405 && code == "METHOD_NOT_ALLOWED"),
            "{path}: {status} {body}"
        );
    }
    for root in [
        "metadata@",
        "metadata@a..b",
        "metadata@-x",
        "meta@x",
        "METADATA@main",
        "metadata@x.lock",
    ] {
        let response = send_json(
            &server,
            Method::POST,
            &format!("/{root}/crm"),
            json!({"label": "x"}),
        )
        .await;
        assert_envelope(response, 400, "INVALID_BRANCH").await;
    }
    // Writes need a branch root: the live read path takes no writes.
    let response = send_json(
        &server,
        Method::POST,
        "/metadata/crm2",
        json!({"label": "x"}),
    )
    .await;
    assert_envelope(response, 405, "METHOD_NOT_ALLOWED").await;
    assert_eq!(git_head(&server, "main").unwrap(), head);
    server.stop().await;
}

#[tokio::test]
async fn bad_bodies_name_the_property() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let head = git_head(&server, "main").unwrap();
    let field = "/metadata@main/crm/objects/account/fields/f1";
    let cases = [
        (
            field,
            json!({"fieldKind": "scalar", "label": "x", "fieldType": 5}),
            "fieldType",
        ),
        (
            field,
            json!({"fieldKind": "scalar", "label": "x", "fieldType": "text", "formula": "1"}),
            "formula",
        ),
        (
            field,
            json!({"fieldKind": "blob", "label": "x"}),
            "fieldKind",
        ),
        (
            field,
            json!({"label": "x", "fieldType": "text"}),
            "fieldKind",
        ),
        (
            field,
            json!({"fieldKind": "scalar", "label": "x", "fieldType": "money"}),
            "fieldType",
        ),
        (
            field,
            json!({"fieldKind": "scalar", "fieldType": "text"}),
            "label",
        ),
        (
            field,
            json!({"fieldKind": "lookup", "label": "x", "lookupTarget": "nodot"}),
            "lookupTarget",
        ),
        (
            "/metadata@main/crm/objects/deal",
            json!({"label": "x", "colour": "red"}),
            "colour",
        ),
        (
            "/metadata@main/crm/objects/deal",
            json!({"label": "x", "extensionKind": "mixin", "extends": "crm.account"}),
            "extensionKind",
        ),
        (
            "/metadata@main/crm/objects/deal",
            json!({"label": 12}),
            "label",
        ),
        (
            "/metadata@main/crm/objects/deal",
            json!({"label": "x", "rules": {"r": {"assert": 1, "message": "m"}}}),
            "rules.r.assert",
        ),
    ];
    for (path, body, target) in cases {
        let response = send_json(&server, Method::POST, path, body.clone()).await;
        let envelope = assert_envelope(response, 400, "INVALID_BODY").await;
        assert_eq!(
            envelope["errors"][0]["target"], target,
            "{body}: {envelope}"
        );
    }
    assert_eq!(git_head(&server, "main").unwrap(), head);
    server.stop().await;
}

#[tokio::test]
async fn references_cycles_and_in_use() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let head = git_head(&server, "main").unwrap();
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/deal/fields/x",
        json!({"fieldKind": "scalar", "label": "x", "fieldType": "text"}),
    )
    .await;
    assert_envelope(response, 404, "OBJECT_NOT_FOUND").await;
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/nope/objects/deal",
        json!({"label": "x"}),
    )
    .await;
    assert_envelope(response, 404, "MODULE_NOT_FOUND").await;
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/deal",
        json!({"label": "x", "extends": "crm.ghost"}),
    )
    .await;
    assert_envelope(response, 422, "INVALID_REFERENCE").await;
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/account/fields/owner",
        json!({"fieldKind": "lookup", "label": "x", "lookupTarget": "crm.ghost"}),
    )
    .await;
    assert_envelope(response, 422, "INVALID_REFERENCE").await;
    let response = send_json(
        &server,
        Method::PUT,
        "/metadata@main/crm/objects/account",
        json!({"label": "Account", "extends": "crm.account"}),
    )
    .await;
    let status = response.status().as_u16();
    assert_eq!(status, 422, "{}", response.text().await.unwrap());
    assert_eq!(git_head(&server, "main").unwrap(), head);

    // a → b → a on a feature branch.
    send_json(
        &server,
        Method::POST,
        "/metadata@cycle/crm/objects/b",
        json!({"label": "B", "extends": "crm.account"}),
    )
    .await;
    let response = send_json(
        &server,
        Method::PUT,
        "/metadata@cycle/crm/objects/account",
        json!({"label": "Account", "extends": "crm.b"}),
    )
    .await;
    assert_eq!(response.status(), 422);

    // In use: a module with objects, an extended object.
    let response = admin(&server, Method::DELETE, "/metadata@cycle/crm")
        .send()
        .await
        .unwrap();
    assert_envelope(response, 409, "IN_USE").await;
    let response = admin(
        &server,
        Method::DELETE,
        "/metadata@cycle/crm/objects/account",
    )
    .send()
    .await
    .unwrap();
    assert_envelope(response, 409, "IN_USE").await;

    // Existing and absent items.
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/account",
        json!({"label": "Again"}),
    )
    .await;
    let envelope = assert_envelope(response, 409, "ALREADY_EXISTS").await;
    assert_eq!(envelope["errors"][0]["target"], Value::Null);
    let message = envelope["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("crm.account"), "{message}");
    let response = send_json(
        &server,
        Method::PUT,
        "/metadata@main/crm/objects/nothing",
        json!({"label": "x"}),
    )
    .await;
    assert_envelope(response, 404, "OBJECT_NOT_FOUND").await;
    assert_eq!(git_head(&server, "main").unwrap(), head);
    server.stop().await;
}

#[tokio::test]
async fn huge_labels_are_refused() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let head = git_head(&server, "main").unwrap();
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/big",
        json!({"label": "x".repeat(1024 * 1024)}),
    )
    .await;
    assert_envelope(response, 413, "PAYLOAD_TOO_LARGE").await;
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/big",
        json!({"label": "x".repeat(100_000)}),
    )
    .await;
    assert_eq!(response.status(), 422);
    assert_eq!(git_head(&server, "main").unwrap(), head);
    server.stop().await;
}

/// A write of the seeded `main` branch refused with 422 `code` at `property` (scope `field`).
struct Refused {
    method: Method,
    path: String,
    body: Value,
    property: &'static str,
}

impl Refused {
    fn post(path: &str, body: Value, property: &'static str) -> Self {
        Refused {
            method: Method::POST,
            path: path.to_owned(),
            body,
            property,
        }
    }
}

/// Sends every write, expects each refused with 422 `code` at its property, and the branch not
/// moved; returns the envelopes.
async fn expect_refused(server: &Ctx, code: &str, writes: Vec<Refused>) -> Vec<Value> {
    let head = git_head(server, "main").unwrap();
    let mut envelopes = Vec::new();
    for write in writes {
        let response = send_json(server, write.method, &write.path, write.body.clone()).await;
        let envelope = assert_envelope(response, 422, code).await;
        let body = &write.body;
        assert_eq!(envelope["errors"][0]["scope"], "field", "{body}");
        assert_eq!(envelope["errors"][0]["target"], write.property, "{body}");
        envelopes.push(envelope);
    }
    assert_eq!(git_head(server, "main").unwrap(), head, "nothing committed");
    envelopes
}

#[tokio::test]
async fn control_characters_in_labels_and_descriptions_are_refused_at_write() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let big = "/metadata@main/crm/objects/big";
    let writes = vec![
        Refused::post(big, json!({"label": "Bi\u{0}g"}), "label"),
        Refused::post(
            big,
            json!({"label": "Big", "description": "a bell \u{7}"}),
            "description",
        ),
        Refused::post(big, json!({"label": "Two\nlines"}), "label"),
    ];
    expect_refused(&server, "CONTROL_CHARACTER", writes).await;
    // Line breaks and tabs are fine in a description, and the live write applies.
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/big",
        json!({"label": "Big", "description": "Two\nlines\tand a tab"}),
    )
    .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    server.stop().await;
}

/// A formula, rule or filter whose types do not fit is refused at write, dry run included
/// (the model's own validation knows only the syntax and the names): it would fail every read
/// or write of its object.
#[tokio::test]
async fn expressions_of_the_wrong_type_are_refused_at_write() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let formula = |formula: &str, ty: &str| json!({"label": "F", "fieldKind": "formula", "fieldType": ty, "formula": formula});
    let rule = json!({"label": "Account", "rules": {"r": {"assert": "name", "message": "m"}}});
    let says = ["declared integer", "ISNEW", "cannot apply", "boolean"];
    for dry_run in ["?dryRun=true", ""] {
        let field = format!("/metadata@main/crm/objects/account/fields/f{dry_run}");
        let object = format!("/metadata@main/crm/objects/account{dry_run}");
        let writes = vec![
            Refused::post(&field, formula("'abc'", "integer"), "formula"),
            Refused::post(&field, formula("ISNEW()", "boolean"), "formula"),
            Refused::post(&field, formula("name * 2", "integer"), "formula"),
            Refused {
                method: Method::PUT,
                path: object,
                body: rule.clone(),
                property: "assert",
            },
        ];
        let envelopes = expect_refused(&server, "INVALID_EXPRESSION", writes).await;
        for (envelope, says) in envelopes.iter().zip(says) {
            let message = envelope["errors"][0]["message"].as_str().unwrap();
            assert!(message.contains(says), "{envelope}");
        }
    }
    // A write the model's own validation refuses is answered with that problem first.
    let empty_label =
        json!({"label": "", "fieldKind": "formula", "fieldType": "integer", "formula": "'abc'"});
    let writes = vec![Refused::post(
        "/metadata@main/crm/objects/account/fields/f",
        empty_label,
        "label",
    )];
    expect_refused(&server, "EMPTY_LABEL", writes).await;
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/objects/account/fields/shout",
        formula("UPPER(name) || '!'", "text"),
    )
    .await;
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    server.stop().await;
}

/// An empty label names nothing, and PostgreSQL keeps no empty comment (a plan wanting one
/// never settled): refused at write, on objects, fields and picklist choices alike.
#[tokio::test]
async fn empty_labels_are_refused_at_write() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let choice = json!({"label": "Stage", "fieldKind": "scalar", "fieldType": "picklist",
        "values": [{"key": "open", "label": "Open"}, {"key": "won", "label": " "}]});
    let big = "/metadata@main/crm/objects/big";
    let writes = vec![
        Refused::post(big, json!({"label": ""}), "label"),
        Refused::post(big, json!({"label": "  "}), "label"),
        Refused::post(
            "/metadata@main/crm/objects/account/fields/stage",
            choice,
            "values",
        ),
    ];
    expect_refused(&server, "EMPTY_LABEL", writes).await;
    server.stop().await;
}

#[tokio::test]
async fn destructive_live_writes_need_consent() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let head = git_head(&server, "main").unwrap();
    let response = admin(
        &server,
        Method::DELETE,
        "/metadata@main/crm/objects/account/fields/name",
    )
    .send()
    .await
    .unwrap();
    let envelope = assert_envelope(response, 409, "DESTRUCTIVE_CHANGE").await;
    assert_eq!(envelope["errors"][0]["target"], Value::Null);
    let message = envelope["errors"][0]["message"].as_str().unwrap();
    assert!(message.contains("crm.account.name"), "{message}");
    assert_eq!(
        git_head(&server, "main").unwrap(),
        head,
        "nothing committed"
    );
    let response = admin(
        &server,
        Method::DELETE,
        "/metadata@main/crm/objects/account/fields/name?allowDestructive=true",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "deleted");
    let client = server.db.client().await;
    let count: i64 = client
        .query_one("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'crm' AND table_name = 'account' AND column_name = 'name'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 0);
    server.stop().await;
}

#[tokio::test]
async fn failed_apply_leaves_branch_and_database_unchanged() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let client = server.db.client().await;
    client
        .batch_execute("INSERT INTO crm.account (name) VALUES ('a'), ('a')")
        .await
        .unwrap();
    let head = git_head(&server, "main").unwrap();
    // A unique constraint cannot be added over duplicate values.
    let response = send_json(
        &server,
        Method::PUT,
        "/metadata@main/crm/objects/account/fields/name",
        json!({"fieldKind": "scalar", "label": "Name", "fieldType": "text", "required": true, "uniqueConstraint": true}),
    )
    .await;
    let envelope = assert_envelope(response, 422, "APPLY_FAILED").await;
    assert!(
        envelope["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("UNIQUE"),
        "{envelope}"
    );
    assert_eq!(git_head(&server, "main").unwrap(), head);
    let rows: i64 = client
        .query_one("SELECT count(*) FROM crm.account", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 2);
    server.stop().await;
}

#[tokio::test]
async fn screen_queries_must_name_fields_the_branch_has() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let source = "<script>let p = '%';</script>\n{#query \"SELECT id, nmae FROM crm.account WHERE name ILIKE :p\", { p } as q}{q.records.length}{/query}";
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/screens/bad_query",
        json!({"hfxSource": source}),
    )
    .await;
    let envelope = assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
    let location = &envelope["errors"][0]["location"];
    // Line 2, at `nmae`: `{#query "SELECT id, ` is 20 characters.
    assert_eq!(
        (location["line"].as_u64(), location["column"].as_u64()),
        (Some(2), Some(21)),
        "{envelope}"
    );
    assert!(
        envelope["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("nmae"),
        "{envelope}"
    );
    let fixed = source.replace("nmae", "name");
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/screens/bad_query",
        json!({"hfxSource": fixed}),
    )
    .await;
    assert_eq!(response.status(), 201);
    // A write that would break the screen's query is refused, naming the screen.
    let response = admin(
        &server,
        Method::DELETE,
        "/metadata@main/crm/objects/account/fields/name?allowDestructive=true",
    )
    .send()
    .await
    .unwrap();
    let envelope = assert_envelope(response, 409, "IN_USE").await;
    assert!(
        envelope["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("bad_query"),
        "{envelope}"
    );
    server.stop().await;
}

#[tokio::test]
async fn screen_query_parameters_written_as_literals_must_have_the_type_the_query_expects_and_keep_it(
) {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    async fn write(server: &Ctx, key: &str, source: String) -> reqwest::Response {
        let path = format!("/metadata@main/crm/screens/{key}");
        send_json(server, Method::POST, &path, json!({"hfxSource": source})).await
    }
    let query = "{#query \"SELECT id FROM crm.account WHERE name = :n LIMIT :limit\",";
    // A number where the text field `name` is compared, and a text as the LIMIT.
    let cases = [
        (r#"{ n: 5, limit: 10 }"#, ":n"),
        (r#"{ n: "Acme", limit: "ten" }"#, ":limit"),
    ];
    for (params, at) in cases {
        let source =
            format!("<p>accounts</p>\n{query} {params} as q}}{{q.records.length}}{{/query}}");
        let envelope = assert_envelope(
            write(&server, "typed_query", source.clone()).await,
            422,
            "HFX_COMPILE_ERROR",
        )
        .await;
        let error = &envelope["errors"][0];
        assert_eq!(error["code"], "HFX_COMPILE_ERROR", "{envelope}");
        let column = source.lines().nth(1).unwrap().find(at).unwrap() + 1;
        assert_eq!(
            (
                error["location"]["line"].as_u64(),
                error["location"]["column"].as_u64()
            ),
            (Some(2), Some(column as u64)),
            "{envelope}"
        );
        assert!(
            error["message"].as_str().unwrap().contains(&at[1..]),
            "{envelope}"
        );
    }
    // Values of the right types, and values known only at run time (not checked here), pass.
    for (key, params) in [
        ("typed_query", r#"{ n: "Acme", limit: 10 }"#),
        ("untyped_query", "{ n: name, limit: size }"),
    ] {
        let source = format!("<script>let name = 'a'; let size = 'x';</script>\n{query} {params} as q}}{{q.records.length}}{{/query}}");
        let response = write(&server, key, source).await;
        assert!(
            matches!(response.status().as_u16(), 200 | 201),
            "{}",
            response.text().await.unwrap()
        );
    }
    // A field type change that makes a literal parameter the wrong type breaks the screen that
    // wrote it: refused, naming the screen (the run-time values of `untyped_query` are not
    // known, so it does not block the change on its own).
    let response = send_json(
        &server,
        Method::PUT,
        "/metadata@main/crm/objects/account/fields/name?allowDestructive=true",
        json!({"fieldKind": "scalar", "label": "Name", "fieldType": "integer", "required": true}),
    )
    .await;
    let envelope = assert_envelope(response, 409, "IN_USE").await;
    assert!(
        envelope["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("typed_query"),
        "{envelope}"
    );
    server.stop().await;
}

#[tokio::test]
async fn screens_must_import_screens_the_branch_has() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let source = "<script>\n  import Card from 'screen:crm/card';\n</script>\n<Card />";
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/screens/uses_card",
        json!({"hfxSource": source}),
    )
    .await;
    let envelope = assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
    let location = &envelope["errors"][0]["location"];
    assert_eq!(
        (location["line"].as_u64(), location["column"].as_u64()),
        (Some(2), Some(20)),
        "{envelope}"
    );
    let card = json!({"hfxSource": "<p>card</p>"});
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/screens/card",
        card,
    )
    .await;
    assert_eq!(response.status(), 201);
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/screens/uses_card",
        json!({"hfxSource": source}),
    )
    .await;
    assert_eq!(response.status(), 201);
    // The imported screen cannot be deleted while it is imported.
    let response = admin(&server, Method::DELETE, "/metadata@main/crm/screens/card")
        .send()
        .await
        .unwrap();
    let envelope = assert_envelope(response, 409, "IN_USE").await;
    assert!(
        envelope["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("uses_card"),
        "{envelope}"
    );
    server.stop().await;
}

#[tokio::test]
async fn screens_must_compile() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/screens/bad",
        json!({"hfxSource": "<div>\n  <p>{count +}</p>\n</div>"}),
    )
    .await;
    let envelope = assert_envelope(response, 422, "HFX_COMPILE_ERROR").await;
    let location = &envelope["errors"][0]["location"];
    assert_eq!(location["line"], 2, "{envelope}");
    assert!(location["column"].as_u64().unwrap() > 1);
    let source =
        "<script>let count = 0;</script><button on:click={() => count += 1}>{count}</button>";
    let response = send_json(
        &server,
        Method::POST,
        "/metadata@main/crm/screens/counter",
        json!({"hfxSource": source, "label": "Counter"}),
    )
    .await;
    assert_eq!(response.status(), 201);
    let screen = get(&server, "/metadata/crm/screens/counter").await;
    assert_eq!(screen["hfxVersion"], 1);
    assert_eq!(screen["hfxSource"], source);
    server.stop().await;
}

#[tokio::test]
async fn concurrent_writes_to_one_branch_all_land() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    let mut writes = Vec::new();
    for i in 0..20 {
        let request = admin(
            &server,
            Method::POST,
            &format!("/metadata@busy/crm/objects/account/fields/f{i}"),
        )
        .json(&json!({"fieldKind": "scalar", "label": format!("F{i}"), "fieldType": "integer"}));
        writes.push(tokio::spawn(async move {
            request.send().await.unwrap().status().as_u16()
        }));
    }
    for write in writes {
        assert_eq!(write.await.unwrap(), 201);
    }
    let fields = get(&server, "/metadata@busy/crm/objects/account/fields").await;
    assert_eq!(fields.as_array().unwrap().len(), 21);
    server.stop().await;
}

#[tokio::test]
async fn reads_need_a_token_and_writes_an_administrator() {
    let server = Ctx::start().await;
    seed(&server, "metadata@main").await;
    for path in [
        "/metadata",
        "/metadata/crm",
        "/metadata/crm/objects/account",
        "/branches",
        "/metadata@main/crm",
    ] {
        let response = server.http.get(server.url(path)).send().await.unwrap();
        assert_envelope(response, 401, "UNAUTHENTICATED").await;
    }
    let user = server
        .create_principal(&format!("meta_reader_{}", std::process::id()), false)
        .await;
    let response = server
        .http
        .get(server.url("/metadata/crm"))
        .bearer_auth(&user.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let writes = [
        (
            Method::POST,
            "/metadata@main/other",
            Some(json!({"label": "x"})),
        ),
        (
            Method::PUT,
            "/metadata@main/crm",
            Some(json!({"label": "x"})),
        ),
        (Method::DELETE, "/metadata@main/crm/objects/account", None),
        (Method::POST, "/plan", None),
        (Method::POST, "/apply", None),
    ];
    let head = git_head(&server, "main");
    for (method, path, body) in writes {
        let mut request = server
            .http
            .request(method, server.url(path))
            .bearer_auth(&user.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        assert_envelope(request.send().await.unwrap(), 403, "FORBIDDEN").await;
    }
    assert_eq!(git_head(&server, "main"), head);
    server.stop().await;
}
