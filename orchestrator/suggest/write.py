"""`suggest --write DIR`: one ready profile per option, commented with where its numbers come from.

Each file is the option's planned profile (only the fields that differ from the schema defaults,
plus the GPU), so `specdeploy validate FILE` re-plans exactly what `suggest` planned. Local model
directories are written relative to DIR, as profiles resolve them relative to their own file.

DIR is written as `render --out` writes its directory (`orchestrator.output_dirs`): replaced whole,
only when new, empty or written by an earlier `suggest --write` (it holds `WRITE_MARKER`), never through
a symbolic link, atomically; a failed write (a full disk) is `OutputError` and leaves DIR as it was.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import Any, Final

import yaml

from orchestrator.bench.estimate import LABEL
from orchestrator.bench.planned import NoEstimate
from orchestrator.output_dirs import OwnedDirectory, write_files
from orchestrator.suggest import WRITE_MARKER
from orchestrator.suggest.report import METHOD_NAMES, speedups
from orchestrator.suggest.support import describe_support
from orchestrator.suggest.types import Option, Suggestions

_WIDTH: Final = 98
SUGGESTED: Final = OwnedDirectory(
    command="suggest",
    option="--write",
    marker=WRITE_MARKER,
    marker_text="Written by `specdeploy suggest --write`, which replaces this directory whole;\n"
    "files added here are deleted by the next `suggest --write` to it.\n",
    output="the suggested profiles",
    why_write="suggest --write writes one profile per option there; the directory is left as "
    "it was, with no partial profile and no temporary file",
    fix="pass --write a new or empty directory you can write to, on a filesystem with free space",
)
#: Sections in the order the example profiles (profiles/*.yaml) write them.
_ORDER: Final[tuple[str, ...]] = (
    "apiVersion",
    "kind",
    "metadata",
    "engine",
    "target",
    "proposer",
    "hardware",
    "serving",
    "deploy",
)


def write_profiles(found: Suggestions, directory: Path, command: str) -> dict[int, Path]:
    """Replace `directory` with every option of `found`, one file each; rank -> file. Raises
    `OutputError` (exit 1) when `directory` may not be replaced or a write fails."""
    names = {rank: file_name(rank, option) for rank, option in enumerate(found.options, 1)}
    files = {
        names[rank]: _comments(rank, option, found, command) + _yaml(option, directory)
        for rank, option in enumerate(found.options, 1)
    }
    write_files(files, directory, SUGGESTED)
    return {rank: directory / name for rank, name in names.items()}


def file_name(rank: int, option: Option) -> str:
    name = option.candidate.name
    local = Path(name).is_absolute()
    slug = re.sub(r"[^a-z0-9]+", "-", (Path(name).name if local else name).lower()).strip("-")
    method = option.candidate.method.replace("_", "-")
    tail = "" if slug == method else f"-{slug}"
    return f"{rank:02d}-{option.engine}-{method}{tail}.yaml"


def _yaml(option: Option, directory: Path) -> str:
    profile = option.plan.profile
    dumped: dict[str, Any] = profile.model_dump(mode="json", exclude_defaults=True)
    # Always spelled out, defaults or not: they are what the option's figures were computed for.
    dumped.setdefault("hardware", {}).update(
        gpu=profile.hardware.gpu, tensor_parallel_size=profile.hardware.tensor_parallel_size
    )
    dumped.setdefault("serving", {}).update(
        max_model_len=profile.serving.max_model_len,
        max_concurrency=profile.serving.max_concurrency,
    )
    dumped["target"]["model"] = _as_written(profile.target.model, directory)
    if profile.proposer.model is not None:
        dumped["proposer"]["model"] = _as_written(profile.proposer.model, directory)
    data = {key: dumped[key] for key in _ORDER if key in dumped}
    data |= {key: value for key, value in dumped.items() if key not in data}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _as_written(model: str, directory: Path) -> str:
    path = Path(model)
    if path.is_absolute() and path.is_dir():
        return os.path.relpath(path, directory.resolve())
    return model


def _comments(rank: int, option: Option, found: Suggestions, command: str) -> str:
    candidate, memory = option.candidate, option.plan.memory
    assert memory is not None
    k = option.num_speculative_tokens
    profile = option.plan.profile
    lines = [
        f"Written by `{command}`: option {rank} of {len(found.options)} (ranked MTP, heads, "
        "drafts, n-gram). `specdeploy validate` this file before deploying it.",
        f"Proposer: {METHOD_NAMES[candidate.method]} {candidate.name} ({candidate.origin})"
        + (f", trained for {candidate.verifier}" if candidate.verifier else "")
        + ".",
        *[f"Catalog source: {source}" for source in candidate.sources[:2]],
        f"Engines supporting this method for this target: {describe_support(option.support)} "
        "(orchestrator/engines/capabilities.yaml).",
        f"Memory per GPU ({profile.hardware.gpu} x{profile.hardware.tensor_parallel_size}, "
        f"max_model_len {profile.serving.max_model_len}): draft weights "
        f"{memory.draft_weights_gib:.2f} GiB, draft KV {memory.draft_kv_bytes_per_token:,} of "
        f"{memory.kv_bytes_per_token:,} bytes per token; {memory.max_concurrency} sequences fit "
        f"with speculation, {memory.baseline_max_concurrency} without (`specdeploy plan`).",
    ]
    accepts = option.acceptance
    if accepts is not None:
        lines.append(
            f"Expected acceptance: {accepts.curve.mean_length(k):.2f} tokens per step at k={k}; "
            f"{accepts.label}."
        )
        lines += [f"Acceptance source: {source}" for source in accepts.sources[:3]]
    estimate = option.estimate
    gains = speedups(option)
    if isinstance(estimate, NoEstimate) or gains is None:
        reason = estimate.reason if isinstance(estimate, NoEstimate) else "none"
        lines.append(f"Speedup: not estimated ({reason}); num_speculative_tokens is the default.")
    else:
        lines.append(
            f"Predicted speedup: {gains[0]:.2f}x at concurrency 1, {gains[1]:.2f}x at "
            f"{profile.serving.max_concurrency} ({LABEL}). {estimate.reason}."
        )
        lines += [
            f"Note: {d.rule} at concurrency {d.concurrency}: {d.why}."
            for d in estimate.disagreements
        ]
    lines += [f"Note: {note}." for note in option.notes]
    lines.append(
        "deploy.baseline renders the same target without speculation: compare both arms with "
        "`specdeploy bench`. Pin target.revision and proposer.revision to commits before "
        "deploying (pairing.revision-pinned)."
    )
    wrapped = [
        piece
        for line in lines
        for piece in textwrap.wrap(
            line,
            _WIDTH - 2,
            subsequent_indent="  ",
            break_on_hyphens=False,
            break_long_words=False,  # URLs stay whole, to be copied
        )
    ]
    return "".join(f"# {piece}\n" for piece in wrapped)
