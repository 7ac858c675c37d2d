"""core/v1 Node and coordination.k8s.io/v1 Lease validation.

Upstream (kubernetes/kubernetes):
- pkg/apis/core/validation/validation.go, ValidateNodeUpdate: spec.providerID
  and spec.podCIDR(s) may only go from empty to a value, never change;
- pkg/apis/coordination/validation/validation.go, ValidateLeaseSpec:
  leaseDurationSeconds > 0 and leaseTransitions >= 0 when set.
"""

from apierrors import FieldError


def validate_node_update(new, old):
    errs = []
    spec, ospec = new.get("spec") or {}, old.get("spec") or {}
    if ospec.get("providerID") and spec.get("providerID") != ospec["providerID"]:
        errs.append(FieldError("forbidden", "spec.providerID",
                               'node updates may not change providerID except from "" to valid'))
    if ospec.get("podCIDR") and spec.get("podCIDR") != ospec["podCIDR"]:
        errs.append(FieldError("forbidden", "spec.podCIDR",
                               'node updates may not change podCIDR except from "" to valid'))
    return errs


def validate_lease(lease):
    errs = []
    spec = lease.get("spec") or {}
    d = spec.get("leaseDurationSeconds")
    if d is not None and d <= 0:
        errs.append(FieldError("invalid", "spec.leaseDurationSeconds", "must be greater than 0", d))
    t = spec.get("leaseTransitions")
    if t is not None and t < 0:
        errs.append(FieldError("invalid", "spec.leaseTransitions", "must be greater than or equal to 0", t))
    return errs
