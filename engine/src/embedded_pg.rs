//! The embedded default: a private PostgreSQL under `DATA_DIR/pg`, started
//! from the server binaries on the machine, reachable only on a unix socket.
//!
//! PostgreSQL refuses to run as root, so when rutomq runs as root the cluster
//! is owned by and run as the `postgres` system user (or `RUTOMQ_PG_USER`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

pub struct EmbeddedPg {
    bin: PathBuf,
    data: PathBuf,
    user: Option<(u32, u32)>,
    pub url: String,
    /// It was running already (an agent on the same data directory, or
    /// one killed): found, not started.
    pub adopted: bool,
}

const INSTALL_HINT: &str =
    "install the PostgreSQL server (Debian/Ubuntu: `apt-get install postgresql`, \
     which puts binaries under /usr/lib/postgresql/*/bin), or pass --postgres-url postgresql://... \
     to use an existing server";

/// Finds `initdb`, `pg_ctl` and `postgres`: PATH, `pg_config --bindir`, then
/// the newest `/usr/lib/postgresql/*/bin`.
pub fn find_bindir() -> Option<PathBuf> {
    let has_all = |d: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| d.join(b).is_file())
    };
    if let Some(paths) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&paths) {
            if has_all(&d) {
                return Some(
                    std::fs::canonicalize(d.join("initdb"))
                        .ok()?
                        .parent()?
                        .to_path_buf(),
                );
            }
        }
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if has_all(&d) {
            return Some(d);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            has_all(&bin).then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, d)| d)
}

/// uid and gid of a user from /etc/passwd.
fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 3 && f[0] == name).then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

impl EmbeddedPg {
    /// Initializes the cluster if needed and starts it (or adopts one left
    /// running by a previous agent that was killed).
    pub fn start(data_dir: &Path) -> Result<EmbeddedPg> {
        let bin = find_bindir().with_context(|| {
            format!(
                "no PostgreSQL server binaries found (initdb, pg_ctl, postgres): {INSTALL_HINT}"
            )
        })?;
        std::fs::create_dir_all(data_dir)?;
        let root = std::fs::canonicalize(data_dir)?.join("pg");
        std::fs::create_dir_all(&root)?;
        let user = if running_as_root() {
            let name = std::env::var("RUTOMQ_PG_USER").unwrap_or_else(|_| "postgres".into());
            let ids = lookup_user(&name).with_context(|| {
                format!(
                    "running as root, and PostgreSQL refuses to run as root; no `{name}` user to run it as: \
                     create one (`useradd -r {name}`), set RUTOMQ_PG_USER, run rutomq as a normal user, \
                     or pass --postgres-url"
                )
            })?;
            Some(ids)
        } else {
            None
        };
        let data = root.join("data");
        let sock = root.join("run");
        std::fs::create_dir_all(&sock)?;
        if sock.as_os_str().len() + ".s.PGSQL.5432".len() + 1 > 107 {
            bail!(
                "the data directory path is too long for a unix socket ({}); use a shorter --data-dir",
                sock.display()
            );
        }
        if let Some((uid, gid)) = user {
            for p in [&root, &sock] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid))?;
            }
            if data.exists() {
                std::os::unix::fs::chown(&data, Some(uid), Some(gid))?;
            }
        }
        let pg = EmbeddedPg {
            url: format!("host={} user=rutomq dbname=postgres", sock.display()),
            bin,
            data,
            user,
            adopted: false,
        };
        if !pg.data.join("PG_VERSION").exists() {
            tracing::info!(dir = %pg.data.display(), "initializing embedded PostgreSQL");
            pg.run(
                "initdb",
                &[
                    "-D",
                    &pg.data.to_string_lossy(),
                    "-U",
                    "rutomq",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
            )
            .context("initdb failed")?;
        }
        if pg
            .run("pg_ctl", &["status", "-D", &pg.data.to_string_lossy()])
            .is_ok()
        {
            tracing::info!("embedded PostgreSQL already running; adopting it");
            return Ok(EmbeddedPg {
                adopted: true,
                ..pg
            });
        }
        let opts = format!(
            // No JIT: the packaged unit forbids writable executable memory
            // (MemoryDenyWriteExecute), and metadata queries are too small
            // to gain from it.
            "-c listen_addresses='' -k {} -c max_connections=100 -c shared_buffers=128MB -c jit=off",
            sock.display()
        );
        let log = root.join("postgres.log");
        pg.run(
            "pg_ctl",
            &[
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                &pg.data.to_string_lossy(),
                "-l",
                &log.to_string_lossy(),
                "-o",
                &opts,
            ],
        )
        .with_context(|| format!("embedded PostgreSQL did not start; see {}", log.display()))?;
        tracing::info!(socket = %sock.display(), "embedded PostgreSQL started");
        Ok(pg)
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<()> {
        let mut cmd = Command::new(self.bin.join(tool));
        cmd.args(args);
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
            cmd.env("HOME", "/tmp");
            cmd.current_dir("/");
        }
        let out = cmd.output().with_context(|| format!("cannot run {tool}"))?;
        if !out.status.success() {
            bail!(
                "{tool} exited with {}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    pub fn stop(&self) {
        if let Err(e) = self.run(
            "pg_ctl",
            &[
                "stop",
                "-m",
                "fast",
                "-w",
                "-D",
                &self.data.to_string_lossy(),
            ],
        ) {
            tracing::warn!(error = %e, "stopping embedded PostgreSQL failed");
        }
    }
}
