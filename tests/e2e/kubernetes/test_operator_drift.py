"""Drift on owned objects is corrected within an interval, and nothing is re-applied while nothing
drifted (issue 21 §6). A running operator as the chart's ServiceAccount with the chart's Role;
someone else then scales its Deployment, edits its container command and its front Service's port,
as `kubectl scale`/`edit`/`patch` do (an update under another field manager, which takes the
fields it changes from specdeploy: managedFields). On the imitation in the default run, on a
real cluster with SPECDEPLOY_E2E_KUBECONFIG.

Also here: a create whose body has no apiVersion and kind is the URL's kind (kopf posts its
Events so, and the DriftCorrected Event is one of them).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.kubernetes.operator_process import OperatorProcess, applied, create_resource
from tests.kube.cluster import Cluster

pytestmark = pytest.mark.slow

NAME = "drifty"
INTERVAL_S = 1


def _patch(kube: Cluster, path: str, body: Any, content_type: str, manager: str) -> None:
    status, answer = kube.raw(
        "PATCH", path, body, content_type=content_type, query={"fieldManager": manager}
    )
    assert status == 200, answer


def _engine(deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "engine")


def _drift_messages(kube: Cluster, namespace: str) -> list[str]:
    return [
        str(e.get("message"))
        for e in kube.events(namespace, involved=NAME)
        if e.get("reason") == "DriftCorrected"
    ]


def test_drift_is_taken_back_within_an_interval_and_said(
    kube: Cluster, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    operator = OperatorProcess(kube.chart_identity(ns), ns, tmp_path / "operator.log")
    try:
        create_resource(kube, ns, NAME, INTERVAL_S)
        owned = kube.wait_for("the resource applied", lambda: applied(kube, ns, NAME), 90)
        assert all(ref.get("fields") for ref in owned), owned  # each with its fingerprint
        deployment = kube.get("apps/v1", "Deployment", NAME, ns)
        front = kube.get("v1", "Service", f"{NAME}-front", ns)
        assert deployment is not None and front is not None
        replicas, command = deployment["spec"]["replicas"], _engine(deployment)["command"]
        target_port = front["spec"]["ports"][0]["targetPort"]

        apps = f"/apis/apps/v1/namespaces/{ns}/deployments/{NAME}"
        scaled = {"spec": {"replicas": replicas + 2}}
        _patch(kube, apps, scaled, "application/merge-patch+json", "kubectl-scale")
        wrong = ["serve", "someone/else"]
        edited = [
            {"op": "replace", "path": "/spec/template/spec/containers/0/command", "value": wrong}
        ]
        _patch(kube, apps, edited, "application/json-patch+json", "kubectl-edit")
        port = [{"op": "replace", "path": "/spec/ports/0/targetPort", "value": 9999}]
        services = f"/api/v1/namespaces/{ns}/services/{NAME}-front"
        _patch(kube, services, port, "application/json-patch+json", "kubectl-patch")
        edited_at = time.monotonic()

        def healed() -> bool:
            now = kube.get("apps/v1", "Deployment", NAME, ns) or {"spec": {}}
            service = kube.get("v1", "Service", f"{NAME}-front", ns) or {"spec": {}}
            return (
                now["spec"].get("replicas") == replicas
                and _engine(now)["command"] == command
                and service["spec"]["ports"][0]["targetPort"] == target_port
            )

        kube.wait_for("the drift taken back", healed, 30, interval=0.1)
        took = time.monotonic() - edited_at
        messages = kube.wait_for("a DriftCorrected Event", lambda: _drift_messages(kube, ns), 30)
        said = " | ".join(messages)
        assert f"Deployment/{NAME}: " in said and ".spec.replicas (kubectl-scale)" in said, said
        assert '.spec.template.spec.containers[name="engine"].command (kubectl-edit)' in said
        assert f"Service/{NAME}-front: " in said and ".targetPort (kubectl-patch)" in said, said
        assert "edit the SpeculativeDeployment's spec" in said  # the fix

        # steady state: the fingerprints match again, so nothing is applied interval after interval
        settled = (len(_drift_messages(kube, ns)), _reconciles(kube, ns), _applies(kube, ns))
        time.sleep(3 * INTERVAL_S + 0.5)
        now = (len(_drift_messages(kube, ns)), _reconciles(kube, ns), _applies(kube, ns))
        assert now == settled, operator.output()[-3000:]
        print(f"drift taken back {took:.1f} s after the edits (interval {INTERVAL_S} s)")
    finally:
        assert operator.stop() == 0, operator.output()[-3000:]


def _reconciles(kube: Cluster, namespace: str) -> int:
    """Applied Events: one per reconcile."""
    return sum(1 for e in kube.events(namespace, involved=NAME) if e.get("reason") == "Applied")


def _applies(kube: Cluster, namespace: str) -> int:
    """Server-side applies the imitation answered in the namespace (-1 on a real cluster, where
    the Events say it instead)."""
    if kube.imitation is None:
        return -1
    return sum(
        1
        for r in kube.imitation.requests
        if r.method == "PATCH"
        and f"/namespaces/{namespace}/" in r.path
        and "fieldManager=specdeploy" in r.path
        and "/status" not in r.path.split("?")[0]
    )


def test_a_create_without_apiversion_and_kind_is_the_urls_kind(
    kube: Cluster, kube_namespace: str
) -> None:
    """As kopf posts Events (kopf/_cogs/clients/events.py sends metadata, reason, message and
    involvedObject only); the API server decodes the body with the URL's kind as its default.
    A body that names another API version is still refused."""
    event = {
        "metadata": {"generateName": "drift-", "namespace": kube_namespace},
        "type": "Warning",
        "reason": "DriftCorrected",
        "message": "m",
        "involvedObject": {"kind": "Service", "name": "x", "namespace": kube_namespace},
    }
    path = f"/api/v1/namespaces/{kube_namespace}/events"
    status, answer = kube.raw("POST", path, event)
    assert status == 201, answer
    assert answer["kind"] == "Event" and answer["apiVersion"] == "v1"
    status, answer = kube.raw("POST", path, {**event, "apiVersion": "apps/v1"})
    assert status == 400, answer
