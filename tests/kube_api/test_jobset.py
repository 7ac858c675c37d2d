"""The JobSet stand-in (jobset_controller.py, jobset_rules.py) and the rules
for gated pods, each against a running server.

Run: python3 -m unittest discover -s tests/kube_api -p 'test_*.py'
"""

import os
import time
import unittest

import yaml

from test_apiserver import PODS, Server

HERE = os.path.dirname(os.path.abspath(__file__))
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
JOBS = "/apis/batch/v1/namespaces/default/jobs"


def jobset(name, suspend=True):
    def rjob(rname, replicas, parallelism, gpus):
        return {"name": rname, "replicas": replicas, "template": {"spec": {
            "parallelism": parallelism, "completions": parallelism,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name},
            "spec": {"suspend": suspend, "replicatedJobs": [rjob("driver", 1, 1, 0), rjob("workers", 2, 2, 8)]}}


def pod_template(js, i):
    return js["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]


class JobSetTest(unittest.TestCase):
    def setUp(self):
        self.s = Server()
        with open(os.path.join(HERE, "crds", "jobset.yaml")) as f:
            self.s.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(f))

    def tearDown(self):
        self.s.stop()

    def jobs(self):
        return {j["metadata"]["name"]: j for j in self.s.ok("GET", JOBS)["items"]}

    def wait(self, what, check, secs=5):
        deadline = time.monotonic() + secs
        while time.monotonic() < deadline:
            v = check()
            if v:
                return v
            time.sleep(0.05)
        self.fail(f"timed out waiting for {what}")

    def test_child_jobs_follow_the_jobsets_suspension(self):
        self.s.ok("POST", JOBSETS, jobset("train"))
        jobs = self.jobs()
        self.assertEqual(sorted(jobs), ["train-driver-0", "train-workers-0", "train-workers-1"])
        for j in jobs.values():
            self.assertTrue(j["spec"]["suspend"])
            labels = j["spec"]["template"]["metadata"]["labels"]
            self.assertEqual(labels["jobset.sigs.k8s.io/jobset-name"], "train")
            ref = j["metadata"]["ownerReferences"][0]
            self.assertEqual((ref["kind"], ref["controller"]), ("JobSet", True))
        js = self.s.ok("GET", JOBSETS + "/train")
        self.assertEqual(js["spec"]["replicatedJobs"][0]["replicas"], 1)
        suspended = [c for c in js["status"]["conditions"] if c["type"] == "Suspended"]
        self.assertEqual(suspended[0]["status"], "True")
        self.assertEqual(self.s.ok("GET", PODS)["items"], [])

    def test_templates_change_only_while_suspended_and_never_their_affinity(self):
        self.s.ok("POST", JOBSETS, jobset("train"))
        js = self.s.ok("GET", JOBSETS + "/train")
        pod_template(js, 1)["spec"]["nodeSelector"] = {"muster.dev/gang": "default.jobset-train"}
        pod_template(js, 1)["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
        js = self.s.ok("PUT", JOBSETS + "/train", js)
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
        bad = yaml.safe_load(yaml.safe_dump(js))
        pod_template(bad, 1)["spec"]["affinity"] = affinity
        code, obj, _ = self.s.req("PUT", JOBSETS + "/train", bad)
        self.assertEqual(code, 422, obj)
        self.assertIn("spec.replicatedJobs", obj["message"])
        bad = yaml.safe_load(yaml.safe_dump(js))
        bad["spec"]["replicatedJobs"][1]["replicas"] = 3
        self.assertEqual(self.s.req("PUT", JOBSETS + "/train", bad)[0], 422)
        # resumed: the template is fixed again
        code, _, _ = self.s.merge(JOBSETS + "/train", {"spec": {"suspend": False}})
        self.assertEqual(code, 200)
        js = self.s.ok("GET", JOBSETS + "/train")
        pod_template(js, 1)["spec"]["nodeSelector"] = {"other": "x"}
        self.assertEqual(self.s.req("PUT", JOBSETS + "/train", js)[0], 422)

    def test_a_suspended_jobset_cannot_shrink(self):
        # ValidateUpdate: replicas, parallelism and completions are not among
        # the fields a suspended JobSet may change (ElasticJobSet, an alpha
        # gate off by default, is not emulated), so muster cannot start a
        # JobSet below full size
        self.s.ok("POST", JOBSETS, jobset("train"))
        js = self.s.ok("GET", JOBSETS + "/train")
        for path, value in ((("replicas",), 1), (("template", "spec", "parallelism"), 1),
                            (("template", "spec", "completions"), 1)):
            bad = yaml.safe_load(yaml.safe_dump(js))
            target = bad["spec"]["replicatedJobs"][1]
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
            code, obj, _ = self.s.req("PUT", JOBSETS + "/train", bad)
            self.assertEqual(code, 422, path)
            self.assertIn("spec.replicatedJobs", obj["message"])

    def test_resume_carries_node_selector_and_tolerations_but_not_affinity(self):
        self.s.ok("POST", JOBSETS, jobset("train"))
        js = self.s.ok("GET", JOBSETS + "/train")
        pod_template(js, 1)["spec"]["nodeSelector"] = {"pod-set.muster.dev/workers": "g"}
        pod_template(js, 1)["spec"]["tolerations"] = [{"key": "gpu", "operator": "Equal", "value": "true",
                                                        "effect": "NoSchedule"}]
        self.s.ok("PUT", JOBSETS + "/train", js)
        self.s.merge(JOBSETS + "/train", {"spec": {"suspend": False}})
        jobs = self.jobs()
        for name in ("train-workers-0", "train-workers-1"):
            spec = jobs[name]["spec"]
            self.assertFalse(spec["suspend"])
            self.assertEqual(spec["template"]["spec"]["nodeSelector"], {"pod-set.muster.dev/workers": "g"})
            self.assertEqual(spec["template"]["spec"]["tolerations"][0]["key"], "gpu")
        self.assertNotIn("nodeSelector", jobs["train-driver-0"]["spec"]["template"]["spec"])
        pods = self.s.ok("GET", PODS)["items"]
        self.assertEqual(len(pods), 5)
        self.assertTrue(all(p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "train" for p in pods))
        # suspended again: child Jobs suspended, their pods deleted, startTime kept
        self.s.merge(JOBSETS + "/train", {"spec": {"suspend": True}})
        jobs = self.jobs()
        self.assertTrue(all(j["spec"]["suspend"] for j in jobs.values()))
        self.assertTrue(all(j["status"].get("startTime") for j in jobs.values()))
        self.assertEqual(self.s.ok("GET", PODS)["items"], [])
        # resumed again: the JobSet controller clears each child's startTime
        # before it changes the template (the Job's own rule), so it succeeds
        pod_template_js = self.s.ok("GET", JOBSETS + "/train")
        pod_template(pod_template_js, 1)["spec"]["nodeSelector"] = {"pod-set.muster.dev/workers": "h"}
        self.s.ok("PUT", JOBSETS + "/train", pod_template_js)
        self.s.merge(JOBSETS + "/train", {"spec": {"suspend": False}})
        jobs = self.jobs()
        self.assertEqual(jobs["train-workers-0"]["spec"]["template"]["spec"]["nodeSelector"],
                         {"pod-set.muster.dev/workers": "h"})
        self.assertFalse(jobs["train-workers-0"]["spec"]["suspend"])

    def test_all_jobs_succeeded_completes_the_jobset_and_a_failure_fails_it(self):
        self.s.ok("POST", JOBSETS, jobset("ok", suspend=False))
        self.s.ok("POST", JOBSETS, jobset("bad", suspend=False))
        for p in self.s.ok("GET", PODS)["items"]:
            phase = "Failed" if p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "bad" else "Succeeded"
            # a pod of a JobSet that failed meanwhile is gone with its Job
            self.s.req("PATCH", PODS + "/" + p["metadata"]["name"] + "/status", {"status": {"phase": phase}},
                       "application/merge-patch+json")

        def conditions(name):
            js = self.s.ok("GET", JOBSETS + "/" + name)
            return {c["type"]: c["status"] for c in js["status"].get("conditions") or []}

        self.wait("ok Completed", lambda: conditions("ok").get("Completed") == "True")
        self.assertEqual(self.s.ok("GET", JOBSETS + "/ok")["status"]["terminalState"], "Completed")
        # a failed pod is retried by its Job up to backoffLimit; fail them all
        for _ in range(10):
            for p in self.s.ok("GET", PODS)["items"]:
                labels = p["metadata"]["labels"]
                if labels["jobset.sigs.k8s.io/jobset-name"] == "bad" and p["status"]["phase"] == "Pending":
                    self.s.req("PATCH", PODS + "/" + p["metadata"]["name"] + "/status",
                               {"status": {"phase": "Failed"}}, "application/merge-patch+json")
            if conditions("bad").get("Failed") == "True":
                break
        self.wait("bad Failed", lambda: conditions("bad").get("Failed") == "True")

    # -- startupPolicy InOrder and dependsOn

    def js_status(self, name):
        return self.s.ok("GET", JOBSETS + "/" + name)["status"]

    def cond(self, name, ctype):
        return next((c["status"] for c in self.js_status(name).get("conditions") or [] if c["type"] == ctype), None)

    def run_job_pods(self, job, phase="Running"):
        pods = self.s.ok("GET", PODS + "?labelSelector=batch.kubernetes.io%2Fjob-name%3D" + job)["items"]
        self.assertTrue(pods, job)
        for p in pods:
            self.s.status_merge(PODS + "/" + p["metadata"]["name"], {"phase": phase, "conditions": [
                {"type": "Ready", "status": "True" if phase == "Running" else "False"}]})

    def test_in_order_creates_a_replicated_job_once_the_previous_ones_are_ready(self):
        body = jobset("ordered", suspend=False)
        body["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
        self.s.ok("POST", JOBSETS, body)
        self.assertEqual(sorted(self.jobs()), ["ordered-driver-0"])
        self.assertEqual(self.cond("ordered", "StartupPolicyInProgress"), "True")
        self.run_job_pods("ordered-driver-0")
        self.wait("workers created", lambda: sorted(self.jobs()) == [
            "ordered-driver-0", "ordered-workers-0", "ordered-workers-1"])
        st = {r["name"]: r for r in self.js_status("ordered")["replicatedJobsStatus"]}
        self.assertEqual(st["driver"]["ready"], 1)
        self.assertIsNone(self.cond("ordered", "StartupPolicyCompleted"))
        self.run_job_pods("ordered-workers-0")
        self.run_job_pods("ordered-workers-1")
        self.wait("startup completed", lambda: self.cond("ordered", "StartupPolicyCompleted") == "True")
        self.assertIsNone(self.cond("ordered", "StartupPolicyInProgress"))
        self.assertEqual({r["name"]: r["ready"] for r in self.js_status("ordered")["replicatedJobsStatus"]},
                         {"driver": 1, "workers": 2})

    def test_in_order_resumes_one_replicated_job_at_a_time(self):
        body = jobset("resumed")
        body["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
        self.s.ok("POST", JOBSETS, body)
        self.assertEqual(len(self.jobs()), 3)  # a suspended JobSet's Jobs are all created, suspended
        self.s.merge(JOBSETS + "/resumed", {"spec": {"suspend": False}})
        jobs = self.jobs()
        self.assertEqual({n: j["spec"]["suspend"] for n, j in jobs.items()},
                         {"resumed-driver-0": False, "resumed-workers-0": True, "resumed-workers-1": True})
        self.assertEqual(self.cond("resumed", "Suspended"), "True")  # until every replicated job is gone through
        self.run_job_pods("resumed-driver-0")
        self.wait("workers resumed", lambda: not any(j["spec"]["suspend"] for j in self.jobs().values()))
        self.assertEqual(self.cond("resumed", "Suspended"), "True")
        self.run_job_pods("resumed-workers-0")
        self.run_job_pods("resumed-workers-1")
        self.wait("resumed", lambda: self.cond("resumed", "Suspended") == "False")

    def test_depends_on_waits_for_the_status_named(self):
        for status in ("Complete", "Ready"):
            name = "dep-" + status.lower()
            body = jobset(name, suspend=False)
            body["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "driver", "status": status}]
            self.s.ok("POST", JOBSETS, body)
            self.assertEqual(sorted(j for j in self.jobs() if j.startswith(name)), [name + "-driver-0"])
            self.run_job_pods(name + "-driver-0")
            if status == "Complete":
                time.sleep(0.2)
                self.assertEqual(sorted(j for j in self.jobs() if j.startswith(name)), [name + "-driver-0"])
                self.run_job_pods(name + "-driver-0", phase="Succeeded")
            self.wait(f"workers created after {status}", lambda: sorted(
                j for j in self.jobs() if j.startswith(name)) == [name + "-driver-0", name + "-workers-0",
                                                                   name + "-workers-1"])
        # the schema: Ready or Complete, a name, at most 5
        body = jobset("dep-bad", suspend=False)
        body["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "driver", "status": "Started"}]
        code, err, _ = self.s.req("POST", JOBSETS, body)
        self.assertEqual(code, 422, err)
        self.assertIn("spec.replicatedJobs[1].dependsOn[0].status",
                      [c["field"] for c in err["details"]["causes"]])


class GatedPodTest(unittest.TestCase):
    def setUp(self):
        self.s = Server()

    def tearDown(self):
        self.s.stop()

    def pod(self, name, gated):
        body = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}],
                                                     "nodeSelector": {"a": "1"}}}
        if gated:
            body["spec"]["schedulingGates"] = [{"name": "muster.dev/admission"}]
        return self.s.ok("POST", PODS, body)

    def test_a_gated_pods_node_selector_may_only_gain_entries(self):
        self.pod("g", True)
        code, obj, _ = self.s.merge(PODS + "/g", {"spec": {"nodeSelector": {"a": "2"}}})
        self.assertEqual(code, 422, obj)
        # adding an entry and removing the gate in one update is checked
        # against the gated pod: accepted
        code, obj, _ = self.s.merge(PODS + "/g", {"spec": {"nodeSelector": {"b": "1"}, "schedulingGates": []}})
        self.assertEqual(code, 200, obj)
        self.assertEqual(obj["spec"]["nodeSelector"], {"a": "1", "b": "1"})
        # released: fixed, and the gate cannot come back
        self.assertEqual(self.s.merge(PODS + "/g", {"spec": {"nodeSelector": {"c": "1"}}})[0], 422)
        code, _, _ = self.s.merge(PODS + "/g", {"spec": {"schedulingGates": [{"name": "muster.dev/admission"}]}})
        self.assertEqual(code, 422)

    def test_an_ungated_pods_node_selector_is_fixed(self):
        self.pod("u", False)
        self.assertEqual(self.s.merge(PODS + "/u", {"spec": {"nodeSelector": {"b": "1"}}})[0], 422)


if __name__ == "__main__":
    unittest.main()
