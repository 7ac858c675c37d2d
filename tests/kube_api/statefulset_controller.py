"""A stand-in for kube-controller-manager's StatefulSet controller (apps/v1).

Upstream (kubernetes/kubernetes):
- pkg/controller/statefulset/stateful_set_utils.go (newStatefulSetPod,
  newVersionedStatefulSetPod, updateIdentity, getPodName, getStartOrdinal,
  getEndOrdinal, podInOrdinalRange, isRunningAndReady, isCreated): a pod is
  made from spec.template with a controller ownerReference to the
  StatefulSet, named <set>-<ordinal> for the ordinals spec.ordinals.start
  (default 0) .. start+replicas-1, labelled
  statefulset.kubernetes.io/pod-name (its name), apps.kubernetes.io/pod-index
  (its ordinal) and controller-revision-hash (the revision of the template
  it was made from), with spec.hostname = its name and spec.subdomain =
  spec.serviceName.
- pkg/controller/statefulset/stateful_set_control.go (updateStatefulSet,
  processReplica, processCondemned, runForAll, computeReplicaStatus):
  podManagementPolicy OrderedReady (monotonic) creates ordinal i only once
  every lower ordinal is Running and Ready, waits for a terminating pod, and
  deletes the pods beyond the range one at a time from the highest ordinal,
  each only once the others are Running and Ready; Parallel creates and
  deletes them all at once. A pod with phase Failed or Succeeded is deleted
  and made again on a later sync once it is gone: a pod of a given name is
  never created while its predecessor still exists (fixed identity). With
  updateStrategy RollingUpdate a pod whose controller-revision-hash is not the
  current template's is deleted, the highest ordinal at or above the
  partition first, one at a time, each once the pods above it are Running
  and Ready; OnDelete leaves them. Status: replicas (pods created),
  readyReplicas and availableReplicas (Running and Ready; minReadySeconds is
  not modelled), currentReplicas and updatedReplicas (pods not terminating
  at currentRevision / updateRevision), observedGeneration,
  currentRevision, updateRevision, collisionCount.
- The garbage collector (pkg/controller/garbagecollector) deletes the pods
  once their StatefulSet is gone: this server's ownerReference cascade
  (apiserver.Store._remove) does it.

Pods are created through the mutating webhooks that match them
(workload_base.create_pod), as a real StatefulSet's are. Third-party pod
webhooks the server does not run but whose output a workload relies on
(LeaderWorkerSet's, lws_controller.default_pod) are applied to the pod
first, as if their configuration came first.
Not emulated: ControllerRevision objects (a revision is the hash of the
template; a pod re-made below the partition gets the current template),
PersistentVolumeClaims, minReadySeconds, maxUnavailable, the scale
subresource, updates of a live pod's identity.
"""

import copy
import json
import re

from workload_base import StandIn, deleting, pod_finished, pod_is_ready, pod_phase, short_hash

STS_KEY = ("apps", "statefulsets")
POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
REVISION = "controller-revision-hash"
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")


def parent_and_ordinal(name):
    """getParentNameAndOrdinal: (parent, ordinal), (None, -1) when the name
    carries no ordinal."""
    m = _ORDINAL.match(name or "")
    if not m:
        return None, -1
    return m.group(1), int(m.group(2))


def running_and_ready(pod):
    return pod_phase(pod) == "Running" and pod_is_ready(pod)


def revision_of(sts):
    spec = sts.get("spec") or {}
    return f"{sts['metadata']['name']}-{short_hash(json.dumps(spec.get('template') or {}, sort_keys=True))}"


class StatefulSets(StandIn):
    kind = "statefulset"

    def __init__(self, controllers):
        super().__init__(controllers)
        self.pod_defaulters = []  # emulated third-party pod webhooks: fn(ns, pod) -> None

    def sts_res(self):
        return self.store.find("apps", "v1", "statefulsets")

    def enqueue(self, key, obj):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == STS_KEY:
            return [(self.kind, ns, meta.get("name"))]
        if key == ("", "pods"):
            return [(self.kind, ns, ref.get("name")) for ref in meta.get("ownerReferences") or []
                    if ref.get("controller") and ref.get("kind") == "StatefulSet"]
        return []

    def sync(self, ns, name):
        r = self.sts_res()
        sts = self.get(r, ns, name)
        if sts is None:
            return
        spec = sts.get("spec") or {}
        replicas = spec.get("replicas", 1)
        start = (spec.get("ordinals") or {}).get("start", 0) or 0
        monotonic = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        update_rev = revision_of(sts)
        status = sts.get("status") or {}
        current_rev = status.get("currentRevision") or update_rev
        pods_r = self.pods()
        pods = {}
        for p in self.owned(pods_r, ns, sts["metadata"]["uid"]):
            parent, ordinal = parent_and_ordinal(p["metadata"]["name"])
            if parent == name and ordinal >= 0:
                pods[ordinal] = p
        if not deleting(sts):
            self.manage(sts, pods, replicas, start, monotonic, update_rev)
            pods = {o: p for o, p in ((o, self.get(pods_r, ns, f"{name}-{o}")) for o in
                                      set(pods) | set(range(start, start + replicas)))
                    if p is not None and any(ref.get("uid") == sts["metadata"]["uid"]
                                             for ref in p["metadata"].get("ownerReferences") or [])}
        self.update_status(r, sts, list(pods.values()), replicas, current_rev, update_rev)

    def manage(self, sts, pods, replicas, start, monotonic, update_rev):
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        pods_r = self.pods()
        wanted = range(start, start + replicas)
        condemned = sorted((o for o in pods if o not in wanted), reverse=True)
        unhealthy = [o for o in list(wanted) + sorted(condemned)
                     if o in pods and (not running_and_ready(pods[o]) or deleting(pods[o]))]
        first_unhealthy = unhealthy[0] if unhealthy else None
        # processReplica, in ordinal order
        for o in wanted:
            pod = pods.get(o)
            if pod is not None and pod_finished(pod):
                if not deleting(pod):
                    self.delete(pods_r, ns, pod["metadata"]["name"])
                if monotonic:
                    return
                continue
            if pod is None:
                self.create_stateful_pod(sts, o, update_rev)
                if monotonic:
                    return
                continue
            if monotonic and (deleting(pod) or not running_and_ready(pod)):
                return
        # processCondemned, from the highest ordinal
        for o in condemned:
            pod = pods[o]
            if deleting(pod):
                if monotonic:
                    return
                continue
            if monotonic and not running_and_ready(pod) and o != first_unhealthy:
                return
            self.delete(pods_r, ns, pod["metadata"]["name"])
            if monotonic:
                return
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if strategy.get("type", "RollingUpdate") != "RollingUpdate":
            return
        partition = (strategy.get("rollingUpdate") or {}).get("partition", 0) or 0
        for o in sorted(wanted, reverse=True):
            if o - start < partition:
                break
            pod = pods.get(o)
            if pod is None:
                return
            if (pod["metadata"].get("labels") or {}).get(REVISION) != update_rev and not deleting(pod):
                self.delete(pods_r, ns, pod["metadata"]["name"])
                return
            if deleting(pod) or not running_and_ready(pod):
                return

    def create_stateful_pod(self, sts, ordinal, revision):
        """newVersionedStatefulSetPod: the template, the identity, the
        revision label, the controller reference."""
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        spec = sts.get("spec") or {}
        pod_name = f"{name}-{ordinal}"
        template = copy.deepcopy(spec.get("template") or {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_NAME: pod_name, POD_INDEX: str(ordinal),
                           REVISION: revision}
        pspec = template.setdefault("spec", {})
        pspec["hostname"] = pod_name
        if spec.get("serviceName"):
            pspec["subdomain"] = spec["serviceName"]
        body = {"metadata": {"name": pod_name, "namespace": ns, **copy.deepcopy(tmeta)}, "spec": pspec}
        for fn in self.pod_defaulters:
            fn(ns, body)
        tmeta = {k: v for k, v in body["metadata"].items() if k in ("labels", "annotations")}
        ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": sts["metadata"]["uid"],
               "controller": True, "blockOwnerDeletion": True}
        return self.create_pod(ns, {"metadata": tmeta, "spec": body["spec"]}, name=pod_name, owner_refs=[ref])

    def update_status(self, r, sts, pods, replicas, current_rev, update_rev):
        created = [p for p in pods if pod_phase(p)]
        live = [p for p in created if not deleting(p)]

        def at(rev):
            return sum(1 for p in live if (p["metadata"].get("labels") or {}).get(REVISION) == rev)
        ready = sum(1 for p in pods if running_and_ready(p))
        updated = at(update_rev)
        strategy = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type", "RollingUpdate")
        if strategy == "RollingUpdate" and updated == len(created) == ready:
            current_rev = update_rev  # completeRollingUpdate
        status = copy.deepcopy(sts.get("status") or {})
        status.update({"observedGeneration": sts["metadata"].get("generation", 1), "replicas": len(created),
                       "readyReplicas": ready, "availableReplicas": ready, "currentReplicas": at(current_rev),
                       "updatedReplicas": updated, "currentRevision": current_rev, "updateRevision": update_rev,
                       "collisionCount": status.get("collisionCount", 0)})
        self.write_status(r, sts, status)
