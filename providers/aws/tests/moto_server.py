"""Run a moto server on 127.0.0.1 for the AWS provider's tests.

Prints `moto=<port> control=<port>` on one line, then serves until stdin
closes. moto's EC2 backend is patched so that RunInstances behaves more like
real EC2 in three ways the tests need:

* `ClientToken` is honoured: the same token returns the same reservation
  (moto ignores it otherwise).
* Insufficient capacity can be injected per instance type (`p4d.24xlarge`) or
  per type@zone (`p4d.24xlarge@us-east-1a`): POST /ice?offering=<...>.
* Throttling (`RequestLimitExceeded`) can be injected for the next N
  RunInstances calls, retries included: POST /throttle?n=<N>.
* Any other error code can be injected for every RunInstances call:
  POST /fail?code=<code> (e.g. `UnauthorizedOperation`).
* The spot service-linked role `AWSServiceRoleForEC2Spot` (EC2 User Guide,
  "Service-linked role for Spot Instance requests"): a spot launch needs
  it; when the account has none, EC2 creates it on the caller's behalf if
  the caller may (`iam:CreateServiceLinkedRole` for `spot.amazonaws.com`),
  and otherwise refuses every spot launch with
  `AuthFailure.ServiceLinkedRoleCreationNotPermitted` (HTTP 403) until
  someone creates it. POST /spot-role?state=absent (none, and the caller
  may not create it), `creatable` (none, and the caller may: the first spot
  launch creates it, and its log entry names the implied authorization
  under `createsServiceLinkedRole`) or `exists` (what
  `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`
  does). The role exists from the start and after a reset, as in most
  accounts; on-demand launches never need it.

* Placement groups, which moto does not implement, as the EC2 API Reference
  describes `CreatePlacementGroup` (tag specifications on the
  `placement-group` resource; an existing name answers
  `InvalidPlacementGroup.Duplicate`), `DescribePlacementGroups` (filters
  `group-name`, `strategy`, `tag:<key>`, `tag-key`; `GroupName.N`) and
  `DeletePlacementGroup` (an unknown name answers
  `InvalidPlacementGroup.Unknown`; a group that still holds an instance
  that is not terminated answers `InvalidPlacementGroup.InUse`), and
  `RunInstances` into a group (`Placement.GroupName` that does not exist:
  `InvalidPlacementGroup.Unknown`; every instance of a `cluster` group in one
  Availability Zone, EC2 User Guide "Placement strategies": a launch into
  another zone answers `InvalidParameterValue`).
* Network interfaces of a launch, as the EC2 User Guide describes EFA
  ("Elastic Fabric Adapter", "Maximize network bandwidth on accelerated
  computing instances"): interfaces and instance-level security groups are
  exclusive (`InvalidParameterCombination`, as moto already answers for an
  instance-level subnet); exactly one interface is the primary one
  (`NetworkCardIndex` 0, `DeviceIndex` 0); an `efa` interface only on a type
  whose `NetworkInfo.EfaSupported` is true, at most
  `EfaInfo.MaximumEfaInterfaces` of them, each on a network card below
  `MaximumNetworkCards` and no card twice (`InvalidParameterValue`; the
  type's facts from moto's own `DescribeInstanceTypes` data).

* Capacity reservations, which moto does not implement, as the EC2 API
  Reference describes them (see also README.md next to this file):
  `CreateCapacityReservation` (an On-Demand Capacity Reservation,
  `ReservationType` `default`, `active` at once; tag specifications on the
  `capacity-reservation` resource), and Capacity Blocks for ML seeded through
  POST /capacity-block?type=<t>&zone=<z>&count=<n>&start=<epoch>&end=<epoch>
  [&tag=<k>=<v>] (`ReservationType` `capacity-block`: `scheduled` before its
  start, `active` until its end, `expired` after; EC2 sells them through
  `PurchaseCapacityBlock`, which the tests need not call). The answer names
  the new id: {"id": "cr-..."}.
  `DescribeCapacityReservations`: `CapacityReservationId.N` (an unknown id
  answers `InvalidCapacityReservationId.NotFound`), the filters
  `availability-zone`, `instance-type`, `state`, `instance-match-criteria`,
  `tag:<key>` and `tag-key` (any other filter name answers
  `InvalidParameterValue`), `MaxResults`/`NextToken`.
  `RunInstances` with
  `CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId`:
  the reservation must exist (`InvalidCapacityReservationId.NotFound`), be
  `active`, and hold the instance type and Availability Zone of the launch;
  a Capacity Block is launched into only with
  `InstanceMarketOptions.MarketType` `capacity-block`, and that market type
  only into a Capacity Block (RunInstances, `InstanceMarketOptionsRequest`;
  EC2 User Guide, "Launch instances into Capacity Blocks"). The reference
  names no error code for these mismatches; the stand-in answers
  `InvalidParameterValue`. A launch needing more instances than
  `AvailableInstanceCount` answers `ReservationCapacityExceeded` ("Error
  codes for the Amazon EC2 API": the targeted reservation has too little
  available capacity). Each instance launched takes one from
  `AvailableInstanceCount` and is described with its `CapacityReservationId`
  (a Capacity Block's with `InstanceLifecycle` `capacity-block`);
  terminating it gives the slot back.
* `DescribeInstanceTopology`, which moto does not implement (EC2 API
  Reference; EC2 User Guide, "Amazon EC2 instance topology"): up to 100
  `InstanceId.N` (more answers `InvalidParameterValue`; an unknown id
  `InvalidInstanceID.NotFound`), the `instance-type` and
  `availability-zone` filters, `MaxResults`/`NextToken`; only running
  instances of the documented types are described, each with three
  `NetworkNodes`, top layer first: one per zone at the top two layers, and
  at the bottom one per placement group (one per instance outside a group).
  POST /page-size?n=<N> makes these two calls answer at most N items per
  page when the caller sets no `MaxResults` (EC2's own page is larger), so
  that the tests see a caller follow `NextToken`.

GET /calls answers how many RunInstances requests arrived (retries
included), so a test can tell a retried call from one that was not, and
how many TerminateInstances requests.
POST /reset clears the injections, the count, the page size and the call
log (not the placement groups and capacity reservations: they are
resources, like moto's instances). An instance
profile `muster-node` holding the role `muster-node-role` exists from the
start.

GET /log answers every AWS API call since the last reset, in order, with
what an IAM authorization of it needs: service, action, region, account,
the request parameters (query parameters for EC2, the JSON body for SQS,
SSM and EKS, and the path), for RunInstances the roles of the instance
profile passed, and for TerminateInstances the tags the instances carry.
The IAM policy test evaluates the documented policy against it.

POST /public-parameter?name=<path>&value=<v> writes a public SSM parameter
(`/aws/service/...`), which the SSM API refuses to create; AWS publishes
them.
"""

import json
import sys
import uuid
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from moto.core.responses import BaseResponse
from moto.ec2.exceptions import EC2ClientError
from moto.utilities.utils import get_partition
from moto.ec2.responses.instances import InstanceResponse
from moto.server import ThreadedMotoServer
from werkzeug.serving import WSGIRequestHandler

# quiet: one line per request would flood test output
WSGIRequestHandler.log_request = lambda *args, **kwargs: None

STATE = {"ice": set(), "throttle": 0, "tokens": {}, "calls": 0, "terminates": 0, "fail": None,
         "log": [], "spot_role": "exists", "groups": {}, "members": {},
         "reservations": {}, "reserved_by": {}, "page_size": None}
SPOT_SERVICE = "spot.amazonaws.com"
LOCK = threading.Lock()
_run_instances = InstanceResponse.run_instances


def spot_role_not_permitted():
    """EC2's answer to a spot launch on an account without the spot
    service-linked role, by a caller that may not create it (real EC2 sends
    it with HTTP 403; moto serializes it with its generic client-error
    status, which muster does not read: the code decides)."""
    return EC2ClientError(
        "AuthFailure.ServiceLinkedRoleCreationNotPermitted",
        "The provided credentials do not have permission to create the service-linked role "
        "for EC2 Spot Instances.",
    )


def _type_info(instance_type):
    """moto's DescribeInstanceTypes data for one type."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES

    return INSTANCE_TYPES.get(instance_type, {})


def check_network_interfaces(self, instance_type):
    """The EFA and network-interface rules of the module docstring."""
    nics = {}
    for key, values in self.querystring.items():
        parts = key.split(".")
        if parts[0] == "NetworkInterface" and len(parts) >= 3 and parts[1].isdigit():
            nics.setdefault(int(parts[1]), {})[".".join(parts[2:])] = values[0]
    if not nics:
        return
    if any(k.startswith("SecurityGroupId.") for k in self.querystring):
        raise EC2ClientError(
            "InvalidParameterCombination",
            "Network interfaces and an instance-level security groups may not be specified on "
            "the same request",
        )
    info = _type_info(instance_type).get("NetworkInfo", {})
    cards = info.get("MaximumNetworkCards", 1)
    efa_max = info.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)
    primary = [n for n in nics.values()
               if n.get("NetworkCardIndex", "0") == "0" and n.get("DeviceIndex") == "0"]
    if len(primary) != 1:
        raise EC2ClientError("InvalidParameterValue",
                             "Exactly one network interface must have device index 0 on "
                             "network card 0.")
    used = [n.get("NetworkCardIndex", "0") for n in nics.values() if n.get("DeviceIndex") != "0"]
    if len(used) != len(set(used)):
        raise EC2ClientError("InvalidParameterValue",
                             "A network card can take only one of these network interfaces.")
    efa = [n for n in nics.values() if n.get("InterfaceType") == "efa"]
    if efa and not info.get("EfaSupported", False):
        raise EC2ClientError("InvalidParameterValue",
                             f"EFA interfaces are not supported on {instance_type}.")
    if len(efa) > efa_max:
        raise EC2ClientError("InvalidParameterValue",
                             f"{instance_type} supports at most {efa_max} EFA interfaces.")
    for n in nics.values():
        if int(n.get("NetworkCardIndex", "0")) >= cards:
            raise EC2ClientError("InvalidParameterValue",
                                 f"Network card index {n.get('NetworkCardIndex')} is out of range "
                                 f"for {instance_type} ({cards} network cards).")


def check_placement_group(self, zone):
    """The group a launch names exists, and a cluster group keeps one zone."""
    name = self._get_param("Placement.GroupName")
    if not name:
        return None
    group = STATE["groups"].get(name)
    if group is None:
        raise EC2ClientError("InvalidPlacementGroup.Unknown",
                             f"The Placement Group '{name}' is unknown.")
    if group["strategy"] == "cluster" and group.get("zone") and zone and group["zone"] != zone:
        raise EC2ClientError("InvalidParameterValue",
                             f"The placement group '{name}' is in {group['zone']}; a cluster "
                             f"placement group cannot span Availability Zones.")
    return name


def run_instances(self):
    token = self._get_param("ClientToken")
    instance_type = self._get_param("InstanceType", "m1.small")
    zone = self._get_param("Placement.AvailabilityZone")
    with LOCK:
        STATE["calls"] += 1
        if STATE["throttle"] > 0:
            STATE["throttle"] -= 1
            raise EC2ClientError("RequestLimitExceeded", "Request limit exceeded.")
        if STATE["fail"]:
            raise EC2ClientError(STATE["fail"], f"injected {STATE['fail']}")
        if self._get_param("InstanceMarketOptions.MarketType") == "spot":
            if STATE["spot_role"] == "absent":
                raise spot_role_not_permitted()
            if STATE["spot_role"] == "creatable":
                STATE["spot_role"] = "exists"
                if STATE["log"] and STATE["log"][-1].get("action") == "RunInstances":
                    STATE["log"][-1]["createsServiceLinkedRole"] = SPOT_SERVICE
        if instance_type in STATE["ice"] or f"{instance_type}@{zone}" in STATE["ice"]:
            raise EC2ClientError(
                "InsufficientInstanceCapacity",
                f"We currently do not have sufficient {instance_type} capacity "
                f"in the Availability Zone you requested ({zone}).",
            )
        if token and token in STATE["tokens"]:
            return STATE["tokens"][token]
        check_network_interfaces(self, instance_type)
        group = check_placement_group(self, zone)
        reservation = check_reservation(self, instance_type, zone)
        result = _run_instances(self)
        if token:
            STATE["tokens"][token] = result
        if reservation:
            for instance in getattr(getattr(result, "result", None), "instances", []):
                reservation["available"] -= 1
                STATE["reserved_by"][instance.id] = reservation["id"]
                instance.capacity_reservation_id = reservation["id"]
                if reservation["type"] == "capacity-block":
                    instance.lifecycle = "capacity-block"
                    instance.instance_lifecycle = "capacity-block"
        if group:
            STATE["groups"][group].setdefault("zone", zone)
            reservation = getattr(result, "result", None)
            for instance in getattr(reservation, "instances", []):
                STATE["members"][instance.id] = group
        return result


InstanceResponse.run_instances = run_instances

_terminate_instances = InstanceResponse.terminate_instances


def terminate_instances(self):
    """Gives a reservation back the slot of each instance that ends here."""
    ids = [v[0] for k, v in self.querystring.items() if k.startswith("InstanceId.")]
    ending = [i for i in ids if i in STATE["reserved_by"]
              and _live(self.current_account, self.region, i)]
    result = _terminate_instances(self)
    with LOCK:
        for i in ending:
            r = STATE["reservations"].get(STATE["reserved_by"].pop(i, None))
            if r:
                r["available"] += 1
    return result


InstanceResponse.terminate_instances = terminate_instances


def _tag_set(tags):
    items = "".join(f"<item><key>{k}</key><value>{v}</value></item>" for k, v in sorted(tags.items()))
    return f"<tagSet>{items}</tagSet>"


def _group_xml(name, g):
    return (f"<groupName>{name}</groupName><state>available</state>"
            f"<strategy>{g['strategy']}</strategy><groupId>{g['id']}</groupId>"
            f"{_tag_set(g['tags'])}")


def create_placement_group(self):
    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy") or "cluster"
    tags = self._parse_tag_specification().get("placement-group", {})
    with LOCK:
        if name in STATE["groups"]:
            raise EC2ClientError("InvalidPlacementGroup.Duplicate",
                                 f"The Placement Group '{name}' already exists.")
        STATE["groups"][name] = {"id": f"pg-{uuid.uuid4().hex[:17]}", "strategy": strategy,
                                 "tags": dict(tags)}
        g = STATE["groups"][name]
    return (f'<CreatePlacementGroupResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{uuid.uuid4()}</requestId><return>true</return>"
            f"<placementGroup>{_group_xml(name, g)}</placementGroup>"
            f"</CreatePlacementGroupResponse>")


def _filters(self):
    out = {}
    for n in range(1, 50):
        name = (self.querystring.get(f"Filter.{n}.Name") or [None])[0]
        if not name:
            break
        values = []
        for k, v in sorted(self.querystring.items()):
            if k.startswith(f"Filter.{n}.Value."):
                values.extend(v)
        out[name] = values
    return out


def describe_placement_groups(self):
    filters = _filters(self)
    names = [v[0] for k, v in self.querystring.items() if k.startswith("GroupName.")]
    with LOCK:
        groups = dict(STATE["groups"])
    items = ""
    for name, g in sorted(groups.items()):
        if names and name not in names:
            continue
        ok = True
        for f, values in filters.items():
            if f == "group-name":
                ok &= name in values
            elif f == "strategy":
                ok &= g["strategy"] in values
            elif f == "tag-key":
                ok &= any(v in g["tags"] for v in values)
            elif f.startswith("tag:"):
                ok &= g["tags"].get(f[4:]) in values
        if ok:
            items += f"<item>{_group_xml(name, g)}</item>"
    return (f'<DescribePlacementGroupsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{uuid.uuid4()}</requestId><placementGroupSet>{items}</placementGroupSet>"
            f"</DescribePlacementGroupsResponse>")


def _live(account, region, instance_id):
    from moto.ec2.models import ec2_backends

    try:
        i = ec2_backends[account][region].get_instance(instance_id)
    except Exception:
        return False
    return i.state != "terminated"


def delete_placement_group(self):
    name = self._get_param("GroupName")
    with LOCK:
        if name not in STATE["groups"]:
            raise EC2ClientError("InvalidPlacementGroup.Unknown",
                                 f"The Placement Group '{name}' is unknown.")
        members = [i for i, g in STATE["members"].items() if g == name]
    if any(_live(self.current_account, self.region, i) for i in members):
        raise EC2ClientError("InvalidPlacementGroup.InUse",
                             f"There are instances in placement group {name}")
    with LOCK:
        STATE["groups"].pop(name, None)
        for i in members:
            STATE["members"].pop(i, None)
    return (f'<DeletePlacementGroupResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{uuid.uuid4()}</requestId><return>true</return>"
            f"</DeletePlacementGroupResponse>")


def _now():
    import time

    return int(time.time())


def _reservation_state(r):
    """`scheduled` before a Capacity Block starts, `expired` after the end."""
    now = _now()
    if r["end"] is not None and now >= r["end"]:
        return "expired"
    if r["start"] > now:
        return "scheduled"
    return "active"


def _reservation_zone(self, zone):
    """The zone of a launch: Placement.AvailabilityZone, else its subnet's."""
    if zone:
        return zone
    subnet = self._get_param("SubnetId") or self._get_param("NetworkInterface.1.SubnetId")
    if not subnet:
        return None
    from moto.ec2.models import ec2_backends

    try:
        return ec2_backends[self.current_account][self.region].get_subnet(subnet).availability_zone
    except Exception:
        return None


def check_reservation(self, instance_type, zone):
    """The reservation rules of the module docstring; the reservation a
    launch goes into, or None. Called with LOCK held."""
    target = self._get_param(
        "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId")
    market = self._get_param("InstanceMarketOptions.MarketType")
    if not target:
        if market == "capacity-block":
            raise EC2ClientError("InvalidParameterValue",
                                 "The capacity-block market type requires a Capacity Block "
                                 "as the capacity reservation target.")
        return None
    r = STATE["reservations"].get(target)
    if r is None:
        raise EC2ClientError("InvalidCapacityReservationId.NotFound",
                             f"The capacity reservation ID '{target}' does not exist")
    state = _reservation_state(r)
    if state != "active":
        raise EC2ClientError("InvalidParameterValue",
                             f"Capacity reservation {target} is {state}; instances can only be "
                             f"launched into an active capacity reservation.")
    if r["type"] == "capacity-block" and market != "capacity-block":
        raise EC2ClientError("InvalidParameterValue",
                             f"{target} is a Capacity Block: launch into it with "
                             f"InstanceMarketOptions.MarketType capacity-block.")
    if r["type"] != "capacity-block" and market == "capacity-block":
        raise EC2ClientError("InvalidParameterValue",
                             f"{target} is not a Capacity Block; the capacity-block market "
                             f"type launches into Capacity Blocks only.")
    zone = _reservation_zone(self, zone)
    if instance_type != r["instance_type"] or (zone and zone != r["zone"]):
        raise EC2ClientError("InvalidParameterValue",
                             f"The instance type and Availability Zone ({instance_type}, {zone}) "
                             f"do not match capacity reservation {target} "
                             f"({r['instance_type']}, {r['zone']}).")
    wanted = int(self._get_param("MinCount") or 1)
    if r["available"] < wanted:
        raise EC2ClientError("ReservationCapacityExceeded",
                             f"The targeted Capacity Reservation {target} does not have "
                             f"sufficient available instance capacity to fulfill your request.")
    return r


def new_reservation(instance_type, zone, count, kind, start, end, tags, platform="Linux/UNIX",
                    criteria="targeted"):
    rid = f"cr-{uuid.uuid4().hex[:17]}"
    STATE["reservations"][rid] = {
        "id": rid, "instance_type": instance_type, "zone": zone, "total": count,
        "available": count, "type": kind, "start": start, "end": end, "tags": dict(tags),
        "platform": platform, "criteria": criteria, "created": _now(),
    }
    return rid


def _reservation_out(r):
    from datetime import datetime, timezone

    def at(t):
        return datetime.fromtimestamp(t, tz=timezone.utc)

    out = {
        "CapacityReservationId": r["id"],
        "OwnerId": ACCOUNT,
        "CapacityReservationArn": f"arn:aws:ec2:us-east-1:{ACCOUNT}:capacity-reservation/{r['id']}",
        "InstanceType": r["instance_type"],
        "InstancePlatform": r["platform"],
        "AvailabilityZone": r["zone"],
        "Tenancy": "default",
        "TotalInstanceCount": r["total"],
        "AvailableInstanceCount": r["available"],
        "EbsOptimized": True,
        "State": _reservation_state(r),
        "StartDate": at(r["start"]),
        "EndDateType": "limited" if r["end"] is not None else "unlimited",
        "InstanceMatchCriteria": r["criteria"],
        "CreateDate": at(r["created"]),
        "Tags": [{"Key": k, "Value": v} for k, v in sorted(r["tags"].items())],
        "ReservationType": r["type"],
    }
    if r["end"] is not None:
        out["EndDate"] = at(r["end"])
    return out


def _page(self, items):
    """One page of `items` after NextToken, MaxResults (or /page-size) long."""
    size = self._get_param("MaxResults") or STATE["page_size"]
    start = int(self._get_param("NextToken") or 0)
    if not size:
        return items[start:], None
    size = int(size)
    rest = items[start + size:]
    return items[start:start + size], (str(start + size) if rest else None)


def create_capacity_reservation(self):
    from moto.core.responses import ActionResult

    instance_type = self._get_param("InstanceType")
    platform = self._get_param("InstancePlatform")
    count = self._get_param("InstanceCount")
    zone = self._get_param("AvailabilityZone")
    for name, value in (("InstanceType", instance_type), ("InstancePlatform", platform),
                        ("InstanceCount", count)):
        if not value:
            raise EC2ClientError("MissingParameter",
                                 f"The request must contain the parameter {name}")
    end = self._get_param("EndDate")
    end_epoch = None
    if end:
        from datetime import datetime

        end_epoch = int(datetime.fromisoformat(str(end).replace("Z", "+00:00")).timestamp())
    tags = self._parse_tag_specification().get("capacity-reservation", {})
    with LOCK:
        rid = new_reservation(instance_type, zone, int(count), "default", _now(), end_epoch, tags,
                              platform=platform,
                              criteria=self._get_param("InstanceMatchCriteria") or "open")
        out = _reservation_out(STATE["reservations"][rid])
    return ActionResult({"CapacityReservation": out})


RESERVATION_FILTERS = {"availability-zone": "zone", "instance-type": "instance_type",
                       "instance-match-criteria": "criteria"}


def describe_capacity_reservations(self):
    from moto.core.responses import ActionResult

    ids = [v[0] for k, v in sorted(self.querystring.items())
           if k.startswith("CapacityReservationId.")]
    filters = _filters(self)
    for f in filters:
        if f not in RESERVATION_FILTERS and f not in ("state", "tag-key") \
                and not f.startswith("tag:"):
            raise EC2ClientError("InvalidParameterValue", f"The filter '{f}' is invalid")
    with LOCK:
        for i in ids:
            if i not in STATE["reservations"]:
                raise EC2ClientError("InvalidCapacityReservationId.NotFound",
                                     f"The capacity reservation ID '{i}' does not exist")
        chosen = []
        for rid, r in sorted(STATE["reservations"].items()):
            if ids and rid not in ids:
                continue
            ok = True
            for f, values in filters.items():
                if f in RESERVATION_FILTERS:
                    ok &= r[RESERVATION_FILTERS[f]] in values
                elif f == "state":
                    ok &= _reservation_state(r) in values
                elif f == "tag-key":
                    ok &= any(v in r["tags"] for v in values)
                else:
                    ok &= r["tags"].get(f[4:]) in values
            if ok:
                chosen.append(_reservation_out(r))
    page, token = _page(self, chosen)
    out = {"CapacityReservations": page}
    if token:
        out["NextToken"] = token
    return ActionResult(out)


# instance families DescribeInstanceTopology describes (EC2 User Guide,
# "Prerequisites for Amazon EC2 instance topology")
TOPOLOGY_FAMILIES = {"g6e", "g7e", "hpc6a", "hpc6id", "hpc7a", "hpc7g", "hpc8a", "p3dn", "p4d",
                     "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200", "trn1",
                     "trn1n", "trn2", "trn2u"}


def _node(*parts):
    import hashlib

    return "nn-" + hashlib.sha256("/".join(parts).encode()).hexdigest()[:17]


def describe_instance_topology(self):
    from moto.core.responses import ActionResult
    from moto.ec2.models import ec2_backends

    ids = [v[0] for k, v in sorted(self.querystring.items()) if k.startswith("InstanceId.")]
    if len(ids) > 100:
        raise EC2ClientError("InvalidParameterValue",
                             "DescribeInstanceTopology takes at most 100 instance IDs.")
    filters = _filters(self)
    backend = ec2_backends[self.current_account][self.region]
    if ids:
        instances = []
        for i in ids:
            try:
                instances.append(backend.get_instance(i))
            except Exception:
                raise EC2ClientError("InvalidInstanceID.NotFound",
                                     f"The instance ID '{i}' does not exist")
    else:
        instances = [i for r in backend.all_reservations() for i in r.instances]
    out = []
    for i in sorted(instances, key=lambda i: i.id):
        family = i.instance_type.split(".")[0]
        zone = i._placement.zone
        if i.state != "running" or family not in TOPOLOGY_FAMILIES:
            continue
        if "instance-type" in filters and i.instance_type not in filters["instance-type"]:
            continue
        if "availability-zone" in filters and zone not in filters["availability-zone"]:
            continue
        with LOCK:
            group = STATE["members"].get(i.id)
        out.append({
            "InstanceId": i.id,
            "InstanceType": i.instance_type,
            "NetworkNodes": [_node(zone, "1"), _node(zone, "2"),
                             _node(zone, "3", group or i.id)],
            "AvailabilityZone": zone,
            **({"GroupName": group} if group else {}),
        })
    page, token = _page(self, out)
    result = {"Instances": page}
    if token:
        result["NextToken"] = token
    return ActionResult(result)


def _install_placement_groups():
    from moto.ec2.responses import EC2Response

    EC2Response.create_placement_group = create_placement_group
    EC2Response.describe_placement_groups = describe_placement_groups
    EC2Response.delete_placement_group = delete_placement_group
    EC2Response.create_capacity_reservation = create_capacity_reservation
    EC2Response.describe_capacity_reservations = describe_capacity_reservations
    EC2Response.describe_instance_topology = describe_instance_topology


_install_placement_groups()

_call_action = BaseResponse.call_action


def _profile_roles(account, name):
    from moto.iam.models import iam_backends

    try:
        profile = iam_backends[account][get_partition("us-east-1")].get_instance_profile(name)
    except Exception:
        return []
    return [r.arn for r in profile.roles]


def _instance_tags(account, region, ids):
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[account][region]
    out = {}
    for i in ids:
        try:
            out[i] = {t["key"]: t["value"] for t in backend.describe_tags(filters={"resource-id": [i]})}
        except Exception:
            out[i] = {}
    return out


def call_action(self):
    """Records the call (see the module docstring), then serves it."""
    try:
        action = self._get_action()
        if self.service_name == "ec2":
            params = {k: v for k, v in self.querystring.items()}
        else:
            try:
                params = json.loads(self.body or "{}")
            except Exception:
                params = {}
        entry = {
            "service": self.service_name,
            "action": action,
            "region": self.region,
            "account": self.current_account,
            "path": self.path,
            "params": params,
        }
        if action == "RunInstances":
            name = (params.get("IamInstanceProfile.Name") or [None])[0]
            entry["passedRoles"] = _profile_roles(self.current_account, name) if name else []
        if action == "TerminateInstances":
            ids = [v[0] for k, v in params.items() if k.startswith("InstanceId.")]
            entry["resourceTags"] = _instance_tags(self.current_account, self.region, ids)
        group = (params.get("GroupName") if action == "DeletePlacementGroup"
                 else params.get("Placement.GroupName") if action == "RunInstances" else None)
        if group:
            with LOCK:
                g = STATE["groups"].get(group[0])
                entry["placementGroupTags"] = dict(g["tags"]) if g else {}
        with LOCK:
            STATE["log"].append(entry)
            if action == "TerminateInstances":
                STATE["terminates"] += 1
    except Exception as e:  # the log must never break a call
        with LOCK:
            STATE["log"].append({"service": "?", "action": f"unrecorded: {e}"})
    return _call_action(self)


BaseResponse.call_action = call_action


def public_parameter(name, value):
    from moto.ssm.models import Parameter, ssm_backends
    from moto.core.utils import utcnow

    backend = ssm_backends[ACCOUNT]["us-east-1"]
    versions = backend._parameters[name]
    versions.append(
        Parameter(
            account_id=ACCOUNT,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=utcnow(),
            version=len(versions) + 1,
            data_type="aws:ec2:image",
        )
    )


ACCOUNT = "123456789012"


class Control(BaseHTTPRequestHandler):
    """Injection endpoint: /ice, /throttle, /reset; /calls."""

    def do_GET(self):
        path = urlparse(self.path).path
        with LOCK:
            if path == "/calls":
                body = json.dumps({"runInstances": STATE["calls"],
                                   "terminateInstances": STATE["terminates"]})
            elif path == "/log":
                body = json.dumps(STATE["log"])
            else:
                body = None
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def do_POST(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        body = None
        with LOCK:
            if url.path == "/capacity-block":
                try:
                    tags = dict(t.split("=", 1) for t in query.get("tag", []))
                    rid = new_reservation(query["type"][0], query["zone"][0],
                                          int(query["count"][0]), "capacity-block",
                                          int(query["start"][0]), int(query["end"][0]), tags)
                except (KeyError, ValueError):
                    self.send_response(400)
                    self.end_headers()
                    return
                body = json.dumps({"id": rid})
            elif url.path == "/page-size":
                STATE["page_size"] = int(query.get("n", ["0"])[0]) or None
            elif url.path == "/ice":
                STATE["ice"].update(query.get("offering", []))
            elif url.path == "/fail":
                STATE["fail"] = query.get("code", [None])[0]
            elif url.path == "/throttle":
                STATE["throttle"] = int(query.get("n", ["0"])[0])
            elif url.path == "/reset":
                STATE["ice"].clear()
                STATE["throttle"] = 0
                STATE["calls"] = 0
                STATE["terminates"] = 0
                STATE["fail"] = None
                STATE["log"].clear()
                STATE["spot_role"] = "exists"
                STATE["page_size"] = None
            elif url.path == "/spot-role":
                state = query.get("state", [""])[0]
                if state not in ("absent", "creatable", "exists"):
                    self.send_response(400)
                    self.end_headers()
                    return
                STATE["spot_role"] = state
            elif url.path == "/public-parameter":
                public_parameter(query["name"][0], query["value"][0])
            else:
                self.send_response(404)
                self.end_headers()
                return
            if body is None:
                body = json.dumps({"ice": sorted(STATE["ice"]), "throttle": STATE["throttle"]})
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def main():
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    moto_port = moto.get_host_and_port()[1]
    # the node role's instance profile the tests' NodeClasses name (EC2
    # checks that it exists)
    import boto3
    iam = boto3.client("iam", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{moto_port}",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    iam.create_instance_profile(InstanceProfileName="muster-node")
    iam.create_role(RoleName="muster-node-role", AssumeRolePolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                       "Action": "sts:AssumeRole"}]}))
    iam.add_role_to_instance_profile(InstanceProfileName="muster-node", RoleName="muster-node-role")
    STATE["log"].clear()
    control = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    threading.Thread(target=control.serve_forever, daemon=True).start()
    print(f"moto={moto_port} control={control.server_address[1]}", flush=True)
    sys.stdin.read()
    control.shutdown()
    moto.stop()


if __name__ == "__main__":
    main()
