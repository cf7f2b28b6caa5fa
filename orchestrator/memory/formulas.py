"""Pure memory formulas: parameter counts, weight bytes and KV-cache bytes per token.

Every constant names its source. The formulas are checked against published checkpoint sizes
(Llama-3.1-8B 14.96 GiB, gpt-oss MXFP4 sizes, DeepSeek-V3's 671B + 14B) in
tests/unit/memory/test_formulas.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from orchestrator.checkpoint.info import CheckpointInfo, RecurrentState
from orchestrator.checkpoint.layers import CHUNKED, DENSE, LINEAR, MOE, NONE, SLIDING

#: Bytes per element for unquantized weights and KV entries (torch dtypes).
DTYPE_BYTES: Final[Mapping[str, float]] = {
    "float32": 4.0,
    "float": 4.0,
    "bfloat16": 2.0,
    "float16": 2.0,
    "half": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
}
#: Dtype assumed when neither the profile nor config.json names one (every catalog model is bf16).
DEFAULT_DTYPE: Final = "bfloat16"

#: Bytes per quantized linear-layer parameter, scales included: fp8 and int8 are 1 (+ negligible
#: scales; aiconfigurator `fp8`, `sq`, https://github.com/ai-dynamo/aiconfigurator/blob/095f58a51c4ca8e61b66ec108d86f223f8d559ce/aic-core/src/aiconfigurator_core/sdk/common.py#L1219-L1233),
#: int4 AWQ/GPTQ g128 is 0.5 + fp16 scale and zero per 128 ≈ 0.52 (Kaito lists Qwen3-8B-AWQ at
#: 5.68 GiB, https://github.com/kaito-project/kaito/blob/056b8280b1a8debf644bc6f4399e913a1f9c7e70/presets/workspace/models/model_catalog.yaml#L440-L446, which this figure reproduces),
#: NVFP4 0.5 + fp8 scale per 16 = 0.5625 (aiconfigurator `nvfp4`, same lines), MXFP4 0.5 + e8m0
#: scale per 32 = 0.53125 (the gpt-oss weight sizes in orchestrator/checkpoint/catalog/models/gpt-oss.json match).
QUANT_BYTES_PER_PARAM: Final[Mapping[str, float]] = {
    "fp8": 1.0,
    "fbgemm_fp8": 1.0,
    "modelopt": 1.0,
    "ptpc_fp8": 1.0,
    "int8": 1.0,
    "w8a8": 1.0,
    "smoothquant": 1.0,
    "experts_int8": 1.0,
    "awq": 0.52,
    "awq_marlin": 0.52,
    "gptq": 0.52,
    "gptq_marlin": 0.52,
    "auto_round": 0.52,
    "bitsandbytes": 0.52,
    "nvfp4": 0.5625,
    "modelopt_fp4": 0.5625,
    "mxfp4": 0.53125,
}
#: Quantization methods that only quantize MoE experts (gpt-oss `modules_to_not_convert` keeps
#: attention, router, embeddings and lm_head in bf16).
EXPERTS_ONLY_QUANT: Final = frozenset({"mxfp4", "experts_int8"})
#: Group size scale overhead added to `quant_bits / 8` when a config states its bit width
#: (fp16 scale + zero per 128 weights = 4/128 bytes ≈ 0.03; QUANT_BYTES_PER_PARAM rounds int4 to
#: 0.52).
QUANT_SCALE_OVERHEAD: Final = 0.02

#: vLLM KV block size in tokens (CacheConfig.DEFAULT_BLOCK_SIZE = 16,
#: https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/config/cache.py#L72); sequences round up
#: to it.
KV_BLOCK_TOKENS: Final = 16


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one decoder layer by how parallelism places them."""

    attention: int
    """The token mixer: attention, or a linear-attention / Mamba mixer."""
    dense_mlp: int
    """A dense MLP, shared experts, the router and latent projections (split like dense)."""
    experts: int
    """Routed experts (split by expert parallelism)."""
    norms: int

    @property
    def total(self) -> int:
        return self.attention + self.dense_mlp + self.experts + self.norms


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters by kind, so quantization can apply to the kinds it covers."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    experts: int
    norms: int
    vision: int = 0
    """Vision tower and projector of a multimodal checkpoint (kept unquantized)."""
    layers: tuple[LayerParams, ...] = ()
    """Per decoder layer, in order (pipeline stages take contiguous runs of them); empty when
    the breakdown is not per layer."""

    @property
    def total(self) -> int:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_mlp
            + self.experts
            + self.norms
            + self.vision
        )

    @property
    def linear(self) -> int:
        """Parameters in linear layers (what weight quantization usually covers)."""
        return self.attention + self.dense_mlp + self.experts


def param_breakdown(
    info: CheckpointInfo, *, need_vocab: bool = True, guess_mlp: bool = False
) -> ParamBreakdown | None:
    """Parameters of the main model (MTP layers excluded; a multimodal checkpoint's vision tower
    included), counted layer by layer from config.json (`layer_params`).

    `V*H (x2 untied) + sum over layers (mixer + MLP + 2*H) + H`: a dense layer's MLP is `3*H*I`
    (`2*H*I` ungated); an MoE layer's `E*3*H*I_moe + H*E` plus shared experts (DeepSeek-V3 comes
    to 671B, as its README states; Llama-4-Maverick to 400B with MoE on every other layer).
    None when the config lacks hidden size, layers or heads, the width of an MLP it has (a
    trimmed config: a guessed width would be a wrong count), or the vocabulary (unless
    `need_vocab` is False: the embedding and lm_head then count 0, for shares of the layers;
    `guess_mlp` takes an unknown MLP width as 4 x hidden_size, for an estimate that says so).
    """
    h, layers, vocab = info.hidden_size, info.num_hidden_layers, info.vocab_size
    if not (h and layers and info.num_attention_heads) or (need_vocab and not vocab):
        return None
    if not guess_mlp and not mlp_widths_known(info):
        return None
    embedding = (vocab or 0) * h
    lm_head = 0 if info.tie_word_embeddings else (vocab or 0) * h
    per_layer = layer_params(info)
    return ParamBreakdown(
        embedding=embedding,
        lm_head=lm_head,
        attention=sum(p.attention for p in per_layer),
        dense_mlp=sum(p.dense_mlp for p in per_layer),
        experts=sum(p.experts for p in per_layer),
        norms=sum(p.norms for p in per_layer) + h,
        vision=info.vision_params or 0,
        layers=per_layer,
    )


def mlp_widths_known(info: CheckpointInfo) -> bool:
    """Whether config.json gives the width of every kind of MLP the model has."""
    kinds = set(info.mlp_types or (MOE if info.num_experts else DENSE,))
    if DENSE in kinds and not (info.dense_intermediate_size or info.intermediate_size):
        return False
    return MOE not in kinds or bool(info.moe_intermediate_size or info.intermediate_size)


def layer_params(info: CheckpointInfo) -> tuple[LayerParams, ...]:
    """Each decoder layer's parameters: its mixer from `layer_types` (attention, a linear /
    Mamba mixer, or none), its feed-forward block from `mlp_types` (dense, MoE, or none)."""
    h, layers = info.hidden_size or 0, info.num_hidden_layers or 0
    kinds = info.layer_types if info.layer_types and len(info.layer_types) == layers else None
    mlps = info.mlp_types if info.mlp_types and len(info.mlp_types) == layers else None
    if mlps is None:
        mlps = tuple(MOE if info.num_experts else DENSE for _ in range(layers))
        if info.num_experts and info.first_k_dense_replace:
            first = min(info.first_k_dense_replace, layers)
            mlps = (DENSE,) * first + mlps[first:]
    attention = attention_params(info)
    mixer = info.linear_mixer_params if info.linear_mixer_params is not None else attention
    dense = dense_mlp_params(info)
    moe_dense, moe_experts = moe_layer_split(info)
    found = []
    for i in range(layers):
        kind = kinds[i] if kinds else None
        mix = 0 if kind == NONE else mixer if kind == LINEAR else attention
        mlp = mlps[i]
        found.append(
            LayerParams(
                attention=mix,
                dense_mlp=dense if mlp == DENSE else moe_dense if mlp == MOE else 0,
                experts=moe_experts if mlp == MOE else 0,
                norms=2 * h,
            )
        )
    return tuple(found)


def attention_params(info: CheckpointInfo) -> int:
    """Parameters of one attention block (GQA/MHA, or MLA when kv_lora_rank is set)."""
    h = info.hidden_size or 0
    heads = info.num_attention_heads or 0
    if info.is_mla:
        nope, rope = info.qk_nope_head_dim or 0, info.qk_rope_head_dim or 0
        v_dim, kv_lora = info.v_head_dim or 0, info.kv_lora_rank or 0
        q_lora = info.q_lora_rank
        q_proj = (
            h * q_lora + q_lora * heads * (nope + rope) if q_lora else h * heads * (nope + rope)
        )
        return q_proj + h * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * h
    head_dim = info.resolved_head_dim or 0
    kv_heads = info.kv_heads or heads
    return h * heads * head_dim * 2 + 2 * h * kv_heads * head_dim


def dense_mlp_params(info: CheckpointInfo) -> int:
    """One dense layer's MLP: `intermediate_size_mlp` when the family sizes it apart."""
    h = info.hidden_size or 0
    width = info.dense_intermediate_size or info.intermediate_size or 4 * h
    return (3 if info.gated_mlp else 2) * h * width


def moe_layer_split(info: CheckpointInfo) -> tuple[int, int]:
    """(split like dense, routed experts) of one MoE layer. The router reads the hidden state;
    the shared experts work at the hidden width; routed experts at `moe_latent_size` when the
    layer is a latent MoE, whose hidden -> latent -> hidden projections are replicated linears
    (`NemotronHMoE.fc1_latent_proj` / `fc2_latent_proj`,
    https://github.com/vllm-project/vllm/blob/00b08dc44519a82cbdd9061d92d1226985094622/vllm/model_executor/models/nemotron_h.py)."""
    h, experts = info.hidden_size or 0, info.num_experts or 0
    mats = 3 if info.gated_mlp else 2
    expert_size = info.moe_intermediate_size or info.intermediate_size or 0
    width = info.moe_latent_size or h
    shared_width = info.shared_expert_intermediate_size
    if shared_width is None:
        shared_width = (info.num_shared_experts or 0) * expert_size
    shared = mats * h * shared_width
    latent = 2 * h * info.moe_latent_size if info.moe_latent_size else 0
    return h * experts + shared + latent, experts * mats * width * expert_size


def moe_layer_mlp_params(info: CheckpointInfo) -> int:
    """Experts, router and shared experts of one MoE layer."""
    return sum(moe_layer_split(info))


def mtp_params(info: CheckpointInfo) -> int:
    """Parameters vLLM loads for the MTP layers: per layer one decoder layer, the `eh_proj`
    (2H x H) and its norms, plus its own embedding and shared head (DeepSeek's checkpoint stores
    them per MTP layer: 11.6 B layer + 1.85 B embedding/head for DeepSeek-V3, whose README counts
    "14B of the Multi-Token Prediction (MTP) Module weights",
    https://github.com/deepseek-ai/DeepSeek-V3/blob/acbbd8938cde6914e00e6a1c43c673fceaba9418/README.md)."""
    if info.mtp_layers <= 0 or not info.hidden_size:
        return 0
    h, vocab = info.hidden_size, info.vocab_size or 0
    mlp = moe_layer_mlp_params(info) if info.num_experts else dense_mlp_params(info)
    per_layer = attention_params(info) + mlp + 2 * h * h + 4 * h + 2 * vocab * h
    return info.mtp_layers * per_layer


def bytes_per_param(dtype: str, quantization: str | None, quant_bits: float | None) -> float:
    """Bytes per quantized (linear-layer) parameter; the plain dtype's when not quantized."""
    if quantization is None:
        return DTYPE_BYTES.get(dtype, 2.0)
    if quantization in QUANT_BYTES_PER_PARAM:
        return QUANT_BYTES_PER_PARAM[quantization]
    if quant_bits:
        return quant_bits / 8 + QUANT_SCALE_OVERHEAD
    return DTYPE_BYTES.get(dtype, 2.0)


def computed_weight_bytes(
    params: ParamBreakdown, dtype: str, quantization: str | None, quant_bits: float | None
) -> int:
    """Weight bytes from parameters: quantized kinds at the quantized size, the rest at dtype."""
    plain = DTYPE_BYTES.get(dtype, 2.0)
    quant = bytes_per_param(dtype, quantization, quant_bits)
    if quantization in EXPERTS_ONLY_QUANT:
        quantized, rest = params.experts, params.total - params.experts
    else:
        quantized, rest = params.linear, params.total - params.linear
    return math.ceil(quantized * quant + rest * plain)


def kv_bytes_per_layer(info: CheckpointInfo, tensor_parallel: int, kv_dtype_bytes: float) -> int:
    """KV bytes one token costs in one attention layer on one GPU.

    GQA/MHA: `2 * ceil(kv_heads / TP) * head_dim * b` (K and V; heads replicated when TP exceeds
    them; vLLM kv_cache_interface FullAttentionSpec). MLA: `(kv_lora_rank + qk_rope_head_dim) * b`,
    one latent per token, not split by TP (vLLM MLAAttentionSpec,
    https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/kv_cache_interface.py#L686-L699).
    """
    if info.is_mla:
        return math.ceil(((info.kv_lora_rank or 0) + (info.qk_rope_head_dim or 0)) * kv_dtype_bytes)
    kv_heads = info.kv_heads or 1
    per_rank = math.ceil(kv_heads / tensor_parallel)
    return math.ceil(2 * per_rank * (info.resolved_head_dim or 0) * kv_dtype_bytes)


@dataclass(frozen=True)
class AttentionLayout:
    """How many layers keep per-token KV (full), a bounded span of it (sliding window, chunked
    attention), a fixed per-sequence state (linear attention, Mamba) or nothing (MLP-only)."""

    full: int
    sliding: int
    linear: int
    window: int | None
    chunked: int = 0
    chunk: int | None = None

    @property
    def attention_types(self) -> int:
        """Kinds of attention layer present (vLLM groups each kind's layers apart)."""
        return sum(1 for n in (self.full, self.sliding, self.chunked) if n)


def attention_layout(info: CheckpointInfo) -> AttentionLayout:
    """Layer kinds from `layer_types` as reading.py derives them from any config spelling; all
    full attention when the config states no pattern."""
    layers = info.num_hidden_layers or 0
    if not info.layer_types:
        return AttentionLayout(full=layers, sliding=0, linear=0, window=None)
    kinds = Counter(info.layer_types)
    sliding = kinds[SLIDING] if info.sliding_window else 0
    chunked = kinds[CHUNKED] if info.attention_chunk_size else 0
    return AttentionLayout(
        # A sliding or chunked layer without a window to bound it holds full context, and so is
        # counted a layer of a kind specdeploy does not know (never as free).
        full=len(info.layer_types) - sliding - chunked - kinds[LINEAR] - kinds[NONE],
        sliding=sliding,
        linear=kinds[LINEAR],
        window=info.sliding_window,
        chunked=chunked,
        chunk=info.attention_chunk_size,
    )


def round_up_to_block(tokens: int) -> int:
    """Tokens a sequence occupies once rounded up to whole KV blocks."""
    return math.ceil(tokens / KV_BLOCK_TOKENS) * KV_BLOCK_TOKENS


def sliding_tokens_held(window: int | None, seq_len: int, in_flight: int = 0) -> int:
    """Tokens a sliding-window layer holds for one sequence at most: the last `window - 1`
    tokens plus the tokens being computed (up to a prefill chunk), never more than the sequence,
    in whole blocks plus one (the window need not start on a block boundary). vLLM's
    `SlidingWindowSpec.max_memory_usage_bytes` (https://github.com/vllm-project/vllm/blob/
    v0.19.0/vllm/v1/kv_cache_interface.py#L255-L270; unchanged at v0.32.0 with
    `max_in_flight_tokens`)."""
    if window is None:
        return round_up_to_block(seq_len)
    tokens = min(window - 1 + max(in_flight, 1), seq_len)
    return round_up_to_block(tokens) + KV_BLOCK_TOKENS


def chunk_tokens_held(chunk: int | None, seq_len: int, in_flight: int = 0) -> int:
    """Tokens a chunked-attention layer holds for one sequence at most: its chunk plus the
    tokens being computed, never more than the sequence (vLLM `ChunkedLocalAttentionSpec`,
    https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/kv_cache_interface.py#L810-L837)."""
    if chunk is None:
        return round_up_to_block(seq_len)
    return round_up_to_block(min(chunk + max(in_flight, 1), seq_len))


def recurrent_state_bytes(
    state: RecurrentState, tensor_parallel: int, dtype_bytes: float, spec_tokens: int = 0
) -> int:
    """Bytes one linear-attention / Mamba layer keeps per sequence on one GPU: the convolution
    window (`conv_kernel - 1 + spec_tokens` positions of the TP-split channels) and the recurrent
    state (TP-split heads x its two dims), as vLLM's `MambaStateShapeCalculator` shapes them
    (https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/layers/mamba/mamba_utils.py#L195-L301).
    The recurrent state is kept in `state.state_dtype` when the config fixes one."""
    conv = math.ceil(state.conv_channels / tensor_parallel) * (state.conv_kernel - 1 + spec_tokens)
    heads = math.ceil(state.state_heads / tensor_parallel)
    temporal = heads * state.state_dims[0] * state.state_dims[1]
    temporal_bytes = DTYPE_BYTES.get(state.state_dtype or "", dtype_bytes)
    return math.ceil(conv * dtype_bytes + temporal * temporal_bytes)
