//! `hf serve` with its own PostgreSQL: when the postmaster is killed, the service reaps it,
//! starts it again on its own and loses nothing; when the disk under it is full, `/status`
//! says so, and it starts once there is room.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests fail loudly")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A running `hf serve` with an embedded cluster in a scratch data directory; killed and
/// cleaned up when dropped.
struct Service {
    child: Child,
    data_dir: PathBuf,
    base_url: String,
}

impl Service {
    fn start() -> Self {
        let data_dir = std::env::temp_dir().join(format!("hf-embedded-test-{}", uuid_like()));
        std::fs::create_dir_all(&data_dir).unwrap();
        Self::start_in(data_dir)
    }

    /// Starts the service on `data_dir`, which exists.
    fn start_in(data_dir: PathBuf) -> Self {
        // The cluster runs as `postgres` when the tests run as root; it must reach the directory.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_hf"))
            .args(["serve", "--demo"])
            .env_remove("HF_DATABASE_URL")
            .env("HF_DATA_DIR", &data_dir)
            .env("HF_LISTEN", "127.0.0.1:0")
            .env("HF_ADMIN_PASSWORD", "embedded-test-password")
            .env("HF_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run hf serve");
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !sent {
                    if let Some(rest) = line.split("listening on http://").nth(1) {
                        let address: String =
                            rest.chars().take_while(|c| !c.is_whitespace()).collect();
                        sender.send(address).unwrap();
                        sent = true;
                    }
                }
            }
        });
        let address = receiver
            .recv_timeout(Duration::from_secs(120))
            .expect("hf serve starts");
        Self {
            child,
            data_dir,
            base_url: format!("http://{address}"),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The body of `GET /status`, whatever its status.
    async fn status(&self, http: &reqwest::Client) -> Value {
        http.get(self.url("/status"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A token of the demo's administrator.
    async fn admin_token(&self, http: &reqwest::Client) -> String {
        let login: Value = http
            .post(self.url("/auth/login"))
            .json(&json!({"username": "admin", "password": "embedded-test-password"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        login["token"].as_str().unwrap().to_owned()
    }

    fn postmaster_pid(&self) -> i32 {
        let pid_file = self.data_dir.join("pg/data/postmaster.pid");
        let text = std::fs::read_to_string(pid_file).unwrap();
        text.lines().next().unwrap().trim().parse().unwrap()
    }

    /// Children of the service that have exited but were not reaped.
    fn zombie_children(&self) -> Vec<i32> {
        let parent = self.child.id().to_string();
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(Result::ok)
            .filter_map(|entry| {
                let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
                // pid (comm) state ppid ...
                let after = stat.rsplit_once(") ")?.1;
                let mut fields = after.split_whitespace();
                let state = fields.next()?;
                let ppid = fields.next()?;
                (state == "Z" && ppid == parent)
                    .then(|| entry.file_name().to_string_lossy().parse().ok())
                    .flatten()
            })
            .collect()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        // SIGTERM: the service stops its PostgreSQL before it exits.
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

fn kill_9(pid: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    let result = unsafe { libc::kill(pid, libc::SIGKILL) };
    assert_eq!(result, 0, "kill -9 {pid}");
}

#[tokio::test]
async fn a_killed_postmaster_is_reaped_and_started_again_without_loss() {
    let service = Service::start();
    let http = reqwest::Client::new();
    let token = service.admin_token(&http).await;
    let created = http
        .post(service.url("/data/crm/account"))
        .bearer_auth(&token)
        .json(&json!({"name": "Written before the kill"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let record = service.url(&format!(
        "/data/crm/account/{}",
        created["id"].as_str().unwrap()
    ));

    let postmaster = service.postmaster_pid();
    kill_9(postmaster);
    let killed = Instant::now();
    let mut saw_unavailable = false;
    let back = loop {
        let response = http.get(&record).bearer_auth(&token).send().await.unwrap();
        match response.status().as_u16() {
            200 if saw_unavailable || killed.elapsed() > Duration::from_secs(2) => {
                break response.json::<Value>().await.unwrap();
            }
            200 => {}
            503 => {
                saw_unavailable = true;
                let body: Value = response.json().await.unwrap();
                assert_eq!(body["errors"][0]["code"], "DATABASE_UNAVAILABLE", "{body}");
            }
            other => panic!("unexpected {other}: {}", response.text().await.unwrap()),
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "the service did not come back on its own"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(back["name"], "Written before the kill", "nothing lost");
    assert!(
        !Path::new(&format!("/proc/{postmaster}")).exists(),
        "the dead postmaster was reaped"
    );
    assert!(service.zombie_children().is_empty(), "no zombie children");
    assert_ne!(
        service.postmaster_pid(),
        postmaster,
        "a new postmaster runs"
    );

    let status = service.status(&http).await;
    assert_eq!(status["status"], "ok", "{status}");
    assert_eq!(status["embedded"]["running"], true, "{status}");
    assert_eq!(status["embedded"]["restarts"], 1, "{status}");
    assert_eq!(
        status["embedded"]["last_exit"], "signal: 9 (SIGKILL)",
        "{status}"
    );

    // Writes work again.
    let created = http
        .post(service.url("/data/crm/account"))
        .bearer_auth(&token)
        .json(&json!({"name": "Written after the restart"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
}

/// The disk under the data directory full: writes that need room are refused
/// `STORAGE_UNAVAILABLE`; once PostgreSQL has stopped (here killed, as it stops itself when it
/// cannot write its log ahead) it cannot start again, and `/status` says why. Once there is room
/// it starts on its own and nothing acknowledged is lost.
#[tokio::test]
async fn a_full_disk_keeps_the_embedded_postgres_down_until_there_is_room() {
    let disk = hf_testkit::SmallDisk::mount("128m");
    let data_dir = disk.path().join("data");
    std::fs::create_dir(&data_dir).unwrap();
    let service = Service::start_in(data_dir);
    let http = reqwest::Client::new();
    let token = service.admin_token(&http).await;
    let create = |name: String| {
        http.post(service.url("/data/crm/account"))
            .bearer_auth(&token)
            .json(&json!({ "name": name }))
            .send()
    };
    let mut acknowledged = Vec::new();
    disk.fill();
    let refused = loop {
        let response = create(format!("account {}", acknowledged.len()))
            .await
            .unwrap();
        if response.status() != 201 {
            break response;
        }
        let body: Value = response.json().await.unwrap();
        acknowledged.push(body["id"].as_str().unwrap().to_owned());
        assert!(
            acknowledged.len() < 5000,
            "the full disk never refused a write"
        );
    };
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["errors"][0]["code"], "STORAGE_UNAVAILABLE", "{body}");

    kill_9(service.postmaster_pid());
    let killed = Instant::now();
    let status = loop {
        let response = http.get(service.url("/status")).send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        if body["embedded"]["disk_full"] == true {
            assert_eq!(status, 503, "{body}");
            break body;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "/status never said the disk is full: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        status["error"],
        "the embedded PostgreSQL cannot start: the disk under its data directory is full",
        "{status}"
    );
    assert_eq!(status["embedded"]["running"], false, "{status}");

    disk.make_room();
    let room = Instant::now();
    loop {
        let response = http.get(service.url("/status")).send().await.unwrap();
        if response.status() == 200 {
            break;
        }
        assert!(
            room.elapsed() < Duration::from_secs(60),
            "the cluster did not start once there was room"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let created = create("after room was made".to_owned()).await.unwrap();
    assert_eq!(created.status(), 201);
    for id in &acknowledged {
        let response = http
            .get(service.url(&format!("/data/crm/account/{id}")))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "account {id}");
    }
    let status = service.status(&http).await;
    assert_eq!(status["embedded"]["disk_full"], false, "{status}");
}
