//! A ledger of the machines a cloud made, for clouds whose machines are
//! API objects (the simulated cloud's Nodes, the delegate mode's
//! NodeClaims): a watch from the start records every object created —
//! name, uid and PoolNode label, so one deleted and created again under the
//! same name is two creations — and counts the deleted ones.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::Api;
use kube::{Resource, ResourceExt};
use kube_runtime::watcher;
use muster_provider_api::tags;
use serde::de::DeserializeOwned;

/// What the watch saw; the watch stops when this is dropped.
pub struct Ledger {
    created: Arc<Mutex<BTreeSet<(String, String, String)>>>,
    deleted: Arc<AtomicUsize>,
    watch: tokio::task::JoinHandle<()>,
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

impl Ledger {
    /// Starts watching `api` with `cfg`.
    pub fn watch<K>(api: Api<K>, cfg: watcher::Config) -> Ledger
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    {
        let created: Arc<Mutex<BTreeSet<(String, String, String)>>> = Arc::default();
        let deleted = Arc::new(AtomicUsize::new(0));
        let (c, d) = (created.clone(), deleted.clone());
        let watch = tokio::spawn(async move {
            let mut stream = watcher(api, cfg).boxed();
            while let Some(ev) = stream.next().await {
                let o = match ev {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                    Ok(watcher::Event::Delete(_)) => {
                        d.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    _ => continue,
                };
                let pool_node = o.labels().get(tags::POOL_NODE).cloned().unwrap_or_default();
                c.lock().unwrap_or_else(|e| e.into_inner()).insert((
                    o.name_any(),
                    o.uid().unwrap_or_default(),
                    pool_node,
                ));
            }
        });
        Ledger {
            created,
            deleted,
            watch,
        }
    }

    /// Objects created so far.
    pub fn launches(&self) -> usize {
        self.created.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Objects deleted so far.
    pub fn terminations(&self) -> usize {
        self.deleted.load(Ordering::Relaxed)
    }

    /// Every creation: `(name, PoolNode label)`.
    pub fn created(&self) -> Vec<(String, String)> {
        self.created
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(name, _, pn)| (name.clone(), pn.clone()))
            .collect()
    }
}
