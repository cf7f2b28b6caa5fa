"""The speedup estimate of a planned deployment (`plan --speedup`, `suggest`): acceptance from the
proposer's sources, MoE experts actually touched, no recommendation without the draft's cost, and
an explanation wherever the estimate and `serving.high-concurrency` disagree."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.bench.estimate import SpeedupEstimate
from orchestrator.bench.planned import NoEstimate, estimate_planned
from orchestrator.memory.gpus import find_gpu
from orchestrator.plan.build import plan_profile
from orchestrator.plan.resolver import LocalCheckpoints
from orchestrator.plan.types import PlanResult
from tests.support import make_profile


def planned(
    target: str,
    method: str,
    model: str | None = None,
    *,
    gpu: str = "H100-80GB",
    tp: int = 1,
    concurrency: int = 16,
) -> PlanResult:
    proposer: dict[str, object] = {"method": method, "num_speculative_tokens": 3}
    if model is not None:
        proposer["model"] = model
    profile = make_profile(
        target={"model": target},
        proposer=proposer,
        hardware={"gpu": gpu, "tensor_parallel_size": tp},
        serving={"max_model_len": 8192, "max_concurrency": concurrency},
    )
    return plan_profile(
        profile, LocalCheckpoints(base_dir=Path.cwd(), offline=True), profile_path=Path("t.yaml")
    )


def test_a_published_head_is_estimated_from_its_own_figure() -> None:
    result = planned(
        "meta-llama/Llama-3.1-8B-Instruct", "eagle3", "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"
    )
    found = estimate_planned(result, workload="chat", context_tokens=1024)
    assert isinstance(found, SpeedupEstimate)
    assert found.acceptance is not None and found.acceptance.kind == "published"
    assert found.acceptance.curve.mean_length(3) == pytest.approx(2.93)
    assert 1.0 < found.row(1).best_speedup < 4.0


def test_a_measured_rate_replaces_the_prior() -> None:
    result = planned("Qwen/Qwen3-8B", "ngram")
    low = estimate_planned(result, workload="chat", acceptance_rate=0.2, context_tokens=1024)
    high = estimate_planned(result, workload="chat", acceptance_rate=0.9, context_tokens=1024)
    assert isinstance(low, SpeedupEstimate) and isinstance(high, SpeedupEstimate)
    assert low.acceptance is not None and low.acceptance.kind == "measured"
    assert high.row(1).best_speedup > low.row(1).best_speedup


def test_no_recommendation_when_the_drafts_cost_is_unknown() -> None:
    # The catalog cannot confirm Qwen3-Next's MTP layer count, so its MTP weights are unknown.
    result = planned("Qwen/Qwen3-Next-80B-A3B-Instruct", "mtp", tp=4)
    assert result.exit_code() == 0
    found = estimate_planned(result, workload="chat", context_tokens=1024)
    assert isinstance(found, NoEstimate) and found.cost_unknown
    assert "no recommendation" in found.reason and "MTP layers" in found.reason
    assert found.acceptance is not None  # the prior is still shown


def test_no_estimate_without_a_sourced_acceptance() -> None:
    result = planned(
        "meta-llama/Llama-3.1-8B-Instruct", "eagle", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B"
    )
    found = estimate_planned(result, workload="chat", context_tokens=1024)
    assert isinstance(found, NoEstimate) and not found.cost_unknown
    assert "--acceptance-rate" in found.reason


def test_moe_counts_the_experts_a_step_touches() -> None:
    result = planned("openai/gpt-oss-120b", "eagle3", "nvidia/gpt-oss-120b-Eagle3")
    found = estimate_planned(result, workload="chat", context_tokens=1024)
    assert isinstance(found, SpeedupEstimate)
    notes = dict(found.assumptions)
    assert "4 of 128 experts" in str(notes["moe"])
    # A head costs far more than its weight share of the whole model: a plain MoE step reads
    # only a few experts, so c is measured against the weights a step touches.
    memory = result.memory
    assert memory is not None
    assert found.cost_ratio > 3 * memory.draft_weights_gib / memory.target_weights_gib


def test_a_gain_where_high_concurrency_warns_says_why() -> None:
    result = planned(
        "meta-llama/Llama-3.1-8B-Instruct",
        "eagle3",
        "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B",
        concurrency=48,
    )
    found = estimate_planned(result, workload="chat", context_tokens=8192)
    assert isinstance(found, SpeedupEstimate)
    assert found.disagreements, "48 x (k + 1) verified tokens pass the H100 ridge"
    for d in found.disagreements:
        assert d.rule == "serving.high-concurrency" and d.estimated_speedup > 1.0
        assert "memory-bound" in d.why or "compute-bound" in d.why
        assert "specdeploy bench" in d.why
    # Every shown load with a gain where the rule warns is explained.
    explained = {(d.concurrency, d.num_speculative_tokens) for d in found.disagreements}
    gpu = find_gpu("H100-80GB")
    assert gpu.bf16_tflops is not None
    ridge = int(gpu.bf16_tflops / gpu.bandwidth_tbps)  # the rule's critical batch
    for row in found.loads:
        if row.best_speedup > 1.0 and row.concurrency * (row.best_k + 1) >= ridge:
            assert (row.concurrency, row.best_k) in explained
