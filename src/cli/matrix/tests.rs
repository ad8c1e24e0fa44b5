use super::*;

#[test]
fn links_are_relative_between_pages() {
    assert_eq!(
        relative_link(
            Path::new("/r/m"),
            Path::new("/r/c/comparison/comparison.html")
        ),
        "../c/comparison/comparison.html"
    );
}

fn parse(args: &[&str]) -> Result<MatrixArgs, clap::Error> {
    use clap::Parser;
    let cli = super::super::args::Cli::try_parse_from(
        ["lockbench", "matrix"].iter().chain(args).copied(),
    )?;
    match cli.command {
        super::super::args::Command::Matrix(m) => Ok(*m),
        other => panic!("not matrix: {other:?}"),
    }
}

fn labels(args: &[&str]) -> Vec<String> {
    let (plan, _) = parse(args).unwrap().plan(Backend::Local).unwrap();
    let report = MatrixReport::new(&plan, "m");
    assert_eq!(report.cells.len(), plan.cells().len());
    report.strategies
}

#[test]
fn pg_setups_repeat_the_postgres_rows_and_bad_ones_are_refused() {
    // Default: direct only, the rows are the strategies as before the option.
    let default = labels(&[]);
    assert_eq!(
        default,
        [
            "single",
            "single-fenced",
            "redlock",
            "redlock-fenced",
            "pg-advisory",
            "pg-advisory-fenced",
            "etcd-lease"
        ]
    );
    let got = labels(&[
        "--strategies",
        "single,pg-advisory,pg-advisory-xact",
        "--faults",
        "none",
        "--pg-setups",
        "direct,pgbouncer-transaction",
    ]);
    assert_eq!(
        got,
        [
            "single",
            "pg-advisory",
            "pg-advisory · pgbouncer-transaction",
            "pg-advisory-xact",
            "pg-advisory-xact · pgbouncer-transaction"
        ]
    );
    // matrix.toml, and the flag over it.
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("matrix.toml");
    std::fs::write(
        &toml,
        "strategies = [\"pg-advisory\"]\nfaults = [\"client-crash\"]\npg_setups = [\"pgbouncer-session-no-reset\"]\n",
    )
    .unwrap();
    let path = toml.to_str().unwrap();
    assert_eq!(
        labels(&["--config", path]),
        ["pg-advisory · pgbouncer-session-no-reset"]
    );
    assert_eq!(
        labels(&["--config", path, "--pg-setups", "pgbouncer-session"]),
        ["pg-advisory · pgbouncer-session"]
    );
    // Refused up front, naming the valid setups.
    let err = parse(&["--pg-setups", "direct,bouncer"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown PostgreSQL setup `bouncer`")
            && err.contains(
                "direct, pgbouncer-session, pgbouncer-session-no-reset, pgbouncer-transaction"
            ),
        "{err}"
    );
    std::fs::write(&toml, "pg_setups = [\"transaction\"]\n").unwrap();
    let err = parse(&["--config", path])
        .unwrap()
        .plan(Backend::Local)
        .unwrap_err();
    assert!(
        err.contains("pg_setups: unknown PostgreSQL setup `transaction`: valid"),
        "{err}"
    );
    let err = parse(&["--pg-setups", "direct,direct"])
        .unwrap()
        .plan(Backend::Local)
        .unwrap_err();
    assert_eq!(err, "PostgreSQL setup direct is listed twice");
}

#[test]
fn redis_setups_add_cluster_rows_and_columns_and_bad_ones_are_refused() {
    let plan = |args: &[&str]| parse(args).unwrap().plan(Backend::Local);
    let (p, _) = plan(&[
        "--strategies",
        "single,single-wait,redlock",
        "--redis-setups",
        "standalone,cluster",
    ])
    .unwrap();
    let labels: Vec<String> = p.rows().iter().map(|r| r.label()).collect();
    assert_eq!(
        labels,
        [
            "single",
            "single · cluster",
            "single-wait",
            "single-wait · cluster",
            "redlock"
        ]
    );
    // Without --faults a cluster matrix runs every column, the cluster ones too.
    assert_eq!(p.faults.len(), 17);
    assert_eq!(&p.faults[12..], FaultClass::CLUSTER);
    assert_eq!(p.workload.cluster_node_timeout, Duration::from_millis(1000));
    assert_eq!(
        rows_text(&p),
        "5 rows (3 strategies, single-node Redis ones per setup: standalone, cluster)"
    );
    let report = MatrixReport::new(&p, "m");
    assert_eq!(report.cells.len(), 3 * 12 + 2 * 16);
    // The default matrix is untouched: standalone rows, the 12 classes.
    let (d, _) = plan(&[]).unwrap();
    assert_eq!(d.redis_setups, [RedisSetup::Standalone]);
    assert_eq!(d.faults, FaultClass::ALL);
    assert_eq!(rows_text(&d), "7 strategies");
    // matrix.toml, and the flags over it.
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("matrix.toml");
    std::fs::write(
        &toml,
        "strategies = [\"single\"]\nfaults = [\"cluster-pause\"]\nredis_setups = [\"cluster\"]\n\
         cluster_node_timeout = \"1500ms\"\n",
    )
    .unwrap();
    let path = toml.to_str().unwrap();
    let (f, _) = plan(&["--config", path]).unwrap();
    assert_eq!(f.rows()[0].label(), "single · cluster");
    assert_eq!(f.workload.cluster_node_timeout, Duration::from_millis(1500));
    let (f, _) = plan(&["--config", path, "--cluster-node-timeout", "2s"]).unwrap();
    assert_eq!(f.workload.cluster_node_timeout, Duration::from_secs(2));
    // Refused up front, naming the flag and the valid values.
    let err = parse(&["--redis-setups", "sentinel"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown Redis setup `sentinel`: valid Redis setups are standalone, cluster"),
        "{err}"
    );
    let err = plan(&["--config", path, "--redis-setups", "standalone"]).unwrap_err();
    assert!(
        err.starts_with("fault class cluster-pause runs only on Redis Cluster rows"),
        "{err}"
    );
    let err = plan(&[
        "--strategies",
        "single",
        "--redis-setups",
        "cluster",
        "--faults",
        "node-pause",
        "--cluster-node-timeout",
        "500ms",
    ])
    .unwrap_err();
    assert!(
        err.starts_with("--cluster-node-timeout 500 ms must be longer"),
        "{err}"
    );
    std::fs::write(&toml, "redis_setups = [\"shard\"]\n").unwrap();
    let err = plan(&["--config", path]).unwrap_err();
    assert!(
        err.contains("redis_setups: unknown Redis setup `shard`: valid"),
        "{err}"
    );
}

#[test]
fn the_terminal_shows_long_lists_in_brief_and_matrix_md_keeps_every_cell() {
    use lockbench::report::matrix::export::{decision_md, matrix_md, thin_evidence_md};
    let (plan, _) = parse(&["--quick"]).unwrap().plan(Backend::Local).unwrap();
    let mut report = MatrixReport::new(&plan, "m");
    // Every cell checked, 12 exposed episodes, no damage: every strategy qualifies for
    // correctness on thin evidence in each of its cells.
    for (i, c) in report.cells.iter_mut().enumerate() {
        c.trials_checked = 1;
        c.episodes.total = 12;
        c.episodes.exposed = 12 + (i as u32 % 5);
    }
    report.decision = matrix::decide(
        &report.strategies,
        &report.cells,
        &[],
        &[],
        report.workload.ttl,
    );
    report.jobs.backoff = Some(
        (0..5)
            .map(|t| format!("backed off from 4 to 3 trial(s) at a time after t{t} (kept): late"))
            .collect::<Vec<_>>()
            .join("; then "),
    );
    let cells = report.cells.len();
    let full = report.decision.correctness.thin.clone().unwrap();
    assert_eq!(full.matches(" exposed)").count(), cells);
    let shown = summary::in_brief(&report);
    let brief = shown.decision.correctness.thin.clone().unwrap();
    assert!(
        brief.starts_with(&format!(
            "{cells} cell(s) of the recommended strategies with fewer than 30 exposed episodes (by strategy: single 12,"
        )) && brief.contains("fewest: single × none (12),")
            && brief.ends_with("every cell in matrix.md, \"Thin evidence\""),
        "{brief}"
    );
    let terminal = decision_md(&shown);
    assert!(
        !terminal.contains(&full) && terminal.len() + full.len() / 2 < decision_md(&report).len()
    );
    assert!(shown
        .jobs
        .backoff
        .unwrap()
        .starts_with("backed off 5 time(s)"));
    // matrix.md keeps the notes whole and lists every cell in its table.
    let md = matrix_md(&report);
    assert!(md.contains(&full));
    let table = thin_evidence_md(&report);
    assert!(md.contains(&table));
    assert_eq!(table.matches("| correctness |").count(), cells, "{table}");
    assert!(
        table.contains("| single × none | 12 | correctness |"),
        "{table}"
    );
}

/// The strategies of each plan of `args`, with its work and key.
fn kinds(args: &[&str]) -> Result<Vec<(String, bool, Vec<String>)>, String> {
    Ok(parse(args)
        .unwrap()
        .plans(Backend::Local)?
        .into_iter()
        .map(|(p, _)| {
            (
                p.workload.work.to_string(),
                p.workload.idempotency_key,
                p.strategies.iter().map(|s| s.to_string()).collect(),
            )
        })
        .collect())
}

#[test]
fn several_kinds_of_work_make_a_plan_each_with_the_claims_in_the_job_one_only() {
    let k = kinds(&["--quick", "--work", "external,job,external"]).unwrap();
    assert_eq!(k.len(), 2, "each kind once: {k:?}");
    assert_eq!(k[0].0, "external");
    assert_eq!(k[1].0, "job");
    assert!(!k[0].2.contains(&"claim-update".to_string()), "{k:?}");
    assert_eq!(
        k[1].2[k[0].2.len()..],
        ["claim-update", "claim-skip-locked"]
    );
    assert_eq!(k[1].2[..k[0].2.len()], k[0].2[..]);

    // Named rows: a claim is left out of the kinds it cannot serve, the key out of row work.
    let k = kinds(&[
        "--work",
        "row,job",
        "--strategies",
        "single-fenced,claim-update",
        "--idempotency-key",
    ])
    .unwrap();
    assert_eq!(
        k,
        [
            ("row".to_string(), false, vec!["single-fenced".to_string()]),
            (
                "job".to_string(),
                true,
                vec!["single-fenced".to_string(), "claim-update".to_string()]
            )
        ]
    );
    // A claim with no job kind among several, or a kind with no row, is refused.
    let e = kinds(&[
        "--work",
        "row,external",
        "--strategies",
        "single,claim-update",
    ])
    .unwrap_err();
    assert!(
        e.contains("serves job work only (add job to --work)"),
        "{e}"
    );
    let e = kinds(&["--work", "external,job", "--strategies", "claim-update"]).unwrap_err();
    assert!(
        e.starts_with("--work external: no strategy serves external work"),
        "{e}"
    );
    // One kind keeps the refusal it always had.
    let e = kinds(&["--work", "external", "--strategies", "claim-update"]).unwrap_err();
    assert!(e.contains("serves job work only (--work job)"), "{e}");
    let e = kinds(&["--work", "row", "--idempotency-key"]).unwrap_err();
    assert!(e.contains("needs external or job work"), "{e}");
}
