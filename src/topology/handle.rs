//! [`NodeHandle`]: one data node as the nemesis sees it, whether a local process or a container.

#[cfg(feature = "docker")]
use super::container::ContainerNode;
use super::{LocalNode, Persistence, TopologyError};

/// A data node the nemesis can kill, restart, pause and resume
/// ([`super::Topology::node_handle`]).
#[derive(Debug)]
pub enum NodeHandle<'a> {
    /// A local redis-server process.
    Local(&'a mut LocalNode),
    /// A Redis container (`--backend docker`).
    #[cfg(feature = "docker")]
    Container(&'a mut ContainerNode),
}

impl NodeHandle<'_> {
    /// Node name (`n1`, …).
    pub fn name(&self) -> &str {
        match self {
            NodeHandle::Local(n) => n.name(),
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.name(),
        }
    }

    /// The node's persistence mode.
    pub fn persistence(&self) -> Persistence {
        match self {
            NodeHandle::Local(n) => n.persistence(),
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.persistence(),
        }
    }

    /// True while its process or container runs (paused counts as running).
    pub async fn is_running(&mut self) -> bool {
        match self {
            NodeHandle::Local(n) => n.is_running(),
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.is_running().await,
        }
    }

    /// True while paused.
    pub fn is_paused(&self) -> bool {
        match self {
            NodeHandle::Local(n) => n.is_paused(),
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.is_paused(),
        }
    }

    /// SIGKILL the process / `docker kill` the container.
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`] and the node kind's own errors.
    pub async fn kill(&mut self) -> Result<(), TopologyError> {
        match self {
            NodeHandle::Local(n) => n.kill_off_runtime().await,
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.kill().await,
        }
    }

    /// Starts it again (same port, same data directory or container filesystem) and waits
    /// for PING.
    ///
    /// # Errors
    /// As [`LocalNode::restart`] / `ContainerNode::restart`.
    pub async fn restart(&mut self) -> Result<(), TopologyError> {
        match self {
            NodeHandle::Local(n) => n.restart().await,
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.restart().await,
        }
    }

    /// SIGSTOP / `docker pause`.
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`] and the node kind's own errors.
    pub async fn pause(&mut self) -> Result<(), TopologyError> {
        match self {
            NodeHandle::Local(n) => n.pause(),
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.pause().await,
        }
    }

    /// SIGCONT / `docker unpause`.
    ///
    /// # Errors
    /// [`TopologyError::NotRunning`] and the node kind's own errors.
    pub async fn resume(&mut self) -> Result<(), TopologyError> {
        match self {
            NodeHandle::Local(n) => n.resume(),
            #[cfg(feature = "docker")]
            NodeHandle::Container(n) => n.resume().await,
        }
    }
}
