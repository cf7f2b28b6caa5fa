"""Opt-in (`pytest --run-cluster`): against the current kube context. The dry run creates
nothing (apply uses --server-dry-run, so any cluster can be used); the tune run applies and
deletes its arms, so it needs nodes that can run the profile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli import cli
from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
from orchestrator.emitters.kubernetes import manifests_for
from tests.support import REPO_ROOT
from tests.unit.manifests.conftest import valid_plan

pytestmark = pytest.mark.cluster


def test_server_dry_run_accepts_every_manifest() -> None:
    plan = valid_plan(REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml")
    cluster = KubernetesCluster()
    results = cluster.apply(manifests_for(plan), server_dry_run=True)
    assert {r.kind for r in results} == {"Service", "Deployment"}
    assert plan.profile is not None
    assert cluster.status(plan.profile).namespace == cluster.namespace


def test_tune_cluster_measures_through_the_service_proxy(tmp_path: Path) -> None:
    """`tune --cluster` on a real cluster (GPU nodes for the profile, which pulls its image and
    weights): each arm becomes ready, is measured through kube-apiserver's service proxy, and
    nothing of it is left afterwards. SPECDEPLOY_TUNE_PROFILE picks the profile (default: the
    Qwen3-8B n-gram example, one GPU per arm)."""
    profile = Path(
        os.environ.get(
            "SPECDEPLOY_TUNE_PROFILE", REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml"
        )
    )
    out = tmp_path / "tune"
    result = CliRunner().invoke(
        cli,
        [
            "tune", str(profile), "--cluster", "--engine-timeout", "3600", "--k", "2",
            "--concurrency", "1", "--requests", "16", "--max-tokens", "64", "--out", str(out),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [cell] = json.loads((out / "tune.json").read_text())["cells"]
    assert cell["ok"] == 16 and cell["speedup"]["low"] <= cell["speedup"]["high"]
    plan = valid_plan(profile)
    assert plan.profile is not None
    cluster = KubernetesCluster()
    for suffix in ("-tune-baseline", "-tune-k2"):
        name = plan.profile.metadata.name + suffix
        left = cluster.status(
            plan.profile.model_copy(
                update={"metadata": plan.profile.metadata.model_copy(update={"name": name})}
            )
        )
        assert not left.workloads, f"{name} was not deleted: {left.lines()}"
