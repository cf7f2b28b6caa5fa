"""run: validate a profile, then run its engine on this host (--local) or in Docker (--docker)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import click

from orchestrator.cli.options import ignore_option, offline_option, profile_argument
from orchestrator.deploy.base import DeployTarget
from orchestrator.deploy.targets import DockerTarget, LocalProcessTarget
from orchestrator.output import text_report
from orchestrator.plan.build import load_and_plan
from orchestrator.plan.types import DeploymentPlan
from orchestrator.runner.base import RunOptions

TargetName = Literal["local", "docker"]

_executable = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command()
@click.argument("profile", type=profile_argument)
@click.option(
    "--local", "target", flag_value="local", help="Run the engine installed on this host."
)
@click.option("--docker", "target", flag_value="docker", default=True, help="Run it in Docker.")
@click.option(
    "--engine-bin", type=_executable, help="Engine executable (e.g. .venv-vllm/bin/vllm)."
)
@click.option("--python", type=_executable, help="Interpreter of the venv the engine lives in.")
@click.option("--port", type=click.IntRange(1, 65535), help="Listen here instead of serving.port.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for health.")
@click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path), help="Engine log.")
@click.option("--baseline", is_flag=True, help="Run the baseline twin (no speculation) instead.")
@offline_option
@ignore_option
def run(
    profile: Path,
    target: TargetName,
    engine_bin: Path | None,
    python: Path | None,
    port: int | None,
    timeout: float,
    log_file: Path | None,
    baseline: bool,
    offline: bool,
    ignore: tuple[str, ...],
) -> None:
    """Validate PROFILE, start its engine, wait until it is ready, and stop it on Ctrl-C.

    Nothing starts unless the profile validates (exit 3/4/5 as for validate); an engine that
    fails or refuses exits 6 with the engine's own message.
    """
    plan = load_and_plan(profile, offline=offline, ignore=frozenset(ignore))
    code = plan.exit_code()
    if code or not isinstance(plan, DeploymentPlan):
        click.echo(text_report(plan), err=True)
        click.get_current_context().exit(code)
        return
    chosen: DeployTarget
    if target == "docker":
        chosen = DockerTarget(baseline=baseline, host_port=port, health_timeout=timeout)
    else:
        options = RunOptions(engine_bin, python, port, timeout, log_file=log_file)
        chosen = LocalProcessTarget(options, baseline=baseline, progress=WaitProgress())
    chosen.deploy(plan, echo=click.echo)


class WaitProgress:
    """One rewritten status line on a terminal; a line every 15 s otherwise (CI logs)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.calls = 0

    def __call__(self, message: str) -> None:
        self.calls += 1
        if self.tty:
            click.echo(f"\r\033[K{message}", nl=not message, err=True)
        elif message and self.calls % 15 == 1:
            click.echo(message, err=True)


COMMANDS: tuple[click.Command, ...] = (run,)
