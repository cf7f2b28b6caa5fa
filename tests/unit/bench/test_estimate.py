"""Analytic speedup: Leviathan et al. formulas and the roofline's load dependence."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from orchestrator.bench.acceptance import AcceptanceCurve
from orchestrator.bench.estimate import (
    LABEL,
    DraftCost,
    Experts,
    Roofline,
    alpha_from_acceptance_length,
    cost_ratio,
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


def moe_roofline(batch_experts: Experts | None) -> Roofline:
    # gpt-oss-120b-like on one H100: 61 GB of weights, 93 % in 128 experts, 4 routed per token.
    return roofline_for(
        FakeGpu(),
        weight_bytes=61e9,
        active_params=5.1e9,
        kv_bytes_per_token=36864,
        context_tokens=1024,
        experts=batch_experts,
    )


class TestMoE:
    def test_a_step_reads_only_the_experts_its_tokens_route_to(self) -> None:
        experts = Experts(routed_bytes=57e9, total=128, per_token=4)
        assert experts.hit_fraction(1) == pytest.approx(4 / 128)
        assert experts.hit_fraction(4) > experts.hit_fraction(1) * 3.5
        assert experts.hit_fraction(2000) == pytest.approx(1.0)
        roof = moe_roofline(experts)
        assert roof.weight_bytes_read(1) == pytest.approx(4e9 + 57e9 * 4 / 128)

    def test_verification_costs_an_moe_target_more_at_low_batch(self) -> None:
        # k + 1 verify tokens touch up to k + 1 times the experts of a plain step, where a dense
        # model reads its weights once either way: the same acceptance gains less on MoE.
        moe = moe_roofline(Experts(57e9, 128, 4))
        dense = moe_roofline(None)
        assert speedup(0.7, 3, 0.02, 1, moe) < speedup(0.7, 3, 0.02, 1, dense)
        # Under load every expert is read anyway, so verification is cheap again.
        assert speedup(0.7, 3, 0.02, 64, moe) > speedup(0.7, 3, 0.02, 1, moe)


class TestAcceptanceCurves:
    def test_per_position_rates_replace_one_alpha(self) -> None:
        flat, decaying = AcceptanceCurve(0.8), AcceptanceCurve(0.8, 0.9)
        assert flat.mean_length(4) == pytest.approx(expected_tokens_per_step(0.8, 4))
        assert decaying.mean_length(4) < flat.mean_length(4)
        # a decaying drafter stops paying for long drafts sooner
        assert (
            estimate(decaying, 0.05, None).recommended_num_speculative_tokens
            < estimate(flat, 0.05, None).recommended_num_speculative_tokens
        )

    def test_a_draft_roofline_matches_the_weight_ratio_when_memory_bound(self) -> None:
        roof = h100_8b()
        draft = DraftCost(weight_bytes=1.6e9, kv_bytes_per_token=0.0, params=0.8e9)
        assert cost_ratio(draft, roof) == pytest.approx(1.6e9 / (16e9 + 128 * 131072), rel=1e-6)


def test_alpha_from_an_engine_acceptance_rate() -> None:
    from orchestrator.bench.estimate import alpha_from_acceptance_rate

    # vLLM acceptance rate 0.5 with k=4: 2 accepted per step, mean length 3 = E(alpha, 4)
    alpha = alpha_from_acceptance_rate(0.5, 4)
    assert expected_tokens_per_step(alpha, 4) == pytest.approx(3.0)
    assert alpha_from_acceptance_rate(1.0, 3) == pytest.approx(1.0, abs=1e-6)
    assert alpha_from_acceptance_rate(0.0, 3) == pytest.approx(0.0, abs=1e-6)
