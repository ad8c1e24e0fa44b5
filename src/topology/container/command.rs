//! What runs in a container: `redis-server` arguments and a Sentinel's command.

use crate::topology::Persistence;

/// `redis-server` arguments: listen on `port`, no protection, no RDB snapshots, AOF with
/// `appendfsync always` only with [`Persistence::AofAlways`], then each `redis.conf` line of
/// `extra` as an option (`replicaof h p` becomes `--replicaof h p`).
pub fn redis_server_args(port: u16, persistence: Persistence, extra: &[String]) -> Vec<String> {
    let aof = match persistence {
        Persistence::None => "no",
        Persistence::AofAlways => "yes",
    };
    let port = port.to_string();
    let mut args: Vec<String> = [
        "redis-server",
        "--port",
        &port,
        "--protected-mode",
        "no",
        "--save",
        "",
        "--appendonly",
        aof,
        "--appendfsync",
        "always",
    ]
    .map(String::from)
    .to_vec();
    for line in extra {
        let mut words = line.split_whitespace();
        if let Some(key) = words.next() {
            args.push(format!("--{key}"));
            args.extend(words.map(String::from));
        }
    }
    args
}

/// The command of a Sentinel container: `/bin/sh` writes `/data/sentinel.conf` (Sentinel
/// rewrites its config, so it needs a writable file; an existing one, from before a restart,
/// is kept) with `port <port>` and `lines`, then execs `redis-sentinel` on it.
pub fn sentinel_command(port: u16, lines: &[String]) -> Vec<String> {
    let mut conf = vec![format!("port {port}"), "protected-mode no".to_string()];
    conf.extend(lines.iter().cloned());
    let quoted: Vec<String> = conf.iter().map(|l| format!("'{l}'")).collect();
    let script = format!(
        "test -s /data/sentinel.conf || printf '%s\\n' {} > /data/sentinel.conf; \
         exec redis-sentinel /data/sentinel.conf",
        quoted.join(" ")
    );
    vec!["sh".to_string(), "-c".to_string(), script]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::container::REDIS_PORT;

    #[test]
    fn redis_server_args_turn_conf_lines_into_options() {
        let extra = vec![
            "replica-announce-ip 127.0.0.1".to_string(),
            "replicaof 127.0.0.1 4102".to_string(),
        ];
        let args = redis_server_args(4001, Persistence::AofAlways, &extra);
        assert_eq!(&args[..3], ["redis-server", "--port", "4001"]);
        let joined = args.join(" ");
        assert!(
            joined.contains("--appendonly yes --appendfsync always"),
            "{joined}"
        );
        assert!(
            joined.ends_with("--replica-announce-ip 127.0.0.1 --replicaof 127.0.0.1 4102"),
            "{joined}"
        );
        let plain = redis_server_args(REDIS_PORT, Persistence::None, &[]);
        assert!(plain.join(" ").contains("--appendonly no"));
        // `--save ""`: one empty argument, no snapshots.
        let save = plain.iter().position(|a| a == "--save").unwrap();
        assert_eq!(plain[save + 1], "");
    }

    #[test]
    fn sentinel_command_writes_its_config_once_then_execs_sentinel() {
        let cmd = sentinel_command(
            26001,
            &["sentinel monitor lockbench 127.0.0.1 16001 2".to_string()],
        );
        assert_eq!(&cmd[..2], ["sh", "-c"]);
        let script = &cmd[2];
        assert!(
            script.starts_with("test -s /data/sentinel.conf || printf '%s\\n' 'port 26001' "),
            "{script}"
        );
        assert!(
            script.contains("'sentinel monitor lockbench 127.0.0.1 16001 2'"),
            "{script}"
        );
        assert!(
            script.ends_with("> /data/sentinel.conf; exec redis-sentinel /data/sentinel.conf"),
            "{script}"
        );
    }
}
