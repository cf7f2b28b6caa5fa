"""The `kubernetes` platform: plain Kubernetes objects from the Jinja2 templates.

Each variant (the speculative deployment and its baseline twin) becomes one workload (a
Deployment, or a LeaderWorkerSet when TP x PP exceeds gpus_per_node), one Service and, when the
engine has config files, one ConfigMap; an optional PVC holds the shared model cache. With
deploy.baseline_traffic_percent, a Gateway API HTTPRoute splits traffic between the twins'
Services. The values are the plan's `ManifestSet` (decided when the profile was planned); the Helm
chart in charts/specdeploy renders the same objects from the same values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from orchestrator.emitters.base import (
    Manifest,
    ResourceKind,
    sort_for_apply,
)
from orchestrator.emitters.platform import PlatformEmitter, twins
from orchestrator.emitters.traffic import HTTP_ROUTE, Backend, split_route
from orchestrator.manifests.rendering import render_template

if TYPE_CHECKING:
    from orchestrator.manifests.context import ManifestSet
    from orchestrator.plan.types import DeploymentPlan

#: Template per workload kind.
WORKLOAD_TEMPLATE: Final[dict[str, str]] = {
    "Deployment": "deployment",
    "LeaderWorkerSet": "leaderworkerset",
}


class KubernetesEmitter(PlatformEmitter):
    """Deployments (or LeaderWorkerSets), Services, ConfigMaps, the model-cache PVC and the A/B
    HTTPRoute."""

    name: ClassVar[str] = "kubernetes"
    kinds: ClassVar[tuple[ResourceKind, ...]] = (
        ResourceKind("v1", "ConfigMap"),
        ResourceKind("v1", "PersistentVolumeClaim"),
        ResourceKind("v1", "Service"),
        ResourceKind("apps/v1", "Deployment", workload=True),
        ResourceKind("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", workload=True),
        HTTP_ROUTE,
    )
    splits_traffic: ClassVar[bool] = True

    def build(self, plan: DeploymentPlan) -> list[Manifest]:
        rendered = render_manifests(plan.manifests)
        route = traffic_split_route(plan)
        return rendered if route is None else [*rendered, route]


def traffic_split_route(plan: DeploymentPlan) -> Manifest | None:
    """The HTTPRoute between the twins' Services, or None without a split."""
    backends = [
        Backend(t, str(t.ctx.service.metadata["name"]), t.ctx.service.port) for t in twins(plan)
    ]
    return split_route(plan, backends)


def render_manifests(manifests: ManifestSet) -> list[Manifest]:
    """Every object of one manifest set, parsed and checked, in apply order."""
    rendered: list[Manifest] = []
    values = manifests.values()
    if values["modelCache"] is not None:
        rendered += render_template("persistentvolumeclaim", cache=values["modelCache"])
    for ctx in values["variants"]:
        if ctx["configMap"] is not None:
            rendered += render_template("configmap", ctx=ctx)
        rendered += render_template("service", ctx=ctx)
        rendered += render_template(WORKLOAD_TEMPLATE[ctx["workloadKind"]], ctx=ctx)
    return sort_for_apply(rendered, KubernetesEmitter.kinds)


def manifests_for(plan: DeploymentPlan) -> list[Manifest]:
    """The Kubernetes objects of a plan, in apply order."""
    return KubernetesEmitter().emit(plan)


def manifest_files(plan: DeploymentPlan) -> dict[str, str]:
    """`k8s/<kind>-<name>.yaml` per object, plus `k8s/apply-order.txt`."""
    return KubernetesEmitter().files(plan)
