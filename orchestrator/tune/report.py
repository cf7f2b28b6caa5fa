"""What `tune` writes into --out DIR: tune.json, tune.md, tune.png and the tuned profile.

tune.json (schema `specdeploy.tune/v1`, docs/cli.md): the settings, every cell with its
intervals, the choice per load with its reason, the schedule, the crossover and the operator
policy that matches. profile.yaml: the input profile with the measured draft lengths: for vLLM
releases with a dynamic schedule, `proposer.num_speculative_tokens_per_batch_size` and
`num_speculative_tokens` = the largest k chosen; otherwise the best fixed k (the one chosen at the
lowest load), since the engine cannot change k with the load.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

import yaml

from orchestrator.bench.stats import Ratio
from orchestrator.tune.choose import Cell, Choice, choose, crossover, schedule
from orchestrator.tune.run import LOCAL, SCHEMA, TuneState, cell_json, ratio_json

MARKDOWN_NAME: Final = "tune.md"
PNG_NAME: Final = "tune.png"
PROFILE_NAME: Final = "profile.yaml"


def summary(state: TuneState, max_batch: int) -> dict[str, Any]:
    choices = choose(state.cells)  # a load whose every cell was skipped gets the baseline
    ranges = schedule(choices, max_batch)
    chosen = [c.k for c in choices if c.k > 0]
    policy: dict[str, Any] = {}
    if chosen:
        policy["retune"] = {"min_tokens": min(chosen), "max_tokens": max(chosen)}
    found = crossover(choices)
    if found is not None:
        policy["switch_to_baseline_at_concurrency"] = found
    return {
        "choices": choices,
        "schedule": ranges,
        "crossover": found,
        "policy": policy,
    }


def to_json(state: TuneState, profile: str, max_batch: int) -> dict[str, Any]:
    figures = summary(state, max_batch)
    settings = state.settings
    return {
        "schema": SCHEMA,
        "profile": profile,
        "interrupted": state.interrupted,
        "config": {
            **settings.identity(),
            "k": list(settings.ks),
            "concurrency": list(settings.loads),
            "exhaustive": settings.exhaustive,
            "max_batch": max_batch,
        },
        "cells": [cell_json(c) for c in sorted(state.cells, key=lambda c: (c.concurrency, c.k))],
        "choices": [
            {"concurrency": c.concurrency, "k": c.k, "speedup": ratio_json(c.speedup), "why": c.why}
            for c in figures["choices"]
        ],
        "schedule": [list(r) for r in figures["schedule"]],
        "crossover": figures["crossover"],
        "policy": figures["policy"],
    }


def to_markdown(state: TuneState, document: dict[str, Any]) -> str:
    ks, loads = state.settings.ks, state.settings.loads
    cells = {(c.k, c.concurrency): c for c in state.cells}
    chosen = {c["concurrency"]: c["k"] for c in document["choices"]}
    baseline = (
        "the baseline, served alone and measured once before the candidates (--local)"
        if state.settings.baseline == LOCAL
        else "the baseline measured alongside"
    )
    lines = [
        "# specdeploy tune",
        "",
        f"Profile `{document['profile']}`, workload `{state.settings.workload.name}`, "
        f"{state.settings.config.requests} requests per arm and cell. Speedup: output tokens per "
        f"second of request time against {baseline}, 95 % bootstrap interval; "
        "**bold**: the k chosen at that load (k = 0: the baseline).",
        "",
        "| k \\ concurrency | " + " | ".join(str(c) for c in loads) + " |",
        "|---|" + "---|" * len(loads),
    ]
    for k in ks:
        row = [_cell_text(cells.get((k, load)), chosen.get(load) == k) for load in loads]
        lines.append(f"| {k} | " + " | ".join(row) + " |")
    base = ["**baseline**" if chosen.get(load) == 0 else "-" for load in loads]
    lines.append("| 0 | " + " | ".join(base) + " |")
    lines += ["", "## Choice per load", ""]
    lines += [
        f"- concurrency {c['concurrency']}: k={c['k']}: {c['why']}" for c in document["choices"]
    ]
    lines += ["", "## Schedule", ""]
    if document["schedule"]:
        lines.append(
            "`num_speculative_tokens_per_batch_size`: "
            + ", ".join(f"{s}-{e}: k={k}" for s, e, k in document["schedule"])
        )
    else:
        lines.append("no cell measured yet")
    if document["crossover"] is not None:
        lines.append(
            f"\nSpeculation stops paying at concurrency {document['crossover']}: the baseline "
            "serves above it. A baseline twin does that faster than the schedule's k = 0: vLLM "
            "0.32.0 still runs the proposer every step there (a draft model's or head's first "
            "forward pass, to keep its KV cache in sync; n-gram's lookup), and a draft model "
            "still takes a slot of the step's token budget per request. Route above the "
            "crossover to a baseline twin with the operator (`deploy.baseline: true`, "
            "`policy.mode: switch`; the crossover is `policy` in tune.json)."
        )
    if document["interrupted"]:
        lines.append("\n**Interrupted**: run tune again with the same --out to measure the rest.")
    return "\n".join(lines) + "\n"


def _cell_text(cell: Cell | None, chosen: bool) -> str:
    if cell is None:
        return "not measured"
    if cell.outcome == "skipped":
        return "skipped"
    text = _ratio_text(cell.speedup)
    return f"**{text}**" if chosen else text


def _ratio_text(ratio: Ratio | None) -> str:
    if ratio is None:
        return "no data"
    return f"{ratio.value:.2f}x [{ratio.low:.2f}, {ratio.high:.2f}]"


def write_png(state: TuneState, choices: list[Choice], path: Path) -> None:
    """A heatmap of the speedup over k x load (k = 0 is the baseline's row), with the k chosen at
    each load drawn as a path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    rows, loads = [0, *state.settings.ks], list(state.settings.loads)
    cells = {(c.k, c.concurrency): c for c in state.cells}
    grid = [
        [
            cell.speedup.value if (cell := cells.get((k, load))) and cell.speedup else float("nan")
            for load in loads
        ]
        for k in rows
    ]
    values = [v for row in grid for v in row if v == v]
    norm = TwoSlopeNorm(
        vcenter=1.0, vmin=min([0.5, *values]) - 1e-6, vmax=max([1.5, *values]) + 1e-6
    )
    fig, ax = plt.subplots(figsize=(2.2 + 1.4 * len(loads), 1.6 + 0.75 * len(rows)))
    image = ax.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto", origin="lower")
    fig.colorbar(image, ax=ax, label="speedup vs baseline (1 = even)")
    for row, k in enumerate(rows):
        for column, load in enumerate(loads):
            cell = cells.get((k, load))
            label = (
                "baseline"
                if k == 0
                else "skipped"
                if cell and cell.outcome == "skipped"
                else (_short(cell))
            )
            ax.text(column, row + 0.22, label, ha="center", va="center", fontsize=8)
    points = [(loads.index(c.concurrency), rows.index(c.k)) for c in choices if c.k in rows]
    if points:
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, color="black", marker="o", markerfacecolor="white", linewidth=1.5,
                label="chosen k")  # fmt: skip
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xticks(range(len(loads)), [str(c) for c in loads])
    ax.set_yticks(range(len(rows)), ["0 (baseline)", *(str(k) for k in rows[1:])])
    ax.set_xlabel("concurrency")
    ax.set_ylabel("k (num_speculative_tokens)")
    ax.set_title("specdeploy tune: speedup per draft length and load")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _short(cell: Cell | None) -> str:
    if cell is None or cell.speedup is None:
        return ""
    return f"{cell.speedup.value:.2f}"


def tuned_profile(
    document: dict[str, Any],
    source_text: str,
    fixed_because: str | None,
    source: Path,
    out_dir: Path,
) -> str | None:
    """The profile with the measured draft lengths, or None when no k paid anywhere (serve the
    baseline: tune.md says so): the schedule, or with `fixed_because` (why the engine cannot
    run one) the best fixed k and the crossover. Local model paths are rewritten relative to
    `out_dir`, where the tuned profile is written, so they name the same directories."""
    source_name = source.name
    ranges = document["schedule"]
    chosen = [k for _, _, k in ranges if k > 0]
    if not chosen:
        return None
    profile = yaml.safe_load(source_text)
    for block in ("target", "proposer"):
        section = profile.get(block)
        model = section.get("model") if isinstance(section, dict) else None
        if isinstance(model, str) and model.startswith(("./", "../", "/")):
            where = (source.parent / model).resolve()
            section["model"] = os.path.relpath(where, out_dir.resolve())
    proposer = dict(profile.get("proposer") or {})
    if fixed_because is None:
        proposer["num_speculative_tokens"] = max(chosen)
        proposer["num_speculative_tokens_per_batch_size"] = [list(r) for r in ranges]
    else:
        first = next(c for c in document["choices"] if c["k"] > 0)
        proposer["num_speculative_tokens"] = first["k"]
        proposer.pop("num_speculative_tokens_per_batch_size", None)
    profile["proposer"] = proposer
    header = (
        f"# {source_name} with the draft lengths `specdeploy tune` measured (tune.json beside this"
        " file).\n"
    )
    if fixed_because is not None:
        header += f"# One k at every load ({fixed_because}): the best fixed k is set"
        header += (
            f", and speculation stops paying at concurrency {document['crossover']}.\n"
            if document["crossover"] is not None
            else ".\n"
        )
    return header + yaml.safe_dump(profile, sort_keys=False)
