//! Redis topologies. (placeholder)
