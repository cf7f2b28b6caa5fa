"""Verdicts: per level, does speculation pay? Where does it stop paying? What looks wrong?

Speedup = output tokens per second of request time (the level's output tokens over the sum of its
requests' end-to-end latencies), candidate over baseline, with a bootstrap interval. Not the mean
of per-request rates: a server that runs fewer requests at once and queues the rest (speculation
under a token budget does) makes those it runs fast and the queued ones slow, and the mean of
their rates rises while every request waits longer on average. A rate of sums follows the mean
latency, and so, at a fixed concurrency, the throughput (Little's law). A level *pays* when the
whole interval is above 1, *loses* when it is below, and is *inconclusive* otherwise. The cost rule (the issue's decision rule) is checked separately:
speculation pays while its time per committed output token (draft + verify + coordination)
stays below the baseline's time per output token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from orchestrator.bench.stats import CONFIDENCE, Ratio, ratio_of_means, ratio_of_rates
from orchestrator.bench.summary import ArmSummary, Slo, summarize
from orchestrator.bench.sweep import ArmLevel, SweepRecord, describe_load

Outcome = Literal["pays", "loses", "inconclusive", "no data"]

MISPAIRING_MAX_LENGTH: Final = 1.1
"""Mean acceptance length (bonus included, range 1..K+1) at or below which the draft is almost
never accepted: sglang PR #21272 and #27908 report silent misconfigurations at exactly 1.00."""
DEGENERATE_SHARE: Final = 0.25
"""Share of degenerate outputs that triggers the warning (looping outputs inflate acceptance:
tokenspeed #1305 measured 74.6 % on a two-token loop vs 48.5 % on real prompts)."""
_MIN_WORDS: Final = 24
_MIN_DISTINCT_TRIGRAMS: Final = 0.3
_LOW_AGREEMENT: Final = 0.5
BEHIND_SCHEDULE_SHARE: Final = 0.8
"""Open loop: share of the schedule's arrival rate below which the client's actual start rate
means the server saw less load than the level's label (the event loop was busy starting and
reading streams; a constant lag alone does not lower the load, a growing one does)."""
UNDERLOAD_SHARE: Final = 0.75
"""Closed loop: share of the labelled concurrency below which the mean number of requests in
flight means the server held less load than the label says (too few requests per client, so
the level spends much of its time draining; or fewer requests than clients)."""
COARSE_STREAM_TOKENS_PER_CHUNK: Final = 2.0
"""Tokens per streamed chunk above which a non-speculative arm's TPOT/ITL measure buffering,
not decoding (a plain decoder emits one token per step; only speculation commits several)."""


@dataclass(frozen=True)
class LevelVerdict:
    """Both arms at one load level, and what they say together."""

    concurrency: int
    """Closed-loop clients; for an open-loop level, the in-flight cap."""
    candidate: ArmSummary | None
    baseline: ArmSummary | None
    speedup: Ratio | None
    """Candidate over baseline, output tokens per second of request time."""
    decode_speedup: Ratio | None
    """Baseline over candidate mean time per output token (>1: candidate decodes faster)."""
    cost_rule_met: bool | None
    """Candidate's time per committed token below the baseline's time per token."""
    outcome: Outcome
    output_agreement: float | None
    """Share of work items whose outputs are identical on both arms (greedy: expect ~1)."""
    request_rate: float | None = None
    """Open-loop arrivals per second; None for a closed-loop level."""

    @property
    def load(self) -> float:
        """Position on the swept axis: the request rate in open loop, else the concurrency."""
        return self.concurrency if self.request_rate is None else self.request_rate

    @property
    def load_text(self) -> str:
        return describe_load(self.concurrency, self.request_rate)


@dataclass(frozen=True)
class Crossover:
    """Where speculation stops paying over the measured loads."""

    stops_paying_at: float | None
    """Lowest measured load from which the speedup is below 1 (None: never)."""
    last_paying: float | None
    """Highest measured load below it with speedup >= 1."""
    estimated: float | None
    """Load where the speedup crosses 1, interpolated on log2(load)."""
    summary: str
    axis: Literal["concurrency", "request_rate"] = "concurrency"
    """What the loads above count: concurrent requests, or arrivals per second."""


@dataclass(frozen=True)
class BenchWarning:
    """Something the reader must not miss."""

    code: str
    message: str


@dataclass(frozen=True)
class Verdict:
    """Everything the report shows, computed from a sweep record."""

    levels: tuple[LevelVerdict, ...]
    crossover: Crossover
    warnings: tuple[BenchWarning, ...]


def judge(record: SweepRecord, slo: Slo | None = None) -> Verdict:
    """Per-level verdicts, the crossover load and the warnings for one sweep."""
    greedy = record.config.sampling.temperature == 0.0
    slo = slo or Slo()
    levels = tuple(_level(record, load, slo, greedy) for load in _loads(record.arms))
    warnings = _warnings(record, levels, greedy)
    return Verdict(levels, crossover(levels), warnings)


Load = tuple[int, float | None]  # (concurrency, request rate) identifies a level


def _loads(arms: Sequence[ArmLevel]) -> list[Load]:
    found = {(arm.concurrency, arm.request_rate): arm.load for arm in arms}
    return sorted(found, key=found.__getitem__)


def _level(record: SweepRecord, load: Load, slo: Slo, greedy: bool) -> LevelVerdict:
    cand = _arm(record.arms, record.candidate.label, load)
    base = _arm(record.arms, record.baseline.label, load)
    speedup = decode = None
    if cand is not None and base is not None:
        speedup = speedup_of(cand, base)
        decode = ratio_of_means(_tpots(base), _tpots(cand))
    agreement = _agreement(cand, base) if cand and base and greedy else None
    return LevelVerdict(
        concurrency=load[0],
        request_rate=load[1],
        candidate=None if cand is None else summarize(cand, slo),
        baseline=None if base is None else summarize(base, slo),
        speedup=speedup,
        decode_speedup=decode,
        cost_rule_met=None if decode is None else decode.value > 1.0,
        outcome=_outcome(speedup),
        output_agreement=agreement,
    )


def _arm(arms: Sequence[ArmLevel], label: str, load: Load) -> ArmLevel | None:
    found = [a for a in arms if a.label == label and (a.concurrency, a.request_rate) == load]
    return found[-1] if found else None


def speedup_of(
    candidate: ArmLevel, baseline: ArmLevel, confidence: float = CONFIDENCE
) -> Ratio | None:
    """Output tokens per second of request time, candidate over baseline, with its bootstrap
    interval at `confidence` (`tune`'s early looks use a stricter one than a level's 95 %)."""
    return ratio_of_rates(_timed(candidate), _timed(baseline), confidence=confidence)


def _timed(arm: ArmLevel) -> list[tuple[float, float]]:
    """(output tokens, end-to-end seconds) of each request that finished."""
    return [(r.output_tokens, r.latency_s) for r in arm.results if r.tokens_per_s is not None]


def _tpots(arm: ArmLevel) -> list[float]:
    return [r.tpot_s for r in arm.results if r.ok and r.tpot_s is not None]


def _outcome(speedup: Ratio | None) -> Outcome:
    if speedup is None:
        return "no data"
    if speedup.low > 1.0:
        return "pays"
    if speedup.high < 1.0:
        return "loses"
    return "inconclusive"


def _agreement(cand: ArmLevel, base: ArmLevel) -> float | None:
    cand_text = {r.item: r.text for r in cand.results if r.ok}
    base_text = {r.item: r.text for r in base.results if r.ok}
    shared = cand_text.keys() & base_text.keys()
    if not shared:
        return None
    return sum(cand_text[i] == base_text[i] for i in shared) / len(shared)


def crossover(levels: Sequence[LevelVerdict]) -> Crossover:
    """The lowest load from which speculation stops paying (point estimate below 1)."""
    measured = [lv for lv in levels if lv.speedup is not None]
    open_loop = any(lv.request_rate is not None for lv in levels)
    axis: Literal["concurrency", "request_rate"] = "request_rate" if open_loop else "concurrency"
    unit = "requests/s" if open_loop else "concurrent requests"
    if not measured:
        return Crossover(None, None, None, "no level has measurements on both arms", axis)
    points = [(lv, lv.speedup.value) for lv in measured if lv.speedup is not None]
    losing = [i for i, (_, s) in enumerate(points) if s < 1.0]
    if not losing:
        top = points[-1][0]
        text = f"speculation pays at every measured load (up to {top.load_text})"
        return Crossover(None, top.load, None, text + _noise(measured), axis)
    first = losing[0]
    if first == 0:
        low = points[0][0]
        text = f"speculation does not pay even at {low.load_text}"
        return Crossover(low.load, None, None, text + _noise(measured[:1]), axis)
    (paid, s_paid), (lost, s_lost) = points[first - 1], points[first]
    fraction = (s_paid - 1.0) / (s_paid - s_lost)
    log_paid, log_lost = math.log2(paid.load), math.log2(lost.load)
    estimate = 2 ** (log_paid + fraction * (log_lost - log_paid))
    text = (
        f"speculation stops paying at {lost.load_text} (speedup {s_lost:.2f}); it paid at "
        f"{paid.load_text} (speedup {s_paid:.2f}); crossover ≈ {estimate:.1f} {unit}"
    )
    caveat = _noise(measured[first - 1 : first + 1])
    return Crossover(lost.load, paid.load, estimate, text + caveat, axis)


def _noise(levels: Sequence[LevelVerdict]) -> str:
    """A caveat when the levels the statement rests on are within measurement noise."""
    unsure = [lv.load_text for lv in levels if lv.outcome == "inconclusive"]
    if not unsure:
        return ""
    return (
        f" (within noise at {', '.join(unsure)}: the 95 % interval includes 1.0; "
        "raise --requests to decide)"
    )


def _warnings(
    record: SweepRecord, levels: Sequence[LevelVerdict], greedy: bool
) -> tuple[BenchWarning, ...]:
    found: list[BenchWarning] = []
    found += _acceptance_warnings(levels)
    found += _degenerate_warnings(record)
    found += _coarse_stream_warnings(record)
    found += _schedule_warnings(record)
    found += _underload_warnings(levels, record.config.requests)
    found += _usage_warnings(levels)
    found += _failure_warnings(levels)
    if greedy:
        found += _agreement_warnings(levels)
    if record.interrupted:
        found.append(BenchWarning("interrupted", "the sweep was interrupted; results are partial"))
    return tuple(found)


def _acceptance_warnings(levels: Sequence[LevelVerdict]) -> list[BenchWarning]:
    found: list[BenchWarning] = []
    cand = [lv.candidate for lv in levels if lv.candidate is not None]
    lengths = [(a.load_text, a.mean_acceptance_length) for a in cand]
    low = [(at, length) for at, length in lengths if length is not None]
    low = [(at, length) for at, length in low if length <= MISPAIRING_MAX_LENGTH]
    if low:
        at, length = low[0]
        found.append(
            BenchWarning(
                "mispairing",
                f"LIKELY MISPAIRING: candidate mean acceptance length {length:.2f} at "
                f"{at} (≈ 1.0 means the target rejects almost every drafted token). Check that the "
                "draft shares the target's tokenizer, that an EAGLE head was trained for this "
                "target, and that the engine really runs the proposer (specdeploy validate). "
                "For n-gram, it means the outputs rarely repeat the prompt: try --workload "
                "code-edit.",
            )
        )
    if cand and all(length is None for _, length in lengths):
        found.append(
            BenchWarning(
                "no-acceptance-metrics",
                "the candidate exposes no speculative-decoding metrics at /metrics: either it "
                "does not speculate, or metrics are off (SGLang: --enable-metrics)",
            )
        )
    base = [lv.baseline for lv in levels if lv.baseline is not None]
    if any(a.mean_acceptance_length is not None for a in base):
        found.append(
            BenchWarning(
                "baseline-speculates",
                "CONFOUNDED A/B: the baseline reports speculative-decoding activity; it must be "
                "the same target without a proposer",
            )
        )
    return found


def is_degenerate(text: str) -> bool:
    """Looping output: long enough and few distinct word trigrams, or a few characters repeated."""
    if len(text) >= 64 and len(set(text)) <= 3:
        return True
    words = text.split()
    if len(words) < _MIN_WORDS:
        return False
    trigrams = list(zip(words, words[1:], words[2:], strict=False))
    return len(set(trigrams)) / len(trigrams) < _MIN_DISTINCT_TRIGRAMS


def _degenerate_warnings(record: SweepRecord) -> list[BenchWarning]:
    found: list[BenchWarning] = []
    for label in (record.candidate.label, record.baseline.label):
        texts = [r.text for a in record.arms if a.label == label for r in a.results if r.ok]
        bad = sum(is_degenerate(t) for t in texts)
        if texts and bad / len(texts) >= DEGENERATE_SHARE:
            found.append(
                BenchWarning(
                    "degenerate-output",
                    f"{label}: {bad} of {len(texts)} outputs repeat themselves (looping text); "
                    "repetition inflates acceptance and speed, so these figures overstate what "
                    "real traffic would see. Use chat-templated, domain-matched prompts.",
                )
            )
    return found


def _coarse_stream_warnings(record: SweepRecord) -> list[BenchWarning]:
    found: list[BenchWarning] = []
    for arm in record.arms:
        if arm.label != record.baseline.label:
            continue
        ok = [r for r in arm.results if r.ok and r.output_tokens > 1]
        chunks = sum(len(r.chunk_gaps_s) + 1 for r in ok)
        tokens = sum(r.output_tokens for r in ok)
        if chunks and tokens / chunks > COARSE_STREAM_TOKENS_PER_CHUNK:
            found.append(
                BenchWarning(
                    "coarse-stream",
                    f"{arm.label} at {arm.load_text} streamed {tokens} tokens in {chunks} chunks "
                    f"({tokens / chunks:.1f} per chunk) without speculation: the "
                    "server or a proxy buffers its stream, so TPOT and ITL there measure buffering, "
                    "not decoding; compare the end-to-end speedup instead",
                )
            )
    return found


def _schedule_warnings(record: SweepRecord) -> list[BenchWarning]:
    found: list[BenchWarning] = []
    for arm in record.arms:
        if arm.request_rate is None:
            continue
        pairs = sorted((r.due_s, r.started_s) for r in arm.results if r.due_s is not None)
        if len(pairs) < 3:
            continue
        scheduled = pairs[-1][0] - pairs[0][0]
        actual = max(start for _, start in pairs) - min(start for _, start in pairs)
        if scheduled <= 0 or actual <= 0 or scheduled / actual >= BEHIND_SCHEDULE_SHARE:
            continue
        found.append(
            BenchWarning(
                "behind-schedule",
                f"{arm.label} at {arm.request_rate:g} req/s: its {len(pairs)} requests started "
                f"over {actual * 1000:.0f} ms where the schedule spread them over "
                f"{scheduled * 1000:.0f} ms ({scheduled / actual:.0%} of the scheduled rate), so "
                "the server saw less load than labelled; lower --request-rate, or run the bench "
                "on a machine with spare CPU",
            )
        )
    return found


def _underload_warnings(levels: Sequence[LevelVerdict], requests: int) -> list[BenchWarning]:
    found: list[BenchWarning] = []
    for lv in levels:
        if lv.request_rate is not None or lv.concurrency < 2:
            continue
        arms = [a for a in (lv.candidate, lv.baseline) if a is not None and a.complete]
        held = [a.mean_in_flight for a in arms if a.mean_in_flight is not None]
        if not held or min(held) >= UNDERLOAD_SHARE * lv.concurrency:
            continue
        cause = (
            f"its {requests} requests can never put {lv.concurrency} in flight"
            if requests < lv.concurrency
            else f"with {requests} requests for {lv.concurrency} clients it spent much of its "
            "time with fewer in flight"
        )
        found.append(
            BenchWarning(
                "under-loaded",
                f"{lv.load_text} is a label the server never held: {cause} (mean "
                f"{min(held):.1f} in flight, {min(held) / lv.concurrency:.0%}); its figures "
                f"describe a lighter load. Raise --requests to at least {4 * lv.concurrency} "
                "(several per client), or drop the level",
            )
        )
    return found


def _usage_warnings(levels: Sequence[LevelVerdict]) -> list[BenchWarning]:
    found: list[BenchWarning] = []
    for lv in levels:
        for arm in (lv.candidate, lv.baseline):
            if arm is None or not arm.usage_distrusted:
                continue
            found.append(
                BenchWarning(
                    "usage-distrusted",
                    f"{arm.label} at {arm.load_text}: {arm.usage_distrusted} of {arm.sent} "
                    "responses reported a usage.completion_tokens that cannot be true (not an "
                    "integer, fewer than the streamed text chunks, or more than max_tokens); "
                    "their streamed chunks were counted instead, which undercounts when a "
                    "chunk holds several tokens",
                )
            )
    return found


def _failure_warnings(levels: Sequence[LevelVerdict]) -> list[BenchWarning]:
    found: list[BenchWarning] = []
    for lv in levels:
        for arm in (lv.candidate, lv.baseline):
            if arm is None or not arm.failed:
                continue
            cause, count = arm.errors[0]
            found.append(
                BenchWarning(
                    "failed-requests",
                    f"{arm.label} at {arm.load_text}: {arm.failed} of {arm.sent} "
                    f"requests failed (most often, {count}×: {cause})",
                )
            )
    return found


def _agreement_warnings(levels: Sequence[LevelVerdict]) -> list[BenchWarning]:
    low = [lv for lv in levels if lv.output_agreement is not None]
    low = [
        lv for lv in low if lv.output_agreement is not None and lv.output_agreement < _LOW_AGREEMENT
    ]
    if not low:
        return []
    lv = low[0]
    share = lv.output_agreement or 0.0
    return [
        BenchWarning(
            "outputs-differ",
            f"greedy outputs agree on only {share:.0%} of prompts at "
            f"{lv.load_text}; speculation is lossless, so the arms probably do not serve the "
            "same target, weights or sampling settings",
        )
    ]
