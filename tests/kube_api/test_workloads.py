"""The stand-ins for third-party workload controllers and their admission
rules, each against a running server with the kinds' CRDs
(tests/kube_api/crds) installed.

Run: python3 -m unittest discover -s tests/kube_api -p 'test_*.py'
"""

import hashlib
import os
import time
import unittest

import yaml

from test_apiserver import Server, causes, wait

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD_CRDS = os.path.join(HERE, "crds")
NS = "/namespaces/default"
PODS = "/api/v1" + NS + "/pods"
JOBS = "/apis/batch/v1" + NS + "/jobs"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1" + NS + "/trainjobs"
RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2" + NS + "/jobsets"
PYTORCHJOBS = "/apis/kubeflow.org/v1" + NS + "/pytorchjobs"
RAYCLUSTERS = "/apis/ray.io/v1" + NS + "/rayclusters"
RAYJOBS = "/apis/ray.io/v1" + NS + "/rayjobs"
LWSS = "/apis/leaderworkerset.x-k8s.io/v1" + NS + "/leaderworkersets"
STSS = "/apis/apps/v1" + NS + "/statefulsets"


def pod_spec(name="main", gpus=0, cpu="1"):
    requests = {"cpu": cpu}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    return {"containers": [{"name": name, "image": "img", "resources": {"requests": requests}}]}


class Workloads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server("--pod-termination-secs", "0.2")
        for f in sorted(os.listdir(WORKLOAD_CRDS)):
            if not f.endswith(".yaml"):
                continue  # trainer-versions/: older TrainJob schemas, installed by their own tests
            with open(os.path.join(WORKLOAD_CRDS, f), encoding="utf-8") as fh:
                cls.srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(fh))

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    # -- helpers

    def pods(self, **labels):
        items = self.srv.ok("GET", PODS)["items"]
        return sorted((p for p in items if all((p["metadata"].get("labels") or {}).get(k) == v
                                               for k, v in labels.items())),
                      key=lambda p: p["metadata"]["name"])

    def run_pod(self, pod, phase="Running"):
        self.srv.status_merge(PODS + "/" + pod["metadata"]["name"], {
            "phase": phase, "conditions": [{"type": "Ready", "status": "True" if phase == "Running" else "False"}]})

    def cond(self, obj, ctype):
        return next((c["status"] for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype),
                    None)

    def patch(self, path, body):
        code, obj, _ = self.srv.merge(path, body)
        self.assertEqual(code, 200, obj)
        return obj


class TrainJobs(Workloads):
    def setUp(self):
        self.srv.req("POST", RUNTIMES, {"metadata": {"name": "torch"}, "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": [
                {"name": "launcher", "template": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never", **pod_spec("launcher")}}}}},
                {"name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"restartPolicy": "Never", **pod_spec("node", gpus=1)}}}}},
            ]}}}})

    def trainjob(self, name, suspend=True, **spec):
        body = {"metadata": {"name": name}, "spec": {
            "runtimeRef": {"name": "torch"}, "suspend": suspend,
            "trainer": {"numNodes": 2, "resourcesPerNode": {"requests": {"nvidia.com/gpu": "8"}}}, **spec}}
        return self.srv.ok("POST", TRAINJOBS, body)

    def children(self, name):
        return sorted((j for j in self.srv.ok("GET", JOBS)["items"]
                       if (j["metadata"].get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name") == name),
                      key=lambda j: j["metadata"]["name"])

    def test_defaults_and_child_jobs_created_suspended(self):
        tj = self.trainjob("tj-a")
        self.assertEqual(tj["spec"]["runtimeRef"]["kind"], "ClusterTrainingRuntime")
        self.assertEqual(tj["spec"]["managedBy"], "trainer.kubeflow.org/trainjob-controller")
        jobs = self.children("tj-a")
        self.assertEqual([j["metadata"]["name"] for j in jobs], ["tj-a-launcher-0", "tj-a-node-0"])
        self.assertTrue(all(j["spec"]["suspend"] for j in jobs))
        node = jobs[1]["spec"]
        # numNodes from the TrainJob overrides mlPolicy.numNodes; resourcesPerNode reaches the node container
        self.assertEqual((node["parallelism"], node["completions"]), (2, 2))
        self.assertEqual(node["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "8")
        self.assertEqual(self.pods(**{"jobset.sigs.k8s.io/jobset-name": "tj-a"}), [])
        tj = self.srv.ok("GET", TRAINJOBS + "/tj-a")
        self.assertEqual(self.cond(tj, "Suspended"), "True")
        self.assertEqual({s["name"]: s["suspended"] for s in tj["status"]["jobsStatus"]}, {"launcher": 1, "node": 1})

    def test_runtime_patches_only_while_suspended_then_propagated_on_resume(self):
        self.trainjob("tj-b")
        patch = [{"manager": "muster.dev/controller", "trainingRuntimeSpec": {"template": {"spec": {
            "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
                "metadata": {"labels": {"muster.dev/gang": "g"}},
                "spec": {"nodeSelector": {"muster.dev/launch-set": "ls-1"}}}}}}]}}}}]
        # suspended before and unsuspended in the same request: allowed, stamped with a time
        tj = self.patch(TRAINJOBS + "/tj-b", {"spec": {"runtimePatches": patch, "suspend": False}})
        self.assertTrue(tj["spec"]["runtimePatches"][0]["time"])
        pods = self.pods(**{"jobset.sigs.k8s.io/replicatedjob-name": "node", "jobset.sigs.k8s.io/jobset-name": "tj-b"})
        self.assertEqual(len(pods), 2)
        self.assertEqual({p["spec"]["nodeSelector"]["muster.dev/launch-set"] for p in pods}, {"ls-1"})
        self.assertEqual({p["metadata"]["labels"]["muster.dev/gang"] for p in pods}, {"g"})
        launcher = self.pods(**{"jobset.sigs.k8s.io/replicatedjob-name": "launcher",
                                "jobset.sigs.k8s.io/jobset-name": "tj-b"})
        self.assertNotIn("nodeSelector", launcher[0]["spec"])
        # running: the patches are frozen
        patch[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
            "spec"]["nodeSelector"] = {"muster.dev/launch-set": "ls-2"}
        code, err, _ = self.srv.merge(TRAINJOBS + "/tj-b", {"spec": {"runtimePatches": patch}})
        self.assertEqual(code, 422, err)
        self.assertIn(("spec.runtimePatches", "FieldValueForbidden"), causes(err))
        # the trainer is immutable (a CEL transition rule)
        code, err, _ = self.srv.merge(TRAINJOBS + "/tj-b", {"spec": {"trainer": {"numNodes": 3}}})
        self.assertEqual(code, 422, err)
        self.assertIn("field is immutable", err["message"])

    def test_suspend_deletes_pods_and_resume_merges_directives(self):
        self.trainjob("tj-c", suspend=False)
        self.assertEqual(len(self.pods(**{"jobset.sigs.k8s.io/jobset-name": "tj-c"})), 3)
        self.patch(TRAINJOBS + "/tj-c", {"spec": {"suspend": True}})
        wait("pods deleted", lambda: not self.pods(**{"jobset.sigs.k8s.io/jobset-name": "tj-c"}))
        tj = self.srv.ok("GET", TRAINJOBS + "/tj-c")
        self.assertEqual(self.cond(tj, "Suspended"), "True")
        self.assertTrue(all(j["spec"]["suspend"] for j in self.children("tj-c")))
        patch = [{"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": {
                "nodeSelector": {"pool": "b"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}}}}}]}}}}]
        self.patch(TRAINJOBS + "/tj-c", {"spec": {"runtimePatches": patch}})
        self.patch(TRAINJOBS + "/tj-c", {"spec": {"suspend": False}})
        pods = self.pods(**{"jobset.sigs.k8s.io/jobset-name": "tj-c", "jobset.sigs.k8s.io/replicatedjob-name": "node"})
        self.assertEqual(len(pods), 2)
        self.assertEqual(pods[0]["spec"]["nodeSelector"], {"pool": "b"})
        # the template's toleration, then DefaultTolerationSeconds' two
        self.assertEqual(pods[0]["spec"]["tolerations"][0], {"key": "gpu", "operator": "Exists"})
        tj = self.srv.ok("GET", TRAINJOBS + "/tj-c")
        self.assertEqual(self.cond(tj, "Suspended"), "False")
        self.assertEqual(next(c for c in tj["status"]["conditions"] if c["type"] == "Suspended")["reason"], "Resumed")

    def test_all_child_jobs_complete_the_trainjob(self):
        self.trainjob("tj-d", suspend=False)
        for p in self.pods(**{"jobset.sigs.k8s.io/jobset-name": "tj-d"}):
            self.run_pod(p, "Succeeded")
        tj = wait("complete", lambda: (lambda t: t if self.cond(t, "Complete") == "True" else None)(
            self.srv.ok("GET", TRAINJOBS + "/tj-d")))
        self.assertEqual({s["name"]: s["succeeded"] for s in tj["status"]["jobsStatus"]}, {"launcher": 1, "node": 1})


    def jobset(self, name):
        return self.srv.ok("GET", JOBSETS + "/" + name)

    def test_the_trainer_builds_a_jobset_it_owns_suspended_as_the_trainjob(self):
        self.srv.req("POST", RUNTIMES, {"metadata": {"name": "torch-queued"}, "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"metadata": {"labels": {"muster.dev/queue": "q"}}, "spec": {"replicatedJobs": [
                {"name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"restartPolicy": "Never", **pod_spec("node", gpus=1)}}}}},
            ]}}}})
        tj = self.trainjob("tj-e", runtimeRef={"name": "torch-queued"})
        js = self.jobset("tj-e")
        # the runtime template's labels, a controller reference to the TrainJob, its suspend
        self.assertEqual(js["metadata"]["labels"], {"muster.dev/queue": "q"})
        self.assertEqual(js["metadata"]["ownerReferences"], [{
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "tj-e",
            "uid": tj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}])
        self.assertTrue(js["spec"]["suspend"])
        node = js["spec"]["replicatedJobs"][0]["template"]["spec"]
        self.assertEqual((node["parallelism"], node["completions"]), (2, 2))
        self.patch(TRAINJOBS + "/tj-e", {"spec": {"suspend": False}})
        self.assertFalse(self.jobset("tj-e")["spec"]["suspend"])
        # running: a changed runtime does not reach the JobSet; suspended again, it does
        self.patch(RUNTIMES + "/torch-queued", {"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}})
        self.assertNotIn("team", self.jobset("tj-e")["metadata"]["labels"])
        self.patch(TRAINJOBS + "/tj-e", {"spec": {"suspend": True}})
        js = self.jobset("tj-e")
        self.assertTrue(js["spec"]["suspend"])
        self.assertEqual(js["metadata"]["labels"].get("team"), "a")

    def test_an_mpi_launcher_run_as_a_node_is_one_of_the_nodes(self):
        self.srv.req("POST", RUNTIMES, {"metadata": {"name": "mpi"}, "spec": {
            "mlPolicy": {"numNodes": 1, "mpi": {"runLauncherAsNode": True}},
            "template": {"spec": {"replicatedJobs": [
                {"name": "launcher", "template": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never", **pod_spec("node", gpus=1)}}}}},
                {"name": "node", "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"restartPolicy": "Never", **pod_spec("node", gpus=1)}}}}},
            ]}}}})
        self.srv.ok("POST", TRAINJOBS, {"metadata": {"name": "tj-mpi"}, "spec": {
            "runtimeRef": {"name": "mpi"}, "suspend": False, "trainer": {"numNodes": 3}}})
        counts = {rj["name"]: rj["template"]["spec"]["parallelism"]
                  for rj in self.jobset("tj-mpi")["spec"]["replicatedJobs"]}
        self.assertEqual(counts, {"launcher": 1, "node": 2})
        self.assertEqual(len(self.pods(**{"jobset.sigs.k8s.io/jobset-name": "tj-mpi"})), 3)


class TrainerVersions(unittest.TestCase):
    """A TrainJob CRD of an older Kubeflow Trainer prunes spec.runtimePatches."""

    def served(self, version):
        srv = Server()
        self.addCleanup(srv.stop)
        with open(os.path.join(WORKLOAD_CRDS, "trainer-versions", f"trainjob-{version}.yaml"),
                  encoding="utf-8") as fh:
            srv.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(fh))
        return srv

    def test_runtime_patches_are_pruned_before_v2_2(self):
        patch = [{"manager": "muster.dev/controller", "trainingRuntimeSpec": {}}]
        for version, field, override in [
                ("v2.1", "podTemplateOverrides", [{"targetJobs": [{"name": "node"}],
                                                   "spec": {"nodeSelector": {"a": "b"}}}]),
                ("v2.0", "podSpecOverrides", [{"targetJobs": [{"name": "node"}], "nodeSelector": {"a": "b"}}])]:
            srv = self.served(version)
            tj = srv.ok("POST", TRAINJOBS, {"metadata": {"name": "tj"}, "spec": {
                "runtimeRef": {"name": "torch"}, "suspend": True, "runtimePatches": patch, field: override}})
            self.assertNotIn("runtimePatches", tj["spec"], version)
            self.assertEqual(tj["spec"][field], override, version)
            code, tj, _ = srv.merge(TRAINJOBS + "/tj", {"spec": {"runtimePatches": patch}})
            self.assertEqual(code, 200, tj)
            self.assertNotIn("runtimePatches", tj["spec"], version)


class PyTorchJobs(Workloads):
    def pytorchjob(self, name, suspend=True, workers=2, **extra):
        spec = {"runPolicy": {"suspend": suspend}, "pytorchReplicaSpecs": {
            "master": {"replicas": 1, "template": {"spec": pod_spec("pytorch")}},
            "Worker": {"replicas": workers, "template": {"spec": pod_spec("pytorch", gpus=8)}}}, **extra}
        return self.srv.req("POST", PYTORCHJOBS, {"metadata": {"name": name}, "spec": spec})

    def test_webhook_defaults_and_validation(self):
        code, obj, _ = self.pytorchjob("pt-a")
        self.assertEqual(code, 201, obj)
        spec = obj["spec"]
        self.assertEqual(set(spec["pytorchReplicaSpecs"]), {"Master", "Worker"})  # camel case
        self.assertEqual(spec["pytorchReplicaSpecs"]["Worker"]["restartPolicy"], "OnFailure")
        self.assertEqual(spec["runPolicy"]["cleanPodPolicy"], "None")
        self.assertEqual(spec["nprocPerNode"], "auto")
        ports = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["ports"]
        self.assertEqual(ports, [{"name": "pytorchjob-port", "containerPort": 23456}])
        bad = {"metadata": {"name": "pt-bad"}, "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 2, "template": {"spec": pod_spec("other")}},
            "Chief": {"replicas": 1, "template": {"spec": pod_spec("pytorch")}}}}}
        code, err, _ = self.srv.req("POST", PYTORCHJOBS, bad)
        self.assertEqual(code, 422, err)
        got = causes(err)
        self.assertIn(("spec.pytorchReplicaSpecs[Master].replicas", "FieldValueForbidden"), got)
        self.assertIn(("spec.pytorchReplicaSpecs[Master].template.spec.containers", "FieldValueRequired"), got)
        self.assertIn(("spec.pytorchReplicaSpecs[Chief]", "FieldValueNotSupported"), got)

    def test_suspend_resume_resets_start_time_and_completes_on_master(self):
        self.pytorchjob("pt-b")
        job = self.srv.ok("GET", PYTORCHJOBS + "/pt-b")
        self.assertNotIn("startTime", job.get("status") or {})
        self.assertEqual(self.pods(**{"training.kubeflow.org/job-name": "pt-b"}), [])
        self.patch(PYTORCHJOBS + "/pt-b", {"spec": {"runPolicy": {"suspend": False}}})
        pods = self.pods(**{"training.kubeflow.org/job-name": "pt-b"})
        self.assertEqual([p["metadata"]["name"] for p in pods], ["pt-b-master-0", "pt-b-worker-0", "pt-b-worker-1"])
        self.assertEqual(pods[0]["metadata"]["labels"]["training.kubeflow.org/job-role"], "master")
        self.assertEqual(pods[1]["spec"]["restartPolicy"], "OnFailure")
        started = self.srv.ok("GET", PYTORCHJOBS + "/pt-b")["status"]["startTime"]
        self.patch(PYTORCHJOBS + "/pt-b", {"spec": {"runPolicy": {"suspend": True}}})
        wait("pods deleted", lambda: not self.pods(**{"training.kubeflow.org/job-name": "pt-b"}))
        job = self.srv.ok("GET", PYTORCHJOBS + "/pt-b")
        self.assertEqual(self.cond(job, "Suspended"), "True")
        self.assertEqual(job["status"]["replicaStatuses"]["Worker"]["active"], 0)
        self.assertEqual(job["status"]["startTime"], started)  # kept while suspended
        time.sleep(1.1)
        self.patch(PYTORCHJOBS + "/pt-b", {"spec": {"runPolicy": {"suspend": False}}})
        job = self.srv.ok("GET", PYTORCHJOBS + "/pt-b")
        self.assertEqual(self.cond(job, "Suspended"), "False")
        self.assertNotEqual(job["status"]["startTime"], started)  # reset on resume
        pods = self.pods(**{"training.kubeflow.org/job-name": "pt-b"})
        for p in pods:
            self.run_pod(p)
        self.assertEqual(self.cond(self.srv.ok("GET", PYTORCHJOBS + "/pt-b"), "Running"), "True")
        self.run_pod(pods[0], "Succeeded")
        job = wait("succeeded", lambda: (lambda j: j if self.cond(j, "Succeeded") == "True" else None)(
            self.srv.ok("GET", PYTORCHJOBS + "/pt-b")))
        self.assertTrue(job["status"]["completionTime"])
        self.assertEqual(self.cond(job, "Running"), "False")
        # cleanPodPolicy None keeps the pods
        self.assertEqual(len(self.pods(**{"training.kubeflow.org/job-name": "pt-b"})), 3)


class RayClusters(Workloads):
    def raycluster(self, name, suspend=False, replicas=2, **spec):
        return self.srv.req("POST", RAYCLUSTERS, {"metadata": {"name": name}, "spec": {
            "suspend": suspend, "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec("ray-head")}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": replicas, "minReplicas": 1, "maxReplicas": 3,
                                  "rayStartParams": {}, "template": {"spec": pod_spec("ray-worker", gpus=8)}}],
            **spec}})

    def test_autoscaling_sidecar_on_the_head_and_scale_down_only_by_name(self):
        # common/pod.go BuildAutoscalerContainer; reconcilePods without random deletes
        self.raycluster("rc-as", replicas=3, enableInTreeAutoscaling=True)
        head = self.pods(**{"ray.io/cluster": "rc-as", "ray.io/node-type": "head"})[0]
        names = [c["name"] for c in head["spec"]["containers"]]
        self.assertEqual(names, ["ray-head", "autoscaler"])
        self.assertEqual(head["spec"]["containers"][1]["resources"],
                         {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"}})
        workers = lambda: self.pods(**{"ray.io/cluster": "rc-as", "ray.io/node-type": "worker"})
        self.assertEqual(len(workers()), 3)
        # the autoscaler lowers replicas: no worker goes until it is named
        rc = self.srv.ok("GET", RAYCLUSTERS + "/rc-as")
        rc["spec"]["workerGroupSpecs"][0]["replicas"] = 1
        self.srv.ok("PUT", RAYCLUSTERS + "/rc-as", rc)
        self.assertEqual(len(workers()), 3)
        victim = workers()[0]["metadata"]["name"]
        rc = self.srv.ok("GET", RAYCLUSTERS + "/rc-as")
        rc["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": [victim]}
        self.srv.ok("PUT", RAYCLUSTERS + "/rc-as", rc)
        self.assertNotIn(victim, [p["metadata"]["name"] for p in workers()])
        self.assertEqual(len(workers()), 2)
        # and raises them: more workers, on nodes nobody admitted
        rc = self.srv.ok("GET", RAYCLUSTERS + "/rc-as")
        rc["spec"]["workerGroupSpecs"][0]["replicas"] = 3
        rc["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {}
        self.srv.ok("PUT", RAYCLUSTERS + "/rc-as", rc)
        self.assertEqual(len(workers()), 3)

    def test_a_suspended_group_with_the_autoscaler_is_invalid(self):
        body = {"metadata": {"name": "rc-inv"}, "spec": {
            "enableInTreeAutoscaling": True,
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec("ray-head")}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "suspend": True, "rayStartParams": {},
                                  "template": {"spec": pod_spec("ray-worker", gpus=8)}}]}}
        self.srv.ok("POST", RAYCLUSTERS, body)
        self.assertEqual(self.pods(**{"ray.io/cluster": "rc-inv"}), [])

    def test_webhook_rules(self):
        body = {"metadata": {"name": "dup"}, "spec": {"headGroupSpec": {"template": {"spec": pod_spec()}},
                                                    "workerGroupSpecs": [{"groupName": "a", "template": {}},
                                                                         {"groupName": "a", "template": {}}]}}
        code, err, _ = self.srv.req("POST", RAYCLUSTERS, body)
        self.assertEqual(code, 422, err)
        self.assertIn(("spec.workerGroupSpecs[1]", "FieldValueInvalid"), causes(err))
        code, err, _ = self.raycluster("r" * 54)
        self.assertEqual(code, 422, err)

    def test_pods_ready_state_then_atomic_suspend(self):
        code, rc, _ = self.raycluster("rc-a")
        self.assertEqual(code, 201, rc)
        self.assertEqual(rc["spec"]["workerGroupSpecs"][0]["numOfHosts"], 1)  # schema default
        pods = self.pods(**{"ray.io/cluster": "rc-a"})
        self.assertEqual(sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in pods), ["head", "worker", "worker"])
        for p in pods:
            self.run_pod(p)
        rc = self.srv.ok("GET", RAYCLUSTERS + "/rc-a")
        self.assertEqual((rc["status"]["state"], rc["status"]["readyWorkerReplicas"]), ("ready", 2))
        self.assertEqual(self.cond(rc, "HeadPodReady"), "True")
        self.patch(RAYCLUSTERS + "/rc-a", {"spec": {"suspend": True}})
        wait("suspended", lambda: self.cond(self.srv.ok("GET", RAYCLUSTERS + "/rc-a"), "RayClusterSuspended") == "True")
        rc = self.srv.ok("GET", RAYCLUSTERS + "/rc-a")
        self.assertEqual(rc["status"]["state"], "suspended")
        self.assertEqual(self.cond(rc, "RayClusterSuspending"), "False")
        self.assertEqual(self.pods(**{"ray.io/cluster": "rc-a"}), [])
        self.patch(RAYCLUSTERS + "/rc-a", {"spec": {"suspend": False}})
        self.assertEqual(self.cond(self.srv.ok("GET", RAYCLUSTERS + "/rc-a"), "RayClusterSuspended"), "False")
        self.assertEqual(len(self.pods(**{"ray.io/cluster": "rc-a"})), 3)

    def test_worker_replicas_clamped_and_workers_to_delete(self):
        self.raycluster("rc-b", replicas=5)
        self.assertEqual(len(self.pods(**{"ray.io/cluster": "rc-b", "ray.io/node-type": "worker"})), 3)  # max 3
        victim = self.pods(**{"ray.io/cluster": "rc-b", "ray.io/node-type": "worker"})[0]["metadata"]["name"]
        rc = self.srv.ok("GET", RAYCLUSTERS + "/rc-b")
        rc["spec"]["workerGroupSpecs"][0]["replicas"] = 2
        rc["spec"]["workerGroupSpecs"][0]["scaleStrategy"] = {"workersToDelete": [victim]}
        self.srv.ok("PUT", RAYCLUSTERS + "/rc-b", rc)
        names = [p["metadata"]["name"] for p in self.pods(**{"ray.io/cluster": "rc-b", "ray.io/node-type": "worker"})]
        self.assertEqual(len(names), 2)
        self.assertNotIn(victim, names)


class RayJobs(Workloads):
    def rayjob(self, name, suspend=True, shutdown=True, **spec):
        return self.srv.req("POST", RAYJOBS, {"metadata": {"name": name}, "spec": {
            **spec, "entrypoint": "python train.py", "suspend": suspend, "shutdownAfterJobFinishes": shutdown,
            "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": pod_spec("ray-head")}},
                               "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 1,
                                                     "maxReplicas": 1, "rayStartParams": {},
                                                     "template": {"spec": pod_spec("ray-worker", gpus=8)}}]}}})

    def get(self, name):
        return self.srv.ok("GET", RAYJOBS + "/" + name)

    def test_created_suspended_never_creates_a_cluster(self):
        code, obj, _ = self.rayjob("rj-a")
        self.assertEqual(code, 201, obj)
        rj = self.get("rj-a")
        self.assertEqual(rj["status"]["jobDeploymentStatus"], "Suspended")
        self.assertIn("ray.io/rayjob-finalizer", rj["metadata"]["finalizers"])
        self.assertEqual(self.srv.ok("GET", RAYCLUSTERS)["items"], [])
        # deleting waits for the finalizer, which the controller removes
        self.srv.ok("DELETE", RAYJOBS + "/rj-a")
        wait("rayjob gone", lambda: self.srv.req("GET", RAYJOBS + "/rj-a")[0] == 404)

    def test_suspend_needs_shutdown_after_job_finishes(self):
        self.rayjob("rj-b", shutdown=False)
        rj = self.get("rj-b")
        self.assertEqual((rj["status"]["jobDeploymentStatus"], rj["status"]["reason"]),
                         ("ValidationFailed", "ValidationFailed"))

    def clusters(self, job):
        return [c for c in self.srv.ok("GET", RAYCLUSTERS)["items"]
                if c["metadata"]["labels"].get("ray.io/originated-from-cr-name") == job]

    def ready_cluster(self, job):
        rc = wait("cluster", lambda: (self.clusters(job) or [None])[0])
        for p in self.pods(**{"ray.io/cluster": rc["metadata"]["name"]}):
            self.run_pod(p)
        return rc

    def status(self, name):
        return self.get(name)["status"]["jobDeploymentStatus"]

    def test_interactive_mode_waits_and_ignores_suspend_until_its_job_id(self):
        # rayjob_controller.go: Initializing → Waiting; the Waiting case never looks at suspend
        self.rayjob("rj-i", suspend=False, submissionMode="InteractiveMode")
        self.assertNotIn("jobId", self.get("rj-i")["status"])
        rc = self.ready_cluster("rj-i")
        wait("waiting", lambda: self.status("rj-i") == "Waiting")
        self.patch(RAYJOBS + "/rj-i", {"spec": {"suspend": True}})
        time.sleep(0.3)
        self.assertEqual(self.status("rj-i"), "Waiting")
        self.assertEqual([c["metadata"]["name"] for c in self.clusters("rj-i")], [rc["metadata"]["name"]])
        self.assertEqual(self.srv.req("GET", JOBS + "/rj-i")[0], 404, "no submitter")
        # the user's job id moves it to Running, where the flag is honoured
        self.patch(RAYJOBS + "/rj-i", {"spec": {"jobId": "raysubmit_1"}})
        wait("suspended", lambda: self.status("rj-i") == "Suspended")
        self.assertEqual(self.clusters("rj-i"), [])

    def test_interactive_mode_refuses_retries(self):
        self.rayjob("rj-ib", submissionMode="InteractiveMode", backoffLimit=1)
        self.assertEqual(self.status("rj-ib"), "ValidationFailed")

    def test_http_mode_runs_without_a_submitter(self):
        self.rayjob("rj-h", suspend=False, submissionMode="HTTPMode")
        self.ready_cluster("rj-h")
        wait("running", lambda: self.status("rj-h") == "Running")
        self.assertEqual(self.srv.req("GET", JOBS + "/rj-h")[0], 404)
        self.assertEqual(self.get("rj-h")["status"]["jobStatus"], "RUNNING")

    def test_sidecar_mode_puts_the_submitter_in_the_head_pod(self):
        self.rayjob("rj-s", suspend=False, submissionMode="SidecarMode")
        rc = wait("cluster", lambda: (self.clusters("rj-s") or [None])[0])
        head = self.pods(**{"ray.io/cluster": rc["metadata"]["name"], "ray.io/node-type": "head"})[0]
        self.assertEqual([c["name"] for c in head["spec"]["containers"]], ["ray-head", "ray-job-submitter"])
        self.assertEqual(head["spec"]["containers"][1]["resources"]["requests"], {"cpu": "500m", "memory": "200Mi"})
        self.assertEqual(self.srv.req("GET", JOBS + "/rj-s")[0], 404, "no submitter Job")

    def test_run_suspend_resume_complete(self):
        self.rayjob("rj-c")
        self.patch(RAYJOBS + "/rj-c", {"spec": {"suspend": False}})
        rj = self.get("rj-c")
        self.assertEqual(rj["status"]["jobDeploymentStatus"], "Initializing")
        first = self.ready_cluster("rj-c")
        rj = wait("running", lambda: (lambda r: r if r["status"]["jobDeploymentStatus"] == "Running" else None)(
            self.get("rj-c")))
        submitter = self.srv.ok("GET", JOBS + "/rj-c")
        container = submitter["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual((container["name"], container["resources"]["requests"]["cpu"]), ("ray-job-submitter", "500m"))
        # suspending deletes the cluster and the submitter
        self.patch(RAYJOBS + "/rj-c", {"spec": {"suspend": True}})
        rj = wait("suspended", lambda: (lambda r: r if r["status"]["jobDeploymentStatus"] == "Suspended" else None)(
            self.get("rj-c")))
        self.assertNotIn("rayClusterName", rj["status"])
        self.assertEqual(self.clusters("rj-c"), [])
        self.assertEqual(self.srv.req("GET", JOBS + "/rj-c")[0], 404)
        # resumed: a new cluster; the submitter's success completes the job and shuts the cluster down
        self.patch(RAYJOBS + "/rj-c", {"spec": {"suspend": False}})
        second = self.ready_cluster("rj-c")
        self.assertNotEqual(first["metadata"]["name"], second["metadata"]["name"])
        wait("submitter pod", lambda: self.pods(**{"batch.kubernetes.io/job-name": "rj-c"}))
        self.run_pod(self.pods(**{"batch.kubernetes.io/job-name": "rj-c"})[0], "Succeeded")
        rj = wait("complete", lambda: (lambda r: r if r["status"]["jobDeploymentStatus"] == "Complete" else None)(
            self.get("rj-c")))
        self.assertEqual((rj["status"]["jobStatus"], rj["status"]["succeeded"]), ("SUCCEEDED", 1))
        wait("cluster deleted", lambda: not self.clusters("rj-c"))


class LeaderWorkerSets(Workloads):
    def lws(self, name, replicas=2, size=3, **spec):
        return self.srv.req("POST", LWSS, {"metadata": {"name": name}, "spec": {
            "replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": {
                "metadata": {"labels": {"app": name}}, "spec": pod_spec("w", gpus=8)}}, **spec}})

    def group(self, name, g):
        return self.pods(**{"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": str(g)})

    def test_groups_of_leader_and_workers(self):
        code, obj, _ = self.lws("lws-a")
        self.assertEqual(code, 201, obj)
        self.assertEqual(obj["spec"]["leaderWorkerTemplate"]["restartPolicy"], "RecreateGroupOnPodRestart")
        names = [p["metadata"]["name"] for p in self.pods(**{"leaderworkerset.sigs.k8s.io/name": "lws-a"})]
        self.assertEqual(names, ["lws-a-0", "lws-a-0-1", "lws-a-0-2", "lws-a-1", "lws-a-1-1", "lws-a-1-2"])
        worker = self.group("lws-a", 0)[1]
        self.assertEqual(worker["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"], "lws-a-0")
        self.assertEqual(worker["metadata"]["labels"]["app"], "lws-a")
        for p in self.group("lws-a", 0):
            self.run_pod(p)
        lws = self.srv.ok("GET", LWSS + "/lws-a")
        self.assertEqual((lws["status"]["replicas"], lws["status"]["readyReplicas"]), (2, 1))

    def bind(self, name, node="n1"):
        self.srv.ok("POST", PODS + "/" + name + "/binding", {"target": {"kind": "Node", "name": node}})

    def sts(self, name):
        return self.srv.ok("GET", STSS + "/" + name)

    def test_a_lost_worker_recreates_its_group_only(self):
        self.lws("lws-b")
        for g in (0, 1):
            for p in self.group("lws-b", g):
                self.bind(p["metadata"]["name"])  # bound pods terminate gracefully, seen by the controller
        before = {p["metadata"]["uid"] for p in self.group("lws-b", 0)}
        leader1 = self.group("lws-b", 1)[0]["metadata"]["uid"]
        self.srv.ok("DELETE", PODS + "/lws-b-0-2")
        # RecreateGroupOnPodRestart: the leader is deleted, its worker StatefulSet and workers with it
        self.assertIn("deletionTimestamp", self.srv.ok("GET", PODS + "/lws-b-0")["metadata"])
        wait("group 0 recreated", lambda: (lambda g: len(g) == 3 and not any(
            "deletionTimestamp" in p["metadata"] or p["metadata"]["uid"] in before for p in g))(
            self.group("lws-b", 0)))
        self.assertEqual(self.group("lws-b", 1)[0]["metadata"]["uid"], leader1)
        self.assertEqual(len(self.group("lws-b", 1)), 3)

    def test_a_worker_gone_unseen_or_under_policy_none_comes_back_alone(self):
        # deleted while unbound, the pod goes at once: the LeaderWorkerSet
        # controller never sees it terminating and its StatefulSet makes it again
        self.lws("lws-u", replicas=1)
        leader = self.group("lws-u", 0)[0]["metadata"]["uid"]
        self.srv.ok("DELETE", PODS + "/lws-u-0-1")
        wait("worker made again", lambda: len(self.group("lws-u", 0)) == 3)
        self.assertEqual(self.group("lws-u", 0)[0]["metadata"]["uid"], leader)
        # restartPolicy None: a bound worker terminating is replaced alone too
        self.lws("lws-n", replicas=1, size=2)
        self.patch(LWSS + "/lws-n", {"spec": {"leaderWorkerTemplate": {"restartPolicy": "None"}}})
        leader = self.group("lws-n", 0)[0]["metadata"]["uid"]
        self.bind("lws-n-0-1")
        self.srv.ok("DELETE", PODS + "/lws-n-0-1")
        wait("worker made again", lambda: (lambda g: len(g) == 2 and "deletionTimestamp" not in g[1]["metadata"])(
            self.group("lws-n", 0)))
        self.assertEqual(self.group("lws-n", 0)[0]["metadata"]["uid"], leader)

    def test_a_restarted_container_recreates_the_group(self):
        self.lws("lws-r", replicas=1, size=2)
        leader = self.group("lws-r", 0)[0]["metadata"]["uid"]
        self.srv.status_merge(PODS + "/lws-r-0-1", {"phase": "Running", "containerStatuses": [
            {"name": "w", "restartCount": 1, "ready": False, "image": "img", "imageID": "",
             "state": {"running": {}}}]})
        wait("group recreated", lambda: (lambda g: len(g) == 2 and g[0]["metadata"]["uid"] != leader)(
            self.group("lws-r", 0)))

    def test_pods_are_owned_by_statefulsets(self):
        self.lws("lws-o", replicas=2, size=3)
        lws = self.srv.ok("GET", LWSS + "/lws-o")
        leaders = self.sts("lws-o")
        self.assertEqual(leaders["metadata"]["ownerReferences"][0]["uid"], lws["metadata"]["uid"])
        self.assertEqual((leaders["spec"]["replicas"], leaders["spec"]["podManagementPolicy"]), (2, "Parallel"))
        self.assertEqual(leaders["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/replicas"], "2")
        leader = self.srv.ok("GET", PODS + "/lws-o-1")
        ref = leader["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["kind"], ref["name"], ref["controller"]), ("StatefulSet", "lws-o", True))
        # the LeaderWorkerSet pod webhook's labels
        labels = leader["metadata"]["labels"]
        self.assertEqual((labels["leaderworkerset.sigs.k8s.io/group-index"],
                          labels["leaderworkerset.sigs.k8s.io/worker-index"]), ("1", "0"))
        self.assertEqual(labels["leaderworkerset.sigs.k8s.io/group-key"],
                         hashlib.sha1(b"default/lws-o-1").hexdigest())
        self.assertEqual(leader["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"], "3")
        workers = self.sts("lws-o-1")
        ref = workers["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["kind"], ref["name"], ref["uid"]), ("Pod", "lws-o-1", leader["metadata"]["uid"]))
        self.assertEqual((workers["spec"]["replicas"], workers["spec"]["ordinals"], workers["spec"]["podManagementPolicy"]),
                         (2, {"start": 1}, "Parallel"))
        worker = self.srv.ok("GET", PODS + "/lws-o-1-2")
        ref = worker["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["kind"], ref["name"]), ("StatefulSet", "lws-o-1"))
        wl = worker["metadata"]["labels"]
        self.assertEqual((wl["leaderworkerset.sigs.k8s.io/worker-index"], wl["leaderworkerset.sigs.k8s.io/group-index"],
                          wl["leaderworkerset.sigs.k8s.io/group-key"]), ("2", "1", labels["leaderworkerset.sigs.k8s.io/group-key"]))
        # deleting the LeaderWorkerSet takes everything with it
        self.srv.ok("DELETE", LWSS + "/lws-o")
        self.assertEqual(self.pods(**{"leaderworkerset.sigs.k8s.io/name": "lws-o"}), [])
        self.assertEqual(self.srv.req("GET", STSS + "/lws-o-1")[0], 404)

    def test_leader_ready_creates_the_worker_statefulset_once_the_leader_is_ready(self):
        self.lws("lws-lr", replicas=1, startupPolicy="LeaderReady")
        self.assertEqual(self.srv.req("GET", STSS + "/lws-lr-0")[0], 404)
        self.run_pod(self.group("lws-lr", 0)[0], phase="Pending")  # not Ready
        self.assertEqual(self.srv.req("GET", STSS + "/lws-lr-0")[0], 404)
        self.run_pod(self.group("lws-lr", 0)[0])
        self.assertEqual(self.sts("lws-lr-0")["spec"]["replicas"], 2)
        self.assertEqual(len(self.group("lws-lr", 0)), 3)

    def test_exclusive_topology_waits_for_the_leaders_node(self):
        self.srv.ok("POST", "/api/v1/nodes", {"metadata": {"name": "ex-node", "labels": {"example.com/rack": "r7"}}})
        self.srv.req("POST", LWSS, {"metadata": {"name": "lws-x", "annotations": {
            "leaderworkerset.sigs.k8s.io/exclusive-topology": "example.com/rack"}}, "spec": {
            "replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": pod_spec("w")}}}})
        leader = self.srv.ok("GET", PODS + "/lws-x-0")
        key = leader["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-key"]
        aff = leader["spec"]["affinity"]
        self.assertEqual(aff["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"], [{
            "labelSelector": {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/group-key", "operator": "In",
                                                    "values": [key]}]}, "topologyKey": "example.com/rack"}])
        self.assertEqual(len(aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]), 1)
        self.assertEqual(self.srv.req("GET", STSS + "/lws-x-0")[0], 404)
        self.bind("lws-x-0", "ex-node")
        workers = self.sts("lws-x-0")
        self.assertEqual(workers["spec"]["template"]["spec"]["nodeSelector"], {"example.com/rack": "r7"})
        self.assertEqual(self.srv.ok("GET", PODS + "/lws-x-0-1")["spec"]["nodeSelector"], {"example.com/rack": "r7"})

    def test_a_gated_leader_still_gets_its_workers_with_leader_created(self):
        self.srv.req("POST", LWSS, {"metadata": {"name": "lws-g"}, "spec": {
            "replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": {"spec": {
                **pod_spec("w"), "schedulingGates": [{"name": "example.com/hold"}]}}}}})
        # Parallel leader StatefulSet: both gated leaders exist, and each has its workers
        names = [p["metadata"]["name"] for p in self.pods(**{"leaderworkerset.sigs.k8s.io/name": "lws-g"})]
        self.assertEqual(names, ["lws-g-0", "lws-g-0-1", "lws-g-0-2", "lws-g-1", "lws-g-1-1", "lws-g-1-2"])
        for p in self.pods(**{"leaderworkerset.sigs.k8s.io/name": "lws-g"}):
            self.assertEqual(p["status"]["phase"], "Pending")
            self.assertEqual(p["spec"]["schedulingGates"], [{"name": "example.com/hold"}])

    def test_scale_down_and_leader_ready_startup(self):
        self.lws("lws-c", startupPolicy="LeaderReady")
        self.assertEqual([p["metadata"]["name"] for p in self.pods(**{"leaderworkerset.sigs.k8s.io/name": "lws-c"})],
                         ["lws-c-0", "lws-c-1"])
        self.run_pod(self.group("lws-c", 0)[0])
        self.assertEqual(len(self.group("lws-c", 0)), 3)
        self.patch(LWSS + "/lws-c", {"spec": {"replicas": 1}})
        wait("group 1 gone", lambda: not self.group("lws-c", 1))

    def test_size_must_be_positive(self):
        code, err, _ = self.lws("lws-bad", size=0)
        self.assertEqual(code, 422, err)
        self.assertIn(("spec.leaderWorkerTemplate.size", "FieldValueInvalid"), causes(err))


if __name__ == "__main__":
    unittest.main()
