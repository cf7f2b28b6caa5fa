"""llm-d: the overlay `render --platform llm-d` writes, built by a real `kubectl kustomize`, is
exactly what `apply --platform llm-d` applies; the same overlay over llm-d's own published
multi-host recipe base (tests/fixtures/platforms/llm-d/) still runs exactly our launch, GPUs and
placement, with nothing of the base's placeholders left; and the SGLang and TensorRT-LLM examples
build, in the shape of llm-d's model-server patches, to a container the engine accepts (SGLang
0.5.23's own parser; the TensorRT-LLM release's option models, with the mounted ConfigMap)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from orchestrator.deploy.dry_run_files import write_files
from orchestrator.emitters.base import emitter_for
from orchestrator.emitters.llmd import IMAGE_PLACEHOLDER, PROGRAMS
from orchestrator.plan.types import DeploymentPlan
from tests.conformance.conftest import repo_tiny_models, sglang_referee, stand_ins
from tests.conformance.referee import Referee, StandIns, flag_value, swap_sglang_models
from tests.conformance.trtllm_referee import Referee as TrtllmReferee
from tests.support import REPO_ROOT, write_profile
from tests.unit.emitters.conftest import PLATFORM_FIXTURES, at_release, tool
from tests.unit.manifests.conftest import valid_plan, validate_object

__all__ = ["repo_tiny_models", "sglang_referee", "stand_ins"]  # the referee fixtures, used here

SPLIT = {"baseline": True, "baseline_traffic_percent": 20, "gateway": "infra/inference"}
MULTI_NODE = {"tensor_parallel_size": 4, "pipeline_parallel_size": 4, "gpus_per_node": 4}
#: llm-d's multi-host recipe base (guides/recipes/modelserver/base/multi-host/default).
UPSTREAM_BASE = PLATFORM_FIXTURES / "llm-d" / "multi-host-default"
SGLANG = REPO_ROOT / "profiles" / "sglang-qwen25-7b-standalone.yaml"
TRTLLM = REPO_ROOT / "profiles" / "trtllm-llama31-8b-eagle3.yaml"


def kustomize(directory: Path) -> list[dict[str, Any]]:
    built = subprocess.run(
        [tool("kubectl"), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert built.returncode == 0, built.stderr
    return [doc for doc in yaml.safe_load_all(built.stdout) if doc]


def _sorted(objects: Any) -> list[dict[str, Any]]:
    return sorted(objects, key=lambda o: (o["kind"], o["metadata"]["name"]))


def test_overlay_builds_to_what_apply_applies(tmp_path: Path) -> None:
    for name, deploy, hardware in (("single", SPLIT, {}), ("multi", {}, MULTI_NODE)):
        plan = valid_plan(write_profile(tmp_path, f"{name}.yaml", deploy=deploy, hardware=hardware))
        out = tmp_path / name
        write_files(emitter_for("llm-d").files(plan), out)
        applied = [m.body for m in emitter_for("llm-d").emit(plan)]
        assert _sorted(kustomize(out / "llm-d")) == _sorted(applied)


def test_overlay_over_llmds_own_recipe_base(tmp_path: Path) -> None:
    plan = valid_plan(write_profile(tmp_path, hardware=MULTI_NODE, deploy={"baseline": True}))
    out = tmp_path / "out"
    write_files(emitter_for("llm-d").files(plan), out)
    for variant in ("speculative", "baseline"):  # swap our base for llm-d's published one
        base = out / "llm-d" / variant / "base"
        shutil.rmtree(base)
        shutil.copytree(UPSTREAM_BASE, base)
        kustomization = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["decode-deployment.yaml"],
        }
        (base / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    built = {o["metadata"]["name"]: o for o in kustomize(out / "llm-d")}
    applied = {m.name: m.body for m in emitter_for("llm-d").emit(plan)}
    assert IMAGE_PLACEHOLDER not in yaml.safe_dump(list(built.values()))
    for name in ("test-decode", "test-baseline-decode"):
        ours, theirs = applied[name]["spec"], built[name]["spec"]
        assert theirs["replicas"] == ours["replicas"]
        group, our_group = theirs["leaderWorkerTemplate"], ours["leaderWorkerTemplate"]
        assert group["size"] == our_group["size"] == 4  # not the base's 2
        for role in ("leaderTemplate", "workerTemplate"):
            (container,) = group[role]["spec"]["containers"]
            (our_container,) = our_group[role]["spec"]["containers"]
            for key in ("image", "command", "env", "resources", "volumeMounts"):
                assert container.get(key) == our_container.get(key), (name, role, key)
            assert container.get("args", []) == []  # the base's empty args stay empty
            pod, our_pod = group[role]["spec"], our_group[role]["spec"]
            for key in ("nodeSelector", "tolerations", "volumes"):
                assert pod.get(key) == our_pod.get(key), (name, role, key)
        leader = group["leaderTemplate"]["spec"]["containers"][0]
        our_leader = our_group["leaderTemplate"]["spec"]["containers"][0]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert leader[probe] == our_leader[probe], probe  # ours replace the base's paths
        validate_object(built[name])


def built_engine(plan: DeploymentPlan, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The speculative twin's Deployment and ConfigMaps as `kubectl kustomize` builds the
    rendered llm-d/ tree (after checking it is what apply applies), and its modelserver."""
    write_files(emitter_for("llm-d").files(plan), out)
    built = kustomize(out / "llm-d")
    assert _sorted(built) == _sorted(m.body for m in emitter_for("llm-d").emit(plan))
    name = f"{plan.profile.metadata.name}-decode"
    (deployment,) = [
        o for o in built if o["kind"] == "Deployment" and o["metadata"]["name"] == name
    ]
    (server,) = deployment["spec"]["template"]["spec"]["containers"]
    assert server["name"] == "modelserver"  # the recipe's container, patched, not a second one
    configs = {o["metadata"]["name"]: o for o in built if o["kind"] == "ConfigMap"}
    return deployment, {"server": server, "configs": configs}


@pytest.mark.referee
def test_sglang_runs_in_llmds_shape_and_sglang_accepts_it(
    tmp_path: Path, sglang_referee: Referee, stand_ins: StandIns
) -> None:
    plan = valid_plan(SGLANG)
    deployment, parts = built_engine(plan, tmp_path)
    server = parts["server"]
    program = ["python3", "-m", "sglang.launch_server"]  # llm-d's patch-sglang.yaml `command`
    assert server["command"] == program
    argv = [*server["command"], *server["args"]]
    assert argv == plan.manifests.variants[0].pod.command  # the plan's launch, whole
    assert server["ports"] == [{"name": "modelserver", "containerPort": 8000, "protocol": "TCP"}]
    assert server["image"] == plan.launch_for(container=True).image  # pinned to the release
    validate_object(deployment)
    models = {
        str(plan.profile.target.model): str(
            stand_ins.path_for(plan.profile.target.model, plan.target)
        ),
        str(plan.profile.proposer.model): str(
            stand_ins.path_for(plan.profile.proposer.model, plan.draft)
        ),
    }
    tokens = [*swap_sglang_models(argv, models), "--device", "cpu"]
    verdict = sglang_referee.ask({"argv": tokens, "resolve": True})
    assert verdict["ok"], f"SGLang refused at {verdict['stage']}: {verdict['error']}\n{tokens}"
    resolved = verdict["resolved"]
    assert resolved["speculative_algorithm"] == "STANDALONE"
    assert resolved["speculative_num_steps"] == plan.profile.proposer.num_speculative_tokens
    assert resolved["speculative_num_draft_tokens"] == int(
        flag_value(argv, "--speculative-num-draft-tokens")
    )
    assert int(flag_value(argv, "--port")) == server["ports"][0]["containerPort"]
    assert flag_value(argv, "--host") == "0.0.0.0"  # reachable by the pool, not loopback


def test_trtllm_runs_in_llmds_shape_and_its_release_accepts_it(tmp_path: Path) -> None:
    plan = valid_plan(TRTLLM)
    deployment, parts = built_engine(plan, tmp_path)
    server, pod = parts["server"], deployment["spec"]["template"]["spec"]
    assert server["command"] == ["trtllm-serve"]  # llm-d: `trtllm-serve serve`, the default command
    argv = [*server["command"], *server["args"]]
    assert argv == plan.manifests.variants[0].pod.command
    validate_object(deployment)
    launch = plan.launch_for(container=True)
    judged = dataclasses.replace(launch, argv=tuple(argv), config_files=mounted(server, pod, parts))
    verdict = TrtllmReferee(plan.profile.engine.version).judge(judged)
    assert verdict.ok, "\n".join(verdict.problems)
    assert verdict.model == plan.profile.target.model
    assert verdict.effective("speculative_config.max_draft_len") == 4
    assert (
        verdict.effective("speculative_config.speculative_model_dir") == plan.profile.proposer.model
    )


def mounted(server: dict[str, Any], pod: dict[str, Any], parts: dict[str, Any]) -> dict[str, str]:
    """The files the pod really sees at the config flag's directory: the built ConfigMap's data,
    through the volume mounted there."""
    flag = next(t for t in server["args"] if t in ("--config", "--extra_llm_api_options"))
    directory = str(PurePosixPath(server["args"][server["args"].index(flag) + 1]).parent)
    (mount,) = [m for m in server["volumeMounts"] if m["mountPath"] == directory]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return dict(parts["configs"][volume["configMap"]["name"]]["data"])


def test_a_trtllm_head_the_release_cannot_fetch_is_downloaded_first(tmp_path: Path) -> None:
    """TensorRT-LLM 1.1.0 reads the EAGLE-3 head only from a local directory: the plan fetches
    it in an init container, which the llm-d patch must carry or the engine finds nothing."""
    plan = valid_plan(at_release(TRTLLM, tmp_path, "1.1.0"))
    deployment, parts = built_engine(plan, tmp_path / "out")
    pod = deployment["spec"]["template"]["spec"]
    ctx = plan.manifests.variants[0]
    assert ctx.pod.init_containers, "1.1.0 no longer needs the download; pick another release"
    assert pod["initContainers"] == ctx.pod.init_containers
    (download,) = pod["initContainers"]
    target = download["volumeMounts"][0]
    assert target in parts["server"]["volumeMounts"]  # the engine reads what was fetched
    assert (
        target["mountPath"]
        in parts["configs"][f"{ctx.metadata['name']}-config"]["data"]["extra-llm-api-config.yaml"]
    )


def test_every_engine_launch_starts_with_the_program_llmd_puts_in_command(tmp_path: Path) -> None:
    for profile in (SGLANG, TRTLLM, REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml"):
        plan = valid_plan(profile)
        program = list(PROGRAMS[plan.profile.engine.name])
        assert list(plan.manifests.variants[0].pod.command)[: len(program)] == program
