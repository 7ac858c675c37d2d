//! The controller's one HTTP stack (hyper): `/healthz` and `/readyz` on
//! plain HTTP for the kubelet, `/metrics` for Prometheus (on plain HTTP, or
//! with `--metrics-secure` only over HTTPS to a bearer token the API server
//! authorizes, see [`crate::controller::metrics_auth`]), and the admission
//! webhook on HTTPS (rustls) for the API server.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::controller::base::metrics::Metrics;
use crate::controller::webhook::{self, Webhook};

/// Largest request body read: an AdmissionReview carries the object (the API
/// server caps a request at 3 MiB) plus its metadata.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// What the server answers with.
#[derive(Clone)]
pub struct App {
    /// Metrics registry and readiness.
    pub metrics: Arc<Metrics>,
    /// The admission webhook; `None` where it is not served (plain HTTP).
    pub webhook: Option<Arc<Webhook>>,
    /// How `/metrics` is served here.
    pub metrics_access: MetricsAccess,
}

/// How a listener serves `/metrics`.
#[derive(Clone)]
pub enum MetricsAccess {
    /// To anyone (plain HTTP, the default without `--metrics-secure`).
    Open,
    /// Only to a bearer token the API server authorizes for `get /metrics`.
    Authorized(Arc<crate::controller::metrics_auth::MetricsAuth>),
    /// Not here (a plain listener with `--metrics-secure`): 404 naming where.
    Elsewhere(&'static str),
}

type Body = Full<Bytes>;

fn reply(status: StatusCode, ctype: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(ctype),
    );
    resp
}

/// Answers one request.
pub async fn handle(app: App, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let path = req.uri().path().to_string();
    let resp = match (req.method(), path.as_str()) {
        (&Method::GET, "/metrics") => metrics(&app, &req).await,
        (&Method::GET, "/healthz") => reply(StatusCode::OK, "text/plain", "ok\n"),
        (&Method::GET, "/readyz") => match app.metrics.not_ready() {
            None => reply(StatusCode::OK, "text/plain", "ok\n"),
            Some(why) => reply(StatusCode::SERVICE_UNAVAILABLE, "text/plain", why),
        },
        (&Method::POST, webhook::JOB_PATH | webhook::WORKLOAD_PATH) => match &app.webhook {
            Some(hook) => {
                let body = Limited::new(req.into_body(), MAX_BODY).collect().await;
                match body {
                    Ok(body) => match hook.review(&body.to_bytes()).await {
                        Ok(json) => reply(StatusCode::OK, "application/json", json),
                        Err(e) => reply(
                            StatusCode::BAD_REQUEST,
                            "text/plain",
                            format!("{}\n", e.as_str()),
                        ),
                    },
                    Err(_) => reply(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "text/plain",
                        "body unreadable or too large\n",
                    ),
                }
            }
            None => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        },
        _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    };
    Ok(resp)
}

/// `/metrics` as the listener's [`MetricsAccess`] allows.
async fn metrics(app: &App, req: &Request<Incoming>) -> Response<Body> {
    let text = || {
        reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            app.metrics.encode(),
        )
    };
    match &app.metrics_access {
        MetricsAccess::Open => text(),
        MetricsAccess::Elsewhere(why) => reply(StatusCode::NOT_FOUND, "text/plain", *why),
        MetricsAccess::Authorized(auth) => {
            let header = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok());
            match auth.check(header).await {
                Ok(()) => text(),
                Err(e) => {
                    use crate::controller::metrics_auth::Refused;
                    let status = match e {
                        Refused::Unauthenticated => StatusCode::UNAUTHORIZED,
                        Refused::Forbidden(_) => StatusCode::FORBIDDEN,
                        Refused::Unavailable(_) => StatusCode::INTERNAL_SERVER_ERROR,
                    };
                    tracing::debug!(reason = e.as_str(), "metrics request refused");
                    reply(status, "text/plain", format!("{e}\n"))
                }
            }
        }
    }
}

/// Serves `app` on `listener` over plain HTTP/1.1 until the task is dropped.
pub async fn serve_plain(listener: TcpListener, app: App) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let app = app.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(app.clone(), req));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(sock), svc)
                .await;
        });
    }
}

/// Serves `app` on `listener` over HTTPS (HTTP/2 or HTTP/1.1 by ALPN) until
/// the task is dropped. A failed handshake closes that connection only.
pub async fn serve_tls(listener: TcpListener, tls: Arc<rustls::ServerConfig>, app: App) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let app = app.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(sock).await else {
                return;
            };
            let svc = hyper::service::service_fn(move |req| handle(app.clone(), req));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), svc)
                .await;
        });
    }
}

/// Serves `/metrics` (as `access` says), `/healthz` and `/readyz` on
/// `listener` (plain HTTP, see [`serve_plain`]) until the task is dropped.
pub async fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>, access: MetricsAccess) {
    let app = App {
        metrics,
        webhook: None,
        metrics_access: access,
    };
    serve_plain(listener, app).await
}

/// A TLS configuration serving a certificate for `names`, signed by a CA
/// made here and never written anywhere: for `/metrics` over HTTPS when no
/// certificate is given, as controller-runtime's secure metrics serving
/// makes a self-signed one (scrapers skip verification, or pin nothing;
/// the bearer token is what is checked).
pub fn self_signed_tls(names: Vec<String>, now: i64) -> Result<rustls::ServerConfig, String> {
    let issued = crate::controller::webhook::issue::issue(
        None,
        true,
        names,
        "muster-metrics-ca",
        &crate::controller::webhook::rotation::Policy::default(),
        now,
    )
    .map_err(|e| e.to_string())?;
    let slot = Arc::new(crate::controller::webhook::tls::CertSlot::default());
    slot.set(issued.tls_crt.as_bytes(), issued.tls_key.as_bytes())
        .map_err(|e| e.to_string())?;
    slot.server_config().map_err(|e| e.to_string())
}
