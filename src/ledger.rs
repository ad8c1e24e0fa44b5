//! Ledger. (placeholder)
