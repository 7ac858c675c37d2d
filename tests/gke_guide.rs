//! `docs/gke.md` walked as tested steps, against the stand-ins: the guide's
//! variables (its first block's `export`s) name the Compute and GKE fake's
//! cluster; every manifest the guide applies (`cat <<EOF | kubectl apply
//! -f -` blocks, with the guide's shell variables substituted as the shell
//! would) is created in the API test server under muster's CRDs and their
//! CEL rules; the controller with the GCP provider and the fake then does
//! what the guide says follows: two PoolNodes, a muster node pool of
//! `g2-standard-4` machines in the fake's cluster, two GKE nodes with
//! `cloud.google.com/gke-accelerator`, the Job's pods running on them. The
//! IAM role the guide creates is the file the IAM check reads.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use muster::controller::cloud::clouds::CloudOptions;
use muster_provider_gcp::fake::ComputeFake;
use serde_json::Value;
use support::emulator::Emulator;
use support::{ApiServer, create, eventually};

const GUIDE: &str = include_str!("../docs/gke.md");

/// The guide's shell variables: its `export X=Y` lines, and `SA=...`.
fn variables(text: &str) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            continue;
        }
        let v = v.split_whitespace().next().unwrap_or_default();
        if v.starts_with('$') && v.starts_with("$(") {
            continue;
        }
        vars.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    vars
}

/// Substitutes `$X`, `${X}` and `${X%-[a-z]}` (a zone's region) as the
/// shell does, for the variables set.
fn substitute(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        let region = match v.rsplit_once('-') {
            Some((r, z)) if z.len() == 1 && z.chars().all(|c| c.is_ascii_lowercase()) => r,
            _ => v.as_str(),
        };
        out = out.replace(&format!("${{{k}%-[a-z]}}"), region);
        out = out.replace(&format!("${{{k}}}"), v);
    }
    // longest names first, so $PROJECT is not read as $PROJ + ECT
    let mut keys: Vec<&String> = vars.keys().collect();
    keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
    for k in keys {
        out = out.replace(&format!("${k}"), &vars[k]);
    }
    out
}

/// Every manifest the guide pipes to `kubectl apply -f -`, substituted.
fn applied_manifests(text: &str, vars: &BTreeMap<String, String>) -> Vec<Value> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let l = line.trim();
        if !(l.starts_with("cat <<") && l.ends_with("| kubectl apply -f -")) {
            continue;
        }
        let quoted = l.contains("<<'EOF'");
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "EOF").collect();
        let body = body.join("\n");
        let body = if quoted {
            body
        } else {
            substitute(&body, vars)
        };
        for doc in body.split("\n---") {
            let v: Value = serde_norway::from_str(doc).expect("a manifest of the guide is YAML");
            out.push(v);
        }
    }
    out
}

fn plural(kind: &str) -> &'static str {
    match kind {
        "NodeClass" => "nodeclasses",
        "GPUPool" => "gpupools",
        "GPUQueue" => "gpuqueues",
        other => panic!("the guide applies a {other} this test does not know"),
    }
}

#[test]
fn the_private_cluster_rule_opens_the_charts_webhook_port() {
    let values: serde_norway::Value = serde_norway::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/muster/values.yaml"),
        )
        .expect("values.yaml"),
    )
    .expect("YAML");
    let port = values["webhook"]["port"].as_u64().expect("webhook.port");
    assert!(
        GUIDE.contains(&format!("--allow tcp:{port}"))
            && GUIDE.contains(&format!("on {port} (the chart's `webhook.port`)")),
        "the guide's firewall rule opens the chart's webhook port {port}"
    );
    assert!(GUIDE.contains("--workload-metadata=GKE_METADATA"));
}

#[test]
fn the_guides_variables_name_the_fakes_cluster_and_its_role_file_exists() {
    let vars = variables(GUIDE);
    assert_eq!(vars["PROJECT"], "my-project");
    assert_eq!(vars["LOCATION"], "us-central1");
    assert_eq!(vars["CLUSTER"], "prod");
    assert!(
        GUIDE.contains("--file docs/gcp-iam-role.yaml"),
        "the guide creates the role from the file the IAM check reads"
    );
    assert!(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/gcp-iam-role.yaml")
            .exists()
    );
    assert_eq!(
        substitute("${LOCATION%-[a-z]} $PROJECT", &vars),
        "us-central1 my-project"
    );
    let zonal: BTreeMap<String, String> =
        [("LOCATION".to_string(), "us-central1-a".to_string())].into();
    assert_eq!(substitute("${LOCATION%-[a-z]}", &zonal), "us-central1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gke_guide_runs_a_gang_on_nodes_gke_makes() {
    let vars = variables(GUIDE);
    let manifests = applied_manifests(GUIDE, &vars);
    let kinds: Vec<&str> = manifests
        .iter()
        .filter_map(|m| m["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["NodeClass", "GPUPool", "GPUQueue", "Job"],
        "the guide's manifests"
    );
    let fake = Arc::new(ComputeFake::start());
    let server = ApiServer::start();
    let client = server.client();
    support::install_crds(&client).await;
    // step 5: the NodeClass, pool and queue, as written (the CRDs' rules apply)
    for m in manifests.iter().filter(|m| m["kind"] != "Job") {
        let kind = m["kind"].as_str().expect("kind");
        create(&client, kind, plural(kind), None, m.clone()).await;
    }
    let listing = fake.clone();
    let _emu = Emulator::start_with(
        client.clone(),
        vec![Arc::new(support::gke::GkeNodes::new(move || {
            listing.control("GET", "gke/nodes?cluster=prod")
        }))],
    );
    let ctl = support::cloud_e2e::start_with(
        &server,
        CloudOptions {
            gcp: fake.options(),
            ..CloudOptions::default()
        },
        |c| c.orphan_gc_period = Duration::from_secs(1),
    );
    // step 6: kubectl create namespace team-a (the API test server starts
    // with it), then the Job
    let made = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "team-a"}}))
                .expect("namespace"),
        )
        .await;
    assert!(
        match &made {
            Ok(_) => true,
            Err(kube::Error::Api(s)) => s.code == 409,
            Err(_) => false,
        },
        "{made:?}"
    );
    let mut job = manifests
        .iter()
        .find(|m| m["kind"] == "Job")
        .cloned()
        .expect("the guide's Job");
    // GKE runs the ExtendedResourceToleration admission plugin: a pod that
    // asks for nvidia.com/gpu gets a toleration of that key
    // (kubernetes/kubernetes plugin/pkg/admission/extendedresourcetoleration/admission.go;
    // https://cloud.google.com/kubernetes-engine/docs/how-to/gpus, "GKE
    // automatically adds tolerations"); the API test server does not
    job["spec"]["template"]["spec"]["tolerations"] = serde_json::json!([
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]);
    let job: Job = serde_json::from_value(job).expect("Job");
    Api::<Job>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &job)
        .await
        .expect("the guide's Job");
    // what the guide says follows
    let pods = support::cloud_e2e::both_running(&client, "smoke", 120).await;
    let listed: Value =
        serde_json::from_str(&fake.control("GET", "gke/nodes?cluster=prod")).expect("JSON");
    let nodes = listed["nodes"].as_array().cloned().unwrap_or_default();
    assert_eq!(nodes.len(), 2, "{listed}");
    for n in &nodes {
        let l = &n["metadata"]["labels"];
        assert_eq!(
            l["node.kubernetes.io/instance-type"], "g2-standard-4",
            "{n}"
        );
        assert_eq!(l["cloud.google.com/gke-accelerator"], "nvidia-l4", "{n}");
        assert_eq!(
            l["cloud.google.com/gke-gpu-driver-version"], "default",
            "{n}"
        );
        assert_eq!(l["muster.dev/pool"], "l4", "{n}");
        let name = n["metadata"]["name"].as_str().unwrap_or_default();
        assert!(
            pods.iter()
                .any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name)),
            "a pod on {name}"
        );
    }
    let pools = fake.get("/v1/projects/my-project/locations/us-central1/clusters/prod/nodePools");
    let muster_pools: Vec<&Value> = pools["nodePools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"].as_str().is_some_and(|n| n.starts_with("muster-")))
        .collect();
    assert_eq!(muster_pools.len(), 1, "{pools}");
    let poolnodes = support::waits::poolnodes(&client).await;
    assert_eq!(poolnodes.len(), 2);
    // the NodeClass is Ready, as the guide says it turns
    eventually(30, "NodeClass gke-gpu Ready", || {
        let client = client.clone();
        async move {
            let nc = Api::<kube::api::DynamicObject>::all_with(
                client,
                &support::ar("NodeClass", "nodeclasses"),
            )
            .get("gke-gpu")
            .await
            .ok()?;
            nc.data["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                .then_some(())
        }
    })
    .await;
    server.assert_rbac_allows_controller();
    ctl.abort();
}
