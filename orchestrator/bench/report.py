"""Bench output: one JSON document (DESIGN §7), a Markdown report and a PNG plot.

JSON: each level carries `speedup` {value, low, high, confidence} (candidate over baseline,
output tokens per second of request time) and each arm carries `acceptance_rate` and
`mean_acceptance_length` (null when the engine exposes none). matplotlib is imported only when the PNG is written.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from orchestrator.bench.client import Endpoint
from orchestrator.bench.safe import printable
from orchestrator.bench.stats import Distribution, Ratio
from orchestrator.bench.summary import ArmSummary
from orchestrator.bench.sweep import SweepRecord
from orchestrator.bench.verdict import LevelVerdict, Verdict
from orchestrator.redaction import Redactor

SCHEMA: Final = "specdeploy.bench/v1"
JSON_NAME: Final = "bench.json"
MARKDOWN_NAME: Final = "bench.md"
PNG_NAME: Final = "bench.png"


def write_reports(
    record: SweepRecord, verdict: Verdict, out: Path, redactor: Redactor | None = None
) -> list[Path]:
    """Write bench.json, bench.md and bench.png into `out`; returns the paths written. With a
    redactor, every string of the JSON and the whole Markdown text pass through it (the PNG
    holds only numbers and fixed labels)."""
    redact = redactor or Redactor(())
    out.mkdir(parents=True, exist_ok=True)
    document = redact.data(to_json(record, verdict))
    paths = [out / JSON_NAME, out / MARKDOWN_NAME, out / PNG_NAME]
    paths[0].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(redact(to_markdown(record, verdict)), encoding="utf-8")
    write_png(verdict, paths[2])
    return paths


def to_json(record: SweepRecord, verdict: Verdict) -> dict[str, Any]:
    """The JSON document (contract: docs/cli.md, `bench`)."""
    config = record.config
    return {
        "schema": SCHEMA,
        "interrupted": record.interrupted,
        "workload": {
            "name": record.workload.name,
            "description": record.workload.description,
            "items": len(record.workload.items),
        },
        "candidate": _endpoint(record.candidate),
        "baseline": _endpoint(record.baseline),
        "config": {
            "concurrency": list(config.concurrency),
            "request_rates": list(config.request_rates),
            "arrival_seed": config.arrival_seed,
            "requests_per_level": config.requests,
            "max_tokens": config.max_tokens,
            "sampling": dataclasses.asdict(config.sampling),
            "timeout_s": config.timeout_s,
            "stall_s": config.stall_s,
            "level_time_limit_s": config.level_time_limit_s,
            "prediction_on": config.prediction_on,
        },
        "levels": [_level(lv) for lv in verdict.levels],
        "crossover": dataclasses.asdict(verdict.crossover),
        "warnings": [dataclasses.asdict(w) for w in verdict.warnings],
    }


def _endpoint(endpoint: Endpoint) -> dict[str, Any]:
    return {"url": endpoint.api_root, "model": endpoint.model, "api": endpoint.api}


def _level(lv: LevelVerdict) -> dict[str, Any]:
    return {
        "concurrency": lv.concurrency,
        "request_rate": lv.request_rate,
        "speedup": _ratio(lv.speedup),
        "decode_speedup": _ratio(lv.decode_speedup),
        "cost_rule_met": lv.cost_rule_met,
        "outcome": lv.outcome,
        "output_agreement": lv.output_agreement,
        "candidate": _arm(lv.candidate),
        "baseline": _arm(lv.baseline),
    }


def _ratio(ratio: Ratio | None) -> dict[str, float] | None:
    return None if ratio is None else dataclasses.asdict(ratio)


def _arm(arm: ArmSummary | None) -> dict[str, Any] | None:
    if arm is None:
        return None
    data = dataclasses.asdict(arm)
    data["errors"] = [{"cause": cause, "count": count} for cause, count in arm.errors]
    data["server_phases_s"] = data.pop("phases")
    return data


def to_markdown(record: SweepRecord, verdict: Verdict) -> str:
    """A human report: endpoints, warnings first, one row per level, then the crossover."""
    lines = [
        "# Speculative decoding A/B",
        "",
        f"- candidate: {_code(record.candidate.api_root)} model {_code(record.candidate.model)}",
        f"- baseline: {_code(record.baseline.api_root)} model {_code(record.baseline.model)}",
        f"- workload: {_text(record.workload.name)} ({_text(record.workload.description)})",
        f"- sampling: temperature {record.config.sampling.temperature}, "
        f"{record.config.requests} requests per arm per level, max_tokens "
        f"{record.config.max_tokens}",
    ]
    if record.config.request_rates:
        lines.append(
            f"- load: open loop, Poisson arrivals (seed {record.config.arrival_seed}, the same "
            "schedule for both arms)"
        )
    prediction = _prediction_line(record)
    if prediction:
        lines.append(prediction)
    if record.interrupted:
        lines.append("- **interrupted: partial results**")
    lines += ["", *[f"> **warning ({w.code})**: {_text(w.message)}" for w in verdict.warnings]]
    lines += ["", "## Verdict per load", "", *_verdict_table(verdict), ""]
    lines += ["## Latency and throughput", "", *_latency_table(verdict), ""]
    phases = _phase_table(verdict)
    if phases:
        lines += ["## Server-side phases (engine histograms, mean ms per request)", "", *phases, ""]
    lines += [f"**Crossover:** {verdict.crossover.summary}", ""]
    lines += [
        "Speedup: output tokens per second of request time (the level's tokens over the sum of "
        "its requests' end-to-end latencies), candidate over baseline, with a 95 % bootstrap "
        "interval. Cost rule: candidate time per committed token below the "
        "baseline's time per token. Times in ms: TTFT (queue + prefill), TPOT (decode), ITL "
        "(between streamed chunks).",
        "",
    ]
    return "\n".join(lines)


def _prediction_line(record: SweepRecord) -> str | None:
    has_predictions = any(item.prediction is not None for item in record.workload.items)
    if not has_predictions:
        return None
    if record.candidate.api != "chat":
        return "- prediction: not sent (Predicted Outputs exist only in the chat API; use --chat)"
    if record.config.prediction_on == "candidate":
        return (
            "- prediction: sent to the **candidate only** (OpenAI Predicted Outputs); the "
            "baseline gets the same requests without it, so the speedup is what the prediction "
            "buys on the candidate endpoint"
        )
    return "- prediction: sent to both arms (OpenAI Predicted Outputs)"


_MARKDOWN_SPECIAL: Final = frozenset("\\`*_[]<>|#&")


def _text(text: str) -> str:
    """Plain Markdown text of a string that may come from a server or a file: printable, and
    with every character that Markdown or HTML would interpret escaped."""
    shown = printable(text, 2000)
    return "".join(f"\\{c}" if c in _MARKDOWN_SPECIAL else c for c in shown)


def _code(text: str) -> str:
    """An inline code span holding `text` literally (printable, fenced by more backticks than
    it contains in a row, as CommonMark allows)."""
    shown = printable(text, 2000)
    longest = max((len(run) for run in re.findall("`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") or not shown else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def _load_header(verdict: Verdict) -> str:
    open_loop = verdict.crossover.axis == "request_rate"
    return "request rate (req/s)" if open_loop else "concurrency"


def _verdict_table(verdict: Verdict) -> list[str]:
    rows = [
        f"| {_load_header(verdict)} | speedup [95 % CI] | outcome | cost rule | acceptance rate "
        "| mean acceptance length | outputs agree |",
        "|---:|---|---|---|---:|---:|---:|",
    ]
    for lv in verdict.levels:
        rate = lv.candidate.acceptance_rate if lv.candidate else None
        length = lv.candidate.mean_acceptance_length if lv.candidate else None
        rows.append(
            f"| {lv.load:g} | {_fmt_ratio(lv.speedup)} | {lv.outcome} "
            f"| {_yes_no(lv.cost_rule_met)} | {_num(rate, 3)} | {_num(length, 2)} "
            f"| {_pct(lv.output_agreement)} |"
        )
    return rows


def _latency_table(verdict: Verdict) -> list[str]:
    rows = [
        f"| {_load_header(verdict)} | arm | ok/sent | TTFT p50/p99 | TPOT p50/p99 | ITL p50/p99 "
        "| tok/s per request | tok/s total | req/s | goodput req/s |",
        "|---:|---|---:|---|---|---|---:|---:|---:|---:|",
    ]
    for lv in verdict.levels:
        for arm in (lv.candidate, lv.baseline):
            if arm is None:
                continue
            flag = "" if arm.complete else " (partial)"
            rows.append(
                f"| {lv.load:g} | {arm.label}{flag} | {arm.ok}/{arm.sent} "
                f"| {_pair(arm.ttft_ms)} | {_pair(arm.tpot_ms)} | {_pair(arm.itl_ms)} "
                f"| {_num(arm.tokens_per_s_per_request.mean, 1)} "
                f"| {_num(arm.output_tokens_per_s, 1)} | {_num(arm.requests_per_s, 2)} "
                f"| {_num(arm.goodput_requests_per_s, 2)} |"
            )
    return rows


def _phase_table(verdict: Verdict) -> list[str]:
    rows = []
    for lv in verdict.levels:
        for arm in (lv.candidate, lv.baseline):
            if arm is None or arm.phases is None:
                continue
            p = arm.phases
            cells = [
                _num(None if v is None else v * 1000.0, 1)
                for v in (p.queue_s, p.prefill_s, p.decode_s)
            ]
            rows.append(f"| {lv.load:g} | {arm.label} | " + " | ".join(cells) + " |")
    if not rows:
        return []
    header = f"| {_load_header(verdict)} | arm | queue | prefill | decode |"
    return [header, "|---:|---|---:|---:|---:|", *rows]


def _fmt_ratio(ratio: Ratio | None) -> str:
    return "–" if ratio is None else f"{ratio.value:.2f}× [{ratio.low:.2f}, {ratio.high:.2f}]"


def _pair(dist: Distribution) -> str:
    return f"{_num(dist.p50, 1)} / {_num(dist.p99, 1)}"


def _num(value: float | None, digits: int) -> str:
    return "–" if value is None or value != value else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _yes_no(value: bool | None) -> str:
    return "–" if value is None else ("met" if value else "not met")


def write_png(verdict: Verdict, path: Path) -> None:
    """Latency and throughput vs load for both arms, plus the speedup with its interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    panels: tuple[tuple[str, Callable[[ArmSummary], float | None]], ...] = (
        ("TPOT p50 (ms)", lambda a: a.tpot_ms.p50),
        ("TTFT p50 (ms)", lambda a: a.ttft_ms.p50),
        ("output tokens/s (all requests)", lambda a: a.output_tokens_per_s),
    )
    for ax, (title, value) in zip(axes.flat, panels, strict=False):
        for side in ("candidate", "baseline"):
            arms = [
                (lv.load, lv.candidate if side == "candidate" else lv.baseline)
                for lv in verdict.levels
            ]
            points = [
                (c, y) for c, arm in arms if arm is not None and (y := value(arm)) is not None
            ]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=side)
        _axis(ax, title, _load_header(verdict))
    _speedup_panel(axes.flat[3], verdict)
    fig.suptitle("speculative (candidate) vs baseline")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _speedup_panel(ax: Any, verdict: Verdict) -> None:
    ratios = [(lv.load, lv.speedup) for lv in verdict.levels if lv.speedup is not None]
    if ratios:
        xs = [c for c, _ in ratios]
        values = [r.value for _, r in ratios]
        errors = [[r.value - r.low for _, r in ratios], [r.high - r.value for _, r in ratios]]
        ax.errorbar(xs, values, yerr=errors, marker="o", capsize=4, label="speedup")
    ax.axhline(1.0, color="grey", linestyle="--")
    _axis(ax, "speedup, tokens/s of request time (95 % CI)", _load_header(verdict))


def _axis(ax: Any, title: str, xlabel: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best")
