//! Results. (placeholder)
