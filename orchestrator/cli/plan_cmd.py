"""plan and gpus: the per-GPU memory breakdown of a profile, and the GPU catalog."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.bench.acceptance import WORKLOADS, Workload, describe_rates
from orchestrator.bench.estimate import DEFAULT_CONTEXT_TOKENS, Disagreement, SpeedupEstimate
from orchestrator.bench.planned import NoEstimate, estimate_planned
from orchestrator.cli.options import format_option, offline_option, profile_argument
from orchestrator.memory.gpus import gpu_catalog
from orchestrator.memory.report import gpu_table, memory_table
from orchestrator.output import plan_document, text_report
from orchestrator.plan.build import load_and_plan


@click.command()
@click.argument("profile", type=profile_argument)
@click.option(
    "--speedup",
    is_flag=True,
    help="Add an analytic speedup estimate vs draft length and load (an estimate, not a measurement).",
)
@click.option(
    "--acceptance-rate",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Measured per-token acceptance rate for --speedup (from `specdeploy bench`); by default "
    "the proposer's published acceptance, else its method's sourced prior.",
)
@click.option(
    "--workload",
    type=click.Choice(WORKLOADS),
    default="chat",
    show_default=True,
    help="Which published acceptance figures --speedup uses (code or chat benchmarks).",
)
@click.option(
    "--context-tokens",
    type=click.IntRange(min=1),
    default=DEFAULT_CONTEXT_TOKENS,
    show_default=True,
    help="Mean context per decoding sequence for --speedup.",
)
@format_option
@offline_option
def plan(
    profile: Path,
    speedup: bool,
    acceptance_rate: float | None,
    workload: Workload,
    context_tokens: int,
    output: str,
    offline: bool,
) -> None:
    """Memory per GPU: weights, draft, KV, overheads; concurrency with and without speculation.

    Exit codes as validate: 0 fits, 3 profile invalid, 4 incompatible, 5 over the memory budget.
    """
    result = load_and_plan(profile, offline=offline)
    code = result.exit_code()
    memory = result.memory
    found: SpeedupEstimate | NoEstimate | None = None
    if speedup:
        found = estimate_planned(
            result,
            workload=workload,
            acceptance_rate=acceptance_rate,
            context_tokens=context_tokens,
        )
    if output == "json":
        document = plan_document(result)
        if isinstance(found, SpeedupEstimate):
            document["speedup_estimate"] = found.as_json()
        elif isinstance(found, NoEstimate):
            document["speedup_estimate"] = no_estimate_json(found)
        click.echo(json.dumps(document, indent=2))
    else:
        table = memory_table(memory) if memory is not None else ""
        speed = ""
        if isinstance(found, SpeedupEstimate):
            speed = speedup_table(found)
        elif isinstance(found, NoEstimate):
            speed = f"speedup estimate: none ({found.reason})"
        parts = (text_report(result), table, speed)
        click.echo("\n\n".join(t for t in parts if t), err=code != 0)
    click.get_current_context().exit(code)


def no_estimate_json(found: NoEstimate) -> dict[str, object]:
    """The `speedup_estimate` block when nothing is estimated: no loads, no recommendation."""
    return {
        "label": None,
        "recommended_num_speculative_tokens": None,
        "reason": found.reason,
        "acceptance": found.acceptance.as_json(3) if found.acceptance is not None else None,
        "loads": [],
        "disagreements": [],
    }


def speedup_table(estimate: SpeedupEstimate) -> str:
    """The estimate as text: speedup per draft length (columns) and load (rows)."""
    ks = [k for k, _ in estimate.loads[0].speedups]
    k = estimate.recommended_num_speculative_tokens
    lines = [f"speedup estimate ({estimate.label})"]
    if estimate.acceptance is not None:
        curve = estimate.acceptance.curve
        lines.append(f"  acceptance: {estimate.acceptance.label}")
        lines.append(
            f"    at k={k}: {curve.mean_length(k):.2f} tokens per step, per-position "
            f"{describe_rates(curve.rates(k))}"
        )
        lines += [f"    source: {source}" for source in estimate.acceptance.sources]
    scheduled = estimate.loads[0].scheduled_k is not None
    lines += [
        f"  draft/target cost ratio at concurrency 1: {estimate.cost_ratio:.3f}",
        "  concurrency "
        + "".join(f"  k={k:<4}" for k in ks)
        + "  best"
        + ("  scheduled" if scheduled else ""),
    ]
    warned = {(d.concurrency, d.num_speculative_tokens) for d in estimate.disagreements}
    for load in estimate.loads:
        cells = "".join(
            f"  {s:5.2f}{'!' if (load.concurrency, k) in warned else 'x'}" for k, s in load.speedups
        )
        line = f"  {load.concurrency:>11} {cells}  k={load.best_k}"
        if load.scheduled_k is not None and load.scheduled_speedup is not None:
            line += f"  k={load.scheduled_k}: {load.scheduled_speedup:.2f}x"
        lines.append(line)
    if scheduled:
        lines.append(
            "  scheduled: the draft length proposer.num_speculative_tokens_per_batch_size runs "
            "at that load, and its estimated speedup"
        )
    lines.append(f"  recommended num_speculative_tokens: {k}")
    lines.append(f"  ({estimate.reason})")
    if estimate.stops_paying_at is not None:
        lines.append(f"  estimated to stop paying at concurrency {estimate.stops_paying_at}")
    first: dict[int, Disagreement] = {}
    for d in estimate.disagreements:
        first.setdefault(d.concurrency, d)
    if first:
        lines.append(
            "  ! serving.high-concurrency warns at that load and draft length; why they differ:"
        )
    for d in first.values():
        lines.append(f"    at concurrency {d.concurrency}, k>={d.num_speculative_tokens}: {d.why}")
    lines += [f"  assumes {name}: {value}" for name, value in estimate.assumptions]
    return "\n".join(lines)


@click.command()
@format_option
def gpus(output: str) -> None:
    """List the GPU catalog: memory as NVML reports it, bandwidth, TFLOPS and node label."""
    catalog = list(gpu_catalog().values())
    if output == "json":
        rows = [
            {
                "name": g.name,
                "memory_mib": g.memory_mib,
                "memory_gib": round(g.memory_gib, 2),
                "bandwidth_tbps": g.bandwidth_tbps,
                "bf16_tflops": g.bf16_tflops,
                "fp8_tflops": g.fp8_tflops,
                "arch": g.arch_name,
                "node_label": {g.label_key: g.label_value},
                "source": g.source,
            }
            for g in catalog
        ]
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(gpu_table(catalog))


COMMANDS: tuple[click.Command, ...] = (plan, gpus)
