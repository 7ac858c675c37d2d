"""GKE's node-join rules (`gke_fake/join.py`): pure, on hand-made state,
and over HTTP (`/fake/gke/nodes`, `/fake/gke/join`) against the fake."""

import unittest

from fake_client import P, Fake, zonal
from gke_fake import join
from test_gke_fake import ZA, ZB, FakeCase, metadata, spot_l4

GROUP_A = f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{ZA}/instanceGroupManagers/gke-prod-gpu-1a2b3c4d-grp"
GROUP_B = f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{ZB}/instanceGroupManagers/gke-prod-gpu-5e6f7a8b-grp"


def instance(name, iid, zone=ZA, status="RUNNING", kube_env=None, kube_labels=None, created_by=None):
    items = []
    if kube_env is not None:
        items.append({"key": "kube-env", "value": kube_env})
    if kube_labels is not None:
        items.append({"key": "kube-labels", "value": kube_labels})
    if created_by is not None:
        items.append({"key": "created-by", "value": created_by})
    items.append({"key": "cluster-name", "value": "prod"})
    zbase = f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{zone}"
    return {"name": name, "id": iid, "status": status, "zone": zbase, "selfLink": f"{zbase}/instances/{name}",
            "machineType": f"{zbase}/machineTypes/g2-standard-4", "metadata": {"items": items}}


ENV = ("KUBELET_ARGS: --v=2 --node-labels=cloud.google.com/gke-nodepool=gpu,muster.dev/pool=l4,"
       "cloud.google.com/gke-accelerator=nvidia-l4\n  --register-with-taints=muster.dev/gpu=true:NoSchedule\n"
       "AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=gpu;node_taints=a=b:NoExecute;os=linux\n"
       "NODE_TAINTS: a=b:NoExecute\n")


def snap(instances, groups):
    return {"cluster": {"project": P, "location": "us-central1", "name": "prod"},
            "nodePools": [{"name": "gpu", "instanceGroupUrls": [GROUP_A, GROUP_B]}],
            "groups": groups, "instances": instances}


class Rules(unittest.TestCase):
    def test_a_managed_instance_joins_with_kube_labels_reapplied(self):
        inst = instance("n-0", "11", kube_env=ENV, kube_labels="cloud.google.com/gke-nodepool=gpu,team=a")
        v = join.verdict(snap([inst], {GROUP_A: [{"name": "n-0", "id": "11", "currentAction": "NONE"}]}), "n-0")
        self.assertTrue(v["joins"], v)
        self.assertEqual(v["csr"], "Approved")
        node = v["node"]
        labels = node["metadata"]["labels"]
        self.assertEqual(labels["cloud.google.com/gke-nodepool"], "gpu")
        self.assertEqual(labels["team"], "a")
        # the kubelet registered it, but kube-labels lacks it: GKE's annotator strips it
        self.assertNotIn("cloud.google.com/gke-accelerator", labels)
        # a label GKE does not own stays as the kubelet registered it
        self.assertEqual(labels["muster.dev/pool"], "l4")
        self.assertEqual(labels["topology.kubernetes.io/zone"], ZA)
        self.assertEqual(node["spec"]["providerID"], f"gce://{P}/{ZA}/n-0")
        taints = {(t["key"], t["value"], t["effect"]) for t in node["spec"]["taints"]}
        self.assertEqual(taints, {("a", "b", "NoExecute"), ("muster.dev/gpu", "true", "NoSchedule")})
        ann = node["metadata"]["annotations"]
        self.assertEqual(ann["container.googleapis.com/instance_id"], "11")
        self.assertEqual(ann["node.gke.io/last-applied-node-labels"], "cloud.google.com/gke-nodepool=gpu,team=a")
        self.assertEqual(ann["node.gke.io/last-applied-node-taints"], "a=b:NoExecute")

    def test_without_kube_labels_the_kubelets_labels_stay(self):
        inst = instance("n-0", "11", kube_env=ENV)
        v = join.verdict(snap([inst], {GROUP_A: [{"name": "n-0", "id": "11"}]}), "n-0")
        self.assertEqual(v["node"]["metadata"]["labels"]["cloud.google.com/gke-accelerator"], "nvidia-l4")

    def test_the_kubelets_arch_is_its_machine_types_architecture(self):
        inst = instance("n-0", "11", kube_env=ENV)
        state = snap([inst], {GROUP_A: [{"name": "n-0", "id": "11"}]})
        for arch, label in [("ARM64", "arm64"), ("X86_64", "amd64"), (None, "amd64")]:
            state["machineTypes"] = {"g2-standard-4": {"guestCpus": 4, "memoryMb": 16384, "architecture": arch}}
            labels = join.verdict(state, "n-0")["node"]["metadata"]["labels"]
            self.assertEqual(labels["kubernetes.io/arch"], label, arch)
            self.assertEqual(labels["beta.kubernetes.io/arch"], label, arch)

    def test_an_instance_outside_every_group_is_denied_even_with_a_forged_hint(self):
        inst = instance("vm", "12", kube_env=ENV, kube_labels="", created_by=GROUP_A.split("/compute/v1/")[1])
        v = join.verdict(snap([inst], {GROUP_A: [{"name": "n-0", "id": "11"}]}), "vm")
        self.assertFalse(v["joins"])
        self.assertEqual(v["csr"], "Denied")
        self.assertIn("doesn't belong to cluster 'prod'", v["reason"])
        self.assertIsNone(v["node"])

    def test_membership_is_by_instance_id_not_by_name(self):
        # a recreated VM under a name the group knows, but not the group's VM
        inst = instance("n-0", "99", kube_env=ENV)
        v = join.verdict(snap([inst], {GROUP_A: [{"name": "n-0", "id": "11"}]}), "n-0")
        self.assertFalse(v["joins"])

    def test_a_group_in_another_zone_does_not_vouch(self):
        inst = instance("n-0", "11", zone=ZA, kube_env=ENV)
        v = join.verdict(snap([inst], {GROUP_B: [{"name": "n-0", "id": "11"}]}), "n-0")
        self.assertFalse(v["joins"])
        inst = instance("n-0", "11", zone=ZB, kube_env=ENV)
        self.assertTrue(join.verdict(snap([inst], {GROUP_B: [{"name": "n-0", "id": "11"}]}), "n-0")["joins"])

    def test_a_missing_or_stopped_instance_or_one_without_kube_env_never_asks(self):
        groups = {GROUP_A: [{"name": "n-0", "id": "11"}]}
        v = join.verdict(snap([], groups), "n-0")
        self.assertEqual((v["joins"], v["csr"]), (False, "Denied"))
        self.assertIn("doesn't exist in GCE API", v["reason"])
        v = join.verdict(snap([instance("n-0", "11", status="TERMINATED", kube_env=ENV)], groups), "n-0")
        self.assertEqual((v["joins"], v["csr"]), (False, "NotRequested"))
        self.assertIn("TERMINATED", v["reason"])
        v = join.verdict(snap([instance("n-0", "11")], groups), "n-0")
        self.assertEqual((v["joins"], v["csr"]), (False, "NotRequested"))
        self.assertIn("kube-env", v["reason"])


class OverHttp(FakeCase):
    def test_members_of_a_pools_group_join_with_the_pools_labels_a_plain_vm_never(self):
        pool, url = self.pool_group(spot_l4(initialNodeCount=0))
        self.f.create_instances(url, ["n-0"])
        # muster's way today: an instances.insert made from the same template
        t = self.f.ok("GET", self.f.ok("GET", self.f.group_path(url))["instanceTemplate"].split("/compute/v1", 1)[1]
                      .join(["/compute/v1", ""]))
        body = dict(t["properties"], name="plain-0", machineType=f"zones/{ZA}/machineTypes/g2-standard-4")
        op = self.f.ok("POST", zonal(ZA, "/instances"), body)
        self.assertNotIn("error", op)
        out = self.f.control("gke/nodes?cluster=prod", "GET")
        self.assertEqual([n["metadata"]["name"] for n in out["nodes"]], ["n-0"])
        node = out["nodes"][0]
        labels = node["metadata"]["labels"]
        self.assertEqual(labels["cloud.google.com/gke-nodepool"], "l4-spot")
        self.assertEqual(labels["cloud.google.com/gke-accelerator"], "nvidia-l4")
        self.assertEqual(labels["muster.dev/pool"], "l4")
        self.assertEqual(labels["cloud.google.com/gke-spot"], "true")
        inst = self.f.instance(ZA, "n-0")[1]
        self.assertEqual(node["metadata"]["annotations"]["container.googleapis.com/instance_id"], inst["id"])
        self.assertIn({"key": "muster.dev/gpu", "value": "true", "effect": "NoSchedule"}, node["spec"]["taints"])
        self.assertEqual(node["status"]["capacity"], {"cpu": "4", "memory": f"{16 * 1024}Mi", "pods": "110",
                                                      "nvidia.com/gpu": "1"})
        refused = {r["name"]: r for r in out["refused"]}
        self.assertEqual(sorted(refused), ["plain-0"])
        self.assertEqual(refused["plain-0"]["csr"], "Denied")
        self.assertIn("doesn't belong to cluster", refused["plain-0"]["reason"])
        one = self.f.control("gke/join?name=plain-0", "GET")
        self.assertFalse(one["joins"])
        self.assertEqual(one["zone"], ZA)
        self.assertTrue(self.f.control(f"gke/join?name=n-0&zone={ZA}", "GET")["joins"])

    def test_a_stocked_out_member_is_no_node_until_it_exists(self):
        _, url = self.pool_group()
        self.f.control(f"stockout?zone={ZA}&machineType=g2-standard-4")
        self.f.create_instances(url, ["so-0"])
        out = self.f.control("gke/nodes?cluster=prod", "GET")
        self.assertEqual(out["nodes"], [])
        self.assertIn("doesn't exist", self.f.control("gke/join?name=so-0", "GET")["reason"])
        self.f.control("restock")
        out = self.f.control("gke/nodes?cluster=prod", "GET")
        self.assertEqual([n["metadata"]["name"] for n in out["nodes"]], ["so-0"])

    def test_a_preempted_member_leaves_and_its_recreation_joins_with_a_new_id(self):
        _, url = self.pool_group()
        self.f.create_instances(url, ["p-0"])
        old = self.f.control("gke/nodes", "GET")["nodes"][0]["metadata"]["annotations"]
        self.f.control("hold?on=true")
        self.f.control("preempt?name=p-0")
        out = self.f.control("gke/nodes", "GET")
        self.assertEqual(out["nodes"], [])
        self.assertEqual(out["refused"][0]["csr"], "NotRequested")
        self.f.control("hold?on=false")
        new = self.f.control("gke/nodes", "GET")["nodes"][0]["metadata"]["annotations"]
        self.assertNotEqual(new["container.googleapis.com/instance_id"], old["container.googleapis.com/instance_id"])

    def test_another_cluster_is_404(self):
        code, _ = self.f.call("GET", "/fake/gke/nodes?cluster=staging")
        self.assertEqual(code, 404)


if __name__ == "__main__":
    unittest.main()
