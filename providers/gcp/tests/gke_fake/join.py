"""GKE's node-join rules, as a pure function of the fake's state: would the
kubelet on an instance become a Node of the cluster, and with which labels,
taints and annotations?

Input is a plain snapshot (`World.snapshot()`):
    {"cluster": {"project", "location", "name"},
     "machineTypes": {name: {"guestCpus", "memoryMb", "accelerators", "architecture"}} (optional),
     "nodePools": [{"name", "instanceGroupUrls": [...]}],
     "groups": {group URL: [{"name", "id", "currentAction"}]},
     "instances": [Compute instance resources]}

Rules, each with its source:

1. The kubelet's client CSR is approved only if the VM exists in the GCE
   API ("deny CSR ...: VM doesn't exist in GCE API") and belongs to the
   cluster: the instance's id is among the managed instances of one of the
   instance groups of the cluster's node pools (`instanceGroupUrls`) whose
   location is a prefix of the instance's zone ("VM %q doesn't belong to
   cluster %q"). The `created-by` metadata is only a hint that orders the
   search; it grants nothing. kubernetes/cloud-provider-gcp
   `cmd/gcp-controller-manager/node_csr_approver.go`
   (`validateTPMAttestation`, `clusterHasInstance`, `groupHasInstance`,
   `validateInstanceGroupHint`; commit 31327cf7fdf2e11efa14f2902f0513b2f005e435,
   the last one before GKE's code was removed from that repository).
2. The kubelet registers with `--node-labels` and `--register-with-taints`;
   GKE's bootstrap builds them from kube-env's `NODE_LABELS` and
   `NODE_TAINTS` (kubernetes/kubernetes `cluster/gce/util.sh`,
   `construct-linux-kubelet-flags`); flags already written in kube-env's
   `KUBELET_ARGS` are taken as they are, and add to those.
3. GKE's node annotator then reconciles the labels from the instance's
   `kube-labels` metadata: it deletes every label GKE owns
   (`cloud.google.com/gke-nodepool`, `cloud.google.com/gke-accelerator`,
   `cloud.google.com/gke-preemptible`, `cloud.google.com/gke-gpu`, local SSD
   labels, ...) and sets those of `kube-labels`; so an owned label that the
   kubelet registered but `kube-labels` lacks is gone. It writes
   `container.googleapis.com/instance_id`,
   `node.gke.io/last-applied-node-labels` and
   `node.gke.io/last-applied-node-taints` (the taints of kube-env's
   `node_taints=` entry, `AUTOSCALER_ENV_VARS`). Without `kube-labels` it
   leaves the labels alone. kubernetes/cloud-provider-gcp
   `cmd/gcp-controller-manager/node_annotator.go` (same commit).

4. A node whose VM has a physical host topology (Compute's
   `resourceStatus.physicalHostTopology`) carries it as
   `cloud.google.com/gce-topology-block`, `-subblock` and `-host` ("the
   organization-specific ID of the reserved block in which the VM is
   located", of its sub-block, "the ID of the host on which the VM is
   located": "Schedule GKE workloads with Topology Aware Scheduling",
   https://cloud.google.com/ai-hypercomputer/docs/workloads/schedule-gke-workloads-tas).
   Which GKE component writes them is not documented; the fake sets them at
   registration.

The Node's `status.capacity` (cpu, memory, pods 110, nvidia.com/gpu) is
the machine type's, for a test to start from; readiness, allocatable and
conditions are the kubelet's, left to whatever registers the Node.

The fake's own rules (not from upstream): an instance that is not RUNNING
has no kubelet to ask; an instance without `kube-env` metadata is not a GKE
node image and never asks. The kubelet's own labels (hostname, os, arch,
instance type, zone, region) are those every kubelet with an external
cloud provider ends up with; its `kubernetes.io/arch` is Go's name of the
machine type's `architecture` (ARM64 → arm64, else amd64), as the kubelet
sets it from the binary the node image runs (kubernetes/kubernetes
`pkg/kubelet/kubelet_node_status.go`, `initialNode`).
"""

OWNED_KUBE_LABELS = [
    "cloud.google.com/gke-nodepool",
    "cloud.google.com/gke-local-ssd",
    "cloud.google.com/gke-local-scsi-ssd",
    "cloud.google.com/gke-local-nvme-ssd",
    "cloud.google.com/gke-preemptible",
    "cloud.google.com/gke-gpu",
    "cloud.google.com/gke-accelerator",
    "beta.kubernetes.io/fluentd-ds-ready",
    "beta.kubernetes.io/kube-proxy-ds-ready",
    "beta.kubernetes.io/masq-agent-ds-ready",
    "projectcalico.org/ds-ready",
    "beta.kubernetes.io/metadata-proxy-ready",
    "addon.gke.io/node-local-dns-ds-ready",
]
INSTANCE_ID_ANNOTATION = "container.googleapis.com/instance_id"
TOPOLOGY_LABELS = [("block", "cloud.google.com/gce-topology-block"),
                   ("subblock", "cloud.google.com/gce-topology-subblock"),
                   ("host", "cloud.google.com/gce-topology-host")]
LAST_LABELS_ANNOTATION = "node.gke.io/last-applied-node-labels"
LAST_TAINTS_ANNOTATION = "node.gke.io/last-applied-node-taints"


def metadata(inst, key):
    for item in (inst.get("metadata") or {}).get("items") or []:
        if item.get("key") == key:
            return item.get("value")
    return None


def parse_kube_env(text):
    """`KEY: value` lines; indented lines continue the previous value."""
    env, last = {}, None
    for line in (text or "").splitlines():
        if line[:1] in (" ", "\t") and last:
            env[last] += " " + line.strip()
            continue
        if ":" in line:
            k, v = line.split(":", 1)
            last = k.strip()
            env[last] = v.strip().strip('"')
    return env


def parse_labels(raw):
    out = {}
    for kv in (raw or "").split(","):
        kv = kv.strip()
        if not kv:
            continue
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def parse_taints(raw):
    out = []
    for t in (raw or "").split(","):
        t = t.strip()
        if not t:
            continue
        kv, _, effect = t.rpartition(":")
        k, _, v = kv.partition("=")
        out.append({"key": k, "value": v, "effect": effect})
    return out


def flag(args, name):
    """The value of `--name=value` in a kubelet command line, or None."""
    for word in (args or "").split():
        if word.startswith(f"--{name}="):
            return word.split("=", 1)[1]
    return None


def serialize_labels(labels):
    return ",".join(sorted(f"{k}={v}" for k, v in labels.items()))


def serialize_taints(taints):
    return ",".join(sorted(f"{t['key']}={t['value']}:{t['effect']}" for t in taints))


def group_location(url):
    parts = url.split("/")
    return parts[-3] if len(parts) >= 4 else ""


def membership(snap, inst):
    """The URL of the cluster group that holds the instance, or None."""
    zone = inst["zone"].rstrip("/").rsplit("/", 1)[-1]
    urls = [u for p in snap["nodePools"] for u in p.get("instanceGroupUrls") or []]
    hint = metadata(inst, "created-by") or ""
    hinted = [u for u in urls if hint and u.split("/")[-1] == hint.split("/")[-1]
              and group_location(u) == group_location(hint)]
    for u in hinted + urls:
        if not zone.startswith(group_location(u)):
            continue
        for m in snap["groups"].get(u, []):
            if m.get("id") and m["id"] == inst["id"]:
                return u
    return None


def verdict(snap, name, zone=None):
    """{"name", "zone", "joins": bool, "csr": "Approved"|"Denied"|"NotRequested",
    "reason", "node": Node or None} for the instance `name` (in `zone` if
    given)."""
    cluster = snap["cluster"]["name"]
    found = [i for i in snap["instances"] if i["name"] == name
             and (zone is None or i["zone"].rstrip("/").endswith("/" + zone))]
    out = {"name": name, "zone": zone, "joins": False, "node": None}
    if not found:
        return dict(out, csr="Denied", reason=f"deny CSR: VM {name!r} doesn't exist in GCE API")
    inst = found[0]
    izone = inst["zone"].rstrip("/").rsplit("/", 1)[-1]
    out["zone"] = izone
    if inst.get("status") != "RUNNING":
        return dict(out, csr="NotRequested",
                    reason=f"instance is {inst.get('status')}: no kubelet runs to request a certificate")
    env_text = metadata(inst, "kube-env")
    if env_text is None:
        return dict(out, csr="NotRequested",
                    reason="no kube-env metadata: not a GKE node image, no kubelet bootstraps into the cluster")
    group = membership(snap, inst)
    if group is None:
        return dict(out, csr="Denied",
                    reason=f"deny CSR: VM {name!r} doesn't belong to cluster {cluster!r} (its id {inst['id']} is "
                           "no managed instance of the instance groups of the cluster's node pools)")
    n = node(inst, env_text, snap.get("machineTypes") or {})
    cap = capacity(inst, snap.get("machineTypes") or {})
    if cap:
        n["status"] = {"capacity": cap}
    return dict(out, joins=True, csr="Approved", reason=f"managed instance of {group}", node=n)


def capacity(inst, machines):
    """What the kubelet (and, for GPUs, the device plugin once it runs)
    reports of the machine: cpu, memory, pods, nvidia.com/gpu."""
    m = machines.get(inst.get("machineType", "").rsplit("/", 1)[-1])
    if not m:
        return None
    gpus = sum(a.get("guestAcceleratorCount", 0) for a in m.get("accelerators") or [])
    gpus += sum(int(a.get("acceleratorCount", 0)) for a in inst.get("guestAccelerators") or [])
    cap = {"cpu": str(m["guestCpus"]), "memory": f"{m['memoryMb']}Mi", "pods": "110"}
    if gpus:
        cap["nvidia.com/gpu"] = str(gpus)
    return cap


def kubelet_arch(inst, machines):
    """The kubelet's `kubernetes.io/arch` (Go's GOARCH, pkg/kubelet
    kubelet_node_status.go `initialNode`): the node image is built for the
    machine type's processor, `architecture` ARM64 → arm64, else amd64."""
    m = machines.get(inst.get("machineType", "").rsplit("/", 1)[-1]) or {}
    return "arm64" if m.get("architecture") == "ARM64" else "amd64"


def node(inst, env_text, machines=None):
    env = parse_kube_env(env_text)
    name = inst["name"]
    arch = kubelet_arch(inst, machines or {})
    zone = inst["zone"].rstrip("/").rsplit("/", 1)[-1]
    project = inst["selfLink"].split("/projects/", 1)[1].split("/", 1)[0]
    args = env.get("KUBELET_ARGS", "")
    labels = {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": arch,
        "node.kubernetes.io/instance-type": inst.get("machineType", "").rsplit("/", 1)[-1],
        "beta.kubernetes.io/instance-type": inst.get("machineType", "").rsplit("/", 1)[-1],
        "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": zone.rsplit("-", 1)[0],
        "failure-domain.beta.kubernetes.io/zone": zone,
        "failure-domain.beta.kubernetes.io/region": zone.rsplit("-", 1)[0],
    }
    labels.update(parse_labels(env.get("NODE_LABELS")))
    labels.update(parse_labels(flag(args, "node-labels")))
    topology = (inst.get("resourceStatus") or {}).get("physicalHostTopology") or {}
    for field, key in TOPOLOGY_LABELS:
        if topology.get(field):
            labels[key] = topology[field]
    taints = parse_taints(env.get("NODE_TAINTS"))
    for t in parse_taints(flag(args, "register-with-taints")):
        if not any(x["key"] == t["key"] and x["effect"] == t["effect"] for x in taints):
            taints.append(t)
    annotations = {INSTANCE_ID_ANNOTATION: str(inst["id"])}
    kube_labels = metadata(inst, "kube-labels")
    if kube_labels is not None:
        for k in OWNED_KUBE_LABELS:
            labels.pop(k, None)
        desired = parse_labels(kube_labels)
        labels.update(desired)
        annotations[LAST_LABELS_ANNOTATION] = serialize_labels(desired)
    auto = None
    for part in env_text.split(";"):
        if part.startswith("node_taints"):
            auto = part.split("=", 1)[1] if "=" in part else ""
            break
    annotations[LAST_TAINTS_ANNOTATION] = serialize_taints(parse_taints(auto)) if auto else ""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": {"providerID": f"gce://{project}/{zone}/{name}", "taints": taints}}


def nodes(snap):
    """Every instance of the project that carries GKE node metadata for the
    cluster (or is a managed instance of one of its groups): the Nodes GKE
    would register, and the rest with the reason."""
    cluster = snap["cluster"]["name"]
    members = {m["name"] for ms in snap["groups"].values() for m in ms}
    out, refused = [], []
    for inst in snap["instances"]:
        if metadata(inst, "cluster-name") != cluster and inst["name"] not in members:
            continue
        zone = inst["zone"].rstrip("/").rsplit("/", 1)[-1]
        v = verdict(snap, inst["name"], zone)
        if v["joins"]:
            out.append(v["node"])
        else:
            refused.append({"name": v["name"], "zone": v["zone"], "csr": v["csr"], "reason": v["reason"]})
    return {"nodes": out, "refused": refused}
