//! A tiny in-process cloud implementing `CloudProvider`: idempotent by key,
//! injectable insufficient-capacity errors, optional hangs to simulate a
//! controller killed mid-launch, and a log of every call (with how many
//! PoolNodes existed in the API at the time of each launch call).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use muster::controller::{ProviderFactory, ProviderSetupError};
use muster_planner::{
    CapacityType, GpuModel, Offering, PoolRequirements, Price, Provider, Resources, Time,
};
use muster_provider_api::{
    CloudProvider, Instance, InstanceState, Interruption, LaunchRequest, ProviderError, Resolution,
};

/// When a launch call hangs (never returns), to simulate a crash mid-call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hang {
    /// Launches return normally.
    Never,
    /// The call hangs before the cloud creates anything.
    BeforeCreate,
    /// The cloud creates the instance, then the call hangs.
    AfterCreate,
}

/// One call made to the cloud.
#[derive(Debug, Clone)]
pub struct Call {
    /// `launch` or `terminate`.
    pub op: &'static str,
    /// Idempotency key or provider id.
    pub what: String,
    /// PoolNodes in the API server when a launch call came in.
    pub poolnodes_seen: Option<usize>,
}

/// A launched machine and the request it came from.
#[derive(Debug, Clone)]
pub struct FakeInstance {
    /// The cloud's view.
    pub instance: Instance,
    /// What was asked.
    pub request: LaunchRequest,
}

#[derive(Default)]
struct State {
    instances: BTreeMap<String, FakeInstance>,
    calls: Vec<Call>,
    ice: BTreeSet<String>,
    hang: Option<Hang>,
    notices: Vec<Interruption>,
    unresolvable: Option<String>,
    unavailable: BTreeMap<String, Time>,
}

/// The fake cloud.
pub struct FakeCloud {
    state: Mutex<State>,
    catalog: Vec<Offering>,
    client: Option<kube::Client>,
}

/// An 8 × A100 offering (`fake-8gpu`, zone-a, on-demand, $10/h) and a 1 × L4 one.
pub fn catalog() -> Vec<Offering> {
    let offering = |instance_type: &str, gpus: u32, model: &str, price: f64| Offering {
        provider: Provider::Gcp,
        node_class: String::new(),
        region: "us-central1".into(),
        zone: "us-central1-a".into(),
        instance_type: instance_type.into(),
        capacity_type: CapacityType::OnDemand,
        price: Price::from_usd(price),
        gpu_model: Some(GpuModel::new(model)),
        gpu_count: gpus,
        gpu_memory_mib: 40960,
        resources: Resources::new(96_000, 1 << 40, gpus),
        available: true,
        unavailable_until: None,
        interruption_rate_per_hour: 0.0,
        placement_groups: false,
        boot_secs: 60,
    };
    vec![
        offering("fake-8gpu", 8, "A100", 10.0),
        offering("fake-1gpu", 1, "L4", 1.0),
    ]
}

impl FakeCloud {
    /// A cloud; with a client it records how many PoolNodes exist at each launch.
    pub fn new(client: Option<kube::Client>) -> Arc<FakeCloud> {
        Arc::new(FakeCloud {
            state: Mutex::new(State::default()),
            catalog: catalog(),
            client,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes launch calls hang.
    pub fn set_hang(&self, hang: Hang) {
        self.lock().hang = Some(hang);
    }

    /// Offerings of this instance type are listed as unavailable until
    /// `until` (a recent capacity error the cloud reports).
    pub fn unavailable(&self, instance_type: &str, until: Time) {
        self.lock()
            .unavailable
            .insert(instance_type.to_string(), until);
    }

    /// Launches of this instance type fail with insufficient capacity.
    pub fn insufficient(&self, instance_type: &str) {
        self.lock().ice.insert(instance_type.to_string());
    }

    /// Creates an instance for `cluster` as if launched for a PoolNode
    /// `name` at `launched_at`, without any PoolNode (an orphan when none
    /// by that name exists). Its machine never registers a Node. Returns its
    /// provider id.
    pub fn plant(&self, name: &str, cluster: &str, launched_at: Time) -> String {
        let offering = self.catalog[0].key();
        let provider_id = format!("gce://test-project/{}/{name}", offering.zone);
        let request = LaunchRequest {
            name: name.into(),
            idempotency_key: format!("planted-{name}"),
            offering: offering.clone(),
            pool: "a100".into(),
            cluster: cluster.into(),
            gang: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            tags: BTreeMap::new(),
        };
        let instance = Instance {
            provider_id: provider_id.clone(),
            offering,
            state: InstanceState::Running,
            launched_at,
            pool_node: Some(name.into()),
            tags: BTreeMap::new(),
        };
        self.lock().instances.insert(
            request.idempotency_key.clone(),
            FakeInstance { instance, request },
        );
        provider_id
    }

    /// Makes `resolve` fail: the named selector matches nothing.
    pub fn unresolvable(&self, selector: &str) {
        self.lock().unresolvable = Some(selector.to_string());
    }

    /// Queues an interruption notice (returned once by `interruptions`).
    pub fn interrupt(&self, provider_id: &str, kind: muster_provider_api::InterruptionKind) {
        self.lock().notices.push(Interruption {
            provider_id: provider_id.into(),
            kind,
            at: Time(0),
        });
    }

    /// The state of the instance with this provider id.
    pub fn state(&self, provider_id: &str) -> Option<InstanceState> {
        self.lock()
            .instances
            .values()
            .find(|i| i.instance.provider_id == provider_id)
            .map(|i| i.instance.state)
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Launch calls so far.
    pub fn launch_calls(&self) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.op == "launch")
            .collect()
    }

    /// Instances ever created (terminated ones included).
    pub fn instances(&self) -> Vec<FakeInstance> {
        self.lock().instances.values().cloned().collect()
    }

    /// The offering of an instance type.
    pub fn offering(&self, instance_type: &str) -> Option<Offering> {
        self.catalog
            .iter()
            .find(|o| o.instance_type == instance_type)
            .cloned()
    }

    async fn poolnodes(&self) -> Option<usize> {
        let client = self.client.clone()?;
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("muster.dev", "v1alpha1", "PoolNode"),
            "poolnodes",
        );
        let api: Api<DynamicObject> = Api::all_with(client, &ar);
        api.list(&ListParams::default())
            .await
            .ok()
            .map(|l| l.items.len())
    }
}

#[async_trait]
impl CloudProvider for FakeCloud {
    fn provider(&self) -> Provider {
        Provider::Gcp
    }

    async fn resolve(&self) -> Result<Resolution, ProviderError> {
        if let Some(what) = self.lock().unresolvable.clone() {
            return Err(ProviderError::NotFound { what });
        }
        Ok(Resolution {
            zones: vec!["zone-a".into()],
            ..Resolution::default()
        })
    }

    async fn offerings(
        &self,
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        let unavailable = self.lock().unavailable.clone();
        Ok(self
            .catalog
            .iter()
            .filter(|o| {
                requirements.instance_types.is_empty()
                    || requirements.instance_types.contains(&o.instance_type)
            })
            .cloned()
            .map(|mut o| {
                o.unavailable_until = unavailable.get(&o.instance_type).copied();
                o
            })
            .collect())
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        let seen = self.poolnodes().await;
        let hang = {
            let mut st = self.lock();
            st.calls.push(Call {
                op: "launch",
                what: request.idempotency_key.clone(),
                poolnodes_seen: seen,
            });
            st.hang.unwrap_or(Hang::Never)
        };
        if hang == Hang::BeforeCreate {
            futures::future::pending::<()>().await;
        }
        let result = {
            let mut st = self.lock();
            if let Some(existing) = st.instances.get(&request.idempotency_key) {
                Ok(existing.instance.clone())
            } else if st.ice.contains(&request.offering.instance_type) {
                Err(ProviderError::InsufficientCapacity {
                    offering: request.offering.clone(),
                    message: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
                })
            } else {
                let instance = Instance {
                    provider_id: format!(
                        "gce://test-project/{}/{}",
                        request.offering.zone, request.name
                    ),
                    offering: request.offering.clone(),
                    state: InstanceState::Running,
                    launched_at: Time(0),
                    pool_node: Some(request.name.clone()),
                    tags: request.tags.clone(),
                };
                st.instances.insert(
                    request.idempotency_key.clone(),
                    FakeInstance {
                        instance: instance.clone(),
                        request: request.clone(),
                    },
                );
                Ok(instance)
            }
        };
        if hang == Hang::AfterCreate {
            futures::future::pending::<()>().await;
        }
        result
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError> {
        self.lock()
            .instances
            .values()
            .find(|i| i.instance.provider_id == provider_id)
            .map(|i| i.instance.clone())
            .ok_or_else(|| ProviderError::NotFound {
                what: provider_id.into(),
            })
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError> {
        let mut st = self.lock();
        st.calls.push(Call {
            op: "terminate",
            what: provider_id.into(),
            poolnodes_seen: None,
        });
        for i in st.instances.values_mut() {
            if i.instance.provider_id == provider_id {
                i.instance.state = InstanceState::Terminated;
            }
        }
        Ok(())
    }

    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError> {
        Ok(self
            .lock()
            .instances
            .values()
            .filter(|i| {
                i.request.cluster == cluster && i.instance.state != InstanceState::Terminated
            })
            .map(|i| i.instance.clone())
            .collect())
    }

    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError> {
        Ok(std::mem::take(&mut self.lock().notices))
    }
}

/// A factory handing out one fake cloud for every NodeClass.
pub struct FakeFactory(pub Arc<FakeCloud>);

#[async_trait]
impl ProviderFactory for FakeFactory {
    async fn provider(
        &self,
        _node_class: &str,
        _spec: &serde_json::Value,
    ) -> Result<Arc<dyn CloudProvider>, ProviderSetupError> {
        Ok(self.0.clone())
    }
}
