"""The A/B traffic split between the speculative deployment and its baseline twin, as a Gateway
API HTTPRoute with weighted backendRefs (gateway.networking.k8s.io/v1; weights are proportional,
https://github.com/kubernetes-sigs/gateway-api/blob/v1.6.1/apis/v1/shared_types.go BackendRef).

Platforms whose twins sit behind Services (kubernetes) or InferencePools (llm-d) share this one
builder; KServe splits with its own route weights instead (orchestrator/emitters/kserve.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from orchestrator.emitters.base import Manifest, ResourceKind
from orchestrator.emitters.platform import GATEWAY_API_GROUP, Twin
from orchestrator.manifests.context import profile_selector

if TYPE_CHECKING:
    from orchestrator.plan.types import DeploymentPlan

HTTP_ROUTE: Final = ResourceKind(f"{GATEWAY_API_GROUP}/v1", "HTTPRoute")
#: Annotation recording the share the profile asked for (the weights say the same).
SPLIT_ANNOTATION: Final = "specdeploy.io/baseline-traffic-percent"


@dataclass(frozen=True)
class Backend:
    """One weighted backend of the split: a Service (group "") or an InferencePool."""

    twin: Twin
    name: str
    port: int | None
    group: str = ""
    kind: str = "Service"


def split_route(plan: DeploymentPlan, backends: list[Backend]) -> Manifest | None:
    """The HTTPRoute splitting traffic between the twins, or None when the profile asks for no
    split (deploy.baseline_traffic_percent unset)."""
    deploy = plan.profile.deploy
    if deploy.baseline_traffic_percent is None or len(backends) < 2:
        return None
    name = plan.profile.metadata.name
    metadata: dict[str, Any] = {
        "name": f"{name}-ab",
        "labels": {
            **profile_selector(plan.profile),
            "app.kubernetes.io/part-of": name,
            "app.kubernetes.io/component": "traffic-split",
        },
        "annotations": {SPLIT_ANNOTATION: str(deploy.baseline_traffic_percent)},
    }
    if plan.profile.metadata.namespace is not None:
        metadata["namespace"] = plan.profile.metadata.namespace
    spec: dict[str, Any] = {
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [_backend_ref(b) for b in backends],
            }
        ]
    }
    if deploy.gateway is not None:
        spec["parentRefs"] = [gateway_ref(deploy.gateway)]
    body = {"apiVersion": HTTP_ROUTE.api_version, "kind": "HTTPRoute", "metadata": metadata}
    return Manifest.parse({**body, "spec": spec}, source="orchestrator/emitters/traffic.py")


def gateway_ref(gateway: str) -> dict[str, str]:
    """A parentRef to a Gateway written `name` or `namespace/name`."""
    namespace, _, name = gateway.rpartition("/")
    ref = {"group": GATEWAY_API_GROUP, "kind": "Gateway", "name": name}
    if namespace:
        ref["namespace"] = namespace
    return ref


def _backend_ref(backend: Backend) -> dict[str, Any]:
    ref: dict[str, Any] = {"group": backend.group, "kind": backend.kind, "name": backend.name}
    if backend.port is not None:
        ref["port"] = backend.port
    ref["weight"] = backend.twin.weight
    return ref
