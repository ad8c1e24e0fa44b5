//! Lease. (placeholder)
