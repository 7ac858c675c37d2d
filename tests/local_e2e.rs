//! The acceptance run's local twin: the steps of `e2e/run sim` (and of
//! docs/quickstart-local.md) with the API test server for the cluster, and
//! (module `aws`, with the `aws-test-support` feature) those of
//! `e2e/run aws` with moto for the account.
//!
//! The chart is rendered with the simulated cloud (`clouds={sim}`) and
//! otherwise its defaults (the controller manages the webhook's certificate:
//! it writes the Secret and patches the caBundle before it is Ready); its
//! CRDs and its MutatingWebhookConfiguration are applied to the API test
//! server, which calls the webhook as kube-apiserver does; the rendered Deployment's
//! args and env start the real `muster` binary. Then the example NodeClass
//! (`sim`), the acceptance pool and queue are applied and the labelled
//! two-node GPU Job is submitted. Checked: the webhook stores the Job
//! suspended, and it never has a pod before admission (watches ordered by
//! the server's revision: every pod is created after the controller's write
//! that unsuspends the Job, which comes after the Gang is Provisioning); two
//! simulated Nodes with a GPU each are launched and the pods run on both;
//! the Gang goes Queued → Provisioning → Admitted → Running → Finished; the
//! Job completes; the pool is back at zero nodes
//! (no PoolNode, no simulated Node); every request of the controller is one
//! the chart's RBAC allows. The kubelet and scheduler of the simulated
//! Nodes are the emulator's (a stand-in for kwok, which plays that part in
//! a real cluster): it binds the admitted pods and runs them for 2 s. A
//! second run kills the controller (SIGKILL) once the first simulated
//! machine exists and starts it again: no second machine or PoolNode.

mod helm;
mod support;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use helm::{find, objects, template};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube_runtime::watcher;
use serde_json::{Value as Json, json};
use support::emulator::Emulator;
use support::{ApiServer, ar, eventually};

const NS: &str = "muster-e2e";
const JOB: &str = "gang-2x1";

fn repo(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The one document of a YAML file, as JSON.
fn manifest(path: &str) -> Json {
    let text = std::fs::read_to_string(repo(path)).expect("manifest");
    let v: serde_norway::Value = serde_norway::from_str(&text).expect("YAML");
    serde_json::to_value(v).expect("as JSON")
}

fn http_get(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_whitespace().nth(1)?.parse().ok()
}

/// What a watch saw: (resourceVersion, object name, a value read from it).
type Seen = Arc<Mutex<Vec<(u64, String, String)>>>;

/// Watches one kind in the test namespace from the start and records, for
/// every event, the object's resourceVersion (the server's one revision
/// counter, so events of different kinds are ordered) and `read(object)`.
fn record(
    client: kube::Client,
    (group, version, kind, plural): (&str, &str, &str, &str),
    read: fn(&DynamicObject) -> String,
) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    let ar = kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, version, kind),
        plural,
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &ar);
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            let (Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o))) = ev else {
                continue;
            };
            let rv = o
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let name = o.metadata.name.clone().unwrap_or_default();
            out.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((rv, name, read(&o)));
        }
    });
    (seen, task)
}

fn snapshot(seen: &Seen) -> Vec<(u64, String, String)> {
    seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The API test server with the chart's CRDs, namespace and webhook
/// configuration applied (helm installs `crds/` first); the rendered
/// objects and the address the webhook is to listen on.
async fn setup() -> (ApiServer, kube::Client, Vec<serde_norway::Value>, String) {
    // helm template, as `e2e/run sim` installs it (a short tick for a test)
    setup_with(None, &["clouds={sim}", "tick=2s"]).await
}

/// [`setup`] with a values file of the chart and `--set` pairs.
async fn setup_with(
    values: Option<&str>,
    set: &[&str],
) -> (ApiServer, kube::Client, Vec<serde_norway::Value>, String) {
    let objs = objects(&template(values, set).expect("renders"));
    let webhook_addr = format!("127.0.0.1:{}", helm::rendered::free_port());
    let cfg = find(&objs, "MutatingWebhookConfiguration").clone();
    let svc = &cfg["webhooks"][0]["clientConfig"]["service"];
    let service = format!(
        "{}/{}={webhook_addr}",
        svc["namespace"].as_str().expect("service namespace"),
        svc["name"].as_str().expect("service name")
    );
    let server = ApiServer::start_with(&["--webhook-service", &service]);
    let client = server.client();

    // the chart's CRDs (helm installs crds/ first), its namespace and webhook
    let mut crds: Vec<_> = std::fs::read_dir(helm::chart().join("crds"))
        .expect("chart crds")
        .map(|e| e.expect("entry").path())
        .collect();
    crds.sort();
    for path in crds {
        let text = std::fs::read_to_string(&path).expect("crd");
        let v: serde_norway::Value = serde_norway::from_str(&text).expect("crd YAML");
        let crd = serde_json::to_value(v).expect("crd JSON");
        support::create_object(&client, "customresourcedefinitions", None, crd).await;
    }
    for name in ["muster-system", NS] {
        support::ensure_namespace(&client, name, json!({})).await;
    }
    let cfg_json = serde_json::to_value(&cfg).expect("webhook configuration");
    support::create_object(&client, "mutatingwebhookconfigurations", None, cfg_json).await;

    (server, client, objs, webhook_addr)
}

/// The controller as the rendered Deployment runs it, once Ready.
async fn start_controller(
    server: &ApiServer,
    objs: &[serde_norway::Value],
    webhook_addr: &str,
    tag: &str,
) -> helm::rendered::Controller {
    let controller = helm::rendered::start(objs, &server.url, webhook_addr, tag);
    let metrics = controller.metrics_addr.clone();
    eventually(30, "the controller Ready", || {
        let addr = metrics.clone();
        async move { (http_get(&addr, "/readyz") == Some(200)).then_some(()) }
    })
    .await;

    controller
}

/// The NodeClass, pool and queue, as e2e/run applies them; waits for the
/// NodeClass to be Ready.
async fn apply_examples(client: &kube::Client) {
    apply(
        client,
        manifest("docs/examples/nodeclass-sim.yaml"),
        manifest("e2e/manifests/pool-sim.yaml"),
    )
    .await;
}

/// Applies `nodeclass`, `pool` and the acceptance queue; waits for the
/// NodeClass to be Ready.
async fn apply(client: &kube::Client, nodeclass: Json, pool: Json) {
    let class = nodeclass["metadata"]["name"]
        .as_str()
        .expect("NodeClass name")
        .to_string();
    support::create(client, "NodeClass", "nodeclasses", None, nodeclass).await;
    support::create(client, "GPUPool", "gpupools", None, pool).await;
    support::create(
        client,
        "GPUQueue",
        "gpuqueues",
        None,
        manifest("e2e/manifests/queue.yaml"),
    )
    .await;
    eventually(30, &format!("NodeClass {class} Ready"), || {
        let client = client.clone();
        let class = class.clone();
        async move { support::waits::nodeclass_ready_status(&client, &class).await }
    })
    .await;
}

/// Submits the labelled Job and checks the webhook suspended it.
async fn submit_job(client: &kube::Client) -> Api<Job> {
    // the labelled Job, not suspended in its manifest: the webhook suspends it
    let job_manifest = manifest("e2e/manifests/job.yaml");
    assert_ne!(job_manifest["spec"]["suspend"], json!(true));
    let job: Job = serde_json::from_value(job_manifest).expect("job");
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let created = jobs
        .create(&PostParams::default(), &job)
        .await
        .expect("the Job is admitted by the API server");
    assert_eq!(
        created.spec.as_ref().and_then(|s| s.suspend),
        Some(true),
        "the webhook suspended the labelled Job at creation"
    );

    jobs
}

/// The simulated cloud's Nodes.
async fn sim_nodes(client: &kube::Client) -> Vec<Node> {
    Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels("muster.dev/sim-nodeclass=sim"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Waits for the Job to complete and the pool to be back at zero nodes.
async fn complete_and_back_to_zero(client: &kube::Client, jobs: &Api<Job>) {
    eventually(120, "the Job complete", || {
        let jobs = jobs.clone();
        async move {
            let j = jobs.get(JOB).await.ok()?;
            j.status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Complete" && c.status == "True")
                .then_some(())
        }
    })
    .await;
    // back at zero: no PoolNode of the pool, no Node of it (simulated or not)
    eventually(120, "pool e2e at zero nodes", || {
        let client = client.clone();
        async move {
            let pns = Api::<DynamicObject>::all_with(client.clone(), &ar("PoolNode", "poolnodes"))
                .list(&ListParams::default().labels("muster.dev/pool=e2e"))
                .await
                .ok()?;
            let nodes = Api::<Node>::all(client.clone())
                .list(&ListParams::default().labels("muster.dev/pool=e2e"))
                .await
                .ok()?;
            (pns.items.is_empty() && nodes.items.is_empty() && sim_nodes(&client).await.is_empty())
                .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_is_queued_provisioned_admitted_completed_and_scaled_to_zero() {
    let (server, client, objs, webhook_addr) = setup().await;

    // the controller, as the Deployment runs it
    let controller = start_controller(&server, &objs, &webhook_addr, "local-e2e").await;
    let container = helm::rendered::container(&objs);
    assert!(
        container["args"]
            .as_sequence()
            .expect("args")
            .iter()
            .any(|a| a.as_str() == Some("--cloud=sim")),
        "the chart passes --cloud=sim"
    );
    apply_examples(&client).await;

    // the Gang's phases (a Gang created without a status is Queued, the
    // phase's default), the Job's suspend flag and the pods' creation
    let (gang_seen, gang_task) = record(
        client.clone(),
        ("muster.dev", "v1alpha1", "Gang", "gangs"),
        |o| {
            o.data["status"]["phase"]
                .as_str()
                .unwrap_or("Queued")
                .to_string()
        },
    );
    let (job_seen, job_task) = record(client.clone(), ("batch", "v1", "Job", "jobs"), |o| {
        o.data["spec"]["suspend"]
            .as_bool()
            .unwrap_or(false)
            .to_string()
    });
    let (pod_seen, pod_task) = record(client.clone(), ("", "v1", "Pod", "pods"), |o| {
        o.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("batch.kubernetes.io/job-name").cloned())
            .unwrap_or_default()
    });
    let _emulator =
        Emulator::start_running_for(client.clone(), vec![], Some(Duration::from_secs(2)));

    let jobs = submit_job(&client).await;

    // launched on the simulated cloud: two Nodes with a GPU each
    eventually(60, "two simulated Nodes", || async {
        (sim_nodes(&client).await.len() == 2).then_some(())
    })
    .await;
    for n in sim_nodes(&client).await {
        let pid = n.spec.as_ref().and_then(|s| s.provider_id.clone());
        assert!(pid.is_some_and(|p| p.starts_with("sim://")), "{n:?}");
        let alloc = n.status.and_then(|s| s.allocatable).unwrap_or_default();
        assert_eq!(alloc.get("nvidia.com/gpu").map(|q| q.0.as_str()), Some("1"));
    }

    complete_and_back_to_zero(&client, &jobs).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let on: BTreeSet<String> = pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={JOB}")))
        .await
        .expect("pods")
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    assert_eq!(on.len(), 2, "the gang's two pods ran on two nodes: {on:?}");

    pod_task.abort();
    job_task.abort();
    gang_task.abort();
    // never a pod before admission: every pod of the Job was created after
    // the write that unsuspended it, and that write came after the Gang was
    // provisioned
    let jobs_seen = snapshot(&job_seen);
    let unsuspended = jobs_seen
        .iter()
        .find(|(_, name, suspend)| name == JOB && suspend == "false")
        .map(|(rv, ..)| *rv)
        .expect("the Job was unsuspended");
    let first_pod = snapshot(&pod_seen)
        .iter()
        .filter(|(_, _, job)| job == JOB)
        .map(|(rv, ..)| *rv)
        .min()
        .expect("the Job had pods");
    assert!(
        first_pod > unsuspended,
        "a pod (rv {first_pod}) before the Job was unsuspended (rv {unsuspended}): {jobs_seen:?}"
    );
    let gang = snapshot(&gang_seen);
    let provisioning = gang
        .iter()
        .find(|(_, name, p)| name == JOB && p == "Provisioning")
        .map(|(rv, ..)| *rv)
        .expect("the Gang was Provisioning");
    assert!(
        provisioning < unsuspended,
        "unsuspended before provisioning: {gang:?}"
    );
    let mut phases: Vec<String> = Vec::new();
    for (_, name, p) in &gang {
        if name == JOB && phases.last() != Some(p) {
            phases.push(p.clone());
        }
    }
    let order = ["Queued", "Provisioning", "Admitted", "Running", "Finished"];
    let mut at = 0;
    for p in &phases {
        match order.iter().position(|o| o == p) {
            Some(i) if i >= at => at = i,
            _ => panic!("Gang phases out of order or unexpected: {phases:?}"),
        }
    }
    for want in order {
        assert!(
            phases.iter().any(|p| p == want),
            "the Gang was never {want}: {phases:?}"
        );
    }

    // every request of the controller is allowed by the chart's RBAC (with
    // the simulated cloud's role)
    assert_controller_rbac(&server, &support::rbac::rules_with_sim_cloud());
    drop(controller);
}

/// Every request of the controller (its User-Agent names muster) is one
/// `rules` allow, resourceNames included.
fn assert_controller_rbac(server: &ApiServer, rules: &[support::rbac::Rule]) {
    let log = std::fs::read_to_string(&server.audit_log).expect("audit log");
    let mut denied = BTreeSet::new();
    let mut seen = 0;
    for line in log.lines() {
        let e: Json = serde_json::from_str(line).expect("audit line");
        if !e["userAgent"].as_str().unwrap_or("").starts_with("muster") {
            continue;
        }
        seen += 1;
        let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
        let resource = match s("subresource").as_str() {
            "" => s("resource"),
            sub => format!("{}/{sub}", s("resource")),
        };
        let (verb, group, ns) = (s("verb"), s("apiGroup"), s("namespace"));
        if !rules
            .iter()
            .any(|r| r.allows(&verb, &group, &resource, &ns, &s("name")))
        {
            denied.insert(format!(
                "{verb} {group}/{resource} {:?} in {ns:?}",
                s("name")
            ));
        }
    }
    assert!(seen > 0, "no request of the controller was audited");
    assert!(denied.is_empty(), "requests RBAC would deny: {denied:#?}");
}

/// The controller killed (SIGKILL) once the simulated cloud created its
/// first machine, and started again: the launch carries on from what the API
/// server holds. Exactly two PoolNodes and two simulated Nodes ever exist
/// for the gang, the Job completes and the pool is back at zero nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_mid_launch_carries_on_without_a_second_machine() {
    let (server, client, objs, webhook_addr) = setup().await;
    let controller = start_controller(&server, &objs, &webhook_addr, "local-e2e-kill").await;
    apply_examples(&client).await;
    let (node_seen, node_task) = {
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let out = seen.clone();
        let nodes: Api<Node> = Api::all(client.clone());
        let task = tokio::spawn(async move {
            let cfg = watcher::Config::default().labels("muster.dev/sim-nodeclass=sim");
            let mut stream = watcher(nodes, cfg).boxed();
            while let Some(ev) = stream.next().await {
                if let Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) = ev {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    out.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((0, name, String::new()));
                }
            }
        });
        (seen, task)
    };
    let poolnodes: Api<DynamicObject> = Api::all_with(client.clone(), &ar("PoolNode", "poolnodes"));
    let (pn_seen, pn_task) = {
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let out = seen.clone();
        let api = poolnodes.clone();
        let task = tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = stream.next().await {
                if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = ev {
                    let name = o.metadata.name.clone().unwrap_or_default();
                    out.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((0, name, String::new()));
                }
            }
        });
        (seen, task)
    };
    let _emulator =
        Emulator::start_running_for(client.clone(), vec![], Some(Duration::from_secs(2)));
    let jobs = submit_job(&client).await;

    eventually(60, "the first simulated Node", || async {
        (!sim_nodes(&client).await.is_empty()).then_some(())
    })
    .await;
    drop(controller); // SIGKILL
    let _again = start_controller(&server, &objs, &webhook_addr, "local-e2e-kill-2").await;

    complete_and_back_to_zero(&client, &jobs).await;
    node_task.abort();
    pn_task.abort();
    let names = |seen: &Seen| -> BTreeSet<String> {
        snapshot(seen)
            .into_iter()
            .map(|(_, name, _)| name)
            .collect()
    };
    let nodes = names(&node_seen);
    assert_eq!(nodes.len(), 2, "simulated Nodes ever created: {nodes:?}");
    let pns = names(&pn_seen);
    assert_eq!(pns.len(), 2, "PoolNodes ever written: {pns:?}");
}

/// The same acceptance run with the AWS provider against moto: `e2e/run aws`
/// with a local EC2 (and SQS for the interruption queue) instead of an
/// account. The chart is rendered with its AWS values (`ci/aws-values.yaml`)
/// pointed at moto (`aws.endpoint`, `aws.interruptionQueue`) and
/// `clouds={aws}`; the NodeClass is the example's (`aws-gpu`) with
/// selectors for what moto holds (its subnets and a security group tagged
/// `team=gpu`, an AMI by id), the pool `e2e/manifests/pool-aws.yaml` with
/// its disruption times shortened for a test. Each instance moto runs for
/// the cluster registers as a Node through the emulated kubelet (named as
/// EKS names hosts, linked to its PoolNode by `spec.providerID` only), with
/// one GPU: the pool's `gpusPerNode` is 1. Checked as for the simulated
/// cloud: suspended at creation, two instances launched with one
/// `RunInstances` each, the gang's pods on two Nodes, the Job complete, the
/// pool back at zero (no PoolNode, no Node, no running instance), every
/// request within the chart's RBAC.
#[cfg(feature = "aws-test-support")]
mod aws {
    use super::*;
    use muster_provider_api::{CloudProvider, InstanceState, tags};
    use muster_provider_aws::AwsProvider;
    use muster_provider_aws::moto::Moto;

    async fn running(provider: &AwsProvider, cluster: &str) -> usize {
        provider
            .list(cluster)
            .await
            .unwrap_or_default()
            .iter()
            .filter(|i| matches!(i.state, InstanceState::Pending | InstanceState::Running))
            .count()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_gang_runs_on_moto_from_the_rendered_chart_and_the_pool_returns_to_zero() {
        let moto = Moto::start();
        let clients = moto.clients().await;
        let queue = clients
            .sqs
            .create_queue()
            .queue_name("muster-interruptions")
            .send()
            .await
            .expect("SQS queue");
        let queue_url = queue.queue_url().expect("queue URL").to_string();
        let spec = moto.node_class_spec().await;
        let endpoint = format!("aws.endpoint={}", moto.endpoint);
        let interruptions = format!("aws.interruptionQueue={queue_url}");
        let (server, client, objs, webhook_addr) = setup_with(
            Some("ci/aws-values.yaml"),
            &[&endpoint, &interruptions, "clouds={aws}", "tick=2s"],
        )
        .await;
        let cluster = helm::rendered::container(&objs)["args"]
            .as_sequence()
            .expect("args")
            .iter()
            .find_map(|a| a.as_str()?.strip_prefix("--cluster-name="))
            .expect("--cluster-name")
            .to_string();
        let controller = start_controller(&server, &objs, &webhook_addr, "local-e2e-aws").await;

        // the example NodeClass, selecting what moto holds
        let mut nodeclass = manifest("docs/examples/nodeclass-aws.yaml");
        assert_eq!(nodeclass["metadata"]["name"], "aws-gpu");
        nodeclass["spec"] = spec.clone();
        let mut pool = manifest("e2e/manifests/pool-aws.yaml");
        pool["spec"]["disruption"]["consolidateAfter"] = json!("5s");
        pool["spec"]["disruption"]["scaleToZeroAfter"] = json!("5s");
        apply(&client, nodeclass, pool).await;

        let provider = Arc::new(
            AwsProvider::new(&spec, moto.options())
                .await
                .expect("provider"),
        );
        let _emulator = Emulator::start_running_for(
            client.clone(),
            vec![Arc::new(support::cloud_e2e::TaggedMachines {
                provider: provider.clone(),
                cluster: cluster.clone(),
                gpus: |_| 1,
            })],
            Some(Duration::from_secs(2)),
        );
        let jobs = submit_job(&client).await;

        // two one-GPU instances of the pool, one RunInstances each
        let instances = eventually(90, "two instances in moto", || {
            let provider = provider.clone();
            let cluster = cluster.clone();
            async move {
                let list = provider.list(&cluster).await.ok()?;
                (list.len() == 2).then_some(list)
            }
        })
        .await;
        for i in &instances {
            assert_eq!(i.tags[tags::POOL], "e2e");
            assert_eq!(i.tags[tags::GANG], format!("{NS}/{JOB}"));
            let family = i.offering.instance_type.split('.').next().unwrap_or("");
            assert!(["g5", "g6"].contains(&family), "{i:?}");
        }

        complete_and_back_to_zero(&client, &jobs).await;
        assert_eq!(moto.run_instances_calls(), 2, "one RunInstances per node");
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        let on: BTreeSet<String> = pods
            .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={JOB}")))
            .await
            .expect("pods")
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        assert_eq!(on.len(), 2, "the gang's two pods ran on two nodes: {on:?}");
        eventually(60, "no running instance left", || {
            let provider = provider.clone();
            let cluster = cluster.clone();
            async move { (running(&provider, &cluster).await == 0).then_some(()) }
        })
        .await;
        assert_controller_rbac(&server, &support::rbac::rules());
        drop(controller);
    }
}
