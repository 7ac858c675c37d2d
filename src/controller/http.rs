//! The controller's one HTTP stack (hyper): `/metrics`, `/healthz` and
//! `/readyz` on plain HTTP for the kubelet and Prometheus, and the same routes
//! plus the admission webhook on HTTPS (rustls) for the API server.

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
        (&Method::GET, "/metrics") => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            app.metrics.encode(),
        ),
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

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` (plain HTTP,
/// see [`serve_plain`]) until the task is dropped.
pub async fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>) {
    let app = App {
        metrics,
        webhook: None,
    };
    serve_plain(listener, app).await
}
