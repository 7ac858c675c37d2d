"""GKE node pools as the GKE API (container.googleapis.com/v1) takes and
shows them: validation of a `nodePools.create` body, and what a created pool
is made of (instance template metadata `kube-env`, `kube-labels`,
`kubelet-config`; instance labels; names of its groups and templates).

Pure functions: no HTTP, no shared state. Sources:

* NodePool and NodeConfig fields:
  https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools
  and https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig
* The labels GKE puts into `kube-labels` and re-applies to the Node
  (`cloud.google.com/gke-nodepool`, `cloud.google.com/gke-accelerator`, ...):
  kubernetes/cloud-provider-gcp `cmd/gcp-controller-manager/node_annotator.go`
  (commit 31327cf7fdf2e11efa14f2902f0513b2f005e435, the last with the GKE code).
* `AUTOSCALER_ENV_VARS` (`node_labels=...;node_taints=...`) in `kube-env`, as
  Cluster Autoscaler reads it: kubernetes/autoscaler
  `cluster-autoscaler/cloudprovider/gce/templates.go` (`extractLabelsFromKubeEnv`,
  `extractTaintsFromKubeEnv`).
* `NODE_LABELS` / `NODE_TAINTS` becoming the kubelet's `--node-labels` /
  `--register-with-taints`: kubernetes/kubernetes `cluster/gce/util.sh`
  (`construct-linux-kubelet-flags`).

Simplified (the fake's own choices, not GKE's exact text or limits): error
messages, the truncation of long names, the 8-hex-digit hash in group and
template names (derived from cluster, pool, zone and a counter), the
contents of `kube-env` beyond the keys named above.
"""

import hashlib
import re

# GKE: a node pool name is an RFC 1035 label of at most 40 characters.
POOL_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")
LABEL_NAME = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_PREFIX = re.compile(r"^[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule",
                 "NO_EXECUTE": "NoExecute"}
DRIVER_VERSIONS = {"GPU_DRIVER_VERSION_UNSPECIFIED", "INSTALLATION_DISABLED", "DEFAULT", "LATEST"}
WORKLOAD_MODES = {"MODE_UNSPECIFIED", "GCE_METADATA", "GKE_METADATA"}
PLACEMENT_TYPES = {"TYPE_UNSPECIFIED", "COMPACT"}
DEFAULT_MACHINE = "e2-medium"  # GKE's default when config.machineType is empty

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
DRIVER_LABEL = "cloud.google.com/gke-gpu-driver-version"
SPOT_LABEL = "cloud.google.com/gke-spot"
PREEMPTIBLE_LABEL = "cloud.google.com/gke-preemptible"
METADATA_SERVER_LABEL = "iam.gke.io/gke-metadata-server-enabled"


# Enum fields arrive as names or as their numbers: the proto3 JSON mapping
# says "Parsers accept both enum names and integer values"
# (https://protobuf.dev/programming-guides/json/), and Google's Rust client
# sends numbers. Numbers from google/container/v1/cluster_service.proto.
ENUM_NUMBERS = {
    "effect": ["EFFECT_UNSPECIFIED", "NO_SCHEDULE", "PREFER_NO_SCHEDULE", "NO_EXECUTE"],
    "gpuDriverVersion": ["GPU_DRIVER_VERSION_UNSPECIFIED", "INSTALLATION_DISABLED", "DEFAULT", "LATEST"],
    "mode": ["MODE_UNSPECIFIED", "GCE_METADATA", "GKE_METADATA"],
    "type": ["TYPE_UNSPECIFIED", "COMPACT"],
    "consumeReservationType": ["UNSPECIFIED", "NO_RESERVATION", "ANY_RESERVATION", "SPECIFIC_RESERVATION"],
    "locationPolicy": ["LOCATION_POLICY_UNSPECIFIED", "BALANCED", "ANY"],
}
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"

# Compute's longest flex-start run (a resize request's requestedRunDuration,
# a flex-start VM's maxRunDuration): seven days.
MAX_RUN_SECS = 7 * 24 * 3600


def enum_name(field, value):
    """An enum value by name, whether it came as its name or its number."""
    names = ENUM_NUMBERS[field]
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str) and value.isdigit() and int(value) < len(names):
        return names[int(value)]
    return value


def normalize_enums(pool):
    """The pool with every enum field of the create body as its name."""
    cfg = pool.get("config") or {}
    for a in cfg.get("accelerators") or []:
        gdi = a.get("gpuDriverInstallationConfig")
        if isinstance(gdi, dict) and "gpuDriverVersion" in gdi:
            gdi["gpuDriverVersion"] = enum_name("gpuDriverVersion", gdi["gpuDriverVersion"])
    for t in cfg.get("taints") or []:
        if "effect" in t:
            t["effect"] = enum_name("effect", t["effect"])
    wmc = cfg.get("workloadMetadataConfig")
    if isinstance(wmc, dict) and "mode" in wmc:
        wmc["mode"] = enum_name("mode", wmc["mode"])
    pp = pool.get("placementPolicy")
    if isinstance(pp, dict) and "type" in pp:
        pp["type"] = enum_name("type", pp["type"])
    ra = cfg.get("reservationAffinity")
    if isinstance(ra, dict) and "consumeReservationType" in ra:
        ra["consumeReservationType"] = enum_name("consumeReservationType", ra["consumeReservationType"])
    auto = pool.get("autoscaling")
    if isinstance(auto, dict) and "locationPolicy" in auto:
        auto["locationPolicy"] = enum_name("locationPolicy", auto["locationPolicy"])
    return pool


def duration_secs(value, field):
    """A google.protobuf.Duration in its JSON form ("3600s") as seconds."""
    if not isinstance(value, str) or not value.endswith("s"):
        raise Invalid(f"Invalid value for field '{field}': {value!r} is not a duration such as \"3600s\".")
    try:
        return float(value[:-1])
    except ValueError:
        raise Invalid(f"Invalid value for field '{field}': {value!r} is not a duration such as \"3600s\".")


def validate_flex_start(pool, cfg):
    """A flex-start pool's required settings, as GKE's flex-start node pool
    command sets them (`--flex-start --reservation-affinity=none
    --no-enable-autorepair`, with `--location-policy=ANY` when the pool
    autoscales; https://cloud.google.com/kubernetes-engine/docs/concepts/dws
    and its how-to pages): no reservation consumed, auto-repair off, not
    spot or preemptible, a run of at most seven days."""
    if cfg.get("spot") or cfg.get("preemptible"):
        raise Invalid("Invalid value for field 'nodePool.config.flexStart': flex-start cannot be combined "
                      "with spot or preemptible VMs.")
    affinity = (cfg.get("reservationAffinity") or {}).get("consumeReservationType")
    if affinity != "NO_RESERVATION":
        raise Invalid("Invalid value for field 'nodePool.config.reservationAffinity': a flex-start node pool "
                      f"consumes no reservation (NO_RESERVATION), not {affinity!r}.")
    # proto3: a field left out is false, but a pool without `management`
    # gets GKE's default (auto-repair on)
    if "management" not in pool or (pool.get("management") or {}).get("autoRepair", False):
        raise Invalid("Invalid value for field 'nodePool.management.autoRepair': auto-repair must be "
                      "disabled on a flex-start node pool.")
    auto = pool.get("autoscaling") or {}
    if auto.get("enabled") and auto.get("locationPolicy", "BALANCED") != "ANY":
        raise Invalid("Invalid value for field 'nodePool.autoscaling.locationPolicy': an autoscaled "
                      "flex-start node pool needs location policy ANY.")
    if "maxRunDuration" in cfg:
        secs = duration_secs(cfg["maxRunDuration"], "nodePool.config.maxRunDuration")
        if not 0 < secs <= MAX_RUN_SECS:
            raise Invalid("Invalid value for field 'nodePool.config.maxRunDuration': "
                          f"{cfg['maxRunDuration']} is not within 7 days.")


class Invalid(Exception):
    """A body GKE answers with 400 INVALID_ARGUMENT."""


def valid_label_key(key):
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not LABEL_PREFIX.match(prefix)):
        return False
    return bool(LABEL_NAME.match(name))


def count_of(value, field):
    """GKE's int64 fields arrive as JSON strings or numbers."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise Invalid(f"Invalid value for field '{field}': {value!r} is not an integer.")
    return n


def built_in(machine):
    """The (type, count) of the GPUs built into a machine type, or None."""
    acc = (machine or {}).get("accelerators") or []
    if not acc:
        return None
    return acc[0]["guestAcceleratorType"], acc[0]["guestAcceleratorCount"]


def validate(pool, *, region_zones, machines, accelerators, unavailable):
    """Checks a `nodePool` of a create request; returns it normalized (zones,
    machine type, accelerators filled in) or raises Invalid with GKE-like
    text. `machines` and `accelerators` are the fake's catalogue, offered in
    every zone except the (zone, acceleratorType) pairs in `unavailable`."""
    if not isinstance(pool, dict) or not pool:
        raise Invalid("Invalid value for field 'nodePool': a node pool is required.")
    pool = normalize_enums(pool)
    name = pool.get("name") or ""
    if not POOL_NAME.match(name):
        raise Invalid(f"Invalid value for field 'nodePool.name': \"{name}\". Node pool name must be "
                      "1-40 characters: lowercase letters, digits and hyphens, starting with a letter "
                      "and ending with a letter or digit.")
    cfg = dict(pool.get("config") or {})
    locations = list(pool.get("locations") or region_zones)
    for z in locations:
        if z not in region_zones:
            raise Invalid(f"Invalid value for field 'nodePool.locations': \"{z}\" is not a zone of "
                          f"the cluster's region ({', '.join(region_zones)}).")
    mt = cfg.get("machineType") or DEFAULT_MACHINE
    machine = next((m for m in machines if m["name"] == mt), None)
    if machine is None:
        raise Invalid(f"Invalid value for field 'nodePool.config.machineType': \"{mt}\". "
                      f"Machine type \"{mt}\" does not exist in zone \"{locations[0]}\".")
    cfg["machineType"] = mt
    if cfg.get("spot") and cfg.get("preemptible"):
        raise Invalid("Invalid value for field 'nodePool.config': spot and preemptible cannot both be set.")
    accs = cfg.get("accelerators") or []
    fixed = built_in(machine)
    norm = []
    for i, a in enumerate(accs):
        field = f"nodePool.config.accelerators[{i}]"
        ty = a.get("acceleratorType") or ""
        n = count_of(a.get("acceleratorCount", 0), field + ".acceleratorCount")
        if n < 1:
            raise Invalid(f"Invalid value for field '{field}.acceleratorCount': {n}. Must be at least 1.")
        known = {x["name"]: x for x in accelerators}
        if fixed:
            known.setdefault(fixed[0], {"name": fixed[0], "maximumCardsPerInstance": fixed[1]})
        if ty not in known:
            raise Invalid(f"Invalid value for field '{field}.acceleratorType': \"{ty}\". "
                          f"Accelerator type \"{ty}\" does not exist in zone \"{locations[0]}\".")
        for z in locations:
            if (z, ty) in unavailable:
                raise Invalid(f"Accelerator type \"{ty}\" does not exist in zone \"{z}\".")
        if fixed:
            if (ty, n) != fixed:
                raise Invalid(f"Invalid value for field '{field}': machine type {mt} comes with "
                              f"{fixed[1]} {fixed[0]}; {n} {ty} requested.")
        else:
            if not mt.startswith("n1-"):
                raise Invalid(f"Invalid value for field '{field}': accelerators can only be attached "
                              f"to N1 machine types, not {mt}.")
            most = known[ty].get("maximumCardsPerInstance", 8)
            if n > most or n & (n - 1):
                raise Invalid(f"Invalid value for field '{field}.acceleratorCount': {n}. "
                              f"{ty} attaches 1, 2, 4 ... up to {most} per machine.")
        drv = (a.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion")
        if drv is not None and drv not in DRIVER_VERSIONS:
            raise Invalid(f"Invalid value for field '{field}.gpuDriverInstallationConfig."
                          f"gpuDriverVersion': \"{drv}\".")
        norm.append(dict(a, acceleratorCount=str(n)))
    if fixed and not norm:
        # GPUs built into A2/A3/G2 machines are attached whether named or not
        norm = [{"acceleratorCount": str(fixed[1]), "acceleratorType": fixed[0]}]
        for z in locations:
            if (z, fixed[0]) in unavailable:
                raise Invalid(f"Accelerator type \"{fixed[0]}\" does not exist in zone \"{z}\".")
    if norm:
        cfg["accelerators"] = norm
    for k, v in (cfg.get("labels") or {}).items():
        if not valid_label_key(k) or not LABEL_VALUE.match(str(v)):
            raise Invalid(f"Invalid value for field 'nodePool.config.labels': \"{k}={v}\" is not a "
                          "valid Kubernetes label.")
    for i, t in enumerate(cfg.get("taints") or []):
        if not valid_label_key(t.get("key") or "") or not LABEL_VALUE.match(str(t.get("value", ""))):
            raise Invalid(f"Invalid value for field 'nodePool.config.taints[{i}]': bad key or value.")
        if t.get("effect") not in TAINT_EFFECTS:
            raise Invalid(f"Invalid value for field 'nodePool.config.taints[{i}].effect': "
                          f"\"{t.get('effect')}\".")
    mode = (cfg.get("workloadMetadataConfig") or {}).get("mode")
    if mode is not None and mode not in WORKLOAD_MODES:
        raise Invalid(f"Invalid value for field 'nodePool.config.workloadMetadataConfig.mode': \"{mode}\".")
    validate_reservation_affinity(cfg.get("reservationAffinity"))
    n = count_of(pool.get("initialNodeCount", 0), "nodePool.initialNodeCount")
    if n < 0:
        raise Invalid(f"Invalid value for field 'nodePool.initialNodeCount': {n}. Must be non-negative.")
    validate_autoscaling(pool.get("autoscaling") or {})
    placement = (pool.get("placementPolicy") or {}).get("type")
    if placement is not None and placement not in PLACEMENT_TYPES:
        raise Invalid(f"Invalid value for field 'nodePool.placementPolicy.type': \"{placement}\".")
    if placement == "COMPACT" and len(locations) != 1:
        raise Invalid("Invalid value for field 'nodePool.placementPolicy': a COMPACT placement policy "
                      f"needs the node pool in a single zone, not {len(locations)}.")
    if cfg.get("flexStart"):
        validate_flex_start(pool, cfg)
    out = dict(pool, config=cfg, locations=locations, initialNodeCount=n)
    return out


def validate_reservation_affinity(ra):
    """NodeConfig.reservationAffinity (GKE ReservationAffinity): a known
    `consumeReservationType`; SPECIFIC_RESERVATION names its reservation with
    key `compute.googleapis.com/reservation-name` and values (the
    reservation's name, or projects/P/reservations/NAME of a shared one),
    as `gcloud container node-pools create --reservation-affinity=specific
    --reservation=...` sends it ("Consuming reserved zonal resources",
    https://cloud.google.com/kubernetes-engine/docs/how-to/consuming-reservations;
    ReservationAffinity in the NodeConfig reference)."""
    if ra is None:
        return
    if not isinstance(ra, dict):
        raise Invalid("Invalid value for field 'nodePool.config.reservationAffinity': an object is required.")
    t = ra.get("consumeReservationType", "UNSPECIFIED")
    if t not in ENUM_NUMBERS["consumeReservationType"]:
        raise Invalid(f"Invalid value for field 'nodePool.config.reservationAffinity.consumeReservationType': "
                      f"\"{t}\".")
    if t == "SPECIFIC_RESERVATION":
        if ra.get("key") != RESERVATION_NAME_KEY:
            raise Invalid("Invalid value for field 'nodePool.config.reservationAffinity.key': "
                          f"\"{ra.get('key', '')}\"; a specific reservation is named with key "
                          f"\"{RESERVATION_NAME_KEY}\".")
        if not ra.get("values"):
            raise Invalid("Invalid value for field 'nodePool.config.reservationAffinity.values': "
                          "a specific reservation needs its name.")


def validate_autoscaling(auto):
    """Autoscaling may be disabled (then its counts are not looked at);
    enabled, it needs 0 <= minNodeCount <= maxNodeCount, maxNodeCount >= 1."""
    if auto.get("enabled"):
        lo = count_of(auto.get("minNodeCount", 0), "nodePool.autoscaling.minNodeCount")
        hi = count_of(auto.get("maxNodeCount", 0), "nodePool.autoscaling.maxNodeCount")
        if lo < 0 or hi < 1 or lo > hi:
            raise Invalid("Invalid value for field 'nodePool.autoscaling': minNodeCount must be >= 0, "
                          f"maxNodeCount >= 1 and minNodeCount <= maxNodeCount (got {lo}, {hi}).")


def short_hash(*parts):
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:8]


def group_names(cluster, pool, zone, seq):
    """(template name, MIG name, baseInstanceName) as GKE names them:
    gke-<cluster>-<pool>-<hash>, gke-<cluster>-<pool>-<hash>-grp. Long
    names are cut so an instance name (<base>-xxxx) stays within 63."""
    h = short_hash(cluster, pool, zone, seq)
    c, p = cluster, pool
    while len(f"gke-{c}-{p}-{h}") > 58:
        if len(c) >= len(p):
            c = c[:-1]
        else:
            p = p[:-1]
    base = f"gke-{c.rstrip('-')}-{p.rstrip('-')}-{h}"
    return base, f"{base}-grp", base


def kube_labels(pool):
    """The `kube-labels` metadata of a pool's template: its labels and GKE's."""
    cfg = pool["config"]
    labels = {
        "cloud.google.com/gke-boot-disk": cfg.get("diskType") or "pd-balanced",
        "cloud.google.com/gke-container-runtime": "containerd",
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/machine-family": cfg["machineType"].split("-")[0],
        NODEPOOL_LABEL: pool["name"],
    }
    for a in cfg.get("accelerators") or []:
        labels[ACCELERATOR_LABEL] = a["acceleratorType"]
        drv = (a.get("gpuDriverInstallationConfig") or {}).get("gpuDriverVersion")
        if drv in ("DEFAULT", "LATEST"):
            labels[DRIVER_LABEL] = drv.lower()
    if cfg.get("spot"):
        labels[SPOT_LABEL] = "true"
    if cfg.get("preemptible"):
        labels[PREEMPTIBLE_LABEL] = "true"
    if (cfg.get("workloadMetadataConfig") or {}).get("mode") == "GKE_METADATA":
        labels[METADATA_SERVER_LABEL] = "true"
    labels.update(cfg.get("labels") or {})
    return labels


def join_labels(labels):
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def node_taints(pool, gpu_taint):
    """`key=value:Effect,...` of the pool's taints. GKE adds
    nvidia.com/gpu=present:NoSchedule to the nodes of a GPU pool added to a
    cluster that already runs a non-GPU node pool (`gpu_taint`;
    https://cloud.google.com/kubernetes-engine/docs/how-to/gpus)."""
    cfg = pool["config"]
    out = [f"{t['key']}={t.get('value', '')}:{TAINT_EFFECTS[t['effect']]}" for t in cfg.get("taints") or []]
    if gpu_taint and cfg.get("accelerators") and not any(t.startswith("nvidia.com/gpu=") for t in out):
        out.append("nvidia.com/gpu=present:NoSchedule")
    return ",".join(out)


def kube_env(pool, cluster, zone, labels, gpu_taint):
    taints = node_taints(pool, gpu_taint)
    lines = [
        'ALLOCATE_NODE_CIDRS: "true"',
        f"AUTOSCALER_ENV_VARS: node_labels={join_labels(labels)};node_taints={taints};"
        "kube_reserved=cpu=1060m,memory=1019Mi,ephemeral-storage=41Gi;os=linux;os_distribution=cos",
        f"CLUSTER_NAME: {cluster}",
        "KUBELET_ARGS: --v=2 --cloud-provider=external --cert-dir=/var/lib/kubelet/pki/ "
        f"--kubeconfig=/var/lib/kubelet/kubeconfig --max-pods=110 --node-labels={join_labels(labels)}",
        f"NODE_LABELS: {join_labels(labels)}",
        f"NODE_TAINTS: {taints}",
        f"ZONE: {zone}",
    ]
    return "\n".join(lines) + "\n"


def kubelet_config(pool):
    return ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
            "cgroupRoot: /\nmaxPods: 110\nserverTLSBootstrap: true\n")


def scheduling(cfg):
    if cfg.get("flexStart"):
        # a flex-start VM: deleted at the end of its run
        secs = int(float(str(cfg.get("maxRunDuration", f"{MAX_RUN_SECS}s")).rstrip("s")))
        return {"provisioningModel": "FLEX_START", "automaticRestart": False, "onHostMaintenance": "TERMINATE",
                "instanceTerminationAction": "DELETE", "maxRunDuration": {"seconds": str(secs)}}
    if cfg.get("spot"):
        return {"provisioningModel": "SPOT", "preemptible": True, "automaticRestart": False,
                "onHostMaintenance": "TERMINATE", "instanceTerminationAction": "STOP"}
    if cfg.get("preemptible"):
        return {"provisioningModel": "STANDARD", "preemptible": True, "automaticRestart": False,
                "onHostMaintenance": "TERMINATE"}
    gpu = bool(cfg.get("accelerators"))
    return {"provisioningModel": "STANDARD", "preemptible": False, "automaticRestart": True,
            "onHostMaintenance": "TERMINATE" if gpu else "MIGRATE"}


def template_properties(pool, *, project, region, cluster, zone, gpu_taint=True):
    """The `properties` of the pool's instance template in `zone`;
    `gpu_taint`: the cluster already runs a non-GPU node pool."""
    cfg = pool["config"]
    labels = kube_labels(pool)
    attached = []
    if cfg["machineType"].startswith("n1-"):
        attached = [{"acceleratorType": a["acceleratorType"], "acceleratorCount": int(a["acceleratorCount"])}
                    for a in cfg.get("accelerators") or []]
    props = {
        "machineType": cfg["machineType"],
        "canIpForward": True,
        "tags": {"items": [f"gke-{cluster}-node"]},
        "networkInterfaces": [{
            "kind": "compute#networkInterface",
            "network": f"https://www.googleapis.com/compute/v1/projects/{project}/global/networks/default",
            "subnetwork": f"https://www.googleapis.com/compute/v1/projects/{project}/regions/{region}/subnetworks/default",
            "aliasIpRanges": [{"ipCidrRange": "/24", "subnetworkRangeName": f"gke-{cluster}-pods"}],
        }],
        "disks": [{"kind": "compute#attachedDisk", "type": "PERSISTENT", "mode": "READ_WRITE", "boot": True,
                   "autoDelete": True, "initializeParams": {
                       "sourceImage": "https://www.googleapis.com/compute/v1/projects/gke-node-images/global/images/gke-1315-gke1023000-cos-113-18244-236-26-c-pre",
                       "diskSizeGb": str(cfg.get("diskSizeGb") or 100),
                       "diskType": cfg.get("diskType") or "pd-balanced"}}],
        "metadata": {"kind": "compute#metadata", "items": [
            {"key": "kube-env", "value": kube_env(pool, cluster, zone, labels, gpu_taint)},
            {"key": "kube-labels", "value": join_labels(labels)},
            {"key": "kubelet-config", "value": kubelet_config(pool)},
            {"key": "cluster-name", "value": cluster},
            {"key": "cluster-location", "value": region},
            {"key": "disable-legacy-endpoints", "value": "true"},
        ]},
        "serviceAccounts": [{"email": cfg.get("serviceAccount") or "default",
                             "scopes": cfg.get("oauthScopes") or ["https://www.googleapis.com/auth/cloud-platform"]}],
        "scheduling": scheduling(cfg),
        "labels": dict(cfg.get("resourceLabels") or {}, **{
            "goog-gke-node": "", "goog-k8s-cluster-name": cluster,
            "goog-k8s-cluster-location": region, "goog-k8s-node-pool-name": pool["name"]}),
    }
    if attached:
        props["guestAccelerators"] = attached
    if cfg.get("reservationAffinity"):
        # the pool's instances consume what its config says
        props["reservationAffinity"] = dict(cfg["reservationAffinity"])
    return props
