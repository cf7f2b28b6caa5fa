"""KV and state of hybrid models: what a sequence holds, what speculation adds, what engines log."""

from __future__ import annotations

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.budget import estimate_memory
from orchestrator.memory.estimate import MemoryEstimate
from orchestrator.memory.report import memory_table
from tests.support import make_profile

QWEN3_NEXT = "Qwen/Qwen3-Next-80B-A3B-Instruct"
GPT_OSS = "openai/gpt-oss-20b"


def model(name: str) -> CheckpointInfo:
    info = catalog_info(name)
    assert info is not None
    return info


def estimate(target: str, engine: str, version: str, **sections: object) -> MemoryEstimate:
    profile = make_profile(
        engine={"name": engine, "version": version},
        target={"model": target},
        hardware={"gpu": "H100-80GB", "tensor_parallel_size": sections.pop("tp", 4)},
        **sections,
    )
    result = estimate_memory(profile, model(target), None)
    assert result is not None
    return result


# Qwen3-Next at TP 4, bf16: per Gated-DeltaNet layer and sequence, the conv state is
# 8192 / 4 channels x (4 - 1 + speculative tokens) positions x 2 B and the recurrent state
# 32 / 4 heads x 128 x 128 x 2 B = 262,144 B.
STATE_NO_SPEC = 2048 * 3 * 2 + 262_144
STATE_K3 = 2048 * 6 * 2 + 262_144


class TestLinearAttentionState:
    def test_baseline_holds_one_state_per_linear_layer(self) -> None:
        e = estimate(QWEN3_NEXT, "vllm", "0.32.0", proposer={"method": "none"})
        assert e.kv_fixed_bytes_per_sequence == 36 * STATE_NO_SPEC
        # Only the 12 full-attention layers grow with the sequence.
        assert e.target_kv_bytes_per_token == 12 * 2 * 1 * 256 * 2

    def test_vllm_mtp_keeps_a_state_per_speculative_position(self) -> None:
        e = estimate(
            QWEN3_NEXT,
            "vllm",
            "0.32.0",
            proposer={"method": "mtp", "num_speculative_tokens": 3},
        )
        assert e.kv_fixed_bytes_per_sequence == 36 * 4 * STATE_K3
        assert e.baseline_kv_fixed_bytes_per_sequence == 36 * STATE_NO_SPEC
        assert any("4 copies with speculation" in note for note in e.notes)

    def test_sglang_keeps_a_state_per_draft_token(self) -> None:
        e = estimate(
            QWEN3_NEXT,
            "sglang",
            "0.5.23",
            proposer={"method": "mtp", "num_speculative_tokens": 3},
        )
        # 4 draft tokens: the committed state + one per draft token, conv widened by 4.
        assert e.kv_fixed_bytes_per_sequence == 36 * 5 * (2048 * 7 * 2 + 262_144)

    def test_state_is_why_speculation_costs_sequences_at_short_context(self) -> None:
        # At 4k tokens, state dominates a sequence: 4 copies cut the concurrency that fits.
        e = estimate(
            QWEN3_NEXT,
            "vllm",
            "0.32.0",
            proposer={"method": "mtp", "num_speculative_tokens": 3},
            serving={"max_model_len": 4096, "max_concurrency": 512},
        )
        assert e.max_concurrency < e.baseline_max_concurrency * 0.75


class TestSlidingWindowFigures:
    def test_vllm_019_logs_fewer_tokens_than_the_cache_holds(self) -> None:
        # gpt-oss at 128k: vLLM 0.19 logs every layer slot as full context; the 12 sliding layers
        # really hold 127 + 8,192 in-flight tokens + a block each.
        e = estimate(
            GPT_OSS, "vllm", "0.19.0", tp=1, serving={"max_model_len": 131072}, proposer=None
        )
        slots = 24 * 2 * 8 * 64 * 2  # 24 layer-slots x K and V x 8 heads x 64 x 2 B
        assert e.kv_tokens == int(e.kv_cache_gib * 2**30 // (slots * 16 // 24) // 12) // 2 * 16
        assert e.kv_capacity_tokens > 1.8 * e.kv_tokens
        assert "KV capacity" in memory_table(e) and "engine log" in memory_table(e)

    def test_vllm_021_logs_the_capacity(self) -> None:
        e = estimate(
            GPT_OSS, "vllm", "0.21.0", tp=1, serving={"max_model_len": 131072}, proposer=None
        )
        assert e.kv_tokens == e.kv_capacity_tokens

    def test_a_uniform_model_shows_one_figure(self) -> None:
        e = estimate("Qwen/Qwen3-8B", "vllm", "0.19.0", tp=1, proposer=None)
        assert e.kv_tokens == e.kv_capacity_tokens and e.kv_fixed_bytes_per_sequence == 0
        assert "KV capacity" not in memory_table(e)


class TestChunkedAttention:
    def test_llama_4_chunked_layers_stop_growing_at_the_chunk(self) -> None:
        e = estimate(
            "meta-llama/Llama-4-Scout-17B-16E-Instruct",
            "vllm",
            "0.32.0",
            proposer=None,
            serving={"max_model_len": 131072},
        )
        per_layer = 2 * 2 * 128 * 2  # 8 KV heads over TP 4, head_dim 128, bf16
        assert e.target_kv_bytes_per_token == 12 * per_layer
        # 8,192-token chunk + 2 x 8,192 in-flight tokens (async scheduling), whole blocks.
        assert e.kv_fixed_bytes_per_sequence == 36 * per_layer * (8192 + 2 * 8192)
