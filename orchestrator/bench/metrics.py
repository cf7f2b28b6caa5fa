"""Engine Prometheus metrics: parse the text exposition, diff before/after a load level, and
derive acceptance rate and mean acceptance length per engine.

Sources (names as exposed):
- vLLM counters `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
  `..._num_accepted_tokens_total` (vllm/v1/spec_decode/metrics.py @ 016a8587, SpecDecodingProm
  docstring): acceptance rate = accepted / draft tokens; mean acceptance length = 1 + accepted /
  drafts (bonus token included, range 1..K+1). Request-phase histograms
  `vllm:request_{queue,prefill,decode}_time_seconds` (docs/design/v1/metrics.md).
- SGLang gauges `sglang:spec_accept_length` (accepted drafts + 1 bonus per verify step) and
  `sglang:spec_accept_rate` (python/sglang/srt/metrics, sglang PR #11441); gauges, so the value
  after the level is reported, not a difference.
- TensorRT-LLM counters `trtllm_spec_decode_num_draft_tokens_total`,
  `trtllm_spec_decode_num_accepted_tokens_total` and gauge `trtllm_spec_decode_acceptance_length`
  (newer trtllm-serve /prometheus/metrics; version-dependent).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

Samples = Mapping[str, float]
"""Metric name (without labels) -> value summed over all label sets."""

_LINE: Final = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\S+)?$")


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text exposition -> {name: sum over label sets}. Comments, malformed lines and
    non-numeric values are skipped (a scrape must never fail the bench)."""
    samples: dict[str, float] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isnan(value):
            continue
        name = match.group(1)
        samples[name] = samples.get(name, 0.0) + value
    return samples


@dataclass(frozen=True)
class Acceptance:
    """Speculative acceptance over one level, as the engine reports it."""

    engine: str
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None


@dataclass(frozen=True)
class PhaseTimes:
    """Server-side mean seconds per request in each phase over one level (vLLM histograms)."""

    queue_s: float | None
    prefill_s: float | None
    decode_s: float | None


_VLLM: Final = "vllm:spec_decode_"
_TRT: Final = "trtllm_spec_decode_"


def acceptance(before: Samples, after: Samples) -> Acceptance | None:
    """Acceptance over the interval between two scrapes, or None when the engine exposes none
    (or drafted nothing in the interval)."""
    if f"{_VLLM}num_drafts_total" in after:
        return _vllm(before, after)
    if "sglang:spec_accept_length" in after:
        rate = after.get("sglang:spec_accept_rate")
        return Acceptance("sglang", rate, after["sglang:spec_accept_length"])
    if f"{_TRT}num_draft_tokens_total" in after:
        return _trtllm(before, after)
    return None


def _delta(before: Samples, after: Samples, name: str) -> float:
    return after.get(name, 0.0) - before.get(name, 0.0)


def _vllm(before: Samples, after: Samples) -> Acceptance | None:
    drafts = _delta(before, after, f"{_VLLM}num_drafts_total")
    drafted = _delta(before, after, f"{_VLLM}num_draft_tokens_total")
    accepted = _delta(before, after, f"{_VLLM}num_accepted_tokens_total")
    if drafts <= 0 or drafted <= 0:
        return None
    return Acceptance(
        "vllm", accepted / drafted, 1.0 + accepted / drafts, drafts, drafted, accepted
    )


def _trtllm(before: Samples, after: Samples) -> Acceptance | None:
    drafted = _delta(before, after, f"{_TRT}num_draft_tokens_total")
    accepted = _delta(before, after, f"{_TRT}num_accepted_tokens_total")
    if drafted <= 0:
        return None
    length = after.get(f"{_TRT}acceptance_length")
    return Acceptance("trtllm", accepted / drafted, length, None, drafted, accepted)


def phase_times(before: Samples, after: Samples) -> PhaseTimes | None:
    """Mean queue/prefill/decode seconds per request from vLLM's request histograms."""
    means: list[float | None] = []
    for phase in ("queue", "prefill", "decode"):
        base = f"vllm:request_{phase}_time_seconds"
        count = _delta(before, after, f"{base}_count")
        total = _delta(before, after, f"{base}_sum")
        means.append(total / count if count > 0 else None)
    if all(m is None for m in means):
        return None
    return PhaseTimes(*means)
