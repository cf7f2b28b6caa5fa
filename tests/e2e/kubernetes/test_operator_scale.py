"""One operator, 1,000 SpeculativeDeployments (issue 21 §7 and its acceptance): every resource is
planned (status.verdict) and its objects applied (status.objects.owned: both twins and their
Services, the front Service), the operator stays up, and its memory stays under
the chart's limit. The time it took is printed, not asserted (benchmarks/operator_scale.py
compares it with a plain kopf operator).

The operator runs as the chart's ServiceAccount with the chart's Role; on the imitation in the
default run, on a real cluster with SPECDEPLOY_E2E_KUBECONFIG (where the twins' Pods stay
Pending unless it has 2,000 GPUs: only planning and applying are asserted). Each resource ticks
every 10 minutes, so the time is the first reconcile's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.kubernetes.operator_process import API, OperatorProcess
from tests.kube.cluster import Cluster
from tests.operator.test_resource import profile_text
from tests.support import REPO_ROOT

pytestmark = pytest.mark.slow

RESOURCES = 1000
#: A hang guard, not a timing claim: 1,000 took 176 s on a 2-core Xeon.
DEADLINE_S = 900.0
#: Seconds between two looks at the resources.
POLL_S = 15.0
#: The objects applied for each resource: both twins' Deployments and Services, and the front
#: Service.
OBJECTS_PER_RESOURCE = 5


def _chart_memory_limit_mib() -> float:
    values = yaml.safe_load(
        (REPO_ROOT / "charts" / "specdeploy-operator" / "values.yaml").read_text()
    )
    limit = str(values["resources"]["limits"]["memory"])
    assert limit.endswith("Mi"), limit
    return float(limit[:-2])


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def _handled(kube: Cluster, namespace: str) -> tuple[int, list[dict[str, Any]]]:
    """How many resources are planned and applied, and every resource."""
    found = kube.list(API, "SpeculativeDeployment", namespace)
    done = 0
    for item in found:
        status = item.get("status") or {}
        owned = (status.get("objects") or {}).get("owned") or []
        if status.get("verdict") and len(owned) == OBJECTS_PER_RESOURCE:
            done += 1
    return done, found


def _release(kube: Cluster, namespace: str, names: list[str]) -> None:
    """With the operator gone, what the docs say an admin does (docs/operator.md): remove its
    finalizer, so that deleting the namespace deletes the resources (and by their owner
    references what they own)."""
    for name in names:
        path = f"/apis/specdeploy.io/v1/namespaces/{namespace}/speculativedeployments/{name}"
        body = {"metadata": {"finalizers": None}}
        kube.raw("PATCH", path, body, content_type="application/merge-patch+json")


def test_one_operator_plans_and_applies_a_thousand_resources(
    kube: Cluster, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    template = yaml.safe_load(profile_text(api=API, policy="{mode: static, interval_seconds: 600}"))
    names = [f"tenant-{i:04d}" for i in range(RESOURCES)]
    kubeconfig = kube.chart_identity(ns)  # the chart's account, and its CRD installed
    for name in names:
        kube.apply({**template, "metadata": {"name": name, "namespace": ns}}, namespace=ns)
    operator = OperatorProcess(kubeconfig, ns, tmp_path / "operator.log")
    started = time.monotonic()
    limit = _chart_memory_limit_mib()
    peak = 0.0
    try:
        done, found = 0, []
        while done < RESOURCES:
            assert operator.process.poll() is None, operator.output()[-3000:]
            peak = max(peak, _rss_mib(operator.process.pid))
            assert time.monotonic() - started < DEADLINE_S, (
                f"{done} of {RESOURCES} planned and applied after {DEADLINE_S:.0f} s\n"
                + operator.output()[-3000:]
            )
            # Each look is a LIST of every resource with its status (megabytes): rarely, so
            # that the test does not load the API server more than the operator does.
            time.sleep(POLL_S)
            done, found = _handled(kube, ns)
            print(f"  {done}/{RESOURCES} after {time.monotonic() - started:.0f} s", flush=True)
        took = time.monotonic() - started
        peak = max(peak, _rss_mib(operator.process.pid))
        print(f"{RESOURCES} resources planned and applied in {took:.0f} s; peak RSS {peak:.0f} MiB")
        assert {(item.get("status") or {}).get("verdict") for item in found} == {"Speculating"}
        for item in found:
            ready = [c for c in item["status"]["conditions"] if c["type"] == "Validated"]
            assert ready and ready[0]["status"] == "True", item["status"]["conditions"]
        assert len(kube.list("apps/v1", "Deployment", ns)) == 2 * RESOURCES
        assert peak < limit, f"peak RSS {peak:.0f} MiB, the chart's limit is {limit:.0f} Mi"
    finally:
        code = operator.stop()
        _release(kube, ns, names)
    assert code == 0, operator.output()[-3000:]
