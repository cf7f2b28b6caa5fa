"""The per-GPU memory budget: weights, KV cache and overheads, with and without speculation.

`estimate_memory` itemises what the heaviest GPU holds; `engine_memory_fraction` translates the
profile's `serving.gpu_memory_fraction` into the engine's own knob (through the engine's memory
model, `Engine.memory`) so the budget is the same whichever engine serves it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.engines import ENGINES
from orchestrator.memory import kv
from orchestrator.memory.estimate import MemoryEstimate, Suggestion
from orchestrator.memory.formulas import (
    attention_params,
    moe_layer_split,
    mtp_params,
    param_breakdown,
)
from orchestrator.memory.gpus import GIB, Gpu, find_gpu
from orchestrator.memory.overheads import engine_overheads
from orchestrator.memory.suggest import smallest_changes
from orchestrator.memory.weights import (
    draft_model_weight_bytes,
    eagle_head_weight_bytes,
    heaviest_rank_weights,
    mtp_weight_bytes,
    target_weight_bytes,
)
from orchestrator.profile.schema import Profile


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
        unverified = [f for f in target.unverified if f not in missing]
        also = f" (nor confirm {', '.join(unverified)})" if unverified else ""
        return f"config.json of {target.ref!r} does not give {', '.join(missing)}{also}"
    if target_weight_bytes(profile, target) is None:
        return f"neither the weight index nor config.json of {target.ref!r} gives the model's size"
    return None


def known_weights(profile: Profile, target: CheckpointInfo) -> str | None:
    """What is known of the target's weights per GPU when no full budget can be made."""
    total = target_weight_bytes(profile, target)
    if total is None:
        return None
    gpus = profile.hardware.tensor_parallel_size * profile.hardware.pipeline_parallel_size
    basis = (
        f"{target.published_param_count / 1e9:,.1f} B published parameters"
        if target.published_param_count and param_breakdown(target) is None
        else "its weights"
    )
    return (
        f"from what is known, {basis} take about {total / GIB:,.1f} GiB, "
        f"{total / gpus / GIB:,.1f} GiB on each of {gpus} GPUs"
    )


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
    notes.extend(_size_notes(profile, target))
    placed = heaviest_rank_weights(target_bytes, target, profile, sharding)
    target_gib = placed.bytes / GIB
    if placed.note is not None:
        notes.append(placed.note)
    if profile.hardware.pipeline_parallel_size > 1:
        heaviest = f"pipeline stage {placed.stage}, {heaviest}"
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
        engine_knob=ENGINES[profile.engine.name].memory.knob,
        notes=tuple(notes),
        typical_context_tokens=typical,
        typical_concurrency=typical_spec,
        baseline_typical_concurrency=typical_base,
    )
    fraction = ENGINES[estimate.engine].memory.knob_for(estimate)
    return replace(estimate, engine_fraction=fraction)


def _size_notes(profile: Profile, target: CheckpointInfo) -> list[str]:
    """How the target's size was known, when it was not exact, and whether the built-in
    catalog could check the count from config.json against a published one."""
    notes = []
    counted = param_breakdown(target)
    exact = target.weight_bytes is not None and profile.target.quantization in (
        None,
        target.quant_method,
    )
    if counted is None and not exact:
        if target.published_param_count:
            notes.append(
                f"config.json of {target.ref!r} does not give every layer's shape: its weights "
                f"are estimated from the {target.published_param_count / 1e9:,.1f} B parameters "
                "its publisher states"
            )
        elif param_breakdown(target, guess_mlp=True) is not None:
            notes.append(
                f"config.json of {target.ref!r} does not give intermediate_size: its weights are "
                "estimated with MLPs 4 x hidden_size wide"
            )
    if target.source == "catalog" and target.published_param_count is None:
        computed = f" (computed: {counted.total / 1e9:,.1f} B)" if counted else ""
        notes.append(
            f"the built-in catalog has no verifiable published parameter count for "
            f"{target.ref!r}: the count from config.json is not checked against one{computed}"
        )
    return notes


def _mtp_per_gpu(profile: Profile, target: CheckpointInfo) -> int:
    """MTP layers on one GPU: split like the target's own layers (their attention whole on each
    attention group under attention data parallelism, the rest over TP / EP)."""
    total = mtp_weight_bytes(profile, target)
    layers = mtp_params(target)
    if not total or not layers:
        return 0
    sharding = ENGINES[profile.engine.name].memory.weight_sharding(profile)
    n = target.mtp_layers
    attention = n * attention_params(target)
    experts = n * moe_layer_split(target)[1] if target.num_experts else 0
    dense = max(layers - attention - experts, 0)
    weighted = attention / sharding.attention + dense / sharding.dense + experts / sharding.experts
    return math.ceil(total * weighted / layers)


def _draft_weights_per_gpu(
    profile: Profile, target: CheckpointInfo, draft: CheckpointInfo | None, notes: list[str]
) -> tuple[int, int | None, str]:
    """Draft bytes on the heaviest GPU, the draft's TP, and which rank that is."""
    method, tp = profile.proposer.method, profile.hardware.tensor_parallel_size
    if method in ("none", "ngram"):
        return 0, None, "all ranks alike"
    if method == "mtp":
        return _mtp_per_gpu(profile, target), tp, "all ranks alike"
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
