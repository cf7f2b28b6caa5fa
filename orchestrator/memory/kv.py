"""KV-cache bytes per token on the heaviest GPU, and how many tokens and sequences fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.formulas import (
    DTYPE_BYTES,
    KV_BLOCK_TOKENS,
    attention_layout,
    chunk_tokens_held,
    kv_bytes_per_layer,
    recurrent_state_bytes,
    round_up_to_block,
    sliding_tokens_held,
)
from orchestrator.memory.gpus import GIB
from orchestrator.memory.weights import model_dtype
from orchestrator.profile.schema import Profile


@dataclass(frozen=True)
class TargetKv:
    """The target's KV cost on one GPU: per token (full attention) and per sequence (windows,
    chunks and recurrent state, which stop growing), with the layer counts behind them."""

    bytes_per_token: int
    fixed: int
    """Bytes per sequence that do not grow with it: sliding-window and chunked-attention layers at
    their bound, and the recurrent state of linear-attention / Mamba layers."""
    notes: tuple[str, ...]
    per_layer_bytes: int = 0
    """KV bytes one token costs in one attention layer."""
    full_layers: int = 0
    sliding_layers: int = 0
    chunked_layers: int = 0
    linear_layers: int = 0


@dataclass(frozen=True)
class Capacity:
    tokens: int
    """Tokens of max_model_len sequences the cache holds: whole 16-token blocks when every layer
    grows with the sequence, else the (fractional) sequences that fit x max_model_len."""
    sequences: int
    """Sequences of max_model_len that fit at once."""


@dataclass(frozen=True)
class StateSlots:
    """How much recurrent state a sequence holds with the profile's speculation."""

    extra_conv_positions: int = 0
    """Convolution positions kept besides `conv_kernel - 1` (one per speculative token)."""
    copies: int = 1
    """Copies of the state per sequence (the engine keeps one per speculative position)."""


@dataclass(frozen=True)
class KvPool:
    """The KV cache of one GPU as an engine lays it out: what its logged token figure needs."""

    kv_bytes: float
    per_layer_bytes: int
    full_layers: int
    """Full-attention layers, the draft's included when they have the target's shape."""
    sliding_layers: int
    chunked_layers: int
    linear_layers: int
    capacity_tokens: int
    """Tokens of max_model_len sequences that fit (`Capacity.tokens`)."""


def pool(kv_gib: float, layout: TargetKv, draft_bytes_per_token: int, cap: Capacity) -> KvPool:
    """The pool `layout` and the draft's layers make of `kv_gib` (draft layers count as full
    layers when they cost what a target layer does, as EAGLE and MTP layers do)."""
    per_layer = layout.per_layer_bytes
    draft_layers = (
        draft_bytes_per_token // per_layer
        if per_layer and draft_bytes_per_token % per_layer == 0
        else 0
    )
    return KvPool(
        kv_bytes=max(kv_gib, 0.0) * GIB,
        per_layer_bytes=per_layer,
        full_layers=layout.full_layers + draft_layers,
        sliding_layers=layout.sliding_layers,
        chunked_layers=layout.chunked_layers,
        linear_layers=layout.linear_layers,
        capacity_tokens=cap.tokens,
    )


def kv_dtype_bytes(profile: Profile, info: CheckpointInfo) -> float:
    """Bytes per KV element: serving.kv_cache_dtype, or the model dtype for "auto" (vLLM
    CacheConfig: auto = model dtype; a weight-quantized checkpoint keeps a bf16 KV cache)."""
    dtype = profile.serving.kv_cache_dtype
    if dtype == "auto":
        return DTYPE_BYTES.get(model_dtype(profile, info), 2.0)
    return DTYPE_BYTES[dtype]


def target_layout(
    profile: Profile,
    target: CheckpointInfo,
    *,
    seq_len: int | None = None,
    in_flight: int = 0,
    state: StateSlots = StateSlots(),
) -> TargetKv:
    """Per-GPU KV of the target's own layers (PP stages hold ceil(layers / PP) layers each), for
    sequences of `seq_len` tokens (serving.max_model_len when None). `in_flight` is the tokens
    the engine may have scheduled and not yet settled (sliding and chunked layers hold them
    besides their window); `state` how much recurrent state speculation adds."""
    # Heads split over one attention group (all of TP without attention data parallelism).
    tp, pp = (
        profile.hardware.attention_tensor_parallel_size,
        profile.hardware.pipeline_parallel_size,
    )
    layout = attention_layout(target)
    per_layer = kv_bytes_per_layer(target, tp, kv_dtype_bytes(profile, target))
    full, sliding, chunked, linear = (
        math.ceil(n / pp) for n in (layout.full, layout.sliding, layout.chunked, layout.linear)
    )
    seq_len = seq_len or profile.serving.max_model_len
    held = sliding_tokens_held(layout.window, seq_len, in_flight)
    chunk_held = chunk_tokens_held(layout.chunk, seq_len, in_flight)
    fixed = sliding * per_layer * held + chunked * per_layer * chunk_held
    notes: list[str] = []
    if layout.sliding:
        notes.append(f"{layout.sliding} sliding-window layers hold at most {held:,} tokens each")
    if layout.chunked:
        notes.append(
            f"{layout.chunked} chunked-attention layers hold at most {chunk_held:,} tokens each"
        )
    if linear:
        shape = target.recurrent_state
        if shape is None:
            notes.append(
                f"{layout.linear} linear-attention/Mamba layers keep a per-sequence state whose "
                "shape config.json does not give: not counted"
            )
        else:
            per_seq = state.copies * recurrent_state_bytes(
                shape, tp, model_dtype_bytes(profile, target), state.extra_conv_positions
            )
            fixed += linear * per_seq
            copies = f" ({state.copies} copies with speculation)" if state.copies > 1 else ""
            notes.append(
                f"{layout.linear} {shape.kind.replace('_', ' ')} layers keep "
                f"{per_seq:,} B of state per sequence each{copies}"
            )
    return TargetKv(
        bytes_per_token=full * per_layer,
        fixed=fixed,
        notes=tuple(notes),
        per_layer_bytes=per_layer,
        full_layers=full,
        sliding_layers=sliding,
        chunked_layers=chunked,
        linear_layers=linear,
    )


def model_dtype_bytes(profile: Profile, info: CheckpointInfo) -> float:
    """Bytes per element of the model dtype (recurrent state follows it, not the KV dtype)."""
    return DTYPE_BYTES.get(model_dtype(profile, info), 2.0)


@dataclass(frozen=True)
class DraftKv:
    """The proposer's KV cost per token on the heaviest GPU, and how it was worked out."""

    bytes_per_token: int
    notes: tuple[str, ...] = ()


def draft_kv(
    profile: Profile, target: CheckpointInfo, draft: CheckpointInfo | None, draft_tp: int | None
) -> DraftKv:
    """Draft KV per token on the heaviest GPU. Engines allocate the draft's layers in the same
    pool with the same number of blocks as the target's (vLLM: the draft's attention layers join
    the KV cache spec, https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/worker/
    gpu_model_runner.py `get_kv_cache_spec`), so a token costs target + draft layers; n-gram has
    none. MTP layers are attention layers of the target's kind. An EAGLE head whose config does
    not give its attention shape is counted as one decoder layer of the target's shape (what
    EAGLE heads are), never as free."""
    method = profile.proposer.method
    if method in ("none", "ngram"):
        return DraftKv(0)
    dtype = kv_dtype_bytes(profile, target)
    tp = profile.hardware.attention_tensor_parallel_size
    if method == "mtp":
        return DraftKv(target.mtp_layers * kv_bytes_per_layer(target, tp, dtype))
    head = method in ("eagle", "eagle3")
    if head and (draft is None or not _has_attention_shape(draft)):
        per_layer = kv_bytes_per_layer(target, draft_tp or tp, dtype)
        name = draft.ref if draft is not None else repr(profile.proposer.model)
        note = (
            f"the attention shape of EAGLE head {name} is unknown: its KV is counted as one "
            f"decoder layer of the target's shape ({per_layer:,} B/token)"
        )
        return DraftKv(per_layer, (note,))
    if draft is None or draft_tp is None:
        return DraftKv(
            0,
            (f"proposer.model {profile.proposer.model!r} was not resolved: draft KV not counted",),
        )
    shape = attention_layout(draft)
    layers = shape.full + shape.sliding + shape.chunked
    per_layer = kv_bytes_per_layer(draft, draft_tp, dtype)
    return DraftKv(max(layers, 1) * per_layer)


def _has_attention_shape(info: CheckpointInfo) -> bool:
    return bool(info.kv_heads and info.resolved_head_dim) or info.is_mla


def sequence_bytes(bytes_per_token: int, fixed: int, seq_len: int) -> int:
    """KV bytes one sequence of `seq_len` tokens holds (rounded up to whole blocks)."""
    return bytes_per_token * round_up_to_block(seq_len) + fixed


def capacity(kv_gib: float, bytes_per_token: int, fixed: int, seq_len: int) -> Capacity:
    """Tokens and max_model_len sequences that fit in `kv_gib` (none when it is negative)."""
    kv_bytes = kv_gib * GIB
    if kv_bytes <= 0 or bytes_per_token <= 0:
        return Capacity(tokens=0, sequences=0)
    per_seq = sequence_bytes(bytes_per_token, fixed, seq_len)
    sequences = int(kv_bytes // per_seq)
    if fixed:
        tokens = int(kv_bytes * seq_len // per_seq)
    else:
        tokens = int(kv_bytes // (bytes_per_token * KV_BLOCK_TOKENS)) * KV_BLOCK_TOKENS
    return Capacity(tokens=tokens, sequences=sequences)
