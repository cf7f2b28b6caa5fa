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
from orchestrator.emitters.llmd import (
    IMAGE_PLACEHOLDER,
    PROGRAMS,
    ROUTER_CHART,
    ROUTER_CHART_VERSION,
)
from orchestrator.errors import IncompatibleError
from orchestrator.plan.types import DeploymentPlan
from tests.conformance.conftest import repo_tiny_models, sglang_referee, stand_ins
from tests.conformance.referee import Referee, StandIns, flag_value
from tests.conformance.test_sglang_conformance import referee_argv
from tests.conformance.trtllm_referee import Referee as TrtllmReferee
from tests.support import REPO_ROOT, write_profile
from tests.unit.emitters.conftest import PLATFORM_FIXTURES, at_release, tool
from tests.unit.emitters.llmd_router_chart import chart_pool, chart_pools, chart_refusals
from tests.unit.emitters.referees import crd_errors
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
    tokens = referee_argv(plan, stand_ins, argv)
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


def _pod_templates(built: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, str]]]:
    """(workload, role, pod labels) of every pod template the built tree runs."""
    templates = []
    for obj in built:
        name, spec = obj["metadata"]["name"], obj["spec"]
        if obj["kind"] == "Deployment":
            templates.append((name, "server", spec["template"]["metadata"]["labels"]))
        elif obj["kind"] == "LeaderWorkerSet":
            group = spec["leaderWorkerTemplate"]
            templates.append((name, "server", group["leaderTemplate"]["metadata"]["labels"]))
            templates.append((name, "worker", group["workerTemplate"]["metadata"]["labels"]))
    return templates


@pytest.mark.parametrize(("deploy", "hardware"), [(SPLIT, {}), ({"baseline": True}, MULTI_NODE)])
def test_each_router_release_selects_exactly_its_twins_serving_pods(
    tmp_path: Path, deploy: dict[str, Any], hardware: dict[str, Any]
) -> None:
    """The pool llm-d's router chart makes from each values file selects the serving pods of its
    twin (a LeaderWorkerSet's leaders, not its workers) and no other pod the tree builds, on
    the port the engine listens on, under the name the HTTPRoute sends traffic to."""
    plan = valid_plan(write_profile(tmp_path, deploy=deploy, hardware=hardware))
    files = emitter_for("llm-d").files(plan)
    write_files(files, tmp_path / "out")
    built = kustomize(tmp_path / "out" / "llm-d")
    pools = chart_pools(files, namespace="llm")
    assert sorted(pools) == ["test", "test-baseline"]
    templates = _pod_templates(built)
    for release, pool in pools.items():
        selector = pool["spec"]["selector"]["matchLabels"]
        selected = [
            (w, role) for w, role, labels in templates if selector.items() <= labels.items()
        ]
        assert selected == [(f"{release}-decode", "server")], (release, selected)
        (workload,) = [o for o in built if o["metadata"]["name"] == f"{release}-decode"]
        pod = (
            workload["spec"].get("template")
            or workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        )
        (server,) = [c for c in pod["spec"]["containers"] if c.get("ports")]
        ports = [{"number": p["containerPort"]} for p in server["ports"]]
        assert pool["spec"]["targetPorts"] == ports == [{"number": 8000}]
        assert pool["spec"]["endpointPickerRef"]["name"] == f"{release}-epp"
        assert crd_errors(pool) == [], release  # the GIE CRD takes the chart's pool
    if deploy.get("baseline_traffic_percent"):
        (route,) = [o for o in built if o["kind"] == "HTTPRoute"]
        refs = route["spec"]["rules"][0]["backendRefs"]
        assert [(r["kind"], r["name"]) for r in refs] == [("InferencePool", n) for n in pools]
    assert not [o for o in built if o["kind"] == "InferencePool"]  # the chart's, not ours


def test_a_seeded_empty_selector_is_refused_by_the_chart_and_the_crd(tmp_path: Path) -> None:
    plan = valid_plan(write_profile(tmp_path))
    files = emitter_for("llm-d").files(plan)
    (path,) = [p for p in files if p.startswith("llm-d/router-")]
    values = yaml.safe_load(files[path])
    pool = chart_pool(values, release="test", namespace="llm")
    pool["spec"]["selector"]["matchLabels"] = {}
    assert any(".spec.selector.matchLabels" in e for e in crd_errors(pool))
    del values["router"]["modelServers"]["matchLabels"]
    assert chart_refusals(values) == [".Values.router.modelServers.matchLabels is required"]


def test_the_router_reads_each_engines_load_as_llmd_configures_it(tmp_path: Path) -> None:
    for profile, kind, path in (
        (SGLANG, "sglang", None),
        (TRTLLM, "trtllm-serve", "/prometheus/metrics"),
        (REPO_ROOT / "profiles" / "vllm-qwen3-8b-ngram.yaml", "vllm", None),
    ):
        files = emitter_for("llm-d").files(valid_plan(profile))
        for name, text in files.items():
            if name.startswith("llm-d/router-"):
                router = yaml.safe_load(text)["router"]
                assert router["modelServers"]["type"] == kind
                assert router.get("epp", {}).get("metricsDataSource", {}).get("path") == path


def test_a_twin_name_helm_cannot_install_is_refused(tmp_path: Path) -> None:
    name = "m" * 46  # valid metadata.name; its baseline twin is 55 characters
    profile = write_profile(tmp_path, deploy={"baseline": True})
    document = yaml.safe_load(profile.read_text())
    document["metadata"]["name"] = name
    profile.write_text(yaml.safe_dump(document))
    with pytest.raises(IncompatibleError, match="55 characters") as caught:
        emitter_for("llm-d").files(valid_plan(profile))
    assert caught.value.field == "metadata.name"
    assert "at most 44 characters" in caught.value.fix


def test_render_and_apply_say_what_to_helm_install(tmp_path: Path) -> None:
    plan = valid_plan(write_profile(tmp_path, deploy=SPLIT))
    installs = emitter_for("llm-d").chart_installs(plan, values_dir="out/")
    assert installs is not None
    assert list(installs.commands) == [
        f"helm install {twin} {ROUTER_CHART} --version {ROUTER_CHART_VERSION} "
        f"-f out/llm-d/router-{twin}.values.yaml"
        for twin in ("test", "test-baseline")
    ]
    scoped = emitter_for("llm-d").chart_installs(plan, values_dir="out", namespace="team")
    assert scoped is not None and " --version v0.10.0 -n team -f out/" in scoped.commands[0]
    files = emitter_for("llm-d").files(plan)
    assert all(c.split(" -f ")[1].removeprefix("out/") in files for c in installs.commands)
