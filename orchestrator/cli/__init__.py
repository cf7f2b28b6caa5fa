"""The specdeploy command line: a click group with the one error boundary.

User errors (`OrchestratorError`) become "Error: what / why / fix" on stderr and the error's exit
code; anything else is a bug and keeps its traceback. `--debug` logs tracebacks for user errors too.
"""

from __future__ import annotations

import os

# Pydantic scans every installed distribution for plugins when the first model is built (about
# 0.1 s); specdeploy uses none. A user who needs plugins can set the variable themselves.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import gc
import importlib
import sys
from typing import Any

import click

from orchestrator import __version__
from orchestrator.errors import OrchestratorError

#: Command name -> module defining it. A module is imported only when one of its commands runs
#: (or for --help), so `validate` never pays for the Kubernetes, Docker or HTTP clients.
COMMAND_MODULES: dict[str, str] = {
    "validate": "orchestrator.cli.core",
    "render": "orchestrator.cli.render_cmd",
    "schema": "orchestrator.cli.core",
    "engines": "orchestrator.cli.core",
    "explain": "orchestrator.cli.core",
    "plan": "orchestrator.cli.plan_cmd",
    "gpus": "orchestrator.cli.plan_cmd",
    "bench": "orchestrator.cli.bench_cmd",
    "apply": "orchestrator.cli.deploy_cmd",
    "status": "orchestrator.cli.deploy_cmd",
    "delete": "orchestrator.cli.deploy_cmd",
    "inspect": "orchestrator.cli.inspect_cmd",
    "catalog": "orchestrator.cli.catalog_cmd",
    "dev": "orchestrator.cli.dev_cmd",
    "run": "orchestrator.cli.run_cmd",
    "suggest": "orchestrator.cli.suggest_cmd",
    "operator": "orchestrator.cli.operator_cmd",
    "tune": "orchestrator.cli.tune_cmd",
}


class ErrorBoundaryGroup(click.Group):
    """Turns every OrchestratorError into a readable message and its exit code, and loads each
    command's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMAND_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in COMMAND_MODULES:
            return command
        module = _import_quietly(COMMAND_MODULES[cmd_name])
        for candidate in module.COMMANDS:
            self.add_command(candidate)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OrchestratorError as exc:
            if ctx.meta.get("specdeploy.debug"):
                import traceback  # only --debug prints one

                traceback.print_exc(file=sys.stderr)
            click.echo(f"Error: {exc.render()}", err=True)
            ctx.exit(exc.exit_code)
        finally:
            _print_warnings()


def _print_warnings() -> None:
    """Say once, at the end of the command, what a data source had to skip (a damaged user
    catalog entry): not an error, since every other model still resolves. Only a module that
    was loaded can have something to say, so this never imports one."""
    user_catalog = sys.modules.get("orchestrator.checkpoint.catalog.user")
    if user_catalog is None:
        return
    for warning in user_catalog.take_warnings():
        click.echo(f"Warning: {warning.render()}", err=True)


def _import_quietly(name: str) -> Any:
    """Import a command's module with the cyclic garbage collector paused.

    Importing defines a few hundred classes and functions, none of them garbage, yet every 700
    allocations trigger a generation-0 collection (CPython 3.11's default threshold) that walks
    them: about a quarter of specdeploy's start-up above a bare pydantic CLI
    (benchmarks/cli_startup.py). Afterwards the imported objects are frozen, so later collections
    in long-running commands (bench, the operator) skip them, and collection resumes as usual."""
    if not gc.isenabled():
        return importlib.import_module(name)
    gc.disable()
    try:
        return importlib.import_module(name)
    finally:
        gc.freeze()
        gc.enable()


@click.group(cls=ErrorBoundaryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specdeploy")
@click.option("--debug", is_flag=True, help="Log tracebacks for user-facing errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Deploy LLM servers with speculative decoding, or say precisely why it would not work."""
    ctx.meta["specdeploy.debug"] = debug
    if debug:  # logging costs start-up time; only --debug needs it
        import logging

        logging.basicConfig(
            level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
        )


def main() -> None:
    """Console entry point."""
    cli(prog_name="specdeploy")


# Each command module exposes `COMMANDS`, a tuple of click commands, and is listed in
# COMMAND_MODULES above.
