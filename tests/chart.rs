//! The Helm chart (`charts/muster`) as an operator installs it: it lints
//! strictly and renders with the default, AWS and GCP values, the same with
//! Helm 3 as with Helm 4; its schema
//! refuses unknown keys and wrong types; what it renders passes the
//! Kubernetes schemas; its CRDs are those `muster crds` prints and its RBAC is
//! that of `deploy/rbac.yaml`; its alerts pass `promtool` with a firing and a
//! quiet case each; its alerts and dashboard name only exported metrics.

mod helm;

use std::collections::BTreeSet;
use std::process::Command;

use helm::{VALUES, chart, find, helm, objects, run_helm, template, template_with};
use serde_norway::Value;

#[test]
fn lints_strictly_and_renders_with_every_values_file() {
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    for values in VALUES {
        let mut args = vec!["lint", "--strict", chart];
        let file = values.map(|v| format!("{chart}/{v}"));
        if let Some(f) = &file {
            args.extend(["--values", f.as_str()]);
        }
        if let Err(e) = helm(&args) {
            panic!("helm lint --strict {values:?}:\n{e}");
        }
        let objs = objects(&template(values, &[]).expect("renders"));
        let kinds: BTreeSet<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
        for kind in [
            "Deployment",
            "PodDisruptionBudget",
            "ServiceAccount",
            "ClusterRole",
            "Role",
            "Service",
            "MutatingWebhookConfiguration",
        ] {
            assert!(kinds.contains(kind), "{values:?}: no {kind} in {kinds:?}");
        }
    }
}

#[test]
fn schema_refuses_unknown_keys_and_wrong_types() {
    let refused = [
        "replicas=2",
        "webhook.prot=9443",
        "metrics.serviceMonitor.enable=true",
        "replicaCount=two",
        "logFormat=yaml",
        "tick=30",
        "webhook.port=70000",
        "leaderElection.enabled=maybe",
        "clusterName=Not_A_Label",
        "webhook.certs=vault",
        "webhook.certManager.enable=true",
    ];
    for set in refused {
        let got = template(None, &[set]);
        assert!(got.is_err(), "--set {set} was accepted");
    }
    // one replica without election is allowed; two are not
    assert!(template(None, &["leaderElection.enabled=false", "replicaCount=1"]).is_ok());
    assert!(template(None, &["leaderElection.enabled=false"]).is_err());
}

/// `clusterName` has no default: without it, or empty, `helm template`
/// (and so `helm install`) fails with a message naming the value, and the
/// name set reaches `--cluster-name`.
#[test]
fn cluster_name_is_required() {
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    let base = ["template", "muster", chart, "--namespace", "muster-system"];
    for extra in [&[][..], &["--set", "clusterName="][..]] {
        let args = [&base[..], extra].concat();
        match helm(&args) {
            Ok(_) => panic!("rendered without a cluster name: {extra:?}"),
            Err(e) => assert!(
                e.contains("clusterName is required") && e.contains("--set clusterName=NAME"),
                "{extra:?}: {e}"
            ),
        }
    }
    let objs = objects(&template(None, &["clusterName=gpu-east"]).expect("renders"));
    let args = &find(&objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_sequence()
            .expect("args")
            .iter()
            .any(|a| a == "--cluster-name=gpu-east"),
        "{args:?}"
    );
}

#[test]
fn deployment_keeps_the_restricted_pod_security_standard() {
    for values in VALUES {
        let objs = objects(&template(values, &[]).expect("renders"));
        let dep = find(&objs, "Deployment");
        assert_eq!(dep["spec"]["replicas"].as_u64(), Some(2), "{values:?}");
        let pod = &dep["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], Value::Bool(true));
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let c = &pod["containers"][0];
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], Value::Bool(false));
        assert_eq!(sc["readOnlyRootFilesystem"], Value::Bool(true));
        assert_eq!(sc["capabilities"]["drop"][0], "ALL");
        assert!(c["resources"]["requests"]["cpu"].is_string(), "{values:?}");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert!(
            pod["topologySpreadConstraints"]
                .as_sequence()
                .is_some_and(|s| !s.is_empty())
        );
        let pdb = find(&objs, "PodDisruptionBudget");
        assert_eq!(pdb["spec"]["selector"], dep["spec"]["selector"]);
    }
}

/// The largest "RSS peak" of `docs/benchmarks.md`'s controller-at-scale
/// tables, in MiB.
fn measured_peak_mib() -> f64 {
    let text =
        std::fs::read_to_string(format!("{}/docs/benchmarks.md", env!("CARGO_MANIFEST_DIR")))
            .expect("docs/benchmarks.md");
    let section = text
        .split("## Controller at scale")
        .nth(1)
        .expect("the controller-at-scale section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut peak: f64 = 0.0;
    let mut column = None;
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if let Some(i) = cells.iter().position(|c| c.starts_with("RSS peak")) {
            column = Some(i);
            continue;
        }
        if let Some(v) = column
            .and_then(|i| cells.get(i))
            .and_then(|c| c.strip_suffix(" MiB"))
            .and_then(|c| c.parse::<f64>().ok())
        {
            peak = peak.max(v);
        }
    }
    assert!(peak > 50.0, "no RSS peak read from docs/benchmarks.md");
    peak
}

/// Kubernetes memory quantity in MiB (`Mi` and `Gi` forms).
fn mib(q: &Value) -> f64 {
    let s = q.as_str().expect("a quantity");
    if let Some(n) = s.strip_suffix("Mi") {
        n.parse().expect("MiB")
    } else if let Some(n) = s.strip_suffix("Gi") {
        n.parse::<f64>().expect("GiB") * 1024.0
    } else {
        panic!("memory {s} in Mi or Gi")
    }
}

/// The controller as a production add-on is deployed with the default
/// values: a system priority class, kept off the GPU nodes it launches
/// (nodes labelled `muster.dev/pool`), memory requested above the peak
/// measured at the documented scale with a quarter more and limited at
/// twice it or more, and every webhook kept away from the system
/// namespaces. A user's own affinity replaces the default.
#[test]
fn default_values_run_the_controller_critical_off_its_nodes_and_sized() {
    let objs = objects(&template(None, &[]).expect("renders"));
    let pod = &find(&objs, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    let terms = &pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let terms = terms.as_sequence().expect("required node affinity");
    assert!(!terms.is_empty());
    for t in terms {
        assert!(
            t["matchExpressions"].as_sequence().is_some_and(|e| e
                .iter()
                .any(|r| { r["key"] == "muster.dev/pool" && r["operator"] == "DoesNotExist" })),
            "every term keeps off muster's nodes: {t:?}"
        );
    }
    let peak = measured_peak_mib();
    let res = &pod["containers"][0]["resources"];
    let (req, lim) = (
        mib(&res["requests"]["memory"]),
        mib(&res["limits"]["memory"]),
    );
    assert!(
        req >= peak * 1.25,
        "request {req} MiB for a measured peak of {peak} MiB"
    );
    assert!(
        lim >= peak * 2.0,
        "limit {lim} MiB for a measured peak of {peak} MiB"
    );
    let all_kinds = objects(
        &template(
            None,
            &["workloadKinds={job,jobset,pod-group,trainjob,pytorchjob,raycluster,rayjob,leaderworkerset}"],
        )
        .expect("renders"),
    );
    for h in find(&all_kinds, "MutatingWebhookConfiguration")["webhooks"]
        .as_sequence()
        .expect("webhooks")
    {
        let excluded = h["namespaceSelector"]["matchExpressions"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|r| r["key"] == "kubernetes.io/metadata.name" && r["operator"] == "NotIn")
            .map(|r| r["values"].clone());
        for ns in ["kube-system", "kube-public", "kube-node-lease"] {
            assert!(
                excluded
                    .as_ref()
                    .and_then(Value::as_sequence)
                    .is_some_and(|v| v.iter().any(|x| x == ns)),
                "{} sees {ns}",
                h["name"].as_str().unwrap_or_default()
            );
        }
    }
    let own = objects(
        &template(None, &["affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool,affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists"])
            .expect("renders"),
    );
    let pod = &find(&own, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "pool",
        "the user's affinity replaces the default"
    );
}

#[test]
fn service_account_carries_the_cloud_identity() {
    // the controller's, as its pods name it (not the metrics reader's)
    let controller_sa = |objs: &[Value]| {
        let name =
            find(objs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"].clone();
        objs.iter()
            .find(|o| o["kind"] == "ServiceAccount" && o["metadata"]["name"] == name)
            .cloned()
            .expect("the controller's ServiceAccount")
    };
    let aws = objects(&template(Some("ci/aws-values.yaml"), &[]).expect("renders"));
    let sa = controller_sa(&aws);
    assert!(sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].is_string());
    let gcp = objects(&template(Some("ci/gcp-values.yaml"), &[]).expect("renders"));
    let sa = controller_sa(&gcp);
    assert!(sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"].is_string());
}

#[test]
fn webhook_fails_closed_and_sees_only_labelled_jobs() {
    for values in VALUES {
        let objs = objects(&template(values, &[]).expect("renders"));
        let cfg = find(&objs, "MutatingWebhookConfiguration");
        let hooks = cfg["webhooks"].as_sequence().expect("webhooks");
        assert!(!hooks.is_empty());
        for h in hooks {
            assert_eq!(h["failurePolicy"], "Fail");
            assert_eq!(h["sideEffects"], "None");
            assert_eq!(h["rules"][0]["operations"][0], "CREATE");
            assert_eq!(h["rules"][0]["resources"][0], "jobs");
            assert_eq!(
                h["objectSelector"]["matchExpressions"][0]["key"],
                "muster.dev/queue"
            );
            assert_eq!(h["clientConfig"]["service"]["path"], "/mutate-batch-v1-job");
        }
        // labelled Jobs everywhere; unlabelled ones only where a namespace names a default queue
        assert_eq!(
            hooks[0]["objectSelector"]["matchExpressions"][0]["operator"],
            "Exists"
        );
        if let Some(h) = hooks.get(1) {
            assert_eq!(
                h["objectSelector"]["matchExpressions"][0]["operator"],
                "DoesNotExist"
            );
            assert_eq!(
                h["namespaceSelector"]["matchExpressions"][0]["operator"],
                "Exists"
            );
        }
    }
}

/// Writes the rendered objects of `kinds` (all when empty) to a file and
/// runs `kubernetes-validate --strict` on it.
fn kubernetes_validate(objs: &[Value], skip: &[&str], what: &str) {
    let dir = tempdir(what);
    let mut files = Vec::new();
    for (i, o) in objs.iter().enumerate() {
        let kind = o["kind"].as_str().unwrap_or("?");
        if skip.contains(&kind) {
            continue;
        }
        let f = dir.join(format!("{i:02}-{kind}.yaml"));
        std::fs::write(&f, serde_norway::to_string(o).expect("yaml")).expect("write");
        files.push(f);
    }
    let python = std::env::var("MUSTER_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "--kubernetes-version",
            "1.33.0",
        ])
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("run {python}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what}: kubernetes-validate failed:\n{text}"
    );
    assert_eq!(
        text.matches(" passed for resource ").count(),
        files.len(),
        "{what}:\n{text}"
    );
}

fn tempdir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("muster-chart-{}-{what}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Kinds of other projects' CRDs (Prometheus Operator, cert-manager): their
/// schemas are not at hand offline; their fields are checked by the tests
/// that read them (alerts here, certificates in docs/install.md's test).
const FOREIGN: [&str; 4] = ["ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"];

#[test]
fn rendered_manifests_pass_the_kubernetes_schemas() {
    for (i, values) in VALUES.into_iter().enumerate() {
        let objs = objects(&template(values, &[]).expect("renders"));
        kubernetes_validate(&objs, &FOREIGN, &format!("values{i}"));
    }
    let crds: Vec<Value> = std::fs::read_dir(chart().join("crds"))
        .expect("crds/")
        .flat_map(|e| objects(&std::fs::read_to_string(e.expect("entry").path()).expect("read")))
        .collect();
    kubernetes_validate(&crds, &[], "crds");
}

#[test]
fn crds_are_those_muster_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .arg("crds")
        .output()
        .expect("muster crds");
    assert!(out.status.success());
    let mut want: Vec<Value> = objects(&String::from_utf8_lossy(&out.stdout));
    let mut got: Vec<Value> = std::fs::read_dir(chart().join("crds"))
        .expect("crds/")
        .flat_map(|e| objects(&std::fs::read_to_string(e.expect("entry").path()).expect("read")))
        .collect();
    let name = |v: &Value| v["metadata"]["name"].as_str().unwrap_or("").to_string();
    want.sort_by_key(name);
    got.sort_by_key(name);
    assert_eq!(want.len(), 5);
    assert!(
        want == got,
        "charts/muster/crds/ differs from `muster crds`: copy crds/yaml/*.yaml into charts/muster/crds/"
    );
}

/// The rules of every ClusterRole and Role, by kind, as sorted canonical YAML.
fn rules(objs: &[Value]) -> BTreeSet<(String, String)> {
    objs.iter()
        .filter(|o| matches!(o["kind"].as_str(), Some("ClusterRole" | "Role")))
        .flat_map(|o| {
            let kind = o["kind"].as_str().unwrap_or("").to_string();
            o["rules"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |r| (kind.clone(), serde_norway::to_string(&r).expect("yaml")))
        })
        .collect()
}

#[test]
fn rbac_is_that_of_deploy_rbac_yaml() {
    let deploy = objects(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac.yaml"))
            .expect("deploy/rbac.yaml"),
    );
    let users = objects(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/rbac-users.yaml"
        ))
        .expect("deploy/rbac-users.yaml"),
    );
    let chart = objects(&template(None, &[]).expect("renders"));
    let mut want = rules(&deploy);
    assert!(!want.is_empty());
    want.extend(rules(&users));
    let got = rules(&chart);
    assert_eq!(
        got, want,
        "the chart's RBAC (templates/rbac.yaml) and deploy/rbac.yaml disagree"
    );
    // with the simulated cloud: those rules and deploy/rbac-sim.yaml's
    let sim = objects(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/rbac-sim.yaml"))
            .expect("deploy/rbac-sim.yaml"),
    );
    let with_sim = objects(&template(None, &["clouds={sim}"]).expect("renders"));
    let mut want_sim = want.clone();
    want_sim.extend(rules(&sim));
    assert!(want_sim.len() > want.len());
    assert_eq!(
        rules(&with_sim),
        want_sim,
        "the chart's sim-cloud RBAC and deploy/rbac-sim.yaml disagree"
    );
    // with Karpenter's delegate mode: those rules and deploy/rbac-karpenter.yaml's
    let karpenter = objects(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/rbac-karpenter.yaml"
        ))
        .expect("deploy/rbac-karpenter.yaml"),
    );
    let with_karpenter = objects(&template(None, &["clouds={aws,karpenter}"]).expect("renders"));
    let mut want_karpenter = want.clone();
    want_karpenter.extend(rules(&karpenter));
    assert!(want_karpenter.len() > want.len());
    assert_eq!(
        rules(&with_karpenter),
        want_karpenter,
        "the chart's delegate-mode RBAC and deploy/rbac-karpenter.yaml disagree"
    );
    // the bindings name the chart's ServiceAccount
    let sa = find(&chart, "ServiceAccount")["metadata"]["name"].clone();
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        assert_eq!(find(&chart, kind)["subjects"][0]["name"], sa, "{kind}");
    }
}

/// The ClusterRole's rules for each enabled workload kind are exactly what
/// the controller says the kind needs (`WorkloadKind::access`), and the
/// webhook and the flag name the same kinds.
#[test]
fn workload_kinds_add_their_rules_webhooks_and_flag() {
    use muster::controller::workloads::WorkloadKind;
    let cluster_rules = |objs: &[Value]| -> BTreeSet<String> {
        rules(objs)
            .into_iter()
            .filter(|(k, _)| k == "ClusterRole")
            .map(|(_, r)| r)
            .collect()
    };
    let base = cluster_rules(&objects(&template(None, &[]).expect("renders")));
    let all = objects(
        &template(
            None,
            &["workloadKinds={job,jobset,pod-group,trainjob,pytorchjob,raycluster,rayjob,leaderworkerset}"],
        )
        .expect("renders"),
    );
    let extra: BTreeSet<String> = cluster_rules(&all).difference(&base).cloned().collect();
    let want: BTreeSet<String> = WorkloadKind::ALL
        .iter()
        .flat_map(|k| k.access())
        .map(|a| {
            let rule = serde_norway::to_value(serde_json::json!({
                "apiGroups": [a.group],
                "resources": a.resources,
                "verbs": a.verbs,
            }))
            .expect("yaml");
            serde_norway::to_string(&rule).expect("yaml")
        })
        .collect();
    assert_eq!(
        extra, want,
        "the chart's workload-kind rules and WorkloadKind::access() disagree"
    );
    let hooks: Vec<String> = find(&all, "MutatingWebhookConfiguration")["webhooks"]
        .as_sequence()
        .expect("webhooks")
        .iter()
        .filter_map(|w| w["name"].as_str().map(String::from))
        .collect();
    for name in [
        "jobs.muster.dev",
        "jobsets.muster.dev",
        "pod-groups.muster.dev",
        "trainjobs.muster.dev",
        "pytorchjobs.muster.dev",
        "rayclusters.muster.dev",
        "rayjobs.muster.dev",
        "leaderworkersets.muster.dev",
        "lws-pods.muster.dev",
    ] {
        assert!(hooks.iter().any(|h| h == name), "{name} in {hooks:?}");
    }
    // every pod of a LeaderWorkerSet is sent to the webhook at creation, fail closed
    let lws_pods = find(&all, "MutatingWebhookConfiguration")["webhooks"]
        .as_sequence()
        .expect("webhooks")
        .iter()
        .find(|w| w["name"].as_str() == Some("lws-pods.muster.dev"))
        .expect("lws-pods.muster.dev")
        .clone();
    let rule = &lws_pods["rules"][0];
    assert_eq!(rule["resources"][0].as_str(), Some("pods"), "{rule:?}");
    assert_eq!(rule["apiGroups"][0].as_str(), Some(""), "{rule:?}");
    assert_eq!(rule["operations"][0].as_str(), Some("CREATE"), "{rule:?}");
    let selector = &lws_pods["objectSelector"]["matchExpressions"][0];
    assert_eq!(
        selector["key"].as_str(),
        Some("leaderworkerset.sigs.k8s.io/name"),
        "{selector:?}"
    );
    assert_eq!(selector["operator"].as_str(), Some("Exists"));
    assert_eq!(lws_pods["failurePolicy"].as_str(), Some("Fail"));
    assert_eq!(
        lws_pods["clientConfig"]["service"]["path"].as_str(),
        Some("/mutate-workload")
    );
    assert!(
        lws_pods["namespaceSelector"]["matchExpressions"]
            .as_sequence()
            .is_some_and(|e| !e.is_empty()),
        "the same namespace include as the other hooks"
    );
    // without the kind: no pod of a LeaderWorkerSet is sent
    let jobs_only = objects(&template(None, &[]).expect("renders"));
    assert!(
        !serde_norway::to_string(find(&jobs_only, "MutatingWebhookConfiguration"))
            .expect("yaml")
            .contains("lws-pods.muster.dev")
    );
    let args =
        find(&all, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"].clone();
    assert!(
        args.as_sequence()
            .expect("args")
            .iter()
            .any(|a| a.as_str()
                == Some("--workload-kinds=job,jobset,pod-group,trainjob,pytorchjob,raycluster,rayjob,leaderworkerset")),
        "{args:?}"
    );
    // by default: Jobs only, no other kind's webhook
    let default_hooks = find(
        &objects(&template(None, &[]).expect("renders")),
        "MutatingWebhookConfiguration",
    )["webhooks"]
        .as_sequence()
        .map(|w| w.len())
        .unwrap_or(0);
    assert!(default_hooks < hooks.len());
    assert!(
        template(None, &["workloadKinds={job,mpijob}"]).is_err(),
        "unknown kind accepted"
    );
}

/// Every `muster_*` metric name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("muster_") {
        let start = i + at;
        let mut end = start;
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end] == b'_'
                || bytes[end].is_ascii_digit())
        {
            end += 1;
        }
        let before = start.checked_sub(1).map(|b| bytes[b]);
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.') {
            out.insert(text[start..end].to_string());
        }
        i = end;
    }
    out
}

/// Whether `name` is exported: a metric of the reference, with the suffixes
/// of its type on the wire.
fn exported(name: &str) -> bool {
    use muster::controller::base::metrics::{METRICS, MetricKind};
    METRICS.iter().any(|m| {
        let base = format!("muster_{}", m.name);
        match m.kind {
            MetricKind::Counter => name == format!("{base}_total"),
            MetricKind::Gauge => name == base,
            MetricKind::Histogram => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name == format!("{base}{s}")),
        }
    })
}

#[test]
fn alerts_and_dashboard_name_only_exported_metrics() {
    let objs = objects(
        &template(
            None,
            &[
                "metrics.prometheusRule.enabled=true",
                "metrics.dashboard.enabled=true",
            ],
        )
        .expect("renders"),
    );
    for kind in ["PrometheusRule", "ConfigMap"] {
        let text = serde_norway::to_string(find(&objs, kind)).expect("yaml");
        let names = metric_names(&text);
        assert!(names.len() >= 5, "{kind}: {names:?}");
        let unknown: Vec<_> = names.iter().filter(|n| !exported(n)).collect();
        assert!(
            unknown.is_empty(),
            "{kind} names metrics the controller does not export: {unknown:?}"
        );
    }
    let cm = find(&objs, "ConfigMap");
    let dash: serde_json::Value =
        serde_json::from_str(cm["data"]["muster.json"].as_str().expect("dashboard"))
            .expect("dashboard JSON");
    let panels = dash["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6);
    // dollars per hour per pool and per queue, each in its own USD panel
    for (metric, by) in [
        ("muster_pool_cost_dollars_per_hour", "pool"),
        ("muster_queue_cost_dollars_per_hour", "queue"),
    ] {
        let panel = panels
            .iter()
            .find(|p| {
                p["targets"].as_array().is_some_and(|t| {
                    t.iter()
                        .any(|t| t["expr"].as_str().is_some_and(|e| e.contains(metric)))
                })
            })
            .unwrap_or_else(|| panic!("no dashboard panel shows {metric}"));
        assert_eq!(
            panel["fieldConfig"]["defaults"]["unit"], "currencyUSD",
            "{metric}"
        );
        let expr = panel["targets"][0]["expr"].as_str().expect("expr");
        assert!(
            expr.contains(&format!("by ({by})")),
            "{metric} per {by}: {expr}"
        );
        assert_eq!(panel["targets"][0]["legendFormat"], format!("{{{{{by}}}}}"));
    }
    // unique ids, and no two panels on the same cells of the grid
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().expect("id")),
            "duplicate id {}",
            p["id"]
        );
        let g = &p["gridPos"];
        let n = |k: &str| g[k].as_u64().expect("gridPos");
        for x in n("x")..n("x") + n("w") {
            for y in n("y")..n("y") + n("h") {
                assert!(
                    cells.insert((x, y)),
                    "{} overlaps another panel",
                    p["title"]
                );
            }
        }
    }
}

#[test]
fn alerts_pass_promtool_with_a_firing_and_a_quiet_case_each() {
    let objs = objects(&template(None, &["metrics.prometheusRule.enabled=true"]).expect("renders"));
    let rule = find(&objs, "PrometheusRule");
    let dir = tempdir("alerts");
    let groups = serde_norway::to_string(&serde_norway::Mapping::from_iter([(
        "groups".into(),
        rule["spec"]["groups"].clone(),
    )]))
    .expect("yaml");
    std::fs::write(dir.join("rules.yaml"), groups).expect("write rules");
    let tests = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/chart/alerts.test.yaml");
    std::fs::copy(tests, dir.join("alerts.test.yaml")).expect("copy tests");
    for args in [
        vec!["check", "rules", "rules.yaml"],
        vec!["test", "rules", "alerts.test.yaml"],
    ] {
        let out = Command::new("promtool").args(&args).current_dir(&dir).output().unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): install the Debian package prometheus (./scripts/test does)")
        });
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // every alert has a firing case in the test file
    let text = std::fs::read_to_string(tests).expect("tests");
    for r in rule["spec"]["groups"][0]["rules"]
        .as_sequence()
        .expect("rules")
    {
        let name = r["alert"].as_str().expect("alert");
        assert!(
            text.matches(&format!("alertname: {name}")).count() >= 2,
            "{name}: needs a firing and a quiet case"
        );
    }
}

#[test]
fn every_operator_flag_has_a_value() {
    let out = Command::new(env!("CARGO_BIN_EXE_muster"))
        .args(["controller", "--help"])
        .output()
        .expect("help");
    let help = String::from_utf8_lossy(&out.stdout);
    let flags: BTreeSet<&str> = help
        .split_whitespace()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches([',', '.', ')'])
                .split('=')
                .next()
                .unwrap_or("")
        })
        .collect();
    let rendered = [
        template(None, &[]).expect("renders"),
        template(
            None,
            &[
                "leaderElection.enabled=false",
                "replicaCount=1",
                "aws.endpoint=http://e",
                "aws.interruptionQueue=q",
                "gcp.endpoint=http://g",
                "namespaces={a,b}",
                "prometheus.url=http://prometheus:9090",
                "clouds={aws,sim}",
                "webhook.certs=helm",
            ],
        )
        .expect("renders"),
    ]
    .concat();
    // set by the cluster (in-cluster configuration, the pod's name), help,
    // or only for a local test double that takes no credentials
    let not_for_operators = [
        "--kube-url",
        "--kubeconfig",
        "--identity",
        "--help",
        "--gcp-anonymous",
    ];
    for flag in flags {
        if not_for_operators.contains(&flag) {
            continue;
        }
        assert!(
            rendered.contains(&format!("{flag}=")) || rendered.contains(&format!("- {flag}\n")),
            "no chart value sets {flag}"
        );
    }
}

#[test]
fn examples_and_e2e_resources_pass_their_crd_schemas() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["docs/examples", "docs/examples/karpenter", "e2e/manifests"] {
        for e in std::fs::read_dir(root.join(dir)).expect("dir") {
            let p = e.expect("entry").path();
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            if p.extension().is_some_and(|x| x == "yaml")
                && text.contains("apiVersion: muster.dev/")
            {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 8, "{files:?}");
    let python = std::env::var("MUSTER_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .arg(root.join("tests/chart/validate_crs.py"))
        .arg(chart().join("crds"))
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("run {python}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("ok ")).count(),
        files.len(),
        "{text}"
    );
    let job = objects(&std::fs::read_to_string(root.join("e2e/manifests/job.yaml")).expect("job"));
    kubernetes_validate(&job, &[], "e2e-job");
    // the checker can fail: a wrong type is caught
    let bad = tempdir("bad-cr").join("bad.yaml");
    std::fs::write(&bad, "apiVersion: muster.dev/v1alpha1\nkind: GPUPool\nmetadata: {name: x}\nspec: {limits: {maxNodes: many}}\n").expect("write");
    let out = Command::new(&python)
        .arg(root.join("tests/chart/validate_crs.py"))
        .arg(chart().join("crds"))
        .arg(&bad)
        .output()
        .expect("run");
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The three certificate modes render what each needs: Helm's Secret and
/// caBundle, cert-manager's Certificate and CA injection (also through the
/// deprecated `certManager.enabled`), or nothing for the controller to
/// write itself.
#[test]
fn webhook_certificate_modes_render_what_each_needs() {
    let cases: [(&[&str], &str); 4] = [
        (&[], "controller"),
        (&["webhook.certs=helm"], "helm"),
        (&["webhook.certs=cert-manager"], "cert-manager"),
        (&["webhook.certManager.enabled=true"], "cert-manager"),
    ];
    for (set, mode) in cases {
        let objs = objects(&template(None, set).expect("renders"));
        let kinds: BTreeSet<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
        let cfg = find(&objs, "MutatingWebhookConfiguration");
        let bundle = &cfg["webhooks"][0]["clientConfig"]["caBundle"];
        let inject = &cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"];
        let args = format!(
            "{:?}",
            find(&objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        );
        let flag = if mode == "controller" {
            "controller"
        } else {
            "files"
        };
        assert!(
            args.contains(&format!("--webhook-certs={flag}")),
            "{set:?}: {args}"
        );
        assert_eq!(
            kinds.contains("Secret"),
            mode == "helm",
            "{set:?}: {kinds:?}"
        );
        assert_eq!(
            kinds.contains("Certificate"),
            mode == "cert-manager",
            "{set:?}: {kinds:?}"
        );
        assert_eq!(
            bundle.is_string(),
            mode == "helm",
            "{set:?}: caBundle {bundle:?}"
        );
        assert_eq!(
            inject.is_string(),
            mode == "cert-manager",
            "{set:?}: {inject:?}"
        );
    }
}

/// Helm 3 lints the chart as strictly as Helm 4 and renders the same
/// objects from every values file (the certificates Helm generates aside:
/// they are new on every render; in any order).
#[test]
fn helm_3_lints_and_renders_what_helm_4_does() {
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    let version = run_helm("helm3", &["version", "--short"]).expect("helm3 version");
    assert!(version.starts_with("v3."), "helm3 is {version}");
    // what differs between two renders by design: generated key material
    let comparable = |rendered: &str| -> Vec<Value> {
        let mut objs = objects(rendered);
        for o in &mut objs {
            if o["kind"] == "Secret" {
                o["data"] = Value::Null;
            }
            if o["kind"] == "Deployment" {
                o["spec"]["template"]["metadata"]["annotations"]["checksum/webhook-cert"] =
                    Value::Null;
            }
            if let Some(hooks) = o.get_mut("webhooks").and_then(Value::as_sequence_mut) {
                for h in hooks {
                    h["clientConfig"]["caBundle"] = Value::Null;
                }
            }
        }
        // the two order kinds they do not know (cert-manager's) differently
        objs.sort_by_key(|o| {
            (
                o["kind"].as_str().unwrap_or("").to_string(),
                o["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        });
        objs
    };
    for values in VALUES {
        let mut args = vec!["lint", "--strict", chart];
        let file = values.map(|v| format!("{chart}/{v}"));
        if let Some(f) = &file {
            args.extend(["--values", f.as_str()]);
        }
        if let Err(e) = run_helm("helm3", &args) {
            panic!("helm3 lint --strict {values:?}:\n{e}");
        }
        for set in [&[][..], &["webhook.certs=helm"][..]] {
            let three = template_with("helm3", values, set).expect("helm3 renders");
            let four = template(values, set).expect("helm renders");
            let (three, four) = (comparable(&three), comparable(&four));
            assert_eq!(three.len(), four.len(), "{values:?} {set:?}: object counts");
            for (a, b) in three.iter().zip(&four) {
                assert!(
                    a == b,
                    "{values:?} {set:?}: Helm 3 and Helm 4 render {} {} differently",
                    a["kind"].as_str().unwrap_or("?"),
                    a["metadata"]["name"].as_str().unwrap_or("?")
                );
            }
        }
    }
}
