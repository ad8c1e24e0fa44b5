//! Workload driver. (placeholder)
