"""`suggest` output: a ranked table, the sources behind each option's numbers, and the rejected
candidates with the rules' reasons (text); the same as one JSON document."""

from __future__ import annotations

from typing import Any, Final

from orchestrator.bench.estimate import LABEL, Disagreement, SpeedupEstimate
from orchestrator.bench.planned import NoEstimate
from orchestrator.checkpoint.catalog import answering_catalog
from orchestrator.suggest.support import describe_support
from orchestrator.suggest.types import Option, Rejection, Suggestions

METHOD_NAMES: Final = {
    "mtp": "MTP",
    "eagle3": "EAGLE-3",
    "eagle": "EAGLE",
    "draft_model": "draft",
    "ngram": "n-gram",
    "none": "none",
}
#: Sources quoted per acceptance figure in the text report (JSON has them all).
_SOURCES_SHOWN: Final = 2
_KIND_MARK: Final = {"published": "*", "prior": "~", "measured": "="}
#: Longest proposer id shown in the table (the details below it have the full id).
_NAME_WIDTH: Final = 46
#: Longest rule message quoted in a rejected line.
_WHY_WIDTH: Final = 320


def suggestions_text(found: Suggestions) -> str:
    """The human-readable report."""
    lines = _header(found)
    if found.placement.problem is not None:
        lines.append(f"no options: {found.placement.problem}")
        lines += [f"  {f.severity} {f.rule}: {f.what}" for f in found.placement.findings]
        return "\n".join(lines)
    if found.options:
        lines += ["", *_table(found), "", "where the numbers come from:"]
        for rank, option in enumerate(found.options, 1):
            lines += _details(rank, option)
    else:
        lines.append("no compatible proposer found")
    if found.rejected:
        lines += ["", f"rejected ({len(found.rejected)}):"]
        lines += [_rejected_line(r) for r in found.rejected]
    lines += ["", f"speedups are an {LABEL}"]
    return "\n".join(lines)


def suggestions_json(found: Suggestions, written: dict[int, str] | None = None) -> dict[str, Any]:
    """The JSON document (`--format json`); `written` maps option ranks to written files."""
    request, placement, target = found.request, found.placement, found.target
    return {
        "target": {
            "model": request.target,
            "resolved_from": target.location,
            "catalog": answering_catalog(target),
            "architectures": list(target.architectures),
        },
        "request": {
            "gpu": request.gpu,
            "engines": list(request.engines),
            "max_model_len": placement.max_model_len,
            "concurrency": request.concurrency,
            "workload": request.workload,
            "context_tokens": request.context_tokens,
        },
        "placement": {
            "gpu": placement.gpu,
            "tensor_parallel_size": placement.tensor_parallel_size,
            "concurrency": placement.concurrency,
            "baseline_max_concurrency": placement.baseline_concurrency,
            "problem": placement.problem,
            "findings": [f.as_json() for f in placement.findings],
        },
        "options": [
            _option_json(rank, option, (written or {}).get(rank))
            for rank, option in enumerate(found.options, 1)
        ],
        "rejected": [_rejection_json(r) for r in found.rejected],
    }


def speedups(option: Option) -> tuple[float, float] | None:
    """Predicted speedup at concurrency 1 and at the option's load, at its draft length."""
    estimate = option.estimate
    if isinstance(estimate, NoEstimate):
        return None
    k, load = option.num_speculative_tokens, option.plan.profile.serving.max_concurrency
    return estimate.row(1).at(k), estimate.row(load).at(k)


def shown_disagreements(option: Option) -> tuple[Disagreement, ...]:
    """The disagreements behind the two speedups shown for an option (concurrency 1 and its load,
    at its draft length)."""
    estimate = option.estimate
    if isinstance(estimate, NoEstimate):
        return ()
    k, load = option.num_speculative_tokens, option.plan.profile.serving.max_concurrency
    shown = {estimate.row(1).concurrency, estimate.row(load).concurrency}
    return tuple(
        d
        for d in estimate.disagreements
        if d.num_speculative_tokens == k and d.concurrency in shown
    )


def _header(found: Suggestions) -> list[str]:
    request, placement = found.request, found.placement
    catalog = answering_catalog(found.target)
    origin = f"{catalog} catalog" if catalog else found.target.source
    tp = placement.tensor_parallel_size
    lines = [
        f"suggest {request.target}: {', '.join(request.engines)} on "
        f"{f'{tp} x ' if tp else ''}{request.gpu}, max_model_len {placement.max_model_len}, "
        f"concurrency {placement.concurrency}, {request.workload} workload",
        f"  target resolved from {origin}: {found.target.location}",
    ]
    if placement.baseline_concurrency is not None:
        lines.append(
            f"  without speculation {placement.baseline_concurrency} sequences of "
            f"{placement.max_model_len} tokens fit per replica"
        )
    return lines


def _table(found: Suggestions) -> list[str]:
    head = (
        f"{'#':>2}  {'method':<7} {'proposer':<{_NAME_WIDTH}} {'engine':<7} {'draft GiB':>9} "
        f"{'draft KV':>8} {'seqs spec/base':>14} {'accept@k':>9} {'x@1':>6} {'x@load':>7}  k"
    )
    lines = [head]
    for rank, option in enumerate(found.options, 1):
        memory = option.plan.memory
        assert memory is not None  # options are plans with a budget
        k = option.num_speculative_tokens
        share = memory.draft_kv_bytes_per_token / max(memory.kv_bytes_per_token, 1)
        accepts = option.acceptance
        accept = f"{accepts.curve.mean_length(k):.2f}{_KIND_MARK[accepts.kind]}" if accepts else "?"
        gains = speedups(option)
        x1, xl = (f"{gains[0]:.2f}x", f"{gains[1]:.2f}x") if gains else ("-", "-")
        name = option.candidate.name
        name = name if len(name) <= _NAME_WIDTH else "..." + name[-(_NAME_WIDTH - 3) :]
        seqs = f"{memory.max_concurrency}/{memory.baseline_max_concurrency}"
        unknown = isinstance(option.estimate, NoEstimate) and option.estimate.cost_unknown
        weights = "?" if unknown else f"{memory.draft_weights_gib:.2f}"
        kv = "?" if unknown else f"{share:.1%}"
        lines.append(
            f"{rank:>2}  {METHOD_NAMES[option.candidate.method]:<7} {name:<{_NAME_WIDTH}} "
            f"{option.engine:<7} {weights:>9} {kv:>8} {seqs:>14} "
            f"{accept:>9} {x1:>6} {xl:>7}  {k}"
        )
    lines.append(
        "    accept@k: tokens per step (* published for this proposer, ~ prior for its method); "
        "x@1 / x@load: predicted speedup at concurrency 1 / at the load; ? unknown"
    )
    return lines


def _details(rank: int, option: Option) -> list[str]:
    candidate = option.candidate
    lines = [
        f"{rank:>2}. {METHOD_NAMES[candidate.method]} {candidate.name} on {option.engine} "
        f"{option.plan.release.version} ({candidate.origin})"
    ]
    if candidate.verifier:
        lines.append(f"    trained for {candidate.verifier}")
    if candidate.sources:
        lines.append(f"    catalog source: {candidate.sources[0]}")
    lines.append(f"    supported by: {describe_support(option.support)}")
    estimate = option.estimate
    if estimate.acceptance is not None:
        lines.append(f"    acceptance: {estimate.acceptance.label}")
        sources = estimate.acceptance.sources
        lines += [f"      source: {s}" for s in sources[:_SOURCES_SHOWN]]
        if len(sources) > _SOURCES_SHOWN:
            lines.append(f"      and {len(sources) - _SOURCES_SHOWN} more (--format json)")
    if isinstance(estimate, NoEstimate):
        lines.append(f"    speedup: none estimated ({estimate.reason})")
    else:
        lines += _estimate_lines(option, estimate)
    lines += [f"    note: {note}" for note in option.notes]
    return lines


def _estimate_lines(option: Option, estimate: SpeedupEstimate) -> list[str]:
    k = option.num_speculative_tokens
    lines = [
        f"    num_speculative_tokens {k}: {estimate.reason}",
        f"    draft/target cost per step at concurrency 1: c={estimate.cost_ratio:.3f}",
    ]
    alone = estimate.row(1)
    if alone.best_k != k:
        lines.append(
            f"    at concurrency 1, k={alone.best_k} would be best ({alone.best_speedup:.2f}x vs "
            f"{alone.at(k):.2f}x at k={k})"
        )
    if estimate.stops_paying_at is not None:
        lines.append(f"    estimated to stop paying at concurrency {estimate.stops_paying_at}")
    lines += [
        f"    assumes: {value}" for name, value in estimate.assumptions if name == "moe_low_batch"
    ]
    lines += [
        f"    note: {d.rule} warns at concurrency {d.concurrency} (k={d.num_speculative_tokens}) "
        f"while the estimate gives {d.estimated_speedup:.2f}x: {d.why}"
        for d in shown_disagreements(option)
    ]
    gains = speedups(option)
    if gains is not None and gains[1] <= 1.0:
        lines.append("    note: no gain predicted at this load; measure before deploying it")
    return lines


def _rejected_line(rejection: Rejection) -> str:
    engines = "/".join(rejection.engines)
    why = rejection.reason
    why = why if len(why) <= _WHY_WIDTH else why[: _WHY_WIDTH - 3] + "..."
    rules = f" [{', '.join(rejection.rules)}]" if rejection.rules else ""
    method = METHOD_NAMES[rejection.candidate.method]
    return f"  - {rejection.candidate.name} ({method}, {engines}): {why}{rules}"


def _option_json(rank: int, option: Option, written: str | None) -> dict[str, Any]:
    memory = option.plan.memory
    assert memory is not None
    estimate = option.estimate
    gains = speedups(option)
    return {
        "rank": rank,
        "kind": option.candidate.kind,
        "method": option.candidate.method,
        "proposer": option.candidate.model,
        "origin": option.candidate.origin,
        "verifier": option.candidate.verifier,
        "catalog_sources": list(option.candidate.sources),
        "engine": option.engine,
        "engine_version": option.plan.release.version,
        "supported_by": {engine: versions for engine, versions in option.support},
        "num_speculative_tokens": option.num_speculative_tokens,
        "max_concurrency": option.plan.profile.serving.max_concurrency,
        "memory": {
            "draft_weights_gib": round(memory.draft_weights_gib, 3),
            "draft_kv_bytes_per_token": memory.draft_kv_bytes_per_token,
            "kv_bytes_per_token": memory.kv_bytes_per_token,
            "max_concurrency": memory.max_concurrency,
            "baseline_max_concurrency": memory.baseline_max_concurrency,
        },
        "acceptance": (
            estimate.acceptance.as_json(option.num_speculative_tokens)
            if estimate.acceptance is not None
            else None
        ),
        "speedup_at_concurrency_1": round(gains[0], 4) if gains else None,
        "speedup_at_load": round(gains[1], 4) if gains else None,
        "speedup_estimate": (estimate.as_json() if isinstance(estimate, SpeedupEstimate) else None),
        "no_estimate_reason": estimate.reason if isinstance(estimate, NoEstimate) else None,
        "findings": [f.as_json() for f in option.plan.findings],
        "notes": list(option.notes),
        "profile": written,
    }


def _rejection_json(rejection: Rejection) -> dict[str, Any]:
    return {
        "method": rejection.candidate.method,
        "proposer": rejection.candidate.model,
        "origin": rejection.candidate.origin,
        "engines": list(rejection.engines),
        "reason": rejection.reason,
        "rules": list(rejection.rules),
        "findings": [f.as_json() for f in rejection.findings],
    }
