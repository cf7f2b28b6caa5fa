"""What the operator owns for one resource: the planned objects (speculative twin, baseline twin,
their Services and ConfigMaps, from the `kubernetes` emitter) and the traffic split, each with an
ownerReference to the resource, so deleting the resource deletes them (garbage collection).

The traffic split is the operator's own (it decides the weights):
* a front Service `<name>-front` whose selector picks the active twin's pods (any cluster), or
  both twins' pods while the idle one is explored (a split by pod); or
* with `policy.gateway`, a Gateway API HTTPRoute `<name>` attached to that Gateway, with one
  weighted backendRef per twin's Service (https://gateway-api.sigs.k8s.io/reference/spec/#httpbackendref),
  or per twin's InferencePool (`policy.gateway.backend: InferencePool`, llm-d's split):
  100 / 0, or 100 - p / p while the idle twin is explored with p percent of the traffic.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

from orchestrator.emitters.base import EMITTERS, Manifest, ResourceKind
from orchestrator.emitters.platform import INFERENCE_API_GROUP
from orchestrator.manifests.context import (
    PROFILE_LABEL,
    VARIANT_LABEL,
    object_name,
    profile_selector,
)
from orchestrator.operator.crd import API_VERSION, KIND
from orchestrator.operator.policy import Variant
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.schema import GatewayRef, Profile

HTTPROUTE: Final = ResourceKind("gateway.networking.k8s.io/v1", "HTTPRoute")
#: Every kind the operator applies, in apply order (the emitter's, then the route).
KINDS: Final = (*EMITTERS["kubernetes"].kinds, HTTPROUTE)
FRONT_SUFFIX: Final = "-front"


@dataclass(frozen=True)
class Owner:
    """The resource the objects belong to."""

    name: str
    namespace: str
    uid: str

    def reference(self) -> dict[str, Any]:
        """The ownerReference every owned object carries: the resource is their controller, and
        foreground deletion waits for them."""
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def owned_manifests(
    plan: DeploymentPlan, owner: Owner, active: Variant, explore: int = 0
) -> list[Manifest]:
    """Every object of the plan plus the traffic split, owned by `owner`, in its namespace."""
    objects = [*EMITTERS["kubernetes"].emit(plan), traffic_split(plan, active, explore)]
    return [own(m, owner) for m in objects]


def speculative_workload(plan: DeploymentPlan, owner: Owner) -> list[Manifest]:
    """The speculative twin's own objects (what a retune rolls): its workload and config."""
    name = object_name(plan.profile, "speculative")
    return [
        own(m, owner)
        for m in EMITTERS["kubernetes"].emit(plan)
        if m.name in (name, f"{name}-config") and m.kind != "Service"
    ]


def traffic_split(plan: DeploymentPlan, active: Variant, explore: int = 0) -> Manifest:
    """The front Service, or the HTTPRoute when the policy names a Gateway; `explore` is the
    idle twin's share (percent) while it is explored, 0 otherwise."""
    profile = plan.profile
    port = plan.launch_for(container=True).port
    if profile.policy is not None and profile.policy.gateway is not None:
        return http_route(profile, port, active, explore)
    return front_service(profile, port, active, explore)


def front_service(profile: Profile, port: int, active: Variant, explore: int = 0) -> Manifest:
    """A Service that selects the active twin's pods (every variant carries the profile label),
    or, while the idle twin is explored, every pod of both (kube-proxy spreads by pod)."""
    labels = {**profile_selector(profile), "app.kubernetes.io/component": "traffic-split"}
    selector = {PROFILE_LABEL: profile.metadata.name}
    if not explore:
        selector[VARIANT_LABEL] = active
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": front_name(profile), "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }
    return Manifest(body=body, source="operator/front-service")


def http_route(profile: Profile, port: int, active: Variant, explore: int = 0) -> Manifest:
    """An HTTPRoute sending all traffic to the active twin's Service (weight 100 / 0), or
    100 - explore / explore while the idle twin is explored."""
    assert profile.policy is not None and profile.policy.gateway is not None
    gateway = profile.policy.gateway
    parent: dict[str, Any] = {"name": gateway.name}
    if gateway.namespace is not None:
        parent["namespace"] = gateway.namespace
    if gateway.section_name is not None:
        parent["sectionName"] = gateway.section_name
    refs = [
        {
            **_backend(gateway, object_name(profile, v), port),
            "weight": 100 - explore if v == active else explore,
        }
        for v in twins(profile)
    ]
    labels = {**profile_selector(profile), "app.kubernetes.io/component": "traffic-split"}
    body = {
        "apiVersion": HTTPROUTE.api_version,
        "kind": HTTPROUTE.kind,
        "metadata": {"name": profile.metadata.name, "labels": labels},
        "spec": {"parentRefs": [parent], "rules": [{"backendRefs": refs}]},
    }
    return Manifest(body=body, source="operator/httproute")


def _backend(gateway: GatewayRef, name: str, port: int) -> dict[str, Any]:
    """A twin's backendRef: its Service on the serving port, or its InferencePool, whose own
    targetPorts say the port: a backendRef to a pool names none (kubernetes-sigs/
    gateway-api-inference-extension conformance/tests/basic/
    inferencepool_resolvedrefs_condition.yaml f956a09df19b3b6c37a2cb5ff1e166c617c4e120)."""
    if gateway.backend == "InferencePool":
        return {"group": INFERENCE_API_GROUP, "kind": "InferencePool", "name": name}
    return {"name": name, "port": port}


def twins(profile: Profile) -> tuple[Variant, ...]:
    return ("speculative", "baseline") if profile.deploy.baseline else ("speculative",)


def front_name(profile: Profile) -> str:
    return f"{profile.metadata.name}{FRONT_SUFFIX}"


def own(manifest: Manifest, owner: Owner) -> Manifest:
    """The object in the owner's namespace with the owner's controller reference."""
    body = copy.deepcopy(manifest.body)
    body["metadata"]["namespace"] = owner.namespace
    body["metadata"]["ownerReferences"] = [owner.reference()]
    return Manifest(body=body, source=manifest.source)


def owned_by(live: dict[str, Any], owner: Owner) -> bool:
    """Whether a live object names `owner` as its controller."""
    references = (live.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner.uid and r.get("controller") for r in references)
