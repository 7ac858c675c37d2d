"""jobset.x-k8s.io/v1alpha2 JobSet: the update rules of its validating webhook.

Upstream (kubernetes-sigs/jobset):
- pkg/webhooks/jobset_webhook.go, ValidateUpdate: `spec.replicatedJobs` is
  immutable, except — while the old or the new object is suspended — each
  pod template's `metadata.labels`, `metadata.annotations`,
  `spec.nodeSelector`, `spec.tolerations` and `spec.schedulingGates` (the
  fields Kueue changes while a workload is suspended); `spec.managedBy` is
  immutable. Affinity is never mutable, nor are `replicas`, `parallelism`
  and `completions` (the alpha ElasticJobSet gate of pkg/features/features.go,
  off by default, which lets an Indexed job's parallelism and completions
  change, is not emulated).
- api/jobset/v1alpha2/jobset_types.go: `replicas` defaults to 1 (the CRD's
  schema default, applied by crd_schema.py).
"""

import copy

from apierrors import FieldError
from job_rules import same

_MUTABLE_WHILE_SUSPENDED = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "schedulingGates"),
)


def _pod_template(rjob):
    return (((rjob or {}).get("template") or {}).get("spec") or {}).get("template") or {}


def validate_update(new, old):
    spec, ospec = new.get("spec") or {}, old.get("spec") or {}
    munged = copy.deepcopy(spec.get("replicatedJobs") or [])
    olds = {r.get("name"): r for r in ospec.get("replicatedJobs") or []}
    if ospec.get("suspend") or spec.get("suspend"):
        for rjob in munged:
            orjob = olds.get(rjob.get("name"))
            if orjob is None:
                continue
            t, ot = _pod_template(rjob), _pod_template(orjob)
            for part, field in _MUTABLE_WHILE_SUSPENDED:
                src = (ot.get(part) or {})
                dst = t.setdefault(part, {})
                if field in src:
                    dst[field] = copy.deepcopy(src[field])
                else:
                    dst.pop(field, None)
                if not dst:
                    t.pop(part, None)
            # the template as munged replaces the submitted one
            rjob.setdefault("template", {}).setdefault("spec", {})["template"] = t
    errs = []
    if not same(munged, ospec.get("replicatedJobs") or []):
        errs.append(FieldError("invalid", "spec.replicatedJobs", "field is immutable"))
    if spec.get("managedBy") != ospec.get("managedBy"):
        errs.append(FieldError("invalid", "spec.managedBy", "field is immutable"))
    return errs
