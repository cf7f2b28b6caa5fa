"""plan and gpus: the per-GPU memory breakdown of a profile, and the GPU catalog."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.bench.estimate import (
    DEFAULT_CONTEXT_TOKENS,
    SpeedupEstimate,
    estimate_for_deployment,
)
from orchestrator.cli.options import format_option, offline_option, profile_argument
from orchestrator.memory.gpus import find_gpu, gpu_catalog
from orchestrator.memory.report import gpu_table, memory_table
from orchestrator.output import plan_document, text_report
from orchestrator.plan.build import load_and_plan
from orchestrator.profile.schema import Profile

#: Default per-token acceptance for --speedup when the user has not measured one: a mid value
#: between typical n-gram (~0.3-0.5) and trained EAGLE/MTP heads (~0.7-0.8) reported in vLLM's
#: and SGLang's spec-decode docs; the output says to measure it with `specdeploy bench`.
DEFAULT_ACCEPTANCE_RATE = 0.6


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
    default=DEFAULT_ACCEPTANCE_RATE,
    show_default=True,
    help="Per-token acceptance probability for --speedup; take it from `specdeploy bench`.",
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
    acceptance_rate: float,
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
    estimate = None
    if speedup and memory is not None and result.profile is not None and result.profile.speculative:
        gpu = find_gpu(result.profile.hardware.gpu or "")
        estimate = estimate_for_deployment(
            memory, gpu, acceptance_rate, context_tokens=context_tokens
        )
    if output == "json":
        document = plan_document(result)
        if estimate is not None:
            document["speedup_estimate"] = estimate.as_json()
        click.echo(json.dumps(document, indent=2))
    else:
        table = memory_table(memory) if memory is not None else ""
        note = "" if estimate is not None or not speedup else _no_estimate(result.profile)
        speed = speedup_table(estimate) if estimate is not None else note
        parts = (text_report(result), table, speed)
        click.echo("\n\n".join(t for t in parts if t), err=code != 0)
    click.get_current_context().exit(code)


def _no_estimate(profile: Profile | None) -> str:
    if profile is not None and not profile.speculative:
        return "speedup estimate: none (the profile has no proposer)"
    return "speedup estimate: none (no memory budget could be estimated; see the findings)"


def speedup_table(estimate: SpeedupEstimate) -> str:
    """The estimate as text: speedup per draft length (columns) and load (rows)."""
    ks = [k for k, _ in estimate.loads[0].speedups]
    lines = [
        f"speedup estimate ({estimate.label})",
        f"  acceptance rate {estimate.alpha:.2f}, draft/target cost ratio {estimate.cost_ratio:.3f}",
        "  concurrency " + "".join(f"  k={k:<4}" for k in ks) + "  best",
    ]
    for load in estimate.loads:
        cells = "".join(f"  {s:5.2f}x" for _, s in load.speedups)
        lines.append(f"  {load.concurrency:>11} {cells}  k={load.best_k}")
    lines.append(
        f"  recommended num_speculative_tokens: {estimate.recommended_num_speculative_tokens}"
    )
    lines.append(f"  ({estimate.reason})")
    if estimate.stops_paying_at is not None:
        lines.append(f"  estimated to stop paying at concurrency {estimate.stops_paying_at}")
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
