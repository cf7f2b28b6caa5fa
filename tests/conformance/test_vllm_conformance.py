"""vLLM 0.32.0 parses every rendered vLLM example profile and builds its engine config.

The rendered argv goes through make_arg_parser, validate_parsed_serve_args and
AsyncEngineArgs.from_cli_args(...).create_engine_config() - what `vllm serve` runs before it
starts an engine - and the resolved config must say what the profile asked for. A misspelt
flag or speculative-config key must make the referee refuse (so these tests can fail).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.loading import load_profile
from tests.conformance.referee import Referee, StandIns, flag_value, swap_vllm_models
from tests.support import EXAMPLE_PROFILES, LOCAL_PROFILES

pytestmark = pytest.mark.referee

VLLM_PROFILES = [
    p for p in (*EXAMPLE_PROFILES, *LOCAL_PROFILES) if load_profile(p).engine.name == "vllm"
]
#: specdeploy method -> SpeculativeConfig.method after vLLM resolves it. vLLM rewrites the
#: generic "mtp" to the family's own method (vllm/config/speculative.py, 0.32.0).
RESOLVED_METHODS = {"mtp": {"mtp", "mimo_mtp", "deepseek_mtp", "qwen3_next_mtp", "glm4_moe_mtp"}}


def referee_argv(plan: DeploymentPlan, stand_ins: StandIns) -> list[str]:
    """The rendered local argv with hub models swapped for stand-ins (local ones kept)."""
    assert plan.launch is not None, [f.what for f in plan.errors]
    assert plan.profile is not None
    models = {}
    target_ref = plan.profile.target.model
    remote = plan.profile.target.trust_remote_code
    if plan.target_location is not None and plan.target_location.local_dir is None:
        models[target_ref] = str(stand_ins.path_for(target_ref, plan.target, remote_code=remote))
    draft_ref = plan.profile.proposer.model
    if draft_ref and plan.draft_location is not None and plan.draft_location.local_dir is None:
        models[draft_ref] = str(stand_ins.path_for(draft_ref, plan.draft))
    return swap_vllm_models(list(plan.launch.argv), models)


@pytest.mark.parametrize("profile_path", VLLM_PROFILES, ids=lambda p: p.stem)
def test_vllm_builds_an_engine_config_from_the_rendered_flags(
    profile_path: Path, vllm_referee: Referee, stand_ins: StandIns
) -> None:
    plan = load_and_plan(profile_path, offline=True)
    argv = referee_argv(plan, stand_ins)
    verdict = vllm_referee.ask({"argv": argv})
    assert verdict["ok"], f"vLLM refused at {verdict['stage']}: {verdict['error']}\nargv: {argv}"
    resolved = verdict["resolved"]
    profile = plan.profile
    assert profile is not None
    assert resolved["max_model_len"] == profile.serving.max_model_len
    assert resolved["tensor_parallel_size"] == profile.hardware.tensor_parallel_size
    assert resolved["pipeline_parallel_size"] == profile.hardware.pipeline_parallel_size
    assert resolved["max_num_seqs"] == int(flag_value(argv, "--max-num-seqs"))
    assert resolved["gpu_memory_utilization"] == float(flag_value(argv, "--gpu-memory-utilization"))
    assert resolved["enforce_eager"] == bool(profile.vllm and profile.vllm.enforce_eager)
    spec = resolved["speculative"]
    if not profile.speculative:
        assert spec is None
        return
    method = profile.proposer.method
    assert spec["method"] in RESOLVED_METHODS.get(method, {method})
    assert spec["num_speculative_tokens"] == profile.proposer.num_speculative_tokens
    if profile.proposer.ngram is not None:
        assert spec["prompt_lookup_min"] == profile.proposer.ngram.min_window
        assert spec["prompt_lookup_max"] == profile.proposer.ngram.max_window
    if profile.proposer.model is not None:
        rendered = json.loads(flag_value(argv, "--speculative-config"))
        assert spec["model"] == rendered["model"]


def _tiny_draft_argv(stand_ins: StandIns) -> list[str]:
    plan = load_and_plan(
        Path(__file__).parents[2] / "profiles" / "local" / "tiny-draft.yaml", offline=True
    )
    return referee_argv(plan, stand_ins)


def test_a_misspelt_speculative_flag_is_refused(vllm_referee: Referee, stand_ins: StandIns) -> None:
    argv = _tiny_draft_argv(stand_ins)
    assert vllm_referee.ask({"argv": argv})["ok"]
    broken = ["--speculative-confg" if t == "--speculative-config" else t for t in argv]
    verdict = vllm_referee.ask({"argv": broken})
    assert not verdict["ok"]
    assert verdict["stage"] == "parse"
    assert "unrecognized arguments: --speculative-confg" in verdict["error"]


def test_every_rendered_flag_name_is_checked(vllm_referee: Referee, stand_ins: StandIns) -> None:
    """Misspell each flag in turn: vLLM must refuse every one (none is silently ignored)."""
    argv = _tiny_draft_argv(stand_ins)
    flags = [t for t in argv if t.startswith("--")]
    assert len(flags) >= 10
    accepted = []
    for flag in flags:
        broken = [f"{t}-typo" if t == flag else t for t in argv]
        verdict = vllm_referee.ask({"argv": broken})
        if verdict["ok"]:
            accepted.append(flag)
        else:
            assert f"unrecognized arguments: {flag}-typo" in verdict["error"]
    assert accepted == [], f"vLLM accepted misspelt flags: {accepted}"


def test_a_misspelt_speculative_config_key_is_refused(
    vllm_referee: Referee, stand_ins: StandIns
) -> None:
    argv = _tiny_draft_argv(stand_ins)
    index = argv.index("--speculative-config") + 1
    spec = json.loads(argv[index])
    spec["num_speculative_token"] = spec.pop("num_speculative_tokens")
    argv[index] = json.dumps(spec)
    verdict = vllm_referee.ask({"argv": argv})
    assert not verdict["ok"]
    assert "num_speculative_token" in verdict["error"]
