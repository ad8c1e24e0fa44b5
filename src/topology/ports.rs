//! Choosing 127.0.0.1 ports for local nodes.
//!
//! A free port is found by binding `127.0.0.1:0` and reading back the port the kernel chose.
//! The listener is closed before redis-server binds the port, so another process can take it
//! in between; [`super::LocalNode::start`] detects that ("Address already in use" in the log)
//! and retries with a new port. Ports handed out by this process are remembered, so two nodes
//! started at the same time never get the same port. Port 6379 is never chosen: the kernel
//! picks from the ephemeral range.

use std::collections::HashSet;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::{Mutex, OnceLock};

use super::TopologyError;

/// Ports this process has already handed to a node (never reused within one process).
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Picks a port on 127.0.0.1 that is free now and was not handed out before by this process.
///
/// # Errors
/// [`TopologyError::Io`] if no socket can be bound at all.
pub fn pick_free_port() -> Result<u16, TopologyError> {
    for _ in 0..64 {
        let listener =
            TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).map_err(|source| {
                TopologyError::io("binding 127.0.0.1:0 to find a free port", source)
            })?;
        let port = listener
            .local_addr()
            .map_err(|source| TopologyError::io("reading the port of 127.0.0.1:0", source))?
            .port();
        drop(listener);
        let mut used = handed_out().lock().unwrap_or_else(|e| e.into_inner());
        if used.insert(port) {
            return Ok(port);
        }
    }
    Err(TopologyError::io(
        "finding a free 127.0.0.1 port",
        io::Error::other("64 attempts returned ports already in use by this process"),
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
