"""Stand-ins for KubeRay's RayCluster and RayJob controllers (ray.io/v1),
from ray-project/kuberay ray-operator/controllers/ray:

RayCluster (raycluster_controller.go: reconcilePods, calculateStatus; with
the RayClusterStatusConditions feature gate on, its default):
- one head pod (generateName <cluster>-head-) and, per worker group that is
  not suspended, replicas (clamped to [minReplicas, maxReplicas]) times
  numOfHosts worker pods (generateName <cluster>-<group>-worker-), each
  labelled ray.io/cluster, ray.io/node-type (head | worker), ray.io/group
  (headgroup | the group's name), ray.io/is-ray-node=yes, ray.io/identifier
  and app.kubernetes.io/{name,created-by} (common/pod.go labelPod; the
  template's labels override all but the first three), with a controller
  ownerReference; pods named in scaleStrategy.workersToDelete
  are deleted; a pod that finished (a restartPolicy that lets it end) is
  deleted and replaced.
- spec.suspend: RayClusterSuspending turns True; while Suspending every pod
  is deleted whatever spec.suspend says now (the operation is atomic); once
  none is left Suspending turns False and RayClusterSuspended True, and
  state becomes `suspended`; lifting spec.suspend turns Suspended False and
  the pods come back.
- enableInTreeAutoscaling (utils/util.go IsAutoscalingEnabled): the head pod
  gets the `autoscaler` container, 500m CPU and 512Mi requested and limited
  (common/pod.go BuildHeadPod, BuildAutoscalerContainer); a group with more
  workers than `replicas` loses only those named in workersToDelete, never
  others (reconcilePods: random deletes are off with the autoscaler); a
  suspended worker group is invalid (utils/validation.go
  ValidateRayClusterSpec: "cannot be suspended with Autoscaler enabled") and
  such a cluster gets no pods. The Ray autoscaler itself (which writes
  `replicas` from Ray's demand) runs in the head pod, not here: a test
  writes `replicas` as it would.
- status: desired/min/max/ready/available worker replicas, state `ready`
  once the head and every desired worker run and are Ready, HeadPodReady,
  RayClusterProvisioned (True the first time all pods are ready),
  observedGeneration.

RayJob (rayjob_controller.go: the JobDeploymentStatus machine; the spec
checks of utils/validation.go ValidateRayJobSpec run on every reconcile):
- a spec that cannot run (suspend without shutdownAfterJobFinishes, suspend
  with clusterSelector, neither rayClusterSpec nor clusterSelector) turns
  the job ValidationFailed;
- InteractiveMode with backoffLimit > 0 is invalid (ValidateRayJobSpec);
- New (status ""): finalizer ray.io/rayjob-finalizer added, jobId (but not
  in InteractiveMode) spec.jobId or <name>-<5 chars>, rayClusterName
  <name>-<5 chars>, status.startTime now → Initializing
  (initRayJobStatusIfNeed); New itself never looks at suspend;
- Initializing: suspend → Suspending (updateStatusToSuspendingIfNeeded);
  otherwise the RayCluster (the job's
  rayClusterSpec, labels ray.io/originated-from-cr-name and
  ray.io/originated-from-crd=RayJob, controller ownerReference) is created
  and waited for until its state is `ready`; then InteractiveMode →
  Waiting; in K8sJobMode (the default) the submitter batch/v1 Job (named as
  the RayJob; the submitterPodTemplate, or a `ray-job-submitter` container
  with the head's image and requests of 500m CPU and 200Mi) → Running;
  HTTPMode and SidecarMode → Running with no submitter Job to follow (in
  SidecarMode the cluster's head template gets the `ray-job-submitter`
  container and restartPolicy Never: constructRayClusterForRayJob);
- Waiting (InteractiveMode): suspend is NOT honoured (the Waiting case never
  calls updateStatusToSuspendingIfNeeded); once spec.jobId is set it is
  copied to status.jobId → Running;
- Running: suspend → Suspending; the Ray job's status follows the submitter
  (which runs `ray job submit` and exits with the job's outcome; this
  stand-in plays the Ray dashboard too): RUNNING while it runs, then
  SUCCEEDED → Complete or FAILED → Failed; without a submitter (HTTPMode,
  SidecarMode, InteractiveMode) it stays RUNNING;
- Suspending (only reachable from Initializing and Running): the RayCluster
  and the submitter Job are deleted, and once both are gone the cluster and
  job fields of the status are reset → Suspended (their pods are left to
  the garbage collector); Suspended with suspend lifted → New;
- Complete / Failed with shutdownAfterJobFinishes: the RayCluster is
  deleted after ttlSecondsAfterFinished (0 here: at once);
- Complete / Failed / Suspended with suspend set stay where they are;
- a deleted RayJob loses its finalizer (the Ray job would be stopped).
"""

import copy
import uuid

from workload_base import (StandIn, condition_true, controller_ref, deleting, meta_condition, owner_names,
                           pod_finished, pod_is_ready, pod_phase)
from controllers import cond_true, now_rfc3339

RAY = "ray.io"
AUTOSCALER = "autoscaler"
AUTOSCALER_RESOURCES = {"requests": {"cpu": "500m", "memory": "512Mi"},
                        "limits": {"cpu": "500m", "memory": "512Mi"}}
CLUSTER = "ray.io/cluster"
NODE_TYPE = "ray.io/node-type"
GROUP = "ray.io/group"
FINALIZER = "ray.io/rayjob-finalizer"


def worker_count(group):
    if group.get("suspend"):
        return 0
    replicas = group.get("replicas", 0)
    lo, hi = group.get("minReplicas", 0), group.get("maxReplicas", 2147483647)
    replicas = max(lo, min(hi, replicas))
    return replicas * max(1, group.get("numOfHosts", 1))


def autoscaling(spec):
    return bool((spec or {}).get("enableInTreeAutoscaling"))


def invalid_cluster(spec):
    """utils/validation.go ValidateRayClusterSpec, the autoscaling rule."""
    if autoscaling(spec):
        for g in spec.get("workerGroupSpecs") or []:
            if g.get("suspend"):
                return f"worker group {g.get('groupName')} cannot be suspended with Autoscaler enabled"
    return None


def head_template(spec):
    """The head pod's template, with the autoscaler container KubeRay adds
    when autoscaling is on (common/pod.go BuildAutoscalerContainer)."""
    template = copy.deepcopy((spec.get("headGroupSpec") or {}).get("template") or {})
    if autoscaling(spec):
        containers = template.setdefault("spec", {}).setdefault("containers", [])
        if not any(c.get("name") == AUTOSCALER for c in containers):
            containers.append({"name": AUTOSCALER, "image": (containers[0].get("image", "") if containers else ""),
                               "resources": copy.deepcopy(AUTOSCALER_RESOURCES)})
    return template


def pod_labels(template, cluster, node_type, group):
    """common/pod.go labelPod: KubeRay's labels, the template's on top of
    them, except ray.io/node-type, ray.io/group and ray.io/cluster."""
    labels = {"ray.io/is-ray-node": "yes", "ray.io/identifier": f"{cluster}-{node_type}",
              "app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator"}
    labels.update(((template or {}).get("metadata") or {}).get("labels") or {})
    labels.update({CLUSTER: cluster, NODE_TYPE: node_type, GROUP: group})
    return labels


class RayClusters(StandIn):
    kind = "raycluster"

    def rc_res(self):
        return self.res(RAY, "v1", "rayclusters")

    def enqueue(self, key, obj):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == (RAY, "rayclusters"):
            return [(self.kind, ns, meta.get("name"))]
        if key == ("", "pods"):
            return [(self.kind, ns, n) for n in owner_names(obj, "RayCluster")]
        return []

    def sync(self, ns, name):
        r = self.rc_res()
        rc = self.get(r, ns, name)
        if rc is None or deleting(rc):
            return
        spec = rc.get("spec") or {}
        pods_r = self.pods()
        status = copy.deepcopy(rc.get("status") or {})
        conds = status.setdefault("conditions", [])
        suspending = condition_true(conds, "RayClusterSuspending")
        suspended = condition_true(conds, "RayClusterSuspended")
        live = [p for p in self.owned(pods_r, ns, rc["metadata"]["uid"]) if not deleting(p)]
        if suspending:
            for p in live:
                self.delete(pods_r, ns, p["metadata"]["name"])
        elif not suspended and not spec.get("suspend") and not invalid_cluster(spec):
            self.reconcile_pods(rc, live)
        pods = self.owned(pods_r, ns, rc["metadata"]["uid"])
        workers = [p for p in pods if (p["metadata"].get("labels") or {}).get(NODE_TYPE) == "worker"]
        desired = sum(worker_count(g) for g in spec.get("workerGroupSpecs") or [])
        status["desiredWorkerReplicas"] = desired
        status["minWorkerReplicas"] = sum(g.get("minReplicas", 0) * max(1, g.get("numOfHosts", 1))
                                          for g in spec.get("workerGroupSpecs") or [] if not g.get("suspend"))
        status["maxWorkerReplicas"] = sum(g.get("maxReplicas", 2147483647) * max(1, g.get("numOfHosts", 1))
                                          for g in spec.get("workerGroupSpecs") or [] if not g.get("suspend"))
        status["readyWorkerReplicas"] = sum(1 for p in workers if pod_is_ready(p))
        status["availableWorkerReplicas"] = sum(1 for p in workers if pod_phase(p) == "Running")
        running = [p for p in pods if not deleting(p) and pod_phase(p) == "Running" and pod_is_ready(p)]
        all_running = bool(pods) and len(running) == len(pods)
        if len(pods) == desired + 1 and all_running:
            status["state"] = "ready"
            status.pop("reason", None)
        head = [p for p in pods if (p["metadata"].get("labels") or {}).get(NODE_TYPE) == "head"]
        if not head:
            meta_condition(conds, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found")
        elif pod_is_ready(head[0]):
            meta_condition(conds, "HeadPodReady", "True", "HeadPodRunningAndReady")
        else:
            meta_condition(conds, "HeadPodReady", "False", "HeadPodNotReady")
        if not condition_true(conds, "RayClusterProvisioned") and not suspended:
            if all_running:
                meta_condition(conds, "RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
                               "All Ray Pods are ready for the first time")
            else:
                meta_condition(conds, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                               "RayCluster Pods are being provisioned for first time")
        if suspending:
            if not pods:
                meta_condition(conds, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
                               "RayCluster has been suspended")
                meta_condition(conds, "RayClusterSuspending", "False", "RayClusterSuspending")
                meta_condition(conds, "RayClusterSuspended", "True", "RayClusterSuspended")
        elif suspended:
            if not spec.get("suspend"):
                meta_condition(conds, "RayClusterSuspended", "False", "RayClusterSuspended")
        else:
            meta_condition(conds, "RayClusterSuspended", "False", "RayClusterSuspended")
            meta_condition(conds, "RayClusterSuspending", "True" if spec.get("suspend") else "False",
                           "RayClusterSuspending")
        if spec.get("suspend") and not pods:
            status["state"] = "suspended"
        status["observedGeneration"] = rc["metadata"].get("generation", 1)
        # a status change requeues the cluster (the write comes back as an
        # event), as the real controller requeues after a suspend transition
        self.write_status(r, rc, status)

    def reconcile_pods(self, rc, live):
        ns, name = rc["metadata"]["namespace"], rc["metadata"]["name"]
        spec = rc.get("spec") or {}
        pods_r = self.pods()
        ref = [controller_ref(rc, f"{RAY}/v1", "RayCluster")]
        for p in live:
            if pod_finished(p):
                self.delete(pods_r, ns, p["metadata"]["name"])
        live = [p for p in live if not pod_finished(p)]
        heads = [p for p in live if (p["metadata"].get("labels") or {}).get(NODE_TYPE) == "head"]
        if not heads:
            template = head_template(spec)
            self.create_pod(ns, template, generate_name=f"{name}-head-",
                            labels=pod_labels(template, name, "head", "headgroup"), owner_refs=ref)
        for g in spec.get("workerGroupSpecs") or []:
            gname = g.get("groupName")
            mine = [p for p in live if (p["metadata"].get("labels") or {}).get(NODE_TYPE) == "worker"
                    and (p["metadata"].get("labels") or {}).get(GROUP) == gname]
            doomed = set(((g.get("scaleStrategy") or {}).get("workersToDelete")) or [])
            for p in mine:
                if p["metadata"]["name"] in doomed:
                    self.delete(pods_r, ns, p["metadata"]["name"])
            mine = [p for p in mine if p["metadata"]["name"] not in doomed]
            want = worker_count(g)
            # with the autoscaler only workersToDelete scale a group down
            for p in ([] if autoscaling(spec) else mine[want:]):
                self.delete(pods_r, ns, p["metadata"]["name"])
            for _ in range(want - len(mine)):
                self.create_pod(ns, g.get("template"), generate_name=f"{name}-{gname}-worker-",
                                labels=pod_labels(g.get("template"), name, "worker", gname), owner_refs=ref)


def submitter_container(rj):
    """common/job.go GetDefaultSubmitterContainer: the head's image, 500m CPU
    and 200Mi requested, 1 CPU and 1Gi limited."""
    spec = rj.get("spec") or {}
    head = (((spec.get("rayClusterSpec") or {}).get("headGroupSpec") or {}).get("template") or {})
    image = (((head.get("spec") or {}).get("containers") or [{}])[0]).get("image", "")
    return {"name": "ray-job-submitter", "image": image,
            "resources": {"requests": {"cpu": "500m", "memory": "200Mi"},
                          "limits": {"cpu": "1", "memory": "1Gi"}}}


class RayJobs(StandIn):
    kind = "rayjob"

    def rj_res(self):
        return self.res(RAY, "v1", "rayjobs")

    def enqueue(self, key, obj):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if key == (RAY, "rayjobs"):
            return [(self.kind, ns, meta.get("name"))]
        if key in ((RAY, "rayclusters"), ("batch", "jobs")):
            return [(self.kind, ns, n) for n in owner_names(obj, "RayJob")]
        return []

    @staticmethod
    def invalid(spec):
        if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
            return ("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false "
                    "is not allowed to be suspended")
        if spec.get("suspend") and spec.get("clusterSelector"):
            return "The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation"
        if not spec.get("rayClusterSpec") and not spec.get("clusterSelector"):
            return "The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set"
        if spec.get("submissionMode") == "InteractiveMode" and (spec.get("backoffLimit") or 0) > 0:
            return "The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode"
        return None

    def sync(self, ns, name):
        r = self.rj_res()
        # one reconcile per transition, as the real controller requeues
        for _ in range(8):
            rj = self.get(r, ns, name)
            if rj is None:
                return
            if not self.step(r, rj):
                return

    def step(self, r, rj):
        """One reconcile; True when the status moved (reconcile again)."""
        ns, name = rj["metadata"]["namespace"], rj["metadata"]["name"]
        spec = rj.get("spec") or {}
        if deleting(rj):
            if FINALIZER in (rj["metadata"].get("finalizers") or []):
                new = copy.deepcopy(rj)
                new["metadata"]["finalizers"] = [f for f in new["metadata"]["finalizers"] if f != FINALIZER]
                self.write(r, new)
            return False
        status = copy.deepcopy(rj.get("status") or {})
        phase = status.get("jobDeploymentStatus", "")
        problem = self.invalid(spec)
        if problem:
            status.update({"jobDeploymentStatus": "ValidationFailed", "reason": "ValidationFailed",
                           "message": problem})
            return self.commit(r, rj, status)
        if phase in ("", "New"):
            if FINALIZER not in (rj["metadata"].get("finalizers") or []):
                new = copy.deepcopy(rj)
                new["metadata"].setdefault("finalizers", []).append(FINALIZER)
                rj = self.write(r, new)
            if spec.get("submissionMode") != "InteractiveMode":
                status.setdefault("jobId", spec.get("jobId") or f"{name}-{uuid.uuid4().hex[:5]}")
            if not status.get("rayClusterName"):
                status["rayClusterName"] = (spec.get("clusterSelector") or {}).get("ray.io/cluster") or \
                    f"{name}-{uuid.uuid4().hex[:5]}"
            status.setdefault("jobStatus", "")
            status["jobDeploymentStatus"] = "Initializing"
            status["startTime"] = now_rfc3339()
        elif phase in ("Initializing", "Running") and spec.get("suspend"):
            status["jobDeploymentStatus"] = "Suspending"
        elif phase == "Initializing":
            rc = self.cluster(rj, status)
            if (rc.get("status") or {}).get("state") != "ready":
                status["rayClusterStatus"] = copy.deepcopy(rc.get("status") or {})
                self.commit(r, rj, status)
                return False
            status["rayClusterStatus"] = copy.deepcopy(rc.get("status") or {})
            status["dashboardURL"] = f"{rc['metadata']['name']}-head-svc.{ns}.svc.cluster.local:8265"
            mode = spec.get("submissionMode", "K8sJobMode")
            if mode == "InteractiveMode":
                status["jobDeploymentStatus"] = "Waiting"
                return self.commit(r, rj, status)
            if mode == "K8sJobMode":
                self.submitter(rj, rc)
            status["jobDeploymentStatus"] = "Running"
        elif phase == "Waiting":
            # suspend is not looked at here: only a job id moves it on
            if not spec.get("jobId"):
                return False
            status["jobId"] = spec["jobId"]
            status["jobDeploymentStatus"] = "Running"
        elif phase == "Running":
            rc = self.cluster(rj, status)
            status["rayClusterStatus"] = copy.deepcopy(rc.get("status") or {})
            sub = self.get(self.jobs(), ns, name)
            if sub is None:
                if spec.get("submissionMode", "K8sJobMode") != "K8sJobMode":
                    status["jobStatus"] = "RUNNING"
                self.commit(r, rj, status)
                return False
            if cond_true(sub, "Complete"):
                status.update({"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete",
                               "endTime": now_rfc3339()})
                status["succeeded"] = status.get("succeeded", 0) + 1
            elif cond_true(sub, "Failed"):
                status.update({"jobStatus": "FAILED", "jobDeploymentStatus": "Failed", "reason": "AppFailed",
                               "endTime": now_rfc3339()})
                status["failed"] = status.get("failed", 0) + 1
            else:
                status["jobStatus"] = "RUNNING"
        elif phase in ("Suspending", "Retrying"):
            gone = True
            rc_r = self.res(RAY, "v1", "rayclusters")
            rc_name = status.get("rayClusterName")
            if rc_name and self.get(rc_r, ns, rc_name) is not None:
                self.delete(rc_r, ns, rc_name)
                gone = gone and self.get(rc_r, ns, rc_name) is None
            if self.get(self.jobs(), ns, name) is not None:
                self.delete(self.jobs(), ns, name)
                gone = gone and self.get(self.jobs(), ns, name) is None
            if not gone:
                return False
            for k in ("rayClusterStatus", "rayClusterName", "dashboardURL", "jobId", "message", "reason",
                      "rayJobInfo", "jobStatusCheckFailureStartTime"):
                status.pop(k, None)
            status["jobStatus"] = ""
            status["jobDeploymentStatus"] = "Suspended" if phase == "Suspending" else "New"
        elif phase == "Suspended":
            if spec.get("suspend"):
                return False
            status["jobStatus"] = ""
            status["jobDeploymentStatus"] = "New"
        elif phase in ("Complete", "Failed"):
            if spec.get("shutdownAfterJobFinishes") and not spec.get("clusterSelector"):
                rc_r = self.res(RAY, "v1", "rayclusters")
                if status.get("rayClusterName") and self.get(rc_r, ns, status["rayClusterName"]) is not None:
                    self.delete(rc_r, ns, status["rayClusterName"])
            return False
        else:
            return False
        return self.commit(r, rj, status)

    def commit(self, r, rj, status):
        before = rj.get("status") or {}
        self.write_status(r, rj, status)
        return status.get("jobDeploymentStatus") != before.get("jobDeploymentStatus")

    def cluster(self, rj, status):
        """The job's RayCluster, created when missing (getOrCreateRayClusterInstance)."""
        rc_r = self.res(RAY, "v1", "rayclusters")
        ns = rj["metadata"]["namespace"]
        rc = self.get(rc_r, ns, status["rayClusterName"])
        if rc is not None:
            return rc
        labels = {**(rj["metadata"].get("labels") or {}),
                  "ray.io/originated-from-cr-name": rj["metadata"]["name"],
                  "ray.io/originated-from-crd": "RayJob",
                  "ray.io/job-submission-mode": (rj.get("spec") or {}).get("submissionMode", "K8sJobMode")}
        body = {"metadata": {"name": status["rayClusterName"], "labels": labels,
                             "ownerReferences": [controller_ref(rj, f"{RAY}/v1", "RayJob")]},
                "spec": copy.deepcopy((rj.get("spec") or {}).get("rayClusterSpec") or {})}
        if (rj.get("spec") or {}).get("submissionMode") == "SidecarMode":
            # constructRayClusterForRayJob: the submitter joins the head pod
            head = body["spec"].setdefault("headGroupSpec", {}).setdefault("template", {}).setdefault("spec", {})
            head.setdefault("containers", []).append(submitter_container(rj))
            head["restartPolicy"] = "Never"
        annotations = rj["metadata"].get("annotations")
        if annotations:
            body["metadata"]["annotations"] = dict(annotations)
        return self.store.create(rc_r, ns, body)

    def submitter(self, rj, rc):
        jobs_r = self.jobs()
        ns, name = rj["metadata"]["namespace"], rj["metadata"]["name"]
        if self.get(jobs_r, ns, name) is not None:
            return
        spec = rj.get("spec") or {}
        tmpl = copy.deepcopy(spec.get("submitterPodTemplate"))
        if tmpl is None:
            tmpl = {"spec": {"restartPolicy": "Never", "containers": [submitter_container(rj)]}}
        tmpl.setdefault("spec", {}).setdefault("restartPolicy", "Never")
        body = {"metadata": {"name": name, "labels": {"ray.io/originated-from-cr-name": name,
                                                      "ray.io/originated-from-crd": "RayJob"},
                             "ownerReferences": [controller_ref(rj, f"{RAY}/v1", "RayJob")]},
                "spec": {"backoffLimit": 2, "template": tmpl}}
        self.store.create(jobs_r, ns, body)
