//! The provider conformance suite (`muster_provider_api::conformance`)
//! against the AWS provider with the real `aws-sdk-ec2` and `aws-sdk-sqs`
//! clients and a local moto server (`tests/moto_server.py`, patched to honour
//! `ClientToken` and raise capacity errors as EC2 does), one per case.
//! Interruptions arrive as EventBridge's Spot interruption warning in the
//! SQS queue the provider reads.

use muster_planner::{CapacityType, OfferingKey, Provider};
use muster_provider_api::conformance::{CASES, Harness};
use muster_provider_api::{CloudProvider, Instance};
use muster_provider_aws::AwsProvider;
use muster_provider_aws::moto::Moto;
use serde_json::json;

struct Aws {
    moto: Moto,
    queue: String,
    provider: AwsProvider,
}

impl Aws {
    async fn start() -> Aws {
        let moto = Moto::start();
        let spec = moto.node_class_spec().await;
        let queue = moto
            .clients()
            .await
            .sqs
            .create_queue()
            .queue_name("muster-interruptions")
            .send()
            .await
            .expect("queue")
            .queue_url()
            .expect("queue url")
            .to_string();
        let mut options = moto.options();
        options.interruption_queue = Some(queue.clone());
        let provider = AwsProvider::new(&spec, options).await.expect("provider");
        Aws {
            moto,
            queue,
            provider,
        }
    }
}

#[async_trait::async_trait]
impl Harness for Aws {
    fn provider(&self) -> &dyn CloudProvider {
        &self.provider
    }

    fn offering(&self, spot: bool) -> OfferingKey {
        let (instance_type, zone, capacity_type) = if spot {
            ("g6.xlarge", "us-east-1b", CapacityType::Spot)
        } else {
            ("p4d.24xlarge", "us-east-1a", CapacityType::OnDemand)
        };
        OfferingKey {
            provider: Provider::Aws,
            zone: zone.into(),
            instance_type: instance_type.into(),
            capacity_type,
            reservation: None,
        }
    }

    fn unknown_id(&self) -> String {
        "aws:///us-east-1a/i-0000000000000dead".into()
    }

    async fn exhaust(&self, offering: &OfferingKey) {
        self.moto.control(
            "POST",
            &format!("/ice?offering={}@{}", offering.instance_type, offering.zone),
        );
    }

    async fn interrupt(&self, instance: &Instance) {
        let id = instance.provider_id.rsplit('/').next().unwrap_or_default();
        let warning = json!({
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "time": "2026-11-23T10:00:05Z",
            "detail": {"instance-id": id, "instance-action": "terminate"}
        });
        self.moto
            .clients()
            .await
            .sqs
            .send_message()
            .queue_url(&self.queue)
            .message_body(warning.to_string())
            .send()
            .await
            .expect("send the warning");
    }
}

#[tokio::test]
async fn the_aws_provider_conforms() {
    for (name, case) in CASES {
        let aws = Aws::start().await;
        case(&aws).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
