"""Generic ObjectMeta validation, applied to every kind (built-in and custom).

Upstream (kubernetes/kubernetes, as of v1.33, the version this server reports):
- staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go:
  ValidateObjectMetaAccessor (create: generateName checked as a prefix, name
  required and checked by the kind's name function, namespace required and a
  DNS-1123 label for namespaced kinds, forbidden for cluster-scoped ones,
  generation non-negative, then labels, annotations, ownerReferences,
  finalizers), ValidateObjectMetaAccessorUpdate (update: no new finalizers
  while deleting, generation not decremented, name, namespace, uid,
  creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds
  immutable, then labels, annotations, ownerReferences, finalizers again),
  ValidateAnnotations (keys are qualified names once lower-cased; keys and
  values together at most 256 KiB: TotalAnnotationSizeLimitB),
  ValidateOwnerReferences / validateOwnerReference (apiVersion with a
  version, kind, name and uid non-empty; a core/v1 Event may not be an
  owner; at most one reference with controller: true), ValidateFinalizers
  (qualified names; orphan and foregroundDeletion not both);
- staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go:
  ValidateLabels (keys qualified names, values IsValidLabelValue; the field
  path is `metadata.labels`, the value the offending key or value);
- staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go:
  IsQualifiedName, IsValidLabelValue, IsDNS1123Label, IsDNS1123Subdomain,
  IsDNS1035Label and their messages (MaxLenError, RegexError);
- staging/src/k8s.io/apimachinery/pkg/api/validation/generic.go:
  NameIsDNSSubdomain, NameIsDNSLabel, NameIsDNS1035Label (a generateName
  prefix has a trailing '-' masked before the check: maskTrailingDash);
- the kinds' name functions: pkg/apis/core/validation/validation.go
  (ValidateNamespaceName: DNS-1123 label; ValidateServiceName: DNS-1035
  label; Pod, Node, ConfigMap, Secret, Event: DNS-1123 subdomain),
  pkg/apis/batch/validation/validation.go (Job: subdomain),
  pkg/apis/policy/validation/validation.go (PodDisruptionBudget: subdomain),
  pkg/apis/coordination/validation/validation.go (Lease: subdomain),
  staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go
  (a CustomResourceDefinition is named `spec.names.plural + "." + spec.group`),
  staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/validator.go
  (custom resources: subdomain);
- staging/src/k8s.io/apiserver/pkg/registry/rest/update.go (BeforeUpdate):
  an empty uid takes the stored one and creationTimestamp, deletionTimestamp
  and deletionGracePeriodSeconds are reset to the stored values before
  validation, so only a different uid is refused (422 `metadata.uid: ...
  field is immutable`);
- staging/src/k8s.io/apiserver/pkg/storage/names/generate.go
  (SimpleNameGenerator: the prefix cut to 58 characters, then 5 random
  characters of "bcdfghjklmnpqrstvwxz2456789");
- a finalizer without a '/' is accepted with the warning real API servers
  send, `metadata.finalizers: "NAME": prefer a domain-qualified finalizer
  name including a path (/) to avoid accidental conflicts with other
  finalizer writers` (standard finalizers exempt); its wording is taken
  from what kubectl prints, the Go function that emits it is not cited.
"""

import random
import re

from apierrors import FieldError

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + "(\\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QNAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _QNAME + ")?"

_LABEL_RE = re.compile("^" + _LABEL + "$")
_SUBDOMAIN_RE = re.compile("^" + _SUBDOMAIN + "$")
_DNS1035_RE = re.compile("^" + _DNS1035 + "$")
_QNAME_RE = re.compile("^" + _QNAME + "$")
_LABEL_VALUE_RE = re.compile("^" + _LABEL_VALUE + "$")

TOTAL_ANNOTATION_SIZE = 256 * (1 << 10)
MAX_GENERATED_PREFIX = 58
_GENERATED_CHARS = "bcdfghjklmnpqrstvwxz2456789"

# metav1.FinalizerOrphanDependents, FinalizerDeleteDependents, and the
# namespace finalizer: the standard finalizers that need no prefix
STANDARD_FINALIZERS = ("orphan", "foregroundDeletion", "kubernetes")


def max_len(n):
    return f"must be no more than {n} characters"


def regex_error(msg, fmt, *examples):
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    msg += " (e.g. "
    for i, ex in enumerate(examples):
        if i > 0:
            msg += " or "
        msg += f"'{ex}', "
    return msg + f"regex used for validation is '{fmt}')"


def dns1123_label(value):
    errs = []
    if len(value) > 63:
        errs.append(max_len(63))
    if not _LABEL_RE.match(value):
        if _SUBDOMAIN_RE.match(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                                    "or '-', and must start and end with an alphanumeric character",
                                    _LABEL, "my-name", "123-abc"))
    return errs


def dns1123_subdomain(value):
    errs = []
    if len(value) > 253:
        errs.append(max_len(253))
    if not _SUBDOMAIN_RE.match(value):
        errs.append(regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                                "'-' or '.', and must start and end with an alphanumeric character",
                                _SUBDOMAIN, "example.com"))
    return errs


def dns1035_label(value):
    errs = []
    if len(value) > 63:
        errs.append(max_len(63))
    if not _DNS1035_RE.match(value):
        errs.append(regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
                                "with an alphabetic character, and end with an alphanumeric character",
                                _DNS1035, "my-name", "abc-123"))
    return errs


_QNAME_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"


def qualified_name(value):
    """IsQualifiedName: [prefix/]name, the prefix a DNS-1123 subdomain, the
    name at most 63 characters of [A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]."""
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + regex_error(_QNAME_MSG, _QNAME, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len(63))
    if not _QNAME_RE.match(name):
        errs.append("name part " + regex_error(_QNAME_MSG, _QNAME, "MyName", "my.name", "123-abc"))
    return errs


def label_value(value):
    errs = []
    if len(value) > 63:
        errs.append(max_len(63))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(regex_error("a valid label must be an empty string or consist of alphanumeric characters, "
                                "'-', '_' or '.', and must start and end with an alphanumeric character",
                                _LABEL_VALUE, "MyValue", "my_value", "12345"))
    return errs


def _mask_trailing_dash(name):
    """generic.go maskTrailingDash: a generateName may end in '-'."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-1] + "a"
    return name


def _name_fn(check):
    def fn(name, prefix):
        return check(_mask_trailing_dash(name) if prefix else name)
    return fn


NAME_IS_DNS_SUBDOMAIN = _name_fn(dns1123_subdomain)
NAME_IS_DNS_LABEL = _name_fn(dns1123_label)
NAME_IS_DNS1035_LABEL = _name_fn(dns1035_label)


def name_is_path_segment(name, prefix):
    """ValidateRBACName = path.ValidatePathSegmentName (apimachinery
    pkg/api/validation/path/name.go): any name but '.' and '..', without
    '/' or '%' (a generateName prefix only the latter)."""
    errs = []
    if not prefix and name in (".", ".."):
        errs.append(f"may not be '{name}'")
    for bad in ("/", "%"):
        if bad in name:
            errs.append(f"may not contain '{bad}'")
    return errs


RBAC_KINDS = {("rbac.authorization.k8s.io", p) for p in ("roles", "clusterroles", "rolebindings",
                                                          "clusterrolebindings")}


def name_fn(storage_key, obj):
    """The kind's ValidateNameFunc (storage_key is (group, plural))."""
    if storage_key in RBAC_KINDS:
        return name_is_path_segment
    if storage_key == ("", "namespaces"):
        return NAME_IS_DNS_LABEL
    if storage_key == ("", "services"):
        return NAME_IS_DNS1035_LABEL
    if storage_key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
        required = f"{names.get('plural', '')}.{spec.get('group', '')}"

        def crd_name(name, prefix):
            errs = NAME_IS_DNS_SUBDOMAIN(name, prefix)
            if not prefix and name != required:
                errs.append('must be spec.names.plural+"."+spec.group')
            return errs
        return crd_name
    return NAME_IS_DNS_SUBDOMAIN


def generate_name(prefix):
    """SimpleNameGenerator.GenerateName."""
    if len(prefix) > MAX_GENERATED_PREFIX:
        prefix = prefix[:MAX_GENERATED_PREFIX]
    return prefix + "".join(random.choice(_GENERATED_CHARS) for _ in range(5))


def _str_map(meta, field, errs):
    value = meta.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        errs.append(FieldError("typeinvalid", f"metadata.{field}", "must be a map of strings", value))
        return {}
    return value


def validate_labels(labels, path):
    errs = []
    for k, v in labels.items():
        errs.extend(FieldError("invalid", path, m, k) for m in qualified_name(k))
        errs.extend(FieldError("invalid", path, m, v) for m in label_value(v))
    return errs


def validate_annotations(annotations, path):
    errs = []
    for k in annotations:
        errs.extend(FieldError("invalid", path, m, k) for m in qualified_name(k.lower()))
    total = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE:
        errs.append(FieldError("toolong", path, f"may not be more than {TOTAL_ANNOTATION_SIZE} bytes"))
    return errs


def _owner_references(refs, errs):
    path = "metadata.ownerReferences"
    if refs is None:
        return
    if not isinstance(refs, list):
        errs.append(FieldError("typeinvalid", path, "must be a list", refs))
        return
    controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            errs.append(FieldError("typeinvalid", path, "must be an object", ref))
            continue
        api_version = ref.get("apiVersion") or ""
        version = api_version.rsplit("/", 1)[-1] if api_version.count("/") <= 1 else ""
        if not version:
            errs.append(FieldError("invalid", f"{path}.apiVersion", "version must not be empty", api_version))
        for field in ("kind", "name", "uid"):
            if not ref.get(field):
                errs.append(FieldError("invalid", f"{path}.{field}", "must not be empty", ref.get(field) or ""))
        if api_version == "v1" and ref.get("kind") == "Event":
            errs.append(FieldError("invalid", path, "/v1, Kind=Event is disallowed from being an owner", ref))
        if ref.get("controller") is True:
            this = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if controller:
                errs.append(FieldError("invalid", path, "Only one reference can have Controller set to true. "
                                       f'Found "true" in references for {controller} and {this}', refs))
            else:
                controller = this


def _finalizers(finalizers, errs, warnings):
    path = "metadata.finalizers"
    if finalizers is None:
        return
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        errs.append(FieldError("typeinvalid", path, "must be a list of strings", finalizers))
        return
    for f in finalizers:
        msgs = qualified_name(f)
        errs.extend(FieldError("invalid", path, m, f) for m in msgs)
        if not msgs and "/" not in f and f not in STANDARD_FINALIZERS and warnings is not None:
            warnings.append(f'metadata.finalizers: "{f}": prefer a domain-qualified finalizer name including '
                            "a path (/) to avoid accidental conflicts with other finalizer writers")
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(FieldError("invalid", path, "finalizer orphan and foregroundDeletion cannot be both set",
                               finalizers))


def _common(meta, namespaced, errs, warnings):
    ns = meta.get("namespace") or ""
    if namespaced:
        if not ns:
            errs.append(FieldError("required", "metadata.namespace", ""))
        else:
            errs.extend(FieldError("invalid", "metadata.namespace", m, ns) for m in dns1123_label(ns))
    elif ns:
        errs.append(FieldError("forbidden", "metadata.namespace", "not allowed on this type"))
    gen = meta.get("generation")
    if isinstance(gen, int) and gen < 0:
        errs.append(FieldError("invalid", "metadata.generation", "must be greater than or equal to 0", gen))
    errs.extend(validate_labels(_str_map(meta, "labels", errs), "metadata.labels"))
    errs.extend(validate_annotations(_str_map(meta, "annotations", errs), "metadata.annotations"))
    _owner_references(meta.get("ownerReferences"), errs)
    _finalizers(meta.get("finalizers"), errs, warnings)


def validate_create(storage_key, obj, namespaced, warnings=None):
    """ValidateObjectMetaAccessor after name generation; FieldErrors."""
    meta = obj.get("metadata") or {}
    errs = []
    check = name_fn(storage_key, obj)
    gen_name = meta.get("generateName") or ""
    if gen_name:
        errs.extend(FieldError("invalid", "metadata.generateName", m, gen_name) for m in check(gen_name, True))
    name = meta.get("name") or ""
    if not name:
        errs.append(FieldError("required", "metadata.name", "name or generateName is required"))
    else:
        errs.extend(FieldError("invalid", "metadata.name", m, name) for m in check(name, False))
    _common(meta, namespaced, errs, warnings)
    return errs


def prepare_update(new_meta, old_meta):
    """rest.BeforeUpdate: fields an update cannot change are put back
    before validation (a missing uid is the stored one)."""
    if not new_meta.get("uid"):
        if old_meta.get("uid"):
            new_meta["uid"] = old_meta["uid"]
    for k in ("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
        if k in old_meta:
            new_meta[k] = old_meta[k]
        else:
            new_meta.pop(k, None)


def validate_update(new, old, namespaced, warnings=None):
    """ValidateObjectMetaAccessorUpdate; FieldErrors."""
    meta = new.get("metadata") or {}
    old_meta = old.get("metadata") or {}
    errs = []
    if old_meta.get("deletionTimestamp"):
        extra = sorted(set(meta.get("finalizers") or []) - set(old_meta.get("finalizers") or []))
        if extra:
            listed = "[]string{" + ", ".join(f'"{f}"' for f in extra) + "}"
            errs.append(FieldError("forbidden", "metadata.finalizers",
                                   f"no new finalizers can be added if the object is being deleted, "
                                   f"found new finalizers {listed}"))
    for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
        if (meta.get(k) or None) != (old_meta.get(k) or None):
            errs.append(FieldError("invalid", f"metadata.{k}", "field is immutable", meta.get(k) or ""))
    errs.extend(validate_labels(_str_map(meta, "labels", errs), "metadata.labels"))
    errs.extend(validate_annotations(_str_map(meta, "annotations", errs), "metadata.annotations"))
    _owner_references(meta.get("ownerReferences"), errs)
    _finalizers(meta.get("finalizers"), errs, warnings)
    return errs


def validate_template_metadata(template, path):
    """A pod template's labels and annotations (ValidatePodTemplateSpec in
    pkg/apis/core/validation/validation.go): the same label and annotation
    rules under `PATH.metadata`."""
    meta = (template or {}).get("metadata") if isinstance(template, dict) else None
    if not isinstance(meta, dict):
        return []
    errs = []
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    errs.extend(validate_labels(labels, f"{path}.metadata.labels"))
    errs.extend(validate_annotations(annotations, f"{path}.metadata.annotations"))
    return errs
