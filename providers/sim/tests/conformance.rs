//! The provider conformance suite (`muster_provider_api::conformance`)
//! against the simulated cloud.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use muster_planner::{CapacityType, OfferingKey, PoolRequirements};
use muster_provider_api::conformance::{CASES, Harness};
use muster_provider_api::{CloudProvider, Instance, InterruptionKind};
use muster_provider_sim::behaviour::CloudBehaviour;
use muster_provider_sim::catalog::builtin_offerings;
use muster_provider_sim::cloud::SimCloud;
use muster_provider_sim::provider::SimProvider;

/// The simulated cloud never waits: every future is ready at once.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a simulated cloud call was not ready"),
    }
}

struct Sim {
    provider: SimProvider,
    on_demand: OfferingKey,
    spot: OfferingKey,
}

impl Sim {
    fn start() -> Sim {
        let cloud = SimCloud::new(builtin_offerings(), &CloudBehaviour::default(), 1)
            .expect("the built-in catalog");
        let provider = SimProvider::new(cloud);
        let all = ready(provider.offerings(&PoolRequirements {
            capacity_types: vec![CapacityType::OnDemand, CapacityType::Spot],
            ..PoolRequirements::default()
        }))
        .expect("offerings");
        let on_demand = all
            .iter()
            .find(|o| o.capacity_type == CapacityType::OnDemand)
            .expect("an on-demand offering")
            .key();
        let spot = all
            .iter()
            .find(|o| {
                o.capacity_type == CapacityType::Spot && o.instance_type != on_demand.instance_type
            })
            .expect("a spot offering of another type")
            .key();
        Sim {
            provider,
            on_demand,
            spot,
        }
    }
}

#[async_trait::async_trait]
impl Harness for Sim {
    fn provider(&self) -> &dyn CloudProvider {
        &self.provider
    }

    fn offering(&self, spot: bool) -> OfferingKey {
        if spot {
            self.spot.clone()
        } else {
            self.on_demand.clone()
        }
    }

    fn unknown_id(&self) -> String {
        format!("sim:///{}/no-such-machine", self.on_demand.zone)
    }

    async fn exhaust(&self, offering: &OfferingKey) {
        self.provider.exhaust(offering.clone());
    }

    async fn interrupt(&self, instance: &Instance) {
        self.provider
            .interrupt(&instance.provider_id, InterruptionKind::SpotInterruption);
    }
}

#[test]
fn the_simulated_cloud_conforms() {
    for (name, case) in CASES {
        let sim = Sim::start();
        ready(case(&sim)).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
