//! The fault catalogue of scenario files: every `fault = "…"` name, what it targets, which
//! keys it needs and accepts, and one line on what it does. `lockbench chaos --list-faults`
//! prints it, the README's fault table uses the same names, and validation reads it to reject
//! a key a fault does not use.

use super::FaultKind;

/// What a fault acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acts {
    /// Nodes: `n1`, `n1,n2`, `minority`, `majority`, `all`, `primary`.
    Nodes,
    /// Clients: `client:0`, `clients:0,1`.
    Clients,
}

/// One fault of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct FaultSpec {
    /// The kind.
    pub kind: FaultKind,
    /// Its name in scenario files (`fault = "pause-node"`).
    pub name: &'static str,
    /// Node or client targets.
    pub acts: Acts,
    /// Keys it must have besides `at`, `fault`, `target`.
    pub required: &'static [&'static str],
    /// Keys it may have besides those.
    pub optional: &'static [&'static str],
    /// Topologies it works on (`None` = all).
    pub topologies: Option<&'static [&'static str]>,
    /// What it does, one line.
    pub what: &'static str,
}

/// Every fault, in the README's order.
pub const FAULTS: [FaultSpec; 10] = [
    FaultSpec {
        kind: FaultKind::Latency,
        name: "latency",
        acts: Acts::Nodes,
        required: &["duration", "latency"],
        optional: &["jitter", "link"],
        topologies: None,
        what: "latency (± jitter) toxic on the targets' proxies; link = \"replication\" delays primary→replica instead",
    },
    FaultSpec {
        kind: FaultKind::Partition,
        name: "partition",
        acts: Acts::Nodes,
        required: &["duration"],
        optional: &["mode", "link"],
        topologies: None,
        what: "cut the targets off: mode = \"blackhole\" (data dropped, default) or \"refuse\" (connections refused)",
    },
    FaultSpec {
        kind: FaultKind::Kill,
        name: "kill",
        acts: Acts::Nodes,
        required: &[],
        optional: &["duration", "restart_after"],
        topologies: None,
        what: "kill -9 the targets, restart after max(duration, restart_after): empty unless persistence = \"aof-always\"",
    },
    FaultSpec {
        kind: FaultKind::PauseNode,
        name: "pause-node",
        acts: Acts::Nodes,
        required: &["duration"],
        optional: &[],
        topologies: None,
        what: "SIGSTOP the targets, SIGCONT after duration",
    },
    FaultSpec {
        kind: FaultKind::Failover,
        name: "failover",
        acts: Acts::Nodes,
        required: &[],
        optional: &["duration", "method"],
        topologies: Some(&["sentinel"]),
        what: "fail the primary over: method = \"kill-primary\" (default) or \"sentinel\" (SENTINEL FAILOVER)",
    },
    FaultSpec {
        kind: FaultKind::ClockJump,
        name: "clock-jump",
        acts: Acts::Nodes,
        required: &["delta"],
        optional: &[],
        topologies: Some(&["single", "five", "sentinel"]),
        what: "jump the targets' clocks forward by delta (every key's TTL shortened by delta; Redis nodes only)",
    },
    FaultSpec {
        kind: FaultKind::ClientPause,
        name: "client-pause",
        acts: Acts::Clients,
        required: &["duration"],
        optional: &[],
        topologies: None,
        what: "stop-the-world stall of the target clients inside their critical section; lease renewal stalls too (a GC pause)",
    },
    FaultSpec {
        kind: FaultKind::SlowWork,
        name: "slow-work",
        acts: Acts::Clients,
        required: &["duration", "extra"],
        optional: &[],
        topologies: None,
        what: "critical sections of the target clients take `extra` longer; renewal keeps running",
    },
    FaultSpec {
        kind: FaultKind::ClientCrash,
        name: "client-crash",
        acts: Acts::Clients,
        required: &[],
        optional: &[],
        topologies: None,
        what: "the target clients stop while holding and never release (setnx-expire: inside its next acquire, after SETNX, before PEXPIRE)",
    },
    FaultSpec {
        kind: FaultKind::ClientAbsent,
        name: "client-absent",
        acts: Acts::Clients,
        required: &["duration"],
        optional: &[],
        topologies: None,
        what: "the target clients start no acquire during the window (join late with at = \"0s\"); a lease held is released as usual",
    },
];

/// The catalogue entry of `kind`.
pub fn spec(kind: FaultKind) -> &'static FaultSpec {
    FAULTS
        .iter()
        .find(|f| f.kind == kind)
        .expect("every fault kind is in the catalogue")
}

/// Every key a `[[nemesis]]` step may carry that is a fault parameter.
pub const PARAMETERS: [&str; 9] = [
    "duration",
    "latency",
    "jitter",
    "mode",
    "link",
    "method",
    "delta",
    "extra",
    "restart_after",
];

/// The catalogue as a table for `lockbench chaos --list-faults`.
pub fn render() -> String {
    let mut out = String::from(
        "Faults of a scenario's [[nemesis]] steps (every step has `at`, `fault`, `target`):\n\n",
    );
    for f in &FAULTS {
        let target = match f.acts {
            Acts::Nodes => "nodes",
            Acts::Clients => "clients",
        };
        let mut keys: Vec<String> = f.required.iter().map(|k| k.to_string()).collect();
        keys.extend(f.optional.iter().map(|k| format!("[{k}]")));
        let only = f
            .topologies
            .map(|t| format!(" ({} only)", t.join(", ")))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {:<13} {:<8} {}{only}\n  {:<13} {:<8} {}\n",
            f.name,
            target,
            if keys.is_empty() {
                "-".to_string()
            } else {
                keys.join(" ")
            },
            "",
            "",
            f.what
        ));
    }
    out.push_str(
        "\nNode targets: n1, n1,n2, minority, majority, all, primary (single: n1; five: n1..n5;\n\
         sentinel: n1 primary, n2 and n3 replicas). Client targets: client:0, clients:0,1, holder\n\
         (the client inside a critical section when the fault starts, or the first to enter one).\n\
         Durations are strings: \"500ms\", \"2s\". [key] = optional.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_serde_names_and_every_parameter_is_known() {
        for f in &FAULTS {
            let kind: FaultKind =
                serde_json::from_value(serde_json::Value::String(f.name.into())).unwrap();
            assert_eq!(kind, f.kind, "{}", f.name);
            for k in f.required.iter().chain(f.optional) {
                assert!(PARAMETERS.contains(k), "{}: {k}", f.name);
            }
        }
        let table = render();
        assert!(table.contains("pause-node") && table.contains("client-crash"));
    }
}
