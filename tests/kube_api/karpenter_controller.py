"""A stand-in for Karpenter v1 (karpenter.sh/v1) with its AWS provider, run by
the API test server beside the other stand-ins: what Karpenter's
controllers do to NodeClaims and Nodes, with a small in-process cloud in
place of EC2. It is active only once both the NodeClaim CRD
(karpenter.sh) and the EC2NodeClass CRD (karpenter.k8s.aws) are
installed — the AWS provider is what makes a NodeClaim "managed" — so a
test that installs only a NodeClaim CRD (tests/support/karpenter.rs) and
writes NodeClaims and Nodes itself is left alone. The rules themselves are
in karpenter_rules.py; README.md, section "Karpenter (karpenter.sh/v1)",
lists each with its upstream file.

Upstream: kubernetes-sigs/karpenter at v1.14.0-20-g2264681 (commit
2266468104f36373ed002241afaee2d3bbc26078), aws/karpenter-provider-aws at
v1.14.0-68-g1d92708 (commit 1d927085dd81a9df9301e613f371dac5b4d16bfe),
awslabs/operatorpkg (status/condition_set.go: the conditions):

- pkg/utils/nodeclaim/nodeclaim.go (IsManaged): only a NodeClaim whose
  nodeClassRef group/kind is the provider's (karpenter.k8s.aws
  EC2NodeClass) is reconciled, by every controller below;
- pkg/controllers/nodeclaim/hydration/controller.go: label
  karpenter.k8s.aws/ec2nodeclass = nodeClassRef.name;
- pkg/controllers/nodeclaim/lifecycle/controller.go (Reconcile): the
  karpenter.sh/termination finalizer first, then launch, registration,
  initialization and liveness; Launched, Registered, Initialized start
  Unknown (AwaitingReconciliation) and make the root Ready;
- launch.go with the AWS provider's pkg/cloudprovider/cloudprovider.go
  (Create, instanceToNodeClaim) and pkg/providers/instance/instance.go: a
  missing EC2NodeClass is an InsufficientCapacityError, a NodeClass Ready
  False a NodeClassNotReady error, Ready Unknown (or an observedGeneration
  behind) a CreateError (Launched Unknown, NodeClassReadinessUnknown); an
  InsufficientCapacityError (no offering left) and NodeClassNotReady delete
  the NodeClaim with a Warning Event (InsufficientCapacityError) and no
  Launched=False; a launch fills providerID aws:///ZONE/i-…, imageID,
  capacity, allocatable, the instance type's single-valued labels, zone,
  capacity type, karpenter.k8s.aws/instance-tenancy, and the annotations
  karpenter.k8s.aws/ec2nodeclass-hash(-version) and
  karpenter.k8s.aws/instance-profile-name; user labels win;
- the node joining: pkg/providers/amifamily/resolver.go (the kubelet's
  register-with-taints: spec.taints, spec.startupTaints and
  karpenter.sh/unregistered:NoExecute unless present);
- registration.go: the Node of the NodeClaim's providerID; finalizer
  karpenter.sh/termination, owner reference (karpenter.sh/v1 NodeClaim,
  blockOwnerDeletion), NodeClaim taints and startup taints merged
  (unless karpenter.sh/do-not-sync-taints=true), NodeClaim labels and
  annotations copied, the unregistered taint removed, label
  karpenter.sh/registered=true; Registered True and status.nodeName;
  Unknown NodeNotFound while no Node, False MultipleNodesFound for two;
- initialization.go: Initialized only once the Node is Ready, no startup
  taint nor known ephemeral taint is left and every requested resource is
  in allocatable; label karpenter.sh/initialized=true;
- liveness.go: not Launched 5 minutes after Launched's last transition,
  or not Registered 15 minutes after Registered's: the NodeClaim is
  deleted (both durations settable);
- finalize (controller.go): a registered NodeClaim's Nodes are deleted and
  waited for; then the instance is terminated (InstanceTerminating True)
  and, once the cloud no longer knows it, the finalizer goes; with
  spec.terminationGracePeriod the annotation
  karpenter.sh/nodeclaim-termination-timestamp = deletion + grace;
- pkg/controllers/node/termination/controller.go and terminator/: a
  deleting Node with the finalizer (and the ec2nodeclass label) deletes its
  NodeClaim; a Node that is not Ready and whose instance is gone loses the
  finalizer at once; otherwise it is tainted karpenter.sh/disrupted:NoSchedule
  (label node.kubernetes.io/exclude-from-external-load-balancers), drained
  (Drained Unknown "Draining"; pods waiting eviction — not terminal, not
  tolerating the disrupted taint, not stuck terminating, not mirror pods —
  evicted through the eviction subresource, so PDBs apply, one priority
  group at a time; do-not-disrupt pods are not evicted but hold the
  drain; past the termination timestamp pods are deleted with their grace
  clamped), Drained True no sooner than 5 s after Draining (settable),
  VolumesDetached True, the instance terminated (InstanceTerminating),
  then the finalizer removed;
- pkg/controllers/nodeclaim/garbagecollection/controller.go: a Registered
  NodeClaim whose instance the cloud no longer lists is deleted unless its
  Node is Ready (every 2 minutes upstream; settable here);
- pkg/controllers/nodeclaim/expiration/controller.go: creation +
  spec.expireAfter passed: deleted (no NodePool, budget or do-not-disrupt
  needed or honoured);
- pkg/controllers/nodeclaim/disruption/consolidation.go: a NodePool-owned,
  Initialized NodeClaim becomes Consolidatable consolidateAfter after its
  last pod event (status.lastPodEventTime, kept by
  pkg/controllers/nodeclaim/podevents) or its initialization; Never
  clears it;
- pkg/controllers/disruption (emptiness): an empty, Consolidatable
  candidate (karpenter_rules.candidate) of a NodePool whose budget allows
  "Empty" is tainted karpenter.sh/disrupted:NoSchedule and its NodeClaim
  deleted (the validation pause, multi-node and underutilized
  consolidation with replacements, drift replacement are not run);
- the AWS provider's pkg/controllers/interruption (handleMessage,
  actionForMessage, markUnavailableOfferings): a spot interruption (and
  a scheduled change, a stop, a termination: CordonAndDrain) deletes the
  NodeClaim of the instance; a spot interruption also marks its spot
  offering unavailable; an instance-status failure annotates the
  termination timestamp (now) before deleting (ForcefulTermination);
- pkg/controllers/nodepool/readiness and counter: a NodePool's
  ValidationSucceeded, NodeClassReady and Ready conditions, and
  status.resources / status.nodes summed over its NodeClaims;
- the AWS EC2NodeClass controller (pkg/controllers/nodeclass): status
  subnets (one per zone), securityGroups, amis, instanceProfile and
  Ready=True with observedGeneration, when a NodeClass has no status yet.

Test hooks, a test convention of this server (not a Kubernetes API):
HTTP requests to /karpenter-test/... (handled by admin()); see README.md.
"""

import copy
import itertools
import sys
import threading
import time
from datetime import datetime, timezone

import karpenter_rules as kr
from apierrors import ApiError
from controllers import now_rfc3339
from workload_base import StandIn, deleting

AWS = "karpenter.k8s.aws"
NODECLASS_LABEL = AWS + "/ec2nodeclass"
KIND = "karpenter"
PREFIX = "/karpenter-test/"


def _gib(n):
    return f"{n}Gi"


def _itype(cpu, mem_gib, gpus, family, gpu_name, pods):
    cap = {"cpu": str(cpu), "memory": _gib(mem_gib), "pods": str(pods), "ephemeral-storage": "20Gi"}
    alloc = {"cpu": f"{cpu * 1000 - 80 - 10 * min(cpu, 8)}m", "memory": f"{mem_gib * 1024 - 800}Mi",
             "pods": str(pods), "ephemeral-storage": "17Gi"}
    labels = {kr.ARCH: "amd64", kr.OS: "linux", AWS + "/instance-family": family,
              AWS + "/instance-cpu": str(cpu), AWS + "/instance-memory": str(mem_gib * 1024)}
    if gpus:
        cap["nvidia.com/gpu"] = alloc["nvidia.com/gpu"] = str(gpus)
        labels.update({AWS + "/instance-gpu-count": str(gpus), AWS + "/instance-gpu-manufacturer": "nvidia",
                       AWS + "/instance-gpu-name": gpu_name})
    return {"capacity": cap, "allocatable": alloc, "labels": labels}


# a small instance-type table (capacities as EC2 describes them; allocatable
# with a fixed reserve instead of the provider's overhead formula)
INSTANCE_TYPES = {
    "m5.large": _itype(2, 8, 0, "m5", "", 29),
    "g5.xlarge": _itype(4, 16, 1, "g5", "a10g", 58),
    "g5.12xlarge": _itype(48, 192, 4, "g5", "a10g", 234),
    "p4d.24xlarge": _itype(96, 1152, 8, "p4d", "a100", 737),
    "p5.48xlarge": _itype(192, 2048, 8, "p5", "h100", 100),
}
# on-demand and spot prices per hour (us-east-1 on-demand list prices; spot
# a fixed fraction); settable through the hooks
PRICES = {
    "m5.large": {"on-demand": 0.096, "spot": 0.035},
    "g5.xlarge": {"on-demand": 1.006, "spot": 0.402},
    "g5.12xlarge": {"on-demand": 5.672, "spot": 2.269},
    "p4d.24xlarge": {"on-demand": 32.773, "spot": 13.109},
    "p5.48xlarge": {"on-demand": 98.32, "spot": 39.328},
}
REGION = "us-east-1"
ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
ZONE_IDS = {"us-east-1a": "use1-az1", "us-east-1b": "use1-az2", "us-east-1c": "use1-az4"}

DEFAULTS = {
    "joinDelaySeconds": 0.0,          # launch -> the Node registers
    "devicePluginDelaySeconds": 0.0,  # the Node registers -> extended resources in allocatable
    "registrationTTLSeconds": 900.0,  # liveness.go registrationTimeout
    "launchTimeoutSeconds": 300.0,    # liveness.go LaunchTimeout
    "minDrainSeconds": 5.0,           # termination controller MinDrainTime
    "gcPeriodSeconds": 120.0,         # garbagecollection requeue
    "disruptionPeriodSeconds": 10.0,  # disruption controller poll period
    "instanceShutdownSeconds": 0.0,   # terminate -> the instance is gone
}


class Cloud:
    """The EC2 stand-in: instances, offerings, prices."""

    def __init__(self):
        self.instance_types = copy.deepcopy(INSTANCE_TYPES)
        self.prices = copy.deepcopy(PRICES)
        self.unavailable = set()  # (instanceType, zone, capacityType)
        self.instances = {}  # id -> instance
        self.ids = itertools.count(1)
        self.never_join = set()  # NodeClaim names whose node never registers

    def create(self, nodeclaim):
        reqs = (nodeclaim.get("spec") or {}).get("requirements") or []
        offer = kr.pick_offering(reqs, self.instance_types, self.prices, self.unavailable, ZONES)
        if offer is None:
            return None
        n = next(self.ids)
        iid = f"i-{n:017x}"
        inst = {"id": iid, "instanceType": offer["instanceType"], "zone": offer["zone"],
                "capacityType": offer["capacityType"], "price": offer["price"], "state": "running",
                "imageID": "ami-0123456789abcdef0", "launchTime": time.time(),
                "nodeClaim": nodeclaim["metadata"]["name"], "privateIP": f"10.0.{n // 256}.{n % 256}",
                "nodePool": ((nodeclaim["metadata"].get("labels") or {}).get(kr.NODEPOOL_LABEL)),
                "joined": False, "shutdownAt": None}
        self.instances[iid] = inst
        return inst

    def get(self, iid):
        inst = self.instances.get(iid)
        if inst is None or inst["state"] == "terminated":
            return None
        return inst

    def advance(self, settings):
        now = time.time()
        for inst in self.instances.values():
            if inst["state"] == "shutting-down" and now >= inst["shutdownAt"]:
                inst["state"] = "terminated"

    def delete(self, iid, settings):
        """CloudProvider.Delete: "terminating" while the instance exists
        (and starts its shutdown), "notfound" once it is gone."""
        self.advance(settings)
        inst = self.get(iid)
        if inst is None:
            return "notfound"
        if inst["state"] == "running":
            inst["state"] = "shutting-down"
            inst["shutdownAt"] = time.time() + settings["instanceShutdownSeconds"]
        self.advance(settings)
        return "terminating"

    def listed(self):
        """CloudProvider.List, without the instances being shut down (the
        garbage collector drops those too)."""
        return [i for i in self.instances.values() if i["state"] == "running"]


def _format_quantity(name, v):
    """A summed quantity as a Kubernetes quantity string."""
    if v == int(v):
        v = int(v)
        if name in ("memory", "ephemeral-storage") and v and v % (1024 ** 3) == 0:
            return f"{v // 1024 ** 3}Gi"
        if name in ("memory", "ephemeral-storage") and v and v % (1024 ** 2) == 0:
            return f"{v // 1024 ** 2}Mi"
        return str(v)
    return f"{int(v * 1000)}m"


def instance_id(provider_id):
    return (provider_id or "").rsplit("/", 1)[-1]


def _cond(conds, ctype):
    return next((c for c in conds if c.get("type") == ctype), None)


def set_condition(obj, conds, ctype, status, reason, message="", deps=kr.DEPENDENTS):
    """operatorpkg ConditionSet.Set for a NodeClaim (root Ready over
    Launched, Registered, Initialized): lastTransitionTime moves only with
    the status; a dependent seen first "transitioned" at creation."""
    gen = (obj.get("metadata") or {}).get("generation", 1)
    old = _cond(conds, ctype)
    new = {"type": ctype, "status": status, "reason": reason, "message": message, "observedGeneration": gen}
    if old is not None:
        new["lastTransitionTime"] = old.get("lastTransitionTime") or now_rfc3339() \
            if old.get("status") == status else now_rfc3339()
        if old == new:
            return
        conds[conds.index(old)] = new
    else:
        new["lastTransitionTime"] = (obj["metadata"].get("creationTimestamp") or now_rfc3339()) \
            if ctype in deps else now_rfc3339()
        conds.append(new)
    if ctype != "Ready" and ctype in deps:
        _recompute_root(obj, conds, gen, deps)


def _recompute_root(obj, conds, gen, deps):
    bad = [c for c in conds if c.get("type") in deps and (c.get("status") != "True" or c.get("observedGeneration") != gen)]
    if not bad:
        set_condition(obj, conds, "Ready", "True", "Ready", "", deps)
        return
    bad.sort(key=lambda c: c.get("lastTransitionTime") or "", reverse=True)
    status = "False" if any(c.get("status") == "False" for c in bad) else "Unknown"
    set_condition(obj, conds, "Ready", status, "ReconcilingDependents" if status == "Unknown" else "UnhealthyDependents",
                  ", ".join(f"{c.get('type')}={c.get('status')}" for c in bad), deps)


def clear_condition(conds, ctype):
    c = _cond(conds, ctype)
    if c is not None:
        conds.remove(c)


def _since(ts_text):
    t = kr.parse_time(ts_text)
    return None if t is None else time.time() - t


class Karpenter(StandIn):
    """All of Karpenter's controllers over one queue: items are
    (KIND, "", "nodeclaim/NAME" | "node/NAME" | "nodeclass/NAME" | "nodepool/NAME")."""

    kind = KIND

    def __init__(self, controllers):
        super().__init__(controllers)
        self.cloud = Cloud()
        self.settings = dict(DEFAULTS)
        self.last_gc = 0.0
        self.last_disruption = 0.0
        self.events = []  # (involved kind, name, type, reason, message), as recorded
        self.pod_nodes = {}  # pod uid -> (node name, gone) last seen (pod events)
        self.pod_events = {}  # node name -> time of its last pod event
        threading.Thread(target=self._tick_loop, daemon=True).start()

    # -- resources

    def nodeclaims_res(self):
        return self.res(kr.GROUP, "v1", "nodeclaims")

    def nodepools_res(self):
        return self.res(kr.GROUP, "v1", "nodepools")

    def nodeclasses_res(self):
        return self.res(AWS, "v1", "ec2nodeclasses")

    def nodes_res(self):
        return self.store.find("", "v1", "nodes")

    def active(self):
        return self.nodeclaims_res() is not None and self.nodeclasses_res() is not None

    def all(self, r):
        if r is None:
            return []
        return [o for _, o in sorted(self.store.objects[r.storage_key].items())]

    def managed(self, nc):
        ref = (nc.get("spec") or {}).get("nodeClassRef") or {}
        return ref.get("group") == AWS and ref.get("kind") == "EC2NodeClass"

    def nodes_for(self, nc):
        pid = (nc.get("status") or {}).get("providerID")
        if not pid:
            return []
        return [n for n in self.all(self.nodes_res()) if (n.get("spec") or {}).get("providerID") == pid]

    def nodeclaims_for_node(self, node):
        pid = (node.get("spec") or {}).get("providerID")
        if not pid:
            return []
        return [nc for nc in self.all(self.nodeclaims_res()) if (nc.get("status") or {}).get("providerID") == pid]

    def pods_on(self, node_name):
        return [p for p in self.all(self.pods()) if (p.get("spec") or {}).get("nodeName") == node_name]

    def record(self, kind, name, etype, reason, message):
        self.events.append((kind, name, etype, reason, message))
        del self.events[:-1000]
        try:
            self.store.create(self.store.find("", "v1", "events"), "default", {
                "metadata": {"generateName": name.replace("/", "-")[:40] + "."},
                "involvedObject": {"apiVersion": "karpenter.sh/v1" if kind == "NodeClaim" else "v1",
                                   "kind": kind, "name": name},
                "type": etype, "reason": reason, "message": message,
                "source": {"component": "karpenter"}, "firstTimestamp": now_rfc3339(),
                "lastTimestamp": now_rfc3339(), "count": 1})
        except ApiError:
            pass

    # -- queue

    def enqueue(self, key, obj):
        if not self.active():
            return []
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if key == (kr.GROUP, "nodeclaims"):
            out = [(KIND, "", "nodeclaim/" + name)]
            pool = (meta.get("labels") or {}).get(kr.NODEPOOL_LABEL)
            if pool:
                out.append((KIND, "", "nodepool/" + pool))
            return out
        if key == ("", "nodes"):
            out = [(KIND, "", "node/" + name)]
            out += [(KIND, "", "nodeclaim/" + nc["metadata"]["name"]) for nc in self.nodeclaims_for_node(obj)]
            return out
        if key == (AWS, "ec2nodeclasses"):
            return [(KIND, "", "nodeclass/" + name)] + [
                (KIND, "", "nodepool/" + np_["metadata"]["name"]) for np_ in self.all(self.nodepools_res())
                if ((((np_.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}).get("name") == name] + [
                (KIND, "", "nodeclaim/" + nc["metadata"]["name"]) for nc in self.all(self.nodeclaims_res())
                if ((nc.get("spec") or {}).get("nodeClassRef") or {}).get("name") == name]
        if key == (kr.GROUP, "nodepools"):
            return [(KIND, "", "nodepool/" + name)] + [(KIND, "", "nodeclaim/" + nc["metadata"]["name"]) for nc in self.all(self.nodeclaims_res())
                    if (nc["metadata"].get("labels") or {}).get(kr.NODEPOOL_LABEL) == name]
        if key == ("", "pods"):
            return self._pod_event(obj)
        return []

    def _pod_event(self, pod):
        """podevents: the NodeClaim of the node a pod is bound to gets
        status.lastPodEventTime when the pod is bound, goes terminal, starts
        terminating or is removed (written by its next sync)."""
        uid = pod["metadata"].get("uid")
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return []
        gone = kr.pod_terminal(pod) or kr.pod_terminating(pod) or \
            (pod["metadata"].get("namespace"), pod["metadata"].get("name")) not in self.store.objects[("", "pods")]
        if self.pod_nodes.get(uid) == (node, gone):
            return []
        self.pod_nodes[uid] = (node, gone)
        if gone and not self.store.objects[("", "pods")].get((pod["metadata"].get("namespace"), pod["metadata"].get("name"))):
            self.pod_nodes.pop(uid, None)
        self.pod_events[node] = now_rfc3339()
        return [(KIND, "", "nodeclaim/" + nc["metadata"]["name"]) for nc in self.all(self.nodeclaims_res())
                if (nc.get("status") or {}).get("nodeName") == node]

    def sync(self, ns, item):
        if not self.active():
            return
        what, _, name = item.partition("/")
        try:
            if what == "nodeclaim":
                self.sync_nodeclaim(name)
            elif what == "node":
                self.sync_node(name)
            elif what == "nodeclass":
                self.sync_nodeclass(name)
            elif what == "nodepool":
                self.sync_nodepool(name)
        except ApiError:
            raise
        except Exception as e:  # a stand-in's fault is never the request's
            sys.stderr.write(f"apiserver: karpenter stand-in, {item}: {e!r}\n")

    # -- the periodic part (requeues, timeouts, the kubelet, GC, disruption)

    def _tick_loop(self):
        while True:
            time.sleep(0.1)
            try:
                with self.store.cond:
                    if not self.active():
                        continue
                    self.tick()
            except Exception as e:  # never let the loop die
                sys.stderr.write(f"apiserver: karpenter stand-in: {e!r}\n")

    def tick(self):
        now = time.time()
        self.cloud.advance(self.settings)
        self.kubelets(now)
        items = [(KIND, "", "nodeclaim/" + nc["metadata"]["name"]) for nc in self.all(self.nodeclaims_res())]
        items += [(KIND, "", "node/" + n["metadata"]["name"]) for n in self.all(self.nodes_res()) if deleting(n)]
        items += [(KIND, "", "nodepool/" + p["metadata"]["name"]) for p in self.all(self.nodepools_res())]
        self.c.queue.extend(items)
        self.c._drain()
        if now - self.last_gc >= self.settings["gcPeriodSeconds"]:
            self.last_gc = now
            self.garbage_collect()
        if now - self.last_disruption >= self.settings["disruptionPeriodSeconds"]:
            self.last_disruption = now
            self.disrupt_empty()

    # -- EC2NodeClass status (the provider's nodeclass controller)

    def sync_nodeclass(self, name):
        r = self.nodeclasses_res()
        nc = self.get(r, "", name)
        if nc is None or deleting(nc) or (nc.get("status") or {}).get("conditions"):
            return
        spec = nc.get("spec") or {}
        gen = nc["metadata"].get("generation", 1)
        status = {
            "subnets": [{"id": f"subnet-{i:017x}", "zone": z, "zoneID": ZONE_IDS[z]} for i, z in enumerate(ZONES, 1)],
            "securityGroups": [{"id": "sg-0123456789abcdef0", "name": "cluster"}],
            "amis": [{"id": "ami-0123456789abcdef0", "name": "eks-node-al2023",
                      "requirements": [{"key": kr.ARCH, "operator": "In", "values": ["amd64"]}]}],
            "instanceProfile": spec.get("instanceProfile") or f"cluster_{name}",
            "conditions": [{"type": t, "status": "True", "reason": t, "message": "", "observedGeneration": gen,
                            "lastTransitionTime": now_rfc3339()}
                           for t in ("AMIsReady", "SubnetsReady", "SecurityGroupsReady", "InstanceProfileReady",
                                     "ValidationSucceeded", "Ready")],
        }
        self.write_status(r, nc, status)

    # -- NodePool status (readiness and counter controllers)

    def sync_nodepool(self, name):
        """pkg/controllers/nodepool/readiness (NodeClassReady from the
        NodeClass's Ready; ValidationSucceeded True; root Ready over both)
        and nodepool/counter (status.resources: cpu, memory, pods,
        ephemeral-storage, nodes from 0 plus the capacity of each NodeClaim
        of the pool — its Node's once initialized —, status.nodes)."""
        r = self.nodepools_res()
        pool = self.get(r, "", name)
        if pool is None:
            return
        ref = (((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {}
        if ref.get("group") != AWS or ref.get("kind") != "EC2NodeClass":
            return
        work = copy.deepcopy(pool)
        status = work.setdefault("status", {})
        conds = status.setdefault("conditions", [])
        deps = ("ValidationSucceeded", "NodeClassReady")
        for t in ("Ready",) + deps:
            if _cond(conds, t) is None:
                set_condition(work, conds, t, "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation", deps)
        set_condition(work, conds, "ValidationSucceeded", "True", "ValidationSucceeded", "", deps)
        ncls = self.get(self.nodeclasses_res(), "", ref.get("name"))
        if ncls is None:
            set_condition(work, conds, "NodeClassReady", "False", "NodeClassNotFound", "NodeClass not found on cluster", deps)
        elif deleting(ncls):
            set_condition(work, conds, "NodeClassReady", "False", "NodeClassTerminating", "NodeClass is Terminating", deps)
        else:
            ready = kr.condition(ncls, "Ready") or {}
            if ready.get("status") == "True":
                set_condition(work, conds, "NodeClassReady", "True", "NodeClassReady", "", deps)
            elif ready.get("status") == "False":
                set_condition(work, conds, "NodeClassReady", "False", ready.get("reason") or "NodeClassNotReady",
                              ready.get("message") or "", deps)
            else:
                set_condition(work, conds, "NodeClassReady", "False", "NodeClassReadinessUnknown",
                              "Node Class Readiness Unknown", deps)
        from crd_schema import parse_quantity
        total = {k: 0 for k in ("cpu", "memory", "pods", "ephemeral-storage", "nodes")}
        for nc in self.all(self.nodeclaims_res()):
            if (nc["metadata"].get("labels") or {}).get(kr.NODEPOOL_LABEL) != name or not self.managed(nc):
                continue
            nodes = self.nodes_for(nc)
            node = nodes[0] if len(nodes) == 1 else None
            cap = dict((nc.get("status") or {}).get("capacity") or {})
            if node is not None:
                ncap = dict((node.get("status") or {}).get("capacity") or {})
                if (node["metadata"].get("labels") or {}).get(kr.INITIALIZED_LABEL) == "true":
                    cap = ncap
                else:
                    cap = {**ncap, **{k: v for k, v in cap.items() if kr._is_zero(ncap.get(k))}}
            for k, v in cap.items():
                q = parse_quantity(str(v))
                if q is not None:
                    total[k] = total.get(k, 0) + q
            total["nodes"] += 1
        status["resources"] = {k: _format_quantity(k, v) for k, v in sorted(total.items())}
        status["nodes"] = int(total["nodes"])
        if work["status"] != (pool.get("status") or {}):
            self.write_status(r, pool, work["status"])

    # -- NodeClaim lifecycle

    def _status(self, nc, status):
        return self.write_status(self.nodeclaims_res(), nc, status)

    def _delete_nodeclaim(self, nc, why=""):
        if deleting(nc):
            return
        self.delete(self.nodeclaims_res(), "", nc["metadata"]["name"])

    def sync_nodeclaim(self, name):
        r = self.nodeclaims_res()
        nc = self.get(r, "", name)
        if nc is None or not self.managed(nc):
            return
        if deleting(nc):
            return self.finalize_nodeclaim(nc)
        meta = nc["metadata"]
        # the finalizer (lifecycle) and the nodeclass label (hydration)
        new = copy.deepcopy(nc)
        fins = new["metadata"].setdefault("finalizers", [])
        if kr.TERMINATION_FINALIZER not in fins:
            fins.append(kr.TERMINATION_FINALIZER)
        new["metadata"].setdefault("labels", {})[NODECLASS_LABEL] = nc["spec"]["nodeClassRef"]["name"]
        if new["metadata"] != meta:
            nc = self.write(r, new)
            meta = nc["metadata"]
        spec = nc.get("spec") or {}
        # expiration
        expire = kr.parse_duration(spec.get("expireAfter"))
        if expire is not None and (_since(meta.get("creationTimestamp")) or 0) >= expire:
            self.record("NodeClaim", meta["name"], "Normal", "Expired", "Deleting expired NodeClaim")
            return self._delete_nodeclaim(nc)
        work = copy.deepcopy(nc)
        status = work.setdefault("status", {})
        conds = status.setdefault("conditions", [])
        for t in ("Ready",) + kr.DEPENDENTS:
            if _cond(conds, t) is None:
                set_condition(work, conds, t, "Unknown", "AwaitingReconciliation", "object is awaiting reconciliation")
        # launch
        if _cond(conds, "Launched").get("status") == "Unknown":
            if not self.launch(work, conds):
                return
        # registration
        node = None
        if _cond(conds, "Registered").get("status") == "Unknown":
            nodes = self.nodes_for(work)
            if not nodes:
                set_condition(work, conds, "Registered", "Unknown", "NodeNotFound", "Node not registered with cluster")
            elif len(nodes) > 1:
                set_condition(work, conds, "Registered", "False", "MultipleNodesFound", "Invariant violated, matched multiple nodes")
            else:
                node = self.register(work, nodes[0])
                set_condition(work, conds, "Registered", "True", "Registered")
                status["nodeName"] = node["metadata"]["name"]
        # initialization
        if _cond(conds, "Initialized").get("status") == "Unknown" and _cond(conds, "Registered").get("status") == "True":
            nodes = self.nodes_for(work)
            node = nodes[0] if len(nodes) == 1 else None
            blocker = kr.initialization_blocker(node, work)
            if blocker:
                set_condition(work, conds, "Initialized", "Unknown", *blocker)
            else:
                labels = node["metadata"].get("labels") or {}
                if labels.get(kr.INITIALIZED_LABEL) != "true":
                    n2 = copy.deepcopy(node)
                    n2["metadata"].setdefault("labels", {})[kr.INITIALIZED_LABEL] = "true"
                    self.write(self.nodes_res(), n2)
                set_condition(work, conds, "Initialized", "True", "Initialized")
        # liveness
        if _cond(conds, "Registered").get("status") != "True":
            launched = _cond(conds, "Launched")
            if launched.get("status") != "True":
                if (_since(launched.get("lastTransitionTime")) or 0) >= self.settings["launchTimeoutSeconds"]:
                    return self._delete_nodeclaim(nc)
            elif (_since(_cond(conds, "Registered").get("lastTransitionTime")) or 0) >= self.settings["registrationTTLSeconds"]:
                self.record("NodeClaim", meta["name"], "Normal", "RegistrationTimeout",
                            "terminating due to timeout (registration_timeout)")
                return self._delete_nodeclaim(nc)
        # pod events, then the disruption conditions
        at = self.pod_events.get(status.get("nodeName"))
        if at and at != status.get("lastPodEventTime"):
            status["lastPodEventTime"] = at
        self.consolidatable(work, conds)
        # writes: metadata (labels, annotations) then status
        if work["metadata"] != nc["metadata"]:
            nc = self.write(r, work)
        self._status(nc, work["status"])

    def launch(self, work, conds):
        """launch.go with the AWS provider's Create; False when the NodeClaim
        was deleted."""
        name = work["metadata"]["name"]
        ref = work["spec"]["nodeClassRef"]
        ncls = self.get(self.nodeclasses_res(), "", ref["name"])
        if ncls is None or deleting(ncls):
            msg = f'creating instance, resolving nodeclass, ec2nodeclasses.karpenter.k8s.aws "{ref["name"]}" not found'
            self.record("NodeClaim", name, "Warning", "FailedToResolveNodeClass",
                        "Failed to resolve NodeClass")
            self.record("NodeClaim", name, "Warning", "InsufficientCapacityError", f"NodeClaim {name} event: {msg}")
            self._delete_nodeclaim(work)
            return False
        ready = kr.condition(ncls, "Ready")
        if ready is not None and ready.get("status") == "False":
            self.record("NodeClaim", name, "Warning", "NodeClassNotReady", f"NodeClaim {name} event: {ready.get('message', '')}")
            self._delete_nodeclaim(work)
            return False
        if ready is None or ready.get("status") != "True":
            set_condition(work, conds, "Launched", "Unknown", "NodeClassReadinessUnknown", "NodeClass is in Ready=Unknown")
            return True
        if ready.get("observedGeneration") != ncls["metadata"].get("generation", 1):
            self.record("NodeClaim", name, "Warning", "NodeClassNotReady",
                        f"NodeClaim {name} event: nodeclass status has not been reconciled against the latest spec")
            self._delete_nodeclaim(work)
            return False
        inst = self.cloud.create(work)
        if inst is None:
            self.record("NodeClaim", name, "Warning", "InsufficientCapacityError",
                        f"NodeClaim {name} event: creating instance, insufficient capacity, {kr.ICE_MESSAGE}")
            self._delete_nodeclaim(work)
            return False
        it = self.cloud.instance_types[inst["instanceType"]]
        labels = {k: v for k, v in it["labels"].items()}
        labels.update({kr.INSTANCE_TYPE: inst["instanceType"], kr.ZONE: inst["zone"],
                       AWS + "/zone-id": ZONE_IDS[inst["zone"]], kr.CAPACITY_TYPE: inst["capacityType"],
                       AWS + "/instance-tenancy": "default", kr.REGION: REGION})
        meta = work["metadata"]
        meta["labels"] = {**labels, **(meta.get("labels") or {})}
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               AWS + "/ec2nodeclass-hash": "0", AWS + "/ec2nodeclass-hash-version": "v4",
                               AWS + "/instance-profile-name": (ncls.get("status") or {}).get("instanceProfile", "")}
        st = work["status"]
        st["providerID"] = f"aws:///{inst['zone']}/{inst['id']}"
        st["imageID"] = inst["imageID"]
        st["capacity"] = dict(it["capacity"])
        st["allocatable"] = dict(it["allocatable"])
        set_condition(work, conds, "Launched", "True", "Launched")
        return True

    def register(self, nc, node):
        """registration.go (syncNode, then the unregistered taint and the
        registered label); returns the written Node."""
        if kr.REGISTERED_LABEL not in (node["metadata"].get("labels") or {}) and not any(
                kr.match_taint(t, kr.UNREGISTERED_TAINT) for t in (node.get("spec") or {}).get("taints") or []):
            self.record("NodeClaim", nc["metadata"]["name"], "Warning", "UnregisteredTaintMissing",
                        f"Missing {kr.UNREGISTERED_TAINT['key']} taint which prevents registration related race "
                        "conditions on Karpenter-managed nodes")
        new = copy.deepcopy(node)
        m = new["metadata"]
        fins = m.setdefault("finalizers", [])
        if kr.TERMINATION_FINALIZER not in fins:
            fins.append(kr.TERMINATION_FINALIZER)
        refs = m.setdefault("ownerReferences", [])
        if not any(r.get("apiVersion") == "karpenter.sh/v1" and r.get("kind") == "NodeClaim"
                   and r.get("uid") == nc["metadata"]["uid"] for r in refs):
            refs.append({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": nc["metadata"]["name"],
                         "uid": nc["metadata"]["uid"], "blockOwnerDeletion": True})
        labels = m.setdefault("labels", {})
        spec = new.setdefault("spec", {})
        if labels.get(kr.DO_NOT_SYNC_TAINTS) != "true":
            spec["taints"] = kr.merge_taints(spec.get("taints"), (nc.get("spec") or {}).get("taints"))
            spec["taints"] = kr.merge_taints(spec["taints"], (nc.get("spec") or {}).get("startupTaints"))
        m["annotations"] = {**(m.get("annotations") or {}), **(nc["metadata"].get("annotations") or {})}
        if not m["annotations"]:
            m.pop("annotations")
        labels.update(nc["metadata"].get("labels") or {})
        spec["taints"] = [t for t in spec.get("taints") or [] if not kr.match_taint(t, kr.UNREGISTERED_TAINT)]
        if not spec["taints"]:
            spec.pop("taints")
        labels[kr.REGISTERED_LABEL] = "true"
        if new != node:
            return self.write(self.nodes_res(), new)
        return node

    def consolidatable(self, work, conds):
        """nodeclaim/disruption/consolidation.go, for NodePool-owned claims."""
        pool_name = (work["metadata"].get("labels") or {}).get(kr.NODEPOOL_LABEL)
        if pool_name is None:
            return
        pool = self.get(self.nodepools_res(), "", pool_name)
        if pool is None:
            return
        after = kr.parse_duration((((pool.get("spec") or {}).get("disruption") or {}).get("consolidateAfter", "0s")))
        init = _cond(conds, "Initialized")
        if after is None or init is None or init.get("status") != "True":
            clear_condition(conds, "Consolidatable")
            return
        since = work["status"].get("lastPodEventTime") or init.get("lastTransitionTime")
        if (_since(since) or 0) < after:
            clear_condition(conds, "Consolidatable")
            return
        c = _cond(conds, "Consolidatable")
        if c is None or c.get("status") != "True":
            clear_condition(conds, "Consolidatable")
            conds.append({"type": "Consolidatable", "status": "True", "reason": "Consolidatable", "message": "",
                          "observedGeneration": work["metadata"].get("generation", 1),
                          "lastTransitionTime": now_rfc3339()})

    def finalize_nodeclaim(self, nc):
        """lifecycle/controller.go finalize."""
        r = self.nodeclaims_res()
        meta = nc["metadata"]
        if kr.TERMINATION_FINALIZER not in (meta.get("finalizers") or []):
            return
        tgp = kr.parse_duration((nc.get("spec") or {}).get("terminationGracePeriod"))
        if tgp is not None and kr.TERMINATION_TIMESTAMP not in (meta.get("annotations") or {}):
            new = copy.deepcopy(nc)
            t = kr.parse_time(meta["deletionTimestamp"]) + tgp
            new["metadata"].setdefault("annotations", {})[kr.TERMINATION_TIMESTAMP] = \
                datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            nc = self.write(r, new)
            meta = nc["metadata"]
        if kr.is_true(nc, "Registered"):
            nodes = self.nodes_for(nc)
            for n in nodes:
                if not deleting(n):
                    self.delete(self.nodes_res(), "", n["metadata"]["name"])
            if nodes:
                return
        pid = (nc.get("status") or {}).get("providerID")
        if pid:
            res = self.cloud.delete(instance_id(pid), self.settings)
            status = copy.deepcopy(nc.get("status") or {})
            conds = status.setdefault("conditions", [])
            set_condition(nc, conds, "InstanceTerminating", "True", "InstanceTerminating")
            nc = self._status(nc, status)
            if res != "notfound":
                return
        new = copy.deepcopy(nc)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or []
                                         if f != kr.TERMINATION_FINALIZER]
        self.write(r, new)

    # -- the kubelet of each instance

    def kubelets(self, now):
        for inst in list(self.cloud.instances.values()):
            if inst["state"] != "running":
                continue
            if not inst["joined"]:
                if inst["nodeClaim"] in self.cloud.never_join:
                    continue
                if now < inst["launchTime"] + self.settings["joinDelaySeconds"]:
                    continue
                nc = self.get(self.nodeclaims_res(), "", inst["nodeClaim"])
                if nc is None or (nc.get("status") or {}).get("providerID", "").rsplit("/", 1)[-1] != inst["id"]:
                    continue
                self.join(inst, nc, now)
            elif not inst.get("devicesUp") and now >= inst["joinedAt"] + self.settings["devicePluginDelaySeconds"]:
                self.device_plugins(inst)

    def node_name(self, inst):
        return "ip-" + inst["privateIP"].replace(".", "-") + ".ec2.internal"

    def join(self, inst, nc, now):
        """The kubelet registers the Node (bootstrap: the NodeClaim's labels
        as node labels, register-with-taints as the AMI family resolver sets
        them) and reports it Ready."""
        spec = nc.get("spec") or {}
        taints = [dict(t) for t in (spec.get("taints") or []) + (spec.get("startupTaints") or [])]
        if not any(kr.match_taint(t, kr.UNREGISTERED_TAINT) for t in taints):
            taints.append(dict(kr.UNREGISTERED_TAINT))
        name = self.node_name(inst)
        it = self.cloud.instance_types[inst["instanceType"]]
        labels = {k: v for k, v in (nc["metadata"].get("labels") or {}).items()
                  if k not in (kr.REGISTERED_LABEL, kr.INITIALIZED_LABEL)}
        labels.update({kr.HOSTNAME: name, kr.ARCH: it["labels"][kr.ARCH], kr.OS: "linux",
                       kr.INSTANCE_TYPE: inst["instanceType"], kr.ZONE: inst["zone"], kr.REGION: REGION})
        devices = self.settings["devicePluginDelaySeconds"] <= 0
        cap, alloc = dict(it["capacity"]), dict(it["allocatable"])
        if not devices:
            for res in [k for k in cap if "/" in k]:
                cap[res] = alloc[res] = "0"
        body = {"metadata": {"name": name, "labels": labels},
                "spec": {"providerID": f"aws:///{inst['zone']}/{inst['id']}", "taints": taints},
                "status": {"capacity": cap, "allocatable": alloc,
                           "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                           "message": "kubelet is posting ready status",
                                           "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}],
                           "addresses": [{"type": "InternalIP", "address": inst["privateIP"]},
                                         {"type": "Hostname", "address": name}],
                           "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                        "kubeletVersion": "v1.33.0"}}}
        inst["joined"] = True
        inst["joinedAt"] = now
        inst["devicesUp"] = devices
        inst["node"] = name
        try:
            self.store.create(self.nodes_res(), None, body)
        except ApiError as e:
            sys.stderr.write(f"apiserver: karpenter stand-in, node {name}: {e.message}\n")

    def device_plugins(self, inst):
        inst["devicesUp"] = True
        node = self.get(self.nodes_res(), "", inst.get("node"))
        if node is None:
            return
        it = self.cloud.instance_types[inst["instanceType"]]
        status = copy.deepcopy(node.get("status") or {})
        for res in [k for k in it["capacity"] if "/" in k]:
            status.setdefault("capacity", {})[res] = it["capacity"][res]
            status.setdefault("allocatable", {})[res] = it["allocatable"][res]
        self.write_status(self.nodes_res(), node, status)

    # -- Node termination

    def sync_node(self, name):
        nodes = self.nodes_res()
        node = self.get(nodes, "", name)
        if node is None or not deleting(node):
            return
        if kr.TERMINATION_FINALIZER not in (node["metadata"].get("finalizers") or []):
            return
        if NODECLASS_LABEL not in (node["metadata"].get("labels") or {}):
            return  # nodeutils.IsManaged
        claims = self.nodeclaims_for_node(node)
        nc = claims[0] if len(claims) == 1 else None
        if nc is not None and not deleting(nc):
            self.delete(self.nodeclaims_res(), "", nc["metadata"]["name"])
            nc = self.get(self.nodeclaims_res(), "", nc["metadata"]["name"])
        pid = (node.get("spec") or {}).get("providerID")
        if not kr.node_ready(node):
            self.cloud.advance(self.settings)
            if self.cloud.get(instance_id(pid)) is None:
                return self.remove_node_finalizer(node)
        tt = None
        if nc is not None:
            tt = kr.parse_time((nc["metadata"].get("annotations") or {}).get(kr.TERMINATION_TIMESTAMP))
        node = self.taint_disrupted(node)
        status = copy.deepcopy((nc or {}).get("status") or {})
        conds = status.setdefault("conditions", [])
        done = self.await_drain(node, nc, conds, tt) and self.await_instance(nc, conds)
        if nc is not None:
            self._status(nc, status)
        if done:
            self.remove_node_finalizer(self.get(nodes, "", name))

    def taint_disrupted(self, node):
        new = copy.deepcopy(node)
        spec = new.setdefault("spec", {})
        taints = spec.get("taints") or []
        if not any(kr.match_taint(t, kr.DISRUPTED_TAINT) for t in taints):
            spec["taints"] = [t for t in taints if t.get("key") != kr.DISRUPTED_TAINT["key"]] + [dict(kr.DISRUPTED_TAINT)]
        new["metadata"].setdefault("labels", {})[kr.EXCLUDE_BALANCERS] = "karpenter"
        if new != node:
            return self.write(self.nodes_res(), new)
        return node

    def await_drain(self, node, nc, conds, tt):
        if nc is not None and _cond(conds, "Drained") is None:
            set_condition(nc, conds, "Drained", "Unknown", "Draining", "Draining")
        if self.drain(node, tt):
            return False
        if nc is not None:
            c = _cond(conds, "Drained")
            if c.get("status") == "Unknown" and (_since(c.get("lastTransitionTime")) or 0) < self.settings["minDrainSeconds"]:
                return False
            set_condition(nc, conds, "Drained", "True", "Drained")
            set_condition(nc, conds, "VolumesDetached", "True", "VolumesDetached")
        return True

    def await_instance(self, nc, conds):
        if nc is None:
            return True
        pid = (nc.get("status") or {}).get("providerID")
        res = self.cloud.delete(instance_id(pid), self.settings) if pid else "notfound"
        set_condition(nc, conds, "InstanceTerminating", "True", "InstanceTerminating")
        return res == "notfound"

    def drain(self, node, tt):
        """Terminator.Drain and the eviction queue; True while pods are
        waiting to be evicted."""
        now = time.time()
        pods_r = self.pods()
        waiting = [p for p in self.pods_on(node["metadata"]["name"]) if kr.waiting_eviction(p, now)]
        force = [p for p in waiting if kr.needs_force_delete(p, tt, now)]
        graceful = [p for p in waiting if p not in force]
        for p in force:
            grace = max(int(tt - now), 1)
            try:
                self.store.delete(pods_r, p["metadata"]["namespace"], p["metadata"]["name"],
                                  {"gracePeriodSeconds": grace, "preconditions": {"uid": p["metadata"]["uid"]}})
            except ApiError:
                pass
        for group in kr.drain_groups(graceful):
            if group:
                for p in group:
                    if not kr.evictable(p, now):
                        continue  # terminating, or do-not-disrupt: waited for, not evicted
                    try:
                        self.store.evict(p["metadata"]["namespace"], p["metadata"]["name"], {})
                    except ApiError:
                        pass  # 429: a PDB holds it; retried on the next pass
                return True
        return bool(force)

    def remove_node_finalizer(self, node):
        if node is None:
            return
        new = copy.deepcopy(node)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or []
                                         if f != kr.TERMINATION_FINALIZER]
        self.write(self.nodes_res(), new)

    # -- garbage collection

    def garbage_collect(self):
        self.cloud.advance(self.settings)
        listed = {f"aws:///{i['zone']}/{i['id']}" for i in self.cloud.listed()}
        for nc in self.all(self.nodeclaims_res()):
            if not self.managed(nc) or deleting(nc) or not kr.is_true(nc, "Registered"):
                continue
            if (nc.get("status") or {}).get("providerID") in listed:
                continue
            nodes = self.nodes_for(nc)
            if len(nodes) == 1 and kr.node_ready(nodes[0]):
                continue
            self.record("NodeClaim", nc["metadata"]["name"], "Normal", "GarbageCollected",
                        "garbage collecting nodeclaim with no cloudprovider representation")
            self._delete_nodeclaim(nc)

    # -- disruption (emptiness only acts)

    def members(self):
        """NodePool name -> [(nodeclaim, node)] of managed NodeClaims."""
        out = {}
        for nc in self.all(self.nodeclaims_res()):
            if not self.managed(nc):
                continue
            pool = (nc["metadata"].get("labels") or {}).get(kr.NODEPOOL_LABEL)
            nodes = self.nodes_for(nc)
            out.setdefault(pool, []).append((nc, nodes[0] if len(nodes) == 1 else None))
        return out

    def candidates(self):
        """karpenter_rules.candidate for every managed NodeClaim."""
        now = time.time()
        pdbs = self.all(self.store.find("policy", "v1", "poddisruptionbudgets"))
        members = self.members()
        out = {}
        for pool_name, pairs in members.items():
            pool = self.get(self.nodepools_res(), "", pool_name) if pool_name else None
            budget = {m: (kr.disruption_budget_mapping(pool, pairs, m) if pool else 0)
                      for m in ("Empty", "Underutilized", "Drifted")}
            for nc, node in pairs:
                pods = self.pods_on(node["metadata"]["name"]) if node else []
                out[nc["metadata"]["name"]] = {
                    m: {"candidate": ok, "reason": why}
                    for m, (ok, why) in kr.candidate(nc, node, pods, pool, budget, pdbs, now).items()}
        return out

    def disrupt_empty(self):
        now = time.time()
        pdbs = self.all(self.store.find("policy", "v1", "poddisruptionbudgets"))
        for pool_name, pairs in sorted(self.members().items(), key=lambda kv: kv[0] or ""):
            pool = self.get(self.nodepools_res(), "", pool_name) if pool_name else None
            if pool is None:
                continue
            left = kr.disruption_budget_mapping(pool, pairs, "Empty")
            for nc, node in pairs:
                if left <= 0:
                    break
                pods = self.pods_on(node["metadata"]["name"]) if node else []
                ok, _ = kr.candidate(nc, node, pods, pool, {"Empty": left}, pdbs, now)["Empty"]
                if not ok:
                    continue
                self.taint_disrupted(node)
                self.record("NodeClaim", nc["metadata"]["name"], "Normal", "DisruptionTerminating",
                            "Disrupting NodeClaim: Empty")
                self._delete_nodeclaim(nc)
                left -= 1

    # -- interruption (the AWS provider)

    def interrupt(self, iid, kind):
        actions = {"SpotInterruption": "CordonAndDrain", "ScheduledChange": "CordonAndDrain",
                   "InstanceStopped": "CordonAndDrain", "InstanceTerminated": "CordonAndDrain",
                   "CapacityReservationInterruption": "CordonAndDrain",
                   "InstanceStatus": "ForcefulTermination", "SystemStatus": "ForcefulTermination",
                   "RebalanceRecommendation": "NoAction"}
        if kind not in actions:
            raise ApiError(400, "BadRequest", f"unknown interruption kind {kind!r}")
        found = []
        for nc in self.all(self.nodeclaims_res()):
            if instance_id((nc.get("status") or {}).get("providerID")) != iid:
                continue
            found.append(nc["metadata"]["name"])
            labels = nc["metadata"].get("labels") or {}
            if kind == "SpotInterruption" and labels.get(kr.ZONE) and labels.get(kr.INSTANCE_TYPE):
                self.cloud.unavailable.add((labels[kr.INSTANCE_TYPE], labels[kr.ZONE], "spot"))
            reasons = {"SpotInterruption": "SpotInterrupted", "RebalanceRecommendation": "RebalanceRecommendation",
                       "InstanceStopped": "InstanceStopping", "InstanceTerminated": "InstanceTerminating"}
            self.record("NodeClaim", nc["metadata"]["name"], "Warning", reasons.get(kind, "InstanceUnhealthy"),
                        f"{kind} for instance {iid}")
            if actions[kind] == "ForcefulTermination" and not deleting(nc) and \
                    kr.TERMINATION_TIMESTAMP not in (nc["metadata"].get("annotations") or {}):
                new = copy.deepcopy(nc)
                new["metadata"].setdefault("annotations", {})[kr.TERMINATION_TIMESTAMP] = now_rfc3339()
                nc = self.write(self.nodeclaims_res(), new)
            if actions[kind] != "NoAction":
                self._delete_nodeclaim(nc)
        return found


# -- test hooks

def _instance_view(inst):
    return {k: inst[k] for k in ("id", "instanceType", "zone", "capacityType", "price", "state", "nodeClaim",
                                 "nodePool", "imageID")} | {"providerID": f"aws:///{inst['zone']}/{inst['id']}",
                                                           "node": inst.get("node")}


def admin(store, method, path, body):
    """The test hooks (a test convention of this server, not a Kubernetes
    API). Returns (code, JSON body)."""
    k = store.controllers.workloads.get(KIND)
    what = path[len(PREFIX):].strip("/")
    body = body or {}
    with store.cond:
        if what == "instances" and method == "GET":
            k.cloud.advance(k.settings)
            return 200, {"items": [_instance_view(i) for i in k.cloud.instances.values()]}
        if what == "offerings" and method == "POST":
            key = (body.get("instanceType"), body.get("zone"), body.get("capacityType"))
            if not all(key):
                raise ApiError(400, "BadRequest", "instanceType, zone and capacityType are required")
            if body.get("available", False):
                k.cloud.unavailable.discard(key)
            else:
                k.cloud.unavailable.add(key)
            return 200, {"unavailable": sorted(list(x) for x in k.cloud.unavailable)}
        if what == "prices":
            if method == "PUT":
                k.cloud.prices = copy.deepcopy(body.get("prices") or {})
            return 200, {"prices": k.cloud.prices}
        if what == "settings":
            if method == "PUT":
                unknown = set(body) - set(DEFAULTS)
                if unknown:
                    raise ApiError(400, "BadRequest", f"unknown settings {sorted(unknown)}")
                k.settings.update({x: float(v) for x, v in body.items()})
            return 200, {"settings": k.settings}
        if what == "never-join" and method == "POST":
            k.cloud.never_join.add(body.get("nodeClaim"))
            return 200, {"neverJoin": sorted(k.cloud.never_join)}
        if what == "interruption" and method == "POST":
            iid = body.get("instanceID")
            if not iid and body.get("nodeClaim"):
                nc = k.get(k.nodeclaims_res(), "", body["nodeClaim"])
                iid = instance_id(((nc or {}).get("status") or {}).get("providerID"))
            found = k.interrupt(iid, body.get("kind", "SpotInterruption"))
            return 200, {"nodeClaims": found}
        if what == "terminate-instance" and method == "POST":
            inst = k.cloud.get(body.get("instanceID", ""))
            if inst is None:
                raise ApiError(404, "NotFound", f"instance {body.get('instanceID')!r} not found")
            inst["state"] = "terminated"
            node = k.get(k.nodes_res(), "", inst.get("node"))
            if node is not None:  # the kubelet is gone: the node lifecycle controller marks it Unknown
                status = copy.deepcopy(node.get("status") or {})
                for c in status.get("conditions") or []:
                    if c.get("type") == "Ready":
                        c.update({"status": "Unknown", "reason": "NodeStatusUnknown",
                                  "message": "Kubelet stopped posting node status.",
                                  "lastTransitionTime": now_rfc3339()})
                k.write_status(k.nodes_res(), node, status)
            return 200, _instance_view(inst)
        if what == "candidates" and method == "GET":
            return 200, {"nodeClaims": k.candidates()}
        if what == "events" and method == "GET":
            return 200, {"items": [{"kind": e[0], "name": e[1], "type": e[2], "reason": e[3], "message": e[4]}
                                   for e in k.events]}
        if what == "sync" and method == "POST":
            k.last_gc = k.last_disruption = 0.0
            if k.active():
                k.tick()
            return 200, {}
    raise ApiError(404, "NotFound", f"no test hook {method} {path}")
