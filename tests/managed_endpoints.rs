//! Managed endpoints: `--topology external` on servers lockbench did not start.
//!
//! TLS (`--tls-ca`, `--tls-cert`, `--tls-key`) against a real `redis-server` listening on its
//! TLS port with certificates this test makes with the `openssl` CLI: a CA, a server
//! certificate for 127.0.0.1 signed by it, a client certificate signed by it, and a second CA
//! that signed nothing the server presents. Cluster seeds (`--cluster`) against a Redis
//! Cluster the test starts itself, holding a key of "its user" that the run must not touch.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::cli::{assert_refused, expect_code, run_in, summary};
use lockbench::node::ConnectOptions;
use lockbench::topology::{LocalNode, LocalNodeConfig, TopologyKind};

/// The PEM files of one test.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn path(&self, name: &str) -> String {
        self.file(name).to_str().unwrap().to_string()
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the openssl CLI runs (scripts/ensure-deps.sh installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`), a second unrelated CA (`other-ca.pem`), a server certificate for IP
/// 127.0.0.1, also good for TLS clients (`server.pem`/`server.key`) and a client certificate (`client.pem`/`client.key`),
/// both signed by `ca.pem`. P-256 keys: fast to make.
fn make_pki(dir: &Path) -> Pki {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        let key = format!("{ca}.key");
        let pem = format!("{ca}.pem");
        let mut args = vec!["req", "-x509"];
        args.extend(ec);
        args.extend([
            "-keyout",
            &key,
            "-out",
            &pem,
            "-days",
            "2",
            "-subj",
            "/CN=lockbench test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(dir, &args);
    }
    for (name, ext) in [
        (
            "server",
            // clientAuth too: a cluster node presents it on the cluster bus, whose peers
            // always ask for a certificate (tls-auth-clients does not apply there).
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        let (key, csr, pem, ext_file) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(
            dir.join(&ext_file),
            format!("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n{ext}"),
        )
        .unwrap();
        let subject = format!("/CN=lockbench test {name}");
        let mut args = vec!["req", "-new"];
        args.extend(ec);
        args.extend(["-keyout", &key, "-out", &csr, "-subj", &subject]);
        openssl(dir, &args);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-out",
                &pem,
                "-extfile",
                &ext_file,
            ],
        );
    }
    Pki {
        dir: dir.to_path_buf(),
    }
}

/// A redis-server with its TLS port on a free port (its plain port serves only the rig's
/// readiness PING); returns the node and the TLS port. `mutual`: `tls-auth-clients yes`.
async fn start_tls_node(pki: &Pki, dir: &Path, mutual: bool) -> (LocalNode, u16) {
    let tls_port = lockbench::topology::ports::pick_free_port().unwrap();
    let mut config = LocalNodeConfig::new("tls");
    config.extra_config = vec![
        format!("tls-port {tls_port}"),
        format!("tls-cert-file {}", pki.path("server.pem")),
        format!("tls-key-file {}", pki.path("server.key")),
        format!("tls-ca-cert-file {}", pki.path("ca.pem")),
        format!("tls-auth-clients {}", if mutual { "yes" } else { "no" }),
    ];
    let node = LocalNode::start(&config, dir).await.unwrap();
    (node, tls_port)
}

/// `run --topology external --url rediss://127.0.0.1:<port>` with `extra` flags, a short
/// fault-free single-strategy workload.
fn run_args(port: u16, extra: &[String]) -> Vec<String> {
    let mut args: Vec<String> = [
        "run",
        "--topology",
        "external",
        "-s",
        "single",
        "-c",
        "2",
        "-r",
        "2",
        "--ops",
        "100",
        "--ttl",
        "2s",
        "--key-prefix",
        "tls-test:",
        "--no-progress",
        "--url",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("rediss://127.0.0.1:{port}"));
    args.extend(extra.iter().cloned());
    args
}

/// The run completed, and each of its strategies made its 100 attempts, acquired, met no
/// error and is `valid`.
fn assert_valid_run(results: &Path, what: &str) {
    let s = summary(results);
    assert_eq!(s["status"], "completed", "{what}: {s}");
    for st in s["strategies"].as_array().unwrap() {
        assert_eq!(st["attempts"], 100, "{what}: {st}");
        assert!(st["acquired"].as_u64().unwrap() > 0, "{what}: {st}");
        assert_eq!(st["errors"], 0, "{what}: {st}");
        assert_eq!(st["check"]["verdict"], "valid", "{what}: {st}");
    }
}

/// The `rediss://` node is trusted through `--tls-ca` (through lockbench's proxy, and with
/// `--direct`), and refused (exit 4, naming the node and the certificate, nothing left)
/// without it or with another CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_node_with_its_ca_runs_valid_and_a_wrong_ca_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = make_pki(tmp.path());
    let (_node, port) = start_tls_node(&pki, tmp.path(), false).await;

    for direct in [false, true] {
        let results = tmp.path().join(format!("ok-{direct}"));
        let mut extra = vec!["--tls-ca".to_string(), pki.path("ca.pem")];
        if direct {
            extra.push("--direct".into());
        }
        let out = run_in(run_args(port, &extra), &results);
        expect_code(&out, 0, &format!("TLS with the CA, direct={direct}"));
        assert_valid_run(&results, &format!("direct={direct}"));
    }

    for (what, extra) in [
        (
            "another CA",
            vec!["--tls-ca".to_string(), pki.path("other-ca.pem")],
        ),
        ("the system roots", Vec::new()),
    ] {
        let results = tmp.path().join("refused");
        let out = run_in(run_args(port, &extra), &results);
        let (_, stderr) = expect_code(&out, 4, what);
        assert!(
            stderr.contains("n1") && stderr.to_lowercase().contains("certificate"),
            "{what}: {stderr}"
        );
        assert!(!results.exists(), "{what}: a refused start left results");
    }
}

/// `tls-auth-clients yes`: the client certificate and key get in; without them the server
/// drops the handshake and the run stops naming the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_the_client_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = make_pki(tmp.path());
    let (_node, port) = start_tls_node(&pki, tmp.path(), true).await;

    let results = tmp.path().join("mutual");
    let extra = [
        "--tls-ca",
        &pki.path("ca.pem"),
        "--tls-cert",
        &pki.path("client.pem"),
        "--tls-key",
        &pki.path("client.key"),
    ]
    .map(String::from);
    let out = run_in(run_args(port, &extra), &results);
    expect_code(&out, 0, "mutual TLS with cert and key");
    assert_valid_run(&results, "mutual TLS");

    let results = tmp.path().join("no-cert");
    let out = run_in(
        run_args(port, &["--tls-ca".into(), pki.path("ca.pem")]),
        &results,
    );
    let (_, stderr) = expect_code(&out, 4, "mutual TLS without a client certificate");
    assert!(stderr.contains("n1 (rediss://127.0.0.1"), "{stderr}");
    assert!(!results.exists(), "a refused start left results");
}

/// Bad `--tls-*` input is refused before anything starts (exit 2), naming the flag and file.
#[test]
fn bad_tls_files_are_refused_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = make_pki(tmp.path());
    let garbage = tmp.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let garbage = garbage.to_str().unwrap().to_string();
    let missing = tmp.path().join("missing.pem").to_str().unwrap().to_string();
    let results = tmp.path().join("r");
    let url = "rediss://127.0.0.1:6390".to_string();
    let base = |extra: &[&str]| {
        let mut a: Vec<String> = ["run", "--topology", "external", "--url", &url]
            .map(String::from)
            .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            base(&["--tls-ca", &missing]),
            format!("--tls-ca {missing}: cannot read it"),
        ),
        (
            base(&["--tls-ca", &garbage]),
            format!("--tls-ca {garbage}: holds no PEM certificate"),
        ),
        (
            base(&[
                "--tls-cert",
                &pki.path("client.pem"),
                "--tls-key",
                &pki.path("client.pem"),
            ]),
            format!(
                "--tls-key {}: holds no PEM private key",
                pki.path("client.pem")
            ),
        ),
        (
            base(&["--tls-cert", &pki.path("client.pem")]),
            "--tls-key".to_string(),
        ),
        (
            [
                "run",
                "--topology",
                "external",
                "--url",
                "redis://127.0.0.1:6390",
                "--tls-ca",
                &pki.path("ca.pem"),
            ]
            .map(String::from)
            .to_vec(),
            "write the URL as rediss://".to_string(),
        ),
        (
            ["run", "--tls-ca", &pki.path("ca.pem")]
                .map(String::from)
                .to_vec(),
            "are for --topology external".to_string(),
        ),
        (
            [
                "run",
                "--topology",
                "external",
                "--url",
                "rediss://redis.example.com:6380",
                "--tls-ca",
                &pki.path("ca.pem"),
            ]
            .map(String::from)
            .to_vec(),
            "add --direct".to_string(),
        ),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = assert_refused(&args, &results, &needle);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

/// Every key on every node of `t` (primaries and replicas), by SCAN.
async fn all_keys(t: &lockbench::topology::Topology) -> Vec<String> {
    let mut keys = Vec::new();
    for e in t.data_endpoints() {
        let mut conn = e.connect_direct(&ConnectOptions::default()).await.unwrap();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .unwrap();
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    keys
}

/// `--topology external --cluster` on a Redis Cluster lockbench did not start: `single` and
/// `single-fenced` run valid through two seed nodes, every key they leave is under the run's
/// prefix, and a key of the cluster's user is still there with its value. Without `--direct`,
/// with `--url` too, or on another topology, `--cluster` is refused (exit 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_cluster_seeds_run_valid_and_touch_only_the_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let cluster =
        common::node::start_topology(TopologyKind::Cluster, &tmp.path().join("nodes")).await;
    let nodes = cluster.data_endpoints();
    let seeds = format!("{},{}", nodes[0].url, nodes[1].url);
    let user = lockbench::topology::external::cluster_endpoint(&nodes[..1], None);
    let mut conn = user
        .connect_cluster(&ConnectOptions::default())
        .await
        .unwrap();
    redis::cmd("SET")
        .arg("user:data")
        .arg("keep")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();

    let results = tmp.path().join("r");
    let out = run_in(
        [
            "run",
            "--topology",
            "external",
            "--cluster",
            &seeds,
            "--direct",
            "-s",
            "single,single-fenced",
            "-c",
            "2",
            "-r",
            "4",
            "--ops",
            "100",
            "--ttl",
            "2s",
            "--key-prefix",
            "managed-test:",
            "--no-progress",
        ],
        &results,
    );
    expect_code(&out, 0, "external cluster run");
    assert_valid_run(&results, "external cluster run");
    let value: Option<String> = redis::cmd("GET")
        .arg("user:data")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value.as_deref(), Some("keep"));
    let keys = all_keys(&cluster).await;
    let fences = keys
        .iter()
        .filter(|k| k.starts_with("managed-test:"))
        .count();
    assert!(fences > 0, "single-fenced left no fence counter: {keys:?}");
    let foreign: Vec<_> = keys
        .iter()
        .filter(|k| !k.starts_with("managed-test:") && k.as_str() != "user:data")
        .collect();
    assert!(foreign.is_empty(), "keys outside the prefix: {foreign:?}");

    let refused = tmp.path().join("refused");
    for (extra, needle) in [
        (vec![], "--cluster needs --direct"),
        (
            vec!["--direct", "--url", nodes[2].url.as_str()],
            "--cluster and --url together",
        ),
    ] {
        let mut args = vec!["run", "--topology", "external", "--cluster", &seeds];
        args.extend(extra);
        let out = assert_refused(&args, &refused, needle);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = assert_refused(
        &["run", "--cluster", &seeds],
        &refused,
        "is for --topology external",
    );
    assert_eq!(out.status.code(), Some(2));
    cluster.shutdown().await;
}

/// Six cluster nodes serving clients, replication and the cluster bus over TLS (`tls-port`,
/// `tls-replication yes`, `tls-cluster yes`, certificates of `pki`), created with
/// `redis-cli --cluster create --tls`, ready (every node `cluster_state:ok` and knowing all
/// six, every replica's link up). Their plain ports serve only readiness checks. Returns the nodes and their TLS ports.
async fn start_tls_cluster(pki: &Pki, dir: &Path) -> (Vec<LocalNode>, Vec<u16>) {
    let pick = || lockbench::topology::ports::pick_free_port().unwrap();
    let mut nodes = Vec::new();
    let mut tls_ports = Vec::new();
    for i in 1..=6 {
        let tls_port = pick();
        let mut config = LocalNodeConfig::new(format!("n{i}"));
        config.start_timeout = lockbench::topology::cluster::CLUSTER_NODE_START_TIMEOUT;
        config.extra_config = vec![
            format!("tls-port {tls_port}"),
            format!("tls-cert-file {}", pki.path("server.pem")),
            format!("tls-key-file {}", pki.path("server.key")),
            format!("tls-ca-cert-file {}", pki.path("ca.pem")),
            "tls-auth-clients no".into(),
            "tls-replication yes".into(),
            "tls-cluster yes".into(),
            "cluster-enabled yes".into(),
            "cluster-config-file nodes.conf".into(),
            "cluster-node-timeout 1500".into(),
            format!("cluster-port {}", pick()),
        ];
        nodes.push(LocalNode::start(&config, dir).await.unwrap());
        tls_ports.push(tls_port);
    }
    let mut create = Command::new("redis-cli");
    create.args(["--cluster", "create"]);
    create.args(tls_ports.iter().map(|p| format!("127.0.0.1:{p}")));
    create
        .args([
            "--cluster-replicas",
            "1",
            "--cluster-yes",
            "--tls",
            "--cacert",
        ])
        .arg(pki.file("ca.pem"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = create.spawn().expect("redis-cli runs");
    let status = common::process::wait_exit(
        &mut child,
        std::time::Duration::from_secs(30),
        "redis-cli --cluster create --tls",
    );
    assert!(
        status.success(),
        "redis-cli --cluster create --tls: {status}"
    );
    for node in &nodes {
        let endpoint = node.endpoint();
        common::wait::wait_for_async(
            std::time::Duration::from_secs(30),
            &format!(
                "{} reports cluster_state:ok, knows 6 nodes and (a replica) its link up",
                node.name()
            ),
            || {
                let endpoint = endpoint.clone();
                async move {
                    let mut conn = endpoint
                        .connect_direct(&ConnectOptions::default())
                        .await
                        .ok()?;
                    let info: String = redis::cmd("CLUSTER")
                        .arg("INFO")
                        .query_async(&mut conn)
                        .await
                        .ok()?;
                    // A replica's link up: replication runs over TLS (`tls-replication yes`).
                    let repl: String = redis::cmd("INFO")
                        .arg("replication")
                        .query_async(&mut conn)
                        .await
                        .ok()?;
                    let linked =
                        repl.contains("role:master") || repl.contains("master_link_status:up");
                    (info.contains("cluster_state:ok")
                        && info.contains("cluster_known_nodes:6")
                        && linked)
                        .then_some(())
                }
            },
        )
        .await;
    }
    (nodes, tls_ports)
}

/// A Redis Cluster over TLS (clients, replication and bus): `--cluster` with `rediss://`
/// seeds and `--tls-ca` runs valid through every shard; with another CA the run stops before
/// any client starts (exit 4, naming the seed node and the certificate), leaving nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_cluster_with_its_ca_runs_valid_and_a_wrong_ca_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = make_pki(tmp.path());
    let (_nodes, ports) = start_tls_cluster(&pki, &tmp.path().join("nodes")).await;
    let seeds = format!(
        "rediss://127.0.0.1:{},rediss://127.0.0.1:{}",
        ports[0], ports[1]
    );
    let args = |ca: &str| -> Vec<String> {
        [
            "run",
            "--topology",
            "external",
            "--cluster",
            &seeds,
            "--direct",
            "--tls-ca",
            &pki.path(ca),
            "-s",
            "single,single-fenced",
            "-c",
            "2",
            "-r",
            "6",
            "--ops",
            "100",
            "--ttl",
            "2s",
            "--key-prefix",
            "tls-cluster:",
            "--no-progress",
        ]
        .map(String::from)
        .to_vec()
    };
    let results = tmp.path().join("ok");
    let out = run_in(args("ca.pem"), &results);
    expect_code(&out, 0, "TLS cluster with its CA");
    assert_valid_run(&results, "TLS cluster with its CA");

    let refused = tmp.path().join("refused");
    let out = run_in(args("other-ca.pem"), &refused);
    let (_, stderr) = expect_code(&out, 4, "TLS cluster with another CA");
    assert!(
        stderr.contains(&format!("rediss://127.0.0.1:{}", ports[0]))
            && stderr.to_lowercase().contains("certificate"),
        "{stderr}"
    );
    assert!(!refused.exists(), "a refused start left results");
}
