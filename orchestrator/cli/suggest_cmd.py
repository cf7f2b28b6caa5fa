"""suggest: the compatible proposers of a target, ranked, with memory cost, expected acceptance
(sourced) and predicted speedup; the rejected candidates with the rules' reasons; `--write DIR`
writes one profile per option that `validate` accepts. Exit 0, 4 when TARGET cannot be resolved,
or 1 when DIR cannot be written.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from orchestrator.cli.options import format_option, offline_option
from orchestrator.engines.names import ENGINE_NAMES, EngineName
from orchestrator.errors import OrchestratorError
from orchestrator.memory.gpus import find_gpu
from orchestrator.suggest import WRITE_MARKER

if TYPE_CHECKING:
    from orchestrator.suggest.types import SuggestRequest


@click.command()
@click.argument("target")
@click.option(
    "--gpu", default="H100-80GB", show_default=True, help="GPU catalog name (`specdeploy gpus`)."
)
@click.option(
    "--engine",
    "engine",
    type=click.Choice([*ENGINE_NAMES, "all"]),
    default="vllm",
    show_default=True,
    help="Engine to plan each option for (its newest release in the capability matrix), or all.",
)
@click.option(
    "--max-model-len",
    type=click.IntRange(min=1),
    default=None,
    help="Longest sequence; default 8192, or less when the target supports less.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Concurrent requests to size and estimate for.",
)
@click.option(
    "--workload",
    type=click.Choice(["chat", "code"]),
    default="chat",
    show_default=True,
    help="Which published acceptance figures to use (chat or code benchmarks).",
)
@click.option(
    "--tensor-parallel-size",
    type=click.IntRange(min=1),
    default=None,
    help="GPUs per replica; default the fewest (1, 2, 4, 8) that hold the load.",
)
@click.option(
    "--context-tokens",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Mean context per decoding sequence for the speedup estimate.",
)
@click.option(
    "--write",
    "write_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write one commented profile per option into this directory; replaced whole (only a "
    f"new or empty directory, or one an earlier suggest --write wrote: it holds {WRITE_MARKER}).",
)
@format_option
@offline_option
def suggest(
    target: str,
    gpu: str,
    engine: str,
    max_model_len: int | None,
    concurrency: int,
    workload: str,
    tensor_parallel_size: int | None,
    context_tokens: int,
    write_dir: Path | None,
    output: str,
    offline: bool,
) -> None:
    """What can speculate for TARGET (a hub id or a local checkpoint directory): native MTP, known
    EAGLE-3/EAGLE heads, same-tokenizer drafts and n-gram, ranked, each with the engines that
    support it, its memory cost, expected acceptance and predicted speedup.

    For a local directory, candidates are its sibling directories and the user catalog.
    Exit 0, 4 when TARGET cannot be resolved, or 1 when the --write directory cannot be written
    (it holds files specdeploy did not write, is a symbolic link, or the filesystem refuses).
    """
    from orchestrator.suggest.build import suggest as run
    from orchestrator.suggest.report import suggestions_json, suggestions_text
    from orchestrator.suggest.types import SuggestRequest
    from orchestrator.suggest.write import write_profiles

    try:
        find_gpu(gpu)  # an unknown GPU is a usage mistake: say so before planning anything
    except OrchestratorError as exc:
        what = exc.what.removeprefix("hardware.gpu: ")
        fix = exc.fix.replace("set hardware.gpu to", "pass")
        raise click.BadParameter(f"{what}; {fix}", param_hint="--gpu") from None
    engines = ENGINE_NAMES if engine == "all" else (cast(EngineName, engine),)
    request = SuggestRequest(
        target=target,
        gpu=gpu,
        engines=engines,
        max_model_len=max_model_len,
        concurrency=concurrency,
        workload="code" if workload == "code" else "chat",
        tensor_parallel_size=tensor_parallel_size,
        context_tokens=context_tokens,
        offline=offline,
    )
    found = run(request)
    written: dict[int, Path] = {}
    if write_dir is not None:
        written = write_profiles(found, write_dir, _command(target, engine, request))
    if output == "json":
        names = {rank: str(path) for rank, path in written.items()}
        click.echo(json.dumps(suggestions_json(found, names), indent=2))
        return
    click.echo(suggestions_text(found))
    if written:
        click.echo(f"\nwrote {len(written)} profiles to {write_dir}:")
        click.echo("\n".join(f"  {path}" for path in written.values()))


def _command(target: str, engine: str, request: SuggestRequest) -> str:
    """The command line that reproduces this run, for the written profiles' comments."""
    words = ["specdeploy", "suggest", target, "--gpu", request.gpu, "--engine", engine]
    if request.max_model_len is not None:
        words += ["--max-model-len", str(request.max_model_len)]
    words += ["--concurrency", str(request.concurrency), "--workload", request.workload]
    if request.tensor_parallel_size is not None:
        words += ["--tensor-parallel-size", str(request.tensor_parallel_size)]
    if request.offline:
        words.append("--offline")
    return " ".join(shlex.quote(w) for w in words)


COMMANDS: tuple[click.Command, ...] = (suggest,)
