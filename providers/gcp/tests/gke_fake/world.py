"""The GKE side of the Compute fake: node pools, their instance templates
and managed instance groups, GKE long-running operations, and the test
knobs for them. Shares the fake's instances, operations, stockouts and
quota errors (the `STATE` of `compute_fake.py`), so an instance a group
creates is an instance of the fake like any other.

The rules and their sources are in `mig.py`, `nodepools.py` and `join.py`
of this package and in `providers/gcp/tests/README.md`. GKE operations:
https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.operations
"""

import copy
import string

from . import join, nodepools, resize
from .mig import Member, Mig, compute_url, parse_instance_url, project_number

ALNUM = string.ascii_lowercase + string.digits


class ApiError(Exception):
    """An error answer: HTTP code, a Compute reason or GKE status, message."""

    def __init__(self, code, reason, message):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


class World:
    def __init__(self, state, fixture, *, machines, accelerators, zones, ids, now, operation, reservations=None):
        self.s = state
        self.fx = fixture
        self.machines = machines
        self.accelerators = accelerators
        self.zones = zones
        self.ids = ids
        self.now = now
        self.operation = operation  # compute_fake.operation(project, zone, kind, target, error=None)
        self.reservations = reservations  # reservations.Reservations, shared with plain inserts
        state.setdefault("topology", {})  # instance name -> physicalHostTopology
        state.setdefault("stockout_capacity", set())  # (zone, machineType, spot)
        state.setdefault("unavailable", set())  # (zone, acceleratorType) for node pool validation
        state.setdefault("hold", False)
        state.setdefault("gke_ops", {})
        state.setdefault("gke_op_polls", 0)
        state.setdefault("autopilot", False)
        self.migs = {}  # (project, zone, name) -> Mig
        self.pool_seq = 0
        self.system_events = 0
        for m in fixture["instanceGroupManagers"]:
            project, zone, _ = parse_instance_url(m["zone"] + "/x")
            mig = Mig(project, zone, m["name"], m.get("baseInstanceName", m["name"]),
                      m.get("instanceTemplate", ""), m, fixture=True)
            self.migs[(project, zone, m["name"])] = mig

    # --- the cluster ------------------------------------------------------
    def cluster_path(self):
        c = self.fx["cluster"]
        return f"projects/{c['project']}/locations/{c['location']}/clusters/{c['name']}"

    def check_cluster(self, project, location, cluster):
        c = self.fx["cluster"]
        if (project, location, cluster) != (c["project"], c["location"], c["name"]):
            raise ApiError(404, "NOT_FOUND", f"Not found: projects/{project}/locations/{location}/clusters/{cluster}.")

    def region(self):
        loc = self.fx["cluster"]["location"]
        return loc if loc.count("-") == 1 else loc.rsplit("-", 1)[0]

    def region_zones(self):
        loc = self.fx["cluster"]["location"]
        if loc.count("-") == 2:  # a zonal cluster
            return [loc]
        return [z for z in self.zones if z.rsplit("-", 1)[0] == loc]

    def pools(self):
        return self.fx["nodePools"]

    def pool(self, name):
        for p in self.pools():
            if p["name"] == name:
                return p
        c = self.cluster_path()
        raise ApiError(404, "NOT_FOUND", f"Not found: {c}/nodePools/{name}.")

    def cluster_resource(self):
        c = self.fx["cluster"]
        # Cluster.autopilot.enabled (REST v1 projects.locations.clusters):
        # an Autopilot cluster's nodes are GKE's own to make
        return {"name": c["name"], "location": c["location"], "status": "RUNNING",
                "locations": self.region_zones(), "nodePools": self.pools(),
                "autopilot": {"enabled": bool(self.s["autopilot"])},
                "selfLink": f"https://container.googleapis.com/v1/{self.cluster_path()}"}

    # --- instance templates ----------------------------------------------
    def template(self, url):
        for t in self.fx["instanceTemplates"]:
            if t["selfLink"] == url or t["selfLink"].endswith("/" + url.split("/compute/v1/")[-1]):
                return t
        return None

    # --- capacity ---------------------------------------------------------
    def capacity_error(self, project, zone, name, props):
        mt = props["machineType"].rsplit("/", 1)[-1]
        sched = props.get("scheduling") or {}
        spot = sched.get("provisioningModel") == "SPOT" or bool(sched.get("preemptible"))
        held = False
        if self.reservations:
            kind, why = self.reservations.check(project, zone, props)
            if kind != "ok":
                code = "CONDITION_NOT_MET" if kind == "condition" else "INVALID_FIELD_VALUE"
                return {"code": code, "message": f"Instance '{name}' creation failed: {why}"}
            held = why is not None  # a reservation holds its machines: no stockout for them
        if not held and ((zone, mt) in self.s["stockout"] or ("", mt) in self.s["stockout"]
                         or (zone, mt, spot) in self.s["stockout_capacity"]
                         or ("", mt, spot) in self.s["stockout_capacity"]):
            return {"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                    "message": f"Instance '{name}' creation failed: The zone 'projects/{project}/zones/{zone}' "
                               "does not have enough resources available to fulfill the request.  "
                               "Try a different zone, or try again later."}
        if mt in self.s["quota"]:
            return {"code": "QUOTA_EXCEEDED",
                    "message": f"Instance '{name}' creation failed: Quota 'NVIDIA_A100_GPUS' exceeded.  "
                               f"Limit: 0.0 in region {zone.rsplit('-', 1)[0]}."}
        return None

    def made(self, key, inst):
        """An instance was made: its reservation (if any) takes it, and it
        gets the physical host topology the test set for its name."""
        if self.reservations:
            self.reservations.consume(key[0], key[1], key[2], inst)
        topo = self.s["topology"].get(key[2])
        if topo:
            inst.setdefault("resourceStatus", {})["physicalHostTopology"] = dict(topo)

    def gone(self, key):
        """An instance was deleted: its reservation has the machine back."""
        if self.reservations:
            self.reservations.release(*key)

    # --- managed instance groups -----------------------------------------
    def mig(self, project, zone, name):
        mig = self.migs.get((project, zone, name))
        if not mig:
            raise ApiError(404, "notFound",
                           f"The resource 'projects/{project}/zones/{zone}/instanceGroupManagers/{name}' was not found")
        return mig

    def new_name(self, mig):
        while True:
            mig.seq += 1
            h = nodepools.short_hash(mig.name, mig.seq)
            suffix = "".join(ALNUM[int(h[i:i + 2], 16) % len(ALNUM)] for i in range(0, 8, 2))
            name = f"{mig.base}-{suffix}"
            if name not in mig.members and (mig.project, mig.zone, name) not in self.s["instances"]:
                return name

    def create_instances(self, mig, configs):
        """configs: the request's per-instance configs ({name, preservedState})."""
        mig.touched = True
        for cfg in configs:
            name = cfg["name"]
            if name in mig.members:
                continue  # already the group's: not created twice
            meta = ((cfg.get("preservedState") or {}).get("metadata")) or {}
            mig.members[name] = Member(name, metadata=meta)
            mig.target += 1
        return self.operation(mig.project, mig.zone, "compute.instanceGroupManagers.createInstances", mig.url)

    def delete_instances(self, mig, urls, skip):
        """Deletes exactly the named managed instances. A URL of another zone
        or project, or one without an instance name, fails the operation
        whatever the flag; one that is not a member (or is already being
        deleted) is skipped with skipInstancesOnValidationError, and fails the
        operation without it. A failed operation deletes nothing."""
        mig.touched = True
        kind = "compute.instanceGroupManagers.deleteInstances"
        names, bad = [], None
        for i, u in enumerate(urls):
            project, zone, name = parse_instance_url(u)
            segs = [x for x in u.split("/") if x]
            malformed = not name or (len(segs) > 1 and segs[-2] != "instances")
            if malformed or project not in (None, mig.project) or zone not in (None, mig.zone):
                bad = (i, u, "is malformed or names an instance outside the group's zone")
                break
            m = mig.members.get(name)
            if m is None or m.action == "DELETING":
                if skip:
                    continue
                bad = (i, u, "is not a member of the group or is already being deleted")
                break
            names.append(name)
        if bad:
            i, u, why = bad
            op = self.operation(mig.project, mig.zone, kind, mig.url, {
                "code": "INVALID_FIELD_VALUE",
                "message": f"Invalid value for field 'resource.instances[{i}]': '{u}'. The instance {why}: "
                           f"'projects/{mig.project}/zones/{mig.zone}/instanceGroupManagers/{mig.name}'."})
            op["httpErrorStatusCode"] = 400
            return op
        for name in names:
            mig.members[name].action = "DELETING"
            mig.target -= 1
        return self.operation(mig.project, mig.zone, kind, mig.url)

    def resize(self, mig, size):
        if size < 0:
            raise ApiError(400, "invalid", f"Invalid value for field 'size': '{size}'. Must be greater than or equal to 0.")
        mig.touched = True
        live = [m for m in mig.members.values() if m.action != "DELETING"]
        if size > len(live):
            for _ in range(size - len(live)):
                name = self.new_name(mig)
                mig.members[name] = Member(name)
        else:
            # instances not yet created go first, then the newest
            order = sorted(enumerate(live), key=lambda im: (im[1].action == "NONE", -im[0]))
            order = [m for _, m in order]
            for m in order[:len(live) - size]:
                m.action = "DELETING"
        mig.target = size
        return self.operation(mig.project, mig.zone, "compute.instanceGroupManagers.resize", mig.url)

    def managed_instances(self, mig):
        t = self.template(mig.template_url)
        out = []
        for m in mig.members.values():
            inst = self.s["instances"].get((mig.project, mig.zone, m.name))
            item = {"instance": compute_url(mig.project, f"zones/{mig.zone}", "instances", m.name),
                    "name": m.name, "currentAction": m.action,
                    "version": {"instanceTemplate": t["selfLink"] if t else mig.template_url}}
            if inst:
                item["id"] = inst["id"]
                item["instanceStatus"] = inst["status"]
            if m.errors:
                item["lastAttempt"] = {"errors": {"errors": copy.deepcopy(m.errors)}}
            out.append(item)
        return out

    def make_instance(self, mig, member):
        name = member.name
        t = self.template(mig.template_url)
        props = copy.deepcopy(t["properties"])
        mt = props["machineType"].rsplit("/", 1)[-1]
        zbase = f"https://www.googleapis.com/compute/v1/projects/{mig.project}/zones/{mig.zone}"
        num = project_number(mig.project)
        items = [i for i in props.get("metadata", {}).get("items", [])
                 if i["key"] not in ("created-by", "instance-template") and i["key"] not in member.metadata]
        items += [{"key": k, "value": v} for k, v in sorted(member.metadata.items())]
        items += [{"key": "instance-template", "value": t["selfLink"].split("/compute/v1/")[-1].replace(
                      f"projects/{mig.project}/", f"projects/{num}/", 1)},
                  {"key": "created-by", "value": f"projects/{num}/zones/{mig.zone}/instanceGroupManagers/{mig.name}"}]
        inst = dict(props, kind="compute#instance", id=str(next(self.ids)), name=name, status="RUNNING",
                    zone=zbase, selfLink=f"{zbase}/instances/{name}", creationTimestamp=self.now(),
                    machineType=f"{zbase}/machineTypes/{mt}",
                    metadata={"kind": "compute#metadata", "items": items})
        return inst

    def reconcile(self):
        """Moves every group toward its intent: creates what capacity allows,
        deletes what is DELETING, repairs failed or vanished instances."""
        hold = self.s["hold"]
        for mig in list(self.migs.values()):
            for m in list(mig.members.values()):
                key = (mig.project, mig.zone, m.name)
                inst = self.s["instances"].get(key)
                if m.action == "NONE" and (inst is None or inst.get("status") == "TERMINATED"):
                    m.action = "RECREATING"  # repair: failed, preempted or deleted outside the group
                if hold:
                    continue
                if m.action == "DELETING":
                    self.s["instances"].pop(key, None)
                    self.gone(key)
                    del mig.members[m.name]
                    continue
                if m.action in ("CREATING", "RECREATING"):
                    t = self.template(mig.template_url)
                    err = self.capacity_error(mig.project, mig.zone, m.name, t["properties"])
                    if err:
                        if not m.errors or m.errors[0]["code"] != err["code"]:
                            mig.errors.append({
                                "instanceActionDetails": {
                                    "action": m.action,
                                    "instance": compute_url(mig.project, f"zones/{mig.zone}", "instances", m.name),
                                    "version": {"instanceTemplate": t["selfLink"]}},
                                "error": dict(err), "timestamp": self.now()})
                        m.errors = [err]
                        continue
                    new = self.make_instance(mig, m)
                    self.made(key, new)
                    self.s["instances"][key] = new
                    self.s["created"].append({"name": m.name, "zone": mig.zone, "labels": new.get("labels", {})})
                    m.action, m.errors, m.instance_id = "NONE", None, new["id"]
            for r in mig.requests.values():
                if r.state == "CREATING" and not hold:
                    r.state = "ACCEPTED"  # queued until capacity is found (a knob grants it)
            mig.refresh()

    # --- resize requests (flex-start grants) -------------------------------
    def flex_start_group(self, mig):
        t = self.template(mig.template_url)
        return bool(t) and (t["properties"].get("scheduling") or {}).get("provisioningModel") == "FLEX_START"

    def resize_request(self, mig, name):
        r = mig.requests.get(name)
        if not r:
            raise ApiError(404, "notFound", f"The resource 'projects/{mig.project}/zones/{mig.zone}/"
                                            f"instanceGroupManagers/{mig.name}/resizeRequests/{name}' was not found")
        return r

    def insert_resize_request(self, mig, body):
        try:
            name, instances, resize_by, secs = resize.validate(body, flex_start_template=self.flex_start_group(mig))
        except resize.Refused as e:
            raise ApiError(e.code, e.reason, e.message)
        if name in mig.requests:
            raise ApiError(409, "alreadyExists", f"The resource 'projects/{mig.project}/zones/{mig.zone}/"
                                                 f"instanceGroupManagers/{mig.name}/resizeRequests/{name}' "
                                                 "already exists")
        link = f"{mig.url}/resizeRequests/{name}"
        zone_url = f"https://www.googleapis.com/compute/v1/projects/{mig.project}/zones/{mig.zone}"
        mig.requests[name] = resize.Request(name, instances, resize_by, secs, str(next(self.ids)), self.now(),
                                            zone_url, link)
        return self.operation(mig.project, mig.zone, "compute.instanceGroupManagerResizeRequests.insert", link)

    def cancel_resize_request(self, mig, name):
        r = self.resize_request(mig, name)
        try:
            resize.may_cancel(r.state)
        except resize.Refused as e:
            raise ApiError(e.code, e.reason, e.message)
        r.state = "CANCELLED"
        return self.operation(mig.project, mig.zone, "compute.instanceGroupManagerResizeRequests.cancel", r.self_link)

    def delete_resize_request(self, mig, name):
        r = self.resize_request(mig, name)
        try:
            resize.may_delete(r.state)
        except resize.Refused as e:
            raise ApiError(e.code, e.reason, e.message)
        del mig.requests[name]
        return self.operation(mig.project, mig.zone, "compute.instanceGroupManagerResizeRequests.delete", r.self_link)

    def find_resize_request(self, name, group=None):
        for mig in self.migs.values():
            if name in mig.requests and group in (None, "", mig.name):
                return mig, mig.requests[name]
        raise ApiError(404, "notFound", f"no resize request {name}")

    def grant_resize_request(self, mig, r):
        """Capacity found: every VM of the request is created at once, as
        members of the group, and the request SUCCEEDED."""
        if r.state not in resize.ACTIVE:
            raise ApiError(400, "conditionNotMet", f"resize request {r.name} is {r.state}")
        configs = r.instances if r.instances is not None else [{"name": None}] * r.resize_by
        for cfg in configs:
            name = cfg.get("name") or self.new_name(mig)
            if name in mig.members:
                continue
            meta = ((cfg.get("preservedState") or {}).get("metadata")) or {}
            m = Member(name, metadata=meta)
            mig.members[name] = m
            mig.target += 1
            new = self.make_instance(mig, m)
            self.s["instances"][(mig.project, mig.zone, name)] = new
            self.s["created"].append({"name": name, "zone": mig.zone, "labels": new.get("labels", {})})
            m.action, m.instance_id = "NONE", new["id"]
        r.state = "SUCCEEDED"
        mig.touched = True
        mig.refresh()

    def fail_resize_request(self, r, code, message):
        """No capacity in time: the request FAILED and no VM of it exists."""
        if r.state not in resize.ACTIVE:
            raise ApiError(400, "conditionNotMet", f"resize request {r.name} is {r.state}")
        r.state = "FAILED"
        r.error = {"code": code, "message": message}

    # --- GKE node pools ---------------------------------------------------
    def gke_operation(self, kind, target, on_done):
        c = self.fx["cluster"]
        name = f"operation-{next(self.ids)}-{nodepools.short_hash(kind, target, next(self.ids))}"
        num = project_number(c["project"])
        op = {"name": name, "zone": c["location"], "location": c["location"], "operationType": kind,
              "status": "RUNNING", "selfLink": f"https://container.googleapis.com/v1/projects/{num}/locations/{c['location']}/operations/{name}",
              "targetLink": target, "startTime": self.now()}
        self.s["gke_ops"][name] = {"op": op, "left": self.s["gke_op_polls"], "on_done": on_done}
        return copy.deepcopy(op)

    def get_gke_operation(self, project, location, name):
        c = self.fx["cluster"]
        rec = self.s["gke_ops"].get(name)
        if (project, location) != (c["project"], c["location"]) or not rec:
            raise ApiError(404, "NOT_FOUND", f"Not found: projects/{project}/locations/{location}/operations/{name}.")
        if rec["op"]["status"] != "DONE":
            if rec["left"] > 0:
                rec["left"] -= 1
            else:
                rec["op"]["status"] = "DONE"
                rec["op"]["endTime"] = self.now()
                rec["on_done"]()
        return copy.deepcopy(rec["op"])

    def pool_link(self, name):
        return f"https://container.googleapis.com/v1/{self.cluster_path()}/nodePools/{name}"

    def create_pool(self, body):
        try:
            pool = nodepools.validate(
                (body or {}).get("nodePool"), region_zones=self.region_zones(), machines=self.machines,
                accelerators=self.accelerators, unavailable=self.s["unavailable"])
        except nodepools.Invalid as e:
            raise ApiError(400, "INVALID_ARGUMENT", str(e))
        name = pool["name"]
        if any(p["name"] == name for p in self.pools()):
            raise ApiError(409, "ALREADY_EXISTS", f"Already exists: {self.cluster_path()}/nodePools/{name}.")
        c = self.fx["cluster"]
        project, region = c["project"], self.region()
        self.pool_seq += 1
        cpu_pool = any(not (p.get("config") or {}).get("accelerators") for p in self.pools())
        urls = []
        for zone in pool["locations"]:
            tname, gname, base = nodepools.group_names(c["name"], name, zone, self.pool_seq)
            tlink = compute_url(project, f"regions/{region}", "instanceTemplates", tname)
            self.fx["instanceTemplates"].append({
                "kind": "compute#instanceTemplate", "id": str(next(self.ids)), "name": tname,
                "creationTimestamp": self.now(), "selfLink": tlink,
                "region": f"https://www.googleapis.com/compute/v1/projects/{project}/regions/{region}",
                "properties": nodepools.template_properties(pool, project=project, region=region,
                                                            cluster=c["name"], zone=zone, gpu_taint=cpu_pool)})
            glink = compute_url(project, f"zones/{zone}", "instanceGroupManagers", gname)
            public = {"kind": "compute#instanceGroupManager", "id": str(next(self.ids)), "name": gname,
                      "zone": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}",
                      "selfLink": glink, "instanceTemplate": tlink, "versions": [{"instanceTemplate": tlink}],
                      "baseInstanceName": base, "targetSize": 0, "creationTimestamp": self.now(),
                      "instanceGroup": compute_url(project, f"zones/{zone}", "instanceGroups", gname),
                      "listManagedInstancesResults": "PAGELESS"}
            self.fx["instanceGroupManagers"].append(public)
            mig = Mig(project, zone, gname, base, tlink, public, pool=name)
            self.migs[(project, zone, gname)] = mig
            for _ in range(pool["initialNodeCount"]):
                n = self.new_name(mig)
                mig.members[n] = Member(n)
                mig.target += 1
            mig.refresh()
            urls.append(glink)
        cfg = pool["config"]
        cfg.setdefault("diskSizeGb", 100)
        cfg.setdefault("diskType", "pd-balanced")
        cfg.setdefault("imageType", "COS_CONTAINERD")
        resource = dict(pool, selfLink=self.pool_link(name), instanceGroupUrls=urls, status="PROVISIONING",
                        version=self.pools()[0]["version"] if self.pools() else "1.31.5-gke.1023000",
                        podIpv4CidrSize=24, etag=nodepools.short_hash(name, self.pool_seq))
        resource.setdefault("autoscaling", {})
        resource.setdefault("management", {"autoUpgrade": True, "autoRepair": True})
        self.fx["nodePools"].append(resource)

        def done():
            resource["status"] = "RUNNING"
        return self.gke_operation("CREATE_NODE_POOL", self.pool_link(name), done)

    def migs_of(self, pool):
        out = []
        for url in pool.get("instanceGroupUrls") or []:
            project, zone, name = parse_instance_url(url)
            if (project, zone, name) in self.migs:
                out.append(self.migs[(project, zone, name)])
        return out

    def delete_pool(self, name):
        pool = self.pool(name)
        if pool.get("status") == "STOPPING":
            raise ApiError(400, "FAILED_PRECONDITION", f"Node pool {name} is being deleted.")
        pool["status"] = "STOPPING"

        def done():
            for mig in self.migs_of(pool):
                for m in mig.members.values():
                    self.s["instances"].pop((mig.project, mig.zone, m.name), None)
                    self.gone((mig.project, mig.zone, m.name))
                del self.migs[(mig.project, mig.zone, mig.name)]
                self.fx["instanceGroupManagers"][:] = [g for g in self.fx["instanceGroupManagers"] if g is not mig.public]
                self.fx["instanceTemplates"][:] = [t for t in self.fx["instanceTemplates"]
                                                   if t["selfLink"] != mig.template_url]
            self.fx["nodePools"][:] = [p for p in self.fx["nodePools"] if p is not pool]
        return self.gke_operation("DELETE_NODE_POOL", self.pool_link(name), done)

    def set_size(self, name, body):
        pool = self.pool(name)
        n = nodepools.count_of((body or {}).get("nodeCount", -1), "nodeCount")
        if n < 0:
            raise ApiError(400, "INVALID_ARGUMENT", f"Invalid value for field 'nodeCount': {n}. Must be non-negative.")
        for mig in self.migs_of(pool):
            self.resize(mig, n)
        return self.gke_operation("SET_NODE_POOL_SIZE", self.pool_link(name), lambda: None)

    def set_autoscaling(self, name, body):
        pool = self.pool(name)
        auto = (body or {}).get("autoscaling") or {}
        try:
            nodepools.validate_autoscaling(auto)
        except nodepools.Invalid as e:
            raise ApiError(400, "INVALID_ARGUMENT", str(e))
        pool["autoscaling"] = auto
        return self.gke_operation("UPDATE_CLUSTER", self.pool_link(name), lambda: None)

    # --- join ---------------------------------------------------------------
    def snapshot(self):
        """What GKE's node registration reads, as plain data for join.py."""
        groups = {}
        for mig in self.migs.values():
            groups[mig.url] = [{"name": m["name"], "id": m.get("id"), "currentAction": m["currentAction"]}
                               for m in self.managed_instances(mig)]
        return {"cluster": dict(self.fx["cluster"]),
                "machineTypes": {m["name"]: {"guestCpus": m["guestCpus"], "memoryMb": m["memoryMb"],
                                             "accelerators": m.get("accelerators", []),
                                             "architecture": m.get("architecture")} for m in self.machines},
                "nodePools": [{"name": p["name"], "instanceGroupUrls": list(p.get("instanceGroupUrls") or [])}
                              for p in self.pools()],
                "groups": groups,
                "instances": [copy.deepcopy(i) for (p, _, _), i in sorted(self.s["instances"].items())
                              if p == self.fx["cluster"]["project"]]}

    def preempted(self, name):
        """Records GCE's `compute.instances.preempted` system event (a zone
        operation named systemevent-…) for each instance of that name (the
        fake's preempt knob stopped it). Its own numbering, so the ids and
        names of the fake's other operations and instances stay as before."""
        for (p, z, n), inst in self.s["instances"].items():
            if n == name and inst.get("status") == "TERMINATED":
                self.system_events += 1
                op_name = f"systemevent-{self.system_events}"
                zbase = f"https://www.googleapis.com/compute/v1/projects/{p}/zones/{z}"
                self.s["ops"][(p, z, op_name)] = {
                    "kind": "compute#operation", "id": str(9_000_000 + self.system_events), "name": op_name,
                    "operationType": "compute.instances.preempted", "status": "DONE", "progress": 100,
                    "zone": zbase, "targetLink": inst["selfLink"], "selfLink": f"{zbase}/operations/{op_name}",
                    "insertTime": self.now(), "startTime": self.now(), "endTime": self.now(),
                    "statusMessage": "Instance was preempted."}
