//! Controller-managed serving certificates (`--webhook-certs controller`):
//! a CA and a serving certificate in a Secret, the CA bundle in the
//! MutatingWebhookConfiguration, renewed before they expire.
//!
//! Every replica watches the Secret (by name) and serves its `tls.crt` and
//! `tls.key` from memory ([`CertSlot`]); a replica without one is not Ready.
//! Only the leader writes, as Kueue's internal certificate management does
//! with open-policy-agent/cert-controller (`pkg/rotator/rotator.go`) — there
//! every replica may rotate and conflicts settle it; here only the Lease
//! holder does, and the write fence of the API client ([`crate::controller::base::client`])
//! refuses the writes of any other. The leader decides from the Secret it
//! last saw ([`rotation::decide`]); to issue, it creates the Secret or
//! replaces it at the resourceVersion it read (a 409 Conflict or
//! AlreadyExists means someone wrote first: the Secret is read again and
//! decided again). A new CA goes into every webhook's
//! `clientConfig.caBundle` *before* the Secret that serves with it, the
//! previous CA kept in the bundle, so the API server trusts the serving
//! certificate of every replica throughout; otherwise the bundle is patched
//! to the Secret's `ca.crt` whenever it differs (a JSON patch, each webhook
//! tested by name, so a concurrent edit of the list fails rather than
//! mislabels).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube_runtime::WatchStreamExt;
use kube_runtime::watcher;
use tokio::sync::watch;

use crate::controller::base::metrics::Metrics;
use crate::controller::webhook::issue::{self, Issued};
use crate::controller::webhook::rotation::{self, Material, Policy, Verdict};
use crate::controller::webhook::tls::CertSlot;

mod secret_view;
use secret_view::SecretView;

/// The type of the Secret (kubernetes.io/tls: `tls.crt` and `tls.key`
/// required), plus `ca.crt` and `ca.key`.
pub(crate) const SECRET_TYPE: &str = "kubernetes.io/tls";

/// How often the decision is taken again at the latest (cert-controller
/// checks every 12 hours).
const RECHECK: Duration = Duration::from_secs(12 * 3600);
/// How soon after a failed step it is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// Where the certificates live and whom they are for.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Secret's name.
    pub secret: String,
    /// The namespace of the Secret and of the Service.
    pub namespace: String,
    /// The webhook Service's name: the certificate names
    /// `SERVICE.NAMESPACE.svc`.
    pub service: String,
    /// The MutatingWebhookConfiguration whose webhooks get the CA bundle.
    pub config: String,
    /// Validity and renewal.
    pub policy: Policy,
    /// Where the serving certificate is handed to the HTTPS server.
    pub slot: Arc<CertSlot>,
}

impl Settings {
    /// The DNS name the API server checks.
    pub fn dns_name(&self) -> String {
        format!("{}.{}.svc", self.service, self.namespace)
    }
}

/// Why a step failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManagedError {
    /// A certificate could not be issued.
    #[error("issuing: {0}")]
    Issue(#[from] issue::IssueError),
    /// The Secret could not be read or written.
    #[error("secret: {0}")]
    Secret(String),
    /// The webhook configuration could not be read or patched.
    #[error("webhook configuration: {0}")]
    Config(String),
}

impl ManagedError {
    /// A bounded, user-facing reason.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            ManagedError::Issue(e) => e.as_str(),
            ManagedError::Secret(_) => "SecretWriteFailed",
            ManagedError::Config(_) => "CABundlePatchFailed",
        }
    }
}

fn entry<'a>(s: &'a Secret, key: &str) -> Option<&'a [u8]> {
    s.data.as_ref()?.get(key).map(|b| b.0.as_slice())
}

fn material(s: &Secret) -> Material<'_> {
    Material {
        ca_crt: entry(s, "ca.crt"),
        ca_key: entry(s, "ca.key"),
        tls_crt: entry(s, "tls.crt"),
        tls_key: entry(s, "tls.key"),
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Hands the Secret's serving certificate to the slot (every replica).
fn serve(settings: &Settings, secret: Option<&Secret>, metrics: &Metrics) {
    let Some(s) = secret else { return };
    let (Some(crt), Some(key)) = (entry(s, "tls.crt"), entry(s, "tls.key")) else {
        return;
    };
    match settings.slot.set(crt, key) {
        Ok(true) => tracing::info!(secret = %settings.secret, "webhook serving certificate loaded"),
        Ok(false) => {}
        Err(e) => tracing::warn!(
            reason = e.as_str(),
            "webhook serving certificate not loaded"
        ),
    }
    if settings.slot.loaded() {
        metrics.set_webhook_cert_loaded();
    }
}

/// What the leader does next.
enum Next {
    /// Decide again after this long (or on the next event).
    After(Duration),
    /// Someone else wrote the Secret: read it again now.
    Reread,
    /// This Secret was written: decide on it from now on, after this long.
    /// The watch delivers it later, and any event before that (the patch of
    /// the webhook configuration, for one) would otherwise be decided on the
    /// Secret it replaced: a second new CA, patched into the bundle in place
    /// of the one the Secret serves with, until its write fails.
    Wrote(Box<Secret>, Duration),
}

/// One decision of the leader on the Secret it last saw.
async fn reconcile(
    client: &kube::Client,
    settings: &Settings,
    current: Option<&Secret>,
) -> Result<Next, ManagedError> {
    let now = unix_now();
    let m = current.map(material);
    let verdict = rotation::decide(m.as_ref(), &settings.dns_name(), &settings.policy, now);
    match verdict {
        Verdict::Keep { renew_at } => {
            if let Some(bundle) = m.and_then(|m| m.ca_crt) {
                ensure_ca_bundle(client, settings, bundle).await?;
            }
            let wait = u64::try_from(renew_at - now).unwrap_or(0).max(1);
            Ok(Next::After(Duration::from_secs(wait).min(RECHECK)))
        }
        Verdict::Issue { reason, new_ca } => {
            tracing::info!(
                reason = reason.as_str(),
                new_ca,
                secret = %settings.secret,
                "issuing the webhook serving certificate"
            );
            let old = m.and_then(|m| {
                let crt = std::str::from_utf8(m.ca_crt?).ok()?;
                let key = std::str::from_utf8(m.ca_key?).ok()?;
                Some((crt, key))
            });
            let names = issue::dns_names(&settings.service, &settings.namespace);
            let ca_name = format!("{}-ca", settings.service);
            let issued = issue::issue(old, new_ca, names, &ca_name, &settings.policy, now)?;
            if new_ca {
                // the API server trusts the new CA before any replica serves with it
                ensure_ca_bundle(client, settings, issued.ca_crt.as_bytes()).await?;
            }
            write_secret(client, settings, current, &issued).await
        }
    }
}

/// The Secret's data for `issued`.
fn secret_data(issued: &Issued) -> BTreeMap<String, ByteString> {
    [
        ("ca.crt", &issued.ca_crt),
        ("ca.key", &issued.ca_key),
        ("tls.crt", &issued.tls_crt),
        ("tls.key", &issued.tls_key),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
    .collect()
}

/// Creates the Secret, or replaces it at the resourceVersion read.
async fn write_secret(
    client: &kube::Client,
    settings: &Settings,
    current: Option<&Secret>,
    issued: &Issued,
) -> Result<Next, ManagedError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &settings.namespace);
    let data = secret_data(issued);
    let result = match current {
        Some(old) => {
            let mut s = old.clone();
            s.data = Some(data);
            s.string_data = None;
            s.type_ = Some(SECRET_TYPE.to_string());
            api.replace(&settings.secret, &PostParams::default(), &s)
                .await
        }
        None => {
            let mut s = Secret {
                data: Some(data),
                type_: Some(SECRET_TYPE.to_string()),
                ..Secret::default()
            };
            s.metadata.name = Some(settings.secret.clone());
            s.metadata.namespace = Some(settings.namespace.clone());
            s.metadata.labels = Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "muster".to_string(),
            )]));
            api.create(&PostParams::default(), &s).await
        }
    };
    match result {
        Ok(written) => Ok(Next::Wrote(Box::new(written), RETRY)),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Next::Reread),
        Err(e) => Err(ManagedError::Secret(e.to_string())),
    }
}

/// Patches every webhook's `clientConfig.caBundle` to `bundle` where it
/// differs. A configuration that does not exist (yet) is left alone.
async fn ensure_ca_bundle(
    client: &kube::Client,
    settings: &Settings,
    bundle: &[u8],
) -> Result<(), ManagedError> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let cfg = api
        .get_opt(&settings.config)
        .await
        .map_err(|e| ManagedError::Config(e.to_string()))?;
    let Some(cfg) = cfg else {
        tracing::warn!(config = %settings.config, "webhook configuration not found: no CA bundle to patch");
        return Ok(());
    };
    let ops = ca_bundle_patch(&cfg, bundle);
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch = serde_json::from_value(serde_json::Value::Array(ops))
        .map_err(|e| ManagedError::Config(e.to_string()))?;
    api.patch(
        &settings.config,
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await
    .map_err(|e| ManagedError::Config(e.to_string()))?;
    tracing::info!(config = %settings.config, "webhook CA bundle patched");
    Ok(())
}

/// The JSON patch that sets `bundle` as every webhook's caBundle where it
/// differs, each guarded by a test of the webhook's name; empty when none
/// differs.
pub(crate) fn ca_bundle_patch(
    cfg: &MutatingWebhookConfiguration,
    bundle: &[u8],
) -> Vec<serde_json::Value> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bundle);
    let mut ops = Vec::new();
    for (i, hook) in cfg.webhooks.iter().flatten().enumerate() {
        if hook
            .client_config
            .ca_bundle
            .as_ref()
            .map(|b| b.0.as_slice())
            == Some(bundle)
        {
            continue;
        }
        ops.push(serde_json::json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": hook.name}));
        ops.push(serde_json::json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": b64}));
    }
    ops
}

/// Watches the Secret, serves its certificate and, while leading, keeps it
/// and the CA bundle current. Runs until dropped.
pub(crate) async fn run(
    client: kube::Client,
    settings: Arc<Settings>,
    mut leading: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
) {
    let api: Api<Secret> = Api::namespaced(client.clone(), &settings.namespace);
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", settings.secret));
    let mut stream = watcher::watcher(api.clone(), cfg).boxed();
    // The webhook configuration too, as cert-controller's rotator watches
    // it: an apply that drops the caBundle (a re-install, a GitOps sync of
    // the rendered manifest) is mended at once, not at the next recheck.
    let configs: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut config_stream = watcher::watcher(
        configs,
        watcher::Config::default().fields(&format!("metadata.name={}", settings.config)),
    )
    .default_backoff()
    .boxed();
    let mut view = SecretView::default();
    let mut next = tokio::time::Instant::now() + RECHECK;
    loop {
        tokio::select! {
            ev = stream.next() => match ev {
                Some(Ok(ev)) => view.on_watch(ev),
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "webhook certificate Secret watch");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
                None => return,
            },
            ev = config_stream.next() => match ev {
                Some(Ok(watcher::Event::Apply(_) | watcher::Event::InitDone)) => {}
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "webhook configuration watch");
                    continue;
                }
                None => return,
            },
            changed = leading.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep_until(next) => {}
        }
        if !view.synced() {
            continue;
        }
        serve(&settings, view.current(), &metrics);
        if !*leading.borrow() {
            next = tokio::time::Instant::now() + RECHECK;
            continue;
        }
        let step = reconcile(&client, &settings, view.current()).await;
        next = tokio::time::Instant::now()
            + match step {
                Ok(Next::After(d)) => d,
                Ok(Next::Wrote(written, d)) => {
                    view.wrote(*written);
                    d
                }
                Ok(Next::Reread) => {
                    match api.get_opt(&settings.secret).await {
                        Ok(s) => view.reread(s),
                        Err(e) => tracing::warn!(error = %e, "webhook certificate Secret not read"),
                    }
                    Duration::ZERO
                }
                Err(e) => {
                    tracing::warn!(reason = e.as_str(), error = %e, "webhook certificates");
                    RETRY
                }
            };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(bundles: &[Option<&[u8]>]) -> MutatingWebhookConfiguration {
        let hooks: Vec<serde_json::Value> = bundles
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let mut cc = serde_json::json!({"service": {"name": "s", "namespace": "n"}});
                if let Some(b) = b {
                    cc["caBundle"] = base64::engine::general_purpose::STANDARD.encode(b).into();
                }
                serde_json::json!({"name": format!("h{i}.muster.dev"), "clientConfig": cc,
                    "sideEffects": "None", "admissionReviewVersions": ["v1"]})
            })
            .collect();
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "muster"}, "webhooks": hooks}),
        )
        .expect("configuration")
    }

    #[test]
    fn the_bundle_is_patched_only_where_it_differs_each_guarded_by_name() {
        let want: &[u8] = b"new";
        assert!(ca_bundle_patch(&config(&[Some(want), Some(want)]), want).is_empty());
        let ops = ca_bundle_patch(&config(&[Some(want), None, Some(b"old")]), want);
        let b64 = base64::engine::general_purpose::STANDARD.encode(want);
        assert_eq!(
            ops,
            vec![
                serde_json::json!({"op": "test", "path": "/webhooks/1/name", "value": "h1.muster.dev"}),
                serde_json::json!({"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": b64}),
                serde_json::json!({"op": "test", "path": "/webhooks/2/name", "value": "h2.muster.dev"}),
                serde_json::json!({"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": b64}),
            ]
        );
        // and it applies
        let mut doc =
            serde_json::to_value(config(&[Some(want), None, Some(b"old")])).expect("json");
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::Value::Array(ops)).expect("patch");
        json_patch::patch(&mut doc, &patch).expect("applies");
        let patched: MutatingWebhookConfiguration = serde_json::from_value(doc).expect("config");
        assert!(ca_bundle_patch(&patched, want).is_empty());
    }

    #[test]
    fn the_slot_serves_a_matching_pair_and_keeps_it_over_a_bad_one() {
        let p = Policy::default();
        let names = issue::dns_names("muster-webhook", "muster-system");
        let a = issue::issue(None, true, names.clone(), "ca", &p, unix_now()).expect("a");
        let b = issue::issue(None, true, names, "ca", &p, unix_now()).expect("b");
        let slot = CertSlot::default();
        assert!(!slot.loaded());
        assert!(slot.set(b"no PEM", a.tls_key.as_bytes()).is_err());
        assert!(
            slot.set(a.tls_crt.as_bytes(), b.tls_key.as_bytes())
                .is_err(),
            "a key of another certificate"
        );
        assert!(!slot.loaded());
        assert!(matches!(
            slot.set(a.tls_crt.as_bytes(), a.tls_key.as_bytes()),
            Ok(true)
        ));
        assert!(matches!(
            slot.set(a.tls_crt.as_bytes(), a.tls_key.as_bytes()),
            Ok(false)
        ));
        assert!(slot.set(b"garbage", b"garbage").is_err());
        assert!(slot.loaded(), "a refused pair keeps the one served");
        assert!(matches!(
            slot.set(b.tls_crt.as_bytes(), b.tls_key.as_bytes()),
            Ok(true)
        ));
    }
}
