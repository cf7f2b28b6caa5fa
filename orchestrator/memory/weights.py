"""Weight bytes of the target, of the draft or EAGLE head, and of MTP layers (whole model), and
how a replica's weights are spread over its GPUs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.formulas import (
    DEFAULT_DTYPE,
    DTYPE_BYTES,
    EXPERTS_ONLY_QUANT,
    ParamBreakdown,
    attention_params,
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


#: How far the bytes the config's layers add up to may be from the checkpoint's size before the
#: per-layer shares are not trusted (quantization estimates stay well inside a factor of 2).
_STRUCTURE_AGREES: Final = (0.5, 2.0)


@dataclass(frozen=True)
class RankWeights:
    """The weights the heaviest GPU of one replica holds, and where that GPU sits."""

    bytes: int
    stage: int
    """The pipeline stage of the heaviest GPU (0 without pipeline parallelism)."""
    note: str | None = None
    """How the share was estimated when the config does not give every layer's structure."""


def heaviest_rank_weights(
    total: int, info: CheckpointInfo, profile: Profile, sharding: WeightSharding
) -> RankWeights:
    """Bytes of `total` (the whole model) the heaviest GPU holds under `sharding`, placed layer by
    layer: each pipeline stage takes a contiguous run of decoder layers (`pipeline_stages`), the
    first also the embedding and vision tower, the last the lm_head; within a stage each kind of
    parameter is divided by its own split (attention by the attention group, dense MLPs by TP,
    routed experts by EP). Each kind is weighed at its bytes per parameter (quantization applies to
    the kinds it covers), and the shares are scaled to `total`, so an exact checkpoint size stays
    exact. A config that gives the attention but not the rest of the layers (a trimmed catalog
    config) keeps the attention whole and splits the rest by the smaller of the other splits."""
    pp = profile.hardware.pipeline_parallel_size
    params = param_breakdown(info, need_vocab=False)
    uniform = sharding.attention == sharding.dense == sharding.experts
    if uniform and pp == 1:
        return RankWeights(math.ceil(total / sharding.attention), 0)
    quant = profile.target.quantization or info.quant_method
    plain = DTYPE_BYTES.get(model_dtype(profile, info), 2.0)
    packed = bytes_per_param(model_dtype(profile, info), quant, info.quant_bits)
    experts_only = quant in EXPERTS_ONLY_QUANT
    linear = plain if experts_only else packed
    if params is None or params.total == 0 or not params.layers:
        return _without_layers(total, info, sharding, linear, pp)
    vocab_known = info.vocab_size is not None
    stages = pipeline_stages(len(params.layers), pp)
    weighted: list[float] = []
    for index, (first, last) in enumerate(stages):
        layers = params.layers[first:last]
        stage = sum(
            p.attention * linear / sharding.attention
            + p.dense_mlp * linear / sharding.dense
            + p.experts * packed / sharding.experts
            + p.norms * plain / sharding.dense
            for p in layers
        )
        if index == 0:
            stage += (params.embedding + params.vision) * plain / sharding.dense
        if index == len(stages) - 1:
            stage += params.lm_head * plain / sharding.dense
        weighted.append(stage)
    whole = (
        params.attention * linear
        + params.dense_mlp * linear
        + params.experts * packed
        + (params.embedding + params.lm_head + params.norms + params.vision) * plain
    )
    if not _STRUCTURE_AGREES[0] <= whole / total <= _STRUCTURE_AGREES[1]:
        # The layers the config describes are not the checkpoint (a trimmed config without its
        # MoE keys): their shares would place the wrong weights.
        return _without_layers(total, info, sharding, linear, pp)
    heaviest = max(range(len(weighted)), key=lambda i: weighted[i])
    note = (
        None
        if vocab_known
        else f"config.json of {info.ref!r} gives no vocab_size: the embedding and lm_head are "
        "spread like the layers"
    )
    return RankWeights(math.ceil(total * weighted[heaviest] / whole), heaviest, note)


def _without_layers(
    total: int, info: CheckpointInfo, sharding: WeightSharding, linear: float, pp: int
) -> RankWeights:
    h, layers, heads = info.hidden_size, info.num_hidden_layers, info.num_attention_heads
    rest_split = min(sharding.dense, sharding.experts)
    if not (h and layers and heads) or sharding.attention >= rest_split:
        return RankWeights(math.ceil(total / (min(sharding.attention, rest_split) * pp)), 0)
    attention = min(layers * attention_params(info) * linear, total)
    weighted = attention / sharding.attention + (total - attention) / rest_split
    note = (
        f"config.json of {info.ref!r} does not describe all of its layers (they add up to "
        "far from the checkpoint's size): "
        f"the attention ({attention / 2**30:.1f} GiB in all) is counted whole on each attention "
        f"group and the rest split {rest_split} ways"
    )
    return RankWeights(math.ceil(weighted / pp), 0, note)


def pipeline_stages(layers: int, pp: int) -> tuple[tuple[int, int], ...]:
    """[first, last) decoder layers of each pipeline stage, as vLLM partitions them: equal runs,
    the remainder going to the stages before the last (`get_pp_indices`,
    https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/distributed/utils.py)."""
    if pp <= 1 or layers < pp:
        return ((0, layers),)
    sizes = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        sizes[-i] += 1
    bounds, start = [], 0
    for size in sizes:
        bounds.append((start, start + size))
        start += size
    return tuple(bounds)


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
    elif params is None and info.published_param_count:
        # The config cannot be counted (a trimmed catalog config): the publisher's total, all of
        # it taken as linear (quantized like the linears), is what is known.
        params = ParamBreakdown(0, 0, info.published_param_count, 0, 0, 0)
    elif params is None:
        # Nothing better is known than the layers with a guessed MLP width (budget.py says so).
        params = param_breakdown(info, guess_mlp=True)
    if params is None:
        return None
    return computed_weight_bytes(params, dtype, quant, info.quant_bits)
