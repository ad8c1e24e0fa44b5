//! `lockbench adapter check <strategy>`: the adapter conformance script
//! ([`lockbench::orchestration::conformance`]), one line per step.
//!
//! Exit codes: 0 every step passed, 1 some step failed, 2 not an adapter strategy, 4 the
//! script could not run (nodes or adapter would not start).

use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};

use lockbench::orchestration::conformance;
use lockbench::strategy::StrategyKind;

use super::exit;

/// `lockbench adapter …`.
#[derive(Debug, Args)]
pub struct AdapterArgs {
    #[command(subcommand)]
    pub command: AdapterCommand,
}

/// What to do with an adapter.
#[derive(Debug, Subcommand)]
pub enum AdapterCommand {
    /// Check that an adapter keeps the adapter protocol (docs/adapter-protocol.md) against a
    /// node lockbench starts: pass/fail per step; exit 0 when every step passed, 1 otherwise.
    Check {
        /// The adapter strategy, e.g. adapter:redis-py.
        #[arg(value_parser = super::args::strategy_name)]
        strategy: StrategyKind,
    },
}

/// Runs `lockbench adapter`.
///
/// # Errors
/// Not an adapter strategy (exit 2); nodes or adapter that do not start (exit 4).
pub async fn run(args: AdapterArgs) -> Result<ExitCode> {
    let AdapterCommand::Check { strategy } = args.command;
    if !strategy.is_adapter() {
        return Err(exit::bad_input(
            conformance::ConformanceError::NotAnAdapter(strategy),
        ));
    }
    // The node and the adapter's log live here; kept when a step fails (the log helps).
    let dir = std::env::temp_dir().join(format!("lockbench-adapter-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let steps = conformance::check_adapter(strategy, &dir).await?;
    let mut failed = 0;
    for step in &steps {
        match &step.outcome {
            Ok(seen) => println!("PASS  {}: {seen}", step.name),
            Err(why) => {
                failed += 1;
                println!("FAIL  {}: {why}", step.name);
            }
        }
    }
    println!(
        "{strategy}: {} of {} steps passed",
        steps.len() - failed,
        steps.len()
    );
    if failed == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("adapter log: {}", dir.join("adapter.log").display());
    }
    Ok(exit::code(if failed == 0 {
        exit::OK
    } else {
        exit::FINDING
    }))
}
