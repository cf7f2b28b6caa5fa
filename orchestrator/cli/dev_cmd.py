"""dev: developer tools (tiny local checkpoints for trying specdeploy without a GPU)."""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.dev.layered import make_layered_models
from orchestrator.dev.tiny_models import DEFAULT_DIR, make_tiny_models


@click.group()
def dev() -> None:
    """Developer tools: tiny models for trying the whole flow on a laptop."""


@dev.command("make-tiny-models")
@click.argument(
    "directory", required=False, default=str(DEFAULT_DIR), type=click.Path(path_type=Path)
)
@click.option("--python", help="A Python with torch and transformers (default: .venv-vllm's).")
@click.option("--force", is_flag=True, help="Rebuild even if the models are up to date.")
def make_tiny_models_cmd(directory: Path, python: str | None, force: bool) -> None:
    """Build a tiny target, a matching draft and a mismatching draft in DIRECTORY
    (default .cache/tiny-models, where profiles/local/tiny-*.yaml look for them), and the
    layered test bed in DIRECTORY/layered (a deep target whose draft is its own first layer:
    speculation pays on a CPU)."""
    models = make_tiny_models(directory, python=python, force=force)
    click.echo(f"target:    {models.target}")
    click.echo(f"draft:     {models.draft}   (same tokenizer: a valid draft_model pairing)")
    click.echo(f"bad-draft: {models.bad_draft}   (other tokenizer: specdeploy refuses it)")
    layered = make_layered_models(directory, python=python, force=force)
    click.echo(f"layered:   {layered.target}   (24 layers; 23 write nothing)")
    click.echo(f"           {layered.draft}   (its first layer: acceptance 1.0)")
    click.echo(f"           {layered.noisy_draft}   (noise in the head: ~4.4 of 9 accepted at k=8)")


@dev.command("native-models")
@click.option(
    "--root",
    default=".",
    type=click.Path(path_type=Path, file_okay=False),
    help="Directory holding the engine venvs (.venv-vllm, .venv-sglang).",
)
def native_models_cmd(root: Path) -> None:
    """Record which model types and architectures each installed engine loads without remote
    code (orchestrator/engines/native_models.json, read by checkpoint.remote-code)."""
    from orchestrator.dev.native_models import OUTPUT, record

    done = record(root)
    if not done:
        raise click.ClickException(f"no engine venv under {root} (.venv-vllm, .venv-sglang)")
    for engine, version in done.items():
        click.echo(f"{engine} {version}: recorded in {OUTPUT}")


COMMANDS: tuple[click.Command, ...] = (dev,)
