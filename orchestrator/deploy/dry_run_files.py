"""Dry-run deploy target: write the engine launch, engine config files and manifests to a directory.

Everything is rendered in memory first and written only when complete, so a failing render
writes nothing. The output is deterministic (sorted keys, no timestamps).

`render --out DIR` replaces DIR whole: the files are written into a new sibling directory, which
is then swapped in, so nothing from an earlier render survives (a stale baseline/ would otherwise
come back with `kubectl apply -f DIR/k8s`) and a failed write leaves the previous render intact.
Only an empty directory, or one an earlier render wrote (it holds `MARKER`), is replaced; a
symbolic link is never followed, and files are created with O_EXCL | O_NOFOLLOW in the new
directory, so nothing is written outside it. The writer is `orchestrator.output_dirs`, shared with
`suggest --write`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from orchestrator import output_dirs
from orchestrator.emitters.base import emitter_for
from orchestrator.engines.base import EngineLaunch
from orchestrator.output_dirs import OwnedDirectory
from orchestrator.plan.types import DeploymentPlan

#: The file that marks a directory as written by `specdeploy render` (and so replaceable).
MARKER: Final = ".specdeploy-render"
RENDER: Final = OwnedDirectory(
    command="render",
    option="--out",
    marker=MARKER,
    marker_text="Written by `specdeploy render`. `render --out` replaces this directory whole;\n"
    "files added here are deleted by the next render.\n",
    output="the render",
    why_write="render writes launch.json, engine config files and manifests there",
    fix="pass --out (or --helm-values) a location you can write to, on a filesystem "
    "with free space",
)


def render_files(
    plan: DeploymentPlan,
    *,
    platform: str = "kubernetes",
    options: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Relative path -> content for everything `render` writes (docs/cli.md): the launches,
    then the platform's objects."""
    files = _launch_files(plan.launch, "")
    baseline = plan.baseline_launch
    if baseline is not None:
        files.update(_launch_files(baseline, "baseline/"))
    files.update(emitter_for(platform, options).files(plan))
    return files


def write_files(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Replace `out_dir` with exactly `files` (and `MARKER`); returns the paths written, in
    order. Raises `OutputError` (exit 1) when `out_dir` may not be replaced or a write fails."""
    return output_dirs.write_files(files, out_dir, RENDER)


def write_file(path: Path, content: str) -> Path:
    """Write one file (`--helm-values`) by creating a sibling and renaming it over `path`: a
    symbolic link at `path` is replaced, never written through. Raises `OutputError` (exit 1)."""
    return output_dirs.write_file(path, content, RENDER)


def _launch_files(launch: EngineLaunch, prefix: str) -> dict[str, str]:
    files = {f"{prefix}launch.json": json.dumps(launch.as_json(), indent=2, sort_keys=True) + "\n"}
    for name, content in launch.config_files.items():
        files[f"{prefix}{name}"] = content
    return files
