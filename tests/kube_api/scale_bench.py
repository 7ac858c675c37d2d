#!/usr/bin/env python3
"""Scale benchmark of `muster controller`: RSS with N Nodes and M Pods in its
caches, and event-to-plan latency at that size.

Writes the cluster as JSON lines, starts apiserver.py with --preload, starts
the controller binary against it, waits for /readyz (every cache synced),
reads VmRSS from /proc, then creates Jobs one at a time (labelled for a
GPUQueue, so the controller must plan them) and measures the time from each
write's response to the increment of muster_planning_cycles_total that
follows it. Usage:

    scale_bench.py --muster target/release/muster [--nodes 5000] [--pods 50000] [--changes 50]
"""

import argparse
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_cluster(path, nodes, pods):
    with open(path, "w", encoding="utf-8") as f:
        def put(obj):
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
        for crd in sorted(glob.glob(os.path.join(ROOT, "crds", "yaml", "*.yaml"))):
            with open(crd, encoding="utf-8") as c:
                put(yaml.safe_load(c))
        put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
        for i in range(nodes):
            put({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"node-{i}", "labels": {
                    "kubernetes.io/hostname": f"node-{i}",
                    "topology.kubernetes.io/zone": f"zone-{i % 3}",
                    "node.kubernetes.io/instance-type": "m5.4xlarge"}},
                "spec": {"providerID": f"aws:///zone-{i % 3}/i-{i:017x}"},
                "status": {
                    "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                    "allocatable": {"cpu": "15", "memory": "60Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]},
            })
        for i in range(pods):
            put({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"pod-{i}", "namespace": "bench",
                             "labels": {"app": f"app-{i % 100}"}},
                "spec": {"nodeName": f"node-{i % nodes}", "containers": [{
                    "name": "c", "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
                "status": {"phase": "Running"},
            })


def get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def cycles(metrics_url):
    _, text = get(metrics_url)
    m = re.search(r"^muster_planning_cycles_total (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def rss_mib(pid):
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def post(api, path, obj):
    req = urllib.request.Request(api + path, data=json.dumps(obj).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--muster", required=True, help="the muster binary (built with --features controller)")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--changes", type=int, default=50)
    ap.add_argument("--debounce", default="20ms")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="muster-scale-")
    cluster = os.path.join(tmp, "cluster.jsonl")
    t = time.monotonic()
    write_cluster(cluster, args.nodes, args.pods)
    print(f"cluster file: {args.nodes} nodes, {args.pods} pods in {time.monotonic() - t:.1f}s", flush=True)
    t = time.monotonic()
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "apiserver.py"), "--port", "0",
                               "--preload", cluster], stdout=subprocess.PIPE, text=True)
    api = server.stdout.readline().strip().removeprefix("LISTENING ")
    print(f"API test server loaded in {time.monotonic() - t:.1f}s at {api}", flush=True)
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    t = time.monotonic()
    ctl = subprocess.Popen([args.muster, "controller", "--cluster-name", "scale-bench",
                            "--kube-url", api, "--no-leader-election",
                            "--metrics-addr", f"127.0.0.1:{port}", "--debounce", args.debounce,
                            "--tick", "10m"], stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                if get(f"http://127.0.0.1:{port}/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if ctl.poll() is not None:
                sys.exit("the controller exited")
            time.sleep(0.2)
        print(f"caches synced in {time.monotonic() - t:.1f}s", flush=True)
        # let the first cycles and the allocator settle
        time.sleep(3)
        rss = rss_mib(ctl.pid)
        print(f"RSS after sync: {rss:.1f} MiB", flush=True)
        post(api, "/apis/muster.dev/v1alpha1/gpuqueues", {
            "apiVersion": "muster.dev/v1alpha1", "kind": "GPUQueue",
            "metadata": {"name": "bench"}, "spec": {"namespaceSelector": {}}})
        time.sleep(1)
        lat = []
        peak = 0.0
        for i in range(args.changes):
            before = cycles(metrics)
            post(api, "/apis/batch/v1/namespaces/bench/jobs", {
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": f"job-{i}", "namespace": "bench",
                             "labels": {"muster.dev/queue": "bench"}},
                "spec": {"parallelism": 1, "completions": 1, "suspend": True, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{
                        "name": "c", "image": "registry.example/train:1",
                        "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}},
            })
            t0 = time.monotonic()
            while cycles(metrics) <= before:
                if time.monotonic() - t0 > 30:
                    sys.exit(f"no planning cycle within 30s of change {i}")
                time.sleep(0.002)
            lat.append((time.monotonic() - t0) * 1000)
            peak = max(peak, rss_mib(ctl.pid))
            time.sleep(0.5)
        lat.sort()
        pct = lambda p: lat[min(len(lat) - 1, int(round(p / 100 * (len(lat) - 1))))]
        print(f"event-to-plan over {len(lat)} changes: p50 {pct(50):.0f} ms, p99 {pct(99):.0f} ms, max {lat[-1]:.0f} ms")
        print(f"RSS peak after each planning cycle: {peak:.1f} MiB")
        print(f"RSS at the end: {rss_mib(ctl.pid):.1f} MiB")
    finally:
        ctl.terminate()
        ctl.wait()
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
