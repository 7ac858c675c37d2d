"""A stand-in for the API server's mutating admission step, in front of the
API test server: Job creations go through the webhooks of a rendered
MutatingWebhookConfiguration, everything else is forwarded unchanged.

usage: admission_chain.py --upstream URL --config FILE --url-of NAME=URL ... --ca FILE

What it follows of kube-apiserver (k8s.io/apiserver, plugin/pkg/admission
webhook: mutating/dispatcher.go, predicates/object and predicates/namespace
matchers, errors/statuserror.go; admission/v1 types):
- a webhook is called when one of its rules matches the request's group,
  version, resource and operation, and its objectSelector matches the
  object's labels and its namespaceSelector the namespace's labels;
- the request is an AdmissionReview v1 with uid, kind, resource, namespace,
  operation, userInfo, object, dryRun, options; the answer's uid must match;
- a call that fails (connection, TLS, timeout, non-200, unparsable answer)
  refuses the request with 500 InternalError under failurePolicy Fail and is
  skipped under Ignore;
- an answer with allowed=false refuses the request (403 unless it names a
  code); a JSONPatch answer is applied to the object before it is stored.
Service references are resolved to local URLs with --url-of, the CA of the
clientConfig's caBundle verifies the server under the Service's DNS name.
Prints the port it listens on (127.0.0.1) on stdout.
"""
import argparse
import base64
import http.client
import json
import re
import socket
import ssl
import sys
import tempfile
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

JOBS = re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs/?(\?.*)?$")


def selector_matches(sel, labels):
    if sel is None:
        return True
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def rule_matches(rules, group, version, resource, op):
    def has(lst, v):
        return "*" in lst or v in lst
    return any(
        has(r.get("apiGroups", []), group) and has(r.get("apiVersions", []), version)
        and has(r.get("resources", []), resource) and has(r.get("operations", []), op)
        for r in rules)


def apply_patch(obj, ops):
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = obj
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            else:
                if op["op"] == "replace" and last not in parent:
                    raise ValueError("replace of a missing member")
                parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise ValueError("unsupported patch op " + op["op"])
    return obj


class Chain:
    def __init__(self, args):
        self.upstream = args.upstream.rstrip("/")
        with open(args.config) as f:
            self.config = json.load(f)
        self.urls = dict(u.split("=", 1) for u in args.url_of)

    def namespace_labels(self, ns):
        try:
            with urllib.request.urlopen(f"{self.upstream}/api/v1/namespaces/{ns}", timeout=5) as r:
                return json.load(r).get("metadata", {}).get("labels") or {}
        except Exception:
            return {}

    def call(self, hook, review):
        cc = hook["clientConfig"]
        svc = cc["service"]
        name = f"{svc['name']}.{svc['namespace']}.svc"
        base = self.urls[name]
        ctx = ssl.create_default_context()
        with tempfile.NamedTemporaryFile("wb", suffix=".pem") as ca:
            ca.write(base64.b64decode(cc["caBundle"]))
            ca.flush()
            ctx.load_verify_locations(ca.name)
        u = urllib.parse.urlsplit(base)
        timeout = hook.get("timeoutSeconds", 10)
        # TLS verified under the Service's DNS name, as the API server does
        raw = socket.create_connection((u.hostname, u.port), timeout=timeout)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        conn.sock = ctx.wrap_socket(raw, server_hostname=name)
        conn.request("POST", svc.get("path", "/"), body=json.dumps(review), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"webhook answered {resp.status}")
        answer = json.loads(body)["response"]
        if answer.get("uid") != review["request"]["uid"]:
            raise RuntimeError("webhook answered another uid")
        return answer

    def admit(self, ns, obj, dry_run):
        """Returns (status, error message) or (None, mutated object)."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        ns_labels = None
        for hook in self.config.get("webhooks", []):
            if not rule_matches(hook.get("rules", []), "batch", "v1", "jobs", "CREATE"):
                continue
            if not selector_matches(hook.get("objectSelector"), labels):
                continue
            if hook.get("namespaceSelector") is not None:
                if ns_labels is None:
                    ns_labels = self.namespace_labels(ns)
                if not selector_matches(hook["namespaceSelector"], ns_labels):
                    continue
            review = {
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": str(uuid.uuid4()),
                    "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                    "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
                    "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
                    "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
                    "name": (obj.get("metadata") or {}).get("name", ""),
                    "namespace": ns, "operation": "CREATE",
                    "userInfo": {"username": "test-user", "groups": ["system:authenticated"]},
                    "object": obj, "oldObject": None, "dryRun": dry_run,
                    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
                },
            }
            try:
                answer = self.call(hook, review)
            except Exception as e:  # noqa: BLE001 - any failure of the call
                if hook.get("failurePolicy", "Fail") == "Fail":
                    return 500, f'Internal error occurred: failed calling webhook "{hook["name"]}": {e}'
                continue
            if not answer.get("allowed"):
                st = answer.get("status") or {}
                return st.get("code") or 403, f'admission webhook "{hook["name"]}" denied the request: {st.get("message", "")}'
            if answer.get("patch"):
                obj = apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
            labels = (obj.get("metadata") or {}).get("labels") or {}
        return None, obj


def handler(chain):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def forward(self, body):
            req = urllib.request.Request(chain.upstream + self.path, data=body, method=self.command)
            for k in ("Content-Type", "Accept"):
                if self.headers.get(k):
                    req.add_header(k, self.headers[k])
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    status, data, ctype = r.status, r.read(), r.headers.get("Content-Type", "application/json")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), e.headers.get("Content-Type", "application/json")
            self.reply(status, data, ctype)

        def reply(self, status, data, ctype="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.forward(None)

        def do_DELETE(self):
            self.forward(None)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            m = JOBS.match(self.path)
            if m:
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                status, out = chain.admit(m.group(1), json.loads(body), bool(q.get("dryRun")))
                if status is not None:
                    reason = "InternalError" if status == 500 else "Forbidden"
                    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                          "message": out, "reason": reason, "code": status}
                    return self.reply(status, json.dumps(st).encode())
                body = json.dumps(out).encode()
            self.forward(body)

    return H


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True)
    p.add_argument("--config", required=True)
    p.add_argument("--url-of", action="append", default=[])
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(Chain(args)))
    print(server.server_address[1], flush=True)
    server.serve_forever()


main()
