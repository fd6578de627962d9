//! Isolation between principals under load, over real HTTP against the demo CRM: many
//! principals with different grants and row-level security policies send interleaved record
//! reads and queries at high concurrency, and every answer must be the one its caller's role
//! allows. The second test terminates the service's database connections while requests are in
//! flight: every answer is then still correct for its caller, or a clean 503 envelope, never an
//! answer given under another caller's role.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use hf_testkit::TestServer;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::auth::unique_name;

/// How many requests are in flight at once.
const CONCURRENCY: usize = 64;

/// Rows each principal's own policy lets it see.
const ROWS_EACH: usize = 3;

/// What a principal's grants and policy let it read of `crm.account`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Member of `hf:authenticated`; its own policy shows only the rows tagged with its name.
    Own,
    /// Like `Own`, and a second policy shows the rows of the next principal too.
    OwnAndNext,
    /// Not a member of `hf:authenticated`: no privilege on the table, every read is refused.
    Nothing,
}

/// One principal of the test with its token and what it may see.
#[derive(Debug)]
struct Principal {
    token: String,
    access: Access,
    /// The tag its rows' names start with (`p07-`).
    tag: String,
}

/// One row of `crm.account`, with the index of the principal whose tag it carries.
#[derive(Debug)]
struct Row {
    id: String,
    name: String,
    owner: usize,
}

/// The principals, their rows and the policies that decide who sees what.
struct World {
    principals: Vec<Principal>,
    rows: Vec<Row>,
}

impl World {
    /// Creates `count` principals on the server, each with its grants and row-level security
    /// policies on `crm.account`, and `ROWS_EACH` rows tagged for each.
    async fn build(server: &TestServer, count: usize) -> World {
        let admin = server.db.client().await;
        admin
            .batch_execute("ALTER TABLE crm.account ENABLE ROW LEVEL SECURITY")
            .await
            .unwrap();
        // Creating a principal hashes a password twice: a few at a time is enough.
        let created: Vec<_> = futures_util::stream::iter(0..count)
            .map(|index| async move {
                let name = unique_name(server, &format!("iso{index:02}"));
                (index, server.create_principal(&name, false).await)
            })
            .buffered(4)
            .collect()
            .await;
        let mut principals = Vec::with_capacity(count);
        let mut rows = Vec::with_capacity(count * ROWS_EACH);
        for (index, created) in created {
            let access = match index % 5 {
                3 => Access::OwnAndNext,
                4 => Access::Nothing,
                _ => Access::Own,
            };
            let tag = format!("p{index:02}-");
            let role = hf_sql::quote_ident(&created.name).unwrap();
            let next_tag = format!("p{:02}-", (index + 1) % count);
            let mut statements = vec![format!(
                "CREATE POLICY {} ON crm.account TO {role} USING (name LIKE '{tag}%')",
                hf_sql::quote_ident(&format!("own_{index}")).unwrap()
            )];
            match access {
                Access::Own => {}
                Access::OwnAndNext => statements.push(format!(
                    "CREATE POLICY {} ON crm.account TO {role} USING (name LIKE '{next_tag}%')",
                    hf_sql::quote_ident(&format!("next_{index}")).unwrap()
                )),
                Access::Nothing => {
                    statements.push(format!("REVOKE \"hf:authenticated\" FROM {role}"));
                }
            }
            admin.batch_execute(&statements.join(";")).await.unwrap();
            for n in 0..ROWS_EACH {
                let name = format!("{tag}{n}");
                let id: String = admin
                    .query_one(
                        "INSERT INTO crm.account (name) VALUES ($1) RETURNING id::text",
                        &[&name],
                    )
                    .await
                    .unwrap()
                    .get(0);
                rows.push(Row {
                    id,
                    name,
                    owner: index,
                });
            }
            principals.push(Principal {
                token: created.token,
                access,
                tag,
            });
        }
        World { principals, rows }
    }

    /// Whether principal `who` may see `row`.
    fn sees(&self, who: usize, row: &Row) -> bool {
        match self.principals[who].access {
            Access::Own => row.owner == who,
            Access::OwnAndNext => {
                row.owner == who || row.owner == (who + 1) % self.principals.len()
            }
            Access::Nothing => false,
        }
    }

    /// The names `who` sees, sorted, or `None` when it may not read the table at all.
    fn visible_names(&self, who: usize) -> Option<Vec<String>> {
        if self.principals[who].access == Access::Nothing {
            return None;
        }
        let mut names: Vec<String> = self
            .rows
            .iter()
            .filter(|row| self.sees(who, row))
            .map(|row| row.name.clone())
            .collect();
        names.sort();
        Some(names)
    }
}

/// One request of the mix: what the caller asks for.
#[derive(Debug, Clone, Copy)]
enum Ask {
    /// `GET /data/crm/account/{id}` of this row.
    Read(usize),
    /// `POST /data/query` listing every account name the caller sees.
    List,
}

/// Sends one request and checks its answer against the caller's access; returns a description
/// of what is wrong, if anything. With `unavailable_allowed`, a 503 `DATABASE_UNAVAILABLE`
/// envelope is a correct answer too (its connection was terminated).
async fn check(
    server: &TestServer,
    world: &World,
    who: usize,
    ask: Ask,
    unavailable_allowed: bool,
) -> Result<bool, String> {
    let principal = &world.principals[who];
    let (request, what) = match ask {
        Ask::Read(row) => {
            let path = format!("/data/crm/account/{}", world.rows[row].id);
            let request = server.http.get(server.url(&path));
            (request, format!("{} GET {path}", principal.tag))
        }
        Ask::List => {
            let query = "SELECT name FROM crm.account ORDER BY name LIMIT 500";
            let request = server
                .http
                .post(server.url("/data/query"))
                .json(&json!({"query": query, "params": {}}));
            (request, format!("{} list", principal.tag))
        }
    };
    let response = request
        .bearer_auth(&principal.token)
        .send()
        .await
        .map_err(|error| format!("{what}: {error}"))?;
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|error| format!("{what}: {error}"))?;
    let body: Value =
        serde_json::from_str(&text).map_err(|_| format!("{what}: not JSON: {text}"))?;
    let code = body["errors"][0]["code"].as_str().unwrap_or("");
    if unavailable_allowed
        && status == StatusCode::SERVICE_UNAVAILABLE
        && code == "DATABASE_UNAVAILABLE"
    {
        return Ok(false);
    }
    let wrong = |expected: &str| Err(format!("{what}: expected {expected}, got {status} {text}"));
    if principal.access == Access::Nothing {
        return if status == StatusCode::FORBIDDEN && code == "FORBIDDEN" {
            Ok(true)
        } else {
            wrong("403 FORBIDDEN")
        };
    }
    match ask {
        Ask::Read(row) => {
            let row = &world.rows[row];
            if world.sees(who, row) {
                if status == StatusCode::OK && body["name"] == row.name.as_str() {
                    Ok(true)
                } else {
                    wrong(&format!("200 with {}", row.name))
                }
            } else if status == StatusCode::NOT_FOUND && code == "RECORD_NOT_FOUND" {
                Ok(true)
            } else {
                wrong("404 RECORD_NOT_FOUND")
            }
        }
        Ask::List => {
            let names: Option<Vec<String>> = body["records"].as_array().map(|records| {
                records
                    .iter()
                    .map(|record| record["name"].as_str().unwrap_or("").to_owned())
                    .collect()
            });
            let expected = world.visible_names(who);
            if status == StatusCode::OK && names == expected {
                Ok(true)
            } else {
                wrong(&format!("200 with {expected:?}"))
            }
        }
    }
}

/// What a run of the mix saw.
#[derive(Debug, Default)]
struct Tally {
    /// Answers that were right for their caller.
    correct: usize,
    /// Clean 503 answers (only when they are allowed).
    unavailable: usize,
    /// Everything that was wrong, described.
    wrong: Vec<String>,
}

/// Runs the request mix at [`CONCURRENCY`] until `duration` has passed. The odd workers walk
/// the principals and rows each in its own order, so requests of different principals
/// interleave on the service's connections; the even workers walk the principals together
/// (eight requests for one principal, then eight for another), so that many reads of one
/// principal are in flight at once and share connections (the service pipelines a caller's
/// concurrent record reads on one connection) while the odd workers' requests of other
/// principals run beside them.
async fn run_mix(
    server: &TestServer,
    world: &World,
    duration: Duration,
    unavailable_allowed: bool,
) -> Tally {
    let deadline = Instant::now() + duration;
    let workers = (0..CONCURRENCY).map(|worker| async move {
        let mut tally = Tally::default();
        let together = worker % 2 == 0;
        let mut step = if together { 0 } else { worker * 7919 };
        while Instant::now() < deadline {
            step += 1;
            let who = if together {
                (step / 8 * 31) % world.principals.len()
            } else {
                (step * 31 + worker) % world.principals.len()
            };
            let ask = if step % 3 == 0 {
                Ask::List
            } else {
                Ask::Read((step * 17 + worker * 13) % world.rows.len())
            };
            match check(server, world, who, ask, unavailable_allowed).await {
                Ok(true) => tally.correct += 1,
                Ok(false) => tally.unavailable += 1,
                Err(problem) => tally.wrong.push(problem),
            }
        }
        tally
    });
    let mut total = Tally::default();
    for tally in futures_util::future::join_all(workers).await {
        total.correct += tally.correct;
        total.unavailable += tally.unavailable;
        total.wrong.extend(tally.wrong);
    }
    total
}

/// How long the interleaving test runs: 60 s, or `HF_ISOLATION_SECONDS` for a quick local run.
fn mix_duration() -> Duration {
    let seconds = std::env::var("HF_ISOLATION_SECONDS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(seconds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_principals_interleaved_never_read_each_others_rows() {
    let server = TestServer::start_demo().await;
    let world = World::build(&server, 50).await;
    let tally = run_mix(&server, &world, mix_duration(), false).await;
    assert!(
        tally.wrong.is_empty(),
        "{} wrong answers of {}; first: {:#?}",
        tally.wrong.len(),
        tally.correct + tally.wrong.len(),
        &tally.wrong[..tally.wrong.len().min(5)]
    );
    assert!(tally.correct > 0, "no request was answered");
    eprintln!("isolation: {} correct answers", tally.correct);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_never_answer_with_another_role() {
    let server = TestServer::start_demo().await;
    let world = World::build(&server, 10).await;
    let database = server.db.name().to_owned();
    let killer_client = server.db.admin_client().await;
    let stop = Arc::new(AtomicUsize::new(0));
    let terminated = Arc::new(AtomicUsize::new(0));
    // Terminates the service's backends that are in the middle of a request, every 20 ms.
    let killer = {
        let stop = stop.clone();
        let terminated = terminated.clone();
        tokio::spawn(async move {
            while stop.load(Ordering::SeqCst) == 0 {
                let row = killer_client
                    .query_one(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE datname = $1 AND pid <> pg_backend_pid() \
                         AND state IN ('active', 'idle in transaction')",
                        &[&database],
                    )
                    .await
                    .unwrap();
                let count: i64 = row.get(0);
                terminated.fetch_add(usize::try_from(count).unwrap(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let tally = run_mix(&server, &world, Duration::from_secs(10), true).await;
    stop.store(1, Ordering::SeqCst);
    killer.await.unwrap();
    // A connection terminated just as its request ended may still sit in the pool for a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        tally.wrong.is_empty(),
        "{} wrong answers; first: {:#?}",
        tally.wrong.len(),
        &tally.wrong[..tally.wrong.len().min(5)]
    );
    let terminated = terminated.load(Ordering::SeqCst);
    assert!(terminated > 0, "no backend was terminated mid-request");
    assert!(tally.correct > 0, "no request was answered");
    eprintln!(
        "terminations: {terminated} backends; {} correct, {} clean 503",
        tally.correct, tally.unavailable
    );

    // Once the killing stops, the pool has replaced its connections and every caller is served.
    let after = run_mix(&server, &world, Duration::from_secs(1), false).await;
    assert!(after.wrong.is_empty(), "{:#?}", after.wrong);
    server.stop().await;
}
