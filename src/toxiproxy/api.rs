//! The HTTP routes of the embedded server, with Toxiproxy 2.x status codes:
//! 200 reads/updates and toxic creation, 201 proxy creation and populate, 204 deletes and
//! reset, 400 bad body/stream/type/attributes, 404 unknown proxy or toxic, 409 duplicates,
//! 500 when a listen address cannot be bound. Errors are `{"error": msg, "status": code}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::Value;

use super::model::{ApiErrorBody, PopulateReply, ProxyInfo, Stream, ToxicInfo, ToxicKind};
use super::proxy::{ProxyFault, ProxyRegistry};

/// The version string `GET /version` reports.
pub const SERVER_VERSION: &str = concat!("lockbench-", env!("CARGO_PKG_VERSION"));

/// Default listen address when a create request has none.
const DEFAULT_LISTEN: &str = "127.0.0.1:0";

pub(crate) fn router(registry: Arc<ProxyRegistry>) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/reset", post(reset))
        .route("/populate", post(populate))
        .route("/proxies", get(list_proxies).post(create_proxy))
        .route(
            "/proxies/{proxy}",
            get(show_proxy)
                .post(update_proxy)
                .patch(update_proxy)
                .delete(delete_proxy),
        )
        .route(
            "/proxies/{proxy}/toxics",
            get(list_toxics).post(create_toxic),
        )
        .route(
            "/proxies/{proxy}/toxics/{toxic}",
            get(show_toxic)
                .post(update_toxic)
                .patch(update_toxic)
                .delete(delete_toxic),
        )
        .with_state(registry)
}

/// An error reply in Toxiproxy's shape.
struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }
}

impl From<ProxyFault> for ApiError {
    fn from(f: ProxyFault) -> ApiError {
        let (status, message) = match f {
            ProxyFault::ProxyNotFound => (StatusCode::NOT_FOUND, "proxy not found".to_string()),
            ProxyFault::ProxyExists => (StatusCode::CONFLICT, "proxy already exists".to_string()),
            ProxyFault::ToxicNotFound => (StatusCode::NOT_FOUND, "toxic not found".to_string()),
            ProxyFault::ToxicExists => (StatusCode::CONFLICT, "toxic already exists".to_string()),
            ProxyFault::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            ProxyFault::Listen(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
        };
        ApiError { status, message }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ApiErrorBody {
            error: self.message,
            status: self.status.as_u16(),
        };
        (self.status, Json(body)).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

fn parse_json(body: &Bytes) -> ApiResult<Value> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))
}

fn decode<T: for<'de> Deserialize<'de>>(value: Value) -> ApiResult<T> {
    serde_json::from_value(value)
        .map_err(|e| ApiError::bad_request(format!("bad request body: {e}")))
}

async fn version() -> Json<Value> {
    Json(serde_json::json!({ "version": SERVER_VERSION }))
}

async fn reset(State(reg): State<Arc<ProxyRegistry>>) -> ApiResult<StatusCode> {
    reg.reset().await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_proxies(
    State(reg): State<Arc<ProxyRegistry>>,
) -> Json<std::collections::BTreeMap<String, ProxyInfo>> {
    let mut out = std::collections::BTreeMap::new();
    for p in reg.all().await {
        let info = p.info().await;
        out.insert(info.name.clone(), info);
    }
    Json(out)
}

/// `POST /proxies` and one `/populate` entry.
#[derive(Deserialize)]
struct CreateBody {
    #[serde(default)]
    name: String,
    #[serde(default)]
    listen: String,
    #[serde(default)]
    upstream: String,
    #[serde(default = "yes")]
    enabled: bool,
}

fn yes() -> bool {
    true
}

impl CreateBody {
    fn check(mut self) -> ApiResult<CreateBody> {
        if self.name.is_empty() {
            return Err(ApiError::bad_request("missing required field: name"));
        }
        if self.upstream.is_empty() {
            return Err(ApiError::bad_request("missing required field: upstream"));
        }
        if self.listen.is_empty() {
            self.listen = DEFAULT_LISTEN.to_string();
        }
        Ok(self)
    }
}

async fn create_proxy(
    State(reg): State<Arc<ProxyRegistry>>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<ProxyInfo>)> {
    let b = decode::<CreateBody>(parse_json(&body)?)?.check()?;
    let proxy = reg.create(b.name, b.listen, b.upstream, b.enabled).await?;
    Ok((StatusCode::CREATED, Json(proxy.info().await)))
}

async fn populate(State(reg): State<Arc<ProxyRegistry>>, body: Bytes) -> Response {
    let bodies = match decode::<Vec<CreateBody>>(match parse_json(&body) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    }) {
        Ok(v) => v,
        Err(e) => return e.into_response(),
    };
    let mut checked = Vec::with_capacity(bodies.len());
    for b in bodies {
        match b.check() {
            Ok(b) => checked.push(b),
            Err(e) => return e.into_response(),
        }
    }
    let mut done = Vec::new();
    for b in checked {
        match reg
            .populate_one(b.name, b.listen, b.upstream, b.enabled)
            .await
        {
            Ok(p) => done.push(p.info().await),
            Err(fault) => {
                let err = ApiError::from(fault);
                let body = serde_json::json!({
                    "error": err.message,
                    "status": err.status.as_u16(),
                    "proxies": done,
                });
                return (err.status, Json(body)).into_response();
            }
        }
    }
    (StatusCode::CREATED, Json(PopulateReply { proxies: done })).into_response()
}

async fn show_proxy(
    State(reg): State<Arc<ProxyRegistry>>,
    Path(name): Path<String>,
) -> ApiResult<Json<ProxyInfo>> {
    Ok(Json(reg.get(&name).await?.info().await))
}

#[derive(Deserialize)]
struct UpdateBody {
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    upstream: Option<String>,
    #[serde(default)]
    enabled: Option<bool>,
}

async fn update_proxy(
    State(reg): State<Arc<ProxyRegistry>>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Json<ProxyInfo>> {
    let proxy = reg.get(&name).await?;
    let b: UpdateBody = decode(parse_json(&body)?)?;
    let listen = b.listen.filter(|l| !l.is_empty());
    let upstream = b.upstream.filter(|u| !u.is_empty());
    proxy.update(listen, upstream, b.enabled).await?;
    Ok(Json(proxy.info().await))
}

async fn delete_proxy(
    State(reg): State<Arc<ProxyRegistry>>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    reg.remove(&name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_toxics(
    State(reg): State<Arc<ProxyRegistry>>,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<ToxicInfo>>> {
    Ok(Json(reg.get(&name).await?.toxic_list()))
}

fn field_str(obj: &serde_json::Map<String, Value>, key: &str) -> ApiResult<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(ApiError::bad_request(format!(
            "bad request body: {key} must be a string, got {other}"
        ))),
    }
}

fn field_toxicity(obj: &serde_json::Map<String, Value>) -> ApiResult<Option<f32>> {
    match obj.get("toxicity") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(t) if (0.0..=1.0).contains(&t) => Ok(Some(t as f32)),
            _ => Err(ApiError::bad_request(format!(
                "bad request body: toxicity must be between 0 and 1, got {n}"
            ))),
        },
        Some(other) => Err(ApiError::bad_request(format!(
            "bad request body: toxicity must be a number, got {other}"
        ))),
    }
}

fn as_object(v: Value) -> ApiResult<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(ApiError::bad_request(format!(
            "bad request body: expected a JSON object, got {other}"
        ))),
    }
}

async fn create_toxic(
    State(reg): State<Arc<ProxyRegistry>>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Json<ToxicInfo>> {
    let proxy = reg.get(&name).await?;
    let obj = as_object(parse_json(&body)?)?;
    let stream = match field_str(&obj, "stream")? {
        None => Stream::Downstream,
        Some(s) if s.is_empty() => Stream::Downstream,
        Some(s) => Stream::parse(&s).ok_or_else(|| {
            ApiError::bad_request("stream was invalid, can be either upstream or downstream")
        })?,
    };
    let type_name = field_str(&obj, "type")?.unwrap_or_default();
    if !ToxicKind::TYPE_NAMES.contains(&type_name.as_str()) {
        return Err(ApiError::bad_request(ToxicKind::unknown_type_message(
            &type_name,
        )));
    }
    let toxic_name = field_str(&obj, "name")?
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("{type_name}_{}", stream.as_str()));
    let toxicity = field_toxicity(&obj)?.unwrap_or(1.0);
    let attributes = obj.get("attributes").cloned().unwrap_or(Value::Null);
    let kind = ToxicKind::from_parts(&type_name, attributes)
        .map_err(|m| ApiError::bad_request(format!("bad request body: {m}")))?;
    Ok(Json(proxy.add_toxic(toxic_name, kind, stream, toxicity)?))
}

async fn show_toxic(
    State(reg): State<Arc<ProxyRegistry>>,
    Path((name, toxic)): Path<(String, String)>,
) -> ApiResult<Json<ToxicInfo>> {
    let proxy = reg.get(&name).await?;
    proxy
        .toxic(&toxic)
        .map(Json)
        .ok_or_else(|| ProxyFault::ToxicNotFound.into())
}

async fn update_toxic(
    State(reg): State<Arc<ProxyRegistry>>,
    Path((name, toxic)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<Json<ToxicInfo>> {
    let proxy = reg.get(&name).await?;
    let obj = as_object(parse_json(&body)?)?;
    let toxicity = field_toxicity(&obj)?;
    let new_attributes = match obj.get("attributes") {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "bad request body: attributes must be a JSON object, got {other}"
            )))
        }
    };
    let updated = proxy.update_toxic(&toxic, |current| {
        let mut next = current.clone();
        if let Some(patch) = &new_attributes {
            let mut attrs = match current.kind.attributes() {
                Value::Object(m) => m,
                _ => serde_json::Map::new(),
            };
            attrs.extend(patch.clone());
            next.kind = ToxicKind::from_parts(current.kind.type_name(), Value::Object(attrs))
                .map_err(|m| ProxyFault::BadRequest(format!("bad request body: {m}")))?;
        }
        if let Some(t) = toxicity {
            next.toxicity = t;
        }
        Ok(next)
    })?;
    Ok(Json(updated))
}

async fn delete_toxic(
    State(reg): State<Arc<ProxyRegistry>>,
    Path((name, toxic)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    reg.get(&name).await?.remove_toxic(&toxic)?;
    Ok(StatusCode::NO_CONTENT)
}
