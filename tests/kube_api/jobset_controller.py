"""A stand-in for the JobSet controller (kubernetes-sigs/jobset), run inside
the API test server once the JobSet CRD (crds/jobset.yaml) is installed.

Upstream (kubernetes-sigs/jobset, pkg/controllers/jobset_controller.go):
- Reconcile: a JobSet whose spec.managedBy names another controller is left
  alone; child Jobs are those with a controller ownerReference to the JobSet,
  sorted by their restart-attempt label into the current run (active,
  successful, failed) and previous runs (deleted);
- constructJob: one Job per replicated job and index, named
  `<jobset>-<replicatedJob>-<index>`, with the replicated job's Job template,
  the JobSet's labels and annotations (jobset-name, replicatedjob-name,
  restart-attempt, replicatedjob-replicas, job-index) on the Job and its pod
  template, and `spec.suspend` equal to the JobSet's;
- suspendJobs: a suspended JobSet suspends every active child Job (the Job
  controller then deletes their pods) and sets Suspended=True;
- resumeJob: resuming clears a child Job's status.startTime first (through
  the status), then merges the replicated job's pod template labels,
  annotations, node selector, tolerations and scheduling gates into the
  child's (maps merged, slices appended without duplicates; affinity is
  never carried over) and unsuspends it; the JobSet gets Suspended=False;
- executeSuccessPolicy (success_policy.go): with operator All (the default)
  every Job of the target replicated jobs (all, when none are named) must
  succeed, with Any one; then Completed=True and terminalState Completed;
- executeFailurePolicy (failure_policy.go): a failed child Job restarts the
  JobSet (status.restarts + 1, the current Jobs deleted and recreated) while
  restarts < failurePolicy.maxRestarts (default 0), else Failed=True and
  terminalState Failed;
- a finished JobSet's active child Jobs are deleted;
- calculateReplicatedJobStatuses: replicatedJobsStatus counts per
  replicated job the ready (succeeded + ready pods >= min(parallelism,
  completions)), active, suspended, succeeded and failed Jobs;
- reconcileReplicatedJobs with startup_policy.go and depends_on.go: the
  replicated jobs are gone through in their order; one with dependsOn is
  skipped until the named replicated job reached the status named
  (dependencyReachedStatus: Complete = all its Jobs succeeded, Ready = all
  ready, failed or succeeded); with startupPolicyOrder InOrder on a JobSet
  that is not suspended, a replicated job whose Jobs all started
  (allReplicasStarted: ready + failed + succeeded = replicas) is passed over
  and the first that has not is the last whose Jobs are created
  (StartupPolicyInProgress=True until every one started, then
  StartupPolicyCompleted=True). A suspended JobSet's Jobs are all created,
  suspended;
- resumeJobsIfNecessary: on resume the same rules hold replicated job by
  replicated job: Jobs of a replicated job whose dependency is not reached
  stay suspended, and with InOrder only the first replicated job not all
  started is resumed (Suspended=False is set only once every replicated
  job was gone through).
Not emulated: network/headless Services, coordinator, TTL, exclusive
placement, failure policy rules.
"""

import copy

from apierrors import ApiError

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
KEY = (GROUP, PLURAL)

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
MANAGED_BY_DEFAULT = "jobset.sigs.k8s.io/jobset-controller"


def _cond_true(obj, ctype):
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _set_condition(conds, ctype, status, reason, message, now):
    for c in conds:
        if c.get("type") == ctype:
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update({"status": status, "reason": reason, "message": message})
            return
    conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                  "lastTransitionTime": now})


def _job_ready(job):
    spec, st = job.get("spec") or {}, job.get("status") or {}
    pods = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    if spec.get("completions") is not None and int(spec["completions"]) < pods:
        pods = int(spec["completions"])
    return int(st.get("succeeded") or 0) + int(st.get("ready") or 0) >= pods


def _merge_maps(into, src):
    out = dict(into or {})
    out.update(src or {})
    return out


def _merge_slices(into, src):
    out = list(into or [])
    for x in src or []:
        if x not in out:
            out.append(x)
    return out


class JobSetController:
    def __init__(self, store, now):
        self.store = store
        self.now = now

    def served(self):
        return KEY in self.store.objects

    def owner_of(self, job):
        for ref in (job.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "JobSet":
                return ref.get("name")
        return None

    def sync(self, ns, name):
        if not self.served():
            return
        r = self.store.find(GROUP, VERSION, PLURAL)
        jobs = self.store.find("batch", "v1", "jobs")
        js = self.store.objects[KEY].get((ns, name))
        if js is None or js["metadata"].get("deletionTimestamp"):
            return
        spec = js.get("spec") or {}
        if spec.get("managedBy") not in (None, "", MANAGED_BY_DEFAULT):
            return
        uid = js["metadata"]["uid"]
        status = copy.deepcopy(js.get("status") or {})
        restarts = int(status.get("restarts") or 0)
        owned = [j for (jns, _), j in list(self.store.objects[jobs.storage_key].items())
                 if jns == ns and any(ref.get("uid") == uid and ref.get("controller")
                                      for ref in j["metadata"].get("ownerReferences") or [])]
        current, previous = [], []
        for j in owned:
            attempt = int((j["metadata"].get("labels") or {}).get(RESTART_ATTEMPT, "0"))
            (previous if attempt < restarts else current).append(j)
        successful = [j for j in current if _cond_true(j, "Complete")]
        failed = [j for j in current if _cond_true(j, "Failed")]
        active = [j for j in current if j not in successful and j not in failed]
        conds = status.setdefault("conditions", [])
        status["replicatedJobsStatus"] = self._rjob_statuses(spec, active, successful, failed)
        finished = _cond_true(js, "Completed") or _cond_true(js, "Failed")
        if finished:
            for j in active:
                self._delete(jobs, ns, j)
            return self._write_status(r, js, status)
        for j in previous:
            self._delete(jobs, ns, j)
        if failed:
            max_restarts = int((spec.get("failurePolicy") or {}).get("maxRestarts") or 0)
            if restarts < max_restarts:
                status["restarts"] = restarts + 1
                status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
            else:
                _set_condition(conds, "Failed", "True", "FailedJobs",
                               "jobset failed due to reaching max number of restarts", self.now())
                status["terminalState"] = "Failed"
            return self._write_status(r, js, status)
        if successful and self._succeeded(spec, successful):
            _set_condition(conds, "Completed", "True", "AllJobsCompleted", "jobset completed successfully",
                           self.now())
            status["terminalState"] = "Completed"
            return self._write_status(r, js, status)
        self._reconcile_replicated_jobs(js, jobs, ns, owned, restarts, status)
        templates = {rj["name"]: ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
                     for rj in spec.get("replicatedJobs") or []}
        if spec.get("suspend"):
            for j in active:
                if not (j.get("spec") or {}).get("suspend"):
                    new = copy.deepcopy(j)
                    new["spec"]["suspend"] = True
                    self.store.update(jobs, ns, j["metadata"]["name"], new, None, check_rv=False)
            _set_condition(conds, "Suspended", "True", "SuspendedJobs", "jobset is suspended", self.now())
        else:
            self._resume_jobs_if_necessary(js, jobs, ns, active, templates, status)
        return self._write_status(r, js, status)

    # -- startup order (startup_policy.go, depends_on.go)

    @staticmethod
    def _in_order(spec):
        return ((spec.get("startupPolicy") or {}).get("startupPolicyOrder")) == "InOrder"

    @staticmethod
    def _rjob_status(status, name):
        return next((s for s in status.get("replicatedJobsStatus") or [] if s.get("name") == name), None)

    def _all_started(self, rjob, status):
        """allReplicasStarted: every Job of the replicated job is ready,
        succeeded or failed."""
        st = self._rjob_status(status, rjob["name"]) or {}
        return int(rjob.get("replicas", 1)) == st.get("failed", 0) + st.get("ready", 0) + st.get("succeeded", 0)

    def _dependency_reached(self, rjob, seen, status):
        """dependencyReachedStatus: Complete wants every Job of the named
        replicated job succeeded, Ready every one ready, failed or
        succeeded; `seen` holds the replicas of the replicated jobs listed so
        far (a later one counts 0, as upstream's map lookup does)."""
        for dep in rjob.get("dependsOn") or []:
            st = self._rjob_status(status, dep.get("name"))
            if st is None:
                return False
            want = seen.get(dep.get("name"), 0)
            if dep.get("status") == "Complete" and want != st.get("succeeded", 0):
                return False
            if dep.get("status") == "Ready" and want != st.get("failed", 0) + st.get("ready", 0) + st.get("succeeded", 0):
                return False
        return True

    def _startup_condition(self, conds, done):
        """The StartupPolicyInProgress / StartupPolicyCompleted conditions,
        each replacing the other (exclusiveConditions)."""
        if done:
            ctype, other = "StartupPolicyCompleted", "StartupPolicyInProgress"
            reason, message = "InOrderStartupPolicyCompleted", "in order startup policy has completed"
        else:
            ctype, other = "StartupPolicyInProgress", "StartupPolicyCompleted"
            reason, message = "InOrderStartupPolicyInProgress", "in order startup policy is in progress"
        conds[:] = [c for c in conds if c.get("type") != other]
        _set_condition(conds, ctype, "True", reason, message, self.now())

    def _reconcile_replicated_jobs(self, js, jobs, ns, owned, restarts, status):
        """reconcileReplicatedJobs: the missing Jobs of each replicated job,
        in order; one whose dependsOn is not reached is skipped; with
        InOrder (and the JobSet not suspended) the first replicated job not
        all started is the last one created this time."""
        spec = js.get("spec") or {}
        name = js["metadata"]["name"]
        suspended = bool(spec.get("suspend"))
        in_order = self._in_order(spec)
        existing = {j["metadata"]["name"] for j in owned}
        seen = {}
        conds = status.setdefault("conditions", [])
        for rjob in spec.get("replicatedJobs") or []:
            seen[rjob["name"]] = int(rjob.get("replicas", 1))
            if not self._dependency_reached(rjob, seen, status):
                continue
            if not suspended and in_order and self._all_started(rjob, status):
                continue
            for idx in range(int(rjob.get("replicas", 1))):
                jname = f"{name}-{rjob['name']}-{idx}"
                if jname not in existing:
                    try:
                        self.store.create(jobs, ns, self._construct(js, rjob, idx, restarts))
                    except ApiError:
                        pass
            if not suspended and in_order:
                self._startup_condition(conds, False)
                return
        if not suspended and in_order:
            self._startup_condition(conds, True)

    def _resume_jobs_if_necessary(self, js, jobs, ns, active, templates, status):
        """resumeJobsIfNecessary: the suspended Jobs are resumed replicated
        job by replicated job, under the same dependsOn and InOrder rules;
        Suspended=False once every replicated job was gone through."""
        spec = js.get("spec") or {}
        in_order = self._in_order(spec)
        conds = status.setdefault("conditions", [])
        seen = {}
        for rjob in spec.get("replicatedJobs") or []:
            seen[rjob["name"]] = int(rjob.get("replicas", 1))
            if not self._dependency_reached(rjob, seen, status):
                continue
            if in_order and self._all_started(rjob, status):
                continue
            for j in active:
                if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME) == rjob["name"] and (
                        j.get("spec") or {}).get("suspend"):
                    self._resume(jobs, ns, j, templates)
            if in_order:
                self._startup_condition(conds, False)
                return
        _set_condition(conds, "Suspended", "False", "ResumeJobs", "jobset is resumed", self.now())

    def _succeeded(self, spec, successful):
        policy = spec.get("successPolicy") or {}
        targets = policy.get("targetReplicatedJobs") or [rj["name"] for rj in spec.get("replicatedJobs") or []]
        done = [j for j in successful
                if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME) in targets]
        if policy.get("operator", "All") == "Any":
            return len(done) > 0
        want = sum(int(rj.get("replicas", 1)) for rj in spec.get("replicatedJobs") or [] if rj["name"] in targets)
        return len(done) >= want

    def _rjob_statuses(self, spec, active, successful, failed):
        """calculateReplicatedJobStatuses: an active Job is ready once its
        succeeded + ready pods reach min(parallelism, completions)."""
        out = []
        for rjob in spec.get("replicatedJobs") or []:
            mine = lambda js: [j for j in js if (j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME) == rjob["name"]]
            out.append({
                "name": rjob["name"],
                "ready": sum(1 for j in mine(active) if _job_ready(j)),
                "succeeded": len(mine(successful)),
                "failed": len(mine(failed)),
                "active": sum(1 for j in mine(active) if int((j.get("status") or {}).get("active") or 0) > 0),
                "suspended": sum(1 for j in mine(active) if (j.get("spec") or {}).get("suspend")),
            })
        return out

    def _construct(self, js, rjob, idx, restarts):
        meta = js["metadata"]
        template = copy.deepcopy(rjob.get("template") or {})
        tmeta = template.get("metadata") or {}
        labels = {
            JOBSET_NAME: meta["name"],
            REPLICATED_JOB_NAME: rjob["name"],
            RESTART_ATTEMPT: str(restarts),
            REPLICATED_JOB_REPLICAS: str(int(rjob.get("replicas", 1))),
            JOB_INDEX: str(idx),
        }
        jspec = template.get("spec") or {}
        pt = jspec.setdefault("template", {})
        pmeta = pt.setdefault("metadata", {})
        pmeta["labels"] = _merge_maps(pmeta.get("labels"), labels)
        pmeta["annotations"] = _merge_maps(pmeta.get("annotations"), labels)
        jspec["suspend"] = bool((js.get("spec") or {}).get("suspend"))
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{meta['name']}-{rjob['name']}-{idx}",
                "labels": _merge_maps(tmeta.get("labels"), labels),
                "annotations": _merge_maps(tmeta.get("annotations"), labels),
                "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "JobSet", "name": meta["name"],
                                     "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": jspec,
        }

    def _resume(self, jobs, ns, job, templates):
        name = job["metadata"]["name"]
        if (job.get("status") or {}).get("startTime"):
            st = copy.deepcopy(job)
            st["status"].pop("startTime", None)
            job, _ = self.store.update(jobs, ns, name, st, "status", check_rv=False)
        new = copy.deepcopy(job)
        rname = (new["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME)
        src = templates.get(rname) or {}
        smeta, sspec = src.get("metadata") or {}, src.get("spec") or {}
        t = new["spec"].setdefault("template", {})
        tmeta, tspec = t.setdefault("metadata", {}), t.setdefault("spec", {})
        tmeta["labels"] = _merge_maps(tmeta.get("labels"), smeta.get("labels"))
        tmeta["annotations"] = _merge_maps(tmeta.get("annotations"), smeta.get("annotations"))
        for field, merge in (("nodeSelector", _merge_maps), ("tolerations", _merge_slices),
                             ("schedulingGates", _merge_slices)):
            merged = merge(tspec.get(field), sspec.get(field))
            if merged:
                tspec[field] = merged
        new["spec"]["suspend"] = False
        self.store.update(jobs, ns, name, new, None, check_rv=False)

    def _delete(self, jobs, ns, job):
        if job["metadata"].get("deletionTimestamp"):
            return
        try:
            self.store.delete(jobs, ns, job["metadata"]["name"], {"propagationPolicy": "Foreground"})
        except ApiError:
            pass

    def _write_status(self, r, js, status):
        if not status.get("conditions"):
            status.pop("conditions", None)
        if status != (js.get("status") or {}):
            new = copy.deepcopy(js)
            new["status"] = status
            self.store.update(r, js["metadata"]["namespace"], js["metadata"]["name"], new, "status",
                              check_rv=False)
