"""Engine memory knobs as rendered: a fraction rounded down to 3 decimals within sane bounds, so
rendering is deterministic and never asks an engine for more than the estimate planned."""

from __future__ import annotations

import math
from typing import Final

#: Smallest fraction rendered; a smaller translated value means the plan does not fit anyway.
MIN_ENGINE_FRACTION: Final = 0.01


def round_down_fraction(value: float) -> float:
    """`value` clamped to [MIN_ENGINE_FRACTION, 1] and rounded down to 3 decimals."""
    clamped = min(1.0, max(MIN_ENGINE_FRACTION, value))
    return math.floor(round(clamped * 1000, 6)) / 1000
