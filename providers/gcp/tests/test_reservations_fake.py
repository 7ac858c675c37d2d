"""Compute Engine reservations in the Compute fake over HTTP, one fresh fake
per test: the resources and their listings, Compute's rules when an insert
or a group's instance consumes one, GKE's check of a node pool's
reservation affinity, and physical host topology on instances and nodes;
and the listings of machine and accelerator types, paged as reservations'.
"""

import unittest

from fake_client import CLUSTER, Fake, P, zonal

ZA, ZB = "us-central1-a", "us-central1-b"
KEY = "compute.googleapis.com/reservation-name"


def specific(name):
    return {"consumeReservationType": "SPECIFIC_RESERVATION", "key": KEY, "values": [name]}


def vm(name, machine="a2-highgpu-1g", affinity=None, spot=False, accelerators=None):
    body = {"name": name, "machineType": f"zones/{ZA}/machineTypes/{machine}",
            "scheduling": {"provisioningModel": "SPOT" if spot else "STANDARD"}}
    if affinity is not None:
        body["reservationAffinity"] = affinity
    if accelerators:
        body["guestAccelerators"] = accelerators
    return body


class ReservationCase(unittest.TestCase):
    def setUp(self):
        self.f = Fake()
        self.addCleanup(self.f.close)

    def reserve(self, name, machine="a2-highgpu-1g", count=2, zone=ZA, **extra):
        q = "&".join(f"{k}={v}" for k, v in dict(extra, project=extra.get("project", P), zone=zone,
                                                    name=name, machineType=machine, count=count).items())
        self.f.control(f"reservation?{q}")

    def in_use(self, name, zone=ZA, project=P):
        r = self.f.ok("GET", f"/compute/v1/projects/{project}/zones/{zone}/reservations/{name}")
        return int(r["specificReservation"]["inUseCount"])

    def insert(self, body, zone=ZA):
        return self.f.call("POST", zonal(zone, "/instances"), body)


class Resources(ReservationCase):
    def test_get_list_and_aggregated_list_with_pages(self):
        self.reserve("r-a", count=4, deleteAtTime="2026-12-01T00:00:00Z")
        self.reserve("r-b", zone=ZB)
        self.reserve("r-c", machine="n1-standard-8", acceleratorType="nvidia-tesla-t4", acceleratorCount=4)
        r = self.f.ok("GET", zonal(ZA, "/reservations/r-a"))
        self.assertEqual((r["status"], r["specificReservation"]["count"], r["specificReservation"]["inUseCount"]),
                         ("READY", "4", "0"))
        self.assertEqual(r["deleteAtTime"], "2026-12-01T00:00:00Z")
        self.assertTrue(r["zone"].endswith(f"/zones/{ZA}"))
        code, body = self.f.call("GET", zonal(ZA, "/reservations/nope"))
        self.assertEqual((code, body["error"]["errors"][0]["reason"]), (404, "notFound"))
        names = [x["name"] for x in self.f.ok("GET", zonal(ZA, "/reservations"))["items"]]
        self.assertEqual(names, ["r-a", "r-c"])
        self.f.control("list-page?n=2")
        seen, token = [], None
        while True:
            page = self.f.ok("GET", f"/compute/v1/projects/{P}/aggregated/reservations"
                                    + (f"?pageToken={token}" if token else ""))
            for scope, items in page["items"].items():
                seen += [(scope, x["name"]) for x in items["reservations"]]
            token = page.get("nextPageToken")
            if not token:
                break
        self.assertEqual(sorted(seen), [(f"zones/{ZA}", "r-a"), (f"zones/{ZA}", "r-c"), (f"zones/{ZB}", "r-b")])


class TypeListings(ReservationCase):
    def test_machine_and_accelerator_types_page_and_every_page_adds_up_to_one(self):
        for coll in ("machineTypes", "acceleratorTypes"):
            whole = [x["name"] for x in self.f.ok("GET", zonal(ZA, f"/{coll}"))["items"]]
            self.assertGreater(len(whole), 2, coll)
            self.f.control("list-page?n=2")
            seen, token, pages = [], None, 0
            while True:
                page = self.f.ok("GET", zonal(ZA, f"/{coll}") + (f"?pageToken={token}" if token else ""))
                self.assertLessEqual(len(page["items"]), 2, coll)
                seen += [x["name"] for x in page["items"]]
                pages += 1
                token = page.get("nextPageToken")
                if not token:
                    break
            self.assertEqual(seen, whole, coll)
            self.assertEqual(pages, (len(whole) + 1) // 2, coll)
            self.f.control("list-page?n=500")


class Inserts(ReservationCase):
    def test_a_named_reservation_takes_machines_until_full_and_gets_them_back(self):
        self.reserve("r-a", count=2)
        for n in ("v-0", "v-1"):
            code, op = self.insert(vm(n, affinity=specific("r-a")))
            self.assertEqual(code, 200)
            self.assertNotIn("error", op)
        self.assertEqual(self.in_use("r-a"), 2)
        code, op = self.insert(vm("v-2", affinity=specific("r-a")))
        self.assertEqual(code, 200, "the refusal is the operation's")
        err = op["error"]["errors"][0]
        self.assertEqual(err["code"], "CONDITION_NOT_MET")
        self.assertIn("Specified reservation 'r-a' does not have available resources for the request.", err["message"])
        self.assertEqual(self.f.instance(ZA, "v-2")[0], 404)
        self.f.ok("DELETE", zonal(ZA, "/instances/v-0"))
        self.assertEqual(self.in_use("r-a"), 1)
        code, op = self.insert(vm("v-2", affinity=specific("r-a")))
        self.assertNotIn("error", op)
        inst = self.f.instance(ZA, "v-2")[1]
        self.assertEqual(inst["reservationAffinity"]["values"], ["r-a"])

    def test_what_a_named_reservation_refuses(self):
        self.reserve("r-a", count=2)
        self.reserve("r-new", status="CREATING")
        self.reserve("r-t4", machine="n1-standard-8", acceleratorType="nvidia-tesla-t4", acceleratorCount=4)
        cases = [
            (vm("x-0", affinity=specific("missing")), "Specified reservation 'missing' does not exist."),
            (vm("x-1", affinity=specific("r-new")), "status: CREATING, as it requires reservation to be in READY state"),
            (vm("x-2", machine="a2-highgpu-8g", affinity=specific("r-a")),
             "No available resources in specified reservations 'r-a'"),
            (vm("x-3", machine="n1-standard-8", affinity=specific("r-t4"),
                accelerators=[{"acceleratorType": f"zones/{ZA}/acceleratorTypes/nvidia-tesla-t4",
                               "acceleratorCount": 2}]),
             "No available resources in specified reservations 'r-t4'"),
        ]
        for body, words in cases:
            code, op = self.insert(body)
            self.assertEqual(code, 200, body["name"])
            self.assertEqual(op["error"]["errors"][0]["code"], "CONDITION_NOT_MET", body["name"])
            self.assertIn(words, op["error"]["errors"][0]["message"], body["name"])
        code, op = self.insert(vm("x-4", machine="n1-standard-8", affinity=specific("r-t4"),
                                  accelerators=[{"acceleratorType": f"zones/{ZA}/acceleratorTypes/nvidia-tesla-t4",
                                                 "acceleratorCount": 4}]))
        self.assertNotIn("error", op, "the same GPUs match")
        self.assertEqual(self.in_use("r-t4"), 1)

    def test_spot_vms_and_malformed_affinities_are_refused_outright(self):
        self.reserve("r-a")
        for body in (vm("s-0", affinity=specific("r-a"), spot=True),
                     vm("s-1", affinity={"consumeReservationType": "SPECIFIC_RESERVATION", "key": "name",
                                         "values": ["r-a"]}),
                     vm("s-2", affinity={"consumeReservationType": "SPECIFIC_RESERVATION", "key": KEY})):
            code, out = self.insert(body)
            self.assertEqual((code, out["error"]["errors"][0]["reason"]), (400, "invalid"), body["name"])
        self.assertEqual(self.in_use("r-a"), 0)
        code, op = self.insert(vm("s-3", spot=True))
        self.assertNotIn("error", op)
        self.assertEqual(self.in_use("r-a"), 0, "a spot VM never consumes")

    def test_only_a_vm_naming_it_consumes_a_specific_only_reservation(self):
        self.reserve("r-only", specific="true")
        self.reserve("r-any", zone=ZB)
        self.insert(vm("a-0"))
        self.assertEqual(self.in_use("r-only"), 0)
        b = dict(vm("a-1"), machineType=f"zones/{ZB}/machineTypes/a2-highgpu-1g")
        self.insert(b, zone=ZB)
        self.assertEqual(self.in_use("r-any", zone=ZB), 1, "no affinity is ANY_RESERVATION")
        b = dict(b, name="a-2", reservationAffinity={"consumeReservationType": "NO_RESERVATION"})
        self.insert(b, zone=ZB)
        self.assertEqual(self.in_use("r-any", zone=ZB), 1, "NO_RESERVATION consumes none")
        self.insert(vm("a-3", affinity=specific("r-only")))
        self.assertEqual(self.in_use("r-only"), 1)

    def test_a_shared_reservation_is_named_by_project_and_usable_only_when_shared(self):
        self.reserve("r-host", project="host-project", shareWith=P)
        self.reserve("r-private", project="host-project")
        code, op = self.insert(vm("h-0", affinity=specific("projects/host-project/reservations/r-host")))
        self.assertNotIn("error", op)
        self.assertEqual(self.in_use("r-host", project="host-project"), 1)
        code, op = self.insert(vm("h-1", affinity=specific("projects/host-project/reservations/r-private")))
        self.assertIn("does not exist", op["error"]["errors"][0]["message"])

    def test_a_reservations_machines_are_not_hit_by_a_zone_stockout(self):
        self.reserve("r-a", count=1)
        self.f.control(f"stockout?zone={ZA}&machineType=a2-highgpu-1g")
        code, op = self.insert(vm("z-0", affinity=specific("r-a")))
        self.assertNotIn("error", op)
        code, op = self.insert(vm("z-1"))
        self.assertEqual(op["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED",
                         "the reservation is full: the zone's capacity it is")

    def test_the_topology_knob_gives_an_instance_its_physical_host(self):
        self.insert(vm("t-0"))
        self.f.control("topology?name=t-0&cluster=c1&block=b1&subblock=s1&host=h1")
        inst = self.f.instance(ZA, "t-0")[1]
        self.assertEqual(inst["resourceStatus"]["physicalHostTopology"],
                         {"cluster": "c1", "block": "b1", "subblock": "s1", "host": "h1"})
        self.assertNotIn("resourceStatus", self.insert(vm("t-1"))[1])


def l4_pool(name, affinity, spot=False):
    cfg = {"machineType": "g2-standard-8", "reservationAffinity": affinity}
    if spot:
        cfg["spot"] = True
    return {"name": name, "locations": [ZA], "initialNodeCount": 0, "autoscaling": {"enabled": False},
            "config": cfg}


class NodePools(ReservationCase):
    def test_a_pools_instances_consume_its_reservation_until_it_is_full(self):
        self.reserve("r-l4", machine="g2-standard-8", count=2)
        self.f.control("topology?name=n-0&block=b1&subblock=s1&host=h1")
        pool = self.f.create_pool(l4_pool("r-pool", specific("r-l4")))
        url = pool["instanceGroupUrls"][0]
        self.f.create_instances(url, ["n-0", "n-1", "n-2"])
        ms = {m["name"]: m for m in self.f.managed(url)}
        self.assertEqual(ms["n-0"]["currentAction"], "NONE")
        self.assertEqual(ms["n-1"]["currentAction"], "NONE")
        self.assertEqual(ms["n-2"]["currentAction"], "CREATING")
        err = ms["n-2"]["lastAttempt"]["errors"]["errors"][0]
        self.assertEqual(err["code"], "CONDITION_NOT_MET")
        self.assertIn("does not have available resources for the request.", err["message"])
        self.assertEqual(self.in_use("r-l4"), 2)
        node = self.f.ok("GET", "/fake/gke/join?name=n-0")["node"]
        labels = node["metadata"]["labels"]
        self.assertEqual([labels.get(f"cloud.google.com/gce-topology-{k}") for k in ("block", "subblock", "host")],
                         ["b1", "s1", "h1"])
        n1 = self.f.ok("GET", "/fake/gke/join?name=n-1")["node"]["metadata"]["labels"]
        self.assertNotIn("cloud.google.com/gce-topology-block", n1, "no topology, no labels")
        self.f.ok("POST", self.f.group_path(url) + "/deleteInstances",
                  {"instances": [f"projects/{P}/zones/{ZA}/instances/n-0"], "skipInstancesOnValidationError": True})
        self.f.managed(url)  # the group acts at the next request
        ms = {m["name"]: m for m in self.f.managed(url)}
        self.assertEqual(ms["n-2"]["currentAction"], "NONE", "the freed machine goes to the retried one")
        self.assertEqual(self.in_use("r-l4"), 2)

    def test_the_pools_reservation_affinity_is_checked(self):
        bad = [
            {"consumeReservationType": "SPECIFIC_RESERVATION", "key": "name", "values": ["r"]},
            {"consumeReservationType": "SPECIFIC_RESERVATION", "key": KEY},
            {"consumeReservationType": "SOMETIMES"},
        ]
        for i, affinity in enumerate(bad):
            code, out = self.f.call("POST", f"{CLUSTER}/nodePools", {"nodePool": l4_pool(f"bad-{i}", affinity)})
            self.assertEqual((code, out["error"]["status"]), (400, "INVALID_ARGUMENT"), affinity)
            self.assertIn("reservationAffinity", out["error"]["message"])
        # by number, as Google's Rust client sends enums
        pool = self.f.create_pool(l4_pool("by-number", {"consumeReservationType": 1}))
        self.assertEqual(pool["config"]["reservationAffinity"]["consumeReservationType"], "NO_RESERVATION")


if __name__ == "__main__":
    unittest.main()
