//! Issue 22's inputs, one table: each row is a command line (and the scenario file it reads,
//! if any), the exit code of the policy in docs/exit-codes.md and the first line of what the user sees.
//! Every row is refused before anything starts (no server, no results directory), so the
//! table runs in about a second. The PostgreSQL rows (the server's own reason) start one
//! local server and point `--topology external` at it.

mod common;

use std::path::Path;

use common::cli::{run_in, text};

/// A scenario that passes validation; each row replaces one line of it.
const SCENARIO: &str = r#"claim = "bounds"
topology = "single"
strategies = ["single"]

[workload]
clients = 2
resources = 1
hold = "1ms"
ttl = "300ms"
duration = "2s"
"#;

/// One row: arguments (`{file}` = the row's scenario file), the scenario's text (when the
/// command reads one), the exit code, and the start of the first line of stderr.
struct Row {
    args: &'static [&'static str],
    scenario: Option<String>,
    code: i32,
    first_line: String,
}

fn row(args: &'static [&'static str], code: i32, first_line: &str) -> Row {
    Row {
        args,
        scenario: None,
        code,
        first_line: first_line.to_string(),
    }
}

fn file_row(scenario: String, code: i32, first_line: &str) -> Row {
    Row {
        args: &["chaos", "{file}"],
        scenario: Some(scenario),
        code,
        first_line: first_line.to_string(),
    }
}

const TOO_LONG: &str = "is longer than 24h, the longest duration lockbench takes";

fn rows() -> Vec<Row> {
    let flag = |f: &str| {
        format!("error: invalid value '18446744073709551615s' for '{f}': duration \"18446744073709551615s\" {TOO_LONG}")
    };
    let step = format!(
        "{SCENARIO}\n[[nemesis]]\nat = \"1s\"\nduration = \"18446744073709551615s\"\n\
         fault = \"client-pause\"\ntarget = \"clients:0\"\n"
    );
    vec![
        row(
            &["run", "--duration", "18446744073709551615s"],
            2,
            &flag("--duration <DURATION>"),
        ),
        row(
            &["run", "--hold", "18446744073709551615s", "-d", "1s"],
            2,
            &flag("--hold <HOLD>"),
        ),
        row(
            &["run", "--ttl", "18446744073709551615s"],
            2,
            &flag("--ttl <TTL>"),
        ),
        row(
            &["run", "--acquire-timeout", "18446744073709551615s"],
            2,
            &flag("--acquire-timeout <ACQUIRE_TIMEOUT>"),
        ),
        row(
            &["run", "--retry-delay", "18446744073709551615s"],
            2,
            &flag("--retry-delay <RETRY_DELAY>"),
        ),
        row(
            &["matrix", "--hold", "18446744073709551615s"],
            2,
            &flag("--hold <HOLD>"),
        ),
        row(
            &["matrix", "--ttl", "18446744073709551615s"],
            2,
            &flag("--ttl <TTL>"),
        ),
        row(
            &["run", "--rate", "1e-300"],
            2,
            "error: --rate 1e-300 ops/s leaves more than 24h between one client's attempts with 16 clients: use at least 0.000186 ops/s",
        ),
        file_row(
            SCENARIO.replace("duration = \"2s\"", "duration = \"18446744073709551615s\""),
            2,
            &format!("error: {{file}}:10:12: `duration`: duration \"18446744073709551615s\" {TOO_LONG}"),
        ),
        file_row(
            SCENARIO.replace("ttl = \"300ms\"", "ttl = \"25h\""),
            2,
            &format!("error: {{file}}:9:7: `ttl`: duration \"25h\" {TOO_LONG}"),
        ),
        file_row(
            step,
            2,
            "error: {file}:14:12: nemesis[0] (client-pause): `duration` = 584542046090years 7months 15days 17h 5m 3s is longer than 24h",
        ),
        // One descriptor check for run, chaos and matrix.
        row(
            &["run", "-c", "1000000"],
            2,
            "error: --clients 1000000 needs about 3000256 descriptors",
        ),
        file_row(
            SCENARIO.replace("clients = 2", "clients = 1000000"),
            2,
            "error: {file}:6:11: `clients` = 1000000 needs about 3000256 descriptors",
        ),
        row(
            &["matrix", "--clients", "1000000"],
            2,
            "error: single × none: `clients` = 1000000 needs about 3000256 descriptors",
        ),
        // Counts name their bound, also when negative.
        row(
            &["run", "--clients", "-3"],
            2,
            "error: invalid value '-3' for '--clients <CLIENTS>': must be at least 1, not -3",
        ),
        row(
            &["run", "--resources", "0"],
            2,
            "error: invalid value '0' for '--resources <RESOURCES>': must be at least 1, not 0",
        ),
        row(
            &["run", "--ops", "-1"],
            2,
            "error: invalid value '-1' for '--ops <OPS>': must be at least 1, not -1",
        ),
        row(
            &["chaos", "x.toml", "--trials", "-2"],
            2,
            "error: invalid value '-2' for '--trials <TRIALS>': must be at least 1, not -2",
        ),
        // A URL that cannot be parsed is bad input for every service, found before any start.
        row(
            &[
                "run",
                "--topology",
                "external",
                "-s",
                "pg-advisory",
                "--url",
                "postgres://h:notaport/db",
            ],
            2,
            "error: --url: invalid node URL postgres://h:notaport/db: ",
        ),
        row(
            &[
                "run",
                "--topology",
                "external",
                "-s",
                "pg-advisory",
                "--url",
                "postgres://u@h/db?sslmode=sideways",
            ],
            2,
            "error: --url: invalid node URL postgres://u@h/db?sslmode=sideways: invalid connection string",
        ),
        row(
            &[
                "run",
                "--topology",
                "external",
                "-s",
                "pg-advisory",
                "--url",
                "postgres://u@h1/db",
                "--url",
                "postgres://u@h2/db",
            ],
            2,
            "error: --url is given 2 times, but a PostgreSQL advisory lock lives on one server",
        ),
        row(
            &["run", "--topology", "external", "--url", "redis://h:notaport"],
            2,
            "error: --url: invalid node URL redis://h:notaport: ",
        ),
    ]
}

fn check(row: &Row, dir: &Path, i: usize) {
    let results = dir.join(format!("results-{i}"));
    let file = dir.join(format!("scenario-{i}.toml"));
    if let Some(text) = &row.scenario {
        std::fs::write(&file, text).unwrap();
    }
    let file_text = file.display().to_string();
    let args: Vec<String> = row
        .args
        .iter()
        .map(|a| a.replace("{file}", &file_text))
        .collect();
    let out = run_in(&args, &results);
    let (stdout, stderr) = text(&out);
    let first = stderr.lines().next().unwrap_or_default();
    let want = row.first_line.replace("{file}", &file_text);
    assert!(
        out.status.code() == Some(row.code) && first.starts_with(&want),
        "{args:?}: exit {:?}, first line\n  {first}\nwanted exit {} and\n  {want}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code(),
        row.code
    );
    assert!(!results.exists(), "{args:?} created {}", results.display());
}

#[test]
fn every_input_is_refused_with_its_bound_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    for (i, r) in rows().iter().enumerate() {
        check(r, tmp.path(), i);
    }
}

/// A results directory nothing can be created in (`/sys` refuses `mkdir` even to root) is
/// bad input for `run`, `chaos` and `matrix` alike. Where `/sys` takes a directory the
/// test says so and checks nothing.
#[test]
fn an_unwritable_results_directory_is_bad_input_for_every_command() {
    let probe = Path::new("/sys/lockbench-probe");
    if std::fs::create_dir(probe).is_ok() {
        let _ = std::fs::remove_dir(probe);
        eprintln!("SKIPPED: /sys takes new directories here; no unwritable directory to use");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("s.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let scenario = scenario.to_str().unwrap();
    let want = "error: /sys: cannot create a run directory there (";
    for args in [
        vec!["run", "-d", "1s"],
        vec!["chaos", scenario],
        vec![
            "matrix",
            "--quick",
            "--strategies",
            "single",
            "--faults",
            "none",
        ],
    ] {
        let out = run_in(&args, Path::new("/sys/lockbench-results"));
        let (_, stderr) = text(&out);
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            out.status.code() == Some(2) && first.starts_with(want),
            "{args:?}: exit {:?}: {stderr}",
            out.status.code()
        );
    }
}

/// External PostgreSQL with a database or a user the server refuses: the server's own
/// message, its SQLSTATE and what to change (it used to say only "db error").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_postgres_server_is_quoted_with_what_to_change() {
    use lockbench::topology::TopologyKind;
    let tmp = tempfile::tempdir().unwrap();
    let topology = common::node::start_topology(TopologyKind::Postgres, tmp.path()).await;
    let url = topology.endpoints()[0].url.clone();
    // postgres://user@127.0.0.1:port/db → the same server, another database or user.
    let (base, _db) = url.rsplit_once('/').unwrap();
    let host = base.rsplit_once('@').unwrap().1;
    let cases = [
        (
            format!("{base}/no_such_db"),
            "database \"no_such_db\" does not exist (SQLSTATE 3D000): the database does not exist; change the database in the URL",
        ),
        (
            format!("postgres://no_such_user@{host}/postgres"),
            "role \"no_such_user\" does not exist (SQLSTATE 28000): change the user in the URL",
        ),
    ];
    for (bad, want) in cases {
        let results = tmp.path().join("r");
        let args = [
            "run",
            "--topology",
            "external",
            "-s",
            "pg-advisory",
            "-d",
            "1s",
            "--no-progress",
            "--url",
            &bad,
        ];
        let out = tokio::task::block_in_place(|| run_in(args, &results));
        let (_, stderr) = text(&out);
        eprintln!(
            "{bad}: {}",
            stderr
                .lines()
                .find(|l| l.starts_with("error"))
                .unwrap_or_default()
        );
        assert_eq!(out.status.code(), Some(4), "{bad}: {stderr}");
        assert!(stderr.contains(want), "{bad}: {stderr}");
        assert!(!stderr.contains("db error"), "{bad}: {stderr}");
    }
    topology.shutdown().await;
}

/// `check` and `report` on a matrix directory say where its runs are (four levels down) and
/// which command takes one, instead of "no history in its subdirectories".
#[test]
fn check_and_report_on_a_matrix_directory_point_at_its_trials() {
    let tmp = tempfile::tempdir().unwrap();
    let matrix = tmp.path().join("m");
    let trial = matrix.join("trials/single/none/t1");
    std::fs::create_dir_all(trial.join("single")).unwrap();
    std::fs::write(matrix.join("matrix.json"), "{}").unwrap();
    std::fs::write(trial.join("summary.json"), "{}").unwrap();
    for command in ["check", "report"] {
        let out = common::cli::run([command, matrix.to_str().unwrap()]);
        let (_, stderr) = text(&out);
        let want = format!(
            "error: {} is not a run directory but holds 1 run directory below it (a matrix: its \
             own report is {}; each trial is a run)",
            matrix.display(),
            matrix.join("matrix.html").display()
        );
        assert!(
            out.status.code() == Some(2)
                && stderr.starts_with(&want)
                && stderr.contains(&format!("`lockbench {command} {}`", trial.display())),
            "{command}: exit {:?}: {stderr}",
            out.status.code()
        );
    }
}
