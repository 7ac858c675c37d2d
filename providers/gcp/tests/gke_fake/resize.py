"""Resize requests of a managed instance group (`instanceGroupManagerResizeRequests`):
how Compute grants flex-start (Dynamic Workload Scheduler) capacity to a
group, every VM of one request at once or none. Pure rules and the
resource as `get` shows it; the state lives on the group (`Mig.requests`)
and `world.py` acts on it.

Sources:

* InstanceGroupManagerResizeRequest:
  https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagerResizeRequests
  - `name`: "must be 1-63 characters long, and comply with RFC1035";
  - `instances` (per-instance configs with names) "cannot be used together
    with 'resize_by'"; `resizeBy`: the number of VMs to create;
  - `state`: CREATING ("being created and may still fail creation"),
    ACCEPTED ("accepted for provisioning when the capacity becomes
    available"), SUCCEEDED, FAILED ("any VMs that were created during
    provisioning are rolled back and removed from the MIG"), CANCELLED;
  - `cancel`: "only possible for requests that are in accepted state";
    `delete`: "Deletes the specified, inactive resize request".
* About resize requests in a MIG:
  https://cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig
  - VMs of a request are created all at once when resources are available;
  - `requestedRunDuration` "must be between 10 minutes and seven days".
* A group whose template is a flex-start one: the resize request examples
  (Terraform / Pulumi `ResizeRequest`, "a template compatible with DWS
  resize requests": `scheduling.provisioningModel: FLEX_START`,
  `instanceTerminationAction: DELETE`). The fake refuses a request on any
  other group; that Compute refuses it the same way is inferred from those
  examples, not read as a stated rule.

Simplified: CREATING turns ACCEPTED at the next request the fake serves;
an ACCEPTED request waits until a test grants or fails it (knobs); error
texts are the fake's own.
"""

import re

NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
MIN_RUN_SECS = 10 * 60
MAX_RUN_SECS = 7 * 24 * 3600
ACTIVE = {"CREATING", "ACCEPTED"}


class Refused(Exception):
    """A request Compute answers with an HTTP error: code, reason, message."""

    def __init__(self, code, reason, message):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def run_secs(value):
    """`requestedRunDuration` ({"seconds": int64 as string or number, "nanos"}) in seconds."""
    if not isinstance(value, dict) or "seconds" not in value:
        raise Refused(400, "required", "Required field 'resource.requestedRunDuration' not specified")
    try:
        return int(value["seconds"])
    except (TypeError, ValueError):
        raise Refused(400, "invalid", f"Invalid value for field 'resource.requestedRunDuration.seconds': "
                                      f"{value['seconds']!r}.")


def validate(body, *, flex_start_template):
    """Checks an insert body; returns (name, instance configs or None,
    resizeBy or None, run seconds) or raises Refused."""
    body = body or {}
    name = body.get("name") or ""
    if not NAME.match(name):
        raise Refused(400, "invalid", f"Invalid value for field 'resource.name': '{name}'. Must be a match of "
                                      "regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")
    instances = body.get("instances") or None
    resize_by = body.get("resizeBy")
    if (instances is None) == (resize_by is None):
        raise Refused(400, "invalid", "Exactly one of 'resource.resizeBy' and 'resource.instances' must be "
                                      "specified.")
    if resize_by is not None and int(resize_by) < 1:
        raise Refused(400, "invalid", f"Invalid value for field 'resource.resizeBy': {resize_by}. Must be "
                                      "greater than 0.")
    if instances is not None:
        names = [i.get("name") for i in instances]
        if not all(names) or len(set(names)) != len(names):
            raise Refused(400, "invalid", "Invalid value for field 'resource.instances': every instance needs "
                                          "a name, each name once.")
    secs = run_secs(body.get("requestedRunDuration"))
    if not MIN_RUN_SECS <= secs <= MAX_RUN_SECS:
        raise Refused(400, "invalid", f"Invalid value for field 'resource.requestedRunDuration': {secs}s. "
                                      "Must be between 10 minutes and 7 days.")
    if not flex_start_template:
        raise Refused(400, "conditionNotMet", "The instance group manager's instance template must use the "
                                              "FLEX_START provisioning model for a resize request.")
    return name, instances, (int(resize_by) if resize_by is not None else None), secs


def may_cancel(state):
    if state != "ACCEPTED":
        raise Refused(400, "conditionNotMet", f"A resize request in state {state} cannot be cancelled: only an "
                                              "ACCEPTED one can.")


def may_delete(state):
    if state in ACTIVE:
        raise Refused(400, "conditionNotMet", f"A resize request in state {state} is still active: cancel it "
                                              "first.")


class Request:
    """One resize request of a group."""

    def __init__(self, name, instances, resize_by, secs, rid, created, zone_url, self_link):
        self.name = name
        self.instances = instances  # [{name, preservedState?}] or None
        self.resize_by = resize_by
        self.secs = secs
        self.state = "CREATING"
        self.error = None  # {code, message}
        self.id, self.created, self.zone_url, self.self_link = rid, created, zone_url, self_link

    def count(self):
        return len(self.instances) if self.instances is not None else self.resize_by

    def resource(self):
        r = {"kind": "compute#instanceGroupManagerResizeRequest", "id": self.id, "name": self.name,
             "creationTimestamp": self.created, "zone": self.zone_url, "selfLink": self.self_link,
             "requestedRunDuration": {"seconds": str(self.secs)}, "state": self.state, "status": {}}
        if self.instances is not None:
            r["instances"] = [dict(i) for i in self.instances]
        else:
            r["resizeBy"] = self.resize_by
        if self.error:
            r["status"]["error"] = {"errors": [dict(self.error)]}
        return r
