"""Karpenter v1's rules about NodeClaims, Nodes, NodePools and pods, as pure
functions (karpenter_controller.py acts on them; test_karpenter.py tests
them). Upstream: kubernetes-sigs/karpenter at v1.14.0-20-g2264681 (commit
2266468104f36373ed002241afaee2d3bbc26078) and aws/karpenter-provider-aws at
v1.14.0-68-g1d92708 (commit 1d927085dd81a9df9301e613f371dac5b4d16bfe):

- names: pkg/apis/v1/labels.go (NodePoolLabelKey, CapacityTypeLabelKey,
  NodeRegisteredLabelKey, NodeInitializedLabelKey, DoNotDisruptAnnotationKey,
  NodeClaimTerminationTimestampAnnotationKey, NodeClassLabelKey,
  WellKnownLabels), pkg/apis/v1/taints.go (DisruptedNoScheduleTaint,
  UnregisteredNoExecuteTaint), pkg/apis/v1/nodeclaim_status.go (the
  condition types; Launched, Registered, Initialized make the root Ready);
- requirements: pkg/scheduling/requirement.go (In, NotIn, Exists,
  DoesNotExist, Gt, Lt, Gte, Lte);
- offerings: the AWS provider's pkg/providers/instance/instance.go (Create:
  the offerings the requirements allow, minus the unavailable ones, cheapest
  first; none left is the InsufficientCapacityError "all requested instance
  types were unavailable during launch");
- initialization: pkg/controllers/nodeclaim/lifecycle/initialization.go
  (Reconcile, StartupTaintsRemoved, KnownEphemeralTaintsRemoved,
  RequestedResourcesRegistered) and pkg/scheduling/taints.go
  (KnownEphemeralTaints, IsKnownEphemeralTaint);
- pods: pkg/utils/pod/scheduling.go (IsActive, IsReschedulable,
  IsDrainable, IsWaitingEviction, IsEvictable, IsDisruptable,
  IsDoNotDisruptActive, IsProvisionable / FailedToSchedule) and
  pkg/controllers/node/termination/terminator/terminator.go
  (groupPodsByPriority);
- disruption: pkg/controllers/state/statenode.go (ValidateNodeDisruptable,
  ValidatePodsDisruptable), pkg/controllers/disruption/types.go
  (NewCandidate, OwnedByStaticNodePool, IsEmpty), emptiness.go,
  consolidation.go, drift.go, staticdrift.go (ShouldDisrupt), helpers.go
  (BuildDisruptionBudgetMapping), pkg/apis/v1/nodepool.go
  (GetAllowedDisruptionsByReason, Budget.GetAllowedDisruptions),
  pkg/controllers/nodeclaim/disruption/consolidation.go (the Consolidatable
  condition), pkg/controllers/nodeclaim/expiration/controller.go;
- provisioning: pkg/controllers/provisioning/provisioner.go (NewScheduler:
  static, not Ready and deleting NodePools are skipped, the rest ordered by
  weight), pkg/scheduling/taints.go (Taints.ToleratesPod on the template's
  taints, not its startupTaints), pkg/scheduling/requirements.go
  (Compatible, with the well-known labels allowed undefined),
  pkg/utils/nodepool (IsStatic), limits (pkg/apis/v1/nodepool.go
  Limits.ExceededBy against status.resources).
"""

import math
import re
from datetime import datetime, timezone

GROUP = "karpenter.sh"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
REGISTERED_LABEL = "karpenter.sh/registered"
INITIALIZED_LABEL = "karpenter.sh/initialized"
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
TERMINATION_FINALIZER = "karpenter.sh/termination"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
EXCLUDE_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"

DISRUPTED_TAINT = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
UNREGISTERED_TAINT = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}
KNOWN_EPHEMERAL_TAINTS = [
    {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    {"key": "node.cloudprovider.kubernetes.io/uninitialized", "effect": "NoSchedule", "value": "true"},
    UNREGISTERED_TAINT,
]
KNOWN_EPHEMERAL_PREFIXES = ["readiness.k8s.io/"]

WELL_KNOWN_LABELS = {NODEPOOL_LABEL, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE,
                     "node.kubernetes.io/windows-build"}

# the root condition of a NodeClaim (operatorpkg status.NewReadyConditions)
DEPENDENTS = ("Launched", "Registered", "Initialized")

ICE_MESSAGE = "all requested instance types were unavailable during launch"


# -- time

def parse_time(text):
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


_DUR = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def parse_duration(text):
    """Seconds of a Go duration string; None for "Never" or a missing value
    (NillableDuration, pkg/apis/v1/duration.go)."""
    if text is None or text == "Never":
        return None
    total, pos = 0.0, 0
    for m in _DUR.finditer(text):
        if m.start() != pos:
            raise ValueError(f"invalid duration {text!r}")
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ValueError(f"invalid duration {text!r}")
    return total


# -- taints and tolerations

def match_taint(a, b):
    """corev1.Taint.MatchTaint: same key and effect (the value is not compared)."""
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def merge_taints(taints, extra):
    """scheduling.Taints.Merge: `extra` taints that no taint matches are appended."""
    out = list(taints or [])
    for t in extra or []:
        if not any(match_taint(t, x) for x in out):
            out.append(dict(t))
    return out


def is_known_ephemeral(taint):
    return any(match_taint(k, taint) and (k.get("value") is None or k.get("value") == taint.get("value"))
               for k in KNOWN_EPHEMERAL_TAINTS) or any(
        (taint.get("key") or "").startswith(p) for p in KNOWN_EPHEMERAL_PREFIXES)


def tolerates(toleration, taint):
    """corev1.Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(pod, taints):
    """The first taint (NoSchedule or NoExecute; PreferNoSchedule never
    blocks) no toleration of the pod tolerates (Taints.ToleratesPod)."""
    tols = (pod.get("spec") or {}).get("tolerations") or []
    for t in taints or []:
        if t.get("effect") == "PreferNoSchedule":
            continue
        if not any(tolerates(tol, t) for tol in tols):
            return t
    return None


# -- requirements

def requirement_allows(req, value):
    """Whether a NodeSelectorRequirement (with Karpenter's Gte/Lte) admits a
    label value (None: the label is absent)."""
    op, values = req.get("operator"), req.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt", "Gte", "Lte"):
        try:
            v, bound = int(value), int(values[0])
        except (TypeError, ValueError, IndexError):
            return False
        return {"Gt": v > bound, "Lt": v < bound, "Gte": v >= bound, "Lte": v <= bound}[op]
    return False


def requirements_allow(reqs, labels):
    """Every requirement of a key the labels hold, or any requirement at
    all, admits the labels' value."""
    return all(requirement_allows(r, labels.get(r.get("key"))) for r in reqs or [])


# -- the cloud stand-in's offerings

def pick_offering(requirements, instance_types, prices, unavailable, zones):
    """The offering (instanceType, zone, capacityType, price) the AWS
    provider would launch for `requirements`: of every (type, zone, capacity
    type) the requirements admit (a type's own labels — instance type, arch,
    os, GPU count … — and the offering's zone and capacity type) that is
    priced and not unavailable, spot ones if any (getCapacityType: spot
    whenever the requirements allow it and it is offered), then the
    cheapest (the fleet's lowest-price strategy; price-capacity-optimized
    spot allocation is not modelled), then by name. None when none is left
    (InsufficientCapacityError)."""
    out = []
    for name, it in sorted(instance_types.items()):
        for zone in zones:
            for ct in ("on-demand", "spot"):
                price = (prices.get(name) or {}).get(ct)
                if price is None or (name, zone, ct) in unavailable:
                    continue
                labels = dict(it.get("labels") or {})
                labels.update({INSTANCE_TYPE: name, ZONE: zone, CAPACITY_TYPE: ct})
                if all(requirement_allows(r, labels.get(r.get("key"))) for r in requirements or []
                       if _offering_key(r.get("key") or "")):
                    out.append((price, name, zone, ct))
    if not out:
        return None
    # getCapacityType: spot when the requirements allow it and a spot
    # offering is left, else on-demand; then the lowest price
    if any(o[3] == "spot" for o in out):
        out = [o for o in out if o[3] == "spot"]
    price, name, zone, ct = min(out)
    return {"instanceType": name, "zone": zone, "capacityType": ct, "price": price}


def _offering_key(key):
    """Keys an offering answers for; other keys (a NodePool's own labels,
    karpenter.sh/nodepool) constrain the node's labels, not the instance."""
    return key in (INSTANCE_TYPE, ZONE, CAPACITY_TYPE, ARCH, OS) or key.startswith("karpenter.k8s.aws/")


# -- conditions

def condition(obj, ctype):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def is_true(obj, ctype):
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


def node_ready(node):
    return node is not None and is_true(node, "Ready")


# -- initialization

def initialization_blocker(node, nodeclaim):
    """(reason, message) why a registered NodeClaim is not Initialized yet,
    or None when it is (initialization.go, Reconcile)."""
    if node is None:
        return "NodeNotFound", "Node not registered with cluster"
    if not node_ready(node):
        return "NodeNotReady", "Node status is NotReady"
    taints = (node.get("spec") or {}).get("taints") or []
    for st in (nodeclaim.get("spec") or {}).get("startupTaints") or []:
        for t in taints:
            if match_taint(st, t):
                return "StartupTaintsExist", f'StartupTaint "{format_taint(t)}" still exists'
    for t in taints:
        if is_known_ephemeral(t):
            return "KnownEphemeralTaintsExist", f'KnownEphemeralTaint "{format_taint(t)}" still exists'
    alloc = (node.get("status") or {}).get("allocatable") or {}
    for name, qty in sorted(((((nodeclaim.get("spec") or {}).get("resources") or {}).get("requests")) or {}).items()):
        if _is_zero(qty):
            continue
        if _is_zero(alloc.get(name)):
            return "ResourceNotRegistered", f'Resource "{name}" was requested but not registered'
    return None


def _is_zero(q):
    if q is None:
        return True
    s = str(q).strip()
    m = re.match(r"^[+-]?(\d+(?:\.\d*)?|\.\d+)", s)
    return not m or float(m.group(0)) == 0


def format_taint(t):
    if not t.get("value"):
        return f"{t.get('key')}:{t.get('effect')}"
    return f"{t.get('key')}={t.get('value')}:{t.get('effect')}"


# -- pods

def _owned_by(pod, api_version, kind):
    return any(r.get("apiVersion") == api_version and r.get("kind") == kind
               for r in (pod.get("metadata") or {}).get("ownerReferences") or [])


def pod_terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_terminating(pod):
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def pod_active(pod):
    return not pod_terminal(pod) and not pod_terminating(pod)


def owned_by_daemonset(pod):
    return _owned_by(pod, "apps/v1", "DaemonSet")


def owned_by_node(pod):
    return _owned_by(pod, "v1", "Node")


def reschedulable(pod):
    return ((pod_active(pod) or (_owned_by(pod, "apps/v1", "StatefulSet") and pod_terminating(pod)))
            and not owned_by_daemonset(pod) and not owned_by_node(pod))


def tolerates_disrupted(pod):
    return untolerated(pod, [DISRUPTED_TAINT]) is None


def do_not_disrupt_active(pod, now):
    """IsDoNotDisruptActive: "true", or a duration not yet run out since the
    pod's start (no startTime: active); an invalid value is ignored."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(DO_NOT_DISRUPT)
    if value is None:
        return False
    if value == "true":
        return True
    try:
        d = parse_duration(value)
    except ValueError:
        return False
    if d is None:
        return False
    start = parse_time((pod.get("status") or {}).get("startTime"))
    if start is None:
        return True
    return now - start < d


def stuck_terminating(pod, now):
    ts = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    return ts is not None and now - ts > 60


def drainable(pod, now):
    return not tolerates_disrupted(pod) and not stuck_terminating(pod, now) and not owned_by_node(pod)


def waiting_eviction(pod, now):
    return not pod_terminal(pod) and drainable(pod, now)


def evictable(pod, now):
    return pod_active(pod) and not tolerates_disrupted(pod) and not owned_by_node(pod) \
        and not do_not_disrupt_active(pod, now)


def disruptable(pod, now):
    return not pod_active(pod) or not do_not_disrupt_active(pod, now)


def drain_groups(pods):
    """Terminator.groupPodsByPriority: non-critical non-DaemonSet pods first,
    then non-critical DaemonSet pods, critical non-DaemonSet, critical
    DaemonSet; a drain evicts only the first non-empty group."""
    groups = [[], [], [], []]
    for p in pods:
        critical = (p.get("spec") or {}).get("priorityClassName") in ("system-cluster-critical", "system-node-critical")
        groups[(2 if critical else 0) + (1 if owned_by_daemonset(p) else 0)].append(p)
    return groups


def needs_force_delete(pod, termination_time, now):
    """needsForceDelete (terminator/eviction.go)."""
    if termination_time is None:
        return False
    if pod_terminating(pod):
        ts = parse_time(pod["metadata"]["deletionTimestamp"])
        return ts is not None and ts > termination_time
    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if grace is None:
        return False
    return now > termination_time - grace


# -- disruption

def budget_nodes(budget, num_nodes):
    """Budget.GetAllowedDisruptions for an active budget: an integer, or a
    percentage of the NodePool's nodes rounded up."""
    nodes = str(budget.get("nodes", "10%"))
    if nodes.endswith("%"):
        return int(math.ceil(int(nodes[:-1]) * num_nodes / 100.0))
    return int(nodes)


def allowed_disruptions(nodepool, num_nodes, reason):
    """NodePool.GetAllowedDisruptionsByReason: the least of the budgets that
    apply to `reason` (no reasons: every reason). A budget with a schedule
    is taken as active (its cron window is not evaluated here)."""
    allowed = 2 ** 31 - 1
    budgets = ((nodepool.get("spec") or {}).get("disruption") or {}).get("budgets")
    if budgets is None:
        budgets = [{"nodes": "10%"}]
    for b in budgets:
        if not b.get("reasons") or reason in b["reasons"]:
            allowed = min(allowed, budget_nodes(b, num_nodes))
    return allowed


def is_static(nodepool):
    return (nodepool.get("spec") or {}).get("replicas") is not None


def pdb_blocks(pods, pdbs, now):
    """PDB limits (pkg/utils/pdb): an evictable pod covered by more than one
    budget, or by one that allows no disruption, blocks the node."""
    from job_rules import selector_matches
    for p in pods:
        if not evictable(p, now):
            continue
        ns = p["metadata"].get("namespace")
        labels = p["metadata"].get("labels") or {}
        matching = [b for b in pdbs if b["metadata"].get("namespace") == ns
                    and selector_matches((b.get("spec") or {}).get("selector"), labels)]
        if len(matching) > 1:
            return "eviction does not support multiple PDBs"
        if matching and ((matching[0].get("status") or {}).get("disruptionsAllowed") or 0) <= 0:
            return f"pdb prevents pod evictions (PodDisruptionBudget={ns}/{matching[0]['metadata']['name']})"
    return None


def candidate(nodeclaim, node, pods, nodepool, budget_left, pdbs=(), now=None):
    """For each disruption method of pkg/controllers/disruption —
    "Empty" (emptiness), "Underutilized" (consolidation), "Drifted" (drift;
    "StaticDrift" for static NodePools) — whether the controller could pick
    the NodeClaim now, with the reason when it cannot; and "Expired": whether
    the expiration controller deletes it now (it needs no NodePool and
    ignores budgets, do-not-disrupt and PDBs).

    `node`: its Node; `pods`: the pods bound to it; `nodepool`: the NodePool
    its karpenter.sh/nodepool label names (None if absent); `budget_left`:
    method -> disruptions the NodePool's budgets still allow
    (disruption_budget_mapping)."""
    import time as _time
    now = _time.time() if now is None else now
    out = {}
    meta = nodeclaim.get("metadata") or {}
    spec = nodeclaim.get("spec") or {}
    # expiration (nodeclaim/expiration/controller.go)
    expire = parse_duration(spec.get("expireAfter"))
    created = parse_time(meta.get("creationTimestamp"))
    if meta.get("deletionTimestamp"):
        out["Expired"] = (False, "nodeclaim is deleting")
    elif expire is None:
        out["Expired"] = (False, "expireAfter is Never")
    elif created is not None and now >= created + expire:
        out["Expired"] = (True, "expired")
    else:
        out["Expired"] = (False, "not expired yet")

    # ValidateNodeDisruptable, then NewCandidate
    blocked = None
    labels = meta.get("labels") or {}
    if node is None:
        blocked = "nodeclaim does not have an associated node"
    elif (node.get("metadata") or {}).get("labels", {}).get(INITIALIZED_LABEL) != "true":
        blocked = "node isn't initialized"
    elif meta.get("deletionTimestamp") or (node.get("metadata") or {}).get("deletionTimestamp") or any(
            match_taint(t, DISRUPTED_TAINT) for t in (node.get("spec") or {}).get("taints") or []):
        blocked = "node is deleting or marked for deletion"
    elif ((node.get("metadata") or {}).get("annotations") or {}).get(DO_NOT_DISRUPT) == "true":
        blocked = f'disruption is blocked through the "{DO_NOT_DISRUPT}" annotation'
    elif NODEPOOL_LABEL not in ((node.get("metadata") or {}).get("labels") or {}):
        blocked = f'node doesn\'t have required label (label={NODEPOOL_LABEL})'
    elif nodepool is None:
        blocked = f"nodepool not found (NodePool={labels.get(NODEPOOL_LABEL)})"
    else:
        for p in pods:
            if not disruptable(p, now):
                blocked = f'pod has "{DO_NOT_DISRUPT}" annotation (Pod={p["metadata"].get("namespace")}/{p["metadata"]["name"]})'
                break
        if blocked is None:
            blocked = pdb_blocks(pods, list(pdbs), now)
    methods = ("Empty", "Underutilized", "Drifted")
    if blocked:
        for m in methods:
            out[m] = (False, blocked)
        return out
    npspec = nodepool.get("spec") or {}
    disruption = npspec.get("disruption") or {}
    static = is_static(nodepool)
    consolidate_after = parse_duration(disruption.get("consolidateAfter", "0s"))
    empty = not any(reschedulable(p) for p in pods)
    consolidatable = is_true(nodeclaim, "Consolidatable")
    nlabels = (node.get("metadata") or {}).get("labels") or {}
    # emptiness.go
    if static:
        out["Empty"] = (False, "owned by a static NodePool")
    elif consolidate_after is None:
        out["Empty"] = (False, f'NodePool "{nodepool["metadata"]["name"]}" has consolidation disabled')
    elif not empty:
        out["Empty"] = (False, "node is not empty")
    elif not consolidatable:
        out["Empty"] = (False, "nodeclaim is not Consolidatable (consolidateAfter not elapsed)")
    else:
        out["Empty"] = (True, "empty")
    # consolidation.go
    if static:
        out["Underutilized"] = (False, "owned by a static NodePool")
    elif CAPACITY_TYPE not in nlabels:
        out["Underutilized"] = (False, f'Node does not have label "{CAPACITY_TYPE}"')
    elif ZONE not in nlabels:
        out["Underutilized"] = (False, f'Node does not have label "{ZONE}"')
    elif consolidate_after is None:
        out["Underutilized"] = (False, f'NodePool "{nodepool["metadata"]["name"]}" has consolidation disabled')
    elif empty:
        out["Underutilized"] = (False, "empty nodes are handled by emptiness")
    elif disruption.get("consolidationPolicy") == "WhenEmpty":
        out["Underutilized"] = (False, "consolidation policy WhenEmpty, but node is not empty")
    elif not consolidatable:
        out["Underutilized"] = (False, "nodeclaim is not Consolidatable")
    else:
        out["Underutilized"] = (True, "underutilized (a replacement or deletion is then simulated)")
    # drift.go / staticdrift.go
    if is_true(nodeclaim, "Drifted"):
        out["Drifted"] = (True, "static drift" if static else "drifted")
    else:
        out["Drifted"] = (False, "not drifted")
    # the budgets (helpers.go, BuildDisruptionBudgetMapping)
    for m in methods:
        if out[m][0] and budget_left.get(m, 0) <= 0:
            out[m] = (False, f'NodePool "{nodepool["metadata"]["name"]}" budget allows no {m} disruption now')
    return out


def disruption_budget_mapping(nodepool, members, reason):
    """BuildDisruptionBudgetMapping for one NodePool: `members` are its
    (nodeclaim, node) pairs; nodes counted are managed and initialized and
    not InstanceTerminating; those NotReady or marked for deletion use the
    budget up."""
    num, disrupting = 0, 0
    for nc, node in members:
        if node is None or ((node.get("metadata") or {}).get("labels") or {}).get(INITIALIZED_LABEL) != "true":
            continue
        if is_true(nc, "InstanceTerminating"):
            continue
        num += 1
        marked = (nc["metadata"].get("deletionTimestamp") or node["metadata"].get("deletionTimestamp")
                  or any(match_taint(t, DISRUPTED_TAINT) for t in (node.get("spec") or {}).get("taints") or []))
        if not node_ready(node) or marked:
            disrupting += 1
    return max(allowed_disruptions(nodepool, num, reason) - disrupting, 0)


# -- provisioning

def provisionable(pod):
    """IsProvisionable: marked Unschedulable by the kube-scheduler, not bound,
    not nominated, not owned by a DaemonSet or a Node."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    unschedulable = any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                        for c in status.get("conditions") or [])
    return (unschedulable and not spec.get("nodeName") and not status.get("nominatedNodeName")
            and not owned_by_daemonset(pod) and not owned_by_node(pod))


def pod_requirements(pod):
    """The pod's node requirements as Karpenter reads them: nodeSelector as
    In, the first required node-selector term's matchExpressions."""
    spec = pod.get("spec") or {}
    out = [{"key": k, "operator": "In", "values": [v]} for k, v in sorted((spec.get("nodeSelector") or {}).items())]
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    if terms:
        out += list(terms[0].get("matchExpressions") or [])
    return out


def nodepool_requirements(nodepool):
    """A NodePool template's requirements plus its labels (as In), plus the
    karpenter.sh/nodepool label every NodeClaim of it gets."""
    t = (nodepool.get("spec") or {}).get("template") or {}
    reqs = list(((t.get("spec") or {}).get("requirements")) or [])
    reqs += [{"key": k, "operator": "In", "values": [v]} for k, v in sorted(((t.get("metadata") or {}).get("labels") or {}).items())]
    reqs.append({"key": NODEPOOL_LABEL, "operator": "In", "values": [nodepool["metadata"]["name"]]})
    return reqs


def _allowed_values(reqs, key):
    """None: any value (or the key undefined); else the set of values."""
    vals = None
    for r in reqs:
        if r.get("key") != key:
            continue
        if r.get("operator") == "In":
            vals = set(r.get("values") or []) if vals is None else vals & set(r.get("values") or [])
    return vals


def incompatible(pod, nodepool):
    """Why scheduling.Requirements.Compatible refuses the pod for the
    NodePool's template, or None: a pod key the NodePool does not define is
    allowed only if well known or NotIn/DoesNotExist; a key both define must
    leave a value both admit."""
    npreqs = nodepool_requirements(nodepool)
    defined = {r.get("key") for r in npreqs}
    for r in pod_requirements(pod):
        key, op = r.get("key"), r.get("operator")
        if key not in defined:
            if key in WELL_KNOWN_LABELS or op in ("NotIn", "DoesNotExist"):
                continue
            return f'label "{key}" does not have known values'
        allowed = _allowed_values(npreqs, key)
        np_exists = any(x.get("key") == key and x.get("operator") in ("In", "Exists") for x in npreqs)
        if op == "In":
            vals = set(r.get("values") or [])
            if allowed is not None and not vals & allowed:
                return f"key {key}, {key} In {sorted(vals)} not in {key} In {sorted(allowed)}"
            if any(x.get("key") == key and x.get("operator") == "DoesNotExist" for x in npreqs):
                return f"key {key} does not exist on the NodePool"
            nots = set().union(*[set(x.get("values") or []) for x in npreqs
                                 if x.get("key") == key and x.get("operator") == "NotIn"] or [set()])
            if vals <= nots:
                return f"key {key}, {key} In {sorted(vals)} not in {key} NotIn {sorted(nots)}"
        elif op == "DoesNotExist" and np_exists:
            return f"key {key}, {key} DoesNotExist but the NodePool requires it"
        elif op == "NotIn" and allowed is not None and allowed <= set(r.get("values") or []):
            return f"key {key}, {key} NotIn {sorted(r.get('values') or [])} excludes every value"
    return None


def limits_exceeded(nodepool):
    """The scheduler's remaining resources (scheduler.go: the limits minus
    status.resources, instance types filtered by filterByRemainingResources):
    simplified to "a limited resource is used up" — usage at or above its
    limit refuses the pool (upstream still admits an instance type that has
    none of that resource)."""
    limits = (nodepool.get("spec") or {}).get("limits") or {}
    used = (nodepool.get("status") or {}).get("resources") or {}
    for k, lim in sorted(limits.items()):
        if k not in used:
            continue
        try:
            if _qty(used[k]) >= _qty(lim):
                return f"{k} resource usage of {used[k]} reaches the limit of {lim}"
        except ValueError:
            continue
    return None


def _qty(text):
    from crd_schema import parse_quantity
    v = parse_quantity(str(text))
    if v is None:
        raise ValueError(text)
    return v


def provisioner_considers(pod, nodepool):
    """(True, "") when Karpenter's provisioner would try to launch a
    NodeClaim of `nodepool` for the pending pod, else (False, why)."""
    if not provisionable(pod):
        return False, "pod is not provisionable (not marked Unschedulable, bound, nominated, or a DaemonSet's or a Node's)"
    if is_static(nodepool):
        return False, "static NodePool (spec.replicas): never used for pending pods"
    if (nodepool.get("metadata") or {}).get("deletionTimestamp"):
        return False, "NodePool is deleting"
    if not is_true(nodepool, "Ready"):
        return False, "NodePool is not Ready"
    t = ((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}
    taint = untolerated(pod, t.get("taints"))
    if taint is not None:
        return False, f"did not tolerate taint {format_taint(taint)}"
    why = incompatible(pod, nodepool)
    if why:
        return False, f"incompatible requirements, {why}"
    why = limits_exceeded(nodepool)
    if why:
        return False, f"all available instance types exceed limits for nodepool: {why}"
    return True, ""


def nodepools_for_pod(pod, nodepools):
    """The NodePools the provisioner would try for the pod, in its order
    (OrderByWeight: higher weight first, then by name)."""
    ok = [np for np in nodepools if provisioner_considers(pod, np)[0]]
    return sorted(ok, key=lambda np: (-((np.get("spec") or {}).get("weight") or 0), np["metadata"]["name"]))
