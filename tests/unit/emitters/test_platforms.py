"""Every platform from the same plan: each example profile renders or is refused with what, why
and fix; Kaito's ConfigMap survives Kaito's own `--KEY str(VALUE)` expansion; the A/B split is emitted
where a platform has one (test_llmd.py builds the llm-d overlay with kubectl kustomize)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.emitters.base import EMITTER_CLASSES, emitter_for
from orchestrator.emitters.kaito import KAITO_VLLM_VERSION
from orchestrator.emitters.platform import PlatformOptionError
from orchestrator.errors import IncompatibleError
from tests.support import EXAMPLE_PROFILES, REPO_ROOT, write_profile
from tests.unit.emitters.conftest import ParseVllm, at_release
from tests.unit.manifests.conftest import valid_plan

PLATFORMS = sorted(EMITTER_CLASSES)
KAITO_ENGINE = {"name": "vllm", "version": KAITO_VLLM_VERSION}
SPLIT = {"baseline": True, "baseline_traffic_percent": 20, "gateway": "infra/inference"}


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("profile", EXAMPLE_PROFILES, ids=lambda p: p.stem)
def test_every_example_renders_or_is_refused_with_a_fix(
    profile: Path, platform: str, tmp_path: Path
) -> None:
    plan = valid_plan(profile)
    emitter = emitter_for(platform)
    try:
        files = emitter.files(plan)
    except IncompatibleError as exc:
        assert exc.why and exc.fix and exc.rule == "platform.unsupported"
        if "has no weighted traffic split" in exc.what:
            assert plan.profile.deploy.baseline_traffic_percent is not None
            assert "remove deploy.baseline_traffic_percent" in exc.fix
            assert platform not in ("kubernetes", "kserve", "llm-d")  # the ones that split
            return
        if platform == "kaito" and plan.profile.engine.name in emitter.engines:  # type: ignore[attr-defined]
            assert 'engine.version: "0.25.1"' in exc.fix
            plan = valid_plan(at_release(profile, tmp_path, KAITO_VLLM_VERSION))
            with pytest.raises(IncompatibleError, match="no Azure SKU") as no_sku:
                emitter.files(plan)
            assert "nodes=existing" in no_sku.value.fix
            files = emitter_for(platform, {"nodes": "existing"}).files(plan)
            assert any(plan.profile.metadata.name in content for content in files.values())
            return
        assert plan.profile.engine.name not in emitter.engines  # type: ignore[attr-defined]
        return
    assert any(plan.profile.metadata.name in content for content in files.values())


def test_trtllm_runs_only_where_a_platform_can_start_it() -> None:
    plan = valid_plan(REPO_ROOT / "profiles" / "trtllm-llama31-8b-eagle3.yaml")
    refused = {p for p in PLATFORMS if _refused(p, plan)}
    assert refused == {"kaito", "kserve", "kserve-runtime", "production-stack"}


def test_unknown_platform_option_is_a_usage_error() -> None:
    with pytest.raises(PlatformOptionError, match="did you mean 'api-version'"):
        emitter_for("kserve", {"api-versions": "v1alpha1"})
    with pytest.raises(PlatformOptionError, match="not one of"):
        emitter_for("kserve", {"api-version": "v2"})


def test_kserve_v1alpha1_where_asked() -> None:
    plan = valid_plan(REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml")
    (service,) = emitter_for("kserve", {"api-version": "v1alpha1"}).emit(plan)
    assert service.api_version == "serving.kserve.io/v1alpha1"


class TestSplit:
    def test_kserve_route_group_weights(self, tmp_path: Path) -> None:
        plan = valid_plan(write_profile(tmp_path, deploy=SPLIT))
        routes = {m.name: m.body["spec"]["router"] for m in emitter_for("kserve").emit(plan)}
        assert routes["test"]["route"] == {"group": "test", "weight": 80}
        assert routes["test-baseline"]["route"] == {"group": "test", "weight": 20}
        assert routes["test"]["gateway"] == {"refs": [{"name": "inference", "namespace": "infra"}]}

    @pytest.mark.parametrize(
        ("platform", "kind", "names"),
        [
            ("kubernetes", "Service", ["test", "test-baseline"]),
            ("llm-d", "InferencePool", ["test", "test-baseline"]),
        ],
    )
    def test_httproute_weights_between_the_twins(
        self, tmp_path: Path, platform: str, kind: str, names: list[str]
    ) -> None:
        plan = valid_plan(write_profile(tmp_path, deploy=SPLIT))
        (route,) = [m for m in emitter_for(platform).emit(plan) if m.kind == "HTTPRoute"]
        refs = route.body["spec"]["rules"][0]["backendRefs"]
        assert [(r["kind"], r["name"], r["weight"]) for r in refs] == [
            (kind, names[0], 80),
            (kind, names[1], 20),
        ]
        assert route.body["spec"]["parentRefs"][0]["namespace"] == "infra"

    @pytest.mark.parametrize("platform", ["kaito", "production-stack", "dynamo", "kserve-runtime"])
    def test_platforms_without_a_split_refuse_it(self, tmp_path: Path, platform: str) -> None:
        plan = valid_plan(write_profile(tmp_path, deploy=SPLIT))
        with pytest.raises(IncompatibleError, match="no weighted traffic split") as caught:
            emitter_for(platform).files(plan)
        assert caught.value.field == "deploy.baseline_traffic_percent"

    def test_no_split_object_without_the_setting(self, tmp_path: Path) -> None:
        plan = valid_plan(write_profile(tmp_path, deploy={"baseline": True}))
        assert not [m for m in emitter_for("kubernetes").emit(plan) if m.kind == "HTTPRoute"]


class TestKaito:
    def test_config_values_are_strings_and_the_speculative_config_is_json(
        self, tmp_path: Path
    ) -> None:
        plan = _kaito_plan("vllm-qwen3-4b-draft.yaml", tmp_path)
        config = _kaito_config(plan)
        assert all(isinstance(v, str) for v in config.values())
        assert json.loads(config["speculative-config"])["method"] == "draft_model"

    def test_vllm_receives_the_launch_through_kaitos_expansion(
        self, parse_vllm: ParseVllm, tmp_path: Path
    ) -> None:
        plan = _kaito_plan("vllm-qwen3-4b-draft.yaml", tmp_path)
        # What Kaito's inference_api.py does (presets/workspace/inference/vllm/inference_api.py,
        # v0.12.0): its own run params first, then `--KEY`, `str(VALUE)` per `vllm:` entry.
        kaito_own = ["--model", "Qwen/Qwen3-4B-Thinking-2507", "--tensor-parallel-size", "8"]
        appended: list[str] = []
        for key, value in _kaito_config(plan).items():
            appended += [f"--{key}", str(value)]
        via_kaito, direct = parse_vllm(
            [kaito_own + appended, list(plan.launch_for(container=True).argv[2:])]
        )
        assert "error" not in via_kaito, via_kaito
        for key in ("speculative_config", "tensor_parallel_size", "max_model_len", "max_num_seqs"):
            assert via_kaito[key] == direct[key], key

    def test_a_valueless_flag_is_refused(self, tmp_path: Path) -> None:
        plan = valid_plan(
            write_profile(tmp_path, engine=KAITO_ENGINE, vllm={"enforce_eager": True})
        )
        with pytest.raises(IncompatibleError, match="--enforce-eager takes no value"):
            emitter_for("kaito").files(plan)

    def test_no_sku_with_provisioned_nodes_is_refused(self, tmp_path: Path) -> None:
        plan = _kaito_plan("vllm-qwen3-8b-ngram.yaml", tmp_path)  # L40S x1
        with pytest.raises(IncompatibleError) as caught:
            emitter_for("kaito").files(plan)
        assert "hardware.gpu=L40S x1 per node has no Azure SKU" in str(caught.value)
        assert "refuses a Workspace without resource.instanceType" in caught.value.why
        assert "--platform-option nodes=existing" in caught.value.fix
        assert "A100-80GB x1" in caught.value.fix

    def test_existing_nodes_never_carry_an_instance_type(self, tmp_path: Path) -> None:
        """Kaito's webhook with node auto-provisioning off refuses one, SKU or not
        (workspace_validation.go validateCreate, v0.12.0)."""
        hardware = {"gpu": "A100-80GB", "tensor_parallel_size": 2}
        plan = valid_plan(write_profile(tmp_path, engine=KAITO_ENGINE, hardware=hardware))
        emitter = emitter_for("kaito", {"nodes": "existing"})
        workspace = next(m for m in emitter.emit(plan) if m.kind == "Workspace")
        assert "instanceType" not in workspace.body["resource"]
        selector = workspace.body["resource"]["labelSelector"]["matchLabels"]
        assert selector == plan.manifests.variants[0].pod.node_selector

    def test_kv_offload_is_off_for_every_twin(self, tmp_path: Path) -> None:
        """Kaito's runtime turns LMCache CPU KV offload on unless the config's
        kv_cache_cpu_memory_utilization is 0 (inference_api.py); LMCache#3388: it breaks
        EAGLE-3 output, and the plan models none."""
        plan = _kaito_plan("vllm-qwen3-4b-draft.yaml", tmp_path)
        emitter = emitter_for("kaito", {"nodes": "existing"})
        configs = [m for m in emitter.emit(plan) if m.kind == "ConfigMap"]
        assert len(configs) == 2  # the speculative twin and its baseline
        for config_map in configs:
            inference = yaml.safe_load(config_map.body["data"]["inference_config.yaml"])
            assert inference["kv_cache_cpu_memory_utilization"] == 0
            assert "kv-transfer-config" not in inference["vllm"]

    def test_another_vllm_release_is_refused(self) -> None:
        plan = valid_plan(REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml")  # 0.32.0
        with pytest.raises(IncompatibleError) as caught:
            emitter_for("kaito", {"nodes": "existing"}).files(plan)
        assert "engine.version=0.32.0: Kaito v0.12.0 runs vLLM 0.25.1" in str(caught.value)
        assert caught.value.field == "engine.version"
        assert "kserve-runtime" in caught.value.fix

    def test_annotations_name_kaitos_runtime(self, tmp_path: Path) -> None:
        plan = _kaito_plan("vllm-qwen3-4b-draft.yaml", tmp_path)
        for manifest in emitter_for("kaito", {"nodes": "existing"}).emit(plan):
            annotations = manifest.body["metadata"]["annotations"]
            assert annotations["specdeploy.io/engine-version"] == "0.25.1"
            assert annotations["specdeploy.io/image"].startswith("Kaito v0.12.0 vLLM preset")

    def test_instance_type_when_kaito_has_the_sku(self, tmp_path: Path) -> None:
        hardware = {"gpu": "A100-80GB", "tensor_parallel_size": 2}
        plan = valid_plan(write_profile(tmp_path, engine=KAITO_ENGINE, hardware=hardware))
        workspace = next(m for m in emitter_for("kaito").emit(plan) if m.kind == "Workspace")
        assert workspace.body["resource"]["instanceType"] == "Standard_NC48ads_A100_v4"
        assert workspace.body["resource"]["count"] == 1


def _kaito_plan(profile: str, directory: Path) -> Any:
    """An example profile planned for the vLLM release Kaito's preset image runs."""
    return valid_plan(at_release(REPO_ROOT / "profiles" / profile, directory, KAITO_VLLM_VERSION))


def _kaito_config(plan: Any) -> dict[str, str]:
    return dict(_kaito_inference(plan)["vllm"])


def _kaito_inference(plan: Any, nodes: str = "existing") -> dict[str, Any]:
    emitter = emitter_for("kaito", {"nodes": nodes})
    config_map = next(m for m in emitter.emit(plan) if m.kind == "ConfigMap")
    return dict(yaml.safe_load(config_map.body["data"]["inference_config.yaml"]))


def _refused(platform: str, plan: Any) -> bool:
    try:
        emitter_for(platform).files(plan)
    except IncompatibleError:
        return True
    return False


class TestRenderCommand:
    def test_render_platform_writes_the_platform_objects(self, tmp_path: Path) -> None:
        from click.testing import CliRunner

        from orchestrator.cli import cli

        out = tmp_path / "out"
        profile = REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml"
        done = CliRunner().invoke(
            cli, ["render", str(profile), "--out", str(out), "--offline", "--platform", "kserve"]
        )
        assert done.exit_code == 0, done.output
        assert (out / "k8s" / "llminferenceservice-qwen3-8b-ngram.yaml").exists()
        assert (out / "launch.json").exists()

    def test_a_platform_that_cannot_run_the_engine_writes_nothing(self, tmp_path: Path) -> None:
        from click.testing import CliRunner

        from orchestrator.cli import cli

        out = tmp_path / "out"
        profile = REPO_ROOT / "profiles" / "trtllm-llama31-8b-eagle3.yaml"
        args = ["render", str(profile), "--out", str(out), "--offline", "--platform", "kaito"]
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 4, done.output
        assert "fix:" in done.output and "Traceback" not in done.output
        assert not out.exists()

    def test_a_bad_platform_option_is_exit_2(self, tmp_path: Path) -> None:
        from click.testing import CliRunner

        from orchestrator.cli import cli

        profile = REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml"
        args = ["render", str(profile), "--out", str(tmp_path), "--offline"]
        args += ["--platform", "kserve", "--platform-option", "api=v1"]
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 2, done.output


class TestDynamoRelease:
    def test_the_default_runtime_image_does_not_claim_engine_version(self) -> None:
        plan = valid_plan(REPO_ROOT / "profiles" / "vllm-qwen3-4b-draft.yaml")
        for graph in emitter_for("dynamo").emit(plan):
            if graph.kind != "DynamoGraphDeployment":
                continue
            annotations = graph.body["metadata"]["annotations"]
            assert annotations["specdeploy.io/image"].startswith(
                "nvcr.io/nvidia/ai-dynamo/vllm-runtime:"
            )
            version = annotations["specdeploy.io/engine-version"]
            assert version.startswith("the release nvcr.io/") and "unverified" in version
            worker = graph.body["spec"]["components"][1]
            pod_annotations = worker["podTemplate"]["metadata"]["annotations"]
            assert pod_annotations["specdeploy.io/engine-version"] == version

    def test_a_pinned_image_keeps_engine_version(self, tmp_path: Path) -> None:
        engine = {"name": "vllm", "version": "0.32.0", "image": "registry.example/dynamo-vllm:1"}
        plan = valid_plan(write_profile(tmp_path, engine=engine))
        graph = next(
            m for m in emitter_for("dynamo").emit(plan) if m.kind == "DynamoGraphDeployment"
        )
        annotations = graph.body["metadata"]["annotations"]
        assert annotations["specdeploy.io/engine-version"] == "0.32.0"
        assert annotations["specdeploy.io/image"] == "registry.example/dynamo-vllm:1"


def test_dynamo_fetches_a_trtllm_head_the_release_cannot_fetch_before_the_worker_starts(
    tmp_path: Path,
) -> None:
    """TensorRT-LLM 1.1.0 reads an EAGLE-3 head only from a local directory: the plan fetches it
    in an init container into a volume the engine mounts; the Dynamo worker must carry both, or
    the engine starts with an empty head directory."""
    plan = valid_plan(
        at_release(REPO_ROOT / "profiles" / "trtllm-llama31-8b-eagle3.yaml", tmp_path, "1.1.0")
    )
    ctx = plan.manifests.variants[0]
    assert ctx.pod.init_containers, "1.1.0 no longer needs the download; pick another release"
    graph = next(m for m in emitter_for("dynamo").emit(plan) if m.kind == "DynamoGraphDeployment")
    worker = graph.body["spec"]["components"][1]["podTemplate"]["spec"]
    assert worker["initContainers"] == ctx.pod.init_containers
    (download,) = worker["initContainers"]
    (target,) = download["volumeMounts"]
    (main,) = worker["containers"]
    assert target in main["volumeMounts"]  # the worker reads what was fetched
    assert any(v["name"] == target["name"] for v in worker["volumes"])
