//! A disk the database can be made to find full: a small file system of its own (tmpfs,
//! [`SmallDisk`]), which a test fills and empties at will, and a tablespace on one
//! ([`SmallTablespace`]). A test database whose default tablespace it is
//! ([`crate::TestServer::start_demo_on`]) keeps every table the service creates there, while the
//! server's catalogs and write-ahead log stay on their own disk, so the database refuses each
//! write that needs a new page (SQLSTATE 53100) and goes on serving everything else, as it does
//! when the disk under its tables fills. A whole data directory on a [`SmallDisk`] (an embedded
//! cluster's) fills its write-ahead log too.
//!
//! Mounting needs root on the database's machine, as the other fault tests' stopped backends
//! and cut network paths do.

use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use tokio_postgres::NoTls;

/// A small file system of its own (tmpfs, mounted under the system temp directory), which a test
/// fills and empties at will; unmounted when dropped. Declare it before whatever uses it (a
/// service, a database), so that goes first.
#[derive(Debug)]
pub struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it: `128m`) readable by all, so a
    /// database server running as another user can reach a directory on it.
    pub fn mount(size: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "hf-small-disk-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        std::fs::create_dir_all(&path).unwrap();
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(&path)
            .status()
            .expect("mount (a small file system needs root)");
        assert!(mounted.success(), "mounting a tmpfs failed");
        Self { path }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fills it to its last byte.
    pub fn fill(&self) {
        let mut filler = std::fs::File::create(self.filler()).unwrap();
        for chunk in [1 << 20, 4096, 1] {
            let bytes = vec![0u8; chunk];
            while filler.write_all(&bytes).is_ok() {}
        }
    }

    /// Makes room again: the filler is removed.
    pub fn make_room(&self) {
        std::fs::remove_file(self.filler()).unwrap();
    }

    fn filler(&self) -> PathBuf {
        self.path.join("filler")
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// How large the tablespace's file system is: room for the demo's tables and indexes with a
/// margin, small enough to fill in a moment.
const TABLESPACE_SIZE: &str = "32m";

/// A tablespace on a [`SmallDisk`] (see the module comment). Dropped: the tablespace, then the
/// file system. Declare it before the server that uses it, so that the server's database is
/// dropped (and the tablespace emptied) first.
#[derive(Debug)]
pub struct SmallTablespace {
    name: String,
    maintenance_url: String,
    /// Dropped after the tablespace (fields drop after `Drop::drop`).
    disk: SmallDisk,
}

impl SmallTablespace {
    /// Mounts the file system, gives its directory to the database server's user, and creates
    /// the tablespace there.
    pub async fn new() -> Self {
        let maintenance_url = crate::maintenance_url().await;
        let name = format!(
            "hf_test_disk_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let disk = SmallDisk::mount(TABLESPACE_SIZE);
        let location = disk.path().join("tablespace");
        std::fs::create_dir(&location).unwrap();
        let tablespace = Self {
            name,
            maintenance_url,
            disk,
        };
        let client = tablespace.client().await;
        // The tablespace's directory must belong to the user the server runs as.
        let data_directory: String = client
            .query_one("SELECT current_setting('data_directory')", &[])
            .await
            .unwrap()
            .get(0);
        let owner = std::fs::metadata(&data_directory).unwrap();
        std::os::unix::fs::chown(&location, Some(owner.uid()), Some(owner.gid())).unwrap();
        // CREATE TABLESPACE takes its location as a literal only; the server quotes it.
        let location: String = client
            .query_one("SELECT quote_literal($1)", &[&location.to_str().unwrap()])
            .await
            .unwrap()
            .get(0);
        client
            .batch_execute(&format!(
                "CREATE TABLESPACE {} LOCATION {location}",
                hf_sql::quote_ident(&tablespace.name).unwrap()
            ))
            .await
            .expect("create the tablespace");
        tablespace
    }

    /// The tablespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Fills its file system to the last byte.
    pub fn fill(&self) {
        self.disk.fill();
    }

    /// Makes room again.
    pub fn make_room(&self) {
        self.disk.make_room();
    }

    async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.maintenance_url, NoTls)
            .await
            .expect("connect to the test server");
        tokio::spawn(connection);
        client
    }
}

impl Drop for SmallTablespace {
    fn drop(&mut self) {
        let dropped = hf_sql::quote_ident(&self.name).is_ok_and(|name| {
            crate::execute_detached(
                &self.maintenance_url,
                format!("DROP TABLESPACE IF EXISTS {name}"),
            )
        });
        if !dropped {
            eprintln!("hf-testkit: could not drop tablespace {}", self.name);
        }
    }
}
