//! The embedded Toxiproxy server from a test: the server and its typed client alone, or with
//! a proxy `n1` in front of a private redis-server; and a raw RESP `PING` through it.

use std::net::SocketAddr;
use std::time::Duration;

use lockbench::node::{ConnectOptions, NodeEndpoint};
use lockbench::toxiproxy::{ProxyInfo, ToxicSpec, ToxiproxyClient, ToxiproxyServer};
use redis::aio::MultiplexedConnection;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::redis::RedisGuard;

/// Bound of every single network wait in the Toxiproxy tests.
pub const WAIT: Duration = Duration::from_secs(5);

/// Starts the embedded server on a free port of 127.0.0.1 and a client of its API.
pub async fn start_server() -> (ToxiproxyServer, ToxiproxyClient) {
    let server = ToxiproxyServer::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("start embedded toxiproxy");
    let client = ToxiproxyClient::new(&server.base_url()).unwrap();
    (server, client)
}

/// A private redis-server, the embedded server, and one proxy `n1` in front of the Redis.
pub struct ProxiedRedis {
    _redis: RedisGuard,
    /// The embedded Toxiproxy server.
    pub server: ToxiproxyServer,
    /// A client of its HTTP API.
    pub client: ToxiproxyClient,
    /// The proxy `n1` (its `listen` is the bound address).
    pub proxy: ProxyInfo,
}

impl ProxiedRedis {
    /// A default redis-server behind `n1`.
    pub async fn start() -> ProxiedRedis {
        Self::start_with(RedisGuard::start()).await
    }

    /// `redis` behind `n1`.
    pub async fn start_with(redis: RedisGuard) -> ProxiedRedis {
        let (server, client) = start_server().await;
        let proxy = client
            .create_proxy("n1", "127.0.0.1:0", &redis.addr())
            .await
            .unwrap();
        ProxiedRedis {
            _redis: redis,
            server,
            client,
            proxy,
        }
    }

    /// The proxy's listen address.
    pub fn listen(&self) -> SocketAddr {
        self.proxy.listen.parse().unwrap()
    }

    /// The node `n1` as the strategies see it: through the proxy.
    pub fn endpoint(&self) -> NodeEndpoint {
        NodeEndpoint::new("n1", format!("redis://{}", self.proxy.listen))
    }

    /// A redis client connection through the proxy (2 s connect timeout).
    pub async fn connect(&self, response_timeout: Duration) -> MultiplexedConnection {
        let opts = ConnectOptions {
            connect_timeout: Duration::from_secs(2),
            response_timeout,
        };
        self.endpoint()
            .connect(&opts)
            .await
            .expect("connect through proxy")
    }

    /// A raw TCP connection through the proxy (no Nagle delay), connected within [`WAIT`].
    pub async fn connect_raw(&self) -> TcpStream {
        let s = tokio::time::timeout(WAIT, TcpStream::connect(&self.proxy.listen))
            .await
            .expect("connect through the proxy timed out")
            .expect("connect through the proxy");
        s.set_nodelay(true).unwrap();
        s
    }

    /// Adds `spec` to `n1`.
    pub async fn add(&self, spec: ToxicSpec) {
        self.client.add_toxic("n1", &spec).await.unwrap();
    }

    /// Removes the toxic `name` from `n1`.
    pub async fn remove(&self, name: &str) {
        self.client.remove_toxic("n1", name).await.unwrap();
    }

    /// Stops the server and its proxy; the redis-server is killed on drop.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

/// One raw RESP `PING` on `s`; asserts that the reply is `+PONG`.
pub async fn raw_ping(s: &mut TcpStream) -> std::io::Result<()> {
    s.write_all(b"PING\r\n").await?;
    let mut reply = [0u8; 7];
    s.read_exact(&mut reply).await?;
    assert_eq!(&reply, b"+PONG\r\n");
    Ok(())
}
