//! [`ToxiproxyError`]: what the embedded server refuses or fails at.

use std::net::SocketAddr;

/// Errors of the embedded server, and why it refuses a toxic ([`ToxicKind::from_parts`](super::ToxicKind::from_parts),
/// [`ToxicKind::validate`](super::ToxicKind::validate)).
#[derive(Debug, thiserror::Error)]
pub enum ToxiproxyError {
    /// The API address could not be bound (in use, no permission, bad address).
    #[error(
        "cannot start the Toxiproxy API on {addr}: {source}. \
         Pick another address (port 0 picks a free one) or stop whatever is using it"
    )]
    Bind {
        /// Address asked for.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The bound listener has no local address (should not happen on TCP).
    #[error("cannot read the local address of the Toxiproxy API listener: {0}")]
    LocalAddr(std::io::Error),
    /// The server's thread or its tokio runtime could not be started (out of threads or
    /// memory).
    #[error("cannot start the embedded Toxiproxy's runtime thread: {0}")]
    Runtime(std::io::Error),
    /// A toxic type that is not one of [`ToxicKind::TYPE_NAMES`](super::ToxicKind::TYPE_NAMES)
    /// (the text names it and the valid ones); the API answers it with HTTP 400.
    #[error("{0}")]
    UnknownToxicType(String),
    /// Toxic `attributes` that are JSON but not an object (the JSON given); HTTP 400.
    #[error("attributes must be a JSON object, got {0}")]
    ToxicNotAnObject(String),
    /// A toxic attribute missing its type or out of range for the toxic; HTTP 400.
    #[error("bad attributes for {type_name}: {source}")]
    BadToxicAttributes {
        /// The toxic's type name.
        type_name: String,
        /// What deserializing the attributes said.
        source: serde_json::Error,
    },
    /// A slicer with `average_size` 0 would never pass a byte on; HTTP 400.
    #[error("slicer average_size must be at least 1 byte")]
    SlicerSize,
}
