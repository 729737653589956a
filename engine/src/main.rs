use std::io::Write;

use clap::Parser;
use rutomq::config::{Cli, Command};

fn main() {
    rutomq_shards::alloc::tune();
    let cli = Cli::parse();
    // The one-shot commands print their answer; only warnings beside it.
    let default_level = match cli.command {
        Some(Command::Serve(_)) | None => "info",
        Some(_) => "warn",
    };
    let directives = cli
        .logs
        .log
        .clone()
        .filter(|d| tracing_subscriber::EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| default_level.to_owned());
    init_logs(&directives, cli.logs.log_format == "json");
    let result = match cli.command {
        Some(Command::Migrate { postgres_url }) => migrate(&postgres_url),
        Some(Command::Serve(args)) => rutomq::serve::serve(*args),
        Some(Command::User(args)) => rutomq::security::users::run(args),
        Some(Command::EnvTemplate) => {
            let _ = std::io::stdout().write_all(rutomq::config::env_template().as_bytes());
            Ok(())
        }
        Some(Command::Ctl(cmd)) => rutomq::ctl::run(cmd),
        None => rutomq::serve::serve(cli.serve),
    };
    if let Err(e) = result {
        let _ = writeln!(std::io::stderr(), "rutomq: {e:#}");
        std::process::exit(1);
    }
}

/// Installs the log subscriber; its filter changes at runtime (Kafka's
/// BROKER_LOGGER resource).
fn init_logs(directives: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::new(directives);
    // A log line that cannot be written (the disk under the log is full) is
    // dropped. Reporting it would take eprintln!, which panics when stderr
    // fails too, killing the thread that logged.
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours for a terminal only: not in files, pipes or journald.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .log_internal_errors(false);
    fn reloader<S: 'static>(
        reload: tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, S>,
    ) -> rutomq::logging::Apply {
        Box::new(move |d| {
            let filter = tracing_subscriber::EnvFilter::try_new(d).map_err(|e| e.to_string())?;
            reload.reload(filter).map_err(|e| e.to_string())
        })
    }
    if json {
        let logs = logs.json().flatten_event(true).with_filter_reloading();
        rutomq::logging::install(directives, reloader(logs.reload_handle()));
        logs.init();
    } else {
        let logs = logs.with_filter_reloading();
        rutomq::logging::install(directives, reloader(logs.reload_handle()));
        logs.init();
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
