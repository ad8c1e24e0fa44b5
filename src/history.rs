//! History. (placeholder)
