"""What the stand-ins for third-party workload controllers share: reading and
writing the store the way a controller-runtime client would, pods from
templates, owner lookups and metav1.Condition bookkeeping.

A stand-in runs inside the API test server like the Job controller does
(controllers.py): it reacts to a committed write before the writer's next
request, and a refused write of its own goes to stderr and is retried on the
next event. A named pod that a mutating webhook matches is created through
the webhooks, off the store's lock (Controllers.create_admitted): it appears
a moment later, as a real controller's create does. It touches only resources that are served: a kind whose CRD is
not installed is simply never synced.
"""

import copy
import hashlib

from apierrors import ApiError
from controllers import now_rfc3339


def meta_condition(conds, ctype, status, reason, message="", generation=None):
    """Sets a metav1.Condition (meta.SetStatusCondition): lastTransitionTime
    moves only when the status does."""
    for c in conds:
        if c.get("type") == ctype:
            if c.get("status") != status:
                c["lastTransitionTime"] = now_rfc3339()
            c.update({"status": status, "reason": reason, "message": message})
            if generation is not None:
                c["observedGeneration"] = generation
            return
    c = {"type": ctype, "status": status, "reason": reason, "message": message,
         "lastTransitionTime": now_rfc3339()}
    if generation is not None:
        c["observedGeneration"] = generation
    conds.append(c)


def condition_true(conds, ctype):
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conds or [])


def short_hash(*parts):
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()[:10]


def controller_ref(owner, api_version, kind):
    return {"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def pod_phase(pod):
    return (pod.get("status") or {}).get("phase")


def pod_is_ready(pod):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def pod_finished(pod):
    return pod_phase(pod) in ("Succeeded", "Failed")


def deleting(obj):
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


class StandIn:
    """Base of a workload controller stand-in: `kind` names its queue items;
    `enqueue(key, obj)` says which of its objects a write concerns."""

    kind = ""

    def __init__(self, controllers):
        self.c = controllers
        self.store = controllers.store

    # -- resources (None when the CRD is not installed)

    def res(self, group, version, plural):
        try:
            return self.store.find(group, version, plural)
        except ApiError:
            return None

    def get(self, r, ns, name):
        if r is None:
            return None
        return self.store.objects[r.storage_key].get((ns, name))

    def listed(self, r, ns):
        if r is None:
            return []
        return [o for (ons, _), o in sorted(self.store.objects[r.storage_key].items()) if ons == ns]

    def owned(self, r, ns, uid):
        """Objects of `r` in `ns` whose controller is `uid`."""
        return [o for o in self.listed(r, ns)
                if any(ref.get("uid") == uid and ref.get("controller")
                       for ref in o["metadata"].get("ownerReferences") or [])]

    def pods(self):
        return self.store.find("", "v1", "pods")

    def jobs(self):
        return self.store.find("batch", "v1", "jobs")

    # -- writes

    def write_status(self, r, obj, status):
        if status == (obj.get("status") or {}):
            return obj
        new = copy.deepcopy(obj)
        new["status"] = status
        out, _ = self.store.update(r, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], new,
                                   "status" if r.status else None, check_rv=False)
        return out

    def write(self, r, new):
        out, _ = self.store.update(r, new["metadata"].get("namespace", ""), new["metadata"]["name"], new, None,
                                   check_rv=False)
        return out

    def delete(self, r, ns, name):
        try:
            self.store.delete(r, ns, name, None)
        except ApiError:
            pass

    def create_pod(self, ns, template, name=None, generate_name=None, labels=None, annotations=None,
                   owner_refs=None, restart_policy=None):
        """A pod from a pod template, as a workload controller builds it."""
        template = copy.deepcopy(template or {})
        tmeta = template.get("metadata") or {}
        meta = {"labels": {**(tmeta.get("labels") or {}), **(labels or {})},
                "annotations": {**(tmeta.get("annotations") or {}), **(annotations or {})},
                "ownerReferences": owner_refs or []}
        if name:
            meta["name"] = name
        else:
            meta["generateName"] = generate_name
        for k in ("labels", "annotations", "ownerReferences"):
            if not meta[k]:
                meta.pop(k)
        spec = template.get("spec") or {}
        if restart_policy:
            spec["restartPolicy"] = restart_policy
        body = {"metadata": meta, "spec": spec}
        hooks = getattr(self.store, "webhooks", None)
        if name and (self.c.pending_creation(ns, name)
                     or hooks is not None and hooks.matching(self.pods(), ns, "CREATE", None, body, None)):
            # through the webhooks, as the real controller's create is: the
            # pod appears later (a write that syncs this controller again)
            self.c.create_admitted(self.pods(), ns, body, self.enqueue(("", "pods"), {**body, "metadata": {**meta, "namespace": ns}}))
            return None
        try:
            return self.store.create(self.pods(), ns, body)
        except ApiError as e:
            if e.code == 409:  # the previous pod of this name is still terminating
                return None
            raise

    # -- to override

    def enqueue(self, key, obj):
        """Queue items ((kind, ns, name)) a committed write of `obj` (resource
        `key` = (group, plural)) concerns."""
        return []

    def sync(self, ns, name):
        raise NotImplementedError


def owner_names(obj, kind):
    """Names of `obj`'s controller owners of `kind`."""
    return [ref.get("name") for ref in (obj.get("metadata") or {}).get("ownerReferences") or []
            if ref.get("controller") and ref.get("kind") == kind]
