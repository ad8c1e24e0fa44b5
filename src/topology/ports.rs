//! Choosing 127.0.0.1 ports for local nodes and proxies.
//!
//! A port is drawn at random from outside the kernel's ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 by default), checked free by
//! binding it, and remembered, so two nodes of this process never get the same port. Outside
//! the ephemeral range matters for nodes that go down and come back (crash-restart faults):
//! while a node is down its port is free, and a port in the ephemeral range can be taken by any
//! outgoing connection or `:0` listener on the machine (a concurrent trial's clients, its proxy)
//! before the node restarts. Drawn ports are at least [`LOWEST_PICKED`], so well-known service
//! ports (6379, 5432, 2379, 8080, …) are never chosen. The listener is closed before the server
//! binds the port, so another process can still take it in between;
//! [`super::LocalNode::start`] detects that ("Address already in use" in the log) and retries
//! with a new port.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::ops::RangeInclusive;
use std::sync::{Mutex, OnceLock};

use rand::Rng;

use super::TopologyError;

/// The lowest port [`pick_free_port`] draws (below it live the usual service ports).
pub const LOWEST_PICKED: u16 = 20_000;

/// Ports needed outside the ephemeral range before [`pick_free_port`] draws from there (with
/// fewer, it lets the kernel choose, as any `:0` bind does).
const MIN_POOL: u32 = 2_000;

/// Ports this process has already handed to a node (never reused within one process).
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// The kernel's ephemeral port range, read once (`32768..=60999`, Linux's default, when the
/// file cannot be read or parsed).
fn ephemeral_range() -> RangeInclusive<u16> {
    static RANGE: OnceLock<RangeInclusive<u16>> = OnceLock::new();
    RANGE
        .get_or_init(|| {
            std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
                .ok()
                .and_then(|text| parse_port_range(&text))
                .unwrap_or(32_768..=60_999)
        })
        .clone()
}

/// Parses the two numbers of `ip_local_port_range` (`"32768\t60999\n"`).
fn parse_port_range(text: &str) -> Option<RangeInclusive<u16>> {
    let mut numbers = text.split_whitespace().map(str::parse::<u16>);
    let (low, high) = (numbers.next()?.ok()?, numbers.next()?.ok()?);
    (low <= high).then_some(low..=high)
}

/// The range ports are drawn from: the larger of `[LOWEST_PICKED, ephemeral start)` and
/// `(ephemeral end, 65535]`, or `None` when neither holds [`MIN_POOL`] ports.
fn pool_outside(ephemeral: &RangeInclusive<u16>) -> Option<RangeInclusive<u16>> {
    let below = (*ephemeral.start() > LOWEST_PICKED).then(|| LOWEST_PICKED..=ephemeral.start() - 1);
    let above =
        (*ephemeral.end() < u16::MAX).then(|| (ephemeral.end() + 1).max(LOWEST_PICKED)..=u16::MAX);
    let size = |r: &RangeInclusive<u16>| u32::from(*r.end()) + 1 - u32::from(*r.start());
    [below, above]
        .into_iter()
        .flatten()
        .filter(|r| size(r) >= MIN_POOL)
        .max_by_key(size)
}

/// Picks a port on 127.0.0.1 that is free now and was not handed out before by this process,
/// outside the kernel's ephemeral range (see the module's text).
///
/// # Errors
/// [`TopologyError::Io`] if no socket can be bound at all, or 256 draws found no free port.
pub fn pick_free_port() -> Result<u16, TopologyError> {
    let pool = pool_outside(&ephemeral_range());
    let mut rng = rand::rng();
    for _ in 0..256 {
        let wanted = pool.as_ref().map_or(0, |p| rng.random_range(p.clone()));
        let listener = match TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, wanted)) {
            Ok(listener) => listener,
            Err(e) if wanted != 0 && e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(source) => {
                return Err(TopologyError::io(
                    format!("binding 127.0.0.1:{wanted} to find a free port"),
                    source,
                ));
            }
        };
        let port = listener
            .local_addr()
            .map_err(|source| TopologyError::io("reading the port of a bound socket", source))?
            .port();
        drop(listener);
        let mut used = handed_out().lock().unwrap_or_else(|e| e.into_inner());
        if used.insert(port) {
            return Ok(port);
        }
    }
    Err(TopologyError::io(
        "finding a free 127.0.0.1 port",
        io::Error::other("256 draws found only ports in use"),
    ))
}

/// Checks that an explicitly requested port can be bound on 127.0.0.1 right now.
///
/// # Errors
/// [`TopologyError::PortInUse`] when something already listens there; [`TopologyError::Io`]
/// for other bind failures (e.g. permission denied).
pub fn check_port_free(port: u16) -> Result<(), TopologyError> {
    match TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)) {
        Ok(listener) => {
            drop(listener);
            handed_out()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(port);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(TopologyError::PortInUse { port }),
        Err(source) => Err(TopologyError::io(
            format!("binding 127.0.0.1:{port} to check it is free"),
            source,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picked_ports_are_distinct_and_not_6379() {
        let ports: Vec<u16> = (0..20).map(|_| pick_free_port().unwrap()).collect();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        assert!(!ports.contains(&6379));
        let ephemeral = ephemeral_range();
        for port in ports {
            assert!(port >= LOWEST_PICKED, "{port} below {LOWEST_PICKED}");
            assert!(
                !ephemeral.contains(&port),
                "{port} in the ephemeral range {ephemeral:?}"
            );
        }
    }

    #[test]
    fn the_pool_lies_outside_the_ephemeral_range() {
        assert_eq!(parse_port_range("32768\t60999\n"), Some(32_768..=60_999));
        assert_eq!(parse_port_range("60999 32768"), None);
        assert_eq!(parse_port_range("garbage"), None);
        // Linux's default: below it, from 20000.
        assert_eq!(pool_outside(&(32_768..=60_999)), Some(20_000..=32_767));
        // A range starting low leaves the ports above it.
        assert_eq!(pool_outside(&(1_024..=40_000)), Some(40_001..=65_535));
        // The larger side wins.
        assert_eq!(pool_outside(&(23_000..=50_000)), Some(50_001..=65_535));
        // Nothing left outside: the kernel chooses.
        assert_eq!(pool_outside(&(1_024..=65_000)), None);
    }

    #[test]
    fn bound_port_is_reported_in_use() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        match check_port_free(port) {
            Err(TopologyError::PortInUse { port: p }) => assert_eq!(p, port),
            other => panic!("expected PortInUse, got {other:?}"),
        }
        drop(listener);
        check_port_free(port).unwrap();
    }
}
