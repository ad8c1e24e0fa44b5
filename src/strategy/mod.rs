//! The lock strategies. (placeholder)
