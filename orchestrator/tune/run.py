"""`specdeploy tune`: measure every (draft length k, load) cell and choose k per load.

Each cell is one `bench` level: the server running k and the baseline, the same requests, one
after the other (`orchestrator.bench.sweep`), so its speedup is a ratio against a baseline
measured alongside it, with a bootstrap interval. Cells are measured in load order, k ascending;
after each one the state is written to DIR/tune.json, so a run that is interrupted (Ctrl-C,
SIGTERM) keeps every finished cell and a second run with the same settings measures only the rest.
A k above one that already lost beyond noise at this or a lower load is not measured (`prune`)
unless `exhaustive`.

A cell is measured in rounds (sequential stopping, unless `exhaustive`): after each round but the
last, its speedup interval is looked at with the confidence split over the looks (Bonferroni:
with 3 looks each is a 98.3 % interval, so stopping early is wrong no more often than one 95 %
look at the end). The cell stops once that interval decides what the choice needs: wholly below
1 (it loses), or wholly above 1 and apart from every paying cell already measured at this load.
Its stored interval is the usual 95 % one over every request it got. Rounds continue through the
workload, so no prompt is sent twice more than a single level would send it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import ssl
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from orchestrator.bench.client import Api, Endpoint
from orchestrator.bench.stats import CONFIDENCE, Ratio, mean_with_interval
from orchestrator.bench.sweep import ArmLevel, SweepConfig, SweepRecord, run_sweep
from orchestrator.bench.verdict import judge, speedup_of
from orchestrator.bench.workload import Workload
from orchestrator.engines.metrics import Acceptance, PhaseTimes
from orchestrator.errors import UsageError
from orchestrator.tune.choose import Cell, prune

SCHEMA: Final = "specdeploy.tune/v1"
JSON_NAME: Final = "tune.json"
#: The settings a stored cell must share with this run to be reused.
_SAME: Final = (
    "workload",
    "requests",
    "max_tokens",
    "sampling",
    "endpoint_per_k",
    "baseline",
    "api",
    "stopping",
)
#: Looks at a cell's interval, the last included, when it is measured in rounds.
LOOKS: Final = 3
#: The fewest requests per arm in a round: a bootstrap interval over fewer is too narrow to
#: stop on (with 3 samples it misses the true ratio far more often than its confidence says).
MIN_ROUND: Final = 8
#: What tune.json says served the cells when `tune --local` started the engines.
LOCAL: Final = "local: one engine at a time on this host"
#: ... and when `tune --cluster` applied them (with the context and namespace after it).
CLUSTER: Final = "cluster: one deployment at a time, through the API server's service proxy"


@dataclass(frozen=True)
class TuneSettings:
    ks: tuple[int, ...]
    loads: tuple[int, ...]
    endpoint_per_k: str
    """A URL with `{k}` where the draft length goes."""
    baseline: str
    workload: Workload
    config: SweepConfig
    exhaustive: bool = False
    api: Api = "completions"

    def url(self, k: int) -> str:
        return self.endpoint_per_k.replace("{k}", str(k))

    def identity(self) -> dict[str, Any]:
        """What makes two runs' cells comparable (stored in tune.json)."""
        sampling = dataclasses.asdict(self.config.sampling)
        return {
            "workload": self.workload.name,
            "requests": self.config.requests,
            "max_tokens": self.config.max_tokens,
            "sampling": sampling,
            "endpoint_per_k": self.endpoint_per_k,
            "baseline": self.baseline,
            "api": self.api,
            "stopping": "none" if self.exhaustive else f"sequential/{LOOKS}",
        }

    def rounds(self, load: int) -> list[int]:
        """Requests per arm in each round of the cell at `load`: one round when `exhaustive`
        or when the requests do not split into rounds of at least `MIN_ROUND` and four times
        the load. A round ends with the server draining (its last requests run with fewer
        beside them), which favours the candidate at high load; at four times the load that
        tail is a small part of each round, as it is of one level of all the requests."""
        requests = self.config.requests
        if self.exhaustive:
            return [requests]
        least = max(MIN_ROUND, 4 * load)
        chunk = max(math.ceil(requests / LOOKS), least)
        sizes: list[int] = []
        while sum(sizes) < requests:
            sizes.append(min(chunk, requests - sum(sizes)))
        if len(sizes) > 1 and sizes[-1] < least:
            short = sizes.pop()
            sizes[-1] += short
        return sizes


@dataclass
class TuneState:
    settings: TuneSettings
    cells: list[Cell]
    interrupted: bool = False
    measured_now: int = 0
    """Cells measured by this run (the rest came from DIR/tune.json)."""


Save = Callable[[TuneState], None]
Progress = Callable[[str], None]


def load_cells(directory: Path, settings: TuneSettings) -> list[Cell]:
    """The cells an earlier run stored in `directory` with the same settings; [] when there is
    none. UsageError when it holds cells measured differently, or cannot be read."""
    path = directory / JSON_NAME
    if not path.is_file():
        return []
    try:
        if path.stat().st_size > 16 << 20:
            raise ValueError("larger than 16 MiB")
        document = json.loads(path.read_text(encoding="utf-8"))
        stored = document["config"]
        cells = [cell_from_json(c) for c in document["cells"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{path} cannot be read as an earlier tune run: {exc}",
            why="tune reuses the cells an earlier run measured in --out DIR",
            fix="give another --out DIR, or remove this one to measure again",
        ) from None
    mine = settings.identity()
    differs = [key for key in _SAME if stored.get(key) != mine[key]]
    if differs:
        shown = "; ".join(f"{k}: {stored.get(k)!r} there, {mine[k]!r} now" for k in differs)
        raise UsageError(
            f"{path} holds cells measured with other settings ({shown})",
            why="cells are reused only when measured the same way, or the table would compare "
            "unlike measurements",
            fix="give another --out DIR, or run with the settings stored there",
        )
    return [c for c in cells if c.outcome != "skipped"]  # pruning is decided again


def tune(settings: TuneSettings, cells: list[Cell], save: Save, progress: Progress) -> TuneState:
    """Measure what is missing; `save` after every cell. Stops at the first interrupted cell
    (that cell is not kept: it did not finish)."""
    state = TuneState(settings, list(cells))
    plan = [(load, k) for load in settings.loads for k in settings.ks]
    done = {(c.k, c.concurrency) for c in state.cells}
    todo = [(load, k) for load, k in plan if (k, load) not in done]
    spent: list[float] = []
    for index, (load, k) in enumerate(todo, start=1):
        why = None if settings.exhaustive else prune(state.cells, k, load)
        if why is not None:
            state.cells.append(Cell(k, load, "skipped", None, note=why))
            progress(f"[{index}/{len(todo)}] k={k} at concurrency {load}: skipped, {why}")
            continue
        place = f"[{index}/{len(todo)}]"
        if not _measure_cell(state, k, load, place, len(todo) - index + 1, spent, save, progress):
            break
    return state


def _measure_cell(
    state: TuneState,
    k: int,
    load: int,
    place: str,
    left: int,
    spent: list[float],
    save: Save,
    progress: Progress,
    measure_round: Round | None = None,
    baseline_arm: ArmLevel | None = None,
) -> bool:
    """Measure one cell (`_measure`), keep it in `state` and `save`; False (and `state`
    marked interrupted) when it was interrupted. `spent` times the cells, for the estimate of
    the time `left` cells take."""
    progress(f"{place} k={k} at concurrency {load}{_eta(spent, left)}")
    began = time.monotonic()
    rivals = [c for c in state.cells if c.concurrency == load and c.outcome == "pays"]
    measured = _measure(state.settings, k, load, rivals, progress, measure_round, baseline_arm)
    if measured is None:
        state.interrupted = True
        return False
    record, note = measured
    spent.append(time.monotonic() - began)
    state.cells.append(dataclasses.replace(measured_cell(record, k, load), note=note))
    state.measured_now += 1
    save(state)
    return True


@dataclass(frozen=True)
class Served:
    """Where one served engine answers, and how to reach it."""

    url: str
    api_key: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False)

    def endpoint(self, label: str, api: Api) -> Endpoint:
        return Endpoint(label, self.url, "", api, api_key=self.api_key, tls=self.tls)


Serve = Callable[[int], AbstractContextManager[Served]]
"""Serves one engine while its block runs: draft length k (0: the baseline) to where it is."""


def tune_serving_each(
    settings: TuneSettings, cells: list[Cell], save: Save, progress: Progress, serve: Serve
) -> TuneState:
    """Measure what is missing with one engine at a time, as one GPU holds (`tune --local`).

    The baseline is served first and measured once at every load that still has a cell to
    measure, with every request; then each k in turn is served and its cells measured in load
    order against those baseline arms (a k whose every missing cell is pruned is not started).
    Ctrl-C or SIGTERM while an engine loads, or inside a cell, stops the run and keeps every
    finished cell, as `tune` does."""
    state = TuneState(settings, list(cells))
    done = {(c.k, c.concurrency) for c in state.cells}
    todo = [(k, load) for k in settings.ks for load in settings.loads if (k, load) not in done]
    if not todo:
        return state
    # pruning only grows as cells are measured: the loads of cells not pruned now are every load
    # the baseline can be needed at (none: nothing is started)
    open_ = [(k, n) for k, n in todo if settings.exhaustive or prune(state.cells, k, n) is None]
    if not open_:
        state.cells.extend(
            Cell(k, n, "skipped", None, note=str(prune(state.cells, k, n))) for k, n in todo
        )
        progress("every cell left is skipped (a smaller k lost there): no engine started")
        save(state)
        return state
    loads = tuple(sorted({load for _, load in open_}))
    config = dataclasses.replace(settings.config, concurrency=loads, request_rates=())
    quoted = lambda line: progress("    " + line)  # noqa: E731
    spent: list[float] = []
    try:
        progress(f"serving the baseline to measure it at concurrency {', '.join(map(str, loads))}")
        with serve(0) as served:
            baseline = served.endpoint("baseline", settings.api)
            unused = served.endpoint("k=?", settings.api)
            record = run_sweep(unused, baseline, settings.workload, config, quoted, only="baseline")
        if record.interrupted:
            state.interrupted = True
            return state
        base_arms = {arm.concurrency: arm for arm in record.arms}
        mine_by_k: dict[int, list[int]] = {}
        for k, load in todo:
            mine_by_k.setdefault(k, []).append(load)
        counted = 0
        for k, mine in mine_by_k.items():
            pruned = [None if settings.exhaustive else prune(state.cells, k, n) for n in mine]
            if all(pruned):
                state.cells.extend(
                    Cell(k, load, "skipped", None, note=str(why))
                    for load, why in zip(mine, pruned, strict=True)
                )
                counted += len(mine)
                progress(f"k={k}: every cell left is skipped ({pruned[0]}); not started")
                save(state)
                continue
            progress(f"serving k={k}")
            with serve(k) as served:
                candidate = served.endpoint(f"k={k}", settings.api)

                def alone(
                    workload: Workload, round_config: SweepConfig, arm: Endpoint = candidate
                ) -> SweepRecord:
                    return run_sweep(
                        arm, baseline, workload, round_config, quoted, only="candidate"
                    )

                for load in mine:
                    counted += 1
                    why = None if settings.exhaustive else prune(state.cells, k, load)
                    if why is not None or load not in base_arms:
                        why = why or "pruned before the baseline was measured"
                        state.cells.append(Cell(k, load, "skipped", None, note=why))
                        progress(
                            f"[{counted}/{len(todo)}] k={k} at concurrency {load}: skipped, {why}"
                        )
                        continue
                    place, left = f"[{counted}/{len(todo)}]", len(todo) - counted + 1
                    if not _measure_cell(
                        state, k, load, place, left, spent, save, progress, alone, base_arms[load]
                    ):
                        return state
    except KeyboardInterrupt:  # while an engine loaded or stopped: no cell was in flight
        progress("interrupted: keeping every finished cell")
        state.interrupted = True
    return state


Round = Callable[[Workload, SweepConfig], SweepRecord]
"""Measures one round of a cell: the workload (rotated to where the cell is) and the config
(one level, the round's requests) to a record; `interrupted` set when it was stopped."""


def _measure(
    settings: TuneSettings,
    k: int,
    load: int,
    rivals: Sequence[Cell],
    progress: Progress,
    measure_round: Round | None = None,
    baseline_arm: ArmLevel | None = None,
) -> tuple[SweepRecord, str] | None:
    """One cell, round by round until its interval decides it or its requests are spent: the
    merged record and a note saying where it stopped. None when interrupted.

    By default each round measures both arms (the server for k, then the baseline's); with
    `baseline_arm` (the baseline measured once for this load, `tune_serving_each`), the rounds
    measure the candidate alone and every look compares it with that arm."""
    sizes = settings.rounds(load)
    confidence = 1.0 - (1.0 - CONFIDENCE) / len(sizes)
    candidate = Endpoint(f"k={k}", settings.url(k), "", settings.api)
    baseline = Endpoint("baseline", settings.baseline, "", settings.api)

    def both_arms(workload: Workload, config: SweepConfig) -> SweepRecord:
        quoted = lambda line: progress("    " + line)  # noqa: E731
        return run_sweep(candidate, baseline, workload, config, progress=quoted)

    measure_round = measure_round or both_arms
    rounds: list[SweepRecord] = []
    sent = 0
    for number, size in enumerate(sizes, start=1):
        config = dataclasses.replace(
            settings.config, concurrency=(load,), request_rates=(), requests=size
        )
        record = measure_round(_rotated(settings.workload, sent), config)
        if record.interrupted:
            return None
        rounds.append(_shifted(record, sent))
        sent += size
        merged = _merged(rounds, settings, sent, baseline_arm)
        if number == len(sizes):
            break
        decided = _decided(merged, rivals, confidence)
        if decided is not None:
            note = (
                f"stopped after {sent} of {settings.config.requests} requests per arm: "
                f"{decided} ({confidence:.1%} interval, {len(sizes)} looks)"
            )
            progress(f"    {note}")
            return merged, note
    return merged, ""


def _decided(record: SweepRecord, rivals: Sequence[Cell], confidence: float) -> str | None:
    """What the cell's interval at `confidence` already settles, or None to measure on."""
    cand, base = _arms(record)
    speedup = speedup_of(cand, base, confidence=confidence)
    if speedup is None:
        return None
    if speedup.high < 1.0:
        return f"loses, {speedup.value:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}]"
    if speedup.low <= 1.0:
        return None
    for rival in rivals:
        other = rival.speedup
        if other is not None and not (speedup.low > other.high or speedup.high < other.low):
            return None  # pays, but its rank against a k already measured here is not settled
    return f"pays, {speedup.value:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}]"


def _arms(record: SweepRecord) -> tuple[ArmLevel, ArmLevel]:
    cand = next(a for a in record.arms if a.label == record.candidate.label)
    base = next(a for a in record.arms if a.label == record.baseline.label)
    return cand, base


def _rotated(workload: Workload, sent: int) -> Workload:
    """The workload starting at the item request number `sent` would get."""
    offset = sent % len(workload.items)
    items = workload.items[offset:] + workload.items[:offset]
    return dataclasses.replace(workload, items=items)


def _shifted(record: SweepRecord, sent: int) -> SweepRecord:
    """A round's record with its results' item indices in the unrotated workload's terms, so
    both arms' outputs still pair across rounds."""
    size = len(record.workload.items)
    arms = [
        dataclasses.replace(
            arm,
            results=tuple(dataclasses.replace(r, item=(r.item + sent) % size) for r in arm.results),
        )
        for arm in record.arms
    ]
    return dataclasses.replace(record, arms=arms)


def _merged(
    rounds: Sequence[SweepRecord],
    settings: TuneSettings,
    sent: int,
    baseline_arm: ArmLevel | None = None,
) -> SweepRecord:
    """The rounds of one cell as one level: results pooled, wall time summed, the engine's
    counters combined; `baseline_arm`, when given, stands for the baseline."""
    first = rounds[0]
    arms = []
    for label in (first.candidate.label, first.baseline.label):
        if baseline_arm is not None and label == first.baseline.label:
            arms.append(dataclasses.replace(baseline_arm, label=label))
            continue
        parts = [a for r in rounds for a in r.arms if a.label == label]
        arms.append(
            ArmLevel(
                label=label,
                concurrency=parts[0].concurrency,
                results=tuple(result for part in parts for result in part.results),
                wall_s=sum(part.wall_s for part in parts),
                acceptance=merge_acceptance([p.acceptance for p in parts]),
                phases=_merge_phases(parts),
                complete=all(part.complete for part in parts),
                metrics_note=next((p.metrics_note for p in parts if p.metrics_note), None),
            )
        )
    config = dataclasses.replace(first.config, requests=sent)
    return dataclasses.replace(
        first, workload=settings.workload, config=config, arms=arms, only=None
    )


def merge_acceptance(parts: Sequence[Acceptance | None]) -> Acceptance | None:
    """Acceptance over consecutive intervals: counters summed, means weighted by drafts. When
    a part lacks counts (gauges, or no drafts), the last part with values stands."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    if len(present) == 1 or any(p.last_batch or not p.drafts for p in present):
        return present[-1]
    drafts = sum(p.drafts or 0.0 for p in present)

    def weighted(values: Sequence[float | None]) -> float | None:
        if any(v is None for v in values):
            return None
        return (
            sum((p.drafts or 0.0) * (v or 0.0) for p, v in zip(present, values, strict=True))
            / drafts
        )

    def total(values: Sequence[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    widths = {len(p.per_position or ()) for p in present}
    per_position: tuple[float, ...] | None = None
    if len(widths) == 1 and widths != {0}:
        [width] = widths
        per_position = tuple(
            sum((p.drafts or 0.0) * (p.per_position or ())[i] for p in present) / drafts
            for i in range(width)
        )
    return Acceptance(
        engine=present[-1].engine,
        acceptance_rate=weighted([p.acceptance_rate for p in present]),
        mean_acceptance_length=weighted([p.mean_acceptance_length for p in present]),
        drafts=drafts,
        draft_tokens=total([p.draft_tokens for p in present]),
        accepted_tokens=total([p.accepted_tokens for p in present]),
        per_position=per_position,
    )


def _merge_phases(parts: Sequence[ArmLevel]) -> PhaseTimes | None:
    """Mean phase times over the rounds, weighted by each round's finished requests."""
    if len(parts) == 1:
        return parts[0].phases
    if any(p.phases is None for p in parts):
        return None
    weights = [sum(1 for r in p.results if r.ok) for p in parts]
    if not sum(weights):
        return None

    def mean_of(name: str) -> float | None:
        values: list[float | None] = [getattr(p.phases, name) for p in parts]
        if any(v is None for v in values):
            return None
        total = sum(w * (v or 0.0) for w, v in zip(weights, values, strict=True))
        return total / sum(weights)

    return PhaseTimes(mean_of("queue_s"), mean_of("prefill_s"), mean_of("decode_s"))


def measured_cell(record: SweepRecord, k: int, load: int) -> Cell:
    """A cell from one level's record (both arms at one concurrency)."""
    [level] = judge(record).levels
    cand, base = _arms(record)
    accepted = cand.acceptance
    return Cell(
        k=k,
        concurrency=load,
        outcome=level.outcome if level.outcome != "no data" else "no data",
        speedup=level.speedup,
        tpot_ratio=level.decode_speedup,
        candidate_tpot_ms=_tpot_ms(cand.results),
        baseline_tpot_ms=_tpot_ms(base.results),
        acceptance_length=None if accepted is None else accepted.mean_acceptance_length,
        per_position=tuple(accepted.per_position or ()) if accepted is not None else (),
        ok=sum(1 for r in cand.results if r.ok),
        failed=sum(1 for r in cand.results if not r.ok),
    )


def _tpot_ms(results: Sequence[Any]) -> Ratio | None:
    values = [r.tpot_s * 1000.0 for r in results if r.ok and r.tpot_s is not None]
    return mean_with_interval(values)


def _eta(spent: Sequence[float], left: int) -> str:
    if not spent:
        return ""
    seconds = sum(spent) / len(spent) * left
    minutes, rest = divmod(round(seconds), 60)
    return f" (about {minutes}m{rest:02d}s left)" if minutes else f" (about {rest}s left)"


def ratio_json(ratio: Ratio | None) -> dict[str, float] | None:
    if ratio is None:
        return None
    return {
        "value": round(ratio.value, 4),
        "low": round(ratio.low, 4),
        "high": round(ratio.high, 4),
        "confidence": ratio.confidence,
    }


def cell_json(cell: Cell) -> dict[str, Any]:
    return {
        "k": cell.k,
        "concurrency": cell.concurrency,
        "outcome": cell.outcome,
        "speedup": ratio_json(cell.speedup),
        "tpot_ratio": ratio_json(cell.tpot_ratio),
        "candidate_tpot_ms": ratio_json(cell.candidate_tpot_ms),
        "baseline_tpot_ms": ratio_json(cell.baseline_tpot_ms),
        "acceptance_length": cell.acceptance_length,
        "per_position": list(cell.per_position),
        "ok": cell.ok,
        "failed": cell.failed,
        "note": cell.note,
    }


def cell_from_json(raw: Any) -> Cell:
    def ratio(value: Any) -> Ratio | None:
        if value is None:
            return None
        return Ratio(float(value["value"]), float(value["low"]), float(value["high"]))

    outcome = str(raw["outcome"])
    if outcome not in ("pays", "loses", "inconclusive", "no data", "skipped"):
        raise ValueError(f"cell outcome {outcome!r}")
    return Cell(
        k=int(raw["k"]),
        concurrency=int(raw["concurrency"]),
        outcome=outcome,  # type: ignore[arg-type]
        speedup=ratio(raw.get("speedup")),
        tpot_ratio=ratio(raw.get("tpot_ratio")),
        candidate_tpot_ms=ratio(raw.get("candidate_tpot_ms")),
        baseline_tpot_ms=ratio(raw.get("baseline_tpot_ms")),
        acceptance_length=raw.get("acceptance_length"),
        per_position=tuple(float(p) for p in raw.get("per_position") or ()),
        ok=int(raw.get("ok") or 0),
        failed=int(raw.get("failed") or 0),
        note=str(raw.get("note") or ""),
    )
