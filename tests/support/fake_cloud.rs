//! The controller tests' cloud: the simulated cloud of `muster-provider-sim`
//! (idempotent by key, tagged by cluster, injectable capacity shortages and
//! interruptions: what the provider conformance suite checks of every
//! provider) with test controls layered on top: an optional delay before
//! every launch or `resolve` answers (a slow cloud), hangs to simulate a
//! controller killed mid-launch, a failing `resolve`, offerings listed as
//! unavailable,
//! and a log of every call (with how many PoolNodes existed in the API at
//! the time of each launch call).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use muster::controller::{ProviderFactory, ProviderSetupError};
use muster_planner::{
    CapacityType, Dur, GpuModel, Offering, PoolRequirements, Price, Provider, Resources, Time,
};
use muster_provider_api::{
    CloudProvider, Instance, InstanceState, Interruption, LaunchRequest, ProviderError, Resolution,
};
use muster_provider_sim::behaviour::{BootRange, CloudBehaviour, OfferingRule};
use muster_provider_sim::cloud::SimCloud;
use muster_provider_sim::provider::SimProvider;

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
    /// What each launch asked for, by idempotency key, with the instance's id.
    launched: BTreeMap<String, (LaunchRequest, String)>,
    calls: Vec<Call>,
    hang: Option<Hang>,
    unresolvable: Option<String>,
    unavailable: BTreeMap<String, Time>,
    launch_delay: Option<std::time::Duration>,
    resolve_delay: Option<std::time::Duration>,
    /// Capacity types the account refuses, with the cloud's words.
    refused: BTreeMap<CapacityType, String>,
    /// The network place `describe` reports for every instance.
    network: Vec<String>,
}

/// The fake cloud: the simulated cloud (`muster_provider_sim::SimProvider`,
/// on the wall clock, machines booting in a second) with a call log, hangs,
/// a launch delay and injected failures on top.
pub struct FakeCloud {
    sim: SimProvider,
    state: Mutex<State>,
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    resolving: Arc<std::sync::atomic::AtomicUsize>,
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
        reservation: None,
        flex_start: None,
        labels: [(
            muster_planner::labels::ARCH.to_string(),
            muster_planner::labels::AMD64.to_string(),
        )]
        .into(),
    };
    vec![
        offering("fake-8gpu", 8, "A100", 10.0),
        offering("fake-1gpu", 1, "L4", 1.0),
    ]
}

/// GCE's provider ids (`gce://PROJECT/ZONE/NAME`), as the emulator's Nodes carry.
fn gce_provider_id(request: &LaunchRequest) -> String {
    format!(
        "gce://test-project/{}/{}",
        request.offering.zone, request.name
    )
}

/// The simulated cloud never waits: its futures are ready at once.
fn ready<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()))
    {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("a simulated cloud call was not ready"),
    }
}

impl FakeCloud {
    /// A cloud; with a client it records how many PoolNodes exist at each launch.
    pub fn new(client: Option<kube::Client>) -> Arc<FakeCloud> {
        FakeCloud::with_catalog(client, catalog())
    }

    /// [`FakeCloud::new`] selling `catalog` instead of [`catalog`]'s.
    pub fn with_catalog(client: Option<kube::Client>, catalog: Vec<Offering>) -> Arc<FakeCloud> {
        // machines boot in a second of the wall clock the cloud keeps
        let behaviour = CloudBehaviour {
            rules: vec![OfferingRule {
                pattern: "*".into(),
                boot: Some(BootRange {
                    min: Dur::secs(1),
                    max: Dur::secs(1),
                }),
                ..OfferingRule::default()
            }],
            ..CloudBehaviour::default()
        };
        let cloud = SimCloud::new(catalog.clone(), &behaviour, 1).expect("the fake catalog");
        let sim = SimProvider::new(cloud).with_provider_ids(gce_provider_id);
        Arc::new(FakeCloud {
            sim,
            state: Mutex::new(State::default()),
            in_flight: Arc::default(),
            resolving: Arc::default(),
            catalog,
            client,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the simulated cloud's clock to the wall clock (never back).
    fn tick(&self) {
        self.sim.set_now(muster::controller::base::time::now());
    }

    /// Makes `describe` report every instance at `network` (broadest layer
    /// first), as a cloud that knows its instances' network topology does.
    pub fn set_network(&self, network: &[&str]) {
        self.lock().network = network.iter().map(|s| s.to_string()).collect();
    }

    /// Makes launch calls hang.
    pub fn set_hang(&self, hang: Hang) {
        self.lock().hang = Some(hang);
    }

    /// Makes every launch call take `delay` before the cloud answers (a
    /// slow cloud, such as a GCP insert waiting on its zone operation).
    pub fn set_launch_delay(&self, delay: std::time::Duration) {
        self.lock().launch_delay = Some(delay);
    }

    /// Makes every `resolve` call take `delay` before the cloud answers (a
    /// slow cloud, such as describe calls retried under throttling).
    pub fn set_resolve_delay(&self, delay: std::time::Duration) {
        self.lock().resolve_delay = Some(delay);
    }

    /// `resolve` calls the cloud has not answered yet.
    pub fn resolves_in_flight(&self) -> usize {
        self.resolving.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Launch calls that have been made and not answered yet.
    pub fn launches_in_flight(&self) -> usize {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Offerings of this instance type are listed as unavailable until
    /// `until` (a recent capacity error the cloud reports).
    pub fn unavailable(&self, instance_type: &str, until: Time) {
        self.lock()
            .unavailable
            .insert(instance_type.to_string(), until);
    }

    /// Launches of `capacity_type` fail as EC2 fails every spot launch of an
    /// account without its spot service-linked role, by a caller that may
    /// not create it (`AuthFailure.ServiceLinkedRoleCreationNotPermitted`;
    /// the AWS provider's moto launcher enforces the same rule with EC2's
    /// own code, `providers/aws/tests/moto_server.py`): typed, whatever the
    /// offering, until [`FakeCloud::permit`].
    pub fn refuse(&self, capacity_type: CapacityType, message: &str) {
        self.lock()
            .refused
            .insert(capacity_type, message.to_string());
    }

    /// The operator did the step: `capacity_type` launches work again.
    pub fn permit(&self, capacity_type: CapacityType) {
        self.lock().refused.remove(&capacity_type);
    }

    /// Launches of this instance type fail with insufficient capacity.
    pub fn insufficient(&self, instance_type: &str) {
        for o in self
            .catalog
            .iter()
            .filter(|o| o.instance_type == instance_type)
        {
            self.sim.exhaust(o.key());
        }
    }

    /// Creates an instance for `cluster` as if launched for a PoolNode
    /// `name` at `launched_at`, without any PoolNode (an orphan when none
    /// by that name exists). Its machine never registers a Node. Returns its
    /// provider id.
    pub fn plant(&self, name: &str, cluster: &str, launched_at: Time) -> String {
        let request = LaunchRequest {
            name: name.into(),
            idempotency_key: format!("planted-{name}"),
            offering: self.catalog[0].key(),
            pool: "a100".into(),
            cluster: cluster.into(),
            gang: None,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            tags: BTreeMap::new(),
            placement_group: None,
            grant: None,
        };
        // launched then, booted since
        self.sim.set_now(launched_at);
        let instance = ready(self.sim.launch(&request)).expect("a planted launch");
        self.sim.set_now(launched_at + Dur::secs(2));
        self.tick();
        self.lock().launched.insert(
            request.idempotency_key.clone(),
            (request, instance.provider_id.clone()),
        );
        instance.provider_id
    }

    /// Makes `resolve` fail: the named selector matches nothing.
    pub fn unresolvable(&self, selector: &str) {
        self.lock().unresolvable = Some(selector.to_string());
    }

    /// Queues an interruption notice (returned once by `interruptions`).
    pub fn interrupt(&self, provider_id: &str, kind: muster_provider_api::InterruptionKind) {
        self.sim.interrupt(provider_id, kind);
    }

    /// The cloud ends an instance on its own (a host failure, a retirement,
    /// someone terminating it in the console): not a call of muster's, so
    /// not recorded; the emulator's cloud node controller deletes its Node.
    pub fn fail(&self, provider_id: &str) {
        self.tick();
        let _ = ready(self.sim.terminate(provider_id));
    }

    /// The state of the instance with this provider id.
    pub fn state(&self, provider_id: &str) -> Option<InstanceState> {
        self.tick();
        ready(self.sim.describe(provider_id)).ok().map(|i| i.state)
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
        self.tick();
        let launched = self.lock().launched.clone();
        launched
            .into_values()
            .filter_map(|(request, provider_id)| {
                let instance = ready(self.sim.describe(&provider_id)).ok()?;
                Some(FakeInstance { instance, request })
            })
            .collect()
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
        let _in_flight = InFlight::start(&self.resolving);
        let delay = self.lock().resolve_delay;
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(what) = self.lock().unresolvable.clone() {
            return Err(ProviderError::NotFound { what });
        }
        self.sim.resolve().await
    }

    async fn offerings(
        &self,
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        let unavailable = self.lock().unavailable.clone();
        let mut list = self.sim.offerings(requirements).await?;
        for o in &mut list {
            o.unavailable_until = unavailable.get(&o.instance_type).copied();
        }
        Ok(list)
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        let _in_flight = InFlight::start(&self.in_flight);
        let seen = self.poolnodes().await;
        let (hang, delay) = {
            let mut st = self.lock();
            st.calls.push(Call {
                op: "launch",
                what: request.idempotency_key.clone(),
                poolnodes_seen: seen,
            });
            (st.hang.unwrap_or(Hang::Never), st.launch_delay)
        };
        if hang == Hang::BeforeCreate {
            futures::future::pending::<()>().await;
        }
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        self.tick();
        let refused = self
            .lock()
            .refused
            .get(&request.offering.capacity_type)
            .cloned();
        if let Some(message) = refused {
            return Err(ProviderError::CapacityTypeNotPermitted {
                capacity_type: request.offering.capacity_type,
                message,
            });
        }
        let result = self.sim.launch(request).await;
        if let Ok(instance) = &result {
            self.lock().launched.insert(
                request.idempotency_key.clone(),
                (request.clone(), instance.provider_id.clone()),
            );
        }
        if hang == Hang::AfterCreate {
            futures::future::pending::<()>().await;
        }
        result
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError> {
        self.tick();
        let mut instance = self.sim.describe(provider_id).await?;
        let network = self.lock().network.clone();
        if !network.is_empty() {
            instance.network = network;
        }
        Ok(instance)
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError> {
        self.lock().calls.push(Call {
            op: "terminate",
            what: provider_id.into(),
            poolnodes_seen: None,
        });
        self.sim.terminate(provider_id).await
    }

    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError> {
        self.tick();
        self.sim.list(cluster).await
    }

    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError> {
        self.tick();
        self.sim.interruptions().await
    }
}

/// Counts a call in flight until it is answered or dropped.
struct InFlight(Arc<std::sync::atomic::AtomicUsize>);

impl InFlight {
    fn start(n: &Arc<std::sync::atomic::AtomicUsize>) -> InFlight {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(n.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A factory handing out the fake cloud named for a NodeClass, and
/// `default` for every other.
pub struct ByClassFactory {
    /// The cloud of every NodeClass not named.
    pub default: Arc<FakeCloud>,
    /// NodeClass name → its cloud.
    pub classes: BTreeMap<String, Arc<FakeCloud>>,
}

#[async_trait]
impl ProviderFactory for ByClassFactory {
    async fn provider(
        &self,
        node_class: &str,
        _spec: &serde_json::Value,
    ) -> Result<Arc<dyn CloudProvider>, ProviderSetupError> {
        Ok(self
            .classes
            .get(node_class)
            .unwrap_or(&self.default)
            .clone())
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
