"""Resize requests (flex-start grants) and flex-start node pools in the
Compute and GKE fake, over HTTP, one fresh fake per test. Rules and
sources: `gke_fake/resize.py`, `gke_fake/nodepools.py` and README.md."""

import unittest

from fake_client import CLUSTER, Fake
from test_gke_fake import ZA, spot_l4


def flex_l4(name="l4-flex", **extra):
    pool = spot_l4(name, management={"autoRepair": False, "autoUpgrade": True})
    cfg = pool["config"]
    del cfg["spot"]
    cfg.update({"flexStart": True, "maxRunDuration": "86400s",
                "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}})
    pool.update(extra)
    return pool


def request(name="grant-1", instances=("m-0", "m-1"), secs=3600, **extra):
    body = {"name": name, "instances": [{"name": n, "preservedState": {"metadata": {"muster-poolnode": n}}}
                                        for n in instances],
            "requestedRunDuration": {"seconds": str(secs)}}
    body.update(extra)
    return body


class FlexStartPools(unittest.TestCase):
    def setUp(self):
        self.f = Fake()
        self.addCleanup(self.f.close)

    def refused(self, pool, field):
        code, out = self.f.call("POST", f"{CLUSTER}/nodePools", {"nodePool": pool})
        self.assertEqual(code, 400, out)
        self.assertIn(field, out["error"]["message"])

    def test_a_flex_start_pool_needs_no_reservation_no_auto_repair_and_no_spot(self):
        p = flex_l4()
        p["config"]["reservationAffinity"] = {"consumeReservationType": "ANY_RESERVATION"}
        self.refused(p, "reservationAffinity")
        self.refused(flex_l4(management={"autoRepair": True}), "autoRepair")
        no_management = flex_l4()
        del no_management["management"]
        self.refused(no_management, "autoRepair")
        spot = flex_l4()
        spot["config"]["spot"] = True
        self.refused(spot, "flexStart")
        self.refused(flex_l4(autoscaling={"enabled": True, "minNodeCount": 0, "maxNodeCount": 4,
                                          "locationPolicy": "BALANCED"}), "locationPolicy")
        long_run = flex_l4()
        long_run["config"]["maxRunDuration"] = "700000s"
        self.refused(long_run, "maxRunDuration")

    def test_a_valid_flex_start_pool_by_enum_number_gets_a_flex_start_template(self):
        p = flex_l4()
        p["config"]["reservationAffinity"] = {"consumeReservationType": 1}
        pool = self.f.create_pool(p)
        tmpl = next(t for t in self.f.ok("GET", f"{CLUSTER}/nodePools")["nodePools"] if t["name"] == "l4-flex")
        self.assertTrue(tmpl["config"]["flexStart"])
        self.assertEqual(len(pool["instanceGroupUrls"]), 1)


class ResizeRequests(unittest.TestCase):
    def setUp(self):
        self.f = Fake()
        self.addCleanup(self.f.close)
        self.url = self.f.create_pool(flex_l4())["instanceGroupUrls"][0]
        self.path = self.f.group_path(self.url) + "/resizeRequests"

    def insert(self, body, rid=None):
        return self.f.call("POST", self.path + (f"?requestId={rid}" if rid else ""), body)

    def get(self, name="grant-1"):
        return self.f.ok("GET", f"{self.path}/{name}")

    def test_invalid_requests_are_400(self):
        for body in [request(name="Bad_Name"), request(name="x" * 64), request(name="9grant"),
                     request(resizeBy=2), {"name": "g", "requestedRunDuration": {"seconds": "3600"}},
                     request(secs=599), request(secs=7 * 24 * 3600 + 1),
                     {"name": "g", "instances": [{"name": "a"}]}]:
            code, out = self.insert(body)
            self.assertEqual(code, 400, (body, out))
        code, _ = self.insert(request(name="g", instances=(), resizeBy=0))
        self.assertEqual(code, 400)

    def test_only_a_flex_start_group_takes_a_request(self):
        plain = self.f.create_pool(spot_l4())["instanceGroupUrls"][0]
        code, out = self.f.call("POST", self.f.group_path(plain) + "/resizeRequests", request())
        self.assertEqual(code, 400, out)
        self.assertIn("FLEX_START", out["error"]["message"])

    def test_a_request_is_queued_until_granted_then_every_vm_is_made_at_once(self):
        op = self.insert(request())[1]
        self.assertEqual(op["status"], "DONE")
        self.assertEqual(self.get()["state"], "ACCEPTED")
        self.assertEqual(self.f.managed(self.url), [], "no VM while queued")
        self.assertEqual(self.f.instance(ZA, "m-0")[0], 404)
        self.f.control("resize-requests/grant?name=grant-1")
        self.assertEqual(self.get()["state"], "SUCCEEDED")
        ms = {m["name"]: m for m in self.f.managed(self.url)}
        self.assertEqual(sorted(ms), ["m-0", "m-1"])
        self.assertTrue(all(m["currentAction"] == "NONE" and m["instanceStatus"] == "RUNNING" for m in ms.values()))
        inst = self.f.instance(ZA, "m-1")[1]
        items = {i["key"]: i["value"] for i in inst["metadata"]["items"]}
        self.assertEqual(items["muster-poolnode"], "m-1")
        self.assertEqual(inst["scheduling"]["provisioningModel"], "FLEX_START")
        self.assertEqual(self.f.ok("GET", self.f.group_path(self.url))["targetSize"], 2)

    def test_a_name_is_taken_once_and_a_request_id_returns_the_first_operation(self):
        _, first = self.insert(request(), rid="11111111-2222-3333-4444-555555555555")
        _, again = self.insert(request(), rid="11111111-2222-3333-4444-555555555555")
        self.assertEqual(first["name"], again["name"])
        code, out = self.insert(request())
        self.assertEqual(code, 409, out)
        self.assertEqual(len(self.f.ok("GET", self.path)["items"]), 1)

    def test_a_failed_request_makes_no_vm_and_carries_its_error(self):
        self.insert(request())
        self.f.control("resize-requests/fail?name=grant-1&code=ZONE_RESOURCE_POOL_EXHAUSTED")
        r = self.get()
        self.assertEqual(r["state"], "FAILED")
        self.assertEqual(r["status"]["error"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED")
        self.assertEqual(self.f.managed(self.url), [])

    def test_only_an_accepted_request_is_cancelled_and_only_an_inactive_one_deleted(self):
        self.insert(request())
        code, _ = self.f.call("DELETE", f"{self.path}/grant-1")
        self.assertEqual(code, 400, "still active")
        self.f.ok("POST", f"{self.path}/grant-1/cancel")
        self.assertEqual(self.get()["state"], "CANCELLED")
        code, _ = self.f.call("POST", f"{self.path}/grant-1/cancel")
        self.assertEqual(code, 400, "cancelled already")
        self.insert(request(name="grant-2", instances=("m-2",)))
        self.f.control("resize-requests/grant?name=grant-2")
        code, _ = self.f.call("POST", f"{self.path}/grant-2/cancel")
        self.assertEqual(code, 400, "granted")
        self.f.ok("DELETE", f"{self.path}/grant-1")
        self.assertEqual(self.f.call("GET", f"{self.path}/grant-1")[0], 404)
        self.assertEqual(self.f.managed(self.url)[0]["name"], "m-2", "deleting a request keeps its VMs")
        code, _ = self.f.call("POST", "/fake/resize-requests/grant?name=grant-1")
        self.assertEqual(code, 404)

    def test_resize_by_names_the_vms_after_the_base_name(self):
        self.insert({"name": "by-two", "resizeBy": 2, "requestedRunDuration": {"seconds": "600"}})
        self.f.control("resize-requests/grant?name=by-two")
        self.assertEqual(len(self.f.managed(self.url)), 2)


if __name__ == "__main__":
    unittest.main()
