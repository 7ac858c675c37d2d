"""RBAC for the API test server: the rbac.authorization.k8s.io/v1 objects'
defaulting and validation, the ClusterRole aggregation controller, the
authorizer, the 403 it answers, and the review APIs built on it
(TokenRequest, TokenReview, SubjectAccessReview, SelfSubjectAccessReview).

Upstream sources (kubernetes/kubernetes):
- request attributes from the URL: staging/src/k8s.io/apiserver/pkg/
  endpoints/request/requestinfo.go (RequestInfoFactory.NewRequestInfo);
- rule matching: plugin/pkg/auth/authorizer/rbac/rbac.go (RBACAuthorizer.
  Authorize, authorizingVisitor, RuleAllows) and pkg/apis/rbac/v1/
  evaluation_helpers.go (VerbMatches, APIGroupMatches, ResourceMatches,
  ResourceNameMatches, NonResourceURLMatches);
- which bindings apply: pkg/registry/rbac/validation/rule.go
  (DefaultRuleResolver.VisitRulesFor, GetRoleReferenceRules, appliesTo,
  appliesToUser, describeSubject and the binding describers);
- system:masters always allowed: pkg/kubeapiserver/authorizer/config.go
  (the privileged-groups authorizer first in the chain);
- the 403: staging/src/k8s.io/apiserver/pkg/endpoints/handlers/
  responsewriters/errors.go (Forbidden, forbiddenMessage) and
  staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go (NewForbidden);
- object rules: pkg/apis/rbac/validation/validation.go (ValidatePolicyRule,
  ValidateRole, ValidateClusterRole, ValidateRoleBinding,
  ValidateRoleBindingSubject, ValidateRoleBindingUpdate,
  ValidateClusterRoleBindingUpdate), pkg/apis/rbac/v1/defaults.go
  (SetDefaults_Subject);
- aggregation: pkg/controller/clusterroleaggregation/
  clusterroleaggregation_controller.go (syncClusterRole, ruleExists);
- bootstrap roles: plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go
  (cluster-admin, system:discovery, system:basic-user,
  system:public-info-viewer and their bindings);
- tokens: pkg/registry/core/serviceaccount/storage/token.go (TokenREST.
  Create), pkg/apis/authentication/validation/validation.go
  (ValidateTokenRequest), pkg/apis/authentication/v1/defaults.go,
  pkg/registry/authentication/tokenreview/storage.go (REST.Create);
- reviews: pkg/registry/authorization/subjectaccessreview/rest.go,
  pkg/registry/authorization/selfsubjectaccessreview/rest.go,
  pkg/apis/authorization/validation/validation.go
  (ValidateSubjectAccessReviewSpec).

Who is asking (a stand-in convention, not kube-apiserver's): a bearer token
this server issued is its service account; else the header `x-audit-as:
NAME` (`system:serviceaccount:NS:SA` is that service account, with groups
system:serviceaccounts, system:serviceaccounts:NS, system:authenticated;
any other name a user in system:authenticated), plus the groups of
`x-audit-groups: g1,g2`; no header, or the name `admin`, is the cluster
admin (group system:masters).
"""

import copy
import secrets
import threading
import time
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlsplit

from apierrors import ApiError, FieldError, invalid
from job_rules import selector_matches

GROUP = "rbac.authorization.k8s.io"
ROLES = (GROUP, "roles")
CLUSTER_ROLES = (GROUP, "clusterroles")
BINDINGS = (GROUP, "rolebindings")
CLUSTER_BINDINGS = (GROUP, "clusterrolebindings")
SERVICE_ACCOUNTS = ("", "serviceaccounts")

ADMIN = "admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
SA_PREFIX = "system:serviceaccount:"
# the API server's own audiences (--api-audiences, by default the
# service-account issuer; kind's and kubeadm's issuer)
API_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]

# apiserver requestinfo.go: the API prefixes and the namespace subresources
API_PREFIXES = {"api", "apis"}
NAMESPACE_SUBRESOURCES = {"status", "finalize"}


# ---------------------------------------------------------------- users

def user(name, groups=(), uid=""):
    return {"username": name, "uid": uid, "groups": list(groups)}


def user_from_name(name, extra_groups=()):
    """The user a header name stands for (see the module docstring)."""
    if name.startswith(SA_PREFIX) and name.count(":") == 3:
        ns = name.split(":")[2]
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}", AUTHENTICATED]
    elif name == ADMIN:
        groups = [MASTERS, AUTHENTICATED]
    else:
        groups = [AUTHENTICATED]
    for g in extra_groups:
        if g not in groups:
            groups.append(g)
    return user(name, groups)


def is_privileged(u):
    return MASTERS in (u.get("groups") or [])


# ---------------------------------------------------------------- request attributes

def request_info(method, raw_path):
    """authorizer.Attributes of a request, as requestinfo.go derives them."""
    split = urlsplit(raw_path)
    path = split.path
    query = {k: v[-1] for k, v in parse_qs(split.query).items()}
    parts = [p for p in path.strip("/").split("/") if p]
    attrs = {"resourceRequest": False, "path": path, "verb": method.lower()}
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return attrs
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix != "api":  # groupless prefix: /api
        if len(parts) < 3:
            return attrs
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
            "PATCH": "patch", "DELETE": "delete"}.get(method, "")
    ns = ""
    if parts[0] == "namespaces":
        if len(parts) > 1:
            ns = parts[1]
            if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
                parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    sub = parts[2] if len(parts) >= 3 else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch") in ("1", "true") else "list"
        for part in (query.get("fieldSelector") or "").split(","):
            key, eq, value = part.partition("=")
            value = value.lstrip("=").strip()
            if eq and key.strip() == "metadata.name" and not key.endswith("!") and value \
                    and value not in (".", "..") and "/" not in value and "%" not in value:
                name = value
    if not name and verb == "delete":
        verb = "deletecollection"
    return {"resourceRequest": True, "path": path, "verb": verb, "apiGroup": group,
            "apiVersion": version, "namespace": ns, "resource": resource,
            "subresource": sub, "name": name}


# ---------------------------------------------------------------- rule matching (evaluation_helpers.go)

def verb_matches(rule, verb):
    return any(v == "*" or v == verb for v in rule.get("verbs") or [])


def api_group_matches(rule, group):
    return any(g == "*" or g == group for g in rule.get("apiGroups") or [])


def resource_matches(rule, combined, sub):
    for r in rule.get("resources") or []:
        if r == "*" or r == combined:
            return True
        if not sub:
            continue
        if len(r) == len(sub) + 2 and r.startswith("*/") and r.endswith(sub):
            return True
    return False


def resource_name_matches(rule, name):
    names = rule.get("resourceNames") or []
    return not names or name in names


def non_resource_url_matches(rule, url):
    for u in rule.get("nonResourceURLs") or []:
        if u == "*" or u == url:
            return True
        if u.endswith("*") and url.startswith(u.rstrip("*")):
            return True
    return False


def rule_allows(attrs, rule):
    """rbac.go RuleAllows."""
    if attrs["resourceRequest"]:
        combined = attrs["resource"] + ("/" + attrs["subresource"] if attrs["subresource"] else "")
        return (verb_matches(rule, attrs["verb"]) and api_group_matches(rule, attrs["apiGroup"])
                and resource_matches(rule, combined, attrs["subresource"])
                and resource_name_matches(rule, attrs["name"]))
    return verb_matches(rule, attrs["verb"]) and non_resource_url_matches(rule, attrs["path"])


# ---------------------------------------------------------------- which bindings apply (rule.go)

def sa_username(ns, name):
    return f"{SA_PREFIX}{ns}:{name}"


def applies_to_user(u, subject, namespace):
    kind = subject.get("kind")
    if kind == "User":
        return u["username"] == subject.get("name")
    if kind == "Group":
        return subject.get("name") in (u.get("groups") or [])
    if kind == "ServiceAccount":
        sa_ns = subject.get("namespace") or namespace
        if not sa_ns:
            return False
        return u["username"] == sa_username(sa_ns, subject.get("name"))
    return False


def applies_to(u, subjects, namespace):
    for s in subjects or []:
        if applies_to_user(u, s, namespace):
            return s
    return None


def describe_subject(s, binding_ns):
    if s.get("kind") == "ServiceAccount":
        return f'{s["kind"]} "{s.get("name")}/{s.get("namespace") or binding_ns}"'
    return f'{s.get("kind")} "{s.get("name")}"'


def _role_rules(objects, ref, binding_ns):
    """GetRoleReferenceRules: the rules, or the error the listers give."""
    kind, name = ref.get("kind"), ref.get("name")
    if kind == "Role":
        role = objects[ROLES].get((binding_ns, name))
        if role is None:
            return None, f'role.rbac.authorization.k8s.io "{name}" not found'
        return role.get("rules") or [], None
    if kind == "ClusterRole":
        role = objects[CLUSTER_ROLES].get(("", name))
        if role is None:
            return None, f'clusterrole.rbac.authorization.k8s.io "{name}" not found'
        return role.get("rules") or [], None
    return None, f'unsupported role reference kind: "{kind}"'


def authorize(objects, u, attrs):
    """(allowed, reason) as the privileged-groups and RBAC authorizers
    decide; `objects` is the store's (group, plural) -> {(ns, name): obj}.
    The caller holds the store's lock."""
    if is_privileged(u):
        return True, ""
    errors = []
    for (_, _), crb in sorted(objects[CLUSTER_BINDINGS].items()):
        s = applies_to(u, crb.get("subjects"), "")
        if s is None:
            continue
        ref = crb.get("roleRef") or {}
        rules, err = _role_rules(objects, ref, "")
        if err:
            errors.append(err)
            continue
        for rule in rules:
            if rule_allows(attrs, rule):
                return True, (f'RBAC: allowed by ClusterRoleBinding "{crb["metadata"]["name"]}" of '
                              f'{ref.get("kind")} "{ref.get("name")}" to {describe_subject(s, "")}')
    ns = attrs.get("namespace") or ""
    if ns:
        for (bns, _), rb in sorted(objects[BINDINGS].items()):
            if bns != ns:
                continue
            s = applies_to(u, rb.get("subjects"), ns)
            if s is None:
                continue
            ref = rb.get("roleRef") or {}
            rules, err = _role_rules(objects, ref, ns)
            if err:
                errors.append(err)
                continue
            for rule in rules:
                if rule_allows(attrs, rule):
                    return True, (f'RBAC: allowed by RoleBinding "{rb["metadata"]["name"]}/{ns}" of '
                                  f'{ref.get("kind")} "{ref.get("name")}" to {describe_subject(s, ns)}')
    reason = ""
    if errors:
        reason = "RBAC: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return False, reason


def forbidden(u, attrs, reason=""):
    """responsewriters.Forbidden: a metav1 Status, reason Forbidden, 403."""
    who = u["username"]
    if not attrs["resourceRequest"]:
        msg = f'User "{who}" cannot {attrs["verb"]} path "{attrs["path"]}"'
    else:
        res = attrs["resource"] + ("/" + attrs["subresource"] if attrs["subresource"] else "")
        if attrs["namespace"]:
            msg = (f'User "{who}" cannot {attrs["verb"]} resource "{res}" in API group '
                   f'"{attrs["apiGroup"]}" in the namespace "{attrs["namespace"]}"')
        else:
            msg = (f'User "{who}" cannot {attrs["verb"]} resource "{res}" in API group '
                   f'"{attrs["apiGroup"]}" at the cluster scope')
    if reason:
        msg = f"{msg}: {reason}"
    group = attrs.get("apiGroup", "")
    resource = attrs.get("resource", "")
    name = attrs.get("name", "")
    qualified = f"{resource}.{group}" if group else resource
    if not resource and not group:
        message = f"forbidden: {msg}"
    elif not name:
        message = f"{qualified} is forbidden: {msg}"
    else:
        message = f'{qualified} "{name}" is forbidden: {msg}'
    details = {k: v for k, v in (("name", name), ("group", group), ("kind", resource)) if v}
    return ApiError(403, "Forbidden", message, details)


def unauthorized():
    return ApiError(401, "Unauthorized", "Unauthorized")


# ---------------------------------------------------------------- object rules

def _go_strings(values):
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _go_role_ref(ref):
    return (f'rbac.RoleRef{{APIGroup:"{ref.get("apiGroup", "")}", Kind:"{ref.get("kind", "")}", '
            f'Name:"{ref.get("name", "")}"}}')


def default_subjects(obj):
    """SetDefaults_Subject: User and Group subjects get apiGroup
    rbac.authorization.k8s.io when they have none."""
    for s in obj.get("subjects") or []:
        if isinstance(s, dict) and not s.get("apiGroup") and s.get("kind") in ("User", "Group"):
            s["apiGroup"] = GROUP


def _validate_rule(rule, namespaced, path):
    errs = []
    if not rule.get("verbs"):
        errs.append(FieldError("required", f"{path}.verbs", "verbs must contain at least one value"))
    urls = rule.get("nonResourceURLs") or []
    if urls:
        if namespaced:
            errs.append(FieldError("invalid", f"{path}.nonResourceURLs",
                                   f"{_go_strings(urls)}: namespaced rules cannot apply to non-resource URLs"))
        if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
            errs.append(FieldError("invalid", f"{path}.nonResourceURLs",
                                   f"{_go_strings(urls)}: rules cannot apply to both regular resources "
                                   "and non-resource URLs"))
        return errs
    if not rule.get("apiGroups"):
        errs.append(FieldError("required", f"{path}.apiGroups", "resource rules must supply at least one api group"))
    if not rule.get("resources"):
        errs.append(FieldError("required", f"{path}.resources", "resource rules must supply at least one resource"))
    return errs


def _validate_binding(obj, namespaced):
    errs = []
    ref = obj.get("roleRef") or {}
    if ref.get("apiGroup", "") != GROUP:
        errs.append(FieldError("unsupported", "roleRef.apiGroup", f'supported values: "{GROUP}"',
                               ref.get("apiGroup", "")))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("kind", "") not in kinds:
        errs.append(FieldError("unsupported", "roleRef.kind",
                               "supported values: " + ", ".join(f'"{k}"' for k in kinds), ref.get("kind", "")))
    if not ref.get("name"):
        errs.append(FieldError("required", "roleRef.name", ""))
    for i, s in enumerate(obj.get("subjects") or []):
        p = f"subjects[{i}]"
        if not s.get("name"):
            errs.append(FieldError("required", f"{p}.name", ""))
        kind = s.get("kind", "")
        if kind == "ServiceAccount":
            if s.get("apiGroup"):
                errs.append(FieldError("unsupported", f"{p}.apiGroup", 'supported values: ""', s["apiGroup"]))
            if not namespaced and not s.get("namespace"):
                errs.append(FieldError("required", f"{p}.namespace", ""))
        elif kind in ("User", "Group"):
            if s.get("apiGroup") != GROUP:
                errs.append(FieldError("unsupported", f"{p}.apiGroup", f'supported values: "{GROUP}"',
                                       s.get("apiGroup", "")))
        else:
            errs.append(FieldError("unsupported", f"{p}.kind",
                                   'supported values: "ServiceAccount", "User", "Group"', kind))
    return errs


KINDS = {ROLES: "Role", CLUSTER_ROLES: "ClusterRole", BINDINGS: "RoleBinding",
         CLUSTER_BINDINGS: "ClusterRoleBinding"}


def admit(key, obj, old=None):
    """Defaulting and validation of the four RBAC kinds; raises 422."""
    if key not in KINDS:
        return obj
    errs = []
    if key in (BINDINGS, CLUSTER_BINDINGS):
        default_subjects(obj)
        errs += _validate_binding(obj, key == BINDINGS)
        if old is not None and (old.get("roleRef") or {}) != (obj.get("roleRef") or {}):
            errs.append(FieldError("invalid", "roleRef",
                                   f"{_go_role_ref(obj.get('roleRef') or {})}: cannot change roleRef"))
    else:
        for i, rule in enumerate(obj.get("rules") or []):
            errs += _validate_rule(rule, key == ROLES, f"rules[{i}]")
        agg = obj.get("aggregationRule")
        if key == CLUSTER_ROLES and agg is not None and not (agg.get("clusterRoleSelectors") or []):
            errs.append(FieldError("required", "aggregationRule",
                                   "at least one clusterRoleSelector required if aggregationRule is non-nil"))
    if errs:
        raise invalid(KINDS[key], GROUP, obj["metadata"].get("name", ""), errs)
    return obj


# ---------------------------------------------------------------- aggregation controller

def aggregated_rules(objects, role):
    """syncClusterRole: the rules of the ClusterRoles each selector matches,
    by name, itself left out, each rule once."""
    rules = []
    cluster_roles = sorted(objects[CLUSTER_ROLES].values(), key=lambda o: o["metadata"]["name"])
    for sel in (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []:
        for other in cluster_roles:
            if other["metadata"]["name"] == role["metadata"]["name"]:
                continue
            if not selector_matches(sel, other["metadata"].get("labels") or {}):
                continue
            for rule in other.get("rules") or []:
                if rule not in rules:
                    rules.append(copy.deepcopy(rule))
    return rules


class ClusterRoleAggregation:
    """The ClusterRole aggregation controller of kube-controller-manager, as a
    stand-in of controllers.py: any ClusterRole write resyncs every
    aggregated ClusterRole (in the request that made the write)."""

    kind = "clusterrole-aggregation"

    def __init__(self, controllers):
        self.store = controllers.store

    def enqueue(self, key, obj):
        return [(self.kind, "", None)] if key == CLUSTER_ROLES else []

    def sync(self, ns, name):
        objects = self.store.objects
        r = self.store.find(GROUP, "v1", "clusterroles")
        for _ in range(10):
            changed = False
            for (_, role_name), role in sorted(objects[CLUSTER_ROLES].items()):
                if role.get("aggregationRule") is None:
                    continue
                rules = aggregated_rules(objects, role)
                if rules != (role.get("rules") or []):
                    new = copy.deepcopy(role)
                    new["rules"] = rules
                    self.store.update(r, "", role_name, new, None)
                    changed = True
            if not changed:
                return


# ---------------------------------------------------------------- bootstrap policy (policy.go)

_BOOT_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_BOOT_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def _meta(name):
    return {"name": name, "labels": dict(_BOOT_LABELS), "annotations": dict(_BOOT_ANNOTATIONS)}


def bootstrap_objects():
    """(plural, object) of the bootstrap roles and bindings a client without
    cluster-admin relies on: discovery, self reviews, version and health."""
    roles = [
        {"metadata": _meta("cluster-admin"), "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]}]},
        {"metadata": _meta("system:discovery"), "rules": [
            {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                                 "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]},
        {"metadata": _meta("system:basic-user"), "rules": [
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews",
                                                                  "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]},
        {"metadata": _meta("system:public-info-viewer"), "rules": [
            {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]},
    ]

    def binding(name, groups):
        return {"metadata": _meta(name),
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups]}

    bindings = [binding("cluster-admin", [MASTERS]),
                binding("system:discovery", [AUTHENTICATED]),
                binding("system:basic-user", [AUTHENTICATED]),
                binding("system:public-info-viewer", [AUTHENTICATED, "system:unauthenticated"])]
    return [("clusterroles", r) for r in roles] + [("clusterrolebindings", b) for b in bindings]


# ---------------------------------------------------------------- tokens

def _rfc3339(epoch):
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Tokens:
    """The tokens this server issued (opaque, random) and whom they stand for."""

    def __init__(self):
        self.lock = threading.Lock()
        self.issued = {}  # token -> {"user", "audiences", "expires", "sa": (ns, name, uid)}

    def request(self, objects, ns, name, body):
        """TokenREST.Create: POST .../serviceaccounts/NAME/token."""
        sa = objects[SERVICE_ACCOUNTS].get((ns, name))
        if sa is None:
            raise ApiError(404, "NotFound", f'serviceaccounts "{name}" not found',
                           {"name": name, "kind": "serviceaccounts"})
        req = copy.deepcopy(body) if isinstance(body, dict) else {}
        spec = req.setdefault("spec", {})
        if spec.get("expirationSeconds") is None:
            spec["expirationSeconds"] = 3600  # SetDefaults_TokenRequestSpec
        exp = spec["expirationSeconds"]
        errs = []
        if not isinstance(exp, int) or exp < 600:
            errs.append(FieldError("invalid", "spec.expirationSeconds",
                                   "may not specify a duration less than 10 minutes", exp))
        elif exp > 1 << 32:
            errs.append(FieldError("invalid", "spec.expirationSeconds",
                                   "may not specify a duration larger than 2^32 seconds", exp))
        if errs:
            raise invalid("TokenRequest", "authentication.k8s.io", name, errs)
        if not spec.get("audiences"):
            spec["audiences"] = list(API_AUDIENCES)
        spec.setdefault("boundObjectRef", None)
        uid = sa["metadata"]["uid"]
        token = "muster-test." + secrets.token_urlsafe(32)
        expires = time.time() + exp
        u = user(sa_username(ns, name), ["system:serviceaccounts", f"system:serviceaccounts:{ns}",
                                         AUTHENTICATED], uid)
        with self.lock:
            self.issued[token] = {"user": u, "audiences": list(spec["audiences"]), "expires": expires,
                                  "sa": (ns, name, uid)}
        meta = req.setdefault("metadata", {})
        meta.update({"name": name, "namespace": ns, "creationTimestamp": _rfc3339(time.time())})
        req.update({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"})
        req["status"] = {"token": token, "expirationTimestamp": _rfc3339(expires)}
        return req

    def authenticate(self, objects, token, audiences=None):
        """(user, audiences, error): the token's user if it is one this server
        issued, unexpired, for one of `audiences` (default the API's own), and
        its service account still exists with the same uid."""
        wanted = audiences or API_AUDIENCES
        with self.lock:
            t = self.issued.get(token)
        if t is None:
            return None, [], "invalid bearer token"
        if time.time() >= t["expires"]:
            return None, [], "invalid bearer token, token has expired"
        both = [a for a in wanted if a in t["audiences"]]
        if not both:
            return None, [], (f"invalid bearer token, token audiences {_go_quoted(t['audiences'])} is invalid "
                              f"for the target audiences {_go_quoted(wanted)}")
        ns, name, uid = t["sa"]
        sa = objects[SERVICE_ACCOUNTS].get((ns, name))
        if sa is None:
            return None, [], f'invalid bearer token, serviceaccounts "{name}" not found'
        if sa["metadata"]["uid"] != uid:
            return None, [], (f"invalid bearer token, service account UID ({sa['metadata']['uid']}) "
                              f"does not match claim ({uid})")
        return copy.deepcopy(t["user"]), both, None

    def review(self, objects, body):
        """tokenreview REST.Create."""
        review = copy.deepcopy(body) if isinstance(body, dict) else {}
        spec = review.setdefault("spec", {})
        token = spec.get("token") or ""
        if not token:
            raise ApiError(400, "BadRequest", "token is required for TokenReview in authentication")
        u, auds, err = self.authenticate(objects, token, spec.get("audiences") or None)
        status = {"authenticated": u is not None, "user": {}}
        if err:
            status["error"] = err
        if u is not None:
            status["user"] = {k: v for k, v in u.items() if v}
            status["audiences"] = auds
        review.update({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "status": status})
        review.setdefault("metadata", {})["creationTimestamp"] = None
        return review


def _go_quoted(values):
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


# ---------------------------------------------------------------- access reviews

def _review_attrs(spec):
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if ra is not None:
        return {"resourceRequest": True, "path": "", "verb": ra.get("verb", ""),
                "apiGroup": ra.get("group", ""), "apiVersion": ra.get("version", ""),
                "namespace": ra.get("namespace", ""), "resource": ra.get("resource", ""),
                "subresource": ra.get("subresource", ""), "name": ra.get("name", "")}
    return {"resourceRequest": False, "path": nra.get("path", ""), "verb": nra.get("verb", "")}


def _spec_errors(spec, need_subject):
    """ValidateSubjectAccessReviewSpec (the current union form: both errors
    on `spec`)."""
    errs = []
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    union = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
    if ra is not None and nra is not None:
        shown = (f'authorization.NonResourceAttributes{{Path:"{nra.get("path", "")}", '
                 f'Verb:"{nra.get("verb", "")}"}}')
        errs.append(FieldError("invalid", "spec", f"{shown}: {union}"))
    if ra is None and nra is None:
        errs.append(FieldError("invalid", "spec", union, "null"))
    if need_subject and not spec.get("user") and not spec.get("groups"):
        errs.append(FieldError("invalid", "spec.user", "at least one of user or group must be specified", ""))
    return errs


def subject_access_review(objects, body):
    """subjectaccessreview REST.Create: the authorizer's decision for the
    spec's user and groups (taken as given: no group is added)."""
    review = copy.deepcopy(body) if isinstance(body, dict) else {}
    spec = review.setdefault("spec", {})
    errs = _spec_errors(spec, True)
    if errs:
        raise invalid("SubjectAccessReview", "authorization.k8s.io", "", errs)
    u = user(spec.get("user") or "", spec.get("groups") or [], spec.get("uid") or "")
    allowed, reason = authorize(objects, u, _review_attrs(spec))
    review.update({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview"})
    review["status"] = {"allowed": allowed, **({"reason": reason} if reason else {})}
    review.setdefault("metadata", {})["creationTimestamp"] = None
    return review


def self_subject_access_review(objects, u, body):
    """selfsubjectaccessreview REST.Create: the same for the requesting user."""
    review = copy.deepcopy(body) if isinstance(body, dict) else {}
    spec = review.setdefault("spec", {})
    errs = _spec_errors(spec, False)
    if errs:
        raise invalid("SelfSubjectAccessReview", "authorization.k8s.io", "", errs)
    allowed, reason = authorize(objects, u, _review_attrs(spec))
    review.update({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"})
    review["status"] = {"allowed": allowed, **({"reason": reason} if reason else {})}
    review.setdefault("metadata", {})["creationTimestamp"] = None
    return review
