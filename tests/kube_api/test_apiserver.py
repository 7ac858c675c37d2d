"""The API test server's own rules, each against a running server.

Run: python3 -m unittest discover -s tests/kube_api -p 'test_*.py'
(needs cel-python, PyYAML: .ci/requirements.txt).
"""

import base64
import http.client
import json
import os
import subprocess
import sys
import time
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CRDS = os.path.join(HERE, "..", "..", "crds", "yaml")


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "apiserver.py"), "--port", "0", *args],
                                     stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        self.port = int(line.strip().rsplit(":", 1)[1])

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stdin.close()

    def req(self, method, path, body=None, ctype="application/json", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        data = None if body is None else json.dumps(body)
        h = {"Content-Type": ctype, **(headers or {})}
        conn.request(method, path, data, h)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp.status, (json.loads(raw) if raw else None), dict(resp.getheaders())

    def ok(self, method, path, body=None, ctype="application/json"):
        code, obj, _ = self.req(method, path, body, ctype)
        if code >= 300:
            raise AssertionError(f"{method} {path}: {code} {obj}")
        return obj

    def status_merge(self, path, status):
        return self.ok("PATCH", path + "/status", {"status": status}, "application/merge-patch+json")

    def merge(self, path, patch):
        return self.req("PATCH", path, patch, "application/merge-patch+json")


JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


def job(name, suspend=False, pods=1, **template_spec):
    spec = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}], **template_spec}
    return {"metadata": {"name": name}, "spec": {"parallelism": pods, "completions": pods, "suspend": suspend,
                                                 "template": {"spec": spec}}}


def causes(obj):
    return [(c["field"], c["reason"]) for c in obj["details"].get("causes", [])]


def owned_pods(srv, uid):
    items = srv.ok("GET", PODS)["items"]
    return [p for p in items if any(r["uid"] == uid for r in p["metadata"].get("ownerReferences") or [])]


def wait(what, check, secs=5.0):
    deadline = time.monotonic() + secs
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Base(unittest.TestCase):
    args = ["--pod-termination-secs", "0.3"]

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(*cls.args)

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()


class JobRules(Base):
    def test_defaults_generated_selector_and_immediate_start(self):
        created = self.srv.ok("POST", JOBS, job("run", pods=2))
        uid = created["metadata"]["uid"]
        spec = created["spec"]
        self.assertEqual(spec["selector"], {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        self.assertEqual(spec["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"], "run")
        self.assertEqual((spec["backoffLimit"], spec["completionMode"]), (6, "NonIndexed"))
        # the Job controller ran before the create returned
        stored = self.srv.ok("GET", JOBS + "/run")
        self.assertTrue(stored["status"]["startTime"])
        self.assertEqual(stored["status"]["active"], 2)
        self.assertEqual(len(owned_pods(self.srv, uid)), 2)

    def test_scheduling_directives_mutable_only_while_suspended_and_never_started(self):
        self.srv.ok("POST", JOBS, job("dir", suspend=True))
        j = self.srv.ok("GET", JOBS + "/dir")
        self.assertNotIn("startTime", j.get("status") or {})
        self.assertEqual(owned_pods(self.srv, j["metadata"]["uid"]), [])
        # suspended, never started: nodeSelector, tolerations, labels, annotations, gates may change
        code, _, _ = self.srv.merge(JOBS + "/dir", {"spec": {"template": {
            "metadata": {"labels": {"x": "y"}, "annotations": {"a": "b"}},
            "spec": {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}],
                     "schedulingGates": [{"name": "g"}]}}}})
        self.assertEqual(code, 200)
        # but not the containers
        code, err, _ = self.srv.merge(JOBS + "/dir", {"spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "other"}]}}}})
        self.assertEqual((code, err["reason"]), (422, "Invalid"))
        self.assertIn(("spec.template", "FieldValueInvalid"), causes(err))
        # unsuspend: started at once
        self.srv.merge(JOBS + "/dir", {"spec": {"suspend": False, "template": {"spec": {"schedulingGates": None}}}})
        started = self.srv.ok("GET", JOBS + "/dir")["status"]["startTime"]
        # suspend again: pods go, startTime stays
        self.assertEqual(self.srv.merge(JOBS + "/dir", {"spec": {"suspend": True}})[0], 200)
        j = self.srv.ok("GET", JOBS + "/dir")
        self.assertEqual(j["status"]["startTime"], started)
        self.assertEqual(j["status"]["active"], 0)
        self.assertTrue(any(c["type"] == "Suspended" and c["status"] == "True" for c in j["status"]["conditions"]))
        # started before: the directives are frozen
        code, err, _ = self.srv.merge(JOBS + "/dir", {"spec": {"template": {"spec": {"nodeSelector": {"pool": "b"}}}}})
        self.assertEqual(code, 422)
        self.assertIn("field is immutable", err["message"])
        # clearing startTime through jobs/status (as Kueue does) reopens them
        code, _, _ = self.srv.merge(JOBS + "/dir/status", {"status": {"startTime": None}})
        self.assertEqual(code, 200)
        code, _, _ = self.srv.merge(JOBS + "/dir", {"spec": {"template": {"spec": {"nodeSelector": {"pool": "b"}}}}})
        self.assertEqual(code, 200)

    def test_node_affinity_mutable_other_affinity_not(self):
        self.srv.ok("POST", JOBS, job("aff", suspend=True))
        node_aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}]}}}
        self.assertEqual(self.srv.merge(JOBS + "/aff", {"spec": {"template": {"spec": {"affinity": node_aff}}}})[0], 200)
        pod_aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}}}]}}
        code, err, _ = self.srv.merge(JOBS + "/aff", {"spec": {"template": {"spec": {"affinity": pod_aff}}}})
        self.assertEqual(code, 422, err)

    def test_node_name_field_selector_takes_one_value(self):
        def by_name(*names):
            return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(names)}]}]}}}
        self.srv.ok("POST", JOBS, job("one-node", suspend=True, affinity=by_name("n1")))
        code, err, _ = self.srv.req("POST", JOBS, job("two-nodes", suspend=True, affinity=by_name("n1", "n2")))
        self.assertEqual(code, 422, err)
        self.assertIn(("spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                       ".nodeSelectorTerms[0].matchFields[0].values", "FieldValueRequired"), causes(err))
        code, err, _ = self.srv.merge(JOBS + "/one-node",
                                      {"spec": {"template": {"spec": {"affinity": by_name("n1", "n2")}}}})
        self.assertEqual(code, 422, err)
        pod = {"metadata": {"name": "p-two"}, "spec": {"containers": [{"name": "c", "image": "x"}],
                                                        "affinity": by_name("n1", "n2")}}
        self.assertEqual(self.srv.req("POST", PODS, pod)[0], 422)

    def test_immutable_spec_fields(self):
        self.srv.ok("POST", JOBS, job("imm", suspend=True, pods=2))
        for patch, fld in [({"spec": {"completions": 3}}, "spec.completions"),
                           ({"spec": {"completionMode": "Indexed"}}, "spec.completionMode"),
                           ({"spec": {"selector": {"matchLabels": {"a": "b"}}}}, "spec.selector")]:
            code, err, _ = self.srv.merge(JOBS + "/imm", patch)
            self.assertEqual(code, 422, patch)
            self.assertIn(fld, [f for f, _ in causes(err)])
        # parallelism is mutable
        self.assertEqual(self.srv.merge(JOBS + "/imm", {"spec": {"parallelism": 1}})[0], 200)

    def test_restart_policy_and_selector_on_create(self):
        bad = job("rp")
        bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
        code, err, _ = self.srv.req("POST", JOBS, bad)
        self.assertEqual(code, 422)
        self.assertIn(("spec.template.spec.restartPolicy", "FieldValueNotSupported"), causes(err))

    def test_status_subresource_rules(self):
        self.srv.ok("POST", JOBS, job("st"))
        j = self.srv.ok("GET", JOBS + "/st")
        # main-resource writes ignore status
        j["status"]["active"] = 7
        j["spec"]["parallelism"] = 1
        out = self.srv.ok("PUT", JOBS + "/st", j)
        self.assertNotEqual(out["status"]["active"], 7)
        # /status ignores spec
        j = self.srv.ok("GET", JOBS + "/st")
        j["spec"]["parallelism"] = 5
        out = self.srv.ok("PUT", JOBS + "/st/status", j)
        self.assertEqual(out["spec"]["parallelism"], 1)
        # startTime cannot be removed while the Job runs
        code, err, _ = self.srv.merge(JOBS + "/st/status", {"status": {"startTime": None}})
        self.assertEqual(code, 422)
        self.assertIn(("status.startTime", "FieldValueRequired"), causes(err))
        # Complete needs completionTime
        code, err, _ = self.srv.merge(JOBS + "/st/status", {"status": {"conditions": [
            {"type": "Complete", "status": "True"}]}})
        self.assertEqual(code, 422)

    def test_pods_succeed_job_completes(self):
        created = self.srv.ok("POST", JOBS, job("done", pods=2))
        for p in owned_pods(self.srv, created["metadata"]["uid"]):
            self.srv.status_merge(PODS + "/" + p["metadata"]["name"], {"phase": "Succeeded"})
        j = self.srv.ok("GET", JOBS + "/done")
        types = {c["type"]: c["status"] for c in j["status"]["conditions"]}
        self.assertEqual(types.get("Complete"), "True")
        self.assertEqual((j["status"]["succeeded"], j["status"]["active"]), (2, 0))
        self.assertTrue(j["status"]["completionTime"])


class JobLifeCycle(Base):
    def test_resume_resets_start_time_and_failures_fail_the_job(self):
        created = self.srv.ok("POST", JOBS, job("life"))
        first = self.srv.ok("GET", JOBS + "/life")["status"]["startTime"]
        self.srv.merge(JOBS + "/life", {"spec": {"suspend": True}})
        time.sleep(1.1)  # startTime has a resolution of one second
        self.srv.merge(JOBS + "/life", {"spec": {"suspend": False}})
        j = self.srv.ok("GET", JOBS + "/life")
        self.assertGreater(j["status"]["startTime"], first)
        conds = {c["type"]: c for c in j["status"]["conditions"]}
        self.assertEqual((conds["Suspended"]["status"], conds["Suspended"]["reason"]), ("False", "JobResumed"))
        # the suspended pods terminate; one new pod runs
        running = [p for p in owned_pods(self.srv, created["metadata"]["uid"])
                   if not p["metadata"].get("deletionTimestamp")]
        self.assertEqual(len(running), 1)
        self.srv.merge(JOBS + "/life", {"spec": {"backoffLimit": 0}})
        self.srv.status_merge(PODS + "/" + running[0]["metadata"]["name"], {"phase": "Failed"})
        j = self.srv.ok("GET", JOBS + "/life")
        types = {c["type"]: c["status"] for c in j["status"]["conditions"]}
        self.assertEqual((types.get("FailureTarget"), types.get("Failed")), ("True", "True"))
        self.assertEqual(j["status"]["failed"], 1)

    def test_terminal_conditions_and_counters_are_final(self):
        created = self.srv.ok("POST", JOBS, job("final"))
        for p in owned_pods(self.srv, created["metadata"]["uid"]):
            self.srv.status_merge(PODS + "/" + p["metadata"]["name"], {"phase": "Succeeded"})
        code, err, _ = self.srv.merge(JOBS + "/final/status", {"status": {"succeeded": 0}})
        self.assertEqual(code, 422)
        self.assertIn(("status.succeeded", "FieldValueInvalid"), causes(err))
        code, err, _ = self.srv.merge(JOBS + "/final/status", {"status": {"conditions": []}})
        self.assertEqual(code, 422)
        self.assertIn("cannot disable the terminal Complete=True condition", err["message"])

    def test_finished_pods_stay_counted_once_deleted(self):
        created = self.srv.ok("POST", JOBS, job("counted", pods=2))
        pods = owned_pods(self.srv, created["metadata"]["uid"])
        self.srv.status_merge(PODS + "/" + pods[0]["metadata"]["name"], {"phase": "Succeeded"})
        self.srv.ok("DELETE", PODS + "/" + pods[0]["metadata"]["name"])
        j = self.srv.ok("GET", JOBS + "/counted")
        self.assertEqual(j["status"]["succeeded"], 1)
        # no pod is made again for the completion already counted
        live = [p for p in owned_pods(self.srv, created["metadata"]["uid"])
                if not p["metadata"].get("deletionTimestamp")]
        self.assertEqual(len(live), 1)
        self.srv.status_merge(PODS + "/" + live[0]["metadata"]["name"], {"phase": "Succeeded"})
        j = self.srv.ok("GET", JOBS + "/counted")
        types = {c["type"]: c["status"] for c in j["status"]["conditions"]}
        self.assertEqual((types.get("Complete"), j["status"]["succeeded"]), ("True", 2))

    def test_json_patch_and_apply_are_validated_too(self):
        self.srv.ok("POST", JOBS, job("jp"))
        code, err, _ = self.srv.req("PATCH", JOBS + "/jp", [
            {"op": "add", "path": "/spec/template/spec/nodeSelector", "value": {"a": "b"}}],
            "application/json-patch+json")
        self.assertEqual(code, 422, err)
        code, err, _ = self.srv.req("PATCH", JOBS + "/jp?fieldManager=t", {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "jp"},
            "spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}}, "application/apply-patch+yaml")
        self.assertEqual(code, 422, err)


class PodRules(Base):
    def pod(self, name, node=None, **meta):
        body = {"metadata": {"name": name, **meta}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
        if node:
            body["spec"]["nodeName"] = node
        return self.srv.ok("POST", PODS, body)

    def test_created_pending(self):
        p = self.pod("pending")
        self.assertEqual(p["status"]["phase"], "Pending")

    def test_node_name_only_through_binding(self):
        self.pod("b")
        code, err, _ = self.srv.merge(PODS + "/b", {"spec": {"nodeName": "n1"}})
        self.assertEqual(code, 422)
        self.assertIn(("spec", "FieldValueForbidden"), causes(err))
        code, _, _ = self.srv.req("POST", PODS + "/b/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"}, "target": {"kind": "Node", "name": "n1"}})
        self.assertEqual(code, 201)
        p = self.srv.ok("GET", PODS + "/b")
        self.assertEqual(p["spec"]["nodeName"], "n1")
        self.assertTrue(any(c["type"] == "PodScheduled" for c in p["status"]["conditions"]))
        code, err, _ = self.srv.req("POST", PODS + "/b/binding", {"target": {"kind": "Node", "name": "n2"}})
        self.assertEqual((code, err["reason"]), (409, "Conflict"))
        # the image may change
        self.assertEqual(self.srv.merge(PODS + "/b", {"spec": {"containers": [{"name": "c", "image": "y"}]}})[0], 200)

    def test_graceful_deletion(self):
        self.pod("free")
        self.srv.ok("DELETE", PODS + "/free")
        self.assertEqual(self.srv.req("GET", PODS + "/free")[0], 404)  # unbound: at once
        self.pod("bound", node="n1")
        out = self.srv.ok("DELETE", PODS + "/bound")
        self.assertTrue(out["metadata"]["deletionTimestamp"])
        self.assertEqual(out["metadata"]["deletionGracePeriodSeconds"], 30)
        self.assertEqual(self.srv.req("GET", PODS + "/bound")[0], 200)  # terminating
        wait("the kubelet to finish", lambda: self.srv.req("GET", PODS + "/bound")[0] == 404)
        self.pod("held", node="n1", finalizers=["x/y"])
        self.srv.ok("DELETE", PODS + "/held", {"gracePeriodSeconds": 0})
        time.sleep(0.4)
        self.assertEqual(self.srv.req("GET", PODS + "/held")[0], 200)  # the finalizer holds it
        self.srv.merge(PODS + "/held", {"metadata": {"finalizers": None}})
        self.assertEqual(self.srv.req("GET", PODS + "/held")[0], 404)


class Eviction(Base):
    def ready_pod(self, name, app):
        self.srv.ok("POST", PODS, {"metadata": {"name": name, "labels": {"app": app}},
                                   "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x"}]}})
        self.srv.status_merge(PODS + "/" + name, {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})

    def evict(self, name):
        return self.srv.req("POST", PODS + f"/{name}/eviction",
                            {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})

    def test_budget_status_judges_evictions(self):
        self.ready_pod("w1", "web")
        self.ready_pod("w2", "web")
        self.srv.ok("POST", PDBS, {"metadata": {"name": "web"},
                                   "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        st = self.srv.ok("GET", PDBS + "/web")["status"]
        self.assertEqual((st["currentHealthy"], st["desiredHealthy"], st["disruptionsAllowed"]), (2, 1, 1))
        code, _, _ = self.evict("w1")
        self.assertEqual(code, 201)
        st = self.srv.ok("GET", PDBS + "/web")["status"]
        self.assertEqual(st["disruptionsAllowed"], 0)
        code, err, _ = self.evict("w2")
        self.assertEqual((code, err["reason"]), (429, "TooManyRequests"))
        self.assertEqual(err["details"]["causes"][0]["reason"], "DisruptionBudget")

    def test_max_unavailable_without_scale_fails_safe(self):
        self.ready_pod("m1", "db")
        self.srv.ok("POST", PDBS, {"metadata": {"name": "db"},
                                   "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
        st = self.srv.ok("GET", PDBS + "/db")["status"]
        self.assertEqual(st["disruptionsAllowed"], 0)
        self.assertEqual(self.evict("m1")[0], 429)


class EvictionEdges(Base):
    def test_two_budgets_and_stale_status(self):
        self.srv.ok("POST", PODS, {"metadata": {"name": "p", "labels": {"app": "x"}},
                                   "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x"}]}})
        self.srv.status_merge(PODS + "/p", {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
        for name in ("one", "two"):
            self.srv.ok("POST", PDBS, {"metadata": {"name": name},
                                       "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "x"}}}})
        code, err, _ = self.srv.req("POST", PODS + "/p/eviction", {"metadata": {"name": "p"}})
        self.assertEqual((code, err["reason"]), (500, "InternalError"))
        self.assertIn("more than one PodDisruptionBudget", err["message"])


class NodesAndLeases(Base):
    def test_provider_id_set_once(self):
        self.srv.ok("POST", "/api/v1/nodes", {"metadata": {"name": "ip-10-0-1-23.ec2.internal"}, "spec": {}})
        n = "/api/v1/nodes/ip-10-0-1-23.ec2.internal"
        self.assertEqual(self.srv.merge(n, {"spec": {"providerID": "aws:///us-east-1a/i-1"}})[0], 200)
        code, err, _ = self.srv.merge(n, {"spec": {"providerID": "aws:///us-east-1a/i-2"}})
        self.assertEqual(code, 422)
        self.assertIn(("spec.providerID", "FieldValueForbidden"), causes(err))
        self.assertEqual(self.srv.merge(n, {"spec": {"unschedulable": True}})[0], 200)  # cordon

    def test_a_node_keeps_the_status_it_is_created_with(self):
        status = {"allocatable": {"nvidia.com/gpu": "1"}, "conditions": [{"type": "Ready", "status": "False"}]}
        node = self.srv.ok("POST", "/api/v1/nodes", {"metadata": {"name": "sim-1"}, "status": status})
        self.assertEqual(node["status"]["allocatable"], {"nvidia.com/gpu": "1"})
        # other kinds with a status subresource drop it
        pdb = self.srv.ok("POST", PDBS, {"metadata": {"name": "p"}, "spec": {"minAvailable": 1},
                                         "status": {"currentHealthy": 5}})
        self.assertNotEqual(pdb.get("status", {}).get("currentHealthy"), 5)

    def test_lease_durations(self):
        leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
        code, err, _ = self.srv.req("POST", leases, {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}})
        self.assertIn(("spec.leaseDurationSeconds", "FieldValueInvalid"), causes(err))
        self.srv.ok("POST", leases, {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 15}})
        code, err, _ = self.srv.merge(leases + "/l", {"spec": {"leaseTransitions": -1}})
        self.assertEqual(code, 422)


class Concurrency(Base):
    def test_resource_version_preconditions(self):
        cm = self.srv.ok("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}, "data": {"a": "1"}})
        stale = cm["metadata"]["resourceVersion"]
        self.srv.ok("PUT", "/api/v1/namespaces/default/configmaps/c", {**cm, "data": {"a": "2"}})
        code, err, _ = self.srv.req("PUT", "/api/v1/namespaces/default/configmaps/c", {**cm, "data": {"a": "3"}})
        self.assertEqual((code, err["reason"]), (409, "Conflict"))
        code, _, _ = self.srv.merge("/api/v1/namespaces/default/configmaps/c",
                                    {"metadata": {"resourceVersion": stale}, "data": {"a": "4"}})
        self.assertEqual(code, 409)


class WatchWindow(Base):
    args = ["--watch-window", "0.5"]

    def test_compacted_history_is_gone(self):
        first = self.srv.ok("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w1"}})
        self.srv.ok("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w2"}})
        time.sleep(0.7)  # the event after `first` leaves the window
        rv = first["metadata"]["resourceVersion"]
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=5)
        conn.request("GET", f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}")
        line = conn.getresponse().readline()
        event = json.loads(line)
        self.assertEqual((event["type"], event["object"]["code"]), ("ERROR", 410))
        conn.close()

    def test_watch_ends_after_the_window(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=5)
        t0 = time.monotonic()
        conn.request("GET", "/api/v1/namespaces/default/secrets?watch=1")
        conn.getresponse().read()
        self.assertLess(time.monotonic() - t0, 2.0)
        conn.close()


class Secrets(Base):
    """secret_rules.py: Secret defaulting and validation."""

    PATH = "/api/v1/namespaces/default/secrets"

    @staticmethod
    def b64(text):
        return base64.b64encode(text.encode()).decode()

    def test_a_tls_secret_needs_its_certificate_and_key(self):
        code, obj, _ = self.srv.req("POST", self.PATH, {
            "metadata": {"name": "no-key"}, "type": "kubernetes.io/tls",
            "data": {"tls.crt": self.b64("c"), "ca.crt": self.b64("a")}})
        self.assertEqual(code, 422, obj)
        self.assertEqual(causes(obj), [("data[tls.key]", "FieldValueRequired")])
        made = self.srv.ok("POST", self.PATH, {
            "metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
            "data": {"tls.crt": self.b64("c"), "tls.key": self.b64("k"), "ca.crt": self.b64("a"),
                     "ca.key": self.b64("b")}})
        self.assertEqual(made["type"], "kubernetes.io/tls")
        # its type cannot change, and an update must keep the keys
        made["type"] = "Opaque"
        code, obj, _ = self.srv.req("PUT", f"{self.PATH}/tls", made)
        self.assertEqual(code, 422, obj)
        self.assertIn(("type", "FieldValueInvalid"), causes(obj))
        code, obj, _ = self.srv.req("PATCH", f"{self.PATH}/tls", {"data": {"tls.key": None}},
                                    "application/merge-patch+json")
        self.assertEqual(code, 422, obj)
        # a stale resourceVersion is a conflict
        current = self.srv.ok("GET", f"{self.PATH}/tls")
        renewed = {**current, "data": {**current["data"], "tls.crt": self.b64("c2")}}
        self.srv.ok("PUT", f"{self.PATH}/tls", renewed)
        code, obj, _ = self.srv.req("PUT", f"{self.PATH}/tls", current)
        self.assertEqual(code, 409, obj)

    def test_defaults_keys_and_string_data(self):
        made = self.srv.ok("POST", self.PATH, {"metadata": {"name": "plain"}, "stringData": {"a": "x"},
                                               "data": {"a": self.b64("y"), "b": self.b64("z")}})
        self.assertEqual(made["type"], "Opaque")
        self.assertNotIn("stringData", made)
        self.assertEqual(made["data"], {"a": self.b64("x"), "b": self.b64("z")})
        code, obj, _ = self.srv.req("POST", self.PATH, {"metadata": {"name": "bad-key"},
                                                        "data": {"no/slash": self.b64("x")}})
        self.assertEqual(code, 422, obj)
        self.assertEqual(causes(obj), [("data[no/slash]", "FieldValueInvalid")])
        code, obj, _ = self.srv.req("POST", self.PATH, {"metadata": {"name": "not-b64"},
                                                        "data": {"a": "%%%"}})
        self.assertEqual(code, 400, obj)

    def test_an_immutable_secret_keeps_its_data(self):
        made = self.srv.ok("POST", self.PATH, {"metadata": {"name": "frozen"}, "immutable": True,
                                               "data": {"a": self.b64("x")}})
        made["data"] = {"a": self.b64("y")}
        code, obj, _ = self.srv.req("PUT", f"{self.PATH}/frozen", made)
        self.assertEqual(code, 422, obj)
        self.assertEqual(causes(obj), [("data", "FieldValueForbidden")])


class Chaos(Base):
    args = ["--chaos", "1.0", "--chaos-seed", "7"]

    def test_every_request_fails_unless_exempt(self):
        seen = set()
        for _ in range(20):
            code, err, headers = self.srv.req("GET", "/api/v1/namespaces/default/configmaps")
            seen.add(code)
            if code == 429:
                self.assertEqual(headers.get("Retry-After"), "1")
                self.assertEqual(err["reason"], "TooManyRequests")
        self.assertEqual(seen, {429, 500})
        self.assertEqual(self.srv.req("GET", "/apis")[0], 200)  # discovery is exempt
        # a refused write leaves the kept-alive connection usable
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=5)
        for _ in range(3):
            conn.request("POST", "/api/v1/namespaces/default/configmaps", json.dumps({"metadata": {"name": "x"}}),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            self.assertIn(resp.status, (429, 500))
        conn.close()
        code, _, _ = self.srv.req("GET", "/api/v1/namespaces/default/configmaps", headers={"x-muster-chaos": "off"})
        self.assertEqual(code, 200)


class AuditLevelRequest(unittest.TestCase):
    """`--audit-level Request`: each write's line holds its body; the write
    itself still reads the body (the log reads it first)."""

    def setUp(self):
        import tempfile
        fd, self.log = tempfile.mkstemp(suffix=".jsonl")
        os.close(fd)
        self.srv = Server("--audit-log", self.log, "--audit-level", "Request")

    def tearDown(self):
        self.srv.stop()
        os.unlink(self.log)

    def test_writes_carry_their_body_reads_do_not(self):
        cms = "/api/v1/namespaces/default/configmaps"
        self.srv.ok("POST", cms, {"metadata": {"name": "a"}, "data": {"k": "1"}})
        code, _, _ = self.srv.merge(cms + "/a", {"data": {"k": "2"}})
        self.assertEqual(code, 200)
        self.assertEqual(self.srv.ok("GET", cms + "/a")["data"], {"k": "2"})
        with open(self.log, encoding="utf-8") as fh:
            lines = [json.loads(line) for line in fh]
        by_verb = {e["verb"]: e for e in lines}
        self.assertEqual(by_verb["create"]["requestObject"]["data"], {"k": "1"})
        self.assertEqual(by_verb["patch"]["requestObject"], {"data": {"k": "2"}})
        self.assertNotIn("requestObject", by_verb["get"])

    def test_each_line_carries_the_response_code(self):
        cms = "/api/v1/namespaces/default/configmaps"
        self.srv.ok("POST", cms, {"metadata": {"name": "b"}})
        code, _, _ = self.srv.req("POST", cms, {"metadata": {"name": "b"}})
        self.assertEqual(code, 409)
        code, _, _ = self.srv.req("POST", cms, {"metadata": {"name": "Not_Valid"}})
        self.assertEqual(code, 422)
        with open(self.log, encoding="utf-8") as fh:
            creates = [json.loads(line) for line in fh if '"create"' in line]
        self.assertEqual([e["responseStatus"]["code"] for e in creates], [201, 409, 422])


def load_crds(srv):
    for f in sorted(os.listdir(CRDS)):
        with open(os.path.join(CRDS, f), encoding="utf-8") as fh:
            srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(fh))


MUSTER = "/apis/muster.dev/v1alpha1"


class CustomResources(Base):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        load_crds(cls.srv)

    def gang(self, name, pod_sets, **spec):
        return self.srv.req("POST", MUSTER + "/namespaces/default/gangs",
                            {"metadata": {"name": name}, "spec": {"queue": "q", "podSets": pod_sets, **spec}})

    def poolnode(self, name, key=None, **spec):
        body = {"metadata": {"name": name}, "spec": {
            "pool": "a100", "nodeClass": "gcp", "idempotencyKey": key or name,
            "offering": {"provider": "gcp", "region": "us-central1", "zone": "us-central1-a",
                         "instanceType": "a2", "capacityType": "spot", "gpuCount": 8, "gpuModel": "A100",
                         "pricePerHour": "1.5", **spec}}}
        return self.srv.req("POST", MUSTER + "/poolnodes", body)

    def test_types_required_enums_patterns_and_bounds(self):
        code, err, _ = self.poolnode("types", gpuCount="eight")
        self.assertEqual(code, 422, err)
        self.assertIn(("spec.offering.gpuCount", "FieldValueTypeInvalid"), causes(err))
        code, err, _ = self.poolnode("bounds", gpuCount=65)
        self.assertIn(("spec.offering.gpuCount", "FieldValueInvalid"), causes(err))
        code, err, _ = self.poolnode("enums", capacityType="preemptible")
        self.assertIn(("spec.offering.capacityType", "FieldValueNotSupported"), causes(err))
        code, err, _ = self.poolnode("bad-key", key="Bad_Key")
        self.assertEqual(code, 422)
        self.assertIn("spec.idempotencyKey", [f for f, _ in causes(err)])
        code, err, _ = self.srv.req("POST", MUSTER + "/poolnodes", {"metadata": {"name": "req"}, "spec": {"pool": "a"}})
        self.assertIn(("spec.offering", "FieldValueRequired"), causes(err))

    def test_unknown_fields_pruned_or_rejected_when_strict(self):
        code, obj, headers = self.poolnode("prune", surprise=1)
        self.assertEqual(code, 201, obj)
        self.assertNotIn("surprise", obj["spec"]["offering"])
        self.assertIn('unknown field \\"spec.offering.surprise\\"', headers.get("Warning", ""))
        code, err, _ = self.srv.req("POST", MUSTER + "/poolnodes?fieldValidation=Strict", {
            "metadata": {"name": "strict"}, "spec": {"pool": "a", "nodeClass": "b", "idempotencyKey": "k",
                                                      "offering": {}, "extra": True}})
        self.assertEqual((code, err["reason"]), (400, "BadRequest"))

    def test_defaults_applied(self):
        code, obj, _ = self.gang("dflt", [{"name": "w", "count": 2}])
        self.assertEqual(code, 201, obj)
        with open(os.path.join(CRDS, "gang.yaml"), encoding="utf-8") as f:
            gang = yaml.safe_load(f)
        props = gang["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        for k, v in props.items():
            if "default" in v:
                self.assertEqual(obj["spec"][k], v["default"], k)

    def test_cel_rules_with_field_paths(self):
        code, err, _ = self.gang("cel", [{"name": "w", "count": 2, "minCount": 3}])
        self.assertEqual(code, 422, err)
        self.assertIn(("spec.podSets[0]", "FieldValueInvalid"), causes(err))
        self.assertIn("minCount must be less than or equal to count", err["message"])
        code, err, _ = self.gang("dup", [{"name": "w", "count": 1}, {"name": "w", "count": 1}])
        self.assertEqual(code, 422, err)

    def test_quantity_library(self):
        q = MUSTER + "/gpuqueues"
        code, err, _ = self.srv.req("POST", q, {"metadata": {"name": "zero"}, "spec": {"weight": "0"}})
        self.assertEqual(code, 422, err)
        self.assertIn("weight must be greater than 0", err["message"])
        self.assertEqual(self.srv.req("POST", q, {"metadata": {"name": "half"}, "spec": {"weight": "500m"}})[0], 201)
        code, err, _ = self.srv.req("POST", q, {"metadata": {"name": "lend"}, "spec": {"cohort": "c", "resources": [
            {"name": "nvidia.com/gpu", "nominal": 4, "lendingLimit": "5"}]}})
        self.assertEqual(code, 422, err)
        self.assertIn("lendingLimit must be less than or equal to nominal", err["message"])

    def test_transition_rules_on_update_and_patch(self):
        code, obj, _ = self.poolnode("frozen")
        self.assertEqual(code, 201, obj)
        code, err, _ = self.srv.merge(MUSTER + "/poolnodes/frozen", {"spec": {"pool": "other"}})
        self.assertEqual(code, 422)
        self.assertIn(("spec.pool", "FieldValueInvalid"), causes(err))
        # the reservation is the one part of spec that may change
        code, obj, _ = self.srv.merge(MUSTER + "/poolnodes/frozen",
                                      {"spec": {"gang": {"namespace": "a", "name": "g", "uid": "u-1"}}})
        self.assertEqual(code, 200, obj)
        obj = self.srv.ok("GET", MUSTER + "/poolnodes/frozen")
        obj["spec"]["nodeClass"] = "other"
        self.assertEqual(self.srv.req("PUT", MUSTER + "/poolnodes/frozen", obj)[0], 422)
        # status writes leave spec alone: allowed, and the status schema applies
        self.assertEqual(self.srv.merge(MUSTER + "/poolnodes/frozen/status", {"status": {"phase": "Launched"}})[0], 200)
        code, err, _ = self.srv.merge(MUSTER + "/poolnodes/frozen/status", {"status": {"phase": "Bogus"}})
        self.assertEqual(code, 422, err)

    def test_status_subresource_of_custom_resources(self):
        self.assertEqual(self.poolnode("sub")[0], 201)
        obj = self.srv.ok("GET", MUSTER + "/poolnodes/sub")
        obj["status"] = {"phase": "Ready"}
        out = self.srv.ok("PUT", MUSTER + "/poolnodes/sub", obj)
        self.assertNotEqual((out.get("status") or {}).get("phase"), "Ready")  # status ignored on the main resource
        obj = self.srv.ok("GET", MUSTER + "/poolnodes/sub")
        obj["metadata"]["labels"] = {"x": "y"}
        obj["status"] = {"phase": "Launched"}
        out = self.srv.ok("PUT", MUSTER + "/poolnodes/sub/status", obj)
        self.assertEqual(out["status"]["phase"], "Launched")
        self.assertNotIn("labels", out["metadata"])  # all but status ignored on /status

    def test_max_length_int_or_string_and_nullable(self):
        code, err, _ = self.poolnode("long", instanceType="x" * 65)
        self.assertIn(("spec.offering.instanceType", "FieldValueTooLong"), causes(err))
        code, err, _ = self.srv.req("POST", MUSTER + "/gpuqueues", {"metadata": {"name": "ios"}, "spec": {
            "cohort": "c", "resources": [{"name": "nvidia.com/gpu", "nominal": [1]}]}})
        self.assertEqual(code, 422, err)
        self.assertIn(("spec.resources[0].nominal", "FieldValueTypeInvalid"), causes(err))
        code, obj, _ = self.srv.req("POST", MUSTER + "/gpuqueues", {"metadata": {"name": "ios2"}, "spec": {
            "cohort": "c", "resources": [{"name": "nvidia.com/gpu", "nominal": 4}, {"name": "cpu", "nominal": "10"}]}})
        self.assertEqual(code, 201, obj)
        code, obj, _ = self.poolnode("nul")
        self.assertEqual(code, 201)
        code, obj, _ = self.srv.merge(MUSTER + "/poolnodes/nul/status", {"status": {"nodeName": None}})
        self.assertEqual(code, 200, obj)

    def test_preserve_unknown_fields_and_ratcheting(self):
        crd = {"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "a": {"type": "string"}, "b": {"type": "string"},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}}}]}}
        made = self.srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        w = self.srv.ok("POST", "/apis/example.com/v1/widgets", {"metadata": {"name": "w"}, "spec": {
            "a": "long-value", "extra": {"any": {"thing": [1]}}, "dropped": 1}})
        self.assertEqual(w["spec"]["extra"], {"any": {"thing": [1]}})  # preserved
        self.assertNotIn("dropped", w["spec"])  # pruned
        made["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["a"]["maxLength"] = 3
        self.srv.ok("PUT", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com", made)
        self.assertEqual(self.srv.merge("/apis/example.com/v1/widgets/w", {"spec": {"b": "x"}})[0], 200)
        self.assertEqual(self.srv.merge("/apis/example.com/v1/widgets/w", {"spec": {"a": "other-long"}})[0], 422)

    def test_a_crd_serves_each_served_version_of_one_stored_object(self):
        schema = {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}}
        crd = {"metadata": {"name": "gadgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False, "schema": schema},
                {"name": "v1", "served": True, "storage": True, "schema": schema},
                {"name": "v1beta1", "served": False, "storage": False, "schema": schema}]}}
        self.srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        made = self.srv.ok("POST", "/apis/example.com/v1alpha1/gadgets", {"metadata": {"name": "g"}, "spec": {"a": "x"}})
        self.assertEqual(made["apiVersion"], "example.com/v1alpha1")
        # conversion strategy None: the same object, its apiVersion the one asked
        got = self.srv.ok("GET", "/apis/example.com/v1/gadgets/g")
        self.assertEqual((got["apiVersion"], got["spec"]), ("example.com/v1", {"a": "x"}))
        self.assertEqual(got["metadata"]["uid"], made["metadata"]["uid"])
        # a version not served is not there
        self.assertEqual(self.srv.req("GET", "/apis/example.com/v1beta1/gadgets/g")[0], 404)
        group = self.srv.ok("GET", "/apis/example.com")
        self.assertEqual([v["version"] for v in group["versions"]], ["v1", "v1alpha1"])
        self.assertEqual(group["preferredVersion"]["version"], "v1")

    def test_root_rule_sees_metadata_name(self):
        code, err, _ = self.srv.req("POST", MUSTER + "/gpuqueues", {"metadata": {"name": "q" * 64}, "spec": {}})
        self.assertEqual(code, 422, err)
        self.assertIn("at most 63 characters", err["message"])


def _certs(dirname, name):
    """A CA and a serving certificate for NAME signed by it (openssl)."""
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=dirname)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "1", "-subj", "/CN=test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj", f"/CN={name}")
    with open(os.path.join(dirname, "san.ext"), "w") as f:
        f.write(f"subjectAltName=DNS:{name}\n")
    run("x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "tls.crt", "-days", "1", "-extfile", "san.ext")
    with open(os.path.join(dirname, "ca.crt"), "rb") as f:
        return base64.b64encode(f.read()).decode()


class Hook:
    """An HTTPS admission webhook: /suspend patches spec.suspend, /deny
    refuses, /slow answers after 3 s; every review is recorded."""

    def __init__(self, dirname):
        import http.server
        import ssl
        import threading
        self.reviews = []
        hook = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.reviews.append((self.path, review))
                resp = {"uid": review["request"]["uid"], "allowed": True}
                if self.path == "/suspend":
                    patch = [{"op": "add", "path": "/spec/suspend", "value": True}]
                    resp.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(patch).encode()).decode())
                elif self.path == "/deny":
                    resp.update(allowed=False, status={"message": "no GPUs for you"})
                elif self.path == "/slow":
                    time.sleep(3)
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": resp}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(dirname, "tls.crt"), os.path.join(dirname, "tls.key"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()


class MutatingWebhooks(unittest.TestCase):
    """admission.py: webhooks of stored MutatingWebhookConfigurations are
    called as kube-apiserver calls them."""

    CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.tmp = tempfile.TemporaryDirectory()
        cls.ca = _certs(cls.tmp.name, "hook.hooks.svc")
        cls.hook = Hook(cls.tmp.name)
        cls.srv = Server("--webhook-service", f"hooks/hook=127.0.0.1:{cls.hook.port}",
                         "--webhook-service", "hooks/down=127.0.0.1:9")
        for ns, labels in [("team-a", {"gpu": "yes"}), ("other", {})]:
            cls.srv.ok("POST", "/api/v1/namespaces", {"metadata": {"name": ns, "labels": labels}})

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        cls.hook.stop()
        cls.tmp.cleanup()

    def setUp(self):
        self.hook.reviews.clear()

    def config(self, name, path="/suspend", service="hook", **hook):
        webhook = {
            "name": f"{name}.muster.dev",
            "clientConfig": {"service": {"namespace": "hooks", "name": service, "path": path},
                             "caBundle": hook.pop("caBundle", self.ca)},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["batch"], "apiVersions": ["v1"],
                       "resources": ["jobs"], "scope": "Namespaced"}],
            "objectSelector": {"matchExpressions": [{"key": "muster.dev/queue", "operator": "Exists"}]},
            "namespaceSelector": {"matchLabels": {"gpu": "yes"}},
            "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 1,
        }
        webhook.update(hook)
        self.srv.ok("POST", self.CONFIGS, {"metadata": {"name": name}, "webhooks": [webhook]})
        self.addCleanup(self.srv.req, "DELETE", f"{self.CONFIGS}/{name}")

    def create(self, ns, name, labels=None, query=""):
        body = job(name)
        body["metadata"]["labels"] = labels or {}
        return self.srv.req("POST", f"/apis/batch/v1/namespaces/{ns}/jobs{query}", body)

    def test_a_matching_job_is_patched_and_the_review_is_v1(self):
        self.config("suspend")
        code, obj, _ = self.create("team-a", "labelled", {"muster.dev/queue": "a"})
        self.assertEqual(code, 201, obj)
        self.assertTrue(obj["spec"]["suspend"])
        self.assertEqual(len(self.hook.reviews), 1)
        path, review = self.hook.reviews[0]
        self.assertEqual(path, "/suspend")
        self.assertEqual(review["apiVersion"], "admission.k8s.io/v1")
        req = review["request"]
        self.assertEqual(req["operation"], "CREATE")
        self.assertEqual(req["namespace"], "team-a")
        self.assertEqual(req["resource"], {"group": "batch", "version": "v1", "resource": "jobs"})
        self.assertEqual(req["kind"]["kind"], "Job")
        self.assertFalse(req["dryRun"])
        # the object is decoded with its defaults before admission
        self.assertEqual(req["object"]["spec"]["backoffLimit"], 6)
        self.assertFalse(req["object"]["spec"]["suspend"])

    def test_selectors_and_rules_decide_who_is_called(self):
        self.config("suspend")
        code, obj, _ = self.create("team-a", "unlabelled")
        self.assertEqual(code, 201, obj)
        self.assertFalse(obj["spec"]["suspend"])
        code, obj, _ = self.create("other", "elsewhere", {"muster.dev/queue": "a"})
        self.assertEqual(code, 201, obj)
        self.assertFalse(obj["spec"]["suspend"])
        code, obj, _ = self.srv.req("POST", "/api/v1/namespaces/team-a/pods", {
            "metadata": {"name": "p", "labels": {"muster.dev/queue": "a"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}})
        self.assertEqual(code, 201, obj)
        self.assertEqual(self.hook.reviews, [])
        # a namespace that does not exist is 404 NotFound
        code, obj, _ = self.create("nowhere", "lost", {"muster.dev/queue": "a"})
        self.assertEqual(code, 404, obj)

    def test_failure_policy_decides_what_a_failed_call_means(self):
        self.config("down", service="down")
        code, obj, _ = self.create("team-a", "refused", {"muster.dev/queue": "a"})
        self.assertEqual(code, 500, obj)
        self.assertEqual(obj["reason"], "InternalError")
        self.assertIn('failed calling webhook "down.muster.dev"', obj["message"])
        self.srv.req("DELETE", f"{self.CONFIGS}/down")
        self.config("ignored", service="down", failurePolicy="Ignore")
        code, obj, _ = self.create("team-a", "let-through", {"muster.dev/queue": "a"})
        self.assertEqual(code, 201, obj)
        self.assertFalse(obj["spec"]["suspend"])

    def test_a_slow_webhook_times_out_and_a_foreign_ca_fails(self):
        self.config("slow", path="/slow")
        code, obj, _ = self.create("team-a", "slow", {"muster.dev/queue": "a"})
        self.assertEqual(code, 500, obj)
        self.srv.req("DELETE", f"{self.CONFIGS}/slow")
        import tempfile
        with tempfile.TemporaryDirectory() as other:
            foreign = _certs(other, "hook.hooks.svc")
        self.config("foreign", caBundle=foreign)
        code, obj, _ = self.create("team-a", "untrusted", {"muster.dev/queue": "a"})
        self.assertEqual(code, 500, obj)
        self.assertIn("failed calling webhook", obj["message"])

    def test_match_conditions_skip_fail_or_call(self):
        owned = "!has(object.metadata.ownerReferences) || " \
                "!object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)"
        self.config("cond", matchConditions=[{"name": "not-owned", "expression": owned}])
        # a Job a controller owns: the condition is false, the webhook is not called
        body = job("child")
        body["metadata"]["labels"] = {"muster.dev/queue": "a"}
        body["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "c",
                                                "uid": "u1", "controller": True}]
        code, obj, _ = self.srv.req("POST", "/apis/batch/v1/namespaces/team-a/jobs", body)
        self.assertEqual(code, 201, obj)
        self.assertFalse(obj["spec"]["suspend"])
        self.assertEqual(self.hook.reviews, [])
        # one nobody owns: called
        code, obj, _ = self.create("team-a", "mine", {"muster.dev/queue": "a"})
        self.assertEqual(code, 201, obj)
        self.assertTrue(obj["spec"]["suspend"])
        self.assertEqual(len(self.hook.reviews), 1)
        self.srv.req("DELETE", f"{self.CONFIGS}/cond")
        # an evaluation error: refused under Fail, skipped under Ignore
        broken = [{"name": "broken", "expression": "object.metadata.nothing.here == 1"}]
        self.config("broken", matchConditions=broken)
        code, obj, _ = self.create("team-a", "err", {"muster.dev/queue": "a"})
        self.assertEqual(code, 500, obj)
        self.assertIn("match condition", obj["message"])
        self.srv.req("DELETE", f"{self.CONFIGS}/broken")
        self.config("lenient", matchConditions=broken, failurePolicy="Ignore")
        code, obj, _ = self.create("team-a", "err2", {"muster.dev/queue": "a"})
        self.assertEqual(code, 201, obj)
        self.assertFalse(obj["spec"]["suspend"])

    def test_denials_and_dry_runs(self):
        self.config("deny", path="/deny")
        code, obj, _ = self.create("team-a", "denied", {"muster.dev/queue": "a"})
        self.assertEqual(code, 403, obj)
        self.assertEqual(obj["reason"], "Forbidden")
        self.assertIn('admission webhook "deny.muster.dev" denied the request: no GPUs for you', obj["message"])
        self.srv.req("DELETE", f"{self.CONFIGS}/deny")
        self.config("unknown", sideEffects="Unknown")
        code, obj, _ = self.create("team-a", "dry", {"muster.dev/queue": "a"}, "?dryRun=All")
        self.assertEqual(code, 400, obj)
        self.assertIn("does not support dry run", obj["message"])

    def test_a_patched_ca_bundle_is_the_one_trusted(self):
        import tempfile
        with tempfile.TemporaryDirectory() as other:
            foreign = _certs(other, "hook.hooks.svc")
        self.config("rotated", caBundle=foreign)
        code, obj, _ = self.create("team-a", "before", {"muster.dev/queue": "a"})
        self.assertEqual(code, 500, obj)
        # a JSON patch guarded by the webhook's name, as the controller sends it
        patch = [{"op": "test", "path": "/webhooks/0/name", "value": "rotated.muster.dev"},
                 {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": self.ca}]
        self.assertEqual(self.srv.req("PATCH", f"{self.CONFIGS}/rotated", patch, "application/json-patch+json")[0], 200)
        stored = self.srv.ok("GET", f"{self.CONFIGS}/rotated")
        self.assertEqual(stored["webhooks"][0]["clientConfig"]["caBundle"], self.ca)
        code, obj, _ = self.create("team-a", "after", {"muster.dev/queue": "a"})
        self.assertEqual(code, 201, obj)
        self.assertTrue(obj["spec"]["suspend"])
        # a failed test leaves the configuration alone
        wrong = [{"op": "test", "path": "/webhooks/0/name", "value": "other.muster.dev"},
                 {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": foreign}]
        code, obj, _ = self.srv.req("PATCH", f"{self.CONFIGS}/rotated", wrong, "application/json-patch+json")
        self.assertGreaterEqual(code, 400, obj)
        self.assertEqual(self.srv.ok("GET", f"{self.CONFIGS}/rotated")["webhooks"][0]["clientConfig"]["caBundle"],
                         self.ca)

    def test_namespaces_carry_their_name_label(self):
        ns = self.srv.ok("GET", "/api/v1/namespaces/other")
        self.assertEqual(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "other")


if __name__ == "__main__":
    unittest.main()
