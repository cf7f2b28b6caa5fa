"""llm-d's split driven by the operator (issue 21 §10): with `policy.gateway.backend:
InferencePool` the operator's HTTPRoute weighs the twins' InferencePools, and `specdeploy operator
--router-values` writes the values of llm-d's router chart whose pools select the operator's own
twin pods. What the chart makes of the values is encoded from its templates
(tests/unit/emitters/llmd_router_chart.py names the commits); the pools and the route are checked
against the published CRDs (skipped, with the file named, where the referees are absent)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.emitters.llmd import ROUTER_CHART, ROUTER_CHART_VERSION
from orchestrator.emitters.platform import INFERENCE_API_GROUP
from orchestrator.operator.objects import Owner, owned_manifests
from orchestrator.operator.router import router_files
from orchestrator.plan.types import DeploymentPlan
from tests.support import REPO_ROOT, write_profile
from tests.unit.emitters.llmd_router_chart import chart_pools
from tests.unit.emitters.referees import crd_errors
from tests.unit.manifests.conftest import valid_plan

POOLS = {"mode": "switch", "explore_percent": 10,
         "gateway": {"name": "inference", "backend": "InferencePool"}}  # fmt: skip
MULTI_NODE = {"tensor_parallel_size": 4, "pipeline_parallel_size": 4, "gpus_per_node": 4}
EXAMPLE = REPO_ROOT / "profiles" / "operator" / "qwen3-4b-draft-llmd.yaml"
OWNER = Owner("test", "llm", "uid-1")


def _plan(tmp_path: Path, **sections: Any) -> DeploymentPlan:
    profile = write_profile(tmp_path, deploy={"baseline": True}, policy=POOLS, **sections)
    return valid_plan(profile)


def _serving_pods(objects: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, str], int]]:
    """(workload, role, pod labels, serving port) of every pod the operator's workloads make. A
    LeaderWorkerSet's pods also get the label LWS's pod webhook gives each its index in the
    group, the leader 0 (kubernetes-sigs/lws pkg/webhooks/pod_webhook.go, WorkerIndexLabelKey)."""
    index = "leaderworkerset.sigs.k8s.io/worker-index"
    found = []
    for obj in objects:
        spec = obj["spec"]
        if obj["kind"] == "Deployment":
            templates = [("server", spec["template"], {})]
        elif obj["kind"] == "LeaderWorkerSet":
            group = spec["leaderWorkerTemplate"]
            templates = [
                ("server", group["leaderTemplate"], {index: "0"}),
                ("worker", group["workerTemplate"], {index: "1"}),
            ]
        else:
            continue
        for role, template, injected in templates:
            ports = [p["containerPort"] for c in template["spec"]["containers"]
                     for p in c.get("ports", ())]  # fmt: skip
            labels = {**template["metadata"]["labels"], **injected}
            found.append((obj["metadata"]["name"], role, labels, ports[0] if ports else 0))
    return found


@pytest.mark.parametrize("hardware", [{}, MULTI_NODE], ids=["one-host", "multi-node"])
def test_each_pool_selects_exactly_its_twins_serving_pods_and_the_route_weighs_the_pools(
    tmp_path: Path, hardware: dict[str, Any]
) -> None:
    plan = _plan(tmp_path, **({"hardware": hardware} if hardware else {}))
    pools = chart_pools(router_files(plan), namespace="llm")
    assert sorted(pools) == ["test", "test-baseline"]
    applied = [m.body for m in owned_manifests(plan, OWNER, "speculative", 10)]
    pods = _serving_pods(applied)
    for release, pool in pools.items():
        selector = pool["spec"]["selector"]["matchLabels"]
        selected = [(w, role, port) for w, role, labels, port in pods
                    if selector.items() <= labels.items()]  # fmt: skip
        # the twin's serving pods (across nodes, the leaders: the workers serve no HTTP)
        assert [(w, role) for w, role, _ in selected] == [(release, "server")], (release, pods)
        assert pool["spec"]["targetPorts"] == [{"number": selected[0][2]}]
        assert crd_errors(pool) == [], release
    (route,) = [o for o in applied if o["kind"] == "HTTPRoute"]
    refs = route["spec"]["rules"][0]["backendRefs"]
    assert refs == [
        {"group": INFERENCE_API_GROUP, "kind": "InferencePool", "name": "test", "weight": 90},
        {"group": INFERENCE_API_GROUP, "kind": "InferencePool", "name": "test-baseline",
         "weight": 10},
    ]  # fmt: skip
    assert crd_errors(route) == []


def test_service_backends_are_unchanged_by_the_new_field(tmp_path: Path) -> None:
    profile = write_profile(
        tmp_path, deploy={"baseline": True}, policy={"mode": "switch", "gateway": {"name": "gw"}}
    )
    plan = valid_plan(profile)
    (route,) = [m.body for m in owned_manifests(plan, OWNER, "baseline") if m.kind == "HTTPRoute"]
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"name": "test", "port": 8000, "weight": 0},
        {"name": "test-baseline", "port": 8000, "weight": 100},
    ]


def test_router_values_writes_the_values_and_prints_the_helm_lines(tmp_path: Path) -> None:
    out = tmp_path / "router"
    result = CliRunner().invoke(
        cli, ["operator", "--router-values", str(EXAMPLE), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    for twin in ("qwen3-4b-draft", "qwen3-4b-draft-baseline"):
        values = yaml.safe_load((out / "llm-d" / f"router-{twin}.values.yaml").read_text())
        assert values["router"]["modelServers"]["matchLabels"]["app.kubernetes.io/instance"] == twin
        assert (
            f"helm install {twin} {ROUTER_CHART} --version {ROUTER_CHART_VERSION} -n llm "
            f"-f {out}/llm-d/router-{twin}.values.yaml" in result.output
        )


def test_router_values_for_a_resource_that_routes_to_services_is_refused(tmp_path: Path) -> None:
    resource = REPO_ROOT / "profiles" / "operator" / "qwen3-4b-draft-switch.yaml"
    out = tmp_path / "router"
    result = CliRunner().invoke(
        cli, ["operator", "--router-values", str(resource), "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert "policy.gateway.backend is not InferencePool (no policy.gateway)" in result.output
    assert "fix: set policy.gateway: {name: GATEWAY, backend: InferencePool}" in result.output
    assert "Traceback" not in result.output and not out.exists()
