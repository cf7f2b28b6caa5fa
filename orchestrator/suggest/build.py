"""`suggest`: the compatible proposers of a target, ranked, with their cost and expected gain, and
the candidates that were rejected with the rules' reasons.

Each candidate x engine becomes a real profile planned by `plan_profile` (the code `validate`
runs). An option is a plan with no error finding; its draft length is the one the estimate
recommends for the requested load, and its max_concurrency what fits at max_model_len.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from orchestrator.bench.planned import NoEstimate, estimate_planned
from orchestrator.checkpoint.catalog import catalog_entries
from orchestrator.checkpoint.catalog.entries import CatalogEntry
from orchestrator.checkpoint.catalog.user import user_catalog_entries
from orchestrator.checkpoint.compare import compare_tokenizers
from orchestrator.checkpoint.info import CheckpointInfo, Unresolved, looks_like_path
from orchestrator.compatibility.rule import Finding
from orchestrator.engines.names import EngineName
from orchestrator.errors import IncompatibleError, OrchestratorError
from orchestrator.plan.resolver import CheckpointSource, LocalCheckpoints
from orchestrator.plan.types import DeploymentPlan, PlanResult
from orchestrator.suggest.candidates import find_candidates, group_key, trained_for_another
from orchestrator.suggest.profiles import build_profile, place, plan
from orchestrator.suggest.support import supported_releases
from orchestrator.suggest.types import (
    Candidate,
    Option,
    Placement,
    Rejection,
    Suggestions,
    SuggestRequest,
)

#: A draft picked from the built-in catalog must weigh at most this share of the target: a draft
#: step then costs c <= 0.25 of a target step, and even with every token accepted a k=3 draft
#: gains at most (k + 1) / (c·k + 1) = 2.3x (Leviathan et al. 2023, Theorem 3.8).
MAX_DRAFT_SHARE: Final = 0.25

# Short names of the reasons the rules give, for the rejected list.
_REASONS: Final[dict[str, str]] = {
    "pairing.draft-tokenizer": "different tokenizer",
    "pairing.draft-vocab-size": "different vocabulary size",
    "pairing.eagle-head-hidden-size": "hidden size does not match",
    "pairing.eagle-head-vocab": "vocabulary does not match",
    "pairing.eagle-generation": "wrong EAGLE generation",
    "pairing.eagle-aux-layers": "auxiliary layers missing from the target",
    "pairing.mtp-layers": "no MTP layers",
    "pairing.mtp-weights": "no MTP weights",
    "engine.method-supported": "not supported by the engine release",
    "engine.trtllm-eagle-checkpoint": "EAGLE-1 head on TensorRT-LLM",
    "memory.over-budget": "does not fit the GPU memory",
    "checkpoint.unresolved": "metadata not found",
    "serving.max-model-len": "shorter context than max_model_len",
}


#: Which refusal names the candidate's problem best: the pairing before engine or memory limits.
_REASON_ORDER: Final[dict[str, int]] = {"pairing": 0, "checkpoint": 1, "engine": 2, "serving": 3}


def suggest(request: SuggestRequest) -> Suggestions:
    """Everything `specdeploy suggest` prints. Raises IncompatibleError (exit 4) when the target
    cannot be resolved."""
    source = LocalCheckpoints(base_dir=request.base_dir, offline=request.offline)
    target_model, local_dir = _target_model(request)
    target = source.resolve("target.model", target_model, None)
    if isinstance(target, Unresolved):
        raise IncompatibleError(
            f"TARGET {request.target} could not be resolved (tried: {'; '.join(target.tried)})",
            why="suggest needs the target's config.json to check any proposer against it",
            fix=_resolution_fix(request),
        )
    if target.eagle is not None:
        raise IncompatibleError(
            f"TARGET {request.target} is an EAGLE head, not a model to serve",
            why="a head only drafts for the target it was trained with",
            fix="give the model the head was trained for as TARGET",
        )
    placement = place(request, target_model, target, source)
    if placement.problem is not None:
        return Suggestions(request, target, placement, (), ())
    candidates = find_candidates(
        target,
        target_model,
        local_dir,
        builtin=catalog_entries(),
        user=_user_entries(),
        source=source,
    )
    candidates.sort(key=lambda c: (group_key(c, target_model), c.name.lower()))
    options: list[Option] = []
    rejected: list[Rejection] = []
    for candidate in candidates:
        for engine in request.engines:
            found = _evaluate(request, target_model, target, candidate, engine, placement, source)
            (options if isinstance(found, Option) else rejected).append(found)  # type: ignore[arg-type]
    return Suggestions(
        request,
        target,
        placement,
        tuple(_ranked(options, target_model)),
        tuple(_collapse(rejected)),
    )


def _evaluate(
    request: SuggestRequest,
    target_model: str,
    target: CheckpointInfo,
    candidate: Candidate,
    engine: EngineName,
    placement: Placement,
    source: CheckpointSource,
) -> Option | Rejection:
    result = _plan_fitting(target_model, candidate, engine, placement, source, k=3)
    if result.errors or not isinstance(result, DeploymentPlan):
        return _rejected(candidate, engine, result.errors)
    verifier = trained_for_another(candidate, target_model)
    if verifier is not None:
        return Rejection(
            candidate,
            (engine,),
            f"trained for {verifier}, not {target_model}: it passes the pairing rules but its "
            "acceptance on this target is unknown",
        )
    if candidate.kind == "draft" and result.draft is not None:
        tokenizers = compare_tokenizers(target, result.draft)
        if tokenizers.verdict not in ("same", "related"):
            return Rejection(
                candidate,
                (engine,),
                f"tokenizer not known to match the target's ({tokenizers.detail}); the pairing "
                "rules could not check it, so it is no same-tokenizer draft",
            )
    memory = result.memory
    if candidate.kind == "draft" and memory is not None:
        share = memory.draft_weights_gib / max(memory.target_weights_gib, 1e-9)
        # Drafts the user placed are always estimated, unless they are no smaller at all.
        limit = 1.0 if candidate.from_user else MAX_DRAFT_SHARE
        if share >= limit:
            return Rejection(
                candidate,
                (engine,),
                f"not small relative to the target: draft weights {memory.draft_weights_gib:.1f} "
                f"GiB are {share:.0%} of the target's {memory.target_weights_gib:.1f} GiB per GPU "
                f"(at most {limit:.0%}: a larger draft cannot pay for its own steps)",
            )
    found = estimate_planned(
        result, workload=request.workload, context_tokens=request.context_tokens
    )
    if not isinstance(found, NoEstimate):
        k = found.recommended_num_speculative_tokens
        tuned = _plan_fitting(target_model, candidate, engine, placement, source, k=k)
        if isinstance(tuned, DeploymentPlan):
            result = tuned
            found = estimate_planned(
                result, workload=request.workload, context_tokens=request.context_tokens
            )
    support = supported_releases(result.profile, target)
    return Option(candidate, engine, result, found, support, _notes(result, placement))


def _plan_fitting(
    target_model: str,
    candidate: Candidate,
    engine: EngineName,
    placement: Placement,
    source: CheckpointSource,
    *,
    k: int,
) -> PlanResult:
    """The candidate's plan at the placement's load, or at what fits at max_model_len when the
    draft's memory lowers it (never fewer than one sequence)."""
    label = f"suggest:{candidate.name}"
    try:
        profile = build_profile(target_model, candidate, engine, placement, k=k)
    except (ValueError, OrchestratorError) as exc:  # a schema limit (e.g. k) the profile refuses
        raise AssertionError(f"suggest built an invalid profile: {exc}") from exc
    result = plan(profile, source, label)
    memory = result.memory
    only_memory = result.errors and all(f.rule == "memory.over-budget" for f in result.errors)
    if only_memory and memory is not None and memory.max_concurrency >= 1:
        profile = build_profile(
            target_model, candidate, engine, placement, k=k, concurrency=memory.max_concurrency
        )
        result = plan(profile, source, label)
    return result


def _notes(result: DeploymentPlan, placement: Placement) -> tuple[str, ...]:
    notes = []
    memory = result.memory
    wanted = placement.concurrency
    if memory is not None and result.profile.serving.max_concurrency < wanted:
        notes.append(
            f"serving.max_concurrency is {result.profile.serving.max_concurrency}: only that many "
            f"sequences of {placement.max_model_len} tokens fit with this proposer ({wanted} asked)"
        )
    return tuple(notes)


def _rejected(candidate: Candidate, engine: EngineName, errors: tuple[Finding, ...]) -> Rejection:
    ordered = sorted(errors, key=lambda f: _REASON_ORDER.get(f.rule.split(".")[0], 9))
    first = ordered[0] if ordered else None
    if first is None:
        return Rejection(candidate, (engine,), "the plan was refused")
    short = _REASONS.get(first.rule, first.rule)
    trained = ""
    if first.rule.startswith("pairing.eagle") and candidate.verifier:
        trained = f"head trained for {candidate.verifier}: "
    return Rejection(candidate, (engine,), f"{trained}{short} ({first.what})", tuple(ordered))


def _ranked(options: list[Option], target_model: str) -> list[Option]:
    """Kinds in issue-12 order (MTP, heads, drafts, n-gram); within a kind the original authors'
    heads first, then proposers with a published acceptance of their own, then by predicted
    speedup at the requested load (no estimate last)."""

    def key(option: Option) -> tuple[tuple[int, int, int, int], int, float, str]:
        group = group_key(option.candidate, target_model)
        name = option.candidate.name.lower()
        if isinstance(option.estimate, NoEstimate):
            return (group, 2, 0.0, name)
        evidence = (
            0
            if option.estimate.acceptance and option.estimate.acceptance.kind == "published"
            else 1
        )
        load = option.plan.profile.serving.max_concurrency
        return (group, evidence, -option.estimate.row(load).at(option.num_speculative_tokens), name)

    return sorted(options, key=key)


def _collapse(rejected: list[Rejection]) -> list[Rejection]:
    """One entry per candidate and reason, listing every engine that gave it."""
    merged: dict[tuple[str, str, str], Rejection] = {}
    for item in rejected:
        key = (
            item.candidate.method,
            item.candidate.name,
            item.rules[0] if item.rules else item.reason,
        )
        if key in merged:
            old = merged[key]
            merged[key] = Rejection(
                old.candidate, (*old.engines, *item.engines), old.reason, old.findings
            )
        else:
            merged[key] = item
    return list(merged.values())


def _target_model(request: SuggestRequest) -> tuple[str, Path | None]:
    """The target as profiles name it, and its directory when it is a local one."""
    path = Path(request.target).expanduser()
    path = path if path.is_absolute() else request.base_dir / path
    if path.is_dir():
        # Absolute, but symlinks kept: profiles and the report show the path the user gave.
        absolute = Path(os.path.abspath(path))
        return str(absolute), absolute
    return request.target, None


def _resolution_fix(request: SuggestRequest) -> str:
    if looks_like_path(request.target):
        return "pass a checkpoint directory that holds a config.json"
    hub = "; or drop --offline so the hub can be asked" if request.offline else ""
    return (
        f"check the id; or download its metadata once (`huggingface-cli download "
        f"{request.target} --include config.json 'tokenizer*' '*.index.json'`); or record a "
        f"local copy with `specdeploy catalog add DIR --as {request.target}`{hub}"
    )


def _user_entries() -> tuple[CatalogEntry, ...]:
    try:
        return user_catalog_entries()
    except OrchestratorError:  # a damaged user catalog: resolution reports it per model
        return ()
