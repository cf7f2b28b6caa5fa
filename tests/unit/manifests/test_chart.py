"""charts/specdeploy, checked by a real `helm` (Helm 4 from .ci/install-k8s-tools.sh): it lints,
and `helm template` with `render --helm-values` output gives our render, object by object."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.emitters.kubernetes import manifests_for
from orchestrator.manifests.helm import chart_dir, helm_values, helm_values_yaml, values_schema
from orchestrator.plan.types import DeploymentPlan
from tests.support import EXAMPLE_PROFILES, REPO_ROOT
from tests.unit.manifests.conftest import MakePlan, valid_plan

HELM = REPO_ROOT / ".ci" / "bin" / "helm"


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    binary = HELM if HELM.exists() else shutil.which("helm")
    if binary is None:
        pytest.skip("no helm: run .ci/install-k8s-tools.sh helm")
    home = tmp_path_factory.mktemp("helm-home")
    for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        os.environ[var] = str(home / var.lower())
    return [str(binary)]


def run(helm: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*helm, *args], capture_output=True, text=True, timeout=60)


def helm_template(helm: list[str], plan: DeploymentPlan, tmp_path: Path) -> list[Any]:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(helm_values(plan)))
    done = run(helm, "template", "release", str(chart_dir()), "-f", str(values))
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def key(body: dict[str, Any]) -> tuple[str, str]:
    return body["kind"], body["metadata"]["name"]


def assert_same_objects(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
    assert sorted(map(key, ours)) == sorted(map(key, theirs))
    by_key = {key(b): b for b in theirs}
    for body in ours:
        assert by_key[key(body)] == body, f"{key(body)} differs between render and helm template"


def test_chart_lints(helm: list[str]) -> None:
    done = run(helm, "lint", "--strict", str(chart_dir()))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("profile", EXAMPLE_PROFILES, ids=lambda p: p.stem)
def test_helm_template_matches_render(helm: list[str], profile: Path, tmp_path: Path) -> None:
    plan = valid_plan(profile)
    ours = [m.body for m in manifests_for(plan)]
    assert_same_objects(ours, helm_template(helm, plan, tmp_path))


@pytest.mark.parametrize(
    "sections",
    [
        {"hardware": {"device": "cpu"}},
        {"hardware": {"tensor_parallel_size": 16}, "deploy": {"baseline": True}},
        {
            "engine": {"name": "sglang", "version": "0.5.23"},
            "proposer": {"method": "ngram"},
            "hardware": {"tensor_parallel_size": 8, "pipeline_parallel_size": 2},
        },
        {"serving": {"extra_args": ['"}\nkind: Secret', "{{ .Values }}"]}},
        {
            "engine": {"name": "trtllm", "version": "1.1.0"},
            "target": {"model": "meta-llama/Llama-3.1-8B-Instruct"},
            "proposer": {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
            "deploy": {"hf_token_secret": "hf-token"},
        },
    ],
    ids=["cpu", "vllm-multi-node", "sglang-multi-node", "crafted-strings", "trtllm-download"],
)
def test_helm_template_matches_render_for_other_shapes(
    helm: list[str], make_plan: MakePlan, sections: dict[str, Any], tmp_path: Path
) -> None:
    plan = make_plan(**sections)
    ours = [m.body for m in manifests_for(plan)]
    assert_same_objects(ours, helm_template(helm, plan, tmp_path))


def test_helm_template_matches_render_with_model_cache(
    helm: list[str], make_plan: MakePlan, tmp_path: Path
) -> None:
    cache = {"size": "10Gi", "access_mode": "ReadWriteOnce"}
    plan = make_plan(deploy={"baseline": True, "model_cache": cache})
    ours = [m.body for m in manifests_for(plan)]
    assert_same_objects(ours, helm_template(helm, plan, tmp_path))


def test_schema_rejects_bad_values(helm: list[str], make_plan: MakePlan, tmp_path: Path) -> None:
    values = helm_values(make_plan())
    values["variants"][0]["replicas"] = -1
    values["variants"][0]["pod"]["imagez"] = "typo"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(values))
    done = run(helm, "template", "release", str(chart_dir()), "-f", str(path))
    assert done.returncode != 0
    assert "replicas" in done.stderr


def test_committed_schema_is_generated_from_the_context_models() -> None:
    committed = json.loads((chart_dir() / "values.schema.json").read_text())
    assert committed == values_schema(), (
        "charts/specdeploy/values.schema.json is stale; regenerate it with "
        "python -c 'import json; from orchestrator.manifests.helm import values_schema; "
        "print(json.dumps(values_schema(), indent=2, sort_keys=True))' "
        "> charts/specdeploy/values.schema.json"
    )


def test_default_values_are_an_example_profile() -> None:
    plan = valid_plan(REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml")
    committed = yaml.safe_load((chart_dir() / "values.yaml").read_text())
    assert committed == yaml.safe_load(helm_values_yaml(plan))
