"""A small local fake of the Compute Engine REST calls muster's GCP provider
makes, for its tests. Prints `compute=<port>` on one line, then serves on
127.0.0.1 until stdin closes. Shapes follow the public API reference:

* GET  /compute/v1/projects/P/zones                          (list)
* GET  /compute/v1/projects/P/zones/Z/machineTypes[?maxResults=&pageToken=]      (list)
* GET  /compute/v1/projects/P/zones/Z/acceleratorTypes[?maxResults=&pageToken=]  (list)
* POST /compute/v1/projects/P/zones/Z/instances?requestId=R (insert → Operation)
* GET  /compute/v1/projects/P/zones/Z/instances[?filter=]   (list)
* GET  /compute/v1/projects/P/aggregated/instances[?filter=]
* GET  /compute/v1/projects/P/zones/Z/instances/NAME
* DELETE /compute/v1/projects/P/zones/Z/instances/NAME      (→ Operation)
* GET  /compute/v1/projects/P/zones/Z/operations/OP
* POST /compute/v1/projects/P/zones/Z/operations/OP/wait
* GET  /compute/v1/projects/P/zones/Z/machineTypes/M
* GET  /compute/v1/projects/P/zones/Z/reservations[?maxResults=&pageToken=]   (list)
* GET  /compute/v1/projects/P/zones/Z/reservations/NAME
* GET  /compute/v1/projects/P/aggregated/reservations[?maxResults=&pageToken=]
* GET  /compute/v1/projects/P/zones/Z/instanceGroupManagers/NAME
* GET  /compute/v1/projects/P/regions/R/instanceTemplates/NAME
* GET  /compute/v1/projects/P/global/instanceTemplates/NAME
* GET  /v1/projects/P/locations/L/clusters/C/nodePools       (the GKE API)

The GKE cluster, its node pools, their instance group managers and
instance templates are those of `gke_fixture.json` (shapes from the public
GKE and Compute API references); an unknown cluster is 404 `NOT_FOUND`, as
GKE answers.

Like Compute: an insert with a requestId seen before returns the same
operation; an insert of a name that exists fails with 409 `alreadyExists`;
a deleted instance is gone (404). Capacity and quota errors arrive in the
operation's `error`, as they do for GCE's asynchronous inserts.

Control (same port, under /fake/): POST /fake/stockout?zone=Z&machineType=M,
POST /fake/quota?machineType=M, POST /fake/restock (both lifted), POST /fake/forget (request ids are
forgotten, as GCE forgets them after a while), POST /fake/preempt?name=N (a spot instance
is stopped by GCE: status TERMINATED, lastStopTimestamp set), POST
/fake/fail?code=N&n=K (the next K requests answer HTTP N), GET /fake/calls
(requests by method and path without project, zone and names, e.g.
`POST projects/zones/instances`), GET /fake/created (every instance ever
created, deleted ones included, in order: name, zone, labels).

GKE node pools and their managed instance groups (package `gke_fake/`, see
its `routes.py` and `README.md` beside this file): the fixture's cluster
takes `nodePools.create`, `get`, `delete`, `:setSize`, `:setAutoscaling`
(GKE operations polled at GET /v1/projects/P/locations/L/operations/OP),
and `clusters.get`; every group (the fixture's and those of created pools)
takes `createInstances`, `deleteInstances`, `resize`,
`listManagedInstances`, `listErrors`; the instances a group creates are
instances of this fake. More control: the stockout knob takes `&spot=true`
or `&spot=false` to exhaust only that capacity type, POST
/fake/unstock?zone=Z&machineType=M[&spot=B] lifts one stockout, POST
/fake/hold?on=true|false keeps the groups' pending actions pending, POST
/fake/gke/op-polls?n=K makes GKE operations answer RUNNING to K polls,
POST /fake/gke/unavailable?zone=Z&acceleratorType=A, POST
/fake/mig/paginated?zone=Z&name=G, GET /fake/gke/nodes?cluster=C (the
Nodes GKE would register, and the instances it would refuse, with why),
GET /fake/gke/join?name=N[&zone=Z] (one instance's verdict). A preempted
managed instance is recreated by its group under the same name.

Reservations (`gke_fake/reservations.py`; the rules in README.md): POST
/fake/reservation?project=P&zone=Z&name=N&machineType=M&count=K
[&acceleratorType=A&acceleratorCount=C][&specific=true][&status=S]
[&deleteAtTime=T][&shareWith=P1,P2] makes one; POST
/fake/list-page?n=K pages their listings, and those of machine and
accelerator types, at K (Compute's default and largest `maxResults` is
500); an instance made by
an insert or a group consumes one as its `reservationAffinity` says, and
gives it back when deleted. POST /fake/topology?name=N&block=B&subblock=S&host=H[&cluster=C]
gives the instance of that name (now, and whenever it is made again)
`resourceStatus.physicalHostTopology`.
"""

import itertools
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import os

sys.dont_write_bytecode = True  # no __pycache__ beside the fake in the source tree
from gke_fake import World  # noqa: E402
from gke_fake import routes as gke_routes  # noqa: E402
from gke_fake.reservations import Reservations  # noqa: E402

LOCK = threading.Lock()
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gke_fixture.json")) as f:
    GKE = json.load(f)
IDS = itertools.count(1000)
STATE = {"instances": {}, "ops": {}, "requests": {}, "stockout": set(), "quota": set(),
         "fail": None, "calls": {}, "created": [], "log": [], "op_polls": 0}

GIB = 1024

def machine(name, cpus, mem_gib, accel=None, count=0, arch="X86_64"):
    m = {"kind": "compute#machineType", "name": name, "guestCpus": cpus,
         "memoryMb": mem_gib * GIB, "isSharedCpu": False, "architecture": arch}
    if accel:
        m["accelerators"] = [{"guestAcceleratorType": accel, "guestAcceleratorCount": count}]
    return m

MACHINES = [
    machine("a2-highgpu-1g", 12, 85, "nvidia-tesla-a100", 1),
    machine("a2-highgpu-8g", 96, 680, "nvidia-tesla-a100", 8),
    machine("a2-ultragpu-8g", 96, 1360, "nvidia-a100-80gb", 8),
    machine("a3-highgpu-8g", 208, 1872, "nvidia-h100-80gb", 8),
    machine("g2-standard-4", 4, 16, "nvidia-l4", 1),
    machine("g2-standard-8", 8, 32, "nvidia-l4", 1),
    machine("g2-standard-48", 48, 192, "nvidia-l4", 4),
    machine("n1-standard-8", 8, 30),
]
ZONES = ["us-central1-a", "us-central1-b", "us-central1-c", "europe-west4-a"]
ACCELERATORS = [
    {"kind": "compute#acceleratorType", "name": "nvidia-tesla-t4", "maximumCardsPerInstance": 4},
    {"kind": "compute#acceleratorType", "name": "nvidia-tesla-a100", "maximumCardsPerInstance": 16},
    {"kind": "compute#acceleratorType", "name": "nvidia-l4", "maximumCardsPerInstance": 8},
]


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%S.000-00:00", time.gmtime())


def base(project, zone):
    return f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"


def operation(project, zone, kind, target, error=None):
    name = f"operation-{next(IDS)}"
    op = {"kind": "compute#operation", "id": str(next(IDS)), "name": name,
          "operationType": kind, "status": "DONE", "progress": 100,
          "zone": base(project, zone), "targetLink": target,
          "selfLink": f"{base(project, zone)}/operations/{name}",
          "insertTime": now(), "startTime": now(), "endTime": now()}
    if error:
        op["error"] = {"errors": [error]}
        op["httpErrorStatusCode"] = 503 if error["code"] != "QUOTA_EXCEEDED" else 403
    if STATE["op_polls"] > 0:
        # still running: answered RUNNING until read op_polls times
        op["status"], op["_left"] = "RUNNING", STATE["op_polls"]
        del op["endTime"]
    STATE["ops"][(project, zone, name)] = op
    return op


RESERVATIONS = Reservations(IDS, now)
WORLD = World(STATE, GKE, machines=MACHINES, accelerators=ACCELERATORS, zones=ZONES,
              ids=IDS, now=now, operation=operation, reservations=RESERVATIONS)


def labels_match(inst, flt):
    # filter: labels.KEY = "VALUE" [AND labels.K2 = "V2"]
    if not flt:
        return True
    for clause in flt.split(" AND "):
        clause = clause.strip().strip("()")
        if "=" not in clause:
            continue
        key, value = (x.strip() for x in clause.split("=", 1))
        value = value.strip('"')
        if key.startswith("labels."):
            if inst.get("labels", {}).get(key[len("labels."):]) != value:
                return False
    return True


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send(self, code, body):
        if isinstance(body, dict) and "_left" in body:
            body = {k: v for k, v in body.items() if k != "_left"}  # the fake's own bookkeeping
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, code, reason, message):
        self.send(code, {"error": {"code": code, "message": message,
                                   "errors": [{"reason": reason, "domain": "global", "message": message}]}})

    def state(self):
        return STATE

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n) or b"{}")

    def route(self, method):
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = [p for p in url.path.split("/") if p]
        if parts[:1] == ["fake"]:
            return self.control(method, parts[1:], q)
        with LOCK:
            # every API request as it came (method and path, no query), for the IAM check
            STATE["log"].append({"method": method, "path": url.path})
            STATE["calls"][f"{method} {'/'.join(parts[2:3] + parts[4:5] + parts[6:7])}"] = \
                STATE["calls"].get(f"{method} {'/'.join(parts[2:3] + parts[4:5] + parts[6:7])}", 0) + 1
            if parts[:2] == ["compute", "v1"] and len(parts) > 8 and parts[6] == "instanceGroupManagers":
                # the group methods by name: POST projects/zones/instanceGroupManagers/createInstances
                detail = f"{method} projects/zones/{parts[6]}/{parts[8]}"
                STATE["calls"][detail] = STATE["calls"].get(detail, 0) + 1
            if STATE["fail"]:
                code, left = STATE["fail"]
                STATE["fail"] = (code, left - 1) if left > 1 else None
                reason = {400: "invalid", 403: "forbidden", 429: "rateLimitExceeded"}.get(code, "backendError")
                return self.error(code, reason, f"injected {code}")
            WORLD.reconcile()
            if parts[:1] == ["v1"] and gke_routes.gke(self, WORLD, method, parts[1:]):
                return
            if parts[:2] == ["compute", "v1"] and len(parts) >= 4 and parts[2] == "projects" \
                    and gke_routes.compute(self, WORLD, method, parts[3], parts[4:], q):
                return
        if parts[:1] == ["v1"] and method == "GET":
            return self.gke(parts[1:])
        if parts[:2] != ["compute", "v1"] or len(parts) < 4 or parts[2] != "projects":
            return self.error(404, "notFound", f"no route {url.path}")
        project = parts[3]
        rest = parts[4:]
        if method == "GET" and len(rest) == 4 and rest[0] == "regions" and rest[2] == "instanceTemplates":
            return self.template(project, rest[3], f"/regions/{rest[1]}/")
        if method == "GET" and len(rest) == 3 and rest[:2] == ["global", "instanceTemplates"]:
            return self.template(project, rest[2], "/global/")
        if rest == ["aggregated", "reservations"] and method == "GET":
            with LOCK:
                return self.send(200, RESERVATIONS.aggregated(project, q.get("pageToken"), q.get("maxResults")))
        if rest[:2] == ["aggregated", "instances"] and method == "GET":
            with LOCK:
                items = {}
                for (p, z, _), inst in sorted(STATE["instances"].items()):
                    if p == project and labels_match(inst, q.get("filter")):
                        items.setdefault(f"zones/{z}", {"instances": []})["instances"].append(inst)
            return self.send(200, {"kind": "compute#instanceAggregatedList", "items": items})
        if rest == ["zones"] and method == "GET":
            items = [{"kind": "compute#zone", "name": z, "status": "UP",
                      "region": f"https://www.googleapis.com/compute/v1/projects/{project}/regions/{z.rsplit('-', 1)[0]}"}
                     for z in ZONES]
            return self.send(200, {"kind": "compute#zoneList", "items": items})
        if len(rest) < 3 or rest[0] != "zones":
            return self.error(404, "notFound", f"no route {url.path}")
        zone, coll, tail = rest[1], rest[2], rest[3:]
        with LOCK:
            if coll == "machineTypes" and method == "GET" and tail:
                for m in MACHINES:
                    if m["name"] == tail[0]:
                        return self.send(200, dict(m, zone=base(project, zone)))
                return self.error(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/machineTypes/{tail[0]}' was not found")
            if coll == "instanceGroupManagers" and method == "GET" and tail:
                for m in GKE["instanceGroupManagers"]:
                    if m["name"] == tail[0] and m["zone"].endswith(f"/projects/{project}/zones/{zone}"):
                        return self.send(200, m)
                return self.error(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/instanceGroupManagers/{tail[0]}' was not found")
            if coll == "machineTypes" and method == "GET":
                items = [dict(m, zone=base(project, zone)) for m in MACHINES]
                page = RESERVATIONS.page(items, q.get("pageToken"), q.get("maxResults"))
                return self.send(200, dict(page, kind="compute#machineTypeList"))
            if coll == "acceleratorTypes" and method == "GET":
                items = [dict(a, zone=base(project, zone)) for a in ACCELERATORS]
                page = RESERVATIONS.page(items, q.get("pageToken"), q.get("maxResults"))
                return self.send(200, dict(page, kind="compute#acceleratorTypeList"))
            if coll == "operations" and tail:
                op = STATE["ops"].get((project, zone, tail[0]))
                if not op:
                    return self.error(404, "notFound", f"operation {tail[0]} not found")
                if op.get("_left", 0) > 0:
                    op["_left"] -= 1
                    if op["_left"] == 0:
                        op["status"], op["endTime"] = "DONE", now()
                        del op["_left"]
                return self.send(200, {k: v for k, v in op.items() if k != "_left"})
            if coll == "instances":
                return self.instances(method, project, zone, tail, q)
            if coll == "reservations" and method == "GET" and not tail:
                return self.send(200, RESERVATIONS.list_zone(project, zone, q.get("pageToken"), q.get("maxResults")))
            if coll == "reservations" and method == "GET" and len(tail) == 1:
                r = RESERVATIONS.get(project, zone, tail[0])
                if r is None:
                    return self.error(404, "notFound",
                                      f"The resource 'projects/{project}/zones/{zone}/reservations/{tail[0]}' was not found")
                return self.send(200, r)
        return self.error(404, "notFound", f"no route {url.path}")

    def template(self, project, name, scope):
        for t in GKE["instanceTemplates"]:
            if t["name"] == name and f"/projects/{project}{scope}" in t["selfLink"]:
                return self.send(200, t)
        return self.error(404, "notFound", f"The resource 'projects/{project}{scope}instanceTemplates/{name}' was not found")

    def gke(self, parts):
        # projects/P/locations/L/clusters/C/nodePools
        c = GKE["cluster"]
        want = ["projects", c["project"], "locations", c["location"], "clusters", c["name"], "nodePools"]
        if parts == want:
            return self.send(200, {"nodePools": GKE["nodePools"]})
        name = "/".join(parts[:6])
        return self.send(404, {"error": {"code": 404, "message": f"Not found: {name}.",
                                         "status": "NOT_FOUND"}})

    def instances(self, method, project, zone, tail, q):
        if method == "POST" and not tail:
            req = q.get("requestId")
            if req and req in STATE["requests"]:
                return self.send(200, STATE["requests"][req])
            body = self.body()
            name = body.get("name", "")
            mt = body.get("machineType", "").rsplit("/", 1)[-1]
            target = f"{base(project, zone)}/instances/{name}"
            if (project, zone, name) in STATE["instances"]:
                return self.error(409, "alreadyExists",
                                  f"The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists")
            sched = body.get("scheduling") or {}
            spot = sched.get("provisioningModel") == "SPOT" or bool(sched.get("preemptible"))
            claim, why = RESERVATIONS.check(project, zone, body)
            if claim == "invalid":
                return self.error(400, "invalid", why)
            # a reservation holds its machines: a zone's stockout is not theirs
            held = claim == "ok" and why is not None
            if not held and ((zone, mt) in STATE["stockout"] or ("", mt) in STATE["stockout"]
                             or (zone, mt, spot) in STATE["stockout_capacity"]
                             or ("", mt, spot) in STATE["stockout_capacity"]):
                op = operation(project, zone, "insert", target, {
                    "code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                    "message": f"The zone '{zone}' does not have enough resources available to fulfill the request. Try a different zone, or try again later."})
            elif mt in STATE["quota"]:
                op = operation(project, zone, "insert", target, {
                    "code": "QUOTA_EXCEEDED",
                    "message": "Quota 'NVIDIA_A100_GPUS' exceeded. Limit: 0.0 in region."})
            elif claim == "condition":
                op = operation(project, zone, "insert", target, {"code": "CONDITION_NOT_MET", "message": why})
                op["httpErrorStatusCode"] = 400
            else:
                inst = dict(body, kind="compute#instance", id=str(next(IDS)), status="RUNNING",
                            zone=base(project, zone), selfLink=target,
                            creationTimestamp=now(), machineType=f"{base(project, zone)}/machineTypes/{mt}")
                WORLD.made((project, zone, name), inst)
                STATE["instances"][(project, zone, name)] = inst
                STATE["created"].append({"name": name, "zone": zone, "labels": body.get("labels", {})})
                op = operation(project, zone, "insert", target)
            if req:
                STATE["requests"][req] = op
            return self.send(200, op)
        if method == "GET" and not tail:
            items = [i for (p, z, _), i in sorted(STATE["instances"].items())
                     if p == project and z == zone and labels_match(i, q.get("filter"))]
            return self.send(200, {"kind": "compute#instanceList", "items": items})
        key = (project, zone, tail[0]) if tail else None
        if method == "GET":
            inst = STATE["instances"].get(key)
            if not inst:
                return self.error(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/instances/{tail[0]}' was not found")
            return self.send(200, inst)
        if method == "DELETE":
            if key not in STATE["instances"]:
                return self.error(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/instances/{tail[0]}' was not found")
            del STATE["instances"][key]
            WORLD.gone(key)
            return self.send(200, operation(project, zone, "delete", f"{base(project, zone)}/instances/{tail[0]}"))
        return self.error(405, "methodNotAllowed", "method not allowed")

    def control(self, method, parts, q):
        with LOCK:
            WORLD.reconcile()
            what = parts[0] if parts else ""
            if what in gke_routes.CONTROLS and gke_routes.control(self, WORLD, method, parts, q):
                return
            if what == "stockout" and "spot" in q:
                spot = gke_routes.truthy(q["spot"])
                STATE["stockout_capacity"].add((q.get("zone", ""), q.get("machineType", ""), spot))
            elif what == "stockout":
                STATE["stockout"].add((q.get("zone", ""), q.get("machineType", "")))
            elif what == "quota":
                STATE["quota"].add(q.get("machineType", ""))
            elif what == "fail":
                STATE["fail"] = (int(q.get("code", "503")), int(q.get("n", "1")))
            elif what == "preempt":
                for (p, z, n), inst in STATE["instances"].items():
                    if n == q.get("name"):
                        inst["status"] = "TERMINATED"
                        inst["lastStopTimestamp"] = now()
                WORLD.preempted(q.get("name"))
            elif what == "reservation":
                RESERVATIONS.create(
                    q.get("project", "my-project"), q.get("zone", ""), q.get("name", ""),
                    q.get("machineType", ""), int(q.get("count", "1")),
                    accelerator=q.get("acceleratorType"), accelerator_count=int(q.get("acceleratorCount", "0")),
                    specific=gke_routes.truthy(q.get("specific", "false")), status=q.get("status", "READY"),
                    delete_at=q.get("deleteAtTime"),
                    share_with=[p for p in q.get("shareWith", "").split(",") if p])
            elif what == "list-page":
                RESERVATIONS.page_size = int(q.get("n", "500"))
            elif what == "topology":
                topo = {k: q[k] for k in ("cluster", "block", "subblock", "host") if q.get(k)}
                STATE["topology"][q.get("name", "")] = topo
                for (p, z, n), inst in STATE["instances"].items():
                    if n == q.get("name"):
                        inst.setdefault("resourceStatus", {})["physicalHostTopology"] = dict(topo)
            elif what == "restock":
                STATE["stockout"].clear()
                STATE["stockout_capacity"].clear()
                STATE["quota"].clear()
            elif what == "forget":
                STATE["requests"].clear()
            elif what == "calls":
                return self.send(200, STATE["calls"])
            elif what == "created":
                return self.send(200, STATE["created"])
            elif what == "log":
                return self.send(200, STATE["log"])
            elif what == "op-polls":
                STATE["op_polls"] = int(q.get("n", "0"))
            else:
                return self.error(404, "notFound", "no such control")
            return self.send(200, {"ok": True})

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"compute={server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
