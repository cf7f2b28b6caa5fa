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
import yaml

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


SCHEDULE_PROFILE = Path(__file__).parents[2] / "profiles" / "local" / "tiny-draft-schedule.yaml"


def _scheduled_profile(tmp_path: Path, schedule: list[list[int]], concurrency: int) -> Path:
    """tiny-draft-schedule.yaml with another schedule and max_concurrency (models made absolute,
    so the copy may live anywhere)."""
    data = yaml.safe_load(SCHEDULE_PROFILE.read_text())
    for section in ("target", "proposer"):
        data[section]["model"] = str((SCHEDULE_PROFILE.parent / data[section]["model"]).resolve())
    data["proposer"]["num_speculative_tokens_per_batch_size"] = schedule
    data["serving"]["max_concurrency"] = concurrency
    path = tmp_path / "scheduled.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class TestDraftLengthSchedule:
    """vLLM 0.32.0 takes the rendered num_speculative_tokens_per_batch_size, its scheduler runs the
    draft length specdeploy plans at every batch size, and a schedule our rule refuses is refused
    by vLLM itself with the condition the rule quotes."""

    def test_vllm_runs_the_draft_lengths_specdeploy_plans(
        self, tmp_path: Path, vllm_referee: Referee, stand_ins: StandIns
    ) -> None:
        # A gap (5-7 keeps 4), a k above num_speculative_tokens (clamped to 4, and carried
        # through 17-32), speculation off from 33 and a tail past the last range (49-64).
        schedule = [[1, 4, 4], [8, 16, 6], [33, 48, 0]]
        plan = load_and_plan(_scheduled_profile(tmp_path, schedule, 64), offline=True)
        assert [f.rule for f in plan.findings if "schedule" in f.rule] == [
            "engine.spec-schedule-clamped"
        ]
        argv = referee_argv(plan, stand_ins)
        verdict = vllm_referee.ask({"argv": argv})
        assert verdict["ok"], f"vLLM refused at {verdict['stage']}: {verdict['error']}"
        resolved = verdict["resolved"]
        assert resolved["speculative"]["num_speculative_tokens_per_batch_size"] == schedule
        proposer = plan.profile.proposer if plan.profile is not None else None
        assert proposer is not None
        planned = [proposer.tokens_at(batch) for batch in range(1, resolved["max_num_seqs"] + 1)]
        assert resolved["dynamic_sd"][1:] == planned
        assert planned[4:7] == [4, 4, 4] and planned[8] == 4 and planned[32:] == [0] * 32

    def test_the_example_profile_s_schedule_reaches_the_scheduler(
        self, vllm_referee: Referee, stand_ins: StandIns
    ) -> None:
        plan = load_and_plan(SCHEDULE_PROFILE, offline=True)
        verdict = vllm_referee.ask({"argv": referee_argv(plan, stand_ins)})
        assert verdict["ok"], verdict
        assert verdict["resolved"]["dynamic_sd"] == [0, 4, 4, 2, 0]

    @pytest.mark.parametrize(
        "schedule",
        [
            [[0, 4, 3], [5, 8, 2]],
            [[1, 4, 3], [9, 5, 2]],
            [[1, 4, 3], [4, 8, 2]],
            [[2, 8, 3]],
        ],
        ids=["not-positive", "start-above-end", "overlap", "not-from-one"],
    )
    def test_an_invalid_schedule_is_refused_by_vllm_as_the_rule_says(
        self,
        tmp_path: Path,
        schedule: list[list[int]],
        vllm_referee: Referee,
        stand_ins: StandIns,
    ) -> None:
        refused = load_and_plan(_scheduled_profile(tmp_path, schedule, 16), offline=True)
        findings = [f for f in refused.errors if f.rule == "engine.spec-schedule-valid"]
        # vLLM's create_engine_config accepts it; its scheduler does not. Render a valid schedule,
        # then put the invalid one into the rendered --speculative-config.
        valid = load_and_plan(_scheduled_profile(tmp_path, [[1, 16, 3]], 16), offline=True)
        argv = referee_argv(valid, stand_ins)
        index = argv.index("--speculative-config") + 1
        spec = json.loads(argv[index])
        spec["num_speculative_tokens_per_batch_size"] = schedule
        argv[index] = json.dumps(spec)
        verdict = vllm_referee.ask({"argv": argv})
        assert not verdict["ok"] and verdict["stage"] == "scheduler", verdict
        said = verdict["error"].removeprefix("ValueError: ")
        # The rule reports vLLM's conditions in vLLM's order: its first finding is vLLM's error.
        assert verdict["error"].startswith("ValueError: ") and said in findings[0].what
