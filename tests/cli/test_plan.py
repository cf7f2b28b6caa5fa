"""`plan`: the memory trap is visible, an over-budget plan exits 5 with a fix, and `--speedup`
adds a labelled estimate."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from orchestrator.cli import cli
from tests.support import PROFILES_DIR, write_profile

DRAFT_EXAMPLE = PROFILES_DIR / "vllm-qwen3-4b-draft.yaml"


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def test_long_context_shows_the_draft_share_and_the_concurrency_it_costs() -> None:
    result = run("plan", str(DRAFT_EXAMPLE), "--offline")
    assert result.exit_code == 0, result.output
    assert "draft weights" in result.stdout
    assert "with speculation" in result.stdout and "without" in result.stdout
    memory = json.loads(run("plan", str(DRAFT_EXAMPLE), "--offline", "--format", "json").stdout)[
        "memory"
    ]
    assert memory["draft_weights_gib"] > 0
    assert memory["max_concurrency"] < memory["baseline_max_concurrency"]


def _qwen3_4b_on_l4(tmp_path: Path, **serving: int) -> Path:
    return write_profile(
        tmp_path,
        target={"model": "Qwen/Qwen3-4B-Thinking-2507"},
        proposer={"method": "draft_model", "model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 5},
        hardware={"gpu": "L4"},
        serving=serving,
    )


def test_over_budget_exits_5_with_breakdown_and_fix(tmp_path: Path) -> None:
    path = _qwen3_4b_on_l4(tmp_path, max_model_len=262144, max_concurrency=4)
    result = run("plan", str(path), "--offline")
    assert result.exit_code == 5, result.output
    assert "memory.over-budget" in result.stderr
    assert "target weights" in result.stderr and "fix:" in result.stderr
    document = json.loads(run("plan", str(path), "--offline", "--format", "json").stdout)
    assert document["memory"]["fits"] is False
    assert document["memory"]["suggestions"], "an over-budget plan should suggest a change"


def test_too_few_full_length_sequences_is_a_warning_not_exit_5(tmp_path: Path) -> None:
    path = _qwen3_4b_on_l4(
        tmp_path, max_model_len=32768, max_concurrency=16, typical_context_tokens=2048
    )
    result = run("plan", str(path), "--offline")
    assert result.exit_code == 0, result.output
    assert "warning memory.concurrency-at-max-context" in result.output
    assert "typical requests of 2,048 tokens at once" in result.output
    memory = json.loads(run("plan", str(path), "--offline", "--format", "json").stdout)["memory"]
    assert memory["fits"] is True and memory["concurrency_fits"] is False
    assert memory["typical_concurrency"] > memory["max_concurrency"]
    assert memory["suggestions"], "the warning should still say how to fit all 16"


def test_speedup_estimate_is_labelled_and_recommends_k() -> None:
    result = run("plan", str(DRAFT_EXAMPLE), "--offline", "--speedup", "--format", "json")
    assert result.exit_code == 0, result.output
    block = json.loads(result.stdout)["speedup_estimate"]
    assert "estimate" in block["label"] and "not a measurement" in block["label"]
    assert 1 <= block["recommended_num_speculative_tokens"] <= 8
    # no single alpha for every method: a draft model gets the draft-model prior, with its source
    acceptance = block["acceptance"]
    assert acceptance["kind"] == "prior" and "draft" in acceptance["label"].lower()
    assert acceptance["sources"] and all(s.startswith("https://") for s in acceptance["sources"])
    text = run("plan", str(DRAFT_EXAMPLE), "--offline", "--speedup").stdout
    assert "acceptance: prior" in text and "source: https://" in text


def test_the_workload_selects_the_prior() -> None:
    def length(workload: str) -> float:
        result = run(
            "plan",
            str(DRAFT_EXAMPLE),
            "--offline",
            "--speedup",
            "--workload",
            workload,
            "--format",
            "json",
        )
        block = json.loads(result.stdout)["speedup_estimate"]
        return float(block["acceptance"]["mean_acceptance_length"])

    assert length("code") != length("chat")


def test_no_recommendation_when_the_draft_cost_is_unknown(tmp_path: Path) -> None:
    path = write_profile(
        tmp_path,
        target={"model": "Qwen/Qwen3-Next-80B-A3B-Instruct"},
        proposer={"method": "mtp", "num_speculative_tokens": 2},
        hardware={"gpu": "H100-80GB", "tensor_parallel_size": 4},
    )
    result = run("plan", str(path), "--offline", "--speedup", "--format", "json")
    assert result.exit_code == 0, result.output
    block = json.loads(result.stdout)["speedup_estimate"]
    assert block["recommended_num_speculative_tokens"] is None and block["loads"] == []
    assert "cost is unknown" in block["reason"]


def test_higher_acceptance_recommends_a_longer_draft() -> None:
    low = run(
        "plan",
        str(DRAFT_EXAMPLE),
        "--offline",
        "--speedup",
        "--acceptance-rate",
        "0.3",
        "--format",
        "json",
    )
    high = run(
        "plan",
        str(DRAFT_EXAMPLE),
        "--offline",
        "--speedup",
        "--acceptance-rate",
        "0.9",
        "--format",
        "json",
    )
    k_low = json.loads(low.stdout)["speedup_estimate"]["recommended_num_speculative_tokens"]
    k_high = json.loads(high.stdout)["speedup_estimate"]["recommended_num_speculative_tokens"]
    assert k_high > k_low


def test_speedup_for_a_baseline_says_there_is_none() -> None:
    result = run(
        "plan", str(PROFILES_DIR / "vllm-qwen3-8b-baseline.yaml"), "--offline", "--speedup"
    )
    assert result.exit_code == 0
    assert "no proposer" in result.stdout


def test_a_gain_where_high_concurrency_warns_is_explained(tmp_path: Path) -> None:
    path = write_profile(
        tmp_path,
        target={"model": "meta-llama/Llama-3.1-8B-Instruct"},
        proposer={
            "method": "eagle3",
            "model": "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B",
            "num_speculative_tokens": 3,
        },
        serving={"max_model_len": 8192, "max_concurrency": 48},
    )
    result = run("plan", str(path), "--offline", "--speedup", "--context-tokens", "8192")
    assert result.exit_code == 0, result.output
    assert "serving.high-concurrency" in result.stdout  # the validate warning itself
    assert "serving.high-concurrency warns at that load and draft length" in result.stdout
    assert "memory-bound" in result.stdout or "compute-bound" in result.stdout


def test_a_schedule_s_draft_length_is_estimated_at_each_load(tmp_path: Path) -> None:
    """With proposer.num_speculative_tokens_per_batch_size, each load also gets the speedup at the
    draft length the schedule runs there (the same figure as that k's column; 1.0 where k is 0)."""
    schedule = [[1, 1, 5], [2, 3, 3], [4, 1024, 0]]
    path = write_profile(
        tmp_path,
        target={"model": "Qwen/Qwen3-4B-Thinking-2507"},
        proposer={
            "method": "draft_model",
            "model": "Qwen/Qwen3-0.6B",
            "num_speculative_tokens": 5,
            "num_speculative_tokens_per_batch_size": schedule,
        },
        hardware={"gpu": "H100-80GB"},
        serving={"max_model_len": 32768, "max_concurrency": 6},
    )
    result = run("plan", str(path), "--offline", "--speedup", "--format", "json")
    assert result.exit_code == 0, result.output
    loads = json.loads(result.stdout)["speedup_estimate"]["loads"]
    scheduled = {load["concurrency"]: load["scheduled_k"] for load in loads}
    assert scheduled == {1: 5, 2: 3, 4: 0, 6: 0}
    for load in loads:
        k = load["scheduled_k"]
        expected = load["speedup_by_k"][str(k)] if k else 1.0
        assert load["scheduled_speedup"] == expected
    text = run("plan", str(path), "--offline", "--speedup").stdout
    assert "best  scheduled" in text and "k=0: 1.00x" in text
    plain = run("plan", str(DRAFT_EXAMPLE), "--offline", "--speedup", "--format", "json")
    assert all(
        "scheduled_k" not in load for load in json.loads(plain.stdout)["speedup_estimate"]["loads"]
    )
