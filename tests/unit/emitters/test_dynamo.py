"""Dynamo: the worker of each example's DynamoGraphDeployment, split as Dynamo 1.4.0's worker
splits its argv, leaves the engine exactly our launch's settings, and the engine's own parser
takes them (vLLM 0.32.0's AsyncEngineArgs parser; SGLang 0.5.23's ServerArgs, resolved); the
worker's GPUs match the profile's parallelism and the frontend advertises the plan's served name.

How Dynamo 1.4.0 (the PyPI wheel ai-dynamo==1.4.0, the release of the default runtime images)
reads a worker's argv, reproduced here from its source, not imported:

* every worker builds an `argparse.ArgumentParser` of Dynamo's own flags (runtime group, plus the
  worker's backend group) and calls `parse_known_args`; the leftover tokens are the engine's
  (dynamo/vllm/args.py, dynamo/sglang/args.py, dynamo/trtllm/args.py, each `parse_args`). The
  flags are tests/fixtures/platforms/dynamo/worker-flags-1.4.0.json;
* vLLM: `allow_abbrev=False`; the leftover goes to `FlexibleArgumentParser(add_help=False)` with
  `AsyncEngineArgs.add_cli_args(..., async_args_only=False)`, so the model is `--model` (no
  positional) and server flags such as --host/--port are unknown; the served name is the first of
  `split_served_model_names(engine.served_model_name)`, else the model (args.py
  update_dynamo_config_with_engine; main.py, `config.served_model_name = ... = config.model`),
  and it is what `register_model` advertises to the Frontend;
* SGLang: argparse's default `allow_abbrev=True` (a prefix of a Dynamo flag is Dynamo's); the
  leftover goes to `ServerArgs.add_cli_args` and `ServerArgs.from_cli_args`; the served name is
  the first of `split_served_model_names(served_model_name)`, else `model_path`;
* TensorRT-LLM: Dynamo owns every flag (--model, --served-model-name, --tensor-parallel-size,
  --pipeline-parallel-size, --extra-engine-args); anything left that is not `--trtllm.*` stops the
  worker (trtllm/dynamic_flags.py parse_dynamic_flags), and `--extra-engine-args` names the
  LLM-API YAML merged over its own arguments (trtllm/workers/llm_worker.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from orchestrator.emitters.base import emitter_for
from orchestrator.emitters.dynamo import DYNAMO_VERSION
from orchestrator.plan.build import served_model_name
from orchestrator.plan.types import DeploymentPlan
from tests.conformance.conftest import repo_tiny_models, sglang_referee, stand_ins
from tests.conformance.referee import Referee, StandIns, flag_value
from tests.conformance.test_sglang_conformance import referee_argv, stand_in_models
from tests.conformance.trtllm_referee import Referee as TrtllmReferee
from tests.support import EXAMPLE_PROFILES, REPO_ROOT
from tests.unit.emitters.conftest import PLATFORM_FIXTURES, ParseVllm
from tests.unit.manifests.conftest import valid_plan

__all__ = ["repo_tiny_models", "sglang_referee", "stand_ins"]  # the referee fixtures, used here

FLAGS = PLATFORM_FIXTURES / "dynamo" / f"worker-flags-{DYNAMO_VERSION}.json"
VLLM_PROFILES = [p for p in EXAMPLE_PROFILES if p.stem.startswith("vllm-")]
SGLANG = REPO_ROOT / "profiles" / "sglang-qwen25-7b-standalone.yaml"
TRTLLM = REPO_ROOT / "profiles" / "trtllm-llama31-8b-eagle3.yaml"


@cache
def dynamo_parser(engine: str) -> argparse.ArgumentParser:
    """Dynamo's own parser of one worker, from the fixture: the same flags, kinds and
    allow_abbrev as the release builds (the engine's flags are not registered on it)."""
    table = json.loads(FLAGS.read_text())
    parser = argparse.ArgumentParser(allow_abbrev=table["allow_abbrev"][engine])
    for flag, kind in {**table["runtime"], **table[engine]}.items():
        if kind == "switch":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction)
        elif kind == "flag":
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, nargs="*" if kind == "list" else None)
    return parser


def dynamo_split(engine: str, args: list[str]) -> tuple[dict[str, Any], list[str]]:
    """What Dynamo's worker keeps (only the flags given) and the tokens it hands the engine."""
    parser = dynamo_parser(engine)
    ours, rest = parser.parse_known_args(args)
    defaults = vars(parser.parse_args([]))
    return {k: v for k, v in vars(ours).items() if v != defaults[k]}, rest


def advertised(served: object, model: str) -> list[str]:
    """The served names Dynamo registers: `split_served_model_names` (whitespace or comma
    separated; the first is the name, the rest aliases), else the model."""
    tokens = served if isinstance(served, list) else [] if served is None else [served]
    names = [n for token in tokens for n in re.split(r"[\s,]+", str(token).strip()) if n]
    return names or [model]


def workers(plan: DeploymentPlan, engine: str) -> list[tuple[DeploymentPlan, dict[str, Any]]]:
    """Each graph's worker component, after checking it runs Dynamo's worker for the engine."""
    out = []
    for graph in emitter_for("dynamo").emit(plan):
        if graph.kind != "DynamoGraphDeployment":
            continue
        worker = next(c for c in graph.body["spec"]["components"] if c["type"] == "worker")
        (main,) = worker["podTemplate"]["spec"]["containers"]
        assert main["command"] == ["python3", "-m", f"dynamo.{engine}"]
        out.append((plan, worker))
    return out


def assert_gpus(plan: DeploymentPlan, worker: dict[str, Any]) -> None:
    """Every node of the worker holds its share of the TP x PP GPUs the launch spans."""
    hardware = plan.profile.hardware
    (main,) = worker["podTemplate"]["spec"]["containers"]
    nodes = worker.get("multinode", {}).get("nodeCount", 1)
    gpus = int(main["resources"]["limits"]["nvidia.com/gpu"])
    assert gpus * nodes == hardware.tensor_parallel_size * hardware.pipeline_parallel_size


def without_split(profile: Path, directory: Path) -> Path:
    """An example Dynamo refuses only for its weighted split, with the split removed (its
    baseline twin stays, as its own graph)."""
    document = yaml.safe_load(profile.read_text(encoding="utf-8"))
    document["deploy"].pop("baseline_traffic_percent", None)
    document["deploy"].pop("gateway", None)
    path = directory / profile.name
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def vllm_plans(tmp_path: Path) -> list[DeploymentPlan]:
    plans = []
    for profile in VLLM_PROFILES:
        plan = valid_plan(profile)
        if plan.profile.deploy.baseline_traffic_percent is not None:
            plan = valid_plan(without_split(profile, tmp_path))
        plans.append(plan)
    return plans


def test_vllm_workers_split_as_dynamo_and_vllm_takes_the_engine_part(
    tmp_path: Path, parse_vllm_engine_args: ParseVllm
) -> None:
    cases = [(plan, w) for plan in vllm_plans(tmp_path) for _, w in workers(plan, "vllm")]
    assert len(cases) >= len(VLLM_PROFILES) + 1  # every example, and a baseline twin
    splits = [
        dynamo_split("vllm", w["podTemplate"]["spec"]["containers"][0]["args"]) for _, w in cases
    ]
    # The referee is vLLM's engine-only parser: the `vllm serve` spellings (a positional model,
    # the server's --host/--port) are refused, so an emitter passing the launch through fails.
    serve = list(cases[0][0].manifests.variants[0].pod.command)[2:]
    *parsed, refused = parse_vllm_engine_args([*(rest for _, rest in splits), serve])
    assert "unrecognized arguments" in str(refused.get("error")), refused
    for (plan, worker), (kept, rest), engine in zip(cases, splits, parsed, strict=True):
        name = plan.profile.metadata.name
        args = worker["podTemplate"]["spec"]["containers"][0]["args"]
        assert kept == {}, (name, kept)  # no token of ours is one of Dynamo's flags
        assert rest == args
        assert "error" not in engine, (name, engine, rest)
        hardware = plan.profile.hardware
        assert engine["model"] == plan.profile.target.model
        assert engine["tensor_parallel_size"] == hardware.tensor_parallel_size
        assert engine["pipeline_parallel_size"] == hardware.pipeline_parallel_size
        served = served_model_name(plan.profile, plan.target_location)
        assert advertised(engine["served_model_name"], str(engine["model"])) == [served]
        spec = (
            args[args.index("--speculative-config") + 1] if "--speculative-config" in args else None
        )
        assert engine["speculative_config"] == (json.loads(spec) if spec else None)
        assert_gpus(plan, worker)
    speculative = [e["speculative_config"] for e in parsed if e["speculative_config"]]
    methods = {str(s["method"]) for s in speculative}  # type: ignore[index]
    assert {"mtp", "draft_model", "ngram", "eagle3"} <= methods


def test_vllm_worker_args_are_the_launch_less_the_frontends_flags(tmp_path: Path) -> None:
    """The engine part is the plan's `vllm serve` launch, with the model as --model and no
    --host/--port: what the launch says, not a second derivation of it."""
    for plan in vllm_plans(tmp_path):
        for (_, worker), variant in zip(
            workers(plan, "vllm"), plan.manifests.variants, strict=True
        ):
            argv = list(variant.pod.command)
            assert argv[:2] == ["vllm", "serve"]
            model, flags = argv[2], argv[3:]
            host, port = flags.index("--host"), flags.index("--port")
            expected = [
                "--model",
                model,
                *[t for i, t in enumerate(flags) if i not in {host, host + 1, port, port + 1}],
            ]
            assert worker["podTemplate"]["spec"]["containers"][0]["args"] == expected


@pytest.mark.referee
def test_sglang_worker_splits_as_dynamo_and_sglang_resolves_the_engine_part(
    sglang_referee: Referee, stand_ins: StandIns
) -> None:
    plan = valid_plan(SGLANG)
    ((_, worker),) = workers(plan, "sglang")
    args = worker["podTemplate"]["spec"]["containers"][0]["args"]
    kept, rest = dynamo_split("sglang", args)
    assert kept == {}  # no token of ours is (a prefix of) one of Dynamo's flags
    assert rest == args
    launch = list(plan.manifests.variants[0].pod.command)
    assert launch[:3] == ["python3", "-m", "sglang.launch_server"]
    host, port = launch.index("--host"), launch.index("--port")
    assert rest == [
        t for i, t in enumerate(launch[3:], 3) if i not in {host, host + 1, port, port + 1}
    ]
    models = stand_in_models(plan, stand_ins)
    tokens = referee_argv(plan, stand_ins, ["python3", "-m", "sglang.launch_server", *rest])
    verdict = sglang_referee.ask({"argv": tokens, "resolve": True})
    assert verdict["ok"], f"SGLang refused at {verdict['stage']}: {verdict['error']}\n{tokens}"
    resolved = verdict["resolved"]
    assert resolved["speculative_algorithm"] == "STANDALONE"
    assert resolved["speculative_num_steps"] == plan.profile.proposer.num_speculative_tokens
    assert resolved["speculative_draft_model_path"] == models[str(plan.profile.proposer.model)]
    assert resolved["speculative_num_draft_tokens"] == int(
        flag_value(rest, "--speculative-num-draft-tokens")
    )
    assert resolved["tp_size"] == plan.profile.hardware.tensor_parallel_size
    served = flag_value(rest, "--served-model-name")
    assert advertised(served, flag_value(rest, "--model-path")) == [
        served_model_name(plan.profile, plan.target_location)
    ]
    assert_gpus(plan, worker)


def test_trtllm_worker_flags_are_all_dynamos_and_its_yaml_is_the_release_s(
    tmp_path: Path,
) -> None:
    plan = valid_plan(TRTLLM)
    ((_, worker),) = workers(plan, "trtllm")
    pod = worker["podTemplate"]["spec"]
    (main,) = pod["containers"]
    kept, rest = dynamo_split("trtllm", main["args"])
    assert rest == []  # parse_dynamic_flags stops the worker on any other token
    hardware = plan.profile.hardware
    assert kept["model"] == plan.profile.target.model
    assert kept["served_model_name"] == served_model_name(plan.profile, plan.target_location)
    assert advertised(kept["served_model_name"], kept["model"]) == [kept["served_model_name"]]
    assert int(kept["tensor_parallel_size"]) == hardware.tensor_parallel_size
    assert int(kept["pipeline_parallel_size"]) == hardware.pipeline_parallel_size
    assert_gpus(plan, worker)
    launch = plan.launch_for(container=True)
    config = PurePosixPath(kept["extra_engine_args"])
    (mount,) = [m for m in main["volumeMounts"] if m["mountPath"] == str(config.parent)]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    maps = {m.name: m.body for m in emitter_for("dynamo").emit(plan) if m.kind == "ConfigMap"}
    mounted = dict(maps[volume["configMap"]["name"]]["data"])
    assert mounted == dict(launch.config_files)
    verdict = TrtllmReferee(plan.profile.engine.version).judge(
        dataclasses.replace(launch, config_files=mounted)
    )
    assert verdict.ok, "\n".join(verdict.problems)
    assert verdict.effective("speculative_config.max_draft_len") == 4
