//! Config. (placeholder)
