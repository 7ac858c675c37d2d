//! Types shared by several muster custom resources: quantities, durations, dollar amounts,
//! conditions, taints, tolerations, selectors and small enums such as the capacity type.
//!
//! String-backed newtypes ([`Quantity`], [`Duration`], [`Usd`]) carry their OpenAPI pattern so
//! the API server rejects malformed values before any controller sees them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::KubeSchema;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};

/// Regular expression of a Kubernetes resource quantity (`resource.Quantity`), as the API
/// server and controller-gen spell it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Regular expression of a duration such as `30s`, `1h30m` or `500ms` (Go `time.Duration`
/// syntax without signs and without `us`/`ns`).
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$";

/// Regular expression of a non-negative amount of US dollars written as a decimal string.
pub const USD_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?$";

/// Regular expression of a DNS-1123 label (queue, cohort and pod-set names).
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Regular expression of a DNS-1123 subdomain (names of cluster objects).
pub const DNS_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Regular expression of a GPU model name such as `A100`, `H100`, `L4` or `A100-80GB`.
pub const GPU_MODEL_PATTERN: &str = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$";

/// Regular expression of a Kubernetes resource name such as `nvidia.com/gpu` or `memory`.
pub const RESOURCE_NAME_PATTERN: &str =
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// Regular expression of a label or taint key (`prefix/name`, prefix optional).
pub const LABEL_KEY_PATTERN: &str =
    r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";

/// Schema transform for enums: drops the enum type's own description so that the
/// description of the field using the enum (its rustdoc) is the one shown, also for optional
/// fields.
pub fn drop_description(schema: &mut Schema) {
    schema.remove("description");
}

/// A Kubernetes resource quantity such as `8`, `500m`, `40Gi` or `1.5`.
///
/// Stored as written; the schema accepts an integer or a string matching
/// [`QUANTITY_PATTERN`], like `resource.Quantity` in built-in objects.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Quantity(pub String);

impl Quantity {
    /// The quantity as written, e.g. `40Gi`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Quantity {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl From<u64> for Quantity {
    fn from(value: u64) -> Self {
        Self(value.to_string())
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity as a string or an integer")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_owned()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "x-kubernetes-int-or-string": true,
            "pattern": QUANTITY_PATTERN,
            "maxLength": 64,
        })
    }
}

/// A duration such as `30s`, `10m` or `1h30m` (see [`DURATION_PATTERN`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Duration(pub String);

/// Why a [`Duration`] string could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationError(pub String);

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid duration {:?}: expected e.g. 30s, 10m or 1h30m",
            self.0
        )
    }
}

impl std::error::Error for DurationError {}

impl Duration {
    /// The duration as written, e.g. `1h30m`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads the duration; fails with [`DurationError`] when it does not match
    /// [`DURATION_PATTERN`].
    pub fn to_std(&self) -> Result<std::time::Duration, DurationError> {
        let err = || DurationError(self.0.clone());
        let mut rest = self.0.as_str();
        if rest.is_empty() {
            return Err(err());
        }
        let mut total = 0f64;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(err)?;
            let (number, tail) = rest.split_at(digits);
            if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
                return Err(err());
            }
            let value: f64 = number.parse().map_err(|_| err())?;
            let (unit_secs, unit_len) = if tail.starts_with("ms") {
                (0.001, 2)
            } else if tail.starts_with('s') {
                (1.0, 1)
            } else if tail.starts_with('m') {
                (60.0, 1)
            } else if tail.starts_with('h') {
                (3600.0, 1)
            } else {
                return Err(err());
            };
            total += value * unit_secs;
            rest = &tail[unit_len..];
        }
        std::time::Duration::try_from_secs_f64(total).map_err(|_| err())
    }
}

impl From<&str> for Duration {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": DURATION_PATTERN,
            "maxLength": 32,
        })
    }
}

/// An amount of US dollars as a decimal string, e.g. `32.77` (see [`USD_PATTERN`]).
///
/// Kept as a string so that no precision is lost between the cloud's price list and the
/// status shown to users.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Usd(pub String);

impl Usd {
    /// The amount as written, e.g. `32.77`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Usd {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl JsonSchema for Usd {
    fn schema_name() -> Cow<'static, str> {
        "Usd".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": USD_PATTERN,
            "maxLength": 24,
        })
    }
}

/// Whether a cloud machine is bought as interruptible spot capacity or on demand.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[schemars(transform = crate::common::drop_description)]
pub enum CapacityType {
    /// Interruptible spare capacity (AWS spot, GCP spot VMs): cheaper, may be reclaimed.
    #[serde(rename = "spot")]
    Spot,
    /// Regular capacity billed by the second, never reclaimed by the cloud.
    #[serde(rename = "on-demand")]
    OnDemand,
    /// Capacity reserved ahead and paid for whether used or not: an EC2
    /// On-Demand Capacity Reservation or Capacity Block for ML, a GCE reservation.
    #[serde(rename = "reserved")]
    Reserved,
    /// GKE flex-start (Dynamic Workload Scheduler): discounted capacity granted
    /// for a whole request when available, running for at most seven days.
    #[serde(rename = "flex-start")]
    FlexStart,
}

/// Cloud a machine is bought from.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[schemars(transform = crate::common::drop_description)]
pub enum Provider {
    /// Amazon EC2.
    #[serde(rename = "aws")]
    Aws,
    /// Google Compute Engine.
    #[serde(rename = "gcp")]
    Gcp,
    /// muster's simulated cloud (tests and `muster simulate`).
    #[serde(rename = "sim")]
    Sim,
}

/// Status of a condition, as in `metav1.Condition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The controller cannot tell yet.
    #[default]
    Unknown,
}

/// One aspect of an object's current state, shaped like `metav1.Condition` so that
/// `kubectl wait --for=condition=...` and generic tooling understand it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Kind of condition in CamelCase, e.g. `Ready`, `QuotaReserved` or `PodsReady`.
    #[schemars(length(max = 316))]
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether the condition holds: `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// Last time the status changed from one value to another.
    pub last_transition_time: Time,
    /// Machine-readable CamelCase reason for the last transition, e.g. `InsufficientCapacity`.
    #[schemars(length(max = 1024))]
    pub reason: String,
    /// Human-readable explanation of the last transition.
    #[serde(default)]
    #[schemars(length(max = 32768))]
    pub message: String,
    /// `.metadata.generation` the condition was computed from; older than the object's
    /// generation when the condition is stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
}

/// Effect a taint has on pods that do not tolerate it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum TaintEffect {
    /// Pods that do not tolerate the taint are not scheduled onto the node.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate the taint.
    PreferNoSchedule,
    /// Pods that do not tolerate the taint are evicted from the node.
    NoExecute,
}

/// A taint put on every node of a pool, as in a Kubernetes `Node`'s `spec.taints`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key, e.g. `nvidia.com/gpu`.
    #[schemars(length(min = 1, max = 316), regex(pattern = LABEL_KEY_PATTERN))]
    pub key: String,
    /// Taint value; may be empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub value: Option<String>,
    /// What happens to pods that do not tolerate the taint.
    pub effect: TaintEffect,
}

/// How a toleration's key and value are compared with a taint's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum TolerationOperator {
    /// The key must match and the value must equal the taint's value.
    #[default]
    Equal,
    /// The key must match; any value is tolerated.
    Exists,
}

/// A toleration of a pod, as in a `PodSpec`'s `tolerations`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Taint key the toleration applies to; empty with operator `Exists` tolerates everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 316))]
    pub key: Option<String>,
    /// How the key and value are compared; `Equal` when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    /// Taint value matched with operator `Equal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub value: Option<String>,
    /// Taint effect matched; all effects when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// For `NoExecute`, how long the pod stays bound after the taint appears; forever when
    /// omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Operator of a label-selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum LabelSelectorOperator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present (`values` must be empty).
    Exists,
    /// The label is absent (`values` must be empty).
    DoesNotExist,
}

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, KubeSchema, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.operator in ['In', 'NotIn'] ? (has(self.values) && self.values.size() > 0) : (!has(self.values) || self.values.size() == 0)").message("matchExpressions[].values must be non-empty for In and NotIn and empty for Exists and DoesNotExist"))]
pub struct LabelSelectorRequirement {
    /// Label key the requirement applies to.
    #[schemars(length(min = 1, max = 316))]
    pub key: String,
    /// How the label's value is compared with `values`.
    pub operator: LabelSelectorOperator,
    /// Values compared with the label's value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub values: Vec<String>,
}

/// A label selector (`matchLabels` AND `matchExpressions`), as in `metav1.LabelSelector`.
/// An empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must all be present with exactly these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// Operator of a node-selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum NodeSelectorOperator {
    /// The node label's value is one of `values`.
    In,
    /// The node label is absent or its value is none of `values`.
    NotIn,
    /// The node label is present.
    Exists,
    /// The node label is absent.
    DoesNotExist,
    /// The node label, read as an integer, is greater than the single value.
    Gt,
    /// The node label, read as an integer, is less than the single value.
    Lt,
}

/// One requirement on a node's labels (or, in `matchFields`, on its name).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// Node label key, e.g. `topology.kubernetes.io/zone` (`metadata.name` in `matchFields`).
    #[schemars(length(min = 1, max = 316))]
    pub key: String,
    /// How the label's value is compared with `values`.
    pub operator: NodeSelectorOperator,
    /// Values compared with the label's value (one integer for `Gt`/`Lt`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub values: Vec<String>,
}

/// A node-selector term: all its requirements must hold; a term with none
/// matches no node (as in a pod's node affinity).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    /// Requirements on node labels, ANDed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// Requirements on node fields, ANDed with the expressions: `metadata.name`, `In` or `NotIn`, one value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub match_fields: Vec<NodeSelectorRequirement>,
}

/// Reference to a cluster-scoped object by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct ObjectName {
    /// Name of the referenced object.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
}

/// Reference to a namespaced object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct NamespacedName {
    /// Namespace of the referenced object.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub namespace: String,
    /// Name of the referenced object.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        let secs = |s: &str| Duration::from(s).to_std().map(|d| d.as_secs_f64());
        assert_eq!(secs("30s"), Ok(30.0));
        assert_eq!(secs("1h30m"), Ok(5400.0));
        assert_eq!(secs("1.5h"), Ok(5400.0));
        assert_eq!(secs("250ms"), Ok(0.25));
        for bad in ["", "10", "1d", "m", "-1s", "1.s", "1h 2m"] {
            assert!(Duration::from(bad).to_std().is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn quantity_accepts_integers() {
        let q: Quantity = serde_json::from_str("8").expect("integer quantity");
        assert_eq!(q.as_str(), "8");
        let q: Quantity = serde_json::from_str("\"40Gi\"").expect("string quantity");
        assert_eq!(q.as_str(), "40Gi");
    }
}
