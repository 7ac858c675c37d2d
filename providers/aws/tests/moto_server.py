"""Run a moto server on 127.0.0.1 for the AWS provider's tests.

Prints `moto=<port> control=<port>` on one line, then serves until stdin
closes. moto's EC2 backend is patched so that RunInstances behaves more like
real EC2 in three ways the tests need:

* `ClientToken` is honoured: the same token returns the same reservation
  (moto ignores it otherwise).
* Insufficient capacity can be injected per instance type (`p4d.24xlarge`) or
  per type@zone (`p4d.24xlarge@us-east-1a`): POST /ice?offering=<...>.
* Throttling (`RequestLimitExceeded`) can be injected for the next N
  RunInstances calls, retries included: POST /throttle?n=<N>.
* Any other error code can be injected for every RunInstances call:
  POST /fail?code=<code> (e.g. `UnauthorizedOperation`).

GET /calls answers how many RunInstances requests arrived (retries
included), so a test can tell a retried call from one that was not.
POST /reset clears the injections and the count. An instance profile
`muster-node` exists from the start.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from moto.ec2.exceptions import EC2ClientError
from moto.ec2.responses.instances import InstanceResponse
from moto.server import ThreadedMotoServer
from werkzeug.serving import WSGIRequestHandler

# quiet: one line per request would flood test output
WSGIRequestHandler.log_request = lambda *args, **kwargs: None

STATE = {"ice": set(), "throttle": 0, "tokens": {}, "calls": 0, "fail": None}
LOCK = threading.Lock()
_run_instances = InstanceResponse.run_instances


def run_instances(self):
    token = self._get_param("ClientToken")
    instance_type = self._get_param("InstanceType", "m1.small")
    zone = self._get_param("Placement.AvailabilityZone")
    with LOCK:
        STATE["calls"] += 1
        if STATE["throttle"] > 0:
            STATE["throttle"] -= 1
            raise EC2ClientError("RequestLimitExceeded", "Request limit exceeded.")
        if STATE["fail"]:
            raise EC2ClientError(STATE["fail"], f"injected {STATE['fail']}")
        if instance_type in STATE["ice"] or f"{instance_type}@{zone}" in STATE["ice"]:
            raise EC2ClientError(
                "InsufficientInstanceCapacity",
                f"We currently do not have sufficient {instance_type} capacity "
                f"in the Availability Zone you requested ({zone}).",
            )
        if token and token in STATE["tokens"]:
            return STATE["tokens"][token]
        result = _run_instances(self)
        if token:
            STATE["tokens"][token] = result
        return result


InstanceResponse.run_instances = run_instances


class Control(BaseHTTPRequestHandler):
    """Injection endpoint: /ice, /throttle, /reset; /calls."""

    def do_GET(self):
        if urlparse(self.path).path != "/calls":
            self.send_response(404)
            self.end_headers()
            return
        with LOCK:
            body = json.dumps({"runInstances": STATE["calls"]})
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def do_POST(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        with LOCK:
            if url.path == "/ice":
                STATE["ice"].update(query.get("offering", []))
            elif url.path == "/fail":
                STATE["fail"] = query.get("code", [None])[0]
            elif url.path == "/throttle":
                STATE["throttle"] = int(query.get("n", ["0"])[0])
            elif url.path == "/reset":
                STATE["ice"].clear()
                STATE["throttle"] = 0
                STATE["calls"] = 0
                STATE["fail"] = None
            else:
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps({"ice": sorted(STATE["ice"]), "throttle": STATE["throttle"]})
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def main():
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    moto_port = moto.get_host_and_port()[1]
    # the node role's instance profile the tests' NodeClasses name (EC2
    # checks that it exists)
    import boto3
    boto3.client("iam", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{moto_port}",
                 aws_access_key_id="testing", aws_secret_access_key="testing",
                 ).create_instance_profile(InstanceProfileName="muster-node")
    control = ThreadingHTTPServer(("127.0.0.1", 0), Control)
    threading.Thread(target=control.serve_forever, daemon=True).start()
    print(f"moto={moto_port} control={control.server_address[1]}", flush=True)
    sys.stdin.read()
    control.shutdown()
    moto.stop()


if __name__ == "__main__":
    main()
