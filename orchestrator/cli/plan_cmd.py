"""plan and gpus: the per-GPU memory breakdown of a profile, and the GPU catalog."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.cli.options import format_option, offline_option, profile_argument
from orchestrator.memory.budget import MemoryEstimate
from orchestrator.memory.gpus import gpu_catalog
from orchestrator.memory.report import gpu_table, memory_table
from orchestrator.output import plan_document, text_report
from orchestrator.pipeline import build_plan


@click.command()
@click.argument("profile", type=profile_argument)
@format_option
@offline_option
def plan(profile: Path, output: str, offline: bool) -> None:
    """Memory per GPU: weights, draft, KV, overheads; concurrency with and without speculation.

    Exit codes as validate: 0 fits, 3 profile invalid, 4 incompatible, 5 over the memory budget.
    """
    result = build_plan(profile, offline=offline)
    code = result.exit_code()
    if output == "json":
        click.echo(json.dumps(plan_document(result), indent=2))
    else:
        memory = result.memory
        table = memory_table(memory) if isinstance(memory, MemoryEstimate) else ""
        click.echo("\n\n".join(t for t in (text_report(result), table) if t), err=code != 0)
    click.get_current_context().exit(code)


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
                "node_label": {g.label_key: g.label_value},
                "source": g.source,
            }
            for g in catalog
        ]
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo(gpu_table(catalog))


COMMANDS: tuple[click.Command, ...] = (plan, gpus)
