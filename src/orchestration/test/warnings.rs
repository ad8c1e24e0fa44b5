//! Settings that are legal but will not measure what the user probably wants.

use super::Test;
use crate::driver::{Pacing, StopCondition, Workload};
use crate::topology::Persistence;

impl Test {
    /// Settings that are legal but will not measure what the user probably wants, one
    /// sentence each (printed as warnings before the run starts).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let hold = self.workload.hold.max();
        let ttl = self.client.ttl;
        let expiring: Vec<String> = self
            .strategies
            .iter()
            .filter(|k| k.has_ttl())
            .map(ToString::to_string)
            .collect();
        if hold > ttl && !self.client.watchdog && !expiring.is_empty() {
            out.push(format!(
                "--hold {} is longer than --ttl {}: leases will expire inside the critical \
                 section, so expect mutual-exclusion violations unless fenced ({}); use \
                 --watchdog or a longer --ttl to measure the lock itself",
                self.workload.hold,
                humantime::format_duration(ttl),
                expiring.join(", ")
            ));
        }
        let in_flight_default = Workload::DEFAULT_IN_FLIGHT;
        if self.workload.in_flight == 0 && self.workload.clients > in_flight_default {
            out.push(format!(
                "--in-flight 0 lets all {} clients acquire at once: the harness's own queueing \
                 can then outlast --ttl {} and show as stuck or unavailable resources; keep \
                 --in-flight {in_flight_default} (the default) to measure the lock",
                self.workload.clients,
                humantime::format_duration(ttl)
            ));
        }
        let redis_nodes = self.topology.kind.service() == Some(crate::strategy::LockService::Redis);
        if self.topology.persistence != Persistence::None && !redis_nodes {
            out.push(format!(
                "--persistence {} applies to the Redis nodes lockbench starts; topology {} \
                 ignores it (its servers keep their own durability settings)",
                self.topology.persistence, self.topology.kind
            ));
        }
        if self.client.watchdog {
            // `run` refuses these; a scenario file or a matrix column runs them unwatched.
            for s in &self.strategies {
                if let Err(why) = s.watchable() {
                    out.push(format!("--watchdog with {s}: {why}; {s} runs unwatched"));
                }
            }
        }
        if let StopCondition::Duration(d) = self.workload.stop {
            if hold >= d {
                out.push(format!(
                    "--hold {} is not shorter than the run (-d {}): sections still inside at the \
                     end get a grace period, then are cut and counted as cut",
                    self.workload.hold,
                    humantime::format_duration(d)
                ));
            }
            if let Pacing::Open { rate_per_s } = self.workload.pacing {
                let expected = rate_per_s * d.as_secs_f64();
                if expected < self.workload.clients as f64 {
                    out.push(format!(
                        "--rate {rate_per_s} ops/s for {} starts about {} attempt(s) per \
                         strategy: fewer than the {} clients, so some clients never run",
                        humantime::format_duration(d),
                        expected.floor() as u64,
                        self.workload.clients
                    ));
                }
            }
        }
        out
    }
}
