//! The `iam` group over real HTTP: principals as PostgreSQL roles, name rules, the last admin,
//! credentials, and who may call what.

use hf_testkit::TestServer;
use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::auth::{me, post_json, post_json_as, ssh_keygen, unique_name, Scratch};
use crate::support::assert_envelope;

async fn call(
    server: &TestServer,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Response {
    let mut request = server.http.request(method, server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

/// Facts about a role from `pg_roles` and `pg_auth_members`: (can login, groups it is in,
/// granted to the service's role).
async fn role_facts(server: &TestServer, name: &str) -> Option<(bool, Vec<String>, bool)> {
    let client = server.db.client().await;
    let row = client
        .query_opt(
            "SELECT r.rolcanlogin,
                    ARRAY(SELECT g.rolname::text FROM pg_auth_members m
                            JOIN pg_roles g ON g.oid = m.roleid
                           WHERE m.member = r.oid ORDER BY 1),
                    EXISTS (SELECT 1 FROM pg_auth_members m
                             WHERE m.roleid = r.oid
                               AND m.member = (SELECT oid FROM pg_roles WHERE rolname = current_user))
               FROM pg_roles r WHERE r.rolname = $1",
            &[&name],
        )
        .await
        .unwrap()?;
    Some((row.get(0), row.get(1), row.get(2)))
}

#[tokio::test]
async fn principals_are_created_listed_promoted_and_deleted_with_their_roles() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let name = unique_name(&server, "bob");
    let response = post_json_as(&server, &admin, "/iam/principals", json!({"name": name})).await;
    assert_eq!(response.status(), 201);
    let created: Value = response.json().await.unwrap();
    let mut keys: Vec<&str> = created
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["createdAt", "id", "isAdmin", "pgRole", "setupToken", "sub"]
    );
    assert_eq!(created["pgRole"], name.as_str());
    assert_eq!(created["isAdmin"], false);
    assert_eq!(created["setupToken"].as_str().unwrap().len(), 43);
    let id = created["id"].as_str().unwrap().to_owned();

    // The role: NOLOGIN, in hf:authenticated, usable by the service.
    let (can_login, groups, granted) = role_facts(&server, &name).await.unwrap();
    assert!(!can_login);
    assert_eq!(groups, ["hf:authenticated"]);
    assert!(granted, "the service's role can SET ROLE to it");

    let response = call(
        &server,
        Some(&admin),
        Method::GET,
        &format!("/iam/principals/{id}"),
        None,
    )
    .await;
    let fetched: Value = response.json().await.unwrap();
    assert!(fetched.get("setupToken").is_none());
    assert_eq!(fetched["id"], id.as_str());
    assert_eq!(fetched["createdAt"], created["createdAt"]);

    let listed: Value = call(&server, Some(&admin), Method::GET, "/iam/principals", None)
        .await
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pgRole"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "sorted by name");
    assert!(names.contains(&name.as_str()) && names.contains(&server.admin_name.as_str()));

    let principal_path = format!("/iam/principals/{id}");
    let patch = |body: Value| {
        call(
            &server,
            Some(&admin),
            Method::PATCH,
            &principal_path,
            Some(body),
        )
    };
    let promoted: Value = patch(json!({"isAdmin": true})).await.json().await.unwrap();
    assert_eq!(promoted["isAdmin"], true);
    let (_, groups, _) = role_facts(&server, &name).await.unwrap();
    assert_eq!(groups, ["hf:admin", "hf:authenticated"]);
    let unchanged: Value = patch(json!({})).await.json().await.unwrap();
    assert_eq!(unchanged["isAdmin"], true);
    let demoted: Value = patch(json!({"isAdmin": false})).await.json().await.unwrap();
    assert_eq!(demoted["isAdmin"], false);
    let (_, groups, _) = role_facts(&server, &name).await.unwrap();
    assert_eq!(groups, ["hf:authenticated"]);
    assert_envelope(patch(json!({"isAdmin": "yes"})).await, 400, "INVALID_BODY").await;
    assert_envelope(patch(json!({"name": "x"})).await, 400, "INVALID_BODY").await;

    let response = call(
        &server,
        Some(&admin),
        Method::DELETE,
        &format!("/iam/principals/{id}"),
        None,
    )
    .await;
    assert_eq!(response.status(), 204);
    assert!(
        role_facts(&server, &name).await.is_none(),
        "the role is dropped"
    );
    let response = call(
        &server,
        Some(&admin),
        Method::GET,
        &format!("/iam/principals/{id}"),
        None,
    )
    .await;
    assert_envelope(response, 404, "PRINCIPAL_NOT_FOUND").await;
    let response = call(
        &server,
        Some(&admin),
        Method::DELETE,
        &format!("/iam/principals/{id}"),
        None,
    )
    .await;
    assert_envelope(response, 404, "PRINCIPAL_NOT_FOUND").await;
    server.stop().await;
}

#[tokio::test]
async fn names_are_checked_and_quoted_never_spliced() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let tag = &server.db.name()[8..16];
    for bad in [
        String::new(),
        format!("a:{tag}"),
        format!("hf:{tag}"),
        format!("pg_{tag}"),
        format!("PG_{tag}"),
        "x".repeat(64),
        "é".repeat(32),
        format!("line\nbreak{tag}"),
        format!("nul\u{0}{tag}"),
        format!("tab\t{tag}"),
        format!("del\u{7f}{tag}"),
        format!("esc\u{1b}[31m{tag}"),
        "public".to_owned(),
        "none".to_owned(),
    ] {
        let response = post_json_as(&server, &admin, "/iam/principals", json!({"name": bad})).await;
        let body = assert_envelope(response, 400, "INVALID_NAME").await;
        assert_eq!(body["errors"][0]["scope"], "field", "{bad:?}");
        assert_eq!(body["errors"][0]["target"], "name", "{bad:?}");
    }
    // Quotes, spaces, SQL and 63 bytes are fine: the name is quoted, and becomes the role exactly.
    for good in [
        format!("{tag}\"; DROP ROLE postgres; --"),
        format!("Robert'); DROP TABLE hf.principals;-- {tag}"),
        format!("{tag} with spaces AND \"quotes\""),
        format!("{tag}{}", "x".repeat(63 - tag.len())),
        format!("{tag}-ünïcødé-名前"),
        format!("{tag}$$ OR 1=1 $$"),
    ] {
        let response =
            post_json_as(&server, &admin, "/iam/principals", json!({"name": good})).await;
        assert_eq!(response.status(), 201, "{good:?}");
        let created: Value = response.json().await.unwrap();
        assert_eq!(created["pgRole"], good.as_str());
        assert!(role_facts(&server, &good).await.is_some(), "{good:?}");
    }
    let client = server.db.client().await;
    let alive: bool = client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'postgres')
                AND to_regclass('hf.principals') IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(alive);
    server.stop().await;
}

#[tokio::test]
async fn names_of_existing_roles_and_principals_are_taken() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let outside = unique_name(&server, "outside");
    let client = server.db.client().await;
    client
        .batch_execute(&format!("CREATE ROLE \"{outside}\" NOLOGIN"))
        .await
        .unwrap();
    let name = unique_name(&server, "dup");
    assert_eq!(
        post_json_as(&server, &admin, "/iam/principals", json!({"name": name}))
            .await
            .status(),
        201
    );
    for taken in [
        "postgres".to_owned(),
        "hf:admin".to_owned(),
        outside.clone(),
        name.clone(),
        server.admin_name.clone(),
    ] {
        let response =
            post_json_as(&server, &admin, "/iam/principals", json!({"name": taken})).await;
        let expected = if taken.contains(':') {
            "INVALID_NAME"
        } else {
            "ALREADY_EXISTS"
        };
        let status = if taken.contains(':') { 400 } else { 409 };
        let body = assert_envelope(response, status, expected).await;
        if status == 409 {
            // A request-scope entry: no target; the message names the taken name.
            assert_eq!(body["errors"][0]["target"], serde_json::Value::Null);
            assert!(body["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains(taken.as_str()));
        }
    }
    // Concurrent creations of one name: exactly one wins, the rest are told it is taken.
    let racing = unique_name(&server, "race");
    let responses = crate::auth::concurrently(
        (0..5)
            .map(|_| {
                server
                    .http
                    .post(server.url("/iam/principals"))
                    .bearer_auth(&admin)
                    .json(&json!({"name": racing}))
            })
            .collect(),
    )
    .await;
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 409).count(),
        4,
        "{statuses:?}"
    );
    client
        .batch_execute(&format!("DROP ROLE \"{outside}\""))
        .await
        .unwrap();
    server.stop().await;
}

#[tokio::test]
async fn the_last_admin_can_be_neither_deleted_nor_demoted() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let own_id = me(&server, &admin).await.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/iam/principals/{own_id}");
    let response = call(&server, Some(&admin), Method::DELETE, &path, None).await;
    assert_envelope(response, 409, "LAST_ADMIN").await;
    let response = call(
        &server,
        Some(&admin),
        Method::PATCH,
        &path,
        Some(json!({"isAdmin": false})),
    )
    .await;
    assert_envelope(response, 409, "LAST_ADMIN").await;
    // With a second admin, the first can step down, and then the second is the last one.
    let second = server
        .create_principal(&unique_name(&server, "second"), true)
        .await;
    let response = call(
        &server,
        Some(&admin),
        Method::PATCH,
        &path,
        Some(json!({"isAdmin": false})),
    )
    .await;
    assert_eq!(response.status(), 200);
    let response = call(
        &server,
        Some(&second.token),
        Method::DELETE,
        &format!("/iam/principals/{}", second.id),
        None,
    )
    .await;
    assert_envelope(response, 409, "LAST_ADMIN").await;
    // Two admins deleting each other at once: one delete wins, the last admin survives.
    let response = call(
        &server,
        Some(&second.token),
        Method::PATCH,
        &path,
        Some(json!({"isAdmin": true})),
    )
    .await;
    assert_eq!(response.status(), 200);
    let admin = server.admin_token().await;
    let responses = crate::auth::concurrently(vec![
        server
            .http
            .delete(server.url(&format!("/iam/principals/{}", second.id)))
            .bearer_auth(&admin),
        server
            .http
            .delete(server.url(&path))
            .bearer_auth(&second.token),
    ])
    .await;
    let statuses: Vec<u16> = responses.iter().map(|r| r.status().as_u16()).collect();
    assert!(statuses.contains(&204), "{statuses:?}");
    let client = server.db.client().await;
    let admins: i64 = client
        .query_one("SELECT count(*) FROM hf.principals WHERE is_admin", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(admins, 1, "{statuses:?}");
    server.stop().await;
}

#[tokio::test]
async fn non_admins_are_forbidden_every_admin_route_and_anonymous_callers_all() {
    let server = TestServer::start().await;
    let user = server
        .create_principal(&unique_name(&server, "plain"), false)
        .await;
    let admin = server.admin_token().await;
    let admin_id = me(&server, &admin).await.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = format!("/iam/principals/{admin_id}");
    let routes: Vec<(Method, String, Option<Value>)> = vec![
        (
            Method::POST,
            "/iam/principals".into(),
            Some(json!({"name": "whatever"})),
        ),
        (Method::GET, "/iam/principals".into(), None),
        (Method::GET, other.clone(), None),
        (Method::GET, format!("/iam/principals/{}", user.id), None),
        (
            Method::PATCH,
            other.clone(),
            Some(json!({"isAdmin": false})),
        ),
        (
            Method::PATCH,
            format!("/iam/principals/{}", user.id),
            Some(json!({"isAdmin": true})),
        ),
        (Method::DELETE, other.clone(), None),
        (Method::POST, format!("{other}/reset-token"), None),
        (
            Method::POST,
            format!("/iam/principals/{}/reset-token", user.id),
            None,
        ),
        (Method::GET, format!("{other}/credentials"), None),
        (
            Method::POST,
            format!("{other}/credentials"),
            Some(json!({"kind": "ssh", "publicKey": "ssh-ed25519 AAAA"})),
        ),
        (
            Method::DELETE,
            format!("{other}/credentials/00000000-0000-0000-0000-000000000000"),
            None,
        ),
        (
            Method::GET,
            "/iam/principals/not-a-uuid/credentials".into(),
            None,
        ),
    ];
    for (method, path, body) in &routes {
        let response = call(
            &server,
            Some(&user.token),
            method.clone(),
            path,
            body.clone(),
        )
        .await;
        let text = format!("{method} {path}");
        let body = assert_envelope(response, 403, "FORBIDDEN").await;
        assert!(!body.to_string().contains("setupToken"), "{text}");
        let response = call(&server, None, method.clone(), path, None).await;
        assert_envelope(response, 401, "UNAUTHENTICATED").await;
    }
    // None of it happened.
    let listed: Value = call(&server, Some(&admin), Method::GET, "/iam/principals", None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["pgRole"] != "whatever"));
    server.stop().await;
}

#[tokio::test]
async fn principals_manage_their_own_credentials() {
    let server = TestServer::start().await;
    let scratch = Scratch::new(&server, "own-creds");
    let name = unique_name(&server, "self");
    let user = server.create_principal(&name, false).await;
    let base = format!("/iam/principals/{}/credentials", user.id);
    let listed: Value = call(&server, Some(&user.token), Method::GET, &base, None)
        .await
        .json()
        .await
        .unwrap();
    let credentials = listed.as_array().unwrap();
    assert_eq!(credentials.len(), 1);
    let password = &credentials[0];
    assert_eq!(password["kind"], "password");
    for key in ["fingerprint", "publicKey", "comment"] {
        assert_eq!(password[key], Value::Null, "{key} is present and null");
    }
    assert!(password["lastUsedAt"].is_null() || password["lastUsedAt"].is_string());
    let (_, public) = ssh_keygen(&scratch.0, "own", &["-t", "ed25519"]);
    let response = call(
        &server,
        Some(&user.token),
        Method::POST,
        &base,
        Some(json!({"kind": "ssh", "publicKey": public})),
    )
    .await;
    assert_eq!(response.status(), 201);
    let key: Value = response.json().await.unwrap();
    assert_eq!(key["publicKey"], public.as_str());
    let mut fields: Vec<&str> = key
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "comment",
            "createdAt",
            "fingerprint",
            "id",
            "kind",
            "lastUsedAt",
            "publicKey"
        ]
    );
    // Revoking the password: it can no longer log in.
    let response = call(
        &server,
        Some(&user.token),
        Method::DELETE,
        &format!("{base}/{}", password["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_eq!(response.status(), 204);
    let response = post_json(
        &server,
        "/auth/login",
        json!({"username": name, "password": user.password}),
    )
    .await;
    assert_envelope(response, 401, "INVALID_CREDENTIALS").await;
    let response = call(
        &server,
        Some(&user.token),
        Method::DELETE,
        &format!("{base}/{}", password["id"].as_str().unwrap()),
        None,
    )
    .await;
    assert_envelope(response, 404, "CREDENTIAL_NOT_FOUND").await;
    let response = call(
        &server,
        Some(&user.token),
        Method::DELETE,
        &format!("{base}/nope"),
        None,
    )
    .await;
    assert_envelope(response, 404, "CREDENTIAL_NOT_FOUND").await;
    server.stop().await;
}

#[tokio::test]
async fn unknown_ids_are_not_found() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let missing = "/iam/principals/7f0c1a52-31cf-4f9a-9c43-0a1b2c3d4e5f";
    for (method, path, body) in [
        (Method::GET, missing.to_owned(), None),
        (Method::GET, "/iam/principals/not-a-uuid".to_owned(), None),
        (
            Method::PATCH,
            missing.to_owned(),
            Some(json!({"isAdmin": true})),
        ),
        (Method::DELETE, missing.to_owned(), None),
        (Method::POST, format!("{missing}/reset-token"), None),
        (Method::GET, format!("{missing}/credentials"), None),
        (
            Method::DELETE,
            format!("{missing}/credentials/7f0c1a52-31cf-4f9a-9c43-0a1b2c3d4e5f"),
            None,
        ),
        (
            Method::GET,
            "/iam/principals/%27%3B--/credentials".to_owned(),
            None,
        ),
    ] {
        let response = call(&server, Some(&admin), method, &path, body).await;
        let body = assert_envelope(response, 404, "PRINCIPAL_NOT_FOUND").await;
        assert_eq!(body["errors"][0]["scope"], "record", "{path}");
    }
    server.stop().await;
}

#[tokio::test]
async fn deleting_a_principal_reassigns_what_its_role_owns() {
    let server = TestServer::start().await;
    let admin = server.admin_token().await;
    let name = unique_name(&server, "owner");
    let user = server.create_principal(&name, false).await;
    let role = format!("\"{name}\"");
    let client = server.db.client().await;
    client
        .batch_execute(&format!(
            "CREATE SCHEMA owned_stuff;
             GRANT CREATE, USAGE ON SCHEMA owned_stuff TO {role};
             SET ROLE {role};
             CREATE TABLE owned_stuff.mine (id int);
             RESET ROLE;"
        ))
        .await
        .unwrap();
    let response = call(
        &server,
        Some(&admin),
        Method::DELETE,
        &format!("/iam/principals/{}", user.id),
        None,
    )
    .await;
    assert_eq!(response.status(), 204);
    let owner: String = client
        .query_one(
            "SELECT tableowner::text FROM pg_tables WHERE schemaname = 'owned_stuff'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let current: String = client
        .query_one("SELECT current_user::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        owner, current,
        "the table now belongs to the service's role"
    );
    assert!(role_facts(&server, &name).await.is_none());
    server.stop().await;
}
