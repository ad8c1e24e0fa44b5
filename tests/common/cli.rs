//! Running the real `lockbench` binary from a test: one command builder, captured output and
//! exit codes, the result files a run leaves, and a run in the background that a test
//! interrupts.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// `lockbench` (the binary cargo built for this test run), with no arguments yet.
pub fn lockbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockbench"))
}

/// Runs `lockbench <args>` to its end and captures its output.
pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    lockbench().args(args).output().expect("lockbench runs")
}

/// `lockbench <args> --results <results>`, not started yet.
pub fn lockbench_in<I, S>(args: I, results: &Path) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = lockbench();
    cmd.args(args).arg("--results").arg(results);
    cmd
}

/// Runs `lockbench <args> --results <results>` to its end and captures its output.
pub fn run_in<I, S>(args: I, results: &Path) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    lockbench_in(args, results)
        .output()
        .expect("lockbench runs")
}

/// Standard output and standard error of `out`, as text.
pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts the exit code, printing both streams when it differs; returns (stdout, stderr).
pub fn expect_code(out: &Output, code: i32, what: &str) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{what}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// Asserts that `out` is a success, printing both streams when not; returns (stdout, stderr).
pub fn expect_success(out: &Output, what: &str) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// Runs `lockbench <args>` and asserts it succeeds; returns its standard output.
pub fn run_ok(args: &[&str]) -> String {
    expect_success(&run(args), &format!("lockbench {args:?}")).0
}

/// Runs `lockbench <args> --results <results>` and asserts that it was refused before
/// anything started: it failed, its standard error contains `needle`, and it did not create
/// `results`. Returns the output (for a check of the exact exit code).
pub fn assert_refused(args: &[&str], results: &Path, needle: &str) -> Output {
    let out = run_in(args, results);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{args:?} was accepted: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: stderr does not name {needle:?}: {stderr}"
    );
    assert!(!results.exists(), "{args:?} created {}", results.display());
    out
}

/// The JSON file at `path`.
pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The run directory `results/latest` points to.
pub fn latest(results: &Path) -> PathBuf {
    std::fs::canonicalize(results.join("latest"))
        .unwrap_or_else(|e| panic!("{}/latest: {e}", results.display()))
}

/// `summary.json` of the latest run under `results`.
pub fn summary(results: &Path) -> serde_json::Value {
    json(&results.join("latest/summary.json"))
}

/// `summary.json` of the latest run under `results` while a run may still be writing it
/// (`None` until it exists and parses).
pub fn summary_so_far(results: &Path) -> Option<serde_json::Value> {
    let bytes = std::fs::read(results.join("latest/summary.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The path printed after `label: ` on stdout.
pub fn printed_path(stdout: &str, label: &str) -> PathBuf {
    let prefix = format!("{label}: ");
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no `{label}:` line in\n{stdout}"))
}

/// Starts `lockbench <args> --results <results>` in the background with the given standard
/// output and error, for a test that watches its files and interrupts it.
pub fn spawn_in<I, S>(args: I, results: &Path, stdout: Stdio, stderr: Stdio) -> Child
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    lockbench_in(args, results)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("lockbench starts")
}

/// A copy of some of the shipped scenario files (`chaos/<name>`) in a directory `chaos` of
/// its own under `dir`, for `lockbench chaos <dir>`; returns that directory.
pub fn copy_shipped_scenarios(dir: &Path, names: &[&str]) -> PathBuf {
    let copy = dir.join("chaos");
    std::fs::create_dir(&copy).unwrap();
    for name in names {
        std::fs::copy(shipped_scenario(name), copy.join(name)).unwrap();
    }
    copy
}

/// The path of a shipped scenario file (`chaos/<name>` in the repository).
pub fn shipped_scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("chaos")
        .join(name)
}
