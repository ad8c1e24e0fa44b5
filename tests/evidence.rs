//! Evidence integrity with real processes: a run whose process died is recognised, and a
//! history that disagrees with its ledger is never judged `valid`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::cli::{json, lockbench, spawn_in, summary_so_far, text};
use common::process::{signal, wait_exit};
use common::wait::wait_for;

/// Copies the files of one strategy directory (history, ledger and its WAL) into a fresh run directory
/// with the run's `summary.json`, so each case can damage its own copy.
fn copy_run(run: &Path, strategy: &str, to: &Path) -> PathBuf {
    let dst = to.join(run.file_name().unwrap());
    std::fs::create_dir_all(dst.join(strategy)).unwrap();
    std::fs::copy(run.join("summary.json"), dst.join("summary.json")).unwrap();
    // Every file: a killed run's ledger keeps its last commits in `ledger.sqlite-wal`.
    for e in std::fs::read_dir(run.join(strategy)).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dst.join(strategy).join(e.file_name())).unwrap();
        }
    }
    dst
}

/// Cuts the history back to its first `keep` successful acquires (everything from the next
/// one on is gone): the tail a killed process loses when its writer had not flushed.
fn cut_history_tail(history: &Path, keep: usize) {
    let text = std::fs::read_to_string(history).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let ok_acquire = |l: &&str| l.contains("\"kind\":\"ok\"") && l.contains("\"f\":\"acquire\"");
    let oks: Vec<usize> = (0..lines.len())
        .filter(|&i| ok_acquire(&lines[i]))
        .collect();
    assert!(oks.len() > keep, "only {} successful acquires", oks.len());
    std::fs::write(history, lines[..oks[keep]].join("\n") + "\n").unwrap();
}

/// Deletes the ledger's last `n` critical sections (all their steps): steps the ledger lost.
fn drop_ledger_sections(ledger: &Path, n: usize) {
    let db = rusqlite::Connection::open(ledger).unwrap();
    let deleted = db
        .execute(
            "DELETE FROM events WHERE section_id IN (SELECT section_id FROM events \
             WHERE step = 'begin' ORDER BY seq DESC LIMIT ?1)",
            [n as i64],
        )
        .unwrap();
    assert!(deleted >= n, "deleted {deleted} rows");
}

/// `lockbench check <dir>`: (exit code, stdout, stderr).
fn check(dir: &Path) -> (Option<i32>, String, String) {
    let out = lockbench().arg("check").arg(dir).output().unwrap();
    let (stdout, stderr) = text(&out);
    (out.status.code(), stdout, stderr)
}

#[test]
fn a_killed_run_is_recognised_and_a_disagreeing_history_is_never_valid() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut child = spawn_in(
        [
            "run",
            "--topology",
            "five",
            "-s",
            "redlock",
            "-d",
            "30s",
            "-c",
            "16",
            "--no-progress",
        ],
        &results,
        Stdio::null(),
        Stdio::null(),
    );
    // Killed in full swing (about 3 s in): its summary says running, with acquires measured.
    wait_for(Duration::from_secs(40), "3 s of redlock measured", || {
        let s = summary_so_far(&results)?;
        let st = s["strategies"].as_array()?.first()?.clone();
        (st["elapsed_s"].as_f64().unwrap_or(0.0) >= 2.5 && st["acquired"].as_u64()? > 0)
            .then_some(())
    });
    signal(&child, libc::SIGKILL);
    wait_exit(&mut child, Duration::from_secs(10), "the killed run");
    let run = std::fs::canonicalize(results.join("latest")).unwrap();
    let before = json(&run.join("summary.json"));
    assert_eq!(before["status"], "running");
    assert_eq!(before["pid"], child.id(), "the run records its pid");

    // The run as the kill left it: `check` sees the process is gone and marks it failed.
    let (code, stdout, stderr) = check(&run);
    let after = json(&run.join("summary.json"));
    assert_eq!(after["status"], "failed", "{stderr}");
    let error = after["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("pid {}", child.id())) && error.contains("never finished"),
        "{error}"
    );
    assert!(stderr.contains("this run died"), "{stderr}");
    // `latest` still names the newest run, now marked failed, not running.
    assert_eq!(
        std::fs::canonicalize(results.join("latest")).unwrap(),
        run,
        "latest"
    );
    let report = json(&run.join("redlock/checker.json"));
    let (ok, sections) = (
        report["stats"]["acquire_ok"].as_u64().unwrap(),
        report["stats"]["sections"].as_u64().unwrap(),
    );
    eprintln!("killed run: {ok} acquires ok, {sections} sections, check exit {code:?}");
    if ok != sections {
        assert_eq!(code, Some(3), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("unknown because the ledger has"),
            "{stdout}"
        );
    }

    // Either direction of disagreement, as a kill leaves it (3 events short on one side, from
    // wherever the kill left the two): `unknown`, exit 3, with the reason.
    let (ok, sections) = (ok as usize, sections as usize);
    type Damage = Box<dyn Fn(&Path)>;
    let cases: [(&str, Damage, &str); 2] = [
        (
            "history tail lost",
            Box::new(move |d| {
                cut_history_tail(&d.join("redlock/history.jsonl"), sections.min(ok) - 3)
            }),
            "the history lost its tail",
        ),
        (
            "ledger sections lost",
            Box::new(move |d| {
                let n = sections + 3 - sections.min(ok);
                drop_ledger_sections(&d.join("redlock/ledger.sqlite"), n)
            }),
            "the ledger lost steps",
        ),
    ];
    for (name, damage, reason) in cases {
        let copy = copy_run(&run, "redlock", &tmp.path().join(name.replace(' ', "-")));
        damage(&copy);
        let (code, stdout, stderr) = check(&copy);
        assert_eq!(code, Some(3), "{name}\n{stdout}\n{stderr}");
        let first = stdout.lines().nth(2).unwrap_or_default();
        assert!(
            first.starts_with("redlock") && first.contains("unknown"),
            "{name}: {stdout}"
        );
        assert!(stdout.contains(reason), "{name}: {stdout}");
    }
}

/// A small tmpfs mounted for one test, unmounted when dropped.
struct SmallDisk {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts a tmpfs of `size` (e.g. "2m") on a fresh directory; the error says why not.
    fn mount(size: &str) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Self {
            path: dir.path().to_path_buf(),
            _dir: dir,
        })
    }

    /// Fills what is left of the disk; the returned file frees it when removed.
    fn fill(&self) -> PathBuf {
        use std::io::Write as _;
        let filler = self.path.join("filler");
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = [0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.flush();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

/// Every `checker.json` under `dir` parses (none empty or cut), and no temporary file is left.
fn assert_checker_files_whole(dir: &Path) {
    for e in walk(dir) {
        let name = e.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.ends_with(".tmp"),
            "temporary file left: {}",
            e.display()
        );
        if name == "checker.json" {
            let bytes = std::fs::read(&e).unwrap();
            assert!(
                serde_json::from_slice::<serde_json::Value>(&bytes).is_ok(),
                "{} is not whole ({} bytes)",
                e.display(),
                bytes.len()
            );
        }
    }
}

/// Copies the files and directories under `from` to `to` (symlinks and sockets skipped).
fn copy_tree(from: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let kind = e.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&src, &dst);
        } else if kind.is_file() {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
    to.to_path_buf()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn evidence_that_cannot_be_written_stops_the_run_and_nothing_is_left_partial() {
    let disk = match SmallDisk::mount("2m") {
        Ok(d) => d,
        Err(why) => {
            eprintln!(
                "\n!!! SKIPPED: the full-disk case was NOT tested: cannot mount a 2 MiB tmpfs \
                 here ({why}); run this test as root to cover it !!!\n"
            );
            return;
        }
    };
    let results = disk.path.join("r");
    let started = std::time::Instant::now();
    let out = lockbench()
        .args(["run", "-d", "30s", "--no-progress", "--results"])
        .arg(&results)
        .output()
        .unwrap();
    let took = started.elapsed();
    let (stdout, stderr) = text(&out);
    let all = format!("{stdout}\n{stderr}");
    assert_eq!(out.status.code(), Some(4), "{all}");
    // Stopped at once (the history fills 2 MiB within a second or two), not after 30 s.
    assert!(took < Duration::from_secs(20), "took {took:?}\n{all}");
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_default();
    for needle in [
        "the evidence could not be written, so the run was stopped at once",
        "No space left on device",
        "later event(s) are missing",
    ] {
        assert!(error.contains(needle), "{needle:?} not in {error:?}\n{all}");
    }
    assert!(!all.contains("results are saved"), "{all}");
    let run = std::fs::canonicalize(results.join("latest")).unwrap();

    // `check` on the full disk: the verdict is shown, nothing is saved, nothing is left partial.
    let filler = disk.fill();
    let (code, stdout, stderr) = check(&run);
    assert_eq!(code, Some(4), "{stdout}\n{stderr}");
    assert!(stdout.contains("unknown because"), "{stdout}");
    assert!(
        stderr.contains("the verdicts above were not all saved")
            && stderr.contains("No space left"),
        "{stderr}"
    );
    assert_checker_files_whole(&run);

    // Moved to a disk with space: `unknown` (the history is cut, the ledger and history
    // disagree), and the run is recorded as failed whether or not it could write that itself.
    std::fs::remove_file(filler).unwrap();
    let roomy = tempfile::tempdir().unwrap();
    let run = copy_tree(&run, &roomy.path().join(run.file_name().unwrap()));
    let (code, stdout, stderr) = check(&run);
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    let row = stdout.lines().nth(2).unwrap_or_default();
    assert!(
        row.starts_with("single") && row.contains("unknown"),
        "{stdout}"
    );
    assert_eq!(json(&run.join("summary.json"))["status"], "failed");
    assert_checker_files_whole(&run);

    // A checker.json cut to nothing (as a full disk left it before writes were atomic): the
    // report says the file is cut, not that another version wrote it.
    std::fs::write(run.join("single/checker.json"), b"").unwrap();
    let out = lockbench().arg("report").arg(&run).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the file is empty or cut short")
            && !stderr.contains("different lockbench"),
        "{stderr}"
    );
}
