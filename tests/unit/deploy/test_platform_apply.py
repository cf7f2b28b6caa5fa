"""apply / status / delete of the platforms' custom resources against the loopback API server,
which serves their CRDs' kinds: server-side apply in the platform's kind order, and status
reading each platform's Ready condition."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer

from orchestrator.cli import cli
from tests.support import REPO_ROOT, write_profile
from tests.unit.deploy.fake_kube import FakeKube
from tests.unit.deploy.test_deploy_cmd import kubeconfig

DRAFT = REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml"  # namespace llm, baseline twin
EAGLE3 = REPO_ROOT / "profiles" / "trtllm-llama31-8b-eagle3.yaml"


def _env(httpserver: HTTPServer, tmp_path: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(kubeconfig(tmp_path, httpserver.url_for("").rstrip("/")))}


@pytest.mark.parametrize(
    ("profile", "platform", "key"),
    [
        (
            DRAFT,
            "kserve",
            ("apis/serving.kserve.io/v1alpha2", "llminferenceservices", "llm", "qwen3-4b-draft"),
        ),
        (
            DRAFT,
            "kserve-runtime",
            (
                "apis/serving.kserve.io/v1beta1",
                "inferenceservices",
                "llm",
                "qwen3-4b-draft-baseline",
            ),
        ),
        (DRAFT, "kaito", ("apis/kaito.sh/v1beta1", "workspaces", "llm", "qwen3-4b-draft")),
        (
            EAGLE3,
            "dynamo",
            ("apis/nvidia.com/v1beta1", "dynamographdeployments", "team", "llama31-8b-eagle3"),
        ),
        (
            DRAFT,
            "llm-d",
            ("apis/inference.networking.k8s.io/v1", "inferencepools", "llm", "qwen3-4b-draft"),
        ),
    ],
)
def test_apply_twice_status_delete(
    httpserver: HTTPServer,
    fake_kube: FakeKube,
    tmp_path: Path,
    profile: Path,
    platform: str,
    key: tuple[str, str, str, str],
) -> None:
    env = _env(httpserver, tmp_path)
    runner = CliRunner()
    args = [str(profile), "--offline", "--platform", platform]
    first = runner.invoke(cli, ["apply", *args, "--ignore", "checkpoint.unresolved"], env=env)
    assert first.exit_code == 0, first.output
    assert key in fake_kube.objects
    assert "fieldManager=specdeploy" in next(p for m, p in fake_kube.requests if m == "PATCH")
    again = runner.invoke(cli, ["apply", *args, "--ignore", "checkpoint.unresolved"], env=env)
    assert "created" not in again.output and "unchanged" in again.output
    gone = runner.invoke(cli, ["delete", str(profile), "--platform", platform], env=env)
    assert gone.exit_code == 0, gone.output
    assert fake_kube.objects == {}


def test_status_explains_the_ready_condition(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    env = _env(httpserver, tmp_path)
    runner = CliRunner()
    assert (
        runner.invoke(
            cli, ["apply", str(DRAFT), "--offline", "--platform", "kserve"], env=env
        ).exit_code
        == 0
    )
    key = ("apis/serving.kserve.io/v1alpha2", "llminferenceservices", "llm", "qwen3-4b-draft")
    fake_kube.objects[key]["status"] = {
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "WorkloadsNotReady",
                "message": "0/1 pods ready",
            }
        ]
    }
    shown = runner.invoke(cli, ["status", str(DRAFT), "--platform", "kserve"], env=env)
    assert (
        "LLMInferenceService/qwen3-4b-draft: Ready=False (WorkloadsNotReady: 0/1 pods ready)"
        in shown.output
    )
    assert "Ready means: KServe's Ready aggregates WorkloadsReady" in shown.output
    assert (
        "LLMInferenceService/qwen3-4b-draft-baseline: Ready=Unknown (not reported by its controller yet)"
        in shown.output
    )
    fake_kube.objects[key]["status"]["conditions"][0]["status"] = "True"
    ready = runner.invoke(cli, ["status", str(DRAFT), "--platform", "kserve"], env=env)
    assert "qwen3-4b-draft: Ready=True" in ready.output
    assert ready.output.count("Ready means") == 1  # only the twin that is not ready explains


def test_helm_values_platforms_are_not_applied(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    env = _env(httpserver, tmp_path)
    done = CliRunner().invoke(
        cli, ["apply", str(DRAFT), "--offline", "--platform", "production-stack"], env=env
    )
    assert done.exit_code == 4, done.output
    assert "helm install" in done.output and "Traceback" not in done.output
    assert fake_kube.objects == {}


def test_a_missing_crd_is_named_with_its_install(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    fake_kube.missing_groups.add("kaito.sh")
    env = _env(httpserver, tmp_path)
    done = CliRunner().invoke(
        cli, ["apply", str(DRAFT), "--offline", "--platform", "kaito"], env=env
    )
    assert done.exit_code == 6, done.output
    assert "Kaito" in done.output and "Traceback" not in done.output


def test_split_route_is_applied_after_the_twins(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    profile = write_profile(tmp_path, deploy={"baseline": True, "baseline_traffic_percent": 10})
    env = _env(httpserver, tmp_path)
    done = CliRunner().invoke(
        cli,
        [
            "apply",
            str(profile),
            "--offline",
            "--platform",
            "llm-d",
            "--ignore",
            "checkpoint.unresolved",
        ],
        env=env,
    )
    assert done.exit_code == 0, done.output
    patches = [p.split("?")[0].split("/")[-2] for m, p in fake_kube.requests if m == "PATCH"]
    assert patches[-1] == "httproutes" and patches.index("inferencepools") < len(patches) - 1
