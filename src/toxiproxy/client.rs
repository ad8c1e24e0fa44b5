//! [`ToxiproxyClient`]: a small async typed client for the Toxiproxy HTTP API, used by the
//! nemesis against both Shopify's Toxiproxy and the embedded server.
//!
//! Built on `reqwest` (no TLS, JSON only). It never panics: every failure is a
//! [`ToxiproxyClientError`] that carries the method, URL and, for HTTP errors, the status and
//! body. Proxy updates use `POST`, which every Toxiproxy 2.x accepts (newer ones also take
//! `PATCH` and log `POST` as deprecated).

use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::model::{
    ApiErrorBody, PopulateReply, ProxyInfo, ProxySpec, ProxyUpdate, ToxicInfo, ToxicSpec,
};

/// Default time allowed for one API request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of [`ToxiproxyClient`].
#[derive(Debug, thiserror::Error)]
pub enum ToxiproxyClientError {
    /// The base URL is not an absolute `http://host:port` URL.
    #[error("invalid Toxiproxy base URL {url:?}: {reason}")]
    InvalidBaseUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The request did not get an HTTP answer (refused, timed out, reset).
    #[error(
        "cannot reach Toxiproxy: {method} {url} failed: {source}. \
         Is the Toxiproxy server running at that address?"
    )]
    Transport {
        /// HTTP method.
        method: Method,
        /// Full request URL.
        url: String,
        /// The underlying error.
        source: reqwest::Error,
    },
    /// The server answered with a non-success status.
    #[error("Toxiproxy {method} {url} answered HTTP {status}: {message}")]
    Api {
        /// HTTP method.
        method: Method,
        /// Full request URL.
        url: String,
        /// HTTP status code.
        status: StatusCode,
        /// The `error` field of the body, or the raw body.
        message: String,
        /// The raw response body.
        body: String,
    },
    /// The server answered 2xx with a body this client cannot read.
    #[error("Toxiproxy {method} {url} answered with an unexpected body ({source}): {body}")]
    Decode {
        /// HTTP method.
        method: Method,
        /// Full request URL.
        url: String,
        /// The JSON error.
        source: serde_json::Error,
        /// The raw response body.
        body: String,
    },
}

impl ToxiproxyClientError {
    /// The HTTP status, for [`ToxiproxyClientError::Api`].
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ToxiproxyClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True for a 404 (unknown proxy or toxic).
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NOT_FOUND)
    }

    /// True for a 409 (duplicate proxy or toxic).
    pub fn is_conflict(&self) -> bool {
        self.status() == Some(StatusCode::CONFLICT)
    }
}

/// Async client for one Toxiproxy API endpoint. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ToxiproxyClient {
    base: Url,
    http: reqwest::Client,
}

impl ToxiproxyClient {
    /// A client for `base_url` (e.g. `http://127.0.0.1:8474`) with a 10 s request timeout.
    ///
    /// # Errors
    /// [`ToxiproxyClientError::InvalidBaseUrl`] if the URL does not parse or is not http(s).
    pub fn new(base_url: &str) -> Result<ToxiproxyClient, ToxiproxyClientError> {
        Self::with_timeout(base_url, DEFAULT_REQUEST_TIMEOUT)
    }

    /// Like [`ToxiproxyClient::new`] with a custom per-request timeout.
    ///
    /// # Errors
    /// [`ToxiproxyClientError::InvalidBaseUrl`] for a bad URL or if the HTTP client cannot be built.
    pub fn with_timeout(
        base_url: &str,
        timeout: Duration,
    ) -> Result<ToxiproxyClient, ToxiproxyClientError> {
        let invalid = |reason: String| ToxiproxyClientError::InvalidBaseUrl {
            url: base_url.to_string(),
            reason,
        };
        let base = Url::parse(base_url).map_err(|e| invalid(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(invalid("expected http://host:port".to_string()));
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(ToxiproxyClient { base, http })
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// `GET /version`: the server version (reads both the JSON `{"version": …}` of newer
    /// Toxiproxy and the plain-text reply of older ones).
    ///
    /// # Errors
    /// Transport or HTTP errors.
    pub async fn version(&self) -> Result<String, ToxiproxyClientError> {
        let (_, body) = self.send(Method::GET, &["version"], None).await?;
        Ok(
            match serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("version").and_then(|s| s.as_str()).map(str::to_owned))
            {
                Some(v) => v,
                None => body.trim().to_string(),
            },
        )
    }

    /// `GET /proxies`: every proxy with its toxics, by name.
    ///
    /// # Errors
    /// Transport, HTTP or decode errors.
    pub async fn proxies(
        &self,
    ) -> Result<std::collections::BTreeMap<String, ProxyInfo>, ToxiproxyClientError> {
        self.json(Method::GET, &["proxies"], None::<&()>).await
    }

    /// `POST /proxies`: creates an enabled proxy. 409 if the name exists.
    ///
    /// # Errors
    /// Transport, HTTP (409 duplicate, 400 missing field, 500 listen failed) or decode errors.
    pub async fn create_proxy(
        &self,
        name: &str,
        listen: &str,
        upstream: &str,
    ) -> Result<ProxyInfo, ToxiproxyClientError> {
        let spec = ProxySpec::new(name, listen, upstream);
        self.json(Method::POST, &["proxies"], Some(&spec)).await
    }

    /// `GET /proxies/{name}`.
    ///
    /// # Errors
    /// 404 if unknown; transport or decode errors.
    pub async fn get_proxy(&self, name: &str) -> Result<ProxyInfo, ToxiproxyClientError> {
        self.json(Method::GET, &["proxies", name], None::<&()>)
            .await
    }

    /// `DELETE /proxies/{name}`.
    ///
    /// # Errors
    /// 404 if unknown; transport errors.
    pub async fn delete_proxy(&self, name: &str) -> Result<(), ToxiproxyClientError> {
        self.send(Method::DELETE, &["proxies", name], None)
            .await
            .map(|_| ())
    }

    /// `POST /proxies/{name}` with any of listen, upstream, enabled.
    ///
    /// # Errors
    /// 404 if unknown; transport, HTTP or decode errors.
    pub async fn update_proxy(
        &self,
        name: &str,
        update: &ProxyUpdate,
    ) -> Result<ProxyInfo, ToxiproxyClientError> {
        self.json(Method::POST, &["proxies", name], Some(update))
            .await
    }

    /// Enables or disables a proxy. Disabling closes its connections and refuses new ones.
    ///
    /// # Errors
    /// 404 if unknown; transport, HTTP or decode errors.
    pub async fn set_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<ProxyInfo, ToxiproxyClientError> {
        let update = ProxyUpdate {
            enabled: Some(enabled),
            ..ProxyUpdate::default()
        };
        self.update_proxy(name, &update).await
    }

    /// `GET /proxies/{proxy}/toxics`.
    ///
    /// # Errors
    /// 404 if the proxy is unknown; transport or decode errors.
    pub async fn toxics(&self, proxy: &str) -> Result<Vec<ToxicInfo>, ToxiproxyClientError> {
        self.json(Method::GET, &["proxies", proxy, "toxics"], None::<&()>)
            .await
    }

    /// `GET /proxies/{proxy}/toxics/{toxic}`.
    ///
    /// # Errors
    /// 404 if the proxy or toxic is unknown; transport or decode errors.
    pub async fn get_toxic(
        &self,
        proxy: &str,
        toxic: &str,
    ) -> Result<ToxicInfo, ToxiproxyClientError> {
        self.json(
            Method::GET,
            &["proxies", proxy, "toxics", toxic],
            None::<&()>,
        )
        .await
    }

    /// `POST /proxies/{proxy}/toxics`: adds a toxic (name defaults to `<type>_<stream>`).
    ///
    /// # Errors
    /// 404 unknown proxy, 409 duplicate name, 400 bad attributes; transport or decode errors.
    pub async fn add_toxic(
        &self,
        proxy: &str,
        spec: &ToxicSpec,
    ) -> Result<ToxicInfo, ToxiproxyClientError> {
        self.json(Method::POST, &["proxies", proxy, "toxics"], Some(spec))
            .await
    }

    /// `POST /proxies/{proxy}/toxics/{toxic}`: replaces the attributes and toxicity of an
    /// existing toxic with those of `spec` (its name, type and stream are ignored).
    ///
    /// # Errors
    /// 404 unknown proxy or toxic, 400 bad attributes; transport or decode errors.
    pub async fn update_toxic(
        &self,
        proxy: &str,
        toxic: &str,
        spec: &ToxicSpec,
    ) -> Result<ToxicInfo, ToxiproxyClientError> {
        let body = serde_json::json!({
            "attributes": spec.kind.attributes(),
            "toxicity": spec.toxicity,
        });
        self.json(
            Method::POST,
            &["proxies", proxy, "toxics", toxic],
            Some(&body),
        )
        .await
    }

    /// `DELETE /proxies/{proxy}/toxics/{toxic}`.
    ///
    /// # Errors
    /// 404 unknown proxy or toxic; transport errors.
    pub async fn remove_toxic(&self, proxy: &str, toxic: &str) -> Result<(), ToxiproxyClientError> {
        self.send(Method::DELETE, &["proxies", proxy, "toxics", toxic], None)
            .await
            .map(|_| ())
    }

    /// `POST /reset`: enables every proxy and removes every toxic (both streams).
    ///
    /// # Errors
    /// Transport or HTTP errors.
    pub async fn reset(&self) -> Result<(), ToxiproxyClientError> {
        self.send(Method::POST, &["reset"], None).await.map(|_| ())
    }

    /// `POST /populate`: creates or replaces the given proxies; returns them.
    ///
    /// # Errors
    /// Transport, HTTP (400 bad entry, 500 listen failed) or decode errors.
    pub async fn populate(
        &self,
        proxies: &[ProxySpec],
    ) -> Result<Vec<ProxyInfo>, ToxiproxyClientError> {
        let reply: PopulateReply = self
            .json(Method::POST, &["populate"], Some(&proxies))
            .await?;
        Ok(reply.proxies)
    }

    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    async fn json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
    ) -> Result<T, ToxiproxyClientError> {
        let body = match body {
            Some(b) => {
                Some(
                    serde_json::to_vec(b).map_err(|source| ToxiproxyClientError::Decode {
                        method: method.clone(),
                        url: self.url(segments).to_string(),
                        source,
                        body: String::new(),
                    })?,
                )
            }
            None => None,
        };
        let (url, text) = self.send(method.clone(), segments, body).await?;
        serde_json::from_str(&text).map_err(|source| ToxiproxyClientError::Decode {
            method,
            url,
            source,
            body: text,
        })
    }

    /// Sends one request; returns the URL and body of a 2xx reply.
    async fn send(
        &self,
        method: Method,
        segments: &[&str],
        body: Option<Vec<u8>>,
    ) -> Result<(String, String), ToxiproxyClientError> {
        let url = self.url(segments);
        let url_text = url.to_string();
        let transport = |source| ToxiproxyClientError::Transport {
            method: method.clone(),
            url: url_text.clone(),
            source,
        };
        let mut req = self.http.request(method.clone(), url);
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b);
        }
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        let text = resp.text().await.map_err(transport)?;
        if status.is_success() {
            return Ok((url_text, text));
        }
        let message = serde_json::from_str::<ApiErrorBody>(&text)
            .map(|e| e.error)
            .unwrap_or_else(|_| text.trim().to_string());
        Err(ToxiproxyClientError::Api {
            method,
            url: url_text,
            status,
            message,
            body: text,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_base_urls() {
        assert!(matches!(
            ToxiproxyClient::new("127.0.0.1:8474"),
            Err(ToxiproxyClientError::InvalidBaseUrl { .. })
        ));
        assert!(ToxiproxyClient::new("ftp://h:1").is_err());
        assert!(ToxiproxyClient::new("http://127.0.0.1:8474").is_ok());
    }

    #[test]
    fn builds_escaped_paths() {
        let c = ToxiproxyClient::new("http://127.0.0.1:8474/").unwrap();
        assert_eq!(
            c.url(&["proxies", "a b/c", "toxics"]).as_str(),
            "http://127.0.0.1:8474/proxies/a%20b%2Fc/toxics"
        );
    }

    #[tokio::test]
    async fn connection_refused_is_a_transport_error_not_a_panic() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let c = ToxiproxyClient::with_timeout(
            &format!("http://127.0.0.1:{port}"),
            Duration::from_secs(2),
        )
        .unwrap();
        let err = c.version().await.unwrap_err();
        assert!(
            matches!(err, ToxiproxyClientError::Transport { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("cannot reach Toxiproxy"));
    }
}
