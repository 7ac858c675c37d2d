//! Observation: one reflector (watch + cache) per watched kind and namespace,
//! a change signal for the planning loop, and the synced gate.
//!
//! Built-in kinds are cached typed. The muster kinds are cached as
//! `DynamicObject`s and parsed per object later ([`crate::controller::translate`]): a
//! typed watch fails as a whole on one object it cannot decode, which would
//! let one malformed `GPUPool` blind the controller to every other one.
//! Watch errors are logged and retried with backoff; they never end a watch.

pub mod crd_check;
mod observed;
pub mod once;
pub mod prometheus;
pub mod workloads;

pub use observed::Observed;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node};

use crate::controller::workloads::pod::{CachedPod, slim_node};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DynamicObject};
use kube::{Client, Resource};
use kube_runtime::reflector::{self, Store};
use kube_runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::controller::ControllerConfig;
use crate::controller::base::objects::{Kind, KindExt};
use crate::controller::workloads::WorkloadKind;

/// The watch caches and the change signal.
#[derive(Clone)]
pub(crate) struct Caches {
    jobs: Vec<Store<Job>>,
    pods: Vec<Store<CachedPod>>,
    pdbs: Vec<Store<PodDisruptionBudget>>,
    nodes: Store<Node>,
    namespaces: Store<Namespace>,
    muster: BTreeMap<Kind, Vec<Store<DynamicObject>>>,
    workloads: BTreeMap<WorkloadKind, Vec<Store<DynamicObject>>>,
    related: BTreeMap<String, Vec<Store<DynamicObject>>>,
    /// The enabled workload kinds the API server serves.
    kinds: std::collections::BTreeSet<WorkloadKind>,
    /// Enabled workload kinds whose CRD is not served (skipped; reported on
    /// every GPUQueue's `WorkloadKindsServed` condition).
    missing: Arc<Vec<WorkloadKind>>,
    /// Enabled workload kinds served in a version muster cannot run, with
    /// why (skipped; reported on every GPUQueue's `WorkloadKindsServed`).
    refused: Arc<Vec<(WorkloadKind, String)>>,
    /// Notified on every watch event (and by writers who want a re-plan).
    pub(crate) changes: Arc<Notify>,
    tasks: Arc<Vec<JoinHandle<()>>>,
}

impl Caches {
    /// Records the enabled workload kinds whose CRD the server does not
    /// serve (see [`crd_check::served_workload_kinds`]).
    pub(crate) fn with_missing(mut self, missing: Vec<WorkloadKind>) -> Caches {
        self.missing = Arc::new(missing);
        self
    }

    /// Enabled workload kinds whose CRD is not served.
    pub(crate) fn missing_kinds(&self) -> &[WorkloadKind] {
        &self.missing
    }

    /// Records the workload kinds served in a version muster cannot run
    /// (see [`crd_check::refused_workload_kinds`]).
    pub(crate) fn with_refused(mut self, refused: Vec<(WorkloadKind, String)>) -> Caches {
        self.refused = Arc::new(refused);
        self
    }

    /// Workload kinds served in a version muster cannot run, with why.
    pub(crate) fn refused_kinds(&self) -> &[(WorkloadKind, String)] {
        &self.refused
    }

    /// What the caches hold now, read once for a cycle.
    pub(crate) fn observed(&self) -> Observed {
        Observed {
            jobs: self.jobs(),
            pods: self.pods(),
            nodes: self.nodes(),
            namespaces: self.namespaces(),
            pdbs: self.pdbs(),
            objects: Kind::ALL
                .into_iter()
                .map(|k| (k, self.objects(k)))
                .collect(),
            kinds: self.kinds.clone(),
            workloads: self
                .kinds
                .iter()
                .filter(|k| k.custom().is_some())
                .map(|&k| (k, self.workloads(k)))
                .collect(),
            related: self.related(),
        }
    }

    /// Starts every reflector: the built-in kinds, the muster kinds, and the
    /// custom workload kinds of `workload_kinds` (enabled and served).
    pub(crate) fn start(
        client: Client,
        config: &ControllerConfig,
        workload_kinds: &std::collections::BTreeSet<WorkloadKind>,
    ) -> Caches {
        let changes = Arc::new(Notify::new());
        let mut tasks = Vec::new();
        let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
            vec![None]
        } else {
            config.namespaces.iter().cloned().map(Some).collect()
        };
        let jobs = scopes
            .iter()
            .map(|ns| typed::<Job>(namespaced(&client, ns), &changes, &mut tasks))
            .collect();
        let pods = scopes
            .iter()
            .map(|ns| typed::<CachedPod>(namespaced(&client, ns), &changes, &mut tasks))
            .collect();
        let pdbs = scopes
            .iter()
            .map(|ns| typed::<PodDisruptionBudget>(namespaced(&client, ns), &changes, &mut tasks))
            .collect();
        let nodes = typed_slim::<Node>(Api::all(client.clone()), &changes, &mut tasks, slim_node);
        let namespaces = typed::<Namespace>(Api::all(client.clone()), &changes, &mut tasks);
        let mut muster = BTreeMap::new();
        for kind in Kind::ALL {
            let stores = dynamic_stores(
                &client,
                &scopes,
                kind.api_resource(),
                kind.namespaced(),
                &changes,
                &mut tasks,
            );
            muster.insert(kind, stores);
        }
        let mut workloads = BTreeMap::new();
        for kind in workload_kinds {
            let Some(custom) = kind.custom() else {
                continue;
            };
            let ar = custom.api_resource();
            let stores = dynamic_stores(&client, &scopes, ar, true, &changes, &mut tasks);
            workloads.insert(*kind, stores);
        }
        let mut related = BTreeMap::new();
        for r in workload_kinds.iter().flat_map(|k| k.related()) {
            let ar = r.kind.api_resource();
            let stores = dynamic_stores(&client, &scopes, ar, r.namespaced, &changes, &mut tasks);
            related.insert(r.kind.crd_name(), stores);
        }
        Caches {
            workloads,
            related,
            kinds: workload_kinds.clone(),
            missing: Arc::default(),
            refused: Arc::default(),
            jobs,
            pods,
            pdbs,
            nodes,
            namespaces,
            muster,
            changes,
            tasks: Arc::new(tasks),
        }
    }

    /// Waits until every cache has completed its first list. No planning
    /// happens before this.
    pub(crate) async fn wait_synced(&self) -> Result<(), String> {
        // waiting one store after another costs no more than the slowest one
        for st in &self.jobs {
            ready(st.clone()).await?;
        }
        for st in &self.pods {
            ready(st.clone()).await?;
        }
        for st in &self.pdbs {
            ready(st.clone()).await?;
        }
        ready(self.nodes.clone()).await?;
        ready(self.namespaces.clone()).await?;
        for stores in self
            .muster
            .values()
            .chain(self.workloads.values())
            .chain(self.related.values())
        {
            for st in stores {
                ready(st.clone()).await?;
            }
        }
        Ok(())
    }

    /// Stops every reflector.
    pub(crate) fn stop(&self) {
        for t in self.tasks.iter() {
            t.abort();
        }
    }

    /// Cached Jobs.
    pub(crate) fn jobs(&self) -> Vec<Arc<Job>> {
        self.jobs.iter().flat_map(|s| s.state()).collect()
    }

    /// Cached Pods.
    pub(crate) fn pods(&self) -> Vec<Arc<CachedPod>> {
        self.pods.iter().flat_map(|s| s.state()).collect()
    }

    /// Cached PodDisruptionBudgets.
    pub(crate) fn pdbs(&self) -> Vec<Arc<PodDisruptionBudget>> {
        self.pdbs.iter().flat_map(|s| s.state()).collect()
    }

    /// Cached Nodes.
    pub(crate) fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.state()
    }

    /// Cached Namespaces.
    pub(crate) fn namespaces(&self) -> Vec<Arc<Namespace>> {
        self.namespaces.state()
    }

    /// Cached objects the adapters read besides their kinds' own, by CRD name.
    pub(crate) fn related(&self) -> BTreeMap<String, Vec<Arc<DynamicObject>>> {
        self.related
            .iter()
            .map(|(k, stores)| (k.clone(), stores.iter().flat_map(|s| s.state()).collect()))
            .collect()
    }

    /// Cached objects of one custom workload kind.
    pub(crate) fn workloads(&self, kind: WorkloadKind) -> Vec<Arc<DynamicObject>> {
        self.workloads
            .get(&kind)
            .map(|stores| stores.iter().flat_map(|s| s.state()).collect())
            .unwrap_or_default()
    }

    /// Cached objects of one muster kind.
    pub(crate) fn objects(&self, kind: Kind) -> Vec<Arc<DynamicObject>> {
        self.muster
            .get(&kind)
            .map(|stores| stores.iter().flat_map(|s| s.state()).collect())
            .unwrap_or_default()
    }
}

async fn ready<K>(store: Store<K>) -> Result<(), String>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store
        .wait_until_ready()
        .await
        .map_err(|e| format!("{}: {e}", std::any::type_name::<K>()))
}

fn namespaced<K>(client: &Client, ns: &Option<String>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn typed<K>(api: Api<K>, changes: &Arc<Notify>, tasks: &mut Vec<JoinHandle<()>>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    typed_slim(api, changes, tasks, |_| {})
}

/// A typed cache whose objects pass through `slim` before they are stored.
fn typed_slim<K>(
    api: Api<K>,
    changes: &Arc<Notify>,
    tasks: &mut Vec<JoinHandle<()>>,
    slim: fn(&mut K),
) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let writer = reflector::store::Writer::<K>::default();
    let store = writer.as_reader();
    tasks.push(spawn_watch(api, writer, changes.clone(), slim));
    store
}

/// The caches of `ar`'s objects: one per scope for a namespaced kind, one
/// cluster-wide for a cluster-scoped one.
fn dynamic_stores(
    client: &Client,
    scopes: &[Option<String>],
    ar: kube::core::ApiResource,
    namespaced: bool,
    changes: &Arc<Notify>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Vec<Store<DynamicObject>> {
    if !namespaced {
        return vec![dynamic(
            Api::all_with(client.clone(), &ar),
            ar,
            changes,
            tasks,
        )];
    }
    scopes
        .iter()
        .map(|ns| {
            let api = match ns {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
                None => Api::all_with(client.clone(), &ar),
            };
            dynamic(api, ar.clone(), changes, tasks)
        })
        .collect()
}

fn dynamic(
    api: Api<DynamicObject>,
    ar: kube::core::ApiResource,
    changes: &Arc<Notify>,
    tasks: &mut Vec<JoinHandle<()>>,
) -> Store<DynamicObject> {
    let writer = reflector::store::Writer::<DynamicObject>::new(ar);
    let store = writer.as_reader();
    tasks.push(spawn_watch(api, writer, changes.clone(), |_| {}));
    store
}

fn spawn_watch<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    changes: Arc<Notify>,
    slim: fn(&mut K),
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let kind = std::any::type_name::<K>();
    tokio::spawn(async move {
        let stream = reflector::reflector(
            writer,
            watcher(api, watcher::Config::default())
                .default_backoff()
                // server-side-apply bookkeeping is often the largest part of an
                // object and nothing here reads it: never keep it in the caches
                .modify(move |obj: &mut K| {
                    obj.meta_mut().managed_fields = None;
                    slim(obj);
                }),
        );
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => changes.notify_one(),
                Err(e) => tracing::warn!(
                    kind,
                    error = %crate::controller::observe::crd_check::short_watch_error(&e),
                    "watch error; retrying"
                ),
            }
        }
    })
}
