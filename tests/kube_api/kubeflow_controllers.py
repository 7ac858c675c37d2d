"""Stand-ins for the Kubeflow controllers: the Trainer's TrainJob controller
(trainer.kubeflow.org/v1alpha1) and the training-operator's PyTorchJob
controller (kubeflow.org/v1).

TrainJob, from kubeflow/trainer (v2.2):
- pkg/runtime/core/trainingruntime.go (RuntimeInfo, mergeRuntimePatches): the
  JobSet spec comes from the referenced ClusterTrainingRuntime's (or
  namespaced TrainingRuntime's) JobSet template; each replicated job's pod
  set counts its parallelism (default 1), except the one whose template
  carries `trainer.kubeflow.org/trainjob-ancestor-step: trainer`, which
  counts mlPolicy.numNodes (default 1) and gets spec.trainer.resourcesPerNode
  in its `node` container; spec.runtimePatches are strategic-merge patches
  of that JobSet spec, applied in order (maps merge, schedulingGates merge
  by name, other lists replace).
- pkg/runtime/framework/plugins/torch/torch.go (EnforceMLPolicy): the `node`
  pod set counts spec.trainer.numNodes when set;
  pkg/runtime/framework/plugins/mpi/mpi.go (EnforceMLPolicy): with
  mlPolicy.mpi.runLauncherAsNode the launcher is one of the nodes, so the
  `node` pod set counts max(numNodes - 1, 1).
- pkg/runtime/framework/plugins/jobset/jobset.go (Build): the JobSet is
  named after the TrainJob, in its namespace, labelled with the runtime
  template's labels, with the pod set counts as every replicated job's
  parallelism and completions, spec.suspend equal to the TrainJob's, and a
  controller ownerReference to the TrainJob (blockOwnerDeletion); it is
  built as soon as the TrainJob is reconciled, suspended or not, and
  rebuilt only while the TrainJob or the JobSet is suspended (server-side
  apply by the "trainer" field manager: the spec is replaced).
- plugins/jobset/jobset.go (Status): status.jobsStatus mirrors the JobSet's
  replicatedJobsStatus (ready, succeeded, failed, active, suspended);
  pkg/controller/trainjob_controller.go (Reconcile): the TrainJob is
  Complete or Failed when its JobSet is Completed or Failed;
  setSuspendedCondition: Suspended True (reason Suspended) while
  spec.suspend, False (reason Resumed) when it is lifted.
The JobSet's Jobs and their pods are the JobSet stand-in's
(jobset_controller.py), which runs once the JobSet CRD is installed; the
Trainer needs that CRD, and without it this stand-in builds nothing.

PyTorchJob, from kubeflow/training-operator release-1.9:
- pkg/controller.v1/common/job.go (ReconcileJobs, DeletePodsAndServices):
  while runPolicy.suspend, every pod is deleted, replica statuses get
  active 0, Running turns False and Suspended True; on resume Suspended
  turns False (reason PyTorchJobResumed) and status.startTime is reset to
  now; a finished job's pods are deleted per cleanPodPolicy (None keeps
  them, Running deletes the running and pending ones, All deletes all).
- pkg/controller.v1/common/pod.go and util.go: one pod per replica index,
  named <job>-<replicaType lowercased>-<index>, labelled
  training.kubeflow.org/{job-name,operator-name,replica-type,replica-index}
  (job-role=master on the master), the replica spec's restartPolicy on the
  pod (ExitCode becomes Never).
- pkg/controller.v1/pytorch/pytorchjob_controller.go (UpdateJobStatus):
  startTime set when first reconciled unsuspended; with a Master, the job
  runs while the master runs and succeeds when the master succeeded;
  without one, when every worker succeeded (or one did, with an
  elasticPolicy); a failed pod whose restartPolicy does not restart it
  fails the job.
"""

import copy

from workload_base import (StandIn, condition_true, controller_ref, deleting, meta_condition, owner_names,
                           pod_finished, pod_phase)
from controllers import now_rfc3339

TRAINER = "trainer.kubeflow.org"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
JOBSET_GROUP = "jobset.x-k8s.io"


def merge_pod_template_patch(tmpl, patch):
    """A strategic merge of a PodTemplatePatch into a pod template."""
    meta = patch.get("metadata") or {}
    tmeta = tmpl.setdefault("metadata", {})
    for k in ("labels", "annotations"):
        if meta.get(k):
            tmeta[k] = {**(tmeta.get(k) or {}), **meta[k]}
    spec = patch.get("spec") or {}
    tspec = tmpl.setdefault("spec", {})
    for k, v in spec.items():
        if k == "nodeSelector":
            tspec[k] = {**(tspec.get(k) or {}), **(v or {})}
        elif k == "schedulingGates":
            names = {g.get("name") for g in tspec.get(k) or []}
            tspec[k] = (tspec.get(k) or []) + [g for g in v or [] if g.get("name") not in names]
        elif v is not None:
            tspec[k] = copy.deepcopy(v)


class TrainJobs(StandIn):
    kind = "trainjob"

    def tj_res(self):
        return self.res(TRAINER, "v1alpha1", "trainjobs")

    def js_res(self):
        return self.res(JOBSET_GROUP, "v1alpha2", "jobsets")

    def enqueue(self, key, obj):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == (TRAINER, "trainjobs"):
            return [(self.kind, ns, meta.get("name"))]
        if key == (JOBSET_GROUP, "jobsets"):
            return [(self.kind, ns, n) for n in owner_names(obj, "TrainJob")]
        if key in ((TRAINER, "clustertrainingruntimes"), (TRAINER, "trainingruntimes")):
            r = self.tj_res()
            return [(self.kind, o["metadata"]["namespace"], o["metadata"]["name"])
                    for (_, _), o in (self.store.objects[r.storage_key].items() if r else [])
                    if (o.get("spec") or {}).get("runtimeRef", {}).get("name") == meta.get("name")]
        return []

    def runtime(self, tj):
        ref = (tj.get("spec") or {}).get("runtimeRef") or {}
        if ref.get("kind", "ClusterTrainingRuntime") == "ClusterTrainingRuntime":
            return self.get(self.res(TRAINER, "v1alpha1", "clustertrainingruntimes"), "", ref.get("name"))
        return self.get(self.res(TRAINER, "v1alpha1", "trainingruntimes"), tj["metadata"]["namespace"],
                        ref.get("name"))

    def replicated_jobs(self, tj, runtime):
        """The JobSet spec's replicated jobs, built as RuntimeInfo and the
        ML policy plugins build them."""
        spec = tj.get("spec") or {}
        rspec = runtime.get("spec") or {}
        ml = rspec.get("mlPolicy")
        trainer = spec.get("trainer") or {}
        rjobs = copy.deepcopy(((rspec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or [])
        for rj in rjobs:
            jt = rj.setdefault("template", {})
            jspec = jt.setdefault("spec", {})
            count = jspec.get("parallelism", 1)
            if ((jt.get("metadata") or {}).get("labels") or {}).get(ANCESTOR) == "trainer" and ml is not None:
                count = ml.get("numNodes", 1)
                res = trainer.get("resourcesPerNode")
                for c in ((jspec.get("template") or {}).get("spec") or {}).get("containers") or []:
                    if res and c.get("name") == "node":
                        base = c.setdefault("resources", {})
                        for part in ("requests", "limits"):
                            if res.get(part):
                                base[part] = {**(base.get(part) or {}), **res[part]}
            if rj.get("name") == "node" and ml is not None and "numNodes" in trainer:
                as_node = ((ml.get("mpi") or {}).get("runLauncherAsNode")) is True
                count = max(trainer["numNodes"] - 1, 1) if as_node else trainer["numNodes"]
            jspec["parallelism"] = jspec["completions"] = count
        by_name = {rj.get("name"): rj for rj in rjobs}
        for patch in spec.get("runtimePatches") or []:
            tpl = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}
            for rp in tpl.get("replicatedJobs") or []:
                rj = by_name.get(rp.get("name"))
                pod_patch = (((rp.get("template") or {}).get("spec") or {}).get("template"))
                if rj is not None and pod_patch:
                    merge_pod_template_patch(rj["template"].setdefault("spec", {}).setdefault("template", {}),
                                             pod_patch)
        return rjobs

    def build(self, tj, runtime):
        """The JobSet the jobset plugin's Build applies."""
        tmeta = ((runtime.get("spec") or {}).get("template") or {}).get("metadata") or {}
        meta = {"name": tj["metadata"]["name"],
                "ownerReferences": [{**controller_ref(tj, f"{TRAINER}/v1alpha1", "TrainJob"),
                                     "blockOwnerDeletion": True}]}
        for k in ("labels", "annotations"):
            if tmeta.get(k):
                meta[k] = copy.deepcopy(tmeta[k])
        suspend = bool((tj.get("spec") or {}).get("suspend"))
        return {"apiVersion": f"{JOBSET_GROUP}/v1alpha2", "kind": "JobSet", "metadata": meta,
                "spec": {"replicatedJobs": self.replicated_jobs(tj, runtime), "suspend": suspend}}

    def sync(self, ns, name):
        r, jr = self.tj_res(), self.js_res()
        tj = self.get(r, ns, name)
        if tj is None or deleting(tj) or jr is None:
            return
        runtime = self.runtime(tj)
        if runtime is None:
            return  # the real controller fails the reconcile and retries
        suspend = bool((tj.get("spec") or {}).get("suspend"))
        status = copy.deepcopy(tj.get("status") or {})
        conds = status.setdefault("conditions", [])
        finished = condition_true(conds, "Complete") or condition_true(conds, "Failed")
        js = self.get(jr, ns, name)
        if js is not None and not any(ref.get("uid") == tj["metadata"]["uid"] and ref.get("controller")
                                      for ref in js["metadata"].get("ownerReferences") or []):
            return  # a JobSet of that name the TrainJob does not own: the apply fails on it
        if not finished:
            if js is None:
                js = self.store.create(jr, ns, self.build(tj, runtime))
            elif suspend or (js.get("spec") or {}).get("suspend"):
                built = self.build(tj, runtime)
                new = copy.deepcopy(js)
                new["spec"] = {**(js.get("spec") or {}), **built["spec"]}
                for k in ("labels", "annotations"):
                    if built["metadata"].get(k):
                        new["metadata"][k] = {**(js["metadata"].get(k) or {}), **built["metadata"][k]}
                if new != js:
                    js = self.write(jr, new)
        jstatus = (js or {}).get("status") or {}
        status["jobsStatus"] = [
            {"name": s.get("name"), **{k: s.get(k, 0) for k in ("ready", "succeeded", "failed", "active",
                                                               "suspended")}}
            for s in jstatus.get("replicatedJobsStatus") or []]
        if suspend:
            meta_condition(conds, "Suspended", "True", "Suspended", "TrainJob is suspended")
        elif condition_true(conds, "Suspended"):
            meta_condition(conds, "Suspended", "False", "Resumed", "TrainJob is resumed")
        if not finished and condition_true(jstatus.get("conditions") or [], "Completed"):
            meta_condition(conds, "Complete", "True", "JobSetCompleted", "jobset completed successfully")
        elif not finished and condition_true(jstatus.get("conditions") or [], "Failed"):
            meta_condition(conds, "Failed", "True", "JobSetFailed", "jobset failed")
        if not conds:
            status.pop("conditions")
        self.write_status(r, tj, status)


PYTORCH = "kubeflow.org"


class PyTorchJobs(StandIn):
    kind = "pytorchjob"

    def pj_res(self):
        return self.res(PYTORCH, "v1", "pytorchjobs")

    def enqueue(self, key, obj):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == (PYTORCH, "pytorchjobs"):
            return [(self.kind, ns, meta.get("name"))]
        if key == ("", "pods"):
            return [(self.kind, ns, n) for n in owner_names(obj, "PyTorchJob")]
        return []

    def sync(self, ns, name):
        r = self.pj_res()
        job = self.get(r, ns, name)
        if job is None or deleting(job):
            return
        spec = job.get("spec") or {}
        run = spec.get("runPolicy") or {}
        replicas = spec.get("pytorchReplicaSpecs") or {}
        pods_r = self.pods()
        owned = self.owned(pods_r, ns, job["metadata"]["uid"])
        status = copy.deepcopy(job.get("status") or {})
        conds = status.setdefault("conditions", [])
        if not conds:
            set_job_condition(conds, "Created", "True", "PyTorchJobCreated", f"PyTorchJob {name} is created.")
        rstatus = status.setdefault("replicaStatuses", {})
        finished = condition_true(conds, "Succeeded") or condition_true(conds, "Failed")
        live = [p for p in owned if not deleting(p)]
        if finished:
            policy = run.get("cleanPodPolicy", "None")
            for p in live:
                if policy == "All" or (policy == "Running" and pod_phase(p) in ("Running", "Pending")):
                    self.delete(pods_r, ns, p["metadata"]["name"])
            if condition_true(conds, "Succeeded"):
                for rs in rstatus.values():
                    rs["succeeded"] = rs.get("succeeded", 0) + rs.get("active", 0)
                    rs["active"] = 0
        elif run.get("suspend"):
            for p in live:
                self.delete(pods_r, ns, p["metadata"]["name"])
            for rs in rstatus.values():
                rs["active"] = 0
            msg = f"PyTorchJob {name} is suspended."
            if condition_true(conds, "Running"):
                set_job_condition(conds, "Running", "False", "PyTorchJobSuspended", msg)
            if not condition_true(conds, "Suspended"):
                set_job_condition(conds, "Suspended", "True", "PyTorchJobSuspended", msg)
        else:
            if condition_true(conds, "Suspended"):
                set_job_condition(conds, "Suspended", "False", "PyTorchJobResumed", f"PyTorchJob {name} is resumed.")
                status["startTime"] = now_rfc3339()
            self.reconcile_pods(job, replicas, live)
            owned = self.owned(pods_r, ns, job["metadata"]["uid"])
            self.update_status(job, replicas, owned, status, conds, rstatus)
        self.write_status(r, job, status)

    def reconcile_pods(self, job, replicas, live):
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        have = {((p["metadata"].get("labels") or {}).get("training.kubeflow.org/replica-type"),
                 (p["metadata"].get("labels") or {}).get("training.kubeflow.org/replica-index")) for p in live}
        for rtype, rspec in replicas.items():
            lower = rtype.lower()
            policy = rspec.get("restartPolicy", "OnFailure")
            for i in range(rspec.get("replicas", 1)):
                if (lower, str(i)) in have:
                    continue
                labels = {"training.kubeflow.org/job-name": name,
                          "training.kubeflow.org/operator-name": "pytorchjob-controller",
                          "training.kubeflow.org/replica-type": lower,
                          "training.kubeflow.org/replica-index": str(i)}
                if rtype == "Master":
                    labels["training.kubeflow.org/job-role"] = "master"
                self.create_pod(ns, rspec.get("template"), name=f"{name}-{lower}-{i}", labels=labels,
                                owner_refs=[controller_ref(job, f"{PYTORCH}/v1", "PyTorchJob")],
                                restart_policy="Never" if policy == "ExitCode" else policy)

    def update_status(self, job, replicas, owned, status, conds, rstatus):
        name = job["metadata"]["name"]
        status.setdefault("startTime", now_rfc3339())
        for rtype, rspec in replicas.items():
            mine = [p for p in owned
                    if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/replica-type") == rtype.lower()]
            rs = rstatus.setdefault(rtype, {})
            rs["active"] = sum(1 for p in mine if not pod_finished(p) and not deleting(p))
            rs["succeeded"] = sum(1 for p in mine if pod_phase(p) == "Succeeded")
            rs["failed"] = sum(1 for p in mine if pod_phase(p) == "Failed")
        has_master = "Master" in replicas
        done = None
        for rtype, rspec in replicas.items():
            rs = rstatus[rtype]
            expected = rspec.get("replicas", 1) - rs["succeeded"]
            if has_master and rtype == "Master":
                if rs["active"] > 0:
                    set_job_condition(conds, "Running", "True", "PyTorchJobRunning", f"PyTorchJob {name} is running.")
                if expected == 0:
                    done = "Succeeded"
            elif not has_master and rtype == "Worker":
                if expected == 0 or ((job.get("spec") or {}).get("elasticPolicy") and rs["succeeded"] > 0):
                    done = "Succeeded"
                elif rs["active"] > 0:
                    set_job_condition(conds, "Running", "True", "PyTorchJobRunning", f"PyTorchJob {name} is running.")
            if rs["failed"] > 0 and rspec.get("restartPolicy", "OnFailure") in ("Never", "ExitCode"):
                done = done or "Failed"
        if done:
            status.setdefault("completionTime", now_rfc3339())
            msg = (f"PyTorchJob {name} is successfully completed." if done == "Succeeded"
                   else f"PyTorchJob {name} is failed because a replica failed.")
            set_job_condition(conds, done, "True", f"PyTorchJob{done}", msg)
            set_job_condition(conds, "Running", "False", f"PyTorchJob{done}", msg)


def set_job_condition(conds, ctype, status, reason, message):
    """kubeflow.org/v1 JobCondition: lastUpdateTime when anything changes,
    lastTransitionTime when the status does."""
    now = now_rfc3339()
    for c in conds:
        if c.get("type") == ctype:
            if (c.get("status"), c.get("reason"), c.get("message")) == (status, reason, message):
                return
            if c.get("status") != status:
                c["lastTransitionTime"] = now
            c.update({"status": status, "reason": reason, "message": message, "lastUpdateTime": now})
            return
    conds.append({"type": ctype, "status": status, "reason": reason, "message": message,
                  "lastUpdateTime": now, "lastTransitionTime": now})
