"""Analytic speedup: Leviathan et al. formulas and the roofline's load dependence."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from orchestrator.bench.estimate import (
    LABEL,
    Roofline,
    alpha_from_acceptance_length,
    cost_ratio_from_weights,
    estimate,
    expected_tokens_per_step,
    roofline_for,
    speedup,
)


@dataclass(frozen=True)
class FakeGpu:
    bandwidth_tbps: float = 3.35  # H100 SXM (shared/reference/catalog.md §C)
    bf16_tflops: float | None = 989.0


def h100_8b(context_tokens: float = 128) -> Roofline:
    # Llama-3.1-8B-like: 16 GB of BF16 weights, 8e9 parameters, 128 KiB KV per token.
    return roofline_for(
        FakeGpu(),
        weight_bytes=16e9,
        active_params=8e9,
        kv_bytes_per_token=131072,
        context_tokens=context_tokens,
    )


class TestFormulas:
    def test_expected_tokens(self) -> None:
        assert expected_tokens_per_step(0.0, 4) == 1.0
        assert expected_tokens_per_step(1.0, 4) == 5.0
        assert expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)  # 1 + .5 + .25

    @pytest.mark.parametrize("alpha", [0.1, 0.5, 0.8, 0.95])
    def test_alpha_round_trip(self, alpha: float) -> None:
        length = expected_tokens_per_step(alpha, 5)
        assert alpha_from_acceptance_length(length, 5) == pytest.approx(alpha, abs=1e-6)

    def test_leviathan_without_roofline(self) -> None:
        # Leviathan et al. Table/Theorem 3.8: alpha 0.8, k 4, c 0.05 -> 3.3616 / 1.2
        assert speedup(0.8, 4, 0.05, 1, None) == pytest.approx(3.3616 / 1.2)

    def test_cost_ratio_from_weights(self) -> None:
        assert cost_ratio_from_weights(1.2e9, 16e9) == pytest.approx(0.075)


class TestRoofline:
    def test_memory_bound_at_batch_one_matches_leviathan(self) -> None:
        roof = h100_8b()
        assert speedup(0.8, 4, 0.05, 1, roof) == pytest.approx(
            speedup(0.8, 4, 0.05, 1, None), rel=0.01
        )

    def test_speedup_falls_with_load(self) -> None:
        roof = h100_8b()
        values = [speedup(0.7, 4, 0.05, b, roof) for b in (1, 16, 64, 256)]
        assert values == sorted(values, reverse=True)
        assert values[0] > 1.5 and values[-1] < 1.0

    def test_long_contexts_stay_memory_bound_longer(self) -> None:
        # reading each sequence's KV cache keeps large batches memory-bound, so verification
        # stays cheap (the effect MagicDec, Chen et al. 2024, builds on)
        assert speedup(0.7, 4, 0.05, 256, h100_8b(8192)) > speedup(0.7, 4, 0.05, 256, h100_8b(128))

    def test_estimate_recommends_and_finds_where_it_stops_paying(self) -> None:
        result = estimate(0.7, 0.05, h100_8b(), loads=(1, 8, 64, 256, 512))
        assert result.label == LABEL and "estimate" in result.label
        assert 2 <= result.recommended_num_speculative_tokens <= 8
        assert result.stops_paying_at in (256, 512)
        best_at_high_load = result.loads[-1].best_k
        assert best_at_high_load <= result.recommended_num_speculative_tokens
        document = result.as_json()
        assert (
            document["recommended_num_speculative_tokens"]
            == result.recommended_num_speculative_tokens
        )
        assert isinstance(document["loads"], list) and len(document["loads"]) == 5

    def test_low_acceptance_recommends_short_drafts(self) -> None:
        low = estimate(0.3, 0.1, None)
        high = estimate(0.9, 0.1, None)
        assert low.recommended_num_speculative_tokens < high.recommended_num_speculative_tokens

    def test_rejects_impossible_inputs(self) -> None:
        with pytest.raises(ValueError, match=r"alpha=1\.5"):
            estimate(1.5, 0.1, None)


@dataclass(frozen=True)
class FakeMemory:
    target_weights_gib: float = 15.0
    draft_weights_gib: float = 1.1
    target_kv_bytes_per_token: int = 147456
    max_concurrency: int = 40
    requested_concurrency: int = 16


def test_estimate_for_a_planned_deployment() -> None:
    from orchestrator.bench.estimate import estimate_for_deployment

    result = estimate_for_deployment(FakeMemory(), FakeGpu(), 0.7)
    assert result.cost_ratio == pytest.approx(1.1 / 15.0)
    assert [load.concurrency for load in result.loads] == [1, 2, 4, 8, 16, 32]
    assert "concurrency 16" in result.reason
    document = result.as_json()
    assert document["assumptions"]["context_tokens"] == 1024  # type: ignore[index]
    ngram = estimate_for_deployment(FakeMemory(draft_weights_gib=0.0), FakeGpu(), 0.5)
    assert ngram.cost_ratio == 0.0


def test_alpha_from_an_engine_acceptance_rate() -> None:
    from orchestrator.bench.estimate import alpha_from_acceptance_rate

    # vLLM acceptance rate 0.5 with k=4: 2 accepted per step, mean length 3 = E(alpha, 4)
    alpha = alpha_from_acceptance_rate(0.5, 4)
    assert expected_tokens_per_step(alpha, 4) == pytest.approx(3.0)
    assert alpha_from_acceptance_rate(1.0, 3) == pytest.approx(1.0, abs=1e-6)
    assert alpha_from_acceptance_rate(0.0, 3) == pytest.approx(0.0, abs=1e-6)
