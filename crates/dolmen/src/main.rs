//! `dolmen`: the Dolmen analytics database.
//!
//! - `dolmen server`: every role in one process on embedded defaults.
//! - `dolmen quickstart`: the server plus the Wikipedia sample loaded, with a query to try.

use clap::{Parser, Subcommand};
use dolmen::config::{ServerArgs, ServerConfig};
use dolmen_overlord::TaskLogs;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::prelude::*;

/// Dolmen: a real-time analytics database with a Druid-compatible HTTP API.
#[derive(Debug, Parser)]
#[command(name = "dolmen", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the all-in-one server (router, broker, overlord, coordinator, historical, indexer).
    Server(ServerArgs),
    /// Run the server, load the bundled Wikipedia sample and print how to query it.
    Quickstart(ServerArgs),
}

/// Logs go to stderr, filtered by `DOLMEN_LOG` (`tracing_subscriber`'s `EnvFilter` syntax).
/// Without it: `default_level`, and the SQL request log (target `dolmen::request`) off, as
/// Druid's request logging is off by default; `DOLMEN_LOG=info,dolmen::request=info` turns it
/// on, `DOLMEN_LOG=off,dolmen::request=info` shows it alone.
fn init_logging(logs: &TaskLogs, default_level: &str) {
    let filter = EnvFilter::try_from_env("DOLMEN_LOG")
        .unwrap_or_else(|_| EnvFilter::new(format!("{default_level},dolmen::request=off")));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(filter),
        )
        .with(logs.layer())
        .init();
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Server(args) => run_server(args).await,
            Command::Quickstart(args) => run_quickstart(args).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run_server(args: ServerArgs) -> anyhow::Result<()> {
    let logs = TaskLogs::new();
    init_logging(&logs, "info");
    let config = ServerConfig::resolve(&args)?;
    let server = dolmen::start(&config, logs).await?;
    // One line (tests and scripts read it): the plaintext URL, then the TLS one when both run.
    match (server.tls_url(), server.url()) {
        (Some(tls), url) if url != tls => println!("Dolmen listening on {url} (TLS: {tls})"),
        (_, url) => println!("Dolmen listening on {url}"),
    }
    dolmen::wait_for_signal().await;
    server.shutdown().await;
    Ok(())
}

async fn run_quickstart(args: ServerArgs) -> anyhow::Result<()> {
    let logs = TaskLogs::new();
    init_logging(&logs, "warn");
    let config = ServerConfig::resolve(&args)?;
    let server = dolmen::start(&config, logs).await?;
    let url = server.url();
    println!(
        "Dolmen is running at {url} (data in {})",
        config.data_dir.display()
    );
    let summary = tokio::select! {
        r = dolmen::quickstart::load_sample(&server, &config.data_dir, true) => r,
        _ = dolmen::wait_for_signal() => {
            server.shutdown().await;
            return Ok(());
        }
    };
    let summary = match summary {
        Ok(s) => s,
        Err(e) => {
            server.shutdown().await;
            return Err(e);
        }
    };
    println!("{summary}");
    println!();
    println!("Top pages of 2015-09-12 by edit count. Try it yourself:");
    println!();
    println!("  {}", dolmen::quickstart::curl_command(&url));
    println!();
    match dolmen::quickstart::sample_answer(&url).await {
        Ok(body) => dolmen::quickstart::print_answer(&body),
        Err(e) => eprintln!("warning: the sample query failed: {e:#}"),
    }
    println!();
    println!(
        "Query it with SQL at {url}/service/v2/sql (or {url}/druid/v2/sql). Press Ctrl-C to stop."
    );
    dolmen::wait_for_signal().await;
    server.shutdown().await;
    Ok(())
}
