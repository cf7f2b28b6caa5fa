"""Engine Prometheus metrics: parse the text exposition, diff before/after a load level, and
derive acceptance rate and mean acceptance length per engine.

Each engine module reads its own metric names (`Engine.metrics`,
orchestrator/engines/<engine>_metrics.py); a scrape is asked of each engine in turn, and the one
whose metrics it holds answers.
"""

from __future__ import annotations

import math
import re
from typing import Final

from orchestrator.engines import ENGINES
from orchestrator.engines.metrics import Acceptance, PhaseTimes, Samples, labelled

__all__ = ["Acceptance", "PhaseTimes", "Samples", "acceptance", "parse_prometheus", "phase_times"]

_LINE: Final = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\S+)?$")


def parse_prometheus(text: str, *, by_label: str | None = None) -> dict[str, float]:
    """Prometheus text exposition -> {name: sum over label sets}. Comments, malformed lines and
    non-numeric values are skipped (a scrape must never fail the bench). With `by_label`, series
    carrying that label are also summed per value, under `name{label="value"}`."""
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
        found = _label(match.group(2), by_label) if by_label and match.group(2) else None
        if found is not None:
            key = labelled(name, str(by_label), found)
            samples[key] = samples.get(key, 0.0) + value
    return samples


def _label(labels: str, name: str) -> str | None:
    found = re.search(rf'[{{,]\s*{re.escape(name)}="([^"]*)"', labels)
    return found.group(1) if found else None


def acceptance(before: Samples, after: Samples) -> Acceptance | None:
    """Acceptance over the interval between two scrapes, or None when the engine exposes none
    (or drafted nothing in the interval)."""
    for engine in ENGINES.values():
        found = engine.metrics.acceptance(before, after)
        if found is not None:
            return found
    return None


def phase_times(before: Samples, after: Samples) -> PhaseTimes | None:
    """Mean queue/prefill/decode seconds per request, from the engine's request histograms."""
    for engine in ENGINES.values():
        found = engine.metrics.phase_times(before, after)
        if found is not None:
            return found
    return None
