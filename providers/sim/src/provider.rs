//! [`SimProvider`]: the simulated cloud behind the
//! [`muster_provider_api::CloudProvider`] trait, in memory, so the controller
//! can run with no cloud. Time is virtual: the owner moves it with
//! [`SimProvider::set_now`]. Launches are idempotent by key; instances boot
//! (`Pending` → `Running`) on the cloud's boot plan; spot interruptions
//! arrive from the plan's schedule; machines of a Capacity Block are
//! terminated 30 minutes before its end. Tests may also take an offering's
//! capacity away ([`SimProvider::exhaust`]) and reclaim a machine
//! ([`SimProvider::interrupt`]) at any moment.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use muster_planner::{Offering, OfferingKey, PoolRequirements, Provider, Time};
use muster_provider_api::{
    CloudProvider, Instance, InstanceState, Interruption, InterruptionKind, LaunchRequest,
    ProviderError, Resolution,
};

use crate::cloud::{LaunchError, SimCloud};

/// Tag naming the owning cluster.
pub const CLUSTER_TAG: &str = muster_provider_api::tags::CLUSTER;

#[derive(Debug)]
struct Machine {
    instance: Instance,
    ready_at: Time,
    interrupt_at: Option<Time>,
    /// When the cloud takes it back with its reservation (a Capacity
    /// Block's end less 30 minutes).
    reclaim_at: Option<Time>,
    interruption_delivered: bool,
    terminated: bool,
}

#[derive(Debug)]
struct Inner {
    cloud: SimCloud,
    now: Time,
    by_key: BTreeMap<String, String>,
    machines: BTreeMap<String, Machine>,
    exhausted: BTreeSet<OfferingKey>,
    notices: Vec<Interruption>,
}

/// How a provider id is made from a launch request.
pub type ProviderIdFn = fn(&LaunchRequest) -> String;

/// `sim:///ZONE/KEY`, the simulated cloud's own provider ids.
pub fn sim_provider_id(request: &LaunchRequest) -> String {
    format!(
        "sim:///{}/{}",
        request.offering.zone, request.idempotency_key
    )
}

/// An in-memory simulated cloud provider.
#[derive(Debug)]
pub struct SimProvider {
    inner: Mutex<Inner>,
    provider_id: ProviderIdFn,
}

impl SimProvider {
    /// A provider over a simulated cloud, at time zero.
    pub fn new(cloud: SimCloud) -> SimProvider {
        SimProvider {
            inner: Mutex::new(Inner {
                cloud,
                now: Time(0),
                by_key: BTreeMap::new(),
                machines: BTreeMap::new(),
                exhausted: BTreeSet::new(),
                notices: Vec::new(),
            }),
            provider_id: sim_provider_id,
        }
    }

    /// The same provider, naming instances with `provider_id` (a stand-in
    /// for another cloud writes that cloud's ids, so Nodes match them).
    pub fn with_provider_ids(mut self, provider_id: ProviderIdFn) -> SimProvider {
        self.provider_id = provider_id;
        self
    }

    /// From now on, launches of `offering` fail for lack of capacity (a
    /// launch repeated with the key of a machine that exists still returns
    /// it, as a cloud's idempotency does).
    pub fn exhaust(&self, offering: OfferingKey) {
        self.lock().exhausted.insert(offering);
    }

    /// The cloud reclaims or announces something about the machine
    /// `provider_id`: a notice of `kind` is returned once by
    /// `interruptions`.
    pub fn interrupt(&self, provider_id: &str, kind: InterruptionKind) {
        let mut g = self.lock();
        let at = g.now;
        g.notices.push(Interruption {
            provider_id: provider_id.to_string(),
            kind,
            at,
        });
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the virtual clock.
    pub fn set_now(&self, now: Time) {
        let mut g = self.lock();
        g.now = now;
        let Inner {
            machines, cloud, ..
        } = &mut *g;
        for m in machines.values_mut() {
            if m.terminated {
                continue;
            }
            let reclaimed = m.reclaim_at.is_some_and(|t| t <= now);
            if reclaimed || m.interrupt_at.is_some_and(|t| t <= now) {
                m.terminated = true;
                m.instance.state = InstanceState::Terminated;
                cloud.machine_gone(&m.instance.offering);
            } else if m.ready_at <= now {
                m.instance.state = InstanceState::Running;
            }
        }
    }
}

#[async_trait::async_trait]
impl CloudProvider for SimProvider {
    fn provider(&self) -> Provider {
        Provider::Sim
    }

    async fn resolve(&self) -> Result<Resolution, ProviderError> {
        let g = self.lock();
        let mut zones: Vec<String> = g.cloud.offerings().iter().map(|o| o.zone.clone()).collect();
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
        let g = self.lock();
        Ok(g.cloud
            .offerings()
            .iter()
            .filter(|o| requirements.admits(o))
            .cloned()
            .collect())
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        let mut g = self.lock();
        if let Some(id) = g.by_key.get(&request.idempotency_key)
            && let Some(m) = g.machines.get(id)
        {
            return Ok(m.instance.clone());
        }
        let now = g.now;
        if g.exhausted.contains(&request.offering) {
            return Err(ProviderError::InsufficientCapacity {
                offering: request.offering.clone(),
                message: "InsufficientInstanceCapacity (simulated)".into(),
            });
        }
        let plan = g
            .cloud
            .launch_in(
                &request.offering,
                &request.idempotency_key,
                now,
                request.placement_group.as_deref(),
            )
            .map_err(|e| match e {
                LaunchError::InsufficientCapacity(offering) => {
                    ProviderError::InsufficientCapacity {
                        offering,
                        message: "InsufficientInstanceCapacity (simulated)".into(),
                    }
                }
                LaunchError::UnknownOffering(o) => ProviderError::Permanent {
                    message: format!("unknown offering {o}"),
                },
            })?;
        let provider_id = (self.provider_id)(request);
        let mut tags = request.tags.clone();
        tags.insert(CLUSTER_TAG.into(), request.cluster.clone());
        tags.insert(muster_provider_api::tags::POOL.into(), request.pool.clone());
        tags.insert(
            muster_provider_api::tags::POOL_NODE.into(),
            request.name.clone(),
        );
        tags.insert("Name".into(), request.name.clone());
        let instance = Instance {
            provider_id: provider_id.clone(),
            offering: request.offering.clone(),
            state: InstanceState::Pending,
            launched_at: now,
            pool_node: Some(request.name.clone()),
            tags,
            network: plan.network.clone(),
        };
        g.by_key
            .insert(request.idempotency_key.clone(), provider_id.clone());
        g.machines.insert(
            provider_id,
            Machine {
                instance: instance.clone(),
                ready_at: now + plan.ready_after,
                interrupt_at: plan.interrupt_at,
                reclaim_at: plan.reclaim_at,
                interruption_delivered: false,
                terminated: false,
            },
        );
        Ok(instance)
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError> {
        let g = self.lock();
        g.machines
            .get(provider_id)
            .map(|m| m.instance.clone())
            .ok_or_else(|| ProviderError::NotFound {
                what: provider_id.to_string(),
            })
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError> {
        let mut g = self.lock();
        let Inner {
            machines, cloud, ..
        } = &mut *g;
        if let Some(m) = machines.get_mut(provider_id)
            && !m.terminated
        {
            m.terminated = true;
            m.instance.state = InstanceState::Terminated;
            cloud.machine_gone(&m.instance.offering);
        }
        Ok(())
    }

    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError> {
        let g = self.lock();
        Ok(g.machines
            .values()
            .filter(|m| !m.terminated)
            .filter(|m| {
                m.instance
                    .tags
                    .get(CLUSTER_TAG)
                    .is_some_and(|c| c == cluster)
            })
            .map(|m| m.instance.clone())
            .collect())
    }

    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError> {
        let mut g = self.lock();
        let mut out = std::mem::take(&mut g.notices);
        let now = g.now;
        for (id, m) in g.machines.iter_mut() {
            if let Some(at) = m.interrupt_at
                && at <= now
                && !m.interruption_delivered
            {
                m.interruption_delivered = true;
                out.push(Interruption {
                    provider_id: id.clone(),
                    kind: InterruptionKind::SpotInterruption,
                    at,
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::behaviour::{CloudBehaviour, OfferingRule};
    use crate::catalog::builtin_offerings;
    use muster_planner::CapacityType;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// The provider never awaits anything: every future is ready at once.
    fn ready<F: Future>(f: F) -> F::Output {
        let mut f = pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("simulated provider future was not ready"),
        }
    }

    fn provider(rate: f64) -> SimProvider {
        let b = CloudBehaviour {
            rules: vec![OfferingRule {
                pattern: "*/*/spot".into(),
                interruption_rate_per_hour: Some(rate),
                ..Default::default()
            }],
            ..Default::default()
        };
        SimProvider::new(SimCloud::new(builtin_offerings(), &b, 1).expect("cloud"))
    }

    fn request(key: &str, spot: bool) -> LaunchRequest {
        LaunchRequest {
            name: format!("node-{key}"),
            idempotency_key: key.into(),
            offering: muster_planner::OfferingKey {
                provider: Provider::Aws,
                zone: "us-east-1a".into(),
                instance_type: "g5.xlarge".into(),
                capacity_type: if spot {
                    CapacityType::Spot
                } else {
                    CapacityType::OnDemand
                },
                reservation: None,
            },
            pool: "gpu".into(),
            cluster: "c1".into(),
            gang: None,
            labels: Default::default(),
            taints: vec![],
            tags: Default::default(),
            placement_group: None,
            grant: None,
        }
    }

    // Idempotency, listing, termination, unknown ids and notices are the
    // provider conformance suite's (tests/conformance.rs); these are the
    // simulated cloud's own.

    #[test]
    fn machines_boot_on_virtual_time_and_pools_buy_on_demand_by_default() {
        let p = provider(0.0);
        let a = ready(p.launch(&request("k1", false))).expect("launch");
        assert_eq!(a.state, InstanceState::Pending);
        p.set_now(Time(3600));
        assert_eq!(
            ready(p.describe(&a.provider_id)).expect("describe").state,
            InstanceState::Running
        );
        let offerings = ready(p.offerings(&PoolRequirements::default())).expect("offerings");
        assert!(
            offerings
                .iter()
                .all(|o| o.capacity_type == CapacityType::OnDemand)
        );
    }

    #[test]
    fn scheduled_interruptions_reclaim_the_machine_once() {
        let p = provider(10.0);
        let inst = ready(p.launch(&request("s1", true))).expect("launch");
        assert!(ready(p.interruptions()).expect("none yet").is_empty());
        p.set_now(Time(10 * 3600));
        let notes = ready(p.interruptions()).expect("notes");
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].provider_id, inst.provider_id);
        assert!(ready(p.interruptions()).expect("once").is_empty());
        assert_eq!(
            ready(p.describe(&inst.provider_id)).expect("d").state,
            InstanceState::Terminated
        );
    }
}
