"""Opt-in (`pytest --run-cluster`): server-side dry run and status against the current kube
context. Nothing is created: apply uses --server-dry-run, so any cluster can be used."""

from __future__ import annotations

import pytest

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
