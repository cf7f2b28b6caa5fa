"""The specdeploy command line: a click group with the one error boundary.

User errors (`OrchestratorError`) become "Error: what / why / fix" on stderr and the error's exit
code; anything else is a bug and keeps its traceback. `--debug` logs tracebacks for user errors too.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from orchestrator import __version__
from orchestrator.errors import OrchestratorError

log = logging.getLogger("specdeploy")


class ErrorBoundaryGroup(click.Group):
    """Turns every OrchestratorError into a readable message and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OrchestratorError as exc:
            log.debug("user-facing error", exc_info=True)
            click.echo(f"Error: {exc.render()}", err=True)
            ctx.exit(exc.exit_code)


@click.group(cls=ErrorBoundaryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specdeploy")
@click.option("--debug", is_flag=True, help="Log tracebacks for user-facing errors.")
def cli(debug: bool) -> None:
    """Deploy LLM servers with speculative decoding, or say precisely why it would not work."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def main() -> None:
    """Console entry point."""
    cli(prog_name="specdeploy")


def _register(*modules: Any) -> None:
    for module in modules:
        for command in module.COMMANDS:
            cli.add_command(command)


# Each command module exposes `COMMANDS`, a tuple of click commands. One import per module.
from orchestrator.cli import core  # noqa: E402

_register(core)
# --- helper-owned command modules: one import + one _register line each, below this marker ---
from orchestrator.cli import plan_cmd  # noqa: E402
_register(plan_cmd)
from orchestrator.cli import bench_cmd  # noqa: E402
_register(bench_cmd)
