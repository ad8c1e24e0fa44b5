//! The CLI edge: clap definitions, `anyhow` errors, and the subcommands.

mod adapter;
mod args;
mod chaos;
mod check;
pub(crate) mod exit;
mod matrix;
mod metrics;
mod report;
mod run;
mod signals;
mod toxiproxy;
mod worker;
mod workers;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

/// Parses the command line, runs the subcommand, and maps the result to an exit code by the
/// policy in [`exit`] (0 done, 1 finding, 2 bad input, 3 unknown, 4 failed, 130/143
/// interrupted). Errors are printed once, each cause once.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        // Colours only on a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // The redis crate's cluster client logs every reconnect and slot refresh that
                // fails, as warnings and errors (hundreds while a killed shard primary is
                // down: 117 error lines in one quick matrix of the cluster rows); each
                // failed operation is already in the history and the run's error counts, and
                // an unreachable node at the start is lockbench's own error, so none of them
                // is shown (RUST_LOG=redis::cluster_handling=debug shows them again).
                .unwrap_or_else(|_| {
                    tracing_subscriber::EnvFilter::new("warn,redis::cluster_handling=off")
                }),
        )
        .with_writer(std::io::stderr)
        .init();
    // One thread runs every client task and its connection: a lock cycle then costs no
    // cross-thread wake-ups (futex calls were a third of the driver's CPU on a multi-thread
    // runtime), which leaves the other core to the node being measured. The embedded proxy,
    // the history writer and the ledger run on threads of their own.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the tokio runtime: {e}");
            return exit::code(exit::FAILED);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Toxiproxy(args) => toxiproxy::run(args).await,
            Command::Chaos(args) => chaos::run(args).await,
            Command::Matrix(args) => matrix::run(*args).await,
            Command::Check(args) => check::run(args).await,
            Command::Report(args) => report::run(args),
            Command::Adapter(args) => adapter::run(args).await,
            Command::Worker(args) => worker::run(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", exit::render(&e));
            exit::code(exit::code_of(&e))
        }
    }
}
