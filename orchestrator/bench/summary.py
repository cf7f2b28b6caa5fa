"""Per-arm, per-level summary of raw request results: latency distributions, throughput,
goodput under an optional SLO, failures by cause, and the engine's acceptance figures."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from orchestrator.bench.metrics import PhaseTimes
from orchestrator.bench.stats import Distribution
from orchestrator.bench.sweep import ArmLevel, describe_load

_TOKEN_COUNT = re.compile(r"\b\d+ tokens\b")


@dataclass(frozen=True)
class Slo:
    """Optional service-level objective; a request meets it when both bounds hold."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None

    @property
    def active(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None


@dataclass(frozen=True)
class ArmSummary:
    """One arm at one level. Times in milliseconds, rates per second."""

    label: str
    concurrency: int
    """Closed-loop clients; for an open-loop level, the in-flight cap."""
    request_rate: float | None
    """Open-loop arrivals per second; None for a closed-loop level."""
    complete: bool
    sent: int
    ok: int
    failed: int
    errors: tuple[tuple[str, int], ...]
    """Failure causes (token counts folded to N) with their counts, most frequent first."""
    wall_s: float
    ttft_ms: Distribution
    """Queue wait + prefill + first token, as the client sees it."""
    decode_ms: Distribution
    """First token to last token."""
    tpot_ms: Distribution
    itl_ms: Distribution
    e2e_ms: Distribution
    tokens_per_s_per_request: Distribution
    output_tokens_per_s: float
    requests_per_s: float
    goodput_requests_per_s: float | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    phases: PhaseTimes | None
    metrics_note: str | None
    mean_in_flight: float | None = None
    """Requests in flight, averaged over the level's wall time: the load the server really
    held (a closed-loop level holds its concurrency only while every client has a request)."""
    retried: int = 0
    """Requests sent again on a fresh connection after the server had closed a reused one."""
    usage_distrusted: int = 0
    """Requests whose `usage.completion_tokens` was not believed (chunks counted instead)."""

    @property
    def load_text(self) -> str:
        return describe_load(self.concurrency, self.request_rate)


def summarize(arm: ArmLevel, slo: Slo | None = None) -> ArmSummary:
    """Reduce one arm-level's raw results to the reported figures."""
    slo = slo or Slo()
    ok = [r for r in arm.results if r.ok]
    wall = arm.wall_s if arm.wall_s > 0 else float("nan")
    ms = 1000.0
    good = [r for r in ok if _meets(r.ttft_s, r.tpot_s, slo)] if slo.active else None
    accept = arm.acceptance
    return ArmSummary(
        label=arm.label,
        concurrency=arm.concurrency,
        request_rate=arm.request_rate,
        complete=arm.complete,
        sent=len(arm.results),
        ok=len(ok),
        failed=len(arm.results) - len(ok),
        errors=tuple(Counter(_cause(r.error) for r in arm.results if r.error).most_common()),
        wall_s=arm.wall_s,
        ttft_ms=Distribution.of([r.ttft_s * ms for r in ok if r.ttft_s is not None]),
        decode_ms=Distribution.of([r.decode_s * ms for r in ok if r.decode_s is not None]),
        tpot_ms=Distribution.of([r.tpot_s * ms for r in ok if r.tpot_s is not None]),
        itl_ms=Distribution.of([g * ms for r in ok for g in r.chunk_gaps_s]),
        e2e_ms=Distribution.of([r.latency_s * ms for r in ok]),
        tokens_per_s_per_request=Distribution.of(
            [r.tokens_per_s for r in ok if r.tokens_per_s is not None]
        ),
        output_tokens_per_s=sum(r.output_tokens for r in ok) / wall,
        requests_per_s=len(ok) / wall,
        goodput_requests_per_s=None if good is None else len(good) / wall,
        acceptance_rate=None if accept is None else accept.acceptance_rate,
        mean_acceptance_length=None if accept is None else accept.mean_acceptance_length,
        phases=arm.phases,
        metrics_note=arm.metrics_note,
        mean_in_flight=sum(r.latency_s for r in arm.results) / wall if arm.results else None,
        retried=sum(r.retried for r in arm.results),
        usage_distrusted=sum(r.usage_note is not None for r in arm.results),
    )


def _meets(ttft_s: float | None, tpot_s: float | None, slo: Slo) -> bool:
    if slo.ttft_ms is not None and (ttft_s is None or ttft_s * 1000.0 > slo.ttft_ms):
        return False
    return not (slo.tpot_ms is not None and tpot_s is not None and tpot_s * 1000.0 > slo.tpot_ms)


def _cause(error: str) -> str:
    return _TOKEN_COUNT.sub("N tokens", error)
