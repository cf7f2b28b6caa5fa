"""Weight bytes of the target, of the draft or EAGLE head, and of MTP layers (whole model), and
how a replica's weights are spread over its GPUs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.formulas import (
    DEFAULT_DTYPE,
    DTYPE_BYTES,
    EXPERTS_ONLY_QUANT,
    ParamBreakdown,
    bytes_per_param,
    computed_weight_bytes,
    mtp_params,
    param_breakdown,
)
from orchestrator.profile.schema import Profile


@dataclass(frozen=True)
class WeightSharding:
    """Over how many GPUs each kind of weight is split (one pipeline stage). Plain tensor
    parallelism splits everything over tensor_parallel_size; attention data parallelism keeps a
    copy of the attention weights in each attention group."""

    attention: int
    dense: int
    """Dense MLPs, embeddings, the lm_head and norms."""
    experts: int

    @classmethod
    def tensor_parallel(cls, tp: int) -> WeightSharding:
        return cls(attention=tp, dense=tp, experts=tp)


def per_gpu_bytes(
    total: int, info: CheckpointInfo, profile: Profile, sharding: WeightSharding
) -> int:
    """Bytes of `total` (the whole model) one GPU holds under `sharding`: each kind's share of the
    parameters (from config.json) divided by its own split, over the pipeline stages. Without a
    parameter breakdown every kind is taken as split like the attention."""
    pp = profile.hardware.pipeline_parallel_size
    params = param_breakdown(info)
    uniform = sharding.attention == sharding.dense == sharding.experts
    if params is None or params.total == 0 or uniform:
        return math.ceil(total / (sharding.attention * pp))
    quant = profile.target.quantization or info.quant_method
    plain = DTYPE_BYTES.get(model_dtype(profile, info), 2.0)
    packed = bytes_per_param(model_dtype(profile, info), quant, info.quant_bits)
    experts_only = quant in EXPERTS_ONLY_QUANT
    attention = params.attention * (plain if experts_only else packed)
    experts = params.experts * packed
    dense_linear = params.dense_mlp * (plain if experts_only else packed)
    dense = (
        dense_linear + (params.embedding + params.lm_head + params.norms + params.vision) * plain
    )
    whole = attention + dense + experts
    weighted = attention / sharding.attention + dense / sharding.dense + experts / sharding.experts
    return math.ceil(total * weighted / whole / pp)


def model_dtype(profile: Profile, info: CheckpointInfo) -> str:
    """The dtype weights and (by default) the KV cache run in."""
    if profile.target.dtype != "auto":
        return profile.target.dtype
    dtype = (info.torch_dtype or DEFAULT_DTYPE).removeprefix("torch.")
    return dtype if dtype in DTYPE_BYTES and DTYPE_BYTES[dtype] >= 2 else DEFAULT_DTYPE


def target_weight_bytes(profile: Profile, info: CheckpointInfo) -> int | None:
    """Bytes of the target's main model, MTP layers excluded (they are draft weights).

    Exact from the checkpoint index when the profile loads it as stored; otherwise parameters
    (from `param_count` or computed from config.json) x bytes per dtype / quantization.
    """
    quant = profile.target.quantization
    as_stored = (quant is None or quant == info.quant_method) and (
        profile.target.dtype == "auto" or info.quant_method is not None
    )
    if as_stored and info.weight_bytes:
        return info.weight_bytes - stored_mtp_bytes(info)
    return _computed(info, model_dtype(profile, info), quant or info.quant_method)


def mtp_weight_bytes(profile: Profile, info: CheckpointInfo) -> int:
    """Bytes of the MTP layers vLLM loads for method mtp (0 when the config declares none)."""
    if info.mtp_layers <= 0:
        return 0
    if info.weight_bytes and profile.target.quantization in (None, info.quant_method):
        return stored_mtp_bytes(info)
    quant = profile.target.quantization or info.quant_method
    per_param = bytes_per_param(model_dtype(profile, info), quant, info.quant_bits)
    return math.ceil(mtp_params(info) * per_param)


def stored_mtp_bytes(info: CheckpointInfo) -> int:
    """The MTP layers' share of the checkpoint's exact bytes, at its average bytes per parameter."""
    mtp = mtp_params(info)
    params = param_breakdown(info)
    if mtp == 0 or params is None or not info.weight_bytes:
        return 0
    return math.ceil(info.weight_bytes * mtp / (params.total + mtp))


def draft_model_weight_bytes(profile: Profile, draft: CheckpointInfo) -> int | None:
    """A standalone draft LM: exact when known, else from its own config."""
    if draft.weight_bytes:
        return draft.weight_bytes - stored_mtp_bytes(draft)
    return _computed(draft, model_dtype(profile, draft), draft.quant_method)


def eagle_head_weight_bytes(profile: Profile, head: CheckpointInfo, target: CheckpointInfo) -> int:
    """An EAGLE / EAGLE-3 head: exact when known, else computed.

    Computed head: per layer an attention block whose q/k/v read 2H (EAGLE-3 concatenates the
    embedding and the fused hidden state), a dense MLP, plus the `fc` projection (3H -> H for
    EAGLE-3, 2H -> H for EAGLE-1) and, for EAGLE-3, its own lm_head over `draft_vocab_size`.
    Embeddings are shared with the target (Llama-3.1-8B's EAGLE-3 head: 0.425 B parameters,
    0.79 GiB, tests/unit/memory/test_formulas.py).
    """
    if head.weight_bytes:
        return head.weight_bytes
    h = head.hidden_size or target.hidden_size or 0
    heads = head.num_attention_heads or target.num_attention_heads or 0
    head_dim = head.resolved_head_dim or target.resolved_head_dim or 0
    kv_heads = head.kv_heads or heads
    eagle3 = head.eagle is None or head.eagle.generation == "eagle3"
    qkv_in = 2 * h if eagle3 else h
    attention = qkv_in * (heads + 2 * kv_heads) * head_dim + heads * head_dim * h
    mlp = 3 * h * (head.intermediate_size or target.intermediate_size or 4 * h)
    layers = head.num_hidden_layers or 1
    fc = (3 if eagle3 else 2) * h * h
    draft_vocab = (head.eagle.draft_vocab_size if head.eagle else None) or head.vocab_size or 0
    lm_head = draft_vocab * h if eagle3 else 0
    params = layers * (attention + mlp + 2 * h) + fc + lm_head
    return math.ceil(params * DTYPE_BYTES.get(model_dtype(profile, head), 2.0))


def _computed(info: CheckpointInfo, dtype: str, quant: str | None) -> int | None:
    """Parameters x bytes: `param_count` (exact, from safetensors headers) when known, split into
    linear and other parameters with the config's breakdown; the config's count otherwise."""
    params = param_breakdown(info)
    if info.param_count and params is not None and quant not in EXPERTS_ONLY_QUANT:
        other = params.total - params.linear
        linear = max(info.param_count - other - mtp_params(info), 0)
        params = ParamBreakdown(params.embedding, params.lm_head, linear, 0, 0, params.norms)
    elif info.param_count:
        params = ParamBreakdown(0, 0, info.param_count, 0, 0, 0)
    if params is None:
        return None
    return computed_weight_bytes(params, dtype, quant, info.quant_bits)
