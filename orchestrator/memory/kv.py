"""KV-cache bytes per token on the heaviest GPU, and how many tokens and sequences fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.memory.formulas import (
    DTYPE_BYTES,
    KV_BLOCK_TOKENS,
    attention_layout,
    kv_bytes_per_layer,
    round_up_to_block,
    sliding_tokens_held,
)
from orchestrator.memory.gpus import GIB
from orchestrator.memory.weights import model_dtype
from orchestrator.profile.schema import Profile


@dataclass(frozen=True)
class TargetKv:
    """The target's KV cost on one GPU: per token (full attention) and per sequence (windows)."""

    bytes_per_token: int
    fixed: int
    """Bytes per sequence of sliding-window layers at max_model_len (they stop growing)."""
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Capacity:
    tokens: int
    """KV tokens the cache holds, counted as vLLM logs "GPU KV cache size"."""
    sequences: int
    """Sequences of max_model_len that fit at once."""


def kv_dtype_bytes(profile: Profile, info: CheckpointInfo) -> float:
    """Bytes per KV element: serving.kv_cache_dtype, or the model dtype for "auto" (vLLM
    CacheConfig: auto = model dtype; a weight-quantized checkpoint keeps a bf16 KV cache)."""
    dtype = profile.serving.kv_cache_dtype
    if dtype == "auto":
        return DTYPE_BYTES.get(model_dtype(profile, info), 2.0)
    return DTYPE_BYTES[dtype]


def target_layout(
    profile: Profile, target: CheckpointInfo, *, seq_len: int | None = None
) -> TargetKv:
    """Per-GPU KV of the target's own layers (PP stages hold ceil(layers / PP) layers each), for
    sequences of `seq_len` tokens (serving.max_model_len when None)."""
    # Heads split over one attention group (all of TP without attention data parallelism).
    tp, pp = (
        profile.hardware.attention_tensor_parallel_size,
        profile.hardware.pipeline_parallel_size,
    )
    layout = attention_layout(target)
    per_layer = kv_bytes_per_layer(target, tp, kv_dtype_bytes(profile, target))
    full = math.ceil(layout.full / pp)
    sliding = math.ceil(layout.sliding / pp)
    held = sliding_tokens_held(layout.window, seq_len or profile.serving.max_model_len)
    notes: list[str] = []
    if layout.linear:
        notes.append(
            f"{layout.linear} linear-attention layers keep a constant per-sequence state that "
            "is not counted"
        )
    if layout.sliding:
        notes.append(f"{layout.sliding} sliding-window layers hold at most {held} tokens each")
    return TargetKv(full * per_layer, sliding * per_layer * held, tuple(notes))


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
    layers = attention_layout(draft).full + attention_layout(draft).sliding
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
