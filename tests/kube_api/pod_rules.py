"""core/v1 Pod: create strategy, update validation, binding, graceful deletion.

Upstream (kubernetes/kubernetes):
- pkg/registry/core/pod/strategy.go: PrepareForCreate sets status to phase
  Pending with the QoS class; CheckGracefulDelete: the grace period is the
  DeleteOptions' or spec.terminationGracePeriodSeconds (default 30), and 0
  for a pod not bound to a node or already Succeeded/Failed;
- pkg/apis/core/validation/validation.go, ValidatePodUpdate: a pod's spec
  may change only in containers[*].image, initContainers[*].image,
  activeDeadlineSeconds (set or lowered), tolerations (additions only),
  schedulingGates (removals only: gates are set at creation) and
  terminationGracePeriodSeconds (-1 to 1), and — while the old pod has
  scheduling gates — nodeSelector (additions only; KEP-3838, "mutable pod
  scheduling directives") (node affinity, which may then be narrowed, is
  not modelled and stays immutable here); so spec.nodeName cannot be set by
  an update;
- pkg/registry/core/pod/storage/storage.go, BindingREST / assignPod: a
  Binding to a Node sets spec.nodeName once (409 Conflict if the pod is
  already assigned or being deleted), copies the Binding's annotations and
  sets the PodScheduled condition.
"""

import copy

from apierrors import ApiError, FieldError
from job_rules import default_pod_spec, same
from controllers import now_rfc3339

_MUTABLE = ("pod updates may not change fields other than `spec.containers[*].image`,"
            "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
            "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
            "(allow it to be set to 1 if it was previously negative)")


def qos_class(spec):
    requests, limits, any_set, guaranteed = {}, {}, False, True
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or str(req.get(r, lim[r])) != str(lim[r]):
                guaranteed = False
        requests.update(req)
        limits.update(lim)
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def prepare_create(pod):
    spec = pod.setdefault("spec", {})
    default_pod_spec(spec)
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def validate_update(new, old):
    spec = new.setdefault("spec", {})
    default_pod_spec(spec)
    ospec = copy.deepcopy(old.get("spec") or {})
    for f in ("containers", "initContainers"):
        nc, oc = spec.get(f) or [], ospec.get(f) or []
        if len(nc) == len(oc):
            for n, o in zip(nc, oc):
                if isinstance(n, dict) and isinstance(o, dict) and "image" in n:
                    o["image"] = n["image"]
    ad, oad = spec.get("activeDeadlineSeconds"), ospec.get("activeDeadlineSeconds")
    if ad is not None and (oad is None or ad <= oad):
        ospec["activeDeadlineSeconds"] = ad
    tol, otol = spec.get("tolerations") or [], ospec.get("tolerations") or []
    if all(t in tol for t in otol):
        ospec["tolerations"] = spec.get("tolerations")
    gates, ogates = spec.get("schedulingGates") or [], ospec.get("schedulingGates") or []
    if ogates:
        sel, osel = spec.get("nodeSelector") or {}, ospec.get("nodeSelector") or {}
        if all(sel.get(k) == v for k, v in osel.items()):
            ospec["nodeSelector"] = spec.get("nodeSelector")
    if all(g in ogates for g in gates):
        ospec["schedulingGates"] = spec.get("schedulingGates")
    if (ospec.get("terminationGracePeriodSeconds") or 0) < 0 and spec.get("terminationGracePeriodSeconds") == 1:
        ospec["terminationGracePeriodSeconds"] = 1
    if not same(spec, ospec):
        return [FieldError("forbidden", "spec", _MUTABLE)]
    return []


def grace_period(pod, options):
    """CheckGracefulDelete: seconds the pod may take to stop."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    g = (options or {}).get("gracePeriodSeconds")
    if g is None:
        g = spec.get("terminationGracePeriodSeconds", 30)
    return max(0, int(g))


def bind(pod, binding):
    """assignPod: returns the pod bound to the Binding's node."""
    name = pod["metadata"]["name"]
    target = (binding or {}).get("target") or {}
    if target.get("kind") not in (None, "", "Node") or not target.get("name"):
        raise ApiError(400, "BadRequest", "Binding target must be a Node with a name")
    if pod["metadata"].get("deletionTimestamp"):
        raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": '
                       f"pod {name} is being deleted, cannot be assigned to a host",
                       {"name": name, "kind": "pods/binding"})
    current = (pod.get("spec") or {}).get("nodeName")
    if current:
        raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{name}": '
                       f'pod {name} is already assigned to node "{current}"',
                       {"name": name, "kind": "pods/binding"})
    new = copy.deepcopy(pod)
    new["spec"]["nodeName"] = target["name"]
    ann = ((binding or {}).get("metadata") or {}).get("annotations") or {}
    if ann:
        new["metadata"].setdefault("annotations", {}).update(ann)
    conds = new.setdefault("status", {}).setdefault("conditions", [])
    conds[:] = [c for c in conds if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()})
    return new
