"""Zonal managed instance groups (MIGs) of the Compute fake, as the Compute
REST reference describes them and as Cluster Autoscaler's GCE provider uses
them (kubernetes/autoscaler `cluster-autoscaler/cloudprovider/gce/`
`autoscaling_gce_client.go`, `gce_manager.go`, commit
55c37cd5eb550756c5ccc5a89e9068d77797e575):

* `createInstances` (body `{"instances": [{"name": N}]}`) answers a DONE
  operation as soon as the request is accepted; the instances are then
  created by the group, which shows its progress per instance in
  `listManagedInstances` (`currentAction` CREATING, then NONE).
  https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/createInstances
* A name already in the group is not created twice (the request is
  accepted and the existing managed instance is left alone).
* A per-instance config's `preservedState.metadata` becomes metadata of
  that instance (and of its recreations), over the template's
  (PerInstanceConfig, same page).
* An instance the group cannot create (stockout, quota) stays CREATING
  with `lastAttempt.errors.errors[{code, message}]`; the group keeps
  retrying ("If the group fails to create this instance, it will try again
  until it is successful", ManagedInstance.currentAction), and each failed
  attempt is listed by `listErrors`.
  https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/listManagedInstances
  https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/listErrors
* `deleteInstances` (body `{"instances": [URL], "skipInstancesOnValidationError": B}`)
  deletes exactly the named instances and lowers `targetSize` by as many;
  with the flag, instances that are not members (or already being deleted)
  are skipped, without it the operation fails and nothing is deleted; a URL
  of another zone or a malformed one always fails it.
  https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/deleteInstances
* `resize` sets `targetSize`; new instances are named
  `<baseInstanceName>-<4 characters>`.
* A managed instance that fails or is deleted outside the group (e.g. a
  preempted Spot VM) is repaired: the group recreates it under the same
  name (a new instance id).
  https://cloud.google.com/compute/docs/instance-groups/about-repair and
  kubernetes/cloud-provider-gcp `cmd/gcp-controller-manager/node_csr_approver.go`
  ("GCE MIGs currently reuse the instance name on new VMs ... after GCE
  Preemptible/Spot VM is preempted").
* Instances the group creates carry `created-by` metadata naming the group
  (`projects/<number>/zones/Z/instanceGroupManagers/NAME`), which Cluster
  Autoscaler reads (`createIgmRef`) and the CSR approver takes as a hint.

Simplified: time does not pass in the fake; pending actions complete at the
next request the fake serves (unless the `hold` knob is on). Recreation
keeps the old (TERMINATED) instance until the new one can be made.
"""

import copy
import hashlib

PROJECT_NUMBERS = {}


def project_number(project):
    """A stable stand-in for the project's number."""
    if project not in PROJECT_NUMBERS:
        PROJECT_NUMBERS[project] = str(int(hashlib.sha1(project.encode()).hexdigest()[:10], 16) % 10**12).rjust(12, "1")
    return PROJECT_NUMBERS[project]


def compute_url(project, scope, collection, name):
    return f"https://www.googleapis.com/compute/v1/projects/{project}/{scope}/{collection}/{name}"


def parse_instance_url(url):
    """(project or None, zone or None, name) of an instance URL or path."""
    segs = [s for s in url.split("?")[0].split("/") if s]
    name = segs[-1] if segs else ""
    project = zone = None
    if "projects" in segs:
        i = segs.index("projects")
        project = segs[i + 1] if i + 1 < len(segs) else None
    if "zones" in segs:
        i = segs.index("zones")
        zone = segs[i + 1] if i + 1 < len(segs) else None
    return project, zone, name


class Member:
    """A managed instance: the group's intent for one instance name."""

    def __init__(self, name, action="CREATING", metadata=None):
        self.name = name
        self.action = action
        self.metadata = dict(metadata or {})  # preservedState.metadata of its per-instance config
        self.errors = None  # lastAttempt errors: [{code, message}]
        self.instance_id = None


class Mig:
    def __init__(self, project, zone, name, base, template_url, public, fixture=False, pool=None):
        self.project, self.zone, self.name = project, zone, name
        self.base = base
        self.template_url = template_url
        self.public = public  # the resource dict served by GET
        self.fixture = fixture
        self.pool = pool
        self.members = {}  # name -> Member, in creation order
        self.requests = {}  # name -> resize.Request, in creation order
        self.errors = []  # listErrors items
        self.target = int(public.get("targetSize", 0)) if not fixture else 0
        self.touched = not fixture
        self.seq = 0

    @property
    def url(self):
        return compute_url(self.project, f"zones/{self.zone}", "instanceGroupManagers", self.name)

    def counts(self):
        keys = ["none", "creating", "creatingWithoutRetries", "verifying", "recreating", "deleting",
                "abandoning", "restarting", "refreshing", "resuming", "starting", "stopping", "suspending"]
        c = dict.fromkeys(keys, 0)
        for m in self.members.values():
            k = {"NONE": "none", "CREATING": "creating", "RECREATING": "recreating",
                 "DELETING": "deleting"}.get(m.action, "none")
            c[k] += 1
        return c

    def refresh(self):
        """Brings the served resource up to date (not for untouched fixture groups)."""
        if not self.touched:
            return
        c = self.counts()
        stable = all(m.action == "NONE" for m in self.members.values())
        self.public.update({
            "targetSize": self.target,
            "currentActions": c,
            "status": {"isStable": stable, "versionTarget": {"isReached": True},
                       "allInstancesConfig": {"effective": True}, "stateful": {"hasStatefulConfig": False}},
        })
        self.public.setdefault("listManagedInstancesResults", "PAGELESS")
