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
