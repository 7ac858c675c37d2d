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

use crate::controller::base::leadership::Leadership;

/// Why the wrapper refused or gave up a request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    /// A write while this instance does not lead.
    #[error("not the leader: write refused")]
    NotLeader,
    /// No complete answer within the request timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

impl RequestError {
    /// A short, bounded reason for logs and metrics.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            RequestError::NotLeader => "NotLeader",
            RequestError::Timeout(_) => "Timeout",
        }
    }
}

/// How to wrap a client.
#[derive(Clone)]
pub(crate) struct Options {
    /// Deadline of every request but watches.
    pub(crate) timeout: Duration,
    /// Writes only while leading; `None` for the election's own client.
    pub(crate) fence: Option<Leadership>,
    /// Identity named in the User-Agent.
    pub(crate) identity: String,
    /// Appended to the User-Agent (e.g. `leader-election`).
    pub(crate) purpose: Option<&'static str>,
}

/// `client` wrapped with `options`.
pub(crate) fn wrap(client: kube::Client, options: Options) -> kube::Client {
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
            let refused = RequestError::NotLeader;
            tracing::debug!(method = %req.method(), uri = %req.uri(), reason = refused.as_str(), "write refused: not leading");
            return Box::pin(std::future::ready(Err(refused.into())));
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
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::controller::base::metrics::Metrics;

    /// A request as it reached the server: method and User-Agent.
    type Seen = (Method, Option<HeaderValue>);

    /// The API server side: records what reaches it; answers unless `silent`.
    #[derive(Clone, Default)]
    struct Server {
        seen: Arc<Mutex<Vec<Seen>>>,
        silent: bool,
    }

    impl tower_service::Service<Request<Body>> for Server {
        type Response = Response<Body>;
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: Request<Body>) -> Self::Future {
            self.seen
                .lock()
                .expect("lock")
                .push((req.method().clone(), req.headers().get(USER_AGENT).cloned()));
            let silent = self.silent;
            Box::pin(async move {
                if silent {
                    std::future::pending::<()>().await;
                }
                Ok(Response::new(Body::from(b"{}".to_vec())))
            })
        }
    }

    fn request(method: Method) -> Request<Body> {
        Request::builder()
            .method(method)
            .uri("/api/v1/namespaces/default/configmaps")
            .body(Body::from(Vec::new()))
            .expect("request")
    }

    fn fenced(server: &Server, leadership: &Leadership) -> kube::Client {
        wrap(
            kube::Client::new(server.clone(), "default"),
            Options {
                timeout: Duration::from_secs(4),
                fence: Some(leadership.clone()),
                identity: "muster-0".into(),
                purpose: None,
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn writes_pass_only_until_the_renew_deadline() {
        let server = Server::default();
        let leadership = Leadership::elected(Arc::new(Metrics::new()));
        let client = fenced(&server, &leadership);
        // a follower reads but never writes
        client.send(request(Method::GET)).await.expect("read");
        let refused = client.send(request(Method::POST)).await;
        assert!(refused.is_err(), "a follower's write is refused");
        // leading until 10 s from now
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        leadership.lead(until);
        client.send(request(Method::PATCH)).await.expect("write");
        // past the deadline the fence is closed, though nobody said so
        // (the election task of a resumed process may not have run yet)
        tokio::time::sleep_until(until).await;
        for m in [Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
            assert!(client.send(request(m.clone())).await.is_err(), "{m} passed");
        }
        client
            .send(request(Method::GET))
            .await
            .expect("reads go on");
        let seen = server.seen.lock().expect("lock").clone();
        let methods: Vec<Method> = seen.iter().map(|s| s.0.clone()).collect();
        assert_eq!(methods, [Method::GET, Method::PATCH, Method::GET]);
        let agent = format!("muster-controller/{} (muster-0)", env!("CARGO_PKG_VERSION"));
        assert!(
            seen.iter()
                .all(|s| s.1.as_ref().and_then(|v| v.to_str().ok()) == Some(agent.as_str()))
        );
        // without election, always open
        let always = Leadership::always(Arc::new(Metrics::new()));
        fenced(&server, &always)
            .send(request(Method::DELETE))
            .await
            .expect("write");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_answer_ends_at_its_deadline() {
        let server = Server {
            silent: true,
            ..Server::default()
        };
        let always = Leadership::always(Arc::new(Metrics::new()));
        let client = fenced(&server, &always);
        let t0 = tokio::time::Instant::now();
        let err = client
            .send(request(Method::GET))
            .await
            .expect_err("no answer");
        assert_eq!(t0.elapsed(), Duration::from_secs(4));
        assert!(err.to_string().contains("no answer within"), "{err}");
    }

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
