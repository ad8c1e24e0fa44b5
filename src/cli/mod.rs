//! The CLI edge: clap definitions, `anyhow` errors, and the subcommands.

mod args;
mod chaos;
mod check;
mod report;
mod run;
mod signals;
mod toxiproxy;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Parses the command line, runs the subcommand, and maps the result to an exit code:
/// 0 = done, 1 = error, 2 = bad usage (clap), 130 = interrupted.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Toxiproxy(args) => toxiproxy::run(args).await,
            Command::Chaos(args) => chaos::run(args).await,
            Command::Check(args) => check::run(args).await,
            Command::Report(args) => report::run(args),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
