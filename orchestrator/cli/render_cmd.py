"""render: validate, then write the engine launch, engine config files and manifests."""

from __future__ import annotations

import json
from pathlib import Path

import click

from orchestrator.cli.options import (
    format_option,
    ignore_option,
    offline_option,
    platform_options,
    profile_argument,
    strict_option,
)
from orchestrator.deploy.dry_run_files import MARKER, render_files, write_file, write_files
from orchestrator.emitters.base import Emitter, emitter_for
from orchestrator.manifests.helm import helm_values_yaml
from orchestrator.output import plan_document, text_report
from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan, PlanResult
from orchestrator.shell_text import shell_line


@click.command()
@click.argument("profile", type=profile_argument)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for launch.json, engine config files and k8s/ manifests; replaced whole "
    f"(only a new or empty directory, or one an earlier render wrote: it holds {MARKER}).",
)
@click.option(
    "--helm-values",
    "helm_values_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write values for the Helm chart in charts/specdeploy.",
)
@platform_options
@format_option
@strict_option
@offline_option
@ignore_option
def render(
    profile: Path,
    out_dir: Path,
    helm_values_file: Path | None,
    platform: str,
    platform_option: dict[str, str],
    output: str,
    strict: bool,
    offline: bool,
    ignore: tuple[str, ...],
) -> None:
    """Validate, then write the engine launch and Kubernetes manifests (a dry run).

    Nothing is written unless the profile is valid. Exit codes as for validate, and 1 when the
    files cannot be written (DIR holds files specdeploy did not write, or the filesystem refuses).
    """
    plan = load_and_plan(profile, offline=offline, ignore=frozenset(ignore))
    code = plan.exit_code(strict=strict)
    written: list[Path] = []
    if code == 0 and isinstance(plan, DeploymentPlan):
        files = render_files(plan, platform=platform, options=platform_option)
        written = write_files(files, out_dir)
        if helm_values_file is not None:
            written.append(write_file(helm_values_file, helm_values_yaml(plan)))
    if output == "json":
        document = plan_document(plan, strict=strict)
        document["written"] = [str(p) for p in written]
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo(text_report(plan, strict=strict), err=code != 0)
        _print_written(plan, written, out_dir)
        if written and isinstance(plan, DeploymentPlan):
            _print_chart_installs(emitter_for(platform, platform_option), plan, out_dir)
    click.get_current_context().exit(code)


def _print_written(plan: PlanResult, written: list[Path], out_dir: Path) -> None:
    if not written or not isinstance(plan, DeploymentPlan):
        click.echo(f"nothing written to {out_dir}", err=True)
        return
    click.echo(f"wrote {len(written)} files to {out_dir}:")
    for path in written:
        click.echo(f"  {path}")
    click.echo(f"launch: {shell_line(plan.launch.argv, plan.launch.env)}")


def _print_chart_installs(emitter: Emitter, plan: DeploymentPlan, out_dir: Path) -> None:
    installs = emitter.chart_installs(plan, values_dir=str(out_dir))
    if installs is None:
        return
    click.echo(f"then install {installs.what}:")
    for command in installs.commands:
        click.echo(f"  {command}")


COMMANDS: tuple[click.Command, ...] = (render,)
