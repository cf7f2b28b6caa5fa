"""From measured cells (draft length k x load) to a choice per load and the engine's schedule.

A cell is one k at one load, measured against the baseline in the same run (`bench`'s sweep:
both arms, the same requests), so its speedup is a ratio with a bootstrap interval. The rules:

* at a load, only cells that pay beyond noise (interval above 1) may be chosen; none: k = 0, the
  baseline (speculation off);
* among those, the best point estimate wins, but the smallest k whose interval reaches the best
  one's is taken instead: a larger k is chosen only when it is better beyond noise;
* from one load to the next, k changes only when the new choice is better than the old k at that
  load beyond noise (the old k's interval lies below the new one's).

The schedule (vLLM's `num_speculative_tokens_per_batch_size`: inclusive batch-size ranges, k per
range) gives each measured load the k chosen there, every batch size between two measured loads
the smaller of their two k, and the last range reaches `max_batch`. Neighbouring ranges with the
same k are merged. The smaller k, because the batch size vLLM looks the k up by is the number of
requests it scheduled in that step (`dynamic_sd_lookup[len(num_scheduled_tokens)]`,
vllm/v1/core/sched/scheduler.py at v0.32.0), which at a given load is at most the load and often
far below it: a step that prefills a prompt, or whose token budget the drafts of the previous step
filled, schedules few requests. A range that gave an unmeasured batch size the larger k would so
also speculate at the higher load measured to lose (measured: on the layered test bed, with its
64-token budget, a schedule with k=4 up to batch size 8 kept drafting at concurrency 64, its
acceptance counters moving); the smaller k costs at most the speedup of loads no cell measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.bench.stats import Ratio

Outcome = Literal["pays", "loses", "inconclusive", "no data", "skipped"]


@dataclass(frozen=True)
class Cell:
    """One k at one load, against the baseline measured alongside it."""

    k: int
    concurrency: int
    outcome: Outcome
    speedup: Ratio | None
    """Output tokens per second of request time, candidate over baseline, with its interval."""
    tpot_ratio: Ratio | None = None
    """Baseline over candidate mean time per output token (the cost rule's side)."""
    candidate_tpot_ms: Ratio | None = None
    """The candidate's mean time per output token (ms), with its interval."""
    baseline_tpot_ms: Ratio | None = None
    acceptance_length: float | None = None
    """Mean committed tokens per verify step, from the candidate's /metrics (a counter ratio)."""
    per_position: tuple[float, ...] = ()
    ok: int = 0
    failed: int = 0
    note: str = ""
    """Why a cell was skipped, or what was odd about it."""


@dataclass(frozen=True)
class Choice:
    concurrency: int
    k: int
    """0: the baseline (no cell paid beyond noise)."""
    speedup: Ratio | None
    why: str


def choose(cells: Iterable[Cell]) -> list[Choice]:
    """The k for every measured load, in load order."""
    by_load: dict[int, list[Cell]] = {}
    for cell in cells:
        by_load.setdefault(cell.concurrency, []).append(cell)
    choices: list[Choice] = []
    for load in sorted(by_load):
        here = {c.k: c for c in by_load[load]}
        paying = sorted(
            (c for c in here.values() if c.outcome == "pays" and c.speedup), key=lambda c: c.k
        )
        if not paying:
            why = (
                "every k was skipped (each lost at a lower load): the baseline"
                if all(c.outcome == "skipped" for c in here.values())
                else "no k pays beyond noise: the baseline"
            )
            choices.append(Choice(load, 0, None, why))
            continue
        best = max(paying, key=lambda c: _value(c.speedup))
        pick = next(c for c in paying if _reaches(c.speedup, best.speedup))
        why = (
            f"k={best.k} measured best ({_shown(best.speedup)})"
            if pick.k == best.k
            else f"k={pick.k} is within noise of the best, k={best.k} ({_shown(best.speedup)}): "
            "the smaller k"
        )
        previous = choices[-1] if choices else None
        if previous is not None and previous.k and previous.k != pick.k:
            kept = here.get(previous.k)
            if kept is not None and kept.outcome == "pays" and _reaches(kept.speedup, pick.speedup):
                why = f"k={previous.k} kept: k={pick.k} is not better beyond noise"
                pick = kept
        choices.append(Choice(load, pick.k, pick.speedup, why))
    return choices


def schedule(choices: Sequence[Choice], max_batch: int) -> list[tuple[int, int, int]]:
    """vLLM's `num_speculative_tokens_per_batch_size` for these choices: ranges from 1 to at
    least `max_batch`, merged where k repeats."""
    if not choices:
        return []
    ranges: list[tuple[int, int, int]] = []
    start = 1
    for index, choice in enumerate(choices):
        if index + 1 < len(choices):
            following = choices[index + 1]
            # the batch sizes in between get the smaller k (module docstring)
            shrinks = following.k < choice.k
            end = max(start, choice.concurrency if shrinks else following.concurrency - 1)
        else:
            end = max(start, max_batch, choice.concurrency)
        if ranges and ranges[-1][2] == choice.k:
            ranges[-1] = (ranges[-1][0], end, choice.k)
        else:
            ranges.append((start, end, choice.k))
        start = end + 1
    return ranges


def crossover(choices: Sequence[Choice]) -> int | None:
    """The lowest measured load from which the baseline is chosen at every higher load."""
    found = None
    for choice in reversed(choices):
        if choice.k != 0:
            break
        found = choice.concurrency
    return found


def prune(cells: Iterable[Cell], k: int, load: int) -> str | None:
    """Why measuring `k` at `load` would tell nothing new, or None: this or a smaller k already
    lost beyond noise at this or a lower load (a longer draft costs the verifier more, and the
    cost grows with the batch). `--exhaustive` measures every cell anyway."""
    for cell in cells:
        if (cell.k, cell.concurrency) == (k, load) or cell.outcome != "loses":
            continue
        if cell.k <= k and cell.concurrency <= load:
            return f"k={cell.k} already lost at load {cell.concurrency} ({_shown(cell.speedup)})"
    return None


def _value(ratio: Ratio | None) -> float:
    return -math.inf if ratio is None else ratio.value


def _reaches(mine: Ratio | None, best: Ratio | None) -> bool:
    """`mine` is within noise of `best` (its interval reaches the best's)."""
    return mine is not None and best is not None and mine.high >= best.low


def _shown(ratio: Ratio | None) -> str:
    if ratio is None:
        return "no data"
    return f"{ratio.value:.2f}x [{ratio.low:.2f}, {ratio.high:.2f}]"
