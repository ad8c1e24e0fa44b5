//! The exit-code policy every subcommand follows (docs/exit-codes.md):
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done, and nothing to report: every verdict `valid` (or no audit), every claim as claimed, no regression |
//! | 1 | done, with a finding: a verdict `invalid` (`run`, `check`), a claim not met (`chaos`), a regression (`report`) |
//! | 2 | bad input: arguments, scenario files or result directories rejected before anything started or was written |
//! | 3 | done, but some verdict is `unknown` (evidence missing or cut) and none is `invalid` |
//! | 4 | failed while running: a node unreachable, a process that died, a file that could not be written |
//! | 130 / 143 | interrupted by SIGINT / SIGTERM (partial results kept, nothing judged) |
//!
//! When several apply, the first in this order wins: interrupted, failed, finding, unknown.
//!
//! The line between 2 and 4, the same for every subcommand: whatever can be judged from the
//! command line, the files given and the local file system before anything starts is 2 (the
//! one validation layer — [`lockbench::orchestration::test::Test::validate`], scenario and
//! matrix validation on top of it, the flag parsers of `args.rs` — refuses durations over
//! 24 h, counts below 1, client counts past the descriptor limit and URLs that do not parse;
//! `RunDir::check_root` refuses a results directory that takes no new directory). What only a
//! server, the Docker engine or a running process can tell (unreachable, refusing a database
//! or user, no engine, a file that cannot be written once the run started) is 4. Each
//! subcommand marks its up-front refusals with [`bad_input`]; every other error is 4.

use std::fmt::Write as _;
use std::process::ExitCode;

use lockbench::checker::Verdict;

/// Done, nothing to report.
pub const OK: u8 = 0;
/// Done, with a finding (invalid verdict, claim not met, regression).
pub const FINDING: u8 = 1;
/// Bad input, rejected before anything started.
pub const BAD_INPUT: u8 = 2;
/// Done, some verdict unknown, none invalid.
pub const UNKNOWN: u8 = 3;
/// Failed while running.
pub const FAILED: u8 = 4;

/// An error in what the user gave (arguments, files, directories): exit code 2. Wrap the
/// error with [`bad_input`]; everything else that goes wrong is exit code 4.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct InputError(#[from] anyhow::Error);

/// Marks `e` as bad input (exit code 2).
pub fn bad_input(e: impl Into<anyhow::Error>) -> anyhow::Error {
    InputError(e.into()).into()
}

/// The exit code of an error returned by a subcommand: 2 for [`InputError`], else 4.
pub fn code_of(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<InputError>()) {
        BAD_INPUT
    } else {
        FAILED
    }
}

/// `0` all valid, `1` any invalid, else `3` any unknown (an empty list is `0`).
pub fn for_verdicts(verdicts: impl IntoIterator<Item = Verdict>) -> u8 {
    let verdicts: Vec<Verdict> = verdicts.into_iter().collect();
    if verdicts.contains(&Verdict::Invalid) {
        FINDING
    } else if verdicts.contains(&Verdict::Unknown) {
        UNKNOWN
    } else {
        OK
    }
}

/// An exit code from a policy constant.
pub fn code(c: u8) -> ExitCode {
    ExitCode::from(c)
}

/// `error: <message>` for an error and its causes, each cause once: a cause whose text the
/// message already contains (e.g. an OS error its wrapper quoted) is left out.
pub fn render(e: &anyhow::Error) -> String {
    render_chain(e.chain())
}

/// [`render`] for a plain error and its `source()` chain.
pub fn render_std(e: &(dyn std::error::Error + 'static)) -> String {
    render_chain(std::iter::successors(Some(e), |e| e.source()))
}

fn render_chain<'a>(chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut out = String::new();
    for cause in chain {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if out.is_empty() {
            out = text;
        } else {
            let _ = write!(out, ": {text}");
        }
    }
    format!("error: {out}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_map_to_the_documented_codes() {
        use Verdict::*;
        assert_eq!(for_verdicts([Valid, Valid]), OK);
        assert_eq!(for_verdicts([Valid, Unknown]), UNKNOWN);
        assert_eq!(for_verdicts([Unknown, Invalid, Valid]), FINDING);
        assert_eq!(for_verdicts([]), OK);
    }

    #[test]
    fn input_errors_are_2_and_keep_their_context() {
        let e = bad_input(anyhow::anyhow!("--clients must be at least 1")).context("run");
        assert_eq!(code_of(&e), BAD_INPUT);
        assert_eq!(code_of(&anyhow::anyhow!("node died")), FAILED);
    }

    #[test]
    fn a_quoted_cause_is_printed_once() {
        // RunDirError::Io quotes its source and also returns it as source().
        let e = anyhow::Error::new(lockbench::results::RunDirError::Io {
            path: "/r".into(),
            source: std::io::Error::from_raw_os_error(17),
        })
        .context("cannot create a run directory under /r");
        let text = render(&e);
        assert_eq!(text.matches("os error 17").count(), 1, "{text}");
        assert!(text.starts_with("error: cannot create a run directory under /r: cannot write /r"));
    }
}
