//! The soak on AWS: moto (`providers/aws/tests/moto_server.py`, a separate
//! process honouring `ClientToken` as EC2 does), one-GPU `g6.xlarge`
//! machines (one L4) in the two zones the NodeClass's subnets are in, and
//! the emulated kubelet booting a Node for every instance moto runs for the
//! cluster (and removing it once the instance shuts down).

use std::sync::Arc;

use muster_provider_api::{CloudProvider, tags};
use muster_provider_aws::AwsProvider;
use muster_provider_aws::moto::Moto;
use serde_json::{Value, json};

use super::world::{CLUSTER, SoakCloud};
use crate::support::cloud_e2e::TaggedMachines;
use crate::support::emulator::Machines;

/// The one instance type (1 L4 GPU).
pub const MACHINE: &str = "g6.xlarge";

/// The controller's flags and environment for `--cloud CLOUD` with AWS
/// calls going to `moto`.
pub fn on_moto(cloud: &str, moto: &Moto) -> (Vec<String>, Vec<(String, String)>) {
    (
        vec![
            "--cloud".into(),
            cloud.into(),
            "--aws-endpoint".into(),
            moto.endpoint.clone(),
        ],
        [
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    )
}

/// moto and the provider the test reads it with.
pub struct Aws {
    moto: Moto,
    spec: Value,
    provider: Arc<AwsProvider>,
}

impl Aws {
    /// Starts moto with subnets, a security group and an AMI to select.
    pub async fn start(_client: kube::Client) -> Aws {
        let moto = Moto::start();
        let spec = moto.node_class_spec().await;
        let provider = Arc::new(
            AwsProvider::new(&spec, moto.options())
                .await
                .expect("provider"),
        );
        Aws {
            moto,
            spec,
            provider,
        }
    }
}

#[async_trait::async_trait]
impl SoakCloud for Aws {
    fn name(&self) -> &'static str {
        "aws"
    }

    fn node_class(&self) -> Value {
        self.spec.clone()
    }

    fn requirements(&self) -> Value {
        json!({"instanceTypes": [MACHINE], "capacityTypes": ["on-demand"]})
    }

    fn controller(&self) -> (Vec<String>, Vec<(String, String)>) {
        on_moto("aws", &self.moto)
    }

    fn provider(&self) -> Arc<dyn CloudProvider> {
        self.provider.clone()
    }

    fn machines(&self) -> Option<Arc<dyn Machines>> {
        Some(Arc::new(TaggedMachines {
            provider: self.provider.clone(),
            cluster: CLUSTER.to_string(),
            gpus: |t| u32::from(t == MACHINE),
        }))
    }

    fn launches(&self) -> usize {
        self.moto.run_instances_calls() as usize
    }

    fn terminations(&self) -> usize {
        self.moto.terminate_instances_calls() as usize
    }

    /// Every instance moto holds for the cluster, terminated ones included
    /// (moto keeps them, as EC2 lists them for a while): `(instance id,
    /// PoolNode tag)`.
    async fn created(&self) -> Vec<(String, String)> {
        let clients = self.moto.clients().await;
        // every page: EC2 (and moto, 100 reservations a page) paginates
        let mut pages = clients.ec2.describe_instances().into_paginator().send();
        let mut reservations = Vec::new();
        while let Some(page) = pages.next().await {
            reservations.extend(page.expect("describe instances").reservations().to_vec());
        }
        reservations
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| {
                let tag = |k: &str| {
                    i.tags()
                        .iter()
                        .find(|t| t.key() == Some(k))
                        .and_then(|t| t.value())
                        .map(str::to_string)
                };
                (tag(tags::CLUSTER).as_deref() == Some(CLUSTER)).then(|| {
                    (
                        i.instance_id().unwrap_or_default().to_string(),
                        tag(tags::POOL_NODE).unwrap_or_default(),
                    )
                })
            })
            .collect()
    }
}
