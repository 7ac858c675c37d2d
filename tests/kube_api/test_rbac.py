"""RBAC in the API test server (rbac.py): rule matching, bindings, the
authorizer behind --authorize and its 403, ClusterRole aggregation, the
RBAC objects' validation, TokenRequest, TokenReview and the access reviews.

Run: python3 -m unittest discover -s tests/kube_api -p 'test_*.py'
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rbac  # noqa: E402
from test_apiserver import Server  # noqa: E402

RBAC = "/apis/rbac.authorization.k8s.io/v1"
SAR = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
TOKENREVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def res(verb, resource, group="", ns="", name="", sub=""):
    return {"resourceRequest": True, "path": "", "verb": verb, "apiGroup": group, "apiVersion": "v1",
            "namespace": ns, "resource": resource, "subresource": sub, "name": name}


def nonres(verb, path):
    return {"resourceRequest": False, "path": path, "verb": verb}


def rule(verbs, resources=(), groups=("",), names=(), urls=()):
    r = {"verbs": list(verbs)}
    if urls:
        r["nonResourceURLs"] = list(urls)
    else:
        r.update({"apiGroups": list(groups), "resources": list(resources)})
    if names:
        r["resourceNames"] = list(names)
    return r


def binding(name, role_kind, role, subjects, ns=None):
    meta = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {"metadata": meta, "roleRef": {"apiGroup": rbac.GROUP, "kind": role_kind, "name": role},
            "subjects": subjects}


def user_subject(name):
    return {"kind": "User", "name": name, "apiGroup": rbac.GROUP}


class RuleMatching(unittest.TestCase):
    """evaluation_helpers.go and rbac.go RuleAllows."""

    def test_verbs_groups_resources_exact_and_wildcard(self):
        r = rule(["get", "list"], ["pods"])
        self.assertTrue(rbac.rule_allows(res("get", "pods"), r))
        self.assertFalse(rbac.rule_allows(res("delete", "pods"), r))
        self.assertFalse(rbac.rule_allows(res("get", "pods", group="apps"), r))
        self.assertFalse(rbac.rule_allows(res("get", "jobs"), r))
        self.assertTrue(rbac.rule_allows(res("delete", "jobs", group="batch"), rule(["*"], ["*"], ["*"])))

    def test_subresources(self):
        # "pods" does not cover pods/status; "pods/status" and "*/status" do
        self.assertFalse(rbac.rule_allows(res("update", "pods", sub="status"), rule(["update"], ["pods"])))
        self.assertTrue(rbac.rule_allows(res("update", "pods", sub="status"), rule(["update"], ["pods/status"])))
        self.assertTrue(rbac.rule_allows(res("update", "jobs", "batch", sub="status"),
                                         rule(["update"], ["*/status"], ["batch"])))
        self.assertFalse(rbac.rule_allows(res("create", "pods", sub="eviction"), rule(["create"], ["*/status"])))
        # "*/status" is for subresources only
        self.assertFalse(rbac.rule_allows(res("update", "status"), rule(["update"], ["*/status"])))
        self.assertTrue(rbac.rule_allows(res("update", "pods", sub="status"), rule(["update"], ["*"])))

    def test_resource_names(self):
        r = rule(["get", "update"], ["configmaps"], names=["a"])
        self.assertTrue(rbac.rule_allows(res("get", "configmaps", name="a"), r))
        self.assertFalse(rbac.rule_allows(res("get", "configmaps", name="b"), r))
        # a list names no object: resourceNames do not cover it
        self.assertFalse(rbac.rule_allows(res("list", "configmaps"), rule(["list"], ["configmaps"], names=["a"])))

    def test_non_resource_urls(self):
        r = rule(["get"], urls=["/healthz", "/apis/*"])
        self.assertTrue(rbac.rule_allows(nonres("get", "/healthz"), r))
        self.assertFalse(rbac.rule_allows(nonres("get", "/healthz/ping"), r))
        self.assertTrue(rbac.rule_allows(nonres("get", "/apis/batch/v1"), r))
        self.assertTrue(rbac.rule_allows(nonres("get", "/apis/"), r))
        self.assertFalse(rbac.rule_allows(nonres("get", "/apis"), r))
        self.assertFalse(rbac.rule_allows(nonres("post", "/healthz"), r))
        self.assertTrue(rbac.rule_allows(nonres("get", "/anything"), rule(["get"], urls=["*"])))
        # a resource rule never allows a non-resource request and back
        self.assertFalse(rbac.rule_allows(nonres("get", "/api"), rule(["*"], ["*"], ["*"])))
        self.assertFalse(rbac.rule_allows(res("get", "pods"), rule(["*"], urls=["*"])))


class RequestInfo(unittest.TestCase):
    """requestinfo.go NewRequestInfo."""

    def test_verbs_from_method_and_query(self):
        ri = rbac.request_info
        self.assertEqual(ri("GET", "/api/v1/namespaces/a/pods")["verb"], "list")
        self.assertEqual(ri("GET", "/api/v1/namespaces/a/pods?watch=true")["verb"], "watch")
        self.assertEqual(ri("GET", "/api/v1/namespaces/a/pods/p")["verb"], "get")
        self.assertEqual(ri("DELETE", "/api/v1/namespaces/a/pods")["verb"], "deletecollection")
        self.assertEqual(ri("PATCH", "/apis/batch/v1/namespaces/a/jobs/j/status")["verb"], "patch")
        got = ri("PUT", "/apis/batch/v1/namespaces/a/jobs/j/status")
        self.assertEqual((got["apiGroup"], got["namespace"], got["resource"], got["name"], got["subresource"]),
                         ("batch", "a", "jobs", "j", "status"))

    def test_field_selector_names_the_object(self):
        got = rbac.request_info("GET", "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dcm&watch=1")
        self.assertEqual((got["verb"], got["name"]), ("watch", "cm"))

    def test_namespace_object_is_in_its_own_namespace(self):
        got = rbac.request_info("GET", "/api/v1/namespaces/a")
        self.assertEqual((got["resource"], got["name"], got["namespace"]), ("namespaces", "a", "a"))
        got = rbac.request_info("PUT", "/api/v1/namespaces/a/status")
        self.assertEqual((got["resource"], got["name"], got["subresource"]), ("namespaces", "a", "status"))
        self.assertEqual(rbac.request_info("GET", "/api/v1/namespaces")["namespace"], "")

    def test_discovery_is_non_resource(self):
        for path in ("/api", "/api/v1", "/apis", "/apis/batch", "/apis/batch/v1", "/version"):
            got = rbac.request_info("GET", path)
            self.assertFalse(got["resourceRequest"], path)
            self.assertEqual((got["verb"], got["path"]), ("get", path))


class Authorizer(unittest.TestCase):
    """rule.go VisitRulesFor / appliesTo and rbac.go Authorize, on objects
    as the store holds them."""

    def objects(self, roles=(), cluster_roles=(), bindings=(), cluster_bindings=(), sas=()):
        objs = {k: {} for k in rbac.KINDS}
        objs[rbac.SERVICE_ACCOUNTS] = {}
        for key, items in ((rbac.ROLES, roles), (rbac.CLUSTER_ROLES, cluster_roles), (rbac.BINDINGS, bindings),
                           (rbac.CLUSTER_BINDINGS, cluster_bindings)):
            for o in items:
                objs[key][(o["metadata"].get("namespace", ""), o["metadata"]["name"])] = o
        return objs

    def test_role_binding_to_cluster_role_is_scoped_to_its_namespace(self):
        objs = self.objects(
            cluster_roles=[{"metadata": {"name": "pod-reader"}, "rules": [rule(["get"], ["pods"])]}],
            bindings=[binding("read", "ClusterRole", "pod-reader", [user_subject("alice")], "a")])
        alice = rbac.user_from_name("alice")
        ok, reason = rbac.authorize(objs, alice, res("get", "pods", ns="a", name="p"))
        self.assertTrue(ok)
        self.assertEqual(reason, 'RBAC: allowed by RoleBinding "read/a" of ClusterRole "pod-reader" to User "alice"')
        self.assertFalse(rbac.authorize(objs, alice, res("get", "pods", ns="b", name="p"))[0])
        self.assertFalse(rbac.authorize(objs, alice, res("list", "pods"))[0])  # all namespaces
        self.assertFalse(rbac.authorize(objs, rbac.user_from_name("bob"), res("get", "pods", ns="a"))[0])

    def test_role_binding_to_role_of_its_namespace(self):
        objs = self.objects(
            roles=[{"metadata": {"name": "r", "namespace": "a"}, "rules": [rule(["list"], ["jobs"], ["batch"])]},
                   {"metadata": {"name": "r", "namespace": "b"}, "rules": [rule(["*"], ["*"], ["*"])]}],
            bindings=[binding("rb", "Role", "r", [user_subject("alice")], "a")])
        alice = rbac.user_from_name("alice")
        self.assertTrue(rbac.authorize(objs, alice, res("list", "jobs", "batch", ns="a"))[0])
        self.assertFalse(rbac.authorize(objs, alice, res("delete", "jobs", "batch", ns="a", name="j"))[0])

    def test_cluster_role_binding_covers_every_namespace(self):
        objs = self.objects(
            cluster_roles=[{"metadata": {"name": "nodes"}, "rules": [rule(["list", "watch"], ["nodes", "pods"])]}],
            cluster_bindings=[binding("nodes", "ClusterRole", "nodes",
                                      [{"kind": "Group", "name": "ops", "apiGroup": rbac.GROUP}])])
        ops = rbac.user_from_name("carol", ["ops"])
        ok, reason = rbac.authorize(objs, ops, res("watch", "pods", ns="z"))
        self.assertTrue(ok)
        self.assertEqual(reason, 'RBAC: allowed by ClusterRoleBinding "nodes" of ClusterRole "nodes" to Group "ops"')
        self.assertTrue(rbac.authorize(objs, ops, res("list", "nodes"))[0])
        self.assertFalse(rbac.authorize(objs, rbac.user_from_name("carol"), res("list", "nodes"))[0])

    def test_service_account_subjects(self):
        sa = rbac.user_from_name("system:serviceaccount:a:ctl")
        self.assertEqual(sa["groups"], ["system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"])
        objs = self.objects(
            cluster_roles=[{"metadata": {"name": "cm"}, "rules": [rule(["get"], ["configmaps"])]}],
            # no namespace: the binding's own
            bindings=[binding("local", "ClusterRole", "cm", [{"kind": "ServiceAccount", "name": "ctl"}], "a"),
                      binding("other", "ClusterRole", "cm",
                              [{"kind": "ServiceAccount", "name": "ctl", "namespace": "a"}], "b")])
        ok, reason = rbac.authorize(objs, sa, res("get", "configmaps", ns="a"))
        self.assertTrue(ok)
        self.assertEqual(reason, 'RBAC: allowed by RoleBinding "local/a" of ClusterRole "cm" to '
                                 'ServiceAccount "ctl/a"')
        self.assertTrue(rbac.authorize(objs, sa, res("get", "configmaps", ns="b"))[0])
        self.assertFalse(rbac.authorize(objs, rbac.user_from_name("system:serviceaccount:b:ctl"),
                                        res("get", "configmaps", ns="b"))[0])
        # a ClusterRoleBinding's ServiceAccount subject without a namespace applies to nobody
        objs = self.objects(
            cluster_roles=[{"metadata": {"name": "cm"}, "rules": [rule(["get"], ["configmaps"])]}],
            cluster_bindings=[binding("c", "ClusterRole", "cm", [{"kind": "ServiceAccount", "name": "ctl"}])])
        self.assertFalse(rbac.authorize(objs, sa, res("get", "configmaps", ns="a"))[0])

    def test_missing_role_is_the_denials_reason(self):
        objs = self.objects(bindings=[binding("rb", "Role", "gone", [user_subject("alice")], "a")])
        ok, reason = rbac.authorize(objs, rbac.user_from_name("alice"), res("get", "pods", ns="a"))
        self.assertFalse(ok)
        self.assertEqual(reason, 'RBAC: role.rbac.authorization.k8s.io "gone" not found')

    def test_system_masters_always_allowed(self):
        self.assertTrue(rbac.authorize(self.objects(), rbac.user_from_name("admin"), res("delete", "nodes"))[0])
        self.assertTrue(rbac.authorize(self.objects(), rbac.user_from_name("x", ["system:masters"]),
                                       nonres("post", "/x"))[0])


class ForbiddenMessage(unittest.TestCase):
    """responsewriters/errors.go forbiddenMessage and errors.go NewForbidden."""

    def test_shapes(self):
        u = rbac.user_from_name("alice")
        e = rbac.forbidden(u, res("get", "pods", ns="a", name="p"))
        self.assertEqual(e.message, 'pods "p" is forbidden: User "alice" cannot get resource "pods" in API group "" '
                                    'in the namespace "a"')
        self.assertEqual((e.code, e.reason, e.details), (403, "Forbidden", {"name": "p", "kind": "pods"}))
        e = rbac.forbidden(u, res("list", "jobs", "batch"))
        self.assertEqual(e.message, 'jobs.batch is forbidden: User "alice" cannot list resource "jobs" in API group '
                                    '"batch" at the cluster scope')
        e = rbac.forbidden(u, res("update", "jobs", "batch", "a", "j", "status"), "RBAC: x")
        self.assertEqual(e.message, 'jobs.batch "j" is forbidden: User "alice" cannot update resource "jobs/status" '
                                    'in API group "batch" in the namespace "a": RBAC: x')
        self.assertEqual(e.details, {"name": "j", "group": "batch", "kind": "jobs"})
        e = rbac.forbidden(u, nonres("get", "/metrics"))
        self.assertEqual(e.message, 'forbidden: User "alice" cannot get path "/metrics"')
        self.assertEqual(e.details, {})


class Served(unittest.TestCase):
    """The RBAC kinds, the authorizer and the reviews against a server."""

    def setUp(self):
        self.srv = Server("--authorize", "--namespace", "a", "--namespace", "b")

    def tearDown(self):
        self.srv.stop()

    def as_(self, who, method, path, body=None, groups=None, ctype="application/json"):
        h = {"x-audit-as": who}
        if groups:
            h["x-audit-groups"] = groups
        code, obj, _ = self.srv.req(method, path, body, ctype, h)
        return code, obj

    def grant(self, ns, name, rules, subjects):
        self.srv.ok("POST", f"{RBAC}/namespaces/{ns}/roles", {"metadata": {"name": name}, "rules": rules})
        self.srv.ok("POST", f"{RBAC}/namespaces/{ns}/rolebindings", binding(name, "Role", name, subjects))

    def test_admin_and_unnamed_clients_do_everything(self):
        self.srv.ok("GET", "/api/v1/namespaces/a/pods")
        code, _ = self.as_("admin", "DELETE", "/api/v1/namespaces/a/configmaps")
        self.assertNotEqual(code, 403)

    def test_forbidden_status(self):
        code, obj = self.as_("alice", "GET", "/api/v1/namespaces/a/pods/p")
        self.assertEqual(code, 403)
        self.assertEqual(obj, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                               "message": 'pods "p" is forbidden: User "alice" cannot get resource "pods" in API '
                                          'group "" in the namespace "a"',
                               "reason": "Forbidden", "details": {"name": "p", "kind": "pods"}, "code": 403})
        # before the 404 of a resource the server does not serve
        code, obj = self.as_("alice", "GET", "/apis/example.com/v1/widgets")
        self.assertEqual(code, 403)
        self.assertEqual(obj["message"], 'widgets.example.com is forbidden: User "alice" cannot list resource '
                                         '"widgets" in API group "example.com" at the cluster scope')

    def test_authenticated_users_get_discovery_only(self):
        for path in ("/api", "/api/v1", "/apis", "/apis/batch/v1", "/version"):
            code, _ = self.as_("alice", "GET", path)
            self.assertEqual(code, 200, path)
        code, obj = self.as_("alice", "GET", "/api/v1/namespaces")
        self.assertEqual(code, 403)

    def test_role_grants_in_its_namespace(self):
        self.grant("a", "cm", [rule(["get", "list", "create"], ["configmaps"])], [user_subject("alice")])
        code, _ = self.as_("alice", "POST", "/api/v1/namespaces/a/configmaps", {"metadata": {"name": "x"}})
        self.assertEqual(code, 201)
        code, obj = self.as_("alice", "GET", "/api/v1/namespaces/a/configmaps/x")
        self.assertEqual((code, obj["metadata"]["name"]), (200, "x"))
        code, obj = self.as_("alice", "DELETE", "/api/v1/namespaces/a/configmaps/x")
        self.assertEqual(code, 403)
        code, obj = self.as_("alice", "GET", "/api/v1/namespaces/b/configmaps")
        self.assertEqual(code, 403)
        self.assertIn('in the namespace "b"', obj["message"])

    def test_group_header_and_service_account_name(self):
        self.srv.ok("POST", f"{RBAC}/clusterroles", {"metadata": {"name": "pods"},
                                                     "rules": [rule(["list"], ["pods"])]})
        self.srv.ok("POST", f"{RBAC}/clusterrolebindings", binding("pods", "ClusterRole", "pods", [
            {"kind": "Group", "name": "ops"},
            {"kind": "ServiceAccount", "name": "ctl", "namespace": "a"}]))
        self.assertEqual(self.as_("carol", "GET", "/api/v1/pods", groups="ops")[0], 200)
        self.assertEqual(self.as_("carol", "GET", "/api/v1/pods")[0], 403)
        self.assertEqual(self.as_("system:serviceaccount:a:ctl", "GET", "/api/v1/namespaces/b/pods")[0], 200)
        self.assertEqual(self.as_("system:serviceaccount:b:ctl", "GET", "/api/v1/pods")[0], 403)
        # SetDefaults_Subject gave the Group subject its apiGroup
        crb = self.srv.ok("GET", f"{RBAC}/clusterrolebindings/pods")
        self.assertEqual(crb["subjects"][0]["apiGroup"], rbac.GROUP)
        self.assertEqual(crb["subjects"][1].get("apiGroup", ""), "")

    def test_role_ref_is_immutable(self):
        self.grant("a", "r", [rule(["get"], ["pods"])], [user_subject("alice")])
        rb = self.srv.ok("GET", f"{RBAC}/namespaces/a/rolebindings/r")
        rb["roleRef"] = {"apiGroup": rbac.GROUP, "kind": "ClusterRole", "name": "view"}
        code, obj, _ = self.srv.req("PUT", f"{RBAC}/namespaces/a/rolebindings/r", rb)
        self.assertEqual(code, 422)
        self.assertEqual(obj["message"], 'RoleBinding.rbac.authorization.k8s.io "r" is invalid: roleRef: Invalid '
                                         'value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", '
                                         'Kind:"ClusterRole", Name:"view"}: cannot change roleRef')
        # subjects may change
        rb = self.srv.ok("GET", f"{RBAC}/namespaces/a/rolebindings/r")
        rb["subjects"] = [user_subject("bob")]
        self.srv.ok("PUT", f"{RBAC}/namespaces/a/rolebindings/r", rb)
        code, obj = self.srv.merge(f"{RBAC}/clusterrolebindings/system:discovery",
                                   {"roleRef": {"name": "cluster-admin"}})[:2]
        self.assertEqual(code, 422)

    def test_object_validation(self):
        code, obj, _ = self.srv.req("POST", f"{RBAC}/clusterrolebindings", binding("x", "Role", "r", [
            {"kind": "Robot", "name": "r2"}, {"kind": "ServiceAccount", "name": "s"}]))
        self.assertEqual(code, 422)
        fields = [c["field"] for c in obj["details"]["causes"]]
        self.assertEqual(fields, ["roleRef.kind", "subjects[0].kind", "subjects[1].namespace"])
        code, obj, _ = self.srv.req("POST", f"{RBAC}/namespaces/a/roles", {
            "metadata": {"name": "r"}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]},
                                                 {"verbs": [], "apiGroups": [""], "resources": ["pods"]}]})
        self.assertEqual(code, 422)
        self.assertEqual([c["field"] for c in obj["details"]["causes"]], ["rules[0].nonResourceURLs",
                                                                          "rules[1].verbs"])
        self.assertIn("namespaced rules cannot apply to non-resource URLs", obj["message"])
        # RBAC names are path segments: colons allowed
        self.srv.ok("POST", f"{RBAC}/clusterroles", {"metadata": {"name": "team:a"}, "rules": []})

    def test_cluster_role_aggregation(self):
        self.srv.ok("POST", f"{RBAC}/clusterroles", {
            "metadata": {"name": "agg"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}})
        self.srv.ok("POST", f"{RBAC}/clusterroles", {"metadata": {"name": "b-part", "labels": {"agg": "yes"}},
                                                     "rules": [rule(["get"], ["pods"]), rule(["list"], ["jobs"],
                                                                                             ["batch"])]})
        self.srv.ok("POST", f"{RBAC}/clusterroles", {"metadata": {"name": "a-part", "labels": {"agg": "yes"}},
                                                     "rules": [rule(["list"], ["jobs"], ["batch"])]})
        self.srv.ok("POST", f"{RBAC}/clusterroles", {"metadata": {"name": "c-other"},
                                                     "rules": [rule(["*"], ["*"], ["*"])]})
        agg = self.srv.ok("GET", f"{RBAC}/clusterroles/agg")
        # by the parts' names, each rule once
        self.assertEqual(agg["rules"], [rule(["list"], ["jobs"], ["batch"]), rule(["get"], ["pods"])])
        self.srv.ok("POST", f"{RBAC}/clusterrolebindings", binding("agg", "ClusterRole", "agg", [user_subject("al")]))
        self.assertEqual(self.as_("al", "GET", "/api/v1/namespaces/a/pods/p")[0], 404)
        self.srv.ok("DELETE", f"{RBAC}/clusterroles/b-part")
        self.assertEqual(self.srv.ok("GET", f"{RBAC}/clusterroles/agg")["rules"], [rule(["list"], ["jobs"],
                                                                                       ["batch"])])
        self.assertEqual(self.as_("al", "GET", "/api/v1/namespaces/a/pods/p")[0], 403)

    def test_subject_access_review(self):
        self.grant("a", "r", [rule(["get"], ["pods"])], [user_subject("alice")])
        sar = {"spec": {"user": "alice", "resourceAttributes": {"namespace": "a", "verb": "get", "resource": "pods"}}}
        out = self.srv.ok("POST", SAR, sar)
        self.assertEqual(out["status"], {"allowed": True, "reason": 'RBAC: allowed by RoleBinding "r/a" of Role "r" '
                                                                    'to User "alice"'})
        sar["spec"]["resourceAttributes"]["namespace"] = "b"
        self.assertEqual(self.srv.ok("POST", SAR, sar)["status"], {"allowed": False})
        # groups are taken as given: no system:authenticated unless sent
        nr = {"spec": {"user": "alice", "nonResourceAttributes": {"path": "/apis/batch", "verb": "get"}}}
        self.assertFalse(self.srv.ok("POST", SAR, nr)["status"]["allowed"])
        nr["spec"]["groups"] = ["system:authenticated"]
        self.assertTrue(self.srv.ok("POST", SAR, nr)["status"]["allowed"])
        nr["spec"]["groups"] = ["system:masters"]
        self.assertTrue(self.srv.ok("POST", SAR, {"spec": {"groups": ["system:masters"], "resourceAttributes": {
            "verb": "delete", "resource": "nodes"}}})["status"]["allowed"])
        code, obj, _ = self.srv.req("POST", SAR, {"spec": {"resourceAttributes": {"verb": "get"}}})
        self.assertEqual((code, [c["field"] for c in obj["details"]["causes"]]), (422, ["spec.user"]))
        code, obj, _ = self.srv.req("POST", SAR, {"spec": {"user": "x"}})
        self.assertEqual((code, obj["message"]), (422, 'SubjectAccessReview.authorization.k8s.io "" is invalid: '
                                                       'spec: Invalid value: "null": exactly one of '
                                                       'nonResourceAttributes or resourceAttributes must be specified'))
        # create only; and a user needs the right to ask
        self.assertEqual(self.srv.req("GET", SAR)[0], 405)
        self.assertEqual(self.as_("alice", "POST", SAR, sar)[0], 403)
        # SelfSubjectAccessReview: system:basic-user lets any authenticated user ask about itself
        code, obj = self.as_("alice", "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
            "spec": {"resourceAttributes": {"namespace": "a", "verb": "get", "resource": "pods"}}})
        self.assertEqual((code, obj["status"]["allowed"]), (201, True))

    def test_subject_access_review_without_authorize(self):
        srv = Server()
        try:
            out = srv.ok("POST", SAR, {"spec": {"user": "bob", "groups": ["system:authenticated"],
                                                "resourceAttributes": {"verb": "list", "resource": "pods"}}})
            self.assertFalse(out["status"]["allowed"])
            # and without --authorize nobody is refused
            code, _, _ = srv.req("GET", "/api/v1/pods", headers={"x-audit-as": "bob"})
            self.assertEqual(code, 200)
        finally:
            srv.stop()

    def test_token_request_review_and_bearer(self):
        path = "/api/v1/namespaces/a/serviceaccounts/ctl/token"
        code, obj, _ = self.srv.req("POST", path, {"spec": {}})
        self.assertEqual((code, obj["reason"]), (404, "NotFound"))
        sa = self.srv.ok("POST", "/api/v1/namespaces/a/serviceaccounts", {"metadata": {"name": "ctl"}})
        code, obj, _ = self.srv.req("POST", path, {"spec": {"expirationSeconds": 60}})
        self.assertEqual(code, 422)
        self.assertEqual(obj["details"]["causes"][0]["field"], "spec.expirationSeconds")
        tr = self.srv.ok("POST", path, {"spec": {}})
        self.assertEqual((tr["kind"], tr["spec"]["expirationSeconds"], tr["spec"]["audiences"]),
                         ("TokenRequest", 3600, rbac.API_AUDIENCES))
        token = tr["status"]["token"]
        self.assertTrue(tr["status"]["expirationTimestamp"].endswith("Z"))
        review = self.srv.ok("POST", TOKENREVIEWS, {"spec": {"token": token}})
        self.assertTrue(review["status"]["authenticated"])
        self.assertEqual(review["status"]["user"], {
            "username": "system:serviceaccount:a:ctl", "uid": sa["metadata"]["uid"],
            "groups": ["system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"]})
        self.assertEqual(review["status"]["audiences"], rbac.API_AUDIENCES)
        bad = self.srv.ok("POST", TOKENREVIEWS, {"spec": {"token": "nope"}})["status"]
        self.assertFalse(bad["authenticated"])
        self.assertTrue(bad["error"])
        code, obj, _ = self.srv.req("POST", TOKENREVIEWS, {"spec": {}})
        self.assertEqual(code, 400)
        # audiences: a token for "vault" is not one for the API, nor for "other"
        vault = self.srv.ok("POST", path, {"spec": {"audiences": ["vault"]}})["status"]["token"]
        self.assertEqual(self.srv.ok("POST", TOKENREVIEWS, {"spec": {"token": vault, "audiences": ["vault", "x"]}})
                         ["status"]["audiences"], ["vault"])
        st = self.srv.ok("POST", TOKENREVIEWS, {"spec": {"token": vault, "audiences": ["other"]}})["status"]
        self.assertFalse(st["authenticated"])
        self.assertIn("audiences", st["error"])
        # bearer: the token's service account is the user
        bearer = {"Authorization": f"Bearer {token}"}
        code, obj, _ = self.srv.req("GET", "/api/v1/namespaces/a/pods", headers=bearer)
        self.assertEqual(code, 403)
        self.assertIn('User "system:serviceaccount:a:ctl" cannot list', obj["message"])
        self.grant("a", "pods", [rule(["list"], ["pods"])], [{"kind": "ServiceAccount", "name": "ctl"}])
        self.assertEqual(self.srv.req("GET", "/api/v1/namespaces/a/pods", headers=bearer)[0], 200)
        code, obj, _ = self.srv.req("GET", "/api/v1/namespaces/a/pods", headers={"Authorization": "Bearer nope"})
        self.assertEqual((code, obj["reason"]), (401, "Unauthorized"))
        self.assertEqual(self.srv.req("GET", "/api/v1/namespaces/a/pods",
                                      headers={"Authorization": f"Bearer {vault}"})[0], 401)
        # deleting the service account ends its tokens
        self.srv.ok("DELETE", "/api/v1/namespaces/a/serviceaccounts/ctl")
        self.assertEqual(self.srv.req("GET", "/api/v1/namespaces/a/pods", headers=bearer)[0], 401)
        self.assertFalse(self.srv.ok("POST", TOKENREVIEWS, {"spec": {"token": token}})["status"]["authenticated"])


if __name__ == "__main__":
    unittest.main()
