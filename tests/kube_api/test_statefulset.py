"""The StatefulSet stand-in (statefulset_controller.py) and the StatefulSet
admission rules (statefulset_rules.py), against a running server.

Run: python3 -m unittest discover -s tests/kube_api -p 'test_*.py'
"""

import unittest

from test_apiserver import PODS, Server, causes, wait

STS = "/apis/apps/v1/namespaces/default/statefulsets"


def sts(name, replicas=3, policy=None, labels=None, **spec):
    labels = labels or {"app": name}
    body = {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
        **spec}}
    if policy:
        body["spec"]["podManagementPolicy"] = policy
    return body


class StatefulSets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--pod-termination-secs", "0.2")

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def create(self, body):
        code, obj, _ = self.srv.req("POST", STS, body)
        self.assertEqual(code, 201, obj)
        return obj

    def names(self, app):
        items = self.srv.ok("GET", PODS + "?labelSelector=app%3D" + app)["items"]
        return sorted((p["metadata"]["name"] for p in items), key=lambda n: int(n.rsplit("-", 1)[1]))

    def run_pod(self, name, ready=True):
        self.srv.status_merge(PODS + "/" + name, {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]})

    def get(self, name):
        return self.srv.ok("GET", STS + "/" + name)

    def test_defaults_and_validation(self):
        obj = self.create(sts("v-ok"))
        self.assertEqual(obj["spec"]["podManagementPolicy"], "OrderedReady")
        self.assertEqual(obj["spec"]["updateStrategy"], {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        self.assertEqual(obj["spec"]["template"]["spec"]["restartPolicy"], "Always")
        body = sts("v-bad", replicas=-1, policy="Sometimes")
        del body["spec"]["selector"]
        code, err, _ = self.srv.req("POST", STS, body)
        self.assertEqual((code, err["reason"]), (422, "Invalid"), err)
        self.assertEqual(set(causes(err)), {("spec.replicas", "FieldValueInvalid"),
                                             ("spec.podManagementPolicy", "FieldValueInvalid"),
                                             ("spec.selector", "FieldValueRequired")})
        body = sts("v-mismatch")
        body["spec"]["selector"] = {"matchLabels": {"app": "other"}}
        code, err, _ = self.srv.req("POST", STS, body)
        self.assertIn(("spec.template.metadata.labels", "FieldValueInvalid"), causes(err))
        body = sts("v-never")
        body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
        code, err, _ = self.srv.req("POST", STS, body)
        self.assertIn(("spec.template.spec.restartPolicy", "FieldValueNotSupported"), causes(err))
        # only replicas, template, updateStrategy (and a few more) may change
        code, err, _ = self.srv.merge(STS + "/v-ok", {"spec": {"podManagementPolicy": "Parallel"}})
        self.assertEqual(code, 422, err)
        self.assertIn(("spec", "FieldValueForbidden"), causes(err))
        self.assertEqual(self.srv.merge(STS + "/v-ok", {"spec": {"replicas": 0}})[0], 200)

    def test_ordered_ready_creates_one_at_a_time_and_scales_down_from_the_top(self):
        self.create(sts("web"))
        self.assertEqual(self.names("web"), ["web-0"])
        pod = self.srv.ok("GET", PODS + "/web-0")
        ref = pod["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["kind"], ref["name"], ref["controller"]), ("StatefulSet", "web", True))
        labels = pod["metadata"]["labels"]
        self.assertEqual((labels["statefulset.kubernetes.io/pod-name"], labels["apps.kubernetes.io/pod-index"]),
                         ("web-0", "0"))
        self.assertEqual(labels["controller-revision-hash"], self.get("web")["status"]["updateRevision"])
        self.assertEqual(pod["spec"]["hostname"], "web-0")
        self.run_pod("web-0", ready=False)  # Running but not Ready: still waits
        self.assertEqual(self.names("web"), ["web-0"])
        self.run_pod("web-0")
        self.assertEqual(self.names("web"), ["web-0", "web-1"])
        self.run_pod("web-1")
        self.run_pod("web-2")
        st = self.get("web")["status"]
        self.assertEqual((st["replicas"], st["readyReplicas"], st["availableReplicas"], st["currentReplicas"],
                          st["updatedReplicas"], st["observedGeneration"]), (3, 3, 3, 3, 3, 1))
        # scale down: none while a pod in range is not Running and Ready;
        # then from the highest, one at a time (web-2, bound, terminates gracefully)
        self.srv.ok("POST", PODS + "/web-2/binding", {"target": {"kind": "Node", "name": "n1"}})
        self.run_pod("web-0", ready=False)
        self.srv.merge(STS + "/web", {"spec": {"replicas": 1}})
        self.assertEqual(self.names("web"), ["web-0", "web-1", "web-2"])
        self.run_pod("web-0")
        self.assertIn("deletionTimestamp", self.srv.ok("GET", PODS + "/web-2")["metadata"])
        self.assertNotIn("deletionTimestamp", self.srv.ok("GET", PODS + "/web-1")["metadata"])
        wait("web-2 and then web-1 gone", lambda: self.names("web") == ["web-0"])

    def test_ordered_ready_with_a_gated_pod_0_never_creates_pod_1(self):
        body = sts("gated", replicas=2)
        body["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        self.create(body)
        self.assertEqual(self.names("gated"), ["gated-0"])
        self.srv.status_merge(PODS + "/gated-0", {"conditions": [{"type": "PodScheduled", "status": "False",
                                                                   "reason": "SchedulingGated"}]})
        self.assertEqual(self.names("gated"), ["gated-0"])
        self.assertEqual(self.get("gated")["status"]["replicas"], 1)

    def test_parallel_creates_all_and_recreates_a_pod_only_once_its_predecessor_is_gone(self):
        self.create(sts("par", replicas=3, policy="Parallel", ordinals={"start": 5}))
        self.assertEqual(self.names("par"), ["par-5", "par-6", "par-7"])
        self.srv.ok("POST", PODS + "/par-6/binding", {"target": {"kind": "Node", "name": "n1"}})
        old = self.srv.ok("GET", PODS + "/par-6")["metadata"]["uid"]
        self.srv.ok("DELETE", PODS + "/par-6")  # bound: terminates gracefully
        p = self.srv.ok("GET", PODS + "/par-6")
        self.assertEqual(p["metadata"]["uid"], old)
        self.assertIn("deletionTimestamp", p["metadata"])
        wait("par-6 made again", lambda: self.srv.ok("GET", PODS + "/par-6")["metadata"]["uid"] != old)
        # a failed pod is deleted and made again
        failed = self.srv.ok("GET", PODS + "/par-7")["metadata"]["uid"]
        self.srv.status_merge(PODS + "/par-7", {"phase": "Failed"})
        p = self.srv.ok("GET", PODS + "/par-7")
        self.assertNotEqual(p["metadata"]["uid"], failed)
        self.assertEqual(p["status"]["phase"], "Pending")
        # scale down in parallel
        self.srv.merge(STS + "/par", {"spec": {"replicas": 1}})
        self.assertEqual(self.names("par"), ["par-5"])

    def test_rolling_update_from_the_highest_ordinal(self):
        self.create(sts("roll", replicas=2, policy="Parallel"))
        for n in ("roll-0", "roll-1"):
            self.run_pod(n)
        before = self.get("roll")["status"]["updateRevision"]
        self.srv.merge(STS + "/roll", {"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}})
        st = self.get("roll")["status"]
        self.assertNotEqual(st["updateRevision"], before)
        self.assertEqual(st["currentRevision"], before)
        self.assertEqual(self.names("roll"), ["roll-0", "roll-1"])
        rev = lambda n: self.srv.ok("GET", PODS + "/" + n)["metadata"]["labels"]["controller-revision-hash"]  # noqa: E731
        self.assertEqual((rev("roll-0"), rev("roll-1")), (before, st["updateRevision"]))
        self.run_pod("roll-1")
        self.assertEqual(rev("roll-0"), st["updateRevision"])
        self.run_pod("roll-0")
        self.assertEqual(self.get("roll")["status"]["currentRevision"], st["updateRevision"])

    def test_deleting_the_set_deletes_its_pods(self):
        self.create(sts("gone", replicas=2, policy="Parallel"))
        self.assertEqual(len(self.names("gone")), 2)
        self.srv.ok("DELETE", STS + "/gone")
        self.assertEqual(self.names("gone"), [])


if __name__ == "__main__":
    unittest.main()
