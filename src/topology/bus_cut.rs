//! Cutting the Redis Cluster bus between pairs of nodes, both ways, with kernel packet drops
//! (nftables).
//!
//! Each node of a proxied cluster has its own loopback address (`127.A.B.i`, see
//! [`super::cluster::own_hosts`]) and opens its bus connections from it (`bind-source-addr`),
//! so a bus packet names both of its nodes: its source and destination addresses, and the
//! bus port of one of them. A cut of nodes `x` and `y` drops every TCP packet from `x` to `y`
//! or back whose destination or source port is `x`'s or `y`'s bus port. Nothing else is
//! touched: clients and replicas reach the nodes through the run's proxies (from 127.0.0.1, or
//! to a proxy's port), and the run's bus ports lie outside the kernel's ephemeral range
//! ([`super::ports`]), so no client connection can carry one.
//!
//! One table per cut owner, `ip lockbench_<pid>_<n>`, with two sets of (source, destination,
//! port) elements and four rules in an `output` chain (loopback packets pass the output hook):
//!
//! ```text
//! ip saddr . ip daddr . tcp dport @drop drop        ip saddr . ip daddr . tcp dport @cut_reject reject with tcp reset
//! ip saddr . ip daddr . tcp sport @drop drop        ip saddr . ip daddr . tcp sport @cut_reject reject with tcp reset
//! ```
//!
//! The table is created at the first cut and deleted when its [`BusFirewall`] is dropped (the
//! topology's teardown, also on an error or a first Ctrl-C); every table this process created
//! is also registered, so [`remove_all_blocking`] can delete it from the panic hook and on a
//! second Ctrl-C ([`super::reaper::kill_all`]), where no destructor runs. A table left by a
//! lockbench that was `kill -9`ed is deleted by the next one that creates a table (its name
//! carries the dead pid).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::TopologyError;

/// The nft command: `nft` on `PATH`, else Debian's `/usr/sbin/nft` (off a user's `PATH`).
pub fn nft() -> &'static str {
    static FOUND: OnceLock<&'static str> = OnceLock::new();
    FOUND.get_or_init(|| {
        let on_path = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .any(|d| d.join("nft").is_file());
        if !on_path && std::path::Path::new("/usr/sbin/nft").is_file() {
            "/usr/sbin/nft"
        } else {
            "nft"
        }
    })
}

/// Prefix of every table lockbench creates.
pub const TABLE_PREFIX: &str = "lockbench_";

/// One node's end of the bus: its own address and its bus port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BusAddr {
    /// The node's loopback address.
    pub host: Ipv4Addr,
    /// Its cluster-bus port.
    pub port: u16,
}

/// What a cut packet meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Dropped silently: the sender retransmits until the cut heals (`mode = "blackhole"`).
    Drop,
    /// Answered with a TCP reset: connections fail at once (`mode = "refuse"`).
    Reject,
}

impl Verdict {
    fn set(self) -> &'static str {
        match self {
            Verdict::Drop => "cut_drop",
            Verdict::Reject => "cut_reject",
        }
    }
}

/// One set element: packets from `from` to `to` whose source or destination port is `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct CutElement {
    /// Source address.
    pub from: Ipv4Addr,
    /// Destination address.
    pub to: Ipv4Addr,
    /// A bus port of one of the two.
    pub port: u16,
}

impl std::fmt::Display for CutElement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} . {} . {}", self.from, self.to, self.port)
    }
}

/// The elements that cut the bus between every node of `side` and every node of `rest`, both
/// ways: for each pair, both directions × both nodes' bus ports (the link each node opens to
/// the other, and its replies). Pairs inside `side` or inside `rest` are left alone.
pub fn cut_elements(side: &[BusAddr], rest: &[BusAddr]) -> Vec<CutElement> {
    let mut out = BTreeSet::new();
    for a in side {
        for b in rest {
            for (from, to) in [(a.host, b.host), (b.host, a.host)] {
                for port in [a.port, b.port] {
                    out.insert(CutElement { from, to, port });
                }
            }
        }
    }
    out.into_iter().collect()
}

/// The script that creates table `name` (sets and rules, no element).
pub fn table_script(name: &str) -> String {
    let set = |s: &str| format!("  set {s} {{ type ipv4_addr . ipv4_addr . inet_service; }}\n");
    let rules = [Verdict::Drop, Verdict::Reject]
        .iter()
        .flat_map(|v| {
            let action = match v {
                Verdict::Drop => "drop",
                Verdict::Reject => "reject with tcp reset",
            };
            ["dport", "sport"].map(|dir| {
                format!(
                    "    ip saddr . ip daddr . tcp {dir} @{} {action}\n",
                    v.set()
                )
            })
        })
        .collect::<String>();
    format!(
        "table ip {name} {{\n{}{}  chain output {{\n    type filter hook output priority 0; \
         policy accept;\n{rules}  }}\n}}\n",
        set(Verdict::Drop.set()),
        set(Verdict::Reject.set())
    )
}

/// The tables this process created and has not deleted yet.
fn registry() -> MutexGuard<'static, BTreeSet<String>> {
    static TABLES: OnceLock<Mutex<BTreeSet<String>>> = OnceLock::new();
    TABLES
        .get_or_init(|| Mutex::new(BTreeSet::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Deletes every table this process created and still has (blocking; for the panic hook and
/// a forced quit, see the module text). Returns how many were deleted.
pub fn remove_all_blocking() -> usize {
    let names: Vec<String> = std::mem::take(&mut *registry()).into_iter().collect();
    names.iter().filter(|n| delete_table_blocking(n)).count()
}

fn delete_table_blocking(name: &str) -> bool {
    Command::new(nft())
        .args(["delete", "table", "ip", name])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The pid in a lockbench table name (`lockbench_<pid>_<n>`).
fn table_pid(name: &str) -> Option<i32> {
    name.strip_prefix(TABLE_PREFIX)?
        .split('_')
        .next()?
        .parse()
        .ok()
}

/// Whether `nft` can run here with the privilege to create tables (root or `CAP_NET_ADMIN`):
/// `nft list tables` must succeed.
///
/// # Errors
/// One sentence on one line: `nft` is missing (and which package has it), or what it answered
/// (its lines joined with "; ").
pub fn check_available() -> Result<(), String> {
    match Command::new(nft())
        .args(["list", "tables"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "`nft list tables` failed ({}): cutting the cluster bus needs root or CAP_NET_ADMIN",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ")
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(
            "cutting the cluster bus needs `nft` (package nftables; scripts/ensure-deps.sh \
             installs it when run as root), which is not on PATH"
                .into(),
        ),
        Err(e) => Err(format!("cannot run `nft`: {e}")),
    }
}

/// Runs `nft -f -` on `script`.
async fn run_script(script: &str) -> Result<(), TopologyError> {
    use tokio::io::AsyncWriteExt;
    let failed = |reason: String| TopologyError::BusCut { reason };
    let mut child = tokio::process::Command::new(nft())
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(format!("cannot run `nft`: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(script.as_bytes())
        .await
        .map_err(|e| failed(format!("writing to `nft -f -`: {e}")))?;
    drop(stdin);
    let out = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait_with_output())
        .await
        .map_err(|_| failed("`nft -f -` did not finish within 10 s".into()))?
        .map_err(|e| failed(format!("waiting for `nft`: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(failed(format!(
            "`nft -f -` exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Deletes the lockbench tables whose process is gone (a `kill -9`ed run's), best effort.
async fn remove_stale_tables() {
    let Ok(out) = tokio::process::Command::new(nft())
        .args(["list", "tables"])
        .stdin(Stdio::null())
        .output()
        .await
    else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.strip_prefix("table ip ") else {
            continue;
        };
        let Some(pid) = table_pid(name) else {
            continue;
        };
        // SAFETY: kill(2) with signal 0 only checks that the pid exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            tracing::info!(
                table = name,
                "deleting the nft table of a lockbench that is gone"
            );
            let _ = run_script(&format!("delete table ip {name}\n")).await;
        }
    }
}

/// The bus cuts of one cluster: its nft table (created at the first cut) and how many active
/// cuts hold each element, so overlapping cuts heal independently.
#[derive(Debug)]
pub struct BusFirewall {
    table: String,
    created: bool,
    held: BTreeMap<(Verdict, CutElement), u32>,
}

impl Default for BusFirewall {
    fn default() -> Self {
        Self::new()
    }
}

impl BusFirewall {
    /// A firewall whose table, once created, is `lockbench_<pid>_<n>` (unique in this process).
    pub fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        Self {
            table: format!(
                "{TABLE_PREFIX}{}_{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ),
            created: false,
            held: BTreeMap::new(),
        }
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Whether the table exists now (created and not yet deleted).
    pub fn is_created(&self) -> bool {
        self.created
    }

    /// Cuts: adds `elements` with `verdict`, creating the table first if needed.
    ///
    /// # Errors
    /// [`TopologyError::BusCut`] with what `nft` said; nothing of this cut stays in place.
    pub async fn cut(
        &mut self,
        verdict: Verdict,
        elements: &[CutElement],
    ) -> Result<(), TopologyError> {
        if !self.created {
            remove_stale_tables().await;
            registry().insert(self.table.clone());
            if let Err(e) = run_script(&table_script(&self.table)).await {
                registry().remove(&self.table);
                return Err(e);
            }
            self.created = true;
        }
        let fresh: Vec<CutElement> = elements
            .iter()
            .copied()
            .filter(|e| !self.held.contains_key(&(verdict, *e)))
            .collect();
        if !fresh.is_empty() {
            run_script(&self.element_script("add", verdict, &fresh)).await?;
        }
        for e in elements {
            *self.held.entry((verdict, *e)).or_default() += 1;
        }
        Ok(())
    }

    /// Heals one cut: removes `elements` (as given to [`BusFirewall::cut`]) unless another
    /// active cut holds them too.
    ///
    /// # Errors
    /// [`TopologyError::BusCut`] with what `nft` said.
    pub async fn heal(
        &mut self,
        verdict: Verdict,
        elements: &[CutElement],
    ) -> Result<(), TopologyError> {
        let mut done = Vec::new();
        for e in elements {
            if let Some(n) = self.held.get_mut(&(verdict, *e)) {
                *n -= 1;
                if *n == 0 {
                    self.held.remove(&(verdict, *e));
                    done.push(*e);
                }
            }
        }
        if done.is_empty() || !self.created {
            return Ok(());
        }
        run_script(&self.element_script("delete", verdict, &done)).await
    }

    /// Heals every cut: empties both sets (the table stays until drop).
    ///
    /// # Errors
    /// [`TopologyError::BusCut`] with what `nft` said.
    pub async fn heal_all(&mut self) -> Result<(), TopologyError> {
        self.held.clear();
        if !self.created {
            return Ok(());
        }
        let t = &self.table;
        run_script(&format!(
            "flush set ip {t} {}\nflush set ip {t} {}\n",
            Verdict::Drop.set(),
            Verdict::Reject.set()
        ))
        .await
    }

    fn element_script(&self, op: &str, verdict: Verdict, elements: &[CutElement]) -> String {
        let list: Vec<String> = elements.iter().map(CutElement::to_string).collect();
        format!(
            "{op} element ip {} {} {{ {} }}\n",
            self.table,
            verdict.set(),
            list.join(", ")
        )
    }
}

impl Drop for BusFirewall {
    fn drop(&mut self) {
        if self.created {
            if !delete_table_blocking(&self.table) {
                tracing::warn!(table = %self.table, "could not delete the nft table");
            }
            registry().remove(&self.table);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(last: u8, port: u16) -> BusAddr {
        BusAddr {
            host: Ipv4Addr::new(127, 9, 9, last),
            port,
        }
    }

    #[test]
    fn a_cut_covers_both_directions_and_both_bus_ports_of_every_crossing_pair() {
        let side = [at(1, 21001)];
        let rest = [at(2, 21002), at(3, 21003)];
        let e = cut_elements(&side, &rest);
        assert_eq!(e.len(), 2 * 2 * 2, "{e:?}");
        for (from, to, port) in [(1, 2, 21001), (1, 2, 21002), (2, 1, 21001), (2, 1, 21002)] {
            let want = CutElement {
                from: Ipv4Addr::new(127, 9, 9, from),
                to: Ipv4Addr::new(127, 9, 9, to),
                port,
            };
            assert!(e.contains(&want), "{want} missing from {e:?}");
        }
        // n2 and n3 are on the same side: nothing between them.
        assert!(!e
            .iter()
            .any(|x| x.from.octets()[3] >= 2 && x.to.octets()[3] >= 2));
        assert!(cut_elements(&[], &rest).is_empty());
    }

    #[test]
    fn the_table_script_matches_both_ports_with_both_verdicts() {
        let s = table_script("lockbench_1_2");
        assert!(s.starts_with("table ip lockbench_1_2 {"), "{s}");
        assert!(s.contains("type filter hook output priority 0; policy accept;"));
        for line in [
            "ip saddr . ip daddr . tcp dport @cut_drop drop",
            "ip saddr . ip daddr . tcp sport @cut_drop drop",
            "ip saddr . ip daddr . tcp dport @cut_reject reject with tcp reset",
            "ip saddr . ip daddr . tcp sport @cut_reject reject with tcp reset",
        ] {
            assert!(s.contains(line), "{line} missing:\n{s}");
        }
        assert_eq!(table_pid("lockbench_4242_7"), Some(4242));
        assert_eq!(table_pid("filter"), None);
    }

    #[test]
    fn tables_are_unique_and_element_scripts_name_their_set() {
        let (a, b) = (BusFirewall::new(), BusFirewall::new());
        assert_ne!(a.table(), b.table());
        assert!(a
            .table()
            .starts_with(&format!("lockbench_{}_", std::process::id())));
        let e = CutElement {
            from: Ipv4Addr::new(127, 1, 2, 3),
            to: Ipv4Addr::new(127, 1, 2, 4),
            port: 20001,
        };
        assert_eq!(
            a.element_script("add", Verdict::Reject, &[e]),
            format!(
                "add element ip {} cut_reject {{ 127.1.2.3 . 127.1.2.4 . 20001 }}\n",
                a.table()
            )
        );
    }
}
