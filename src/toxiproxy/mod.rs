//! Toxiproxy-compatible server and client. (placeholder)
