"""Parameters counted layer by layer from the config, and placed per rank from the layout
(issue 23 §1): interleaved and dense-first MoE, latent MoE, shared experts, and attention data
parallelism / expert parallelism / pipeline stages."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.checkpoint.catalog import catalog_info
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.checkpoint.layers import DENSE, MOE, NO_MLP, mlp_kinds
from orchestrator.engines import ENGINES
from orchestrator.memory.formulas import param_breakdown
from orchestrator.memory.gpus import GIB
from orchestrator.memory.weights import (
    WeightSharding,
    heaviest_rank_weights,
    pipeline_stages,
    target_weight_bytes,
)
from tests.unit.memory.conftest import make_profile


def _catalog(model: str) -> CheckpointInfo:
    info = catalog_info(model)
    assert info is not None
    return info


class TestWhereTheExpertsAre:
    def test_llama4_maverick_puts_experts_on_every_other_layer(self) -> None:
        info = _catalog("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
        assert info.mlp_types is not None
        assert Counter(info.mlp_types) == {DENSE: 24, MOE: 24}
        assert info.mlp_types[:2] == (DENSE, MOE)
        params = param_breakdown(info)
        assert params is not None
        # The model card's 400B total (17B active, 128 experts).
        assert params.total == pytest.approx(400e9, rel=0.01)

    def test_llama4_scout_has_experts_on_every_layer_and_a_shared_expert(self) -> None:
        info = _catalog("meta-llama/Llama-4-Scout-17B-16E-Instruct")
        assert info.mlp_types == (MOE,) * 48
        assert info.shared_expert_intermediate_size == 8192
        params = param_breakdown(info)
        assert params is not None
        assert params.total == pytest.approx(109e9, rel=0.02)  # model card: 109B total

    def test_dense_first_layers_then_moe_every_freq_th(self) -> None:
        scope = {"n_routed_experts": 8, "first_k_dense_replace": 2, "moe_layer_freq": 2}
        assert mlp_kinds(scope, 6) == (DENSE, DENSE, MOE, DENSE, MOE, DENSE)

    def test_qwen_moe_sparse_step_and_mlp_only_layers(self) -> None:
        scope = {"num_experts": 8, "decoder_sparse_step": 2, "mlp_only_layers": [3]}
        assert mlp_kinds(scope, 6) == (DENSE, MOE, DENSE, DENSE, DENSE, MOE)

    def test_a_dense_model_has_no_mlp_pattern(self) -> None:
        assert mlp_kinds({"hidden_size": 8}, 4) is None

    def test_nemotron_h_pattern_names_each_layers_block(self) -> None:
        assert mlp_kinds({"hybrid_override_pattern": "M*E-"}, 4) == (NO_MLP, NO_MLP, MOE, DENSE)


class TestLatentMoe:
    def test_nemotron_3_super_experts_work_in_the_latent_width(self) -> None:
        info = _catalog("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
        assert info.moe_latent_size == 1024 and not info.gated_mlp
        params = param_breakdown(info)
        assert params is not None
        moe_layers = Counter(info.mlp_types or ())[MOE]
        # 512 experts x (up + down) x latent 1024 x 2688 per MoE layer
        assert params.experts == moe_layers * 512 * 2 * 1024 * 2688
        assert params.total == pytest.approx(120.6e9, rel=0.02)  # model card: 120B total

    def test_nemotron_3_nano_mlps_have_two_matrices(self) -> None:
        info = _catalog("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
        params = param_breakdown(info)
        assert params is not None
        assert params.total == pytest.approx(31.6e9, rel=0.02)  # model card: 31.6B total


class TestPlacement:
    def test_attention_dp_replicates_attention_and_ep_splits_experts(self) -> None:
        info = _catalog("deepseek-ai/DeepSeek-R1")
        profile = make_profile(
            engine={"name": "trtllm", "version": "1.2.0"},
            target={"model": "deepseek-ai/DeepSeek-R1"},
            proposer={"method": "none"},
            hardware={
                "gpu": "H200",
                "tensor_parallel_size": 8,
                "attention_data_parallel_size": 8,
                "expert_parallel": True,
            },
        )
        total = target_weight_bytes(profile, info)
        assert total is not None
        sharding = ENGINES["trtllm"].memory.weight_sharding(profile)
        placed = heaviest_rank_weights(total, info, profile, sharding)
        params = param_breakdown(info)
        assert params is not None
        # fp8 linears: attention whole on every GPU, the rest over 8 (bf16 embedding, lm_head)
        whole_attention = params.attention
        rest = (params.dense_mlp + params.experts) / 8 + (params.embedding + params.lm_head) * 2 / 8
        assert placed.bytes / GIB == pytest.approx((whole_attention + rest) / GIB, rel=0.01)
        assert 80 < placed.bytes / GIB < 95  # not the whole 641 GiB checkpoint

    def test_a_trimmed_config_keeps_attention_whole_and_splits_the_rest(self) -> None:
        # DeepSeek-R1-0528's catalog config has no MoE keys: its layers do not add up to the
        # checkpoint, so only the attention it describes is kept whole.
        info = _catalog("deepseek-ai/DeepSeek-R1-0528")
        profile = make_profile(
            target={"model": "deepseek-ai/DeepSeek-R1-0528"},
            hardware={"gpu": "H200", "tensor_parallel_size": 8, "attention_data_parallel_size": 8},
        )
        sharding = WeightSharding(attention=1, dense=8, experts=8)
        assert info.weight_bytes is not None
        placed = heaviest_rank_weights(info.weight_bytes, info, profile, sharding)
        assert placed.note is not None and "attention" in placed.note
        assert info.weight_bytes / 8 < placed.bytes < info.weight_bytes / 4

    def test_pipeline_stages_split_layers_as_vllm_does(self) -> None:
        assert pipeline_stages(61, 4) == ((0, 15), (15, 30), (30, 46), (46, 61))
        assert pipeline_stages(32, 2) == ((0, 16), (16, 32))
        assert pipeline_stages(5, 1) == ((0, 5),)

    def test_the_heaviest_stage_is_reported(self) -> None:
        info = _catalog("meta-llama/Llama-3.1-8B-Instruct")
        profile = make_profile(hardware={"gpu": "H100-80GB", "pipeline_parallel_size": 4})
        total = target_weight_bytes(profile, info)
        assert total is not None
        placed = heaviest_rank_weights(total, info, profile, WeightSharding.tensor_parallel(1))
        # 8 layers a stage; the embedding and the lm_head are the same size: stage 0 or 3
        assert placed.stage in (0, 3)
        assert total / 4 < placed.bytes < total / 3


def test_mtp_layers_are_placed_like_the_targets_layers() -> None:
    from orchestrator.memory.budget import estimate_memory
    from orchestrator.memory.weights import mtp_weight_bytes

    info = _catalog("deepseek-ai/DeepSeek-R1")

    def draft_gib(groups: int) -> float:
        profile = make_profile(
            engine={"name": "trtllm", "version": "1.2.0"},
            target={"model": "deepseek-ai/DeepSeek-R1"},
            proposer={"method": "mtp", "num_speculative_tokens": 1},
            hardware={
                "gpu": "H200",
                "tensor_parallel_size": 8,
                "attention_data_parallel_size": groups,
                "expert_parallel": groups > 1,
            },
            serving={"max_model_len": 4096, "max_concurrency": 8},
        )
        estimate = estimate_memory(profile, info, None)
        assert estimate is not None
        return estimate.draft_weights_gib

    whole = mtp_weight_bytes(make_profile(target={"model": "deepseek-ai/DeepSeek-R1"}), info) / GIB
    assert draft_gib(1) == pytest.approx(whole / 8, rel=0.01)
    # attention DP: the MTP layer's attention is whole on each GPU, its experts split 8 ways
    assert whole / 8 < draft_gib(8) < whole / 4
