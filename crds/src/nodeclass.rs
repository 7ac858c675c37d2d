//! `NodeClass`: how to launch a machine on one cloud (AWS, GCP, or muster's simulated cloud) —
//! the launch template that `GPUPool`s refer to, like Karpenter's `EC2NodeClass`.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Condition, Provider, Quantity};

/// How muster launches machines on one cloud: exactly one of `aws`, `gcp`, `sim` or
/// `karpenter` (through Karpenter's NodeClaims).
// clippy mistakes the repeated `type_ = ...` inside separate `printcolumn(...)` groups for
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "muster.dev",
    version = "v1alpha1",
    kind = "NodeClass",
    plural = "nodeclasses",
    shortname = "nc",
    category = "muster",
    status = "NodeClassStatus",
    derive = "PartialEq",
    doc = "NodeClass describes how muster launches a machine on one cloud (AWS or GCP): image, network, identity, disks and metadata. GPUPools refer to it by name.",
    printcolumn(
        name = "Provider",
        type_ = "string",
        json_path = ".status.provider",
        description = "Cloud this class launches on, as resolved by the controller"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the images, subnets and security groups resolved"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("has(self.aws) || has(self.gcp) || has(self.sim) || has(self.karpenter)").message("spec.aws, spec.gcp, spec.sim or spec.karpenter is required: set exactly one provider block").reason(Reason::FieldValueRequired))]
#[x_kube(validation = Rule::new("(has(self.aws) ? 1 : 0) + (has(self.gcp) ? 1 : 0) + (has(self.sim) ? 1 : 0) + (has(self.karpenter) ? 1 : 0) <= 1").message("spec.aws, spec.gcp, spec.sim and spec.karpenter are mutually exclusive: set exactly one provider block"))]
#[x_kube(validation = Rule::new("has(self.aws) == has(oldSelf.aws) && has(self.gcp) == has(oldSelf.gcp) && has(self.sim) == has(oldSelf.sim) && has(self.karpenter) == has(oldSelf.karpenter)").message("spec.aws/spec.gcp/spec.sim/spec.karpenter: the provider of a NodeClass cannot change; create a new NodeClass"))]
#[serde(rename_all = "camelCase")]
pub struct NodeClassSpec {
    /// Launch settings for Amazon EC2. Mutually exclusive with `gcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsNodeClass>,
    /// Launch settings for Google Compute Engine. Mutually exclusive with `aws` and `sim`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GcpNodeClass>,
    /// muster's simulated cloud: machines are Node objects in this cluster, with no kubelet
    /// behind them (for trying muster without a cloud account, and for tests). The controller
    /// launches on it only when started with `--cloud sim`. Mutually exclusive with `aws` and
    /// `gcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sim: Option<SimNodeClass>,
    /// Delegate mode: muster decides which machines a gang gets and Karpenter launches them,
    /// one `karpenter.sh/v1` NodeClaim per machine, from the Karpenter node class named here
    /// (its AMIs, subnets, security groups, user data and interruption handling). Mutually
    /// exclusive with `aws`, `gcp` and `sim`. See docs/karpenter.md.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karpenter: Option<KarpenterNodeClass>,
}

/// The Karpenter node class a delegated NodeClass launches through, as a NodeClaim's
/// `spec.nodeClassRef` names it.
#[derive(KubeSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KarpenterNodeClass {
    /// API group of the node class. Only Karpenter's AWS provider is supported.
    #[x_kube(validation = Rule::new("self == 'karpenter.k8s.aws'").message("spec.karpenter.group: only karpenter.k8s.aws (Karpenter's AWS provider) is supported"))]
    #[schemars(length(max = 253))]
    pub group: String,
    /// Kind of the node class.
    #[x_kube(validation = Rule::new("self == 'EC2NodeClass'").message("spec.karpenter.kind: only EC2NodeClass is supported"))]
    #[schemars(length(max = 63))]
    pub kind: String,
    /// Name of the node class, e.g. `gpu`.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub name: String,
    /// AWS region of the cluster, e.g. `us-east-1`: muster's AWS catalog (instance types,
    /// GPUs, spot prices) is read there.
    #[schemars(
        length(max = 32),
        regex(pattern = r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]+$")
    )]
    pub region: String,
}

/// Settings of muster's simulated cloud. Its offerings are the built-in catalog of GPU shapes
/// and list prices that `muster simulate` uses.
#[derive(JsonSchema, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SimNodeClass {
    /// Only the catalog's shapes of this region: `us-east-1` (AWS shapes) or `us-central1`
    /// (GCP shapes); both when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), regex(pattern = r"^[a-z][a-z0-9-]*[0-9]$"))]
    pub region: Option<String>,
    /// Seconds from launch until a simulated node is Ready; the catalog's boot time of the
    /// instance family (several minutes) when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 3600))]
    pub boot_seconds: Option<i32>,
}

/// Launch settings for Amazon EC2.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.imageFamily) || !self.amiSelectorTerms.exists(t, has(t.alias))").message("spec.aws.imageFamily: an alias term names the image family already; drop one of them"))]
pub struct AwsNodeClass {
    /// AWS region the machines run in, e.g. `us-east-1`.
    #[schemars(
        length(max = 32),
        regex(pattern = r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]+$")
    )]
    pub region: String,
    /// The EKS cluster machines join. When set, muster reads its endpoint, CA, service CIDR,
    /// IP family and Kubernetes version (`eks:DescribeCluster`) and writes the complete
    /// bootstrap configuration itself; `userData` then only adds to it. Required by `alias`
    /// AMI terms (the AMI follows the cluster's Kubernetes version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<EksCluster>,
    /// How the image boots, and so which user data muster writes: `AL2023` (nodeadm
    /// `NodeConfig`) or `Bottlerocket` (TOML settings). Implied by an `alias` term; `AL2023`
    /// when neither is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_family: Option<ImageFamily>,
    /// Maximum pods the kubelet runs; the image's own default (from the instance type's
    /// network interfaces) when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub max_pods: Option<i32>,
    /// Which AMIs to boot. Terms are ORed; the newest matching image compatible with the
    /// instance type is used.
    #[schemars(length(min = 1, max = 30))]
    #[x_kube(validation = Rule::new("!self.exists(t, has(t.alias)) || self.size() == 1").message("spec.aws.amiSelectorTerms: a term with alias must be the only term"))]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// Which subnets machines may be placed in (one per zone is used). Terms are ORed.
    #[schemars(length(min = 1, max = 30))]
    #[x_kube(validation = Rule::new("self.all(t, has(t.id) != has(t.tags))").message("spec.aws.subnetSelectorTerms: each term sets exactly one of id or tags"))]
    pub subnet_selector_terms: Vec<AwsSelectorTerm>,
    /// Which security groups are attached to machines: every group any term matches. Terms
    /// are ORed; within a term, `name` and `tags` must both hold. Select the EKS cluster
    /// security group (the one EKS attaches to managed nodes) here, and any other group the
    /// nodes need.
    #[schemars(length(min = 1, max = 30))]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// Which EC2 capacity reservations machines may be launched into: On-Demand Capacity
    /// Reservations and Capacity Blocks for ML, as Karpenter's `EC2NodeClass` selects them.
    /// Terms are ORed; within a term every field must hold. Only `active` and `scheduled`
    /// reservations are used, each offered as `reserved` capacity of its instance type in its
    /// zone. Empty: no reservation is used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 30))]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    /// Name of the IAM instance profile machines run with (it must allow joining the cluster).
    #[schemars(length(min = 1, max = 128))]
    pub instance_profile: String,
    /// User data passed to the instance, merged after muster's bootstrap script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub user_data: Option<String>,
    /// EBS volumes attached at launch; the AMI's defaults when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.filter(m, has(m.rootVolume) && m.rootVolume).size() <= 1").message("spec.aws.blockDeviceMappings: at most one mapping may set rootVolume"))]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// Tags put on instances, volumes and network interfaces, in addition to muster's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 50))]
    #[x_kube(validation = Rule::new("self.all(k, !k.startsWith('muster.dev/') && !k.startsWith('kubernetes.io/cluster/'))").message("spec.aws.tags: keys starting with muster.dev/ or kubernetes.io/cluster/ are reserved"))]
    pub tags: BTreeMap<String, String>,
    /// Instance metadata service (IMDS) settings; IMDSv2 (session tokens) is required unless
    /// changed here.
    #[serde(default)]
    pub metadata_options: MetadataOptions,
    /// Whether instances get a public IPv4 address; the subnet's setting when omitted.
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// Whether CloudWatch detailed (1-minute) monitoring is enabled.
    #[serde(default)]
    pub detailed_monitoring: bool,
}

/// An EKS cluster, named in the NodeClass's region.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EksCluster {
    /// Cluster name, e.g. `my-cluster`.
    #[schemars(
        length(min = 1, max = 100),
        regex(pattern = r"^[0-9A-Za-z][A-Za-z0-9\-_]*$")
    )]
    pub name: String,
}

/// How an EC2 image boots and reads its user data.
#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
pub enum ImageFamily {
    /// Amazon Linux 2023: nodeadm reads a `NodeConfig` from MIME multi-part user data.
    #[serde(rename = "AL2023")]
    Al2023,
    /// Bottlerocket: the API server reads TOML settings.
    Bottlerocket,
}

/// One way of choosing AMIs: by `alias`, by `id`, or by `name`/`tags`/`owner`.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.id) || has(self.tags) || has(self.name) || has(self.alias)").message("spec.aws.amiSelectorTerms[]: set one of alias, id, name or tags"))]
#[x_kube(validation = Rule::new("!has(self.alias) || !(has(self.id) || has(self.tags) || has(self.name) || has(self.owner))").message("spec.aws.amiSelectorTerms[].alias cannot be combined with id, name, owner or tags"))]
#[x_kube(validation = Rule::new("!has(self.id) || !(has(self.tags) || has(self.name) || has(self.owner))").message("spec.aws.amiSelectorTerms[].id cannot be combined with name, owner or tags"))]
pub struct AmiSelectorTerm {
    /// Image family and version, e.g. `al2023@latest`, `al2023@v20250116` or
    /// `bottlerocket@latest`; muster resolves the GPU (NVIDIA) variant of the family for the
    /// cluster's Kubernetes version through the public SSM parameters. Needs `cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 64),
        regex(pattern = r"^(al2023|bottlerocket)@(latest|v[0-9][A-Za-z0-9._-]*)$")
    )]
    pub alias: Option<String>,
    /// AMI ID, e.g. `ami-0123456789abcdef0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^ami-[0-9a-f]{8,17}$"))]
    pub id: Option<String>,
    /// AMI name; `*` wildcards are allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub name: Option<String>,
    /// AMI owner account ID or alias (`self`, `amazon`); restricts `name` and `tags`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub owner: Option<String>,
    /// Tags the AMI must carry; a value of `*` matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Selects AWS security groups by ID, or by name and/or tags (as Karpenter's
/// `EC2NodeClass` does).
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.id) || has(self.name) || has(self.tags)").message("spec.aws.securityGroupSelectorTerms[]: set one of id, name or tags"))]
#[x_kube(validation = Rule::new("!has(self.id) || !(has(self.name) || has(self.tags))").message("spec.aws.securityGroupSelectorTerms[].id cannot be combined with name or tags"))]
#[x_kube(validation = Rule::new("!has(self.tags) || self.tags.all(k, k != '' && self.tags[k] != '')").message("spec.aws.securityGroupSelectorTerms[].tags: empty tag keys or values are not supported"))]
pub struct SecurityGroupSelectorTerm {
    /// Security group ID, e.g. `sg-0123abcd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^sg-[0-9a-z]+$"), length(max = 32))]
    pub id: Option<String>,
    /// Security group name (the group's `GroupName`, not its `Name` tag); `*` wildcards are
    /// allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255))]
    pub name: Option<String>,
    /// Tags the group must carry; a value of `*` matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minProperties" = 1, "maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Selects EC2 capacity reservations by ID or by tags (exactly one of them).
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.id) != has(self.tags)").message("spec.aws.capacityReservationSelectorTerms[]: set exactly one of id or tags"))]
#[x_kube(validation = Rule::new("!has(self.tags) || self.tags.all(k, k != '' && self.tags[k] != '')").message("spec.aws.capacityReservationSelectorTerms[].tags: empty tag keys or values are not supported"))]
pub struct CapacityReservationSelectorTerm {
    /// Capacity reservation ID, e.g. `cr-0123456789abcdef0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^cr-[0-9a-z]+$"), length(max = 32))]
    pub id: Option<String>,
    /// Tags the reservation must carry, all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minProperties" = 1, "maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Selects AWS subnets by ID or by tags.
#[derive(JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsSelectorTerm {
    /// Subnet ID, e.g. `subnet-0123abcd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(subnet|sg)-[0-9a-z]+$"), length(max = 32))]
    pub id: Option<String>,
    /// Tags the resource must carry; a value of `*` matches any value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    pub tags: Option<BTreeMap<String, String>>,
}

/// An EBS volume attached at launch.
#[derive(JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    /// Device name, e.g. `/dev/xvda`.
    #[schemars(regex(pattern = r"^/dev/[a-z0-9]+$"), length(max = 32))]
    pub device_name: String,
    /// Whether this is the root volume (the kubelet's and container images' disk).
    #[serde(default)]
    pub root_volume: bool,
    /// The EBS volume.
    pub ebs: EbsVolume,
}

/// EBS volume settings.
#[derive(JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EbsVolume {
    /// Size of the volume, e.g. `200Gi`.
    pub volume_size: Quantity,
    /// EBS volume type.
    #[serde(default)]
    pub volume_type: EbsVolumeType,
    /// Provisioned IOPS (gp3, io1, io2 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 256000))]
    pub iops: Option<i32>,
    /// Provisioned throughput in MiB/s (gp3 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 125, max = 2000))]
    pub throughput: Option<i32>,
    /// Whether the volume is encrypted.
    #[serde(default = "yes")]
    pub encrypted: bool,
    /// KMS key used to encrypt the volume; the account's default EBS key when omitted.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub kms_key_id: Option<String>,
    /// Whether the volume is deleted when the instance terminates.
    #[serde(default = "yes")]
    pub delete_on_termination: bool,
    /// Snapshot the volume is created from.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(regex(pattern = r"^snap-[0-9a-f]+$"), length(max = 32))]
    pub snapshot_id: Option<String>,
}

fn yes() -> bool {
    true
}

/// EBS volume type.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
#[serde(rename_all = "lowercase")]
pub enum EbsVolumeType {
    /// General purpose SSD, previous generation.
    Gp2,
    /// General purpose SSD with configurable IOPS and throughput.
    #[default]
    Gp3,
    /// Provisioned IOPS SSD.
    Io1,
    /// Provisioned IOPS SSD, higher durability.
    Io2,
    /// Throughput-optimized HDD.
    St1,
    /// Cold HDD.
    Sc1,
    /// Magnetic, previous generation.
    Standard,
}

/// Instance metadata service (IMDS) settings.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// Whether the metadata endpoint is reachable from the instance.
    #[serde(default = "enabled")]
    pub http_endpoint: Toggle,
    /// Whether IPv6 access to the metadata endpoint is enabled.
    #[serde(default = "disabled", rename = "httpProtocolIPv6")]
    pub http_protocol_ipv6: Toggle,
    /// Maximum number of network hops a metadata response may take; 1 keeps pods (in their
    /// own network namespace) away from the node's credentials.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: i32,
    /// `required` enforces IMDSv2 session tokens; `optional` also allows IMDSv1.
    #[serde(default)]
    pub http_tokens: HttpTokens,
}

impl Default for MetadataOptions {
    fn default() -> Self {
        Self {
            http_endpoint: Toggle::Enabled,
            http_protocol_ipv6: Toggle::Disabled,
            http_put_response_hop_limit: 1,
            http_tokens: HttpTokens::Required,
        }
    }
}

fn enabled() -> Toggle {
    Toggle::Enabled
}

fn disabled() -> Toggle {
    Toggle::Disabled
}

fn one() -> i32 {
    1
}

/// An AWS on/off setting.
#[derive(JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    /// Turned on.
    Enabled,
    /// Turned off.
    Disabled,
}

/// Whether IMDS session tokens (IMDSv2) are required.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
#[serde(rename_all = "lowercase")]
pub enum HttpTokens {
    /// IMDSv2 only.
    #[default]
    Required,
    /// IMDSv1 and IMDSv2.
    Optional,
}

/// Launch settings for Google Compute Engine.
#[derive(KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.zones) || self.zones.all(z, z.startsWith(self.region + '-'))").message("spec.gcp.zones: every zone must be in spec.gcp.region (e.g. us-central1-a in us-central1)"))]
#[x_kube(validation = Rule::new("!has(self.flexStart) || has(self.cluster)").message("spec.gcp.flexStart needs spec.gcp.cluster: flex-start machines are bought through GKE node pools"))]
#[x_kube(validation = Rule::new("has(self.image) || has(self.cluster)").message("spec.gcp.image is required unless spec.gcp.cluster names a GKE cluster (whose node pool gives the image)").reason(Reason::FieldValueRequired))]
#[x_kube(validation = Rule::new("!has(self.cluster) || !(has(self.image) || has(self.network) || has(self.subnetwork) || has(self.networkTags) || has(self.metadata))").message("spec.gcp: image, network, subnetwork, networkTags and metadata do not apply with spec.gcp.cluster (GKE chooses the node image and the cluster's network); remove them"))]
pub struct GcpNodeClass {
    /// Project the machines are created in.
    #[schemars(regex(pattern = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"))]
    pub project: String,
    /// The GKE cluster (Standard) machines join. When set, GKE makes them: muster keeps one
    /// node pool per shape (machine type, GPUs, spot or on-demand, zone, and the GPUPool's
    /// labels and taints), created through the GKE API with no nodes and autoscaling off,
    /// and adds and removes named instances through its managed instance group; GKE
    /// installs the GPU driver, approves the kubelet and labels the node. `image`,
    /// `network`, `subnetwork` and `networkTags` then do not apply (GKE chooses the node
    /// image and the cluster's network); `serviceAccount`, `bootDisk` and `labels` go into
    /// the node pools. An Autopilot cluster is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<GkeCluster>,
    /// How long a node pool muster created may hold no node before muster deletes it,
    /// e.g. `30m`.
    #[serde(default = "default_empty_node_pool_ttl", rename = "emptyNodePoolTTL")]
    pub empty_node_pool_ttl: crate::common::Duration,
    /// Opt-in to flex-start (Dynamic Workload Scheduler) with `cluster`: the provider offers
    /// every GPU machine type also as capacity type `flex-start`, bought through a
    /// flex-start node pool of its shape, all machines of a gang in one resize request of
    /// the pool's instance group (created together or not at all). Without it no flex-start
    /// offering is listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flex_start: Option<GcpFlexStart>,
    /// Which NVIDIA driver GKE installs on GPU machines of a GKE cluster, through the node
    /// label `cloud.google.com/gke-gpu-driver-version` its driver installer reads: `default`,
    /// `latest`, or `disabled` (no label: a GPU operator installs the driver).
    #[serde(default)]
    pub gpu_driver_version: GpuDriverVersion,
    /// Region the machines run in, e.g. `us-central1`.
    #[schemars(length(max = 32), regex(pattern = r"^[a-z]+-[a-z]+[0-9]+$"))]
    pub region: String,
    /// Zones machines may be placed in; every zone of the region that offers the machine
    /// type when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 16),
        inner(regex(pattern = r"^[a-z]+-[a-z]+[0-9]+-[a-z]$"), length(max = 40))
    )]
    pub zones: Vec<String>,
    /// VPC network name or self link; the project's `default` network when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub network: Option<String>,
    /// Subnetwork name or self link; the network's subnetwork in the region when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub subnetwork: Option<String>,
    /// Boot image or image family self link, e.g.
    /// `projects/cos-cloud/global/images/family/cos-stable`. Required without `cluster`; with
    /// it, the node pool's image when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub image: Option<String>,
    /// Service account the machines run as; the project's default compute account when
    /// omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<GcpServiceAccount>,
    /// Boot disk of every machine.
    #[serde(default)]
    pub boot_disk: GcpBootDisk,
    /// Labels put on instances and disks, in addition to muster's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 48))]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^[a-z][-_a-z0-9]{0,62}$'))").message("spec.gcp.labels: keys must start with a lowercase letter and contain only lowercase letters, digits, - and _ (at most 63)"))]
    pub labels: BTreeMap<String, String>,
    /// Network tags (firewall targets) put on instances.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 64),
        inner(regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))
    )]
    pub network_tags: Vec<String>,
    /// Instance metadata items (e.g. `startup-script`), in addition to muster's bootstrap.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub metadata: BTreeMap<String, String>,
    /// Compute Engine reservations machines may be launched into, by name, as GKE's
    /// `--reservation-affinity=specific --reservation=projects/P/reservations/NAME` selects
    /// them. Each `READY` reservation of this name in a zone of the NodeClass is offered as
    /// `reserved` capacity of its machine shape in its zone, and a launch into it names it
    /// (reservation affinity `SPECIFIC_RESERVATION`). While any is selected, on-demand
    /// machines are created with affinity `NO_RESERVATION`, so that they do not take the
    /// reserved machines muster counts on. Empty: no reservation is used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 30))]
    #[x_kube(validation = Rule::new("self.all(a, self.exists_one(b, b.name == a.name && (has(b.project) ? b.project : '') == (has(a.project) ? a.project : '')))").message("spec.gcp.reservations: each reservation is named once"))]
    pub reservations: Vec<GcpReservation>,
}

/// One Compute Engine reservation, by name; in another project for a shared reservation.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcpReservation {
    /// The reservation's name (RFC 1035: lowercase letters, digits and `-`, at most 63).
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
    )]
    pub name: String,
    /// The project that owns the reservation when it is shared with this NodeClass's
    /// project; this project when omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"))]
    pub project: Option<String>,
}

impl GcpReservation {
    /// How a reservation affinity names it to an instance of `project`: the name, or
    /// `projects/<owner>/reservations/<name>` for a reservation another project shares
    /// (Compute API reference, `ReservationAffinity.values`).
    pub fn affinity_value(&self, project: &str) -> String {
        match self.project.as_deref().filter(|p| *p != project) {
            Some(owner) => format!("projects/{owner}/reservations/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Flex-start offerings of a GKE NodeClass.
#[derive(KubeSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("duration(self.maxRunDuration) >= duration('10m') && duration(self.maxRunDuration) <= duration('168h')").message("spec.gcp.flexStart.maxRunDuration must be between 10m and 168h (seven days): Compute's bounds of a resize request's requestedRunDuration"))]
pub struct GcpFlexStart {
    /// How long a granted machine runs before Compute deletes it (the resize request's
    /// `requestedRunDuration`, the node pool's `maxRunDuration`), e.g. `24h`; at most `168h`.
    /// The planner buys flex-start only for gangs expected to finish within it.
    pub max_run_duration: crate::common::Duration,
    /// The wait for a grant muster plans with, e.g. `30m`: a queue buys flex-start only when
    /// its `flexStartMaxWait` is at least this long. Google publishes no figure; set what
    /// your grants take.
    pub expected_wait: crate::common::Duration,
    /// The discount of flex-start over the on-demand list price, in percent, which the
    /// offering's price is derived from. Google publishes flex-start prices as SKUs of
    /// their own, "up to 53%" below on-demand; the default 0 prices flex-start as on-demand
    /// (an upper bound), so it is chosen over on-demand only when you state your discount.
    #[serde(default)]
    #[schemars(range(min = 0, max = 53))]
    pub discount_percent: u8,
}

fn default_empty_node_pool_ttl() -> crate::common::Duration {
    crate::common::Duration::from("30m")
}

/// A GKE cluster.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GkeCluster {
    /// Project of the cluster.
    #[schemars(regex(pattern = r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$"))]
    pub project: String,
    /// Region (regional cluster) or zone (zonal cluster) of the cluster, e.g. `us-central1`.
    #[schemars(length(max = 40), regex(pattern = r"^[a-z]+-[a-z]+[0-9]+(-[a-z])?$"))]
    pub location: String,
    /// Cluster name.
    #[schemars(
        length(min = 1, max = 40),
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
}

/// Which NVIDIA driver GKE installs on a GPU node.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
#[serde(rename_all = "lowercase")]
pub enum GpuDriverVersion {
    /// GKE's default driver for the node version.
    #[default]
    Default,
    /// The newest driver GKE offers for the node version.
    Latest,
    /// No driver from GKE (a GPU operator installs it); the label is not set.
    Disabled,
}

impl GpuDriverVersion {
    /// The value of the `cloud.google.com/gke-gpu-driver-version` node label; none when
    /// GKE is not to install a driver.
    pub fn label_value(self) -> Option<&'static str> {
        match self {
            GpuDriverVersion::Default => Some("default"),
            GpuDriverVersion::Latest => Some("latest"),
            GpuDriverVersion::Disabled => None,
        }
    }
}

/// A GCP service account and its OAuth scopes.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcpServiceAccount {
    /// Service account e-mail, e.g. `gpu-nodes@my-project.iam.gserviceaccount.com`.
    #[schemars(length(min = 1, max = 254))]
    pub email: String,
    /// OAuth scopes granted to the machine.
    #[serde(default = "cloud_platform_scope")]
    #[schemars(length(max = 32))]
    pub scopes: Vec<String>,
}

fn cloud_platform_scope() -> Vec<String> {
    vec!["https://www.googleapis.com/auth/cloud-platform".to_owned()]
}

/// Boot disk of a GCP machine.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GcpBootDisk {
    /// Size in GB.
    #[serde(default = "hundred", rename = "sizeGB")]
    #[schemars(range(min = 10, max = 65536))]
    pub size_gb: i32,
    /// Persistent disk type.
    #[serde(default, rename = "type")]
    pub type_: GcpDiskType,
}

impl Default for GcpBootDisk {
    fn default() -> Self {
        Self {
            size_gb: 100,
            type_: GcpDiskType::default(),
        }
    }
}

fn hundred() -> i32 {
    100
}

/// GCP persistent disk type.
#[derive(JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[schemars(transform = crate::common::drop_description)]
#[serde(rename_all = "kebab-case")]
pub enum GcpDiskType {
    /// Standard (HDD) persistent disk.
    PdStandard,
    /// Balanced SSD persistent disk.
    #[default]
    PdBalanced,
    /// Performance SSD persistent disk.
    PdSsd,
    /// Hyperdisk Balanced (newer machine families such as A3).
    HyperdiskBalanced,
}

/// What the controller resolved from a `NodeClass` and whether it can launch machines.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassStatus {
    /// Cloud this class launches on (from the provider block that is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// AWS subnets matched by `subnetSelectorTerms`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<ResolvedSubnet>,
    /// AWS security groups matched by `securityGroupSelectorTerms`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<ResolvedSecurityGroup>,
    /// AWS AMIs matched by `amiSelectorTerms`, one per architecture/accelerator variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ResolvedImage>,
    /// GCP zones machines may be placed in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// GCP image self link resolved from `spec.gcp.image` (a family resolves to its newest
    /// image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Current state: `Ready` is `True` when the class can launch machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// `.metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// An AWS subnet resolved from the selector terms.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSubnet {
    /// Subnet ID.
    pub id: String,
    /// Availability zone of the subnet, e.g. `us-east-1a`.
    pub zone: String,
    /// Availability zone ID of the subnet, e.g. `use1-az1`.
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

/// An AWS security group resolved from the selector terms.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedSecurityGroup {
    /// Security group ID.
    pub id: String,
    /// Security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// An AWS AMI resolved from the selector terms.
#[derive(JsonSchema, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedImage {
    /// AMI ID.
    pub id: String,
    /// AMI name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// CPU architecture of the image, e.g. `x86_64` or `arm64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
}
