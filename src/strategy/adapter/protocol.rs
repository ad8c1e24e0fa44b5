//! The messages of the adapter protocol (`docs/adapter-protocol.md`, version
//! [`PROTOCOL_VERSION`]): what lockbench writes on an adapter's stdin and how each line of its
//! stdout is read. Pure: no process, no I/O.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::strategy::StrategyOptions;

/// The protocol version lockbench speaks; an adapter's `hello` must name it.
pub(crate) const PROTOCOL_VERSION: u64 = 1;

/// The adapter's first line: who it is and what it can do.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct Hello {
    /// Protocol version the adapter speaks.
    pub protocol: u64,
    /// The adapter's name (`redis-py`).
    pub adapter: String,
    /// The library under test.
    pub library: LibraryInfo,
    /// Operations and features: `acquire`, `release`, `extend`, `check`, `hold`, `fence`,
    /// `auto-renew`, `events`.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

/// Name and version of the library an adapter drives.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct LibraryInfo {
    /// Package name (`redis`).
    pub name: String,
    /// Its version, as the library reports it.
    pub version: String,
}

/// How an answered request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It happened.
    Ok,
    /// It surely did not happen (definite).
    Fail,
    /// It may or may not have happened (indefinite).
    Info,
}

/// A reply to one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    /// `ok`, `fail` or `info`.
    pub outcome: Outcome,
    /// The error class of a `fail`/`info`: `busy`, `not_owner`, `timeout`, `connection`,
    /// `other`.
    pub error: Option<String>,
    /// The rest of the reply (`owner`, `fencing_token`, `owns`, `message`, timestamps, …).
    pub fields: Map<String, Value>,
}

impl Reply {
    /// The human text of a failed reply (`message`, else the error class).
    pub fn message(&self) -> String {
        match (
            self.fields.get("message").and_then(Value::as_str),
            &self.error,
        ) {
            (Some(m), _) => m.to_string(),
            (None, Some(e)) => e.clone(),
            (None, None) => "no message".to_string(),
        }
    }

    /// A string field.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    /// An unsigned integer field.
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.fields.get(key).and_then(Value::as_u64)
    }

    /// A boolean field (`None` when absent or `null`).
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.fields.get(key).and_then(Value::as_bool)
    }
}

/// One line of an adapter's stdout.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Incoming {
    /// The handshake.
    Hello(Hello),
    /// The answer to request `in_reply_to`.
    Reply {
        /// The request's id.
        in_reply_to: u64,
        /// What it said.
        reply: Reply,
    },
    /// An unsolicited event (`renewed`, `renew_failed`, `lock_lost`).
    Event(Value),
    /// The adapter could not read a request of ours.
    ProtocolError(String),
}

/// Reads one line of an adapter's stdout.
///
/// # Errors
/// One sentence saying what is wrong: not JSON, not an object, no `type`, an unknown `type`,
/// a reply without a numeric `in_reply_to`, a bad `hello`.
pub(crate) fn parse_line(line: &str) -> Result<Incoming, String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object ({e})"))?;
    let Value::Object(mut fields) = value else {
        return Err("a JSON value that is not an object".into());
    };
    let kind = match fields.remove("type") {
        Some(Value::String(s)) => s,
        _ => return Err("an object without a string `type`".into()),
    };
    let outcome = match kind.as_str() {
        "hello" => {
            return serde_json::from_value(Value::Object(fields))
                .map(Incoming::Hello)
                .map_err(|e| format!("a bad hello ({e})"));
        }
        "event" => return Ok(Incoming::Event(Value::Object(fields))),
        "protocol_error" => {
            let message = fields.get("message").and_then(Value::as_str).unwrap_or("");
            return Ok(Incoming::ProtocolError(message.to_string()));
        }
        "ok" => Outcome::Ok,
        "fail" => Outcome::Fail,
        "info" => Outcome::Info,
        other => {
            return Err(format!(
                "unknown type `{other}` (expected hello, ok, fail, info, event, protocol_error)"
            ))
        }
    };
    let Some(in_reply_to) = fields.remove("in_reply_to").and_then(|v| v.as_u64()) else {
        return Err(format!("a `{kind}` without a numeric `in_reply_to`"));
    };
    let error = match fields.remove("error") {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    Ok(Incoming::Reply {
        in_reply_to,
        reply: Reply {
            outcome,
            error,
            fields,
        },
    })
}

/// The `init` request: the nodes (their URLs, proxied when lockbench proxies them), key prefix,
/// TTL, per-node timeout, retry settings and renewal, and the library options passed through.
pub(crate) fn init_request(id: u64, nodes: &[(String, String)], opts: &StrategyOptions) -> Value {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|(name, url)| json!({ "name": name, "url": url }))
        .collect();
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    json!({
        "id": id,
        "type": "init",
        "protocol": PROTOCOL_VERSION,
        "nodes": nodes,
        "key_prefix": opts.key_prefix,
        "ttl_ms": ms(opts.ttl),
        "node_timeout_ms": ms(opts.node_timeout),
        "retry": {
            "attempts": opts.retry.attempts.max(1),
            "delay_ms": ms(opts.retry.delay),
            "jitter_ms": ms(opts.retry.jitter),
            "timeout_ms": opts.retry.acquire_timeout.map(ms),
        },
        "renewal": { "auto": opts.watchdog },
        // One client per process: one request in flight at a time (§4 `concurrency`).
        "concurrency": if opts.adapter_shared { Value::Null } else { json!(1) },
        "options": {},
    })
}

/// A request of one logical client: `{"id", "client", "type", …extra}`.
pub(crate) fn client_request(id: u64, client: u32, kind: &str, extra: Value) -> Value {
    let mut v = json!({ "id": id, "client": client, "type": kind });
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn replies_hello_and_events_are_read() {
        let hello = parse_line(
            r#"{"type":"hello","protocol":1,"adapter":"redis-py","library":{"name":"redis","version":"8.1.0"},"capabilities":["acquire"]}"#,
        )
        .unwrap();
        let Incoming::Hello(h) = hello else {
            panic!("{hello:?}")
        };
        assert_eq!((h.protocol, h.adapter.as_str()), (1, "redis-py"));
        assert_eq!(h.library.version, "8.1.0");
        let r = parse_line(
            r#"{"in_reply_to":7,"client":2,"type":"fail","error":"busy","message":"held","started_ns":10,"finished_ns":35}"#,
        )
        .unwrap();
        let Incoming::Reply { in_reply_to, reply } = r else {
            panic!("{r:?}")
        };
        assert_eq!(in_reply_to, 7);
        assert_eq!(reply.outcome, Outcome::Fail);
        assert_eq!(reply.error.as_deref(), Some("busy"));
        assert_eq!(reply.message(), "held");
        assert_eq!(
            (reply.u64("started_ns"), reply.u64("finished_ns")),
            (Some(10), Some(35))
        );
        let e = parse_line(r#"{"type":"event","client":1,"event":"lock_lost"}"#).unwrap();
        assert!(matches!(e, Incoming::Event(_)));
    }

    #[test]
    fn malformed_lines_say_what_is_wrong() {
        for (line, says) in [
            ("hello world", "not a JSON object"),
            ("[1,2]", "not an object"),
            (r#"{"in_reply_to":1}"#, "without a string `type`"),
            (r#"{"type":"ok"}"#, "without a numeric `in_reply_to`"),
            (
                r#"{"type":"ok","in_reply_to":"3"}"#,
                "numeric `in_reply_to`",
            ),
            (
                r#"{"type":"maybe","in_reply_to":3}"#,
                "unknown type `maybe`",
            ),
            (r#"{"type":"hello","protocol":1}"#, "a bad hello"),
        ] {
            let err = parse_line(line).unwrap_err();
            assert!(err.contains(says), "{line}: {err}");
        }
    }

    #[test]
    fn init_carries_the_options_in_ms() {
        let mut opts = StrategyOptions::new(
            crate::strategy::StrategyKind::AdapterRedisPy,
            Duration::from_millis(2_000),
        );
        opts.retry.acquire_timeout = Some(Duration::from_millis(300));
        let v = init_request(1, &[("n1".into(), "redis://127.0.0.1:7000".into())], &opts);
        assert_eq!(v["type"], "init");
        assert_eq!(v["ttl_ms"], 2_000);
        assert_eq!(v["node_timeout_ms"], 200);
        assert_eq!(v["retry"]["attempts"], 3);
        assert_eq!(v["retry"]["timeout_ms"], 300);
        assert_eq!(v["nodes"][0]["url"], "redis://127.0.0.1:7000");
        // A process of its own: one request at a time; shared by every client: many.
        assert_eq!(v["concurrency"], 1);
        opts.adapter_shared = true;
        let shared = init_request(1, &[("n1".into(), "redis://127.0.0.1:7000".into())], &opts);
        assert!(shared["concurrency"].is_null(), "{shared}");
        assert_eq!(v["key_prefix"], "lockbench:");
        let r = client_request(9, 4, "hold", json!({ "ms": 12.5 }));
        assert_eq!(
            r,
            json!({ "id": 9, "client": 4, "type": "hold", "ms": 12.5 })
        );
    }
}
