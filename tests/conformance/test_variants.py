"""Methods and shapes the example profiles do not cover, built from them and refereed the same way:
vLLM eagle/eagle3 heads and tensor parallelism, SGLang NGRAM, EAGLE3 and tree drafting.

Each variant must first pass specdeploy's own validation; the engine then judges the render.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.plan.build import load_and_plan
from tests.conformance import test_sglang_conformance as sglang_tests
from tests.conformance import test_vllm_conformance as vllm_tests
from tests.conformance.referee import Referee, StandIns
from tests.support import PROFILES_DIR

pytestmark = pytest.mark.referee

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
# EAGLE heads as local directories: the trimmed config.json fixtures (copies of the published
# files). The catalog's copies of head configs are partial (no architectures), so they cannot
# stand in for a head in the engine's own loader.
FIXTURES = Path(__file__).parents[1] / "fixtures" / "checkpoints"
EAGLE3_HEAD = str(FIXTURES / "eagle3-llama3.1-8b")
EAGLE1_HEAD = str(FIXTURES / "eagle1-llama3.1-8b")
VLLM_VARIANTS: dict[str, dict[str, Any]] = {
    "eagle3-head": {
        "target": {"model": LLAMA},
        "proposer": {"method": "eagle3", "model": EAGLE3_HEAD, "num_speculative_tokens": 3},
    },
    "eagle1-head": {
        "target": {"model": LLAMA},
        "proposer": {"method": "eagle", "model": EAGLE1_HEAD, "num_speculative_tokens": 3},
    },
    "ngram-tp2": {"hardware": {"gpu": "L40S", "tensor_parallel_size": 2}},
}  # fmt: skip
# At the referee's release (the example pins 0.5.14, whose STANDALONE still accepted its
# padded-vocabulary pair); the STANDALONE tree uses a pair of equal vocab_size, as 0.5.23 requires.
SGLANG_AT = {"version": "0.5.23"}
SGLANG_VARIANTS: dict[str, dict[str, Any]] = {
    "ngram": {
        "engine": SGLANG_AT,
        "proposer": {"method": "ngram", "num_speculative_tokens": 4},
        "sglang": {},
    },
    "eagle3-chain": {
        "engine": SGLANG_AT,
        "target": {"model": LLAMA},
        "proposer": {"method": "eagle3", "model": EAGLE3_HEAD, "num_speculative_tokens": 3},
        "sglang": {"eagle_topk": 1, "num_draft_tokens": 4},
    },
    "standalone-tree": {
        "engine": SGLANG_AT,
        "target": {"model": "Qwen/Qwen3-8B"},
        "proposer": {"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 4},
        "sglang": {"eagle_topk": 4, "num_draft_tokens": 8, "disable_overlap_schedule": True},
    },
}  # fmt: skip


def variant(base: str, name: str, changes: dict[str, Any], tmp_path: Path) -> Path:
    data = yaml.safe_load((PROFILES_DIR / base).read_text())
    data["metadata"]["name"] = name
    for key, value in changes.items():
        data[key] = value if key in ("proposer", "sglang") else {**data.get(key, {}), **value}
    data.get("serving", {}).pop("max_model_len", None)
    data.setdefault("serving", {})["max_model_len"] = 8192
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", VLLM_VARIANTS)
def test_vllm_variant(
    name: str, vllm_referee: Referee, stand_ins: StandIns, tmp_path: Path
) -> None:
    path = variant("vllm-qwen3-8b-ngram.yaml", f"v-{name}", VLLM_VARIANTS[name], tmp_path)
    plan = load_and_plan(path, offline=True)
    assert plan.ok(), [f"{f.rule}: {f.what}" for f in plan.errors]
    argv = vllm_tests.referee_argv(plan, stand_ins)
    verdict = vllm_referee.ask({"argv": argv})
    assert verdict["ok"], f"vLLM refused at {verdict['stage']}: {verdict['error']}\nargv: {argv}"
    spec = verdict["resolved"]["speculative"]
    assert plan.profile is not None
    assert spec["method"] == plan.profile.proposer.method
    assert spec["num_speculative_tokens"] == plan.profile.proposer.num_speculative_tokens
    tp = plan.profile.hardware.tensor_parallel_size
    assert verdict["resolved"]["tensor_parallel_size"] == tp


@pytest.mark.parametrize("name", SGLANG_VARIANTS)
def test_sglang_variant(
    name: str, sglang_referee: Referee, stand_ins: StandIns, tmp_path: Path
) -> None:
    path = variant("sglang-qwen25-7b-standalone.yaml", f"s-{name}", SGLANG_VARIANTS[name], tmp_path)
    plan = load_and_plan(path, offline=True)
    assert plan.ok(), [f"{f.rule}: {f.what}" for f in plan.errors]
    argv = sglang_tests.referee_argv(plan, stand_ins)
    verdict = sglang_referee.ask({"argv": argv, "resolve": True})
    assert verdict["ok"], f"SGLang refused at {verdict['stage']}: {verdict['error']}\nargv: {argv}"
    resolved = verdict["resolved"]
    assert plan.profile is not None
    assert (
        resolved["speculative_algorithm"] == sglang_tests.ALGORITHMS[plan.profile.proposer.method]
    )
    for flag, key in (
        ("--speculative-num-steps", "speculative_num_steps"),
        ("--speculative-eagle-topk", "speculative_eagle_topk"),
        ("--speculative-num-draft-tokens", "speculative_num_draft_tokens"),
    ):
        if flag in argv:
            assert resolved[key] == int(argv[argv.index(flag) + 1]), f"SGLang rewrote {flag}"


SCHEDULE = [[1, 2, 3], [3, 6, 1], [7, 8, 0]]


def adaptive_argv(plan: Any, stand_ins: StandIns, tmp_path: Path) -> tuple[list[str], Path | None]:
    """The referee's argv for an SGLang adaptive launch, its rendered config file written to
    `tmp_path` and named in --speculative-adaptive-config (None: no file, SGLang's defaults)."""
    argv = sglang_tests.referee_argv(plan, stand_ins)
    if not plan.launch.config_files:
        assert "--speculative-adaptive-config" not in argv
        return argv, None
    ((name, content),) = plan.launch.config_files.items()
    config = tmp_path / name
    config.write_text(content)
    argv[argv.index("--speculative-adaptive-config") + 1] = str(config)
    return argv, config


def test_sglang_runs_a_schedule_as_its_adaptive_slots(
    sglang_referee: Referee, stand_ins: StandIns, tmp_path: Path
) -> None:
    """An EAGLE-3 chain with a draft length per batch size: SGLang 0.5.23 resolves the rendered
    --speculative-adaptive launch, and its own adaptive controller, loading the rendered config
    file, picks the profile's k at every batch size, and still does after a run of verifies that
    would move a slot with more than one candidate."""
    changes = dict(SGLANG_VARIANTS["eagle3-chain"])
    changes["proposer"] = {**changes["proposer"], "num_speculative_tokens_per_batch_size": SCHEDULE}
    changes["sglang"] = {"eagle_topk": 1}
    path = variant("sglang-qwen25-7b-standalone.yaml", "s-schedule", changes, tmp_path)
    plan = load_and_plan(path, offline=True)
    assert plan.ok(), [f"{f.rule}: {f.what}" for f in plan.errors]
    assert plan.launch is not None and plan.profile is not None
    argv, config = adaptive_argv(plan, stand_ins, tmp_path)
    verdict = sglang_referee.ask({"argv": argv, "resolve": True})
    assert verdict["ok"], f"SGLang refused at {verdict['stage']}: {verdict['error']}\nargv: {argv}"
    resolved = verdict["resolved"]
    assert resolved["speculative_adaptive"] is True  # not turned off by its fallback
    assert resolved["speculative_num_steps"] == 3 and resolved["speculative_num_draft_tokens"] == 4
    sizes = list(range(1, plan.profile.serving.max_concurrency + 1))
    picked = sglang_referee.ask({"adaptive": str(config), "initial_steps": 3, "batch_sizes": sizes})
    assert picked["ok"], picked
    wanted = [plan.profile.proposer.tokens_at(b) for b in sizes]
    assert wanted == [3, 3, 1, 1, 1, 1, 0, 0]
    assert picked["loaded"] == wanted and picked["seen"] == [[k] for k in wanted], picked


SGLANG_TEST_SLOT = {
    "batch_size": 1,
    "candidate_steps": [1, 3],
    "ema_alpha": 1.0,
    "warmup_batches": 1,
    "update_interval": 1,
    "up_hysteresis": 0.0,
}


@pytest.mark.parametrize(
    ("adaptive", "k"),
    [({"slots": [SGLANG_TEST_SLOT]}, 1), ({}, 3)],
    ids=["slots-of-sglangs-test", "default-config"],
)
def test_sglang_adaptive_runs_as_sglang_starts_it(
    sglang_referee: Referee,
    stand_ins: StandIns,
    tmp_path: Path,
    adaptive: dict[str, Any],
    k: int,
) -> None:
    """sglang.adaptive with the slot of SGLang's own adaptive test (candidates 1 and 3, moved
    after every batch), and with no slots (SGLang's default config): SGLang 0.5.23 resolves the
    rendered launch with adaptive on, starting at the profile's k; with slots, its controller,
    loading the rendered file, moves between 1 and 3 as acceptance rises and falls."""
    changes = dict(SGLANG_VARIANTS["eagle3-chain"])
    changes["proposer"] = {**changes["proposer"], "num_speculative_tokens": k}
    changes["sglang"] = {"eagle_topk": 1, "adaptive": adaptive}
    path = variant("sglang-qwen25-7b-standalone.yaml", "s-adaptive", changes, tmp_path)
    plan = load_and_plan(path, offline=True)
    assert plan.ok(), [f"{f.rule}: {f.what}" for f in plan.errors]
    assert plan.launch is not None
    argv, config = adaptive_argv(plan, stand_ins, tmp_path)
    assert "--speculative-adaptive" in argv
    assert (config is None) == (not adaptive) == (not plan.launch.config_files)
    verdict = sglang_referee.ask({"argv": argv, "resolve": True})
    assert verdict["ok"], f"SGLang refused at {verdict['stage']}: {verdict['error']}\nargv: {argv}"
    resolved = verdict["resolved"]
    assert resolved["speculative_adaptive"] is True
    assert (
        resolved["speculative_num_steps"] == k and resolved["speculative_num_draft_tokens"] == k + 1
    )
    if config is not None:
        picked = sglang_referee.ask(
            {"adaptive": str(config), "initial_steps": k, "batch_sizes": [1, 4]}
        )
        assert picked["ok"], picked
        assert picked["loaded"] == [1, 1] and picked["seen"] == [[1, 3], [1, 3]], picked


def test_sglang_adaptive_starting_off_its_candidates_is_refused_by_both(
    sglang_referee: Referee, stand_ins: StandIns, tmp_path: Path
) -> None:
    """k=2 with candidates 1 and 3: specdeploy refuses with engine.sglang-adaptive-config, and
    SGLang 0.5.23, given the same launch, refuses to start."""
    changes = dict(SGLANG_VARIANTS["eagle3-chain"])
    changes["proposer"] = {**changes["proposer"], "num_speculative_tokens": 2}
    changes["sglang"] = {"eagle_topk": 1, "adaptive": {"slots": [SGLANG_TEST_SLOT]}}
    path = variant("sglang-qwen25-7b-standalone.yaml", "s-adaptive-off", changes, tmp_path)
    assert [f.rule for f in load_and_plan(path, offline=True).errors] == [
        "engine.sglang-adaptive-config"
    ]
    plan = load_and_plan(path, offline=True, ignore=frozenset({"engine.sglang-adaptive-config"}))
    assert plan.ok() and plan.launch is not None
    argv, _ = adaptive_argv(plan, stand_ins, tmp_path)
    verdict = sglang_referee.ask({"argv": argv, "resolve": True})
    assert not verdict["ok"] and "not in the adaptive config candidate_steps" in verdict["error"]


def test_a_schedule_sglang_cannot_adapt_is_a_warning_and_renders_one_draft_length(
    tmp_path: Path,
) -> None:
    """STANDALONE drafts do not adapt in SGLang 0.5.23 (it would log a warning and run one
    draft length): the plan says so, and the launch carries no adaptive flags."""
    changes = dict(SGLANG_VARIANTS["standalone-tree"])
    changes["proposer"] = {**changes["proposer"], "num_speculative_tokens_per_batch_size": SCHEDULE}
    path = variant("sglang-qwen25-7b-standalone.yaml", "s-fixed", changes, tmp_path)
    plan = load_and_plan(path, offline=True)
    assert plan.ok() and plan.launch is not None
    found = [f for f in plan.findings if f.rule == "engine.sglang-schedule-adapts"]
    assert len(found) == 1 and found[0].severity == "warning", found
    assert "STANDALONE" in found[0].what and "k=4 at every load" in found[0].why
    assert "--speculative-adaptive" not in plan.launch.argv and not plan.launch.config_files
