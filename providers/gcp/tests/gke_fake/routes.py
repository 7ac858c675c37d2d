"""HTTP routes of the GKE side of the Compute fake. `compute_fake.py` hands
each request here first (under its lock, after `World.reconcile()`); a
route that is not one of these returns False and the fake's own routes
answer as before.

Compute (`/compute/v1/projects/P/zones/Z/...`), errors in Compute's shape
`{"error": {"code", "message", "errors": [{"reason", ...}]}}`:
  GET  instanceGroupManagers                              (list)
  POST instanceGroupManagers/NAME/createInstances         {"instances": [{"name", "preservedState"?: {"metadata"}}]} → Operation
  POST instanceGroupManagers/NAME/deleteInstances         {"instances": [url], "skipInstancesOnValidationError"} → Operation
  POST instanceGroupManagers/NAME/resize?size=N           → Operation
  POST instanceGroupManagers/NAME/listManagedInstances[?maxResults=&pageToken=]
  GET  instanceGroupManagers/NAME/listErrors
  GET  instanceGroupManagers/NAME/resizeRequests            (list)
  POST instanceGroupManagers/NAME/resizeRequests[?requestId=R] {"name", "instances" | "resizeBy", "requestedRunDuration"} → Operation
  GET  instanceGroupManagers/NAME/resizeRequests/RR
  DELETE instanceGroupManagers/NAME/resizeRequests/RR       → Operation
  POST instanceGroupManagers/NAME/resizeRequests/RR/cancel  → Operation
  GET  operations[?filter=operationType="..."]            (list)
  (GET instanceGroupManagers/NAME is the fake's own route.)

GKE (`/v1/projects/P/locations/L/...`), errors in GKE's shape
`{"error": {"code", "message", "status"}}`:
  GET    clusters/C
  POST   clusters/C/nodePools                             {"nodePool": NodePool} → Operation
  GET    clusters/C/nodePools/NAME
  DELETE clusters/C/nodePools/NAME                        → Operation
  POST   clusters/C/nodePools/NAME:setSize                {"nodeCount"} → Operation
  POST   clusters/C/nodePools/NAME:setAutoscaling         {"autoscaling"} → Operation
  GET    operations/OP
  (GET clusters/C/nodePools is the fake's own route.)

Test knobs (`/fake/...`) are listed in CONTROLS below and in the README.
"""

from . import join
from .world import ApiError

CONTROLS = {"unstock", "hold", "gke", "mig", "resize-requests"}


def truthy(v):
    return str(v).lower() in ("1", "true", "yes", "on")


def compute_error(h, e):
    return h.error(e.code, e.reason, e.message)


def gke_error(h, e):
    return h.send(e.code, {"error": {"code": e.code, "message": e.message, "status": e.reason}})


def compute(h, world, method, project, rest, q):
    """rest: the path after projects/P. True if answered."""
    if len(rest) < 3 or rest[0] != "zones":
        return False
    zone, coll, tail = rest[1], rest[2], rest[3:]
    try:
        if coll == "operations" and not tail and method == "GET":
            flt = (q.get("filter") or "").replace(" ", "")
            want = flt.split("=", 1)[1].strip('"') if flt.startswith("operationType=") else None
            items = [op for (p, z, _), op in h.state()["ops"].items()
                     if p == project and z == zone and (want is None or op["operationType"] == want)]
            h.send(200, {"kind": "compute#operationList", "items": items})
            return True
        if coll != "instanceGroupManagers":
            return False
        if not tail and method == "GET":
            items = [m.public for (p, z, _), m in world.migs.items() if p == project and z == zone]
            h.send(200, {"kind": "compute#instanceGroupManagerList", "items": items})
            return True
        if len(tail) >= 2 and tail[1] == "resizeRequests":
            return resize_requests(h, world, method, world.mig(project, zone, tail[0]), tail[2:], q)
        if len(tail) != 2:
            return False
        mig = world.mig(project, zone, tail[0])
        verb = tail[1]
        if verb == "createInstances" and method == "POST":
            body = h.body()
            req = q.get("requestId")
            if req and ("mig", req) in h.state()["requests"]:
                h.send(200, h.state()["requests"][("mig", req)])
                return True
            configs = list(body.get("instances") or [])
            if not configs or not all(c.get("name") for c in configs):
                raise ApiError(400, "invalid", "Invalid value for field 'resource.instances': each per-instance "
                                               "config needs a name.")
            op = world.create_instances(mig, configs)
            if req:
                h.state()["requests"][("mig", req)] = op
            h.send(200, op)
            return True
        if verb == "deleteInstances" and method == "POST":
            body = h.body()
            op = world.delete_instances(mig, list(body.get("instances") or []),
                                        bool(body.get("skipInstancesOnValidationError")))
            h.send(200, op)
            return True
        if verb == "resize" and method == "POST":
            if "size" not in q:
                raise ApiError(400, "required", "Required field 'size' not specified")
            h.send(200, world.resize(mig, int(q["size"])))
            return True
        if verb == "listManagedInstances" and method == "POST":
            items = world.managed_instances(mig)
            body = {}
            if mig.public.get("listManagedInstancesResults") == "PAGINATED":
                start = int(q.get("pageToken") or 0)
                size = int(q.get("maxResults") or 500)
                if start + size < len(items):
                    body["nextPageToken"] = str(start + size)
                items = items[start:start + size]
            body["managedInstances"] = items
            h.send(200, body)
            return True
        if verb == "listErrors" and method == "GET":
            h.send(200, {"items": list(mig.errors)})
            return True
        return False
    except ApiError as e:
        compute_error(h, e)
        return True


def resize_requests(h, world, method, mig, tail, q):
    """instanceGroupManagers/NAME/resizeRequests[/RR[/cancel]]. True if answered."""
    if not tail and method == "GET":
        h.send(200, {"kind": "compute#instanceGroupManagerResizeRequestsListResponse",
                     "items": [r.resource() for r in mig.requests.values()]})
        return True
    if not tail and method == "POST":
        req = q.get("requestId")
        if req and ("resize", req) in h.state()["requests"]:
            h.send(200, h.state()["requests"][("resize", req)])
            return True
        op = world.insert_resize_request(mig, h.body())
        if req:
            h.state()["requests"][("resize", req)] = op
        h.send(200, op)
        return True
    if len(tail) == 1 and method == "GET":
        h.send(200, world.resize_request(mig, tail[0]).resource())
        return True
    if len(tail) == 1 and method == "DELETE":
        h.send(200, world.delete_resize_request(mig, tail[0]))
        return True
    if len(tail) == 2 and tail[1] == "cancel" and method == "POST":
        h.send(200, world.cancel_resize_request(mig, tail[0]))
        return True
    return False


def gke(h, world, method, parts):
    """parts: the path after /v1. True if answered."""
    if len(parts) < 4 or parts[0] != "projects" or parts[2] != "locations":
        return False
    project, location, rest = parts[1], parts[3], parts[4:]
    try:
        if rest[:1] == ["operations"] and len(rest) == 2 and method == "GET":
            h.send(200, world.get_gke_operation(project, location, rest[1]))
            return True
        if rest[:1] != ["clusters"] or len(rest) < 2:
            return False
        cluster = rest[1]
        if len(rest) == 2 and method == "GET":
            world.check_cluster(project, location, cluster)
            h.send(200, world.cluster_resource())
            return True
        if len(rest) == 3 and rest[2] == "nodePools" and method == "POST":
            world.check_cluster(project, location, cluster)
            h.send(200, world.create_pool(h.body()))
            return True
        if len(rest) == 4 and rest[2] == "nodePools":
            world.check_cluster(project, location, cluster)
            name, _, verb = rest[3].partition(":")
            if not verb and method == "GET":
                h.send(200, world.pool(name))
            elif not verb and method == "DELETE":
                h.send(200, world.delete_pool(name))
            elif verb == "setSize" and method == "POST":
                h.send(200, world.set_size(name, h.body()))
            elif verb == "setAutoscaling" and method == "POST":
                h.send(200, world.set_autoscaling(name, h.body()))
            else:
                return False
            return True
        return False
    except ApiError as e:
        gke_error(h, e)
        return True


def control(h, world, method, parts, q):
    """/fake/... knobs of the GKE side. True if answered."""
    what = parts[0] if parts else ""
    sub = parts[1] if len(parts) > 1 else ""
    s = h.state()
    if what == "unstock":
        zone, mt = q.get("zone", ""), q.get("machineType", "")
        s["stockout"].discard((zone, mt))
        for spot in (True, False):
            if "spot" not in q or truthy(q["spot"]) == spot:
                s["stockout_capacity"].discard((zone, mt, spot))
    elif what == "hold":
        s["hold"] = truthy(q.get("on", "true"))
    elif what == "gke" and sub == "op-polls":
        s["gke_op_polls"] = int(q.get("n", "0"))
    elif what == "gke" and sub == "autopilot":
        s["autopilot"] = truthy(q.get("on", "true"))
    elif what == "gke" and sub == "unavailable":
        s["unavailable"].add((q.get("zone", ""), q.get("acceleratorType", "")))
    elif what == "gke" and sub == "nodes":
        c = world.fx["cluster"]
        if q.get("cluster", c["name"]) != c["name"]:
            h.send(404, {"error": {"code": 404, "message": f"no cluster {q.get('cluster')}", "status": "NOT_FOUND"}})
            return True
        h.send(200, join.nodes(world.snapshot()))
        return True
    elif what == "gke" and sub == "join":
        h.send(200, join.verdict(world.snapshot(), q.get("name", ""), q.get("zone")))
        return True
    elif what == "resize-requests" and sub in ("grant", "fail"):
        try:
            mig, r = world.find_resize_request(q.get("name", ""), q.get("group"))
            if sub == "grant":
                world.grant_resize_request(mig, r)
            else:
                code = q.get("code") or "ZONE_RESOURCE_POOL_EXHAUSTED"
                world.fail_resize_request(r, code, q.get("message") or f"Resize request {r.name} could not be "
                                                                        "fulfilled: no capacity was found in time.")
        except ApiError as e:
            compute_error(h, e)
            return True
    elif what == "mig" and sub == "paginated":
        mig = world.migs.get((world.fx["cluster"]["project"], q.get("zone", ""), q.get("name", "")))
        if not mig:
            return h.error(404, "notFound", "no such group") or True
        mig.public["listManagedInstancesResults"] = "PAGINATED"
    else:
        return False
    h.send(200, {"ok": True})
    return True
