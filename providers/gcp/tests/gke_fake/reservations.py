"""Compute Engine reservations in the Compute fake: the resources as
`reservations.get`, `reservations.list` and `reservations.aggregatedList`
serve them, and which reservation an instance consumes when it is made, by
`instances.insert` or by a managed instance group. Pure state: no HTTP.

Rules, each with its source (README.md beside `compute_fake.py` has the
table):

* A reservation is zonal; `specificReservation.count` machines of
  `instanceProperties` (`machineType`, `guestAccelerators`), `inUseCount`
  of them running; `status` READY when usable; `specificReservationRequired`
  (Compute API reference, `reservations` resource).
* `reservationAffinity.consumeReservationType`: `ANY_RESERVATION` (the
  default), `SPECIFIC_RESERVATION` (with `key`
  `compute.googleapis.com/reservation-name` and `values`, a name in the
  instance's project or `projects/P/reservations/NAME` of a shared one in
  the same zone), `NO_RESERVATION` (Compute API reference,
  `ReservationAffinity`).
* A VM consumes a reservation only if its properties match the
  reservation's exactly; a `specificReservationRequired` reservation is
  consumed only by VMs that name it; Spot VMs and preemptible VMs cannot
  consume reservations ("Consume reservations",
  https://cloud.google.com/compute/docs/instances/reservations-consume,
  Limitations; "Reservations of Compute Engine zonal resources").
* A VM naming a reservation that cannot take it fails with code
  `CONDITION_NOT_MET` and, for a missing one "Specified reservation 'N'
  does not exist.", one not READY "Cannot insert instance to a reservation
  with status: S, as it requires reservation to be in READY state.", one of
  another shape "No available resources in specified reservations 'N'",
  one full "Specified reservation 'N' does not have available resources
  for the request." (the messages Cluster Autoscaler's GCE provider matches,
  kubernetes/autoscaler `cluster-autoscaler/cloudprovider/gce/autoscaling_gce_client.go`
  and its test, commit 55c37cd5eb550756c5ccc5a89e9068d77797e575).
* `inUseCount` counts the VMs in it: up when one is made, down when it is
  deleted.

The fake's own choices: the refusal of a Spot VM that names a reservation
and of a malformed affinity is a 400 `invalid` answer to `instances.insert`
(an `INVALID_FIELD_VALUE` attempt error in a group), not checked against
Compute's text; a reservation another project owns is usable only when its
`shareSettings` (`SPECIFIC_PROJECTS`, `projectMap`) names the instance's
project, else it "does not exist" for it; listings page at `page_size`.
"""

import copy

NAME_KEY = "compute.googleapis.com/reservation-name"
# proto3 JSON: enum by name or by number (Compute's ReservationAffinity.Type
# and GKE's share the names; GKE's numbers: google/container/v1/cluster_service.proto)
TYPES = ["UNSPECIFIED", "NO_RESERVATION", "ANY_RESERVATION", "SPECIFIC_RESERVATION"]


def affinity_type(a):
    t = (a or {}).get("consumeReservationType", "ANY_RESERVATION")
    if isinstance(t, int) or (isinstance(t, str) and t.isdigit()):
        t = TYPES[int(t)] if 0 <= int(t) < len(TYPES) else t
    return "ANY_RESERVATION" if t in ("UNSPECIFIED", None) else t


def last(s):
    return (s or "").rstrip("/").rsplit("/", 1)[-1]


def accelerators(items):
    return sorted((last(a.get("acceleratorType")), int(a.get("acceleratorCount", 0))) for a in items or [])


def spot(props):
    sched = props.get("scheduling") or {}
    return sched.get("provisioningModel") == "SPOT" or bool(sched.get("preemptible"))


class Reservations:
    def __init__(self, ids, now):
        self.ids, self.now = ids, now
        self.items = {}  # (project, zone, name) -> resource
        self.consumers = {}  # (project, zone, instance name) -> reservation key
        self.page_size = 500

    # --- resources ----------------------------------------------------------
    def create(self, project, zone, name, machine_type, count, *, accelerator=None, accelerator_count=0,
               specific=False, status="READY", delete_at=None, share_with=()):
        base = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
        props = {"machineType": machine_type}
        if accelerator:
            props["guestAccelerators"] = [{"acceleratorType": accelerator, "acceleratorCount": int(accelerator_count)}]
        r = {"kind": "compute#reservation", "id": str(next(self.ids)), "name": name,
             "creationTimestamp": self.now(), "selfLink": f"{base}/reservations/{name}", "zone": base,
             "status": status, "specificReservationRequired": bool(specific),
             "specificReservation": {"count": str(int(count)), "inUseCount": "0", "assuredCount": str(int(count)),
                                     "instanceProperties": props},
             "shareSettings": {"shareType": "LOCAL"}}
        if share_with:
            r["shareSettings"] = {"shareType": "SPECIFIC_PROJECTS",
                                  "projectMap": {p: {"projectId": p} for p in share_with}}
        if delete_at:
            r["deleteAtTime"] = delete_at
        self.items[(project, zone, name)] = r
        return r

    def get(self, project, zone, name):
        r = self.items.get((project, zone, name))
        return copy.deepcopy(r) if r else None

    def page(self, items, token, max_results):
        start = int(token or 0)
        size = min(int(max_results or self.page_size), self.page_size)
        out = {"items": items[start:start + size]}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    def list_zone(self, project, zone, token=None, max_results=None):
        items = [copy.deepcopy(r) for (p, z, _), r in sorted(self.items.items()) if p == project and z == zone]
        return dict(self.page(items, token, max_results), kind="compute#reservationList")

    def aggregated(self, project, token=None, max_results=None):
        flat = [(z, copy.deepcopy(r)) for (p, z, _), r in sorted(self.items.items()) if p == project]
        page = self.page(flat, token, max_results)
        items = {}
        for z, r in page["items"]:
            items.setdefault(f"zones/{z}", {"reservations": []})["reservations"].append(r)
        return dict(page, items=items, kind="compute#reservationAggregatedList")

    # --- consumption --------------------------------------------------------
    def target(self, project, zone, value):
        """The key a SPECIFIC value names, as seen from `project`, or None."""
        parts = value.split("/")
        owner, name = (parts[1], parts[3]) if len(parts) == 4 and parts[0] == "projects" \
            and parts[2] == "reservations" else (project, value)
        r = self.items.get((owner, zone, name))
        if r is None:
            return None
        if owner != project:
            share = r.get("shareSettings") or {}
            if share.get("shareType") != "SPECIFIC_PROJECTS" or project not in (share.get("projectMap") or {}):
                return None
        return (owner, zone, name)

    def matches(self, r, props):
        want = r["specificReservation"]["instanceProperties"]
        return last(props.get("machineType")) == last(want.get("machineType")) \
            and accelerators(props.get("guestAccelerators")) == accelerators(want.get("guestAccelerators"))

    @staticmethod
    def room(r):
        s = r["specificReservation"]
        return int(s["count"]) - int(s["inUseCount"])

    def check(self, project, zone, props):
        """("invalid", message) for a request Compute refuses outright;
        ("condition", message) when the named reservation cannot take it;
        ("ok", key or None): the reservation it would consume, if any."""
        a = props.get("reservationAffinity") or {}
        t = affinity_type(a)
        if t not in ("ANY_RESERVATION", "SPECIFIC_RESERVATION", "NO_RESERVATION"):
            return "invalid", f"Invalid value for field 'resource.reservationAffinity.consumeReservationType': '{t}'."
        if t == "NO_RESERVATION":
            return "ok", None
        if t == "SPECIFIC_RESERVATION":
            values = a.get("values") or []
            if a.get("key") != NAME_KEY or len(values) != 1:
                return "invalid", ("Invalid value for field 'resource.reservationAffinity': a specific reservation "
                                   f"is named with key '{NAME_KEY}' and one value.")
            if spot(props):
                return "invalid", "Invalid value for field 'resource.reservationAffinity': Spot VMs and " \
                                  "preemptible VMs cannot consume reservations."
            key = self.target(project, zone, values[0])
            if key is None:
                return "condition", f"Specified reservation '{values[0]}' does not exist."
            r = self.items[key]
            if r["status"] != "READY":
                return "condition", (f"Cannot insert instance to a reservation with status: {r['status']}, "
                                     "as it requires reservation to be in READY state.")
            if not self.matches(r, props):
                return "condition", f"No available resources in specified reservations '{values[0]}'"
            if self.room(r) <= 0:
                return "condition", f"Specified reservation '{values[0]}' does not have available resources " \
                                    "for the request."
            return "ok", key
        # ANY_RESERVATION: a matching one of this project and zone with room, never a
        # specificReservationRequired one; none found is no error (on-demand capacity)
        if spot(props):
            return "ok", None
        for key, r in sorted(self.items.items()):
            if key[:2] == (project, zone) and r["status"] == "READY" and not r["specificReservationRequired"] \
                    and self.matches(r, props) and self.room(r) > 0:
                return "ok", key
        return "ok", None

    def consume(self, project, zone, instance, props):
        """Records that instance `instance` was made: it takes a machine of
        the reservation `check` finds (call `check` first)."""
        self.release(project, zone, instance)
        kind, key = self.check(project, zone, props)
        if kind == "ok" and key:
            s = self.items[key]["specificReservation"]
            s["inUseCount"] = str(int(s["inUseCount"]) + 1)
            self.consumers[(project, zone, instance)] = key

    def release(self, project, zone, instance):
        """Instance `instance` is gone: its reservation has the machine back."""
        key = self.consumers.pop((project, zone, instance), None)
        if key and key in self.items:
            s = self.items[key]["specificReservation"]
            s["inUseCount"] = str(max(0, int(s["inUseCount"]) - 1))
