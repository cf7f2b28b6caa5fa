"""Deleting a SpeculativeDeployment while the operator is stopped (issue 21 §8; docs/operator.md,
"Deleting a resource while the operator is down"). kopf puts its finalizer on each resource
while the resource's control loop runs, so a resource deleted with no operator running stays,
with a deletionTimestamp, until either
- the operator is back: it stops the loop (none runs) and removes its finalizer; or
- an admin removes the finalizer with the documented `kubectl patch`;
and then the garbage collector deletes what it owned, by their ownerReferences.

The operator runs as the chart's ServiceAccount with the chart's Role; on the imitation in the
default run, on a real cluster with SPECDEPLOY_E2E_KUBECONFIG.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.kubernetes.operator_process import (
    KIND,
    OperatorProcess,
    applied,
    create_resource,
    resource,
)
from tests.kube.cluster import Cluster

pytestmark = pytest.mark.slow

FINALIZER = "specdeploy.io/operator"
#: Two resources: one waits for the operator, one has its finalizer removed by hand.
WAITS, UNBLOCKED = "waits", "unblocked"


def _owned_objects(kube: Cluster, namespace: str, name: str) -> list[str]:
    """Which of the resource's twins and Services still exist."""
    found = []
    for api, kind, object_name in (
        ("apps/v1", "Deployment", name),
        ("apps/v1", "Deployment", f"{name}-baseline"),
        ("v1", "Service", f"{name}-front"),
    ):
        if kube.get(api, kind, object_name, namespace) is not None:
            found.append(f"{kind}/{object_name}")
    return found


def _held(kube: Cluster, namespace: str, name: str) -> bool:
    found = resource(kube, namespace, name) or {"metadata": {}}
    meta = found["metadata"]
    return bool(meta.get("deletionTimestamp")) and FINALIZER in (meta.get("finalizers") or [])


def _remove_finalizer(kube: Cluster, namespace: str, name: str) -> None:
    """The request the documented `kubectl patch speculativedeployment NAME -n NS --type=merge
    -p '{"metadata":{"finalizers":null}}'` sends, as an admin (kubectl itself sends no token
    over the imitation's plain HTTP)."""
    path = f"/apis/specdeploy.io/v1/namespaces/{namespace}/speculativedeployments/{name}"
    body = {"metadata": {"finalizers": None}}
    status, answer = kube.raw("PATCH", path, body, content_type="application/merge-patch+json")
    assert status == 200, answer


def test_a_resource_deleted_while_the_operator_is_down_goes_when_it_is_back_or_by_hand(
    kube: Cluster, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    kubeconfig = kube.chart_identity(ns)
    log = tmp_path / "operator.log"
    first = OperatorProcess(kubeconfig, ns, log)
    try:
        for name in (WAITS, UNBLOCKED):
            create_resource(kube, ns, name, interval_s=30)
        for name in (WAITS, UNBLOCKED):
            kube.wait_for(f"{name} applied", lambda n=name: applied(kube, ns, n), 90)
            meta = (resource(kube, ns, name) or {})["metadata"]
            assert FINALIZER in (meta.get("finalizers") or []), meta
    finally:
        assert first.stop() == 0, first.output()[-3000:]

    for name in (WAITS, UNBLOCKED):
        kube.delete("specdeploy.io/v1", KIND, name, ns)
    kube.settle()  # the garbage collector has nothing to do while the owner is there
    for name in (WAITS, UNBLOCKED):
        assert _held(kube, ns, name), resource(kube, ns, name)
        assert len(_owned_objects(kube, ns, name)) == 3

    # an admin who cannot wait: the finalizer removed by hand, then the GC deletes what it owned
    _remove_finalizer(kube, ns, UNBLOCKED)
    kube.wait_for("the unblocked resource gone", lambda: resource(kube, ns, UNBLOCKED) is None, 30)
    kube.settle()
    kube.wait_for(
        "its objects garbage-collected", lambda: not _owned_objects(kube, ns, UNBLOCKED), 60
    )
    assert _held(kube, ns, WAITS)  # the other still waits for the operator

    second = OperatorProcess(kubeconfig, ns, log)
    try:
        kube.wait_for("the operator to let it go", lambda: resource(kube, ns, WAITS) is None, 60)
        kube.settle()
        kube.wait_for("its objects garbage-collected", lambda: not _owned_objects(kube, ns, WAITS))
    finally:
        assert second.stop() == 0, second.output()[-3000:]
