"""SGLang 0.5.23 parses, resolves and checks every rendered SGLang example profile.

The rendered argv goes through `prepare_server_args`, `ServerArgs.resolve_once()` and
`check_server_args()` (with `--device cpu` appended: there is no accelerator here), and the
resolved speculative values must be the ones specdeploy rendered - SGLang silently rewrites
some (e.g. num_draft_tokens := steps + 1 when topk is 1), which would hide a rendering bug.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.bench.metrics import parse_prometheus
from orchestrator.dev.tiny_models import TinyModels
from orchestrator.engines import ENGINES
from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan
from orchestrator.profile.loading import load_profile
from tests.conformance.referee import Referee, StandIns, flag_value, swap_sglang_models
from tests.support import EXAMPLE_PROFILES, LOCAL_PROFILES

pytestmark = pytest.mark.referee

SGLANG_PROFILES = [
    p for p in (*EXAMPLE_PROFILES, *LOCAL_PROFILES) if load_profile(p).engine.name == "sglang"
]
#: specdeploy method -> SGLang --speculative-algorithm (after SGLang's own normalisation).
ALGORITHMS = {"draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "ngram": "NGRAM"}


def stand_in_models(plan: DeploymentPlan, stand_ins: StandIns) -> dict[str, str]:
    """The plan's hub models (target, draft) -> the stand-in directories SGLang loads instead."""
    assert plan.profile is not None, [f.what for f in plan.errors]
    models = {}
    for ref, info, location in (
        (plan.profile.target.model, plan.target, plan.target_location),
        (plan.profile.proposer.model, plan.draft, plan.draft_location),
    ):
        if ref and location is not None and location.local_dir is None:
            models[ref] = str(stand_ins.path_for(ref, info))
    return models


def referee_argv(
    plan: DeploymentPlan, stand_ins: StandIns, argv: list[str] | None = None
) -> list[str]:
    """What the SGLang referee resolves for `argv` (default: the plan's launch; a platform's
    final container command otherwise): the stand-in models, on CPU."""
    assert plan.launch is not None, [f.what for f in plan.errors]
    tokens = list(plan.launch.argv) if argv is None else argv
    return [*swap_sglang_models(tokens, stand_in_models(plan, stand_ins)), "--device", "cpu"]


def test_there_is_an_sglang_example() -> None:
    assert SGLANG_PROFILES, "profiles/ has no SGLang example for the referee to check"


@pytest.mark.parametrize("profile_path", SGLANG_PROFILES, ids=lambda p: p.stem)
def test_sglang_resolves_the_rendered_flags_unchanged(
    profile_path: Path, sglang_referee: Referee, stand_ins: StandIns
) -> None:
    plan = load_and_plan(profile_path, offline=True)
    argv = referee_argv(plan, stand_ins)
    verdict = sglang_referee.ask({"argv": argv, "resolve": True})
    assert verdict["ok"], f"SGLang refused at {verdict['stage']}: {verdict['error']}\nargv: {argv}"
    resolved = verdict["resolved"]
    profile = plan.profile
    assert profile is not None
    assert resolved["device"] == "cpu"
    assert resolved["tp_size"] == profile.hardware.tensor_parallel_size
    assert resolved["context_length"] == profile.serving.max_model_len
    assert resolved["max_running_requests"] == int(flag_value(argv, "--max-running-requests"))
    assert resolved["mem_fraction_static"] == float(flag_value(argv, "--mem-fraction-static"))
    if not profile.speculative:
        assert resolved["speculative_algorithm"] is None
        return
    assert resolved["speculative_algorithm"] == ALGORITHMS[profile.proposer.method]
    # Each rendered speculative number must survive resolution unchanged.
    for flag, key in (
        ("--speculative-num-steps", "speculative_num_steps"),
        ("--speculative-eagle-topk", "speculative_eagle_topk"),
        ("--speculative-num-draft-tokens", "speculative_num_draft_tokens"),
    ):
        if flag in argv:
            assert resolved[key] == int(flag_value(argv, flag)), f"SGLang rewrote {flag}"
    assert resolved["speculative_num_steps"] == profile.proposer.num_speculative_tokens
    if profile.proposer.model is not None:
        assert resolved["speculative_draft_model_path"] == flag_value(
            argv, "--speculative-draft-model-path"
        )


@pytest.mark.parametrize("profile_path", SGLANG_PROFILES, ids=lambda p: p.stem)
def test_every_rendered_sglang_flag_name_is_checked(
    profile_path: Path, sglang_referee: Referee, stand_ins: StandIns
) -> None:
    """Misspell each flag in turn (parse only): SGLang must refuse every one."""
    argv = referee_argv(load_and_plan(profile_path, offline=True), stand_ins)
    rendered_flags = [t for t in argv if t.startswith("--") and t != "--device"]
    assert sglang_referee.ask({"argv": argv, "resolve": False})["ok"]
    accepted = []
    for flag in rendered_flags:
        broken = [f"{t}-typo" if t == flag else t for t in argv]
        verdict = sglang_referee.ask({"argv": broken, "resolve": False})
        if verdict["ok"]:
            accepted.append(flag)
        else:  # the typo is unknown, or (for --model-path) the required flag is now missing
            assert "unrecognized arguments" in verdict["error"] or "required" in verdict["error"]
    assert accepted == [], f"SGLang accepted misspelt flags: {accepted}"


def test_a_misspelt_algorithm_flag_is_refused(sglang_referee: Referee, stand_ins: StandIns) -> None:
    argv = referee_argv(load_and_plan(SGLANG_PROFILES[0], offline=True), stand_ins)
    broken = ["--speculative-algoritm" if t == "--speculative-algorithm" else t for t in argv]
    verdict = sglang_referee.ask({"argv": broken, "resolve": False})
    assert not verdict["ok"]
    assert "unrecognized arguments: --speculative-algoritm" in verdict["error"]


def test_the_operator_reads_request_time_per_output_token_from_sglangs_own_metrics(
    sglang_referee: Referee, repo_tiny_models: TinyModels
) -> None:
    """What `policy.mode: switch` compares, read from the exposition SGLang 0.5.23's own metrics
    collector writes: the finished requests' end-to-end latencies over their output tokens. A
    metric name the reader expects that SGLang does not write fails here."""
    finished = [
        {"generation_tokens": 10, "e2e_latency": 1.0, "time_per_output_token": 0.05},
        {"generation_tokens": 30, "e2e_latency": 2.5, "time_per_output_token": 0.07},
    ]
    model = str(repo_tiny_models.target)
    verdict = sglang_referee.ask({"finished": finished, "model": model})
    assert verdict["ok"], verdict
    window = ENGINES["sglang"].metrics.serving({}, parse_prometheus(verdict["exposition"]))
    assert window is not None, verdict["exposition"][:2000]
    assert (window.finished, window.output_tokens) == (2, 40)
    assert window.busy_s == pytest.approx(3.5)
    assert window.seconds_per_token == pytest.approx(3.5 / 40)
    assert window.tpot_s == pytest.approx(0.06)
