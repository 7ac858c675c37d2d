//! The behaviours every [`CloudProvider`] must show, as one suite that each
//! provider's tests run against their cloud or stand-in (feature
//! `test-support`): the simulated cloud, the moto-backed AWS provider, the
//! GCP provider on the local Compute fake.
//!
//! A provider's test supplies a [`Harness`] (the provider, two offerings
//! the cloud sells, and the means to provoke what a test cannot ask of the
//! trait: a capacity shortage, an interruption) and runs every case of
//! [`CASES`] on a fresh one:
//!
//! ```ignore
//! for (name, case) in muster_provider_api::conformance::CASES {
//!     let h = MyHarness::start().await;
//!     case(&h).await.unwrap_or_else(|e| panic!("{name}: {e}"));
//! }
//! ```
//!
//! What each case asks is what the controller relies on (see the trait's
//! documentation): a launch repeated with its idempotency key never makes a
//! second machine; a capacity error is [`ProviderError::InsufficientCapacity`]
//! naming the offering asked for, and leaves nothing behind; `list` shows
//! exactly the cluster's machines; terminating twice, or terminating a
//! machine that is gone, is success; an unknown id is `NotFound`; an
//! interruption notice names the instance and arrives once.
//!
//! Where the clouds say so: EC2's `RunInstances` returns the instance an
//! earlier call with the same `ClientToken` made ("Ensuring idempotency",
//! EC2 API Reference), and `TerminateInstances` is idempotent, each call
//! succeeding, with terminated instances visible for about an hour (EC2 API
//! Reference, `TerminateInstances`; hence "live" below leaves shutting-down
//! and terminated machines out); Compute Engine's `instances.insert` with
//! the same `requestId` is the same operation (Compute API reference,
//! `instances.insert`). Karpenter asks the same of its cloud providers
//! (`kubernetes-sigs/karpenter`, `pkg/cloudprovider/types.go`: `Create`,
//! `Delete` of a gone machine answering not-found, `Get`, `List`).

use std::future::Future;
use std::pin::Pin;

use muster_planner::OfferingKey;

use crate::{
    CloudProvider, Instance, InstanceState, InterruptionKind, LaunchRequest, ProviderError,
};

/// A provider under test and the controls of its cloud.
#[async_trait::async_trait]
pub trait Harness: Send + Sync {
    /// The provider under test.
    fn provider(&self) -> &dyn CloudProvider;

    /// An offering the cloud sells, on demand (`spot: false`) or spot; the
    /// two are of different instance types (a capacity shortage of one
    /// leaves the other).
    fn offering(&self, spot: bool) -> OfferingKey;

    /// A well-formed provider id of no instance.
    fn unknown_id(&self) -> String;

    /// From now on, the cloud has no capacity for `offering`.
    async fn exhaust(&self, offering: &OfferingKey);

    /// The cloud reclaims `instance` (a spot interruption or preemption):
    /// its notice is readable from `interruptions` when this returns.
    async fn interrupt(&self, instance: &Instance);
}

/// Why a case failed.
pub type Failure = String;

/// One case's future.
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send + 'a>>;

/// One case of the suite.
pub type Case = for<'a> fn(&'a dyn Harness) -> CaseFuture<'a>;

/// Every case, by name.
pub const CASES: &[(&str, Case)] = &[
    ("launch_is_idempotent_by_key", |h| {
        Box::pin(launch_is_idempotent_by_key(h))
    }),
    ("capacity_errors_name_the_offering", |h| {
        Box::pin(capacity_errors_name_the_offering(h))
    }),
    ("list_shows_exactly_the_cluster", |h| {
        Box::pin(list_shows_exactly_the_cluster(h))
    }),
    ("terminate_twice_is_success", |h| {
        Box::pin(terminate_twice_is_success(h))
    }),
    ("unknown_ids_are_not_found", |h| {
        Box::pin(unknown_ids_are_not_found(h))
    }),
    ("interruptions_name_the_instance_once", |h| {
        Box::pin(interruptions_name_the_instance_once(h))
    }),
];

/// Fails with `what` unless `ok`.
fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), Failure> {
    if ok { Ok(()) } else { Err(what()) }
}

/// A launch request of `offering` for `cluster`, PoolNode `name`, key `key`.
pub fn request(name: &str, key: &str, cluster: &str, offering: OfferingKey) -> LaunchRequest {
    LaunchRequest {
        name: name.into(),
        idempotency_key: key.into(),
        offering,
        pool: "conformance".into(),
        cluster: cluster.into(),
        gang: None,
        labels: Default::default(),
        taints: Vec::new(),
        tags: Default::default(),
        placement_group: None,
        grant: None,
    }
}

async fn launch(h: &dyn Harness, req: &LaunchRequest) -> Result<Instance, Failure> {
    h.provider()
        .launch(req)
        .await
        .map_err(|e| format!("launch {}: {e}", req.name))
}

/// Live (not terminated, not shutting down) instances of `cluster`.
async fn live(h: &dyn Harness, cluster: &str) -> Result<Vec<Instance>, Failure> {
    let all = h
        .provider()
        .list(cluster)
        .await
        .map_err(|e| format!("list {cluster}: {e}"))?;
    Ok(all
        .into_iter()
        .filter(|i| {
            !matches!(
                i.state,
                InstanceState::Terminated | InstanceState::ShuttingDown
            )
        })
        .collect())
}

/// The same key twice (and from a request that differs only in its name)
/// gives the same instance; one machine exists.
pub async fn launch_is_idempotent_by_key(h: &dyn Harness) -> Result<(), Failure> {
    let req = request("pn-same-0", "key-same-0", "conf-idem", h.offering(false));
    let a = launch(h, &req).await?;
    let b = launch(h, &req).await?;
    check(a.provider_id == b.provider_id, || {
        format!(
            "a second launch with the key made {} besides {}",
            b.provider_id, a.provider_id
        )
    })?;
    check(a.offering == req.offering, || {
        format!("launched {} for {}", a.offering, req.offering)
    })?;
    let listed = live(h, "conf-idem").await?;
    check(listed.len() == 1, || {
        format!("one key, {} machines: {listed:?}", listed.len())
    })?;
    let described = h
        .provider()
        .describe(&a.provider_id)
        .await
        .map_err(|e| format!("describe {}: {e}", a.provider_id))?;
    check(described.provider_id == a.provider_id, || {
        format!("describe answered {}", described.provider_id)
    })
}

/// With no capacity, a launch is `InsufficientCapacity` naming exactly the
/// offering asked for, and no machine is left; other offerings still launch.
pub async fn capacity_errors_name_the_offering(h: &dyn Harness) -> Result<(), Failure> {
    let short = h.offering(false);
    h.exhaust(&short).await;
    let req = request("pn-short-0", "key-short-0", "conf-ice", short.clone());
    match h.provider().launch(&req).await {
        Err(ProviderError::InsufficientCapacity { offering, .. }) => {
            check(offering == short, || {
                format!("the error names {offering}, the launch asked for {short}")
            })?;
        }
        other => {
            return Err(format!(
                "want InsufficientCapacity for {short}, got {other:?}"
            ));
        }
    }
    let listed = live(h, "conf-ice").await?;
    check(listed.is_empty(), || {
        format!("a failed launch left machines: {listed:?}")
    })?;
    let other = h.offering(true);
    let inst = launch(h, &request("pn-short-1", "key-short-1", "conf-ice", other)).await?;
    let listed = live(h, "conf-ice").await?;
    check(
        listed.len() == 1 && listed[0].provider_id == inst.provider_id,
        || format!("another offering still launches: {listed:?}"),
    )
}

/// `list` shows the cluster's machines, each recording its PoolNode, and
/// nothing of another cluster.
pub async fn list_shows_exactly_the_cluster(h: &dyn Harness) -> Result<(), Failure> {
    let mut mine = Vec::new();
    for i in 0..2 {
        let req = request(
            &format!("pn-mine-{i}"),
            &format!("key-mine-{i}"),
            "conf-mine",
            h.offering(false),
        );
        mine.push(launch(h, &req).await?.provider_id);
    }
    let theirs = launch(
        h,
        &request(
            "pn-theirs-0",
            "key-theirs-0",
            "conf-theirs",
            h.offering(false),
        ),
    )
    .await?
    .provider_id;
    let listed = live(h, "conf-mine").await?;
    let mut ids: Vec<&str> = listed.iter().map(|i| i.provider_id.as_str()).collect();
    ids.sort_unstable();
    let mut want: Vec<&str> = mine.iter().map(String::as_str).collect();
    want.sort_unstable();
    check(ids == want, || format!("listed {ids:?}, launched {want:?}"))?;
    check(!ids.contains(&theirs.as_str()), || {
        format!("{theirs} of another cluster listed")
    })?;
    check(
        listed.iter().all(|i| {
            i.pool_node
                .as_deref()
                .is_some_and(|n| n.starts_with("pn-mine-"))
        }),
        || format!("every machine names its PoolNode: {listed:?}"),
    )?;
    let none = live(h, "conf-nobody").await?;
    check(none.is_empty(), || {
        format!("a cluster with no machines lists {none:?}")
    })
}

/// Terminating twice is success, and the machine leaves the live list.
pub async fn terminate_twice_is_success(h: &dyn Harness) -> Result<(), Failure> {
    let inst = launch(
        h,
        &request("pn-gone-0", "key-gone-0", "conf-gone", h.offering(false)),
    )
    .await?;
    for attempt in ["first", "second"] {
        h.provider()
            .terminate(&inst.provider_id)
            .await
            .map_err(|e| format!("{attempt} terminate of {}: {e}", inst.provider_id))?;
    }
    let listed = live(h, "conf-gone").await?;
    check(listed.is_empty(), || {
        format!("terminated but live: {listed:?}")
    })
}

/// An id of no instance: `describe` is `NotFound`; `terminate` is success
/// or `NotFound` (gone is gone), never another error.
pub async fn unknown_ids_are_not_found(h: &dyn Harness) -> Result<(), Failure> {
    let id = h.unknown_id();
    match h.provider().describe(&id).await {
        Err(ProviderError::NotFound { .. }) => {}
        other => return Err(format!("describe {id}: want NotFound, got {other:?}")),
    }
    match h.provider().terminate(&id).await {
        Ok(()) | Err(ProviderError::NotFound { .. }) => Ok(()),
        Err(e) => Err(format!("terminate {id}: {e}")),
    }
}

/// A reclaimed spot machine's notice names it, says it was reclaimed, and
/// arrives once.
pub async fn interruptions_name_the_instance_once(h: &dyn Harness) -> Result<(), Failure> {
    let inst = launch(
        h,
        &request("pn-spot-0", "key-spot-0", "conf-spot", h.offering(true)),
    )
    .await?;
    let before = h
        .provider()
        .interruptions()
        .await
        .map_err(|e| format!("interruptions: {e}"))?;
    check(
        before.iter().all(|n| n.provider_id != inst.provider_id),
        || format!("a notice before any interruption: {before:?}"),
    )?;
    h.interrupt(&inst).await;
    let notices = h
        .provider()
        .interruptions()
        .await
        .map_err(|e| format!("interruptions: {e}"))?;
    let mine: Vec<_> = notices
        .iter()
        .filter(|n| n.provider_id == inst.provider_id)
        .collect();
    check(mine.len() == 1, || {
        format!("one notice for {}, got {notices:?}", inst.provider_id)
    })?;
    check(
        matches!(
            mine[0].kind,
            InterruptionKind::SpotInterruption | InterruptionKind::Preempted
        ),
        || format!("a reclaimed machine's notice, got {:?}", mine[0].kind),
    )?;
    let again = h
        .provider()
        .interruptions()
        .await
        .map_err(|e| format!("interruptions: {e}"))?;
    check(
        again.iter().all(|n| n.provider_id != inst.provider_id),
        || format!("the notice arrived twice: {again:?}"),
    )
}
