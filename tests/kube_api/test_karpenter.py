"""The Karpenter stand-in (karpenter_controller.py) and its rules
(karpenter_rules.py), against a running server with the NodeClaim,
NodePool and EC2NodeClass CRDs (tests/kube_api/crds) installed.

Run: python3 -m unittest discover -s tests/kube_api -p 'test_*.py'
"""

import json
import os
import time
import unittest

import yaml

import karpenter_rules as kr
from test_apiserver import Server, wait

HERE = os.path.dirname(os.path.abspath(__file__))
CRDS = ["karpenter.sh_nodeclaims", "karpenter.sh_nodepools", "karpenter.k8s.aws_ec2nodeclasses"]
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
NODECLASSES = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"
NODES = "/api/v1/nodes"
PODS = "/api/v1/namespaces/default/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
HOOK = "/karpenter-test/"
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
IT = "node.kubernetes.io/instance-type"
TEST_SETTINGS = {"joinDelaySeconds": 0, "devicePluginDelaySeconds": 0, "registrationTTLSeconds": 900,
                 "launchTimeoutSeconds": 300, "minDrainSeconds": 0, "gcPeriodSeconds": 0.2,
                 "disruptionPeriodSeconds": 0.2, "instanceShutdownSeconds": 0}


def claim(name, types=("g5.xlarge",), labels=None, reqs=(), **spec):
    body = {"metadata": {"name": name}, "spec": {
        "requirements": [{"key": IT, "operator": "In", "values": list(types)}, *reqs],
        "nodeClassRef": dict(REF), **spec}}
    if labels:
        body["metadata"]["labels"] = labels
    return body


def nodepool(name, **spec):
    template = spec.pop("template", {})
    body = {"metadata": {"name": name}, "spec": {"template": {"spec": {
        "requirements": [{"key": IT, "operator": "In", "values": ["g5.xlarge", "p4d.24xlarge"]}],
        "nodeClassRef": dict(REF), **template}}, **spec}}
    return body


def cond(obj, ctype):
    c = kr.condition(obj, ctype)
    return None if c is None else (c["status"], c["reason"])


class Karpenter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--pod-termination-secs", "0.2")
        for f in CRDS:
            with open(os.path.join(HERE, "crds", f + ".yaml"), encoding="utf-8") as fh:
                cls.srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(fh))
        cls.srv.ok("POST", NODECLASSES, {"metadata": {"name": "default"}, "spec": {
            "role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}]}})
        wait("the nodeclass status", lambda: cond(cls.srv.ok("GET", NODECLASSES + "/default"), "Ready") == ("True", "Ready"))

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def setUp(self):
        self.srv.ok("PUT", HOOK + "settings", TEST_SETTINGS)
        self.srv.ok("PUT", HOOK + "prices", {"prices": {
            "m5.large": {"on-demand": 0.096, "spot": 0.035}, "g5.xlarge": {"on-demand": 1.006, "spot": 0.402},
            "g5.12xlarge": {"on-demand": 5.672, "spot": 2.269}, "p4d.24xlarge": {"on-demand": 32.773, "spot": 13.109},
            "p5.48xlarge": {"on-demand": 98.32, "spot": 39.328}}})

    # -- helpers

    def get(self, name):
        code, obj, _ = self.srv.req("GET", NODECLAIMS + "/" + name)
        return obj if code == 200 else None

    def create(self, body):
        return self.srv.ok("POST", NODECLAIMS, body)

    def initialized(self, name):
        return wait(f"{name} initialized", lambda: (self.get(name) or {}).get("status", {}).get("nodeName")
                    and cond(self.get(name), "Initialized") == ("True", "Initialized") and self.get(name))

    def node(self, name):
        code, obj, _ = self.srv.req("GET", NODES + "/" + name)
        return obj if code == 200 else None

    def instances(self, nodeclaim):
        return [i for i in self.srv.ok("GET", HOOK + "instances")["items"] if i["nodeClaim"] == nodeclaim]

    def gone(self, name, secs=8.0):
        wait(f"{name} removed", lambda: self.get(name) is None, secs)

    def events(self, name):
        return [e["reason"] for e in self.srv.ok("GET", HOOK + "events")["items"] if e["name"] == name]

    def bound_pod(self, name, node, annotations=None, labels=None, owner=None, **spec):
        meta = {"name": name}
        if annotations:
            meta["annotations"] = annotations
        if labels:
            meta["labels"] = labels
        if owner:
            meta["ownerReferences"] = [owner]
        self.srv.ok("POST", PODS, {"metadata": meta, "spec": {
            "nodeName": node, "containers": [{"name": "c", "image": "x"}], **spec}})
        self.srv.status_merge(PODS + "/" + name, {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                                                  "conditions": [{"type": "Ready", "status": "True"}]})

    def pod_exists(self, name):
        return self.srv.req("GET", PODS + "/" + name)[0] == 200

    # -- CRDs

    def test_crd_cel_nodeclaim_spec_immutable_and_requirement_rules(self):
        nc = self.create(claim("crd-a", labels={"karpenter.sh/nodepool": "x"}))
        self.assertEqual(nc["spec"]["expireAfter"], "720h")  # schema default
        code, out, _ = self.srv.merge(NODECLAIMS + "/crd-a", {"spec": {"expireAfter": "1h"}})
        self.assertEqual(code, 422, out)
        self.assertIn("spec is immutable", out["message"])
        for key, msg in (("karpenter.sh/foo", 'label domain "karpenter.sh" is restricted'),
                         ("kubernetes.io/hostname", 'label "kubernetes.io/hostname" is restricted')):
            code, out, _ = self.srv.req("POST", NODECLAIMS, claim("crd-b", reqs=[{"key": key, "operator": "Exists"}]))
            self.assertEqual(code, 422, out)
            self.assertIn(msg, out["message"])
        code, out, _ = self.srv.req("POST", NODECLAIMS, claim("crd-c", reqs=[{"key": "a", "operator": "In", "values": []}]))
        self.assertEqual(code, 422, out)
        self.assertIn("requirements with operator 'In' must have a value defined", out["message"])
        code, out, _ = self.srv.req("POST", NODECLAIMS, claim("crd-d", reqs=[{"key": "a", "operator": "Gt", "values": ["x"]}]))
        self.assertEqual(code, 422, out)
        # karpenter.sh/nodepool and karpenter.sh/capacity-type are allowed requirement keys
        self.create(claim("crd-e", reqs=[{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["p"]},
                                         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]))

    def test_crd_cel_nodepool_rules_and_defaults(self):
        np_ = self.srv.ok("POST", NODEPOOLS, nodepool("crd-np"))
        self.assertEqual(np_["spec"]["disruption"], {"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized",
                                                     "budgets": [{"nodes": "10%"}]})
        code, out, _ = self.srv.merge(NODEPOOLS + "/crd-np", {"spec": {"replicas": 2}})
        self.assertEqual(code, 422, out)
        self.assertIn("Cannot transition NodePool between static", out["message"])
        code, out, _ = self.srv.req("POST", NODEPOOLS, nodepool("crd-np2", replicas=1, weight=5))
        self.assertEqual(code, 422, out)
        self.assertIn("'weight' is not supported on static NodePools", out["message"])
        code, out, _ = self.srv.req("POST", NODEPOOLS, nodepool("crd-np3", disruption={
            "budgets": [{"nodes": "0", "schedule": "@daily"}]}))
        self.assertEqual(code, 422, out)
        self.assertIn("'schedule' must be set with 'duration'", out["message"])
        code, out, _ = self.srv.req("POST", NODEPOOLS, nodepool("crd-np4", template={"taints": []}, disruption={
            "budgets": [{"nodes": "abc"}]}))
        self.assertEqual(code, 422, out)
        code, out, _ = self.srv.req("POST", NODEPOOLS, {"metadata": {"name": "crd-np5"}, "spec": {"template": {
            "metadata": {"labels": {"karpenter.sh/nodepool": "x"}},
            "spec": {"requirements": [], "nodeClassRef": dict(REF)}}}})
        self.assertEqual(code, 422, out)
        self.assertIn('label "karpenter.sh/nodepool" is restricted', out["message"])

    def test_crd_cel_ec2nodeclass_role_or_instance_profile(self):
        code, out, _ = self.srv.req("POST", NODECLASSES, {"metadata": {"name": "both"}, "spec": {
            "role": "r", "instanceProfile": "p", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}})
        self.assertEqual(code, 422, out)
        self.assertIn("must specify exactly one of ['role', 'instanceProfile']", out["message"])

    # -- launch

    def test_launch_cheapest_allowed_offering_with_provider_labels(self):
        self.create(claim("launch-a", types=("g5.12xlarge", "p4d.24xlarge"), reqs=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}],
            labels={"team": "a"}))
        nc = self.initialized("launch-a")
        labels = nc["metadata"]["labels"]
        self.assertEqual((labels[IT], labels["topology.kubernetes.io/zone"], labels["karpenter.sh/capacity-type"]),
                         ("g5.12xlarge", "us-east-1b", "on-demand"))
        self.assertEqual(labels["karpenter.k8s.aws/ec2nodeclass"], "default")
        self.assertEqual(labels["team"], "a")
        self.assertEqual(nc["status"]["capacity"]["nvidia.com/gpu"], "4")
        self.assertEqual(nc["status"]["allocatable"]["nvidia.com/gpu"], "4")
        self.assertTrue(nc["status"]["providerID"].startswith("aws:///us-east-1b/i-"))
        self.assertEqual(cond(nc, "Launched"), ("True", "Launched"))
        self.assertEqual(cond(nc, "Ready"), ("True", "Ready"))
        self.assertIn("karpenter.sh/termination", nc["metadata"]["finalizers"])
        [inst] = self.instances("launch-a")
        self.assertEqual((inst["instanceType"], inst["state"]), ("g5.12xlarge", "running"))
        # a price table that makes p4d the cheaper one changes the pick
        self.srv.ok("PUT", HOOK + "prices", {"prices": {"g5.12xlarge": {"on-demand": 50.0},
                                                         "p4d.24xlarge": {"on-demand": 32.0}}})
        self.create(claim("launch-b", types=("g5.12xlarge", "p4d.24xlarge"), reqs=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]))
        nc = self.initialized("launch-b")
        self.assertEqual(nc["metadata"]["labels"][IT], "p4d.24xlarge")
        # an unpriced type is not offered: with g5.xlarge unpriced, nothing is left
        self.create(claim("launch-d"))
        self.gone("launch-d")
        # spot whenever the requirements allow it (getCapacityType)
        self.setUp()
        self.create(claim("launch-c"))
        self.assertEqual(self.initialized("launch-c")["metadata"]["labels"]["karpenter.sh/capacity-type"], "spot")

    def test_insufficient_capacity_deletes_the_nodeclaim(self):
        reqs = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]}]
        off = {"instanceType": "p5.48xlarge", "zone": "us-east-1c", "capacityType": "on-demand"}
        self.srv.ok("POST", HOOK + "offerings", {**off, "available": False})
        try:
            self.create(claim("ice-a", types=("p5.48xlarge",), reqs=reqs))
            self.gone("ice-a")
            self.assertIn("InsufficientCapacityError", self.events("ice-a"))
            self.assertEqual(self.instances("ice-a"), [])
        finally:
            self.srv.ok("POST", HOOK + "offerings", {**off, "available": True})
        self.create(claim("ice-b", types=("p5.48xlarge",), reqs=reqs))
        self.assertEqual(self.initialized("ice-b")["metadata"]["labels"][IT], "p5.48xlarge")

    def test_missing_nodeclass_is_insufficient_capacity_and_unknown_readiness_waits(self):
        self.create({**claim("ncls-a"), "spec": {**claim("ncls-a")["spec"], "nodeClassRef": {**REF, "name": "nope"}}})
        self.gone("ncls-a")
        self.assertIn("InsufficientCapacityError", self.events("ncls-a"))
        self.srv.ok("POST", NODECLASSES, {"metadata": {"name": "pending"}, "spec": {
            "role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}})
        wait("status", lambda: cond(self.srv.ok("GET", NODECLASSES + "/pending"), "Ready"))
        st = self.srv.ok("GET", NODECLASSES + "/pending")["status"]
        for c in st["conditions"]:
            if c["type"] == "Ready":
                c.update({"status": "Unknown", "reason": "AwaitingReconciliation"})
        self.srv.status_merge(NODECLASSES + "/pending", {"conditions": st["conditions"]})
        self.create({**claim("ncls-b"), "spec": {**claim("ncls-b")["spec"], "nodeClassRef": {**REF, "name": "pending"}}})
        wait("launch unknown", lambda: cond(self.get("ncls-b"), "Launched") == ("Unknown", "NodeClassReadinessUnknown"))
        self.assertEqual(self.instances("ncls-b"), [])

    def test_launch_that_never_succeeds_is_deleted_after_the_launch_timeout(self):
        self.srv.ok("POST", NODECLASSES, {"metadata": {"name": "stuck"}, "spec": {
            "role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}})
        wait("status", lambda: cond(self.srv.ok("GET", NODECLASSES + "/stuck"), "Ready"))
        st = self.srv.ok("GET", NODECLASSES + "/stuck")["status"]
        for c in st["conditions"]:
            if c["type"] == "Ready":
                c.update({"status": "Unknown", "reason": "AwaitingReconciliation"})
        self.srv.status_merge(NODECLASSES + "/stuck", {"conditions": st["conditions"]})
        self.srv.ok("PUT", HOOK + "settings", {"launchTimeoutSeconds": 2})
        self.create({**claim("lto-a"), "spec": {**claim("lto-a")["spec"], "nodeClassRef": {**REF, "name": "stuck"}}})
        wait("launch unknown", lambda: cond(self.get("lto-a"), "Launched") == ("Unknown", "NodeClassReadinessUnknown"))
        self.gone("lto-a", 8)
        self.assertEqual(self.instances("lto-a"), [])

    def test_unmanaged_nodeclaim_is_left_alone(self):
        self.create({"metadata": {"name": "other-a"}, "spec": {
            "requirements": [{"key": IT, "operator": "In", "values": ["g5.xlarge"]}],
            "nodeClassRef": {"group": "example.com", "kind": "OtherNodeClass", "name": "x"}}})
        time.sleep(0.5)
        nc = self.get("other-a")
        self.assertNotIn("finalizers", nc["metadata"])
        self.assertNotIn("status", nc)
        self.assertEqual(self.instances("other-a"), [])

    # -- join, registration, initialization

    def test_node_joins_with_unregistered_taint_then_registration_syncs_it(self):
        rv = self.srv.ok("GET", NODES)["metadata"]["resourceVersion"]
        self.create(claim("reg-a", labels={"muster.dev/pool": "p"},
                          taints=[{"key": "muster.dev/pool", "value": "p", "effect": "NoSchedule"}],
                          startupTaints=[{"key": "example.com/node-setup", "effect": "NoSchedule"}]))
        nc = wait("registered", lambda: cond(self.get("reg-a"), "Registered") == ("True", "Registered") and self.get("reg-a"))
        name = nc["status"]["nodeName"]
        # the node as the kubelet registered it (the first event of the watch)
        code, raw = self._watch_nodes(rv)
        added = [e["object"] for e in raw if e["type"] == "ADDED" and e["object"]["metadata"]["name"] == name][0]
        self.assertEqual(added["spec"]["taints"], [
            {"key": "muster.dev/pool", "value": "p", "effect": "NoSchedule"},
            {"key": "example.com/node-setup", "effect": "NoSchedule"},
            {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}])
        self.assertNotIn("karpenter.sh/registered", added["metadata"]["labels"])
        node = self.node(name)
        self.assertEqual(node["spec"]["taints"], [{"key": "muster.dev/pool", "value": "p", "effect": "NoSchedule"},
                                                  {"key": "example.com/node-setup", "effect": "NoSchedule"}])
        self.assertEqual(node["metadata"]["labels"]["karpenter.sh/registered"], "true")
        self.assertEqual(node["metadata"]["labels"]["muster.dev/pool"], "p")
        self.assertEqual(node["metadata"]["finalizers"], ["karpenter.sh/termination"])
        self.assertEqual(node["metadata"]["ownerReferences"], [{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                                                "name": "reg-a", "uid": nc["metadata"]["uid"],
                                                                "blockOwnerDeletion": True}])
        self.assertEqual(node["spec"]["providerID"], nc["status"]["providerID"])
        # the startup taint holds initialization until something removes it
        time.sleep(0.3)
        nc = self.get("reg-a")
        self.assertEqual(cond(nc, "Initialized"), ("Unknown", "StartupTaintsExist"))
        self.assertEqual(cond(nc, "Ready")[0], "Unknown")
        self.assertNotIn("karpenter.sh/initialized", node["metadata"]["labels"])
        self.srv.ok("PATCH", NODES + "/" + name, {"spec": {"taints": [
            {"key": "muster.dev/pool", "value": "p", "effect": "NoSchedule"}]}}, "application/merge-patch+json")
        nc = self.initialized("reg-a")
        self.assertEqual(cond(nc, "Ready"), ("True", "Ready"))
        self.assertEqual(self.node(name)["metadata"]["labels"]["karpenter.sh/initialized"], "true")

    def test_a_node_registered_by_hand_is_adopted_with_a_warning(self):
        self.srv.ok("POST", HOOK + "never-join", {"nodeClaim": "hand-a"})
        nc = self.create(claim("hand-a"))
        pid = wait("launched", lambda: (self.get("hand-a").get("status") or {}).get("providerID"))
        self.srv.ok("POST", NODES, {"metadata": {"name": "hand-a-node"}, "spec": {"providerID": pid},
                                    "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        nc = wait("registered", lambda: cond(self.get("hand-a"), "Registered") == ("True", "Registered") and self.get("hand-a"))
        self.assertEqual(nc["status"]["nodeName"], "hand-a-node")
        self.assertIn("UnregisteredTaintMissing", self.events("hand-a"))
        node = self.node("hand-a-node")
        self.assertEqual(node["metadata"]["labels"]["karpenter.sh/registered"], "true")
        self.assertEqual(node["metadata"]["labels"][IT], "g5.xlarge")

    def _watch_nodes(self, rv):
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=10)
        conn.request("GET", f"{NODES}?watch=true&resourceVersion={rv}&timeoutSeconds=1")
        resp = conn.getresponse()
        raw = resp.read().decode()
        conn.close()
        return resp.status, [json.loads(x) for x in raw.splitlines() if x.strip()]

    def test_requested_extended_resource_must_be_registered(self):
        self.srv.ok("PUT", HOOK + "settings", {"devicePluginDelaySeconds": 1000})
        self.create(claim("res-a", resources={"requests": {"nvidia.com/gpu": "1"}}))
        wait("resource not registered", lambda: cond(self.get("res-a"), "Initialized") == ("Unknown", "ResourceNotRegistered"))
        name = self.get("res-a")["status"]["nodeName"]
        self.assertEqual(self.node(name)["status"]["allocatable"]["nvidia.com/gpu"], "0")
        # the device plugin registers the GPU
        self.srv.status_merge(NODES + "/" + name, {"allocatable": {"nvidia.com/gpu": "1"}, "capacity": {"nvidia.com/gpu": "1"}})
        self.initialized("res-a")

    def test_not_ready_node_is_not_initialized(self):
        self.srv.ok("PUT", HOOK + "settings", {"devicePluginDelaySeconds": 1000})
        self.create(claim("nr-a", resources={"requests": {"nvidia.com/gpu": "1"}}))
        wait("registered", lambda: cond(self.get("nr-a"), "Registered") == ("True", "Registered"))
        name = self.get("nr-a")["status"]["nodeName"]
        self.srv.status_merge(NODES + "/" + name, {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
                                                   "allocatable": {"nvidia.com/gpu": "1"}})
        wait("not ready", lambda: cond(self.get("nr-a"), "Initialized") == ("Unknown", "NodeNotReady"))

    # -- liveness

    def test_node_that_never_joins_is_deleted_after_the_registration_ttl(self):
        self.srv.ok("POST", HOOK + "never-join", {"nodeClaim": "live-a"})
        self.srv.ok("PUT", HOOK + "settings", {"registrationTTLSeconds": 1.5})
        self.create(claim("live-a"))
        wait("launched", lambda: cond(self.get("live-a"), "Launched") == ("True", "Launched"))
        self.assertEqual(cond(self.get("live-a"), "Registered"), ("Unknown", "NodeNotFound"))
        self.assertEqual(self.instances("live-a")[0]["state"], "running")
        self.gone("live-a", 6)
        self.assertEqual(self.instances("live-a")[0]["state"], "terminated")

    # -- termination

    def test_deletion_taints_drains_in_order_respecting_pdbs_then_terminates(self):
        self.create(claim("term-a"))
        nc = self.initialized("term-a")
        node = nc["status"]["nodeName"]
        self.bound_pod("term-web", node, labels={"app": "web"})
        self.bound_pod("term-plain", node)
        self.bound_pod("term-ds", node, owner={"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds",
                                               "uid": "u-ds", "controller": True})
        self.bound_pod("term-dnd", node, annotations={"karpenter.sh/do-not-disrupt": "true"})
        self.srv.ok("POST", PDBS, {"metadata": {"name": "term-web"}, "spec": {
            "minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        self.srv.ok("DELETE", NODECLAIMS + "/term-a")
        wait("disrupted taint", lambda: any(t["key"] == "karpenter.sh/disrupted" and t["effect"] == "NoSchedule"
                                            for t in self.node(node)["spec"].get("taints") or []))
        wait("plain pod evicted", lambda: not self.pod_exists("term-plain"))
        time.sleep(0.5)
        # the PDB holds the web pod; the DaemonSet pod waits for the first group
        self.assertTrue(self.pod_exists("term-web"))
        self.assertTrue(self.pod_exists("term-ds"))
        self.assertEqual(cond(self.get("term-a"), "Drained"), ("Unknown", "Draining"))
        self.assertEqual(self.instances("term-a")[0]["state"], "running")
        self.srv.ok("DELETE", PDBS + "/term-web")
        wait("web pod evicted", lambda: not self.pod_exists("term-web"))
        # the do-not-disrupt pod is never evicted, and holds the drain
        time.sleep(0.5)
        self.assertTrue(self.pod_exists("term-dnd"))
        self.assertIsNotNone(self.node(node))
        self.srv.ok("DELETE", PODS + "/term-dnd")
        wait("daemonset pod evicted", lambda: not self.pod_exists("term-ds"))
        self.gone("term-a")
        self.assertIsNone(self.node(node))
        self.assertEqual(self.instances("term-a")[0]["state"], "terminated")

    def test_termination_grace_period_force_deletes_blocking_pods(self):
        self.create(claim("tgp-a", terminationGracePeriod="2s"))
        nc = self.initialized("tgp-a")
        node = nc["status"]["nodeName"]
        self.bound_pod("tgp-dnd", node, annotations={"karpenter.sh/do-not-disrupt": "true"},
                       terminationGracePeriodSeconds=1)
        self.srv.ok("DELETE", NODECLAIMS + "/tgp-a")
        nc = wait("annotation", lambda: self.get("tgp-a")["metadata"].get("annotations", {}).get(
            "karpenter.sh/nodeclaim-termination-timestamp") and self.get("tgp-a"))
        self.assertEqual(kr.parse_time(nc["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]),
                         kr.parse_time(nc["metadata"]["deletionTimestamp"]) + 2)
        self.assertTrue(self.pod_exists("tgp-dnd"))
        self.gone("tgp-a", 8)
        self.assertFalse(self.pod_exists("tgp-dnd"))

    # -- garbage collection

    def test_vanished_instance_is_garbage_collected(self):
        self.create(claim("gc-a"))
        nc = self.initialized("gc-a")
        node = nc["status"]["nodeName"]
        [inst] = self.instances("gc-a")
        self.srv.ok("POST", HOOK + "terminate-instance", {"instanceID": inst["id"]})
        self.gone("gc-a")
        self.assertIsNone(self.node(node))
        self.assertIn("GarbageCollected", self.events("gc-a"))

    def test_ready_node_keeps_its_nodeclaim_from_gc(self):
        self.create(claim("gc-b"))
        self.initialized("gc-b")
        [inst] = self.instances("gc-b")
        # the instance is gone but its node still reports Ready: GC waits
        k_inst = inst["id"]
        self.srv.ok("PUT", HOOK + "settings", {"gcPeriodSeconds": 1000})
        self.srv.ok("POST", HOOK + "terminate-instance", {"instanceID": k_inst})
        name = self.get("gc-b")["status"]["nodeName"]
        self.srv.status_merge(NODES + "/" + name, {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]})
        self.srv.ok("PUT", HOOK + "settings", {"gcPeriodSeconds": 0.2})
        time.sleep(0.8)
        self.assertIsNotNone(self.get("gc-b"))

    # -- interruption

    def test_spot_interruption_deletes_and_marks_the_offering_unavailable(self):
        self.create(claim("int-a", types=("g5.xlarge",), reqs=[
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]))
        nc = self.initialized("int-a")
        self.assertEqual(nc["metadata"]["labels"]["karpenter.sh/capacity-type"], "spot")
        out = self.srv.ok("POST", HOOK + "interruption", {"nodeClaim": "int-a", "kind": "SpotInterruption"})
        self.assertEqual(out["nodeClaims"], ["int-a"])
        self.gone("int-a")
        self.assertIn("SpotInterrupted", self.events("int-a"))
        try:
            # the same requirements now get on-demand: the spot offering is unavailable
            self.create(claim("int-b", types=("g5.xlarge",), reqs=[
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]}]))
            self.assertEqual(self.initialized("int-b")["metadata"]["labels"]["karpenter.sh/capacity-type"], "on-demand")
        finally:
            self.srv.ok("POST", HOOK + "offerings", {"instanceType": "g5.xlarge", "zone": "us-east-1a",
                                                     "capacityType": "spot", "available": True})

    # -- expiration

    def test_expire_after(self):
        self.create(claim("exp-a", expireAfter="2s"))
        self.create(claim("exp-b", expireAfter="Never"))
        self.initialized("exp-a")
        self.gone("exp-a", 8)
        self.assertIsNotNone(self.get("exp-b"))

    # -- NodePool status

    def test_nodepool_readiness_and_resources(self):
        self.srv.ok("POST", NODEPOOLS, nodepool("np-count", disruption={"consolidateAfter": "Never"}))
        np_ = wait("ready", lambda: cond(self.srv.ok("GET", NODEPOOLS + "/np-count"), "Ready") == ("True", "Ready")
                   and self.srv.ok("GET", NODEPOOLS + "/np-count"))
        self.assertEqual(cond(np_, "NodeClassReady"), ("True", "NodeClassReady"))
        self.assertEqual(np_["status"]["nodes"], 0)
        self.assertEqual(np_["status"]["resources"]["cpu"], "0")
        self.create(claim("np-count-a", types=("g5.12xlarge",), labels={"karpenter.sh/nodepool": "np-count"}))
        self.create(claim("np-count-b", types=("g5.xlarge",), labels={"karpenter.sh/nodepool": "np-count"}))
        self.initialized("np-count-a")
        self.initialized("np-count-b")
        np_ = wait("counted", lambda: self.srv.ok("GET", NODEPOOLS + "/np-count")["status"]["nodes"] == 2
                   and self.srv.ok("GET", NODEPOOLS + "/np-count"))
        self.assertEqual(np_["status"]["resources"]["nvidia.com/gpu"], "5")
        self.assertEqual(np_["status"]["resources"]["cpu"], "52")
        self.assertEqual(np_["status"]["resources"]["memory"], "208Gi")
        # a pool whose NodeClass is missing is not Ready
        self.srv.ok("POST", NODEPOOLS, {"metadata": {"name": "np-orphan"}, "spec": {"template": {"spec": {
            "requirements": [], "nodeClassRef": {**REF, "name": "missing"}}}}})
        wait("not ready", lambda: cond(self.srv.ok("GET", NODEPOOLS + "/np-orphan"), "NodeClassReady")
             == ("False", "NodeClassNotFound"))
        self.assertEqual(cond(self.srv.ok("GET", NODEPOOLS + "/np-orphan"), "Ready")[0], "False")

    # -- disruption

    def test_empty_consolidatable_nodeclaim_is_removed_only_where_allowed(self):
        self.srv.ok("POST", NODEPOOLS, nodepool("dis-ok", disruption={"consolidateAfter": "1s"}))
        self.srv.ok("POST", NODEPOOLS, nodepool("dis-zero", disruption={"consolidateAfter": "1s",
                                                                        "budgets": [{"nodes": "0"}]}))
        self.create(claim("dis-a", labels={"karpenter.sh/nodepool": "dis-ok"}))
        self.create(claim("dis-b", labels={"karpenter.sh/nodepool": "dis-zero"}))
        self.create(claim("dis-c"))  # standalone
        for n in ("dis-a", "dis-b", "dis-c"):
            self.initialized(n)
        self.gone("dis-a", 8)
        self.assertIn("DisruptionTerminating", self.events("dis-a"))
        nc = self.get("dis-b")
        self.assertEqual(cond(nc, "Consolidatable"), ("True", "Consolidatable"))
        self.assertIsNone(cond(self.get("dis-c"), "Consolidatable"))
        cands = self.srv.ok("GET", HOOK + "candidates")["nodeClaims"]
        self.assertFalse(cands["dis-b"]["Empty"]["candidate"])
        self.assertIn("budget allows no Empty disruption", cands["dis-b"]["Empty"]["reason"])
        self.assertFalse(cands["dis-c"]["Empty"]["candidate"])
        self.assertIn("required label", cands["dis-c"]["Empty"]["reason"])
        time.sleep(0.5)
        self.assertIsNotNone(self.get("dis-b"))
        self.assertIsNotNone(self.get("dis-c"))

    def test_pod_keeps_a_node_from_being_empty(self):
        self.srv.ok("POST", NODEPOOLS, nodepool("dis-busy", disruption={"consolidateAfter": "1s",
                                                                        "consolidationPolicy": "WhenEmpty"}))
        self.create(claim("dis-d", labels={"karpenter.sh/nodepool": "dis-busy"}))
        nc = self.initialized("dis-d")
        self.bound_pod("dis-d-pod", nc["status"]["nodeName"])
        time.sleep(1.8)
        self.assertIsNotNone(self.get("dis-d"))
        self.assertEqual(self.srv.ok("GET", HOOK + "candidates")["nodeClaims"]["dis-d"]["Empty"]["reason"],
                         "node is not empty")
        self.srv.ok("DELETE", PODS + "/dis-d-pod")
        self.gone("dis-d", 8)


class RustSideCrd(unittest.TestCase):
    """The NodeClaim CRD tests/support/karpenter.rs installs (no CEL, no
    defaults): alone it leaves the stand-in off; with the EC2NodeClass CRD
    the stand-in runs on it too."""

    REQ = {"type": "object", "required": ["key", "operator"], "properties": {
        "key": {"type": "string"}, "operator": {"type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]},
        "values": {"type": "array", "items": {"type": "string"}}, "minValues": {"type": "integer"}}}
    TAINT = {"type": "object", "required": ["key", "effect"], "properties": {
        "key": {"type": "string"}, "value": {"type": "string"},
        "effect": {"type": "string", "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}}}
    QTY = {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}

    def crd(self):
        return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "nodeclaims.karpenter.sh"},
                "spec": {"group": "karpenter.sh", "scope": "Cluster",
                         "names": {"kind": "NodeClaim", "listKind": "NodeClaimList", "plural": "nodeclaims",
                                   "singular": "nodeclaim"},
                         "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                       "schema": {"openAPIV3Schema": {"type": "object", "required": ["spec"], "properties": {
                                           "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                                           "spec": {"type": "object", "required": ["requirements", "nodeClassRef"], "properties": {
                                               "requirements": {"type": "array", "items": self.REQ},
                                               "taints": {"type": "array", "items": self.TAINT},
                                               "startupTaints": {"type": "array", "items": self.TAINT},
                                               "resources": {"type": "object", "properties": {"requests": self.QTY}},
                                               "nodeClassRef": {"type": "object", "required": ["group", "kind", "name"], "properties": {
                                                   "group": {"type": "string"}, "kind": {"type": "string"}, "name": {"type": "string"}}},
                                               "expireAfter": {"type": "string"}, "terminationGracePeriod": {"type": "string"}}},
                                           "status": {"type": "object", "properties": {
                                               "nodeName": {"type": "string"}, "providerID": {"type": "string"},
                                               "imageID": {"type": "string"}, "capacity": self.QTY, "allocatable": self.QTY,
                                               "conditions": {"type": "array", "items": {
                                                   "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}}}}]}}

    def test_alone_the_stand_in_is_off_and_with_the_nodeclass_crd_it_runs(self):
        srv = Server()
        try:
            srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", self.crd())
            srv.ok("POST", NODECLAIMS, {"metadata": {"name": "pool-n1", "labels": {"karpenter.sh/nodepool": "pool"}},
                                        "spec": {"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["pool"]}],
                                                 "nodeClassRef": dict(REF)}})
            srv.status_merge(NODECLAIMS + "/pool-n1", {"providerID": "aws:///us-central1-a/i-n1", "nodeName": "n1",
                                                       "conditions": [{"type": "Registered", "status": "True"}]})
            time.sleep(0.5)
            nc = srv.ok("GET", NODECLAIMS + "/pool-n1")
            self.assertNotIn("finalizers", nc["metadata"])
            self.assertEqual(nc["status"]["providerID"], "aws:///us-central1-a/i-n1")
            self.assertEqual(srv.ok("GET", HOOK + "instances")["items"], [])
            with open(os.path.join(HERE, "crds", "karpenter.k8s.aws_ec2nodeclasses.yaml"), encoding="utf-8") as fh:
                srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(fh))
            srv.ok("POST", NODECLASSES, {"metadata": {"name": "default"}, "spec": {
                "role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}})
            srv.ok("POST", NODECLAIMS, claim("rust-a"))
            nc = wait("initialized", lambda: cond(srv.ok("GET", NODECLAIMS + "/rust-a"), "Initialized") == ("True", "Initialized")
                      and srv.ok("GET", NODECLAIMS + "/rust-a"))
            self.assertEqual(nc["metadata"]["finalizers"], ["karpenter.sh/termination"])
            self.assertNotIn("expireAfter", nc["spec"])  # no default in this CRD: never expires
        finally:
            srv.stop()


# -- the pure rules

def _nc(name="n", labels=None, conds=(("Initialized", "True"),), created="2026-01-01T00:00:00Z", **spec):
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": labels or {}},
            "spec": {"expireAfter": "720h", **spec},
            "status": {"conditions": [{"type": t, "status": s, "reason": t, "lastTransitionTime": created}
                                      for t, s in conds]}}


def _node(labels=None, annotations=None, ready=True, taints=None):
    return {"metadata": {"name": "node", "labels": {"karpenter.sh/initialized": "true",
                                                    "karpenter.sh/capacity-type": "on-demand",
                                                    "topology.kubernetes.io/zone": "z", **(labels or {})},
                         "annotations": annotations or {}},
            "spec": {"taints": taints or []},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _pool(name="p", **spec):
    return {"metadata": {"name": name}, "spec": {"disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]},
                                                 "template": {"spec": {"requirements": []}}, **spec}}


def _pod(name="pod", annotations=None, **spec):
    return {"metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c"}], **spec}, "status": {"phase": "Running"}}


ALL = {"Empty": 1, "Underutilized": 1, "Drifted": 1}
NOW = kr.parse_time("2026-06-01T00:00:00Z")


class DisruptionRules(unittest.TestCase):
    def owned(self, **kw):
        conds = (("Initialized", "True"), ("Consolidatable", "True")) + tuple(kw.pop("extra", ()))
        return _nc(labels={"karpenter.sh/nodepool": "p"}, conds=conds, **kw)

    def test_empty_consolidatable_candidate(self):
        out = kr.candidate(self.owned(), _node({"karpenter.sh/nodepool": "p"}), [], _pool(), ALL, now=NOW)
        self.assertEqual(out["Empty"], (True, "empty"))
        self.assertFalse(out["Underutilized"][0])  # empty nodes go to emptiness
        self.assertEqual(out["Drifted"], (False, "not drifted"))

    def test_standalone_nodeclaim_is_never_a_disruption_candidate_but_expires(self):
        nc = _nc(conds=(("Initialized", "True"), ("Consolidatable", "True"), ("Drifted", "True")))
        out = kr.candidate(nc, _node(), [], None, ALL, now=NOW)
        for m in ("Empty", "Underutilized", "Drifted"):
            self.assertEqual(out[m], (False, "node doesn't have required label (label=karpenter.sh/nodepool)"))
        self.assertEqual(out["Expired"], (True, "expired"))  # 720h after creation
        out = kr.candidate(_nc(expireAfter="Never"), _node(), [], None, ALL, now=NOW)
        self.assertEqual(out["Expired"], (False, "expireAfter is Never"))

    def test_budget_nodes_zero_blocks_every_method(self):
        pool = _pool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "0"}]})
        members = [(self.owned(), _node({"karpenter.sh/nodepool": "p"}))]
        left = {m: kr.disruption_budget_mapping(pool, members, m) for m in ALL}
        self.assertEqual(left, {"Empty": 0, "Underutilized": 0, "Drifted": 0})
        nc = self.owned(extra=(("Drifted", "True"),))
        out = kr.candidate(nc, _node({"karpenter.sh/nodepool": "p"}), [], pool, left, now=NOW)
        self.assertFalse(out["Empty"][0])
        self.assertFalse(out["Drifted"][0])
        self.assertIn("budget allows no", out["Drifted"][1])
        # reasons scope a budget; a percentage rounds up
        pool = _pool(disruption={"budgets": [{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "10%"}]})
        self.assertEqual(kr.allowed_disruptions(pool, 3, "Empty"), 1)
        self.assertEqual(kr.allowed_disruptions(pool, 3, "Drifted"), 0)
        # a node already disrupting uses the budget up
        members = [(self.owned(), _node({"karpenter.sh/nodepool": "p"}, ready=False))]
        self.assertEqual(kr.disruption_budget_mapping(_pool(), members, "Empty"), 0)

    def test_do_not_disrupt_node_and_pods(self):
        node = _node({"karpenter.sh/nodepool": "p"}, annotations={"karpenter.sh/do-not-disrupt": "true"})
        out = kr.candidate(self.owned(), node, [], _pool(), ALL, now=NOW)
        self.assertEqual(out["Empty"], (False, 'disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation'))
        pod = _pod(annotations={"karpenter.sh/do-not-disrupt": "true"})
        out = kr.candidate(self.owned(), _node({"karpenter.sh/nodepool": "p"}), [pod], _pool(), ALL, now=NOW)
        self.assertIn('pod has "karpenter.sh/do-not-disrupt" annotation', out["Empty"][1])
        # a finished pod does not block; a duration runs out from the pod's start
        done = dict(pod, status={"phase": "Succeeded"})
        self.assertTrue(kr.candidate(self.owned(), _node({"karpenter.sh/nodepool": "p"}), [done], _pool(), ALL, now=NOW)["Empty"][0])
        timed = _pod(annotations={"karpenter.sh/do-not-disrupt": "1h"})
        timed["status"]["startTime"] = "2026-05-31T23:30:00Z"
        self.assertTrue(kr.do_not_disrupt_active(timed, NOW))
        timed["status"]["startTime"] = "2026-05-31T22:00:00Z"
        self.assertFalse(kr.do_not_disrupt_active(timed, NOW))

    def test_static_nodepool_and_never_and_uninitialized(self):
        out = kr.candidate(self.owned(extra=(("Drifted", "True"),)), _node({"karpenter.sh/nodepool": "p"}), [],
                           _pool(replicas=2), ALL, now=NOW)
        self.assertEqual(out["Empty"], (False, "owned by a static NodePool"))
        self.assertEqual(out["Underutilized"], (False, "owned by a static NodePool"))
        self.assertEqual(out["Drifted"], (True, "static drift"))
        out = kr.candidate(self.owned(), _node({"karpenter.sh/nodepool": "p"}), [],
                           _pool(disruption={"consolidateAfter": "Never"}), ALL, now=NOW)
        self.assertIn("consolidation disabled", out["Empty"][1])
        node = _node({"karpenter.sh/nodepool": "p"})
        node["metadata"]["labels"].pop("karpenter.sh/initialized")
        self.assertEqual(kr.candidate(self.owned(), node, [], _pool(), ALL, now=NOW)["Empty"], (False, "node isn't initialized"))
        out = kr.candidate(_nc(labels={"karpenter.sh/nodepool": "p"}), _node({"karpenter.sh/nodepool": "p"}), [],
                           _pool(), ALL, now=NOW)
        self.assertFalse(out["Empty"][0])  # not Consolidatable yet

    def test_pdb_blocks_and_underutilized(self):
        pod = _pod()
        pod["metadata"]["labels"] = {"app": "x"}
        pdb = {"metadata": {"name": "b", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": "x"}}},
               "status": {"disruptionsAllowed": 0}}
        out = kr.candidate(self.owned(), _node({"karpenter.sh/nodepool": "p"}), [pod], _pool(), ALL, [pdb], now=NOW)
        self.assertIn("pdb prevents pod evictions", out["Underutilized"][1])
        pdb["status"]["disruptionsAllowed"] = 1
        out = kr.candidate(self.owned(), _node({"karpenter.sh/nodepool": "p"}), [pod], _pool(), ALL, [pdb], now=NOW)
        self.assertTrue(out["Underutilized"][0])
        out = kr.candidate(self.owned(), _node({"karpenter.sh/nodepool": "p"}), [pod],
                           _pool(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}), ALL, now=NOW)
        self.assertFalse(out["Underutilized"][0])


class ProvisioningRules(unittest.TestCase):
    def pending(self, **spec):
        return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec},
                "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}

    def pool(self, name="muster-a", taints=None, labels=None, reqs=None, ready=True, **spec):
        return {"metadata": {"name": name}, "spec": {"template": {
            "metadata": {"labels": labels or {}},
            "spec": {"requirements": reqs or [], "taints": taints or []}}, **spec},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}

    def test_a_tainted_pool_is_never_used_for_other_pods(self):
        muster = self.pool(taints=[{"key": "muster.dev/pool", "value": "a", "effect": "NoSchedule"}],
                           labels={"muster.dev/pool": "a"})
        ok, why = kr.provisioner_considers(self.pending(), muster)
        self.assertFalse(ok)
        self.assertEqual(why, "did not tolerate taint muster.dev/pool=a:NoSchedule")
        # a pod that tolerates it but asks for another pool's label is still refused
        tol = [{"key": "muster.dev/pool", "operator": "Exists"}]
        ok, why = kr.provisioner_considers(self.pending(tolerations=tol, nodeSelector={"muster.dev/pool": "b"}), muster)
        self.assertFalse(ok)
        self.assertIn("incompatible requirements", why)
        self.assertTrue(kr.provisioner_considers(self.pending(tolerations=tol), muster)[0])
        # startup taints are not matched against tolerations
        startup = self.pool()
        startup["spec"]["template"]["spec"]["startupTaints"] = [{"key": "x", "effect": "NoSchedule"}]
        self.assertTrue(kr.provisioner_considers(self.pending(), startup)[0])

    def test_static_not_ready_and_unknown_labels(self):
        self.assertEqual(kr.provisioner_considers(self.pending(), self.pool(replicas=1)),
                         (False, "static NodePool (spec.replicas): never used for pending pods"))
        self.assertEqual(kr.provisioner_considers(self.pending(), self.pool(ready=False)), (False, "NodePool is not Ready"))
        ok, why = kr.provisioner_considers(self.pending(nodeSelector={"example.com/x": "y"}), self.pool())
        self.assertEqual((ok, why), (False, 'incompatible requirements, label "example.com/x" does not have known values'))
        # well-known labels need no definition
        self.assertTrue(kr.provisioner_considers(self.pending(nodeSelector={"topology.kubernetes.io/zone": "a"}),
                                                 self.pool())[0])
        bound = self.pending(nodeName="n")
        self.assertFalse(kr.provisioner_considers(bound, self.pool())[0])

    def test_limits_and_weight_order(self):
        full = self.pool("full", limits={"nvidia.com/gpu": "8"})
        full["status"]["resources"] = {"nvidia.com/gpu": "8"}
        self.assertIn("exceed limits", kr.provisioner_considers(self.pending(), full)[1])
        pools = [self.pool("b"), self.pool("a"), self.pool("heavy", weight=50)]
        self.assertEqual([p["metadata"]["name"] for p in kr.nodepools_for_pod(self.pending(), pools)], ["heavy", "a", "b"])


class OfferingAndInitRules(unittest.TestCase):
    def test_pick_offering(self):
        from karpenter_controller import INSTANCE_TYPES, PRICES, ZONES
        reqs = [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["1"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
        self.assertEqual(kr.pick_offering(reqs, INSTANCE_TYPES, PRICES, set(), ZONES)["instanceType"], "g5.12xlarge")
        gone = {("g5.12xlarge", z, "on-demand") for z in ZONES}
        self.assertEqual(kr.pick_offering(reqs, INSTANCE_TYPES, PRICES, gone, ZONES)["instanceType"], "p4d.24xlarge")
        self.assertIsNone(kr.pick_offering([{"key": IT, "operator": "In", "values": ["g5.12xlarge"]}, reqs[1]],
                                           INSTANCE_TYPES, PRICES, gone, ZONES))

    def test_initialization_blockers(self):
        nc = {"spec": {"startupTaints": [{"key": "s", "effect": "NoSchedule"}],
                       "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "1"}}}}
        node = {"spec": {"taints": [{"key": "s", "value": "v", "effect": "NoSchedule"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "4"}}}
        self.assertEqual(kr.initialization_blocker(node, nc), ("StartupTaintsExist", 'StartupTaint "s=v:NoSchedule" still exists'))
        node["spec"]["taints"] = [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]
        self.assertEqual(kr.initialization_blocker(node, nc)[0], "KnownEphemeralTaintsExist")
        node["spec"]["taints"] = []
        self.assertEqual(kr.initialization_blocker(node, nc),
                         ("ResourceNotRegistered", 'Resource "nvidia.com/gpu" was requested but not registered'))
        node["status"]["allocatable"]["nvidia.com/gpu"] = "2"
        self.assertIsNone(kr.initialization_blocker(node, nc))

    def test_drain_order_and_force_delete(self):
        ds = {"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet"}]}, "spec": {}}
        crit = {"metadata": {}, "spec": {"priorityClassName": "system-node-critical"}}
        plain = {"metadata": {}, "spec": {}}
        self.assertEqual(kr.drain_groups([crit, ds, plain]), [[plain], [ds], [crit], []])
        p = {"metadata": {}, "spec": {"terminationGracePeriodSeconds": 30}}
        self.assertFalse(kr.needs_force_delete(p, None, NOW))
        self.assertTrue(kr.needs_force_delete(p, NOW + 10, NOW))
        self.assertFalse(kr.needs_force_delete(p, NOW + 60, NOW))
        tolerant = {"metadata": {}, "spec": {"tolerations": [{"operator": "Exists"}]}, "status": {"phase": "Running"}}
        self.assertFalse(kr.waiting_eviction(tolerant, NOW))


if __name__ == "__main__":
    unittest.main()
