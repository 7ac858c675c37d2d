"""Starts `compute_fake.py` as a subprocess (as the Rust tests do, through
`muster_provider_gcp::fake::ComputeFake`) and speaks JSON to it."""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
P, L, C = "my-project", "us-central1", "prod"
GKE = f"/v1/projects/{P}/locations/{L}"
CLUSTER = f"{GKE}/clusters/{C}"


def zonal(zone, rest=""):
    return f"/compute/v1/projects/{P}/zones/{zone}{rest}"


class Fake:
    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "compute_fake.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        assert line.startswith("compute="), line
        self.base = f"http://127.0.0.1:{line.split('=', 1)[1]}"

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()

    def call(self, method, path, body=None):
        """(HTTP status, decoded JSON body)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        if method == "POST" and data is None:
            req.data = b""
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def ok(self, method, path, body=None):
        code, out = self.call(method, path, body)
        assert code == 200, (method, path, code, out)
        return out

    def control(self, what, method="POST"):
        return self.ok(method, "/fake/" + what)

    # --- GKE ------------------------------------------------------------------
    def wait_gke(self, op, polls=20):
        for _ in range(polls):
            op = self.ok("GET", f"{GKE}/operations/{op['name']}")
            if op["status"] == "DONE":
                return op
        raise AssertionError(f"operation {op['name']} not DONE")

    def create_pool(self, pool):
        op = self.ok("POST", f"{CLUSTER}/nodePools", {"nodePool": pool})
        self.wait_gke(op)
        return self.ok("GET", f"{CLUSTER}/nodePools/{pool['name']}")

    # --- groups -----------------------------------------------------------------
    @staticmethod
    def group_path(url):
        return url.split("/compute/v1", 1)[1].join(["/compute/v1", ""])

    def managed(self, url):
        return self.ok("POST", self.group_path(url) + "/listManagedInstances")["managedInstances"]

    def create_instances(self, url, names):
        return self.ok("POST", self.group_path(url) + "/createInstances",
                       {"instances": [{"name": n} for n in names]})

    def instance(self, zone, name):
        return self.call("GET", zonal(zone, f"/instances/{name}"))
