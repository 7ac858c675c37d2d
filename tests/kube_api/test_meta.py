"""Generic ObjectMeta validation (meta_rules), NamespaceLifecycle and the
namespace life cycle (namespace_lifecycle), DefaultTolerationSeconds
(default_tolerations): each rule accepted and refused, against a running
server.

Run: python3 -m unittest discover -s tests/kube_api -p 'test_*.py'
"""

import os
import unittest

import yaml

from test_apiserver import Server, causes, wait

HERE = os.path.dirname(os.path.abspath(__file__))
CMS = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
NAMESPACES = "/api/v1/namespaces"


def cm(name, **meta):
    return {"metadata": {"name": name, **meta}, "data": {"a": "1"}}


def pod(name, **spec):
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}], **spec}}


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def refused(self, method, path, body, field, reason="FieldValueInvalid", ctype="application/json"):
        code, err, _ = self.srv.req(method, path, body, ctype)
        self.assertEqual(code, 422, err)
        self.assertIn((field, reason), causes(err), err)
        return err


class Names(Base):
    def test_names_are_dns_subdomains(self):
        self.srv.ok("POST", CMS, cm("a.b-c"))
        err = self.refused("POST", CMS, cm("Upper_Case"), "metadata.name")
        self.assertIn('ConfigMap "Upper_Case" is invalid: metadata.name: Invalid value: "Upper_Case": '
                      "a lowercase RFC 1123 subdomain must consist of", err["message"])
        self.refused("POST", CMS, cm("x" * 254), "metadata.name")
        self.srv.ok("POST", CMS, cm("x" * 253))

    def test_namespace_names_are_dns_labels_and_service_names_dns_1035(self):
        self.srv.ok("POST", NAMESPACES, {"metadata": {"name": "team-x"}})
        err = self.refused("POST", NAMESPACES, {"metadata": {"name": "a.b"}}, "metadata.name")
        self.assertIn("must not contain dots", err["message"])
        self.refused("POST", "/api/v1/namespaces/default/services", {"metadata": {"name": "1svc"}}, "metadata.name")
        self.srv.ok("POST", "/api/v1/namespaces/default/services", {"metadata": {"name": "svc1"}})

    def test_name_required_and_generate_name_is_a_prefix(self):
        err = self.refused("POST", CMS, {"metadata": {}}, "metadata.name", "FieldValueRequired")
        self.assertIn("name or generateName is required", err["message"])
        made = self.srv.ok("POST", CMS, {"metadata": {"generateName": "gen-"}})
        self.assertRegex(made["metadata"]["name"], r"^gen-[bcdfghjklmnpqrstvwxz2456789]{5}$")
        self.refused("POST", CMS, {"metadata": {"generateName": "Gen-"}}, "metadata.generateName")
        long = self.srv.ok("POST", CMS, {"metadata": {"generateName": "p" * 70}})
        self.assertEqual(len(long["metadata"]["name"]), 63)

    def test_custom_resource_definition_name_is_plural_dot_group(self):
        with open(os.path.join(HERE, "crds", "jobset.yaml"), encoding="utf-8") as f:
            crd = yaml.safe_load(f)
        crd["metadata"]["name"] = "jobsets.example.com"
        err = self.refused("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, "metadata.name")
        self.assertIn('must be spec.names.plural+"."+spec.group', err["message"])


class LabelsAndAnnotations(Base):
    def test_label_keys_are_qualified_names(self):
        self.srv.ok("POST", CMS, cm("l1", labels={"example.com/Key_1.x": "v", "plain": ""}))
        for key in ("-bad", "a/b/c", "/name", "Bad_Prefix.com/x", "example.com/" + "k" * 64):
            self.refused("POST", CMS, cm("l2", labels={key: "v"}), "metadata.labels")
        self.srv.ok("POST", CMS, cm("l3", labels={"example.com/" + "k" * 63: "v"}))

    def test_label_values_are_at_most_63_characters_of_the_label_charset(self):
        self.srv.ok("POST", CMS, cm("v1", labels={"k": "v" * 63}))
        err = self.refused("POST", CMS, cm("v2", labels={"k": "v" * 64}), "metadata.labels")
        self.assertIn(f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 characters',
                      err["message"])
        self.refused("POST", CMS, cm("v3", labels={"k": "a/b"}), "metadata.labels")
        self.refused("POST", CMS, cm("v4", labels={"k": "-a"}), "metadata.labels")

    def test_labels_checked_on_update_and_patch(self):
        self.srv.ok("POST", CMS, cm("u1"))
        code, err, _ = self.srv.merge(CMS + "/u1", {"metadata": {"labels": {"k": "x" * 64}}})
        self.assertEqual(code, 422, err)
        self.assertIn(("metadata.labels", "FieldValueInvalid"), causes(err))
        code, _, _ = self.srv.merge(CMS + "/u1", {"metadata": {"labels": {"k": "ok"}}})
        self.assertEqual(code, 200)

    def test_annotation_keys_and_total_size(self):
        self.srv.ok("POST", CMS, cm("a1", annotations={"Example.com/Any": "x" * 1000}))
        self.refused("POST", CMS, cm("a2", annotations={"bad key": "x"}), "metadata.annotations")
        self.srv.ok("POST", CMS, cm("a3", annotations={"k": "x" * (256 * 1024 - 1)}))
        err = self.refused("POST", CMS, cm("a4", annotations={"k": "x" * (256 * 1024)}), "metadata.annotations",
                           "FieldValueTooLong")
        self.assertIn("metadata.annotations: Too long: may not be more than 262144 bytes", err["message"])

    def test_job_template_labels(self):
        job = {"metadata": {"name": "tl"}, "spec": {"template": {
            "metadata": {"labels": {"gang": "g" * 64}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}
        self.refused("POST", "/apis/batch/v1/namespaces/default/jobs", job, "spec.template.metadata.labels")


class OwnersAndFinalizers(Base):
    REF = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u1"}

    def test_owner_reference_fields_required(self):
        self.srv.ok("POST", CMS, cm("o1", ownerReferences=[self.REF]))
        for field in ("kind", "name", "uid"):
            ref = {k: v for k, v in self.REF.items() if k != field}
            self.refused("POST", CMS, cm("o2", ownerReferences=[ref]), f"metadata.ownerReferences.{field}")
        ref = dict(self.REF, apiVersion="")
        err = self.refused("POST", CMS, cm("o3", ownerReferences=[ref]), "metadata.ownerReferences.apiVersion")
        self.assertIn("version must not be empty", err["message"])

    def test_at_most_one_controller(self):
        one = dict(self.REF, controller=True)
        two = dict(self.REF, name="k", uid="u2", controller=True)
        self.srv.ok("POST", CMS, cm("c1", ownerReferences=[one, dict(two, controller=False)]))
        err = self.refused("POST", CMS, cm("c2", ownerReferences=[one, two]), "metadata.ownerReferences")
        self.assertIn('Only one reference can have Controller set to true. Found "true" in references for Job/j and Job/k',
                      err["message"])

    def test_events_cannot_own(self):
        ref = dict(self.REF, apiVersion="v1", kind="Event")
        self.refused("POST", CMS, cm("e1", ownerReferences=[ref]), "metadata.ownerReferences")

    def test_finalizers_are_qualified_names_and_unprefixed_ones_warn(self):
        code, _, headers = self.srv.req("POST", CMS, cm("f1", finalizers=["example.com/hold"]))
        self.assertEqual(code, 201)
        self.assertNotIn("Warning", headers)
        code, _, headers = self.srv.req("POST", CMS, cm("f2", finalizers=["hold"]))
        self.assertEqual(code, 201)
        self.assertIn('metadata.finalizers: "hold": prefer a domain-qualified finalizer name', headers["Warning"])
        self.refused("POST", CMS, cm("f3", finalizers=["bad/fin/alizer"]), "metadata.finalizers")
        self.refused("POST", CMS, cm("f4", finalizers=["orphan", "foregroundDeletion"]), "metadata.finalizers")

    def test_no_new_finalizers_while_deleting(self):
        self.srv.ok("POST", CMS, cm("d1", finalizers=["example.com/a"]))
        self.srv.ok("DELETE", CMS + "/d1")
        code, err, _ = self.srv.merge(CMS + "/d1", {"metadata": {"finalizers": ["example.com/a", "example.com/b"]}})
        self.assertEqual(code, 422, err)
        self.assertIn(("metadata.finalizers", "FieldValueForbidden"), causes(err))
        self.srv.merge(CMS + "/d1", {"metadata": {"finalizers": None}})


class Update(Base):
    def test_uid_immutable_other_system_fields_kept(self):
        made = self.srv.ok("POST", CMS, cm("m1"))
        changed = dict(made, metadata=dict(made["metadata"], uid="other"))
        err = self.refused("PUT", CMS + "/m1", changed, "metadata.uid")
        self.assertIn('metadata.uid: Invalid value: "other": field is immutable', err["message"])
        no_uid = dict(made, metadata={k: v for k, v in made["metadata"].items() if k != "uid"})
        no_uid["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z"
        no_uid["data"] = {"a": "2"}
        kept = self.srv.ok("PUT", CMS + "/m1", no_uid)
        self.assertEqual(kept["metadata"]["uid"], made["metadata"]["uid"])
        self.assertEqual(kept["metadata"]["creationTimestamp"], made["metadata"]["creationTimestamp"])

    def test_name_and_namespace_must_match_the_request(self):
        made = self.srv.ok("POST", CMS, cm("m2"))
        code, _, _ = self.srv.req("PUT", CMS + "/m2", dict(made, metadata=dict(made["metadata"], name="m3")))
        self.assertEqual(code, 400)
        self.srv.ok("POST", NAMESPACES, {"metadata": {"name": "elsewhere"}})
        code, _, _ = self.srv.req("PUT", CMS + "/m2", dict(made, metadata=dict(made["metadata"], namespace="elsewhere")))
        self.assertEqual(code, 400)

    def test_namespace_forbidden_on_cluster_scoped_kinds_is_dropped_on_create(self):
        # BeforeCreate clears a cluster-scoped object's namespace before validation
        node = self.srv.ok("POST", "/api/v1/nodes", {"metadata": {"name": "n1", "namespace": "default"}})
        self.assertNotIn("namespace", node["metadata"])


class NamespaceLifecycle(Base):
    def test_system_namespaces_exist_and_are_immortal(self):
        names = {n["metadata"]["name"] for n in self.srv.ok("GET", NAMESPACES)["items"]}
        self.assertTrue({"default", "kube-system", "kube-public", "kube-node-lease"} <= names)
        for name in ("default", "kube-system", "kube-public"):
            code, err, _ = self.srv.req("DELETE", f"{NAMESPACES}/{name}")
            self.assertEqual(code, 403, err)
            self.assertEqual(err["message"], f'namespaces "{name}" is forbidden: this namespace may not be deleted')

    def test_new_namespaces_are_active_with_the_kubernetes_finalizer(self):
        ns = self.srv.ok("POST", NAMESPACES, {"metadata": {"name": "fresh"}})
        self.assertEqual(ns["status"], {"phase": "Active"})
        self.assertEqual(ns["spec"]["finalizers"], ["kubernetes"])

    def test_an_update_keeps_the_spec_finalizers(self):
        ns = self.srv.ok("POST", NAMESPACES, {"metadata": {"name": "kept"}})
        ns["spec"] = {}
        ns["metadata"]["labels"]["team"] = "x"
        updated = self.srv.ok("PUT", f"{NAMESPACES}/kept", ns)
        self.assertEqual(updated["spec"]["finalizers"], ["kubernetes"])
        self.assertEqual(updated["metadata"]["labels"]["team"], "x")

    def test_create_in_a_missing_namespace_is_not_found(self):
        code, err, _ = self.srv.req("POST", "/api/v1/namespaces/nowhere/configmaps", cm("x"))
        self.assertEqual(code, 404, err)
        self.assertEqual(err["message"], 'namespaces "nowhere" not found')
        self.assertEqual(err["details"]["kind"], "namespaces")
        code, err, _ = self.srv.req("POST", "/apis/batch/v1/namespaces/nowhere/jobs", {"metadata": {"name": "j"}})
        self.assertEqual(code, 404, err)

    def test_cluster_scoped_kinds_need_no_namespace(self):
        self.srv.ok("POST", "/api/v1/nodes", {"metadata": {"name": "free"}})

    def test_terminating_namespace_refuses_new_content_then_goes(self):
        self.srv.ok("POST", NAMESPACES, {"metadata": {"name": "doomed"}})
        base = "/api/v1/namespaces/doomed/configmaps"
        self.srv.ok("POST", base, cm("held", finalizers=["example.com/hold"]))
        self.srv.ok("POST", base, cm("free"))
        ns = self.srv.ok("DELETE", f"{NAMESPACES}/doomed")
        self.assertEqual(ns["status"]["phase"], "Terminating")
        self.assertTrue(ns["metadata"]["deletionTimestamp"])
        code, err, _ = self.srv.req("POST", base, cm("late"))
        self.assertEqual(code, 403, err)
        self.assertEqual(err["message"], 'configmaps "late" is forbidden: unable to create new content in '
                                         "namespace doomed because it is being terminated")
        self.assertEqual(err["details"]["causes"][0]["reason"], "NamespaceTerminating")
        self.assertEqual([c["metadata"]["name"] for c in self.srv.ok("GET", base)["items"]], ["held"])
        # an update in a Terminating namespace passes: the finalizer comes off
        code, _ = self.srv.merge(base + "/held", {"metadata": {"finalizers": None}})[:2]
        self.assertEqual(code, 200)
        code, _, _ = self.srv.req("GET", f"{NAMESPACES}/doomed")
        self.assertEqual(code, 404)
        self.srv.ok("POST", NAMESPACES, {"metadata": {"name": "doomed"}})
        self.srv.ok("POST", base, cm("again"))

    def test_empty_namespace_goes_at_once(self):
        self.srv.ok("POST", NAMESPACES, {"metadata": {"name": "empty"}})
        self.srv.ok("DELETE", f"{NAMESPACES}/empty")
        code, _, _ = self.srv.req("GET", f"{NAMESPACES}/empty")
        self.assertEqual(code, 404)


class DefaultTolerationSeconds(Base):
    NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300}
    UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                   "tolerationSeconds": 300}

    def test_pods_get_both_tolerations(self):
        made = self.srv.ok("POST", PODS, pod("t1", tolerations=[{"key": "gpu", "operator": "Exists"}]))
        self.assertEqual(made["spec"]["tolerations"],
                         [{"key": "gpu", "operator": "Exists"}, self.NOT_READY, self.UNREACHABLE])

    def test_present_tolerations_are_kept(self):
        own = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 10}
        made = self.srv.ok("POST", PODS, pod("t2", tolerations=[own]))
        self.assertEqual(made["spec"]["tolerations"], [own, self.UNREACHABLE])
        everything = {"operator": "Exists"}
        made = self.srv.ok("POST", PODS, pod("t3", tolerations=[everything]))
        self.assertEqual(made["spec"]["tolerations"], [everything])

    def test_job_pods_get_them_but_not_the_template(self):
        job = {"metadata": {"name": "jt"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}
        made = self.srv.ok("POST", "/apis/batch/v1/namespaces/default/jobs", job)
        self.assertNotIn("tolerations", made["spec"]["template"]["spec"])
        pods = wait("job pod", lambda: [p for p in self.srv.ok("GET", PODS)["items"]
                                        if p["metadata"]["name"].startswith("jt-")])
        self.assertIn(self.NOT_READY, pods[0]["spec"]["tolerations"])


if __name__ == "__main__":
    unittest.main()
