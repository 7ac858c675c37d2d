"""The stand-ins for third-party workload controllers the API test server
runs beside its Job controller (controllers.py): Kubeflow's TrainJob and
PyTorchJob (kubeflow_controllers.py), KubeRay's RayCluster and RayJob
(ray_controllers.py) and the LeaderWorkerSet controller (lws_controller.py),
and kube-controller-manager's StatefulSet controller
(statefulset_controller.py), on which the LeaderWorkerSet's stand-in builds,
and its ClusterRole aggregation controller (rbac.py), and Karpenter's
NodeClaim life cycle with an in-process cloud (karpenter_controller.py).
Each third-party one syncs only objects of a kind whose CRD has been
installed."""

from karpenter_controller import Karpenter
from kubeflow_controllers import PyTorchJobs, TrainJobs
from lws_controller import LeaderWorkerSets, default_pod
from ray_controllers import RayClusters, RayJobs
from rbac import ClusterRoleAggregation
from statefulset_controller import StatefulSets


def stand_ins(controllers):
    out = [cls(controllers) for cls in (TrainJobs, PyTorchJobs, RayClusters, RayJobs, LeaderWorkerSets, StatefulSets)]
    # LeaderWorkerSet's pod webhook, emulated on the pods StatefulSets make
    out[-1].pod_defaulters.append(default_pod)
    # kube-controller-manager's ClusterRole aggregation controller
    # Karpenter (karpenter.sh/v1 with the AWS provider) and its cloud
    return out + [ClusterRoleAggregation(controllers), Karpenter(controllers)]
