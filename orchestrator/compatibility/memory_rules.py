"""Memory rules: the engine must be able to start (weights, overheads and one max_model_len
sequence fit the budget); say how many full-length sequences fit, what speculation costs and when
it stops paying. They read `ctx.memory` (a MemoryEstimate, or None when none could be made)."""

from __future__ import annotations

from typing import Final

from orchestrator.compatibility.rule import CompatContext, Finding, rule
from orchestrator.engines import ENGINES
from orchestrator.errors import ProfileError
from orchestrator.memory.budget import known_weights, unavailable_reason
from orchestrator.memory.estimate import MemoryEstimate
from orchestrator.memory.gpus import find_gpu

#: Verified tokens per decode step beyond which a step is no longer memory-bound, used when the
#: GPU's ridge point is unknown (H100 bf16 ridge: 989 TFLOPS / 3.35 TB/s ≈ 295 FLOP/byte).
DEFAULT_CRITICAL_BATCH_TOKENS: Final = 256


def _speculative_with_memory(ctx: CompatContext) -> bool:
    return ctx.memory is not None and ctx.profile.speculative


def _speculative_on_gpu(ctx: CompatContext) -> bool:
    return ctx.profile.speculative and ctx.profile.hardware.device == "gpu"


@rule(
    "memory.over-budget",
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/worker/gpu_worker.py#L634-L808 (vLLM determine_available_memory) and "
    "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/core/kv_cache_utils.py#L1003-L1040 (start-up refused when one max_model_len request "
    "does not fit); https://github.com/vllm-project/vllm/issues/9995 and "
    "https://github.com/vllm-project/vllm/issues/8731 (OOMs from draft weights and draft KV)",
)
def over_budget(ctx: CompatContext) -> Finding | None:
    """Weights + overheads + KV for one sequence of `max_model_len` must fit the per-GPU budget:
    engines check exactly that at start-up and refuse to start otherwise (vLLM
    `_check_enough_kv_cache_memory`). Fewer than `max_concurrency` full-length sequences is the
    warning memory.concurrency-at-max-context instead. Without an estimate: on a GPU with a
    resolved target whose facts do not size it, an error naming the missing facts and what is
    known of the weights (never a silent pass); on a CPU device or an unresolved target (reported
    by its own rule), an info saying why no budget was checked."""
    e = ctx.memory
    if e is None:
        reason = unavailable_reason(ctx.profile, ctx.target) or "the target's size is unknown"
        if ctx.target is not None and ctx.profile.hardware.device == "gpu":
            # Resolved but not sizeable: exit 0 would pass a plan nobody checked.
            known = known_weights(ctx.profile, ctx.target)
            model = ctx.profile.target.model
            return Finding.error(
                what=f"no memory budget can be estimated: {reason}"
                + (f"; {known}" if known else ""),
                why="without those facts the KV cache, and so whether one sequence of "
                f"serving.max_model_len={ctx.profile.serving.max_model_len} fits, cannot be sized",
                fix=f"let specdeploy read the checkpoint's config.json (`huggingface-cli download "
                f"{model} config.json`, then validate without --offline, or set target.model to "
                "a directory holding it), or record the missing facts in your catalog "
                "(`specdeploy catalog add`)",
            )
        return Finding.info(
            what=f"no memory budget was checked: {reason}",
            why="an over-budget plan is only found when the engine starts",
            fix="resolve the target checkpoint (or run on device: gpu) to get a budget",
        )
    if e.fits:
        return None
    return Finding.error(what=_over_budget_what(e), why=_over_budget_why(e), fix=_fixes(e))


@rule(
    "memory.speculation-cost",
    applies=_speculative_with_memory,
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/worker/gpu_model_runner.py#L5028-L5080 (vLLM loads the drafter with the "
    "target, before memory profiling) and https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/model_executor/models/llama_eagle.py#L160-L164 (draft "
    "layers numbered after the target's, in the same KV pool); "
    "https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/arg_groups/fields/spec.py#L151-L163 (SGLang: one draft KV slot per target token)",
)
def speculation_cost(ctx: CompatContext) -> Finding | None:
    """Draft weights and draft KV come out of the memory the target's KV cache would use, so
    speculation can lower how many `max_model_len` sequences fit. Shows both numbers."""
    e = ctx.memory
    if e is None or e.max_concurrency >= e.baseline_max_concurrency:
        return None
    return Finding.warning(
        what=(
            f"speculation lowers the sequences of max_model_len={e.max_model_len} that fit from "
            f"{e.baseline_max_concurrency} (baseline) to {e.max_concurrency} (draft weights "
            f"{e.draft_weights_gib:.2f} GiB, draft KV {e.draft_kv_bytes_per_token:,} of "
            f"{e.kv_bytes_per_token:,} bytes per token)"
        ),
        why="under full load the speculative server holds fewer long requests than the baseline",
        fix=f"accept the cost, or set {_fp8_fix(ctx)}a shorter serving.max_model_len, or a larger "
        "hardware.tensor_parallel_size",
    )


def _fp8_fix(ctx: CompatContext) -> str:
    """`serving.kv_cache_dtype: fp8, ` when that is a change the engine accepts on this GPU."""
    if ctx.profile.serving.kv_cache_dtype.startswith("fp8"):
        return ""
    try:
        gpu = find_gpu(ctx.profile.hardware.gpu or "")
    except ProfileError:
        return "serving.kv_cache_dtype: fp8, "
    mla = ctx.target.is_mla if ctx.target is not None else None
    verdict = ENGINES[ctx.engine].fp8_kv_cache_on(ctx.release, gpu, "fp8", mla=mla)
    return "" if verdict is not None else "serving.kv_cache_dtype: fp8, "


@rule(
    "serving.high-concurrency",
    applies=_speculative_on_gpu,
    source="https://github.com/vllm-project/vllm/blob/01ed47b4166b26251895a9c298352fcdb2385149/"
    "docs/features/speculative_decoding/README.md#L3 (speculative decoding reduces inter-token "
    "latency 'under medium-to-low QPS'); "
    "https://github.com/vllm-project/vllm/blob/015a47e1282c9ef40d706ee3463cb699e04e93c0/docs/"
    "features/speculative_decoding/dynamic_speculative_decoding.md#L5 ('effective BS becomes "
    "BS*K ... beyond a critical BS then SD negatively impacts the decode speed')",
)
def high_concurrency(ctx: CompatContext) -> Finding | None:
    """Each decode step verifies max_concurrency x (num_speculative_tokens + 1) tokens. Once that
    passes the GPU's critical batch (its bf16 FLOPs per byte of bandwidth, where decode stops being
    memory-bound), verification costs more than speculation saves. With a draft-length schedule
    the draft length is the one scheduled at max_concurrency (none where it is 0)."""
    profile = ctx.profile
    concurrency = profile.serving.max_concurrency
    k = profile.proposer.tokens_at(concurrency)
    verified = concurrency * (k + 1)
    critical = _critical_batch_tokens(profile.hardware.gpu)
    if k == 0 or verified < critical:
        return None
    scheduled = profile.proposer.num_speculative_tokens_per_batch_size is not None
    length = (
        f"the draft length proposer.num_speculative_tokens_per_batch_size schedules there={k}"
        if scheduled
        else f"proposer.num_speculative_tokens={k}"
    )
    lower = (
        "lower the draft length for that load in proposer.num_speculative_tokens_per_batch_size "
        "(k: 0 turns speculation off there)"
        if scheduled
        else "lower proposer.num_speculative_tokens"
    )
    return Finding.warning(
        what=(
            f"serving.max_concurrency={concurrency} x ({length} + 1) = {verified} tokens verified "
            f"per step, at or above the critical batch of about {critical} tokens on "
            f"{profile.hardware.gpu}"
        ),
        why="at high concurrency decode is compute-bound and speculation usually stops paying",
        fix=f"benchmark both arms (`specdeploy bench`, deploy.baseline: true) at your load, or {lower}",
    )


def _critical_batch_tokens(gpu_name: str | None) -> int:
    try:
        gpu = find_gpu(gpu_name or "")
    except ProfileError:
        return DEFAULT_CRITICAL_BATCH_TOKENS
    if gpu.bf16_tflops is None:
        return DEFAULT_CRITICAL_BATCH_TOKENS
    return int(gpu.bf16_tflops / gpu.bandwidth_tbps)


def _over_budget_what(e: MemoryEstimate) -> str:
    return (
        f"one sequence of max_model_len={e.max_model_len} needs {e.one_sequence_gib:.1f} GiB per "
        f"GPU but {e.gpu} allows {e.budget_gib:.1f} GiB (serving.gpu_memory_fraction="
        f"{e.gpu_memory_fraction:g}): target weights {e.target_weights_gib:.1f} + draft weights "
        f"{e.draft_weights_gib:.1f} + overhead {e.overhead_gib:.1f} leave "
        f"{max(e.kv_cache_gib, 0.0):.1f} GiB of KV cache; without speculation "
        f"{e.baseline_max_concurrency} would fit"
    )


def _over_budget_why(e: MemoryEstimate) -> str:
    del e
    return "the engine refuses to start: one max_model_len sequence does not fit the KV cache"


@rule(
    "memory.concurrency-at-max-context",
    applies=lambda ctx: ctx.memory is not None and ctx.memory.fits,
    source="https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/core/sched/scheduler.py "
    "(max_num_seqs caps running requests; a request waits for free KV blocks, or preempts)",
)
def concurrency_at_max_context(ctx: CompatContext) -> Finding | None:
    """Fewer than `serving.max_concurrency` sequences of `max_model_len` fit at once. Engines
    treat the concurrency as a cap, not a promise: the server starts, runs as many requests as
    the KV cache holds and queues (or preempts) the rest. Real requests are rarely all at full
    length, so this is a warning with both numbers, never a refusal."""
    e = ctx.memory
    if e is None or e.concurrency_fits:
        return None
    typical = ""
    if e.typical_concurrency is not None:
        typical = (
            f"; at serving.typical_context_tokens={e.typical_context_tokens}, "
            f"{e.typical_concurrency} fit ({e.baseline_typical_concurrency} without speculation)"
        )
    return Finding.warning(
        what=(
            f"serving.max_concurrency={e.requested_concurrency} but only {e.max_concurrency} "
            f"sequences of max_model_len={e.max_model_len} fit at once with speculation "
            f"({e.baseline_max_concurrency} without){typical}"
        ),
        why="when every running request is that long, the engine queues or preempts the rest; "
        "shorter requests pack more",
        fix=_fixes(e)
        + " (or set serving.typical_context_tokens to see how many typical requests fit)",
    )


def _fixes(e: MemoryEstimate) -> str:
    if not e.suggestions:
        return "use a GPU with more memory or fewer, shorter sequences (serving.max_model_len)"
    return ", or ".join(
        f"set {s.change} ({s.max_concurrency} sequences fit)" for s in e.suggestions
    )


RULES = (over_budget, concurrency_at_max_context, speculation_cost, high_concurrency)
