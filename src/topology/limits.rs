//! The process's descriptor budget: how many clients one lockbench process can hold open.
//!
//! Every client connection is one descriptor in this process; a proxied client costs three
//! here (the client's socket plus the embedded proxy's two), and every local node needs one
//! per client too. Linux starts processes with a soft `RLIMIT_NOFILE` that is often far below
//! the hard limit (1,024 vs 524,288 on many systems; 20,000 / 20,000 on this project's CI
//! machines), so [`raise_nofile_limit`] lifts the soft limit to the hard one before anything
//! connects. The hard limit itself cannot be raised without privileges.
//!
//! It lives with the topology because the local nodes inherit the raised limit (their
//! `maxclients` is sized from it); the driver and the option checks read it too.

/// Descriptors kept free for files, pipes, listeners and the nodes' own needs.
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// The soft and hard `RLIMIT_NOFILE` after raising the soft limit to the hard one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NofileLimit {
    /// Descriptors this process may open now.
    pub soft: u64,
    /// The ceiling the soft limit can be raised to.
    pub hard: u64,
}

impl NofileLimit {
    /// Clients this process can connect: one descriptor each direct, three each through the
    /// embedded proxy, after [`RESERVED_DESCRIPTORS`].
    pub fn max_clients(&self, proxied: bool, nodes_per_client: u64) -> u64 {
        let per_client = if proxied { 3 } else { 1 } * nodes_per_client.max(1);
        self.soft.saturating_sub(RESERVED_DESCRIPTORS) / per_client
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (idempotent) and returns both. Child
/// processes started afterwards (redis-server) inherit the raised limit.
///
/// # Errors
/// The OS error of `getrlimit`/`setrlimit`.
pub fn raise_nofile_limit() -> std::io::Result<NofileLimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
    }
    Ok(NofileLimit {
        soft: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_reaches_the_hard_limit() {
        let lim = raise_nofile_limit().unwrap();
        assert_eq!(lim.soft, lim.hard);
        assert_eq!(raise_nofile_limit().unwrap(), lim);
    }

    #[test]
    fn budget_counts_three_descriptors_per_proxied_client() {
        let lim = NofileLimit {
            soft: 20_000,
            hard: 20_000,
        };
        assert_eq!(lim.max_clients(false, 1), 19_744);
        assert_eq!(lim.max_clients(true, 1), 6_581);
        assert_eq!(lim.max_clients(false, 5), 3_948);
    }
}
