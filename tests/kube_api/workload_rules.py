"""Admission of third-party workload kinds: what their own admission webhooks
default and reject, for the fields muster writes. The API test server runs
no webhooks, so it applies these after the CRD's schema, as if the
project's webhook were installed with the CRD.

- PyTorchJob (kubeflow/training-operator release-1.9):
  pkg/apis/kubeflow.org/v1/pytorch_defaults.go (SetDefaults_PyTorchJob:
  runPolicy.cleanPodPolicy None, replica type keys in camel case, replicas
  1, restartPolicy OnFailure, the `pytorchjob-port` 23456 on the `pytorch`
  container, elasticPolicy min/max from each other or the workers,
  nprocPerNode "auto") and pkg/webhooks/pytorch/pytorchjob_webhook.go
  (validatePyTorchJob: a DNS-1035 name; replica types Master and Worker
  only, each with containers, every container an image, one named
  `pytorch`; Master replicas exactly 1, Worker at least 1; elasticPolicy
  needs a Worker; runPolicy.managedBy one of kubeflow.org/training-operator
  and kueue.x-k8s.io/multikueue). Its ValidateUpdate compares the new
  object with itself, so managedBy is not immutable in practice; nor here.
- TrainJob (kubeflow/trainer): pkg/webhooks/trainjob_webhook.go (the
  defaulter stamps runtimePatches[].time when a patch is new or changed)
  and pkg/runtime/framework/plugins/jobset/jobset.go
  (checkRuntimePatchesImmutability, as of v2.3; v2.2 asks the updated
  object alone to be suspended: runtimePatches may change only when the
  TrainJob is suspended before or after the update, and not while a
  replicated job of its JobSet, read by the TrainJob's name, is active
  (status.replicatedJobsStatus[].active): 422 Forbidden on
  spec.runtimePatches).
- RayCluster, RayJob (ray-project/kuberay ray-operator/pkg/webhooks/v1):
  a DNS-1035 name of at most 53 characters (RayJob: 47), unique worker
  group names.
- LeaderWorkerSet (kubernetes-sigs/lws pkg/webhooks/leaderworkerset_webhook.go
  generalValidate): a DNS-1035 name, replicas 0..1000000, size at least 1,
  replicas times size within int32.
"""

import copy
import re

from apierrors import ApiError, FieldError, invalid
from controllers import now_rfc3339

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _name_errors(name, limit=63):
    errs = []
    if not DNS1035.match(name or "") or len(name or "") > 63:
        errs.append(FieldError("invalid", "metadata.name", "a DNS-1035 label must consist of lower case "
                               "alphanumeric characters or '-', start with an alphabetic character, and end "
                               "with an alphanumeric character", name))
    elif len(name) > limit:
        errs.append(FieldError("invalid", "metadata.name", f"name should be no more than {limit} characters", name))
    return errs


# ---------------------------------------------------------------- PyTorchJob

def default_pytorchjob(obj):
    spec = obj.setdefault("spec", {})
    run = spec.setdefault("runPolicy", {})
    run.setdefault("cleanPodPolicy", "None")
    replicas = spec.get("pytorchReplicaSpecs") or {}
    for key in list(replicas):
        for canonical in ("Master", "Worker"):
            if key.lower() == canonical.lower() and key != canonical:
                replicas[canonical] = replicas.pop(key)
    for rspec in replicas.values():
        if not isinstance(rspec, dict):
            continue
        rspec.setdefault("replicas", 1)
        rspec.setdefault("restartPolicy", "OnFailure")
        for c in ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []:
            if c.get("name") == "pytorch" and not any(p.get("name") == "pytorchjob-port" for p in c.get("ports") or []):
                c.setdefault("ports", []).append({"name": "pytorchjob-port", "containerPort": 23456})
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, dict) and "Worker" in replicas:
        lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
        if lo is None and hi is None:
            elastic["minReplicas"] = elastic["maxReplicas"] = replicas["Worker"].get("replicas", 1)
        elif lo is None:
            elastic["minReplicas"] = hi
        elif hi is None:
            elastic["maxReplicas"] = lo
    if (elastic is None or elastic.get("nProcPerNode") is None) and spec.get("nprocPerNode") is None:
        spec["nprocPerNode"] = "auto"


def validate_pytorchjob(obj):
    errs = _name_errors(obj["metadata"].get("name"))
    spec = obj.get("spec") or {}
    managed = (spec.get("runPolicy") or {}).get("managedBy")
    if managed is not None and managed not in ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"):
        errs.append(FieldError("unsupported", "spec.runPolicy.managedBy",
                               'supported values: "kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"',
                               managed))
    replicas = spec.get("pytorchReplicaSpecs")
    if spec.get("elasticPolicy") is not None and "Worker" not in (replicas or {}):
        errs.append(FieldError("required", "spec.pytorchReplicaSpecs[Worker]", "must be configured if elastic "
                               "policy is used"))
    if not replicas:
        errs.append(FieldError("required", "spec.pytorchReplicaSpecs", "must be required"))
    for rtype, rspec in sorted((replicas or {}).items()):
        path = f"spec.pytorchReplicaSpecs[{rtype}]"
        if rtype not in ("Master", "Worker"):
            errs.append(FieldError("unsupported", path, 'supported values: "Master", "Worker"', rtype))
        containers = (((rspec or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        cpath = f"{path}.template.spec.containers"
        if not containers:
            errs.append(FieldError("required", cpath, "must be specified"))
        for i, c in enumerate(containers):
            if not c.get("image"):
                errs.append(FieldError("required", f"{cpath}[{i}].image", "must be required"))
        if not any(c.get("name") == "pytorch" for c in containers):
            errs.append(FieldError("required", cpath, "must have at least one container with name pytorch"))
        n = (rspec or {}).get("replicas")
        if rtype == "Master" and n != 1:
            errs.append(FieldError("forbidden", f"{path}.replicas", "must be 1"))
        elif rtype != "Master" and n is not None and n < 1:
            errs.append(FieldError("forbidden", f"{path}.replicas", "must be at least 1"))
    return errs


# ---------------------------------------------------------------- TrainJob

def default_trainjob(obj, old):
    now = now_rfc3339()
    olds = {p.get("manager"): p for p in ((old or {}).get("spec") or {}).get("runtimePatches") or []}
    for p in (obj.get("spec") or {}).get("runtimePatches") or []:
        before = olds.get(p.get("manager"))
        if before is not None:
            a, b = copy.deepcopy(before), copy.deepcopy(p)
            a.pop("time", None)
            b.pop("time", None)
            p["time"] = before.get("time") if a == b else now
        else:
            p.setdefault("time", now)


def validate_trainjob_update(store, new, old):
    """checkRuntimePatchesImmutability."""
    def patches(o):
        out = copy.deepcopy(((o.get("spec") or {}).get("runtimePatches")) or [])
        for p in out:
            p.pop("time", None)
        return out
    if patches(new) == patches(old):
        return []
    was = bool((old.get("spec") or {}).get("suspend"))
    now = bool((new.get("spec") or {}).get("suspend"))
    if not was and not now:
        return [FieldError("forbidden", "spec.runtimePatches", "RuntimePatches can only be modified when the "
                           "TrainJob is suspended before or after the update")]
    # the TrainJob's JobSet (same name), if it exists: none of its replicated jobs may be active
    try:
        jobsets = store.find("jobset.x-k8s.io", "v1alpha2", "jobsets")
    except ApiError:
        return []
    js = store.objects[jobsets.storage_key].get((old["metadata"].get("namespace"), old["metadata"]["name"]))
    errs = []
    for rjob in ((js or {}).get("status") or {}).get("replicatedJobsStatus") or []:
        if rjob.get("active", 0) > 0:
            errs.append(FieldError("forbidden", "spec.runtimePatches", "RuntimePatches cannot be modified when the "
                                   f"JobSet's ReplicatedJob {rjob.get('name', '')} is still active"))
    return errs


# ---------------------------------------------------------------- Ray

def validate_ray(obj, kind):
    limit = 53 if kind == "RayCluster" else 47
    errs = _name_errors(obj["metadata"].get("name"), limit)
    spec = obj.get("spec") or {}
    cluster = spec if kind == "RayCluster" else (spec.get("rayClusterSpec") or {})
    seen = set()
    base = "spec.workerGroupSpecs" if kind == "RayCluster" else "spec.rayClusterSpec.workerGroupSpecs"
    for i, g in enumerate(cluster.get("workerGroupSpecs") or []):
        if g.get("groupName") in seen:
            errs.append(FieldError("invalid", f"{base}[{i}]", "worker group names must be unique", g.get("groupName")))
        seen.add(g.get("groupName"))
    return errs


# ---------------------------------------------------------------- LeaderWorkerSet

def validate_lws(obj):
    errs = _name_errors(obj["metadata"].get("name"))
    spec = obj.get("spec") or {}
    replicas = spec.get("replicas", 1)
    size = (spec.get("leaderWorkerTemplate") or {}).get("size", 1)
    if size < 1:
        errs.append(FieldError("invalid", "spec.leaderWorkerTemplate.size", "size must be equal or greater than 1",
                               size))
    if replicas * size > 2**31 - 1:
        errs.append(FieldError("invalid", "spec.replicas", f"the product of replicas and worker replicas must not "
                               f"exceed {2**31 - 1}", replicas))
    return errs


# ---------------------------------------------------------------- entry points

KINDS = {
    ("kubeflow.org", "pytorchjobs"): "PyTorchJob",
    ("trainer.kubeflow.org", "trainjobs"): "TrainJob",
    ("ray.io", "rayclusters"): "RayCluster",
    ("ray.io", "rayjobs"): "RayJob",
    ("leaderworkerset.x-k8s.io", "leaderworkersets"): "LeaderWorkerSet",
}


def admit(store, key, obj, old, subresource):
    """Defaults and validates `obj` (old: the stored object on update);
    raises 422 Invalid like the kind's webhook would."""
    kind = KINDS.get(key)
    if kind is None or subresource == "status":
        return obj
    errs = []
    if kind == "PyTorchJob":
        default_pytorchjob(obj)
        errs = validate_pytorchjob(obj)
    elif kind == "TrainJob":
        default_trainjob(obj, old)
        if old is not None:
            errs = validate_trainjob_update(store, obj, old)
    elif kind in ("RayCluster", "RayJob"):
        errs = validate_ray(obj, kind)
    elif kind == "LeaderWorkerSet":
        errs = validate_lws(obj)
    if errs:
        raise invalid(kind, key[0], obj["metadata"].get("name"), errs)
    return obj
