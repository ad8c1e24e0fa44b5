//! Rule 4: fencing tokens must grow with every acquisition of a resource.
//!
//! Acquires can overlap in time, so "issued before" is decided by real-time order only: for an
//! acquire invoked at `t`, every acquire that completed `ok` before `t` was issued before it. A
//! token lower than the highest such token is a **regression**; equal to it, or equal to the token
//! of any acquire whose `[invoke, ok]` interval overlaps, a **duplicate**. Acquires that overlap
//! in time may legitimately complete in either order, so they never count as a regression.

use std::collections::VecDeque;

use super::verdict::{Anomaly, AnomalyKind, AnomalySink, Stats};

/// Per-resource token state: oks not yet settled (possibly concurrent with a pending acquire)
/// plus the highest settled token.
#[derive(Default)]
pub(crate) struct TokenOrder {
    recent: VecDeque<(u64, u64, u32)>,
    settled: Option<(u64, u32)>,
}

impl TokenOrder {
    /// An acquire `[invoke_us, ok_us]` by `client` returned `token`. `min_pending_invoke` is the
    /// earliest invoke time of acquires on this resource still in flight (excluding this one).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_ok(
        &mut self,
        resource: &str,
        client: u32,
        invoke_us: u64,
        ok_us: u64,
        token: u64,
        min_pending_invoke: Option<u64>,
        sink: &mut AnomalySink,
        stats: &mut Stats,
    ) {
        let mut before = self.settled;
        for &(t_ok, tok, c) in &self.recent {
            if t_ok < invoke_us && before.is_none_or(|(m, _)| tok > m) {
                before = Some((tok, c));
            }
        }
        let finding = match before {
            Some((m, c)) if token < m => Some((AnomalyKind::TokenRegression, m, c)),
            Some((m, c)) if token == m => Some((AnomalyKind::TokenDuplicate, m, c)),
            _ => self
                .recent
                .iter()
                .find(|&&(_, tok, _)| tok == token)
                .map(|&(_, tok, c)| (AnomalyKind::TokenDuplicate, tok, c)),
        };
        if let Some((kind, other_token, other_client)) = finding {
            match kind {
                AnomalyKind::TokenRegression => stats.token_regressions += 1,
                _ => stats.token_duplicates += 1,
            }
            let mut clients = vec![client, other_client];
            clients.sort_unstable();
            clients.dedup();
            let mut tokens = vec![token, other_token];
            tokens.sort_unstable();
            tokens.dedup();
            sink.push(Anomaly {
                kind,
                resource: resource.to_string(),
                time_us: ok_us,
                end_us: None,
                clients,
                tokens,
                holders: None,
                ledger_seqs: Vec::new(),
                fault_ids: Vec::new(),
                detail: format!(
                    "client {client} was issued token {token} on {resource} after client {other_client} had been issued {other_token}"
                ),
            });
        }
        self.recent.push_back((ok_us, token, client));
        // Oks before every in-flight and future invoke are settled: fold them into the maximum.
        let horizon = min_pending_invoke.map_or(ok_us, |p| p.min(ok_us));
        while let Some(&(t_ok, tok, c)) = self.recent.front() {
            if t_ok >= horizon {
                break;
            }
            if self.settled.is_none_or(|(m, _)| tok > m) {
                self.settled = Some((tok, c));
            }
            self.recent.pop_front();
        }
    }
}
