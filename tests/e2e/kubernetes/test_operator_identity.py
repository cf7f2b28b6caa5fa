"""The operator as the chart's ServiceAccount with the chart's Role (issue 20 §4, issue 21): a
reconcile of a new SpeculativeDeployment creates its twins, Services and split, a second one
re-applies them, and its status patch lands, with no request refused. On the imitation (the
default run) its authorizer decides each request by verb as the recorded 1.36 kube-apiserver
does (an apply that creates needs `create`); with SPECDEPLOY_E2E_KUBECONFIG the real server does.
"""

from __future__ import annotations

from typing import Any

import yaml

from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.emitters.base import Manifest
from orchestrator.operator.objects import KINDS
from orchestrator.operator.rbac import RULES
from orchestrator.operator.reconcile import reconcile
from orchestrator.operator.source import InClusterCheckpoints
from tests.kube.cluster import Cluster
from tests.operator.test_resource import profile_text

API = "specdeploy.io/v1"


def _resource(kube: Cluster, namespace: str) -> dict[str, Any]:
    document = yaml.safe_load(profile_text(api=API))
    document["metadata"]["namespace"] = namespace
    kube.apply(document, namespace=namespace)  # the tenant creates it (as the admin here)
    stored = kube.get(API, "SpeculativeDeployment", document["metadata"]["name"], namespace)
    assert stored is not None
    return stored


def test_the_chart_role_is_enough_for_everything_a_reconcile_does(
    kube: Cluster, kube_namespace: str
) -> None:
    kubeconfig = kube.chart_identity(kube_namespace)
    body = _resource(kube, kube_namespace)
    cluster = KubernetesCluster(
        api_client=kube.client(kubeconfig), namespace=kube_namespace, kinds=KINDS
    )
    events: list[tuple[str, str, str]] = []

    def emit(kind: str, reason: str, message: str) -> None:
        events.append((kind, reason, message))

    source = InClusterCheckpoints(offline=True)
    status = reconcile(body, source, cluster, emit)  # creates every object
    assert status["verdict"] != "Invalid", status["findings"]
    again = reconcile(body, source, cluster, emit)  # and re-applies them
    ready = next(c for c in again["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "Applied", ready
    name = body["metadata"]["name"]
    cluster.patch_status(API, "SpeculativeDeployment", name, kube_namespace, again)

    for kind in ("Deployment", "Service"):
        found = kube.list("apps/v1" if kind == "Deployment" else "v1", kind, kube_namespace)
        assert found, f"no {kind} was created"
        assert all(o["metadata"]["ownerReferences"][0]["name"] == name for o in found)
    stored = kube.get(API, "SpeculativeDeployment", name, kube_namespace)
    assert stored is not None and stored["status"]["verdict"] == again["verdict"]

    if kube.imitation is not None:
        user = f"system:serviceaccount:{kube_namespace}:"
        decisions = [
            d for d in kube.imitation.authorizer.log if d.attributes.user.name.startswith(user)
        ]
        assert decisions, "the reconcile made no request as the chart's account"
        assert [d for d in decisions if not d.allowed] == []
        used = {
            (d.attributes.group, d.attributes.full_resource, d.attributes.verb) for d in decisions
        }
        granted = {(g, r, v) for g, r, verbs in RULES for v in verbs}
        assert used <= granted
        # `create` is granted because applying a new object uses it, not by habit
        created = {(g, r) for g, r, v in used if v == "create"}
        assert {("apps", "deployments"), ("", "services")} <= created


def test_the_chart_role_is_enough_to_prune_and_the_precondition_holds(
    kube: Cluster, kube_namespace: str
) -> None:
    """`deploy.baseline: false` after a reconcile with the baseline: the baseline twin and its
    Service are deleted as the chart's account (the Role's `delete`), with a uid precondition
    the server checks, and nothing else is."""
    kubeconfig = kube.chart_identity(kube_namespace)
    body = _resource(kube, kube_namespace)
    cluster = KubernetesCluster(
        api_client=kube.client(kubeconfig), namespace=kube_namespace, kinds=KINDS
    )
    events: list[tuple[str, str, str]] = []
    source = InClusterCheckpoints(offline=True)
    status = reconcile(body, source, cluster, lambda *e: events.append(e))
    name = body["metadata"]["name"]
    assert kube.get("apps/v1", "Deployment", f"{name}-baseline", kube_namespace) is not None
    document = yaml.safe_load(profile_text(api=API, baseline="false", policy="{mode: static}"))
    document["metadata"]["namespace"] = kube_namespace
    kube.apply(document, namespace=kube_namespace)
    changed = kube.get(API, "SpeculativeDeployment", name, kube_namespace)
    assert changed is not None
    reconcile({**changed, "status": status}, source, cluster, lambda *e: events.append(e))
    [pruned] = [m for kind, reason, m in events if reason == "Pruned"]
    assert f"Deployment/{name}-baseline" in pruned and f"Service/{name}-baseline" in pruned
    kube.settle()
    assert kube.get("apps/v1", "Deployment", f"{name}-baseline", kube_namespace) is None
    assert kube.get("apps/v1", "Deployment", name, kube_namespace) is not None
    if kube.imitation is not None:
        user = f"system:serviceaccount:{kube_namespace}:"
        log = kube.imitation.authorizer.log
        denied = [d for d in log if d.attributes.user.name.startswith(user) and not d.allowed]
        assert denied == []


def test_a_prune_leaves_an_object_recreated_under_the_same_name(
    kube: Cluster, kube_namespace: str
) -> None:
    """The uid precondition: the object the operator saw is not the one there now (deleted and
    made again by someone else in between), so its delete is refused (409) and nothing goes."""
    cluster = KubernetesCluster(api_client=kube.client(), namespace=kube_namespace, kinds=KINDS)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "theirs", "namespace": kube_namespace},
        "spec": {"ports": [{"port": 80}]},
    }
    kube.apply(service, namespace=kube_namespace)
    manifest = Manifest(body=service, source="test")
    assert cluster.delete_object(manifest, uid="not-its-uid") is False
    assert kube.get("v1", "Service", "theirs", kube_namespace) is not None
    live = kube.get("v1", "Service", "theirs", kube_namespace) or {}
    assert cluster.delete_object(manifest, uid=live["metadata"]["uid"]) is True
    kube.settle()
    assert kube.get("v1", "Service", "theirs", kube_namespace) is None
