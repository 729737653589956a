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
    let directives = std::env::var("RUTOMQ_LOG")
        .ok()
        .filter(|d| tracing_subscriber::EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| default_level.to_owned());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&directives))
        .with_filter_reloading()
        // A log line that cannot be written (the disk under the log is
        // full) is dropped. Reporting it would take eprintln!, which panics
        // when stderr fails too, killing the thread that logged.
        .log_internal_errors(false);
    // Log levels change at runtime (Kafka's BROKER_LOGGER resource).
    let reload = logs.reload_handle();
    rutomq::logging::install(
        &directives,
        Box::new(move |d| {
            let filter = tracing_subscriber::EnvFilter::try_new(d).map_err(|e| e.to_string())?;
            reload.reload(filter).map_err(|e| e.to_string())
        }),
    );
    logs.init();
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
