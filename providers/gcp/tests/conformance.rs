//! The provider conformance suite (`muster_provider_api::conformance`)
//! against the GCP provider with the real `google-cloud-compute-v1` client
//! and the local Compute fake (`tests/compute_fake.py`), one per case.

use muster_planner::{CapacityType, OfferingKey, Provider};
use muster_provider_api::conformance::{CASES, Harness};
use muster_provider_api::{CloudProvider, Instance};
use muster_provider_gcp::GcpProvider;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::json;

struct Gcp {
    fake: ComputeFake,
    provider: GcpProvider,
}

impl Gcp {
    async fn start() -> Gcp {
        let fake = ComputeFake::start();
        let spec = json!({"gcp": {
            "project": "test-project",
            "region": "us-central1",
            "zones": ["us-central1-a", "us-central1-b"],
            "image": "projects/cos-cloud/global/images/family/cos-stable"
        }});
        let provider = GcpProvider::new("gcp-default", &spec, &fake.options())
            .await
            .expect("provider");
        Gcp { fake, provider }
    }
}

#[async_trait::async_trait]
impl Harness for Gcp {
    fn provider(&self) -> &dyn CloudProvider {
        &self.provider
    }

    fn offering(&self, spot: bool) -> OfferingKey {
        let (instance_type, zone, capacity_type) = if spot {
            ("a2-highgpu-8g", "us-central1-b", CapacityType::Spot)
        } else {
            ("g2-standard-4", "us-central1-a", CapacityType::OnDemand)
        };
        OfferingKey {
            provider: Provider::Gcp,
            zone: zone.into(),
            instance_type: instance_type.into(),
            capacity_type,
            reservation: None,
        }
    }

    fn unknown_id(&self) -> String {
        "gce://test-project/us-central1-a/no-such-instance".into()
    }

    async fn exhaust(&self, offering: &OfferingKey) {
        self.fake.control(
            "POST",
            &format!(
                "stockout?zone={}&machineType={}",
                offering.zone, offering.instance_type
            ),
        );
    }

    async fn interrupt(&self, instance: &Instance) {
        let name = instance.provider_id.rsplit('/').next().unwrap_or_default();
        self.fake.control("POST", &format!("preempt?name={name}"));
    }
}

#[tokio::test]
async fn the_gcp_provider_conforms() {
    for (name, case) in CASES {
        let gcp = Gcp::start().await;
        case(&gcp).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
