"""`specdeploy tune`: measure every (draft length k, load) cell and choose k per load.

Each cell is one `bench` level: the server running k and the baseline, the same requests, one
after the other (`orchestrator.bench.sweep`), so its speedup is a ratio against a baseline
measured alongside it, with a bootstrap interval. Cells are measured in load order, k ascending;
after each one the state is written to DIR/tune.json, so a run that is interrupted (Ctrl-C,
SIGTERM) keeps every finished cell and a second run with the same settings measures only the rest.
A k above one that already lost beyond noise at this or a lower load is not measured (`prune`)
unless `exhaustive`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from orchestrator.bench.client import Api, Endpoint
from orchestrator.bench.stats import Ratio, mean_with_interval
from orchestrator.bench.sweep import SweepConfig, SweepRecord, run_sweep
from orchestrator.bench.verdict import judge
from orchestrator.bench.workload import Workload
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
)


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
        }


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
        eta = _eta(spent, len(todo) - index + 1)
        progress(f"[{index}/{len(todo)}] k={k} at concurrency {load}{eta}")
        began = time.monotonic()
        record = run_sweep(
            Endpoint(f"k={k}", settings.url(k), "", settings.api),
            Endpoint("baseline", settings.baseline, "", settings.api),
            settings.workload,
            dataclasses.replace(settings.config, concurrency=(load,), request_rates=()),
            progress=lambda line: progress("    " + line),
        )
        if record.interrupted:
            state.interrupted = True
            break
        spent.append(time.monotonic() - began)
        state.cells.append(measured_cell(record, k, load))
        state.measured_now += 1
        save(state)
    return state


def measured_cell(record: SweepRecord, k: int, load: int) -> Cell:
    """A cell from one level's record (both arms at one concurrency)."""
    [level] = judge(record).levels
    cand = next(a for a in record.arms if a.label == record.candidate.label)
    base = next(a for a in record.arms if a.label == record.baseline.label)
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
