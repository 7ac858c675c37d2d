"""apps/v1 StatefulSet: defaulting and validation.

Upstream (kubernetes/kubernetes):
- pkg/apis/apps/v1/defaults.go (SetDefaults_StatefulSet): podManagementPolicy
  OrderedReady, updateStrategy RollingUpdate with partition 0, replicas 1,
  revisionHistoryLimit 10, persistentVolumeClaimRetentionPolicy Retain /
  Retain; pkg/apis/core/v1/defaults.go (SetDefaults_PodSpec) for the template.
- pkg/apis/apps/validation/validation.go: ValidateStatefulSetSpec
  (podManagementPolicy OrderedReady or Parallel; updateStrategy RollingUpdate
  or OnDelete, rollingUpdate only with RollingUpdate, partition >= 0;
  replicas >= 0; ordinals.start >= 0; selector required and not empty; the
  selector matches the template labels; template restartPolicy Always; no
  activeDeadlineSeconds) and ValidateStatefulSetUpdate (only replicas,
  ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy,
  minReadySeconds and revisionHistoryLimit may change).
"""

from apierrors import FieldError
from job_rules import default_pod_spec, same, selector_matches

POLICIES = ("OrderedReady", "Parallel")
MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
           "minReadySeconds", "revisionHistoryLimit")


def default_statefulset(obj):
    spec = obj.setdefault("spec", {})
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.setdefault("updateStrategy", {})
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
        strategy.setdefault("rollingUpdate", {})
    if strategy["type"] == "RollingUpdate" and isinstance(strategy.get("rollingUpdate"), dict):
        strategy["rollingUpdate"].setdefault("partition", 0)
    spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    template = spec.setdefault("template", {})
    if isinstance(template, dict):
        default_pod_spec(template.setdefault("spec", {}))


def _nonnegative(v, path, errs):
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
        errs.append(FieldError("invalid", path, "must be greater than or equal to 0", v))


def validate_spec(obj):
    errs = []
    spec = obj.get("spec") or {}
    policy = spec.get("podManagementPolicy")
    if not policy:
        errs.append(FieldError("required", "spec.podManagementPolicy", ""))
    elif policy not in POLICIES:
        errs.append(FieldError("invalid", "spec.podManagementPolicy", "must be 'OrderedReady' or 'Parallel'", policy))
    strategy = spec.get("updateStrategy") or {}
    stype = strategy.get("type")
    if not stype:
        errs.append(FieldError("required", "spec.updateStrategy", ""))
    elif stype == "OnDelete":
        if strategy.get("rollingUpdate") is not None:
            errs.append(FieldError("invalid", "spec.updateStrategy.rollingUpdate",
                                   "only allowed for updateStrategy 'RollingUpdate'", strategy.get("rollingUpdate")))
    elif stype == "RollingUpdate":
        _nonnegative((strategy.get("rollingUpdate") or {}).get("partition"),
                     "spec.updateStrategy.rollingUpdate.partition", errs)
    else:
        errs.append(FieldError("invalid", "spec.updateStrategy", "must be 'RollingUpdate' or 'OnDelete'", strategy))
    _nonnegative(spec.get("replicas"), "spec.replicas", errs)
    _nonnegative((spec.get("ordinals") or {}).get("start"), "spec.ordinals.start", errs)
    selector = spec.get("selector")
    template = spec.get("template") or {}
    tlabels = (template.get("metadata") or {}).get("labels") or {}
    if selector is None:
        errs.append(FieldError("required", "spec.selector", ""))
    else:
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            errs.append(FieldError("invalid", "spec.selector", "empty selector is not valid for statefulset.", selector))
        if not selector_matches(selector, tlabels):
            errs.append(FieldError("invalid", "spec.template.metadata.labels",
                                   "`selector` does not match template `labels`", tlabels))
    tspec = template.get("spec") or {}
    if tspec.get("restartPolicy") != "Always":
        errs.append(FieldError("unsupported", "spec.template.spec.restartPolicy", 'supported values: "Always"',
                               tspec.get("restartPolicy")))
    if tspec.get("activeDeadlineSeconds") is not None:
        errs.append(FieldError("invalid", "spec.template.spec.activeDeadlineSeconds", "must not be specified",
                               tspec.get("activeDeadlineSeconds")))
    if not tspec.get("containers"):
        errs.append(FieldError("required", "spec.template.spec.containers", ""))
    return errs


def validate_update(new, old):
    errs = validate_spec(new)
    spec, ospec = new.get("spec") or {}, old.get("spec") or {}
    rest = {k: v for k, v in spec.items() if k not in MUTABLE}
    orest = {k: v for k, v in ospec.items() if k not in MUTABLE}
    if not same(rest, orest):
        errs.append(FieldError("forbidden", "spec", "updates to statefulset spec for fields other than 'replicas', "
                               "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                               "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"))
    return errs
