//! Karpenter's delegate mode (`spec.karpenter` on a NodeClass): a
//! [`CloudProvider`] whose machines Karpenter launches. muster decides
//! which offering, when and how many (the planner, as for its own
//! launches); a launch is one standalone `karpenter.sh/v1` NodeClaim that
//! pins that offering ([`claim`]); Karpenter's life cycle launches,
//! registers and initializes it from the operator's `EC2NodeClass`, and
//! its termination finalizer terminates the instance when muster deletes
//! the claim after its own drain.
//!
//! - **Launch** creates the claim (named after the PoolNode, the
//!   idempotency key as an annotation, so a launch repeated after a crash
//!   finds it) and waits a little for Karpenter's `status.providerID`. A
//!   claim Karpenter deleted before launching it (its launch error handling
//!   on insufficient capacity, `pkg/controllers/nodeclaim/lifecycle/launch.go`)
//!   is kept by muster's finalizer and read here: insufficient capacity
//!   for the offering, or a permanent error while the `EC2NodeClass` is
//!   not Ready. The PoolNode life cycle then marks the offering and
//!   re-plans the whole gang, as for muster's own launches; once the
//!   PoolNode is gone, orphan collection lets the claim go (a restart in
//!   between reads the same failure and creates nothing).
//! - **Terminate** marks the claim released, deletes it and removes
//!   muster's finalizer; Karpenter drains (nothing is left after muster's
//!   drain) and terminates the instance.
//! - **Interruptions** are claims Karpenter deleted after launching them
//!   (its interruption queue, garbage collection, a registration timeout):
//!   a spot claim's as a spot interruption, others as terminated. muster's
//!   own interruption queue is not read in this mode.
//! - **Offerings** are muster's AWS catalog (instance types, GPUs, prices)
//!   in the zones of the `EC2NodeClass`'s resolved subnets
//!   (`status.subnets[].zone`), so the planner chooses only what Karpenter
//!   can launch.

pub(crate) mod claim;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use muster_crds::nodeclass::KarpenterNodeClass;
use muster_planner::{CapacityType, Offering, PoolRequirements, Provider, Time};
use muster_provider_api::{
    CloudProvider, Instance, Interruption, InterruptionKind, LaunchRequest, ProviderError,
    Resolution,
};
use muster_provider_aws::AwsProvider;
use serde_json::Value;

use crate::controller::base::api::{is_already_exists, is_not_found, provider_error};
use crate::controller::base::time;

use claim::Launch;

/// How long a launch waits for Karpenter to launch the claim before it
/// reports "not yet" (a transient error; the next cycle asks again).
const LAUNCH_WAIT: Duration = Duration::from_secs(20);
/// How often a launch reads the claim while it waits.
const LAUNCH_POLL: Duration = Duration::from_millis(250);

/// Why a `karpenter` NodeClass cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KarpenterSetupError {
    /// The `karpenter` block does not read.
    #[error("spec.karpenter: {0}")]
    Spec(String),
    /// The AWS catalog could not be set up.
    #[error("spec.karpenter.region: {0}")]
    Catalog(String),
}

/// The delegated cloud of one NodeClass.
pub struct KarpenterClaims {
    claims: Api<DynamicObject>,
    classes: Api<DynamicObject>,
    class: KarpenterNodeClass,
    node_class: String,
    catalog: AwsProvider,
    /// Interruptions already reported, by NodeClaim uid.
    reported: Mutex<BTreeSet<String>>,
}

fn nodeclaims() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.sh", "v1", "NodeClaim"),
        "nodeclaims",
    )
}

fn node_classes(class: &KarpenterNodeClass) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&class.group, "v1", &class.kind),
        &format!("{}es", class.kind.to_ascii_lowercase()),
    )
}

impl KarpenterClaims {
    /// The delegated cloud of NodeClass `node_class` (its whole `spec`, with
    /// the `karpenter` block); `aws` reaches the AWS catalog.
    pub async fn new(
        client: kube::Client,
        node_class: &str,
        spec: &Value,
        aws: muster_provider_aws::AwsOptions,
    ) -> Result<KarpenterClaims, KarpenterSetupError> {
        let class: KarpenterNodeClass =
            serde_json::from_value(spec.get("karpenter").cloned().unwrap_or(Value::Null))
                .map_err(|e| KarpenterSetupError::Spec(e.to_string()))?;
        let catalog = AwsProvider::catalog_of(&class.region, aws)
            .await
            .map_err(|e| KarpenterSetupError::Catalog(e.to_string()))?;
        Ok(KarpenterClaims {
            claims: Api::all_with(client.clone(), &nodeclaims()),
            classes: Api::all_with(client, &node_classes(&class)),
            class,
            node_class: node_class.to_string(),
            catalog,
            reported: Mutex::new(BTreeSet::new()),
        })
    }

    fn what(&self) -> String {
        format!("{} {} (spec.karpenter)", self.class.kind, self.class.name)
    }

    /// The Karpenter node class; its `Ready` condition's message when it is
    /// not Ready.
    async fn karpenter_class(&self) -> Result<(Value, Option<String>), ProviderError> {
        let obj = self
            .classes
            .get_opt(&self.class.name)
            .await
            .map_err(|e| provider_error(&self.what(), e))?
            .ok_or_else(|| ProviderError::NotFound { what: self.what() })?;
        let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
        let ready = status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready")
            .cloned();
        let not_ready = match ready {
            Some(c) if c["status"] == "True" => None,
            Some(c) => Some(format!(
                "{} is not Ready: {}",
                self.what(),
                c["message"].as_str().unwrap_or("no message")
            )),
            None => Some(format!("{} has no Ready condition yet", self.what())),
        };
        Ok((status, not_ready))
    }

    /// The zones of the Karpenter node class's resolved subnets.
    async fn zones(&self) -> Result<Vec<String>, ProviderError> {
        let (status, not_ready) = self.karpenter_class().await?;
        if let Some(message) = not_ready {
            return Err(ProviderError::Permanent { message });
        }
        let zones: BTreeSet<String> = status["subnets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["zone"].as_str().map(str::to_string))
            .collect();
        Ok(zones.into_iter().collect())
    }

    async fn claim(&self, name: &str) -> Result<Option<Value>, ProviderError> {
        let got = self
            .claims
            .get_opt(name)
            .await
            .map_err(|e| provider_error("NodeClaim", e))?;
        Ok(got.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)))
    }

    async fn ours(&self) -> Result<Vec<Value>, ProviderError> {
        let lp = ListParams::default().labels(&format!(
            "{}={}",
            claim::NODE_CLASS_LABEL,
            self.node_class
        ));
        let list = self
            .claims
            .list(&lp)
            .await
            .map_err(|e| provider_error("NodeClaims", e))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect())
    }

    /// Removes muster's finalizer (guarded by the resourceVersion read).
    async fn let_go(&self, nc: &Value) -> Result<(), ProviderError> {
        let finalizers: Vec<Value> = nc["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|f| f.as_str() != Some(claim::FINALIZER))
            .cloned()
            .collect();
        if nc["metadata"]["finalizers"].as_array().map(Vec::len) == Some(finalizers.len()) {
            return Ok(());
        }
        let patch = serde_json::json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": nc["metadata"]["resourceVersion"],
        }});
        match self
            .claims
            .patch(
                claim::name_of(nc),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(provider_error("NodeClaim finalizer", e)),
        }
    }

    /// What a claim Karpenter deleted before launching it means.
    async fn failed(&self, nc: &Value, request: &LaunchRequest) -> ProviderError {
        let name = claim::name_of(nc);
        match self.karpenter_class().await {
            Ok((_, Some(message))) => ProviderError::Permanent {
                message: format!("Karpenter did not launch NodeClaim {name}: {message}"),
            },
            Err(e) => e,
            Ok((_, None)) => ProviderError::InsufficientCapacity {
                offering: request.offering.clone(),
                message: format!(
                    "Karpenter deleted NodeClaim {name} before launching it (insufficient capacity)"
                ),
            },
        }
    }
}

#[async_trait::async_trait]
impl CloudProvider for KarpenterClaims {
    fn provider(&self) -> Provider {
        Provider::Aws
    }

    async fn resolve(&self) -> Result<Resolution, ProviderError> {
        Ok(Resolution {
            zones: self.zones().await?,
            ..Resolution::default()
        })
    }

    async fn offerings(
        &self,
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        let zones = self.zones().await?;
        let mut out = self.catalog.offerings_in(&zones, requirements).await?;
        for o in &mut out {
            o.node_class = self.node_class.clone();
        }
        Ok(out)
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        let name = request.name.as_str();
        let deadline = tokio::time::Instant::now() + LAUNCH_WAIT;
        let mut created = false;
        loop {
            let nc = match self.claim(name).await? {
                Some(nc) => nc,
                None if !created => {
                    let want = claim::nodeclaim(request, &self.class, &self.node_class);
                    let obj: DynamicObject =
                        serde_json::from_value(want).map_err(|e| ProviderError::Permanent {
                            message: format!("NodeClaim {name}: {e}"),
                        })?;
                    created = true;
                    match self.claims.create(&PostParams::default(), &obj).await {
                        Ok(o) => serde_json::to_value(o).unwrap_or(Value::Null),
                        Err(e) if is_already_exists(&e) => continue,
                        Err(e) => return Err(provider_error("create NodeClaim", e)),
                    }
                }
                None => {
                    return Err(ProviderError::Transient {
                        message: format!("NodeClaim {name} is gone"),
                        retry_after: None,
                    });
                }
            };
            if claim::key_of(&nc) != Some(request.idempotency_key.as_str()) {
                return Err(ProviderError::Permanent {
                    message: format!(
                        "NodeClaim {name} exists and was not created with idempotency key {}",
                        request.idempotency_key
                    ),
                });
            }
            match claim::launch(&nc) {
                Launch::Launched(_) => {
                    return claim::instance(&nc).ok_or_else(|| ProviderError::Permanent {
                        message: format!("NodeClaim {name} pins no offering"),
                    });
                }
                // kept (muster's finalizer) while its PoolNode exists, so a
                // launch asked again after a restart reads the same failure
                // instead of creating a second claim; orphan collection lets
                // it go once the PoolNode is gone
                Launch::Failed => return Err(self.failed(&nc, request).await),
                Launch::Waiting if tokio::time::Instant::now() >= deadline => {
                    return Err(ProviderError::Transient {
                        message: format!("Karpenter has not launched NodeClaim {name} yet"),
                        retry_after: None,
                    });
                }
                Launch::Waiting => tokio::time::sleep(LAUNCH_POLL).await,
            }
        }
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError> {
        self.ours()
            .await?
            .iter()
            .find(|nc| claim::instance_id(nc) == provider_id)
            .and_then(claim::instance)
            .ok_or_else(|| ProviderError::NotFound {
                what: provider_id.to_string(),
            })
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError> {
        let Some(nc) = self
            .ours()
            .await?
            .into_iter()
            .find(|nc| claim::instance_id(nc) == provider_id)
        else {
            return Ok(());
        };
        let name = claim::name_of(&nc).to_string();
        let mark =
            serde_json::json!({"metadata": {"annotations": {claim::RELEASED_ANNOTATION: "true"}}});
        let nc = match self
            .claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(mark))
            .await
        {
            Ok(o) => serde_json::to_value(o).unwrap_or(Value::Null),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(provider_error("NodeClaim", e)),
        };
        match self.claims.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(provider_error("delete NodeClaim", e)),
        }
        // read again: the deletion changed the resourceVersion
        match self.claim(&name).await? {
            Some(now) => self.let_go(&now).await,
            None => self.let_go(&nc).await,
        }
    }

    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError> {
        Ok(self
            .ours()
            .await?
            .iter()
            .filter(|nc| {
                nc["metadata"]["labels"][muster_provider_api::tags::CLUSTER].as_str()
                    == Some(cluster)
            })
            .filter_map(claim::instance)
            .collect())
    }

    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError> {
        let now = time::now();
        let mut out = Vec::new();
        let ours = self.ours().await?;
        // only claims still listed can be reported again: forget the rest
        let listed: BTreeSet<String> = ours
            .iter()
            .filter_map(|nc| nc["metadata"]["uid"].as_str().map(str::to_string))
            .collect();
        let mut reported: BTreeSet<String> = self
            .reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .intersection(&listed)
            .cloned()
            .collect();
        for nc in ours {
            if !claim::deleting(&nc) || claim::released(&nc) {
                continue;
            }
            let (Some(pid), Some(offering)) = (claim::provider_id(&nc), claim::offering(&nc))
            else {
                continue;
            };
            let uid = nc["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if !reported.insert(uid) {
                continue;
            }
            let at = nc["metadata"]["deletionTimestamp"]
                .as_str()
                .and_then(muster_provider_api::parse_rfc3339)
                .map_or(now, Time);
            out.push(Interruption {
                provider_id: pid,
                kind: match offering.capacity_type {
                    CapacityType::Spot => InterruptionKind::SpotInterruption,
                    CapacityType::OnDemand | CapacityType::Reserved | CapacityType::FlexStart => {
                        InterruptionKind::Terminated
                    }
                },
                at,
            });
        }
        *self.reported.lock().unwrap_or_else(|e| e.into_inner()) = reported;
        Ok(out)
    }
}
