//! `lockbench` command line. Parsing and validation happen in [`cli`] before anything starts;
//! the work itself is in the `lockbench` library.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
