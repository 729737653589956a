//! `rutomq user`: SCRAM users managed offline, straight in PostgreSQL (the
//! first admin user of a cluster whose listeners all need SASL, say).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use rutomq_meta::security::{ScramChange, ScramRow};

use super::scram::{Credential, Mechanism, ITERATIONS_MAX, ITERATIONS_MIN};
use crate::embedded_pg::EmbeddedPg;

#[derive(Args, Debug, Clone)]
pub struct UserArgs {
    #[command(subcommand)]
    pub action: UserAction,
    /// PostgreSQL of the cluster; without it, the embedded one of
    /// --data-dir (started for the command; the agent must be stopped).
    #[arg(long, env = "RUTOMQ_POSTGRES_URL", global = true)]
    pub postgres_url: Option<String>,
    #[arg(
        long,
        env = "RUTOMQ_DATA_DIR",
        default_value = "./rutomq-data",
        global = true
    )]
    pub data_dir: PathBuf,
}

#[derive(Subcommand, Debug, Clone)]
pub enum UserAction {
    /// Create a user or set its password (SCRAM credentials, salted; the
    /// password is not stored).
    Add {
        name: String,
        /// The password (or set RUTOMQ_USER_PASSWORD).
        #[arg(long, env = "RUTOMQ_USER_PASSWORD", hide_env_values = true)]
        password: String,
        /// SCRAM-SHA-256, SCRAM-SHA-512, or both (the default).
        #[arg(long, default_value = "both")]
        mechanism: String,
        /// PBKDF2 iterations (4096–16384, Kafka's bounds).
        #[arg(long, default_value_t = 8192)]
        iterations: i32,
    },
    /// Remove a user's credentials.
    Delete { name: String },
    /// List users with their mechanisms and iteration counts.
    List,
}

pub fn run(args: UserArgs) -> Result<()> {
    let embedded = match &args.postgres_url {
        Some(_) => None,
        None => Some(EmbeddedPg::start(&args.data_dir).with_context(|| {
            format!(
                "cannot start the embedded PostgreSQL of {} (or pass --postgres-url)",
                args.data_dir.display()
            )
        })?),
    };
    let url = args
        .postgres_url
        .clone()
        .or_else(|| embedded.as_ref().map(|e| e.url.clone()))
        .expect("one of them is set");
    let result = run_with(&url, args.action);
    // One an agent runs (it sees the change at once) keeps running.
    if let Some(pg) = embedded.filter(|pg| !pg.adopted) {
        pg.stop();
    }
    result
}

fn run_with(url: &str, action: UserAction) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut client = rutomq_meta::connect(url).await?;
        rutomq_meta::migrate(&mut client).await
    })?;
    let (meta, _join) = rutomq_meta::Meta::start(url.to_owned(), Box::new(|_| {}))?;
    rt.block_on(async {
        let mut out = std::io::stdout();
        match action {
            UserAction::Add {
                name,
                password,
                mechanism,
                iterations,
            } => {
                if name.is_empty() || password.is_empty() {
                    bail!("the user name and the password must not be empty");
                }
                if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
                    bail!("--iterations must be {ITERATIONS_MIN}..={ITERATIONS_MAX}");
                }
                let mechanisms = match mechanism.to_ascii_uppercase().as_str() {
                    "BOTH" => Mechanism::ALL.to_vec(),
                    m => vec![Mechanism::from_name(m).with_context(|| {
                        format!("--mechanism {m:?}: SCRAM-SHA-256, SCRAM-SHA-512 or both")
                    })?],
                };
                let changes = mechanisms
                    .iter()
                    .map(|&m| {
                        let c = Credential::from_password(m, password.as_bytes(), iterations);
                        ScramChange::Upsert(ScramRow {
                            user: name.clone(),
                            mechanism: m.code() as i16,
                            salt: c.salt,
                            stored_key: c.stored_key,
                            server_key: c.server_key,
                            iterations,
                        })
                    })
                    .collect();
                meta.scram_alter(changes).await?;
                let names: Vec<&str> = mechanisms.iter().map(|m| m.name()).collect();
                let _ = writeln!(out, "user {name}: {} credentials set", names.join(" and "));
            }
            UserAction::Delete { name } => {
                let changes = Mechanism::ALL
                    .iter()
                    .map(|m| ScramChange::Delete {
                        user: name.clone(),
                        mechanism: m.code() as i16,
                    })
                    .collect();
                let done = meta.scram_alter(changes).await?;
                if done
                    .iter()
                    .all(|r| *r == rutomq_meta::security::ScramChangeResult::NotFound)
                {
                    bail!("user {name} has no credentials");
                }
                let _ = writeln!(out, "user {name}: credentials removed");
            }
            UserAction::List => {
                for (user, m, iterations) in meta.scram_describe(None).await? {
                    let m = Mechanism::from_code(m as i8).map_or("unknown", |m| m.name());
                    let _ = writeln!(out, "{user}\t{m}\titerations={iterations}");
                }
            }
        }
        Ok(())
    })
}
