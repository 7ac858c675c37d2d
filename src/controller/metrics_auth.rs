//! Who may read `/metrics`: the bearer token of the request, authenticated
//! by the API server (TokenReview) and authorized for `get` on the
//! non-resource URL `/metrics` (SubjectAccessReview) — what
//! controller-runtime's secure metrics serving does
//! (`pkg/metrics/filters/filters.go`, `WithAuthenticationAndAuthorization`),
//! and what Prometheus scraping with its ServiceAccount token expects. A
//! ClusterRole granting `get` on `/metrics` (the chart's
//! `<release>-metrics-reader`) bound to the scraper lets it in.
//!
//! Answers are kept per token (as a hash, never the token): an allowed one
//! for a minute, so a scrape every few seconds costs the API server two
//! requests a minute; a refusal for ten seconds, so a binding made after a
//! refusal takes effect soon (the API server's own webhook authorizer keeps
//! denials shorter than approvals too).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// How long an allowed answer for a token is kept.
const CACHE_ALLOWED: Duration = Duration::from_secs(60);
/// How long a refusal for a token is kept.
const CACHE_REFUSED: Duration = Duration::from_secs(10);

/// How long `answer` is kept.
fn kept_for(answer: &Result<(), Refused>) -> Duration {
    if answer.is_ok() {
        CACHE_ALLOWED
    } else {
        CACHE_REFUSED
    }
}
/// Most tokens remembered at once (older answers are dropped first).
const CACHE_MAX: usize = 256;

/// Why a request may not read the metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No bearer token, or the API server does not know it (401).
    #[error("a bearer token the API server authenticates is needed to read /metrics")]
    Unauthenticated,
    /// Authenticated, but not allowed `get` on `/metrics` (403).
    #[error(
        "{0} may not get /metrics: bind it to a ClusterRole granting get on the non-resource URL /metrics"
    )]
    Forbidden(String),
    /// The API server could not be asked (500, not cached).
    #[error("could not check the token with the API server: {0}")]
    Unavailable(String),
}

impl Refused {
    /// Bounded category.
    pub fn as_str(&self) -> &'static str {
        match self {
            Refused::Unauthenticated => "Unauthenticated",
            Refused::Forbidden(_) => "Forbidden",
            Refused::Unavailable(_) => "Unavailable",
        }
    }
}

/// An answer for a token, and when it was given.
type Answer = (Instant, Result<(), Refused>);

/// Checks bearer tokens against the API server, with a short cache.
pub struct MetricsAuth {
    client: kube::Client,
    /// By the token's SHA-256.
    cache: Mutex<HashMap<[u8; 32], Answer>>,
}

impl MetricsAuth {
    /// Checks with the API server of `client` (which needs `create` on
    /// `tokenreviews` and `subjectaccessreviews`).
    pub fn new(client: kube::Client) -> MetricsAuth {
        MetricsAuth {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the request with this `Authorization` header may read the
    /// metrics.
    pub async fn check(&self, authorization: Option<&str>) -> Result<(), Refused> {
        let Some(token) = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
        else {
            return Err(Refused::Unauthenticated);
        };
        let key = digest(token);
        if let Some(answer) = self.cached(&key) {
            return answer;
        }
        let answer = self.ask(token).await;
        if !matches!(answer, Err(Refused::Unavailable(_))) {
            self.remember(key, answer.clone());
        }
        answer
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Result<(), Refused>> {
        let cache = self.cache.lock().ok()?;
        cache
            .get(key)
            .filter(|(at, a)| at.elapsed() < kept_for(a))
            .map(|(_, a)| a.clone())
    }

    fn remember(&self, key: [u8; 32], answer: Result<(), Refused>) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        cache.retain(|_, (at, a)| at.elapsed() < kept_for(a));
        if cache.len() >= CACHE_MAX
            && let Some(oldest) = cache.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| *k)
        {
            cache.remove(&oldest);
        }
        cache.insert(key, (Instant::now(), answer));
    }

    async fn ask(&self, token: &str) -> Result<(), Refused> {
        let unavailable = |e: kube::Error| {
            Refused::Unavailable(crate::controller::observe::crd_check::short_error(&e))
        };
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(unavailable)?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Err(Refused::Unauthenticated),
        };
        let name = user.username.clone().unwrap_or_default();
        let sar = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some("/metrics".to_string()),
                    verb: Some("get".to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &sar)
            .await
            .map_err(unavailable)?;
        if decided.status.is_some_and(|s| s.allowed) {
            Ok(())
        } else {
            Err(Refused::Forbidden(name))
        }
    }
}

/// SHA-256 of a token: the cache keeps no token.
fn digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keys_are_digests_and_refusals_name_what_to_do() {
        assert_ne!(digest("a"), digest("b"));
        assert_eq!(digest("a"), digest("a"));
        assert_eq!(Refused::Unauthenticated.as_str(), "Unauthenticated");
        let f = Refused::Forbidden("system:serviceaccount:monitoring:prometheus".into());
        assert!(
            f.to_string()
                .contains("ClusterRole granting get on the non-resource URL /metrics")
        );
    }
}
