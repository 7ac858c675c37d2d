"""A stand-in for the LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1),
from kubernetes-sigs/lws, built on StatefulSets as upstream is (the
StatefulSet stand-in, statefulset_controller.py, makes the pods):

- pkg/controllers/leaderworkerset_controller.go (Reconcile,
  constructLeaderStatefulSetApplyConfiguration): the leader StatefulSet is
  named after the LeaderWorkerSet and owned by it (controller reference),
  replicas = spec.replicas, podManagementPolicy Parallel, serviceName the
  LeaderWorkerSet's name, selector {name, worker-index: "0"}, the template
  leaderTemplate (workerTemplate when unset) labelled
  leaderworkerset.sigs.k8s.io/{name, worker-index: "0",
  template-revision-hash} and annotated leaderworkerset.sigs.k8s.io/size (and
  exclusive-topology when the LeaderWorkerSet has it); the StatefulSet is
  labelled {name, template-revision-hash} and annotated
  leaderworkerset.sigs.k8s.io/replicas. So the leaders are <lws>-<group>, and
  scaling down deletes the highest groups.
- pkg/controllers/pod_controller.go (Reconcile,
  constructWorkerStatefulSetApplyConfiguration, handleRestartPolicy,
  workerPodBelongsToLeader, pendingPodsInGroup, setNodeSelectorForWorkerPods):
  for each leader pod not being deleted, when size > 1, a worker StatefulSet
  named after the leader pod and owned by it (controller reference), replicas
  size-1, ordinals starting at 1 (so workers are <lws>-<group>-<worker>,
  worker 1..size-1), Parallel, selector {group-index, name, group-key}, the
  workerTemplate labelled {group-index, name, group-key,
  template-revision-hash} (the leader's) and annotated {size, leader-name,
  exclusive-topology}. It is created at once with startupPolicy
  LeaderCreated, once the leader is Ready with LeaderReady; with the
  exclusive-topology annotation only once the leader is scheduled
  (spec.nodeName), the workers then pinned by a nodeSelector to the leader's
  node's value of that topology label. It is created once, never updated.
  Restart policy RecreateGroupOnPodRestart (the default here, as the CRD
  defaults it) and RecreateGroupAfterStart: a pod of the group that is being
  deleted (deletionTimestamp) or whose container restarted (restartCount > 0
  while Running or Pending) gets its group's leader pod deleted — the
  worker StatefulSet and its pods go with it (garbage collection), and the
  leader StatefulSet makes the leader again. A worker counts only while its
  leader has its revision and it belongs to the leader's current worker
  StatefulSet. RecreateGroupAfterStart skips this while the group has fewer
  than size pods or a Pending one. Default and None: the StatefulSets
  replace the lost pod alone. A pod removed without ever being seen
  terminating (an unbound or finished pod, deleted at once) is replaced by
  its StatefulSet alone, as upstream, whose reconcile finds it gone.
- pkg/webhooks/pod_webhook.go (Default, SetExclusiveAffinities,
  genGroupUniqueKey): LeaderWorkerSet's own pod webhook labels a leader
  group-index (its ordinal) and group-key (sha1 of "<namespace>/<pod
  name>"), a worker worker-index (its ordinal), and with exclusive-topology
  gives the leader the pod affinity / anti-affinity on group-key over that
  topology. It is emulated by default_pod, which the StatefulSet stand-in
  applies to a pod before the registered webhooks (as if its configuration
  came first); its LWS_* environment variables are not.
- status: replicas (groups that exist), readyReplicas (groups whose every
  pod is Ready), updatedReplicas, hpaPodSelector, and the Available and
  Progressing conditions.
A LeaderWorkerSet has no suspend: Kueue (pkg/controller/jobs/leaderworkerset)
holds each group as a pod group through the pods' scheduling gates, added by
its pod webhook; muster gates the templates and each pod. The pods are created
through the mutating webhooks that match them (workload_base.create_pod).
Simplified: a template change deletes every leader pod with an older
revision at once (upstream rolls them through the leader StatefulSet's
partition with maxUnavailable / maxSurge); the worker template is the
current one, not the leader's revision's; the leader pod is deleted in the
background, not with Foreground propagation. Not emulated: headless
Services, subgroups, ControllerRevisions, volume claim templates.
"""

import copy
import hashlib
import json
import sys

from statefulset_controller import parent_and_ordinal
from workload_base import StandIn, controller_ref, deleting, meta_condition, pod_is_ready, pod_phase, short_hash

LWS = "leaderworkerset.x-k8s.io"
P = "leaderworkerset.sigs.k8s.io/"
EXCLUSIVE = P + "exclusive-topology"
RECREATE = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")


def group_key(ns, pod_name):
    """genGroupUniqueKey: sha1 of "<namespace>/<pod name>", hex."""
    return hashlib.sha1(f"{ns}/{pod_name}".encode()).hexdigest()


def default_pod(ns, pod):
    """The defaulting of LeaderWorkerSet's pod webhook (pod_webhook.go,
    Default) on a pod being created."""
    meta = pod.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    if P + "name" not in labels:
        return
    name = meta.get("name", "")
    _, ordinal = parent_and_ordinal(name)
    if ordinal < 0:
        return  # upstream refuses the pod
    if labels.get(P + "worker-index") == "0":
        labels.setdefault(P + "group-index", str(ordinal))
        key = labels.setdefault(P + "group-key", group_key(ns, name))
        topology = (meta.get("annotations") or {}).get(EXCLUSIVE)
        if topology:
            exclusive_affinities(pod, key, topology)
    else:
        labels[P + "worker-index"] = str(ordinal)


def exclusive_affinities(pod, key, topology):
    """SetExclusiveAffinities: pods of this group together on one topology
    domain, and no other group's there."""
    aff = pod.setdefault("spec", {}).setdefault("affinity", {})
    pa = aff.setdefault("podAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
    anti = aff.setdefault("podAntiAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
    if any(t.get("topologyKey") == topology for t in pa) and any(t.get("topologyKey") == topology for t in anti):
        return
    pa.append({"labelSelector": {"matchExpressions": [
        {"key": P + "group-key", "operator": "In", "values": [key]}]}, "topologyKey": topology})
    anti.append({"labelSelector": {"matchExpressions": [
        {"key": P + "group-key", "operator": "Exists"},
        {"key": P + "group-key", "operator": "NotIn", "values": [key]}]}, "topologyKey": topology})


def container_restarted(pod):
    """podutils.ContainerRestarted."""
    if pod_phase(pod) not in ("Running", "Pending"):
        return False
    st = pod.get("status") or {}
    return any((c.get("restartCount") or 0) > 0
               for c in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []))


def labelled(labels, annotations, template):
    t = copy.deepcopy(template or {})
    meta = t.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    t.setdefault("spec", {})
    return t


class LeaderWorkerSets(StandIn):
    kind = "leaderworkerset"

    def lws_res(self):
        return self.res(LWS, "v1", "leaderworkersets")

    def sts_res(self):
        return self.store.find("apps", "v1", "statefulsets")

    def enqueue(self, key, obj):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == (LWS, "leaderworkersets"):
            return [(self.kind, ns, meta.get("name"))]
        if key in (("", "pods"), ("apps", "statefulsets")) and (meta.get("labels") or {}).get(P + "name"):
            return [(self.kind, ns, meta["labels"][P + "name"])]
        return []

    def sync(self, ns, name):
        r = self.lws_res()
        lws = self.get(r, ns, name)
        if lws is None or deleting(lws):
            return
        spec = lws.get("spec") or {}
        lwt = spec.get("leaderWorkerTemplate") or {}
        size = lwt.get("size", 1)
        replicas = spec.get("replicas", 1)
        worker_tmpl = lwt.get("workerTemplate") or {}
        leader_tmpl = lwt.get("leaderTemplate") or worker_tmpl
        revision = short_hash(json.dumps([leader_tmpl, worker_tmpl, size], sort_keys=True))
        self.apply_leader_sts(lws, replicas, size, leader_tmpl, revision)
        pods_r = self.pods()
        mine = [p for p in self.listed(pods_r, ns) if (p["metadata"].get("labels") or {}).get(P + "name") == name]
        for p in mine:
            self.handle_restart_policy(lws, p, size)
        for leader in self.listed(pods_r, ns):
            labels = leader["metadata"].get("labels") or {}
            if labels.get(P + "name") != name or labels.get(P + "worker-index") != "0" or deleting(leader):
                continue
            if labels.get(P + "template-revision-hash") != revision:
                self.delete(pods_r, ns, leader["metadata"]["name"])  # simplified rollout: the group goes at once
                continue
            self.ensure_worker_sts(lws, leader, size, worker_tmpl, revision)
        self.update_status(r, lws, replicas, size, revision)

    # -- the leader StatefulSet (leaderworkerset_controller.go)

    def apply_leader_sts(self, lws, replicas, size, leader_tmpl, revision):
        ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
        lmeta = lws["metadata"]
        annotations = {P + "size": str(size)}
        if (lmeta.get("annotations") or {}).get(EXCLUSIVE):
            annotations[EXCLUSIVE] = lmeta["annotations"][EXCLUSIVE]
        template = labelled({P + "worker-index": "0", P + "name": name, P + "template-revision-hash": revision},
                            annotations, leader_tmpl)
        want_spec = {"serviceName": name, "replicas": replicas, "podManagementPolicy": "Parallel",
                     "template": template,
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                     "selector": {"matchLabels": {P + "name": name, P + "worker-index": "0"}}}
        want_meta = {"labels": {**(lmeta.get("labels") or {}), P + "name": name, P + "template-revision-hash": revision},
                     "annotations": {**(lmeta.get("annotations") or {}), P + "replicas": str(replicas)},
                     "ownerReferences": [controller_ref(lws, f"{LWS}/v1", "LeaderWorkerSet")]}
        self.apply_sts(ns, name, want_meta, want_spec)

    def apply_sts(self, ns, name, want_meta, want_spec):
        """Server-side apply of the fields the controller owns, simplified:
        created when missing, those fields overwritten when they differ."""
        r = self.sts_res()
        sts = self.get(r, ns, name)
        if sts is None:
            self.store.create(r, ns, {"metadata": {"name": name, **want_meta}, "spec": want_spec})
            return
        new = copy.deepcopy(sts)
        new["metadata"]["labels"] = {**(sts["metadata"].get("labels") or {}), **want_meta["labels"]}
        new["metadata"]["annotations"] = {**(sts["metadata"].get("annotations") or {}), **want_meta["annotations"]}
        new["metadata"]["ownerReferences"] = want_meta["ownerReferences"]
        new["spec"].update(copy.deepcopy(want_spec))
        if new != sts:
            self.write(r, new)

    # -- the pod controller (pod_controller.go)

    def handle_restart_policy(self, lws, pod, size):
        """handleRestartPolicy: a restarted or deleted pod of the group gets
        its leader deleted."""
        ns = lws["metadata"]["namespace"]
        pods_r = self.pods()
        pod = self.get(pods_r, ns, pod["metadata"]["name"])  # as an earlier group's deletion left it
        if pod is None:
            return
        lwt = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
        policy = lwt.get("restartPolicy", "RecreateGroupOnPodRestart")
        if policy not in RECREATE:
            return
        if not container_restarted(pod) and not deleting(pod):
            return
        after_start = policy == "RecreateGroupAfterStart" or P + "experimental-recreate-group-after-start" in (
            lws["metadata"].get("annotations") or {})
        if after_start and self.pending_pods_in_group(lws, pod, size):
            return
        labels = pod["metadata"].get("labels") or {}
        if labels.get(P + "worker-index") != "0":
            leader_name, ordinal = parent_and_ordinal(pod["metadata"]["name"])
            if ordinal < 0:
                return
            leader = self.get(pods_r, ns, leader_name)
            if leader is None:
                return
            if (leader["metadata"].get("labels") or {}).get(P + "template-revision-hash") != labels.get(
                    P + "template-revision-hash"):
                return
            if not self.worker_belongs_to_leader(pod, leader):
                return
        else:
            leader = pod
        if deleting(leader):
            return
        self.delete(pods_r, ns, leader["metadata"]["name"])

    def pending_pods_in_group(self, lws, pod, size):
        ns = lws["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        group = [p for p in self.listed(self.pods(), ns)
                 if (p["metadata"].get("labels") or {}).get(P + "name") == labels.get(P + "name")
                 and (p["metadata"].get("labels") or {}).get(P + "group-index") == labels.get(P + "group-index")]
        return len(group) != size or any(pod_phase(p) == "Pending" for p in group)

    def worker_belongs_to_leader(self, pod, leader):
        """workerPodBelongsToLeader: the worker's StatefulSet is the one the
        leader (this uid) owns."""
        owner = next((ref for ref in pod["metadata"].get("ownerReferences") or [] if ref.get("controller")), None)
        if owner is None:
            return False
        if owner.get("kind") == "Pod":
            return owner.get("name") == leader["metadata"]["name"] and owner.get("uid") == leader["metadata"]["uid"]
        if owner.get("kind") != "StatefulSet":
            return False
        sts = self.get(self.sts_res(), pod["metadata"]["namespace"], owner.get("name"))
        if sts is None or sts["metadata"]["uid"] != owner.get("uid"):
            return False
        sowner = next((ref for ref in sts["metadata"].get("ownerReferences") or [] if ref.get("controller")), None)
        return sowner is not None and sowner.get("kind") == "Pod" and sowner.get("name") == leader["metadata"][
            "name"] and sowner.get("uid") == leader["metadata"]["uid"]

    def ensure_worker_sts(self, lws, leader, size, worker_tmpl, revision):
        ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
        lmeta = leader["metadata"]
        llabels = lmeta.get("labels") or {}
        if (lmeta.get("annotations") or {}).get(P + "leader-name"):
            return  # a leader with a worker's annotation: upstream refuses to go on
        if size == 1:
            return
        spec = lws.get("spec") or {}
        if spec.get("startupPolicy", "LeaderCreated") == "LeaderReady" and not pod_is_ready(leader):
            return
        annotations = {P + "size": str(size), P + "leader-name": lmeta["name"]}
        topology = (lws["metadata"].get("annotations") or {}).get(EXCLUSIVE)
        if topology:
            annotations[EXCLUSIVE] = topology
        selector = {P + "group-index": llabels.get(P + "group-index"), P + "name": name,
                    P + "group-key": llabels.get(P + "group-key")}
        template = labelled({**selector, P + "template-revision-hash": llabels.get(P + "template-revision-hash")},
                            annotations, worker_tmpl)
        if topology:
            node_name = (leader.get("spec") or {}).get("nodeName")
            if not node_name:
                return  # not scheduled yet
            node = self.get(self.store.find("", "v1", "nodes"), "", node_name)
            value = ((node or {}).get("metadata", {}).get("labels") or {}).get(topology)
            if value is None:
                sys.stderr.write(f"apiserver: leaderworkerset controller, {ns}/{name}: node {node_name} "
                                 f"does not have topology label {topology}\n")
                return
            template["spec"]["nodeSelector"] = {**(template["spec"].get("nodeSelector") or {}), topology: value}
        r = self.sts_res()
        if self.get(r, ns, lmeta["name"]) is not None:
            return
        ref = {"apiVersion": "v1", "kind": "Pod", "name": lmeta["name"], "uid": lmeta["uid"],
               "controller": True, "blockOwnerDeletion": True}
        self.store.create(r, ns, {
            "metadata": {"name": lmeta["name"],
                         "labels": {**(lws["metadata"].get("labels") or {}), **selector,
                                    P + "template-revision-hash": llabels.get(P + "template-revision-hash")},
                         "annotations": dict(lws["metadata"].get("annotations") or {}),
                         "ownerReferences": [ref]},
            "spec": {"serviceName": name, "replicas": size - 1, "podManagementPolicy": "Parallel",
                     "ordinals": {"start": 1}, "template": template, "selector": {"matchLabels": selector}}})

    def update_status(self, r, lws, replicas, size, revision):
        ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
        pods = [p for p in self.listed(self.pods(), ns)
                if (p["metadata"].get("labels") or {}).get(P + "name") == name and not deleting(p)]
        groups = {}
        for p in pods:
            groups.setdefault(p["metadata"]["labels"].get(P + "group-index"), []).append(p)
        ready = sum(1 for ps in groups.values() if len(ps) == size and all(pod_is_ready(p) for p in ps))
        updated = sum(1 for ps in groups.values()
                      if all(p["metadata"]["labels"].get(P + "template-revision-hash") == revision for p in ps))
        status = copy.deepcopy(lws.get("status") or {})
        conds = status.setdefault("conditions", [])
        status.update({"replicas": len(groups), "readyReplicas": ready, "updatedReplicas": updated,
                       "hpaPodSelector": f"{P}name={name},{P}worker-index=0"})
        if ready >= replicas:
            meta_condition(conds, "Available", "True", "AllGroupsReady", "All replicas are ready")
            meta_condition(conds, "Progressing", "False", "Ready", "Replicas are ready")
        else:
            meta_condition(conds, "Available", "False", "AllGroupsReady", "Not all replicas are ready")
            meta_condition(conds, "Progressing", "True", "GroupsProgressing", "Replicas are progressing")
        self.write_status(r, lws, status)
