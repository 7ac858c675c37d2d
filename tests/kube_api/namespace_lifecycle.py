"""Namespaces: the NamespaceLifecycle admission plugin, the namespace
strategy, the system namespaces and the namespace controller's deletion.

Upstream (kubernetes/kubernetes):
- staging/src/k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle/admission.go
  (Lifecycle.Admit): a create or update of a namespaced object in a namespace
  that does not exist is 404 NotFound `namespaces "NS" not found`; a create
  in a Terminating namespace is 403 Forbidden `unable to create new content
  in namespace NS because it is being terminated` with a cause of type
  NamespaceTerminating on `metadata.namespace`; the immortal namespaces
  (default, kube-system, kube-public) may not be deleted (403 Forbidden
  `this namespace may not be deleted`); deletes of other objects and every
  write to cluster-scoped kinds pass;
- pkg/registry/core/namespace/strategy.go (PrepareForCreate,
  PrepareForUpdate): a new Namespace is `status.phase: Active` and carries
  the `kubernetes` spec finalizer; an update keeps the stored
  spec.finalizers;
- pkg/registry/core/namespace/storage/storage.go (REST.Delete): deleting a
  Namespace whose spec.finalizers are not empty sets its deletionTimestamp
  and `status.phase: Terminating`; it is removed once spec.finalizers and
  metadata.finalizers are both empty;
- pkg/controller/namespace/deletion/namespaced_resources_deleter.go
  (Delete, deleteAllContent, finalizeNamespace): the namespace controller
  deletes every object in a Terminating namespace, then removes the
  `kubernetes` finalizer once nothing is left (here: when its last object
  goes, in the same request);
- pkg/controlplane/controller/systemnamespaces/system_namespaces_controller.go:
  the server creates default, kube-system, kube-public and kube-node-lease
  at start.
"""

from apierrors import ApiError

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
IMMORTAL = ("default", "kube-system", "kube-public")
FINALIZER = "kubernetes"


def forbidden(resource, name, why):
    """errors.NewForbidden: `RESOURCE "NAME" is forbidden: WHY` (`RESOURCE
    is forbidden: WHY` without a name); `resource` is plural[.group]."""
    plural, _, group = resource.partition(".")
    where = f'{resource} "{name}"' if name else resource
    return ApiError(403, "Forbidden", f"{where} is forbidden: {why}",
                    {"name": name or "", "group": group, "kind": plural})


def not_found(ns):
    return ApiError(404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"})


def admit(namespaces, r, ns, op, name=None):
    """Lifecycle.Admit for a CREATE or UPDATE of resource `r` in `ns`;
    `namespaces` maps (\"\", name) to the stored Namespaces."""
    if r.storage_key == ("", "namespaces") or not r.namespaced or not ns:
        return
    namespace = namespaces.get(("", ns))
    if namespace is None:
        raise not_found(ns)
    if op == "CREATE" and (namespace.get("status") or {}).get("phase") == "Terminating":
        resource = f"{r.plural}.{r.group}" if r.group else r.plural
        err = forbidden(resource, name,
                        f"unable to create new content in namespace {ns} because it is being terminated")
        err.details["causes"] = [{"reason": "NamespaceTerminating",
                                  "message": f"namespace {ns} is being terminated",
                                  "field": "metadata.namespace"}]
        raise err


def prepare_create(namespace):
    """namespaceStrategy.PrepareForCreate."""
    namespace["status"] = {"phase": "Active"}
    spec = namespace.get("spec")
    if not isinstance(spec, dict):
        spec = namespace["spec"] = {}
    finalizers = spec.get("finalizers")
    if not isinstance(finalizers, list):
        finalizers = []
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    spec["finalizers"] = finalizers


def prepare_update(new, old):
    """namespaceStrategy.PrepareForUpdate: an update keeps the stored
    spec.finalizers (only the `finalize` subresource, i.e. the namespace
    controller, changes them)."""
    spec = new.get("spec")
    if not isinstance(spec, dict):
        spec = new["spec"] = {}
    finalizers = (old.get("spec") or {}).get("finalizers")
    if finalizers:
        spec["finalizers"] = list(finalizers)
    else:
        spec.pop("finalizers", None)


def check_delete(name):
    if name in IMMORTAL:
        raise forbidden("namespaces", name, "this namespace may not be deleted")


def finalized(namespace):
    """True when nothing holds the Namespace any more."""
    return not ((namespace.get("spec") or {}).get("finalizers") or namespace["metadata"].get("finalizers"))
