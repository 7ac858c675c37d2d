//! [`AwsProvider`]: the `CloudProvider` of one AWS NodeClass.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Instant;

use async_trait::async_trait;
use muster_crds::nodeclass::AwsNodeClass;
use muster_planner::{CapacityType, Offering, PoolRequirements, Provider, Time};
use muster_provider_api::{
    CloudProvider, Instance, InstanceState, Interruption, LaunchRequest, ProviderError, Resolution,
    ResolvedSubnet,
};

use crate::client::{AwsOptions, Clients, connect};
use crate::eks::{self, ClusterInfo};
use crate::instances::{self, Placement};
use crate::prices::PriceTable;
use crate::reservations::{self, Reservation};
use crate::shapes::{self, TypeInfo};
use crate::{alias, bootstrap, catalog, placement_groups, queue, resolve, topology};

/// Why a provider could not be built from a NodeClass.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `spec.aws` is missing or does not read.
    #[error("spec.aws: {0}")]
    Spec(String),
}

struct Catalog {
    at: Instant,
    patterns: Vec<String>,
    types: Vec<TypeInfo>,
    zones: BTreeMap<String, Vec<String>>,
    spot: BTreeMap<(String, String), f64>,
}

/// One AWS NodeClass's provider.
pub struct AwsProvider {
    class: AwsNodeClass,
    clients: Clients,
    options: AwsOptions,
    prices: PriceTable,
    catalog: Mutex<Vec<Catalog>>,
    resolution: Mutex<Option<(Instant, Resolved)>>,
    reservations: Mutex<reservations::Cache>,
}

/// What resolution found: the selectors' matches and the cluster joined.
#[derive(Clone)]
struct Resolved {
    resolution: Resolution,
    cluster: Option<ClusterInfo>,
}

impl AwsProvider {
    /// A provider for a NodeClass spec (the whole `spec`, with its `aws` block).
    pub async fn new(spec: &serde_json::Value, options: AwsOptions) -> Result<Self, SetupError> {
        let aws = spec
            .get("aws")
            .cloned()
            .ok_or_else(|| SetupError::Spec("missing".into()))?;
        let class: AwsNodeClass =
            serde_json::from_value(aws).map_err(|e| SetupError::Spec(e.to_string()))?;
        Ok(AwsProvider::of_class(class, options).await)
    }

    async fn of_class(class: AwsNodeClass, options: AwsOptions) -> Self {
        let clients = connect(&class.region, &options).await;
        AwsProvider {
            class,
            clients,
            options,
            prices: PriceTable::default(),
            catalog: Mutex::new(Vec::new()),
            resolution: Mutex::new(None),
            reservations: Mutex::new(reservations::Cache::default()),
        }
    }

    /// A provider that only reads the catalog of `region` (instance types,
    /// zones, spot prices): muster's offerings for a NodeClass whose
    /// machines another controller launches (Karpenter's delegate mode). It
    /// resolves no selectors and must not be asked to launch.
    pub async fn catalog_of(region: &str, options: AwsOptions) -> Result<Self, SetupError> {
        let class: AwsNodeClass = serde_json::from_value(serde_json::json!({
            "region": region,
            "amiSelectorTerms": [],
            "subnetSelectorTerms": [],
            "securityGroupSelectorTerms": [],
            "instanceProfile": "",
        }))
        .map_err(|e| SetupError::Spec(e.to_string()))?;
        Ok(AwsProvider::of_class(class, options).await)
    }

    /// The offerings the pool's requirements admit in `zones` (the zones a
    /// launch may use, as another controller resolved them), from the
    /// catalog alone.
    pub async fn offerings_in(
        &self,
        zones: &[String],
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        let (types, mut by_type, spot) = self
            .listed(catalog::type_patterns(requirements), now_epoch())
            .await?;
        for z in by_type.values_mut() {
            z.retain(|zone| zones.contains(zone));
        }
        Ok(shapes::offerings(
            &self.class.region,
            &types,
            &by_type,
            &spot,
            &self.prices,
            requirements,
        ))
    }

    /// Replaces the on-demand price table (overrides).
    pub fn with_prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    async fn resolution(&self) -> Result<Resolved, ProviderError> {
        if let Some((at, r)) = self
            .resolution
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            && at.elapsed() < self.options.catalog_ttl
        {
            return Ok(r.clone());
        }
        let r = self.resolve_now().await?;
        *self.resolution.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), r.clone()));
        Ok(r)
    }

    async fn resolve_now(&self) -> Result<Resolved, ProviderError> {
        let ec2 = &self.clients.ec2;
        let cluster = match &self.class.cluster {
            Some(c) => Some(eks::describe(&self.clients.eks, &c.name).await?),
            None => None,
        };
        let subnets = resolve::subnets(ec2, &self.class.subnet_selector_terms).await?;
        let security_groups =
            resolve::security_groups(ec2, &self.class.security_group_selector_terms).await?;
        let alias_term = self
            .class
            .ami_selector_terms
            .iter()
            .find_map(|t| t.alias.as_deref());
        let images = match (alias_term, &cluster) {
            (Some(text), Some(c)) => {
                let a = alias::parse(text).ok_or_else(|| ProviderError::Permanent {
                    message: format!(
                        "spec.aws.amiSelectorTerms alias {text}: the families are al2023 and bottlerocket"
                    ),
                })?;
                alias::resolve(&self.clients.ssm, &a, &c.version, text).await?
            }
            _ => resolve::images(ec2, &self.class.ami_selector_terms).await?,
        };
        let zones: BTreeSet<String> = subnets.iter().map(|s| s.zone.clone()).collect();
        Ok(Resolved {
            resolution: Resolution {
                subnets,
                security_groups,
                images,
                zones: zones.into_iter().collect(),
            },
            cluster,
        })
    }

    async fn listed(
        &self,
        patterns: Vec<String>,
        now_epoch: i64,
    ) -> Result<
        (
            Vec<TypeInfo>,
            BTreeMap<String, Vec<String>>,
            BTreeMap<(String, String), f64>,
        ),
        ProviderError,
    > {
        {
            let cache = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = cache
                .iter()
                .find(|c| c.patterns == patterns && c.at.elapsed() < self.options.catalog_ttl)
            {
                return Ok((c.types.clone(), c.zones.clone(), c.spot.clone()));
            }
        }
        let ec2 = &self.clients.ec2;
        let types = catalog::instance_types(ec2, &patterns).await?;
        let names: Vec<String> = types
            .iter()
            .filter(|t| t.gpu_count > 0)
            .map(|t| t.name.clone())
            .collect();
        let zones = catalog::zones(ec2, &names).await?;
        let history = catalog::spot_prices(ec2, &names, now_epoch - 6 * 3600).await?;
        let spot = shapes::latest_spot(&history);
        let mut cache = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
        cache.retain(|c| c.patterns != patterns);
        cache.push(Catalog {
            at: Instant::now(),
            patterns,
            types: types.clone(),
            zones: zones.clone(),
            spot: spot.clone(),
        });
        Ok((types, zones, spot))
    }
}

impl AwsProvider {
    /// What EC2 says of one instance type: from the catalog when it was
    /// listed, else one `DescribeInstanceTypes` call.
    async fn type_info(&self, name: &str) -> Result<TypeInfo, ProviderError> {
        {
            let cache = self.catalog.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(t) = cache
                .iter()
                .flat_map(|c| c.types.iter())
                .find(|t| t.name == name)
            {
                return Ok(t.clone());
            }
        }
        catalog::instance_types(&self.clients.ec2, &[name.to_string()])
            .await?
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| ProviderError::NotFound {
                what: format!("instance type {name} (DescribeInstanceTypes)"),
            })
    }
}

impl AwsProvider {
    /// The capacity reservations the NodeClass selects: none without
    /// selector terms; else as read within [`AwsOptions::reservation_ttl`],
    /// less the launches made into them since.
    async fn reservations(&self) -> Result<Vec<Reservation>, ProviderError> {
        if self.class.capacity_reservation_selector_terms.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(list) = self
            .reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fresh(self.options.reservation_ttl)
        {
            return Ok(list);
        }
        self.read_reservations().await
    }

    async fn read_reservations(&self) -> Result<Vec<Reservation>, ProviderError> {
        let list = reservations::describe(
            &self.clients.ec2,
            &self.class.capacity_reservation_selector_terms,
        )
        .await?;
        self.reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .store(list.clone());
        Ok(list)
    }

    /// The selected reservation `id`, read again when the last reading
    /// does not have it.
    async fn reservation(&self, id: &str) -> Result<Reservation, ProviderError> {
        let cached = self
            .reservations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id);
        let found = match cached {
            Some(r) => Some(r),
            None if self.class.capacity_reservation_selector_terms.is_empty() => None,
            None => self
                .read_reservations()
                .await?
                .into_iter()
                .find(|r| r.id() == id),
        };
        found.ok_or_else(|| ProviderError::NotFound {
            what: format!(
                "capacity reservation {id}: not active or scheduled, or not selected by spec.aws.capacityReservationSelectorTerms"
            ),
        })
    }

    /// One `reserved` offering per selected reservation in a zone the
    /// NodeClass has a subnet in, when the pool takes reserved capacity.
    async fn reserved_offerings(
        &self,
        listed: &[TypeInfo],
        zones: &[String],
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        if !requirements
            .capacity_types
            .contains(&CapacityType::Reserved)
        {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for r in self.reservations().await? {
            if !zones.contains(&r.zone) {
                continue;
            }
            let info = match listed.iter().find(|t| t.name == r.instance_type) {
                Some(t) => t.clone(),
                None => self.type_info(&r.instance_type).await?,
            };
            if info.gpu_count == 0 {
                continue;
            }
            let o = shapes::reserved(&self.class.region, &info, &r);
            if requirements.admits(&o) {
                out.push(o);
            }
        }
        Ok(out)
    }
}

fn now_epoch() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[async_trait]
impl CloudProvider for AwsProvider {
    fn provider(&self) -> Provider {
        Provider::Aws
    }

    async fn resolve(&self) -> Result<Resolution, ProviderError> {
        let r = self.resolve_now().await?;
        *self.resolution.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), r.clone()));
        Ok(r.resolution)
    }

    async fn offerings(
        &self,
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        let resolution = self.resolution().await?.resolution;
        let (types, mut zones, spot) = self
            .listed(catalog::type_patterns(requirements), now_epoch())
            .await?;
        // only zones the NodeClass has a subnet in can be launched into
        for z in zones.values_mut() {
            z.retain(|zone| resolution.zones.contains(zone));
        }
        let mut out = shapes::offerings(
            &self.class.region,
            &types,
            &zones,
            &spot,
            &self.prices,
            requirements,
        );
        out.extend(
            self.reserved_offerings(&types, &resolution.zones, requirements)
                .await?,
        );
        out.sort_by_key(|o| o.key());
        Ok(out)
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        let resolved = self.resolution().await?;
        let r = &resolved.resolution;
        let zone = &request.offering.zone;
        // a zone whose subnets are all full is short of capacity for now,
        // as EC2's InsufficientFreeAddressesInSubnet would say after a call:
        // the offering is avoided for a while and the gang planned elsewhere
        let subnet = ResolvedSubnet::choose(&r.subnets, zone).ok_or_else(|| {
            ProviderError::InsufficientCapacity {
                offering: request.offering.clone(),
                message: format!(
                    "no subnet of the NodeClass in zone {zone} has a free address (spec.aws.subnetSelectorTerms)"
                ),
            }
        })?;
        let info = self.type_info(&request.offering.instance_type).await?;
        let want = info.image_architecture();
        let image = r
            .images
            .iter()
            .find(|i| i.architecture.as_deref() == Some(want))
            .or_else(|| r.images.first())
            .ok_or_else(|| ProviderError::NotFound {
                what: "spec.aws.amiSelectorTerms".into(),
            })?;
        // a gang's placement group is made before its first node is bought;
        // on EFA types the nodes in it get every EFA interface the type takes
        let group = match &request.placement_group {
            Some(name) => Some(
                placement_groups::ensure(
                    &self.clients.ec2,
                    &request.cluster,
                    name,
                    request.gang.as_deref(),
                    &self.class.tags,
                )
                .await?,
            ),
            None => None,
        };
        // a reserved offering launches into its reservation, whose kind
        // decides the market type
        let reservation = match request.offering.capacity_type {
            CapacityType::Reserved => {
                let id = request.offering.reservation.as_deref().ok_or_else(|| {
                    ProviderError::Permanent {
                        message: "a reserved offering that names no capacity reservation".into(),
                    }
                })?;
                let r = self.reservation(id).await?;
                if r.instance_type != request.offering.instance_type || r.zone != *zone {
                    return Err(ProviderError::Permanent {
                        message: format!(
                            "capacity reservation {id} holds {} in {}, not {} in {zone}",
                            r.instance_type, r.zone, request.offering.instance_type
                        ),
                    });
                }
                Some(r.reservation)
            }
            _ => None,
        };
        let efa_interfaces = if group.is_some() {
            info.max_efa_interfaces
        } else {
            0
        };
        let placement = Placement {
            group,
            efa_interfaces,
            reservation,
            subnet: subnet.id.clone(),
            security_groups: r.security_groups.iter().map(|g| g.id.clone()).collect(),
            image: image.id.clone(),
            user_data: bootstrap::user_data(
                bootstrap::family(&self.class),
                resolved.cluster.as_ref(),
                request,
                &self.class,
            )?,
        };
        let launched = instances::launch(&self.clients.ec2, &self.class, &placement, request).await;
        if let Some(r) = &placement.reservation {
            let mut cache = self.reservations.lock().unwrap_or_else(|e| e.into_inner());
            match &launched {
                // a launch repeated with the same ClientToken takes one
                // again here; the next reading corrects it
                Ok(_) => cache.took_one(&r.id),
                Err(ProviderError::InsufficientCapacity { .. }) => cache.exhausted(&r.id),
                Err(_) => {}
            }
        }
        launched
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError> {
        let id = instances::instance_id(provider_id).ok_or_else(|| ProviderError::NotFound {
            what: provider_id.to_string(),
        })?;
        let mut found = instances::describe(&self.clients.ec2, &[id.to_string()], Vec::new())
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| ProviderError::NotFound {
                what: provider_id.to_string(),
            })?;
        // EC2 describes the topology of running instances of some types only
        if found.state == InstanceState::Running
            && topology::supported(&found.offering.instance_type)
        {
            match topology::network_nodes(&self.clients.ec2, &[id.to_string()]).await {
                Ok(mut nodes) => found.network = nodes.remove(id).unwrap_or_default(),
                // the network is an aid to placement, not a reason to fail
                Err(e) => tracing::warn!(error = %e, instance = id, "no instance topology"),
            }
        }
        Ok(found)
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError> {
        instances::terminate(&self.clients.ec2, provider_id).await
    }

    /// Without network nodes: the list serves orphan collection, which
    /// needs none, and runs every cycle.
    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError> {
        instances::list(&self.clients.ec2, cluster).await
    }

    async fn placement_groups(&self, cluster: &str) -> Result<Vec<String>, ProviderError> {
        placement_groups::list(&self.clients.ec2, cluster).await
    }

    async fn delete_placement_group(&self, cluster: &str, name: &str) -> Result<(), ProviderError> {
        placement_groups::delete(&self.clients.ec2, cluster, name).await
    }

    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError> {
        let Some(url) = &self.options.interruption_queue else {
            return Ok(Vec::new());
        };
        let notices = queue::drain(&self.clients.sqs, url).await?;
        if notices.is_empty() {
            return Ok(Vec::new());
        }
        // the events name instance ids; provider ids need the zone
        let ids: Vec<String> = notices
            .iter()
            .map(|n| n.instance_id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let zones: BTreeMap<String, String> =
            match instances::describe(&self.clients.ec2, &ids, Vec::new()).await {
                Ok(list) => list
                    .into_iter()
                    .filter_map(|i| {
                        let id = instances::instance_id(&i.provider_id)?.to_string();
                        Some((id, i.offering.zone))
                    })
                    .collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "could not describe interrupted instances");
                    BTreeMap::new()
                }
            };
        let now = Time(now_epoch());
        Ok(notices
            .into_iter()
            .filter_map(|n| {
                let zone = zones.get(&n.instance_id)?;
                Some(Interruption {
                    provider_id: instances::provider_id(zone, &n.instance_id),
                    kind: n.kind,
                    at: n.at.unwrap_or(now),
                })
            })
            .collect())
    }
}
