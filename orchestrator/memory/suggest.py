"""The smallest profile change that makes an over-budget plan fit.

Candidates are tried in a fixed order (cheapest for the user first): fp8 KV cache, cheaper
speculation, a shorter max_model_len, a higher tensor parallel size, a quantised target, and last
a lower max_concurrency. Each candidate is re-estimated; the first few that fit are reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.engines import ENGINES
from orchestrator.engines.capabilities import release_for
from orchestrator.errors import ProfileError
from orchestrator.memory.gpus import Gpu
from orchestrator.profile.schema import Profile

if TYPE_CHECKING:
    from orchestrator.memory.estimate import MemoryEstimate

Estimator = Callable[
    [Profile, CheckpointInfo, "CheckpointInfo | None", Gpu], "MemoryEstimate | None"
]
#: How many fitting changes to report.
MAX_SUGGESTIONS: Final = 3
#: max_model_len suggestions are multiples of this many tokens.
CONTEXT_STEP: Final = 1024


def smallest_changes(
    profile: Profile,
    target: CheckpointInfo,
    draft: CheckpointInfo | None,
    gpu: Gpu,
    estimate: Estimator,
) -> tuple[tuple[str, int, float], ...]:
    """Up to MAX_SUGGESTIONS (change, max_concurrency, kv_cache_gib) that make the plan fit."""
    found: list[tuple[str, int, float]] = []
    for change, candidate in _candidates(profile, target, draft, gpu, estimate):
        result = estimate(candidate, target, draft, gpu)
        if result is not None and result.meets_request:
            found.append((change, result.max_concurrency, result.kv_cache_gib))
        if len(found) == MAX_SUGGESTIONS:
            break
    return tuple(found)


def _candidates(
    profile: Profile,
    target: CheckpointInfo,
    draft: CheckpointInfo | None,
    gpu: Gpu,
    estimate: Estimator,
) -> Iterator[tuple[str, Profile]]:
    serving, proposer, hardware = profile.serving, profile.proposer, profile.hardware
    if not serving.kv_cache_dtype.startswith("fp8") and _fp8_kv_runs(profile, target, gpu):
        yield "serving.kv_cache_dtype: fp8", _with(profile, "serving", kv_cache_dtype="fp8")
    tp = hardware.tensor_parallel_size
    if proposer.draft_tensor_parallel_size and proposer.draft_tensor_parallel_size < tp:
        change = f"proposer.draft_tensor_parallel_size: {tp}"
        yield change, _with(profile, "proposer", draft_tensor_parallel_size=tp)
    if proposer.method in ("draft_model", "eagle", "eagle3", "mtp"):
        ngram = _with(profile, "proposer", method="ngram", model=None, revision=None)
        yield "proposer.method: ngram (no draft weights or draft KV)", ngram
    context = _longest_context(profile, target, draft, gpu, estimate)
    if context is not None:
        yield f"serving.max_model_len: {context}", _with(profile, "serving", max_model_len=context)
    for bigger in (2 * tp, 4 * tp, 8 * tp):
        if bigger <= hardware.gpus_per_node:
            yield (
                f"hardware.tensor_parallel_size: {bigger}",
                _with(profile, "hardware", tensor_parallel_size=bigger),
            )
    if profile.target.quantization is None and target.quant_method is None:
        yield "target.quantization: fp8", _with(profile, "target", quantization="fp8")
    current = estimate(profile, target, draft, gpu)
    if current is not None and current.max_concurrency >= 1:
        lower = current.max_concurrency
        yield f"serving.max_concurrency: {lower}", _with(profile, "serving", max_concurrency=lower)


def _fp8_kv_runs(profile: Profile, target: CheckpointInfo, gpu: Gpu) -> bool:
    """An fp8 KV cache is a change to offer only where the pinned release runs it on this GPU
    with no doubt (the `engine.kv-cache-dtype-gpu` rule would otherwise refuse or warn)."""
    engine = ENGINES[profile.engine.name]
    if "fp8" not in engine.kv_cache_dtypes:
        return False
    try:
        release = release_for(profile.engine.name, profile.engine.version)
    except ProfileError:  # a release older than the capability matrix: nothing to check with
        return False
    mla = target.is_mla if target.kv_heads or target.is_mla else None
    return engine.fp8_kv_cache_on(release, gpu, "fp8", mla=mla) is None


def _longest_context(
    profile: Profile,
    target: CheckpointInfo,
    draft: CheckpointInfo | None,
    gpu: Gpu,
    estimate: Estimator,
) -> int | None:
    """The longest max_model_len (a multiple of CONTEXT_STEP, shorter than now) that fits."""
    low, high = 1, (profile.serving.max_model_len - 1) // CONTEXT_STEP
    best = None
    while low <= high:
        middle = (low + high) // 2
        candidate = _with(profile, "serving", max_model_len=middle * CONTEXT_STEP)
        result = estimate(candidate, target, draft, gpu)
        if result is not None and result.meets_request:
            best, low = middle * CONTEXT_STEP, middle + 1
        else:
            high = middle - 1
    return best


def _with(profile: Profile, block: str, **changes: Any) -> Profile:
    section = getattr(profile, block).model_copy(update=changes)
    return profile.model_copy(update={block: section})
