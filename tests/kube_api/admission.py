"""Mutating admission webhooks, called as kube-apiserver calls them.

The server stores admissionregistration.k8s.io/v1
MutatingWebhookConfigurations like any object; every create and update of
another resource is first offered to the webhooks they declare. What this
follows (kubernetes/kubernetes, staging/src/k8s.io/apiserver/pkg/admission/
plugin/webhook/):
- configurations in order of their names, webhooks in the order listed
  (configuration/mutating_webhook_manager.go; mutating/dispatcher.go calls
  them one after another, each seeing the previous one's patch);
- a webhook is called when one of its rules matches: operation, API group,
  version, resource with subresource (`jobs`, `jobs/status`, `*`, `*/status`,
  `jobs/*`, `*/*`) and scope (`*`, `Namespaced`, `Cluster`)
  (predicates/rules/rules.go); the admission configurations themselves are
  never sent to webhooks (IsExemptAdmissionConfigurationResource);
- its objectSelector matches the labels of the new or of the old object
  (predicates/object/matcher.go); its namespaceSelector the labels of the
  request's namespace, of the Namespace itself for namespaces, and always for
  other cluster-scoped resources; a namespace that does not exist is 404
  NotFound (predicates/namespace/matcher.go);
- its matchConditions (CEL, admissionregistration v1, GA in 1.30), judged
  after the rules and selectors with `object`, `oldObject` and `request`
  bound (`authorizer` is not offered here): any condition false skips the
  webhook; otherwise an evaluation error fails the request under
  failurePolicy Fail ("failed calling webhook" ... "match condition")
  and skips the webhook under Ignore; all true calls it
  (matchconditions/matcher.go);
- a dry-run request to a webhook whose sideEffects is not None or
  NoneOnDryRun is 400 BadRequest "does not support dry run"
  (mutating/dispatcher.go, errors/statuserror.go NewDryRunUnsupportedErr);
- the call is an AdmissionReview v1 (uid, kind, resource, subResource,
  requestKind, requestResource, name, namespace, operation, userInfo, object,
  oldObject, dryRun, options) POSTed over HTTPS within timeoutSeconds
  (default 10), the server verified with the caBundle under the Service's
  DNS name SERVICE.NAMESPACE.svc, or the url's host (request/admissionreview.go,
  pkg/util/webhook/authentication.go);
- a failed call (connection, TLS, timeout, non-200, an unreadable answer or
  an answer for another uid) refuses the request with 500 InternalError
  "failed calling webhook" under failurePolicy Fail (the default) and is
  skipped under Ignore;
- allowed=false refuses it with the answer's status (code 403 Forbidden
  when it names none), the message prefixed "admission webhook NAME denied
  the request" (errors/statuserror.go ToStatusErr);
- a patch must be patchType JSONPatch and is applied to the object before it
  is admitted further (mutating/dispatcher.go).
Service references reach the webhook through --webhook-service
NAMESPACE/NAME=HOST:PORT (there is no Service network here).
"""

import base64
import copy
import http.client
import json
import os
import socket
import ssl
import tempfile
import urllib.parse
import uuid

from apierrors import ApiError

_PROGRAMS = {}


def _program(text):
    import celpy  # imported on first use, as crd_schema does

    p = _PROGRAMS.get(text)
    if p is None:
        env = celpy.Environment()
        p = env.program(env.compile(text))
        _PROGRAMS[text] = p
    return p


def match_conditions(hook, obj, old, op, r, ns, sub, name):
    """True when every matchCondition holds, False when one does not, or
    the first evaluation error's text (matchconditions/matcher.go: a false
    condition wins over errors)."""
    import celpy

    conditions = hook.get("matchConditions") or []
    if not conditions:
        return True
    request = {"operation": op, "namespace": ns or "", "name": name or "",
               "subResource": sub or "", "resource": {"group": r.group, "version": r.version,
                                                       "resource": r.plural}}
    act = {"object": celpy.json_to_cel(obj) if obj is not None else None,
           "oldObject": celpy.json_to_cel(old) if old is not None else None,
           "request": celpy.json_to_cel(request)}
    error = None
    for c in conditions:
        try:
            result = _program(c.get("expression", "")).evaluate(act)
        except Exception as e:  # noqa: BLE001 - compile or evaluation error
            error = error or f"{c.get('name')}: {e}"
            continue
        if isinstance(result, Exception) or not isinstance(result, (bool, int)):
            error = error or f"{c.get('name')}: {result}"
            continue
        if not bool(result):
            return False
    return error if error else True

GROUP = "admissionregistration.k8s.io"
CONFIG_PLURAL = "mutatingwebhookconfigurations"
EXEMPT = {"mutatingwebhookconfigurations", "validatingwebhookconfigurations",
          "validatingadmissionpolicies", "validatingadmissionpolicybindings",
          "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"}


def selector_matches(sel, labels):
    """A metav1.LabelSelector against a label map; a missing or empty
    selector matches everything."""
    if not sel:
        return True
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _exact_or_wildcard(items, value):
    return any(i == "*" or i == value for i in items or [])


def rule_matches(rule, op, group, version, resource, sub, namespaced_request):
    """One RuleWithOperations against a request."""
    scope = rule.get("scope") or "*"
    if scope == "Namespaced" and not namespaced_request:
        return False
    if scope == "Cluster" and namespaced_request:
        return False
    if not _exact_or_wildcard(rule.get("operations"), op):
        return False
    if not _exact_or_wildcard(rule.get("apiGroups"), group):
        return False
    if not _exact_or_wildcard(rule.get("apiVersions"), version):
        return False
    for res in rule.get("resources") or []:
        r, _, s = res.partition("/")
        if (r == "*" or r == resource) and (s == "*" or s == (sub or "")):
            return True
    return False


def _labels(obj):
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


class Webhooks:
    """The mutating admission step in front of the store."""

    def __init__(self, store, json_patch, services=None):
        self.store = store
        self.json_patch = json_patch
        # (namespace, name) of a Service → "host:port" it is reached at
        self.services = dict(services or {})

    def _configs(self):
        r = self.store.find(GROUP, "v1", CONFIG_PLURAL)
        if r is None:
            return []
        with self.store.cond:
            items = [copy.deepcopy(o) for (_, name), o in sorted(self.store.objects[r.storage_key].items())]
        return items

    def matching(self, r, ns, op, sub, obj, old):
        """The webhooks whose rules and object selector match (namespace
        selectors are judged when called)."""
        if r.group == GROUP and r.plural in EXEMPT:
            return []
        namespaced_request = bool(ns) and r.plural != "namespaces"
        out = []
        for cfg in self._configs():
            for hook in cfg.get("webhooks") or []:
                if not any(rule_matches(rule, op, r.group, r.version, r.plural, sub, namespaced_request)
                           for rule in hook.get("rules") or []):
                    continue
                sel = hook.get("objectSelector")
                if sel and not (selector_matches(sel, _labels(obj)) if obj is not None else False) \
                        and not (selector_matches(sel, _labels(old)) if old is not None else False):
                    continue
                out.append(hook)
        return out

    def _namespace_matches(self, hook, r, ns, obj):
        sel = hook.get("namespaceSelector")
        if r.plural != "namespaces" and not ns:
            return True  # other cluster-scoped resources are never exempted
        if not sel or (not sel.get("matchLabels") and not sel.get("matchExpressions")):
            return True
        if r.plural == "namespaces" and obj is not None:
            return selector_matches(sel, _labels(obj))
        nr = self.store.find("", "v1", "namespaces")
        try:
            namespace = self.store.get(nr, "", ns)
        except ApiError as e:
            if e.code == 404:
                raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                               {"name": ns, "kind": "namespaces"})
            raise
        return selector_matches(sel, _labels(namespace))

    def admit(self, r, ns, obj, old, op, sub=None, dry_run=False, name=None):
        """Returns the object after every matching webhook, or raises the
        ApiError kube-apiserver would answer with."""
        hooks = self.matching(r, ns, op, sub, obj, old)
        if not hooks:
            return obj
        obj = copy.deepcopy(obj)
        for hook in hooks:
            if not self._namespace_matches(hook, r, ns, obj):
                continue
            verdict = match_conditions(hook, obj, old, op, r, ns, sub, name)
            if verdict is False:
                continue
            if isinstance(verdict, str):
                if hook.get("failurePolicy", "Fail") == "Ignore":
                    continue
                message = (f'Internal error occurred: failed calling webhook "{hook.get("name")}": '
                           f"failed to evaluate match condition: {verdict}")
                raise ApiError(500, "InternalError", message, {"causes": [{"message": message}]})
            if dry_run and hook.get("sideEffects") not in ("None", "NoneOnDryRun"):
                raise ApiError(400, "BadRequest", f'admission webhook "{hook.get("name")}" does not support dry run')
            review = self._review(r, ns, obj, old, op, sub, dry_run, name)
            try:
                answer = self._call(hook, review)
            except Exception as e:  # noqa: BLE001 - any failure of the call
                if hook.get("failurePolicy", "Fail") == "Ignore":
                    continue
                message = f'Internal error occurred: failed calling webhook "{hook.get("name")}": {e}'
                raise ApiError(500, "InternalError", message, {"causes": [{"message": message}]})
            if not answer.get("allowed"):
                raise self._denied(hook, r, answer.get("status") or {}, name or (obj.get("metadata") or {}).get("name"))
            if answer.get("patch"):
                if answer.get("patchType") != "JSONPatch":
                    message = (f'Internal error occurred: failed calling webhook "{hook.get("name")}": '
                               f'unsupported patch type {answer.get("patchType")!r}')
                    raise ApiError(500, "InternalError", message)
                ops = json.loads(base64.b64decode(answer["patch"]))
                obj = self.json_patch(obj, ops)
        return obj

    @staticmethod
    def _denied(hook, r, status, name):
        code = status.get("code") or 403
        denied = f'admission webhook "{hook.get("name")}" denied the request'
        if status.get("message"):
            msg = f"{denied}: {status['message']}"
        elif status.get("reason"):
            msg = f"{denied}: {status['reason']}"
        else:
            msg = f"{denied} without explanation"
        gr = f"{r.plural}.{r.group}" if r.group else r.plural
        prefix = "Internal error occurred" if code == 500 else f'{gr} "{name or "Unknown"}" is forbidden'
        reason = status.get("reason") or ("InternalError" if code == 500 else "Forbidden")
        return ApiError(code, reason, f"{prefix}: {msg}",
                        {"group": r.group, "kind": r.plural, "name": name or "Unknown"})

    @staticmethod
    def _review(r, ns, obj, old, op, sub, dry_run, name):
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        gvr = {"group": r.group, "version": r.version, "resource": r.plural}
        options = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(op, "CreateOptions")
        request = {
            "uid": str(uuid.uuid4()),
            "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
            "name": name or ((obj or {}).get("metadata") or {}).get("name", ""),
            "namespace": ns or "",
            "operation": op,
            "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
            "object": obj, "oldObject": old, "dryRun": bool(dry_run),
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
        }
        if sub:
            request["subResource"] = sub
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    def _call(self, hook, review):
        cc = hook.get("clientConfig") or {}
        timeout = hook.get("timeoutSeconds") or 10
        if cc.get("service"):
            svc = cc["service"]
            server_name = f"{svc['name']}.{svc['namespace']}.svc"
            target = self.services.get((svc["namespace"], svc["name"]))
            if target is None:
                raise RuntimeError(f"service {svc['namespace']}/{svc['name']} has no endpoint")
            host, _, port = target.rpartition(":")
            path = svc.get("path") or "/"
        elif cc.get("url"):
            u = urllib.parse.urlsplit(cc["url"])
            server_name, host, port = u.hostname, u.hostname, u.port or 443
            path = u.path or "/"
            if u.query:
                path += "?" + u.query
        else:
            raise RuntimeError("clientConfig names neither a service nor a url")
        ctx = ssl.create_default_context()
        if cc.get("caBundle"):
            ca = base64.b64decode(cc["caBundle"])
            with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as f:
                f.write(ca)
            try:
                ctx = ssl.create_default_context(cafile=f.name)
            finally:
                os.unlink(f.name)
        raw = socket.create_connection((host, int(port)), timeout=timeout)
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        conn.sock = ctx.wrap_socket(raw, server_hostname=server_name)
        try:
            conn.request("POST", path, body=json.dumps(review),
                         headers={"Content-Type": "application/json", "Accept": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise RuntimeError(f"the webhook answered {resp.status}")
        out = json.loads(body)
        answer = out.get("response") or {}
        if out.get("apiVersion") != "admission.k8s.io/v1" or out.get("kind") != "AdmissionReview":
            raise RuntimeError("the answer is not an admission.k8s.io/v1 AdmissionReview")
        if answer.get("uid") != review["request"]["uid"]:
            raise RuntimeError(f"expected response.uid={review['request']['uid']!r}, got {answer.get('uid')!r}")
        return answer
