"""A stand-in for the LeaderWorkerSet controller (leaderworkerset.x-k8s.io/v1),
from kubernetes-sigs/lws:

- api/leaderworkerset/v1/leaderworkerset_types.go: `replicas` groups, each a
  leader pod named <lws>-<group> and size-1 worker pods named
  <lws>-<group>-<worker> (worker 1..size-1); the leader's template is
  leaderTemplate, or workerTemplate when it is unset; every pod is labelled
  leaderworkerset.sigs.k8s.io/{name,group-index,worker-index,group-key,
  template-revision-hash} and annotated leaderworkerset.sigs.k8s.io/size,
  workers also leaderworkerset.sigs.k8s.io/leader-name.
- pkg/controllers/leaderworkerset_controller.go and pod_controller.go: the
  leader pods belong to the leader StatefulSet (here: the LeaderWorkerSet
  itself is their controller owner), a group's workers to a StatefulSet
  the leader pod owns (here: the leader pod owns them, so deleting a
  leader takes its workers with it); with startupPolicy LeaderCreated the
  workers are created with the leader, with LeaderReady once the leader is
  Ready; with restartPolicy RecreateGroupOnPodRestart (the default) a group
  that lost a pod is deleted whole (through its leader) and recreated; with
  None only the missing pod comes back. StatefulSet pods have fixed names:
  a pod is recreated only once its predecessor is gone.
- status: replicas (groups that exist), readyReplicas (groups whose every
  pod is Ready), updatedReplicas, hpaPodSelector, and the Available and
  Progressing conditions.
A LeaderWorkerSet has no suspend: Kueue (pkg/controller/jobs/leaderworkerset)
holds each group as a pod group through the pods' scheduling gates, added by
its pod webhook; muster gates the templates and each pod. The pods are created
through the mutating webhooks that match them (workload_base.create_pod).
Simplified: a template change recreates every group whose pods carry an
older revision at once (no maxUnavailable / maxSurge pacing); scaling down
deletes the groups with the highest indices; no headless Service, no
subgroups, no LWS_* environment variables.
"""

import copy
import json

from workload_base import StandIn, controller_ref, deleting, meta_condition, pod_finished, pod_is_ready, short_hash

LWS = "leaderworkerset.x-k8s.io"
P = "leaderworkerset.sigs.k8s.io/"


class LeaderWorkerSets(StandIn):
    kind = "leaderworkerset"

    def __init__(self, controllers):
        super().__init__(controllers)
        self.started = set()  # leader uids whose workers were created (the worker StatefulSet exists)

    def lws_res(self):
        return self.res(LWS, "v1", "leaderworkersets")

    def enqueue(self, key, obj):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == (LWS, "leaderworkersets"):
            return [(self.kind, ns, meta.get("name"))]
        if key == ("", "pods") and (meta.get("labels") or {}).get(P + "name"):
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
        pods_r = self.pods()
        mine = [p for p in self.listed(pods_r, ns) if (p["metadata"].get("labels") or {}).get(P + "name") == name]
        groups = {}
        for p in mine:
            labels = p["metadata"].get("labels") or {}
            groups.setdefault(int(labels.get(P + "group-index", "0")), {})[int(labels.get(P + "worker-index", "0"))] = p
        recreate_group = lwt.get("restartPolicy", "RecreateGroupOnPodRestart") != "None"
        for g in sorted(groups):
            pods = groups[g]
            leader = pods.get(0)
            if g >= replicas:
                for p in pods.values():
                    self.delete(pods_r, ns, p["metadata"]["name"])
                continue
            if leader is None or deleting(leader):
                continue  # the workers go with their leader
            # workers of an earlier leader of this group are leftovers the garbage collector takes
            current = {w: p for w, p in pods.items() if w == 0 or any(
                ref.get("uid") == leader["metadata"]["uid"] for ref in p["metadata"].get("ownerReferences") or [])}
            stale = any((p["metadata"].get("labels") or {}).get(P + "template-revision-hash") != revision
                        for p in current.values())
            broken = any(deleting(p) or pod_finished(p) for p in current.values())
            missing = leader["metadata"]["uid"] in self.started and any(w not in current for w in range(1, size))
            if stale or (recreate_group and (broken or missing)):
                for p in current.values():
                    self.delete(pods_r, ns, p["metadata"]["name"])
        for g in range(replicas):
            self.ensure_group(lws, g, size, leader_tmpl, worker_tmpl, revision)
        self.update_status(r, lws, replicas, size, revision)

    @staticmethod
    def workers_started(leader, spec):
        """Whether the group's workers should exist by now."""
        return spec.get("startupPolicy", "LeaderCreated") == "LeaderCreated" or pod_is_ready(leader)

    def ensure_group(self, lws, g, size, leader_tmpl, worker_tmpl, revision):
        ns, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
        pods_r = self.pods()
        key = short_hash(ns, name, g)
        common = {P + "name": name, P + "group-index": str(g), P + "group-key": key,
                  P + "template-revision-hash": revision}
        leader_name = f"{name}-{g}"
        leader = self.get(pods_r, ns, leader_name)
        if leader is None:
            leader = self.create_pod(ns, leader_tmpl, name=leader_name, labels={**common, P + "worker-index": "0"},
                                     annotations={P + "size": str(size)},
                                     owner_refs=[controller_ref(lws, f"{LWS}/v1", "LeaderWorkerSet")])
        if leader is None or deleting(leader) or not self.workers_started(leader, lws.get("spec") or {}):
            return
        made = 0
        for w in range(1, size):
            wname = f"{name}-{g}-{w}"
            existing = self.get(pods_r, ns, wname)
            if existing is not None:  # this leader's, or a leftover still terminating
                made += any(ref.get("uid") == leader["metadata"]["uid"]
                            for ref in existing["metadata"].get("ownerReferences") or [])
                continue
            ref = {"apiVersion": "v1", "kind": "Pod", "name": leader["metadata"]["name"],
                   "uid": leader["metadata"]["uid"], "controller": False, "blockOwnerDeletion": True}
            if self.create_pod(ns, worker_tmpl, name=wname, labels={**common, P + "worker-index": str(w)},
                               annotations={P + "size": str(size), P + "leader-name": leader_name},
                               owner_refs=[ref]) is not None:
                made += 1
        if made == size - 1:
            self.started.add(leader["metadata"]["uid"])

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
