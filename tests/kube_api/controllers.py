"""Stand-ins for kube-controller-manager's Job and disruption controllers and
for the kubelet's end of graceful pod deletion, run inside the API test
server so they react to a write before the writer's next request.

Upstream (kubernetes/kubernetes):
- pkg/controller/job/job_controller.go (syncJob, manageJob): pods are created
  from the template with a controller ownerReference while the Job is not
  suspended; `startTime` is set when the Job first runs and reset when it is
  resumed from suspension (also the documented meaning of
  JobStatus.startTime in staging/src/k8s.io/api/batch/v1/types.go); the
  controller never clears it; suspending deletes the active pods and sets
  the Suspended condition; active / ready / succeeded / failed / terminating
  are counted from the owned pods; when `completions` pods succeeded the Job
  gets SuccessCriteriaMet and Complete (with completionTime), when more than
  `backoffLimit` failed it gets FailureTarget and Failed; active pods of a
  finished Job are deleted. Pod replacement follows TerminatingOrFailed (a
  terminating pod is replaced at once).
- pkg/controller/disruption/disruption.go: every PodDisruptionBudget's status
  (currentHealthy = Ready pods not being deleted and not in disruptedPods,
  desiredHealthy, expectedPods, disruptionsAllowed, observedGeneration, the
  DisruptionAllowed condition) is kept current; entries of disruptedPods go
  when the pod is deleted or after two minutes. An integer minAvailable
  counts the matching pods; maxUnavailable and percentages need the scale of
  the pods' controllers (Deployments, ReplicaSets, StatefulSets), which this
  stand-in does not look up (Deployments and ReplicaSets are not served), so
  such a budget fails safe with 0 disruptions, as the real controller does
  for pods whose controller has no scale (Jobs).
- the kubelet ends a graceful deletion by deleting the pod with grace 0 once
  its containers stopped; here that happens after the pod's grace period,
  capped at --pod-termination-secs.

The JobSet controller's stand-in (jobset_controller.py) runs here too, once
the JobSet CRD is installed, and so do the StatefulSet controller's
(statefulset_controller.py) and the third-party workload stand-ins
(workload_controllers.py).
"""

import copy
import queue
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

from apierrors import ApiError
from job_rules import selector_matches
import jobset_controller


def now_rfc3339(delta=0.0):
    return (datetime.now(timezone.utc) + timedelta(seconds=delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond_true(obj, ctype):
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def pod_ready(pod):
    return cond_true(pod, "Ready")


def pod_terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def set_condition(conds, ctype, status, reason, message):
    """Sets a condition; lastTransitionTime moves only when the status does."""
    for c in conds:
        if c.get("type") == ctype:
            if c.get("status") != status:
                c["lastTransitionTime"] = now_rfc3339()
            c.update({"status": status, "reason": reason, "message": message})
            c.setdefault("lastProbeTime", c.get("lastTransitionTime"))
            return
    t = now_rfc3339()
    conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                  "lastProbeTime": t, "lastTransitionTime": t})


class Controllers:
    def __init__(self, store, pod_termination_secs=0.5):
        self.store = store
        self.pod_termination_secs = pod_termination_secs
        self.queue = []
        self.draining = False
        self.terminating = {}  # (ns, name, uid) -> monotonic due time
        self.jobsets = jobset_controller.JobSetController(store, now_rfc3339)
        # stand-ins for third-party workload controllers (kinds served once their CRDs are installed)
        import workload_controllers
        self.workloads = {w.kind: w for w in workload_controllers.stand_ins(self)}
        self.finished = {}  # Job uid -> {"Succeeded": pod uids, "Failed": pod uids} counted
        self.creations = queue.Queue()  # pods created through the admission webhooks
        self.pending = set()  # (ns, name) of those not created yet

    # resources
    def _r(self, group, plural):
        version = "v1"
        return self.store.find(group, version, plural)

    def start(self):
        threading.Thread(target=self._kubelet_loop, daemon=True).start()
        threading.Thread(target=self._creation_loop, daemon=True).start()

    # -- pods a controller creates through the admission webhooks

    def create_admitted(self, r, ns, body, items):
        """Creates the named object `body` as a controller's request to
        kube-apiserver would: through the mutating webhooks that match it,
        which may call this server back, so off the store's lock, on a thread
        of its own. A creation already on its way is not asked for twice;
        a refused one is logged and `items` (the controller's queue items for
        the object) synced again half a second later, as a controller retries."""
        key = (ns, body["metadata"]["name"])
        if key in self.pending:
            return
        self.pending.add(key)
        self.creations.put((r, ns, copy.deepcopy(body), list(items)))

    def pending_creation(self, ns, name):
        return (ns, name) in self.pending

    def _creation_loop(self):
        while True:
            r, ns, body, items = self.creations.get()
            key = (ns, body["metadata"]["name"])
            retry = False
            try:
                body["metadata"].setdefault("namespace", ns)
                obj = self.store.webhooks.admit(r, ns, body, None, "CREATE", name=key[1])
                self.store.create(r, ns, obj)
            except ApiError as e:
                retry = e.code != 409
                sys.stderr.write(f"apiserver: creating {ns}/{key[1]} for a controller: {e.message}\n")
            finally:
                with self.store.cond:
                    self.pending.discard(key)
            if retry:
                time.sleep(0.5)
                with self.store.cond:
                    self.queue.extend(items)
                    self._drain()

    # -- events from the store (called with the store's lock held, after a commit)

    def on_write(self, r, obj):
        key = r.storage_key
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == ("batch", "jobs"):
            self.queue.append(("job", ns, meta.get("name")))
            owner = self.jobsets.owner_of(obj)
            if owner:
                self.queue.append(("jobset", ns, owner))
        elif key == jobset_controller.KEY:
            self.queue.append(("jobset", ns, meta.get("name")))
        elif key == ("", "pods"):
            for ref in meta.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "Job":
                    self.queue.append(("job", ns, ref.get("name")))
            self.queue.append(("pdb", ns, None))
        elif key == ("policy", "poddisruptionbudgets"):
            self.queue.append(("pdb", ns, None))
        for w in self.workloads.values():
            self.queue.extend(w.enqueue(key, obj))
        self._drain()

    def _drain(self):
        """Syncs the queued items (with the store's lock held)."""
        if self.draining:
            return
        self.draining = True
        try:
            for _ in range(10000):
                if not self.queue:
                    break
                item = self.queue.pop(0)
                if item in self.queue:
                    continue  # a later copy will do
                kind, ns, name = item
                try:
                    if kind == "job":
                        self.sync_job(ns, name)
                    elif kind == "jobset":
                        self.jobsets.sync(ns, name)
                    elif kind in self.workloads:
                        self.workloads[kind].sync(ns, name)
                    else:
                        self.sync_pdbs(ns)
                except ApiError as e:
                    # a controller's refused write is its own failure, never the
                    # request's that woke it; it retries on the next event
                    sys.stderr.write(f"apiserver: {kind} controller, {ns}/{name}: {e.message}\n")
        finally:
            self.queue.clear()
            self.draining = False

    # -- Job controller

    def sync_job(self, ns, name):
        jobs, pods = self._r("batch", "jobs"), self._r("", "pods")
        job = self.store.objects[jobs.storage_key].get((ns, name))
        if job is None or (job.get("metadata") or {}).get("deletionTimestamp"):
            return
        uid = job["metadata"]["uid"]
        spec = job.get("spec") or {}
        owned = [p for (pns, _), p in list(self.store.objects[pods.storage_key].items())
                 if pns == ns and any(ref.get("uid") == uid and ref.get("controller")
                                      for ref in p["metadata"].get("ownerReferences") or [])]
        status = copy.deepcopy(job.get("status") or {})
        conds = status.setdefault("conditions", [])
        active = [p for p in owned if not pod_terminal(p) and not p["metadata"].get("deletionTimestamp")]
        # a finished pod stays counted once it is gone (evicted, deleted with
        # its node): the real controller counts it before it lets the pod go
        # (pod-tracking finalizers), so the counters never fall
        counted = self.finished.setdefault(uid, {"Succeeded": set(), "Failed": set()})
        for p in owned:
            phase = (p.get("status") or {}).get("phase")
            if phase in counted:
                counted[phase].add(p["metadata"]["uid"])
        succeeded, failed = len(counted["Succeeded"]), len(counted["Failed"])
        finished = cond_true(job, "Complete") or cond_true(job, "Failed")
        if not finished and not spec.get("suspend"):
            completions = spec.get("completions")
            if (completions is not None and succeeded >= completions) or (
                    completions is None and succeeded > 0 and not active):
                status.setdefault("startTime", now_rfc3339())
                set_condition(conds, "SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods")
                set_condition(conds, "Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")
                status["completionTime"] = now_rfc3339()
                finished = True
            elif failed > spec.get("backoffLimit", 6):
                status.setdefault("startTime", now_rfc3339())
                set_condition(conds, "FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
                set_condition(conds, "Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
                finished = True
        if finished or spec.get("suspend"):
            for p in active:
                self._delete_pod(pods, ns, p["metadata"]["name"])
            active = []
            if spec.get("suspend") and not finished:
                set_condition(conds, "Suspended", "True", "JobSuspended", "Job suspended")
        else:
            if cond_true(job, "Suspended"):
                set_condition(conds, "Suspended", "False", "JobResumed", "Job resumed")
                status["startTime"] = now_rfc3339()  # reset on resume
            status.setdefault("startTime", now_rfc3339())
            want = spec.get("parallelism", 1)
            if spec.get("completions") is not None:
                want = min(want, spec["completions"] - succeeded)
            for _ in range(max(0, want - len(active))):
                active.append(self._create_pod(pods, job))
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if pod_ready(p))
        status["succeeded"] = succeeded
        status["failed"] = failed
        status["terminating"] = sum(1 for p in owned if p["metadata"].get("deletionTimestamp") and not pod_terminal(p))
        status.setdefault("uncountedTerminatedPods", {})
        if not conds:
            status.pop("conditions")
        if status != (job.get("status") or {}):
            new = copy.deepcopy(job)
            new["status"] = status
            self.store.update(jobs, ns, name, new, "status", check_rv=False)

    def _create_pod(self, pods, job):
        meta = job["metadata"]
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        tmeta = template.get("metadata") or {}
        pod = {
            "metadata": {
                "generateName": meta["name"] + "-",
                "labels": tmeta.get("labels") or {},
                "annotations": tmeta.get("annotations") or {},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": template.get("spec") or {},
        }
        if not pod["metadata"]["annotations"]:
            pod["metadata"].pop("annotations")
        return self.store.create(pods, meta.get("namespace"), pod)

    def _delete_pod(self, pods, ns, name):
        try:
            self.store.delete(pods, ns, name, None)
        except ApiError:
            pass

    # -- disruption controller

    def sync_pdbs(self, ns):
        pdbs, pods = self._r("policy", "poddisruptionbudgets"), self._r("", "pods")
        budgets = [(name, pdb) for (pns, name), pdb in self.store.objects[pdbs.storage_key].items() if pns == ns]
        if not budgets:
            return
        in_ns = [p for (pns, _), p in self.store.objects[pods.storage_key].items() if pns == ns]
        for name, pdb in budgets:
            status = self.pdb_status(pdb, in_ns)
            if status != pdb.get("status"):
                new = copy.deepcopy(pdb)
                new["status"] = status
                self.store.update(pdbs, ns, name, new, "status", check_rv=False)

    def pdb_status(self, pdb, in_ns):
        spec = pdb.get("spec") or {}
        old = pdb.get("status") or {}
        matching = [p for p in in_ns if selector_matches(spec.get("selector"),
                                                          p["metadata"].get("labels") or {})]
        present = {p["metadata"]["name"]: p for p in matching}
        disrupted = {}
        for pname, when in (old.get("disruptedPods") or {}).items():
            p = present.get(pname)
            if p is None or p["metadata"].get("deletionTimestamp"):
                continue
            try:
                at = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
            except ValueError:
                continue
            if datetime.now(timezone.utc) - at < timedelta(minutes=2):
                disrupted[pname] = when
        healthy = sum(1 for p in matching if pod_ready(p) and not p["metadata"].get("deletionTimestamp")
                      and p["metadata"]["name"] not in disrupted)
        error = None
        min_av, max_un = spec.get("minAvailable"), spec.get("maxUnavailable")
        if isinstance(min_av, int):
            expected, desired = len(matching), min_av
        elif not matching:
            expected, desired = 0, 0
        else:
            expected, desired = 0, 0
            error = "found no controllers for pod with a scale subresource"
        allowed = 0 if error else max(0, healthy - desired)
        conds = copy.deepcopy(old.get("conditions") or [])
        if error:
            set_condition(conds, "DisruptionAllowed", "False", "SyncFailed", error)
        elif allowed > 0:
            set_condition(conds, "DisruptionAllowed", "True", "SufficientPods", "")
        else:
            set_condition(conds, "DisruptionAllowed", "False", "InsufficientPods", "")
        for c in conds:
            c.pop("lastProbeTime", None)
            c["observedGeneration"] = pdb["metadata"].get("generation", 1)
        status = {"observedGeneration": pdb["metadata"].get("generation", 1),
                  "disruptionsAllowed": allowed, "currentHealthy": healthy,
                  "desiredHealthy": desired, "expectedPods": expected, "conditions": conds}
        if disrupted:
            status["disruptedPods"] = disrupted
        return status

    # -- the kubelet's end of graceful deletion

    def schedule_termination(self, ns, name, uid, grace):
        self.terminating[(ns, name, uid)] = time.monotonic() + min(float(grace), self.pod_termination_secs)

    def _kubelet_loop(self):
        while True:
            time.sleep(0.05)
            now = time.monotonic()
            due = [k for k, t in list(self.terminating.items()) if t <= now]
            if not due:
                continue
            with self.store.cond:
                pods = self._r("", "pods")
                for k in due:
                    self.terminating.pop(k, None)
                    ns, name, uid = k
                    pod = self.store.objects[pods.storage_key].get((ns, name))
                    if pod is None or pod["metadata"].get("uid") != uid:
                        continue
                    try:
                        self.store.finish_graceful_delete(pods, ns, name)
                    except ApiError as e:
                        sys.stderr.write(f"apiserver: kubelet, {ns}/{name}: {e.message}\n")
