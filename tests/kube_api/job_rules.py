"""batch/v1 Job: defaulting, the create strategy and update validation.

Upstream (kubernetes/kubernetes):
- pkg/apis/batch/v1/defaults.go (SetDefaults_Job) and
  pkg/apis/core/v1/defaults.go (SetDefaults_PodSpec): the defaults below;
- pkg/registry/batch/job/strategy.go: status dropped on create and kept on
  update; the generated selector and template labels
  (batch.kubernetes.io/controller-uid, batch.kubernetes.io/job-name and the
  legacy controller-uid, job-name); AllowMutableSchedulingDirectives is
  "stored Job suspended and stored status.startTime nil";
- pkg/apis/batch/validation/validation.go: ValidateJobSpec (selector matches
  the template labels, restartPolicy OnFailure or Never), ValidateJobSpecUpdate
  (immutable selector, completions, completionMode, podFailurePolicy,
  backoffLimitPerIndex, managedBy, successPolicy; validatePodTemplateUpdate),
  ValidateJobStatusUpdate and validateJobStatus (the status rules below),
  with the fix of kubernetes/kubernetes#134769 (a resumed Job's startTime may
  be reset while the stored Job still has Suspended=True).

Equality follows apimachinery's Semantic.DeepEqual as far as JSON can tell:
a missing field, null, {} and [] compare equal.
"""

import copy

from apierrors import FieldError, OMIT

CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"


def normalize(v):
    """Drops empty maps, lists and nulls (Semantic.DeepEqual's nil == empty)."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            n = normalize(x)
            if n not in (None, {}, []):
                out[k] = n
        return out
    if isinstance(v, list):
        return [normalize(x) for x in v]
    return v


def same(a, b):
    return normalize(a) == normalize(b)


def default_pod_spec(spec):
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})


def default_job(job):
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    spec.setdefault("completionMode", "NonIndexed")
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    template = spec.setdefault("template", {})
    default_pod_spec(template.setdefault("spec", {}))


def prepare_create(job):
    """The create strategy: generated selector and template labels."""
    meta = job["metadata"]
    spec = job["spec"]
    if not spec.get("manualSelector"):
        uid = meta["uid"]
        labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
        labels.setdefault(CONTROLLER_UID, uid)
        labels.setdefault("controller-uid", uid)
        labels.setdefault(JOB_NAME, meta["name"])
        labels.setdefault("job-name", meta["name"])
        if spec.get("selector") is None:
            spec["selector"] = {"matchLabels": {CONTROLLER_UID: uid}}


def selector_matches(selector, labels):
    selector = selector or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and labels.get(k) in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def validate_spec(job):
    """ValidateJobSpec, the parts a controller can trip over."""
    errs = []
    spec = job.get("spec") or {}
    meta = job.get("metadata") or {}
    template = spec.get("template") or {}
    tlabels = (template.get("metadata") or {}).get("labels") or {}
    selector = spec.get("selector")
    if selector is None:
        errs.append(FieldError("required", "spec.selector", ""))
    elif not selector_matches(selector, tlabels) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        errs.append(FieldError("invalid", "spec.template.metadata.labels", "`selector` does not match template `labels`", tlabels))
    if not spec.get("manualSelector") and selector is not None:
        if (selector.get("matchLabels") or {}).get(CONTROLLER_UID) != meta.get("uid"):
            errs.append(FieldError("invalid", "spec.selector", "`selector` not auto-generated", selector))
    for f in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        v = spec.get(f)
        if v is not None and (not isinstance(v, int) or v < 0):
            errs.append(FieldError("invalid", f"spec.{f}", "must be greater than or equal to 0", v))
    rp = (template.get("spec") or {}).get("restartPolicy")
    if rp not in ("OnFailure", "Never"):
        errs.append(FieldError("unsupported", "spec.template.spec.restartPolicy",
                               'supported values: "OnFailure", "Never"', rp))
    if not (template.get("spec") or {}).get("containers"):
        errs.append(FieldError("required", "spec.template.spec.containers", ""))
    errs += node_affinity_errors(template.get("spec"), "spec.template.spec")
    return errs


def mutable_scheduling_directives(old):
    """strategy.go: only a suspended Job that never started."""
    return bool((old.get("spec") or {}).get("suspend")) and not (old.get("status") or {}).get("startTime")


def validate_update(new, old):
    errs = validate_spec(new)
    spec, ospec = new.get("spec") or {}, old.get("spec") or {}
    for f in ("selector", "completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        if not same(spec.get(f), ospec.get(f)):
            errs.append(FieldError("invalid", f"spec.{f}", "field is immutable", spec.get(f)))
    # completions: mutable only for Indexed Jobs in tandem with parallelism (ElasticIndexedJob)
    if not same(spec.get("completions"), ospec.get("completions")):
        if spec.get("completionMode") != "Indexed":
            errs.append(FieldError("invalid", "spec.completions", "field is immutable", spec.get("completions")))
        elif spec.get("completions") is not None and spec.get("completions") != spec.get("parallelism"):
            errs.append(FieldError("invalid", "spec.completions",
                                   "can only be modified in tandem with spec.parallelism", spec.get("completions")))
    errs += validate_template_update(spec.get("template") or {}, ospec.get("template") or {},
                                     mutable_scheduling_directives(old))
    return errs


def validate_template_update(template, old_template, allow_directives):
    """validatePodTemplateUpdate: the template is immutable; with mutable
    scheduling directives, nodeSelector, tolerations, schedulingGates,
    labels, annotations and affinity.nodeAffinity may change."""
    old_t = copy.deepcopy(old_template)
    if allow_directives:
        tspec = template.get("spec") or {}
        ospec = old_t.setdefault("spec", {})
        new_aff, old_aff = tspec.get("affinity"), ospec.get("affinity")
        if new_aff is None and old_aff is not None:
            old_aff.pop("nodeAffinity", None)
            if not normalize(old_aff):
                ospec.pop("affinity", None)
        elif new_aff is not None and old_aff is None:
            ospec["affinity"] = {"nodeAffinity": new_aff.get("nodeAffinity")}
        elif new_aff is not None and old_aff is not None:
            old_aff["nodeAffinity"] = new_aff.get("nodeAffinity")
        for f in ("nodeSelector", "tolerations", "schedulingGates"):
            ospec[f] = tspec.get(f)
        ometa = old_t.setdefault("metadata", {})
        tmeta = template.get("metadata") or {}
        for f in ("labels", "annotations"):
            ometa[f] = tmeta.get(f)
    if not same(template, old_t):
        return [FieldError("invalid", "spec.template", "field is immutable", template)]
    return []


def _cond(job, ctype):
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def validate_status_update(new, old):
    """ValidateJobStatusUpdate with validateJobStatus (JobManagedBy strict rules)."""
    errs = []
    st, ost = new.get("status") or {}, old.get("status") or {}
    finished = _cond(new, "Complete") or _cond(new, "Failed")
    for ctype in ("Failed", "Complete", "FailureTarget"):
        if _cond(old, ctype) and not _cond(new, ctype):
            errs.append(FieldError("invalid", "status.conditions", f"cannot disable the terminal {ctype}=True condition"))
    if _cond(new, "Complete") and _cond(new, "Failed"):
        errs.append(FieldError("invalid", "status.conditions", "cannot set Complete=True and Failed=true conditions"))
    for f in ("failed", "succeeded"):
        if (st.get(f) or 0) < (ost.get(f) or 0):
            errs.append(FieldError("invalid", f"status.{f}", f"cannot decrease the {f} counter", st.get(f) or 0))
    if st.get("completionTime") and ost.get("completionTime") and st["completionTime"] != ost["completionTime"]:
        errs.append(FieldError("invalid", "status.completionTime", "completionTime cannot be mutated", st["completionTime"]))
    if st.get("completionTime") and not _cond(new, "Complete"):
        errs.append(FieldError("invalid", "status.completionTime",
                               "cannot set completionTime when there is no Complete=True condition", st["completionTime"]))
    if _cond(new, "Complete") and not st.get("completionTime"):
        errs.append(FieldError("required", "status.completionTime", "completionTime is required for Complete jobs"))
    if _cond(new, "Failed") and not _cond(new, "FailureTarget"):
        errs.append(FieldError("invalid", "status.conditions",
                               "cannot set Failed=True condition without the FailureTarget=true condition"))
    if finished and not st.get("startTime"):
        errs.append(FieldError("required", "status.startTime", "startTime is required for finished job"))
    if finished and (st.get("active") or 0) > 0:
        errs.append(FieldError("invalid", "status.active", "active>0 is invalid for finished job", st.get("active")))
    if st.get("ready") is not None and st["ready"] > (st.get("active") or 0):
        errs.append(FieldError("invalid", "status.ready", "cannot set more ready pods than active", st["ready"]))
    # a resume (the stored Job still Suspended=True) may reset it: kubernetes#134769
    if (ost.get("startTime") and st.get("startTime") != ost["startTime"]
            and not (new.get("spec") or {}).get("suspend") and not _cond(old, "Suspended")):
        errs.append(FieldError("required", "status.startTime", "startTime cannot be removed for unsuspended job"))
    return errs


__all__ = ["default_job", "prepare_create", "validate_spec", "validate_update",
           "validate_status_update", "mutable_scheduling_directives", "OMIT", "normalize", "same",
           "default_pod_spec", "selector_matches"]


def node_affinity_errors(pod_spec, path):
    """ValidatePodSpec -> validateNodeSelectorTerm ->
    validateNodeFieldSelectorRequirement (pkg/apis/core/validation/validation.go):
    a node selector term's matchFields may only name `metadata.name`, with
    operator In or NotIn and exactly one value."""
    errs = []
    required = ((((pod_spec or {}).get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    preferred = ((((pod_spec or {}).get("affinity") or {}).get("nodeAffinity") or {})
                 .get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    terms = [(f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]", t)
             for i, t in enumerate(required.get("nodeSelectorTerms") or [])]
    terms += [(f"{path}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference", p.get("preference") or {})
              for i, p in enumerate(preferred)]
    for tpath, term in terms:
        for j, req in enumerate((term or {}).get("matchFields") or []):
            fpath = f"{tpath}.matchFields[{j}]"
            if req.get("key") != "metadata.name":
                errs.append(FieldError("invalid", f"{fpath}.key", "not a valid field selector key", req.get("key")))
            if req.get("operator") not in ("In", "NotIn"):
                errs.append(FieldError("invalid", f"{fpath}.operator", "not a valid selector operator", req.get("operator")))
            elif len(req.get("values") or []) != 1:
                errs.append(FieldError("required", f"{fpath}.values",
                                       "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    return errs
