"""The per-GPU memory budget: weights, KV cache and overheads, with and without speculation.

`estimate_memory` itemises what the heaviest GPU holds; `engine_memory_fraction` translates the
profile's `serving.gpu_memory_fraction` into the engine's own knob (through the engine's memory
model, `Engine.memory`) so the budget is the same whichever engine serves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.engines import ENGINES
from orchestrator.engines.names import EngineName
from orchestrator.memory import kv
from orchestrator.memory.gpus import GIB, Gpu, find_gpu
from orchestrator.memory.overheads import Overheads, engine_overheads
from orchestrator.memory.suggest import smallest_changes
from orchestrator.memory.weights import (
    draft_model_weight_bytes,
    eagle_head_weight_bytes,
    mtp_weight_bytes,
    per_gpu_bytes,
    target_weight_bytes,
)
from orchestrator.profile.schema import Profile, SpecMethod


@dataclass(frozen=True)
class Suggestion:
    """One profile change and what the budget looks like after it."""

    change: str
    max_concurrency: int
    kv_cache_gib: float

    def as_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "max_concurrency": self.max_concurrency,
            "kv_cache_gib": round(self.kv_cache_gib, 2),
        }


@dataclass(frozen=True)
class MemoryEstimate:
    """What the heaviest GPU of one replica holds, itemised. Sizes in GiB, KV in bytes/tokens."""

    gpu: str
    gpu_memory_gib: float
    gpu_usable_gib: float
    gpu_memory_fraction: float
    budget_gib: float
    engine: EngineName
    engine_fraction: float
    target_weights_gib: float
    draft_weights_gib: float
    overheads: Overheads
    kv_cache_gib: float
    target_kv_bytes_per_token: int
    draft_kv_bytes_per_token: int
    kv_fixed_bytes_per_sequence: int
    """Bytes per sequence that do not grow with it (windows, chunks, recurrent state)."""
    kv_tokens: int
    """The KV-cache size in tokens as the engine logs it at start-up (for hybrid layouts in some
    releases this is not the capacity; see `kv_capacity_tokens`)."""
    max_model_len: int
    requested_concurrency: int
    max_concurrency: int
    baseline_kv_cache_gib: float
    baseline_kv_tokens: int
    baseline_max_concurrency: int
    one_sequence_fits: bool
    method: SpecMethod
    tensor_parallel_size: int
    draft_tensor_parallel_size: int | None
    heaviest_rank: str
    kv_capacity_tokens: int = 0
    """What the cache really holds, in tokens of max_model_len sequences: `max_concurrency` per
    attention group x max_model_len when layers hold bounded spans, else whole blocks."""
    baseline_kv_capacity_tokens: int = 0
    baseline_kv_fixed_bytes_per_sequence: int = 0
    attention_data_parallel_size: int = 1
    """Attention groups of the replica; `max_concurrency` counts the sequences of all of them,
    `kv_tokens` what one GPU holds."""
    notes: tuple[str, ...] = ()
    suggestions: tuple[Suggestion, ...] = field(default=())
    typical_context_tokens: int | None = None
    """serving.typical_context_tokens, when set: the context a typical request holds."""
    typical_concurrency: int | None = None
    """Sequences of typical_context_tokens that fit with speculation."""
    baseline_typical_concurrency: int | None = None
    """The same without speculation."""

    @property
    def kv_bytes_per_token(self) -> int:
        return self.target_kv_bytes_per_token + self.draft_kv_bytes_per_token

    @property
    def overhead_gib(self) -> float:
        return self.overheads.total_gib

    @property
    def fits(self) -> bool:
        """What the engine requires to start: weights, overheads and one max_model_len sequence
        (DESIGN §4). Fewer full-length sequences than requested is a warning, not a refusal:
        engines treat the concurrency as a cap."""
        return self.one_sequence_fits

    @property
    def concurrency_fits(self) -> bool:
        """serving.max_concurrency sequences of max_model_len fit at once."""
        return self.max_concurrency >= self.requested_concurrency

    @property
    def meets_request(self) -> bool:
        return self.fits and self.concurrency_fits

    @property
    def one_sequence_gib(self) -> float:
        """Weights + overheads + KV for one max_model_len sequence: what the engine needs."""
        return self._needed_gib(1)

    @property
    def needed_gib(self) -> float:
        """Weights + overheads + KV for `requested_concurrency` sequences of max_model_len."""
        return self._needed_gib(self.requested_concurrency)

    def _needed_gib(self, sequences: int) -> float:
        per_seq = kv.sequence_bytes(
            self.kv_bytes_per_token, self.kv_fixed_bytes_per_sequence, self.max_model_len
        )
        fixed = self.target_weights_gib + self.draft_weights_gib + self.overhead_gib
        return fixed + per_seq * sequences / GIB

    @property
    def engine_knob(self) -> str:
        return ENGINES[self.engine].memory.knob

    def as_json(self) -> dict[str, Any]:
        """DESIGN.md §4 `memory` block, extended with the itemisation."""
        o = self.overheads
        return {
            "gpu": self.gpu,
            "gpu_memory_gib": _r(self.gpu_memory_gib),
            "gpu_usable_gib": _r(self.gpu_usable_gib),
            "gpu_memory_fraction": self.gpu_memory_fraction,
            "budget_gib": _r(self.budget_gib),
            "engine_knob": self.engine_knob,
            "engine_fraction": self.engine_fraction,
            "target_weights_gib": _r(self.target_weights_gib),
            "draft_weights_gib": _r(self.draft_weights_gib),
            "overhead_gib": _r(self.overhead_gib),
            "activation_gib": _r(o.activation_gib),
            "cuda_graph_gib": _r(o.cuda_graph_gib),
            "non_torch_gib": _r(o.outside_torch_gib),
            "kv_cache_gib": _r(self.kv_cache_gib),
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "target_kv_bytes_per_token": self.target_kv_bytes_per_token,
            "draft_kv_bytes_per_token": self.draft_kv_bytes_per_token,
            "kv_fixed_bytes_per_sequence": self.kv_fixed_bytes_per_sequence,
            "kv_tokens": self.kv_tokens,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "baseline_kv_tokens": self.baseline_kv_tokens,
            "baseline_kv_capacity_tokens": self.baseline_kv_capacity_tokens,
            "baseline_kv_fixed_bytes_per_sequence": self.baseline_kv_fixed_bytes_per_sequence,
            "max_model_len": self.max_model_len,
            "requested_concurrency": self.requested_concurrency,
            "max_concurrency": self.max_concurrency,
            "baseline_max_concurrency": self.baseline_max_concurrency,
            "one_sequence_fits": self.one_sequence_fits,
            "fits": self.fits,
            "concurrency_fits": self.concurrency_fits,
            "one_sequence_gib": _r(self.one_sequence_gib),
            "needed_gib": _r(self.needed_gib),
            "typical_context_tokens": self.typical_context_tokens,
            "typical_concurrency": self.typical_concurrency,
            "baseline_typical_concurrency": self.baseline_typical_concurrency,
            "tensor_parallel_size": self.tensor_parallel_size,
            "attention_data_parallel_size": self.attention_data_parallel_size,
            "draft_tensor_parallel_size": self.draft_tensor_parallel_size,
            "heaviest_rank": self.heaviest_rank,
            "notes": list(self.notes),
            "suggestions": [s.as_json() for s in self.suggestions],
        }


def estimate_memory(
    profile: Profile, target: CheckpointInfo | None, draft: CheckpointInfo | None
) -> MemoryEstimate | None:
    """The itemised per-GPU estimate, or None when it cannot be made (see `unavailable_reason`).

    Raises ProfileError when `hardware.gpu` is not in the catalog.
    """
    if unavailable_reason(profile, target) is not None or target is None:
        return None
    gpu = find_gpu(profile.hardware.gpu or "")
    estimate = _estimate(profile, target, draft, gpu)
    if estimate is None or estimate.meets_request:
        return estimate
    found = smallest_changes(profile, target, draft, gpu, _estimate)
    return replace(estimate, suggestions=tuple(Suggestion(*s) for s in found))


def unavailable_reason(profile: Profile, target: CheckpointInfo | None) -> str | None:
    """Why no budget can be estimated for this profile, or None when it can."""
    if profile.hardware.device == "cpu":
        return (
            "hardware.device is cpu: the engine runs in host memory, which specdeploy does not size"
        )
    if target is None:
        return f"the metadata of target.model {profile.target.model!r} was not resolved"
    missing = [
        name
        for name in ("num_hidden_layers", "hidden_size", "num_attention_heads")
        if getattr(target, name) is None
    ]
    if missing:
        return f"config.json of {target.ref!r} does not give {', '.join(missing)}"
    if target_weight_bytes(profile, target) is None:
        return f"neither the weight index nor config.json of {target.ref!r} gives the model's size"
    return None


def engine_memory_fraction(profile: Profile, estimate: MemoryEstimate | None) -> float:
    """`serving.gpu_memory_fraction` in the engine's own knob and semantics, rounded down to 3
    decimals so rendering is deterministic (each engine's `memory.knob_for` says how)."""
    model = ENGINES[profile.engine.name].memory
    if estimate is None:
        return model.knob_without_estimate(profile)
    return model.knob_for(estimate)


def engine_kv_gib(estimate: MemoryEstimate, engine_fraction: float) -> float:
    """The KV cache the engine itself would size with its knob at `engine_fraction`, from the
    estimate's weights and overheads: the inverse of the translation `engine_memory_fraction`
    renders. Used to compare the memory model with values engines logged for a given knob."""
    return ENGINES[estimate.engine].memory.kv_gib_at(estimate, engine_fraction)


def _estimate(
    profile: Profile, target: CheckpointInfo, draft: CheckpointInfo | None, gpu: Gpu
) -> MemoryEstimate | None:
    """The estimate without suggestions (suggest.py calls this for each candidate change)."""
    tp = profile.hardware.tensor_parallel_size
    target_bytes = target_weight_bytes(profile, target)
    if target_bytes is None:
        return None
    notes: list[str] = []
    draft_bytes, draft_tp, heaviest = _draft_weights_per_gpu(profile, target, draft, notes)
    memory = ENGINES[profile.engine.name].memory
    in_flight = memory.in_flight_tokens(profile, gpu)
    layout = kv.target_layout(
        profile, target, in_flight=in_flight, state=memory.state_slots(profile)
    )
    base_layout = kv.target_layout(profile, target, in_flight=in_flight)
    notes.extend(layout.notes)
    draft_cost = kv.draft_kv(profile, target, draft, draft_tp)
    notes.extend(n for n in draft_cost.notes if n not in notes)
    draft_bpt = draft_cost.bytes_per_token
    overheads = engine_overheads(profile, target, gpu)
    usable = gpu.usable_gib
    budget = usable * profile.serving.gpu_memory_fraction
    sharding = memory.weight_sharding(profile)
    target_gib = per_gpu_bytes(target_bytes, target, profile, sharding) / GIB
    groups = profile.hardware.attention_data_parallel_size  # each holds its own sequences
    fixed_gib = target_gib + draft_bytes / GIB + overheads.total_gib
    kv_gib = budget - fixed_gib
    baseline_gib = budget - target_gib - overheads.total_gib
    seq_len = profile.serving.max_model_len
    with_spec = kv.capacity(kv_gib, layout.bytes_per_token + draft_bpt, layout.fixed, seq_len)
    base = kv.capacity(baseline_gib, base_layout.bytes_per_token, base_layout.fixed, seq_len)
    logged = memory.logged_kv_tokens(profile, kv.pool(kv_gib, layout, draft_bpt, with_spec))
    base_logged = memory.logged_kv_tokens(profile, kv.pool(baseline_gib, base_layout, 0, base))
    typical = profile.serving.typical_context_tokens
    typical_spec = typical_base = None
    if typical is not None:
        short = kv.target_layout(
            profile, target, seq_len=typical, in_flight=in_flight, state=memory.state_slots(profile)
        )
        short_base = kv.target_layout(profile, target, seq_len=typical, in_flight=in_flight)
        bpt = short.bytes_per_token
        typical_spec = groups * kv.capacity(kv_gib, bpt + draft_bpt, short.fixed, typical).sequences
        typical_base = groups * kv.capacity(baseline_gib, bpt, short_base.fixed, typical).sequences
    estimate = MemoryEstimate(
        gpu=gpu.name,
        gpu_memory_gib=gpu.memory_gib,
        gpu_usable_gib=usable,
        gpu_memory_fraction=profile.serving.gpu_memory_fraction,
        budget_gib=budget,
        engine=profile.engine.name,
        engine_fraction=0.0,
        target_weights_gib=target_gib,
        draft_weights_gib=draft_bytes / GIB,
        overheads=overheads,
        kv_cache_gib=kv_gib,
        target_kv_bytes_per_token=layout.bytes_per_token,
        draft_kv_bytes_per_token=draft_bpt,
        kv_fixed_bytes_per_sequence=layout.fixed,
        baseline_kv_fixed_bytes_per_sequence=base_layout.fixed,
        kv_tokens=logged,
        kv_capacity_tokens=with_spec.tokens,
        max_model_len=seq_len,
        requested_concurrency=profile.serving.max_concurrency,
        max_concurrency=groups * with_spec.sequences,
        baseline_kv_cache_gib=baseline_gib,
        baseline_kv_tokens=base_logged,
        baseline_kv_capacity_tokens=base.tokens,
        baseline_max_concurrency=groups * base.sequences,
        one_sequence_fits=with_spec.sequences >= 1,
        method=profile.proposer.method,
        tensor_parallel_size=tp,
        attention_data_parallel_size=groups,
        draft_tensor_parallel_size=draft_tp,
        heaviest_rank=heaviest,
        notes=tuple(notes),
        typical_context_tokens=typical,
        typical_concurrency=typical_spec,
        baseline_typical_concurrency=typical_base,
    )
    fraction = ENGINES[estimate.engine].memory.knob_for(estimate)
    return replace(estimate, engine_fraction=fraction)


def _draft_weights_per_gpu(
    profile: Profile, target: CheckpointInfo, draft: CheckpointInfo | None, notes: list[str]
) -> tuple[int, int | None, str]:
    """Draft bytes on the heaviest GPU, the draft's TP, and which rank that is."""
    method, tp = profile.proposer.method, profile.hardware.tensor_parallel_size
    if method in ("none", "ngram"):
        return 0, None, "all ranks alike"
    if method == "mtp":
        return mtp_weight_bytes(profile, target) // tp, tp, "all ranks alike"
    draft_tp = profile.proposer.draft_tensor_parallel_size or tp
    heaviest = "rank 0 (holds the draft)" if draft_tp < tp else "all ranks alike"
    if draft is None:
        notes.append(
            f"proposer.model {profile.proposer.model!r} was not resolved: draft not counted"
        )
        return 0, draft_tp, heaviest
    if method == "draft_model":
        total = draft_model_weight_bytes(profile, draft)
    else:
        total = eagle_head_weight_bytes(profile, draft, target)
    if total is None:
        notes.append(f"the size of {draft.ref!r} is unknown: draft weights not counted")
        return 0, draft_tp, heaviest
    return math.ceil(total / draft_tp), draft_tp, heaviest


def _r(value: float) -> float:
    return round(value, 2)
