//! `lockbench chaos --list-faults`: the nemesis' fault catalogue
//! ([`crate::nemesis::catalogue`]) as a table of what a scenario's `[[nemesis]]` step may say.
//! The fault table of docs/faults.md uses the same names.

use crate::nemesis::catalogue::FAULTS;

/// The catalogue as a table for `lockbench chaos --list-faults`.
pub fn render() -> String {
    let mut out = String::from(
        "Faults of a scenario's [[nemesis]] steps (every step has `at`, `fault`, `target`):\n\n",
    );
    for f in &FAULTS {
        let mut keys: Vec<String> = f.required.iter().map(|k| k.to_string()).collect();
        keys.extend(f.optional.iter().map(|k| format!("[{k}]")));
        let only = f
            .topologies
            .map(|t| {
                let names: Vec<&str> = t.iter().map(|k| k.as_str()).collect();
                format!(" ({} only)", names.join(", "))
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "  {:<13} {:<13} {}{only}\n  {:<13} {:<13} {}\n",
            f.kind.name(),
            f.acts.name(),
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
         (the client inside a critical section when the fault starts, or the first to enter one);\n\
         a partition of clients cuts them off every node through proxies of their own.\n\
         Worker targets (a scenario with `workers = N`, or --workers N): worker:0 (client-pause:\n\
         SIGSTOP of the worker process, client-crash: SIGKILL; partition and latency: its own\n\
         proxies to every node), worker:0/n3,n4,n5 or worker:0/majority (partition and latency on\n\
         its proxies to those nodes only); holder and client ids are refused with workers.\n\
         Durations are strings (\"500ms\", \"2s\") or whole milliseconds. [key] = optional.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_serde_names_and_every_parameter_is_known() {
        let table = render();
        assert!(table.contains("pause-node") && table.contains("client-crash"));
        assert!(table.contains("worker:0/n3,n4,n5"), "{table}");
        for f in &FAULTS {
            assert!(table.contains(f.kind.name()), "{}", f.kind);
            for p in f.required.iter().chain(f.optional) {
                assert!(table.contains(p.key()), "{}: {p}", f.kind);
            }
        }
    }
}
