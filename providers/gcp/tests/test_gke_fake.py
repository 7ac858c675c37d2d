"""The GKE side of the Compute fake over HTTP, one fresh fake per test:
node pools, their managed instance groups, stockouts and preemptions per
managed instance, and the fixture's routes unchanged."""

import json
import os
import unittest

from fake_client import CLUSTER, GKE, HERE, Fake, P, zonal

ZA, ZB = "us-central1-a", "us-central1-b"


def spot_l4(name="l4-spot", zones=(ZA,), **extra):
    pool = {"name": name, "locations": list(zones), "initialNodeCount": 0,
            "autoscaling": {"enabled": False},
            "config": {"machineType": "g2-standard-4", "spot": True,
                       "labels": {"muster.dev/pool": "l4"},
                       "taints": [{"key": "muster.dev/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
                       "accelerators": [{"acceleratorType": "nvidia-l4", "acceleratorCount": "1",
                                         "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]}}
    pool.update(extra)
    return pool


def metadata(obj, key):
    items = (obj.get("properties", obj).get("metadata") or {}).get("items") or []
    return next((i["value"] for i in items if i["key"] == key), None)


class FakeCase(unittest.TestCase):
    def setUp(self):
        self.f = Fake()
        self.addCleanup(self.f.close)

    def pool_group(self, pool=None):
        p = self.f.create_pool(pool or spot_l4())
        return p, p["instanceGroupUrls"][0]

    def names(self, url, action=None):
        return sorted(m["name"] for m in self.f.managed(url) if action is None or m["currentAction"] == action)


class ManagedInstanceGroups(FakeCase):
    def test_create_instances_is_idempotent_by_name(self):
        _, url = self.pool_group()
        op = self.f.create_instances(url, ["n-a", "n-b"])
        self.assertEqual(op["status"], "DONE")
        self.assertNotIn("error", op)
        first = {m["name"]: m["id"] for m in self.f.managed(url)}
        self.f.create_instances(url, ["n-a", "n-b", "n-c"])
        ms = {m["name"]: m for m in self.f.managed(url)}
        self.assertEqual(sorted(ms), ["n-a", "n-b", "n-c"])
        self.assertEqual(ms["n-a"]["id"], first["n-a"], "n-a was not made again")
        self.assertEqual(self.f.ok("GET", self.f.group_path(url))["targetSize"], 3)
        created = [c["name"] for c in self.f.control("created", "GET")]
        self.assertEqual(created.count("n-a"), 1)

    def test_operations_run_until_read_when_asked_and_every_request_is_logged(self):
        _, url = self.pool_group()
        self.f.control("op-polls?n=2")
        op = self.f.create_instances(url, ["n-slow"])
        self.assertEqual(op["status"], "RUNNING")
        self.assertNotIn("_left", op)
        path = op["selfLink"].split("/compute/v1", 1)[1].join(["/compute/v1", ""])
        self.assertEqual(self.f.ok("GET", path)["status"], "RUNNING")
        done = self.f.ok("POST", path + "/wait")
        self.assertEqual(done["status"], "DONE")
        self.assertIn("endTime", done)
        self.f.control("op-polls?n=0")
        self.assertEqual(self.f.create_instances(url, ["n-fast"])["status"], "DONE")
        log = self.f.control("log", "GET")
        self.assertIn({"method": "POST", "path": path + "/wait"}, log)
        self.assertTrue(all(not e["path"].startswith("/fake") for e in log), "knobs are not API calls")

    def test_a_request_id_seen_before_returns_the_same_operation(self):
        _, url = self.pool_group()
        path = self.f.group_path(url) + "/createInstances?requestId=r-1"
        a = self.f.ok("POST", path, {"instances": [{"name": "x-0"}]})
        b = self.f.ok("POST", path, {"instances": [{"name": "x-1"}]})
        self.assertEqual(a["name"], b["name"])
        self.assertEqual(self.names(url), ["x-0"])

    def test_instances_of_a_group_are_instances_of_the_fake_made_from_the_template(self):
        pool, url = self.pool_group()
        self.f.create_instances(url, ["n-0"])
        code, inst = self.f.instance(ZA, "n-0")
        self.assertEqual(code, 200)
        self.assertEqual(inst["status"], "RUNNING")
        self.assertEqual(inst["labels"]["goog-k8s-node-pool-name"], "l4-spot")
        self.assertEqual(inst["scheduling"]["provisioningModel"], "SPOT")
        self.assertTrue(inst["machineType"].endswith("/zones/us-central1-a/machineTypes/g2-standard-4"))
        group = url.rsplit("/", 1)[1]
        created_by = metadata(inst, "created-by")
        self.assertRegex(created_by, rf"^projects/\d+/zones/{ZA}/instanceGroupManagers/{group}$")
        self.assertIn("cloud.google.com/gke-nodepool=l4-spot", metadata(inst, "kube-labels"))
        listed = self.f.ok("GET", f"/compute/v1/projects/{P}/aggregated/instances")
        self.assertIn("n-0", [i["name"] for i in listed["items"][f"zones/{ZA}"]["instances"]])

    def test_preserved_metadata_of_a_per_instance_config_reaches_the_instance_and_its_recreation(self):
        _, url = self.pool_group()
        self.f.ok("POST", self.f.group_path(url) + "/createInstances", {"instances": [
            {"name": "m-0", "preservedState": {"metadata": {"muster-poolnode": "pn-0", "cluster-name": "other"}}}]})
        inst = self.f.instance(ZA, "m-0")[1]
        self.assertEqual(metadata(inst, "muster-poolnode"), "pn-0")
        self.assertEqual(metadata(inst, "cluster-name"), "other", "over the template's")
        self.assertIn("cloud.google.com/gke-nodepool=l4-spot", metadata(inst, "kube-labels"))
        self.f.control("preempt?name=m-0")
        again = self.f.instance(ZA, "m-0")[1]
        self.assertNotEqual(again["id"], inst["id"])
        self.assertEqual(metadata(again, "muster-poolnode"), "pn-0")

    def test_delete_instances_deletes_exactly_the_named_ones(self):
        _, url = self.pool_group()
        self.f.create_instances(url, ["d-0", "d-1", "d-2"])
        path = self.f.group_path(url) + "/deleteInstances"
        foreign = f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{ZA}/instances/not-mine"
        # without skipping, an instance outside the group fails the operation: nothing deleted
        op = self.f.ok("POST", path, {"instances": [f"zones/{ZA}/instances/d-1", foreign]})
        self.assertEqual(op["status"], "DONE")
        self.assertIn("not a member", op["error"]["errors"][0]["message"])
        self.assertEqual(self.names(url), ["d-0", "d-1", "d-2"])
        # another zone fails it even with skipping
        other = f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{ZB}/instances/d-1"
        op = self.f.ok("POST", path, {"instances": [other], "skipInstancesOnValidationError": True})
        self.assertIn("error", op)
        self.assertEqual(self.names(url), ["d-0", "d-1", "d-2"])
        op = self.f.ok("POST", path, {"instances": [
            f"https://www.googleapis.com/compute/v1/projects/{P}/zones/{ZA}/instances/d-1", foreign],
            "skipInstancesOnValidationError": True})
        self.assertEqual(op["operationType"], "compute.instanceGroupManagers.deleteInstances")
        self.assertEqual(self.names(url), ["d-0", "d-2"])
        self.assertEqual(self.f.instance(ZA, "d-1")[0], 404)
        self.assertEqual(self.f.instance(ZA, "d-0")[0], 200)
        self.assertEqual(self.f.ok("GET", self.f.group_path(url))["targetSize"], 2)

    def test_a_stockout_is_reported_per_instance_and_cleared(self):
        _, url = self.pool_group()
        self.f.create_instances(url, ["ok-0"])
        self.f.control(f"stockout?zone={ZA}&machineType=g2-standard-4")
        op = self.f.create_instances(url, ["so-0"])
        self.assertEqual(op["status"], "DONE")
        self.assertNotIn("error", op, "GCE accepts the request; the instance fails later")
        ms = {m["name"]: m for m in self.f.managed(url)}
        self.assertEqual(ms["ok-0"]["currentAction"], "NONE")
        self.assertNotIn("lastAttempt", ms["ok-0"])
        so = ms["so-0"]
        self.assertEqual(so["currentAction"], "CREATING")
        self.assertNotIn("id", so)
        self.assertNotIn("instanceStatus", so)
        self.assertEqual(so["lastAttempt"]["errors"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED")
        self.assertIn("does not have enough resources", so["lastAttempt"]["errors"]["errors"][0]["message"])
        self.assertEqual(self.f.instance(ZA, "so-0")[0], 404)
        errors = self.f.ok("GET", self.f.group_path(url) + "/listErrors")["items"]
        self.assertEqual(len(errors), 1, "one error per failed attempt kind, not one per poll")
        self.assertEqual(errors[0]["error"]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED")
        self.assertTrue(errors[0]["instanceActionDetails"]["instance"].endswith("/instances/so-0"))
        self.assertEqual(errors[0]["instanceActionDetails"]["action"], "CREATING")
        g = self.f.ok("GET", self.f.group_path(url))
        self.assertEqual(g["currentActions"]["creating"], 1)
        self.assertFalse(g["status"]["isStable"])
        self.assertEqual(g["targetSize"], 2)
        # the group keeps trying: lifting the stockout lets it create the instance
        self.f.control(f"unstock?zone={ZA}&machineType=g2-standard-4")
        so = next(m for m in self.f.managed(url) if m["name"] == "so-0")
        self.assertEqual(so["currentAction"], "NONE")
        self.assertNotIn("lastAttempt", so)
        self.assertEqual(so["instanceStatus"], "RUNNING")
        self.assertEqual(self.f.instance(ZA, "so-0")[0], 200)
        self.assertTrue(self.f.ok("GET", self.f.group_path(url))["status"]["isStable"])

    def test_a_spot_only_stockout_leaves_on_demand_capacity(self):
        _, spot = self.pool_group()
        od = spot_l4("l4-od")
        od["config"]["spot"] = False
        _, ondemand = self.pool_group(od)
        self.f.control(f"stockout?zone={ZA}&machineType=g2-standard-4&spot=true")
        self.f.create_instances(spot, ["s-0"])
        self.f.create_instances(ondemand, ["o-0"])
        self.assertEqual(self.names(spot, "CREATING"), ["s-0"])
        self.assertEqual(self.names(ondemand, "NONE"), ["o-0"])
        # a plain insert of a spot machine meets the same stockout
        body = {"name": "plain-spot", "machineType": f"zones/{ZA}/machineTypes/g2-standard-4",
                "scheduling": {"provisioningModel": "SPOT"}}
        op = self.f.ok("POST", zonal(ZA, "/instances"), body)
        self.assertEqual(op["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED")
        self.f.control("restock")
        self.assertEqual(self.names(spot, "NONE"), ["s-0"])

    def test_quota_errors_are_reported_per_instance(self):
        _, url = self.pool_group()
        self.f.control("quota?machineType=g2-standard-4")
        self.f.create_instances(url, ["q-0"])
        m = self.f.managed(url)[0]
        self.assertEqual(m["currentAction"], "CREATING")
        self.assertEqual(m["lastAttempt"]["errors"]["errors"][0]["code"], "QUOTA_EXCEEDED")

    def test_a_preempted_spot_instance_is_recreated_under_its_name(self):
        _, url = self.pool_group()
        self.f.create_instances(url, ["p-0"])
        old = self.f.instance(ZA, "p-0")[1]["id"]
        self.f.control("hold?on=true")
        self.f.control("preempt?name=p-0")
        code, inst = self.f.instance(ZA, "p-0")
        self.assertEqual(inst["status"], "TERMINATED")
        self.assertIn("lastStopTimestamp", inst)
        m = self.f.managed(url)[0]
        self.assertEqual(m["currentAction"], "RECREATING")
        self.assertEqual(m["instanceStatus"], "TERMINATED")
        ops = self.f.ok("GET", zonal(ZA, '/operations?filter=operationType="compute.instances.preempted"'))
        self.assertEqual([o["targetLink"].rsplit("/", 1)[1] for o in ops["items"]], ["p-0"])
        self.f.control("hold?on=false")
        code, inst = self.f.instance(ZA, "p-0")
        self.assertEqual(inst["status"], "RUNNING")
        self.assertNotEqual(inst["id"], old, "a new VM under the same name")
        m = self.f.managed(url)[0]
        self.assertEqual((m["currentAction"], m["id"]), ("NONE", inst["id"]))

    def test_a_recreation_waits_out_a_stockout(self):
        _, url = self.pool_group()
        self.f.create_instances(url, ["p-1"])
        self.f.control(f"stockout?zone={ZA}&machineType=g2-standard-4")
        self.f.control("preempt?name=p-1")
        m = self.f.managed(url)[0]
        self.assertEqual(m["currentAction"], "RECREATING")
        self.assertEqual(m["lastAttempt"]["errors"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED")
        self.f.control("restock")
        self.assertEqual(self.f.managed(url)[0]["currentAction"], "NONE")

    def test_an_instance_deleted_outside_the_group_is_recreated(self):
        _, url = self.pool_group()
        self.f.create_instances(url, ["r-0"])
        self.f.ok("DELETE", zonal(ZA, "/instances/r-0"))
        self.assertEqual(self.f.instance(ZA, "r-0")[0], 200)
        self.assertEqual(self.names(url), ["r-0"])

    def test_plain_preemption_outside_groups_is_unchanged(self):
        body = {"name": "vm", "machineType": f"zones/{ZA}/machineTypes/g2-standard-4"}
        self.f.ok("POST", zonal(ZA, "/instances"), body)
        self.f.control("preempt?name=vm")
        self.f.ok("GET", zonal(ZA, "/instances"))  # any request: groups act
        self.assertEqual(self.f.instance(ZA, "vm")[1]["status"], "TERMINATED", "no group repairs it")

    def test_hold_keeps_creations_pending_without_errors(self):
        _, url = self.pool_group()
        self.f.control("hold?on=true")
        self.f.create_instances(url, ["h-0"])
        m = self.f.managed(url)[0]
        self.assertEqual(m["currentAction"], "CREATING")
        self.assertNotIn("lastAttempt", m)
        self.f.control("hold?on=false")
        self.assertEqual(self.f.managed(url)[0]["currentAction"], "NONE")

    def test_resize_names_instances_after_the_base_name_and_shrinks(self):
        _, url = self.pool_group()
        g = self.f.ok("GET", self.f.group_path(url))
        self.f.ok("POST", self.f.group_path(url) + "/resize?size=3")
        names = self.names(url)
        self.assertEqual(len(names), 3)
        for n in names:
            self.assertRegex(n, rf"^{g['baseInstanceName']}-[a-z0-9]{{4}}$")
            self.assertLessEqual(len(n), 63)
        made = [m["name"] for m in self.f.managed(url)]  # in the order they were made
        self.f.control(f"stockout?zone={ZA}&machineType=g2-standard-4")
        self.f.create_instances(url, ["pending-0"])
        self.f.ok("POST", self.f.group_path(url) + "/resize?size=1")
        # the instance not yet made goes first, then the newest
        self.assertEqual(self.names(url), [made[0]])
        self.assertEqual(self.f.ok("GET", self.f.group_path(url))["targetSize"], 1)

    def test_group_calls_are_counted_by_method(self):
        _, url = self.pool_group()
        self.f.create_instances(url, ["c-0"])
        self.f.managed(url)
        calls = self.f.control("calls", "GET")
        self.assertEqual(calls["POST projects/zones/instanceGroupManagers/createInstances"], 1)
        self.assertEqual(calls["POST projects/zones/instanceGroupManagers/listManagedInstances"], 1)

    def test_paginated_listing(self):
        _, url = self.pool_group()
        self.f.create_instances(url, [f"pg-{i}" for i in range(5)])
        self.f.control(f"mig/paginated?zone={ZA}&name={url.rsplit('/', 1)[1]}")
        path = self.f.group_path(url) + "/listManagedInstances?maxResults=2"
        seen, token = [], None
        for _ in range(5):
            page = self.f.ok("POST", path + (f"&pageToken={token}" if token else ""))
            seen += [m["name"] for m in page["managedInstances"]]
            token = page.get("nextPageToken")
            if not token:
                break
        self.assertEqual(sorted(seen), [f"pg-{i}" for i in range(5)])

    def test_an_unknown_group_is_404(self):
        code, err = self.f.call("POST", zonal(ZA, "/instanceGroupManagers/nope/createInstances"),
                                {"instances": [{"name": "a"}]})
        self.assertEqual(code, 404)
        self.assertEqual(err["error"]["errors"][0]["reason"], "notFound")


class NodePools(FakeCase):
    def test_a_pool_gets_templates_and_one_group_per_zone_named_as_gke_names_them(self):
        self.f.control("gke/op-polls?n=2")
        op = self.f.ok("POST", f"{CLUSTER}/nodePools", {"nodePool": spot_l4(zones=(ZA, ZB))})
        self.assertEqual((op["operationType"], op["status"]), ("CREATE_NODE_POOL", "RUNNING"))
        self.assertTrue(op["targetLink"].endswith(f"{CLUSTER}/nodePools/l4-spot"))
        self.assertEqual(self.f.ok("GET", f"{CLUSTER}/nodePools/l4-spot")["status"], "PROVISIONING")
        seen = [self.f.ok("GET", f"{GKE}/operations/{op['name']}")["status"] for _ in range(3)]
        self.assertEqual(seen, ["RUNNING", "RUNNING", "DONE"])
        pool = self.f.ok("GET", f"{CLUSTER}/nodePools/l4-spot")
        self.assertEqual(pool["status"], "RUNNING")
        self.assertEqual(len(pool["instanceGroupUrls"]), 2)
        listed = self.f.ok("GET", f"{CLUSTER}/nodePools")["nodePools"]
        self.assertEqual([p["name"] for p in listed], ["upgrading-pool", "default-pool", "l4-spot"])
        for url, zone in zip(pool["instanceGroupUrls"], (ZA, ZB)):
            self.assertRegex(url, rf"/zones/{zone}/instanceGroupManagers/gke-prod-l4-spot-[0-9a-f]{{8}}-grp$")
            g = self.f.ok("GET", self.f.group_path(url))
            self.assertEqual(g["baseInstanceName"], g["name"][:-len("-grp")])
            self.assertEqual(g["targetSize"], 0)
            t = self.f.ok("GET", g["instanceTemplate"].split("/compute/v1", 1)[1].join(["/compute/v1", ""]))
            self.assertEqual(t["name"], g["baseInstanceName"])
            labels = dict(kv.split("=", 1) for kv in metadata(t, "kube-labels").split(","))
            self.assertEqual(labels["cloud.google.com/gke-nodepool"], "l4-spot")
            self.assertEqual(labels["cloud.google.com/gke-accelerator"], "nvidia-l4")
            self.assertEqual(labels["muster.dev/pool"], "l4")
            self.assertEqual(labels["cloud.google.com/gke-spot"], "true")
            env = metadata(t, "kube-env")
            self.assertIn("NODE_TAINTS: muster.dev/gpu=true:NoSchedule,nvidia.com/gpu=present:NoSchedule", env)
            self.assertIn(f"ZONE: {zone}", env)
            self.assertIn("node_taints=muster.dev/gpu=true:NoSchedule", env)
            self.assertIn("KubeletConfiguration", metadata(t, "kubelet-config"))
            self.assertEqual(t["properties"]["labels"]["goog-k8s-node-pool-name"], "l4-spot")
            self.assertEqual(t["properties"]["scheduling"]["provisioningModel"], "SPOT")
        cluster = self.f.ok("GET", CLUSTER)
        self.assertIn(pool["instanceGroupUrls"][0],
                      [u for p in cluster["nodePools"] for u in p.get("instanceGroupUrls", [])])

    def test_the_gpu_taint_comes_only_beside_a_non_gpu_pool(self):
        for name in ("upgrading-pool", "default-pool"):
            self.f.wait_gke(self.f.ok("DELETE", f"{CLUSTER}/nodePools/{name}"))
        pool = self.f.create_pool(spot_l4())
        g = self.f.ok("GET", self.f.group_path(pool["instanceGroupUrls"][0]))
        t = self.f.ok("GET", g["instanceTemplate"].split("/compute/v1", 1)[1].join(["/compute/v1", ""]))
        self.assertIn("NODE_TAINTS: muster.dev/gpu=true:NoSchedule\n", metadata(t, "kube-env"))

    def test_initial_node_count_is_per_zone(self):
        pool = self.f.create_pool(spot_l4(zones=(ZA, ZB), initialNodeCount=2))
        for url in pool["instanceGroupUrls"]:
            self.assertEqual(len(self.names(url, "NONE")), 2)

    def test_deleting_a_pool_deletes_its_groups_templates_and_instances(self):
        pool, url = self.pool_group(spot_l4(initialNodeCount=1))
        name = self.names(url)[0]
        g = self.f.ok("GET", self.f.group_path(url))
        tpath = g["instanceTemplate"].split("/compute/v1", 1)[1].join(["/compute/v1", ""])
        op = self.f.ok("DELETE", f"{CLUSTER}/nodePools/l4-spot")
        self.assertEqual(op["operationType"], "DELETE_NODE_POOL")
        self.assertEqual(self.f.ok("GET", f"{CLUSTER}/nodePools/l4-spot")["status"], "STOPPING")
        self.f.wait_gke(op)
        code, err = self.f.call("GET", f"{CLUSTER}/nodePools/l4-spot")
        self.assertEqual((code, err["error"]["status"]), (404, "NOT_FOUND"))
        self.assertEqual(self.f.call("GET", self.f.group_path(url))[0], 404)
        self.assertEqual(self.f.call("GET", tpath)[0], 404)
        self.assertEqual(self.f.instance(ZA, name)[0], 404)
        names = [p["name"] for p in self.f.ok("GET", f"{CLUSTER}/nodePools")["nodePools"]]
        self.assertEqual(names, ["upgrading-pool", "default-pool"])

    def test_an_existing_name_is_409_and_an_unknown_cluster_404(self):
        self.f.create_pool(spot_l4())
        code, err = self.f.call("POST", f"{CLUSTER}/nodePools", {"nodePool": spot_l4()})
        self.assertEqual((code, err["error"]["status"]), (409, "ALREADY_EXISTS"))
        self.assertIn("nodePools/l4-spot", err["error"]["message"])
        code, err = self.f.call("POST", f"{GKE}/clusters/staging/nodePools", {"nodePool": spot_l4("x")})
        self.assertEqual((code, err["error"]["status"]), (404, "NOT_FOUND"))
        code, err = self.f.call("DELETE", f"{CLUSTER}/nodePools/nope")
        self.assertEqual((code, err["error"]["status"]), (404, "NOT_FOUND"))
        code, err = self.f.call("GET", f"{GKE}/operations/operation-0")
        self.assertEqual(code, 404)

    def test_invalid_pools_are_400_with_the_field_named(self):
        def pool(**cfg):
            p = spot_l4()
            p["config"].update(cfg)
            return p
        t4 = [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": "2"}]
        cases = [
            (dict(spot_l4(), name="GPU-pool"), "nodePool.name"),
            (dict(spot_l4(), name="p" * 41), "nodePool.name"),
            (dict(spot_l4(), name="ends-with-"), "nodePool.name"),
            (pool(machineType="z9-mega-1"), "machineType"),
            (pool(accelerators=[{"acceleratorType": "nvidia-tesla-v100", "acceleratorCount": "1"}]), "acceleratorType"),
            (pool(accelerators=[{"acceleratorType": "nvidia-l4", "acceleratorCount": "2"}]), "accelerators[0]"),
            (pool(accelerators=[{"acceleratorType": "nvidia-l4", "acceleratorCount": "0"}]), "acceleratorCount"),
            (pool(machineType="a2-highgpu-1g", accelerators=t4), "accelerators[0]"),
            (pool(machineType="n1-standard-8", accelerators=[dict(t4[0], acceleratorCount="3")]), "acceleratorCount"),
            (pool(accelerators=[{"acceleratorType": "nvidia-l4", "acceleratorCount": "1",
                                 "gpuDriverInstallationConfig": {"gpuDriverVersion": "NEWEST"}}]), "gpuDriverVersion"),
            (pool(preemptible=True), "spot and preemptible"),
            (pool(taints=[{"key": "a", "value": "b", "effect": "NoSchedule"}]), "taints[0].effect"),
            (pool(labels={"bad key!": "x"}), "labels"),
            (pool(workloadMetadataConfig={"mode": "SOMETIMES"}), "workloadMetadataConfig"),
            (dict(spot_l4(), initialNodeCount=-1), "initialNodeCount"),
            (dict(spot_l4(), autoscaling={"enabled": True, "minNodeCount": 3, "maxNodeCount": 1}), "autoscaling"),
            (dict(spot_l4(zones=(ZA, ZB)), placementPolicy={"type": "COMPACT"}), "placementPolicy"),
            (dict(spot_l4(), locations=["europe-west4-a"]), "locations"),
            ({}, "nodePool"),
        ]
        for body, field in cases:
            with self.subTest(field=field, body=body.get("name")):
                code, err = self.f.call("POST", f"{CLUSTER}/nodePools", {"nodePool": body} if body else {})
                self.assertEqual(code, 400, err)
                self.assertEqual(err["error"]["status"], "INVALID_ARGUMENT")
                self.assertIn(field, err["error"]["message"])
        names = [p["name"] for p in self.f.ok("GET", f"{CLUSTER}/nodePools")["nodePools"]]
        self.assertEqual(names, ["upgrading-pool", "default-pool"], "nothing was created")

    def test_an_accelerator_missing_in_a_zone_is_refused(self):
        self.f.control(f"gke/unavailable?zone={ZB}&acceleratorType=nvidia-h100-80gb")
        a3 = {"name": "h100", "locations": [ZA, ZB], "config": {"machineType": "a3-highgpu-8g"}}
        code, err = self.f.call("POST", f"{CLUSTER}/nodePools", {"nodePool": a3})
        self.assertEqual(code, 400, err)
        self.assertIn(ZB, err["error"]["message"])
        ok = self.f.create_pool(dict(a3, locations=[ZA], placementPolicy={"type": "COMPACT"}))
        # built-in GPUs are attached though not named
        self.assertEqual(ok["config"]["accelerators"], [{"acceleratorCount": "8", "acceleratorType": "nvidia-h100-80gb"}])

    def test_valid_edge_cases_are_accepted(self):
        # autoscaling disabled: its counts are not looked at; no nodes at first
        self.f.create_pool(dict(spot_l4("a"), autoscaling={"enabled": False, "minNodeCount": 9, "maxNodeCount": 1}))
        n1 = {"name": "t4", "config": {"machineType": "n1-standard-8", "accelerators": [
            {"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 2}]}, "initialNodeCount": 1,
            "locations": [ZA]}
        pool = self.f.create_pool(n1)
        name = self.names(pool["instanceGroupUrls"][0])[0]
        inst = self.f.instance(ZA, name)[1]
        self.assertEqual(inst["guestAccelerators"], [{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 2}])
        self.assertEqual(inst["scheduling"]["onHostMaintenance"], "TERMINATE")

    def test_enum_fields_are_read_by_name_or_by_number(self):
        # proto3 JSON: parsers accept enum names and their numbers (Google's Rust client sends numbers)
        body = dict(spot_l4("numbers"), placementPolicy={"type": 1})
        body["config"] = dict(body["config"], taints=[{"key": "k", "value": "v", "effect": 1}],
                              workloadMetadataConfig={"mode": 2},
                              accelerators=[{"acceleratorType": "nvidia-l4", "acceleratorCount": "1",
                                             "gpuDriverInstallationConfig": {"gpuDriverVersion": 2}}])
        self.f.create_pool(body)
        pool = self.f.ok("GET", f"{CLUSTER}/nodePools/numbers")
        cfg = pool["config"]
        self.assertEqual(cfg["taints"][0]["effect"], "NO_SCHEDULE")
        self.assertEqual(cfg["workloadMetadataConfig"]["mode"], "GKE_METADATA")
        self.assertEqual(cfg["accelerators"][0]["gpuDriverInstallationConfig"]["gpuDriverVersion"], "DEFAULT")
        self.assertEqual(pool["placementPolicy"]["type"], "COMPACT")
        # a number no enum value has is still refused
        bad = spot_l4("badnumber")
        bad["config"] = dict(bad["config"], workloadMetadataConfig={"mode": 7})
        code, err = self.f.call("POST", f"{CLUSTER}/nodePools", {"nodePool": bad})
        self.assertEqual(code, 400, err)
        self.assertIn("workloadMetadataConfig", err["error"]["message"])

    def test_set_size_and_set_autoscaling(self):
        pool = self.f.create_pool(spot_l4(zones=(ZA, ZB)))
        op = self.f.ok("POST", f"{CLUSTER}/nodePools/l4-spot:setSize", {"nodeCount": 2})
        self.assertEqual(op["operationType"], "SET_NODE_POOL_SIZE")
        self.f.wait_gke(op)
        for url in pool["instanceGroupUrls"]:
            self.assertEqual(len(self.names(url)), 2)
        code, err = self.f.call("POST", f"{CLUSTER}/nodePools/l4-spot:setAutoscaling",
                                {"autoscaling": {"enabled": True, "minNodeCount": 5, "maxNodeCount": 2}})
        self.assertEqual((code, err["error"]["status"]), (400, "INVALID_ARGUMENT"))
        self.f.wait_gke(self.f.ok("POST", f"{CLUSTER}/nodePools/l4-spot:setAutoscaling",
                                  {"autoscaling": {"enabled": True, "minNodeCount": 0, "maxNodeCount": 4}}))
        self.assertEqual(self.f.ok("GET", f"{CLUSTER}/nodePools/l4-spot")["autoscaling"]["maxNodeCount"], 4)


class FixtureUnchanged(FakeCase):
    """What the Rust tests read of the fixture answers as before."""

    def test_fixture_groups_templates_and_pools_answer_as_the_fixture_says(self):
        with open(os.path.join(HERE, "gke_fixture.json")) as fh:
            fx = json.load(fh)
        for g in fx["instanceGroupManagers"]:
            zone = g["zone"].rsplit("/", 1)[1]
            self.assertEqual(self.f.ok("GET", zonal(zone, f"/instanceGroupManagers/{g['name']}")), g)
        self.assertEqual(self.f.ok("GET", f"{CLUSTER}/nodePools"), {"nodePools": fx["nodePools"]})
        t = fx["instanceTemplates"][0]
        self.assertEqual(self.f.ok("GET", f"/compute/v1/projects/{P}/regions/us-central1/instanceTemplates/{t['name']}"), t)
        code, err = self.f.call("GET", f"{GKE}/clusters/staging/nodePools")
        self.assertEqual(code, 404)
        self.assertEqual(err["error"]["status"], "NOT_FOUND")
        code, _ = self.f.call("GET", zonal("us-central1-c", "/instanceGroupManagers/gke-prod-upgrading-pool-11111111-grp"))
        self.assertEqual(code, 404)

    def test_a_stockout_without_spot_still_exhausts_plain_inserts_of_both_kinds(self):
        self.f.control(f"stockout?zone={ZA}&machineType=g2-standard-4")
        for sched in ({}, {"provisioningModel": "SPOT"}):
            body = {"name": f"v{len(sched)}", "machineType": f"zones/{ZA}/machineTypes/g2-standard-4",
                    "scheduling": sched}
            op = self.f.ok("POST", zonal(ZA, "/instances"), body)
            self.assertEqual(op["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED")


if __name__ == "__main__":
    unittest.main()


class Cluster(FakeCase):
    def test_the_cluster_reads_as_standard_or_autopilot(self):
        path = CLUSTER
        self.assertEqual(self.f.ok("GET", path)["autopilot"], {"enabled": False})
        self.f.control("gke/autopilot?on=true")
        self.assertEqual(self.f.ok("GET", path)["autopilot"], {"enabled": True})
        self.f.control("gke/autopilot?on=false")
        self.assertEqual(self.f.ok("GET", path)["autopilot"], {"enabled": False})
