#!/usr/bin/env python3
"""A small, stateful Kubernetes API test server.

The real `kube::Client` talks to it over plain HTTP on 127.0.0.1. It keeps the
semantics controllers rely on close to the real API server's and enforces the
upstream rules muster depends on; README.md lists every rule with its upstream
source and what is knowingly not enforced.

Run:  python3 apiserver.py [--port 0]
It prints one line `LISTENING http://127.0.0.1:PORT` on stdout when ready and
serves until killed (or until stdin closes, with --exit-on-stdin-eof).

This module holds the HTTP side, the store and the chaos mode:
- Resources: core/v1 namespaces, nodes, pods (+ binding, eviction), events,
  configmaps, secrets, services, serviceaccounts (+ token);
  rbac.authorization.k8s.io/v1 roles, clusterroles, rolebindings,
  clusterrolebindings; the create-only tokenreviews, subjectaccessreviews,
  selfsubjectaccessreviews; batch/v1 jobs; apps/v1 statefulsets;
  policy/v1
  poddisruptionbudgets; coordination.k8s.io/v1 leases; events.k8s.io/v1
  events; apiextensions.k8s.io/v1 customresourcedefinitions;
  admissionregistration.k8s.io/v1 mutatingwebhookconfigurations, whose
  webhooks are called on creates (POST) and updates (PUT) of other
  resources (admission). Creating a CRD
  registers its resource at once (served versions, scope, status
  subresource, schema).
- Discovery: /version, /api, /api/v1, /apis, /apis/GROUP/VERSION.
- Stamping: metadata.uid, creationTimestamp, resourceVersion (one global
  counter, as etcd's revision), generation (1 on create, +1 when anything but
  metadata and status changes). generateName is honoured.
- ObjectMeta validation of every kind (meta_rules); NamespaceLifecycle, the
  system namespaces and namespace deletion (namespace_lifecycle);
  DefaultTolerationSeconds (default_tolerations).
- Admission: defaulting, strategies and validation of Jobs (job_rules),
  StatefulSets (statefulset_rules), Pods
  (pod_rules), Nodes and Leases (node_lease_rules) and custom resources
  (crd_schema); 422 Invalid with field causes (apierrors).
- Stand-ins for the Job and disruption controllers and the kubelet's end of
  graceful deletion (controllers) react to every committed write.
- Optimistic concurrency: PUT and PATCH with metadata.resourceVersion in the
  body must match the stored one, else 409 Conflict. PUT without a
  resourceVersion is an unconditional update.
- Status subresource (where the resource has one): writes to the main
  resource ignore .status; writes to /status change only .status. Status is
  dropped on create, except a Node's.
- Patches: merge (RFC 7386), JSON patch (RFC 6902), strategic merge treated
  as merge (lists replaced), server-side apply simplified (fieldManager
  required, maps merged, lists replaced, missing object created, no field
  ownership).
- Delete: finalizers hold an object (deletionTimestamp set) until emptied;
  bound pods terminate gracefully; preconditions (uid, resourceVersion) are
  checked; removal cascades to dependents named by ownerReferences.
- Lists: labelSelector, fieldSelector, limit/continue paging.
- Watch: resume after resourceVersion; ADDED for current objects without
  one; 410 Expired below the retained history (--history, --watch-window);
  BOOKMARKs; timeoutSeconds; selector changes become ADDED/DELETED.
- Chaos (--chaos, --chaos-seed): random 409/429/500 answers and cut watches.
- RBAC (rbac): the RBAC kinds' rules, ClusterRole aggregation, the bootstrap
  discovery roles, TokenRequest, TokenReview, (Self)SubjectAccessReview, and
  with --authorize every request authorized by the stored RBAC objects
  (403 Forbidden otherwise) for the user of an issued bearer token or the
  x-audit-as header (plus x-audit-groups); no name, or admin, is the
  cluster admin.
"""

import argparse
import base64
import copy
import json
import os
import random
import re
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crd_schema  # noqa: E402
import job_rules  # noqa: E402
import node_lease_rules  # noqa: E402
import jobset_rules  # noqa: E402
import meta_rules  # noqa: E402
import namespace_lifecycle  # noqa: E402
import default_tolerations  # noqa: E402
import pod_rules  # noqa: E402
import rbac  # noqa: E402
import secret_rules  # noqa: E402
import statefulset_rules  # noqa: E402
from admission import Webhooks  # noqa: E402
import workload_rules  # noqa: E402
import karpenter_controller  # noqa: E402
from apierrors import ApiError, invalid  # noqa: E402
from job_rules import selector_matches  # noqa: E402
from controllers import Controllers, now_rfc3339 as _now_delta  # noqa: E402

# per-request settings the store reads (fieldValidation)
REQUEST = threading.local()


def now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def kube_version_priority(v):
    """Sort key of API versions, highest priority first, as discovery
    orders a group's versions and picks the first as preferred
    (apimachinery pkg/version/helpers.go CompareKubeAwareVersionStrings;
    apiextensions-apiserver pkg/apiserver/customresource_discovery_controller.go):
    GA before beta before alpha, a higher major first, then a higher minor;
    versions that are not kube-like after all of them, alphabetically."""
    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", v)
    if not m:
        return (1, 0, 0, 0, v)
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (0, stage, -int(m.group(1)), -int(m.group(3) or 0), v)


class Resource:
    """One served resource: group, version, plural, kind, scope, subresources."""

    def __init__(self, group, version, plural, kind, namespaced, status=False, singular=None, short=None):
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.status = status
        self.singular = singular or kind.lower()
        self.short = short or []
        self.crd = None  # crd_schema.CrdVersion for custom resources
        self.create_only = False  # a review: POST only, nothing stored

    @property
    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self):
        # Objects are stored once per group/plural, whatever the version asked.
        return (self.group, self.plural)


BUILTINS = [
    Resource("", "v1", "namespaces", "Namespace", False, status=True),
    Resource("", "v1", "nodes", "Node", False, status=True),
    Resource("", "v1", "pods", "Pod", True, status=True),
    Resource("", "v1", "events", "Event", True),
    Resource("", "v1", "configmaps", "ConfigMap", True),
    Resource("", "v1", "secrets", "Secret", True),
    Resource("", "v1", "services", "Service", True, status=True),
    Resource("batch", "v1", "jobs", "Job", True, status=True),
    Resource("apps", "v1", "statefulsets", "StatefulSet", True, status=True, short=["sts"]),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, status=True),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("events.k8s.io", "v1", "events", "Event", True),
    Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, status=True),
    Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
             "MutatingWebhookConfiguration", False),
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, short=["sa"]),
    Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
]


def _review(group, plural, kind, namespaced=False):
    r = Resource(group, "v1", plural, kind, namespaced)
    r.create_only = True
    return r


# create-only reviews (rbac.py): nothing is stored
BUILTINS += [
    _review("authentication.k8s.io", "tokenreviews", "TokenReview"),
    _review("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview"),
    _review("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
]


# ---------------------------------------------------------------- selectors

def parse_label_selector(text):
    """Returns a list of predicates over a label dict."""
    preds = []
    if not text:
        return preds
    # split on commas that are not inside parentheses
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for raw in parts:
        p = raw.strip()
        if not p:
            continue
        m = re.fullmatch(r"([^\s!=]+)\s+(in|notin)\s+\((.*)\)", p)
        if m:
            key, op, vals = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                preds.append(lambda l, k=key, vs=vals: k in l and l[k] in vs)
            else:
                preds.append(lambda l, k=key, vs=vals: k not in l or l[k] not in vs)
            continue
        m = re.fullmatch(r"([^\s!=]+)\s*(==|=|!=)\s*([^\s]*)", p)
        if m:
            key, op, val = m.groups()
            if op == "!=":
                preds.append(lambda l, k=key, v=val: l.get(k) != v)
            else:
                preds.append(lambda l, k=key, v=val: l.get(k) == v)
            continue
        m = re.fullmatch(r"!\s*([^\s!=]+)", p)
        if m:
            preds.append(lambda l, k=m.group(1): k not in l)
            continue
        if re.fullmatch(r"[^\s!=(),]+", p):
            preds.append(lambda l, k=p: k in l)
            continue
        raise ApiError(400, "BadRequest", f"unable to parse requirement: {p!r}")
    return preds


def dotted(obj, path):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def parse_field_selector(text):
    preds = []
    if not text:
        return preds
    for raw in text.split(","):
        p = raw.strip()
        if not p:
            continue
        m = re.fullmatch(r"([^\s!=]+)\s*(==|=|!=)\s*(.*)", p)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid field selector: {p!r}")
        path, op, val = m.groups()
        if op == "!=":
            preds.append(lambda o, pa=path, v=val: dotted(o, pa) != v)
        else:
            preds.append(lambda o, pa=path, v=val: dotted(o, pa) == v)
    return preds


# ---------------------------------------------------------------- patches

def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def apply_merge(target, applied):
    """Simplified server-side apply: maps merge, everything else replaces."""
    if not isinstance(applied, dict) or not isinstance(target, dict):
        return copy.deepcopy(applied)
    result = copy.deepcopy(target)
    for k, v in applied.items():
        result[k] = apply_merge(result.get(k), v)
    return result


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, "Invalid", f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc, tokens):
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, list):
            try:
                cur = cur[int(t)]
            except (ValueError, IndexError):
                raise ApiError(422, "Invalid", f"path element {t!r} not found")
        elif isinstance(cur, dict) and t in cur:
            cur = cur[t]
        else:
            raise ApiError(422, "Invalid", f"path element {t!r} not found")
    return cur


def _get(doc, tokens):
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, list):
        try:
            return parent[int(last)]
        except (ValueError, IndexError):
            raise ApiError(422, "Invalid", f"index {last!r} not found")
    if not isinstance(parent, dict) or last not in parent:
        raise ApiError(422, "Invalid", f"key {last!r} not found")
    return parent[last]


def _remove(doc, tokens):
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, list):
        try:
            return parent.pop(int(last))
        except (ValueError, IndexError):
            raise ApiError(422, "Invalid", f"index {last!r} not found")
    if not isinstance(parent, dict) or last not in parent:
        raise ApiError(422, "Invalid", f"key {last!r} not found")
    return parent.pop(last)


def _add(doc, tokens, value, replace=False):
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
            return doc
        try:
            i = int(last)
        except ValueError:
            raise ApiError(422, "Invalid", f"bad index {last!r}")
        if replace:
            if not 0 <= i < len(parent):
                raise ApiError(422, "Invalid", f"index {i} out of range")
            parent[i] = value
        else:
            if not 0 <= i <= len(parent):
                raise ApiError(422, "Invalid", f"index {i} out of range")
            parent.insert(i, value)
    elif isinstance(parent, dict):
        if replace and last not in parent:
            raise ApiError(422, "Invalid", f"key {last!r} not found")
        parent[last] = value
    else:
        raise ApiError(422, "Invalid", "cannot add to a scalar")
    return doc


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        kind = op.get("op")
        path = _pointer(op.get("path", ""))
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=True)
        elif kind == "move":
            value = _remove(doc, _pointer(op.get("from", "")))
            doc = _add(doc, path, value)
        elif kind == "copy":
            value = copy.deepcopy(_get(doc, _pointer(op.get("from", ""))))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise ApiError(422, "Invalid", f"test operation failed at {op.get('path')}")
        else:
            raise ApiError(400, "BadRequest", f"unknown JSON patch operation {kind!r}")
    return doc


# ---------------------------------------------------------------- store

class Store:
    def __init__(self, history, watch_window=None, pod_termination_secs=0.5):
        self.cond = threading.Condition()
        self.rv = 0
        self.resources = {}  # (group, version, plural) -> Resource
        self.objects = {}  # (group, plural) -> {(ns, name): obj}
        self.log = []  # (rv, type, storage_key, obj, monotonic time)
        self.history = history
        self.watch_window = watch_window  # seconds of history kept; watches last no longer
        self.oldest = 0  # the oldest revision a watch may resume from
        for r in BUILTINS:
            self.register(r)
        self.controllers = Controllers(self, pod_termination_secs)
        namespaces = self.find("", "v1", "namespaces")
        for name in namespace_lifecycle.SYSTEM_NAMESPACES:
            self.create(namespaces, None, {"metadata": {"name": name}})
        # the bootstrap RBAC policy (rbac.bootstrap_objects)
        for plural, obj in rbac.bootstrap_objects():
            self.create(self.find(rbac.GROUP, "v1", plural), None, obj)
        # the system namespaces are a starting state, not watch history
        self.log.clear()
        self.oldest = self.rv

    def register(self, r):
        self.resources[(r.group, r.version, r.plural)] = r
        self.objects.setdefault(r.storage_key, {})

    def find(self, group, version, plural):
        r = self.resources.get((group, version, plural))
        if r is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({group}/{version} {plural})")
        return r

    def _bump(self):
        self.rv += 1
        return str(self.rv)

    def _emit(self, etype, r, obj):
        self.log.append((self.rv, etype, r.storage_key, copy.deepcopy(obj), time.monotonic()))
        self.compact()
        self.cond.notify_all()
        self.controllers.on_write(r, obj)

    def compact(self):
        """Drops history beyond --history events or older than --watch-window."""
        drop = max(0, len(self.log) - self.history)
        if self.watch_window is not None:
            horizon = time.monotonic() - self.watch_window
            while drop < len(self.log) and self.log[drop][4] < horizon:
                drop += 1
        if drop:
            self.oldest = self.log[drop - 1][0]
            del self.log[:drop]

    def _not_found(self, r, name):
        return ApiError(404, "NotFound", f'{r.plural}{"." + r.group if r.group else ""} "{name}" not found',
                        {"name": name, "group": r.group, "kind": r.plural})

    def _stamp_kind(self, r, obj):
        obj["apiVersion"] = r.api_version
        obj["kind"] = r.kind
        return obj

    # -- reads

    def get(self, r, ns, name):
        with self.cond:
            obj = self.objects[r.storage_key].get((ns, name))
            if obj is None:
                raise self._not_found(r, name)
            return self._stamp_kind(r, copy.deepcopy(obj))

    def list(self, r, ns, label_preds, field_preds, limit=0, cont=""):
        after, rv = None, None
        if cont:
            try:
                token = json.loads(base64.urlsafe_b64decode(cont.encode()).decode())
                after, rv = tuple(token["after"]), token["rv"]
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "BadRequest", "continue: malformed token")
        with self.cond:
            items = []
            more = False
            last = None
            for key, obj in sorted(self.objects[r.storage_key].items()):
                if after is not None and key <= after:
                    continue
                if ns is not None and key[0] != ns:
                    continue
                if matches(obj, label_preds, field_preds):
                    if limit and len(items) == limit:
                        more = True
                        break
                    items.append(self._stamp_kind(r, copy.deepcopy(obj)))
                    last = key
            meta = {"resourceVersion": str(rv if rv is not None else self.rv)}
            if more:
                meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                    {"after": list(last), "rv": rv if rv is not None else self.rv}).encode()).decode()
            return {
                "kind": r.kind + "List",
                "apiVersion": r.api_version,
                "metadata": meta,
                "items": items,
            }

    # -- writes

    def create(self, r, ns, body):
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "body must be an object")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        with self.cond:
            if r.namespaced:
                if meta.get("namespace") not in (None, "", ns):
                    raise ApiError(400, "BadRequest", "the namespace of the object does not match the namespace of the request")
                meta["namespace"] = ns
            else:
                meta.pop("namespace", None)
            namespace_lifecycle.admit(self.objects[("", "namespaces")], r, ns, "CREATE", meta.get("name"))
            name = meta.get("name")
            if not name and isinstance(meta.get("generateName"), str) and meta.get("generateName"):
                name = meta_rules.generate_name(meta["generateName"])
                meta["name"] = name
            if r.status and r.storage_key != ("", "nodes"):
                # Nodes keep a status given on create (the node strategy's PrepareForCreate)
                obj.pop("status", None)
            for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
                meta.pop(k, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            self._stamp_kind(r, obj)
            errs = meta_rules.validate_create(r.storage_key, obj, r.namespaced, getattr(REQUEST, "warnings", None))
            if errs:
                raise invalid(r.kind, r.group, name or "", errs)
            obj = self._admit_create(r, obj)
            meta = obj["metadata"]
            # validation comes before the storage's own refusal (BeforeCreate, then Create)
            key = (meta.get("namespace", ""), name)
            if key in self.objects[r.storage_key]:
                raise ApiError(409, "AlreadyExists", f'{r.plural} "{name}" already exists',
                               {"name": name, "group": r.group, "kind": r.plural})
            meta["resourceVersion"] = self._bump()
            if r.plural == "customresourcedefinitions":
                self._register_crd(obj)
            self.objects[r.storage_key][key] = obj
            self._emit("ADDED", r, obj)
            return copy.deepcopy(obj)

    def update(self, r, ns, name, new, subresource, check_rv=True, create_missing=False):
        """Stores `new` as the next state of the object (PUT, PATCH, apply)."""
        with self.cond:
            key = (ns if r.namespaced else "", name)
            old = self.objects[r.storage_key].get(key)
            if old is None:
                if create_missing and subresource is None:
                    return self.create(r, ns, new), True
                raise self._not_found(r, name)
            if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
                raise ApiError(400, "BadRequest", "body must be an object with object metadata")
            new_meta = new.get("metadata") or {}
            if new_meta.get("name") not in (None, name):
                raise ApiError(400, "BadRequest", "the name of the object does not match the name in the URL")
            sent_rv = new_meta.get("resourceVersion")
            if check_rv and sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict",
                               f'Operation cannot be fulfilled on {r.plural} "{name}": the object has been modified; '
                               "please apply your changes to the latest version and try again",
                               {"name": name, "group": r.group, "kind": r.plural})
            if subresource == "status":
                merged = copy.deepcopy(old)
                if "status" in new:
                    merged["status"] = copy.deepcopy(new["status"])
                else:
                    merged.pop("status", None)
            else:
                merged = copy.deepcopy(new)
                if r.status:
                    if "status" in old:
                        merged["status"] = copy.deepcopy(old["status"])
                    else:
                        merged.pop("status", None)
                meta = merged.setdefault("metadata", {})
                if r.namespaced:
                    if meta.get("namespace") not in (None, "", ns):
                        raise ApiError(400, "BadRequest", "the namespace of the provided object does not match "
                                       "the namespace sent on the request")
                    meta["namespace"] = ns
                else:
                    meta.pop("namespace", None)
                meta["name"] = name
                # rest.BeforeUpdate: what an update cannot change is put back
                meta_rules.prepare_update(meta, old["metadata"])
                errs = meta_rules.validate_update(merged, old, r.namespaced, getattr(REQUEST, "warnings", None))
                if errs:
                    raise invalid(r.kind, r.group, name, errs)
            merged["metadata"].pop("managedFields", None)
            self._stamp_kind(r, merged)
            merged = self._admit_update(r, merged, old, subresource)
            if spec_of(merged) != spec_of(old):
                merged["metadata"]["generation"] = int(old["metadata"].get("generation", 1)) + 1
            if strip_rv(merged) == strip_rv(old):
                return copy.deepcopy(old), False  # no-op writes do not bump the revision
            merged["metadata"]["resourceVersion"] = self._bump()
            if (merged["metadata"].get("deletionTimestamp") and not merged["metadata"].get("finalizers")
                    and not merged["metadata"].get("deletionGracePeriodSeconds")
                    and (r.storage_key != ("", "namespaces") or namespace_lifecycle.finalized(merged))):
                self._remove(r, key, merged)
                return copy.deepcopy(merged), False
            if r.plural == "customresourcedefinitions":
                self._register_crd(merged)
            self.objects[r.storage_key][key] = merged
            self._emit("MODIFIED", r, merged)
            return copy.deepcopy(merged), False

    def delete(self, r, ns, name, options):
        with self.cond:
            key = (ns if r.namespaced else "", name)
            obj = self.objects[r.storage_key].get(key)
            if obj is None:
                raise self._not_found(r, name)
            pre = (options or {}).get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
                raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {obj['metadata']['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "Precondition failed: resourceVersion does not match")
            if r.storage_key == ("", "namespaces"):
                return self._delete_namespace(r, key, obj)
            grace = pod_rules.grace_period(obj, options) if r.storage_key == ("", "pods") else 0
            if grace > 0:
                return self._graceful_delete(r, key, obj, grace)
            if obj["metadata"].get("finalizers"):
                if not obj["metadata"].get("deletionTimestamp") or obj["metadata"].get("deletionGracePeriodSeconds"):
                    obj = copy.deepcopy(obj)
                    obj["metadata"].setdefault("deletionTimestamp", now_rfc3339())
                    obj["metadata"]["deletionGracePeriodSeconds"] = 0
                    obj["metadata"]["resourceVersion"] = self._bump()
                    self.objects[r.storage_key][key] = obj
                    self._emit("MODIFIED", r, obj)
                return self._stamp_kind(r, copy.deepcopy(obj))
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = self._bump()
            self._remove(r, key, obj)
            return self._stamp_kind(r, obj)

    def _delete_namespace(self, r, key, obj):
        """A Namespace goes Terminating; the namespace controller stand-in
        deletes its content and finalizes it (namespace_lifecycle)."""
        namespace_lifecycle.check_delete(key[1])
        if not obj["metadata"].get("deletionTimestamp"):
            obj = copy.deepcopy(obj)
            obj["metadata"]["deletionTimestamp"] = now_rfc3339()
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            obj.setdefault("status", {})["phase"] = "Terminating"
            obj["metadata"]["resourceVersion"] = self._bump()
            self.objects[r.storage_key][key] = obj
            self._emit("MODIFIED", r, obj)
            for res in self._kinds():
                if not res.namespaced:
                    continue
                for okey in [k for k in self.objects[res.storage_key] if k[0] == key[1]]:
                    try:
                        self.delete(res, okey[0], okey[1], None)
                    except ApiError:
                        pass
            self._finish_namespace(key[1])
        return self._stamp_kind(r, copy.deepcopy(self.objects[r.storage_key].get(key, obj)))

    def _kinds(self):
        """One Resource per stored kind."""
        return list({x.storage_key: x for x in self.resources.values()}.values())

    def _finish_namespace(self, name):
        """The namespace controller's finalize step, once a Terminating
        namespace holds nothing: the `kubernetes` spec finalizer goes, and
        the Namespace with it unless metadata.finalizers hold it."""
        r = self.find("", "v1", "namespaces")
        ns = self.objects[r.storage_key].get(("", name))
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if any(k[0] == name for res in self._kinds() if res.namespaced for k in self.objects[res.storage_key]):
            return
        ns = copy.deepcopy(ns)
        spec = ns.setdefault("spec", {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != namespace_lifecycle.FINALIZER]
        if not spec["finalizers"]:
            spec.pop("finalizers")
        ns["metadata"]["resourceVersion"] = self._bump()
        if namespace_lifecycle.finalized(ns):
            self._remove(r, ("", name), ns)
        else:
            self.objects[r.storage_key][("", name)] = ns
            self._emit("MODIFIED", r, ns)

    def _graceful_delete(self, r, key, obj, grace):
        """A bound pod: deletionTimestamp = now + grace; the kubelet stand-in
        removes it later (a shorter grace period in a later delete wins)."""
        meta = obj["metadata"]
        current = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and current is not None and current <= grace:
            return self._stamp_kind(r, copy.deepcopy(obj))
        obj = copy.deepcopy(obj)
        obj["metadata"]["deletionTimestamp"] = _now_delta(grace)
        obj["metadata"]["deletionGracePeriodSeconds"] = grace
        obj["metadata"]["resourceVersion"] = self._bump()
        self.objects[r.storage_key][key] = obj
        self._emit("MODIFIED", r, obj)
        self.controllers.schedule_termination(key[0], key[1], obj["metadata"]["uid"], grace)
        return self._stamp_kind(r, copy.deepcopy(obj))

    def finish_graceful_delete(self, r, ns, name):
        """The kubelet's final delete with grace 0 (finalizers still hold it)."""
        with self.cond:
            obj = self.objects[r.storage_key].get((ns, name))
            if obj is None:
                return
            self.delete(r, ns, name, {"gracePeriodSeconds": 0})

    def bind(self, ns, name, binding):
        """pods/binding: the scheduler's way to set spec.nodeName."""
        with self.cond:
            pods = self.find("", "v1", "pods")
            pod = self.objects[pods.storage_key].get((ns, name))
            if pod is None:
                raise self._not_found(pods, name)
            new = pod_rules.bind(pod, binding)
            new["metadata"]["resourceVersion"] = self._bump()
            self.objects[pods.storage_key][(ns, name)] = new
            self._emit("MODIFIED", pods, new)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201, "metadata": {}}

    def evict(self, ns, name, eviction):
        """policy/v1 Eviction as pkg/registry/core/pod/storage/eviction.go
        judges it: by the status the disruption controller keeps on the one
        PodDisruptionBudget matching the pod (more than one is a 500); a
        pod that is Pending, finished or being deleted may always go; an
        unready pod may go under AlwaysAllow, or under IfHealthyBudget (the
        default) while currentHealthy >= desiredHealthy > 0; otherwise a
        disruption must be allowed (0 is 429 TooManyRequests with a
        DisruptionBudget cause), and the eviction spends it: the pod goes
        into status.disruptedPods and disruptionsAllowed drops by one."""
        with self.cond:
            pods = self.find("", "v1", "pods")
            pod = self.objects[pods.storage_key].get((ns, name))
            if pod is None:
                raise self._not_found(pods, name)
            options = (eviction or {}).get("deleteOptions")
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
                self.delete(pods, ns, name, options)
                return _success()
            pdbs = self.find("policy", "v1", "poddisruptionbudgets")
            labels = pod["metadata"].get("labels") or {}
            matching = [p for (pns, _), p in self.objects[pdbs.storage_key].items()
                        if pns == ns and selector_matches((p.get("spec") or {}).get("selector"), labels)]
            if len(matching) > 1:
                raise ApiError(500, "InternalError",
                               "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
            if matching:
                pdb = matching[0]
                st = pdb.get("status") or {}
                pname = pdb["metadata"]["name"]
                refused = "Cannot evict pod as it would violate the pod's disruption budget."
                if st.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
                    raise ApiError(429, "TooManyRequests", refused, {"causes": [{
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {pname} is still being processed by the server."}]})
                policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
                ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                            for c in (pod.get("status") or {}).get("conditions") or [])
                if not ready and (policy == "AlwaysAllow" or (
                        st.get("currentHealthy", 0) >= st.get("desiredHealthy", 0) > 0)):
                    self.delete(pods, ns, name, options)
                    return _success()
                allowed = st.get("disruptionsAllowed", 0)
                if allowed < 0:
                    raise ApiError(403, "Forbidden", "pdb disruptions allowed is negative")
                if allowed == 0:
                    raise ApiError(429, "TooManyRequests", refused, {"causes": [{
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {pname} needs {st.get('desiredHealthy', 0)} healthy pods "
                                   f"and has {st.get('currentHealthy', 0)} currently"}]})
                new = copy.deepcopy(pdb)
                new["status"]["disruptionsAllowed"] = allowed - 1
                new["status"].setdefault("disruptedPods", {})[name] = now_rfc3339()
                self.update(pdbs, ns, pname, new, "status", check_rv=False)
            self.delete(pods, ns, name, options)
            return _success()

    def _remove(self, r, key, obj):
        self.objects[r.storage_key].pop(key, None)
        self._emit("DELETED", r, obj)
        uid = obj["metadata"].get("uid")
        # background garbage collection of dependents
        for res in self._kinds():
            for dkey, dep in list(self.objects[res.storage_key].items()):
                refs = dep.get("metadata", {}).get("ownerReferences") or []
                if any(ref.get("uid") == uid for ref in refs):
                    try:
                        self.delete(res, dkey[0], dkey[1], None)
                    except ApiError:
                        pass
        if r.namespaced and key[0]:
            self._finish_namespace(key[0])

    def _register_crd(self, crd):
        spec = crd.get("spec") or {}
        group = spec.get("group", "")
        names = spec.get("names") or {}
        namespaced = spec.get("scope") == "Namespaced"
        for v in spec.get("versions") or []:
            if not v.get("served", True):
                continue
            status = "status" in ((v.get("subresources") or {}))
            res = Resource(group, v.get("name"), names.get("plural"), names.get("kind"), namespaced,
                           status=status, singular=names.get("singular"), short=names.get("shortNames"))
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            if schema:
                res.crd = crd_schema.CrdVersion(names.get("kind"), group, schema)
            self.register(res)

    # -- admission: defaulting, strategies and validation

    def _schema(self, r):
        """The CRD schema of a custom resource (any served version's; one
        storage shape is assumed)."""
        if r.crd is not None:
            return r.crd
        for res in self.resources.values():
            if res.storage_key == r.storage_key and res.crd is not None:
                return res.crd
        return None

    def _admit_create(self, r, obj):
        name = obj["metadata"]["name"]
        if r.storage_key == ("", "namespaces"):
            _label_namespace(obj)
            namespace_lifecycle.prepare_create(obj)
        if r.storage_key == ("batch", "jobs"):
            job_rules.default_job(obj)
            job_rules.prepare_create(obj)
            errs = job_rules.validate_spec(obj)
            errs += meta_rules.validate_template_metadata((obj.get("spec") or {}).get("template"), "spec.template")
            if errs:
                raise invalid("Job", "batch", name, errs)
        elif r.storage_key == ("apps", "statefulsets"):
            statefulset_rules.default_statefulset(obj)
            errs = statefulset_rules.validate_spec(obj)
            errs += meta_rules.validate_template_metadata((obj.get("spec") or {}).get("template"), "spec.template")
            if errs:
                raise invalid("StatefulSet", "apps", name, errs)
        elif r.storage_key == ("", "pods"):
            default_tolerations.admit(obj)
            pod_rules.prepare_create(obj)
            errs = job_rules.node_affinity_errors(obj.get("spec"), "spec")
            if errs:
                raise invalid("Pod", "", name, errs)
        elif r.storage_key == ("coordination.k8s.io", "leases"):
            errs = node_lease_rules.validate_lease(obj)
            if errs:
                raise invalid("Lease", "coordination.k8s.io", name, errs)
        elif r.storage_key == ("", "secrets"):
            secret_rules.prepare(obj)
            errs = secret_rules.validate(obj)
            if errs:
                raise invalid("Secret", "", name, errs)
        elif r.storage_key in rbac.KINDS:
            rbac.admit(r.storage_key, obj)
        schema = self._schema(r)
        if schema is not None:
            obj = schema.admit(obj, None, getattr(REQUEST, "strict", False))
            _warn_pruned(schema.pruned)
        return workload_rules.admit(self, r.storage_key, obj, None, None)

    def _admit_update(self, r, new, old, subresource):
        name = old["metadata"]["name"]
        if r.storage_key == ("", "namespaces") and subresource is None:
            _label_namespace(new)
            namespace_lifecycle.prepare_update(new, old)
        if r.storage_key == ("batch", "jobs"):
            if subresource == "status":
                errs = job_rules.validate_status_update(new, old)
            else:
                job_rules.default_job(new)
                errs = job_rules.validate_update(new, old)
                errs += meta_rules.validate_template_metadata((new.get("spec") or {}).get("template"),
                                                              "spec.template")
            if errs:
                raise invalid("Job", "batch", name, errs)
        elif r.storage_key == ("apps", "statefulsets") and subresource != "status":
            statefulset_rules.default_statefulset(new)
            errs = statefulset_rules.validate_update(new, old)
            errs += meta_rules.validate_template_metadata((new.get("spec") or {}).get("template"), "spec.template")
            if errs:
                raise invalid("StatefulSet", "apps", name, errs)
        elif r.storage_key == ("jobset.x-k8s.io", "jobsets") and subresource != "status":
            errs = jobset_rules.validate_update(new, old)
            if errs:
                raise invalid("JobSet", "jobset.x-k8s.io", name, errs)
        elif r.storage_key == ("", "pods") and subresource != "status":
            default_tolerations.admit(new)
            errs = pod_rules.validate_update(new, old)
            if errs:
                raise invalid("Pod", "", name, errs)
        elif r.storage_key == ("", "nodes") and subresource != "status":
            errs = node_lease_rules.validate_node_update(new, old)
            if errs:
                raise invalid("Node", "", name, errs)
        elif r.storage_key == ("coordination.k8s.io", "leases"):
            errs = node_lease_rules.validate_lease(new)
            if errs:
                raise invalid("Lease", "coordination.k8s.io", name, errs)
        elif r.storage_key == ("", "secrets"):
            secret_rules.prepare(new)
            errs = secret_rules.validate_update(new, old)
            if errs:
                raise invalid("Secret", "", name, errs)
        elif r.storage_key in rbac.KINDS:
            rbac.admit(r.storage_key, new, old)
        schema = self._schema(r)
        if schema is not None:
            new = schema.admit(new, old, getattr(REQUEST, "strict", False))
            _warn_pruned(schema.pruned)
        return workload_rules.admit(self, r.storage_key, new, old, subresource)

    # -- watch

    def watch_from(self, r, ns, since, label_preds, field_preds, send, deadline, bookmarks, bookmark_secs):
        """Streams events to `send` until the deadline or a send failure.

        Events are gathered under the lock and written without it, so a slow
        client never stalls the server.
        """
        out = []
        with self.cond:
            if since is None:
                for (ons, _), obj in sorted(self.objects[r.storage_key].items()):
                    if (ns is None or ons == ns) and matches(obj, label_preds, field_preds):
                        out.append({"type": "ADDED", "object": self._stamp_kind(r, copy.deepcopy(obj))})
                cursor = self.rv
            else:
                self.compact()
                if since < self.oldest:
                    send({"type": "ERROR", "object": ApiError(
                        410, "Expired", f"too old resource version: {since} ({self.oldest})").status()})
                    return
                cursor = since
            # which objects the client currently sees, to turn selector changes into ADDED/DELETED
            visible = {key for key, obj in self.objects[r.storage_key].items()
                       if (ns is None or key[0] == ns) and matches(obj, label_preds, field_preds)}
        for e in out:
            send(e)
        last_sent = time.monotonic()
        while True:
            out = []
            with self.cond:
                for (erv, etype, skey, obj, _) in self.log:
                    if erv <= cursor or skey != r.storage_key:
                        continue
                    cursor = erv
                    meta = obj.get("metadata", {})
                    okey = (meta.get("namespace", ""), meta.get("name"))
                    if ns is not None and okey[0] != ns:
                        continue
                    now_match = matches(obj, label_preds, field_preds)
                    was = okey in visible
                    kind = None
                    if etype == "DELETED":
                        kind = "DELETED" if (was or now_match) else None
                        visible.discard(okey)
                    elif now_match:
                        kind = "MODIFIED" if (was and etype != "ADDED") else "ADDED"
                        visible.add(okey)
                    elif was:
                        kind = "DELETED"
                        visible.discard(okey)
                    if kind:
                        out.append({"type": kind, "object": self._stamp_kind(r, copy.deepcopy(obj))})
                cursor = max(cursor, self.rv)
                now = time.monotonic()
                if not out and now < deadline:
                    if bookmarks and now - last_sent >= bookmark_secs:
                        out.append({"type": "BOOKMARK", "object": {
                            "kind": r.kind, "apiVersion": r.api_version,
                            "metadata": {"resourceVersion": str(self.rv)}}})
                    else:
                        self.cond.wait(timeout=max(0.01, min(deadline - now, bookmark_secs)))
                        continue
            for e in out:
                send(e)
            last_sent = time.monotonic()
            if time.monotonic() >= deadline:
                return


def _label_namespace(ns):
    """Every Namespace carries `kubernetes.io/metadata.name: NAME`
    (pkg/apis/core/v1/defaults.go SetDefaults_Namespace)."""
    meta = ns.setdefault("metadata", {})
    labels = meta.get("labels")
    if not isinstance(labels, dict):
        labels = meta["labels"] = {}
    labels["kubernetes.io/metadata.name"] = meta.get("name")


def _warn_pruned(paths):
    """fieldValidation=Warn (the default): each dropped field is a Warning header."""
    if paths and hasattr(REQUEST, "warnings"):
        REQUEST.warnings.extend(f'299 - "unknown field \\"{p}\\""' for p in paths)


def _success():
    return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201, "metadata": {}}


def spec_of(obj):
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def strip_rv(obj):
    o = copy.deepcopy(obj)
    o.get("metadata", {}).pop("resourceVersion", None)
    return o


def matches(obj, label_preds, field_preds):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(p(labels) for p in label_preds) and all(p(obj) for p in field_preds)


# ---------------------------------------------------------------- HTTP

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "muster-kube-api-test/1"
    store = None
    chaos = None
    webhooks = None
    log_errors = False
    bookmark_secs = 1.0
    audit = None
    audit_level = "Metadata"
    audit_lock = threading.Lock()
    authorize = False  # --authorize: the RBAC authorizer (rbac.py) on every request
    tokens = rbac.Tokens()

    def log_message(self, fmt, *args):  # quiet unless asked
        if self.server.verbose:
            sys.stderr.write("apiserver: " + fmt % args + "\n")

    # -- plumbing

    def _body(self):
        if self.body_read:
            return self.body_bytes
        self.body_read = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(n) if n else b""
        self.body_bytes = data
        return data

    def _json_body(self, ctype=None):
        raw = self._body()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            if ctype and "yaml" in ctype:
                try:
                    import yaml  # optional
                    return yaml.safe_load(raw)
                except Exception:
                    pass
            raise ApiError(400, "BadRequest", "request body is not valid JSON")

    def _send(self, code, obj, headers=None):
        self._audit_write(code)
        data = json.dumps(obj).encode()
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        for w in getattr(REQUEST, "warnings", None) or []:
            self.send_header("Warning", w)
            if self.log_errors:
                sys.stderr.write(f"apiserver: {self.command} {self.path} -> warning {w}\n")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, e):
        if self.log_errors and e.code != 404:
            sys.stderr.write(f"apiserver: {self.command} {self.path} -> {e.code} {e.reason}: {e.message}\n")
        self._send(e.code, e.status(), e.headers)

    # -- routing

    def _route(self):
        """Returns (resource, namespace, name, subresource) or a discovery doc."""
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if parts == ["version"]:
            return ("doc", {"major": "1", "minor": "33", "gitVersion": "v1.33.0-muster-test", "platform": "linux/amd64"})
        if parts == ["api"]:
            return ("doc", {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        if parts == ["apis"]:
            return ("doc", self._group_list())
        if parts and parts[0] == "api":
            group, rest = "", parts[1:]
        elif parts and parts[0] == "apis" and len(parts) >= 2:
            group, rest = parts[1], parts[2:]
            if not rest:
                return ("doc", self._group(group))
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        version, rest = rest[0], rest[1:]
        if not rest:
            return ("doc", self._resource_list(group, version))
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        self._audit(group, plural, name, sub, ns)
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        r = self.store.find(group, version, plural)
        if r.namespaced and name is not None and ns is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not r.namespaced:
            ns = None
        if sub in ("eviction", "binding") and r.group == "" and r.plural == "pods":
            return ("res", r, ns, name, sub)
        if sub == "token" and r.storage_key == rbac.SERVICE_ACCOUNTS:
            return ("res", r, ns, name, sub)
        if sub is not None and not (sub == "status" and r.status):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({sub})")
        return ("res", r, ns, name, sub)

    def _audit(self, group, plural, name, sub, ns):
        """With --audit-log: one JSON line per resource request, in RBAC terms."""
        if Handler.audit is None:
            return
        method = self.command
        if method == "GET":
            watch = self._query().get("watch") in ("true", "1")
            verb = "get" if name is not None else ("watch" if watch else "list")
            if name is None:
                # a list or watch names the object of its metadata.name field
                # selector (apiserver endpoints/request/requestinfo.go)
                for part in (self._query().get("fieldSelector") or "").split(","):
                    key, eq, value = part.partition("=")
                    if eq and key.strip() == "metadata.name":
                        name = value.lstrip("=").strip()
        elif method == "DELETE":
            verb = "delete" if name is not None else "deletecollection"
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())
        record = {"ts": time.time(), "client": self.headers.get("x-audit-as", ""),
                  "userAgent": self.headers.get("User-Agent", ""),
                  "verb": verb, "apiGroup": group, "resource": plural,
                  "subresource": sub or "", "namespace": ns or "",
                  "name": name or ""}
        if Handler.audit_level == "Request" and method in ("POST", "PUT", "PATCH"):
            # level Request logs the request body as `requestObject`
            # (k8s.io/apiserver pkg/apis/audit/types.go, LevelRequest)
            try:
                record["requestObject"] = json.loads(self._body() or b"null")
            except ValueError:
                record["requestObject"] = None
        if verb == "watch":
            # a watch is logged when its response starts (stage
            # ResponseStarted), without a responseStatus
            self._audit_line(record)
        else:
            self._audit_pending = record

    def _audit_write(self, code):
        """Writes the pending audit line of this request, at stage
        ResponseComplete with its `responseStatus.code` (as in
        k8s.io/apiserver pkg/apis/audit/types.go, Event.ResponseStatus)."""
        record, self._audit_pending = getattr(self, "_audit_pending", None), None
        if record is not None:
            record["responseStatus"] = {"code": code}
            self._audit_line(record)

    def _audit_line(self, record):
        line = json.dumps(record)
        with Handler.audit_lock:
            Handler.audit.write(line + "\n")
            Handler.audit.flush()

    def _group_list(self):
        groups = {}
        for (g, v, _), _r in self.store.resources.items():
            if g:
                groups.setdefault(g, set()).add(v)
        out = []
        for g, vs in sorted(groups.items()):
            vl = [{"groupVersion": f"{g}/{v}", "version": v} for v in sorted(vs, key=kube_version_priority)]
            out.append({"name": g, "versions": vl, "preferredVersion": vl[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}

    def _group(self, group):
        for g in self._group_list()["groups"]:
            if g["name"] == group:
                return dict(g, kind="APIGroup", apiVersion="v1")
        raise ApiError(404, "NotFound", f"group {group} not found")

    def _resource_list(self, group, version):
        res = []
        for (g, v, plural), r in sorted(self.store.resources.items()):
            if g == group and v == version:
                verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
                if r.create_only:
                    verbs = ["create"]
                res.append({"name": plural, "singularName": r.singular, "namespaced": r.namespaced,
                            "kind": r.kind, "verbs": verbs, "shortNames": r.short or []})
                if r.storage_key == rbac.SERVICE_ACCOUNTS:
                    res.append({"name": plural + "/token", "singularName": "", "namespaced": True,
                                "group": "authentication.k8s.io", "version": "v1",
                                "kind": "TokenRequest", "verbs": ["create"]})
                if r.status:
                    res.append({"name": plural + "/status", "singularName": "", "namespaced": r.namespaced,
                                "kind": r.kind, "verbs": ["get", "patch", "update"]})
        if not res:
            raise ApiError(404, "NotFound", f"{group}/{version} not found")
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": res}

    def _query(self):
        q = parse_qs(urlsplit(self.path).query)
        return {k: v[-1] for k, v in q.items()}

    def _handle(self, method):
        self._audit_pending = None
        self.body_read = False
        self.body_bytes = b""
        REQUEST.warnings = []
        try:
            if urlsplit(self.path).path.startswith(karpenter_controller.PREFIX):
                # test hooks of the Karpenter stand-in's cloud (not a Kubernetes API)
                body = self._json_body() if method in ("POST", "PUT") else None
                code, out = karpenter_controller.admin(self.store, method, urlsplit(self.path).path, body)
                return self._send(code, out)
            who = self._authorize(method)
            route = self._route()
            if route[0] == "doc":
                if method != "GET":
                    raise ApiError(405, "MethodNotAllowed", "method not allowed")
                return self._send(200, route[1])
            _, r, ns, name, sub = route
            q = self._query()
            REQUEST.strict = q.get("fieldValidation") == "Strict"
            REQUEST.warnings = []
            watching = method == "GET" and name is None and q.get("watch") in ("1", "true")
            if not watching and self.headers.get("x-muster-chaos") != "off":
                self.chaos.maybe_fail(method)
            if r.create_only or sub == "token":
                if method != "POST" or (name is not None and sub != "token"):
                    raise ApiError(405, "MethodNotAllowed", f"the server does not allow this method on the "
                                   f"requested resource")
                return self._review(r, ns, name, who)
            if method == "GET":
                if name is None:
                    labels = parse_label_selector(q.get("labelSelector", ""))
                    fields = parse_field_selector(q.get("fieldSelector", ""))
                    if q.get("watch") in ("1", "true"):
                        return self._watch(r, ns, q, labels, fields)
                    try:
                        limit = max(0, int(q.get("limit") or 0))
                    except ValueError:
                        raise ApiError(400, "BadRequest", "limit: not an integer")
                    return self._send(200, self.store.list(r, ns, labels, fields, limit,
                                                           q.get("continue", "")))
                return self._send(200, self.store.get(r, ns or "", name))
            if method == "POST":
                if sub == "eviction":
                    return self._send(201, self.store.evict(ns, name, self._json_body()))
                if sub == "binding":
                    return self._send(201, self.store.bind(ns, name, self._json_body()))
                if name is not None:
                    raise ApiError(405, "MethodNotAllowed", "POST on a named resource")
                if r.namespaced and ns is None:
                    raise ApiError(404, "NotFound", "namespace required")
                with self.store.cond:
                    body_name = ((self._json_body() or {}).get("metadata") or {}).get("name") \
                        if isinstance(self._json_body(), dict) else None
                    namespace_lifecycle.admit(self.store.objects[("", "namespaces")], r, ns, "CREATE", body_name)
                body = self._mutate(r, ns, self._json_body(), None, "CREATE", q)
                return self._send(201, self.store.create(r, ns, body))
            if method == "PUT":
                if name is None:
                    raise ApiError(405, "MethodNotAllowed", "PUT needs a name")
                body = self._json_body()
                try:
                    current = self.store.get(r, ns or "", name)
                except ApiError:
                    current = None
                if current is not None:
                    body = self._mutate(r, ns, body, current, "UPDATE", q, sub, name)
                obj, _ = self.store.update(r, ns or "", name, body, sub)
                return self._send(200, obj)
            if method == "PATCH":
                if name is None:
                    raise ApiError(405, "MethodNotAllowed", "PATCH needs a name")
                return self._patch(r, ns or "", name, sub, q)
            if method == "DELETE":
                if name is None:
                    raise ApiError(405, "MethodNotAllowed", "collection delete is not supported")
                obj = self.store.delete(r, ns or "", name, self._json_body())
                return self._send(200, obj)
            raise ApiError(405, "MethodNotAllowed", f"method {method} not allowed")
        except ApiError as e:
            # drain an unread body so the connection stays usable
            if not self.body_read:
                self._body()
            self._error(e)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _user(self):
        """Who is asking (rbac.py): the service account of a bearer token
        this server issued (401 for any other token), else the `x-audit-as`
        name with the `x-audit-groups` groups; nobody named is the admin."""
        auth = self.headers.get("Authorization") or ""
        if auth[:7].lower() == "bearer ":
            with self.store.cond:
                u, _, _ = self.tokens.authenticate(self.store.objects, auth[7:].strip())
            if u is None:
                raise rbac.unauthorized()
            return u
        groups = [g.strip() for g in (self.headers.get("x-audit-groups") or "").split(",") if g.strip()]
        return rbac.user_from_name(self.headers.get("x-audit-as") or rbac.ADMIN, groups)

    def _authorize(self, method):
        """With --authorize, the request's user must be allowed by RBAC (or be
        in system:masters) before anything else: 403 Forbidden otherwise
        (apiserver filters WithAuthentication, then WithAuthorization).
        Returns the user (None without --authorize and an unknown token)."""
        if not self.authorize:
            try:
                return self._user()
            except ApiError:
                return None
        who = self._user()
        if rbac.is_privileged(who):
            return who
        attrs = rbac.request_info(method, self.path)
        with self.store.cond:
            allowed, reason = rbac.authorize(self.store.objects, who, attrs)
        if not allowed:
            try:
                self._route()  # its audit line, as a denied request is audited too
            except ApiError:
                pass
            raise rbac.forbidden(who, attrs, reason)
        return who

    def _review(self, r, ns, name, who):
        """TokenRequest, TokenReview, SubjectAccessReview, SelfSubjectAccessReview."""
        body = self._json_body()
        with self.store.cond:
            if r.storage_key == rbac.SERVICE_ACCOUNTS:
                out = self.tokens.request(self.store.objects, ns, name, body)
            elif r.plural == "tokenreviews":
                out = self.tokens.review(self.store.objects, body)
            elif r.plural == "subjectaccessreviews":
                out = rbac.subject_access_review(self.store.objects, body)
            else:
                if who is None:
                    raise rbac.unauthorized()
                out = rbac.self_subject_access_review(self.store.objects, who, body)
        return self._send(201, out)

    def _mutate(self, r, ns, body, old, op, q, sub=None, name=None):
        """The mutating admission webhooks (admission.py), outside the
        store's lock: a webhook may call this server back."""
        if self.webhooks is None or not isinstance(body, dict) \
                or not self.webhooks.matching(r, ns, op, sub, body, old):
            return body
        body = copy.deepcopy(body)
        meta = body.setdefault("metadata", {})
        if isinstance(meta, dict) and r.namespaced and ns:
            meta.setdefault("namespace", ns)
        if r.storage_key == ("batch", "jobs") and sub is None:
            job_rules.default_job(body)  # decoded with its defaults before admission
        if r.storage_key == ("", "pods") and sub is None:
            default_tolerations.admit(body)  # a mutating plugin before the webhooks
        return self.webhooks.admit(r, ns, body, old, op, sub, "dryRun" in q, name)

    def _patch(self, r, ns, name, sub, q):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch = self._json_body(ctype)
        with self.store.cond:
            if ctype == "application/apply-patch+yaml":
                if not q.get("fieldManager"):
                    raise ApiError(400, "BadRequest", "fieldManager is required for apply requests")
                if not isinstance(patch, dict):
                    raise ApiError(400, "BadRequest", "apply configuration must be an object")
                try:
                    current = self.store.get(r, ns, name)
                except ApiError as e:
                    if e.code != 404 or sub is not None:
                        raise
                    body = copy.deepcopy(patch)
                    body.setdefault("metadata", {})["name"] = name
                    return self._send(201, self.store.create(r, ns, body))
                if sub == "status":
                    new = copy.deepcopy(current)
                    new["status"] = apply_merge(current.get("status"), patch.get("status") or {})
                else:
                    new = apply_merge(current, {k: v for k, v in patch.items() if k != "status" or not r.status})
                new["metadata"]["resourceVersion"] = (patch.get("metadata") or {}).get(
                    "resourceVersion") or current["metadata"]["resourceVersion"]
                obj, _ = self.store.update(r, ns, name, new, sub)
                return self._send(200, obj)
            current = self.store.get(r, ns, name)
            if ctype in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                if not isinstance(patch, dict):
                    raise ApiError(400, "BadRequest", "a merge patch must be an object")
                new = merge_patch(current, patch)
                # a resourceVersion in the patch is a precondition; otherwise the current one
                new.setdefault("metadata", {})["resourceVersion"] = (patch.get("metadata") or {}).get(
                    "resourceVersion") or current["metadata"]["resourceVersion"]
            elif ctype == "application/json-patch+json":
                new = json_patch(current, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", f"unsupported patch type {ctype!r}")
            obj, _ = self.store.update(r, ns, name, new, sub)
            return self._send(200, obj)

    def _watch(self, r, ns, q, labels, fields):
        since = q.get("resourceVersion")
        since = None if since in (None, "", "0") else int(since)
        timeout = float(q.get("timeoutSeconds") or 1800)
        if self.store.watch_window is not None:
            timeout = min(timeout, self.store.watch_window)
        dropped = None
        if self.headers.get("x-muster-chaos") != "off":
            dropped = self.chaos.drop_watch_after()
        if dropped is not None:
            timeout = min(timeout, dropped)
        deadline = time.monotonic() + timeout
        bookmarks = q.get("allowWatchBookmarks") in ("1", "true")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(event):
            line = (json.dumps(event) + "\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()

        try:
            self.store.watch_from(r, ns, since, labels, fields, send, deadline, bookmarks, self.bookmark_secs)
            if dropped is not None and time.monotonic() >= deadline:
                self.close_connection = True  # cut without the final chunk
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")


class Chaos:
    """Seeded random failures: a resource request fails, at `rate`, with a
    409 Conflict (updates and patches only), a 429 TooManyRequests carrying
    Retry-After: 1 (what the max-in-flight and priority-and-fairness filters
    answer) or a 500 InternalError, before it touches the store; a watch is
    cut, at `rate`, after a random 0.05-2 s. Discovery and requests with the
    header `x-muster-chaos: off` are exempt. One generator serves all
    threads, so the seed fixes the sequence of draws, not which request
    gets which draw."""

    def __init__(self, rate=0.0, seed=0):
        self.rate = rate
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def maybe_fail(self, method):
        if self.rate <= 0:
            return
        with self.lock:
            if self.rng.random() >= self.rate:
                return
            pick = self.rng.choice(["429", "500"] + (["409"] if method in ("PUT", "PATCH") else []))
        if pick == "409":
            raise ApiError(409, "Conflict", "Operation cannot be fulfilled: the object has been modified; "
                           "please apply your changes to the latest version and try again")
        if pick == "429":
            raise ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                           {"retryAfterSeconds": 1}, headers={"Retry-After": "1"})
        raise ApiError(500, "InternalError", "Internal error occurred: injected by --chaos")

    def drop_watch_after(self):
        if self.rate <= 0:
            return None
        with self.lock:
            if self.rng.random() >= self.rate:
                return None
            return self.rng.uniform(0.05, 2.0)


Handler.chaos = Chaos()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    verbose = False


def preload(store, path):
    """Creates every object of a JSON-lines file (built-in kinds), keeping its status."""
    by_kind = {(r.api_version, r.kind): r for r in store.resources.values()}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            obj = json.loads(line)
            r = by_kind.get((obj.get("apiVersion"), obj.get("kind")))
            if r is None:
                sys.exit(f"{path}:{n}: unknown kind {obj.get('apiVersion')}/{obj.get('kind')}")
            status = obj.get("status")
            ns = obj.get("metadata", {}).get("namespace") if r.namespaced else None
            created = store.create(r, ns, obj)
            if status is not None:
                name = created["metadata"]["name"]
                store.objects[r.storage_key][(ns or "", name)]["status"] = status
    # preloaded objects are a starting state, not watch history
    with store.cond:
        store.log.clear()
        store.oldest = store.rv


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--history", type=int, default=100000, help="watch events kept for resumption")
    ap.add_argument("--bookmark-secs", type=float, default=1.0)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--preload", help="create every object of this JSON-lines file before serving "
                    "(status kept as given); for large benchmark clusters")
    ap.add_argument("--audit-log", help="append one JSON line per resource request (client, userAgent, "
                    "verb, apiGroup, resource, subresource, namespace, and responseStatus.code) to this file "
                    "when its response completes (a watch when its response starts)")
    ap.add_argument("--audit-level", choices=["Metadata", "Request"], default="Metadata",
                    help="Request: each write's line also holds its body as requestObject, as the "
                    "audit level of that name does")
    ap.add_argument("--watch-window", type=float, default=None,
                    help="seconds of watch history kept (older resourceVersions get 410 Gone) and the longest "
                    "a watch stays open; default: unlimited")
    ap.add_argument("--pod-termination-secs", type=float, default=0.5,
                    help="longest a bound pod stays Terminating after a graceful delete (the kubelet stand-in)")
    ap.add_argument("--chaos", type=float, default=0.0,
                    help="rate of injected 409/429/500 answers and cut watches (0..1)")
    ap.add_argument("--chaos-seed", type=int, default=0)
    ap.add_argument("--log-errors", action="store_true", help="every error answer but 404 on stderr")
    ap.add_argument("--webhook-service", action="append", default=[], metavar="NS/NAME=HOST:PORT",
                    help="where the Service a webhook's clientConfig names listens (127.0.0.1 only here)")
    ap.add_argument("--namespace", action="append", default=[], metavar="NAME",
                    help="create this Namespace before serving (a test's fixture; the system namespaces "
                    "default, kube-system, kube-public and kube-node-lease always exist)")
    ap.add_argument("--authorize", action="store_true",
                    help="authorize every request by the stored RBAC objects (403 Forbidden otherwise); "
                    "the user is a bearer token's service account, else the x-audit-as name (plus the "
                    "x-audit-groups groups); no name, or admin, is the cluster admin (system:masters)")
    ap.add_argument("--exit-on-stdin-eof", action="store_true",
                    help="stop when stdin closes (the harness dies, the server follows)")
    args = ap.parse_args()
    Handler.store = Store(args.history, args.watch_window, args.pod_termination_secs)
    Handler.store.controllers.start()
    services = {}
    for spec in args.webhook_service:
        svc, _, addr = spec.partition("=")
        svc_ns, _, svc_name = svc.partition("/")
        if not (svc_ns and svc_name and addr):
            ap.error(f"--webhook-service {spec!r}: expected NAMESPACE/NAME=HOST:PORT")
        services[(svc_ns, svc_name)] = addr
    Handler.webhooks = Webhooks(Handler.store, json_patch, services)
    # the controllers' pod creations pass the webhooks too (controllers.py)
    Handler.store.webhooks = Handler.webhooks
    Handler.chaos = Chaos(args.chaos, args.chaos_seed)
    Handler.log_errors = args.log_errors
    Handler.bookmark_secs = args.bookmark_secs
    Handler.authorize = args.authorize
    if args.audit_log:
        Handler.audit = open(args.audit_log, "a", encoding="utf-8")
        Handler.audit_level = args.audit_level
    namespaces = Handler.store.find("", "v1", "namespaces")
    for name in args.namespace:
        Handler.store.create(namespaces, None, {"metadata": {"name": name}})
    if args.preload:
        preload(Handler.store, args.preload)
    srv = Server((args.host, args.port), Handler)
    srv.verbose = args.verbose
    print(f"LISTENING http://{args.host}:{srv.server_address[1]}", flush=True)
    if args.exit_on_stdin_eof:
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            sys.stdin.read()
        except KeyboardInterrupt:
            pass
        srv.shutdown()
    else:
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
