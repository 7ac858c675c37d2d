"""The DefaultTolerationSeconds admission plugin.

Upstream: kubernetes/kubernetes
plugin/pkg/admission/defaulttolerationseconds/admission.go (Plugin.Admit):
on a create or update of a pod (not of a subresource), a pod that does not
tolerate `node.kubernetes.io/not-ready:NoExecute` (a toleration whose key is
that taint's or empty and whose effect is NoExecute or empty) gets
`{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute,
tolerationSeconds: 300}`, and likewise for `node.kubernetes.io/unreachable`
(300 is the default of --default-not-ready-toleration-seconds and
--default-unreachable-toleration-seconds).
"""

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
SECONDS = 300


def _tolerates(tolerations, key):
    return any(isinstance(t, dict) and t.get("key") in (key, "", None) and t.get("effect") in ("NoExecute", "", None)
               for t in tolerations)


def admit(pod):
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    added = [key for key in (NOT_READY, UNREACHABLE) if not _tolerates(tolerations, key)]
    if not added:
        return
    spec["tolerations"] = tolerations + [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": SECONDS} for key in added]
