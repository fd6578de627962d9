//! The `auth` group over real HTTP: password and SSH logins, setup tokens, sessions and cookies,
//! throttling, and every way of forging or replaying a credential that the issue lists.
//!
//! Tokens are checked by an independent client (a Node script with built-in crypto only), SSH
//! logins use the real `ssh-keygen`, and forged tokens are made by another Node script.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hf_testkit::TestServer;
use reqwest::Response;
use serde_json::{json, Value};

use crate::support::assert_envelope;

// ---- helpers shared with the iam and body modules ----------------------------------------------

/// A principal name unique in the whole cluster (roles are cluster-wide), derived from the test
/// database's random name.
pub fn unique_name(server: &TestServer, tag: &str) -> String {
    format!("u{}_{tag}", &server.db.name()[8..20])
}

/// `GET /auth/me` with a bearer token.
pub async fn me(server: &TestServer, token: &str) -> Response {
    server
        .http
        .get(server.url("/auth/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
}

/// `POST path` with a JSON body.
pub async fn post_json(server: &TestServer, path: &str, body: Value) -> Response {
    server
        .http
        .post(server.url(path))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// `POST path` with a JSON body and a bearer token.
pub async fn post_json_as(server: &TestServer, token: &str, path: &str, body: Value) -> Response {
    server
        .http
        .post(server.url(path))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// Runs one of the Node helper scripts in `tests/js`.
///
/// Asynchronous on purpose: some pooled connections of the test server are driven by the test's
/// own runtime, so blocking it while the script talks to the server would stall the server.
pub async fn node(script: &str, args: &[&str], stdin: Option<&str>) -> Output {
    use tokio::io::AsyncWriteExt as _;
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/js")
        .join(script);
    let mut child = tokio::process::Command::new("node")
        .arg(path)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node must be installed");
    let mut input = child.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .await
        .unwrap();
    drop(input);
    child.wait_with_output().await.unwrap()
}

/// Makes a token with `forge_jwt.mjs`.
pub async fn forge(spec: Value) -> String {
    let output = node("forge_jwt.mjs", &[], Some(&spec.to_string())).await;
    assert!(
        output.status.success(),
        "forge_jwt failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Unix seconds now.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A directory removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(server: &TestServer, tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("hf-auth-test-{}-{tag}", server.db.name()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Generates a key pair with the real `ssh-keygen`; returns the private key path and the public
/// key line.
pub fn ssh_keygen(dir: &Path, file: &str, kind: &[&str]) -> (PathBuf, String) {
    let private = dir.join(file);
    let output = Command::new("ssh-keygen")
        .args(kind)
        .args(["-N", "", "-q", "-C", &format!("{file}@hf-test"), "-f"])
        .arg(&private)
        .output()
        .expect("ssh-keygen must be installed");
    assert!(
        output.status.success(),
        "ssh-keygen: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let public = std::fs::read_to_string(private.with_extension("pub")).unwrap();
    (private, public.trim().to_owned())
}

/// Signs `message` with `ssh-keygen -Y sign -n NAMESPACE -f KEY`; returns the armored signature.
pub fn ssh_sign(key: &Path, namespace: &str, message: &str) -> String {
    let dir = key.parent().unwrap();
    let file = dir.join(format!("message-{}", message.len()));
    std::fs::write(&file, message).unwrap();
    let signature = file.with_extension("sig");
    let _ = std::fs::remove_file(&signature);
    let output = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", namespace, "-q", "-f"])
        .arg(key)
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "ssh-keygen -Y sign: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(signature).unwrap()
}

/// The current signing key's PEM and kid, read from the service's database.
pub async fn current_signing_key(server: &TestServer) -> (String, String) {
    let client = server.db.client().await;
    let row = client
        .query_one(
            "SELECT private_pem, kid FROM hf.signing_keys WHERE retired_at IS NULL",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Claims our issuer would put in a token for this principal.
fn claims_for(sub: &str, role: &str, admin: bool) -> Value {
    let now = now_secs();
    json!({"iss": "hf", "sub": sub, "role": role, "admin": admin,
           "iat": now, "exp": now + 600, "jti": "forged"})
}

async fn me_json(server: &TestServer, token: &str) -> Value {
    let response = me(server, token).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn challenge(server: &TestServer, username: &str) -> String {
    let response = post_json(server, "/auth/challenge", json!({"username": username})).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert!(body["expiresIn"].as_u64().unwrap() > 0);
    body["nonce"].as_str().unwrap().to_owned()
}

async fn verify(server: &TestServer, username: &str, nonce: &str, signature: &str) -> Response {
    post_json(
        server,
        "/auth/verify",
        json!({"username": username, "nonce": nonce, "signature": signature}),
    )
    .await
}

async fn attach_key(server: &TestServer, token: &str, id: &str, public_key: &str) -> Response {
    post_json_as(
        server,
        token,
        &format!("/iam/principals/{id}/credentials"),
        json!({"kind": "ssh", "publicKey": public_key}),
    )
    .await
}

// ---- tokens ------------------------------------------------------------------------------------

#[tokio::test]
async fn node_verifies_a_login_token_with_the_jwks_it_fetches() {
    let server = TestServer::start().await;
    let output = node(
        "verify_login.mjs",
        &[
            &server.base_url,
            &server.admin_name,
            server.admin_password.as_deref().unwrap(),
        ],
        None,
    )
    .await;
    assert!(
        output.status.success(),
        "node refused the token: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["verified"], true);
    let claims = &report["claims"];
    assert_eq!(claims["iss"], "hf");
    assert_eq!(claims["role"], server.admin_name.as_str());
    assert_eq!(claims["admin"], true);
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );
    let me = me_json(&server, &server.admin_token().await).await;
    assert_eq!(claims["sub"], me["sub"]);
    server.stop().await;
}

#[tokio::test]
async fn jwks_publishes_exactly_the_public_members() {
    let server = TestServer::start().await;
    let response = server
        .http
        .get(server.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let cache = response.headers()["cache-control"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cache.contains("max-age=300"), "{cache}");
    let jwks: Value = response.json().await.unwrap();
    let keys = jwks["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 1);
    let mut members: Vec<&str> = keys[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    members.sort_unstable();
    assert_eq!(members, ["alg", "crv", "kid", "kty", "use", "x", "y"]);
    assert_eq!(keys[0]["alg"], "ES256");
    assert_eq!(keys[0]["use"], "sig");
    let (_, kid) = current_signing_key(&server).await;
    assert_eq!(keys[0]["kid"], kid.as_str());
    server.stop().await;
}

#[tokio::test]
async fn forged_expired_and_foreign_tokens_are_refused() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let profile = me_json(&server, &admin).await;
    let sub = profile["sub"].as_str().unwrap();
    let role = server.admin_name.as_str();
    let (pem, kid) = current_signing_key(&server).await;
    let header = json!({"alg": "ES256", "typ": "JWT", "kid": kid});
    let good = claims_for(sub, role, true);
    let with = |changes: Value| {
        let mut claims = good.clone();
        for (key, value) in changes.as_object().unwrap() {
            if value.is_null() {
                claims.as_object_mut().unwrap().remove(key);
            } else {
                claims[key] = value.clone();
            }
        }
        claims
    };
    let es256 = |header: &Value, payload: Value| json!({"header": header, "payload": payload, "sign": "es256", "pem": pem});

    // The harness is not vacuous: a token forged with the real key and right claims passes.
    let control = forge(es256(&header, good.clone())).await;
    assert_eq!(me(&server, &control).await.status(), 200);

    let jwks: Value = server
        .http
        .get(server.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let public_jwk = jwks["keys"][0].to_string();
    let now = now_secs();
    let mut tampered_payload = control.split('.').map(str::to_owned).collect::<Vec<_>>();
    tampered_payload[1] =
        forge(json!({"header": {}, "payload": with(json!({"role": "postgres"})), "sign": "none"}))
            .await
            .split('.')
            .nth(1)
            .unwrap()
            .to_owned();
    let mut tampered_signature = control.clone().into_bytes();
    let index = tampered_signature.len() - 5;
    tampered_signature[index] = if tampered_signature[index] == b'A' {
        b'B'
    } else {
        b'A'
    };

    let attacks: Vec<(&str, Value)> = vec![
        (
            "alg none",
            json!({"header": {"alg": "none", "typ": "JWT", "kid": kid}, "payload": good, "sign": "none"}),
        ),
        (
            "HS256 keyed with the public JWK",
            json!({"header": {"alg": "HS256", "typ": "JWT", "kid": kid}, "payload": good,
                         "sign": "hs256", "secret": public_jwk}),
        ),
        (
            "HS256 keyed with the private PEM",
            json!({"header": {"alg": "HS256", "typ": "JWT", "kid": kid}, "payload": good,
                         "sign": "hs256", "secret": pem}),
        ),
        (
            "unknown kid",
            json!({"header": {"alg": "ES256", "typ": "JWT", "kid": "not-ours"}, "payload": good,
                         "sign": "es256-fresh"}),
        ),
        (
            "our kid, another key",
            json!({"header": header, "payload": good, "sign": "es256-fresh"}),
        ),
        (
            "tampered payload",
            json!({"raw": tampered_payload.join(".")}),
        ),
        (
            "tampered signature",
            json!({"raw": String::from_utf8(tampered_signature).unwrap()}),
        ),
        (
            "expired",
            es256(&header, with(json!({"iat": now - 7200, "exp": now - 3600}))),
        ),
        (
            "issued in the future",
            es256(&header, with(json!({"iat": now + 3600, "exp": now + 7200}))),
        ),
        (
            "not yet valid",
            es256(&header, with(json!({"nbf": now + 3600}))),
        ),
        ("no exp", es256(&header, with(json!({"exp": null})))),
        ("no iat", es256(&header, with(json!({"iat": null})))),
        ("no sub", es256(&header, with(json!({"sub": null})))),
        (
            "wrong issuer",
            es256(&header, with(json!({"iss": "someone-else"}))),
        ),
        (
            "unknown sub",
            es256(
                &header,
                with(json!({"sub": "00000000-0000-0000-0000-000000000000"})),
            ),
        ),
        (
            "no typ",
            es256(&json!({"alg": "ES256", "kid": kid}), good.clone()),
        ),
        (
            "no kid",
            es256(&json!({"alg": "ES256", "typ": "JWT"}), good.clone()),
        ),
        (
            "crit header",
            es256(
                &json!({"alg": "ES256", "typ": "JWT", "kid": kid, "crit": ["x"]}),
                good.clone(),
            ),
        ),
        (
            "two parts",
            json!({"raw": control.rsplit_once('.').unwrap().0.to_owned()}),
        ),
        ("four parts", json!({"raw": format!("{control}.x")})),
        ("not base64", json!({"raw": "%%%.%%%.%%%".to_owned()})),
        ("huge", json!({"raw": "a".repeat(9000)})),
    ];
    for (what, spec) in attacks {
        let token = match spec.get("raw") {
            Some(raw) => raw.as_str().unwrap().to_owned(),
            None => forge(spec).await,
        };
        let response = me(&server, &token).await;
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap()),
            Some("Bearer"),
            "{what}"
        );
        let body = assert_envelope(response, 401, "UNAUTHENTICATED").await;
        assert!(!body.to_string().contains("BEGIN"), "{what}: {body}");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_deleted_principals_token_stops_working_at_once() {
    let server = TestServer::start().await;
    let name = unique_name(&server, "gone");
    let principal = server.create_principal(&name, false).await;
    assert_eq!(me(&server, &principal.token).await.status(), 200);
    let admin = server.admin_token().await;
    let response = server
        .http
        .delete(server.url(&format!("/iam/principals/{}", principal.id)))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    assert_envelope(me(&server, &principal.token).await, 401, "UNAUTHENTICATED").await;
    // Recreating the name makes a new principal; the old token still does not speak for it.
    server.create_principal(&name, false).await;
    assert_envelope(me(&server, &principal.token).await, 401, "UNAUTHENTICATED").await;
    server.stop().await;
}

/// Two instances of the service on one database, as behind a load balancer: a principal
/// deleted, or an administrator demoted, through one instance stops at the other as soon as the
/// database's notification reaches it, although the other instance had both principals in its
/// cache.
#[tokio::test]
async fn changes_made_through_one_instance_reach_another_at_once() {
    let server = TestServer::start().await;
    let other = server.another_instance().await;
    let gone = server
        .create_principal(&unique_name(&server, "gone"), false)
        .await;
    let boss = server
        .create_principal(&unique_name(&server, "boss"), true)
        .await;
    let get = |path: &str, token: &str| {
        let request = server.http.get(other.url(path)).bearer_auth(token);
        async move { request.send().await.unwrap() }
    };
    // Use both at the other instance, a few times, so that its cache holds them.
    for _ in 0..3 {
        assert_eq!(get("/auth/me", &gone.token).await.status(), 200);
        assert_eq!(get("/iam/principals", &boss.token).await.status(), 200);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let admin = server.admin_token().await;
    let deleted = server
        .http
        .delete(server.url(&format!("/iam/principals/{}", gone.id)))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    let demoted = server
        .http
        .patch(server.url(&format!("/iam/principals/{}", boss.id)))
        .bearer_auth(&admin)
        .json(&json!({"isAdmin": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(demoted.status(), 200);
    let changed = Instant::now();
    loop {
        let me = get("/auth/me", &gone.token).await;
        let list = get("/iam/principals", &boss.token).await;
        if me.status() == 401 && list.status() == 403 {
            assert_envelope(me, 401, "UNAUTHENTICATED").await;
            assert_envelope(list, 403, "FORBIDDEN").await;
            break;
        }
        assert!(
            changed.elapsed() < Duration::from_secs(5),
            "the other instance still accepts them: {} {}",
            me.status(),
            list.status()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    eprintln!(
        "the other instance refused them after {:?}",
        changed.elapsed()
    );
    other.stop().await;
    server.stop().await;
}

#[tokio::test]
async fn a_demoted_admin_loses_admin_routes_at_once() {
    let server = TestServer::start().await;
    let second = server
        .create_principal(&unique_name(&server, "boss"), true)
        .await;
    let list = |token: String| {
        let request = server
            .http
            .get(server.url("/iam/principals"))
            .bearer_auth(token);
        async move { request.send().await.unwrap() }
    };
    assert_eq!(list(second.token.clone()).await.status(), 200);
    let admin = server.admin_token().await;
    let response = server
        .http
        .patch(server.url(&format!("/iam/principals/{}", second.id)))
        .bearer_auth(&admin)
        .json(&json!({"isAdmin": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The token still claims admin: true, but the database decides.
    assert_envelope(list(second.token.clone()).await, 403, "FORBIDDEN").await;
    server.stop().await;
}

#[tokio::test]
async fn key_rotation_keeps_old_tokens_valid_and_publishes_both_keys() {
    let server = TestServer::start().await;
    let old_token = server.admin_token().await;
    let profile = me_json(&server, &old_token).await;
    let output = node("new_signing_key.mjs", &[], None).await;
    assert!(output.status.success());
    let key: Value = serde_json::from_slice(&output.stdout).unwrap();
    let (pem, kid) = (key["pem"].as_str().unwrap(), key["kid"].as_str().unwrap());
    // What `hf keys rotate` does, done here with SQL because the key comes from Node.
    let client = server.db.client().await;
    client
        .batch_execute("UPDATE hf.signing_keys SET retired_at = now() WHERE retired_at IS NULL")
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO hf.signing_keys (kid, private_pem) VALUES ($1, $2)",
            &[&kid, &pem],
        )
        .await
        .unwrap();
    let new_token = forge(json!({
        "header": {"alg": "ES256", "typ": "JWT", "kid": kid},
        "payload": claims_for(profile["sub"].as_str().unwrap(), &server.admin_name, true),
        "sign": "es256", "pem": pem,
    }))
    .await;
    // An unknown kid makes the instance re-read its keys (at most every 5 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    while me(&server, &new_token).await.status() != 200 {
        assert!(
            Instant::now() < deadline,
            "the rotated key was never picked up"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(me(&server, &old_token).await.status(), 200);
    let jwks: Value = server
        .http
        .get(server.url("/.well-known/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids.len(), 2, "{jwks}");
    assert_eq!(kids[0], kid, "the current key comes first");
    // New logins are signed with the new key.
    let fresh = server.admin_token().await;
    let output = node(
        "verify_login.mjs",
        &[
            &server.base_url,
            &server.admin_name,
            server.admin_password.as_deref().unwrap(),
        ],
        None,
    )
    .await;
    assert!(output.status.success());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["header"]["kid"], kid);
    assert_eq!(me(&server, &fresh).await.status(), 200);
    server.stop().await;
}

// ---- passwords, setup tokens, throttling -------------------------------------------------------

#[tokio::test]
async fn unknown_user_and_wrong_password_get_the_same_answer_and_work() {
    let server = TestServer::start().await;
    let attempt = |username: String, password: &'static str| {
        let request = server
            .http
            .post(server.url("/auth/login"))
            .json(&json!({"username": username, "password": password}));
        async move {
            let started = Instant::now();
            let response = request.send().await.unwrap();
            (started.elapsed(), response)
        }
    };
    let mut wrong_password = Vec::new();
    let mut unknown_user = Vec::new();
    for _ in 0..3 {
        let (elapsed, response) = attempt(server.admin_name.clone(), "wrong password").await;
        let body = assert_envelope(response, 401, "INVALID_CREDENTIALS").await;
        wrong_password.push((elapsed, body["errors"][0]["message"].clone()));
        let (elapsed, response) = attempt(unique_name(&server, "nobody"), "wrong password").await;
        let body = assert_envelope(response, 401, "INVALID_CREDENTIALS").await;
        unknown_user.push((elapsed, body["errors"][0]["message"].clone()));
    }
    assert_eq!(wrong_password[0].1, unknown_user[0].1, "same message");
    // Both spend an argon2 verification: neither answers in a fraction of the other's time.
    let median = |mut samples: Vec<(Duration, Value)>| {
        samples.sort_by_key(|s| s.0);
        samples[1].0
    };
    let (known, unknown) = (median(wrong_password), median(unknown_user));
    assert!(
        unknown * 3 > known && known * 3 > unknown,
        "wrong password {known:?} vs unknown user {unknown:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn passwords_outside_8_to_1024_characters_are_weak() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let name = unique_name(&server, "pw");
    let created: Value = post_json_as(&server, &admin, "/iam/principals", json!({"name": name}))
        .await
        .json()
        .await
        .unwrap();
    let setup = created["setupToken"].as_str().unwrap();
    for length in [0, 7, 1025, 100_000] {
        let response = post_json(
            &server,
            "/auth/set-password",
            json!({"setupToken": setup, "password": "p".repeat(length)}),
        )
        .await;
        let body = assert_envelope(response, 422, "WEAK_PASSWORD").await;
        assert_eq!(body["errors"][0]["scope"], "field", "{length}");
        assert_eq!(body["errors"][0]["target"], "password", "{length}");
    }
    // Weak attempts did not use the token up; 8 and 1024 characters (multi-byte ones too) pass.
    let response = post_json(
        &server,
        "/auth/set-password",
        json!({"setupToken": setup, "password": "é".repeat(1024)}),
    )
    .await;
    assert_eq!(response.status(), 200);
    server.login(&name, &"é".repeat(1024)).await;
    // Logging in with absurd passwords is a plain failure, never a crash.
    for length in [0, 7, 1025, 100_000] {
        let response = post_json(
            &server,
            "/auth/login",
            json!({"username": name, "password": "p".repeat(length)}),
        )
        .await;
        assert_envelope(response, 401, "INVALID_CREDENTIALS").await;
    }
    let reset: Value = post_json_as(
        &server,
        &admin,
        &format!(
            "/iam/principals/{}/reset-token",
            created["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await
    .json()
    .await
    .unwrap();
    let response = post_json(
        &server,
        "/auth/set-password",
        json!({"setupToken": reset["setupToken"], "password": "12345678"}),
    )
    .await;
    assert_eq!(response.status(), 200);
    server.login(&name, "12345678").await;
    server.stop().await;
}

#[tokio::test]
async fn setup_tokens_are_single_use_replaced_by_resets_and_expire() {
    let server = TestServer::start_with(|config| {
        config.auth.setup_token_ttl = Duration::from_secs(2);
    })
    .await;
    let admin = server.admin_token().await;
    let name = unique_name(&server, "setup");
    let created: Value = post_json_as(&server, &admin, "/iam/principals", json!({"name": name}))
        .await
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let set = |token: Value, password: &str| {
        post_json(
            &server,
            "/auth/set-password",
            json!({"setupToken": token, "password": password}),
        )
    };
    // Concurrent uses of one token: exactly one wins.
    let attempts = concurrently(
        (0..6)
            .map(|i| {
                server
                    .http
                    .post(server.url("/auth/set-password"))
                    .json(&json!({
                        "setupToken": created["setupToken"],
                        "password": format!("password-{i}"),
                    }))
            })
            .collect(),
    )
    .await;
    let winners = attempts.iter().filter(|r| r.status() == 200).count();
    assert_eq!(winners, 1);
    for response in attempts.into_iter().filter(|r| r.status() != 200) {
        assert_envelope(response, 401, "INVALID_SETUP_TOKEN").await;
    }
    // Replayed later: refused.
    let response = set(created["setupToken"].clone(), "another password").await;
    assert_envelope(response, 401, "INVALID_SETUP_TOKEN").await;
    // A new reset token makes the previous unused one worthless.
    let reset_path = format!("/iam/principals/{id}/reset-token");
    let first: Value = server
        .http
        .post(server.url(&reset_path))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(first["expiresIn"], 2);
    let second: Value = post_json_as(&server, &admin, &reset_path, json!({}))
        .await
        .json()
        .await
        .unwrap();
    let response = set(first["setupToken"].clone(), "a fine password").await;
    assert_envelope(response, 401, "INVALID_SETUP_TOKEN").await;
    // And tokens expire (by the database's clock).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let response = set(second["setupToken"].clone(), "a fine password").await;
    assert_envelope(response, 401, "INVALID_SETUP_TOKEN").await;
    let response = set(json!("never-issued"), "a fine password").await;
    assert_envelope(response, 401, "INVALID_SETUP_TOKEN").await;
    server.stop().await;
}

/// Sends all requests at once and returns their responses in order.
pub async fn concurrently(requests: Vec<reqwest::RequestBuilder>) -> Vec<Response> {
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|request| tokio::spawn(request.send()))
        .collect();
    let mut responses = Vec::new();
    for task in tasks {
        responses.push(task.await.unwrap().unwrap());
    }
    responses
}

#[tokio::test]
async fn repeated_failures_are_rate_limited_per_username_and_per_address() {
    let server = TestServer::start_with(|config| {
        config.auth.throttle.max_address_failures = 25;
    })
    .await;
    let name = unique_name(&server, "victim");
    let victim = server.create_principal(&name, false).await;
    let login = |username: String, password: String| {
        post_json(
            &server,
            "/auth/login",
            json!({"username": username, "password": password}),
        )
    };
    // Nine failures, then a success, reset the username's count.
    for _ in 0..9 {
        assert_eq!(login(name.clone(), "wrong".into()).await.status(), 401);
    }
    assert_eq!(
        login(name.clone(), victim.password.clone()).await.status(),
        200
    );
    for _ in 0..10 {
        assert_eq!(login(name.clone(), "wrong".into()).await.status(), 401);
    }
    // The eleventh attempt is refused, even with the right password.
    for password in ["wrong".to_owned(), victim.password.clone()] {
        let response = login(name.clone(), password).await;
        let retry: u64 = response.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry > 0 && retry <= 901, "{retry}");
        assert_envelope(response, 429, "RATE_LIMITED").await;
    }
    // Other usernames are not blocked by it...
    server.admin_token().await;
    // ...until the address has failed 25 times in the window (19 so far).
    for i in 0..6 {
        let response = login(format!("{name}_other{i}"), "wrong".into()).await;
        assert_eq!(response.status(), 401);
    }
    let response = login(server.admin_name.clone(), "wrong".into()).await;
    assert_envelope(response, 429, "RATE_LIMITED").await;
    // The counters live in PostgreSQL, where every instance sees them.
    let client = server.db.client().await;
    let rows = client
        .query(
            "SELECT scope, failures FROM hf.login_failures ORDER BY scope",
            &[],
        )
        .await
        .unwrap();
    assert!(rows
        .iter()
        .any(|r| r.get::<_, &str>(0) == "address" && r.get::<_, i32>(1) >= 25));
    server.stop().await;
}

// ---- SSH logins ----------------------------------------------------------------------------------

#[tokio::test]
async fn ssh_logins_with_real_ssh_keygen_keys() {
    let server = TestServer::start().await;
    let scratch = Scratch::new(&server, "ssh-ok");
    let name = unique_name(&server, "ssh");
    let principal = server.create_principal(&name, false).await;
    for (file, kind) in [
        ("ed25519", &["-t", "ed25519"][..]),
        ("ecdsa", &["-t", "ecdsa", "-b", "256"][..]),
        ("rsa", &["-t", "rsa", "-b", "2048"][..]),
    ] {
        let (key, public) = ssh_keygen(&scratch.0, file, kind);
        // A principal attaches its own key.
        let response = attach_key(&server, &principal.token, &principal.id, &public).await;
        assert_eq!(response.status(), 201, "{file}");
        let credential: Value = response.json().await.unwrap();
        assert_eq!(credential["kind"], "ssh");
        assert!(credential["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("SHA256:"));
        assert_eq!(credential["comment"], format!("{file}@hf-test"));
        assert_eq!(credential["lastUsedAt"], Value::Null);

        let nonce = challenge(&server, &name).await;
        let signature = ssh_sign(&key, "hf-auth", &nonce);
        let response = verify(&server, &name, &nonce, &signature).await;
        assert_eq!(
            response.status(),
            200,
            "{file}: {}",
            response.text().await.unwrap()
        );
        let body: Value = response.json().await.unwrap();
        let profile = me_json(&server, body["token"].as_str().unwrap()).await;
        assert_eq!(profile["pgRole"], name.as_str());
    }
    let credentials: Value = server
        .http
        .get(server.url(&format!("/iam/principals/{}/credentials", principal.id)))
        .bearer_auth(&principal.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let credentials = credentials.as_array().unwrap();
    assert_eq!(credentials.len(), 4, "a password and three keys");
    assert!(credentials
        .iter()
        .filter(|c| c["kind"] == "ssh")
        .all(|c| c["lastUsedAt"].is_string()));
    server.stop().await;
}

#[tokio::test]
async fn bad_ssh_signatures_and_replays_are_refused() {
    let server = TestServer::start_with(|config| {
        config.auth.nonce_ttl = Duration::from_secs(2);
    })
    .await;
    let scratch = Scratch::new(&server, "ssh-bad");
    let name = unique_name(&server, "alice");
    let alice = server.create_principal(&name, false).await;
    let other_name = unique_name(&server, "mallory");
    let mallory = server.create_principal(&other_name, false).await;
    let (alice_key, alice_public) = ssh_keygen(&scratch.0, "alice", &["-t", "ed25519"]);
    let (mallory_key, mallory_public) = ssh_keygen(&scratch.0, "mallory", &["-t", "ed25519"]);
    let (revoked_key, revoked_public) = ssh_keygen(&scratch.0, "revoked", &["-t", "ecdsa"]);
    assert_eq!(
        attach_key(&server, &alice.token, &alice.id, &alice_public)
            .await
            .status(),
        201
    );
    assert_eq!(
        attach_key(&server, &mallory.token, &mallory.id, &mallory_public)
            .await
            .status(),
        201
    );
    let revoked: Value = attach_key(&server, &alice.token, &alice.id, &revoked_public)
        .await
        .json()
        .await
        .unwrap();
    let response = server
        .http
        .delete(server.url(&format!(
            "/iam/principals/{}/credentials/{}",
            alice.id,
            revoked["id"].as_str().unwrap()
        )))
        .bearer_auth(&alice.token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);

    let refused = |response: Response| async move {
        assert_envelope(response, 401, "INVALID_SIGNATURE").await;
    };
    // Replay: the second use of a nonce fails even with a valid signature.
    let nonce = challenge(&server, &name).await;
    let signature = ssh_sign(&alice_key, "hf-auth", &nonce);
    assert_eq!(
        verify(&server, &name, &nonce, &signature).await.status(),
        200
    );
    refused(verify(&server, &name, &nonce, &signature).await).await;
    // The wrong namespace.
    let nonce = challenge(&server, &name).await;
    refused(verify(&server, &name, &nonce, &ssh_sign(&alice_key, "git", &nonce)).await).await;
    // A signature over another nonce.
    let nonce = challenge(&server, &name).await;
    let other_nonce = challenge(&server, &name).await;
    refused(
        verify(
            &server,
            &name,
            &nonce,
            &ssh_sign(&alice_key, "hf-auth", &other_nonce),
        )
        .await,
    )
    .await;
    // A key of another principal.
    let nonce = challenge(&server, &name).await;
    refused(
        verify(
            &server,
            &name,
            &nonce,
            &ssh_sign(&mallory_key, "hf-auth", &nonce),
        )
        .await,
    )
    .await;
    // A revoked key.
    let nonce = challenge(&server, &name).await;
    refused(
        verify(
            &server,
            &name,
            &nonce,
            &ssh_sign(&revoked_key, "hf-auth", &nonce),
        )
        .await,
    )
    .await;
    // A nonce issued for another username, signed correctly by the other principal.
    let nonce = challenge(&server, &other_name).await;
    refused(
        verify(
            &server,
            &name,
            &nonce,
            &ssh_sign(&alice_key, "hf-auth", &nonce),
        )
        .await,
    )
    .await;
    // Malformed signatures.
    for garbage in [
        String::new(),
        "not a signature".to_owned(),
        "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n".to_owned(),
        ssh_sign(&alice_key, "hf-auth", "x").replace('A', "B"),
        "-----BEGIN SSH SIGNATURE-----\n".to_owned() + &"A".repeat(20_000),
    ] {
        let nonce = challenge(&server, &name).await;
        refused(verify(&server, &name, &nonce, &garbage).await).await;
    }
    // An expired nonce (judged by the database's clock).
    let nonce = challenge(&server, &name).await;
    let signature = ssh_sign(&alice_key, "hf-auth", &nonce);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    refused(verify(&server, &name, &nonce, &signature).await).await;
    // A nonce never issued, and an unknown username (which still gets a nonce at challenge).
    refused(verify(&server, &name, "never-issued", &signature).await).await;
    let stranger = unique_name(&server, "stranger");
    let nonce = challenge(&server, &stranger).await;
    refused(
        verify(
            &server,
            &stranger,
            &nonce,
            &ssh_sign(&alice_key, "hf-auth", &nonce),
        )
        .await,
    )
    .await;
    let nonce = challenge(&server, "bad:name\u{0}").await;
    refused(verify(&server, "bad:name\u{0}", &nonce, &signature).await).await;
    server.stop().await;
}

#[tokio::test]
async fn malformed_and_unsupported_public_keys_are_refused() {
    let server = TestServer::start().await;
    let scratch = Scratch::new(&server, "ssh-keys");
    let admin = server.admin_token().await;
    let me_id = me_json(&server, &admin).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, ed25519) = ssh_keygen(&scratch.0, "ok", &["-t", "ed25519"]);
    let (_, ecdsa384) = ssh_keygen(&scratch.0, "p384", &["-t", "ecdsa", "-b", "384"]);
    let (_, rsa1024) = ssh_keygen(&scratch.0, "rsa1024", &["-t", "rsa", "-b", "1024"]);
    let private = std::fs::read_to_string(scratch.0.join("ok")).unwrap();
    let fields: Vec<&str> = ed25519.split(' ').collect();
    for bad in [
        String::new(),
        "ssh-ed25519".to_owned(),
        "ssh-ed25519 AAAA".to_owned(),
        format!("ssh-ed25519 {}", &fields[1][..fields[1].len() - 8]),
        format!("ssh-rsa {}", fields[1]),
        ecdsa384,
        rsa1024,
        private,
        format!("{ed25519}\n{ed25519}"),
        format!("{ed25519} evil\u{1b}[2J"),
        format!("ssh-ed25519 {}", "A".repeat(10_000)),
        "'; DROP TABLE hf.credentials; --".to_owned(),
    ] {
        let response = attach_key(&server, &admin, &me_id, &bad).await;
        let body = assert_envelope(response, 422, "INVALID_PUBLIC_KEY").await;
        assert_eq!(body["errors"][0]["target"], "publicKey");
    }
    assert_eq!(
        attach_key(&server, &admin, &me_id, &ed25519).await.status(),
        201
    );
    let response = attach_key(&server, &admin, &me_id, &ed25519).await;
    assert_envelope(response, 409, "ALREADY_EXISTS").await;
    let response = post_json_as(
        &server,
        &admin,
        &format!("/iam/principals/{me_id}/credentials"),
        json!({"kind": "password", "publicKey": ed25519}),
    )
    .await;
    let body = assert_envelope(response, 400, "INVALID_BODY").await;
    assert_eq!(body["errors"][0]["target"], "kind");
    server.stop().await;
}

// ---- browser sessions ----------------------------------------------------------------------------

#[tokio::test]
async fn session_exchange_sets_the_cookie_and_serves_the_frame() {
    let server = TestServer::start_with(|config| {
        config.auth.token_ttl = Duration::from_secs(1800);
    })
    .await;
    let admin = server.admin_token().await;
    // No body and `{}` are both accepted; anything else is not.
    let response = server
        .http
        .post(server.url("/auth/session"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session: Value = response.json().await.unwrap();
    assert_eq!(session["expiresIn"], 60);
    let response = post_json_as(&server, &admin, "/auth/session", json!({})).await;
    assert_eq!(response.status(), 200);
    let response = post_json_as(&server, &admin, "/auth/session", json!({"x": 1})).await;
    assert_envelope(response, 400, "INVALID_BODY").await;
    assert_envelope(
        server
            .http
            .post(server.url("/auth/session"))
            .send()
            .await
            .unwrap(),
        401,
        "UNAUTHENTICATED",
    )
    .await;

    let code = session["code"].as_str().unwrap();
    let exchange = |query: String| {
        server
            .http
            .get(server.url(&format!("/auth/session/exchange{query}")))
            .send()
    };
    let response = exchange(format!("?code={code}&screen=crm/accounts"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert!(headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(headers["cache-control"], "no-store");
    let cookie = headers["set-cookie"].to_str().unwrap().to_owned();
    let token = cookie
        .strip_prefix("hf_runtime=")
        .and_then(|rest| rest.split(';').next())
        .unwrap()
        .to_owned();
    let attributes: Vec<&str> = cookie.split("; ").skip(1).collect();
    assert_eq!(
        attributes,
        [
            "Path=/hfx/modules",
            "HttpOnly",
            "SameSite=Strict",
            "Max-Age=1800"
        ],
        "plain HTTP: no Secure"
    );
    let page = response.text().await.unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.contains("window.__HF_SESSION__"));
    assert!(page.contains(&token));
    assert!(page.contains("crm/accounts"));
    // The session token is a working token of the same principal...
    assert_eq!(
        me_json(&server, &token).await["pgRole"],
        server.admin_name.as_str()
    );
    // ...but as a cookie it does not authenticate outside /hfx/modules.
    let response = server
        .http
        .get(server.url("/auth/me"))
        .header("cookie", format!("hf_runtime={token}"))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    let response = server
        .http
        .get(server.url("/iam/principals"))
        .header("cookie", format!("hf_runtime={token}"))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    // Under /hfx/modules it does: the request gets past authentication to the route itself.
    let module = server.url("/hfx/modules/0000000000000000000000000000000000000000-crm-home.js");
    let response = server.http.get(&module).send().await.unwrap();
    assert_envelope(response, 401, "UNAUTHENTICATED").await;
    let response = server
        .http
        .get(&module)
        .header("cookie", format!("hf_runtime={token}"))
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 401);

    // Replayed and unknown codes get the JSON envelope, never a page; a missing one is a
    // missing required parameter, 400.
    for query in [format!("?code={code}"), "?code=nope".to_owned()] {
        let response = exchange(query).await.unwrap();
        assert_envelope(response, 401, "INVALID_CODE").await;
    }
    let response = exchange(String::new()).await.unwrap();
    assert_envelope(response, 400, "INVALID_QUERY").await;
    let fresh: Value = post_json_as(&server, &admin, "/auth/session", json!({}))
        .await
        .json()
        .await
        .unwrap();
    let response = exchange(format!(
        "?code={}&screen=%3Cscript%3E",
        fresh["code"].as_str().unwrap()
    ))
    .await
    .unwrap();
    assert_envelope(response, 400, "INVALID_QUERY").await;
    // A bad `screen` did not use the code up; concurrent exchanges of it: exactly one wins.
    let code = fresh["code"].as_str().unwrap().to_owned();
    let attempts = concurrently(
        (0..6)
            .map(|_| {
                server
                    .http
                    .get(server.url(&format!("/auth/session/exchange?code={code}")))
            })
            .collect(),
    )
    .await;
    assert_eq!(attempts.iter().filter(|r| r.status() == 200).count(), 1);
    server.stop().await;
}

#[tokio::test]
async fn session_codes_expire() {
    let server = TestServer::start_with(|config| {
        config.auth.session_code_ttl = Duration::from_secs(1);
    })
    .await;
    let admin = server.admin_token().await;
    let session: Value = post_json_as(&server, &admin, "/auth/session", json!({}))
        .await
        .json()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let response = server
        .http
        .get(server.url(&format!(
            "/auth/session/exchange?code={}",
            session["code"].as_str().unwrap()
        )))
        .send()
        .await
        .unwrap();
    assert_envelope(response, 401, "INVALID_CODE").await;
    server.stop().await;
}

#[tokio::test]
async fn me_shows_exactly_the_principal_fields() {
    let server = TestServer::start().await;
    let body = me_json(&server, &server.admin_token().await).await;
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["createdAt", "id", "isAdmin", "pgRole", "sub"]);
    assert_eq!(body["isAdmin"], true);
    assert_envelope(
        server
            .http
            .get(server.url("/auth/me"))
            .send()
            .await
            .unwrap(),
        401,
        "UNAUTHENTICATED",
    )
    .await;
    server.stop().await;
}

#[tokio::test]
async fn unknown_usernames_get_a_nonce_too() {
    let server = TestServer::start().await;
    let mut nonces = Vec::new();
    for username in [unique_name(&server, "nobody"), server.admin_name.clone()] {
        let response = post_json(&server, "/auth/challenge", json!({"username": username})).await;
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["expiresIn"], 300);
        let mut keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["expiresIn", "nonce"]);
        nonces.push(body["nonce"].as_str().unwrap().to_owned());
    }
    assert_eq!(nonces[0].len(), 43, "256 random bits, base64url");
    assert_ne!(nonces[0], nonces[1]);
    server.stop().await;
}

#[tokio::test]
async fn instances_starting_at_once_make_one_admin_and_one_signing_key() {
    let db = hf_testkit::TestDb::new().await;
    let pool = db.pool();
    hf_server::prepare_database(&pool).await.unwrap();
    let mut config = hf_server::auth::AuthConfig {
        admin_name: format!("admin_{}", &db.name()[8..20]),
        ..Default::default()
    };
    config.admin_password = None;
    let mut starts = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (pool, url, config) = (pool.clone(), db.url().to_owned(), config.clone());
        starts.spawn(async move { hf_server::auth::prepare(&pool, &url, &config).await });
    }
    let mut created = 0;
    while let Some(outcome) = starts.join_next().await {
        let (_state, bootstrap) = outcome.unwrap().unwrap();
        if let hf_storage::auth::Bootstrap::CreatedWithSetupToken { setup_token, .. } = &bootstrap {
            assert_eq!(setup_token.text().len(), 43);
            created += 1;
        } else {
            assert!(
                matches!(bootstrap, hf_storage::auth::Bootstrap::NotNeeded),
                "{bootstrap:?}"
            );
        }
    }
    assert_eq!(created, 1);
    let client = db.client().await;
    let keys: i64 = client
        .query_one("SELECT count(*) FROM hf.signing_keys", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(keys, 1);
    let admins: i64 = client
        .query_one("SELECT count(*) FROM hf.principals WHERE is_admin", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(admins, 1);
    // A later start finds the admin and creates nothing.
    let (_, bootstrap) = hf_server::auth::prepare(&pool, db.url(), &config)
        .await
        .unwrap();
    assert!(matches!(bootstrap, hf_storage::auth::Bootstrap::NotNeeded));
    // The admin's role is cluster-wide: drop it the way deleting a principal would.
    let role = format!("\"{}\"", config.admin_name);
    client
        .batch_execute(&format!(
            "REASSIGN OWNED BY {role} TO CURRENT_USER; DROP OWNED BY {role}; DROP ROLE {role};"
        ))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_token_that_worked_stops_when_it_expires() {
    let server = TestServer::start_with(|config| {
        config.auth.token_ttl = Duration::from_secs(2);
        config.auth.leeway = Duration::ZERO;
    })
    .await;
    let token = server.admin_token().await;
    // Used twice, so the second use is answered from the instance's memory of verified tokens.
    assert_eq!(me(&server, &token).await.status(), 200);
    assert_eq!(me(&server, &token).await.status(), 200);
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let body = assert_envelope(me(&server, &token).await, 401, "UNAUTHENTICATED").await;
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
    server.stop().await;
}

#[tokio::test]
async fn authentication_recovers_when_database_connections_die() {
    let server = TestServer::start().await;
    let token = server.admin_token().await;
    assert_eq!(me(&server, &token).await.status(), 200);
    let client = server.db.client().await;
    client
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    // At most the requests already on a dead connection fail, as 503; then it works again.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let response = me(&server, &token).await;
        let status = response.status().as_u16();
        statuses.push(status);
        if status == 200 {
            break;
        }
        assert_envelope(response, 503, "DATABASE_UNAVAILABLE").await;
    }
    assert_eq!(statuses.last(), Some(&200), "{statuses:?}");
    server.stop().await;
}
