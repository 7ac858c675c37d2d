//! [`GcpProvider`]: the `CloudProvider` of one GCP NodeClass.
//!
//! Calls per launch: `instances.insert` (deterministic name, `requestId`)
//! and `zoneOperations.wait` until the operation is done; an insert that
//! finds the name taken reads the instance with `instances.get` and adopts
//! it. Offerings list `machineTypes` and `acceleratorTypes` per zone;
//! `list` and preemption detection use `instances.aggregatedList` filtered
//! by the cluster label.
//!
//! With `spec.gcp.reservations`, the selected reservations are read with
//! `reservations.aggregatedList` (for pools that take `reserved` capacity)
//! and offered as `reserved` offerings; a launch into one reads it with
//! `reservations.get` when the last reading lacks it ([`crate::reservations`]).
//!
//! With `spec.gcp.cluster`, machines are GKE nodes that GKE makes: a launch
//! adds a named instance to the managed instance group of a node pool of
//! the launch's shape, and a termination deletes it from its group
//! ([`gke_nodes`](crate::gke_nodes)).

use std::sync::Mutex;

use async_trait::async_trait;
use muster_crds::nodeclass::GcpNodeClass;
use muster_planner::{CapacityType, Offering, PoolRequirements, Provider, Time};
use muster_provider_api::{
    CloudProvider, Instance, Interruption, LaunchRequest, ProviderError, Resolution, ResolvedImage,
    label_key, tags,
};
use serde_json::Value;

use crate::compute::{
    Clients, GcpOptions, GkeClients, connect, connect_gke, failure, operation_error,
};
use crate::gke;
use crate::gke_nodes::PoolMemory;
use crate::insert::{insert_body, label_value, request_id};
use crate::instance::parse_instance;
use crate::names::{instance_name, parse_provider_id};
use crate::offerings::{AcceleratorType, MachineType, ZoneContext, zone_offerings};
use crate::preemptions::Preemptions;
use crate::prices::PriceTable;
use crate::reservations::{self, RESERVATION_TTL, Reservation};

/// One GCP NodeClass's provider.
pub struct GcpProvider {
    node_class: String,
    pub(crate) class: GcpNodeClass,
    clients: Clients,
    prices: PriceTable,
    preemptions: Mutex<Preemptions>,
    reservations: Mutex<reservations::Cache>,
    pub(crate) gke: Option<GkeClients>,
    pub(crate) pools: Mutex<PoolMemory>,
    pub(crate) poll_interval: std::time::Duration,
}

/// The kubelet flags the node registers with (metadata `muster-bootstrap`):
/// the pool's labels and taints.
pub fn kubelet_args(request: &LaunchRequest) -> String {
    let labels = request
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let taints = request
        .taints
        .iter()
        .map(|t| format!("{}={}:{:?}", t.key, t.value, t.effect))
        .collect::<Vec<_>>()
        .join(",");
    let mut args = Vec::new();
    if !labels.is_empty() {
        args.push(format!("--node-labels={labels}"));
    }
    if !taints.is_empty() {
        args.push(format!("--register-with-taints={taints}"));
    }
    args.join(" ")
}

/// A client answer as JSON (the fields the provider reads by name).
pub(crate) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Every page of a Compute list call, as JSON, in order: `fetch` is called
/// with each page token (empty for the first page) until a page names no
/// `nextPageToken` (Compute API, "Pagination": an absent or empty token is
/// the last page).
pub(crate) async fn every_page<F, Fut>(mut fetch: F) -> Result<Vec<Value>, ProviderError>
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Result<Value, ProviderError>>,
{
    let mut pages = Vec::new();
    let mut token = String::new();
    loop {
        let page = fetch(token).await?;
        token = page["nextPageToken"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        pages.push(page);
        if token.is_empty() {
            return Ok(pages);
        }
    }
}

/// Every page of a zonal `list` of `client` in `project` and `zone`, as
/// [`every_page`] reads them. A macro: the generated clients share no trait
/// for `list`.
macro_rules! zonal_list {
    ($client:expr, $project:expr, $zone:expr) => {{
        let (client, project, zone) = (&$client, $project, $zone);
        every_page(move |token| async move {
            client
                .list()
                .set_project(project)
                .set_zone(zone)
                .set_page_token(token)
                .send()
                .await
                .map(|page| to_value(&page))
                .map_err(|e| failure(&e, None))
        })
    }};
}

/// The `items` of every page that read as `T`; an item that does not (a
/// shape muster does not know) is left out.
fn items_of<T: serde::de::DeserializeOwned>(pages: &[Value]) -> Vec<T> {
    pages
        .iter()
        .flat_map(|v| v["items"].as_array().into_iter().flatten())
        .filter_map(|item| serde_json::from_value::<T>(item.clone()).ok())
        .collect()
}

/// A [`ProviderError::Permanent`] with this message.
pub(crate) fn permanent_error(message: String) -> ProviderError {
    ProviderError::Permanent { message }
}

pub(crate) fn now() -> Time {
    Time(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0),
    )
}

impl GcpProvider {
    /// A provider for a NodeClass spec (the whole `spec`, with its `gcp` block).
    pub async fn new(
        node_class: &str,
        spec: &Value,
        options: &GcpOptions,
    ) -> Result<Self, ProviderError> {
        let class: GcpNodeClass = spec
            .get("gcp")
            .cloned()
            .ok_or_else(|| ProviderError::Permanent {
                message: "spec.gcp: missing".into(),
            })
            .and_then(|v| {
                serde_json::from_value(v).map_err(|e| ProviderError::Permanent {
                    message: format!("spec.gcp: {e}"),
                })
            })?;
        let gke = match &class.cluster {
            Some(_) => Some(connect_gke(options).await?),
            None => None,
        };
        let mut p = Self::with_clients(node_class, class, connect(options).await?);
        p.gke = gke;
        p.poll_interval = options.poll_interval;
        Ok(p)
    }

    /// The same provider with GKE clients (tests build them with `from_stub`).
    pub fn with_gke(mut self, gke: GkeClients) -> Self {
        self.gke = Some(gke);
        self
    }

    /// The GPUs of a machine: the attached ones, or the machine type's
    /// built-in accelerators (`machineTypes.get`); type and count.
    pub(crate) async fn accelerator(
        &self,
        zone: &str,
        offering: &str,
    ) -> Result<Option<(String, u32)>, ProviderError> {
        let Some((machine, attached)) = crate::prices::parse_offering_name(offering) else {
            return Ok(None);
        };
        if let Some((accel, count)) = attached {
            return Ok(Some((accel.to_string(), count)));
        }
        let mt = self
            .clients
            .machine_types
            .get()
            .set_project(&self.class.project)
            .set_zone(zone)
            .set_machine_type(machine)
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        let v = to_value(&mt);
        let a = &v["accelerators"][0];
        Ok(a["guestAcceleratorType"].as_str().map(|t| {
            let n = a["guestAcceleratorCount"].as_u64().unwrap_or(1);
            (t.to_string(), u32::try_from(n).unwrap_or(1))
        }))
    }

    /// A provider on given clients (tests build them with `from_stub`).
    pub fn with_clients(node_class: &str, class: GcpNodeClass, clients: Clients) -> Self {
        GcpProvider {
            node_class: node_class.to_string(),
            class,
            clients,
            prices: PriceTable::default(),
            preemptions: Mutex::new(Preemptions::default()),
            reservations: Mutex::default(),
            gke: None,
            pools: Mutex::default(),
            poll_interval: GcpOptions::default().poll_interval,
        }
    }

    /// The NodeClass's zones, or every zone of its region (`zones.list`).
    async fn zones(&self) -> Result<Vec<String>, ProviderError> {
        if !self.class.zones.is_empty() {
            return Ok(self.class.zones.clone());
        }
        let list = self
            .clients
            .zones
            .list()
            .set_project(&self.class.project)
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        let suffix = format!("/regions/{}", self.class.region);
        let mut zones: Vec<String> = to_value(&list)["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|z| z["region"].as_str().is_some_and(|r| r.ends_with(&suffix)))
            .filter_map(|z| z["name"].as_str().map(String::from))
            .collect();
        zones.sort();
        if zones.is_empty() {
            return Err(ProviderError::NotFound {
                what: format!("spec.gcp.region {} (no zones)", self.class.region),
            });
        }
        Ok(zones)
    }

    async fn list_zone(
        &self,
        zone: &str,
    ) -> Result<(Vec<MachineType>, Vec<AcceleratorType>), ProviderError> {
        let project = self.class.project.as_str();
        let machines = items_of(&zonal_list!(self.clients.machine_types, project, zone).await?);
        let accelerators =
            items_of(&zonal_list!(self.clients.accelerator_types, project, zone).await?);
        Ok((machines, accelerators))
    }

    fn reservation_cache(&self) -> std::sync::MutexGuard<'_, reservations::Cache> {
        self.reservations.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The selected reservations in `zones` that are `READY`: none without
    /// `spec.gcp.reservations`; else as read within [`RESERVATION_TTL`],
    /// less the launches made into them since.
    async fn reservations(&self, zones: &[String]) -> Result<Vec<Reservation>, ProviderError> {
        if self.class.reservations.is_empty() {
            return Ok(Vec::new());
        }
        if let Some(list) = self.reservation_cache().fresh(RESERVATION_TTL) {
            return Ok(list);
        }
        let mut found = Vec::new();
        let list = &self.clients.reservations;
        for (owner, names) in reservations::selected(&self.class) {
            let owner_ref = &owner;
            let pages = every_page(|token| async move {
                list.aggregated_list()
                    .set_project(owner_ref)
                    .set_page_token(token)
                    .send()
                    .await
                    .map(|page| to_value(&page))
                    .map_err(|e| failure(&e, None))
            })
            .await?;
            for v in &pages {
                found.extend(reservations::of_aggregated_page(&owner, v, &names, zones));
            }
        }
        found.sort_by(|a, b| (&a.zone, a.id()).cmp(&(&b.zone, b.id())));
        self.reservation_cache().store(found.clone());
        Ok(found)
    }

    /// The selected reservation `id` in `zone`, read with `reservations.get`
    /// when the last reading lacks it.
    async fn reservation(&self, id: &str, zone: &str) -> Result<Reservation, ProviderError> {
        if let Some(r) = self.reservation_cache().get(id, zone) {
            return Ok(r);
        }
        let not_found = || ProviderError::NotFound {
            what: format!(
                "reservation {id} in {zone}: not READY, or not selected by spec.gcp.reservations"
            ),
        };
        let selected = self
            .class
            .reservations
            .iter()
            .any(|r| r.affinity_value(&self.class.project) == id);
        if !selected {
            return Err(not_found());
        }
        let (owner, name) = reservations::owner_and_name(&self.class.project, id);
        let got = self
            .clients
            .reservations
            .get()
            .set_project(owner)
            .set_zone(zone)
            .set_reservation(name)
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        let r = reservations::of_compute(owner, &to_value(&got), id.to_string())
            .filter(|r| r.zone == zone)
            .ok_or_else(not_found)?;
        self.reservation_cache().put(r.clone());
        Ok(r)
    }

    /// The reservation a reserved launch goes into, checked against the
    /// offering: the same zone and machine shape.
    async fn reservation_of(&self, request: &LaunchRequest) -> Result<Reservation, ProviderError> {
        let offering = &request.offering;
        let id = offering.reservation.as_deref().ok_or_else(|| {
            permanent_error("a reserved offering that names no reservation".into())
        })?;
        let r = self.reservation(id, &offering.zone).await?;
        if r.instance_type() != offering.instance_type {
            return Err(permanent_error(format!(
                "reservation {id} holds {} in {}, not {}",
                r.instance_type(),
                r.zone,
                offering.instance_type
            )));
        }
        Ok(r)
    }

    /// One plain VM: `instances.insert`, then the operation waited for; a
    /// name already taken is the instance an earlier try made, adopted.
    async fn insert_vm(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        let zone = request.offering.zone.clone();
        let name = instance_name(&request.idempotency_key);
        let permanent = |e: &dyn std::fmt::Display| ProviderError::Permanent {
            message: e.to_string(),
        };
        let body =
            insert_body(&self.class, request, &kubelet_args(request)).map_err(|e| permanent(&e))?;
        let instance: google_cloud_compute_v1::model::Instance = serde_json::from_value(body)
            .map_err(|e| ProviderError::Permanent {
                message: format!("insert body: {e}"),
            })?;
        let sent = self
            .clients
            .instances
            .insert()
            .set_project(&self.class.project)
            .set_zone(&zone)
            .set_request_id(request_id(&request.idempotency_key))
            .set_body(instance)
            .send()
            .await;
        let op = match sent {
            Ok(op) => to_value(&op),
            Err(e) => {
                let err = failure(&e, Some(&request.offering));
                // the name is taken: an earlier launch with this key made it; adopt it
                if e.http_status_code() == Some(409) {
                    return self.get(&zone, &name).await;
                }
                return Err(err);
            }
        };
        let done = self.wait(&zone, op).await?;
        if let Some(err) = operation_error(&done, Some(&request.offering)) {
            return Err(err);
        }
        self.get(&zone, &name).await
    }

    /// The instance resource as Compute answers it.
    async fn instance_value(&self, zone: &str, name: &str) -> Result<Value, ProviderError> {
        let inst = self
            .clients
            .instances
            .get()
            .set_project(&self.class.project)
            .set_zone(zone)
            .set_instance(name)
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        Ok(to_value(&inst))
    }

    pub(crate) async fn get(&self, zone: &str, name: &str) -> Result<Instance, ProviderError> {
        let v = self.instance_value(zone, name).await?;
        parse_instance(&self.class.project, &v).map_err(|e| ProviderError::Permanent {
            message: e.to_string(),
        })
    }

    async fn wait(&self, zone: &str, op: Value) -> Result<Value, ProviderError> {
        let project = self.class.project.clone();
        self.wait_in(&project, zone, op).await
    }

    /// Waits for a zone operation of `project` to be `DONE`.
    pub(crate) async fn wait_in(
        &self,
        project: &str,
        zone: &str,
        op: Value,
    ) -> Result<Value, ProviderError> {
        let mut op = op;
        for _ in 0..120 {
            if op["status"].as_str() == Some("DONE") {
                return Ok(op);
            }
            let name = op["name"].as_str().unwrap_or_default().to_string();
            let next = self
                .clients
                .operations
                .wait()
                .set_project(project)
                .set_zone(zone)
                .set_operation(name)
                .send()
                .await
                .map_err(|e| failure(&e, None))?;
            op = to_value(&next);
        }
        Err(ProviderError::Transient {
            message: "operation not done after 120 waits".into(),
            retry_after: None,
        })
    }

    /// Instances of every zone matching a filter (`instances.aggregatedList`).
    async fn aggregated(&self, filter: String) -> Result<Vec<Value>, ProviderError> {
        let resp = self
            .clients
            .instances
            .aggregated_list()
            .set_project(&self.class.project)
            .set_filter(filter)
            .send()
            .await
            .map_err(|e| failure(&e, None))?;
        let v = to_value(&resp);
        let mut out = Vec::new();
        for scope in v["items"].as_object().into_iter().flat_map(|m| m.values()) {
            out.extend(scope["instances"].as_array().into_iter().flatten().cloned());
        }
        Ok(out)
    }
}

#[async_trait]
impl CloudProvider for GcpProvider {
    fn provider(&self) -> Provider {
        Provider::Gcp
    }

    async fn resolve(&self) -> Result<Resolution, ProviderError> {
        if let Some(cluster) = &self.class.cluster {
            let (clients, _) = self.gke_clients()?;
            gke::check_cluster(clients, cluster).await?;
            // GKE chooses the node image of each node pool
            return Ok(Resolution {
                zones: self.zones().await?,
                ..Resolution::default()
            });
        }
        let image = self
            .class
            .image
            .clone()
            .ok_or_else(|| ProviderError::NotFound {
                what: "spec.gcp.image".into(),
            })?;
        Ok(Resolution {
            zones: self.zones().await?,
            images: vec![ResolvedImage {
                id: image,
                name: None,
                architecture: None,
            }],
            ..Resolution::default()
        })
    }

    async fn offerings(
        &self,
        requirements: &PoolRequirements,
    ) -> Result<Vec<Offering>, ProviderError> {
        let mut out = Vec::new();
        let mut listed = Vec::new();
        let flex_start =
            crate::flex_start::terms(&self.class).map_err(|e| permanent_error(e.to_string()))?;
        for zone in self.zones().await? {
            if !requirements.zones.is_empty() && !requirements.zones.contains(&zone) {
                continue;
            }
            let (machines, accelerators) = self.list_zone(&zone).await?;
            let ctx = ZoneContext {
                node_class: &self.node_class,
                region: &self.class.region,
                zone: &zone,
                flex_start,
                gke: self.class.cluster.is_some(),
            };
            out.extend(
                zone_offerings(&ctx, &machines, &accelerators, &self.prices)
                    .into_iter()
                    .filter(|o| requirements.admits(o)),
            );
            listed.push((zone, machines));
        }
        // reserved capacity only for pools that take it, as the AWS provider
        if requirements
            .capacity_types
            .contains(&CapacityType::Reserved)
        {
            let zones: Vec<String> = listed.iter().map(|(z, _)| z.clone()).collect();
            for r in self.reservations(&zones).await? {
                let Some((zone, machines)) = listed.iter().find(|(z, _)| *z == r.zone) else {
                    continue;
                };
                let ctx = ZoneContext {
                    node_class: &self.node_class,
                    region: &self.class.region,
                    zone,
                    flex_start: None,
                    gke: self.class.cluster.is_some(),
                };
                out.extend(
                    reservations::reserved_offering(&ctx, machines, &r)
                        .filter(|o| requirements.admits(o)),
                );
            }
        }
        out.sort_by_key(|o| o.key());
        Ok(out)
    }

    async fn launch(&self, request: &LaunchRequest) -> Result<Instance, ProviderError> {
        let reserved = match request.offering.capacity_type {
            CapacityType::Reserved => Some(self.reservation_of(request).await?),
            _ => None,
        };
        let launched = if self.class.cluster.is_some() {
            self.launch_in_pool(request).await
        } else {
            self.insert_vm(request).await
        };
        if let Some(r) = reserved {
            let mut cache = self.reservation_cache();
            match &launched {
                // a launch repeated with the same key takes one again here;
                // the next reading corrects it
                Ok(_) => cache.took_one(r.id(), &r.zone),
                Err(ProviderError::InsufficientCapacity { .. }) => cache.exhausted(r.id(), &r.zone),
                Err(_) => {}
            }
        }
        launched
    }

    async fn describe(&self, provider_id: &str) -> Result<Instance, ProviderError> {
        let (_, zone, name) =
            parse_provider_id(provider_id).ok_or_else(|| ProviderError::NotFound {
                what: provider_id.to_string(),
            })?;
        self.get(zone, name).await
    }

    async fn terminate(&self, provider_id: &str) -> Result<(), ProviderError> {
        let Some((_, zone, name)) = parse_provider_id(provider_id) else {
            return Err(ProviderError::Permanent {
                message: format!("{provider_id} is not a GCE provider id"),
            });
        };
        if self.class.cluster.is_some() {
            // a GKE node goes through its group: read which group made it
            let created_by = match self.instance_value(zone, name).await {
                Ok(v) => crate::instance::metadata(&v, "created-by"),
                Err(ProviderError::NotFound { .. }) => None,
                Err(e) => return Err(e),
            };
            if self
                .terminate_in_pool(zone, name, created_by.as_deref())
                .await?
            {
                return Ok(());
            }
        }
        let sent = self
            .clients
            .instances
            .delete()
            .set_project(&self.class.project)
            .set_zone(zone)
            .set_instance(name)
            .send()
            .await;
        match sent {
            Ok(op) => {
                let done = self.wait(zone, to_value(&op)).await?;
                match operation_error(&done, None) {
                    None | Some(ProviderError::NotFound { .. }) => Ok(()),
                    Some(e) => Err(e),
                }
            }
            Err(e) => match failure(&e, None) {
                ProviderError::NotFound { .. } => Ok(()),
                err => Err(err),
            },
        }
    }

    async fn list(&self, cluster: &str) -> Result<Vec<Instance>, ProviderError> {
        let mut out: Vec<Instance> = self
            .aggregated(format!(
                "labels.{} = \"{}\"",
                label_key(tags::CLUSTER),
                label_value(cluster)
            ))
            .await?
            .iter()
            .filter_map(|v| parse_instance(&self.class.project, v).ok())
            .collect();
        out.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
        Ok(out)
    }

    async fn delete_empty_groups(&self) -> Result<Vec<String>, ProviderError> {
        if self.class.cluster.is_none() {
            return Ok(Vec::new());
        }
        let ttl = self
            .class
            .empty_node_pool_ttl
            .to_std()
            .map_err(|e| permanent_error(format!("spec.gcp.emptyNodePoolTTL: {e}")))?;
        self.delete_empty_pools(ttl).await
    }

    async fn interruptions(&self) -> Result<Vec<Interruption>, ProviderError> {
        // instances of every cluster this NodeClass launched for, plain VMs
        // and GKE nodes alike (both carry the pool label): the cluster label
        // names the cluster, so read them all and let the controller match
        let all = self
            .aggregated(format!("labels.{}:*", label_key(tags::POOL)))
            .await?;
        let mut found = {
            let mut p = self.preemptions.lock().unwrap_or_else(|e| e.into_inner());
            p.poll(&self.class.project, &all, now())
        };
        if self.class.cluster.is_some() {
            // a node pool's group recreates a preempted instance under its
            // name: GCE's system event is what stays
            let mut events = Vec::new();
            for zone in self.zones().await? {
                let ops = self
                    .clients
                    .operations
                    .list()
                    .set_project(&self.class.project)
                    .set_zone(&zone)
                    .set_filter("operationType=\"compute.instances.preempted\"")
                    .send()
                    .await
                    .map_err(|e| failure(&e, None))?;
                events.extend(
                    to_value(&ops)["items"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
            let mut p = self.preemptions.lock().unwrap_or_else(|e| e.into_inner());
            for e in p.events(&self.class.project, &events, now()) {
                if !found.iter().any(|f| f.provider_id == e.provider_id) {
                    found.push(e);
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_compute_v1::client::{
        AcceleratorTypes, Instances, MachineTypes, Reservations, ZoneOperations, Zones,
    };
    use google_cloud_compute_v1::{model, stub};
    use muster_planner::{CapacityType, OfferingKey, Taint, TaintEffect};

    #[derive(Debug)]
    struct OneInstance;

    impl stub::Instances for OneInstance {
        async fn get(
            &self,
            req: model::instances::GetRequest,
            _options: google_cloud_gax::options::RequestOptions,
        ) -> google_cloud_compute_v1::Result<google_cloud_gax::response::Response<model::Instance>>
        {
            let v = serde_json::json!({
                "name": req.instance,
                "status": "RUNNING",
                "zone": format!("https://www.googleapis.com/compute/v1/projects/{}/zones/{}", req.project, req.zone),
                "machineType": format!("https://www.googleapis.com/compute/v1/projects/{}/zones/{}/machineTypes/g2-standard-4", req.project, req.zone),
                "creationTimestamp": "2026-11-23T10:00:00.000-00:00",
                "labels": {"muster-cluster": "prod", "muster-poolnode": "pn-0"},
                "scheduling": {"provisioningModel": "SPOT"}
            });
            Ok(google_cloud_gax::response::Response::from(
                serde_json::from_value(v).expect("instance"),
            ))
        }
    }

    #[derive(Debug)]
    struct Nothing;
    impl stub::MachineTypes for Nothing {}
    impl stub::AcceleratorTypes for Nothing {}
    impl stub::ZoneOperations for Nothing {}
    impl stub::Zones for Nothing {}
    impl stub::Reservations for Nothing {}

    fn class() -> GcpNodeClass {
        serde_json::from_value(serde_json::json!({
            "project": "p", "region": "us-central1", "zones": ["us-central1-a"],
            "image": "projects/x/global/images/family/y"
        }))
        .expect("class")
    }

    #[tokio::test]
    async fn describe_reads_an_instance_from_the_client() {
        let clients = Clients {
            instances: Instances::from_stub(OneInstance),
            machine_types: MachineTypes::from_stub(Nothing),
            accelerator_types: AcceleratorTypes::from_stub(Nothing),
            operations: ZoneOperations::from_stub(Nothing),
            zones: Zones::from_stub(Nothing),
            reservations: Reservations::from_stub(Nothing),
        };
        let p = GcpProvider::with_clients("gcp", class(), clients);
        let i = p
            .describe("gce://p/us-central1-a/muster-abc")
            .await
            .expect("describe");
        assert_eq!(i.provider_id, "gce://p/us-central1-a/muster-abc");
        assert_eq!(i.offering.instance_type, "g2-standard-4");
        assert_eq!(i.offering.capacity_type, CapacityType::Spot);
        assert_eq!(i.pool_node.as_deref(), Some("pn-0"));
        // a provider id of another cloud is not found, without a call
        let r = p.describe("aws:///us-east-1a/i-1").await;
        assert!(matches!(r, Err(ProviderError::NotFound { .. })), "{r:?}");
    }

    #[test]
    fn kubelet_args_carry_labels_and_taints() {
        let req = LaunchRequest {
            name: "n".into(),
            idempotency_key: "k".into(),
            offering: OfferingKey {
                provider: Provider::Gcp,
                zone: "z".into(),
                instance_type: "g2-standard-4".into(),
                capacity_type: CapacityType::Spot,
                reservation: None,
            },
            pool: "l4".into(),
            cluster: "c".into(),
            gang: None,
            labels: [("muster.dev/pool".to_string(), "l4".to_string())].into(),
            taints: vec![Taint {
                key: "nvidia.com/gpu".into(),
                value: "true".into(),
                effect: TaintEffect::NoSchedule,
            }],
            tags: Default::default(),
            placement_group: None,
            grant: None,
        };
        assert_eq!(
            kubelet_args(&req),
            "--node-labels=muster.dev/pool=l4 --register-with-taints=nvidia.com/gpu=true:NoSchedule"
        );
    }
}
