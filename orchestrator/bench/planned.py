"""The speedup estimate of one planned deployment: shared by `plan --speedup` and `suggest`.

It reads the plan's memory budget (per-GPU weights, draft weights, KV per token), the target's
config (which parameters one token touches: for MoE, the shared weights plus the experts it routes
to), the proposer's expected acceptance (`acceptance.py`: published, else a labelled prior) and the
GPU catalog. It makes no recommendation when the draft's cost or its acceptance is unknown, and it
says why whenever it finds a gain at a load where the `serving.high-concurrency` rule warns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from orchestrator.bench.acceptance import Acceptance, Workload, acceptance_for, from_measurement
from orchestrator.bench.estimate import (
    GIB,
    LOADS,
    Disagreement,
    DraftCost,
    Experts,
    Roofline,
    SpeedupEstimate,
    estimate,
    roofline_for,
    with_schedule,
)
from orchestrator.checkpoint.catalog import catalog_entries, catalog_entry
from orchestrator.checkpoint.catalog.entries import CatalogEntry
from orchestrator.checkpoint.catalog.user import user_catalog_entries, user_catalog_entry
from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.memory_rules import high_concurrency
from orchestrator.compatibility.rule import CompatContext
from orchestrator.errors import OrchestratorError
from orchestrator.memory.estimate import MemoryEstimate
from orchestrator.memory.formulas import (
    DTYPE_BYTES,
    EXPERTS_ONLY_QUANT,
    bytes_per_param,
    param_breakdown,
)
from orchestrator.memory.gpus import Gpu, find_gpu
from orchestrator.memory.weights import model_dtype
from orchestrator.plan.types import PlanResult
from orchestrator.profile.schema import Profile

#: What the roofline leaves out where it matters most: fixed per-step latency dominates MoE decode
#: at low batch, so the extra experts a verification reads cost less there than estimated.
MOE_LOW_BATCH_CAVEAT = (
    "fixed per-step latency (kernel launches, all-reduces) is not modelled; it dominates MoE "
    "decode at low batch, where verifying k + 1 tokens then costs less than estimated (SGLang "
    "measured 1.76x at batch 1 for DeepSeek-V3 MTP on 8 x H200: "
    "https://github.com/sgl-project/sglang/pull/3582)"
)
#: Bytes per parameter assumed when a config does not give the parameter count (dense BF16).
FALLBACK_BYTES_PER_PARAM = 2.0


@dataclass(frozen=True)
class NoEstimate:
    """Why no speedup is estimated (and so nothing recommended) for a planned deployment."""

    reason: str
    acceptance: Acceptance | None = None
    cost_unknown: bool = False
    """True when it is the draft's cost (weights or layers) that is unknown."""


def estimate_planned(
    result: PlanResult,
    *,
    workload: Workload,
    acceptance_rate: float | None = None,
    context_tokens: float,
) -> SpeedupEstimate | NoEstimate:
    """The estimate for a plan, or why there is none. `acceptance_rate` (a measured per-token
    rate, e.g. from `specdeploy bench`) replaces the published figure or prior."""
    profile, memory = result.profile, result.memory
    if profile is None or not profile.speculative:
        return NoEstimate("the profile has no proposer")
    if memory is None or result.target is None:
        return NoEstimate("no memory budget could be estimated; see the findings")
    accepts = (
        from_measurement(acceptance_rate)
        if acceptance_rate is not None
        else expected_acceptance(profile, workload)
    )
    if accepts is None:
        return NoEstimate(
            f"no published acceptance for proposer.method {profile.proposer.method} "
            f"({profile.proposer.model}) and no prior supported by one: measure it with "
            "`specdeploy bench` and pass --acceptance-rate",
        )
    try:
        gpu = find_gpu(profile.hardware.gpu or "")
    except OrchestratorError:
        return NoEstimate("hardware.gpu is not in the GPU catalog", accepts)
    cost = draft_cost(profile, result.target, result.draft, memory)
    if isinstance(cost, str):
        return NoEstimate(
            f"no recommendation: the draft's cost is unknown ({cost})", accepts, cost_unknown=True
        )
    roofline, notes = target_roofline(profile, result.target, memory, gpu, context_tokens)
    requested = profile.serving.max_concurrency
    top = max(memory.max_concurrency, requested, 1)
    loads = sorted({c for c in LOADS if c <= top} | {requested, 1})
    found = estimate(accepts.curve, cost, roofline, loads=loads, serving_concurrency=requested)
    if profile.proposer.num_speculative_tokens_per_batch_size is not None:
        found = with_schedule(found, profile.proposer.tokens_at, accepts.curve, cost, roofline)
    assumptions: tuple[tuple[str, float | str], ...] = (
        ("context_tokens", context_tokens),
        ("gpu_bandwidth_tbps", gpu.bandwidth_tbps),
        ("gpu_bf16_tflops", gpu.bf16_tflops if gpu.bf16_tflops is not None else "unknown"),
        *notes,
    )
    return dataclasses.replace(
        found,
        acceptance=accepts,
        assumptions=assumptions,
        disagreements=disagreements(profile, result, found, roofline),
    )


def expected_acceptance(profile: Profile, workload: Workload) -> Acceptance | None:
    """The proposer's published acceptance, else its method's prior."""
    head = proposer_entry(profile.proposer.model) if profile.proposer.model else None
    return acceptance_for(
        profile.proposer.method, workload, head=head, catalog=all_catalog_entries()
    )


def proposer_entry(model: str) -> CatalogEntry | None:
    """The catalog entry (user catalog first) of a proposer named by hub id."""
    try:
        return user_catalog_entry(model) or catalog_entry(model)
    except OrchestratorError:  # a damaged user catalog: resolution reports it
        return catalog_entry(model)


def all_catalog_entries() -> tuple[CatalogEntry, ...]:
    try:
        user = user_catalog_entries()
    except OrchestratorError:
        user = ()
    return (*user, *catalog_entries())


def draft_cost(
    profile: Profile,
    target: CheckpointInfo,
    draft: CheckpointInfo | None,
    memory: MemoryEstimate,
) -> DraftCost | str:
    """One draft step's weights, KV and parameters per GPU, or why they are unknown."""
    method = profile.proposer.method
    if method == "ngram":
        return DraftCost(0.0, 0.0, 0.0)
    weight_bytes = memory.draft_weights_gib * GIB
    kv = float(memory.draft_kv_bytes_per_token)
    if method == "mtp":
        if target.mtp_layers <= 0:
            return f"the MTP layers of {target.ref} are not known (config.json gives no count)"
        share = _routed_share(profile, target)
        return DraftCost(weight_bytes, kv, _params(profile, target, weight_bytes), share)
    if draft is None:
        return f"proposer.model {profile.proposer.model} was not resolved"
    if weight_bytes <= 0:
        return f"the size of {draft.ref} is not known"
    return DraftCost(weight_bytes, kv, _params(profile, draft, weight_bytes))


def target_roofline(
    profile: Profile,
    target: CheckpointInfo,
    memory: MemoryEstimate,
    gpu: Gpu,
    context_tokens: float,
) -> tuple[Roofline, tuple[tuple[str, float | str], ...]]:
    """The target's decode roofline on one GPU of the replica. A step crosses every pipeline
    stage, so pipeline-parallel replicas count every stage's weights and KV on one GPU's
    bandwidth; tensor parallelism splits them."""
    tp, pp = profile.hardware.tensor_parallel_size, profile.hardware.pipeline_parallel_size
    weight_bytes = memory.target_weights_gib * GIB * pp
    kv = memory.target_kv_bytes_per_token * pp
    counts = param_breakdown(target)
    notes: list[tuple[str, float | str]] = []
    experts = None
    if counts is None:
        active = weight_bytes / FALLBACK_BYTES_PER_PARAM
        notes.append(("active_params", "weight bytes / 2 (config.json gives no parameter count)"))
    else:
        routed = _routed_params(target)
        # The vision tower runs on images at prefill, not in a decode step.
        decode = counts.total - counts.vision
        active = (decode - routed + routed * _routed_fraction(target)) / tp
        if routed and target.num_experts and target.num_experts_per_tok:
            share = _routed_share(profile, target)
            experts = Experts(weight_bytes * share, target.num_experts, target.num_experts_per_tok)
            notes.append(
                (
                    "moe",
                    f"{target.num_experts_per_tok} of {target.num_experts} experts per token; "
                    f"routed experts are {share:.0%} of the weights and a step reads only those "
                    "its tokens route to (uniform routing)",
                )
            )
            notes.append(("moe_low_batch", MOE_LOW_BATCH_CAVEAT))
    roofline = roofline_for(
        gpu,
        weight_bytes=weight_bytes,
        active_params=active,
        kv_bytes_per_token=kv,
        context_tokens=context_tokens,
        experts=experts,
    )
    return roofline, tuple(notes)


def disagreements(
    profile: Profile, result: PlanResult, found: SpeedupEstimate, roofline: Roofline
) -> tuple[Disagreement, ...]:
    """Every (load, draft length) of the estimate with a gain where the real
    `serving.high-concurrency` rule, run on this profile at that load and draft length, warns;
    each says why the two disagree."""
    release = result.release
    if release is None:
        return ()
    out = []
    for row in found.loads:
        for k, gain in row.speedups:
            if gain <= 1.0:
                continue
            probe = profile.model_copy(
                update={
                    "serving": profile.serving.model_copy(
                        update={"max_concurrency": row.concurrency}
                    ),
                    # The estimate's draft length, not a schedule's.
                    "proposer": profile.proposer.model_copy(
                        update={
                            "num_speculative_tokens": k,
                            "num_speculative_tokens_per_batch_size": None,
                        }
                    ),
                }
            )
            warned = high_concurrency(CompatContext(probe, release, result.target, result.draft))
            if warned:
                why = _why_gain(roofline, row.concurrency, k, found, profile)
                out.append(Disagreement(row.concurrency, k, warned[0].rule, gain, why))
    return tuple(out)


def _why_gain(
    roofline: Roofline, batch: int, k: int, found: SpeedupEstimate, profile: Profile
) -> str:
    tokens = batch * (k + 1)
    memory_ms = roofline.memory_s(batch, k + 1) * 1e3
    compute_ms = roofline.compute_s(batch, k + 1) * 1e3
    weights_gb = roofline.weight_bytes_read(tokens) / 1e9
    kv_gb = batch * roofline.context_tokens * roofline.kv_bytes_per_token / 1e9
    gpu = profile.hardware.gpu
    if memory_ms >= compute_ms:
        moe = " (only the experts those tokens route to)" if roofline.experts is not None else ""
        return (
            f"the rule compares {tokens} verified tokens with {gpu}'s FLOPs-per-byte ridge "
            f"alone; the estimate finds the verify step still memory-bound: it reads "
            f"{weights_gb:.1f} GB of weights{moe} and {kv_gb:.1f} GB of KV for {batch} "
            f"sequences of ~{roofline.context_tokens:.0f} tokens ({memory_ms:.1f} ms) against "
            f"{compute_ms:.1f} ms of compute, so verification stays nearly free; measure both "
            "arms with `specdeploy bench` at this load"
        )
    curve = found.acceptance.curve if found.acceptance is not None else None
    length = f"{curve.mean_length(k):.2f}" if curve is not None else "enough"
    return (
        f"verifying {tokens} tokens is compute-bound here ({compute_ms:.1f} ms vs "
        f"{memory_ms:.1f} ms of memory traffic), as the rule says, but {length} tokens per "
        "step at the expected acceptance still outweigh that cost in the estimate; the rule does "
        "not know the acceptance, so measure both arms with `specdeploy bench` at this load"
    )


def _routed_params(info: CheckpointInfo) -> int:
    """Parameters of the routed experts (shared experts and routers excluded)."""
    if not info.num_experts or not info.hidden_size:
        return 0
    layers = (info.num_hidden_layers or 0) - (info.first_k_dense_replace or 0)
    size = info.moe_intermediate_size or info.intermediate_size or 0
    return layers * info.num_experts * 3 * info.hidden_size * size


def _routed_fraction(info: CheckpointInfo) -> float:
    if not info.num_experts or not info.num_experts_per_tok:
        return 1.0
    return info.num_experts_per_tok / info.num_experts


def _routed_share(profile: Profile, info: CheckpointInfo) -> float:
    """Share of the weight bytes held by routed experts (quantization applied by kind)."""
    counts = param_breakdown(info)
    routed = _routed_params(info)
    if counts is None or not routed:
        return 0.0
    dtype = model_dtype(profile, info)
    quant = profile.target.quantization or info.quant_method
    plain = DTYPE_BYTES.get(dtype, 2.0)
    quantized = bytes_per_param(dtype, quant, info.quant_bits)
    expert_bytes = routed * quantized
    other_linear = counts.linear - routed
    other_bytes = (counts.total - counts.linear) * plain
    other_bytes += other_linear * (plain if quant in EXPERTS_ONLY_QUANT else quantized)
    return expert_bytes / (expert_bytes + other_bytes)


def _params(profile: Profile, info: CheckpointInfo, weight_bytes: float) -> float:
    per_param = DTYPE_BYTES.get(model_dtype(profile, info), FALLBACK_BYTES_PER_PARAM)
    return weight_bytes / per_param * _routed_fraction_of_bytes(profile, info)


def _routed_fraction_of_bytes(profile: Profile, info: CheckpointInfo) -> float:
    """Of a (draft or MTP) layer's parameters, the share multiplied per token."""
    share = _routed_share(profile, info)
    return 1.0 - share + share * _routed_fraction(info)
