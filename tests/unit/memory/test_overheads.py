"""Collective buffers by TP size, interconnect and release, and SGLang's per-release defaults."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from orchestrator.memory.budget import engine_kv_gib, estimate_memory
from orchestrator.memory.estimate import MemoryEstimate
from orchestrator.memory.gpus import GIB, find_gpu
from tests.unit.memory.conftest import LLAMA_8B, info, make_profile

#: Qwen/Qwen2.5-72B(-Instruct) config.json: 80 layers, 64 / 8 heads, bf16, untied.
QWEN25_72B = info(
    "Qwen/Qwen2.5-72B-Instruct",
    architectures=("Qwen2ForCausalLM",),
    hidden_size=8192,
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
    intermediate_size=29568,
    vocab_size=152064,
    torch_dtype="bfloat16",
    tie_word_embeddings=False,
)
#: mistralai/Mixtral-8x7B-v0.1: 8 experts, top 2.
MIXTRAL = info(
    "mistralai/Mixtral-8x7B-v0.1",
    hidden_size=4096,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=32000,
    torch_dtype="bfloat16",
    num_experts=8,
    num_experts_per_tok=2,
)

#: Qwen/Qwen3-235B-A22B-FP8 config.json: 94 layers, 64 / 4 heads, 128 experts, top 8, FP8 blocks.
QWEN3_235B_FP8 = info(
    "Qwen/Qwen3-235B-A22B-FP8",
    architectures=("Qwen3MoeForCausalLM",),
    hidden_size=4096,
    num_hidden_layers=94,
    num_attention_heads=64,
    num_key_value_heads=4,
    head_dim=128,
    intermediate_size=12288,
    moe_intermediate_size=1536,
    num_experts=128,
    num_experts_per_tok=8,
    vocab_size=151936,
    torch_dtype="bfloat16",
    tie_word_embeddings=False,
    quant_method="fp8",
)


def _estimate(
    engine: str = "vllm",
    version: str = "0.32.0",
    *,
    gpu: str = "H100-80GB",
    tp: int = 1,
    target: Any = LLAMA_8B,
    **serving: Any,
) -> MemoryEstimate:
    profile = make_profile(
        engine={"name": engine, "version": version},
        proposer={"method": "none"},
        hardware={"gpu": gpu, "tensor_parallel_size": tp},
        serving={"max_model_len": 8192, "max_concurrency": 16, **serving},
    )
    e = estimate_memory(profile, target, None)
    assert e is not None
    return e


class TestVllmCollectives:
    def test_one_gpu_holds_no_collective_buffers(self) -> None:
        o = _estimate(tp=1).overheads
        assert (o.nccl_gib, o.collective_warmup_gib) == (0.0, 0.0)

    def test_nvlink_tp2_costs_about_2_gib_more_than_tp1(self) -> None:
        tp1, tp2 = _estimate(tp=1).overheads, _estimate(tp=2).overheads
        extra = tp2.outside_torch_gib - tp1.outside_torch_gib
        assert 2.5 < extra < 3.0  # 1.0 created with the groups + 1.82 during the profile run
        assert tp2.collective_warmup_gib > 1.5

    def test_groups_sit_outside_the_knob_from_0_11_inside_before(self) -> None:
        new, old = _estimate(tp=2), _estimate(version="0.10.2", tp=2)
        assert not new.overheads.nccl_in_budget and old.overheads.nccl_in_budget
        # the rendered knob leaves room for what vLLM holds outside it
        assert new.engine_fraction == pytest.approx(
            0.9 - new.overheads.nccl_gib / new.gpu_usable_gib, abs=0.001
        )
        graphs = old.overheads.cuda_graph_gib  # before 0.21 graphs are outside the knob too
        assert old.engine_fraction == pytest.approx(0.9 - graphs / old.gpu_usable_gib, abs=0.001)

    def test_moe_models_create_one_more_communicator(self) -> None:
        dense = _estimate(tp=2).overheads.nccl_gib
        moe = _estimate(tp=2, target=MIXTRAL).overheads.nccl_gib
        assert moe == pytest.approx(dense + 0.5)

    @pytest.mark.parametrize("version", ["0.9.2", "0.10.2"])
    def test_before_0_11_the_expert_group_holds_no_communicator(self, version: str) -> None:
        dense = _estimate(version=version, tp=4).overheads
        moe = _estimate(version=version, tp=4, target=MIXTRAL).overheads
        assert moe.nccl_gib == pytest.approx(dense.nccl_gib) == pytest.approx(1.0)
        assert moe.nccl_in_budget

    @pytest.mark.parametrize(("version", "expected"), [("0.12.0", 1.5), ("0.14.0", 1.0)])
    def test_dense_models_build_the_expert_group_until_0_14(
        self, version: str, expected: float
    ) -> None:
        assert _estimate(version=version, tp=2).overheads.nccl_gib == pytest.approx(expected)

    def test_pipeline_stages_alone_leave_the_expert_group_one_rank(self) -> None:
        profile = make_profile(
            proposer={"method": "none"},
            hardware={"gpu": "H100-80GB", "tensor_parallel_size": 1, "pipeline_parallel_size": 2},
            serving={"max_model_len": 8192, "max_concurrency": 16},
        )
        e = estimate_memory(profile, MIXTRAL, None)
        assert e is not None
        assert e.overheads.nccl_gib == pytest.approx(1.0)

    def test_qwen3_235b_fp8_tp4_matches_the_public_vllm_0_9_log(self) -> None:
        """vllm-project/vllm#21348 (vLLM 0.9.2 inferred, 4 x H100, defaults: utilization 0.9,
        1024 seqs): 'Available KV cache memory: 8.11 GiB', 178,880 tokens = 8.02 GiB on the
        smallest worker. At 0.9.2 the expert group has no communicator, so MoE pays what dense
        models pay."""
        e = _estimate(
            version="0.9.2",
            tp=4,
            target=QWEN3_235B_FP8,
            max_model_len=40960,
            max_concurrency=1024,
            gpu_memory_fraction=0.9,
        )
        kv = engine_kv_gib(e, 0.9)
        assert kv == pytest.approx(8.02, rel=0.10)
        # charging the 0.19-era expert-group communicator would miss by more than 10 %
        with_ep = replace(e.overheads, nccl_gib=e.overheads.nccl_gib + 0.5)
        assert engine_kv_gib(replace(e, overheads=with_ep), 0.9) < 0.9 * 8.02

    def test_pcie_cards_keep_collectives_in_host_memory(self) -> None:
        o = _estimate(gpu="L40S", tp=2).overheads
        assert o.nccl_gib == 0.0
        assert o.collective_warmup_gib < 0.2

    def test_tp4_warmup_at_least_tp2(self) -> None:
        tp2, tp4 = _estimate(tp=2).overheads, _estimate(tp=4).overheads
        assert tp4.collective_warmup_gib >= tp2.collective_warmup_gib

    def test_qwen25_72b_tp2_matches_the_public_vllm_0_19_log(self) -> None:
        """llm-d-planner's vLLM 0.19.0 run: 'Available KV cache memory: 3.04 GiB', 19,920 tokens
        (Qwen2.5-72B-Instruct, TP 2, H100, utilization 0.95, max_model_len 8192, 1024 seqs)."""
        e = _estimate(
            version="0.19.0",
            tp=2,
            target=QWEN25_72B,
            max_concurrency=1024,
            gpu_memory_fraction=0.95,
        )
        kv = engine_kv_gib(e, 0.95)
        assert kv == pytest.approx(3.04, rel=0.10)
        # without the collective buffers the prediction would be 1.5x the logged figure
        no_groups = replace(e.overheads, nccl_gib=0.0, collective_warmup_gib=0.0)
        assert engine_kv_gib(replace(e, overheads=no_groups), 0.95) > 1.5 * 3.04


class TestSglangCollectives:
    def test_nvlink_groups_shrink_the_base_the_knob_multiplies(self) -> None:
        one, four = _estimate("sglang", "0.5.23"), _estimate("sglang", "0.5.23", tp=4)
        assert four.overheads.before_load_gib - one.overheads.before_load_gib == pytest.approx(2.0)

    def test_pcie_groups_keep_the_small_nccl_figure(self) -> None:
        o = _estimate("sglang", "0.5.23", gpu="L40S", tp=2).overheads
        assert o.nccl_gib == pytest.approx(342 / 1024)


def _graph_bs(version: str, gpu: str, tp: int = 1, concurrency: int = 1024) -> int:
    gib = _estimate("sglang", version, gpu=gpu, tp=tp, max_concurrency=concurrency)
    return round(gib.overheads.cuda_graph_gib * GIB / (2 * 1024**2))


def _chunked(version: str, gpu: str) -> int:
    return _estimate("sglang", version, gpu=gpu).overheads.profiled_tokens


class TestSglangDefaultsByRelease:
    @pytest.mark.parametrize(
        ("version", "gpu", "tp", "expected"),
        [
            ("0.4.9", "H100-80GB", 1, 160),  # the capture list's largest
            ("0.4.9", "H200", 1, 256),  # above 90 GiB
            ("0.4.9", "RTX-4090", 4, 80),
            ("0.5.10", "RTX-4090", 1, 24),
            ("0.5.20", "RTX-4090", 1, 48),
            ("0.5.20", "RTX-4090", 4, 160),
            ("0.5.20", "H100-80GB", 1, 256),
            ("0.5.20", "H100-80GB", 4, 512),  # TP >= 4 doubles it
            ("0.5.23", "B200", 1, 512),
        ],
    )
    def test_largest_decode_graph(self, version: str, gpu: str, tp: int, expected: int) -> None:
        assert _graph_bs(version, gpu, tp) == expected

    def test_0_5_22_caps_the_graphs_at_max_running_requests(self) -> None:
        assert _graph_bs("0.5.23", "H100-80GB", tp=4, concurrency=64) == 64
        assert _graph_bs("0.5.20", "H100-80GB", tp=4, concurrency=64) == 512

    def test_explicit_cuda_graph_max_bs_wins(self) -> None:
        profile = make_profile(
            engine={"name": "sglang", "version": "0.5.23"},
            proposer={"method": "none"},
            sglang={"cuda_graph_max_bs": 8},
        )
        e = estimate_memory(profile, LLAMA_8B, None)
        assert e is not None
        assert e.overheads.cuda_graph_gib == pytest.approx(8 * 2 / 1024)

    @pytest.mark.parametrize(
        ("version", "gpu", "expected"),
        [
            ("0.4.9", "RTX-4090", 2048),
            ("0.4.9", "A100-40GB", 8192),  # one band from 35 to 160 GiB
            ("0.5.10", "A100-40GB", 4096),
            ("0.5.10", "RTX-4090", 2048),
            ("0.5.20", "RTX-4090", 4096),
            ("0.5.23", "B200", 16384),
        ],
    )
    def test_chunked_prefill(self, version: str, gpu: str, expected: int) -> None:
        assert _chunked(version, gpu) == expected


class TestGpuInterconnect:
    @pytest.mark.parametrize(
        ("gpu", "nvlink"),
        [("H100-80GB", True), ("A100-80GB", True), ("L40S", False), ("RTX-4090", False)],
    )
    def test_catalog_says_which_boards_have_nvlink(self, gpu: str, nvlink: bool) -> None:
        assert find_gpu(gpu).nvlink is nvlink
