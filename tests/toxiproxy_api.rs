//! Contract tests of the embedded Toxiproxy server's HTTP API: status codes and JSON bodies,
//! over raw HTTP (reqwest and a hand-written HTTP/1.1 request on a TcpStream), plus the typed
//! client. Proxies forward to a small TCP echo server started by each test.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::toxiproxy::{start_server as start, WAIT};
use lockbench::toxiproxy::{
    LatencyMs, ProxyInfo, ProxySpec, Stream, ToxicKind, ToxicSpec, ToxiproxyClient,
    ToxiproxyClientError, ToxiproxyError, ToxiproxyServer, SERVER_VERSION,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP server that writes `tag` on connect, then echoes everything back.
async fn echo_server(tag: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                if s.write_all(tag.as_bytes()).await.is_err() {
                    return;
                }
                let mut buf = [0u8; 1024];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// A proxy `name` on a free port in front of `up`.
async fn proxy_to(client: &ToxiproxyClient, name: &str, up: SocketAddr) -> ProxyInfo {
    client
        .create_proxy(name, "127.0.0.1:0", &up.to_string())
        .await
        .unwrap()
}

/// Connects through `addr`, reads the tag, and checks one echo round trip.
async fn round_trip(addr: &str, tag: &str) -> TcpStream {
    let mut s = tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .expect("connect");
    let mut got = vec![0u8; tag.len()];
    tokio::time::timeout(WAIT, s.read_exact(&mut got))
        .await
        .expect("tag in time")
        .expect("tag");
    assert_eq!(got, tag.as_bytes());
    s.write_all(b"ping").await.unwrap();
    let mut echo = [0u8; 4];
    tokio::time::timeout(WAIT, s.read_exact(&mut echo))
        .await
        .expect("echo in time")
        .expect("echo");
    assert_eq!(&echo, b"ping");
    s
}

/// One raw request through reqwest; returns status and body (JSON if it parses, else string).
async fn raw(method: &str, url: String, body: Option<&str>) -> (u16, Value) {
    let http = reqwest::Client::new();
    let mut req = http.request(method.parse().unwrap(), url);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.expect("http request");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value)
}

/// One hand-written HTTP/1.1 request on a TcpStream; returns status code and body text.
async fn raw_tcp(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(WAIT, s.read_to_string(&mut out))
        .await
        .expect("reply in time")
        .unwrap();
    let status: u16 = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status line");
    let body = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or("");
    (status, body.to_string())
}

#[tokio::test]
async fn version_and_empty_index_over_a_raw_socket() {
    let (server, _) = start().await;
    let (status, body) = raw_tcp(server.addr(), "GET", "/version", "").await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v, json!({ "version": SERVER_VERSION }));

    let (status, body) = raw_tcp(server.addr(), "GET", "/proxies", "").await;
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap(), json!({}));
    server.shutdown().await;
}

#[tokio::test]
async fn proxy_create_show_delete_status_codes() {
    let (server, client) = start().await;
    let up = echo_server("A").await;
    let base = server.base_url();
    let body =
        json!({"name": "n1", "listen": "127.0.0.1:0", "upstream": up.to_string()}).to_string();

    let (status, created) = raw("POST", format!("{base}/proxies"), Some(&body)).await;
    assert_eq!(status, 201);
    assert_eq!(created["name"], "n1");
    assert_eq!(created["upstream"], up.to_string());
    assert_eq!(created["enabled"], true);
    assert_eq!(created["toxics"], json!([]));
    let listen = created["listen"].as_str().unwrap().to_string();
    assert!(
        !listen.ends_with(":0"),
        "listen shows the bound port: {listen}"
    );
    round_trip(&listen, "A").await;

    // Raw socket: duplicate is 409 with Toxiproxy's error shape.
    let (status, dup) = raw_tcp(server.addr(), "POST", "/proxies", &body).await;
    assert_eq!(status, 409);
    assert_eq!(
        serde_json::from_str::<Value>(&dup).unwrap(),
        json!({"error": "proxy already exists", "status": 409})
    );

    let (status, bad) = raw("POST", format!("{base}/proxies"), Some("{not json")).await;
    assert_eq!(status, 400);
    assert_eq!(bad["status"], 400);
    assert!(bad["error"]
        .as_str()
        .unwrap()
        .starts_with("bad request body"));
    let (status, missing) = raw(
        "POST",
        format!("{base}/proxies"),
        Some(r#"{"name":"n2","listen":"127.0.0.1:0"}"#),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(missing["error"], "missing required field: upstream");

    let (status, shown) = raw("GET", format!("{base}/proxies/n1"), None).await;
    assert_eq!(status, 200);
    assert_eq!(shown, created);
    let (status, index) = raw("GET", format!("{base}/proxies"), None).await;
    assert_eq!(status, 200);
    assert_eq!(index, json!({ "n1": created }));

    let (status, missing) = raw("GET", format!("{base}/proxies/nope"), None).await;
    assert_eq!(status, 404);
    assert_eq!(missing, json!({"error": "proxy not found", "status": 404}));

    let (status, body) = raw_tcp(server.addr(), "DELETE", "/proxies/n1", "").await;
    assert_eq!(status, 204);
    assert_eq!(body, "");
    let (status, _) = raw("DELETE", format!("{base}/proxies/n1"), None).await;
    assert_eq!(status, 404);
    assert!(client.proxies().await.unwrap().is_empty());
    assert!(
        TcpStream::connect(&listen).await.is_err(),
        "deleted proxy no longer listens"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn toxic_create_show_update_delete_status_codes() {
    let (server, client) = start().await;
    let up = echo_server("A").await;
    proxy_to(&client, "n1", up).await;
    let base = server.base_url();
    let toxics = format!("{base}/proxies/n1/toxics");

    let (status, t) = raw(
        "POST",
        toxics.clone(),
        Some(r#"{"type":"latency","attributes":{"latency":50}}"#),
    )
    .await;
    assert_eq!(status, 200, "Toxiproxy answers toxic creation with 200");
    assert_eq!(
        t,
        json!({"name": "latency_downstream", "type": "latency", "stream": "downstream",
               "toxicity": 1.0, "attributes": {"latency": 50, "jitter": 0}})
    );

    let cases = [
        (r#"{"type":"latency"}"#, 409, "toxic already exists"),
        (
            r#"{"type":"latency","stream":"sideways"}"#,
            400,
            "stream was invalid, can be either upstream or downstream",
        ),
        (
            r#"{"type":"explode"}"#,
            400,
            "invalid toxic type \"explode\" (valid types: latency, bandwidth, slow_close, \
             timeout, reset_peer, slicer, limit_data)",
        ),
        (
            r#"{"name":"x"}"#,
            400,
            "invalid toxic type: `type` is missing (valid types: latency, bandwidth, \
             slow_close, timeout, reset_peer, slicer, limit_data)",
        ),
    ];
    for (body, code, msg) in cases {
        let (status, err) = raw("POST", toxics.clone(), Some(body)).await;
        assert_eq!(status, code, "{body}");
        assert_eq!(err, json!({"error": msg, "status": code}), "{body}");
    }
    for body in [
        r#"{"type":"latency","name":"neg","attributes":{"latency":-5}}"#,
        r#"{"type":"latency","name":"str","attributes":{"latency":"slow"}}"#,
        r#"{"type":"slicer","name":"zero","attributes":{"average_size":0}}"#,
        r#"{"type":"timeout","name":"tox","toxicity":1.5}"#,
        r#"[1,2]"#,
    ] {
        let (status, err) = raw("POST", toxics.clone(), Some(body)).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(err["status"], 400);
    }

    let (status, up_t) = raw(
        "POST",
        toxics.clone(),
        Some(r#"{"type":"reset_peer","stream":"upstream","toxicity":0.5}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(up_t["name"], "reset_peer_upstream");
    assert_eq!(up_t["attributes"], json!({"timeout": 0}));

    let (status, list) = raw("GET", toxics.clone(), None).await;
    assert_eq!(status, 200);
    assert_eq!(list, json!([t, up_t]));

    // Partial update keeps other attributes.
    let (status, upd) = raw(
        "POST",
        format!("{toxics}/latency_downstream"),
        Some(r#"{"attributes":{"jitter":5},"toxicity":0.25}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(upd["attributes"], json!({"latency": 50, "jitter": 5}));
    assert_eq!(upd["toxicity"], 0.25);
    let (status, shown) = raw("GET", format!("{toxics}/latency_downstream"), None).await;
    assert_eq!(status, 200);
    assert_eq!(shown, upd);
    let (status, _) = raw(
        "POST",
        format!("{toxics}/latency_downstream"),
        Some(r#"{"attributes":{"latency":-1}}"#),
    )
    .await;
    assert_eq!(status, 400);

    let (status, err) = raw("GET", format!("{toxics}/nope"), None).await;
    assert_eq!(status, 404);
    assert_eq!(err, json!({"error": "toxic not found", "status": 404}));
    let (status, _) = raw("POST", format!("{toxics}/nope"), Some("{}")).await;
    assert_eq!(status, 404);
    let (status, _) = raw("GET", format!("{base}/proxies/nope/toxics"), None).await;
    assert_eq!(status, 404);
    let (status, _) = raw(
        "POST",
        format!("{base}/proxies/nope/toxics"),
        Some(r#"{"type":"latency"}"#),
    )
    .await;
    assert_eq!(status, 404);

    let (status, body) = raw_tcp(
        server.addr(),
        "DELETE",
        "/proxies/n1/toxics/latency_downstream",
        "",
    )
    .await;
    assert_eq!(status, 204);
    assert_eq!(body, "");
    let (status, _) = raw("DELETE", format!("{toxics}/latency_downstream"), None).await;
    assert_eq!(status, 404);
    let names: Vec<_> = client
        .toxics("n1")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["reset_peer_upstream"]);
    server.shutdown().await;
}

#[tokio::test]
async fn reset_removes_toxics_in_both_streams_and_enables_every_proxy() {
    let (server, client) = start().await;
    let up = echo_server("A").await;
    let a = proxy_to(&client, "a", up).await;
    let b = proxy_to(&client, "b", up).await;
    client
        .add_toxic(
            "a",
            &ToxicSpec::new(ToxicKind::Timeout { timeout: 0 }).stream(Stream::Upstream),
        )
        .await
        .unwrap();
    client
        .add_toxic(
            "a",
            &ToxicSpec::new(ToxicKind::Latency {
                latency: 1000.into(),
                jitter: LatencyMs::ZERO,
            }),
        )
        .await
        .unwrap();
    client
        .add_toxic(
            "b",
            &ToxicSpec::new(ToxicKind::LimitData { bytes: 1 }).stream(Stream::Downstream),
        )
        .await
        .unwrap();
    let disabled = client.set_enabled("b", false).await.unwrap();
    assert!(!disabled.enabled);
    assert_eq!(client.toxics("a").await.unwrap().len(), 2);

    let (status, body) = raw_tcp(server.addr(), "POST", "/reset", "").await;
    assert_eq!(status, 204);
    assert_eq!(body, "");

    let (status, index) = raw("GET", format!("{}/proxies", server.base_url()), None).await;
    assert_eq!(status, 200);
    for name in ["a", "b"] {
        assert_eq!(index[name]["enabled"], true, "{name}");
        assert_eq!(index[name]["toxics"], json!([]), "{name}");
    }
    // Both proxies pass traffic unharmed again, on their original ports.
    let started = Instant::now();
    round_trip(&a.listen, "A").await;
    round_trip(&b.listen, "A").await;
    assert!(started.elapsed() < Duration::from_millis(900));
    server.shutdown().await;
}

#[tokio::test]
async fn disabling_closes_open_connections_and_refuses_new_ones() {
    let (server, client) = start().await;
    let up = echo_server("A").await;
    let p = proxy_to(&client, "n1", up).await;
    let mut open = round_trip(&p.listen, "A").await;

    let (status, body) = raw(
        "POST",
        format!("{}/proxies/n1", server.base_url()),
        Some(r#"{"enabled":false}"#),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["enabled"], false);
    assert_eq!(body["listen"], p.listen.as_str());

    let mut buf = [0u8; 8];
    let read = tokio::time::timeout(WAIT, open.read(&mut buf))
        .await
        .expect("open connection is closed in time");
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "open connection must be closed, got {read:?}"
    );
    let refused = TcpStream::connect(&p.listen).await;
    assert_eq!(
        refused.map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );

    let again = client.set_enabled("n1", true).await.unwrap();
    assert!(again.enabled);
    assert_eq!(again.listen, p.listen, "re-enabled on the same port");
    round_trip(&p.listen, "A").await;
    server.shutdown().await;
}

#[tokio::test]
async fn update_moves_upstream_and_populate_creates_or_replaces() {
    let (server, client) = start().await;
    let up_a = echo_server("A").await;
    let up_b = echo_server("B").await;
    let created = client
        .populate(&[
            ProxySpec::new("p1", "127.0.0.1:0", up_a.to_string()),
            ProxySpec::new("p2", "127.0.0.1:0", up_a.to_string()),
        ])
        .await
        .unwrap();
    assert_eq!(created.len(), 2);
    assert!(created.iter().all(|p| p.enabled));
    round_trip(&created[0].listen, "A").await;

    // Raw populate: 201 and {"proxies": [...]}; an entry with the same listen+upstream is kept.
    let same = json!([{"name": "p1", "listen": created[0].listen, "upstream": up_a.to_string()}]);
    let (status, reply) = raw(
        "POST",
        format!("{}/populate", server.base_url()),
        Some(&same.to_string()),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(reply["proxies"][0]["listen"], created[0].listen.as_str());
    let (status, bad) = raw(
        "POST",
        format!("{}/populate", server.base_url()),
        Some(r#"[{"name":"p3","listen":"127.0.0.1:0"}]"#),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["status"], 400);
    assert!(client.get_proxy("p3").await.unwrap_err().is_not_found());

    let moved = client
        .update_proxy(
            "p1",
            &lockbench::toxiproxy::ProxyUpdate {
                upstream: Some(up_b.to_string()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(moved.upstream, up_b.to_string());
    round_trip(&moved.listen, "B").await;
    server.shutdown().await;
}

#[tokio::test]
async fn client_errors_are_typed() {
    let (server, client) = start().await;
    let up = echo_server("A").await;
    proxy_to(&client, "n1", up).await;
    let dup = client
        .create_proxy("n1", "127.0.0.1:0", &up.to_string())
        .await
        .unwrap_err();
    assert!(dup.is_conflict(), "{dup}");
    match &dup {
        ToxiproxyClientError::Api { message, body, .. } => {
            assert_eq!(message, "proxy already exists");
            assert!(body.contains("409"));
        }
        other => panic!("expected Api error, got {other:?}"),
    }
    assert!(client
        .remove_toxic("n1", "nope")
        .await
        .unwrap_err()
        .is_not_found());
    assert!(client
        .set_enabled("nope", false)
        .await
        .unwrap_err()
        .is_not_found());
    assert_eq!(client.version().await.unwrap(), SERVER_VERSION);
    let spec = ToxicSpec::new(ToxicKind::Bandwidth { rate: 10 }).named("bw");
    let t = client.add_toxic("n1", &spec).await.unwrap();
    assert_eq!(t.name, "bw");
    let t = client
        .update_toxic(
            "n1",
            "bw",
            &ToxicSpec::new(ToxicKind::Bandwidth { rate: 20 }),
        )
        .await
        .unwrap();
    assert_eq!(t.kind, ToxicKind::Bandwidth { rate: 20 });
    assert_eq!(client.get_toxic("n1", "bw").await.unwrap(), t);
    server.shutdown().await;
}

#[tokio::test]
async fn binding_a_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = ToxiproxyServer::start(addr).await.unwrap_err();
    assert!(matches!(err, ToxiproxyError::Bind { .. }));
    let msg = err.to_string();
    assert!(msg.contains(&addr.to_string()), "{msg}");
    assert!(msg.contains("in use"), "{msg}");

    // A proxy whose listen port is taken: 500 naming the address, and no proxy is created.
    let (server, client) = start().await;
    let err = client
        .create_proxy("n1", &addr.to_string(), "127.0.0.1:1")
        .await
        .unwrap_err();
    assert_eq!(err.status().map(|s| s.as_u16()), Some(500));
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    assert!(client.get_proxy("n1").await.unwrap_err().is_not_found());
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_the_api_and_every_proxy() {
    let (server, client) = start().await;
    let up = echo_server("A").await;
    let p = proxy_to(&client, "n1", up).await;
    let mut open = round_trip(&p.listen, "A").await;
    let api = server.addr();
    server.shutdown().await;

    let mut buf = [0u8; 4];
    let read = tokio::time::timeout(WAIT, open.read(&mut buf))
        .await
        .expect("closed in time");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(TcpStream::connect(&p.listen).await.is_err());
    assert!(TcpStream::connect(api).await.is_err());
    assert!(matches!(
        client.version().await.unwrap_err(),
        ToxiproxyClientError::Transport { .. }
    ));
}
