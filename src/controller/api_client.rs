//! The API client as the controller uses it: the given `kube::Client` wrapped
//! so that
//!
//! - every request except a watch has a deadline (`api_timeout`, connecting,
//!   sending and reading the whole answer included), shorter than the margin
//!   between renew deadline and lease duration, so no write sent while
//!   leading can still be on its way when another candidate takes over;
//!   watches are held open on purpose and guarded by the watcher's own idle
//!   timeout;
//! - every write (POST, PUT, PATCH, DELETE) is refused, before it is sent,
//!   unless this instance leads ([`Leadership::may_write`]): the write fence,
//!   checked against the monotonic clock at the moment of the request, so a
//!   process resumed after a pause longer than its renew deadline writes
//!   nothing, even before its election task runs;
//! - each request names the instance in its `User-Agent`
//!   (`muster-controller/VERSION (IDENTITY)`), as the API server's audit log
//!   records it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderValue, Method, Request, Response, header::USER_AGENT};
use http_body_util::BodyExt;
use kube::client::Body;

use super::leader::Leadership;

/// Why the wrapper refused or gave up a request.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A write while this instance does not lead.
    #[error("not the leader: write refused")]
    NotLeader,
    /// No complete answer within the request timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl RequestError {
    /// A short, bounded reason for logs and metrics.
    pub fn as_str(&self) -> &'static str {
        match self {
            RequestError::NotLeader => "NotLeader",
            RequestError::Timeout(_) => "Timeout",
        }
    }
}

/// How to wrap a client.
#[derive(Clone)]
pub struct Options {
    /// Deadline of every request but watches.
    pub timeout: Duration,
    /// Writes only while leading; `None` for the election's own client.
    pub fence: Option<Leadership>,
    /// Identity named in the User-Agent.
    pub identity: String,
    /// Appended to the User-Agent (e.g. `leader-election`).
    pub purpose: Option<&'static str>,
}

/// `client` wrapped with `options`.
pub fn wrap(client: kube::Client, options: Options) -> kube::Client {
    let ns = client.default_namespace().to_string();
    let version = env!("CARGO_PKG_VERSION");
    let agent = match options.purpose {
        Some(p) => format!("muster-controller/{version} ({}) {p}", options.identity),
        None => format!("muster-controller/{version} ({})", options.identity),
    };
    let user_agent = HeaderValue::from_str(&agent)
        .unwrap_or_else(|_| HeaderValue::from_static("muster-controller"));
    kube::Client::new(
        Wrapped {
            inner: client,
            timeout: options.timeout,
            fence: options.fence,
            user_agent,
        },
        ns,
    )
}

#[derive(Clone)]
struct Wrapped {
    inner: kube::Client,
    timeout: Duration,
    fence: Option<Leadership>,
    user_agent: HeaderValue,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn is_watch<B>(req: &Request<B>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

impl tower_service::Service<Request<Body>> for Wrapped {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<Body>) -> Self::Future {
        if is_write(req.method()) && self.fence.as_ref().is_some_and(|f| !f.may_write()) {
            tracing::debug!(method = %req.method(), uri = %req.uri(), "write refused: not leading");
            return Box::pin(std::future::ready(Err(RequestError::NotLeader.into())));
        }
        req.headers_mut()
            .entry(USER_AGENT)
            .or_insert_with(|| self.user_agent.clone());
        let inner = self.inner.clone();
        if is_watch(&req) {
            return Box::pin(async move { Ok(inner.send(req).await?) });
        }
        let timeout = self.timeout;
        Box::pin(async move {
            let whole = async move {
                let (parts, body) = inner.send(req).await?.into_parts();
                let bytes = body.collect().await?.to_bytes();
                Ok::<_, BoxError>(Response::from_parts(parts, Body::from(bytes)))
            };
            match tokio::time::timeout(timeout, whole).await {
                Ok(answer) => answer,
                Err(_) => Err(RequestError::Timeout(timeout).into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_watches_are_told_apart() {
        for (m, write) in [
            (Method::GET, false),
            (Method::HEAD, false),
            (Method::POST, true),
            (Method::PUT, true),
            (Method::PATCH, true),
            (Method::DELETE, true),
        ] {
            assert_eq!(is_write(&m), write, "{m}");
        }
        let req = |uri: &str| Request::get(uri).body(()).expect("request");
        assert!(is_watch(&req("/api/v1/pods?watch=true&resourceVersion=5")));
        assert!(is_watch(&req("/api/v1/pods?resourceVersion=5&watch=1")));
        assert!(!is_watch(&req("/api/v1/pods?limit=500")));
        assert!(!is_watch(&req("/api/v1/namespaces/a/pods/watch-me")));
    }
}
