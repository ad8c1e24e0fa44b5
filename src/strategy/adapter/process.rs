//! One adapter process: spawned with piped stdin/stdout (stderr appended to its log file),
//! requests written as JSON lines, replies matched to requests by id by a reader task.
//!
//! **Lifetime.** The process is in its own process group (a terminal's Ctrl-C reaches
//! lockbench, which stops the run in order, not the adapter), and is killed (`SIGKILL`) when
//! the [`AdapterProcess`] is dropped; its stdin closes then too, and an adapter exits when its
//! stdin closes, so it also ends when lockbench itself is killed.
//!
//! **Failures.** A line that is not a protocol message, a reply to an id lockbench never sent,
//! or the adapter closing its stdout makes the process *failed*: the first such reason is kept
//! ([`AdapterProcess::failure`], naming the adapter and the line), every request waiting or
//! later gets it, and the process is killed. A reply after lockbench's timeout is not an error:
//! it is appended, with the unsolicited events, to `adapter-messages.jsonl` beside the log.
//!
//! **Crash.** [`AdapterProcess::crash`] kills the process on purpose (`SIGKILL`, a client's
//! `client-crash`): it is not a failure of the adapter, so the run goes on; every request
//! waiting on it, or sent later, gets [`RequestError::Failed`] naming the crash (its outcome
//! is unknown: the library may have acted before the kill).
//!
//! **Overhead.** Each answered request's round trip as lockbench timed it, minus the adapter's
//! own `finished_ns − started_ns`, is the harness's cost (pipe, JSON, scheduling on both sides),
//! split into legs when the adapter reports `received_ns` ([`AdapterOverhead`]); when the
//! process ends, its p50/p99/max (µs) and the legs' p50s are appended to
//! `adapter-messages.jsonl` as an `overhead` entry.

use std::collections::{HashMap, HashSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::overhead::{monotonic_ns, AdapterOverhead, RequestTimes};
use super::protocol::{parse_line, Hello, Incoming, Reply, PROTOCOL_VERSION};

/// Why a request got no reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RequestError {
    /// No reply within the bound; a late one is recorded when it comes.
    Timeout(Duration),
    /// The process failed (the reason names the adapter and the line).
    Failed(String),
}

/// What a waiting request gets: the reply line and when lockbench's reader read it
/// ([`monotonic_ns`]), or why the process failed.
type Answer = Result<(Incoming, u64), String>;

/// What the reader task and the requests share.
struct Shared {
    name: String,
    /// Waiting requests: each gets its reply and when lockbench's reader read it
    /// ([`monotonic_ns`]), or the failure.
    pending: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    /// Requests that timed out: a reply to one of them is late, not wrong.
    abandoned: Mutex<HashSet<u64>>,
    failure: OnceLock<String>,
    /// Set when lockbench killed the process on purpose ([`AdapterProcess::crash`]): the
    /// reason every waiting or later request gets instead of a failure.
    crashed: OnceLock<String>,
    /// `adapter-messages.jsonl`: late replies and events.
    messages: Option<Mutex<std::fs::File>>,
    started: Instant,
    /// Harness overhead per answered request, µs: lockbench's round trip minus the adapter's
    /// own time around the library call (replies with both timestamps only), and its legs.
    overhead: Mutex<AdapterOverhead>,
}

impl Shared {
    /// Marks the process failed (the first reason wins) and answers every waiting request.
    /// After a deliberate crash nothing is a failure: the waiting requests get the crash.
    fn fail(&self, why: String) {
        let reason = match self.crashed.get() {
            Some(crash) => crash.clone(),
            None => {
                let _ = self.failure.set(why);
                self.failure.get().cloned().unwrap_or_default()
            }
        };
        let waiting: Vec<_> = self.pending.lock().expect("pending").drain().collect();
        for (_, tx) in waiting {
            let _ = tx.send(Err(reason.clone()));
        }
    }

    fn note(&self, kind: &str, line: &str) {
        let at_ms = self.started.elapsed().as_secs_f64() * 1e3;
        match &self.messages {
            Some(file) => {
                let raw: Value = serde_json::from_str(line).unwrap_or(Value::Null);
                let entry = json!({ "at_ms": at_ms, "kind": kind, "message": raw });
                let mut f = file.lock().expect("messages file");
                if let Err(e) = writeln!(f, "{entry}") {
                    tracing::warn!("adapter {}: cannot record a {kind} message: {e}", self.name);
                }
            }
            None => tracing::info!("adapter {} {kind} at {at_ms:.1} ms: {line}", self.name),
        }
    }

    /// Routes one line; `Err` is a protocol violation.
    fn dispatch(&self, line: &str, read_ns: u64) -> Result<(), String> {
        let incoming = parse_line(line)?;
        let id = match &incoming {
            Incoming::Hello(_) => 0,
            Incoming::Reply { in_reply_to, .. } => *in_reply_to,
            Incoming::Event(_) => {
                self.note("event", line);
                return Ok(());
            }
            Incoming::ProtocolError(m) => {
                return Err(format!("it could not read a request of lockbench's: {m}"))
            }
        };
        if let Some(tx) = self.pending.lock().expect("pending").remove(&id) {
            let _ = tx.send(Ok((incoming, read_ns)));
            return Ok(());
        }
        if self.abandoned.lock().expect("abandoned").remove(&id) {
            self.note("late-reply", line);
            return Ok(());
        }
        Err(if id == 0 {
            "a second hello".to_string()
        } else {
            format!("a reply to id {id}, which lockbench never sent or which was already answered")
        })
    }
}

/// A running adapter process. Dropping it kills the process.
pub(crate) struct AdapterProcess {
    shared: Arc<Shared>,
    /// `None` once closed ([`close_and_wait`](Self::close_and_wait)).
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    next_id: AtomicU64,
    child: Mutex<Child>,
    reader: tokio::task::JoinHandle<()>,
    /// What was run, for messages.
    command: String,
    /// The adapter's handshake.
    pub hello: Hello,
}

impl Drop for AdapterProcess {
    fn drop(&mut self) {
        let o = self.shared.overhead.lock().expect("overhead").clone();
        let h = &o.total;
        if !h.is_empty() {
            let p50 = |h: &hdrhistogram::Histogram<u64>| h.value_at_quantile(0.5);
            let summary = json!({
                "requests": h.len(),
                "p50_us": p50(h),
                "p99_us": h.value_at_quantile(0.99),
                "max_us": h.max(),
                "legs_p50_us": {
                    "lockbench": p50(&o.lockbench),
                    "to_adapter": p50(&o.to_adapter),
                    "in_adapter": p50(&o.in_adapter),
                    "from_adapter": p50(&o.from_adapter),
                },
            });
            self.shared.note("overhead", &summary.to_string());
        }
        self.reader.abort();
        if let Ok(child) = self.child.get_mut() {
            let _ = child.start_kill();
        }
    }
}

/// Shortens a line for an error message.
fn excerpt(line: &str) -> String {
    const MAX: usize = 200;
    match line.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

impl AdapterProcess {
    /// Starts `argv` in `cwd` (stderr appended to `log` when given, else inherited) and reads
    /// its `hello` within `hello_timeout`.
    ///
    /// # Errors
    /// A sentence naming the adapter and the command: it cannot start, it said something else
    /// than a `hello` of protocol [`PROTOCOL_VERSION`], or it said nothing in time.
    pub(crate) async fn spawn(
        name: &str,
        argv: &[String],
        cwd: Option<&Path>,
        log: Option<&Path>,
        hello_timeout: Duration,
    ) -> Result<Self, String> {
        let command = argv.join(" ");
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| format!("adapter {name}: empty command"))?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let mut messages = None;
        match log {
            Some(path) => {
                let open = |p: &Path| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)
                        .map_err(|e| format!("adapter {name}: cannot open {}: {e}", p.display()))
                };
                cmd.stderr(Stdio::from(open(path)?));
                messages = Some(Mutex::new(open(&messages_path(path))?));
            }
            None => {
                cmd.stderr(Stdio::inherit());
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("adapter {name}: cannot start `{command}`: {e}"))?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let shared = Arc::new(Shared {
            name: name.to_string(),
            pending: Mutex::new(HashMap::new()),
            abandoned: Mutex::new(HashSet::new()),
            failure: OnceLock::new(),
            crashed: OnceLock::new(),
            messages,
            started: Instant::now(),
            overhead: Mutex::new(AdapterOverhead::default()),
        });
        let (tx, rx) = oneshot::channel();
        shared.pending.lock().expect("pending").insert(0, tx);
        let reader = tokio::spawn(read_loop(
            stdout,
            shared.clone(),
            log.map(Path::to_path_buf),
        ));
        let hello = match tokio::time::timeout(hello_timeout, rx).await {
            Ok(Ok(Ok((Incoming::Hello(h), _)))) => h,
            Ok(Ok(Ok((other, _)))) => {
                return Err(format!(
                    "adapter {name} (`{command}`): its first line must be a hello, not {other:?}"
                ))
            }
            Ok(Ok(Err(why))) => return Err(format!("{why} (command `{command}`)")),
            Ok(Err(_)) => {
                return Err(format!(
                    "adapter {name} (`{command}`) stopped before its hello"
                ))
            }
            Err(_) => {
                return Err(format!(
                    "adapter {name} (`{command}`) sent no hello within {hello_timeout:?}"
                ))
            }
        };
        if hello.protocol != PROTOCOL_VERSION {
            return Err(format!(
                "adapter {name} (`{command}`) speaks protocol {}, lockbench speaks {PROTOCOL_VERSION}",
                hello.protocol
            ));
        }
        Ok(Self {
            shared,
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            next_id: AtomicU64::new(1),
            child: Mutex::new(child),
            reader,
            command,
            hello,
        })
    }

    /// The adapter's name.
    pub(crate) fn name(&self) -> &str {
        &self.shared.name
    }

    /// The command line it was started with.
    pub(crate) fn command(&self) -> &str {
        &self.command
    }

    /// The process's id (for signals), while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.lock().expect("child").id()
    }

    /// The harness overhead per answered request so far, µs (see the module's docs).
    pub(crate) fn overhead(&self) -> AdapterOverhead {
        self.shared.overhead.lock().expect("overhead").clone()
    }

    /// Why the process failed, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.shared.failure.get().cloned()
    }

    /// Sends `request` (its `id` is set here) and waits for its reply, at most `bound`
    /// (`None`: as long as the process lives). Returns the reply and lockbench's own time for
    /// the round trip.
    ///
    /// # Errors
    /// [`RequestError::Timeout`] (the id is remembered: a late reply is recorded, not an
    /// error), [`RequestError::Failed`] when the process failed before or while waiting.
    pub(crate) async fn request(
        &self,
        mut request: Value,
        bound: Option<Duration>,
    ) -> Result<(Reply, Duration), RequestError> {
        if let Some(why) = self
            .failure()
            .or_else(|| self.shared.crashed.get().cloned())
        {
            return Err(RequestError::Failed(why));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        request["id"] = json!(id);
        let mut line = request.to_string();
        line.push('\n');
        let (tx, rx) = oneshot::channel();
        self.shared.pending.lock().expect("pending").insert(id, tx);
        // Failed or killed meanwhile: nobody would answer this request any more.
        if let Some(why) = self
            .failure()
            .or_else(|| self.shared.crashed.get().cloned())
        {
            self.shared.pending.lock().expect("pending").remove(&id);
            return Err(RequestError::Failed(why));
        }
        let began = Instant::now();
        let mut sent_ns = 0;
        let written = {
            match self.stdin.lock().await.as_mut() {
                Some(stdin) => {
                    sent_ns = monotonic_ns();
                    stdin.write_all(line.as_bytes()).await
                }
                None => Err(std::io::Error::other("lockbench closed it")),
            }
        };
        if let Err(e) = written {
            self.kill_with(format!(
                "adapter {} stopped reading its stdin ({e}): it exited or crashed",
                self.name()
            ));
        }
        let answer = match bound {
            Some(b) => match tokio::time::timeout(b, rx).await {
                Ok(a) => a,
                Err(_) => {
                    self.shared.pending.lock().expect("pending").remove(&id);
                    self.shared.abandoned.lock().expect("abandoned").insert(id);
                    return Err(RequestError::Timeout(b));
                }
            },
            None => rx.await,
        };
        let elapsed = began.elapsed();
        match answer {
            Ok(Ok((Incoming::Reply { reply, .. }, read_ns))) => {
                if let (Some(started), Some(finished)) =
                    (reply.u64("started_ns"), reply.u64("finished_ns"))
                {
                    self.shared
                        .overhead
                        .lock()
                        .expect("overhead")
                        .record(RequestTimes {
                            round_trip: elapsed.as_nanos() as u64,
                            sent: sent_ns,
                            read: read_ns,
                            received: reply.u64("received_ns"),
                            started,
                            finished,
                        });
                }
                Ok((reply, elapsed))
            }
            Ok(Ok((other, _))) => Err(RequestError::Failed(format!("unexpected {other:?}"))),
            Ok(Err(why)) => Err(RequestError::Failed(why)),
            Err(_) => Err(RequestError::Failed(self.failure().unwrap_or_else(|| {
                format!("adapter {}: its reader stopped", self.name())
            }))),
        }
    }

    /// Closes the adapter's stdin and waits up to `bound` for it to exit by itself (the
    /// protocol's rule). Returns its exit status, or `None` when it is still running (it is
    /// killed when this value is dropped).
    pub(crate) async fn close_and_wait(&self, bound: Duration) -> Option<std::process::ExitStatus> {
        self.stdin.lock().await.take();
        let until = Instant::now() + bound;
        loop {
            if let Ok(Some(status)) = self.child.lock().expect("child").try_wait() {
                return Some(status);
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the process on purpose (`SIGKILL`: a crash of the application it stands for) and
    /// waits up to `bound` until it is gone (reaped). Not a [`failure`](Self::failure): the
    /// run goes on; every request waiting on it, or sent later, gets
    /// [`RequestError::Failed`] naming the crash. Returns whether it is gone.
    pub(crate) async fn crash(&self, bound: Duration) -> bool {
        let _ = self.shared.crashed.set(format!(
            "adapter {} was killed (SIGKILL) by a client-crash",
            self.name()
        ));
        let _ = self.child.lock().expect("child").start_kill();
        let until = Instant::now() + bound;
        loop {
            if let Ok(Some(_)) = self.child.lock().expect("child").try_wait() {
                break;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Requests still waiting get the crash now (the reader sees the end of stdout too).
        self.shared.fail(String::new());
        true
    }

    fn kill_with(&self, why: String) {
        self.shared.fail(why);
        let _ = self.child.lock().expect("child").start_kill();
    }
}

/// `adapter-messages.jsonl` beside the log file.
pub(crate) fn messages_path(log: &Path) -> PathBuf {
    log.with_file_name("adapter-messages.jsonl")
}

async fn read_loop(stdout: ChildStdout, shared: Arc<Shared>, log: Option<PathBuf>) {
    let mut lines = BufReader::new(stdout).lines();
    let mut n = 0u64;
    let see_log = log.map_or_else(String::new, |p| format!("; its log: {}", p.display()));
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => {
                n += 1;
                if let Err(why) = shared.dispatch(&line, monotonic_ns()) {
                    shared.fail(format!(
                        "adapter {} broke the protocol on line {n} of its stdout: {why}: `{}`{see_log}",
                        shared.name,
                        excerpt(&line)
                    ));
                    return;
                }
            }
            Ok(None) => {
                shared.fail(format!(
                    "adapter {} closed its stdout after {n} line(s): it exited or crashed{see_log}",
                    shared.name
                ));
                return;
            }
            Err(e) => {
                shared.fail(format!(
                    "adapter {} wrote unreadable output after line {n} ({e}){see_log}",
                    shared.name
                ));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str =
        r#"{"type":"hello","protocol":1,"adapter":"t","library":{"name":"l","version":"1"}}"#;

    /// An `sh` adapter: says hello, then runs `body` (with `$id` parsed from each request).
    fn sh(body: &str) -> Vec<String> {
        let script = format!(
            "echo '{HELLO}'\nwhile read l; do id=$(echo \"$l\" | sed 's/.*\"id\":\\([0-9]*\\).*/\\1/'); {body}; done"
        );
        vec!["sh".into(), "-c".into(), script]
    }

    async fn wait_for_file_text(path: &Path, needle: &str) -> String {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            if text.contains(needle) || Instant::now() >= until {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_reply_after_the_timeout_is_recorded_as_late_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("adapter.log");
        let argv = sh(r#"sleep 0.3; echo "{\"in_reply_to\":$id,\"type\":\"ok\"}""#);
        let p = AdapterProcess::spawn("t", &argv, None, Some(&log), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(p.hello.adapter, "t");
        let err = p
            .request(json!({"type": "ping"}), Some(Duration::from_millis(20)))
            .await
            .unwrap_err();
        assert_eq!(err, RequestError::Timeout(Duration::from_millis(20)));
        let text = wait_for_file_text(&messages_path(&log), "late-reply").await;
        assert!(text.contains(r#""in_reply_to":1"#), "{text}");
        assert_eq!(p.failure(), None);
        // The next request is answered as usual.
        let (reply, rtt) = p.request(json!({"type": "ping"}), None).await.unwrap();
        assert_eq!(reply.outcome, super::super::protocol::Outcome::Ok);
        assert!(rtt >= Duration::from_millis(300), "{rtt:?}");
    }

    #[tokio::test]
    async fn a_reply_to_a_wrong_id_fails_the_process_naming_the_line() {
        let argv = sh(r#"echo "{\"in_reply_to\":99,\"type\":\"ok\"}""#);
        let p = AdapterProcess::spawn("t", &argv, None, None, Duration::from_secs(10))
            .await
            .unwrap();
        let err = p.request(json!({"type": "ping"}), None).await.unwrap_err();
        let RequestError::Failed(why) = err else {
            panic!("{err:?}")
        };
        assert!(
            why.contains("adapter t broke the protocol on line 2")
                && why.contains("a reply to id 99"),
            "{why}"
        );
        assert_eq!(p.failure(), Some(why.clone()));
        let again = p.request(json!({"type": "ping"}), None).await.unwrap_err();
        assert_eq!(again, RequestError::Failed(why));
    }

    #[tokio::test]
    async fn an_adapter_that_never_says_hello_is_refused_in_time() {
        let argv = vec!["sh".into(), "-c".into(), "sleep 30".into()];
        let err = AdapterProcess::spawn("quiet", &argv, None, None, Duration::from_millis(200))
            .await
            .err()
            .unwrap();
        assert!(
            err.contains("adapter quiet") && err.contains("no hello"),
            "{err}"
        );
    }
}
