"""Candidate profiles and the shared placement (GPU count) for `suggest`.

Every option is a real `Profile`, planned with `plan_profile` exactly as `validate` plans a file,
so what `suggest` lists and what `validate` says of the written profile cannot disagree.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from orchestrator.checkpoint.info import CheckpointInfo
from orchestrator.compatibility.rule import Finding
from orchestrator.engines.names import EngineName
from orchestrator.errors import OrchestratorError
from orchestrator.memory.budget import known_weights, unavailable_reason
from orchestrator.memory.gpus import gpu_catalog
from orchestrator.plan.build import plan_profile
from orchestrator.plan.resolver import CheckpointSource
from orchestrator.plan.types import PlanResult
from orchestrator.profile.schema import (
    MAX_NAME_LENGTH,
    DeploySpec,
    EngineSpec,
    HardwareSpec,
    Metadata,
    Profile,
    ProposerSpec,
    ServingSpec,
    TargetSpec,
)
from orchestrator.suggest.support import newest_release
from orchestrator.suggest.types import Candidate, Placement, SuggestRequest

#: Draft length every candidate is first checked with (the profile schema's default).
FIRST_K: Final = 3
#: max_model_len when the user gives none (the profile schema's default).
DEFAULT_MAX_MODEL_LEN: Final = 8192
#: Tensor parallel sizes tried, smallest first, within one node.
TENSOR_PARALLEL_SIZES: Final = (1, 2, 4, 8)
#: Rules whose error means "try more GPUs" rather than "the target cannot be served as asked".
_SIZE_RULES: Final = frozenset({"memory.over-budget", "engine.tensor-parallel-shape"})


def build_profile(
    target_model: str,
    candidate: Candidate | None,
    engine: EngineName,
    placement: Placement,
    *,
    k: int = FIRST_K,
    concurrency: int | None = None,
) -> Profile:
    """The profile of one candidate on one engine (a baseline when `candidate` is None)."""
    proposer = ProposerSpec()
    if candidate is not None:
        proposer = ProposerSpec(
            method=candidate.method, model=candidate.model, num_speculative_tokens=k
        )
    return Profile(
        apiVersion="specdeploy/v1",
        kind="SpeculativeDeployment",
        metadata=Metadata(name=profile_name(target_model, candidate)),
        engine=EngineSpec(name=engine, version=newest_release(engine)),
        target=TargetSpec(model=target_model),
        proposer=proposer,
        hardware=HardwareSpec(
            gpu=placement.gpu, tensor_parallel_size=placement.tensor_parallel_size or 1
        ),
        serving=ServingSpec(
            max_model_len=placement.max_model_len,
            max_concurrency=concurrency or placement.concurrency,
        ),
        # The baseline twin makes every written option ready for `specdeploy bench`.
        deploy=DeploySpec(baseline=candidate is not None),
    )


def plan(profile: Profile, source: CheckpointSource, label: str) -> PlanResult:
    return plan_profile(profile, source, profile_path=Path(label))


def place(
    request: SuggestRequest, target_model: str, target: CheckpointInfo, source: CheckpointSource
) -> Placement:
    """The smallest tensor parallel size at which the target alone holds the requested load (or
    at least one max_model_len sequence), or why none does."""
    length = request.max_model_len or min(
        DEFAULT_MAX_MODEL_LEN, target.max_context or DEFAULT_MAX_MODEL_LEN
    )
    sizes = (
        (request.tensor_parallel_size,) if request.tensor_parallel_size else TENSOR_PARALLEL_SIZES
    )
    engine = request.engines[0]
    fitting: list[tuple[int, int]] = []
    for tp in sizes:
        trial = Placement(request.gpu, tp, length, request.concurrency, None)
        result = plan(build_profile(target_model, None, engine, trial), source, "baseline")
        blocking = [f for f in result.errors if f.rule not in _SIZE_RULES]
        if blocking:
            problem = f"{target_model} cannot be served as asked on {engine}"
            return Placement(
                request.gpu, tp, length, request.concurrency, None, problem, tuple(blocking)
            )
        memory = result.memory
        if memory is None and not _shape_refused(result.errors):
            # Not "fits on no GPU": the budget cannot be made at all; say why and what is known.
            trial_profile = build_profile(target_model, None, engine, trial)
            reason = unavailable_reason(trial_profile, target) or "the target's size is unknown"
            known = known_weights(trial_profile, target)
            problem = f"the memory of {target_model} cannot be estimated: {reason}" + (
                f"; {known}" if known else ""
            )
            return Placement(request.gpu, None, length, request.concurrency, None, problem)
        if memory is None or not memory.one_sequence_fits or _shape_refused(result.errors):
            continue
        fitting.append((tp, memory.baseline_max_concurrency))
        if memory.baseline_max_concurrency >= request.concurrency:
            return Placement(
                request.gpu, tp, length, request.concurrency, memory.baseline_max_concurrency
            )
    if fitting:
        tp, most = max(fitting, key=lambda pair: pair[1])
        return Placement(request.gpu, tp, length, max(most, 1), most)
    return Placement(
        request.gpu,
        None,
        length,
        request.concurrency,
        None,
        _does_not_fit(request, target_model, length, source),
    )


def profile_name(target_model: str, candidate: Candidate | None) -> str:
    """A DNS-1123 metadata.name: the target's name and the proposer's."""
    target = _slug(Path(target_model).name or target_model)
    if candidate is None:
        tail = "baseline"
    elif candidate.model is None:
        tail = candidate.method.replace("_", "-")
    else:
        tail = _slug(Path(candidate.model).name)
    name = f"{target[:20].strip('-')}-{tail}"[:MAX_NAME_LENGTH].strip("-")
    return name if name[0].isalpha() else f"m-{name}"[:MAX_NAME_LENGTH].strip("-")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "model"


def _shape_refused(errors: tuple[Finding, ...]) -> bool:
    return any(f.rule == "engine.tensor-parallel-shape" for f in errors)


def _does_not_fit(
    request: SuggestRequest, target_model: str, length: int, source: CheckpointSource
) -> str:
    """Where the target would fit instead: other GPUs of the catalog, at the smallest TP."""
    elsewhere = []
    for gpu in gpu_catalog():
        if gpu == request.gpu:
            continue
        for tp in TENSOR_PARALLEL_SIZES:
            trial = Placement(gpu, tp, length, 1, None)
            try:
                result = plan(
                    build_profile(target_model, None, request.engines[0], trial), source, "x"
                )
            except OrchestratorError:
                break
            if result.memory is not None and result.memory.one_sequence_fits and not result.errors:
                elsewhere.append(f"{gpu} (TP {tp})")
                break
    sizes = request.tensor_parallel_size or TENSOR_PARALLEL_SIZES[-1]
    where = ", ".join(elsewhere[:5]) or "no GPU of the catalog within one node"
    return (
        f"{target_model} does not fit one sequence of max_model_len={length} on up to {sizes} x "
        f"{request.gpu}; it fits on {where}: rerun with --gpu, or a shorter --max-model-len"
    )
