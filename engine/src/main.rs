use std::io::Write;

use clap::Parser;
use rutomq::config::{Cli, Command};

fn main() {
    rutomq_shards::alloc::tune();
    let cli = Cli::parse();
    // The one-shot commands print their answer; only warnings beside it.
    let default_level = match cli.command {
        Some(Command::User(_)) => "warn",
        _ => "info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RUTOMQ_LOG")
                .unwrap_or_else(|_| default_level.into()),
        )
        // A log line that cannot be written (the disk under the log is
        // full) is dropped. Reporting it would take eprintln!, which panics
        // when stderr fails too, killing the thread that logged.
        .log_internal_errors(false)
        .init();
    let result = match cli.command {
        Some(Command::Migrate { postgres_url }) => migrate(&postgres_url),
        Some(Command::Serve(args)) => rutomq::serve::serve(*args),
        Some(Command::User(args)) => rutomq::security::users::run(args),
        None => rutomq::serve::serve(cli.serve),
    };
    if let Err(e) = result {
        let _ = writeln!(std::io::stderr(), "rutomq: {e:#}");
        std::process::exit(1);
    }
}

fn migrate(url: &str) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut client = rutomq_meta::connect(url).await?;
        rutomq_meta::migrate(&mut client).await?;
        let _ = writeln!(std::io::stdout(), "schema is up to date");
        Ok(())
    })
}
