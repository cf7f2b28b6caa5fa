"""Formulas against hand-computed numbers for GQA, MLA, quantised and sliding-window models."""

from __future__ import annotations

import pytest

from orchestrator.memory.formulas import (
    attention_layout,
    computed_weight_bytes,
    kv_bytes_per_layer,
    param_breakdown,
    sliding_tokens_held,
)
from orchestrator.memory.kv import capacity, target_layout
from orchestrator.memory.overheads import activation_bytes, forward_bytes, sampler_bytes
from orchestrator.memory.weights import eagle_head_weight_bytes, target_weight_bytes
from tests.unit.memory.conftest import (
    DEEPSEEK_V3,
    EAGLE3_8B,
    GPT_OSS_20B,
    LLAMA_1B,
    LLAMA_8B,
    QWEN3_8B_AWQ,
    make_profile,
)


class TestParameters:
    def test_llama_8b_matches_published_count(self) -> None:
        # 2 x 128256 x 4096 + 32 x (41,943,040 attn + 176,160,768 mlp + 8192 norms) + 4096
        params = param_breakdown(LLAMA_8B)
        assert params is not None
        assert params.total == 8_030_261_248

    def test_tied_embeddings_count_once(self) -> None:
        params = param_breakdown(LLAMA_1B)
        assert params is not None
        assert params.lm_head == 0
        assert params.embedding == 128256 * 2048

    def test_deepseek_v3_main_model_is_671b(self) -> None:
        params = param_breakdown(DEEPSEEK_V3)
        assert params is not None
        assert params.total == pytest.approx(671.03e9, rel=0.002)  # catalog.md §A3


class TestWeights:
    def test_bf16_llama_8b(self) -> None:
        weights = target_weight_bytes(make_profile(), LLAMA_8B)
        assert weights == 8_030_261_248 * 2  # 14.96 GiB

    def test_awq_int4_keeps_embeddings_in_fp16(self) -> None:
        # linear 6,945,767,424 x 0.52 + (1,244,659,712 embed/head + 299,008 norms) x 2
        profile = make_profile(target={"model": "Qwen/Qwen3-8B-AWQ"})
        assert target_weight_bytes(profile, QWEN3_8B_AWQ) == 6_101_716_501  # 5.68 GiB (KAITO)

    def test_mxfp4_quantises_experts_only(self) -> None:
        params = param_breakdown(GPT_OSS_20B)
        assert params is not None
        weights = computed_weight_bytes(params, "bfloat16", "mxfp4", None)
        assert weights / 1e9 == pytest.approx(13.76, rel=0.01)  # published repo size

    def test_online_fp8_halves_a_bf16_target(self) -> None:
        profile = make_profile(target={"model": "x", "quantization": "fp8"})
        weights = target_weight_bytes(profile, LLAMA_8B)
        # linear 6,979,321,856 x 1 byte + (1,050,673,152 embed/head + 266,240 norms) x 2
        assert weights == 6_979_321_856 + 1_050_939_392 * 2

    def test_exact_index_bytes_win_over_the_formula(self) -> None:
        from dataclasses import replace

        exact = replace(LLAMA_8B, weight_bytes=16_060_000_000)
        assert target_weight_bytes(make_profile(), exact) == 16_060_000_000

    def test_eagle3_head_without_embedding(self) -> None:
        # attn 8192x(32+16)x128 + 32x128x4096, mlp 3x4096x14336, norms, fc 3x4096^2, lm_head 32000x4096
        weights = eagle_head_weight_bytes(make_profile(), EAGLE3_8B, LLAMA_8B)
        assert weights == 424_681_472 * 2  # 0.79 GiB, catalog.md §D5


class TestKvBytesPerToken:
    @pytest.mark.parametrize(("tp", "expected"), [(1, 131072), (2, 65536), (8, 16384), (16, 16384)])
    def test_gqa_heads_split_then_replicated(self, tp: int, expected: int) -> None:
        # 32 layers x 2 x ceil(8 / tp) x 128 x 2 bytes
        assert 32 * kv_bytes_per_layer(LLAMA_8B, tp, 2.0) == expected

    def test_mla_latent_is_not_split_by_tp(self) -> None:
        # 61 layers x (512 + 64) x 2 bytes, on every rank
        assert 61 * kv_bytes_per_layer(DEEPSEEK_V3, 8, 2.0) == 70272
        assert 61 * kv_bytes_per_layer(DEEPSEEK_V3, 1, 1.0) == 35136

    def test_fp8_kv_cache_halves_it(self) -> None:
        profile = make_profile(serving={"kv_cache_dtype": "fp8"})
        assert target_layout(profile, LLAMA_8B).bytes_per_token == 65536


class TestSlidingWindow:
    def test_gpt_oss_layout(self) -> None:
        layout = attention_layout(GPT_OSS_20B)
        assert (layout.full, layout.sliding, layout.window) == (12, 12, 128)

    def test_sliding_layers_hold_window_plus_one_block(self) -> None:
        # vLLM SlidingWindowSpec: cdiv(min(window - 1 + in-flight, max_model_len), 16) + 1 blocks
        assert sliding_tokens_held(128, 32768) == 144
        assert sliding_tokens_held(128, 100) == 128  # 7 blocks for the sequence, + 1

    def test_a_prefill_chunk_in_flight_is_held_besides_the_window(self) -> None:
        # 127 + 8192 = 8319 tokens -> 520 blocks + 1 = 8336 tokens; never past the sequence
        assert sliding_tokens_held(128, 32768, in_flight=8192) == 8336
        assert sliding_tokens_held(128, 8192, in_flight=8192) == 8192 + 16

    def test_per_token_and_per_sequence_split(self) -> None:
        profile = make_profile(serving={"max_model_len": 32768})
        layout = target_layout(profile, GPT_OSS_20B)
        assert layout.bytes_per_token == 12 * 2 * 8 * 64 * 2  # 24,576
        assert layout.fixed == 12 * 2048 * 144


class TestCapacity:
    def test_block_rounding(self) -> None:
        # 1 GiB / (131072 x 16) = 512 blocks = 8192 tokens; 8192-token sequences: 1
        cap = capacity(1.0, 131072, 0, 8192)
        assert (cap.tokens, cap.sequences) == (8192, 1)

    def test_negative_kv_fits_nothing(self) -> None:
        assert capacity(-1.0, 131072, 0, 8192).sequences == 0


class TestActivation:
    """The profile run's peak: max(forward pass, sampler warm-up), by hand."""

    def test_dense_forward_is_tokens_times_intermediate(self) -> None:
        # 8192 tokens x 14336 / TP 2 x 7.75 B
        assert forward_bytes(LLAMA_8B, 8192, 2) == pytest.approx(8192 * 7168 * 7.75)

    def test_moe_forward_adds_the_fused_moe_output_cache(self) -> None:
        # MLP: 2048 x (2880 x 4 active experts) x 7.75; cache: 2048 x top-4 x 2880 hidden x 2 B
        expected = 2048 * 11520 * 7.75 + 2048 * 4 * 2880 * 2
        assert forward_bytes(GPT_OSS_20B, 2048, 1) == pytest.approx(expected)

    def test_peak_is_the_larger_phase_not_the_sum(self) -> None:
        long_prefill = activation_bytes(LLAMA_8B, 20000, 1, 256, bytes_per_logit=40)
        assert long_prefill == pytest.approx(20000 * 14336 * 7.75)  # forward dominates
        many_requests = activation_bytes(LLAMA_8B, 2048, 1, 1024, bytes_per_logit=40)
        assert many_requests == pytest.approx(1024 * 128256 * 40)  # sampler dominates
        assert sampler_bytes(LLAMA_8B, 1024, 40) == many_requests
