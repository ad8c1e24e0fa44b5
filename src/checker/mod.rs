//! Checker. (placeholder)
