//! Shared pieces of the integration tests (each test crate uses what it needs).
#![allow(dead_code)]

pub mod node;
pub mod process;
pub mod redis;
