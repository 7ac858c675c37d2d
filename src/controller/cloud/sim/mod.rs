//! The simulated cloud for the controller (`--cloud sim`): a
//! [`CloudProvider`] whose machines are Node objects in the cluster itself,
//! in the manner of Karpenter's kwok provider (`kubernetes-sigs/karpenter`
//! `kwok/cloudprovider/cloudprovider.go`: create a Node where a kubelet
//! would have registered one, get and list Nodes by provider id, delete the
//! Node to terminate).
//!
//! Offerings, prices and boot times are the simulated-cloud crate's
//! (`muster-provider-sim`: the built-in catalog, boot ranges per instance
//! family drawn from a seed and the machine's name), relabelled as the
//! `sim` provider. Launching creates the Node with the offering's capacity
//! and allocatable, the launch's labels and taints and `spec.providerID`
//! `sim://ZONE/NODE`, not Ready; once its boot time has passed a background
//! task marks it Ready. Terminating deletes the Node.
//!
//! All state lives in the API server: the Node is named after the
//! idempotency key and carries it as an annotation, so a launch repeated
//! after a crash (or by another replica) finds the first one's Node instead
//! of creating a second, and the boot's end is an annotation any process
//! can act on.

mod node;

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use muster_crds::nodeclass::SimNodeClass;
use muster_planner::{Dur, Offering, PoolRequirements, Provider, Time};
use muster_provider_api::{
    CloudProvider, Instance, Interruption, LaunchRequest, ProviderError, Resolution, tags,
};
use muster_provider_sim::{BootRange, CloudBehaviour, LaunchError, OfferingRule, SimCloud};

use crate::controller::base::api::{is_already_exists, is_not_found, provider_error};
use crate::controller::base::time;

use node::{NODE_CLASS_LABEL, PROVIDER_PREFIX};

/// How often booting machines are checked for the end of their boot.
const BOOT_POLL: Duration = Duration::from_secs(1);

/// Seed of the simulated draws (boot times); fixed, so a machine's boot
/// time depends on its name alone.
const SEED: u64 = 1;

/// The simulated cloud of one NodeClass.
pub struct SimNodes {
    inner: Arc<Inner>,
}

struct Inner {
    nodes: Api<Node>,
    node_class: String,
    cloud: Mutex<SimCloud>,
    ticker: Mutex<bool>,
}

/// Why a `sim` NodeClass cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimSetupError {
    /// The `sim` block does not read as `SimNodeClass`.
    #[error("spec.sim: {0}")]
    Spec(String),
    /// The region selects none of the catalog's shapes.
    #[error(
        "spec.sim.region {0}: the built-in catalog has no shapes there (us-east-1, us-central1)"
    )]
    NoShapes(String),
}

/// The built-in catalog's offerings a `sim` block sells, as the `sim`
/// provider's, with the boot time it sets.
pub fn catalog(spec: &SimNodeClass, node_class: &str) -> Result<SimCloud, SimSetupError> {
    let offerings: Vec<Offering> = muster_provider_sim::builtin_offerings()
        .into_iter()
        .filter(|o| spec.region.as_ref().is_none_or(|r| &o.region == r))
        .map(|mut o| {
            o.provider = Provider::Sim;
            o.node_class = node_class.to_string();
            o
        })
        .collect();
    if offerings.is_empty() {
        return Err(SimSetupError::NoShapes(
            spec.region.clone().unwrap_or_default(),
        ));
    }
    let mut behaviour = CloudBehaviour {
        // interruptions are not simulated here: a spot machine lives until terminated
        spot_interruption_rate_per_hour: 0.0,
        ..CloudBehaviour::default()
    };
    if let Some(secs) = spec.boot_seconds {
        let d = Dur::secs(u64::try_from(secs).unwrap_or(0));
        behaviour.rules.push(OfferingRule {
            pattern: "*".into(),
            boot: Some(BootRange { min: d, max: d }),
            ..OfferingRule::default()
        });
    }
    SimCloud::new(offerings, &behaviour, SEED).map_err(|e| SimSetupError::Spec(e.to_string()))
}

impl SimNodes {
    /// The simulated cloud of the NodeClass `node_class` whose spec is
    /// `spec` (the whole NodeClass spec; its `sim` block is read).
    pub fn new(
        client: kube::Client,
        node_class: &str,
        spec: &serde_json::Value,
    ) -> Result<SimNodes, SimSetupError> {
        let sim: SimNodeClass =
            serde_json::from_value(spec.get("sim").cloned().unwrap_or(serde_json::Value::Null))
                .map_err(|e| SimSetupError::Spec(e.to_string()))?;
        let cloud = catalog(&sim, node_class)?;
        Ok(SimNodes {
            inner: Arc::new(Inner {
                nodes: Api::all(client),
                node_class: node_class.to_string(),
                cloud: Mutex::new(cloud),
                ticker: Mutex::new(false),
            }),
        })
    }

    /// Starts the task that ends boots, once; it stops when the provider is
    /// dropped. Started by the calls a controller makes (never by listing
    /// offerings, so `muster explain` writes nothing).
    fn start_ticker(&self) {
        let mut started = self.inner.ticker.lock().unwrap_or_else(|e| e.into_inner());
        if *started || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        *started = true;
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(BOOT_POLL).await;
                let Some(inner) = weak.upgrade() else { break };
                if let Err(e) = inner.end_boots(time::now()).await {
                    tracing::debug!(node_class = %inner.node_class, error = %e, "simulated boots");
                }
            }
        });
    }

    /// Marks Ready every booting machine of this NodeClass whose boot has
    /// ended by `now`. Returns how many.
    pub async fn end_boots(&self, now: Time) -> Result<usize, ProviderError> {
        self.inner.end_boots(now).await
    }
}

impl Inner {
    async fn end_boots(&self, now: Time) -> Result<usize, ProviderError> {
        let lp = ListParams::default().labels(&format!("{NODE_CLASS_LABEL}={}", self.node_class));
        let list = self.nodes.list(&lp).await.map_err(api_error)?;
        let mut done = 0;
        for n in list.items.iter().filter(|n| node::boot_done(n, now)) {
            let name = kube::ResourceExt::name_any(n);
            let patch = node::ready_patch(now);
            match self
                .nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => done += 1,
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(api_error(e)),
            }
        }
        Ok(done)
    }

    /// Writes the booting status of a Node that has none (a server that
    /// drops status on create; a crash between create and this write).
    async fn ensure_status(&self, n: &Node, offering: &Offering) -> Result<(), ProviderError> {
        if !node::lacks_status(n) {
            return Ok(());
        }
        let name = kube::ResourceExt::name_any(n);
        let mut status = node::booting_status(offering, time::now());
        if let Some(existing) = n.status.as_ref().and_then(|s| s.conditions.clone()) {
            status.conditions = Some(existing);
        }
        let patch = serde_json::json!({ "status": status });
        self.nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_error)?;
        Ok(())
    }

    fn offering(&self, request: &LaunchRequest) -> Option<Offering> {
        let cloud = self.cloud.lock().unwrap_or_else(|e| e.into_inner());
        let idx = cloud.index_of(&request.offering)?;
        cloud.offering(idx).cloned()
    }
}

/// A kube API error as a provider error (`base::api::provider_error`).
fn api_error(e: kube::Error) -> ProviderError {
    provider_error("Kubernetes API", e)
}

#[async_trait::async_trait]
impl CloudProvider for SimNodes {
    fn provider(&self) -> Provider {
        Provider::Sim
    }

    async fn resolve(&self) -> Result<Resolution, ProviderError> {
        let cloud = self.inner.cloud.lock().unwrap_or_else(|e| e.into_inner());
        let mut zones: Vec<String> = cloud.offerings().iter().map(|o| o.zone.clone()).collect();
        zones.sort();
        zones.dedup();
        Ok(Resolution {
            zones,
            ..Resolution::default()
        })
    }

    async fn offerings(
        &self,
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        let cloud = self.inner.cloud.lock().unwrap_or_else(|e| e.into_inner());
        Ok(cloud
            .offerings()
            .iter()
            .filter(|o| requirements.admits(o))
            .cloned()
            .collect())
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        self.start_ticker();
        let inner = &self.inner;
        let offering = inner
            .offering(request)
            .ok_or_else(|| ProviderError::Permanent {
                message: format!("the simulated cloud does not sell {}", request.offering),
            })?;
        let name = node::node_name(&request.idempotency_key);
        // a launch with this key made before (before a crash, by another
        // replica) is this launch
        if let Some(n) = inner.nodes.get_opt(&name).await.map_err(api_error)? {
            return match node::key_of(&n) {
                Some(k) if k == request.idempotency_key => {
                    inner.ensure_status(&n, &offering).await?;
                    Ok(node::instance(&n))
                }
                _ => Err(ProviderError::Permanent {
                    message: format!(
                        "Node {name} exists and was not launched with idempotency key {}",
                        request.idempotency_key
                    ),
                }),
            };
        }
        let now = time::now();
        let plan = {
            let mut cloud = inner.cloud.lock().unwrap_or_else(|e| e.into_inner());
            cloud.launch(&request.offering, &name, now)
        }
        .map_err(|e| match e {
            LaunchError::InsufficientCapacity(offering) => ProviderError::InsufficientCapacity {
                offering,
                message: "no capacity (simulated)".into(),
            },
            LaunchError::UnknownOffering(o) => ProviderError::Permanent {
                message: format!("the simulated cloud does not sell {o}"),
            },
        })?;
        let want = node::new_node(
            request,
            &offering,
            &inner.node_class,
            now,
            now + plan.ready_after,
        );
        let created = match inner.nodes.create(&PostParams::default(), &want).await {
            Ok(n) => n,
            Err(e) if is_already_exists(&e) => {
                let n = inner.nodes.get(&name).await.map_err(api_error)?;
                if node::key_of(&n) != Some(request.idempotency_key.as_str()) {
                    return Err(ProviderError::Permanent {
                        message: format!("Node {name} exists under another idempotency key"),
                    });
                }
                n
            }
            Err(e) => return Err(api_error(e)),
        };
        inner.ensure_status(&created, &offering).await?;
        Ok(node::instance(&created))
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError> {
        self.start_ticker();
        let not_found = || ProviderError::NotFound {
            what: provider_id.to_string(),
        };
        let name = node::node_of(provider_id).ok_or_else(not_found)?;
        let n = self
            .inner
            .nodes
            .get_opt(name)
            .await
            .map_err(api_error)?
            .ok_or_else(not_found)?;
        if n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) != Some(provider_id) {
            return Err(not_found());
        }
        Ok(node::instance(&n))
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError> {
        self.start_ticker();
        let Some(name) = node::node_of(provider_id) else {
            return Ok(());
        };
        match self
            .inner
            .nodes
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(api_error(e)),
        }
        // no capacity limits are simulated here, so nothing else to free
        Ok(())
    }

    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError> {
        self.start_ticker();
        let lp = ListParams::default().labels(&format!("{}={cluster}", tags::CLUSTER));
        let list = self.inner.nodes.list(&lp).await.map_err(api_error)?;
        Ok(list
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|p| p.starts_with(PROVIDER_PREFIX))
            })
            .map(node::instance)
            .collect())
    }

    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError> {
        // polled on every cycle: after a restart this starts the boot task
        self.start_ticker();
        Ok(Vec::new())
    }
}
