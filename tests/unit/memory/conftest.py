"""CheckpointInfo fixtures built by hand from real configs (shared/reference/catalog_configs.json)."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.checkpoint.info import CheckpointInfo, EagleHeadInfo
from orchestrator.profile.schema import Profile


def info(ref: str, **fields: Any) -> CheckpointInfo:
    return CheckpointInfo(ref=ref, source="catalog", location="test", **fields)


#: meta-llama/Llama-3.1-8B-Instruct config.json (GQA 32 q / 8 kv heads, head_dim 128, untied).
LLAMA_8B = info(
    "meta-llama/Llama-3.1-8B-Instruct",
    architectures=("LlamaForCausalLM",),
    hidden_size=4096,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=128256,
    torch_dtype="bfloat16",
    tie_word_embeddings=False,
)
#: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B (one layer, draft vocab 32000).
EAGLE3_8B = info(
    "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
    hidden_size=4096,
    num_hidden_layers=1,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=128256,
    torch_dtype="bfloat16",
    eagle=EagleHeadInfo(
        generation="eagle3",
        format="raw",
        hidden_size=4096,
        target_hidden_size=4096,
        vocab_size=128256,
        draft_vocab_size=32000,
        has_d2t=True,
        aux_layer_ids=None,
    ),
)
#: meta-llama/Llama-3.2-1B-Instruct (tied embeddings, head_dim 64).
LLAMA_1B = info(
    "meta-llama/Llama-3.2-1B-Instruct",
    hidden_size=2048,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    intermediate_size=8192,
    vocab_size=128256,
    torch_dtype="bfloat16",
    tie_word_embeddings=True,
)
#: deepseek-ai/DeepSeek-V3 (MLA, 256 routed experts, FP8 block weights, one MTP layer).
DEEPSEEK_V3 = info(
    "deepseek-ai/DeepSeek-V3",
    architectures=("DeepseekV3ForCausalLM",),
    hidden_size=7168,
    num_hidden_layers=61,
    num_attention_heads=128,
    num_key_value_heads=128,
    intermediate_size=18432,
    vocab_size=129280,
    torch_dtype="bfloat16",
    tie_word_embeddings=False,
    num_experts=256,
    num_experts_per_tok=8,
    moe_intermediate_size=2048,
    num_shared_experts=1,
    first_k_dense_replace=3,
    kv_lora_rank=512,
    q_lora_rank=1536,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
    mtp_layers=1,
    quant_method="fp8",
)
#: openai/gpt-oss-20b (alternating sliding 128 / full attention, MXFP4 experts).
GPT_OSS_20B = info(
    "openai/gpt-oss-20b",
    architectures=("GptOssForCausalLM",),
    hidden_size=2880,
    num_hidden_layers=24,
    num_attention_heads=64,
    num_key_value_heads=8,
    head_dim=64,
    intermediate_size=2880,
    vocab_size=201088,
    tie_word_embeddings=False,
    num_experts=32,
    num_experts_per_tok=4,
    sliding_window=128,
    layer_types=("sliding_attention", "full_attention") * 12,
    quant_method="mxfp4",
)
#: Qwen/Qwen3-8B loaded as an AWQ int4 checkpoint (quantised model).
QWEN3_8B_AWQ = info(
    "Qwen/Qwen3-8B-AWQ",
    architectures=("Qwen3ForCausalLM",),
    hidden_size=4096,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=12288,
    vocab_size=151936,
    torch_dtype="float16",
    tie_word_embeddings=False,
    quant_method="awq",
    quant_bits=4,
)


def make_profile(**sections: dict[str, Any]) -> Profile:
    """A valid profile; keyword arguments replace whole top-level sections."""
    data: dict[str, Any] = {
        "apiVersion": "specdeploy/v1",
        "kind": "SpeculativeDeployment",
        "metadata": {"name": "test"},
        "engine": {"name": "vllm", "version": "0.32.0"},
        "target": {"model": "meta-llama/Llama-3.1-8B-Instruct"},
        "proposer": {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"},
        "hardware": {"gpu": "H100-80GB"},
        "serving": {"max_model_len": 32768, "max_concurrency": 16},
    }
    data.update(sections)
    return Profile.model_validate(data)


@pytest.fixture
def profile() -> Profile:
    return make_profile()
