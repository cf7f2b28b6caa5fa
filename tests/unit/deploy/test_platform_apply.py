"""apply / status / delete of the platforms' custom resources against the loopback API server,
which serves their CRDs' kinds: server-side apply in the platform's kind order, and status
reading each platform's Ready condition."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from pytest_httpserver import HTTPServer

from orchestrator.cli import cli
from orchestrator.emitters.llmd import ROUTER_CHART, ROUTER_CHART_VERSION
from tests.support import REPO_ROOT, write_profile
from tests.unit.deploy.fake_kube import RESOURCES, FakeKube
from tests.unit.deploy.test_deploy_cmd import kubeconfig
from tests.unit.emitters.conftest import at_release
from tests.unit.emitters.referees import CRDS, TRANSCRIBED, Crd, Transcribed, resources

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
            ("apis/apps/v1", "deployments", "llm", "qwen3-4b-draft-decode"),
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
    profile = _at_platform_release(platform, profile, tmp_path)
    args = [str(profile), "--offline", "--platform", platform, *_options(platform)]
    first = runner.invoke(cli, ["apply", *args, "--ignore", "checkpoint.unresolved"], env=env)
    assert first.exit_code == 0, first.output
    assert key in fake_kube.objects
    assert "fieldManager=specdeploy" in next(p for m, p in fake_kube.requests if m == "PATCH")
    again = runner.invoke(cli, ["apply", *args, "--ignore", "checkpoint.unresolved"], env=env)
    assert "created" not in again.output and "unchanged" in again.output
    gone = runner.invoke(
        cli, ["delete", str(profile), "--platform", platform, *_options(platform)], env=env
    )
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
        cli,
        [
            "apply",
            str(_at_platform_release("kaito", DRAFT, tmp_path)),
            "--offline",
            "--platform",
            "kaito",
            *_options("kaito"),
        ],
        env=env,
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
    assert patches[-1] == "httproutes" and patches.index("deployments") < len(patches) - 1
    assert "inferencepools" not in patches  # llm-d's router chart makes them, and apply says so
    assert "not applied: each twin's InferencePool and its endpoint picker" in done.output
    assert "  why: " in done.output and "  fix: `specdeploy render " in done.output
    assert f"helm install test {ROUTER_CHART} --version {ROUTER_CHART_VERSION}" in done.output
    assert "Traceback" not in done.output


@pytest.mark.parametrize(
    ("key", "referee"),
    [pytest.param(k, r, id="/".join(k)) for k, r in [*CRDS.items(), *TRANSCRIBED.items()]],
)
def test_the_loopback_server_serves_the_kinds_as_their_crds_define_them(
    key: tuple[str, str], referee: Crd | Transcribed
) -> None:
    """The fake API server's table (group/version, plural, namespaced) is what the vendored CRD
    says, or what the kind's kubebuilder markers say (our transcriptions record them)."""
    group, kind = key
    served = {(f"apis/{gv}", plural): (k, ns) for gv, plural, k, ns in resources(referee)}
    ours = {
        path: value
        for path, value in RESOURCES.items()
        if path[0].removeprefix("apis/").split("/")[0] == group and value[0] == kind
    }
    assert ours, key
    for path, value in ours.items():
        assert served.get(path) == value, path


def test_an_object_its_crd_refuses_is_refused_with_the_field(
    httpserver: HTTPServer, fake_kube: FakeKube, tmp_path: Path
) -> None:
    """The loopback server judges custom resources by their referee, as the API server does: the
    CLI reports the 422 with the field and exits 6; a valid set applies (tests above)."""
    from kubernetes import client

    from orchestrator.deploy.kubernetes_cluster import KubernetesCluster
    from orchestrator.emitters.base import Manifest, emitter_for
    from orchestrator.errors import OrchestratorError
    from tests.unit.manifests.conftest import valid_plan

    emitter = emitter_for("kserve")
    (service, _) = emitter.emit(valid_plan(DRAFT))
    body = {**service.body, "spec": {**service.body["spec"], "parallelism": {"tensor": 0}}}
    configuration = client.Configuration()
    configuration.host = httpserver.url_for("").rstrip("/")
    cluster = KubernetesCluster(
        namespace="llm", api_client=client.ApiClient(configuration), kinds=emitter.kinds
    )
    with pytest.raises(OrchestratorError) as refused:
        cluster.apply([Manifest.parse(body, source="test")])
    assert refused.value.exit_code == 6
    assert "HTTP 422" in str(refused.value)
    assert ".spec.parallelism.tensor: 0 is less than the minimum of 1" in refused.value.why
    assert fake_kube.objects == {}
    cluster.apply([service])  # the emitted object as it is applies
    assert len(fake_kube.objects) == 1


@pytest.mark.parametrize(
    ("profile", "platform", "key", "condition", "explains"),
    [
        (
            DRAFT,
            "kaito",
            ("apis/kaito.sh/v1beta1", "workspaces", "llm", "qwen3-4b-draft"),
            "WorkspaceSucceeded",
            "Kaito's WorkspaceSucceeded follows ResourceReady",
        ),
        (
            EAGLE3,
            "dynamo",
            ("apis/nvidia.com/v1beta1", "dynamographdeployments", "team", "llama31-8b-eagle3"),
            "Ready",
            "Dynamo's Ready is True once every component",
        ),
    ],
)
def test_status_explains_each_platforms_ready_condition(
    httpserver: HTTPServer,
    fake_kube: FakeKube,
    tmp_path: Path,
    profile: Path,
    platform: str,
    key: tuple[str, str, str, str],
    condition: str,
    explains: str,
) -> None:
    env = _env(httpserver, tmp_path)
    runner = CliRunner()
    profile = _at_platform_release(platform, profile, tmp_path)
    args = [str(profile), "--offline", "--platform", platform, *_options(platform)]
    args += ["--ignore", "checkpoint.unresolved"]
    assert runner.invoke(cli, ["apply", *args], env=env).exit_code == 0
    reason, message = "insufficient_capacity", "0/1 nodes have nvidia.com/gpu"
    fake_kube.objects[key]["status"] = {
        "conditions": [{"type": condition, "status": "False", "reason": reason, "message": message}]
    }
    status = ["status", str(profile), "--platform", platform]
    shown = runner.invoke(cli, status, env=env)
    kind = fake_kube.objects[key]["kind"]
    assert f"{kind}/{key[3]}: {condition}=False ({reason}: {message})" in shown.output
    assert f"{condition} means: {explains}" in shown.output
    fake_kube.objects[key]["status"]["conditions"][0]["status"] = "True"
    ready = runner.invoke(cli, status, env=env)
    assert f"{kind}/{key[3]}: {condition}=True" in ready.output


def _options(platform: str) -> list[str]:
    """Kaito on existing nodes: the examples' GPUs have no Azure SKU in Kaito's table, which
    the default nodes=provisioned needs."""
    return ["--platform-option", "nodes=existing"] if platform == "kaito" else []


def _at_platform_release(platform: str, profile: Path, directory: Path) -> Path:
    """Kaito: the profile planned for the vLLM release its preset image runs (it refuses
    another)."""
    if platform != "kaito":
        return profile
    from orchestrator.emitters.kaito import KAITO_VLLM_VERSION

    return at_release(profile, directory, KAITO_VLLM_VERSION)
