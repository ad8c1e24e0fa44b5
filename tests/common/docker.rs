//! Whether a Docker engine answers, and the loud line a docker test prints when it skips.

use std::process::Command;

/// `Some(reason)` when no engine answers (the caller skips, loudly).
pub fn no_engine() -> Option<String> {
    match Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
    {
        Err(e) => Some(format!("the docker CLI cannot run: {e}")),
        Ok(o) if !o.status.success() => Some(format!(
            "no Docker engine: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// Prints the loud `SKIPPED` line of `test`.
pub fn skip(test: &str, reason: &str) {
    eprintln!("\n!!!!! SKIPPED {test}: {reason} !!!!!\n");
}
